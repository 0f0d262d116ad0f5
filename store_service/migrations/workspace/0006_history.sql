-- depends: 0005_embedding_input_hash
-- History evidence (store_service/history/turns.py): conversation turns kept for their owner alone. Never
-- memories: no row here is read by recall, Read, FindEntities, the memory statistics or status.

-- One conversation turn of one member. A forgotten turn keeps only its id, owner, request id and
-- forgotten_at (so a retry with that request id is not stored again); one without a request id is
-- deleted outright.
CREATE TABLE history_turn (
    id uuid PRIMARY KEY,
    -- Arrival order: orders turns of the same instant.
    seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    owner_member_id uuid NOT NULL,
    request_id text,
    chat_id text,
    role text CHECK (role IN ('user', 'assistant')),
    text text NOT NULL DEFAULT '',
    occurred_at timestamptz,
    -- The session as appended (NULL: none given) and the session in force (given, or computed from
    -- the turn's run of one chat with no gap over two hours).
    session_id text,
    session text,
    -- Distinct lexemes of the text (BM25's document length).
    doc_len integer NOT NULL DEFAULT 0 CHECK (doc_len >= 0),
    created_at timestamptz NOT NULL DEFAULT now(),
    forgotten_at timestamptz,
    UNIQUE (owner_member_id, request_id),
    CHECK ((forgotten_at IS NULL) = (chat_id IS NOT NULL AND role IS NOT NULL AND occurred_at IS NOT NULL
                                     AND session IS NOT NULL)),
    CHECK (forgotten_at IS NULL OR (text = '' AND session_id IS NULL AND doc_len = 0))
);
CREATE INDEX history_turn_time ON history_turn (owner_member_id, occurred_at, seq) WHERE forgotten_at IS NULL;
CREATE INDEX history_turn_chat ON history_turn (owner_member_id, chat_id, occurred_at) WHERE forgotten_at IS NULL;
CREATE INDEX history_turn_session ON history_turn (owner_member_id, session, occurred_at)
    WHERE forgotten_at IS NULL;

-- The keyword index: one row per (live turn, lexeme of store_service.search.analysis), keyed by owner first
-- so a search reads only its caller's postings. Written and deleted only with its turn's text (no
-- foreign key, as lexical_posting: a per-row trigger would cost more than the insert).
CREATE TABLE history_posting (
    owner_member_id uuid NOT NULL,
    lexeme text NOT NULL,
    turn_id uuid NOT NULL,
    tf integer NOT NULL CHECK (tf >= 1),
    doc_len integer NOT NULL,
    PRIMARY KEY (owner_member_id, lexeme, turn_id) INCLUDE (tf, doc_len)
);
CREATE INDEX history_posting_turn ON history_posting (turn_id);

-- Maintained BM25 statistics of each owner's live turns: document frequency per lexeme (rows at 0
-- are deleted), and the turn count and total length.
CREATE TABLE history_df (
    owner_member_id uuid NOT NULL,
    lexeme text NOT NULL,
    df bigint NOT NULL,
    PRIMARY KEY (owner_member_id, lexeme)
);
CREATE TABLE history_stats (
    owner_member_id uuid PRIMARY KEY,
    doc_count bigint NOT NULL,
    total_len bigint NOT NULL
);
