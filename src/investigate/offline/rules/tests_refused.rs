//! The rules that hand to a human what the proof of their action would refuse: a taint
//! Kubernetes wrote, a raise no quota or node holds or past the step a proof allows, a scale
//! the quota has no room for or an autoscaler owns; and every proposal, whoever made it,
//! meeting its proof's findings before it is made (`rules::vet`, issue 43).

use serde_json::json;

use super::fixtures::{Incident, PodFixture, pod};
use super::*;
use crate::domain::{ActionType, Change, DepKind, Dependency, Neighbourhood};

/// `d` is the rule's `mode`, proposes nothing, and tells a human what `says`.
pub(super) fn to_a_human(d: &Diagnosis, mode: &str, says: &str) {
    assert_eq!(d.mode, mode, "{}", d.summary);
    assert!(d.proposal.is_none(), "{:?}", d.proposal);
    assert!(
        d.human.as_deref().is_some_and(|h| h.contains(says)),
        "{:?}",
        d.human
    );
}

#[test]
fn a_taint_kubernetes_wrote_is_not_proposed_for_removal() {
    let pending = |manager: &str| {
        Incident::deployment("api")
            .with(pod("api-abc-1").revision("abc").pending())
            .tainted_node("pool-a", "maintenance", manager)
            .diagnosis()
    };
    let by_hand = pending("kubectl-taint");
    assert_eq!(
        by_hand.proposal.map(|p| p.action_type),
        Some(ActionType::RemoveNodeTaint),
        "{}",
        by_hand.summary
    );
    // The node's taints last written by the kubelet (or a controller): the removal's proof
    // refuses it, so the rule hands it to a human.
    let by_kubelet = pending("kubelet");
    assert!(by_kubelet.proposal.is_none(), "{:?}", by_kubelet.proposal);
    assert!(
        by_kubelet
            .human
            .is_some_and(|h| h.contains("set by Kubernetes")),
        "{}",
        by_kubelet.summary
    );
}

/// Issue 43: a node only a taint keeps the pod off by what it allocates, but whose pods leave
/// too little room for it now, is no place the removal would put it (`taint.only-blocker`
/// judges the node's room beside the pods bound to it): the rule asks the same.
#[test]
fn a_taint_on_a_node_with_no_room_left_is_not_proposed_for_removal() {
    let pending = |used: &str| {
        Incident::deployment("api")
            .with(pod("api-abc-1").revision("abc").requests_cpu("2").pending())
            .tainted_node("pool-a", "maintenance", "kubectl-taint")
            .bound_on("pool-a", used)
            .diagnosis()
    };
    let room = pending("1");
    assert_eq!(
        room.proposal.map(|p| p.action_type),
        Some(ActionType::RemoveNodeTaint),
        "{}",
        room.summary
    );
    let full = pending("3");
    assert!(full.proposal.is_none(), "{:?}", full.proposal);
    assert!(
        full.human
            .as_deref()
            .is_some_and(|h| h.contains("too little room")),
        "{:?}",
        full.human
    );
}

/// The removal proposed is what its write removes and its proof sets aside: one effect of the
/// key where it blocks with one, every effect (none named) where it blocks with several, so
/// the pod is not left kept off by the effect the removal left.
#[test]
fn a_taint_blocking_with_several_effects_is_removed_with_all_of_them() {
    let effect = |effects: &[&str]| {
        let d = Incident::deployment("api")
            .with(pod("api-abc-1").revision("abc").pending())
            .tainted_node_with("pool-a", "maintenance", effects, "kubectl-taint")
            .diagnosis();
        let p = d.proposal.expect("a removal is proposed");
        assert_eq!(p.action_type, ActionType::RemoveNodeTaint);
        assert_eq!(p.parameters["TAINT_KEY"], json!("maintenance"));
        p.parameters.get("TAINT_EFFECT").cloned()
    };
    assert_eq!(effect(&["NoSchedule"]), Some(json!("NoSchedule")));
    assert_eq!(effect(&["NoSchedule", "NoExecute"]), None);
}

