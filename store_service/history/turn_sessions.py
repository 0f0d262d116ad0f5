"""Sessions of history turns: runs of one chat with no gap over two hours (issue 10, item 1).

A turn appended with a session id keeps it. A turn without one belongs to its run: the live turns of
its chat (same owner) with no gap over ``SESSION_GAP`` between neighbours in time. Its session is
that of the nearest earlier turn of the run that names one, else of the nearest later one, else
``<chat_id>@<first instant of the run, UTC ISO 8601>``. Appending or forgetting a turn can join or
split runs, so both recompute every run they touched (``recompute``), under the owner's lock.
"""

from __future__ import annotations

import datetime
import uuid

import psycopg

from store_service.database import named

# The gap that ends a session: the old store's rule (a run of turns of one chat with no gap over
# two hours: issue 10, and the legacy store's format).
SESSION_GAP = datetime.timedelta(hours=2)
# Live turns a recomputed span may hold between the first and the last touched instant before the
# instants are split into parts (a few turns appended far apart must not re-read a long history).
SPAN_TURNS = 5_000


def recompute(conn: psycopg.Connection, owner: uuid.UUID, touched: list[tuple[str, datetime.datetime]]) -> None:
    """Recomputes the sessions of every run that holds one of the ``touched`` (chat, instant) pairs:
    new turns, or the places of forgotten ones; call under the owner's lock."""
    by_chat: dict[str, list[datetime.datetime]] = {}
    for chat, when in touched:
        by_chat.setdefault(chat, []).append(when)
    for chat in sorted(by_chat):
        for start, end in _merged(_spans(conn, owner, chat, sorted(by_chat[chat]))):
            _resession(conn, owner, chat, start, end)


def _spans(conn: psycopg.Connection, owner: uuid.UUID, chat: str, times: list[datetime.datetime]) -> list[tuple]:
    """Spans of whole runs that cover the runs of every instant of ``times`` (sorted): one span from
    the run of the first to the run of the last (a batch appended in time order: a handful of
    statements), unless more than ``SPAN_TURNS`` (or four per instant) live turns lie between them;
    then the instants split at their widest gap, and each part is spanned alike."""
    between = conn.execute(
        """SELECT count(*) FROM history_turn WHERE owner_member_id = %s AND chat_id = %s
            AND forgotten_at IS NULL AND occurred_at BETWEEN %s AND %s""",
        (owner, chat, times[0], times[-1]),
    ).fetchone()[0]
    if len(times) == 1 or between <= max(SPAN_TURNS, 4 * len(times)):
        return [(_run_edge(conn, owner, chat, times[0], forward=False), _run_edge(conn, owner, chat, times[-1], True))]
    cut = max(range(1, len(times)), key=lambda i: times[i] - times[i - 1])
    return _spans(conn, owner, chat, times[:cut]) + _spans(conn, owner, chat, times[cut:])


def _merged(spans: list[tuple]) -> list[tuple]:
    """Overlapping spans joined (each is a set of whole runs, so their union is too)."""
    out: list[list] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return [tuple(span) for span in out]


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
