-- depends: 0014_capture_turn_stripped
-- PromptContext's session memory (store_service/records/prompt_sessions.py): which memory, at which revision,
-- was put in front of a model in a session, per member, keyed by the SHA-256 of the session key (the
-- key itself is never stored). Rows older than 24 hours are ignored and pruned; a forgotten memory's
-- rows go with it (Forget) and a removed member's with the member (RemoveMember).
CREATE TABLE prompt_shown (
    member_id uuid NOT NULL,
    session_sha256 bytea NOT NULL CHECK (octet_length(session_sha256) = 32),
    memory_id uuid NOT NULL,
    revision integer NOT NULL,
    shown_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (member_id, session_sha256, memory_id)
);
CREATE INDEX prompt_shown_memory ON prompt_shown (memory_id);
CREATE INDEX prompt_shown_at ON prompt_shown (shown_at);
