//! Whether a node is the common factor of its pods' failures: the drain's question, asked by
//! the dependency graph of what it read (the target's pods) and by the drain's proof of every
//! pod in the cluster.

use chrono::{DateTime, Duration, Utc};

use super::hhmm;
use crate::cluster::obj;
use crate::cluster::observed::{Event, Node, Pod};

/// How many pods must fail on a Ready node, while their templates serve elsewhere, for the
/// node to be their common factor.
const LOCAL_FAILURES_MIN: usize = 2;

/// The owner a pod shares with its siblings: its controller, with a ReplicaSet's hash cut.
fn owner(p: &Pod) -> Option<String> {
    p.controller.as_ref()?;
    let (_, name) = p.workload();
    Some(format!(
        "{}/{name}",
        obj::namespace(&p.raw).unwrap_or_default()
    ))
}

/// The pods on `node` (`here`) that were deleted, cannot finish terminating because the node's
/// kubelet is not there to stop them (its Ready condition reported other than True; `Unknown`:
/// the node controller stopped hearing from it), and whose replacement waits for them to be
/// gone: a StatefulSet's (a pod of its name runs at most once). A Deployment's or a
/// DaemonSet's deleted pod is already replaced elsewhere, or never moves. On a Ready node, even
/// one whose readiness flaps, a pod being deleted is one its kubelet is stopping. Such pods
/// need a human to confirm the node is gone before they are force-deleted: the dependency
/// graph blocks its remedy and the drain's proof refuses (`drain.no-stateful-pod-stuck`).
pub fn cannot_finish_terminating<'a>(node: &Node, here: &'a [Pod]) -> Vec<&'a Pod> {
    if !node.kubelet_away() {
        return vec![];
    }
    here.iter()
        .filter(|p| p.deleting && matches!(&p.controller, Some((k, _)) if k == "StatefulSet"))
        .collect()
}

/// Whether the node is the common factor of its pods' failures: its conditions show it in
/// trouble ([`Node::trouble`]: Ready reported other than True, a pressure or problem condition),
/// or its pods fail where the same workloads' pods elsewhere, made from the same template
/// ([`Pod::template_runs_in`]), serve — at least two of them: one failing pod may carry its own fault (deleting it is
/// the proportionate fix), so it does not show the node at fault. A workload that fails here
/// and serves elsewhere too, in part, shows the failure shared: not the node's. One that fails
/// on every node it runs on is set aside: its fault is its own, and whether the pods of
/// `on_node` are the target's alone (the graph's question) or every pod on the node (the drain
/// proof's), the answer is the same. With the evidence either way.
pub fn node_at_fault(
    node: &Node,
    flaps: Option<&str>,
    on_node: &[Pod],
    all: &[Pod],
) -> (bool, Vec<String>) {
    let name = node.name.as_str();
    if node.trouble().is_some() {
        return (true, vec![format!("node {name} is {}", node.state())]);
    }
    if let Some(flaps) = flaps {
        return (
            true,
            vec![format!(
                "node {name} is {} now, but {flaps}: every pod on it is disrupted with each drop",
                node.state()
            )],
        );
    }
    let failing: Vec<&Pod> = on_node.iter().filter(|p| p.failure().is_some()).collect();
    if failing.is_empty() {
        return (
            false,
            vec![format!(
                "node {name} is {} and none of its {} pods fails",
                node.state(),
                on_node.len()
            )],
        );
    }
    let mut local = Vec::new();
    let mut shared = Vec::new();
    let mut set_aside = Vec::new();
    for p in &failing {
        let Some(o) = owner(p) else { continue };
        // Its siblings made from the same template: a new revision's pods failing here while
        // the old revision's serve elsewhere show the revision at fault, not the node.
        let elsewhere: Vec<&Pod> = all
            .iter()
            .filter(|q| {
                q.node.as_deref() != Some(name)
                    && !q.deleting
                    && !q.outlived()
                    && owner(q).as_deref() == Some(o.as_str())
                    && q.template() == p.template()
            })
            .collect();
        let serving = elsewhere.iter().filter(|q| p.template_runs_in(q)).count();
        if !elsewhere.is_empty() && serving == elsewhere.len() {
            local.push(format!(
                "pod {} of {o} fails here while its {} sibling(s) from the same template elsewhere serve",
                p.name,
                elsewhere.len()
            ));
        } else if serving > 0 {
            shared.push(format!("{o} fails on other nodes too"));
        } else if !elsewhere.is_empty() {
            // Failing on every node it runs on: its own fault, which says nothing of this
            // node either way (another namespace's crash loop is no alibi for the node).
            set_aside.push(format!(
                "{o} fails wherever it runs (set aside: its own fault)"
            ));
        }
    }
    let ok = local.len() >= LOCAL_FAILURES_MIN && shared.is_empty();
    let mut ev = vec![format!("node {name} is {}", node.state())];
    let lone = local.len() == 1 && shared.is_empty();
    ev.extend(local);
    ev.extend(shared);
    ev.extend(set_aside);
    if lone {
        ev.push(
            "only one pod fails here while its workload runs healthy elsewhere: one pod's failure does not show the node at fault".into(),
        );
    }
    (ok, ev)
}

