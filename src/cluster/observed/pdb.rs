//! A PodDisruptionBudget (policy v1 or v1beta1): what it selects, what it requires and what its
//! status allows, read once for the disruption-budget rule and the proof of relaxing it.

use serde_json::Value;

use super::Pod;
use crate::cluster::obj::{self, at, i64_at};
use crate::cluster::selector::Selector;

/// Fewer pods than this hold no quorum a budget could be protecting: a majority of one or two
/// pods is all of them (quorum systems such as etcd and ZooKeeper run three or more).
pub const QUORUM_MIN_PODS: i64 = 3;

/// A disruption budget, as observed.
#[derive(Debug, Clone, PartialEq)]
pub struct Pdb {
    pub name: String,
    /// `spec.minAvailable` / `spec.maxUnavailable` as written (a number or a percentage).
    pub min_available: Option<String>,
    pub max_unavailable: Option<String>,
    /// `spec.selector`; `None` when it has none (it selects nothing).
    pub selector: Option<Selector>,
    /// `status.disruptionsAllowed` (v1beta1: `podDisruptionsAllowed`); 0 when the status says
    /// nothing: a budget that reports no allowance allows no eviction.
    pub disruptions_allowed: i64,
    /// `status.currentHealthy` and `status.desiredHealthy` (0 when unreported).
    pub current_healthy: i64,
    pub desired_healthy: i64,
    /// `status.expectedPods`, as reported.
    pub expected_pods: Option<i64>,
}

impl Pdb {
    pub fn parse(b: &Value) -> Self {
        let int_or_string = |path: &[&str]| {
            at(b, path).and_then(|v| match v {
                Value::Number(n) => Some(n.to_string()),
                Value::String(s) => Some(s.clone()),
                _ => None,
            })
        };
        Self {
            name: obj::name(b).to_owned(),
            min_available: int_or_string(&["spec", "minAvailable"]),
            max_unavailable: int_or_string(&["spec", "maxUnavailable"]),
            selector: at(b, &["spec", "selector"]).and_then(Selector::from_object),
            disruptions_allowed: i64_at(b, &["status", "disruptionsAllowed"])
                .or_else(|| i64_at(b, &["status", "podDisruptionsAllowed"]))
                .unwrap_or(0),
            current_healthy: i64_at(b, &["status", "currentHealthy"]).unwrap_or(0),
            desired_healthy: i64_at(b, &["status", "desiredHealthy"]).unwrap_or(0),
            expected_pods: i64_at(b, &["status", "expectedPods"]),
        }
    }

    /// Its selector as a label query to list its pods by (`app=etcd`): `None` without a
    /// selector (a budget without one selects no pod), `Some("")` for the empty one (every
    /// pod of its namespace, as policy/v1 says).
    pub fn selector_query(&self) -> Option<String> {
        self.selector.as_ref().map(Selector::to_query)
    }

    /// Whether it selects the pod (an empty selector selects every pod, as policy/v1 says).
    pub fn selects(&self, pod: &Pod) -> bool {
        self.selects_labels(Some(&pod.labels))
    }

    /// Whether it selects pods labelled `labels` (a workload's template's, before any pod
    /// exists): [`Pdb::selects`] for labels.
    pub fn selects_labels(&self, labels: Option<&Value>) -> bool {
        self.selector
            .as_ref()
            .is_some_and(|s| s.matches_value(labels))
    }

    /// How many pods it expects: its status's count, else the `selected` pods the caller found.
    pub fn expected(&self, selected: usize) -> i64 {
        self.expected_pods.unwrap_or(selected as i64)
    }

    /// Whether every pod it expects ([`Self::expected`] of `selected`) is healthy, by its own
    /// status (the disruption controller's count, what the eviction API decides by): then a
    /// budget that allows no disruption is misconfigured, not doing its job. The budget rule
    /// and the relaxation's proof ask it.
    pub fn all_healthy(&self, selected: usize) -> bool {
        let expected = self.expected(selected);
        expected > 0 && self.current_healthy >= expected
    }

    /// Whether it may be guarding a quorum of a workload of `workload_kind` whose pods it
    /// expects ([`Self::expected`] of `selected`): a StatefulSet's, or a majority of
    /// [`QUORUM_MIN_PODS`] pods or more.
    pub fn guards_quorum(&self, workload_kind: &str, selected: usize) -> bool {
        let expected = self.expected(selected);
        workload_kind == "StatefulSet"
            || (expected >= QUORUM_MIN_PODS && self.desired_healthy * 2 > expected)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(app: &str) -> Pod {
        Pod {
            labels: json!({"app": app}),
            ..Pod::default()
        }
    }

    #[test]
    fn a_v1beta1_budget_reads_its_allowance_and_its_rule_as_written() {
        let b = Pdb::parse(&json!({
            "metadata": {"name": "etcd"},
            "spec": {"minAvailable": "51%", "selector": {"matchLabels": {"app": "etcd"}}},
            "status": {"podDisruptionsAllowed": 1, "currentHealthy": 3, "desiredHealthy": 2}}));
        assert_eq!(b.min_available.as_deref(), Some("51%"));
        assert_eq!(b.max_unavailable, None);
        assert_eq!(b.selector_query().as_deref(), Some("app=etcd"));
        assert_eq!(b.disruptions_allowed, 1);
        assert!(b.selects(&pod("etcd")) && !b.selects(&pod("web")));
        // No expectedPods in its status: the pods it was found to select.
        assert_eq!(b.expected(3), 3);
        assert!(b.guards_quorum("Deployment", 3));
        assert!(!b.guards_quorum("Deployment", 2));
        assert!(b.guards_quorum("StatefulSet", 1));
        // Its own count of healthy pods against those it expects.
        assert!(b.all_healthy(3));
        assert!(!b.all_healthy(4));
    }

    #[test]
    fn a_budget_without_a_selector_or_a_status_selects_nothing_and_allows_nothing() {
        let b = Pdb::parse(&json!({"metadata": {"name": "x"}, "spec": {"maxUnavailable": 0}}));
        assert_eq!(b.max_unavailable.as_deref(), Some("0"));
        assert_eq!((b.disruptions_allowed, b.desired_healthy), (0, 0));
        assert!(b.selector_query().is_none() && !b.selects(&pod("etcd")));
        assert!(!b.all_healthy(0));
    }

    /// Issue 43: an empty selector selects every pod of the namespace (policy/v1), for a
    /// workload's template as for its pods: the enrichment's `pdbProtected` asks this too
    /// (it took an empty selector as protecting nothing).
    #[test]
    fn an_empty_budget_selector_protects_every_template() {
        let labels = serde_json::json!({"app": "api"});
        let budget = |selector: Value| {
            Pdb::parse(
                &serde_json::json!({"metadata": {"name": "b", "namespace": "shop"},
                "spec": {"selector": selector, "maxUnavailable": 1}}),
            )
        };
        assert!(budget(serde_json::json!({})).selects_labels(Some(&labels)));
        assert!(
            budget(serde_json::json!({"matchLabels": {"app": "api"}}))
                .selects_labels(Some(&labels))
        );
        assert!(
            !budget(serde_json::json!({"matchLabels": {"app": "db"}}))
                .selects_labels(Some(&labels))
        );
        assert!(!budget(Value::Null).selects_labels(Some(&labels)));
        // Listed by: every pod of the namespace, or none.
        assert_eq!(
            budget(serde_json::json!({})).selector_query().as_deref(),
            Some("")
        );
        assert_eq!(budget(Value::Null).selector_query(), None);
    }
}
