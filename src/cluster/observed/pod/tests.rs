//! The pod model's unit tests.

use serde_json::json;

use super::*;

fn t(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or_default()
}

const NOW: &str = "2026-11-28T12:00:00Z";

fn pod(phase: &str, ready: bool, since: &str, container: Value) -> Value {
    json!({"metadata": {"name": "api-1", "creationTimestamp": since},
        "spec": {"nodeName": "n1"},
        "status": {"phase": phase, "startTime": since,
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" },
                "lastTransitionTime": since}],
            "containerStatuses": [container]}})
}

fn kind(p: &Value) -> Option<FailureKind> {
    Pod::at(p, t(NOW)).failure().map(|f| f.kind)
}

#[test]
fn a_pod_ready_once_and_not_now_is_wedged_and_one_never_ready_is_not() {
    let running = json!({"name": "api", "ready": false, "restartCount": 0,
        "state": {"running": {"startedAt": "2026-11-28T11:00:00Z"}}});
    let mut once = pod("Running", false, "2026-11-28T11:00:00Z", running.clone());
    // Ready turned False at 11:40, long after the kubelet set it as the pod started.
    once["status"]["conditions"][0]["lastTransitionTime"] = json!("2026-11-28T11:40:00Z");
    assert!(Pod::at(&once, t(NOW)).wedged());
    let never = pod("Running", false, "2026-11-28T11:00:00Z", running);
    assert_eq!(Pod::at(&never, t(NOW)).was_ready(), Some(false));
    assert!(!Pod::at(&never, t(NOW)).wedged());
}

#[test]
fn a_serving_pod_of_the_same_template_shows_the_template_runs() {
    let running = json!({"name": "api", "ready": true, "restartCount": 0,
        "state": {"running": {"startedAt": "2026-11-28T11:00:00Z"}}});
    let of = |name: &str, hash: Option<&str>, ready: bool| {
        let mut p = pod("Running", ready, "2026-11-28T11:00:00Z", running.clone());
        p["metadata"]["name"] = json!(name);
        if let Some(h) = hash {
            p["metadata"]["labels"] = json!({"pod-template-hash": h});
        }
        Pod::at(&p, t(NOW))
    };
    let me = of("api-abc-1", Some("abc"), false);
    assert!(me.template_runs_in(&of("api-abc-2", Some("abc"), true)));
    // Not ready, another template, or itself: it shows nothing.
    assert!(!me.template_runs_in(&of("api-abc-2", Some("abc"), false)));
    assert!(!me.template_runs_in(&of("api-def-2", Some("def"), true)));
    assert!(!me.template_runs_in(&of("api-abc-1", Some("abc"), true)));
    assert!(!me.template_runs_in(&of("api-2", None, true)));
    // A controller that labels no hash has one template.
    assert!(of("a", None, false).template_runs_in(&of("b", None, true)));
    // Ready but on its way out: capacity that is leaving.
    let mut leaving = of("api-abc-3", Some("abc"), true);
    leaving.deleting = true;
    assert!(!me.template_runs_in(&leaving));
}

#[test]
fn a_pod_is_past_its_start_up_by_time_restarts_or_containers_never_created() {
    let creating = json!({"name": "api", "ready": false, "restartCount": 0,
        "state": {"waiting": {"reason": "ContainerCreating"}}});
    let mut p = pod("Pending", false, "2026-11-28T11:54:00Z", creating);
    // A readiness probe that may take ten minutes: its budget counts from a start that
    // never came.
    p["spec"]["containers"] = json!([{"name": "api", "readinessProbe": {
        "initialDelaySeconds": 600, "periodSeconds": 10, "failureThreshold": 3}}]);
    let u = Pod::at(&p, t(NOW)).unready(t(NOW));
    assert!(u.allowance > Duration::minutes(6));
    assert!(u.past_startup, "{u:?}");
    // Two minutes of a crash loop with three restarts.
    let looping = json!({"name": "api", "ready": false, "restartCount": 3,
        "state": {"waiting": {"reason": "CrashLoopBackOff"}}});
    let p = pod("Running", false, "2026-11-28T11:59:00Z", looping);
    assert!(Pod::at(&p, t(NOW)).unready(t(NOW)).past_startup);
    // One minute, one restart: still starting, as far as replacing it goes.
    let once = json!({"name": "api", "ready": false, "restartCount": 1,
        "state": {"running": {"startedAt": "2026-11-28T11:59:30Z"}}});
    let p = pod("Running", false, "2026-11-28T11:59:00Z", once);
    let u = Pod::at(&p, t(NOW)).unready(t(NOW));
    assert_eq!(u.failing_for, Some(Duration::minutes(1)));
    assert!(!u.past_startup);
}

