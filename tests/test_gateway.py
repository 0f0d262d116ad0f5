"""Remember, Read and Recall end to end through the gateway, against real PostgreSQL and MiniLM."""

import uuid
from collections import Counter

import grpc
import numpy as np
import pytest
from conftest import code_of
from prometheus_client import REGISTRY
from recall_calls import internal_calls
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

from servicekit.embedding_input import compose
from store_service.search import analysis

INVALID, NOT_FOUND, DENIED = (
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.PERMISSION_DENIED,
)
UNAUTH = grpc.StatusCode.UNAUTHENTICATED

FACTS = [
    ("Garden", "Alice planted tomatoes and basil in the community garden on Saturday."),
    ("Car", "Bob's car broke down on the highway and was towed to the mechanic."),
    ("Trip", "Carol flew to Lisbon for a conference about distributed databases."),
    ("Pet", "Dave adopted a grey kitten from the animal shelter and named it Pixel."),
    ("Recipe", "Erin bakes sourdough bread every Sunday with a starter called Bubbles."),
    ("Music", "Frank is learning to play the cello and practises scales each evening."),
    ("Job", "Grace started a new job as a nurse at the children's hospital."),
    ("Book", "Heidi is reading a novel about a lighthouse keeper in Norway."),
]


@pytest.fixture(scope="module")
def world(stack):
    """A workspace with two members and a small corpus, embeddings drained."""
    ws = stack.workspace("gateway tests")
    alice, bob = stack.member(ws), stack.member(ws)
    ids = {title: alice.remember(body, title=title).id for title, body in FACTS}
    private = alice.remember("Alice's therapist appointment is on Thursday at noon.", audience=m.AUDIENCE_MEMBER)
    tasks = alice.remember("Renew the kitten vaccination certificate for the shelter.", purpose=m.PURPOSE_TASKS)
    stack.wait_backlog_empty()
    return {"ws": ws, "alice": alice, "bob": bob, "ids": ids, "private": private, "tasks": tasks}


def test_remember_returns_the_stored_memory(world):
    alice = world["alice"]
    mem = alice.read(world["ids"]["Pet"])
    assert mem.revision == 1 and mem.kind == m.KIND_NOTE and mem.title == "Pet"
    assert mem.body.startswith("Dave adopted") and mem.origin == m.ORIGIN_TOLD
    assert mem.audience == m.AUDIENCE_WORKSPACE and mem.purpose == m.PURPOSE_CONVERSATION
    assert mem.created_by == alice.id and mem.confidence == 1.0 and mem.created_at.seconds > 0


def test_hybrid_recall_ranks_the_right_memory_first_with_both_arms(stack, world):
    resp = world["bob"].recall("kitten shelter")
    assert resp.dense_available and resp.mode == m.RECALL_MODE_HYBRID and not resp.reranked
    top = resp.items[0]
    assert top.memory.id == world["ids"]["Pet"]
    assert top.lexical_rank == 1 and top.dense_rank == 1 and top.rank == 1
    assert top.fused_score == pytest.approx(2 / 61)
    assert 0.3 <= top.cosine <= 1.0
    # The counts, against every row that passed (top_k 200 holds them all): only "Pet" holds the
    # keywords, and the dense arm brings exactly the facts at or above the 0.30 floor, with the
    # cosine of their stored vectors (computed here again; a margin keeps rounding off the floor).
    every = world["bob"].recall("kitten shelter", top_k=200)
    assert (resp.counts.lexical, resp.counts.dense, resp.counts.fused) == (
        every.counts.lexical,
        every.counts.dense,
        every.counts.fused,
    )
    assert resp.counts.returned == len(resp.items) == min(10, every.counts.fused) and every.counts.lexical == 1
    assert [it.memory.id for it in every.items if it.lexical_rank] == [world["ids"]["Pet"]]
    dense = {it.memory.id: it.cosine for it in every.items if it.dense_rank}
    assert every.counts.dense == len(dense) and every.counts.fused == len(every.items)
    query = stack.encoder.encode(["kitten shelter"])[0]
    for title, body in FACTS:
        cosine = float(np.dot(query, stack.encoder.encode([compose(title, body)])[0]))
        mid = world["ids"][title]
        if mid in dense:
            assert dense[mid] == pytest.approx(cosine, abs=1e-4)
        assert (mid in dense) == (cosine >= 0.30) or abs(cosine - 0.30) < 1e-3, (title, cosine)
    assert set(dense) <= set(world["ids"].values())


