//! The Executing stage (DESIGN §3.6): run the approved workflow on the verified root owner,
//! at most once per request — also across crashes and replicas.
//!
//! Input: a request in `Executing` (auto-approved by the gate or approved by a human) with its
//! selection and the verified root owner. Output: an [`Execution`] in the request's state and
//! the move to `Verifying`; `ManualReviewRequired` with the proposed change for the proposal
//! engine (a Git revert is never applied to a GitOps-managed object); `Blocked` with the
//! guardrail's reason; `Failed` with the step that failed.
//!
//! Exactly once, in this order:
//! 1. Guardrails on the target's history, and the opt-out annotation (`kubemedic.io/remediate:
//!    "false"` on the object or its namespace).
//! 2. The target's execution lock in the store (one running execution per target, whichever
//!    replica runs it; two alerts converging on one root owner meet here: `ResourceBusy`).
//! 3. Intent 0 records the pre-remediation spec hash before the first write.
//! 4. Each step commits its intent, then writes through a [`stamp::StampingWriter`] that puts
//!    `kubemedic.io/remediation: <request>/<step>` on the object in the same API request, then
//!    settles the intent. A step whose intent is `started` after a crash is reconciled: a
//!    stamped object means the write happened, and it is not repeated; a Job with the
//!    request's deterministic name is the Job, and it is not created twice.
//! 5. The spec hash after the last write, so verification can tell somebody else's change
//!    (spec drift) from ours.
//!
//! Dry run sends every builtin write with `dryRun=All` and creates no Job: the request records
//! exactly what would have run, and nothing changes.
//!
//! Back from verification with an undo decided (the remediation made its target worse), the
//! stage runs the undo instead (`undo`): its own proof, then the spec intent 0 recorded written
//! back once, behind its intent and the stamp `<request>/undo`; then a person takes over.

mod admit;
pub mod guardrails;
pub mod stamp;
mod steps;
mod undo;

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;
use tracing::{info, instrument, warn};

pub use guardrails::{Block, BlockKind, Guardrails};

use crate::catalog::{Catalog, Engine};
use crate::clock::Clock;
use crate::cluster::context::{drift_hash, spec_hash};
use crate::cluster::observed;
use crate::cluster::{ClusterError, ClusterReader, ClusterWriter};
use crate::domain::{
    AuditDraft, Execution, ExecutionOutcome, ExecutionStep, HistoryRecord, OPT_OUT_ANNOTATION,
    Phase, Proof, ProofPoint, ProofVerdict, RemediationRequest, SelectedWorkflow, Stage,
    StageError, StageOutcome, StepStatus, Target, TargetHealth,
};
use crate::domain::{ExecutionPayload, GuardrailPayload, HistoryOutcome, StepFailure};
use crate::live::Live;
use crate::prove::{Binding, Claim, ProveError, Prover};
use crate::store::{Approvals, Execution as Executions, History, Store};
use crate::telemetry::Metrics;
use admit::{Admission, Admitted};
use steps::Run;
pub use steps::job_name;

/// The execution settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecuteSettings {
    /// Send writes with `dryRun=All`, create no Jobs.
    pub dry_run: bool,
    /// Executions running at once in the whole cluster…
    pub max_concurrent: usize,
    /// …and in one namespace; a request over a cap waits its turn.
    pub max_concurrent_per_namespace: usize,
    pub guardrails: Guardrails,
    /// Where Jobs for cluster-scoped targets (Nodes) run.
    pub job_namespace: String,
}

impl ExecuteSettings {
    /// Executions at once in the cluster, unless configured.
    pub const DEFAULT_MAX_CONCURRENT: usize = 10;
    /// Executions at once in one namespace, unless configured.
    pub const DEFAULT_MAX_CONCURRENT_PER_NAMESPACE: usize = 3;
}

impl Default for ExecuteSettings {
    fn default() -> Self {
        Self {
            dry_run: false,
            max_concurrent: Self::DEFAULT_MAX_CONCURRENT,
            max_concurrent_per_namespace: Self::DEFAULT_MAX_CONCURRENT_PER_NAMESPACE,
            guardrails: Guardrails::default(),
            job_namespace: "default".into(),
        }
    }
}

/// What execution uses of the store: its intents and the targets' locks, the history the
/// guardrails read and a failure is written to, and the note on an approval that was not
/// executed.
#[derive(Clone)]
pub struct ExecuteStore {
    pub executions: Arc<dyn Executions>,
    pub history: Arc<dyn History>,
    pub approvals: Arc<dyn Approvals>,
}

