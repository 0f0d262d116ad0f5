"""The keyword arm's index, maintained in the memory's own write transaction.

Every live memory has a ``lexical_document`` row (its partition and length) and one
``lexical_posting`` per lexeme (term frequency). A partition is (audience, purpose, superseded):
the audience is the one member of a member-only memory or ``WORKSPACE`` (the nil uuid) for the
whole workspace. ``lexical_df`` and ``lexical_partition`` keep, per partition, each lexeme's
document frequency and the row count and total length, so a caller's BM25 statistics are sums over
the few partitions it may read: exactly what a recount over its readable rows would give, and never
a number that includes a memory it cannot read.

Who calls what (all inside the caller's transaction):
- ``add_memories``: remember, derive, the successor of a supersede, any import;
- ``reindex_text``: correct (new text, same partition);
- ``mark_superseded``: supersede (the old memory moves to its partition's superseded twin);
- ``remove_memories``: forget (the memory and everything derived from it).

Concurrency: every writer of a workspace takes one transaction-scoped advisory lock before touching
the statistics (and before creating a partition), so statistics rows are never locked in two
orders (no deadlocks) and the sums stay exact. Documents and postings are written before it (each
memory's rows are guarded by the memory's own row lock), so the lock is held only from the
statistics upserts to commit. Lexemes come from
``store_service.analysis`` (the same function at query time).
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable

import psycopg

from store_service import analysis

# The audience key of workspace memories (member ids are random uuids, never nil).
WORKSPACE = uuid.UUID(int=0)
# pg_advisory_xact_lock key of the statistics (per database, so per workspace): "lexi".
_STATS_LOCK_KEY = 0x6C65_7869

Partition = tuple[uuid.UUID, str, bool]  # (audience, purpose, superseded)


def audience_key(audience_member_id: uuid.UUID | None) -> uuid.UUID:
    """The partition audience of a memory: its member, or ``WORKSPACE``."""
    return WORKSPACE if audience_member_id is None else audience_member_id


class _Delta:
    """Changes to postings and statistics gathered in Python and written in a few statements."""

    def __init__(self) -> None:
        self.docs: list[tuple] = []  # (memory_id, partition, doc_len)
        self.postings: list[tuple] = []  # (memory_id, lexeme, partition, tf, doc_len)
        # (lexeme, partition) -> [ddf, max_tf]; max_tf no longer read (docs/retrieval.md: kept for a future bound)
        self.df: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])
        self.parts: dict[Partition, list[int]] = defaultdict(lambda: [0, 0])  # partition -> [dcount, dlen]

    def count(self, part: Partition, terms: dict[str, int], sign: int) -> None:
        self.parts[part][0] += sign
        self.parts[part][1] += sign * len(terms)
        for lexeme, tf in terms.items():
            entry = self.df[(lexeme, part)]
            entry[0] += sign
            entry[1] = max(entry[1], tf if sign > 0 else 0)

    def add(self, memory_id: uuid.UUID, part: Partition, terms: dict[str, int]) -> None:
        length = len(terms)
        self.docs.append((memory_id, part, length))
        self.postings.extend((memory_id, lexeme, part, tf, length) for lexeme, tf in terms.items())
        self.count(part, terms, +1)

    def write(self, conn: psycopg.Connection) -> dict[Partition, int]:
        """Writes everything under the workspace's statistics lock; returns the partition ids."""
        cur = conn.cursor()
        parts = sorted(self.parts.items())
        # Partition ids, the documents and the postings need no statistics lock (each memory's rows
        # are guarded by its own row lock), so a big batch holds the lock only for the sums below.
        keys = _columns([part for part, _ in parts], 3)
        ids = _partition_ids(cur, keys)
        if len(ids) < len(parts):  # a new partition: created under the lock, so no two writers wait
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (_STATS_LOCK_KEY,))  # on each other's insert
            cur.execute(
                """INSERT INTO lexical_partition (audience, purpose, superseded, doc_count, total_len)
                           SELECT a, p, s, 0, 0 FROM unnest(%s::uuid[], %s::text[], %s::bool[]) AS k(a, p, s)
                           ON CONFLICT (purpose, audience, superseded) DO NOTHING""",
                keys,
            )
            ids = _partition_ids(cur, keys)
        if self.docs:
            cur.execute(
                """INSERT INTO lexical_document (memory_id, partition_id, doc_len)
                           SELECT * FROM unnest(%s::uuid[], %s::int[], %s::int[])""",
                _columns([(mid, ids[part], length) for mid, part, length in self.docs], 3),
            )
        if self.postings:
            cur.execute(
                """INSERT INTO lexical_posting (memory_id, lexeme, partition_id, tf, doc_len)
                           SELECT * FROM unnest(%s::uuid[], %s::text[], %s::int[], %s::int[], %s::int[])""",
                _columns([(mid, lx, ids[part], tf, length) for mid, lx, part, tf, length in self.postings], 5),
            )
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (_STATS_LOCK_KEY,))
        counts = [(ids[part], n, length) for part, (n, length) in parts if n or length]
        if counts:
            cur.execute(
                """UPDATE lexical_partition p SET doc_count = p.doc_count + d.n, total_len = p.total_len + d.len
                             FROM unnest(%s::int[], %s::bigint[], %s::bigint[]) AS d(id, n, len)
                            WHERE p.id = d.id""",
                _columns(counts, 3),
            )
        df = sorted((lexeme, ids[part], d, most) for (lexeme, part), (d, most) in self.df.items() if d or most)
        if df:
            cur.execute(
                """INSERT INTO lexical_df AS d (lexeme, partition_id, df, max_tf)
                           SELECT * FROM unnest(%s::text[], %s::int[], %s::bigint[], %s::int[])
                           ON CONFLICT (lexeme, partition_id)
                           DO UPDATE SET df = d.df + EXCLUDED.df, max_tf = greatest(d.max_tf, EXCLUDED.max_tf)""",
                _columns(df, 4),
            )
        return ids


