//! The steps that are more than one write: reading a step's arguments, checking that a PVC can
//! grow, rolling a StatefulSet back to a ControllerRevision, waiting for a rollout.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};

use super::writes;
use crate::cluster::obj::{self, at, i64_at, str_at};
use crate::cluster::observed;
use crate::cluster::selector::Selector;
use crate::cluster::{
    ClusterError, ClusterReader, ClusterWriter, ErrorKind, ListQuery, PatchType, WriteOutcome,
};
use crate::domain::{BuiltinAction, Target};

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

/// A step's `timeoutSeconds` (a number, or text the argument check accepts as one), else
/// `default` seconds.
pub(super) fn timeout(args: &Args, action: &str, default: u64) -> Result<Duration, ClusterError> {
    if !args.contains_key("timeoutSeconds") {
        return Ok(Duration::from_secs(default));
    }
    let secs = number(args, "timeoutSeconds", action)?;
    u64::try_from(secs)
        .map(Duration::from_secs)
        .map_err(|_| invalid(format!("{action}: argument `timeoutSeconds` is negative")))
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

/// A PVC grows only when its StorageClass says so ([`observed::StorageClass::expands`], as the
/// expansion proof and the rule ask).
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
    if !observed::StorageClass::parse(&sc).expands() {
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
        action: BuiltinAction::RollbackStatefulset.into(),
        target: target.to_string(),
        dry_run,
        detail: json!({"fromRevision": update, "toRevision": obj::name(previous),
            "revision": number_of(previous)}),
    })
}

/// How long every pod made since the change must have failed before the wait ends early: two
/// of the kubelet's first back-offs (10 s, 20 s), so one crash on the way up does not end it.
const FAILING_FOR: Duration = Duration::from_secs(20);

