"""The memory operations that read and write rows: remember, read, fetch, readability verdicts."""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass

import psycopg
from google.protobuf import timestamp_pb2
from recallatron.memory.v1 import memory_pb2 as m
from recallatron.store.v1 import store_pb2 as s

from servicekit.caller import check_purpose_granted
from servicekit.errors import InvalidArgument, NotFound
from store_service import entities
from store_service.readability import CHAIN_READABLE, caller_params
from store_service.vocabulary import (KIND_OF, KINDS, MAX_REQUEST_ID_CHARS, ORIGIN_OF, PURPOSE_OF, check_confidence,
                                      check_text, enum_value, parse_uuid)

MAX_IDS = 1_000
COLUMNS = """m.id, m.revision, m.kind, m.title, m.body, m.audience_member_id, m.purpose, m.confidence,
              m.origin, m.superseded_by_id, m.invalidation_reason, m.created_by, m.created_at, m.updated_at,
              m.occurred_at, m.forgotten_at"""


def _ts(value) -> timestamp_pb2.Timestamp | None:
    if value is None:
        return None
    ts = timestamp_pb2.Timestamp()
    ts.FromDatetime(value)
    return ts


def to_memory(row) -> m.Memory:
    """Converts a row selected with ``COLUMNS`` to a Memory message."""
    (mid, rev, kind, title, body, aud, purpose, conf, origin, sup, reason, by, created, updated,
     occurred, forgotten) = row
    msg = m.Memory(id=str(mid), revision=rev, kind=KIND_OF[kind], title=title, body=body,
                   audience=m.AUDIENCE_WORKSPACE if aud is None else m.AUDIENCE_MEMBER,
                   audience_member_id=str(aud) if aud else "", purpose=PURPOSE_OF[purpose], confidence=conf,
                   origin=ORIGIN_OF[origin], superseded_by_id=str(sup) if sup else "",
                   invalidation_reason=reason or "", created_by=str(by), created_at=_ts(created),
                   updated_at=_ts(updated), forgotten=forgotten is not None)
    if occurred is not None:
        msg.occurred_at.CopyFrom(_ts(occurred))
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
    rows = conn.execute(CHAIN_READABLE, {**caller_params(caller), "ids": ids}).fetchall()
    return {r[0] for r in rows}


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


def by_request_id(conn: psycopg.Connection, caller: m.Caller, request_id: str) -> m.Memory | None:
    """The memory this member already created under ``request_id`` (AIP-155 retries), if any.

    A retry answers only with what the caller may read now: through a token narrowed to other
    purposes, or after a forget, the first result is NOT_FOUND rather than shown (or written twice).
    """
    if not request_id:
        return None
    row = conn.execute(f"SELECT {COLUMNS} FROM memory m WHERE m.created_by = %s AND m.request_id = %s",
                       (uuid.UUID(caller.member_id), request_id)).fetchone()
    if row is None:
        return None
    if row[0] not in readable_ids(conn, caller, [row[0]]):
        raise NotFound("memory not found")
    memory = to_memory(row)
    attach_links(conn, caller, {row[0]: memory})
    redact_successors(conn, caller, [memory])
    return memory


def check_request_id(request_id: str) -> None:
    """INVALID_ARGUMENT for an over-long request id or one with NUL."""
    if len(request_id) > MAX_REQUEST_ID_CHARS or "\x00" in request_id:
        raise InvalidArgument(f"request_id must be at most {MAX_REQUEST_ID_CHARS} characters, without NUL",
                              field="request_id")


def request_key(operation: str, request_id: str) -> str:
    """The stored idempotency key: the operation (and its target) plus the client's request id, so a
    request id reused for another operation never returns that operation's result."""
    return f"{operation}:{request_id}" if request_id else ""


def redact_successors(conn: psycopg.Connection, caller: m.Caller, memories: list[m.Memory]) -> None:
    """Blanks ``superseded_by_id`` where the successor is not readable by the caller."""
    successors = [uuid.UUID(mem.superseded_by_id) for mem in memories if mem.superseded_by_id]
    visible = {str(i) for i in readable_ids(conn, caller, successors)}
    for mem in memories:
        if mem.superseded_by_id and mem.superseded_by_id not in visible:
            mem.superseded_by_id = ""


def insert(conn: psycopg.Connection, caller: m.Caller, new: NewMemory, request_id: str,
           entity_ids: list[uuid.UUID], sources: list[uuid.UUID] = ()) -> m.Memory:
    """Inserts a memory with its links and queues its embedding; must run inside a transaction.

    With a ``request_id`` a concurrent retry that already inserted wins and its memory is returned.
    """
    member = uuid.UUID(caller.member_id)
    row = conn.execute(
        f"""INSERT INTO memory AS m (id, kind, title, body, audience_member_id, purpose, confidence, origin,
                               created_by, occurred_at, request_id)
            VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
            ON CONFLICT (created_by, request_id) DO NOTHING
            RETURNING {COLUMNS}""",
        (uuid.uuid4(), new.kind, new.title, new.body, new.audience, new.purpose, new.confidence, new.origin, member,
         new.occurred_at, request_id or None)).fetchone()
    if row is None:  # a concurrent retry with the same request_id won the insert
        return by_request_id(conn, caller, request_id)
    mid = row[0]
    with conn.cursor() as cur:
        cur.executemany("INSERT INTO memory_link (memory_id, link_type, target_memory_id) VALUES (%s, 'derived_from', %s)",
                        [(mid, src) for src in sources])
        cur.executemany("INSERT INTO memory_link (memory_id, link_type, target_entity_id) VALUES (%s, 'about', %s)",
                        [(mid, ent) for ent in entity_ids])
    conn.execute("INSERT INTO embedding_job (memory_id, memory_revision) VALUES (%s, 1)", (mid,))
    return to_memory(row)


