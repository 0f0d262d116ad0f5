"""The keyword arm's index, maintained in the memory's own write transaction.

Every live memory has a ``lexical_document`` row (its partition, length and document number) and
one ``lexical_posting`` per lexeme (term frequency, and the block holding its copy). The keyword
arm reads postings from ``lexical_block``: per (lexeme, partition), rows of up to
``BLOCK_POSTINGS`` postings packed as ``POSTING`` records (document number, tf, length), in no
particular order, so a question reads a few thousand rows instead of one row per posting
(``store_service.search.candidates``; docs/retrieval.md, "Packed posting blocks").

A partition is (audience, purpose, superseded): the audience is the one member of a member-only
memory or ``WORKSPACE`` (the nil uuid) for the whole workspace. ``lexical_df`` and
``lexical_partition`` keep, per partition, each lexeme's document frequency and the row count and
total length, so a caller's BM25 statistics are sums over the few partitions it may read: exactly
what a recount over its readable rows would give, and never a number that includes a memory it
cannot read.

Who calls what (all inside the caller's transaction):
- ``add_memories``: remember, derive, the successor of a supersede, any import;
- ``reindex_text``: correct (new text, same partition);
- ``mark_superseded``: supersede (the old memory moves to its partition's superseded twin);
- ``remove_memories``: forget (the memory and everything derived from it).

Concurrency: every writer of a workspace takes one transaction-scoped advisory lock before touching
the statistics or a block (and before creating a partition), so statistics and block rows are
only ever locked by the one transaction holding it: no transaction waits on such a row, no
deadlocks, and the sums stay exact. Documents are written before it (each memory's rows are
guarded by the memory's own row lock), so the lock is held from the block writes to commit.
Lexemes come from ``store_service.search.analysis`` (the same function at query time).
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable

import numpy as np
import psycopg

from store_service.search import analysis

# The audience key of workspace memories (member ids are random uuids, never nil).
WORKSPACE = uuid.UUID(int=0)
# pg_advisory_xact_lock key of the statistics (per database, so per workspace): "lexi".
_STATS_LOCK_KEY = 0x6C65_7869

# Postings per ``lexical_block`` row at most: 112 x 16 bytes stay under PostgreSQL's 2 kB TOAST
# threshold with the row's other columns, so a block is read from its heap page without a TOAST
# fetch. The CHECK of ``lexical_block.n`` (migration 0012) names the same number.
BLOCK_POSTINGS = 112
# Bytes of a block row left for the lexeme and the postings under that threshold (2,032 bytes less
# the tuple header, id, partition, n and varlena headers): a lexeme longer than 192 bytes (up to
# ``analysis.MAX_LEXEME_CHARS`` characters, 3 bytes each in CJK) gets fewer postings a block
# (``block_capacity``), so its blocks stay in the heap page too (found by a hostile review).
_BLOCK_BYTES = 1984
# One packed posting: document number (``lexical_document.doc_no``), term frequency, document
# length (distinct lexemes), little-endian, 16 bytes.
POSTING = np.dtype([("doc", "<i8"), ("tf", "<i4"), ("len", "<i4")])

Partition = tuple[uuid.UUID, str, bool]  # (audience, purpose, superseded)


def block_capacity(lexeme: str) -> int:
    """Postings a block of ``lexeme`` holds at most: ``BLOCK_POSTINGS``, fewer for a lexeme longer
    than 192 bytes in UTF-8 (``_BLOCK_BYTES``), at least 1."""
    return max(1, min(BLOCK_POSTINGS, (_BLOCK_BYTES - len(lexeme.encode())) // POSTING.itemsize))


def audience_key(audience_member_id: uuid.UUID | None) -> uuid.UUID:
    """The partition audience of a memory: its member, or ``WORKSPACE``."""
    return WORKSPACE if audience_member_id is None else audience_member_id


class _Delta:
    """Changes to postings and statistics gathered in Python and written in a few statements."""

    def __init__(self) -> None:
        self.docs: list[tuple] = []  # (memory_id, partition, doc_len)
        self.postings: list[tuple] = []  # (memory_id, lexeme, partition, tf, doc_len)
        # Postings of indexed documents moving to another partition (supersede), already taken out
        # of their old blocks: (memory_id, lexeme, new partition, tf, doc_len, doc_no).
        self.moved: list[tuple] = []
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
        """Writes everything, blocks and sums under the workspace's statistics lock; returns the
        partition ids."""
        cur = conn.cursor()
        parts = sorted(self.parts.items())
        # Partition ids and the documents need no statistics lock (each memory's rows are guarded
        # by its own row lock), so a big batch holds the lock only for the blocks and sums below.
        keys = _columns([part for part, _ in parts], 3)
        ids = _partition_ids(cur, keys)
        if len(ids) < len(parts):  # a new partition: created under the lock, so no two writers wait
            lock_statistics(cur)  # on each other's insert
            cur.execute(
                """INSERT INTO lexical_partition (audience, purpose, superseded, doc_count, total_len)
                           SELECT a, p, s, 0, 0 FROM unnest(%s::uuid[], %s::text[], %s::bool[]) AS k(a, p, s)
                           ON CONFLICT (purpose, audience, superseded) DO NOTHING""",
                keys,
            )
            ids = _partition_ids(cur, keys)
        doc_nos: dict[uuid.UUID, int] = {}
        if self.docs:
            cur.execute(
                """INSERT INTO lexical_document (memory_id, partition_id, doc_len)
                   SELECT * FROM unnest(%s::uuid[], %s::int[], %s::int[]) RETURNING memory_id, doc_no""",
                _columns([(mid, ids[part], length) for mid, part, length in self.docs], 3),
            )
            doc_nos = dict(cur.fetchall())
        lock_statistics(cur)
        counts = [(ids[part], n, length) for part, (n, length) in parts if n or length]
        if counts:
            cur.execute(
                """UPDATE lexical_partition p SET doc_count = p.doc_count + d.n, total_len = p.total_len + d.len
                             FROM unnest(%s::int[], %s::bigint[], %s::bigint[]) AS d(id, n, len)
                            WHERE p.id = d.id""",
                _columns(counts, 3),
            )
        df = sorted((lexeme, ids[part], d, most) for (lexeme, part), (d, most) in self.df.items() if d or most)
        open_blocks: dict[tuple[str, int], tuple[int, int]] = {}
        if df:
            # Every (lexeme, partition) that receives postings is in this upsert (its df grows, or its
            # tf is counted when a correction keeps the lexeme), so it also names the block to fill.
            cur.execute(
                """INSERT INTO lexical_df AS d (lexeme, partition_id, df, max_tf)
                           SELECT * FROM unnest(%s::text[], %s::int[], %s::bigint[], %s::int[])
                           ON CONFLICT (lexeme, partition_id)
                           DO UPDATE SET df = d.df + EXCLUDED.df, max_tf = greatest(d.max_tf, EXCLUDED.max_tf)
                 RETURNING d.lexeme, d.partition_id, d.open_block,
                           (SELECT b.n FROM lexical_block b WHERE b.id = d.open_block)""",
                _columns(df, 4),
            )
            open_blocks = {(lx, part): (block, n) for lx, part, block, n in cur.fetchall() if n is not None}
        appended = [(doc_nos[mid], lx, ids[part], tf, length) for mid, lx, part, tf, length in self.postings]
        appended += [(doc, lx, ids[part], tf, length) for _, lx, part, tf, length, doc in self.moved]
        blocks = _append_to_blocks(cur, appended, open_blocks)
        if self.postings:
            cur.execute(
                """INSERT INTO lexical_posting (memory_id, lexeme, partition_id, tf, doc_len, block_id)
                   SELECT * FROM unnest(%s::uuid[], %s::text[], %s::int[], %s::int[], %s::int[], %s::bigint[])""",
                _columns(
                    [
                        (mid, lx, ids[part], tf, length, block)
                        for (mid, lx, part, tf, length), block in zip(
                            self.postings, blocks[: len(self.postings)], strict=True
                        )
                    ],
                    6,
                ),
            )
        if self.moved:
            cur.execute(
                """UPDATE lexical_posting t SET partition_id = m.partition_id, block_id = m.block_id
                     FROM unnest(%s::uuid[], %s::text[], %s::int[], %s::bigint[])
                          AS m(memory_id, lexeme, partition_id, block_id)
                    WHERE t.memory_id = m.memory_id AND t.lexeme = m.lexeme""",
                _columns(
                    [
                        (mid, lx, ids[part], block)
                        for (mid, lx, part, *_), block in zip(self.moved, blocks[len(self.postings) :], strict=True)
                    ],
                    4,
                ),
            )
        return ids


def lock_statistics(cur) -> None:
    """Takes the workspace's statistics lock (transaction-scoped, re-entrant): held by whoever
    changes statistics or blocks, until commit (module docstring, "Concurrency")."""
    cur.execute("SELECT pg_advisory_xact_lock(%s)", (_STATS_LOCK_KEY,))


def _next_values(cur, sequence: str, n: int) -> list[int]:
    """``n`` fresh values of a sequence, in one round trip (none when ``n`` is 0)."""
    if n <= 0:
        return []
    cur.execute(f"SELECT nextval('{sequence}') FROM generate_series(1, %s)", (n,))
    return [v for (v,) in cur.fetchall()]


def _append_to_blocks(cur, postings: list[tuple], open_blocks: dict[tuple[str, int], tuple[int, int]]) -> list[int]:
    """Appends ``(doc_no, lexeme, partition_id, tf, doc_len)`` postings to the blocks of their
    (lexeme, partition): first into its open block (``open_blocks``: (lexeme, partition) ->
    (block id, postings held), from ``lexical_df.open_block``) while it has room, then into new
    blocks of ``block_capacity``, the last of which becomes the open block. Returns the block id of
    each posting, in input order. The caller holds the statistics lock, so no other writer holds a
    block row; an append changes no indexed column, so PostgreSQL can update the row in place (HOT).
    """
    if not postings:
        return []
    # Sorted by (lexeme, partition), each key's postings are one slice of one packed array: no
    # per-key gather (a NumPy call per key cost more than the statements on 500-memory batches).
    order = sorted(range(len(postings)), key=lambda i: (postings[i][1], postings[i][2]))
    ordered = [postings[i] for i in order]
    docs, lexemes, parts, tfs, lengths = zip(*ordered, strict=True)
    packed = np.empty(len(ordered), dtype=POSTING)
    packed["doc"], packed["tf"], packed["len"] = docs, tfs, lengths
    updates, inserts = [], []  # (block id, start, end), (lexeme, partition, start, end): slices of packed
    start = 0
    while start < len(ordered):
        key = (lexemes[start], parts[start])
        end = start + 1
        while end < len(ordered) and (lexemes[end], parts[end]) == key:
            end += 1
        first = start  # the first posting that goes to a new block
        cap = block_capacity(key[0])
        block, held = open_blocks.get(key, (None, cap))
        if block is not None and held < cap:
            first = start + min(cap - held, end - start)
            updates.append((block, start, first))
        for a in range(first, end, cap):
            inserts.append((*key, a, min(a + cap, end)))
        start = end
    placed = np.zeros(len(ordered), dtype=np.int64)  # block of each posting, in sorted order
    if updates:
        for block, a, b in updates:
            placed[a:b] = block
        cur.execute(
            """UPDATE lexical_block b SET postings = b.postings || u.postings, n = b.n + u.k
                 FROM unnest(%s::bigint[], %b::bytea[], %s::int[]) AS u(id, postings, k) WHERE b.id = u.id""",
            (
                [b for b, _, _ in updates],
                [packed[a:b].tobytes() for _, a, b in updates],
                [b - a for _, a, b in updates],
            ),
        )
    if inserts:
        new_ids = _next_values(cur, "lexical_block_id", len(inserts))
        for block, (_, _, a, b) in zip(new_ids, inserts, strict=True):
            placed[a:b] = block
        cur.execute(
            """INSERT INTO lexical_block (id, lexeme, partition_id, n, postings)
               SELECT * FROM unnest(%s::bigint[], %s::text[], %s::int[], %s::int[], %b::bytea[])""",
            (
                new_ids,
                [lexeme for lexeme, *_ in inserts],
                [part for _, part, _, _ in inserts],
                [b - a for *_, a, b in inserts],
                [packed[a:b].tobytes() for *_, a, b in inserts],
            ),
        )
        # The last new block of each key is its open block now (the keys' df rows are locked by this
        # transaction's upsert already).
        newest = {(lexeme, part): block for block, (lexeme, part, _, _) in zip(new_ids, inserts, strict=True)}
        cur.execute(
            """UPDATE lexical_df d SET open_block = u.block
                 FROM unnest(%s::text[], %s::int[], %s::bigint[]) AS u(lexeme, part, block)
                WHERE d.lexeme = u.lexeme AND d.partition_id = u.part""",
            _columns([(lx, part, block) for (lx, part), block in sorted(newest.items())], 3),
        )
    out = np.empty(len(ordered), dtype=np.int64)
    out[order] = placed
    return out.tolist()


def _remove_from_blocks(cur, memory_ids: list[uuid.UUID]) -> None:
    """Removes the postings of indexed memories from their blocks, keeping each (lexeme, partition)
    at full blocks plus at most one with room, its open block: the touched blocks left with room and
    the key's open block are repacked into as few blocks as hold them (the last one open), the rest
    deleted, and the moved postings' rows pointed at their new blocks. Without it, blocks emptied
    by forgets were never refilled and a term's rows grew without bound under churn (found by a
    hostile review). Takes the statistics lock first (module docstring, "Concurrency"), then reads
    which blocks hold the postings: another writer's repacking may have moved them since the caller
    read the memory's index rows (``_indexed``), and a stale block id left the posting in its block
    for good (found by the chaos check under 8 writers)."""
    if not memory_ids:
        return
    lock_statistics(cur)
    cur.execute(
        """SELECT x.block_id, d.doc_no FROM lexical_posting x JOIN lexical_document d ON d.memory_id = x.memory_id
            WHERE x.memory_id = ANY(%s)""",
        (list(memory_ids),),
    )
    gone: dict[int, set[int]] = defaultdict(set)
    for block, doc in cur.fetchall():
        gone[block].add(doc)
    if not gone:
        return
    cur.execute(
        "SELECT id, lexeme, partition_id, postings FROM lexical_block WHERE id = ANY(%s)", (sorted(gone),), binary=True
    )
    kept: dict[int, np.ndarray] = {}
    keys: dict[tuple[str, int], list[int]] = defaultdict(list)
    for block, lexeme, part, blob in cur.fetchall():
        held = np.frombuffer(blob, dtype=POSTING)
        kept[block] = held[~np.isin(held["doc"], np.fromiter(gone[block], dtype=np.int64))]
        keys[(lexeme, part)].append(block)
    # The keys' open blocks, when not among the touched ones and still with room, join the repacking.
    cur.execute(
        """SELECT d.lexeme, d.partition_id, b.id, b.postings
             FROM unnest(%s::text[], %s::int[]) AS k(lexeme, part)
             JOIN lexical_df d ON d.lexeme = k.lexeme AND d.partition_id = k.part
             JOIN lexical_block b ON b.id = d.open_block""",
        _columns(sorted(keys), 2),
        binary=True,
    )
    for lexeme, part, block, blob in cur.fetchall():
        if block not in kept and len(blob) // POSTING.itemsize < block_capacity(lexeme):
            kept[block] = np.frombuffer(blob, dtype=POSTING)
            keys[(lexeme, part)].append(block)
    writes, deletes, opens, moved = [], [], [], []  # (id, postings); ids; (lexeme, part, id); (doc, lexeme, id)
    for (lexeme, part), blocks in sorted(keys.items()):
        cap = block_capacity(lexeme)
        roomy = sorted(b for b in blocks if len(kept[b]) < cap)
        # At or over capacity (over: made when a lexeme's capacity was higher), rewritten as it is.
        writes += [(b, kept[b]) for b in blocks if len(kept[b]) >= cap]
        pool = np.concatenate([kept[b] for b in roomy]) if roomy else np.empty(0, dtype=POSTING)
        n_blocks = -(-len(pool) // cap)  # ceil
        for i, b in enumerate(roomy):
            if i >= n_blocks:
                deletes.append(b)
                continue
            part_rows = pool[i * cap : (i + 1) * cap]
            writes.append((b, part_rows))
            old_docs = set(kept[b]["doc"].tolist())
            moved += [(doc, lexeme, b) for doc in part_rows["doc"].tolist() if doc not in old_docs]
        opens.append((lexeme, part, roomy[n_blocks - 1] if n_blocks else None))
    if deletes:
        cur.execute("DELETE FROM lexical_block WHERE id = ANY(%s)", (sorted(deletes),))
    if writes:
        cur.execute(
            """UPDATE lexical_block b SET postings = u.postings, n = u.k
                 FROM unnest(%s::bigint[], %b::bytea[], %s::int[]) AS u(id, postings, k) WHERE b.id = u.id""",
            ([b for b, _ in writes], [rows.tobytes() for _, rows in writes], [len(rows) for _, rows in writes]),
        )
    cur.execute(
        """UPDATE lexical_df d SET open_block = u.block
             FROM unnest(%s::text[], %s::int[], %s::bigint[]) AS u(lexeme, part, block)
            WHERE d.lexeme = u.lexeme AND d.partition_id = u.part""",
        _columns(opens, 3),
    )
    if moved:
        cur.execute(
            """UPDATE lexical_posting x SET block_id = u.block
                 FROM unnest(%s::bigint[], %s::text[], %s::bigint[]) AS u(doc, lexeme, block)
                 JOIN lexical_document d ON d.doc_no = u.doc
                WHERE x.memory_id = d.memory_id AND x.lexeme = u.lexeme""",
            _columns(moved, 3),
        )


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


class _Indexed:
    """An indexed memory as the index holds it: partition, terms (lexeme -> tf), document number and
    document length (not which blocks hold its postings: another writer's repacking can move them
    until the statistics lock is taken, so ``_remove_from_blocks`` reads that under the lock)."""

    def __init__(self, part: Partition, doc_no: int, doc_len: int) -> None:
        self.part, self.doc_no, self.doc_len = part, doc_no, doc_len
        self.terms: dict[str, int] = {}


def _indexed(
    conn: psycopg.Connection, ids: list[uuid.UUID], superseded: bool | None = None
) -> dict[uuid.UUID, _Indexed]:
    """The indexed memories among ``ids`` (optionally only live or superseded ones)."""
    cur = conn.cursor()
    cur.execute(
        """SELECT d.memory_id, p.audience, p.purpose, p.superseded, d.doc_no, d.doc_len, x.lexeme, x.tf
                     FROM lexical_document d JOIN lexical_partition p ON p.id = d.partition_id
                     LEFT JOIN lexical_posting x ON x.memory_id = d.memory_id
                    WHERE d.memory_id = ANY(%s) AND (%s::bool IS NULL OR p.superseded = %s::bool)""",
        (list(ids), superseded, superseded),
    )
    out: dict[uuid.UUID, _Indexed] = {}
    for memory_id, audience, purpose, sup, doc_no, doc_len, lexeme, tf in cur.fetchall():
        if memory_id not in out:
            out[memory_id] = _Indexed((audience, purpose, sup), doc_no, doc_len)
        doc = out[memory_id]
        if lexeme is not None:
            doc.terms[lexeme] = tf
    return out


def _delete(conn: psycopg.Connection, found: dict[uuid.UUID, _Indexed]) -> None:
    """Deletes indexed memories' postings (blocks included) and documents; statistics untouched."""
    cur = conn.cursor()
    ids = list(found)
    _remove_from_blocks(cur, ids)
    cur.execute("DELETE FROM lexical_posting WHERE memory_id = ANY(%s)", (ids,))
    cur.execute("DELETE FROM lexical_document WHERE memory_id = ANY(%s)", (ids,))


