"""Packed posting blocks for the keyword arm (issue 7; docs/retrieval.md, "Packed posting blocks").

- ``lexical_document.doc_no``: a number per indexed document (from ``lexical_doc_no``), the key of
  a posting inside a block (8 bytes where the uuid would be 16, and a dense integer to sum scores by);
- ``lexical_block``: per (lexeme, partition), rows of up to ``lexical_index.BLOCK_POSTINGS`` (112)
  postings packed as ``lexical_index.POSTING`` records (doc_no int8, tf int4, length int4,
  little-endian); the keyword arm reads a term's postings as a few rows of bytes;
- ``lexical_posting.block_id``: the block holding the posting's copy, so forget, supersede and
  correct rewrite only the blocks they touch;
- ``lexical_df.open_block``: the block the next postings of that (lexeme, partition) go into;
- the impact-ordered ``lexical_posting_stream`` index and its ``len_per_tf`` column go: nothing
  reads them any more (the early-stopping readings they served were dropped in session 5).

The index is emptied here and rebuilt from the memory rows by the data step ``lexical_index``
(store_service/data_steps.py: ``lexical_index.reindex_all``), recorded as due here and run when the
store has migrated the database, before it serves it; about 2,000 memories a second (bench/RESULTS.md).
"""

from yoyo import step

__depends__ = {"0010_curation_pairs", "0011_expiry"}

SCHEMA = """
CREATE SEQUENCE lexical_doc_no AS bigint;
ALTER TABLE lexical_document ADD COLUMN doc_no bigint DEFAULT nextval('lexical_doc_no');
CREATE SEQUENCE lexical_block_id AS bigint;
-- fillfactor: an append rewrites the block's row; room on its page keeps the new version there.
CREATE TABLE lexical_block (
    id bigint PRIMARY KEY,
    lexeme text NOT NULL,
    partition_id integer NOT NULL REFERENCES lexical_partition (id),
    n integer NOT NULL CHECK (n BETWEEN 1 AND 112),
    postings bytea NOT NULL
) WITH (fillfactor = 70);
-- Uncompressed: the postings are read whole on every question; pglz would cost more than it saves.
ALTER TABLE lexical_block ALTER COLUMN postings SET STORAGE EXTERNAL;
CREATE INDEX lexical_block_term ON lexical_block (lexeme, partition_id);
-- The block an append of this (lexeme, partition) fills first (NULL or a deleted block: none).
-- Kept here, on the row every write of the key upserts anyway, rather than in a partial index on
-- lexical_block.n: an append then changes no indexed column of the block (an in-place HOT update).
ALTER TABLE lexical_df ADD COLUMN open_block bigint;
ALTER TABLE lexical_posting ADD COLUMN block_id bigint;
DROP INDEX IF EXISTS lexical_posting_stream;
ALTER TABLE lexical_posting DROP COLUMN IF EXISTS len_per_tf;
"""

# The index is rebuilt whole by the data step, so its rows are dropped first: the postings written
# before have no block, and the columns below cannot be NOT NULL while they remain.
FINISH = """
TRUNCATE lexical_block, lexical_posting, lexical_df, lexical_document, lexical_partition;
ALTER TABLE lexical_document ALTER COLUMN doc_no SET NOT NULL;
CREATE UNIQUE INDEX lexical_document_doc_no ON lexical_document (doc_no) INCLUDE (memory_id);
ALTER TABLE lexical_posting ALTER COLUMN block_id SET NOT NULL;
"""


def apply_step(conn):
    cur = conn.cursor()
    cur.execute(SCHEMA)
    cur.execute(FINISH)
    cur.execute("INSERT INTO data_step_due (step) VALUES ('lexical_index') ON CONFLICT DO NOTHING")


steps = [step(apply_step)]
