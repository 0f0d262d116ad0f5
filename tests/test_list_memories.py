"""ListMemories through the real gateway and store: order, AIP-158 pages and tokens, every filter,
the readability rule (the same as Read's, chain included) in pages and in total_size, bad input,
and `recallatron list` as a user runs it."""

from __future__ import annotations

import datetime
import json
import subprocess
import uuid

import grpc
import pytest
from cli_runner import at_gateway
from conftest import code_of
from google.protobuf import timestamp_pb2
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

from store_service.records import listing

INVALID = grpc.StatusCode.INVALID_ARGUMENT


def ts(when: datetime.datetime) -> timestamp_pb2.Timestamp:
    out = timestamp_pb2.Timestamp()
    out.FromDatetime(when)
    return out


def list_all(member, **kw) -> tuple[list[m.Memory], list[int]]:
    """Every page of a listing: the memories in order, and each page's total_size."""
    out, totals, token = [], [], ""
    while True:
        resp = member.stack.memory.ListMemories(g.ListMemoriesRequest(page_token=token, **kw), metadata=member.md())
        out += resp.memories
        totals.append(resp.total_size)
        token = resp.next_page_token
        if not token:
            return out, totals


def newest_first(mems: list[m.Memory]) -> list[str]:
    """Ids in the listing's order: created_at descending, then id descending (as UUIDs compare in SQL)."""
    key = {x.id: (x.created_at.ToDatetime(), uuid.UUID(x.id)) for x in mems}
    return sorted(key, key=lambda i: key[i], reverse=True)


@pytest.fixture(scope="module")
def team(stack):
    ws = stack.workspace("list tests")
    alice, bob = stack.member(ws), stack.member(ws)
    narrow = stack.member(ws, purposes=[m.PURPOSE_TASKS])
    return ws, alice, bob, narrow


def test_pages_walk_every_readable_memory_newest_first(stack, team):
    ws, alice, bob, _ = team
    # One RememberBatch writes its rows in one transaction: they share created_at, so the id breaks the tie.
    batch = stack.memory.RememberBatch(
        g.RememberBatchRequest(
            requests=[
                g.RememberRequest(
                    purpose=m.PURPOSE_CONVERSATION,
                    kind=m.KIND_FACT,
                    body=f"batch fact {i}",
                    audience=m.AUDIENCE_WORKSPACE,
                )
                for i in range(5)
            ]
        ),
        metadata=alice.md(),
    )
    assert all(r.HasField("memory") for r in batch.results), batch
    written = [r.memory for r in batch.results]
    assert len({x.created_at.ToDatetime() for x in written}) == 1
    later = [alice.remember(f"later note {i}") for i in range(3)]
    mine = bob.remember("bob's own note", audience=m.AUDIENCE_MEMBER)
    everything = written + later

    listed, totals = list_all(alice, page_size=3)
    assert [x.id for x in listed] == newest_first(everything)
    assert totals == [8, 8, 8]
    assert mine.id not in {x.id for x in listed}
    # Bob sees the workspace memories and his own member-only one; the count says the same.
    listed_bob, totals_bob = list_all(bob, page_size=200)
    assert [x.id for x in listed_bob] == newest_first([*everything, mine]) and totals_bob == [9]
    # A memory written between two pages is newer than the position: the later pages do not shift.
    first = stack.memory.ListMemories(g.ListMemoriesRequest(page_size=4), metadata=alice.md())
    newer = alice.remember("written between the pages")
    rest = stack.memory.ListMemories(
        g.ListMemoriesRequest(page_size=4, page_token=first.next_page_token), metadata=alice.md()
    )
    assert [x.id for x in first.memories] + [x.id for x in rest.memories] == newest_first(everything)
    assert rest.total_size == 9 and not rest.next_page_token
    alice.stack.memory.Forget(g.ForgetRequest(id=newer.id, reason="test"), metadata=alice.md())


