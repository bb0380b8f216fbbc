//! The rules asking the model's questions as the proofs ask them (issue 43, ADR 0034): each
//! test fails on the rules that answered the question their own way.

use serde_json::json;

use super::fixtures::{Incident, pod};
use super::tests_refused::to_a_human;
use crate::domain::{ActionType, InvestigationOutcome};

/// Issue 43: a drain meets `drain.capacity-elsewhere` before it is proposed, asked per node
/// (`findings::placement`): a pod of 1.5 CPU fits on no other node with 1 CPU left, however
/// many such nodes; with 1.5 left on one, the drain is proposed.
#[test]
fn a_node_whose_pods_fit_on_no_other_node_is_not_drained() {
    let ready = json!([{"type": "Ready", "status": "True"}]);
    let drain = |used: &str| {
        Incident::node("node-1", ready.clone(), &[])
            .node_flapped("node-1", 4, 5)
            .node_allocating("node-2", "2", "8Gi")
            .node_allocating("node-3", "2", "8Gi")
            .bound_on("node-1", "1500m")
            .bound_on("node-2", "1")
            .bound_on("node-3", used)
            .diagnosis()
    };
    let d = drain("500m");
    assert_eq!(
        d.proposal.as_ref().map(|p| p.action_type.as_str()),
        Some("CordonDrainNode"),
        "{:?}",
        d.human
    );
    to_a_human(
        &drain("1"),
        "NodeFlapping",
        "pod batch/batch-0 fits on no other node (node-2: only 1000m of 2 cpu left",
    );
}

/// Issue 43: the only replica of a singleton is the one pod that is not a record: an earlier pod
/// its node evicted, kept until garbage collection, does not make two.
#[test]
fn a_record_its_node_ended_does_not_hide_a_singleton_s_only_replica() {
    let evicted = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "sched-0", "namespace": "shop",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "name": "sched-7d9f8b6c5", "uid": "sched-7d9f8b6c5", "controller": true}]},
        "spec": {"containers": [{"name": "app", "image": "shop/app:1.0"}]},
        "status": {"phase": "Failed", "reason": "Evicted",
            "message": "The node was low on resource: memory. "}});
    let mode = |record: bool| {
        let i = Incident::deployment("sched").replicas(1).with(
            pod("sched-1")
                .crash_looping("Error", 1)
                .owned_by("sched-7d9f8b6c5")
                .volume("state", "/var/lib/sched", json!({"emptyDir": {}})),
        );
        let i = if record {
            i.with_raw_pod(evicted.clone())
        } else {
            i
        };
        let d = i
            .log(
                "sched-1",
                "FATAL: cannot acquire lock /var/lib/sched/sched.lock: held by pid=1",
            )
            .diagnosis();
        (d.mode, d.proposal.map(|p| p.action_type))
    };
    let alone = mode(false);
    assert_eq!(
        alone,
        ("StateKeptAcrossRestarts", Some(ActionType::DeletePod))
    );
    assert_eq!(mode(true), alone);
}

