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
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

#[path = "../tests/common/mod.rs"]
#[allow(unused_imports)]
mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use common::kube::{Kube, fake_kubelet};
use common::unseen::{Ctx, clean_cluster_scope};

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
        let text =
            kubemedic::cluster::snapshot::capture(cluster.as_ref(), &namespaces, captured_at)
                .await?;
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