impl From<Arc<dyn Store>> for ExecuteStore {
    fn from(s: Arc<dyn Store>) -> Self {
        Self {
            executions: s.clone(),
            history: s.clone(),
            approvals: s,
        }
    }
}

impl<S: Store + 'static> From<Arc<S>> for ExecuteStore {
    fn from(s: Arc<S>) -> Self {
        Self {
            executions: s.clone(),
            history: s.clone(),
            approvals: s,
        }
    }
}

pub struct ExecutionStage {
    reader: Arc<dyn ClusterReader>,
    writer: Arc<dyn ClusterWriter>,
    store: ExecuteStore,
    catalog: Arc<Live<Catalog>>,
    /// Checks the action's obligations and the approved spec right before the first write.
    prover: Arc<Prover>,
    clock: Arc<dyn Clock>,
    settings: ExecuteSettings,
    metrics: Option<Arc<Metrics>>,
}

/// What a request waits for when a concurrency cap is reached.
const SLOT: &str = "execution slot";

/// How often a waiting request (a concurrency cap reached) looks again.
const CAP_RETRY: chrono::Duration = chrono::Duration::seconds(15);

impl ExecutionStage {
    pub fn new(
        reader: Arc<dyn ClusterReader>,
        writer: Arc<dyn ClusterWriter>,
        store: impl Into<ExecuteStore>,
        catalog: Arc<Live<Catalog>>,
        clock: Arc<dyn Clock>,
        settings: ExecuteSettings,
    ) -> Self {
        let store = store.into();
        let prover = Arc::new(Prover::new(
            reader.clone(),
            None,
            catalog.clone(),
            clock.clone(),
        ));
        Self {
            reader,
            writer,
            store,
            catalog,
            prover,
            clock,
            settings,
            metrics: None,
        }
    }

    /// Prove with this prover before the first write (the demo's reads the cluster as of its
    /// capture).
    pub fn with_prover(mut self, prover: Arc<Prover>) -> Self {
        self.prover = prover;
        self
    }

    /// Count executions and guardrail blocks in `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }
}

pub use crate::catalog::{parameters, substitute};

fn unavailable(e: &ClusterError) -> StageError {
    StageError::Unavailable {
        dependency: "cluster".into(),
        message: e.message.clone(),
    }
}

fn store_unavailable(e: crate::store::StoreError) -> StageError {
    StageError::Unavailable {
        dependency: "store".into(),
        message: e.to_string(),
    }
}

impl ExecutionStage {
    /// The target's spec now (`None` when it cannot be read).
    async fn current_spec(&self, target: &Target) -> Result<Option<Value>, StageError> {
        Ok(self
            .current_object(target)
            .await?
            .and_then(|o| o.get("spec").cloned()))
    }

    /// The target now (`None` when it cannot be read).
    async fn current_object(&self, target: &Target) -> Result<Option<Value>, StageError> {
        let res = match self.reader.resource(&target.kind).await {
            Ok(r) => r,
            Err(e) if e.is_unreachable() => return Err(unavailable(&e)),
            Err(_) => return Ok(None),
        };
        match self
            .reader
            .get(&res, target.namespace.as_deref(), &target.name)
            .await
        {
            Ok(o) => Ok(Some(o)),
            Err(e) if e.is_unreachable() => Err(unavailable(&e)),
            Err(_) => Ok(None),
        }
    }

    /// A workload's pods now, as the undo compares them (`None` for other kinds, or pods that
    /// cannot be read: then nothing is compared and nothing undone).
    async fn health_now(
        &self,
        target: &Target,
        object: &Value,
    ) -> Result<Option<TargetHealth>, StageError> {
        let now = self.clock.now();
        match crate::cluster::workload_pods(self.reader.as_ref(), target, object, now).await {
            Ok(Some(pods)) => Ok(Some(observed::target_health(object, &pods, now))),
            Ok(None) => Ok(None),
            Err(e) if e.is_unreachable() => Err(unavailable(&e)),
            Err(e) => {
                warn!(error = %e, "cannot read the target's pods; it will not be compared");
                Ok(None)
            }
        }
    }