#[test]
fn the_logs_that_show_a_failure_are_those_of_the_containers_that_fail() {
    let p = json!({"metadata": {"name": "api-1"}, "spec": {"nodeName": "n1"},
        "status": {"phase": "Pending",
            "initContainerStatuses": [
                {"name": "migrate", "ready": false, "restartCount": 4,
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}}}],
            "containerStatuses": [
                {"name": "api", "ready": false, "restartCount": 0,
                    "state": {"waiting": {"reason": "PodInitializing"}}},
                {"name": "proxy", "ready": true, "restartCount": 0,
                    "state": {"running": {}}}]}});
    // The init container's previous run: the app waits on it and the proxy is ready.
    assert_eq!(
        Pod::parse(&p).failure_logs(),
        vec![LogSource {
            container: "migrate".into(),
            init: true,
            previous: true
        }]
    );
    let p = json!({"metadata": {"name": "api-1"}, "spec": {"nodeName": "n1"},
        "status": {"phase": "Running", "containerStatuses": [
            {"name": "api", "ready": false, "restartCount": 0, "state": {"running": {}}},
            {"name": "proxy", "ready": true, "restartCount": 0, "state": {"running": {}}}]}});
    let logs: Vec<(String, bool)> = Pod::parse(&p)
        .failure_logs()
        .into_iter()
        .map(|l| (l.container, l.previous))
        .collect();
    assert_eq!(logs, vec![("api".to_owned(), false)]);
}

#[test]
fn a_pod_waits_for_a_node_once_the_scheduler_found_none() {
    let pending = |condition: &Value, deleting: bool, node: Option<&str>| {
        let mut p = json!({"metadata": {"name": "api-1", "creationTimestamp": NOW},
            "spec": {}, "status": {"phase": "Pending", "conditions": [condition]}});
        if deleting {
            p["metadata"]["deletionTimestamp"] = json!(NOW);
        }
        if let Some(n) = node {
            p["spec"]["nodeName"] = json!(n);
        }
        Pod::at(&p, t(NOW))
    };
    let refused = json!({"type": "PodScheduled", "status": "False",
        "message": "0/3 nodes are available: 3 Insufficient cpu."});
    assert_eq!(
        pending(&refused, false, None).waiting_for_node(),
        Some("0/3 nodes are available: 3 Insufficient cpu.")
    );
    // Not looked at yet, being deleted, or placed after all: waiting for nothing.
    let unseen = json!({"type": "Initialized", "status": "True"});
    assert_eq!(pending(&unseen, false, None).waiting_for_node(), None);
    assert_eq!(pending(&refused, true, None).waiting_for_node(), None);
    assert_eq!(
        pending(&refused, false, Some("n1")).waiting_for_node(),
        None
    );
}

#[test]
fn a_pod_never_ready_is_starting_for_as_long_as_its_probes_allow() {
    let running = json!({"name": "api", "ready": false, "restartCount": 0,
        "state": {"running": {"startedAt": "2026-11-28T11:55:00Z"}}});
    // Five minutes without ever being ready: past the default allowance…
    let plain = pod("Running", false, "2026-11-28T11:55:00Z", running.clone());
    assert_eq!(kind(&plain), Some(FailureKind::NotReady));
    assert_eq!(
        Pod::at(&plain, t(NOW)).startup_allowance(),
        Duration::seconds(NEVER_READY_ALLOWANCE)
    );
    // …but within a readiness probe that waits ten minutes before its first check, or a
    // startup probe that allows as long.
    for (probe, secs) in [
        ("readinessProbe", json!({"initialDelaySeconds": 600})),
        (
            "startupProbe",
            json!({"periodSeconds": 10, "failureThreshold": 60}),
        ),
    ] {
        let mut slow = plain.clone();
        slow["spec"]["containers"] = json!([{"name": "api", probe: secs}]);
        let p = Pod::at(&slow, t(NOW));
        assert!(p.starting(), "{probe}");
        assert_eq!(kind(&slow), None, "{probe}");
        assert!(p.startup_allowance() >= Duration::seconds(600), "{probe}");
    }
    // A liveness probe's short budget does not shorten the default.
    let mut quick = plain.clone();
    quick["spec"]["containers"] = json!([{"name": "api", "livenessProbe": {"periodSeconds": 5}}]);
    assert_eq!(kind(&quick), Some(FailureKind::NotReady));
}

