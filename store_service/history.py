"""History evidence: a member's conversation turns, kept for that member alone (issue 10, item 1).

A turn is never a memory. It lives in its own tables (migration 0006_history.sql), which no memory
query reads: recall, Read, FindEntities, the memory statistics and the status counts never see it.
Every function here takes the caller and touches only the caller's own rows (``owner_member_id``),
so no member, admins included, can see, count, rank by or forget another member's turns.

Sessions: a turn appended with a session id keeps it. A turn without one belongs to its run, the
turns of its chat (same owner) with no gap over ``SESSION_GAP`` between neighbours in time; its
session is that of the nearest earlier turn of the run that names one, else the nearest later one,
else ``<chat_id>@<first instant of the run, UTC ISO 8601>``. Appending or forgetting a turn can join
or split runs, so each recomputes the runs it touched (``_resession``).

Writes of one owner serialise on a transaction-scoped advisory lock, which keeps the statistics
exact and the session runs consistent under concurrent calls.
"""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass

import psycopg
from recallatron.memory.v1 import memory_pb2 as m

from servicekit.errors import InvalidArgument, ServiceError
from servicekit.limits import MAX_HISTORY_BATCH
from store_service import analysis
from store_service.database import named
from store_service.memories import check_request_id
from store_service.vocabulary import MAX_BODY_BYTES

# The gap that ends a session: the old store's rule (a run of turns of one chat with no gap over
# two hours, issue 10 and the legacy format's README).
SESSION_GAP = datetime.timedelta(hours=2)
# Accepted role names and what is stored: ``rheo`` is the old store's name of the assistant.
ROLES = {"user": "user", "assistant": "assistant", "rheo": "assistant"}
MAX_CHAT_ID_CHARS = 200
MAX_SESSION_ID_CHARS = 200
# pg_advisory_xact_lock(class, key) class of an owner's history writes ("hi"); the key is
# hashtext(owner): two owners sharing a hash only wait for each other.
_LOCK_CLASS = 0x6869


@dataclass
class NewTurn:
    """A validated turn about to be stored."""

    request_id: str
    chat_id: str
    role: str
    text: str
    occurred_at: datetime.datetime
    session_id: str | None


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


def _short_text(value: str, field: str, limit: int, required: bool) -> None:
    """INVALID_ARGUMENT for a blank (when ``required``), over-long or NUL-holding identifier."""
    if required and not value.strip():
        raise InvalidArgument(f"{field} must not be empty", field=field)
    if len(value) > limit or "\x00" in value:
        raise InvalidArgument(f"{field} must be at most {limit} characters, without NUL", field=field, limit=limit)


def timestamp(ts, field: str) -> datetime.datetime:
    """A protobuf Timestamp as an aware UTC datetime; INVALID_ARGUMENT outside years 1..9999 or
    with nanoseconds outside 0..999,999,999."""
    try:
        return ts.ToDatetime(tzinfo=datetime.UTC)
    except (ValueError, OverflowError):
        raise InvalidArgument(f"{field} must be a valid timestamp between years 1 and 9999", field=field) from None


def prepare(turn, now: datetime.datetime) -> NewTurn:
    """Validates one HistoryTurn without the database; raises the InvalidArgument it fails with.

    NUL characters are dropped from the text first (the old store's clients wrote stray ones); then
    the text must not be blank and must fit ``MAX_BODY_BYTES`` (65,536) bytes of UTF-8, the body limit
    of a memory. An unset ``occurred_at`` means ``now``."""
    check_request_id(turn.request_id)
    _short_text(turn.chat_id, "chat_id", MAX_CHAT_ID_CHARS, required=True)
    _short_text(turn.session_id, "session_id", MAX_SESSION_ID_CHARS, required=False)
    role = ROLES.get(turn.role)
    if role is None:
        raise InvalidArgument(f"role must be one of: {', '.join(ROLES)}; got {turn.role[:40]!r}", field="role")
    text = turn.text.replace("\x00", "")
    if not text.strip():
        raise InvalidArgument("text must not be empty or blank", field="text")
    size = len(text.encode("utf-8"))
    if size > MAX_BODY_BYTES:
        raise InvalidArgument(
            f"text is {size} bytes; the limit is {MAX_BODY_BYTES} bytes of UTF-8", field="text", limit=MAX_BODY_BYTES
        )
    when = timestamp(turn.occurred_at, "occurred_at") if turn.HasField("occurred_at") else now
    return NewTurn(turn.request_id, turn.chat_id, role, text, when, turn.session_id or None)


