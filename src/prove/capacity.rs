//! Obligations of the actions on capacity and disruption: an autoscaler's maximum, a volume's
//! size, a disruption budget.
//!
//! Each proof reads the object its parameter names once, into the shared model
//! (`observed::Hpa`, `observed::Claim` with its `observed::StorageClass`, `observed::Pdb`),
//! which the offline rules that propose these actions read too.

use serde_json::Value;

use super::findings;
use super::scene::{Read, Scene};
use super::workload::{quota_allows, room_for};
use crate::cluster::observed::{self, Pod};
use crate::cluster::quantity;
use crate::cluster::{ListQuery, obj};
use crate::domain::Obligation;
use crate::domain::obligations as ob;
use crate::domain::params::{self, ParamKey};

// --- HorizontalPodAutoscaler maximum -------------------------------------------------------

/// The object a parameter names (`HPA_NAME`, `PVC_NAME`, …) in the target's namespace, or why
/// there is none: it is not named, or it cannot be read. The first obligation of its proof
/// fails with that, and the proof ends there.
async fn named(
    scene: &Scene,
    name: Option<&str>,
    (param, kind): (ParamKey, &str),
) -> Read<Result<(String, Value), String>> {
    let Some(name) = name else {
        return Ok(Err(format!("{} is missing", param.name)));
    };
    match scene.get(kind, scene.ns(), name).await {
        Ok(o) => Ok(Ok((name.to_owned(), o))),
        Err(e) if e.is_unreachable() => Err(e),
        Err(e) => Ok(Err(format!("{kind} {name}: {}", e.message))),
    }
}

/// The maximum's obligations, in their declared order, judged on the autoscaler named, the
/// target and its pods, read once. An autoscaler not named, or not readable, ends the proof.
pub(super) async fn hpa_max(
    scene: &Scene,
    hpa: Option<&str>,
    wanted: Option<i64>,
) -> Read<Vec<Obligation>> {
    let hpa = named(scene, hpa, (params::HPA_NAME, "HorizontalPodAutoscaler"))
        .await?
        .map(|(name, h)| (name, observed::Hpa::parse(&h)));
    let scales = scales_target(scene, &hpa);
    let Ok((_, h)) = hpa else {
        return Ok(vec![scales]);
    };
    let w = scene.target_obj().await?;
    let pods = scene.pods_of(&w).await?;
    let wanted = wanted.unwrap_or(0);
    let current = h.replicas_now();
    Ok(vec![
        scales,
        at_maximum(&h),
        above_target(&h),
        room_to_schedule(scene, &w, &pods, wanted - current).await?,
        raises_bounded(&h, wanted),
        quota_allows(scene, &w, wanted - current, &ob::hpa::QUOTA_ALLOWS).await?,
    ])
}

/// Whether the autoscaler named (HPA_NAME, read or why not) scales the target, from its
/// `scaleTargetRef`.
fn scales_target(scene: &Scene, hpa: &Result<(String, observed::Hpa), String>) -> Obligation {
    let obligation = &ob::hpa::SCALES_TARGET;
    let (name, h) = match hpa {
        Ok(found) => found,
        Err(why) => return obligation.fails(vec![why.clone()]),
    };
    obligation.check(
        h.scales(&scene.target.kind, &scene.target.name),
        vec![format!(
            "HorizontalPodAutoscaler {name} scales {}/{}",
            h.target_kind, h.target_name
        )],
    )
}

/// Whether the autoscaler runs at its maximum, from its status.
fn at_maximum(h: &observed::Hpa) -> Obligation {
    let max = h.max;
    let current = h.replicas_now();
    let desired = h.desired.unwrap_or(current);
    ob::hpa::AT_MAXIMUM.check(
        h.at_maximum(),
        vec![format!(
            "{current} replicas (desired {desired}) of at most {max}"
        )],
    )
}

