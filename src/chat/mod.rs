//! Asking kubemedic (`POST /v1/chat/completions`, `kubemedic ask`, the dashboard's Ask page).
//!
//! A question is not a second pipeline. [`ChatService::ask`] reads what the question is about
//! against the cluster ([`resolve`]), and a question about an object becomes a remediation
//! request of source `chat` through the same ingest as an alert — requested by the asker's key,
//! with the question (and the conversation's recent turns) as its text. From there the request
//! goes through the same investigators, proofs, policy, approvals, execution exactly once and
//! verification; the gate never lets a request asked in a chat run without a human decision.
//! The conversation follows the request's audit trail and answers from what its stages
//! recorded ([`answer`]). "approve"/"deny" (or an `action_id`) decide the pending approval
//! through the approval service, as an approver on the dashboard would.
//!
//! Invariants: a conversation is read and continued only by its owner; a decision needs the
//! approver role; everything a user typed passes the sanitiser before it is stored or sent on.

pub mod answer;
pub mod intent;
pub mod resolve;

use std::sync::Arc;

use serde_json::json;
use tracing::info;
use uuid::Uuid;

use crate::approval::{Approvals, Confirmation};
use crate::clock::Clock;
use crate::cluster::ClusterReader;
use crate::domain::{
    ApprovalRequest, Channel, ChatLine, ChatTurn, Conversation, NewTurn, RemediationRequest,
    Target, TurnKind,
};
use crate::ingest::IngestQueue;
use crate::llm::LiveTokens;
use crate::notify::render::clip;
use crate::redact::sanitize_text;
use crate::store::{IngestOutcome, Store};

pub use answer::Answer;
pub use resolve::Resolution;

/// The signal name a question is ingested under.
pub const QUESTION_SIGNAL: &str = "KubemedicQuestion";
/// The longest message kept, in characters.
pub const MAX_MESSAGE_CHARS: usize = 4_000;
/// How many earlier turns a question carries to the investigator (the seed's message cap is
/// 20 messages: 10 questions and their answers).
pub const HISTORY_TURNS: usize = 10;
/// How much of an earlier answer is carried, in characters.
pub const HISTORY_ANSWER_CHARS: usize = 2_000;
/// The most turns a conversation holds; a longer one is refused (start a new one).
pub const MAX_TURNS: i64 = 500;
/// The most questions one asker may send per minute (on this replica): each can start an
/// investigation, which costs cluster reads and model tokens.
pub const QUESTIONS_PER_MINUTE: usize = 12;

/// Who is asking.
#[derive(Debug, Clone)]
pub struct Asker {
    /// The key's (or session's) subject: the conversation's owner and the request's requester.
    pub subject: String,
    /// Whether the asker may decide approvals (the approver role).
    pub can_decide: bool,
    /// The trace the question belongs to (the caller's `traceparent`, or the span that took
    /// it): a request the question opens continues it.
    pub trace: Option<crate::domain::TraceContext>,
}

/// Why a message was not taken.
#[derive(Debug, Clone, PartialEq)]
pub enum ChatError {
    Bad {
        field: &'static str,
        message: String,
    },
    Forbidden(String),
    NotFound(String),
    /// The approval is no longer pending, or refused the decision.
    Conflict(String),
    /// Too many questions from this asker: retry after the seconds given.
    TooMany(u64),
    Unavailable(String),
}

impl From<crate::store::StoreError> for ChatError {
    fn from(e: crate::store::StoreError) -> Self {
        tracing::warn!(error = %e, "chat: store error");
        ChatError::Unavailable("the store is unavailable; retry".into())
    }
}

/// A message taken: its conversation and the turn it made.
#[derive(Debug, Clone)]
pub struct Asked {
    pub conversation: Conversation,
    pub turn: ChatTurn,
}

/// Where a turn stands now: its request and pending approval, and the answer so far.
#[derive(Debug, Clone)]
pub struct Progress {
    pub request: Option<RemediationRequest>,
    pub approval: Option<ApprovalRequest>,
    pub answer: Answer,
}

