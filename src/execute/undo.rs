//! Undoing a remediation that made its target worse (docs/adr/0035-undo-what-made-it-worse.md):
//! verification found the target worse and the policy said to undo; this restores the spec
//! intent 0 recorded before the first write, exactly once, after its own proof, and hands the
//! request to a person.
//!
//! Exactly once, like any step: the restore's intent (step [`UNDO_STEP`]) is committed before
//! the write; the write is a replace carrying the resourceVersion read and the stamp
//! `<request>/undo`, so a retry after a crash finds the stamp and does not write again, and a
//! change by somebody else between the read and the write is a conflict, not a lost update.
//!
//! The proof (obligations `undo.*`, declared in `domain::obligations`): the target is worse
//! than before (verification's finding); every step of the remediation is one a restored
//! spec takes back; the spec before was recorded; nobody changed the target since the
//! remediation (its spec hash is the one the execution left); the API server accepts the
//! restore in a dry run. Any of them failing leaves the target as it is.

use serde_json::{Value, json};
use tracing::{info, warn};

use super::stamp::{StampingWriter, is_stamped};
use super::{ExecutionStage, store_unavailable, unavailable};
use crate::actions::not_restorable;
use crate::cluster::ClusterWriter;
use crate::cluster::context::{drift_hash, spec_hash, unchanged_spec};
use crate::domain::Phase;
use crate::domain::obligations as ob;
use crate::domain::{
    AuditDraft, Execution, Obligation, PrepareDetail, Proof, ProofPoint, ProofVerdict, Proposer,
    RemediationRequest, Restore, StageError, StageOutcome, StepFailure, Target, UNDO_STEP, Undo,
};
use crate::notify::render::{MADE_WORSE, UNDONE};
use crate::store::IntentStatus;

impl ExecutionStage {
    /// Restore the recorded spec of the target `undo` found worse, once, and hand the request
    /// to a person.
    pub(super) async fn undo(
        &self,
        request: &RemediationRequest,
        undo: &Undo,
    ) -> Result<StageOutcome, StageError> {
        let execution = request
            .state
            .execution
            .as_ref()
            .ok_or_else(|| StageError::Failed("nothing was executed to undo".into()))?;
        let target = &execution.target;
        if let Some(blocked) = self.locked(request, target).await? {
            return Ok(blocked);
        }
        let intents = self
            .store
            .executions
            .intents(request.id)
            .await
            .map_err(store_unavailable)?;
        let recorded = intents
            .iter()
            .find(|i| i.step == 0)
            .and_then(|i| PrepareDetail::read(&i.detail).pre_spec)
            .filter(Value::is_object);
        let stamp = format!("{}/undo", request.id);
        let (intent, fresh) = self
            .store
            .executions
            .begin_intent(
                request.id,
                UNDO_STEP as i32,
                "undo",
                &json!({"pre_spec_hash": execution.pre_spec_hash}),
            )
            .await
            .map_err(store_unavailable)?;
        let restore = match intent.status {
            IntentStatus::Applied => {
                self.restored(execution, None, "restored before a restart; not repeated")
            }
            IntentStatus::Failed => self.not_restored(
                None,
                StepFailure::of(&intent.detail).map_or_else(
                    || "the restore failed before a restart".to_owned(),
                    |f| f.error,
                ),
            ),
            IntentStatus::Started => {
                let object = self.current_object(target).await?;
                if !fresh && object.as_ref().is_some_and(|o| is_stamped(o, &stamp)) {
                    self.settle_undo(
                        request,
                        IntentStatus::Applied,
                        &json!({"reconciled": "the target carries the undo's stamp"}),
                    )
                    .await?;
                    self.restored(execution, None, "restored before a restart; not repeated")
                } else {
                    self.restore(request, execution, undo, object, recorded, &stamp)
                        .await?
                }
            }
        };
        Ok(self.conclude_undo(request, execution, undo, restore).await)
    }

