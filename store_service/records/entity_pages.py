"""Entity pages (docs/entities.md, "Entity pages"): GetEntity.

A page is built from the memories the caller can read and nothing else: the entity as the caller
sees its group (store_service/records/entities.py), the attributes and relations stated of any
member of the group by current memories (or by those valid at ``as_of``, known at ``known_at``:
store_service/records/windows.py), each with the memory that states it, and the timeline of
memories about the group, superseded ones included, the latest said first.
"""

from __future__ import annotations

import uuid

import psycopg
from google.protobuf import timestamp_pb2
from recallatron.memory.v1 import memory_pb2 as m
from recallatron.store.v1 import store_pb2 as s

from servicekit.errors import InvalidArgument, NotFound
from servicekit.limits import MAX_NAME_CHARS
from servicekit.text import is_blank, name_key
from store_service import page_tokens
from store_service.access.readability import READABLE, caller_params
from store_service.database import named
from store_service.records import entities, entity_groups, memories, windows

DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100


def _group(
    conn: psycopg.Connection, caller: m.Caller, entity: str, page: entity_groups.Page
) -> tuple[entity_groups.GroupView, list[str]]:
    """The group the request names, as the caller sees it with ``page`` of its timeline, and the
    other groups of that name."""
    entity = entity.strip()
    if is_blank(entity) or len(entity) > MAX_NAME_CHARS or "\x00" in entity:
        raise InvalidArgument(f"entity must be an id or a name of 1..{MAX_NAME_CHARS} characters", field="entity")
    try:
        eid = uuid.UUID(entity)
    except ValueError:
        eid = None
    # An id first; a name that only looks like one (an entity may be named so) next.
    view = entity_groups.views(conn, caller, {eid}, page).get(eid) if eid else None
    if view is not None:
        return view, []
    groups = entity_groups.named_groups(conn, caller, {name_key(entity)}, page).get(name_key(entity), [])
    if not groups:
        raise NotFound("no entity of that id or name that you can see", field="entity")
    return groups[0], [str(g.representative.id) for g in groups[1:]]


# The newest attribute claims a page shows of one key.
CLAIMS_PER_KEY = 5


def _claims(conn: psycopg.Connection, caller: m.Caller, members: list[uuid.UUID], window: windows.Window) -> tuple:
    """Attributes, relations out, relations in, and the claims left out, stated of ``members`` by the
    memories the caller can read that ``window`` holds (current ones when it reads no time): the
    newest ``CLAIMS_PER_KEY`` of each key, the newest of each (predicate, entity).

    These, and the group's pass (store_service/records/entity_groups.py), read the entity's rows first
    (MATERIALIZED, by their entity's index), then each one's memory (LATERAL, by its key; LIMIT 1
    keeps the planner from flattening it into a join): a cost that grows with the entity's mentions
    whatever the planner's statistics say (on an empty workspace's, it joined every memory with every
    row: 1.5 s at 10,000 mentions)."""
    held = window.clause() if window.in_time else " AND m.retired_at IS NULL"
    params = {**caller_params(caller), **window.params(), "group": members, "per_key": CLAIMS_PER_KEY}
    newest = "ORDER BY m.valid_from DESC, m.created_at DESC, {ref}.memory_id, {ref}.ordinal"
    attributes, left = [], 0
    rows = (
        named(conn)
        .execute(
            f"""WITH a AS MATERIALIZED (SELECT * FROM entity_attribute WHERE subject_id = ANY(%(group)s))
                SELECT * FROM (
                  SELECT a.key, a.value, a.memory_id, m.valid_from, m.created_by, count(*) OVER () AS claims,
                         row_number() OVER (PARTITION BY a.key {newest.format(ref="a")}) AS nth
                    FROM a CROSS JOIN LATERAL (
                         SELECT m.valid_from, m.created_at, m.created_by FROM memory m
                          WHERE m.id = a.memory_id AND {READABLE}{held} LIMIT 1) m) x
                 WHERE x.nth <= %(per_key)s ORDER BY x.key, x.nth""",
            params,
        )
        .fetchall()
    )
    left += rows[0].claims - len(rows) if rows else 0
    for r in rows:
        attributes.append(
            m.EntityAttributeClaim(
                key=r.key,
                value=r.value,
                memory_id=str(r.memory_id),
                valid_from=_ts(r.valid_from),
                created_by=str(r.created_by),
            )
        )
    ends = []
    for near, far in (("subject_id", "object_id"), ("object_id", "subject_id")):
        claims = []
        rows = (
            named(conn)
            .execute(
                f"""WITH r AS MATERIALIZED (SELECT * FROM entity_relation WHERE {near} = ANY(%(group)s))
                    SELECT x.predicate, x.entity_id, e.name AS entity_name, x.memory_id, x.valid_from,
                           x.created_by, x.claims
                      FROM (SELECT r.predicate, r.{far} AS entity_id, r.memory_id, m.valid_from, m.created_by,
                                   count(*) OVER () AS claims,
                                   row_number() OVER (PARTITION BY r.predicate, r.{far} {newest.format(ref="r")}) AS nth
                              FROM r CROSS JOIN LATERAL (
                                   SELECT m.valid_from, m.created_at, m.created_by FROM memory m
                                    WHERE m.id = r.memory_id AND {READABLE}{held} LIMIT 1) m) x
                      JOIN entity e ON e.id = x.entity_id
                     WHERE x.nth = 1 ORDER BY x.predicate, e.name, x.entity_id""",
                params,
            )
            .fetchall()
        )
        left += rows[0].claims - len(rows) if rows else 0
        for r in rows:
            claims.append(
                m.EntityRelationClaim(
                    predicate=r.predicate,
                    entity_id=str(r.entity_id),
                    entity_name=r.entity_name,
                    memory_id=str(r.memory_id),
                    valid_from=_ts(r.valid_from),
                    created_by=str(r.created_by),
                )
            )
        ends.append(claims)
    return attributes, ends[0], ends[1], left


