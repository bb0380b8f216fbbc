//! The cluster as observed: pods, their containers, events, nodes and revisions parsed once from the
//! objects the API server returns, with the questions every decision asks of them answered in
//! one place ("is this pod failing, and what shows it?", "since when?").
//!
//! The proofs read these; so does execution's wait for a rollout. One definition keeps a rule
//! that proposes and a proof that refuses from disagreeing about the same pod
//! (issue 43: one model of the cluster).

mod claim;
mod event;
mod health;
mod hpa;
mod metrics;
mod netpol;
mod node;
mod pdb;
mod pod;
mod quota;
mod revision;
mod service;
mod spec;
mod state;
mod workload;

use chrono::{DateTime, Duration, Utc};
use serde_json::Value;

use super::obj::{array, str_at};

pub use claim::{Claim, StorageClass};
pub use event::{Event, about_workload, subject as event_subject};
pub use health::target_health;
pub use hpa::{HPA_RAISE_FACTOR, HPA_RAISE_SMALL, Hpa, Utilisation};
pub use metrics::{ContainerUse, PodMetrics, peak_use};
pub use netpol::NetworkPolicy;
pub use node::{Node, cluster_wide, taint_key_of_kubernetes};
pub use pdb::{Pdb, QUORUM_MIN_PODS};
pub use pod::{
    CREATING_ALLOWANCE, Container, FAILING_WAITS, FAILURE_LOG_LINES, Failure, FailureKind,
    LogSource, MEMORY_KILL_LOOKBACK_HOURS, NEVER_READY_ALLOWANCE, OOM_KILL_EVENT,
    PAST_STARTUP_RESTARTS, Pod, REPLACE_STUCK_CREATING_AFTER, SERVED_MIN_SECONDS, SIGKILL_EXIT,
    SIGTERM_EXIT, TEMPLATE_WAITS, TERMINATING_ALLOWANCE, Unready, host_ports, own_error_exit,
};
pub use quota::{QuotaRoom, limited as quota_limited, tightest as tightest_quota};
pub use revision::{Revision, revisions, template_images};
pub use service::{Endpoints, Service};
pub use spec::{AntiAffinityTerm, ContainerSpec, PodSpec, Probe, Toleration};
pub use state::{KeptState, error_line};
pub use workload::{Hold, Workload, its_pod, pod_selector, pod_template, uses_claim};

/// A timestamp at `path` of `v`, if it parses as RFC 3339.
pub fn time(v: &Value, path: &[&str]) -> Option<DateTime<Utc>> {
    str_at(v, path)
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&Utc))
}

/// When an object was created.
pub fn created(v: &Value) -> Option<DateTime<Utc>> {
    time(v, &["metadata", "creationTimestamp"])
}

/// How long after an object's creation a write still counts as its creation: the creating
/// client's own follow-up (a second field manager of the same apply, a controller filling in
/// defaults) lands within it, and is no change of what the object says.
pub const CREATION_WRITE_SECONDS: i64 = 2;

/// The latest write to an object the API shows: its creation, or a managed-fields entry that is
/// not a status update more than [`CREATION_WRITE_SECONDS`] after it (by its manager). The
/// dependency graph shows it as a dependency's change, and the proofs ask it of a ConfigMap a
/// pod reads ([`last_written`]).
pub fn last_change(o: &Value) -> Option<crate::domain::Change> {
    use crate::domain::Change;
    let created = created(o);
    let edited = array(o, &["metadata", "managedFields"])
        .iter()
        .filter(|m| str_at(m, &["subresource"]).is_none())
        .filter_map(|m| {
            Some((
                time(m, &["time"])?,
                str_at(m, &["manager"]).unwrap_or("someone"),
            ))
        })
        .max_by_key(|(t, _)| *t);
    match (created, edited) {
        (Some(c), Some((t, who))) if t > c + Duration::seconds(CREATION_WRITE_SECONDS) => {
            Some(Change {
                at: t,
                what: format!("changed by {who}"),
            })
        }
        (Some(c), _) => Some(Change::creation(c)),
        (None, Some((t, who))) => Some(Change {
            at: t,
            what: format!("changed by {who}"),
        }),
        (None, None) => None,
    }
}

/// When an object was last written ([`last_change`]'s time).
pub fn last_written(v: &Value) -> Option<DateTime<Utc>> {
    last_change(v).map(|c| c.at)
}

