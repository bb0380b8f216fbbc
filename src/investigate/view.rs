//! The pre-fetched cluster view in invocation 1's prompt (the KubeIntellect seed's "Snapshot
//! sufficiency gate", as a soft bias only): what is unhealthy where the signal points, read
//! before the model's first turn so it needs fewer round trips — the listing calls (`kubectl_get`
//! of the pods, `kubectl_events` of the namespace) it would otherwise start with.
//!
//! Input: the pods and events the shared pre-fetch read for the signal's namespace, or — for a
//! Node target, whose alert's `namespace` label names the exporter's namespace, not the node's
//! — the node, its Warning events and the pods scheduled on it. Output: compact text.
//!
//! Invariants: unhealthy pods come first, worst first, and the view says how many it left
//! out; repeated Warning events (same reason, object and message) are one line with a count;
//! lines, pods, events and the whole text are capped ([`ViewLimits`]). The text is built from
//! cluster data: it reaches the model only inside a [`crate::redact::Redacted`] prompt
//! (`prompt::rca_user`), and the objects were sanitised by the tools that read them.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::InvestigateError;
use crate::cluster::obj::{self, array, i64_at, str_at};
use crate::cluster::render::{age, event_time, pod_status};
use crate::cluster::tools::ClusterTools;
use crate::cluster::{ListQuery, observed};
use crate::domain::RemediationRequest;

/// How much the view may show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ViewLimits {
    /// Unhealthy pods listed; the rest are counted.
    pub max_pods: usize,
    /// Distinct Warning events listed (the newest); the rest are counted.
    pub max_events: usize,
    /// Characters of one line; more is cut with `…`.
    pub max_line_chars: usize,
    /// Characters of the whole view.
    pub max_chars: usize,
}

impl Default for ViewLimits {
    fn default() -> Self {
        Self {
            max_pods: 12,
            max_events: 12,
            max_line_chars: 240,
            max_chars: 3_000,
        }
    }
}

/// Room kept for the "… and N more" lines, so the caps never cut the counts.
const NOTE_ROOM: usize = 2 * 64;

/// One pod that is not healthy, as the view shows it.
struct PodLine {
    /// Sort key: 0 not running (waiting, pending, failed), 1 running but not ready, 2 running
    /// and ready with restarts.
    rank: u8,
    restarts: i64,
    name: String,
    text: String,
}

/// The view's line for a pod, or `None` for one that needs no attention: one the model finds
/// no failure of ([`observed::Pod::failure`]: a pod seconds into creating its containers is
/// starting, not failing, until a warning about it says it cannot start: `warnings`) with no
/// restart, or completed (a Job's pod). Worst first: a pod kept from running, then one running
/// not ready, then a ready one that restarted.
fn pod_line(
    p: &Value,
    with_namespace: bool,
    warnings: &[observed::Event],
    now: DateTime<Utc>,
) -> Option<PodLine> {
    if str_at(p, &["status", "phase"]) == Some("Succeeded") {
        return None;
    }
    let status = pod_status(p);
    let failure = observed::Pod::at(p, now).heed(warnings).failure();
    let containers = array(p, &["status", "containerStatuses"]);
    let restarts: i64 = containers
        .iter()
        .filter_map(|c| i64_at(c, &["restartCount"]))
        .sum();
    let ready = containers.iter().filter(|c| c["ready"] == true).count();
    let total = array(p, &["spec", "containers"])
        .len()
        .max(containers.len());
    let rank = match failure.map(|f| f.kind) {
        Some(observed::FailureKind::NotReady) => 1,
        Some(_) => 0,
        None if restarts > 0 => 2,
        None => return None,
    };
    let mut last: Vec<&str> = Vec::new();
    for c in containers {
        if let Some(r) = str_at(c, &["lastState", "terminated", "reason"])
            && !last.contains(&r)
        {
            last.push(r);
        }
    }
    let name = match (with_namespace, obj::namespace(p)) {
        (true, Some(ns)) => format!("{ns}/{}", obj::name(p)),
        _ => obj::name(p).to_owned(),
    };
    let mut text = format!("pod {name} {status} ready={ready}/{total} restarts={restarts}");
    if !last.is_empty() {
        text.push_str(&format!(" last={}", last.join(",")));
    }
    Some(PodLine {
        rank,
        restarts,
        name,
        text,
    })
}

