-- The audit trail's key rotations (`key_rotated` events), found without reading the whole
-- trail: checking one request's events needs to know which key signed at each point, and a
-- rotation must not hand the trail back to a key an earlier one retired.
CREATE INDEX audit_events_key_rotations ON audit_events (id) WHERE kind = 'key_rotated';
