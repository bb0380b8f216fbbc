//! A workload (Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, CronJob), as far as decisions
//! read its spec and status: how many pods it is meant to run, how it rolls out, what holds an
//! update back, and how far its controller got.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{Pod, Revision, time};
use crate::cluster::obj::{self, at, i64_at, str_at};
use crate::cluster::selector::Selector;

/// The selector a workload's pods are listed by (`spec.selector`); `None` when it has none or an
/// empty one, which would match every pod of the namespace. Listing by it is half of "which
/// pods are the workload's"; [`its_pod`] is the other half.
pub fn pod_selector(workload: &Value) -> Option<Selector> {
    at(workload, &["spec", "selector"])
        .and_then(Selector::from_object)
        .filter(|s| !s.is_empty())
}

/// A workload's pod template: its `spec.template`, or a CronJob's
/// `spec.jobTemplate.spec.template`; `None` for an object without one. Every decision that
/// reads what a workload's pods are made from (their spec, claims, images, labels) reads it
/// here, so a CronJob's template is not missed by one of them.
pub fn pod_template(workload: &Value) -> Option<&Value> {
    if obj::kind(workload) == "CronJob" {
        at(workload, &["spec", "jobTemplate", "spec", "template"])
    } else {
        at(workload, &["spec", "template"])
    }
}

/// Whether `pod`, listed by the [`pod_selector`] of `workload`, is one of its pods and not one
/// another controller made with the same labels (a Helm hook's Job, a CronJob's run): see
/// [`Pod::selected_by`]. The rules' evidence, the proofs' scene, the dependency graph, the
/// verification and the undo keep the pods this holds for.
pub fn its_pod(workload: &Value, pod: &Value) -> bool {
    Pod::parse(pod).selected_by(obj::kind(workload), obj::name(workload))
}

/// Whether the workload's pods mount the PersistentVolumeClaim `claim`: a volume of its pod
/// template names it, or one of a StatefulSet's `volumeClaimTemplates` makes it for one of its
/// pods (`<template>-<statefulset>-<ordinal>`: `data-web-cache-0` is `web-cache`'s, not
/// `web`'s). The expansion's proof asks this of the claim a remediation names.
pub fn uses_claim(workload: &Value, claim: &str) -> bool {
    let mounted = super::PodSpec::of_template(workload)
        .claims
        .iter()
        .any(|c| c == claim);
    let made = obj::kind(workload) == "StatefulSet"
        && obj::array(workload, &["spec", "volumeClaimTemplates"])
            .iter()
            .any(|t| {
                claim
                    .strip_prefix(&format!("{}-{}-", obj::name(t), obj::name(workload)))
                    .is_some_and(|ordinal| {
                        !ordinal.is_empty() && ordinal.chars().all(|c| c.is_ascii_digit())
                    })
            });
    mounted || made
}

/// What a workload's own spec holds an update at: a release step someone chose, not a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// A StatefulSet's `updateStrategy` is `OnDelete`: a pod moves only when deleted.
    OnDelete,
    /// A StatefulSet's `rollingUpdate.partition` above 0 keeps the ordinals below it on the
    /// current revision.
    Partition(i64),
    /// A Deployment's `spec.paused`.
    Paused,
}

