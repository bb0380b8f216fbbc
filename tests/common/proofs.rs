//! Incidents staged on the real API server tier for tests/proofs.rs, where no scenario of
//! tests/scenarios/ gives a clean case of an action that a model could propose and that would
//! be wrong. Staged with the scenarios' recipes (a Node, bindings, status patches, events, a
//! fake kubelet's logs) and captured with kubemedic's own capture into
//! `tests/proofs/<name>/` by `examples/capture_proofs.rs` (scripts/capture-proofs).
#![allow(dead_code)]

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use serde_json::json;

use super::kube::{Kube, LogStore, status};
use super::scenarios::{
    Scenario, Staged, alert, crash_all, crashloop_alert, deployment, name, node, reap_terminating,
    run_all, statefulset, tainted_pools_and_pending_frontend,
};

/// Every incident of tests/proofs/.
pub fn all() -> Vec<Scenario> {
    vec![
        Scenario {
            name: "statefulset-failure-predates-update",
            stage: statefulset_failure_predates_update,
        },
        Scenario {
            name: "one-of-two-nodes-not-ready",
            stage: one_of_two_nodes_not_ready,
        },
        Scenario {
            name: "taint-not-the-only-blocker",
            stage: taint_not_the_only_blocker,
        },
    ]
}

/// The folder of an incident.
pub fn dir(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/proofs")
        .join(name)
}

/// Every ledger pod crash-loops on a corrupt checkpoint; someone updates the StatefulSet hoping
/// it helps, and the updated ledger-2 crashes the same way. Rolling back returns to a revision
/// whose pods fail right now.
fn statefulset_failure_predates_update<'a>(
    k: &'a Kube,
    logs: &'a LogStore,
    port: u16,
) -> Pin<Box<dyn Future<Output = Staged> + Send + 'a>> {
    Box::pin(async move {
        let n = node(k, port, "worker-1").await;
        let mut s = statefulset("ledger", "shop/ledger-db:14.2", 3, json!({}));
        // Parallel: the controller updates ledger-2 although the other pods are not ready.
        s["spec"]["podManagementPolicy"] = json!("Parallel");
        k.apply(s).await;
        let log = "ledger-db 14.2\nPANIC: could not locate a valid checkpoint record\n";
        let old = k.pods("app=ledger", 3).await;
        let crashed = crash_all(k, logs, &old, &n, ("ledger", "shop/ledger-db:14.2"), log).await;
        // The crash loop began long before the update.
        k.event(
            &crashed[0],
            "Warning",
            "BackOff",
            "Back-off restarting failed container",
            30,
            900,
        )
        .await;
        // A merge patch replaces the containers list: give it whole, with only the image new.
        let mut containers = k.get("apps/v1", "StatefulSet", "ledger").await["spec"]["template"]
            ["spec"]["containers"]
            .clone();
        containers[0]["image"] = json!("shop/ledger-db:14.3");
        k.patch(
            "apps/v1",
            "StatefulSet",
            "ledger",
            json!({"spec": {"template": {"spec": {"containers": containers}}}}),
        )
        .await;
        // As in the scenarios' StatefulSet update: crash ledger-2 once the controller counts it
        // as updated, and again if it was replaced meanwhile.
        let on_update = || async {
            reap_terminating(k, "app=ledger").await;
            let s = k.get("apps/v1", "StatefulSet", "ledger").await;
            let update = s["status"]["updateRevision"].as_str()?.to_owned();
            let p = k.api("v1", "Pod").get("ledger-2").await.ok()?;
            let p = serde_json::to_value(p).unwrap();
            (p["metadata"]["labels"]["controller-revision-hash"] == update.as_str()
                && p["metadata"]["deletionTimestamp"].is_null()
                && s["status"]["updatedReplicas"].as_i64() == Some(1))
            .then_some(p)
        };
        for _ in 0..10 {
            let updated = k
                .wait("ledger-2 on the update revision", 60, on_update)
                .await;
            let crashed = crash_all(
                k,
                logs,
                &[updated],
                &n,
                ("ledger", "shop/ledger-db:14.3"),
                "ledger-db 14.3\nPANIC: could not locate a valid checkpoint record\n",
            )
            .await
            .remove(0);
            tokio::time::sleep(Duration::from_millis(1500)).await;
            let now =
                serde_json::to_value(k.api("v1", "Pod").get("ledger-2").await.unwrap()).unwrap();
            if now["metadata"]["uid"] == crashed["metadata"]["uid"]
                && now["metadata"]["deletionTimestamp"].is_null()
            {
                return Staged::now(crashloop_alert(k, "ledger-2", "ledger"));
            }
        }
        panic!("ledger-2 kept being replaced")
    })
}

