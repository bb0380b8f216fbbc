//! Derived facts: what the evidence says, computed once, in the terms the rules decide on.
//!
//! Input: an [`Evidence`]. Output: [`Facts`] — per-pod states (failing, healthy, last
//! termination, waiting reason, warnings, ages, and a one-line description with the restart
//! count), the rollout regression, the scheduler's complaint, the root's containers and
//! limits, memory use and quota, node conditions and taints, the Service selector and the
//! claim's size.
//!
//! Invariants: pure and total — no I/O, no panics, no JSON; a missing piece of evidence is an
//! absent fact (`None`, empty), never an error. Facts describe; the thresholds that turn them
//! into a diagnosis belong to the rules, except the rollout window, which defines what a
//! rollout regression is.

mod elsewhere;
mod rollout;
mod scheduling;

use std::collections::BTreeMap;
use std::sync::LazyLock;

use chrono::{DateTime, Duration, Utc};
use regex::Regex;

use super::evidence::{Evidence, ObservedPod, RootObject, WorkloadState};
use super::quantity;
use crate::cluster::observed;
use crate::domain::{LimitResource, QuotaUsage, Target};
pub(super) use crate::prove::findings::Blocker;
use crate::prove::findings::{self, RevisionHealth};
use rollout::{lone_failure, regression};
use scheduling::unschedulable;

/// A rollout this recent, whose pods fail while the previous revision's ran, is the cause (the
/// neighbourhood's "recent change").
const ROLLOUT_WINDOW_HOURS: i64 = crate::domain::RECENT_CHANGE_HOURS;
/// A previous revision with no pods left that served less than this before it was replaced
/// never proved itself: nothing says it was healthy (one constant with the rollback proof's).
pub(super) use observed::SERVED_MIN_SECONDS;

pub(super) struct Facts {
    /// The moment the evidence was read at.
    pub now: DateTime<Utc>,
    /// What the signal named.
    pub subject: Target,
    /// The verified root owner: what a remedy acts on. `None` when the subject is gone.
    pub target: Option<Target>,
    pub alert: AlertFacts,
    /// The root owner's pods, in the order they were listed.
    pub pods: Vec<PodFacts>,
    pub rollout: Option<Rollout>,
    /// Why a recent rollout was not taken as the cause, when there was one.
    pub rollout_rejected: Option<String>,
    /// The root's pods healthy again, as the resolved proof judges them
    /// ([`findings::resolved::recovery`]); `None` when they are not.
    pub recovered: Option<Recovered>,
    /// The workload whose pods were read (the root, an HPA's scale target, a PDB's pods' owner).
    pub workload: Option<WorkloadState>,
    /// The replicas the workload is meant to run, when something says so
    /// ([`findings::declared_replicas`]).
    pub declared: Option<findings::Declared>,
    /// The autoscaler that sets the workload's replica count ([`findings::count_set_by`]).
    pub count_set_by: Option<observed::Hpa>,
    pub hpa: Option<observed::Hpa>,
    pub pdb: Option<observed::Pdb>,
    /// One failing pod among healthy siblings of the same revision.
    pub lone_failure: Option<LoneFailure>,
    /// The first Pending pod, with the scheduler's reason (`None` if it gave none for that pod).
    pub unschedulable: Option<Unschedulable>,
    /// The last error-looking line of the first failing pod's log (quoted, never followed).
    pub first_error_line: Option<String>,
    /// The root's pod spec: its pod template's, or a bare Pod's own.
    pub spec: observed::PodSpec,
    /// The specs of the pods in the evidence, in their order.
    pub pod_specs: Vec<observed::PodSpec>,
    /// The container of the root's pod template the alert is about: the one it names, when the
    /// template has it, else the first (a bare Pod has no template).
    pub template_container: Option<String>,
    /// Peak memory bytes per container name over the root's pods (empty without metrics).
    pub memory_peaks: BTreeMap<String, u128>,
    /// The namespace's quotas: per resource, the tightest quota's `hard` and `used`.
    pub quotas: BTreeMap<String, QuotaUsage>,
    /// The most memory and CPU a ready node allocates ([`findings::largest_node`]), when the
    /// nodes were read.
    pub largest_node: (Option<u128>, Option<u128>),
    /// The root as a node (named, with no conditions, when it is not one or was not read).
    pub node: NodeFacts,
    /// How the root node's readiness came and went lately, when it did so repeatedly: a node
    /// Ready now that keeps dropping out.
    pub node_flaps: Option<String>,
    /// The cluster's nodes, when they were read.
    pub nodes: Vec<NodeFacts>,
    /// Per node a drain may be proposed for (the root node, a node the root's pods fail on),
    /// the pods a drain would move that fit on no other node, each with why
    /// ([`findings::placement`], what `drain.capacity-elsewhere` asks); empty when they all
    /// fit, absent when the pods were not read.
    pub drain_nowhere: BTreeMap<String, Vec<String>>,
    /// Per container of the root's pods, why a node it was OOM-killed on lately (else one its
    /// pods run on) ran short of memory itself, when one did ([`findings::node_took_memory`], what `memory.killed-by-own-limit`
    /// asks): its MemoryPressure, its own events, the kernel's kills beside the container's.
    pub memory_short: BTreeMap<String, String>,
    /// The root's failing pods whose node is the common factor of the failures, each with the
    /// lines that show it ([`findings::Replacement::node_not_at_fault`], what
    /// `delete.node-not-at-fault` asks): a replacement may be placed there again.
    pub node_at_fault: BTreeMap<String, Vec<String>>,
    /// The objects the alert names besides the root that do not show their desired state
    /// ([`findings::resolved::alerted_object_met`], what `resolved.alerted-objects-met` asks):
    /// the problem is not gone while one of them does not.
    pub alerted_unmet: Vec<String>,
    /// The pods of every namespace that bind a host port the root's template binds, or that
    /// its required anti-affinity keeps away, when the evidence read them: where more replicas
    /// could not go ([`Facts::room_problem`]).
    /// `None` when the pods of every namespace were not read.
    pub in_the_way: Option<Vec<observed::Pod>>,
    /// The root as a Service (named, with an empty selector, when it is not one).
    pub service: ServiceFacts,
    pub namespace_pods: Vec<LabelledPod>,
    /// The root as a claim (named, with no size or class, when it is not one).
    pub claim: ClaimFacts,
    /// When each ConfigMap the evidence read was last written ([`Evidence::configmap_writes`]).
    pub configmap_writes: BTreeMap<String, DateTime<Utc>>,
}