def _partition_ids(cur, keys: list[list]) -> dict[Partition, int]:
    """Ids of the existing partitions among ``keys`` (audience, purpose and superseded columns)."""
    cur.execute(
        """SELECT p.id, p.audience, p.purpose, p.superseded FROM lexical_partition p
                     JOIN unnest(%s::uuid[], %s::text[], %s::bool[]) AS k(a, pu, s)
                       ON p.audience = k.a AND p.purpose = k.pu AND p.superseded = k.s""",
        keys,
    )
    return {(aud, purpose, sup): pid for pid, aud, purpose, sup in cur.fetchall()}


def _columns(rows: list[tuple], width: int) -> list[list]:
    """Row tuples as ``width`` column lists (for ``unnest`` of arrays)."""
    return [list(col) for col in zip(*rows, strict=True)] if rows else [[] for _ in range(width)]


def add_memories(conn: psycopg.Connection, rows: Iterable[tuple[uuid.UUID, uuid.UUID | None, str, str, str]]) -> None:
    """Indexes new, live memories: ``(memory_id, audience_member_id or None, purpose, title, body)``.

    Call once per transaction with every new row (a batch import passes the whole batch).
    """
    delta = _Delta()
    for memory_id, audience, purpose, title, body in rows:
        delta.add(memory_id, (audience_key(audience), purpose, False), analysis.document_terms(title, body))
    if delta.docs:
        delta.write(conn)


def _indexed(
    conn: psycopg.Connection, ids: list[uuid.UUID], superseded: bool | None = None
) -> dict[uuid.UUID, tuple[Partition, dict[str, int]]]:
    """The partition and terms of indexed memories among ``ids`` (optionally only live or superseded)."""
    cur = conn.cursor()
    cur.execute(
        """SELECT d.memory_id, p.audience, p.purpose, p.superseded, x.lexeme, x.tf
                     FROM lexical_document d JOIN lexical_partition p ON p.id = d.partition_id
                     LEFT JOIN lexical_posting x ON x.memory_id = d.memory_id
                    WHERE d.memory_id = ANY(%s) AND (%s::bool IS NULL OR p.superseded = %s::bool)""",
        (list(ids), superseded, superseded),
    )
    out: dict[uuid.UUID, tuple[Partition, dict[str, int]]] = {}
    for memory_id, audience, purpose, sup, lexeme, tf in cur.fetchall():
        _, terms = out.setdefault(memory_id, ((audience, purpose, sup), {}))
        if lexeme is not None:
            terms[lexeme] = tf
    return out


def _delete(conn: psycopg.Connection, ids: list[uuid.UUID]) -> None:
    cur = conn.cursor()
    cur.execute("DELETE FROM lexical_posting WHERE memory_id = ANY(%s)", (ids,))
    cur.execute("DELETE FROM lexical_document WHERE memory_id = ANY(%s)", (ids,))


