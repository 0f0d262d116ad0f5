"""The candidate queries of the two retrieval arms, readability applied inside each in SQL.

Lexical arm: Okapi BM25 (Robertson and Zaragoza, "The Probabilistic Relevance Framework: BM25 and
Beyond", 2009; k1 = 1.2, b = 0.75) over the keyword index of ``store_service.lexical_index``:
lexemes from ``store_service.analysis`` (the same function at index and query time), term
frequency the lexeme's occurrences, document length the number of distinct lexemes. Document
frequencies, row count and average length are the maintained statistics summed over the
partitions the caller can read for the recalled purpose (its own member partition and the
workspace's, superseded ones only for history), so hidden memories cannot shape the ranking and
nothing is recounted per query. Any user text is accepted. With three or more query terms, terms
present in 15% or more of the readable rows are dropped (DESIGN.md, recall step 2), except that
the rarest term is always kept, so a question never loses every term.

Top-k without scoring every matching row: the threshold technique of Fagin, Lotem and Naor
("Optimal aggregation algorithms for middleware", 2003; NRA with a final random-access step). Each
query term's postings are read per readable partition in ascending ``r = len / tf`` (an index
order), in chunks that double. A posting's BM25 contribution is
``idf (k1 + 1) / (1 + k1 (1 - b) / tf + k1 b r / avg)``; ``tf`` is at most the partition's
maintained ``max_tf`` and ``r`` at least the last one read, so after each chunk the term's unread
postings contribute at most ``idf (k1 + 1) / (1 + k1 (1 - b) / max_tf + k1 b r_last / avg)``.
Reading stops when the limit-th best score already seen exceeds the sum of those bounds (no unseen
memory can enter) and few seen memories are still undecided; those get their missing term
frequencies by primary key, and the exact top k is returned: the same ranking a full BM25 scoring
gives (ties by id).

Dense arm: cosine over the pgvector HNSW index with iterative index scans (pgvector 0.8+), so a
filtered search still returns the requested count; rows below the cosine floor are dropped.
"""

from __future__ import annotations

import heapq
import math
import uuid

import numpy as np
import psycopg
from psycopg import sql
from recallatron.memory.v1 import memory_pb2 as m

from store_service import analysis
from store_service.lexical_index import WORKSPACE
from store_service.readability import READABLE, caller_params

BM25_K1 = 1.2
BM25_B = 0.75
COMMON_TERM_SHARE = 0.15
COMMON_TERM_MIN_TERMS = 3
MAX_QUERY_TERMS = analysis.MAX_QUERY_TERMS
# Postings read per partition stream in the first round; each further round doubles it.
FIRST_CHUNK = 256
# Up to this many postings of the kept terms, one aggregate statement scores them all (measured
# crossover, see docs/retrieval.md); beyond it, the threshold reading below.
EXHAUSTIVE_MAX_POSTINGS = 40_000
# Scores equal to this many decimals are ties, broken by id: sums of the same terms in another
# order differ in the last bits, and identical texts must rank the same way on every path.
TIE_DIGITS = 9
# Undecided memories completed by primary key at most (times the limit); more means read on.
MAX_OPEN_PER_RESULT = 4
DIMENSIONS = 384


def _scope(include_superseded: bool, entity_filter: bool) -> str:
    """Candidate rows: readable, of the recalled purpose, not superseded unless history is asked,
    and, with an entity filter, about one of ``%(entities)s``."""
    clause = f"{READABLE} AND m.purpose = %(purpose)s"
    if not include_superseded:
        clause += " AND m.superseded_by_id IS NULL"
    if entity_filter:
        clause += (" AND EXISTS (SELECT 1 FROM memory_link l WHERE l.memory_id = m.id AND l.link_type = 'about'"
                   " AND l.target_entity_id = ANY(%(entities)s))")
    return clause


def query_terms(text: str) -> list[str]:
    """The distinct lexemes of user text, in first-seen order (``analysis.query_terms``)."""
    return analysis.query_terms(text)


def _w(tf: float, length: float, avg: float) -> float:
    """BM25's saturated term frequency: ``tf (k1 + 1) / (tf + k1 (1 - b + b len / avg))``."""
    return tf * (BM25_K1 + 1) / (tf + BM25_K1 * (1 - BM25_B + BM25_B * length / avg))


