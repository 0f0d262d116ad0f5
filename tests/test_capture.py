"""Capture: memories a conversation turn states explicitly, end to end through the gateway against
real PostgreSQL (tests/conftest.py). Each rule that skips a proposal is a no-op with its reason;
malformed requests are INVALID_ARGUMENT; request_id makes a retry safe; ``recallatron capture``."""

from __future__ import annotations

import json
import uuid

import grpc
import psycopg
import pytest
from cli_runner import at_gateway
from conftest import code_of, scratch_workspace_db
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

from servicekit.errors import error_info
from store_service.database import migrate
from store_service.records import known

SPAN_NOT_IN_TURN, EMPTY_BODY, ALREADY_KNOWN = (
    m.CAPTURE_SKIP_REASON_SPAN_NOT_IN_TURN,
    m.CAPTURE_SKIP_REASON_EMPTY_BODY,
    m.CAPTURE_SKIP_REASON_ALREADY_KNOWN,
)
TURN = "By the way, my sister Ana moved to Porto last spring, and she now works as a pilot."


def proposal(body: str, span: str, **kw) -> m.CaptureProposal:
    return m.CaptureProposal(body=body, span=span, audience=kw.pop("audience", m.AUDIENCE_WORKSPACE), **kw)


def capture(member, *proposals, turn: str = TURN, purpose=m.PURPOSE_CONVERSATION, request_id: str = ""):
    req = g.CaptureRequest(purpose=purpose, turn=turn, proposals=proposals, request_id=request_id)
    return member.stack.memory.Capture(req, metadata=member.md())


def history(member) -> list:
    """Every live history turn of ``member``, oldest first."""
    return list(member.stack.memory.SearchHistory(g.SearchHistoryRequest(page_size=200), metadata=member.md()).entries)


def memory_count(stack, ws: str) -> int:
    with stack.db(ws) as conn:
        return conn.execute("SELECT count(*) FROM memory").fetchone()[0]


@pytest.fixture
def world(stack):
    ws = stack.workspace("capture")
    return {"ws": ws, "alice": stack.member(ws), "bob": stack.member(ws)}


def test_a_valid_proposal_is_stored_with_its_evidence_and_recalled(world):
    alice = world["alice"]
    resp = capture(
        alice,
        proposal(
            "Alice's sister Ana moved to Porto in the spring.",
            "my sister Ana moved to Porto last spring",
            kind=m.KIND_FACT,
            title="Ana",
            entities=[m.EntityMention(name="Ana")],
        ),
    )
    assert not resp.replayed and len(resp.results) == 1 and resp.results[0].HasField("memory")
    mem = resp.results[0].memory
    assert (mem.origin, mem.kind, mem.title, mem.created_by) == (m.ORIGIN_TOLD, m.KIND_FACT, "Ana", alice.id)
    assert mem.evidence.span == "my sister Ana moved to Porto last spring" and mem.evidence.turn == ""
    read = alice.read(mem.id)
    assert read.body == "Alice's sister Ana moved to Porto in the spring."
    assert (read.evidence.span, read.evidence.turn) == (mem.evidence.span, "")  # the turn: her history
    assert [link.target_entity_name for link in read.links] == ["Ana"]
    hits = alice.recall("Where did Ana move?", mode=m.RECALL_MODE_LEXICAL)
    assert hits.items[0].memory.id == mem.id
    bob_sees = world["bob"].read(mem.id)  # a workspace memory: its readers see its evidence
    assert bob_sees.evidence.span == mem.evidence.span


def test_the_span_is_matched_after_the_keyword_arms_normalisation(world):
    # Case, runs of whitespace, NFKC (the ligature, full-width letters) and the non-breaking hyphen.
    turn = "The ﬁle QA\u20113141 is due on FRIDAY,\n\n  says the ＣＦＯ."
    resp = capture(
        world["alice"],
        proposal("File QA-3141 is due on Friday.", "the file qa-3141 is due on friday, says the cfo"),
        turn=turn,
    )
    assert resp.results[0].HasField("memory"), resp
    assert known.span_in_turn("qa-3141   IS due", turn) and not known.span_in_turn("QA 3141", turn)


