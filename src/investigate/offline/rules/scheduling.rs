//! Pods that cannot be scheduled: short of resources, an untolerated taint, other constraints.

use super::*;

/// The cluster lacks capacity for what the pod requests.
pub(super) fn pending_insufficient_resources(f: &Facts) -> Option<Diagnosis> {
    let u = f.unschedulable.as_ref()?;
    let lower = u.message.to_ascii_lowercase();
    let too_big = u
        .blockers
        .iter()
        .find(|(b, _)| matches!(b, Blocker::TooBig { .. }));
    let insufficient = lower.contains("insufficient") || lower.contains("too many pods");
    if !insufficient && too_big.is_none() {
        return None;
    }
    // A node that only a taint keeps the pod off (one kubemedic may lift: not Kubernetes' own,
    // not a role) is the question, not the capacity of the others: the taint rule decides, and
    // the proof checks that the pod fits that node.
    if too_big.is_none() && kept_off_only_by_a_liftable_taint(f, u) {
        return None;
    }
    let requests: Vec<String> = u.requests.iter().map(|(k, v)| format!("{k} {v}")).collect();
    let why = match too_big {
        Some((
            Blocker::TooBig {
                resource,
                requested,
                ..
            },
            nodes,
        )) => format!(
            "it requests {requested} {resource}, more than {} of {} nodes can allocate at all ({})",
            nodes.len(),
            u.nodes_total,
            listed(
                &f.nodes
                    .iter()
                    .filter_map(|n| n
                        .allocatable
                        .get(resource)
                        .map(|a| format!("{}: {a}", n.name)))
                    .collect::<Vec<_>>()
            )
        ),
        _ => format!(
            "the scheduler reports {} (it requests {})",
            u.message.trim_end_matches('.'),
            if requests.is_empty() {
                "nothing".into()
            } else {
                requests.join(", ")
            }
        ),
    };
    let mut d = Diagnosis::new(
        "PendingInsufficientResources",
        format!("Pod {} cannot be scheduled: {why}", u.pod),
    );
    if !u.message.is_empty() {
        d.factors.push(format!("scheduler: {}", u.message));
    }
    d.confidence = 0.85;
    d.target = f.target.clone();
    d.human = Some(format!(
        "pod {} of {} does not fit: {why}; add nodes with that capacity or lower the requests",
        u.pod,
        f.target_text()
    ));
    Some(d)
}

/// Whether some node keeps the pod off with nothing but a taint kubemedic may lift (one
/// Kubernetes did not put there, [`Facts::taint_by_kubernetes`]).
fn kept_off_only_by_a_liftable_taint(
    f: &Facts,
    u: &crate::investigate::offline::facts::Unschedulable,
) -> bool {
    u.blockers.iter().any(|(b, nodes)| match b {
        Blocker::Taint { key, .. } => nodes.iter().any(|n| {
            !f.taint_by_kubernetes(n, key)
                && u.fits_untainted.contains(n)
                && u.blockers
                    .iter()
                    .filter(|(_, ns)| ns.contains(n))
                    .all(|(other, _)| taint_or_apart(other, key))
        }),
        _ => false,
    })
}

/// A taint of `key`, or a pod the pending pod's anti-affinity keeps away: what the taint
/// removal asks of a node beside the taint is the room left there, anti-affinity included
/// (`fits_untainted`, `repelled_untainted`).
fn taint_or_apart(b: &Blocker, key: &str) -> bool {
    match b {
        Blocker::Taint { key: k, .. } => k == key,
        Blocker::AntiAffinity { .. } => true,
        _ => false,
    }
}

