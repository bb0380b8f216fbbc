//! Proof obligations (DESIGN §3.7a): before anyone may approve or run a remediation, the facts
//! that make it the right action and a safe one are checked against the cluster — whoever
//! proposed it (the offline rules, a model, an approver's alternative).
//!
//! Input: a [`Claim`] — an action type with its workflow, parameters and verified target, and
//! the signal it answers. Output: a [`Proof`] — every obligation of that action type with the
//! evidence it was judged on, the verdict, the target's spec hash the proof is bound to, and
//! (at selection) the change a server-side dry run says the action would make.
//!
//! Invariants:
//! - Each of the catalog's action types has its obligations here; an action type kubemedic
//!   does not know is `Unverified`, never `Proven`.
//! - An obligation the cluster could not be read for does not hold (fail closed); only an
//!   unreachable API server stops the proof (the request waits and tries again).
//! - Proving reads the cluster and dry-runs through a writer that can only dry-run: it never
//!   changes anything.
//! - The proof is bound to the target's spec: at selection it must be the spec that was
//!   investigated, before the write the spec that was proven (and approved).

mod capacity;
mod change;
pub mod findings;
pub mod graph;
mod node;
mod resolved;
mod resources;
mod scene;
mod workload;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::catalog::{Catalog, Engine, parameters, substitute};
use crate::clock::Clock;
use crate::cluster::context::{drift_hash, spec_hash, unchanged_spec};
use crate::cluster::obj::at;
use crate::cluster::observed::template_images;
use crate::cluster::{ClusterError, ClusterReader, ClusterWriter, DryRunWriter};
use crate::domain::obligations::{self as ob, ObligationSpec};
use crate::domain::{
    ActionParams, ActionType, DryRunChange, LimitResource, Neighbourhood, Obligation,
    ObligationStatus, Proof, ProofPoint, ProofVerdict, Proposer, SignalContext, Target,
};
use crate::live::Live;
use crate::monitoring::PrometheusClient;

pub use crate::cluster::observed::image_digest;
pub use findings::{NotReadyEvent, not_ready_events, readiness_flaps};
use scene::Scene;

pub use workload::{configmaps, secrets};

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProveError {
    /// The API server cannot be reached: nothing can be proven now; try again later.
    #[error("cluster unavailable: {0}")]
    Unavailable(String),
}

impl From<ClusterError> for ProveError {
    fn from(e: ClusterError) -> Self {
        ProveError::Unavailable(e.message)
    }
}

/// What is to be proven.
#[derive(Debug, Clone)]
pub struct Claim<'a> {
    pub action_type: &'a ActionType,
    pub workflow_id: &'a str,
    pub parameters: &'a Map<String, Value>,
    /// The verified root owner.
    pub target: &'a Target,
    pub proposer: Proposer,
    pub signal: &'a SignalContext,
    /// The spec hash the proof must find: the one investigated (at selection) or the one
    /// proven and approved (before the write). `None`: not bound.
    pub bound_to: Option<Binding>,
}

/// The spec a proof is bound to.
#[derive(Debug, Clone, PartialEq)]
pub struct Binding {
    pub spec_hash: String,
    /// Compared instead when an autoscaler owns the replicas.
    pub drift_hash: Option<String>,
    /// What was shown when the binding was made (for the evidence).
    pub when: &'static str,
}

impl Binding {
    /// The binding of an earlier proof.
    pub fn of(proof: &Proof, when: &'static str) -> Option<Self> {
        Some(Self {
            spec_hash: proof.spec_hash.clone()?,
            drift_hash: proof.drift_hash.clone(),
            when,
        })
    }
}

/// Checks claims against the cluster.
pub struct Prover {
    reader: Arc<dyn ClusterReader>,
    /// For the dry run; `None` shows no change (nothing to dry-run against).
    writer: Option<Arc<dyn ClusterWriter>>,
    /// What the dry run's actions read the objects they write from ([`Prover::with_write_reads`]).
    write_reader: Arc<dyn ClusterReader>,
    catalog: Arc<Live<Catalog>>,
    clock: Arc<dyn Clock>,
    /// Asked whether an alert's condition the objects cannot show still holds ("resolved").
    prometheus: Option<Arc<PrometheusClient>>,
}

