//! The rollout and lone-pod rules' unit tests (`facts/rollout.rs`), on incidents built with
//! [`super::fixtures`].

use serde_json::json;

use crate::domain::ActionType;

use super::fixtures::{Incident, PodFixture, pod};
use super::*;

#[test]
fn an_oom_kill_right_after_a_rollout_is_the_rollout_s_fault() {
    let d = Incident::deployment("api")
        .memory_limit("256Mi")
        .rolled_out("shop/app:2.0", 30)
        .with(pod("api-2-a").owned_by("api-2").oom_killed())
        .diagnosis();
    assert_eq!(d.mode, "RolloutRegression");
    assert_eq!(
        d.proposal.map(|p| p.action_type),
        Some(ActionType::RollbackDeployment)
    );
    // Paused on purpose: the rollback's proof refuses to undo it, so a human decides.
    let d = Incident::deployment("api")
        .memory_limit("256Mi")
        .rolled_out("shop/app:2.0", 30)
        .paused()
        .with(pod("api-2-a").owned_by("api-2").oom_killed())
        .diagnosis();
    assert_eq!(d.mode, "RolloutRegression");
    assert!(d.proposal.is_none(), "{:?}", d.proposal);
    assert!(
        d.human.as_deref().is_some_and(|h| h.contains("paused")),
        "{:?}",
        d.human
    );
}

#[test]
fn new_pods_never_ready_are_a_regression_and_pods_that_served_are_not() {
    // As the rollback proof counts failing pods (observed::Pod::fails_in_rollout).
    let rolled = |p: PodFixture| {
        Incident::deployment("api")
            .rolled_out("shop/app:2.0", 30)
            .previous_gone()
            .alert_started(20)
            .with(p)
            .diagnosis()
    };
    let never = rolled(pod("api-2-a").owned_by("api-2").never_ready());
    assert_eq!(never.mode, "RolloutRegression", "{}", never.summary);
    let served = rolled(pod("api-2-a").owned_by("api-2").not_ready_since(10));
    assert_ne!(served.mode, "RolloutRegression", "{}", served.summary);
}

#[test]
fn with_the_previous_revision_gone_its_record_of_service_decides() {
    // Revision 1 served a week; revision 2 appeared 30 min ago; its pods fail since.
    let d = Incident::deployment("api")
        .rolled_out("shop/app:2.0", 30)
        .previous_gone()
        .alert_started(20)
        .with(pod("api-2-a").owned_by("api-2").crash_looping("Error", 1))
        .diagnosis();
    assert_eq!(d.mode, "RolloutRegression");
    assert!((d.confidence - 0.85).abs() < 1e-9, "{}", d.confidence);
    assert!(
        d.factors.iter().any(|f| f.contains("served for 6d 23h")),
        "{:?}",
        d.factors
    );
    assert_eq!(
        d.proposal.map(|p| p.action_type),
        Some(ActionType::RollbackDeployment)
    );
}

#[test]
fn failures_that_began_before_the_rollout_are_not_its_fault() {
    // Whether the previous revision's pods are gone or still serving: when the failures
    // began is one finding, which the rollback proof asks too.
    // Revision 2 rolled out 30 minutes ago; its pod crash-loops; the alert started
    // `alerted` minutes ago.
    let diagnosis = |previous_gone: bool, alerted: i64| {
        let i = Incident::deployment("api").rolled_out("shop/app:2.0", 30);
        let i = if previous_gone {
            i.previous_gone()
        } else {
            i.with(pod("api-1-a").revision("1").owned_by("api-1"))
        };
        i.alert_started(alerted)
            .with(
                pod("api-2-a")
                    .revision("2")
                    .owned_by("api-2")
                    .crash_looping("Error", 1),
            )
            .diagnosis()
    };
    for previous_gone in [true, false] {
        let d = diagnosis(previous_gone, 90);
        assert_eq!(
            (d.mode, d.outcome),
            ("CrashLoopBackOff", InvestigationOutcome::Inconclusive),
            "{}",
            d.summary
        );
        assert!(
            d.factors
                .iter()
                .any(|f| f.starts_with("not the last rollout: the failures began")),
            "{:?}",
            d.factors
        );
        // The same incident alerted after the revision appeared is the rollout's.
        let d = diagnosis(previous_gone, 20);
        assert_eq!(d.mode, "RolloutRegression", "{}", d.summary);
    }
}

