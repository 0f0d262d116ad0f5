"""The candidate queries of the two retrieval arms, readability applied inside each in SQL.

Lexical arm: Okapi BM25 (``store_service.search.bm25``) over the keyword index of
``store_service.search.lexical_index``: lexemes from ``store_service.search.analysis`` (the same
function at index and query time), term frequency the lexeme's occurrences, document length the
number of distinct lexemes. Document
frequencies, row count and average length are the maintained statistics summed over the
partitions the caller can read for the recalled purpose (its own member partition and the
workspace's, superseded ones only for history), so hidden memories cannot shape the ranking and
nothing is recounted per query. Any user text is accepted. With three or more query terms, terms
present in 15% or more of the readable rows are dropped (README.md, "How recall works", step 2), except that
the rarest term is always kept, so a question never loses every term (``bm25.kept_terms``).

Top k: every readable posting of the kept terms is scored, exactly, from the packed posting
blocks of ``store_service.search.lexical_index`` (``_BlockScores``): one statement reads the blocks of
the kept terms in the readable partitions (a few thousand rows of up to 112 postings at 1,000,000
memories), NumPy sums the BM25 contributions per document number, and one primary-key statement
maps the best numbers to memory ids. The 15% rule already drops the most common terms. Scores
equal to ``bm25.TIE_DIGITS`` decimals tie, and ties go by id. Early-stopping readings (the threshold
rounds of Fagin, Lotem and Naor, NRA, 2003; MaxScore, Turtle and Flood, 1995) were built and
measured in earlier sessions and dropped: at a limit of 100 candidates they read nearly every
posting anyway (docs/retrieval.md, "Keyword top k: what was measured"). Packing cuts the cost of
each posting read instead (docs/retrieval.md, "Packed posting blocks").

Dense arm: cosine over the pgvector HNSW index with iterative index scans (pgvector 0.8+), so a
filtered search still returns the requested count; rows below the cosine floor are dropped.

The expiry gate (``store_service.access.expiry``), when a request carries one, leaves out the rows it
hides, in both arms and every mode, history recall included; a time window
(``store_service.records.windows``) leaves out the rows said outside it, likewise. The dense arm
filters them in its candidate statement, beside readability (the statement already joins the
memory row). The keyword arm reads packed postings alone: testing ``updated_at`` or ``said_at``
there would need the memory row of every scored memory (20,000 and more for common questions at
100,000 memories). So it reads its exact top rows as without them, testing them for the gate and
the window in the statement that maps their document numbers to ids (``_BlockScores.top``), and,
only when rows left out leave it short of the limit, reads deeper (``DEPTH_GROWTH`` times at least,
more when few rows were shown) until ``limit`` shown rows are found or every matching row was read.
Each read is the exact top of all readable rows in the BM25 order, so the shown rows in that order
are the exact top of the rows shown. With no row left out near the top it costs a join in a
statement it makes anyway. A narrow window (``windows.NARROW_ROWS`` memories at most) is cheaper
read from its index: only its memories' document numbers are scored, and only the expiry gate, if
any, is tested after. A wide reading that grows past ``NARROW_ROWS`` counts the window again at
each deeper read, up to that read's depth, and switches to the narrow path once the window holds no
more (``_shown_top``).
The statistics are unchanged: rows left out are readable and stay counted
(``store_service.access.expiry``, ``store_service.records.windows``).
"""

from __future__ import annotations

import heapq
import math
import uuid

import numpy as np
import psycopg
from psycopg import sql
from recallatron.memory.v1 import memory_pb2 as m

from store_service.access import expiry
from store_service.access.readability import READABLE, caller_params
from store_service.database import named, read_snapshot
from store_service.records import windows
from store_service.records.windows import OPEN, Window
from store_service.search import analysis, bm25, lexical_index
from store_service.search.lexical_index import WORKSPACE

# pgvector's hnsw.max_scan_tuples (its default), set on every dense statement so that the budget a
# filtered index scan has is one known number.
HNSW_SCAN_TUPLES = 20_000
# The factor by which the expiry gate's reading goes deeper when hidden rows leave it short.
DEPTH_GROWTH = 4
# A question of at most this many scored terms that holds an identifier is a lookup, and memories
# holding the identifier take precedence in hybrid fusion. Longer questions (claims, stories) only
# mention identifiers in passing: on SciFact, precedence for them cost 0.035 nDCG@10 (docs/retrieval.md).
IDENTIFIER_LOOKUP_MAX_TERMS = 4


