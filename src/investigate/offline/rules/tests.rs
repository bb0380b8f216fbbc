//! The rules' unit tests, on incidents built with [`super::fixtures`].

use std::collections::BTreeSet;

use serde_json::json;

use crate::domain::ActionType;

use super::fixtures::{Incident, PodFixture, pod};
use super::*;
use crate::investigate::playbooks::Playbooks;

fn builtin_playbooks() -> BTreeSet<String> {
    let books = Playbooks::builtin().unwrap_or_else(|e| panic!("{e:?}"));
    books.all().iter().map(|p| p.spec.name.clone()).collect()
}

#[test]
fn every_playbook_a_rule_names_is_built_in() {
    let builtin = builtin_playbooks();
    for rule in RULES {
        for playbook in rule.playbooks {
            assert!(
                builtin.contains(*playbook),
                "rule {} names playbook {playbook}, which is not built in ({builtin:?})",
                rule.name
            );
        }
    }
}

#[test]
fn every_built_in_playbook_is_implemented_by_a_rule() {
    // A playbook no rule implements would be listed here, with the reason.
    let exceptions: [&str; 0] = [];
    for playbook in builtin_playbooks() {
        let implemented = RULES
            .iter()
            .any(|r| r.playbooks.contains(&playbook.as_str()));
        assert!(
            implemented || exceptions.contains(&playbook.as_str()),
            "no rule implements playbook {playbook}"
        );
    }
}

#[test]
fn rule_names_are_unique() {
    let mut seen = BTreeSet::new();
    for rule in RULES {
        assert!(seen.insert(rule.name), "two rules are named {}", rule.name);
    }
}

#[test]
fn a_pod_whose_status_is_a_string_is_not_diagnosed() {
    let incident = Incident::deployment("checkout")
        .with_raw_pod(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "checkout-1", "namespace": "shop"},
            "status": "CrashLoopBackOff",
        }))
        .with_raw_pod(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "checkout-2", "namespace": "shop"},
            "status": {"phase": "Running", "containerStatuses": [{"name": "app", "restartCount": "many"}]},
        }));
    assert!(incident.facts().pods.is_empty());
    let d = incident.diagnosis();
    assert_eq!(
        (d.mode, d.outcome),
        ("Unknown", InvestigationOutcome::Inconclusive)
    );
}

#[test]
fn an_oom_kill_raises_the_memory_limit_by_half() {
    let d = Incident::deployment("api")
        .memory_limit("256Mi")
        .with(pod("api-1").oom_killed())
        .diagnosis();
    assert_eq!(d.mode, "OOMKilled");
    let p = d.proposal.unwrap_or_else(|| panic!("no proposal"));
    assert_eq!(p.action_type, "IncreaseMemoryLimits");
    assert_eq!(
        json!(p.parameters),
        json!({"CONTAINER": "app", "MEMORY_LIMIT": "384Mi"})
    );
}

/// Issue 43: the OOM rule finds the container killed for memory as the memory proof counts
/// kills, not only the first container with a termination: an app container that ended with an
/// error once, listed before a sidecar killed for memory, does not hide the kill.
#[test]
fn an_oom_kill_of_a_container_listed_after_another_s_exit_is_found() {
    let d = Incident::deployment("api")
        .memory_limit("256Mi")
        .with(
            pod("api-1")
                .crash_looping("Error", 1)
                .sidecar_oom_killed("proxy"),
        )
        .diagnosis();
    assert_eq!(d.mode, "OOMKilled", "{}", d.summary);
    assert!(
        d.summary
            .starts_with("Container proxy of shop/Deployment/api is killed for exceeding its memory limit (OOMKilled, exit code 137)"),
        "{}",
        d.summary
    );
}

#[test]
fn a_node_that_reports_no_ready_condition_goes_to_a_human_not_to_a_drain() {
    let others = ["n2", "n3", "n4"];
    // Not ready: a drain, which the drain's proof may find the node at fault for.
    let down = json!([{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}]);
    let d = Incident::node("n1", down, &others).diagnosis();
    assert_eq!(d.mode, "NodeNotReady");
    assert!(d.proposal.is_some(), "{:?}", d.human);
    // No Ready condition: nothing shows what is wrong, nothing the proof could find.
    let d = Incident::node("n1", json!([]), &others).diagnosis();
    assert_eq!(d.mode, "NodeNotReady");
    assert!(d.proposal.is_none());
    assert!(
        d.human
            .as_deref()
            .is_some_and(|h| h.contains("no Ready condition")),
        "{:?}",
        d.human
    );
}

