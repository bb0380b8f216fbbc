//! Whether a pod's failure is its own, so that a new pod from the same template starts clean:
//! the question behind deleting one pod. The rules ask it before they propose the deletion
//! (whichever rule found the pod: one stuck creating, one failing among serving siblings, the
//! only replica failing on state it keeps), the deletion's proof before it allows one: one
//! answer, so a rule never proposes a replacement the proof then refuses for the pod's own
//! failure.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};

use super::{
    Room, StateKept, blockers, configmaps, hhmm, moved_image, node_at_fault, read_only_by,
};
use crate::cluster::observed::{Node, Pod, PodSpec};

/// The pod to be replaced, and what shows whether its replacement starts clean.
pub struct Replacement<'a> {
    pub pod: &'a Pod,
    /// The workload's other pods, not those already leaving.
    pub siblings: Vec<&'a Pod>,
    /// It is the only replica (`spec.replicas` 1, no sibling): nothing shows its template runs
    /// but the state it keeps.
    pub only: bool,
    /// The state the only replica's failing starts keep, which a new pod starts without
    /// ([`super::state_kept`]).
    pub kept: Option<&'a StateKept>,
}

impl<'a> Replacement<'a> {
    /// `pod` among the workload's `pods` (itself included); `replicas` the workload's
    /// `spec.replicas`.
    pub fn of(
        pod: &'a Pod,
        pods: impl IntoIterator<Item = &'a Pod>,
        replicas: Option<i64>,
        kept: Option<&'a StateKept>,
    ) -> Self {
        let siblings: Vec<&Pod> = pods
            .into_iter()
            .filter(|p| p.name != pod.name && !p.deleting && !p.outlived())
            .collect();
        let only = siblings.is_empty() && replicas == Some(1);
        Self {
            pod,
            siblings,
            only,
            kept: kept.filter(|_| only),
        }
    }

    /// Whether a controller makes another pod in its place: `Ok` with the controller, `Err`
    /// with the line that shows none does, and deleting it loses it
    /// (`delete.pod-owned-by-target`).
    pub fn controlled(&self) -> Result<String, String> {
        match &self.pod.controller {
            Some((kind, name)) => Ok(format!(
                "pod {} is controlled by {kind} {name}",
                self.pod.name
            )),
            None => Err(format!(
                "pod {} has no controller: deleting it loses it",
                self.pod.name
            )),
        }
    }

    /// Whether the pod is still one of its controller's replicas: `Err` with the line that
    /// shows it has ended (Failed, Succeeded), when its controller replaced it already and
    /// deleting it only removes its record (`delete.pod-still-running`).
    pub fn still_running(&self) -> Result<(), String> {
        let pod = self.pod;
        if !pod.ended() {
            return Ok(());
        }
        Err(format!(
            "pod {} has ended ({}{}): its controller replaced it already",
            pod.name,
            pod.phase,
            pod.reason
                .as_ref()
                .map(|(r, _)| format!(", {r}"))
                .unwrap_or_default()
        ))
    }

