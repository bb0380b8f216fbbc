//! An OpenAI-compatible Chat Completions server scripted by each test: a real socket, spoken
//! to by kubemedic's real client. Each request takes the next reply from the script; every
//! request is recorded for assertions. Usage is counted with the o200k tokenizer, so token
//! figures are real counts of what kubemedic sent.
//!
//! A request with `stream: true` is answered as OpenAI does: `text/event-stream` of
//! `chat.completion.chunk`s — the text in small pieces, each tool call's name first and its
//! arguments in fragments, the finish reason, the usage in a last chunk when
//! `stream_options.include_usage` asks for it, then `data: [DONE]` — paced by
//! [`ScriptedLlm::set_pace`]. [`ScriptedLlm::json_only`] starts a server that ignores `stream`
//! and answers `application/json` (as some compatible servers do).
#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::IntoResponse;
use futures::StreamExt;
use serde_json::{Value, json};

#[derive(Clone)]
pub enum Reply {
    /// A 200 with this assistant message and finish reason.
    Message {
        content: Option<String>,
        tool_calls: Vec<(String, String)>,
        finish: &'static str,
    },
    /// An error status with an OpenAI-style error body.
    Status(u16, &'static str),
    /// No answer for this long (a stalled model server), then a 500.
    Stall(std::time::Duration),
    /// This reply, after a wait (the model takes its time to start).
    Delayed(std::time::Duration, Box<Reply>),
    /// A stream that starts (this text) and then stalls for this long before breaking off;
    /// as JSON, a stall then a 500.
    BreakOff(&'static str, std::time::Duration),
}

/// Tool calls in one assistant turn: (name, arguments JSON).
pub fn calls(list: &[(&str, Value)]) -> Reply {
    Reply::Message {
        content: None,
        tool_calls: list
            .iter()
            .map(|(n, a)| ((*n).to_owned(), a.to_string()))
            .collect(),
        finish: "tool_calls",
    }
}

/// Text (a plan, a thought) and tool calls in one assistant turn.
/// Invocation 1 on a bad rollout of `target`: the model reads the target's context, then
/// submits "the latest rollout crashes on start".
pub fn bad_rollout_investigation(target: &Value) -> Vec<Reply> {
    vec![
        calls(&[("get_namespaced_resource_context", target.clone())]),
        calls(&[(
            "submit_result",
            serde_json::json!({
                "root_cause_analysis": {
                    "summary": "The latest rollout of checkout crashes on start",
                    "severity": "high",
                    "contributing_factors": ["the new ReplicaSet's pods are in CrashLoopBackOff"],
                    "remediation_target": target,
                    "investigation_analysis": "A bad rollout."
                },
                "confidence": 0.9, "investigation_outcome": "actionable", "actionable": true
            }),
        )]),
    ]
}

pub fn say_and_call(content: &str, list: &[(&str, Value)]) -> Reply {
    Reply::Message {
        content: Some(content.to_owned()),
        tool_calls: list
            .iter()
            .map(|(n, a)| ((*n).to_owned(), a.to_string()))
            .collect(),
        finish: "tool_calls",
    }
}

/// One tool call with raw (possibly malformed) argument text.
pub fn raw_call(name: &str, arguments: &str) -> Reply {
    Reply::Message {
        content: None,
        tool_calls: vec![(name.to_owned(), arguments.to_owned())],
        finish: "tool_calls",
    }
}

pub fn text(content: &str) -> Reply {
    Reply::Message {
        content: Some(content.to_owned()),
        tool_calls: vec![],
        finish: "stop",
    }
}

pub fn truncated(content: &str) -> Reply {
    Reply::Message {
        content: Some(content.to_owned()),
        tool_calls: vec![],
        finish: "length",
    }
}

#[derive(Clone)]
struct Shared {
    script: Arc<Mutex<VecDeque<Reply>>>,
    requests: Arc<Mutex<Vec<Recorded>>>,
    /// Answer `application/json` whatever the request asks.
    json_only: bool,
    /// The wait between two streamed chunks.
    pace: Arc<Mutex<Duration>>,
}

#[derive(Debug, Clone)]
pub struct Recorded {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Value,
    pub prompt_tokens: usize,
}

pub struct ScriptedLlm {
    pub base_url: String,
    shared: Shared,
}

fn count_tokens(text: &str) -> usize {
    static BPE: std::sync::OnceLock<tiktoken_rs::CoreBPE> = std::sync::OnceLock::new();
    BPE.get_or_init(|| tiktoken_rs::o200k_base().expect("o200k tokenizer"))
        .encode_with_special_tokens(text)
        .len()
}

/// Tokens of a request as a model would see them: message contents, tool call arguments and
/// the tool schemas.
pub fn prompt_tokens(body: &Value) -> usize {
    let mut n = 0;
    for m in body["messages"].as_array().into_iter().flatten() {
        n += 4;
        if let Some(c) = m["content"].as_str() {
            n += count_tokens(c);
        }
        for c in m["tool_calls"].as_array().into_iter().flatten() {
            n += count_tokens(c["function"]["name"].as_str().unwrap_or(""));
            n += count_tokens(c["function"]["arguments"].as_str().unwrap_or(""));
        }
    }
    if let Some(tools) = body.get("tools") {
        n += count_tokens(&tools.to_string());
    }
    n
}

async fn complete(
    State(s): State<Shared>,
    uri: Uri,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> axum::response::Response {
    let prompt = prompt_tokens(&body);
    s.requests.lock().unwrap().push(Recorded {
        path: uri.to_string(),
        headers,
        body: body.clone(),
        prompt_tokens: prompt,
    });
    let mut reply = s.script.lock().unwrap().pop_front();
    while let Some(Reply::Delayed(d, inner)) = reply {
        tokio::time::sleep(d).await;
        reply = Some(*inner);
    }
    let stream = body["stream"] == true && !s.json_only;
    let usage = body.pointer("/stream_options/include_usage") == Some(&json!(true));
    let pace = *s.pace.lock().unwrap();
    match reply {
        None => (StatusCode::INTERNAL_SERVER_ERROR, Json(json!({"error": {"message": "script exhausted", "type": "server_error"}}))).into_response(),
        Some(Reply::Stall(d)) => {
            tokio::time::sleep(d).await;
            (StatusCode::INTERNAL_SERVER_ERROR, Json(json!({"error": {"message": "stalled", "type": "server_error"}}))).into_response()
        }
        Some(Reply::BreakOff(text, d)) if stream => {
            let start = vec![
                chunk(&body, json!({"role": "assistant", "content": ""}), None),
                chunk(&body, json!({"content": text}), None),
            ];
            sse(start, pace, Some(d))
        }
        Some(Reply::BreakOff(_, d)) => {
            tokio::time::sleep(d).await;
            (StatusCode::INTERNAL_SERVER_ERROR, Json(json!({"error": {"message": "broke off", "type": "server_error"}}))).into_response()
        }
        Some(Reply::Delayed(..)) => unreachable!("unwrapped above"),
        Some(Reply::Status(code, message)) => (
            StatusCode::from_u16(code).unwrap(),
            Json(json!({"error": {"message": message, "type": "rate_limit_error", "param": null, "code": null}})),
        )
            .into_response(),
        Some(Reply::Message { content, tool_calls, finish }) => {
            let completion: usize = content.as_deref().map(count_tokens).unwrap_or(0)
                + tool_calls.iter().map(|(_, a)| count_tokens(a)).sum::<usize>();
            let ids: Vec<String> = tool_calls
                .iter()
                .enumerate()
                .map(|(i, _)| format!("call_{}_{i}", uuid::Uuid::new_v4().simple()))
                .collect();
            let usage_json = json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion});
            if stream {
                return sse(
                    stream_chunks(&body, content.as_deref(), &tool_calls, &ids, finish, usage.then_some(usage_json)),
                    pace,
                    None,
                );
            }
            let calls: Vec<Value> = tool_calls
                .iter()
                .zip(&ids)
                .map(|((name, args), id)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}}))
                .collect();
            let mut message = json!({"role": "assistant", "content": content});
            if !calls.is_empty() {
                message["tool_calls"] = json!(calls);
            }
            Json(json!({
                "id": "chatcmpl-test",
                "object": "chat.completion",
                "created": 1_700_000_000,
                "model": body["model"],
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage_json
            }))
            .into_response()
        }
    }
}

