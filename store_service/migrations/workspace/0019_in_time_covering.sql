-- depends: 0018_in_time_indexes
-- Whether a read in time is narrow (store_service/records/windows.py, narrow_ids) is counted from these
-- indexes alone: each holds every column its test reads (as_of: valid_from and valid_until; known_at:
-- created_at and retired_at), so the count is an index-only scan and reads no memory row. Counting
-- 1,700 memories through the heap took 5.7 ms, index-only 0.5 ms (10,000 memories, a bench workspace).
DROP INDEX memory_valid_from;
CREATE INDEX memory_valid_from ON memory (valid_from, id) INCLUDE (valid_until) WHERE forgotten_at IS NULL;
DROP INDEX memory_created_at;
CREATE INDEX memory_created_at ON memory (created_at, id) INCLUDE (retired_at) WHERE forgotten_at IS NULL;