def _lock_owner(conn: psycopg.Connection, owner: uuid.UUID) -> None:
    conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_LOCK_CLASS, str(owner)))


def append(conn: psycopg.Connection, caller: m.Caller, turns) -> list[Appended | ServiceError]:
    """Stores 1..500 HistoryTurn messages for the caller, in one transaction; one result per turn.

    A turn's result is its new id; for a request id already used (by an earlier call, even for a
    turn forgotten since, or by an earlier turn of this call) the first turn's id, replayed, with
    nothing written; or the InvalidArgument it failed validation with (it alone fails).
    """
    check_batch_size(len(turns))
    owner = uuid.UUID(caller.member_id)
    now = datetime.datetime.now(datetime.UTC)
    results: list[Appended | ServiceError | None] = [None] * len(turns)
    fresh: dict[int, NewTurn] = {}
    for i, turn in enumerate(turns):
        try:
            fresh[i] = prepare(turn, now)
        except ServiceError as exc:
            results[i] = exc
    if not fresh:
        return results
    with conn.transaction():
        _lock_owner(conn, owner)
        keys = sorted({t.request_id for t in fresh.values() if t.request_id})
        firsts = dict(
            conn.execute(
                "SELECT request_id, id FROM history_turn WHERE owner_member_id = %s AND request_id = ANY(%s)",
                (owner, keys),
            ).fetchall()
        )
        rows: list[tuple[uuid.UUID, NewTurn, dict[str, int]]] = []
        for i, turn in fresh.items():
            first = firsts.get(turn.request_id) if turn.request_id else None
            if first is not None:
                results[i] = Appended(first, replayed=True)
                continue
            turn_id = uuid.uuid4()
            if turn.request_id:
                firsts[turn.request_id] = turn_id
            rows.append((turn_id, turn, analysis.document_terms("", turn.text)))
            results[i] = Appended(turn_id, replayed=False)
        if rows:
            _insert(conn, owner, rows)
            _index(conn, owner, [(turn_id, terms) for turn_id, _, terms in rows], +1)
            _resession_all(conn, owner, [(t.chat_id, t.occurred_at) for _, t, _ in rows])
    return results


def _insert(conn: psycopg.Connection, owner: uuid.UUID, rows) -> None:
    """Inserts new turns (their session for now their own, or their id until ``_resession``)."""
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


def _index(conn: psycopg.Connection, owner: uuid.UUID, docs: list[tuple[uuid.UUID, dict[str, int]]], sign: int) -> None:
    """Adds (``sign`` +1) or removes (-1) turns' postings and their share of the owner's statistics;
    call under the owner's lock. ``docs`` are (turn id, lexeme -> term frequency) pairs."""
    if not docs:
        return
    df: dict[str, int] = {}
    for _, terms in docs:
        for lexeme in terms:
            df[lexeme] = df.get(lexeme, 0) + 1
    if sign > 0:
        conn.execute(
            """INSERT INTO history_posting (owner_member_id, lexeme, turn_id, tf, doc_len)
               SELECT %s, l, i, tf, d FROM unnest(%s::text[], %s::uuid[], %s::int[], %s::int[]) AS u(l, i, tf, d)""",
            (
                owner,
                [lx for _, terms in docs for lx in terms],
                [turn_id for turn_id, terms in docs for _ in terms],
                [tf for _, terms in docs for tf in terms.values()],
                [len(terms) for _, terms in docs for _ in terms],
            ),
        )
    else:
        conn.execute("DELETE FROM history_posting WHERE turn_id = ANY(%s)", ([turn_id for turn_id, _ in docs],))
    lexemes = sorted(df)
    conn.execute(
        """INSERT INTO history_df AS d (owner_member_id, lexeme, df)
           SELECT %s, l, n FROM unnest(%s::text[], %s::bigint[]) AS u(l, n)
           ON CONFLICT (owner_member_id, lexeme) DO UPDATE SET df = d.df + EXCLUDED.df""",
        (owner, lexemes, [sign * df[lx] for lx in lexemes]),
    )
    if sign < 0:
        conn.execute("DELETE FROM history_df WHERE owner_member_id = %s AND df <= 0", (owner,))
    conn.execute(
        """INSERT INTO history_stats AS s (owner_member_id, doc_count, total_len) VALUES (%s, %s, %s)
           ON CONFLICT (owner_member_id) DO UPDATE
           SET doc_count = s.doc_count + EXCLUDED.doc_count, total_len = s.total_len + EXCLUDED.total_len""",
        (owner, sign * len(docs), sign * sum(len(terms) for _, terms in docs)),
    )


