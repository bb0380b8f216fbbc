//! The JSON-Schema subset workflow parameters use: an object of typed properties with
//! `enum`, `minimum`/`maximum`, `pattern`, `default` and `required`. Validation coerces what
//! models commonly send (`"4"` for 4, `"true"` for true) and names every bad parameter.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ParamType {
    String,
    Integer,
    Number,
    Boolean,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Property {
    #[serde(rename = "type")]
    pub kind: ParamType,
    #[serde(default)]
    pub description: String,
    #[serde(default, rename = "enum", skip_serializing_if = "Option::is_none")]
    pub allowed: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maximum: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ParamSchema {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub properties: BTreeMap<String, Property>,
    #[serde(default)]
    pub required: Vec<String>,
}

impl ParamSchema {
    /// Structural problems: (field path under `parameters`, message).
    pub fn check(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if self.kind != "object" {
            out.push((
                "type".into(),
                format!("must be `object`, not `{}`", self.kind),
            ));
        }
        for r in &self.required {
            if !self.properties.contains_key(r) {
                out.push((
                    "required".into(),
                    format!("`{r}` is required but not a property"),
                ));
            }
        }
        for (name, p) in &self.properties {
            let at = |f: &str| format!("properties.{name}.{f}");
            if let (Some(min), Some(max)) = (p.minimum, p.maximum)
                && min > max
            {
                out.push((at("minimum"), format!("{min} is above maximum {max}")));
            }
            if (p.minimum.is_some() || p.maximum.is_some())
                && !matches!(p.kind, ParamType::Integer | ParamType::Number)
            {
                out.push((
                    at("minimum"),
                    "ranges apply to integer and number parameters only".into(),
                ));
            }
            if let Some(pattern) = &p.pattern {
                if p.kind != ParamType::String {
                    out.push((
                        at("pattern"),
                        "patterns apply to string parameters only".into(),
                    ));
                } else if let Err(e) = regex::Regex::new(pattern) {
                    out.push((at("pattern"), format!("invalid regex: {e}")));
                }
            }
            if let Some(values) = &p.allowed {
                for v in values {
                    if check_type(p.kind, v).is_err() {
                        out.push((at("enum"), format!("{v} is not a {:?}", p.kind)));
                    }
                }
            }
            if let Some(d) = &p.default {
                let mut d = d.clone();
                if let Err(e) = check_property(name, p, &mut d) {
                    out.push((at("default"), e));
                }
            }
        }
        out
    }

    /// Parameter names and whether they are required, for `list_workflows`.
    pub fn summary(&self) -> Value {
        let params: Vec<Value> = self
            .properties
            .keys()
            .filter(|k| !super::TARGET_PARAMS.contains(&k.as_str()))
            .map(|k| json!({"name": k, "required": self.required.contains(k)}))
            .collect();
        Value::Array(params)
    }

    /// The schema as shown to the model: without the target parameters kubemedic injects.
    pub fn for_model(&self) -> Value {
        let mut s = self.clone();
        for p in super::TARGET_PARAMS {
            s.properties.remove(p);
        }
        s.required
            .retain(|r| !super::TARGET_PARAMS.contains(&r.as_str()));
        serde_json::to_value(s).unwrap_or(Value::Null)
    }

    /// Validate (and coerce, and default) parameters in place; all errors at once.
    pub fn validate(&self, params: &mut Map<String, Value>) -> Result<(), Vec<String>> {
        let mut errors = Vec::new();
        for key in params.keys() {
            if !self.properties.contains_key(key) {
                errors.push(format!(
                    "unknown parameter `{key}`; the workflow takes: {}",
                    self.properties
                        .keys()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        for (name, p) in &self.properties {
            match params.get_mut(name) {
                Some(v) => {
                    if let Err(e) = check_property(name, p, v) {
                        errors.push(e);
                    }
                }
                None => {
                    if let Some(d) = &p.default {
                        params.insert(name.clone(), d.clone());
                    } else if self.required.contains(name) {
                        errors.push(format!("missing required parameter `{name}`"));
                    }
                }
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }
}

fn check_type(kind: ParamType, v: &Value) -> Result<(), ()> {
    let ok = match kind {
        ParamType::String => v.is_string(),
        ParamType::Integer => v.as_i64().is_some() || v.as_f64().is_some_and(|f| f.fract() == 0.0),
        ParamType::Number => v.is_number(),
        ParamType::Boolean => v.is_boolean(),
    };
    if ok { Ok(()) } else { Err(()) }
}

/// Coerce a value to the property's type where the intent is clear, then check constraints.
fn check_property(name: &str, p: &Property, v: &mut Value) -> Result<(), String> {
    if let Value::String(s) = v.clone() {
        let coerced = match p.kind {
            ParamType::Integer => s.trim().parse::<i64>().ok().map(Value::from),
            ParamType::Number => s
                .trim()
                .parse::<f64>()
                .ok()
                .and_then(|f| serde_json::Number::from_f64(f).map(Value::Number)),
            ParamType::Boolean => match s.trim() {
                "true" => Some(Value::Bool(true)),
                "false" => Some(Value::Bool(false)),
                _ => None,
            },
            ParamType::String => None,
        };
        if let Some(c) = coerced {
            *v = c;
        }
    }
    if p.kind == ParamType::Integer
        && let Some(f) = v.as_f64()
        && v.as_i64().is_none()
        && f.fract() == 0.0
    {
        *v = Value::from(f as i64);
    }
    if check_type(p.kind, v).is_err() {
        let want = match p.kind {
            ParamType::String => "a string",
            ParamType::Integer => "an integer",
            ParamType::Number => "a number",
            ParamType::Boolean => "true or false",
        };
        return Err(format!("`{name}` must be {want}, got {v}"));
    }
    if let Some(n) = v.as_f64() {
        if let Some(min) = p.minimum
            && n < min
        {
            return Err(format!("`{name}` is {n}, below the minimum {min}"));
        }
        if let Some(max) = p.maximum
            && n > max
        {
            return Err(format!("`{name}` is {n}, above the maximum {max}"));
        }
    }
    if let Some(allowed) = &p.allowed
        && !allowed.contains(v)
    {
        return Err(format!(
            "`{name}` is {v}; allowed: {}",
            allowed
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if let (Some(pattern), Some(s)) = (&p.pattern, v.as_str())
        && let Ok(re) = regex::Regex::new(pattern)
        && !re.is_match(s)
    {
        return Err(format!("`{name}` is `{s}`, which does not match {pattern}"));
    }
    Ok(())
}
