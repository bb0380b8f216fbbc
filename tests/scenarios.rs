//! The incident scenarios replayed from their captured snapshots through the offline
//! investigator: each must give the expected target, outcome and workflow. (The same
//! scenarios are staged live on the real API server tier by tests/scenarios_kube.rs.)

mod common;

use std::sync::Arc;

use kubemedic::clock::{Clock, ManualClock};
use kubemedic::cluster::SnapshotCluster;
use serde_json::Value;

async fn replay(name: &str) {
    common::init();
    let dir = common::scenarios::dir(name);
    let snap = SnapshotCluster::load(&dir.join("snapshot.yaml")).unwrap();
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(snap.captured_at().unwrap()));
    let alert: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("alert.json")).unwrap()).unwrap();
    let bad = common::scenarios::investigate_and_check(name, Arc::new(snap), clock, &alert).await;
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

macro_rules! scenarios {
    ($($test:ident => $name:literal),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $test() {
                replay($name).await;
            }
        )*

        #[test]
        fn every_scenario_folder_has_a_test() {
            let names = [$($name),*];
            for entry in std::fs::read_dir(common::scenarios::dir("")).unwrap() {
                let n = entry.unwrap().file_name().into_string().unwrap();
                assert!(names.contains(&n.as_str()), "scenario folder {n} has no test");
            }
            for s in common::scenarios::all() {
                assert!(names.contains(&s.name), "staged scenario {} has no test", s.name);
            }
        }
    };
}

scenarios!(
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
