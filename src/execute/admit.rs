//! Admission: everything that must hold before the first write, as a chain of checks in the
//! order they run. Each check either passes or ends this pass with an outcome (blocked, waiting
//! for a slot, refused by the proof, a proposal handed to a human); the first that ends it
//! ends admission, and nothing after it runs.
//!
//! 1. [`ExecutionStage::approved_workflow`]: the selection names a workflow, the catalog still
//!    holds it at the approved version, and the target is the verified root owner.
//! 2. [`ExecutionStage::proposal`]: a proposal engine changes nothing; it goes to a human.
//! 3. [`ExecutionStage::not_opted_out`]: neither the target nor its namespace says
//!    `kubemedic.io/remediate: "false"`.
//! 4. First pass only (not when resuming after a crash: the history and the slots then hold
//!    this request's own run): [`ExecutionStage::guardrails`] on the target's history, and
//!    [`ExecutionStage::free_slot`] under the concurrency caps (waiting, not failing).
//! 5. [`ExecutionStage::locked`]: the target's execution lock is this request's.
//! 6. First pass only: the proof, right before the first write (after a crash our own writes
//!    may have moved the spec).
//! 7. Intent 0: the spec before any write, captured once.

use serde_json::Value;

use super::{CAP_RETRY, ExecutionStage, SLOT, guardrails, store_unavailable};
use crate::catalog::{Engine, Workflow, parameters, substitute};
use crate::cluster::context::{drift_hash, spec_hash};
use crate::domain::{
    AuditDraft, EngineKind, Execution, ExecutionOutcome, ExecutionPayload, Phase, PrepareDetail,
    Proof, RemediationRequest, SelectedWorkflow, StageError, StageOutcome, Target, Waiting,
};
use crate::execute::{Block, BlockKind};

/// What admission lets through: the approved workflow, its parameters, the target, and the
/// execution record as it starts.
pub(super) struct Admitted {
    /// The workflow as the catalog held it at admission (a catalog changed meanwhile does not
    /// change a run in progress).
    pub(super) workflow: Workflow,
    pub(super) params: serde_json::Map<String, Value>,
    pub(super) target: Target,
    pub(super) execution: Execution,
    /// The proof checked right before the first write (none when resuming after a crash).
    pub(super) proven: Option<Proof>,
}

/// Admission either lets the request through or ends this pass with an outcome.
pub(super) enum Admission {
    Admitted(Box<Admitted>),
    Ended(Box<StageOutcome>),
}

/// A check's verdict: `None` lets admission go on; `Some(outcome)` ends it.
type Check = Result<Option<StageOutcome>, StageError>;

/// Run one check: end admission with its outcome, or go on.
macro_rules! check {
    ($check:expr) => {
        if let Some(outcome) = $check {
            return Ok(Admission::Ended(Box::new(outcome)));
        }
    };
}

impl ExecutionStage {
    /// The chain of checks before the first write (the module's list, in that order).
    pub(super) async fn admit(
        &self,
        request: &RemediationRequest,
    ) -> Result<Admission, StageError> {
        let (selected, target, workflow) = self.approved_workflow(request)?;
        let params = parameters(&selected.parameters, &target);
        let mut execution = self.starting(selected, &workflow, &target, &params);
        check!(self.proposal(request, &workflow, &params, &execution));
        check!(self.not_opted_out(request, &target).await?);
        let resumed = !self
            .store
            .executions
            .intents(request.id)
            .await
            .map_err(store_unavailable)?
            .is_empty();
        if !resumed {
            check!(
                self.guardrails(request, &workflow, &target, &execution)
                    .await?
            );
            check!(self.free_slot(request, &target, &execution).await?);
        }
        check!(self.locked(request, &target).await?);
        let proven = if resumed {
            None
        } else {
            match self.prove_before_write(request, selected, &target).await? {
                Ok(p) => Some(p),
                Err(outcome) => return Ok(Admission::Ended(Box::new(outcome))),
            }
        };
        let prepared = self.intent_zero(request, &target).await?;
        execution.pre_drift_hash = prepared.pre_spec.as_ref().map(drift_hash);
        (execution.pre_spec_hash, execution.before) = (prepared.pre_spec_hash, prepared.before);
        Ok(Admission::Admitted(Box::new(Admitted {
            workflow,
            params,
            target,
            execution,
            proven,
        })))
    }

