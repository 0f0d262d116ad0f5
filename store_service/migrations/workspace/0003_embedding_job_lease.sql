-- The embedding job claims work with a lease instead of holding row locks across the embed call.
ALTER TABLE embedding_job ADD COLUMN claimed_until timestamptz;
