-- depends: 0015_prompt_shown
-- Time windows (store_service/records/windows.py): when a memory was said is its occurred_at, or when
-- it was written if it has none. Stored, so one index serves every window: a narrow window is read
-- from the index instead of testing every candidate.
ALTER TABLE memory ADD COLUMN said_at timestamptz GENERATED ALWAYS AS (coalesce(occurred_at, created_at)) STORED;
CREATE INDEX memory_said_at ON memory (said_at, id) WHERE forgotten_at IS NULL;
