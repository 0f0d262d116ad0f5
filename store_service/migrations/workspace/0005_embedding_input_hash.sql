-- depends: 0004_lexical_postings
-- The sha256 of the exact embed input of each vector (embed_service.models.compose(title, body)),
-- so the embedding job can copy the vector of an identical text instead of embedding it again.
-- NULL for vectors written before this column existed (never reused until re-embedded).
ALTER TABLE memory_embedding ADD COLUMN input_sha256 bytea;
CREATE INDEX memory_embedding_input_hash ON memory_embedding (input_version, input_sha256)
    WHERE input_sha256 IS NOT NULL;
