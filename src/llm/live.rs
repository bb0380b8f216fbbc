//! Live model output: what a model writes while it answers, for whoever follows the request.
//!
//! [`LiveTokens`] is one hub per process. The investigator opens a [`LiveCall`] for each model
//! call and hands it to the streaming client as its [`Watch`]; the call publishes the model's
//! text line by line, each line through the sanitiser, and the name of each tool the model
//! calls as it arrives, tagged with the request, the invocation and the call. The chat's
//! streams subscribe and keep their own request's.
//!
//! Nothing here is durable, and nothing waits for a watcher: what is published while nobody
//! watches is gone, a watcher that falls more than [`CAPACITY`] tokens behind skips ahead, and
//! a watcher on another replica sees nothing. The audit trail stays the record; these are only
//! the words as they come.

use std::sync::Mutex;

use tokio::sync::broadcast;
use uuid::Uuid;

use super::{Delta, Watch};
use crate::redact::sanitize_text;

/// Tokens kept for a watcher that has not read them yet (all requests together).
pub const CAPACITY: usize = 1024;
/// A line longer than this (bytes) goes out in pieces.
const MAX_LINE: usize = 2_000;
/// How long an opened `-----BEGIN …` block is held back, waiting for its `-----END`, so the
/// sanitiser sees a key whole (bytes).
const MAX_HELD: usize = 16 * 1024;
/// A tool name longer than this is not a tool name.
const MAX_TOOL_NAME: usize = 100;

/// One piece of a model's output, for the request it works on.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveToken {
    pub request: Uuid,
    /// 1 (the root cause) or 2 (the selection).
    pub invocation: u8,
    /// The model call within the invocation, from 1 (a retried call is a new one).
    pub call: u32,
    pub output: LiveOutput,
}

#[derive(Debug, Clone, PartialEq)]
pub enum LiveOutput {
    /// Text the model wrote: a line with its `\n`, or the rest when the call ends; sanitised.
    Text(String),
    /// The model calls this tool (its arguments are still arriving).
    ToolCall(String),
}

/// The process's hub of live model output.
pub struct LiveTokens {
    tx: broadcast::Sender<LiveToken>,
}

impl Default for LiveTokens {
    fn default() -> Self {
        Self::new()
    }
}

impl LiveTokens {
    pub fn new() -> Self {
        let (tx, _) = broadcast::channel(CAPACITY);
        Self { tx }
    }

    /// Every token published from now on (of all requests: keep yours).
    pub fn subscribe(&self) -> broadcast::Receiver<LiveToken> {
        self.tx.subscribe()
    }

    /// Whether anybody watches (else publishing is skipped, sanitiser and all).
    pub fn watched(&self) -> bool {
        self.tx.receiver_count() > 0
    }

    fn publish(&self, token: LiveToken) {
        // No watcher is not an error: live output is for whoever is there.
        let _ = self.tx.send(token);
    }

    /// The [`Watch`] of one model call for `request`.
    pub fn call(&self, request: Uuid, invocation: u8, call: u32) -> LiveCall<'_> {
        LiveCall {
            hub: self,
            request,
            invocation,
            call,
            pending: Mutex::new(String::new()),
        }
    }
}

/// One model call's [`Watch`]: gathers the text into lines, sanitises each and publishes it.
/// [`LiveCall::finish`] sends the rest when the call is over.
pub struct LiveCall<'a> {
    hub: &'a LiveTokens,
    request: Uuid,
    invocation: u8,
    call: u32,
    pending: Mutex<String>,
}

impl LiveCall<'_> {
    fn publish(&self, output: LiveOutput) {
        self.hub.publish(LiveToken {
            request: self.request,
            invocation: self.invocation,
            call: self.call,
            output,
        });
    }

    fn text(&self, text: &str) {
        if !text.is_empty() && self.hub.watched() {
            self.publish(LiveOutput::Text(sanitize_text(text)));
        }
    }

    /// The call is over: send what is left of the last line.
    pub fn finish(&self) {
        let rest = match self.pending.lock() {
            Ok(mut p) => std::mem::take(&mut *p),
            Err(_) => return,
        };
        self.text(&rest);
    }
}

