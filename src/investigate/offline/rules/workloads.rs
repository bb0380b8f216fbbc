//! Rules about the workload and what it depends on: an unreachable dependency, a rollout
//! regression, healthy again, an HPA at its maximum, a PDB that blocks evictions, scaled to zero.

use super::*;
use crate::cluster::observed;

pub(super) fn service_unreachable(f: &Facts) -> Option<Diagnosis> {
    if f.kind() != "Service" {
        return None;
    }
    let svc = &f.service;
    let mut d = Diagnosis::new("ServiceUnreachable", String::new());
    d.target = f.target.clone();
    d.confidence = 0.85;
    if f.pods.is_empty() {
        let selector_text: Vec<String> = svc
            .selector
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        d.summary = format!(
            "Service {} has no endpoints: its selector {} matches no pods",
            svc.name,
            selector_text.join(",")
        );
        // Pods that carry the selector's keys with other values: the likely mismatch.
        d.factors = f
            .namespace_pods
            .iter()
            .filter(|p| p.labels.keys().any(|k| svc.selector.contains_key(k)))
            .map(|p| {
                format!(
                    "pod {} has {}",
                    p.name,
                    p.labels
                        .iter()
                        .filter(|(k, _)| svc.selector.contains_key(*k))
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>()
                        .join(",")
                )
            })
            .take(3)
            .collect();
        d.human = Some(format!(
            "the selector {} of Service {} matches no pod{}; a human must fix the Service or the pod labels",
            selector_text.join(","),
            svc.name,
            if d.factors.is_empty() {
                String::new()
            } else {
                format!(" ({})", d.factors.join("; "))
            }
        ));
    } else {
        let ready = f.pods.iter().filter(|p| p.healthy).count();
        d.summary = format!(
            "Service {}: {ready} of {} selected pods are ready",
            svc.name,
            f.pods.len()
        );
        d.factors = f
            .pods
            .iter()
            .filter(|p| !p.healthy)
            .map(|p| p.description.clone())
            .take(3)
            .collect();
        d.outcome = InvestigationOutcome::Inconclusive;
        d.confidence = 0.5;
    }
    Some(d)
}

/// A recent rollout broke it: roll back (whatever the alert's text says). The previous
/// revision is judged healthy from its live pods, or — when none are left (Recreate, a
/// completed rolling update) — from how long it served, when the new revision appeared and
/// when the failures began.
/// How long a previous revision with no pods left must have served for the rule to be as sure
/// of it as of one with pods ready now (confidence 0.85, not 0.75): an hour of traffic is a
/// real test; [`SERVED_MIN_SECONDS`] is what the proof asks at least.
const SERVED_LONG_HOURS: i64 = 1;

