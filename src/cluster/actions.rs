//! The builtin actions: each step action of the catalog (`catalog::BUILTIN_ACTIONS`) as calls
//! through [`ClusterReader`] + [`ClusterWriter`], most of them in [`super::writes`]. Execution
//! runs them for real; proving runs them through a [`super::DryRunWriter`] to show the change
//! an approver is asked to approve.
//!
//! Input: the action, its arguments with `${PARAM}` already substituted, the verified root
//! owner, and a writer that stamps every change. Output: what the step did, or a
//! [`ClusterError`] naming what refused it. [`object_of`] names the object a step changes, so
//! that after a crash the executor can read its stamp instead of repeating the step.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::obj::{self, array, at, i64_at, str_at};
use super::writes::{self, WriteOutcome};
use super::{ClusterError, ClusterReader, ClusterWriter, ErrorKind, PatchType};
use crate::domain::Target;

pub type Args = BTreeMap<String, Value>;

fn invalid(msg: impl Into<String>) -> ClusterError {
    ClusterError::new(ErrorKind::Invalid, msg)
}

fn text<'a>(args: &'a Args, key: &str, action: &str) -> Result<&'a str, ClusterError> {
    args.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| invalid(format!("{action}: argument `{key}` is missing or empty")))
}

fn number(args: &Args, key: &str, action: &str) -> Result<i64, ClusterError> {
    match args.get(key) {
        Some(Value::Number(n)) => n.as_i64(),
        Some(Value::String(s)) => s.trim().parse().ok(),
        _ => None,
    }
    .ok_or_else(|| invalid(format!("{action}: argument `{key}` is not a whole number")))
}

fn namespace<'a>(target: &'a Target, action: &str) -> Result<&'a str, ClusterError> {
    target
        .namespace
        .as_deref()
        .ok_or_else(|| invalid(format!("{action}: {target} has no namespace")))
}

/// The object a step changes (kind, namespace, name), when it changes one object that can
/// carry the stamp. `None` for steps that only read (`wait_rollout`) or touch many objects.
pub fn object_of(action: &str, args: &Args, target: &Target) -> Option<Target> {
    let ns = target.namespace.clone();
    let named = |kind: &str, key: &str| {
        args.get(key)
            .and_then(Value::as_str)
            .map(|n| Target::new(kind, n, ns.clone()))
    };
    match action {
        "rollout_undo"
        | "rollout_restart"
        | "scale"
        | "set_resources"
        | "rollback_statefulset"
        | "cordon"
        | "remove_taint"
        | "drain" => Some(target.clone()),
        "patch_hpa_max" => named("HorizontalPodAutoscaler", "hpa"),
        "relax_pdb" => named("PodDisruptionBudget", "pdb"),
        "expand_pvc" => named("PersistentVolumeClaim", "pvc"),
        "delete_pod" => named("Pod", "pod"),
        _ => None,
    }
}

/// Whether a step reads only (nothing to reconcile after a crash: it is simply run again).
pub fn is_read_only(action: &str) -> bool {
    action == "wait_rollout"
}