    /// `kubemedic.io/remediate: "false"` on the target or its namespace.
    async fn opted_out(&self, target: &Target) -> Result<Option<String>, StageError> {
        let mut objects = vec![(
            target.kind.clone(),
            target.namespace.clone(),
            target.name.clone(),
        )];
        if let Some(ns) = &target.namespace {
            objects.push(("Namespace".into(), None, ns.clone()));
        }
        for (kind, ns, name) in objects {
            let Ok(res) = self.reader.resource(&kind).await else {
                continue;
            };
            match self.reader.get(&res, ns.as_deref(), &name).await {
                Ok(o) => {
                    if crate::cluster::obj::annotation(&o, OPT_OUT_ANNOTATION) == Some("false") {
                        return Ok(Some(format!(
                            "{kind} {name} is annotated {OPT_OUT_ANNOTATION}: \"false\""
                        )));
                    }
                }
                Err(e) if e.is_unreachable() => return Err(unavailable(&e)),
                Err(_) => {}
            }
        }
        Ok(None)
    }

    /// Right before the first write: the action's obligations checked again, and the target
    /// still the spec that was proven (and approved). `Err(outcome)` ends the request with
    /// nothing written, and tells the approvers.
    async fn prove_before_write(
        &self,
        request: &RemediationRequest,
        selected: &SelectedWorkflow,
        target: &Target,
    ) -> Result<Result<Proof, StageOutcome>, StageError> {
        let at_selection = request
            .state
            .proof
            .as_ref()
            .filter(|p| p.workflow_id == selected.workflow_id);
        let binding = at_selection.and_then(|p| Binding::of(p, "when it was proven and approved"));
        let (Some(at_selection), Some(binding)) = (at_selection, binding) else {
            let reason = format!(
                "not_proven: {} on {target} was not proven against the cluster before it was approved; nothing was written",
                selected.workflow_id
            );
            return Ok(Err(self.not_executed(request, None, reason).await));
        };
        let claim = Claim {
            action_type: &selected.action_type,
            workflow_id: &selected.workflow_id,
            parameters: &selected.parameters,
            target,
            proposer: at_selection.proposer,
            signal: &request.signal,
            bound_to: Some(binding),
        };
        let proof = match self.prover.prove(&claim, ProofPoint::BeforeWrite).await {
            Ok(p) => p,
            Err(ProveError::Unavailable(message)) => {
                return Err(StageError::Unavailable {
                    dependency: "cluster".into(),
                    message,
                });
            }
        };
        if proof.verdict != ProofVerdict::Refuted {
            return Ok(Ok(proof));
        }
        let changed = proof
            .failed()
            .find(|o| o.id == crate::domain::obligations::every::BINDING.id);
        let reason = match changed {
            Some(o) => format!(
                "target_changed: {target} changed after it was approved ({}); nothing was written — investigate again if the alert still fires",
                o.evidence.join("; ")
            ),
            None => format!(
                "proof_failed_before_write: {} on {target} no longer holds — {}; nothing was written",
                selected.workflow_id,
                proof.refutation()
            ),
        };
        Ok(Err(self.not_executed(request, Some(proof), reason).await))
    }

    /// End the request without writing anything, the approvers told why.
    async fn not_executed(
        &self,
        request: &RemediationRequest,
        proof: Option<Proof>,
        reason: String,
    ) -> StageOutcome {
        warn!(%reason, "not executed");
        if let Err(e) = self
            .store
            .approvals
            .approval_not_executed(request.id, &format!("Not executed: {reason}"))
            .await
        {
            warn!(error = %e, "could not tell the approvers why the change was not executed");
        }
        let mut events = Vec::new();
        if let Some(p) = &proof {
            events.push(AuditDraft::proof(
                "prover",
                format!("before the first write: {}", p.verdict.as_str()),
                p,
            ));
        }
        let mut state = request.state.clone();
        state.proof_before_write = proof;
        StageOutcome::to(Phase::ManualReviewRequired, Some(reason), state, events)
    }

    fn blocked(&self, request: &RemediationRequest, block: &Block) -> StageOutcome {
        info!(guardrail = block.kind.as_str(), reason = %block.message, "execution blocked");
        if let Some(m) = &self.metrics {
            m.guardrail_block(block.kind.as_str());
        }
        StageOutcome::to(
            Phase::Blocked,
            Some(block.reason()),
            request.state.clone(),
            vec![AuditDraft::guardrail(
                "executor",
                block.reason(),
                &GuardrailPayload {
                    guardrail: block.kind.as_str().to_owned(),
                    message: block.message.clone(),
                },
            )],
        )
    }