def _w_bound(max_tf: int, len_per_tf: float, avg: float) -> float:
    """The most ``_w`` can be for a posting with ``tf <= max_tf`` and ``len / tf >= len_per_tf``."""
    return (BM25_K1 + 1) / (1 + BM25_K1 * (1 - BM25_B) / max_tf + BM25_K1 * BM25_B * len_per_tf / avg)


def kept_terms(terms: list[str], df: dict[str, int], n: int) -> list[str]:
    """The query terms BM25 scores: those present at all; from three terms up, those in fewer than
    15% of the ``n`` readable rows, plus the rarest term (first asked among equals) always."""
    present = [t for t in terms if df.get(t, 0) > 0]
    if len(terms) < COMMON_TERM_MIN_TERMS or not present:
        return present
    rarest = min(present, key=lambda t: df[t])
    return [t for t in present if t == rarest or df[t] / n < COMMON_TERM_SHARE]


def lexical(conn: psycopg.Connection, caller: m.Caller, purpose: str, text: str, limit: int,
            include_superseded: bool, entity_ids: list[uuid.UUID] = ()) -> list[tuple[uuid.UUID, float]]:
    """Ranked (memory id, BM25 score) pairs, best first, ties by id; empty when no term survives.

    ``purpose`` is a stored purpose string; one the caller was not granted reads nothing.
    """
    terms = query_terms(text)
    params = caller_params(caller)
    if not terms or purpose not in params["purposes"]:
        return []
    audiences = [WORKSPACE, uuid.UUID(caller.member_id)]
    superseded = [False, True] if include_superseded else [False]
    if entity_ids:
        return _lexical_filtered(conn, {**params, "purpose": purpose, "entities": list(entity_ids)}, terms,
                                 limit, include_superseded)
    n, total = conn.execute(
        """SELECT coalesce(sum(doc_count), 0)::bigint, coalesce(sum(total_len), 0)::bigint FROM lexical_partition
            WHERE purpose = %s AND audience = ANY(%s) AND superseded = ANY(%s)""",
        (purpose, audiences, superseded)).fetchone()
    if n == 0:
        return []
    stats = conn.execute(
        """SELECT lexeme, audience, superseded, df, max_tf FROM lexical_df
            WHERE lexeme = ANY(%s) AND purpose = %s AND audience = ANY(%s) AND superseded = ANY(%s) AND df > 0""",
        (terms, purpose, audiences, superseded)).fetchall()
    df: dict[str, int] = {}
    for lexeme, _, _, count, _ in stats:
        df[lexeme] = df.get(lexeme, 0) + count
    kept = kept_terms(terms, df, n)
    if not kept:
        return []
    avg = max(total / n, 1.0)
    idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in kept}
    if sum(df[t] for t in kept) <= EXHAUSTIVE_MAX_POSTINGS:
        return _score_all(conn, purpose, audiences, superseded, idf, avg, limit)
    streams = [_Stream(lexeme, audience, sup, max_tf) for lexeme, audience, sup, _, max_tf in stats if lexeme in idf]
    return _threshold_top_k(conn, purpose, streams, idf, avg, limit)


def _score_all(conn: psycopg.Connection, purpose: str, audiences: list[uuid.UUID], superseded: list[bool],
               idf: dict[str, float], avg: float, limit: int) -> list[tuple[uuid.UUID, float]]:
    """Exact BM25 top ``limit`` scoring every readable posting of the kept terms in one statement
    (cheaper than reading in rounds when the terms are rare enough)."""
    rows = conn.execute(
        """SELECT p.memory_id,
                  sum(q.idf * p.tf * (%(k1)s + 1)
                      / (p.tf + %(k1)s * (1 - %(b)s + %(b)s * p.doc_len / %(avg)s)))::float8 AS score
             FROM unnest(%(terms)s::text[], %(idf)s::float8[]) AS q(lexeme, idf)
             JOIN lexical_posting p ON p.lexeme = q.lexeme AND p.purpose = %(purpose)s
                                   AND p.audience = ANY(%(audiences)s) AND p.superseded = ANY(%(superseded)s)
            GROUP BY p.memory_id
            ORDER BY round(sum(q.idf * p.tf * (%(k1)s + 1)
                      / (p.tf + %(k1)s * (1 - %(b)s + %(b)s * p.doc_len / %(avg)s)))::numeric, %(digits)s) DESC,
                     p.memory_id
            LIMIT %(limit)s""",
        {"terms": list(idf), "idf": list(idf.values()), "k1": BM25_K1, "b": BM25_B, "avg": avg,
         "purpose": purpose, "audiences": audiences, "superseded": superseded, "limit": limit, "digits": TIE_DIGITS}).fetchall()
    return [(r[0], r[1]) for r in rows]