def _resession_all(conn: psycopg.Connection, owner: uuid.UUID, touched: list[tuple[str, datetime.datetime]]) -> None:
    """Recomputes the sessions of every run that holds one of the ``touched`` (chat, instant) pairs:
    new turns, or the places of forgotten ones. Runs already recomputed are not walked again."""
    by_chat: dict[str, list[datetime.datetime]] = {}
    for chat, when in touched:
        by_chat.setdefault(chat, []).append(when)
    for chat in sorted(by_chat):
        end = None
        for when in sorted(by_chat[chat]):
            if end is not None and when <= end:
                continue  # inside the region just recomputed
            start, end = _run_edge(conn, owner, chat, when, forward=False), _run_edge(conn, owner, chat, when, True)
            _resession(conn, owner, chat, start, end)


def _run_edge(conn: psycopg.Connection, owner: uuid.UUID, chat: str, when: datetime.datetime, forward: bool):
    """The first (or last) instant of the run that a turn at ``when`` belongs to: hops to the
    farthest live turn within ``SESSION_GAP`` until there is none (every gap passed over is then at
    most the gap), one index probe a hop. The arithmetic is PostgreSQL's, whose range has room on
    both sides of years 1..9999."""
    step = (
        """SELECT max(occurred_at) FROM history_turn WHERE owner_member_id = %(o)s AND chat_id = %(c)s
             AND forgotten_at IS NULL AND occurred_at > %(t)s AND occurred_at <= %(t)s + %(gap)s"""
        if forward
        else """SELECT min(occurred_at) FROM history_turn WHERE owner_member_id = %(o)s AND chat_id = %(c)s
             AND forgotten_at IS NULL AND occurred_at < %(t)s AND occurred_at >= %(t)s - %(gap)s"""
    )
    while True:
        hop = conn.execute(step, {"o": owner, "c": chat, "t": when, "gap": SESSION_GAP}).fetchone()[0]
        if hop is None:
            return when
        when = hop


def computed_session(chat_id: str, start: datetime.datetime) -> str:
    """The session of a run in which no turn names one: ``<chat_id>@<start, UTC ISO 8601>``, e.g.
    ``tg:100200300@2026-03-02T08:01:00Z`` (microseconds only when there are any)."""
    return f"{chat_id}@{start.astimezone(datetime.UTC).replace(tzinfo=None).isoformat()}Z"


def sessions_of_runs(chat_id: str, turns: list[tuple[datetime.datetime, str | None]]) -> list[str]:
    """The session of each turn of one chat, given in time order as (instant, session id given or
    None): the module docstring's rule. Pure, so tests can check it alone."""
    out: list[str] = []
    start = 0
    for i in range(1, len(turns) + 1):
        if i < len(turns) and turns[i][0] - turns[i - 1][0] <= SESSION_GAP:
            continue
        run = [sid for _, sid in turns[start:i]]  # a whole run: [start, i)
        later: list[str | None] = []  # the nearest session named at or after each turn
        for sid in reversed(run):
            later.append(sid if sid is not None else (later[-1] if later else None))
        later.reverse()
        earlier = None
        fallback = computed_session(chat_id, turns[start][0])
        for sid, after in zip(run, later, strict=True):
            earlier = sid if sid is not None else earlier
            out.append(earlier or after or fallback)
        start = i
    return out


def _resession(conn: psycopg.Connection, owner: uuid.UUID, chat: str, start, end) -> None:
    """Sets the session of every live turn of ``chat`` in [start, end], a span of whole runs."""
    rows = (
        named(conn)
        .execute(
            """SELECT id, occurred_at, session_id, session FROM history_turn
            WHERE owner_member_id = %s AND chat_id = %s AND forgotten_at IS NULL
              AND occurred_at BETWEEN %s AND %s ORDER BY occurred_at, seq""",
            (owner, chat, start, end),
        )
        .fetchall()
    )
    sessions = sessions_of_runs(chat, [(r.occurred_at, r.session_id) for r in rows])
    changed = [(r.id, new) for r, new in zip(rows, sessions, strict=True) if r.session != new]
    if changed:
        conn.execute(
            """UPDATE history_turn t SET session = u.s FROM unnest(%s::uuid[], %s::text[]) AS u(i, s)
                WHERE t.id = u.i""",
            ([i for i, _ in changed], [s for _, s in changed]),
        )