def occurred_at(req) -> datetime.datetime | None:
    """The optional event time; INVALID_ARGUMENT outside years 1..9999 or with bad nanoseconds."""
    if not req.HasField("occurred_at"):
        return None
    try:
        return req.occurred_at.ToDatetime(tzinfo=datetime.timezone.utc)
    except (ValueError, OverflowError):
        raise InvalidArgument("occurred_at must be a valid timestamp between years 1 and 9999",
                              field="occurred_at") from None


def remember(conn: psycopg.Connection, req: s.RememberRequest) -> m.Memory:
    """Stores a told memory and queues its embedding in one transaction.

    INVALID_ARGUMENT for bad fields; PERMISSION_DENIED for a purpose not granted; NOT_FOUND for an
    entity id the caller cannot see. With a ``request_id`` already used by this member, returns the
    first result and writes nothing.
    """
    caller = req.caller
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
    occurred = occurred_at(req)
    key = request_key("remember", req.request_id)
    with conn.transaction():
        first = by_request_id(conn, caller, key)
        if first is not None:
            return first
        entity_ids = entities.resolve_mentions(conn, caller, req.entities)
        memory = insert(conn, caller, NewMemory(kind, req.title, req.body, audience, purpose, confidence, "told",
                                                occurred), key, entity_ids)
    return memory


def attach_links(conn: psycopg.Connection, caller: m.Caller, memories: dict[uuid.UUID, m.Memory]) -> None:
    """Adds each memory's provenance (one query): derived_from links to sources the caller can read,
    and about links to entities. A readable memory's sources are readable (the chain rule)."""
    if not memories:
        return
    rows = conn.execute(
        """SELECT l.memory_id, l.link_type, l.target_memory_id, e.id, e.name FROM memory_link l
             LEFT JOIN entity e ON e.id = l.target_entity_id
            WHERE l.memory_id = ANY(%s) ORDER BY l.memory_id, l.link_type, l.target_memory_id, e.id""",
        (list(memories),)).fetchall()
    visible = readable_ids(conn, caller, list({r[2] for r in rows if r[2] is not None}))
    for mid, link_type, target, entity_id, entity_name in rows:
        if link_type == "derived_from" and target in visible:
            memories[mid].links.append(m.Link(type=m.LINK_TYPE_DERIVED_FROM, target_memory_id=str(target)))
        elif link_type == "about":
            memories[mid].links.append(m.Link(type=m.LINK_TYPE_ABOUT, target_entity_id=str(entity_id),
                                              target_entity_name=entity_name))


def read(conn: psycopg.Connection, req: s.ReadRequest) -> m.Memory:
    """One memory the caller may read (own row and chain), with readable links and optional history.

    NOT_FOUND when it does not exist or is not readable: both go down the same path.
    """
    mid = parse_uuid(req.memory_id, "memory_id", missing_is_not_found=True)
    if mid not in readable_ids(conn, req.caller, [mid]):
        raise NotFound("memory not found")
    row = conn.execute(f"SELECT {COLUMNS} FROM memory m WHERE m.id = %s AND m.forgotten_at IS NULL",
                       (mid,)).fetchone()
    if row is None:  # forgotten between the verdict and the fetch
        raise NotFound("memory not found")
    memory = to_memory(row)
    attach_links(conn, req.caller, {mid: memory})
    redact_successors(conn, req.caller, [memory])
    if req.include_history:
        for rev, title, body, conf, replaced in conn.execute(
                "SELECT revision, title, body, confidence, replaced_at FROM memory_revision "
                "WHERE memory_id = %s ORDER BY revision DESC", (mid,)):
            memory.history.append(m.Revision(revision=rev, title=title, body=body, confidence=conf,
                                              replaced_at=_ts(replaced)))
    return memory


def get_memories(conn: psycopg.Connection, caller: m.Caller, ids) -> list[m.Memory]:
    """Readable memories by id in the order asked, with their provenance; unreadable or unknown ids
    are absent."""
    wanted = parse_ids(ids)
    ok = readable_ids(conn, caller, wanted)
    rows = conn.execute(f"SELECT {COLUMNS} FROM memory m WHERE m.id = ANY(%s) AND m.forgotten_at IS NULL",
                        ([i for i in wanted if i in ok],))
    by_id = {r[0]: to_memory(r) for r in rows}
    attach_links(conn, caller, by_id)
    redact_successors(conn, caller, list(by_id.values()))
    return [by_id[i] for i in wanted if i in by_id]


def readable_verdicts(conn: psycopg.Connection, caller: m.Caller, ids) -> list[str]:
    """The asked ids the caller may read, in the order asked."""
    wanted = parse_ids(ids)
    ok = readable_ids(conn, caller, wanted)
    return [str(i) for i in wanted if i in ok]

