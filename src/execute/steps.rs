//! Running a workflow's steps, each exactly once across crashes and replicas: a built-in step
//! behind its intent (begun, then settled applied or failed; a step found begun after a crash
//! is reconciled by reading its object's stamp before anything is written again), and the Job
//! engine's one Job (its deterministic name is the mutex) with its sanitised log.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};
use tracing::warn;

use super::stamp::{StampingWriter, is_stamped};
use super::{ExecutionStage, store_unavailable, unavailable};
use crate::actions::BuiltinAction;
use crate::catalog::{Engine, Workflow};
use crate::cluster::jobs::{self, JobResult};
use crate::cluster::{ClusterError, ErrorKind, ListQuery, LogQuery};
use crate::domain::{
    AuditDraft, ExecutionStep, RemediationRequest, StageError, StepStatus, Target,
};
use crate::domain::{JOB_STEP, StepDone, StepFailure, StepPayload};
use crate::redact::sanitize_text;
use crate::store::IntentStatus;

/// The deterministic name of the Job a request's step runs (the API server's AlreadyExists is
/// the mutex).
pub fn job_name(request: uuid::Uuid, step: u32) -> String {
    format!("kubemedic-{}-{step}", &request.simple().to_string()[..12])
}

pub(super) struct Run<'a> {
    pub(super) stage: &'a ExecutionStage,
    pub(super) request: &'a RemediationRequest,
    pub(super) target: Target,
    pub(super) steps: Vec<ExecutionStep>,
    pub(super) events: Vec<AuditDraft>,
}

