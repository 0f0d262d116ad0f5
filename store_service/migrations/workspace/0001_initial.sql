-- One workspace's memories (docs/architecture.md, "Data model").
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE memory (
    id uuid PRIMARY KEY,
    kind text NOT NULL CHECK (kind IN ('note', 'fact', 'decision', 'summary')),
    title text NOT NULL DEFAULT '',
    body text NOT NULL DEFAULT '',
    -- Explicit text search configuration; title (A) and body (B) weighted separately.
    tsv tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('english'::regconfig, title), 'A') ||
        setweight(to_tsvector('english'::regconfig, body), 'B')) STORED,
    -- NULL: the whole workspace; otherwise the one member who may read it.
    audience_member_id uuid,
    purpose text NOT NULL CHECK (purpose IN ('conversation', 'tasks', 'reporting', 'administration')),
    confidence double precision NOT NULL DEFAULT 1 CHECK (confidence BETWEEN 0 AND 1),
    origin text NOT NULL CHECK (origin IN ('told', 'derived', 'migrated')),
    revision bigint NOT NULL DEFAULT 1 CHECK (revision >= 1),
    superseded_by_id uuid REFERENCES memory (id),
    invalidation_reason text,
    forgotten_at timestamptz,
    created_by uuid NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    occurred_at timestamptz,
    request_id text,
    UNIQUE (created_by, request_id)
);
CREATE INDEX memory_tsv_gin ON memory USING gin (tsv);
CREATE INDEX memory_recall ON memory (purpose, audience_member_id) WHERE forgotten_at IS NULL;

-- Earlier revisions of corrected memories: readable history, never searchable.
CREATE TABLE memory_revision (
    memory_id uuid NOT NULL REFERENCES memory (id),
    revision bigint NOT NULL,
    title text NOT NULL,
    body text NOT NULL,
    confidence double precision NOT NULL,
    replaced_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (memory_id, revision)
);

-- Entities exist only as mentions: a UUID and a name, never merged.
CREATE TABLE entity (
    id uuid PRIMARY KEY,
    name text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX entity_name ON entity (lower(name));

-- Provenance, written at creation and never edited.
CREATE TABLE memory_link (
    memory_id uuid NOT NULL REFERENCES memory (id),
    link_type text NOT NULL CHECK (link_type IN ('derived_from', 'about')),
    target_memory_id uuid REFERENCES memory (id),
    target_entity_id uuid REFERENCES entity (id),
    CHECK ((link_type = 'derived_from') = (target_memory_id IS NOT NULL)),
    CHECK ((link_type = 'about') = (target_entity_id IS NOT NULL))
);
CREATE INDEX memory_link_from ON memory_link (memory_id);
CREATE INDEX memory_link_to_memory ON memory_link (target_memory_id) WHERE target_memory_id IS NOT NULL;
CREATE INDEX memory_link_to_entity ON memory_link (target_entity_id) WHERE target_entity_id IS NOT NULL;

-- The derived vector index: one vector per memory, stamped with its revision and input version.
CREATE TABLE memory_embedding (
    memory_id uuid PRIMARY KEY REFERENCES memory (id) ON DELETE CASCADE,
    memory_revision bigint NOT NULL,
    model_id text NOT NULL,
    input_version text NOT NULL,
    embedding vector(384) NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX memory_embedding_hnsw ON memory_embedding USING hnsw (embedding vector_cosine_ops);

-- Embedding work, queued in the same transaction as the memory write.
CREATE TABLE embedding_job (
    memory_id uuid PRIMARY KEY REFERENCES memory (id) ON DELETE CASCADE,
    memory_revision bigint NOT NULL,
    attempts integer NOT NULL DEFAULT 0,
    enqueued_at timestamptz NOT NULL DEFAULT now()
);
