"""Hostile checks of the carried memories (memories_top, commits 7030f10/a01041b)."""

from __future__ import annotations

import uuid

import grpc
import pytest
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.gateway.v1 import gateway_pb2_grpc
from recallatron.memory.v1 import memory_pb2 as m
from recallatron.store.v1 import store_pb2 as s
from recallatron.store.v1 import store_pb2_grpc

from embed_service.models import Reranker
from embed_service.server import EmbedService
from gateway.recall import RecallConfig
from servicekit import clients
from servicekit.limits import MAX_TOP_K
from servicekit.settings import Settings

CONV = m.PURPOSE_CONVERSATION


def test_a_rerank_top_n_the_settings_allow_above_max_top_k_still_recalls(stack, tiny_cross_encoder, tmp_path):
    """RECALLATRON_RERANK_TOP_N may be 1..256 (MAX_EMBED_BATCH), but the store refuses memories_top
    above 200 (MAX_TOP_K): with the re-ranker up, the gateway asks for max(top_k, rerank_top_n) and
    every recall that may re-rank fails. Before 7030f10 such a setting recalled normally."""
    assert Settings(rerank_top_n=256).rerank_top_n == 256  # the setting is accepted
    reranker = Reranker(tiny_cross_encoder)
    assert reranker.available, reranker.error
    embed = EmbedService("127.0.0.1:0", "", encoder=stack.encoder, reranker=reranker)
    gw = stack.extra_gateway(embed.port, tmp_path, RecallConfig(rerank_top_n=256))
    ch = clients.channel(f"127.0.0.1:{gw.port}")
    try:
        ws = stack.workspace("rerank 256")
        alice = stack.member(ws)
        for i in range(8):
            alice.remember(f"Meeting note {i}: the team discussed the launch plan and budget item {i}.")
        stack.wait_backlog_empty()
        stub = gateway_pb2_grpc.MemoryServiceStub(ch)
        resp = stub.Recall(g.RecallRequest(query="launch plan budget", purpose=CONV, top_k=8), metadata=alice.md())
        assert resp.reranked and len(resp.items) == 8
    finally:
        ch.close()
        gw.stop()
        embed.stop()


def _supersede(member, memory_id, revision, body, **kw):
    req = g.SupersedeRequest(id=memory_id, expected_revision=revision, kind=m.KIND_FACT, title="new", body=body, **kw)
    return member.stack.memory.Supersede(req, metadata=member.md()).memory


def _derive(member, sources, body, **kw):
    req = g.DeriveRequest(source_ids=sources, kind=m.KIND_SUMMARY, title="derived", body=body, **kw)
    return member.stack.memory.Derive(req, metadata=member.md()).memory


@pytest.fixture(scope="module")
def lighthouse(stack):
    ws = stack.workspace("hostile carried memories")
    alice, bob = stack.member(ws), stack.member(ws)
    base = alice.remember(
        "The lighthouse keeper logs the lamp hours nightly.", entities=[m.EntityMention(name="Lighthouse")]
    )
    ent = next(link.target_entity_id for link in base.links if link.type == m.LINK_TYPE_ABOUT)
    old = alice.remember("The lighthouse lamp uses a brass lens.", entities=[m.EntityMention(entity_id=ent)])
    # A successor only alice may read: bob must never see its id.
    new = _supersede(alice, old.id, old.revision, "The lighthouse lamp uses a glass lens.", audience=m.AUDIENCE_MEMBER)
    private = alice.remember("The lighthouse spare key is under the mat.", audience=m.AUDIENCE_MEMBER)
    shared_src = alice.remember("The lighthouse stair has 120 steps.")
    der = _derive(alice, [shared_src.id], "Summary: the lighthouse stair is long.")
    der_private = _derive(alice, [shared_src.id, private.id], "Summary: the lighthouse key and stair.")
    for i in range(30):
        alice.remember(f"Harbour filler {i}: the {('gull', 'ferry', 'bell')[i % 3]} note was written.")
    stack.wait_backlog_empty()
    return {
        "ws": ws,
        "alice": alice,
        "bob": bob,
        "ent": ent,
        "old": old,
        "new": new,
        "private": private,
        "der": der,
        "der_private": der_private,
    }


