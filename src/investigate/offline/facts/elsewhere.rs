//! What the evidence read beyond the root, judged as the proofs judge it: the other objects
//! the alert names (`resolved.alerted-objects-met`), whether a failing pod's node is the common
//! factor of the failures (`delete.node-not-at-fault`), and where a drain's pods would go
//! (`drain.capacity-elsewhere`).

use std::collections::BTreeMap;

use super::super::evidence::Evidence;
use super::node_flaps;
use crate::cluster::observed;
use crate::prove::findings;

/// The objects the alert names besides the root that do not show their desired state, each
/// with how ([`findings::resolved::alerted_object_met`]), judged on what the evidence read.
pub(super) fn alerted_unmet(ev: &Evidence) -> Vec<String> {
    let Some(target) = ev.context.as_ref().map(|c| &c.root_owner) else {
        return vec![];
    };
    // The target's own state and pods, as the proof reads them: a workload's; for another
    // root (an autoscaler, a budget) none, as the proof reads no pods for it.
    let own = ev
        .workload
        .as_ref()
        .filter(|w| w.kind == target.kind && w.name == target.name);
    let target_state = own.and_then(|w| findings::resolved::desired_state(&w.raw));
    let pods: Vec<observed::Pod> = match own {
        Some(_) => ev.pods.iter().map(|p| p.observed.clone()).collect(),
        None => vec![],
    };
    ev.alerted
        .iter()
        .filter_map(|(t, o)| {
            findings::resolved::alerted_object_met(
                t,
                o,
                target,
                target_state.as_ref(),
                &pods,
                &ev.events,
                ev.now,
            )
        })
        .filter(|(met, _)| !met)
        .map(|(_, line)| line)
        .collect()
}

/// The root's failing pods whose node is the common factor of the failures
/// ([`findings::Replacement::node_not_at_fault`]), judged on the pods the evidence read in
/// every namespace. When it did not read them, no failing pod's node is judged free of fault.
pub(super) fn node_at_fault(ev: &Evidence) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    let replicas = ev.workload.as_ref().and_then(|w| w.replicas);
    for p in ev.pods.iter().filter(|p| p.failing()) {
        let Some(name) = p.observed.node.as_deref() else {
            continue;
        };
        // Its node's readiness flaps were not read: nothing shows it is not at fault.
        if ev.node_events_unread.iter().any(|n| n == name) {
            out.insert(
                p.name().to_owned(),
                vec![format!(
                    "the events of node {name} were not read (the pods fail on more nodes than are judged): whether the node is at fault is not known"
                )],
            );
            continue;
        }
        let Some(cluster) = ev.cluster_pods.as_deref() else {
            out.insert(
                p.name().to_owned(),
                vec![format!(
                    "the pods of every namespace were not read: whether node {name} is at fault is not known"
                )],
            );
            continue;
        };
        let replacement = findings::Replacement::of(
            &p.observed,
            ev.pods.iter().map(|p| &p.observed),
            replicas,
            None,
        );
        let on_node: Vec<observed::Pod> = cluster
            .iter()
            .filter(|q| q.node.as_deref() == Some(name))
            .cloned()
            .collect();
        let node = ev.nodes.iter().find(|n| n.name == name);
        let flaps = node_flaps(ev, name);
        if let Err(lines) = replacement.node_not_at_fault(node, flaps.as_deref(), &on_node, cluster)
        {
            out.insert(p.name().to_owned(), lines);
        }
    }
    out
}

/// For each node a drain may be proposed for (the root node, the nodes the root's pods fail
/// on: the rules' and the graph's candidates), when the evidence read the cluster's pods, the
/// pods a drain of it would leave nowhere to go ([`drain_nowhere`]); empty when they all fit.
pub(super) fn drains_nowhere(
    ev: &Evidence,
    root_node: Option<&str>,
) -> BTreeMap<String, Vec<String>> {
    let Some(cluster) = ev.cluster_pods.as_deref() else {
        return BTreeMap::new();
    };
    let mut nodes: Vec<&str> = ev
        .pods
        .iter()
        .filter(|p| p.failing())
        .filter_map(|p| p.observed.node.as_deref())
        .chain(root_node)
        .collect();
    nodes.sort_unstable();
    nodes.dedup();
    nodes
        .into_iter()
        .map(|n| (n.to_owned(), drain_nowhere(ev, cluster, n)))
        .collect()
}

