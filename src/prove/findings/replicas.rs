//! How many replicas a workload is meant to run, and whether it runs fewer.

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::cluster::obj;
use crate::cluster::observed::{Event, Hpa, Pod, Workload};

/// The replica count a workload is meant to run, and what says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Declared {
    pub count: i64,
    /// The line that shows it.
    pub evidence: String,
    /// When it was scaled down from it, for a count read from the scaling history.
    pub scaled_down_at: Option<DateTime<Utc>>,
}

/// The replica count `workload` is meant to run, when something says it differs from or
/// confirms `spec.replicas`:
/// - its applied configuration (`kubectl.kubernetes.io/last-applied-configuration`), what the
///   person or pipeline that applied it asked for; else
/// - for a Deployment, the count its current ReplicaSet ran at before it was scaled down
///   without a rollout: the deployment controller's `ScalingReplicaSet` events say the
///   ReplicaSet the pods belong to was scaled up to N, then down to the count it has now. A
///   scale-down that came with a rollout scales the *old* ReplicaSet down, so it is not read
///   as one; neither is a scale-down to 0 (the workload's own `spec.replicas` then says 0).
///
/// An autoscaler's scaling leaves the same events: a caller that proposes from this asks
/// [`short_of_declared`].
pub fn declared_replicas(workload: &Value, pods: &[Pod], events: &[Event]) -> Option<Declared> {
    if let Some(count) =
        obj::annotation(workload, "kubectl.kubernetes.io/last-applied-configuration")
            .and_then(|a| serde_json::from_str::<Value>(a).ok())
            .and_then(|a| obj::i64_at(&a, &["spec", "replicas"]))
    {
        return Some(Declared {
            count,
            evidence: format!("its applied configuration declares {count} replicas"),
            scaled_down_at: None,
        });
    }
    if obj::kind(workload) != "Deployment" {
        return None;
    }
    let name = obj::name(workload);
    let current = Workload::parse(workload).replicas.filter(|r| *r > 0)?;
    // The ReplicaSet the live pods belong to (one revision: a rollout in progress is not a
    // scale-down).
    let mut hashes = pods
        .iter()
        .filter(|p| !p.deleting)
        .filter_map(|p| p.template_hash.as_deref());
    let hash = hashes.next()?;
    if hashes.any(|h| h != hash) {
        return None;
    }
    let rs = format!("{name}-{hash}");
    let mut scalings: Vec<(DateTime<Utc>, bool, i64)> = events
        .iter()
        .filter(|e| e.kind == "Deployment" && e.name == name && e.reason == "ScalingReplicaSet")
        .filter_map(|e| {
            let (up, set, to) = scaling(&e.message)?;
            (set == rs).then_some((e.last?, up, to))
        })
        .collect();
    scalings.sort_by_key(|(at, _, _)| *at);
    // The last scaling of the current ReplicaSet brought it down to what the spec says now,
    // from a higher count it had been scaled to before.
    let (down_at, false, to) = *scalings.last()? else {
        return None;
    };
    if to != current {
        return None;
    }
    let (_, _, from) = *scalings[..scalings.len() - 1].last()?;
    (from > to).then(|| Declared {
        count: from,
        evidence: format!(
            "ReplicaSet {rs} ran {from} replicas until it was scaled down to {to} without a rollout"
        ),
        scaled_down_at: Some(down_at),
    })
}

/// The autoscaler that sets a workload's replica count, of `autoscalers` (those of its
/// namespace): one whose `scaleTargetRef` names it. Its count is its own: it undoes a scale, and
/// a count declared elsewhere says nothing under it.
pub fn count_set_by<'a>(autoscalers: &'a [Hpa], kind: &str, name: &str) -> Option<&'a Hpa> {
    autoscalers.iter().find(|h| h.scales(kind, name))
}