@pytest.mark.parametrize("who", ["alice", "bob"])
@pytest.mark.parametrize(
    "kw",
    [
        {"mode": m.RECALL_MODE_LEXICAL},
        {"mode": m.RECALL_MODE_DENSE},
        {"mode": m.RECALL_MODE_HYBRID},
        {"mode": m.RECALL_MODE_HYBRID, "skip_rerank": True, "top_k": 1},
        {"mode": m.RECALL_MODE_HYBRID, "top_k": MAX_TOP_K},
        {"mode": m.RECALL_MODE_LEXICAL, "include_superseded": True, "top_k": MAX_TOP_K},
        {"mode": m.RECALL_MODE_HYBRID, "entity_ids": "ENT", "top_k": MAX_TOP_K},
    ],
)
def test_every_recalled_memory_is_what_read_shows(lighthouse, who, kw):
    member = lighthouse[who]
    kw = dict(kw)
    if kw.get("entity_ids") == "ENT":
        kw["entity_ids"] = [lighthouse["ent"]]
    resp = member.recall("lighthouse lamp lens key stair", **kw)
    assert resp.items
    ids = [it.memory.id for it in resp.items]
    assert len(ids) == len(set(ids))
    for it in resp.items:
        assert it.memory == member.read(it.memory.id), it.memory.id
    if who == "bob":
        assert lighthouse["private"].id not in ids and lighthouse["new"].id not in ids
        assert lighthouse["der_private"].id not in ids
        for it in resp.items:
            assert it.memory.superseded_by_id != lighthouse["new"].id
            assert lighthouse["private"].id not in {link.target_memory_id for link in it.memory.links}


@pytest.fixture(scope="module")
def rerank_gateway(stack, tiny_cross_encoder, tmp_path_factory):
    reranker = Reranker(tiny_cross_encoder)
    embed = EmbedService("127.0.0.1:0", "", encoder=stack.encoder, reranker=reranker)
    gw = stack.extra_gateway(embed.port, tmp_path_factory.mktemp("gw"), RecallConfig())
    ch = clients.channel(f"127.0.0.1:{gw.port}")
    yield gateway_pb2_grpc.MemoryServiceStub(ch)
    ch.close()
    gw.stop()
    embed.stop()


@pytest.mark.parametrize("who", ["alice", "bob"])
@pytest.mark.parametrize("top_k", [1, 10, MAX_TOP_K])
def test_reranked_recall_answers_fully_and_as_read_shows(lighthouse, rerank_gateway, who, top_k):
    member = lighthouse[who]
    req = g.RecallRequest(query="lighthouse harbour note", purpose=CONV, top_k=top_k)
    resp = rerank_gateway.Recall(req, metadata=member.md())
    off = rerank_gateway.Recall(
        g.RecallRequest(query="lighthouse harbour note", purpose=CONV, top_k=top_k, skip_rerank=True),
        metadata=member.md(),
    )
    assert resp.reranked
    assert len(resp.items) == len(off.items) == min(top_k, off.counts.fused)
    assert {it.memory.id for it in resp.items} <= {it.memory.id for it in off.items} or top_k < off.counts.fused
    for it in resp.items:
        assert it.memory == member.read(it.memory.id)
    assert all(it.rerank_score != 0 for it in resp.items[:50])


def _age(stack, ws, memory_id, days):
    with stack.db(ws) as conn:
        conn.execute(
            "UPDATE memory SET updated_at = now() - make_interval(secs => %s) WHERE id = %s",
            (days * 86400, uuid.UUID(memory_id)),
        )


