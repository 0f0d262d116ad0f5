-- depends: 0019_in_time_covering
-- The keyword arm tests a wide window's (and the expiry gate's) rows by memory id in the statement that
-- maps its best document numbers to memories (store_service/search/candidates.py, _BlockScores.top):
-- this index holds every column those tests read, so thousands of rows are tested without reading the
-- memory rows, whose bodies make them wide.
CREATE INDEX memory_time ON memory (id) INCLUDE (said_at, valid_from, valid_until, created_at, retired_at, updated_at)
    WHERE forgotten_at IS NULL;
