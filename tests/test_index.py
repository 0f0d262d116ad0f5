"""The vector index: input-version stamps, rebuilds, the workspace floor, and filtered dense search
returning the full requested count when other members' rows crowd the neighbourhood."""

import time
import uuid

import grpc
import numpy as np
import psycopg
import pytest
from conftest import code_of
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

from servicekit.embedding_input import INPUT_VERSION
from store_service.control.plane import ControlPlane
from store_service.search import candidates


def test_stale_stamp_is_never_searched_and_is_requeued(stack):
    ws = stack.workspace("stamps")
    alice = stack.member(ws)
    mems = [alice.remember(f"Weather note {i}: heavy rain expected in the valley.") for i in range(3)]
    stack.wait_backlog_empty()
    with stack.db(ws) as conn:
        caller = m.Caller(workspace_id=ws, member_id=alice.id, granted_purposes=[m.PURPOSE_CONVERSATION])
        q = stack.encoder.encode(["rain in the valley"])[0]
        rows, current = candidates.dense(conn, caller, "conversation", q, INPUT_VERSION, 0.3, 10)
        assert current and len(rows) == 3
        # A query from another embedding space finds nothing and says its stamp is not current.
        rows, current = candidates.dense(conn, caller, "conversation", q, "other-model|v9", 0.3, 10)
        assert rows == [] and not current
        conn.execute("UPDATE memory_embedding SET input_version = 'old-model|v0' WHERE memory_id = %s", (mems[0].id,))
        # Simulate an upgrade: the worker last saw another stamp, so its next cycle notices the change.
        stack.store.worker._version = "old-model|v0"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            stamps = {r[0] for r in conn.execute("SELECT input_version FROM memory_embedding")}
            if stamps == {INPUT_VERSION}:
                break
            time.sleep(0.2)
        assert stamps == {INPUT_VERSION}  # the worker re-queued and rebuilt the stale vector on its own


# Live memories without a vector of the current stamp and revision, and all live memories.
MISSING = f"""SELECT count(*) FROM memory m WHERE m.forgotten_at IS NULL AND m.retired_at IS NULL
               AND NOT EXISTS (SELECT 1 FROM memory_embedding e WHERE e.memory_id = m.id
                                  AND e.input_version = '{INPUT_VERSION}' AND e.memory_revision = m.revision)"""
LIVE = "SELECT count(*) FROM memory m WHERE m.forgotten_at IS NULL AND m.retired_at IS NULL"


def count_everywhere(stack, query: str) -> dict[str, int]:
    """``query``'s count in every workspace database of the session, by workspace id."""
    out = {}
    for ws in ControlPlane(stack.store.dbs).workspaces():
        with stack.db(str(ws.id)) as conn:
            out[str(ws.id)] = conn.execute(query).fetchone()[0]
    return out


@pytest.mark.slow
def test_rebuild_embeddings_queues_missing_and_all(stack):
    ws = stack.workspace("rebuild")
    alice = stack.member(ws)
    mems = [alice.remember(f"Inventory item {i}: {n} boxes of nails.") for i, n in enumerate((3, 7, 12))]
    stack.store.worker._sweep(INPUT_VERSION)  # re-queue now any vector another test left at another stamp,
    stack.wait_backlog_empty()  # so the worker's own sweep cannot queue one between the count and the call
    with stack.db(ws) as conn:
        conn.execute("DELETE FROM memory_embedding WHERE memory_id = %s", (mems[1].id,))
        # RebuildEmbeddings covers every workspace: it queues exactly what is missing across them all
        # (here the vector just deleted, plus any another test left missing), then every live memory.
        missing = count_everywhere(stack, MISSING)
        assert missing[ws] == 1
        resp = stack.admin.RebuildEmbeddings(g.RebuildEmbeddingsRequest(), metadata=stack.op())
        assert resp.queued == sum(missing.values()) and resp.input_version == INPUT_VERSION
        stack.wait_backlog_empty()
        assert conn.execute("SELECT count(*) FROM memory_embedding").fetchone()[0] == 3
        before = {r[0]: r[1] for r in conn.execute("SELECT memory_id, created_at FROM memory_embedding")}
        live = count_everywhere(stack, LIVE)
        assert live[ws] == 3
        resp = stack.admin.RebuildEmbeddings(g.RebuildEmbeddingsRequest(all=True), metadata=stack.op())
        assert resp.queued == sum(live.values())
        stack.wait_backlog_empty()
        after = {r[0]: r[1] for r in conn.execute("SELECT memory_id, created_at FROM memory_embedding")}
        assert set(after) == set(before) and all(after[k] > before[k] for k in before)
    assert alice.recall("boxes of nails", mode=m.RECALL_MODE_DENSE).dense_available