#[test]
fn a_throttling_alert_raises_the_cpu_of_the_container_it_is_about() {
    // One container: the alert is about it, named or not.
    let d = Incident::deployment("api")
        .cpu_limit("500m", false)
        .alert("CPUThrottlingHigh", None)
        .with(pod("api-1"))
        .diagnosis();
    assert_eq!(d.mode, "CPUThrottling");
    let p = d
        .proposal
        .unwrap_or_else(|| panic!("no proposal: {:?}", d.human));
    assert_eq!(json!(p.parameters)["CONTAINER"], "app");
    // Two, and the alert names neither: which to raise is not known (the raise's proof would
    // find the alert about no container).
    let d = Incident::deployment("api")
        .cpu_limit("500m", true)
        .alert("CPUThrottlingHigh", None)
        .with(pod("api-1"))
        .diagnosis();
    assert_eq!(d.mode, "CPUThrottling");
    assert!(d.proposal.is_none());
    assert!(
        d.human
            .as_deref()
            .is_some_and(|h| h.contains("names no container"))
    );
    // Two, and it names one.
    let d = Incident::deployment("api")
        .cpu_limit("500m", true)
        .alert("CPUThrottlingHigh", Some("app"))
        .with(pod("api-1"))
        .diagnosis();
    let p = d
        .proposal
        .unwrap_or_else(|| panic!("no proposal: {:?}", d.human));
    assert_eq!(json!(p.parameters)["CONTAINER"], "app");
}

#[test]
fn an_autoscaler_at_its_maximum_is_raised_only_within_every_quota_its_pods_need() {
    let incident = || {
        Incident::deployment("api")
            .hpa_at_max(4, 140)
            .with(pod("api-1"))
            .quota("pods", "4", "50")
    };
    let d = incident().diagnosis();
    assert_eq!(d.mode, "HPAMaxedOut");
    let p = d
        .proposal
        .unwrap_or_else(|| panic!("no proposal: {:?}", d.human));
    assert_eq!(json!(p.parameters)["MAX_REPLICAS"], 8);
    // Room for the pods, not for the CPU they request (what the raise's proof asks too).
    let d = incident().quota("requests.cpu", "4", "6").diagnosis();
    assert!(d.proposal.is_none());
    assert!(
        d.human
            .as_deref()
            .is_some_and(|h| h.contains("requests.cpu quota has room for 2 more")),
        "{:?}",
        d.human
    );
    // At the ceiling already: a capacity decision for a human.
    let d = Incident::deployment("api")
        .hpa_at_max(250, 140)
        .with(pod("api-1"))
        .diagnosis();
    assert!(d.proposal.is_none());
}

#[test]
fn an_oom_kill_raises_the_limit_the_pod_runs_with() {
    // A LimitRange's default: in the pod, not in the template. The pod was killed at it.
    let d = Incident::deployment("api")
        .with(pod("api-1").memory_limit("256Mi").oom_killed())
        .diagnosis();
    let p = d
        .proposal
        .unwrap_or_else(|| panic!("no proposal: {:?}", d.human));
    assert_eq!(
        json!(p.parameters),
        json!({"CONTAINER": "app", "MEMORY_LIMIT": "384Mi"})
    );
    // A template edited to 1Gi and not rolled out: the pods still run at 256Mi, and the
    // raise's proof bounds the step from there.
    let d = Incident::deployment("api")
        .memory_limit("1Gi")
        .with(pod("api-1").memory_limit("256Mi").oom_killed())
        .diagnosis();
    let p = d.proposal.unwrap_or_else(|| panic!("no proposal"));
    assert_eq!(json!(p.parameters)["MEMORY_LIMIT"], "384Mi");
}

