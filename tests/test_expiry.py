"""The expiry gate (issue 9, item 4) end to end through the gateway, against real PostgreSQL and the
real all-MiniLM-L6-v2: the setting, what it hides (Recall in every mode and history recall, the
context bundle) and what still shows (Read, ListMemories), ListExpiringMemories, KeepMemory, the
keyword arm's deeper reading, bad input, and the commands.

Time is never waited for: a memory is made old by setting its ``updated_at`` in the database."""

from __future__ import annotations

import datetime
import json
import re
import shlex
import subprocess
import uuid

import grpc
import pytest
from cli_runner import at_gateway
from conftest import code_of
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m
from recallatron.store.v1 import store_pb2 as s

from servicekit.errors import error_info
from store_service.access import expiry
from store_service.search import candidates

INVALID = grpc.StatusCode.INVALID_ARGUMENT
CONV = m.PURPOSE_CONVERSATION


def settings(stack, ws: str, **kw) -> g.UpdateWorkspaceSettingsResponse:
    return stack.admin.UpdateWorkspaceSettings(
        g.UpdateWorkspaceSettingsRequest(workspace_id=ws, **kw), metadata=stack.op()
    )


def age(stack, ws: str, memory_id: str, days: float) -> None:
    """Moves a memory's last update ``days`` days back from now (the database's clock)."""
    with stack.db(ws) as conn:
        conn.execute(
            "UPDATE memory SET updated_at = now() - make_interval(secs => %s) WHERE id = %s",
            (days * 86400, uuid.UUID(memory_id)),
        )


def expiring(member, **kw) -> g.ListExpiringMemoriesResponse:
    return member.stack.memory.ListExpiringMemories(g.ListExpiringMemoriesRequest(**kw), metadata=member.md())


def all_expiring(member, **kw) -> tuple[list[str], list[int]]:
    out, totals, token = [], [], ""
    while True:
        resp = expiring(member, page_token=token, **kw)
        out += [x.id for x in resp.memories]
        totals.append(resp.total_size)
        token = resp.next_page_token
        if not token:
            return out, totals


def keep(member, memory_id: str, revision: int) -> m.Memory:
    return member.stack.memory.KeepMemory(
        g.KeepMemoryRequest(id=memory_id, expected_revision=revision), metadata=member.md()
    ).memory


def recalled(member, query: str, **kw) -> list[str]:
    return [it.memory.id for it in member.recall(query, top_k=50, **kw).items]


def test_store_and_gateway_messages_share_fields():
    """The gateway passes requests on by field name and responses through their wire form."""
    for name in ("ListExpiringMemoriesResponse", "KeepMemoryResponse", "RemoveMemberResponse"):
        gw, st = g.DESCRIPTOR.message_types_by_name[name], s.DESCRIPTOR.message_types_by_name[name]
        assert [(f.name, f.number, f.type) for f in gw.fields] == [(f.name, f.number, f.type) for f in st.fields]
    gw_req = {f.name: f.type for f in g.ListExpiringMemoriesRequest.DESCRIPTOR.fields}
    st_req = {f.name: f.type for f in s.ListExpiringMemoriesRequest.DESCRIPTOR.fields}
    assert gw_req.items() <= st_req.items() and set(st_req) - set(gw_req) == {"caller", "expiry_days"}
    gw_set = {f.name: f.type for f in g.UpdateWorkspaceSettingsRequest.DESCRIPTOR.fields}
    assert gw_set == {f.name: f.type for f in s.UpdateWorkspaceSettingsRequest.DESCRIPTOR.fields}