def remove_memories(conn: psycopg.Connection, ids: list[uuid.UUID]) -> None:
    """Removes memories from the index (forget); ids not indexed are ignored."""
    found = _indexed(conn, ids)
    if not found:
        return
    delta = _Delta()
    for part, terms in found.values():
        delta.count(part, terms, -1)
    delta.write(conn)
    _delete(conn, list(found))


def mark_superseded(conn: psycopg.Connection, ids: list[uuid.UUID]) -> None:
    """Moves live memories to their partition's superseded twin (supersede)."""
    found = _indexed(conn, ids, superseded=False)
    if not found:
        return
    delta = _Delta()
    for (audience, purpose, _), terms in found.values():
        delta.count((audience, purpose, False), terms, -1)
        delta.count((audience, purpose, True), terms, +1)
    part_ids = delta.write(conn)
    moves = [(mid, part_ids[(audience, purpose, True)]) for mid, ((audience, purpose, _), _) in found.items()]
    cur = conn.cursor()
    for table in ("lexical_document", "lexical_posting"):
        cur.execute(
            f"""UPDATE {table} t SET partition_id = m.partition_id
                          FROM unnest(%s::uuid[], %s::int[]) AS m(memory_id, partition_id)
                         WHERE t.memory_id = m.memory_id""",
            _columns(moves, 2),
        )


def reindex_text(conn: psycopg.Connection, memory_id: uuid.UUID, title: str, body: str) -> None:
    """Replaces a memory's terms after its text changed in place (correct); the partition stays."""
    found = _indexed(conn, [memory_id])
    if memory_id not in found:
        return
    part, old = found[memory_id]
    _delete(conn, [memory_id])
    delta = _Delta()
    delta.count(part, old, -1)
    delta.add(memory_id, part, analysis.document_terms(title, body))
    delta.write(conn)


def reindex_all(conn) -> None:
    """Rebuilds every table of the index from the memory rows (the migration; any DB-API connection
    to a workspace database). Forgotten memories are not indexed."""
    cur = conn.cursor()
    cur.execute("TRUNCATE lexical_posting, lexical_df, lexical_document, lexical_partition")
    last = WORKSPACE
    while True:
        cur.execute(
            """SELECT id, audience_member_id, purpose, superseded_by_id IS NOT NULL, title, body
                         FROM memory WHERE forgotten_at IS NULL AND id > %s ORDER BY id LIMIT 200""",
            (last,),
        )
        batch = cur.fetchall()
        if not batch:
            return
        delta = _Delta()
        for memory_id, audience, purpose, sup, title, body in batch:
            delta.add(memory_id, (audience_key(audience), purpose, sup), analysis.document_terms(title, body))
        delta.write(conn)
        last = batch[-1][0]


def recount(conn: psycopg.Connection) -> tuple[dict, dict]:
    """The statistics recounted from the memory rows, keyed as the maintained tables are (for tests
    and ``recallatron`` checks): ``({(lexeme, audience, purpose, superseded): df}, {partition:
    (doc_count, total_len)})``, zero entries left out."""
    df: dict[tuple, int] = defaultdict(int)
    parts: dict[Partition, list[int]] = defaultdict(lambda: [0, 0])
    rows = conn.execute("""SELECT audience_member_id, purpose, superseded_by_id IS NOT NULL, title, body
                             FROM memory WHERE forgotten_at IS NULL""").fetchall()
    for audience, purpose, sup, title, body in rows:
        part = (audience_key(audience), purpose, sup)
        terms = analysis.document_terms(title, body)
        parts[part][0] += 1
        parts[part][1] += len(terms)
        for lexeme in terms:
            df[(lexeme, *part)] += 1
    return dict(df), {k: tuple(v) for k, v in parts.items()}


def maintained(conn: psycopg.Connection) -> tuple[dict, dict]:
    """The maintained statistics in ``recount``'s shape (zero entries left out)."""
    df = {
        (lx, aud, p, s): n
        for lx, aud, p, s, n in conn.execute(
            """SELECT d.lexeme, p.audience, p.purpose, p.superseded, d.df
             FROM lexical_df d JOIN lexical_partition p ON p.id = d.partition_id WHERE d.df > 0"""
        )
    }
    parts = {
        (aud, p, s): (n, total)
        for aud, p, s, n, total in conn.execute(
            "SELECT audience, purpose, superseded, doc_count, total_len FROM lexical_partition "
            "WHERE doc_count > 0 OR total_len > 0"
        )
    }
    return df, parts