/// An OOM kill of `incident`'s pod api-1 goes to a human, told each of `says`.
fn oom_kill_goes_to_a_human(incident: Incident, says: &[&str]) {
    let d = incident.with(pod("api-1").oom_killed()).diagnosis();
    assert_eq!(d.mode, "OOMKilled");
    assert!(d.proposal.is_none(), "{:?}", d.proposal);
    assert!(
        d.human
            .as_deref()
            .is_some_and(|h| says.iter().all(|s| h.contains(s))),
        "{:?}",
        d.human
    );
}

#[test]
fn an_oom_kill_at_the_largest_limit_a_raise_proposes_goes_to_a_human() {
    oom_kill_goes_to_a_human(
        Incident::deployment("api").memory_limit("16Gi"),
        &["a human must decide on more"],
    );
}

/// Issue 43: a raise is a template change; a paused Deployment rolls none out, so no pod would
/// pick the higher limit up (as `memory.reaches-pods` refuses it).
#[test]
fn an_oom_kill_of_a_paused_deployment_goes_to_a_human() {
    oom_kill_goes_to_a_human(
        Incident::deployment("api").memory_limit("256Mi").paused(),
        &["paused", "reaches no pod"],
    );
}

#[test]
fn a_scale_back_the_quota_has_no_room_for_goes_to_a_human() {
    let d = Incident::deployment("feed")
        .replicas(0)
        .applied(3)
        .quota("pods", "9", "10")
        .diagnosis();
    assert_eq!(d.mode, "ScaledToZero", "{}", d.summary);
    assert!(d.proposal.is_none());
    assert!(
        d.human.as_deref().is_some_and(|h| h.contains("quota")),
        "{:?}",
        d.human
    );
}

#[test]
fn a_workload_scaled_to_zero_under_an_autoscaler_goes_to_a_human() {
    let applied = |replicas: i64| Incident::deployment("feed").replicas(0).applied(replicas);
    let d = applied(3).diagnosis();
    assert_eq!(d.mode, "ScaledToZero", "{}", d.summary);
    assert!(d.proposal.is_some());
    let d = applied(3).autoscaled_by("feed-hpa").diagnosis();
    assert_eq!(d.mode, "ScaledToZero", "{}", d.summary);
    assert!(d.proposal.is_none());
    assert!(
        d.human
            .as_deref()
            .unwrap_or_default()
            .contains("HorizontalPodAutoscaler feed-hpa"),
        "{:?}",
        d.human
    );
}

#[test]
fn a_raise_no_quota_or_node_holds_goes_to_a_human_as_its_proof_would_refuse_it() {
    // The CPU quota has no room for 250m more on each of two replicas.
    let throttled = |quota_used: &str| {
        Incident::deployment("api")
            .replicas(2)
            .cpu_limit("500m", false)
            .alert("CPUThrottlingHigh", None)
            .quota("limits.cpu", quota_used, "2")
            .with(pod("api-1"))
            .diagnosis()
    };
    assert!(throttled("1").proposal.is_some());
    let d = throttled("1600m");
    assert!(d.proposal.is_none());
    assert!(
        d.human.as_deref().is_some_and(|h| h.contains("limits.cpu")),
        "{:?}",
        d.human
    );
    // No ready node allocates the raised memory limit.
    let killed = |memory: &str| {
        Incident::deployment("api")
            .memory_limit("256Mi")
            .node_allocating("worker-1", "4", memory)
            .with(pod("api-1").oom_killed())
            .diagnosis()
    };
    assert!(killed("16Gi").proposal.is_some());
    let d = killed("300Mi");
    assert!(d.proposal.is_none());
    assert!(
        d.human
            .as_deref()
            .is_some_and(|h| h.contains("no ready node allocates 384Mi")),
        "{:?}",
        d.human
    );
}