def _scope(include_superseded: bool, entity_filter: bool) -> str:
    """Candidate rows: readable, of the recalled purpose, not retired (superseded or invalidated)
    unless history or a time (``Window.in_time``) is asked, and, with an entity filter, about one of
    ``%(entities)s``."""
    clause = f"{READABLE} AND m.purpose = %(purpose)s"
    if not include_superseded:
        clause += " AND m.retired_at IS NULL"
    if entity_filter:
        clause += (
            " AND EXISTS (SELECT 1 FROM memory_link l WHERE l.memory_id = m.id AND l.link_type = 'about'"
            " AND l.target_entity_id = ANY(%(entities)s))"
        )
    return clause


def lexical(
    conn: psycopg.Connection, *query, expiry_days: int = 0, window: Window = OPEN
) -> list[tuple[uuid.UUID, float]]:
    """Ranked (memory id, BM25 score) pairs, best first, ties by id; empty when no term survives.

    ``query``: ``caller, purpose, text, limit, include_superseded[, entity_ids]`` (``_lexical``).
    ``purpose`` is a stored purpose string; one the caller was not granted reads nothing.
    ``expiry_days`` is the workspace's expiry gate (0: off): rows it hides are left out, as are rows
    said outside ``window`` (``store_service.records.windows``).
    """
    rows, _ = _lexical(conn, *query, expiry_days=expiry_days, window=window)
    return [(mid, score) for mid, score, *_ in rows]


def has_terms(text: str) -> bool:
    """Whether ``text`` holds a term the keyword arm can score (else it reads nothing: no statement)."""
    return bool(analysis.query_terms(text))


def lexical_with_matches(
    conn: psycopg.Connection, *query, expiry_days: int = 0, window: Window = OPEN
) -> list[tuple[uuid.UUID, float, int, bool]]:
    """``lexical``'s rows (``query``: ``lexical``'s arguments after ``conn``) with, for fusion's
    precedence, how many of the question's identifiers (``analysis.identifier_terms``) each memory
    contains, counted only for lookups (at most ``IDENTIFIER_LOOKUP_MAX_TERMS`` scored terms besides
    the identifiers' parts), and whether it contains every scored term (two or more). Both counts
    come from the same block sums as the scores (``_BlockScores``), no further query."""
    rows, kept = _lexical(conn, *query, expiry_days=expiry_days, window=window)
    return [(mid, score, identifiers, len(kept) >= 2 and terms == len(kept)) for mid, score, terms, identifiers in rows]


def lookup_identifiers(kept: list[str]) -> list[str]:
    """The identifiers of a question's scored terms that count for precedence: all of them when the
    question is a lookup (at most ``IDENTIFIER_LOOKUP_MAX_TERMS`` terms besides the identifiers'
    parts), none otherwise."""
    identifiers = analysis.identifier_terms(kept)
    return identifiers if _question_size(kept, identifiers) <= IDENTIFIER_LOOKUP_MAX_TERMS else []


def _question_size(kept: list[str], identifiers: list[str]) -> int:
    """Scored terms, not counting the parts of identifiers (``2024-03-15`` is one term, not five)."""
    parts = {p for ident in identifiers for p in analysis.query_terms(ident)[1:]}
    return sum(1 for t in kept if t not in parts)


