//! The incident scenarios staged live on the real API server tier (kube-apiserver +
//! controller-manager, a fake kubelet for logs) and investigated by the offline investigator
//! through the live API: the same expectations as the snapshot replays.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use common::kube::{Kube, fake_kubelet};
use kubemedic::clock::{Clock, ManualClock};

async fn live(name: &str) {
    let scenario = common::scenarios::all()
        .into_iter()
        .find(|s| s.name == name)
        .unwrap();
    let Some(k) = Kube::new("live").await else {
        return;
    };
    let logs = Arc::new(Mutex::new(HashMap::new()));
    let port = fake_kubelet(logs.clone()).await;
    let staged = (scenario.stage)(&k, &logs, port).await;
    let clock: Arc<dyn Clock> =
        Arc::new(ManualClock::new(chrono::Utc::now() + staged.clock_offset));
    let bad =
        common::scenarios::investigate_and_check(name, k.cluster().await, clock, &staged.alert)
            .await;
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

macro_rules! live {
    ($($test:ident => $name:literal),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $test() {
                live($name).await;
            }
        )*
    };
}

live!(
    crashloop_rollout => "crashloop-rollout",
    oomkilled => "oomkilled",
    imagepull_rollout => "imagepull-rollout",
    pending_insufficient_resources => "pending-insufficient-resources",
    pending_untolerated_taint => "pending-untolerated-taint",
    create_container_config_error => "create-container-config-error",
    container_creating_stuck => "container-creating-stuck",
    terminating_stuck => "terminating-stuck",
    readiness_probe_failing => "readiness-probe-failing",
    service_unreachable => "service-unreachable",
    crashloop_no_recent_change => "crashloop-no-recent-change",
    memory_exhaustion_predicted => "memory-exhaustion-predicted",
    pvc_fill_predicted => "pvc-fill-predicted",
    problem_resolved => "problem-resolved",
    misleading_alert => "misleading-alert",
    prompt_injection_in_logs => "prompt-injection-in-logs",
    gitops_managed => "gitops-managed",
    node_not_ready => "node-not-ready",
);