def test_each_rule_is_a_no_op_with_its_reason(stack, world):
    alice, bob = world["alice"], world["bob"]
    existing = alice.remember("Ana works as a pilot.")
    before = memory_count(stack, world["ws"])
    resp = capture(
        alice,
        proposal("Ana moved to Lisbon.", "my sister Ana moved to Lisbon"),  # not what the turn says
        proposal("Ana is a pilot.", "   "),  # a blank span
        proposal("   ", "she now works as a pilot"),  # an empty body
        proposal("", "she now works as a pilot"),
        proposal("  ana WORKS as a   pilot. ", "she now works as a pilot"),  # the same body, normalised
    )
    reasons = [(r.skipped.reason, r.skipped.known_memory_id) for r in resp.results]
    assert reasons == [
        (SPAN_NOT_IN_TURN, ""),
        (SPAN_NOT_IN_TURN, ""),
        (EMPTY_BODY, ""),
        (EMPTY_BODY, ""),
        (ALREADY_KNOWN, existing.id),
    ]
    assert [r.skipped.message for r in resp.results[:3]] == [
        "the span does not occur in the turn",
        "the span is blank",
        "the body is empty or blank",
    ]
    assert not any(r.HasField("memory") for r in resp.results)
    assert memory_count(stack, world["ws"]) == before
    with stack.db(world["ws"]) as conn:  # nothing stored: no turn kept either
        assert conn.execute("SELECT count(*) FROM capture").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM history_turn").fetchone()[0] == 0

    # Known means readable by the caller: bob's private memory with the same body is not alice's.
    private = bob.remember("Ana has a cat called Miso.", audience=m.AUDIENCE_MEMBER)
    turn = "Ana has a cat called Miso, I think."
    resp = capture(alice, proposal("Ana has a cat called Miso.", "Ana has a cat called Miso"), turn=turn)
    assert resp.results[0].HasField("memory") and resp.results[0].memory.id != private.id
    # Two proposals of one call with one body: the second is known from the first.
    resp = capture(bob, proposal("The pilot is Ana.", "works as a pilot"), proposal("the pilot is ana.", "Ana"))
    first = resp.results[0].memory.id
    assert (resp.results[1].skipped.reason, resp.results[1].skipped.known_memory_id) == (ALREADY_KNOWN, first)
    # A superseded or forgotten memory is no longer known.
    stack.memory.Forget(g.ForgetRequest(id=existing.id, reason="test"), metadata=alice.md())
    resp = capture(alice, proposal("Ana works as a pilot.", "works as a pilot"))
    assert resp.results[0].HasField("memory")


def test_a_retry_is_a_no_op_answered_with_the_first_outcome(stack, world):
    alice = world["alice"]
    props = [proposal("Ana lives in Porto.", "Ana moved to Porto"), proposal("x", "not in the turn")]
    first = capture(alice, *props, request_id="turn-42")
    stored = first.results[0].memory
    count = memory_count(stack, world["ws"])
    again = capture(alice, *props, request_id="turn-42")
    assert again.replayed and not first.replayed
    assert again.results[0].memory.id == stored.id and again.results[0].memory.evidence == stored.evidence
    assert again.results[1].skipped.reason == SPAN_NOT_IN_TURN
    assert memory_count(stack, world["ws"]) == count  # nothing written twice (not "already known" either)
    # Another member's identical request id is another id.
    other = capture(world["bob"], proposal("Ana's home is Porto.", "Ana moved to Porto"), request_id="turn-42")
    assert not other.replayed and other.results[0].HasField("memory")
    # The same id with another request is refused and writes nothing.
    with pytest.raises(grpc.RpcError) as err:
        capture(alice, proposal("Ana lives in Porto now.", "Ana moved to Porto"), request_id="turn-42")
    assert err.value.code() == grpc.StatusCode.ALREADY_EXISTS
    info = error_info(err.value)
    assert info.reason == "REQUEST_ID_REUSED" and info.metadata["operation"] == "capture"
    assert memory_count(stack, world["ws"]) == count + 1
    # A request id whose capture stored nothing is still bound to its request.
    none = capture(alice, proposal("", "Ana"), request_id="turn-43")
    assert capture(alice, proposal("", "Ana"), request_id="turn-43").replayed and not none.replayed
    assert code_of(capture, alice, proposal("", "Porto"), request_id="turn-43") == grpc.StatusCode.ALREADY_EXISTS


