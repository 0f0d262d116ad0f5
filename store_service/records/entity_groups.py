"""Entity groups: what reviewed merges make of entities, as each reader sees them (docs/entities.md,
"Merges and aliases").

An entity is visible to a reader through a memory the reader can read that is about it
(store_service/records/entities.py). A standing merge (``entity_merge``: B merged into A) joins B
and A for a reader who can see both; a reader who cannot see one of them does not see the merge at
all. A reader's **group** of an entity is its connected component over the standing merges the
reader sees, and the reader sees it as one entity, its **representative**: of the members merged
into no member (most groups have one such), the one with the most mentions the reader can read,
then the oldest; its **aliases** are the other members' names, and its **merge records** the merges
the reader sees. So every name, alias, count and record a reader is shown comes from memories the
reader can read, before and after any merge or undo; and a merge of an entity a reader cannot see
neither changes nor blocks anything of theirs.

Groups are computed per read: one recursive statement walks the merges the reader sees from the
seeds, the merges among what it reached are read and the components formed here, then one pass over
the readable mentions counts each member and each group.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import psycopg
from recallatron.memory.v1 import memory_pb2 as m

from servicekit.text import name_key
from store_service.access.readability import READABLE, caller_params
from store_service.database import named


def visible(alias: str) -> str:
    """SQL: the reader (the readability parameters) can read a memory about entity ``alias``."""
    return f"""EXISTS (SELECT 1 FROM memory_link l JOIN memory m ON m.id = l.memory_id
                 WHERE l.target_entity_id = {alias}.id AND l.link_type = 'about' AND {READABLE})"""


def component(seeds: str) -> str:
    """A query of the entities the reader sees joined to ``seeds`` (an SQL uuid[] expression) by the
    standing merges the reader sees, seeds included (those the reader cannot see left out), one
    column ``id``; the readability parameters."""
    return f"""WITH RECURSIVE c(id) AS (
                 SELECT x.id FROM entity x WHERE x.id = ANY({seeds}) AND {visible("x")}
                 UNION
                 SELECT y.id FROM c
                   JOIN entity_merge g ON g.undone_at IS NULL AND (g.entity_id = c.id OR g.into_id = c.id)
                   JOIN entity y ON y.id = CASE WHEN g.entity_id = c.id THEN g.into_id ELSE g.entity_id END
                  WHERE {visible("y")})
               SELECT id FROM c"""


def members_of(conn: psycopg.Connection, caller: m.Caller, ids: list[uuid.UUID]) -> list[uuid.UUID]:
    """What a filter by ``ids`` reads: ``ids`` and every entity of their groups (``component``); one
    query, none for none. An id the reader cannot see stays as it is and joins nothing (it has no
    memory the reader can read)."""
    if not ids:
        return []
    rows = conn.execute(component("%(ids)s::uuid[]"), {**caller_params(caller), "ids": list(ids)}).fetchall()
    return list(dict.fromkeys([*ids, *(r[0] for r in rows)]))


@dataclass
class Member:
    """One member of a group the reader sees: an entity and the reader's readable mentions of it."""

    id: uuid.UUID
    name: str
    created_at: object
    mentions: int
    shared: int = 0  # of them, in workspace memories


@dataclass(eq=False)
class GroupView:
    """A group as one reader sees it: its members, the merges among them, and the memories about any
    member the reader can read, each counted once."""

    members: list[Member]
    merges: list = field(default_factory=list)  # entity_merge rows among the members, oldest first
    mentions: int = 0
    shared: int = 0  # of them, workspace memories
    page: list = field(default_factory=list)  # with ``views``' page: (memory id, said_at), latest first

    @property
    def representative(self) -> Member:
        merged = {r.entity_id for r in self.merges}
        roots = [x for x in self.members if x.id not in merged] or self.members
        return min(roots, key=lambda x: (-x.mentions, x.created_at, x.id))

    @property
    def aliases(self) -> list[str]:
        """The other members' names, one per name key, none of the representative's key."""
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


@dataclass(frozen=True)
class Page:
    """A page of a group's memories, the latest said first: at most ``limit`` after ``after`` (the
    last one's (said_at, id); None from the start)."""

    limit: int
    after: tuple | None = None