/// Issue 43: the rollout rule asks what the rollback proof asks of a ConfigMap rewritten in
/// place (`findings::undo_on_config`): written after the previous revision's pods last read it,
/// a rollout undo keeps its new content, so a human gets it, naming the ConfigMap. Written
/// before that revision appeared, it ran on it and the rollback is proposed.
#[test]
fn a_configmap_rewritten_with_the_release_is_not_undone_by_a_rollback() {
    let rolled = |written_minutes: i64| {
        Incident::deployment("api")
            .rolled_out("shop/app:2.0", 30)
            .previous_gone()
            .alert_started(20)
            .reads_configmap("api-config", written_minutes)
            .with(pod("api-2-a").owned_by("api-2").crash_looping("Error", 1))
            .diagnosis()
    };
    let d = rolled(31);
    assert_eq!(d.mode, "RolloutRegression");
    assert!(d.proposal.is_none(), "{:?}", d.proposal);
    assert!(
        d.human.as_deref().is_some_and(|h| h.contains(
            "ConfigMap api-config was written at 11:29:00, after revision 1 appeared, whose pods read it only when they start"
        )),
        "{:?}",
        d.human
    );
    let d = rolled(8 * 24 * 60);
    assert_eq!(
        d.proposal.map(|p| p.action_type),
        Some(ActionType::RollbackDeployment),
        "{:?}",
        d.human
    );
}

/// Issue 43: the rules ask what the deletion's proof asks of a replacement
/// (`findings::Replacement`). A ConfigMap written after the ready siblings started and before
/// the failing pod did is what sets it apart: its replacement reads it too, so a human gets it,
/// naming the ConfigMap. Written before any of them started, the failure is the pod's own.
#[test]
fn a_lone_pod_that_alone_read_a_configuration_change_is_not_replaced() {
    let incident = |written: i64| {
        Incident::deployment("api")
            .configmap_written("api-config", written)
            .with(pod("api-1").owned_by("api-1").reads_configmap("api-config"))
            .with(pod("api-2").owned_by("api-1").reads_configmap("api-config"))
            .with(
                pod("api-3")
                    .owned_by("api-1")
                    .reads_configmap("api-config")
                    .started(10)
                    .crash_looping("Error", 2),
            )
            .diagnosis()
    };
    let d = incident(20);
    assert_eq!(d.mode, "LonePodFailure");
    assert!(d.proposal.is_none(), "{:?}", d.proposal);
    assert!(
        d.human.as_deref().is_some_and(
            |h| h.contains("ConfigMap api-config changed at 11:40:00; pod api-3 read it since")
        ),
        "{:?}",
        d.human
    );
    let d = incident(90);
    let p = d
        .proposal
        .unwrap_or_else(|| panic!("no proposal: {:?}", d.human));
    assert_eq!(json!(p.parameters), json!({"POD_NAME": "api-3"}));
}

/// Issue 43: a pod stuck creating beside one that serves is replaced only when no other pod
/// waits the same way: a failure two pods share is not either one's own, as the deletion's
/// proof says (`delete.failure-not-shared`).
#[test]
fn a_pod_stuck_creating_is_not_replaced_when_a_sibling_is_stuck_too() {
    let stuck = |name: &str| {
        pod(name)
            .owned_by("api-1")
            .waiting("ContainerCreating", "")
            .not_ready_since(20)
    };
    let with_healthy = |second: PodFixture| {
        Incident::deployment("api")
            .replicas(3)
            .with(pod("api-1").owned_by("api-1"))
            .with(stuck("api-2"))
            .with(second)
            .warning(
                "api-2",
                "FailedMount",
                "MountVolume.SetUp failed for volume \"data\"",
                15,
            )
            .diagnosis()
    };
    let d = with_healthy(stuck("api-3"));
    assert_eq!(d.mode, "ContainerCreatingStuck", "{}", d.summary);
    assert!(d.proposal.is_none(), "{:?}", d.proposal);
    assert!(
        d.human
            .as_deref()
            .is_some_and(|h| h.contains("sibling api-3")),
        "{:?}",
        d.human
    );
    let d = with_healthy(pod("api-3").owned_by("api-1"));
    assert_eq!(d.mode, "ContainerCreatingStuck", "{}", d.summary);
    let p = d
        .proposal
        .unwrap_or_else(|| panic!("no proposal: {:?}", d.human));
    assert_eq!(json!(p.parameters), json!({"POD_NAME": "api-2"}));
}