def test_the_setting_is_off_by_default_and_shown(stack):
    ws = stack.workspace("expiry setting")
    assert settings(stack, ws).expiry_days == 0  # nothing sent: nothing changes, and it is off
    on = settings(stack, ws, expiry_days=30)
    assert on.expiry_days == 30 and on.dense_floor == pytest.approx(0.30) and on.context_bundle is False
    assert settings(stack, ws, dense_floor=0.4).expiry_days == 30  # other changes keep it
    assert settings(stack, ws, expiry_days=expiry.MAX_EXPIRY_DAYS).expiry_days == 3650
    assert settings(stack, ws, expiry_days=1).expiry_days == 1
    off = settings(stack, ws, expiry_off=True)
    assert off.expiry_days == 0 and off.dense_floor == pytest.approx(0.4)
    # Authenticate carries it to the gateway on every call (what recall and the list use).
    alice = stack.member(ws)
    settings(stack, ws, expiry_days=12)
    assert expiring(alice).expiry_days == 12


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"expiry_days": 0}, "expiry_days"),
        ({"expiry_days": -1}, "expiry_days"),
        ({"expiry_days": -(2**31)}, "expiry_days"),
        ({"expiry_days": 3651}, "expiry_days"),
        ({"expiry_days": 2**31 - 1}, "expiry_days"),
        ({"expiry_off": False}, "expiry_off"),
    ],
)
def test_bad_settings_are_invalid_argument_and_change_nothing(stack, fields, field):
    ws = stack.workspace("expiry bad setting")
    settings(stack, ws, expiry_days=7)
    with pytest.raises(grpc.RpcError) as err:
        settings(stack, ws, **fields)
    assert err.value.code() == INVALID
    assert error_info(err.value).metadata["field"] == field
    assert settings(stack, ws).expiry_days == 7


def test_settings_of_an_unknown_workspace(stack):
    for ws in (str(uuid.uuid4()), "not-a-uuid"):
        with pytest.raises(grpc.RpcError) as err:
            settings(stack, ws, expiry_days=30)
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
    member = stack.member(stack.workspace("expiry op only"))
    assert (
        code_of(
            stack.admin.UpdateWorkspaceSettings,
            g.UpdateWorkspaceSettingsRequest(workspace_id=str(uuid.uuid4()), expiry_days=3),
            metadata=member.md(),
        )
        == grpc.StatusCode.UNAUTHENTICATED
    )


@pytest.fixture(scope="module")
def world(stack):
    """A workspace with the gate on (30 days): old and fresh memories of alice (workspace and
    member-only), bob's member-only old one, a superseded old one and an entity, all embedded."""
    ws = stack.workspace("expiry world")
    alice, bob = stack.member(ws), stack.member(ws)
    admin = stack.member(ws, role=m.ROLE_ADMIN)
    mem = {
        "old": alice.remember("The lighthouse keeper Ansgar polishes the brass lamp every evening.", title="Ansgar"),
        "fresh": alice.remember("The lighthouse keeper Ansgar repaints the tower every spring.", title="Ansgar"),
        "old_own": alice.remember(
            "Ansgar the lighthouse keeper keeps a logbook of passing ships.", audience=m.AUDIENCE_MEMBER
        ),
        "bob_old": bob.remember("Ansgar the lighthouse keeper owes Bob a fishing rod.", audience=m.AUDIENCE_MEMBER),
        "about": alice.remember(
            "Ansgar the lighthouse keeper was born on the island.", entities=[m.EntityMention(name="Ansgar")]
        ),
    }
    before = alice.remember("Ansgar the lighthouse keeper used a paraffin lamp at first.")
    mem["successor"] = stack.memory.Supersede(
        g.SupersedeRequest(id=before.id, expected_revision=1, body="Ansgar the lighthouse keeper switched to a bulb."),
        metadata=alice.md(),
    ).memory
    mem["superseded"] = before
    stack.wait_backlog_empty()
    for key, days in (("old", 40), ("old_own", 31), ("bob_old", 35), ("about", 45), ("superseded", 50)):
        age(stack, ws, mem[key].id, days)
    age(stack, ws, mem["fresh"].id, 29)
    settings(stack, ws, expiry_days=30)
    return ws, alice, bob, admin, mem


