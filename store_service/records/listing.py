"""ListMemories: the memories a caller can read, newest first, filtered, a page at a time (AIP-158).

What is listed is exactly what Read would show: a memory is listed when its own row is readable
and its whole derived_from chain is (``store_service.access.readability.chain_readable``, the rule of Read
and of Recall's walk). The filters only narrow that set, and ``total_size`` counts it, so neither a
page nor a count holds anything the caller cannot read. Each listed memory carries its readable
links and a successor id only when the successor is readable too (``memories.redact_successors``).

Order: ``created_at`` descending, then id descending. Pages are keyset pages
(``store_service.page_tokens``): the token holds the last memory's (created_at, id) and is bound to
the member, their granted purposes and every filter, so it cannot be replayed by another member or
with other filters. A memory written between two pages is newer than the position, so it never
shifts a later page; one forgotten meanwhile just leaves it.

``where``, ``position`` and ``page`` also serve ListExpiringMemories (store_service/access/expiry.py), in
its own order: ``updated_at`` ascending, then id ascending (``OLDEST_UPDATED``).
"""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass

import psycopg
from recallatron.memory.v1 import memory_pb2 as m
from recallatron.store.v1 import store_pb2 as s

from servicekit.caller import check_purpose_granted
from servicekit.checks import time_range
from servicekit.errors import InvalidArgument
from store_service import page_tokens
from store_service.access.readability import READABLE, caller_params, chain_readable
from store_service.database import named
from store_service.records import entity_groups, memories, validity, windows
from store_service.vocabulary import KINDS, enum_value, parse_uuid

# Page sizes (AIP-158): 0 means the default; above the most is coerced to it. 200 memories of at most
# 64 KiB of body each stay inside one gRPC message (servicekit.limits.MAX_MESSAGE_BYTES), history too
# for memories corrected a few times.
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 200
# Current: neither superseded nor invalidated (docs/time.md, "Validity"); superseded: either.
_SUPERSEDED = {
    m.SUPERSEDED_FILTER_UNSPECIFIED: "m.retired_at IS NULL",
    m.SUPERSEDED_FILTER_CURRENT: "m.retired_at IS NULL",
    m.SUPERSEDED_FILTER_SUPERSEDED: "m.retired_at IS NOT NULL",
    m.SUPERSEDED_FILTER_ALL: "TRUE",
}
_AUDIENCE = {
    m.AUDIENCE_UNSPECIFIED: "TRUE",
    m.AUDIENCE_WORKSPACE: "m.audience_member_id IS NULL",
    m.AUDIENCE_MEMBER: "m.audience_member_id = %(member_id)s",
}


@dataclass(frozen=True)
class Order:
    """A listing's order: a timestamp column of ``m``, then id, both descending or both ascending;
    ``first`` is a position before every memory in that order (where the first page starts)."""

    column: str
    descending: bool
    first: tuple[datetime.datetime, uuid.UUID]

    @property
    def sql(self) -> str:
        way = "DESC" if self.descending else "ASC"
        return f"m.{self.column} {way}, m.id {way}"

    @property
    def after(self) -> str:
        """Rows after the position ``(%(after_at)s, %(after_id)s)`` in this order."""
        return f"(m.{self.column}, m.id) {'<' if self.descending else '>'} (%(after_at)s, %(after_id)s)"


# ListMemories: newest first. ListExpiringMemories (store_service/access/expiry.py): oldest updated first.
NEWEST_CREATED = Order(
    "created_at", True, (datetime.datetime.max.replace(tzinfo=datetime.UTC), uuid.UUID(int=(1 << 128) - 1))
)
OLDEST_UPDATED = Order("updated_at", False, (datetime.datetime.min.replace(tzinfo=datetime.UTC), uuid.UUID(int=0)))


@dataclass
class Page:
    """One page of a listing: its memories (with readable links and successors), the next page's
    token ('' on the last), how many readable memories match over all pages, and the database's
    ``now()`` the page was read at."""

    memories: list[m.Memory]
    next_page_token: str
    total: int
    now: datetime.datetime


