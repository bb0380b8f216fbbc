//! Asking kubemedic, with the clients its users have: the official OpenAI Python client (from
//! PyPI) against `POST /v1/chat/completions`, streaming and not; `kubemedic ask` in a terminal;
//! the typed event stream, resumed after a restart. On the real API server, with the offline
//! investigator: a bad rollout is asked about, investigated as a request of source `chat`,
//! proposed with the HITL signal, refused to a viewer, approved by an approver in the same
//! conversation, executed once and verified.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

mod common;

use std::process::Command;

use kubemedic::domain::Role;
use serde_json::{Value, json};

use common::incident::{is_terminal, kubelet, serving};
use common::kube::Kube;

/// The OpenAI client's Python, installed by scripts/test (scripts/lib/python-tools.sh).
fn openai_python() -> Option<String> {
    common::component("KUBEMEDIC_OPENAI_PYTHON", "the OpenAI Python client")
}

/// Run `code` with the OpenAI client; it prints one JSON document, returned here.
fn py(python: &str, code: &str, env: &[(&str, &str)]) -> Value {
    let out = Command::new(python)
        .arg("-c")
        .arg(code)
        .envs(env.iter().copied())
        .output()
        .expect("run python");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "python failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// Ask, not streaming: the answer as the client parsed it.
const ASK: &str = r#"
import json, os, openai
c = openai.OpenAI(base_url=os.environ["BASE"] + "/v1", api_key=os.environ["KEY"])
r = c.chat.completions.create(model="kubemedic",
    messages=[{"role": "user", "content": os.environ["QUESTION"]}])
print(json.dumps(r.model_dump()))
"#;

/// Ask, streaming: the chunks as the client parsed them.
const ASK_STREAM: &str = r#"
import json, os, openai
c = openai.OpenAI(base_url=os.environ["BASE"] + "/v1", api_key=os.environ["KEY"])
s = c.chat.completions.create(model="kubemedic", stream=True,
    messages=[{"role": "user", "content": os.environ["QUESTION"]}])
print(json.dumps({"chunks": [ch.model_dump() for ch in s]}))
"#;

/// Decide in the conversation with the given key, streaming; the chunks as parsed, or the
/// error the client raised.
const DECIDE: &str = r#"
import json, os, openai
c = openai.OpenAI(base_url=os.environ["BASE"] + "/v1", api_key=os.environ["KEY"])
try:
    s = c.chat.completions.create(model="kubemedic", stream=True,
        messages=[{"role": "user", "content": os.environ["WORD"]}],
        extra_body={"conversation_id": os.environ["CONVERSATION"],
                    "action_id": os.environ["ACTION"]})
    chunks = [ch.model_dump() for ch in s]
    print(json.dumps({"chunks": chunks}))
except openai.APIStatusError as e:
    print(json.dumps({"status": e.status_code, "error": str(e)}))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_becomes_a_gated_request_approved_in_the_conversation_and_verified() {
    let Some(python) = openai_python() else {
        return;
    };
    let Some(k) = Kube::new("chat").await else {
        return;
    };
    common::scenarios::staged_in("crashloop-rollout", &[&k]).await;
    let d = serving(&k, |_| {}).await;
    let viewer = common::create_key(d.store.as_ref(), Role::Viewer, "vera").await;
    let approver = common::create_key(d.store.as_ref(), Role::Approver, "alice").await;
    let base = d.base.clone();

    // A viewer asks; the answer is the investigation, and the fix waits for a human although
    // the shipped policy auto-approves in staging: a question is not an instruction.
    let question = format!("Why is checkout crashing in {}?", k.ns);
    let asked = py(
        &python,
        ASK,
        &[("BASE", &base), ("KEY", &viewer), ("QUESTION", &question)],
    );
    assert_eq!(asked["object"], "chat.completion", "{asked:#}");
    assert_eq!(asked["model"], "kubemedic");
    let choice = &asked["choices"][0];
    let content = choice["message"]["content"].as_str().unwrap();
    assert!(content.contains("**Root cause**"), "{content}");
    assert!(content.contains("rollback"), "{content}");
    assert!(content.contains("APPROVAL REQUIRED"), "{content}");
    assert_eq!(choice["hitl_required"], true, "{asked:#}");
    let action = choice["action_id"].as_str().unwrap().to_owned();
    let conversation = asked["conversation_id"].as_str().unwrap().to_owned();
    let request = asked["request_id"].as_str().unwrap().to_owned();

    // The request is an ordinary one of source chat, requested by the viewer's key.
    let req = d.api(&format!("/api/v1/requests/{request}")).await;
    assert_eq!(req["phase"], "AwaitingApproval", "{req:#}");
    assert_eq!(req["signal"]["source"], "chat", "{req:#}");
    assert_eq!(req["target"]["name"], "checkout");
    assert!(
        req["state"]["gate"]["reason"]
            .as_str()
            .unwrap()
            .contains("asked in a conversation"),
        "{req:#}"
    );

    // Decide in a conversation with the OpenAI client, streaming.
    let decide = |key: &str, word: &str, conversation: &str| {
        py(
            &python,
            DECIDE,
            &[
                ("BASE", &base),
                ("KEY", key),
                ("WORD", word),
                ("CONVERSATION", conversation),
                ("ACTION", &action),
            ],
        )
    };
    // The viewer cannot decide; the refusal is the OpenAI client's PermissionDeniedError.
    let refused = decide(&viewer, "approve", &conversation);
    assert_eq!(refused["status"], 403, "{refused:#}");
    // A conversation that does not exist is not found.
    let other = decide(&approver, "approve", &uuid::Uuid::new_v4().to_string());
    assert_eq!(other["status"], 404, "{other:#}");

    // The approver continues their own conversation: a new one of theirs, deciding by the
    // action_id the viewer was shown is refused (not their conversation)…
    let alices = decide(&approver, "approve", &conversation);
    assert_eq!(alices["status"], 404, "{alices:#}");

    // …so the approver asks the same question, streaming (it joins the same request): the
    // answer arrives as chunks and ends with the contract's HITL signal.
    let theirs = py(
        &python,
        ASK_STREAM,
        &[("BASE", &base), ("KEY", &approver), ("QUESTION", &question)],
    );
    let chunks = theirs["chunks"].as_array().expect("chunks");
    let streamed: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert!(streamed.contains("APPROVAL REQUIRED"), "{streamed}");
    assert!(streamed.contains(&request), "the same request: {streamed}");
    let signal = chunks
        .iter()
        .find(|c| c["choices"][0]["hitl_required"] == true)
        .expect("a HITL signal chunk");
    assert_eq!(
        signal["choices"][0]["action_id"],
        action.as_str(),
        "{signal:#}"
    );
    assert_eq!(signal["choices"][0]["delta"]["content"], Value::Null);
    assert_eq!(signal["choices"][0]["finish_reason"], "stop");
    let conversation = signal["conversation_id"].as_str().unwrap().to_owned();
    let runner = kubelet(&k);
    let decided = decide(&approver, "yes", &conversation);
    let chunks = decided["chunks"].as_array().expect("chunks");
    assert_eq!(chunks[0]["object"], "chat.completion.chunk");
    assert!(
        chunks
            .iter()
            .all(|c| c["conversation_id"] == conversation.as_str())
    );
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert!(text.contains("approved by key:alice"), "{text}");
    assert!(text.contains("Done"), "{text}");
    assert!(text.contains("verified effective"), "{text}");
    let last = chunks.last().unwrap();
    assert_eq!(last["choices"][0]["finish_reason"], "stop", "{last:#}");
    runner.abort();

    let done = d
        .eventually(&format!("/api/v1/requests/{request}"), 30, is_terminal)
        .await;
    assert_eq!(done["phase"], "Completed", "{done:#}");
    // The decision is the approval's, audited with the decider and the channel.
    let approval = d.api(&format!("/api/v1/approvals/{action}")).await;
    assert_eq!(
        approval["decision"]["decided_by"], "key:alice",
        "{approval:#}"
    );
    assert_eq!(approval["decision"]["decided_via"], "chat");
    // Executed once: one rollback.
    let trail = d.api(&format!("/api/v1/requests/{request}")).await;
    let steps = trail["state"]["execution"]["steps"].as_array().unwrap();
    let undos = steps
        .iter()
        .filter(|s| s.to_string().contains("rollout_undo"))
        .count();
    assert_eq!(undos, 1, "{trail:#}");
    assert!(trail["reason"].as_str().unwrap().starts_with("effective"));
    // A second "approve" in the conversation has nothing pending left.
    let again = decide(&approver, "approve", &conversation);
    assert_eq!(again["status"], 409, "{again:#}");
    d.stop().await;
}

/// Read a chat stream to the first `done` (or `hitl_request` + `done`): (id, event, data).
async fn typed_events(
    d: &common::TestDaemon,
    key: &str,
    conversation: &str,
    last_event_id: Option<&str>,
) -> Vec<(String, String, Value)> {
    let mut rb = d
        .client
        .get(d.url(&format!("/v1/chat/stream/{conversation}")))
        .bearer_auth(key);
    if let Some(id) = last_event_id {
        rb = rb.header("last-event-id", id);
    }
    let mut r = rb.send().await.unwrap();
    assert_eq!(r.status(), 200);
    let mut buf = String::new();
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        while let Some(end) = buf.find("\n\n") {
            let block: String = buf.drain(..end + 2).collect();
            let (mut id, mut ev, mut data) = (String::new(), String::new(), String::new());
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("id:") {
                    id = v.trim().into();
                } else if let Some(v) = line.strip_prefix("event:") {
                    ev = v.trim().into();
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push_str(v.trim_start());
                }
            }
            if ev.is_empty() {
                continue;
            }
            let done = ev == "done";
            out.push((id, ev, serde_json::from_str(&data).unwrap_or(Value::Null)));
            if done {
                return out;
            }
        }
        let chunk = tokio::time::timeout_at(deadline, r.chunk())
            .await
            .expect("stream timed out")
            .unwrap();
        match chunk {
            Some(b) => buf.push_str(&String::from_utf8_lossy(&b)),
            None => return out,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_approval_survives_a_restart_and_kubemedic_ask_decides_it() {
    let Some(k) = Kube::new("chatr").await else {
        return;
    };
    common::scenarios::staged_in("crashloop-rollout", &[&k]).await;
    let d = serving(&k, |_| {}).await;
    let key = common::create_key(d.store.as_ref(), Role::Approver, "alice").await;

    // A question through the API, not streaming.
    let r: Value = d
        .client
        .post(d.url("/v1/chat/completions"))
        .bearer_auth(&key)
        .json(&json!({"model": "kubemedic", "user": "alice",
            "messages": [{"role": "user", "content": format!("is anything wrong in namespace {}?", k.ns)}]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["choices"][0]["hitl_required"], true, "{r:#}");
    let conversation = r["conversation_id"].as_str().unwrap().to_owned();
    let request = r["request_id"].as_str().unwrap().to_owned();

    // The typed events: the question, its plan, the investigation's tool calls, the answer
    // and the approval request, in order.
    let events = typed_events(&d, &key, &conversation, None).await;
    let kinds: Vec<&str> = events.iter().map(|(_, e, _)| e.as_str()).collect();
    for want in [
        "status",
        "plan",
        "tool_call",
        "tool_result",
        "token",
        "hitl_request",
        "done",
    ] {
        assert!(kinds.contains(&want), "no {want} in {kinds:?}");
    }
    let hitl = events.iter().find(|(_, e, _)| e == "hitl_request").unwrap();
    assert_eq!(hitl.2["hitl_required"], true);
    let middle = events[events.len() / 2].0.clone();

    // The daemon restarts (same data directory); the stream resumes where it stopped, the
    // approval is still pending.
    let dir = d.stop_keeping_data().await;
    let path = dir.path().to_owned();
    let d = serving(&k, |a| a.store.data_dir = Some(path)).await;
    let resumed = typed_events(&d, &key, &conversation, Some(&middle)).await;
    let ids: Vec<&str> = events.iter().map(|(i, _, _)| i.as_str()).collect();
    let at = ids.iter().position(|i| *i == middle).unwrap();
    let rest: Vec<&str> = resumed.iter().map(|(i, _, _)| i.as_str()).collect();
    assert_eq!(rest, ids[at + 1..].to_vec(), "resumed after {middle}");

    // `kubemedic ask` continues the conversation and approves: it prints the decision,
    // execution and verification as they happen.
    let runner = kubelet(&k);
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubemedic"))
        .args([
            "ask",
            "--url",
            &d.base,
            "--conversation",
            &conversation,
            "approve",
        ])
        .env("KUBEMEDIC_API_KEY", &key)
        .output()
        .await
        .unwrap();
    runner.abort();
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{printed}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(printed.contains("approved by key:alice"), "{printed}");
    assert!(printed.contains("Done"), "{printed}");
    let done = d
        .eventually(&format!("/api/v1/requests/{request}"), 30, is_terminal)
        .await;
    assert_eq!(done["phase"], "Completed", "{done:#}");
    d.stop().await;
}

/// In the browser: an admin pins context on the Memory page; an approver asks on the Ask page,
/// watches the investigation arrive (plan, tool calls, the answer with the pinned context in
/// its evidence), approves with the button, and sees the fix executed and verified.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ask_page_streams_the_investigation_and_approves_in_the_browser() {
    use common::browser::Browser;
    use std::time::Duration;
    let Some(k) = Kube::new("chatb").await else {
        return;
    };
    let Some(b) = Browser::start().await else {
        return;
    };
    common::scenarios::staged_in("crashloop-rollout", &[&k]).await;
    let d = serving(&k, |_| {}).await;
    let admin = common::create_key(d.store.as_ref(), Role::Admin, "root").await;
    let approver = common::create_key(d.store.as_ref(), Role::Approver, "alice").await;

    assert_eq!(b.sign_in(&d.base, &admin).await.as_deref(), Ok("admin"));
    b.goto(&d.url("/memory")).await;
    b.fill(
        "#memory-content",
        "checkout is the shop's revenue path: prefer a rollback to a restart",
    )
    .await;
    b.click("#memory-form button[type=submit]").await;
    b.wait_for_text("#memory-cluster", "revenue path").await;

    assert_eq!(
        b.sign_in(&d.base, &approver).await.as_deref(),
        Ok("approver")
    );
    b.goto(&d.url("/ask")).await;
    b.fill(
        "#question",
        &format!("why is checkout crashing in {}?", k.ns),
    )
    .await;
    b.click("#send").await;
    b.wait_until("the approval request", Duration::from_secs(60), async |b| {
        b.exists("#hitl:not([hidden])").await
    })
    .await;
    let log = b.text("#log").await;
    for want in [
        "plan",
        "tool_call",
        "tool_result",
        "Root cause",
        "Pinned context",
        "revenue path",
    ] {
        assert!(log.contains(want), "no {want} in the log:\n{log}");
    }
    assert!(b.text("#hitl-what").await.contains("RollbackDeployment"));
    let runner = kubelet(&k);
    b.click("#approve").await;
    b.wait_until("the fix verified", Duration::from_secs(90), async |b| {
        b.try_text("#log")
            .await
            .is_some_and(|t| t.contains("verified effective"))
    })
    .await;
    runner.abort();
    b.screenshot("ask-approved.png").await;
    let foreign = b.foreign_requests(&d.base).await;
    assert!(foreign.is_empty(), "{foreign:?}");
    b.close().await;
    d.stop().await;
}

/// With a model configured, the question runs the LLM path with the same read-only tools: the
/// model reads the question (sanitised), the pinned context and the earlier turn in its
/// prompt, calls a tool, and its proposal comes back to the asker with the HITL signal; a
/// "deny" ends the request rejected, nothing changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_model_the_question_runs_the_llm_path_and_a_denial_changes_nothing() {
    use common::llm::{ScriptedLlm, bad_rollout_investigation, calls};
    use kubemedic::secret::Secret;
    let Some(k) = Kube::new("chatm").await else {
        return;
    };
    common::scenarios::staged_in("crashloop-rollout", &[&k]).await;
    let target = json!({"kind": "Deployment", "name": "checkout", "namespace": k.ns});
    let mut script = bad_rollout_investigation(&target);
    script.extend([
        calls(&[(
            "submit_result_with_workflow",
            json!({"selected_workflow": {"workflow_id": "rollback-deployment-previous-revision",
                    "confidence": 0.9, "rationale": "the previous revision ran", "parameters": {"TO_REVISION": 1}}}),
        )]),
    ]);
    let model = ScriptedLlm::start(script).await;
    let base_url = format!("{}/v1", model.base_url);
    let d = serving(&k, move |a| {
        a.investigate.llm = Some(kubemedic::config::LlmMode::Openai);
        a.investigate.llm_base_url = Some(base_url);
        a.investigate.llm_api_key = Some(Secret::new("sk-chat-test"));
        a.investigate.llm_model = Some("gpt-4o".into());
    })
    .await;
    let key = common::create_key(d.store.as_ref(), Role::Admin, "root").await;
    d.store
        .set_memory(
            "cluster",
            Some("checkout is PCI-scoped: never restart it in business hours"),
            "key:root",
        )
        .await
        .unwrap();
    let ask = |content: String, conversation: Option<String>, action: Option<String>| {
        let d = &d;
        let key = key.clone();
        async move {
            let mut body =
                json!({"model": "kubemedic", "messages": [{"role": "user", "content": content}]});
            if let Some(c) = conversation {
                body["conversation_id"] = json!(c);
            }
            if let Some(a) = action {
                body["action_id"] = json!(a);
            }
            let r = d
                .client
                .post(d.url("/v1/chat/completions"))
                .bearer_auth(&key)
                .json(&body)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200);
            r.json::<Value>().await.unwrap()
        }
    };
    // A first turn that names nothing: asked back, no request.
    let first = ask(
        "hello, what can you do? my password=Hunter2-Secret-42".into(),
        None,
        None,
    )
    .await;
    assert_eq!(first["request_id"], Value::Null, "{first:#}");
    assert!(
        first["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .contains("Which workload")
    );
    let conversation = first["conversation_id"].as_str().unwrap().to_owned();
    let asked = ask(
        format!("why is checkout crashing in {}?", k.ns),
        Some(conversation.clone()),
        None,
    )
    .await;
    let choice = &asked["choices"][0];
    assert_eq!(choice["hitl_required"], true, "{asked:#}");
    assert!(
        choice["message"]["content"]
            .as_str()
            .unwrap()
            .contains("crashes on start")
    );
    // What the model read: the question, the earlier turn (sanitised), the pinned context.
    let prompts: String = model
        .requests()
        .iter()
        .map(|r| r.body.to_string())
        .collect();
    assert!(prompts.contains("why is checkout crashing in"), "{prompts}");
    assert!(prompts.contains("Pinned context"), "{prompts}");
    assert!(prompts.contains("PCI-scoped"), "{prompts}");
    assert!(prompts.contains("hello, what can you do?"), "{prompts}");
    assert!(
        !prompts.contains("Hunter2-Secret-42"),
        "a secret reached the model"
    );
    let request = asked["request_id"].as_str().unwrap().to_owned();
    let action = choice["action_id"].as_str().unwrap().to_owned();
    let denied = ask("no".into(), Some(conversation), Some(action)).await;
    let text = denied["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(text.contains("Denied"), "{text}");
    let req = d.api(&format!("/api/v1/requests/{request}")).await;
    assert_eq!(req["phase"], "Rejected", "{req:#}");
    assert!(req["state"]["execution"].is_null());
    d.stop().await;
}

/// Ask, streaming, printing each chunk as the OpenAI client yields it (one JSON line each), so
/// the test can follow the conversation while the answer is still coming.
const ASK_STREAM_LINES: &str = r#"
import json, os, openai
c = openai.OpenAI(base_url=os.environ["BASE"] + "/v1", api_key=os.environ["KEY"])
s = c.chat.completions.create(model="kubemedic", stream=True,
    messages=[{"role": "user", "content": os.environ["QUESTION"]}])
for ch in s:
    print(json.dumps(ch.model_dump()), flush=True)
"#;

/// What the talkative model writes in invocation 1 (then it calls `kubectl_get_yaml`) and 2.
const THINKING: &str = "I will read the checkout Deployment as it is stored.\nThen its context.\n";
const CHOOSING: &str = "Rolling back restores the last revision that ran.\n";

/// A model that says what it does: it takes two seconds to start (time for a client to open
/// the typed stream), then writes a line of text at a time in pieces, 20 ms apart, before its
/// tool calls; and the daemon asking it, whose tools give the model 500 characters at most.
async fn talkative_model(k: &Kube) -> (common::llm::ScriptedLlm, common::TestDaemon) {
    use common::llm::{Reply, ScriptedLlm, bad_rollout_investigation, say_and_call};
    use kubemedic::secret::Secret;
    use std::time::Duration;
    let target = json!({"kind": "Deployment", "name": "checkout", "namespace": k.ns});
    let mut script = vec![Reply::Delayed(
        Duration::from_secs(2),
        Box::new(say_and_call(
            THINKING,
            &[(
                "kubectl_get_yaml",
                json!({"kind": "Deployment", "name": "checkout", "namespace": k.ns}),
            )],
        )),
    )];
    script.extend(bad_rollout_investigation(&target));
    script.push(say_and_call(
        CHOOSING,
        &[(
            "submit_result_with_workflow",
            json!({"selected_workflow": {"workflow_id": "rollback-deployment-previous-revision",
                    "confidence": 0.9, "rationale": "the previous revision ran", "parameters": {"TO_REVISION": 1}}}),
        )],
    ));
    let model = ScriptedLlm::start(script).await;
    model.set_pace(Duration::from_millis(20));
    let base_url = format!("{}/v1", model.base_url);
    let d = serving(k, move |a| {
        a.investigate.llm = Some(kubemedic::config::LlmMode::Openai);
        a.investigate.llm_base_url = Some(base_url);
        a.investigate.llm_api_key = Some(Secret::new("sk-chat-test"));
        a.investigate.llm_model = Some("gpt-4o".into());
        // The model reads 500 characters of a tool's output; people see all of it.
        a.cluster.tool_output_max_chars = Some(500);
    })
    .await;
    (model, d)
}

/// Issue 28: with a model, the conversation shows the model's words as it writes them — live
/// `token` events before the answer on the typed stream, and in the OpenAI client's streamed
/// completion — and a tool's result whole, although the model read it cut at the tool limit.
/// The live events carry no id (they are not in the trail): a reconnect resumes exactly from
/// the trail, with the durable events and the answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_models_words_arrive_live_and_a_tool_result_arrives_whole() {
    use tokio::io::AsyncBufReadExt;
    let (thinking, choosing) = (THINKING, CHOOSING);
    let Some(python) = openai_python() else {
        return;
    };
    let Some(k) = Kube::new("chatl").await else {
        return;
    };
    common::scenarios::staged_in("crashloop-rollout", &[&k]).await;
    let (model, d) = talkative_model(&k).await;
    let key = common::create_key(d.store.as_ref(), Role::Approver, "alice").await;

    // The OpenAI client asks, streaming; its first chunk names the conversation and the turn.
    let mut client = tokio::process::Command::new(&python)
        .arg("-c")
        .arg(ASK_STREAM_LINES)
        .envs([
            ("BASE", d.base.as_str()),
            ("KEY", key.as_str()),
            (
                "QUESTION",
                format!("why is checkout crashing in {}?", k.ns).as_str(),
            ),
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(client.stdout.take().unwrap()).lines();
    let first: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    let conversation = first["conversation_id"].as_str().unwrap().to_owned();
    let turn = first["turn"].as_i64().unwrap();
    let completion = tokio::spawn(async move {
        let mut chunks = Vec::new();
        while let Some(line) = lines.next_line().await.unwrap() {
            chunks.push(serde_json::from_str::<Value>(&line).unwrap());
        }
        chunks
    });

    // The typed stream of the turn, as `kubemedic ask` and the Ask page follow it.
    let start = format!("{}.{}.{}", turn - 1, i64::MAX, i64::MAX);
    let events = typed_events(&d, &key, &conversation, Some(&start)).await;
    let kinds: Vec<&str> = events.iter().map(|(_, e, _)| e.as_str()).collect();
    let live: Vec<&(String, String, Value)> = events
        .iter()
        .filter(|(_, _, data)| data["live"] == true)
        .collect();
    assert!(!live.is_empty(), "no live events in {kinds:?}");
    assert!(
        live.iter().all(|(id, _, _)| id.is_empty()),
        "live events carry no id"
    );
    assert!(
        events
            .iter()
            .filter(|(_, _, data)| data["live"] != true)
            .all(|(id, _, _)| !id.is_empty()),
        "every durable event has its id"
    );
    let said = |invocation: i64| -> String {
        live.iter()
            .filter(|(_, e, data)| e == "token" && data["invocation"] == invocation)
            .map(|(_, _, data)| data["content"].as_str().unwrap())
            .collect()
    };
    assert!(said(1).starts_with(thinking), "{:?}", said(1));
    assert_eq!(said(2), choosing);
    assert!(
        live.iter()
            .any(|(_, e, data)| e == "status" && data["tool"] == "kubectl_get_yaml"),
        "the tool the model calls, as it is assembled: {live:?}"
    );
    // The words come while the model works: before the answer, the approval request, the end.
    let position =
        |pred: &dyn Fn(&(String, String, Value)) -> bool| events.iter().position(pred).unwrap();
    let first_live = position(&|(_, _, data)| data["live"] == true);
    let answer = position(&|(_, e, data)| e == "token" && data["live"] != true);
    let hitl = position(&|(_, e, _)| e == "hitl_request");
    assert!(first_live < answer && answer < hitl, "{kinds:?}");
    // In the order it happened: the record of invocation 1 (its tool calls) before the words
    // of invocation 2.
    let recorded = position(&|(_, e, _)| e == "tool_result");
    let second = position(&|(_, _, data)| data["live"] == true && data["invocation"] == 2);
    assert!(recorded < second, "{kinds:?}");
    assert_eq!(events.last().unwrap().1, "done");

    // The tool's result whole: longer than the old excerpt and than what the model read.
    let (_, _, result) = events
        .iter()
        .find(|(_, e, data)| e == "tool_result" && data["tool"] == "kubectl_get_yaml")
        .expect("the tool_result of kubectl_get_yaml");
    let shown = result["output"].as_str().unwrap();
    let read = model.requests()[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(read.ends_with("[TRUNCATED]"), "{read}");
    assert_eq!(result["truncated"], true);
    assert!(
        shown.chars().count() > kubemedic::domain::TOOL_EXCERPT_CHARS && shown.len() > read.len(),
        "{} characters shown, {} read by the model",
        shown.len(),
        read.len()
    );
    assert!(!shown.contains("[TRUNCATED]"));
    assert!(shown.starts_with(read.trim_end_matches("[TRUNCATED]").trim_end()));

    // The OpenAI client's completion streamed the words too, before the answer.
    let chunks = completion.await.unwrap();
    assert!(client.wait().await.unwrap().success());
    let streamed: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    let words = streamed.find(thinking).expect(&streamed);
    let approval = streamed.find("APPROVAL REQUIRED").expect(&streamed);
    assert!(words < approval, "{streamed}");
    assert!(
        chunks
            .iter()
            .any(|c| c["choices"][0]["hitl_required"] == true),
        "the HITL signal"
    );

    // A reconnect after the durable event before the first live one resumes from the trail:
    // exactly the durable events after it (the model is done: nothing live is left).
    let (resume_at, _, _) = events[..first_live]
        .iter()
        .rev()
        .find(|(id, _, _)| !id.is_empty())
        .unwrap();
    let resumed = typed_events(&d, &key, &conversation, Some(resume_at)).await;
    let durable_after: Vec<&str> = events[first_live..]
        .iter()
        .filter(|(id, _, _)| !id.is_empty())
        .map(|(id, _, _)| id.as_str())
        .collect();
    let resumed_ids: Vec<&str> = resumed.iter().map(|(id, _, _)| id.as_str()).collect();
    assert_eq!(resumed_ids, durable_after, "resumed after {resume_at}");
    d.stop().await;
}

/// In the browser: the Ask page shows the model's words as it writes them, set apart from (and
/// before) the answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ask_page_shows_the_models_words_as_they_come() {
    use common::browser::Browser;
    use std::time::Duration;
    let Some(k) = Kube::new("chatlb").await else {
        return;
    };
    let Some(b) = Browser::start().await else {
        return;
    };
    common::scenarios::staged_in("crashloop-rollout", &[&k]).await;
    let (_model, d) = talkative_model(&k).await;
    let key = common::create_key(d.store.as_ref(), Role::Approver, "alice").await;
    assert_eq!(b.sign_in(&d.base, &key).await.as_deref(), Ok("approver"));
    b.goto(&d.url("/ask")).await;
    b.fill(
        "#question",
        &format!("why is checkout crashing in {}?", k.ns),
    )
    .await;
    b.click("#send").await;
    b.wait_for_text("#log .live", "I will read the checkout Deployment")
        .await;
    b.wait_until("the approval request", Duration::from_secs(60), async |b| {
        b.exists("#hitl:not([hidden])").await
    })
    .await;
    let blocks = b.find_all("#log .live").await;
    assert_eq!(blocks.len(), 2, "one block per model call that wrote text");
    let answer = b.text("#log .answer").await;
    assert!(
        answer.contains("Root cause") && !answer.contains("I will read"),
        "{answer}"
    );
    // The words came first: the live blocks precede the answer in the log.
    let before = b
        .execute(
            "return !!(document.querySelector('#log .live').compareDocumentPosition(\
             document.querySelector('#log .answer')) & Node.DOCUMENT_POSITION_FOLLOWING);",
            vec![],
        )
        .await;
    assert_eq!(before, Value::Bool(true));
    // Each tool's output is there whole, folded away: more than the model read.
    let output = b
        .execute(
            "return document.querySelector('#log .ev-tool_result details pre').textContent;",
            vec![],
        )
        .await;
    let output = output.as_str().unwrap();
    assert!(
        output.len() > 1_000 && !output.contains("[TRUNCATED]"),
        "{output}"
    );
    b.click("#log .ev-tool_result details summary").await;
    b.screenshot("ask-live-words.png").await;
    b.close().await;
    d.stop().await;
}