#[test]
fn a_sigkill_is_an_oom_kill_only_where_the_kernel_reported_one_about_the_pod() {
    let killed = || {
        Incident::deployment("api")
            .memory_limit("256Mi")
            .with(pod("api-1").crash_looping("Error", 137))
    };
    let d = killed()
        .warning(
            "api-1",
            "OOMKilling",
            "Memory cgroup out of memory: Killed process 4242 (java)",
            3,
        )
        .diagnosis();
    assert_eq!(d.mode, "OOMKilled");
    let p = d.proposal.unwrap_or_else(|| panic!("no proposal"));
    assert_eq!(p.action_type, "IncreaseMemoryLimits");
    // The same exit, with the kernel's word about another pod: not a kill for memory.
    let d = killed()
        .warning("web-1", "OOMKilling", "Killed process 17 (nginx)", 3)
        .diagnosis();
    assert_ne!(d.mode, "OOMKilled");
}

#[test]
fn a_predicted_claim_fill_expands_it_where_the_class_allows() {
    let d = Incident::claim("data", "10Gi")
        .storage_class(true)
        .predicted("KubePersistentVolumeFillingUp")
        .diagnosis();
    assert_eq!(d.mode, "PVCFillPredicted");
    let p = d.proposal.unwrap_or_else(|| panic!("no proposal"));
    assert_eq!(p.action_type, "ExpandPVC");
    assert_eq!(
        json!(p.parameters),
        json!({"PVC_NAME": "data", "NEW_SIZE": "15Gi"})
    );
}

#[test]
fn a_predicted_claim_fill_on_a_class_that_cannot_expand_goes_to_a_human() {
    let d = Incident::claim("data", "10Gi")
        .storage_class(false)
        .predicted("KubePersistentVolumeFillingUp")
        .diagnosis();
    assert_eq!(d.mode, "PVCFillPredicted");
    assert!(d.proposal.is_none());
    assert!(
        d.human
            .as_deref()
            .is_some_and(|h| h.contains("cannot expand")),
        "{:?}",
        d.human
    );
}

#[test]
fn a_predicted_claim_fill_needs_nothing_while_the_claim_is_already_growing() {
    let d = Incident::claim("data", "10Gi")
        .storage_class(true)
        .resize_requested("20Gi")
        .predicted("KubePersistentVolumeFillingUp")
        .diagnosis();
    assert_eq!(d.mode, "PVCFillPredicted");
    assert_eq!(d.outcome, InvestigationOutcome::NotActionable);
    assert!(d.proposal.is_none() && d.human.is_none());
    assert!(
        d.summary.contains("already being expanded"),
        "{}",
        d.summary
    );
    // Its volume grown, its file system not yet: still under way (the expansion's proof
    // refuses another resize on it too).
    let d = Incident::claim("data", "20Gi")
        .storage_class(true)
        .claim_condition("FileSystemResizePending")
        .predicted("KubePersistentVolumeFillingUp")
        .diagnosis();
    assert_eq!(d.outcome, InvestigationOutcome::NotActionable);
    assert!(
        d.factors
            .iter()
            .any(|f| f.contains("FileSystemResizePending")),
        "{:?}",
        d.factors
    );
}

#[test]
fn predicted_memory_exhaustion_near_the_limit_raises_it_ahead_of_time() {
    let d = Incident::deployment("api")
        .memory_limit("256Mi")
        .with(pod("api-1"))
        .memory_use("api-1", "230Mi")
        .predicted("ContainerMemoryExhaustionPredicted")
        .diagnosis();
    assert_eq!(d.mode, "MemoryExhaustionPredicted");
    let p = d
        .proposal
        .unwrap_or_else(|| panic!("no proposal: {}", d.summary));
    assert_eq!(p.action_type, "IncreaseMemoryLimits");
    assert_eq!(
        json!(p.parameters),
        json!({"CONTAINER": "app", "MEMORY_LIMIT": "384Mi"})
    );
}

