//! The typed events of a conversation, read from the store and the live tokens: a turn's
//! preamble, the audit trail of the request it follows, then its answer ([`Feed`]), and the
//! OpenAI-style stream of one turn's answer ([`TurnStream`]).
//!
//! It stays beside the HTTP handlers rather than in `chat/`: it renders the trail with the
//! typed events the request stream shares (`web::events`), which the chat service below the web
//! layer may not import.

use super::*;
use crate::domain::audit;

/// A position: after event `n` of part `part` (0 the preamble, an audit id, or [`TAIL`]) of
/// turn `turn`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Pos {
    pub turn: i64,
    pub part: i64,
    pub n: i64,
}

impl Pos {
    pub(super) fn parse(raw: &str) -> Option<Self> {
        let mut it = raw.trim().split('.');
        let p = Pos {
            turn: it.next()?.parse().ok()?,
            part: it.next()?.parse().ok()?,
            n: it.next()?.parse().ok()?,
        };
        it.next().is_none().then_some(p)
    }
}

impl std::fmt::Display for Pos {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.turn, self.part, self.n)
    }
}

/// One typed chat event.
#[derive(Debug, Clone)]
pub struct ChatEvent {
    pub id: Pos,
    pub kind: &'static str,
    pub data: Value,
    /// The model's words as they come: not in the trail, sent without an id (`id` is the
    /// position of the last durable event).
    pub live: bool,
}

/// The chat contract's name for a request's typed event.
fn chat_kind(kind: &str) -> &'static str {
    match kind {
        "plan" => "plan",
        "tool_call" => "tool_call",
        "tool_result" => "tool_result",
        "error" => "error",
        _ => "status",
    }
}

fn line_kind(kind: &str) -> &'static str {
    match kind {
        "plan" => "plan",
        "error" => "error",
        "token" => "token",
        _ => "status",
    }
}

/// Whether an audit event is where a turn of `kind` stops following its request: the
/// approval asked for (a question), or the request's end.
fn ends_turn(kind: TurnKind, e: &crate::domain::AuditEvent) -> bool {
    let terminal = e
        .transition()
        .and_then(|t| t.to)
        .is_some_and(|p| p.is_terminal());
    terminal || (kind != TurnKind::Decision && e.kind == audit::APPROVAL_REQUESTED)
}

/// The live output of the model investigating the request a running turn follows.
struct Live {
    /// Subscribed when the feed starts, so what the model writes before the turn is first
    /// read is not missed.
    rx: tokio::sync::broadcast::Receiver<LiveToken>,
    /// The running turn and its request, while there is one.
    following: Option<(i64, Uuid)>,
    conversation: Uuid,
    /// Where the feed stands (the id of the last durable event sent).
    at: Pos,
    /// When the wait for the store that a live token interrupted ends: the wait goes on, so
    /// a burst of tokens does not read the store for each.
    until: Option<tokio::time::Instant>,
    /// The invocation the last token came from, and a token of the next one held back until
    /// the store is read: the record of the invocation before it is there by then.
    invocation: Option<u8>,
    held: Option<ChatEvent>,
}

impl Live {
    /// The next token of the request followed (never, while no turn runs); `None` when the
    /// model began its next invocation and the store should be read before its words.
    pub(super) async fn next(&mut self) -> Option<ChatEvent> {
        use tokio::sync::broadcast::error::RecvError;
        if let Some(e) = self.held.take() {
            return Some(e);
        }
        loop {
            let Some((turn, request)) = self.following else {
                return std::future::pending().await;
            };
            let token = match self.rx.recv().await {
                Ok(t) if t.request == request => t,
                // Another request's, or tokens skipped by a reader too slow: live output is
                // what is there when it is there.
                Ok(_) | Err(RecvError::Lagged(_)) => continue,
                Err(RecvError::Closed) => {
                    self.following = None;
                    continue;
                }
            };
            let mut data = json!({
                "turn": turn,
                "conversation_id": self.conversation,
                "request_id": request,
                "live": true,
                "invocation": token.invocation,
                "call": token.call,
            });
            let kind = match token.output {
                LiveOutput::Text(text) => {
                    data["content"] = json!(text);
                    "token"
                }
                LiveOutput::ToolCall(tool) => {
                    data["message"] = json!(format!("the model calls {tool}"));
                    data["tool"] = json!(tool);
                    data["detail_kind"] = json!("model_tool_call");
                    "status"
                }
            };
            let event = ChatEvent {
                id: self.at,
                kind,
                data,
                live: true,
            };
            if self
                .invocation
                .replace(token.invocation)
                .is_some_and(|i| i != token.invocation)
            {
                self.held = Some(event);
                return None;
            }
            return Some(event);
        }
    }
}

