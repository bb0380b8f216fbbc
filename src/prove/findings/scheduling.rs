//! What keeps a pending pod off a node. The scheduling facts ask it of every node (what can
//! never fit anywhere: [`Room::Allocatable`]), and of a node only a taint keeps it off what the
//! taint removal's proof asks of the node it would untaint (what fits there now but for the
//! taint: [`Room::Free`]). One list of reasons, in one order, for both.

use std::collections::BTreeMap;

use crate::cluster::obj;
use crate::cluster::observed::{Node, Pod, PodSpec};
use crate::cluster::quantity;

/// One reason a pod cannot go to a node.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Blocker {
    Taint {
        key: String,
        value: String,
        effect: String,
    },
    /// The pod's nodeSelector wants `key=value`; the node has `has` (or not the label).
    Selector {
        key: String,
        value: String,
    },
    /// A required node affinity term the node does not satisfy.
    Affinity(String),
    /// The pod requests more of `resource` than the node can allocate at all, or (`left`)
    /// than it has left beside the pods bound to it.
    TooBig {
        resource: String,
        requested: String,
        allocatable: String,
        left: Option<String>,
    },
    Cordoned,
    NotReady,
    /// A pod that one of the pod's required anti-affinity terms (`term`, as a line) keeps out
    /// of the node's topology domain runs there already.
    AntiAffinity {
        term: String,
        pod: String,
    },
    /// A host port the pod binds, which a pod of `workload` already binds on the node.
    HostPort {
        port: i64,
        protocol: String,
        workload: String,
    },
}

impl std::fmt::Display for Blocker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Blocker::Taint { key, value, effect } if value.is_empty() => {
                write!(
                    f,
                    "the taint {key}:{effect}, which the pod does not tolerate"
                )
            }
            Blocker::Taint { key, value, effect } => {
                write!(
                    f,
                    "the taint {key}={value}:{effect}, which the pod does not tolerate"
                )
            }
            Blocker::Selector { key, value } => {
                write!(
                    f,
                    "no label {key}={value}, which the pod's nodeSelector requires"
                )
            }
            Blocker::Affinity(term) => {
                write!(f, "no match for the pod's required node affinity ({term})")
            }
            Blocker::TooBig {
                resource,
                requested,
                allocatable,
                left: None,
            } => write!(
                f,
                "only {allocatable} {resource} allocatable, less than the {requested} the pod requests"
            ),
            Blocker::TooBig {
                resource,
                requested,
                allocatable,
                left: Some(left),
            } => write!(
                f,
                "only {left} of {allocatable} {resource} left, less than the {requested} the pod requests"
            ),
            Blocker::HostPort {
                port,
                protocol,
                workload,
            } => write!(
                f,
                "hostPort {port}/{protocol}, which the pod binds, is already bound there by a pod of {workload}"
            ),
            Blocker::AntiAffinity { term, pod } => write!(
                f,
                "pod {pod} runs in its domain, which the pod's required anti-affinity ({term}) keeps away"
            ),
            Blocker::Cordoned => write!(f, "cordoned (unschedulable)"),
            Blocker::NotReady => write!(f, "NotReady"),
        }
    }
}

/// A pod on a node that binds a host port.
#[derive(Debug, Clone)]
pub struct PortHolder {
    pub node: String,
    pub port: i64,
    pub protocol: String,
    /// Its workload as `namespace/Kind/name` (a ReplicaSet's Deployment), or the pod itself.
    pub workload: String,
}

impl PortHolder {
    /// The holders among `pods` of any of `wanted`, except `pending` itself.
    pub fn find(pods: &[Pod], wanted: &[(i64, String)], pending: &str) -> Vec<Self> {
        let mut out = Vec::new();
        for p in pods {
            let Some(node) = p.node.clone() else {
                continue;
            };
            let ended = p.ended();
            if p.name == pending || ended {
                continue;
            }
            for (port, protocol) in p.host_ports() {
                if wanted.contains(&(port, protocol.clone())) {
                    out.push(Self {
                        node: node.clone(),
                        port,
                        protocol,
                        workload: workload_of(p),
                    });
                }
            }
        }
        out
    }
}

