//! The approval gate with real regorus and real policy files: the shipped policy's decisions,
//! fail-closed behaviour (visible on /readyz and in metrics), hot reload with in-flight
//! snapshots, the execution-time limit, `kubemedic policy test`, enrichment from real namespace
//! labels on the real kube-apiserver tier, and whole requests driven through enrichment and the
//! gate by the real worker.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use common::TestDaemon;
use common::kube::Kube;
use kubemedic::cluster::ClusterReader;
use kubemedic::daemon::Components;
use kubemedic::domain::Target;
use kubemedic::domain::{
    Phase, RemediationRequest, SignalContext, Stage, StageError, StageOutcome, StageState,
};
use kubemedic::domain::{SignalMode, SignalSource};
use kubemedic::enrich::EnrichmentStage;
use kubemedic::gate::{GateSettings, GateStage};
use kubemedic::policy::{GateInput, PolicyDependency, RegoGate};
use kubemedic::telemetry::Metrics;
use serde_json::{Value, json};

fn shipped_policies() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("policies")
}

fn limit() -> Duration {
    Duration::from_millis(100)
}

fn input(environment: &str, target: Option<(&str, &str, Option<&str>)>) -> GateInput {
    let mut v = json!({"environment": environment, "confidence": 0.9,
        "action_type": "RestartDeployment", "workflow_id": "restart-deployment-v1",
        "proof": {"verdict": "proven"}});
    if let Some((kind, name, ns)) = target {
        v["remediation_target"] = json!({"kind": kind, "name": name, "namespace": ns});
    }
    serde_json::from_value(v).unwrap()
}

