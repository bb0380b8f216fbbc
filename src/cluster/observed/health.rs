//! A workload's health as the undo compares it: its pods, ready and failing, by the one
//! definition of a failing pod ([`Pod::failure`]).

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{Pod, Workload};
use crate::domain::{PodFailure, TargetHealth};

/// The health of `workload` from its `pods`, as of `now`: pods being deleted are leaving and
/// do not count; a pod failing is one [`Pod::failure`] says is (a pod that runs and has not
/// been ready yet, for less than `NEVER_READY_ALLOWANCE`, is starting: a rollout still under
/// way).
pub fn target_health(workload: &Value, pods: &[Pod], now: DateTime<Utc>) -> TargetHealth {
    // A pod its node ended is a record its controller replaced, not a replica.
    let live: Vec<&Pod> = pods
        .iter()
        .filter(|p| !p.deleting && !p.outlived())
        .collect();
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    TargetHealth {
        observed_at: now,
        pods: count(live.len()),
        ready: count(live.iter().filter(|p| p.ready).count()),
        // What it asks for, a DaemonSet by its nodes ([`Workload::wanted`]).
        desired: u32::try_from(Workload::parse(workload).wanted()).ok(),
        failing: live
            .iter()
            .filter_map(|p| {
                let f = p.failure()?;
                Some(PodFailure {
                    pod: p.name.clone(),
                    cause: f.cause,
                    line: f.line,
                })
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// [`target_health`] of pods as the API server returns them.
    fn health_of(workload: &Value, pods: &[Value], now: DateTime<Utc>) -> TargetHealth {
        let pods: Vec<Pod> = pods.iter().map(|p| Pod::at(p, now)).collect();
        target_health(workload, &pods, now)
    }

    #[test]
    fn ready_and_failing_pods_are_counted_by_the_one_failure() {
        let now = Utc::now();
        let ready = json!({"metadata": {"name": "a"}, "status": {"phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": "app", "ready": true, "state": {"running": {}}}]}});
        let looping = json!({"metadata": {"name": "b"}, "status": {"phase": "Running",
            "conditions": [{"type": "Ready", "status": "False"}],
            "containerStatuses": [{"name": "app", "ready": false, "restartCount": 3,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}});
        let leaving = json!({"metadata": {"name": "c",
            "deletionTimestamp": now.to_rfc3339()}, "status": {"phase": "Running"}});
        let h = health_of(
            &json!({"spec": {"replicas": 2}}),
            &[ready, looping, leaving],
            now,
        );
        assert_eq!((h.pods, h.ready, h.desired), (2, 1, Some(2)));
        assert_eq!(h.failing.len(), 1);
        assert_eq!(h.failing[0].pod, "b");
        assert_eq!(h.failing[0].cause, "CrashLoopBackOff");
        // A DaemonSet asks for a pod on each node it is scheduled to, with no spec.replicas.
        let ds = json!({"kind": "DaemonSet", "status": {"desiredNumberScheduled": 3}});
        assert_eq!(health_of(&ds, &[], now).desired, Some(3));
        // Caught between two crashes, or backing off after one: the same cause.
        let exited = json!({"metadata": {"name": "d"}, "status": {"phase": "Running",
            "containerStatuses": [{"name": "app", "restartCount": 4,
                "state": {"terminated": {"reason": "Error", "exitCode": 1}}}]}});
        let backing_off = json!({"metadata": {"name": "e"}, "status": {"phase": "Running",
            "containerStatuses": [{"name": "app", "restartCount": 4,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"reason": "Error", "exitCode": 1}}}]}});
        let h = health_of(&json!({}), &[exited, backing_off], now);
        // A pod seconds old that runs but has not been ready yet is starting; the same pod
        // never ready five minutes after it started fails.
        let unready_since = |start: DateTime<Utc>| {
            let start = start.to_rfc3339();
            json!({"metadata": {"name": "f", "creationTimestamp": start},
                "status": {"phase": "Running", "startTime": start,
                    "conditions": [{"type": "Ready", "status": "False",
                        "lastTransitionTime": start}],
                    "containerStatuses": [{"name": "app", "state": {"running": {}}}]}})
        };
        let starting = unready_since(now - chrono::Duration::seconds(10));
        assert!(health_of(&json!({}), &[starting], now).failing.is_empty());
        let never = unready_since(now - chrono::Duration::minutes(5));
        let h5 = health_of(&json!({}), &[never], now);
        assert_eq!(h5.failing.len(), 1);
        assert_eq!(h5.failing[0].line, "running, never ready in 5m");
        let causes: Vec<&str> = h.failing.iter().map(|f| f.cause.as_str()).collect();
        assert_eq!(causes, ["exited Error", "exited Error"]);
    }
}
