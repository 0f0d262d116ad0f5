"""Pins, capture evidence and body keys (issue 11).

- ``memory_pin``: the memories each member pinned for its context bundle (store_service/records/context.py).
- ``capture`` and ``memory_evidence``: a Capture call's turn, request id and fingerprint, and for
  each memory it stored the span that states it (store_service/intake/capture.py).
- ``memory.body_key``: the sha256 of the body's match form (store_service/records/known.py), kept for every
  live memory so Capture's "already known" is one indexed lookup; existing live memories are
  filled here in batches (memories stay readable; writes wait for it to finish).
"""

from yoyo import step

__depends__ = {"0008_import_key"}

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
BATCH = 1_000


def apply_step(conn):
    from store_service.records.known import body_key

    cur = conn.cursor()
    cur.execute("LOCK TABLE memory IN SHARE MODE")
    cur.execute(SCHEMA)
    last = None
    while True:
        cur.execute(
            "SELECT id, body FROM memory WHERE forgotten_at IS NULL AND (%s::uuid IS NULL OR id > %s) "
            "ORDER BY id LIMIT %s",
            (last, last, BATCH),
        )
        rows = cur.fetchall()
        if not rows:
            break
        cur.execute(
            "UPDATE memory m SET body_key = u.k FROM unnest(%s::uuid[], %s::bytea[]) AS u(i, k) WHERE m.id = u.i",
            ([r[0] for r in rows], [body_key(r[1]) for r in rows]),
        )
        last = rows[-1][0]


steps = [step(apply_step)]