    /// Record a failed execution in the history, so the failure guardrail sees it.
    async fn remember_failure(&self, request: &RemediationRequest, execution: &Execution) {
        let record = HistoryRecord {
            remediation_uid: request.id.to_string(),
            target: execution.target.clone(),
            completed_at: execution.finished_at,
            signal_name: request.signal.name.clone(),
            workflow_type: execution.action_type.clone(),
            workflow_id: execution.workflow_id.clone(),
            outcome: HistoryOutcome::Failed,
            effectiveness_score: None,
            pre_remediation_spec_hash: execution.pre_spec_hash.clone(),
            post_remediation_spec_hash: execution.post_spec_hash.clone(),
            pre_remediation_drift_hash: execution.pre_drift_hash.clone(),
            post_remediation_drift_hash: execution.post_drift_hash.clone(),
            signal_resolved: None,
            assessment_reason: None,
            health_checks: None,
        };
        if let Err(e) = self.store.history.record_history(&record).await {
            warn!(error = %e, "cannot record the failed execution in the history");
        }
    }
}

/// What running the steps left: whether all succeeded, their records and audit events, when
/// the last one ended, and the target's spec after them.
struct Ran {
    ok: bool,
    steps: Vec<ExecutionStep>,
    events: Vec<AuditDraft>,
    finished_at: DateTime<Utc>,
    post: Option<Value>,
}

impl ExecutionStage {
    /// The workflow's steps, each recorded with its intent; `false` when one failed (the rest
    /// are not run).
    async fn run_steps(
        &self,
        request: &RemediationRequest,
        admitted: &Admitted,
    ) -> Result<Ran, StageError> {
        let (workflow, params) = (&admitted.workflow, &admitted.params);
        let mut run = Run {
            stage: self,
            request,
            target: admitted.target.clone(),
            steps: vec![],
            events: vec![],
        };
        let ok = match &workflow.engine {
            Engine::Builtin { steps } => {
                let mut ok = true;
                for (i, step) in steps.iter().enumerate() {
                    let args: BTreeMap<String, Value> = step
                        .with
                        .iter()
                        .map(|(k, v)| (k.clone(), substitute(v, params)))
                        .collect();
                    // The catalog refused unknown actions when it loaded.
                    let builtin = step.action.builtin().ok_or_else(|| {
                        StageError::Failed(format!(
                            "unknown builtin action `{}` in workflow {}",
                            step.action, workflow.id
                        ))
                    })?;
                    if !run.builtin_step(i as u32 + 1, builtin, &args).await? {
                        ok = false;
                        break;
                    }
                }
                ok
            }
            Engine::Job { .. } => run.job_step(workflow, params).await?,
            Engine::Proposal { .. } => true,
        };
        let finished_at = self.clock.now();
        Ok(Ran {
            ok,
            steps: run.steps,
            events: run.events,
            finished_at,
            post: self.current_spec(&admitted.target).await?,
        })
    }