@pytest.mark.parametrize("mode", [m.RECALL_MODE_LEXICAL, m.RECALL_MODE_DENSE, m.RECALL_MODE_HYBRID])
def test_recall_hides_what_the_gate_hides_in_every_mode(world, mode):
    ws, alice, bob, _, mem = world
    got = recalled(alice, "lighthouse keeper Ansgar", mode=mode)
    assert mem["fresh"].id in got and mem["successor"].id in got
    for key in ("old", "old_own", "about", "superseded", "bob_old"):
        assert mem[key].id not in got, key
    resp = alice.recall("lighthouse keeper Ansgar", mode=mode, top_k=50)
    assert resp.counts.fused == len(resp.items) == len(got)
    assert bob.recall("lighthouse keeper Ansgar", mode=mode, top_k=50).items  # bob's fresh-enough view
    assert mem["bob_old"].id not in recalled(bob, "fishing rod", mode=mode)


def test_history_recall_and_entity_filters_hide_them_too(world):
    _, alice, _, _, mem = world
    # Two terms: the 15% rule (three or more) would keep only the rarest, "paraffin".
    history = recalled(alice, "paraffin bulb", include_superseded=True)
    assert history == [mem["successor"].id]
    assert recalled(alice, "paraffin", include_superseded=True) == []
    entity = next(link.target_entity_id for link in alice.read(mem["about"].id).links if link.target_entity_id)
    for mode in (m.RECALL_MODE_LEXICAL, m.RECALL_MODE_DENSE, m.RECALL_MODE_HYBRID):
        assert recalled(alice, "born on the island", mode=mode, entity_ids=[entity]) == []


def test_read_and_list_still_show_them(world):
    _, alice, _, _, mem = world
    for key in ("old", "old_own", "about"):
        assert alice.read(mem[key].id).body == mem[key].body
    listed = [x.id for x in alice.stack.memory.ListMemories(g.ListMemoriesRequest(), metadata=alice.md()).memories]
    assert {mem["old"].id, mem["old_own"].id, mem["about"].id, mem["fresh"].id} <= set(listed)


def test_the_list_holds_exactly_the_hidden_readable_ones_oldest_first(world):
    _, alice, bob, _, mem = world
    resp = expiring(alice)
    assert [x.id for x in resp.memories] == [mem["about"].id, mem["old"].id, mem["old_own"].id]
    assert resp.total_size == 3 and resp.expiry_days == 30 and not resp.next_page_token
    hidden_before = resp.hidden_before.ToDatetime(tzinfo=datetime.UTC)
    now = datetime.datetime.now(datetime.UTC)
    assert abs((now - datetime.timedelta(days=30) - hidden_before).total_seconds()) < 60
    assert all(x.updated_at.ToDatetime(tzinfo=datetime.UTC) <= hidden_before for x in resp.memories)
    assert resp.memories[0].links  # readable links, as ListMemories gives them
    # Bob sees his own hidden memory and alice's hidden workspace ones, never her member-only one.
    ids, totals = all_expiring(bob)
    assert ids == [mem["about"].id, mem["old"].id, mem["bob_old"].id] and totals == [3]
    assert [x.id for x in expiring(alice, superseded=m.SUPERSEDED_FILTER_SUPERSEDED).memories] == [mem["superseded"].id]
    both = [x.id for x in expiring(alice, superseded=m.SUPERSEDED_FILTER_ALL).memories]
    assert both == [mem["superseded"].id, mem["about"].id, mem["old"].id, mem["old_own"].id]


def test_pages(world):
    _, alice, _, _, mem = world
    ids, totals = all_expiring(alice, page_size=1)
    assert ids == [mem["about"].id, mem["old"].id, mem["old_own"].id] and totals == [3, 3, 3]
    first = expiring(alice, page_size=2)
    assert len(first.memories) == 2
    assert [x.id for x in expiring(alice, page_token=first.next_page_token).memories] == [mem["old_own"].id]


