//! The chat endpoints: `POST /v1/chat/completions` (OpenAI-compatible, streaming or not),
//! `GET /v1/chat/stream/{session_id}` (the conversation's typed events), `POST
//! /api/v1/chat/hitl/resume` (decide the pending approval), `GET /v1/models`, and the list of
//! one's conversations. They authenticate with the dashboard's keys and sessions (a viewer may
//! ask; deciding needs an approver) and hand everything to [`crate::chat::ChatService`].
//!
//! A conversation's events are read, never kept in memory: each turn's preamble from the
//! store, then the audit trail of the request it follows (the same typed events as the
//! request's own stream, named for the chat contract), then its answer. An event's id is
//! `<turn>.<audit id>.<n>` (`0` for the preamble, `9223372036854775807` for the answer), so a
//! client that reconnects with `Last-Event-ID` resumes where it stopped — across restarts and
//! replicas. Between them, while the request is investigated on this replica, come the model's
//! words as it writes them ([`crate::llm::LiveTokens`]): `token` events (and `status` for the
//! tools it calls) marked `live`, with no id — they are not in the trail, so a client's
//! `Last-Event-ID` stays on the last durable event and a reconnect resumes from the trail.
//! Errors use OpenAI's shape, `{"error": {"message", "type", "param", "code"}}`, which the
//! OpenAI clients read.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use tracing::Instrument as _;
use uuid::Uuid;

use super::{AppState, Caller};

mod feed;

use crate::chat::{Asker, ChatError, ChatService, Progress};
use crate::domain::{ChatTurn, Role, TurnKind};
use crate::llm::{LiveOutput, LiveToken};
use crate::store::TrailWatch;
use feed::{Feed, Pos, StreamState, TurnStream};

/// The one model this endpoint serves.
pub const MODEL: &str = "kubemedic";
/// How long a non-streaming answer waits for the turn to reach its answer.
const ANSWER_WAIT: Duration = Duration::from_secs(300);
/// The position of a turn's answer within it.
const TAIL: i64 = i64::MAX;
/// Audit events read per poll.
const BATCH: i64 = 200;

/// An error in OpenAI's shape.
#[derive(Debug)]
pub struct ChatApiError {
    status: StatusCode,
    message: String,
    kind: &'static str,
    param: Option<String>,
}

impl ChatApiError {
    fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            kind,
            param: None,
        }
    }
    fn bad(param: &str, message: impl Into<String>) -> Self {
        Self {
            param: Some(param.to_owned()),
            ..Self::new(StatusCode::BAD_REQUEST, "invalid_request_error", message)
        }
    }
}

impl IntoResponse for ChatApiError {
    fn into_response(self) -> Response {
        let code = match self.status {
            StatusCode::UNAUTHORIZED => "invalid_api_key",
            StatusCode::FORBIDDEN => "insufficient_role",
            StatusCode::NOT_FOUND => "not_found",
            StatusCode::CONFLICT => "conflict",
            StatusCode::TOO_MANY_REQUESTS => "rate_limited",
            StatusCode::SERVICE_UNAVAILABLE => "unavailable",
            _ => "invalid_request",
        };
        let mut r = (
            self.status,
            Json(json!({"error": {
                "message": self.message,
                "type": self.kind,
                "param": self.param,
                "code": code,
            }})),
        )
            .into_response();
        if self.status == StatusCode::UNAUTHORIZED
            && let Ok(v) = "Bearer realm=\"kubemedic\"".parse()
        {
            r.headers_mut()
                .insert(axum::http::header::WWW_AUTHENTICATE, v);
        }
        r
    }
}