/// The labels and annotations by which Argo CD and Flux mark what they apply: (tool, where,
/// key).
const GITOPS_MARKERS: &[(&str, &str, &str)] = &[
    ("argocd", "annotation", "argocd.argoproj.io/tracking-id"),
    ("argocd", "label", "argocd.argoproj.io/instance"),
    ("argocd", "annotation", "argocd.argoproj.io/managed-by"),
    ("flux", "label", "kustomize.toolkit.fluxcd.io/name"),
    ("flux", "label", "helm.toolkit.fluxcd.io/name"),
    ("flux", "annotation", "kustomize.toolkit.fluxcd.io/checksum"),
];

/// Whether a GitOps controller manages object `o`, and what shows it: the tool (`argocd`,
/// `flux`) and the marker (`label argocd.argoproj.io/instance`, an owner reference of an
/// Argo or Flux kind). The enrichment labels a signal with it and the Git revert's proof
/// (`gitrevert.gitops-managed`) asks it: one answer, so the pipeline never turns a remedy into
/// a revert in Git that the revert's proof then refuses.
pub fn gitops_marker(o: &Value) -> Option<(&'static str, String)> {
    let found = GITOPS_MARKERS
        .iter()
        .find(|(_, where_, key)| match *where_ {
            "label" => super::obj::label(o, key).is_some(),
            _ => super::obj::annotation(o, key).is_some(),
        });
    if let Some((tool, where_, key)) = found {
        return Some((tool, format!("{where_} {key}")));
    }
    array(o, &["metadata", "ownerReferences"])
        .iter()
        .find_map(|owner| {
            let api = str_at(owner, &["apiVersion"]).unwrap_or("");
            let kind = str_at(owner, &["kind"]).unwrap_or("");
            // Argo CD's own kinds: an Argo Rollouts `Rollout` (also argoproj.io) is a workload
            // kind, not a GitOps controller.
            let tool = if api.starts_with("argoproj.io/")
                && matches!(kind, "Application" | "ApplicationSet")
            {
                "argocd"
            } else if api.contains("toolkit.fluxcd.io/") {
                "flux"
            } else {
                return None;
            };
            Some((tool, format!("owner reference {api} {kind}")))
        })
}

/// The characters Kubernetes draws generated name parts from (`rand.SafeEncodeString`: no
/// vowels, no 0, 1 or 3, so no word and nothing mistaken for one): a ReplicaSet's
/// pod-template-hash, a pod's random suffix.
pub const GENERATED_CHARS: &str = "bcdfghjklmnpqrstvwxz2456789";

/// Whether `name` is one a controller generated from `owner`'s: `<owner>-<suffix>`, where the
/// suffix is one or two parts, each a number, drawn from [`GENERATED_CHARS`], or hash-like
/// (letters and digits, with a digit: a hash not drawn by this cluster) (a Deployment's ReplicaSet
/// `api-7d4b9c8f6`, its pod `api-7d4b9c8f6-x2k9p`, a Job's or DaemonSet's pod) or a number (a
/// StatefulSet's ordinal `db-0`, a CronJob's Job `backup-28934520` and its pods). A neighbour
/// whose name merely starts the same (`api-migrate`, `web-cache`) is not. Events about a
/// workload's ReplicaSets and about pods since deleted are told apart from its neighbours' this
/// way, where nothing else is left to ask.
pub fn generated_from(name: &str, owner: &str) -> bool {
    let Some(suffix) = name
        .strip_prefix(owner)
        .and_then(|rest| rest.strip_prefix('-'))
    else {
        return false;
    };
    // A hash written by other hands (an older cluster's decimal hash, a copied manifest, an
    // example): lower-case letters and digits, with a digit, as long as a hash is.
    let hash_like = |p: &str| {
        p.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
            && p.chars().any(|c| c.is_ascii_digit())
    };
    let part = |p: &str| {
        !p.is_empty()
            && (p.chars().all(|c| GENERATED_CHARS.contains(c))
                || p.chars().all(|c| c.is_ascii_digit())
                || hash_like(p))
    };
    let parts: Vec<&str> = suffix.split('-').collect();
    parts.len() <= 2 && parts.iter().all(|p| part(p))
}