/// A pod's workload as `namespace/Kind/name`: its controller, a ReplicaSet named for its
/// Deployment (the pod-template-hash suffix dropped); the pod itself without one.
fn workload_of(p: &Pod) -> String {
    let (kind, name) = p.workload();
    format!(
        "{}/{kind}/{name}",
        obj::namespace(&p.raw).unwrap_or_default()
    )
}

/// Whether a pod of `spec` may go on `node`: nothing among [`blockers`] keeps it off, room
/// counted against the node's allocatable. `PodSpec::default()` asks it of a pod that tolerates
/// nothing and asks for nothing (does the node take ordinary pods at all).
pub fn takes(spec: &PodSpec, node: &Node) -> bool {
    blockers(spec, node, Room::Allocatable, &[], None).is_empty()
}

/// What a node has for a pod's requests.
pub enum Room<'a> {
    /// Its allocatable: a pod asking more can never go there.
    Allocatable,
    /// Its allocatable less the requests of the pods bound to it (those not ended).
    Free(&'a [Pod]),
}

/// Why a pod with `spec` cannot go to `node`, in a fixed order: cordoned, not ready, each taint
/// it does not tolerate (not `PreferNoSchedule`, not the taint `except` names as a removal
/// names it: its key and effect, or every effect of its key without one; and not a
/// `node.kubernetes.io/` taint of a node already not ready or cordoned: those come with it),
/// each `nodeSelector` label the node lacks, its required node affinity, each resource it
/// requests beyond the `room`, and each host port it binds that a pod among `holders` binds on
/// the node already.
pub fn blockers(
    spec: &PodSpec,
    node: &Node,
    room: Room,
    holders: &[PortHolder],
    except: Option<(&str, Option<&str>)>,
) -> Vec<Blocker> {
    let mut out = Vec::new();
    // A node that reports no Ready condition (yet) takes no pods either.
    let not_ready = !node.ready;
    if node.unschedulable {
        out.push(Blocker::Cordoned);
    }
    if not_ready {
        out.push(Blocker::NotReady);
    }
    for (key, value, effect) in &node.taints {
        let removed = except.is_some_and(|(k, e)| k == key && e.is_none_or(|e| e == effect));
        if effect == "PreferNoSchedule" || removed {
            continue;
        }
        // The node lifecycle taints come with the NotReady/cordon blockers above.
        if !spec.tolerates(key, value, effect)
            && !(key.starts_with("node.kubernetes.io/") && (not_ready || node.unschedulable))
        {
            out.push(Blocker::Taint {
                key: key.clone(),
                value: value.clone(),
                effect: effect.clone(),
            });
        }
    }
    for (k, v) in spec.selector_misses(&node.labels) {
        out.push(Blocker::Selector {
            key: k.clone(),
            value: v.clone(),
        });
    }
    if !spec.affinity_admits(&node.labels) {
        out.push(Blocker::Affinity(spec.affinity_text()));
    }
    // A node that lists what it allocates and not this resource (an extended resource such as
    // a GPU) has none of it; one that lists nothing says nothing of its room.
    let lists = node.allocatable.as_object().is_some_and(|a| !a.is_empty());
    for (resource, (wanted, text)) in spec.requests() {
        let alloc = match obj::str_at(&node.allocatable, &[resource.as_str()]) {
            Some(alloc) => alloc,
            None if lists && wanted > 0 => "0",
            None => continue,
        };
        let Some(total) = quantity::amount(&resource, alloc) else {
            continue;
        };
        let left = match room {
            Room::Allocatable => None,
            Room::Free(bound) => {
                let used: u128 = bound
                    .iter()
                    .filter(|p| !p.ended())
                    .map(|p| PodSpec::of_pod(&p.raw).total("requests", &resource))
                    .sum();
                Some(total.saturating_sub(used))
            }
        };
        if left.unwrap_or(total) < wanted {
            out.push(Blocker::TooBig {
                left: left.map(|l| quantity::format_amount(&resource, l)),
                resource,
                requested: text,
                allocatable: alloc.to_owned(),
            });
        }
    }
    let mut held: Vec<Blocker> = holders
        .iter()
        .filter(|h| h.node == node.name)
        .map(|h| Blocker::HostPort {
            port: h.port,
            protocol: h.protocol.clone(),
            workload: h.workload.clone(),
        })
        .collect();
    held.sort();
    held.dedup();
    out.extend(held);
    out
}