/// The pods on node `node` a drain would move ([`observed::Pod::drain_moves`]) that fit on no
/// other node beside the pods bound there ([`findings::placement`]), from the pods the evidence
/// read in every namespace (`cluster`).
fn drain_nowhere(ev: &Evidence, cluster: &[observed::Pod], node: &str) -> Vec<String> {
    let moved: Vec<&observed::Pod> = cluster
        .iter()
        .filter(|p| p.node.as_deref() == Some(node) && p.drain_moves())
        .collect();
    let others: Vec<&observed::Node> = ev.nodes.iter().filter(|n| n.name != node).collect();
    findings::placement(&moved, &others, cluster)
        .err()
        .unwrap_or_default()
}

/// A container killed for memory: its name, its pod's node, when.
type Kill<'a> = (
    &'a str,
    Option<&'a str>,
    Option<chrono::DateTime<chrono::Utc>>,
);

/// Per container of the root's pods, why a node it was OOM-killed on lately (else one its pods
/// run on: [`findings::memory_nodes`]) ran short of memory itself, if one did
/// ([`findings::node_took_memory`], as `memory.killed-by-own-limit` asks it): its
/// MemoryPressure, its own events (an eviction threshold met lately, the kernel's kills at the
/// moment of the container's beyond the containers that hit their own limits) and the pods on
/// it. A node whose events were not read is not judged free of it.
pub(super) fn memory_short(ev: &Evidence) -> BTreeMap<String, String> {
    let kills: Vec<Kill> = ev
        .pods
        .iter()
        .flat_map(|p| {
            p.observed
                .recent_memory_kills(&ev.events, ev.now)
                .into_iter()
                .map(move |(c, t)| (c.name.as_str(), p.observed.node.as_deref(), t))
        })
        .collect();
    // Every container a raise may be proposed for: one killed lately is asked about the nodes
    // it was killed on, another (a predicted exhaustion) about its pods' nodes.
    let mut containers: Vec<&str> = ev
        .pods
        .iter()
        .flat_map(|p| p.observed.containers.iter().map(|c| c.name.as_str()))
        .collect();
    containers.sort_unstable();
    containers.dedup();
    let mut out = BTreeMap::new();
    for container in containers {
        let this: Vec<_> = kills.iter().filter(|(c, _, _)| *c == container).collect();
        let nodes = findings::memory_nodes(
            this.iter().filter_map(|(_, n, _)| *n),
            ev.pods.iter().filter_map(|p| p.observed.node.as_deref()),
        );
        for name in &nodes {
            if ev.node_events_unread.iter().any(|n| n == name) {
                out.insert(
                    container.to_owned(),
                    format!("the events of node {name} were not read: whether it ran short of memory itself is not known"),
                );
                break;
            }
            let node = ev.nodes.iter().find(|n| n.name == *name);
            let events: Vec<observed::Event> = ev
                .events
                .iter()
                .filter(|e| e.kind == "Node" && e.name == *name)
                .cloned()
                .collect();
            let here: Vec<observed::Pod> = if events.iter().any(|e| e.reason == "SystemOOM") {
                ev.cluster_pods
                    .iter()
                    .flatten()
                    .filter(|p| p.node.as_deref() == Some(name.as_str()))
                    .cloned()
                    .collect()
            } else {
                vec![]
            };
            let moments: Vec<_> = this
                .iter()
                .filter(|(_, n, _)| *n == Some(name.as_str()))
                .filter_map(|(_, _, t)| *t)
                .collect();
            let took = findings::node_took_memory(node, name, &events, &here, &moments, ev.now);
            if let Some(why) = took.why.into_iter().next() {
                out.insert(container.to_owned(), why);
                break;
            }
        }
    }
    out
}