/// Issue 43: a proposed restart meets what the restart's proof asks before it is made
/// (`rules::vet`, `findings::restart_keeps_ready`): with the Recreate strategy, a restart stops
/// the pods that still serve, so a human gets it; rolling, the restart is proposed.
#[test]
fn a_restart_that_would_stop_the_serving_pods_is_not_proposed() {
    let log = "2026-01-01T11:58:00Z ERROR db: connection pool exhausted (10/10 in use)";
    let wedged = |strategy: &str| {
        Incident::deployment("api")
            .replicas(3)
            .strategy(strategy)
            .with(pod("api-1"))
            .with(pod("api-2"))
            .with(pod("api-3").not_ready_since(5))
            .log("api-3", log)
            .diagnosis()
    };
    let d = wedged("Recreate");
    assert_eq!(d.mode, "WedgedRuntime", "{}", d.summary);
    assert!(d.proposal.is_none(), "{:?}", d.proposal);
    assert!(
        d.human
            .as_deref()
            .is_some_and(|h| h.contains("strategy Recreate stops all 3 pods first; 2 ready now")),
        "{:?}",
        d.human
    );
    let d = wedged("RollingUpdate");
    assert_eq!(
        d.proposal.as_ref().map(|p| p.action_type.as_str()),
        Some("RestartDeployment"),
        "{:?}",
        d.human
    );
}

/// Issue 43: a drain meets what the drain's proof asks before it is proposed
/// (`drain.not-cluster-wide`): a flapping node among nodes of which several are down is the
/// cluster's trouble, and a human gets it; among healthy nodes the drain is proposed.
#[test]
fn a_flapping_node_is_not_drained_while_the_cluster_is_in_trouble() {
    let ready = json!([{"type": "Ready", "status": "True"}]);
    let flapping = |others: &[&str]| {
        Incident::node("node-1", ready.clone(), others).node_flapped("node-1", 4, 5)
    };
    let d = flapping(&["node-2", "node-3", "node-4"]).diagnosis();
    assert_eq!(d.mode, "NodeFlapping", "{}", d.summary);
    assert_eq!(
        d.proposal.as_ref().map(|p| p.action_type.as_str()),
        Some("CordonDrainNode")
    );
    let d = flapping(&["node-2"])
        .node_not_ready("node-3")
        .node_not_ready("node-4")
        .diagnosis();
    to_a_human(
        &d,
        "NodeFlapping",
        "2 of 4 nodes are not ready (node-3, node-4)",
    );
}

/// Issue 43: an action no rule proposed (a learned pattern's) meets what its proof will ask,
/// as a rule's does (`rules::vetted`): a pod whose failure a sibling shares is not deleted; the
/// one pod failing among serving siblings is.
#[test]
fn a_learned_deletion_meets_the_questions_of_the_deletion_s_proof() {
    let incident = |third: PodFixture| {
        Incident::deployment("api")
            .replicas(3)
            .with(pod("api-1").owned_by("api-1"))
            .with(pod("api-2").owned_by("api-1").crash_looping("Error", 2))
            .with(third)
            .facts()
    };
    let delete = |f: &Facts| {
        let target = f.target.clone().unwrap_or_else(|| panic!("no target"));
        vetted(
            &ActionType::DeletePod,
            &ActionParams::delete_pod("api-2").to_map(),
            f,
            &target,
        )
    };
    let shared = delete(&incident(
        pod("api-3").owned_by("api-1").crash_looping("Error", 2),
    ));
    assert!(
        shared
            .as_ref()
            .is_err_and(|why| why.contains("sibling api-3")),
        "{shared:?}"
    );
    assert_eq!(delete(&incident(pod("api-3").owned_by("api-1"))), Ok(()));
}

/// Issue 43: a new pod waiting to attach a volume an older revision's pod still holds is kept
/// from starting by the rollout's strategy, not by what the revision changed: the rollout rule
/// does not blame the release, as the rollback's proof would refuse the return
/// (`rollback.not-blocked-by-older-pods`).
#[test]
fn a_rollout_blocked_by_a_volume_an_older_pod_holds_is_not_blamed_on_the_release() {
    blamed_on_the_rollout_only_without(
        || {
            pod("api-2-a")
                .owned_by("api-2")
                .waiting("ContainerCreating", "")
                .not_ready_since(25)
        },
        |i| {
            i.warning(
                "api-2-a",
                "FailedAttachVolume",
                "Multi-Attach error for volume \"pvc-1\" Volume is already used by pod(s) api-1-a",
                20,
            )
        },
    );
}

