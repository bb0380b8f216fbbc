//! Traces: OpenTelemetry spans of every request, exported over OTLP/HTTP (protobuf).
//!
//! Off unless an endpoint is configured: then no OpenTelemetry layer is installed and the
//! trace-only spans ([`TRACE_TARGET`]) are call sites nothing is interested in. On, one trace
//! runs from the webhook (or chat question) that opened a request to its verification: the
//! ingest span's context is stored with the request ([`TraceContext`]), and every stage a
//! worker runs opens its span under it ([`stage_span`]), whichever replica runs it and after
//! any restart. Attributes are ids, names, counts and enums, never free text; the model's
//! prompts and answers only with `--otlp-record-prompts`, and sanitised.
//!
//! The exporter sends through the project's own reqwest client (rustls) on the daemon's tokio
//! runtime; the SDK's batch processor hands spans over from its own thread.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState, TracerProvider as _,
};
use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use super::LogFormat;
use crate::domain::{Phase, RemediationRequest, TraceContext};

pub(super) type SdkTracer = opentelemetry_sdk::trace::Tracer;

/// The target of the spans made for the trace. The log never shows them (a line inside one
/// carries the fields of the request's logged span); only the trace exporter reads them.
pub const TRACE_TARGET: &str = "kubemedic_trace";

/// How long one export may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where traces go.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceSettings {
    /// The OTLP/HTTP traces URL (`…/v1/traces`), used as given.
    pub endpoint: url::Url,
    /// The `service.name` resource attribute.
    pub service_name: String,
    /// Record prompts and completions (sanitised) as span events.
    pub record_prompts: bool,
}

static ENABLED: AtomicBool = AtomicBool::new(false);
static RECORD_PROMPTS: AtomicBool = AtomicBool::new(false);

/// Whether traces are exported (an endpoint was configured and the exporter installed).
pub fn tracing_enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Whether model calls record their (sanitised) prompts and answers as span events.
pub fn record_prompts() -> bool {
    RECORD_PROMPTS.load(Ordering::Relaxed)
}

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("cannot set up the OTLP exporter for {endpoint}: {message}")]
    Exporter { endpoint: String, message: String },
    #[error("traces need the daemon's async runtime, and none is running")]
    NoRuntime,
}

/// The installed logging (and, when configured, tracing). Shut it down to flush the spans
/// still queued.
pub struct Traces {
    provider: Option<SdkTracerProvider>,
}

impl Traces {
    /// Install the global subscriber: the log, and the trace exporter when `settings` say
    /// where to send to. Must run inside the tokio runtime when tracing. A second call
    /// installs nothing (the first subscriber stays).
    pub fn init(
        format: LogFormat,
        filter: &str,
        settings: Option<&TraceSettings>,
    ) -> Result<Self, TraceError> {
        let Some(settings) = settings else {
            super::init_logging(format, filter);
            return Ok(Self { provider: None });
        };
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| TraceError::NoRuntime)?;
        let failed = |e: &dyn std::fmt::Display| TraceError::Exporter {
            endpoint: settings.endpoint.to_string(),
            message: e.to_string(),
        };
        let http = reqwest::Client::builder()
            .timeout(EXPORT_TIMEOUT)
            .connect_timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|e| failed(&e))?;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_endpoint(settings.endpoint.as_str())
            .with_timeout(EXPORT_TIMEOUT)
            .with_http_client(OnRuntime { http, runtime })
            .build()
            .map_err(|e| failed(&e))?;
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(
                opentelemetry_sdk::Resource::builder()
                    .with_service_name(settings.service_name.clone())
                    .build(),
            )
            .build();
        let layer = tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("kubemedic"))
            .with_location(false)
            .with_threads(false)
            .with_target(false);
        if super::install(format, filter, Some(layer)).is_ok() {
            RECORD_PROMPTS.store(settings.record_prompts, Ordering::Relaxed);
            ENABLED.store(true, Ordering::Relaxed);
            tracing::info!(
                endpoint = %settings.endpoint,
                service = %settings.service_name,
                record_prompts = settings.record_prompts,
                "traces are sent over OTLP/HTTP"
            );
        }
        Ok(Self {
            provider: Some(provider),
        })
    }

    /// Export what is queued and stop the exporter (on a blocking thread: the SDK waits for
    /// its export, which runs on this runtime).
    pub async fn shutdown(self) {
        let Some(provider) = self.provider else {
            return;
        };
        ENABLED.store(false, Ordering::Relaxed);
        let done = tokio::task::spawn_blocking(move || provider.shutdown()).await;
        match done {
            Ok(Ok(())) => tracing::debug!("traces flushed"),
            Ok(Err(e)) => tracing::warn!(error = %e, "the last traces could not be sent"),
            Err(e) => tracing::warn!(error = %e, "the last traces could not be sent"),
        }
    }
}

