//! A production incident on the real API server that waits for a human: a bad rollout in a
//! namespace labelled production (the shipped policy requires approval there), the daemon
//! serving it with approvals configured, and the steps that carry it to its end.

use std::time::Duration;

use chrono::Utc;
use kubemedic::secret::Secret;
use serde_json::{Value, json};

use super::kube::Kube;

pub const KEY: &str = "test-link-signing-key-0123456789abcdef";
pub const ALICE: &str = "alice@example.com";

/// A bad rollout staged in `k`'s namespace, labelled production (the shipped policy requires
/// approval there), and the daemon on that cluster with `tweak`.
pub async fn production_incident(
    k: &Kube,
    tweak: impl FnOnce(&mut kubemedic::config::DaemonArgs),
) -> (super::TestDaemon, Value) {
    let staged = super::scenarios::staged_in("crashloop-rollout", &[k])
        .await
        .remove(0);
    k.patch(
        "v1",
        "Namespace",
        &k.ns,
        json!({"metadata": {"labels": {"kubemedic.io/environment": "production"}}}),
    )
    .await;
    (serving(k, tweak).await, staged.alert)
}

/// The daemon on `k`'s cluster with the shipped policy, approvers and `tweak`.
pub async fn serving(
    k: &Kube,
    tweak: impl FnOnce(&mut kubemedic::config::DaemonArgs),
) -> super::TestDaemon {
    let kubeconfig = k.kubeconfig.clone();
    let policies = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    super::TestDaemon::serving(|a| {
        a.cluster.kubeconfig = Some(kubeconfig);
        a.gate.policy_dir = Some(policies);
        a.verify.verification_window_seconds = Some(3);
        a.execute.cooldown_seconds = Some(0);
        a.approvals.approvers = Some(vec![ALICE.into(), "bob@example.com".into()]);
        a.approvals.link_signing_key = Some(Secret::new(KEY));
        tweak(a);
    })
    .await
}

/// A wedged pod in production: Deployment `checkout` runs three replicas of one revision, one of
/// them has been running but not ready for ten minutes (its readiness probe fails), the other
/// two serve. Deleting that pod and a rolling restart both have obligations that hold here.
/// Returns the wedged pod's name and the KubePodNotReady alert about it.
pub async fn wedged_pod(k: &Kube) -> (String, Value) {
    let node = format!("{}-worker-1", k.ns);
    k.node(&node, 1, json!([])).await;
    k.patch(
        "v1",
        "Namespace",
        &k.ns,
        json!({"metadata": {"labels": {"kubemedic.io/environment": "production"}}}),
    )
    .await;
    k.apply(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "checkout", "labels": {"app": "checkout"}},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "checkout"}},
            "template": {"metadata": {"labels": {"app": "checkout"}},
                "spec": {"containers": [{"name": "checkout", "image": "shop/checkout:1.4.1",
                    "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}}}]}}}
    }))
    .await;
    let pods = k.pods("app=checkout", 3).await;
    super::scenarios::run_unscheduled(k, "app=checkout", &node).await;
    let wedged = pods[0]["metadata"]["name"].as_str().unwrap().to_owned();
    let since = (Utc::now() - chrono::Duration::minutes(10)).to_rfc3339();
    let mut status = super::kube::status::not_ready("checkout", "shop/checkout:1.4.1");
    status["conditions"][0]["lastTransitionTime"] = json!(since);
    let pod = k.patch_status("v1", "Pod", &wedged, status).await;
    k.event(
        &pod,
        "Warning",
        "Unhealthy",
        "Readiness probe failed: HTTP probe failed with statuscode: 503",
        60,
        600,
    )
    .await;
    let alert = super::scenarios::alert(
        "KubePodNotReady",
        "warning",
        &[("namespace", &k.ns), ("pod", &wedged)],
        &[(
            "summary",
            "Pod has been in a non-ready state for more than 15 minutes.",
        )],
        "",
    );
    (wedged, alert)
}

