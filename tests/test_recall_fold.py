"""A recall's authentication folded into its first keyword call (gateway/recall.py,
``Recaller.recall_presented``; store LexicalCandidatesRequest.token): once the store has accepted a
token, its recalls make no Authenticate call of their own, answer exactly as before, and a token
revoked since fails on its next call. Real services (conftest.py's stack)."""

from __future__ import annotations

from collections import Counter

import grpc
import pytest
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m
from recallatron.store.v1 import store_pb2 as s

from gateway.auth import PURPOSES_METADATA, Accepted, AcceptedLately, Presented
from tests.recall_calls import internal_calls, store_callers

HYBRID_CALLS = {"LexicalCandidates": 1, "EmbedQueries": 1, "DenseCandidates": 1, "FuseAndWalk": 1}
TEXTS = (
    "The harbour ferry leaves at seven on weekdays.",
    "Ferry tickets are sold at the harbour kiosk.",
    "The lighthouse keeper logs the fog signal every night.",
)


@pytest.fixture(scope="module")
def world(stack):
    ws = stack.workspace("fold")
    both = stack.member(ws, purposes=[m.PURPOSE_CONVERSATION, m.PURPOSE_TASKS], display_name="Ana")
    for text in TEXTS:
        both.remember(text)
    private = both.remember("Ana's own ferry pass number is 4411.", audience=m.AUDIENCE_MEMBER)
    tasks = both.remember("Book the ferry for the team outing.", purpose=m.PURPOSE_TASKS)
    other = stack.member(ws, purposes=[m.PURPOSE_CONVERSATION])
    stack.wait_backlog_empty()
    return {"ws": ws, "ana": both, "other": other, "private": private, "tasks": tasks}


def recall(stack, who, query, metadata=(), **kw):
    req = g.RecallRequest(query=query, purpose=kw.pop("purpose", m.PURPOSE_CONVERSATION), skip_rerank=True, **kw)
    return stack.memory.Recall(req, metadata=[*who.md(), *metadata])


def code_of(call) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as err:
        call()
    return err.value.code()


def test_the_first_recall_authenticates_and_the_next_ones_fold_it_in(stack, world):
    member = stack.member(world["ws"])
    answers = []
    first = internal_calls(lambda: answers.append(recall(stack, member, "harbour ferry")))
    assert first == Counter({"Authenticate": 1, **HYBRID_CALLS})
    second = internal_calls(lambda: answers.append(recall(stack, member, "harbour ferry")))
    assert second == Counter(HYBRID_CALLS)
    lexical = internal_calls(lambda: answers.append(recall(stack, member, "harbour ferry", mode=m.RECALL_MODE_LEXICAL)))
    assert lexical == Counter({"LexicalCandidates": 1, "FuseAndWalk": 1})
    # Dense mode asks no keyword call to carry the token: Authenticate first, as before.
    dense = internal_calls(lambda: recall(stack, member, "harbour ferry", mode=m.RECALL_MODE_DENSE))
    assert dense == Counter({"Authenticate": 1, "EmbedQueries": 1, "DenseCandidates": 1, "FuseAndWalk": 1})
    # The same answer either way, memories as Read shows them (the author's display name included).
    assert answers[0] == answers[1]
    assert {it.memory.body for it in answers[1].items[:2]} == {TEXTS[0], TEXTS[1]}
    for item in answers[1].items:
        assert item.memory == member.read(item.memory.id)
        assert item.memory.created_by_name == "Ana"
    # Time words ask the keyword arm twice: both calls carry the token.
    timed = internal_calls(lambda: recall(stack, member, "harbour ferry today"))
    assert timed == Counter({"LexicalCandidates": 2, "EmbedQueries": 1, "DenseCandidates": 2, "FuseAndWalk": 1})


