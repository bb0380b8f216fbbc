//! The obligations of "no action needed, the problem is resolved": the desired state is met,
//! nothing failed to be created or scheduled since the alert began, and the pods run.

use serde_json::Value;

use super::findings::{condition, resolved as window};
use super::scene::{Read, Scene, hhmm};
use crate::cluster::obj;
use crate::cluster::observed::{Event, Pod, Workload};
use crate::domain::Obligation;
use crate::domain::obligations as ob;
use crate::monitoring::PrometheusClient;

/// Whether the alert's condition can be seen gone. The cluster's objects show it when the
/// alert's expression (in its generator URL) reads only kube-state-metrics' object series
/// (`kube_…`) and counts no changes, or — without an expression — when its name is about an
/// object's state ([`condition::objects_show`]). Any other expression (`up`, an application's own series,
/// changes over a window) only Prometheus can judge: when it is configured, it evaluates the
/// alert's own expression now, and the condition is gone when no series of it is the alert's
/// while Prometheus does hold series of every metric it reads ([`unscraped`]). Prometheus
/// unreachable, still finding the alert's series, or holding none of a metric: not gone.
async fn condition_observable(
    signal: &crate::domain::SignalContext,
    prometheus: Option<&PrometheusClient>,
) -> Obligation {
    let obligation = &ob::resolved::CONDITION_OBSERVABLE;
    let (observable, how) = condition::objects_show(&signal.name, signal.generator_url.as_deref());
    let expr = signal
        .generator_url
        .as_deref()
        .and_then(crate::monitoring::prometheus::expression);
    let (Some(prometheus), Some(expr), false) = (prometheus, expr, observable) else {
        return obligation.check(observable, vec![how]);
    };
    let line = match still_holding(prometheus, &expr, &signal.labels).await {
        Ok(Holding::Gone) => {
            return obligation.holds(vec![
                how,
                format!(
                    "Prometheus, asked now, evaluates the alert's expression `{expr}` to no series of this alert: its condition no longer holds"
                ),
            ]);
        }
        // Nothing anywhere also comes from a Prometheus that never scrapes what the
        // expression reads (another Prometheus than the alert's): that proves nothing.
        Ok(Holding::Unscraped(why)) => format!(
            "Prometheus evaluates the alert's expression `{expr}` to nothing, but {why}: it cannot be the Prometheus that evaluates this alert"
        ),
        Ok(Holding::Series(n)) => format!(
            "Prometheus, asked now, still finds the alert's expression `{expr}` holding for {n} series of this alert"
        ),
        Err(e) => format!("Prometheus could not say whether the condition still holds: {e}"),
    };
    obligation.fails(vec![how, line])
}

/// Why `prometheus` cannot judge an expression over `metrics`: it names no metric, or
/// Prometheus holds no series of one of them; `None` when it holds series of each.
/// What Prometheus says of an alert's expression now.
enum Holding {
    /// It holds for this many series of the alert.
    Series(usize),
    /// It holds for none, but Prometheus holds no series of a metric it reads: why.
    Unscraped(String),
    /// It holds for none, and Prometheus scrapes every metric it reads.
    Gone,
}

async fn still_holding(
    prometheus: &PrometheusClient,
    expr: &str,
    alert: &std::collections::BTreeMap<String, String>,
) -> crate::monitoring::Result<Holding> {
    Ok(match prometheus.holding(expr, alert).await? {
        0 => match unscraped(prometheus, &condition::metrics_of(expr)).await? {
            Some(why) => Holding::Unscraped(why),
            None => Holding::Gone,
        },
        n => Holding::Series(n),
    })
}

async fn unscraped(
    prometheus: &PrometheusClient,
    metrics: &[String],
) -> crate::monitoring::Result<Option<String>> {
    if metrics.is_empty() {
        return Ok(Some("the expression names no metric".into()));
    }
    for m in metrics {
        if !prometheus.has_series(m).await? {
            return Ok(Some(format!("Prometheus holds no series of `{m}` at all")));
        }
    }
    Ok(None)
}

