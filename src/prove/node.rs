//! Obligations of the actions on a node: cordon and drain it, remove one of its taints.

use super::findings::{self, PortHolder, Room, node_at_fault};
use super::scene::{Read, Scene};
use crate::cluster::obj;
use crate::cluster::observed::{Node, Pdb, Pod, PodSpec, cluster_wide};
use crate::domain::Obligation;
use crate::domain::obligations as ob;

/// The drain's obligations, in their declared order, judged on the nodes, the pods on the node
/// and every pod, read once. A node that does not exist ends the proof.
pub(super) async fn drain(scene: &Scene) -> Read<Vec<Obligation>> {
    let nodes = scene.nodes().await?;
    let node = nodes.iter().find(|n| n.name == scene.target.name);
    // Nothing more is read for a node that ends the proof.
    let (on_node, all) = match node {
        Some(n) => {
            let on_node = scene.pods_on(&n.name).await?;
            let all = scene.list("Pod", None, &Default::default()).await?;
            (on_node, all.iter().map(|p| Pod::at(p, scene.now)).collect())
        }
        None => (vec![], vec![]),
    };
    let common = node_is_the_common_factor(scene, node, &on_node, &all).await?;
    let Some(node) = node else {
        return Ok(vec![common]);
    };
    let others: Vec<&Node> = nodes
        .iter()
        .filter(|n| n.name != node.name && findings::takes(&PodSpec::default(), n))
        .collect();
    let evicted: Vec<&Pod> = on_node.iter().filter(|p| p.drain_moves()).collect();
    Ok(vec![
        common,
        not_last_schedulable_node(&nodes, &others),
        not_cluster_wide(&nodes),
        pdbs_allow(scene, &node.name, &evicted).await?,
        capacity_elsewhere(&nodes, node, &all, &evicted),
        no_bare_pod(&evicted),
        no_stateful_pod_stuck(node, &on_node),
    ])
}

/// Whether every pod the drain evicts has a controller to make it again, as the deletion's
/// proof asks of the one pod it deletes (`delete.pod-owned-by-target`): an evicted pod no
/// controller owns is gone for good, which `kubectl drain` refuses without `--force`.
fn no_bare_pod(evicted: &[&Pod]) -> Obligation {
    let bare: Vec<String> = evicted
        .iter()
        .filter(|p| p.controller.is_none())
        .map(|p| format!("{}/{}", obj::namespace(&p.raw).unwrap_or_default(), p.name))
        .collect();
    ob::drain::NO_BARE_POD.check(
        bare.is_empty(),
        vec![if bare.is_empty() {
            format!(
                "each of the {} pod(s) to evict has a controller",
                evicted.len()
            )
        } else {
            format!(
                "{} pod(s) to evict have no controller to make them again: {}",
                bare.len(),
                bare.iter().take(5).cloned().collect::<Vec<_>>().join(", ")
            )
        }],
    )
}