/// A rollout to revision 2 whose pod is `new_pod()`, beside revision 1's serving pod: the
/// rollout rule blames the rollout, and with `more` added it does not, nor proposes a rollback.
fn blamed_on_the_rollout_only_without(
    new_pod: impl Fn() -> PodFixture,
    more: impl Fn(Incident) -> Incident,
) {
    let rolled = |extra: bool| {
        let i = Incident::deployment("api")
            .rolled_out("shop/app:2.0", 30)
            .alert_started(20)
            .with(pod("api-1-a").owned_by("api-1"))
            .with(new_pod());
        if extra { more(i) } else { i }.diagnosis()
    };
    let d = rolled(false);
    assert_eq!(d.mode, "RolloutRegression", "{}", d.summary);
    let d = rolled(true);
    assert_ne!(d.mode, "RolloutRegression", "{}", d.summary);
    assert!(
        d.proposal
            .as_ref()
            .is_none_or(|p| p.action_type != ActionType::RollbackDeployment),
        "{:?}",
        d.proposal
    );
}

/// Issue 43: a drain meets the drain proof's `drain.not-last-schedulable-node` before it is
/// proposed: the one node of a cluster, or one whose every other node is cordoned, is not
/// drained; a human gets it.
#[test]
fn the_last_schedulable_node_is_not_drained() {
    let ready = json!([{"type": "Ready", "status": "True"}]);
    let d = Incident::node("node-1", ready.clone(), &["node-2"])
        .node_flapped("node-1", 4, 5)
        .diagnosis();
    assert_eq!(
        d.proposal.as_ref().map(|p| p.action_type.as_str()),
        Some("CordonDrainNode"),
        "{:?}",
        d.human
    );
    let d = Incident::node("node-1", ready, &[])
        .node_flapped("node-1", 4, 5)
        .diagnosis();
    to_a_human(
        &d,
        "NodeFlapping",
        "no other node of 1 is ready and schedulable",
    );
}

/// Issue 43: where the pods of every namespace were not read (the list refused), nothing is
/// judged to fit elsewhere, as the drain's proof (`drain.capacity-elsewhere`) would not judge
/// it either: before, an unread list passed as "all fit".
#[test]
fn a_node_whose_pods_were_not_read_is_not_drained() {
    let ready = json!([{"type": "Ready", "status": "True"}]);
    let d = Incident::node("node-1", ready, &["node-2"])
        .node_flapped("node-1", 4, 5)
        .cluster_unread()
        .diagnosis();
    to_a_human(&d, "NodeFlapping", "the pods on node node-1 were not read");
}

/// Issue 43: the rollout rule blames the new revision only when the failures are its alone, as
/// the rollback's proof asks (`rollback.failures-began-after-revision`): a pod of an older
/// revision failing as well is not undone by returning to the previous one.
#[test]
fn a_rollout_is_not_blamed_while_a_pod_of_an_older_revision_fails_too() {
    blamed_on_the_rollout_only_without(
        || pod("api-2-a").owned_by("api-2").crash_looping("Error", 1),
        |i| i.with(pod("api-0-a").owned_by("api-0").crash_looping("Error", 2)),
    );
}

/// Issue 43: a memory raise meets what `memory.killed-by-own-limit` asks of the nodes: a node
/// of the pods under MemoryPressure is short of memory itself, and a bigger limit takes more of
/// what it lacks; a human gets the prediction.
#[test]
fn a_memory_raise_on_a_node_under_memory_pressure_goes_to_a_human() {
    let predicted = |pressure: bool| {
        let i = Incident::deployment("api")
            .memory_limit("256Mi")
            .with(pod("api-1").on("node-1"))
            .memory_use("api-1", "230Mi")
            .predicted("ContainerMemoryExhaustionPredicted");
        if pressure {
            i.node_under_memory_pressure("node-1")
        } else {
            i.node_allocating("node-1", "4", "16Gi")
        }
        .diagnosis()
    };
    let d = predicted(false);
    assert_eq!(
        d.proposal.map(|p| p.action_type),
        Some(ActionType::IncreaseMemoryLimits),
        "{:?}",
        d.human
    );
    let d = predicted(true);
    to_a_human(
        &d,
        "MemoryExhaustionPredicted",
        "node node-1 is under MemoryPressure",
    );
}

