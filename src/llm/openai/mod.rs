//! [`OpenAiLlm`]: chat completions with tools for OpenAI, Azure OpenAI and OpenAI-compatible
//! servers. Requests are written as the Chat Completions wire format, so any compatible server
//! that speaks the format works, whatever fields it adds; async-openai's configurations give
//! the URL and the credentials of each provider.
//!
//! The call streams (`stream: true`, with the usage in the last chunk): the `chat.completion.chunk`
//! deltas are read as they arrive ([`SseReader`]), told to the caller's [`Watch`], and assembled
//! ([`Assembly`]) into the same [`ChatResponse`] a whole answer gives. A server that ignores
//! `stream` and answers `application/json` is read as before; `--llm-no-stream` asks for whole
//! answers. The whole call — connecting, waiting, every chunk — is bounded by
//! `--llm-timeout-seconds` (ADR 0027).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_openai::config::{AzureConfig, Config, OpenAIConfig};
use async_trait::async_trait;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tracing::{Instrument as _, debug, warn};

use super::{
    ChatRequest, ChatResponse, Delta, Llm, LlmError, LlmFailure, Message, ToolCall, ToolChoice,
    Unwatched, Watch,
};
use crate::domain::{FinishReason, Usage};
use crate::redact::sanitize_text;
use crate::secret::{Secret, redact_url};
use crate::telemetry::TRACE_TARGET;

mod stream;

use stream::{Assembly, SseReader};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// api.openai.com, or any OpenAI-compatible base URL (Ollama, vLLM, llama.cpp server).
    OpenAi,
    Azure,
}

#[derive(Debug, Clone)]
pub struct OpenAiSettings {
    pub provider: Provider,
    /// `https://api.openai.com/v1`, `http://127.0.0.1:11434/v1`, or the Azure resource
    /// endpoint `https://NAME.openai.azure.com`.
    pub base_url: Option<String>,
    pub api_key: Option<Secret>,
    /// Azure: the deployment name.
    pub azure_deployment: Option<String>,
    /// Azure: the API version.
    pub azure_api_version: String,
    pub timeout: Duration,
    pub max_retries: u32,
    /// First retry delay; doubled each attempt.
    pub backoff: Duration,
    /// Ask for the answer as a stream of chunks (its text can be watched as it arrives).
    pub stream: bool,
}

/// The longest a connection may take to open (shorter when the whole call's timeout is).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

pub struct OpenAiLlm {
    http: reqwest::Client,
    provider: Provider,
    config: Box<dyn Config>,
    describe: String,
    /// The server, without credentials, for messages.
    endpoint: String,
    timeout: Duration,
    max_retries: u32,
    backoff: Duration,
    stream: bool,
    /// Whether the log already said that the server streams without usage.
    said_no_usage: AtomicBool,
}

impl OpenAiLlm {
    pub fn new(s: &OpenAiSettings) -> Result<Self, LlmError> {
        let http = reqwest::Client::builder()
            .timeout(s.timeout)
            .connect_timeout(s.timeout.min(CONNECT_TIMEOUT))
            .build()
            .map_err(|e| LlmError::Rejected(format!("cannot build HTTP client: {e}")))?;
        let key = s
            .api_key
            .as_ref()
            .map(|k| k.expose().to_owned())
            .unwrap_or_default();
        let endpoint = redact_url(
            s.base_url
                .as_deref()
                .unwrap_or("https://api.openai.com/v1")
                .trim_end_matches('/'),
        );
        let (config, describe): (Box<dyn Config>, String) = match s.provider {
            Provider::OpenAi => {
                let mut c = OpenAIConfig::new().with_api_key(key);
                if let Some(base) = &s.base_url {
                    c = c.with_api_base(base.trim_end_matches('/'));
                }
                let where_ = s
                    .base_url
                    .clone()
                    .unwrap_or_else(|| "api.openai.com".into());
                (Box::new(c), format!("openai@{}", redact_url(&where_)))
            }
            Provider::Azure => {
                let base = s.base_url.clone().ok_or_else(|| {
                    LlmError::Rejected(
                        "Azure OpenAI needs --llm-base-url (the resource endpoint)".into(),
                    )
                })?;
                let deployment = s.azure_deployment.clone().ok_or_else(|| {
                    LlmError::Rejected(
                        "Azure OpenAI needs a deployment (--llm-azure-deployment)".into(),
                    )
                })?;
                let c = AzureConfig::new()
                    .with_api_base(base.trim_end_matches('/'))
                    .with_deployment_id(deployment.clone())
                    .with_api_version(s.azure_api_version.clone())
                    .with_api_key(key);
                (Box::new(c), format!("azure:{deployment}"))
            }
        };
        Ok(Self {
            http,
            provider: s.provider,
            config,
            describe,
            endpoint,
            timeout: s.timeout,
            max_retries: s.max_retries,
            backoff: s.backoff,
            stream: s.stream,
            said_no_usage: AtomicBool::new(false),
        })
    }