def test_forgetting_a_captured_memory_erases_its_evidence(stack, world):
    alice = world["alice"]
    mem = capture(alice, proposal("Ana flies for a living.", "works as a pilot"), request_id="t1").results[0].memory
    stack.memory.Forget(g.ForgetRequest(id=mem.id, reason="asked"), metadata=alice.md())
    with stack.db(world["ws"]) as conn:
        span, fingerprint = conn.execute(
            "SELECT e.span, c.fingerprint FROM memory_evidence e JOIN capture c ON c.id = e.capture_id "
            "WHERE e.memory_id = %s",
            (uuid.UUID(mem.id),),
        ).fetchone()
        body_key = conn.execute("SELECT body_key FROM memory WHERE id = %s", (uuid.UUID(mem.id),)).fetchone()[0]
    assert (span, fingerprint, body_key) == ("", None, None)
    with pytest.raises(grpc.RpcError) as err:  # the id stays used
        capture(alice, proposal("Ana flies for a living.", "works as a pilot"), request_id="t1")
    assert err.value.code() == grpc.StatusCode.ALREADY_EXISTS and "forgotten" in err.value.details()
    # The turn is her history, not the memory's: it stays hers until she forgets it there.
    kept = history(alice)
    assert [(e.turn.text, e.turn.chat_id) for e in kept] == [(TURN, "capture")]
    stack.memory.ForgetHistory(g.ForgetHistoryRequest(turn_ids=[kept[0].turn_id]), metadata=alice.md())
    assert history(alice) == []


def test_malformed_requests_are_invalid_argument(stack, world):
    alice = world["alice"]
    ok = proposal("Ana is a pilot.", "works as a pilot")
    assert capture(alice).results == []  # no proposals is a valid, empty answer
    cases = [
        ({"turn": ""}, "turn"),
        ({"turn": "   \n"}, "turn"),
        ({"turn": "\u200b\u2060 \ufeff"}, "turn"),  # invisible characters only: blank, as history has it
        ({"turn": "x" * 65_537}, "turn"),
        ({"turn": "a\x00b"}, "turn"),
        ({"request_id": "r" * 201}, "request_id"),
    ]
    for kwargs, field in cases:
        with pytest.raises(grpc.RpcError) as err:
            capture(alice, ok, **kwargs)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, kwargs
        assert error_info(err.value).metadata["field"] == field
    with pytest.raises(grpc.RpcError) as err:
        capture(alice, *[ok] * 21)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "at most 20 proposals" in err.value.details()
    bad = [
        (proposal("Ana.", "Ana", kind=9), "proposals[1].kind"),
        (proposal("Ana.", "Ana", confidence=1.5), "proposals[1].confidence"),
        (proposal("Ana.", "Ana", audience=m.AUDIENCE_UNSPECIFIED), "proposals[1].audience"),
        (proposal("a" * 65_537, "Ana"), "proposals[1].body"),
        (proposal("Ana.", "s" * 65_537), "proposals[1].span"),
        (proposal("Ana.", "Ana", title="t" * 1_001), "proposals[1].title"),
        (proposal("Ana.", "Ana", entities=[m.EntityMention(name="")]), "proposals[1].entities"),
    ]
    before = memory_count(stack, world["ws"])
    for prop, field in bad:
        with pytest.raises(grpc.RpcError) as err:
            capture(alice, ok, prop)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, field
        assert error_info(err.value).metadata["field"] == field and err.value.details().startswith("proposals[1]: ")
    assert memory_count(stack, world["ws"]) == before  # a malformed call stores nothing, not even ok
    unknown = proposal("Ana.", "Ana", entities=[m.EntityMention(entity_id=str(uuid.uuid4()))])
    assert code_of(capture, alice, ok, unknown) == grpc.StatusCode.NOT_FOUND
    assert code_of(capture, alice, ok, purpose=m.PURPOSE_UNSPECIFIED) == grpc.StatusCode.INVALID_ARGUMENT
    narrow = stack.member(world["ws"], purposes=[m.PURPOSE_TASKS])
    assert code_of(capture, narrow, ok) == grpc.StatusCode.PERMISSION_DENIED
    req = g.CaptureRequest(purpose=m.PURPOSE_CONVERSATION, turn=TURN, proposals=[ok])
    assert code_of(stack.memory.Capture, req) == grpc.StatusCode.UNAUTHENTICATED
    assert memory_count(stack, world["ws"]) == before


