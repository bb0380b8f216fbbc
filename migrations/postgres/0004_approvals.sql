-- Human approvals (DESIGN §3.9): one per remediation request, the first decision wins.
CREATE TABLE approvals (
    id          UUID PRIMARY KEY,
    request_id  UUID NOT NULL UNIQUE,
    status      TEXT NOT NULL,  -- pending | approved | rejected | expired
    created_at  TIMESTAMPTZ NOT NULL,
    expires_at  TIMESTAMPTZ NOT NULL,
    decided_at  TIMESTAMPTZ,
    record      JSONB NOT NULL  -- the ApprovalRequest with its decision
);
CREATE INDEX approvals_status ON approvals (status, created_at);

-- Single-use tokens: a signed link's nonce, a Slack interaction's signature.
CREATE TABLE used_nonces (
    nonce       TEXT PRIMARY KEY,
    approval_id UUID,
    used_at     TIMESTAMPTZ NOT NULL
);

-- Every message offered to an approver, and the update that replaces its buttons once the
-- approval is decided; the dispatcher retries them with backoff.
CREATE TABLE notifications (
    id              UUID PRIMARY KEY,
    approval_id     UUID NOT NULL,
    channel         TEXT NOT NULL,
    recipient       TEXT NOT NULL,
    kind            TEXT NOT NULL,  -- offer | outcome
    status          TEXT NOT NULL,  -- pending | delivered | failed | cancelled
    attempts        INTEGER NOT NULL,
    next_attempt_at TIMESTAMPTZ,
    last_error      TEXT,
    external_ref    JSONB,
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL,
    UNIQUE (approval_id, channel, recipient, kind)
);
CREATE INDEX notifications_due ON notifications (status, next_attempt_at);

-- Values kubemedic generates once and keeps (the link signing key).
CREATE TABLE settings (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
