//! A streamed answer as it arrives: the server-sent events of the byte stream ([`SseReader`])
//! and the `chat.completion.chunk`s assembled into one [`ChatResponse`] ([`Assembly`]).

use super::*;

/// Server-sent events read from a byte stream as it arrives: the `data` of each event (lines
/// end with `\n`, `\r\n` or `\r`; comments and other fields are skipped).
#[derive(Default)]
pub(super) struct SseReader {
    /// Bytes of a line not yet ended (a chunk may end inside a line or a character).
    line: Vec<u8>,
    /// The `data` lines of the event being read.
    data: Option<String>,
    /// The last chunk ended with `\r`: a `\n` that starts the next one belongs to it.
    after_cr: bool,
}

impl SseReader {
    /// The data of the events `bytes` completes.
    pub(super) fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        for &b in bytes {
            if std::mem::take(&mut self.after_cr) && b == b'\n' {
                continue;
            }
            match b {
                b'\n' | b'\r' => {
                    self.after_cr = b == b'\r';
                    let line = std::mem::take(&mut self.line);
                    if let Some(data) = self.line_done(&line) {
                        out.push(data);
                    }
                }
                _ => self.line.push(b),
            }
        }
        out
    }

    /// The stream ended: an event its server did not close with a blank line.
    pub(super) fn end(&mut self) -> Vec<String> {
        let line = std::mem::take(&mut self.line);
        let mut out: Vec<String> = self.line_done(&line).into_iter().collect();
        out.extend(self.line_done(b""));
        out
    }

    pub(super) fn line_done(&mut self, line: &[u8]) -> Option<String> {
        if line.is_empty() {
            return self.data.take();
        }
        let line = String::from_utf8_lossy(line);
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line.as_ref(), ""),
        };
        if field == "data" {
            let data = self.data.get_or_insert_with(String::new);
            if !data.is_empty() {
                data.push('\n');
            }
            data.push_str(value);
        }
        None
    }
}

/// A tool call being assembled from its fragments.
#[derive(Default)]
pub(super) struct PartCall {
    id: String,
    name: String,
    arguments: String,
    announced: bool,
}

/// A streamed answer, assembled from its `chat.completion.chunk`s.
#[derive(Default)]
pub(super) struct Assembly {
    content: String,
    calls: BTreeMap<usize, PartCall>,
    finish: Option<String>,
    usage: Option<Usage>,
    model: String,
    /// `data: [DONE]` came.
    pub(super) done: bool,
}

impl Assembly {
    /// Take one event's data.
    pub(super) fn take(&mut self, data: &str, watch: &dyn Watch) -> Result<(), Failure> {
        let data = data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        if data.is_empty() || self.done {
            return Ok(());
        }
        let v: Value = serde_json::from_str(data).map_err(|e| {
            Failure::Unreadable(format!(
                "a streamed chunk is not JSON ({e}): {}",
                truncate(data, 300)
            ))
        })?;
        if let Some(e) = v.get("error").filter(|e| !e.is_null()) {
            let message = provider_message(json!({"error": e}).to_string().as_bytes());
            return Err(Failure::Stream(
                LlmFailure::Http,
                format!("the stream reported an error: {message}"),
            ));
        }
        if let Some(m) = v.get("model").and_then(Value::as_str)
            && !m.is_empty()
        {
            m.clone_into(&mut self.model);
        }
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
            self.usage = Some(Usage {
                prompt_tokens: n("prompt_tokens"),
                completion_tokens: n("completion_tokens"),
            });
        }
        // One answer is asked for (no `n`): its choice is index 0.
        let choice = v.get("choices").and_then(Value::as_array).and_then(|c| {
            c.iter()
                .find(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
        });
        let Some(choice) = choice else {
            return Ok(()); // the usage chunk, or Azure's prompt filter results
        };
        let delta = choice.get("delta").unwrap_or(&Value::Null);
        if let Some(text) = delta.get("content").and_then(Value::as_str)
            && !text.is_empty()
        {
            self.content.push_str(text);
            watch.delta(Delta::Content(text));
        }
        for (pos, c) in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let index = c
                .get("index")
                .and_then(Value::as_u64)
                .map_or(pos, |i| i as usize);
            let call = self.calls.entry(index).or_default();
            if let Some(id) = c.get("id").and_then(Value::as_str)
                && call.id.is_empty()
            {
                id.clone_into(&mut call.id);
            }
            if let Some(name) = c.pointer("/function/name").and_then(Value::as_str) {
                call.name.push_str(name);
            }
            match c.pointer("/function/arguments") {
                Some(Value::String(s)) => call.arguments.push_str(s),
                Some(Value::Null) | None => {}
                Some(other) => call.arguments.push_str(&other.to_string()),
            }
            if !call.announced && !call.name.is_empty() {
                call.announced = true;
                watch.delta(Delta::ToolCall {
                    index,
                    name: &call.name,
                });
            }
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish = Some(reason.to_owned());
        }
        Ok(())
    }

    /// The answer as a whole one would have been, and whether the server sent its usage (else
    /// it is estimated from `prompt_bytes` and the answer, at 4 bytes a token, so the budgets
    /// still count).
    pub(super) fn finish(self, prompt_bytes: usize) -> Result<(ChatResponse, bool), Failure> {
        if self.finish.is_none() && !self.done {
            return Err(Failure::Stream(
                LlmFailure::Other,
                "the stream ended before the answer was complete".into(),
            ));
        }
        let tool_calls: Vec<ToolCall> = self
            .calls
            .into_values()
            .enumerate()
            .map(|(i, c)| ToolCall {
                id: if c.id.is_empty() {
                    format!("call_{i}")
                } else {
                    c.id
                },
                name: c.name,
                arguments: if c.arguments.is_empty() {
                    "{}".into()
                } else {
                    c.arguments
                },
            })
            .collect();
        let sent = self.usage.is_some();
        let usage = self.usage.unwrap_or_else(|| {
            let written =
                self.content.len() + tool_calls.iter().map(|c| c.arguments.len()).sum::<usize>();
            Usage {
                prompt_tokens: prompt_bytes.div_ceil(4) as u64,
                completion_tokens: written.div_ceil(4) as u64,
            }
        });
        let content = Some(self.content).filter(|s| !s.trim().is_empty());
        Ok((
            ChatResponse {
                content,
                tool_calls,
                finish_reason: finish_reason(self.finish.as_deref()),
                usage,
                model: self.model,
            },
            sent,
        ))
    }
}