def _lexical(
    conn: psycopg.Connection,
    caller: m.Caller,
    purpose: str,
    text: str,
    limit: int,
    include_superseded: bool,
    entity_ids: list[uuid.UUID] = (),
    *,
    expiry_days: int = 0,
    window: Window = OPEN,
) -> tuple[list[tuple[uuid.UUID, float, int, int]], list[str]]:
    """``lexical``'s rows, each ``(id, score, scored terms it holds, lookup identifiers it holds)``
    (``lookup_identifiers``), and the terms BM25 scored.

    Read in one snapshot (``database.read_snapshot``), so the statistics, the blocks and the id
    lookup see one database state: a memory forgotten or corrected meanwhile is wholly in or wholly
    out, never a scored number without an id (which left the answer short of its limit; found by a
    hostile review). Inside a caller's own transaction its isolation applies, and a number that lost
    its id is left out."""
    terms = analysis.query_terms(text)
    params = caller_params(caller)
    if not terms or purpose not in params["purposes"]:
        return [], []  # no statement: nothing to read, no transaction
    # Retired memories live in the superseded partitions; a read in time tests which of them count.
    include_superseded = include_superseded or window.in_time
    with read_snapshot(conn):
        audiences = [WORKSPACE, uuid.UUID(caller.member_id)]
        superseded = [False, True] if include_superseded else [False]
        if entity_ids:
            return _lexical_filtered(
                conn,
                {**params, "purpose": purpose, "entities": list(entity_ids), "expiry_days": expiry_days},
                terms,
                limit,
                window,
                include_superseded,
            )
        # The readable partitions' sums and the terms' statistics in them, in one round trip: one row
        # per (partition, present term), or one row with a NULL lexeme for a partition without any.
        rows = (
            named(conn)
            .execute(
                """SELECT pt.id, pt.doc_count, pt.total_len, d.lexeme, d.df
                 FROM lexical_partition pt
                 LEFT JOIN lexical_df d ON d.partition_id = pt.id AND d.lexeme = ANY(%s) AND d.df > 0
                WHERE pt.purpose = %s AND pt.audience = ANY(%s) AND pt.superseded = ANY(%s)""",
                (terms, purpose, audiences, superseded),
            )
            .fetchall()
        )
        sums = {r.id: (r.doc_count, r.total_len) for r in rows}
        n, total, part_ids = sum(c for c, _ in sums.values()), sum(t for _, t in sums.values()), list(sums)
        if n <= 0:
            return [], []
        df: dict[str, int] = {}
        for r in rows:
            if r.lexeme is not None:
                df[r.lexeme] = df.get(r.lexeme, 0) + r.df
        kept = bm25.kept_terms(terms, df, n)
        if not kept:
            return [], []
        avg = max(total / n, 1.0)
        idf = {t: bm25.idf(n, df[t]) for t in kept}
        identifiers = lookup_identifiers(kept)

        scores = _BlockScores(conn, part_ids, idf, avg, identifiers)
        return _shown_top(conn, scores, limit, expiry_days, window), kept


def _keep_narrow(conn: psycopg.Connection, scores: _BlockScores, window: Window, most: int | None = None) -> bool:
    """When ``window`` holds at most ``most`` memories (``windows.narrow_rows``), keeps only their
    documents in ``scores`` and says so: every row then scored is in the window."""
    # Counted first: reading a wide window's first rows with their documents cost 5 to 10 ms at
    # 100,000 memories, the count alone under 1 ms.
    if not windows.is_narrow(conn, window, most):
        return False
    docs = windows.narrow_rows(conn, window, most, "d.doc_no", "JOIN lexical_document d ON d.memory_id = m.id")
    if docs is None:
        return False
    scores.keep(np.array(docs, dtype=np.int64))
    return True


def _left_out_test(expiry_days: int, window: Window) -> str:
    """The SQL condition true of a memory ``m`` the expiry gate of ``expiry_days`` days (0: off) hides
    or ``window`` does not hold (its condition not true: a NULL leaves a memory out, as the narrow
    count's WHERE and the meaning arm's do)."""
    return f"({expiry.hidden_test(expiry_days)}) OR ({window.condition()}) IS NOT TRUE"


def _shown_top(
    conn: psycopg.Connection, scores: _BlockScores, limit: int, expiry_days: int, window: Window
) -> list[tuple]:
    """The best ``limit`` rows of ``scores`` that the expiry gate of ``expiry_days`` days does not hide
    and ``window`` holds, best first: ``scores.top(limit)`` itself when neither applies, else read
    deeper while rows left out leave it short (module docstring)."""
    if window and _keep_narrow(conn, scores, window):
        window = OPEN  # only the window's own rows are scored: none is left out below
    want = limit
    while True:
        if not (expiry_days or window):
            return scores.top(limit)
        leave_out, params = _left_out_test(expiry_days, window), {"expiry_days": expiry_days, **window.params()}
        shown = scores.top(want, leave_out, params)
        if len(shown) >= limit or want >= len(scores):
            return shown[:limit]
        # Deeper: at least DEPTH_GROWTH times, and as deep as the share shown so far says ``limit``
        # shown rows need (with none shown, ``limit`` times deeper), so a top mostly hidden costs two
        # or three reads, not one per factor of DEPTH_GROWTH.
        want = max(want * DEPTH_GROWTH, math.ceil(want * limit / max(len(shown), 1)))
        # A window of fewer memories than the next read's rows is cheaper read narrow: scoring only
        # its documents bounds the reading by the window's size, however few of them match.
        if window and want > windows.NARROW_ROWS and _keep_narrow(conn, scores, window, want):
            window, want = OPEN, limit