pub(super) fn rollout_regression(f: &Facts) -> Option<Diagnosis> {
    let r = f.rollout.as_ref()?;
    let (current, previous) = (&r.current, &r.previous);
    let target = f.workload_target().or_else(|| f.target.clone());
    let target_text = target.as_ref().map(ToString::to_string).unwrap_or_default();
    let mut d = Diagnosis::new(
        "RolloutRegression",
        format!(
            "The rollout to revision {} ({}) broke {target_text}: its pods fail while revision {} ({}) ran healthy",
            current.number, current.images, previous.number, previous.images
        ),
    );
    d.factors.push(format!(
        "revision {} ({}) rolled out {} min before this investigation{}",
        current.number,
        current.images,
        r.age_minutes,
        r.strategy
            .as_deref()
            .map(|s| format!(" ({s} strategy)"))
            .unwrap_or_default()
    ));
    d.factors.extend(r.new_pods.iter().cloned());
    d.confidence = 0.9;
    match &r.previous_health {
        PreviousHealth::Serving(n) => d.factors.push(format!(
            "previous revision {} ({}) has {n} ready pod(s)",
            previous.number, previous.images
        )),
        PreviousHealth::Served { served, onset } => {
            d.factors.push(format!(
                "previous revision {} ({}) has no pods left; it served {} before revision {} appeared, and nothing records a failure of it",
                previous.number,
                previous.images,
                served.map_or("for an unknown time".into(), |s| format!("for {}", observed::ago(s))),
                current.number
            ));
            if let Some(o) = onset {
                d.factors.push(format!(
                    "the failures began {} after revision {} appeared",
                    observed::ago(*o),
                    current.number
                ));
            }
            let served_long = served.is_some_and(|s| s >= Duration::hours(SERVED_LONG_HOURS));
            let proven = served.is_some_and(|s| s >= Duration::seconds(SERVED_MIN_SECONDS));
            d.confidence = if served_long { 0.85 } else { 0.75 };
            if !proven {
                d.confidence = 0.6;
                d.target = target;
                d.human = Some(format!(
                    "revision {} ({}) of {target_text} was replaced {} after it appeared, so nothing shows it was healthy; a human must choose the revision to return to (the failing one is revision {}, {})",
                    previous.number,
                    previous.images,
                    served.map_or("an unknown time".into(), observed::ago),
                    current.number,
                    current.images
                ));
                return Some(d);
            }
        }
    }
    d.severity = Severity::Critical;
    d.target = target;
    // Paused on purpose (`kubectl rollout pause`): the rollback's proof refuses to undo a rollout
    // someone stopped; they resume it or roll it back.
    if f.workload.as_ref().is_some_and(|w| w.paused) {
        d.human = Some(format!(
            "the rollout of {target_text} is paused while revision {} fails: someone stopped it on purpose, so a human decides between resuming it (its template may hold a change not rolled out yet) and rolling back to revision {}",
            current.number, previous.number
        ));
        return Some(d);
    }
    // What the rollout undo would not restore: the release rewrote a ConfigMap in place too.
    if let Some(kept) = &r.undo_keeps {
        d.factors.push(kept.clone());
        d.human = Some(format!(
            "rolling {target_text} back to revision {} would not restore its configuration: {kept}; a human restores the ConfigMap's earlier content with the rollback, or fixes forward",
            previous.number
        ));
        return Some(d);
    }
    let action = if r.kind == "StatefulSet" {
        ActionType::RollbackStatefulSet
    } else {
        ActionType::RollbackDeployment
    };
    d.proposal = proposal(
        action,
        ActionParams::rollback(previous.number),
        format!(
            "revert the change that produced revision {} ({} → {})",
            current.number, previous.images, current.images
        ),
    );
    d.analysis = "A new revision whose pods all fail, created shortly before the incident, after a previous revision that served healthy, determines the cause: the change in the new revision.".into();
    Some(d)
}

/// A rollout the workload's own spec holds while every pod runs: a StatefulSet update stopped
/// at its partition (a canary nobody promoted) or left to `OnDelete`, a paused Deployment.
/// That is a release step someone chose; rolling back would undo it and deleting pods does
/// not move them past a partition. A person promotes, resumes or abandons it.
pub(super) fn rollout_held(f: &Facts) -> Option<Diagnosis> {
    let w = f.workload.as_ref()?;
    // A pod its node ended is a record its controller replaced, not a replica that fails.
    let replicas = || f.pods.iter().filter(|p| !p.observed.outlived());
    if replicas().next().is_none() || replicas().any(|p| p.failing || !p.healthy) {
        return None;
    }
    let held = match w.hold()? {
        observed::Hold::Paused => {
            "the Deployment is paused (spec.paused): its pods keep the old template until someone resumes the rollout".to_owned()
        }
        hold => {
            let (current, update) = (w.current_revision.as_ref()?, w.update_revision.as_ref()?);
            if current == update {
                return None;
            }
            let updated = f
                .pods
                .iter()
                .filter(|p| p.revision.as_ref() == Some(update))
                .count();
            let on_update = format!(
                "{updated} of {} pods run the update revision {update}, the others {current}",
                f.pods.len()
            );
            match hold {
                observed::Hold::Partition(p) => format!(
                    "its rollingUpdate partition {p} holds the pods with ordinals below {p} on the current revision ({on_update})"
                ),
                _ => format!(
                    "its updateStrategy is OnDelete: a pod takes the update revision only when someone deletes it ({on_update})"
                ),
            }
        }
    };
    let mut d = Diagnosis::new(
        "RolloutHeld",
        format!(
            "The rollout of {} is held on purpose, every pod healthy: {held}",
            f.target_text()
        ),
    );
    d.factors.push(held.clone());
    d.confidence = 0.75;
    d.severity = Severity::Low;
    d.target = f.workload_target().or_else(|| f.target.clone());
    d.human = Some(format!(
        "{held}; a human must promote (lower the partition, resume), or abandon the update — rolling back would undo a deliberate release step"
    ));
    d.analysis = "A rollout that the workload's own spec holds is a release step someone chose, not a failure: nothing runs badly, and only whoever holds it can say whether to go on.".into();
    Some(d)
}

