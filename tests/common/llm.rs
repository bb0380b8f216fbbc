//! An OpenAI-compatible Chat Completions server scripted by each test: a real socket, spoken
//! to by the real async-openai client. Each request takes the next reply from the script;
//! every request is recorded for assertions. Usage is counted with the o200k tokenizer, so
//! token figures are real counts of what kubemedic sent.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::IntoResponse;
use serde_json::{Value, json};

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
    let reply = s.script.lock().unwrap().pop_front();
    match reply {
        None => (StatusCode::INTERNAL_SERVER_ERROR, Json(json!({"error": {"message": "script exhausted", "type": "server_error"}}))).into_response(),
        Some(Reply::Stall(d)) => {
            tokio::time::sleep(d).await;
            (StatusCode::INTERNAL_SERVER_ERROR, Json(json!({"error": {"message": "stalled", "type": "server_error"}}))).into_response()
        }
        Some(Reply::Status(code, message)) => (
            StatusCode::from_u16(code).unwrap(),
            Json(json!({"error": {"message": message, "type": "rate_limit_error", "param": null, "code": null}})),
        )
            .into_response(),
        Some(Reply::Message { content, tool_calls, finish }) => {
            let completion: usize = content.as_deref().map(count_tokens).unwrap_or(0)
                + tool_calls.iter().map(|(_, a)| count_tokens(a)).sum::<usize>();
            let calls: Vec<Value> = tool_calls
                .iter()
                .enumerate()
                .map(|(i, (name, args))| json!({"id": format!("call_{}_{i}", uuid::Uuid::new_v4().simple()), "type": "function", "function": {"name": name, "arguments": args}}))
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
                "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
            }))
            .into_response()
        }
    }
}

impl ScriptedLlm {
    pub async fn start(script: Vec<Reply>) -> Self {
        let shared = Shared {
            script: Arc::new(Mutex::new(script.into())),
            requests: Arc::new(Mutex::new(Vec::new())),
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
