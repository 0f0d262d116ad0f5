"""Pins, capture evidence and body keys (issue 11).

- ``memory_pin``: the memories each member pinned for its context bundle (store_service/records/context.py).
- ``capture`` and ``memory_evidence``: a Capture call's turn, request id and fingerprint, and for
  each memory it stored the span that states it (store_service/intake/capture.py).
- ``memory.body_key``: the sha256 of the body's match form (store_service/records/known.py), kept for every
  live memory so Capture's "already known" is one indexed lookup; existing live memories are
  filled by the data step ``body_keys`` (store_service/data_steps.py), recorded as due here.
"""

from yoyo import step

__depends__ = {"0008_import_key", "0008_data_steps"}

SCHEMA = """
ALTER TABLE memory ADD COLUMN body_key bytea;
CREATE INDEX memory_body_key ON memory (body_key) WHERE body_key IS NOT NULL;

-- A member's pins: readable memories it wants in its context bundle (filtered by readability when
-- read, so a pin never shows what its member may no longer read).
CREATE TABLE memory_pin (
    member_id uuid NOT NULL,
    memory_id uuid NOT NULL REFERENCES memory (id),
    pinned_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (member_id, memory_id)
);

-- One Capture call that stored a memory or carried a request id. turn is the conversation turn
-- (NULL when nothing was stored; '' once a memory taken from it was forgotten); outcomes the
-- serialised per-proposal results a retry answers with; fingerprint the sha256 of the request
-- (NULL once a memory taken from it was forgotten, as store_service/records/idempotency.py does).
CREATE TABLE capture (
    id uuid PRIMARY KEY,
    member_id uuid NOT NULL,
    request_id text,
    fingerprint bytea,
    turn text,
    outcomes bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (member_id, request_id)
);

-- The evidence of a captured memory: its capture and the span that states it ('' once forgotten).
CREATE TABLE memory_evidence (
    memory_id uuid PRIMARY KEY REFERENCES memory (id),
    capture_id uuid NOT NULL REFERENCES capture (id),
    span text NOT NULL
);
CREATE INDEX memory_evidence_capture ON memory_evidence (capture_id);
"""


def apply_step(conn):
    cur = conn.cursor()
    cur.execute(SCHEMA)
    cur.execute("INSERT INTO data_step_due (step) VALUES ('body_keys') ON CONFLICT DO NOTHING")


steps = [step(apply_step)]