pub struct ChatService {
    store: Arc<dyn Store>,
    ingest: Arc<IngestQueue>,
    reader: Option<Arc<dyn ClusterReader>>,
    approvals: Option<Arc<Approvals>>,
    clock: Arc<dyn Clock>,
    pace: Pace,
    live: Arc<LiveTokens>,
}

/// When each asker's recent questions came (for [`QUESTIONS_PER_MINUTE`]).
#[derive(Default)]
struct Pace(
    std::sync::Mutex<
        std::collections::HashMap<String, std::collections::VecDeque<std::time::Instant>>,
    >,
);

impl Pace {
    /// Count a question of `who` at `now`; refused (with the seconds to wait) when they sent
    /// [`QUESTIONS_PER_MINUTE`] in the minute before.
    fn admit(&self, who: &str, now: std::time::Instant) -> Result<(), ChatError> {
        let minute = std::time::Duration::from_secs(60);
        let Ok(mut recent) = self.0.lock() else {
            return Ok(());
        };
        recent.retain(|_, q| q.back().is_some_and(|t| now.duration_since(*t) < minute));
        let q = recent.entry(who.to_owned()).or_default();
        while q.front().is_some_and(|t| now.duration_since(*t) >= minute) {
            q.pop_front();
        }
        if q.len() >= QUESTIONS_PER_MINUTE {
            let wait = q.front().map_or(60, |t| {
                60u64.saturating_sub(now.duration_since(*t).as_secs())
            });
            return Err(ChatError::TooMany(wait.max(1)));
        }
        q.push_back(now);
        Ok(())
    }
}

impl ChatService {
    pub fn new(
        store: Arc<dyn Store>,
        ingest: Arc<IngestQueue>,
        reader: Option<Arc<dyn ClusterReader>>,
        approvals: Option<Arc<Approvals>>,
        clock: Arc<dyn Clock>,
        live: Arc<LiveTokens>,
    ) -> Self {
        Self {
            store,
            ingest,
            reader,
            approvals,
            clock,
            pace: Pace::default(),
            live,
        }
    }

    /// What the models write as they work (this replica's investigations), for the streams to
    /// show while a turn's request is investigated.
    pub fn live(&self) -> &LiveTokens {
        &self.live
    }

    /// The conversation `id`, if `owner` owns it (another's is "not found": its existence is
    /// not disclosed).
    pub async fn conversation(&self, id: Uuid, owner: &str) -> Result<Conversation, ChatError> {
        match self.store.conversation(id).await? {
            Some(c) if c.owner == owner => Ok(c),
            _ => Err(ChatError::NotFound(format!("no conversation {id}"))),
        }
    }

    /// Take one user message into a conversation (a new one when `conversation` is `None`).
    pub async fn ask(
        &self,
        who: &Asker,
        conversation: Option<Uuid>,
        message: &str,
        action_id: Option<Uuid>,
    ) -> Result<Asked, ChatError> {
        let message = clip(&sanitize_text(message.trim()), MAX_MESSAGE_CHARS);
        if message.is_empty() {
            return Err(ChatError::Bad {
                field: "messages",
                message: "the last user message has no text".into(),
            });
        }
        let now = self.clock.now();
        let conversation = match conversation {
            Some(id) => self.conversation(id, &who.subject).await?,
            None => {
                let c = Conversation {
                    id: Uuid::new_v4(),
                    owner: who.subject.clone(),
                    title: clip(&message, 80),
                    created_at: now,
                    updated_at: now,
                };
                self.store.open_conversation(&c).await?;
                c
            }
        };
        let turns = self.store.turns(conversation.id, 0, MAX_TURNS + 1).await?;
        if turns.len() as i64 >= MAX_TURNS {
            return Err(ChatError::Bad {
                field: "conversation_id",
                message: format!(
                    "the conversation has {MAX_TURNS} turns; start a new one (omit conversation_id)"
                ),
            });
        }
        let decision = intent::decision(&message);
        let new = if action_id.is_some() || decision.is_some() {
            let Some(approve) = decision else {
                return Err(ChatError::Bad {
                    field: "messages",
                    message: "with an action_id the message must be a decision: 'approve' or \
                              'deny' (or yes/no, continue/cancel)"
                        .into(),
                });
            };
            self.decide(who, &conversation, &turns, &message, approve, action_id)
                .await?
        } else {
            self.pace.admit(&who.subject, std::time::Instant::now())?;
            self.question(who, &conversation, &turns, &message).await?
        };
        let turn = self.store.add_turn(&new).await?;
        info!(
            conversation = %conversation.id,
            turn = turn.id,
            kind = new.kind.as_str(),
            request = ?new.request_id,
            asked_by = %who.subject,
            "chat message taken"
        );
        Ok(Asked { conversation, turn })
    }

