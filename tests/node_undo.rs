//! Undoing a remediation that made its target worse, on the real node (scripts/kube-tier/
//! node.sh: a real kubelet, containerd and kube-scheduler; docs/adr/0035-undo-what-made-it-worse.md).
//! Nothing in the test writes a status: a Deployment whose pods bind a host port was applied
//! with 3 replicas and scaled down by hand to the one the node can place; scaling it back to
//! its declared count (as a model might propose) is proven — the scale proof does not read
//! the host ports the scheduler already refused once (noted in docs/adr/0035) — and on one
//! node only one pod can hold the port, so the scheduler leaves the new pods Pending.
//! Verification finds the target worse than before and the staging policy says undo; the
//! executor restores the recorded spec; the controller removes the pods it cannot place.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

mod common;

use std::time::{Duration, Instant};

use common::node::{NodeTier, wait_default_token};
use common::undo;
use kubemedic::domain::{Phase, ProofVerdict, Stage};
use serde_json::{Value, json};

fn deployment(port: u16, replicas: u32) -> String {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "terminationGracePeriodSeconds": 2,
                    "containers": [{
                        "name": "web",
                        "image": "localhost/busybox:1.35",
                        "imagePullPolicy": "IfNotPresent",
                        "command": ["sh", "-c", "mkdir -p /tmp/www && echo ok > /tmp/www/healthz && exec httpd -f -p 8080 -h /tmp/www"],
                        "ports": [{"name": "http", "containerPort": 8080, "hostPort": port}],
                        "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 2}
                    }]
                }
            }
        }
    })
    .to_string()
}

fn pods(tier: &NodeTier, ns: &str) -> Vec<Value> {
    let out = tier
        .kubectl(
            &["-n", ns, "get", "pods", "-l", "app=web", "-o", "json"],
            None,
        )
        .unwrap();
    serde_json::from_str::<Value>(&out).unwrap()["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn ready(p: &Value) -> bool {
    p["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

fn unschedulable(p: &Value) -> bool {
    p["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "PodScheduled" && c["reason"] == "Unschedulable")
}

async fn until(what: &str, secs: u64, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !check() {
        assert!(Instant::now() < deadline, "{what} within {secs} s");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scale_up_the_node_cannot_place_is_undone_on_a_real_node() {
    let Some(tier) = NodeTier::from_env().await else {
        return;
    };
    let ns = format!(
        "undo-node-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..6]
    );
    let port = 20000 + (uuid::Uuid::new_v4().as_u128() % 9000) as u16;
    tier.kubectl(
        &["apply", "-f", "-"],
        Some(
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns,
                "labels": {"kubemedic.io/environment": "staging"}}})
            .to_string(),
        ),
    )
    .unwrap();
    wait_default_token(&tier, &ns).await.unwrap();
    // Applied with 3 replicas (kubectl keeps that as the applied configuration), then scaled
    // to 1 by hand.
    tier.kubectl(&["-n", &ns, "apply", "-f", "-"], Some(&deployment(port, 3)))
        .unwrap();
    tier.kubectl(
        &["-n", &ns, "scale", "deployment/web", "--replicas=1"],
        None,
    )
    .unwrap();
    until("one pod of web ready, alone", 180, || {
        let p = pods(&tier, &ns);
        p.len() == 1 && ready(&p[0])
    })
    .await;

    let opts = kubemedic::cluster::KubeOptions {
        kubeconfig: Some(tier.kubeconfig.clone()),
        context: None,
        timeout: Duration::from_secs(10),
        policy: Default::default(),
    };
    let c = std::sync::Arc::new(
        kubemedic::cluster::KubeCluster::connect(&opts)
            .await
            .unwrap(),
    );
    let e = undo::env().await;
    let req = undo::scale_request(&c, &ns, "staging").await;
    let out = undo::executor(c.clone(), e.store.clone())
        .run(&req)
        .await
        .unwrap();
    assert_eq!(out.next, Phase::Verifying, "{:?}", out.reason);
    let req = undo::moved(req, &out);
    until("the scheduler to leave the new pods Pending", 120, || {
        pods(&tier, &ns).iter().filter(|p| unschedulable(p)).count() == 2
    })
    .await;

    let out = undo::verifier(c.clone(), e.store.clone())
        .run(&req)
        .await
        .unwrap();
    assert_eq!(out.next, Phase::Executing, "{:?}", out.reason);
    let worse = out.state.undo.as_ref().unwrap().worse.join("; ");
    assert!(worse.contains("unschedulable"), "{worse}");
    let req = undo::moved(req, &out);
    let out = undo::executor(c.clone(), e.store.clone())
        .run(&req)
        .await
        .unwrap();
    assert_eq!(out.next, Phase::ManualReviewRequired, "{:?}", out.reason);
    let restore = out.state.undo.as_ref().unwrap().restore.clone().unwrap();
    assert!(restore.restored, "{restore:?}");
    assert_eq!(restore.proof.unwrap().verdict, ProofVerdict::Proven);

    // The real controller takes the Pending pods away; the one that served still does.
    until("web back at one ready pod", 120, || {
        let p: Vec<Value> = pods(&tier, &ns)
            .into_iter()
            .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
            .collect();
        p.len() == 1 && ready(&p[0])
    })
    .await;
    let d: Value = serde_json::from_str(
        &tier
            .kubectl(&["-n", &ns, "get", "deployment", "web", "-o", "json"], None)
            .unwrap(),
    )
    .unwrap();
    assert_eq!(d["spec"]["replicas"], 1);
    assert_eq!(
        d["metadata"]["annotations"]["kubemedic.io/remediation"],
        format!("{}/undo", req.id)
    );
    let _ = tier.kubectl(&["delete", "namespace", &ns, "--wait=false"], None);
}