/// Issue 43: "not crashing" before a restart is the restart proof's `Pod::broken`: a wedged pod
/// its liveness probe restarted once, running again and not ready, is still wedged, and the
/// restart the proof would allow is proposed.
#[test]
fn a_wedged_pod_restarted_once_is_still_wedged() {
    let log = "2026-01-01T11:58:00Z ERROR db: connection pool exhausted (10/10 in use)";
    let mut restarted = pod("api-3").not_ready_since(5);
    restarted.container()["restartCount"] = json!(1);
    restarted.container()["lastState"] = json!({"terminated": {"reason": "Error",
        "exitCode": 137, "startedAt": "2026-01-01T10:00:00Z", "finishedAt": "2026-01-01T11:00:00Z"}});
    let d = Incident::deployment("api")
        .replicas(3)
        .with(pod("api-1"))
        .with(pod("api-2"))
        .with(restarted)
        .log("api-3", log)
        .diagnosis();
    assert_eq!(d.mode, "WedgedRuntime", "{}", d.summary);
    assert_eq!(
        d.proposal.as_ref().map(|p| p.action_type.as_str()),
        Some("RestartDeployment"),
        "{:?}",
        d.human
    );
}

/// Issue 43: the nodes a memory raise asks are the proof's (`findings::memory_nodes`): those
/// the raised container was killed on. A sidecar killed for memory on a node under
/// MemoryPressure does not stop raising the app's limit, killed on a healthy node; the app
/// killed on the node short of memory does.
#[test]
fn a_memory_raise_asks_only_the_nodes_its_container_was_killed_on() {
    let raise = |app_node: &str| {
        Incident::deployment("api")
            .memory_limit("256Mi")
            .with(pod("api-1").memory_limit("256Mi").oom_killed().on(app_node))
            .with(pod("api-2").sidecar_oom_killed("proxy").on("node-2"))
            .node_allocating("node-1", "4", "16Gi")
            .node_under_memory_pressure("node-2")
            .diagnosis()
    };
    let d = raise("node-1");
    let p = d
        .proposal
        .as_ref()
        .unwrap_or_else(|| panic!("{:?}", d.human));
    assert_eq!(p.action_type, ActionType::IncreaseMemoryLimits);
    assert_eq!(
        p.parameters.get("CONTAINER").and_then(|c| c.as_str()),
        Some("app")
    );
    to_a_human(
        &raise("node-2"),
        "OOMKilled",
        "node node-2 is under MemoryPressure",
    );
}

/// Issue 43: a pod that has ended (Evicted, phase Failed) is one its controller replaced
/// already: deleting it only removes its record, as `delete.pod-still-running` says, and the
/// rules ask it too (`Replacement::still_running`), so a learned deletion of one goes to a
/// human with that line instead of a proof's refusal.
#[test]
fn a_learned_deletion_of_a_pod_that_has_ended_is_not_proposed() {
    let mut evicted = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "api-2", "namespace": "shop",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "api-1",
                "uid": "api-1", "controller": true}]},
        "spec": {"containers": [{"name": "app", "image": "shop/app:1.0"}]},
        "status": {"phase": "Failed", "reason": "Evicted",
            "message": "The node was low on resource: memory."}});
    evicted["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
    let f = Incident::deployment("api")
        .replicas(2)
        .with(pod("api-1").owned_by("api-1"))
        .with_raw_pod(evicted)
        .facts();
    let target = f.target.clone().unwrap_or_else(|| panic!("no target"));
    let why = vetted(
        &ActionType::DeletePod,
        &ActionParams::delete_pod("api-2").to_map(),
        &f,
        &target,
    );
    assert!(
        why.as_ref()
            .is_err_and(|w| w.contains("pod api-2 has ended (Failed, Evicted)")),
        "{why:?}"
    );
}