/// The obligations of "resolved", in their declared order, judged on the target, its pods and
/// the events about them, read once.
/// `prometheus`, when configured, judges an alert condition the objects cannot show.
pub(super) async fn resolved(
    scene: &Scene,
    prometheus: Option<&PrometheusClient>,
) -> Read<Vec<Obligation>> {
    let o = scene.target_obj().await?;
    let pods = match scene.target.kind.as_str() {
        "PersistentVolumeClaim" | "HorizontalPodAutoscaler" | "Service" | "Node" => vec![],
        _ => scene.target_pods().await?,
    };
    let events = match scene.target.namespace {
        Some(_) => scene.events(None).await?,
        None => scene.node_events(&scene.target.name).await?,
    };
    let mut out = vec![
        condition_observable(&scene.signal, prometheus).await,
        desired_state_met(scene, &o, &events),
    ];
    out.extend(alerted_objects_met(scene, &o, &pods, &events).await?);
    let replaced = replaced_revisions(scene, &o).await?;
    let recovery = window::recovery(
        (&scene.target.kind, &scene.target.name),
        &pods,
        &events,
        &replaced,
        scene.now,
        Some(scene.signal.starts_at),
    );
    out.extend([pods_healthy(&recovery), no_failures_since_onset(&recovery)]);
    Ok(out)
}

/// Whether the target's desired state is met, from its status ([`window::desired_state`]); a
/// Node Ready now whose readiness flaps ([`findings::flaps`], from its `events`) is not, as the
/// node rules say: each drop disrupts every pod on it, whatever it shows at this moment.
fn desired_state_met(scene: &Scene, o: &Value, events: &[Event]) -> Obligation {
    let obligation = &ob::resolved::DESIRED_STATE_MET;
    let flapping = (scene.target.kind == "Node")
        .then(|| super::findings::flaps(scene.now, events, &scene.target.name))
        .flatten();
    if let (Some((true, how)), Some(flaps)) = (window::desired_state(o), &flapping) {
        return obligation.fails(vec![format!("{}: {how}, but {flaps}", scene.target)]);
    }
    match window::desired_state(o) {
        Some((ok, how)) => obligation.check(ok, vec![format!("{}: {how}", scene.target)]),
        None => obligation.fails(vec![format!(
            "kubemedic knows no desired state of a {} to check",
            obj::kind(o)
        )]),
    }
}

/// Whether every object the alert names, besides the target, shows its desired state met, from
/// the objects as they are now; `None` when the alert names no other object that can be read
/// and judged. Whoever claims the problem gone may have named another object as the target (the
/// autoscaler at its maximum, the Deployment short of replicas, the pod not ready).
async fn alerted_objects_met(
    scene: &Scene,
    o: &Value,
    pods: &[Pod],
    events: &[Event],
) -> Read<Option<Obligation>> {
    let mut met = Vec::new();
    let mut unmet = Vec::new();
    let target_state = window::desired_state(o);
    for t in crate::domain::targets_from_labels(&scene.signal.labels) {
        if t == scene.target {
            continue;
        }
        let named = match scene.get(&t.kind, t.namespace.as_deref(), &t.name).await {
            Ok(o) => o,
            Err(e) if e.is_unreachable() => return Err(e),
            // A pod replaced since, an object deleted: nothing left to show the condition.
            Err(_) => continue,
        };
        match window::alerted_object_met(
            &t,
            &named,
            &scene.target,
            target_state.as_ref(),
            pods,
            events,
            scene.now,
        ) {
            Some((true, line)) => met.push(line),
            Some((false, line)) => unmet.push(line),
            None => {}
        }
    }
    if met.is_empty() && unmet.is_empty() {
        return Ok(None);
    }
    Ok(Some(ob::resolved::ALERTED_OBJECTS_MET.check(
        unmet.is_empty(),
        if unmet.is_empty() { met } else { unmet },
    )))
}

/// A Deployment's earlier revisions scaled to zero ([`window::replaced_revisions`]).
async fn replaced_revisions(scene: &Scene, o: &Value) -> Read<Vec<String>> {
    if obj::kind(o) != "Deployment" {
        return Ok(vec![]);
    }
    let revisions = scene.revisions(o).await?;
    Ok(window::replaced_revisions(&Workload::parse(o), &revisions))
}

/// Whether every pod of the target runs and is ready, with no exit since the alert began (or
/// for as long as the rule that claims "healthy again" looks back); pods that ended and were
/// replaced are not its replicas ([`window::recovery`]).
fn pods_healthy(r: &window::Recovery) -> Obligation {
    ob::resolved::PODS_HEALTHY.check(
        r.unhealthy.is_empty(),
        if r.unhealthy.is_empty() {
            let mut lines = vec![format!("{} pod(s), all ready", r.live.len())];
            lines.extend(r.ended.iter().map(|p| {
                format!(
                    "pod {} ended ({}) and was replaced: not one of the replicas",
                    p.name,
                    window::ended_how(p)
                )
            }));
            lines
        } else {
            r.unhealthy.iter().take(3).cloned().collect()
        },
    )
}