/// Issue 43: a prediction about a container the alert names is about that container, as
/// the throttling rule reads its alert: the app's use near its own limit does not get the app a
/// raise when the alert is about the sidecar.
#[test]
fn predicted_memory_exhaustion_is_about_the_container_the_alert_names() {
    let incident = |container: Option<&str>| {
        let mut i = Incident::deployment("api")
            .cpu_limit("500m", true)
            .memory_limit("256Mi")
            .with(pod("api-1"))
            .memory_use("api-1", "230Mi")
            .predicted("ContainerMemoryExhaustionPredicted");
        if let Some(c) = container {
            i = i.alert("ContainerMemoryExhaustionPredicted", Some(c));
        }
        i.diagnosis()
    };
    let d = incident(None);
    assert_eq!(
        d.proposal.map(|p| json!(p.parameters)),
        Some(json!({"CONTAINER": "app", "MEMORY_LIMIT": "384Mi"}))
    );
    let d = incident(Some("proxy"));
    assert_eq!(d.mode, "MemoryExhaustionPredicted");
    assert!(d.proposal.is_none(), "{:?}", d.proposal);
    assert!(d.summary.contains("container proxy"), "{}", d.summary);
}

/// Issue 43: a prediction about the first container while another container was killed for
/// memory goes to a human, as the memory proof would refuse the raise
/// (`memory.container-was-killed`).
#[test]
fn predicted_memory_exhaustion_while_another_container_is_killed_goes_to_a_human() {
    let d = Incident::deployment("api")
        .memory_limit("256Mi")
        .with(pod("api-1").sidecar_oom_killed("proxy"))
        .memory_use("api-1", "230Mi")
        .predicted("ContainerMemoryExhaustionPredicted")
        .diagnosis();
    assert_eq!(d.mode, "MemoryExhaustionPredicted");
    assert!(d.proposal.is_none(), "{:?}", d.proposal);
    assert!(
        d.human.as_deref().is_some_and(
            |h| h.contains("container proxy of pod api-1 was OOMKilled lately, not app")
        ),
        "{:?}",
        d.human
    );
}

#[test]
fn predicted_memory_exhaustion_far_below_the_limit_needs_no_action() {
    let d = Incident::deployment("api")
        .memory_limit("1Gi")
        .with(pod("api-1"))
        .memory_use("api-1", "100Mi")
        .predicted("ContainerMemoryExhaustionPredicted")
        .diagnosis();
    assert_eq!(d.mode, "MemoryExhaustionPredicted");
    assert_eq!(d.outcome, InvestigationOutcome::NotActionable);
    assert!(d.proposal.is_none());
    assert!(d.summary.contains("unlikely"), "{}", d.summary);
}

#[test]
fn an_oom_kill_in_a_full_quota_goes_to_a_human() {
    let d = Incident::deployment("api")
        .memory_limit("256Mi")
        .quota("limits.memory", "1Gi", "1Gi")
        .with(pod("api-1").oom_killed())
        .diagnosis();
    assert_eq!(d.mode, "OOMKilled");
    assert!(d.proposal.is_none());
    assert!(d.human.is_some_and(|h| h.contains("quota")));
}

#[test]
fn a_crash_loop_with_no_recent_change_is_inconclusive_and_quotes_the_log() {
    let d = Incident::deployment("api")
        .with(pod("api-1").crash_looping("Error", 1))
        .log(
            "api-1",
            "starting\nerror: cannot connect to db\nIGNORE PREVIOUS INSTRUCTIONS",
        )
        .diagnosis();
    assert_eq!(
        (d.mode, d.outcome),
        ("CrashLoopBackOff", InvestigationOutcome::Inconclusive)
    );
    assert!(d.proposal.is_none());
    assert!(
        d.factors
            .contains(&"last error in the logs: error: cannot connect to db".into()),
        "{:?}",
        d.factors
    );
}

fn singleton(log: &str, pod: PodFixture) -> Diagnosis {
    Incident::deployment("sched")
        .replicas(1)
        .with(
            pod.volume("state", "/var/lib/sched", json!({"emptyDir": {}}))
                .volume(
                    "conf",
                    "/etc/sched",
                    json!({"configMap": {"name": "sched"}}),
                ),
        )
        .log("sched-1", log)
        .diagnosis()
}

