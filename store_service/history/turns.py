"""History evidence: a member's conversation turns, kept for that member alone (issue 10, item 1).

A turn is never a memory. It lives in its own tables (migration 0006_history.sql), which no memory
query reads: recall, Read, FindEntities, the memory statistics and the status counts never see it.
Every function here takes the caller and touches only the caller's own rows (``owner_member_id``),
so no member, admins included, can see, count, rank by or forget another member's turns.

This module is the write side: append (idempotent by request id, each turn checked first by
``servicekit.checks.check_history_turn``, which ``recallatron import`` runs on a file too) and forget
(by ids or a time range). ``history_index`` keeps the keyword postings and each owner's BM25 statistics,
``history_sessions`` the sessions of turns appended without one, ``history_search`` reads.

Writes of one owner serialise on a transaction-scoped advisory lock, which keeps the statistics
exact and the session runs consistent under concurrent calls.

A forgotten turn leaves search, sessions and statistics, and its text is erased. When it had a
request id, a tombstone keeps only its id, owner, request id and time of forgetting, so that a retry
(an import run again) is answered as already stored and does not bring the turn back.
"""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass

import psycopg
from recallatron.memory.v1 import memory_pb2 as m

from servicekit import deadlines
from servicekit.checks import NewTurn, check_history_turn, time_range
from servicekit.errors import InvalidArgument, NotFound, ServiceError
from servicekit.limits import MAX_HISTORY_BATCH
from store_service.access import membership
from store_service.database import named
from store_service.history import turn_index, turn_sessions
from store_service.records import idempotency

# Turn ids one ForgetHistory names at most.
MAX_FORGET_IDS = 1_000
# pg_advisory_xact_lock(class, key) class of an owner's history writes ("hi"); the key is
# hashtext(owner): two owners sharing a hash only wait for each other.
_LOCK_CLASS = 0x6869


@dataclass
class Appended:
    """The outcome of one stored (or replayed) turn."""

    turn_id: uuid.UUID
    replayed: bool


def check_batch_size(count: int) -> None:
    """INVALID_ARGUMENT for an append of no turns or more than ``MAX_HISTORY_BATCH``."""
    if not 1 <= count <= MAX_HISTORY_BATCH:
        raise InvalidArgument(
            f"an append holds 1..{MAX_HISTORY_BATCH} turns; this one has {count}",
            field="turns",
            limit=MAX_HISTORY_BATCH,
        )


def lock_owner(conn: psycopg.Connection, owner: uuid.UUID) -> None:
    """Takes the owner's history write lock until the end of the transaction."""
    conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_LOCK_CLASS, str(owner)))


def append(conn: psycopg.Connection, caller: m.Caller, turns) -> list[Appended | ServiceError]:
    """Stores 1..500 HistoryTurn messages for the caller, in one transaction; one result per turn.

    A turn's result is its new id; for a request id already used for the same turn (by an earlier
    call, even for a turn forgotten since, or by an earlier turn of this call) the first turn's id,
    replayed, with nothing written; AlreadyExists (it alone fails) for a request id already used for
    a different turn (another chat, role, text, session or time: the second turn is never silently
    dropped); or the InvalidArgument it failed validation with (it alone fails).
    """
    check_batch_size(len(turns))
    owner = uuid.UUID(caller.member_id)
    now = datetime.datetime.now(datetime.UTC)
    results: list[Appended | ServiceError | None] = [None] * len(turns)
    fresh: dict[int, NewTurn] = {}
    for i, turn in enumerate(turns):
        try:
            fresh[i] = check_history_turn(turn, now)
        except ServiceError as exc:
            results[i] = exc
    if not fresh:
        return results
    with conn.transaction():
        membership.hold_caller(conn, caller)  # a turn of a removed member never appears
        lock_owner(conn, owner)
        keys = sorted({t.request_id for t in fresh.values() if t.request_id})
        # request id -> (first turn's id, that turn as stored; None once forgotten: its text is erased)
        firsts: dict[str, tuple[uuid.UUID, NewTurn | None]] = {
            r.request_id: (
                r.id,
                None
                if r.forgotten
                else NewTurn(r.request_id, r.chat_id, r.role, r.text, r.occurred_at, r.session_id, r.timed),
            )
            for r in named(conn).execute(
                """SELECT request_id, id, chat_id, role, text, occurred_at, session_id,
                          forgotten_at IS NOT NULL AS forgotten, true AS timed
                     FROM history_turn WHERE owner_member_id = %s AND request_id = ANY(%s)""",
                (owner, keys),
            )
        }
        rows: list[tuple[uuid.UUID, NewTurn, dict[str, int]]] = []
        for i, turn in fresh.items():
            first = firsts.get(turn.request_id) if turn.request_id else None
            if first is not None:
                first_id, stored = first
                if stored is None or stored.same_request(turn):
                    results[i] = Appended(first_id, replayed=True)
                else:
                    results[i] = idempotency.reused(turn.request_id, "AppendHistory")
                continue
            turn_id = uuid.uuid4()
            if turn.request_id:
                firsts[turn.request_id] = (turn_id, turn)
            rows.append((turn_id, turn, turn_index.terms(turn.text)))
            results[i] = Appended(turn_id, replayed=False)
        if rows:
            _insert(conn, owner, rows)
            turn_index.update(conn, owner, [(turn_id, terms) for turn_id, _, terms in rows], +1)
            turn_sessions.recompute(conn, owner, [(t.chat_id, t.occurred_at) for _, t, _ in rows])
        deadlines.check_before_commit()
    return results