#[test]
fn a_pod_ten_seconds_into_creating_is_starting_and_two_minutes_in_is_stuck() {
    let creating = json!({"name": "api", "state": {"waiting": {"reason": "ContainerCreating"}}});
    assert_eq!(
        kind(&pod(
            "Pending",
            false,
            "2026-11-28T11:59:50Z",
            creating.clone()
        )),
        None
    );
    assert_eq!(
        kind(&pod("Pending", false, "2026-11-28T11:57:00Z", creating)),
        Some(FailureKind::StuckCreating)
    );
    // Placed, and no container reported at all (a kubelet that does not answer).
    let mut silent = pod("Pending", false, "2026-11-28T11:57:00Z", json!({}));
    silent["status"]["containerStatuses"] = json!([]);
    assert_eq!(kind(&silent), Some(FailureKind::StuckCreating));
}

#[test]
fn each_kind_of_failure_is_named_with_the_line_that_shows_it() {
    let since = "2026-11-28T11:50:00Z";
    let crash = json!({"name": "api", "restartCount": 4,
        "state": {"waiting": {"reason": "CrashLoopBackOff"}},
        "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137}}});
    let p = pod("Running", false, since, crash);
    let f = Pod::at(&p, t(NOW)).failure();
    assert_eq!(
        f.map(|f| (f.kind, f.line)),
        Some((
            FailureKind::CannotRun,
            "container api CrashLoopBackOff, 4 restarts, last exit OOMKilled (137)".into()
        ))
    );
    let exited = json!({"name": "api", "restartCount": 1,
        "state": {"terminated": {"reason": "Error", "exitCode": 2}}});
    assert_eq!(
        kind(&pod("Running", false, since, exited)),
        Some(FailureKind::Exited)
    );
    let running = json!({"name": "api", "ready": false, "state": {"running": {}}});
    let p = pod("Running", false, since, running.clone());
    assert_eq!(kind(&p), Some(FailureKind::NotReady));
    assert!(Pod::at(&p, t(NOW)).broken().is_none(), "it runs");
    assert!(Pod::at(&p, t(NOW)).running_not_ready());
    // Thirty seconds after it started and not ready yet: starting, for everyone.
    let young = pod("Running", false, "2026-11-28T11:59:30Z", running.clone());
    assert_eq!(kind(&young), None);
    assert!(Pod::at(&young, t(NOW)).starting());
    assert!(!Pod::at(&young, t(NOW)).running_not_ready());
    assert!(!Pod::parse(&young).starting(), "no moment, no allowance");
    assert_eq!(kind(&pod("Running", true, since, running)), None);
    let done =
        json!({"name": "job", "state": {"terminated": {"reason": "Completed", "exitCode": 0}}});
    assert_eq!(kind(&pod("Succeeded", false, since, done)), None);
}

#[test]
fn a_kill_for_memory_is_the_kubelet_s_word_or_a_sigkill_the_kernel_reported() {
    let since = "2026-11-28T11:50:00Z";
    let exited = |reason: &str, code: i64| {
        json!({"name": "api", "restartCount": 2,
            "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "lastState": {"terminated": {"reason": reason, "exitCode": code,
                "finishedAt": "2026-11-28T11:58:00Z"}}})
    };
    let event = |name: &str| {
        Event::parse(&json!({"type": "Warning", "reason": "OOMKilling",
            "involvedObject": {"kind": "Pod", "name": name},
            "message": "Memory cgroup out of memory: Killed process 4242 (java)"}))
    };
    let said = Pod::parse(&pod("Running", false, since, exited("OOMKilled", 137)));
    assert_eq!(said.memory_kills(&[]).len(), 1);
    let plain = Pod::parse(&pod("Running", false, since, exited("Error", 137)));
    assert!(
        plain.memory_kills(&[]).is_empty(),
        "a SIGKILL alone is no OOM kill"
    );
    assert!(plain.memory_kills(&[event("other-pod")]).is_empty());
    let kills = plain.memory_kills(&[event("api-1")]);
    assert_eq!(kills.len(), 1);
    assert_eq!(kills[0].1, Some(t("2026-11-28T11:58:00Z")));
    let other = Pod::parse(&pod("Running", false, since, exited("Error", 1)));
    assert!(other.memory_kills(&[event("api-1")]).is_empty());
    // Killed at 11:58: lately at noon, not seven hours later (the limit met a peak since).
    assert_eq!(said.recent_memory_kills(&[], t(NOW)).len(), 1);
    let later = t(NOW) + Duration::hours(MEMORY_KILL_LOOKBACK_HOURS + 1);
    assert!(said.recent_memory_kills(&[], later).is_empty());
}