/// An incident class no rule knows the fix for: every pod of Deployment `checkout` (three
/// replicas of one revision, in production) has been running but not ready for ten minutes,
/// their readiness probes failing, with no recent change, no failing dependency and nothing in
/// the cluster that says why. Returns a pod's name and the KubePodNotReady alert about it.
pub async fn all_wedged(k: &Kube) -> (String, Value) {
    let (first, alert) = wedged_pod(k).await;
    let since = (Utc::now() - chrono::Duration::minutes(10)).to_rfc3339();
    for pod in k.pods("app=checkout", 3).await {
        let name = pod["metadata"]["name"].as_str().unwrap().to_owned();
        if name == first {
            continue;
        }
        let mut status = super::kube::status::not_ready("checkout", "shop/checkout:1.4.1");
        status["conditions"][0]["lastTransitionTime"] = json!(since);
        let pod = k.patch_status("v1", "Pod", &name, status).await;
        k.event(
            &pod,
            "Warning",
            "Unhealthy",
            "Readiness probe failed: HTTP probe failed with statuscode: 503",
            60,
            600,
        )
        .await;
    }
    (first, alert)
}

/// Send the alert; wait until its request awaits approval. Returns (request, approval).
pub async fn awaiting(d: &super::TestDaemon, alert: &Value) -> (Value, Value) {
    let v: Value = d
        .send_alertmanager(&alert.to_string())
        .await
        .json()
        .await
        .unwrap();
    let id = v["outcomes"][0]["request_id"].as_str().unwrap().to_owned();
    let req = d
        .eventually(&format!("/api/v1/requests/{id}"), 60, |r| {
            r["phase"] == "AwaitingApproval"
                || r["phase"]
                    .as_str()
                    .and_then(kubemedic::domain::Phase::parse)
                    .is_some_and(kubemedic::domain::Phase::is_terminal)
        })
        .await;
    assert_eq!(req["phase"], "AwaitingApproval", "{req:#}");
    let pending = d
        .eventually("/api/v1/approvals?status=pending", 10, |p| {
            p["items"]
                .as_array()
                .unwrap()
                .iter()
                .any(|a| a["request_id"] == id.as_str())
        })
        .await;
    let approval = pending["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["request_id"] == id.as_str())
        .unwrap()
        .clone();
    (req, approval)
}

pub fn is_terminal(r: &Value) -> bool {
    r["phase"]
        .as_str()
        .and_then(kubemedic::domain::Phase::parse)
        .is_some_and(kubemedic::domain::Phase::is_terminal)
}

/// The kubelet: new checkout pods are scheduled and run (the rolled-back image works).
pub fn kubelet(k: &Kube) -> tokio::task::JoinHandle<()> {
    let k = k.clone_handle();
    let node = format!("{}-worker-1", k.ns);
    tokio::spawn(async move {
        loop {
            super::scenarios::run_unscheduled(&k, "app=checkout", &node).await;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
}

/// Alertmanager: the alert resolves once the rollback is made, and the request completes.
pub async fn resolve_and_finish(d: &super::TestDaemon, alert: &Value, id: &str) -> Value {
    d.eventually(&format!("/api/v1/requests/{id}"), 90, |r| {
        r["phase"] == "Verifying" || is_terminal(r)
    })
    .await;
    let mut resolved = alert.clone();
    resolved["status"] = json!("resolved");
    resolved["alerts"][0]["status"] = json!("resolved");
    resolved["alerts"][0]["endsAt"] = json!(Utc::now().to_rfc3339());
    assert_eq!(
        d.send_alertmanager(&resolved.to_string()).await.status(),
        200
    );
    d.eventually(&format!("/api/v1/requests/{id}"), 90, is_terminal)
        .await
}

/// The mails maildev (its HTTP API at `api`) holds about `approval`, once there are `want`.
pub async fn mails_for(api: &str, approval: &str, want: usize) -> Vec<Value> {
    for _ in 0..300 {
        let all: Vec<Value> = reqwest::get(format!("{api}/email"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let mine: Vec<Value> = all
            .into_iter()
            .filter(|m| m["text"].as_str().unwrap_or("").contains(approval))
            .collect();
        if mine.len() >= want {
            return mine;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{want} mails about {approval} did not arrive");
}
