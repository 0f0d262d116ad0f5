-- depends: 0009_pins_capture
-- The expiry gate (store_service/access/expiry.py): ListExpiringMemories reads the live memories last updated
-- at or before a cutoff, oldest first; this index finds them without reading the recent ones.
CREATE INDEX memory_updated_at ON memory (updated_at, id) WHERE forgotten_at IS NULL;
