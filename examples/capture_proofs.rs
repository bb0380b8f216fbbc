//! Stage the incidents of tests/proofs.rs on the real API server tier and capture each with
//! kubemedic's own snapshot capture into `tests/proofs/<name>/` (snapshot.yaml, alert.json).
//! The committed snapshots were made with this; rerun it after changing an incident:
//!
//!     scripts/capture-proofs [NAME...]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

#[path = "../tests/common/mod.rs"]
#[allow(unused_imports)]
mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use common::kube::{Kube, fake_kubelet};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let only: Vec<String> = std::env::args().skip(1).collect();
    for s in common::proofs::all() {
        if !only.is_empty() && !only.iter().any(|o| o == s.name) {
            continue;
        }
        let Some(k) = Kube::with_namespace(&format!("prf-{}", s.name)).await else {
            anyhow::bail!(
                "KUBEMEDIC_TEST_KUBECONFIG is not set: run through scripts/capture-proofs"
            );
        };
        let logs = Arc::new(Mutex::new(HashMap::new()));
        let port = fake_kubelet(logs.clone()).await;
        let staged = (s.stage)(&k, &logs, port).await;
        let cluster = k.cluster().await;
        let captured_at = chrono::Utc::now() + staged.clock_offset;
        let text = kubemedic::cluster::snapshot::capture(
            cluster.as_ref(),
            std::slice::from_ref(&k.ns),
            captured_at,
        )
        .await?;
        let dir = common::proofs::dir(s.name);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("snapshot.yaml"), text)?;
        std::fs::write(
            dir.join("alert.json"),
            serde_json::to_string_pretty(&staged.alert)? + "\n",
        )?;
        // Nodes are cluster-wide: the next incident's snapshot shows only its own.
        for n in common::proofs::own_nodes(&k).await {
            k.api("v1", "Node").delete(&n, &Default::default()).await?;
        }
        println!("captured {}", s.name);
    }
    Ok(())
}
