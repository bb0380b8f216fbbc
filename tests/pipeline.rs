//! The worker drives requests through their stages: waits for unreachable dependencies,
//! gives up honestly, and fails with the stage's reason. Stages here are scripted; the store,
//! the worker and the HTTP path are real.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use common::{TestDaemon, alert_body};
use kubemedic::daemon::Components;
use kubemedic::domain::Enrichment;
use kubemedic::domain::{Phase, RemediationRequest, Stage, StageError, StageOutcome};
use serde_json::Value;

/// An enricher whose cluster is unreachable for the first `down_for` calls.
struct Enricher {
    calls: AtomicUsize,
    down_for: usize,
}

#[async_trait]
impl Stage for Enricher {
    fn phase(&self) -> Phase {
        Phase::Enriching
    }
    async fn run(&self, request: &RemediationRequest) -> Result<StageOutcome, StageError> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        if n < self.down_for {
            return Err(StageError::Unavailable {
                dependency: "cluster".into(),
                message: "connection refused (127.0.0.1:6443)".into(),
            });
        }
        let mut state = request.state.clone();
        state.enrichment = Some(Enrichment {
            environment: "staging".into(),
            priority: None,
            business_unit: None,
            risk_tolerance: None,
            pinned: vec![],
            sources: vec!["test".into()],
        });
        Ok(StageOutcome {
            next: Phase::Investigating,
            reason: None,
            state,
            events: vec![],
            not_before: None,
        })
    }
}

struct Broken;

#[async_trait]
impl Stage for Broken {
    fn phase(&self) -> Phase {
        Phase::Enriching
    }
    async fn run(&self, _: &RemediationRequest) -> Result<StageOutcome, StageError> {
        Err(StageError::Failed(
            "namespace label kubemedic.io/environment is malformed".into(),
        ))
    }
}

async fn open_one(d: &TestDaemon) -> String {
    let body = alert_body(
        "firing",
        "PodCrash",
        &[("namespace", "shop"), ("pod", "p1")],
        "fp1",
        "2026-01-01T00:00:00Z",
    );
    let v: Value = d.send_alertmanager(&body).await.json().await.unwrap();
    v["outcomes"][0]["request_id"].as_str().unwrap().to_owned()
}

