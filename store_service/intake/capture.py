"""Capture: memories a conversation turn states explicitly, with the span that states each.

A proposal is stored (origin told, its span kept as evidence) only when

1. its body is not blank (else skipped: EMPTY_BODY);
2. its span is not blank and occurs in the turn, both in ``known.match_form`` (else SPAN_NOT_IN_TURN);
3. no memory the caller can read (any granted purpose, live, not superseded, chain readable) has the
   same body in ``known.match_form``, and no earlier proposal of the call stored one (ALREADY_KNOWN).

A skip is an answer, never an error. A malformed request is INVALID_ARGUMENT for the whole call,
naming the field (``proposals[2].kind``): a blank, over-long or NUL-holding turn, more than
``MAX_PROPOSALS`` proposals, an over-long span, or any field Remember would refuse.

``request_id`` (per member, its own namespace) binds the call to a fingerprint of the request, as
store_service/records/idempotency.py does for Remember: the same request again writes nothing and answers
with the first outcomes (``replayed``), any other is ALREADY_EXISTS. Concurrent calls with one id
meet on the ``capture`` row's unique key: the second waits for the first, then answers as a retry.
Forgetting a captured memory erases the span and the fingerprint (``erase``); the id stays used, and
a request with it is ALREADY_EXISTS, as for an id used before fingerprints were kept.

The evidence a memory carries is what every reader of the memory may see: the span, which states
what the memory says. The turn is what its author said, the span and everything around it, so it
is owner-only: a Capture that stores a memory keeps the whole turn in its author's history (chat
``HISTORY_CHAT``, role user, no request id: store_service/history/turns.py), where only the author finds
it and ForgetHistory (or the member's removal) forgets it, and nowhere else. No other part of the
turn is kept with the memory: the turn carries none, and when and by whom are the memory's own
``created_at`` and ``created_by``.
"""

from __future__ import annotations

import uuid

import psycopg
from recallatron.memory.v1 import memory_pb2 as m
from recallatron.store.v1 import store_pb2 as s

from servicekit.caller import check_purpose_granted
from servicekit.checks import check_request_id
from servicekit.errors import AlreadyExists, InvalidArgument, NotFound, ServiceError
from store_service.access import membership
from store_service.access.readability import READABLE, caller_params
from store_service.database import named
from store_service.history import turns
from store_service.records import entities, idempotency, known
from store_service.records.memories import (
    Insert,
    Prepared,
    attach_evidence,
    get_memories,
    insert_many,
    prepare_remember,
    readable_ids,
)
from store_service.search import analysis
from store_service.vocabulary import MAX_BODY_BYTES

CAPTURE = "capture"
MAX_PROPOSALS = 20
NO_KEY = idempotency.RequestKey("", CAPTURE, b"")
# The chat of the history turns Capture keeps (module docstring).
HISTORY_CHAT = "capture"


def _skip(reason: int, message: str, known_id: str = "") -> m.CaptureResult:
    return m.CaptureResult(skipped=m.CaptureSkip(reason=reason, message=message, known_memory_id=known_id))


def _check_turn_text(text: str, field: str) -> None:
    """INVALID_ARGUMENT when ``text`` has NUL or is over ``MAX_BODY_BYTES`` bytes of UTF-8."""
    size = len(text.encode("utf-8"))
    if size > MAX_BODY_BYTES:
        raise InvalidArgument(
            f"{field} is {size} bytes; the limit is {MAX_BODY_BYTES} bytes of UTF-8", field=field, limit=MAX_BODY_BYTES
        )
    if "\x00" in text:
        raise InvalidArgument(f"{field} must not contain NUL characters", field=field)


def _in_proposal(exc: ServiceError, i: int) -> ServiceError:
    """``exc`` raised for proposal ``i``, its message and field prefixed with ``proposals[i]``."""
    where = f"proposals[{i}]"
    field = exc.metadata.get("field")
    out = type(exc)(f"{where}: {exc.message}", **{**exc.metadata, "field": f"{where}.{field}" if field else where})
    out.reason = exc.reason
    return out


def _fields(purpose: str, req: s.CaptureRequest) -> dict:
    """The canonical fields of a request (idempotency.canonical): the purpose's stored name, the turn,
    and each proposal as its deterministic protobuf encoding, in hex."""
    return {
        "purpose": purpose,
        "turn": req.turn,
        "proposals": [p.SerializeToString(deterministic=True).hex() for p in req.proposals],
    }