    fn turn(
        &self,
        who: &Asker,
        conversation: &Conversation,
        kind: TurnKind,
        question: &str,
    ) -> NewTurn {
        NewTurn {
            conversation_id: conversation.id,
            at: self.clock.now(),
            asked_by: who.subject.clone(),
            kind,
            question: question.to_owned(),
            target: None,
            request_id: None,
            after_audit: 0,
            action_id: None,
            preamble: vec![],
            answer: None,
        }
    }

    fn clarify(&self, mut turn: NewTurn, text: String) -> NewTurn {
        turn.kind = TurnKind::Clarify;
        turn.answer = Some(text);
        turn
    }

    async fn question(
        &self,
        who: &Asker,
        conversation: &Conversation,
        turns: &[ChatTurn],
        message: &str,
    ) -> Result<NewTurn, ChatError> {
        let mut turn = self.turn(who, conversation, TurnKind::Question, message);
        turn.preamble.push(ChatLine::new(
            "status",
            "reading the question against the cluster",
        ));
        let Some(reader) = &self.reader else {
            return Ok(self.clarify(
                turn,
                "No Kubernetes cluster is configured, so I cannot investigate anything. \
                 Start kubemedic with access to a cluster (--kubeconfig, or in-cluster)."
                    .into(),
            ));
        };
        let previous = turns.iter().rev().find_map(|t| t.turn.target.clone());
        let resolution = match resolve::resolve(reader.as_ref(), message, previous.as_ref()).await {
            Ok(r) => r,
            Err(e) => {
                turn.preamble.push(ChatLine::new("error", e.clone()));
                return Ok(self.clarify(
                    turn,
                    format!("I could not read the cluster to resolve the question: {e}"),
                ));
            }
        };
        match resolution {
            Resolution::Target { target, how } => {
                turn.preamble.push(
                    ChatLine::new("plan", format!("investigate {target} ({how})")).with_data(
                        json!({"steps": [
                            format!("investigate {target} and what it depends on"),
                            "select a remediation and prove it against the live cluster",
                            "ask the policy, then you, before anything changes",
                        ]}),
                    ),
                );
                self.open_request(who, conversation, turns, message, &target, &mut turn)
                    .await?;
                Ok(turn)
            }
            Resolution::Scan { namespace } => {
                turn.kind = TurnKind::Scan;
                turn.preamble.push(ChatLine::new(
                    "plan",
                    format!("scan namespace {namespace} for unhealthy workloads and pods"),
                ));
                let found = match resolve::scan(reader.as_ref(), &namespace, self.clock.now()).await
                {
                    Ok(f) => f,
                    Err(e) => {
                        return Ok(self.clarify(
                            turn,
                            format!("I could not scan namespace {namespace}: {e}"),
                        ));
                    }
                };
                let mut listing = found
                    .iter()
                    .map(|f| format!("- **{}**: {}", f.target, f.what))
                    .collect::<Vec<_>>()
                    .join("\n");
                if found.is_empty() {
                    let text = format!(
                        "Nothing in namespace {namespace} looks unhealthy: every pod is running \
                         or completed and its containers are ready."
                    );
                    turn.answer = Some(text);
                    return Ok(turn);
                }
                if let [only] = found.as_slice() {
                    let target = only.target.clone();
                    turn.preamble.push(ChatLine::new(
                        "status",
                        format!(
                            "one problem in namespace {namespace}: {}; investigating {target}",
                            only.what
                        ),
                    ));
                    self.open_request(who, conversation, turns, message, &target, &mut turn)
                        .await?;
                    return Ok(turn);
                }
                listing.push_str(
                    "\n\nAsk about one of them (e.g. \"why is <name> failing?\") and I will \
                     investigate it.",
                );
                let text = format!("Unhealthy in namespace {namespace}:\n{listing}");
                turn.answer = Some(text);
                Ok(turn)
            }
            Resolution::Ambiguous { candidates } => {
                let list = candidates
                    .iter()
                    .map(|t| format!("- {t}"))
                    .collect::<Vec<_>>()
                    .join("\n");
                Ok(self.clarify(
                    turn,
                    format!(
                        "More than one object matches; which one do you mean?\n{list}\n\n\
                         Name the namespace or the kind (\"deployment checkout in shop\")."
                    ),
                ))
            }
            Resolution::Unknown => Ok(self.clarify(
                turn,
                "Which workload, pod, node or namespace do you mean? I look up the names in \
                 your question among the cluster's objects and found none of them. For example: \
                 \"why is checkout crashing in shop?\" or \"is anything wrong in namespace \
                 payments?\""
                    .into(),
            )),
        }
    }