fn kinds(req: &Value) -> Vec<String> {
    req["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn an_unreachable_dependency_makes_the_request_wait_then_end_in_review() {
    let stage = Arc::new(Enricher {
        calls: AtomicUsize::new(0),
        down_for: usize::MAX,
    });
    let d = TestDaemon::start_with(
        |a| a.pipeline.max_wait_seconds = Some(1),
        Components {
            stages: vec![stage.clone()],
            ..Default::default()
        },
        None,
    )
    .await;
    let id = open_one(&d).await;
    let waiting = d
        .eventually(&format!("/api/v1/requests/{id}"), 10, |r| {
            r["waiting"].is_object()
        })
        .await;
    assert_eq!(waiting["phase"], "Enriching");
    assert_eq!(waiting["waiting"]["dependency"], "cluster");
    let done = d
        .eventually(&format!("/api/v1/requests/{id}"), 15, |r| {
            r["phase"] == "ManualReviewRequired"
        })
        .await;
    let reason = done["reason"].as_str().unwrap();
    assert!(reason.starts_with("cluster not available for"), "{reason}");
    assert!(reason.contains("connection refused"), "{reason}");
    assert_eq!(
        kinds(&done).iter().filter(|k| *k == "waiting").count(),
        1,
        "one waiting event, not one per retry"
    );
    assert!(stage.calls.load(Ordering::SeqCst) >= 2);
    d.stop().await;
}

#[tokio::test]
async fn a_dependency_that_comes_back_lets_the_request_continue() {
    let stage = Arc::new(Enricher {
        calls: AtomicUsize::new(0),
        down_for: 1,
    });
    let d = TestDaemon::start_with(
        |_| {},
        Components {
            stages: vec![stage],
            ..Default::default()
        },
        None,
    )
    .await;
    let id = open_one(&d).await;
    let done = d
        .eventually(&format!("/api/v1/requests/{id}"), 15, |r| {
            r["phase"]
                .as_str()
                .is_some_and(|p| Phase::parse(p).is_some_and(Phase::is_terminal))
        })
        .await;
    // The enrichment result is kept; the next stage does not exist yet and says so.
    assert_eq!(done["phase"], "ManualReviewRequired");
    assert_eq!(done["reason"], "investigation not available");
    assert_eq!(done["state"]["enrichment"]["environment"], "staging");
    assert!(done["waiting"].is_null());
    d.stop().await;
}

#[tokio::test]
async fn a_stage_failure_fails_the_request_with_its_reason() {
    let d = TestDaemon::start_with(
        |_| {},
        Components {
            stages: vec![Arc::new(Broken)],
            ..Default::default()
        },
        None,
    )
    .await;
    let id = open_one(&d).await;
    let done = d
        .eventually(&format!("/api/v1/requests/{id}"), 10, |r| {
            r["phase"] == "Failed"
        })
        .await;
    assert_eq!(
        done["reason"],
        "namespace label kubemedic.io/environment is malformed"
    );
    d.stop().await;
}

/// A stage that holds every run until the test lets it go, counting how many run at once.
struct Held {
    runs: AtomicUsize,
    running: AtomicUsize,
    most: AtomicUsize,
    gate: tokio::sync::Semaphore,
}

impl Held {
    fn new() -> Self {
        Self {
            runs: AtomicUsize::new(0),
            running: AtomicUsize::new(0),
            most: AtomicUsize::new(0),
            gate: tokio::sync::Semaphore::new(0),
        }
    }
}

#[async_trait]
impl Stage for Held {
    fn phase(&self) -> Phase {
        Phase::Enriching
    }
    async fn run(&self, request: &RemediationRequest) -> Result<StageOutcome, StageError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        self.gate.acquire().await.unwrap().forget();
        self.running.fetch_sub(1, Ordering::SeqCst);
        Ok(StageOutcome {
            next: Phase::Investigating,
            reason: None,
            state: request.state.clone(),
            events: vec![],
            not_before: None,
        })
    }
}

/// A daemon whose only stage is `held`, with `workers` stage slots and a lease of `lease` s.
async fn held_daemon(held: &Arc<Held>, workers: usize, lease: u64) -> TestDaemon {
    let components = Components {
        stages: vec![held.clone()],
        ..Default::default()
    };
    TestDaemon::start_with(
        |a| {
            a.pipeline.workers = Some(workers);
            a.pipeline.lease_seconds = Some(lease);
        },
        components,
        None,
    )
    .await
}

/// A firing alert for pod `<prefix><i>`, as an Alertmanager body of its own.
fn pod_alert(prefix: &str, i: usize) -> Value {
    let pod = format!("{prefix}{i}");
    let body = alert_body(
        "firing",
        "PodCrash",
        &[("namespace", "shop"), ("pod", pod.as_str())],
        &format!("{prefix}-{i}"),
        "2026-01-01T00:00:00Z",
    );
    serde_json::from_str(&body).unwrap()
}

/// Alerts for pods `<prefix>0` … `<prefix><n-1>` in one delivery: one claim can take them all.
fn one_delivery(prefix: &str, n: usize) -> Value {
    let mut body = pod_alert(prefix, 0);
    for i in 1..n {
        let more = pod_alert(prefix, i)["alerts"][0].clone();
        body["alerts"].as_array_mut().unwrap().push(more);
    }
    body
}

