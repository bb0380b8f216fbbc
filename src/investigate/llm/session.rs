//! One conversation with the model: its calls under the token budget, with the truncation
//! retry, and the running totals the trail records.

use super::*;

/// One tool call as it ran: what the model reads (`text`, cut at the tool limit) and what a
/// person is shown (`whole`, when the text was cut).
pub(super) struct Ran {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) args: Value,
    pub(super) text: String,
    pub(super) whole: Option<String>,
    pub(super) ok: bool,
    pub(super) truncated: bool,
    /// The cluster could not be reached: the investigation waits.
    pub(super) unreachable: Option<String>,
    /// An MCP server failed this call: `(server, why)`; its tools are withdrawn.
    pub(super) withdrawn: Option<(String, String)>,
    pub(super) duration_ms: Option<u64>,
}

/// A conversation's running totals.
pub(super) struct Session<'a> {
    pub(super) inv: &'a LlmInvestigator,
    /// The request investigated (its live output is published under it).
    pub(super) request: uuid::Uuid,
    pub(super) invocation: u8,
    pub(super) model: String,
    pub(super) usage: Usage,
    /// Tokens the investigation had spent before this session.
    pub(super) spent_before: u64,
    pub(super) calls: Vec<LlmCallRecord>,
}

impl Session<'_> {
    /// One model call with budget checks and the truncation retry.
    pub(super) async fn chat(
        &mut self,
        messages: &[Message],
        tools: &[ToolDef],
        choice: ToolChoice,
    ) -> Result<ChatResponse, LlmError> {
        let mut max_tokens = self.inv.settings.max_tokens;
        let mut retried = false;
        loop {
            let now = self.inv.clock.now();
            self.inv
                .budget
                .check(self.spent_before + self.usage.total(), now)?;
            let request = ChatRequest {
                model: self.model.clone(),
                messages: messages.to_vec(),
                tools: tools.to_vec(),
                tool_choice: choice.clone(),
                max_tokens,
            };
            let started = std::time::Instant::now();
            let call = u32::try_from(self.calls.len() + 1).unwrap_or(u32::MAX);
            let live = self
                .inv
                .live
                .as_ref()
                .map(|hub| hub.call(self.request, self.invocation, call));
            let watch: &dyn Watch = match &live {
                Some(l) => l,
                None => &Unwatched,
            };
            let result = self.inv.llm.chat_watched(&request, watch).await;
            if let Some(l) = &live {
                l.finish();
            }
            let response = match result {
                Ok(r) => r,
                Err(e) => {
                    if let (Some(m), Some(kind)) = (&self.inv.metrics, e.failure()) {
                        m.llm_error(kind.label());
                    }
                    return Err(e);
                }
            };
            let duration_ms = u64::try_from(started.elapsed().as_millis()).ok();
            self.usage.add(response.usage);
            self.inv.budget.spend(response.usage, now);
            if let Some(m) = &self.inv.metrics {
                m.llm_tokens(&self.model, response.usage);
            }
            self.calls.push(LlmCallRecord {
                invocation: self.invocation,
                model: self.model.clone(),
                prompt_tokens: response.usage.prompt_tokens,
                completion_tokens: response.usage.completion_tokens,
                finish_reason: response.finish_reason,
                tool_calls: response.tool_calls.len(),
                duration_ms,
            });
            if response.finish_reason == FinishReason::Length && !retried {
                // Cut off: once more with twice the room (the first answer is discarded).
                retried = true;
                max_tokens = (max_tokens * 2).min(16_384);
                debug!(max_tokens, "answer truncated; retrying with more tokens");
                continue;
            }
            return Ok(response);
        }
    }
}