impl From<super::ApiError> for ChatApiError {
    fn from(e: super::ApiError) -> Self {
        use super::ApiError as A;
        match e {
            A::Unauthorized => Self::new(
                StatusCode::UNAUTHORIZED,
                "authentication_error",
                "missing or invalid credentials: send an API key as a bearer token",
            ),
            A::Forbidden(m) => Self::new(StatusCode::FORBIDDEN, "permission_error", m),
            A::NotFound(m) => Self::new(StatusCode::NOT_FOUND, "not_found_error", m),
            A::Conflict(m) => Self::new(StatusCode::CONFLICT, "conflict_error", m),
            A::BadRequest { field, message } => Self {
                param: field,
                ..Self::new(StatusCode::BAD_REQUEST, "invalid_request_error", message)
            },
            A::TooManyRequests(s) => Self::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                format!("too many failed attempts; retry in {s} s"),
            ),
            A::Unavailable(m) => Self::new(StatusCode::SERVICE_UNAVAILABLE, "server_error", m),
            A::Internal(m) => Self::new(StatusCode::INTERNAL_SERVER_ERROR, "server_error", m),
            // Body limits and encodings: the chat reads its body whole, as axum's extractor does.
            other => Self::new(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                match other {
                    A::TooLarge(limit) => format!("body larger than {limit} bytes"),
                    A::BodyTimeout(t) => {
                        format!("the body did not arrive within {} s", t.as_secs())
                    }
                    A::UnsupportedEncoding(e) => format!("Content-Encoding `{e}` is not supported"),
                    _ => "bad request".to_owned(),
                },
            ),
        }
    }
}

impl From<ChatError> for ChatApiError {
    fn from(e: ChatError) -> Self {
        match e {
            ChatError::Bad { field, message } => Self::bad(field, message),
            ChatError::Forbidden(m) => Self::new(StatusCode::FORBIDDEN, "permission_error", m),
            ChatError::NotFound(m) => Self::new(StatusCode::NOT_FOUND, "not_found_error", m),
            ChatError::Conflict(m) => Self::new(StatusCode::CONFLICT, "conflict_error", m),
            ChatError::TooMany(s) => Self::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                format!(
                    "more than {} questions in a minute; retry in {s} s",
                    crate::chat::QUESTIONS_PER_MINUTE
                ),
            ),
            ChatError::Unavailable(m) => {
                Self::new(StatusCode::SERVICE_UNAVAILABLE, "server_error", m)
            }
        }
    }
}

fn service(state: &AppState) -> Result<Arc<ChatService>, ChatApiError> {
    state.chat.clone().ok_or_else(|| {
        ChatApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "server_error",
            "the chat is not available on this daemon",
        )
    })
}

/// The caller, authenticated, with the role `needed`; a browser session must send its CSRF
/// token on a state-changing request.
fn asker(
    caller: Caller,
    headers: &HeaderMap,
    needed: Role,
    changes: bool,
) -> Result<Asker, ChatApiError> {
    let who = if changes {
        caller.need_to_change(needed, headers)?
    } else {
        caller.need(needed)?
    };
    Ok(Asker {
        can_decide: who.role.allows(Role::Approver),
        subject: who.subject,
        trace: None,
    })
}

// --- The request body.

#[derive(Debug, Deserialize)]
struct ChatRequest {
    #[serde(default)]
    model: Option<String>,
    messages: Vec<InMessage>,
    #[serde(default)]
    stream: bool,
    /// OpenAI's end-user id: informative only; the owner is the authenticated caller.
    #[serde(default)]
    #[allow(dead_code)]
    user: Option<String>,
    #[serde(default)]
    conversation_id: Option<String>,
    #[serde(default)]
    action_id: Option<String>,
    // Everything else an OpenAI client may send (temperature, max_tokens, tools, user_id…)
    // is accepted and has no effect: the answer is an investigation, not sampled text.
}

#[derive(Debug, Deserialize)]
struct InMessage {
    role: String,
    #[serde(default)]
    content: Option<Content>,
}

/// A message's content: a string, or OpenAI's list of parts (only text parts are read).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<Value>),
}

