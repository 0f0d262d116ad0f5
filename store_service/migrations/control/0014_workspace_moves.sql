-- depends: 0013_workspace_server
-- A move of a workspace to another database server (docs/scaling.md, "Moving a workspace") is
-- recorded on its row, so that a move that stops half way is seen and finished by the next call:
-- moving_to, the server a move is copying it to (NULL when none runs or ran unfinished); moved_from,
-- the server it was switched away from while its old database is not yet dropped.
ALTER TABLE workspace
    ADD COLUMN moving_to text CHECK (moving_to <> ''),
    ADD COLUMN moved_from text CHECK (moved_from <> '');