def test_the_list_is_empty_with_the_gate_off(stack):
    ws = stack.workspace("expiry list off")
    alice = stack.member(ws)
    old = alice.remember("A note from long ago about the pier.")
    age(stack, ws, old.id, 5000)
    resp = expiring(alice)
    assert not resp.memories and resp.total_size == 0 and resp.expiry_days == 0
    assert not resp.HasField("hidden_before")
    assert recalled(alice, "pier", mode=m.RECALL_MODE_LEXICAL) == [old.id]
    settings(stack, ws, expiry_days=3650)
    assert [x.id for x in expiring(alice).memories] == [old.id]
    assert recalled(alice, "pier", mode=m.RECALL_MODE_LEXICAL) == []
    settings(stack, ws, expiry_off=True)  # off again: back, never erased
    assert recalled(alice, "pier", mode=m.RECALL_MODE_LEXICAL) == [old.id]


@pytest.mark.parametrize(
    ("req", "field", "code"),
    [
        (g.ListExpiringMemoriesRequest(page_size=-1), "page_size", INVALID),
        (g.ListExpiringMemoriesRequest(page_token="garbage"), "page_token", INVALID),
        (g.ListExpiringMemoriesRequest(superseded=99), "superseded", INVALID),
        (g.ListExpiringMemoriesRequest(purpose=99), "purpose", INVALID),
        (g.ListExpiringMemoriesRequest(purpose=m.PURPOSE_TASKS), None, grpc.StatusCode.PERMISSION_DENIED),
    ],
)
def test_bad_list_requests(stack, req, field, code):
    ws = stack.workspace("expiry bad list")
    narrow = stack.member(ws, purposes=[CONV])
    for gate in (None, 30):  # checked whether the gate is on or off
        if gate:
            settings(stack, ws, expiry_days=gate)
        with pytest.raises(grpc.RpcError) as err:
            stack.memory.ListExpiringMemories(req, metadata=narrow.md())
        assert err.value.code() == code
        if field:
            assert error_info(err.value).metadata.get("field") == field


def test_tokens_fit_only_their_list(world, stack):
    ws, alice, bob, _, _ = world
    token = expiring(alice, page_size=1).next_page_token
    assert (
        code_of(stack.memory.ListExpiringMemories, g.ListExpiringMemoriesRequest(page_token=token), metadata=bob.md())
        == INVALID
    )
    other = g.ListExpiringMemoriesRequest(page_token=token, superseded=m.SUPERSEDED_FILTER_ALL)
    assert code_of(stack.memory.ListExpiringMemories, other, metadata=alice.md()) == INVALID
    listing = stack.memory.ListMemories(g.ListMemoriesRequest(page_size=1), metadata=alice.md()).next_page_token
    assert (
        code_of(
            stack.memory.ListExpiringMemories, g.ListExpiringMemoriesRequest(page_token=listing), metadata=alice.md()
        )
        == INVALID
    )
    assert code_of(stack.memory.ListMemories, g.ListMemoriesRequest(page_token=token), metadata=alice.md()) == INVALID


def test_keep_brings_a_memory_back_and_counts_as_an_update(stack):
    ws = stack.workspace("expiry keep")
    alice = stack.member(ws)
    note = alice.remember("The ferry to Helgoland leaves at nine.")
    stack.wait_backlog_empty()
    age(stack, ws, note.id, 100)
    settings(stack, ws, expiry_days=90)
    assert recalled(alice, "ferry Helgoland") == []
    assert [x.id for x in expiring(alice).memories] == [note.id]
    kept = keep(alice, note.id, 1)
    assert kept.revision == 1 and kept.body == note.body
    assert (
        abs((datetime.datetime.now(datetime.UTC) - kept.updated_at.ToDatetime(tzinfo=datetime.UTC)).total_seconds())
        < 60
    )
    assert expiring(alice).total_size == 0
    for mode in (m.RECALL_MODE_LEXICAL, m.RECALL_MODE_DENSE, m.RECALL_MODE_HYBRID):
        assert recalled(alice, "ferry Helgoland", mode=mode)[:1] == [note.id]
    assert alice.read(note.id, include_history=True).history == []  # no revision was written
    with stack.db(ws) as conn:  # the vector is the same revision's: nothing to re-embed
        assert (
            conn.execute(
                "SELECT memory_revision FROM memory_embedding WHERE memory_id = %s", (uuid.UUID(note.id),)
            ).fetchone()[0]
            == 1
        )
    # Keeping again is harmless, with the gate on or off.
    assert keep(alice, note.id, 1).revision == 1
    settings(stack, ws, expiry_off=True)
    assert keep(alice, note.id, 1).revision == 1