impl Content {
    fn text(&self) -> String {
        match self {
            Content::Text(s) => s.clone(),
            Content::Parts(parts) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

fn parse_uuid(field: &str, raw: Option<&str>) -> Result<Option<Uuid>, ChatApiError> {
    raw.map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            Uuid::parse_str(s).map_err(|_| ChatApiError::bad(field, format!("`{s}` is not a UUID")))
        })
        .transpose()
}

/// `POST /v1/chat/completions`
#[utoipa::path(post, path = "/v1/chat/completions", tag = "chat",
    request_body(content = Object, description = "An OpenAI chat completion request: `model` (`kubemedic`), `messages` (the last `user` message is the question or the decision), `stream`, `user`, and kubemedic's `conversation_id` and `action_id`", content_type = "application/json"),
    responses((status = 200, description = "`chat.completion` (with `conversation_id`, `request_id`, and `hitl_required`/`action_id` on the choice), or with `stream: true` `chat.completion.chunk` server-sent events ending with `data: [DONE]`", body = Object),
              (status = 400, description = "OpenAI-shaped error naming the field", body = Object),
              (status = 401, description = "No valid key", body = Object),
              (status = 403, description = "Deciding needs the approver role", body = Object),
              (status = 404, description = "Not the caller's conversation, or an unknown model", body = Object),
              (status = 409, description = "The approval is no longer pending", body = Object)),
    security(("bearer" = []), ("session" = [])))]
pub async fn completions(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response, ChatApiError> {
    let who = asker(caller, &headers, Role::Viewer, true)?;
    let chat = service(&state)?;
    let req: ChatRequest = serde_json::from_slice(&body)
        .map_err(|e| ChatApiError::bad("body", format!("not a chat completion request: {e}")))?;
    if let Some(m) = req.model.as_deref()
        && m != MODEL
    {
        return Err(ChatApiError {
            param: Some("model".into()),
            ..ChatApiError::new(
                StatusCode::NOT_FOUND,
                "invalid_request_error",
                format!("the model `{m}` does not exist; this server serves `{MODEL}`"),
            )
        });
    }
    let Some(last) = req.messages.iter().rev().find(|m| m.role == "user") else {
        return Err(ChatApiError::bad(
            "messages",
            "no message with role `user`: send the question as the last user message",
        ));
    };
    let text = last.content.as_ref().map(Content::text).unwrap_or_default();
    let conversation = parse_uuid("conversation_id", req.conversation_id.as_deref())?;
    let action = parse_uuid("action_id", req.action_id.as_deref())?;
    // The question is one span, under the caller's `traceparent` if it sent one; a request
    // it opens continues that trace.
    let incoming = crate::telemetry::incoming_trace(&headers);
    let span = tracing::info_span!(
        target: crate::telemetry::TRACE_TARGET,
        "chat",
        otel.name = "chat question",
        otel.kind = "server",
        otel.status_code = tracing::field::Empty,
    );
    if let Some(parent) = &incoming {
        crate::telemetry::continue_trace(&span, parent);
    }
    let mut who = who;
    who.trace = crate::telemetry::current_trace(&span).or(incoming);
    let asked = chat
        .ask(&who, conversation, &text, action)
        .instrument(span.clone())
        .await;
    if asked.is_err() {
        span.record("otel.status_code", "ERROR");
    }
    let asked = asked?;
    let id = format!("chatcmpl-{}", Uuid::new_v4().simple());
    let created = state.clock.now().timestamp();
    let conversation_id = asked.conversation.id;
    if req.stream {
        let feed = TurnStream {
            inner: Feed::new(state.clone(), chat, conversation_id, Some(asked.turn.id)),
            turn: asked.turn.id,
            id,
            created,
            conversation_id,
            state: StreamState::Start,
            queue: VecDeque::new(),
            after_live: None,
        };
        let events = futures::stream::unfold(feed, |mut f| async move {
            f.next().await.map(|e| (Ok::<_, Infallible>(e), f))
        });
        return Ok(Sse::new(events)
            .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
            .into_response());
    }
    let progress = wait_answer(&state, &chat, &asked.turn).await?;
    let mut content = progress.answer.text.clone();
    if !progress.answer.done {
        content.push_str(&format!(
            "\n\n_Still working; follow GET /v1/chat/stream/{conversation_id} or ask again._"
        ));
    }
    Ok(Json(json!({
        "id": id,
        "object": "chat.completion",
        "created": created,
        "model": MODEL,
        "conversation_id": conversation_id,
        "turn": asked.turn.id,
        "request_id": progress.request.as_ref().map(|r| r.id),
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": "stop",
            "hitl_required": progress.answer.hitl.is_some(),
            "action_id": progress.answer.hitl,
        }],
        "usage": usage(progress.request.as_ref()),
    }))
    .into_response())
}