/// Issue 43: a pod stuck creating is worth replacing (`Pod::unready`'s `past_startup`, which
/// the deletion's proof and the rules ask) only once the kubelet's attach and mount retries are
/// over, however short its start-up allowance: at 150 s the stuck-creating rule would still
/// wait, and so does the proof now.
#[test]
fn a_pod_stuck_creating_is_past_its_start_up_only_after_the_kubelet_s_retries() {
    let creating = json!({"name": "api", "ready": false, "restartCount": 0,
        "state": {"waiting": {"reason": "ContainerCreating"}}});
    let at = |since: &str| Pod::at(&pod("Pending", false, since, creating.clone()), t(NOW));
    // 150 s in: stuck (past the creating allowance), not yet past the retries.
    let early = at("2026-11-28T11:57:30Z");
    assert!(early.stuck_creating.is_some());
    assert!(!early.unready(t(NOW)).past_startup);
    // 400 s in: past them.
    assert!(at("2026-11-28T11:53:20Z").unready(t(NOW)).past_startup);
}

/// Issue 43: which pods a workload's selector matched are its own. Another Deployment of the
/// same chart (its ReplicaSet named `<name>-…` but hashed for itself), a CronJob's run and an
/// exporter of a StatefulSet are not, nor a bare ReplicaSet's named after it; a ReplicaSet's own
/// pods are, hash label or not, and an unowned pod is.
#[test]
fn a_workloads_own_pods_are_those_its_controllers_made() {
    let owned = |name: &str, controller: Option<(&str, &str)>, hash: Option<&str>| {
        let mut labels = json!({"app": "api"});
        if let Some(h) = hash {
            labels["pod-template-hash"] = json!(h);
        }
        let mut p = json!({"metadata": {"name": name, "labels": labels}});
        if let Some((kind, owner)) = controller {
            p["metadata"]["ownerReferences"] =
                json!([{"kind": kind, "name": owner, "controller": true}]);
        }
        Pod::parse(&p)
    };
    let api = owned(
        "api-5d8f-x1",
        Some(("ReplicaSet", "api-5d8f")),
        Some("5d8f"),
    );
    assert!(api.selected_by("Deployment", "api"));
    let worker = owned(
        "api-worker-7f9c-k2",
        Some(("ReplicaSet", "api-worker-7f9c")),
        Some("7f9c"),
    );
    assert!(!worker.selected_by("Deployment", "api"));
    assert!(worker.selected_by("Deployment", "api-worker"));
    let run = owned(
        "api-migrate-2893-zq",
        Some(("Job", "api-migrate-2893")),
        None,
    );
    assert!(!run.selected_by("Deployment", "api"));
    // An orphaned ReplicaSet's pods keep their hash: they are the ReplicaSet's.
    assert!(api.selected_by("ReplicaSet", "api-5d8f"));
    // A bare ReplicaSet named after the Deployment, its pods unhashed, is not its revision.
    let unhashed = owned("api-v2-z", Some(("ReplicaSet", "api-v2")), None);
    assert!(!unhashed.selected_by("Deployment", "api"));
    assert!(unhashed.selected_by("ReplicaSet", "api-v2"));
    let exporter = owned(
        "redis-exporter-9a-1",
        Some(("ReplicaSet", "redis-exporter-9a")),
        None,
    );
    assert!(!exporter.selected_by("StatefulSet", "redis"));
    let redis = owned("redis-0", Some(("StatefulSet", "redis")), None);
    assert!(redis.selected_by("StatefulSet", "redis"));
    assert!(owned("adopted", None, None).selected_by("Deployment", "api"));
}