/// The root's pods healthy again: its replicas all ready, none exited and nothing failed since
/// `since`.
pub(super) struct Recovered {
    pub since: DateTime<Utc>,
    /// Its replicas: the pods that did not end and get replaced.
    pub live: usize,
    /// The pods that ended and that their controller replaced: not its replicas. (Pods being
    /// deleted are leaving as well, and not named.)
    pub ended: Vec<String>,
}

impl Recovered {
    /// Whether the root's pods recovered, by the finding the resolved proof checks a claim with.
    fn of(ev: &Evidence) -> Option<Self> {
        let target = ev.context.as_ref().map(|c| &c.root_owner)?;
        let replaced = ev.workload.as_ref().map_or_else(Vec::new, |w| {
            findings::resolved::replaced_revisions(w, &ev.revisions)
        });
        let r = findings::resolved::recovery(
            (&target.kind, &target.name),
            ev.pods.iter().map(|p| &p.observed),
            &ev.events,
            &replaced,
            ev.now,
            ev.alert.starts_at,
        );
        r.healthy().then(|| Self {
            since: r.since,
            live: r.live.len(),
            ended: r
                .ended
                .iter()
                .filter(|p| !p.deleting)
                .map(|p| p.name.clone())
                .collect(),
        })
    }
}

pub(super) struct AlertFacts {
    /// Lower-case.
    pub name: String,
    pub proactive: bool,
    /// The `container` label.
    pub container: Option<String>,
    /// Why the objects cannot show the alert's condition gone, when they cannot
    /// ([`findings::condition::objects_show`]).
    pub unseen_by_objects: Option<String>,
    /// When it started firing.
    pub started: Option<DateTime<Utc>>,
}

