//! Obligations of the actions on a workload's pods, one file per action: roll back
//! (Deployment, StatefulSet), restart, scale, delete one pod. This file holds what several of
//! them read (a template's images and configuration, a rollout in progress, the budget of
//! unavailable pods, the target's dependencies).

use chrono::{DateTime, Duration, Utc};
use serde_json::Value;

use super::findings;
use super::scene::{Read, Scene, hhmm};
use crate::cluster::ListQuery;
use crate::cluster::obj::{self, at, str_at};
use crate::cluster::observed::{
    Event, Pod, SERVED_MIN_SECONDS, Workload, ago, created, last_written,
    progress_deadline_exceeded, time,
};
use crate::domain::obligations::{self as ob, ObligationSpec};
use crate::domain::{Neighbourhood, Obligation};

mod delete;
mod restart;
mod rollback;
mod scale;

pub use super::findings::{configmaps, secrets};
pub(super) use delete::delete_pod;
pub(super) use restart::restart;
pub(super) use rollback::rollback;
pub(super) use scale::{quota_allows, room_for, scale};

/// What the target depends on and what changed before its failures began
/// ([`super::graph::build`]), read once per proof.
async fn neighbourhood(scene: &Scene) -> Read<&Neighbourhood> {
    scene
        .neighbourhood
        .get_or_try_init(|| super::graph::build(scene.r.clone(), &scene.target, scene.now))
        .await
}

/// Whether nothing the target depends on is broken now (its neighbourhood, as the
/// investigation reads it: the Services and hosts its failures name, its configuration, the
/// policies and webhooks in its way, its nodes and volumes). New pods — from a restart or from
/// more replicas — meet the same broken dependency, so the action cannot help while it lasts.
async fn no_broken_dependency(
    scene: &Scene,
    obligation: &ObligationSpec,
    action: &str,
) -> Read<Obligation> {
    let n = neighbourhood(scene).await?;
    let broken: Vec<String> = n
        .broken()
        .map(|d| {
            format!(
                "{} ({}) {}: a {action} does not change it",
                d.object,
                d.relation,
                d.unhealthy.as_deref().unwrap_or_default()
            )
        })
        .collect();
    Ok(if broken.is_empty() {
        obligation.holds(vec![format!(
            "{} dependency(ies) read, none broken now",
            n.dependencies.len()
        )])
    } else {
        obligation.fails(broken.into_iter().take(3).collect())
    })
}

/// Whether no change to what the workload reads explains its failures better than the action
/// would ([`findings::change_explains`]): a limit raised, pods replaced or added all keep that
/// change, and the pods read it again. `action` in a phrase for the evidence ("a higher memory
/// limit").
pub(super) async fn no_change_explains(
    scene: &Scene,
    obligation: &ObligationSpec,
    action: &str,
) -> Read<Obligation> {
    let w = scene.target_obj().await?;
    let pods = scene.target_pods().await?;
    let template = if obj::kind(&w) == "Pod" {
        w.clone()
    } else {
        crate::cluster::observed::pod_template(&w)
            .cloned()
            .unwrap_or(Value::Null)
    };
    let n = neighbourhood(scene).await?;
    Ok(
        match findings::change_explains(n, &template, &pods, created(&w)) {
            Some(found) => {
                let mut ev = found.evidence;
                ev.push(format!(
                    "{action} leaves {} as it is: the change, not the workload, is what to look at",
                    found.object
                ));
                obligation.fails(ev)
            }
            None => obligation.holds(vec![match n.onset {
                Some(o) => format!(
                    "nothing the workload reads changed between its last healthy run and the failures ({})",
                    hhmm(o)
                ),
                None => "no failure onset to compare changes with".into(),
            }]),
        },
    )
}

/// Whether no rollout of the workload is in progress ([`Workload::rollout_in_progress`]), from its spec
/// and status: the restart's and the pod deletion's obligation.
fn no_rollout_in_progress(w: &Value, obligation: &ObligationSpec) -> Obligation {
    match Workload::parse(w).rollout_in_progress() {
        Some(why) => obligation.fails(vec![format!("{} {}: {why}", obj::kind(w), obj::name(w))]),
        None => obligation.holds(vec![format!(
            "{} {} is at its current revision",
            obj::kind(w),
            obj::name(w)
        )]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(started: &str, ready_changed: Option<&str>) -> Pod {
        let mut cond = json!({"type": "Ready", "status": "False"});
        if let Some(t) = ready_changed {
            cond["lastTransitionTime"] = json!(t);
        }
        Pod::parse(&json!({
            "metadata": {"name": "search-1"},
            "status": {"phase": "Running", "startTime": started, "conditions": [cond]}
        }))
    }

    #[test]
    fn a_pod_unready_since_its_start_was_never_ready_and_one_that_served_was() {
        // The kubelet set Ready False as it started: it has not been ready since.
        let fresh = pod("2026-11-26T10:00:00Z", Some("2026-11-26T10:00:01Z"));
        assert_eq!(fresh.was_ready().map(|r| !r), Some(true));
        // Ready for a moment, then not (a real singleton that failed three seconds in).
        let moment = pod("2026-11-26T10:00:00Z", Some("2026-11-26T10:00:03Z"));
        assert_eq!(moment.was_ready().map(|r| !r), Some(false));
        // Ready False since long after it started: it served, then got stuck.
        let served = pod("2026-11-26T08:00:00Z", Some("2026-11-26T10:00:00Z"));
        assert_eq!(served.was_ready().map(|r| !r), Some(false));
        // No times recorded: unknown.
        assert_eq!(
            pod("2026-11-26T08:00:00Z", None).was_ready().map(|r| !r),
            None
        );
    }
}
