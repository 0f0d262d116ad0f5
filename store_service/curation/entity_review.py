"""Entity review: duplicate proposals, reviewed merges and their undo (docs/entities.md, "Merges and
aliases").

A merge of B into A makes B's mentions count as A's, and B's name an alias of A, for every reader who
can see both, until it is undone; the links are never rewritten, so an undo gives back exactly what
was there (store_service/records/entity_groups.py says how each reader sees a group). A merge is
refused only for what the caller can see: an entity they cannot see (NOT_FOUND), two entities that
are already one for them, or a merge they may not make; nothing they cannot see blocks it.

Who may merge B (and undo B's merges): a member who may change every memory about B they can read,
by the change rule of memories (a workspace memory: its creator or an admin; a member-only memory:
its member), so an admin for an entity workspace memories mention, and a member for one seen only
through their own memories; the member who merged may always undo their merge. The rule reads only
what the caller can read, so a refusal never tells of a memory they cannot. A memory about B that
the caller cannot read counts as A's too, for whoever can read it and see both.

Duplicate proposals pair the groups a caller sees whose names (representative or alias) are the
same once normalised, the same but for accents, or one gives initials where the other spells them
out. Nothing merges on a proposal.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import psycopg
from recallatron.memory.v1 import memory_pb2 as m
from recallatron.store.v1 import store_pb2 as s

from servicekit.checks import check_reason, parse_uuid
from servicekit.errors import FailedPrecondition, InvalidArgument, NotFound, PermissionDenied
from servicekit.text import accent_key, name_key
from store_service import page_tokens
from store_service.access import membership
from store_service.access.readability import READABLE, caller_params
from store_service.database import named
from store_service.records import entities, entity_groups

# The advisory lock key merges of a workspace take turns on (each workspace is its own database).
MERGE_LOCK = 0x656E7469  # "enti"
# Of the groups sharing one name form, the most mentioned this many are paired; at most this many
# proposals are listed, best first.
MOST_PER_FORM = 50
MAX_PROPOSALS = 2_000
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 200
# A proposal's score by its reason (the best reason of a pair counts).
SCORES = {
    m.ENTITY_DUPLICATE_REASON_SAME_NAME: 1.0,
    m.ENTITY_DUPLICATE_REASON_ACCENTS: 0.9,
    m.ENTITY_DUPLICATE_REASON_INITIALS: 0.6,
}


def _ids(req) -> uuid.UUID:
    return parse_uuid(req.entity_id, "entity_id")


def _seen(conn: psycopg.Connection, caller: m.Caller, ids: list[uuid.UUID], fields: list[str]) -> None:
    """NOT_FOUND naming the field of the first of ``ids`` the caller cannot see. (No row lock: merges
    take turns on ``MERGE_LOCK``, and a row lock would stand in the way of writes linking to them.)"""
    seen = entities.visible_ids(conn, caller, set(ids))
    for eid, name in zip(ids, fields, strict=True):
        if eid not in seen:
            raise NotFound("entity not found", field=name)


def _may_change_all(conn: psycopg.Connection, caller: m.Caller, entity_id: uuid.UUID) -> bool:
    """Whether the caller may change every memory about ``entity_id`` it can read (module docstring)."""
    row = conn.execute(
        f"""SELECT EXISTS (
              SELECT 1 FROM memory_link l JOIN memory m ON m.id = l.memory_id
               WHERE l.target_entity_id = %(entity)s AND l.link_type = 'about' AND {READABLE}
                 AND NOT (m.audience_member_id IS NOT NULL
                          OR m.created_by = %(member_id)s OR %(admin)s))""",
        {**caller_params(caller), "entity": entity_id, "admin": caller.role == m.ROLE_ADMIN},
    ).fetchone()
    return not row[0]


def merge(conn: psycopg.Connection, req: s.MergeEntityRequest) -> m.EntityMerge:
    """Merges ``req.entity_id`` into ``req.into_id`` (the RPC's comment lists the refusals)."""
    caller = req.caller
    merged, into = _ids(req), parse_uuid(req.into_id, "into_id")
    if merged == into:
        raise InvalidArgument("an entity cannot be merged into itself", field="into_id")
    check_reason(req.reason)
    membership.hold_caller(conn, caller)
    # Merges of one workspace take turns (they are rare): two that would join the same groups
    # through different entities cannot both see them apart and both succeed.
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (MERGE_LOCK,))
    _seen(conn, caller, [merged, into], ["entity_id", "into_id"])
    view = entity_groups.views(conn, caller, {merged}).get(merged)
    if view is not None and into in {x.id for x in view.members}:
        raise FailedPrecondition(
            "entity_id and into_id are already one entity for you (merged, directly or through others)"
        )
    if not _may_change_all(conn, caller, merged):
        raise PermissionDenied(
            "you may merge an entity only when you may change every memory about it you can read: "
            "an admin for workspace memories by others, a member for their own"
        )
    row = (
        named(conn)
        .execute(
            """INSERT INTO entity_merge (id, entity_id, into_id, merged_by, reason)
               VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING *""",
            (uuid.uuid4(), merged, into, uuid.UUID(caller.member_id), req.reason.strip()),
        )
        .fetchone()
    )
    if row is None:  # the same merge stands (one of its entities left the caller's sight meanwhile)
        raise FailedPrecondition("entity_id is already merged into into_id")
    return entity_groups.merge_record(row)


