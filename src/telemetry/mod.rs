//! Logs, traces and metrics.
//!
//! Logs: `tracing`, JSON by default when not on a terminal, with the span fields (`request_id`,
//! `trace_id`) on every line. Traces: OpenTelemetry over OTLP/HTTP, only when an endpoint is
//! configured (docs/adr/0033-opentelemetry-traces.md); otherwise no OpenTelemetry layer is
//! installed and the trace-only spans ([`TRACE_TARGET`]) are disabled call sites. Metrics: one
//! Prometheus registry, names with units, rendered by `/metrics`.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tracing_subscriber::EnvFilter;

use serde::Deserialize;

use crate::domain::{Phase, Usage, stage_name};

mod traces;

use traces::SdkTracer;
pub use traces::{
    TRACE_TARGET, TraceError, TraceSettings, Traces, continue_trace, current_trace, incoming_trace,
    record_prompts, set_string_list, stage_span, tracing_enabled,
};
type Subscriber = tracing_subscriber::Registry;

/// How logs are written. `auto`: human-readable text on a terminal, JSON otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Auto,
    Json,
    Text,
}

/// kube-rs logs every failed HTTP call at ERROR — hundreds of lines a second while the API
/// server is down — and its watcher logs every refused (403) list or watch at WARN on each
/// retry. [`OutageLog`] and the custom-resource watch say each once instead; a filter that
/// names `kube_client` or `kube_runtime` brings them back.
const QUIET: &str = "kube_client::client::builder=off,kube_runtime::watcher=error";

/// Install the global subscriber without traces. Safe to call more than once (later calls are
/// ignored).
pub fn init_logging(format: LogFormat, filter: &str) {
    let _ = install(format, filter, None);
}

/// The filter of the log: the configured one, kube-rs's per-call errors quieted unless named,
/// and the trace-only spans ([`TRACE_TARGET`]) never, so a log line inside one still carries
/// the request's span fields.
fn log_filter(filter: &str) -> EnvFilter {
    let filter = if filter.contains("kube_client") || filter.contains("kube_runtime") {
        filter.to_owned()
    } else {
        format!("{filter},{QUIET}")
    };
    let filter = format!("{filter},{TRACE_TARGET}=off");
    EnvFilter::try_new(&filter)
        .unwrap_or_else(|_| EnvFilter::new(format!("info,{TRACE_TARGET}=off")))
}

fn install(
    format: LogFormat,
    filter: &str,
    traces: Option<tracing_opentelemetry::OpenTelemetryLayer<Subscriber, SdkTracer>>,
) -> Result<(), tracing_subscriber::util::TryInitError> {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let json = match format {
        LogFormat::Json => true,
        LogFormat::Text => false,
        LogFormat::Auto => !std::io::stderr().is_terminal(),
    };
    let log = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let log: Box<dyn tracing_subscriber::Layer<Subscriber> + Send + Sync> = if json {
        log.json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .with_filter(log_filter(filter))
            .boxed()
    } else {
        log.with_target(false)
            .with_filter(log_filter(filter))
            .boxed()
    };
    // Only the spans made for the trace go to the exporter: no HTTP client, database or
    // exporter internals (which would trace their own exports).
    let mut layers = vec![log];
    if let Some(layer) = traces {
        layers.push(
            layer
                .with_filter(
                    tracing_subscriber::filter::Targets::new()
                        .with_target(TRACE_TARGET, tracing::Level::TRACE),
                )
                .boxed(),
        );
    }
    tracing_subscriber::registry().with(layers).try_init()
}

/// A dependency's outage in the log: one warning when it starts, a summary at most every
/// `interval` while it lasts (failed calls, for how long, the last error), one line when it
/// ends — never a line per failed call. Calls while it is up cost one atomic load. The lines
/// belong to no request's span: the outage is the dependency's, not the request's that met it.
pub struct OutageLog {
    dependency: &'static str,
    interval: Duration,
    down: AtomicBool,
    state: Mutex<Outage>,
}

#[derive(Default)]
struct Outage {
    since: Option<Instant>,
    failures: u64,
    last_report: Option<Instant>,
}

impl OutageLog {
    pub fn new(dependency: &'static str, interval: Duration) -> Self {
        Self {
            dependency,
            interval,
            down: AtomicBool::new(false),
            state: Mutex::new(Outage::default()),
        }
    }