/// Reads a conversation's events from a position, turn by turn, waiting while a turn runs.
pub(super) struct Feed {
    state: Arc<AppState>,
    chat: Arc<ChatService>,
    conversation: Uuid,
    /// Only this turn (a streaming completion), or every turn from `at` on.
    only: Option<i64>,
    pub(super) at: Pos,
    queue: VecDeque<ChatEvent>,
    finished: bool,
    live: Live,
    /// Wakes the feed when the request of the turn it waits on (`following`) moves.
    watch: TrailWatch,
    following: Option<Uuid>,
}

impl Feed {
    pub(super) fn new(
        state: Arc<AppState>,
        chat: Arc<ChatService>,
        conversation: Uuid,
        only: Option<i64>,
    ) -> Self {
        let at = Pos {
            turn: only.map_or(0, |t| t - 1),
            part: TAIL,
            n: i64::MAX,
        };
        let live = Live {
            rx: chat.live().subscribe(),
            following: None,
            conversation,
            at,
            until: None,
            invocation: None,
            held: None,
        };
        Self {
            watch: state.store.watch_trail(),
            following: None,
            state,
            chat,
            conversation,
            only,
            at,
            queue: VecDeque::new(),
            finished: false,
            live,
        }
    }

    pub(super) async fn next(&mut self) -> Option<ChatEvent> {
        let mut first = self.live.until.is_none();
        loop {
            if let Some(e) = self.queue.pop_front() {
                self.at = e.id;
                return Some(e);
            }
            if self.finished {
                return None;
            }
            if !first {
                self.live.at = self.at;
                // One deadline across the live words that arrive meanwhile: they must not keep
                // the trail from being read.
                let poll = self.state.stream_poll;
                let until = *self
                    .live
                    .until
                    .get_or_insert_with(|| tokio::time::Instant::now() + poll);
                let left = until.saturating_duration_since(tokio::time::Instant::now());
                tokio::select! {
                    _ = self.watch.wait(self.following, left) => self.live.until = None,
                    () = self.state.shutdown.cancelled() => return None,
                    e = self.live.next() => match e {
                        Some(e) => return Some(e),
                        None => self.live.until = None,
                    },
                }
            }
            first = false;
            match self.read().await {
                Ok(()) => {}
                Err(message) => {
                    self.finished = true;
                    return Some(ChatEvent {
                        id: self.at,
                        kind: "error",
                        data: json!({"message": message}),
                        live: false,
                    });
                }
            }
        }
    }

    /// Queue what is new after `at`; mark the feed finished after the last turn's `done`.
    pub(super) async fn read(&mut self) -> Result<(), String> {
        let from = if self.at.part == TAIL && self.at.n == i64::MAX {
            self.at.turn
        } else {
            self.at.turn - 1
        };
        let turns = self
            .state
            .store
            .turns(self.conversation, from, 20)
            .await
            .map_err(|e| format!("the store is unavailable ({e}); reconnect to resume"))?;
        let turns: Vec<ChatTurn> = turns
            .into_iter()
            .filter(|t| self.only.is_none_or(|only| t.id == only))
            .collect();
        if turns.is_empty() {
            self.finished = true;
            return Ok(());
        }
        let count = turns.len();
        for (i, turn) in turns.iter().enumerate() {
            self.following = turn.turn.request_id;
            let done = self.turn_events(turn).await?;
            if !done {
                return Ok(());
            }
            if i + 1 == count && (self.only.is_some() || count < 20) {
                self.finished = true;
            }
        }
        Ok(())
    }