def test_filters(stack):
    ws = stack.workspace("list filters")
    alice, bob = stack.member(ws), stack.member(ws)
    fact = stack.memory.Remember(
        g.RememberRequest(
            purpose=m.PURPOSE_CONVERSATION,
            kind=m.KIND_FACT,
            body="Mira's parrot is called Captain.",
            audience=m.AUDIENCE_WORKSPACE,
            entities=[m.EntityMention(name="Mira")],
        ),
        metadata=alice.md(),
    ).memory
    entity_id = next(link.target_entity_id for link in alice.read(fact.id).links if link.type == m.LINK_TYPE_ABOUT)
    task = alice.remember("renew the domain", purpose=m.PURPOSE_TASKS)
    private = alice.remember("my own note", audience=m.AUDIENCE_MEMBER)
    old = alice.remember("the office is on floor 2")
    successor = stack.memory.Supersede(
        g.SupersedeRequest(id=old.id, expected_revision=1, body="the office is on floor 3"), metadata=alice.md()
    ).memory
    corrected = stack.memory.Correct(
        g.CorrectRequest(id=task.id, expected_revision=1, body="renew the domain by May"), metadata=alice.md()
    ).memory
    bobs = bob.remember("bob's workspace note")

    def ids(member=alice, **kw):
        listed, totals = list_all(member, **kw)
        assert totals[-1] == len(listed)
        return {x.id for x in listed}

    current = {fact.id, task.id, private.id, successor.id, bobs.id}
    assert ids() == current == ids(superseded=m.SUPERSEDED_FILTER_CURRENT)
    assert ids(superseded=m.SUPERSEDED_FILTER_SUPERSEDED) == {old.id}
    assert ids(superseded=m.SUPERSEDED_FILTER_ALL) == current | {old.id}
    assert ids(kind=m.KIND_FACT) == {fact.id}
    assert ids(purpose=m.PURPOSE_TASKS) == {task.id}
    assert ids(audience=m.AUDIENCE_MEMBER) == {private.id}
    assert ids(audience=m.AUDIENCE_WORKSPACE) == current - {private.id}
    assert ids(entity_id=entity_id) == {fact.id}
    assert ids(member=bob, entity_id=entity_id) == {fact.id}
    assert ids(member=bob, audience=m.AUDIENCE_MEMBER) == set()  # alice's member-only memory is hers alone
    assert ids(entity_id=str(uuid.uuid4())) == set()
    # Time ranges: created at or after / before, and updated (the correction moved the task's updated_at).
    cut = successor.created_at.ToDatetime(tzinfo=datetime.UTC)
    assert ids(created_after=ts(cut), superseded=m.SUPERSEDED_FILTER_ALL) == {successor.id, bobs.id}
    assert ids(created_before=ts(cut), superseded=m.SUPERSEDED_FILTER_ALL) == {fact.id, task.id, private.id, old.id}
    assert ids(updated_after=corrected.updated_at) == {task.id, bobs.id}
    assert task.id not in ids(updated_before=corrected.updated_at)
    listed = stack.memory.ListMemories(
        g.ListMemoriesRequest(purpose=m.PURPOSE_TASKS, include_history=True), metadata=alice.md()
    ).memories
    assert [(r.revision, r.body) for r in listed[0].history] == [(1, "renew the domain")]
    plain = stack.memory.ListMemories(g.ListMemoriesRequest(purpose=m.PURPOSE_TASKS), metadata=alice.md()).memories
    assert not plain[0].history
    # The superseded memory names its successor, the successor is listed with its sources' links.
    superseded = list_all(alice, superseded=m.SUPERSEDED_FILTER_SUPERSEDED)[0]
    assert superseded[0].superseded_by_id == successor.id