pub(super) struct PodFacts {
    pub name: String,
    /// Its revision label (`pod-template-hash` or `controller-revision-hash`).
    pub revision: Option<String>,
    /// The node it is bound to.
    pub node: Option<String>,
    /// Its controller (the owner reference marked controller).
    pub controller: Option<String>,
    /// STATUS as `kubectl get pods` shows it.
    pub status: String,
    pub failing: bool,
    pub healthy: bool,
    /// The first terminated state among its containers, last or current.
    pub termination: Option<Termination>,
    pub waiting: Option<Waiting>,
    /// Since deletion was requested, while it is terminating.
    pub deleting_for: Option<Duration>,
    pub finalizers: Vec<String>,
    /// The Secrets its spec names to pull its images with (`imagePullSecrets`).
    pub pull_secrets: Vec<String>,
    /// Its Warning events, in the order they were listed.
    pub warnings: Vec<Warning>,
    /// One line for the RCA's contributing factors.
    pub description: String,
    /// It fails on state its emptyDir keeps across container restarts (the finding the
    /// DeletePod proof checks too).
    pub kept: Option<findings::StateKept>,
    /// Its containers killed for memory lately ([`observed::Pod::recent_memory_kills`], which
    /// the memory proof asks too).
    pub memory_killed: Vec<String>,
    /// The pod as the rest of kubemedic observes it: what findings read.
    pub observed: observed::Pod,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Termination {
    pub container: String,
    pub reason: String,
    pub exit_code: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Waiting {
    pub reason: String,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Warning {
    pub reason: String,
    pub message: String,
    pub age: Option<Duration>,
    /// Since it was first seen.
    pub first_age: Option<Duration>,
}

/// A recent rollout whose pods all fail while the previous revision's were healthy.
pub(super) struct Rollout {
    /// The workload kind (`Deployment`, `StatefulSet`).
    pub kind: String,
    /// The update strategy (`RollingUpdate`, `Recreate`, …).
    pub strategy: Option<String>,
    pub previous_health: PreviousHealth,
    pub current: Revision,
    pub previous: Revision,
    pub age_minutes: i64,
    /// Descriptions of the new revision's (failing) pods.
    pub new_pods: Vec<String>,
    /// A ConfigMap rewritten in place that a rollout undo would keep, and why
    /// ([`findings::UndoOnConfig::Kept`]).
    pub undo_keeps: Option<String>,
}

/// How the previous revision's health was judged.
pub(super) enum PreviousHealth {
    /// `n` of its pods run ready now.
    Serving(usize),
    /// No pods of it are left: it served `served` before the new revision appeared, nothing
    /// records a failure of it, and the failures began `onset` after the new one appeared.
    Served {
        served: Option<Duration>,
        onset: Option<Duration>,
    },
}

pub(super) struct LoneFailure {
    pub pod: String,
    /// The failing pod runs, for a container, another image digest than its healthy siblings
    /// of the same revision: the tag was re-pushed. One line saying so.
    pub moved_image: Option<String>,
    pub node: Option<String>,
    /// Healthy siblings of the same revision, and the nodes they run on.
    pub siblings: usize,
    pub sibling_nodes: Vec<String>,
    pub description: String,
}

pub(super) struct Revision {
    pub number: i64,
    /// Its containers' images, comma-separated.
    pub images: String,
}

pub(super) struct Unschedulable {
    pub pod: String,
    /// The FailedScheduling event's message (empty when there is none).
    pub message: String,
    /// `(key, value)` of a taint the scheduler says the pod does not tolerate.
    pub taint: Option<(String, String)>,
    /// What keeps the pod off each node, worked out from the pod's spec and the nodes: each
    /// blocker with the nodes it applies to, most nodes first.
    pub blockers: Vec<(Blocker, Vec<String>)>,
    /// The nodes only a taint of one key keeps the pod off, by what they have left now beside
    /// the pods bound to them: untainted, it would fit there (what `taint.only-blocker` asks of
    /// the node a removal untaints).
    pub fits_untainted: Vec<String>,
    /// The nodes only a taint keeps the pod off, with room for it, where a pod its required
    /// anti-affinity keeps away runs ([`findings::repelled`]): untainted, it still would not go.
    pub repelled_untainted: BTreeMap<String, String>,
    /// The pods of every namespace were not read: no node is judged to fit without a taint.
    pub bound_unread: bool,
    /// How many nodes there are (0 when the nodes were not read).
    pub nodes_total: usize,
    /// The pod's summed container requests, e.g. `memory` → `48Gi`.
    pub requests: BTreeMap<String, String>,
}

#[derive(Default)]
pub(super) struct NodeFacts {
    pub name: String,
    /// The Ready condition's reason and message.
    pub ready_message: String,
    /// `spec.unschedulable` (cordoned).
    pub cordoned: bool,
    /// Resource name → allocatable quantity.
    pub allocatable: BTreeMap<String, String>,
    /// Status of the `Ready` condition (`Unknown` without one).
    pub ready: String,
    /// What its conditions show wrong with it ([`observed::Node::trouble`]: what the drain's
    /// proof finds it at fault by); `None` also for a node that reports no Ready condition.
    pub trouble: Option<String>,
    /// Conditions other than Ready that are `True` (MemoryPressure, DiskPressure, …).
    pub pressure: Vec<String>,
    pub taints: Vec<TaintFacts>,
    /// The node as the model reads it, for the findings asked of it.
    pub observed: observed::Node,
}

pub(super) struct TaintFacts {
    pub key: String,
    pub effect: String,
    /// Kubernetes put it there ([`observed::Node::taint_by_kubernetes`]): no mistake to lift.
    pub by_kubernetes: bool,
}

#[derive(Default)]
pub(super) struct ServiceFacts {
    pub name: String,
    pub selector: BTreeMap<String, String>,
}

pub(super) struct LabelledPod {
    pub name: String,
    pub labels: BTreeMap<String, String>,
}

#[derive(Default)]
pub(super) struct ClaimFacts {
    pub name: String,
    /// Its capacity, or its request while unbound; empty when unknown
    /// ([`observed::Claim::capacity`]).
    pub capacity: String,
    /// Its requested size (`spec.resources.requests.storage`); above the capacity while an
    /// expansion is under way. Empty when unknown.
    pub requested: String,
    /// A change of its volume is under way ([`observed::Claim::resize_under_way`], what the
    /// expansion proof checks too): the conditions that say so, when any.
    pub resizing: Option<Vec<String>>,
    /// Its size now, in bytes ([`observed::Claim::size_now`]): what a new size grows from.
    pub size_now: Option<u128>,
    pub class: String,
    /// Whether its StorageClass allows expansion, if the class was read.
    pub expandable: Option<bool>,
    /// Its phase, when the claim was read and is not Bound ([`observed::Claim::bound`], what
    /// `pvc.bound` asks): no volume to grow.
    pub unbound: Option<String>,
}

// 1.20: "0/3 nodes are available: 3 node(s) had taint {dedicated: gpu}, that the pod didn't tolerate."
static UNTOLERATED_TAINT: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"had taint \{([^:}]+):\s*([^}]*)\}").ok());

/// A node's readiness flapping ([`crate::prove::readiness_flaps`]), with the warnings the
/// node reported about itself meanwhile.
fn node_flaps(ev: &Evidence, node: &str) -> Option<String> {
    let times = crate::prove::not_ready_events(&ev.events, node);
    let (count, first, last) = crate::prove::readiness_flaps(ev.now, &times)?;
    let mut why = format!(
        "its Ready condition went NotReady {count} times between {} and {} (UTC)",
        first.format("%H:%M"),
        last.format("%H:%M")
    );
    // What the node said between: its runtime's and kubelet's warnings about itself.
    let mut said: Vec<String> = ev
        .events
        .iter()
        .filter(|e| e.name == node && e.warning && e.reason != "NodeNotReady")
        .map(|e| format!("{} ×{}", e.reason, e.count))
        .collect();
    said.sort();
    said.dedup();
    if !said.is_empty() {
        why.push_str(&format!("; warnings about it: {}", said.join(", ")));
    }
    Some(why)
}

impl Facts {
    pub fn derive(ev: &Evidence) -> Self {
        let pods: Vec<PodFacts> = ev.pods.iter().map(|p| PodFacts::of(p, ev)).collect();
        let root_name = ev.root.as_ref().map(|r| r.name.clone()).unwrap_or_default();
        let object = ev.root.as_ref().map(|r| &r.object);
        let template = match object {
            Some(RootObject::Template(t)) => t.containers.as_slice(),
            _ => &[],
        };
        let spec = match object {
            Some(RootObject::Template(t)) if !t.containers.is_empty() => (**t).clone(),
            Some(RootObject::Pod(p)) => (**p).clone(),
            _ => observed::PodSpec::default(),
        };
        let (rollout, rollout_rejected) = match regression(ev, &pods) {
            Ok(r) => (r, None),
            Err(why) => (None, Some(why)),
        };
        // The first failing pod's containers whose logs show its failure, in the pod's order
        // (init containers first; the logs are a map: reading them in its order would pick a
        // container at random).
        let first_error_line =
            ev.pods
                .iter()
                .zip(&pods)
                .find(|(_, p)| p.failing)
                .and_then(|(o, p)| {
                    o.observed.failure_logs().into_iter().find_map(|c| {
                        ev.logs
                            .iter()
                            .find(|(k, _)| k.pod == p.name && k.container == c.container)
                            .and_then(|(_, log)| error_line(log))
                    })
                });
        let own = ev.subject.namespace.as_deref().unwrap_or_default();
        let in_the_way = ev.cluster_pods.as_ref().map(|cluster| {
            cluster
                .iter()
                .filter(|p| {
                    p.host_ports().iter().any(|hp| spec.host_ports.contains(hp))
                        || spec.anti_affinity.iter().any(|t| {
                            t.selects(
                                own,
                                crate::cluster::obj::namespace(&p.raw).unwrap_or_default(),
                                Some(&p.labels),
                            )
                        })
                })
                .cloned()
                .collect()
        });
        let largest_node = (
            findings::largest_node(&ev.nodes, &spec, LimitResource::Memory),
            findings::largest_node(&ev.nodes, &spec, LimitResource::Cpu),
        );
        Self {
            now: ev.now,
            subject: ev.subject.clone(),
            target: ev.context.as_ref().map(|c| c.root_owner.clone()),
            alert: AlertFacts {
                name: ev.alert.name.to_ascii_lowercase(),
                proactive: ev.alert.proactive,
                container: ev.alert.container.clone(),
                unseen_by_objects: ev.alert.unseen_by_objects.clone(),
                started: ev.alert.starts_at,
            },
            rollout,
            rollout_rejected,
            configmap_writes: ev.configmap_writes.clone(),
            recovered: Recovered::of(ev),
            workload: ev.workload.clone(),
            declared: ev.workload.as_ref().and_then(|w| {
                let pods: Vec<observed::Pod> = ev.pods.iter().map(|p| p.observed.clone()).collect();
                findings::declared_replicas(&w.raw, &pods, &ev.events)
            }),
            count_set_by: ev
                .workload
                .as_ref()
                .and_then(|w| findings::count_set_by(&ev.autoscalers, &w.kind, &w.name).cloned()),
            hpa: ev.hpa.clone(),
            pdb: ev.pdb.clone(),
            lone_failure: lone_failure(&pods),
            unschedulable: unschedulable(ev, &pods),
            first_error_line,
            spec,
            pod_specs: ev
                .pods
                .iter()
                .map(|p| observed::PodSpec::of_pod(&p.observed.raw))
                .collect(),
            // The container the alert names, when the template has it; else the first.
            template_container: ev
                .alert
                .container
                .as_ref()
                .and_then(|named| template.iter().find(|c| &c.name == named))
                .or_else(|| template.first())
                .map(|c| c.name.clone()),
            memory_peaks: memory_peaks(ev),
            quotas: ev
                .context
                .as_ref()
                .map(|c| c.detected_labels.quota_details.clone())
                .unwrap_or_default(),
            largest_node,
            node: match object {
                Some(RootObject::Node(n)) => NodeFacts::of(n),
                _ => NodeFacts {
                    name: root_name.clone(),
                    ready: "Unknown".into(),
                    ..Default::default()
                },
            },
            node_flaps: match object {
                Some(RootObject::Node(_)) => node_flaps(ev, &root_name),
                _ => None,
            },
            nodes: ev.nodes.iter().map(NodeFacts::of).collect(),
            node_at_fault: elsewhere::node_at_fault(ev),
            alerted_unmet: elsewhere::alerted_unmet(ev),
            memory_short: elsewhere::memory_short(ev),
            in_the_way,
            drain_nowhere: elsewhere::drains_nowhere(
                ev,
                matches!(object, Some(RootObject::Node(_))).then_some(root_name.as_str()),
            ),
            service: ServiceFacts {
                name: root_name.clone(),
                selector: match object {
                    Some(RootObject::Service(s)) => s.selector.clone(),
                    _ => BTreeMap::new(),
                },
            },
            namespace_pods: ev
                .namespace_pods
                .iter()
                .map(|p| LabelledPod {
                    name: p.name.clone(),
                    labels: crate::cluster::obj::map_pairs(Some(&p.labels))
                        .map(|(k, v)| (k.to_owned(), v.to_owned()))
                        .collect(),
                })
                .collect(),
            claim: match object {
                Some(RootObject::Claim(c)) => ClaimFacts::of(c, root_name, ev),
                _ => ClaimFacts {
                    name: root_name,
                    ..Default::default()
                },
            },
            pods,
        }
    }