    /// Ingest the question as a signal about `target`: a new request, or the active one that
    /// already holds the target.
    async fn open_request(
        &self,
        who: &Asker,
        conversation: &Conversation,
        turns: &[ChatTurn],
        message: &str,
        target: &Target,
        turn: &mut NewTurn,
    ) -> Result<(), ChatError> {
        let mut context = String::new();
        for t in turns.iter().rev().take(HISTORY_TURNS).rev() {
            context.push_str(&format!("user: {}\n", t.turn.question));
            if let Some(a) = &t.turn.answer {
                context.push_str(&format!("kubemedic: {}\n", clip(a, HISTORY_ANSWER_CHARS)));
            }
        }
        // Unique per question: a repeat about the same target joins its active request as an
        // occurrence instead of being dropped as a redelivery.
        let fingerprint = format!("chat-{}-{}", conversation.id.simple(), turns.len());
        let mut signal = question_signal(
            &who.subject,
            target,
            message,
            &context,
            Some(conversation.id),
            &fingerprint,
            self.clock.now(),
        )?;
        signal.trace = who.trace;
        let outcomes = self
            .ingest
            .submit(vec![signal])
            .await
            .map_err(|e| ChatError::Unavailable(format!("the store cannot take it: {e}")))?;
        let request = outcomes.first().and_then(IngestOutcome::request_id);
        let Some(request) = request else {
            return Err(ChatError::Unavailable(
                "the question did not open a request; retry".into(),
            ));
        };
        let joined = matches!(outcomes.first(), Some(IngestOutcome::Occurrence { .. }));
        turn.preamble.push(
            ChatLine::new(
                "status",
                if joined {
                    format!("{target} is already being handled: following request {request}")
                } else {
                    format!("opened request {request} for {target}")
                },
            )
            .with_data(json!({"request_id": request})),
        );
        turn.target = Some(target.clone());
        turn.request_id = Some(request);
        Ok(())
    }

    /// Ask about `target`, named by the caller rather than found in the words of a question
    /// (an MCP client's `investigate`): a new conversation whose one question opens the
    /// target's request — or joins the active one — exactly as a question resolved to it would.
    /// `message` is the question's text (empty: "investigate <target>").
    pub async fn ask_about(
        &self,
        who: &Asker,
        target: &Target,
        message: &str,
    ) -> Result<Asked, ChatError> {
        let mut message = clip(&sanitize_text(message.trim()), MAX_MESSAGE_CHARS);
        if message.is_empty() {
            message = format!("investigate {target}");
        }
        let Some(reader) = &self.reader else {
            return Err(ChatError::Unavailable(
                "no Kubernetes cluster is configured, so nothing can be investigated".into(),
            ));
        };
        let target = check_target(reader.as_ref(), target).await?;
        self.pace.admit(&who.subject, std::time::Instant::now())?;
        let now = self.clock.now();
        let conversation = Conversation {
            id: Uuid::new_v4(),
            owner: who.subject.clone(),
            title: clip(&message, 80),
            created_at: now,
            updated_at: now,
        };
        self.store.open_conversation(&conversation).await?;
        let mut turn = self.turn(who, &conversation, TurnKind::Question, &message);
        turn.preamble.push(ChatLine::new(
            "plan",
            format!("investigate {target} (named by the caller)"),
        ));
        self.open_request(who, &conversation, &[], &message, &target, &mut turn)
            .await?;
        let turn = self.store.add_turn(&turn).await?;
        info!(
            conversation = %conversation.id,
            turn = turn.id,
            request = ?turn.turn.request_id,
            asked_by = %who.subject,
            "question about a named target taken"
        );
        Ok(Asked { conversation, turn })
    }

