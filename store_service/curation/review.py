"""Curation by people: duplicate proposals and conflict flags (issue 9; docs/curation.md).

Nothing here merges or resolves by itself: the proposals and flags are lists for a person, and the
decisions are a person's calls.

**Duplicate proposals** (``list_duplicates``). The window is the ``DUPLICATE_WINDOW`` newest
memories (``created_at``, then id, descending) the caller can read for one purpose, by the rule of
Read, Recall and ListMemories: own row readable (``readability.READABLE``: audience, granted
purpose, not forgotten) and whole derived_from chain readable (``memories.readable_ids``), and not
superseded. A memory the caller cannot read takes no place in the window, so the window, the pairs
and every count are the same as if it did not exist. Each memory of the window that has a stored
vector of the current input version (named by the gateway, which asks the embed service: the store
loads no model) and of its current revision takes part; every pair of them at cosine
``DUPLICATE_COSINE`` or more is a proposal, unless a person kept that pair as both. Cosines are
computed here with numpy from the stored vectors (500 x 384 floats, one matrix product) and rounded
to six decimals: the vectors are stored as float32 (about seven significant digits), so further
digits are noise, and the rounding absorbs last-bit differences of the product between windows, so a
pair's cosine is the same number on every page and one built at 0.80 counts as 0.80. Order:
cosine descending, then the newer memory's id, then the older's; a page token holds that triple
for the last proposal of the page (keyset pages, ``store_service.page_tokens``, bound to the
member, their purposes and the purpose asked).

**Decisions** (``decide``): on any two distinct memories the caller can read (not only a current
proposal: the list moves as memories are written, and a decision on a pair seen a moment ago
should still apply). Keep both writes ``duplicate_kept`` (the pair is never proposed again, to
anyone: only callers who can read both ever see the pair, so the row hides nothing from anyone who
could have seen it; keeping changes no memory, so reading both is enough). Supersede is
``lifecycle.supersede_by_existing`` (Supersede's lock-and-judge code and revision rules); forget is
``lifecycle.forget``.

**Conflict flags** are written by store_service/records/conflict_flags.py where a supersession is made;
``list_flags`` shows a flag only when the caller can read both of its memories (the same rule,
chain included), and counts only those; ``resolve`` acknowledges one or undoes it by superseding
the newer memory with a new memory carrying the older's text (``lifecycle.supersede``), so nothing
is erased: the older, the newer and the restored text all stay. The restored memory derives from
the older, so the older's text never gains a reader and a Forget of the older reaches its copy.
"""

from __future__ import annotations

import datetime
import uuid

import numpy as np
import psycopg
from recallatron.memory.v1 import memory_pb2 as m
from recallatron.store.v1 import store_pb2 as s

from servicekit import vocabulary
from servicekit.caller import check_purpose_granted
from servicekit.errors import FailedPrecondition, InvalidArgument, NotFound, PermissionDenied
from store_service import page_tokens
from store_service.access.readability import READABLE, caller_params, chain_readable
from store_service.database import named
from store_service.records import lifecycle, memories
from store_service.vocabulary import KIND_OF, parse_uuid

# Issue 9 and the old store's curation rule (docs/curation.md): pairs at cosine 0.80
# or more among the 500 newest memories the caller can read are proposed. 500 also bounds the work
# of a listing (at most 124,750 cosines, one matrix product) whatever the workspace's size.
DUPLICATE_COSINE = 0.80
DUPLICATE_WINDOW = 500
# Cosines are compared and shown rounded to this many decimals (module docstring).
COSINE_DECIMALS = 6
# Page sizes (AIP-158), as ListMemories': 200 proposals hold at most 400 memories of 64 KiB.
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 200
# The short names of the enums (servicekit.vocabulary): decisions, and flag states as stored.
_DECISIONS = vocabulary.names(m.DuplicateDecision)
_STATE_OF = vocabulary.values(m.ConflictFlagState)
# What each resolution makes of a flag's state.
_RESOLUTIONS = {m.CONFLICT_RESOLUTION_ACKNOWLEDGE: "acknowledged", m.CONFLICT_RESOLUTION_UNDO: "undone"}
# The first page of a newest-first listing starts after a position later than any row.
_FIRST = (datetime.datetime.max.replace(tzinfo=datetime.UTC), uuid.UUID(int=(1 << 128) - 1))


