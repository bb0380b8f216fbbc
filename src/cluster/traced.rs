//! The span of one write to the Kubernetes API (`kube <verb> <Kind>`), for every writer that
//! sends one: the executor's stamped changes, the proofs' server-side dry runs and the
//! mirror's `Remediation` objects. Attributes are the verb, the object's kind, namespace and
//! name, whether it was a dry run, and whether the API server took it — never the body.

use tracing::Instrument as _;

use super::Result;

/// The span of one write (`kube <verb> <Kind>`), not yet entered.
pub fn write_span(
    verb: &'static str,
    kind: &str,
    namespace: Option<&str>,
    name: Option<&str>,
    dry_run: bool,
) -> tracing::Span {
    tracing::info_span!(
        target: crate::telemetry::TRACE_TARGET,
        "kube_write",
        otel.name = %format_args!("kube {verb} {kind}"),
        otel.kind = "client",
        k8s.verb = verb,
        kubemedic.k8s.kind = kind,
        k8s.namespace.name = namespace,
        kubemedic.k8s.name = name,
        kubemedic.dry_run = dry_run,
        error.type = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    )
}

/// Mark `span` failed, with a short error type (a kind or a status code, never a message).
pub fn write_failed(span: &tracing::Span, error_type: &dyn std::fmt::Debug) {
    span.record("error.type", tracing::field::debug(error_type));
    span.record("otel.status_code", "ERROR");
}

/// Run `write` inside `span`, marking the span failed when the write fails.
pub async fn traced<T>(span: tracing::Span, write: impl Future<Output = Result<T>>) -> Result<T> {
    let done = write.instrument(span.clone()).await;
    if let Err(e) = &done {
        write_failed(&span, &e.kind);
    }
    done
}
