//! Rollout facts: the workload's revisions, whether the newest one regressed (its pods fail
//! where the previous revision's served), and one pod failing where its siblings run.

use super::*;

/// The workload's revisions, newest first.
fn revisions(ev: &Evidence) -> Vec<&observed::Revision> {
    ev.revisions.iter().rev().collect()
}

/// A recent rollout as the cause: `Ok(Some)` when the new revision's pods all fail and the
/// previous revision is judged healthy, `Ok(None)` when there is no recent rollout to judge,
/// `Err(why)` when there is one but the evidence says it is not the cause.
pub(super) fn regression(ev: &Evidence, pods: &[PodFacts]) -> Result<Option<Rollout>, String> {
    let Some(w) = ev.workload.as_ref() else {
        return Ok(None);
    };
    if !matches!(w.kind.as_str(), "Deployment" | "StatefulSet") {
        return Ok(None);
    }
    let revs = revisions(ev);
    // The new revision: the one the workload names ([`observed::Workload::current_revision_number`]).
    // The previous: the one a StatefulSet still names as current while it updates, else the
    // newest before it.
    let Some(current) = w
        .current_revision_number(&ev.revisions)
        .and_then(|n| revs.iter().find(|r| r.number == n))
    else {
        return Ok(None);
    };
    let previous = match (&w.update_revision, &w.current_revision) {
        (Some(update), Some(cur)) if w.kind == "StatefulSet" && update != cur => {
            revs.iter().find(|r| &r.name == cur)
        }
        _ => revs.iter().find(|r| r.number < current.number),
    };
    let Some(previous) = previous else {
        return Ok(None);
    };
    let Some(age) = current.created.map(|t| ev.now - t) else {
        return Ok(None);
    };
    if age >= Duration::hours(ROLLOUT_WINDOW_HOURS) {
        return Ok(None);
    }
    let in_rev = |rev: &observed::Revision| -> Vec<(&ObservedPod, &PodFacts)> {
        ev.pods
            .iter()
            .zip(pods)
            .filter(|(p, _)| rev.owns(&p.observed))
            .collect()
    };
    // Failing as the rollback proof counts it: a pod that was ready and is not now served.
    let stalled = observed::progress_deadline_exceeded(&w.raw).is_some();
    let new_pods = in_rev(current);
    if new_pods.is_empty()
        || !new_pods
            .iter()
            .all(|(p, _)| p.observed.fails_in_rollout(stalled))
    {
        return Ok(None);
    }
    // A new pod kept from starting by a volume an older revision's pod holds waits whatever
    // the revision changed: the rollout strategy fails, not the release (what the rollback's
    // proof asks, `rollback.not-blocked-by-older-pods`).
    let all: Vec<&observed::Pod> = ev.pods.iter().map(|p| &p.observed).collect();
    if let Some(h) = findings::held_by_older(current, &all, &ev.events).first() {
        return Err(format!(
            "pod {} of revision {} cannot attach volume {}: it is still attached to pod {} of an older revision, so the rollout's strategy keeps the new pods from starting, whatever the revision changed",
            h.pod.name, current.number, h.volume, h.holder.name
        ));
    }
    // A rollout that changed only the template's metadata (a restart) runs what ran before:
    // what changed is elsewhere.
    if !findings::runs_differently(&current.template, &previous.template) {
        return Err(format!(
            "revisions {} and {} run the same pod spec (a restart): what changed is not in the template",
            current.number, previous.number
        ));
    }
    // A rollout that only raised memory limits, or whose pods no scheduler has tried, did not
    // bring the failures (the rollback proof's `rollback.change-in-pod-template` asks the same).
    let failing: Vec<&observed::Pod> = new_pods.iter().map(|(p, _)| &p.observed).collect();
    if let Some(line) = findings::not_the_rollout(current, previous, &failing, &ev.events) {
        return Err(line);
    }
    let replaced_at = previous.replaced_at(&ev.revisions);
    let health = findings::revision_health(
        previous,
        ev.pods.iter().map(|p| &p.observed),
        &ev.events,
        replaced_at,
    );
    // When the failures began (the rollback proof's `rollback.failures-began-after-revision`
    // asks the same finding): before the revision appeared, it did not bring them.
    let onset = findings::failures_began(
        failing.iter().copied(),
        &ev.events,
        ev.alert.starts_at,
        w.created,
    )
    .map(|b| b.at());
    let appeared = current.created;
    let previous_health = match health {
        RevisionHealth::Ready(n) => PreviousHealth::Serving(n),
        RevisionHealth::Fails(p, f) => {
            return Err(format!(
                "the previous revision {} fails too: pod {} {}",
                previous.number, p.name, f.line
            ));
        }
        RevisionHealth::FailedBefore(w) => {
            return Err(format!(
                "the previous revision {} failed too: {} {}: {}",
                previous.number, w.name, w.reason, w.message
            ));
        }
        RevisionHealth::Served(served) => PreviousHealth::Served {
            served,
            onset: match (onset, appeared) {
                (Some(o), Some(a)) => Some(o - a),
                _ => None,
            },
        },
    };
    if let (Some(onset), Some(appeared)) = (onset, appeared)
        && findings::predates(onset, appeared)
    {
        return Err(format!(
            "the failures began at {}, before revision {} appeared at {}",
            onset.format("%H:%M:%S"),
            current.number,
            appeared.format("%H:%M:%S")
        ));
    }
    // A pod of an older revision failing too: the failures are not the new revision's alone
    // (the rollback proof's `rollback.failures-began-after-revision` asks the same).
    if let Some((p, f)) = ev
        .pods
        .iter()
        .filter(|p| !current.owns(&p.observed))
        .find_map(|p| Some((p, p.observed.broken()?)))
    {
        return Err(format!(
            "pod {} of an older revision fails too: {}",
            p.observed.name, f.line
        ));
    }
    // A rollout undo restores the template, not what it reads: a ConfigMap rewritten in place
    // since the previous revision last ran on it stays as it is now.
    let observed: Vec<&observed::Pod> = ev.pods.iter().map(|p| &p.observed).collect();
    let undo_keeps = findings::configmaps(&current.template)
        .iter()
        .find_map(|name| {
            let written = *ev.configmap_writes.get(name)?;
            match findings::undo_on_config(previous, name, written, replaced_at, &observed) {
                findings::UndoOnConfig::Kept(line) => Some(line),
                _ => None,
            }
        });
    Ok(Some(Rollout {
        kind: w.kind.clone(),
        strategy: w.strategy.clone(),
        previous_health,
        current: Revision {
            number: current.number,
            images: current.images(),
        },
        previous: Revision {
            number: previous.number,
            images: previous.images(),
        },
        age_minutes: age.num_minutes(),
        new_pods: new_pods
            .iter()
            .map(|(_, f)| f.description.clone())
            .collect(),
        undo_keeps,
    }))
}

