//! OpenTelemetry traces into a real OTLP/HTTP receiver (issue 30, items 3 and 4):
//! `tests/otlp/receiver.py`, built on the OpenTelemetry project's protobuf definitions (the
//! `opentelemetry-proto` package from PyPI), receives what real `kubemedic serve` processes
//! export while a staged incident on the real API server goes from Alertmanager's webhook to
//! verification — investigated by the scripted model over real HTTP, approved, executed,
//! verified — with a restart (a second replica on the same Postgres) in the middle; and while
//! a chat question carrying a `traceparent` is answered, with `--otlp-record-prompts`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

mod common;

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use common::kube::Kube;
use common::llm::{ScriptedLlm, calls};
use common::otlp::{Daemon, Receiver, post_alert, strings};
use common::{API_TOKEN, WEBHOOK_TOKEN};
use serde_json::{Value, json};

/// Planted in a ConfigMap the model reads and in the alert's annotations: it must reach no
/// span.
const PLANTED: &str = "TraceLeak-9f3k2q";
/// The address approvers reach kubemedic at: the base of the mailed links.
const PUBLIC_URL: &str = "https://kubemedic.example.test";

/// A production bad rollout (approval required) goes from the webhook, which carries a
/// `traceparent`, to verification: replica a ingests, investigates (the scripted model calls
/// two tools), gates and waits for approval, and stops; replica b, started on the same
/// database, takes the decision (an approver key), executes and verifies. The approval offer
/// is mailed (maildev's SMTP) before a stops: its `notify email offer` span hangs from the
/// ingest span, names its channel and holds no SMTP password, address or signed link. The
/// proof's server-side dry run of the rollback is a `kube` span with `kubemedic.dry_run`
/// inside a stage, the real write one inside `stage execute`. Every span the two
/// export is in the caller's trace and hangs, by parent ids, from the one ingest span under
/// the caller's span; each stage, the tool calls, the Kubernetes write and the model calls
/// (GenAI attributes with token counts) are there; no span holds the prompt or the planted secret;
/// the API, the request page, the audit trail and the log lines show the trace id.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_staged_incident_is_one_connected_trace_across_a_restart() {
    common::init();
    let (Some(smtp), Some(smtp_user), Some(smtp_password), Some(mail_api)) = (
        common::component("KUBEMEDIC_TEST_SMTP_URL", "maildev (SMTP)"),
        common::component("KUBEMEDIC_TEST_SMTP_USERNAME", "maildev (SMTP)"),
        common::component("KUBEMEDIC_TEST_SMTP_PASSWORD", "maildev (SMTP)"),
        common::component("KUBEMEDIC_TEST_MAILDEV_API", "maildev (HTTP API)"),
    ) else {
        return;
    };
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
        // The approval offer is mailed (maildev's SMTP), so its delivery is a span too.
        "--smtp-url",
        &smtp,
        "--smtp-username",
        &smtp_user,
        "--smtp-password",
        &smtp_password,
        "--email-from",
        "kubemedic <kubemedic@example.test>",
        "--approvers",
        common::incident::ALICE,
        "--public-url",
        PUBLIC_URL,
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
    // The offer reached the approver before a stops; its signed link must reach no span.
    let mail = common::incident::mails_for(&mail_api, &approval, 1).await;
    let mail_text = mail[0]["text"].as_str().unwrap().to_owned();
    let link_token = mail_text
        .split("?t=")
        .nth(1)
        .and_then(|rest| {
            rest.split(|c: char| c.is_whitespace() || c == '>' || c == ')')
                .next()
        })
        .unwrap_or_else(|| panic!("no signed link in the mail: {mail_text}"))
        .to_owned();
    assert!(link_token.len() >= 16, "{mail_text}");
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
    // The approval offer's delivery: a `notify` span under the request's ingest span, naming
    // its channel, delivered.
    let offers: Vec<&Value> = spans
        .iter()
        .filter(|s| s["name"] == "notify email offer")
        .collect();
    assert_eq!(offers.len(), 1, "one mailed offer: {names:?}");
    let offer = &offers[0]["attributes"];
    assert_eq!(offers[0]["parent_span_id"], ingest, "{:#}", offers[0]);
    assert_eq!(
        offer["kubemedic.notification.channel"], "email",
        "{offer:#}"
    );
    assert_eq!(offer["kubemedic.notification.kind"], "offer", "{offer:#}");
    assert_eq!(
        offer["kubemedic.notification.result"], "delivered",
        "{offer:#}"
    );
    assert_eq!(offer["kubemedic.request_id"], id.as_str(), "{offer:#}");
    // The proof at selection dry-runs the rollback on the API server: a `kube` span with
    // `kubemedic.dry_run`, inside a stage; the real write is not a dry run.
    let dry_runs: Vec<&Value> = spans
        .iter()
        .filter(|s| {
            s["name"].as_str().unwrap().starts_with("kube ")
                && s["attributes"]["kubemedic.dry_run"] == true
        })
        .collect();
    assert!(!dry_runs.is_empty(), "no dry-run span in {names:?}");
    for d in &dry_runs {
        assert_eq!(d["attributes"]["kubemedic.k8s.kind"], "Deployment", "{d:#}");
        assert_eq!(
            d["attributes"]["k8s.namespace.name"],
            k.ns.as_str(),
            "{d:#}"
        );
        let mut up = ids[d["parent_span_id"].as_str().unwrap()];
        while !up["name"].as_str().unwrap().starts_with("stage ") {
            up = ids[up["parent_span_id"].as_str().unwrap()];
        }
        assert!(
            ["stage select", "stage gate", "stage approval"]
                .contains(&up["name"].as_str().unwrap()),
            "a dry run is inside a stage that proves: {up:#}"
        );
    }
    let real_write = spans
        .iter()
        .find(|s| {
            s["name"].as_str().unwrap().starts_with("kube ")
                && s["attributes"]["kubemedic.dry_run"] == false
        })
        .unwrap_or_else(|| panic!("no real write span in {names:?}"));
    let mut up = ids[real_write["parent_span_id"].as_str().unwrap()];
    while !up["name"].as_str().unwrap().starts_with("stage ") {
        up = ids[up["parent_span_id"].as_str().unwrap()];
    }
    assert_eq!(up["name"], "stage execute", "{real_write:#}");
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
                &smtp_password,
                &link_token,
                common::incident::ALICE,
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

