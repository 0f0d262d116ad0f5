"""The changing operations: derive, correct, supersede, invalidate, forget, keep (README.md, "Using
it" and "Who sees what"; docs/time.md, "Validity"), and forgetting a removed member's memories.

Each locks the rows it reads before judging them (``FOR NO KEY UPDATE``, which still lets the
embedding job's foreign-key checks through, so the two cannot deadlock), so concurrent calls serialise: one of twenty
racing corrections wins and the rest get ABORTED with the current revision; one of several racing
supersedes leaves the successor and the rest get FAILED_PRECONDITION.

Who may change a memory: a member-only memory, its member; a workspace memory, its creator or an
admin. Readable but not changeable is PERMISSION_DENIED; not readable is NOT_FOUND.

Each transaction starts with ``membership.hold_caller``, before any row lock: a call authenticated
before its member's removal either commits before the removal sweeps or fails UNAUTHENTICATED.
"""

from __future__ import annotations

import datetime
import uuid

import psycopg
from recallatron.memory.v1 import memory_pb2 as m
from recallatron.store.v1 import store_pb2 as s

from servicekit.checks import check_reason, check_request_id
from servicekit.errors import (
    Aborted,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
)
from servicekit.limits import MAX_SOURCES
from servicekit.text import is_blank
from store_service.access import membership
from store_service.access.provenance import ANCESTORS, DOWN
from store_service.access.readability import IN_SCOPE, caller_params
from store_service.database import named
from store_service.intake import capture
from store_service.records import entities, idempotency, known, prompt_sessions, statements, validity
from store_service.records.lifecycle_rules import (
    drop_vectors,
    leave,
    lock_predecessors,
    queue_embedding,
    restore_predecessors,
    retire,
    sources_of,
    stem_fault,
)
from store_service.records.memories import (
    COLUMNS,
    NewMemory,
    attach_links,
    by_request_id,
    insert,
    readable_ids,
    redact_successors,
    stated_rows,
    to_memory,
)
from store_service.search import lexical_index
from store_service.vocabulary import (
    KINDS,
    check_confidence,
    check_text,
    enum_value,
    parse_uuid,
)


def lock_readable(conn: psycopg.Connection, caller: m.Caller, memory_id: str, *, for_change: bool):
    """Locks a memory (``FOR NO KEY UPDATE``) and returns its row; NOT_FOUND unless readable (chain
    included), and with ``for_change`` PERMISSION_DENIED unless the caller may change it. The one
    lock-and-judge step of every change (here and in store_service/curation/review.py)."""
    mid = parse_uuid(memory_id, "memory_id", missing_is_not_found=True)
    row = named(conn).execute(f"SELECT {COLUMNS} FROM memory m WHERE m.id = %s FOR NO KEY UPDATE", (mid,)).fetchone()
    if row is None or mid not in readable_ids(conn, caller, [mid]):
        raise NotFound("memory not found")
    if for_change and not may_change(caller, row):
        raise PermissionDenied(
            "you may read this memory but not change it: a workspace memory is changed by its "
            "creator or an admin, a member-only memory by its member"
        )
    return row


def may_change(caller: m.Caller, row) -> bool:
    """The change rule, over a named row selected with ``COLUMNS``."""
    return _may_change(caller, row.audience_member_id, row.created_by)


def may_change_memory(caller: m.Caller, memory: m.Memory) -> bool:
    """The change rule over a Memory message (what Read answers in ``may_change``)."""
    audience = uuid.UUID(memory.audience_member_id) if memory.audience_member_id else None
    return _may_change(caller, audience, uuid.UUID(memory.created_by))


def _may_change(caller: m.Caller, audience: uuid.UUID | None, author: uuid.UUID) -> bool:
    me = uuid.UUID(caller.member_id)
    if audience is not None:
        return audience == me
    return author == me or caller.role == m.ROLE_ADMIN


