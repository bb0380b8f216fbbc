//! [`OpenAiLlm`]: chat completions with tools through async-openai, for OpenAI, Azure OpenAI
//! and OpenAI-compatible servers. Requests are written as the Chat Completions wire format
//! (async-openai's bring-your-own-types path), so any compatible server that speaks the format
//! works, whatever fields it adds.

use std::time::Duration;

use async_openai::Client;
use async_openai::config::{AzureConfig, Config, OpenAIConfig};
use async_openai::error::OpenAIError;
use async_trait::async_trait;
use serde_json::{Value, json};
use tracing::{debug, warn};

use super::{ChatRequest, ChatResponse, Llm, LlmError, LlmFailure, Message, ToolCall, ToolChoice};
use crate::domain::{FinishReason, Usage};
use crate::secret::{Secret, redact_url};

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
}

/// The longest a connection may take to open (shorter when the whole call's timeout is).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

pub struct OpenAiLlm {
    client: Client<Box<dyn Config>>,
    describe: String,
    /// The server, without credentials, for messages.
    endpoint: String,
    timeout: Duration,
    max_retries: u32,
    backoff: Duration,
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
        // async-openai retries 429/5xx three times on its own by default; under our loop that
        // would multiply to (1+3)×(1+N) requests. The plain transport leaves one retry policy:
        // ours, which `--llm-max-retries` sets.
        let client = Client::build(http.clone(), config)
            .with_http_service(async_openai::middleware::ReqwestService::new(http));
        Ok(Self {
            client,
            describe,
            endpoint,
            timeout: s.timeout,
            max_retries: s.max_retries,
            backoff: s.backoff,
        })
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

/// The Chat Completions request body.
pub fn request_json(r: &ChatRequest) -> Value {
    let mut body = json!({
        "model": r.model,
        "messages": r.messages.iter().map(message_json).collect::<Vec<_>>(),
        "max_tokens": r.max_tokens,
        "temperature": 0,
        "stream": false,
    });
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
    let finish_reason = match choice.get("finish_reason").and_then(Value::as_str) {
        Some("stop") => FinishReason::Stop,
        Some("tool_calls") | Some("function_call") => FinishReason::ToolCalls,
        Some("length") => FinishReason::Length,
        Some("content_filter") => FinishReason::ContentFilter,
        _ => FinishReason::Other,
    };
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
        format!("{}…", &s[..s.floor_char_boundary(n)])
    }
}

/// Whether an error is worth retrying (rate limit, server error, network).
fn retryable(e: &OpenAIError) -> bool {
    match e {
        OpenAIError::ApiError(a) => {
            a.status_code.as_u16() == 429 || a.status_code.is_server_error()
        }
        OpenAIError::Reqwest(_) => true,
        OpenAIError::JSONDeserialize(..) => false,
        _ => false,
    }
}

/// What went wrong with one attempt, told apart the way an operator fixes it: no answer in
/// time (raise `--llm-timeout-seconds` or fix the model server), nobody listening (the URL, the
/// network policy), a TLS failure (the certificate) or an HTTP error (the provider's status).
/// The words name the server (without credentials) but not the attempts; the caller adds them.
fn classify(e: &OpenAIError, endpoint: &str, timeout: Duration) -> (LlmFailure, String) {
    match e {
        OpenAIError::ApiError(a) => (LlmFailure::Http, format!("{endpoint} answered HTTP {}", a)),
        OpenAIError::Reqwest(r) => classify_transport(r, endpoint, timeout),
        other => (LlmFailure::Other, other.to_string()),
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
        let body = request_json(request);
        let mut delay = self.backoff;
        let mut attempt = 0;
        loop {
            let result: Result<Value, OpenAIError> =
                self.client.chat().create_byot(body.clone()).await;
            match result {
                Ok(v) => return parse_response(&v),
                Err(e) if retryable(&e) => {
                    let (kind, what) = classify(&e, &self.endpoint, self.timeout);
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
                Err(e) => {
                    debug!(error = %e, "LLM rejected the request");
                    return Err(LlmError::Rejected(e.to_string()));
                }
            }
        }
    }
}