/// The declared count a workload runs short of: `declared` above the `replicas` it has, and no
/// autoscaler (`set_by`, from [`count_set_by`]) setting the count instead. The rules propose
/// scaling back to it from this, and the restart proof refuses new pods on it.
pub fn short_of_declared<'a>(
    declared: Option<&'a Declared>,
    replicas: i64,
    set_by: Option<&Hpa>,
) -> Option<&'a Declared> {
    declared.filter(|d| d.count > replicas && set_by.is_none())
}

/// Whether more pods like `pods` would help, judged since `since` (the look-back "healthy
/// again" judges on, [`super::resolved::healthy_since`]): none of its replicas fails
/// ([`Pod::broken`]; a pod that waits for a node is no failure of what it runs, the room for
/// it is a question of its own), and no container of them ended since
/// ([`crate::cluster::observed::Container::exited_since`]) — a container caught running
/// between two crashes, or just after an OOM kill, is not broken at this instant, yet more
/// pods like it help nobody. A pod on its way out and a record its node ended
/// ([`Pod::outlived`]) are no replicas. `Err` with up to three lines that show otherwise. The
/// scale-back rule and the scale's proof (`scale.pods-not-failing`) ask it.
pub fn more_would_help<'a>(
    pods: impl IntoIterator<Item = &'a Pod>,
    since: DateTime<Utc>,
) -> Result<(), Vec<String>> {
    let why: Vec<String> = pods
        .into_iter()
        .filter(|p| !p.deleting && !p.outlived())
        .filter_map(|p| {
            if let Some(f) = p.broken().filter(|_| p.waiting_for_node().is_none()) {
                return Some(format!("pod {} {f}", p.name));
            }
            p.containers.iter().find_map(|c| {
                let (reason, code, at) = c.exited_since(since)?;
                Some(format!(
                    "container {} of pod {} exited ({reason}, {code}) at {}",
                    c.name,
                    p.name,
                    at.format("%H:%M:%S")
                ))
            })
        })
        .take(3)
        .collect();
    if why.is_empty() { Ok(()) } else { Err(why) }
}