/// The OTLP exporter's HTTP client: the project's reqwest (rustls), run on the daemon's
/// runtime, as the SDK's batch processor calls it from a thread of its own.
#[derive(Debug)]
struct OnRuntime {
    http: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for OnRuntime {
    async fn send_bytes(
        &self,
        request: http::Request<opentelemetry_http::Bytes>,
    ) -> Result<http::Response<opentelemetry_http::Bytes>, opentelemetry_http::HttpError> {
        let request = reqwest::Request::try_from(request)?;
        let http = self.http.clone();
        let sent = self.runtime.spawn(async move {
            let response = http.execute(request).await?;
            let status = response.status();
            let headers = response.headers().clone();
            let body = response.bytes().await?;
            let mut out = http::Response::new(body);
            *out.status_mut() = status;
            *out.headers_mut() = headers;
            Ok::<_, reqwest::Error>(out)
        });
        Ok(sent.await??)
    }
}

/// The OpenTelemetry context whose (remote) span is `parent`.
fn otel_parent(parent: &TraceContext) -> opentelemetry::Context {
    let flags = if parent.sampled() {
        TraceFlags::SAMPLED
    } else {
        TraceFlags::default()
    };
    opentelemetry::Context::new().with_remote_span_context(SpanContext::new(
        TraceId::from_bytes(parent.trace_id()),
        SpanId::from_bytes(parent.span_id()),
        flags,
        true,
        TraceState::default(),
    ))
}

/// Make `span` (not yet entered) a child of `parent`. Nothing when tracing is off.
pub fn continue_trace(span: &tracing::Span, parent: &TraceContext) {
    if tracing_enabled() {
        let _ = span.set_parent(otel_parent(parent));
    }
}

/// The context of `span` as exported (its trace id and its own span id): what a request it
/// opens stores. `None` when tracing is off.
pub fn current_trace(span: &tracing::Span) -> Option<TraceContext> {
    if !tracing_enabled() {
        return None;
    }
    let cx = span.context();
    let ctx = cx.span().span_context().clone();
    if !ctx.is_valid() {
        return None;
    }
    TraceContext::new(
        ctx.trace_id().to_bytes(),
        ctx.span_id().to_bytes(),
        ctx.is_sampled(),
    )
}

/// A caller's trace context, from its W3C `traceparent` header; `None` when absent or
/// malformed (a new trace starts).
pub fn incoming_trace(headers: &http::HeaderMap) -> Option<TraceContext> {
    headers
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .and_then(TraceContext::parse)
}

/// The span of one stage run on `request`, a child of the span that received the request.
pub fn stage_span(request: &RemediationRequest) -> tracing::Span {
    let stage = stage_key(request.phase);
    let span = tracing::info_span!(
        target: TRACE_TARGET,
        "stage",
        otel.name = %format_args!("stage {stage}"),
        kubemedic.stage = stage,
        kubemedic.request_id = %request.id,
        kubemedic.phase = request.phase.as_str(),
        kubemedic.next_phase = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    );
    continue_trace(&span, &request.trace);
    span
}

/// The stage's name in span names: one word, as the stage's folder is named.
fn stage_key(phase: Phase) -> &'static str {
    match phase {
        Phase::Enriching => "enrich",
        Phase::Investigating => "investigate",
        Phase::Selecting => "select",
        Phase::Gating => "gate",
        Phase::AwaitingApproval => "approval",
        Phase::Executing => "execute",
        Phase::Verifying => "verify",
        _ => "pipeline",
    }
}

/// Set a list-of-strings attribute on `span` (tracing's fields hold one value; the GenAI
/// conventions want `gen_ai.response.finish_reasons` as a list). Nothing when tracing is off.
pub fn set_string_list(span: &tracing::Span, key: &'static str, values: &[&str]) {
    if tracing_enabled() {
        let values = values
            .iter()
            .map(|v| opentelemetry::StringValue::from((*v).to_owned()))
            .collect();
        span.set_attribute(
            key,
            opentelemetry::Value::Array(opentelemetry::Array::String(values)),
        );
    }
}