/// A workload, as observed.
#[derive(Debug, Clone, Default)]
pub struct Workload {
    pub kind: String,
    pub name: String,
    /// `metadata.creationTimestamp`.
    pub created: Option<DateTime<Utc>>,
    /// `spec.replicas` as written (`None`: unset, or a kind without it such as a DaemonSet).
    pub replicas: Option<i64>,
    /// A DaemonSet's `status.desiredNumberScheduled`: the nodes it is meant to run a pod on.
    pub scheduled: Option<i64>,
    /// `spec.strategy.type` (Deployment) or `spec.updateStrategy.type` (StatefulSet,
    /// DaemonSet): `RollingUpdate`, `Recreate`, `OnDelete`; `None` when unset.
    pub strategy: Option<String>,
    /// A StatefulSet's `spec.updateStrategy.rollingUpdate.partition`.
    pub partition: Option<i64>,
    /// The rolling update's `maxUnavailable` and `maxSurge` as written (a count or a
    /// percentage; `None` when unset): a Deployment's `spec.strategy.rollingUpdate`, a
    /// StatefulSet's or DaemonSet's `spec.updateStrategy.rollingUpdate`.
    pub max_unavailable: Option<Value>,
    pub max_surge: Option<Value>,
    /// `spec.paused`.
    pub paused: bool,
    /// A CronJob's (or Job's) `spec.suspend`.
    pub suspend: bool,
    /// `status.readyReplicas` (0 when unset: none is ready); a DaemonSet's `numberReady`.
    pub ready_replicas: i64,
    /// `status.availableReplicas`; a DaemonSet's `numberAvailable`.
    pub available_replicas: Option<i64>,
    /// `status.updatedReplicas`; a DaemonSet's `updatedNumberScheduled`.
    pub updated_replicas: Option<i64>,
    /// `status.replicas`, the pods the controller counts (none for a DaemonSet).
    pub status_replicas: Option<i64>,
    /// `metadata.generation` and the controller's `status.observedGeneration`.
    pub generation: Option<i64>,
    pub observed_generation: Option<i64>,
    /// A StatefulSet's (DaemonSet's) `status.currentRevision` and `status.updateRevision`.
    pub current_revision: Option<String>,
    pub update_revision: Option<String>,
    /// A Deployment's `deployment.kubernetes.io/revision`: the revision it runs now.
    pub revision: Option<i64>,
    /// A CronJob's `status.lastScheduleTime`.
    pub last_schedule: Option<DateTime<Utc>>,
}

impl Workload {
    pub fn parse(w: &Value) -> Self {
        let flag = |path: &[&str]| at(w, path).and_then(Value::as_bool) == Some(true);
        let text = |path: &[&str]| str_at(w, path).map(str::to_owned);
        let kind = obj::kind(w);
        let rolling = |field: &str| {
            at(w, &["spec", "strategy", "rollingUpdate", field])
                .or_else(|| at(w, &["spec", "updateStrategy", "rollingUpdate", field]))
                .cloned()
        };
        // A DaemonSet counts its pods by nodes, under names of its own.
        let count = |field: &str, daemonset: &str| {
            let field = if kind == "DaemonSet" {
                daemonset
            } else {
                field
            };
            i64_at(w, &["status", field])
        };
        Self {
            kind: kind.to_owned(),
            name: obj::name(w).to_owned(),
            created: super::created(w),
            replicas: i64_at(w, &["spec", "replicas"]),
            scheduled: (kind == "DaemonSet")
                .then(|| i64_at(w, &["status", "desiredNumberScheduled"]))
                .flatten(),
            strategy: text(&["spec", "strategy", "type"])
                .or_else(|| text(&["spec", "updateStrategy", "type"])),
            partition: i64_at(w, &["spec", "updateStrategy", "rollingUpdate", "partition"]),
            max_unavailable: rolling("maxUnavailable"),
            max_surge: rolling("maxSurge"),
            paused: flag(&["spec", "paused"]),
            suspend: flag(&["spec", "suspend"]),
            ready_replicas: count("readyReplicas", "numberReady").unwrap_or(0),
            available_replicas: count("availableReplicas", "numberAvailable"),
            updated_replicas: count("updatedReplicas", "updatedNumberScheduled"),
            status_replicas: i64_at(w, &["status", "replicas"]),
            generation: i64_at(w, &["metadata", "generation"]),
            observed_generation: i64_at(w, &["status", "observedGeneration"]),
            current_revision: text(&["status", "currentRevision"]),
            update_revision: text(&["status", "updateRevision"]),
            revision: obj::annotation(w, "deployment.kubernetes.io/revision")
                .and_then(|r| r.parse().ok()),
            last_schedule: time(w, &["status", "lastScheduleTime"]),
        }
    }

    /// The pods it is meant to run: `spec.replicas`, else 1, the API server's default for the
    /// kinds that have it; a DaemonSet's, one per node it is scheduled to
    /// (`desiredNumberScheduled`, 0 before its controller has counted them).
    pub fn wanted(&self) -> i64 {
        match self.kind.as_str() {
            "DaemonSet" => self.scheduled.unwrap_or(0),
            _ => self.replicas.unwrap_or(1),
        }
    }

