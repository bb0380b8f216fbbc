//! Defences against malformed model output, before giving up (DESIGN §3.4): double-encoded
//! JSON, JSON inside prose or code fences (balanced extraction), `[{…}]` → `{…}`, string
//! numbers → numbers, and a partial-RCA guard. Pure functions; the retries (truncation,
//! forced sentinel) live in the LLM loop.

use serde_json::{Map, Value};

use crate::domain::{InvestigationOutcome, RcaResult, RootCauseAnalysis, TargetRef};

/// Find the JSON object a model meant, in whatever it wrapped it in.
pub fn extract_json(text: &str) -> Option<Value> {
    let trimmed = text.trim();
    if let Ok(v) = serde_json::from_str::<Value>(trimmed) {
        return Some(unwrap_layers(v));
    }
    // Code fences: ```json … ``` (take the first fenced block that parses).
    let mut rest = trimmed;
    while let Some(start) = rest.find("```") {
        let after = &rest[start + 3..];
        let body_start = after.find('\n').map_or(0, |n| n + 1);
        let Some(end) = after[body_start..].find("```") else {
            break;
        };
        let body = &after[body_start..body_start + end];
        if let Some(v) = balanced(body).and_then(|s| serde_json::from_str::<Value>(s).ok()) {
            return Some(unwrap_layers(v));
        }
        rest = &after[body_start + end + 3..];
    }
    // The first balanced object or array in prose; later ones if the first does not parse.
    let mut offset = 0;
    while let Some(candidate) = balanced(&trimmed[offset..]) {
        if let Ok(v) = serde_json::from_str::<Value>(candidate) {
            return Some(unwrap_layers(v));
        }
        let start = trimmed[offset..].find(candidate).unwrap_or(0);
        offset += start + 1;
        if offset >= trimmed.len() {
            break;
        }
    }
    None
}

/// Double-encoded JSON (a string holding JSON) and single-element arrays.
pub fn unwrap_layers(mut v: Value) -> Value {
    for _ in 0..3 {
        v = match v {
            Value::String(s) => match serde_json::from_str::<Value>(s.trim()) {
                Ok(inner @ (Value::Object(_) | Value::Array(_))) => inner,
                _ => return Value::String(s),
            },
            Value::Array(mut items) if items.len() == 1 && items[0].is_object() => items.remove(0),
            other => return other,
        };
    }
    v
}

/// The first `{…}` or `[…]` with balanced brackets, strings respected.
pub fn balanced(s: &str) -> Option<&str> {
    let start = s.find(['{', '['])?;
    let bytes = s.as_bytes();
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (i, &b) in bytes.iter().enumerate().skip(start) {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return s.get(start..=i);
                }
            }
            _ => {}
        }
    }
    None
}

/// A number, from a number or a string ("0.85", "85%", " .9 ").
pub fn number(v: Option<&Value>) -> Option<f64> {
    match v? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => {
            let t = s.trim();
            if let Some(p) = t.strip_suffix('%') {
                p.trim().parse::<f64>().ok().map(|n| n / 100.0)
            } else {
                t.parse::<f64>().ok()
            }
        }
        _ => None,
    }
}

pub fn boolean(v: Option<&Value>) -> Option<bool> {
    match v? {
        Value::Bool(b) => Some(*b),
        Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" => Some(true),
            "false" | "no" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

fn text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_owned()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn strings(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::Array(items)) => items.iter().filter_map(|i| text(Some(i))).collect(),
        Some(Value::String(s)) if !s.trim().is_empty() => vec![s.trim().to_owned()],
        _ => vec![],
    }
}

pub fn outcome(v: Option<&Value>) -> Option<InvestigationOutcome> {
    let s = text(v)?.to_ascii_lowercase().replace([' ', '-'], "_");
    Some(match s.as_str() {
        "actionable" => InvestigationOutcome::Actionable,
        "not_actionable" | "notactionable" => InvestigationOutcome::NotActionable,
        "problem_resolved" | "resolved" | "self_resolved" => InvestigationOutcome::ProblemResolved,
        "insufficient_data" => InvestigationOutcome::InsufficientData,
        "inconclusive" => InvestigationOutcome::Inconclusive,
        _ => return None,
    })
}

fn target(v: Option<&Value>) -> Option<TargetRef> {
    let o = v?.as_object()?;
    let get = |keys: &[&str]| keys.iter().find_map(|k| text(o.get(*k)));
    let kind = get(&["kind", "Kind"])?;
    let name = get(&["name", "Name"])?;
    Some(TargetRef {
        kind,
        name,
        namespace: get(&["namespace", "Namespace"]),
        api_version: get(&["api_version", "apiVersion", "APIVersion"]),
    })
}

