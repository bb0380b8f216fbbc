//! A rolling restart of a workload's pods.

use super::*;

/// The restart's obligations, in their declared order, judged on the workload, its pods and the
/// namespace's events, read once.
pub(in crate::prove) async fn restart(scene: &Scene) -> Read<Vec<Obligation>> {
    let w = scene.target_obj().await?;
    let pods = scene.pods_of(&w).await?;
    let events = scene.events(None).await?;
    Ok(vec![
        pods_run_but_wedged(scene, &pods, &events),
        keeps_ready_pods(&w, &pods),
        not_short_of_replicas(scene, &w, &pods, &events).await?,
        no_rollout_in_progress(&w, &ob::restart::NO_ROLLOUT_IN_PROGRESS),
        no_broken_dependency(scene, &ob::restart::NO_BROKEN_DEPENDENCY, "restart").await?,
        no_change_explains(scene, &ob::restart::NO_CHANGE_EXPLAINS, "A restart").await?,
    ])
}

/// Whether the pods run but are wedged, from the pods and the probe failures since
/// [`findings::resolved::healthy_since`] (the look-back the "healthy again" finding judges on: a
/// probe that has not failed since answers, and the two findings cannot both hold; the kubelet
/// warns on every failed probe, every 10 s by default): none crashes on start, and some that were ready once are
/// stuck not ready or fail their probes. A restart does not help pods that cannot run, nor pods
/// that have never been ready (a fresh pod of the same template starts the same way).
fn pods_run_but_wedged(scene: &Scene, pods: &[Pod], events: &[Event]) -> Obligation {
    let obligation = &ob::restart::PODS_RUN_BUT_WEDGED;
    let crashing: Vec<&Pod> = pods.iter().filter(|p| p.broken().is_some()).collect();
    // Pods that run but are not ready: wedged if they were ready once; a pod that has not been
    // ready since it started shows how a fresh pod of its template starts, not a wedge.
    let (stuck, never): (Vec<&Pod>, Vec<&Pod>) = pods
        .iter()
        .filter(|p| p.running_not_ready() || p.starting())
        .partition(|p| p.wedged());
    let window = findings::resolved::healthy_since(scene.now, Some(scene.signal.starts_at));
    let probe_failures: Vec<&Event> = events
        .iter()
        .filter(|e| e.warning && e.reason == "Unhealthy" && e.last.is_some_and(|t| t >= window))
        .filter(|e| {
            pods.iter()
                .any(|p| p.name == e.name && !never.iter().any(|n| n.name == p.name))
        })
        .collect();
    if let Some(p) = crashing.first() {
        return obligation.fails(vec![format!(
            "pod {} {}: a restart does not help pods that cannot run",
            p.name,
            p.broken().map(|f| f.line).unwrap_or_default()
        )]);
    }
    if stuck.is_empty() && probe_failures.is_empty() {
        return obligation.fails(match never.first() {
            Some(p) => vec![format!(
                "pod {} has not been ready since it started{}: a fresh pod of the same template starts the same way",
                p.name,
                time(&p.raw, &["status", "startTime"])
                    .map(|t| format!(" at {}", hhmm(t)))
                    .unwrap_or_default()
            )],
            None => vec![format!(
                "all {} pods run and are ready, with no probe failure since {}: nothing shows them wedged",
                pods.len(),
                hhmm(window)
            )],
        });
    }
    let mut ev: Vec<String> = stuck
        .iter()
        .take(3)
        .map(|p| format!("pod {} runs but is not ready", p.name))
        .collect();
    ev.extend(probe_failures.iter().take(2).map(|e| e.line()));
    obligation.holds(ev)
}