class _BlockScores:
    """Exact BM25 of every readable memory holding a kept term, summed in NumPy over the packed
    posting blocks of those terms (``lexical_index.POSTING``): one statement reads the blocks, one
    more maps the best document numbers to memory ids (``top``).

    Why not the former aggregate statement: at 1,000,000 memories a long question sums 500,000 and
    more postings, and PostgreSQL spends about 0.3 us scanning and 0.6 us hash-grouping each one
    (bench/RESULTS.md). Packed, a posting is 16 bytes of a block row read whole, and the sums are
    vectorised (``numpy.bincount`` over document numbers). The scores are the same BM25 terms,
    summed in another order; ties are compared at ``bm25.TIE_DIGITS`` decimals as before."""

    def __init__(
        self, conn: psycopg.Connection, part_ids: list[int], idf: dict[str, float], avg: float, identifiers=()
    ) -> None:
        self.conn = conn
        by_term: dict[str, list[bytes]] = {}
        # Binary results: bytea arrives as raw bytes, not as hex text to decode.
        for lexeme, blob in conn.cursor(binary=True).execute(
            "SELECT lexeme, postings FROM lexical_block WHERE lexeme = ANY(%s) AND partition_id = ANY(%s)",
            (list(idf), part_ids),
        ):
            by_term.setdefault(lexeme, []).append(blob)
        docs, weights, ident_docs = [], [], []
        for lexeme, blobs in by_term.items():
            postings = np.frombuffer(b"".join(blobs), dtype=lexical_index.POSTING)
            tf = postings["tf"].astype(np.float64)
            weights.append(bm25.weight(idf[lexeme], tf, postings["len"], avg))
            docs.append(postings["doc"])
            if lexeme in identifiers:
                ident_docs.append(postings["doc"])
        if not docs:
            self.doc = np.empty(0, dtype=np.int64)
            self.score = self.key = np.empty(0)
            self.terms = self.identifiers = np.empty(0, dtype=np.int64)
            return
        doc = np.concatenate(docs)
        # Dense slots for the sums: offsets from the smallest number when the numbers span a range a
        # few times the postings (the usual case), else ranks (numbers spread by years of churn).
        low = int(doc.min())
        span = int(doc.max()) - low + 1
        if span <= 4 * len(doc) + (1 << 20):
            slot, self.doc = doc - low, None
        else:
            self.doc, slot = np.unique(doc, return_inverse=True)
            span = len(self.doc)
        score = np.bincount(slot, weights=np.concatenate(weights), minlength=span)
        terms = np.bincount(slot, minlength=span)
        present = np.flatnonzero(terms)
        idents = np.zeros(span, dtype=np.int64)
        if ident_docs:
            ident = np.concatenate(ident_docs)
            idents = np.bincount(ident - low if self.doc is None else np.searchsorted(self.doc, ident), minlength=span)
        self.doc = present + low if self.doc is None else self.doc[present]
        self.score, self.terms, self.identifiers = score[present], terms[present], idents[present]
        self.key = np.floor(self.score * bm25.TIE_SCALE + 0.5)  # bm25.tie_key, vectorised

    def keep(self, doc_numbers: np.ndarray) -> None:
        """Scores only the documents numbered ``doc_numbers`` (a narrow time window's)."""
        mask = np.isin(self.doc, doc_numbers)
        self.doc, self.score, self.key = self.doc[mask], self.score[mask], self.key[mask]
        self.terms, self.identifiers = self.terms[mask], self.identifiers[mask]

    def __len__(self) -> int:
        """How many readable memories hold a kept term (the deepest ``top`` can read)."""
        return len(self.key)

    def top(
        self, limit: int, leave_out: str = "", params: dict | None = None
    ) -> list[tuple[uuid.UUID, float, int, int]]:
        """The best ``limit`` rows ``(id, score, kept terms it holds, identifiers it holds)``, score to
        ``bm25.TIE_DIGITS`` decimals descending, then id: every row tied with the last one is mapped to its
        id, so the cut falls by id exactly as a full sort would.

        ``leave_out``: an SQL condition on memory ``m`` (its parameters ``params``); of those rows, the
        ones it is true of are left out by the statement that maps them to ids, so fewer than ``limit``
        come back: the best ``limit`` rows read, tested and mapped in one round trip."""
        if limit <= 0 or not len(self.key):
            return []
        chosen = np.arange(len(self.key))
        if len(chosen) > limit:
            cut = np.partition(self.key, len(self.key) - limit)[len(self.key) - limit]
            chosen = np.flatnonzero(self.key >= cut)
        docs = self.doc[chosen].tolist()
        if leave_out:
            # IS NOT TRUE: a condition that comes out NULL leaves nothing out, as a WHERE on it would not.
            # forgotten_at IS NULL (no forgotten memory is readable) lets the join read memory_time,
            # which holds every column the tests read, instead of the memory rows (migration 0020).
            statement = f"""SELECT d.doc_no, d.memory_id FROM lexical_document d JOIN memory m ON m.id = d.memory_id
                          WHERE d.doc_no = ANY(%(docs)s) AND m.forgotten_at IS NULL AND ({leave_out}) IS NOT TRUE"""
        else:
            statement = "SELECT doc_no, memory_id FROM lexical_document WHERE doc_no = ANY(%(docs)s)"
        ids = dict(self.conn.execute(statement, {**(params or {}), "docs": docs}).fetchall())
        rows = [
            (ids[int(self.doc[i])], float(self.score[i]), int(self.terms[i]), int(self.identifiers[i]))
            for i in chosen.tolist()
            # Not mapped: left out, or removed since the blocks were read (only inside a caller's transaction).
            if int(self.doc[i]) in ids
        ]
        return _best(rows, limit)


