-- The dashboard (DESIGN §3.10): API keys and browser sessions (digests only), the keyed hash
-- chain of the audit trail, and per-request figures the summary aggregates without reading
-- the request's JSON state.

CREATE TABLE api_keys (
    id         TEXT PRIMARY KEY NOT NULL,
    name       TEXT NOT NULL,
    role       TEXT NOT NULL,           -- viewer | approver | admin
    key_hash   TEXT NOT NULL UNIQUE,    -- hex SHA-256 of the key
    prefix     TEXT NOT NULL,
    created_at TEXT NOT NULL,
    created_by TEXT NOT NULL,
    revoked_at TEXT
);
CREATE UNIQUE INDEX api_keys_active_name ON api_keys (name) WHERE revoked_at IS NULL;

CREATE TABLE sessions (
    token_hash TEXT PRIMARY KEY,        -- hex SHA-256 of the cookie's token
    subject    TEXT NOT NULL,
    key_id     TEXT,
    role       TEXT NOT NULL,
    csrf       TEXT NOT NULL,
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL
);
CREATE INDEX sessions_expires ON sessions (expires_at);

ALTER TABLE audit_events ADD COLUMN prev_hash TEXT;
ALTER TABLE audit_events ADD COLUMN hash TEXT;
ALTER TABLE audit_events ADD COLUMN key_id TEXT;

ALTER TABLE remediation_requests ADD COLUMN auto_approved BOOLEAN;
ALTER TABLE remediation_requests ADD COLUMN tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE remediation_requests ADD COLUMN finished_at TEXT;
ALTER TABLE remediation_requests ADD COLUMN ttr_ms INTEGER;   -- finished_at - created_at
ALTER TABLE remediation_requests ADD COLUMN effectiveness REAL;
ALTER TABLE remediation_requests ADD COLUMN guardrail TEXT;
CREATE INDEX remediation_requests_created ON remediation_requests (created_at, id);
CREATE INDEX remediation_requests_signal_name ON remediation_requests (signal_name, created_at);
CREATE INDEX remediation_requests_target_name ON remediation_requests (target_name, created_at);
-- What the summary reads of the requests in its period, in one covering index: its queries
-- never touch the rows (on SQLite these columns sit after the JSON state, in overflow pages;
-- Postgres answers from the index alone). The median time to resolution walks completed
-- requests in ttr order.
CREATE INDEX remediation_requests_figures ON remediation_requests
    (created_at, phase, auto_approved, guardrail, effectiveness, ttr_ms, tokens);
CREATE INDEX remediation_requests_ttr ON remediation_requests (phase, ttr_ms, created_at);