    pub(super) fn push(&mut self, id: Pos, kind: &'static str, data: Value) {
        if id > self.at {
            self.queue.push_back(ChatEvent {
                id,
                kind,
                data,
                live: false,
            });
        }
    }

    /// Queue a turn's events after `at`; whether the turn is done.
    pub(super) async fn turn_events(&mut self, turn: &ChatTurn) -> Result<bool, String> {
        let t = turn.id;
        let base = |extra: Value| {
            let mut d = json!({"turn": t, "conversation_id": turn.turn.conversation_id});
            if let (Value::Object(d), Value::Object(x)) = (&mut d, extra) {
                d.extend(x);
            }
            d
        };
        self.push(
            Pos {
                turn: t,
                part: 0,
                n: 0,
            },
            "status",
            base(json!({
                "message": format!("{} asked: {}", turn.turn.asked_by, turn.turn.question),
                "kind": turn.turn.kind,
            })),
        );
        for (i, line) in turn.turn.preamble.iter().enumerate() {
            let mut extra = json!({"message": line.text});
            if !line.data.is_null() {
                extra["data"] = line.data.clone();
            }
            self.push(
                Pos {
                    turn: t,
                    part: 0,
                    n: i as i64 + 1,
                },
                line_kind(&line.kind),
                base(extra),
            );
        }
        // Where the turn stands, read before its trail: a turn found done has all of its trail
        // in the read that follows.
        let progress = self
            .chat
            .progress(turn)
            .await
            .map_err(|e| format!("{e:?}"))?;
        // While the turn runs, the model's words for its request are shown as they come.
        self.live.following = turn
            .turn
            .request_id
            .filter(|_| !progress.answer.done)
            .map(|r| (t, r));
        if let Some(request) = turn.turn.request_id {
            let after = if self.at.turn == t && self.at.part > 0 && self.at.part < TAIL {
                // Within the trail: re-read the audit event we stopped inside.
                (self.at.part - 1).max(turn.turn.after_audit)
            } else {
                turn.turn.after_audit
            };
            if self.at
                < (Pos {
                    turn: t,
                    part: TAIL,
                    n: -1,
                })
            {
                let rows = self
                    .state
                    .store
                    .audit_after(request, after, BATCH)
                    .await
                    .map_err(|e| format!("the store is unavailable ({e}); reconnect to resume"))?;
                let full = rows.len() as i64 == BATCH;
                let mut ended = false;
                for row in &rows {
                    for (n, typed) in crate::web::events::typed(row).into_iter().enumerate() {
                        let mut data = typed.data;
                        data["turn"] = json!(t);
                        data["request_id"] = json!(request);
                        data["detail_kind"] = json!(typed.kind);
                        self.push(
                            Pos {
                                turn: t,
                                part: row.id,
                                n: n as i64,
                            },
                            chat_kind(typed.kind),
                            data,
                        );
                    }
                    if ends_turn(turn.turn.kind, row) {
                        ended = true;
                        break;
                    }
                }
                if full && !ended {
                    return Ok(false);
                }
            }
        }
        if !progress.answer.done {
            return Ok(false);
        }
        let mut n = 0;
        for line in progress.answer.text.split_inclusive('\n') {
            self.push(
                Pos {
                    turn: t,
                    part: TAIL,
                    n,
                },
                "token",
                base(json!({"content": line})),
            );
            n += 1;
        }
        if let Some(action) = progress.answer.hitl {
            let a = progress.approval.as_ref();
            self.push(
                Pos {
                    turn: t,
                    part: TAIL,
                    n,
                },
                "hitl_request",
                base(json!({
                    "hitl_required": true,
                    "action_id": action,
                    "request_id": turn.turn.request_id,
                    "action_type": a.map(|a| a.action_type.clone()),
                    "workflow_id": a.map(|a| a.workflow_id.clone()),
                    "target": a.map(|a| a.target.to_string()),
                    "risk_score": a.map(|a| a.risk_score),
                    "risk_level": a.map(|a| a.risk_reason.clone()),
                    "summary": a.map(|a| a.summary.clone()),
                    "expires_at": a.map(|a| a.expires_at),
                })),
            );
            n += 1;
        }
        self.push(
            Pos {
                turn: t,
                part: TAIL,
                n,
            },
            "done",
            base(json!({
                "request_id": turn.turn.request_id,
                "phase": progress.request.as_ref().map(|r| r.phase),
                "hitl_required": progress.answer.hitl.is_some(),
                "action_id": progress.answer.hitl,
            })),
        );
        Ok(true)
    }
}

