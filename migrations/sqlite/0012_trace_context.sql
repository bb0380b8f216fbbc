-- The W3C trace context (`traceparent`) of each request: the span that received it, under
-- which every stage's span opens, on whichever replica claims it and after any restart
-- (docs/adr/0033-opentelemetry-traces.md). NULL for requests opened before this column: their
-- context is derived from the request id when read (src/domain/trace.rs).
ALTER TABLE remediation_requests ADD COLUMN trace_parent TEXT;