def test_rows_the_expiry_gate_hides_are_never_carried_or_answered(stack):
    ws = stack.workspace("hostile expiry carried")
    alice = stack.member(ws)
    kept = [alice.remember(f"The beacon rota entry {i} names the night watch.") for i in range(6)]
    gone = [alice.remember(f"The beacon rota entry old {i} names the night watch.") for i in range(6)]
    for i in range(30):
        alice.remember(f"Filler {i}: the {('gull', 'ferry', 'bell')[i % 3]} note was written.")
    stack.wait_backlog_empty()
    for mem in gone:
        _age(stack, ws, mem.id, 40)
    stack.admin.UpdateWorkspaceSettings(
        g.UpdateWorkspaceSettingsRequest(workspace_id=ws, expiry_days=30), metadata=stack.op()
    )
    hidden = {mem.id for mem in gone}
    for kw in (
        {"mode": m.RECALL_MODE_LEXICAL},
        {"mode": m.RECALL_MODE_DENSE},
        {"mode": m.RECALL_MODE_HYBRID},
        {"mode": m.RECALL_MODE_LEXICAL, "include_superseded": True},
    ):
        for top_k in (1, 5, MAX_TOP_K):
            ids = {it.memory.id for it in alice.recall("beacon rota night watch", top_k=top_k, **kw).items}
            assert not ids & hidden, kw
            if top_k == MAX_TOP_K:
                assert {mem.id for mem in kept} <= ids or kw["mode"] == m.RECALL_MODE_DENSE
    store = store_pb2_grpc.StoreServiceStub(clients.channel(f"127.0.0.1:{stack.store.port}"))
    caller = store.Authenticate(s.AuthenticateRequest(token=alice.token)).caller
    for limit in (1, 3, 100):
        for top in (0, 1, 2, MAX_TOP_K):
            rows = store.LexicalCandidates(
                s.LexicalCandidatesRequest(
                    caller=caller, purpose=CONV, query="beacon rota", limit=limit, memories_top=top, expiry_days=30
                )
            ).candidates
            assert not {c.memory_id for c in rows} & hidden
            assert sum(c.HasField("memory") for c in rows) == min(top, len(rows))
            assert len(rows) == min(limit, len(kept))


QUERIES = [
    "lighthouse",
    "lamp lens",
    "brass lens",
    "glass lens",
    "spare key mat",
    "stair steps",
    "summary lighthouse",
    "harbour filler gull",
    "ferry note written",
    "bell",
    "keeper logs lamp hours nightly",
    "what is under the mat",
]


@pytest.mark.slow
def test_recall_answers_as_it_did_with_getmemories(lighthouse, monkeypatch):
    """Differential: the same recall, answered from the carried memories and from GetMemories alone
    (the behaviour before 7030f10), gives the same response."""
    from gateway import recall as recall_mod

    original = recall_mod.Recaller._fetch
    answers = {}
    for variant in ("carried", "fetched"):
        if variant == "fetched":
            monkeypatch.setattr(
                recall_mod.Recaller,
                "_fetch",
                lambda self, caller, head, carried, known_at: original(self, caller, head, {}, known_at),
            )
        for who in ("alice", "bob"):
            for q in QUERIES:
                for kw in (
                    {"mode": m.RECALL_MODE_LEXICAL},
                    {"mode": m.RECALL_MODE_DENSE},
                    {"mode": m.RECALL_MODE_HYBRID},
                    {"mode": m.RECALL_MODE_LEXICAL, "include_superseded": True},
                    {"mode": m.RECALL_MODE_HYBRID, "entity_ids": [lighthouse["ent"]]},
                ):
                    for top_k in (1, 3, 50, MAX_TOP_K):
                        key = (who, q, str(kw), top_k)
                        answers.setdefault(key, []).append(lighthouse[who].recall(q, top_k=top_k, **kw))
    for key, (carried, fetched) in answers.items():
        assert carried == fetched, key


def test_forget_and_supersede_racing_recall(stack):
    """Alice forgets and supersedes (with successors only she may read) while bob recalls: bob never
    sees a private id, a tombstone or a memory forgotten before his recall began."""
    import threading
    import time

    ws = stack.workspace("hostile race")
    alice, bob = stack.member(ws), stack.member(ws)
    targets = [alice.remember(f"The signal tower rota slot {i} is held by the crew.") for i in range(40)]
    for i in range(20):
        alice.remember(f"Filler {i}: the {('gull', 'ferry', 'bell')[i % 3]} note was written.")
    stack.wait_backlog_empty()
    forgotten_at: dict[str, float] = {}
    private: set[str] = set()
    errors: list[BaseException] = []
    done = threading.Event()

    def writer():
        try:
            for i, mem in enumerate(targets):
                if i % 2:
                    new = _supersede(
                        alice,
                        mem.id,
                        mem.revision,
                        f"The signal tower rota slot {i} moved.",
                        audience=m.AUDIENCE_MEMBER,
                    )
                    private.add(new.id)
                else:
                    stack.memory.Forget(g.ForgetRequest(id=mem.id, reason="race"), metadata=alice.md())
                    forgotten_at[mem.id] = time.monotonic()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            done.set()

    t = threading.Thread(target=writer)
    t.start()
    n = 0
    while not done.is_set() or n < 5:
        started = time.monotonic()
        gone_before = {i for i, at in forgotten_at.items() if at < started}
        for kw in ({"mode": m.RECALL_MODE_HYBRID}, {"mode": m.RECALL_MODE_LEXICAL, "include_superseded": True}):
            resp = bob.recall("signal tower rota slot crew", top_k=MAX_TOP_K, **kw)
            for it in resp.items:
                assert it.memory.id not in gone_before, it.memory.id
                assert not it.memory.forgotten and it.memory.body
                assert it.memory.id not in private and it.memory.superseded_by_id not in private
        n += 1
    t.join()
    assert not errors, errors


