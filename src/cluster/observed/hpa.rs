//! A HorizontalPodAutoscaler (autoscaling v1, v2beta2 or v2): its bounds, its replicas, what it
//! scales and how far its metrics are from their targets, read once for the autoscaler rule
//! and the proof of a higher maximum.

use serde_json::Value;

use crate::cluster::obj::{self, array, i64_at, str_at};

/// An autoscaler, as observed.
#[derive(Debug, Clone, PartialEq)]
pub struct Hpa {
    pub name: String,
    /// `spec.maxReplicas` (0 when unset: an autoscaler without a maximum is at none).
    pub max: i64,
    /// `status.currentReplicas`, as reported (v2 leaves it out at 0).
    pub current: Option<i64>,
    /// `status.desiredReplicas`, as reported.
    pub desired: Option<i64>,
    /// `spec.scaleTargetRef`'s kind and name (empty when unset).
    pub target_kind: String,
    pub target_name: String,
    /// Its resource metrics measured against an average-utilisation target, each once.
    pub utilisation: Vec<Utilisation>,
    /// `(type, status, reason)` of its conditions.
    pub conditions: Vec<(String, String, String)>,
}

/// One resource metric's average utilisation and its target, in percent of the pods' requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Utilisation {
    /// The resource (`cpu`, `memory`).
    pub metric: String,
    pub current: i64,
    pub target: i64,
}

impl Utilisation {
    /// Above its target: the load the autoscaler would add replicas for.
    pub fn above_target(&self) -> bool {
        self.current > self.target
    }
}

impl Hpa {
    pub fn parse(h: &Value) -> Self {
        Self {
            name: obj::name(h).to_owned(),
            max: i64_at(h, &["spec", "maxReplicas"]).unwrap_or(0),
            current: i64_at(h, &["status", "currentReplicas"]),
            desired: i64_at(h, &["status", "desiredReplicas"]),
            target_kind: str_at(h, &["spec", "scaleTargetRef", "kind"])
                .unwrap_or_default()
                .to_owned(),
            target_name: str_at(h, &["spec", "scaleTargetRef", "name"])
                .unwrap_or_default()
                .to_owned(),
            utilisation: utilisation(h),
            conditions: array(h, &["status", "conditions"])
                .iter()
                .map(|c| {
                    let s = |k: &str| str_at(c, &[k]).unwrap_or_default().to_owned();
                    (s("type"), s("status"), s("reason"))
                })
                .collect(),
        }
    }

    /// Whether it sets the replica count of the workload `kind`/`name` (its `scaleTargetRef`).
    pub fn scales(&self, kind: &str, name: &str) -> bool {
        self.target_kind == kind && self.target_name == name
    }

    /// Whether `wanted` is a maximum one step may raise it to: higher than its own, by at most
    /// [`HPA_RAISE_FACTOR`] times it (or [`HPA_RAISE_SMALL`] more, for a small one). The
    /// autoscaler rule proposes within it and the raise's proof holds it to it.
    pub fn raise_allowed(&self, wanted: i64) -> bool {
        wanted > self.max && wanted <= (self.max * HPA_RAISE_FACTOR).max(self.max + HPA_RAISE_SMALL)
    }

    /// The replicas it runs now (`status.currentReplicas`; v2 leaves it out at 0): what a
    /// higher maximum adds pods to, for the quota.
    pub fn replicas_now(&self) -> i64 {
        self.current.unwrap_or(0)
    }

    /// Whether it runs at its maximum: the replicas it runs now ([`Hpa::replicas_now`]) reach
    /// a maximum it has. The autoscaler rule, the raise's proof and "resolved" all ask this.
    pub fn at_maximum(&self) -> bool {
        self.max > 0 && self.replicas_now() >= self.max
    }

    pub fn above_target(&self) -> impl Iterator<Item = &Utilisation> {
        self.utilisation.iter().filter(|u| u.above_target())
    }
}

/// How many times its maximum one raise may set an autoscaler's maximum to: a step that doubles
/// the capacity it may add is one a person can still reason about, and the next alert asks
/// again.
pub const HPA_RAISE_FACTOR: i64 = 2;

/// How many replicas one raise may add to a small autoscaler's maximum whatever the factor (a
/// maximum of 2 may go to 12): doubling a handful of pods is too timid a step.
pub const HPA_RAISE_SMALL: i64 = 10;