def test_workspace_floor_setting(stack):
    ws = stack.workspace("floor")
    alice = stack.member(ws)
    alice.remember("The quarterly report is due on the fifth.")
    alice.remember("Penguins live in the southern hemisphere.")
    stack.wait_backlog_empty()
    op = stack.op()
    low = stack.admin.UpdateWorkspaceSettings(
        g.UpdateWorkspaceSettingsRequest(workspace_id=ws, dense_floor=0.0), metadata=op
    )
    assert low.dense_floor == 0.0 and low.default_mode == m.RECALL_MODE_HYBRID
    assert len(alice.recall("when is the report due", mode=m.RECALL_MODE_DENSE).items) == 2
    stack.admin.UpdateWorkspaceSettings(
        g.UpdateWorkspaceSettingsRequest(workspace_id=ws, dense_floor=0.99), metadata=op
    )
    assert alice.recall("when is the report due", mode=m.RECALL_MODE_DENSE).items == []
    resp = stack.admin.UpdateWorkspaceSettings(
        g.UpdateWorkspaceSettingsRequest(workspace_id=ws, default_mode=m.RECALL_MODE_LEXICAL), metadata=op
    )
    assert resp.dense_floor == pytest.approx(0.99) and alice.recall("report").mode == m.RECALL_MODE_LEXICAL
    for bad in (
        g.UpdateWorkspaceSettingsRequest(workspace_id=ws, dense_floor=1.5),
        g.UpdateWorkspaceSettingsRequest(workspace_id=ws, dense_floor=-0.1),
        g.UpdateWorkspaceSettingsRequest(workspace_id=ws, default_mode=9),
    ):
        assert code_of(stack.admin.UpdateWorkspaceSettings, bad, metadata=op) == grpc.StatusCode.INVALID_ARGUMENT
    assert (
        code_of(
            stack.admin.UpdateWorkspaceSettings,
            g.UpdateWorkspaceSettingsRequest(workspace_id=str(uuid.uuid4()), dense_floor=0.5),
            metadata=op,
        )
        == grpc.StatusCode.NOT_FOUND
    )


def test_filtered_dense_search_returns_the_full_count(stack):
    """3,000 of Bob's private rows sit closer to the query than Alice's 40 readable rows; Alice still
    gets the 25 she asks for (iterative index scan or exact scan, never a short page). At this size
    the planner may pick the exact filtered scan; what must hold either way is the full count."""
    ws = stack.workspace("crowded")
    alice, bob = stack.member(ws), stack.member(ws)
    rng = np.random.default_rng(7)
    q = stack.encoder.encode(["where did we park the delivery van"])[0]

    def near(scale):
        v = q + rng.normal(0, scale, q.shape).astype(np.float32)
        return v / np.linalg.norm(v)

    with stack.db(ws) as conn, conn.cursor() as cur:
        rows = [(uuid.uuid4(), bob.id, near(0.02)) for _ in range(3000)]
        rows += [(uuid.uuid4(), None, near(0.05)) for _ in range(40)]
        cur.executemany(
            "INSERT INTO memory (id, kind, body, audience_member_id, purpose, origin, created_by) "
            "VALUES (%s, 'note', 'synthetic row', %s, 'conversation', 'told', %s)",
            [(i, aud, bob.id if aud else alice.id) for i, aud, _ in rows],
        )
        cur.executemany(
            "INSERT INTO memory_embedding (memory_id, memory_revision, model_id, input_version, embedding) "
            "VALUES (%s, 1, 'synthetic', %s, %s)",
            [(i, INPUT_VERSION, v) for i, _, v in rows],
        )
        conn.execute("ANALYZE memory; ANALYZE memory_embedding")
    resp = alice.recall("where did we park the delivery van", mode=m.RECALL_MODE_DENSE, top_k=25)
    assert resp.dense_available and len(resp.items) == 25
    assert all(it.memory.audience == m.AUDIENCE_WORKSPACE for it in resp.items)
    assert len(bob.recall("where did we park the delivery van", mode=m.RECALL_MODE_DENSE, top_k=25).items) == 25


@pytest.mark.slow
def test_many_workspaces_stay_within_the_connection_budget(stack):
    """Forty busy workspaces: the store's pools stay within 16 x 4 workspace connections."""
    members = [stack.member(stack.workspace(f"budget {i}")) for i in range(40)]
    for i, member in enumerate(members):
        member.remember(f"Budget check note {i}.")
        assert member.recall(f"note {i}", mode=m.RECALL_MODE_LEXICAL).items
    with psycopg.connect(stack.store.dbs.control_conninfo, autocommit=True) as conn:
        used = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname LIKE 'recallatron_ws_%'").fetchone()[0]
    assert len(stack.store.dbs._pools) <= 16  # least recently used pools were closed
    assert used <= 16 * 4 + 8  # workspace pools, plus transient migration and worker connections
    stack.wait_backlog_empty()