    /// What its own spec holds an update at, whether or not one is pending: a StatefulSet's or
    /// DaemonSet's `OnDelete` strategy, a StatefulSet's partition above 0, a Deployment's
    /// pause. The rule that leaves a held rollout to a person, the "resolved" proof's account of
    /// a workload not rolled out, the restart's proof (a new template replaces no pod) and the
    /// rollout wait (waiting rolls nothing out) all ask it.
    pub fn hold(&self) -> Option<Hold> {
        match self.kind.as_str() {
            "StatefulSet" => match (self.strategy.as_deref(), self.partition) {
                (Some("OnDelete"), _) => Some(Hold::OnDelete),
                (_, Some(p)) if p > 0 => Some(Hold::Partition(p)),
                _ => None,
            },
            "DaemonSet" if self.strategy.as_deref() == Some("OnDelete") => Some(Hold::OnDelete),
            "Deployment" if self.paused => Some(Hold::Paused),
            _ => None,
        }
    }

    /// The pods it counts as available: a StatefulSet's ready ones (its status has no other
    /// count everywhere), the others' `availableReplicas` (`numberAvailable`), 0 unreported.
    pub fn available(&self) -> i64 {
        match self.kind.as_str() {
            "StatefulSet" => self.ready_replicas,
            _ => self.available_replicas.unwrap_or(0),
        }
    }

    /// Whether its rollout is done, as `kubectl rollout status` has it: its controller saw the
    /// latest spec, nothing is under way ([`Workload::rollout_in_progress`]: every pod updated,
    /// no old pod left) and the pods it wants are available ([`Workload::available`]). What
    /// the rollout wait waits for and what the "resolved" proof calls the desired state.
    pub fn rollout_done(&self) -> bool {
        self.rollout_in_progress().is_none() && self.available() >= self.wanted()
    }

    /// The number of the revision it runs (or updates to) now, among its `revisions`: the one a
    /// StatefulSet's status names as its update revision, the one a Deployment's annotation
    /// names; else the newest. `None` without revisions to choose from or name.
    pub fn current_revision_number(&self, revisions: &[Revision]) -> Option<i64> {
        let named = match self.kind.as_str() {
            "StatefulSet" => self
                .update_revision
                .as_ref()
                .and_then(|u| revisions.iter().find(|r| &r.name == u))
                .map(|r| r.number),
            _ => self.revision,
        };
        named.or_else(|| revisions.iter().map(|r| r.number).max())
    }

    /// Why its rollout is not finished, if it is not: a generation its controller has not
    /// observed, a paused rollout, pods not all updated (or more than it wants, mid-surge). The
    /// restart and delete proofs refuse during one, and the rules do not propose replacing a pod
    /// then (the rollout replaces it).
    pub fn rollout_in_progress(&self) -> Option<String> {
        let workload = self;
        if let Some((generation, observed)) = workload.generation_pending() {
            return Some(format!(
                "generation {generation} not yet observed by the controller (observed {observed})"
            ));
        }
        match workload.kind.as_str() {
            "StatefulSet" => {
                let (cur, upd) = (&workload.current_revision, &workload.update_revision);
                (cur.is_some() && upd.is_some() && cur != upd).then(|| {
                    format!(
                        "update from revision {} to {} under way ({} of {} pods updated)",
                        cur.as_deref().unwrap_or_default(),
                        upd.as_deref().unwrap_or_default(),
                        workload.updated_replicas.unwrap_or(0),
                        workload.wanted()
                    )
                })
            }
            "DaemonSet" => {
                let want = workload.wanted();
                let updated = workload.updated_replicas.unwrap_or(want);
                (updated < want).then(|| format!("{updated} of {want} pods updated"))
            }
            _ => {
                let want = workload.wanted();
                let updated = workload.updated_replicas.unwrap_or(want);
                let total = workload.status_replicas.unwrap_or(want);
                // A pause holds it half-way; paused with every pod updated, nothing is under way.
                let paused = if workload.paused {
                    "the rollout is paused: "
                } else {
                    ""
                };
                (updated < want || total > want).then(|| {
                    format!("{paused}{updated} of {want} pods updated, {total} pods in all")
                })
            }
        }
    }

