"""PromptContext's session memory: which memories were put in front of a model in a session.

Per member, a row (the SHA-256 of the session key, the memory, its revision, when) for each memory a
PromptContext block showed (table ``prompt_shown``, migration 0015). A memory shown in the session at
its current revision in the last ``KEEP_HOURS`` hours is not shown again; one whose revision changed
since is. Rows older than that are ignored and pruned at the next record. A forgotten memory's rows
go with it (``lifecycle.forget`` calls ``forget_memories``) and a removed member's with the member
(``members.remove`` calls ``forget_member``). The key itself never reaches the store.
"""

from __future__ import annotations

import uuid

import psycopg
from recallatron.store.v1 import store_pb2 as s

from servicekit.errors import InvalidArgument
from store_service.access import membership
from store_service.vocabulary import parse_uuid

KEEP_HOURS = 24
# The most memories one call names: a PromptContext passes at most its recall's top k.
MAX_MEMORIES = 100
DEADLOCK_ATTEMPTS = 3
_FRESH = f"shown_at > now() - make_interval(hours => {KEEP_HOURS})"


def _check(req) -> tuple[uuid.UUID, bytes, list[uuid.UUID], list[int]]:
    """The caller's member id, the key hash, ids and revisions of a request; INVALID_ARGUMENT for a
    malformed member id, a hash that is not 32 bytes, too many memories or a malformed id."""
    member = parse_uuid(req.caller.member_id, "caller.member_id")
    if len(req.session_key_sha256) != 32:
        raise InvalidArgument("session_key_sha256 must be the 32 bytes of a SHA-256", field="session_key_sha256")
    if len(req.memories) > MAX_MEMORIES:
        raise InvalidArgument(f"at most {MAX_MEMORIES} memories", field="memories", limit=MAX_MEMORIES)
    ids = [parse_uuid(x.memory_id, "memories.memory_id") for x in req.memories]
    return member, bytes(req.session_key_sha256), ids, [x.revision for x in req.memories]


def shown(conn: psycopg.Connection, req: s.ShownInSessionRequest) -> s.ShownInSessionResponse:
    """Of ``req.memories``, those shown in the caller's session at the revision given, lately."""
    member, key, ids, revisions = _check(req)
    if not ids:
        return s.ShownInSessionResponse()
    rows = conn.execute(
        f"""SELECT p.memory_id FROM prompt_shown p
              JOIN unnest(%s::uuid[], %s::int[]) AS q(id, revision) ON q.id = p.memory_id AND q.revision = p.revision
             WHERE p.member_id = %s AND p.session_sha256 = %s AND {_FRESH}""",
        (ids, revisions, member, key),
    ).fetchall()
    found = {r[0] for r in rows}
    return s.ShownInSessionResponse(shown_ids=[str(i) for i in dict.fromkeys(ids) if i in found])


def record(conn: psycopg.Connection, req: s.RecordShownRequest) -> s.RecordShownResponse:
    """Records ``req.memories`` shown now in the caller's session and prunes stale rows. A memory
    forgotten meanwhile is skipped: its row is locked against Forget (FOR SHARE) and read again.
    Forget locks a memory before its derivations, so the two can deadlock; the transaction changed
    nothing then, and runs again (as Forget does, ``lifecycle.FORGET_DEADLOCK_ATTEMPTS`` times)."""
    member, key, ids, revisions = _check(req)
    for attempt in range(1, DEADLOCK_ATTEMPTS + 1):
        try:
            return _record_once(conn, req, member, key, ids, revisions)
        except psycopg.errors.DeadlockDetected:
            if attempt == DEADLOCK_ATTEMPTS:
                raise
    raise AssertionError("unreachable")


def _record_once(
    conn: psycopg.Connection,
    req: s.RecordShownRequest,
    member: uuid.UUID,
    key: bytes,
    ids: list[uuid.UUID],
    revisions: list[int],
) -> s.RecordShownResponse:
    with conn.transaction():
        membership.hold_caller(conn, req.caller)
        conn.execute(f"DELETE FROM prompt_shown WHERE NOT ({_FRESH})")
        if not ids:
            return s.RecordShownResponse()
        live = conn.execute(
            "SELECT id FROM memory WHERE id = ANY(%s) AND forgotten_at IS NULL ORDER BY id FOR SHARE", (ids,)
        ).fetchall()
        keep = {r[0] for r in live}
        latest = {i: rev for i, rev in zip(ids, revisions, strict=True) if i in keep}
        if latest:
            conn.execute(
                """INSERT INTO prompt_shown (member_id, session_sha256, memory_id, revision)
                   SELECT %s, %s, q.id, q.revision FROM unnest(%s::uuid[], %s::int[]) AS q(id, revision)
                   ON CONFLICT (member_id, session_sha256, memory_id)
                   DO UPDATE SET revision = excluded.revision, shown_at = excluded.shown_at""",
                (member, key, list(latest), list(latest.values())),
            )
    return s.RecordShownResponse(recorded=len(latest))


def forget_memories(conn: psycopg.Connection, memory_ids: list[uuid.UUID]) -> None:
    """Drops the session rows of memories being forgotten (inside Forget's transaction)."""
    conn.execute("DELETE FROM prompt_shown WHERE memory_id = ANY(%s)", (memory_ids,))


def forget_member(conn: psycopg.Connection, member: uuid.UUID) -> int:
    """Drops every session row of a removed member, in a transaction of its own; how many."""
    with conn.transaction():
        return conn.execute("DELETE FROM prompt_shown WHERE member_id = %s", (member,)).rowcount