impl Run<'_> {
    fn now(&self) -> DateTime<Utc> {
        self.stage.clock.now()
    }

    fn stamp(&self, step: u32) -> String {
        format!("{}/{step}", self.request.id)
    }

    fn writer(&self, step: u32, action: &str) -> StampingWriter {
        StampingWriter::new(
            self.stage.writer.clone(),
            self.stamp(step),
            format!("kubemedic remediation {}: {action}", self.request.id),
        )
    }

    fn record(&mut self, index: u32, action: StepDone, status: StepStatus, detail: Value) {
        let message = match status {
            StepStatus::Applied => format!("step {index} {action}: applied"),
            StepStatus::AlreadyApplied => {
                format!("step {index} {action}: already applied before a restart; not repeated")
            }
            StepStatus::DryRun => format!("step {index} {action}: dry run, nothing changed"),
            StepStatus::Failed => format!("step {index} {action}: failed"),
        };
        self.events.push(AuditDraft::step(
            "executor",
            message,
            &StepPayload {
                step: index,
                action: action.clone(),
                status: Some(status),
                detail: detail.clone(),
            },
        ));
        self.steps.push(ExecutionStep {
            index,
            action,
            status,
            detail,
            at: self.now(),
        });
    }

    /// Whether a step whose intent was left `started` (a crash between intent and settle)
    /// reached the cluster.
    async fn reconcile(&self, step: u32, object: Option<&Target>) -> Result<bool, ClusterError> {
        let Some(object) = object else {
            return Ok(false);
        };
        let res = self.stage.reader.resource(&object.kind).await?;
        match self
            .stage
            .reader
            .get(&res, object.namespace.as_deref(), &object.name)
            .await
        {
            Ok(o) => Ok(is_stamped(&o, &self.stamp(step))),
            // A deleted pod: gone means deleted (by us or anyone; deleting again is moot).
            Err(e) if e.kind == ErrorKind::NotFound && object.kind == "Pod" => Ok(true),
            Err(e) => Err(e),
        }
    }

    pub(super) async fn builtin_step(
        &mut self,
        index: u32,
        builtin: BuiltinAction,
        args: &BTreeMap<String, Value>,
    ) -> Result<bool, StageError> {
        let dry_run = self.stage.settings.dry_run;
        let action = builtin.name();
        let object = builtin.object_of(args, &self.target);
        let (intent, fresh) = self
            .stage
            .store
            .executions
            .begin_intent(
                self.request.id,
                index as i32,
                action,
                &json!({"object": object, "args": args, "dry_run": dry_run}),
            )
            .await
            .map_err(store_unavailable)?;
        match intent.status {
            IntentStatus::Applied => {
                self.record(
                    index,
                    builtin.into(),
                    StepStatus::AlreadyApplied,
                    intent.detail,
                );
                return Ok(true);
            }
            IntentStatus::Failed => {
                self.record(index, builtin.into(), StepStatus::Failed, intent.detail);
                return Ok(false);
            }
            // Left `started` by an attempt that crashed around the write: look before writing
            // again. A step that only reads is simply run again.
            IntentStatus::Started if !fresh && !dry_run && !builtin.is_read_only() => {
                match self.reconcile(index, object.as_ref()).await {
                    Ok(true) => {
                        let detail = json!({"reconciled": "the object carries this step's stamp"});
                        self.settle(index, IntentStatus::Applied, &detail).await?;
                        self.record(index, builtin.into(), StepStatus::AlreadyApplied, detail);
                        return Ok(true);
                    }
                    Ok(false) => {}
                    Err(e) if e.is_unreachable() => return Err(unavailable(&e)),
                    Err(e) => warn!(error = %e, "cannot reconcile the step; running it"),
                }
            }
            IntentStatus::Started => {}
        }
        let w = self.writer(index, action);
        let result = builtin
            .run(
                self.stage.reader.as_ref(),
                &w,
                args,
                &self.target,
                self.now(),
                dry_run,
            )
            .await;
        match result {
            Ok(outcome) => {
                let detail = serde_json::to_value(&outcome).unwrap_or(Value::Null);
                self.settle(index, IntentStatus::Applied, &detail).await?;
                let status = if dry_run {
                    StepStatus::DryRun
                } else {
                    StepStatus::Applied
                };
                self.record(index, builtin.into(), status, detail);
                Ok(true)
            }
            Err(e) if e.is_unreachable() => Err(unavailable(&e)),
            Err(e) => {
                let detail = StepFailure {
                    kind: serde_json::to_value(e.kind).ok(),
                    ..StepFailure::new(e.message)
                }
                .to_value();
                self.settle(index, IntentStatus::Failed, &detail).await?;
                self.record(index, builtin.into(), StepStatus::Failed, detail);
                Ok(false)
            }
        }
    }

    async fn settle(
        &self,
        index: u32,
        status: IntentStatus,
        detail: &Value,
    ) -> Result<(), StageError> {
        self.stage
            .store
            .executions
            .finish_intent(self.request.id, index as i32, status, detail)
            .await
            .map_err(store_unavailable)
    }

    /// The job engine: one Job, named after the request, parameters as env.
    pub(super) async fn job_step(
        &mut self,
        workflow: &Workflow,
        params: &Map<String, Value>,
    ) -> Result<bool, StageError> {
        let Engine::Job {
            image,
            command,
            service_account,
            timeout_seconds,
        } = &workflow.engine
        else {
            return Ok(false);
        };
        let index = 1;
        let name = job_name(self.request.id, index);
        let ns = self
            .target
            .namespace
            .clone()
            .unwrap_or_else(|| self.stage.settings.job_namespace.clone());
        let env: Vec<Value> = params
            .iter()
            .map(|(k, v)| {
                let value = match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                json!({"name": k, "value": value})
            })
            .collect();
        let mut container = json!({"name": "remediation", "image": image, "env": env});
        if !command.is_empty() {
            container["command"] = json!(command);
        }
        // The Job and its pod both say who made them and for which request.
        let labels = json!({"app.kubernetes.io/managed-by": "kubemedic",
            "kubemedic.io/request": self.request.id.to_string()});
        let job = json!({
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {
                "backoffLimit": 0,
                "activeDeadlineSeconds": timeout_seconds,
                "ttlSecondsAfterFinished": 86400,
                "template": {"metadata": {"labels": labels}, "spec": {
                    "serviceAccountName": service_account,
                    "restartPolicy": "Never",
                    "containers": [container],
                }},
            },
        });
        self.stage
            .store
            .executions
            .begin_intent(
                self.request.id,
                index as i32,
                JOB_STEP,
                &json!({"job": name, "namespace": ns}),
            )
            .await
            .map_err(store_unavailable)?;
        if self.stage.settings.dry_run {
            let detail = json!({"job": job, "note": "dry run: the Job was not created"});
            self.settle(index, IntentStatus::Applied, &detail).await?;
            self.record(index, StepDone::Job, StepStatus::DryRun, detail);
            return Ok(true);
        }
        let w = self.writer(index, JOB_STEP);
        let mut status = StepStatus::Applied;
        match jobs::create_job(self.stage.reader.as_ref(), &w, &ns, &job, false).await {
            Ok(_) => {}
            // The Job of this request and step exists: a previous attempt created it.
            Err(e) if e.kind == ErrorKind::Conflict => status = StepStatus::AlreadyApplied,
            Err(e) if e.is_unreachable() => return Err(unavailable(&e)),
            Err(e) => {
                let detail = StepFailure {
                    job: Some(name.clone()),
                    ..StepFailure::new(e.message)
                }
                .to_value();
                self.settle(index, IntentStatus::Failed, &detail).await?;
                self.record(index, StepDone::Job, StepStatus::Failed, detail);
                return Ok(false);
            }
        }
        let waited = jobs::wait_job(
            self.stage.reader.as_ref(),
            &ns,
            &name,
            Duration::from_secs(*timeout_seconds),
            Duration::from_secs(2),
        )
        .await;
        let (result, _) = match waited {
            Ok(r) => r,
            Err(e) if e.is_unreachable() => return Err(unavailable(&e)),
            Err(e) => (JobResult::Failed, json!({"error": e.message})),
        };
        let logs = self.job_logs(&ns, &name).await;
        let ok = result == JobResult::Succeeded;
        let detail = json!({"job": name, "namespace": ns, "result": result, "logs": logs});
        let intent = if ok {
            IntentStatus::Applied
        } else {
            IntentStatus::Failed
        };
        self.settle(index, intent, &detail).await?;
        self.record(
            index,
            StepDone::Job,
            if ok { status } else { StepStatus::Failed },
            detail,
        );
        Ok(ok)
    }

    /// The Job's pod logs, sanitised and capped, for the audit trail.
    async fn job_logs(&self, ns: &str, job: &str) -> String {
        let reader = self.stage.reader.as_ref();
        let Ok(pods) = reader.resource("Pod").await else {
            return String::new();
        };
        let Ok(list) = reader
            .list(
                &pods,
                Some(ns),
                &ListQuery::labels(format!("job-name={job}")),
            )
            .await
        else {
            return String::new();
        };
        let mut out = String::new();
        for p in list.iter().take(3) {
            let q = LogQuery {
                tail_lines: Some(200),
                ..Default::default()
            };
            if let Ok(text) = reader.logs(ns, crate::cluster::obj::name(p), &q).await {
                out.push_str(&sanitize_text(&text));
            }
        }
        out.chars().take(8_000).collect()
    }
}
