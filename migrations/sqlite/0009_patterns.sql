-- Outcome learning (docs/adr/0024-outcome-learning.md): one verified outcome per remediation,
-- under the signature of the incident it remediated. Read per signature, cluster-wide.

CREATE TABLE pattern_outcomes (
    request_id  TEXT PRIMARY KEY NOT NULL,
    signature   TEXT NOT NULL,
    workflow_id TEXT NOT NULL,
    recorded_at TEXT NOT NULL,
    outcome     TEXT NOT NULL   -- JSON: the PatternOutcome
);
CREATE INDEX pattern_outcomes_signature ON pattern_outcomes (signature, recorded_at);
