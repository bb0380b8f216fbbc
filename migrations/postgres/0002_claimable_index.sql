-- Workers look for the oldest active request. Finished requests pile up for the audit trail
-- and never match, so index only the active ones: the claim query stays as fast with a
-- million closed requests as with none.
DROP INDEX remediation_requests_runnable;
CREATE INDEX remediation_requests_claimable ON remediation_requests (created_at) WHERE active;