@pytest.mark.parametrize(
    "kw",
    [
        {"limit": 0},
        {"limit": 1, "memories_top": MAX_TOP_K},
        {"limit": 1000, "memories_top": MAX_TOP_K},
        {"limit": 1001, "memories_top": 1},
        {"query": ""},
        {"query": "\x00\x00"},
        {"query": "!!! ??? ***"},
        {"query": "a" * 32768},
        {"entity_ids": ["not-a-uuid"]},
        {"entity_ids": [str(uuid.uuid4())]},
        {"entity_ids": [""]},
        {"include_superseded": True, "memories_top": MAX_TOP_K},
        {"expiry_days": -1},
        {"expiry_days": 100000},
        {"expiry_days": 1, "memories_top": MAX_TOP_K, "include_superseded": True},
        {"purpose": 999},
        {"purpose": 0},
    ],
)
def test_bad_lexical_inputs_never_internal(stack, lighthouse, kw):
    store = store_pb2_grpc.StoreServiceStub(clients.channel(f"127.0.0.1:{stack.store.port}"))
    caller = store.Authenticate(s.AuthenticateRequest(token=lighthouse["bob"].token)).caller
    req = {"caller": caller, "purpose": CONV, "query": "lighthouse lamp", "limit": 100, "memories_top": 5, **kw}
    try:
        rows = store.LexicalCandidates(s.LexicalCandidatesRequest(**req), timeout=30).candidates
    except grpc.RpcError as err:
        assert err.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.PERMISSION_DENIED), (
            err.code(),
            err.details(),
        )
        return
    carried = [c for c in rows if c.HasField("memory")]
    assert len(carried) == min(req["memories_top"], sum(c.chain_readable for c in rows))
    for c in carried:
        assert c.memory.id == c.memory_id and c.chain_readable
        assert c.memory.id not in (lighthouse["private"].id, lighthouse["new"].id, lighthouse["der_private"].id)
        assert c.memory.superseded_by_id != lighthouse["new"].id


@pytest.mark.parametrize(
    "kw",
    [
        {"input_version": "stale"},
        {"floor": 0.0, "limit": 1000, "memories_top": MAX_TOP_K},
        {"floor": 1.0},
        {"floor": float("nan")},
        {"vector": [float("nan")] * 384},
        {"vector": [0.0] * 384},
        {"vector": [1.0] * 383},
        {"entity_ids": ["nope"]},
        {"include_superseded": True, "memories_top": MAX_TOP_K, "floor": 0.0},
    ],
)
def test_bad_dense_inputs_never_internal(stack, lighthouse, kw):
    from recallatron.embed.v1 import embed_pb2, embed_pb2_grpc

    store = store_pb2_grpc.StoreServiceStub(clients.channel(f"127.0.0.1:{stack.store.port}"))
    embed = embed_pb2_grpc.EmbedServiceStub(clients.channel(stack.embed_bind))
    emb = embed.EmbedQueries(embed_pb2.EmbedQueriesRequest(queries=["lighthouse lamp"]))
    caller = store.Authenticate(s.AuthenticateRequest(token=lighthouse["bob"].token)).caller
    req = {
        "caller": caller,
        "purpose": CONV,
        "vector": list(emb.vectors[0].values),
        "input_version": emb.input_version,
        "floor": 0.1,
        "limit": 100,
        "memories_top": 5,
        **kw,
    }
    if "include_superseded" in req and "include_superseded" not in s.DenseCandidatesRequest.DESCRIPTOR.fields_by_name:
        del req["include_superseded"]
    try:
        resp = store.DenseCandidates(s.DenseCandidatesRequest(**req), timeout=30)
    except grpc.RpcError as err:
        assert err.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.PERMISSION_DENIED), (
            err.code(),
            err.details(),
        )
        return
    rows = resp.candidates
    carried = [c for c in rows if c.HasField("memory")]
    assert len(carried) == min(req["memories_top"], sum(c.chain_readable for c in rows))
    for c in carried:
        assert c.memory.id not in (lighthouse["private"].id, lighthouse["new"].id, lighthouse["der_private"].id)