    /// 1. The selected workflow, at the version that was approved, and the verified root
    ///    owner it acts on. Anything missing fails the request: there is nothing to run.
    fn approved_workflow<'r>(
        &self,
        request: &'r RemediationRequest,
    ) -> Result<(&'r SelectedWorkflow, Target, Workflow), StageError> {
        let state = &request.state;
        let selected = state
            .selection
            .as_ref()
            .and_then(|s| s.selected.as_ref())
            .ok_or_else(|| StageError::Failed("no selected workflow to execute".into()))?;
        let target = state
            .analysis
            .as_ref()
            .and_then(|a| a.root_owner.clone())
            .ok_or_else(|| StageError::Failed("no verified root owner to act on".into()))?;
        let workflow = self
            .catalog
            .get()
            .workflow(&selected.workflow_id)
            .cloned()
            .ok_or_else(|| {
                StageError::Failed(format!(
                    "workflow {} is not in the catalog any more",
                    selected.workflow_id
                ))
            })?;
        if workflow.version != selected.version {
            return Err(StageError::Failed(format!(
                "workflow {} is at version {} in the catalog, {} was approved",
                workflow.id, workflow.version, selected.version
            )));
        }
        Ok((selected, target, workflow))
    }

    /// The execution record as it starts.
    fn starting(
        &self,
        selected: &SelectedWorkflow,
        workflow: &Workflow,
        target: &Target,
        params: &serde_json::Map<String, Value>,
    ) -> Execution {
        let started_at = self.clock.now();
        let engine = match &workflow.engine {
            Engine::Builtin { .. } => EngineKind::Builtin,
            Engine::Job { .. } => EngineKind::Job,
            Engine::Proposal { .. } => EngineKind::Proposal,
        };
        Execution {
            workflow_id: workflow.id.clone(),
            workflow_version: workflow.version.clone(),
            action_type: selected.action_type.clone(),
            engine,
            target: target.clone(),
            parameters: params.clone(),
            dry_run: self.settings.dry_run,
            pre_spec_hash: None,
            pre_drift_hash: None,
            before: None,
            post_spec_hash: None,
            post_drift_hash: None,
            started_at,
            finished_at: started_at,
            steps: vec![],
            outcome: ExecutionOutcome::Succeeded,
            message: String::new(),
            proposal: None,
        }
    }

    /// 2. A proposal changes nothing: it goes to a human with the change written up.
    fn proposal(
        &self,
        request: &RemediationRequest,
        workflow: &Workflow,
        params: &serde_json::Map<String, Value>,
        execution: &Execution,
    ) -> Option<StageOutcome> {
        let Engine::Proposal { template } = &workflow.engine else {
            return None;
        };
        let text = match substitute(&Value::String(template.clone()), params) {
            Value::String(s) => s,
            other => other.to_string(),
        };
        let mut execution = execution.clone();
        execution.outcome = ExecutionOutcome::Proposed;
        execution.message = format!("proposed for a human to apply: {text}");
        execution.proposal = Some(text.clone());
        let mut state = request.state.clone();
        state.execution = Some(execution);
        Some(StageOutcome::to(
            Phase::ManualReviewRequired,
            Some(format!(
                "proposed change for a human (nothing was applied): {text}"
            )),
            state,
            vec![AuditDraft::execution(
                "executor",
                format!("proposal: {text}"),
                &ExecutionPayload {
                    workflow_id: workflow.id.clone(),
                    proposal: Some(text),
                    ..Default::default()
                },
            )],
        ))
    }

    /// 3. Neither the target nor its namespace opted out.
    async fn not_opted_out(&self, request: &RemediationRequest, target: &Target) -> Check {
        Ok(self.opted_out(target).await?.map(|why| {
            let block = Block {
                kind: BlockKind::UnmanagedResource,
                message: why,
            };
            self.blocked(request, &block)
        }))
    }

    /// 4a. The guardrails, on what happened to the target before this request started
    ///     executing.
    async fn guardrails(
        &self,
        request: &RemediationRequest,
        workflow: &Workflow,
        target: &Target,
        execution: &Execution,
    ) -> Check {
        let started_at = execution.started_at;
        let g = &self.settings.guardrails;
        let since = started_at - g.lookback.max(g.failure_backoff);
        let history = self
            .store
            .history
            .history(&target.fingerprint(), since)
            .await
            .map_err(store_unavailable)?;
        Ok(guardrails::check(g, &history, &workflow.id, started_at)
            .map(|block| self.blocked(request, &block)))
    }

    /// 4b. A free slot under the concurrency caps (all running executions, and those in the
    ///     target's namespace). Without one the request waits and is tried again, with one
    ///     audit event when the wait starts, not one per retry.
    async fn free_slot(
        &self,
        request: &RemediationRequest,
        target: &Target,
        execution: &Execution,
    ) -> Check {
        let ns = target.namespace.as_deref();
        let all = self
            .store
            .executions
            .execution_locks(None)
            .await
            .map_err(store_unavailable)?;
        let others = |l: &&crate::store::ExecutionLock| l.request_id != request.id;
        let running = all.iter().filter(others).count();
        let in_ns = all
            .iter()
            .filter(others)
            .filter(|l| ns.is_some() && l.namespace.as_deref() == ns)
            .count();
        if running < self.settings.max_concurrent
            && in_ns < self.settings.max_concurrent_per_namespace
        {
            return Ok(None);
        }
        let message = format!(
            "{running} executions running, {in_ns} in this namespace (caps {} and {})",
            self.settings.max_concurrent, self.settings.max_concurrent_per_namespace
        );
        let state = &request.state;
        let already = state
            .waiting
            .as_ref()
            .filter(|w| w.dependency == SLOT)
            .map(|w| w.since);
        let events = match already {
            Some(_) => vec![],
            None => vec![AuditDraft::new(
                "execution_waiting",
                "executor",
                format!("waiting for a free execution slot: {message}"),
            )],
        };
        let mut state = state.clone();
        state.waiting = Some(Waiting {
            dependency: SLOT.into(),
            message,
            since: already.unwrap_or(execution.started_at),
        });
        Ok(Some(StageOutcome::later(
            Phase::Executing,
            state,
            execution.started_at + CAP_RETRY,
            events,
        )))
    }

    /// 5. The target's execution lock: one running execution per target, whichever replica
    ///    runs it. Held by another request, this one is blocked as `ResourceBusy`.
    pub(super) async fn locked(&self, request: &RemediationRequest, target: &Target) -> Check {
        let lock = self
            .store
            .executions
            .acquire_execution_lock(
                &target.fingerprint(),
                target.namespace.as_deref(),
                request.id,
            )
            .await
            .map_err(store_unavailable)?;
        if lock.request_id == request.id {
            return Ok(None);
        }
        let block = Block {
            kind: BlockKind::ResourceBusy,
            message: format!(
                "request {} is executing on {target} since {}",
                lock.request_id, lock.acquired_at
            ),
        };
        Ok(Some(self.blocked(request, &block)))
    }

    /// 7. Intent 0: the spec before the first write, its hash and the workload's pods then,
    ///    captured once (a resumed run reads what the first pass recorded). The spec is what
    ///    an undo restores; the pods, what verification compares with.
    async fn intent_zero(
        &self,
        request: &RemediationRequest,
        target: &Target,
    ) -> Result<PrepareDetail, StageError> {
        let object = self.current_object(target).await?;
        let spec = object.as_ref().and_then(|o| o.get("spec")).cloned();
        let pre = spec.as_ref().map(spec_hash);
        let before = match &object {
            Some(o) => self.health_now(target, o).await?,
            None => None,
        };
        let (intent, _) = self
            .store
            .executions
            .begin_intent(
                request.id,
                0,
                "prepare",
                &serde_json::to_value(PrepareDetail {
                    pre_spec_hash: pre,
                    pre_spec: spec,
                    before,
                })
                .unwrap_or(Value::Null),
            )
            .await
            .map_err(store_unavailable)?;
        // What the first pass recorded, when this run resumes one.
        Ok(PrepareDetail::read(&intent.detail))
    }
}
