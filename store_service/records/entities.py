"""Entities as mentions: a UUID and a name, grouped by reviewed merges (docs/entities.md).

An entity is visible to a caller only through a memory the caller can read that is about it, so an
entity id nobody readable mentions is indistinguishable from a missing one (NOT_FOUND).

A name given at a write is resolved among the entities the writer can see, by its key
(``name_key``): the one of that key, a new one when there is none, and when there are several the
one with the most mentions the writer can read (then the oldest), the others reported. An entity
only others can see is never found, so resolution reveals nothing: the writer then makes its own,
which a person may merge later. Two writers naming a new entity at the same instant may each make
one; nothing locks names, and the duplicate is listed for review like any other.

Merges group entities; how each reader sees a group is store_service/records/entity_groups.py.
"""

from __future__ import annotations

import json
import uuid

import psycopg
from google.protobuf import json_format
from recallatron.memory.v1 import memory_pb2 as m

from servicekit.checks import check_mentions as check_mentions
from servicekit.errors import InvalidArgument, NotFound
from servicekit.limits import MAX_NAME_CHARS
from servicekit.text import is_blank, name_key
from store_service.access.readability import caller_params
from store_service.database import named
from store_service.records import entity_groups

# Entities (``e``) about which the caller can read at least one memory.
VISIBLE = entity_groups.visible("e")


def resolve_mentions(
    conn: psycopg.Connection, caller: m.Caller, mentions, shared: bool
) -> tuple[list[uuid.UUID], list[m.EntityResolution]]:
    """Entity ids for the mentions of a memory (``shared``: of the workspace audience), and how each
    name was resolved (``create_named``).

    NOT_FOUND (and nothing written) when an id is not one the caller can see.
    """
    check_visible(mentions, visible_ids(conn, caller, mentioned_ids(mentions)))
    return create_named(conn, caller, [mentions], [shared])[0]


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


def create_named(
    conn: psycopg.Connection, caller: m.Caller | None, mention_lists, shared: list[bool] | None = None
) -> list[tuple[list[uuid.UUID], list[m.EntityResolution]]]:
    """For each list of checked, visible mentions (of a memory whose audience is the workspace when
    ``shared[i]``): its entity ids, in order and without repeats, and how each name was resolved.
    An id given is used as it is; a name is resolved among the entities ``caller`` can see (module
    docstring), and a name none of them has gets one new entity, shared by every list of the call.
    With ``caller`` None (an import, which brings its own entities) every name gets a new entity."""
    shared = shared if shared is not None else [False] * len(mention_lists)
    keys = {name_key(x.name) for mentions in mention_lists for x in mentions if not x.entity_id}
    # key -> the groups of that name, each by its member of that name: best first for a member-only
    # memory (readable mentions), and for a workspace one (readable workspace mentions first).
    seen: dict[str, dict[bool, list[uuid.UUID]]] = {}
    if keys and caller is not None:
        for key, groups in entity_groups.named_groups(conn, caller, keys).items():
            seen[key] = {
                wide: [_of_name(view, key).id for view in sorted(groups, key=lambda v, w=wide: _rank(v, w))]
                for wide in (False, True)
            }
    new: list[tuple[uuid.UUID, str, str]] = []  # (id, name, key) of each entity this call creates
    created: dict[str, uuid.UUID] = {}  # key -> the entity this call created for it (a writer's call)
    out: list[tuple[list[uuid.UUID], list[m.EntityResolution]]] = []
    for mentions, wide in zip(mention_lists, shared, strict=True):
        ids: list[uuid.UUID] = []
        resolved: list[m.EntityResolution] = []
        for mention in mentions:
            if mention.entity_id:
                eid = uuid.UUID(mention.entity_id)
            else:
                name = mention.name.strip()
                key = name_key(name)
                found = seen[key][wide] if key in seen else None
                if found:
                    eid, others = found[0], found[1:]
                    outcome = m.ENTITY_RESOLUTION_OUTCOME_CHOSEN if others else m.ENTITY_RESOLUTION_OUTCOME_LINKED
                elif key in created:
                    eid, others, outcome = created[key], [], m.ENTITY_RESOLUTION_OUTCOME_LINKED
                else:
                    eid, others, outcome = uuid.uuid4(), [], m.ENTITY_RESOLUTION_OUTCOME_CREATED
                    new.append((eid, name, key))
                    if caller is not None:
                        created[key] = eid
                resolved.append(
                    m.EntityResolution(
                        name=name, entity_id=str(eid), outcome=outcome, other_entity_ids=[str(o) for o in others]
                    )
                )
            if eid not in ids:
                ids.append(eid)
        out.append((ids, resolved))
    if new:
        conn.execute(
            "INSERT INTO entity (id, name, name_key) SELECT * FROM unnest(%s::uuid[], %s::text[], %s::text[])",
            [list(col) for col in zip(*new, strict=True)],
        )
    return out


