-- Failed dashboard sign-ins per client address, in the store so that every replica counts
-- the same failures (a client cannot spread its guesses over the replicas). Rows older than
-- the limiter's window are deleted when a failure is recorded; a sign-in clears its client's.
CREATE TABLE login_failures (
    client TEXT NOT NULL,               -- the client's IP address
    at     TIMESTAMPTZ NOT NULL
);
CREATE INDEX login_failures_client ON login_failures (client, at);
CREATE INDEX login_failures_at ON login_failures (at);