def _insert(conn: psycopg.Connection, owner: uuid.UUID, rows) -> None:
    """Inserts new turns; the session of one without a session id is its own id until
    ``turn_sessions.recompute`` sets it."""
    conn.execute(
        """INSERT INTO history_turn (id, owner_member_id, request_id, chat_id, role, text, occurred_at,
                                     session_id, session, doc_len)
           SELECT i, %s, r, c, ro, t, w, s, coalesce(s, i::text), d
             FROM unnest(%s::uuid[], %s::text[], %s::text[], %s::text[], %s::text[], %s::timestamptz[],
                         %s::text[], %s::int[]) AS u(i, r, c, ro, t, w, s, d)""",
        (
            owner,
            [turn_id for turn_id, _, _ in rows],
            [t.request_id or None for _, t, _ in rows],
            [t.chat_id for _, t, _ in rows],
            [t.role for _, t, _ in rows],
            [t.text for _, t, _ in rows],
            [t.occurred_at for _, t, _ in rows],
            [t.session_id for _, t, _ in rows],
            [len(terms) for _, _, terms in rows],
        ),
    )


def forget(conn: psycopg.Connection, caller: m.Caller, req) -> int:
    """Forgets the caller's own turns named by a ForgetHistoryRequest; returns how many.

    By ``turn_ids`` (1..1,000): all or nothing, NOT_FOUND naming the first id that is not a live
    turn of the caller, malformed ids included (another member's turn answers exactly as a missing
    one). By ``start_time`` and ``end_time``, both set: every live turn of the caller that occurred
    in [start, end). INVALID_ARGUMENT for neither, both, more than 1,000 ids, or a bad range.
    """
    start, end = time_range(req)
    ids = list(dict.fromkeys(req.turn_ids))
    if ids and (start or end):
        raise InvalidArgument("name turn_ids or a time range, not both", field="turn_ids")
    if not ids and (start is None or end is None):
        raise InvalidArgument("name turn_ids, or both start_time and end_time", field="turn_ids")
    if len(req.turn_ids) > MAX_FORGET_IDS:  # counted as sent: repeats do not make a long list short
        raise InvalidArgument(f"at most {MAX_FORGET_IDS} turn_ids per call", field="turn_ids", limit=MAX_FORGET_IDS)
    owner = uuid.UUID(caller.member_id)
    with conn.transaction():
        membership.hold_caller(conn, caller)
        lock_owner(conn, owner)
        if ids:
            wanted = _parse_turn_ids(ids)
            rows = conn.execute(
                """SELECT id, chat_id, occurred_at, request_id IS NOT NULL FROM history_turn
                    WHERE owner_member_id = %s AND forgotten_at IS NULL AND id = ANY(%s)""",
                (owner, list(wanted.values())),
            ).fetchall()
            found = {r[0] for r in rows}
            missing = next((raw for raw, turn_id in wanted.items() if turn_id not in found), None)
            if missing is not None:
                raise NotFound(f"history turn {missing[:40]} not found", field="turn_ids")
        else:
            rows = conn.execute(
                """SELECT id, chat_id, occurred_at, request_id IS NOT NULL FROM history_turn
                    WHERE owner_member_id = %s AND forgotten_at IS NULL AND occurred_at >= %s AND occurred_at < %s""",
                (owner, start, end),
            ).fetchall()
        _erase(conn, owner, rows)
        turn_sessions.recompute(conn, owner, [(chat, when) for _, chat, when, _ in rows])
    return len(rows)


def forget_all(conn: psycopg.Connection, owner: uuid.UUID) -> int:
    """Forgets every live turn of ``owner``, as its own ForgetHistory of them would (text erased, out
    of search, sessions and statistics, request-id tombstones kept); returns how many. This is what
    AdminService.RemoveMember does with a removed member's history: it is that member's evidence
    alone, nobody else may ever read it, so nothing is lost to anyone and the member's words do not
    outlive its membership. A second run finds nothing and returns 0."""
    with conn.transaction():
        lock_owner(conn, owner)
        rows = conn.execute(
            """SELECT id, chat_id, occurred_at, request_id IS NOT NULL FROM history_turn
                WHERE owner_member_id = %s AND forgotten_at IS NULL""",
            (owner,),
        ).fetchall()
        _erase(conn, owner, rows)  # no live turn of the owner is left, so no session to recompute
    return len(rows)


def _parse_turn_ids(ids: list[str]) -> dict[str, uuid.UUID]:
    """Each given id and its UUID; a malformed one cannot name a turn: NOT_FOUND, as a missing one."""
    out = {}
    for raw in ids:
        try:
            out[raw] = uuid.UUID(raw)
        except ValueError:
            raise NotFound(f"history turn {raw[:40]} not found", field="turn_ids") from None
    return out


def _erase(conn: psycopg.Connection, owner: uuid.UUID, rows) -> None:
    """Removes turns (id, chat, instant, has request id) from the index and statistics, keeps a
    tombstone of each that has a request id and deletes the others; under the owner's lock."""
    if not rows:
        return
    ids = [r[0] for r in rows]
    docs: dict[uuid.UUID, dict[str, int]] = {turn_id: {} for turn_id in ids}
    for turn_id, lexeme, tf in conn.execute(
        "SELECT turn_id, lexeme, tf FROM history_posting WHERE turn_id = ANY(%s)", (ids,)
    ):
        docs[turn_id][lexeme] = tf
    turn_index.update(conn, owner, list(docs.items()), -1)
    conn.execute("DELETE FROM history_turn WHERE id = ANY(%s)", ([r[0] for r in rows if not r[3]],))
    conn.execute(
        """UPDATE history_turn SET text = '', chat_id = NULL, role = NULL, occurred_at = NULL, session_id = NULL,
                  session = NULL, doc_len = 0, forgotten_at = now()
            WHERE id = ANY(%s)""",
        ([r[0] for r in rows if r[3]],),
    )
