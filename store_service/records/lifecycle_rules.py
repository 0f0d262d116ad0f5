"""The rules a memory's life cycle shares between its writers: Derive, Correct, Supersede and
Forget (``store_service.records.lifecycle``) and ImportMemories' derived and supersede links
(``store_service.intake.imports``). Each works on a batch; a single change passes a batch of one.

- A memory that stems from another (a derivation from its sources, a successor from the memory it
  supersedes) has the other's purpose and no wider an audience (``stem_fault``), so whoever may
  read it may read what it stems from (the readability rule relies on it).
- A successor keeps the superseded memory's sources (``sources_of``), so a forget of one of them
  still reaches it.
- A superseded memory is retired (``retire``): it points to its successor, its validity ends where
  the successor's starts when everyone who may read it may read the successor (``COVERS``), else
  when it was superseded (``store_service.records.validity``), it leaves the live keyword partition
  and the vector index, and two confident claims are flagged for a person
  (``store_service.records.conflict_flags``). An invalidated one leaves the same way (``leave``).
- A memory whose successor is forgotten takes its place (``restore_predecessors``): it is
  superseded by the forgotten one's live successor, if any, else current again.
- A memory whose text changes or leaves recall drops its vectors and embedding job (``drop_vectors``);
  one whose text changes or that comes back is queued for new ones (``queue_embedding``).
"""

from __future__ import annotations

import uuid

import psycopg

from store_service.records import conflict_flags
from store_service.search import lexical_index


def stem_fault(
    older_purpose: str, older_audience: uuid.UUID | None, purpose: str, audience: uuid.UUID | None
) -> str | None:
    """What keeps a memory of ``purpose`` and ``audience`` (None: the workspace) from stemming from
    one of ``older_purpose`` and ``older_audience``: ``"purpose"`` when the purposes differ,
    ``"audience"`` when it would be wider (the older is member-only, and not for the same member),
    else None."""
    if older_purpose != purpose:
        return "purpose"
    if older_audience is not None and older_audience != audience:
        return "audience"
    return None


def sources_of(conn: psycopg.Connection, ids: list[uuid.UUID]) -> dict[uuid.UUID, list[uuid.UUID]]:
    """The ``derived_from`` sources of each of ``ids`` that has any: one statement."""
    out: dict[uuid.UUID, list[uuid.UUID]] = {}
    for memory_id, target in conn.execute(
        """SELECT memory_id, target_memory_id FROM memory_link
            WHERE link_type = 'derived_from' AND memory_id = ANY(%s)""",
        (list(ids),),
    ):
        out.setdefault(memory_id, []).append(target)
    return out


def drop_vectors(conn: psycopg.Connection, ids: list[uuid.UUID]) -> None:
    """Deletes the vectors and embedding jobs of ``ids``."""
    conn.execute("DELETE FROM memory_embedding WHERE memory_id = ANY(%s)", (list(ids),))
    conn.execute("DELETE FROM embedding_job WHERE memory_id = ANY(%s)", (list(ids),))


def queue_embedding(conn: psycopg.Connection, ids: list[uuid.UUID]) -> None:
    """Queues ``ids`` for vectors of their current revision, a job already queued taken back to the
    start (unclaimed, enqueued now)."""
    conn.execute(
        """INSERT INTO embedding_job (memory_id, memory_revision)
           SELECT id, revision FROM memory WHERE id = ANY(%s)
           ON CONFLICT (memory_id) DO UPDATE SET memory_revision = EXCLUDED.memory_revision,
               claimed_until = NULL, enqueued_at = now()""",
        (list(ids),),
    )


# SQL, true when successor ``n`` is readable by everyone who may read memory ``m``: the same purpose,
# an audience no narrower, and no derived_from source ``m`` lacks (each of m's readers reads m's
# chain). Only then does m's end follow n's start: otherwise a reader of m would learn when a claim
# it cannot read began (and, reading in time, when it was written or corrected).
COVERS = """(n.purpose = m.purpose
  AND (n.audience_member_id IS NULL OR n.audience_member_id IS NOT DISTINCT FROM m.audience_member_id)
  AND NOT EXISTS (SELECT 1 FROM memory_link l
                   WHERE l.memory_id = n.id AND l.link_type = 'derived_from'
                     AND NOT EXISTS (SELECT 1 FROM memory_link k
                                      WHERE k.memory_id = m.id AND k.link_type = 'derived_from'
                                        AND k.target_memory_id = l.target_memory_id)))"""


def _ends(retired: str) -> str:
    """SQL SET items: superseded memory ``m``'s end by successor ``n`` (``COVERS``: its start, never
    before m's own; else ``retired``, when m was superseded) and which rule set it."""
    return (
        f"end_follows_successor = {COVERS},"
        f" valid_until = greatest(CASE WHEN {COVERS} THEN n.valid_from ELSE {retired} END, m.valid_from)"
    )