/// Issue 15, item 6: the worker holds many requests at once but runs at most `--workers`
/// stages at a time, and claims no more while a full round of them waits for a slot (they
/// stay free for another replica); on shutdown the ones still waiting for a stage are handed
/// back at once (no lease to lapse), the running ones finish and commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stages_run_within_their_slots_and_waiting_requests_are_handed_back_at_shutdown() {
    use std::time::Duration;
    let held = Arc::new(Held::new());
    // A lease longer than the test: the waiting requests are not handed back for waiting.
    let mut d = held_daemon(&held, 2, 60).await;
    let body = one_delivery("p", 5);
    assert_eq!(d.send_alertmanager(&body.to_string()).await.status(), 200);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while held.runs.load(Ordering::SeqCst) < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "two stages never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // All five are held by this daemon, two in their stage, three waiting for a slot (their
    // move out of Received is made in memory, committed with their stage's step).
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(held.runs.load(Ordering::SeqCst), 2, "a third stage started");
    // A full round of work (as many as the slots) already waits: a sixth request is left for
    // another replica instead of joining the queue here.
    let sixth = pod_alert("p", 5);
    assert_eq!(d.send_alertmanager(&sixth.to_string()).await.status(), 200);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let left = d
        .store
        .claim_batch("other", Duration::from_secs(60), 10)
        .await
        .unwrap();
    assert_eq!(left.len(), 1, "only the sixth is free: {left:?}");
    assert_eq!(
        left[0].signal.labels.get("pod").map(String::as_str),
        Some("p5")
    );
    d.store.release(left[0].id, "other").await.unwrap();

    let running = d.running.take().unwrap();
    running.shutdown();
    held.gate.add_permits(2);
    running.wait().await.expect("clean stop");

    assert_eq!(held.most.load(Ordering::SeqCst), 2);
    assert_eq!(
        held.runs.load(Ordering::SeqCst),
        2,
        "no stage started after the stop"
    );
    let back = d
        .store
        .claim_batch("other", Duration::from_secs(60), 10)
        .await
        .unwrap();
    let phases: Vec<Phase> = back.iter().map(|r| r.phase).collect();
    assert_eq!(
        back.len(),
        6,
        "every request is free again at once: {phases:?}"
    );
    assert_eq!(
        phases
            .iter()
            .filter(|p| **p == Phase::Investigating)
            .count(),
        2,
        "{phases:?}"
    );
    assert_eq!(
        phases.iter().filter(|p| **p == Phase::Received).count(),
        4,
        "handed back as they were stored: {phases:?}"
    );
}

/// Issue 15, item 5: a request that waits a whole lease for a stage slot is handed back, and
/// a replica whose slots are all busy claims at most one round of waiting work: the rest is
/// free for another replica instead of queueing where nothing can start it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_that_wait_a_lease_for_a_slot_are_handed_back_to_other_replicas() {
    use std::time::Duration;
    let held = Arc::new(Held::new());
    // A short lease, but long enough that a loaded machine does not let the running stage's
    // own claim lapse between its renewals (every lease / 3).
    let mut d = held_daemon(&held, 1, 3).await;
    let body = one_delivery("w", 6);
    assert_eq!(d.send_alertmanager(&body.to_string()).await.status(), 200);
    // One stage runs (and is held); the five others wait for its slot, are handed back after
    // a lease, and this daemon takes back at most one of them at a time.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while held.runs.load(Ordering::SeqCst) < 1 {
        assert!(std::time::Instant::now() < deadline, "no stage started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let taken = loop {
        let got = d
            .store
            .claim_batch("other", Duration::from_secs(60), 10)
            .await
            .unwrap();
        if got.len() >= 4 {
            break got;
        }
        for r in &got {
            d.store.release(r.id, "other").await.unwrap();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the waiting requests stayed with the saturated daemon"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        taken.iter().all(|r| r.phase == Phase::Received),
        "{taken:?}"
    );
    assert_eq!(held.runs.load(Ordering::SeqCst), 1, "only one stage ran");

    let running = d.running.take().unwrap();
    running.shutdown();
    held.gate.add_permits(1);
    running.wait().await.expect("clean stop");
}