    /// The workload whose pods were read, as a target (in the root owner's namespace).
    pub fn workload_target(&self) -> Option<Target> {
        let w = self.workload.as_ref()?;
        Some(Target::new(
            w.kind.clone(),
            w.name.clone(),
            self.target.as_ref().and_then(|t| t.namespace.clone()),
        ))
    }

    /// Why `extra` more pods of the root's template could not be placed
    /// ([`findings::room_for_more`], what `scale.schedulable` and `hpa.room-to-schedule` ask),
    /// if they could not; `None` also when the nodes were not read (the proof reads them).
    pub fn room_problem(&self, extra: i64) -> Option<String> {
        if self.nodes.is_empty() {
            return None;
        }
        let nodes: Vec<observed::Node> = self.nodes.iter().map(|n| n.observed.clone()).collect();
        let pods: Vec<observed::Pod> = self.pods.iter().map(|p| p.observed.clone()).collect();
        // Kept one per node (host ports, a required anti-affinity): who is in the way is read
        // from the pods of every namespace; not read, no room is judged.
        let apart = !self.spec.host_ports.is_empty() || !self.spec.anti_affinity.is_empty();
        let in_the_way = match &self.in_the_way {
            Some(pods) => pods.as_slice(),
            None if apart => {
                return Some(
                    "the pods of every namespace were not read: whether nodes have room for more of its pods (host ports, anti-affinity) is not known"
                        .into(),
                );
            }
            None => &[],
        };
        let (room, ev) = findings::room_for_more(
            &self.spec,
            self.subject.namespace.as_deref().unwrap_or_default(),
            &pods,
            &nodes,
            in_the_way,
            extra,
        );
        (!room).then(|| ev.join("; "))
    }