    async fn decide(
        &self,
        who: &Asker,
        conversation: &Conversation,
        turns: &[ChatTurn],
        message: &str,
        approve: bool,
        action_id: Option<Uuid>,
    ) -> Result<NewTurn, ChatError> {
        let mut turn = self.turn(who, conversation, TurnKind::Decision, message);
        let approval_id = match action_id {
            Some(id) => Some(id),
            None => self.pending_in(turns).await?,
        };
        let Some(approval_id) = approval_id else {
            return Ok(self.clarify(
                turn,
                "There is no pending approval in this conversation to decide. Ask a question \
                 first; when I propose a change, answer 'approve' or 'deny'."
                    .into(),
            ));
        };
        if !who.can_decide {
            return Err(ChatError::Forbidden(format!(
                "{} may ask but not decide: deciding needs the approver role",
                who.subject
            )));
        }
        let Some(approvals) = &self.approvals else {
            return Err(ChatError::Unavailable(
                "human approvals are not configured on this daemon".into(),
            ));
        };
        let Some(approval) = self.store.get_approval(approval_id).await? else {
            return Err(ChatError::NotFound(format!("no approval {approval_id}")));
        };
        let trail = self.store.audit_trail(approval.request_id).await?;
        let after = trail.last().map_or(0, |e| e.id);
        let decided = approvals
            .decide_api(
                approval_id,
                approve,
                None,
                Some("decided in a conversation with kubemedic"),
                &who.subject,
                Channel::Chat,
                Confirmation::NotAsked,
            )
            .await
            .map_err(|r| match r.status {
                404 => ChatError::NotFound(r.detail),
                400 | 422 => ChatError::Bad {
                    field: "action_id",
                    message: r.detail,
                },
                503 => ChatError::Unavailable(r.detail),
                _ => ChatError::Conflict(format!("{}: {}", r.title, r.detail)),
            })?;
        turn.target = Some(decided.target.clone());
        turn.request_id = Some(decided.request_id);
        turn.action_id = Some(approval_id);
        turn.after_audit = after;
        turn.preamble.push(ChatLine::new(
            "status",
            format!(
                "{} by {} — {}",
                if approve { "approved" } else { "denied" },
                who.subject,
                if approve {
                    "executing, then verifying"
                } else {
                    "nothing will be changed"
                }
            ),
        ));
        Ok(turn)
    }

    /// The approval pending on the conversation's latest request, if any.
    async fn pending_in(&self, turns: &[ChatTurn]) -> Result<Option<Uuid>, ChatError> {
        for t in turns.iter().rev() {
            let Some(request) = t.turn.request_id else {
                continue;
            };
            if let Some(a) = self.store.approval_of_request(request).await?
                && a.status() == crate::domain::ApprovalStatus::Pending
            {
                return Ok(Some(a.id));
            }
            return Ok(None);
        }
        Ok(None)
    }

