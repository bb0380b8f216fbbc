//! A pod that fails on state of its own, kept across container restarts.

use chrono::{DateTime, Utc};

use crate::cluster::observed::{Container, Event, KeptState, Pod, own_error_exit};

/// Restarts after which "every start since has failed" is what the pod shows: two starts that
/// ended on the same kind of error (the log names the state), or three after a probe kill —
/// with no log naming the state, one more start guards against a slow recovery.
const NAMED_RESTARTS: i64 = 2;
const KILLED_RESTARTS: i64 = 3;

/// The pod fails on state it keeps across container restarts, which a new pod starts without.
#[derive(Debug, Clone, PartialEq)]
pub struct StateKept {
    /// The lines that show it.
    pub evidence: Vec<String>,
    /// The path in an emptyDir that the error of its last start names, when that is what shows
    /// it.
    pub named: Option<KeptState>,
    /// Otherwise: when the kubelet first killed it for a failed probe, and how many times.
    pub killed: Option<(DateTime<Utc>, i64)>,
}

/// The container whose log tells what the pod's starts end on: the one restarted most, if any
/// restarted.
pub fn restarting_container(pod: &Pod) -> Option<&Container> {
    pod.containers
        .iter()
        .filter(|c| !c.init && c.restarts > 0)
        .max_by_key(|c| c.restarts)
}