def test_exactly_the_readable_set_chain_included(stack):
    """A memory whose own row is readable but whose derived_from chain is not is neither listed nor
    counted, as Read does not show it (the state is made in SQL: a link to bob's member-only memory,
    so bob alone sees the memory linked to it)."""
    ws = stack.workspace("list chain")
    alice, bob = stack.member(ws), stack.member(ws)
    narrow = stack.member(ws, purposes=[m.PURPOSE_TASKS])
    source = alice.remember("the source")
    derived = stack.memory.Derive(g.DeriveRequest(source_ids=[source.id], body="derived"), metadata=alice.md()).memory
    hidden_source = bob.remember("bob only", audience=m.AUDIENCE_MEMBER)
    orphan = alice.remember("linked to bob's private memory")
    with stack.db(ws) as conn:
        conn.execute(
            "INSERT INTO memory_link (memory_id, link_type, target_memory_id) VALUES (%s, 'derived_from', %s)",
            (orphan.id, hidden_source.id),
        )
    tasks = alice.remember("a task", purpose=m.PURPOSE_TASKS)
    gone = alice.remember("forgotten soon")
    stack.memory.Forget(g.ForgetRequest(id=gone.id, reason="test"), metadata=alice.md())

    listed, totals = list_all(alice)
    assert {x.id for x in listed} == {source.id, derived.id, tasks.id} and totals == [3]
    assert code_of(alice.read, orphan.id) == grpc.StatusCode.NOT_FOUND  # the same rule as Read
    assert [link.target_memory_id for x in listed if x.id == derived.id for link in x.links] == [source.id]
    listed, totals = list_all(bob)
    assert {x.id for x in listed} == {source.id, derived.id, hidden_source.id, orphan.id, tasks.id}
    assert totals == [5]
    listed, totals = list_all(narrow)
    assert {x.id for x in listed} == {tasks.id} and totals == [1]
    # Derived from: the direct derivations the caller can read; an unreadable source lists nothing
    # (the memory linked to it has an unreadable chain), exactly as a source that does not exist.
    assert [x.id for x in list_all(alice, derived_from_id=source.id)[0]] == [derived.id]
    assert list_all(alice, derived_from_id=hidden_source.id) == ([], [0])
    assert list_all(alice, derived_from_id=str(uuid.uuid4())) == ([], [0])
    assert [x.id for x in list_all(bob, derived_from_id=hidden_source.id)[0]] == [orphan.id]
    assert list_all(narrow, derived_from_id=source.id) == ([], [0])
    # A purpose not granted is refused, as Recall refuses it.
    assert code_of(list_all, narrow, purpose=m.PURPOSE_CONVERSATION) == grpc.StatusCode.PERMISSION_DENIED


def test_page_tokens_are_bound_to_member_and_filters(stack, team):
    ws, alice, bob, _ = team
    for i in range(3):
        alice.remember(f"token test {i}")
    first = stack.memory.ListMemories(g.ListMemoriesRequest(page_size=1), metadata=alice.md())
    token = first.next_page_token
    assert token
    call = stack.memory.ListMemories
    # Another member, other filters, a changed or foreign token: INVALID_ARGUMENT naming page_token.
    for req, md in [
        (g.ListMemoriesRequest(page_token=token), bob.md()),
        (g.ListMemoriesRequest(page_token=token, kind=m.KIND_NOTE), alice.md()),
        (g.ListMemoriesRequest(page_token=token, superseded=m.SUPERSEDED_FILTER_ALL), alice.md()),
        (g.ListMemoriesRequest(page_token=token, derived_from_id=str(uuid.uuid4())), alice.md()),
        (g.ListMemoriesRequest(page_token="not a token"), alice.md()),
        (g.ListMemoriesRequest(page_token=token[:-3]), alice.md()),
        (g.ListMemoriesRequest(page_token="eyJ2IjoxLCJmIjoiYSIsImsiOlsxLDJdfQ"), alice.md()),
    ]:
        with pytest.raises(grpc.RpcError) as err:
            call(req, metadata=md)
        assert err.value.code() == INVALID and "page_token" in err.value.details()
    # The same filters with another page size go on from the same place.
    more = call(g.ListMemoriesRequest(page_token=token, page_size=2), metadata=alice.md())
    assert len(more.memories) == 2 and more.memories[0].id != first.memories[0].id


