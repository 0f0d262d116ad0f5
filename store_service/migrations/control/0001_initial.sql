-- Control plane: workspaces, members and credentials. Each workspace's memories live in its own database.
CREATE TABLE workspace (
    id uuid PRIMARY KEY,
    name text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    db_name text NOT NULL UNIQUE,
    dense_floor double precision NOT NULL DEFAULT 0.30 CHECK (dense_floor BETWEEN 0 AND 1),
    default_mode text NOT NULL DEFAULT 'hybrid' CHECK (default_mode IN ('lexical', 'dense', 'hybrid')),
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE member (
    id uuid PRIMARY KEY,
    workspace_id uuid NOT NULL REFERENCES workspace (id),
    role text NOT NULL CHECK (role IN ('member', 'admin')),
    display_name text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Only the SHA-256 of a token is stored.
CREATE TABLE credential (
    id uuid PRIMARY KEY,
    member_id uuid NOT NULL REFERENCES member (id),
    token_sha256 bytea NOT NULL UNIQUE,
    purposes text[] NOT NULL CHECK (cardinality(purposes) >= 1),
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz
);