/// Issue 43: the rules ask `delete.node-not-at-fault`'s question before they propose replacing
/// a pod (`Replacement::node_not_at_fault`), of every pod on its node: a pod of another
/// workload failing there too while its sibling elsewhere serves makes the node the common
/// factor, and a replacement may land there again.
#[test]
fn a_pod_is_not_replaced_on_a_node_where_another_workload_s_pods_fail_too() {
    let api = |name: &str, node: &str| pod(name).owned_by("api-1").on(node);
    let failing = || api("api-3", "n1").crash_looping("Error", 2);
    let incident_unread = |price_fails: bool, unread: bool| {
        let price = pod("price-1").owned_by("price-1").on("n1");
        let price = if price_fails {
            price.crash_looping("Error", 2)
        } else {
            price
        };
        let i = Incident::deployment("api");
        let i = if unread {
            i.node_events_unread("n1")
        } else {
            i
        };
        i.node_allocating("n1", "4", "8Gi")
            .node_allocating("n2", "4", "8Gi")
            .with(api("api-1", "n2"))
            .with(api("api-2", "n2"))
            .with(failing())
            .in_cluster(api("api-1", "n2"))
            .in_cluster(api("api-2", "n2"))
            .in_cluster(failing())
            .in_cluster(price)
            .in_cluster(pod("price-2").owned_by("price-1").on("n2"))
            .diagnosis()
    };
    let incident = |price_fails: bool| incident_unread(price_fails, false);
    let d = incident(false);
    assert_eq!(d.mode, "LonePodFailure", "{}", d.summary);
    assert_eq!(
        d.proposal.map(|p| p.action_type),
        Some(ActionType::DeletePod),
        "{:?}",
        d.human
    );
    to_a_human(
        &incident(true),
        "LonePodFailure",
        "replacing pod api-3 repeats its failure",
    );
    // Its node's events not read (its failing siblings spread over more nodes than are
    // judged): nothing shows the node is not at fault, and the replacement waits for a human.
    to_a_human(
        &incident_unread(false, true),
        "LonePodFailure",
        "the events of node n1 were not read",
    );
}

/// Issue 43: a pod stuck terminating on a node whose kubelet is away
/// (`observed::Node::kubelet_away`, what `findings::cannot_finish_terminating` asks for the graph
/// and the drain) is not said to wait on finalizers it does not list.
#[test]
fn a_pod_stuck_terminating_on_a_node_that_is_gone_waits_on_the_node_not_on_finalizers() {
    let mut p = pod("db-1").on("node-1").terminating_for(30, "none").raw();
    p["metadata"]["finalizers"] = json!([]);
    let d = Incident::deployment("db")
        .node_not_ready("node-1")
        .with_raw_pod(p)
        .diagnosis();
    assert_eq!(d.mode, "TerminatingStuck", "{}", d.summary);
    assert!(
        d.human.as_deref().is_some_and(
            |h| h.contains("its node node-1 is NotReady") && h.contains("kubelet is not there")
        ),
        "{:?}",
        d.human
    );
    let d = Incident::deployment("db")
        .with(pod("db-1").terminating_for(30, "example.com/cleanup"))
        .diagnosis();
    assert!(
        d.human
            .as_deref()
            .is_some_and(|h| h.contains("waits on the finalizer(s) example.com/cleanup")),
        "{:?}",
        d.human
    );
}

/// Issue 43: the rules claim the problem gone only when every object the alert names shows its
/// desired state, as `resolved.alerted-objects-met` asks (`alerted_object_met`): a pod the alert
/// named, relabelled out of the Deployment and still not ready, keeps the problem open.
#[test]
fn a_problem_is_not_resolved_while_a_pod_the_alert_names_is_not_ready() {
    let resolved = |alerted: Option<bool>| {
        let i = Incident::deployment("api")
            .with(pod("api-1"))
            .with(pod("api-2"));
        let i = match alerted {
            Some(ready) => {
                let p = pod("api-x");
                i.alerted("Pod", if ready { p } else { p.not_ready_since(20) })
            }
            None => i,
        };
        i.diagnosis().outcome
    };
    assert_eq!(resolved(None), InvestigationOutcome::ProblemResolved);
    assert_eq!(resolved(Some(true)), InvestigationOutcome::ProblemResolved);
    assert_ne!(resolved(Some(false)), InvestigationOutcome::ProblemResolved);
}

