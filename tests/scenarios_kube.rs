//! The incident scenarios staged live on the real API server tier (kube-apiserver +
//! controller-manager, a fake kubelet for logs) and investigated by the offline investigator
//! through the live API: the same expectations as the snapshot replays.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

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

common::scenarios::for_each_scenario!(live);

/// The daemon's worker, on the real API server: alert → enrichment (namespace labels) →
/// investigation → selection → gate, then the honest end of the phases not built yet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worker_takes_live_alerts_through_investigation_and_selection_to_the_gate() {
    use serde_json::{Value, json};
    let Some(staging) = Kube::new("wstg").await else {
        return;
    };
    let Some(production) = Kube::new("wprod").await else {
        return;
    };
    staging
        .patch(
            "v1",
            "Namespace",
            &staging.ns,
            json!({"metadata": {"labels": {"kubemedic.io/environment": "staging"}}}),
        )
        .await;
    let scenario = common::scenarios::all()
        .into_iter()
        .find(|s| s.name == "crashloop-rollout")
        .unwrap();
    let logs = Arc::new(Mutex::new(HashMap::new()));
    let port = fake_kubelet(logs.clone()).await;
    let staged_staging = (scenario.stage)(&staging, &logs, port).await;
    let staged_production = (scenario.stage)(&production, &logs, port).await;

    let kubeconfig = staging.kubeconfig.clone();
    let policies = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let tweak = |a: &mut kubemedic::config::DaemonArgs| {
        a.cluster.kubeconfig = Some(kubeconfig.clone());
        a.gate.policy_dir = Some(policies.clone());
    };
    let mut args = kubemedic::config::DaemonArgs::default();
    tweak(&mut args);
    let components =
        kubemedic::daemon::serve_components(&kubemedic::config::Settings::load(&args).unwrap())
            .await;
    let d = common::TestDaemon::start_with(tweak, components, None).await;

    let mut ids = Vec::new();
    for staged in [&staged_staging, &staged_production] {
        let v: Value = d
            .send_alertmanager(&staged.alert.to_string())
            .await
            .json()
            .await
            .unwrap();
        ids.push(v["outcomes"][0]["request_id"].as_str().unwrap().to_owned());
    }
    let terminal = |r: &Value| {
        r["phase"]
            .as_str()
            .and_then(kubemedic::domain::Phase::parse)
            .is_some_and(kubemedic::domain::Phase::is_terminal)
    };
    let auto = d
        .eventually(&format!("/api/v1/requests/{}", ids[0]), 60, terminal)
        .await;
    let gated = d
        .eventually(&format!("/api/v1/requests/{}", ids[1]), 60, terminal)
        .await;

    // Staging: auto-approved by the policy, then execution (not built yet) ends it honestly.
    assert_eq!(
        auto["state"]["enrichment"]["environment"], "staging",
        "{auto:#}"
    );
    assert_eq!(
        auto["state"]["selection"]["selected"]["workflow_id"],
        "rollback-deployment-previous-revision"
    );
    assert_eq!(auto["state"]["gate"]["require_approval"], false, "{auto:#}");
    assert_eq!(auto["reason"], "execution not available");
    // Production: the policy requires approval, for the reason it states.
    assert_eq!(gated["state"]["enrichment"]["environment"], "production");
    assert_eq!(gated["state"]["gate"]["require_approval"], true);
    assert!(
        gated["state"]["gate"]["reason"]
            .as_str()
            .unwrap()
            .contains("production"),
        "{gated:#}"
    );
    assert_eq!(gated["reason"], "human approval not available");

    let transitions: Vec<String> = auto["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "transition")
        .map(|e| e["payload"]["to"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        transitions,
        [
            "Enriching",
            "Investigating",
            "Selecting",
            "Gating",
            "Executing",
            "ManualReviewRequired"
        ]
    );
    let kinds: Vec<&str> = gated["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    for k in ["rca", "selection", "gate"] {
        assert!(kinds.contains(&k), "{k} missing from {kinds:?}");
    }
    let gate_event = gated["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "gate")
        .unwrap();
    assert!(
        gate_event["payload"]["input"]["remediation_target"].is_object()
            && gate_event["payload"]["output"].is_object(),
        "{gate_event}"
    );
    d.stop().await;
}