/// Warning events with the same reason, object and message, as one.
struct EventGroup {
    reason: String,
    object: String,
    message: String,
    count: i64,
    last: Option<String>,
}

fn warning_groups(events: &[Value]) -> Vec<EventGroup> {
    let mut groups: Vec<EventGroup> = Vec::new();
    for e in events.iter().filter(|e| e["type"] == "Warning") {
        let reason = str_at(e, &["reason"]).unwrap_or("?").to_owned();
        let object = format!(
            "{}/{}",
            str_at(e, &["involvedObject", "kind"]).unwrap_or("?"),
            str_at(e, &["involvedObject", "name"]).unwrap_or("?")
        );
        // One line each: a multi-line message would break the view's layout.
        let message = str_at(e, &["message"])
            .unwrap_or("")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let count = i64_at(e, &["count"])
            .or_else(|| i64_at(e, &["series", "count"]))
            .unwrap_or(1)
            .max(1);
        let last = event_time(e).map(str::to_owned);
        match groups
            .iter_mut()
            .find(|g| g.reason == reason && g.object == object && g.message == message)
        {
            Some(g) => {
                g.count += count;
                if last > g.last {
                    g.last = last;
                }
            }
            None => groups.push(EventGroup {
                reason,
                object,
                message,
                count,
                last,
            }),
        }
    }
    // Oldest first, newest last (RFC 3339 times of one cluster sort as text).
    groups.sort_by(|a, b| a.last.cmp(&b.last));
    groups
}

fn cut(line: &str, max: usize) -> String {
    if line.chars().count() <= max {
        return line.to_owned();
    }
    let mut s: String = line.chars().take(max.saturating_sub(1)).collect();
    s.push('…');
    s
}

/// The view's text. `scope` opens it (`namespace shop`, `pods on node worker-7`); `pods_total`
/// is how many pods the scope has (the listing may have been capped before the view saw it);
/// events are oldest first; `with_namespace` names pods `namespace/name` (a node's pods come
/// from every namespace).
pub fn render(
    scope: &str,
    pods: &[Value],
    pods_total: usize,
    events: &[Value],
    with_namespace: bool,
    now: DateTime<Utc>,
    limits: ViewLimits,
) -> String {
    let warnings: Vec<observed::Event> = events
        .iter()
        .filter(|e| str_at(e, &["type"]) == Some("Warning"))
        .map(observed::Event::parse)
        .collect();
    let mut unhealthy: Vec<PodLine> = pods
        .iter()
        .filter_map(|p| pod_line(p, with_namespace, &warnings, now))
        .collect();
    unhealthy.sort_by(|a, b| (a.rank, -a.restarts, &a.name).cmp(&(b.rank, -b.restarts, &b.name)));
    let groups = warning_groups(events);
    let mut out = format!(
        "{scope}: {pods_total} pods{}, {} not healthy; {} Warning events ({} distinct)\n",
        if pods.len() < pods_total {
            format!(" (the first {} read)", pods.len())
        } else {
            String::new()
        },
        unhealthy.len(),
        groups.iter().map(|g| g.count).sum::<i64>(),
        groups.len(),
    );
    let budget = limits.max_chars.saturating_sub(NOTE_ROOM);
    let mut shown = 0;
    for p in unhealthy.iter().take(limits.max_pods) {
        let line = cut(&p.text, limits.max_line_chars);
        if out.len() + line.len() + 1 > budget / 2 {
            break;
        }
        out.push_str(&line);
        out.push('\n');
        shown += 1;
    }
    if unhealthy.len() > shown {
        out.push_str(&format!(
            "… and {} more pods not healthy\n",
            unhealthy.len() - shown
        ));
    }
    // The newest events that fit, shown oldest first.
    let mut lines = Vec::new();
    let mut used = out.len();
    for g in groups.iter().rev().take(limits.max_events) {
        let times = if g.count > 1 {
            format!(" (x{})", g.count)
        } else {
            String::new()
        };
        let line = cut(
            &format!(
                "event {} Warning {} {}{times}: {}",
                age(g.last.as_deref(), now),
                g.reason,
                g.object,
                g.message
            ),
            limits.max_line_chars,
        );
        if used + line.len() + 1 > budget {
            break;
        }
        used += line.len() + 1;
        lines.push(line);
    }
    let left = groups.len() - lines.len();
    for line in lines.iter().rev() {
        out.push_str(line);
        out.push('\n');
    }
    if left > 0 {
        out.push_str(&format!(
            "… and {left} more distinct Warning events, older\n"
        ));
    }
    out
}

