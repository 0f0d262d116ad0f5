-- depends: 0021_successor_end
-- A read in time's bounds beside each vector (store_service/records/windows.py, Window.vector_condition):
-- the meaning arm's filtered HNSW scan tests each row it visits, and with the bounds on the memory
-- row alone every visited vector cost a lookup of its memory, most of them outside a window holding
-- a few percent of the workspace (1,092 lookups for 100 rows kept, a third of the read, at 100,000).
-- Only live memories have vectors, so a memory's said_at, valid_from and created_at are all a read in
-- time tests of them (alone or with as_of, known_at needs the revision of then, read from memory).
-- The copies are the database's to keep, as generated columns are: set on every write of a vector,
-- and followed when the memory's times change.
ALTER TABLE memory_embedding ADD COLUMN said_at timestamptz;
ALTER TABLE memory_embedding ADD COLUMN valid_from timestamptz;
ALTER TABLE memory_embedding ADD COLUMN memory_created_at timestamptz;
UPDATE memory_embedding e
   SET said_at = m.said_at, valid_from = m.valid_from, memory_created_at = m.created_at
  FROM memory m
 WHERE m.id = e.memory_id;

CREATE FUNCTION memory_embedding_times() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    SELECT m.said_at, m.valid_from, m.created_at
      INTO NEW.said_at, NEW.valid_from, NEW.memory_created_at
      FROM memory m WHERE m.id = NEW.memory_id;
    RETURN NEW;
END $$;
CREATE TRIGGER memory_embedding_times BEFORE INSERT OR UPDATE ON memory_embedding
    FOR EACH ROW EXECUTE FUNCTION memory_embedding_times();

CREATE FUNCTION memory_times_to_vectors() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE memory_embedding
       SET said_at = NEW.said_at, valid_from = NEW.valid_from, memory_created_at = NEW.created_at
     WHERE memory_id = NEW.id;
    RETURN NULL;
END $$;
CREATE TRIGGER memory_times_to_vectors AFTER UPDATE OF occurred_at, valid_from_given, created_at ON memory
    FOR EACH ROW
    WHEN (OLD.said_at IS DISTINCT FROM NEW.said_at OR OLD.valid_from IS DISTINCT FROM NEW.valid_from
          OR OLD.created_at IS DISTINCT FROM NEW.created_at)
    EXECUTE FUNCTION memory_times_to_vectors();
