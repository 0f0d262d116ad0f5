-- depends: 0021_successor_end
-- One entity per name a writer can see (docs/entities.md): a name given at a write is looked up by its
-- key (store_service/records/entities.py, name_key: the keyword arm's Unicode normalisation, case
-- folded, white space collapsed). The key is live code's to compute, so a data step fills it for the
-- entities written before (store_service/data_steps.py).
ALTER TABLE entity ADD COLUMN name_key text;
-- How a write with a request id resolved its names, so a retry answers what the first call did (its
-- names are stored text: a forget erases them with the body).
ALTER TABLE memory ADD COLUMN entity_resolutions jsonb;
CREATE INDEX entity_name_key ON entity (name_key);
INSERT INTO data_step_due (step) VALUES ('entity_name_keys') ON CONFLICT DO NOTHING;