    /// Where `turn` stands now; a turn found done has its answer kept.
    pub async fn progress(&self, turn: &ChatTurn) -> Result<Progress, ChatError> {
        let Some(request_id) = turn.turn.request_id else {
            return Ok(Progress {
                request: None,
                approval: None,
                answer: Answer {
                    text: turn.turn.answer.clone().unwrap_or_default(),
                    hitl: None,
                    done: true,
                },
            });
        };
        let request = self.store.get_request(request_id).await?;
        let approval = self.store.approval_of_request(request_id).await?;
        let Some(req) = &request else {
            return Err(ChatError::NotFound(format!("request {request_id} is gone")));
        };
        let answer = answer::compose(turn.turn.kind, req, approval.as_ref());
        if answer.done && turn.turn.answer.is_none() {
            self.store.finish_turn(turn.id, &answer.text).await?;
        }
        Ok(Progress {
            request,
            approval,
            answer,
        })
    }
}

/// The signal a question about `target` is ingested as: a native signal of source `chat`
/// (validated and sanitised like any signal), requested by `who`, with the question as its
/// summary and the conversation so far (`context`) in its description.
pub fn question_signal(
    who: &str,
    target: &Target,
    message: &str,
    context: &str,
    conversation: Option<Uuid>,
    fingerprint: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<crate::domain::NewSignal, ChatError> {
    let mut annotations = serde_json::Map::new();
    if let Some(c) = conversation {
        annotations.insert("kubemedic.io/conversation".into(), json!(c.to_string()));
    }
    annotations.insert(crate::domain::ASKED_BY_ANNOTATION.into(), json!(who));
    let body = json!({
        "name": QUESTION_SIGNAL,
        "severity": "info",
        "mode": "reactive",
        "target": {"kind": target.kind, "name": target.name, "namespace": target.namespace},
        "summary": message,
        "description": if context.is_empty() {
            format!("Asked by {who} in a conversation with kubemedic.")
        } else {
            format!(
                "Asked by {who} in a conversation with kubemedic. Earlier in the \
                 conversation:\n{context}"
            )
        },
        "annotations": annotations,
        "fingerprint": fingerprint,
        "source": who,
    });
    let mut signal =
        crate::ingest::native::parse(body.to_string().as_bytes(), now).map_err(|e| {
            ChatError::Bad {
                field: "messages",
                message: format!("{}: {}", e.field, e.message),
            }
        })?;
    signal.source = crate::domain::SignalSource::Chat;
    Ok(signal)
}

/// `target` as the cluster names it (the kind resolved as the API server serves it), if it
/// exists and kubemedic may read it; else an error naming the target and why.
pub async fn check_target(
    reader: &dyn ClusterReader,
    target: &Target,
) -> Result<Target, ChatError> {
    let bad = |message: String| ChatError::Bad {
        field: "target",
        message,
    };
    let res = reader
        .resource(&target.kind)
        .await
        .map_err(|e| bad(format!("{target}: {e}")))?;
    let namespace = if res.namespaced {
        match target.namespace.as_deref().map(str::trim) {
            Some(ns) if !ns.is_empty() => Some(ns.to_owned()),
            _ => {
                return Err(bad(format!(
                    "{target}: {} is namespaced: give its namespace",
                    res.kind
                )));
            }
        }
    } else {
        None
    };
    reader
        .get(&res, namespace.as_deref(), &target.name)
        .await
        .map_err(|e| match e.kind {
            crate::cluster::ErrorKind::NotFound => ChatError::NotFound(format!(
                "{target}: there is no such {} in the cluster",
                res.kind
            )),
            _ => bad(format!("{target}: {e}")),
        })?;
    Ok(Target {
        kind: res.kind.clone(),
        name: target.name.clone(),
        namespace,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_asker_gets_a_dozen_questions_a_minute_and_others_are_not_held_up() {
        let pace = Pace::default();
        let t0 = std::time::Instant::now();
        for i in 0..QUESTIONS_PER_MINUTE {
            assert!(
                pace.admit("key:vera", t0 + std::time::Duration::from_secs(i as u64))
                    .is_ok()
            );
        }
        let at = t0 + std::time::Duration::from_secs(20);
        assert_eq!(pace.admit("key:vera", at), Err(ChatError::TooMany(40)));
        assert!(pace.admit("key:alice", at).is_ok());
        // A minute after the first, one more fits.
        assert!(
            pace.admit("key:vera", t0 + std::time::Duration::from_secs(61))
                .is_ok()
        );
    }
}
