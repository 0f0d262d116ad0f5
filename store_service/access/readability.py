"""Readability, applied in SQL: the one definition every candidate query and read path uses.

A memory is readable by a caller when it is in the caller's workspace (its database), its audience
is the workspace or that member, its purpose is among the caller's granted purposes, and it is not
forgotten (README.md, "Who sees what"). The walk adds: every memory up its ``derived_from`` chain is
readable too (``CHAIN_READABLE``).

Fragments take the named parameters ``%(member_id)s`` (uuid) and ``%(purposes)s`` (text[]).
"""

from __future__ import annotations

from recallatron.memory.v1 import memory_pb2

from store_service.access.provenance import IDS, up
from store_service.vocabulary import PURPOSES

# Audience and purpose of a memory aliased ``m`` admit the caller (whether or not it is forgotten).
IN_SCOPE = """((m.audience_member_id IS NULL OR m.audience_member_id = %(member_id)s)
  AND m.purpose = ANY(%(purposes)s))"""

# Own-row readability of a memory aliased ``m``.
READABLE = f"(m.forgotten_at IS NULL AND {IN_SCOPE})"


def chain_readable(seeds: str = IDS) -> str:
    """A query of the seeds (``provenance._walk``: by default the ids of ``%(ids)s``, uuid[]) whose
    own row and whole derived_from chain are readable, one column ``start_id``."""
    return f"""{up(seeds)}
SELECT w.start_id
  FROM walk w LEFT JOIN memory m ON m.id = w.id
 GROUP BY w.start_id
HAVING bool_and(m.id IS NOT NULL AND {READABLE})"""


# Ids (from ``%(ids)s``, uuid[]) whose own row and whole derived_from chain are readable.
CHAIN_READABLE = chain_readable()


def caller_params(caller: memory_pb2.Caller) -> dict:
    """The SQL parameters of a caller: member id and granted purposes as stored strings."""
    return {"member_id": caller.member_id, "purposes": [PURPOSES[p] for p in caller.granted_purposes if p in PURPOSES]}
