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
}