def views(
    conn: psycopg.Connection, caller: m.Caller, seeds: set[uuid.UUID], page: Page | None = None
) -> dict[uuid.UUID, GroupView]:
    """The reader's view of the group of each seed the reader can see (seeds of one group share one
    view); three queries, none for no seeds. With ``page``, each view's ``page`` holds that page of its
    group's memories, read in the same pass: (memory id, said_at) rows, the latest said first."""
    if not seeds:
        return {}
    params = caller_params(caller)
    ids = [r[0] for r in conn.execute(component("%(ids)s::uuid[]"), {**params, "ids": list(seeds)})]
    if not ids:
        return {}
    merges = (
        named(conn)
        .execute(
            """SELECT * FROM entity_merge
                WHERE undone_at IS NULL AND entity_id = ANY(%(ids)s) AND into_id = ANY(%(ids)s)
                ORDER BY merged_at, id""",
            {"ids": ids},
        )
        .fetchall()
    )
    # Components over the merges among them (a merge committed since the walk may join or part a
    # little more or less: each view is still built only from what the reader can read).
    parent = {i: i for i in ids}

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for r in merges:
        parent[find(r.entity_id)] = find(r.into_id)
    roots = list(dict.fromkeys(find(i) for i in ids))
    label = {root: n for n, root in enumerate(roots)}
    groups = [GroupView([]) for _ in roots]
    # One pass over the readable mentions: each member's count, each group's memories once, and
    # with ``page`` the latest said of them.
    timeline = ""
    if page is not None:
        after = "WHERE (said_at, memory_id) < (%(at)s, %(after)s)" if page.after else ""
        timeline = f"""
            UNION ALL
            SELECT 't', label, memory_id, NULL, said_at, NULL, NULL FROM (
              SELECT label, memory_id, said_at,
                     row_number() OVER (PARTITION BY label ORDER BY said_at DESC, memory_id DESC) AS nth
                FROM (SELECT DISTINCT label, memory_id, said_at FROM pair {after}) x) y
             WHERE nth <= %(limit)s"""
    for r in named(conn).execute(
        f"""WITH pair AS MATERIALIZED (
              SELECT u.id, u.label, l.memory_id, m.shared, m.said_at
                FROM unnest(%(ids)s::uuid[], %(labels)s::int[]) AS u(id, label)
                JOIN memory_link l ON l.target_entity_id = u.id AND l.link_type = 'about'
                CROSS JOIN LATERAL (  -- each link's memory by its key, whatever the statistics say
                     SELECT m.audience_member_id IS NULL AS shared, m.said_at FROM memory m
                      WHERE m.id = l.memory_id AND {READABLE} LIMIT 1) m),
            per AS (SELECT label, id, count(*) AS n, count(*) FILTER (WHERE shared) AS s FROM pair GROUP BY label, id)
            SELECT 'm' AS kind, per.label, per.id, e.name, e.created_at, per.n, per.s
              FROM per JOIN entity e ON e.id = per.id
            UNION ALL
            SELECT 'g', label, NULL, NULL, NULL, count(DISTINCT memory_id),
                   count(DISTINCT memory_id) FILTER (WHERE shared)
              FROM pair GROUP BY label{timeline}""",
        {
            **params,
            "ids": ids,
            "labels": [label[find(i)] for i in ids],
            "limit": page.limit if page else None,
            "at": page.after[0] if page and page.after else None,
            "after": page.after[1] if page and page.after else None,
        },
    ):
        if r.kind == "g":
            groups[r.label].mentions, groups[r.label].shared = r.n, r.s
        elif r.kind == "m":
            groups[r.label].members.append(Member(r.id, r.name, r.created_at, r.n, r.s))
        else:
            groups[r.label].page.append((r.id, r.created_at))
    placed = {x.id for view in groups for x in view.members}
    for r in merges:
        if r.entity_id in placed and r.into_id in placed:
            groups[label[find(r.entity_id)]].merges.append(r)
    return {seed: groups[label[find(seed)]] for seed in seeds if seed in placed}


def named_groups(
    conn: psycopg.Connection, caller: m.Caller, keys: set[str], page: Page | None = None
) -> dict[str, list[GroupView]]:
    """For each name key, the reader's views of the groups with a member of that key the reader can
    see, most mentioned first (then the representative's age and id); ``page`` as ``views``'."""
    hits = (
        named(conn)
        .execute(
            f"SELECT e.name_key, e.id FROM entity e WHERE e.name_key = ANY(%(keys)s) AND {visible('e')}",
            {**caller_params(caller), "keys": sorted(keys)},
        )
        .fetchall()
    )
    seen = views(conn, caller, {r.id for r in hits}, page)
    out: dict[str, list[GroupView]] = {}
    for r in hits:
        view = seen.get(r.id)
        if view is not None and all(view is not other for other in out.get(r.name_key, [])):
            out.setdefault(r.name_key, []).append(view)
    for groups in out.values():
        groups.sort(key=GroupView.sort_key)
    return out


def representatives(conn: psycopg.Connection, caller: m.Caller, ids: set[uuid.UUID]) -> dict[uuid.UUID, Member]:
    """For entities the reader can see, the representative of each one's group (an entity the
    reader no longer sees is left out)."""
    return {i: view.representative for i, view in views(conn, caller, ids).items()}


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
    """A view as an ``Entity`` (``message``: the store's class)."""
    rep = view.representative
    return message(
        id=str(rep.id),
        name=rep.name,
        aliases=view.aliases,
        mentions=view.mentions,
        merges=[merge_record(r) for r in view.merges],
    )
