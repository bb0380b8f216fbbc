-- kubemedic schema, SQLite flavour. Timestamps are UTC text with a fixed width
-- (YYYY-MM-DDTHH:MM:SS.ffffffZ) so that text order is time order. Ids are hyphenated UUIDs.

CREATE TABLE remediation_requests (
    id                 TEXT PRIMARY KEY NOT NULL,
    phase              TEXT NOT NULL,
    reason             TEXT,
    active             BOOLEAN NOT NULL,
    target_kind        TEXT,
    target_name        TEXT,
    target_namespace   TEXT,
    target_fingerprint TEXT NOT NULL,
    signal_name        TEXT NOT NULL,
    severity           TEXT,
    signal_mode        TEXT NOT NULL,
    signal             TEXT NOT NULL,          -- JSON: the signal that opened the request
    occurrence_count   INTEGER NOT NULL,
    first_seen         TEXT NOT NULL,
    last_seen          TEXT NOT NULL,
    created_at         TEXT NOT NULL,
    updated_at         TEXT NOT NULL,
    claimed_by         TEXT,
    lease_until        TEXT,
    not_before         TEXT,
    attempts           INTEGER NOT NULL DEFAULT 0,
    state              TEXT NOT NULL DEFAULT '{}'  -- JSON: typed stage results
);
CREATE INDEX remediation_requests_runnable ON remediation_requests (active, created_at);
CREATE INDEX remediation_requests_phase ON remediation_requests (phase, created_at);
CREATE INDEX remediation_requests_namespace ON remediation_requests (target_namespace, created_at);

-- Target fingerprints held by requests. At most one active request per fingerprint.
CREATE TABLE request_targets (
    fingerprint TEXT NOT NULL,
    request_id  TEXT NOT NULL,
    active      BOOLEAN NOT NULL,
    PRIMARY KEY (fingerprint, request_id)
);
CREATE UNIQUE INDEX request_targets_one_active ON request_targets (fingerprint) WHERE active;
CREATE INDEX request_targets_request ON request_targets (request_id);

CREATE TABLE signals (
    id                 TEXT PRIMARY KEY NOT NULL,
    fingerprint        TEXT NOT NULL,
    starts_at          TEXT NOT NULL,
    status             TEXT NOT NULL,
    ends_at            TEXT,
    name               TEXT NOT NULL,
    severity           TEXT,
    mode               TEXT NOT NULL,
    source             TEXT NOT NULL,
    labels             TEXT NOT NULL,
    annotations        TEXT NOT NULL,
    generator_url      TEXT,
    receiver           TEXT,
    group_key          TEXT,
    target_kind        TEXT,
    target_name        TEXT,
    target_namespace   TEXT,
    target_fingerprint TEXT NOT NULL,
    request_id         TEXT REFERENCES remediation_requests (id),
    received_at        TEXT NOT NULL,
    resolved_at        TEXT,
    UNIQUE (fingerprint, starts_at)
);
CREATE INDEX signals_received ON signals (received_at);
CREATE INDEX signals_request ON signals (request_id);

CREATE TABLE audit_events (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    request_id TEXT,
    at         TEXT NOT NULL,
    phase      TEXT,
    kind       TEXT NOT NULL,
    actor      TEXT NOT NULL,
    message    TEXT NOT NULL,
    payload    TEXT NOT NULL
);
CREATE INDEX audit_events_request ON audit_events (request_id, id);

-- The audit trail is append-only, whatever a caller tries.
CREATE TRIGGER audit_events_no_update BEFORE UPDATE ON audit_events
BEGIN
    SELECT RAISE(ABORT, 'audit_events is append-only');
END;
CREATE TRIGGER audit_events_no_delete BEFORE DELETE ON audit_events
BEGIN
    SELECT RAISE(ABORT, 'audit_events is append-only');
END;