    /// The proof, then the write.
    async fn restore(
        &self,
        request: &RemediationRequest,
        execution: &Execution,
        undo: &Undo,
        object: Option<Value>,
        recorded: Option<Value>,
        stamp: &str,
    ) -> Result<Restore, StageError> {
        let target = &execution.target;
        // What an autoscaler sets is its own: not a change to undo, nor one to overwrite.
        let autoscaled = match crate::cluster::autoscaled(self.reader.as_ref(), target).await {
            Ok(a) => a,
            Err(e) if e.is_unreachable() => return Err(unavailable(&e)),
            Err(_) => false,
        };
        let mut proof = self.undo_proof(
            request,
            execution,
            undo,
            object.as_ref(),
            recorded.as_ref(),
            autoscaled,
        );
        let (Some(object), Some(pre)) = (object, recorded) else {
            return self.refused(request, proof).await;
        };
        if proof.verdict != ProofVerdict::Proven {
            return self.refused(request, proof).await;
        }
        let live_replicas = object.pointer("/spec/replicas").cloned();
        let mut restored = object;
        restored["spec"] = pre.clone();
        if autoscaled && let Some(n) = live_replicas {
            restored["spec"]["replicas"] = n;
        }
        let w = StampingWriter::new(
            self.writer.clone(),
            stamp.to_owned(),
            format!(
                "kubemedic remediation {}: undo {}",
                request.id, execution.workflow_id
            ),
        );
        let ns = target.namespace.as_deref();
        // The dry run: the API server accepts the recorded spec on the object as read.
        let accepted = async {
            let res = self.reader.resource(&target.kind).await?;
            w.replace(&res, ns, &target.name, &restored, true)
                .await
                .map(|_| res)
        }
        .await;
        let res = match accepted {
            Ok(res) => {
                proof.obligations.push(dry_run_accepted(target, None));
                res
            }
            Err(e) if e.is_unreachable() => return Err(unavailable(&e)),
            Err(e) => {
                proof
                    .obligations
                    .push(dry_run_accepted(target, Some(e.message)));
                proof.verdict = ProofVerdict::Refuted;
                return self.refused(request, proof).await;
            }
        };
        match w.replace(&res, ns, &target.name, &restored, false).await {
            Ok(_) => {
                self.settle_undo(
                    request,
                    IntentStatus::Applied,
                    &json!({"restored_spec_hash": spec_hash(&restored["spec"])}),
                )
                .await?;
                let mut done = self.restored(
                    execution,
                    Some(proof),
                    if autoscaled {
                        "restored the spec recorded before the remediation's first write, with the replicas its autoscaler set"
                    } else {
                        "restored the spec recorded before the remediation's first write"
                    },
                );
                done.restored_spec_hash = Some(spec_hash(&restored["spec"]));
                Ok(done)
            }
            Err(e) if e.is_unreachable() => Err(unavailable(&e)),
            Err(e) => {
                let why = format!("the API server refused the restore: {}", e.message);
                self.settle_undo(
                    request,
                    IntentStatus::Failed,
                    &StepFailure::new(why.clone()).to_value(),
                )
                .await?;
                Ok(self.not_restored(Some(proof), why))
            }
        }
    }

    /// The undo's obligations as far as the cluster and the records answer them (the dry
    /// run is added by the caller).
    fn undo_proof(
        &self,
        request: &RemediationRequest,
        execution: &Execution,
        undo: &Undo,
        object: Option<&Value>,
        recorded: Option<&Value>,
        autoscaled: bool,
    ) -> Proof {
        let target = &execution.target;
        let spec = object.and_then(|o| o.get("spec"));
        let now = spec.map(spec_hash);
        let obligations = vec![
            readable(target, spec),
            worse_than_before(undo),
            restored_by_spec(execution),
            state_recorded(execution, recorded),
            unchanged_since(execution, spec, autoscaled),
        ];
        let verdict = if obligations.iter().all(Obligation::holds) {
            ProofVerdict::Proven
        } else {
            ProofVerdict::Refuted
        };
        Proof {
            action_type: execution.action_type.clone(),
            workflow_id: execution.workflow_id.clone(),
            parameters: execution.parameters.clone(),
            proposer: request
                .state
                .proof
                .as_ref()
                .map_or(Proposer::Offline, |p| p.proposer),
            point: ProofPoint::BeforeUndo,
            verdict,
            obligations,
            target: target.clone(),
            spec_hash: now,
            drift_hash: spec.map(drift_hash),
            change: None,
            checked_at: self.clock.now(),
        }
    }

    /// The proof refused the restore: nothing is written, the intent says why.
    async fn refused(
        &self,
        request: &RemediationRequest,
        proof: Proof,
    ) -> Result<Restore, StageError> {
        let why = format!("its proof does not hold — {}", proof.refutation());
        self.settle_undo(
            request,
            IntentStatus::Failed,
            &StepFailure::new(why.clone()).to_value(),
        )
        .await?;
        Ok(self.not_restored(Some(proof), why))
    }

    async fn settle_undo(
        &self,
        request: &RemediationRequest,
        status: IntentStatus,
        detail: &Value,
    ) -> Result<(), StageError> {
        self.store
            .executions
            .finish_intent(request.id, UNDO_STEP as i32, status, detail)
            .await
            .map_err(store_unavailable)
    }

    fn restored(&self, execution: &Execution, proof: Option<Proof>, message: &str) -> Restore {
        Restore {
            restored: true,
            message: format!("{}: {message}", execution.target),
            proof,
            restored_spec_hash: execution.pre_spec_hash.clone(),
            at: self.clock.now(),
        }
    }

    fn not_restored(&self, proof: Option<Proof>, why: String) -> Restore {
        Restore {
            restored: false,
            message: format!("nothing was written: {why}"),
            proof,
            restored_spec_hash: None,
            at: self.clock.now(),
        }
    }