class _Stream:
    """One term's postings in one partition, read in (length, id) order."""

    __slots__ = ("after_id", "after_key", "audience", "done", "lexeme", "max_tf", "superseded")

    def __init__(self, lexeme: str, audience: uuid.UUID, superseded: bool, max_tf: int) -> None:
        self.lexeme, self.audience, self.superseded, self.max_tf = lexeme, audience, superseded, max(max_tf, 1)
        self.after_key, self.after_id, self.done = -1.0, WORKSPACE, False


def _threshold_top_k(conn: psycopg.Connection, purpose: str, streams: list[_Stream], idf: dict[str, float],
                     avg: float, limit: int) -> list[tuple[uuid.UUID, float]]:
    """Exact BM25 top ``limit`` by sorted access with bounds, then random access (module docstring)."""
    terms = list(idf)
    seen: dict[uuid.UUID, list] = {}  # id -> [known score, terms seen (set), length]
    chunk = FIRST_CHUNK
    while True:
        live = [s for s in streams if not s.done]
        rows = conn.execute(
            """SELECT s.i, p.memory_id, p.tf, p.doc_len, p.len_per_tf
                 FROM unnest(%s::text[], %s::uuid[], %s::bool[], %s::float8[], %s::uuid[]) WITH ORDINALITY
                      AS s(lexeme, audience, superseded, after_key, after_id, i)
                CROSS JOIN LATERAL (
                      SELECT p.memory_id, p.tf, p.doc_len, p.len_per_tf FROM lexical_posting p
                       WHERE p.lexeme = s.lexeme AND p.purpose = %s AND p.audience = s.audience
                         AND p.superseded = s.superseded
                         AND (p.len_per_tf, p.memory_id) > (s.after_key, s.after_id)
                       ORDER BY p.len_per_tf, p.memory_id LIMIT %s) p""",
            ([s.lexeme for s in live], [s.audience for s in live], [s.superseded for s in live],
             [s.after_key for s in live], [s.after_id for s in live], purpose, chunk)).fetchall()
        fetched = [0] * len(live)
        for i, memory_id, tf, length, key in rows:
            stream = live[i - 1]
            fetched[i - 1] += 1
            stream.after_key, stream.after_id = key, memory_id
            entry = seen.get(memory_id)
            if entry is None:
                entry = seen[memory_id] = [0.0, set(), length]
            entry[0] += idf[stream.lexeme] * _w(tf, length, avg)
            entry[1].add(stream.lexeme)
        for stream, count in zip(live, fetched):
            stream.done = count < chunk
        bound = {t: 0.0 for t in terms}  # the most an unread posting of each term can still add
        for s in streams:
            if not s.done:
                bound[s.lexeme] = max(bound[s.lexeme], idf[s.lexeme] * _w_bound(s.max_tf, s.after_key, avg))
        threshold = sum(bound.values())
        if threshold == 0.0:  # every posting read: the known scores are exact
            return _best(((mid, e[0]) for mid, e in seen.items()), limit)
        if len(seen) >= limit:
            kth = heapq.nlargest(limit, (e[0] for e in seen.values()))[-1]
            if kth > threshold:
                open_ = {mid: e for mid, e in seen.items()
                         if e[0] + sum(bound[t] for t in terms if t not in e[1]) >= kth}
                undecided = sum(1 for e in open_.values() if len(e[1]) < len(terms))
                if undecided <= MAX_OPEN_PER_RESULT * limit:
                    _complete(conn, open_, terms, idf, avg)
                    return _best(((mid, e[0]) for mid, e in open_.items()), limit)
        chunk *= 2


