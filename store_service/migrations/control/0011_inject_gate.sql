-- depends: 0010_expiry_gate
-- The relevance gate of per-turn recall (PromptContext; servicekit/relevance_gate.py): a preset by
-- name, or a minimum cosine of the workspace's own; both NULL is the default preset. A preset is kept
-- by name so that a refitted preset applies to every workspace that chose it.
ALTER TABLE workspace ADD COLUMN inject_gate text CHECK (inject_gate IN ('strict', 'default', 'loose'));
ALTER TABLE workspace ADD COLUMN inject_min_cosine double precision
    CHECK (inject_min_cosine BETWEEN 0 AND 1);
ALTER TABLE workspace ADD CONSTRAINT workspace_inject_one CHECK (inject_gate IS NULL OR inject_min_cosine IS NULL);
