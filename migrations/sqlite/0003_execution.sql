-- Execution bookkeeping and durable remediation history (DESIGN §3.6-3.7).

-- One running execution per target (root owner fingerprint), across workers and replicas.
-- Released when the holding request reaches a terminal phase.
CREATE TABLE execution_locks (
    target_fingerprint TEXT PRIMARY KEY NOT NULL,
    request_id         TEXT NOT NULL,
    namespace          TEXT,
    acquired_at        TEXT NOT NULL
);
CREATE INDEX execution_locks_request ON execution_locks (request_id);

-- The intent of each step, committed before its side effect: after a crash the worker
-- reconciles a `started` intent with the cluster instead of repeating the write.
CREATE TABLE execution_intents (
    request_id TEXT NOT NULL,
    step       INTEGER NOT NULL,
    action     TEXT NOT NULL,
    status     TEXT NOT NULL,  -- started | applied | failed
    detail     TEXT NOT NULL,  -- JSON
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (request_id, step)
);

-- One entry per finished remediation: what the next investigation of the target reads.
CREATE TABLE remediation_history (
    request_id         TEXT PRIMARY KEY NOT NULL,
    target_fingerprint TEXT NOT NULL,
    completed_at       TEXT NOT NULL,
    record             TEXT NOT NULL   -- JSON: the HistoryRecord
);
CREATE INDEX remediation_history_target ON remediation_history (target_fingerprint, completed_at);