def _complete(conn: psycopg.Connection, entries: dict[uuid.UUID, list], terms: list[str], idf: dict[str, float],
              avg: float) -> None:
    """Adds the contributions not yet read to ``entries`` (by primary key), making their scores exact."""
    missing = [mid for mid, e in entries.items() if len(e[1]) < len(terms)]
    if not missing:
        return
    for memory_id, lexeme, tf in conn.execute(
            "SELECT memory_id, lexeme, tf FROM lexical_posting WHERE memory_id = ANY(%s) AND lexeme = ANY(%s)",
            (missing, terms)):
        entry = entries[memory_id]
        if lexeme not in entry[1]:
            entry[0] += idf[lexeme] * _w(tf, entry[2], avg)
            entry[1].add(lexeme)


def _best(scored, limit: int) -> list[tuple[uuid.UUID, float]]:
    """The ``limit`` best (id, score) pairs, score (to ``TIE_DIGITS`` decimals) descending, then id."""
    return heapq.nsmallest(limit, scored, key=lambda r: (-round(r[1], TIE_DIGITS), r[0]))


def _lexical_filtered(conn: psycopg.Connection, params: dict, terms: list[str], limit: int,
                      include_superseded: bool) -> list[tuple[uuid.UUID, float]]:
    """BM25 over the rows about the given entities: a small set, so its statistics are counted
    (exactly as the scope defines them) and every matching row is scored."""
    scope = _scope(include_superseded, True)
    docs = dict(conn.execute(
        f"""SELECT d.memory_id, d.doc_len FROM memory m JOIN lexical_document d ON d.memory_id = m.id
             WHERE {scope}""", params).fetchall())
    if not docs:
        return []
    postings = conn.execute(
        "SELECT memory_id, lexeme, tf FROM lexical_posting WHERE memory_id = ANY(%s) AND lexeme = ANY(%s)",
        (list(docs), terms)).fetchall()
    df: dict[str, int] = {}
    for _, lexeme, _ in postings:
        df[lexeme] = df.get(lexeme, 0) + 1
    n = len(docs)
    kept = kept_terms(terms, df, n)
    if not kept:
        return []
    avg = max(sum(docs.values()) / n, 1.0)
    idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in kept}
    scores: dict[uuid.UUID, float] = {}
    for memory_id, lexeme, tf in postings:
        if lexeme in idf:
            scores[memory_id] = scores.get(memory_id, 0.0) + idf[lexeme] * _w(tf, docs[memory_id], avg)
    return _best(scores.items(), limit)


def dense(conn: psycopg.Connection, caller: m.Caller, purpose: str, vector: np.ndarray, input_version: str,
          floor: float, limit: int, entity_ids: list[uuid.UUID] = ()) -> tuple[list[tuple[uuid.UUID, float]], bool]:
    """Ranked (memory id, cosine) pairs at or above ``floor``, best first, and whether the stamp is current.

    Only vectors of the memory's current revision and of ``input_version`` are searched: vectors
    from two embedding spaces are never mixed. The second value is False when the workspace holds
    vectors but none with this stamp (the caller then reports the dense arm unavailable).
    """
    params = {**caller_params(caller), "purpose": purpose, "q": vector, "stamp": input_version,
              "limit": limit, "max_distance": 1.0 - floor, "entities": list(entity_ids)}
    with conn.transaction():
        conn.execute("SET LOCAL hnsw.iterative_scan = 'relaxed_order'")
        conn.execute(sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(max(40, min(limit, 1000)))))
        rows = conn.execute(
            f"""WITH nn AS MATERIALIZED (
                    SELECT e.memory_id, e.embedding <=> %(q)s AS distance
                      FROM memory_embedding e JOIN memory m ON m.id = e.memory_id
                     WHERE {_scope(False, bool(entity_ids))} AND e.input_version = %(stamp)s AND e.memory_revision = m.revision
                     ORDER BY e.embedding <=> %(q)s
                     LIMIT %(limit)s)
                SELECT memory_id, 1 - distance FROM nn WHERE distance <= %(max_distance)s
                 ORDER BY distance, memory_id""", params).fetchall()
        current = bool(rows) or conn.execute(
            """SELECT NOT EXISTS (SELECT 1 FROM memory_embedding)
                   OR EXISTS (SELECT 1 FROM memory_embedding WHERE input_version = %s)""",
            (input_version,)).fetchone()[0]
    return [(r[0], float(r[1])) for r in rows], current
