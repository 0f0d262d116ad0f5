-- depends: 0007_embedding_job_claimant
-- Data steps a migration leaves to the store's live code (store_service/data_steps.py): a migration
-- changes the schema with SQL alone and records here the step its data needs (filling a new column
-- from a Python function, rebuilding the keyword index); the store runs every recorded step right
-- after migrating the database, before it serves it, and deletes the row in the step's transaction.
-- So an old migration never runs today's code, and a step interrupted is run again at the next start.
CREATE TABLE data_step_due (
    step text PRIMARY KEY
);
