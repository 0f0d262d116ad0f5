"""Entities as mentions: a UUID and a name, grouped by reviewed merges (docs/entities.md).

An entity is visible to a caller only through a memory the caller can read that is about it, so an
entity id nobody readable mentions is indistinguishable from a missing one (NOT_FOUND).

A name given at a write is resolved among the entities the writer can see, by its key
(``name_key``): the one of that key, a new one when there is none, and when there are several the
one with the most mentions the writer can read (then the oldest), the others reported. An entity
only others can see is never found, so resolution reveals nothing: the writer then makes its own,
which a person may merge later. Two writers naming a new entity at the same instant may each make
one; nothing locks names, and the duplicate is listed for review like any other.

Merges (``entity_merges``) are a layer over the links, never a rewrite of them: an entity merged
into another points at it (``merged_into``), and its **group** is that root and every entity pointing
at it. A caller sees a group through its **visible members** only (each seen as above), and as one
entity, its **representative**: the root when the caller can see it, otherwise the visible member
with the most readable mentions (then the oldest). So a name, alias, count or merge record of an
entity the caller cannot see is never shown, before or after a merge: the caller's view of a group
is built from its own readable mentions. Filters by entity expand to the whole group, which reveals
nothing either, as only readable memories come back and a readable memory about a member makes
that member visible.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field

import psycopg
from google.protobuf import json_format
from recallatron.memory.v1 import memory_pb2 as m

from servicekit.checks import check_mentions as check_mentions
from servicekit.errors import InvalidArgument, NotFound
from servicekit.limits import MAX_NAME_CHARS
from servicekit.text import name_key
from store_service.access.readability import READABLE, caller_params
from store_service.database import named

# Entities (``e``) about which the caller can read at least one memory.
VISIBLE = f"""EXISTS (SELECT 1 FROM memory_link l JOIN memory m ON m.id = l.memory_id
                 WHERE l.target_entity_id = e.id AND l.link_type = 'about' AND {READABLE})"""


def resolve_mentions(
    conn: psycopg.Connection, caller: m.Caller, mentions
) -> tuple[list[uuid.UUID], list[m.EntityResolution]]:
    """Entity ids for mentions, and how each name was resolved (``create_named``).

    NOT_FOUND (and nothing written) when an id is not one the caller can see.
    """
    check_visible(mentions, visible_ids(conn, caller, mentioned_ids(mentions)))
    return create_named(conn, caller, [mentions])[0]


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
    conn: psycopg.Connection, caller: m.Caller | None, mention_lists
) -> list[tuple[list[uuid.UUID], list[m.EntityResolution]]]:
    """For each list of checked, visible mentions: its entity ids, in order and without repeats, and
    how each name was resolved. An id given is used as it is; a name is resolved among the entities
    ``caller`` can see (module docstring), and a name none of them has gets one new entity, shared
    by every list of the call. A name found is the representative of its group (an alias names the
    entity it was merged into, when the writer can see it). With ``caller`` None (an import, which
    brings its own entities) every name gets a new entity."""
    keys = {name_key(x.name) for mentions in mention_lists for x in mentions if not x.entity_id}
    seen: dict[str, list[uuid.UUID]] = {}  # key -> the representatives of the groups named so, best first
    if keys and caller is not None:
        for key, groups in named_groups(conn, caller, keys).items():
            seen[key] = [view.representative.id for view in groups]
    new: list[tuple[uuid.UUID, str, str]] = []  # (id, name, key) of each entity this call creates
    created: dict[str, uuid.UUID] = {}  # key -> the entity this call created for it (a writer's call)
    out: list[tuple[list[uuid.UUID], list[m.EntityResolution]]] = []
    for mentions in mention_lists:
        ids: list[uuid.UUID] = []
        resolved: list[m.EntityResolution] = []
        for mention in mentions:
            if mention.entity_id:
                eid = uuid.UUID(mention.entity_id)
            else:
                name = mention.name.strip()
                key = name_key(name)
                found = seen.get(key) if caller is not None else None
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


def find(conn: psycopg.Connection, caller: m.Caller, name: str) -> list[GroupView]:
    """The groups with a visible member of that name or alias (by ``name_key``), as the caller sees
    them, most mentioned first."""
    name = name.strip()
    if not name or len(name) > MAX_NAME_CHARS or "\x00" in name:
        raise InvalidArgument(f"name must be 1..{MAX_NAME_CHARS} characters", field="name")
    return named_groups(conn, caller, {name_key(name)}).get(name_key(name), [])


@dataclass
class Member:
    """One visible member of a group: an entity and the caller's readable mentions of it."""

    id: uuid.UUID
    name: str
    created_at: object
    mentions: int


@dataclass
class GroupView:
    """A group of entities (a root and those merged into it) as one caller sees it: its visible
    members, its representative (module docstring) and the memories about any member the caller can
    read (each counted once)."""

    root: uuid.UUID
    members: list[Member]
    mentions: int = 0
    merges: list[m.EntityMerge] = field(default_factory=list)

    @property
    def representative(self) -> Member:
        for member in self.members:
            if member.id == self.root:
                return member
        return min(self.members, key=lambda x: (-x.mentions, x.created_at, x.id))

    @property
    def aliases(self) -> list[str]:
        """The other visible members' names, one per name key, none of the representative's key."""
        shown = {name_key(self.representative.name)}
        out: dict[str, str] = {}
        for member in sorted(self.members, key=lambda x: (x.created_at, x.id)):
            key = name_key(member.name)
            if key not in shown:
                out.setdefault(key, member.name)
        return sorted(out.values())

    def sort_key(self) -> tuple:
        rep = self.representative
        return (-self.mentions, rep.created_at, rep.id)


