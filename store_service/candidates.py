"""The candidate queries of the two retrieval arms, readability applied inside each in SQL.

Lexical arm: Okapi BM25 (Robertson and Zaragoza, "The Probabilistic Relevance Framework: BM25 and
Beyond", 2009; k1 = 1.2, b = 0.75) computed over the stored ``tsvector`` ('english' configuration):
term frequency is the lexeme's position count, document length the number of distinct lexemes
(``length(tsvector)``, cheap), document frequencies and average length counted over the rows the
caller can read for the recalled purpose,
so that hidden memories cannot shape the ranking. Any user text is accepted: it is reduced to
lexemes by ``to_tsvector`` (which never raises on text), so operators, quotes and punctuation are
just characters. With three or more query terms, terms present in 15% or more of the readable rows
are dropped (DESIGN.md, recall step 2).

Dense arm: cosine over the pgvector HNSW index with iterative index scans (pgvector 0.8+), so a
filtered search still returns the requested count; rows below the cosine floor are dropped.
"""

from __future__ import annotations

import math
import uuid

import numpy as np
import psycopg
from psycopg import sql
from recallatron.memory.v1 import memory_pb2 as m

from store_service.readability import READABLE, caller_params

BM25_K1 = 1.2
BM25_B = 0.75
COMMON_TERM_SHARE = 0.15
COMMON_TERM_MIN_TERMS = 3
MAX_QUERY_TERMS = 64
# Title positions count as much as body positions: 0, 1 and 2 gave LoCoMo lexical recall@10
# 0.619, 0.617, 0.610 (nDCG@10 0.487, 0.487, 0.484): no reason to favour either.
TITLE_WEIGHT = 1.0
TS_CONFIG = "english"
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


def query_terms(conn: psycopg.Connection, text: str) -> list[str]:
    """The distinct lexemes of user text under the 'english' configuration, in first-seen order."""
    rows = conn.execute(
        "SELECT lexeme FROM unnest(to_tsvector(%s::regconfig, %s)) ORDER BY positions[1]",
        (TS_CONFIG, text)).fetchall()
    return [r[0] for r in rows][:MAX_QUERY_TERMS]


def lexical(conn: psycopg.Connection, caller: m.Caller, purpose: str, text: str, limit: int,
            include_superseded: bool, entity_ids: list[uuid.UUID] = ()) -> list[tuple[uuid.UUID, float]]:
    """Ranked (memory id, BM25 score) pairs, best first, ties by id; empty when no term survives."""
    terms = query_terms(conn, text)
    if not terms:
        return []
    params = {**caller_params(caller), "purpose": purpose, "terms": terms, "quoted": [_quote(t) for t in terms],
              "entities": list(entity_ids)}
    scope = _scope(include_superseded, bool(entity_ids))
    # Corpus statistics and document frequencies over the readable scope. With three or more terms
    # only "is df at least 15% of n?" matters for a common term, so each count stops at that cap.
    n, avg_len = conn.execute(
        f"SELECT count(*), coalesce(avg(length(m.tsv)), 0) FROM memory m WHERE {scope}", params).fetchone()
    if n == 0:
        return []
    drop_common = len(terms) >= COMMON_TERM_MIN_TERMS
    cap = max(1, math.ceil(COMMON_TERM_SHARE * n)) if drop_common else n
    stats = conn.execute(
        f"""SELECT t.term, (SELECT count(*) FROM (SELECT 1 FROM memory m WHERE {scope}
                                                     AND m.tsv @@ t.quoted::tsquery LIMIT %(cap)s) hit)
              FROM unnest(%(terms)s::text[], %(quoted)s::text[]) AS t(term, quoted)""",
        {**params, "cap": cap}).fetchall()
    df = {term: count for term, count in stats if count > 0}
    if drop_common:
        df = {t: c for t, c in df.items() if c / n < COMMON_TERM_SHARE}
    if not df:
        return []
    # BM25 idf with the +1 inside the log (Lucene's variant) so it is never negative.
    idf = {t: math.log(1 + (n - c + 0.5) / (c + 0.5)) for t, c in df.items()}
    kept = list(idf)
    query = sql.SQL(" || ").join(sql.SQL("{}::tsquery").format(sql.Literal(_quote(t))) for t in kept)
    rows = conn.execute(
        sql.SQL(f"""
        WITH q AS (SELECT unnest(%(kept)s::text[]) AS term, unnest(%(idf)s::float8[]) AS idf),
        hits AS (
            SELECT m.id, m.tsv FROM memory m WHERE {scope} AND m.tsv @@ ({{query}})
        ),
        doc AS (SELECT h.id, length(h.tsv) AS len, h.tsv FROM hits h)
        SELECT d.id,
               sum(q.idf * (tf.tf * (%(k1)s + 1)) /
                   (tf.tf + %(k1)s * (1 - %(b)s + %(b)s * d.len / greatest(%(avg)s, 1))))::float8 AS score
          FROM doc d
          CROSS JOIN LATERAL (SELECT u.lexeme,
                                     %(title_weight)s * cardinality(array_positions(u.weights, 'A')) +
                                     cardinality(array_positions(u.weights, 'B')) AS tf
                                FROM unnest(d.tsv) u) tf
          JOIN q ON q.term = tf.lexeme
         WHERE tf.tf > 0
         GROUP BY d.id
         ORDER BY score DESC, d.id
         LIMIT %(limit)s""").format(query=query),
        {**params, "kept": kept, "idf": [idf[t] for t in kept], "k1": BM25_K1, "b": BM25_B,
         "avg": float(avg_len), "limit": limit, "title_weight": TITLE_WEIGHT}).fetchall()
    return [(r[0], r[1]) for r in rows]


def _quote(term: str) -> str:
    """A lexeme as a quoted tsquery operand (single quotes and backslashes doubled)."""
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


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