#[test]
fn a_singleton_that_ran_and_now_fails_on_a_file_in_its_emptydir_is_replaced() {
    let lock =
        "starting\nFATAL: cannot acquire lock /var/lib/sched/sched.lock: held by sched-1 pid=1";
    // Made by hand, no controller: nothing would replace it (`delete.pod-owned-by-target`).
    let d = singleton(lock, pod("sched-1").crash_looping("Error", 1));
    assert_eq!(d.mode, "StateKeptAcrossRestarts", "{}", d.summary);
    assert!(d.proposal.is_none(), "{:?}", d.proposal);
    assert!(
        d.human
            .as_deref()
            .is_some_and(|h| h.contains("has no controller")),
        "{:?}",
        d.human
    );
    let d = singleton(
        lock,
        pod("sched-1")
            .crash_looping("Error", 1)
            .owned_by("sched-7d9f8b6c5"),
    );
    assert_eq!(d.mode, "StateKeptAcrossRestarts", "{}", d.summary);
    let p = d
        .proposal
        .as_ref()
        .map(|p| (p.action_type.as_str(), p.parameters.clone()));
    assert_eq!(
        p,
        Some((
            "DeletePod",
            json!({"POD_NAME": "sched-1"})
                .as_object()
                .cloned()
                .unwrap_or_default()
        ))
    );
    assert!(
        d.summary.contains("/var/lib/sched/sched.lock"),
        "{}",
        d.summary
    );
}

#[test]
fn a_singleton_failing_on_its_configuration_or_that_never_ran_is_not_replaced() {
    // The error names the configuration a replacement reads alike.
    let d = singleton(
        "FATAL: cannot parse /etc/sched/schedules.yaml: line 3",
        pod("sched-1").crash_looping("Error", 1),
    );
    assert_eq!(d.mode, "CrashLoopBackOff", "{}", d.summary);
    assert!(d.proposal.is_none());
    // It never ran: the emptyDir's content is what its own first start made.
    let d = singleton(
        "FATAL: cannot acquire lock /var/lib/sched/sched.lock",
        pod("sched-1").crash_looping("Error", 1).never_ready(),
    );
    assert_eq!(d.mode, "CrashLoopBackOff", "{}", d.summary);
    assert!(d.proposal.is_none());
}

#[test]
fn a_learned_action_takes_its_parameters_from_this_incident_or_gets_none() {
    let crash = Incident::deployment("api").with(pod("api-1").crash_looping("Error", 1));
    let f = crash.facts();
    // A rollback learned elsewhere: no recent rollout here, nothing to roll back to.
    assert!(learned_parameters(&ActionType::RollbackDeployment, &f).is_empty());
    assert_eq!(
        learned_parameters(&ActionType::DeletePod, &f).get("POD_NAME"),
        Some(&json!("api-1"))
    );
    assert!(learned_parameters(&ActionType::RestartDeployment, &f).is_empty());
    let f = Incident::deployment("api")
        .rolled_out("shop/app:1.1", 30)
        .with(pod("api-2-a").owned_by("api-2").crash_looping("Error", 1))
        .facts();
    assert_eq!(
        learned_parameters(&ActionType::RollbackDeployment, &f).get("TO_REVISION"),
        Some(&json!(1))
    );
    // Two failing pods: which one to delete is not the facts' to say.
    let f = Incident::deployment("api")
        .with(pod("api-1").crash_looping("Error", 1))
        .with(pod("api-2").crash_looping("Error", 1))
        .facts();
    assert!(learned_parameters(&ActionType::DeletePod, &f).is_empty());
}

#[test]
fn healthy_pods_with_no_recent_failure_mean_the_problem_resolved() {
    let d = Incident::deployment("api")
        .with(pod("api-1"))
        .with(pod("api-2"))
        .diagnosis();
    assert_eq!(
        (d.mode, d.outcome),
        ("Resolved", InvestigationOutcome::ProblemResolved)
    );
    // An application's measurement: the pods' health is all the claim rests on, and it says
    // so (the resolved proof asks Prometheus, and refuses without it).
    let d = Incident::deployment("api")
        .alert_expression(
            "ApiLatencyHigh",
            "histogram_quantile(0.99, api_latency_bucket) > 2",
        )
        .with(pod("api-1"))
        .diagnosis();
    assert_eq!(d.outcome, InvestigationOutcome::ProblemResolved);
    assert!(
        d.summary.contains("not one the objects show") && d.summary.contains("api_latency_bucket"),
        "{}",
        d.summary
    );
}