#[test]
fn a_previous_revision_that_failed_too_is_not_rolled_back_to() {
    let d = Incident::deployment("api")
        .rolled_out("shop/app:2.0", 30)
        .previous_gone()
        .warning(
            "api-1-old",
            "BackOff",
            "Back-off restarting failed container",
            40,
        )
        .with(pod("api-2-a").owned_by("api-2").crash_looping("Error", 1))
        .diagnosis();
    assert_ne!(d.mode, "RolloutRegression");
}

#[test]
fn one_failing_pod_among_healthy_siblings_is_replaced_not_rolled_back() {
    let d = Incident::deployment("api")
        .with(pod("api-1").owned_by("api-1"))
        .with(pod("api-2").owned_by("api-1"))
        .with(pod("api-3").owned_by("api-1").crash_looping("Error", 2))
        .diagnosis();
    assert_eq!(d.mode, "LonePodFailure");
    let p = d.proposal.unwrap_or_else(|| panic!("no proposal"));
    assert_eq!(
        (p.action_type.as_str(), json!(p.parameters)),
        ("DeletePod", json!({"POD_NAME": "api-3"}))
    );
}

/// Issue 43: the stuck-creating rule reads the model's `Pod::stuck_creating`, not the status
/// text: a pod whose containers wait in PodInitializing for twenty minutes beside a serving
/// sibling is stuck creating too.
#[test]
fn a_pod_stuck_initializing_is_stuck_creating() {
    let d = Incident::deployment("api")
        .replicas(2)
        .with(pod("api-1").owned_by("api-1"))
        .with(
            pod("api-2")
                .owned_by("api-1")
                .waiting("PodInitializing", "")
                .not_ready_since(20),
        )
        .diagnosis();
    assert_eq!(d.mode, "ContainerCreatingStuck", "{}", d.summary);
}

#[test]
fn a_lone_pod_whose_template_fails_it_is_not_replaced() {
    // One pod cannot create its container while its siblings of the same revision run: a
    // replacement from the same template meets the same error (what the delete's proof says).
    let d = Incident::deployment("api")
        .with(pod("api-1").owned_by("api-1"))
        .with(pod("api-2").owned_by("api-1"))
        .with(pod("api-3").owned_by("api-1").waiting(
            "CreateContainerError",
            "failed to create containerd task: mount source path does not exist",
        ))
        .diagnosis();
    assert!(d.proposal.is_none(), "{:?}", d.proposal);
    assert!(
        d.human
            .as_deref()
            .is_some_and(|h| h.contains("CreateContainerError")),
        "{:?}",
        d.human
    );
}

#[test]
fn a_lone_pod_is_replaced_only_once_it_has_failed_past_its_start_up() {
    let incident = |minutes| {
        Incident::deployment("api")
            .with(pod("api-1").owned_by("api-1"))
            .with(pod("api-2").owned_by("api-1"))
            .with(pod("api-3").owned_by("api-1").not_ready_since(minutes))
            .diagnosis()
    };
    // Not ready for a minute of the two its start-up allows: what the delete's proof refuses.
    let d = incident(1);
    assert_eq!(d.mode, "LonePodFailure");
    assert!(d.proposal.is_none());
    assert!(
        d.human.as_deref().is_some_and(|h| h.contains("too early")),
        "{:?}",
        d.human
    );
    let d = incident(5);
    let p = d
        .proposal
        .unwrap_or_else(|| panic!("no proposal: {:?}", d.human));
    assert_eq!(json!(p.parameters), json!({"POD_NAME": "api-3"}));
}

#[test]
fn a_rollout_older_than_the_window_is_not_the_cause() {
    let d = Incident::deployment("api")
        .rolled_out("shop/app:2.0", 7 * 60)
        .with(pod("api-2-a").owned_by("api-2").crash_looping("Error", 1))
        .diagnosis();
    assert_eq!(d.mode, "CrashLoopBackOff");
}