def test_dense_recall_finds_paraphrase_without_shared_words(world):
    resp = world["bob"].recall("Who works in healthcare?", mode=m.RECALL_MODE_DENSE)
    assert resp.items[0].memory.id == world["ids"]["Job"]
    assert all(it.lexical_rank == 0 for it in resp.items)
    assert all(it.cosine >= 0.30 for it in resp.items)  # the floor


def test_lexical_recall_only_keyword_rows(world):
    resp = world["bob"].recall("sourdough", mode=m.RECALL_MODE_LEXICAL)
    assert [it.memory.id for it in resp.items] == [world["ids"]["Recipe"]]
    assert resp.items[0].dense_rank == 0 and resp.counts.dense == 0 and resp.counts.lexical == 1


def test_member_only_memory_is_invisible_to_others(world):
    alice, bob, private = world["alice"], world["bob"], world["private"]
    assert private.id in [it.memory.id for it in alice.recall("therapist appointment").items]
    for mode in (m.RECALL_MODE_LEXICAL, m.RECALL_MODE_DENSE, m.RECALL_MODE_HYBRID):
        resp = bob.recall("therapist appointment Thursday", mode=mode)
        assert private.id not in [it.memory.id for it in resp.items]
    assert code_of(bob.read, private.id) == NOT_FOUND
    # A hidden id and a missing id answer the same, to the letter.
    details = set()
    for mid in (private.id, str(uuid.uuid4())):
        with pytest.raises(grpc.RpcError) as err:
            bob.read(mid)
        details.add((err.value.code(), err.value.details()))
    assert len(details) == 1


def test_purpose_scopes_recall(world):
    alice, tasks = world["alice"], world["tasks"]
    conv = alice.recall("kitten vaccination certificate")
    assert tasks.id not in [it.memory.id for it in conv.items]
    assert alice.recall("kitten vaccination certificate", purpose=m.PURPOSE_TASKS).items[0].memory.id == tasks.id


def test_token_narrowed_to_one_purpose(stack, world):
    bot = stack.member(world["ws"], purposes=[m.PURPOSE_CONVERSATION])
    assert code_of(bot.recall, "kitten", purpose=m.PURPOSE_TASKS) == DENIED
    assert code_of(bot.remember, "a task", purpose=m.PURPOSE_TASKS) == DENIED
    assert code_of(bot.read, world["tasks"].id) == NOT_FOUND
    assert bot.recall("kitten").items


def test_other_workspace_is_not_found(stack, world):
    outsider = stack.member(stack.workspace("elsewhere"))
    assert code_of(outsider.read, world["ids"]["Pet"]) == NOT_FOUND
    assert outsider.recall("kitten shelter").items == []


def test_request_id_makes_remember_idempotent(world):
    alice = world["alice"]
    first = alice.remember("The office wifi password changed in May.", request_id="wifi-1")
    again = alice.remember("The office wifi password changed in May.", request_id="wifi-1")
    assert first.id == again.id
    assert sum(it.memory.id == first.id for it in alice.recall("office wifi password").items) == 1


@pytest.mark.parametrize("body", ["", "   ", "\n\t"])
def test_blank_body_is_invalid(world, body):
    assert code_of(world["alice"].remember, body) == INVALID


def test_oversized_body_is_invalid_and_writes_nothing(world):
    alice = world["alice"]
    marker = "zanzibarquux"
    with pytest.raises(grpc.RpcError) as err:
        alice.remember(marker + " " + "x" * 70_000)
    assert err.value.code() == INVALID and "65536" in err.value.details()
    assert alice.recall(marker, mode=m.RECALL_MODE_LEXICAL).items == []
    body = marker + " " + "y" * 60_000  # just under the limit is fine, and found like any other
    kept = alice.remember(body)
    assert kept.body == body and alice.read(kept.id).body == body
    assert [it.memory.id for it in alice.recall(marker, mode=m.RECALL_MODE_LEXICAL).items] == [kept.id]