def test_keep_follows_the_change_rules(stack):
    ws = stack.workspace("expiry keep rules")
    alice, bob = stack.member(ws), stack.member(ws)
    admin = stack.member(ws, role=m.ROLE_ADMIN)
    shared = alice.remember("Shared: the boat house key hangs by the door.")
    own = alice.remember("Mine: the spare key is under the stone.", audience=m.AUDIENCE_MEMBER)
    settings(stack, ws, expiry_days=10)
    for x in (shared, own):
        age(stack, ws, x.id, 11)
    # Readable but not bob's to change: PERMISSION_DENIED; alice's member-only: NOT_FOUND, as missing.
    with pytest.raises(grpc.RpcError) as err:
        keep(bob, shared.id, 1)
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    with pytest.raises(grpc.RpcError) as hidden:
        keep(bob, own.id, 1)
    with pytest.raises(grpc.RpcError) as missing:
        keep(bob, str(uuid.uuid4()), 1)
    assert hidden.value.code() == missing.value.code() == grpc.StatusCode.NOT_FOUND
    assert hidden.value.details() == missing.value.details()
    assert code_of(keep, admin, own.id, 1) == grpc.StatusCode.NOT_FOUND  # admins read no member-only memory
    assert keep(admin, shared.id, 1).id == shared.id  # an admin curates workspace memories
    assert keep(alice, own.id, 1).id == own.id
    assert expiring(alice).total_size == 0


def test_keep_bad_input_and_stale_revisions(stack):
    ws = stack.workspace("expiry keep input")
    alice = stack.member(ws)
    note = alice.remember("The tide table is pinned in the kitchen.")
    stack.memory.Correct(
        g.CorrectRequest(id=note.id, expected_revision=1, body="The tide table hangs in the hall."), metadata=alice.md()
    )
    with pytest.raises(grpc.RpcError) as err:
        keep(alice, note.id, 1)
    assert err.value.code() == grpc.StatusCode.ABORTED and "current 2" in err.value.details()
    assert error_info(err.value).metadata["current_revision"] == "2"
    for revision in (0, -1):
        with pytest.raises(grpc.RpcError) as err:
            keep(alice, note.id, revision)
        assert err.value.code() == INVALID and error_info(err.value).metadata["field"] == "expected_revision"
    for bad in ("", "not-a-uuid", "'; DROP TABLE memory; --", "x" * 10_000):
        assert code_of(keep, alice, bad, 1) == grpc.StatusCode.NOT_FOUND
    forgotten = alice.remember("A note to forget.")
    stack.memory.Forget(g.ForgetRequest(id=forgotten.id, reason="test"), metadata=alice.md())
    assert code_of(keep, alice, forgotten.id, 1) == grpc.StatusCode.NOT_FOUND
    assert (
        code_of(stack.memory.KeepMemory, g.KeepMemoryRequest(id=note.id, expected_revision=2))
        == grpc.StatusCode.UNAUTHENTICATED
    )
    # A superseded memory can be kept (history recall hides expired ones too).
    succ = stack.memory.Supersede(
        g.SupersedeRequest(id=note.id, expected_revision=2, body="The tide table is online now."), metadata=alice.md()
    ).memory
    assert keep(alice, note.id, 2).superseded_by_id == succ.id


