//! OpenTelemetry traces into a real OTLP/HTTP receiver (issue 30, items 3 and 4):
//! `tests/otlp/receiver.py`, built on the OpenTelemetry project's protobuf definitions (the
//! `opentelemetry-proto` package from PyPI), receives what real `kubemedic serve` processes
//! export while a staged incident on the real API server goes from Alertmanager's webhook to
//! verification — investigated by the scripted model over real HTTP, approved, executed,
//! verified — with a restart (a second replica on the same Postgres) in the middle.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

mod common;

use std::collections::{BTreeSet, HashMap};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::kube::Kube;
use common::llm::{ScriptedLlm, calls};
use common::{API_TOKEN, WEBHOOK_TOKEN};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_kubemedic");
const AUDIT_KEY: &str = "7ace7ace7ace7ace7ace7ace7ace7ace7ace7ace7ace7ace7ace7ace7ace7ace";
/// Planted in a ConfigMap the model reads and in the alert's annotations: it must reach no
/// span.
const PLANTED: &str = "TraceLeak-9f3k2q";

/// The OTLP receiver, killed when dropped.
struct Receiver {
    child: Child,
    endpoint: String,
    file: PathBuf,
    _dir: tempfile::TempDir,
}

impl Receiver {
    fn start() -> Option<Self> {
        let python = common::component("KUBEMEDIC_OTLP_PYTHON", "the OTLP receiver's Python")?;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("spans.jsonl");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/otlp/receiver.py");
        let mut child = Command::new(python)
            .arg(&script)
            .arg(&file)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("the receiver did not start: {line:?}"));
        Some(Self {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
            file,
            _dir: dir,
        })
    }

    fn spans(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.file)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One `kubemedic serve` process.