fn scores(d: &kubemedic::domain::GateDecision) -> Vec<i64> {
    d.risk_factors.iter().map(|f| f.score).collect()
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

#[tokio::test]
async fn staging_is_auto_approved_and_production_needs_approval_for_the_policy_reason() {
    common::init();
    let gate = RegoGate::load(shipped_policies(), limit(), None);
    assert_eq!(gate.problem(), None);
    let revision = gate.snapshot().revision().unwrap().to_owned();

    let staging = gate
        .decide(&input(
            "staging",
            Some(("Deployment", "checkout", Some("shop-staging"))),
        ))
        .await;
    assert!(
        !staging.require_approval && !staging.degraded,
        "{staging:?}"
    );
    assert_eq!(
        staging.reason,
        "auto-approved: staging environment, verified target Deployment checkout"
    );
    assert!(staging.risk_factors.is_empty());
    assert_eq!(staging.policy_revision.as_deref(), Some(revision.as_str()));

    let production = gate
        .decide(&input(
            "production",
            Some(("Deployment", "checkout", Some("shop"))),
        ))
        .await;
    assert!(production.require_approval && !production.degraded);
    assert_eq!(scores(&production), [70]);
    assert_eq!(
        production.reason,
        "production environment: production remediations require approval"
    );

    let stateful = gate
        .decide(&input(
            "production",
            Some(("StatefulSet", "postgres", Some("db"))),
        ))
        .await;
    assert_eq!(scores(&stateful), [80, 70]);
    assert_eq!(
        stateful.reason,
        "StatefulSet postgres in production: sensitive resource kind"
    );

    let node = gate
        .decide(&input("production", Some(("Node", "worker-3", None))))
        .await;
    assert_eq!(scores(&node), [80, 70]);
    assert_eq!(
        node.reason,
        "Node worker-3 in production: sensitive resource kind"
    );

    for env in ["production", "staging"] {
        let missing = gate.decide(&input(env, None)).await;
        assert!(missing.require_approval, "{env}");
        assert_eq!(scores(&missing)[0], 90, "{env}");
        assert_eq!(
            missing.reason,
            "no remediation target: the investigation did not verify a resource to act on"
        );
    }

    let mut risky = input("production", Some(("Deployment", "web", Some("shop"))));
    risky.failed_detections = vec!["pdbProtected".into()];
    risky.warnings = vec!["configuration regression".into()];
    let d = gate.decide(&risky).await;
    assert_eq!(scores(&d), [75, 72, 70]);
    assert!(
        d.reason.contains("failed detections (pdbProtected)"),
        "{}",
        d.reason
    );

    // The same outside production: a verified target is enough.
    risky.environment = "qa".into();
    assert!(!gate.decide(&risky).await.require_approval);
}

const BROKEN: &str =
    "package kubemedic.approval\n\ndecision := {\"require_approval\": false} if {\n";

async fn get(d: &TestDaemon, path: &str) -> String {
    d.client
        .get(d.url(path))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_broken_policy_fails_closed_and_says_so_on_readyz_and_in_metrics() {
    common::init();
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "approval.rego", BROKEN);
    let metrics = Arc::new(Metrics::new());
    let gate = Arc::new(RegoGate::load(dir.path(), limit(), Some(metrics.clone())));
    let d = TestDaemon::start_with(
        |_| {},
        Components {
            dependencies: vec![Arc::new(PolicyDependency::new(gate.clone()))],
            metrics: Some(metrics.clone()),
            ..Default::default()
        },
        None,
    )
    .await;

    let decision = gate
        .decide(&input("staging", Some(("Deployment", "web", Some("shop")))))
        .await;
    assert!(
        decision.require_approval && decision.degraded,
        "{decision:?}"
    );
    assert!(
        decision
            .reason
            .starts_with("approval policy unavailable: policy file")
            && decision.reason.contains("approval.rego")
            && decision.reason.contains("does not parse"),
        "{}",
        decision.reason
    );

    let ready: Value = serde_json::from_str(&get(&d, "/readyz").await).unwrap();
    assert_eq!(ready["status"], "degraded", "{ready}");
    assert_eq!(ready["checks"]["policy"]["ok"], false, "{ready}");
    let detail = ready["checks"]["policy"]["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("degraded, every remediation requires approval")
            && detail.contains("does not parse"),
        "{detail}"
    );
    let m = get(&d, "/metrics").await;
    assert!(m.contains("kubemedic_gate_degraded 1"), "{m}");
    assert!(
        m.contains("kubemedic_gate_decisions_total{decision=\"degraded\"} 1"),
        "{m}"
    );

    // An operator fixes the policy: the next reload picks it up and the gate recovers.
    std::fs::copy(
        shipped_policies().join("approval.rego"),
        dir.path().join("approval.rego"),
    )
    .unwrap();
    assert!(gate.reload_if_changed());
    let decision = gate
        .decide(&input("staging", Some(("Deployment", "web", Some("shop")))))
        .await;
    assert!(
        !decision.require_approval && !decision.degraded,
        "{decision:?}"
    );
    let ready: Value = serde_json::from_str(&get(&d, "/readyz").await).unwrap();
    assert_eq!(ready["checks"]["policy"]["ok"], true, "{ready}");
    assert!(
        ready["checks"]["policy"]["detail"]
            .as_str()
            .unwrap()
            .contains("approval.rego"),
        "{ready}"
    );
    let m = get(&d, "/metrics").await;
    assert!(m.contains("kubemedic_gate_degraded 0"), "{m}");
    assert!(
        m.contains("kubemedic_gate_decisions_total{decision=\"auto_approved\"} 1"),
        "{m}"
    );
    d.stop().await;
}

#[tokio::test]
async fn a_missing_policy_directory_or_package_fails_closed() {
    common::init();
    let dir = tempfile::tempdir().unwrap();
    let gate = RegoGate::load(dir.path().join("absent"), limit(), None);
    let d = gate
        .decide(&input("staging", Some(("Deployment", "web", Some("shop")))))
        .await;
    assert!(d.require_approval && d.degraded);
    assert!(
        d.reason.contains("cannot read policy directory"),
        "{}",
        d.reason
    );
    assert_eq!(d.policy_revision, None);

    write(dir.path(), "other.rego", "package other\n\nx := 1\n");
    let gate = RegoGate::load(dir.path(), limit(), None);
    let d = gate.decide(&input("staging", None)).await;
    assert!(d.degraded);
    assert!(
        d.reason.contains("declares package kubemedic.approval"),
        "{}",
        d.reason
    );
}

/// A policy whose decision takes `to_number(input.workflow_id)`² loop iterations, so a test can
/// make one evaluation as slow as it needs.
fn spinning_policy(version: &str) -> String {
    format!(
        r#"package kubemedic.approval

n := to_number(input.workflow_id)

spin := count([1 | some i in numbers.range(1, n); some j in numbers.range(1, n)])

decision := {{"require_approval": false, "risk_factors": [], "reason": sprintf("{version} after %d", [spin])}}
"#
    )
}

fn spin_input(n: u64) -> GateInput {
    let mut i = input("staging", Some(("Deployment", "web", Some("shop"))));
    i.workflow_id = Some(n.to_string());
    i
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_reload_swaps_the_policy_while_a_decision_in_flight_keeps_its_snapshot() {
    common::init();
    let mut n = 300;
    for attempt in 0..6 {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "approval.rego", &spinning_policy("v1"));
        let gate = Arc::new(RegoGate::load(dir.path(), Duration::from_secs(60), None));
        let v1 = gate.snapshot().revision().unwrap().to_owned();

        let in_flight = tokio::spawn({
            let gate = gate.clone();
            async move { gate.decide(&spin_input(n)).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        write(dir.path(), "approval.rego", &spinning_policy("v2"));
        let swapped = tokio::task::spawn_blocking({
            let gate = gate.clone();
            move || gate.reload_if_changed()
        })
        .await
        .unwrap();
        assert!(swapped, "the changed file is picked up");
        let v2 = gate.snapshot().revision().unwrap().to_owned();
        assert_ne!(v1, v2);
        if in_flight.is_finished() {
            // This machine is faster than the guess: make the old decision slower and retry.
            n *= 2;
            eprintln!("attempt {attempt}: decision finished before the reload; n = {n}");
            continue;
        }

        // A new decision uses the new policy at once…
        let fresh = gate.decide(&spin_input(1)).await;
        assert_eq!(fresh.reason, "v2 after 1");
        assert_eq!(fresh.policy_revision.as_deref(), Some(v2.as_str()));
        // …while the one that started before the reload finishes on the policy it started with.
        let old = in_flight.await.unwrap();
        assert_eq!(old.reason, format!("v1 after {}", n * n));
        assert_eq!(old.policy_revision.as_deref(), Some(v1.as_str()));
        assert!(!old.degraded);
        // Nothing changed since: no reload.
        assert!(!gate.reload_if_changed());
        return;
    }
    panic!("could not keep a decision in flight across a reload");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watcher_reloads_a_changed_policy_directory() {
    common::init();
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "approval.rego", &spinning_policy("v1"));
    let gate = Arc::new(RegoGate::load(dir.path(), limit(), None));
    let watcher = gate.watch(Duration::from_millis(100));
    write(dir.path(), "approval.rego", &spinning_policy("v2"));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if gate.decide(&spin_input(1)).await.reason == "v2 after 1" {
            break;
        }
        assert!(Instant::now() < deadline, "the watcher never reloaded");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A broken edit is swapped in too: fail closed, not a silent fallback to v2.
    write(dir.path(), "approval.rego", BROKEN);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let d = gate.decide(&spin_input(1)).await;
        if d.degraded {
            assert!(d.require_approval);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the broken policy was never loaded"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    watcher.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evaluation_that_runs_too_long_is_stopped_and_requires_approval() {
    common::init();
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "approval.rego", &spinning_policy("v1"));
    let gate = RegoGate::load(dir.path(), Duration::from_millis(50), None);
    let started = Instant::now();
    // 25 million iterations: minutes without the limit.
    let d = gate.decide(&spin_input(5000)).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(d.require_approval && d.degraded, "{d:?}");
    assert_eq!(
        d.reason,
        "approval policy unavailable: evaluating data.kubemedic.approval.decision exceeded the \
         time limit of 50 ms"
    );
    assert!(gate.problem().unwrap().contains("time limit"));
    // A quick input on the same policy still decides.
    assert!(!gate.decide(&spin_input(2)).await.degraded);
    assert_eq!(gate.problem(), None);
}

fn kubemedic(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_kubemedic"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap()
}

#[test]
fn policy_test_passes_the_shipped_cases_and_explains_a_failure() {
    let out = kubemedic(&["policy", "test"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(!text.contains("FAIL"), "{text}");
    assert!(text.contains(", 0 failed"), "{text}");
    // Every rule of the default policy and degraded mode have cases.
    for file in [
        "non_production.yaml",
        "production.yaml",
        "missing_target.yaml",
        "helpers.yaml",
        "degraded.yaml",
        "proof.yaml",
    ] {
        assert!(
            text.contains(&format!("PASS  policies/tests/{file}")),
            "{file}: {text}"
        );
    }

    let dir = tempfile::tempdir().unwrap();
    let cases = dir.path().join("wrong.yaml");
    std::fs::write(
        &cases,
        r#"
- name: a production statefulset is wrongly expected to pass
  input:
    environment: production
    remediation_target: {kind: StatefulSet, name: db, namespace: shop}
    proof: {verdict: proven}
  want:
    require_approval: false
    risk_scores: [70]
"#,
    )
    .unwrap();
    let out = kubemedic(&["policy", "test", cases.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("FAIL") && text.contains("require_approval: want false, got true"),
        "{text}"
    );
    assert!(
        text.contains("risk_scores: want [70], got [80, 70]"),
        "{text}"
    );
    // The values of the rules that produced it.
    assert!(text.contains("is_production = true"), "{text}");
    assert!(text.contains("is_sensitive_kind = true"), "{text}");
    assert!(text.contains("1 cases: 0 passed, 1 failed"), "{text}");

    let out = kubemedic(&[
        "policy",
        "test",
        "--format",
        "json",
        "policies/tests/degraded.yaml",
    ]);
    assert!(out.status.success());
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["failed"], 0);
    assert!(
        report["cases"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["decision"]["degraded"] == true && c["input"]["environment"].is_string())
    );

    // A typo in a case is an error naming it, not a silently missing field.
    std::fs::write(
        &cases,
        "- name: typo\n  input: {environment: staging, remediaton_target: {}}\n  want: {require_approval: true}\n",
    )
    .unwrap();
    let out = kubemedic(&["policy", "test", cases.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("remediaton_target"), "{err}");
}

// ---- enrichment on the real API server -------------------------------------------------

fn request(target: Option<Target>, alert_namespace: Option<&str>) -> RemediationRequest {
    let now = chrono::Utc::now();
    let mut labels = std::collections::BTreeMap::new();
    labels.insert("alertname".to_owned(), "KubePodCrashLooping".to_owned());
    if let Some(ns) = alert_namespace {
        labels.insert("namespace".to_owned(), ns.to_owned());
    }
    let id = uuid::Uuid::new_v4();
    RemediationRequest {
        id,
        phase: Phase::Enriching,
        reason: None,
        target_fingerprint: target.as_ref().map(Target::fingerprint).unwrap_or_default(),
        target,
        signal: SignalContext {
            fingerprint: "fp".into(),
            name: "KubePodCrashLooping".into(),
            severity: Some("critical".into()),
            mode: SignalMode::Reactive,
            source: SignalSource::Alertmanager,
            starts_at: now,
            received_at: now,
            labels,
            annotations: Default::default(),
            generator_url: None,
            external_url: None,
            requested: None,
        },
        occurrence_count: 1,
        first_seen: now,
        last_seen: now,
        created_at: now,
        updated_at: now,
        attempts: 0,
        not_before: None,
        state: StageState::default(),
        trace: kubemedic::domain::TraceContext::for_request(id),
    }
}

fn deployment(ns: &str) -> Option<Target> {
    Some(Target::new("Deployment", "web", Some(ns.to_owned())))
}

async fn namespace(k: &Kube, name: &str, labels: Value) {
    k.apply(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "labels": labels}}))
        .await;
}

async fn enrich(
    cluster: Arc<dyn ClusterReader>,
    request: &RemediationRequest,
) -> (kubemedic::domain::Enrichment, StageOutcome) {
    let gate = Arc::new(RegoGate::load(shipped_policies(), limit(), None));
    let stage = EnrichmentStage::new(cluster, gate, "production");
    let outcome = stage.run(request).await.expect("enrichment");
    assert_eq!(outcome.next, Phase::Investigating);
    assert_eq!(outcome.events.len(), 1);
    assert_eq!(outcome.events[0].kind, "enrichment");
    let e = outcome.state.enrichment.clone().expect("enrichment stored");
    assert_eq!(
        outcome.events[0].payload["enrichment"],
        serde_json::to_value(&e).unwrap()
    );
    (e, outcome)
}

fn has_source(e: &kubemedic::domain::Enrichment, needle: &str) -> bool {
    e.sources.iter().any(|s| s.contains(needle))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enrichment_reads_the_namespace_labels() {
    let Some(k) = Kube::new("gate-labels").await else {
        return;
    };
    k.patch(
        "v1",
        "Namespace",
        &k.ns,
        json!({"metadata": {"labels": {
            "kubemedic.io/environment": "staging",
            "kubemedic.io/priority": "P2",
            "kubemedic.io/business-unit": "payments",
            "kubemedic.io/risk-tolerance": "high",
        }}}),
    )
    .await;
    let (e, outcome) = enrich(k.cluster().await, &request(deployment(&k.ns), Some(&k.ns))).await;
    assert_eq!(e.environment, "staging");
    assert_eq!(e.priority.as_deref(), Some("P2"));
    assert_eq!(e.business_unit.as_deref(), Some("payments"));
    assert_eq!(e.risk_tolerance.as_deref(), Some("high"));
    assert!(
        has_source(
            &e,
            &format!(
                "environment: namespace label kubemedic.io/environment on {}",
                k.ns
            )
        ),
        "{:?}",
        e.sources
    );
    assert_eq!(
        outcome.events[0].message,
        "environment staging, priority P2, business unit payments, risk tolerance high"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_enrichment_policy_derives_what_the_labels_do_not_say() {
    let Some(k) = Kube::new("gate-derive").await else {
        return;
    };
    let cluster: Arc<dyn ClusterReader> = k.cluster().await;

    // shop-…-staging: no labels, the name says staging.
    let staging = format!("{}-staging", k.ns);
    namespace(&k, &staging, json!({})).await;
    let (e, _) = enrich(cluster.clone(), &request(deployment(&staging), None)).await;
    assert_eq!(e.environment, "staging");
    assert!(
        has_source(&e, "environment: enrichment policy sha256:"),
        "{:?}",
        e.sources
    );
    assert_eq!(e.priority, None);

    // …-prod: production from the name, and the example policy makes production P1; a label
    // it does not override.
    let prod = format!("{}-prod", k.ns);
    namespace(&k, &prod, json!({"kubemedic.io/business-unit": "retail"})).await;
    let (e, _) = enrich(cluster.clone(), &request(deployment(&prod), None)).await;
    assert_eq!(e.environment, "production");
    assert_eq!(e.priority.as_deref(), Some("P1"));
    assert_eq!(e.business_unit.as_deref(), Some("retail"));
    assert!(
        has_source(&e, "priority: enrichment policy"),
        "{:?}",
        e.sources
    );
    assert!(
        has_source(
            &e,
            "business_unit: namespace label kubemedic.io/business-unit"
        ),
        "{:?}",
        e.sources
    );

    // A label always wins over the name.
    let labelled = format!("{}-qa-prod", k.ns);
    namespace(&k, &labelled, json!({"kubemedic.io/environment": "qa"})).await;
    let (e, _) = enrich(cluster, &request(deployment(&labelled), None)).await;
    assert_eq!(e.environment, "qa");
    assert_eq!(e.priority, None, "the policy's P1 is for production only");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_takes_the_environment_of_the_alert_namespace_else_the_default() {
    let Some(k) = Kube::new("gate-node").await else {
        return;
    };
    k.patch(
        "v1",
        "Namespace",
        &k.ns,
        json!({"metadata": {"labels": {"kubemedic.io/environment": "staging"}}}),
    )
    .await;
    let cluster: Arc<dyn ClusterReader> = k.cluster().await;
    let node = Some(Target::new("Node", "worker-1", None));

    let (e, _) = enrich(cluster.clone(), &request(node.clone(), Some(&k.ns))).await;
    assert_eq!(e.environment, "staging");
    assert!(
        has_source(
            &e,
            "Node worker-1 is cluster-scoped; using the alert's namespace"
        ),
        "{:?}",
        e.sources
    );

    // Nothing known: the default, production.
    let (e, _) = enrich(cluster.clone(), &request(node, None)).await;
    assert_eq!(e.environment, "production");
    assert!(
        has_source(&e, "environment: default (production)"),
        "{:?}",
        e.sources
    );
    assert!(
        has_source(&e, "the alert names no namespace"),
        "{:?}",
        e.sources
    );

    // A namespace that does not exist: defaults, with the reason recorded.
    let gone = format!("{}-gone", k.ns);
    let (e, _) = enrich(cluster, &request(deployment(&gone), Some(&gone))).await;
    assert_eq!(e.environment, "production");
    assert!(
        has_source(&e, &format!("namespace {gone} not found")),
        "{:?}",
        e.sources
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forbidden_namespace_gives_defaults_and_an_unreachable_cluster_waits() {
    let Some(k) = Kube::new("gate-denied").await else {
        return;
    };
    k.patch(
        "v1",
        "Namespace",
        &k.ns,
        json!({"metadata": {"labels": {"kubemedic.io/environment": "staging"}}}),
    )
    .await;
    let nobody = common::kube::kubeconfig("KUBEMEDIC_TEST_NOBODY_KUBECONFIG").unwrap();
    let denied: Arc<dyn ClusterReader> = k.cluster_as(&nobody, Default::default()).await;
    let (e, _) = enrich(denied, &request(deployment(&k.ns), Some(&k.ns))).await;
    assert_eq!(
        e.environment, "production",
        "unknown labels: the safe default"
    );
    assert!(has_source(&e, "forbidden"), "{:?}", e.sources);

    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let cfg = dir.path().join("kc");
    std::fs::write(&cfg, format!("apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: 'https://127.0.0.1:{port}', insecure-skip-tls-verify: true}}}}]\nusers: [{{name: u, user: {{token: x}}}}]\ncontexts: [{{name: c, context: {{cluster: c, user: u}}}}]\ncurrent-context: c\n")).unwrap();
    let down: Arc<dyn ClusterReader> = k.cluster_as(&cfg, Default::default()).await;
    let gate = Arc::new(RegoGate::load(shipped_policies(), limit(), None));
    let stage = EnrichmentStage::new(down, gate, "production");
    match stage.run(&request(deployment(&k.ns), Some(&k.ns))).await {
        Err(StageError::Unavailable {
            dependency,
            message,
        }) => {
            assert_eq!(dependency, "cluster");
            assert!(message.contains(&k.ns), "{message}");
        }
        other => panic!("expected the request to wait for the cluster, got {other:?}"),
    }
}

// ---- whole requests through the worker -------------------------------------------------

/// Investigation and selection are not this test's subject (they are built elsewhere): these
/// stand-ins only move the request on.
struct PassThrough(Phase, Phase);

#[async_trait]
impl Stage for PassThrough {
    fn phase(&self) -> Phase {
        self.0
    }
    async fn run(&self, request: &RemediationRequest) -> Result<StageOutcome, StageError> {
        Ok(StageOutcome {
            next: self.1,
            reason: None,
            state: request.state.clone(),
            events: vec![],
            not_before: None,
        })
    }
}

/// Selection as the investigation leaves it: `restart-deployment-v1` on the alert's own target,
/// with confidence 0.9 (the gate builds its input from this).
struct SelectsRestart;

#[async_trait]
impl Stage for SelectsRestart {
    fn phase(&self) -> Phase {
        Phase::Selecting
    }
    async fn run(&self, request: &RemediationRequest) -> Result<StageOutcome, StageError> {
        let rca = json!({
            "root_cause_analysis": {"summary": "crash loop", "severity": "high"},
            "confidence": 0.9,
            "investigation_outcome": "actionable",
            "actionable": true,
        });
        let mut state = request.state.clone();
        state.analysis = Some(
            serde_json::from_value(json!({
                "rca": rca,
                "root_owner": request.target,
                "investigator": "test",
            }))
            .unwrap(),
        );
        state.selection = Some(
            serde_json::from_value(json!({
                "selected": {"workflow_id": "restart-deployment-v1",
                    "action_type": "RestartDeployment", "version": "1.0.0",
                    "confidence": 0.9, "parameters": {}},
                "merged": rca,
                "outcome": {"kind": "workflow_selected", "next_phase": "Gating", "reason": "selected"},
            }))
            .unwrap(),
        );
        // As the selection stage leaves it: the action proven against the cluster.
        state.proof = Some(
            serde_json::from_value(json!({
                "action_type": "RestartDeployment", "workflow_id": "restart-deployment-v1",
                "proposer": "offline", "point": "selection", "verdict": "proven",
                "obligations": [{"id": "restart.pods-run-but-wedged", "statement": "s",
                    "status": "holds", "evidence": []}],
                "target": request.target, "checked_at": "2026-01-01T00:00:00Z",
            }))
            .unwrap(),
        );
        Ok(StageOutcome {
            next: Phase::Gating,
            reason: None,
            state,
            events: vec![],
            not_before: None,
        })
    }
}

fn timeline_event<'a>(req: &'a Value, kind: &str) -> &'a Value {
    req["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} event: {req:#}"))
}

fn transition_to<'a>(req: &'a Value, to: &str) -> &'a Value {
    req["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "transition" && e["payload"]["to"] == to)
        .unwrap_or_else(|| panic!("no transition to {to}: {req:#}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_staging_incident_is_auto_approved_and_a_production_one_needs_a_human() {
    let Some(k) = Kube::new("gate-e2e").await else {
        return;
    };
    let staging = format!("{}-staging", k.ns);
    namespace(&k, &staging, json!({})).await;
    k.patch(
        "v1",
        "Namespace",
        &k.ns,
        json!({"metadata": {"labels": {"kubemedic.io/environment": "production",
            "kubemedic.io/business-unit": "payments"}}}),
    )
    .await;

    let metrics = Arc::new(Metrics::new());
    let gate = Arc::new(RegoGate::load(
        shipped_policies(),
        limit(),
        Some(metrics.clone()),
    ));
    let d = TestDaemon::start_with(
        |_| {},
        Components {
            stages: vec![
                Arc::new(EnrichmentStage::new(
                    k.cluster().await,
                    gate.clone(),
                    "production",
                )),
                Arc::new(PassThrough(Phase::Investigating, Phase::Selecting)),
                Arc::new(SelectsRestart),
                Arc::new(GateStage::new(
                    gate.clone(),
                    GateSettings {
                        confidence_threshold: 0.8,
                    },
                )),
            ],
            dependencies: vec![Arc::new(PolicyDependency::new(gate.clone()))],
            metrics: Some(metrics),
            approvals: None,
            dashboard: Default::default(),
            reader: None,
            live: Default::default(),
            mirror: None,
            cache: None,
        },
        None,
    )
    .await;

    let mut ids = Vec::new();
    for (i, ns) in [&staging, &k.ns].into_iter().enumerate() {
        let body = common::alert_body(
            "firing",
            "KubePodCrashLooping",
            &[("namespace", ns.as_str()), ("deployment", "web")],
            &format!("fp-{i}"),
            "2026-01-01T00:00:00Z",
        );
        let v: Value = d.send_alertmanager(&body).await.json().await.unwrap();
        ids.push(v["outcomes"][0]["request_id"].as_str().unwrap().to_owned());
    }
    let done = |r: &Value| r["phase"] == "ManualReviewRequired" || r["phase"] == "Failed";

    // Staging: auto-approved, then honestly stopped where execution is not built yet.
    let s = d
        .eventually(&format!("/api/v1/requests/{}", ids[0]), 30, done)
        .await;
    assert_eq!(s["reason"], "execution not available", "{s:#}");
    assert_eq!(s["state"]["enrichment"]["environment"], "staging");
    assert_eq!(s["state"]["gate"]["require_approval"], false);
    assert_eq!(
        s["state"]["gate"]["reason"],
        "auto-approved: staging environment, verified target Deployment web"
    );
    let gate_event = timeline_event(&s, "gate");
    assert_eq!(gate_event["payload"]["input"]["environment"], "staging");
    assert_eq!(
        gate_event["payload"]["input"]["remediation_target"]["namespace"],
        staging.as_str()
    );
    assert_eq!(gate_event["payload"]["output"]["require_approval"], false);
    assert_eq!(transition_to(&s, "Executing")["payload"]["from"], "Gating");

    // Production: approval required for the reason the policy states, then honestly stopped
    // where human approval is not built yet.
    let p = d
        .eventually(&format!("/api/v1/requests/{}", ids[1]), 30, done)
        .await;
    assert_eq!(p["reason"], "human approval not available", "{p:#}");
    let reason = "production environment: production remediations require approval";
    assert_eq!(p["state"]["gate"]["require_approval"], true);
    assert_eq!(p["state"]["gate"]["reason"], reason);
    assert_eq!(
        transition_to(&p, "AwaitingApproval")["payload"]["reason"],
        reason
    );
    let gate_event = timeline_event(&p, "gate");
    assert_eq!(
        gate_event["payload"]["input"]["business_classification"]["business_unit"],
        "payments"
    );
    assert_eq!(
        gate_event["payload"]["output"]["risk_factors"][0]["score"],
        70
    );
    assert!(
        gate_event["message"]
            .as_str()
            .unwrap()
            .starts_with("approval required by policy sha256:"),
        "{gate_event}"
    );

    let m = get(&d, "/metrics").await;
    assert!(
        m.contains("kubemedic_gate_decisions_total{decision=\"auto_approved\"} 1"),
        "{m}"
    );
    assert!(
        m.contains("kubemedic_gate_decisions_total{decision=\"approval_required\"} 1"),
        "{m}"
    );
    assert!(m.contains("kubemedic_gate_degraded 0"), "{m}");
    d.stop().await;
}