/// A CronJob (or Job) its own spec suspends: it starts nothing until someone resumes it. Whether
/// it should stay suspended is a person's call; say who suspended it, when, and when it last
/// ran.
pub(super) fn suspended(f: &Facts) -> Option<Diagnosis> {
    let w = f.workload.as_ref()?;
    let s = w.suspended.as_ref()?;
    let changed = s
        .last_change
        .as_ref()
        .map(|c| format!(", {} at {} (UTC)", c.what, c.at.format("%Y-%m-%d %H:%M")))
        .unwrap_or_default();
    let ran = s
        .last_schedule
        .map(|t| {
            format!(
                "; its last run was scheduled at {} (UTC)",
                t.format("%Y-%m-%d %H:%M")
            )
        })
        .unwrap_or_default();
    let mut d = Diagnosis::new(
        "Suspended",
        format!(
            "{} {} is suspended (spec.suspend: true){changed}: it starts no runs{ran}",
            w.kind, w.name
        ),
    );
    d.factors.push(format!("spec.suspend: true{changed}"));
    d.confidence = 0.8;
    d.severity = Severity::Medium;
    d.target = f.workload_target().or_else(|| f.target.clone());
    d.human = Some(format!(
        "{} {} is suspended (spec.suspend: true){changed}{ran}; a human must resume it (spec.suspend: false) or confirm it stays suspended",
        w.kind, w.name
    ));
    Some(d)
}

/// Healthy again: nothing to do. The pods are judged as the resolved proof judges the claim
/// ([`findings::resolved::recovery`]), and so is the workload's status
/// ([`crate::prove::findings::resolved::desired_state`]: available, updated, its spec seen); the rule asks
/// besides that as many of its pods run as it wants (pods a quota or an admission webhook
/// refused never show up as failing pods).
pub(super) fn problem_resolved(f: &Facts) -> Option<Diagnosis> {
    let r = f.recovered.as_ref()?;
    // Another object the alert names that does not show its desired state keeps the problem
    // open, as `resolved.alerted-objects-met` refuses the claim.
    if !f.alerted_unmet.is_empty() {
        return None;
    }
    if let Some(w) = &f.workload {
        let short = w.replicas.is_some_and(|want| (r.live as i64) < want);
        let unmet =
            crate::prove::findings::resolved::desired_state(&w.raw).is_some_and(|(met, _)| !met);
        if short || unmet {
            return None;
        }
    }
    let minutes = (f.now - r.since).num_minutes();
    let mut d = Diagnosis::new(
        "Resolved",
        format!(
            "{} is healthy again: all {} pods running and ready, no failures in the last {minutes} minutes",
            f.target_text(),
            r.live,
        ),
    );
    // (No contributing factors: a resolved claim with factors is a real problem to a human.)
    if !r.ended.is_empty() {
        let names: Vec<String> = f
            .pods
            .iter()
            .filter(|p| r.ended.contains(&p.name))
            .map(|p| format!("{} ({})", p.name, p.status))
            .collect();
        d.summary = format!(
            "{} is healthy: all {} pods running and ready, no failures in the last {minutes} minutes. Pod(s) {} ended, with no event about them in the last hour, and were replaced by the controller; their objects stay until the pod garbage collector removes them, and an alert that counts pods by phase fires on them until then (deleting the object ends that alert)",
            f.target_text(),
            r.live,
            listed(&names)
        );
    }
    d.outcome = InvestigationOutcome::ProblemResolved;
    d.confidence = 0.85;
    d.severity = Severity::Low;
    d.target = f.target.clone();
    unseen_by_objects(f, &mut d);
    Some(d)
}