/// A streaming completion: one turn's events as `chat.completion.chunk`s.
pub(super) struct TurnStream {
    pub(super) inner: Feed,
    pub(super) turn: i64,
    pub(super) id: String,
    pub(super) created: i64,
    pub(super) conversation_id: Uuid,
    pub(super) state: StreamState,
    pub(super) queue: VecDeque<Event>,
    /// The last content sent was the model's live text, and whether it ended its line: what
    /// follows starts a paragraph of its own.
    pub(super) after_live: Option<bool>,
}

#[derive(PartialEq)]
pub(super) enum StreamState {
    Start,
    Running,
    Done,
}

impl TurnStream {
    pub(super) fn chunk(&self, delta: Value, finish: Option<&str>, hitl: Option<Value>) -> Event {
        let mut choice = json!({"index": 0, "delta": delta, "finish_reason": finish});
        if let Some(action) = hitl {
            choice["hitl_required"] = json!(!action.is_null());
            choice["action_id"] = action;
        }
        Event::default().data(
            json!({
                "id": self.id,
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": MODEL,
                "conversation_id": self.conversation_id,
                "turn": self.turn,
                "choices": [choice],
            })
            .to_string(),
        )
    }

    pub(super) async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(e) = self.queue.pop_front() {
                return Some(e);
            }
            match self.state {
                StreamState::Done => return None,
                StreamState::Start => {
                    self.state = StreamState::Running;
                    return Some(self.chunk(
                        json!({"role": "assistant", "content": ""}),
                        None,
                        None,
                    ));
                }
                StreamState::Running => {}
            }
            let Some(e) = self.inner.next().await else {
                self.state = StreamState::Done;
                self.queue.push_back(Event::default().data("[DONE]"));
                continue;
            };
            let text = |k: &str| {
                e.data
                    .get(k)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned()
            };
            // The model's live text is shown as it comes; what follows it starts afresh.
            let gap = match (e.live && e.kind == "token", self.after_live) {
                (true, _) => "",
                (false, Some(true)) => "\n",
                (false, Some(false)) => "\n\n",
                (false, None) => "",
            };
            match e.kind {
                "token" => {
                    let c = text("content");
                    if c.is_empty() {
                        continue;
                    }
                    self.after_live = e.live.then(|| c.ends_with('\n'));
                    self.queue.push_back(self.chunk(
                        json!({"content": format!("{gap}{c}")}),
                        None,
                        None,
                    ));
                }
                "hitl_request" => {
                    // The contract's signal: no content, the structured fields.
                    self.queue.push_back(self.chunk(
                        json!({}),
                        Some("stop"),
                        Some(e.data.get("action_id").cloned().unwrap_or(Value::Null)),
                    ));
                }
                "done" => {
                    if e.data.get("hitl_required") != Some(&json!(true)) {
                        self.queue
                            .push_back(self.chunk(json!({}), Some("stop"), None));
                    }
                }
                kind => {
                    let m = text("message");
                    if !m.is_empty() {
                        self.after_live = None;
                        let line = format!("{gap}> _{kind}: {}_\n\n", m.replace('\n', " "));
                        self.queue
                            .push_back(self.chunk(json!({"content": line}), None, None));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_round_trip_and_order_by_turn_part_and_event() {
        let p = Pos {
            turn: 3,
            part: 41,
            n: 2,
        };
        assert_eq!(Pos::parse(&p.to_string()), Some(p));
        assert_eq!(Pos::parse("3.41"), None);
        assert_eq!(Pos::parse("x.1.2"), None);
        assert!(
            Pos {
                turn: 3,
                part: 0,
                n: 9
            } < Pos {
                turn: 3,
                part: 1,
                n: 0
            }
        );
        assert!(
            Pos {
                turn: 3,
                part: TAIL,
                n: 0
            } < Pos {
                turn: 4,
                part: 0,
                n: 0
            }
        );
    }
}
