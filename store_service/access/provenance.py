"""The derived_from walk over ``memory_link``, written once (README.md, "Who sees what").

A derived memory links to each of its sources (``memory_id`` -> ``target_memory_id``, type
``derived_from``). Readability walks up those links (a memory is readable only when its whole
chain is), derive and supersede lock everything up the chain, and forget walks down them (a forget
reaches everything derived from the memory, transitively).
"""

from __future__ import annotations

# The default seeds of a walk: the ids of the parameter ``%(ids)s`` (uuid[]).
IDS = "unnest(%(ids)s::uuid[])"


def _walk(follow: str, reach: str, seeds: str = IDS) -> str:
    """The recursive CTE ``walk(start_id, id)``: each seed (a row of ``seeds``, a set-returning
    expression or a subquery of one uuid column) paired with itself and with every memory reachable
    from it through derived_from links, joining ``follow`` to the current memory and stepping to
    ``reach``. UNION drops repeated pairs, so it ends on any graph."""
    return f"""WITH RECURSIVE walk(start_id, id) AS (
    SELECT s.i, s.i FROM {seeds} AS s(i)
  UNION
    SELECT w.start_id, {reach}
      FROM walk w JOIN memory_link l ON {follow} = w.id AND l.link_type = 'derived_from'
)"""


def up(seeds: str = IDS) -> str:
    """Up the chain of each of ``seeds`` (see ``_walk``): the seed, its sources, their sources, and so on."""
    return _walk(follow="l.memory_id", reach="l.target_memory_id", seeds=seeds)


UP = up()
# Down the chain: each seed and everything derived from it, transitively.
DOWN = _walk(follow="l.target_memory_id", reach="l.memory_id")

# Ids of ``%(ids)s`` and everything up their derived_from chains.
ANCESTORS = f"{UP} SELECT id FROM walk"
