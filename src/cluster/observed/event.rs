//! An event about an object.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::time;
use crate::cluster::obj::{i64_at, str_at};

/// Whether an object named `object` is the workload named `workload` or one of its: one of its
/// pods now (`pods`), or a ReplicaSet, Job or pod since deleted whose name its controller
/// generated ([`super::generated_from`]). The one answer to "is this event about the
/// workload", which the incident's signature, the recovery check and the dependency graph ask.
pub fn about_workload(object: &str, workload: &str, pods: &[&str]) -> bool {
    object == workload || pods.contains(&object) || super::generated_from(object, workload)
}

/// An event, as observed.
#[derive(Debug, Clone)]
pub struct Event {
    pub kind: String,
    pub name: String,
    pub reason: String,
    pub message: String,
    pub warning: bool,
    /// How many times it happened (`count`, 1 when absent).
    pub count: i64,
    /// When it first happened, if recorded.
    pub first: Option<DateTime<Utc>>,
    /// When it last happened (its first time when only that is recorded).
    pub last: Option<DateTime<Utc>>,
}

/// The object a raw event is about, as kind and name (empty when it names none): the core/v1
/// shape names it `involvedObject`, events.k8s.io `regarding`. [`Event::parse`] and the
/// dependency graph's filters over raw events read it here.
pub fn subject(e: &Value) -> (&str, &str) {
    let of = |field: &str| {
        str_at(e, &["involvedObject", field])
            .or_else(|| str_at(e, &["regarding", field]))
            .unwrap_or_default()
    };
    (of("kind"), of("name"))
}

impl Event {
    pub fn parse(e: &Value) -> Self {
        let (kind, name) = subject(e);
        let first = time(e, &["firstTimestamp"]).or_else(|| time(e, &["eventTime"]));
        let last = time(e, &["lastTimestamp"])
            .or_else(|| time(e, &["series", "lastObservedTime"]))
            .or(first);
        Self {
            kind: kind.to_owned(),
            name: name.to_owned(),
            reason: str_at(e, &["reason"]).unwrap_or_default().to_owned(),
            message: str_at(e, &["message"]).unwrap_or_default().to_owned(),
            warning: str_at(e, &["type"]) == Some("Warning"),
            // A recurring event in the events.k8s.io shape counts in its series.
            count: i64_at(e, &["count"])
                .or_else(|| i64_at(e, &["series", "count"]))
                .unwrap_or(1)
                .max(1),
            first,
            last,
        }
    }

    /// Whether it is about workload `workload` or one of its objects ([`about_workload`]), its
    /// pods now being `pods`.
    pub fn about(&self, workload: &str, pods: &[&str]) -> bool {
        about_workload(&self.name, workload, pods)
    }

    /// The probe whose failure made the kubelet kill a container (`Killing`: "Container app
    /// failed liveness probe, will be restarted"): `livenessProbe` or `startupProbe`.
    pub fn probe_kill(&self) -> Option<&'static str> {
        if self.reason != "Killing" {
            return None;
        }
        let m = self.message.to_ascii_lowercase();
        if m.contains("failed liveness probe") {
            Some("livenessProbe")
        } else if m.contains("failed startup probe") {
            Some("startupProbe")
        } else {
            None
        }
    }

    pub fn line(&self) -> String {
        let msg: String = self.message.chars().take(160).collect();
        format!(
            "{} {} {}: {msg}{}",
            self.kind,
            self.name,
            self.reason,
            if self.count > 1 {
                format!(" (x{})", self.count)
            } else {
                String::new()
            }
        )
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_event_is_about_the_workload_its_pods_and_what_its_controllers_made_only() {
        let about = |name: &str| {
            Event::parse(&json!({"reason": "BackOff",
                "regarding": {"kind": "Pod", "name": name}}))
            .about("api", &["api-old-pod"])
        };
        // The workload, a pod of it now, its ReplicaSet, a pod of it since deleted.
        for name in ["api", "api-old-pod", "api-7d4b9c8f6", "api-7d4b9c8f6-x2k9p"] {
            assert!(about(name), "{name}");
        }
        // A neighbour whose name starts the same, and no name at all.
        for name in ["api-migrate", "web", ""] {
            assert!(!about(name), "{name}");
        }
    }

    #[test]
    fn a_kill_for_a_failed_probe_names_the_probe() {
        let kill = |message: &str| {
            Event::parse(&json!({"reason": "Killing", "message": message,
                "involvedObject": {"kind": "Pod", "name": "api-1"}}))
            .probe_kill()
        };
        assert_eq!(
            kill("Container api failed liveness probe, will be restarted"),
            Some("livenessProbe")
        );
        assert_eq!(
            kill("Container api failed startup probe, will be restarted"),
            Some("startupProbe")
        );
        assert_eq!(kill("Stopping container api"), None);
    }

    #[test]
    fn a_recurring_event_in_the_series_shape_counts_and_dates_by_its_series() {
        // What a kubelet recording through events.k8s.io writes: eventTime once, the
        // recurrences in `series`, no count or lastTimestamp.
        let e = Event::parse(&json!({"type": "Normal", "reason": "NodeNotReady",
            "involvedObject": {"kind": "Node", "name": "n1"},
            "eventTime": "2026-11-28T05:00:00.000000Z",
            "series": {"count": 5, "lastObservedTime": "2026-11-28T11:55:00.000000Z"}}));
        assert_eq!(e.count, 5);
        assert_eq!(
            e.first.map(|t| t.to_rfc3339()),
            Some("2026-11-28T05:00:00+00:00".into())
        );
        assert_eq!(
            e.last.map(|t| t.to_rfc3339()),
            Some("2026-11-28T11:55:00+00:00".into())
        );
        let plain = Event::parse(&json!({"reason": "BackOff", "count": 3,
            "lastTimestamp": "2026-11-28T11:00:00Z"}));
        assert_eq!((plain.count, plain.first), (3, None));
    }
}