/// A resolved claim about an alert whose condition the objects cannot show gone
/// ([`findings::condition::objects_show`], what the resolved proof's `condition-observable`
/// asks): the objects' health is all the claim rests on, and its summary says so. The proof
/// then asks Prometheus, when it has one, and refuses the claim without it.
pub(super) fn unseen_by_objects(f: &Facts, d: &mut Diagnosis) {
    if let Some(why) = &f.alert.unseen_by_objects {
        d.summary = format!(
            "{}; but the alert's condition is not one the objects show ({why})",
            d.summary
        );
    }
}

/// The highest maximum the autoscaler rule proposes: past it, more replicas are a capacity
/// decision, not a remediation.
const HPA_MAX_CEILING: i64 = 200;

/// An autoscaler at its maximum while its metric stays above target: raise the maximum —
/// unless more replicas could not be scheduled or the quota has no room.
pub(super) fn hpa_maxed_out(f: &Facts) -> Option<Diagnosis> {
    let h = f.hpa.as_ref()?;
    let workload = f.workload_target();
    let current = h.replicas_now();
    let over: Vec<String> = h
        .above_target()
        .map(|u| {
            format!(
                "{} at {}% of requests against a {}% target",
                u.metric, u.current, u.target
            )
        })
        .collect();
    let scale_target = format!("{}/{}", h.target_kind, h.target_name);
    let mut d = Diagnosis::new(
        "HPAMaxedOut",
        format!(
            "HorizontalPodAutoscaler {} runs {scale_target} at {current} of at most {} replicas{}",
            h.name,
            h.max,
            if over.is_empty() {
                String::new()
            } else {
                format!(", with {}", over.join(" and "))
            }
        ),
    );
    d.factors = h
        .utilisation
        .iter()
        .map(|u| {
            format!(
                "{} utilisation {}% (target {}%)",
                u.metric, u.current, u.target
            )
        })
        .collect();
    d.factors.extend(
        h.conditions
            .iter()
            .filter(|c| c.holds() && c.reason == "TooManyReplicas")
            .map(|c| format!("condition {}: {}", c.kind, c.reason)),
    );
    d.severity = Severity::Medium;
    d.target = workload.clone().or_else(|| f.target.clone());
    if !h.at_maximum() {
        d.summary = format!(
            "HorizontalPodAutoscaler {} has room: {current} of at most {} replicas",
            h.name, h.max
        );
        d.outcome = InvestigationOutcome::NotActionable;
        d.confidence = 0.8;
        return Some(d);
    }
    if over.is_empty() {
        d.confidence = 0.6;
        d.outcome = InvestigationOutcome::Inconclusive;
        d.summary.push_str(
            "; its metrics do not show load above target, so a higher maximum may not be needed",
        );
        return Some(d);
    }
    // More replicas that would not be scheduled help nobody.
    if let Some(u) = &f.unschedulable {
        d.confidence = 0.8;
        d.factors
            .push(format!("pod {} is Pending: {}", u.pod, u.message));
        d.human = Some(format!(
            "{scale_target} is at its maximum of {} but pod {} is already Pending ({}): more replicas would not schedule — the cluster needs capacity",
            h.max,
            u.pod,
            if u.message.is_empty() {
                "unschedulable"
            } else {
                u.message.as_str()
            }
        ));
        return Some(d);
    }
    let worst = h
        .utilisation
        .iter()
        .map(|u| u.current as f64 / u.target.max(1) as f64)
        .fold(1.0, f64::max);
    let wanted = ((h.max as f64) * worst).ceil() as i64;
    let new_max = wanted
        .clamp(
            h.max + 1,
            (h.max * observed::HPA_RAISE_FACTOR).max(h.max + 1),
        )
        .min(HPA_MAX_CEILING);
    if !h.raise_allowed(new_max) {
        d.confidence = 0.7;
        d.human = Some(format!(
            "{scale_target} is at its maximum of {} replicas, at or past the {HPA_MAX_CEILING} kubemedic raises an autoscaler to: a human must decide on more",
            h.max
        ));
        return Some(d);
    }
    if let Some(problem) = f.scale_quota_problem(new_max - h.replicas_now()) {
        d.confidence = 0.8;
        d.human = Some(format!(
            "{scale_target} is at its maximum of {} replicas, but {problem}",
            h.max
        ));
        return Some(d);
    }
    if let Some(problem) = f.room_problem(new_max - h.replicas_now()) {
        d.confidence = 0.8;
        d.human = Some(format!(
            "{scale_target} is at its maximum of {} replicas, but more could not be placed ({problem}): the cluster needs capacity",
            h.max
        ));
        return Some(d);
    }
    d.factors.push(format!(
        "maxReplicas {} → proposed {new_max} (by the utilisation ratio, at most doubled)",
        h.max
    ));
    d.confidence = 0.8;
    d.proposal = proposal(
        ActionType::PatchHPAMaxReplicas,
        ActionParams::hpa_max(&h.name, new_max),
        format!(
            "raise maxReplicas of the HorizontalPodAutoscaler {} to {new_max}",
            h.name
        ),
    );
    Some(d)
}

