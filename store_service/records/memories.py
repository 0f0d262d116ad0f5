"""The memory operations that read and write rows: remember, read, fetch, readability verdicts."""

from __future__ import annotations

import datetime
import logging
import uuid
from dataclasses import dataclass, field

import psycopg
from google.protobuf import timestamp_pb2
from recallatron.memory.v1 import memory_pb2 as m
from recallatron.store.v1 import store_pb2 as s

from servicekit import deadlines
from servicekit.caller import check_purpose_granted
from servicekit.checks import check_request_id
from servicekit.errors import FailedPrecondition, InvalidArgument, NotFound, ServiceError
from servicekit.limits import MAX_REMEMBER_BATCH
from store_service.access import membership
from store_service.access.readability import CHAIN_READABLE, caller_params
from store_service.database import named
from store_service.records import entities, idempotency, known, statements, validity
from store_service.records.idempotency import RequestKey
from store_service.search import lexical_index
from store_service.vocabulary import (
    KIND_OF,
    KINDS,
    ORIGIN_OF,
    PURPOSE_OF,
    check_confidence,
    check_not_ahead,
    check_text,
    check_timestamp,
    enum_value,
    parse_uuid,
)

log = logging.getLogger(__name__)
MAX_IDS = 1_000
# Database errors one memory's values can cause (validation should have caught them): in a batch
# they fail only that memory, found by retrying the batch row by row under savepoints.
ROW_ERRORS = (psycopg.DataError, psycopg.IntegrityError, psycopg.errors.ProgramLimitExceeded)
COLUMNS = """m.id, m.revision, m.kind, m.title, m.body, m.audience_member_id, m.purpose, m.confidence,
              m.origin, m.superseded_by_id, m.invalidation_reason, m.created_by, m.created_at, m.updated_at,
              m.occurred_at, m.forgotten_at, m.reason, m.valid_from, m.valid_until, m.invalidated, m.revised_by"""


def timestamp(value) -> timestamp_pb2.Timestamp | None:
    """A datetime (or None) as a protobuf Timestamp (or None)."""
    if value is None:
        return None
    ts = timestamp_pb2.Timestamp()
    ts.FromDatetime(value)
    return ts


def revised_by(revision: int, recorded: uuid.UUID | None, author: uuid.UUID) -> str:
    """Who made a revision: as recorded, else the author for revision 1; "" for a later revision made
    before who made it was recorded (migration 0025)."""
    if recorded is not None:
        return str(recorded)
    return str(author) if revision == 1 else ""


def to_memory(row) -> m.Memory:
    """Converts a named row selected with ``COLUMNS`` (further columns ignored) to a Memory message."""
    aud, sup = row.audience_member_id, row.superseded_by_id
    msg = m.Memory(
        id=str(row.id),
        revision=row.revision,
        kind=KIND_OF[row.kind],
        title=row.title,
        body=row.body,
        audience=m.AUDIENCE_WORKSPACE if aud is None else m.AUDIENCE_MEMBER,
        audience_member_id=str(aud) if aud else "",
        purpose=PURPOSE_OF[row.purpose],
        confidence=row.confidence,
        origin=ORIGIN_OF[row.origin],
        superseded_by_id=str(sup) if sup else "",
        invalidation_reason=row.invalidation_reason or "",
        created_by=str(row.created_by),
        revised_by=revised_by(row.revision, row.revised_by, row.created_by),
        created_at=timestamp(row.created_at),
        updated_at=timestamp(row.updated_at),
        forgotten=row.forgotten_at is not None,
        reason=row.reason or "",
        valid_from=timestamp(row.valid_from),
        invalidated=row.invalidated,
    )
    if row.occurred_at is not None:
        msg.occurred_at.CopyFrom(timestamp(row.occurred_at))
    if row.valid_until is not None:
        msg.valid_until.CopyFrom(timestamp(row.valid_until))
    return msg