    /// Why `extra` more pods of the root's template would not fit the namespace's quotas
    /// ([`findings::quota_needs`], what the scale and autoscaler proofs ask), if they would not.
    pub fn scale_quota_problem(&self, extra: i64) -> Option<String> {
        let details = &self.quotas;
        let needs = findings::quota_needs(&self.spec, extra, |r| {
            details
                .get(r)
                .and_then(|q| observed::QuotaRoom::written("", r, &q.hard, &q.used))
        });
        let short = needs.iter().find(|n| !n.fits())?;
        let each = short.need / extra.max(1) as u128;
        let room = short.room.hard.saturating_sub(short.room.used);
        Some(format!(
            "the namespace {} quota has room for {} more ({} {} used of {})",
            if short.resource == "pods" {
                "pod"
            } else {
                short.resource
            },
            room.checked_div(each).unwrap_or(0),
            short.resource,
            short.room.used_text,
            short.room.hard_text
        ))
    }

    /// Why raising `container`'s limit of `resource` from `old` to `new` (as written) on every
    /// replica would not fit, if it would not: the namespace's quota of it
    /// ([`findings::raise_need`]) or the largest ready node ([`findings::largest_node`]) — what
    /// the raise's proof asks (`fits-quota`, `fits-node`).
    pub fn raise_problem(
        &self,
        resource: LimitResource,
        container: &str,
        old: &str,
        new: &str,
    ) -> Option<String> {
        // A template its workload's own spec keeps from its pods: no pod picks a raise up
        // (`memory.reaches-pods`, `cpu.reaches-pods`).
        if let Some(w) = &self.workload
            && let Err(held) = findings::template_reaches_pods(&w.observed)
        {
            return Some(format!("{held}, so a raised limit reaches no pod"));
        }
        let name = resource.name();
        let amount = |q: &str| quantity::amount(name, q);
        let (old_n, new_n) = (amount(old).unwrap_or(0), amount(new)?);
        // No step up at all (a limit at the most a raise proposes), or a step the raise's proof
        // bounds ([`findings::bounded_step`]): more is a sizing decision.
        if old_n > 0 && !findings::bounded_step(old_n, new_n) {
            return Some(format!(
                "its limit {old} is at or past the most kubemedic raises a {name} limit to in one step ({new}): a human must decide on more"
            ));
        }
        let replicas = findings::raised_replicas(
            self.workload.as_ref().and_then(|w| w.replicas),
            self.pods.len(),
        );
        let key = format!("limits.{name}");
        let room = self
            .quotas
            .get(&key)
            .and_then(|q| observed::QuotaRoom::written("", &key, &q.hard, &q.used));
        if let Some(n) = findings::raise_need(resource, room, replicas, (old_n, new_n))
            && !n.fits()
        {
            return Some(format!(
                "the namespace {name} quota ({key} {} used of {}) has no room to raise the limit to {new}",
                n.room.used_text, n.room.hard_text
            ));
        }
        // A node of its pods short of memory itself ([`Facts::memory_short`], what the memory
        // proof's `memory.killed-by-own-limit` asks of the same nodes): a raise takes more of
        // what the node lacks.
        if matches!(resource, LimitResource::Memory)
            && let Some(why) = self.memory_short.get(container)
        {
            return Some(format!(
                "{why}: the node is short of memory, not only the container; raising its limit takes more of what the node lacks"
            ));
        }
        let largest = match resource {
            LimitResource::Memory => self.largest_node.0,
            LimitResource::Cpu => self.largest_node.1,
        };
        largest.filter(|b| new_n > *b).map(|_| {
            format!("no ready node allocates {new} of {name}: no pod with the raised limit could be scheduled")
        })
    }