/// Whether a metric of the autoscaler stays above its target, from its status
/// ([`observed::Hpa::utilisation`]).
fn above_target(h: &observed::Hpa) -> Obligation {
    let u = &h.utilisation;
    let over: Vec<String> = h
        .above_target()
        .map(|u| {
            format!(
                "{} at {}% against a {}% target",
                u.metric, u.current, u.target
            )
        })
        .collect();
    ob::hpa::ABOVE_TARGET.check(
        !over.is_empty(),
        if u.is_empty() {
            vec!["the autoscaler reports no current utilisation".into()]
        } else if over.is_empty() {
            u.iter()
                .map(|u| {
                    format!(
                        "{} at {}% within its {}% target",
                        u.metric, u.current, u.target
                    )
                })
                .collect()
        } else {
            over
        },
    )
}

/// Whether the `extra` replicas the new maximum allows could be placed ([`room_for`], what a
/// scale-up to as many asks).
async fn room_to_schedule(scene: &Scene, w: &Value, pods: &[Pod], extra: i64) -> Read<Obligation> {
    let (room, ev) = room_for(scene, w, pods, extra.max(1)).await?;
    Ok(ob::hpa::ROOM_TO_SCHEDULE.check(room, ev))
}

/// Whether the new maximum is a step the autoscaler's may take ([`observed::Hpa::raise_allowed`]).
fn raises_bounded(h: &observed::Hpa, wanted: i64) -> Obligation {
    let max = h.max;
    ob::hpa::RAISES_BOUNDED.check(
        h.raise_allowed(wanted),
        vec![format!("maxReplicas {max} → {wanted}")],
    )
}

// --- Expand a PersistentVolumeClaim --------------------------------------------------------

/// The expansion's obligations, in their declared order, judged on the claim named, read once.
/// A claim not named, or not readable, ends the proof.
pub(super) async fn expand_pvc(
    scene: &Scene,
    claim: Option<&str>,
    new_size: Option<&str>,
) -> Read<Vec<Obligation>> {
    let claim = named(scene, claim, (params::PVC_NAME, "PersistentVolumeClaim"))
        .await?
        .map(|(name, c)| (name, observed::Claim::parse(&c)));
    let belongs = belongs_to_target(scene, &claim).await?;
    let Ok((name, pvc)) = claim else {
        return Ok(vec![belongs]);
    };
    Ok(vec![
        belongs,
        bound(&name, &pvc),
        class_expandable(scene, &pvc).await?,
        no_resize_under_way(&pvc),
        grows_bounded(&pvc, new_size),
    ])
}

/// Whether the claim named (PVC_NAME, read or why not) is the target's, from the target: the
/// claim itself, one of a StatefulSet's volume claim templates, or a volume of the workload's
/// pod template.
async fn belongs_to_target(
    scene: &Scene,
    claim: &Result<(String, observed::Claim), String>,
) -> Read<Obligation> {
    let obligation = &ob::pvc::BELONGS_TO_TARGET;
    let name = match claim {
        Ok((name, _)) => name.as_str(),
        Err(why) => return Ok(obligation.fails(vec![why.clone()])),
    };
    let belongs = match scene.target.kind.as_str() {
        "PersistentVolumeClaim" => scene.target.name == name,
        _ => observed::uses_claim(&scene.target_obj().await?, name),
    };
    Ok(obligation.check(
        belongs,
        vec![format!(
            "PersistentVolumeClaim {name} {} {}",
            if belongs {
                "belongs to"
            } else {
                "is not used by"
            },
            scene.target
        )],
    ))
}

/// Whether the claim `name` is Bound, from its phase.
fn bound(name: &str, pvc: &observed::Claim) -> Obligation {
    let phase = pvc.phase.as_deref().unwrap_or("Unknown");
    ob::pvc::BOUND.check(
        pvc.bound(),
        vec![format!("PersistentVolumeClaim {name} is {phase}")],
    )
}

/// Whether the claim's StorageClass allows volume expansion, from the class it names.
async fn class_expandable(scene: &Scene, pvc: &observed::Claim) -> Read<Obligation> {
    let obligation = &ob::pvc::CLASS_EXPANDABLE;
    let Some(class) = pvc.class.as_deref() else {
        return Ok(obligation.fails(vec!["the claim names no StorageClass".into()]));
    };
    match scene.get("StorageClass", None, class).await {
        Ok(sc) => {
            let allows = observed::StorageClass::parse(&sc).expands();
            Ok(obligation.check(
                allows,
                vec![format!(
                    "StorageClass {class} {} volume expansion",
                    if allows { "allows" } else { "does not allow" }
                )],
            ))
        }
        Err(e) if e.is_unreachable() => Err(e),
        Err(e) => Ok(obligation.fails(vec![format!("StorageClass {class}: {}", e.message)])),
    }
}

