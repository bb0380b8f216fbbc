-- Outcome learning (docs/adr/0024-outcome-learning.md): one verified outcome per remediation,
-- under the signature of the incident it remediated. Read per signature, cluster-wide.

CREATE TABLE pattern_outcomes (
    request_id  UUID PRIMARY KEY,
    signature   TEXT NOT NULL,
    workflow_id TEXT NOT NULL,
    recorded_at TIMESTAMPTZ NOT NULL,
    outcome     JSONB NOT NULL
);
CREATE INDEX pattern_outcomes_signature ON pattern_outcomes (signature, recorded_at);