WORDS = ["winch", "capstan", "bollard", "gantry", "hawser", "sextant", "tiller", "rudder", "anchor", "compass"]


def test_rerank_top_n_256_over_more_than_200_passed_rows(stack, tiny_cross_encoder, tmp_path):
    """With rerank_top_n 256 and 230 passed rows, the re-ranker scores all 230: the arms carry at
    most 200 each, the rest comes from GetMemories, and the answer is as Read shows it."""
    reranker = Reranker(tiny_cross_encoder)
    embed = EmbedService("127.0.0.1:0", "", encoder=stack.encoder, reranker=reranker)
    gw = stack.extra_gateway(embed.port, tmp_path, RecallConfig(rerank_top_n=256, candidate_limit=300))
    ch = clients.channel(f"127.0.0.1:{gw.port}")
    try:
        ws = stack.workspace("rerank 256 deep")
        alice = stack.member(ws)
        batch = [
            g.RememberRequest(
                purpose=CONV,
                kind=m.KIND_NOTE,
                body=f"Entry {i}: the {WORDS[i % len(WORDS)]} was serviced.",
                audience=m.AUDIENCE_WORKSPACE,
            )
            for i in range(230)
        ]
        stack.memory.RememberBatch(g.RememberBatchRequest(requests=batch), metadata=alice.md())
        for i in range(60):
            alice.remember(f"Other note {i}: the {('gull', 'ferry', 'bell')[i % 3]} was seen.")
        stack.wait_backlog_empty()
        stub = gateway_pb2_grpc.MemoryServiceStub(ch)
        resp = stub.Recall(
            g.RecallRequest(query=" ".join(WORDS), purpose=CONV, top_k=MAX_TOP_K, mode=m.RECALL_MODE_LEXICAL),
            metadata=alice.md(),
        )
        assert resp.reranked and len(resp.items) == MAX_TOP_K and resp.counts.fused >= 230
        for it in resp.items:
            assert it.rerank_score != 0 and it.memory == alice.read(it.memory.id)
    finally:
        ch.close()
        gw.stop()
        embed.stop()


def test_a_source_of_an_ungranted_purpose_keeps_the_derivation_uncarried(stack):
    """Carol holds only the conversation purpose: a conversation memory derived (in SQL) from a
    tasks memory is a row for her but its chain is not readable: never carried, never answered, and
    the memory carried for alice shows the link."""
    ws = stack.workspace("hostile purposes")
    alice = stack.member(ws)
    carol = stack.member(ws, purposes=[CONV])
    task = alice.remember("The mooring fee invoice is due Friday.", purpose=m.PURPOSE_TASKS)
    conv = alice.remember("The mooring fee was discussed at length.")
    for i in range(20):
        alice.remember(f"Filler {i}: the {('gull', 'ferry', 'bell')[i % 3]} note was written.")
    with stack.db(ws) as conn:
        conn.execute(
            "INSERT INTO memory_link (memory_id, link_type, target_memory_id) VALUES (%s, 'derived_from', %s)",
            (conv.id, task.id),
        )
    stack.wait_backlog_empty()
    store = store_pb2_grpc.StoreServiceStub(clients.channel(f"127.0.0.1:{stack.store.port}"))
    for who, readable in ((carol, False), (alice, True)):
        caller = store.Authenticate(s.AuthenticateRequest(token=who.token)).caller
        rows = store.LexicalCandidates(
            s.LexicalCandidatesRequest(
                caller=caller, purpose=CONV, query="mooring fee", limit=100, memories_top=MAX_TOP_K
            )
        ).candidates
        (row,) = [c for c in rows if c.memory_id == conv.id]
        assert row.chain_readable == readable and row.HasField("memory") == readable
        if readable:
            assert [link.target_memory_id for link in row.memory.links] == [task.id]
        for mode in (m.RECALL_MODE_LEXICAL, m.RECALL_MODE_DENSE, m.RECALL_MODE_HYBRID):
            ids = [it.memory.id for it in who.recall("mooring fee", mode=mode, top_k=MAX_TOP_K).items]
            assert (conv.id in ids) == readable, mode
