//! The Verifying stage reading the monitoring systems, driven directly on a store and a cluster
//! snapshot where the target is healthy: a real Alertmanager decides whether the alert still
//! fires (by its fingerprint, or by the labels when kubemedic computed the fingerprint), a real
//! Prometheus re-evaluates the alert's own expression (a series counts when the labels it shares
//! with the alert agree), and neither an unreachable Alertmanager nor an unreachable Prometheus
//! ever counts as resolved. The test script starts both (`scripts/alertmanager.sh`,
//! `scripts/prometheus.sh`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

mod common;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use kubemedic::clock::SystemClock;
use kubemedic::cluster::SnapshotCluster;
use kubemedic::domain::{
    Assessment, AssessmentReason, EngineKind, Execution, ExecutionOutcome, Phase,
    RemediationRequest, SignalMode, Stage, Target,
};
use kubemedic::monitoring::Endpoint;
use kubemedic::verify::{VerificationStage, VerifySettings};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A healthy Deployment `shop/web`: its one pod ready, never restarted.
const CLUSTER: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop, labels: {app: web}}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: "shop/web:1"}]}
---
apiVersion: v1
kind: Pod
metadata: {name: web-1, namespace: shop, labels: {app: web}}
spec: {containers: [{name: web, image: "shop/web:1"}]}
status:
  phase: Running
  conditions: [{type: Ready, status: "True"}]
  containerStatuses: [{name: web, ready: true, restartCount: 0, state: {running: {}}}]
"#;

/// An Alertmanager webhook alert for `shop/web`, as it would arrive: `fingerprint` empty makes
/// kubemedic compute its own; `expr` becomes the `g0.expr` of the generator URL.
fn request(
    name: &str,
    labels: &[(&str, &str)],
    fingerprint: &str,
    expr: Option<&str>,
) -> RemediationRequest {
    let body = common::alert_body("firing", name, labels, fingerprint, "2026-01-01T00:00:00Z");
    let mut body: Value = serde_json::from_str(&body).unwrap();
    let mut generator = reqwest::Url::parse("http://prometheus.test/graph").unwrap();
    if let Some(expr) = expr {
        generator
            .query_pairs_mut()
            .append_pair("g0.expr", expr)
            .append_pair("g0.tab", "1");
    }
    body["alerts"][0]["generatorURL"] = json!(generator.as_str());
    let signals = kubemedic::ingest::alertmanager::parse(body.to_string().as_bytes()).unwrap();
    let mut req = RemediationRequest::for_signal(&signals[0], Phase::Verifying, Utc::now());
    let started = Utc::now() - chrono::Duration::minutes(10);
    req.state.execution = Some(Execution {
        workflow_id: "restart-rolling".into(),
        workflow_version: "1.0.0".into(),
        action_type: "RestartDeployment".into(),
        engine: EngineKind::Builtin,
        target: Target::new("Deployment", "web", Some("shop".into())),
        parameters: Default::default(),
        dry_run: false,
        pre_spec_hash: None,
        pre_drift_hash: None,
        before: None,
        post_spec_hash: None,
        post_drift_hash: None,
        started_at: started,
        finished_at: started + chrono::Duration::seconds(30),
        steps: vec![],
        outcome: ExecutionOutcome::Succeeded,
        message: "restarted".into(),
        proposal: None,
    });
    req
}

/// Verification with no window to wait, asking the systems given.
fn settings(alertmanager: Option<&str>, prometheus: Option<&str>) -> VerifySettings {
    VerifySettings {
        window: chrono::Duration::zero(),
        alertmanager: alertmanager.map(|u| Endpoint::parse(u).unwrap()),
        prometheus: prometheus.map(|u| Endpoint::parse(u).unwrap()),
        ..Default::default()
    }
}

/// Run the Verifying stage on `req` (its own store, the healthy snapshot) and return what it
/// assessed.
async fn assess(req: &RemediationRequest, settings: VerifySettings) -> Assessment {
    common::init();
    let (_dir, url) = common::sqlite_url();
    let store = common::open_store(&url, Arc::new(SystemClock)).await;
    let cluster = Arc::new(SnapshotCluster::from_yaml(CLUSTER).unwrap());
    let out = VerificationStage::new(cluster, store, Arc::new(SystemClock), settings)
        .run(req)
        .await
        .unwrap();
    assert_eq!(out.next, Phase::Completed, "{:?}", out.reason);
    let a = out.state.assessment.unwrap();
    assert_eq!(a.health_score, Some(1.0), "the snapshot is healthy: {a:?}");
    a
}