/// The RCA from a sentinel's arguments or a repaired answer. Accepts the nested schema and
/// the common flattened variants; rejects a partial answer (a confidence without a usable
/// summary).
pub fn rca(v: &Value) -> Result<RcaResult, String> {
    let v = unwrap_layers(v.clone());
    let top = v.as_object().ok_or("the RCA is not a JSON object")?;
    let nested = top
        .get("root_cause_analysis")
        .map(|r| unwrap_layers(r.clone()));
    let empty = Map::new();
    let inner: &Map<String, Value> = nested.as_ref().and_then(Value::as_object).unwrap_or(&empty);
    let pick = |k: &str| inner.get(k).or_else(|| top.get(k));
    let summary = text(pick("summary")).unwrap_or_default();
    let confidence = number(top.get("confidence").or_else(|| inner.get("confidence")));
    let outcome_v = outcome(
        top.get("investigation_outcome")
            .or_else(|| inner.get("investigation_outcome")),
    );
    if summary.is_empty() {
        return Err(if confidence.is_some() {
            "partial RCA: a confidence without a summary".into()
        } else {
            "no root_cause_analysis.summary".into()
        });
    }
    let outcome_v = outcome_v.ok_or("missing or unknown investigation_outcome (actionable, not_actionable, problem_resolved, insufficient_data, inconclusive)")?;
    let confidence = confidence.ok_or("missing confidence")?.clamp(0.0, 1.0);
    let actionable =
        boolean(top.get("actionable")).unwrap_or(outcome_v == InvestigationOutcome::Actionable);
    Ok(RcaResult {
        root_cause_analysis: RootCauseAnalysis {
            summary,
            severity: text(pick("severity"))
                .unwrap_or_else(|| "unknown".into())
                .to_ascii_lowercase()
                .into(),
            contributing_factors: strings(pick("contributing_factors")),
            remediation_target: target(pick("remediation_target")),
            investigation_analysis: text(pick("investigation_analysis")).unwrap_or_default(),
        },
        confidence,
        investigation_outcome: outcome_v,
        actionable,
        needs_human_review: boolean(top.get("needs_human_review")).unwrap_or(false),
        human_review_reason: text(top.get("human_review_reason")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const RCA: &str = r#"{"root_cause_analysis": {"summary": "bad rollout", "severity": "critical", "contributing_factors": ["image 1.4.2"], "remediation_target": {"kind": "Deployment", "name": "checkout", "namespace": "shop"}}, "confidence": 0.9, "investigation_outcome": "actionable", "actionable": true}"#;

    #[test]
    fn json_in_prose_and_fences() {
        let prose = format!("Here is my answer: {RCA} — hope that helps {{not json}}");
        assert_eq!(rca(&extract_json(&prose).unwrap()).unwrap().confidence, 0.9);
        let fenced = format!("Result:\n```json\n{RCA}\n```\nDone.");
        assert_eq!(
            rca(&extract_json(&fenced).unwrap())
                .unwrap()
                .root_cause_analysis
                .summary,
            "bad rollout"
        );
        let braces_in_strings = r#"noise {"root_cause_analysis": {"summary": "a } inside"}, "confidence": "0.8", "investigation_outcome": "inconclusive"} tail"#;
        assert_eq!(
            rca(&extract_json(braces_in_strings).unwrap())
                .unwrap()
                .root_cause_analysis
                .summary,
            "a } inside"
        );
    }

    #[test]
    fn double_encoded_arrays_and_string_numbers() {
        let double = serde_json::to_string(&RCA).unwrap();
        assert_eq!(
            rca(&extract_json(&double).unwrap()).unwrap().confidence,
            0.9
        );
        let array = format!("[{RCA}]");
        assert!(rca(&extract_json(&array).unwrap()).is_ok());
        let v = json!({"root_cause_analysis": {"summary": "x"}, "confidence": "85%", "investigation_outcome": "Problem Resolved"});
        let r = rca(&v).unwrap();
        assert_eq!(r.confidence, 0.85);
        assert_eq!(
            r.investigation_outcome,
            InvestigationOutcome::ProblemResolved
        );
    }

    #[test]
    fn partial_answers_are_rejected() {
        assert!(
            rca(&json!({"confidence": 0.9}))
                .unwrap_err()
                .contains("partial")
        );
        assert!(rca(&json!({"root_cause_analysis": {"summary": "x"}, "confidence": 0.9})).is_err());
        assert!(extract_json("I could not determine anything.").is_none());
    }
}