/// A disruption budget that allows no eviction. Relax it only when it can never allow one
/// (misconfigured for the replicas there are), a drain is waiting on it, and it does not
/// protect a quorum.
pub(super) fn pdb_blocks_eviction(f: &Facts) -> Option<Diagnosis> {
    let b = f.pdb.as_ref()?;
    let workload = f.workload_target();
    let owner = workload
        .as_ref()
        .map(ToString::to_string)
        .unwrap_or_else(|| "its pods".into());
    let healthy = b.current_healthy;
    let desired = b.desired_healthy;
    let expected = b.expected(f.pods.len());
    let rule_text = match (&b.min_available, &b.max_unavailable) {
        (Some(m), _) => format!("minAvailable {m}"),
        (None, Some(m)) => format!("maxUnavailable {m}"),
        _ => "no limit".into(),
    };
    let mut d = Diagnosis::new(
        "PDBBlocksEviction",
        format!(
            "PodDisruptionBudget {} ({rule_text}) allows {} disruption(s): {healthy} of {expected} pods of {owner} healthy, {desired} required",
            b.name, b.disruptions_allowed
        ),
    );
    d.target = workload.clone().or_else(|| f.target.clone());
    d.severity = Severity::Medium;
    if b.disruptions_allowed > 0 {
        d.outcome = InvestigationOutcome::NotActionable;
        d.confidence = 0.8;
        return Some(d);
    }
    // Nodes being drained that hold its pods, those a drain would move
    // ([`observed::Pod::drain_moves`]: the eviction API passes over an ended pod).
    let draining: Vec<&str> = f
        .nodes
        .iter()
        .filter(|n| n.cordoned)
        .filter(|n| {
            f.pods
                .iter()
                .any(|p| p.node.as_deref() == Some(n.name.as_str()) && p.observed.drain_moves())
        })
        .map(|n| n.name.as_str())
        .collect();
    for n in &draining {
        d.factors.push(format!(
            "node {n} is cordoned and still runs a pod {} protects",
            b.name
        ));
    }
    // What the budget counts as not healthy: a replica that does not serve. A pod that ended
    // (a Job's completed pod, a record its node ended and its controller replaced: nobody
    // brings it back) or is on its way out is no replica the budget waits for; an empty
    // selector selects a namespace's Job pods too.
    let unhealthy: Vec<&str> = f
        .pods
        .iter()
        .filter(|p| {
            !p.healthy && !p.observed.outlived() && !p.observed.ended() && !p.observed.deleting
        })
        .map(|p| p.name.as_str())
        .collect();
    let workload_kind = f.workload.as_ref().map_or("", |w| w.kind.as_str());
    let quorum = b.guards_quorum(workload_kind, f.pods.len());
    d.confidence = 0.8;
    if !unhealthy.is_empty() {
        d.human = Some(format!(
            "PodDisruptionBudget {} is doing its job: {} of {owner} {} not healthy, so no other pod may be evicted{} — bring {} back first",
            b.name,
            unhealthy.join(", "),
            if unhealthy.len() == 1 { "is" } else { "are" },
            if quorum {
                " without risking the quorum"
            } else {
                ""
            },
            unhealthy.join(", ")
        ));
        return Some(d);
    }
    // The budget's own count, what the eviction API and the relaxation's proof go by: pods that
    // run ready may not be counted healthy by it yet.
    if !b.all_healthy(f.pods.len()) {
        d.human = Some(format!(
            "PodDisruptionBudget {} counts {healthy} of {expected} pods of {owner} healthy, {desired} required: it is doing its job until its own count reaches them",
            b.name
        ));
        return Some(d);
    }
    if quorum {
        d.human = Some(format!(
            "PodDisruptionBudget {} protects the quorum of {owner} ({rule_text} of {expected}); relaxing it could break the quorum — a human must decide how to drain {}",
            b.name,
            if draining.is_empty() {
                "its nodes".into()
            } else {
                listed(&draining)
            }
        ));
        return Some(d);
    }
    // Every pod healthy and still no disruption allowed: it can never allow one.
    d.factors.push(format!(
        "with all {expected} pods healthy it still requires {desired}: it can never allow an eviction"
    ));
    if draining.is_empty() {
        d.outcome = InvestigationOutcome::NotActionable;
        d.summary.push_str(&format!(
            "; it can never allow an eviction, but no drain is waiting on it (fix its {rule_text} in the manifest)"
        ));
        return Some(d);
    }
    d.summary = format!(
        "PodDisruptionBudget {} ({rule_text}) can never allow an eviction of {owner} ({expected} pod(s)), and blocks the drain of {}",
        b.name,
        listed(&draining)
    );
    d.proposal = proposal(
        ActionType::RelaxPDB,
        ActionParams::relax_pdb(&b.name, 1),
        format!(
            "set maxUnavailable: 1 on the PodDisruptionBudget {}",
            b.name
        ),
    );
    Some(d)
}