def parse_ids(ids, field: str = "memory_ids") -> list[uuid.UUID]:
    """Parses a list of ids for a lookup: malformed ones cannot exist, so they are dropped."""
    if len(ids) > MAX_IDS:
        raise InvalidArgument(f"at most {MAX_IDS} ids per call", field=field)
    out = []
    for value in ids:
        try:
            out.append(uuid.UUID(value))
        except ValueError:
            continue
    return out


def readable_ids(conn: psycopg.Connection, caller: m.Caller, ids: list[uuid.UUID]) -> set[uuid.UUID]:
    """Ids whose own row and whole derived_from chain the caller may read (one query)."""
    if not ids:
        return set()
    rows = named(conn).execute(CHAIN_READABLE, {**caller_params(caller), "ids": ids}).fetchall()
    return {r.start_id for r in rows}


@dataclass
class NewMemory:
    """A validated memory about to be inserted."""

    kind: str
    title: str
    body: str
    audience: uuid.UUID | None
    purpose: str
    confidence: float
    origin: str
    occurred_at: datetime.datetime | None = None
    # As the writer gave it; None: occurred_at, else the write time (the generated column's rule).
    valid_from: datetime.datetime | None = None
    # Set by imports only (store_service/intake/imports.py); the defaults are what every other write wants:
    # a new id, the caller as author, now as created_at (updated_at: created_at), revision 1.
    id: uuid.UUID | None = None
    created_by: uuid.UUID | None = None
    created_at: datetime.datetime | None = None
    updated_at: datetime.datetime | None = None
    revision: int = 1
    import_key: str | None = None
    reason: str | None = None


@dataclass
class Insert:
    """One memory for ``insert_many``: its validated fields, its request key (request id "" for
    none), the entities it is about and the memories it is derived from."""

    new: NewMemory
    key: RequestKey
    entity_ids: list[uuid.UUID]
    sources: list[uuid.UUID] = field(default_factory=list)
    # What it states (``statements.Stated.rows``): relations and attributes.
    stated: tuple[list, list] = ([], [])


def by_request_id(conn: psycopg.Connection, caller: m.Caller, key: RequestKey) -> m.Memory | None:
    """The first result of ``key``'s request id when this member already used it (AIP-155 retries),
    None when it did not; raises ALREADY_EXISTS when the id is bound to a different request, and
    NOT_FOUND when the first result is not readable now (see ``store_service.records.idempotency``)."""
    found = by_request_ids(conn, caller, [key])[0]
    if isinstance(found, ServiceError):
        raise found
    return found


def by_request_ids(conn: psycopg.Connection, caller: m.Caller, keys: list[RequestKey]) -> list:
    """``by_request_id`` for many keys in three queries, in their order: None for a key whose request
    id this member never used (or that has none), else the memory or the ServiceError it answers with.

    A first result is shown only as the caller may read it now: through a token narrowed to other
    purposes, or after a forget, it is NOT_FOUND rather than shown (or written twice)."""
    wanted = sorted({k.request_id for k in keys if k.request_id})
    if not wanted:
        return [None] * len(keys)
    rows = (
        named(conn)
        .execute(
            f"""SELECT {COLUMNS}, m.request_id, m.request_operation, m.request_fingerprint, m.entity_resolutions
                  FROM memory m WHERE m.created_by = %s AND m.request_id = ANY(%s)""",
            (uuid.UUID(caller.member_id), wanted),
        )
        .fetchall()
    )
    ok = readable_ids(conn, caller, [r.id for r in rows])
    shown = {r.id: to_memory(r) for r in rows if r.id in ok}
    attach_links(conn, caller, shown)
    redact_successors(conn, caller, list(shown.values()))
    resolved = {r.id: r.entity_resolutions for r in rows if r.id in shown and r.entity_resolutions}
    entities.replay_resolutions(conn, caller, shown, resolved)
    bound = {r.request_id: r for r in rows}
    out: list[m.Memory | ServiceError | None] = []
    for k in keys:
        r = bound.get(k.request_id) if k.request_id else None
        if r is None:
            out.append(None)
            continue
        first = shown.get(r.id) or NotFound("memory not found")
        fingerprint = bytes(r.request_fingerprint) if r.request_fingerprint is not None else None
        out.append(idempotency.answer(k, r.request_operation, fingerprint, r.forgotten_at is not None, first))
    return out


