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

/// `kubemedic investigate --snapshot` (no LLM configured): the JSON contract carries the
/// same target, outcome and workflow, and the gate's decision when a workflow was selected.
fn cli(name: &str) {
    let dir = common::scenarios::dir(name);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kubemedic"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["investigate", "--alert"])
        .arg(dir.join("alert.json"))
        .arg("--snapshot")
        .arg(dir.join("snapshot.yaml"))
        .env_remove("KUBEMEDIC_LLM")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let record: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    for key in ["phase", "reason", "rca", "selection", "gate"] {
        assert!(record.get(key).is_some(), "{key} missing from {record}");
    }
    let want = common::scenarios::expected(name);
    let rca = &record["rca"];
    assert_eq!(
        rca["remediation_target"]["kind"], want["target"]["kind"],
        "{record}"
    );
    if let Some(n) = want["target"].get("name") {
        assert_eq!(&rca["remediation_target"]["name"], n, "{record}");
    }
    for key in [
        "summary",
        "severity",
        "confidence",
        "investigation_outcome",
        "contributing_factors",
    ] {
        assert!(rca.get(key).is_some(), "rca.{key} missing from {record}");
    }
    if let Some(o) = want.get("investigation_outcome") {
        assert_eq!(&rca["investigation_outcome"], o, "{record}");
    }
    match want["workflow_id"].as_str() {
        Some(id) => {
            assert_eq!(record["selection"]["workflow_id"], id, "{record}");
            assert!(
                record["selection"]["parameters"].is_object()
                    && record["selection"]["confidence"].is_number()
            );
            let gate = &record["gate"];
            assert!(
                gate["require_approval"].is_boolean() && gate["reason"].is_string(),
                "{record}"
            );
            // The scenario namespaces carry no environment label: production, the safe side.
            assert_eq!(gate["require_approval"], true, "{record}");
            assert_eq!(record["phase"], "AwaitingApproval", "{record}");
        }
        None => {
            assert!(
                record["selection"].is_null() && record["gate"].is_null(),
                "{record}"
            );
            assert_eq!(record["phase"], want["phase"], "{record}");
        }
    }
}

macro_rules! scenarios {
    ($($test:ident => $name:literal),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $test() {
                replay($name).await;
                cli($name);
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