# A turn whose words around the span are nobody's business but its speaker's.
PRIVATE_TURN = (
    "Before the call: the quarterly review moved to Thursday 14:00. Also my bank PIN is 8841 "
    "and I see the cardiologist on Friday, please keep that between us."
)
REVIEW_SPAN = "the quarterly review moved to Thursday 14:00"
OUTSIDE = ("8841", "PIN", "cardiologist", "between us", "Before the call")


def shows_nothing_outside(message) -> None:
    """Neither the encoded message nor its text form holds a word of the turn outside the span."""
    data, text = message.SerializeToString(), str(message)
    for word in OUTSIDE:
        assert word.encode() not in data and word not in text, (word, type(message).__name__)


def test_readers_see_the_span_of_a_captured_memory_never_the_rest_of_the_turn(stack):
    ws = stack.workspace("capture evidence")
    stack.admin.UpdateWorkspaceSettings(
        g.UpdateWorkspaceSettingsRequest(workspace_id=ws, context_bundle=True), metadata=stack.op()
    )
    alice, bob, admin = stack.member(ws), stack.member(ws), stack.member(ws, role=m.ROLE_ADMIN)
    first_proposals = (
        proposal("The quarterly review is on Thursday at 14:00.", REVIEW_SPAN, kind=m.KIND_FACT, title="Review"),
        proposal("Not stated.", "the board meeting moved"),  # skipped: a skip quotes nothing either
    )
    resp = capture(alice, *first_proposals, turn=PRIVATE_TURN, request_id="review-1")
    mem = resp.results[0].memory
    assert mem.id and mem.evidence == m.CaptureEvidence(span=REVIEW_SPAN)
    shows_nothing_outside(resp)
    for reader in (bob, admin, alice):  # every reader of the workspace memory, its author too
        read = reader.read(mem.id, include_history=True)
        assert (read.body, read.evidence.span, read.evidence.turn) == (mem.body, REVIEW_SPAN, "")
        shows_nothing_outside(read)
        for mode in (m.RECALL_MODE_LEXICAL, m.RECALL_MODE_HYBRID):
            hits = reader.recall("when is the quarterly review?", mode=mode)
            assert mem.id in [it.memory.id for it in hits.items]
            shows_nothing_outside(hits)
        listed = stack.memory.ListMemories(  # what `recallatron export` reads
            g.ListMemoriesRequest(include_history=True, superseded=m.SUPERSEDED_FILTER_ALL), metadata=reader.md()
        )
        assert mem.id in [x.id for x in listed.memories]
        shows_nothing_outside(listed)
        bundle = stack.memory.GetContext(g.GetContextRequest(purpose=m.PURPOSE_CONVERSATION), metadata=reader.md())
        assert mem.id in [it.memory.id for it in bundle.items]
        shows_nothing_outside(bundle)
    # The whole turn is the author's history, and nobody else's.
    assert [(e.turn.text, e.turn.chat_id, e.turn.role) for e in history(alice)] == [(PRIVATE_TURN, "capture", "user")]
    found = stack.memory.SearchHistory(g.SearchHistoryRequest(query="cardiologist"), metadata=alice.md())
    assert [e.turn.text for e in found.entries] == [PRIVATE_TURN]
    for other in (bob, admin):
        assert history(other) == []
        shows_nothing_outside(
            stack.memory.SearchHistory(g.SearchHistoryRequest(query="cardiologist PIN 8841"), metadata=other.md())
        )
    # A retry answers from the first outcome, with the span alone as well.
    again = capture(alice, *first_proposals, turn=PRIVATE_TURN, request_id="review-1")
    assert again.replayed and again.results[0].memory.evidence == m.CaptureEvidence(span=REVIEW_SPAN)
    shows_nothing_outside(again)


