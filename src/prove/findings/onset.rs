//! When a pod's failures began: what the graph compares the changes of the target's
//! dependencies with, and what the rollback proof compares the current revision's appearance
//! with.

use chrono::{DateTime, Utc};

use crate::cluster::observed::{Event, Pod};

/// How long before a revision appeared its pods' failures may seem to begin and still be its
/// own: the clocks of the API server, the kubelets and the alerting pipeline differ by seconds,
/// and an alert's `startsAt` rounds to its rule's evaluation interval (commonly 30 s to 1 min).
pub const ONSET_SLACK_SECONDS: i64 = 60;

/// Whether failures that began at `onset` predate a revision that appeared at `appeared`
/// (beyond [`ONSET_SLACK_SECONDS`]): then the revision did not bring them. The rollout rule
/// rejects a rollout as the cause on it, and the rollback proof refuses to undo it.
pub fn predates(onset: DateTime<Utc>, appeared: DateTime<Utc>) -> bool {
    onset < appeared - chrono::Duration::seconds(ONSET_SLACK_SECONDS)
}

/// When failing pod `pod` began to fail: its first warning (never before the pod existed),
/// else its creation. A pod's ordinary events (scheduled, pulled, started) say nothing of a
/// failure: a pod that ran for an hour before its first crash began to fail at the crash.
pub fn onset(pod: &Pod, events: &[Event]) -> Option<DateTime<Utc>> {
    let warned = events
        .iter()
        .filter(|e| e.warning && e.kind == "Pod" && e.name == pod.name)
        .filter_map(|e| e.first.or(e.last))
        .min();
    match (warned, pod.created) {
        (Some(w), Some(c)) => Some(w.max(c)),
        (w, c) => w.or(c),
    }
}

/// When the first of `failing` pods began to fail ([`onset`]).
pub fn first_onset<'a>(
    failing: impl IntoIterator<Item = &'a Pod>,
    events: &[Event],
) -> Option<DateTime<Utc>> {
    failing.into_iter().filter_map(|p| onset(p, events)).min()
}

/// When the failures began, and what shows it.
#[derive(Debug, Clone, Copy)]
pub enum Began<'a> {
    /// A failing pod's [`onset`].
    Pod(&'a Pod, DateTime<Utc>),
    /// The alert's start: before any pod failing now began to, so the pods that failed then
    /// are gone (replaced by a rollout since, say).
    Alert(DateTime<Utc>),
}

impl Began<'_> {
    pub fn at(&self) -> DateTime<Utc> {
        match self {
            Began::Pod(_, t) | Began::Alert(t) => *t,
        }
    }
}

/// When the failures of a workload created at `created` began: the first [`onset`] of its
/// `failing` pods, or the alert's start when it is earlier (`None` when no pod's onset is
/// known). Like a pod's warnings, an alert says nothing of a workload before the workload
/// existed (it was about an earlier object of the name): its start counts from the
/// workload's creation. What the rollout rule and the
/// rollback proof compare a revision's appearance with ([`predates`]).
pub fn failures_began<'a>(
    failing: impl IntoIterator<Item = &'a Pod>,
    events: &[Event],
    alert_started: Option<DateTime<Utc>>,
    created: Option<DateTime<Utc>>,
) -> Option<Began<'a>> {
    let pod = failing
        .into_iter()
        .filter_map(|p| onset(p, events).map(|t| Began::Pod(p, t)))
        .min_by_key(Began::at);
    let alert_started = match (alert_started, created) {
        (Some(a), Some(c)) => Some(a.max(c)),
        (a, _) => a,
    };
    // An alert's start says the failures began then at the latest, never when: with no pod's
    // onset known, when they began is unknown.
    match (pod, alert_started) {
        (Some(p), Some(a)) if a < p.at() => Some(Began::Alert(a)),
        (p, _) => p,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn failures_a_minute_before_a_revision_appeared_are_its_own_and_earlier_ones_predate_it() {
        let at = |s: &str| {
            DateTime::parse_from_rfc3339(s)
                .map(|t| t.with_timezone(&Utc))
                .unwrap_or_default()
        };
        let appeared = at("2026-11-30T10:00:00Z");
        assert!(!predates(at("2026-11-30T09:59:30Z"), appeared));
        assert!(!predates(at("2026-11-30T10:00:05Z"), appeared));
        assert!(predates(at("2026-11-30T09:58:59Z"), appeared));
    }

    #[test]
    fn a_pod_began_to_fail_at_its_first_warning_never_before_it_existed() {
        let pod = |created: &str| {
            Pod::parse(&json!({"metadata": {"name": "api-1", "creationTimestamp": created}}))
        };
        let event = |kind: &str, first: &str| {
            Event::parse(&json!({"involvedObject": {"kind": "Pod", "name": "api-1"},
                "reason": "R", "type": kind, "message": "m", "firstTimestamp": first}))
        };
        let events = [
            event("Normal", "2026-11-30T10:00:01Z"),
            event("Warning", "2026-11-30T11:00:00Z"),
            event("Warning", "2026-11-30T11:05:00Z"),
        ];
        let at = |s: &str| {
            DateTime::parse_from_rfc3339(s)
                .map(|t| t.with_timezone(&Utc))
                .ok()
        };
        let p = pod("2026-11-30T10:00:00Z");
        assert_eq!(onset(&p, &events), at("2026-11-30T11:00:00Z"));
        // A warning older than the pod (its name reused) dates from before it.
        assert_eq!(
            onset(&pod("2026-11-30T11:02:00Z"), &events),
            at("2026-11-30T11:02:00Z")
        );
        assert_eq!(onset(&p, &[]), at("2026-11-30T10:00:00Z"));
        assert_eq!(
            first_onset([&p, &pod("2026-11-30T09:00:00Z")], &[]),
            at("2026-11-30T09:00:00Z")
        );
    }

    #[test]
    fn failures_began_at_the_first_pod_s_onset_or_the_alert_s_start_never_before_the_workload() {
        let at = |s: &str| {
            DateTime::parse_from_rfc3339(s)
                .map(|t| t.with_timezone(&Utc))
                .unwrap_or_default()
        };
        let pod = Pod::parse(
            &json!({"metadata": {"name": "api-2-a", "creationTimestamp": "2026-11-30T10:05:00Z"}}),
        );
        let pods = [pod];
        let created = Some(at("2026-11-30T08:00:00Z"));
        let began = |alert: Option<&str>| {
            failures_began(&pods, &[], alert.map(at), created).map(|b| match b {
                Began::Pod(p, t) => (p.name.clone(), t),
                Began::Alert(t) => ("alert".to_owned(), t),
            })
        };
        let pod_began = Some(("api-2-a".to_owned(), at("2026-11-30T10:05:00Z")));
        assert_eq!(began(None), pod_began);
        assert_eq!(began(Some("2026-11-30T10:10:00Z")), pod_began);
        assert_eq!(
            began(Some("2026-11-30T09:50:00Z")),
            Some(("alert".to_owned(), at("2026-11-30T09:50:00Z")))
        );
        // An alert that started before the workload existed was about an earlier one.
        assert_eq!(
            began(Some("2026-11-30T07:00:00Z")),
            Some(("alert".to_owned(), at("2026-11-30T08:00:00Z")))
        );
        assert_eq!(
            failures_began(&[], &[], None, created).map(|b| b.at()),
            None
        );
        // The alert's start alone is when they began at the latest, not when.
        assert_eq!(
            failures_began(&[], &[], Some(at("2026-11-30T10:10:00Z")), created).map(|b| b.at()),
            None
        );
    }
}