def test_forget_is_how_a_hidden_memory_goes(stack):
    ws = stack.workspace("expiry forget")
    alice = stack.member(ws)
    note = alice.remember("The old harbour master was called Hinnerk.")
    derived = stack.memory.Derive(
        g.DeriveRequest(source_ids=[note.id], body="Hinnerk was the harbour master."), metadata=alice.md()
    ).memory
    settings(stack, ws, expiry_days=5)
    age(stack, ws, note.id, 6)
    assert [x.id for x in expiring(alice).memories] == [note.id]
    gone = stack.memory.Forget(g.ForgetRequest(id=note.id, reason="stale"), metadata=alice.md()).forgotten_ids
    assert set(gone) == {note.id, derived.id}
    assert expiring(alice).total_size == 0


def test_the_context_bundle_leaves_them_out(stack):
    ws = stack.workspace("expiry bundle")
    alice = stack.member(ws)
    settings(stack, ws, context_bundle=True, expiry_days=20)
    old = alice.remember("Olga's boat is called Seeschwalbe.", entities=[m.EntityMention(name="Olga")])
    pinned_old = alice.remember("Olga's mooring is number 12.", entities=[m.EntityMention(name="Olga")])
    summary = stack.memory.Remember(
        g.RememberRequest(
            purpose=CONV, kind=m.KIND_SUMMARY, body="Summary: Olga sails on Sundays.", audience=m.AUDIENCE_WORKSPACE
        ),
        metadata=alice.md(),
    ).memory
    fresh = alice.remember("Olga bought new sails.")
    stack.memory.PinMemory(g.PinMemoryRequest(id=pinned_old.id), metadata=alice.md())
    for x in (old, pinned_old, summary):
        age(stack, ws, x.id, 21)

    def bundle():
        return stack.memory.GetContext(g.GetContextRequest(purpose=CONV), metadata=alice.md())

    resp = bundle()
    ids = [it.memory.id for it in resp.items]
    assert ids == [fresh.id]  # no pin, summary, entity or recent part holds a hidden memory
    assert "Olga" not in {e.name for it in resp.items for e in it.entities}
    keep(alice, pinned_old.id, 1)
    parts = {it.memory.id: it.part for it in bundle().items}
    assert parts == {pinned_old.id: m.CONTEXT_PART_PINNED, fresh.id: m.CONTEXT_PART_RECENT}


def test_the_keyword_arm_reads_deeper_and_stays_exact(stack):
    """Hidden rows at the top of the keyword ranking: the arm reads on until ``limit`` shown rows,
    and they are exactly the best shown rows of the ungated ranking, scores unchanged (the
    statistics still count the hidden rows). Both top-k paths and the entity-filtered path."""
    ws = stack.workspace("expiry lexical")
    alice = stack.member(ws)
    batch = [
        g.RememberRequest(
            purpose=CONV,
            body=("gull " * (1 + i % 7)) + f"note number {i} about the harbour",
            audience=m.AUDIENCE_WORKSPACE,
            entities=[m.EntityMention(name="Harbour")],
        )
        for i in range(120)
    ]
    ids = [
        r.memory.id
        for r in stack.memory.RememberBatch(g.RememberBatchRequest(requests=batch), metadata=alice.md()).results
    ]
    with stack.db(ws) as conn:
        caller = m.Caller(workspace_id=ws, member_id=alice.id, role=m.ROLE_MEMBER, granted_purposes=[CONV])
        full = candidates.lexical(conn, caller, "conversation", "gull harbour", 1000, False)
        assert len(full) == 120
        # Hide the 40 best and every third after them.
        hide = {mid for mid, _ in full[:40]} | {mid for mid, _ in full[40::3]}
        conn.execute("UPDATE memory SET updated_at = now() - interval '10 days' WHERE id = ANY(%s)", (list(hide),))
        shown = [(mid, score) for mid, score in full if mid not in hide]
        for limit in (1, 5, 10, 50, 100):
            got = candidates.lexical(conn, caller, "conversation", "gull harbour", limit, False, expiry_days=7)
            assert got == shown[:limit]
        entity = conn.execute("SELECT id FROM entity WHERE name = 'Harbour'").fetchone()[0]
        ungated = candidates.lexical(conn, caller, "conversation", "gull harbour", 1000, False, [entity])
        gated = candidates.lexical(conn, caller, "conversation", "gull harbour", 1000, False, [entity], expiry_days=7)
        assert gated == [r for r in ungated if r[0] not in hide]
        assert candidates.lexical(conn, caller, "conversation", "gull harbour", 1000, False, expiry_days=30) == full
    assert len(ids) == 120


