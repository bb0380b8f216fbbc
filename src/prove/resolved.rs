//! The obligations of "no action needed, the problem is resolved": the desired state is met,
//! nothing failed to be created or scheduled since the alert began, and the pods run.

use chrono::Duration;
use serde_json::Value;

use super::scene::{EventView, PodView, Read, Scene, hhmm};
use super::{check, fails};
use crate::cluster::obj::{self, array, i64_at, str_at};
use crate::domain::Obligation;

/// Event reasons that mean a pod could not be made, placed, started or kept.
const FAILURE_REASONS: &[&str] = &[
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

/// What the kind's status says of its desired state: `(met, how)`.
fn desired_state(o: &Value) -> Option<(bool, String)> {
    let n = |p: &[&str]| i64_at(o, p).unwrap_or(0);
    let kind = obj::kind(o);
    Some(match kind {
        "Deployment" | "ReplicaSet" => {
            let want = i64_at(o, &["spec", "replicas"]).unwrap_or(1);
            let available = n(&["status", "availableReplicas"]);
            let updated = if kind == "Deployment" {
                n(&["status", "updatedReplicas"])
            } else {
                want
            };
            let generation = n(&["metadata", "generation"]);
            let observed = i64_at(o, &["status", "observedGeneration"]).unwrap_or(generation);
            (
                available == want && updated == want && observed >= generation,
                format!("{available} of {want} replicas available, {updated} updated"),
            )
        }
        "StatefulSet" => {
            let want = i64_at(o, &["spec", "replicas"]).unwrap_or(1);
            let ready = n(&["status", "readyReplicas"]);
            let same = str_at(o, &["status", "currentRevision"])
                == str_at(o, &["status", "updateRevision"]);
            (
                ready == want && same,
                format!("{ready} of {want} replicas ready"),
            )
        }
        "DaemonSet" => {
            let want = n(&["status", "desiredNumberScheduled"]);
            let available = n(&["status", "numberAvailable"]);
            (
                available == want,
                format!("{available} of {want} pods available"),
            )
        }
        "Job" => {
            let failed = array(o, &["status", "conditions"]).iter().any(|c| {
                str_at(c, &["type"]) == Some("Failed") && str_at(c, &["status"]) == Some("True")
            });
            let succeeded = n(&["status", "succeeded"]);
            let completions = i64_at(o, &["spec", "completions"]).unwrap_or(1);
            (
                !failed && (succeeded >= completions || n(&["status", "active"]) > 0),
                if failed {
                    "the Job failed".to_owned()
                } else {
                    format!("{succeeded} of {completions} completions")
                },
            )
        }
        "Pod" => {
            let p = PodView::parse(o);
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
            let phase = str_at(o, &["status", "phase"]).unwrap_or("Unknown");
            (phase == "Bound", format!("claim {phase}"))
        }
        "Node" => {
            let conds = array(o, &["status", "conditions"]);
            let bad: Vec<String> = conds
                .iter()
                .filter(|c| {
                    let ty = str_at(c, &["type"]).unwrap_or_default();
                    let st = str_at(c, &["status"]).unwrap_or_default();
                    (ty == "Ready" && st != "True") || (ty != "Ready" && st == "True")
                })
                .filter_map(|c| str_at(c, &["type"]).map(str::to_owned))
                .collect();
            (
                bad.is_empty(),
                if bad.is_empty() {
                    "Ready, no pressure".into()
                } else {
                    format!("conditions {}", bad.join(", "))
                },
            )
        }
        "HorizontalPodAutoscaler" => {
            let cur = n(&["status", "currentReplicas"]);
            let max = n(&["spec", "maxReplicas"]);
            (cur < max, format!("{cur} of at most {max} replicas"))
        }
        _ => return None,
    })
}

pub(super) async fn resolved(scene: &Scene) -> Read<Vec<Obligation>> {
    let mut out = Vec::new();
    let o = scene.target_obj().await?;
    match desired_state(&o) {
        Some((ok, how)) => out.push(check(
            "resolved.desired-state-met",
            "The target's desired state is met",
            ok,
            vec![format!("{}: {how}", scene.target)],
        )),
        None => out.push(fails(
            "resolved.desired-state-met",
            "The target's desired state is met",
            vec![format!(
                "kubemedic knows no desired state of a {} to check",
                obj::kind(&o)
            )],
        )),
    }
    let pods = match scene.target.kind.as_str() {
        "PersistentVolumeClaim" | "HorizontalPodAutoscaler" | "Service" | "Node" => vec![],
        _ => scene.target_pods().await?,
    };
    let since = scene
        .signal
        .starts_at
        .min(scene.now - Duration::minutes(10));
    let bad: Vec<String> = pods
        .iter()
        .filter_map(|p| {
            if let Some(f) = p.failure() {
                return Some(format!("pod {} {f}", p.name));
            }
            if !p.ready && !p.deleting {
                return Some(format!("pod {} is {} and not ready", p.name, p.phase));
            }
            p.containers.iter().find_map(|c| match &c.terminated {
                Some((r, code, Some(t))) if *t >= since && c.running => Some(format!(
                    "container {} of pod {} exited ({r}, {code}) at {}, after the alert began",
                    c.name,
                    p.name,
                    hhmm(*t)
                )),
                _ => None,
            })
        })
        .collect();
    out.push(check(
        "resolved.pods-healthy",
        "Every pod of the target runs and is ready, with no exit since the alert began",
        bad.is_empty(),
        if bad.is_empty() {
            vec![format!("{} pod(s), all ready", pods.len())]
        } else {
            bad.into_iter().take(3).collect()
        },
    ));
    // Failures recorded since the alert began, about the target, its ReplicaSets or its pods.
    let events = match scene.target.namespace {
        Some(_) => scene.events(None).await?,
        None => scene.node_events(&scene.target.name).await?,
    };
    let name = scene.target.name.as_str();
    let ours = |e: &EventView| {
        e.name == name
            || e.name.starts_with(&format!("{name}-"))
            || pods.iter().any(|p| p.name == e.name)
    };
    let recent: Vec<&EventView> = events
        .iter()
        .filter(|e| e.warning && FAILURE_REASONS.contains(&e.reason.as_str()))
        .filter(|e| e.last.is_some_and(|t| t >= since))
        .filter(|e| ours(e))
        .collect();
    out.push(check(
        "resolved.no-failures-since-onset",
        "Nothing failed to be created, scheduled or started since the alert began",
        recent.is_empty(),
        if recent.is_empty() {
            vec![format!("no failure recorded since {}", hhmm(since))]
        } else {
            recent.iter().take(3).map(|e| e.line()).collect()
        },
    ));
    Ok(out)
}