/// `Scaled up replica set NAME to N` / `Scaled down replica set NAME from M to N` (the
/// deployment controller's words, with or without `from M`): (up, NAME, N).
fn scaling(message: &str) -> Option<(bool, &str, i64)> {
    let (up, rest) = if let Some(r) = message.strip_prefix("Scaled up replica set ") {
        (true, r)
    } else {
        (false, message.strip_prefix("Scaled down replica set ")?)
    };
    let mut words = rest.split_whitespace();
    let set = words.next()?;
    let to = words
        .skip_while(|w| *w != "to")
        .nth(1)?
        .trim_end_matches(|c: char| !c.is_ascii_digit())
        .parse()
        .ok()?;
    Some((up, set, to))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn event(message: &str, at: &str) -> Event {
        Event::parse(&json!({
            "involvedObject": {"kind": "Deployment", "name": "api"},
            "reason": "ScalingReplicaSet", "type": "Normal", "message": message,
            "lastTimestamp": at,
        }))
    }

    fn pod(hash: &str) -> Pod {
        Pod::parse(&json!({
            "metadata": {"name": format!("api-{hash}-x1"), "labels": {"pod-template-hash": hash}},
            "status": {"phase": "Running"},
        }))
    }

    fn deployment(replicas: i64) -> Value {
        json!({"kind": "Deployment", "metadata": {"name": "api"}, "spec": {"replicas": replicas}})
    }

    #[test]
    fn a_scale_down_without_a_rollout_leaves_the_count_it_ran_at() {
        let events = [
            event("Scaled up replica set api-abc to 6", "2026-11-27T02:11:10Z"),
            event(
                "Scaled down replica set api-abc from 6 to 1",
                "2026-11-27T02:12:25Z",
            ),
        ];
        let d = declared_replicas(&deployment(1), &[pod("abc")], &events).unwrap();
        assert_eq!(d.count, 6);
        assert!(d.evidence.contains("api-abc ran 6"), "{}", d.evidence);
    }

    #[test]
    fn a_rollout_or_a_scale_up_is_no_scale_down() {
        // A rollout scales the old ReplicaSet down and the new one up.
        let rollout = [
            event("Scaled up replica set api-old to 3", "2026-11-27T01:00:00Z"),
            event("Scaled up replica set api-new to 3", "2026-11-27T02:00:00Z"),
            event(
                "Scaled down replica set api-old to 0",
                "2026-11-27T02:01:00Z",
            ),
        ];
        assert_eq!(
            declared_replicas(&deployment(3), &[pod("new")], &rollout),
            None
        );
        // Scaled up last: nothing runs short.
        let up = [
            event("Scaled up replica set api-abc to 2", "2026-11-27T01:00:00Z"),
            event("Scaled up replica set api-abc to 4", "2026-11-27T02:00:00Z"),
        ];
        assert_eq!(declared_replicas(&deployment(4), &[pod("abc")], &up), None);
        // Scaled down to what the spec does not say (the events are older than the spec).
        let stale = [
            event("Scaled up replica set api-abc to 6", "2026-11-27T01:00:00Z"),
            event(
                "Scaled down replica set api-abc to 2",
                "2026-11-27T02:00:00Z",
            ),
        ];
        assert_eq!(
            declared_replicas(&deployment(3), &[pod("abc")], &stale),
            None
        );
    }

    #[test]
    fn the_applied_configuration_comes_first() {
        let mut w = deployment(1);
        w["metadata"]["annotations"] = json!({
            "kubectl.kubernetes.io/last-applied-configuration": "{\"spec\":{\"replicas\":4}}"
        });
        let d = declared_replicas(&w, &[], &[]).unwrap();
        assert_eq!((d.count, d.scaled_down_at), (4, None));
    }

    /// Issue 43: the scale-back rule and `scale.pods-not-failing` ask one finding: a container
    /// that ended since the look-back says more pods like it help nobody, one that ended days
    /// ago does not; a pod waiting for a node is no failure of what it runs.
    #[test]
    fn more_pods_help_unless_one_fails_or_a_container_ended_lately() {
        let t = |s: &str| {
            DateTime::parse_from_rfc3339(s)
                .map(|t| t.with_timezone(&Utc))
                .unwrap_or_default()
        };
        let since = t("2026-11-30T11:50:00Z");
        let running = |ended: &str| {
            Pod::parse(&json!({"metadata": {"name": "api-1"},
                "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}],
                    "containerStatuses": [{"name": "api", "restartCount": 1,
                        "state": {"running": {"startedAt": ended}},
                        "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137,
                            "finishedAt": ended}}}]}}))
        };
        assert_eq!(
            more_would_help(&[running("2026-11-28T09:00:00Z")], since),
            Ok(())
        );
        let lately = more_would_help(&[running("2026-11-30T11:58:00Z")], since);
        assert!(
            lately
                .as_ref()
                .is_err_and(|w| w[0].contains("exited (OOMKilled, 137) at 11:58:00")),
            "{lately:?}"
        );
        let waiting = Pod::parse(&json!({"metadata": {"name": "api-2"},
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled",
                "status": "False", "reason": "Unschedulable", "message": "0/3 nodes"}]}}));
        assert_eq!(more_would_help(&[waiting], since), Ok(()));
        // An init container that completed as the pod started did its job.
        let mut started = running("2026-11-28T09:00:00Z").raw;
        started["status"]["initContainerStatuses"] = json!([{"name": "istio-init",
            "restartCount": 0, "state": {"terminated": {"reason": "Completed", "exitCode": 0,
                "finishedAt": "2026-11-30T11:59:00Z"}}}]);
        assert_eq!(more_would_help(&[Pod::parse(&started)], since), Ok(()));
    }
}