fn detail<'a>(a: &'a Assessment, part: &str) -> &'a str {
    a.details
        .iter()
        .find(|d| d.starts_with(&format!("{part}:")))
        .unwrap_or_else(|| panic!("no {part} detail in {:?}", a.details))
}

/// An address where nothing listens.
async fn closed_port() -> String {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    format!("http://{addr}")
}

/// Poll `check` every 200 ms until it gives a value (or fail after `secs`).
async fn eventually<T, F, Fut>(what: &str, secs: u64, check: F) -> T
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: not within {secs}s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Post one alert to Alertmanager as Prometheus would.
async fn post_alert(am: &str, labels: &Value, starts_at: DateTime<Utc>, ends_at: DateTime<Utc>) {
    let r = reqwest::Client::new()
        .post(format!("{am}/api/v2/alerts"))
        .json(&json!([{
            "labels": labels,
            "annotations": {"summary": "verification test"},
            "startsAt": rfc3339(starts_at),
            "endsAt": rfc3339(ends_at),
        }]))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
}

/// Alertmanager's active alerts named `name`, as (fingerprint, labels).
async fn active(am: &str, name: &str) -> Vec<Value> {
    reqwest::Client::new()
        .get(format!("{am}/api/v2/alerts"))
        .query(&[("filter", format!("alertname=\"{name}\""))])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alertmanager_says_whether_the_alert_still_fires() {
    common::init();
    let Some(am) = common::component("KUBEMEDIC_TEST_ALERTMANAGER_URL", "Alertmanager") else {
        return;
    };
    let name = format!("KubemedicVerify{}", uuid::Uuid::new_v4().simple());
    let labels = [
        ("namespace", "shop"),
        ("deployment", "web"),
        ("severity", "warning"),
    ];
    let mut all: serde_json::Map<String, Value> = labels
        .iter()
        .map(|(k, v)| ((*k).into(), json!(v)))
        .collect();
    all.insert("alertname".into(), json!(name));
    let all = Value::Object(all);
    let started = Utc::now() - chrono::Duration::minutes(15);
    post_alert(&am, &all, started, Utc::now() + chrono::Duration::hours(1)).await;
    // The fingerprint Alertmanager's webhook would carry for it.
    let fingerprint = eventually("Alertmanager lists the alert", 30, || async {
        active(&am, &name)
            .await
            .first()
            .and_then(|a| a["fingerprint"].as_str().map(str::to_owned))
    })
    .await;
    let settings = settings(Some(&am), None);

    let firing = assess(
        &request(&name, &labels, &fingerprint, None),
        settings.clone(),
    )
    .await;
    assert_eq!(firing.alert_score, Some(0.0));
    assert!(!firing.signal_resolved);
    assert!(
        detail(&firing, "alert").contains("still firing in Alertmanager"),
        "{:?}",
        firing.details
    );
    assert_eq!(firing.reason, AssessmentReason::Full);
    assert_eq!(firing.score, Some(0.53), "(0.40 × 1 + 0.35 × 0) / 0.75");

    // A webhook without a fingerprint (kubemedic computes its own): the labels identify it.
    let computed = request(&name, &labels, "", None);
    assert_ne!(computed.signal.fingerprint, fingerprint);
    let by_labels = assess(&computed, settings.clone()).await;
    assert_eq!(by_labels.alert_score, Some(0.0), "{:?}", by_labels.details);

    // Resolved: Prometheus sends the alert again with an end in the past.
    post_alert(
        &am,
        &all,
        started,
        Utc::now() - chrono::Duration::minutes(1),
    )
    .await;
    eventually("Alertmanager no longer lists the alert", 30, || async {
        active(&am, &name).await.is_empty().then_some(())
    })
    .await;
    let resolved = assess(
        &request(&name, &labels, &fingerprint, None),
        settings.clone(),
    )
    .await;
    assert_eq!(resolved.alert_score, Some(1.0));
    assert!(resolved.signal_resolved);
    assert_eq!(
        detail(&resolved, "alert"),
        "alert: Alertmanager reports it no longer firing"
    );
    assert_eq!(resolved.score, Some(1.0));
    assert!(resolved.effective);
    let by_labels = assess(&request(&name, &labels, "", None), settings).await;
    assert_eq!(by_labels.alert_score, Some(1.0), "{:?}", by_labels.details);
}

/// The `job` of Prometheus' scrape of itself, once the scrape has `samples` samples of `up`.
async fn self_scrape_job(prom: &str, samples: u32) -> String {
    let client = reqwest::Client::new();
    eventually("Prometheus has scraped itself", 60, || async {
        let answer: Value = client
            .get(format!("{prom}/api/v1/query"))
            .query(&[("query", format!("count_over_time(up[1m]) >= {samples}"))])
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        answer["data"]["result"][0]["metric"]["job"]
            .as_str()
            .map(str::to_owned)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_re_evaluates_the_alerts_own_condition() {
    common::init();
    let Some(prom) = common::component("KUBEMEDIC_TEST_PROMETHEUS_URL", "Prometheus") else {
        return;
    };
    // predict_linear needs two samples in its range.
    let job = self_scrape_job(&prom, 2).await;
    let settings = settings(None, Some(&prom));
    let job_labels = [("namespace", "shop"), ("deployment", "web"), ("job", &job)];

    // Nothing matches: the condition no longer holds.
    let expr = r#"up{job="none"} == 1"#;
    let gone = assess(
        &request("TargetUp", &job_labels, "", Some(expr)),
        settings.clone(),
    )
    .await;
    assert_eq!(gone.metrics_score, Some(1.0), "{:?}", gone.details);
    assert_eq!(
        detail(&gone, "metrics"),
        format!("metrics: the alert's condition no longer holds in Prometheus (expr `{expr}`)")
    );
    assert_eq!(gone.reason, AssessmentReason::Full);
    assert_eq!(gone.score, Some(0.65), "0.40 × 1 + 0.35 × 0 + 0.25 × 1");

    // The alert's own series still matches.
    let holds = assess(
        &request("TargetUp", &job_labels, "", Some("up == 1")),
        settings.clone(),
    )
    .await;
    assert_eq!(holds.metrics_score, Some(0.0), "{:?}", holds.details);
    assert!(
        detail(&holds, "metrics").contains("still holds in Prometheus for 1 series"),
        "{:?}",
        holds.details
    );
    assert_eq!(holds.score, Some(0.4));
    assert!(!holds.effective);

    // A series whose shared label differs is somebody else's.
    let other = [
        ("namespace", "shop"),
        ("deployment", "web"),
        ("job", "other"),
    ];
    let elsewhere = assess(
        &request("TargetUp", &other, "", Some("up == 1")),
        settings.clone(),
    )
    .await;
    assert_eq!(
        elsewhere.metrics_score,
        Some(1.0),
        "{:?}",
        elsewhere.details
    );

    // A prediction is re-evaluated the same way.
    let predicted = request(
        "PredictedTargetUp",
        &job_labels,
        "",
        Some("predict_linear(up[1m], 3600) < 2"),
    );
    assert_eq!(predicted.signal.mode, SignalMode::Proactive);
    let predicted = assess(&predicted, settings.clone()).await;
    assert_eq!(
        predicted.metrics_score,
        Some(0.0),
        "{:?}",
        predicted.details
    );

    // No expression: nothing to re-evaluate, and the assessment says it is partial.
    let silent = assess(
        &request("TargetUp", &job_labels, "", None),
        settings.clone(),
    )
    .await;
    assert_eq!(silent.metrics_score, None);
    assert!(
        detail(&silent, "metrics").contains("no expression"),
        "{:?}",
        silent.details
    );
    assert_eq!(silent.reason, AssessmentReason::Partial);
    assert_eq!(silent.score, Some(0.53));

    // A query Prometheus refuses is not assessed either, with Prometheus' own reason.
    let broken = assess(
        &request("TargetUp", &job_labels, "", Some("up ==")),
        settings,
    )
    .await;
    assert_eq!(broken.metrics_score, None);
    assert!(
        detail(&broken, "metrics").contains("HTTP 400")
            && detail(&broken, "metrics").contains("parse error"),
        "{:?}",
        broken.details
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_monitoring_is_never_a_resolved_alert() {
    let (am, prom) = (closed_port().await, closed_port().await);
    let req = request(
        "TargetUp",
        &[("namespace", "shop"), ("deployment", "web"), ("job", "api")],
        "0123456789abcdef",
        Some("up == 0"),
    );
    let a = assess(&req, settings(Some(&am), Some(&prom))).await;
    assert_eq!(a.alert_score, Some(0.0));
    assert!(!a.signal_resolved);
    let alert = detail(&a, "alert");
    assert!(
        alert.contains("no answer from Alertmanager")
            && alert.contains("could not be reached")
            && alert.contains("notifications alone count"),
        "{alert}"
    );
    assert_eq!(a.metrics_score, None);
    let metrics = detail(&a, "metrics");
    assert!(
        metrics.starts_with("metrics: not assessed: Prometheus at ")
            && metrics.contains("could not be reached"),
        "{metrics}"
    );
    assert_eq!(a.reason, AssessmentReason::Partial);
    assert_eq!(
        a.score,
        Some(0.53),
        "health and alert only: (0.40 × 1) / 0.75"
    );
    assert!(!a.effective);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alertmanager_is_not_asked_about_a_signal_it_never_saw() {
    // Its silence about a native signal would prove nothing; nor is it contacted.
    let body = json!({
        "name": "PredictedMemoryExhaustion",
        "target": {"kind": "Deployment", "name": "web", "namespace": "shop"},
        "generator_url": "http://prometheus.test/graph",
    });
    let signal = kubemedic::ingest::native::parse(body.to_string().as_bytes(), Utc::now()).unwrap();
    let mut req = RemediationRequest::for_signal(&signal, Phase::Verifying, Utc::now());
    req.state.execution = request("X", &[], "", None).state.execution;
    let a = assess(&req, settings(Some(&closed_port().await), None)).await;
    assert_eq!(a.alert_score, Some(0.0));
    assert_eq!(
        detail(&a, "alert"),
        "alert: no resolved notification since the remediation (not an Alertmanager alert, so \
         Alertmanager was not asked)"
    );
    assert_eq!(a.reason, AssessmentReason::Full);
}

/// One HTTP exchange on a local port: the request as received, and `body` as the answer.
async fn one_exchange(body: &'static str) -> (String, tokio::task::JoinHandle<String>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let (mut conn, _) = listener.accept().await.unwrap();
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = conn.read(&mut buf).await.unwrap();
            assert!(n > 0, "connection closed mid-request");
            seen.extend_from_slice(&buf[..n]);
        }
        let answer = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
             connection: close\r\n\r\n{body}",
            body.len()
        );
        conn.write_all(answer.as_bytes()).await.unwrap();
        String::from_utf8(seen).unwrap()
    });
    (format!("127.0.0.1:{}", addr.port()), task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_in_the_url_go_as_basic_auth_and_nowhere_else() {
    let (addr, seen) = one_exchange("[]").await;
    let req = request(
        "TargetUp",
        &[("namespace", "shop"), ("deployment", "web")],
        "0123456789abcdef",
        None,
    );
    let a = assess(
        &req,
        settings(Some(&format!("http://km:s3cr%40t@{addr}/am/")), None),
    )
    .await;
    assert_eq!(a.alert_score, Some(1.0), "{:?}", a.details);
    let request = seen.await.unwrap();
    let first = request.lines().next().unwrap();
    assert!(
        first.starts_with("GET /am/api/v2/alerts?") && first.contains("active=true"),
        "{first}"
    );
    assert!(!first.contains("s3cr"), "{first}");
    // base64("km:s3cr@t")
    assert!(
        request
            .to_ascii_lowercase()
            .contains("authorization: basic a206cznjckb0"),
        "{request}"
    );
    let shown = serde_json::to_string(&a).unwrap();
    assert!(!shown.contains("s3cr"), "{shown}");
}

/// `shop/web` healthy and settled: its desired state met, its one pod ready for an hour.
const SETTLED: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop, labels: {app: web}, generation: 1}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: "shop/web:1"}]}
status: {observedGeneration: 1, replicas: 1, updatedReplicas: 1, readyReplicas: 1, availableReplicas: 1}
---
apiVersion: v1
kind: Pod
metadata: {name: web-1, namespace: shop, labels: {app: web}, creationTimestamp: "2026-01-01T00:00:00Z"}
spec: {containers: [{name: web, image: "shop/web:1"}]}
status:
  phase: Running
  startTime: "2026-01-01T00:00:00Z"
  conditions: [{type: Ready, status: "True", lastTransitionTime: "2026-01-01T00:00:10Z"}]
  containerStatuses: [{name: web, ready: true, restartCount: 0, state: {running: {startedAt: "2026-01-01T00:00:05Z"}}}]
"#;

/// "Resolved" on an alert whose condition the cluster's objects cannot show (a scrape target
/// down: `up`) is proven only when Prometheus, evaluating the alert's own expression now, finds
/// no series of it; without Prometheus, with the condition still holding, or with Prometheus
/// unreachable, it is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_decides_whether_an_up_alert_is_resolved() {
    use kubemedic::catalog::Catalog;
    use kubemedic::domain::{ProofVerdict, Proposer};
    use kubemedic::monitoring::PrometheusClient;
    use kubemedic::prove::Prover;

    common::init();
    let Some(prom) = common::component("KUBEMEDIC_TEST_PROMETHEUS_URL", "Prometheus") else {
        return;
    };
    let job = self_scrape_job(&prom, 1).await;
    let cluster = Arc::new(SnapshotCluster::from_yaml(SETTLED).unwrap());
    let target = Target::new("Deployment", "web", Some("shop".into()));
    let labels = [("namespace", "shop"), ("deployment", "web"), ("job", &job)];
    let resolved = |prometheus: Option<String>, expr: String| {
        let cluster = cluster.clone();
        let target = target.clone();
        let req = request("TargetDown", &labels, "", Some(&expr));
        async move {
            let prometheus = prometheus
                .map(|u| Arc::new(PrometheusClient::new(Endpoint::parse(&u).unwrap()).unwrap()));
            let proof = Prover::new(
                cluster,
                None,
                kubemedic::live::Live::new(Catalog::builtin().unwrap()),
                Arc::new(SystemClock),
            )
            .with_prometheus(prometheus)
            .prove_resolved(&target, &req.signal, Proposer::Offline)
            .await
            .unwrap();
            let condition = proof
                .obligations
                .iter()
                .find(|o| o.id == "resolved.condition-observable")
                .unwrap()
                .clone();
            (proof, condition)
        }
    };
    let down = format!(r#"up{{job="{job}"}} == 0"#);

    // The target is scraped again: `up == 0` holds for none of the alert's series.
    let (proof, condition) = resolved(Some(prom.clone()), down.clone()).await;
    assert_eq!(
        proof.verdict,
        ProofVerdict::Proven,
        "{:#?}",
        proof.obligations
    );
    assert!(
        condition.evidence.iter().any(|e| e.contains(&format!(
            "Prometheus, asked now, evaluates the alert's expression `{down}` to no series of this alert"
        ))),
        "{condition:?}"
    );

    // Without Prometheus the objects cannot show `up`: not shown resolved.
    let (proof, condition) = resolved(None, down.clone()).await;
    assert_eq!(proof.verdict, ProofVerdict::Refuted);
    assert!(!condition.holds(), "{condition:?}");
    assert!(
        condition.evidence[0].contains("measurements the cluster's objects do not show"),
        "{condition:?}"
    );

    // Still holding for the alert's own series (here: the target's `up == 1`).
    let holding = format!(r#"up{{job="{job}"}} == 1"#);
    let (proof, condition) = resolved(Some(prom.clone()), holding.clone()).await;
    assert_eq!(proof.verdict, ProofVerdict::Refuted);
    assert!(
        condition.evidence.iter().any(|e| e.contains(&format!(
            "still finds the alert's expression `{holding}` holding for 1 series"
        ))),
        "{condition:?}"
    );

    // A Prometheus that holds no series of what the expression reads (not the alert's
    // Prometheus) evaluates it to nothing: that proves nothing.
    let elsewhere = r#"kubemedic_queue_depth{job="shop"} > 100"#.to_owned();
    let (proof, condition) = resolved(Some(prom.clone()), elsewhere.clone()).await;
    assert_eq!(proof.verdict, ProofVerdict::Refuted);
    assert!(
        condition.evidence.iter().any(|e| e.contains(
            "but Prometheus holds no series of `kubemedic_queue_depth` at all: it cannot be the Prometheus that evaluates this alert"
        )),
        "{condition:?}"
    );

    // Prometheus unreachable: never resolved.
    let (proof, condition) = resolved(Some(closed_port().await), down).await;
    assert_eq!(proof.verdict, ProofVerdict::Refuted);
    assert!(
        condition
            .evidence
            .iter()
            .any(|e| e.starts_with("Prometheus could not say whether the condition still holds")),
        "{condition:?}"
    );
}