/// The node a signal is about, when its target is a Node.
pub fn node_target(req: &RemediationRequest) -> Option<&str> {
    req.target
        .as_ref()
        .filter(|t| t.kind.eq_ignore_ascii_case("Node"))
        .map(|t| t.name.as_str())
}

/// The view of a node: its readiness and pressure, its Warning events and the pods scheduled
/// on it. An unreachable cluster is an error; anything else leaves the view thinner.
pub async fn node(
    tools: &ClusterTools,
    node: &str,
    now: DateTime<Utc>,
    limits: ViewLimits,
) -> Result<String, InvestigateError> {
    let got = tools
        .call("kubectl_get", &json!({"kind": "Node", "name": node}))
        .await;
    if let Some(e) = unreachable(&got) {
        return Err(e);
    }
    let mut head = String::new();
    if let Some(n) = got.data.pointer("/items/0") {
        let conditions: Vec<String> = array(n, &["status", "conditions"])
            .iter()
            .filter(|c| (c["type"] == "Ready") != (c["status"] == "True"))
            .map(|c| {
                format!(
                    "{}={}",
                    str_at(c, &["type"]).unwrap_or("?"),
                    str_at(c, &["status"]).unwrap_or("?")
                )
            })
            .collect();
        head.push_str(&format!(
            "node {node}: {}{}{}\n",
            // Ready as the decisions read it (`Node::ready`): a node that reports no Ready
            // condition is not.
            match (conditions.is_empty(), observed::Node::parse(n).ready) {
                (true, true) => "Ready".to_owned(),
                (true, false) => "Ready not reported".to_owned(),
                (false, _) => conditions.join(", "),
            },
            if n["spec"]["unschedulable"] == true {
                ", cordoned"
            } else {
                ""
            },
            match array(n, &["spec", "taints"]).len() {
                0 => String::new(),
                t => format!(", {t} taints"),
            }
        ));
    }
    let events = tools.call("kubectl_events", &json!({"node": node})).await;
    if let Some(e) = unreachable(&events) {
        return Err(e);
    }
    let events = events.list("events");
    // Pods on the node, every namespace: no tool lists by field, so straight from the reader
    // (the view prints names and states only, and the prompt is sanitised whole).
    let pods = match tools.reader().resource("Pod").await {
        Ok(res) => match tools
            .reader()
            .list(
                &res,
                None,
                &ListQuery::fields(format!("spec.nodeName={node}")),
            )
            .await
        {
            Ok(p) => p,
            Err(e) if e.is_unreachable() => return Err(e.into()),
            Err(_) => vec![],
        },
        Err(e) if e.is_unreachable() => return Err(e.into()),
        Err(_) => vec![],
    };
    head.push_str(&render(
        &format!("pods on node {node}"),
        &pods,
        pods.len(),
        &events,
        true,
        now,
        ViewLimits {
            max_chars: limits.max_chars.saturating_sub(head.len()),
            ..limits
        },
    ));
    Ok(head)
}

