-- depends: 0009_pins_capture
-- Curation by people (issue 9; docs/curation.md; store_service/curation/review.py, conflict_flags.py).

-- Pairs a person kept as both (DecideDuplicateProposal, keep both): never proposed again, to anyone
-- (a proposal shows only to callers who can read both memories, so the row hides nothing from
-- anyone who could have seen the pair). Stored once per pair, the smaller id first.
CREATE TABLE duplicate_kept (
    low_id uuid NOT NULL REFERENCES memory (id),
    high_id uuid NOT NULL REFERENCES memory (id),
    kept_by uuid NOT NULL,
    kept_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (low_id, high_id),
    CHECK (low_id < high_id)
);
CREATE INDEX duplicate_kept_high ON duplicate_kept (high_id);

-- A memory of confidence 0.8 or more superseded by one of 0.8 or more, written in the transaction
-- that superseded it: both stay, the older pointing to the newer (superseded_by_id), for a person to
-- acknowledge or undo. A memory is superseded once, so it is the older of one flag at most.
-- restored_id is the memory an undo wrote (the newer's successor, carrying the older's text).
CREATE TABLE conflict_flag (
    id uuid PRIMARY KEY,
    older_id uuid NOT NULL UNIQUE REFERENCES memory (id),
    newer_id uuid NOT NULL REFERENCES memory (id),
    flagged_at timestamptz NOT NULL DEFAULT now(),
    state text NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'acknowledged', 'undone')),
    resolved_by uuid,
    resolved_at timestamptz,
    restored_id uuid REFERENCES memory (id),
    CHECK ((state = 'open') = (resolved_at IS NULL)),
    CHECK ((state = 'undone') = (restored_id IS NOT NULL))
);
CREATE INDEX conflict_flag_newest ON conflict_flag (flagged_at DESC, id DESC);
CREATE INDEX conflict_flag_newer ON conflict_flag (newer_id);