@pytest.mark.parametrize(
    "field,value",
    [
        ("confidence", 1.5),
        ("confidence", -0.1),
        ("kind", 99),
        ("audience", 0),
        ("audience", 7),
        ("purpose", 0),
        ("purpose", 42),
    ],
)
def test_bad_remember_fields_are_invalid(stack, world, field, value):
    req = g.RememberRequest(purpose=m.PURPOSE_CONVERSATION, body="fine body", audience=m.AUDIENCE_WORKSPACE)
    setattr(req, field, value)
    assert code_of(stack.memory.Remember, req, metadata=world["alice"].md()) == INVALID


HOSTILE = [
    "the and of",
    "?!?!...",
    "---|---|---|---",
    "| a | b |\n|---|---|",
    '"unterminated',
    "foo & | ! bar",
    "<script>:: ::",
    "🙂🙃🚀",
    "какой у тебя кот",
    "猫はどこですか",
    "a" * 3000,
    "kitten " * 1500,
    "'; DROP TABLE memory; --",
    "\\",
    "''",
    "x\x00y",
    "OR AND NOT",
    "(((",
    "a:*",
    "-kitten -shelter",
]


@pytest.mark.parametrize("query", HOSTILE)
def test_any_text_gets_a_normal_answer(world, query):
    terms = set(analysis.query_terms(query.replace("\x00", " ")))  # the store reads NUL as a space
    hidden = {world["private"].id, world["tasks"].id}  # another member's, another purpose
    for mode in (m.RECALL_MODE_LEXICAL, m.RECALL_MODE_HYBRID):
        resp = world["bob"].recall(query, mode=mode)
        assert resp.mode == mode and resp.dense_available
        assert [it.rank for it in resp.items] == list(range(1, len(resp.items) + 1))
        assert not {it.memory.id for it in resp.items} & hidden
        keyword_hits = [it.memory for it in resp.items if it.lexical_rank]
        # A keyword hit holds a term of the question, as the index analyses both.
        assert all(terms & set(analysis.document_terms(mem.title, mem.body)) for mem in keyword_hits)
        if "kitten" in terms:
            assert resp.items[0].memory.id == world["ids"]["Pet"] and resp.items[0].lexical_rank == 1


def test_recall_bad_input(stack, world):
    bob = world["bob"]
    assert code_of(bob.recall, "") == INVALID
    assert code_of(bob.recall, "   ") == INVALID
    assert code_of(bob.recall, "x" * 40_000) == INVALID
    assert code_of(bob.recall, "kitten", mode=9) == INVALID
    assert code_of(bob.recall, "kitten", purpose=0) == INVALID
    assert code_of(bob.recall, "kitten", purpose=12) == INVALID
    assert code_of(bob.recall, "kitten", top_k=-1) == INVALID
    assert code_of(bob.recall, "kitten", top_k=201) == INVALID
    assert len(bob.recall("a note about anything", top_k=3, mode=m.RECALL_MODE_DENSE).items) <= 3


@pytest.mark.parametrize("bad_id", ["", "not-a-uuid", "00000000-0000-0000-0000-000000000000", "1" * 500])
def test_read_unknown_or_malformed_id_is_not_found(world, bad_id):
    assert code_of(world["bob"].read, bad_id) == NOT_FOUND


def test_authentication(stack, world):
    req = g.RecallRequest(query="kitten", purpose=m.PURPOSE_CONVERSATION)
    assert code_of(stack.memory.Recall, req) == UNAUTH
    assert code_of(stack.memory.Recall, req, metadata=(("authorization", "Bearer rct_wrong"),)) == UNAUTH
    assert code_of(stack.memory.Recall, req, metadata=(("authorization", "Basic abc"),)) == UNAUTH
    assert code_of(stack.memory.Recall, req, metadata=(("authorization", "Bearer " + "x" * 5000),)) == UNAUTH
    # A member token is not an operator credential, and the operator token is not a member token.
    assert (
        code_of(stack.admin.CreateWorkspace, g.CreateWorkspaceRequest(name="x"), metadata=world["bob"].md()) == UNAUTH
    )
    assert code_of(stack.memory.Recall, req, metadata=stack.op()) == UNAUTH


def test_revoked_token_is_unauthenticated(stack, world):
    temp = stack.member(world["ws"])
    assert temp.recall("kitten").items
    resp = stack.admin.RevokeMember(
        g.RevokeMemberRequest(workspace_id=world["ws"], member_id=temp.id), metadata=stack.op()
    )
    assert resp.revoked == 1
    assert code_of(temp.recall, "kitten") == UNAUTH


