//! A NetworkPolicy: which pods it selects, which directions it restricts and whom its ingress
//! rules admit, read once for the dependency graph's two questions (a policy on the failing
//! pods' own connections; a policy in the way of the pods behind a Service they call).

use serde_json::Value;

use crate::cluster::obj::{self, array, at};
use crate::cluster::selector::Selector;

/// A NetworkPolicy, as observed.
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkPolicy {
    pub name: String,
    pub namespace: String,
    /// `spec.podSelector`; `None` when absent or unreadable (it selects every pod of its
    /// namespace, as an empty one does).
    selector: Option<Selector>,
    /// `spec.policyTypes`, defaulted as the API server does when unset: `Ingress`, and
    /// `Egress` when it has egress rules.
    pub types: Vec<String>,
    /// `spec.ingress` and `spec.egress`, as written.
    pub ingress: Vec<Value>,
    pub egress: Vec<Value>,
}

impl NetworkPolicy {
    pub fn parse(np: &Value) -> Self {
        let ingress = array(np, &["spec", "ingress"]).to_vec();
        let egress = array(np, &["spec", "egress"]).to_vec();
        let mut types: Vec<String> = array(np, &["spec", "policyTypes"])
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect();
        if types.is_empty() {
            types.push("Ingress".into());
            if !egress.is_empty() {
                types.push("Egress".into());
            }
        }
        Self {
            name: obj::name(np).to_owned(),
            namespace: obj::namespace(np).unwrap_or_default().to_owned(),
            selector: at(np, &["spec", "podSelector"]).and_then(Selector::from_object),
            types,
            ingress,
            egress,
        }
    }

    /// Whether it selects pods labelled `labels` (in its namespace).
    pub fn selects(&self, labels: Option<&Value>) -> bool {
        self.selector
            .as_ref()
            .is_none_or(|s| s.is_empty() || s.matches_value(labels))
    }

    /// Whether it restricts the selected pods' incoming connections.
    pub fn restricts_ingress(&self) -> bool {
        self.types.iter().any(|t| t == "Ingress")
    }

    /// Whether it restricts the selected pods' outgoing connections.
    pub fn restricts_egress(&self) -> bool {
        self.types.iter().any(|t| t == "Egress")
    }

    /// Whether its ingress rules admit pods labelled `labels` in namespace `ns` (labelled
    /// `ns_labels`). A rule without `from` admits everyone; an `ipBlock` peer may admit them
    /// (pod addresses are not read), so it counts as admitting: only a policy that certainly
    /// drops them is a finding.
    pub fn admits(&self, ns: &str, ns_labels: &Value, labels: Option<&Value>) -> bool {
        let matches = |sel: Option<&Value>, l: Option<&Value>| {
            sel.and_then(Selector::from_object)
                .is_none_or(|s| s.is_empty() || s.matches_value(l))
        };
        self.ingress.iter().any(|rule| {
            let from = array(rule, &["from"]);
            from.is_empty()
                || from.iter().any(|peer| {
                    if at(peer, &["ipBlock"]).is_some() {
                        return true;
                    }
                    let in_ns = match at(peer, &["namespaceSelector"]) {
                        Some(sel) => matches(Some(sel), Some(ns_labels)),
                        None => ns == self.namespace,
                    };
                    in_ns && matches(at(peer, &["podSelector"]), labels)
                })
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn policy(ingress: Value) -> Value {
        json!({"metadata": {"name": "default-deny-ingress", "namespace": "data"},
            "spec": {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": ingress}})
    }

    #[test]
    fn a_default_deny_admits_nobody_and_a_rule_for_the_namespace_admits_its_pods() {
        let ns_labels = json!({"kubernetes.io/metadata.name": "claims", "team": "claims"});
        let labels = json!({"app": "claims-api"});
        let admits_api =
            |np: &Value| NetworkPolicy::parse(np).admits("claims", &ns_labels, Some(&labels));
        assert!(!admits_api(&policy(json!([]))));
        // A rule from the claims namespace, from the api's pods, from anywhere, from an
        // address block (not judged here).
        let by_ns = json!([{"from": [{"namespaceSelector": {"matchLabels": {"team": "claims"}}}]}]);
        assert!(admits_api(&policy(by_ns)));
        let by_pod = json!([{"from": [{"namespaceSelector": {}, "podSelector": {"matchLabels": {"app": "claims-api"}}}]}]);
        assert!(admits_api(&policy(by_pod)));
        assert!(admits_api(&policy(json!([{"ports": [{"port": 5432}]}]))));
        assert!(admits_api(&policy(
            json!([{"from": [{"ipBlock": {"cidr": "10.0.0.0/8"}}]}])
        )));
        // From other namespaces or other pods only.
        let other_ns =
            json!([{"from": [{"namespaceSelector": {"matchLabels": {"team": "billing"}}}]}]);
        assert!(!admits_api(&policy(other_ns)));
        let same_ns_only =
            json!([{"from": [{"podSelector": {"matchLabels": {"app": "claims-api"}}}]}]);
        assert!(!admits_api(&policy(same_ns_only)));
    }

    #[test]
    fn unset_policy_types_are_defaulted_as_the_api_server_does() {
        let parse =
            |spec: Value| NetworkPolicy::parse(&json!({"metadata": {"name": "p"}, "spec": spec}));
        let only_in = parse(json!({"podSelector": {}, "ingress": [{}]}));
        assert!(only_in.restricts_ingress() && !only_in.restricts_egress());
        let with_out = parse(json!({"podSelector": {}, "egress": [{"to": []}]}));
        assert!(with_out.restricts_ingress() && with_out.restricts_egress());
        let written = parse(json!({"podSelector": {}, "policyTypes": ["Egress"]}));
        assert!(!written.restricts_ingress() && written.restricts_egress());
    }

    #[test]
    fn it_selects_by_its_pod_selector_and_an_empty_one_selects_every_pod() {
        let api = json!({"app": "api"});
        let all = NetworkPolicy::parse(&json!({"spec": {"podSelector": {}}}));
        assert!(all.selects(Some(&api)) && all.selects(None));
        let db =
            NetworkPolicy::parse(&json!({"spec": {"podSelector": {"matchLabels": {"app": "db"}}}}));
        assert!(!db.selects(Some(&api)));
        assert!(db.selects(Some(&json!({"app": "db", "tier": "data"}))));
    }
}