# Undone merges a page shows, newest first.
UNDONE_SHOWN = 20


def _undone(conn: psycopg.Connection, caller: m.Caller, members: list[uuid.UUID]) -> list[m.EntityMerge]:
    """The undone merges of the group's members whose two entities the caller can see."""
    rows = (
        named(conn)
        .execute(
            """SELECT * FROM entity_merge
                WHERE undone_at IS NOT NULL AND (entity_id = ANY(%(ids)s) OR into_id = ANY(%(ids)s))
                ORDER BY undone_at DESC, id LIMIT 200""",
            {"ids": members},
        )
        .fetchall()
    )
    seen = entities.visible_ids(conn, caller, {x for r in rows for x in (r.entity_id, r.into_id)})
    kept = [r for r in rows if r.entity_id in seen and r.into_id in seen][:UNDONE_SHOWN]
    return [entity_groups.merge_record(r) for r in kept]


def _ts(when) -> timestamp_pb2.Timestamp:
    out = timestamp_pb2.Timestamp()
    out.FromDatetime(when)
    return out


def get_entity(conn: psycopg.Connection, req: s.GetEntityRequest) -> s.GetEntityResponse:
    """The caller's page of ``req.entity`` (the RPC's comment lists the refusals)."""
    caller = req.caller
    window = windows.Window(as_of=windows.instant(req, "as_of"), known_at=windows.instant(req, "known_at"))
    size = page_tokens.page_size(req.page_size, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
    fingerprint = page_tokens.fingerprint(
        [
            "entity page",
            caller.member_id,
            sorted(caller_params(caller)["purposes"]),
            req.entity.strip(),  # what was asked: a merge that changes the representative keeps it good
            window.bound(),
        ]
    )
    after = page_tokens.decode_position(
        req.page_token, fingerprint, "entity page", page_tokens.instant, page_tokens.identifier
    )
    # The timeline's page is read in the pass that counts the group's memories (one read of them).
    view, others = _group(conn, caller, req.entity, entity_groups.Page(size + 1, after))
    members = [x.id for x in view.members]
    attributes, out, into, left = _claims(conn, caller, members, window)
    page = view.page
    token = (
        page_tokens.encode(fingerprint, [page[size - 1][1].isoformat(), str(page[size - 1][0])])
        if len(page) > size
        else ""
    )
    timeline = memories.get_memories(conn, caller, [str(mid) for mid, _ in page[:size]])
    return s.GetEntityResponse(
        entity=entity_groups.to_entity(view, s.Entity),
        other_entity_ids=others,
        attributes=attributes,
        relations_out=out,
        relations_in=into,
        timeline=timeline,
        next_page_token=token,
        timeline_size=view.mentions,
        claims_left_out=left,
        undone_merges=_undone(conn, caller, members),
    )
