//! A Service, as far as decisions read it: the pods it selects.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::cluster::obj::{self, at, map_pairs};
use crate::cluster::selector::Selector;

/// A Service, as observed.
#[derive(Debug, Clone, Default)]
pub struct Service {
    pub name: String,
    /// `spec.selector`: the labels a pod must carry to be one of its endpoints; empty for a
    /// Service without one (its endpoints are managed by hand).
    pub selector: BTreeMap<String, String>,
}

impl Service {
    pub fn parse(s: &Value) -> Self {
        Self {
            name: obj::name(s).to_owned(),
            selector: map_pairs(at(s, &["spec", "selector"]))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
        }
    }

    /// The selector as a label selector; `None` when it has none (it selects no pod).
    pub fn label_selector(&self) -> Option<Selector> {
        Selector::from_map(&serde_json::to_value(&self.selector).ok()?)
    }

    /// Whether it selects a pod (or a pod template) with these `metadata.labels`: it has a
    /// selector and the labels carry every `key=value` of it.
    pub fn selects(&self, labels: Option<&Value>) -> bool {
        !self.selector.is_empty()
            && self
                .selector
                .iter()
                .all(|(k, v)| labels.and_then(|l| l.get(k)).and_then(Value::as_str) == Some(v))
    }

    /// The `key=value` pairs of its selector these labels do not carry, with what they carry
    /// instead: `app=web (now app=api)`, `tier=front (now absent)`.
    pub fn lost(&self, labels: Option<&Value>) -> Vec<String> {
        self.selector
            .iter()
            .filter_map(
                |(k, v)| match labels.and_then(|l| l.get(k)).and_then(Value::as_str) {
                    Some(now) if now == v => None,
                    Some(now) => Some(format!("{k}={v} (now {k}={now})")),
                    None => Some(format!("{k}={v} (now absent)")),
                },
            )
            .collect()
    }
}

/// A Service's `Endpoints`, as far as decisions read them: how many addresses are ready to
/// take traffic, and how many are listed but not ready.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Endpoints {
    pub ready: usize,
    pub not_ready: usize,
}

impl Endpoints {
    /// The addresses of an `Endpoints` object over its subsets; none for a Service that has
    /// no such object (`None`).
    pub fn parse(e: Option<&Value>) -> Self {
        let Some(e) = e else {
            return Self::default();
        };
        obj::array(e, &["subsets"])
            .iter()
            .fold(Self::default(), |n, s| Self {
                ready: n.ready + obj::array(s, &["addresses"]).len(),
                not_ready: n.not_ready + obj::array(s, &["notReadyAddresses"]).len(),
            })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn endpoints_count_their_addresses_over_every_subset() {
        let e = json!({"subsets": [
            {"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}], "notReadyAddresses": [{"ip": "10.0.0.3"}]},
            {"addresses": [{"ip": "10.0.1.1"}]}
        ]});
        assert_eq!(
            Endpoints::parse(Some(&e)),
            Endpoints {
                ready: 3,
                not_ready: 1
            }
        );
        assert_eq!(Endpoints::parse(Some(&json!({}))), Endpoints::default());
        assert_eq!(Endpoints::parse(None), Endpoints::default());
    }
}
