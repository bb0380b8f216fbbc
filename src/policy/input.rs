//! [`GateInput`] as a regorus value, built directly.
//!
//! regorus converts a `serde_json::Value` by deserialising it again (8 µs for this input on the
//! benchmark machine — half of a whole RVM decision); building the `Value` tree directly costs a
//! fraction of that. Invariant: the result equals the serde form of the input (the form the
//! audit trail, `policy test --format json` and the OPA cross-check see) — the tests below
//! compare the two for full and empty inputs, so a field added to [`GateInput`] or
//! `DetectedLabels` without its line here fails them.

use std::collections::BTreeMap;

use regorus::Value;

use super::{BusinessClassification, GateInput, ProofInput, UndoInput};
use crate::domain::{DetectedLabels, Target};

fn obj(entries: Vec<(&str, Value)>) -> Value {
    Value::from(
        entries
            .into_iter()
            .map(|(k, v)| (Value::from(k), v))
            .collect::<BTreeMap<Value, Value>>(),
    )
}

fn s(v: &str) -> Value {
    Value::from(v)
}

fn strings(v: &[String]) -> Value {
    Value::from(v.iter().map(|x| s(x)).collect::<Vec<_>>())
}

fn target(t: &Target) -> Value {
    let mut e = vec![("kind", s(&t.kind)), ("name", s(&t.name))];
    if let Some(ns) = &t.namespace {
        e.push(("namespace", s(ns)));
    }
    obj(e)
}

fn labels(d: &DetectedLabels) -> Value {
    let mut e = vec![
        ("gitOpsManaged", Value::from(d.git_ops_managed)),
        ("helmManaged", Value::from(d.helm_managed)),
        ("pdbProtected", Value::from(d.pdb_protected)),
        ("hpaEnabled", Value::from(d.hpa_enabled)),
        ("stateful", Value::from(d.stateful)),
        ("networkIsolated", Value::from(d.network_isolated)),
        ("serviceMesh", Value::from(d.service_mesh)),
        (
            "resourceQuotaConstrained",
            Value::from(d.resource_quota_constrained),
        ),
        ("failedDetections", strings(&d.failed_detections)),
    ];
    if let Some(t) = &d.git_ops_tool {
        e.push(("gitOpsTool", s(t)));
    }
    if let Some(t) = &d.service_mesh_type {
        e.push(("serviceMeshType", s(t)));
    }
    if !d.quota_details.is_empty() {
        let quota = d
            .quota_details
            .iter()
            .map(|(k, q)| (s(k), obj(vec![("hard", s(&q.hard)), ("used", s(&q.used))])))
            .collect::<BTreeMap<Value, Value>>();
        e.push(("quota_details", Value::from(quota)));
    }
    obj(e)
}

fn business(b: &BusinessClassification) -> Value {
    let mut e = Vec::new();
    for (k, v) in [
        ("business_unit", &b.business_unit),
        ("priority", &b.priority),
        ("risk_tolerance", &b.risk_tolerance),
    ] {
        if let Some(v) = v {
            e.push((k, s(v)));
        }
    }
    obj(e)
}

fn proof(p: &ProofInput) -> Value {
    obj(vec![
        ("verdict", s(&p.verdict)),
        ("holds", strings(&p.holds)),
        ("failed", strings(&p.failed)),
    ])
}

/// The policy's `input` for `i`.
pub fn to_value(i: &GateInput) -> Value {
    let mut e = vec![
        ("environment", s(&i.environment)),
        ("confidence", Value::from(i.confidence)),
        ("confidence_threshold", Value::from(i.confidence_threshold)),
        ("detected_labels", labels(&i.detected_labels)),
        ("failed_detections", strings(&i.failed_detections)),
        ("warnings", strings(&i.warnings)),
        (
            "business_classification",
            business(&i.business_classification),
        ),
        ("signal_mode", s(i.signal_mode.as_str())),
    ];
    let severity = i.severity.as_ref().map(|s| s.as_str().to_owned());
    for (k, v) in [
        ("severity", &severity),
        ("action_type", &i.action_type),
        ("workflow_id", &i.workflow_id),
    ] {
        if let Some(v) = v {
            e.push((k, s(v)));
        }
    }
    if let Some(t) = &i.remediation_target {
        e.push(("remediation_target", target(t)));
    }
    if let Some(p) = &i.proof {
        e.push(("proof", proof(p)));
    }
    if let Some(u) = &i.undo {
        e.push(("undo", undo(u)));
    }
    obj(e)
}

fn undo(u: &UndoInput) -> Value {
    obj(vec![
        ("worse", strings(&u.worse)),
        ("ready_before", Value::from(u64::from(u.ready_before))),
        ("ready_after", Value::from(u64::from(u.ready_after))),
        ("failing_before", Value::from(u64::from(u.failing_before))),
        ("failing_after", Value::from(u64::from(u.failing_after))),
        ("new_causes", strings(&u.new_causes)),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::QuotaUsage;
    use crate::domain::SignalMode;

    fn via_serde(i: &GateInput) -> Value {
        let text = serde_json::to_string(i).unwrap();
        Value::from_json_str(&text).unwrap()
    }

    #[test]
    fn a_full_input_equals_its_serde_form() {
        let mut quota = BTreeMap::new();
        quota.insert(
            "cpu".to_owned(),
            QuotaUsage {
                hard: "4".into(),
                used: "3500m".into(),
            },
        );
        let i = GateInput {
            environment: "production".into(),
            severity: Some("critical".into()),
            confidence: 0.87,
            confidence_threshold: 0.8,
            remediation_target: Some(Target::new("Deployment", "web", Some("shop".into()))),
            action_type: Some("RestartDeployment".into()),
            workflow_id: Some("restart-v1".into()),
            detected_labels: DetectedLabels {
                git_ops_managed: true,
                git_ops_tool: Some("argocd".into()),
                helm_managed: true,
                pdb_protected: true,
                hpa_enabled: false,
                stateful: true,
                network_isolated: true,
                service_mesh: true,
                service_mesh_type: Some("istio".into()),
                resource_quota_constrained: true,
                quota_details: quota,
                failed_detections: vec!["hpaEnabled".into()],
            },
            failed_detections: vec!["hpaEnabled".into()],
            warnings: vec!["configuration regression".into()],
            business_classification: BusinessClassification {
                business_unit: Some("payments".into()),
                priority: Some("P1".into()),
                risk_tolerance: Some("low".into()),
            },
            signal_mode: SignalMode::Proactive,
            proof: Some(ProofInput {
                verdict: "proven".into(),
                holds: vec!["restart.keeps-ready-pods".into()],
                failed: vec![],
            }),
            undo: Some(UndoInput {
                worse: vec!["0 ready pod(s), 2 before the remediation".into()],
                ready_before: 2,
                ready_after: 0,
                failing_before: 0,
                failing_after: 2,
                new_causes: vec!["CrashLoopBackOff".into()],
            }),
        };
        assert_eq!(to_value(&i), via_serde(&i));
    }

    #[test]
    fn an_empty_input_equals_its_serde_form() {
        let i: GateInput = serde_json::from_str(r#"{"environment": ""}"#).unwrap();
        assert_eq!(to_value(&i), via_serde(&i));
        let node = GateInput {
            remediation_target: Some(Target::new("Node", "worker-1", None)),
            ..i
        };
        assert_eq!(to_value(&node), via_serde(&node));
    }
}