def test_a_token_revoked_after_a_folded_recall_fails_on_its_next_call(stack, world):
    member = stack.member(world["ws"])
    recall(stack, member, "harbour ferry")  # accepted: the next recall folds
    stack.admin.RevokeMember(g.RevokeMemberRequest(workspace_id=world["ws"], member_id=member.id), metadata=stack.op())
    calls = Counter()

    def refused():
        calls.update(internal_calls(lambda: code_of(lambda: recall(stack, member, "harbour ferry"))))

    assert code_of(lambda: recall(stack, member, "harbour ferry")) == grpc.StatusCode.UNAUTHENTICATED
    # Refused in the folded keyword call: nothing read for it, nothing fused. Then the token is
    # no longer taken for accepted: Authenticate first, refused again.
    refused()
    assert calls == Counter({"Authenticate": 1})
    for mode in (m.RECALL_MODE_LEXICAL, m.RECALL_MODE_HYBRID, 0):
        assert code_of(lambda mode=mode: recall(stack, member, "ferry", mode=mode)) == grpc.StatusCode.UNAUTHENTICATED


def test_the_folded_refusal_asks_nothing_past_the_keyword_call(stack, world):
    member = stack.member(world["ws"])
    recall(stack, member, "harbour ferry")
    stack.admin.RevokeMember(g.RevokeMemberRequest(workspace_id=world["ws"], member_id=member.id), metadata=stack.op())
    calls = internal_calls(lambda: code_of(lambda: recall(stack, member, "harbour ferry", mode=m.RECALL_MODE_LEXICAL)))
    assert calls == Counter({"LexicalCandidates": 1})
    # Hybrid: the question may already be embedded (the cost of folding, once per refused token),
    # but no dense query is asked and nothing is fused.
    member2 = stack.member(world["ws"])
    recall(stack, member2, "harbour ferry")
    stack.admin.RevokeMember(g.RevokeMemberRequest(workspace_id=world["ws"], member_id=member2.id), metadata=stack.op())
    calls = internal_calls(lambda: code_of(lambda: recall(stack, member2, "harbour ferry")))
    assert calls == Counter({"LexicalCandidates": 1, "EmbedQueries": 1})


def test_narrowed_purposes_hold_in_folded_recalls(stack, world):
    ana = world["ana"]
    narrowed = [(PURPOSES_METADATA, "conversation")]
    for _ in range(2):  # the first authenticates, the second folds
        resp = recall(stack, ana, "ferry", metadata=narrowed)
        assert world["tasks"].id not in {it.memory.id for it in resp.items}
        assert world["private"].id in {it.memory.id for it in resp.items}
        assert (
            code_of(lambda: recall(stack, ana, "ferry", metadata=narrowed, purpose=m.PURPOSE_TASKS))
            == grpc.StatusCode.PERMISSION_DENIED
        )
        resp = recall(stack, ana, "ferry", purpose=m.PURPOSE_TASKS)
        assert [it.memory.id for it in resp.items] == [world["tasks"].id]
    # A purpose the token does not grant: refused, never widened, folded or not.
    other = world["other"]
    recall(stack, other, "ferry")
    for _ in range(2):
        assert (
            code_of(lambda: recall(stack, other, "ferry", metadata=[(PURPOSES_METADATA, "tasks")]))
            == grpc.StatusCode.PERMISSION_DENIED
        )
        assert code_of(lambda: recall(stack, other, "ferry", purpose=m.PURPOSE_TASKS)) == (
            grpc.StatusCode.PERMISSION_DENIED
        )
    # Another member's private memory never shows, folded or not.
    for _ in range(2):
        assert world["private"].id not in {it.memory.id for it in recall(stack, other, "ferry pass number").items}


def test_bad_requests_are_refused_folded_or_not(stack, world):
    member = stack.member(world["ws"])
    bad = [
        {"query": ""},
        {"query": "x" * 40_000},
        {"query": "ferry", "mode": 9},
        {"query": "ferry", "top_k": -1},
        {"query": "ferry", "mode": m.RECALL_MODE_DENSE, "include_superseded": True},
    ]
    for attempt in range(2):
        for fields in bad:
            req = g.RecallRequest(purpose=m.PURPOSE_CONVERSATION, **fields)
            code = code_of(lambda req=req: stack.memory.Recall(req, metadata=member.md()))
            assert code == grpc.StatusCode.INVALID_ARGUMENT, (attempt, fields)
        req = g.RecallRequest(query="ferry")  # no purpose
        assert (
            code_of(lambda req=req: stack.memory.Recall(req, metadata=member.md())) == grpc.StatusCode.INVALID_ARGUMENT
        )
        recall(stack, member, "ferry")