def _of_name(view: entity_groups.GroupView, key: str) -> entity_groups.Member:
    """The group's member of that name a write links to: the name given is always the name of the
    entity it names, so a write never shows another member's name (a private alias) to its readers."""
    named = [x for x in view.members if name_key(x.name) == key]
    return min(named, key=lambda x: (-x.mentions, x.created_at, x.id))


def _rank(view: entity_groups.GroupView, shared: bool) -> tuple:
    """A group's place among a name's groups for a write: the most readable mentions first (for a
    workspace memory, the most in workspace memories first, so a private entity is not chosen over
    one the workspace sees), then the oldest."""
    return ((-view.shared,) if shared else ()) + view.sort_key()


def find(conn: psycopg.Connection, caller: m.Caller, name: str) -> list[entity_groups.GroupView]:
    """The groups with a member of that name or alias (by ``name_key``) the caller can see, as the
    caller sees them, most mentioned first. INVALID_ARGUMENT for a blank, over-long or NUL name."""
    name = name.strip()
    if is_blank(name) or len(name) > MAX_NAME_CHARS or "\x00" in name:
        raise InvalidArgument(f"name must be 1..{MAX_NAME_CHARS} characters, not blank", field="name")
    return entity_groups.named_groups(conn, caller, {name_key(name)}).get(name_key(name), [])


def keep_resolutions(conn: psycopg.Connection, written: list[tuple[uuid.UUID, list[m.EntityResolution]]]) -> None:
    """Stores how each memory of ``written`` (written under a request id) had its names resolved, so
    a retry answers with it (``replay_resolutions``); one statement, nothing for none."""
    rows = [(mid, json.dumps([json_format.MessageToDict(r) for r in res])) for mid, res in written if res]
    if rows:
        conn.execute(
            """UPDATE memory m SET entity_resolutions = u.r
                 FROM unnest(%s::uuid[], %s::jsonb[]) AS u(i, r) WHERE m.id = u.i""",
            ([i for i, _ in rows], [r for _, r in rows]),
        )


def replay_resolutions(
    conn: psycopg.Connection, caller: m.Caller, memories: dict[uuid.UUID, m.Memory], stored: dict[uuid.UUID, list]
) -> None:
    """Fills the ``entity_resolutions`` of first results answered again from what ``keep_resolutions``
    stored (``stored``: memory id -> its column), as the caller may see them now: an other entity no
    longer visible is left out, as links are."""
    parsed = {mid: [json_format.ParseDict(r, m.EntityResolution()) for r in res] for mid, res in stored.items()}
    others = {uuid.UUID(o) for res in parsed.values() for r in res for o in r.other_entity_ids}
    visible = {str(i) for i in visible_ids(conn, caller, others)}
    for mid, res in parsed.items():
        for r in res:
            kept = [o for o in r.other_entity_ids if o in visible]
            del r.other_entity_ids[:]
            r.other_entity_ids.extend(kept)
        memories[mid].entity_resolutions.extend(res)


def parse_filter(entity_ids) -> list[uuid.UUID]:
    """Entity ids of a recall filter; INVALID_ARGUMENT for a malformed one or more than 100."""
    if len(entity_ids) > 100:
        raise InvalidArgument("at most 100 entity_ids", field="entity_ids")
    try:
        return [uuid.UUID(e) for e in entity_ids]
    except ValueError:
        raise InvalidArgument("entity_ids must be UUIDs", field="entity_ids") from None