def redact_successors(conn: psycopg.Connection, caller: m.Caller, memories: list[m.Memory]) -> None:
    """Blanks ``superseded_by_id`` where the successor is not readable by the caller."""
    successors = [uuid.UUID(mem.superseded_by_id) for mem in memories if mem.superseded_by_id]
    visible = {str(i) for i in readable_ids(conn, caller, successors)}
    for mem in memories:
        if mem.superseded_by_id and mem.superseded_by_id not in visible:
            mem.superseded_by_id = ""


def insert(
    conn: psycopg.Connection,
    caller: m.Caller,
    new: NewMemory,
    key: RequestKey,
    entity_ids: list[uuid.UUID],
    sources: list[uuid.UUID] = (),
    stated: tuple[list, list] = ([], []),
) -> m.Memory:
    """Inserts a memory with its links and queues its embedding; must run inside a transaction.

    ``insert_many`` of one: with a request id a concurrent retry that already inserted wins and is
    answered as ``by_request_id`` answers it.
    """
    result = insert_many(conn, caller, [Insert(new, key, entity_ids, list(sources), stated)])[0]
    if isinstance(result, ServiceError):
        raise result
    return result


def insert_many(conn: psycopg.Connection, caller: m.Caller, items: list[Insert]) -> list[m.Memory | ServiceError]:
    """Inserts memories with their links, queues their embeddings and adds them to the keyword
    index, in one statement each however many there are; must run inside a transaction.

    Request ids must be distinct among ``items``. An item whose request id a concurrent call
    inserted first is not written: its result is what ``by_request_id`` answers for it (that call's
    memory, or ALREADY_EXISTS when the two requests differ).
    """
    if not items:
        return []
    member = uuid.UUID(caller.member_id)
    # Whoever writes them (an import too), member-only memories of a removed member never appear
    # (store_service/access/membership.py); a member's own write checked its removal when its transaction
    # started (UNAUTHENTICATED), so this refuses an operator's write for a removed member.
    removed = membership.hold(conn, {it.new.audience for it in items if it.new.audience is not None})
    if removed:
        raise FailedPrecondition(
            f"member {min(removed)} was removed from the workspace: no memory may be written for it alone"
        )
    ids = [it.new.id or uuid.uuid4() for it in items]
    # Rows go in request-id order, so concurrent batches sharing ids wait on each other in one order.
    order = sorted(range(len(items)), key=lambda j: items[j].key.request_id)
    news = [items[j].new for j in order]
    rows = (
        named(conn)
        .execute(
            f"""INSERT INTO memory AS m (id, kind, title, body, audience_member_id, purpose, confidence, origin,
                               created_by, occurred_at, request_id, request_operation, request_fingerprint,
                               created_at, updated_at, revision, import_key, reason, body_key, valid_from_given)
            SELECT i, k, t, b, a, p, c, o, coalesce(cb, %s), w, r, r_op, r_fp,
                   coalesce(ca, now()), coalesce(ua, ca, now()), rev, ik, rs, bk, vf
              FROM unnest(%s::uuid[], %s::text[], %s::text[], %s::text[], %s::uuid[], %s::text[], %s::float8[],
                          %s::text[], %s::timestamptz[], %s::text[], %s::text[], %s::bytea[],
                          %s::uuid[], %s::timestamptz[], %s::timestamptz[], %s::bigint[], %s::text[], %s::text[],
                          %s::bytea[], %s::timestamptz[])
                   AS u(i, k, t, b, a, p, c, o, w, r, r_op, r_fp, cb, ca, ua, rev, ik, rs, bk, vf)
            ON CONFLICT (created_by, request_id) DO NOTHING
            RETURNING {COLUMNS}""",
            (
                member,
                [ids[j] for j in order],
                [n.kind for n in news],
                [n.title for n in news],
                [n.body for n in news],
                [n.audience for n in news],
                [n.purpose for n in news],
                [n.confidence for n in news],
                [n.origin for n in news],
                [n.occurred_at for n in news],
                [items[j].key.request_id or None for j in order],
                [items[j].key.operation if items[j].key.request_id else None for j in order],
                [items[j].key.fingerprint if items[j].key.request_id else None for j in order],
                [n.created_by for n in news],
                [n.created_at for n in news],
                [n.updated_at for n in news],
                [n.revision for n in news],
                [n.import_key for n in news],
                [n.reason for n in news],
                [known.body_key(n.body) for n in news],
                [n.valid_from for n in news],
            ),
        )
        .fetchall()
    )
    stored = {r.id: r for r in rows}
    written = [(mid, it) for mid, it in zip(ids, items, strict=True) if mid in stored]
    links = [(mid, "derived_from", src, None) for mid, it in written for src in it.sources]
    links += [(mid, "about", None, ent) for mid, it in written for ent in it.entity_ids]
    if links:
        conn.execute(
            """INSERT INTO memory_link (memory_id, link_type, target_memory_id, target_entity_id)
                        SELECT * FROM unnest(%s::uuid[], %s::text[], %s::uuid[], %s::uuid[])""",
            [list(col) for col in zip(*links, strict=True)],
        )
    statements.write(conn, [(mid, *it.stated) for mid, it in written])
    if written:
        conn.execute(
            "INSERT INTO embedding_job (memory_id, memory_revision) SELECT * FROM unnest(%s::uuid[], %s::bigint[])",
            ([mid for mid, _ in written], [it.new.revision for _, it in written]),
        )
        lexical_index.add_memories(
            conn, [(mid, it.new.audience, it.new.purpose, it.new.title, it.new.body) for mid, it in written]
        )
    # The answer carries the links just written, as a retry's answer (by_request_ids) and Read do.
    fresh = {mid: to_memory(stored[mid]) for mid, _ in written}
    if links:
        attach_links(conn, caller, fresh)
    # A concurrent call with the same request id won those inserts.
    lost = [it.key for mid, it in zip(ids, items, strict=True) if mid not in stored]
    firsts = iter(by_request_ids(conn, caller, lost))
    return [
        fresh[mid] if mid in stored else (next(firsts) or NotFound("memory not found"))
        for mid, it in zip(ids, items, strict=True)
    ]


