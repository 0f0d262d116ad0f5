"""The rules a memory's life cycle shares between its writers: Derive, Correct, Supersede and
Forget (``store_service.records.lifecycle``) and ImportMemories' derived and supersede links
(``store_service.intake.imports``). Each works on a batch; a single change passes a batch of one.

- A memory that stems from another (a derivation from its sources, a successor from the memory it
  supersedes) has the other's purpose and no wider an audience (``stem_fault``), so whoever may
  read it may read what it stems from (the readability rule relies on it).
- A successor keeps the superseded memory's sources (``sources_of``), so a forget of one of them
  still reaches it.
- A superseded memory is retired (``retire``): it points to its successor, its validity ends where
  the successor's starts (``store_service.records.validity``), it leaves the live keyword partition
  and the vector index, and two confident claims are flagged for a person
  (``store_service.records.conflict_flags``). An invalidated one leaves the same way (``leave``).
- A memory whose text changes or leaves recall drops its vectors and embedding job (``drop_vectors``).
"""

from __future__ import annotations

import uuid

import psycopg

from store_service.database import named
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
    for link in named(conn).execute(
        """SELECT memory_id, target_memory_id FROM memory_link
            WHERE link_type = 'derived_from' AND memory_id = ANY(%s)""",
        (list(ids),),
    ):
        out.setdefault(link.memory_id, []).append(link.target_memory_id)
    return out


def drop_vectors(conn: psycopg.Connection, ids: list[uuid.UUID]) -> None:
    """Deletes the vectors and embedding jobs of ``ids``."""
    conn.execute("DELETE FROM memory_embedding WHERE memory_id = ANY(%s)", (list(ids),))
    conn.execute("DELETE FROM embedding_job WHERE memory_id = ANY(%s)", (list(ids),))


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
    # An import keeps its times: the older left recall when its successor was written.
    touched = (
        ", updated_at = now(), retired_at = now()" if touch else ", retired_at = greatest(n.created_at, m.created_at)"
    )
    conn.execute(
        f"""UPDATE memory m SET superseded_by_id = s.new, valid_until = greatest(n.valid_from, m.valid_from){touched}
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