/// `3h 20m`, `12m`, `45s`.
pub fn ago(d: Duration) -> String {
    let secs = d.num_seconds().max(0);
    match secs {
        s if s >= 86_400 => format!("{}d {}h", s / 86_400, (s % 86_400) / 3600),
        s if s >= 3600 => format!("{}h {}m", s / 3600, (s % 3600) / 60),
        s if s >= 60 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// The digest of a container status's `imageID` (`…@sha256:…`, with or without a
/// `docker-pullable://` prefix); `None` when it names none.
pub fn image_digest(image_id: &str) -> Option<String> {
    image_id
        .rsplit_once('@')
        .map(|(_, d)| d)
        .filter(|d| d.contains(':'))
        .map(str::to_owned)
}

/// The Deployment controller's word that a rollout is stuck: its Progressing condition False
/// for ProgressDeadlineExceeded, with its message, for the spec it has seen. A condition the
/// controller wrote before the latest spec ([`Workload::generation_pending`]) is about a rollout
/// that spec replaced: the rollout rule, the rollback proof and the rollout wait all read it
/// so (the wait also reads a status without an observed generation as not yet seen).
pub fn progress_deadline_exceeded(w: &Value) -> Option<String> {
    if Workload::parse(w).generation_pending().is_some() {
        return None;
    }
    array(w, &["status", "conditions"])
        .iter()
        .find(|c| {
            str_at(c, &["type"]) == Some("Progressing")
                && str_at(c, &["status"]) == Some("False")
                && str_at(c, &["reason"]) == Some("ProgressDeadlineExceeded")
        })
        .map(|c| {
            str_at(c, &["message"])
                .unwrap_or("progress deadline exceeded")
                .to_owned()
        })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn gitops_is_read_from_argo_cd_and_flux_markers_not_from_argo_rollouts() {
        let by_label = json!({"metadata": {"labels": {"argocd.argoproj.io/instance": "shop"}}});
        assert_eq!(
            super::gitops_marker(&by_label),
            Some(("argocd", "label argocd.argoproj.io/instance".into()))
        );
        let checksum =
            json!({"metadata": {"annotations": {"kustomize.toolkit.fluxcd.io/checksum": "abc"}}});
        assert_eq!(super::gitops_marker(&checksum).map(|m| m.0), Some("flux"));
        let rollout = json!({"metadata": {"ownerReferences": [
            {"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "name": "web"}]}});
        assert_eq!(super::gitops_marker(&rollout), None);
        let helm = json!({"metadata": {"ownerReferences": [
            {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease", "name": "web"}]}});
        assert_eq!(super::gitops_marker(&helm).map(|m| m.0), Some("flux"));
    }

    use super::*;

    /// A stall the controller reported before the latest spec is about the rollout that spec
    /// replaced; with no observed generation the status is taken as the controller's.
    #[test]
    fn a_progress_deadline_counts_for_the_spec_the_controller_saw() {
        let d = |observed: Option<i64>| {
            let mut d = serde_json::json!({"kind": "Deployment", "metadata": {"generation": 3},
                "status": {"conditions": [{"type": "Progressing", "status": "False",
                    "reason": "ProgressDeadlineExceeded", "message": "exceeded"}]}});
            if let Some(o) = observed {
                d["status"]["observedGeneration"] = o.into();
            }
            progress_deadline_exceeded(&d)
        };
        assert_eq!(d(Some(3)).as_deref(), Some("exceeded"));
        assert_eq!(d(Some(2)), None);
        assert_eq!(d(None).as_deref(), Some("exceeded"));
    }

    #[test]
    fn names_a_controller_generated_are_told_from_neighbours_that_start_the_same() {
        for generated in [
            "api-7d4b9c8f6",
            "api-7d4b9c8f6-x2k9p",
            "api-x2k9p",
            "db-0",
            "backup-28934520",
            "backup-28934520-zq8wc",
            "api-784c1b9d0-h2x1q",
        ] {
            let owner = generated.split('-').next().unwrap_or_default();
            assert!(generated_from(generated, owner), "{generated}");
        }
        for neighbour in [
            "api-migrate",
            "api-migrate-x2k9p",
            "api",
            "apiserver-x2k9p",
            "api-",
            "api-7d4-x2k-9p",
            "api-canary",
        ] {
            assert!(!generated_from(neighbour, "api"), "{neighbour}");
        }
    }
}
