//! The rules that hand to a human what the proof of their action would refuse: a taint
//! Kubernetes wrote, a raise no quota or node holds or past the step a proof allows, a scale
//! the quota has no room for or an autoscaler owns.

use crate::domain::ActionType;

use super::fixtures::{Incident, pod};

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

#[test]
fn an_oom_kill_at_the_largest_limit_a_raise_proposes_goes_to_a_human() {
    let d = Incident::deployment("api")
        .memory_limit("16Gi")
        .with(pod("api-1").oom_killed())
        .diagnosis();
    assert_eq!(d.mode, "OOMKilled");
    assert!(d.proposal.is_none(), "{:?}", d.proposal);
    assert!(
        d.human
            .as_deref()
            .is_some_and(|h| h.contains("a human must decide on more")),
        "{:?}",
        d.human
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
