//! "Healthy again": how far back it looks, which pods count, and what keeps them from counting
//! as recovered. One reading for the rule that says a problem resolved and the proof that
//! checks the claim.

use chrono::{DateTime, Duration, Utc};
use serde_json::Value;

use crate::cluster::jobs::JobResult;
use crate::cluster::obj::{self, i64_at};
use crate::cluster::observed::{self, Claim, Event, Hold, Node, Pod, Revision, Workload};

/// Event reasons that mean a pod could not be made, placed, started, kept or kept ready: any of
/// them since the look-back began, about the target, its ReplicaSets or its pods, and it has not
/// recovered. A probe that failed minutes ago (`Unhealthy`) on a pod ready now is readiness
/// coming and going, the very thing many alerts are about: the rules counted it, the proof did
/// not, until both read this list.
pub const NOT_RECOVERED_REASONS: &[&str] = &[
    "Unhealthy",
    "FailedCreate",
    "FailedScheduling",
    "FailedMount",
    "FailedAttachVolume",
    "FailedCreatePodSandBox",
    "BackOff",
    "Failed",
    "Evicted",
    "OOMKilling",
    "ProgressDeadlineExceeded",
    "BackoffLimitExceeded",
    "DeadlineExceeded",
];

/// However recently the alert began, the look-back reaches at least this far: a container that
/// exited minutes before the alert is part of what it is about.
pub const MIN_LOOK_BACK: Duration = Duration::minutes(10);
/// An alert investigated long after it began (queued, or during a long outage) is judged on
/// this much: pods ready, without an exit or a failure for half an hour, have recovered,
/// whatever happened before.
pub const STABLE: Duration = Duration::minutes(30);
/// An Event lives an hour by default (the API server's `--event-ttl`): a pod that ended with an
/// event about it still listed ended recently, so only endings older than this are settled.
pub const ENDED_QUIET: Duration = Duration::minutes(60);

/// Since when a workload must have had no exit and no failure to count as healthy again: since
/// the alert began, looking back at least [`MIN_LOOK_BACK`] and at most [`STABLE`].
pub fn healthy_since(now: DateTime<Utc>, alert_started: Option<DateTime<Utc>>) -> DateTime<Utc> {
    alert_started
        .unwrap_or(now)
        .min(now - MIN_LOOK_BACK)
        .max(now - STABLE)
}

/// Whether `p`, a pod of a `target_kind`, ended and its controller made (or makes) another in
/// its place, settled since: a ReplicaSet's, StatefulSet's or DaemonSet's pod in phase Failed or
/// Succeeded, or leaving (being deleted, not stuck). A Job's ended pods are its result, and a
/// bare pod has nobody to replace it. Pods ending again and again (each replacement evicted in
/// turn) are the problem itself: one with anything recorded about it in the last
/// [`ENDED_QUIET`] has not settled. A pod being deleted needs no quiet: the events about it
/// are its own past, and the pods that replace it are judged as the target's.
pub fn ended_and_replaced(
    target_kind: &str,
    p: &Pod,
    events: &[Event],
    now: DateTime<Utc>,
) -> bool {
    let replacing = p.controller.as_ref().is_some_and(|(kind, _)| {
        matches!(kind.as_str(), "ReplicaSet" | "StatefulSet" | "DaemonSet")
    });
    let leaving = p.deleting && p.broken().is_none();
    let quiet_since = now - ENDED_QUIET;
    replacing
        && (p.ended() || leaving)
        && !matches!(target_kind, "Pod" | "Job" | "CronJob")
        && (p.deleting
            || !events.iter().any(|e| {
                e.kind == "Pod" && e.name == p.name && e.last.is_none_or(|t| t >= quiet_since)
            }))
}

/// How an ended pod ended: its phase, and the kubelet's reason and message when it gave them.
pub fn ended_how(p: &Pod) -> String {
    if p.deleting {
        return format!("being deleted, {}", p.phase);
    }
    match &p.reason {
        Some((r, Some(m))) => format!("{}, {r}: {}", p.phase, text_head(m)),
        Some((r, None)) => format!("{}, {r}", p.phase),
        None => p.phase.clone(),
    }
}

