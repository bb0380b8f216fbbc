-- kubemedic schema, PostgreSQL flavour. Same tables and columns as the SQLite flavour, in
-- native types.

CREATE TABLE remediation_requests (
    id                 UUID PRIMARY KEY,
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
    signal             JSONB NOT NULL,
    occurrence_count   BIGINT NOT NULL,
    first_seen         TIMESTAMPTZ NOT NULL,
    last_seen          TIMESTAMPTZ NOT NULL,
    created_at         TIMESTAMPTZ NOT NULL,
    updated_at         TIMESTAMPTZ NOT NULL,
    claimed_by         TEXT,
    lease_until        TIMESTAMPTZ,
    not_before         TIMESTAMPTZ,
    attempts           INTEGER NOT NULL DEFAULT 0,
    state              JSONB NOT NULL DEFAULT '{}'
);
CREATE INDEX remediation_requests_runnable ON remediation_requests (active, created_at);
CREATE INDEX remediation_requests_phase ON remediation_requests (phase, created_at);
CREATE INDEX remediation_requests_namespace ON remediation_requests (target_namespace, created_at);

CREATE TABLE request_targets (
    fingerprint TEXT NOT NULL,
    request_id  UUID NOT NULL,
    active      BOOLEAN NOT NULL,
    PRIMARY KEY (fingerprint, request_id)
);
CREATE UNIQUE INDEX request_targets_one_active ON request_targets (fingerprint) WHERE active;
CREATE INDEX request_targets_request ON request_targets (request_id);

CREATE TABLE signals (
    id                 UUID PRIMARY KEY,
    fingerprint        TEXT NOT NULL,
    starts_at          TIMESTAMPTZ NOT NULL,
    status             TEXT NOT NULL,
    ends_at            TIMESTAMPTZ,
    name               TEXT NOT NULL,
    severity           TEXT,
    mode               TEXT NOT NULL,
    source             TEXT NOT NULL,
    labels             JSONB NOT NULL,
    annotations        JSONB NOT NULL,
    generator_url      TEXT,
    receiver           TEXT,
    group_key          TEXT,
    target_kind        TEXT,
    target_name        TEXT,
    target_namespace   TEXT,
    target_fingerprint TEXT NOT NULL,
    request_id         UUID REFERENCES remediation_requests (id),
    received_at        TIMESTAMPTZ NOT NULL,
    resolved_at        TIMESTAMPTZ,
    UNIQUE (fingerprint, starts_at)
);
CREATE INDEX signals_received ON signals (received_at);
CREATE INDEX signals_request ON signals (request_id);

CREATE TABLE audit_events (
    id         BIGSERIAL PRIMARY KEY,
    request_id UUID,
    at         TIMESTAMPTZ NOT NULL,
    phase      TEXT,
    kind       TEXT NOT NULL,
    actor      TEXT NOT NULL,
    message    TEXT NOT NULL,
    payload    JSONB NOT NULL
);
CREATE INDEX audit_events_request ON audit_events (request_id, id);

-- The audit trail is append-only, whatever a caller tries.
CREATE FUNCTION kubemedic_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_events is append-only';
END
$$;
CREATE TRIGGER audit_events_no_update_delete BEFORE UPDATE OR DELETE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION kubemedic_audit_append_only();
CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON audit_events
    FOR EACH STATEMENT EXECUTE FUNCTION kubemedic_audit_append_only();
