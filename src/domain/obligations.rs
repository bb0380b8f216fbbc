//! Every obligation a built-in proof states, in one table: its id (by which the policies, the
//! notifications, the dashboard and stored proofs name it) and its statement, grouped by the
//! proof that states it and the action types that proof is for.
//!
//! The proofs in `prove/` can state only what is declared here (their constructors take an
//! [`ObligationSpec`]); the table in docs/investigation.md is generated from [`PROOFS`]
//! (`kubemedic policy obligations`), and `tests/proofs.rs` checks that every obligation a proof
//! states, and every id the policies, notifications and pages name, is declared here.

use super::action::ActionType;
use super::proof::{Obligation, ObligationStatus};

/// One obligation: what must hold, under a stable id `<proof>.<fact>`.
#[derive(Debug, PartialEq, Eq)]
pub struct ObligationSpec {
    pub id: &'static str,
    pub statement: &'static str,
}

impl ObligationSpec {
    /// The obligation with its status and what the cluster showed.
    pub fn with(&self, status: ObligationStatus, evidence: Vec<String>) -> Obligation {
        Obligation {
            id: self.id.to_owned(),
            statement: self.statement.to_owned(),
            status,
            evidence,
        }
    }

    pub fn holds(&self, evidence: Vec<String>) -> Obligation {
        self.with(ObligationStatus::Holds, evidence)
    }

    pub fn fails(&self, evidence: Vec<String>) -> Obligation {
        self.with(ObligationStatus::Fails, evidence)
    }

    /// Holds when `ok`, fails otherwise.
    pub fn check(&self, ok: bool, evidence: Vec<String>) -> Obligation {
        if ok {
            self.holds(evidence)
        } else {
            self.fails(evidence)
        }
    }
}

/// One proof: the action types it is for and the obligations it states, in order.
#[derive(Debug)]
pub struct ProofSpec {
    /// The ids' prefix.
    pub name: &'static str,
    /// What the proof is about, in a phrase.
    pub about: &'static str,
    /// The action types it proves (a built-in, or [`ActionType::NoAction`] for "no action
    /// needed"); empty for the obligations of every proof and of the undo.
    pub actions: &'static [ActionType],
    pub obligations: &'static [&'static ObligationSpec],
}

/// The statement of every proof's first obligation, stated (as unknown) when what the others
/// are judged on cannot be read.
const READABLE: &str = "What the obligations are judged on can be read";

macro_rules! proofs {
    ($(
        $name:ident ($about:literal, [$($action:ident),*]) {
            $($konst:ident = $id:literal: $statement:expr;)*
        }
    )*) => {
        $(
            #[doc = $about]
            pub mod $name {
                use super::ObligationSpec;
                $(
                    pub const $konst: ObligationSpec = ObligationSpec { id: $id, statement: $statement };
                )*
                /// Its obligations, in the order the proof states them.
                pub const ALL: &[&ObligationSpec] = &[$(&$konst),*];
            }
        )*
        /// Every proof, with its obligations.
        pub const PROOFS: &[ProofSpec] = &[$(
            ProofSpec {
                name: stringify!($name),
                about: $about,
                actions: &[$(ActionType::$action),*],
                obligations: $name::ALL,
            }
        ),*];
    };
}