#[test]
fn a_pod_seconds_into_creating_fails_once_a_warning_about_it_is_heeded() {
    let creating = json!({"name": "api", "state": {"waiting": {"reason": "ContainerCreating"}}});
    let p = pod("Pending", false, "2026-11-28T11:59:50Z", creating);
    let warning = |name: &str, at: &str| {
        Event::parse(&json!({"type": "Warning", "reason": "FailedAttachVolume",
            "message": "Multi-Attach error for volume \"pvc-1\"",
            "involvedObject": {"kind": "Pod", "name": name}, "lastTimestamp": at}))
    };
    // Ten seconds in, nothing said against it: starting.
    assert_eq!(Pod::at(&p, t(NOW)).failure(), None);
    let heeded = Pod::at(&p, t(NOW)).heed(&[warning("api-1", "2026-11-28T11:59:55Z")]);
    let f = heeded.failure().expect("a warned pod fails to start");
    assert_eq!(
        (f.kind, f.cause.as_str()),
        (FailureKind::Warned, "FailedAttachVolume")
    );
    assert_eq!(heeded.broken().map(|f| f.kind), Some(FailureKind::Warned));
    // Another pod's warning, or one from before this pod was made, says nothing of it.
    let other = Pod::at(&p, t(NOW)).heed(&[warning("api-2", "2026-11-28T11:59:55Z")]);
    assert_eq!(other.failure(), None);
    let older = Pod::at(&p, t(NOW)).heed(&[warning("api-1", "2026-11-28T11:50:00Z")]);
    assert_eq!(older.failure(), None);
    // Only a warning that says it cannot start: not the scheduler's from before it was placed,
    // nor the kubelet's first-seconds race over a projected volume.
    let said = |reason: &str, message: &str| {
        let e = Event::parse(
            &json!({"type": "Warning", "reason": reason, "message": message,
            "involvedObject": {"kind": "Pod", "name": "api-1"},
            "lastTimestamp": "2026-11-28T11:59:58Z"}),
        );
        Pod::at(&p, t(NOW)).heed(&[e]).failure().map(|f| f.kind)
    };
    assert_eq!(said("FailedScheduling", "0/3 nodes are available"), None);
    let race = "MountVolume.SetUp failed for volume \"kube-api-access-x\" : object \"shop\"/\"kube-root-ca.crt\" not registered";
    assert_eq!(said("FailedMount", race), None);
    assert_eq!(
        said(
            "FailedCreatePodSandBox",
            "failed to setup network for sandbox"
        ),
        Some(FailureKind::Warned)
    );
    let cache = "failed to sync configmap cache: timed out waiting for the condition";
    assert_eq!(said("FailedMount", cache), None);
    // Once an init container runs, the sandbox was made and the volumes mounted since.
    let mut init = p.clone();
    init["status"]["initContainerStatuses"] = json!([{"name": "wait", "restartCount": 0,
        "state": {"running": {"startedAt": "2026-11-28T11:59:58Z"}}}]);
    let e = Event::parse(
        &json!({"type": "Warning", "reason": "FailedMount", "message": "x",
        "involvedObject": {"kind": "Pod", "name": "api-1"},
        "lastTimestamp": "2026-11-28T11:59:55Z"}),
    );
    assert_eq!(Pod::at(&init, t(NOW)).heed(&[e]).failure(), None);
}

/// Issue 43: a pod no scheduler has looked at (no `PodScheduled` condition: a `schedulerName`
/// nobody serves) fails once a scheduler would have tried it; one created seconds ago, or one
/// a scheduler tried, is judged as before.
#[test]
fn a_pod_no_scheduler_has_tried_fails_after_the_allowance() {
    let waiting = |created: &str, conditions: Value| {
        json!({"metadata": {"name": "api-1", "creationTimestamp": created},
            "spec": {"schedulerName": "batch-scheduler", "containers": [{"name": "api"}]},
            "status": {"phase": "Pending", "conditions": conditions}})
    };
    let old = waiting("2026-11-28T11:55:00Z", json!([]));
    let f = Pod::at(&old, t(NOW)).failure();
    assert_eq!(f.as_ref().map(|f| f.kind), Some(FailureKind::Unschedulable));
    assert_eq!(
        f.map(|f| f.line).as_deref(),
        Some("Pending for 5m: no scheduler has tried to place it (schedulerName batch-scheduler)")
    );
    assert_eq!(kind(&waiting("2026-11-28T11:59:30Z", json!([]))), None);
    let tried = waiting(
        "2026-11-28T11:55:00Z",
        json!([{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": "0/3 nodes are available: 3 Insufficient cpu."}]),
    );
    assert_eq!(
        Pod::at(&tried, t(NOW)).failure().map(|f| f.line).as_deref(),
        Some("Pending, unschedulable: 0/3 nodes are available: 3 Insufficient cpu.")
    );
}
