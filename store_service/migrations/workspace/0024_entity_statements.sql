-- depends: 0023_entity_merge
-- Relations and attributes stated by memories (docs/entities.md, "Relations and attributes"): written
-- with their memory and never edited; readable, current and valid exactly when their memory is, and
-- deleted when it is forgotten (they are its text).
CREATE TABLE entity_relation (
    memory_id uuid NOT NULL REFERENCES memory (id),
    ordinal int NOT NULL,
    subject_id uuid NOT NULL REFERENCES entity (id),
    predicate text NOT NULL,
    object_id uuid NOT NULL REFERENCES entity (id),
    PRIMARY KEY (memory_id, ordinal)
);
CREATE INDEX entity_relation_subject ON entity_relation (subject_id);
CREATE INDEX entity_relation_object ON entity_relation (object_id);
CREATE TABLE entity_attribute (
    memory_id uuid NOT NULL REFERENCES memory (id),
    ordinal int NOT NULL,
    subject_id uuid NOT NULL REFERENCES entity (id),
    key text NOT NULL,
    value text NOT NULL,
    PRIMARY KEY (memory_id, ordinal)
);
CREATE INDEX entity_attribute_subject ON entity_attribute (subject_id);
-- Entities an import wrote after 0022 without their name key (store_service/intake/imports.py now
-- writes it): the data step fills the keys still missing.
INSERT INTO data_step_due (step) VALUES ('entity_name_keys') ON CONFLICT DO NOTHING;
