-- depends: 0011_inject_gate
-- Workspace names become unique, case-insensitively, so that a name can stand wherever a workspace id
-- does (docs/operations.md). A name that spells a UUID becomes "workspace <name>". Workspaces that
-- shared a name before keep theirs in creation order: the
-- oldest keeps the name, each later one is renamed "<name> (2)", "<name> (3)" ... (the first such
-- name free), and every rename is recorded in workspace_renamed, which GetWorkspace (`recallatron
-- workspace show`) reports as renamed_from, so nothing is lost or renamed silently.
CREATE TABLE workspace_renamed (
    workspace_id uuid PRIMARY KEY REFERENCES workspace (id) ON DELETE CASCADE,
    old_name text NOT NULL,
    new_name text NOT NULL,
    renamed_at timestamptz NOT NULL DEFAULT now()
);

DO $$
DECLARE
    dup record;
    k int;
    candidate text;
BEGIN
    -- A name that spells a UUID could pass for another workspace's id: it becomes "workspace <name>".
    FOR dup IN SELECT id, name FROM workspace ORDER BY created_at, id LOOP
        BEGIN
            PERFORM dup.name::uuid;
        EXCEPTION WHEN invalid_text_representation THEN
            CONTINUE;
        END;
        k := 1;
        LOOP
            candidate := 'workspace ' || dup.name || CASE WHEN k = 1 THEN '' ELSE ' (' || k || ')' END;
            EXIT WHEN NOT EXISTS (SELECT 1 FROM workspace WHERE lower(name) = lower(candidate));
            k := k + 1;
        END LOOP;
        UPDATE workspace SET name = candidate WHERE id = dup.id;
        INSERT INTO workspace_renamed (workspace_id, old_name, new_name) VALUES (dup.id, dup.name, candidate);
    END LOOP;
    FOR dup IN
        SELECT id, name FROM (
            SELECT id, name, row_number() OVER (PARTITION BY lower(name) ORDER BY created_at, id) AS n
              FROM workspace) ranked
         WHERE n > 1
         ORDER BY lower(name), n
    LOOP
        k := 2;
        LOOP
            candidate := left(dup.name, 190) || ' (' || k || ')';
            EXIT WHEN NOT EXISTS (SELECT 1 FROM workspace WHERE lower(name) = lower(candidate));
            k := k + 1;
        END LOOP;
        UPDATE workspace SET name = candidate WHERE id = dup.id;
        INSERT INTO workspace_renamed (workspace_id, old_name, new_name) VALUES (dup.id, dup.name, candidate)
            ON CONFLICT (workspace_id) DO UPDATE SET new_name = EXCLUDED.new_name;
    END LOOP;
END
$$;

CREATE UNIQUE INDEX workspace_name_unique ON workspace (lower(name));

-- A workspace being deleted (AdminService.DeleteWorkspace): set first, in the transaction that stops
-- its tokens; its database is dropped next and its rows deleted last, so an interrupted deletion is
-- found and finished by the next call.
ALTER TABLE workspace ADD COLUMN deleted_at timestamptz;

-- ListMembers pages a workspace's members oldest first.
CREATE INDEX member_workspace_created ON member (workspace_id, created_at, id);
