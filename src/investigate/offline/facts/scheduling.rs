//! Scheduling facts: the first Pending pod with no node, and what keeps it off each node.

use super::*;

/// The first Pending pod with no node, and what keeps it off every node.
pub(super) fn unschedulable(ev: &Evidence, pods: &[PodFacts]) -> Option<Unschedulable> {
    let (observed, p) = ev.pods.iter().zip(pods).find(|(o, p)| {
        p.phase.as_deref() == Some("Pending") && p.status == "Pending" && o.observed.node.is_none()
    })?;
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
    let nodes: Vec<NodeFacts> = ev.nodes.iter().map(NodeFacts::of).collect();
    let mut by_blocker: BTreeMap<Blocker, Vec<String>> = BTreeMap::new();
    for n in &nodes {
        let mut blockers = Vec::new();
        if n.cordoned {
            blockers.push(Blocker::Cordoned);
        }
        if n.not_ready {
            blockers.push(Blocker::NotReady);
        }
        for t in &n.taints {
            if t.effect == "PreferNoSchedule" {
                continue;
            }
            let tolerated = spec.tolerates(&t.key, &t.value, &t.effect);
            // The node lifecycle taints come with the NotReady/cordon blockers above.
            if !tolerated
                && !(t.key.starts_with("node.kubernetes.io/") && (n.not_ready || n.cordoned))
            {
                blockers.push(Blocker::Taint {
                    key: t.key.clone(),
                    value: t.value.clone(),
                    effect: t.effect.clone(),
                });
            }
        }
        for (k, v) in spec.selector_misses(&n.labels) {
            blockers.push(Blocker::Selector {
                key: k.clone(),
                value: v.clone(),
            });
        }
        if !spec.affinity_admits(&n.labels) {
            blockers.push(Blocker::Affinity(spec.affinity_text()));
        }
        for (resource, (wanted, text)) in &requests {
            let Some(alloc) = n.allocatable.get(resource) else {
                continue;
            };
            if quantity::amount(resource, alloc).is_some_and(|a| a < *wanted) {
                blockers.push(Blocker::TooBig {
                    resource: resource.clone(),
                    requested: text.clone(),
                    allocatable: alloc.clone(),
                });
            }
        }
        let mut held: Vec<Blocker> = ev
            .port_holders
            .iter()
            .filter(|h| h.node == n.name)
            .map(|h| Blocker::HostPort {
                port: h.port,
                protocol: h.protocol.clone(),
                workload: h.workload.clone(),
            })
            .collect();
        held.sort();
        held.dedup();
        blockers.extend(held);
        for b in blockers {
            by_blocker.entry(b).or_default().push(n.name.clone());
        }
    }
    let mut blockers: Vec<(Blocker, Vec<String>)> = by_blocker.into_iter().collect();
    blockers.sort_by_key(|(_, nodes)| std::cmp::Reverse(nodes.len()));
    Some(Unschedulable {
        pod: p.name.clone(),
        message,
        taint,
        blockers,
        nodes_total: nodes.len(),
        requests: requests
            .into_iter()
            .map(|(k, (_, text))| (k, text))
            .collect(),
    })
}
