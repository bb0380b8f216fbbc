//! Rollout facts: the workload's revisions, whether the newest one regressed (its pods fail
//! where the previous revision's served), and one pod failing where its siblings run.

use super::*;

fn revision(rs: &ReplicaSet) -> i64 {
    rs.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("deployment.kubernetes.io/revision"))
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

fn images(rs: &ReplicaSet) -> String {
    rs.spec
        .as_ref()
        .and_then(|s| s.template.as_ref()?.spec.as_ref())
        .map(|s| {
            s.containers
                .iter()
                .filter_map(|c| c.image.as_deref())
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

fn owned_by(p: &ObservedPod, owner: &str) -> bool {
    p.pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.name == owner)
}

fn ready_replicas(rs: &ReplicaSet) -> i32 {
    rs.status
        .as_ref()
        .and_then(|s| s.ready_replicas)
        .unwrap_or(0)
}

fn created(rs: &ReplicaSet) -> Option<DateTime<Utc>> {
    let t = rs.metadata.creation_timestamp.as_ref()?;
    DateTime::from_timestamp(t.0.as_second(), 0)
}

/// The workload's revisions, newest first: a Deployment's ReplicaSets or a StatefulSet's
/// ControllerRevisions.
fn revisions(ev: &Evidence) -> Vec<RevisionRecord> {
    let mut out: Vec<RevisionRecord> = if ev.replicasets.is_empty() {
        ev.controller_revisions.clone()
    } else {
        ev.replicasets
            .iter()
            .map(|rs| RevisionRecord {
                name: rs.metadata.name.clone().unwrap_or_default(),
                number: revision(rs),
                created: created(rs),
                images: images(rs),
                ready: i64::from(ready_replicas(rs)),
                template: rs
                    .spec
                    .as_ref()
                    .and_then(|s| serde_json::to_value(&s.template).ok())
                    .unwrap_or(serde_json::Value::Null),
            })
            .collect()
    };
    out.sort_by_key(|r| std::cmp::Reverse(r.number));
    out
}

/// Whether a pod belongs to a revision: a ReplicaSet owns it, or (StatefulSet, DaemonSet) its
/// `controller-revision-hash` label names the ControllerRevision.
fn of_revision(p: &ObservedPod, f: &PodFacts, rev: &RevisionRecord) -> bool {
    // The label is the revision's full name (StatefulSet) or its hash suffix (`<name>-<hash>`).
    owned_by(p, &rev.name)
        || f.revision.as_deref().is_some_and(|h| {
            !h.is_empty()
                && (rev.name == h
                    || rev
                        .name
                        .strip_suffix(h)
                        .is_some_and(|prefix| prefix.ends_with('-')))
        })
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
    // The new and previous revisions: a StatefulSet names them in its status.
    let (current, previous) = match (w.kind.as_str(), &w.update_revision, &w.current_revision) {
        ("StatefulSet", Some(update), Some(cur)) => {
            let Some(new) = revs.iter().find(|r| &r.name == update) else {
                return Ok(None);
            };
            let old = if update != cur {
                revs.iter().find(|r| &r.name == cur)
            } else {
                revs.iter().find(|r| r.number < new.number)
            };
            match old {
                Some(old) => (new, old),
                None => return Ok(None),
            }
        }
        _ => match (revs.first(), revs.get(1)) {
            (Some(a), Some(b)) => (a, b),
            _ => return Ok(None),
        },
    };
    let Some(age) = current.created.map(|t| ev.now - t) else {
        return Ok(None);
    };
    if age >= Duration::hours(ROLLOUT_WINDOW_HOURS) {
        return Ok(None);
    }
    let in_rev = |rev: &RevisionRecord| -> Vec<(&ObservedPod, &PodFacts)> {
        ev.pods
            .iter()
            .zip(pods)
            .filter(|(p, f)| of_revision(p, f, rev))
            .collect()
    };
    let new_pods = in_rev(current);
    if new_pods.is_empty() || !new_pods.iter().all(|(_, f)| f.failing) {
        return Ok(None);
    }
    // A rollout that changed only the template's metadata (a restart) runs what ran before:
    // what changed is elsewhere.
    if !findings::runs_differently(&current.template, &previous.template) {
        return Err(format!(
            "revisions {} and {} run the same pod spec (a restart): what changed is not in the template",
            current.number, previous.number
        ));
    }
    let old_pods = in_rev(previous);
    let serving = old_pods.iter().filter(|(_, f)| f.healthy).count();
    let previous_health = if serving > 0 || previous.ready > 0 {
        PreviousHealth::Serving(serving.max(usize::try_from(previous.ready).unwrap_or(0)))
    } else {
        // No pods of the previous revision to look at: judge it by what is recorded.
        if let Some(w) = findings::revision_failures(&ev.events, &previous.name, "").first() {
            return Err(format!(
                "the previous revision {} failed too: {} {}: {}",
                previous.number, w.name, w.reason, w.message
            ));
        }
        let first_failure = new_pods
            .iter()
            .flat_map(|(_, f)| f.warnings.iter())
            .filter_map(|w| w.first_age)
            .max()
            .map(|a| ev.now - a);
        let onset = [first_failure, ev.alert.starts_at]
            .into_iter()
            .flatten()
            .min();
        let appeared = current.created;
        if let (Some(onset), Some(appeared)) = (onset, appeared)
            && onset < appeared - Duration::seconds(ONSET_SLACK_SECONDS)
        {
            return Err(format!(
                "the failures began at {}, before revision {} appeared at {}",
                onset.format("%H:%M:%S"),
                current.number,
                appeared.format("%H:%M:%S")
            ));
        }
        PreviousHealth::Served {
            served: match (previous.created, current.created) {
                (Some(a), Some(b)) => Some(b - a),
                _ => None,
            },
            onset: match (onset, appeared) {
                (Some(o), Some(a)) => Some(o - a),
                _ => None,
            },
        }
    };
    Ok(Some(Rollout {
        kind: w.kind.clone(),
        strategy: w.strategy.clone(),
        previous_health,
        current: Revision {
            number: current.number,
            images: current.images.clone(),
        },
        previous: Revision {
            number: previous.number,
            images: previous.images.clone(),
        },
        age_minutes: age.num_minutes(),
        new_pods: new_pods
            .iter()
            .map(|(_, f)| f.description.clone())
            .collect(),
    }))
}

/// One failing pod whose siblings of the same revision run healthy.
pub(super) fn lone_failure(pods: &[PodFacts]) -> Option<LoneFailure> {
    let failing: Vec<&PodFacts> = pods.iter().filter(|p| p.failing).collect();
    let [p] = failing.as_slice() else {
        return None;
    };
    // A pod that ended (evicted, say) was replaced already: there is nothing left to replace.
    if matches!(p.phase.as_deref(), Some("Pending" | "Failed" | "Succeeded"))
        || p.deleting_for.is_some()
        || p.controller.is_none()
    {
        return None;
    }
    let siblings: Vec<&PodFacts> = pods
        .iter()
        .filter(|o| o.name != p.name && o.healthy && o.revision == p.revision)
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