    /// `…/chat/completions` of the provider, with its query (Azure's `api-version`).
    fn url(&self) -> Result<url::Url, LlmError> {
        let raw = self.config.url("/chat/completions");
        let mut url = url::Url::parse(&raw).map_err(|e| {
            LlmError::Rejected(format!(
                "the model URL `{}` is not a URL: {e}",
                redact_url(&raw)
            ))
        })?;
        let query = self.config.query();
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        Ok(url)
    }

    /// One attempt: the request sent, the answer read whole or as a stream.
    async fn attempt(
        &self,
        url: &url::Url,
        body: &Value,
        watch: &dyn Watch,
    ) -> Result<ChatResponse, Failure> {
        let mut response = self
            .http
            .post(url.clone())
            .headers(self.config.headers())
            .json(body)
            .send()
            .await
            .map_err(Failure::Transport)?;
        let status = response.status();
        if !status.is_success() {
            let bytes = response.bytes().await.map_err(Failure::Body)?;
            return Err(Failure::Status(status, provider_message(&bytes)));
        }
        let streamed = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| {
                v.trim_start()
                    .to_ascii_lowercase()
                    .starts_with("text/event-stream")
            });
        if !streamed {
            // A whole answer: asked for (`--llm-no-stream`), or a server that ignores `stream`.
            let bytes = response.bytes().await.map_err(Failure::Body)?;
            let v: Value = serde_json::from_slice(&bytes).map_err(|e| {
                Failure::Unreadable(format!(
                    "failed to deserialize api response: error:{e} content:{}",
                    truncate(&String::from_utf8_lossy(&bytes), 300)
                ))
            })?;
            return parse_response(&v).map_err(|e| Failure::Unreadable(e.to_string()));
        }
        let mut sse = SseReader::default();
        let mut answer = Assembly::default();
        while let Some(bytes) = response.chunk().await.map_err(Failure::Body)? {
            for data in sse.push(&bytes) {
                answer.take(&data, watch)?;
            }
            if answer.done {
                break;
            }
        }
        for data in sse.end() {
            answer.take(&data, watch)?;
        }
        let estimate = body.to_string().len();
        let (response, usage_sent) = answer.finish(estimate)?;
        if !usage_sent && !self.said_no_usage.swap(true, Ordering::Relaxed) {
            warn!(
                endpoint = %self.endpoint,
                "the model server streams without usage (stream_options.include_usage): tokens \
                 are estimated at 4 characters each for the budgets"
            );
        }
        Ok(response)
    }
}

/// Why one attempt failed.
#[derive(Debug)]
enum Failure {
    /// No answer: connecting, TLS, the time limit before the headers. Retried.
    Transport(reqwest::Error),
    /// The answer broke off while it was read (the time limit, a closed connection). Retried.
    Body(reqwest::Error),
    /// An HTTP error status and the provider's message. 429 and 5xx are retried.
    Status(StatusCode, String),
    /// The stream reported an error, or ended before the answer did. Retried.
    Stream(LlmFailure, String),
    /// An answer that is not a chat completion. Not retried.
    Unreadable(String),
}

impl Failure {
    fn retryable(&self) -> bool {
        match self {
            Failure::Transport(_) | Failure::Body(_) | Failure::Stream(..) => true,
            Failure::Status(s, _) => *s == StatusCode::TOO_MANY_REQUESTS || s.is_server_error(),
            Failure::Unreadable(_) => false,
        }
    }