/// The model tokens the turn's request spent (zero with the offline investigator).
fn usage(req: Option<&crate::domain::RemediationRequest>) -> Value {
    let (mut p, mut c) = (0u64, 0u64);
    if let Some(r) = req {
        if let Some(a) = &r.state.analysis {
            p += a.usage.prompt_tokens;
            c += a.usage.completion_tokens;
        }
        if let Some(s) = &r.state.selection {
            p += s.usage.prompt_tokens;
            c += s.usage.completion_tokens;
        }
    }
    json!({"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c})
}

async fn wait_answer(
    state: &AppState,
    chat: &ChatService,
    turn: &ChatTurn,
) -> Result<Progress, ChatApiError> {
    let started = tokio::time::Instant::now();
    let mut watch = state.store.watch_trail();
    loop {
        let p = chat.progress(turn).await?;
        if p.answer.done || started.elapsed() >= ANSWER_WAIT {
            return Ok(p);
        }
        tokio::select! {
            _ = watch.wait(turn.turn.request_id, state.stream_poll) => {}
            () = state.shutdown.cancelled() => return Ok(p),
        }
    }
}

/// `POST /api/v1/chat/hitl/resume`: `{"conversation_id", "approved", "action_id"?}` — decide
/// the pending approval as a chat message "approve"/"deny" would, and answer like a
/// non-streaming completion.
#[utoipa::path(post, path = "/api/v1/chat/hitl/resume", tag = "chat",
    request_body(content = Object, description = "`{\"conversation_id\", \"approved\": bool, \"action_id\"?}`", content_type = "application/json"),
    responses((status = 200, description = "The decision taken, and the answer so far", body = Object),
              (status = 403, description = "Deciding needs the approver role", body = Object),
              (status = 409, description = "Nothing pending to decide", body = Object)),
    security(("bearer" = []), ("session" = [])))]
pub async fn hitl_resume(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response, ChatApiError> {
    #[derive(Deserialize)]
    struct Resume {
        conversation_id: String,
        approved: bool,
        #[serde(default)]
        action_id: Option<String>,
    }
    let who = asker(caller, &headers, Role::Viewer, true)?;
    let chat = service(&state)?;
    let r: Resume = serde_json::from_slice(&body).map_err(|e| {
        ChatApiError::bad(
            "body",
            format!("expected {{\"conversation_id\", \"approved\", \"action_id\"?}}: {e}"),
        )
    })?;
    let conversation = parse_uuid("conversation_id", Some(&r.conversation_id))?;
    let action = parse_uuid("action_id", r.action_id.as_deref())?;
    let word = if r.approved { "approve" } else { "deny" };
    let asked = chat.ask(&who, conversation, word, action).await?;
    if asked.turn.turn.kind != TurnKind::Decision {
        return Err(ChatApiError::new(
            StatusCode::CONFLICT,
            "conflict_error",
            asked
                .turn
                .turn
                .answer
                .unwrap_or_else(|| "nothing to decide".into()),
        ));
    }
    let progress = chat.progress(&asked.turn).await?;
    Ok(Json(json!({
        "conversation_id": asked.conversation.id,
        "action_id": asked.turn.turn.action_id,
        "request_id": asked.turn.turn.request_id,
        "decision": word,
        "message": progress.answer.text,
    }))
    .into_response())
}

/// `GET /v1/models`: the one model, for OpenAI-compatible front ends that list them.
#[utoipa::path(get, path = "/v1/models", tag = "chat",
    responses((status = 200, description = "The one model, `kubemedic`", body = Object)),
    security(("bearer" = []), ("session" = [])))]