def test_the_store_refuses_a_gate_out_of_range(stack):
    ws = stack.workspace("expiry store input")
    alice = stack.member(ws)
    caller = m.Caller(workspace_id=ws, member_id=alice.id, role=m.ROLE_MEMBER, granted_purposes=[CONV])
    from recallatron.store.v1 import store_pb2_grpc

    from servicekit import clients

    channel = clients.channel(f"127.0.0.1:{stack.store.port}")
    store = store_pb2_grpc.StoreServiceStub(channel)
    try:
        for days in (-1, 3651):
            for call, req in (
                (
                    store.LexicalCandidates,
                    s.LexicalCandidatesRequest(caller=caller, purpose=CONV, query="x", limit=5, expiry_days=days),
                ),
                (store.ListExpiringMemories, s.ListExpiringMemoriesRequest(caller=caller, expiry_days=days)),
                (store.GetContext, s.GetContextRequest(caller=caller, purpose=CONV, expiry_days=days)),
            ):
                assert code_of(call, req) == INVALID
    finally:
        channel.close()


def cli(stack, token: str, *args: str) -> subprocess.CompletedProcess:
    """``recallatron ARGS`` in this process (tests/cli_runner.py) at the stack's gateway, with member ``token``."""
    return at_gateway(f"127.0.0.1:{stack.gateway.port}", *args, token=token, check=False)


def test_the_commands(stack):
    ws = stack.workspace("expiry cli")
    alice = stack.member(ws)
    op = ("--workspace", ws, "--operator-token", stack.operator_token)
    note = alice.remember("The bell buoy rings at the harbour mouth.")
    age(stack, ws, note.id, 400)
    off = cli(stack, alice.token, "expiring")
    assert off.returncode == 0 and off.stdout.strip() == "the expiry gate is off: recall hides nothing", off.stderr
    on = cli(stack, "", "workspace", "settings", *op, "--expiry-days", "365")
    assert on.returncode == 0 and on.stdout.strip().endswith("expiry=365d context_bundle=off"), on.stderr
    listed = cli(stack, alice.token, "expiring")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith("expiry gate: 365 days; hidden from recall: not updated since ")
    assert note.id in listed.stdout and "1 shown of 1 hidden" in listed.stdout
    as_json = json.loads(cli(stack, alice.token, "expiring", "--json", "--page-size", "1").stdout)
    assert [x["id"] for x in as_json["memories"]] == [note.id] and as_json["total_size"] == 1
    assert as_json["expiry_days"] == 365 and as_json["next_page_token"] == ""
    stale = cli(stack, alice.token, "keep", note.id, "--revision", "2")
    assert stale.returncode == 1 and stale.stderr.startswith("ABORTED: revision conflict: expected 2, current 1")
    kept = cli(stack, alice.token, "keep", note.id, "--revision", "1", "--json")
    assert kept.returncode == 0 and json.loads(kept.stdout)["memory"]["id"] == note.id, kept.stderr
    assert "0 shown of 0 hidden" in cli(stack, alice.token, "expiring").stdout
    text = cli(stack, alice.token, "keep", note.id, "--revision", "1")
    assert text.returncode == 0 and "  kept: last updated " in text.stdout
    assert (
        cli(stack, "", "workspace", "settings", *op, "--expiry", "off")
        .stdout.strip()
        .endswith("expiry=off context_bundle=off")
    )
    # Bad input: the server judges the range (exit 1, its message); usage errors exit 2.
    for days in ("0", "-5", "3651"):
        bad = cli(stack, "", "workspace", "settings", *op, "--expiry-days", days)
        assert bad.returncode == 1 and bad.stderr.startswith("INVALID_ARGUMENT: expiry_days must be 1..3650"), days
    for argv in (
        ("--expiry-days", "99999999999"),
        ("--expiry-days", "ten"),
        ("--expiry", "on"),
        ("--expiry-days", "3", "--expiry", "off"),
    ):
        assert cli(stack, "", "workspace", "settings", *op, *argv).returncode == 2, argv
    assert cli(stack, alice.token, "keep", note.id).returncode == 2  # --revision is required
    assert cli(stack, alice.token, "keep", note.id, "--revision", str(2**64)).returncode == 2
    missing = cli(stack, alice.token, "keep", str(uuid.uuid4()), "--revision", "1")
    assert missing.returncode == 1 and missing.stderr.strip() == "NOT_FOUND: memory not found"
    malformed = cli(stack, alice.token, "keep", "not-an-id", "--revision", "1")
    assert malformed.returncode == 1 and malformed.stderr.startswith("NOT_FOUND: ")
    neg = cli(stack, alice.token, "expiring", "--page-size", "-1")
    assert neg.returncode == 1 and neg.stderr.startswith("INVALID_ARGUMENT: page_size")
    assert cli(stack, alice.token, "expiring", "--page-token", "nope").returncode == 1


