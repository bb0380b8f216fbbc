//! Label selectors: the string form (`app=web,tier!=db,env in (a,b),!canary`) and the object
//! form (`{matchLabels, matchExpressions}`), parsed once and matched against label maps.

use std::collections::BTreeMap;

use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed selector. The empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector(Vec<Requirement>);

impl Selector {
    /// Parse the string form; the error names the bad term.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        for term in split_terms(s) {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            let bad = || format!("invalid selector term `{term}`");
            let req = if let Some(key) = term.strip_prefix('!') {
                Requirement::NotExists(key.trim().to_owned())
            } else if let Some((k, v)) = term.split_once("!=") {
                Requirement::NotEq(k.trim().to_owned(), v.trim().to_owned())
            } else if let Some((k, v)) = term.split_once("==") {
                Requirement::Eq(k.trim().to_owned(), v.trim().to_owned())
            } else if let Some((k, v)) = term.split_once('=') {
                Requirement::Eq(k.trim().to_owned(), v.trim().to_owned())
            } else if let Some((k, rest)) = split_set(term, " notin ") {
                Requirement::NotIn(k, parse_set(&rest).ok_or_else(bad)?)
            } else if let Some((k, rest)) = split_set(term, " in ") {
                Requirement::In(k, parse_set(&rest).ok_or_else(bad)?)
            } else if term
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
            {
                Requirement::Exists(term.to_owned())
            } else {
                return Err(bad());
            };
            if let Requirement::Eq(k, _) | Requirement::NotEq(k, _) = &req
                && k.is_empty()
            {
                return Err(bad());
            }
            reqs.push(req);
        }
        Ok(Self(reqs))
    }

    /// The object form used by Deployments, PDBs, NetworkPolicies… `None` (no selector) is
    /// returned as `None`: such an object selects nothing.
    pub fn from_object(v: &Value) -> Option<Self> {
        let obj = v.as_object()?;
        let mut reqs = Vec::new();
        if let Some(m) = obj.get("matchLabels").and_then(Value::as_object) {
            for (k, v) in m {
                reqs.push(Requirement::Eq(
                    k.clone(),
                    v.as_str().unwrap_or("").to_owned(),
                ));
            }
        }
        for e in obj
            .get("matchExpressions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let key = e
                .get("key")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            let values: Vec<String> = e
                .get("values")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect();
            reqs.push(match e.get("operator").and_then(Value::as_str) {
                Some("In") => Requirement::In(key, values),
                Some("NotIn") => Requirement::NotIn(key, values),
                Some("Exists") => Requirement::Exists(key),
                Some("DoesNotExist") => Requirement::NotExists(key),
                // An operator we do not know: fail closed, match nothing.
                _ => Requirement::In(key, vec![]),
            });
        }
        Some(Self(reqs))
    }

    /// The plain map form a Service (or a ReplicationController) selects with:
    /// `{app: web, tier: front}`. `None` for no selector (or an empty one), which selects
    /// nothing there.
    pub fn from_map(v: &Value) -> Option<Self> {
        let m = v.as_object().filter(|m| !m.is_empty())?;
        Some(Self(
            m.iter()
                .map(|(k, v)| Requirement::Eq(k.clone(), v.as_str().unwrap_or("").to_owned()))
                .collect(),
        ))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn matches<'a>(&self, labels: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.0.iter().all(|r| match r {
            Requirement::Eq(k, v) => labels(k) == Some(v.as_str()),
            Requirement::NotEq(k, v) => labels(k) != Some(v.as_str()),
            Requirement::In(k, vs) => labels(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            Requirement::NotIn(k, vs) => labels(k).is_none_or(|l| !vs.iter().any(|v| v == l)),
            Requirement::Exists(k) => labels(k).is_some(),
            Requirement::NotExists(k) => labels(k).is_none(),
        })
    }

    pub fn matches_map(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches(|k| labels.get(k).map(String::as_str))
    }

    /// Match against an object's `metadata.labels`, or a pod template's labels.
    pub fn matches_value(&self, labels: Option<&Value>) -> bool {
        self.matches(|k| labels.and_then(|l| l.get(k)).and_then(Value::as_str))
    }

    /// The string form, for an API call.
    pub fn to_query(&self) -> String {
        self.0
            .iter()
            .map(|r| match r {
                Requirement::Eq(k, v) => format!("{k}={v}"),
                Requirement::NotEq(k, v) => format!("{k}!={v}"),
                Requirement::In(k, vs) => format!("{k} in ({})", vs.join(",")),
                Requirement::NotIn(k, vs) => format!("{k} notin ({})", vs.join(",")),
                Requirement::Exists(k) => k.clone(),
                Requirement::NotExists(k) => format!("!{k}"),
            })
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Split on commas that are not inside parentheses.
fn split_terms(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn split_set(term: &str, op: &str) -> Option<(String, String)> {
    let lower = term.to_ascii_lowercase();
    let at = lower.find(op)?;
    Some((
        term.get(..at)?.trim().to_owned(),
        term.get(at + op.len()..)?.trim().to_owned(),
    ))
}

fn parse_set(s: &str) -> Option<Vec<String>> {
    let inner = s.trim().strip_prefix('(')?.strip_suffix(')')?;
    Some(
        inner
            .split(',')
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
            .collect(),
    )
}

/// Field selectors kubemedic uses on snapshots: `a.b=c` and `a.b!=c` over the object JSON.
pub fn field_matches(selector: &str, obj: &Value) -> bool {
    selector
        .split(',')
        .filter(|t| !t.trim().is_empty())
        .all(|term| {
            let (path, want, negate) = match term.split_once("!=") {
                Some((p, v)) => (p, v, true),
                None => match term.split_once('=') {
                    Some((p, v)) => (p, v.trim_start_matches('='), false),
                    None => return false,
                },
            };
            let mut cur = Some(obj);
            for part in path.trim().split('.') {
                cur = cur.and_then(|c| c.get(part));
            }
            let got = cur.map(|v| match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            });
            (got.as_deref() == Some(want.trim())) != negate
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    #[test]
    fn string_selectors() {
        let l = labels(&[("app", "web"), ("tier", "front"), ("env", "prod")]);
        for (s, want) in [
            ("app=web", true),
            ("app==web,tier=front", true),
            ("app=db", false),
            ("tier!=db", true),
            ("env in (prod, staging)", true),
            ("env notin (prod)", false),
            ("app", true),
            ("!canary", true),
            ("!app", false),
            ("", true),
        ] {
            assert_eq!(Selector::parse(s).unwrap().matches_map(&l), want, "{s}");
        }
        assert!(Selector::parse("env in prod").is_err());
        assert!(Selector::parse("a b c").is_err());
    }

    #[test]
    fn object_selectors() {
        let sel = Selector::from_object(&json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["front"]}]
        }))
        .unwrap();
        assert!(sel.matches_value(Some(&json!({"app": "web", "tier": "front"}))));
        assert!(!sel.matches_value(Some(&json!({"app": "web"}))));
        assert_eq!(sel.to_query(), "app=web,tier in (front)");
    }

    #[test]
    fn field_selectors() {
        let ev = json!({"involvedObject": {"kind": "Pod", "name": "p1"}, "type": "Warning"});
        assert!(field_matches(
            "involvedObject.kind=Pod,involvedObject.name=p1",
            &ev
        ));
        assert!(!field_matches("involvedObject.name=p2", &ev));
        assert!(field_matches("type!=Normal", &ev));
    }
}
