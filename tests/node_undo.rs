//! Undoing a remediation that made its target worse, on the real node (scripts/kube-tier/
//! node.sh: a real kubelet, containerd and kube-scheduler; docs/adr/0035-undo-what-made-it-worse.md).
//! Nothing in the test writes a status: a Deployment of a singleton (its process takes a lock in
//! a directory on the node and exits when another instance holds it) was applied with 3
//! replicas and scaled down by hand to the one that can run; scaling it back to its declared
//! count (as a model might propose) is proven — nothing the API shows says the application is
//! a singleton — and the new pods crash on the lock. Verification finds the target worse than
//! before and the staging policy says undo; the executor restores the recorded spec; the
//! controller removes the crashing pods.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

mod common;

use std::time::{Duration, Instant};

use common::node::{NodeTier, wait_default_token};
use common::undo;
use kubemedic::domain::{Phase, ProofVerdict, Stage};
use serde_json::{Value, json};

/// The singleton: the first instance takes `lock` (a directory on the node) and serves; any
/// other exits with an error naming the holder.
fn deployment(lock: &str, replicas: u32) -> String {
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
                        "command": ["sh", "-c", "if mkdir /lock/held 2>/dev/null; then mkdir -p /tmp/www && echo ok > /tmp/www/healthz && exec httpd -f -p 8080 -h /tmp/www; else echo 'FATAL: another instance holds /lock/held' >&2; exit 1; fi"],
                        "ports": [{"name": "http", "containerPort": 8080}],
                        "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 2},
                        "volumeMounts": [{"name": "lock", "mountPath": "/lock"}]
                    }],
                    "volumes": [{"name": "lock", "hostPath": {"path": lock, "type": "DirectoryOrCreate"}}]
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

/// A container of the pod exited with an error (or waits to be restarted after one).
fn crashed(p: &Value) -> bool {
    p["status"]["containerStatuses"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| {
            c["restartCount"].as_i64().unwrap_or(0) > 0
                || c["state"]["terminated"]["exitCode"].as_i64().unwrap_or(0) != 0
        })
}

async fn until(what: &str, secs: u64, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !check() {
        assert!(Instant::now() < deadline, "{what} within {secs} s");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scale_up_of_a_singleton_is_undone_on_a_real_node() {
    let Some(tier) = NodeTier::from_env().await else {
        return;
    };
    let ns = format!(
        "undo-node-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..6]
    );
    let lock = format!("/tmp/kubemedic-{ns}-lock");
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
    // Declared with 3 replicas (the applied configuration kubectl keeps) and running 1, as
    // after `kubectl apply` and a scale-down by hand — created that way, so that only the one
    // pod ever starts (a loser of the lock race removed by the scale-down would leave the lock
    // behind for the one kept).
    // (`kubectl create` would rewrite an applied configuration it finds to what it creates;
    // a merge patch sets it as it is.)
    tier.kubectl(
        &["-n", &ns, "create", "-f", "-"],
        Some(&deployment(&lock, 1)),
    )
    .unwrap();
    let declared = json!({"metadata": {"annotations": {
        "kubectl.kubernetes.io/last-applied-configuration": deployment(&lock, 3)}}});
    tier.kubectl(
        &[
            "-n",
            &ns,
            "patch",
            "deployment/web",
            "--type=merge",
            "-p",
            &declared.to_string(),
        ],
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
    until("the new pods to crash on the lock", 120, || {
        pods(&tier, &ns).iter().filter(|p| crashed(p)).count() == 2
    })
    .await;

    let out = undo::verifier(c.clone(), e.store.clone())
        .run(&req)
        .await
        .unwrap();
    assert_eq!(out.next, Phase::Executing, "{:?}", out.reason);
    let worse = out.state.undo.as_ref().unwrap().worse.join("; ");
    assert!(worse.contains("exited"), "{worse}");
    let req = undo::moved(req, &out);
    let out = undo::executor(c.clone(), e.store.clone())
        .run(&req)
        .await
        .unwrap();
    assert_eq!(out.next, Phase::ManualReviewRequired, "{:?}", out.reason);
    let restore = out.state.undo.as_ref().unwrap().restore.clone().unwrap();
    assert!(restore.restored, "{restore:?}");
    assert_eq!(restore.proof.unwrap().verdict, ProofVerdict::Proven);

    // The real controller takes the crashing pods away; the one that served still does.
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
    let _ = std::fs::remove_dir_all(&lock);
}
