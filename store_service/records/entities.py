"""Entities as mentions: a UUID and a name, never merged, no attributes, no edges.

An entity is visible to a caller only through a memory the caller can read that is about it, so an
entity id nobody readable mentions is indistinguishable from a missing one (NOT_FOUND).
"""

from __future__ import annotations

import uuid

import psycopg
from recallatron.memory.v1 import memory_pb2 as m

from servicekit.checks import check_mentions as check_mentions
from servicekit.errors import InvalidArgument, NotFound
from servicekit.limits import MAX_NAME_CHARS
from store_service.access.readability import READABLE, caller_params
from store_service.database import named

# Entities (``e``) about which the caller can read at least one memory.
VISIBLE = f"""EXISTS (SELECT 1 FROM memory_link l JOIN memory m ON m.id = l.memory_id
                 WHERE l.target_entity_id = e.id AND l.link_type = 'about' AND {READABLE})"""


def resolve_mentions(conn: psycopg.Connection, caller: m.Caller, mentions) -> list[uuid.UUID]:
    """Entity ids for mentions: existing ids the caller can see, new entities for names (never merged).

    NOT_FOUND (and nothing written) when an id is not one the caller can see.
    """
    check_visible(mentions, visible_ids(conn, caller, mentioned_ids(mentions)))
    return create_named(conn, [mentions])[0]


def mentioned_ids(mentions) -> set[uuid.UUID]:
    """The entity ids named by mentions already checked by ``check_mentions``."""
    return {uuid.UUID(mention.entity_id) for mention in mentions if mention.entity_id}


def visible_ids(conn: psycopg.Connection, caller: m.Caller, ids: set[uuid.UUID]) -> set[uuid.UUID]:
    """Of ``ids``, the entities the caller can read a memory about (one query; none when empty)."""
    if not ids:
        return set()
    rows = (
        named(conn)
        .execute(
            f"SELECT e.id FROM entity e WHERE e.id = ANY(%(ids)s) AND {VISIBLE}",
            {**caller_params(caller), "ids": list(ids)},
        )
        .fetchall()
    )
    return {r.id for r in rows}


def check_visible(mentions, visible: set[uuid.UUID]) -> None:
    """NOT_FOUND unless every entity id mentioned is in ``visible``."""
    if not mentioned_ids(mentions) <= visible:
        raise NotFound("entity not found", field="entities")


def create_named(conn: psycopg.Connection, mention_lists) -> list[list[uuid.UUID]]:
    """Entity ids of each list of checked, visible mentions, in order and without repeats: the ids
    given, and a new entity for each name (all inserted in one statement)."""
    out: list[list[uuid.UUID]] = []
    new_ids: list[uuid.UUID] = []
    new_names: list[str] = []
    for mentions in mention_lists:
        ids: list[uuid.UUID] = []
        for mention in mentions:
            if mention.entity_id:
                eid = uuid.UUID(mention.entity_id)
            else:
                eid = uuid.uuid4()
                new_ids.append(eid)
                new_names.append(mention.name.strip())
            if eid not in ids:
                ids.append(eid)
        out.append(ids)
    if new_ids:
        conn.execute("INSERT INTO entity (id, name) SELECT * FROM unnest(%s::uuid[], %s::text[])", (new_ids, new_names))
    return out


def find(conn: psycopg.Connection, caller: m.Caller, name: str) -> list:
    """Entities named ``name`` (case-insensitive) about which the caller can read a memory: named
    rows ``(id, name)``, oldest first."""
    name = name.strip()
    if not name or len(name) > MAX_NAME_CHARS or "\x00" in name:
        raise InvalidArgument(f"name must be 1..{MAX_NAME_CHARS} characters", field="name")
    return (
        named(conn)
        .execute(
            f"SELECT e.id, e.name FROM entity e WHERE lower(e.name) = lower(%(name)s) AND {VISIBLE} "
            "ORDER BY e.created_at, e.id",
            {**caller_params(caller), "name": name},
        )
        .fetchall()
    )


def parse_filter(entity_ids) -> list[uuid.UUID]:
    """Entity ids of a recall filter; INVALID_ARGUMENT for a malformed one or more than 100."""
    if len(entity_ids) > 100:
        raise InvalidArgument("at most 100 entity_ids", field="entity_ids")
    try:
        return [uuid.UUID(e) for e in entity_ids]
    except ValueError:
        raise InvalidArgument("entity_ids must be UUIDs", field="entity_ids") from None
