//! A workload's revision: a Deployment's ReplicaSet or a StatefulSet's (or DaemonSet's)
//! ControllerRevision, read once into the terms the rollout rule and the rollback proof share.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{Pod, created};
use crate::cluster::obj::{self, array, at, i64_at, str_at};

/// One revision of a workload, whichever controller keeps it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Revision {
    /// The ReplicaSet's or ControllerRevision's name.
    pub name: String,
    /// `deployment.kubernetes.io/revision`, or the ControllerRevision's `revision`.
    pub number: i64,
    /// What its pods carry: a ReplicaSet's `pod-template-hash`, a ControllerRevision's name
    /// (which its pods' `controller-revision-hash` names, whole or by its suffix).
    pub hash: String,
    pub created: Option<DateTime<Utc>>,
    /// Ready replicas the ReplicaSet reports (a ControllerRevision reports none: 0).
    pub ready: i64,
    /// The replicas the ReplicaSet is set to run (`None` for a ControllerRevision).
    pub replicas: Option<i64>,
    /// Its pod template.
    pub template: Value,
}

impl Revision {
    /// A Deployment's ReplicaSet; `None` without a revision number (not one of its revisions).
    pub fn of_replicaset(rs: &Value) -> Option<Self> {
        let number = obj::annotation(rs, "deployment.kubernetes.io/revision")?
            .parse()
            .ok()?;
        Some(Self {
            name: obj::name(rs).to_owned(),
            number,
            hash: obj::label(rs, "pod-template-hash")
                .unwrap_or_default()
                .to_owned(),
            created: created(rs),
            ready: i64_at(rs, &["status", "readyReplicas"]).unwrap_or(0),
            replicas: i64_at(rs, &["spec", "replicas"]),
            template: at(rs, &["spec", "template"])
                .cloned()
                .unwrap_or(Value::Null),
        })
    }

    /// A StatefulSet's or DaemonSet's ControllerRevision; `None` without a revision number.
    pub fn of_controller_revision(cr: &Value) -> Option<Self> {
        let name = obj::name(cr).to_owned();
        Some(Self {
            number: i64_at(cr, &["revision"])?,
            hash: name.clone(),
            name,
            created: created(cr),
            ready: 0,
            replicas: None,
            template: at(cr, &["data", "spec", "template"])
                .cloned()
                .unwrap_or(Value::Null),
        })
    }

    /// Whether the pod is of this revision: the revision's ReplicaSet controls it, or its hash
    /// label names the revision (a StatefulSet's pods carry the ControllerRevision's full name,
    /// a DaemonSet's its hash suffix, `<name>-<hash>`).
    pub fn owns(&self, pod: &Pod) -> bool {
        let controlled = pod
            .controller
            .as_ref()
            .is_some_and(|(kind, name)| kind == "ReplicaSet" && *name == self.name);
        let labelled = |h: &String| {
            !h.is_empty()
                && (*h == self.hash
                    || self
                        .name
                        .strip_suffix(h.as_str())
                        .is_some_and(|prefix| prefix.ends_with('-')))
        };
        controlled
            || pod.template_hash.as_ref().is_some_and(labelled)
            || pod.revision_hash.as_ref().is_some_and(labelled)
    }

    /// When it was replaced: the next revision's appearance (the earliest creation among the
    /// revisions numbered after it). `None` while it is the newest, or when no time is known.
    pub fn replaced_at(&self, revisions: &[Revision]) -> Option<DateTime<Utc>> {
        revisions
            .iter()
            .filter(|r| r.number > self.number)
            .filter_map(|r| r.created)
            .min()
    }

    /// Its containers' images, comma-separated.
    pub fn images(&self) -> String {
        template_images(&self.template)
    }
}

/// A pod template's containers' images, comma-separated (`?` for a container without one).
pub fn template_images(template: &Value) -> String {
    array(template, &["spec", "containers"])
        .iter()
        .map(|c| str_at(c, &["image"]).unwrap_or("?"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The revisions among `raw` (ReplicaSets or ControllerRevisions, as `of` reads them), oldest
/// first.
pub fn revisions(raw: &[Value], of: fn(&Value) -> Option<Revision>) -> Vec<Revision> {
    let mut out: Vec<Revision> = raw.iter().filter_map(of).collect();
    out.sort_by_key(|r| r.number);
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(
        controller: Option<&str>,
        template_hash: Option<&str>,
        revision_hash: Option<&str>,
    ) -> Pod {
        Pod {
            controller: controller.map(|n| ("ReplicaSet".to_owned(), n.to_owned())),
            template_hash: template_hash.map(str::to_owned),
            revision_hash: revision_hash.map(str::to_owned),
            ..Pod::default()
        }
    }

    #[test]
    fn a_replicaset_owns_the_pods_it_controls_or_that_carry_its_hash() {
        let rs = Revision::of_replicaset(&json!({
            "metadata": {"name": "api-5d9f", "labels": {"pod-template-hash": "5d9f"},
                "annotations": {"deployment.kubernetes.io/revision": "3"},
                "creationTimestamp": "2026-11-29T10:00:00Z"},
            "spec": {"replicas": 2, "template": {"spec": {"containers": [
                {"name": "api", "image": "api:3"}, {"name": "side", "image": "side:1"}]}}},
            "status": {"readyReplicas": 1}}))
        .unwrap();
        assert_eq!((rs.number, rs.ready, rs.replicas), (3, 1, Some(2)));
        assert_eq!(rs.images(), "api:3, side:1");
        assert!(rs.owns(&pod(Some("api-5d9f"), None, None)));
        assert!(rs.owns(&pod(None, Some("5d9f"), None)));
        assert!(!rs.owns(&pod(Some("api-7c2a"), Some("7c2a"), None)));
        // Without its revision number a ReplicaSet is not one of the Deployment's revisions.
        assert!(Revision::of_replicaset(&json!({"metadata": {"name": "x"}})).is_none());
    }

    #[test]
    fn a_controller_revision_owns_pods_naming_it_whole_or_by_its_suffix() {
        let cr = Revision::of_controller_revision(&json!({
            "metadata": {"name": "db-6c8d7f"}, "revision": 2,
            "data": {"spec": {"template": {"spec": {"containers": [{"image": "db:2"}]}}}}}))
        .unwrap();
        assert_eq!((cr.number, cr.images().as_str()), (2, "db:2"));
        assert!(cr.owns(&pod(None, None, Some("db-6c8d7f"))));
        assert!(cr.owns(&pod(None, None, Some("6c8d7f"))));
        assert!(!cr.owns(&pod(None, None, Some("8d7f"))));
        assert!(!cr.owns(&pod(None, None, Some(""))));
    }
}