proofs! {
    every ("Every proof of a built-in action, after its own obligations.", []) {
        BINDING = "binding.target-unchanged": "The target is the one that was investigated and approved: its spec has not changed since";
        DRY_RUN = "dry-run.accepted": "The API server accepts the change in a dry run";
    }
    rollback ("Rolling a workload back to an earlier revision.", [RollbackDeployment, RollbackStatefulSet]) {
        READABLE = "rollback.readable": super::READABLE;
        REVISION_NAMED = "rollback.revision-named": "The revision to return to is named in the parameters (TO_REVISION), exists, and is not the current one";
        TARGET_REVISION_HEALTHY = "rollback.target-revision-healthy": "The revision returned to served healthy and is not failing itself";
        FAILURES_BEGAN_AFTER_REVISION = "rollback.failures-began-after-revision": "The failures began after the current revision appeared";
        CHANGE_IN_POD_TEMPLATE = "rollback.change-in-pod-template": "What changed is inside the pod template, which a rollback restores";
        NO_ROLLOUT_BY_OTHERS = "rollback.no-rollout-by-others": "No rollout or rollback started by someone else is in progress";
        NOT_BLOCKED_BY_OLDER_PODS = "rollback.not-blocked-by-older-pods": "The current revision's pods are not kept from starting by a volume an older revision's pod holds (a rollout blocked that way fails whatever it changes)";
    }
    restart ("Replacing a workload's pods (a rolling restart).", [RestartDeployment]) {
        READABLE = "restart.readable": super::READABLE;
        PODS_RUN_BUT_WEDGED = "restart.pods-run-but-wedged": "The pods run but are wedged (not crashing on start, not waiting to be scheduled)";
        KEEPS_READY_PODS = "restart.keeps-ready-pods": "Replacing the pods never takes away the last ready ones";
        NOT_SHORT_OF_REPLICAS = "restart.not-short-of-replicas": "The workload runs the replicas it declares (replacing the pods of a workload scaled below its count gives it no capacity back)";
        NO_ROLLOUT_IN_PROGRESS = "restart.no-rollout-in-progress": super::NO_ROLLOUT;
        NO_BROKEN_DEPENDENCY = "restart.no-broken-dependency": super::NO_BROKEN_DEPENDENCY;
        NO_CHANGE_EXPLAINS = "restart.no-change-explains": super::NO_CHANGE_EXPLAINS;
    }
    scale ("Changing a workload's replica count.", [ScaleReplicas]) {
        READABLE = "scale.readable": super::READABLE;
        REPLICAS_NAMED = "scale.replicas-named": "The new replica count is named (REPLICAS)";
        NO_AUTOSCALER = "scale.no-autoscaler": "No HorizontalPodAutoscaler owns the replica count";
        BOUNDED = "scale.bounded": "The new count is a bounded step (at most double, or back to the declared count), and never zero";
        PODS_NOT_FAILING = "scale.pods-not-failing": "The workload's pods do not fail (more failing pods help nobody)";
        SCHEDULABLE = "scale.schedulable": "New pods can be placed: none of its pods waits for a node, a node takes them, and enough nodes have their host ports free and run no pod their required anti-affinity keeps away";
        QUOTA_ALLOWS = "scale.quota-allows": super::QUOTA_ALLOWS;
        SHORT_OF_REPLICAS = "scale.short-of-replicas": "The workload runs short of replicas: none, fewer than declared, or its pods busy near their CPU requests";
        NO_BROKEN_DEPENDENCY = "scale.no-broken-dependency": super::NO_BROKEN_DEPENDENCY;
        NO_CHANGE_EXPLAINS = "scale.no-change-explains": super::NO_CHANGE_EXPLAINS;
    }
    delete ("Deleting one pod for its controller to replace.", [DeletePod]) {
        READABLE = "delete.readable": super::READABLE;
        POD_OWNED_BY_TARGET = "delete.pod-owned-by-target": "The pod named belongs to the target and has a controller to replace it";
        POD_STILL_RUNNING = "delete.pod-still-running": "The pod is still one of its controller's replicas (not ended)";
        SIBLINGS_READY = "delete.siblings-ready": "Its siblings are ready";
        NO_ROLLOUT_IN_PROGRESS = "delete.no-rollout-in-progress": super::NO_ROLLOUT;
        FAILED_PAST_STARTUP = "delete.failed-past-startup": "The pod has failed for longer than its start-up allows";
        FAILURE_NOT_SHARED = "delete.failure-not-shared": "Its failure is not shared by its siblings";
        FAILURE_NOT_THE_NODES = "delete.failure-not-the-nodes": "Its replacement does not start where the failure follows it (a DaemonSet's pod is replaced on the same node)";
        FAILURE_NOT_IN_THE_TEMPLATE = "delete.failure-not-in-the-template": "Its failure does not come with the template its replacement is made from";
        CONFIG_UNCHANGED_SINCE_SIBLINGS = "delete.config-unchanged-since-siblings": "No configuration its replacement reads changed between its ready siblings' start and its own";
        NODE_NOT_AT_FAULT = "delete.node-not-at-fault": "Its node is not the common factor of the failures, or its replacement cannot be placed there";
    }
    memory ("Raising a container's memory limit.", [IncreaseMemoryLimits]) {
        READABLE = "memory.readable": super::READABLE;
        CONTAINER_IN_TEMPLATE = "memory.container-in-template": super::CONTAINER_IN_TEMPLATE;
        REACHES_PODS = "memory.reaches-pods": super::TEMPLATE_REACHES_PODS;
        CONTAINER_WAS_KILLED = "memory.container-was-killed": "The container named is the one killed for memory (or, for a prediction, its use nears its limit)";
        KILLED_BY_OWN_LIMIT = "memory.killed-by-own-limit": "It was killed by its own limit: it has one, and its node shows nothing that explains the kill instead";
        RAISES_BOUNDED = "memory.raises-bounded": super::LIMIT_RAISES_BOUNDED;
        FITS_QUOTA = "memory.fits-quota": super::LIMIT_FITS_QUOTA;
        FITS_NODES = "memory.fits-nodes": super::LIMIT_FITS_NODES;
        NO_CHANGE_EXPLAINS = "memory.no-change-explains": super::NO_CHANGE_EXPLAINS;
    }
    cpu ("Raising a container's CPU limit.", [IncreaseCPULimits]) {
        READABLE = "cpu.readable": super::READABLE;
        CONTAINER_IN_TEMPLATE = "cpu.container-in-template": super::CONTAINER_IN_TEMPLATE;
        REACHES_PODS = "cpu.reaches-pods": super::TEMPLATE_REACHES_PODS;
        CONTAINER_THROTTLED = "cpu.container-throttled": "The container named is the one throttled at its CPU limit";
        RAISES_BOUNDED = "cpu.raises-bounded": super::LIMIT_RAISES_BOUNDED;
        FITS_QUOTA = "cpu.fits-quota": super::LIMIT_FITS_QUOTA;
        FITS_NODES = "cpu.fits-nodes": super::LIMIT_FITS_NODES;
        NO_CHANGE_EXPLAINS = "cpu.no-change-explains": super::NO_CHANGE_EXPLAINS;
    }
    hpa ("Raising a HorizontalPodAutoscaler's maximum.", [PatchHPAMaxReplicas]) {
        READABLE = "hpa.readable": super::READABLE;
        SCALES_TARGET = "hpa.scales-target": "The HorizontalPodAutoscaler named scales the target";
        AT_MAXIMUM = "hpa.at-maximum": "It runs at its maximum";
        ABOVE_TARGET = "hpa.above-target": "Its metric stays above target";
        ROOM_TO_SCHEDULE = "hpa.room-to-schedule": "The replicas the new maximum allows could be placed: none of its pods waits for a node, a node takes them, and enough nodes have their host ports free and run no pod their required anti-affinity keeps away";
        RAISES_BOUNDED = "hpa.raises-bounded": "The new maximum is higher, by at most double (or 10 more)";
        QUOTA_ALLOWS = "hpa.quota-allows": super::QUOTA_ALLOWS;
    }
    pvc ("Expanding a PersistentVolumeClaim.", [ExpandPVC]) {
        READABLE = "pvc.readable": super::READABLE;
        BELONGS_TO_TARGET = "pvc.belongs-to-target": "The claim named is the target's";
        BOUND = "pvc.bound": "The claim is Bound";
        CLASS_EXPANDABLE = "pvc.class-expandable": "Its StorageClass allows volume expansion";
        NO_RESIZE_UNDER_WAY = "pvc.no-resize-under-way": "No resize of the claim is under way";
        GROWS_BOUNDED = "pvc.grows-bounded": "The new size is larger, by at most 4x";
    }
    pdb ("Relaxing a PodDisruptionBudget.", [RelaxPDB]) {
        READABLE = "pdb.readable": super::READABLE;
        GUARDS_TARGET = "pdb.guards-target": "The PodDisruptionBudget named guards the target's pods";
        BLOCKS_A_WAITING_DRAIN = "pdb.blocks-a-waiting-drain": "It allows no eviction while a drain waits on it";
        PODS_HEALTHY = "pdb.pods-healthy": "All the pods it guards are healthy (it is misconfigured, not doing its job)";
        GUARDS_NO_QUORUM = "pdb.guards-no-quorum": "It guards no quorum (not a StatefulSet, not a majority of three or more)";
        RELAXED_MINIMALLY = "pdb.relaxed-minimally": "The new budget lets one pod go at a time (at most half of them)";
    }
    drain ("Cordoning and draining a node.", [CordonDrainNode]) {
        READABLE = "drain.readable": super::READABLE;
        NODE_IS_THE_COMMON_FACTOR = "drain.node-is-the-common-factor": "The node is the common factor: it is unhealthy, or two or more of its pods fail while pods of the same workloads and templates serve elsewhere";
        NOT_LAST_SCHEDULABLE_NODE = "drain.not-last-schedulable-node": "Other ready, schedulable nodes can take its pods";
        NOT_CLUSTER_WIDE = "drain.not-cluster-wide": "At most one node, or fewer than a third of the nodes, is not ready (not a cluster-wide problem)";
        PDBS_ALLOW = "drain.pdbs-allow": "The PodDisruptionBudgets of its pods allow their eviction";
        CAPACITY_ELSEWHERE = "drain.capacity-elsewhere": "Each evicted pod fits on another node, beside what runs there";
        NO_BARE_POD = "drain.no-bare-pod": "Every pod it evicts has a controller to replace it (an evicted bare pod is gone for good)";
        NO_STATEFUL_POD_STUCK = "drain.no-stateful-pod-stuck": "No StatefulSet pod on it was deleted and waits for a kubelet that is gone (its replacement cannot start until a human confirms the node is down)";
    }
    taint ("Removing a taint from a node.", [RemoveNodeTaint]) {
        READABLE = "taint.readable": super::READABLE;
        PRESENT = "taint.present": "The node carries the taint";
        NOT_SET_BY_KUBERNETES = "taint.not-set-by-kubernetes": "The taint was not put there by Kubernetes for a node condition or role";
        ONLY_BLOCKER = "taint.only-blocker": "It is the only thing keeping a waiting pod off this node";
    }
    gitrevert ("Reverting the change in Git that a GitOps controller applied.", [GitRevert]) {
        READABLE = "gitrevert.readable": super::READABLE;
        GITOPS_MANAGED = "gitrevert.gitops-managed": "The target is managed by a GitOps controller";
        CHANGE_IDENTIFIED = "gitrevert.change-identified": "The change to make in Git is identified";
    }
    undo ("Restoring the spec recorded before a remediation that made its target worse.", []) {
        READABLE = "undo.readable": super::READABLE;
        WORSE_THAN_BEFORE = "undo.worse-than-before": "The target is worse than before the remediation: fewer ready pods, more failing pods, or a failure none of its pods showed before";
        RESTORED_BY_SPEC = "undo.restored-by-spec": "Every step of the remediation changed only the target's own spec, which restoring the recorded spec takes back";
        STATE_RECORDED = "undo.state-recorded": "The target's spec was recorded before the remediation's first write";
        UNCHANGED_SINCE = "undo.unchanged-since": "Nobody changed the target since the remediation: its spec is the one the execution left (the replicas aside, where an autoscaler sets them)";
    }
    resolved ("\"No action needed\": the problem is gone, shown by the cluster.", [NoAction]) {
        READABLE = "resolved.readable": super::READABLE;
        TARGET_VERIFIED = "resolved.target-verified": "The object the alert is about was found, so its state can be checked";
        CONDITION_OBSERVABLE = "resolved.condition-observable": "The alert's condition can be seen gone: the cluster's objects show it, or Prometheus, evaluating the alert's own expression now, finds it no more";
        DESIRED_STATE_MET = "resolved.desired-state-met": "The target's desired state is met";
        ALERTED_OBJECTS_MET = "resolved.alerted-objects-met": "Every object the alert names shows its desired state met";
        PODS_HEALTHY = "resolved.pods-healthy": "Every pod of the target runs and is ready, with no exit since the alert began (or for the last 30 minutes)";
        NO_FAILURES_SINCE_ONSET = "resolved.no-failures-since-onset": "Nothing failed to be created, scheduled or started since the alert began (or for the last 30 minutes)";
    }
}