pub async fn models(caller: Caller) -> Result<Response, ChatApiError> {
    caller.need(Role::Viewer)?;
    Ok(Json(json!({"object": "list", "data": [
        {"id": MODEL, "object": "model", "created": 0, "owned_by": "kubemedic"}
    ]}))
    .into_response())
}

/// `GET /api/v1/chat/conversations`: the caller's conversations, most recent first.
#[utoipa::path(get, path = "/api/v1/chat/conversations", tag = "chat",
    responses((status = 200, description = "The caller's conversations, most recent first", body = Object)),
    security(("bearer" = []), ("session" = [])))]
pub async fn conversations(
    State(state): State<Arc<AppState>>,
    caller: Caller,
) -> Result<Response, ChatApiError> {
    let who = caller.need(Role::Viewer)?;
    let list = state
        .store
        .conversations(&who.subject, 100)
        .await
        .map_err(|e| ChatApiError::from(ChatError::from(e)))?;
    Ok(Json(json!({"conversations": list})).into_response())
}

/// `GET /v1/chat/stream/{session_id}`: the conversation's typed events, resumable with
/// `Last-Event-ID`; ends after the `done` of its latest turn.
#[utoipa::path(get, path = "/v1/chat/stream/{session_id}", tag = "chat",
    params(("session_id" = String, Path, description = "The conversation id"),
           ("after" = Option<String>, Query, description = "Start after this event (`<turn>.<audit id>.<n>`)"),
           ("Last-Event-ID" = Option<String>, Header, description = "Resume after this event (`<turn>.<audit id>.<n>`)")),
    responses((status = 200, description = "text/event-stream of typed events: status, plan, tool_call, tool_result, token, hitl_request, error, done (docs/chat.md)", content_type = "text/event-stream", body = String),
              (status = 404, description = "Not the caller's conversation", body = Object)),
    security(("bearer" = []), ("session" = [])))]
pub async fn stream(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    headers: HeaderMap,
    Path(session): Path<String>,
    Query(q): Query<std::collections::HashMap<String, String>>,
) -> Result<Response, ChatApiError> {
    let who = caller.need(Role::Viewer)?;
    super::query::reject_unknown(&q, &["after"])?;
    let chat = service(&state)?;
    let id = Uuid::parse_str(&session)
        .map_err(|_| ChatApiError::bad("session_id", format!("`{session}` is not a UUID")))?;
    chat.conversation(id, &who.subject).await?;
    let mut feed = Feed::new(state.clone(), chat, id, None);
    // `Last-Event-ID` (a reconnecting client) wins over `?after=` (where a browser's
    // EventSource starts).
    let resume = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .or(q.get("after").map(String::as_str));
    if let Some(raw) = resume {
        feed.at = Pos::parse(raw)
            .ok_or_else(|| ChatApiError::bad("Last-Event-ID", "expected <turn>.<audit id>.<n>"))?;
    }
    let events = futures::stream::unfold(feed, |mut f| async move {
        f.next().await.map(|e| {
            let mut event = Event::default().event(e.kind).data(e.data.to_string());
            if !e.live {
                event = event.id(e.id.to_string());
            }
            (Ok::<_, Infallible>(event), f)
        })
    });
    Ok(Sse::new(events)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response())
}