/// The first sentence of a kubelet message, at most 120 characters.
fn text_head(m: &str) -> String {
    let first = m.split(". ").next().unwrap_or(m).trim_end_matches('.');
    let mut s: String = first.chars().take(120).collect();
    if first.chars().count() > 120 {
        s.push('…');
    }
    s
}

/// How object `t`, which the alert names besides the `target`, shows its desired state, as
/// read now (`named`): `(met, line)`, `None` when nothing of it can be judged. A pod of the
/// target's that ended and that its controller replaced ([`ended_and_replaced`]) stays until
/// the pod garbage collector's threshold, and alerts that count pods by phase keep firing on
/// it: what it was for is the target's replicas, so the target's state (`target_state`,
/// [`desired_state`]) answers for it. Whoever claims the problem gone (the rules, a model) may
/// have named another object as the target: `resolved.alerted-objects-met` asks this of each,
/// and the rules before they claim it.
pub fn alerted_object_met(
    t: &crate::domain::Target,
    named: &Value,
    target: &crate::domain::Target,
    target_state: Option<&(bool, String)>,
    pods: &[Pod],
    events: &[Event],
    now: DateTime<Utc>,
) -> Option<(bool, String)> {
    if t.kind == "Pod"
        && let Some(p) = pods
            .iter()
            .find(|p| p.name == t.name && ended_and_replaced(&target.kind, p, events, now))
    {
        let line = format!(
            "{t}: ended ({}) and replaced by its controller {}; {}",
            ended_how(p),
            p.controller
                .as_ref()
                .map(|(k, n)| format!("{k} {n}"))
                .unwrap_or_default(),
            match target_state {
                Some((_, how)) => format!("{target}: {how}"),
                None => format!("nothing shows {target} met"),
            }
        );
        return Some((target_state.is_some_and(|(ok, _)| *ok), line));
    }
    desired_state(named).map(|(ok, how)| (ok, format!("{t}: {how}")))
}

/// A Deployment's earlier revisions, scaled to zero, as name prefixes (`<ReplicaSet>-`): what
/// their pods went through is what the rollout replaced (a fix forward), not the target's now.
/// Its current pods are judged instead, and its desired state (every replica updated and
/// available). Empty for other kinds.
pub fn replaced_revisions(w: &Workload, revisions: &[Revision]) -> Vec<String> {
    if w.kind != "Deployment" {
        return vec![];
    }
    let current = w.current_revision_number(revisions);
    revisions
        .iter()
        .filter(|r| r.replicas == Some(0) && Some(r.number) != current)
        .map(|r| format!("{}-", r.name))
        .collect()
}

/// The target's pods judged for "healthy again" since [`healthy_since`].
#[derive(Debug)]
pub struct Recovery<'a> {
    pub since: DateTime<Utc>,
    /// Its replicas: the pods that did not end and get replaced.
    pub live: Vec<&'a Pod>,
    /// The pods that ended and were replaced ([`ended_and_replaced`]): not its replicas.
    pub ended: Vec<&'a Pod>,
    /// What keeps a live pod from counting as healthy: failing, not ready, or a container of it
    /// that exited since `since`. One line each.
    pub unhealthy: Vec<String>,
    /// The failures recorded since `since` about the target, its ReplicaSets or its live pods
    /// ([`NOT_RECOVERED_REASONS`]), not about a pod of a replaced revision.
    pub failures: Vec<&'a Event>,
}

impl Recovery<'_> {
    /// Healthy again: pods to judge, none of them unhealthy, nothing failed since.
    pub fn healthy(&self) -> bool {
        !self.live.is_empty() && self.unhealthy.is_empty() && self.failures.is_empty()
    }
}