    /// The execution's record: the spec after, the outcome and its message, metrics, the audit
    /// events (the proof first), and the next phase — verifying, or failed.
    fn conclude(
        &self,
        request: &RemediationRequest,
        admitted: Admitted,
        ran: Ran,
    ) -> (StageOutcome, Option<Execution>) {
        let Ran {
            ok,
            steps,
            mut events,
            finished_at,
            post,
        } = ran;
        let Admitted {
            workflow,
            target,
            mut execution,
            proven,
            ..
        } = admitted;
        execution.steps = steps;
        execution.finished_at = finished_at;
        execution.post_spec_hash = post.as_ref().map(spec_hash);
        execution.post_drift_hash = post.as_ref().map(drift_hash);
        let changed = execution
            .steps
            .iter()
            .filter(|s| matches!(s.status, StepStatus::Applied | StepStatus::AlreadyApplied))
            .count();
        execution.outcome = match (ok, self.settings.dry_run) {
            (false, _) => ExecutionOutcome::Failed,
            (true, true) => ExecutionOutcome::DryRun,
            (true, false) => ExecutionOutcome::Succeeded,
        };
        execution.message = match execution.outcome {
            ExecutionOutcome::Succeeded => format!(
                "{} ({}) on {target}: {} step(s) applied",
                workflow.id, execution.action_type, changed
            ),
            ExecutionOutcome::DryRun => format!(
                "dry run of {} on {target}: {} step(s) accepted by the API server, nothing changed",
                workflow.id,
                execution.steps.len()
            ),
            _ => {
                let failed = execution
                    .steps
                    .iter()
                    .find(|s| s.status == StepStatus::Failed);
                format!(
                    "{} on {target} failed at step {}: {}",
                    workflow.id,
                    failed.map_or(0, |s| s.index),
                    failed
                        .and_then(|s| StepFailure::of(&s.detail))
                        .map_or_else(|| "see the step".to_owned(), |f| f.error)
                )
            }
        };
        info!(outcome = ?execution.outcome, message = %execution.message, "execution finished");
        if let Some(m) = &self.metrics {
            let outcome = serde_json::to_value(execution.outcome)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            m.execution(
                &outcome,
                (execution.finished_at - execution.started_at)
                    .to_std()
                    .unwrap_or_default(),
            );
        }
        events.push(AuditDraft::execution(
            "executor",
            execution.message.clone(),
            &ExecutionPayload {
                workflow_id: execution.workflow_id.clone(),
                workflow_version: Some(execution.workflow_version.clone()),
                action_type: Some(execution.action_type.clone()),
                target: Some(execution.target.clone()),
                dry_run: Some(execution.dry_run),
                pre_spec_hash: execution.pre_spec_hash.clone(),
                post_spec_hash: execution.post_spec_hash.clone(),
                outcome: Some(execution.outcome),
                proposal: None,
            },
        ));
        let mut state = request.state.clone();
        if let Some(p) = proven {
            events.insert(
                0,
                AuditDraft::proof(
                    "prover",
                    format!("before the first write: {}", p.verdict.as_str()),
                    &p,
                ),
            );
            state.proof_before_write = Some(p);
        }
        let failed = (execution.outcome == ExecutionOutcome::Failed).then(|| execution.clone());
        let (next, reason) = match &failed {
            Some(e) => (Phase::Failed, Some(e.message.clone())),
            None => (Phase::Verifying, None),
        };
        state.execution = Some(execution);
        (StageOutcome::to(next, reason, state, events), failed)
    }
}

#[async_trait]
impl Stage for ExecutionStage {
    fn phase(&self) -> Phase {
        Phase::Executing
    }

    /// Admit, run the steps, conclude.
    #[instrument(skip_all, fields(request_id = %request.id, trace_id = %request.trace.trace_id_hex(), phase = "Executing"))]
    async fn run(&self, request: &RemediationRequest) -> Result<StageOutcome, StageError> {
        // Back from verification: the remediation made its target worse and is to be undone.
        if let Some(undo) = request
            .state
            .undo
            .as_ref()
            .filter(|u| u.decided && u.restore.is_none())
        {
            return self.undo(request, undo).await;
        }
        let admitted = match self.admit(request).await? {
            Admission::Admitted(a) => *a,
            Admission::Ended(outcome) => return Ok(*outcome),
        };
        let ran = self.run_steps(request, &admitted).await?;
        let (outcome, failed) = self.conclude(request, admitted, ran);
        if let Some(execution) = failed {
            self.remember_failure(request, &execution).await;
        }
        Ok(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Map, json};

    #[test]
    fn parameters_substitute_as_values_or_text() {
        let mut p = Map::new();
        p.insert("REPLICAS".into(), json!(4));
        p.insert("CONTAINER".into(), json!("app"));
        assert_eq!(substitute(&json!("${REPLICAS}"), &p), json!(4));
        assert_eq!(
            substitute(&json!("c=${CONTAINER}, n=${REPLICAS}"), &p),
            json!("c=app, n=4")
        );
        assert_eq!(substitute(&json!("${MISSING}"), &p), Value::Null);
        assert_eq!(
            substitute(&json!({"a": ["${CONTAINER}"]}), &p),
            json!({"a": ["app"]})
        );
    }

    #[test]
    fn the_root_owner_decides_the_target_parameters() {
        let mut selected = Map::new();
        selected.insert("TARGET_RESOURCE_NAME".into(), json!("something-else"));
        let t = Target::new("Deployment", "checkout", Some("shop".into()));
        let p = parameters(&selected, &t);
        assert_eq!(p["TARGET_RESOURCE_NAME"], "checkout");
        assert_eq!(p["TARGET_RESOURCE_NAMESPACE"], "shop");
    }

    #[test]
    fn job_names_are_deterministic_and_valid() {
        let id = uuid::Uuid::parse_str("0f6e2a1c-3b4d-4e5f-8a9b-0c1d2e3f4a5b").unwrap();
        assert_eq!(job_name(id, 1), "kubemedic-0f6e2a1c3b4d-1");
        assert!(job_name(id, 1).len() <= 63);
    }
}
