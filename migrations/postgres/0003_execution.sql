-- Execution bookkeeping and durable remediation history (DESIGN §3.6-3.7).

-- One running execution per target (root owner fingerprint), across workers and replicas.
-- Released when the holding request reaches a terminal phase.
CREATE TABLE execution_locks (
    target_fingerprint TEXT PRIMARY KEY,
    request_id         UUID NOT NULL,
    namespace          TEXT,
    acquired_at        TIMESTAMPTZ NOT NULL
);
CREATE INDEX execution_locks_request ON execution_locks (request_id);

-- The intent of each step, committed before its side effect: after a crash the worker
-- reconciles a `started` intent with the cluster instead of repeating the write.
CREATE TABLE execution_intents (
    request_id UUID NOT NULL,
    step       INTEGER NOT NULL,
    action     TEXT NOT NULL,
    status     TEXT NOT NULL,  -- started | applied | failed
    detail     JSONB NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (request_id, step)
);

-- One entry per finished remediation: what the next investigation of the target reads.
CREATE TABLE remediation_history (
    request_id         UUID PRIMARY KEY,
    target_fingerprint TEXT NOT NULL,
    completed_at       TIMESTAMPTZ NOT NULL,
    record             JSONB NOT NULL
);
CREATE INDEX remediation_history_target ON remediation_history (target_fingerprint, completed_at);