    /// A call failed because the dependency could not be reached.
    pub fn failed(&self, error: &dyn std::fmt::Display) {
        let Ok(mut o) = self.state.lock() else {
            return;
        };
        let now = Instant::now();
        o.failures += 1;
        match (o.since, o.last_report) {
            (None, _) => {
                o.since = Some(now);
                o.last_report = Some(now);
                self.down.store(true, Ordering::Release);
                tracing::warn!(
                    parent: None,
                    dependency = self.dependency,
                    error = %error,
                    "{} unreachable; requests that need it wait (next report in {}s unless it recovers)",
                    self.dependency,
                    self.interval.as_secs()
                );
            }
            (Some(since), Some(last)) if now.duration_since(last) >= self.interval => {
                o.last_report = Some(now);
                tracing::warn!(
                    parent: None,
                    dependency = self.dependency,
                    down_seconds = since.elapsed().as_secs(),
                    failed_calls = o.failures,
                    last_error = %error,
                    "{} still unreachable",
                    self.dependency
                );
            }
            _ => {}
        }
    }

    /// A call got an answer.
    pub fn succeeded(&self) {
        if !self.down.load(Ordering::Acquire) {
            return;
        }
        let Ok(mut o) = self.state.lock() else {
            return;
        };
        if let Some(since) = o.since.take() {
            self.down.store(false, Ordering::Release);
            tracing::info!(
                parent: None,
                dependency = self.dependency,
                down_seconds = since.elapsed().as_secs(),
                failed_calls = o.failures,
                "{} reachable again",
                self.dependency
            );
            *o = Outage::default();
        }
    }

    pub fn is_down(&self) -> bool {
        self.down.load(Ordering::Acquire)
    }
}

type Labels = Vec<(String, String)>;

