//! Driving the Executing and Verifying stages by hand for the undo's tests (tests/undo.rs on the
//! real API server, tests/node_undo.rs on the real node): a proven scale-up request, the
//! stages on a SQLite store, verification with no window and the shipped policy.

use std::sync::Arc;

use chrono::Utc;
use kubemedic::catalog::Catalog;
use kubemedic::clock::SystemClock;
use kubemedic::cluster::KubeCluster;
use kubemedic::domain::{
    Phase, Proof, ProofPoint, ProofVerdict, Proposer, RemediationRequest, StageOutcome, Target,
};
use kubemedic::execute::{ExecuteSettings, ExecutionStage};
use kubemedic::policy::RegoGate;
use kubemedic::prove::{Claim, Prover};
use kubemedic::store::Store;
use kubemedic::verify::{VerificationStage, VerifySettings};
use serde_json::json;

/// A request in `Executing` to scale Deployment `web` of `ns` back to 3, proven as the
/// selection stage proves it, in `environment`.
pub async fn scale_request(
    c: &Arc<KubeCluster>,
    ns: &str,
    environment: &str,
) -> RemediationRequest {
    let mut req = scale_claim(ns, environment);
    let proof = prove_selection(c, &req).await;
    assert_eq!(proof.verdict, ProofVerdict::Proven, "{proof:#?}");
    req.state.proof = Some(proof);
    req
}

/// [`scale_request`] before its proof.
pub fn scale_claim(ns: &str, environment: &str) -> RemediationRequest {
    let body = super::alert_body(
        "firing",
        "KubeDeploymentReplicasMismatch",
        &[("namespace", ns), ("deployment", "web")],
        &format!("fp-{}", uuid::Uuid::new_v4().simple()),
        "2026-01-01T00:00:00Z",
    );
    let signals = kubemedic::ingest::alertmanager::parse(body.as_bytes()).unwrap();
    let mut req = RemediationRequest::for_signal(&signals[0], Phase::Executing, Utc::now());
    let target = Target::new("Deployment", "web", Some(ns.to_owned()));
    req.state.enrichment =
        Some(serde_json::from_value(json!({"environment": environment})).unwrap());
    let rca = json!({"root_cause_analysis": {"summary": "s", "severity": "high"},
        "confidence": 0.9, "investigation_outcome": "actionable", "actionable": true});
    req.state.analysis = Some(
        serde_json::from_value(json!({"rca": rca, "root_owner": target, "investigator": "test"}))
            .unwrap(),
    );
    req.state.selection = Some(
        serde_json::from_value(json!({
            "selected": {"workflow_id": "scale-replicas", "action_type": "ScaleReplicas",
                "version": "1.0.0", "confidence": 0.9, "parameters": {"REPLICAS": 3}},
            "merged": rca,
            "outcome": {"kind": "workflow_selected", "next_phase": "Gating", "reason": "r"},
        }))
        .unwrap(),
    );
    req
}

/// A SQLite store in a temporary directory, kept while this lives.
pub struct Env {
    pub store: Arc<dyn Store>,
    _dir: tempfile::TempDir,
}

pub async fn env() -> Env {
    let (dir, url) = super::sqlite_url();
    Env {
        store: super::open_store(&url, Arc::new(SystemClock)).await,
        _dir: dir,
    }
}

pub fn executor(k: Arc<KubeCluster>, store: Arc<dyn Store>) -> ExecutionStage {
    ExecutionStage::new(
        k.clone(),
        k,
        store,
        kubemedic::live::Live::new(Catalog::builtin().unwrap()),
        Arc::new(SystemClock),
        ExecuteSettings::default(),
    )
}

/// Verification with no window, the shipped policy deciding the undo.
pub fn verifier(k: Arc<KubeCluster>, store: Arc<dyn Store>) -> VerificationStage {
    let policies = concat!(env!("CARGO_MANIFEST_DIR"), "/policies");
    VerificationStage::new(
        k,
        store,
        Arc::new(SystemClock),
        VerifySettings {
            window: chrono::Duration::zero(),
            ..Default::default()
        },
    )
    .with_policy(Arc::new(RegoGate::load(
        policies,
        std::time::Duration::from_secs(1),
        None,
    )))
}

/// The request moved on by `out`.
pub fn moved(mut req: RemediationRequest, out: &StageOutcome) -> RemediationRequest {
    req.phase = out.next;
    req.reason = out.reason.clone();
    req.state = out.state.clone();
    req
}

/// The proof of `req`'s selected workflow on its verified root owner, made as the selection
/// stage makes it (the builtin catalog's obligations; a custom action type is unverified).
pub async fn prove_selection(c: &Arc<KubeCluster>, req: &RemediationRequest) -> Proof {
    let prover = Prover::new(
        c.clone(),
        Some(c.clone()),
        kubemedic::live::Live::new(Catalog::builtin().unwrap()),
        Arc::new(SystemClock),
    );
    let selected = req
        .state
        .selection
        .as_ref()
        .and_then(|s| s.selected.clone())
        .unwrap();
    let target = req
        .state
        .analysis
        .as_ref()
        .and_then(|a| a.root_owner.clone())
        .unwrap();
    prover
        .prove(
            &Claim {
                action_type: &selected.action_type,
                workflow_id: &selected.workflow_id,
                parameters: &selected.parameters,
                target: &target,
                proposer: Proposer::Offline,
                signal: &req.signal,
                bound_to: None,
            },
            ProofPoint::Selection,
        )
        .await
        .unwrap()
}