def _best(scored, limit: int) -> list[tuple]:
    """The ``limit`` best rows (tuples starting id, score), score (to ``bm25.TIE_DIGITS`` decimals)
    descending, then id."""
    return heapq.nsmallest(limit, scored, key=lambda r: (-bm25.tie_key(r[1]), r[0]))


def _lexical_filtered(
    conn: psycopg.Connection, params: dict, terms: list[str], limit: int, window: Window, include_superseded: bool
) -> tuple[list[tuple[uuid.UUID, float, int, int]], list[str]]:
    """BM25 over the rows about the given entities: a small set, so its statistics are counted
    (exactly as the scope defines them, rows the expiry gate hides or ``window`` leaves out included:
    they are readable) and every matching row the gate shows and the window holds is scored."""
    scope = _scope(include_superseded, True)
    hidden: set[uuid.UUID] = set()
    docs = {}
    for r in named(conn).execute(
        f"""SELECT d.memory_id, d.doc_len, {_left_out_test(params.get("expiry_days"), window)} AS hidden
              FROM memory m JOIN lexical_document d ON d.memory_id = m.id
             WHERE {scope}""",
        {**params, **window.params()},
    ):
        docs[r.memory_id] = r.doc_len
        if r.hidden:
            hidden.add(r.memory_id)
    if not docs:
        return [], []
    postings = (
        named(conn)
        .execute(
            "SELECT memory_id, lexeme, tf FROM lexical_posting WHERE memory_id = ANY(%s) AND lexeme = ANY(%s)",
            (list(docs), terms),
        )
        .fetchall()
    )
    df: dict[str, int] = {}
    for p in postings:
        df[p.lexeme] = df.get(p.lexeme, 0) + 1
    n = len(docs)
    kept = bm25.kept_terms(terms, df, n)
    if not kept:
        return [], []
    avg = max(sum(docs.values()) / n, 1.0)
    idf = {t: bm25.idf(n, df[t]) for t in kept}
    identifiers = set(lookup_identifiers(kept))
    scores: dict[uuid.UUID, list] = {}  # id -> [score, kept terms held, identifiers held]
    for p in postings:
        if p.lexeme in idf and p.memory_id not in hidden:
            row = scores.setdefault(p.memory_id, [0.0, 0, 0])
            row[0] += bm25.weight(idf[p.lexeme], p.tf, docs[p.memory_id], avg)
            row[1] += 1
            row[2] += p.lexeme in identifiers
    return _best([(mid, *row) for mid, row in scores.items()], limit), kept


