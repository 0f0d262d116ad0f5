-- depends: 0017_validity
-- Reads in time (store_service/records/windows.py): an as_of or known_at that few memories pass is
-- read from these indexes (valid_from <= as_of; created_at <= known_at), as a narrow time window is
-- from memory_said_at, instead of testing the arms' top rows one by one.
CREATE INDEX memory_valid_from ON memory (valid_from, id) WHERE forgotten_at IS NULL;
CREATE INDEX memory_created_at ON memory (created_at, id) WHERE forgotten_at IS NULL;
