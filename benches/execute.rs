//! Execution and verification latency on the real API server tier. Run it with
//! `scripts/bench-execute`, which starts a throwaway kube-apiserver (+ controller-manager) and
//! PostgreSQL; figures go in docs/benchmarks.md ("Execution and verification").
//!
//! The Executing and Verifying stages are driven directly (as the worker calls them), each
//! sample on its own Deployment so no guardrail or lock interferes, on SQLite and on
//! PostgreSQL. What each row includes:
//!
//! - **execute: scale** — `ExecutionStage::run` for `scale-replicas` (one builtin write): the
//!   execution lock and the durable intent in the store, the target's spec hash, the stamped
//!   write to the API server, the post-write hash, the intent's completion. The pipeline's
//!   commit of the resulting transition is not included (the ingest benchmark measures commits).
//! - **execute: rolling restart** — the same for `restart-rolling`: the restart write, then
//!   `wait_rollout` until the Deployment reports the new pods available. The benchmark plays
//!   the kubelet (binds each new pod and reports it ready as soon as it appears, polling every
//!   50 ms) and `wait_rollout` polls every 250 ms (once a second after 10 s), so this row is
//!   dominated by the controllers, the benchmark's kubelet and that poll interval, not by
//!   kubemedic's own work.
//! - **verify** — `VerificationStage::run` once the window has passed (window 0): the target,
//!   its pods, the resolved-alert lookup in the store, the score, the history entry written.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench code: a failed assumption fails the run

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use common::kube::Kube;
use kubemedic::catalog::Catalog;
use kubemedic::clock::SystemClock;
use kubemedic::domain::{Phase, RemediationRequest, Stage, Target};
use kubemedic::execute::{ExecuteSettings, ExecutionStage};
use kubemedic::store::Store;
use kubemedic::verify::{VerificationStage, VerifySettings};
use serde_json::json;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A request in `Executing` whose selection is `workflow` on Deployment `name`.
fn request(
    k: &Kube,
    name: &str,
    workflow: &str,
    action_type: &str,
    params: serde_json::Value,
) -> RemediationRequest {
    let body = common::alert_body(
        "firing",
        "KubePodCrashLooping",
        &[("namespace", k.ns.as_str()), ("deployment", name)],
        &format!("fp-{}", uuid::Uuid::new_v4().simple()),
        "2026-01-01T00:00:00Z",
    );
    let signals = kubemedic::ingest::alertmanager::parse(body.as_bytes()).unwrap();
    let mut req = RemediationRequest::for_signal(&signals[0], Phase::Executing, Utc::now());
    let target = Target::new("Deployment", name, Some(k.ns.clone()));
    let rca = json!({"root_cause_analysis": {"summary": "s", "severity": "high"},
        "confidence": 0.9, "investigation_outcome": "actionable", "actionable": true});
    req.state.analysis = Some(
        serde_json::from_value(json!({"rca": rca, "root_owner": target, "investigator": "bench"}))
            .unwrap(),
    );
    req.state.selection = Some(
        serde_json::from_value(json!({
            "selected": {"workflow_id": workflow, "action_type": action_type,
                "version": "1.0.0", "confidence": 0.9, "parameters": params},
            "merged": rca,
            "outcome": {"kind": "workflow_selected", "next_phase": "Gating", "reason": "r"},
        }))
        .unwrap(),
    );
    req
}

async fn deployment(k: &Kube, name: &str) {
    k.apply(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name, "bench": "execute"}},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name, "bench": "execute"}},
                "spec": {"containers": [{"name": "web", "image": "shop/web:1"}]}}}
    }))
    .await;
}

/// Until the background kubelet has the Deployment's pod running.
async fn available(k: &Kube, name: &str) {
    k.wait("the Deployment available", 60, || async {
        let d = k.get("apps/v1", "Deployment", name).await;
        (d["status"]["availableReplicas"].as_i64() == Some(1)).then_some(())
    })
    .await;
}

#[derive(Default)]
struct Samples(Vec<Duration>);

