-- Live event streams are woken when a request's audit trail grows: every insert into
-- audit_events notifies channel `kubemedic_audit` once per request it appended to, with the
-- request's id as payload. Postgres delivers a notification only when its transaction commits,
-- to every session that LISTENs — each replica's one listener (src/store/postgres.rs), which
-- wakes the streams it serves. A hint only: the streams read the trail from where they are, and
-- still poll, less often, in case a notification is lost.
CREATE FUNCTION kubemedic_audit_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('kubemedic_audit', grew.request_id::text)
    FROM (SELECT DISTINCT request_id FROM appended WHERE request_id IS NOT NULL) AS grew;
    RETURN NULL;
END
$$;
-- Once per statement (a batch of events is one INSERT), over the rows it added.
CREATE TRIGGER audit_events_notify AFTER INSERT ON audit_events
    REFERENCING NEW TABLE AS appended
    FOR EACH STATEMENT EXECUTE FUNCTION kubemedic_audit_notify();
