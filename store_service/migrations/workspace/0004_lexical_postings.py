"""The keyword arm's own index: postings and maintained statistics instead of a generated tsvector.

Lexemes now come from ``store_service.search.analysis`` (Python, the same function at index and query
time), so they cannot be a generated column. This migration creates the tables and drops the old
``tsv`` column and its GIN index. The re-index of existing memories that it ran until issue 7's
packed blocks is now 0012's (``lexical_index.reindex_all`` writes blocks, which do not exist yet
at this step); both run in the same ``migrate`` call, so no workspace is left without an index.
"""

from yoyo import step

__depends__ = {"0003_embedding_job_lease"}

SCHEMA = """
-- Maintained statistics of each partition (purpose, audience, superseded): the audience is the one
-- member of member-only memories, or the nil uuid for the whole workspace. Row count and total
-- length; a caller's statistics are the sums over the partitions it can read. No CHECK (>= 0) on
-- the counts: a decrement arrives as the proposed row of an upsert, which PostgreSQL checks before
-- it finds the conflict.
CREATE TABLE lexical_partition (
    id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    purpose text NOT NULL,
    audience uuid NOT NULL,
    superseded boolean NOT NULL,
    doc_count bigint NOT NULL,
    total_len bigint NOT NULL,
    UNIQUE (purpose, audience, superseded)
);

-- One row per indexed memory, whatever its text: its partition and length (distinct lexemes).
CREATE TABLE lexical_document (
    memory_id uuid PRIMARY KEY REFERENCES memory (id),
    partition_id integer NOT NULL REFERENCES lexical_partition (id),
    doc_len integer NOT NULL CHECK (doc_len >= 0)
);

-- One row per (memory, lexeme): the term frequency, with the partition and length repeated so a
-- term's postings in one partition are read in impact order (length per occurrence, ascending:
-- BM25's contribution falls as it grows) from the index alone. Written and deleted only with its
-- lexical_document row (no foreign key: a per-row trigger would cost more than the whole insert).
CREATE TABLE lexical_posting (
    memory_id uuid NOT NULL,
    lexeme text NOT NULL,
    partition_id integer NOT NULL,
    tf integer NOT NULL CHECK (tf >= 1),
    doc_len integer NOT NULL,
    len_per_tf double precision GENERATED ALWAYS AS (doc_len::double precision / tf) STORED,
    PRIMARY KEY (memory_id, lexeme) INCLUDE (tf, doc_len)
);
CREATE INDEX lexical_posting_stream ON lexical_posting (lexeme, partition_id, len_per_tf, memory_id)
    INCLUDE (tf, doc_len);

-- Document frequency of each lexeme per partition, and the largest term frequency seen (only ever
-- raised, so it stays an upper bound after deletes).
CREATE TABLE lexical_df (
    lexeme text NOT NULL,
    partition_id integer NOT NULL REFERENCES lexical_partition (id),
    df bigint NOT NULL,
    max_tf integer NOT NULL,
    PRIMARY KEY (lexeme, partition_id)
);
"""


def apply_step(conn):
    cur = conn.cursor()
    cur.execute("LOCK TABLE memory IN SHARE MODE")
    cur.execute(SCHEMA)
    cur.execute("DROP INDEX IF EXISTS memory_tsv_gin")
    cur.execute("ALTER TABLE memory DROP COLUMN IF EXISTS tsv")


steps = [step(apply_step)]