/// How the target (`target_kind` `name`) has recovered, from its pods and the events about
/// them, as of `now`, for an alert that began at `alert_started`. `replaced_revisions` are the
/// name prefixes (`<ReplicaSet>-`) of a Deployment's earlier revisions scaled to zero: what
/// their pods went through is what a rollout replaced, not the target's now.
pub fn recovery<'a>(
    (target_kind, name): (&str, &str),
    pods: impl IntoIterator<Item = &'a Pod>,
    events: &'a [Event],
    replaced_revisions: &[String],
    now: DateTime<Utc>,
    alert_started: Option<DateTime<Utc>>,
) -> Recovery<'a> {
    let since = healthy_since(now, alert_started);
    let (ended, live): (Vec<&Pod>, Vec<&Pod>) = pods
        .into_iter()
        .partition(|p| ended_and_replaced(target_kind, p, events, now));
    let unhealthy = live
        .iter()
        .filter_map(|p| not_healthy_since(p, since))
        .collect();
    let live_names: Vec<&str> = live.iter().map(|p| p.name.as_str()).collect();
    let ours = |e: &Event| {
        e.about(name, &live_names)
            && !ended.iter().any(|p| p.name == e.name)
            && !(e.kind == "Pod"
                && replaced_revisions
                    .iter()
                    .any(|rs| e.name.starts_with(rs.as_str())))
    };
    let failures = events
        .iter()
        .filter(|e| e.warning && NOT_RECOVERED_REASONS.contains(&e.reason.as_str()))
        .filter(|e| e.last.is_some_and(|t| t >= since))
        .filter(|e| ours(e))
        .collect();
    Recovery {
        since,
        live,
        ended,
        unhealthy,
        failures,
    }
}

/// What keeps `p` from counting as healthy since `since`: a failure that keeps it from running,
/// not ready (unless it is leaving), or a container that exited since and runs again.
fn not_healthy_since(p: &Pod, since: DateTime<Utc>) -> Option<String> {
    if let Some(f) = p.broken() {
        return Some(format!("pod {} {f}", p.name));
    }
    if !p.ready && !p.deleting {
        return Some(format!("pod {} is {} and not ready", p.name, p.phase));
    }
    p.containers.iter().find_map(|c| {
        let (r, code, t) = c.exited_since(since)?;
        Some(format!(
            "container {} of pod {} exited ({r}, {code}) at {}, after the alert began",
            c.name,
            p.name,
            t.format("%H:%M:%S")
        ))
    })
}