/// Where the text in `pending` may be cut so that what comes before goes out: after its last
/// complete line, or (a line too long) at [`MAX_LINE`] — unless that would split a
/// `-----BEGIN …-----END` block the sanitiser must see whole.
fn cut_at(pending: &str) -> Option<usize> {
    let at = match pending.rfind('\n') {
        Some(i) => i + 1,
        None if pending.len() >= MAX_LINE => pending.floor_char_boundary(MAX_LINE),
        None => return None,
    };
    let head = pending.get(..at).unwrap_or_default();
    let open = head
        .rfind("-----BEGIN")
        .and_then(|b| head.get(b..))
        .is_some_and(|block| !block.contains("-----END"));
    if open && pending.len() < MAX_HELD {
        return None;
    }
    Some(at)
}

impl Watch for LiveCall<'_> {
    fn delta(&self, delta: Delta<'_>) {
        match delta {
            Delta::Content(piece) => {
                let ready = {
                    let Ok(mut pending) = self.pending.lock() else {
                        return;
                    };
                    pending.push_str(piece);
                    match cut_at(&pending) {
                        Some(at) => pending.drain(..at).collect::<String>(),
                        None => return,
                    }
                };
                self.text(&ready);
            }
            Delta::ToolCall { name, .. } => {
                if self.hub.watched() && name.len() <= MAX_TOOL_NAME {
                    self.publish(LiveOutput::ToolCall(sanitize_text(name)));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(rx: &mut broadcast::Receiver<LiveToken>) -> Vec<LiveOutput> {
        std::iter::from_fn(|| rx.try_recv().ok())
            .map(|t| t.output)
            .collect()
    }

    #[test]
    fn text_goes_out_in_whole_lines_sanitised_and_the_rest_at_the_end() {
        let hub = LiveTokens::new();
        let mut rx = hub.subscribe();
        let request = Uuid::new_v4();
        let call = hub.call(request, 1, 2);
        for piece in [
            "I will rea",
            "d the pods.\nThe pass",
            "word=hunter2",
            "-x is ",
            "set\nDo",
        ] {
            call.delta(Delta::Content(piece));
        }
        call.delta(Delta::ToolCall {
            index: 0,
            name: "kubectl_describe",
        });
        call.delta(Delta::Content("ne"));
        call.finish();
        let out = texts(&mut rx);
        assert_eq!(out.len(), 4, "{out:?}");
        assert_eq!(out[0], LiveOutput::Text("I will read the pods.\n".into()));
        let LiveOutput::Text(second) = &out[1] else {
            panic!("{out:?}")
        };
        assert!(
            second.starts_with("The pass") && !second.contains("hunter2"),
            "a secret split across pieces is sanitised as one line: {second}"
        );
        assert_eq!(out[2], LiveOutput::ToolCall("kubectl_describe".into()));
        assert_eq!(out[3], LiveOutput::Text("Done".into()));
    }

    #[test]
    fn a_key_block_is_held_until_it_ends_and_a_long_line_goes_in_pieces() {
        let hub = LiveTokens::new();
        let mut rx = hub.subscribe();
        let call = hub.call(Uuid::new_v4(), 2, 1);
        call.delta(Delta::Content("-----BEGIN RSA PRIVATE KEY-----\n"));
        call.delta(Delta::Content(&"MIIEowIBAAKCAQEAx9z\n".repeat(3)));
        assert!(texts(&mut rx).is_empty(), "held back until the block ends");
        call.delta(Delta::Content("-----END RSA PRIVATE KEY-----\n"));
        let out = texts(&mut rx);
        assert_eq!(out.len(), 1, "{out:?}");
        let LiveOutput::Text(block) = &out[0] else {
            panic!("{out:?}")
        };
        assert!(!block.contains("MIIEowIBAAKCAQEAx9z"), "{block}");

        call.delta(Delta::Content(&"x".repeat(MAX_LINE + 10)));
        let out = texts(&mut rx);
        assert_eq!(out, vec![LiveOutput::Text("x".repeat(MAX_LINE))]);
    }

    #[test]
    fn nobody_watching_costs_nothing_and_fails_nothing() {
        let hub = LiveTokens::new();
        let call = hub.call(Uuid::new_v4(), 1, 1);
        call.delta(Delta::Content("text\n"));
        call.finish();
        assert!(!hub.watched());
    }
}