def occurred_at(req) -> datetime.datetime | None:
    """The optional time the event happened; INVALID_ARGUMENT outside years 1..9999, with bad
    nanoseconds, or more than ``MAX_FUTURE_SKEW`` ahead of the clock (what happened is past)."""
    if not req.HasField("occurred_at"):
        return None
    return check_not_ahead(check_timestamp(req.occurred_at, "occurred_at"), "occurred_at")


@dataclass
class Prepared:
    """A validated Remember, before the database: the memory, its entity mentions, its request key."""

    new: NewMemory
    mentions: list  # the entities, then every entity the statements name (``statements.Stated.mentions``)
    key: RequestKey
    stated: statements.Stated = statements.Stated()


def remember(conn: psycopg.Connection, req: s.RememberRequest) -> m.Memory:
    """Stores a told memory and queues its embedding in one transaction (a batch of one).

    INVALID_ARGUMENT for bad fields; PERMISSION_DENIED for a purpose not granted; NOT_FOUND for an
    entity id the caller cannot see. With a ``request_id`` this member already used: the first
    result for the same request, ALREADY_EXISTS for another (``store_service.records.idempotency``); nothing
    is written.
    """
    result = remember_batch(conn, req.caller, [req])[0]
    if isinstance(result, Exception):
        raise result
    return result