/// The utilisation per resource metric: v1's one CPU figure, then v2's (and v2beta2's) resource
/// metrics with an average-utilisation target, each measured by the first current metric of
/// the same resource that reports a utilisation. A resource is listed once, at its first
/// target.
fn utilisation(h: &Value) -> Vec<Utilisation> {
    let mut out: Vec<Utilisation> = Vec::new();
    if let (Some(current), Some(target)) = (
        i64_at(h, &["status", "currentCPUUtilizationPercentage"]),
        i64_at(h, &["spec", "targetCPUUtilizationPercentage"]),
    ) {
        out.push(Utilisation {
            metric: "cpu".to_owned(),
            current,
            target,
        });
    }
    for m in array(h, &["spec", "metrics"]) {
        let Some(name) = str_at(m, &["resource", "name"]) else {
            continue;
        };
        let Some(target) = i64_at(m, &["resource", "target", "averageUtilization"]) else {
            continue;
        };
        let current = array(h, &["status", "currentMetrics"])
            .iter()
            .filter(|c| str_at(c, &["resource", "name"]) == Some(name))
            .find_map(|c| i64_at(c, &["resource", "current", "averageUtilization"]));
        if let Some(current) = current
            && !out.iter().any(|u| u.metric == name)
        {
            out.push(Utilisation {
                metric: name.to_owned(),
                current,
                target,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn u(metric: &str, current: i64, target: i64) -> Utilisation {
        Utilisation {
            metric: metric.to_owned(),
            current,
            target,
        }
    }

    #[test]
    fn a_v1_autoscaler_reports_one_cpu_figure() {
        let h = Hpa::parse(&json!({
            "metadata": {"name": "web"},
            "spec": {"maxReplicas": 5, "targetCPUUtilizationPercentage": 70,
                "scaleTargetRef": {"kind": "Deployment", "name": "web"}},
            "status": {"currentReplicas": 5, "desiredReplicas": 5,
                "currentCPUUtilizationPercentage": 95}}));
        assert_eq!((h.max, h.current, h.desired), (5, Some(5), Some(5)));
        assert_eq!(
            (h.target_kind.as_str(), h.target_name.as_str()),
            ("Deployment", "web")
        );
        assert_eq!(h.utilisation, vec![u("cpu", 95, 70)]);
        assert_eq!(h.above_target().count(), 1);
    }

    #[test]
    fn v2_resource_metrics_are_listed_once_each_with_a_current_utilisation() {
        let h = Hpa::parse(&json!({
            "spec": {"metrics": [
                {"type": "Resource", "resource": {"name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 60}}},
                // A second target on the same resource: cpu is listed once, at its first.
                {"type": "Resource", "resource": {"name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 90}}},
                {"type": "Resource", "resource": {"name": "memory",
                    "target": {"type": "AverageValue", "averageValue": "500Mi"}}},
                {"type": "Pods", "pods": {"metric": {"name": "rps"}}}]},
            "status": {"currentMetrics": [
                // The first current cpu figure without a utilisation is passed over.
                {"type": "Resource", "resource": {"name": "cpu",
                    "current": {"averageValue": "200m"}}},
                {"type": "Resource", "resource": {"name": "cpu",
                    "current": {"averageUtilization": 45, "averageValue": "270m"}}}],
                "conditions": [{"type": "ScalingLimited", "status": "True",
                    "reason": "TooManyReplicas"}]}}));
        assert_eq!(h.utilisation, vec![u("cpu", 45, 60)]);
        assert_eq!(h.above_target().count(), 0);
        assert_eq!((h.max, h.current), (0, None));
        assert_eq!(
            h.conditions,
            vec![(
                "ScalingLimited".into(),
                "True".into(),
                "TooManyReplicas".into()
            )]
        );
    }

    /// At its maximum by the replicas it runs, not by those it wants: an autoscaler that wants
    /// ten of at most ten while its status reports none running (v2 leaves `currentReplicas`
    /// out at 0) is not at its maximum, for the rule, the proof and "resolved" alike.
    #[test]
    fn at_its_maximum_by_the_replicas_it_runs() {
        let h = |status: serde_json::Value| {
            Hpa::parse(&serde_json::json!({"spec": {"maxReplicas": 10}, "status": status}))
        };
        assert!(h(serde_json::json!({"currentReplicas": 10, "desiredReplicas": 10})).at_maximum());
        assert!(!h(serde_json::json!({"currentReplicas": 7, "desiredReplicas": 10})).at_maximum());
        assert!(!h(serde_json::json!({"desiredReplicas": 10})).at_maximum());
    }
}