def _check_revision(row, expected: int, *, superseded_ok: bool = False) -> None:
    if expected <= 0:
        raise InvalidArgument("expected_revision is required (the revision you read)", field="expected_revision")
    if row.superseded_by_id is not None and not superseded_ok:
        raise FailedPrecondition("memory is superseded; change its successor instead")
    if row.invalidated and not superseded_ok:
        raise FailedPrecondition("memory was invalidated: it no longer holds; remember what holds now instead")
    if row.revision != expected:
        raise Aborted(f"revision conflict: expected {expected}, current {row.revision}", current_revision=row.revision)


def _hold_and_replay(conn: psycopg.Connection, caller: m.Caller, key) -> m.Memory | None:
    """A creating change's first step in its transaction: holds the caller (``membership.hold_caller``)
    and returns the memory an earlier call with the same request id made, if any (a replay)."""
    membership.hold_caller(conn, caller)
    return by_request_id(conn, caller, key)


def derive(conn: psycopg.Connection, req: s.DeriveRequest) -> m.Memory:
    """A new memory from readable sources; audience and purpose are the sources' intersection.

    NOT_FOUND for a source the caller cannot read (same as a missing one); FAILED_PRECONDITION when
    the intersection is empty (two different members, or two different purposes); nothing is written.
    """
    caller = req.caller
    if not req.source_ids:
        raise InvalidArgument("derive needs at least one source", field="source_ids")
    if len(req.source_ids) > MAX_SOURCES:
        raise InvalidArgument(f"at most {MAX_SOURCES} sources", field="source_ids")
    kind = "note" if req.kind == m.KIND_UNSPECIFIED else enum_value(KINDS, req.kind, "kind")
    check_text(req.title, req.body)
    confidence = check_confidence(req.confidence) if req.HasField("confidence") else 1.0
    check_request_id(req.request_id)
    entities.check_mentions(req.entities)
    stated = statements.check(req)
    valid_from = validity.given_start(req)
    sources = list(dict.fromkeys(parse_uuid(i, "source_ids", missing_is_not_found=True) for i in req.source_ids))
    fields = {
        "sources": sorted(str(x) for x in sources),
        "kind": kind,
        "title": req.title,
        "body": req.body,
        "confidence": confidence,
        **idempotency.mention_fields(req.entities),
        **validity.start_field(valid_from),
        **stated.fields(),
    }
    key = idempotency.key(req.request_id, idempotency.DERIVE, fields)
    with conn.transaction():
        first = _hold_and_replay(conn, caller, key)
        if first is not None:
            return first
        # Lock the sources and every ancestor, in id order: a concurrent forget anywhere up the chain
        # then either finishes first (and the sources read as gone) or sees this derivation.
        conn.execute(
            f"""SELECT 1 FROM memory m WHERE m.id IN ({ANCESTORS}) ORDER BY m.id FOR SHARE""", {"ids": sources}
        )
        rows = (
            named(conn)
            .execute(f"SELECT {COLUMNS} FROM memory m WHERE m.id = ANY(%s) ORDER BY m.id", (sources,))
            .fetchall()
        )
        if len(rows) != len(sources) or readable_ids(conn, caller, sources) != set(sources):
            raise NotFound("source memory not found")
        # The sources' intersection: their one purpose, and the member of any member-only source.
        audience = next(iter({r.audience_member_id for r in rows} - {None}), None)
        purpose = rows[0].purpose
        if any(stem_fault(r.purpose, r.audience_member_id, purpose, audience) for r in rows):
            raise FailedPrecondition(
                "the sources' audiences or purposes do not intersect: a derivation may not mix members or purposes"
            )
        mentions = list(req.entities) + stated.mentions()
        entity_ids, resolved = entities.resolve_mentions(conn, caller, mentions, audience is None)
        memory = insert(
            conn,
            caller,
            NewMemory(kind, req.title, req.body, audience, purpose, confidence, "derived", valid_from=valid_from),
            key,
            entity_ids,
            sources,
            stated_rows(stated, mentions, resolved),
        )
        _report_resolutions(conn, memory, key, resolved)
        return memory