def remember_batch(conn: psycopg.Connection, caller: m.Caller, reqs) -> list[m.Memory | Exception]:
    """Remembers 1..500 memories (RememberRequest or RememberBatchEntry messages) for one caller.

    Each entry's result is what a Remember of it would give, in order: its memory, or the error it
    would fail with (a ``ServiceError``, or a database error one row's values caused, mapped by
    ``servicekit.errors``). Entries answer as the same Remember calls made one after another would:
    a request id already used, or used by an earlier entry, answers with that first result when the
    request is the same and with ALREADY_EXISTS when it is not.
    Validation runs first, row by row; the rows written are inserted in one transaction with a few
    multi-row statements. Only when one of those fails on a row's values is the batch redone row by
    row under savepoints, so that row alone fails.
    """
    check_batch_size(len(reqs))
    results: list[m.Memory | Exception | None] = [None] * len(reqs)
    prepared: dict[int, Prepared] = {}
    for i, req in enumerate(reqs):
        try:
            prepared[i] = prepare_remember(caller, req)
        except ServiceError as exc:
            results[i] = exc
    if prepared:
        try:
            with conn.transaction():
                written = _write_prepared(conn, caller, prepared, row_by_row=False)
                deadlines.check_before_commit()
        except ROW_ERRORS as exc:
            log.warning("a batch row failed in the database (%s); retrying row by row", type(exc).__name__)
            with conn.transaction():
                written = _write_prepared(conn, caller, prepared, row_by_row=True)
                deadlines.check_before_commit()
        for i, result in written.items():
            results[i] = result
    return results


def check_batch_size(count: int) -> None:
    """INVALID_ARGUMENT for a batch of no entries or more than ``MAX_REMEMBER_BATCH``."""
    if not 1 <= count <= MAX_REMEMBER_BATCH:
        raise InvalidArgument(
            f"a batch holds 1..{MAX_REMEMBER_BATCH} memories; this one has {count}",
            field="requests",
            limit=MAX_REMEMBER_BATCH,
        )


def _write_prepared(
    conn: psycopg.Connection, caller: m.Caller, prepared: dict[int, Prepared], row_by_row: bool
) -> dict[int, m.Memory | Exception]:
    """Writes validated entries inside the caller's transaction: first results of used request
    ids, entity checks, then one ``insert_many`` (or, with ``row_by_row``, one per entry under its
    own savepoint, a failure answering for that entry alone)."""
    out: dict[int, m.Memory | Exception] = {}
    membership.hold_caller(conn, caller)
    firsts = dict(zip(prepared, by_request_ids(conn, caller, [p.key for p in prepared.values()]), strict=True))
    visible = entities.visible_ids(
        conn, caller, {e for p in prepared.values() for e in entities.mentioned_ids(p.mentions)}
    )
    todo: list[int] = []
    for i, p in prepared.items():
        if firsts[i] is not None:
            out[i] = firsts[i]
            continue
        try:
            entities.check_visible(p.mentions, visible)
        except ServiceError as exc:
            out[i] = exc
            continue
        todo.append(i)
    if not row_by_row:
        owners: dict[str, int] = {}  # request id -> the first entry written with it
        fresh = []
        for i in todo:
            rid = prepared[i].key.request_id
            if rid not in owners:
                fresh.append(i)
                if rid:
                    owners[rid] = i
        for i, result in zip(fresh, _insert_prepared(conn, caller, [prepared[i] for i in fresh]), strict=True):
            out[i] = result
        for i in todo:
            if i not in out:  # a repeat of an earlier entry's request id
                owner = owners[prepared[i].key.request_id]
                out[i] = _repeat(prepared[i].key, prepared[owner].key, out[owner])
        return out
    done: dict[str, tuple[RequestKey, m.Memory | Exception]] = {}  # request id -> its first key and result
    for i in todo:
        key = prepared[i].key
        if key.request_id in done:
            out[i] = _repeat(key, *done[key.request_id])
            continue
        try:
            with conn.transaction():  # a savepoint
                out[i] = _insert_prepared(conn, caller, [prepared[i]])[0]
        except ROW_ERRORS as exc:
            out[i] = exc
            continue
        if key.request_id:
            done[key.request_id] = (key, out[i])
    return out


def _repeat(key: RequestKey, first_key: RequestKey, first_result: m.Memory | Exception) -> m.Memory | Exception:
    """The answer to a batch entry repeating the request id of an earlier entry that was written (or
    answered): what a Remember after that one would answer, its result for the same request and
    ALREADY_EXISTS for a different one."""
    return first_result if key == first_key else idempotency.reused(key.request_id, first_key.operation)


