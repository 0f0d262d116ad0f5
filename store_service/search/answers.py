"""LexicalCandidates and DenseCandidates: a request checked, its arm's candidate query run
(``store_service.search.candidates``), and the ranked rows turned into the response's candidates.

Each call is two steps, so a bad request is refused before a connection is taken: ``lexical`` and
``dense`` check the request and return the answer to run on the caller's workspace connection.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import psycopg
from recallatron.memory.v1 import memory_pb2 as m
from recallatron.store.v1 import store_pb2 as s

from servicekit.caller import check_purpose_granted
from servicekit.errors import InvalidArgument
from servicekit.limits import DIMENSIONS, MAX_CANDIDATE_LIMIT, MAX_QUERY_CHARS, MAX_TOP_K
from store_service.access import expiry
from store_service.database import read_snapshot
from store_service.records import entities, entity_groups, memories, validity, windows
from store_service.search import candidates


def _limit(value: int) -> int:
    if not 1 <= value <= MAX_CANDIDATE_LIMIT:
        raise InvalidArgument(f"limit must be 1..{MAX_CANDIDATE_LIMIT}", field="limit")
    return value


def _memories_top(value: int) -> int:
    """A request's ``memories_top``: INVALID_ARGUMENT outside 0..MAX_TOP_K."""
    if not 0 <= value <= MAX_TOP_K:
        raise InvalidArgument(f"memories_top must be 0..{MAX_TOP_K}", field="memories_top")
    return value


# The most memories an answer carries past memories_top for wanted_memory_ids: with memories_top at
# most MAX_TOP_K, an answer holds at most 400 memories (about 28 MB at their largest, under the 64 MiB
# internal message limit). A recall wants a few; the first in the arm's order are the likeliest to
# reach the fused head.
MAX_WANTED_CARRIED = MAX_TOP_K


@dataclass(frozen=True)
class _Carry:
    """Which memories a candidate answer carries besides its first readable rows: none the caller
    holds already, and those of the rows it wants (ids as strings: one that is no row matches none)."""

    held: frozenset[str]
    wanted: frozenset[str]


def _carry(request) -> _Carry:
    """A request's ``held_memory_ids`` and ``wanted_memory_ids``: INVALID_ARGUMENT past
    MAX_CANDIDATE_LIMIT ids each."""
    for name in ("held_memory_ids", "wanted_memory_ids"):
        if len(getattr(request, name)) > MAX_CANDIDATE_LIMIT:
            raise InvalidArgument(f"{name} holds at most {MAX_CANDIDATE_LIMIT} ids", field=name)
    return _Carry(frozenset(request.held_memory_ids), frozenset(request.wanted_memory_ids))


def _to_carry(shown: list, memories_top: int, carry: _Carry) -> list:
    """Of the readable rows ``shown`` (in the answer's order), those whose memory the answer carries:
    the first ``memories_top``, and the wanted ones after them, at most MAX_WANTED_CARRIED (so an
    answer holds at most MAX_TOP_K + MAX_WANTED_CARRIED memories, whatever the request names, and
    stays well within the internal message size); none the caller holds."""
    wanted = [mid for mid in shown[memories_top:] if str(mid) in carry.wanted][:MAX_WANTED_CARRIED]
    return [mid for mid in shown[:memories_top] + wanted if str(mid) not in carry.held]


def _with_verdicts(
    conn: psycopg.Connection, caller: m.Caller, rows, memories_top: int, window: windows.Window, carry: _Carry
) -> list[s.Candidate]:
    """Candidate messages of ranked (id, score[, identifier matches, all terms]) rows, each with the
    walk's chain verdict (one query over the rows already chosen, so the verdicts never change
    which rows an arm returns), and the memories (``memories.load_readable``, same transaction) of
    the first ``memories_top`` rows whose chain is readable and of the readable rows the request
    wants, but none the caller holds already (``carry``), as they stood at the window's ``known_at``
    when it has one (``validity.then``)."""
    readable = memories.readable_ids(conn, caller, [mid for mid, *_ in rows])
    loaded = memories.load_readable(
        conn, caller, _to_carry([mid for mid, *_ in rows if mid in readable], memories_top, carry)
    )
    validity.then(conn, list(loaded.values()), window.known_at)
    out = []
    for mid, score, *precedence in rows:
        identifier_matches, all_terms = precedence or (0, False)
        out.append(
            s.Candidate(
                memory_id=str(mid),
                score=score,
                chain_readable=mid in readable,
                identifier_matches=identifier_matches,
                all_terms=all_terms,
                memory=loaded.get(mid),
            )
        )
    return out