def _iso(value: datetime.datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def where(caller: m.Caller, req: s.ListMemoriesRequest) -> tuple[str, dict, list]:
    """The filter clause over ``m`` (readability included), its parameters, and the fields the page
    token is bound to. INVALID_ARGUMENT for a bad kind, audience, entity id, source id, time range or
    superseded filter; PERMISSION_DENIED for a purpose not granted."""
    params = caller_params(caller)
    clauses = [READABLE]
    kind = None
    if req.kind != m.KIND_UNSPECIFIED:
        kind = enum_value(KINDS, req.kind, "kind")
        clauses.append("m.kind = %(kind)s")
    if req.audience not in _AUDIENCE:
        raise InvalidArgument("audience must be workspace, member or unspecified", field="audience")
    clauses.append(_AUDIENCE[req.audience])
    purpose = None
    if req.purpose != m.PURPOSE_UNSPECIFIED:
        purpose = check_purpose_granted(caller, req.purpose)
        clauses.append("m.purpose = %(purpose)s")
    entity = None
    if req.entity_id:
        entity = parse_uuid(req.entity_id, "entity_id")
        clauses.append(
            "EXISTS (SELECT 1 FROM memory_link l WHERE l.memory_id = m.id AND l.link_type = 'about'"
            f" AND l.target_entity_id IN ({entity_groups.component('ARRAY[%(entity)s]::uuid[]')}))"
        )
    source = None
    if req.derived_from_id:
        # A memory derived from an unreadable one has an unreadable chain, so it is never listed:
        # an unreadable source lists nothing, like one that does not exist.
        source = parse_uuid(req.derived_from_id, "derived_from_id")
        clauses.append(
            "EXISTS (SELECT 1 FROM memory_link l WHERE l.memory_id = m.id AND l.link_type = 'derived_from'"
            " AND l.target_memory_id = %(source)s)"
        )
    created = time_range(req, "created_after", "created_before")
    updated = time_range(req, "updated_after", "updated_before")
    for column, (start, end) in (("created_at", created), ("updated_at", updated)):
        if start is not None:
            clauses.append(f"m.{column} >= %({column}_start)s")
        if end is not None:
            clauses.append(f"m.{column} < %({column}_end)s")
        params |= {f"{column}_start": start, f"{column}_end": end}
    window = windows.of(req)
    if window:
        clauses.append(window.condition())
        params |= window.params()
    if req.superseded not in _SUPERSEDED:
        raise InvalidArgument("superseded must be current, superseded, all or unspecified", field="superseded")
    # With as_of or known_at unspecified means what those instants hold, retired memories included.
    superseded = (
        "TRUE" if window.in_time and req.superseded == m.SUPERSEDED_FILTER_UNSPECIFIED else _SUPERSEDED[req.superseded]
    )
    clauses.append(superseded)
    params |= {"kind": kind, "purpose": purpose, "entity": entity, "source": source}
    bound = [
        caller.member_id,
        sorted(params["purposes"]),
        kind,
        int(req.audience),
        purpose,
        entity and str(entity),
        [_iso(x) for x in created],
        [_iso(x) for x in updated],
        superseded,
        source and str(source),
        window.bound(),
    ]
    return " AND ".join(clauses), params, bound


def position(token: str, fingerprint: str, order: Order) -> tuple[datetime.datetime, uuid.UUID]:
    """The (timestamp, id) after which the page starts in ``order``; INVALID_ARGUMENT for a foreign
    or malformed token (``page_tokens.decode_position``)."""
    position = page_tokens.decode_position(token, fingerprint, "listing", page_tokens.instant, page_tokens.identifier)
    return order.first if position is None else position


def list_memories(conn: psycopg.Connection, caller: m.Caller, req: s.ListMemoriesRequest) -> s.ListMemoriesResponse:
    """One page of the memories ``caller`` can read that match ``req``'s filters (module docstring),
    with ``total_size`` the count of every such memory and, with ``include_history``, their earlier
    revisions.

    INVALID_ARGUMENT for a negative page size, a bad filter or a page token not issued for this
    member and these filters; PERMISSION_DENIED for a purpose filter not granted.
    """
    size = page_tokens.page_size(req.page_size, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
    clause, params, bound = where(caller, req)
    fingerprint = page_tokens.fingerprint(bound)
    after = position(req.page_token, fingerprint, NEWEST_CREATED)
    out = page(conn, caller, clause, params, fingerprint, after, size, NEWEST_CREATED, req.include_history)
    validity.then(conn, out.memories, params.get("known_at"))
    return s.ListMemoriesResponse(memories=out.memories, next_page_token=out.next_page_token, total_size=out.total)


def page(
    conn: psycopg.Connection,
    caller: m.Caller,
    clause: str,
    params: dict,
    fingerprint: str,
    after: tuple[datetime.datetime, uuid.UUID],
    size: int,
    order: Order,
    include_history: bool = False,
) -> Page:
    """The page of ``size`` memories after ``after`` in ``order`` among the rows ``m`` matching
    ``clause`` (which holds ``READABLE``; its ``params``) whose whole derived_from chain the caller
    can read, the count of all of them, and the next token (bound to ``fingerprint``). One statement
    selects the readable matches (the chain walk seeded by the filtered rows), counts them and reads
    the page; links and successors take one query each, as Read's."""
    rows = (
        named(conn)
        .execute(
            f"""WITH ok AS MATERIALIZED ({chain_readable(f"(SELECT m.id FROM memory m WHERE {clause})")})
                SELECT c.total, c.now, p.*
                  FROM (SELECT count(*) AS total, now() AS now FROM ok) c
                  LEFT JOIN LATERAL (
                       SELECT {memories.COLUMNS} FROM memory m JOIN ok ON ok.start_id = m.id
                        WHERE {order.after}
                        ORDER BY {order.sql} LIMIT %(limit)s) p ON TRUE""",
            {**params, "after_at": after[0], "after_id": after[1], "limit": size + 1},
        )
        .fetchall()
    )
    total, now = rows[0].total, rows[0].now
    rows = [r for r in rows if r.id is not None]
    token = ""
    if len(rows) > size:
        rows = rows[:size]
        last = rows[-1]
        token = page_tokens.encode(fingerprint, [getattr(last, order.column).isoformat(), str(last.id)])
    found = {r.id: memories.to_memory(r) for r in rows}
    memories.attach_links(conn, caller, found)
    memories.redact_successors(conn, caller, list(found.values()))
    if include_history:
        memories.attach_history(conn, found)
    return Page(list(found.values()), token, total, now)