/// Whether no resize of the claim is under way, from its status: its capacity is what it
/// requests, and no condition (Resizing, FileSystemResizePending) is true.
fn no_resize_under_way(pvc: &observed::Claim) -> Obligation {
    let (requested, capacity, resizing) = (&pvc.requested, &pvc.capacity, &pvc.resizing);
    ob::pvc::NO_RESIZE_UNDER_WAY.check(
        !pvc.resize_under_way(),
        vec![format!(
            "requested {requested}, capacity {capacity}{}",
            if resizing.is_empty() {
                String::new()
            } else {
                format!(", conditions {}", resizing.join(", "))
            }
        )],
    )
}

/// Whether the new size (NEW_SIZE) is a bounded step up from the claim's size now
/// ([`observed::Claim::size_now`], [`findings::bounded_step`]).
fn grows_bounded(pvc: &observed::Claim, new_size: Option<&str>) -> Obligation {
    let requested = &pvc.requested;
    let new = new_size.and_then(quantity::memory_bytes);
    ob::pvc::GROWS_BOUNDED.check(
        matches!((pvc.size_now(), new), (Some(o), Some(n)) if findings::bounded_step(o, n)),
        vec![format!(
            "storage {requested} → {}",
            new_size.unwrap_or("(missing)")
        )],
    )
}

// --- Relax a PodDisruptionBudget -----------------------------------------------------------

/// The relaxation's obligations, in their declared order, judged on the budget named, the
/// target and its pods, read once. A budget not named, or not readable, ends the proof.
pub(super) async fn relax_pdb(
    scene: &Scene,
    budget: Option<&str>,
    wanted: Option<i64>,
) -> Read<Vec<Obligation>> {
    let budget = named(scene, budget, (params::PDB_NAME, "PodDisruptionBudget"))
        .await?
        .map(|(name, b)| (name, observed::Pdb::parse(&b)));
    // Nothing more is read for a budget that ends the proof.
    let (w, pods, selected) = match &budget {
        Ok((_, pdb)) => {
            let w = scene.target_obj().await?;
            let pods = scene.pods_of(&w).await?;
            let selected = selected_by(scene, pdb).await?;
            (w, pods, selected)
        }
        Err(_) => (Value::Null, vec![], vec![]),
    };
    let guards = guards_target(scene, &budget, &pods);
    let Ok((_, pdb)) = budget else {
        return Ok(vec![guards]);
    };
    let guarded: Vec<&Pod> = selected.iter().collect();
    Ok(vec![
        guards,
        blocks_a_waiting_drain(scene, &pdb, &guarded).await?,
        pods_healthy(&pdb, &guarded),
        guards_no_quorum(&w, &pdb, &guarded),
        relaxed_minimally(&pdb, &guarded, wanted),
    ])
}

/// The pods a budget's selector selects.
fn guarded<'p>(pdb: &observed::Pdb, pods: &'p [Pod]) -> Vec<&'p Pod> {
    pods.iter().filter(|p| pdb.selects(p)).collect()
}

/// What the budget counts, whichever workload made them: every pod of the target's namespace
/// its selector selects, as the eviction API and the rules' budget evidence count them (a
/// budget over two Deployments guards the pods of both; an empty selector, every pod there).
/// A budget without a selector selects none.
async fn selected_by(scene: &Scene, pdb: &observed::Pdb) -> Read<Vec<Pod>> {
    let Some(query) = pdb.selector_query() else {
        return Ok(Vec::new());
    };
    let query = if query.is_empty() {
        ListQuery::default()
    } else {
        ListQuery::labels(query)
    };
    let listed = scene.list("Pod", scene.ns(), &query).await?;
    let selected: Vec<Pod> = listed
        .iter()
        .map(|p| Pod::at(p, scene.now))
        .filter(|p| pdb.selects(p))
        .collect();
    scene.heeding(selected, scene.ns()).await
}

