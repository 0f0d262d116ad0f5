"""Conflict flags, written where a supersession is made (docs/curation.md, "Conflict flags").

A supersession is flagged when it is a disagreement, not a routine edit: when the newer memory was
written by another member than the older one, and both are held with confidence 0.8 or more (the old
store's threshold). A member replacing their own claim (an ordinary Supersede, or a duplicate
decision between two memories of one author) is an edit and opens nothing; one member's confident
claim replaced by another's is two people disagreeing. Both stay (the older points to the newer
through ``superseded_by_id``) and the pair is flagged for a person to acknowledge or undo
(store_service/curation/review.py lists and resolves flags). ``flag`` runs in the transaction that sets
``superseded_by_id``, on every path that sets it: Supersede and supersede by an existing memory
(store_service/records/lifecycle.py, which DecideDuplicateProposal uses) and ImportMemories' supersede
links (store_service/intake/imports.py), so the rule lives here alone. An undo's own supersession writes
no flag: it is a person's answer to the flag, not a new disagreement.
"""

from __future__ import annotations

import uuid

import psycopg

# The confidence both memories must reach for a supersession to be flagged (issue 9 and the old
# store's rule; docs/curation.md).
CONFLICT_CONFIDENCE = 0.8


def of_pair(conn: psycopg.Connection, older: str, newer: str) -> str:
    """The id of the flag of an (older, newer) supersession, "" when it opened none."""
    row = conn.execute(
        "SELECT id FROM conflict_flag WHERE older_id = %s::uuid AND newer_id = %s::uuid", (older, newer)
    ).fetchone()
    return str(row[0]) if row else ""


def flag(conn: psycopg.Connection, pairs: list[tuple[uuid.UUID, uuid.UUID]]) -> dict[uuid.UUID, uuid.UUID]:
    """Writes one open flag per (older, newer) pair whose memories have different authors and both
    confidence ``CONFLICT_CONFIDENCE`` or more, as the rows stand in this transaction; returns older
    id -> flag id for the flags written (one statement however many pairs)."""
    if not pairs:
        return {}
    rows = conn.execute(
        """INSERT INTO conflict_flag (id, older_id, newer_id)
           SELECT gen_random_uuid(), o.id, n.id
             FROM unnest(%(olds)s::uuid[], %(news)s::uuid[]) AS p(old, new)
             JOIN memory o ON o.id = p.old JOIN memory n ON n.id = p.new
            WHERE o.confidence >= %(floor)s AND n.confidence >= %(floor)s AND o.created_by <> n.created_by
        RETURNING older_id, id""",
        {"olds": [o for o, _ in pairs], "news": [n for _, n in pairs], "floor": CONFLICT_CONFIDENCE},
    ).fetchall()
    return {older: fid for older, fid in rows}