impl Samples {
    fn row(&mut self, what: &str) -> String {
        self.0.sort();
        let at = |q: f64| {
            let i = ((self.0.len() as f64 - 1.0) * q).round() as usize;
            self.0[i]
        };
        let ms = |d: Duration| format!("{:.1}", d.as_secs_f64() * 1000.0);
        format!(
            "| {what} | {} | {} | {} | {} |",
            self.0.len(),
            ms(at(0.5)),
            ms(at(0.95)),
            ms(at(1.0))
        )
    }
}

async fn run_backend(label: &str, k: &Kube, store: Arc<dyn Store>, n: usize) {
    let cluster = k.cluster().await;
    let execute = ExecutionStage::new(
        cluster.clone(),
        cluster.clone(),
        store.clone(),
        kubemedic::live::Live::new(Catalog::builtin().unwrap()),
        Arc::new(SystemClock),
        // The benchmark never commits a request's terminal phase (which releases its
        // execution lock), so the concurrency caps are lifted: each sample runs alone anyway.
        ExecuteSettings {
            max_concurrent: usize::MAX,
            max_concurrent_per_namespace: usize::MAX,
            ..Default::default()
        },
    );
    let verify = VerificationStage::new(
        cluster.clone(),
        store,
        Arc::new(SystemClock),
        VerifySettings {
            window: chrono::Duration::zero(),
            ..Default::default()
        },
    );
    let (mut scale, mut restart, mut verified) =
        (Samples::default(), Samples::default(), Samples::default());
    for i in 0..n {
        let name = format!("{label}-{i}");
        deployment(k, &name).await;
        available(k, &name).await;

        let req = request(
            k,
            &name,
            "scale-replicas",
            "ScaleReplicas",
            json!({"REPLICAS": "2"}),
        );
        let started = Instant::now();
        let out = execute.run(&req).await.unwrap();
        scale.0.push(started.elapsed());
        assert_eq!(out.next, Phase::Verifying, "{:?}", out.reason);

        let mut done = req.clone();
        done.phase = out.next;
        done.state = out.state;
        let started = Instant::now();
        let out = verify.run(&done).await.unwrap();
        verified.0.push(started.elapsed());
        assert_eq!(out.next, Phase::Completed, "{:?}", out.reason);

        let other = format!("{label}-r{i}");
        deployment(k, &other).await;
        available(k, &other).await;
        let req = request(k, &other, "restart-rolling", "RestartDeployment", json!({}));
        let started = Instant::now();
        let out = execute.run(&req).await.unwrap();
        restart.0.push(started.elapsed());
        assert_eq!(out.next, Phase::Verifying, "{:?}", out.reason);
    }
    println!(
        "{}",
        scale.row(&format!("{label}: execute: scale (1 write)"))
    );
    println!(
        "{}",
        restart.row(&format!(
            "{label}: execute: rolling restart (write + rollout wait)"
        ))
    );
    println!(
        "{}",
        verified.row(&format!("{label}: verify (after the window)"))
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n = env_or("EXECUTE_BENCH_SAMPLES", 20);
    let Some(k) = Kube::new("bench").await else {
        panic!("no API server: run scripts/bench-execute");
    };
    let node = format!("{}-node", k.ns);
    k.node(&node, 1, json!([])).await;
    // The kubelet: every new pod of the benchmark is bound and reported ready at once.
    let kubelet = {
        let k = k.clone_handle();
        let node = node.clone();
        tokio::spawn(async move {
            loop {
                common::scenarios::run_unscheduled(&k, "bench=execute", &node).await;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    println!("Execution and verification latency, {n} samples per row");
    println!(
        "machine: {} cores\n",
        std::thread::available_parallelism().map_or(0, |p| p.get())
    );
    println!("| stage | samples | p50 ms | p95 ms | max ms |");
    println!("|---|---|---|---|---|");
    let (_dir, url) = common::sqlite_url();
    let sqlite = common::open_store(&url, Arc::new(SystemClock)).await;
    run_backend("sqlite", &k, sqlite, n).await;
    match common::fresh_postgres().await {
        Some(url) => {
            let pg = common::open_store(&url, Arc::new(SystemClock)).await;
            run_backend("postgres", &k, pg, n).await;
        }
        None => println!("(PostgreSQL not available: skipped)"),
    }
    kubelet.abort();
}
