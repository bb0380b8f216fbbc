-- Kept in step with migrations/postgres/0011_audit_notify.sql, which makes Postgres notify the
-- listeners of every replica when an audit trail grows. SQLite has one process, and nothing to
-- notify: the store wakes its own live streams after each audited commit
-- (src/store/sql/mod.rs, `Audited::commit`). No change to the schema.
SELECT 1;