/// The first of `pods` (not ended, bound to one of `nodes`) that a required anti-affinity term
/// of `spec` (a pod of namespace `own`) keeps out of `node`'s domain for the term: the nodes
/// sharing its value of the term's key (a node without that label is in no domain, as the
/// scheduler reads it). The terms of the pods already there are not asked: a doubt the
/// scheduler may still refuse on: no room is counted that a term of the pod itself excludes.
pub fn repelled<'p>(
    spec: &PodSpec,
    own: &str,
    node: &Node,
    nodes: &[&Node],
    pods: impl IntoIterator<Item = &'p Pod>,
) -> Option<Blocker> {
    if spec.anti_affinity.is_empty() {
        return None;
    }
    let value = |n: &Node, key: &str| n.labels.get(key).cloned();
    for p in pods {
        let Some(there) = p.node.as_deref() else {
            continue;
        };
        if p.ended() {
            continue;
        }
        let Some(there) = nodes.iter().find(|n| n.name == there) else {
            continue;
        };
        let ns = obj::namespace(&p.raw).unwrap_or_default();
        for term in &spec.anti_affinity {
            let domain = value(node, &term.topology_key);
            if domain.is_some()
                && domain == value(there, &term.topology_key)
                && term.selects(own, ns, Some(&p.labels))
            {
                return Some(Blocker::AntiAffinity {
                    term: term.text(),
                    pod: format!("{ns}/{}", p.name),
                });
            }
        }
    }
    None
}