def test_a_changed_default_mode_is_followed_at_once(stack, world):
    ws = stack.workspace("fold modes")
    member = stack.member(ws)
    member.remember("The harbour ferry leaves at seven on weekdays.")
    stack.wait_backlog_empty()

    def set_default(mode):
        stack.admin.UpdateWorkspaceSettings(
            g.UpdateWorkspaceSettingsRequest(workspace_id=ws, default_mode=mode), metadata=stack.op()
        )

    set_default(m.RECALL_MODE_LEXICAL)
    assert member.recall("harbour ferry").mode == m.RECALL_MODE_LEXICAL
    calls = internal_calls(lambda: member.recall("harbour ferry"))
    assert calls == Counter({"LexicalCandidates": 1, "FuseAndWalk": 1})
    # Dense now: the folded keyword answer says so, and the recall is asked again in dense mode.
    set_default(m.RECALL_MODE_DENSE)
    resp = None

    def run():
        nonlocal resp
        resp = member.recall("harbour ferry")

    calls = internal_calls(run)
    assert resp.mode == m.RECALL_MODE_DENSE and [it.memory.body for it in resp.items] == [
        "The harbour ferry leaves at seven on weekdays."
    ]
    assert calls == Counter({"LexicalCandidates": 1, "EmbedQueries": 1, "DenseCandidates": 1, "FuseAndWalk": 1})
    # Back to hybrid: the hint says dense, so Authenticate first; then folded again.
    set_default(m.RECALL_MODE_HYBRID)
    assert member.recall("harbour ferry").mode == m.RECALL_MODE_HYBRID
    assert internal_calls(lambda: member.recall("harbour ferry")) == Counter(HYBRID_CALLS)


def test_the_store_authenticates_a_keyword_request_that_carries_its_token(stack, world):
    ana = world["ana"]
    channel, store, callers = store_callers(stack, ana=ana)
    try:
        auth = store.Authenticate(s.AuthenticateRequest(token=ana.token))
        plain = store.LexicalCandidates(
            s.LexicalCandidatesRequest(
                caller=callers["ana"],
                purpose=m.PURPOSE_CONVERSATION,
                query="ferry",
                limit=50,
                memories_top=3,
                expiry_days=auth.settings.expiry_days,
            )
        )
        folded = store.LexicalCandidates(
            s.LexicalCandidatesRequest(
                token=ana.token, purpose=m.PURPOSE_CONVERSATION, query="ferry", limit=50, memories_top=3
            )
        )
        assert list(folded.candidates) == list(plain.candidates) and len(plain.candidates) >= 3
        assert folded.caller == auth.caller and folded.settings == auth.settings
        assert not plain.HasField("caller") and not plain.HasField("settings")
        narrowed = store.LexicalCandidates(
            s.LexicalCandidatesRequest(
                token=ana.token,
                narrowed_purposes=[m.PURPOSE_CONVERSATION],
                purpose=m.PURPOSE_CONVERSATION,
                query="ferry",
                limit=50,
            )
        )
        assert list(narrowed.caller.granted_purposes) == [m.PURPOSE_CONVERSATION]

        def code(**fields):
            req = s.LexicalCandidatesRequest(purpose=m.PURPOSE_CONVERSATION, query="ferry", limit=50)
            for name, value in fields.items():
                if name == "caller":
                    req.caller.CopyFrom(value)
                elif isinstance(value, list):
                    getattr(req, name).extend(value)
                else:
                    setattr(req, name, value)
            return code_of(lambda: store.LexicalCandidates(req))

        unauthenticated = grpc.StatusCode.UNAUTHENTICATED
        assert code(token="not a token") == unauthenticated
        assert code(token="x" * 10_000) == unauthenticated
        assert code(token="\x00") == unauthenticated
        # The token is checked first, as Authenticate's: a bad limit with a bad token says so.
        assert code(token="not a token", limit=0) == unauthenticated
        invalid = grpc.StatusCode.INVALID_ARGUMENT
        assert code(token=ana.token, caller=callers["ana"]) == invalid
        assert code(token=ana.token, expiry_days=30) == invalid
        assert code(narrowed_purposes=[m.PURPOSE_CONVERSATION], caller=callers["ana"]) == invalid
        assert code(token=ana.token, limit=0) == invalid
        denied = grpc.StatusCode.PERMISSION_DENIED
        other_token = world["other"].token
        assert code(token=other_token, narrowed_purposes=[m.PURPOSE_TASKS]) == denied
        assert code(token=ana.token, narrowed_purposes=[m.PURPOSE_TASKS]) == denied  # asks conversation
        twice = store.LexicalCandidates(
            s.LexicalCandidatesRequest(
                token=ana.token,
                narrowed_purposes=[m.PURPOSE_CONVERSATION] * 2,
                purpose=m.PURPOSE_CONVERSATION,
                query="ferry",
                limit=50,
            )
        )
        assert list(twice.caller.granted_purposes) == [m.PURPOSE_CONVERSATION]
        for values in ([77], [0], [-1], [2**31 - 1], [m.PURPOSE_CONVERSATION] * 5, list(range(1, 5)) * 25_000):
            assert code(token=ana.token, narrowed_purposes=values) == invalid, values[:5]
        # Still the token first.
        assert code(token="not a token", narrowed_purposes=[77]) == unauthenticated
    finally:
        channel.close()


