//! Scheduling facts: the first pod waiting for a node, and what keeps it off each node.

use std::collections::BTreeSet;

use super::*;
use crate::prove::findings::{self, Blocker, Room};

/// The first pod waiting for a node ([`observed::Pod::waiting_for_node`]), and what keeps it
/// off every node.
pub(super) fn unschedulable(ev: &Evidence, pods: &[PodFacts]) -> Option<Unschedulable> {
    let (observed, p) = ev
        .pods
        .iter()
        .zip(pods)
        .find(|(o, _)| o.observed.waiting_for_node().is_some())?;
    let message = p
        .warnings
        .iter()
        .find(|w| w.reason == "FailedScheduling")
        .map(|w| w.message.clone())
        .unwrap_or_default();
    if message.is_empty() && ev.nodes.is_empty() {
        return None;
    }
    let taint = UNTOLERATED_TAINT
        .as_ref()
        .and_then(|re| re.captures(&message))
        .and_then(|c| {
            let part = |i| c.get(i).map(|m| m.as_str().trim().to_owned());
            Some((part(1)?, part(2)?))
        });
    let spec = &observed.spec;
    let requests = spec.requests();
    let mut by_blocker: BTreeMap<Blocker, Vec<String>> = BTreeMap::new();
    let own = crate::cluster::obj::namespace(&observed.observed.raw).unwrap_or_default();
    let all_nodes: Vec<&observed::Node> = ev.nodes.iter().collect();
    for n in &ev.nodes {
        for b in findings::blockers(spec, n, Room::Allocatable, &ev.port_holders, None) {
            by_blocker.entry(b).or_default().push(n.name.clone());
        }
        // A pod its required anti-affinity keeps away, running in the node's domain (what
        // `placement` and the taint removal's proof ask of a node for it).
        if let Some(b) = ev
            .cluster_pods
            .as_deref()
            .and_then(|cluster| findings::repelled(spec, own, n, &all_nodes, cluster))
        {
            by_blocker.entry(b).or_default().push(n.name.clone());
        }
    }
    // Where every blocker is a taint of one key: would the pod fit now without it?
    let mut fits_untainted = Vec::new();
    let mut repelled_untainted = BTreeMap::new();
    for n in &ev.nodes {
        let on_it: Vec<&Blocker> = by_blocker
            .iter()
            .filter(|(_, nodes)| nodes.contains(&n.name))
            .map(|(b, _)| b)
            .collect();
        let keys: BTreeSet<&str> = on_it
            .iter()
            .filter_map(|b| match b {
                Blocker::Taint { key, .. } => Some(key.as_str()),
                _ => None,
            })
            .collect();
        let [key] = keys.into_iter().collect::<Vec<_>>()[..] else {
            continue;
        };
        // The room it has left is unknown without the pods bound there: not judged to fit.
        let Some(cluster) = ev.cluster_pods.as_deref() else {
            continue;
        };
        let bound: Vec<observed::Pod> = cluster
            .iter()
            .filter(|p| p.node.as_deref() == Some(n.name.as_str()))
            .cloned()
            .collect();
        let room = Room::Free(&bound);
        if findings::blockers(spec, n, room, &ev.port_holders, Some((key, None))).is_empty() {
            // The pod its anti-affinity keeps away there, found above.
            match on_it
                .iter()
                .find(|b| matches!(b, Blocker::AntiAffinity { .. }))
            {
                None => fits_untainted.push(n.name.clone()),
                Some(b) => {
                    repelled_untainted.insert(n.name.clone(), b.to_string());
                }
            }
        }
    }
    let mut blockers: Vec<(Blocker, Vec<String>)> = by_blocker.into_iter().collect();
    blockers.sort_by_key(|(_, nodes)| std::cmp::Reverse(nodes.len()));
    Some(Unschedulable {
        pod: p.name.clone(),
        message,
        taint,
        blockers,
        fits_untainted,
        repelled_untainted,
        bound_unread: ev.cluster_pods.is_none(),
        nodes_total: ev.nodes.len(),
        requests: requests
            .into_iter()
            .map(|(k, (_, text))| (k, text))
            .collect(),
    })
}