    /// What went wrong, told apart the way an operator fixes it: no answer in time (raise
    /// `--llm-timeout-seconds` or fix the model server), nobody listening (the URL, the network
    /// policy), a TLS failure (the certificate) or an HTTP error (the provider's status). The
    /// words name the server (without credentials) but not the attempts; the caller adds them.
    /// `url` is the request's (without credentials), for a stream that broke off.
    fn classify(&self, endpoint: &str, url: &str, timeout: Duration) -> (LlmFailure, String) {
        match self {
            Failure::Transport(r) => classify_transport(r, endpoint, timeout),
            Failure::Body(r) if r.is_timeout() => {
                let url = r
                    .url()
                    .map_or_else(|| url.to_owned(), |u| redact_url(u.as_str()));
                (
                    LlmFailure::Timeout,
                    format!(
                        "the model at {url} did not finish its answer within {} \
                         (--llm-timeout-seconds)",
                        seconds(timeout)
                    ),
                )
            }
            Failure::Body(r) => classify_transport(r, url, timeout),
            Failure::Status(status, message) => (
                LlmFailure::Http,
                format!("{endpoint} answered HTTP {status} {message}"),
            ),
            Failure::Stream(kind, message) => (*kind, format!("{endpoint}: {message}")),
            Failure::Unreadable(message) => (LlmFailure::Rejected, message.clone()),
        }
    }
}

/// The provider's error message: OpenAI's `{"error": {"type", "message", "param", "code"}}`
/// as `type: message (param: p) (code: c)`, else the body's text. Sanitised: it may quote the
/// request.
fn provider_message(bytes: &[u8]) -> String {
    let v: Option<Value> = serde_json::from_slice(bytes).ok();
    let text = match v.as_ref().and_then(|v| v.get("error")) {
        Some(Value::String(s)) => s.clone(),
        Some(e @ Value::Object(_)) => {
            let field = |k: &str| e.get(k).and_then(Value::as_str).map(str::to_owned);
            let mut parts = Vec::new();
            if let Some(t) = field("type") {
                parts.push(format!("{t}:"));
            }
            parts.push(field("message").unwrap_or_default());
            if let Some(p) = field("param") {
                parts.push(format!("(param: {p})"));
            }
            if let Some(c) = e.get("code").filter(|c| !c.is_null()) {
                parts.push(format!(
                    "(code: {})",
                    c.as_str().map_or_else(|| c.to_string(), str::to_owned)
                ));
            }
            parts.join(" ")
        }
        _ => String::from_utf8_lossy(bytes).trim().to_owned(),
    };
    sanitize_text(&truncate(&text, 500))
}

fn finish_reason(raw: Option<&str>) -> FinishReason {
    match raw {
        Some("stop") => FinishReason::Stop,
        Some("tool_calls") | Some("function_call") => FinishReason::ToolCalls,
        Some("length") => FinishReason::Length,
        Some("content_filter") => FinishReason::ContentFilter,
        _ => FinishReason::Other,
    }
}

fn message_json(m: &Message) -> Value {
    match m {
        Message::System { content } => json!({"role": "system", "content": content}),
        Message::User { content } => json!({"role": "user", "content": content}),
        Message::Assistant {
            content,
            tool_calls,
        } => {
            let mut v = json!({"role": "assistant", "content": content});
            if !tool_calls.is_empty() {
                v["tool_calls"] = tool_calls
                    .iter()
                    .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
                    .collect();
            }
            v
        }
        Message::Tool {
            tool_call_id,
            content,
        } => {
            json!({"role": "tool", "tool_call_id": tool_call_id, "content": content})
        }
    }
}

/// The Chat Completions request body; streamed, with the usage in the last chunk.
pub fn request_json(r: &ChatRequest, stream: bool) -> Value {
    let mut body = json!({
        "model": r.model,
        "messages": r.messages.iter().map(message_json).collect::<Vec<_>>(),
        "max_tokens": r.max_tokens,
        "temperature": 0,
        "stream": stream,
    });
    if stream {
        body["stream_options"] = json!({"include_usage": true});
    }
    if !r.tools.is_empty() {
        body["tools"] = r
            .tools
            .iter()
            .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}))
            .collect();
        body["tool_choice"] = match &r.tool_choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::Force(name) => json!({"type": "function", "function": {"name": name}}),
        };
    }
    body
}