// Statements several proofs share.
const NO_ROLLOUT: &str = "No rollout of the workload is in progress";
const NO_BROKEN_DEPENDENCY: &str =
    "Nothing the workload depends on is broken now (new pods would meet the same failure)";
const QUOTA_ALLOWS: &str = "The namespace's ResourceQuota has room for the new pods";
const CONTAINER_IN_TEMPLATE: &str = "The container named is in the workload's pod template";
const TEMPLATE_REACHES_PODS: &str = "The new template reaches the pods: the workload's own spec does not hold its rollout (a paused Deployment, an OnDelete update strategy)";
const LIMIT_RAISES_BOUNDED: &str = "The new limit is higher than the current one, by at most 4x";
const LIMIT_FITS_QUOTA: &str = "The namespace's quota has room for the new limit on every replica";
const LIMIT_FITS_NODES: &str = "A node can hold the new limit";
const NO_CHANGE_EXPLAINS: &str = "No change to what the workload reads (its configuration, its namespace's policies, its Service) came before the failures in a way that explains them: the workload ran without them before the change and fails since its pods read it";

/// The obligation declared under `id`, if any.
pub fn find(id: &str) -> Option<&'static ObligationSpec> {
    PROOFS
        .iter()
        .flat_map(|p| p.obligations.iter().copied())
        .find(|o| o.id == id)
}

