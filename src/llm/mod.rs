//! Talking to a language model.
//!
//! [`Llm`] is the seam: one chat call with tools. [`OpenAiLlm`] implements it (reqwest, with
//! async-openai's provider configurations) for OpenAI, Azure OpenAI and any OpenAI-compatible
//! server (Ollama, vLLM, llama.cpp), streaming, with a per-request timeout and retries with
//! backoff on 429 and 5xx. Every call's token usage is
//! counted against a [`TokenBudget`] (per investigation and per UTC day) and reported to the
//! caller, which writes it to the audit trail. Nothing here sees a secret of the cluster: every
//! message's text is a [`Redacted`], which only the sanitiser makes — alert text, tool output,
//! history, playbooks and error messages alike.
//!
//! A call can be watched ([`Llm::chat_watched`]): a streaming client tells a [`Watch`] what the
//! model writes as it arrives, and [`live::LiveTokens`] carries it, sanitised line by line, to
//! whoever follows the request (the chat). The answer the caller gets is the same either way.

pub mod live;
mod openai;

use std::sync::Mutex;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use live::{LiveCall, LiveOutput, LiveToken, LiveTokens};
pub use openai::{OpenAiLlm, OpenAiSettings, Provider};

use crate::domain::{FinishReason, Usage};
use crate::redact::Redacted;

