"""Readability, applied in SQL: the one definition every candidate query and read path uses.

A memory is readable by a caller when it is in the caller's workspace (its database), its audience
is the workspace or that member, its purpose is among the caller's granted purposes, and it is not
forgotten (README.md, "Who sees what"). The walk adds: every memory up its ``derived_from`` chain is
readable too (``CHAIN_READABLE``).

Fragments take the named parameters ``%(member_id)s`` (uuid) and ``%(purposes)s`` (text[]).
"""

from __future__ import annotations

from recallatron.memory.v1 import memory_pb2

from store_service.vocabulary import PURPOSES

# Own-row readability of a memory aliased ``m``.
READABLE = """(m.forgotten_at IS NULL
  AND (m.audience_member_id IS NULL OR m.audience_member_id = %(member_id)s)
  AND m.purpose = ANY(%(purposes)s))"""

# Ids (from ``%(ids)s``, uuid[]) whose own row and whole derived_from chain are readable.
CHAIN_READABLE = f"""
WITH RECURSIVE chain(start_id, id) AS (
    SELECT i, i FROM unnest(%(ids)s::uuid[]) AS i
  UNION
    SELECT c.start_id, l.target_memory_id
      FROM chain c JOIN memory_link l ON l.memory_id = c.id AND l.link_type = 'derived_from'
)
SELECT c.start_id
  FROM chain c LEFT JOIN memory m ON m.id = c.id
 GROUP BY c.start_id
HAVING bool_and(m.id IS NOT NULL AND {READABLE})"""


def caller_params(caller: memory_pb2.Caller) -> dict:
    """The SQL parameters of a caller: member id and granted purposes as stored strings."""
    return {"member_id": caller.member_id,
            "purposes": [PURPOSES[p] for p in caller.granted_purposes if p in PURPOSES]}