def test_accepted_lately_is_a_bounded_expiring_hint():
    now = [0.0]
    seen = AcceptedLately(seconds=10, size=2, clock=lambda: now[0])
    caller = m.Caller(granted_purposes=[m.PURPOSE_CONVERSATION])
    a, b, c = (Presented(token, None) for token in "abc")
    assert seen.get(a) is None
    seen.accepted(a, caller, s.WorkspaceSettings(default_mode=m.RECALL_MODE_LEXICAL))
    assert seen.get(a) == Accepted(m.RECALL_MODE_LEXICAL, frozenset({m.PURPOSE_CONVERSATION}))
    # The same token narrowed is another sign-in.
    assert seen.get(Presented("a", frozenset({m.PURPOSE_CONVERSATION}))) is None
    seen.accepted(b, caller, s.WorkspaceSettings())
    seen.accepted(c, caller, s.WorkspaceSettings(default_mode=m.RECALL_MODE_DENSE))
    assert seen.get(a) is None  # the oldest, dropped for the third
    assert seen.get(b).default_mode == 0 and seen.get(c).default_mode == m.RECALL_MODE_DENSE
    now[0] = 10.5
    assert seen.get(b) is None and seen.get(c) is None
    seen.accepted(c, caller, s.WorkspaceSettings())
    seen.refused(c)
    assert seen.get(c) is None
    seen.refused(Presented("never seen", None))  # nothing to forget: no error
    # Tokens are kept only as digests.
    seen.accepted(Presented("secret token", None), caller, s.WorkspaceSettings())
    assert all(isinstance(key, bytes) and len(key) == 32 for key in seen._seen)


def test_errors_come_in_one_order_folded_or_not(stack, world):
    """Found by a review: the folded path left the purpose to the store, after the request's other
    checks, so the same bad request got PERMISSION_DENIED first and INVALID_ARGUMENT later."""
    member = world["other"]  # conversation only
    cases = [
        ({"purpose": m.PURPOSE_TASKS, "top_k": -1}, (), grpc.StatusCode.INVALID_ARGUMENT),
        ({"purpose": m.PURPOSE_TASKS}, (), grpc.StatusCode.PERMISSION_DENIED),
        ({"top_k": 201}, [(PURPOSES_METADATA, "reporting")], grpc.StatusCode.INVALID_ARGUMENT),
        ({"purpose": 99}, [(PURPOSES_METADATA, "reporting")], grpc.StatusCode.INVALID_ARGUMENT),
        ({}, [(PURPOSES_METADATA, "reporting")], grpc.StatusCode.PERMISSION_DENIED),
    ]
    for attempt in range(3):
        for fields, metadata, want in cases:
            fields = {"purpose": m.PURPOSE_CONVERSATION, **fields}
            req = g.RecallRequest(query="ferry", **fields)
            got = code_of(lambda req=req, md=metadata: stack.memory.Recall(req, metadata=[*member.md(), *md]))
            assert got == want, (attempt, fields, metadata)
        recall(stack, member, "ferry")  # accepted: the next attempt may fold