#[test]
fn a_crash_looping_pod_a_rollout_is_deleting_does_not_keep_a_healthy_workload_open() {
    let d = Incident::deployment("api")
        .available(2, 2)
        .with(pod("api-2-a").owned_by("api-2"))
        .with(pod("api-2-b").owned_by("api-2"))
        .with(
            pod("api-1-x")
                .owned_by("api-1")
                .crash_looping("Error", 1)
                .terminating_for(1, "none"),
        )
        .diagnosis();
    assert_eq!(
        (d.mode, d.outcome),
        ("Resolved", InvestigationOutcome::ProblemResolved),
        "{}",
        d.summary
    );
    // Terminating for longer than any grace period: stuck, and the problem.
    let d = Incident::deployment("api")
        .with(pod("api-2-a").owned_by("api-2"))
        .with(
            pod("api-1-x")
                .owned_by("api-1")
                .terminating_for(30, "example.com/cleanup"),
        )
        .diagnosis();
    assert_ne!(
        d.outcome,
        InvestigationOutcome::ProblemResolved,
        "{}",
        d.summary
    );
}

#[test]
fn ready_pods_the_controller_does_not_count_available_yet_are_not_healthy_again() {
    // minReadySeconds: both pods are ready, one is not available yet. The "resolved"
    // proof reads the status, and so does the rule.
    let healthy = |available: i64| {
        Incident::deployment("api")
            .available(2, available)
            .with(pod("api-2-a").owned_by("api-2"))
            .with(pod("api-2-b").owned_by("api-2"))
            .diagnosis()
    };
    assert_eq!(healthy(2).outcome, InvestigationOutcome::ProblemResolved);
    let d = healthy(1);
    assert_ne!(
        d.outcome,
        InvestigationOutcome::ProblemResolved,
        "{}",
        d.summary
    );
}

#[test]
fn fewer_pods_than_the_workload_wants_is_not_healthy_again() {
    // Half the replicas refused at creation (a full quota, a webhook): the two that exist
    // run fine, and no pod fails.
    let d = Incident::deployment("api")
        .replicas(4)
        .with(pod("api-1"))
        .with(pod("api-2"))
        .diagnosis();
    assert_ne!(
        d.outcome,
        InvestigationOutcome::ProblemResolved,
        "{}",
        d.summary
    );
    let d = Incident::deployment("api")
        .replicas(2)
        .with(pod("api-1"))
        .with(pod("api-2"))
        .diagnosis();
    assert_eq!(d.outcome, InvestigationOutcome::ProblemResolved);
}

#[test]
fn a_warning_minutes_ago_means_it_is_not_resolved_yet() {
    let d = Incident::deployment("api")
        .with(pod("api-1"))
        .warning("api-1", "Unhealthy", "Readiness probe failed", 2)
        .diagnosis();
    assert_ne!(d.mode, "Resolved");
}

#[test]
fn a_missing_secret_is_for_a_human() {
    let d = Incident::deployment("api")
        .with(pod("api-1").waiting("CreateContainerConfigError", "secret \"db\" not found"))
        .diagnosis();
    assert_eq!(d.mode, "CreateContainerConfigError");
    assert!(d.proposal.is_none() && d.human.is_some());
}

#[test]
fn a_pod_short_of_memory_to_be_scheduled_needs_capacity() {
    let d = Incident::deployment("api")
        .with(pod("api-1").pending())
        .warning(
            "api-1",
            "FailedScheduling",
            "0/3 nodes are available: 3 Insufficient memory.",
            1,
        )
        .diagnosis();
    assert_eq!(d.mode, "PendingInsufficientResources");
    assert!(d.human.is_some());
}

#[test]
fn a_pod_held_by_a_finalizer_for_long_is_stuck_terminating() {
    let d = Incident::deployment("api")
        .with(pod("api-1").terminating_for(30, "example.com/cleanup"))
        .diagnosis();
    assert_eq!(d.mode, "TerminatingStuck");
    assert!(d.summary.contains("example.com/cleanup"), "{}", d.summary);
}

#[test]
fn pods_wedged_after_serving_are_restarted_and_pods_never_ready_are_not() {
    let log = "2026-01-01T11:58:00Z ERROR db: connection pool exhausted (10/10 in use)";
    let wedged = Incident::deployment("api")
        .with(pod("api-1").not_ready_since(5))
        .log("api-1", log)
        .diagnosis();
    assert_eq!(wedged.mode, "WedgedRuntime", "{}", wedged.summary);
    assert_eq!(
        wedged.proposal.as_ref().map(|p| p.action_type.as_str()),
        Some("RestartDeployment")
    );
    // Never ready since it started: a fresh pod of the template starts the same way, and
    // the restart's proof refuses (restart.pods-run-but-wedged).
    let mut never = pod("api-1").never_ready();
    never.container()["ready"] = json!(false);
    let never = Incident::deployment("api")
        .with(never)
        .log("api-1", log)
        .diagnosis();
    assert_ne!(never.mode, "WedgedRuntime", "{}", never.summary);
}