def _validate(req: s.CaptureRequest) -> tuple[str, list[tuple[str, Prepared | None]]]:
    """The purpose's stored name and, per proposal, its span and its validated write (None when its
    body is blank). Raises the whole call's error for a malformed request."""
    purpose = check_purpose_granted(req.caller, req.purpose)
    _check_turn_text(req.turn, "turn")
    if analysis.is_blank(req.turn):  # history's rule, so the turn can always be kept there
        raise InvalidArgument("turn must not be empty or blank (invisible characters count as blank)", field="turn")
    if len(req.proposals) > MAX_PROPOSALS:
        raise InvalidArgument(
            f"at most {MAX_PROPOSALS} proposals per call; this one has {len(req.proposals)}",
            field="proposals",
            limit=MAX_PROPOSALS,
        )
    check_request_id(req.request_id)
    out: list[tuple[str, Prepared | None]] = []
    for i, p in enumerate(req.proposals):
        try:
            _check_turn_text(p.span, "span")
            if analysis.is_blank(p.body):
                _check_turn_text(p.body, "body")
                out.append((p.span, None))
                continue
            entry = s.RememberBatchEntry(
                purpose=req.purpose,
                kind=p.kind,
                title=p.title,
                body=p.body,
                audience=p.audience,
                confidence=p.confidence if p.HasField("confidence") else None,
                entities=p.entities,
            )
            out.append((p.span, prepare_remember(req.caller, entry)))
        except ServiceError as exc:
            raise _in_proposal(exc, i) from None
    return purpose, out


def _known(conn: psycopg.Connection, caller: m.Caller, keys: set[bytes]) -> dict[bytes, str]:
    """For each body key, the newest live, unsuperseded memory with it that the caller may read."""
    if not keys:
        return {}
    rows = (
        named(conn)
        .execute(
            f"""SELECT m.id, m.body_key FROM memory m
                 WHERE m.body_key = ANY(%(keys)s) AND {READABLE} AND m.retired_at IS NULL
                 ORDER BY m.created_at DESC, m.id DESC""",
            {**caller_params(caller), "keys": list(keys)},
        )
        .fetchall()
    )
    ok = readable_ids(conn, caller, [r.id for r in rows])
    out: dict[bytes, str] = {}
    for r in rows:
        if r.id in ok:
            out.setdefault(bytes(r.body_key), str(r.id))
    return out


def capture(conn: psycopg.Connection, req: s.CaptureRequest) -> s.CaptureResponse:
    """Stores the proposals a turn states (module docstring); one transaction."""
    caller = req.caller
    purpose, prepared = _validate(req)
    fingerprint = idempotency.fingerprint(CAPTURE, _fields(purpose, req))
    with conn.transaction():
        membership.hold_caller(conn, caller)
        capture_id = uuid.uuid4()
        if req.request_id:
            claimed = conn.execute(
                """INSERT INTO capture (id, member_id, request_id, fingerprint, outcomes) VALUES (%s, %s, %s, %s, '')
                   ON CONFLICT (member_id, request_id) DO NOTHING RETURNING id""",
                (capture_id, uuid.UUID(caller.member_id), req.request_id, fingerprint),
            ).fetchone()
            if claimed is None:
                return _replay(conn, caller, req.request_id, fingerprint)
        visible = entities.visible_ids(
            conn, caller, {e for _, p in prepared if p for e in entities.mentioned_ids(p.mentions)}
        )
        for i, (_, p) in enumerate(prepared):
            if p is not None:
                try:
                    entities.check_visible(p.mentions, visible)
                except ServiceError as exc:
                    raise _in_proposal(exc, i) from None
        results, todo = _decide(conn, caller, req.turn, prepared)
        stored = _store(conn, caller, [prepared[i][1] for i in todo])
        if stored:
            conn.execute(
                "INSERT INTO capture (id, member_id, outcomes) VALUES (%s, %s, '') ON CONFLICT (id) DO NOTHING",
                (capture_id, uuid.UUID(caller.member_id)),
            )
            _keep_turn(conn, caller, req.turn)
            conn.execute(
                """INSERT INTO memory_evidence (memory_id, capture_id, span)
                   SELECT u.i, %s, u.s FROM unnest(%s::uuid[], %s::text[]) AS u(i, s)""",
                (capture_id, [uuid.UUID(x.id) for x in stored], [prepared[i][0] for i in todo]),
            )
            attach_evidence(conn, {uuid.UUID(x.id): x for x in stored})
        for i, memory in zip(todo, stored, strict=True):
            results[i] = m.CaptureResult(memory=memory)
        for i, result in enumerate(results):  # a repeat of a body stored by this call
            if isinstance(result, int):
                results[i] = _skip(
                    m.CAPTURE_SKIP_REASON_ALREADY_KNOWN,
                    f"proposal {result} of this call stored the same body",
                    results[result].memory.id,
                )
        if stored or req.request_id:  # what a retry answers with: stored memories by id alone
            outcomes = s.CaptureResponse(
                results=[
                    m.CaptureResult(memory=m.Memory(id=r.memory.id)) if r.HasField("memory") else r for r in results
                ]
            )
            conn.execute("UPDATE capture SET outcomes = %s WHERE id = %s", (outcomes.SerializeToString(), capture_id))
    return s.CaptureResponse(results=results)


