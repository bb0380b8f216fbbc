//! The verification stage's unit tests.

use super::*;

fn pod(ready: bool, waiting: Option<&str>, last: Option<(&str, &str)>) -> Value {
    // A container not waiting runs (after its last termination, a restart).
    let mut c = json!({"name": "app", "state": {"running": {}}});
    if let Some(w) = waiting {
        c["state"] = json!({"waiting": {"reason": w}});
    }
    if let Some((reason, at)) = last {
        c["lastState"] = json!({"terminated": {"reason": reason, "finishedAt": at}});
    }
    json!({"status": {
        "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
        "containerStatuses": [c],
    }})
}

fn since() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-03-01T12:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
}

#[test]
fn a_node_is_healthy_when_ready_with_nothing_its_conditions_show_wrong() {
    let node = |conditions: Value| {
        observed::Node::parse(&json!({"metadata": {"name": "n1"},
            "status": {"conditions": conditions}}))
    };
    let ready = json!({"type": "Ready", "status": "True"});
    let pressure = json!({"type": "MemoryPressure", "status": "True", "message": "low"});
    assert_eq!(node_health(&node(json!([ready])), None).0, 1.0);
    let (score, why) = node_health(&node(json!([ready, pressure])), None);
    assert_eq!(score, 0.5);
    assert!(why.contains("MemoryPressure"), "{why}");
    let down = json!({"type": "Ready", "status": "Unknown"});
    assert_eq!(node_health(&node(json!([down])), None).0, 0.0);
    assert_eq!(node_health(&node(json!([])), None).0, 0.0);
}

/// Issue 43: a Ready node whose readiness flaps is not healthy again, for the verification
/// as for the "resolved" proof and the node rules (`findings::flaps` of its events).
#[test]
fn a_ready_node_whose_readiness_flaps_is_not_healthy() {
    let node = observed::Node::parse(&json!({"metadata": {"name": "n1"},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}}));
    let now = since() + chrono::Duration::hours(1);
    let event = json!({"metadata": {"name": "n1.1", "namespace": "default"},
        "involvedObject": {"kind": "Node", "name": "n1"}, "type": "Normal",
        "reason": "NodeNotReady", "message": "Node n1 status is now: NodeNotReady", "count": 5,
        "firstTimestamp": (now - chrono::Duration::minutes(50)).to_rfc3339(),
        "lastTimestamp": (now - chrono::Duration::minutes(5)).to_rfc3339()});
    let flaps = findings::flaps(now, &[observed::Event::parse(&event)], "n1");
    assert!(flaps.is_some(), "five NotReady in 45 minutes flap");
    let (score, why) = node_health(&node, flaps.as_deref());
    assert_eq!(score, 0.5);
    assert!(why.contains("went NotReady 5 times"), "{why}");
}

#[test]
fn the_score_weighs_the_assessed_parts() {
    // All three: (0.40 × 1 + 0.35 × 0 + 0.25 × 1) / 1.
    assert_eq!(score(Some(1.0), Some(0.0), Some(1.0)), Some(0.65));
    assert_eq!(score(Some(0.5), Some(1.0), Some(0.0)), Some(0.55));
    assert_eq!(score(Some(1.0), Some(1.0), Some(1.0)), Some(1.0));
    // A part not assessed leaves the others' weights: (0.40 × 1) / 0.75.
    assert_eq!(score(Some(1.0), Some(0.0), None), Some(0.53));
    // (0.35 × 1 + 0.25 × 0) / 0.60.
    assert_eq!(score(None, Some(1.0), Some(0.0)), Some(0.58));
    assert_eq!(score(None, None, None), None);
}

#[test]
fn an_unanswered_alertmanager_never_resolves_the_alert() {
    let why = "Alertmanager at http://am:9093 could not be reached: refused".to_owned();
    let (alert, detail) = alert_part(false, &AlertmanagerView::Unanswered(why));
    assert_eq!(alert, 0.0);
    assert!(
        detail.contains("could not be reached") && detail.contains("notifications alone"),
        "{detail}"
    );
    assert_eq!(alert_part(false, &AlertmanagerView::NoLongerFiring).0, 1.0);
    assert_eq!(alert_part(false, &AlertmanagerView::StillFiring).0, 0.0);
    assert_eq!(alert_part(true, &AlertmanagerView::StillFiring).0, 1.0);
    assert_eq!(alert_part(false, &AlertmanagerView::NotItsSignal).0, 0.0);
    assert_eq!(alert_part(true, &AlertmanagerView::NotConfigured).0, 1.0);
}

