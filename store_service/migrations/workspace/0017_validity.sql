-- depends: 0016_said_at
-- Validity (docs/time.md, "Validity"; store_service/records/validity.py). A memory is valid from
-- valid_from: the instant its writer gave (valid_from_given), else its occurred_at, else when it was
-- written; generated, so every writer gets the rule. It is valid until valid_until: its successor's
-- valid_from once superseded, or an Invalidate's end. retired_at is when it left current recall
-- (superseded or invalidated: write time), which is what known_at reads.
ALTER TABLE memory ADD COLUMN valid_from_given timestamptz;
ALTER TABLE memory ADD COLUMN valid_from timestamptz
    GENERATED ALWAYS AS (coalesce(valid_from_given, occurred_at, created_at)) STORED;
ALTER TABLE memory ADD COLUMN valid_until timestamptz;
ALTER TABLE memory ADD COLUMN retired_at timestamptz;
ALTER TABLE memory ADD COLUMN invalidated boolean NOT NULL DEFAULT false;
-- Memories superseded before validity existed: their end is their successor's start (never before
-- their own), and they left recall when the successor was written, or when they were last touched
-- if the successor is older (a duplicate decision kept the older memory).
UPDATE memory m
   SET valid_until = greatest(s.valid_from, m.valid_from),
       retired_at = CASE WHEN s.created_at >= m.created_at THEN s.created_at ELSE m.updated_at END
  FROM memory s
 WHERE s.id = m.superseded_by_id;
ALTER TABLE memory ADD CONSTRAINT memory_validity_order CHECK (valid_until IS NULL OR valid_until >= valid_from);
ALTER TABLE memory ADD CONSTRAINT memory_retired CHECK ((retired_at IS NULL) = (superseded_by_id IS NULL AND NOT invalidated));
-- What a revision's validity started at while it was current (known_at reads it).
ALTER TABLE memory_revision ADD COLUMN valid_from timestamptz;