/// Whether `extra` new pods from `template` (of namespace `own`) can be placed, with the
/// evidence, from the workload's `pods`, the `nodes` and, when the template binds host ports or
/// keeps pods apart by a required anti-affinity, every pod (`everywhere`, those on each node):
/// none of its pods waits for a node already, some node takes the template ([`takes`]), and
/// enough of those nodes, taken by name, are left one pod each: their host ports free (one pod
/// per node can bind one), no pod there its anti-affinity keeps away ([`repelled`]), the new
/// pods placed before it included. What `scale.schedulable` and `hpa.room-to-schedule` ask, and
/// the rules before they propose more replicas or a higher maximum.
pub fn room_for_more(
    template: &PodSpec,
    own: &str,
    pods: &[Pod],
    nodes: &[Node],
    everywhere: &[Pod],
    extra: i64,
) -> (bool, Vec<String>) {
    // A pod the scheduler refused, or one no scheduler has tried ([`Pod::unplaced_for`]).
    let unscheduled = pods.iter().find_map(|p| {
        let why = match (p.waiting_for_node(), p.unplaced_for) {
            (Some(why), _) => why.to_owned(),
            (None, Some(_)) => p.broken()?.line,
            (None, None) => return None,
        };
        Some((p, why))
    });
    let taking: Vec<&str> = nodes
        .iter()
        .filter(|n| takes(template, n))
        .map(|n| n.name.as_str())
        .collect();
    let ports = &template.host_ports;
    // At least one pod more: what a proposal that adds none would still have to place.
    let extra = extra.max(1);
    let mut ev = vec![match unscheduled {
        Some((p, ref why)) => format!("pod {} is already Pending: {why}", p.name),
        None => format!(
            "{} of {} nodes are ready and schedulable",
            taking.len(),
            nodes.len()
        ),
    }];
    let mut room = true;
    let apart = &template.anti_affinity;
    if !ports.is_empty() || !apart.is_empty() {
        let mut sorted: Vec<&Node> = nodes
            .iter()
            .filter(|n| taking.contains(&n.name.as_str()))
            .collect();
        sorted.sort_by(|a, b| a.name.cmp(&b.name));
        let all: Vec<&Node> = nodes.iter().collect();
        // The new pods, one per node that takes one, each kept apart from those before it.
        let mut placed: Vec<Pod> = Vec::new();
        for node in sorted {
            let held = everywhere.iter().any(|p| {
                p.node.as_deref() == Some(node.name.as_str())
                    && !p.ended()
                    && p.host_ports().iter().any(|hp| ports.contains(hp))
            });
            if held
                || repelled(template, own, node, &all, everywhere.iter().chain(&placed)).is_some()
            {
                continue;
            }
            placed.push(Pod {
                name: format!("(new pod on {})", node.name),
                node: Some(node.name.clone()),
                labels: template.labels.clone(),
                raw: serde_json::json!({"metadata": {"namespace": own}}),
                ..Pod::default()
            });
        }
        let free = placed.len();
        // One new pod per node (per domain) only where they keep each other off: a host port
        // they all bind, a term that selects their own labels. Kept off other pods only, any
        // number go to a node none of those runs on.
        let keeping_apart: Vec<_> = apart
            .iter()
            .filter(|t| t.selects(own, own, Some(&template.labels)))
            .collect();
        let one_each = !ports.is_empty() || !keeping_apart.is_empty();
        // A node without the label of any such term's key is in no domain of theirs, as the
        // scheduler reads it: it takes any number (a host port still takes one per node).
        let no_domain = ports.is_empty()
            && placed.iter().any(|p| {
                nodes.iter().any(|n| {
                    Some(n.name.as_str()) == p.node.as_deref()
                        && keeping_apart
                            .iter()
                            .all(|t| !n.labels.contains_key(&t.topology_key))
                })
            });
        let needed = if one_each && !no_domain {
            usize::try_from(extra).unwrap_or(usize::MAX)
        } else {
            1
        };
        room = free >= needed;
        let ports_text = ports
            .iter()
            .map(|(port, protocol)| format!("{port}/{protocol}"))
            .collect::<Vec<_>>()
            .join(", ");
        let apart_text = apart
            .iter()
            .map(|t| t.text())
            .collect::<Vec<_>>()
            .join(", ");
        ev.push(if apart.is_empty() {
            format!(
                "its pods bind host port(s) {ports_text}: {free} schedulable node(s) have them free, {needed} new pod(s) need one each"
            )
        } else if ports.is_empty() && (!one_each || no_domain) {
            format!(
                "its pods' required anti-affinity keeps {apart_text}: {free} schedulable node(s) run none of those pods{}, the new pods need one",
                if no_domain { " (one in no domain of the term, taking any number)" } else { "" }
            )
        } else if ports.is_empty() {
            format!(
                "its pods' required anti-affinity keeps {apart_text}: {free} schedulable node(s) can take one more, {needed} new pod(s) need one each"
            )
        } else {
            format!(
                "its pods bind host port(s) {ports_text} and their required anti-affinity keeps {apart_text}: {free} schedulable node(s) can take one more, {needed} new pod(s) need one each"
            )
        });
    }
    (unscheduled.is_none() && !taking.is_empty() && room, ev)
}

