//! Workflow parameters: the three a target supplies, `${NAME}` references, and their
//! substitution into step arguments.

use serde_json::{Map, Value, json};

use crate::domain::Target;

/// Parameters kubemedic fills from the verified root owner; a selection never sets them.
pub const TARGET_PARAMS: [&str; 3] = [
    "TARGET_RESOURCE_KIND",
    "TARGET_RESOURCE_NAME",
    "TARGET_RESOURCE_NAMESPACE",
];

/// `${NAME}` references in a string.
pub fn references(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else { break };
        out.push(after[..end].to_owned());
        rest = &after[end + 1..];
    }
    out
}

/// The workflow's parameters with `TARGET_RESOURCE_*` taken from the verified root owner
/// (whatever the selection said).
pub fn parameters(selected: &Map<String, Value>, target: &Target) -> Map<String, Value> {
    let mut p = selected.clone();
    p.insert("TARGET_RESOURCE_KIND".into(), json!(target.kind));
    p.insert("TARGET_RESOURCE_NAME".into(), json!(target.name));
    p.insert(
        "TARGET_RESOURCE_NAMESPACE".into(),
        json!(target.namespace.clone().unwrap_or_default()),
    );
    p
}

/// `${NAME}` in step arguments: a whole-string reference takes the parameter's JSON value (a
/// number stays a number); references inside text are replaced by the value's text.
pub fn substitute(v: &Value, params: &Map<String, Value>) -> Value {
    match v {
        Value::String(s) => {
            if let Some(name) = s.strip_prefix("${").and_then(|r| r.strip_suffix('}'))
                && !name.contains(['$', '{', '}'])
            {
                return params.get(name).cloned().unwrap_or(Value::Null);
            }
            let mut out = s.clone();
            for (k, val) in params {
                let text = match val {
                    Value::String(t) => t.clone(),
                    other => other.to_string(),
                };
                out = out.replace(&format!("${{{k}}}"), &text);
            }
            Value::String(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(|x| substitute(x, params)).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, x)| (k.clone(), substitute(x, params)))
                .collect(),
        ),
        other => other.clone(),
    }
}
