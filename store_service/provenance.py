"""The derived_from walk over ``memory_link``, written once (README.md, "Who sees what").

A derived memory links to each of its sources (``memory_id`` -> ``target_memory_id``, type
``derived_from``). Readability walks up those links (a memory is readable only when its whole
chain is), derive and supersede lock everything up the chain, and forget walks down them (a forget
reaches everything derived from the memory, transitively).
"""

from __future__ import annotations


def _walk(follow: str, reach: str) -> str:
    """The recursive CTE ``walk(start_id, id)``: each seed of ``%(ids)s`` (uuid[]) paired with itself
    and with every memory reachable from it through derived_from links, joining ``follow`` to the
    current memory and stepping to ``reach``. UNION drops repeated pairs, so it ends on any graph."""
    return f"""WITH RECURSIVE walk(start_id, id) AS (
    SELECT i, i FROM unnest(%(ids)s::uuid[]) AS i
  UNION
    SELECT w.start_id, {reach}
      FROM walk w JOIN memory_link l ON {follow} = w.id AND l.link_type = 'derived_from'
)"""


# Up the chain: each seed, its sources, their sources, and so on.
UP = _walk(follow="l.memory_id", reach="l.target_memory_id")
# Down the chain: each seed and everything derived from it, transitively.
DOWN = _walk(follow="l.target_memory_id", reach="l.memory_id")

# Ids of ``%(ids)s`` and everything up their derived_from chains.
ANCESTORS = f"{UP} SELECT id FROM walk"