def test_a_purpose_not_granted_is_not_folded(stack, world):
    """Found by a review: once folded, each recall for a purpose the sign-in lacks cost an
    embedding. Only a granted purpose folds; a purpose refused drops the sign-in from the hint."""
    member = stack.member(world["ws"], purposes=[m.PURPOSE_CONVERSATION])
    recall(stack, member, "ferry")
    for _ in range(3):
        calls = internal_calls(lambda: code_of(lambda: recall(stack, member, "ferry", purpose=m.PURPOSE_TASKS)))
        assert calls == Counter({"Authenticate": 1})
    assert internal_calls(lambda: recall(stack, member, "ferry")) == Counter(HYBRID_CALLS)


def test_other_calls_check_the_token_before_the_narrowing(stack, world):
    """Found by a review: a revoked token with bad recallatron-purposes metadata is UNAUTHENTICATED
    on every call but Recall, whose request is read first (README.md)."""
    member = stack.member(world["ws"])
    stack.admin.RevokeMember(g.RevokeMemberRequest(workspace_id=world["ws"], member_id=member.id), metadata=stack.op())
    bad = [*member.md(), (PURPOSES_METADATA, "nonsense")]
    req = g.RememberRequest(purpose=m.PURPOSE_CONVERSATION, kind=m.KIND_NOTE, body="x")
    assert code_of(lambda: stack.memory.Remember(req, metadata=bad)) == grpc.StatusCode.UNAUTHENTICATED
    assert code_of(lambda: stack.memory.Read(g.ReadRequest(id=world["private"].id), metadata=bad)) == (
        grpc.StatusCode.UNAUTHENTICATED
    )
    good = stack.member(world["ws"])
    read = g.ReadRequest(id=world["private"].id)
    meta = [*good.md(), (PURPOSES_METADATA, "nonsense")]
    assert code_of(lambda: stack.memory.Read(read, metadata=meta)) == grpc.StatusCode.INVALID_ARGUMENT


def test_a_control_plane_failure_in_a_folded_call_is_reported_as_authenticate_reports_it(stack, world, monkeypatch):
    """Found by a review: a failure of the control plane while the store resolved a token in a
    keyword call was reported as the workspace's (WORKSPACE_UNAVAILABLE), which the gateway's
    breaker does not count. It must say what Authenticate says."""
    from psycopg_pool import PoolTimeout

    from servicekit.errors import error_info
    from store_service.control.plane import ControlPlane

    ana = world["ana"]
    channel, store, _ = store_callers(stack)
    try:

        def busy(self, token):
            raise PoolTimeout("couldn't get a connection after 5.00 sec")

        monkeypatch.setattr(ControlPlane, "authenticate", busy)
        errors = []
        for call in (
            lambda: store.Authenticate(s.AuthenticateRequest(token=ana.token)),
            lambda: store.LexicalCandidates(
                s.LexicalCandidatesRequest(token=ana.token, purpose=m.PURPOSE_CONVERSATION, query="ferry", limit=5)
            ),
        ):
            with pytest.raises(grpc.RpcError) as err:
                call()
            info = error_info(err.value)
            errors.append((err.value.code(), info.reason if info else None, err.value.details()))
        assert errors[0] == errors[1] and errors[0][0] == grpc.StatusCode.UNAVAILABLE
        assert "workspace" not in errors[1][2]
    finally:
        channel.close()