def test_the_migration_erases_stored_turns_and_keeps_the_spans(pg):
    with scratch_workspace_db(pg, "0012_lexical_blocks") as url:
        author, captured, stored, empty = uuid.uuid4(), uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                """INSERT INTO memory (id, kind, title, body, purpose, confidence, origin, created_by)
                   VALUES (%s, 'fact', '', 'The quarterly review is on Thursday.', 'conversation', 1, 'told', %s)""",
                (captured, author),
            )
            conn.execute(
                """INSERT INTO capture (id, member_id, request_id, fingerprint, turn, outcomes)
                   VALUES (%s, %s, 'r1', '\\x00', %s, ''), (%s, %s, 'r2', '\\x00', NULL, '')""",
                (stored, author, PRIVATE_TURN, empty, author),
            )
            conn.execute(
                "INSERT INTO memory_evidence (memory_id, capture_id, span) VALUES (%s, %s, %s)",
                (captured, stored, REVIEW_SPAN),
            )
        migrate(url, "workspace")
        with psycopg.connect(url, autocommit=True) as conn:
            columns = {
                r[0]
                for r in conn.execute("SELECT column_name FROM information_schema.columns WHERE table_name = 'capture'")
            }
            assert "turn" not in columns and {"id", "member_id", "request_id", "fingerprint", "outcomes"} <= columns
            rows = conn.execute("SELECT id, request_id FROM capture ORDER BY request_id").fetchall()
            assert rows == [(stored, "r1"), (empty, "r2")]  # the captures stay bound to their request ids
            assert conn.execute("SELECT memory_id, capture_id, span FROM memory_evidence").fetchall() == [
                (captured, stored, REVIEW_SPAN)
            ]
            for word in OUTSIDE:  # no row of the capture tables holds a word of the turn any more
                for table in ("capture", "memory_evidence"):
                    held = conn.execute(f"SELECT count(*) FROM {table} t WHERE t::text LIKE %s", (f"%{word}%",))
                    assert held.fetchone()[0] == 0, (table, word)