fn now() -> DateTime<Utc> {
    since() + Duration::minutes(5)
}

/// [`pods_health`] of pods as the API server returns them, observed at [`now`].
fn health_of(
    pods: &[Value],
    events: &[observed::Event],
    wanted: Option<i64>,
    since: DateTime<Utc>,
    now: DateTime<Utc>,
) -> (f64, String) {
    let pods: Vec<observed::Pod> = pods.iter().map(|p| observed::Pod::at(p, now)).collect();
    pods_health(&pods, events, wanted, since)
}

#[test]
fn health_follows_the_effectiveness_monitor() {
    let ok = pod(true, None, None);
    assert_eq!(
        health_of(&[ok.clone(), ok.clone()], &[], None, since(), now()).0,
        1.0
    );
    let before = pod(true, None, Some(("Error", "2026-03-01T11:00:00Z")));
    assert_eq!(
        health_of(&[before], &[], None, since(), now()).0,
        1.0,
        "a restart before does not count"
    );
    let after = pod(true, None, Some(("Error", "2026-03-01T12:01:00Z")));
    assert_eq!(health_of(&[after], &[], None, since(), now()).0, 0.75);
    let oom = pod(true, None, Some(("OOMKilled", "2026-03-01T12:01:00Z")));
    assert_eq!(health_of(&[oom], &[], None, since(), now()).0, 0.25);
    // A kill at 137 the runtime calls Error, and the kernel's warning about the pod: a
    // kill for memory as the OOM rule and the memory proof count it.
    let mut killed = pod(true, None, Some(("Error", "2026-03-01T12:01:00Z")));
    killed["metadata"] = json!({"name": "api-1"});
    killed["status"]["containerStatuses"][0]["lastState"]["terminated"]["exitCode"] =
        json!(observed::SIGKILL_EXIT);
    let said = observed::Event::parse(&json!({"type": "Warning", "reason": OOM_KILL_EVENT,
        "involvedObject": {"kind": "Pod", "name": "api-1"}, "message": "Killed process 7"}));
    assert_eq!(
        health_of(&[killed.clone()], &[], None, since(), now()).0,
        0.75
    );
    assert_eq!(health_of(&[killed], &[said], None, since(), now()).0, 0.25);
    assert_eq!(
        health_of(
            &[ok.clone(), pod(false, None, None)],
            &[],
            None,
            since(),
            now()
        )
        .0,
        0.5
    );
    let looping = pod(false, Some("CrashLoopBackOff"), None);
    assert_eq!(
        health_of(&[ok.clone(), looping], &[], None, since(), now()).0,
        0.0
    );
    assert_eq!(health_of(&[], &[], None, since(), now()).0, 0.0);
    // Issue 43: all its pods ready, but fewer than the workload is meant to run (a third
    // replica refused by a quota), is not healthy again, as the "resolved" proof says.
    let two = [ok.clone(), ok.clone()];
    assert_eq!(health_of(&two, &[], Some(2), since(), now()).0, 1.0);
    let (score, detail) = health_of(&two, &[], Some(3), since(), now());
    assert_eq!(score, 0.5);
    assert_eq!(detail, "2 pods ready of the 3 the workload is meant to run");
    // Failing as the undo and the proofs say: an init container's crash loop and an image
    // that cannot be pulled keep a pod from running as much as its own crash loop.
    let mut init = pod(false, None, None);
    init["status"]["phase"] = json!("Pending");
    init["status"]["initContainerStatuses"] = json!([{"name": "migrate", "restartCount": 4,
        "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]);
    let (score, detail) = health_of(&[ok.clone(), init], &[], None, since(), now());
    assert_eq!(score, 0.0, "{detail}");
    assert!(detail.starts_with("1 of 2 pods failing"), "{detail}");
    let pull = pod(false, Some("ImagePullBackOff"), None);
    assert_eq!(health_of(&[ok, pull], &[], None, since(), now()).0, 0.0);
}
