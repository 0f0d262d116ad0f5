-- depends: 0022_entity_name_key
-- Reviewed merges (docs/entities.md, "Merges and aliases"): a person merges entity B into A, and B's
-- mentions count as A's while the merge stands. Links are never rewritten: a merge is a row here, so
-- undoing it is exact. A reader sees a merge only when they can see both of its entities, so a
-- reader's entity is the connected group of the standing merges they can see (computed per read,
-- store_service/records/entities.py).
CREATE TABLE entity_merge (
    id uuid PRIMARY KEY,
    entity_id uuid NOT NULL REFERENCES entity (id),
    into_id uuid NOT NULL REFERENCES entity (id),
    merged_by uuid NOT NULL,
    reason text NOT NULL DEFAULT '',
    merged_at timestamptz NOT NULL DEFAULT now(),
    undone_by uuid,
    undone_at timestamptz,
    CHECK (entity_id <> into_id)
);
-- At most one standing merge of B into A; the standing merges from and to an entity.
CREATE UNIQUE INDEX entity_merge_standing ON entity_merge (entity_id, into_id) WHERE undone_at IS NULL;
CREATE INDEX entity_merge_into ON entity_merge (into_id) WHERE undone_at IS NULL;