/// Whether `pods` can all go elsewhere, each on one of `nodes` beside the pods bound there
/// (`bound`, those not ended: [`Room::Free`]) and the pods placed before it: taken those fewest
/// nodes could take first, then the largest CPU request, each on the first node (by name) where
/// nothing among [`blockers`] keeps it off (its tolerations, node selector and affinity, the
/// room, its host ports). `Ok` counts the pods each node takes; `Err` names each pod that fits nowhere, with why on the first nodes. Room
/// is asked per node, as the scheduler places a pod: free room pooled across nodes is room no
/// pod can use. A greedy packing may miss one a cleverer packing finds: a doubt, never a proof.
pub fn placement(
    pods: &[&Pod],
    nodes: &[&Node],
    bound: &[Pod],
) -> Result<BTreeMap<String, usize>, Vec<String>> {
    // In a fixed order, whoever listed them (the tools sort nodes by their trouble).
    let mut nodes: Vec<&Node> = nodes.to_vec();
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    let mut on: BTreeMap<&str, Vec<Pod>> =
        nodes.iter().map(|n| (n.name.as_str(), vec![])).collect();
    for p in bound.iter().filter(|p| !p.ended()) {
        if let Some(here) = p.node.as_deref().and_then(|n| on.get_mut(n)) {
            here.push(p.clone());
        }
    }
    let mut order: Vec<(&Pod, PodSpec)> =
        pods.iter().map(|p| (*p, PodSpec::of_pod(&p.raw))).collect();
    // The pods fewest nodes could ever take first, then the largest: a pod that fits one node
    // only is not crowded out by one that fits anywhere.
    order.sort_by_cached_key(|(p, spec)| {
        (
            nodes
                .iter()
                .filter(|n| blockers(spec, n, Room::Allocatable, &[], None).is_empty())
                .count(),
            std::cmp::Reverse(spec.total("requests", "cpu")),
            std::cmp::Reverse(spec.total("requests", "memory")),
            obj::namespace(&p.raw).unwrap_or_default().to_owned(),
            p.name.clone(),
        )
    });
    let mut placed: BTreeMap<String, usize> = BTreeMap::new();
    let mut nowhere = Vec::new();
    for (p, spec) in order {
        let mut why: Vec<String> = Vec::new();
        let mut chosen = None;
        let requests = !spec.requests().is_empty();
        for n in &nodes {
            // A node that lists no allocatable says nothing of its room: no pod that requests
            // anything is placed there on faith.
            if requests && n.allocatable.as_object().is_none_or(|a| a.is_empty()) {
                if why.len() < 3 {
                    why.push(format!(
                        "{}: lists no allocatable, its room is unknown",
                        n.name
                    ));
                }
                continue;
            }
            let here = on
                .get(n.name.as_str())
                .map(Vec::as_slice)
                .unwrap_or_default();
            let holders = PortHolder::find(here, &p.host_ports(), &p.name);
            let mut kept = blockers(&spec, n, Room::Free(here), &holders, None);
            let own = obj::namespace(&p.raw).unwrap_or_default();
            kept.extend(repelled(&spec, own, n, &nodes, on.values().flatten()));
            if kept.is_empty() {
                chosen = Some(n.name.as_str());
                break;
            }
            if why.len() < 3 {
                let kept: Vec<String> = kept.iter().map(ToString::to_string).collect();
                why.push(format!("{}: {}", n.name, kept.join(", ")));
            }
        }
        match chosen {
            Some(name) => {
                *placed.entry(name.to_owned()).or_default() += 1;
                let mut moved = p.clone();
                moved.node = Some(name.to_owned());
                on.entry(name).or_default().push(moved);
            }
            None if nodes.is_empty() => nowhere.push(format!(
                "pod {}/{} has no other node to go to",
                obj::namespace(&p.raw).unwrap_or_default(),
                p.name
            )),
            None => nowhere.push(format!(
                "pod {}/{} fits on no other node ({}{})",
                obj::namespace(&p.raw).unwrap_or_default(),
                p.name,
                why.join("; "),
                if nodes.len() > why.len() { "; …" } else { "" }
            )),
        }
    }
    if nowhere.is_empty() {
        Ok(placed)
    } else {
        Err(nowhere)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_node_takes_a_pod_that_tolerates_its_taint_and_matches_its_labels() {
        let node = Node::parse(
            &json!({"metadata": {"name": "gpu-1", "labels": {"pool": "gpu"}},
            "spec": {"taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]},
            "status": {"allocatable": {"cpu": "8"},
                "conditions": [{"type": "Ready", "status": "True"}]}}),
        );
        // An ordinary pod: kept off by the taint.
        assert!(!takes(&PodSpec::default(), &node));
        let spec = |selector: &str| {
            PodSpec::parse(&json!({"containers": [{"name": "train"}],
                "nodeSelector": {"pool": selector},
                "tolerations": [{"key": "gpu", "operator": "Equal", "value": "true",
                    "effect": "NoSchedule"}]}))
        };
        // The pods that tolerate it and select its pool go there; a pod of another pool not.
        assert!(takes(&spec("gpu"), &node));
        assert!(!takes(&spec("cpu"), &node));
    }

    #[test]
    fn a_node_s_room_is_its_allocatable_or_what_is_left_beside_its_pods() {
        let node = Node::parse(&json!({"metadata": {"name": "n1", "labels": {"pool": "a"}},
            "spec": {"taints": [{"key": "maintenance", "effect": "NoSchedule"}]},
            "status": {"allocatable": {"cpu": "2", "memory": "4Gi"},
                "conditions": [{"type": "Ready", "status": "True"}]}}));
        let pod = |name: &str, cpu: &str, node: Option<&str>| {
            Pod::parse(&json!({"metadata": {"name": name, "namespace": "shop"},
                "spec": {"nodeName": node, "containers": [{"name": "app",
                    "resources": {"requests": {"cpu": cpu}},
                    "ports": [{"containerPort": 80, "hostPort": 8080}]}]},
                "status": {"phase": if node.is_some() { "Running" } else { "Pending" }}}))
        };
        let pending = pod("web-2", "1500m", None);
        let spec = PodSpec::of_pod(&pending.raw);
        // Against its allocatable, the pod fits but for the taint…
        assert_eq!(
            blockers(&spec, &node, Room::Allocatable, &[], None),
            vec![Blocker::Taint {
                key: "maintenance".into(),
                value: String::new(),
                effect: "NoSchedule".into()
            }]
        );
        // …which the taint removal's proof sets aside; a pod bound there takes the room and
        // the host port.
        let bound = vec![pod("web-1", "1", Some("n1"))];
        let holders = PortHolder::find(&bound, &pending.host_ports(), &pending.name);
        let left: Vec<String> = blockers(
            &spec,
            &node,
            Room::Free(&bound),
            &holders,
            Some(("maintenance", None)),
        )
        .iter()
        .map(ToString::to_string)
        .collect();
        assert_eq!(
            left,
            vec![
                "only 1000m of 2 cpu left, less than the 1500m the pod requests".to_owned(),
                "hostPort 8080/TCP, which the pod binds, is already bound there by a pod of shop/Pod/web-1".to_owned(),
            ]
        );
        assert!(
            blockers(
                &spec,
                &node,
                Room::Free(&[]),
                &[],
                Some(("maintenance", None))
            )
            .is_empty()
        );
    }

    /// Issue 43: room elsewhere is asked per node, as a pod is placed: two nodes with one CPU
    /// free each take no pod that asks for one and a half, however much is free in all.
    #[test]
    fn pods_are_placed_one_node_at_a_time_not_on_pooled_room() {
        let node = |name: &str, pool: &str| {
            Node::parse(
                &json!({"metadata": {"name": name, "labels": {"pool": pool}},
                "status": {"allocatable": {"cpu": "2", "memory": "8Gi"},
                    "conditions": [{"type": "Ready", "status": "True"}]}}),
            )
        };
        let pod = |name: &str, cpu: &str, node: &str| {
            Pod::parse(&json!({"metadata": {"name": name, "namespace": "shop"},
                "spec": {"nodeName": node, "containers": [{"name": "app",
                    "resources": {"requests": {"cpu": cpu}}}]},
                "status": {"phase": "Running"}}))
        };
        let (n2, n3) = (node("n2", "a"), node("n3", "a"));
        let bound = vec![pod("db-1", "1", "n2"), pod("db-2", "1", "n3")];
        let big = pod("api-1", "1500m", "n1");
        let Err(refused) = placement(&[&big], &[&n2, &n3], &bound) else {
            panic!("a pod of 1500m placed beside 1 CPU of 2 on each node");
        };
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(
            refused[0]
                .starts_with("pod shop/api-1 fits on no other node (n2: only 1000m of 2 cpu left"),
            "{refused:?}"
        );
        // Two that each fit go to one node each: the second is counted beside the first.
        let small = |name: &str| pod(name, "800m", "n1");
        let (a, b) = (small("api-2"), small("api-3"));
        let placed = placement(&[&a, &b], &[&n2, &n3], &bound).unwrap_or_default();
        assert_eq!(placed.values().sum::<usize>(), 2, "{placed:?}");
        assert_eq!(placed.len(), 2, "{placed:?}");
        // A pod that selects a pool no other node is in goes nowhere.
        let mut gpu = small("train-1");
        gpu.raw["spec"]["nodeSelector"] = json!({"pool": "gpu"});
        assert!(placement(&[&gpu], &[&n2, &n3], &bound).is_err());
    }

    /// Issue 43: placement does not depend on the order the nodes were listed in (the rules'
    /// tools sort them by trouble, the proofs' scene by name), and a node that lists what it
    /// allocates without a GPU takes no pod that requests one.
    #[test]
    fn placement_is_the_same_whatever_the_nodes_order_and_needs_what_a_node_lists() {
        let node = |name: &str, taint: bool| {
            let mut n = json!({"metadata": {"name": name},
                "status": {"allocatable": {"cpu": "2", "memory": "8Gi"},
                    "conditions": [{"type": "Ready", "status": "True"}]}});
            if taint {
                n["spec"] = json!({"taints": [{"key": "dedicated", "value": "db",
                    "effect": "NoSchedule"}]});
            }
            Node::parse(&n)
        };
        let pod = |name: &str, tolerates: bool| {
            let mut p = json!({"metadata": {"name": name, "namespace": "shop"},
                "spec": {"nodeName": "n0", "containers": [{"name": "app",
                    "resources": {"requests": {"cpu": "1"}}}]},
                "status": {"phase": "Running"}});
            if tolerates {
                p["spec"]["tolerations"] = json!([{"key": "dedicated", "operator": "Equal",
                    "value": "db", "effect": "NoSchedule"}]);
            }
            Pod::parse(&p)
        };
        let (n1, n2) = (node("n1", false), node("n2", true));
        // One CPU free on each.
        let bound = vec![
            Pod::parse(&json!({"metadata": {"name": "x", "namespace": "o"},
                "spec": {"nodeName": "n1", "containers": [{"name": "c",
                    "resources": {"requests": {"cpu": "1"}}}]}, "status": {"phase": "Running"}})),
            Pod::parse(&json!({"metadata": {"name": "y", "namespace": "o"},
                "spec": {"nodeName": "n2", "containers": [{"name": "c",
                    "resources": {"requests": {"cpu": "1"}}}]}, "status": {"phase": "Running"}})),
        ];
        let (a, b) = (pod("a", true), pod("b", false));
        // `b` fits only the untainted node; `a`, which tolerates the taint, goes to the other.
        let one = placement(&[&a, &b], &[&n1, &n2], &bound);
        assert_eq!(one, placement(&[&a, &b], &[&n2, &n1], &bound));
        assert_eq!(one.map(|p| p.len()), Ok(2));
        let gpu = Pod::parse(&json!({"metadata": {"name": "train", "namespace": "ml"},
            "spec": {"nodeName": "n0", "containers": [{"name": "t",
                "resources": {"requests": {"nvidia.com/gpu": "1"}}}]},
            "status": {"phase": "Running"}}));
        let Err(why) = placement(&[&gpu], &[&n1], &[]) else {
            panic!("a GPU pod placed on a node that lists no GPU");
        };
        assert!(why[0].contains("of 0 nvidia.com/gpu left"), "{why:?}");
    }

    /// Issue 43: a required pod anti-affinity keeps pods apart wherever they are placed: a
    /// drain's pod goes to no node that runs a pod it keeps away (its zone's nodes, for a zone
    /// key), nor beside another of the drain's pods; more replicas need a node each.
    #[test]
    fn a_required_anti_affinity_keeps_pods_apart_in_placement_and_room() {
        let node = |name: &str, zone: &str| {
            Node::parse(&json!({"metadata": {"name": name, "labels": {
                    "kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone}},
                "status": {"allocatable": {"cpu": "8", "memory": "16Gi"},
                    "conditions": [{"type": "Ready", "status": "True"}]}}))
        };
        let apart = |key: &str| {
            json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "quote"}}, "topologyKey": key}]}})
        };
        let pod = |name: &str, node: &str, key: &str| {
            Pod::parse(&json!({"metadata": {"name": name, "namespace": "shop",
                    "labels": {"app": "quote"}},
                "spec": {"nodeName": node, "affinity": apart(key),
                    "containers": [{"name": "app"}]},
                "status": {"phase": "Running"}}))
        };
        let host = "kubernetes.io/hostname";
        let (n1, n2, n3) = (node("n1", "a"), node("n2", "a"), node("n3", "b"));
        // Draining n1: n2 runs one already, n3 takes one; two find only n3.
        let bound = vec![pod("quote-2", "n2", host)];
        let (a, b) = (pod("quote-1", "n1", host), pod("quote-4", "n1", host));
        assert_eq!(
            placement(&[&a], &[&n2, &n3], &bound).map(|p| p.into_keys().collect::<Vec<_>>()),
            Ok(vec!["n3".to_owned()])
        );
        let Err(why) = placement(&[&a, &b], &[&n2, &n3], &bound) else {
            panic!("two pods kept one per node placed on one free node");
        };
        assert!(
            why[0].contains("n2: pod shop/quote-2 runs in its domain, which the pod's required anti-affinity (one per kubernetes.io/hostname among pods app=quote) keeps away"),
            "{why:?}"
        );
        // One per zone: n3's zone is free, n2's holds quote-2.
        let zone = "topology.kubernetes.io/zone";
        let bound = vec![pod("quote-2", "n2", zone)];
        assert!(placement(&[&pod("quote-1", "n1", zone)], &[&n2, &n3], &bound).is_ok());
        assert!(placement(&[&pod("quote-1", "n1", zone)], &[&n1, &n2], &bound).is_err());
        // More replicas: one node free of them takes one more, not two.
        let template = PodSpec::of_pod(&pod("t", "", host).raw);
        let nodes = vec![n1.clone(), n2.clone(), n3.clone()];
        let running = vec![pod("quote-1", "n1", host), pod("quote-2", "n2", host)];
        assert!(room_for_more(&template, "shop", &running, &nodes, &running, 1).0);
        let (room, ev) = room_for_more(&template, "shop", &running, &nodes, &running, 2);
        assert!(!room, "{ev:?}");
        assert!(
            ev.iter()
                .any(|e| e.contains("1 schedulable node(s) can take one more, 2 new pod(s)")),
            "{ev:?}"
        );
        // Kept off other pods only (a term against `app=db`), any number go to a node none
        // of those runs on.
        let mut web = pod("t", "", host);
        web.raw["metadata"]["labels"] = json!({"app": "web"});
        web.raw["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            [0]["labelSelector"] = json!({"matchLabels": {"app": "db"}});
        let web = PodSpec::of_pod(&web.raw);
        let mut db = pod("db-0", "n1", host);
        db.labels = json!({"app": "db"});
        assert!(room_for_more(&web, "shop", &[], &nodes, std::slice::from_ref(&db), 4).0);
        let everywhere: Vec<Pod> = ["n1", "n2", "n3"]
            .iter()
            .map(|n| {
                let mut d = pod(&format!("db-{n}"), n, host);
                d.labels = json!({"app": "db"});
                d
            })
            .collect();
        assert!(!room_for_more(&web, "shop", &[], &nodes, &everywhere, 1).0);
        // A node without the term's topology label is in no domain: it takes any number.
        let mut bare = node("n4", "b");
        bare.labels.remove(host);
        let with_bare = vec![n1.clone(), n2.clone(), bare];
        let (room, ev) = room_for_more(&template, "shop", &running, &with_bare, &running, 3);
        assert!(room, "{ev:?}");
        assert!(ev.iter().any(|e| e.contains("in no domain")), "{ev:?}");
        // Another namespace's pods are not kept away by a term without namespaces.
        let mut other = pod("quote-3", "n3", host);
        other.raw["metadata"]["namespace"] = json!("staging");
        let with_other = [running.clone(), vec![other]].concat();
        assert!(room_for_more(&template, "shop", &running, &nodes, &with_other, 1).0);
        // A pod of the workload no scheduler has tried: more would wait as it does.
        let mut unplaced = pod("quote-5", "", host);
        unplaced.node = None;
        unplaced.phase = "Pending".into();
        unplaced.unplaced_for = Some(chrono::Duration::minutes(5));
        let waiting = [running.clone(), vec![unplaced]].concat();
        let (room, ev) = room_for_more(&template, "shop", &waiting, &nodes, &running, 1);
        assert!(!room, "{ev:?}");
        assert!(
            ev.iter().any(|e| e.starts_with(
                "pod quote-5 is already Pending: Pending for 5m: no scheduler has tried"
            )),
            "{ev:?}"
        );
    }
}