def lexical(
    request: s.LexicalCandidatesRequest,
) -> Callable[[psycopg.Connection], s.LexicalCandidatesResponse]:
    """The keyword arm's answer to ``request``, to run on the caller's connection. INVALID_ARGUMENT
    for a bad limit, a query over ``MAX_QUERY_CHARS`` characters, a bad gate, window or ``memories_top``
    or a bad entity filter (all now); PERMISSION_DENIED for a purpose not granted."""
    purpose = check_purpose_granted(request.caller, request.purpose)
    limit = _limit(request.limit)
    if len(request.query) > MAX_QUERY_CHARS:
        raise InvalidArgument(f"query is longer than {MAX_QUERY_CHARS} characters", field="query")
    expiry_days = expiry.check_days(request.expiry_days)
    window = windows.of(request)
    memories_top = _memories_top(request.memories_top)
    carry = _carry(request)
    entity_ids = entities.parse_filter(request.entity_ids)

    def answer(conn: psycopg.Connection) -> s.LexicalCandidatesResponse:
        query = request.query.replace("\x00", " ")
        if not candidates.has_terms(query):
            return s.LexicalCandidatesResponse()  # nothing to read: no statement, no transaction
        with read_snapshot(conn):  # the rows, their verdicts and memories as of one state
            rows = candidates.lexical_with_matches(
                conn,
                request.caller,
                purpose,
                query,
                limit,
                request.include_superseded,
                entity_groups.members_of(conn, request.caller, entity_ids),
                expiry_days=expiry_days,
                window=window,
            )
            return s.LexicalCandidatesResponse(
                candidates=_with_verdicts(conn, request.caller, rows, memories_top, window, carry)
            )

    return answer


def dense(request: s.DenseCandidatesRequest) -> Callable[[psycopg.Connection], s.DenseCandidatesResponse]:
    """The meaning arm's answer to ``request``, to run on the caller's connection. INVALID_ARGUMENT
    for a bad limit, a vector not of ``DIMENSIONS`` finite numbers, a floor outside 0..1, a bad gate,
    window, ``memories_top`` or entity filter (all now); PERMISSION_DENIED for a
    purpose not granted."""
    purpose = check_purpose_granted(request.caller, request.purpose)
    limit = _limit(request.limit)
    if len(request.vector) != DIMENSIONS:
        raise InvalidArgument(f"vector must have {DIMENSIONS} dimensions", field="vector")
    vector = np.asarray(request.vector, dtype=np.float32)
    if not np.all(np.isfinite(vector)):
        raise InvalidArgument("vector must be finite", field="vector")
    if not 0.0 <= request.floor <= 1.0:
        raise InvalidArgument("floor must be between 0 and 1", field="floor")
    expiry_days = expiry.check_days(request.expiry_days)
    window = windows.of(request)
    memories_top = _memories_top(request.memories_top)
    carry = _carry(request)
    entity_ids = entities.parse_filter(request.entity_ids)

    def answer(conn: psycopg.Connection) -> s.DenseCandidatesResponse:
        with read_snapshot(conn):  # the rows, their verdicts and memories as of one state
            rows, current = candidates.dense(
                conn,
                request.caller,
                purpose,
                vector,
                request.input_version,
                request.floor,
                limit,
                entity_groups.members_of(conn, request.caller, entity_ids),
                expiry_days=expiry_days,
                window=window,
            )
            return s.DenseCandidatesResponse(
                candidates=_with_verdicts(conn, request.caller, rows, memories_top, window, carry),
                stamp_current=current,
            )

    return answer
