-- depends: 0024_entity_statements
-- Who made each revision (docs/operations.md, "Names"): memory.revised_by is who made the current
-- revision (NULL for revision 1, which its author made, and for revisions made before this was
-- recorded); memory_revision.revised_by is who made that earlier revision, copied from the memory
-- when a Correct replaces it.
ALTER TABLE memory ADD COLUMN revised_by uuid;
ALTER TABLE memory_revision ADD COLUMN revised_by uuid;