def unmerge(conn: psycopg.Connection, req: s.UnmergeEntityRequest) -> list[m.EntityMerge]:
    """Undoes every standing merge of ``req.entity_id`` into an entity the caller can see, oldest
    first (the RPC's comment lists the refusals)."""
    caller = req.caller
    merged = _ids(req)
    membership.hold_caller(conn, caller)
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (MERGE_LOCK,))
    _seen(conn, caller, [merged], ["entity_id"])
    standing = (
        named(conn)
        .execute(
            "SELECT * FROM entity_merge WHERE entity_id = %s AND undone_at IS NULL ORDER BY merged_at, id FOR UPDATE",
            (merged,),
        )
        .fetchall()
    )
    seen = entities.visible_ids(conn, caller, {r.into_id for r in standing})
    mine = [r for r in standing if r.into_id in seen]  # a merge into what the caller cannot see is not theirs
    if not mine:
        raise FailedPrecondition("entity_id is not merged into an entity you can see")
    if any(str(r.merged_by) != caller.member_id for r in mine) and not _may_change_all(conn, caller, merged):
        raise PermissionDenied(
            "only the member who merged it, or one who may change every memory about it you can read, may undo a merge"
        )
    rows = (
        named(conn)
        .execute(
            "UPDATE entity_merge SET undone_by = %s, undone_at = now() WHERE id = ANY(%s) RETURNING *",
            (uuid.UUID(caller.member_id), [r.id for r in mine]),
        )
        .fetchall()
    )
    return [entity_groups.merge_record(r) for r in sorted(rows, key=lambda r: (r.merged_at, r.id))]


@dataclass(frozen=True)
class _Signatures:
    """What a group's names are compared by: each name's key, accent-free key, and initials form
    (first letter of the first word, the rest of the words), with whether that first word is an
    initial."""

    keys: frozenset
    accentless: frozenset
    initials: frozenset  # (letter, rest, first word is an initial)


def _signatures(names: list[str]) -> _Signatures:
    keys, accentless, initials = set(), set(), set()
    for name in names:
        keys.add(name_key(name))
        folded = accent_key(name)
        accentless.add(folded)
        words = folded.replace(".", ". ").split()
        if len(words) >= 2 and words[0][0].isalpha():
            initials.add((words[0][0], " ".join(words[1:]), len(words[0].rstrip(".")) == 1))
    return _Signatures(frozenset(keys), frozenset(accentless), frozenset(initials))