/// One message of a conversation. Its text is [`Redacted`]: nothing reaches the model
/// without passing the sanitiser.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum Message {
    System {
        content: Redacted,
    },
    User {
        content: Redacted,
    },
    Assistant {
        #[serde(default)]
        content: Option<Redacted>,
        #[serde(default)]
        tool_calls: Vec<ToolCall>,
    },
    Tool {
        tool_call_id: String,
        content: Redacted,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments as the model wrote them (a JSON string, possibly malformed).
    pub arguments: String,
}

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolDef {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    Auto,
    /// The model must call this tool (used to force a sentinel).
    Force(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    pub model: String,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolDef>,
    pub tool_choice: ToolChoice,
    pub max_tokens: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChatResponse {
    pub content: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub finish_reason: FinishReason,
    pub usage: Usage,
    pub model: String,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmError {
    /// The provider cannot be reached or keeps failing (after retries): the request waits.
    /// `message` says what happened in words an operator can act on (which setting, which URL,
    /// how many attempts); `kind` is what the metrics count.
    #[error("LLM unavailable: {message}")]
    Unavailable { kind: LlmFailure, message: String },
    /// The provider refused the request itself (bad model, bad key, bad schema): retrying will
    /// not help.
    #[error("LLM rejected the request: {0}")]
    Rejected(String),
    /// The token budget is spent.
    #[error("llm_budget_exceeded: {0}")]
    BudgetExceeded(String),
}

/// Why a model could not be used, as `kubemedic_llm_errors_total{kind}` counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LlmFailure {
    /// Connected (or tried to), and no answer came within `--llm-timeout-seconds`.
    Timeout,
    /// The connection was refused, or the host cannot be resolved or reached.
    Connect,
    /// The TLS handshake failed (certificate, protocol).
    Tls,
    /// The server answered with an HTTP error (429, 5xx) on every attempt.
    Http,
    /// Anything else on the way (a broken response body…).
    Other,
    /// The provider refused the request itself (4xx other than 429, a body it cannot read).
    Rejected,
}

impl LlmFailure {
    /// The metric label (the serde name).
    pub fn label(self) -> &'static str {
        match self {
            LlmFailure::Timeout => "timeout",
            LlmFailure::Connect => "connect",
            LlmFailure::Tls => "tls",
            LlmFailure::Http => "http",
            LlmFailure::Other => "other",
            LlmFailure::Rejected => "rejected",
        }
    }
}

impl LlmError {
    /// The failure kind for the metrics (`None` for a spent token budget: no call was made).
    pub fn failure(&self) -> Option<LlmFailure> {
        match self {
            LlmError::Unavailable { kind, .. } => Some(*kind),
            LlmError::Rejected(_) => Some(LlmFailure::Rejected),
            LlmError::BudgetExceeded(_) => None,
        }
    }
}

/// What a model writes while it answers, as a streaming call receives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delta<'a> {
    /// A piece of the message's text, as the model wrote it (not sanitised).
    Content(&'a str),
    /// A tool call's name, once, when it arrives (`index`: the call's place in the message).
    ToolCall { index: usize, name: &'a str },
}

/// Told what a model writes while a call runs ([`Llm::chat_watched`]).
pub trait Watch: Send + Sync {
    fn delta(&self, delta: Delta<'_>);
}

/// Watches nothing: a plain [`Llm::chat`].
pub struct Unwatched;

impl Watch for Unwatched {
    fn delta(&self, _: Delta<'_>) {}
}

#[async_trait]
pub trait Llm: Send + Sync {
    /// A short name for logs and the audit trail (`openai:gpt-4o`, `azure:deploy`).
    fn describe(&self) -> String;
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError>;
    /// [`Llm::chat`], telling `watch` what the model writes as it arrives. An implementation
    /// that does not stream tells it nothing; the answer is the same.
    async fn chat_watched(
        &self,
        request: &ChatRequest,
        watch: &dyn Watch,
    ) -> Result<ChatResponse, LlmError> {
        let _ = watch;
        self.chat(request).await
    }
}

/// An [`Llm`] that remembers how its last call went, so `/readyz` can say whether the model
/// server works without probing it: no extra traffic, no tokens spent on health checks.
pub struct ObservedLlm {
    inner: Box<dyn Llm>,
    last: Mutex<Option<(DateTime<Utc>, Option<String>)>>,
}

impl ObservedLlm {
    pub fn new(inner: Box<dyn Llm>) -> Self {
        Self {
            inner,
            last: Mutex::new(None),
        }
    }

    /// `(working, detail)`: not called yet counts as working; a failed last call does not.
    pub fn status(&self) -> (bool, String) {
        let name = self.inner.describe();
        match self.last.lock().ok().and_then(|l| l.clone()) {
            None => (true, format!("{name}: configured, not called yet")),
            Some((at, None)) => (true, format!("{name}: last call succeeded at {at}")),
            Some((at, Some(e))) => (false, format!("{name}: last call failed at {at}: {e}")),
        }
    }
}

#[async_trait]
impl Llm for ObservedLlm {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        self.chat_watched(request, &Unwatched).await
    }
    async fn chat_watched(
        &self,
        request: &ChatRequest,
        watch: &dyn Watch,
    ) -> Result<ChatResponse, LlmError> {
        let result = self.inner.chat_watched(request, watch).await;
        if let Ok(mut last) = self.last.lock() {
            *last = Some((Utc::now(), result.as_ref().err().map(ToString::to_string)));
        }
        result
    }
}

/// What `/readyz` reports as `llm`: the last call's outcome and the day's token budget.
pub struct LlmStatus {
    pub llm: std::sync::Arc<ObservedLlm>,
    pub budget: std::sync::Arc<TokenBudget>,
}

impl LlmStatus {
    pub fn status(&self) -> (bool, String) {
        let (ok, detail) = self.llm.status();
        let spent = self.budget.spent_today();
        let limit = self.budget.per_day;
        if spent >= limit {
            return (
                false,
                format!(
                    "{detail}; daily token budget spent ({spent} of {limit}): investigations end \
                     in review until 00:00 UTC"
                ),
            );
        }
        (
            ok,
            format!("{detail}; {spent} of {limit} daily tokens spent"),
        )
    }
}

/// Token limits: per investigation (both invocations together) and per UTC day (all
/// investigations of this process).
#[derive(Debug)]
pub struct TokenBudget {
    per_investigation: u64,
    per_day: u64,
    day: Mutex<(NaiveDate, u64)>,
}

impl TokenBudget {
    pub fn new(per_investigation: u64, per_day: u64) -> Self {
        Self {
            per_investigation,
            per_day,
            day: Mutex::new((Utc::now().date_naive(), 0)),
        }
    }

    pub fn per_investigation(&self) -> u64 {
        self.per_investigation
    }

    /// May another call be made, given what this investigation has spent?
    pub fn check(&self, spent_in_investigation: u64, now: DateTime<Utc>) -> Result<(), LlmError> {
        if spent_in_investigation >= self.per_investigation {
            return Err(LlmError::BudgetExceeded(format!(
                "{spent_in_investigation} tokens spent, investigation budget is {}",
                self.per_investigation
            )));
        }
        let mut day = self
            .day
            .lock()
            .map_err(|_| LlmError::BudgetExceeded("budget lock poisoned".into()))?;
        if day.0 != now.date_naive() {
            *day = (now.date_naive(), 0);
        }
        if day.1 >= self.per_day {
            return Err(LlmError::BudgetExceeded(format!(
                "{} tokens spent today, daily budget is {}",
                day.1, self.per_day
            )));
        }
        Ok(())
    }

    /// Record spent tokens.
    pub fn spend(&self, usage: Usage, now: DateTime<Utc>) {
        if let Ok(mut day) = self.day.lock() {
            if day.0 != now.date_naive() {
                *day = (now.date_naive(), 0);
            }
            day.1 += usage.total();
        }
    }

    pub fn spent_today(&self) -> u64 {
        self.day.lock().map(|d| d.1).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets() {
        let b = TokenBudget::new(1000, 1500);
        let now = Utc::now();
        assert!(b.check(0, now).is_ok());
        assert!(matches!(
            b.check(1000, now),
            Err(LlmError::BudgetExceeded(_))
        ));
        b.spend(
            Usage {
                prompt_tokens: 1400,
                completion_tokens: 200,
            },
            now,
        );
        assert!(
            matches!(b.check(0, now), Err(LlmError::BudgetExceeded(_))),
            "daily budget spent"
        );
        let tomorrow = now + chrono::Duration::days(1);
        assert!(b.check(0, tomorrow).is_ok(), "a new day starts fresh");
    }
}
