-- Leave room in each page of the requests table so a claim, a lease renewal or a release
-- (which change only claimed_by and lease_until, in no index) can rewrite the row in place
-- as a heap-only tuple, without new entries in its nine indexes. A burst claims tens of
-- thousands of requests; with full pages every claim was an update of every index.
ALTER TABLE remediation_requests SET (fillfactor = 80);
