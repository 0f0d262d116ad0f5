-- depends: 0001_initial
-- The context bundle (GetContext, gateway/context.py) is opt-in per workspace: off until an operator
-- turns it on with UpdateWorkspaceSettings.
ALTER TABLE workspace ADD COLUMN context_bundle boolean NOT NULL DEFAULT false;