def test_the_commands_expiring_suggests_run_as_suggested(stack):
    """``expiring`` ends with the commands that keep or forget a hidden memory: each, its placeholders
    filled in, runs and does what it says (the forget it suggested once lacked its required --reason)."""
    ws = stack.workspace("expiry suggestions")
    alice = stack.member(ws)
    op = ("--workspace", ws, "--operator-token", stack.operator_token)
    keep_me, forget_me = (
        alice.remember("The zqlantern oil is in the shed."),
        alice.remember("The zqlantern wick is new."),
    )
    for note in (keep_me, forget_me):
        age(stack, ws, note.id, 400)
    assert cli(stack, "", "workspace", "settings", *op, "--expiry-days", "365").returncode == 0
    listed = cli(stack, alice.token, "expiring").stdout
    assert f"{keep_me.id}  revision 1 " in listed and "2 shown of 2 hidden" in listed
    keep, forget = re.findall(r"`recallatron ([^`]+)`", listed.splitlines()[-1])
    assert (keep, forget) == ("keep ID --revision N", "forget ID --reason WHY")

    def run(template: str, memory_id: str) -> subprocess.CompletedProcess:
        fill = {"ID": memory_id, "N": "1", "WHY": "the wick was replaced"}
        return cli(stack, alice.token, *(fill.get(word, word) for word in shlex.split(template)))

    kept = run(keep, keep_me.id)
    assert kept.returncode == 0 and "  kept: last updated " in kept.stdout, kept.stderr
    forgot = run(forget, forget_me.id)
    assert forgot.returncode == 0 and forgot.stdout.strip() == f"forgot {forget_me.id}", forgot.stderr
    assert "0 shown of 0 hidden" in cli(stack, alice.token, "expiring").stdout
    hits = alice.recall("zqlantern", mode=m.RECALL_MODE_LEXICAL)
    assert [it.memory.id for it in hits.items] == [keep_me.id]  # kept: back in recall; forgotten: gone
    assert code_of(alice.read, forget_me.id) == grpc.StatusCode.NOT_FOUND
    # As the old suggestion was: a usage error naming the missing option.
    bare = cli(stack, alice.token, "forget", keep_me.id)
    assert bare.returncode == 2 and "--reason" in bare.stderr