def _keep_turn(conn: psycopg.Connection, caller: m.Caller, turn: str) -> None:
    """Appends the turn to the caller's own history (module docstring), in the capture's transaction.
    ``_validate`` checked it as history checks a turn's text, so it cannot fail there."""
    (kept,) = turns.append(conn, caller, [s.HistoryTurn(chat_id=HISTORY_CHAT, role="user", text=turn)])
    if isinstance(kept, Exception):
        raise kept


def _decide(conn, caller: m.Caller, turn: str, prepared: list) -> tuple[list, list[int]]:
    """Each proposal's skip, or the index of the earlier proposal of the call with its body (an int),
    or None with its index in the returned list of proposals to store."""
    results: list = [None] * len(prepared)
    keys = {i: known.body_key(p.new.body) for i, (_, p) in enumerate(prepared) if p is not None}
    found = _known(conn, caller, set(keys.values()))
    first: dict[bytes, int] = {}
    todo: list[int] = []
    for i, (span, p) in enumerate(prepared):
        if p is None:
            results[i] = _skip(m.CAPTURE_SKIP_REASON_EMPTY_BODY, "the body is empty or blank")
        elif not known.span_in_turn(span, turn):
            why = "the span is blank" if not span.strip() else "the span does not occur in the turn"
            results[i] = _skip(m.CAPTURE_SKIP_REASON_SPAN_NOT_IN_TURN, why)
        elif keys[i] in found:
            results[i] = _skip(
                m.CAPTURE_SKIP_REASON_ALREADY_KNOWN,
                "a memory you can read has the same body",
                found[keys[i]],
            )
        elif keys[i] in first:
            results[i] = first[keys[i]]
        else:
            first[keys[i]] = i
            todo.append(i)
    return results, todo


def _store(conn: psycopg.Connection, caller: m.Caller, entries: list[Prepared]) -> list[m.Memory]:
    """Creates the named entities and inserts the memories (origin told), without request ids."""
    if not entries:
        return []
    ids = entities.create_named(conn, caller, [p.mentions for p in entries], [p.new.audience is None for p in entries])
    out = insert_many(conn, caller, [Insert(p.new, NO_KEY, e) for p, (e, _) in zip(entries, ids, strict=True)])
    return [x for x in out if isinstance(x, m.Memory)]  # without request ids nothing can be lost


def _replay(conn: psycopg.Connection, caller: m.Caller, request_id: str, fingerprint: bytes) -> s.CaptureResponse:
    """The answer to a request id this member used before (module docstring)."""
    row = (
        named(conn)
        .execute(
            "SELECT fingerprint, outcomes FROM capture WHERE member_id = %s AND request_id = %s",
            (uuid.UUID(caller.member_id), request_id),
        )
        .fetchone()
    )
    if row.fingerprint is None:
        raise AlreadyExists(
            f"request_id {request_id!r} was used by a capture whose memories were forgotten since, so this "
            "request cannot be matched to it; a new capture needs a new request_id",
            request_id=request_id,
            operation=CAPTURE,
        )
    if bytes(row.fingerprint) != fingerprint:
        raise idempotency.reused(request_id, CAPTURE)
    first = s.CaptureResponse.FromString(bytes(row.outcomes))
    ids = [r.memory.id for r in first.results if r.HasField("memory")]
    now = {mem.id: mem for mem in get_memories(conn, caller, ids)}
    if len(now) < len(ids):
        raise NotFound("memory not found")
    attach_evidence(conn, {uuid.UUID(i): mem for i, mem in now.items()})
    for r in first.results:
        if r.HasField("memory"):
            r.memory.CopyFrom(now[r.memory.id])
    first.replayed = True
    return first


def erase(conn: psycopg.Connection, memory_ids: list[uuid.UUID]) -> None:
    """Erases the evidence of memories being forgotten: their spans, and the fingerprint of the
    captures they came from (inside the forget's transaction). The turn is its author's history, not
    the memory's: it stays there until its author forgets it."""
    if not memory_ids:
        return
    conn.execute(
        """UPDATE capture SET fingerprint = NULL
            WHERE id IN (SELECT capture_id FROM memory_evidence WHERE memory_id = ANY(%s))""",
        (memory_ids,),
    )
    conn.execute("UPDATE memory_evidence SET span = '' WHERE memory_id = ANY(%s)", (memory_ids,))