/// A workload at zero replicas that its applied configuration declares with more. Under an
/// autoscaler a human decides: it does not scale up from zero, and a scale would fight it.
pub(super) fn scaled_to_zero(f: &Facts) -> Option<Diagnosis> {
    let w = f.workload.as_ref()?;
    if w.replicas != Some(0) || !f.pods.is_empty() {
        return None;
    }
    let declared = f.declared.as_ref().map(|d| d.count).filter(|r| *r > 0)?;
    let mut d = Diagnosis::new(
        "ScaledToZero",
        format!(
            "{} {} is scaled to 0 replicas; its applied configuration declares {declared}",
            w.kind, w.name
        ),
    );
    d.factors.push(format!(
        "spec.replicas 0, kubectl.kubernetes.io/last-applied-configuration replicas {declared}, no pods"
    ));
    d.target = f.workload_target().or_else(|| f.target.clone());
    d.confidence = 0.75;
    if let Some(h) = &f.count_set_by {
        d.human = Some(format!(
            "HorizontalPodAutoscaler {} sets the replicas of {}, and an autoscaler does not scale up from 0: a human must decide between its bounds and the count",
            h.name, w.name
        ));
        return Some(d);
    }
    if let Some(problem) = f.scale_quota_problem(declared) {
        d.human = Some(format!(
            "{} {} declares {declared} replicas, but {problem}",
            w.kind, w.name
        ));
        return Some(d);
    }
    if let Some(problem) = f.room_problem(declared) {
        d.human = Some(format!(
            "{} {} declares {declared} replicas, but they could not be placed ({problem}): the cluster needs capacity",
            w.kind, w.name
        ));
        return Some(d);
    }
    d.proposal = proposal(
        ActionType::ScaleReplicas,
        ActionParams::scale(declared),
        format!("set replicas of {} back to {declared}", w.name),
    );
    Some(d)
}

