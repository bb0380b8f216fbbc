//! A HorizontalPodAutoscaler (autoscaling v1, v2beta2 or v2): its bounds, its replicas, what it
//! scales and how far its metrics are from their targets, read once for the autoscaler rule
//! and the proof of a higher maximum.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::time;
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
    /// Its conditions: v2's `status.conditions`, or v1's annotation holding them.
    pub conditions: Vec<HpaCondition>,
}

/// One condition of an autoscaler (`AbleToScale`, `ScalingActive`, `ScalingLimited`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HpaCondition {
    /// Its `type`.
    pub kind: String,
    pub status: String,
    pub reason: String,
    pub message: String,
    pub since: Option<DateTime<Utc>>,
}

impl HpaCondition {
    /// Whether it holds (`status: "True"`).
    pub fn holds(&self) -> bool {
        self.status == "True"
    }
}

/// The annotation autoscaling/v1 keeps v2's conditions in, as a JSON list.
const V1_CONDITIONS: &str = "autoscaling.alpha.kubernetes.io/conditions";

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
            conditions: conditions(h),
        }
    }

    /// Whether a condition `kind` has status `status`.
    pub fn condition(&self, kind: &str, status: &str) -> Option<&HpaCondition> {
        self.conditions
            .iter()
            .find(|c| c.kind == kind && c.status == status)
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

/// v2's (and v2beta2's) conditions, else those autoscaling/v1 keeps in [`V1_CONDITIONS`]: the
/// same autoscaler read through v1 says as much.
fn conditions(h: &Value) -> Vec<HpaCondition> {
    let mut listed = array(h, &["status", "conditions"]).to_vec();
    if listed.is_empty()
        && let Some(a) = obj::annotation(h, V1_CONDITIONS)
        && let Ok(Value::Array(v)) = serde_json::from_str::<Value>(a)
    {
        listed = v;
    }
    listed
        .iter()
        .map(|c| {
            let s = |k: &str| str_at(c, &[k]).unwrap_or_default().to_owned();
            HpaCondition {
                kind: s("type"),
                status: s("status"),
                reason: s("reason"),
                message: s("message"),
                since: time(c, &["lastTransitionTime"]),
            }
        })
        .collect()
}

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
            vec![HpaCondition {
                kind: "ScalingLimited".into(),
                status: "True".into(),
                reason: "TooManyReplicas".into(),
                ..Default::default()
            }]
        );
        // The same autoscaler read through autoscaling/v1 keeps its conditions in an
        // annotation: the rule and the graph read them there as well.
        let v1 = Hpa::parse(&json!({"metadata": {"annotations": {V1_CONDITIONS:
            r#"[{"type":"ScalingLimited","status":"True","reason":"TooManyReplicas","lastTransitionTime":"2026-03-01T12:00:00Z"}]"#}},
            "spec": {"maxReplicas": 4, "targetCPUUtilizationPercentage": 60},
            "status": {"currentReplicas": 4, "currentCPUUtilizationPercentage": 95}}));
        assert_eq!(v1.conditions.len(), 1);
        assert!(
            v1.condition("ScalingLimited", "True")
                .is_some_and(|c| c.reason == "TooManyReplicas")
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