    /// The target's kind (empty when there is none).
    pub fn kind(&self) -> &str {
        self.target.as_ref().map_or("", |t| t.kind.as_str())
    }

    /// How summaries name the target.
    pub fn target_text(&self) -> String {
        self.target
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default()
    }

    /// The nodes the evidence read whose Ready condition is not True.
    pub fn not_ready_nodes(&self) -> Vec<&str> {
        self.nodes
            .iter()
            .filter(|n| n.ready != "True")
            .map(|n| n.name.as_str())
            .collect()
    }

    pub fn failing_pods(&self) -> impl Iterator<Item = &PodFacts> {
        self.pods.iter().filter(|p| p.failing)
    }

    pub fn first_failing(&self) -> Option<&PodFacts> {
        self.failing_pods().next()
    }

    /// The Warning events of the failing pods.
    pub fn failing_warnings(&self) -> impl Iterator<Item = &Warning> {
        self.failing_pods().flat_map(|p| &p.warnings)
    }

    /// The failing pods, one line each.
    pub fn failure_descriptions(&self) -> Vec<String> {
        self.failing_pods().map(|p| p.description.clone()).collect()
    }

    /// A container's limit of `resource` (`memory`, `cpu`) now ([`findings::limit_now`]: its
    /// pods', else the root's spec).
    pub fn limit(&self, container: &str, resource: &str) -> Option<String> {
        findings::limit_now(&self.spec, &self.pod_specs, container, resource).map(str::to_owned)
    }
}

impl PodFacts {
    fn of(p: &ObservedPod, ev: &Evidence) -> Self {
        let name = p.name().to_owned();
        let termination = last_termination(p);
        let waiting = waiting_reason(p);
        let restarts = p
            .observed
            .containers
            .iter()
            .filter(|c| !c.init)
            .map(|c| c.restarts)
            .sum();
        let o = &p.observed;
        Self {
            revision: o.template().cloned(),
            node: o.node.clone(),
            controller: o.controller.as_ref().map(|(_, name)| name.clone()),
            status: p.status.clone(),
            failing: p.failing(),
            healthy: p.healthy(),
            description: describe(
                &name,
                &p.status,
                termination.as_ref(),
                restarts,
                waiting.as_ref(),
            ),
            deleting_for: o.deleting_for,
            finalizers: o.finalizers.clone(),
            pull_secrets: crate::cluster::obj::array(&o.raw, &["spec", "imagePullSecrets"])
                .iter()
                .filter_map(|r| crate::cluster::obj::str_at(r, &["name"]))
                .filter(|n| !n.is_empty())
                .map(str::to_owned)
                .collect(),
            observed: p.observed.clone(),
            kept: {
                let log = findings::restarting_container(&p.observed).and_then(|c| {
                    ev.logs
                        .iter()
                        .find(|(k, _)| k.pod == name && k.container == c.name && k.previous)
                        .map(|(_, log)| log.as_str())
                });
                findings::state_kept(&p.observed, &ev.events, log)
            },
            warnings: ev
                .events
                .iter()
                .filter(|e| e.warning && e.name == name)
                .map(|e| Warning {
                    reason: e.reason.clone(),
                    message: e.message.clone(),
                    age: e.last.map(|t| ev.now - t),
                    first_age: e.first.or(e.last).map(|t| ev.now - t),
                })
                .collect(),
            memory_killed: p
                .observed
                .recent_memory_kills(&ev.events, ev.now)
                .into_iter()
                .map(|(c, _)| c.name.clone())
                .collect(),
            termination,
            waiting,
            name,
        }
    }
}

impl NodeFacts {
    fn of(node: &observed::Node) -> Self {
        let strings = |v: Option<&serde_json::Value>| -> BTreeMap<String, String> {
            crate::cluster::obj::map_pairs(v)
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect()
        };
        Self {
            observed: node.clone(),
            name: node.name.clone(),
            ready_message: node.ready_message.clone(),
            cordoned: node.unschedulable,
            allocatable: strings(Some(&node.allocatable)),
            ready: node
                .ready_status
                .clone()
                .unwrap_or_else(|| "Unknown".into()),
            trouble: node.trouble().map(|(t, _)| t),
            pressure: node
                .pressure
                .iter()
                .chain(&node.problems)
                .cloned()
                .collect(),
            taints: node
                .taints
                .iter()
                .map(|(key, _, effect)| TaintFacts {
                    key: key.clone(),
                    effect: effect.clone(),
                    by_kubernetes: node.taint_by_kubernetes(key),
                })
                .collect(),
        }
    }
}

impl Facts {
    /// Since when the pods are judged for "healthy again" and "more would help"
    /// ([`findings::resolved::healthy_since`]), as the proofs judge them.
    pub fn healthy_since(&self) -> DateTime<Utc> {
        findings::resolved::healthy_since(self.now, self.alert.started)
    }