def _insert_prepared(
    conn: psycopg.Connection, caller: m.Caller, entries: list[Prepared]
) -> list[m.Memory | ServiceError]:
    """Creates the named entities of entries already checked, then inserts the memories."""
    found = entities.create_named(
        conn, caller, [p.mentions for p in entries], [p.new.audience is None for p in entries]
    )
    out = insert_many(
        conn,
        caller,
        [
            Insert(p.new, p.key, ids, stated=stated_rows(p.stated, p.mentions, resolved))
            for p, (ids, resolved) in zip(entries, found, strict=True)
        ],
    )
    kept = []
    for entry, result, (_, resolved) in zip(entries, out, found, strict=True):
        if isinstance(result, m.Memory):
            result.entity_resolutions.extend(resolved)
            if entry.key.request_id:
                kept.append((uuid.UUID(result.id), resolved))
    entities.keep_resolutions(conn, kept)
    return out


def stated_rows(stated: statements.Stated, mentions: list, resolved: list) -> tuple[list, list]:
    """The rows of what a write states, its ``mentions`` (the entities, then the statements')
    resolved as ``resolved`` reports."""
    ids = statements.mention_ids(mentions, resolved)
    return stated.rows(ids[len(ids) - len(stated.mentions()) :])


def prepare_remember(caller: m.Caller, req) -> Prepared:
    """Validates a Remember (or one batch entry) without the database; raises the ServiceError a
    Remember of it fails with."""
    purpose = check_purpose_granted(caller, req.purpose)
    kind = "note" if req.kind == m.KIND_UNSPECIFIED else enum_value(KINDS, req.kind, "kind")
    check_text(req.title, req.body)
    confidence = check_confidence(req.confidence) if req.HasField("confidence") else 1.0
    if req.audience == m.AUDIENCE_WORKSPACE:
        audience = None
    elif req.audience == m.AUDIENCE_MEMBER:
        audience = uuid.UUID(caller.member_id)
    else:
        raise InvalidArgument("audience must be workspace or member", field="audience")
    check_request_id(req.request_id)
    entities.check_mentions(req.entities)
    stated = statements.check(req)
    occurred = occurred_at(req)
    valid_from = validity.given_start(req)
    fields = {
        "purpose": purpose,
        "kind": kind,
        "title": req.title,
        "body": req.body,
        "audience": idempotency.audience_name(req.audience),
        "confidence": confidence,
        "occurred_at": idempotency.instant(occurred),
        **idempotency.mention_fields(req.entities),
        **validity.start_field(valid_from),
        **stated.fields(),
    }
    return Prepared(
        NewMemory(kind, req.title, req.body, audience, purpose, confidence, "told", occurred, valid_from),
        list(req.entities) + stated.mentions(),
        idempotency.key(req.request_id, idempotency.REMEMBER, fields),
        stated,
    )


def attach_links(conn: psycopg.Connection, caller: m.Caller, memories: dict[uuid.UUID, m.Memory]) -> None:
    """Adds each memory's provenance (one query): derived_from links to sources the caller can read,
    and about links to entities; and what it states (``statements.attach``). A readable memory's
    sources are readable (the chain rule)."""
    if not memories:
        return
    rows = (
        named(conn)
        .execute(
            """SELECT l.memory_id, l.link_type, l.target_memory_id, e.id AS entity_id, e.name AS entity_name
             FROM memory_link l LEFT JOIN entity e ON e.id = l.target_entity_id
            WHERE l.memory_id = ANY(%s) ORDER BY l.memory_id, l.link_type, l.target_memory_id, e.id""",
            (list(memories),),
        )
        .fetchall()
    )
    visible = readable_ids(conn, caller, list({r.target_memory_id for r in rows if r.target_memory_id is not None}))
    for r in rows:
        if r.link_type == "derived_from" and r.target_memory_id in visible:
            memories[r.memory_id].links.append(
                m.Link(type=m.LINK_TYPE_DERIVED_FROM, target_memory_id=str(r.target_memory_id))
            )
        elif r.link_type == "about":
            memories[r.memory_id].links.append(
                m.Link(type=m.LINK_TYPE_ABOUT, target_entity_id=str(r.entity_id), target_entity_name=r.entity_name)
            )
    statements.attach(conn, memories)