/// Run one builtin step.
pub async fn run(
    r: &dyn ClusterReader,
    w: &dyn ClusterWriter,
    action: &str,
    args: &Args,
    target: &Target,
    now: DateTime<Utc>,
    dry_run: bool,
) -> Result<WriteOutcome, ClusterError> {
    match action {
        "rollout_undo" => {
            if target.kind != "Deployment" {
                return Err(invalid(format!(
                    "rollout_undo works on a Deployment, not {target}"
                )));
            }
            let to = number(args, "toRevision", action)?;
            writes::rollout_undo(
                r,
                w,
                namespace(target, action)?,
                &target.name,
                Some(to),
                dry_run,
            )
            .await
        }
        "rollout_restart" => {
            writes::rollout_restart(
                r,
                w,
                &target.kind,
                namespace(target, action)?,
                &target.name,
                now,
                dry_run,
            )
            .await
        }
        "scale" => {
            let replicas = number(args, "replicas", action)?;
            writes::scale(
                r,
                w,
                &target.kind,
                namespace(target, action)?,
                &target.name,
                replicas,
                dry_run,
            )
            .await
        }
        "set_resources" => {
            let container = text(args, "container", action)?;
            let mut limits = serde_json::Map::new();
            let mut requests = serde_json::Map::new();
            for (key, is_limit, field) in [
                ("memoryLimit", true, "memory"),
                ("cpuLimit", true, "cpu"),
                ("memoryRequest", false, "memory"),
                ("cpuRequest", false, "cpu"),
            ] {
                if let Some(v) = args
                    .get(key)
                    .and_then(Value::as_str)
                    .filter(|v| !v.is_empty())
                {
                    let into = if is_limit { &mut limits } else { &mut requests };
                    into.insert(field.into(), json!(v));
                }
            }
            if limits.is_empty() && requests.is_empty() {
                return Err(invalid("set_resources: no limit or request to set"));
            }
            let mut resources = serde_json::Map::new();
            if !limits.is_empty() {
                resources.insert("limits".into(), Value::Object(limits));
            }
            if !requests.is_empty() {
                resources.insert("requests".into(), Value::Object(requests));
            }
            // The container must exist: a strategic merge would otherwise add a new, empty one.
            let res = r.resource(&target.kind).await?;
            let current = r
                .get(&res, target.namespace.as_deref(), &target.name)
                .await?;
            let known = array(&current, &["spec", "template", "spec", "containers"])
                .iter()
                .any(|c| str_at(c, &["name"]) == Some(container));
            if !known {
                return Err(invalid(format!(
                    "set_resources: {target} has no container `{container}`"
                )));
            }
            writes::set_resources(r, w, target, container, &Value::Object(resources), dry_run).await
        }
        "patch_hpa_max" => {
            let hpa = text(args, "hpa", action)?;
            let max = number(args, "maxReplicas", action)?;
            writes::patch_hpa_max(r, w, namespace(target, action)?, hpa, max, dry_run).await
        }
        "relax_pdb" => {
            let pdb = text(args, "pdb", action)?;
            let max = number(args, "maxUnavailable", action)?;
            writes::relax_pdb(r, w, namespace(target, action)?, pdb, max, dry_run).await
        }
        "delete_pod" => {
            let pod = text(args, "pod", action)?;
            writes::delete_pod(r, w, namespace(target, action)?, pod, dry_run).await
        }
        "cordon" => writes::cordon(r, w, &node(target, action)?, true, dry_run).await,
        "drain" => writes::drain(r, w, &node(target, action)?, dry_run).await,
        "remove_taint" => {
            let key = text(args, "key", action)?;
            let effect = args
                .get("effect")
                .and_then(Value::as_str)
                .filter(|e| !e.is_empty());
            writes::remove_taint(r, w, &node(target, action)?, key, effect, dry_run).await
        }
        "expand_pvc" => {
            let pvc = text(args, "pvc", action)?;
            let size = text(args, "size", action)?;
            let ns = namespace(target, action)?;
            check_expandable(r, ns, pvc).await?;
            writes::expand_pvc(r, w, ns, pvc, size, dry_run).await
        }
        "rollback_statefulset" => {
            let to = number(args, "toRevision", action)?;
            rollback_statefulset(r, w, target, to, dry_run).await
        }
        "wait_rollout" => {
            let timeout = args
                .get("timeoutSeconds")
                .and_then(Value::as_u64)
                .unwrap_or(300);
            wait_rollout(r, target, Duration::from_secs(timeout), dry_run).await
        }
        other => Err(invalid(format!("unknown builtin action `{other}`"))),
    }
}

fn node(target: &Target, action: &str) -> Result<String, ClusterError> {
    if target.kind != "Node" {
        return Err(invalid(format!("{action} works on a Node, not {target}")));
    }
    Ok(target.name.clone())
}

/// A PVC grows only when its StorageClass says `allowVolumeExpansion: true`.
async fn check_expandable(r: &dyn ClusterReader, ns: &str, pvc: &str) -> Result<(), ClusterError> {
    let pvcs = r.resource("PersistentVolumeClaim").await?;
    let claim = r.get(&pvcs, Some(ns), pvc).await?;
    let class = str_at(&claim, &["spec", "storageClassName"]).ok_or_else(|| {
        invalid(format!(
            "PVC {ns}/{pvc} names no StorageClass; it cannot be expanded"
        ))
    })?;
    let classes = r.resource("StorageClass").await?;
    let sc = r.get(&classes, None, class).await?;
    if at(&sc, &["allowVolumeExpansion"]).and_then(Value::as_bool) != Some(true) {
        return Err(invalid(format!(
            "StorageClass {class} of PVC {ns}/{pvc} does not allow volume expansion"
        )));
    }
    Ok(())
}