/// Read a Chat Completions response body.
pub fn parse_response(v: &Value) -> Result<ChatResponse, LlmError> {
    let choice = v.get("choices").and_then(|c| c.get(0)).ok_or_else(|| {
        LlmError::Rejected(format!(
            "response without choices: {}",
            truncate(&v.to_string(), 300)
        ))
    })?;
    let message = choice.get("message").cloned().unwrap_or(Value::Null);
    let content = message
        .get("content")
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .map(str::to_owned);
    let tool_calls = message
        .get("tool_calls")
        .and_then(Value::as_array)
        .map(|calls| {
            calls
                .iter()
                .enumerate()
                .map(|(i, c)| ToolCall {
                    id: c
                        .get("id")
                        .and_then(Value::as_str)
                        .map_or_else(|| format!("call_{i}"), str::to_owned),
                    name: c
                        .pointer("/function/name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned(),
                    arguments: match c.pointer("/function/arguments") {
                        Some(Value::String(s)) => s.clone(),
                        Some(other) => other.to_string(),
                        None => "{}".into(),
                    },
                })
                .collect()
        })
        .unwrap_or_default();
    let finish_reason = finish_reason(choice.get("finish_reason").and_then(Value::as_str));
    let usage = Usage {
        prompt_tokens: v
            .pointer("/usage/prompt_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0),
        completion_tokens: v
            .pointer("/usage/completion_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0),
    };
    Ok(ChatResponse {
        content,
        tool_calls,
        finish_reason,
        usage,
        model: v
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
    })
}

fn truncate(s: &str, n: usize) -> String {
    if s.len() <= n {
        s.to_owned()
    } else {
        format!("{}…", s.get(..s.floor_char_boundary(n)).unwrap_or_default())
    }
}

fn classify_transport(
    r: &reqwest::Error,
    endpoint: &str,
    timeout: Duration,
) -> (LlmFailure, String) {
    let url = r
        .url()
        .map_or_else(|| endpoint.to_owned(), |u| redact_url(u.as_str()));
    // The causes, outermost first. An io::Error's `source()` skips the error it wraps, so its
    // inner error is taken with `get_ref` (hyper wraps rustls' error in two of them).
    let chain: Vec<&(dyn std::error::Error + 'static)> =
        std::iter::successors(Some(r as &(dyn std::error::Error + 'static)), |e| {
            match e.downcast_ref::<std::io::Error>() {
                Some(io) => io
                    .get_ref()
                    .map(|inner| inner as &(dyn std::error::Error + 'static)),
                None => e.source(),
            }
        })
        .take(16)
        .collect();
    // The innermost cause says the most ("connection refused", "invalid peer certificate").
    let cause = chain.last().map(ToString::to_string).unwrap_or_default();
    let io = chain
        .iter()
        .filter_map(|e| e.downcast_ref::<std::io::Error>())
        .collect::<Vec<_>>();
    let tls = chain
        .iter()
        .any(|e| e.downcast_ref::<rustls::Error>().is_some());
    if r.is_timeout() {
        let what = if r.is_connect() {
            format!(
                "could not connect to {url} within {}",
                seconds(timeout.min(CONNECT_TIMEOUT))
            )
        } else {
            format!(
                "the model at {url} did not answer within {} (--llm-timeout-seconds)",
                seconds(timeout)
            )
        };
        return (LlmFailure::Timeout, what);
    }
    if tls {
        return (
            LlmFailure::Tls,
            format!("the TLS handshake with {url} failed: {cause}"),
        );
    }
    if r.is_connect() {
        if io
            .iter()
            .any(|e| e.kind() == std::io::ErrorKind::ConnectionRefused)
        {
            return (LlmFailure::Connect, format!("connection refused by {url}"));
        }
        return (
            LlmFailure::Connect,
            format!("cannot connect to {url}: {cause}"),
        );
    }
    if let Some(status) = r.status() {
        return (LlmFailure::Http, format!("{url} answered HTTP {status}"));
    }
    (LlmFailure::Other, format!("{url}: {cause}"))
}

/// `30 s`, `1.5 s`.
fn seconds(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

fn attempts(n: u32) -> String {
    if n == 1 {
        "1 attempt".into()
    } else {
        format!("{n} attempts")
    }
}

#[async_trait]
impl Llm for OpenAiLlm {
    fn describe(&self) -> String {
        self.describe.clone()
    }

    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        self.chat_watched(request, &Unwatched).await
    }

    /// One model call is one span, named and described by the OpenTelemetry GenAI
    /// conventions: the model, the token counts, the finish reason — no text unless
    /// `--otlp-record-prompts`, and then sanitised.
    async fn chat_watched(
        &self,
        request: &ChatRequest,
        watch: &dyn Watch,
    ) -> Result<ChatResponse, LlmError> {
        let (system, provider) = match self.provider {
            Provider::OpenAi => ("openai", "openai"),
            Provider::Azure => ("az.ai.openai", "azure.ai.openai"),
        };
        let span = tracing::info_span!(
            target: TRACE_TARGET,
            "chat",
            otel.name = %format_args!("chat {}", request.model),
            otel.kind = "client",
            gen_ai.operation.name = "chat",
            gen_ai.system = system,
            gen_ai.provider.name = provider,
            gen_ai.request.model = %request.model,
            gen_ai.request.max_tokens = i64::from(request.max_tokens),
            gen_ai.response.model = tracing::field::Empty,
            gen_ai.usage.input_tokens = tracing::field::Empty,
            gen_ai.usage.output_tokens = tracing::field::Empty,
            kubemedic.llm.tools_offered = signed(request.tools.len() as u64),
            kubemedic.llm.tool_calls = tracing::field::Empty,
            error.type = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
        );
        if crate::telemetry::record_prompts() {
            span.in_scope(|| record_prompt(request));
        }
        let answer = self
            .chat_untraced(request, watch)
            .instrument(span.clone())
            .await;
        match &answer {
            Ok(r) => {
                span.record("gen_ai.response.model", r.model.as_str());
                span.record("gen_ai.usage.input_tokens", signed(r.usage.prompt_tokens));
                span.record(
                    "gen_ai.usage.output_tokens",
                    signed(r.usage.completion_tokens),
                );
                span.record(
                    "kubemedic.llm.tool_calls",
                    signed(r.tool_calls.len() as u64),
                );
                crate::telemetry::set_string_list(
                    &span,
                    "gen_ai.response.finish_reasons",
                    &[finish_reason_name(r.finish_reason)],
                );
                if crate::telemetry::record_prompts() {
                    span.in_scope(|| record_completion(r));
                }
            }
            Err(e) => {
                span.record("error.type", e.failure().map_or("other", |f| f.label()));
                span.record("otel.status_code", "ERROR");
            }
        }
        answer
    }
}

/// A count as OpenTelemetry's integer (a u64 would be exported as text).
fn signed(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The GenAI conventions' name of a finish reason.
fn finish_reason_name(reason: FinishReason) -> &'static str {
    match reason {
        FinishReason::Stop => "stop",
        FinishReason::ToolCalls => "tool_calls",
        FinishReason::Length => "length",
        FinishReason::ContentFilter => "content_filter",
        FinishReason::Other => "other",
    }
}

/// The prompt as span events (`--otlp-record-prompts`): each message's text has passed the
/// sanitiser already ([`super::Message`] holds only [`crate::redact::Redacted`] text).
fn record_prompt(request: &ChatRequest) {
    for m in &request.messages {
        let (event, text) = match m {
            Message::System { content } => ("gen_ai.system.message", content.as_str()),
            Message::User { content } => ("gen_ai.user.message", content.as_str()),
            Message::Assistant { content, .. } => (
                "gen_ai.assistant.message",
                content.as_ref().map_or("", |c| c.as_str()),
            ),
            Message::Tool { content, .. } => ("gen_ai.tool.message", content.as_str()),
        };
        tracing::info!(target: TRACE_TARGET, content = text, "{}", event);
    }
}

/// The answer as a span event (`--otlp-record-prompts`), sanitised like everything the model
/// says before it is shown.
fn record_completion(r: &ChatResponse) {
    let text = sanitize_text(r.content.as_deref().unwrap_or(""));
    let calls: Vec<String> = r
        .tool_calls
        .iter()
        .map(|c| format!("{}({})", c.name, sanitize_text(&c.arguments)))
        .collect();
    tracing::info!(
        target: TRACE_TARGET,
        content = %text,
        tool_calls = %calls.join("; "),
        "gen_ai.choice"
    );
}

impl OpenAiLlm {
    /// The call, retried: what [`Llm::chat_watched`] traces.
    async fn chat_untraced(
        &self,
        request: &ChatRequest,
        watch: &dyn Watch,
    ) -> Result<ChatResponse, LlmError> {
        let body = request_json(request, self.stream);
        let url = self.url()?;
        let shown = redact_url(url.as_str());
        let mut delay = self.backoff;
        let mut attempt = 0;
        loop {
            let failure = match self.attempt(&url, &body, watch).await {
                Ok(response) => return Ok(response),
                Err(f) => f,
            };
            let (kind, what) = failure.classify(&self.endpoint, &shown, self.timeout);
            if !failure.retryable() {
                debug!(kind = kind.label(), error = %what, "LLM rejected the request");
                return Err(LlmError::Rejected(match failure {
                    Failure::Status(status, message) => format!("{status} {message}"),
                    _ => what,
                }));
            }
            if attempt < self.max_retries {
                attempt += 1;
                warn!(
                    attempt,
                    kind = kind.label(),
                    error = %what,
                    "LLM call failed; retrying after {:?}",
                    delay
                );
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(30));
                continue;
            }
            let message = format!("{what}, {}", attempts(attempt + 1));
            warn!(kind = kind.label(), error = %message, "LLM call failed; giving up");
            return Err(LlmError::Unavailable { kind, message });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Remembers what it was told.
    #[derive(Default)]
    struct Seen(Mutex<Vec<String>>);

    impl Watch for Seen {
        fn delta(&self, delta: Delta<'_>) {
            let said = match delta {
                Delta::Content(t) => format!("text:{t}"),
                Delta::ToolCall { index, name } => format!("call:{index}:{name}"),
            };
            self.0.lock().unwrap().push(said);
        }
    }

    /// OpenAI's stream of an answer with text and two tool calls whose arguments come in
    /// fragments, then the usage chunk.
    const STREAM: &str = concat!(
        ": keep-alive\n\n",
        "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o-2024\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}],\"usage\":null}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Plan: read é\"},\"finish_reason\":null}],\"usage\":null}\r\n\r\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"vents.\\n\"},\"finish_reason\":null}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_a\",\"type\":\"function\",\"function\":{\"name\":\"kubectl_events\",\"arguments\":\"\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"names\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_b\",\"type\":\"function\",\"function\":{\"name\":\"kubectl_get\",\"arguments\":\"{\\\"kind\\\":\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"pace\\\":\\\"shop\\\"}\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"function\":{\"arguments\":\"\\\"Pod\\\"}\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":120,\"completion_tokens\":30,\"total_tokens\":150}}\n\n",
        "data: [DONE]\n\n",
    );

    fn assemble(chunks: &[&[u8]]) -> (Result<(ChatResponse, bool), Failure>, Vec<String>) {
        let seen = Seen::default();
        let mut sse = SseReader::default();
        let mut answer = Assembly::default();
        for c in chunks {
            for data in sse.push(c) {
                if let Err(e) = answer.take(&data, &seen) {
                    return (Err(e), seen.0.into_inner().unwrap());
                }
            }
        }
        for data in sse.end() {
            if let Err(e) = answer.take(&data, &seen) {
                return (Err(e), seen.0.into_inner().unwrap());
            }
        }
        (answer.finish(400), seen.0.into_inner().unwrap())
    }

    #[test]
    fn a_stream_is_assembled_into_the_answer_a_whole_one_gives_however_it_is_cut() {
        let bytes = STREAM.as_bytes();
        // Whole, byte by byte (inside `é` and between `\r` and `\n` too), and in uneven cuts.
        let whole = [bytes];
        let single: Vec<&[u8]> = bytes.chunks(1).collect();
        let uneven: Vec<&[u8]> = bytes.chunks(37).collect();
        for cut in [&whole[..], &single[..], &uneven[..]] {
            let (result, seen) = assemble(cut);
            let (r, usage_sent) = result.unwrap();
            assert!(usage_sent);
            assert_eq!(r.content.as_deref(), Some("Plan: read évents.\n"));
            assert_eq!(r.finish_reason, FinishReason::ToolCalls);
            assert_eq!(
                r.tool_calls,
                vec![
                    ToolCall {
                        id: "call_a".into(),
                        name: "kubectl_events".into(),
                        arguments: r#"{"namespace":"shop"}"#.into(),
                    },
                    ToolCall {
                        id: "call_b".into(),
                        name: "kubectl_get".into(),
                        arguments: r#"{"kind":"Pod"}"#.into(),
                    },
                ]
            );
            assert_eq!(
                r.usage,
                Usage {
                    prompt_tokens: 120,
                    completion_tokens: 30
                }
            );
            assert_eq!(r.model, "gpt-4o-2024");
            assert_eq!(
                seen,
                [
                    "text:Plan: read é",
                    "text:vents.\n",
                    "call:0:kubectl_events",
                    "call:1:kubectl_get"
                ]
            );
        }
    }

    #[test]
    fn a_stream_without_usage_is_estimated_and_one_cut_short_is_a_failure() {
        let no_usage = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"12345678\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]";
        let (result, _) = assemble(&[no_usage.as_bytes()]);
        let (r, usage_sent) = result.unwrap();
        assert!(!usage_sent);
        assert_eq!(
            r.usage,
            Usage {
                prompt_tokens: 100,
                completion_tokens: 2
            },
            "4 bytes a token"
        );
        assert_eq!(r.finish_reason, FinishReason::Stop);

        let cut = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"half an ans\"}}]}\n\n";
        let (result, seen) = assemble(&[cut.as_bytes()]);
        assert!(
            matches!(result, Err(Failure::Stream(LlmFailure::Other, ref m)) if m.contains("ended before")),
            "{:?}",
            result.err()
        );
        assert_eq!(seen, ["text:half an ans"], "what came was shown");
        let failure = Failure::Stream(LlmFailure::Other, "x".into());
        assert!(failure.retryable());
    }

    #[test]
    fn an_error_in_the_stream_is_an_http_failure_and_a_chunk_that_is_not_json_is_unreadable() {
        let error = "data: {\"error\":{\"message\":\"overloaded\",\"type\":\"server_error\"}}\n\n";
        let (result, _) = assemble(&[error.as_bytes()]);
        let Err(f) = result else { panic!("an error") };
        assert!(f.retryable());
        let (kind, what) = f.classify("http://model", "http://model/chat", Duration::from_secs(5));
        assert_eq!(kind, LlmFailure::Http);
        assert!(what.contains("server_error: overloaded"), "{what}");

        let (result, _) = assemble(&[b"data: {not json\n\n"]);
        let Err(f) = result else { panic!("unreadable") };
        assert!(!f.retryable());
    }

    #[test]
    fn the_request_streams_with_usage_unless_told_not_to() {
        let r = ChatRequest {
            model: "m".into(),
            messages: vec![],
            tools: vec![],
            tool_choice: ToolChoice::Auto,
            max_tokens: 10,
        };
        let streamed = request_json(&r, true);
        assert_eq!(streamed["stream"], true);
        assert_eq!(streamed["stream_options"]["include_usage"], true);
        let whole = request_json(&r, false);
        assert_eq!(whole["stream"], false);
        assert!(whole.get("stream_options").is_none());
    }

    #[test]
    fn a_provider_error_reads_as_its_type_and_message_sanitised() {
        assert_eq!(
            provider_message(br#"{"error":{"message":"Invalid model","type":"invalid_request_error","param":"model","code":null}}"#),
            "invalid_request_error: Invalid model (param: model)"
        );
        assert_eq!(
            provider_message(br#"{"error":"model not found"}"#),
            "model not found"
        );
        assert!(!provider_message(b"upstream said password=hunter2").contains("hunter2"));
    }
}