/// Wait until the workload's rollout is complete (the controller observed the new spec and
/// every replica is updated and available), polling. Not becoming available in time is an
/// observation, not a failure of the change: verification scores the result.
///
/// The wait also ends when the rollout cannot complete: the controller says its progress
/// deadline passed, or every pod made since the change has failed for [`FAILING_FOR`] (a limit
/// raised too little is OOM-killed again, an image that cannot be pulled stays unpulled).
/// Waiting out the timeout would only keep the request in Executing; the detail names the
/// failing pods.
pub(super) async fn wait_rollout(
    r: &dyn ClusterReader,
    target: &Target,
    timeout: Duration,
    dry_run: bool,
) -> Result<WriteOutcome, ClusterError> {
    let outcome = |available: bool, detail: Value| WriteOutcome {
        action: BuiltinAction::WaitRollout.into(),
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
    let mut failing_since: Option<tokio::time::Instant> = None;
    loop {
        let o = r
            .get(&res, target.namespace.as_deref(), &target.name)
            .await?;
        let mut status = rollout_status(&o);
        if status.0 {
            return Ok(outcome(true, status.1));
        }
        // Held by its own spec: waiting rolls nothing out; the outcome says what holds it.
        if status.1.get("held").is_some() {
            return Ok(outcome(false, status.1));
        }
        if let Some(stalled) = deadline_exceeded(&o) {
            if let Some(o) = status.1.as_object_mut() {
                o.insert("stalled".into(), json!(stalled));
            }
            return Ok(outcome(false, status.1));
        }
        let failing = new_pods_failing(r, &o).await;
        if failing.is_empty() {
            failing_since = None;
        } else {
            let since = *failing_since.get_or_insert_with(tokio::time::Instant::now);
            if since.elapsed() >= FAILING_FOR {
                if let Some(o) = status.1.as_object_mut() {
                    o.insert("failing".into(), json!(failing));
                }
                return Ok(outcome(false, status.1));
            }
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

/// The controller's own verdict that the rollout stalled: `Progressing=False` with
/// `ProgressDeadlineExceeded` for the generation it observed last (Deployments only).
/// A status without an observed generation is not yet the controller's word on this spec.
fn deadline_exceeded(o: &Value) -> Option<String> {
    i64_at(o, &["status", "observedGeneration"])?;
    observed::progress_deadline_exceeded(o)
}

/// The pods of the workload's current revision, when every one of them fails: `pod NAME:
/// FAILURE` for each; empty when there is none or one does not fail. The current revision is
/// the model's ([`observed::Workload::current_revision_number`] among a Deployment's
/// ReplicaSets, a StatefulSet's `updateRevision`); for other kinds nothing is known and the
/// wait goes on.
async fn new_pods_failing(r: &dyn ClusterReader, o: &Value) -> Vec<String> {
    let workload = observed::Workload::parse(o);
    let ns = obj::namespace(o).unwrap_or_default();
    let current: Option<observed::Revision> = match workload.kind.as_str() {
        "Deployment" => {
            let sets = writes::owned_by(r, "ReplicaSet", ns, o)
                .await
                .unwrap_or_default();
            let revisions = observed::revisions(&sets, observed::Revision::of_replicaset);
            workload
                .current_revision_number(&revisions)
                .and_then(|n| revisions.into_iter().find(|r| r.number == n))
        }
        // Its pods carry the update revision's name; nothing else of it is needed here.
        "StatefulSet" => workload.update_revision.map(|name| observed::Revision {
            hash: name.clone(),
            name,
            ..observed::Revision::default()
        }),
        _ => None,
    };
    let Some(current) = current else {
        return Vec::new();
    };
    let Some(selector) = at(o, &["spec", "selector"]).and_then(Selector::from_object) else {
        return Vec::new();
    };
    let pods = match r.resource("Pod").await {
        Ok(res) => r
            .list(&res, Some(ns), &ListQuery::labels(selector.to_query()))
            .await
            .unwrap_or_default(),
        Err(_) => Vec::new(),
    };
    let now = chrono::Utc::now();
    let pods: Vec<observed::Pod> = pods
        .iter()
        .map(|p| observed::Pod::at(p, now))
        .filter(|p| !p.deleting && current.owns(p))
        .collect();
    // Heeding the namespace's warnings, as every reader of failing does: a new pod whose volume
    // cannot mount fails. A cluster that does not answer shows no pod, as a failed list does:
    // the wait goes on.
    let pods = crate::cluster::heeding(r, pods, Some(ns))
        .await
        .unwrap_or_default();
    // Failing as the rollout rule and the rollback proof count it (Pod::fails_in_rollout):
    // kept from running, or running and never ready past its start-up allowance.
    let stalled = deadline_exceeded(o).is_some();
    let failing: Vec<String> = pods
        .iter()
        .filter(|p| p.fails_in_rollout(stalled))
        .map(|p| match p.broken() {
            Some(f) => format!("pod {}: {f}", p.name),
            None => format!("pod {}: running, never ready since it started", p.name),
        })
        .collect();
    if failing.is_empty() || failing.len() < pods.len() {
        return Vec::new();
    }
    failing
}

/// How long a rollout wait waits, unless its step says (`timeoutSeconds`): five minutes, which
/// most rollouts finish well within; a rollout that fails ends the wait sooner (every new pod
/// failing, a hold, the controller's own stall verdict).
pub const ROLLOUT_TIMEOUT_SECONDS: u64 = 300;

/// (complete, what the status says): complete as [`observed::Workload::rollout_done`] says; a
/// rollout its spec holds ([`observed::Workload::hold`]) is named, as waiting does not move it.
fn rollout_status(o: &Value) -> (bool, Value) {
    let w = observed::Workload::parse(o);
    // Not before its controller reported at all: a status nobody wrote is no finished rollout
    // here (ADR 0034), however `rollout_done` reads it for a decision.
    let done = w.observed_generation.is_some() && w.rollout_done();
    let held = (!done).then(|| w.hold()).flatten().map(|hold| match hold {
        observed::Hold::Paused => "the Deployment is paused (spec.paused)".to_owned(),
        observed::Hold::OnDelete => {
            "updateStrategy OnDelete: a pod moves only when deleted".to_owned()
        }
        observed::Hold::Partition(p) => {
            format!("rollingUpdate partition {p}: the ordinals below it stay")
        }
    });
    let mut status = json!({"replicas": w.wanted(),
        "updated": w.updated_replicas.unwrap_or(0), "available": w.available(),
        "observedGeneration": w.observed_generation.unwrap_or(0),
        "generation": w.generation.unwrap_or(0)});
    if let (Some(held), Some(fields)) = (held, status.as_object_mut()) {
        fields.insert("held".into(), json!(held));
    }
    (done, status)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(hash: &str, i: u32, crashing: bool) -> Value {
        let state = if crashing {
            json!({"waiting": {"reason": "CrashLoopBackOff"}})
        } else {
            json!({"running": {}})
        };
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("api-{hash}-{i}"), "namespace": "shop",
                "labels": {"app": "api", "pod-template-hash": hash}},
            "spec": {"containers": [{"name": "api", "image": "api:1"}]},
            "status": {"phase": "Running", "containerStatuses": [{"name": "api",
                "restartCount": if crashing { 3 } else { 0 }, "state": state,
                "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137}}}]}})
    }

    /// The pods of a Deployment at revision 2 (ReplicaSet `b`) beside revision 1's (`a`).
    async fn failing_of(pods: Vec<Value>) -> Vec<String> {
        let rs = |hash: &str, rev: &str| {
            json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": format!("api-{hash}"), "namespace": "shop",
                    "labels": {"app": "api", "pod-template-hash": hash},
                    "annotations": {"deployment.kubernetes.io/revision": rev},
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment",
                        "name": "api", "uid": "d-1", "controller": true}]}})
        };
        let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "api", "namespace": "shop", "uid": "d-1", "generation": 2,
                "annotations": {"deployment.kubernetes.io/revision": "2"}},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "api"}}}});
        let mut items = vec![deployment.clone(), rs("a", "1"), rs("b", "2")];
        items.extend(pods);
        let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
        let snap = crate::cluster::SnapshotCluster::from_yaml(&list.to_string())
            .unwrap_or_else(|e| panic!("{e}"));
        new_pods_failing(&snap, &deployment).await
    }

    #[tokio::test]
    async fn a_rollout_whose_every_new_pod_fails_cannot_complete() {
        let failing = failing_of(vec![pod("a", 1, false), pod("b", 1, true)]).await;
        assert_eq!(failing.len(), 1, "{failing:?}");
        assert!(
            failing[0].starts_with("pod api-b-1: container api CrashLoopBackOff"),
            "{failing:?}"
        );
        // One new pod runs: the rollout may still complete.
        let some = failing_of(vec![pod("b", 1, true), pod("b", 2, false)]).await;
        assert!(some.is_empty(), "{some:?}");
        // Only the old revision's pods fail: not this rollout's doing, and none of its own yet.
        let old = failing_of(vec![pod("a", 1, true)]).await;
        assert!(old.is_empty(), "{old:?}");
    }

    /// Issue 43: the wait counts a new pod failing as the rollout rule and the rollback proof
    /// do (`Pod::fails_in_rollout`): running but never ready past its start-up allowance is
    /// failing; a pod seconds into its start is not.
    #[tokio::test]
    async fn a_new_pod_never_ready_past_its_start_up_fails_the_rollout() {
        let never_ready = |seconds: i64| {
            let since = (chrono::Utc::now() - chrono::Duration::seconds(seconds)).to_rfc3339();
            let mut p = pod("b", 1, false);
            p["metadata"]["creationTimestamp"] = json!(since);
            p["status"]["startTime"] = json!(since);
            p["status"]["conditions"] = json!([{"type": "Ready", "status": "False",
                "lastTransitionTime": since}]);
            p["status"]["containerStatuses"][0]["ready"] = json!(false);
            p["status"]["containerStatuses"][0]["state"] = json!({"running": {"startedAt": since}});
            p["status"]["containerStatuses"][0]
                .as_object_mut()
                .map(|c| c.remove("lastState"));
            p
        };
        let failing = failing_of(vec![never_ready(600)]).await;
        assert_eq!(
            failing,
            ["pod api-b-1: running, never ready since it started"],
            "{failing:?}"
        );
        let starting = failing_of(vec![never_ready(5)]).await;
        assert!(starting.is_empty(), "{starting:?}");
    }

    /// Issue 43: the wait heeds the namespace's warnings as every reader of failing does
    /// (`cluster::heeding`): a new pod placed on its node whose volume cannot mount fails, where
    /// the same pod without that warning is still starting.
    #[tokio::test]
    async fn a_new_pod_whose_volume_cannot_mount_fails_the_rollout() {
        let placed = (chrono::Utc::now() - chrono::Duration::seconds(120)).to_rfc3339();
        let mut p = pod("b", 1, false);
        p["spec"]["nodeName"] = json!("node-1");
        p["status"] = json!({"phase": "Pending", "conditions": [{"type": "PodScheduled",
            "status": "True", "lastTransitionTime": placed}],
            "containerStatuses": [{"name": "api", "restartCount": 0, "ready": false,
                "state": {"waiting": {"reason": "ContainerCreating"}}}]});
        let warning = json!({"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "api-b-1.1", "namespace": "shop"},
            "involvedObject": {"kind": "Pod", "name": "api-b-1", "namespace": "shop"},
            "type": "Warning", "reason": "FailedMount", "lastTimestamp": chrono::Utc::now().to_rfc3339(),
            "message": "MountVolume.SetUp failed for volume \"certs\" : secret \"api-tls\" not found"});
        let starting = failing_of(vec![p.clone()]).await;
        assert!(starting.is_empty(), "{starting:?}");
        let failing = failing_of(vec![p, warning]).await;
        assert_eq!(failing.len(), 1, "{failing:?}");
        assert!(
            failing[0].starts_with("pod api-b-1:") && failing[0].contains("FailedMount"),
            "{failing:?}"
        );
    }

    #[tokio::test]
    async fn a_statefulsets_new_pods_are_those_of_its_update_revision() {
        let sts = json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "db", "namespace": "shop", "uid": "s-1"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "db"}}},
            "status": {"currentRevision": "db-6f7", "updateRevision": "db-8a9"}});
        let pod = |name: &str, revision: &str, crashing: bool| {
            let mut p = pod("x", 1, crashing);
            p["metadata"]["name"] = json!(name);
            p["metadata"]["labels"] = json!({"app": "db", "controller-revision-hash": revision});
            p
        };
        let failing_of = |pods: Vec<Value>| {
            let mut items = vec![sts.clone()];
            items.extend(pods);
            let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
            crate::cluster::SnapshotCluster::from_yaml(&list.to_string())
                .unwrap_or_else(|e| panic!("{e}"))
        };
        let snap = failing_of(vec![
            pod("db-1", "db-8a9", true),
            pod("db-0", "db-6f7", false),
        ]);
        let failing = new_pods_failing(&snap, &sts).await;
        assert_eq!(failing.len(), 1, "{failing:?}");
        assert!(failing[0].starts_with("pod db-1:"), "{failing:?}");
        // The old revision's pod failing is not the update's doing.
        let snap = failing_of(vec![pod("db-1", "db-6f7", true)]);
        assert!(new_pods_failing(&snap, &sts).await.is_empty());
    }

    #[test]
    fn the_controllers_progress_deadline_ends_the_wait_for_the_generation_it_saw() {
        let d = |observed: i64| {
            json!({"kind": "Deployment", "metadata": {"generation": 3},
                "status": {"observedGeneration": observed, "conditions": [{"type": "Progressing",
                    "status": "False", "reason": "ProgressDeadlineExceeded",
                    "message": "ReplicaSet \"api-b\" has timed out progressing."}]}})
        };
        assert_eq!(
            deadline_exceeded(&d(3)).as_deref(),
            Some("ReplicaSet \"api-b\" has timed out progressing.")
        );
        assert_eq!(deadline_exceeded(&d(2)), None, "a verdict on the old spec");
    }

    #[test]
    fn a_rollout_is_complete_only_when_observed_updated_and_available() {
        let d = |obs: i64, upd: i64, avail: i64| {
            json!({"kind": "Deployment", "metadata": {"generation": 3}, "spec": {"replicas": 2},
                "status": {"observedGeneration": obs, "updatedReplicas": upd, "availableReplicas": avail}})
        };
        assert!(rollout_status(&d(3, 2, 2)).0);
        let mut unreported = d(3, 2, 2);
        unreported["status"]
            .as_object_mut()
            .unwrap()
            .remove("observedGeneration");
        assert!(
            !rollout_status(&unreported).0,
            "no word from the controller yet"
        );
        assert!(
            !rollout_status(&d(2, 2, 2)).0,
            "the controller has not seen the change"
        );
        assert!(!rollout_status(&d(3, 1, 2)).0, "old pods still serve");
        assert!(!rollout_status(&d(3, 2, 1)).0, "a new pod is not available");
        // Every pod updated and available, but an old one not yet gone: `kubectl rollout
        // status` waits for it, and so do the proofs that call a rollout under way.
        let mut surging = d(3, 2, 2);
        surging["status"]["replicas"] = json!(3);
        assert!(!rollout_status(&surging).0, "an old pod is still there");
        // Held by its spec: not complete, and the status says what holds it, so the wait
        // ends instead of waiting out its timeout.
        let mut paused = d(3, 1, 2);
        paused["spec"]["paused"] = json!(true);
        let (complete, status) = rollout_status(&paused);
        assert!(!complete);
        assert_eq!(status["held"], "the Deployment is paused (spec.paused)");
        let canary = json!({"kind": "StatefulSet", "metadata": {"generation": 2},
            "spec": {"replicas": 3, "updateStrategy": {"type": "RollingUpdate",
                "rollingUpdate": {"partition": 2}}},
            "status": {"observedGeneration": 2, "readyReplicas": 3, "updatedReplicas": 1,
                "currentRevision": "db-a", "updateRevision": "db-b"}});
        let (complete, status) = rollout_status(&canary);
        assert!(!complete);
        assert!(
            status["held"].as_str().unwrap().contains("partition 2"),
            "{status}"
        );
        assert!(rollout_status(&d(3, 2, 2)).1.get("held").is_none());
    }

    #[test]
    fn a_daemonsets_rollout_is_complete_by_its_own_counts() {
        // A DaemonSet's status has no updatedReplicas or availableReplicas: its rollout was
        // never complete when those were read.
        let ds = |upd: i64, avail: i64| {
            json!({"kind": "DaemonSet", "metadata": {"generation": 2},
                "status": {"observedGeneration": 2, "desiredNumberScheduled": 3,
                    "updatedNumberScheduled": upd, "numberAvailable": avail, "numberReady": avail}})
        };
        let (complete, status) = rollout_status(&ds(3, 3));
        assert!(complete, "{status}");
        assert_eq!(status["replicas"], 3);
        assert!(
            !rollout_status(&ds(2, 3)).0,
            "a node still runs the old pod"
        );
        assert!(!rollout_status(&ds(3, 2)).0, "a new pod is not available");
    }
}
