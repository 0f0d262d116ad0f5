-- depends: 0022_entity_name_key
-- Reviewed merges (docs/entities.md, "Merges and aliases"): a person merges entity B into A, and B's
-- mentions count as A's while the merge stands. Links are never rewritten: a merge is a pointer from
-- B to A, so undoing it is exact. Merges are flat (A is never itself merged), so an entity's group is
-- its root and the entities pointing at it.
ALTER TABLE entity ADD COLUMN merged_into uuid REFERENCES entity (id);
CREATE INDEX entity_merged_into ON entity (merged_into) WHERE merged_into IS NOT NULL;
-- Who merged what into what, when and why, and who undid it when.
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
-- At most one standing merge per entity.
CREATE UNIQUE INDEX entity_merge_standing ON entity_merge (entity_id) WHERE undone_at IS NULL;