impl Prover {
    pub fn new(
        reader: Arc<dyn ClusterReader>,
        writer: Option<Arc<dyn ClusterWriter>>,
        catalog: Arc<Live<Catalog>>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            write_reader: reader.clone(),
            reader,
            writer,
            catalog,
            clock,
            prometheus: None,
        }
    }

    /// Read what the dry run writes from `reader` (the API server) rather than from the reader
    /// the obligations are judged on (which may be a watch-backed cache): a write sent with the
    /// resource version it was read at must be read fresh, or the dry run conflicts with a
    /// change the cache has not brought yet (docs/adr/0038-watch-cache.md).
    pub fn with_write_reads(mut self, reader: Arc<dyn ClusterReader>) -> Self {
        self.write_reader = reader;
        self
    }

    /// Ask `prometheus` whether an alert's condition that the cluster's objects cannot show
    /// (its expression reads `up` or an application's series) still holds, before a "resolved".
    pub fn with_prometheus(mut self, prometheus: Option<Arc<PrometheusClient>>) -> Self {
        self.prometheus = prometheus;
        self
    }

    /// The catalog in force now.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.get()
    }

    /// Prove a claim: its action type's obligations, the binding to the target's spec, and —
    /// at selection — the dry run.
    pub async fn prove(&self, claim: &Claim<'_>, point: ProofPoint) -> Result<Proof, ProveError> {
        let now = self.clock.now();
        let scene = Scene::new(
            self.reader.clone(),
            claim.target.clone(),
            now,
            claim.signal.clone(),
        );
        let params = parameters(claim.parameters, claim.target);
        let known = claim.action_type.is_builtin();
        let mut obligations = match ActionParams::read(claim.action_type, &params) {
            ActionParams::Rollback { to_revision } => readable(
                workload::rollback(&scene, to_revision).await,
                &ob::rollback::READABLE,
            )?,
            ActionParams::Restart => {
                readable(workload::restart(&scene).await, &ob::restart::READABLE)?
            }
            ActionParams::Scale { replicas } => readable(
                workload::scale(&scene, replicas).await,
                &ob::scale::READABLE,
            )?,
            ActionParams::DeletePod { pod } => readable(
                workload::delete_pod(&scene, pod.as_deref()).await,
                &ob::delete::READABLE,
            )?,
            ActionParams::Limit {
                resource,
                container,
                limit,
                ..
            } => readable(
                resources::raise_limit(&scene, resource, container.as_deref(), limit.as_deref())
                    .await,
                match resource {
                    LimitResource::Memory => &ob::memory::READABLE,
                    LimitResource::Cpu => &ob::cpu::READABLE,
                },
            )?,
            ActionParams::HpaMax { hpa, max_replicas } => readable(
                capacity::hpa_max(&scene, hpa.as_deref(), max_replicas).await,
                &ob::hpa::READABLE,
            )?,
            ActionParams::ExpandPvc { pvc, new_size } => readable(
                capacity::expand_pvc(&scene, pvc.as_deref(), new_size.as_deref()).await,
                &ob::pvc::READABLE,
            )?,
            ActionParams::RelaxPdb {
                pdb,
                max_unavailable,
            } => readable(
                capacity::relax_pdb(&scene, pdb.as_deref(), max_unavailable).await,
                &ob::pdb::READABLE,
            )?,
            ActionParams::Drain => readable(node::drain(&scene).await, &ob::drain::READABLE)?,
            ActionParams::RemoveTaint { key, effect } => readable(
                node::remove_taint(&scene, key.as_deref(), effect.as_deref()).await,
                &ob::taint::READABLE,
            )?,
            ActionParams::GitRevert { proposed_change } => readable(
                capacity::git_revert(&scene, proposed_change.as_deref()).await,
                &ob::gitrevert::READABLE,
            )?,
            ActionParams::Custom(_) => vec![],
        };
        let (spec, drift, binding) = self.binding(&scene, claim.bound_to.as_ref()).await?;
        obligations.extend(binding);
        let change = match point {
            ProofPoint::Selection => Some(self.dry_run(claim, &params).await?),
            ProofPoint::BeforeWrite | ProofPoint::BeforeUndo => None,
        };
        obligations.extend(change.as_ref().and_then(dry_run_accepted));
        let verdict = if obligations.iter().any(|o| !o.holds()) {
            ProofVerdict::Refuted
        } else if known {
            ProofVerdict::Proven
        } else {
            ProofVerdict::Unverified
        };
        Ok(Proof {
            action_type: claim.action_type.to_owned(),
            workflow_id: claim.workflow_id.to_owned(),
            parameters: params,
            proposer: claim.proposer,
            point,
            verdict,
            obligations,
            target: claim.target.clone(),
            spec_hash: spec,
            drift_hash: drift,
            change,
            checked_at: now,
        })
    }

    /// What `target` depends on, when a culprit stands out — unhealthy now, or changed just
    /// before its failures began ([`graph::Neighbourhood::culprit`]) — for the person who takes
    /// over a refuted proposal.
    pub async fn culprit(&self, target: &Target) -> Result<Option<Neighbourhood>, ProveError> {
        let n = graph::build(self.reader.clone(), target, self.clock.now())
            .await
            .map_err(ProveError::from)?;
        Ok(n.culprit().is_some().then_some(n))
    }

    /// The request whose change the target carries (`kubemedic.io/remediation:
    /// <request>/<step>`, stamped on every write kubemedic makes), when kubemedic's was the last
    /// write to it and came at `since` or later; `None` otherwise (someone else wrote last, the
    /// stamp is older, or the target cannot be read).
    pub async fn stamped_by(
        &self,
        target: &Target,
        since: chrono::DateTime<chrono::Utc>,
    ) -> Result<Option<String>, ProveError> {
        let res = match self.reader.resource(&target.kind).await {
            Ok(res) => res,
            Err(e) if e.is_unreachable() => return Err(e.into()),
            Err(_) => return Ok(None),
        };
        let obj = match self
            .reader
            .get(&res, target.namespace.as_deref(), &target.name)
            .await
        {
            Ok(o) => o,
            Err(e) if e.is_unreachable() => return Err(e.into()),
            Err(_) => return Ok(None),
        };
        // The last write is kubemedic's, since `since`.
        let last = last_write(&obj).and_then(|(t, manager)| {
            Some((t.parse::<chrono::DateTime<chrono::Utc>>().ok()?, manager))
        });
        if !last.is_some_and(|(t, manager)| manager == "kubemedic" && t >= since) {
            return Ok(None);
        }
        Ok(
            crate::cluster::obj::annotation(&obj, crate::domain::REMEDIATION_ANNOTATION)
                .and_then(|stamp| stamp.split('/').next())
                .filter(|id| !id.is_empty())
                .map(str::to_owned),
        )
    }

    /// Prove "no action needed, the problem is resolved": the desired state is met.
    pub async fn prove_resolved(
        &self,
        target: &Target,
        signal: &SignalContext,
        proposer: Proposer,
    ) -> Result<Proof, ProveError> {
        let now = self.clock.now();
        let scene = Scene::new(self.reader.clone(), target.clone(), now, signal.clone());
        let obligations = readable(
            resolved::resolved(&scene, self.prometheus.as_deref()).await,
            &ob::resolved::READABLE,
        )?;
        let (spec, drift, _) = self.binding(&scene, None).await?;
        let verdict = if obligations.iter().all(Obligation::holds) {
            ProofVerdict::Proven
        } else {
            ProofVerdict::Refuted
        };
        Ok(Proof {
            action_type: ActionType::NoAction,
            workflow_id: String::new(),
            parameters: Map::new(),
            proposer,
            point: ProofPoint::Selection,
            verdict,
            obligations,
            target: target.clone(),
            spec_hash: spec,
            drift_hash: drift,
            change: None,
            checked_at: now,
        })
    }

    /// "Resolved" when the investigation verified no object to look at: nothing shows it.
    pub fn unproven_resolved(
        &self,
        target: Option<Target>,
        signal: &SignalContext,
        proposer: Proposer,
    ) -> Proof {
        let named = target
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_else(|| format!("alert {}", signal.name));
        Proof {
            action_type: ActionType::NoAction,
            workflow_id: String::new(),
            parameters: Map::new(),
            proposer,
            point: ProofPoint::Selection,
            verdict: ProofVerdict::Refuted,
            obligations: vec![ob::resolved::TARGET_VERIFIED.fails(vec![format!(
                "{named} could not be verified in the cluster: nothing shows the problem resolved"
            )])],
            target: target.unwrap_or_else(|| Target::new("Alert", signal.name.clone(), None)),
            spec_hash: None,
            drift_hash: None,
            change: None,
            checked_at: self.clock.now(),
        }
    }

    /// The target's spec hashes now, and whether they are the ones the claim is bound to.
    async fn binding(
        &self,
        scene: &Scene,
        bound: Option<&Binding>,
    ) -> Result<(Option<String>, Option<String>, Option<Obligation>), ProveError> {
        let obligation = &ob::every::BINDING;
        let obj = match scene.target_obj().await {
            Ok(o) => o,
            Err(e) if e.is_unreachable() => return Err(e.into()),
            Err(e) => {
                return Ok((
                    None,
                    None,
                    Some(obligation.fails(vec![format!("{}: {}", scene.target, e.message)])),
                ));
            }
        };
        let spec = at(&obj, &["spec"]).cloned().unwrap_or(Value::Null);
        let (hash, drift) = (spec_hash(&spec), drift_hash(&spec));
        let summary = summary(&obj);
        let Some(b) = bound else {
            return Ok((Some(hash), Some(drift), None));
        };
        let autoscaled = scene.autoscalers().await.is_ok_and(|hpas| {
            findings::count_set_by(&hpas, &scene.target.kind, &scene.target.name).is_some()
        });
        let same = unchanged_spec(
            Some(&b.spec_hash),
            b.drift_hash.as_deref(),
            &spec,
            autoscaled,
        );
        let mut ev = vec![format!(
            "spec {} {}, {} now{}",
            short(&b.spec_hash),
            b.when,
            short(&hash),
            if autoscaled {
                " (replicas left out: an autoscaler owns them)"
            } else {
                ""
            }
        )];
        if !summary.is_empty() {
            ev.push(format!("{} now: {summary}", scene.target));
        }
        if let Some(who) = last_writer(&obj) {
            ev.push(format!("last written by {who}"));
        }
        Ok((Some(hash), Some(drift), Some(obligation.check(same, ev))))
    }

    /// Run the workflow's steps through a writer that can only dry-run, and describe what the
    /// API server says they would change.
    async fn dry_run(
        &self,
        claim: &Claim<'_>,
        params: &Map<String, Value>,
    ) -> Result<DryRunChange, ProveError> {
        let catalog = self.catalog.get();
        let Some(workflow) = catalog.workflow(claim.workflow_id) else {
            return Ok(DryRunChange {
                note: Some(format!(
                    "workflow {} is not in the catalog",
                    claim.workflow_id
                )),
                ..Default::default()
            });
        };
        let steps = match &workflow.engine {
            Engine::Builtin { steps } => steps,
            Engine::Job { image, .. } => {
                return Ok(DryRunChange {
                    note: Some(format!(
                        "runs a Job from image {image} with the workflow's parameters as its environment (its own changes cannot be dry-run)"
                    )),
                    ..Default::default()
                });
            }
            Engine::Proposal { template } => {
                let text = match substitute(&Value::String(template.clone()), params) {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                return Ok(DryRunChange {
                    note: Some(format!(
                        "nothing is applied: the change is written up for a human ({text})"
                    )),
                    ..Default::default()
                });
            }
        };
        let Some(writer) = &self.writer else {
            return Ok(DryRunChange {
                note: Some("no dry run: kubemedic has no write access to this cluster".into()),
                ..Default::default()
            });
        };
        let dry = DryRunWriter::new(self.write_reader.clone(), writer.clone());
        let mut refused = None;
        for step in steps {
            let Some(action) = step.action.builtin() else {
                refused = Some(format!("{}: not a builtin action", step.action));
                break;
            };
            if action.is_read_only() {
                continue;
            }
            let args: BTreeMap<String, Value> = step
                .with
                .iter()
                .map(|(k, v)| (k.clone(), substitute(v, params)))
                .collect();
            match action
                .run(
                    self.write_reader.as_ref(),
                    &dry,
                    &args,
                    claim.target,
                    self.clock.now(),
                    true,
                )
                .await
            {
                Ok(_) => {}
                Err(e) if e.is_unreachable() => return Err(e.into()),
                Err(e) => {
                    refused = Some(format!("{}: {}", step.action, e.message));
                    break;
                }
            }
        }
        let mut change = change::describe(&dry.writes());
        change.refused = refused;
        Ok(change)
    }
}

