//! Scheduling facts: the first Pending pod with no node, and what keeps it off each node.

use super::*;

/// The first Pending pod with no node, and what keeps it off every node.
pub(super) fn unschedulable(ev: &Evidence, pods: &[PodFacts]) -> Option<Unschedulable> {
    let (observed, p) = ev.pods.iter().zip(pods).find(|(o, p)| {
        p.phase.as_deref() == Some("Pending")
            && p.status == "Pending"
            && o.pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_ref())
                .is_none()
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
    let spec = observed.pod.spec.as_ref();
    let mut requests: BTreeMap<String, u128> = BTreeMap::new();
    let mut request_text: BTreeMap<String, String> = BTreeMap::new();
    for c in spec.map(|s| s.containers.as_slice()).unwrap_or(&[]) {
        for (k, q) in c
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .into_iter()
            .flatten()
        {
            if let Some(v) = quantity::amount(k, &q.0) {
                *requests.entry(k.clone()).or_default() += v;
                request_text
                    .entry(k.clone())
                    .and_modify(|t| *t = quantity::format_amount(k, requests[k]))
                    .or_insert_with(|| q.0.clone());
            }
        }
    }
    let tolerations = spec.and_then(|s| s.tolerations.clone()).unwrap_or_default();
    let node_selector = spec
        .and_then(|s| s.node_selector.clone())
        .unwrap_or_default();
    let required_terms: Vec<serde_json::Value> = spec
        .and_then(|s| s.affinity.as_ref()?.node_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|r| {
            r.node_selector_terms
                .iter()
                .filter_map(|t| serde_json::to_value(t).ok())
                .collect()
        })
        .unwrap_or_default();
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
            let tolerated = tolerations.iter().any(|tol| {
                let key_ok = match tol.key.as_deref() {
                    None | Some("") => tol.operator.as_deref() == Some("Exists"),
                    Some(k) => k == t.key,
                };
                let value_ok = tol.operator.as_deref() == Some("Exists")
                    || tol.value.as_deref().unwrap_or("") == t.value;
                let effect_ok = tol
                    .effect
                    .as_deref()
                    .is_none_or(|e| e.is_empty() || e == t.effect);
                key_ok && value_ok && effect_ok
            });
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
        for (k, v) in &node_selector {
            if n.labels.get(k) != Some(v) {
                blockers.push(Blocker::Selector {
                    key: k.clone(),
                    value: v.clone(),
                });
            }
        }
        if !required_terms.is_empty()
            && !required_terms.iter().any(|t| {
                crate::cluster::selector::Selector::from_object(t)
                    .is_some_and(|s| s.matches_map(&n.labels))
            })
        {
            let text: Vec<String> = required_terms
                .iter()
                .flat_map(|t| obj_array(t, "matchExpressions"))
                .map(|e| {
                    format!(
                        "{} {} {}",
                        e.get("key")
                            .and_then(serde_json::Value::as_str)
                            .unwrap_or("?"),
                        e.get("operator")
                            .and_then(serde_json::Value::as_str)
                            .unwrap_or("?"),
                        e.get("values")
                            .and_then(serde_json::Value::as_array)
                            .map(|v| v
                                .iter()
                                .filter_map(serde_json::Value::as_str)
                                .collect::<Vec<_>>()
                                .join(","))
                            .unwrap_or_default()
                    )
                    .trim()
                    .to_owned()
                })
                .collect();
            blockers.push(Blocker::Affinity(text.join("; ")));
        }
        for (resource, wanted) in &requests {
            let Some(alloc) = n.allocatable.get(resource) else {
                continue;
            };
            if quantity::amount(resource, alloc).is_some_and(|a| a < *wanted) {
                blockers.push(Blocker::TooBig {
                    resource: resource.clone(),
                    requested: request_text.get(resource).cloned().unwrap_or_default(),
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
        requests: request_text,
    })
}