def _report_resolutions(conn: psycopg.Connection, memory: m.Memory, key, resolved: list) -> None:
    """Puts how a write's names were resolved in its answer, and keeps it for a retry."""
    memory.entity_resolutions.extend(resolved)
    if key.request_id:
        entities.keep_resolutions(conn, [(uuid.UUID(memory.id), resolved)])


def correct(conn: psycopg.Connection, req: s.CorrectRequest) -> m.Memory:
    """Fixes title, body or confidence in place; revision + 1; the old state becomes history; the
    vector is dropped and re-queued. ABORTED (with ``current_revision``) on a revision mismatch."""
    if not any(req.HasField(f) for f in ("title", "body", "confidence", "valid_from")):
        raise InvalidArgument("give a new title, body, confidence or valid_from", field="body")
    valid_from = validity.given_start(req)
    with conn.transaction():
        membership.hold_caller(conn, req.caller)
        row = lock_readable(conn, req.caller, req.memory_id, for_change=True)
        _check_revision(row, req.expected_revision)
        mid, rev = row.id, row.revision
        new_title = req.title if req.HasField("title") else row.title
        new_body = req.body if req.HasField("body") else row.body
        check_text(new_title, new_body)
        new_conf = check_confidence(req.confidence) if req.HasField("confidence") else row.confidence
        conn.execute(
            """INSERT INTO memory_revision (memory_id, revision, title, body, confidence, valid_from, revised_by)
               VALUES (%s, %s, %s, %s, %s, %s, %s)""",
            (mid, rev, row.title, row.body, row.confidence, row.valid_from, row.revised_by),
        )
        updated = (
            named(conn)
            .execute(
                f"""UPDATE memory m SET title = %s, body = %s, confidence = %s, revision = revision + 1,
                          updated_at = now(), body_key = %s, valid_from_given = coalesce(%s, valid_from_given),
                          revised_by = %s
                 WHERE m.id = %s RETURNING {COLUMNS}""",
                (new_title, new_body, new_conf, known.body_key(new_body), valid_from, req.caller.member_id, mid),
            )
            .fetchone()
        )
        if valid_from is not None:
            _follow_start(conn, updated)
        drop_vectors(conn, [mid])
        lexical_index.reindex_text(conn, mid, new_title, new_body)
        queue_embedding(conn, [mid])
    return to_memory(updated)


def _follow_start(conn: psycopg.Connection, row) -> None:
    """After Correct moved ``row``'s ``valid_from``: the memories it superseded whose end follows its
    start (``lifecycle_rules.COVERS``) now end where it starts, never before their own start.
    Nothing is refused: they may be memories the caller cannot read (a duplicate decision may
    supersede across audiences), or forgotten, so their times are neither tested nor named."""
    conn.execute(
        """UPDATE memory SET valid_until = greatest(%s, valid_from)
            WHERE superseded_by_id = %s AND end_follows_successor""",
        (row.valid_from, row.id),
    )


def keep(conn: psycopg.Connection, req: s.KeepMemoryRequest) -> m.Memory:
    """Keeps a memory (the expiry gate, store_service/access/expiry.py): ``updated_at`` becomes ``now()``,
    which counts as an update, so the gate shows it again for its whole period. Nothing else changes:
    title, body, confidence, revision, history, vectors and the keyword index stay as they are (the
    text did not change, so there is nothing to re-embed or re-index). A superseded memory can be
    kept too (history recall hides expired ones as well). Returns the memory with its readable links.

    NOT_FOUND unless readable (chain included; malformed ids too); PERMISSION_DENIED unless the caller
    may change it (``may_change``, Correct's rule); INVALID_ARGUMENT for a revision that is not
    positive; ABORTED (with ``current_revision``) for a stale one.
    """
    with conn.transaction():
        membership.hold_caller(conn, req.caller)
        row = lock_readable(conn, req.caller, req.memory_id, for_change=True)
        _check_revision(row, req.expected_revision, superseded_ok=True)
        kept = (
            named(conn)
            .execute(f"UPDATE memory m SET updated_at = now() WHERE m.id = %s RETURNING {COLUMNS}", (row.id,))
            .fetchone()
        )
        memory = to_memory(kept)
        attach_links(conn, req.caller, {row.id: memory})
        redact_successors(conn, req.caller, [memory])
    return memory


