"""The parts of a member's context bundle (GetContext), chosen in SQL under the readability rule.

For one purpose granted to the caller, the parts are chosen independently among the memories the
caller can read exactly as Recall's are (``READABLE`` of that purpose, then the derived_from walk,
``memories.readable_ids``; superseded memories only when pinned), then joined in this order with each
memory kept once, in the first part that chose it:

1. pinned: every memory the caller pinned (store_service/records/pins.py);
2. summary: the ``SUMMARIES`` newest of kind summary;
3. entity: for each of the ``ENTITIES`` entities most mentioned in the last ``WINDOW_DAYS`` days
   (mentions = readable memories about it created in that window; ties: the most recent mention,
   then the entity id), the newest readable memory about it;
4. recent: the ``RECENT`` newest memories.

"Newest" is creation time, ties by id; each part lists newest first. The counts are taken over
readable memories only, so their order reveals nothing the caller may not read. The gateway renders
the entries and cuts them to a token budget (gateway/context.py).

With the workspace's expiry gate on (``store_service.access.expiry``), the memories it hides are left out of
every part, pinned ones included (a pin is not an update: KeepMemory brings a memory back), and out of
the entity mention counts: the bundle is put in front of an agent unasked, exactly what the gate
keeps stale memories out of.
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass, field

import psycopg
from recallatron.memory.v1 import memory_pb2 as m
from recallatron.store.v1 import store_pb2 as s

from servicekit.caller import check_purpose_granted
from store_service.access import expiry
from store_service.access.readability import READABLE, caller_params
from store_service.database import named
from store_service.records import entity_groups, validity
from store_service.records.memories import get_memories, readable_ids
from store_service.records.windows import OPEN, Window

SUMMARIES = 3
ENTITIES = 5
RECENT = 10
WINDOW_DAYS = 30
# Rows read per query while looking for the newest readable ones: the walk can drop a row (an
# unreadable source up its chain), so reading goes on page by page until enough pass.
PAGE = 50
NEWEST = "ORDER BY m.created_at DESC, m.id DESC"


@dataclass
class _Chosen:
    """One memory of the bundle while it is built."""

    part: int
    created_at: object
    entities: list[m.MentionedEntity] = field(default_factory=list)


def _newest(conn: psycopg.Connection, caller: m.Caller, where: str, params: dict, limit: int | None) -> list:
    """Rows ``(id, created_at)`` of the newest memories ``m`` matching ``where`` that the caller may
    read (own row and chain), newest first, at most ``limit`` (None: all), reading ``PAGE`` at a time."""
    out: list = []
    offset = 0
    while limit is None or len(out) < limit:
        rows = (
            named(conn)
            .execute(
                f"SELECT m.id, m.created_at FROM memory m WHERE {READABLE} AND {where} {NEWEST} "
                "LIMIT %(page)s OFFSET %(offset)s",
                {**caller_params(caller), **params, "page": PAGE, "offset": offset},
            )
            .fetchall()
        )
        ok = readable_ids(conn, caller, [r.id for r in rows])
        out += [r for r in rows if r.id in ok]
        if len(rows) < PAGE:
            break
        offset += PAGE
    return out if limit is None else out[:limit]


def current(window: Window) -> str:
    """The clause keeping current memories only (not superseded, not invalidated), unless the
    window reads in time (``Window.in_time``): its own condition then says which memories count."""
    return "" if window.in_time else " AND m.retired_at IS NULL"


def _top_entities(
    conn: psycopg.Connection, caller: m.Caller, params: dict, gate: str, window: Window
) -> list[m.MentionedEntity]:
    """The ``ENTITIES`` entities most mentioned by readable, live memories of the purpose created in
    the last ``WINDOW_DAYS`` days (said in ``window`` instead, when it is set) that the expiry
    ``gate`` (a clause, '' when off) does not hide, most mentioned first."""
    recent = window.condition() if window else "m.created_at >= now() - make_interval(days => %(days)s)"
    rows = (
        named(conn)
        .execute(
            f"""SELECT m.id, m.created_at, e.id AS entity_id, e.name
                  FROM memory m JOIN memory_link l ON l.memory_id = m.id AND l.link_type = 'about'
                  JOIN entity e ON e.id = l.target_entity_id
                 WHERE {READABLE} AND m.purpose = %(purpose)s{current(window)}
                   AND {recent}{gate}""",
            {**caller_params(caller), **params, "days": WINDOW_DAYS},
        )
        .fetchall()
    )
    ok = readable_ids(conn, caller, list({r.id for r in rows}))
    # A merged entity's mentions count as its group's, under the representative the caller sees.
    shown = entity_groups.representatives(conn, caller, {r.entity_id for r in rows if r.id in ok})
    counted: dict[uuid.UUID, set] = {}  # representative -> the memories about its group
    last: dict[uuid.UUID, object] = {}
    names: dict[uuid.UUID, str] = {}
    for r in rows:
        if r.id in ok:
            # An entity no longer visible (a forget committed since the rows were read) stands alone.
            rep_id, rep_name = (
                (shown[r.entity_id].id, shown[r.entity_id].name)
                if r.entity_id in shown
                else (
                    r.entity_id,
                    r.name,
                )
            )
            counted.setdefault(rep_id, set()).add(r.id)
            last[rep_id] = max(last.get(rep_id, r.created_at), r.created_at)
            names[rep_id] = rep_name
    counts = Counter({e: len(ids) for e, ids in counted.items()})
    ranked = sorted(counts, key=str)  # stable sorts: the last key sorted is the first compared
    ranked.sort(key=lambda e: last[e], reverse=True)
    ranked.sort(key=lambda e: counts[e], reverse=True)
    ranked = ranked[:ENTITIES]
    return [m.MentionedEntity(entity_id=str(e), name=names[e], mentions=counts[e]) for e in ranked]


def bundle(
    conn: psycopg.Connection, caller: m.Caller, purpose: int, expiry_days: int = 0, window: Window = OPEN
) -> list[s.ContextEntry]:
    """The entries of the caller's bundle for ``purpose``: part by part, newest first within each part,
    each memory once, none the expiry gate of ``expiry_days`` days (0: off) hides, every one said in
    ``window`` (``store_service.records.windows``; open: any time). INVALID_ARGUMENT for a bad
    purpose or gate, PERMISSION_DENIED for a purpose not granted."""
    params = {
        "purpose": check_purpose_granted(caller, purpose),
        "member": uuid.UUID(caller.member_id),
        "expiry_days": expiry.check_days(expiry_days),
        **window.params(),
    }
    gate = expiry.shown_clause(expiry_days) + window.clause()
    live = f"m.purpose = %(purpose)s{current(window)}{gate}"
    chosen: dict[uuid.UUID, _Chosen] = {}

    def choose(rows, part: int) -> None:
        for r in rows:
            chosen.setdefault(r.id, _Chosen(part, r.created_at))

    pinned = (
        "m.purpose = %(purpose)s AND m.id IN (SELECT memory_id FROM memory_pin WHERE member_id = %(member)s)" + gate
    )
    choose(_newest(conn, caller, pinned, params, None), m.CONTEXT_PART_PINNED)
    choose(_newest(conn, caller, f"{live} AND m.kind = 'summary'", params, SUMMARIES), m.CONTEXT_PART_SUMMARY)
    for entity in _top_entities(conn, caller, params, expiry.shown_clause(expiry_days), window):
        group = entity_groups.component("%(entity)s::uuid[]")
        about = f"""{live} AND EXISTS (SELECT 1 FROM memory_link l WHERE l.memory_id = m.id
                      AND l.link_type = 'about' AND l.target_entity_id IN ({group}))"""
        rows = _newest(conn, caller, about, {**params, "entity": [uuid.UUID(entity.entity_id)]}, 1)
        choose(rows, m.CONTEXT_PART_ENTITY)
        for r in rows:
            chosen[r.id].entities.append(entity)
    choose(_newest(conn, caller, live, params, RECENT), m.CONTEXT_PART_RECENT)

    # NEWEST within each part (UUIDs compare as PostgreSQL compares them, byte by byte); stable sorts.
    order = sorted(chosen, reverse=True)
    order.sort(key=lambda i: chosen[i].created_at, reverse=True)
    order.sort(key=lambda i: chosen[i].part)
    shown = get_memories(conn, caller, [str(i) for i in order])
    validity.then(conn, shown, window.known_at)
    found = {mem.id: mem for mem in shown}
    return [
        s.ContextEntry(part=chosen[i].part, memory=found[str(i)], entities=chosen[i].entities)
        for i in order
        if str(i) in found  # forgotten between the choice and the fetch
    ]