    /// Whether Kubernetes put the taint `key` on node `node` ([`TaintFacts::by_kubernetes`]); by
    /// its key alone for a node that was not read.
    pub fn taint_by_kubernetes(&self, node: &str, key: &str) -> bool {
        match self.nodes.iter().find(|n| n.name == node) {
            Some(n) => n
                .taints
                .iter()
                .find(|t| t.key == key)
                .is_none_or(|t| t.by_kubernetes),
            None => observed::taint_key_of_kubernetes(key),
        }
    }
}

impl ClaimFacts {
    fn of(pvc: &observed::Claim, name: String, ev: &Evidence) -> Self {
        Self {
            name,
            capacity: pvc.capacity.clone(),
            requested: pvc.requested.clone(),
            resizing: pvc.resize_under_way().then(|| pvc.resizing.clone()),
            size_now: pvc.size_now(),
            class: pvc.class.clone().unwrap_or_default(),
            expandable: ev
                .storage_class
                .as_ref()
                .map(observed::StorageClass::expands),
            unbound: (!pvc.bound()).then(|| pvc.phase.clone().unwrap_or_else(|| "Unknown".into())),
        }
    }
}

/// The first container with a termination, its latest (the model's): (container, reason, exit
/// code).
fn last_termination(p: &ObservedPod) -> Option<Termination> {
    p.observed
        .containers
        .iter()
        .filter(|c| !c.init)
        .find_map(|c| {
            let (reason, exit_code, _) = c.terminated.as_ref()?;
            Some(Termination {
                container: c.name.clone(),
                reason: reason.clone(),
                exit_code: *exit_code,
            })
        })
}

fn waiting_reason(p: &ObservedPod) -> Option<Waiting> {
    p.observed
        .containers
        .iter()
        .filter(|c| !c.init)
        .find_map(|c| {
            Some(Waiting {
                reason: c.waiting.clone()?,
                message: c.waiting_message.clone(),
            })
        })
}

fn describe(
    name: &str,
    status: &str,
    termination: Option<&Termination>,
    restarts: i64,
    waiting: Option<&Waiting>,
) -> String {
    let mut s = format!("pod {name} is {status}");
    if let Some(t) = termination {
        s.push_str(&format!(
            " (container {} last terminated: {}, exit code {}, {restarts} restarts)",
            t.container, t.reason, t.exit_code
        ));
    } else if let Some(w) = waiting
        && !w.message.is_empty()
    {
        s.push_str(&format!(
            " ({}: {})",
            w.reason,
            w.message.chars().take(160).collect::<String>()
        ));
    }
    s
}

/// Peak memory per container over the metrics of the root's pods.
fn memory_peaks(ev: &Evidence) -> BTreeMap<String, u128> {
    let mut peaks = BTreeMap::new();
    for usage in ev.metrics.iter().flatten() {
        if !ev.pods.iter().any(|p| p.name() == usage.name) {
            continue;
        }
        for c in &usage.containers {
            let (Some(name), Some(bytes)) = (&c.name, c.used("memory")) else {
                continue;
            };
            let peak = peaks.entry(name.clone()).or_insert(bytes);
            *peak = (*peak).max(bytes);
        }
    }
    peaks
}

/// A line of a log that looks like the error (never an instruction; quoted as evidence only).
fn error_line(log: &str) -> Option<String> {
    observed::error_line(log).map(|l| l.chars().take(160).collect())
}