def lock_chains(conn: psycopg.Connection, ids: list[uuid.UUID], *, but: uuid.UUID | None = None) -> None:
    """Locks ``ids`` and everything up their derived_from chains ``FOR SHARE``, in id order, except
    ``but`` (a row the caller then locks for change): a concurrent forget of any of them then either
    finishes first (and the rows read as gone) or waits and then finds what this transaction writes
    through its links (Forget walks the links down after taking its locks)."""
    conn.execute(
        f"SELECT 1 FROM memory m WHERE m.id IN ({ANCESTORS}) AND m.id IS DISTINCT FROM %(but)s ORDER BY m.id FOR SHARE",
        {"ids": list(ids), "but": but},
    )


def supersede(
    conn: psycopg.Connection,
    req: s.SupersedeRequest,
    *,
    flag_conflict: bool = True,
    also_from: tuple[uuid.UUID, ...] = (),
    keep_title: bool = True,
) -> m.Memory:
    """Replaces a memory by a new one with the same purpose; the audience may narrow from the
    workspace to the caller, never widen (INVALID_ARGUMENT). A superseded target is FAILED_PRECONDITION.
    The kind and, with ``keep_title``, an empty title are the target's: a successor restates the
    claim, and a client that sends only the new body (the CLI without --title, an agent's tool call)
    should not lose the title every reader and listing shows. An undo copies the older memory's
    text whole, an empty title included, so it passes ``keep_title=False``.
    Two authors, both confident (store_service/records/conflict_flags.py): the pair is flagged in the same
    transaction,
    unless ``flag_conflict`` is false (an undo of a flag, store_service/curation/review.py).

    ``also_from``: memories the new text comes from besides the target's sources (an undo: the older
    memory, whose text it carries), already judged readable by the caller. They are locked with the
    target's chain and linked ``derived_from``, so the successor is readable only with them and a
    Forget of any of them, or of anything up their chains, forgets it too (a derivation may copy
    its text)."""
    caller = req.caller
    check_text(req.title, req.body)
    confidence = check_confidence(req.confidence) if req.HasField("confidence") else 1.0
    check_request_id(req.request_id)
    entities.check_mentions(req.entities)
    stated = statements.check(req)
    valid_from = validity.given_start(req)
    target = parse_uuid(req.memory_id, "memory_id", missing_is_not_found=True)
    fields = {
        "target": str(target),
        "expected_revision": req.expected_revision,
        "kind": None if req.kind == m.KIND_UNSPECIFIED else enum_value(KINDS, req.kind, "kind"),
        "title": req.title,
        "body": req.body,
        "audience": idempotency.audience_name(req.audience),
        "confidence": confidence,
        **validity.start_field(valid_from),
        **(idempotency.mention_fields(req.entities) if req.entities else {}),
        **stated.fields(),
    }
    key = idempotency.key(req.request_id, idempotency.SUPERSEDE, fields)
    with conn.transaction():
        first = _hold_and_replay(conn, caller, key)
        if first is not None:
            return first
        # Lock everything up the target's derived_from chain first, in id order, as derive does: a
        # concurrent forget of an ancestor then either finishes first (and the target reads as
        # gone) or waits and finds the successor through the links it inherits. Without this a
        # successor of a forgotten source stayed live and indexed, readable by nobody.
        lock_chains(conn, [target, *also_from], but=target)
        row = lock_readable(conn, caller, req.memory_id, for_change=True)
        first = by_request_id(conn, caller, key)  # a concurrent retry may have won while we waited
        if first is not None:
            return first
        _check_revision(row, req.expected_revision)
        if req.audience == m.AUDIENCE_UNSPECIFIED:
            audience = row.audience_member_id
        elif req.audience == m.AUDIENCE_MEMBER:
            audience = uuid.UUID(caller.member_id)
        elif req.audience == m.AUDIENCE_WORKSPACE:
            audience = None
        else:
            raise InvalidArgument("audience must be workspace or member", field="audience")
        # The successor has the target's purpose, so only its audience can fail the rule.
        if stem_fault(row.purpose, row.audience_member_id, row.purpose, audience):
            raise InvalidArgument("the audience may narrow from the workspace to you, never widen", field="audience")
        kind = row.kind if req.kind == m.KIND_UNSPECIFIED else enum_value(KINDS, req.kind, "kind")
        title = row.title if keep_title and not req.title else req.title
        sources = sources_of(conn, [row.id]).get(row.id, [])
        sources += [x for x in also_from if x not in sources]
        mentions = list(req.entities) + stated.mentions()
        entity_ids, resolved = entities.resolve_mentions(conn, caller, mentions, audience is None)
        successor = insert(
            conn,
            caller,
            NewMemory(kind, title, req.body, audience, row.purpose, confidence, "told", valid_from=valid_from),
            key,
            entity_ids,
            sources,
            stated_rows(stated, mentions, resolved),
        )
        _report_resolutions(conn, successor, key, resolved)
        validity.check_successor_start(successor.valid_from.ToDatetime(datetime.UTC), row)
        retire(conn, [(row.id, uuid.UUID(successor.id))], flag_conflict=flag_conflict)
    return successor