/// One failing pod whose siblings of the same revision run healthy.
pub(super) fn lone_failure(pods: &[PodFacts]) -> Option<LoneFailure> {
    let failing: Vec<&PodFacts> = pods.iter().filter(|p| p.failing).collect();
    let [p] = failing.as_slice() else {
        return None;
    };
    // A pod that ended ([`observed::Pod::ended`]: evicted, say) was replaced already: there
    // is nothing left to replace. One still Pending has not run (unplaced, or its init
    // containers failing): the rules for those failures decide, not a lone replacement.
    if p.observed.ended()
        || p.observed.phase == "Pending"
        || p.deleting_for.is_some()
        || p.controller.is_none()
    {
        return None;
    }
    let siblings: Vec<&PodFacts> = pods
        .iter()
        .filter(|o| p.observed.template_runs_in(&o.observed))
        .collect();
    if siblings.is_empty() {
        return None;
    }
    let mut sibling_nodes: Vec<String> = siblings.iter().filter_map(|s| s.node.clone()).collect();
    sibling_nodes.sort();
    sibling_nodes.dedup();
    let moved_image = findings::moved_image(
        &p.observed,
        &siblings.iter().map(|s| &s.observed).collect::<Vec<_>>(),
    );
    Some(LoneFailure {
        pod: p.name.clone(),
        moved_image,
        node: p.node.clone(),
        siblings: siblings.len(),
        sibling_nodes,
        description: p.description.clone(),
    })
}
