//! The steps that are more than one write: reading a step's arguments, checking that a PVC can
//! grow, rolling a StatefulSet back to a ControllerRevision, waiting for a rollout.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};

use super::writes;
use crate::cluster::obj::{self, at, i64_at, str_at};
use crate::cluster::{
    ClusterError, ClusterReader, ClusterWriter, ErrorKind, PatchType, WriteOutcome,
};
use crate::domain::Target;

pub type Args = BTreeMap<String, Value>;

pub(super) fn invalid(msg: impl Into<String>) -> ClusterError {
    ClusterError::new(ErrorKind::Invalid, msg)
}

pub(super) fn text<'a>(args: &'a Args, key: &str, action: &str) -> Result<&'a str, ClusterError> {
    args.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| invalid(format!("{action}: argument `{key}` is missing or empty")))
}

pub(super) fn number(args: &Args, key: &str, action: &str) -> Result<i64, ClusterError> {
    match args.get(key) {
        Some(Value::Number(n)) => n.as_i64(),
        Some(Value::String(s)) => s.trim().parse().ok(),
        _ => None,
    }
    .ok_or_else(|| invalid(format!("{action}: argument `{key}` is not a whole number")))
}

pub(super) fn namespace<'a>(target: &'a Target, action: &str) -> Result<&'a str, ClusterError> {
    target
        .namespace
        .as_deref()
        .ok_or_else(|| invalid(format!("{action}: {target} has no namespace")))
}

pub(super) fn node(target: &Target, action: &str) -> Result<String, ClusterError> {
    if target.kind != "Node" {
        return Err(invalid(format!("{action} works on a Node, not {target}")));
    }
    Ok(target.name.clone())
}

/// A PVC grows only when its StorageClass says `allowVolumeExpansion: true`.
pub(super) async fn check_expandable(
    r: &dyn ClusterReader,
    ns: &str,
    pvc: &str,
) -> Result<(), ClusterError> {
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
pub(super) async fn rollback_statefulset(
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
pub(super) async fn wait_rollout(
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
}