def window(conn: psycopg.Connection, caller: m.Caller, purpose: str) -> list[uuid.UUID]:
    """The ids of the ``DUPLICATE_WINDOW`` newest memories ``caller`` can read for ``purpose`` (own
    row and chain), not superseded, newest first. Read in batches of the window's size: the own-row
    rule in SQL, then the chain verdicts of the batch in one query, until the window is full, so a
    workspace of any size costs about one batch when few chains are hidden."""
    params = {**caller_params(caller), "purpose": purpose, "limit": DUPLICATE_WINDOW}
    at, after = _FIRST
    out: list[uuid.UUID] = []
    while len(out) < DUPLICATE_WINDOW:
        batch = (
            named(conn)
            .execute(
                f"""SELECT m.id, m.created_at FROM memory m
                     WHERE {READABLE} AND m.purpose = %(purpose)s AND m.retired_at IS NULL
                       AND (m.created_at, m.id) < (%(at)s, %(after)s)
                     ORDER BY m.created_at DESC, m.id DESC LIMIT %(limit)s""",
                {**params, "at": at, "after": after},
            )
            .fetchall()
        )
        ok = memories.readable_ids(conn, caller, [r.id for r in batch])
        out += [r.id for r in batch if r.id in ok]
        if len(batch) < DUPLICATE_WINDOW:
            break
        at, after = batch[-1].created_at, batch[-1].id
    return out[:DUPLICATE_WINDOW]


def _vectors(conn: psycopg.Connection, ids: list[uuid.UUID], stamp: str) -> dict[uuid.UUID, np.ndarray]:
    """The stored vectors of ``ids`` with input version ``stamp`` and the memory's current revision
    (the dense arm's rule: vectors of two embedding spaces or of an older text are never compared),
    read in binary."""
    if not ids or not stamp:
        return {}
    rows = conn.execute(
        """SELECT e.memory_id, e.embedding FROM memory_embedding e JOIN memory m ON m.id = e.memory_id
            WHERE e.memory_id = ANY(%s) AND e.input_version = %s AND e.memory_revision = m.revision""",
        (ids, stamp),
        binary=True,
    ).fetchall()
    return {mid: vec.to_numpy() for mid, vec in rows}


def _kept(conn: psycopg.Connection, ids: list[uuid.UUID]) -> set[tuple[uuid.UUID, uuid.UUID]]:
    """The pairs among ``ids`` a person kept as both, each as (smaller id, larger id)."""
    rows = conn.execute(
        "SELECT low_id, high_id FROM duplicate_kept WHERE low_id = ANY(%s) AND high_id = ANY(%s)", (ids, ids)
    ).fetchall()
    return {(lo, hi) for lo, hi in rows}


def pairs(
    ids: list[uuid.UUID], vectors: dict[uuid.UUID, np.ndarray], kept: set[tuple[uuid.UUID, uuid.UUID]]
) -> list[tuple[float, uuid.UUID, uuid.UUID]]:
    """Every (cosine, newer id, older id) among ``ids`` (newest first) that have a vector, at cosine
    ``DUPLICATE_COSINE`` or more (rounded to ``COSINE_DECIMALS``), not in ``kept``, best first:
    cosine descending, then the newer id, then the older id (ascending)."""
    have = [i for i in ids if i in vectors]
    if len(have) < 2:
        return []
    matrix = np.stack([vectors[i] for i in have]).astype(np.float64)
    norms = np.linalg.norm(matrix, axis=1)
    norms[norms == 0] = 1.0  # a zero vector is like nothing (cosine 0), never a division by zero
    matrix /= norms[:, None]
    cosines = np.round(matrix @ matrix.T, COSINE_DECIMALS)
    rows, cols = np.nonzero(np.triu(cosines >= DUPLICATE_COSINE, k=1))
    out = []
    for i, j in zip(rows.tolist(), cols.tolist(), strict=True):
        a, b = have[i], have[j]  # i < j: a is the newer
        if (min(a, b), max(a, b)) not in kept:
            out.append((min(float(cosines[i, j]), 1.0), a, b))
    out.sort(key=lambda p: (-p[0], p[1], p[2]))
    return out