#[test]
fn a_lone_pod_is_not_replaced_while_a_rollout_is_under_way() {
    // Paused half-way: one of three pods on the new template.
    let incident = |updated: i64| {
        Incident::deployment("api")
            .replicas(3)
            .paused()
            .updated(updated)
            .with(pod("api-1").owned_by("api-1"))
            .with(pod("api-2").owned_by("api-1"))
            .with(pod("api-3").owned_by("api-1").not_ready_since(5))
            .diagnosis()
    };
    let d = incident(1);
    assert_eq!(d.mode, "LonePodFailure");
    assert!(d.proposal.is_none(), "{:?}", d.proposal);
    assert!(
        d.human.as_deref().is_some_and(|h| h.contains("rollout")),
        "{:?}",
        d.human
    );
    // Paused with every pod updated, nothing rolls out: its controller makes the pod again
    // from the template it runs, so replacing the pod is proposed as for any Deployment.
    let d = incident(3);
    assert_eq!(
        d.proposal.map(|p| p.action_type),
        Some(ActionType::DeletePod),
        "{:?}",
        d.human
    );
}

/// The neighbourhood of Deployment shop/api: its failures began `onset` minutes ago, and
/// `dependency` is what it depends on.
fn neighbourhood_of_api(onset: i64, dependency: Dependency) -> Neighbourhood {
    Neighbourhood {
        target: "Deployment shop/api".into(),
        onset: Some(Incident::at(onset)),
        symptoms: vec![],
        failing_pods_run: false,
        dependencies: vec![dependency],
    }
}

/// Issue 43: whichever rule proposed it, a raise meets what its proof asks of the
/// neighbourhood (`memory.no-change-explains`): a ConfigMap the pods mount, edited just before
/// the kills, is what a human looks at, not a higher limit the pods would fill again.
#[test]
fn a_raise_for_kills_a_configmap_edit_explains_goes_to_a_human() {
    let incident = Incident::deployment("api")
        .memory_limit("256Mi")
        .mounts_configmap("cache", 7 * 24 * 60)
        .with(pod("api-1").oom_killed());
    let f = incident.facts();
    let mut d = diagnose(&f);
    assert_eq!(
        d.proposal.as_ref().map(|p| p.action_type.as_str()),
        Some("IncreaseMemoryLimits")
    );
    let mut after = diagnose(&f);
    let target = crate::domain::Target::new("ConfigMap", "cache", Some("shop".into()));
    let edited = Dependency::of(DepKind::Config, target, "configuration the pods read").changed(
        Some(Change {
            at: Incident::at(6),
            what: "changed by kubectl-edit".into(),
        }),
    );
    // Edited after the kills began: a response to them, not their cause. The raise stands.
    vet_neighbourhood(&mut after, &neighbourhood_of_api(8, edited.clone()), &f);
    assert!(after.proposal.is_some(), "{:?}", after.human);
    // Edited two minutes before them.
    vet_neighbourhood(&mut d, &neighbourhood_of_api(4, edited), &f);
    assert!(d.proposal.is_none());
    let human = d.human.unwrap_or_default();
    assert!(
        human.contains("ConfigMap shop/cache") && human.contains("a higher memory limit"),
        "{human}"
    );
}

/// Issue 43: a restart meets what its proof asks (`restart.no-broken-dependency`): new pods
/// meet a broken dependency too.
#[test]
fn a_restart_while_a_dependency_is_broken_goes_to_a_human() {
    let f = Incident::deployment("api")
        .with(pod("api-1").never_ready())
        .facts();
    let restart = || {
        let mut d = Diagnosis::new("Wedged", "api-1 runs but is not ready");
        d.target = f.target.clone();
        d.proposal = Some(Proposal {
            action_type: ActionType::RestartDeployment,
            parameters: Default::default(),
            git_change: String::new(),
            workflow_id: None,
        });
        d
    };
    let mut d = restart();
    let healthy = Dependency::new(DepKind::Service, "Service shop/db", "named in the logs");
    let mut kept = restart();
    vet_neighbourhood(&mut kept, &neighbourhood_of_api(5, healthy.clone()), &f);
    assert!(kept.proposal.is_some(), "{:?}", kept.human);
    let broken = healthy.unhealthy("has no ready endpoints", None);
    vet_neighbourhood(&mut d, &neighbourhood_of_api(5, broken), &f);
    assert!(d.proposal.is_none());
    assert!(
        d.human
            .as_deref()
            .is_some_and(|h| h.contains("Service shop/db") && h.contains("repair it first")),
        "{:?}",
        d.human
    );
}

