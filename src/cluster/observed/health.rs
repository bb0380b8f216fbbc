//! A workload's health as the undo compares it: its pods, ready and failing, by the one
//! definition of a failing pod ([`Pod::failure`]).

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{FailureKind, NEVER_READY_ALLOWANCE, Pod};
use crate::cluster::obj::i64_at;
use crate::domain::{PodFailure, TargetHealth};

/// The health of `workload` from its `pods`, as of `now`: pods being deleted are leaving and
/// do not count; a pod that runs but is not ready yet, younger than [`NEVER_READY_ALLOWANCE`],
/// is starting (a rollout still under way), not failing.
pub fn target_health(workload: &Value, pods: &[Value], now: DateTime<Utc>) -> TargetHealth {
    let live: Vec<Pod> = pods
        .iter()
        .map(|p| Pod::at(p, now))
        .filter(|p| !p.deleting)
        .collect();
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    TargetHealth {
        observed_at: now,
        pods: count(live.len()),
        ready: count(live.iter().filter(|p| p.ready).count()),
        desired: i64_at(workload, &["spec", "replicas"]).and_then(|n| u32::try_from(n).ok()),
        failing: live
            .iter()
            .filter_map(|p| {
                let f = p.failure()?;
                let young = p
                    .created
                    .is_some_and(|c| now - c < chrono::Duration::seconds(NEVER_READY_ALLOWANCE));
                if f.kind == FailureKind::NotReady && young {
                    return None;
                }
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
        let h = target_health(
            &json!({"spec": {"replicas": 2}}),
            &[ready, looping, leaving],
            now,
        );
        assert_eq!((h.pods, h.ready, h.desired), (2, 1, Some(2)));
        assert_eq!(h.failing.len(), 1);
        assert_eq!(h.failing[0].pod, "b");
        assert_eq!(h.failing[0].cause, "CrashLoopBackOff");
        // Caught between two crashes, or backing off after one: the same cause.
        let exited = json!({"metadata": {"name": "d"}, "status": {"phase": "Running",
            "containerStatuses": [{"name": "app", "restartCount": 4,
                "state": {"terminated": {"reason": "Error", "exitCode": 1}}}]}});
        let backing_off = json!({"metadata": {"name": "e"}, "status": {"phase": "Running",
            "containerStatuses": [{"name": "app", "restartCount": 4,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"reason": "Error", "exitCode": 1}}}]}});
        let h = target_health(&json!({}), &[exited, backing_off], now);
        // A pod seconds old that runs but is not ready yet is starting.
        let starting = json!({"metadata": {"name": "f", "creationTimestamp": now.to_rfc3339()},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}],
            "containerStatuses": [{"name": "app", "state": {"running": {}}}]}});
        assert!(
            target_health(&json!({}), &[starting], now)
                .failing
                .is_empty()
        );
        let causes: Vec<&str> = h.failing.iter().map(|f| f.cause.as_str()).collect();
        assert_eq!(causes, ["exited Error", "exited Error"]);
    }
}