def _reason(a: _Signatures, b: _Signatures) -> int:
    """The best reason two groups' names give to propose them as one, or 0."""
    if a.keys & b.keys:
        return m.ENTITY_DUPLICATE_REASON_SAME_NAME
    if (a.accentless & b.accentless) - {""}:
        return m.ENTITY_DUPLICATE_REASON_ACCENTS
    for letter, rest, initial in a.initials:
        for other_letter, other_rest, other_initial in b.initials:
            if letter == other_letter and rest == other_rest and (initial or other_initial):
                return m.ENTITY_DUPLICATE_REASON_INITIALS
    return 0


def proposals(
    conn: psycopg.Connection, caller: m.Caller
) -> list[tuple[float, entity_groups.GroupView, entity_groups.GroupView, int]]:
    """Every proposal of the caller's, best first: (score, a, b, reason), ``a`` the group with more
    readable mentions (then the older representative)."""
    seeds = {r[0] for r in conn.execute(f"SELECT e.id FROM entity e WHERE {entities.VISIBLE}", caller_params(caller))}
    views = list({id(v): v for v in entity_groups.views(conn, caller, seeds).values()}.values())
    signatures = {id(v): _signatures([x.name for x in v.members]) for v in views}
    # Candidate pairs share a signature; only they are compared (no all-pairs pass).
    buckets: dict[tuple, list[entity_groups.GroupView]] = {}
    for v in views:
        sig = signatures[id(v)]
        parts = {
            *(("k", k) for k in sig.keys),
            *(("a", k) for k in sig.accentless if k),
            *(("i", letter, rest) for letter, rest, _ in sig.initials),
        }
        for part in parts:  # a group in a bucket once, however many of its names share the form
            buckets.setdefault(part, []).append(v)
    found: dict[tuple, tuple] = {}
    for bucket in buckets.values():
        # A name form shared by many groups (a thousand accent variants of one name) proposes pairs of
        # its most mentioned only: the list stays bounded, and so does the work of every page.
        bucket = sorted(bucket, key=entity_groups.GroupView.sort_key)[:MOST_PER_FORM]
        for i, x in enumerate(bucket):
            for y in bucket[i + 1 :]:
                if x is y:
                    continue
                a, b = sorted((x, y), key=entity_groups.GroupView.sort_key)
                pair = (a.representative.id, b.representative.id)
                if pair in found:
                    continue
                reason = _reason(signatures[id(a)], signatures[id(b)])
                if reason:
                    found[pair] = (SCORES[reason], a, b, reason)
    return sorted(
        found.values(),
        key=lambda p: (
            -p[0],
            -(p[1].mentions + p[2].mentions),
            str(p[1].representative.id),
            str(p[2].representative.id),
        ),
    )[:MAX_PROPOSALS]


def list_duplicates(conn: psycopg.Connection, req: s.ListEntityDuplicatesRequest) -> s.ListEntityDuplicatesResponse:
    """One page of the caller's entity duplicate proposals (``proposals``), with ``total_size``.
    INVALID_ARGUMENT for a negative page size or a page token not issued for this member's list."""
    caller = req.caller
    size = page_tokens.page_size(req.page_size, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
    fingerprint = page_tokens.fingerprint(
        ["entity duplicates", caller.member_id, sorted(caller_params(caller)["purposes"])]
    )
    after = page_tokens.decode_position(req.page_token, fingerprint, "entity duplicate list", page_tokens.sequence)
    found = proposals(conn, caller)
    start = 0 if after is None else max(0, min(after[0], len(found)))
    page = found[start : start + size]
    token = page_tokens.encode(fingerprint, [start + size]) if start + size < len(found) else ""
    return s.ListEntityDuplicatesResponse(
        proposals=[
            s.EntityDuplicate(
                entity_a=entity_groups.to_entity(a, s.Entity),
                entity_b=entity_groups.to_entity(b, s.Entity),
                reason=reason,
                score=score,
            )
            for score, a, b, reason in page
        ],
        next_page_token=token,
        total_size=len(found),
    )