/// Issue 43: a claim with no volume bound has nothing to expand (`pvc.bound`, which the
/// expansion's proof asks): the rule asks it too.
#[test]
fn a_predicted_claim_fill_on_a_claim_not_bound_goes_to_a_human() {
    let d = Incident::claim("data", "10Gi")
        .storage_class(true)
        .predicted("KubePersistentVolumeFillingUp");
    assert_eq!(
        d.diagnosis().proposal.map(|p| p.action_type),
        Some(ActionType::ExpandPVC)
    );
    let d = d.claim_phase("Lost").diagnosis();
    assert_eq!(d.mode, "PVCFillPredicted");
    assert!(d.proposal.is_none());
    assert!(
        d.human.as_deref().is_some_and(|h| h.contains("is Lost")),
        "{:?}",
        d.human
    );
}

/// Issue 43: the rules count a pod as failing as the dependency graph does: a pod a minute into
/// ContainerCreating is starting, until a warning about it says it cannot start
/// (`observed::Pod::heed`).
#[test]
fn a_pod_still_creating_fails_for_the_rules_once_a_warning_says_it_cannot_start() {
    let creating = || Incident::deployment("api").with(pod("api-1").creating(1));
    let failing = |i: Incident| i.facts().failing_pods().count();
    assert_eq!(failing(creating()), 0);
    let warned = creating().warning(
        "api-1",
        "FailedMount",
        "MountVolume.SetUp failed for volume \"config\": configmap \"api\" not found",
        0,
    );
    assert_eq!(failing(warned), 1);
}

/// Issue 43: a pod its node evicted is a record its ReplicaSet replaced
/// (`observed::Pod::outlived`), not a replica that fails: a rollout paused half-way with every
/// replica serving is still a release step someone chose, record or not.
#[test]
fn a_pod_its_node_evicted_does_not_hide_a_held_rollout() {
    let evicted = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "api-9", "namespace": "shop",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "api-1",
                "uid": "api-1", "controller": true}]},
        "spec": {"containers": [{"name": "app", "image": "shop/app:1.0"}]},
        "status": {"phase": "Failed", "reason": "Evicted",
            "message": "The node was low on resource: memory. "}});
    let held = |record: bool| {
        let i = Incident::deployment("api")
            .replicas(2)
            .paused()
            .updated(1)
            .with(pod("api-1").owned_by("api-1"))
            .with(pod("api-2").owned_by("api-2"));
        let i = if record {
            i.with_raw_pod(evicted.clone())
        } else {
            i
        };
        let d = i.diagnosis();
        (d.mode, d.human)
    };
    let (mode, human) = held(false);
    assert!(
        human.as_deref().is_some_and(|h| h.contains("paused")),
        "{mode}: {human:?}"
    );
    assert_eq!(held(true), (mode, human));
}

/// Issue 43: the scale-back rule refused on any container that ever ended, where the scale's
/// proof (`scale.pods-not-failing`) judged only the pods' state now; both ask
/// `findings::more_would_help` since the look-back now: an exit days ago keeps nothing back,
/// one two minutes ago does.
#[test]
fn a_container_that_ended_days_ago_does_not_keep_a_scale_back_from_being_proposed() {
    let ended_at = |finished: &str| {
        let mut p = pod("listing-abc-1")
            .revision("abc")
            .not_ready_since(1)
            .raw();
        p["status"]["containerStatuses"][0]["restartCount"] = json!(1);
        p["status"]["containerStatuses"][0]["lastState"] = json!({"terminated": {
            "reason": "Error", "exitCode": 1, "finishedAt": finished}});
        Incident::deployment("listing")
            .replicas(1)
            .scaled("listing-abc", true, 6, 600)
            .scaled("listing-abc", false, 1, 40)
            .with_raw_pod(p)
            .diagnosis()
    };
    let long_ago = ended_at("2025-12-28T09:00:00Z");
    assert_eq!(long_ago.mode, "ScaledBelowDeclared", "{}", long_ago.summary);
    assert_eq!(
        long_ago.proposal.map(|p| p.action_type),
        Some(ActionType::ScaleReplicas)
    );
    assert_ne!(ended_at("2026-01-01T11:58:00Z").mode, "ScaledBelowDeclared");
}