/// Whether the workload runs the replicas it declares, from its spec, its pods, the events of a
/// scale-down and its autoscalers. A workload scaled below the count it declares (its applied
/// configuration, or the count it ran at before a scale-down without a rollout) is short of
/// capacity: new pods are as overloaded as the old ones. An autoscaler's count is its own: then
/// the declared one says nothing.
async fn not_short_of_replicas(
    scene: &Scene,
    w: &Value,
    pods: &[Pod],
    events: &[Event],
) -> Read<Obligation> {
    let obligation = &ob::restart::NOT_SHORT_OF_REPLICAS;
    let replicas = Workload::parse(w).wanted();
    let Some(declared) = findings::declared_replicas(w, pods, events) else {
        return Ok(obligation.holds(vec![format!(
            "{replicas} replica(s); nothing declares another count"
        )]));
    };
    let hpas = scene.autoscalers().await?;
    let set_by = findings::count_set_by(&hpas, obj::kind(w), obj::name(w));
    if findings::short_of_declared(Some(&declared), replicas, set_by).is_some() {
        return Ok(obligation.fails(vec![format!(
            "{replicas} replica(s) where {}: new pods would carry the same load; scaling back is the remedy",
            declared.evidence
        )]));
    }
    Ok(obligation.holds(vec![match set_by {
        Some(h) if declared.count > replicas => format!(
            "{replicas} replica(s), set by HorizontalPodAutoscaler {}; {}",
            h.name, declared.evidence
        ),
        _ => format!("{replicas} replica(s); {}", declared.evidence),
    }]))
}

/// Whether replacing the pods keeps some ready ([`findings::restart_keeps_ready`]).
fn keeps_ready_pods(w: &Value, pods: &[Pod]) -> Obligation {
    let obligation = &ob::restart::KEEPS_READY_PODS;
    match findings::restart_keeps_ready(w, pods) {
        Ok(line) => obligation.holds(vec![line]),
        Err(line) => obligation.fails(vec![line]),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::cluster::SnapshotCluster;
    use crate::domain::Target;

    /// Issue 43: a probe that last failed before the "healthy again" look-back (the alert began
    /// 5 minutes ago, the look-back is 10, the probe failed 12 minutes ago) does not show ready
    /// pods wedged: before, the restart's own 15 minutes counted it, and the same cluster was
    /// both resolved and wedged.
    #[tokio::test]
    async fn a_probe_failure_before_the_healthy_look_back_shows_nothing_wedged() {
        let now: DateTime<Utc> = "2026-11-21T12:00:00Z".parse().unwrap_or_default();
        let wedged = |minutes: i64| async move {
            let at = (now - Duration::minutes(minutes)).to_rfc3339();
            let pod = json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "api-5d8f-0", "namespace": "shop"},
                "status": {"phase": "Running", "startTime": "2026-11-21T09:00:00Z",
                    "conditions": [{"type": "Ready", "status": "True"}],
                    "containerStatuses": [{"name": "api", "ready": true, "restartCount": 0,
                        "state": {"running": {"startedAt": "2026-11-21T09:00:00Z"}}}]}});
            let event = json!({"apiVersion": "v1", "kind": "Event",
                "metadata": {"name": "api-5d8f-0.1", "namespace": "shop"},
                "involvedObject": {"kind": "Pod", "name": "api-5d8f-0", "namespace": "shop"},
                "type": "Warning", "reason": "Unhealthy", "lastTimestamp": at,
                "message": "Readiness probe failed: timeout"});
            let list = json!({"apiVersion": "v1", "kind": "List", "items": [event]});
            let snap =
                SnapshotCluster::from_yaml(&list.to_string()).unwrap_or_else(|e| panic!("{e}"));
            let mut signal = crate::prove::scene::test_signal("KubePodNotReady", now);
            signal.starts_at = now - Duration::minutes(5);
            let target = Target::new("Deployment", "api", Some("shop".into()));
            let scene = Scene::new(Arc::new(snap), target, now, signal);
            let events = scene.events(None).await.unwrap_or_else(|e| panic!("{e:?}"));
            pods_run_but_wedged(&scene, &[Pod::parse(&pod)], &events)
        };
        assert!(
            wedged(3).await.holds(),
            "a probe failed since the look-back"
        );
        let o = wedged(12).await;
        assert!(!o.holds(), "{:?}", o.evidence);
        assert!(
            o.evidence[0].contains("no probe failure since 11:50"),
            "{:?}",
            o.evidence
        );
    }
}