def invalidate(conn: psycopg.Connection, req: s.InvalidateRequest) -> m.Memory:
    """Ends a claim that stopped holding without a successor: ``valid_until`` becomes ``at`` (default
    now), ``invalidation_reason`` the reason, and the memory leaves current recall as a superseded
    one does (``lifecycle_rules.leave``); no conflict flag (nothing contradicts it). Correct's
    change rules and revision check (``lock_readable``, ``_check_revision``): a superseded or
    invalidated memory is FAILED_PRECONDITION. INVALID_ARGUMENT for a blank or too long reason, or
    an ``at`` outside years 1..9999, before the memory's ``valid_from`` or in the future."""
    check_reason(req.reason)
    reason = req.reason.strip()
    if is_blank(reason):
        raise InvalidArgument("say why it no longer holds (reason)", field="reason")
    at = validity.given_end(req)
    with conn.transaction():
        membership.hold_caller(conn, req.caller)
        row = lock_readable(conn, req.caller, req.memory_id, for_change=True)
        _check_revision(row, req.expected_revision)
        validity.check_started(row)
        end = validity.check_end(at, row) if at is not None else None
        ended = (
            named(conn)
            .execute(
                f"""UPDATE memory m SET valid_until = greatest(least(coalesce(%s, now()), now()), m.valid_from),
                          invalidated = true,
                          invalidation_reason = %s, retired_at = now(), updated_at = now()
                 WHERE m.id = %s RETURNING {COLUMNS}""",
                (end, reason, row.id),
            )
            .fetchone()
        )
        leave(conn, [row.id])
        memory = to_memory(ended)
        attach_links(conn, req.caller, {row.id: memory})
    return memory