def test_admin_bad_input(stack):
    op = stack.op()
    assert code_of(stack.admin.CreateWorkspace, g.CreateWorkspaceRequest(name=""), metadata=op) == INVALID
    assert code_of(stack.admin.CreateWorkspace, g.CreateWorkspaceRequest(name="n" * 201), metadata=op) == INVALID
    assert code_of(stack.admin.AddMember, g.AddMemberRequest(workspace_id="nope"), metadata=op) == NOT_FOUND
    assert code_of(stack.admin.AddMember, g.AddMemberRequest(workspace_id=str(uuid.uuid4())), metadata=op) == NOT_FOUND
    ws = stack.workspace("admin bad input")
    assert code_of(stack.admin.AddMember, g.AddMemberRequest(workspace_id=ws, purposes=[9]), metadata=op) == INVALID
    assert code_of(stack.admin.AddMember, g.AddMemberRequest(workspace_id=ws, role=5), metadata=op) == INVALID


def test_status_reports_dependencies(stack, world):
    resp = stack.admin.GetStatus(g.GetStatusRequest(), metadata=stack.op())
    state = {d.name: d.serving for d in resp.dependencies}
    assert state == {"store": True, "embed": True, "rank": True, "reranker": False}
    # The backlog's exact value after known writes is checked in test_degrade.py, with the embed service down.


def test_recall_takes_the_short_path(world):
    bob = world["bob"]
    degraded = REGISTRY.get_sample_value("recallatron_recall_degraded_total", {"stage": "rerank"}) or 0.0
    # Re-rank asked for, but the embed service has no re-ranker configured: no Rerank call,
    # reranked=false, and not a degraded recall (nothing is missing).
    # The arms carry their head's memories: no GetMemories (tests/test_recall_memories.py has a head
    # they did not carry).
    # The token accepted once: its recalls then authenticate in their keyword call (test_recall_fold.py).
    bob.recall("warm-up")
    calls = internal_calls(lambda: bob.recall("kitten shelter"))
    assert calls == Counter({"LexicalCandidates": 1, "EmbedQueries": 1, "DenseCandidates": 1, "FuseAndWalk": 1})
    assert (REGISTRY.get_sample_value("recallatron_recall_degraded_total", {"stage": "rerank"}) or 0.0) == degraded
    calls = internal_calls(lambda: bob.recall("sourdough", mode=m.RECALL_MODE_LEXICAL, skip_rerank=True))
    assert calls == Counter({"LexicalCandidates": 1, "FuseAndWalk": 1})
    # Nothing found: nothing to fuse, walk or fetch.
    calls = internal_calls(lambda: bob.recall("zyzzogeton", mode=m.RECALL_MODE_LEXICAL))
    assert calls == Counter({"LexicalCandidates": 1})


def test_bytes_that_do_not_parse_are_invalid_argument_not_internal(stack, world):
    """Found by a hostile test: a string field holding invalid UTF-8 made gRPC's deserializer raise,
    and the caller got INTERNAL "Exception deserializing request!". Each service now answers
    INVALID_ARGUMENT with the parser's reason (servicekit.server.ErrorInterceptor)."""
    good = g.RecallRequest(query="parrot XY", purpose=m.PURPOSE_CONVERSATION).SerializeToString()
    bad = good.replace(b"XY", b"\xff\xfe")
    call = stack.channel.unary_unary("/recallatron.gateway.v1.MemoryService/Recall")
    with pytest.raises(grpc.RpcError) as err:
        call(bad, metadata=world["alice"].md(), timeout=30)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value.details()
    assert "not a valid protobuf message" in err.value.details()
    truncated = g.RememberRequest(body="the harbour bell", purpose=m.PURPOSE_CONVERSATION).SerializeToString()[:-3]
    with pytest.raises(grpc.RpcError) as err:
        stack.channel.unary_unary("/recallatron.gateway.v1.MemoryService/Remember")(
            truncated, metadata=world["alice"].md(), timeout=30
        )
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    # The same bytes, well formed, are answered as usual.
    ok = g.RecallResponse.FromString(call(good, metadata=world["alice"].md(), timeout=30))
    assert ok.mode != m.RECALL_MODE_UNSPECIFIED