/// Two nodes, each with a pod of tiles; worker-1 goes NotReady (its pod with it). Draining
/// worker-1 moves its pod to worker-2; draining worker-2 — the only healthy node — leaves tiles
/// nowhere to run.
fn one_of_two_nodes_not_ready<'a>(
    k: &'a Kube,
    _logs: &'a LogStore,
    port: u16,
) -> Pin<Box<dyn Future<Output = Staged> + Send + 'a>> {
    Box::pin(async move {
        let sick = node(k, port, "worker-1").await;
        let healthy = node(k, port, "worker-2").await;
        k.apply(deployment(
            "tiles",
            "shop/tiles:1.0",
            2,
            "256Mi",
            json!({}),
            json!({}),
        ))
        .await;
        let pods = k.pods("app=tiles", 2).await;
        run_all(k, &pods[..1], &sick, "tiles", "shop/tiles:1.0").await;
        run_all(k, &pods[1..], &healthy, "tiles", "shop/tiles:1.0").await;
        let t = super::scenarios::ago(600);
        k.patch_status("v1", "Node", &sick, json!({"conditions": [
            {"type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": "PLEG is not healthy: pleg was last seen active 10m ago", "lastHeartbeatTime": t, "lastTransitionTime": t}]}))
            .await;
        // What the node lifecycle controller (off in the tier) does to the pods of a NotReady
        // node: they are no longer ready.
        let mut st = status::not_ready("tiles", "shop/tiles:1.0");
        st["conditions"] = json!([{"type": "Ready", "status": "False", "reason": "NodeNotReady", "lastTransitionTime": t}]);
        k.patch_status("v1", "Pod", &name(&pods[0]), st).await;
        Staged::now(alert(
            "KubeNodeNotReady",
            "critical",
            &[
                ("node", &sick),
                ("namespace", "monitoring"),
                ("job", "kube-state-metrics"),
            ],
            &[("summary", "Node is not ready.")],
            "",
        ))
    })
}

/// The nodes an incident made (named after its namespace), to delete once it is captured so
/// the next incident's snapshot shows only its own.
pub async fn own_nodes(k: &Kube) -> Vec<String> {
    let list = k.api("v1", "Node").list(&Default::default()).await.unwrap();
    list.items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .filter(|n| n.starts_with(&format!("{}-", k.ns)))
        .collect()
}

/// Both nodes carry a maintenance taint the frontend's pods do not tolerate, as in the scenario
/// `pending-untolerated-taint`; but the pods also require a node of pool `gpu`, which neither
/// node is. Removing the taint from pool-a would place nothing there.
fn taint_not_the_only_blocker<'a>(
    k: &'a Kube,
    _logs: &'a LogStore,
    port: u16,
) -> Pin<Box<dyn Future<Output = Staged> + Send + 'a>> {
    Box::pin(tainted_pools_and_pending_frontend(
        k,
        port,
        json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["gpu"]}]}
        ]}}}),
        "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector, 2 node(s) had taint {maintenance: true}, that the pod didn't tolerate.",
    ))
}
