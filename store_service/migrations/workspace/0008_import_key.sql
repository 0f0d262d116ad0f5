-- depends: 0007_embedding_job_claimant
-- Imports (store_service/intake/imports.py): a memory or entity brought in by AdminService.ImportMemories
-- keeps the import key it came under (`legacy:item:42`, `export:<old id>`), so a re-run, or a run
-- killed half way and run again, finds it and writes nothing twice. Kept after a forget, as a
-- request id is, so a re-run does not bring a forgotten memory back. NULL for everything else.
ALTER TABLE memory ADD COLUMN import_key text UNIQUE CHECK (length(import_key) BETWEEN 1 AND 200),
    -- Why the author held it, as the import brought it (a legacy item's reason); erased by a forget.
    ADD COLUMN reason text;
ALTER TABLE entity ADD COLUMN import_key text UNIQUE CHECK (length(import_key) BETWEEN 1 AND 200);