/// One `chat.completion.chunk` with this delta (and OpenAI's `usage: null` when usage is
/// asked for but not yet sent).
fn chunk(body: &Value, delta: Value, finish: Option<&str>) -> Value {
    let mut c = json!({
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": body["model"],
        "system_fingerprint": null,
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
    });
    if body.pointer("/stream_options/include_usage") == Some(&json!(true)) {
        c["usage"] = Value::Null;
    }
    c
}

/// `text` in pieces of at most `n` characters.
pub fn pieces(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(n).map(|c| c.iter().collect()).collect()
}

/// An answer as OpenAI streams it.
fn stream_chunks(
    body: &Value,
    content: Option<&str>,
    tool_calls: &[(String, String)],
    ids: &[String],
    finish: &str,
    usage: Option<Value>,
) -> Vec<Value> {
    let mut out = vec![chunk(
        body,
        json!({"role": "assistant", "content": ""}),
        None,
    )];
    for piece in pieces(content.unwrap_or(""), 7) {
        out.push(chunk(body, json!({"content": piece}), None));
    }
    for (i, ((name, args), id)) in tool_calls.iter().zip(ids).enumerate() {
        out.push(chunk(
            body,
            json!({"tool_calls": [{"index": i, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
            None,
        ));
        for piece in pieces(args, 12) {
            out.push(chunk(
                body,
                json!({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}),
                None,
            ));
        }
    }
    out.push(chunk(body, json!({}), Some(finish)));
    if let Some(u) = usage {
        let mut last = chunk(body, json!({}), None);
        last["choices"] = json!([]);
        last["usage"] = u;
        out.push(last);
    }
    out
}

/// The chunks as server-sent events, `pace` apart, ending with `data: [DONE]` — or, with
/// `break_off`, stalling that long and ending without it.
fn sse(
    chunks: Vec<Value>,
    pace: Duration,
    break_off: Option<Duration>,
) -> axum::response::Response {
    let mut frames: Vec<String> = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    if break_off.is_none() {
        frames.push("data: [DONE]\n\n".into());
    }
    let frames =
        futures::stream::iter(frames.into_iter().enumerate()).then(move |(i, f)| async move {
            if i > 0 && !pace.is_zero() {
                tokio::time::sleep(pace).await;
            }
            Ok::<_, std::convert::Infallible>(f)
        });
    let stall = futures::stream::once(async move {
        if let Some(d) = break_off {
            tokio::time::sleep(d).await;
        }
        Ok::<_, std::convert::Infallible>(String::new())
    });
    axum::response::Response::builder()
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(axum::body::Body::from_stream(frames.chain(stall)))
        .unwrap()
}

impl ScriptedLlm {
    /// A model server that streams when asked to.
    pub async fn start(script: Vec<Reply>) -> Self {
        Self::serve(script, false).await
    }

    /// A model server that ignores `stream` and answers every request as one JSON document.
    pub async fn json_only(script: Vec<Reply>) -> Self {
        Self::serve(script, true).await
    }

    /// The wait between two streamed chunks from now on.
    pub fn set_pace(&self, pace: Duration) {
        *self.shared.pace.lock().unwrap() = pace;
    }

    async fn serve(script: Vec<Reply>, json_only: bool) -> Self {
        let shared = Shared {
            script: Arc::new(Mutex::new(script.into())),
            requests: Arc::new(Mutex::new(Vec::new())),
            json_only,
            pace: Arc::new(Mutex::new(Duration::ZERO)),
        };
        let app = axum::Router::new()
            .route("/v1/chat/completions", axum::routing::post(complete))
            .route(
                "/openai/deployments/{deployment}/chat/completions",
                axum::routing::post(complete),
            )
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self {
            base_url: format!("http://{addr}"),
            shared,
        }
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.requests.lock().unwrap().clone()
    }

    pub fn remaining(&self) -> usize {
        self.shared.script.lock().unwrap().len()
    }
}