    fn ready(&self) -> Vec<&'a Pod> {
        self.siblings.iter().copied().filter(|p| p.ready).collect()
    }

    /// Whether something keeps serving while it is replaced: a sibling is ready, or, for the
    /// only replica failing on state it keeps, it serves nothing now. `Ok` or `Err` with the
    /// line that shows it.
    pub fn sibling_ready(&self) -> Result<String, String> {
        if self.kept.is_some() {
            return Ok(format!(
                "pod {} is the only replica (spec.replicas 1) and serves nothing now: deleting it takes nothing away that runs",
                self.pod.name
            ));
        }
        let line = format!(
            "{} of {} sibling pod(s) ready",
            self.ready().len(),
            self.siblings.len()
        );
        if self.ready().is_empty() {
            Err(line)
        } else {
            Ok(line)
        }
    }

    /// The siblings not ready with the same failure ([`Pod::failure`]'s cause: a crash caught
    /// between restarts and one backing off are the same), or, when the pod shows none, not
    /// ready at all: a failure they share is not the pod's own.
    pub fn sharing(&self) -> Vec<&'a Pod> {
        let cause = |p: &Pod| p.failure().map(|f| f.cause);
        let mine = cause(self.pod);
        self.siblings
            .iter()
            .copied()
            .filter(|p| !p.ready && (mine.is_none() || cause(p) == mine))
            .collect()
    }

    /// Why the failure comes with the template, if it does: a replacement is made from the
    /// same template (its ReplicaSet's, its revision's) and fails alike. The only replica has
    /// no sibling to show its template runs, so only the state it keeps shows its failure its
    /// own; a container that waits on its image or configuration ([`Pod::template_wait`]), a
    /// tag that moved since the serving siblings pulled it ([`moved_image`]), or a template no
    /// serving sibling runs ([`Pod::template_runs_in`]) fails a replacement too. `Ok` with the
    /// lines that show it does not.
    pub fn template_fails(&self) -> Result<Vec<String>, String> {
        let pod = self.pod;
        if let Some(k) = self.kept {
            return Ok(k.evidence.clone());
        }
        if self.only {
            return Err(format!(
                "pod {} is the only replica: no sibling shows its template runs, and nothing shows its failure is state of its own (an error naming a path in its emptyDir, a kill it never recovered from)",
                pod.name
            ));
        }
        if let Some((c, why)) = pod.template_wait() {
            return Err(format!(
                "container {} of pod {} waits with {why}: its image or configuration is what fails, and a replacement reads the same",
                c.name, pod.name
            ));
        }
        let serving: Vec<&Pod> = self
            .siblings
            .iter()
            .copied()
            .filter(|p| p.serving())
            .collect();
        if let Some(moved) = moved_image(pod, &serving) {
            return Err(moved);
        }
        let runs = serving.iter().filter(|p| pod.template_runs_in(p)).count();
        match pod.template() {
            Some(h) if !serving.is_empty() && runs == 0 => Err(format!(
                "no ready sibling runs the template of pod {} ({h}); the ready ones run {}: its replacement is made from {h} again",
                pod.name,
                serving
                    .iter()
                    .filter_map(|p| p.template())
                    .map(String::as_str)
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            _ => Ok(vec![format!(
                "{runs} ready sibling(s) run the template of pod {}",
                pod.name
            )]),
        }
    }

    /// A DaemonSet's pod: its replacement starts on the same node.
    pub fn pinned(&self) -> bool {
        self.pod
            .controller
            .as_ref()
            .is_some_and(|(kind, _)| kind == "DaemonSet")
    }

    /// The nodes its ready siblings run on, other than its own: those
    /// [`Replacement::follows_node`] compares its node with.
    pub fn ready_sibling_nodes(&self) -> BTreeSet<String> {
        let own = self.pod.node.as_deref();
        self.ready()
            .iter()
            .filter_map(|p| p.node.clone())
            .filter(|n| Some(n.as_str()) != own)
            .collect()
    }

    /// Whether its node is out of the question (`Some`, with the line that shows it): it is on
    /// no node, its node cannot be read, or the node takes no pod like it (a DaemonSet's
    /// replacement starts there whatever it asks). Otherwise whether its node is at fault is
    /// [`Replacement::node_not_at_fault`]'s question, which needs the pods read.
    pub fn node_out_of_question(&self, node: Option<&Node>) -> Option<String> {
        let pod = self.pod;
        let Some(name) = pod.node.as_deref() else {
            return Some(format!("pod {} is on no node", pod.name));
        };
        let Some(node) = node.filter(|n| n.name == name) else {
            return Some(format!(
                "node {name} cannot be read: nothing shows it at fault"
            ));
        };
        let kept_off = blockers(
            &PodSpec::of_pod(&pod.raw),
            node,
            Room::Allocatable,
            &[],
            None,
        );
        (!self.pinned() && !kept_off.is_empty()).then(|| {
            let why: Vec<String> = kept_off.iter().map(ToString::to_string).collect();
            format!(
                "node {name} takes no pod like it ({}): the replacement is placed elsewhere",
                why.join("; ")
            )
        })
    }

    /// Whether the pod's node is not the common factor of the failures ([`node_at_fault`]),
    /// from the node, its readiness flaps, the pods on it (every namespace's) and `all` pods,
    /// or its replacement cannot be placed there ([`Replacement::node_out_of_question`]). A
    /// deleted pod's replacement may be placed on the same node: when that node is at fault,
    /// deleting one of its pods repeats the failure. What `delete.node-not-at-fault` asks, and
    /// the rules before they propose the deletion. `Ok` or `Err` with the lines that show it.
    pub fn node_not_at_fault(
        &self,
        node: Option<&Node>,
        flaps: Option<&str>,
        on_node: &[Pod],
        all: &[Pod],
    ) -> Result<Vec<String>, Vec<String>> {
        if let Some(line) = self.node_out_of_question(node) {
            return Ok(vec![line]);
        }
        let Some(node) = node else {
            return Ok(vec![]);
        };
        let (at_fault, mut ev) = node_at_fault(node, flaps, on_node, all);
        if !at_fault {
            return Ok(ev);
        }
        ev.push(format!(
            "its replacement may be placed on {} again: the node is what to act on",
            node.name
        ));
        Err(ev)
    }

    /// Whether the failure follows the pod's node, from what the nodes run
    /// ([`Node::info`]: kernel, OS image, runtime, kubelet). A DaemonSet's replacement starts
    /// on the same node ([`Replacement::pinned`]); when that node runs something no node of
    /// a ready sibling runs, the failure follows the node and a replacement repeats it.
    /// `nodes` are the nodes read (its own and its ready siblings'); one not among them is
    /// not compared. `Ok` or `Err` with the lines that show it.
    pub fn follows_node(&self, nodes: &[&Node]) -> Result<String, Vec<String>> {
        let pod = self.pod;
        let Some(node) = pod.node.as_deref().filter(|_| self.pinned()) else {
            return Ok(format!(
                "pod {} is replaced wherever the scheduler places it",
                pod.name
            ));
        };
        let Some(own) = nodes.iter().find(|n| n.name == node) else {
            return Ok(format!(
                "node {node} cannot be read: nothing shows it differs"
            ));
        };
        let own = own.info();
        let others: Vec<(&str, Vec<(&str, String)>)> = self
            .ready_sibling_nodes()
            .iter()
            .filter_map(|name| nodes.iter().find(|n| &n.name == name))
            .map(|n| (n.name.as_str(), n.info()))
            .collect();
        // What this node runs that no node of a ready sibling runs.
        let differs: Vec<String> = own
            .iter()
            .filter(|(label, value)| {
                !others.is_empty()
                    && others
                        .iter()
                        .all(|(_, theirs)| theirs.iter().any(|(l, v)| l == label && v != value))
            })
            .map(|(label, value)| {
                let theirs: BTreeSet<&str> = others
                    .iter()
                    .flat_map(|(_, t)| {
                        t.iter()
                            .filter(|(l, _)| l == label)
                            .map(|(_, v)| v.as_str())
                    })
                    .collect();
                format!(
                    "{label} {value} (the nodes where its siblings run ready: {})",
                    theirs.into_iter().collect::<Vec<_>>().join(", ")
                )
            })
            .collect();
        if differs.is_empty() {
            return Ok(if others.is_empty() {
                format!("no sibling runs ready on another node to compare node {node} with")
            } else {
                format!(
                    "node {node} runs what the {} node(s) of its ready siblings run",
                    others.len()
                )
            });
        }
        Err(vec![
            format!(
                "pod {} fails on node {node}, and a DaemonSet replaces it on the same node; only node {node} runs {}",
                pod.name,
                differs.join("; ")
            ),
            format!(
                "its siblings run ready on {}: the failure follows node {node}, a person decides about that node",
                others
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ])
    }

    /// Whether configuration the replacement reads changed between its ready siblings and it,
    /// from when each ConfigMap its template reads was last written (`written`, by name;
    /// those not known are passed over). A replacement reads them as they are now: when the
    /// pod has read a change its ready siblings have not ([`read_only_by`]), they run the old
    /// configuration and the pod the new one, and the replacement fails like the pod.
    ///
    /// The only pod whose failing starts name state of its own is the exception: its
    /// restarting containers read the changed configuration too, and what they fail on is the
    /// state a new pod starts without. `Ok` or `Err` with the lines that show it.
    pub fn config_changed(
        &self,
        written: impl Fn(&str) -> Option<DateTime<Utc>>,
    ) -> Result<Vec<String>, Vec<String>> {
        let pod = self.pod;
        let ready = self.ready();
        if !self.siblings.is_empty() && ready.is_empty() {
            return Ok(vec![
                "no ready sibling started before it to compare with".into(),
            ]);
        }
        let mut changed = Vec::new();
        let mut read = Vec::new();
        for name in configmaps(&pod.raw) {
            match written(&name) {
                Some(t) if read_only_by(pod, &ready, t) && ready.is_empty() => changed.push(format!(
                    "ConfigMap {name} changed at {}, after pod {} started ({}): its restarting containers and its replacement read it as it is now",
                    hhmm(t),
                    pod.name,
                    pod.start().map(hhmm).unwrap_or_default()
                )),
                Some(t) if read_only_by(pod, &ready, t) => changed.push(format!(
                    "ConfigMap {name} changed at {}; pod {} read it since (it or a container started again after that) and none of its {} ready sibling(s) has: its replacement reads it as it is now",
                    hhmm(t),
                    pod.name,
                    ready.len()
                )),
                Some(_) => read.push(name),
                None => {}
            }
        }
        if changed.is_empty() {
            return Ok(vec![if read.is_empty() {
                "its template reads no ConfigMap".to_owned()
            } else {
                format!("unchanged since its siblings started: {}", read.join(", "))
            }]);
        }
        match self.kept.and_then(|k| k.named.as_ref()) {
            Some(k) if self.siblings.is_empty() => {
                changed.push(format!(
                    "its failing starts read that configuration already, and the error they end on names {} in its emptyDir volume {}, not it",
                    k.path, k.volume
                ));
                Ok(changed)
            }
            _ => Err(changed),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn pod(name: &str, owner: &str, node: &str, ready: bool) -> Pod {
        Pod::parse(&json!({
            "metadata": {"name": name, "ownerReferences": [{"kind": owner, "name": "agent", "controller": true}]},
            "spec": {"nodeName": node, "containers": [{"name": "agent", "image": "agent:1"}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}],
                "containerStatuses": [{"name": "agent", "ready": ready, "restartCount": if ready {0} else {7},
                    "state": if ready {json!({"running": {}})} else {json!({"waiting": {"reason": "CrashLoopBackOff"}})}}]}
        }))
    }

    fn node(name: &str, kernel: &str) -> Node {
        let raw: Value = json!({"metadata": {"name": name},
            "status": {"nodeInfo": {"kernelVersion": kernel, "kubeletVersion": "v1.29.3"}}});
        Node::parse(&raw)
    }

    /// A DaemonSet's pod failing on the one node that runs another kernel: its replacement
    /// starts there again. A Deployment's pod is placed anew; a node not read is not compared.
    #[test]
    fn a_daemonset_pod_s_failure_follows_the_node_that_runs_what_its_siblings_do_not() {
        let nodes = [node("n1", "5.4"), node("n2", "5.4"), node("n3", "6.1")];
        let (a, b) = (
            pod("a", "DaemonSet", "n1", true),
            pod("b", "DaemonSet", "n2", true),
        );
        let failing = pod("c", "DaemonSet", "n3", false);
        let r = Replacement::of(&failing, [&a, &b, &failing], None, None);
        assert!(r.pinned());
        let lines = r
            .follows_node(&nodes.iter().collect::<Vec<_>>())
            .expect_err("follows the node");
        assert!(
            lines[0].contains("only node n3 runs kernel 6.1"),
            "{lines:?}"
        );
        assert!(
            lines[1].contains("its siblings run ready on n1, n2"),
            "{lines:?}"
        );
        // The same kernel everywhere: the node is not what differs.
        let same = [node("n1", "6.1"), node("n2", "6.1"), node("n3", "6.1")];
        assert!(r.follows_node(&same.iter().collect::<Vec<_>>()).is_ok());
        // Its node not read: nothing shows it differs.
        assert!(
            r.follows_node(&nodes[..2].iter().collect::<Vec<_>>())
                .is_ok()
        );
        // A Deployment's pod is replaced wherever the scheduler places it.
        let (a, b) = (
            pod("a", "ReplicaSet", "n1", true),
            pod("b", "ReplicaSet", "n2", true),
        );
        let failing = pod("c", "ReplicaSet", "n3", false);
        let r = Replacement::of(&failing, [&a, &b, &failing], Some(3), None);
        assert_eq!(
            r.follows_node(&nodes.iter().collect::<Vec<_>>()),
            Ok("pod c is replaced wherever the scheduler places it".into())
        );
    }
}