def group_views(conn: psycopg.Connection, caller: m.Caller, roots: set[uuid.UUID]) -> dict[uuid.UUID, GroupView]:
    """The caller's view of each group of ``roots`` of which it can see a member (two queries: members
    with their counts, and the standing merges among visible members)."""
    if not roots:
        return {}
    params = {**caller_params(caller), "roots": list(roots)}
    views: dict[uuid.UUID, GroupView] = {}
    # One statement, so members and counts are of one snapshot even while merges change.
    for r in named(conn).execute(
        f"""WITH x AS (
              SELECT coalesce(e.merged_into, e.id) AS root, e.id, e.name, e.created_at, m.id AS memory_id
                FROM entity e JOIN memory_link l ON l.target_entity_id = e.id AND l.link_type = 'about'
                JOIN memory m ON m.id = l.memory_id
               WHERE (e.id = ANY(%(roots)s) OR e.merged_into = ANY(%(roots)s)) AND {READABLE}),
            total AS (SELECT root, count(DISTINCT memory_id) AS n FROM x GROUP BY root)
            SELECT x.root, x.id, x.name, x.created_at, count(*) AS n, total.n AS total
              FROM x JOIN total USING (root)
             GROUP BY x.root, x.id, x.name, x.created_at, total.n""",
        params,
    ):
        view = views.setdefault(r.root, GroupView(r.root, [], r.total))
        view.members.append(Member(r.id, r.name, r.created_at, r.n))
    if not views:
        return {}
    shown = {x.id for view in views.values() for x in view.members}
    for r in named(conn).execute(
        "SELECT * FROM entity_merge WHERE into_id = ANY(%s) AND undone_at IS NULL ORDER BY merged_at, id",
        (list(views),),
    ):
        if r.into_id in views and r.into_id in shown and r.entity_id in shown:  # both visible
            views[r.into_id].merges.append(merge_record(r))
    return views


def named_groups(conn: psycopg.Connection, caller: m.Caller, keys: set[str]) -> dict[str, list[GroupView]]:
    """For each name key, the caller's views of the groups with a visible member of that key, most
    mentioned first (then the representative's age and id)."""
    hits = (
        named(conn)
        .execute(
            f"""SELECT e.name_key, e.id FROM entity e WHERE e.name_key = ANY(%(keys)s) AND {VISIBLE}""",
            {**caller_params(caller), "keys": sorted(keys)},
        )
        .fetchall()
    )
    views: dict[uuid.UUID, GroupView] = {}
    member_of: dict[uuid.UUID, GroupView] = {}
    # A merge committed between two statements moves an entity to another group: read the groups of
    # the entities not yet placed again, so a name found is never dropped (a second pass suffices
    # unless merges keep racing; an entity still unplaced then is left out, as if unseen).
    for _ in range(3):
        missing = [r.id for r in hits if r.id not in member_of]
        if not missing:
            break
        roots = {
            r[0] for r in conn.execute("SELECT coalesce(merged_into, id) FROM entity WHERE id = ANY(%s)", (missing,))
        }
        views.update(group_views(conn, caller, roots - set(views)))
        member_of = {x.id: view for view in views.values() for x in view.members}
    out: dict[str, list[GroupView]] = {}
    for r in hits:
        view = member_of.get(r.id)
        if view is not None and view not in out.get(r.name_key, []):
            out.setdefault(r.name_key, []).append(view)
    for groups in out.values():
        groups.sort(key=GroupView.sort_key)
    return out


def merge_record(row) -> m.EntityMerge:
    """An ``entity_merge`` row (selected ``*``) as its message."""
    out = m.EntityMerge(
        entity_id=str(row.entity_id), into_id=str(row.into_id), merged_by=str(row.merged_by), reason=row.reason
    )
    out.merged_at.FromDatetime(row.merged_at)
    if row.undone_at is not None:
        out.undone_by = str(row.undone_by)
        out.undone_at.FromDatetime(row.undone_at)
    return out


def to_entity(view: GroupView, message):
    """A view as the store's ``Entity`` (``message``: its class)."""
    rep = view.representative
    return message(id=str(rep.id), name=rep.name, aliases=view.aliases, mentions=view.mentions, merges=view.merges)


def representatives(conn: psycopg.Connection, caller: m.Caller, ids: set[uuid.UUID]) -> dict[uuid.UUID, Member]:
    """For entities the caller can see, the representative of each one's group as the caller sees it."""
    if not ids:
        return {}
    roots = dict(conn.execute("SELECT id, coalesce(merged_into, id) FROM entity WHERE id = ANY(%s)", (list(ids),)))
    views = group_views(conn, caller, set(roots.values()))
    return {i: views[root].representative for i, root in roots.items() if root in views}


def group_of(ids: str) -> str:
    """A query of the entities of the groups of ``ids`` (an SQL array expression), one column ``id``:
    what a filter by entity reads (module docstring)."""
    return f"""SELECT g.id FROM entity x JOIN entity g
                 ON g.id = coalesce(x.merged_into, x.id) OR g.merged_into = coalesce(x.merged_into, x.id)
              WHERE x.id = ANY({ids})"""


def group_members(conn: psycopg.Connection, ids: list[uuid.UUID]) -> list[uuid.UUID]:
    """``ids`` and every entity of their groups (``group_of``); one query, none for none."""
    if not ids:
        return []
    rows = conn.execute(f"{group_of('%(ids)s')} UNION SELECT unnest(%(ids)s::uuid[])", {"ids": list(ids)}).fetchall()
    return [r[0] for r in rows]


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