def dense(
    conn: psycopg.Connection,
    caller: m.Caller,
    purpose: str,
    vector: np.ndarray,
    input_version: str,
    floor: float,
    limit: int,
    entity_ids: list[uuid.UUID] = (),
    *,
    expiry_days: int = 0,
    window: Window = OPEN,
) -> tuple[list[tuple[uuid.UUID, float]], bool]:
    """Ranked (memory id, cosine) pairs at or above ``floor``, best first, and whether the stamp is current.
    ``expiry_days`` is the workspace's expiry gate (0: off): rows it hides are left out, as are rows
    said outside ``window``. A narrow window's rows (``windows.dense_narrow_rows``) are compared with the
    query one by one, exactly, instead of through the HNSW index, whose filtered scan could stop
    short of ``limit`` rows when few pass.

    Only vectors of the memory's current revision and of ``input_version`` are searched: vectors
    from two embedding spaces are never mixed. The second value is False when the workspace holds
    vectors but none with this stamp (the caller then reports the dense arm unavailable).
    """
    params = {
        **caller_params(caller),
        "purpose": purpose,
        "q": vector,
        "stamp": input_version,
        "limit": limit,
        "max_distance": 1.0 - floor,
        "entities": list(entity_ids),
        "expiry_days": expiry_days,
        **window.params(),
    }
    gate = expiry.shown_clause(expiry_days) + window.clause()
    # A narrow window is read by its own condition (in ``gate``), from its index: no ids are sent.
    exact = bool(window) and windows.is_narrow(conn, window, windows.dense_narrow_rows(conn, limit))

    def nearest(exact: bool) -> list:
        # ``+ 0`` keeps the planner off the HNSW index: the order is then an exact sort. Every row the
        # statement found comes back, those under the floor marked, so a short answer can be told.
        order = "(e.embedding <=> %(q)s) + 0" if exact else "e.embedding <=> %(q)s"
        return (
            named(conn)
            .execute(
                f"""WITH nn AS MATERIALIZED (
                    SELECT e.memory_id, e.embedding <=> %(q)s AS distance
                      FROM memory_embedding e JOIN memory m ON m.id = e.memory_id
                     WHERE {_scope(window.in_time, bool(entity_ids))}{gate}
                       AND e.input_version = %(stamp)s AND e.memory_revision = m.revision
                     ORDER BY {order}
                     LIMIT %(limit)s)
                SELECT memory_id, 1 - distance AS cosine, distance <= %(max_distance)s AS above FROM nn
                 ORDER BY distance, memory_id""",
                params,
            )
            .fetchall()
        )

    inside = conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE
    with read_snapshot(conn):
        # The settings in one round trip (several statements are allowed in one query without parameters).
        # No parallel workers: the exact order of a window was planned as a parallel scan, whose
        # workers compete with the keyword arm and the other calls for the same cores. A custom plan
        # every time: psycopg prepares a statement run five times, and PostgreSQL may then keep one
        # generic plan for every window, which cannot tell a month that holds 800 memories from one
        # that holds 85,000 and read the latter through its said_at index (0.46 s instead of 2 ms).
        conn.execute(
            sql.SQL(
                "SET LOCAL hnsw.iterative_scan = 'relaxed_order'; SET LOCAL hnsw.ef_search = {};"
                " SET LOCAL hnsw.max_scan_tuples = {}; SET LOCAL max_parallel_workers_per_gather = 0;"
                " SET LOCAL plan_cache_mode = force_custom_plan"
            ).format(sql.Literal(max(40, min(limit, 1000))), sql.Literal(HNSW_SCAN_TUPLES))
        )
        found = nearest(exact)
        if window and not exact and len(found) < limit:
            # A wide window's filtered index scan gives up after HNSW_SCAN_TUPLES rows: when the
            # window's memories are far from the question, nearer ones outside it use that budget
            # up, and the scan comes back short of what the window holds. The exact order then.
            found = nearest(True)
        rows = [r for r in found if r.above]
        current = (
            bool(rows)
            or named(conn)
            .execute(
                """SELECT NOT EXISTS (SELECT 1 FROM memory_embedding)
                   OR EXISTS (SELECT 1 FROM memory_embedding WHERE input_version = %s) AS current""",
                (input_version,),
            )
            .fetchone()
            .current
        )
        if inside:
            # The caller's transaction goes on (answers.dense reads these rows' verdicts and memories
            # in it): its next statements keep their cached plans and parallel workers. A snapshot
            # of its own ends here, and the settings with it.
            conn.execute("RESET plan_cache_mode; RESET max_parallel_workers_per_gather")
    return [(r.memory_id, float(r.cosine)) for r in rows], current