/// A workload scaled below the replicas it is meant to run (its applied configuration, or the
/// count its current ReplicaSet ran at before a scale-down without a rollout), whose pods now
/// run but are not ready: the capacity left does not carry the load. Restore the count. Pods
/// that cannot run (a crash, an OOM kill, a pull) are left to the rules for those: more of
/// them help nobody. Under an autoscaler the count is its own
/// ([`findings::short_of_declared`]).
pub(super) fn scaled_below_declared(f: &Facts) -> Option<Diagnosis> {
    let w = f.workload.as_ref()?;
    let current = w.replicas.filter(|r| *r > 0)?;
    let declared =
        findings::short_of_declared(f.declared.as_ref(), current, f.count_set_by.as_ref())?;
    if f.rollout.is_some() || f.pods.is_empty() {
        return None;
    }
    // Its replicas: a pod its node ended is a record its controller replaced.
    let now: Vec<&observed::Pod> = f
        .pods
        .iter()
        .map(|p| &p.observed)
        .filter(|p| !p.outlived())
        .collect();
    // More pods like these must help (the scale's proof asks the same finding), and every pod
    // must have a node: where one waits for room, more would wait too.
    if findings::more_would_help(now.iter().copied(), f.healthy_since()).is_err()
        || now.iter().any(|p| p.waiting_for_node().is_some())
        || now.iter().all(|p| p.serving())
    {
        return None;
    }
    let not_ready: Vec<&str> = now
        .iter()
        .filter(|p| !p.serving())
        .map(|p| p.name.as_str())
        .collect();
    let mut d = Diagnosis::new(
        "ScaledBelowDeclared",
        format!(
            "{} {} runs {current} of the {} replicas it is meant to run, and {} of its pods are not ready: the capacity left does not carry the load",
            w.kind,
            w.name,
            declared.count,
            not_ready.len()
        ),
    );
    d.factors.push(declared.evidence.clone());
    d.factors
        .push(format!("not ready: {}", not_ready.join(", ")));
    d.factors.extend(
        f.failing_warnings()
            .filter(|x| x.reason == "Unhealthy")
            .map(|x| x.message.clone())
            .take(2),
    );
    d.severity = Severity::High;
    d.target = f.workload_target().or_else(|| f.target.clone());
    d.confidence = 0.75;
    if let Some(problem) = f.scale_quota_problem(declared.count - current) {
        d.human = Some(format!(
            "{} {} is meant to run {} replicas, but {problem}",
            w.kind, w.name, declared.count
        ));
        return Some(d);
    }
    if let Some(problem) = f.room_problem(declared.count - current) {
        d.human = Some(format!(
            "{} {} is meant to run {} replicas, but more could not be placed ({problem}): the cluster needs capacity",
            w.kind, w.name, declared.count
        ));
        return Some(d);
    }
    d.proposal = proposal(
        ActionType::ScaleReplicas,
        ActionParams::scale(declared.count),
        format!("set replicas of {} back to {}", w.name, declared.count),
    );
    Some(d)
}