/// Whether nothing failed to be created, scheduled or started since the alert began (or for as
/// long as the rule that claims "healthy again" looks back), from the warnings about the
/// target, its ReplicaSets and its pods — not about a pod that ended and was replaced, nor one
/// of a Deployment's replaced revision ([`window::recovery`]).
fn no_failures_since_onset(r: &window::Recovery) -> Obligation {
    ob::resolved::NO_FAILURES_SINCE_ONSET.check(
        r.failures.is_empty(),
        if r.failures.is_empty() {
            vec![format!("no failure recorded since {}", hhmm(r.since))]
        } else {
            r.failures.iter().take(3).map(|e| e.line()).collect()
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 43: "resolved" for a Node Ready now whose readiness flaps is not met, as the node
    /// rules say (`findings::flaps`): a model claiming the problem gone on such a node is
    /// refuted on `resolved.desired-state-met`.
    #[tokio::test]
    async fn a_node_ready_now_whose_readiness_flaps_is_not_resolved() {
        use std::sync::Arc;

        use crate::cluster::SnapshotCluster;
        use crate::domain::Target;
        let now: chrono::DateTime<chrono::Utc> = "2026-11-21T12:00:00Z".parse().unwrap_or_default();
        let met = |flaps: i64| async move {
            let mut objects = vec![serde_json::json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": "w1"},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]}})];
            if flaps > 0 {
                objects.push(serde_json::json!({"apiVersion": "v1", "kind": "Event",
                    "metadata": {"name": "w1.1", "namespace": "default"},
                    "involvedObject": {"kind": "Node", "name": "w1"},
                    "type": "Normal", "reason": "NodeNotReady", "count": flaps,
                    "message": "Node w1 status is now: NodeNotReady",
                    "firstTimestamp": "2026-11-21T11:20:00Z", "lastTimestamp": "2026-11-21T11:50:00Z"}));
            }
            let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": objects});
            let snap =
                SnapshotCluster::from_yaml(&list.to_string()).unwrap_or_else(|e| panic!("{e}"));
            let scene = Scene::new(
                Arc::new(snap),
                Target::new("Node", "w1", None),
                now,
                crate::prove::scene::test_signal("KubeNodeReadinessFlapping", now),
            );
            let o = scene.target_obj().await.unwrap_or_else(|e| panic!("{e:?}"));
            let events = scene
                .node_events("w1")
                .await
                .unwrap_or_else(|e| panic!("{e:?}"));
            desired_state_met(&scene, &o, &events)
        };
        assert!(
            met(0).await.holds(),
            "a Ready node that does not flap is met"
        );
        let flapping = met(4).await;
        assert!(!flapping.holds());
        assert!(
            flapping
                .evidence
                .iter()
                .any(|e| e.contains("went NotReady 4 times")),
            "{:?}",
            flapping.evidence
        );
    }

    #[test]
    fn a_node_is_resolved_when_ready_without_trouble_and_not_for_want_of_a_condition() {
        let node = |conditions: serde_json::Value| {
            window::desired_state(
                &serde_json::json!({"kind": "Node", "metadata": {"name": "w1"},
                "status": {"conditions": conditions}}),
            )
            .unwrap()
        };
        let ready = serde_json::json!({"type": "Ready", "status": "True"});
        assert!(node(serde_json::json!([ready])).0);
        assert_eq!(
            node(serde_json::json!([])),
            (false, "reports no Ready condition".into())
        );
        let (met, how) = node(serde_json::json!([ready,
            {"type": "DiskPressure", "status": "True", "message": "low on disk"}]));
        assert!(!met);
        assert_eq!(how, "conditions DiskPressure (low on disk)");
    }

    #[test]
    fn a_statefulset_update_held_by_its_partition_is_not_met_and_says_why() {
        let o = serde_json::json!({
            "kind": "StatefulSet", "metadata": {"name": "solr"},
            "spec": {"replicas": 3, "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}},
            "status": {"readyReplicas": 3, "updatedReplicas": 1, "currentRevision": "solr-a", "updateRevision": "solr-b"}
        });
        let (met, how) = window::desired_state(&o).unwrap();
        assert!(!met);
        assert!(how.contains("partition 2"), "{how}");
        let mut on_delete = o.clone();
        on_delete["spec"]["updateStrategy"] = serde_json::json!({"type": "OnDelete"});
        let (met, how) = window::desired_state(&on_delete).unwrap();
        assert!(!met);
        assert!(how.contains("OnDelete"), "{how}");
    }
}