def test_the_capture_command(stack, world, tmp_path):
    """``recallatron capture TURN --span ...`` (one proposal) and ``--proposals FILE`` (several): each
    outcome printed as text or protobuf JSON, skips with their reasons (exit 0), a retry replayed;
    usage errors exit 2, a bad file or a refused request exit 1, nothing written by either."""
    alice, ws = world["alice"], world["ws"]

    def cli(*args, token=alice.token):
        return at_gateway(f"127.0.0.1:{stack.gateway.port}", "capture", *args, token=token, check=False)

    one = cli(TURN, "--span", "my sister Ana moved to Porto last spring", "--kind", "fact", "--about", "Ana")
    assert one.returncode == 0, one.stderr
    lines = one.stdout.splitlines()
    assert lines[0] == "proposal 0: stored" and lines[-1] == "1 stored, 0 skipped"
    mem_id = lines[1].split()[0]
    assert lines[1].startswith(f"{mem_id}  revision 1  fact  workspace  conversation  by member {alice.id}  created ")
    assert lines[3] == "  my sister Ana moved to Porto last spring"  # the body defaults to the span
    assert '  captured from the turn\'s words "my sister Ana moved to Porto last spring"' in lines
    stored = alice.read(mem_id)
    assert (stored.kind, stored.origin, stored.evidence.span) == (m.KIND_FACT, m.ORIGIN_TOLD, lines[3].strip())
    assert [link.target_entity_name for link in stored.links] == ["Ana"]
    assert [e.turn.text for e in history(alice)] == [TURN]  # the whole turn: her own history

    path = tmp_path / "proposals.jsonl"
    rows = [
        {"span": "she now works as a pilot", "body": "Ana works as a pilot.", "title": "Ana's job"},
        {"span": "she now works as a pilot", "body": "Ana works as a pilot.", "audience": "AUDIENCE_MEMBER"},
        {"span": "she flies to Lisbon", "body": "Ana flies to Lisbon."},
        {"span": "my sister Ana", "body": "   "},
        {"span": "words never said"},  # no body: the span, as --body's default (so not "empty body")
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    many = cli(TURN, "--proposals", str(path), "--request-id", "turn-7", "--json")
    assert many.returncode == 0, many.stderr
    results = json.loads(many.stdout)["results"]
    assert results[0]["memory"]["title"] == "Ana's job" and results[0]["memory"]["audience"] == "AUDIENCE_WORKSPACE"
    assert [r["skipped"]["reason"] for r in results[1:]] == [
        "CAPTURE_SKIP_REASON_ALREADY_KNOWN",
        "CAPTURE_SKIP_REASON_SPAN_NOT_IN_TURN",
        "CAPTURE_SKIP_REASON_EMPTY_BODY",
        "CAPTURE_SKIP_REASON_SPAN_NOT_IN_TURN",
    ]
    again = cli(TURN, "--proposals", str(path), "--request-id", "turn-7")
    assert again.returncode == 0, again.stderr
    said = again.stdout.splitlines()
    assert said[0] == "replayed: the first answer to this request id; nothing written"
    assert said[-1] == "1 stored, 4 skipped"
    known_id = results[0]["memory"]["id"]
    assert "proposal 1: skipped, already_known: " in again.stdout and f"(memory {known_id})" in again.stdout
    assert "proposal 2: skipped, span_not_in_turn: " in again.stdout
    count = memory_count(stack, ws)
    assert count == 2

    # Usage errors (exit 2): no proposal, both ways at once, a proposal flag without --span, a bad kind.
    for args, words in (
        ((TURN,), "give --span"),
        ((TURN, "--span", "Ana", "--proposals", str(path)), "--span: with --proposals"),
        ((TURN, "--body", "Ana is a pilot.", "--proposals", str(path)), "--body: with --proposals"),
        ((TURN, "--title", "Ana"), "give --span"),
        ((TURN, "--span", "Ana", "--kind", "rumour"), "invalid choice: 'rumour'"),
        ((TURN, "--span", "Ana", "--confidence", "high"), "invalid float value"),
    ):
        out = cli(*args)
        assert out.returncode == 2 and words in out.stderr and "Traceback" not in out.stderr, (args, out.stderr)
    # A file that is not proposals (exit 1, naming the file and line), before any call.
    for text, words in (
        ('{"span": "Ana"}\nnot json\n', ":2: not JSON"),
        ('["Ana"]\n', ":1: not a JSON object"),
        (
            '{"span": "Ana", "spam": 1}\n',
            ':1: not a CaptureProposal: Message type "recallatron.memory.v1.CaptureProposal" has no field named "spam"',
        ),
        ('{"span": "Ana", "kind": "fact"}\n', ":1: not a CaptureProposal: Failed to parse kind field"),
        ("\n", ": no proposals"),
    ):
        path.write_text(text)
        out = cli(TURN, "--proposals", str(path))
        assert out.returncode == 1 and words in out.stderr and "Traceback" not in out.stderr, (text, out.stderr)
    missing = cli(TURN, "--proposals", str(tmp_path / "none.jsonl"))
    assert missing.returncode == 1 and "none.jsonl: no such file" in missing.stderr
    # Refused by the server (exit 1, its status and message): the whole call, nothing stored.
    for args, words in (
        (("  ", "--span", "Ana"), "INVALID_ARGUMENT: turn must not be empty or blank"),
        ((TURN, "--span", "Ana", "--confidence", "2"), "INVALID_ARGUMENT: proposals[0]: confidence"),
        ((TURN, "--span", "Ana", "--about-id", str(uuid.uuid4())), "NOT_FOUND: "),
        ((TURN, "--span", "Ana", "--request-id", "turn-7"), "ALREADY_EXISTS: "),
    ):
        out = cli(*args)
        assert out.returncode == 1 and out.stderr.startswith(words), (args, out.stderr)
    narrow = stack.member(ws, purposes=[m.PURPOSE_TASKS])
    denied = cli(TURN, "--span", "Ana", token=narrow.token)
    assert denied.returncode == 1 and denied.stderr.startswith("PERMISSION_DENIED: ")
    assert memory_count(stack, ws) == count