/// A chat question that carries a W3C `traceparent` continues the caller's trace: the chat
/// request span hangs under the caller's span, and the request it opens — its stages, the
/// model calls (`chat gpt-4o`) and the tool calls — are in that trace under it. A malformed
/// `traceparent` is ignored: the question is answered, in a trace of its own. With
/// `--otlp-record-prompts` each model call holds its prompt and its answer as GenAI events —
/// sanitised: the password the model read in a ConfigMap is `[REDACTED]` in the recorded tool
/// message, and no span holds it. The request is mirrored as a `Remediation` object: the
/// mirror's writes are `kube` spans of the same trace.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_chat_question_continues_the_callers_trace_and_records_sanitised_prompts() {
    common::init();
    let Some(receiver) = Receiver::start() else {
        return;
    };
    let Some(database_url) = common::fresh_postgres().await else {
        return;
    };
    let Some(k) = Kube::new("tracechat").await else {
        return;
    };
    common::scenarios::staged_in("crashloop-rollout", &[&k]).await;
    // The request is mirrored as a Remediation object: the mirror's writes are spans too.
    k.kubemedic_crds().await;
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
            "settings": format!("pool=5\npassword={PLANTED}\n"),
        }
    }))
    .await;
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
        "--approve-with-keys",
        "--llm",
        "openai",
        "--llm-base-url",
        &format!("{}/v1", model.base_url),
        "--llm-api-key",
        "sk-trace-test-key",
        "--llm-model",
        "gpt-4o",
        "--otlp-record-prompts",
        "--mirror-remediations",
    ]
    .map(str::to_owned)
    .to_vec();
    let mut d = Daemon::start("replica-chat", &database_url, &receiver.endpoint, &args).await;
    let ask = |question: String, traceparent: &'static str| {
        let base = d.base.clone();
        async move {
            let r = reqwest::Client::new()
                .post(format!("{base}/v1/chat/completions"))
                .bearer_auth(API_TOKEN)
                .header("traceparent", traceparent)
                .json(&json!({"model": "kubemedic",
                              "messages": [{"role": "user", "content": question}]}))
                .send()
                .await
                .unwrap();
            let status = r.status();
            let body = r.text().await.unwrap();
            assert_eq!(status, 200, "{body}");
            serde_json::from_str::<Value>(&body).unwrap()
        }
    };

    // A malformed traceparent is no error: the question is answered in a new trace.
    const MALFORMED: &str = "00-NOT-A-TRACE-01";
    let hello = ask("hello, what can you do?".into(), MALFORMED).await;
    assert_eq!(hello["request_id"], Value::Null, "{hello:#}");

    const CALLER_TRACE: &str = "5b8efff798038103d269b633813fc60c";
    const CALLER_SPAN: &str = "eee19b7ec3c1b174";
    const TRACEPARENT: &str = "00-5b8efff798038103d269b633813fc60c-eee19b7ec3c1b174-01";
    let asked = ask(
        format!("why is checkout crashing in {}?", k.ns),
        TRACEPARENT,
    )
    .await;
    assert_eq!(asked["choices"][0]["hitl_required"], true, "{asked:#}");
    let id = asked["request_id"].as_str().unwrap().to_owned();
    let request = d.api(&format!("/api/v1/requests/{id}")).await;
    assert_eq!(request["trace_id"], CALLER_TRACE, "{request:#}");
    // The model read the ConfigMap sanitised.
    let prompts: String = model
        .requests()
        .iter()
        .map(|r| r.body.to_string())
        .collect();
    assert!(
        prompts.contains("checkout-db"),
        "the model read the ConfigMap"
    );
    assert!(!prompts.contains(PLANTED), "a secret reached the model");
    // The mirror wrote the request's object as it waits for approval.
    let remediations = k.api("kubemedic.io/v1alpha1", "Remediation");
    k.wait("the Remediation awaiting approval", 60, || {
        let remediations = remediations.clone();
        async move {
            let list = remediations.list(&Default::default()).await.ok()?;
            list.items
                .iter()
                .any(|o| o.data["status"]["phase"] == "AwaitingApproval")
                .then_some(())
        }
    })
    .await;
    d.stop();

    let all = receiver.spans();
    let questions: Vec<&Value> = all
        .iter()
        .filter(|s| s["name"] == "chat question")
        .collect();
    assert_eq!(questions.len(), 2, "two questions: {all:#?}");
    let (ours, fresh): (Vec<&Value>, Vec<&Value>) = questions
        .into_iter()
        .partition(|s| s["trace_id"] == CALLER_TRACE);
    assert_eq!(
        ours.len(),
        1,
        "the traced question is in the caller's trace"
    );
    assert_eq!(ours[0]["parent_span_id"], CALLER_SPAN, "{:#}", ours[0]);
    assert_eq!(fresh.len(), 1);
    assert_eq!(
        fresh[0]["parent_span_id"], "",
        "the malformed traceparent's question is a root: {:#}",
        fresh[0]
    );
    assert_ne!(fresh[0]["status"], 2, "not an error: {:#}", fresh[0]);

    let spans: Vec<&Value> = all
        .iter()
        .filter(|s| s["trace_id"] == CALLER_TRACE)
        .collect();
    let names: BTreeSet<&str> = spans.iter().map(|s| s["name"].as_str().unwrap()).collect();
    let ids: HashMap<&str, &Value> = spans
        .iter()
        .map(|s| (s["span_id"].as_str().unwrap(), *s))
        .collect();
    let question = ours[0]["span_id"].as_str().unwrap();
    // Every span of the trace hangs, by parent ids, from the question's span.
    for s in &spans {
        let mut up = *s;
        while up["span_id"] != question {
            let parent = up["parent_span_id"].as_str().unwrap();
            up = ids.get(parent).copied().unwrap_or_else(|| {
                panic!(
                    "{} does not hang from the question: {s:#}\nall: {names:?}",
                    s["name"]
                )
            });
        }
    }
    for want in [
        "stage investigate",
        "execute_tool get_namespaced_resource_context",
        "execute_tool kubectl_get_yaml",
    ] {
        assert!(names.contains(want), "no `{want}` span in {names:?}");
    }
    // The mirror's writes: `kube <verb> Remediation…` spans under the request's `mirror`
    // span, not dry runs.
    let mirrors: Vec<&str> = spans
        .iter()
        .filter(|s| s["name"] == "mirror Remediation")
        .map(|s| s["span_id"].as_str().unwrap())
        .collect();
    assert!(!mirrors.is_empty(), "no mirror span in {names:?}");
    let mirror_writes: Vec<&&Value> = spans
        .iter()
        .filter(|s| mirrors.contains(&s["parent_span_id"].as_str().unwrap()))
        .collect();
    for want in ["kube create Remediation", "kube patch Remediation/status"] {
        let w = mirror_writes
            .iter()
            .find(|s| s["name"] == want)
            .unwrap_or_else(|| panic!("no `{want}` under a mirror span: {names:?}"));
        assert_eq!(w["attributes"]["kubemedic.dry_run"], false, "{w:#}");
        assert_eq!(
            w["attributes"]["k8s.namespace.name"],
            k.ns.as_str(),
            "{w:#}"
        );
        assert_ne!(w["status"], 2, "{w:#}");
    }
    let chats: Vec<&&Value> = spans
        .iter()
        .filter(|s| s["attributes"]["gen_ai.operation.name"] == "chat")
        .collect();
    assert_eq!(chats.len(), 3, "three model calls: {names:?}");
    // The prompts, recorded and sanitised.
    let mut tool_messages = Vec::new();
    for c in &chats {
        assert_eq!(c["name"], "chat gpt-4o", "{c:#}");
        let events = c["events"].as_array().unwrap();
        let event_names: BTreeSet<&str> =
            events.iter().map(|e| e["name"].as_str().unwrap()).collect();
        assert!(event_names.contains("gen_ai.system.message"), "{c:#}");
        assert!(event_names.contains("gen_ai.user.message"), "{c:#}");
        assert!(event_names.contains("gen_ai.choice"), "{c:#}");
        for e in events {
            if e["name"] == "gen_ai.tool.message" {
                tool_messages.push(e["attributes"]["content"].as_str().unwrap().to_owned());
            }
        }
    }
    let read = tool_messages
        .iter()
        .find(|m| m.contains("checkout-db"))
        .unwrap_or_else(|| panic!("the ConfigMap read is not recorded: {tool_messages:#?}"));
    assert!(read.contains("[REDACTED]"), "{read}");
    assert!(
        spans
            .iter()
            .any(|s| strings(s).iter().any(|t| t.contains("crashes on start"))),
        "the answer is recorded"
    );
    for s in &all {
        for text in strings(s) {
            for never in [PLANTED, API_TOKEN, "sk-trace-test-key"] {
                assert!(
                    !text.contains(never),
                    "`{never}` in span {}: {s:#}",
                    s["name"]
                );
            }
        }
    }
}

/// `kubemedic demo` sends its traces where the standard variable says, as `serve` does (issue
/// 38: it ignored OTEL_EXPORTER_OTLP_ENDPOINT): the demo's alerts arrive as ingest spans with
/// their stages, verification's included — the last steps' spans are out before it ends.
#[test]
fn the_demo_sends_its_traces_where_otel_exporter_otlp_endpoint_says() {
    let Some(receiver) = Receiver::start() else {
        return;
    };
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kubemedic"))
        .args(["demo", "--exit", "--listen", "127.0.0.1:0"])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.endpoint)
        .env_remove("KUBEMEDIC_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("KUBEMEDIC_LLM")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let spans = receiver.spans();
    let names: BTreeSet<&str> = spans.iter().map(|s| s["name"].as_str().unwrap()).collect();
    // Six alerts, and the resolved notifications that verify the remediations run.
    let ingests = spans
        .iter()
        .filter(|s| s["name"] == "ingest alertmanager")
        .count();
    assert!(ingests >= 6, "{ingests} ingest spans: {names:?}");
    for stage in ["stage investigate", "stage execute", "stage verify"] {
        assert!(names.contains(stage), "no {stage}: {names:?}");
    }
}