/// `kubectl rollout undo --to-revision` for a StatefulSet: apply the pod template of the
/// ControllerRevision with the revision number named, an earlier one than the update revision.
async fn rollback_statefulset(
    r: &dyn ClusterReader,
    w: &dyn ClusterWriter,
    target: &Target,
    to_revision: i64,
    dry_run: bool,
) -> Result<WriteOutcome, ClusterError> {
    if target.kind != "StatefulSet" {
        return Err(invalid(format!(
            "rollback_statefulset works on a StatefulSet, not {target}"
        )));
    }
    let ns = namespace(target, "rollback_statefulset")?;
    let sets = r.resource("StatefulSet").await?;
    let sts = r.get(&sets, Some(ns), &target.name).await?;
    let update = str_at(&sts, &["status", "updateRevision"]).unwrap_or("");
    let owned = writes::owned_by(r, "ControllerRevision", ns, &sts).await?;
    let number_of = |rev: &Value| i64_at(rev, &["revision"]).unwrap_or(0);
    let update_number = owned
        .iter()
        .find(|rev| obj::name(rev) == update)
        .map(number_of)
        .unwrap_or(i64::MAX);
    if to_revision >= update_number {
        return Err(invalid(format!(
            "StatefulSet {ns}/{} is updating to revision {update_number}: revision {to_revision} is not an earlier one",
            target.name
        )));
    }
    let previous = owned
        .iter()
        .find(|rev| number_of(rev) == to_revision)
        .ok_or_else(|| {
            invalid(format!(
                "StatefulSet {ns}/{} keeps no revision {to_revision} to roll back to",
                target.name
            ))
        })?;
    let data = at(previous, &["data"])
        .cloned()
        .filter(|d| at(d, &["spec", "template"]).is_some())
        .ok_or_else(|| invalid("the previous ControllerRevision holds no pod template"))?;
    w.patch(
        &sets,
        Some(ns),
        &target.name,
        PatchType::Strategic,
        &data,
        dry_run,
    )
    .await?;
    Ok(WriteOutcome {
        action: "rollback_statefulset".into(),
        target: target.to_string(),
        dry_run,
        detail: json!({"fromRevision": update, "toRevision": obj::name(previous),
            "revision": number_of(previous)}),
    })
}

/// Wait until the workload's rollout is complete (the controller observed the new spec and
/// every replica is updated and available), polling. Not becoming available in time is an
/// observation, not a failure of the change: verification scores the result.
async fn wait_rollout(
    r: &dyn ClusterReader,
    target: &Target,
    timeout: Duration,
    dry_run: bool,
) -> Result<WriteOutcome, ClusterError> {
    let outcome = |available: bool, detail: Value| WriteOutcome {
        action: "wait_rollout".into(),
        target: target.to_string(),
        dry_run,
        detail: json!({"available": available, "status": detail}),
    };
    if dry_run {
        return Ok(outcome(false, json!("dry run: nothing to wait for")));
    }
    let res = r.resource(&target.kind).await?;
    let started = tokio::time::Instant::now();
    let deadline = started + timeout;
    loop {
        let o = r
            .get(&res, target.namespace.as_deref(), &target.name)
            .await?;
        let status = rollout_status(&o);
        if status.0 {
            return Ok(outcome(true, status.1));
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(outcome(false, status.1));
        }
        // Most rollouts finish within seconds: look often at first, then once a second.
        let pause = if started.elapsed() < Duration::from_secs(10) {
            Duration::from_millis(250)
        } else {
            Duration::from_secs(1)
        };
        tokio::time::sleep(pause).await;
    }
}

/// (complete, what the status says).
fn rollout_status(o: &Value) -> (bool, Value) {
    let generation = i64_at(o, &["metadata", "generation"]).unwrap_or(0);
    let observed = i64_at(o, &["status", "observedGeneration"]).unwrap_or(0);
    let want = i64_at(o, &["spec", "replicas"]).unwrap_or(1);
    let updated = i64_at(o, &["status", "updatedReplicas"]).unwrap_or(0);
    let available = match obj::kind(o) {
        "StatefulSet" => i64_at(o, &["status", "readyReplicas"]).unwrap_or(0),
        "DaemonSet" => i64_at(o, &["status", "numberAvailable"]).unwrap_or(0),
        _ => i64_at(o, &["status", "availableReplicas"]).unwrap_or(0),
    };
    let want = match obj::kind(o) {
        "DaemonSet" => i64_at(o, &["status", "desiredNumberScheduled"]).unwrap_or(0),
        _ => want,
    };
    let complete = observed >= generation && updated >= want && available >= want;
    (
        complete,
        json!({"replicas": want, "updated": updated, "available": available,
            "observedGeneration": observed, "generation": generation}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rollout_is_complete_only_when_observed_updated_and_available() {
        let d = |obs: i64, upd: i64, avail: i64| {
            json!({"kind": "Deployment", "metadata": {"generation": 3}, "spec": {"replicas": 2},
                "status": {"observedGeneration": obs, "updatedReplicas": upd, "availableReplicas": avail}})
        };
        assert!(rollout_status(&d(3, 2, 2)).0);
        assert!(
            !rollout_status(&d(2, 2, 2)).0,
            "the controller has not seen the change"
        );
        assert!(!rollout_status(&d(3, 1, 2)).0, "old pods still serve");
        assert!(!rollout_status(&d(3, 2, 1)).0, "a new pod is not available");
    }

    #[test]
    fn steps_name_the_object_they_change() {
        let t = Target::new("Deployment", "checkout", Some("shop".into()));
        let mut args = Args::new();
        args.insert("hpa".into(), json!("checkout-hpa"));
        assert_eq!(
            object_of("patch_hpa_max", &args, &t),
            Some(Target::new(
                "HorizontalPodAutoscaler",
                "checkout-hpa",
                Some("shop".into())
            ))
        );
        assert_eq!(object_of("rollout_undo", &args, &t), Some(t.clone()));
        assert_eq!(object_of("wait_rollout", &args, &t), None);
    }
}