/// Whether no StatefulSet pod on the node waits for its kubelet to finish terminating
/// ([`findings::cannot_finish_terminating`], which the dependency graph asks too): a drain
/// cannot move such a pod, and its replacement cannot start until a human has confirmed the
/// node is down and the pod is force-deleted.
fn no_stateful_pod_stuck(node: &Node, on_node: &[Pod]) -> Obligation {
    let stuck = findings::cannot_finish_terminating(node, on_node);
    let evidence = if stuck.is_empty() {
        format!(
            "no StatefulSet pod on node {} waits to finish terminating without its kubelet",
            node.name
        )
    } else {
        format!(
            "{} pod(s) on node {} were deleted and cannot finish terminating while its kubelet is unreachable (Ready {}): {}",
            stuck.len(),
            node.name,
            node.ready_status.as_deref().unwrap_or("unreported"),
            stuck
                .iter()
                .take(5)
                .map(|p| format!("{}/{}", obj::namespace(&p.raw).unwrap_or_default(), p.name))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    ob::drain::NO_STATEFUL_POD_STUCK.check(stuck.is_empty(), vec![evidence])
}

/// Whether the node (`None`: it does not exist) is the common factor of its pods' failures
/// ([`node_at_fault`]), from its state, its readiness flaps and the pods on it and elsewhere.
async fn node_is_the_common_factor(
    scene: &Scene,
    node: Option<&Node>,
    on_node: &[Pod],
    all: &[Pod],
) -> Read<Obligation> {
    let obligation = &ob::drain::NODE_IS_THE_COMMON_FACTOR;
    let Some(node) = node else {
        return Ok(obligation.fails(vec![format!("node {} does not exist", scene.target.name)]));
    };
    let flaps = scene.node_flaps(&node.name).await?;
    let (at_fault, ev) = node_at_fault(node, flaps.as_deref(), on_node, all);
    Ok(obligation.check(at_fault, ev))
}

/// Whether other nodes, ready and schedulable, can take the node's pods.
fn not_last_schedulable_node(nodes: &[Node], others: &[&Node]) -> Obligation {
    ob::drain::NOT_LAST_SCHEDULABLE_NODE.check(
        !others.is_empty(),
        vec![if others.is_empty() {
            format!("no other node of {} is ready and schedulable", nodes.len())
        } else {
            format!(
                "{} other node(s) ready and schedulable: {}",
                others.len(),
                others
                    .iter()
                    .map(|n| n.name.as_str())
                    .take(5)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }],
    )
}

/// Whether the problem is not cluster-wide, from the nodes' readiness. One node not ready is
/// that node's problem, however small the cluster (one of two): only several at once, a third
/// of the nodes or more, make it cluster-wide.
fn not_cluster_wide(nodes: &[Node]) -> Obligation {
    let not_ready = nodes.iter().filter(|n| !n.ready).count();
    ob::drain::NOT_CLUSTER_WIDE.check(
        !cluster_wide(not_ready, nodes.len()),
        vec![format!("{not_ready} of {} nodes not ready", nodes.len())],
    )
}

/// Whether the PodDisruptionBudgets of the pods to evict from node `name` allow their
/// eviction, from every budget of the cluster: none that guards one of them allows no
/// disruption.
async fn pdbs_allow(scene: &Scene, name: &str, evicted: &[&Pod]) -> Read<Obligation> {
    let pdbs = scene.list_optional("PodDisruptionBudget", None).await?;
    let mut blocking = Vec::new();
    for raw in &pdbs {
        let pdb = Pdb::parse(raw);
        let ns = obj::namespace(raw);
        let here = evicted
            .iter()
            .filter(|p| obj::namespace(&p.raw) == ns && pdb.selects(p))
            .count();
        if here == 0 {
            continue;
        }
        let allowed = pdb.disruptions_allowed;
        if allowed < 1 {
            blocking.push(format!(
                "PodDisruptionBudget {}/{} allows {allowed} disruption(s) and guards {here} pod(s) on {name}",
                ns.unwrap_or_default(),
                pdb.name
            ));
        }
    }
    Ok(ob::drain::PDBS_ALLOW.check(
        blocking.is_empty(),
        if blocking.is_empty() {
            vec![format!(
                "{} pod(s) to evict; no budget blocks them",
                evicted.len()
            )]
        } else {
            blocking
        },
    ))
}

/// Whether the other nodes have room for the pods the drain evicts, each placed on one node
/// as the scheduler would place it ([`findings::placement`]: its tolerations, selector and
/// affinity, the room left beside the pods bound there and those placed before it, its host
/// ports). Free room pooled across nodes is room no single pod can use.
fn capacity_elsewhere(nodes: &[Node], node: &Node, all: &[Pod], evicted: &[&Pod]) -> Obligation {
    let others: Vec<&Node> = nodes.iter().filter(|n| n.name != node.name).collect();
    let need = evicted.iter().fold((0u128, 0u128), |acc, p| {
        let spec = PodSpec::of_pod(&p.raw);
        (
            acc.0 + spec.total("requests", "cpu"),
            acc.1 + spec.total("requests", "memory"),
        )
    });
    let asked = format!(
        "the {} evicted pod(s) request {}m CPU and {} MiB",
        evicted.len(),
        need.0,
        need.1 / (1024 * 1024)
    );
    match findings::placement(evicted, &others, all) {
        Ok(placed) => ob::drain::CAPACITY_ELSEWHERE.holds(vec![format!(
            "{asked}; each fits on another node beside what runs there{}",
            if placed.is_empty() {
                String::new()
            } else {
                format!(
                    " ({})",
                    placed
                        .iter()
                        .take(5)
                        .map(|(n, count)| format!("{count} on {n}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        )]),
        Err(nowhere) => ob::drain::CAPACITY_ELSEWHERE.fails(
            std::iter::once(format!("{asked}; not every one fits on another node"))
                .chain(nowhere)
                .collect(),
        ),
    }
}

/// The taint removal's obligations, in their declared order, judged on the node, read once. A
/// taint the node does not carry ends the proof.
pub(super) async fn remove_taint(
    scene: &Scene,
    key: Option<&str>,
    effect: Option<&str>,
) -> Read<Vec<Obligation>> {
    let key = key.unwrap_or_default();
    let raw = scene.get("Node", None, &scene.target.name).await?;
    let node = Node::parse(&raw);
    let present = present(scene, &node, key, effect);
    let named = effect;
    let Some((_, value, effect)) = taint(&node, key, named) else {
        return Ok(vec![present]);
    };
    Ok(vec![
        present,
        not_set_by_kubernetes(scene, &node, key),
        only_blocker(scene, &node, (key, value, effect), named).await?,
    ])
}

/// The node's taint with `key` (and `effect`, when one is named).
fn taint<'n>(
    node: &'n Node,
    key: &str,
    effect: Option<&str>,
) -> Option<&'n (String, String, String)> {
    node.taints
        .iter()
        .find(|(k, _, e)| k == key && effect.is_none_or(|want| want == e))
}

/// Whether the node carries the taint, from its taints.
fn present(scene: &Scene, node: &Node, key: &str, effect: Option<&str>) -> Obligation {
    ob::taint::PRESENT.check(
        taint(node, key, effect).is_some(),
        vec![format!(
            "node {} taints: {}",
            scene.target.name,
            if node.taints.is_empty() {
                "none".into()
            } else {
                node.taints
                    .iter()
                    .map(|(k, v, e)| {
                        if v.is_empty() {
                            format!("{k}:{e}")
                        } else {
                            format!("{k}={v}:{e}")
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        )],
    )
}

/// Whether Kubernetes did not put the taint there ([`Node::taint_by_kubernetes`]: its key, and
/// who last wrote the node's taints).
fn not_set_by_kubernetes(scene: &Scene, node: &Node, key: &str) -> Obligation {
    let name = &scene.target.name;
    ob::taint::NOT_SET_BY_KUBERNETES.check(
        !node.taint_by_kubernetes(key),
        vec![match &node.taints_written_by {
            Some(w) => {
                format!("taint {key} on node {name}; the node's taints were last written by {w}")
            }
            None => format!("taint {key} on node {name}"),
        }],
    )
}

/// Whether the taint is the only thing keeping a waiting pod off the node, from the pods that
/// wait to be scheduled in the alert's namespace and the node's room, readiness, other taints
/// and labels: some pod that does not tolerate it would fit but for it. What the removal
/// lifts is what its write removes: the key with the `named` effect, or every effect of the
/// key when none is named; another effect of the key left on the node still keeps pods off.
async fn only_blocker(
    scene: &Scene,
    node: &Node,
    (key, value, effect): (&str, &str, &str),
    named: Option<&str>,
) -> Read<Obligation> {
    let name = scene.target.name.as_str();
    let ns = scene
        .signal
        .labels
        .get("namespace")
        .cloned()
        .or_else(|| scene.target.namespace.clone());
    let pods = scene
        .list("Pod", ns.as_deref(), &Default::default())
        .await?;
    let waiting: Vec<Pod> = pods
        .iter()
        .map(|p| Pod::at(p, scene.now))
        .filter(|p| p.waiting_for_node().is_some())
        .collect();
    // What keeps each pending pod off the node besides the taint: what the scheduling facts
    // ask of every node, here against what the node has left beside the pods bound to it.
    let bound = scene.pods_on(name).await?;
    // A pending pod kept apart from others by a required anti-affinity: the nodes and every
    // pod say whether the node's domain holds one it keeps away (`findings::repelled`).
    let apart = waiting
        .iter()
        .any(|p| !PodSpec::of_pod(&p.raw).anti_affinity.is_empty());
    let (nodes, everyone) = if apart {
        let all = scene.list("Pod", None, &Default::default()).await?;
        let all: Vec<Pod> = all.iter().map(|p| Pod::at(p, scene.now)).collect();
        (scene.nodes().await?, all)
    } else {
        (vec![], vec![])
    };
    let nodes: Vec<&Node> = nodes.iter().collect();
    let mut fits = Vec::new();
    let mut blocked = Vec::new();
    for p in &waiting {
        let spec = PodSpec::of_pod(&p.raw);
        if spec.tolerates(key, value, effect) {
            continue;
        }
        let holders = PortHolder::find(&bound, &p.host_ports(), &p.name);
        let mut others = findings::blockers(
            &spec,
            node,
            Room::Free(&bound),
            &holders,
            Some((key, named)),
        );
        let own = obj::namespace(&p.raw).unwrap_or_default();
        others.extend(findings::repelled(&spec, own, node, &nodes, &everyone));
        if others.is_empty() {
            fits.push(p.name.clone());
        } else {
            let others: Vec<String> = others.iter().map(ToString::to_string).collect();
            blocked.push(format!("pod {}: also {}", p.name, others.join("; ")));
        }
    }
    Ok(ob::taint::ONLY_BLOCKER.check(
        !fits.is_empty(),
        if !fits.is_empty() {
            vec![format!(
                "pending pod(s) {} fit node {name} but for the taint",
                fits.join(", ")
            )]
        } else if !blocked.is_empty() {
            blocked.into_iter().take(3).collect()
        } else {
            vec![format!("no pending pod waits for node {name}")]
        },
    ))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use chrono::{DateTime, Utc};
    use serde_json::{Value, json};

    use super::*;
    use crate::cluster::SnapshotCluster;
    use crate::domain::Target;
    use crate::prove::readiness_flaps;

    #[test]
    fn a_node_that_went_not_ready_three_times_in_the_last_hour_flaps() {
        let t = |s: &str| Some(s.parse::<DateTime<Utc>>().unwrap());
        let now: DateTime<Utc> = "2026-11-27T01:20:00Z".parse().unwrap();
        // The node controller and the kubelet each report the transitions: 9, not 18.
        let both = [
            (9, t("2026-11-26T23:24:00Z"), t("2026-11-27T01:12:00Z")),
            (9, t("2026-11-26T23:24:30Z"), t("2026-11-27T01:12:30Z")),
        ];
        let (count, first, last) = readiness_flaps(now, &both).unwrap();
        assert_eq!(count, 9);
        assert_eq!(first, t("2026-11-26T23:24:00Z").unwrap());
        assert_eq!(last, t("2026-11-27T01:12:30Z").unwrap());
        // Twice is a blip; nine times over an hour ago is over.
        assert!(readiness_flaps(now, &[(2, None, t("2026-11-27T01:12:00Z"))]).is_none());
        assert!(readiness_flaps(now, &[(9, None, t("2026-11-27T00:10:00Z"))]).is_none());
        assert!(readiness_flaps(now, &[]).is_none());
    }

    fn node(name: &str, ready: bool) -> Value {
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
                       "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}})
    }

    /// A pod of Deployment `app` on `node`, running ready or crash-looping.
    fn pod(app: &str, i: usize, node: &str, ready: bool) -> Value {
        let container = if ready {
            json!({"name": app, "ready": true, "restartCount": 0, "state": {"running": {}}})
        } else {
            json!({"name": app, "ready": false, "restartCount": 7,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"reason": "Error", "exitCode": 1}}})
        };
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("{app}-5d8f-{i}"), "namespace": "shop",
                "labels": {"app": app, "pod-template-hash": "5d8f"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("{app}-5d8f"), "uid": app, "controller": true}]},
            "spec": {"nodeName": node, "containers": [{"name": app, "image": format!("shop/{app}:1")}]},
            "status": {"phase": "Running",
                "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
                "containerStatuses": [container]}})
    }

    /// The drain obligation `id` for node `target` of a cluster of `objects`.
    async fn drain_obligation(objects: Vec<Value>, target: &str, id: &str) -> Obligation {
        let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
        let snap = SnapshotCluster::from_yaml(&list.to_string()).unwrap_or_else(|e| panic!("{e}"));
        let now: DateTime<Utc> = "2026-11-21T12:00:00Z".parse().unwrap_or_default();
        let signal = crate::prove::scene::test_signal("KubeNodeNotReady", now);
        let scene = Scene::new(
            Arc::new(snap),
            Target::new("Node", target, None),
            now,
            signal,
        );
        let obligations = drain(&scene).await.unwrap_or_else(|e| panic!("{e:?}"));
        obligations
            .into_iter()
            .find(|o| o.id == id)
            .unwrap_or_else(|| panic!("no obligation {id}"))
    }

    /// A node tainted `maintenance` with NoSchedule and NoExecute, a pod of `shop` pending that
    /// tolerates neither: removing only NoSchedule leaves NoExecute keeping it off, so the taint
    /// named is not the only blocker; removing the key (every effect) is, as its write does.
    #[tokio::test]
    async fn a_removal_lifts_only_the_effect_its_write_removes() {
        let mut tainted = node("pool-a", true);
        tainted["spec"] = json!({"taints": [
            {"key": "maintenance", "effect": "NoSchedule"},
            {"key": "maintenance", "effect": "NoExecute"}]});
        let pending = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "api-1", "namespace": "shop"},
            "spec": {"containers": [{"name": "api", "image": "shop/api:1"}]},
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled",
                "status": "False", "reason": "Unschedulable",
                "message": "0/1 nodes are available: 1 node(s) had untolerated taint {maintenance: }."}]}});
        let list = json!({"apiVersion": "v1", "kind": "List", "items": [tainted, pending]});
        let snap = SnapshotCluster::from_yaml(&list.to_string()).unwrap_or_else(|e| panic!("{e}"));
        let now: DateTime<Utc> = "2026-11-21T12:00:00Z".parse().unwrap_or_default();
        let scene = Scene::new(
            Arc::new(snap),
            Target::new("Node", "pool-a", None),
            now,
            crate::prove::scene::test_signal("KubePodNotScheduled", now),
        );
        let only = |effect: Option<&'static str>| {
            let scene = &scene;
            async move {
                remove_taint(scene, Some("maintenance"), effect)
                    .await
                    .unwrap_or_else(|e| panic!("{e:?}"))
                    .into_iter()
                    .find(|o| o.id == "taint.only-blocker")
                    .unwrap_or_else(|| panic!("no taint.only-blocker"))
            }
        };
        let one = only(Some("NoSchedule")).await;
        assert!(!one.holds(), "{one:?}");
        assert!(
            one.evidence.iter().any(|e| e.contains("NoExecute")),
            "{one:?}"
        );
        let all = only(None).await;
        assert!(all.holds(), "{all:?}");
    }

    /// One crash-looping pod on a Ready node, its siblings ready elsewhere: the pod may carry its
    /// own fault (a corrupt cache); deleting it is the fix, not draining the node.
    #[tokio::test]
    async fn one_failing_pod_does_not_make_a_ready_node_the_common_factor() {
        let o = drain_obligation(
            vec![
                node("worker-1", true),
                node("worker-2", true),
                pod("render", 0, "worker-1", true),
                pod("render", 1, "worker-1", true),
                pod("render", 2, "worker-2", false),
            ],
            "worker-2",
            "drain.node-is-the-common-factor",
        )
        .await;
        assert!(!o.holds(), "{o:?}");
        assert!(
            o.evidence
                .iter()
                .any(|e| e.contains("only one pod fails here")),
            "{o:?}"
        );
    }

    /// Pods of two workloads fail on the node while each runs healthy elsewhere: the node is
    /// what they share.
    #[tokio::test]
    async fn pods_of_two_workloads_failing_only_on_a_ready_node_make_it_the_common_factor() {
        let o = drain_obligation(
            vec![
                node("worker-1", true),
                node("worker-2", true),
                pod("render", 0, "worker-1", true),
                pod("render", 1, "worker-2", false),
                pod("cart", 0, "worker-1", true),
                pod("cart", 1, "worker-2", false),
            ],
            "worker-2",
            "drain.node-is-the-common-factor",
        )
        .await;
        assert!(o.holds(), "{o:?}");
    }

    /// One node not ready is not a cluster-wide problem, even when it is one of two; two of
    /// three are.
    #[tokio::test]
    async fn one_node_not_ready_of_two_is_not_cluster_wide_but_two_of_three_are() {
        let id = "drain.not-cluster-wide";
        let one_of_two = drain_obligation(
            vec![node("worker-1", false), node("worker-2", true)],
            "worker-1",
            id,
        )
        .await;
        assert!(one_of_two.holds(), "{one_of_two:?}");
        let two_of_three = drain_obligation(
            vec![
                node("worker-1", false),
                node("worker-2", false),
                node("worker-3", true),
            ],
            "worker-1",
            id,
        )
        .await;
        assert!(!two_of_three.holds(), "{two_of_three:?}");
    }

    /// Issue 43: the drain's proof judges budgets on the pods the drain write evicts
    /// (`Pod::drain_evicts`). A pod already being deleted is not evicted, so a budget that
    /// allows no disruption because of it does not refuse the drain; the same budget over a
    /// pod that still runs there does.
    #[tokio::test]
    async fn a_budget_guards_only_the_pods_the_drain_evicts() {
        let id = "drain.pdbs-allow";
        let pdb = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "db", "namespace": "shop"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "db"}}},
            "status": {"disruptionsAllowed": 0, "currentHealthy": 2, "desiredHealthy": 2, "expectedPods": 3}});
        let mut terminating = pod("db", 0, "worker-2", true);
        terminating["metadata"]["deletionTimestamp"] = json!("2026-11-21T11:50:00Z");
        terminating["metadata"]["finalizers"] = json!(["example.com/backup"]);
        let cluster = |db_pod: Value| {
            vec![
                node("worker-1", true),
                node("worker-2", true),
                pdb.clone(),
                db_pod,
                pod("db", 1, "worker-1", true),
                pod("db", 2, "worker-1", true),
            ]
        };
        let o = drain_obligation(cluster(terminating), "worker-2", id).await;
        assert!(o.holds(), "{o:?}");
        let o = drain_obligation(cluster(pod("db", 0, "worker-2", true)), "worker-2", id).await;
        assert!(!o.holds(), "{o:?}");
    }

    /// Issue 43: a pod deleted on a node whose kubelet is gone cannot finish terminating, and
    /// the drain cannot move it: the drain's proof asks what the dependency graph asks
    /// (`findings::cannot_finish_terminating`). On a Ready node a pod being deleted is one its
    /// kubelet is stopping.
    #[tokio::test]
    async fn a_pod_that_cannot_finish_terminating_refuses_the_drain_of_a_dead_node() {
        let id = "drain.no-stateful-pod-stuck";
        let mut stuck = pod("zookeeper", 1, "worker-2", false);
        stuck["metadata"]["deletionTimestamp"] = json!("2026-11-21T11:45:00Z");
        stuck["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "zookeeper", "uid": "zk", "controller": true}]);
        // A Deployment's pod deleted there too: replaced elsewhere already, no reason to wait.
        let mut replaced = pod("web", 0, "worker-2", true);
        replaced["metadata"]["deletionTimestamp"] = json!("2026-11-21T11:45:00Z");
        let cluster = |worker_2_ready: bool| {
            vec![
                node("worker-1", true),
                node("worker-2", worker_2_ready),
                node("worker-3", true),
                stuck.clone(),
                replaced.clone(),
            ]
        };
        let o = drain_obligation(cluster(false), "worker-2", id).await;
        assert!(!o.holds(), "{o:?}");
        assert!(
            o.evidence
                .iter()
                .any(|e| e.contains("shop/zookeeper-5d8f-1")),
            "{o:?}"
        );
        let o = drain_obligation(cluster(true), "worker-2", id).await;
        assert!(o.holds(), "{o:?}");
        // Only the Deployment's pod waits there: the drain is not refused for it.
        let only_replaced = vec![
            node("worker-1", true),
            node("worker-2", false),
            replaced.clone(),
        ];
        let o = drain_obligation(only_replaced, "worker-2", id).await;
        assert!(o.holds(), "{o:?}");
    }

    /// Issue 43: a drain evicts only pods a controller makes again, as a deletion deletes only
    /// such a pod: a bare pod on the node refuses the drain.
    #[tokio::test]
    async fn a_bare_pod_on_the_node_refuses_the_drain() {
        let id = "drain.no-bare-pod";
        let mut bare = pod("debug", 0, "worker-2", true);
        bare["metadata"]
            .as_object_mut()
            .map(|m| m.remove("ownerReferences"));
        let cluster = |extra: Vec<Value>| {
            let mut objects = vec![
                node("worker-1", true),
                node("worker-2", false),
                pod("web", 0, "worker-2", true),
            ];
            objects.extend(extra);
            objects
        };
        let o = drain_obligation(cluster(vec![bare.clone()]), "worker-2", id).await;
        assert!(!o.holds(), "{o:?}");
        assert!(
            o.evidence.iter().any(|e| e.contains("shop/debug-5d8f-0")),
            "{o:?}"
        );
        let o = drain_obligation(cluster(vec![]), "worker-2", id).await;
        assert!(o.holds(), "{o:?}");
    }

    /// Issue 43: room elsewhere is asked per node ([`findings::placement`]): two other nodes
    /// with 1 CPU free each have 2 free in all, yet neither takes a pod that asks for 1.5. A pod
    /// of 1 CPU fits on either.
    #[tokio::test]
    async fn room_pooled_across_nodes_is_no_room_for_a_pod_bigger_than_each_part() {
        let id = "drain.capacity-elsewhere";
        let asking = |app: &str, i: usize, node: &str, cpu: &str| {
            let mut p = pod(app, i, node, true);
            p["spec"]["containers"][0]["resources"] = json!({"requests": {"cpu": cpu}});
            p
        };
        let cluster = |cpu: &str| {
            vec![
                node("worker-1", true),
                node("worker-2", true),
                node("worker-3", true),
                asking("db", 0, "worker-1", "3"),
                asking("db", 1, "worker-3", "3"),
                asking("api", 0, "worker-2", cpu),
            ]
        };
        let o = drain_obligation(cluster("1500m"), "worker-2", id).await;
        assert!(!o.holds(), "{o:?}");
        assert!(
            o.evidence.iter().any(|e| e.starts_with(
                "pod shop/api-5d8f-0 fits on no other node (worker-1: only 1000m of 4 cpu left"
            )),
            "{o:?}"
        );
        let o = drain_obligation(cluster("1"), "worker-2", id).await;
        assert!(o.holds(), "{o:?}");
    }
}
