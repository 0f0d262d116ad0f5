-- depends: 0012_workspace_names
-- Each workspace names the PostgreSQL server its database is on (docs/scaling.md, "Several database
-- servers"): a name from the store's configuration (RECALLATRON_DATABASE_SERVERS), never a
-- connection string, so no credential is kept in a table. NULL is the control plane's own server,
-- whatever it is called, which is where every workspace made before this migration lives.
ALTER TABLE workspace ADD COLUMN server text CHECK (server <> '');