struct Daemon {
    child: Child,
    base: String,
    log: Arc<Mutex<Vec<String>>>,
    _data: tempfile::TempDir,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Daemon {
    async fn start(name: &str, database_url: &str, receiver: &str, args: &[String]) -> Self {
        let data = tempfile::tempdir().unwrap();
        let port = free_port();
        let mut child = Command::new(BIN)
            .arg("serve")
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--data-dir")
            .arg(data.path())
            .arg("--lease-seconds")
            .arg("2")
            .args(args)
            .env("HOSTNAME", name)
            .env("KUBEMEDIC_DATABASE_URL", database_url)
            .env("KUBEMEDIC_WEBHOOK_TOKEN", WEBHOOK_TOKEN)
            .env("KUBEMEDIC_API_TOKEN", API_TOKEN)
            .env("KUBEMEDIC_AUDIT_KEY", AUDIT_KEY)
            .env("KUBEMEDIC_LOG_FORMAT", "json")
            .env("KUBEMEDIC_OTLP_ENDPOINT", receiver)
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().unwrap();
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        let mut d = Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
            log,
            _data: data,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(r) = reqwest::get(format!("{}/readyz", d.base)).await
                && r.status() == 200
            {
                return d;
            }
            if let Some(status) = d.child.try_wait().unwrap() {
                panic!("{name} exited ({status}):\n{}", d.log_text());
            }
            assert!(
                Instant::now() < deadline,
                "{name} not ready:\n{}",
                d.log_text()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn log_text(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// SIGTERM, and wait for the exit (the spans still queued are sent first).
    fn stop(&mut self) {
        let pid = self.child.id().to_string();
        assert!(
            Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .unwrap()
                .success()
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert_eq!(status.code(), Some(0), "{}", self.log_text());
                return;
            }
            assert!(
                Instant::now() < deadline,
                "did not stop:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    async fn api(&self, path: &str) -> Value {
        let r = reqwest::Client::new()
            .get(format!("{}{path}", self.base))
            .bearer_auth(API_TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "GET {path}");
        r.json().await.unwrap()
    }

    async fn until(&self, path: &str, secs: u64, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let v = self.api(path).await;
            if done(&v) {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "{path} not there in {secs}s: {v:#}\n{}",
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn post_alert(base: &str, body: &Value, traceparent: Option<&str>) -> Value {
    let mut r = reqwest::Client::new()
        .post(format!("{base}/api/v1/alerts/alertmanager"))
        .bearer_auth(WEBHOOK_TOKEN)
        .body(body.to_string());
    if let Some(t) = traceparent {
        r = r.header("traceparent", t);
    }
    let r = r.send().await.unwrap();
    assert_eq!(r.status(), 200);
    r.json().await.unwrap()
}

/// Every string in a span's attributes and its events' attributes.
fn strings(span: &Value) -> Vec<String> {
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::String(s) => out.push(s.clone()),
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            Value::Object(m) => m.iter().for_each(|(k, x)| {
                out.push(k.clone());
                walk(x, out);
            }),
            _ => {}
        }
    }
    let mut out = vec![span["name"].as_str().unwrap_or("").to_owned()];
    walk(&span["attributes"], &mut out);
    walk(&span["events"], &mut out);
    out
}

/// A production bad rollout (approval required) goes from the webhook, which carries a
/// `traceparent`, to verification: replica a ingests, investigates (the scripted model calls
/// two tools), gates and waits for approval, and stops; replica b, started on the same
/// database, takes the decision (an approver key), executes and verifies. Every span the two
/// export is in the caller's trace and hangs, by parent ids, from the one ingest span under
/// the caller's span; each stage, the tool calls, the Kubernetes write and the model calls
/// (GenAI attributes with token counts) are there; no span holds the prompt or the planted secret;
/// the API, the request page, the audit trail and the log lines show the trace id.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_staged_incident_is_one_connected_trace_across_a_restart() {
    common::init();
    let Some(receiver) = Receiver::start() else {
        return;
    };
    let Some(database_url) = common::fresh_postgres().await else {
        return;
    };
    let Some(k) = Kube::new("trace").await else {
        return;
    };
    let mut staged = common::scenarios::staged_in("crashloop-rollout", &[&k])
        .await
        .remove(0)
        .alert;
    k.patch(
        "v1",
        "Namespace",
        &k.ns,
        json!({"metadata": {"labels": {"kubemedic.io/environment": "production"}}}),
    )
    .await;
    k.apply(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "checkout-db"},
        "data": {
            "DATABASE_URL": format!("postgres://shop:{PLANTED}@db.shop:5432/shop"),
            "password": PLANTED,
        }
    }))
    .await;
    staged["alerts"][0]["annotations"]["runbook_note"] =
        json!(format!("connect with password={PLANTED}"));

    let target = json!({"kind": "Deployment", "name": "checkout", "namespace": k.ns});
    let config_map = json!({"kind": "ConfigMap", "name": "checkout-db", "namespace": k.ns});
    let model = ScriptedLlm::start(vec![
        calls(&[
            ("get_namespaced_resource_context", target.clone()),
            ("kubectl_get_yaml", config_map),
        ]),
        calls(&[(
            "submit_result",
            json!({
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
        calls(&[(
            "submit_result_with_workflow",
            json!({"selected_workflow": {"workflow_id": "rollback-deployment-previous-revision",
                    "confidence": 0.9, "rationale": "the previous revision ran", "parameters": {"TO_REVISION": 1}}}),
        )]),
    ])
    .await;

    let policies = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let args: Vec<String> = [
        "--kubeconfig",
        k.kubeconfig.to_str().unwrap(),
        "--policy-dir",
        policies.to_str().unwrap(),
        "--verification-window-seconds",
        "3",
        "--cooldown-seconds",
        "0",
        "--approve-with-keys",
        "--llm",
        "openai",
        "--llm-base-url",
        &format!("{}/v1", model.base_url),
        "--llm-api-key",
        "sk-trace-test-key",
        "--llm-model",
        "gpt-4o",
    ]
    .map(str::to_owned)
    .to_vec();

    // The caller's span: the webhook continues its trace.
    let trace_id = uuid::Uuid::new_v4().simple().to_string();
    let caller_span = "00f067aa0ba902b7";
    let traceparent = format!("00-{trace_id}-{caller_span}-01");

    let kubelet = common::incident::kubelet(&k);
    let mut a = Daemon::start("replica-a", &database_url, &receiver.endpoint, &args).await;
    let answer = post_alert(&a.base, &staged, Some(&traceparent)).await;
    let id = answer["outcomes"][0]["request_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("/api/v1/requests/{id}");
    let waiting = a
        .until(&path, 120, |r| {
            r["phase"] == "AwaitingApproval" || common::incident::is_terminal(r)
        })
        .await;
    assert_eq!(waiting["phase"], "AwaitingApproval", "{waiting:#}");
    assert_eq!(waiting["trace_id"], trace_id.as_str(), "{waiting:#}");
    let pending = a.api("/api/v1/approvals?status=pending").await;
    let approval = pending["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["request_id"] == id.as_str())
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let log_a = a.log_text();
    a.stop();

    // Another replica on the same database takes it from here.
    let mut b = Daemon::start("replica-b", &database_url, &receiver.endpoint, &args).await;
    let decided = reqwest::Client::new()
        .post(format!("{}/api/v1/approvals/{approval}/decision", b.base))
        .bearer_auth(API_TOKEN)
        .json(&json!({"decision": "approve"}))
        .send()
        .await
        .unwrap();
    assert_eq!(decided.status(), 200, "{}", decided.text().await.unwrap());
    b.until(&path, 120, |r| {
        r["phase"] == "Verifying" || common::incident::is_terminal(r)
    })
    .await;
    let mut resolved = staged.clone();
    resolved["status"] = json!("resolved");
    resolved["alerts"][0]["status"] = json!("resolved");
    resolved["alerts"][0]["endsAt"] = json!(chrono::Utc::now().to_rfc3339());
    post_alert(&b.base, &resolved, None).await;
    let done = b.until(&path, 120, common::incident::is_terminal).await;
    assert_eq!(done["phase"], "Completed", "{done:#}");
    assert_eq!(done["trace_id"], trace_id.as_str());
    assert_eq!(done["traceparent"].as_str().unwrap().len(), 55);
    // The trail: the new events carry the trace id, and the chain still verifies.
    let transitions: Vec<&Value> = done["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "transition" || e["kind"] == "received")
        .collect();
    assert!(transitions.len() >= 8, "{done:#}");
    for e in &transitions {
        assert_eq!(e["payload"]["trace_id"], trace_id.as_str(), "{e:#}");
    }
    let page = reqwest::Client::new()
        .get(format!("{}/requests/{id}", b.base))
        .bearer_auth(API_TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains(&trace_id),
        "the request page shows the trace id"
    );
    let log_b = b.log_text();
    b.stop();
    kubelet.abort();

    // The log: each line inside the request's span names its trace.
    let mut traced_lines = 0;
    for line in log_a.lines().chain(log_b.lines()) {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        if v["message"] == "phase changed" {
            assert_eq!(v["span"]["trace_id"], trace_id.as_str(), "{line}");
            traced_lines += 1;
        }
    }
    assert!(traced_lines >= 6, "{log_a}\n{log_b}");

    // The spans, once both exporters flushed on their way out.
    let all = receiver.spans();
    // The resolved notification opened nothing: its ingest span is a trace of its own.
    let (spans, others): (Vec<Value>, Vec<Value>) = all
        .into_iter()
        .partition(|s| s["trace_id"] == trace_id.as_str());
    for s in &others {
        assert_eq!(s["name"], "ingest alertmanager", "{s:#}");
        assert_eq!(s["attributes"]["kubemedic.opened"], 0, "{s:#}");
    }
    assert!(!spans.is_empty(), "no spans received");
    let names: BTreeSet<&str> = spans.iter().map(|s| s["name"].as_str().unwrap()).collect();
    for s in &spans {
        assert_eq!(s["trace_id"], trace_id.as_str(), "one trace: {s:#}");
        assert_eq!(s["resource"]["service.name"], "kubemedic", "{s:#}");
    }
    let ids: HashMap<&str, &Value> = spans
        .iter()
        .map(|s| (s["span_id"].as_str().unwrap(), s))
        .collect();
    assert_eq!(ids.len(), spans.len(), "span ids are unique");
    let roots: Vec<&Value> = spans
        .iter()
        .filter(|s| s["parent_span_id"] == caller_span)
        .collect();
    assert_eq!(roots.len(), 1, "one span under the caller's: {names:?}");
    assert_eq!(roots[0]["name"], "ingest alertmanager");
    for s in &spans {
        let parent = s["parent_span_id"].as_str().unwrap();
        assert!(
            parent == caller_span || ids.contains_key(parent),
            "{} has a parent that was not exported: {s:#}\nall: {names:?}",
            s["name"]
        );
    }
    for want in [
        "stage enrich",
        "stage investigate",
        "stage select",
        "stage gate",
        "stage approval",
        "stage execute",
        "stage verify",
        "execute_tool get_namespaced_resource_context",
        "execute_tool kubectl_get_yaml",
    ] {
        assert!(names.contains(want), "no `{want}` span in {names:?}");
    }
    assert!(
        names
            .iter()
            .any(|n| n.starts_with("kube ") && n.ends_with(" Deployment")),
        "no Kubernetes write span in {names:?}"
    );
    // The stages before the restart ran on a, after it on b: the stage spans of both hang
    // from the one ingest span.
    let ingest = roots[0]["span_id"].as_str().unwrap();
    for stage in ["stage investigate", "stage execute", "stage verify"] {
        let s = spans.iter().find(|s| s["name"] == stage).unwrap();
        assert_eq!(s["parent_span_id"], ingest, "{stage}: {s:#}");
    }
    let chats: Vec<&Value> = spans
        .iter()
        .filter(|s| s["attributes"]["gen_ai.operation.name"] == "chat")
        .collect();
    assert_eq!(chats.len(), 3, "three model calls: {names:?}");
    for c in &chats {
        let a = &c["attributes"];
        assert!(c["name"].as_str().unwrap().starts_with("chat "), "{c:#}");
        assert_eq!(a["gen_ai.provider.name"], "openai", "{c:#}");
        assert_eq!(a["gen_ai.system"], "openai", "{c:#}");
        assert!(a["gen_ai.request.model"].is_string(), "{c:#}");
        assert!(
            a["gen_ai.usage.input_tokens"].as_i64().unwrap() > 0,
            "{c:#}"
        );
        assert!(
            a["gen_ai.usage.output_tokens"].as_i64().unwrap() > 0,
            "{c:#}"
        );
        assert_eq!(
            a["gen_ai.response.finish_reasons"],
            json!(["tool_calls"]),
            "{c:#}"
        );
        let parent = ids[c["parent_span_id"].as_str().unwrap()];
        assert!(
            parent["name"].as_str().unwrap().starts_with("stage "),
            "a model call is inside its stage: {parent:#}"
        );
        assert!(
            c["events"].as_array().unwrap().is_empty(),
            "no prompt events by default: {c:#}"
        );
    }
    // Nothing secret, no text of the prompt or the answer, in any span.
    for s in &spans {
        for text in strings(s) {
            for never in [
                PLANTED,
                WEBHOOK_TOKEN,
                API_TOKEN,
                "sk-trace-test-key",
                "crashes on start",
                "CrashLoopBackOff",
            ] {
                assert!(
                    !text.contains(never),
                    "`{never}` in span {}: {s:#}",
                    s["name"]
                );
            }
        }
    }
}