/// The pod ran ready ([`Pod::was_ready`]), every start of a container since has ended on an
/// error of its own (not a kill signal), and that container mounts an emptyDir
/// ([`Pod::empty_dirs_of`]; a sidecar's is not its state) — which container restarts
/// keep, with whatever an earlier process left there (a lock, pid or socket file, a half-written
/// cache). Then either the error the last start ended on names a path in that emptyDir (`log`,
/// the previous instance's log of [`restarting_container`]), or the kubelet killed the container
/// for a failed probe (`events`: the namespace's) and the starts since fail on their own. `None`
/// when any of it is missing.
pub fn state_kept(pod: &Pod, events: &[Event], log: Option<&str>) -> Option<StateKept> {
    if pod.was_ready() != Some(true) {
        return None;
    }
    let c = restarting_container(pod)?;
    let empty_dirs = pod.empty_dirs_of(&c.name);
    if empty_dirs.is_empty() {
        return None;
    }
    let restarts = c.restarts;
    let (_, code, _) = c
        .terminated
        .as_ref()
        .filter(|(r, code, _)| r == "Error" && own_error_exit(*code))?;
    // What its last start ended on names the state.
    if restarts >= NAMED_RESTARTS
        && let Some(k) = log.and_then(|l| pod.kept_state_named(&c.name, l))
    {
        return Some(StateKept {
            evidence: vec![
                format!(
                    "pod {} ran ready, and container {} has restarted {restarts} times since, its last start ending on an error of its own (exit {code})",
                    pod.name, c.name
                ),
                format!(
                    "that error names {} in emptyDir volume {}, which container restarts keep and a new pod starts without: {}",
                    k.path, k.volume, k.line
                ),
            ],
            named: Some(k),
            killed: None,
        });
    }
    let kills: Vec<&Event> = events
        .iter()
        .filter(|e| e.kind == "Pod" && e.name == pod.name && e.probe_kill().is_some())
        .collect();
    let killed = kills.iter().filter_map(|e| e.first.or(e.last)).min()?;
    let times_killed: i64 = kills.iter().map(|e| e.count).sum();
    // The later starts end on their own (an error exit, not a kill signal): the probe killed
    // it, not every time since.
    if restarts < KILLED_RESTARTS || times_killed >= restarts {
        return None;
    }
    Some(StateKept {
        evidence: vec![
            format!(
                "pod {} ran ready, the kubelet killed it at {} (a failed probe, {times_killed} time(s)), and every start of container {} since has failed ({restarts} restarts, last exit Error {code})",
                pod.name,
                killed.format("%H:%M:%S"),
                c.name
            ),
            format!(
                "it keeps emptyDir volume(s) {} across container restarts, with what the killed process left there; a new pod starts with empty ones",
                empty_dirs.join(", ")
            ),
        ],
        named: None,
        killed: Some((killed, times_killed)),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The only pod of a singleton, its container restarted `restarts` times, last exit 1; its
    /// Ready condition False since `ready_changed` (started 18:13:29).
    fn singleton(restarts: i64, ready_changed: &str) -> Pod {
        Pod::parse(&json!({
            "metadata": {"name": "sched-1"},
            "spec": {
                "containers": [{"name": "sched", "volumeMounts": [
                    {"name": "state", "mountPath": "/var/lib/sched"},
                    {"name": "conf", "mountPath": "/etc/sched", "readOnly": true}]}],
                "volumes": [{"name": "state", "emptyDir": {}},
                    {"name": "conf", "configMap": {"name": "sched"}}]},
            "status": {"phase": "Running", "startTime": "2026-11-28T18:13:29Z",
                "conditions": [{"type": "Ready", "status": "False",
                    "lastTransitionTime": ready_changed}],
                "containerStatuses": [{"name": "sched", "restartCount": restarts,
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                    "lastState": {"terminated": {"reason": "Error", "exitCode": 1,
                        "finishedAt": "2026-11-28T18:14:56Z"}}}]}
        }))
    }

    const SERVED: &str = "2026-11-28T18:14:40Z";

    #[test]
    fn a_singleton_that_ran_and_whose_last_start_names_its_emptydir_keeps_state() {
        let lock = "report 3.2.1 starting\nFATAL: cannot acquire instance lock /var/lib/sched/sched.lock: lock held by sched-1 pid=1";
        // Ready from its start until 18:14:40, then every start failed (as the real kubelet
        // reported it).
        let kept = state_kept(&singleton(2, SERVED), &[], Some(lock));
        let named = kept.and_then(|k| k.named).map(|k| k.path);
        assert_eq!(named.as_deref(), Some("/var/lib/sched/sched.lock"));
        // Never ready since it started: what its emptyDir holds came from its own first start.
        assert!(state_kept(&singleton(2, "2026-11-28T18:13:30Z"), &[], Some(lock)).is_none());
        // The error names its configuration: a replacement reads it alike.
        let conf = "FATAL: cannot parse /etc/sched/schedules.yaml";
        assert!(state_kept(&singleton(2, SERVED), &[], Some(conf)).is_none());
        // One restart: not yet every start since.
        assert!(state_kept(&singleton(1, SERVED), &[], Some(lock)).is_none());
        // No log read: nothing names the state, and no probe killed it.
        assert!(state_kept(&singleton(4, SERVED), &[], None).is_none());
    }

    #[test]
    fn a_probe_kill_then_failing_starts_keeps_state_without_a_log() {
        let kill = |count: i64| {
            Event::parse(&json!({
                "involvedObject": {"kind": "Pod", "name": "sched-1"}, "reason": "Killing",
                "message": "Container sched failed liveness probe, will be restarted",
                "type": "Normal", "count": count, "firstTimestamp": "2026-11-28T18:14:30Z",
            }))
        };
        let kept = state_kept(&singleton(4, SERVED), &[kill(1)], None);
        assert!(kept.is_some_and(|k| k.killed.is_some() && k.named.is_none()));
        // Killed every time: the probe, not the state, ends each start.
        assert!(state_kept(&singleton(4, SERVED), &[kill(4)], None).is_none());
        assert!(state_kept(&singleton(2, SERVED), &[kill(1)], None).is_none());
        // The emptyDir is a log shipper's, not the failing container's: nothing of its own
        // is kept across its restarts, and a new pod would fail alike.
        let mut shipper = singleton(4, SERVED).raw;
        shipper["spec"]["containers"][0]["volumeMounts"] =
            json!([{"name": "conf", "mountPath": "/etc/sched", "readOnly": true}]);
        shipper["spec"]["containers"].as_array_mut().unwrap().push(
            json!({"name": "shipper", "volumeMounts": [{"name": "state", "mountPath": "/logs"}]}),
        );
        assert!(state_kept(&Pod::parse(&shipper), &[kill(1)], None).is_none());
    }
}