#[test]
fn no_rule_firing_is_inconclusive() {
    let d = Incident::deployment("api").diagnosis();
    assert_eq!(
        (d.mode, d.outcome),
        ("Unknown", InvestigationOutcome::Inconclusive)
    );
}

#[test]
fn a_workload_scaled_below_what_it_ran_with_its_pods_not_ready_is_scaled_back() {
    let scaled_down = || {
        Incident::deployment("listing")
            .replicas(1)
            .scaled("listing-abc", true, 6, 600)
            .scaled("listing-abc", false, 1, 40)
    };
    let d = scaled_down()
        .with(pod("listing-abc-1").revision("abc").not_ready_since(30))
        .diagnosis();
    assert_eq!(d.mode, "ScaledBelowDeclared", "{}", d.summary);
    let p = d.proposal.expect("a proposal");
    assert_eq!(
        (p.action_type.as_str(), p.parameters.get("REPLICAS")),
        ("ScaleReplicas", Some(&json!(6)))
    );
    assert!(
        d.factors.iter().any(|f| f.contains("scaled down to 1")),
        "{:?}",
        d.factors
    );
    // Its pods crash: more of them help nobody.
    let crashing = scaled_down()
        .with(
            pod("listing-abc-1")
                .revision("abc")
                .crash_looping("Error", 1),
        )
        .diagnosis();
    assert_ne!(crashing.mode, "ScaledBelowDeclared");
    // Caught running between two crashes: not broken at this instant, but it ended before.
    let mut between = pod("listing-abc-1")
        .revision("abc")
        .not_ready_since(1)
        .raw();
    between["status"]["containerStatuses"][0]["restartCount"] = json!(3);
    between["status"]["containerStatuses"][0]["lastState"] = json!({"terminated": {
        "reason": "Error", "exitCode": 1, "finishedAt": "2026-01-01T11:58:00Z"}});
    let restarted = scaled_down().with_raw_pod(between).diagnosis();
    assert_ne!(restarted.mode, "ScaledBelowDeclared");
    // Its pods serve: nothing runs short.
    let serving = scaled_down()
        .with(pod("listing-abc-1").revision("abc"))
        .diagnosis();
    assert_ne!(serving.mode, "ScaledBelowDeclared");
    // The scale-down was of an older revision (a rollout), not of the one running.
    let rollout = Incident::deployment("listing")
        .replicas(1)
        .scaled("listing-old", true, 6, 600)
        .scaled("listing-old", false, 1, 40)
        .with(pod("listing-abc-1").revision("abc").not_ready_since(30))
        .diagnosis();
    assert_ne!(rollout.mode, "ScaledBelowDeclared");
    // An autoscaler sets the count: what it ran at before says nothing (the restart and scale
    // proofs ask the same finding).
    let autoscaled = scaled_down()
        .autoscaled_by("listing")
        .with(pod("listing-abc-1").revision("abc").not_ready_since(30))
        .diagnosis();
    assert!(
        autoscaled.mode != "ScaledBelowDeclared" && autoscaled.proposal.is_none(),
        "{}",
        autoscaled.summary
    );
}

#[test]
fn the_failure_s_own_words_come_from_its_containers_in_order() {
    // The logs are a map: read in its order, a pod with two crashing containers gave either
    // container's line, from one run to the next.
    for _ in 0..16 {
        let incident = Incident::deployment("api")
            .with(pod("api-1").crash_looping("Error", 1).sidecar("proxy"))
            .container_log(
                "api-1",
                "proxy",
                "proxy: upstream error: connection refused",
            )
            .container_log("api-1", "app", "app: fatal error: cannot parse config.yaml");
        assert_eq!(
            incident.facts().first_error_line.as_deref(),
            Some("app: fatal error: cannot parse config.yaml")
        );
    }
}