def list_duplicates(conn: psycopg.Connection, req: s.ListDuplicateProposalsRequest) -> s.ListDuplicateProposalsResponse:
    """One page of the caller's duplicate proposals for ``req.purpose`` (module docstring), from the
    vectors of ``req.input_version`` (empty: unknown, so no pair is computed and
    ``dense_available`` is false), with ``total_size`` the number of proposals and the window's counts.

    INVALID_ARGUMENT for a bad purpose, a negative page size or a page token not issued for this
    member and purpose; PERMISSION_DENIED for a purpose not granted.
    """
    caller = req.caller
    purpose = check_purpose_granted(caller, req.purpose)
    size = page_tokens.page_size(req.page_size, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
    fingerprint = page_tokens.fingerprint(
        ["duplicates", caller.member_id, sorted(caller_params(caller)["purposes"]), purpose]
    )
    after = page_tokens.decode_position(
        req.page_token,
        fingerprint,
        "duplicate list",
        page_tokens.number,
        page_tokens.identifier,
        page_tokens.identifier,
    )
    ids = window(conn, caller, purpose)
    vectors = _vectors(conn, ids, req.input_version)
    found = pairs(ids, vectors, _kept(conn, ids))
    start = 0
    if after is not None:
        key = (-after[0], after[1], after[2])
        start = next((n for n, p in enumerate(found) if (-p[0], p[1], p[2]) > key), len(found))
    page = found[start : start + size]
    token = ""
    if start + size < len(found):
        last = page[-1]
        token = page_tokens.encode(fingerprint, [last[0], str(last[1]), str(last[2])])
    shown = {
        mem.id: mem for mem in memories.get_memories(conn, caller, list({str(i) for _, a, b in page for i in (a, b)}))
    }
    return s.ListDuplicateProposalsResponse(
        proposals=[
            m.DuplicateProposal(memory_a=shown[str(a)], memory_b=shown[str(b)], cosine=cosine)
            for cosine, a, b in page
            if str(a) in shown and str(b) in shown  # a memory forgotten since the window was read
        ],
        next_page_token=token,
        total_size=len(found),
        dense_available=bool(req.input_version) and (not ids or bool(vectors)),
        memories_considered=len(ids),
        memories_without_vectors=len(ids) - len(vectors),
    )


def _one_of(value: str, pair: tuple[uuid.UUID, uuid.UUID], field: str) -> uuid.UUID:
    """``value`` parsed as one of the pair's ids; INVALID_ARGUMENT otherwise."""
    mid = parse_uuid(value, field)
    if mid not in pair:
        raise InvalidArgument(f"{field} must be memory_a_id or memory_b_id", field=field)
    return mid


def _check_decision(req: s.DecideDuplicateProposalRequest, pair: tuple[uuid.UUID, uuid.UUID]) -> uuid.UUID | None:
    """Validates the decision's own fields without the database; returns the memory kept
    (supersede) or forgotten (forget), None to keep both. INVALID_ARGUMENT for an unknown decision
    or a field of another decision."""
    if req.decision not in _DECISIONS:
        raise InvalidArgument("decision must be one of: " + ", ".join(_DECISIONS.values()), field="decision")
    name = _DECISIONS[req.decision]
    stray = {
        "keep_id": bool(req.keep_id) and name != "supersede",
        "expected_revision": req.expected_revision != 0 and name != "supersede",
        "forget_id": bool(req.forget_id) and name != "forget",
        "reason": bool(req.reason) and name != "forget",
    }
    for field, bad in stray.items():
        if bad:
            raise InvalidArgument(f"{field} does not go with the decision {name}", field=field)
    if name == "supersede":
        keep = _one_of(req.keep_id, pair, "keep_id")
        if req.expected_revision <= 0:
            raise InvalidArgument(
                "expected_revision is required: the revision of the memory superseded, as you read it",
                field="expected_revision",
            )
        return keep
    if name == "forget":
        lifecycle.check_reason(req.reason)
        return _one_of(req.forget_id, pair, "forget_id")
    return None


def decide(conn: psycopg.Connection, req: s.DecideDuplicateProposalRequest) -> s.DecideDuplicateProposalResponse:
    """Applies a person's decision about two memories (module docstring; the gateway's
    DecideDuplicateProposal gives the codes). Every input check comes before the database, so a bad
    request answers the same whatever the ids name; then both must be readable (NOT_FOUND, the text
    of a missing memory, otherwise)."""
    caller = req.caller
    a = parse_uuid(req.memory_a_id, "memory_a_id")
    b = parse_uuid(req.memory_b_id, "memory_b_id")
    if a == b:
        raise InvalidArgument("memory_a_id and memory_b_id must name two different memories", field="memory_b_id")
    chosen = _check_decision(req, (a, b))
    if memories.readable_ids(conn, caller, [a, b]) != {a, b}:
        raise NotFound("memory not found")
    out = s.DecideDuplicateProposalResponse(decision=req.decision)
    if req.decision == m.DUPLICATE_DECISION_KEEP_BOTH:
        conn.execute(
            """INSERT INTO duplicate_kept (low_id, high_id, kept_by) VALUES (%s, %s, %s)
               ON CONFLICT (low_id, high_id) DO NOTHING""",
            (min(a, b), max(a, b), uuid.UUID(caller.member_id)),
        )
    elif req.decision == m.DUPLICATE_DECISION_SUPERSEDE:
        target = b if chosen == a else a
        flag = lifecycle.supersede_by_existing(conn, caller, str(target), str(chosen), req.expected_revision)
        shown = {mem.id: mem for mem in memories.get_memories(conn, caller, [str(target), str(chosen)])}
        if str(target) in shown:
            out.superseded.CopyFrom(shown[str(target)])
        if str(chosen) in shown:
            out.kept.CopyFrom(shown[str(chosen)])
        out.conflict_flag_id = str(flag) if flag else ""
    else:
        out.forgotten_ids.extend(
            lifecycle.forget(conn, s.ForgetRequest(caller=caller, memory_id=str(chosen), reason=req.reason))
        )
    return out


# One conflict flag's columns, aliased ``f``.
_FLAG_COLUMNS = "f.id, f.older_id, f.newer_id, f.flagged_at, f.state, f.resolved_by, f.resolved_at, f.restored_id"


def _flag_messages(conn: psycopg.Connection, caller: m.Caller, rows) -> list[m.ConflictFlag]:
    """ConflictFlag messages of flag rows whose two memories the caller can read, in order, each
    memory with its readable links (one fetch for all); a restored memory's id only when readable."""
    wanted = list(dict.fromkeys(str(i) for r in rows for i in (r.older_id, r.newer_id)))
    shown = {mem.id: mem for mem in memories.get_memories(conn, caller, wanted)}
    restored = memories.readable_ids(conn, caller, [r.restored_id for r in rows if r.restored_id])
    out = []
    for r in rows:
        older, newer = shown.get(str(r.older_id)), shown.get(str(r.newer_id))
        if older is None or newer is None:  # forgotten since the flags were read
            continue
        flag = m.ConflictFlag(
            id=str(r.id),
            older=older,
            newer=newer,
            flagged_at=memories.timestamp(r.flagged_at),
            state=_STATE_OF[r.state],
            resolved_by=str(r.resolved_by) if r.resolved_by else "",
            restored_memory_id=str(r.restored_id) if r.restored_id in restored else "",
        )
        if r.resolved_at is not None:
            flag.resolved_at.CopyFrom(memories.timestamp(r.resolved_at))
        out.append(flag)
    return out


def _flag_position(token: str, fingerprint: str) -> tuple[datetime.datetime, uuid.UUID]:
    """The (flagged_at, id) after which a flags page starts; INVALID_ARGUMENT for a foreign or
    malformed token (``page_tokens.decode_position``)."""
    position = page_tokens.decode_position(token, fingerprint, "flag list", page_tokens.instant, page_tokens.identifier)
    return _FIRST if position is None else position


def list_flags(conn: psycopg.Connection, req: s.ListConflictFlagsRequest) -> s.ListConflictFlagsResponse:
    """One page of the conflict flags whose two memories the caller can read (own rows and whole
    chains), open ones only unless ``include_resolved``, newest first (flagged_at, then id,
    descending), with ``total_size`` counting the same flags. One statement judges, counts and
    reads the page. INVALID_ARGUMENT for a negative page size or a page token not issued for this
    member and ``include_resolved``."""
    caller = req.caller
    size = page_tokens.page_size(req.page_size, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
    params = caller_params(caller)
    fingerprint = page_tokens.fingerprint(
        ["conflict_flags", caller.member_id, sorted(params["purposes"]), req.include_resolved]
    )
    after_at, after_id = _flag_position(req.page_token, fingerprint)
    seeds = f"""(SELECT DISTINCT m.id FROM wanted w JOIN memory m ON m.id IN (w.older_id, w.newer_id)
                  WHERE {READABLE})"""
    rows = (
        named(conn)
        .execute(
            f"""WITH wanted AS MATERIALIZED (
                     SELECT f.id, f.older_id, f.newer_id, f.flagged_at FROM conflict_flag f
                      WHERE %(all)s OR f.state = 'open'),
                ok AS MATERIALIZED ({chain_readable(seeds)}),
                visible AS MATERIALIZED (
                     SELECT w.id, w.flagged_at FROM wanted w
                       JOIN ok o1 ON o1.start_id = w.older_id JOIN ok o2 ON o2.start_id = w.newer_id)
                SELECT c.total, p.*
                  FROM (SELECT count(*) AS total FROM visible) c
                  LEFT JOIN LATERAL (
                       SELECT {_FLAG_COLUMNS} FROM visible v JOIN conflict_flag f ON f.id = v.id
                        WHERE (v.flagged_at, v.id) < (%(after_at)s, %(after_id)s)
                        ORDER BY v.flagged_at DESC, v.id DESC LIMIT %(limit)s) p ON TRUE""",
            {**params, "all": req.include_resolved, "after_at": after_at, "after_id": after_id, "limit": size + 1},
        )
        .fetchall()
    )
    total = rows[0].total
    rows = [r for r in rows if r.id is not None]
    token = ""
    if len(rows) > size:
        rows = rows[:size]
        token = page_tokens.encode(fingerprint, [rows[-1].flagged_at.isoformat(), str(rows[-1].id)])
    return s.ListConflictFlagsResponse(
        flags=_flag_messages(conn, caller, rows), next_page_token=token, total_size=total
    )


def resolve(conn: psycopg.Connection, req: s.ResolveConflictFlagRequest) -> s.ResolveConflictFlagResponse:
    """Acknowledges an open flag or undoes it (the newer memory superseded by a new memory with the
    older's kind, title, body and confidence, under ``expected_revision``; ``lifecycle.supersede``,
    writing no new flag); either needs the right to change the newer memory. The flag is locked
    first, so of two racing resolutions one wins and the other finds it resolved.

    The restored memory carries the older's text, so it has no more readers than the older: it is
    linked ``derived_from`` the older (readable only with it, forgotten with it or with anything
    the older derives from) and member-only, the caller's, when the older is member-only; otherwise
    it keeps the newer's audience and sources, as Supersede gives a successor.

    INVALID_ARGUMENT for a malformed id, an unknown resolution or a revision that does not go with
    it; NOT_FOUND ("conflict flag not found", as for a missing one) unless the caller can read both
    memories; FAILED_PRECONDITION when already resolved; PERMISSION_DENIED, ABORTED and
    FAILED_PRECONDITION (the newer superseded meanwhile) as Supersede gives them.
    """
    caller = req.caller
    fid = parse_uuid(req.flag_id, "flag_id")
    if req.resolution not in _RESOLUTIONS:
        raise InvalidArgument(
            "resolution must be one of: " + ", ".join(vocabulary.names(m.ConflictResolution).values()),
            field="resolution",
        )
    undo = req.resolution == m.CONFLICT_RESOLUTION_UNDO
    if undo and req.expected_revision <= 0:
        raise InvalidArgument(
            "expected_revision is required to undo: the newer memory's revision, as you read it",
            field="expected_revision",
        )
    if not undo and req.expected_revision != 0:
        raise InvalidArgument("expected_revision goes with undo only", field="expected_revision")
    restored = None
    with conn.transaction():
        row = (
            named(conn)
            .execute(f"SELECT {_FLAG_COLUMNS} FROM conflict_flag f WHERE f.id = %s FOR UPDATE", (fid,))
            .fetchone()
        )
        if row is not None and undo:
            # The older's text is copied: lock it (and its chain) before judging and reading it, so a
            # Forget of it in progress finishes first (then the flag is gone) or reaches the copy.
            lifecycle.lock_chains(conn, [row.older_id, row.newer_id], but=row.newer_id)
        if row is None or memories.readable_ids(conn, caller, [row.older_id, row.newer_id]) != {
            row.older_id,
            row.newer_id,
        }:
            raise NotFound("conflict flag not found")
        if row.state != "open":
            raise FailedPrecondition(f"the conflict flag is already resolved ({row.state})")
        newer = (
            named(conn).execute(f"SELECT {memories.COLUMNS} FROM memory m WHERE m.id = %s", (row.newer_id,)).fetchone()
        )
        if not lifecycle.may_change(caller, newer):  # said of the flag; the change itself judges it again
            raise PermissionDenied(
                "you may not resolve this flag: resolving it changes its newer memory, which its author or an "
                "admin changes (a member-only one, its member)"
            )
        if undo:
            older = (
                named(conn)
                .execute(f"SELECT {memories.COLUMNS} FROM memory m WHERE m.id = %s", (row.older_id,))
                .fetchone()
            )
            restored = lifecycle.supersede(
                conn,
                s.SupersedeRequest(
                    caller=caller,
                    memory_id=str(row.newer_id),
                    expected_revision=req.expected_revision,
                    kind=KIND_OF[older.kind],
                    title=older.title,
                    body=older.body,
                    confidence=older.confidence,
                    # The older's text keeps the older's readers at most: a member-only older is the
                    # caller's own (nobody else reads it), so the copy narrows to the caller.
                    audience=m.AUDIENCE_MEMBER if older.audience_member_id is not None else m.AUDIENCE_UNSPECIFIED,
                ),
                flag_conflict=False,
                also_from=(row.older_id,),
                keep_title=False,
            )
        else:
            lifecycle.lock_readable(conn, caller, str(row.newer_id), for_change=True)
        row = (
            named(conn)
            .execute(
                f"""UPDATE conflict_flag f SET state = %s, resolved_by = %s, resolved_at = now(), restored_id = %s
                     WHERE f.id = %s RETURNING {_FLAG_COLUMNS}""",
                (
                    _RESOLUTIONS[req.resolution],
                    uuid.UUID(caller.member_id),
                    uuid.UUID(restored.id) if restored else None,
                    fid,
                ),
            )
            .fetchone()
        )
    flags = _flag_messages(conn, caller, [row])
    out = s.ResolveConflictFlagResponse(flag=flags[0] if flags else None)
    if restored is not None:
        out.restored.CopyFrom(restored)
    return out