def retire(
    conn: psycopg.Connection,
    pairs: list[tuple[uuid.UUID, uuid.UUID]],
    *,
    flag_conflict: bool = True,
    touch: bool = True,
) -> dict[uuid.UUID, uuid.UUID]:
    """Marks each (older, successor) pair's older memory superseded by its successor (both locked
    and judged by the caller): it leaves the live keyword partition and the vector index and, with
    ``flag_conflict``, the pair is flagged when both are confident. ``touch``: the older's
    ``updated_at`` becomes ``now()`` (an import keeps the times it was given). Returns older id ->
    flag id for the flags written."""
    olds = [old for old, _ in pairs]
    # An import keeps its times: the older left recall when its successor was written, or, when some of
    # its readers may not read the successor, when it was last changed (a supersede changes it), so no
    # time of the successor is taken from it.
    imported = f"CASE WHEN {COVERS} THEN greatest(n.created_at, m.created_at) ELSE m.updated_at END"
    retired = "now()" if touch else imported
    touched = ", updated_at = now()" if touch else ""
    conn.execute(
        f"""UPDATE memory m SET superseded_by_id = s.new, retired_at = {retired}, {_ends(retired)}{touched}
              FROM unnest(%s::uuid[], %s::uuid[]) AS s(old, new) JOIN memory n ON n.id = s.new
             WHERE m.id = s.old""",
        [olds, [new for _, new in pairs]],
    )
    leave(conn, olds)
    return conflict_flags.flag(conn, pairs) if flag_conflict else {}


def leave(conn: psycopg.Connection, ids: list[uuid.UUID]) -> None:
    """Takes retired memories (superseded or invalidated) out of current recall: the live keyword
    partition and the vector index."""
    lexical_index.mark_superseded(conn, ids)
    drop_vectors(conn, ids)


def lock_predecessors(conn: psycopg.Connection, forgotten: list[uuid.UUID]) -> None:
    """Locks what ``restore_predecessors`` of ``forgotten`` will change and read, before a Forget
    takes the keyword statistics lock: the live memories they superseded (``FOR NO KEY UPDATE``)
    and their live successors (``FOR SHARE``, so a Correct of a successor's start either finishes
    first or waits and then moves the spliced end too), in id order. Taken after, a Derive holding
    a predecessor and waiting for the statistics lock deadlocked with the Forget."""
    conn.execute(
        """SELECT 1 FROM memory WHERE superseded_by_id = ANY(%(ids)s) AND forgotten_at IS NULL
            ORDER BY id FOR NO KEY UPDATE""",
        {"ids": list(forgotten)},
    )
    conn.execute(
        """SELECT 1 FROM memory WHERE id IN (SELECT superseded_by_id FROM memory WHERE id = ANY(%(ids)s))
              AND NOT id = ANY(%(ids)s) AND forgotten_at IS NULL ORDER BY id FOR SHARE""",
        {"ids": list(forgotten)},
    )


def restore_predecessors(conn: psycopg.Connection, forgotten: list[uuid.UUID]) -> None:
    """The live memories superseded by one of ``forgotten`` (just forgotten, in this transaction)
    take its place, as if it had never been written: each is superseded by the first live memory
    down the forgotten one's chain of successors, its end set as ``retire`` sets it and its
    retirement and change times kept (a reader who cannot read the chain sees nothing move); with
    none (the chain ends forgotten, or in an invalidated memory now
    forgotten), it is current again: no end, back in the live keyword partition, queued for its
    vectors. Nothing is flagged: no new claim was made."""
    rows = conn.execute(
        """SELECT id, superseded_by_id FROM memory
            WHERE superseded_by_id = ANY(%s) AND forgotten_at IS NULL ORDER BY id FOR NO KEY UPDATE""",
        (list(forgotten),),
    ).fetchall()
    if not rows:
        return
    spliced, restored = [], []
    for old, successor in rows:
        live, seen = None, set()
        while successor is not None and successor not in seen:
            seen.add(successor)
            gone, after = conn.execute(
                "SELECT forgotten_at IS NOT NULL, superseded_by_id FROM memory WHERE id = %s", (successor,)
            ).fetchone()
            if not gone:
                live = successor
                break
            successor = after
        if live is None or live == old:
            restored.append(old)
        else:
            spliced.append((old, live))
    if spliced:
        conn.execute(
            f"""UPDATE memory m SET superseded_by_id = s.new, {_ends("m.retired_at")}
                  FROM unnest(%s::uuid[], %s::uuid[]) AS s(old, new) JOIN memory n ON n.id = s.new
                 WHERE m.id = s.old""",
            [[old for old, _ in spliced], [new for _, new in spliced]],
        )
    if restored:
        conn.execute(
            """UPDATE memory SET superseded_by_id = NULL, valid_until = NULL, retired_at = NULL,
                      end_follows_successor = false, updated_at = now()
                WHERE id = ANY(%s)""",
            (restored,),
        )
        # Its conflict flag named a memory now forgotten: gone with it, so the memory, current again,
        # may be superseded (and flagged) again (a memory is the older of one flag at most).
        conn.execute("DELETE FROM conflict_flag WHERE older_id = ANY(%s)", (restored,))
        lexical_index.mark_live(conn, restored)
        queue_embedding(conn, restored)