    /// Record the restore, tell the approvers, and hand the request to a person.
    async fn conclude_undo(
        &self,
        request: &RemediationRequest,
        execution: &Execution,
        undo: &Undo,
        restore: Restore,
    ) -> StageOutcome {
        let made_worse = format!(
            "{} made {} worse: {}",
            execution.workflow_id,
            execution.target,
            undo.worse.join("; ")
        );
        let reason = if restore.restored {
            format!(
                "{made_worse}; undone: {} — a person must look",
                restore.message
            )
        } else {
            format!(
                "{made_worse}; not undone: {} — a person must look",
                restore.message
            )
        };
        if restore.restored {
            info!(%reason, "undone");
        } else {
            warn!(%reason, "not undone");
        }
        let note = if restore.restored {
            format!("{UNDONE} {reason}")
        } else {
            format!("{MADE_WORSE} {reason}")
        };
        if let Err(e) = self
            .store
            .approvals
            .approval_made_worse(request.id, &note)
            .await
        {
            warn!(error = %e, "could not tell the approvers about the undo");
        }
        let mut events = Vec::new();
        if let Some(p) = &restore.proof {
            events.push(AuditDraft::proof(
                "prover",
                format!("before the undo: {}", p.verdict.as_str()),
                p,
            ));
        }
        events.push(
            AuditDraft::new(
                crate::domain::audit::UNDO,
                "executor",
                if restore.restored {
                    format!("undone: {}", restore.message)
                } else {
                    format!("not undone: {}", restore.message)
                },
            )
            .with_payload(serde_json::to_value(&restore).unwrap_or_default()),
        );
        let mut state = request.state.clone();
        if let Some(u) = state.undo.as_mut() {
            u.restore = Some(restore);
        }
        StageOutcome::to(Phase::ManualReviewRequired, Some(reason), state, events)
    }
}

/// `dry-run.accepted`: the API server accepts the recorded spec on the object as read
/// (`refused`: what it said instead).
fn dry_run_accepted(target: &Target, refused: Option<String>) -> Obligation {
    match refused {
        None => ob::every::DRY_RUN.holds(vec![format!(
            "the API server accepts {target} with the spec recorded before the remediation"
        )]),
        Some(why) => ob::every::DRY_RUN.fails(vec![why]),
    }
}

/// `undo.readable`: the target can be read, with its spec.
fn readable(target: &Target, spec: Option<&Value>) -> Obligation {
    match spec {
        Some(_) => ob::undo::READABLE.holds(vec![format!("{target} read")]),
        None => ob::undo::READABLE.fails(vec![format!("{target} cannot be read (gone?)")]),
    }
}

/// `undo.worse-than-before`: verification found the target worse than before the remediation.
fn worse_than_before(undo: &Undo) -> Obligation {
    ob::undo::WORSE_THAN_BEFORE.check(
        !undo.worse.is_empty(),
        undo.worse
            .iter()
            .cloned()
            .chain([
                format!("before: {}", undo.before.summary()),
                format!("after: {}", undo.after.summary()),
            ])
            .collect(),
    )
}

/// `undo.restored-by-spec`: every step changed only the target's spec, so writing the spec
/// recorded before them back restores what was.
fn restored_by_spec(execution: &Execution) -> Obligation {
    match not_restorable(execution) {
        None => ob::undo::RESTORED_BY_SPEC.holds(vec![format!(
            "steps: {}",
            execution
                .steps
                .iter()
                .map(|s| s.action.name())
                .collect::<Vec<_>>()
                .join(", ")
        )]),
        Some(why) => ob::undo::RESTORED_BY_SPEC.fails(vec![why]),
    }
}

/// `undo.state-recorded`: the spec recorded before the first write is there, and hashes to
/// what the execution recorded then.
fn state_recorded(execution: &Execution, recorded: Option<&Value>) -> Obligation {
    let recorded_hash = recorded.map(spec_hash);
    ob::undo::STATE_RECORDED.check(
        recorded_hash.is_some() && recorded_hash == execution.pre_spec_hash,
        vec![match (&recorded_hash, &execution.pre_spec_hash) {
            (Some(h), Some(pre)) if h == pre => {
                format!("spec {h} recorded before the first write")
            }
            (Some(h), pre) => format!(
                "the recorded spec hashes to {h}, the execution recorded {}",
                pre.as_deref().unwrap_or("none")
            ),
            (None, _) => "no spec was recorded before the first write".into(),
        }],
    )
}

/// `undo.unchanged-since`: nobody changed the spec since the remediation wrote it (`spec`, as
/// read now), so the restore overwrites nothing but the remediation. Where an autoscaler sets
/// the replicas (`autoscaled`), its scaling is no such change ([`unchanged_spec`]) and the
/// restore keeps the count it set.
fn unchanged_since(execution: &Execution, spec: Option<&Value>, autoscaled: bool) -> Obligation {
    let holds = spec.is_some_and(|s| {
        unchanged_spec(
            execution.post_spec_hash.as_deref(),
            execution.post_drift_hash.as_deref(),
            s,
            autoscaled,
        )
    });
    ob::undo::UNCHANGED_SINCE.check(
        holds,
        vec![format!(
            "spec now {}, after the remediation {}{}",
            spec.map(spec_hash).as_deref().unwrap_or("unreadable"),
            execution
                .post_spec_hash
                .as_deref()
                .unwrap_or("not recorded"),
            if autoscaled {
                " (replicas left out: an autoscaler owns them)"
            } else {
                ""
            }
        )],
    )
}