def attach_evidence(conn: psycopg.Connection, memories: dict[uuid.UUID, m.Memory]) -> None:
    """Sets ``evidence`` on the captured memories of ``memories``, which the caller may read (one
    query; store_service/intake/capture.py writes it): the span alone, which every reader of the memory may
    see; the turn is its author's history."""
    if not memories:
        return
    rows = named(conn).execute(
        "SELECT memory_id, span FROM memory_evidence WHERE memory_id = ANY(%s)", (list(memories),)
    )
    for r in rows:
        memories[r.memory_id].evidence.CopyFrom(m.CaptureEvidence(span=r.span))


def read(conn: psycopg.Connection, req: s.ReadRequest) -> m.Memory:
    """One memory the caller may read (own row and chain), with readable links and optional history.

    NOT_FOUND when it does not exist or is not readable: both go down the same path.
    """
    mid = parse_uuid(req.memory_id, "memory_id", missing_is_not_found=True)
    if mid not in readable_ids(conn, req.caller, [mid]):
        raise NotFound("memory not found")
    row = (
        named(conn)
        .execute(f"SELECT {COLUMNS} FROM memory m WHERE m.id = %s AND m.forgotten_at IS NULL", (mid,))
        .fetchone()
    )
    if row is None:  # forgotten between the verdict and the fetch
        raise NotFound("memory not found")
    memory = to_memory(row)
    attach_links(conn, req.caller, {mid: memory})
    redact_successors(conn, req.caller, [memory])
    attach_evidence(conn, {mid: memory})
    if req.include_history:
        attach_history(conn, {mid: memory})
    return memory


def attach_history(conn: psycopg.Connection, memories: dict[uuid.UUID, m.Memory]) -> None:
    """Fills each memory's earlier revisions, newest first (one query); only for memories the caller
    may read, which the callers have checked."""
    if not memories:
        return
    for old in named(conn).execute(
        """SELECT r.memory_id, r.revision, r.title, r.body, r.confidence, r.replaced_at, r.valid_from,
                  r.revised_by, m.created_by
             FROM memory_revision r JOIN memory m ON m.id = r.memory_id
            WHERE r.memory_id = ANY(%s) ORDER BY r.memory_id, r.revision DESC""",
        (list(memories),),
    ):
        rev = m.Revision(
            revision=old.revision,
            title=old.title,
            body=old.body,
            confidence=old.confidence,
            replaced_at=timestamp(old.replaced_at),
            revised_by=revised_by(old.revision, old.revised_by, old.created_by),
        )
        if old.valid_from is not None:
            rev.valid_from.CopyFrom(timestamp(old.valid_from))
        memories[old.memory_id].history.append(rev)


def get_memories(conn: psycopg.Connection, caller: m.Caller, ids) -> list[m.Memory]:
    """Readable memories by id in the order asked, with their provenance; unreadable or unknown ids
    are absent."""
    wanted = parse_ids(ids)
    ok = readable_ids(conn, caller, wanted)
    by_id = load_readable(conn, caller, [i for i in wanted if i in ok])
    return [by_id[i] for i in wanted if i in by_id]


def load_readable(conn: psycopg.Connection, caller: m.Caller, ids: list[uuid.UUID]) -> dict[uuid.UUID, m.Memory]:
    """The memories of ``ids`` by id, with their provenance as the caller may see it (three queries,
    none when ``ids`` is empty). The caller must have checked each id with ``readable_ids`` in this
    transaction; a forgotten id is absent."""
    if not ids:
        return {}
    rows = named(conn).execute(
        f"SELECT {COLUMNS} FROM memory m WHERE m.id = ANY(%s) AND m.forgotten_at IS NULL", (ids,)
    )
    by_id = {r.id: to_memory(r) for r in rows}
    attach_links(conn, caller, by_id)
    redact_successors(conn, caller, list(by_id.values()))
    return by_id