/// `<proof>.readable`: the proof's obligations, or, when what they are judged on cannot be
/// read, this one obligation (unknown) saying what could not be; an unreachable server stops
/// the proof.
fn readable(
    r: Result<Vec<Obligation>, ClusterError>,
    readable: &ObligationSpec,
) -> Result<Vec<Obligation>, ProveError> {
    match r {
        Ok(o) => Ok(o),
        Err(e) if e.is_unreachable() => Err(e.into()),
        Err(e) => Ok(vec![
            readable.with(ObligationStatus::Unknown, vec![e.message]),
        ]),
    }
}

/// `dry-run.accepted`: stated when the API server refused the change in a dry run (its
/// acceptance is the change shown with the proof).
fn dry_run_accepted(change: &DryRunChange) -> Option<Obligation> {
    change
        .refused
        .clone()
        .map(|refused| ob::every::DRY_RUN.fails(vec![refused]))
}

fn short(hash: &str) -> String {
    hash.get(..19).unwrap_or(hash).to_owned()
}

/// A workload's images and replicas, for the binding's evidence.
fn summary(o: &Value) -> String {
    let mut parts = Vec::new();
    let images = template_images(crate::cluster::observed::pod_template(o).unwrap_or(&Value::Null));
    if !images.is_empty() {
        parts.push(format!("images {images}"));
    }
    if let Some(r) = at(o, &["spec", "replicas"]) {
        parts.push(format!("replicas {r}"));
    }
    parts.join(", ")
}