pub struct Metrics {
    registry: Registry,
    signals_received: Family<Labels, Counter>,
    signals_deduplicated: Family<Labels, Counter>,
    signals_rejected: Family<Labels, Counter>,
    ingest_duration: Histogram,
    requests: Family<Labels, Gauge>,
    transitions: Family<Labels, Counter>,
    stage_duration: Family<Labels, Histogram>,
    llm_tokens: Family<Labels, Counter>,
    llm_errors: Family<Labels, Counter>,
    gate_decisions: Family<Labels, Counter>,
    gate_degraded: Gauge,
    gate_duration: Histogram,
    executions: Family<Labels, Counter>,
    execution_duration: Histogram,
    guardrail_blocks: Family<Labels, Counter>,
    notifications: Family<Labels, Counter>,
    approval_decisions: Family<Labels, Counter>,
    assessments: Family<Labels, Counter>,
    http_connections: Gauge,
    http_connections_refused: Counter,
    stages_running: Gauge,
    stages_waiting: Gauge,
    cache_objects: Gauge,
    cache_kinds: Family<Labels, Gauge>,
    cache_reads: Family<Labels, Gauge>,
    http_timeouts: Family<Labels, Counter>,
    audit_listener_up: Gauge,
    audit_listener_losses: Counter,
    /// The listener's loss count as last scraped (the counter follows the store's own).
    audit_listener_losses_seen: AtomicU64,
    notification_queue_usage: Gauge<f64, AtomicU64>,
    mirror_writes: Family<Labels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let signals_received = Family::<Labels, Counter>::default();
        registry.register(
            "kubemedic_signals_received",
            "Signals (alerts, predictions) received, by source",
            signals_received.clone(),
        );
        let signals_deduplicated = Family::<Labels, Counter>::default();
        registry.register(
            "kubemedic_signals_deduplicated",
            "Signals that opened no new request: redelivery (same fingerprint and start) or \
             occurrence (target already has an active request)",
            signals_deduplicated.clone(),
        );
        let signals_rejected = Family::<Labels, Counter>::default();
        registry.register(
            "kubemedic_signals_rejected",
            "Webhook calls rejected, by reason",
            signals_rejected.clone(),
        );
        let ingest_duration = Histogram::new(exponential_buckets(0.0005, 2.0, 14));
        registry.register(
            "kubemedic_ingest_duration_seconds",
            "Time from receiving a webhook body to answering it (commit included)",
            ingest_duration.clone(),
        );
        let requests = Family::<Labels, Gauge>::default();
        registry.register(
            "kubemedic_requests",
            "Remediation requests in the store, by phase",
            requests.clone(),
        );
        let transitions = Family::<Labels, Counter>::default();
        registry.register(
            "kubemedic_request_transitions",
            "Phase changes committed by this process, by the phase entered",
            transitions.clone(),
        );
        let stage_duration = Family::<Labels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.001, 2.0, 18))
        });
        registry.register(
            "kubemedic_stage_duration_seconds",
            "Time one pipeline step took, by stage",
            stage_duration.clone(),
        );
        let llm_tokens = Family::<Labels, Counter>::default();
        registry.register(
            "kubemedic_llm_tokens",
            "Tokens sent to (prompt) and received from (completion) the LLM, by model",
            llm_tokens.clone(),
        );
        let llm_errors = Family::<Labels, Counter>::default();
        registry.register(
            "kubemedic_llm_errors",
            "LLM calls that failed after their retries, by kind (timeout, connect, tls, http, \
             other, rejected)",
            llm_errors.clone(),
        );
        let gate_decisions = Family::<Labels, Counter>::default();
        registry.register(
            "kubemedic_gate_decisions",
            "Approval gate decisions: auto_approved, approval_required, or degraded (the policy \
             could not be loaded or evaluated, so approval is required)",
            gate_decisions.clone(),
        );
        let gate_degraded = Gauge::default();
        registry.register(
            "kubemedic_gate_degraded",
            "1 while the approval policy cannot be loaded or its last evaluation failed (every \
             remediation then requires approval), else 0",
            gate_degraded.clone(),
        );
        let gate_duration = Histogram::new(exponential_buckets(0.000_005, 2.0, 16));
        registry.register(
            "kubemedic_gate_decision_duration_seconds",
            "Time one approval policy decision took, thread hand-off included",
            gate_duration.clone(),
        );
        let executions = Family::<Labels, Counter>::default();
        registry.register(
            "kubemedic_executions",
            "Executions finished, by outcome (succeeded, failed, dry_run, proposed)",
            executions.clone(),
        );
        let execution_duration = Histogram::new(exponential_buckets(0.01, 2.0, 18));
        registry.register(
            "kubemedic_execution_duration_seconds",
            "Time from the first step of an execution to its last (waits for rollouts included)",
            execution_duration.clone(),
        );
        let notifications = Family::<Labels, Counter>::default();
        registry.register(
            "kubemedic_notifications",
            "Approval notification attempts, by channel, kind (offer, outcome) and result (delivered, retry, failed)",
            notifications.clone(),
        );
        let approval_decisions = Family::<Labels, Counter>::default();
        registry.register(
            "kubemedic_approval_decisions",
            "Approval decisions, by decision and channel; refused ones (late, forged, replayed) as result=refused",
            approval_decisions.clone(),
        );
        let guardrail_blocks = Family::<Labels, Counter>::default();
        registry.register(
            "kubemedic_guardrail_blocks",
            "Requests blocked before execution, by guardrail (IneffectiveChain, ResourceBusy, …)",
            guardrail_blocks.clone(),
        );
        let assessments = Family::<Labels, Counter>::default();
        registry.register(
            "kubemedic_assessments",
            "Remediations assessed after their window, by verdict (effective, not_effective, \
             spec_drift, worse: the target worse than before, undone or handed to a person)",
            assessments.clone(),
        );
        let http_connections = Gauge::default();
        registry.register(
            "kubemedic_http_connections",
            "HTTP connections open now (at most --http-max-connections)",
            http_connections.clone(),
        );
        let stages_running = Gauge::default();
        registry.register(
            "kubemedic_stages_running",
            "Pipeline stages running now in this replica (at most --workers)",
            stages_running.clone(),
        );
        let cache_objects = Gauge::default();
        registry.register(
            "kubemedic_cluster_cache_objects",
            "Objects the watch cache holds now (docs/adr/0038-watch-cache.md)",
            cache_objects.clone(),
        );
        let cache_kinds = Family::<Labels, Gauge>::default();
        registry.register(
            "kubemedic_cluster_cache_kinds",
            "Kinds the watch cache watches, by state: serving (answers reads) or direct (not \
             synced yet, interrupted or refused: read from the API server)",
            cache_kinds.clone(),
        );
        let cache_reads = Family::<Labels, Gauge>::default();
        registry.register(
            "kubemedic_cluster_cache_reads",
            "Reads of the cluster the investigations made since the start, by where they were \
             answered: cache, or api_server",
            cache_reads.clone(),
        );
        let stages_waiting = Gauge::default();
        registry.register(
            "kubemedic_stages_waiting",
            "Requests waiting for a stage slot in this replica now (the namespaces take turns, \
             the oldest request of each first)",
            stages_waiting.clone(),
        );
        let http_connections_refused = Counter::default();
        registry.register(
            "kubemedic_http_connections_refused",
            "HTTP connections closed unserved because --http-max-connections were open",
            http_connections_refused.clone(),
        );
        let http_timeouts = Family::<Labels, Counter>::default();
        registry.register(
            "kubemedic_http_timeouts",
            "HTTP clients cut off for being too slow, by what they were slow to send: header \
             (a request head, or the next one on an idle kept-alive connection) or body",
            http_timeouts.clone(),
        );
        let audit_listener_up = Gauge::default();
        registry.register(
            "kubemedic_audit_listener_up",
            "1 while new audit events wake the live event streams at once (PostgreSQL: the \
             store's LISTEN connection is up; SQLite: always), 0 while the streams poll every \
             0.5 s instead",
            audit_listener_up.clone(),
        );
        let audit_listener_losses = Counter::default();
        registry.register(
            "kubemedic_audit_listener_losses",
            "Times the audit trail's listener lost its connection to PostgreSQL (it reconnects; \
             live events are late by up to 0.5 s meanwhile)",
            audit_listener_losses.clone(),
        );
        let notification_queue_usage = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "kubemedic_store_notification_queue_usage",
            "PostgreSQL: the share (0 to 1) of its notification queue that listening sessions \
             have not read yet; writes that notify fail when it is full (a replica frozen while \
             connected holds it back). Always 0 on SQLite, which has no such queue",
            notification_queue_usage.clone(),
        );
        let mirror_writes = Family::<Labels, Counter>::default();
        registry.register(
            "kubemedic_remediation_mirror_writes",
            "Calls of the Remediation mirror to the Kubernetes API, by op (write, event, list, \
             delete) and result (ok, failed); a failed one is retried and never holds a request up",
            mirror_writes.clone(),
        );
        Self {
            registry,
            audit_listener_up,
            audit_listener_losses,
            audit_listener_losses_seen: AtomicU64::new(0),
            notification_queue_usage,
            mirror_writes,
            http_connections,
            http_connections_refused,
            stages_running,
            stages_waiting,
            cache_objects,
            cache_kinds,
            cache_reads,
            http_timeouts,
            executions,
            execution_duration,
            guardrail_blocks,
            notifications,
            approval_decisions,
            assessments,
            llm_tokens,
            llm_errors,
            signals_received,
            signals_deduplicated,
            signals_rejected,
            ingest_duration,
            requests,
            transitions,
            stage_duration,
            gate_decisions,
            gate_degraded,
            gate_duration,
        }
    }

    /// Register further metrics (LLM tokens, gate decisions…) owned by other modules.
    pub fn registry_mut(&mut self) -> &mut Registry {
        &mut self.registry
    }

    pub fn signal_received(&self, source: &str) {
        self.signals_received
            .get_or_create(&vec![("source".into(), source.into())])
            .inc();
    }

    pub fn signal_deduplicated(&self, kind: &str) {
        self.signals_deduplicated
            .get_or_create(&vec![("kind".into(), kind.into())])
            .inc();
    }

    pub fn signal_rejected(&self, reason: &str) {
        self.signals_rejected
            .get_or_create(&vec![("reason".into(), reason.into())])
            .inc();
    }

    pub fn observe_ingest(&self, elapsed: Duration) {
        self.ingest_duration.observe(elapsed.as_secs_f64());
    }

    pub fn transition(&self, to: Phase) {
        self.transitions
            .get_or_create(&vec![("phase".into(), to.as_str().into())])
            .inc();
    }

    pub fn observe_stage(&self, phase: Phase, elapsed: Duration) {
        self.stage_duration
            .get_or_create(&vec![("stage".into(), stage_name(phase).into())])
            .observe(elapsed.as_secs_f64());
    }

    /// One LLM call that failed after its retries.
    pub fn llm_error(&self, kind: &str) {
        self.llm_errors
            .get_or_create(&vec![("kind".into(), kind.into())])
            .inc();
    }

    pub fn llm_tokens(&self, model: &str, usage: Usage) {
        for (kind, n) in [
            ("prompt", usage.prompt_tokens),
            ("completion", usage.completion_tokens),
        ] {
            self.llm_tokens
                .get_or_create(&vec![
                    ("model".into(), model.into()),
                    ("kind".into(), kind.into()),
                ])
                .inc_by(n);
        }
    }

    /// One gate decision, labelled `auto_approved`, `approval_required` or `degraded`.
    pub fn gate_decision(&self, decision: &str, elapsed: Duration) {
        self.gate_decisions
            .get_or_create(&vec![("decision".into(), decision.into())])
            .inc();
        self.gate_duration.observe(elapsed.as_secs_f64());
    }

    /// One finished execution and how long its steps took.
    pub fn execution(&self, outcome: &str, elapsed: Duration) {
        self.executions
            .get_or_create(&vec![("outcome".into(), outcome.into())])
            .inc();
        self.execution_duration.observe(elapsed.as_secs_f64());
    }

    /// One delivery attempt of an approval notification.
    pub fn notification(&self, channel: &str, kind: &str, result: &str) {
        self.notifications
            .get_or_create(&vec![
                ("channel".into(), channel.into()),
                ("kind".into(), kind.into()),
                ("result".into(), result.into()),
            ])
            .inc();
    }

    /// An approval decision taken (`result` = `decided`) or refused (`refused`).
    pub fn approval_decision(&self, decision: &str, via: &str, result: &str) {
        self.approval_decisions
            .get_or_create(&vec![
                ("decision".into(), decision.into()),
                ("via".into(), via.into()),
                ("result".into(), result.into()),
            ])
            .inc();
    }

    /// A request blocked by a guardrail.
    pub fn guardrail_block(&self, guardrail: &str) {
        self.guardrail_blocks
            .get_or_create(&vec![("guardrail".into(), guardrail.into())])
            .inc();
    }

    /// One assessment verdict.
    pub fn assessment(&self, verdict: &str) {
        self.assessments
            .get_or_create(&vec![("verdict".into(), verdict.into())])
            .inc();
    }

    /// The worker pool's stage slots now: stages running and requests waiting for one.
    pub fn set_stages(&self, running: usize, waiting: usize) {
        self.stages_running
            .set(i64::try_from(running).unwrap_or(i64::MAX));
        self.stages_waiting
            .set(i64::try_from(waiting).unwrap_or(i64::MAX));
    }

    /// The watch cache now: objects held, kinds serving reads and read directly, and the reads
    /// answered from it and passed to the API server since the start.
    pub fn set_cache(
        &self,
        objects: usize,
        (serving, direct): (usize, usize),
        (hits, misses): (u64, u64),
    ) {
        let n = |v: usize| i64::try_from(v).unwrap_or(i64::MAX);
        let c = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        self.cache_objects.set(n(objects));
        self.cache_kinds
            .get_or_create(&vec![("state".into(), "serving".into())])
            .set(n(serving));
        self.cache_kinds
            .get_or_create(&vec![("state".into(), "direct".into())])
            .set(n(direct));
        self.cache_reads
            .get_or_create(&vec![("from".into(), "cache".into())])
            .set(c(hits));
        self.cache_reads
            .get_or_create(&vec![("from".into(), "api_server".into())])
            .set(c(misses));
    }

    /// A connection was accepted and is being served.
    pub fn http_connection_opened(&self) {
        self.http_connections.inc();
    }

    /// A served connection has ended.
    pub fn http_connection_closed(&self) {
        self.http_connections.dec();
    }

    /// A connection was closed unserved: the cap was reached.
    pub fn http_connection_refused(&self) {
        self.http_connections_refused.inc();
    }

    /// A client was cut off for being slow to send its request `phase` (`header` or `body`).
    pub fn http_timeout(&self, phase: &str) {
        self.http_timeouts
            .get_or_create(&vec![("phase".into(), phase.into())])
            .inc();
    }

    /// The audit trail listener's state, read from the store at scrape time: whether it is up,
    /// and how many times it lost its connection so far.
    /// The store's notification queue usage, when it has one.
    pub fn set_notification_queue_usage(&self, share: f64) {
        self.notification_queue_usage.set(share);
    }

    pub fn set_audit_listener(&self, up: bool, losses: u64) {
        self.audit_listener_up.set(i64::from(up));
        let seen = self
            .audit_listener_losses_seen
            .fetch_max(losses, Ordering::AcqRel);
        if losses > seen {
            self.audit_listener_losses.inc_by(losses - seen);
        }
    }

    /// One call of the Remediation mirror (`op`: write, event, list, delete; `result`: ok,
    /// failed).
    pub fn mirror_write(&self, op: &str, result: &str) {
        self.mirror_writes
            .get_or_create(&vec![
                ("op".into(), op.into()),
                ("result".into(), result.into()),
            ])
            .inc();
    }

    pub fn set_gate_degraded(&self, degraded: bool) {
        self.gate_degraded.set(i64::from(degraded));
    }

    /// Set the by-phase gauge from a fresh count (done at scrape time).
    pub fn set_requests_by_phase(&self, counts: &[(Phase, i64)]) {
        for phase in Phase::ALL {
            let n = counts
                .iter()
                .find(|(p, _)| *p == phase)
                .map_or(0, |(_, n)| *n);
            self.requests
                .get_or_create(&vec![("phase".into(), phase.as_str().into())])
                .set(n);
        }
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}