def remove_memories(conn: psycopg.Connection, ids: list[uuid.UUID]) -> None:
    """Removes memories from the index (forget); ids not indexed are ignored."""
    found = _indexed(conn, ids)
    if not found:
        return
    delta = _Delta()
    for doc in found.values():
        delta.count(doc.part, doc.terms, -1)
    _delete(conn, found)
    delta.write(conn)


def mark_superseded(conn: psycopg.Connection, ids: list[uuid.UUID]) -> None:
    """Moves live memories to their partition's superseded twin (supersede, invalidate): documents,
    postings and their blocks."""
    _move(conn, ids, superseded=True)


def mark_live(conn: psycopg.Connection, ids: list[uuid.UUID]) -> None:
    """Moves superseded memories back to their live partition (a memory whose successor was
    forgotten is current again)."""
    _move(conn, ids, superseded=False)


def _move(conn: psycopg.Connection, ids: list[uuid.UUID], *, superseded: bool) -> None:
    """Moves the memories among ``ids`` not in a ``superseded`` partition into the twin that is,
    keeping their document numbers."""
    found = _indexed(conn, ids, superseded=not superseded)
    if not found:
        return
    delta = _Delta()
    for mid, doc in found.items():
        audience, purpose, _ = doc.part
        delta.count((audience, purpose, not superseded), doc.terms, -1)
        delta.count((audience, purpose, superseded), doc.terms, +1)
        delta.moved.extend(
            (mid, lexeme, (audience, purpose, superseded), tf, doc.doc_len, doc.doc_no)
            for lexeme, tf in doc.terms.items()
        )
    cur = conn.cursor()
    _remove_from_blocks(cur, list(found))
    part_ids = delta.write(conn)
    cur.execute(
        """UPDATE lexical_document t SET partition_id = m.partition_id
             FROM unnest(%s::uuid[], %s::int[]) AS m(memory_id, partition_id)
            WHERE t.memory_id = m.memory_id""",
        _columns([(mid, part_ids[(doc.part[0], doc.part[1], superseded)]) for mid, doc in found.items()], 2),
    )