/// A Deployment `name` at its autoscaler's maximum of 3 with CPU over target, kept one pod
/// per node by `apart` (on the Deployment) and `mark` (on each of its three pods, on
/// worker-0..2): with no node more, a higher maximum goes to a human saying `says`; with three
/// nodes more, it is proposed.
fn a_higher_maximum_needs_room(
    name: &str,
    apart: impl Fn(Incident) -> Incident,
    mark: impl Fn(&mut serde_json::Value),
    says: &str,
) {
    let raise = |spare: usize| {
        let mut i = apart(Incident::deployment(name).hpa_at_max(3, 140));
        for n in 0..3 + spare {
            i = i.node_allocating(&format!("worker-{n}"), "8", "16Gi");
        }
        for n in 0..3 {
            let mut raw = pod(&format!("{name}-{n}")).on(&format!("worker-{n}")).raw();
            mark(&mut raw);
            i = i.with_raw_pod(raw.clone()).in_cluster_raw(raw);
        }
        i.diagnosis()
    };
    to_a_human(&raise(0), "HPAMaxedOut", says);
    let d = raise(3);
    assert!(d.proposal.is_some(), "{:?}", d.human);
}

/// Issue 43: the rules ask the room a higher maximum needs as its proof asks it
/// (`findings::room_for_more`, `hpa.room-to-schedule`): pods binding a host port held on every
/// node cannot be placed, though none waits for a node yet; with three nodes more, they can.
#[test]
fn a_higher_maximum_is_proposed_only_with_room_for_its_host_ports() {
    a_higher_maximum_needs_room(
        "gw",
        |i| i.host_port(443),
        |raw| {
            raw["spec"]["containers"][0]["ports"] =
                json!([{"containerPort": 443, "hostPort": 443, "protocol": "TCP"}]);
        },
        "0 schedulable node(s) have them free",
    );
}

/// Issue 43: the room for more replicas heeds a required pod anti-affinity, on both sides
/// (`findings::room_for_more`): pods kept one per node, already on every node, leave no room
/// for a higher maximum; with three nodes more, there is.
#[test]
fn a_higher_maximum_is_proposed_only_with_room_beside_its_anti_affinity() {
    a_higher_maximum_needs_room(
        "quote",
        Incident::one_per_node,
        |raw| raw["metadata"]["labels"] = json!({"app": "quote"}),
        "keeps one per kubernetes.io/hostname among pods app=quote: 0 schedulable node(s) can take one more",
    );
}

/// Issue 43: with the pods of every namespace not read (the list refused), no room is judged
/// for pods kept one per node: a higher maximum goes to a human, as its proof, reading the same
/// list, would refuse it.
#[test]
fn a_higher_maximum_for_pods_kept_apart_needs_the_pods_of_every_namespace_read() {
    let mut i = Incident::deployment("quote")
        .hpa_at_max(3, 140)
        .one_per_node();
    for n in 0..6 {
        i = i.node_allocating(&format!("worker-{n}"), "8", "16Gi");
    }
    for n in 0..3 {
        let mut raw = pod(&format!("quote-{n}")).on(&format!("worker-{n}")).raw();
        raw["metadata"]["labels"] = json!({"app": "quote"});
        i = i.with_raw_pod(raw.clone()).in_cluster_raw(raw);
    }
    to_a_human(
        &i.cluster_unread().diagnosis(),
        "HPAMaxedOut",
        "the pods of every namespace were not read",
    );
}

/// Issue 43: a taint is proposed for removal only where the pending pod would then fit, its
/// required anti-affinity included, as `taint.only-blocker` asks it (`findings::repelled`):
/// the tainted node already runs a pod the pending one keeps one per node.
#[test]
fn a_taint_is_not_removed_for_a_pod_its_anti_affinity_keeps_off_that_node() {
    let apart = json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "api"}},
            "topologyKey": "kubernetes.io/hostname"}]}});
    let pending = |sibling_there: bool| {
        let mut raw = pod("api-abc-1").revision("abc").pending().raw();
        raw["metadata"]["labels"]["app"] = json!("api");
        raw["spec"]["affinity"] = apart.clone();
        let i = Incident::deployment("api")
            .with_raw_pod(raw.clone())
            .in_cluster_raw(raw)
            .tainted_node("pool-a", "maintenance", "kubectl-taint");
        let i = if sibling_there {
            let mut there = pod("api-abc-0").revision("abc").on("pool-a").raw();
            there["metadata"]["labels"]["app"] = json!("api");
            i.with_raw_pod(there.clone()).in_cluster_raw(there)
        } else {
            i
        };
        i.diagnosis()
    };
    assert_eq!(
        pending(false).proposal.map(|p| p.action_type),
        Some(ActionType::RemoveNodeTaint)
    );
    to_a_human(
        &pending(true),
        "PendingSchedulingConstraints",
        "but pod shop/api-abc-0 runs in its domain, which the pod's required anti-affinity (one per kubernetes.io/hostname among pods app=api) keeps away: removing the taint would not place it",
    );
    // The pods bound to the node not read (the list refused): not judged, and said so.
    let mut raw = pod("api-abc-1").revision("abc").pending().raw();
    raw["metadata"]["labels"]["app"] = json!("api");
    let unread = Incident::deployment("api")
        .with_raw_pod(raw)
        .tainted_node("pool-a", "maintenance", "kubectl-taint")
        .cluster_unread()
        .diagnosis();
    to_a_human(
        &unread,
        "PendingSchedulingConstraints",
        "but the pods bound to it were not read",
    );
}

