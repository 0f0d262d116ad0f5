-- Finding vectors of another input version (a model or composition change) must not scan them all.
CREATE INDEX memory_embedding_input_version ON memory_embedding (input_version);