/// How node `node`'s readiness came and went lately, from its `events`, when it flaps
/// ([`readiness_flaps`]): one line.
pub fn flaps(now: DateTime<Utc>, events: &[Event], node: &str) -> Option<String> {
    readiness_flaps(now, &not_ready_events(events, node)).map(|(count, first, last)| {
        format!(
            "its Ready condition went NotReady {count} times between {} and {}",
            hhmm(first),
            hhmm(last)
        )
    })
}

/// One `NodeNotReady` event about a node: how many times, first and last.
pub type NotReadyEvent = (i64, Option<DateTime<Utc>>, Option<DateTime<Utc>>);

/// How many NotReady transitions make a node's readiness flap, and how recent the last must be.
const FLAPS_MIN: i64 = 3;
const FLAPS_WINDOW_MINUTES: i64 = 60;

/// Whether a node's readiness flaps, from its `NodeNotReady` events as `(count, first, last)`
/// (the node controller and the kubelet may each report every transition: the largest count
/// counts): at least [`FLAPS_MIN`] times, the last within [`FLAPS_WINDOW_MINUTES`] of `now`.
/// Returns the count and the first and last time.
pub fn readiness_flaps(
    now: DateTime<Utc>,
    not_ready: &[NotReadyEvent],
) -> Option<(i64, DateTime<Utc>, DateTime<Utc>)> {
    let count = not_ready.iter().map(|(c, _, _)| *c).max()?;
    let last = not_ready.iter().filter_map(|(_, _, l)| *l).max()?;
    let first = not_ready.iter().filter_map(|(_, f, l)| f.or(*l)).min()?;
    (count >= FLAPS_MIN
        && now.signed_duration_since(last) <= Duration::minutes(FLAPS_WINDOW_MINUTES))
    .then_some((count, first, last))
}

/// Node `node`'s `NodeNotReady` events, as [`readiness_flaps`] reads them.
pub fn not_ready_events(events: &[Event], node: &str) -> Vec<NotReadyEvent> {
    events
        .iter()
        .filter(|e| e.kind == "Node" && e.name == node && e.reason == "NodeNotReady")
        .map(|e| (e.count.max(1), e.first, e.last))
        .collect()
}