    /// Whether its controller has not yet acted on its latest spec: the observed generation
    /// (the generation when the status has none) is behind the generation.
    pub fn generation_pending(&self) -> Option<(i64, i64)> {
        let generation = self.generation.unwrap_or(0);
        let observed = self.observed_generation.unwrap_or(generation);
        (observed < generation).then_some((generation, observed))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A StatefulSet's claims are those its claim templates make for its ordinals: `web`'s
    /// `data` template makes `data-web-0`, and `data-web-cache-0` is `web-cache`'s, whose
    /// name merely starts the same. A claim its template mounts by name is its own too.
    #[test]
    fn a_claim_is_a_statefulset_s_by_its_template_and_ordinal() {
        let sts = |name: &str| {
            json!({"kind": "StatefulSet", "metadata": {"name": name},
                "spec": {"volumeClaimTemplates": [{"metadata": {"name": "data"}}],
                    "template": {"spec": {"volumes": [{"name": "shared",
                        "persistentVolumeClaim": {"claimName": "uploads"}}]}}}})
        };
        let web = sts("web");
        assert!(uses_claim(&web, "data-web-0"));
        assert!(uses_claim(&web, "data-web-12"));
        assert!(!uses_claim(&web, "data-web-cache-0"));
        assert!(!uses_claim(&web, "data-web-"));
        assert!(uses_claim(&web, "uploads"));
        assert!(uses_claim(&sts("web-cache"), "data-web-cache-0"));
        let deploy = json!({"kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"template": {"spec": {"volumes": [
                {"name": "d", "persistentVolumeClaim": {"claimName": "web-data"}}]}}}});
        assert!(uses_claim(&deploy, "web-data"));
        assert!(!uses_claim(&deploy, "data-web-0"));
        let cron = json!({"kind": "CronJob", "metadata": {"name": "backup"},
            "spec": {"jobTemplate": {"spec": {"template": {"spec": {"volumes": [
                {"name": "d", "persistentVolumeClaim": {"claimName": "backups"}}]}}}}}});
        assert!(uses_claim(&cron, "backups"));
    }

    /// Issue 43: one home for "the pod template": a CronJob's is under its job template, and
    /// the spec the rules and proofs read of it is no longer empty.
    #[test]
    fn a_cron_job_s_pods_are_made_from_its_job_template() {
        let cron = json!({"kind": "CronJob", "metadata": {"name": "backup"},
            "spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [
                {"name": "dump", "image": "pg:16",
                    "resources": {"limits": {"memory": "256Mi"}}}]}}}}}});
        assert!(pod_template(&cron).is_some());
        let spec = crate::cluster::observed::PodSpec::of_template(&cron);
        assert_eq!(spec.limit("dump", "memory"), Some("256Mi"));
        let pod = json!({"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": []}});
        assert!(pod_template(&pod).is_none());
    }

    #[test]
    fn what_holds_an_update_is_read_from_the_spec_of_its_kind() {
        let sts = |strategy: Value| {
            Workload::parse(&json!({"kind": "StatefulSet", "metadata": {"name": "db"},
                "spec": {"replicas": 3, "updateStrategy": strategy}}))
        };
        assert_eq!(
            sts(json!({"type": "OnDelete"})).hold(),
            Some(Hold::OnDelete)
        );
        let canary = sts(json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}));
        assert_eq!(canary.hold(), Some(Hold::Partition(2)));
        assert_eq!(canary.replicas, Some(3));
        assert_eq!(sts(json!({"type": "RollingUpdate"})).hold(), None);
        let paused = Workload::parse(&json!({"kind": "Deployment", "metadata": {"name": "api"},
            "spec": {"paused": true, "strategy": {"type": "Recreate"}}}));
        assert_eq!(paused.hold(), Some(Hold::Paused));
        assert_eq!(paused.strategy.as_deref(), Some("Recreate"));
    }

    #[test]
    fn a_generation_the_controller_has_not_seen_is_pending() {
        let w = |status: Value| {
            Workload::parse(&json!({"kind": "Deployment",
                "metadata": {"name": "api", "generation": 4}, "status": status}))
        };
        assert_eq!(
            w(json!({"observedGeneration": 3})).generation_pending(),
            Some((4, 3))
        );
        assert_eq!(
            w(json!({"observedGeneration": 4})).generation_pending(),
            None
        );
        assert_eq!(w(json!({})).generation_pending(), None);
    }

    /// A pause holds a rollout half-way; a paused Deployment with every pod updated has none
    /// under way (a pod of it may be replaced; its template may not be rolled out). A
    /// DaemonSet updated `OnDelete` is held as a StatefulSet is.
    #[test]
    fn a_pause_holds_a_rollout_only_while_one_is_pending() {
        let d = |updated: i64| {
            Workload::parse(&json!({"kind": "Deployment", "metadata": {"name": "web",
                "generation": 4}, "spec": {"replicas": 3, "paused": true},
                "status": {"observedGeneration": 4, "replicas": 3, "updatedReplicas": updated,
                    "availableReplicas": 3}}))
        };
        assert_eq!(d(3).rollout_in_progress(), None);
        assert!(d(3).rollout_done());
        assert_eq!(d(3).hold(), Some(Hold::Paused));
        let half = d(1).rollout_in_progress().unwrap();
        assert!(half.starts_with("the rollout is paused: 1 of 3"), "{half}");
        assert!(!d(1).rollout_done());
        let ds = Workload::parse(&json!({"kind": "DaemonSet", "metadata": {"name": "agent"},
            "spec": {"updateStrategy": {"type": "OnDelete"}}}));
        assert_eq!(ds.hold(), Some(Hold::OnDelete));
    }

    #[test]
    fn a_daemonset_counts_its_pods_by_the_nodes_it_is_scheduled_to() {
        let ds = Workload::parse(&json!({"kind": "DaemonSet", "metadata": {"name": "agent"},
            "status": {"desiredNumberScheduled": 5, "numberReady": 4, "numberAvailable": 3,
                "updatedNumberScheduled": 2, "currentNumberScheduled": 5}}));
        assert_eq!(
            ds.wanted(),
            5,
            "not the 1 of a kind with spec.replicas unset"
        );
        assert_eq!(
            (
                ds.ready_replicas,
                ds.available_replicas,
                ds.updated_replicas
            ),
            (4, Some(3), Some(2))
        );
        let uncounted = Workload::parse(&json!({"kind": "DaemonSet", "metadata": {"name": "a"}}));
        assert_eq!((uncounted.wanted(), uncounted.ready_replicas), (0, 0));
        let deploy = Workload::parse(&json!({"kind": "Deployment", "metadata": {"name": "api"},
            "status": {"numberReady": 4, "availableReplicas": 1}}));
        assert_eq!(
            (deploy.ready_replicas, deploy.available_replicas),
            (0, Some(1))
        );
    }

    #[test]
    fn replicas_unset_are_one_as_the_api_server_defaults_them() {
        let w = |spec: Value, status: Value| {
            Workload::parse(&json!({"kind": "Deployment", "metadata": {"name": "api"},
                "spec": spec, "status": status}))
        };
        let unset = w(json!({}), json!({}));
        assert_eq!((unset.wanted(), unset.replicas), (1, None));
        assert_eq!((unset.ready_replicas, unset.updated_replicas), (0, None));
        let three = w(
            json!({"replicas": 3}),
            json!({"readyReplicas": 2, "updatedReplicas": 1, "replicas": 4}),
        );
        assert_eq!(three.wanted(), 3);
        assert_eq!(
            (
                three.ready_replicas,
                three.updated_replicas,
                three.status_replicas
            ),
            (2, Some(1), Some(4))
        );
        assert_eq!(w(json!({"replicas": 0}), json!({})).wanted(), 0);
    }

    #[test]
    fn the_current_revision_is_the_one_the_workload_names_else_the_newest() {
        let rs = |name: &str, n: i64| {
            Revision::of_replicaset(&json!({"kind": "ReplicaSet", "metadata": {"name": name,
                "annotations": {"deployment.kubernetes.io/revision": n.to_string()}}}))
            .expect("a revision")
        };
        let revisions = [rs("api-a", 1), rs("api-b", 2), rs("api-c", 3)];
        let deployment = |annotations: Value| {
            Workload::parse(&json!({"kind": "Deployment",
                "metadata": {"name": "api", "annotations": annotations}}))
        };
        let named = deployment(json!({"deployment.kubernetes.io/revision": "2"}));
        assert_eq!(named.current_revision_number(&revisions), Some(2));
        assert_eq!(
            deployment(json!({})).current_revision_number(&revisions),
            Some(3)
        );
        let sts = Workload::parse(&json!({"kind": "StatefulSet", "metadata": {"name": "db"},
            "status": {"updateRevision": "api-a", "currentRevision": "api-b"}}));
        assert_eq!(sts.current_revision_number(&revisions), Some(1));
        assert_eq!(deployment(json!({})).current_revision_number(&[]), None);
    }
}