/// Who last changed an object, from its managed fields (`kubectl-edit at 10:04:12`).
fn last_writer(o: &Value) -> Option<String> {
    last_write(o).map(|(t, m)| format!("{m} at {t}"))
}

/// The last write to `o` of its own fields (not a subresource's): when, and by which manager.
fn last_write(o: &Value) -> Option<(&str, &str)> {
    crate::cluster::obj::array(o, &["metadata", "managedFields"])
        .iter()
        .filter(|m| crate::cluster::obj::str_at(m, &["subresource"]).is_none())
        .filter_map(|m| {
            Some((
                crate::cluster::obj::str_at(m, &["time"])?,
                crate::cluster::obj::str_at(m, &["manager"])?,
            ))
        })
        .max_by_key(|(t, _)| *t)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two alerts converging on one root owner: the target changed during this request's
    /// investigation because another request remediated it. `stamped_by` names that request only
    /// when kubemedic wrote last, at or after the moment given: an old stamp under someone
    /// else's later edit names nobody.
    #[tokio::test]
    async fn a_target_is_stamped_by_a_request_only_when_kubemedic_wrote_it_last_and_lately() {
        let prover = |manager: &str, at: &str| {
            let d = serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "checkout", "namespace": "shop",
                    "annotations": {"kubemedic.io/remediation": "req-1/1"},
                    "managedFields": [
                        {"manager": "kubemedic", "operation": "Update",
                            "time": "2026-12-02T07:00:00Z"},
                        {"manager": manager, "operation": "Update", "time": at}]}});
            let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [d]});
            let snap = crate::cluster::SnapshotCluster::from_yaml(&list.to_string())
                .unwrap_or_else(|e| panic!("{e}"));
            let catalog = Live::new(Catalog::builtin().unwrap_or_else(|e| panic!("{e}")));
            Prover::new(
                Arc::new(snap),
                None,
                catalog,
                Arc::new(crate::clock::SystemClock),
            )
        };
        let since: chrono::DateTime<chrono::Utc> =
            "2026-12-02T07:10:00Z".parse().unwrap_or_default();
        let target = Target::new("Deployment", "checkout", Some("shop".into()));
        let by = |manager: &'static str, at: &'static str| {
            let target = target.clone();
            async move {
                prover(manager, at)
                    .stamped_by(&target, since)
                    .await
                    .unwrap_or_else(|e| panic!("{e:?}"))
            }
        };
        assert_eq!(
            by("kubemedic", "2026-12-02T07:12:00Z").await.as_deref(),
            Some("req-1")
        );
        assert_eq!(by("kubemedic", "2026-12-02T07:05:00Z").await, None);
        assert_eq!(
            by("kubectl-client-side-apply", "2026-12-02T07:12:00Z").await,
            None
        );
    }

    #[test]
    fn every_catalog_action_type_has_obligations() {
        let catalog = Catalog::builtin().unwrap_or_else(|e| panic!("{e}"));
        for at in catalog.action_types() {
            assert!(
                ob::proof_of(&ActionType::parse(&at.name)).is_some(),
                "{} has no proof obligations",
                at.name
            );
        }
    }
}