#[cfg(test)]
mod terminating_tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn pods_cannot_finish_terminating_only_on_a_node_whose_kubelet_is_gone() {
        let now = Utc::now();
        let node = |ready: &str| {
            Node::parse(&json!({"metadata": {"name": "n1"},
                "status": {"conditions": [{"type": "Ready", "status": ready}]}}))
        };
        let deleting = |name: &str, controller: &str| {
            Pod::at(
                &json!({"metadata": {"name": name, "deletionTimestamp": now.to_rfc3339(),
                    "ownerReferences": [{"kind": controller, "name": "db", "controller": true}]},
                    "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}),
                now,
            )
        };
        let here = [
            deleting("db-0", "StatefulSet"),
            deleting("web-5d8f-x", "ReplicaSet"),
        ];
        // Only the StatefulSet's pod waits: the ReplicaSet's is replaced elsewhere already.
        assert_eq!(cannot_finish_terminating(&node("Unknown"), &here).len(), 1);
        assert_eq!(cannot_finish_terminating(&node("False"), &here).len(), 1);
        // Ready now (flapping or not): its kubelet is stopping the pod.
        assert!(cannot_finish_terminating(&node("True"), &here).is_empty());
    }

    /// The node is the common factor only when the pods failing on it fail where pods of the
    /// same template serve elsewhere: a new revision's surge pods crash-looping on a fresh node
    /// while the old revision's pods serve on the others show the revision at fault, and a
    /// drain of that node is no remedy.
    #[test]
    fn a_node_is_at_fault_by_siblings_of_the_same_template_not_of_another_revision() {
        let now = Utc::now();
        let node = Node::parse(&json!({"metadata": {"name": "a"},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}));
        let pod = |name: &str, hash: &str, on: &str, ok: bool| {
            let state = if ok {
                json!({"running": {"startedAt": now.to_rfc3339()}})
            } else {
                json!({"waiting": {"reason": "CrashLoopBackOff"}})
            };
            Pod::at(
                &json!({"metadata": {"name": name, "namespace": "shop",
                    "labels": {"app": "web", "pod-template-hash": hash},
                    "ownerReferences": [{"kind": "ReplicaSet", "name": format!("web-{hash}"),
                        "controller": true}]},
                    "spec": {"nodeName": on},
                    "status": {"phase": "Running",
                        "conditions": [{"type": "Ready", "status": if ok { "True" } else { "False" }}],
                        "containerStatuses": [{"name": "web", "ready": ok, "restartCount": if ok { 0 } else { 5 },
                            "state": state}]}}),
                now,
            )
        };
        // The new revision (b) fails on a and nowhere else runs; the old (a1) serves on b and c.
        let surge = [
            pod("web-b-1", "b", "a", false),
            pod("web-b-2", "b", "a", false),
        ];
        let mut all = surge.to_vec();
        all.extend([
            pod("web-a1-1", "a1", "b", true),
            pod("web-a1-2", "a1", "c", true),
        ]);
        let (at_fault, ev) = node_at_fault(&node, None, &surge, &all);
        assert!(!at_fault, "{ev:?}");
        // The same revision failing on a and serving elsewhere: the node is the common factor.
        let here = [
            pod("web-a1-3", "a1", "a", false),
            pod("web-a1-4", "a1", "a", false),
        ];
        let mut all = here.to_vec();
        all.extend([
            pod("web-a1-1", "a1", "b", true),
            pod("web-a1-2", "a1", "c", true),
        ]);
        let (at_fault, ev) = node_at_fault(&node, None, &here, &all);
        assert!(at_fault, "{ev:?}");
        assert!(
            ev.iter()
                .any(|l| l.contains("from the same template elsewhere serve")),
            "{ev:?}"
        );
        // Issue 43: on the node too, a pod of another workload that crash-loops on every node
        // it runs on (the drain proof reads every pod; the graph, the target's). It is set
        // aside, and both answer alike.
        let mut on_node = here.to_vec();
        on_node.push(pod("web-c9-1", "c9", "a", false));
        let mut every = all.clone();
        every.extend([on_node[2].clone(), pod("web-c9-2", "c9", "b", false)]);
        let (at_fault, ev) = node_at_fault(&node, None, &on_node, &every);
        assert!(at_fault, "{ev:?}");
        assert!(ev.iter().any(|l| l.contains("set aside")), "{ev:?}");
        // One that fails here and serves elsewhere in part shares the failure: not the node's.
        every.push(pod("web-c9-3", "c9", "c", true));
        let (at_fault, ev) = node_at_fault(&node, None, &on_node, &every);
        assert!(!at_fault, "{ev:?}");
    }
}