@pytest.mark.parametrize(
    ("req", "field"),
    [
        (g.ListMemoriesRequest(page_size=-1), "page_size"),
        (g.ListMemoriesRequest(kind=99), "kind"),
        (g.ListMemoriesRequest(audience=7), "audience"),
        (g.ListMemoriesRequest(superseded=9), "superseded"),
        (g.ListMemoriesRequest(entity_id="not-a-uuid"), "entity_id"),
        (g.ListMemoriesRequest(derived_from_id="not-a-uuid"), "derived_from_id"),
        (
            g.ListMemoriesRequest(
                created_after=ts(datetime.datetime(2026, 3, 2, tzinfo=datetime.UTC)),
                created_before=ts(datetime.datetime(2026, 3, 1, tzinfo=datetime.UTC)),
            ),
            "created_before",
        ),
        (g.ListMemoriesRequest(updated_after=timestamp_pb2.Timestamp(seconds=-(10**13))), "updated_after"),
    ],
)
def test_bad_input_is_invalid_argument_naming_the_field(stack, team, req, field):
    _, alice, _, _ = team
    with pytest.raises(grpc.RpcError) as err:
        stack.memory.ListMemories(req, metadata=alice.md())
    assert err.value.code() == INVALID and field in err.value.details()


def test_page_size_default_and_most(stack):
    ws = stack.workspace("list sizes")
    alice = stack.member(ws)
    stack.memory.RememberBatch(
        g.RememberBatchRequest(
            requests=[
                g.RememberRequest(purpose=m.PURPOSE_CONVERSATION, body=f"n {i}", audience=m.AUDIENCE_WORKSPACE)
                for i in range(205)
            ]
        ),
        metadata=alice.md(),
    )
    default = stack.memory.ListMemories(g.ListMemoriesRequest(), metadata=alice.md())
    assert len(default.memories) == listing.DEFAULT_PAGE_SIZE == 50 and default.total_size == 205
    most = stack.memory.ListMemories(g.ListMemoriesRequest(page_size=10_000), metadata=alice.md())
    assert len(most.memories) == listing.MAX_PAGE_SIZE == 200
    last = stack.memory.ListMemories(
        g.ListMemoriesRequest(page_size=10_000, page_token=most.next_page_token), metadata=alice.md()
    )
    assert len(last.memories) == 5 and not last.next_page_token
    assert code_of(stack.memory.ListMemories, g.ListMemoriesRequest(), metadata=()) == grpc.StatusCode.UNAUTHENTICATED


def run_list(stack, token, *args, check=True) -> subprocess.CompletedProcess:
    return at_gateway(f"127.0.0.1:{stack.gateway.port}", "list", *args, token=token, check=check)


def test_cli_list(stack):
    ws = stack.workspace("list cli")
    alice = stack.member(ws)
    notes = [alice.remember(f"cli note {i}", title=f"note {i}") for i in range(3)]
    task = alice.remember("cli task", purpose=m.PURPOSE_TASKS)
    page = run_list(stack, alice.token, "--page-size", "2")
    assert page.stdout.splitlines()[0].startswith(task.id)
    assert "2 shown of 4" in page.stdout
    token = page.stdout.split("--page-token ")[1].split()[0]
    rest = json.loads(run_list(stack, alice.token, "--page-size", "2", "--page-token", token, "--json").stdout)
    assert [x["id"] for x in rest["memories"]] == [notes[1].id, notes[0].id] and rest["next_page_token"] == ""
    assert rest["total_size"] == 4
    every = json.loads(run_list(stack, alice.token, "--page-size", "1", "--all", "--json").stdout)
    assert [x["id"] for x in every["memories"]] == [task.id, notes[2].id, notes[1].id, notes[0].id]
    only = json.loads(run_list(stack, alice.token, "--purpose", "tasks", "--json").stdout)
    assert [x["id"] for x in only["memories"]] == [task.id]
    since = json.loads(
        run_list(stack, alice.token, "--created-after", notes[2].created_at.ToJsonString(), "--json").stdout
    )
    assert {x["id"] for x in since["memories"]} == {notes[2].id, task.id}
    derived = stack.memory.Derive(g.DeriveRequest(source_ids=[notes[0].id], body="cli derived"), metadata=alice.md())
    children = json.loads(run_list(stack, alice.token, "--derived-from", notes[0].id, "--json").stdout)
    assert [x["id"] for x in children["memories"]] == [derived.memory.id]
    bad = run_list(stack, alice.token, "--page-token", "junk", check=False)
    assert bad.returncode == 1 and bad.stderr.startswith("INVALID_ARGUMENT: page_token")
    usage = run_list(stack, alice.token, "--created-after", "yesterday", check=False)
    assert usage.returncode == 2 and "ISO 8601" in usage.stderr