/// Issue 43: the diagnosis of a pod that fits no node lists, per node, the pod its required
/// anti-affinity keeps away there (`findings::repelled`, as `placement` and the taint
/// removal's proof ask it), and a human is asked for a node or a relaxed term.
#[test]
fn a_pod_its_anti_affinity_keeps_off_every_node_names_who_is_there() {
    let apart = json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "api"}},
            "topologyKey": "kubernetes.io/hostname"}]}});
    let mut raw = pod("api-abc-2").revision("abc").pending().raw();
    raw["metadata"]["labels"]["app"] = json!("api");
    raw["spec"]["affinity"] = apart;
    let mut i = Incident::deployment("api")
        .with_raw_pod(raw.clone())
        .in_cluster_raw(raw)
        .node_allocating("n1", "4", "16Gi")
        .node_allocating("n2", "4", "16Gi");
    for (name, node) in [("api-abc-0", "n1"), ("api-abc-1", "n2")] {
        let mut there = pod(name).revision("abc").on(node).raw();
        there["metadata"]["labels"]["app"] = json!("api");
        i = i.with_raw_pod(there.clone()).in_cluster_raw(there);
    }
    let d = i.diagnosis();
    to_a_human(
        &d,
        "PendingSchedulingConstraints",
        "n2: pod shop/api-abc-1 runs in its domain, which the pod's required anti-affinity (one per kubernetes.io/hostname among pods app=api) keeps away",
    );
    let human = d.human.unwrap_or_default();
    assert!(
        human.contains("n1: pod shop/api-abc-0 runs in its domain")
            && human.contains("relaxes the required anti-affinity"),
        "{human}"
    );
}

/// Issue 43: before a memory limit is raised the rules ask whether the node ran short of memory
/// itself as `memory.killed-by-own-limit` asks it (`findings::node_took_memory`): from its own
/// events too, not only its MemoryPressure now. An eviction threshold met twenty minutes ago,
/// the pressure gone since: the kill may be the node's doing.
#[test]
fn a_limit_is_not_raised_on_a_node_that_ran_short_of_memory_lately() {
    let raise = |short: bool| {
        let i = Incident::deployment("api")
            .node_allocating("n1", "4", "16Gi")
            .with(pod("api-1").memory_limit("256Mi").oom_killed().on("n1"));
        let i = if short {
            i.node_warning(
                "n1",
                "EvictionThresholdMet",
                "Attempting to reclaim memory",
                20,
            )
        } else {
            i
        };
        i.diagnosis()
    };
    assert_eq!(
        raise(false).proposal.map(|p| p.action_type),
        Some(ActionType::IncreaseMemoryLimits)
    );
    let d = raise(true);
    assert!(d.proposal.is_none(), "{:?}", d.proposal);
    assert!(
        d.human
            .as_deref()
            .is_some_and(|h| h.contains("node n1 ran out of memory itself")),
        "{:?}",
        d.human
    );
}