/// Whether the budget named (PDB_NAME, read or why not) guards the target's pods, from its
/// selector: it selects some of them.
fn guards_target(
    scene: &Scene,
    budget: &Result<(String, observed::Pdb), String>,
    pods: &[Pod],
) -> Obligation {
    let obligation = &ob::pdb::GUARDS_TARGET;
    let pdb = match budget {
        Ok((_, pdb)) => pdb,
        Err(why) => return obligation.fails(vec![why.clone()]),
    };
    let guarded = guarded(pdb, pods);
    obligation.check(
        !guarded.is_empty(),
        vec![format!(
            "it selects {} of the {} pods of {}",
            guarded.len(),
            pods.len(),
            scene.target
        )],
    )
}

/// Whether the budget allows no eviction while a drain waits on it, from its status and the
/// cordoned nodes that still hold pods it guards.
async fn blocks_a_waiting_drain(
    scene: &Scene,
    pdb: &observed::Pdb,
    guarded: &[&Pod],
) -> Read<Obligation> {
    let allowed = pdb.disruptions_allowed;
    let nodes = scene.nodes().await?;
    let draining: Vec<String> = nodes
        .iter()
        .filter(|n| n.unschedulable)
        // A pod a drain would move (`Pod::drain_moves`): the eviction API passes over an
        // ended one, as the rules' budget rule counts.
        .filter(|n| {
            guarded
                .iter()
                .any(|p| p.node.as_deref() == Some(n.name.as_str()) && p.drain_moves())
        })
        .map(|n| n.name.clone())
        .collect();
    Ok(ob::pdb::BLOCKS_A_WAITING_DRAIN.check(
        allowed == 0 && !draining.is_empty(),
        vec![
            format!("{allowed} disruption(s) allowed"),
            if draining.is_empty() {
                "no cordoned node holds a pod it guards: no drain waits".into()
            } else {
                format!(
                    "cordoned node(s) {} still hold pods it guards",
                    draining.join(", ")
                )
            },
        ],
    ))
}

/// Whether all the pods the budget guards are healthy, from its status
/// ([`observed::Pdb::all_healthy`]): then it is misconfigured, not doing its job.
fn pods_healthy(pdb: &observed::Pdb, guarded: &[&Pod]) -> Obligation {
    let healthy = pdb.current_healthy;
    let (expected, desired) = (pdb.expected(guarded.len()), pdb.desired_healthy);
    ob::pdb::PODS_HEALTHY.check(
        pdb.all_healthy(guarded.len()),
        vec![format!(
            "{healthy} of {expected} healthy, {desired} required"
        )],
    )
}

/// Whether the budget guards no quorum, from the target's kind and the budget's counts: not a
/// StatefulSet, and not a majority of three pods or more ([`observed::Pdb::guards_quorum`]).
fn guards_no_quorum(w: &Value, pdb: &observed::Pdb, guarded: &[&Pod]) -> Obligation {
    let (expected, desired) = (pdb.expected(guarded.len()), pdb.desired_healthy);
    let quorum = pdb.guards_quorum(obj::kind(w), guarded.len());
    ob::pdb::GUARDS_NO_QUORUM.check(
        !quorum,
        vec![format!(
            "{} {} with {expected} pods, {desired} required",
            obj::kind(w),
            obj::name(w)
        )],
    )
}

/// A relaxed budget lets at most one in this many of the pods it expects go at once (half):
/// enough to let a drain or a rollout move, never so much that the budget stops guarding.
const RELAXED_AT_MOST_ONE_IN: i64 = 2;

/// Whether the new budget (MAX_UNAVAILABLE) lets one pod go at a time, at most one in
/// [`RELAXED_AT_MOST_ONE_IN`] of those the budget expects.
fn relaxed_minimally(pdb: &observed::Pdb, guarded: &[&Pod], wanted: Option<i64>) -> Obligation {
    let expected = pdb.expected(guarded.len());
    let wanted = wanted.unwrap_or(0);
    ob::pdb::RELAXED_MINIMALLY.check(
        wanted >= 1 && wanted <= (expected / RELAXED_AT_MOST_ONE_IN).max(1),
        vec![format!("maxUnavailable → {wanted} of {expected} pods")],
    )
}

// --- Revert in Git -------------------------------------------------------------------------