def supersede_by_existing(
    conn: psycopg.Connection, caller: m.Caller, target_id: str, keep_id: str, expected_revision: int
) -> uuid.UUID | None:
    """Supersedes memory ``target_id`` by the existing memory ``keep_id``, which stays as it is: the
    target gets ``superseded_by_id`` = ``keep_id`` and leaves the default search, as Supersede's
    target does (DecideDuplicateProposal, store_service/curation/review.py). Returns the conflict flag's id
    when both are confident, else None.

    Supersede's rules, through the same lock-and-judge code: both are locked (in id order, so two
    opposite decisions on one pair cannot deadlock) and must be readable (NOT_FOUND); the caller may
    change the target (PERMISSION_DENIED); ``expected_revision`` is the target's revision as read
    (INVALID_ARGUMENT when not positive, ABORTED naming the current one when stale); neither may be
    superseded already and both must have the same purpose (FAILED_PRECONDITION), so a chain of
    successors never loops and the successor serves the purpose the target did. No text moves, so
    the audiences may differ either way: nobody gains a reader. The successor keeps its own links.
    """
    target = parse_uuid(target_id, "memory_id", missing_is_not_found=True)
    keep = parse_uuid(keep_id, "keep_id", missing_is_not_found=True)
    if target == keep:
        raise InvalidArgument("a memory cannot supersede itself", field="keep_id")
    with conn.transaction():
        membership.hold_caller(conn, caller)
        rows = {mid: lock_readable(conn, caller, str(mid), for_change=mid == target) for mid in sorted((target, keep))}
        _check_revision(rows[target], expected_revision)
        if rows[keep].superseded_by_id is not None:
            raise FailedPrecondition("the memory kept is superseded; keep its successor instead")
        if rows[keep].invalidated:
            raise FailedPrecondition(
                "the memory kept was invalidated: it no longer holds, so it cannot replace another"
            )
        if rows[keep].purpose != rows[target].purpose:
            raise FailedPrecondition(
                "the two memories have different purposes: a memory is superseded only by one of its purpose"
            )
        return retire(conn, [(target, keep)]).get(target)


# Forget runs again this many times at most when PostgreSQL breaks a deadlock by aborting it. It
# locks the target before its derivations (in id order), while the embedding worker locks a batch's
# memories in id order (FOR SHARE), so a derivation whose id sorts before its source can hold the
# two in opposite orders; the rolled-back transaction changed nothing, so running it again is safe.
FORGET_DEADLOCK_ATTEMPTS = 3


def forget(conn: psycopg.Connection, req: s.ForgetRequest, *, removal: bool = False) -> list[str]:
    """Erases a memory and everything derived from it, transitively, keeping tombstones.

    Returns the ids forgotten that the caller could read (target first); forgetting again is a
    no-op returning the target alone. Title, body, history, search data and vectors are erased;
    each derived tombstone names the forgotten source. A deadlock with the embedding worker is
    retried (``FORGET_DEADLOCK_ATTEMPTS``); past that it is ABORTED (servicekit/errors.py).
    ``removal``: the caller is a member being removed (``forget_member``), so its removal is not
    a reason to refuse.
    """
    for attempt in range(1, FORGET_DEADLOCK_ATTEMPTS + 1):
        try:
            return _forget_once(conn, req, removal)
        except psycopg.errors.DeadlockDetected:
            if attempt == FORGET_DEADLOCK_ATTEMPTS:
                raise
    raise AssertionError("unreachable")


