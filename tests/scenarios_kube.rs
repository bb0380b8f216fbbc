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

/// The daemon as `serve` assembles it, on the real API server: a bad rollout in a staging
/// namespace goes alert → enrichment → investigation → selection → auto-approved rollback →
/// verification → Completed with its score and a history entry, exactly once; the same
/// incident in production waits for a human. The test acts as the kubelet (binds the pods the
/// rollback creates and reports them running) and as Alertmanager (resolves the alert).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_staged_bad_rollout_is_rolled_back_verified_and_remembered_exactly_once() {
    use serde_json::{Value, json};
    let Some(staging) = Kube::new("wstg").await else {
        return;
    };
    let Some(production) = Kube::new("wprod").await else {
        return;
    };
    let staged = common::scenarios::bad_rollouts(&[&staging, &production]).await;
    let (staged_staging, staged_production) = (&staged[0], &staged[1]);

    let kubeconfig = staging.kubeconfig.clone();
    let policies = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let d = common::TestDaemon::serving(|a| {
        a.cluster.kubeconfig = Some(kubeconfig.clone());
        a.gate.policy_dir = Some(policies.clone());
        a.execute.verification_window_seconds = Some(5);
    })
    .await;

    // The kubelet: every new checkout pod is scheduled and runs (the rolled-back image works).
    let kubelet = {
        let k = staging.clone_handle();
        let node = format!("{}-worker-1", staging.ns);
        tokio::spawn(async move {
            for _ in 0..1200 {
                common::scenarios::run_unscheduled(&k, "app=checkout", &node).await;
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        })
    };

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
    // Alertmanager resolves the staging alert once the rollback has been made.
    d.eventually(&format!("/api/v1/requests/{}", ids[0]), 90, |r| {
        r["phase"] == "Verifying" || terminal(r)
    })
    .await;
    let mut resolved = staged_staging.alert.clone();
    resolved["status"] = json!("resolved");
    resolved["alerts"][0]["status"] = json!("resolved");
    resolved["alerts"][0]["endsAt"] = json!(chrono::Utc::now().to_rfc3339());
    assert_eq!(
        d.send_alertmanager(&resolved.to_string()).await.status(),
        200
    );

    let auto = d
        .eventually(&format!("/api/v1/requests/{}", ids[0]), 90, terminal)
        .await;
    let gated = d
        .eventually(&format!("/api/v1/requests/{}", ids[1]), 60, terminal)
        .await;
    kubelet.abort();

    // Staging: auto-approved, rolled back, verified effective.
    assert_eq!(
        auto["state"]["enrichment"]["environment"], "staging",
        "{auto:#}"
    );
    assert_eq!(
        auto["state"]["selection"]["selected"]["workflow_id"],
        "rollback-deployment-previous-revision"
    );
    assert_eq!(auto["state"]["gate"]["require_approval"], false, "{auto:#}");
    assert_eq!(auto["phase"], "Completed", "{auto:#}");
    assert!(
        auto["reason"].as_str().unwrap().starts_with("effective"),
        "{auto:#}"
    );
    let execution = &auto["state"]["execution"];
    assert_eq!(execution["outcome"], "succeeded", "{execution:#}");
    assert_eq!(execution["steps"][0]["action"], "rollout_undo");
    assert_eq!(execution["steps"][0]["status"], "applied");
    assert_eq!(
        execution["steps"][1]["detail"]["detail"]["available"], true,
        "{execution:#}"
    );
    assert!(
        execution["pre_spec_hash"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    assert_ne!(execution["pre_spec_hash"], execution["post_spec_hash"]);
    let assessment = &auto["state"]["assessment"];
    assert_eq!(assessment["health_score"], 1.0, "{assessment:#}");
    assert_eq!(assessment["alert_score"], 1.0, "{assessment:#}");
    assert_eq!(assessment["reason"], "full");

    // The Deployment runs the previous image again, stamped with the request that did it.
    let deployment = staging.get("apps/v1", "Deployment", "checkout").await;
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["image"],
        "shop/checkout:1.4.1"
    );
    assert_eq!(
        deployment["metadata"]["annotations"]["kubemedic.io/remediation"],
        format!("{}/1", ids[0])
    );
    // Exactly once: one undo (revision 2 → 3), one execution event, one history entry.
    assert_eq!(
        deployment["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "3"
    );
    let kinds: Vec<&str> = auto["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.iter().filter(|k| **k == "execution").count(), 1);
    assert_eq!(kinds.iter().filter(|k| **k == "assessment").count(), 1);
    let target = kubemedic::domain::Target::new("Deployment", "checkout", Some(staging.ns.clone()));
    let history = d
        .store
        .history(
            &target.fingerprint(),
            chrono::Utc::now() - chrono::Duration::hours(1),
        )
        .await
        .unwrap();
    assert_eq!(history.len(), 1, "{history:#?}");
    assert_eq!(history[0].workflow_type, "RollbackDeployment");
    assert_eq!(history[0].signal_resolved, Some(true));
    assert!(history[0].effectiveness_score.unwrap() >= 0.7);
    // Counted where an operator looks.
    let metrics = d
        .client
        .get(d.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for line in [
        "kubemedic_executions_total{outcome=\"succeeded\"} 1",
        "kubemedic_assessments_total{verdict=\"effective\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} missing from\n{metrics}");
    }
    // The same history over the API, with the tiers the next investigation reads.
    let served = d
        .api(&format!(
            "/api/v1/history?kind=Deployment&name=checkout&namespace={}",
            staging.ns
        ))
        .await;
    assert_eq!(served["total"], 1, "{served:#}");
    assert_eq!(served["items"][0]["remediationUid"], ids[0].as_str());
    assert_eq!(
        served["context"]["tier1"]["chain"][0]["hashMatch"],
        "postRemediation"
    );

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
            "Verifying",
            "Completed"
        ]
    );

    // Production: the policy requires approval, for the reason it states; nothing ran there.
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
    assert!(gated["state"]["execution"].is_null());
    let untouched = production.get("apps/v1", "Deployment", "checkout").await;
    assert_eq!(
        untouched["spec"]["template"]["spec"]["containers"][0]["image"],
        "shop/checkout:1.4.2"
    );
    d.stop().await;
}