/// The Git revert's obligations, in their declared order, judged on the target.
pub(super) async fn git_revert(scene: &Scene, change: Option<&str>) -> Read<Vec<Obligation>> {
    let w = scene.target_obj().await?;
    Ok(vec![gitops_managed(scene, &w), change_identified(change)])
}

/// Whether a GitOps controller manages the target, from the Argo CD or Flux marker it carries
/// ([`observed::gitops_marker`]).
fn gitops_managed(scene: &Scene, w: &Value) -> Obligation {
    let marker = observed::gitops_marker(w).map(|(_, m)| m);
    ob::gitrevert::GITOPS_MANAGED.check(
        marker.is_some(),
        vec![match &marker {
            Some(m) => format!("{} carries the {m}", scene.target),
            None => format!("{} carries no Argo CD or Flux marker", scene.target),
        }],
    )
}

/// Whether the change to make in Git is identified: PROPOSED_CHANGE says it in ten characters
/// or more.
fn change_identified(change: Option<&str>) -> Obligation {
    let change = change.unwrap_or_default();
    if change.chars().count() >= 10 {
        ob::gitrevert::CHANGE_IDENTIFIED.holds(vec![change.chars().take(200).collect()])
    } else {
        ob::gitrevert::CHANGE_IDENTIFIED
            .fails(vec!["PROPOSED_CHANGE does not say what to change".into()])
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use chrono::{DateTime, Utc};
    use serde_json::json;

    use super::*;
    use crate::cluster::SnapshotCluster;
    use crate::domain::Target;

    /// Deployment `gw` binding host port 443, three replicas on three nodes (and `spare` nodes
    /// more), at its autoscaler's maximum of 3 with CPU over target: `hpa.room-to-schedule`
    /// for a maximum of 6.
    async fn room_for_a_higher_maximum(spare: usize) -> Obligation {
        let now: DateTime<Utc> = "2026-11-21T12:00:00Z".parse().unwrap_or_default();
        let containers = json!([{"name": "gw", "image": "edge/gw:1",
            "ports": [{"containerPort": 8443, "hostPort": 443, "protocol": "TCP"}]}]);
        let mut objects = vec![
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "gw", "namespace": "edge", "uid": "gw"},
                "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "gw"}},
                    "template": {"metadata": {"labels": {"app": "gw"}},
                        "spec": {"containers": containers}}},
                "status": {"replicas": 3, "readyReplicas": 3}}),
            json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": "gw", "namespace": "edge"},
                "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "gw"},
                    "minReplicas": 1, "maxReplicas": 3,
                    "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": 70}}}]},
                "status": {"currentReplicas": 3, "desiredReplicas": 3,
                    "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu",
                        "current": {"averageUtilization": 95}}}]}}),
        ];
        for i in 0..3 + spare {
            objects.push(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": format!("worker-{i}")},
                "status": {"conditions": [{"type": "Ready", "status": "True"}],
                    "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}));
        }
        for i in 0..3 {
            objects.push(json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("gw-5d8f-{i}"), "namespace": "edge",
                    "labels": {"app": "gw", "pod-template-hash": "5d8f"}},
                "spec": {"nodeName": format!("worker-{i}"), "containers": containers},
                "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                    "containerStatuses": [{"name": "gw", "ready": true, "restartCount": 0,
                        "state": {"running": {}}}]}}));
        }
        let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
        let snap = SnapshotCluster::from_yaml(&list.to_string()).unwrap_or_else(|e| panic!("{e}"));
        let signal = crate::prove::scene::test_signal("KubeHpaMaxedOut", now);
        let target = Target::new("Deployment", "gw", Some("edge".into()));
        let scene = Scene::new(Arc::new(snap), target, now, signal);
        hpa_max(&scene, Some("gw"), Some(6))
            .await
            .unwrap_or_else(|e| panic!("{e:?}"))
            .into_iter()
            .find(|o| o.id == ob::hpa::ROOM_TO_SCHEDULE.id)
            .unwrap_or_else(|| panic!("no room-to-schedule"))
    }

    /// Issue 43: a higher maximum adds pods as a scale-up does, and asks the same room
    /// (`room_for`): pods binding a host port held on every node cannot be placed, though none
    /// waits for a node yet; with three nodes more, they can.
    #[tokio::test]
    async fn a_higher_maximum_needs_room_for_its_host_ports_as_a_scale_up_does() {
        let o = room_for_a_higher_maximum(0).await;
        assert!(!o.holds(), "{o:?}");
        assert!(
            o.evidence
                .iter()
                .any(|e| e.contains("0 schedulable node(s) have them free")),
            "{o:?}"
        );
        let o = room_for_a_higher_maximum(3).await;
        assert!(o.holds(), "{o:?}");
    }

    /// `pdb.blocks-a-waiting-drain` for budget `web` (selecting by `selector`) with target
    /// `web-b`: Deployments `web-a` (on cordoned node n1) and `web-b` (on n2), both `tier: web`.
    async fn budget_over_two_deployments(selector: serde_json::Value) -> Obligation {
        let now: DateTime<Utc> = "2026-11-21T12:00:00Z".parse().unwrap_or_default();
        let mut objects = vec![
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": "web", "namespace": "shop"},
                "spec": {"minAvailable": 4, "selector": selector},
                "status": {"disruptionsAllowed": 0, "currentHealthy": 4, "desiredHealthy": 4,
                    "expectedPods": 4}}),
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                "spec": {"unschedulable": true},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n2"},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
        ];
        for (app, node) in [("web-a", "n1"), ("web-b", "n2")] {
            objects.push(json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": app, "namespace": "shop", "uid": app},
                "spec": {"replicas": 2, "selector": {"matchLabels": {"app": app}},
                    "template": {"metadata": {"labels": {"app": app, "tier": "web"}},
                        "spec": {"containers": [{"name": "web", "image": "shop/web:1"}]}}}}));
            for i in 0..2 {
                objects.push(json!({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": format!("{app}-5d8f-{i}"), "namespace": "shop",
                        "labels": {"app": app, "tier": "web", "pod-template-hash": "5d8f"},
                        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                            "name": format!("{app}-5d8f"), "uid": format!("{app}-rs"),
                            "controller": true}]},
                    "spec": {"nodeName": node,
                        "containers": [{"name": "web", "image": "shop/web:1"}]},
                    "status": {"phase": "Running",
                        "conditions": [{"type": "Ready", "status": "True"}],
                        "containerStatuses": [{"name": "web", "ready": true,
                            "restartCount": 0, "state": {"running": {}}}]}}));
            }
            objects.push(json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": format!("{app}-5d8f"), "namespace": "shop",
                    "uid": format!("{app}-rs"),
                    "labels": {"app": app, "pod-template-hash": "5d8f"},
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment",
                        "name": app, "uid": app, "controller": true}]},
                "spec": {"replicas": 2, "selector": {"matchLabels": {"app": app}}}}));
        }
        let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
        let snap = SnapshotCluster::from_yaml(&list.to_string()).unwrap_or_else(|e| panic!("{e}"));
        let signal = crate::prove::scene::test_signal("KubePdbNotEnoughHealthyPods", now);
        let target = Target::new("Deployment", "web-b", Some("shop".into()));
        let scene = Scene::new(Arc::new(snap), target, now, signal);
        relax_pdb(&scene, Some("web"), Some(3))
            .await
            .unwrap_or_else(|e| panic!("{e:?}"))
            .into_iter()
            .find(|o| o.id == ob::pdb::BLOCKS_A_WAITING_DRAIN.id)
            .unwrap_or_else(|| panic!("no blocks-a-waiting-drain"))
    }

    /// Issue 43: the budget's guarded pods are what it selects, whichever workload made them,
    /// as the eviction API and the rules' budget evidence count them: a budget over two
    /// Deployments blocks the drain of the node holding the other one's pods. An empty
    /// selector selects every pod of the namespace (policy/v1), the other Deployment's too.
    #[tokio::test]
    async fn a_budget_guards_every_pod_it_selects_not_only_the_target_s() {
        for selector in [json!({"matchLabels": {"tier": "web"}}), json!({})] {
            let o = budget_over_two_deployments(selector).await;
            assert!(o.holds(), "{o:?}");
            assert!(
                o.evidence
                    .iter()
                    .any(|e| e.contains("cordoned node(s) n1 still hold pods it guards")),
                "{o:?}"
            );
        }
    }
}
