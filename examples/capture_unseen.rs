//! Stage every unseen incident (tests/unseen/) on the real API server tier and capture it with
//! kubemedic's own snapshot capture into `tests/unseen/<name>/` (snapshot.yaml, alert.json).
//! The expected.json beside them was written before any of this ran; rerun after changing the
//! staging of an incident:
//!
//!     scripts/capture-unseen [NAME...]
//!
//! Before each incident the tier's cluster-scoped objects (Nodes, PersistentVolumes,
//! StorageClasses) and the node events in `default` are removed, so a snapshot shows only its
//! own incident's nodes, volumes and classes (a capture includes every cluster-scoped one).
//!
//! kubemedic's capture does not hold everything an incident needs: kinds it does not list (an
//! Ingress, a Role or RoleBinding: [`SUPPLEMENT`], with their managed fields cut as the capture
//! cuts them) and the logs of init containers. Those are read through the same
//! `ClusterReader`, cleaned and sanitised the way the capture treats the rest, and appended to
//! the snapshot, so the replay sees what a live investigation would read from the API server.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

#[path = "../tests/common/mod.rs"]
#[allow(unused_imports)]
mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use common::kube::{Kube, fake_kubelet};
use common::unseen::{Ctx, clean_cluster_scope};
use kubemedic::cluster::{ClusterReader, ListQuery, LogQuery};

/// Namespaced kinds the unseen incidents need that `snapshot::capture` does not include.
const SUPPLEMENT: &[&str] = &["Ingress", "Role", "RoleBinding"];

/// The objects of `SUPPLEMENT` in `namespaces`, as snapshot YAML documents.
async fn supplement(cluster: &dyn ClusterReader, namespaces: &[String]) -> anyhow::Result<String> {
    let mut out = String::new();
    for kind in SUPPLEMENT {
        let res = cluster.resource(kind).await?;
        for ns in namespaces {
            for o in cluster.list(&res, Some(ns), &ListQuery::default()).await? {
                // Who wrote it and when, as the capture keeps it (manager, operation, time).
                let managed: Vec<serde_json::Value> = o["metadata"]["managedFields"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|m| {
                        let mut kept = serde_json::Map::new();
                        for key in ["manager", "operation", "time", "subresource"] {
                            if let Some(v) = m.get(key) {
                                kept.insert(key.into(), v.clone());
                            }
                        }
                        serde_json::Value::Object(kept)
                    })
                    .collect();
                let mut o = kubemedic::cluster::render::strip_noise(&o);
                if !managed.is_empty() {
                    o["metadata"]["managedFields"] = serde_json::Value::Array(managed);
                }
                let o = kubemedic::redact::sanitize_value(&o);
                out.push_str("---\n");
                out.push_str(&serde_saphyr::to_string(&o)?);
            }
        }
    }
    // Init containers' logs (the capture takes those of regular containers only).
    let pods = cluster.resource("Pod").await?;
    for ns in namespaces {
        for pod in cluster.list(&pods, Some(ns), &ListQuery::default()).await? {
            let name = pod["metadata"]["name"].as_str().unwrap_or("").to_owned();
            for status in pod["status"]["initContainerStatuses"]
                .as_array()
                .into_iter()
                .flatten()
            {
                let container = status["name"].as_str().unwrap_or("").to_owned();
                let restarted = status["restartCount"].as_i64().unwrap_or(0) > 0
                    || status["lastState"]["terminated"].is_object();
                for previous in [false, true] {
                    if previous && !restarted {
                        continue;
                    }
                    let q = LogQuery {
                        container: Some(container.clone()),
                        previous,
                        tail_lines: Some(500),
                        since_seconds: None,
                    };
                    let Ok(text) = cluster.logs(ns, &name, &q).await else {
                        continue;
                    };
                    let doc = serde_json::json!({
                        "apiVersion": "kubemedic.io/v1alpha1", "kind": "PodLogs",
                        "metadata": {"namespace": ns, "name": name},
                        "container": container, "previous": previous,
                        "text": kubemedic::redact::sanitize_text(&text),
                    });
                    out.push_str("---\n");
                    out.push_str(&serde_saphyr::to_string(&doc)?);
                }
            }
        }
    }
    Ok(out)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let only: Vec<String> = std::env::args().skip(1).collect();
    let logs = Arc::new(Mutex::new(HashMap::new()));
    let port = fake_kubelet(logs.clone()).await;
    for incident in common::unseen::all() {
        if !only.is_empty() && !only.iter().any(|o| o == incident.name) {
            continue;
        }
        let (first, rest) = incident.namespaces.split_first().unwrap();
        let Some(k) = Kube::with_namespace(first).await else {
            anyhow::bail!(
                "KUBEMEDIC_TEST_KUBECONFIG is not set: run through scripts/capture-unseen"
            );
        };
        clean_cluster_scope(&k).await;
        for ns in rest {
            if !matches!(*ns, "default" | "kube-system") {
                Kube::with_namespace(ns).await;
            }
        }
        let ctx = Ctx {
            k,
            logs: logs.clone(),
            port,
            index: incident.index,
            offset: chrono::Duration::minutes(incident.offset_minutes),
        };
        let staged = (incident.stage)(&ctx).await;
        let cluster = ctx.k.cluster().await;
        let captured_at = chrono::Utc::now() + staged.clock_offset;
        let namespaces: Vec<String> = incident
            .namespaces
            .iter()
            .map(|n| (*n).to_owned())
            .collect();
        let mut text =
            kubemedic::cluster::snapshot::capture(cluster.as_ref(), &namespaces, captured_at)
                .await?;
        text.push_str(&supplement(cluster.as_ref(), &namespaces).await?);
        // Every log the staging gave the fake kubelet must have come through the API server.
        let staged_logs = logs
            .lock()
            .unwrap()
            .keys()
            .filter(|(ns, ..)| namespaces.contains(ns))
            .count();
        let captured_logs = text.matches("\nkind: PodLogs\n").count();
        anyhow::ensure!(
            captured_logs >= staged_logs,
            "{}: {captured_logs} container logs captured of the {staged_logs} staged",
            incident.name
        );
        let dir = common::unseen::dir(incident.name);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("snapshot.yaml"), text)?;
        std::fs::write(
            dir.join("alert.json"),
            serde_json::to_string_pretty(&staged.alert)? + "\n",
        )?;
        println!("captured {}", incident.name);
    }
    Ok(())
}