/// A tool result that says the cluster did not answer, as the error that makes the request wait.
pub(super) fn unreachable(r: &crate::cluster::tools::ToolResult) -> Option<InvestigateError> {
    let kind = r.data.pointer("/error/kind").and_then(Value::as_str)?;
    (kind == "unreachable" || kind == "timeout").then(|| InvestigateError::Unavailable {
        dependency: "cluster".into(),
        message: r
            .data
            .pointer("/error/message")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-21T12:00:00Z")
            .unwrap()
            .to_utc()
    }

    fn pod(name: &str, phase: &str, waiting: Option<&str>, ready: bool, restarts: i64) -> Value {
        let mut state = json!({"running": {}});
        if let Some(w) = waiting {
            state = json!({"waiting": {"reason": w}});
        }
        // What a kubelet and the scheduler write: an hour old, its readiness, and a Pending
        // pod's reason.
        let since = (now() - chrono::Duration::hours(1)).to_rfc3339();
        let conditions = if phase == "Pending" {
            json!([{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                "message": "0/3 nodes are available"}])
        } else {
            json!([{"type": "Ready", "status": if ready { "True" } else { "False" },
                "lastTransitionTime": since}])
        };
        json!({"kind": "Pod", "metadata": {"name": name, "namespace": "shop",
                   "creationTimestamp": since},
               "spec": {"containers": [{"name": "app"}]},
               "status": {"phase": phase, "startTime": since, "conditions": conditions,
                   "containerStatuses": [{"name": "app", "ready": ready,
                   "restartCount": restarts, "state": state}]}})
    }

    fn event(reason: &str, name: &str, message: &str, count: i64, at: &str) -> Value {
        json!({"kind": "Event", "type": "Warning", "reason": reason, "message": message,
               "count": count, "lastTimestamp": at,
               "involvedObject": {"kind": "Pod", "name": name}})
    }

    /// Issue 43: "not healthy" is the model's failure (`observed::Pod::failure`): a pod ten
    /// seconds into creating its containers is starting; twenty minutes in, it is stuck.
    #[test]
    fn a_pod_starting_is_not_counted_unhealthy_and_one_stuck_is() {
        let creating = |seconds: i64| {
            let since = (now() - chrono::Duration::seconds(seconds)).to_rfc3339();
            json!({"kind": "Pod", "metadata": {"name": "c", "namespace": "shop",
                    "creationTimestamp": since},
                "spec": {"nodeName": "n1", "containers": [{"name": "app"}]},
                "status": {"phase": "Pending", "startTime": since, "containerStatuses": [
                    {"name": "app", "ready": false, "restartCount": 0,
                     "state": {"waiting": {"reason": "ContainerCreating"}}}]}})
        };
        let with = |p: Value, events: &[Value]| {
            render(
                "namespace shop",
                &[p],
                1,
                events,
                false,
                now(),
                ViewLimits::default(),
            )
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned()
        };
        let first = |p: Value| with(p, &[]);
        assert!(
            first(creating(10)).contains("0 not healthy"),
            "{}",
            first(creating(10))
        );
        assert!(
            first(creating(1200)).contains("1 not healthy"),
            "{}",
            first(creating(1200))
        );
        // Ten seconds in, with a warning that it cannot start (as the rules and the proofs
        // heed it): failing.
        let mount = event(
            "FailedMount",
            "c",
            "MountVolume.SetUp failed for volume \"config\": configmap \"api\" not found",
            1,
            &now().to_rfc3339(),
        );
        let line = with(creating(10), &[mount]);
        assert!(line.contains("1 not healthy"), "{line}");
    }

    #[test]
    fn unhealthy_pods_come_first_worst_first_and_the_rest_are_counted() {
        let mut pods = vec![
            pod("a-healthy", "Running", None, true, 0),
            pod("b-restarted", "Running", None, true, 2),
            pod("c-notready", "Running", None, false, 0),
            pod("d-crash", "Running", Some("CrashLoopBackOff"), false, 9),
            pod("e-crash", "Running", Some("CrashLoopBackOff"), false, 3),
            json!({"kind": "Pod", "metadata": {"name": "f-job"}, "status": {"phase": "Succeeded"}}),
        ];
        for i in 0..20 {
            pods.push(pod(&format!("z-pending-{i:02}"), "Pending", None, false, 0));
        }
        let limits = ViewLimits {
            max_pods: 4,
            ..Default::default()
        };
        let v = render("namespace shop", &pods, 26, &[], false, now(), limits);
        let lines: Vec<&str> = v.lines().collect();
        assert_eq!(
            lines[0],
            "namespace shop: 26 pods, 24 not healthy; 0 Warning events (0 distinct)"
        );
        assert!(
            lines[1].starts_with("pod d-crash CrashLoopBackOff ready=0/1 restarts=9"),
            "{v}"
        );
        assert!(lines[2].starts_with("pod e-crash CrashLoopBackOff"), "{v}");
        assert!(lines[3].starts_with("pod z-pending-00 Pending"), "{v}");
        assert_eq!(lines[5], "… and 20 more pods not healthy", "{v}");
        assert!(!v.contains("a-healthy") && !v.contains("f-job"), "{v}");
    }

    #[test]
    fn repeated_events_become_one_line_with_a_count_newest_kept() {
        let mut events = vec![
            event(
                "BackOff",
                "web-1",
                "Back-off restarting failed container",
                5,
                "2026-11-21T11:50:00Z",
            ),
            event(
                "BackOff",
                "web-1",
                "Back-off restarting failed container",
                7,
                "2026-11-21T11:58:00Z",
            ),
            event(
                "BackOff",
                "web-2",
                "Back-off restarting failed container",
                1,
                "2026-11-21T11:40:00Z",
            ),
            event(
                "Unhealthy",
                "web-1",
                "Readiness probe failed:\n  connection refused",
                1,
                "2026-11-21T11:59:00Z",
            ),
        ];
        events.push(
            json!({"kind": "Event", "type": "Normal", "reason": "Pulled", "message": "ok",
                           "involvedObject": {"kind": "Pod", "name": "web-1"}}),
        );
        let v = render(
            "namespace shop",
            &[],
            0,
            &events,
            false,
            now(),
            ViewLimits::default(),
        );
        let lines: Vec<&str> = v.lines().collect();
        assert_eq!(
            lines[0],
            "namespace shop: 0 pods, 0 not healthy; 14 Warning events (3 distinct)"
        );
        assert_eq!(
            lines[1],
            "event 20m Warning BackOff Pod/web-2: Back-off restarting failed container"
        );
        assert_eq!(
            lines[2],
            "event 2m Warning BackOff Pod/web-1 (x12): Back-off restarting failed container"
        );
        assert_eq!(
            lines[3],
            "event 60s Warning Unhealthy Pod/web-1: Readiness probe failed: connection refused"
        );
        assert_eq!(lines.len(), 4, "{v}");

        let few = ViewLimits {
            max_events: 1,
            ..Default::default()
        };
        let v = render("namespace shop", &[], 0, &events, false, now(), few);
        assert!(v.contains("Unhealthy") && !v.contains("web-2"), "{v}");
        assert!(
            v.ends_with("… and 2 more distinct Warning events, older\n"),
            "{v}"
        );
    }

    #[test]
    fn the_view_is_capped_in_characters_and_says_so() {
        let pods: Vec<Value> = (0..200)
            .map(|i| {
                pod(
                    &format!("p-{i:03}-{}", "x".repeat(400)),
                    "Pending",
                    None,
                    false,
                    0,
                )
            })
            .collect();
        let events: Vec<Value> = (0..200)
            .map(|i| {
                event(
                    "FailedScheduling",
                    &format!("p-{i:03}"),
                    &"no nodes ".repeat(80),
                    1,
                    &format!("2026-11-21T11:{:02}:00Z", i % 60),
                )
            })
            .collect();
        let limits = ViewLimits {
            max_pods: 100,
            max_events: 100,
            ..Default::default()
        };
        let v = render("namespace big", &pods, 5000, &events, false, now(), limits);
        assert!(v.chars().count() <= limits.max_chars, "{} chars", v.len());
        assert!(
            v.lines()
                .all(|l| l.chars().count() <= limits.max_line_chars)
        );
        assert!(
            v.starts_with("namespace big: 5000 pods (the first 200 read), 200 not healthy;"),
            "{v}"
        );
        assert!(v.contains("more pods not healthy\n"), "{v}");
        assert!(v.contains("more distinct Warning events, older\n"), "{v}");
    }
}