def _forget_once(conn: psycopg.Connection, req: s.ForgetRequest, removal: bool) -> list[str]:
    """One transaction of ``forget``."""
    caller = req.caller
    check_reason(req.reason)
    if req.expected_revision < 0:
        raise InvalidArgument("expected_revision must be positive (or 0: not checked)", field="expected_revision")
    reason = req.reason.strip() or "forgotten on request"
    with conn.transaction():
        if not removal:
            membership.hold_caller(conn, caller)
        mid = parse_uuid(req.memory_id, "memory_id", missing_is_not_found=True)
        # A tombstone the caller could have read (the readability rule, less the forgotten test)
        # and changed: forgetting it again is a no-op.
        tomb = (
            named(conn)
            .execute(
                f"SELECT {COLUMNS}, {IN_SCOPE} AS in_scope FROM memory m WHERE m.id = %(id)s FOR NO KEY UPDATE",
                {**caller_params(caller), "id": mid},
            )
            .fetchone()
        )
        if tomb is not None and tomb.forgotten_at is not None and tomb.in_scope and may_change(caller, tomb):
            return [str(mid)]
        row = lock_readable(conn, caller, req.memory_id, for_change=True)
        if req.expected_revision and row.revision != req.expected_revision:  # 0: the caller did not say
            raise Aborted(
                f"revision conflict: expected {req.expected_revision}, current {row.revision}",
                current_revision=row.revision,
            )
        closure = [
            r.id
            for r in named(conn).execute(
                f"""{DOWN} SELECT m.id FROM memory m JOIN walk w ON w.id = m.id WHERE m.forgotten_at IS NULL
                 ORDER BY m.id FOR NO KEY UPDATE OF m""",
                {"ids": [mid]},
            )
        ]
        visible = readable_ids(conn, caller, closure)
        lock_predecessors(conn, closure)
        lexical_index.remove_memories(conn, closure)
        # The request fingerprint and body key go with the text (store_service/records/idempotency.py,
        # known.py): the id stays used. So does capture evidence (capture.erase).
        capture.erase(conn, closure)
        statements.erase(conn, closure)  # what they stated is their text too
        prompt_sessions.forget_memories(conn, closure)  # which sessions were shown it
        conn.execute(
            """UPDATE memory SET title = '', body = '', reason = NULL, request_fingerprint = NULL, body_key = NULL,
                      entity_resolutions = NULL,
                      forgotten_at = now(),
                      updated_at = now(),
                      invalidation_reason = CASE WHEN id = %(target)s THEN %(reason)s
                                                 ELSE 'forgotten with its source ' || %(target)s::text END
                WHERE id = ANY(%(ids)s)""",
            {"target": mid, "reason": reason, "ids": closure},
        )
        conn.execute("DELETE FROM memory_revision WHERE memory_id = ANY(%s)", (closure,))
        drop_vectors(conn, closure)
        restore_predecessors(conn, closure)
    return [str(mid)] + [str(i) for i in closure if i != mid and i in visible]


# The tombstone reason of a removed member's memories (AdminService.RemoveMember).
REMOVED_REASON = "its member was removed from the workspace"
# Live member-only memories one read of a removal's sweep takes (each then forgotten in its own
# transaction): the sweep holds no lock and no transaction open between them.
SWEEP_BATCH = 100


def forget_member(conn: psycopg.Connection, member: m.Caller) -> list[str]:
    """Forgets every live member-only memory of ``member`` (a Caller with every purpose, as
    ``ControlPlane.remove_member`` gives it), each exactly as its member's own Forget would (so with
    everything derived from it, tombstones kept), oldest first; returns the ids forgotten, oldest
    first, derivations included. A derivation of a member-only memory is member-only for the same
    member (Derive's intersection), so nothing another member may read is forgotten. Memories already
    forgotten are left alone, so a second run forgets nothing and returns nothing.

    Call it on a connection with no transaction open, after ``membership.mark_removed``: no memory
    of the member appears after that, so one pass in (created_at, id) order finds every one. Each
    read of ``SWEEP_BATCH`` ids and each forget is its own short transaction, so the sweep never
    holds the keyword statistics lock (or any row) for longer than one Forget does."""
    done: list[str] = []
    seen: set[str] = set()
    after: tuple | None = None
    while True:
        with conn.transaction():
            batch = (
                named(conn)
                .execute(
                    """SELECT m.id, m.created_at FROM memory m
                        WHERE m.audience_member_id = %(member)s AND m.forgotten_at IS NULL
                          AND (%(at)s::timestamptz IS NULL OR (m.created_at, m.id) > (%(at)s, %(id)s))
                        ORDER BY m.created_at, m.id LIMIT %(n)s""",
                    {
                        "member": uuid.UUID(member.member_id),
                        "at": after[0] if after else None,
                        "id": after[1] if after else None,
                        "n": SWEEP_BATCH,
                    },
                )
                .fetchall()
            )
        if not batch:
            return done
        after = (batch[-1].created_at, batch[-1].id)
        for row in batch:
            if str(row.id) in seen:  # forgotten with a source earlier in this sweep
                continue
            request = s.ForgetRequest(caller=member, memory_id=str(row.id), reason=REMOVED_REASON)
            try:
                forgotten = forget(conn, request, removal=True)
            except NotFound:  # no longer readable by its member (forgotten meanwhile): nothing to do
                continue
            for mid in forgotten:
                if mid not in seen:
                    seen.add(mid)
                    done.append(mid)