/// The nodes carry a taint the pod does not tolerate: remove it, unless Kubernetes set it or
/// it reserves nodes on purpose.
pub(super) fn pending_untolerated_taint(f: &Facts) -> Option<Diagnosis> {
    let u = f.unschedulable.as_ref()?;
    // From the nodes and the pod's tolerations; else from the scheduler's message.
    let computed = u.blockers.iter().find_map(|(b, nodes)| match b {
        Blocker::Taint { key, value, effect } => Some((
            key.clone(),
            value.clone(),
            Some(effect.clone()),
            nodes.clone(),
        )),
        _ => None,
    });
    let (key, value, effect, nodes) = match computed {
        Some(c) => c,
        None => {
            let (k, v) = u.taint.clone()?;
            let nodes: Vec<String> = f
                .nodes
                .iter()
                .filter(|n| n.taints.iter().any(|t| t.key == k))
                .map(|n| n.name.clone())
                .collect();
            (k, v, None, nodes)
        }
    };
    let effect = effect
        .or_else(|| {
            f.nodes
                .iter()
                .flat_map(|n| &n.taints)
                .find(|t| t.key == key)
                .map(|t| t.effect.clone())
        })
        .unwrap_or_else(|| "NoSchedule".into());
    let taint = if value.is_empty() {
        format!("{key}:{effect}")
    } else {
        format!("{key}={value}:{effect}")
    };
    // Nodes the taint keeps the pod off for no other reason by what they allocate (a pod its
    // anti-affinity keeps away there is asked with the room: `fits_untainted`).
    let only_taint: Vec<&String> = nodes
        .iter()
        .filter(|n| {
            u.blockers
                .iter()
                .filter(|(_, ns)| ns.contains(n))
                .all(|(b, _)| taint_or_apart(b, &key))
        })
        .collect();
    // The taint decides only where it is all that keeps the pod off a node; otherwise the
    // other constraints say more (below).
    if only_taint.is_empty() && !u.blockers.is_empty() {
        return None;
    }
    let mut d = Diagnosis::new(
        "PendingSchedulingConstraints",
        format!(
            "Pod {} cannot be scheduled: {} of {} nodes carry the taint {taint}, which it does not tolerate ({})",
            u.pod,
            nodes.len(),
            u.nodes_total.max(nodes.len()),
            listed(&nodes)
        ),
    );
    if !u.message.is_empty() {
        d.factors.push(format!("scheduler: {}", u.message));
    }
    for (b, ns) in &u.blockers {
        d.factors.push(format!("{}: {b}", listed(ns)));
    }
    // Where Kubernetes put it (its key, or the kubelet or a controller wrote the taints) it
    // is no mistake to lift: the removal's proof refuses it there.
    let by_kubernetes = |n: &String| f.taint_by_kubernetes(n, &key);
    // And where the pod fits now but for the taint, beside the pods bound there (as the
    // removal's proof judges the node, `taint.only-blocker`).
    let lifted = only_taint.iter().copied().find(|n| !by_kubernetes(n));
    let liftable = only_taint
        .iter()
        .copied()
        .find(|n| !by_kubernetes(n) && u.fits_untainted.contains(n));
    let deliberate = liftable.is_none()
        && match (only_taint.is_empty(), nodes.is_empty()) {
            (false, _) => true,
            (true, false) => nodes.iter().all(by_kubernetes),
            (true, true) => observed::taint_key_of_kubernetes(&key),
        };
    match liftable {
        Some(node) => {
            d.confidence = 0.75;
            d.target = Some(Target::new("Node", (*node).clone(), None));
            // The key with every effect that keeps the pod off this node: one effect named, or
            // none (the write then removes them all) where the key blocks with several.
            let mut effects: Vec<&str> = u
                .blockers
                .iter()
                .filter(|(_, ns)| ns.contains(node))
                .filter_map(|(b, _)| match b {
                    Blocker::Taint { key: k, effect, .. } if *k == key => Some(effect.as_str()),
                    _ => None,
                })
                .collect();
            effects.sort_unstable();
            effects.dedup();
            let removed = match effects.as_slice() {
                [one] => Some(*one),
                [] => Some(effect.as_str()),
                _ => None,
            };
            d.proposal = proposal(
                ActionType::RemoveNodeTaint,
                ActionParams::remove_taint(&key, removed),
                "",
            );
        }
        _ => {
            d.confidence = 0.7;
            d.target = f.target.clone();
            let repelled = lifted.and_then(|n| Some((n, u.repelled_untainted.get(n)?)));
            d.human = Some(if let Some((node, why)) = repelled {
                format!(
                    "the taint {taint} is all that keeps pod {} off node {node} by what the node allocates, but {why}: removing the taint would not place it; a human relaxes the anti-affinity or adds a node",
                    u.pod
                )
            } else if let Some(node) = lifted.filter(|_| u.bound_unread) {
                format!(
                    "the taint {taint} is all that keeps pod {} off node {node} by what the node allocates, but the pods bound to it were not read: whether removing the taint would place it is not known; a human decides",
                    u.pod
                )
            } else if let Some(node) = lifted {
                format!(
                    "the taint {taint} is all that keeps pod {} off node {node} by what the node allocates, but the pods bound to it leave too little room for it now: removing the taint would not place it; a human adds capacity or frees room",
                    u.pod
                )
            } else if deliberate {
                format!(
                    "the taint {taint} on {} is set by Kubernetes or marks a node role; a human must decide whether pod {} should tolerate it",
                    listed(&nodes),
                    u.pod
                )
            } else {
                format!(
                    "the taint {taint} on {} is not the only thing keeping pod {} off those nodes; a human must decide",
                    listed(&nodes),
                    u.pod
                )
            });
        }
    }
    Some(d)
}

/// Selectors, affinity or cordoned nodes keep the pod off every node: say exactly which.
pub(super) fn pending_scheduling_constraints(f: &Facts) -> Option<Diagnosis> {
    let u = f.unschedulable.as_ref()?;
    let causes: Vec<String> = u
        .blockers
        .iter()
        .map(|(b, nodes)| {
            if nodes.len() == u.nodes_total && u.nodes_total > 1 {
                format!("all {} nodes: {b}", u.nodes_total)
            } else {
                format!("{}: {b}", listed(nodes))
            }
        })
        .collect();
    let why = if causes.is_empty() {
        u.message.clone()
    } else {
        causes.join("; ")
    };
    let mut d = Diagnosis::new(
        "PendingSchedulingConstraints",
        format!("Pod {} cannot be scheduled: {why}", u.pod),
    );
    if !u.message.is_empty() {
        d.factors.push(format!("scheduler: {}", u.message));
    }
    d.factors.extend(causes);
    d.confidence = 0.7;
    d.target = f.target.clone();
    let ports = u
        .blockers
        .iter()
        .any(|(b, _)| matches!(b, Blocker::HostPort { .. }));
    let apart = !u.blockers.is_empty()
        && u.blockers
            .iter()
            .all(|(b, _)| matches!(b, Blocker::AntiAffinity { .. }));
    d.human = Some(if ports {
        format!(
            "pod {} of {} fits no node ({why}); a human must decide which workload owns the host port, or move one of them to another port",
            u.pod,
            f.target_text()
        )
    } else if apart {
        format!(
            "pod {} of {} fits no node ({why}); a human adds a node in a domain none of those pods runs in, or relaxes the required anti-affinity (to preferred)",
            u.pod,
            f.target_text()
        )
    } else {
        format!(
            "pod {} of {} fits no node ({why}); a human must change its nodeSelector, affinity or tolerations, or label or uncordon a node",
            u.pod,
            f.target_text()
        )
    });
    Some(d)
}