/// What the kind's status says of its desired state: `(met, how)`; `None` for a kind without
/// one. The "resolved" proof's `desired-state` obligation, and the rule that calls a workload
/// healthy again, ask this.
pub fn desired_state(o: &Value) -> Option<(bool, String)> {
    let n = |p: &[&str]| i64_at(o, p).unwrap_or(0);
    let kind = obj::kind(o);
    Some(match kind {
        // Nothing runs to show the problem gone: a workload scaled to zero meets its desired
        // state trivially, whatever the alert about it says.
        "Deployment" | "ReplicaSet" | "StatefulSet" if Workload::parse(o).replicas == Some(0) => (
            false,
            "scaled to 0 replicas: nothing runs to show the problem gone".to_owned(),
        ),
        "PodDisruptionBudget" => {
            let b = observed::Pdb::parse(o);
            (
                b.disruptions_allowed > 0,
                format!(
                    "{} disruption(s) allowed ({} healthy of {} desired)",
                    b.disruptions_allowed, b.current_healthy, b.desired_healthy
                ),
            )
        }
        "Deployment" | "ReplicaSet" => {
            let w = Workload::parse(o);
            let want = w.wanted();
            let available = w.available_replicas.unwrap_or(0);
            let updated = if kind == "Deployment" {
                w.updated_replicas.unwrap_or(0)
            } else {
                want
            };
            (
                w.rollout_done() && available == want,
                format!(
                    "{available} of {want} replicas available, {updated} updated{}",
                    if w.hold() == Some(Hold::Paused) && updated < want {
                        "; the rollout is paused (spec.paused)"
                    } else {
                        ""
                    }
                ),
            )
        }
        "StatefulSet" => {
            let w = Workload::parse(o);
            let want = w.wanted();
            let ready = w.ready_replicas;
            let same = w.current_revision == w.update_revision;
            let held = if same {
                String::new()
            } else {
                match w.hold() {
                    Some(Hold::OnDelete) => "; the update is not rolled out: its updateStrategy is OnDelete (pods move only when deleted)".to_owned(),
                    Some(Hold::Partition(p)) => format!(
                        "; the update is not rolled out: {} of {want} on the update revision, the rollingUpdate partition {p} holds the others",
                        w.updated_replicas.unwrap_or(0)
                    ),
                    _ => format!(
                        "; the update is not rolled out: {} of {want} on the update revision",
                        w.updated_replicas.unwrap_or(0)
                    ),
                }
            };
            (
                w.rollout_done() && ready == want,
                format!("{ready} of {want} replicas ready{held}"),
            )
        }
        "DaemonSet" => {
            let w = Workload::parse(o);
            let (want, available) = (w.wanted(), w.available_replicas.unwrap_or(0));
            // Available pods of the old template while an update rolls out are not the
            // desired state: what `Workload::rollout_in_progress` calls under way is not met.
            let rolling = w.rollout_in_progress();
            (
                w.rollout_done() && available == want,
                format!(
                    "{available} of {want} pods available{}",
                    rolling.map(|r| format!("; {r}")).unwrap_or_default()
                ),
            )
        }
        "Job" => {
            let finished = crate::cluster::jobs::finished(o);
            let failed = finished == Some(JobResult::Failed);
            let succeeded = n(&["status", "succeeded"]);
            let completions = i64_at(o, &["spec", "completions"]).unwrap_or(1);
            (
                finished == Some(JobResult::Succeeded)
                    || (!failed && (succeeded >= completions || n(&["status", "active"]) > 0)),
                if failed {
                    "the Job failed".to_owned()
                } else {
                    format!("{succeeded} of {completions} completions")
                },
            )
        }
        "Pod" => {
            let p = Pod::parse(o);
            (
                p.ready,
                format!(
                    "pod {} is {}{}",
                    p.name,
                    p.phase,
                    if p.ready { ", ready" } else { ", not ready" }
                ),
            )
        }
        "PersistentVolumeClaim" => {
            let claim = Claim::parse(o);
            (
                claim.bound(),
                format!("claim {}", claim.phase.as_deref().unwrap_or("Unknown")),
            )
        }
        "Node" => {
            // Ready, and nothing in trouble ([`Node::trouble`]); a node that reports no Ready
            // condition shows nothing healthy either.
            let node = Node::parse(o);
            match (node.ready_status.is_some(), node.trouble()) {
                (true, None) => (true, "Ready, no pressure".into()),
                (false, _) => (false, "reports no Ready condition".into()),
                (true, Some((what, _))) => (false, format!("conditions {what}")),
            }
        }
        "HorizontalPodAutoscaler" => {
            let h = observed::Hpa::parse(o);
            let cur = h.replicas_now();
            (
                !h.at_maximum(),
                format!("{cur} of at most {} replicas", h.max),
            )
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_look_back_is_the_alert_s_age_between_ten_and_thirty_minutes() {
        let now = Utc::now();
        let since = |minutes: i64| healthy_since(now, Some(now - Duration::minutes(minutes)));
        assert_eq!(since(2), now - Duration::minutes(10));
        assert_eq!(since(20), now - Duration::minutes(20));
        assert_eq!(since(300), now - Duration::minutes(30));
        assert_eq!(healthy_since(now, None), now - Duration::minutes(10));
    }

    fn pod(name: &str, phase: &str, ready: bool) -> Pod {
        Pod::parse(&json!({"kind": "Pod",
            "metadata": {"name": name,
                "ownerReferences": [{"kind": "ReplicaSet", "name": "api-7c2a", "controller": true}]},
            "status": {"phase": phase,
                "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
                "containerStatuses": [{"name": "api", "state": {"running": {}}}]}}))
    }

    fn warning(name: &str, reason: &str, at: DateTime<Utc>) -> Event {
        Event::parse(&json!({"involvedObject": {"kind": "Pod", "name": name},
            "reason": reason, "type": "Warning", "message": "m",
            "lastTimestamp": at.to_rfc3339()}))
    }

    #[test]
    fn ready_pods_with_nothing_recorded_since_the_look_back_have_recovered() {
        let now = Utc::now();
        let started = Some(now - Duration::minutes(5));
        let pods = [
            pod("api-7c2a-a", "Running", true),
            pod("api-7c2a-b", "Failed", false),
        ];
        let r = recovery(("Deployment", "api"), &pods, &[], &[], now, started);
        assert!(r.healthy(), "{r:?}");
        assert_eq!(r.live.len(), 1);
        assert_eq!(
            r.ended.len(),
            1,
            "the Failed pod was replaced: not a replica"
        );
        // A readiness probe that failed two minutes ago: readiness comes and goes.
        let flapping = [warning(
            "api-7c2a-a",
            "Unhealthy",
            now - Duration::minutes(2),
        )];
        assert!(!recovery(("Deployment", "api"), &pods, &flapping, &[], now, started).healthy());
        // ... unless it is older than the look-back.
        let old = [warning(
            "api-7c2a-a",
            "Unhealthy",
            now - Duration::minutes(40),
        )];
        assert!(recovery(("Deployment", "api"), &pods, &old, &[], now, started).healthy());
        // A pod of a replaced revision is what the rollout replaced.
        let replaced = [warning("api-5d9f-x", "BackOff", now - Duration::minutes(1))];
        let prefixes = ["api-5d9f-".to_owned()];
        assert!(!recovery(("Deployment", "api"), &pods, &replaced, &[], now, started).healthy());
        assert!(
            recovery(
                ("Deployment", "api"),
                &pods,
                &replaced,
                &prefixes,
                now,
                started
            )
            .healthy()
        );
        // A bare pod that failed has nobody to replace it.
        let bare = [pod("api-7c2a-b", "Failed", false)];
        let r = recovery(("Pod", "api-7c2a-b"), &bare, &[], &[], now, started);
        assert!(!r.healthy() && r.ended.is_empty(), "{r:?}");
    }

    /// Issue 43: a DaemonSet whose pods are all available but not all updated is mid-rollout
    /// (`Workload::rollout_in_progress`), not in its desired state; once every pod is updated
    /// it is.
    #[test]
    fn a_daemonset_mid_update_is_not_in_its_desired_state() {
        let ds = |updated: i64| {
            json!({"kind": "DaemonSet", "metadata": {"name": "agent", "generation": 4},
                "spec": {"updateStrategy": {"type": "RollingUpdate",
                    "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}},
                "status": {"observedGeneration": 4, "desiredNumberScheduled": 5,
                    "currentNumberScheduled": 5, "numberReady": 5, "numberAvailable": 5,
                    "updatedNumberScheduled": updated}})
        };
        let (met, line) = desired_state(&ds(2)).unwrap_or_default();
        assert!(!met, "{line}");
        assert!(line.contains("2 of 5 pods updated"), "{line}");
        let (met, line) = desired_state(&ds(5)).unwrap_or_default();
        assert!(met, "{line}");
    }

    /// Issue 43: a Job is done when its controller says Complete, as the execution's own Job
    /// wait reads it (`jobs::finished`): a success policy completes it with fewer pods
    /// succeeded than `completions`.
    #[test]
    fn a_job_its_controller_completed_is_in_its_desired_state() {
        let job = |condition: &str| {
            json!({"kind": "Job", "metadata": {"name": "index"},
                "spec": {"completions": 5, "completionMode": "Indexed",
                    "successPolicy": {"rules": [{"succeededIndexes": "0"}]}},
                "status": {"succeeded": 1, "active": 0,
                    "conditions": [{"type": condition, "status": "True"}]}})
        };
        let (met, line) = desired_state(&job("Complete")).unwrap_or_default();
        assert!(met, "{line}");
        let (met, line) = desired_state(&job("Failed")).unwrap_or_default();
        assert!(!met && line.contains("failed"), "{line}");
    }
}
