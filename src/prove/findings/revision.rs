//! What is recorded about a revision whose pods are gone, and whether two revisions differ.

use serde_json::Value;

use crate::cluster::obj::at;
use crate::cluster::observed::Event;

/// Event reasons that record a pod failing: a crash back-off, a failed pull, mount or start, a
/// failed probe, an OOM kill.
pub const FAILURE_REASONS: &[&str] = &["BackOff", "Failed", "Unhealthy", "OOMKilling"];

/// The Warning events that record pods of a revision failing: pods named after its ReplicaSet
/// (`<name>-…`) or carrying its hash (`hash`, empty when unknown) in their name. With none of
/// its pods left, they are what says whether the revision served or failed.
pub fn revision_failures<'e>(events: &'e [Event], name: &str, hash: &str) -> Vec<&'e Event> {
    let prefix = format!("{name}-");
    events
        .iter()
        .filter(|e| {
            e.warning
                && e.kind == "Pod"
                && (e.name.starts_with(&prefix) || (!hash.is_empty() && e.name.contains(hash)))
                && FAILURE_REASONS.contains(&e.reason.as_str())
        })
        .collect()
}

/// Whether two pod templates run something different: their specs differ (images, commands,
/// environment, resources, volumes…). Metadata alone — the template hash, a restart's
/// `kubectl.kubernetes.io/restartedAt` stamp — changes on every rollout and runs the same: a
/// rollback across such revisions restores nothing, and the rollout did not change what runs.
pub fn runs_differently(a: &Value, b: &Value) -> bool {
    at(a, &["spec"]) != at(b, &["spec"])
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn event(kind: &str, name: &str, reason: &str, kind_of_event: &str) -> Event {
        Event::parse(&json!({"involvedObject": {"kind": kind, "name": name},
            "reason": reason, "type": kind_of_event, "message": "m"}))
    }

    #[test]
    fn failures_of_a_revision_s_pods_are_its_record() {
        let events = [
            event("Pod", "api-5d9f-x1", "BackOff", "Warning"),
            event("Pod", "api-7c2a-y2", "BackOff", "Warning"),
            event("Pod", "api-5d9f-x3", "Pulled", "Normal"),
            event("ReplicaSet", "api-5d9f", "FailedCreate", "Warning"),
        ];
        let got: Vec<&str> = revision_failures(&events, "api-5d9f", "5d9f")
            .iter()
            .map(|e| e.name.as_str())
            .collect();
        assert_eq!(got, ["api-5d9f-x1"]);
        assert!(revision_failures(&events, "api-0000", "").is_empty());
    }

    #[test]
    fn a_restart_stamp_or_a_new_hash_runs_the_same_and_an_image_or_env_change_does_not() {
        let t = |stamp: &str, image: &str, env: &str| {
            json!({"metadata": {"labels": {"pod-template-hash": stamp},
                    "annotations": {"kubectl.kubernetes.io/restartedAt": stamp}},
                "spec": {"containers": [{"name": "api", "image": image,
                    "env": [{"name": "MODE", "value": env}]}]}})
        };
        let before = t("a", "api:1", "x");
        assert!(!runs_differently(&before, &t("b", "api:1", "x")));
        assert!(runs_differently(&before, &t("a", "api:2", "x")));
        assert!(runs_differently(&before, &t("a", "api:1", "y")));
    }
}
