//! Canonical JSON: one text for one value, whatever order its object keys came in, so that
//! hashing it gives the same digest for the same content (the spec hash, the audit chain).
//!
//! Object keys are sorted by their bytes; numbers are written as serde writes them, except
//! `-0.0`, written `0.0` (Postgres' JSONB gives `-0.0` back as `0.0`). A leaf: it imports nothing
//! of the crate.

use serde_json::Value;

/// `v` as canonical JSON, appended to `out`.
pub fn write(v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                if let Some(val) = map.get(k) {
                    write(val, out);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(item, out);
            }
            out.push(']');
        }
        Value::Number(n) if n.is_f64() && n.as_f64() == Some(0.0) => out.push_str("0.0"),
        other => out.push_str(&other.to_string()),
    }
}

/// `v` as canonical JSON.
pub fn to_string(v: &Value) -> String {
    let mut out = String::new();
    write(v, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_does_not_matter_and_negative_zero_is_zero() {
        let a = json!({"b": [1, 2.5, {"y": 1, "x": null}], "a": "s", "z": -0.0});
        let b: Value =
            serde_json::from_str(r#"{"z": 0.0, "a": "s", "b": [1, 2.5, {"x": null, "y": 1}]}"#)
                .unwrap();
        assert_eq!(to_string(&a), to_string(&b));
        assert_eq!(
            to_string(&a),
            r#"{"a":"s","b":[1,2.5,{"x":null,"y":1}],"z":0.0}"#
        );
    }
}