def reindex_text(conn: psycopg.Connection, memory_id: uuid.UUID, title: str, body: str) -> None:
    """Replaces a memory's terms after its text changed in place (correct); the partition stays."""
    found = _indexed(conn, [memory_id])
    if memory_id not in found:
        return
    doc = found[memory_id]
    _delete(conn, found)
    delta = _Delta()
    delta.count(doc.part, doc.terms, -1)
    delta.add(memory_id, doc.part, analysis.document_terms(title, body))
    delta.write(conn)


def reindex_all(conn) -> None:
    """Rebuilds every table of the index from the memory rows (the data step ``lexical_index`` of
    ``store_service.data_steps``; any DB-API connection to a workspace database). Forgotten memories
    are not indexed."""
    cur = conn.cursor()
    cur.execute("TRUNCATE lexical_block, lexical_posting, lexical_df, lexical_document, lexical_partition")
    last = WORKSPACE
    while True:
        cur.execute(
            """SELECT id, audience_member_id, purpose, retired_at IS NOT NULL, title, body
                         FROM memory WHERE forgotten_at IS NULL AND id > %s ORDER BY id LIMIT 2000""",
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
    rows = conn.execute("""SELECT audience_member_id, purpose, retired_at IS NOT NULL, title, body
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


def block_problems(conn: psycopg.Connection) -> list[str]:
    """What is wrong with the blocks against the postings (for tests and checks); empty when every
    posting is held exactly once, in the block its row names, with the right partition, tf and
    length and agreeing with its document, every block holds 1..``block_capacity`` postings of its
    own lexeme, ``n`` of them, every open block that still exists belongs to its (lexeme,
    partition), and the only block of a (lexeme, partition) with room is its open block."""
    problems = []
    held: dict[tuple, int] = {}
    roomy: dict[tuple[str, int], list[int]] = defaultdict(list)
    for block, lexeme, part, n, blob in conn.execute(
        "SELECT id, lexeme, partition_id, n, postings FROM lexical_block"
    ).fetchall():
        rows = np.frombuffer(blob, dtype=POSTING)
        if not 0 < len(rows) == n <= block_capacity(lexeme):
            problems.append(f"block {block} ({lexeme!r}, partition {part}): n = {n}, holds {len(rows)}")
        if n < block_capacity(lexeme):
            roomy[(lexeme, part)].append(block)
        for doc, tf, length in rows.tolist():
            key = (doc, lexeme)
            if key in held:
                problems.append(f"document {doc} lexeme {lexeme!r} held twice")
            held[key] = (block, part, tf, length)
    want = {}
    for memory, doc, lexeme, block, part, tf, length, doc_part, doc_len in conn.execute(
        """SELECT x.memory_id, d.doc_no, x.lexeme, x.block_id, x.partition_id, x.tf, x.doc_len,
                  d.partition_id, d.doc_len
             FROM lexical_posting x LEFT JOIN lexical_document d ON d.memory_id = x.memory_id"""
    ).fetchall():
        if doc is None or (doc_part, doc_len) != (part, length):
            problems.append(f"posting ({memory}, {lexeme!r}) disagrees with its document: {doc_part}, {doc_len}")
        want[(doc, lexeme)] = (block, part, tf, length)
    for key in sorted(want.keys() | held.keys()):
        if want.get(key) != held.get(key):
            problems.append(f"posting {key}: row says {want.get(key)}, blocks hold {held.get(key)}")
    for lexeme, part, block, block_lexeme, block_part in conn.execute(
        """SELECT d.lexeme, d.partition_id, d.open_block, b.lexeme, b.partition_id
             FROM lexical_df d JOIN lexical_block b ON b.id = d.open_block"""
    ).fetchall():
        if (lexeme, part) != (block_lexeme, block_part):
            problems.append(f"open block {block} of ({lexeme!r}, {part}) holds ({block_lexeme!r}, {block_part})")
    opened = dict(
        ((lexeme, part), block)
        for lexeme, part, block in conn.execute("SELECT lexeme, partition_id, open_block FROM lexical_df").fetchall()
    )
    for key, blocks in roomy.items():
        if blocks != [opened.get(key)]:
            problems.append(f"{key}: blocks with room {blocks}, open block {opened.get(key)}")
    return problems
