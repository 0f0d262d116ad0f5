-- depends: 0006_request_fingerprint
-- The backend (pg_backend_pid()) of the connection that claimed a job. A claim whose backend is gone
-- (its store process died, or the server restarted) is free to take at once rather than when its
-- lease runs out, so the embeddings catch up within seconds of a store's kill -9.
ALTER TABLE embedding_job ADD COLUMN claimed_by integer;