/// The proof of a built-in action type (or of "no action needed"), if it is one.
pub fn proof_of(action_type: &ActionType) -> Option<&'static ProofSpec> {
    PROOFS.iter().find(|p| p.actions.contains(action_type))
}

/// The line before the generated table in docs/investigation.md.
pub const DOC_BEGIN: &str = "<!-- BEGIN GENERATED by `kubemedic policy obligations --update docs/investigation.md`; do not edit -->";
/// The line after it.
pub const DOC_END: &str = "<!-- END GENERATED -->";

/// The table as Markdown: what docs/investigation.md holds between [`DOC_BEGIN`] and
/// [`DOC_END`].
pub fn markdown() -> String {
    let mut out = String::new();
    for p in PROOFS {
        let actions = if p.actions.is_empty() {
            String::new()
        } else {
            format!(
                " ({})",
                p.actions
                    .iter()
                    .map(|a| format!("`{a}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        out.push_str(&format!("### `{}`{actions}\n\n{}\n\n", p.name, p.about));
        out.push_str("| id | statement |\n|---|---|\n");
        for o in p.obligations {
            out.push_str(&format!("| `{}` | {} |\n", o.id, o.statement));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn every_id_is_declared_once_under_its_proofs_prefix() {
        let mut seen = HashSet::new();
        for p in PROOFS {
            assert!(!p.obligations.is_empty(), "{} states nothing", p.name);
            for o in p.obligations {
                assert!(seen.insert(o.id), "{} is declared twice", o.id);
                let prefix = o.id.split('.').next().unwrap_or_default();
                if p.name != "every" {
                    assert_eq!(prefix, p.name, "{} is declared under {}", o.id, p.name);
                }
                assert!(
                    o.statement.starts_with(char::is_uppercase) && !o.statement.ends_with('.'),
                    "{}: a statement is one sentence, capitalised, without a full stop",
                    o.id
                );
            }
        }
    }

    #[test]
    fn an_action_type_has_one_proof_at_most() {
        let mut seen = HashSet::new();
        for p in PROOFS {
            for a in p.actions {
                assert!(seen.insert(a.clone()), "{a} has two proofs");
            }
        }
        assert_eq!(
            proof_of(&ActionType::RollbackStatefulSet).map(|p| p.name),
            Some("rollback")
        );
        // Every built-in action type has its proof.
        for a in ActionType::BUILTIN {
            assert!(proof_of(&a).is_some(), "{a} has no proof");
        }
        assert!(proof_of(&ActionType::Custom("Custom".into())).is_none());
        assert_eq!(
            proof_of(&ActionType::NoAction).map(|p| p.name),
            Some("resolved")
        );
        assert_eq!(find("pvc.bound"), Some(&pvc::BOUND));
    }
}
