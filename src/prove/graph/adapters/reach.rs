//! Where the target's failing connections go: the NetworkPolicies on the far side of the
//! Services they time out to, and the configuration that holds the host they cannot reach.
//! Names found in logs are only matched against the objects of the cluster.

use serde_json::Value;

use super::super::{Ctx, DepKind, Dependency, Read, last_change};
use crate::cluster::obj::{self, array, at};
use crate::cluster::selector::Selector;
use crate::domain::Target;

/// The NetworkPolicies on the far side of the Services the failing connections go to: a policy
/// that selects a Service's pods for Ingress and admits none of the target's pods drops its
/// connections there, whatever the target's own namespace allows (distance 2, the culprit of
/// the Service's trouble). Only when the failures are connections that time out.
pub(in crate::prove::graph) async fn ingress_behind(
    ctx: &Ctx,
    found: &[Dependency],
) -> Read<Vec<Dependency>> {
    let timing_out = ctx.timing_out();
    let (Some(ns), Some(pod)) = (ctx.ns.as_deref(), ctx.pods.first()) else {
        return Ok(vec![]);
    };
    if !timing_out {
        return Ok(vec![]);
    }
    let labels = at(pod, &["metadata", "labels"]);
    // The target namespace's labels, read once and only for a policy to judge.
    let mut ns_labels: Option<Value> = None;
    let mut out = Vec::new();
    for d in found.iter().filter(|d| d.kind == DepKind::Host) {
        let Some((svc_ns, svc)) = d
            .subject
            .as_ref()
            .filter(|s| s.kind == "Service")
            .and_then(|s| Some((s.namespace.as_deref()?, s.name.as_str())))
        else {
            continue;
        };
        let Some(service) = ctx.get("Service", Some(svc_ns), svc).await? else {
            continue;
        };
        let Some(backends) = at(&service, &["spec", "selector"]).filter(|s| s.is_object()) else {
            continue;
        };
        for np in ctx.list_or_empty("NetworkPolicy", Some(svc_ns)).await? {
            let selects = at(&np, &["spec", "podSelector"])
                .and_then(Selector::from_object)
                .is_none_or(|s| s.is_empty() || s.matches_value(Some(backends)));
            let ingress = array(&np, &["spec", "policyTypes"]).is_empty()
                || array(&np, &["spec", "policyTypes"])
                    .iter()
                    .any(|t| t.as_str() == Some("Ingress"));
            if !selects || !ingress {
                continue;
            }
            if ns_labels.is_none() {
                let own = ctx.get("Namespace", None, ns).await?;
                ns_labels = Some(
                    own.as_ref()
                        .and_then(|n| at(n, &["metadata", "labels"]))
                        .cloned()
                        .unwrap_or_else(
                            || serde_json::json!({ "kubernetes.io/metadata.name": ns }),
                        ),
                );
            }
            let judged = ns_labels.as_ref().unwrap_or(&Value::Null);
            if admits(&np, svc_ns, ns, judged, labels) {
                continue;
            }
            let name = obj::name(&np);
            out.push(
                Dependency::of(
                    DepKind::Network,
                    Target::new("NetworkPolicy", name, Some(svc_ns.to_owned())),
                    format!("selects the pods behind {} for Ingress", d.object),
                )
                .at(2)
                .unhealthy(
                    format!(
                        "admits no connection from the pods of {ns} ({} ingress rule(s)) while their connections to {} time out",
                        array(&np, &["spec", "ingress"]).len(),
                        d.object
                    ),
                    None,
                )
                .changed(last_change(&np))
                .culprit_of(d.object.clone()),
            );
        }
    }
    Ok(out)
}

/// Whether an Ingress policy's rules admit pods with `labels` in namespace `ns` (labelled
/// `ns_labels`). A rule without `from` admits everyone; an `ipBlock` peer may admit them (pod
/// addresses are not read here), so it counts as admitting: only a policy that certainly drops
/// them is a finding.
fn admits(np: &Value, np_ns: &str, ns: &str, ns_labels: &Value, labels: Option<&Value>) -> bool {
    let matches = |sel: Option<&Value>, l: Option<&Value>| {
        sel.and_then(Selector::from_object)
            .is_none_or(|s| s.is_empty() || s.matches_value(l))
    };
    array(np, &["spec", "ingress"]).iter().any(|rule| {
        let from = array(rule, &["from"]);
        from.is_empty()
            || from.iter().any(|peer| {
                if at(peer, &["ipBlock"]).is_some() {
                    return true;
                }
                let in_ns = match at(peer, &["namespaceSelector"]) {
                    Some(sel) => matches(Some(sel), Some(ns_labels)),
                    None => ns == np_ns,
                };
                in_ns && matches(at(peer, &["podSelector"]), labels)
            })
    })
}

/// The key of a ConfigMap whose value names the host dependency `d`: a Service (its
/// [`Dependency::subject`]) as `name.ns` in a DNS name, or a host only named in the failures
/// (`host x.y.z`, no object the API serves).
pub(super) fn holds_host(cm: &Value, d: &Dependency) -> Option<String> {
    let host = match &d.subject {
        Some(s) if s.kind == "Service" => format!("{}.{}", s.name, s.namespace.as_deref()?),
        Some(_) => return None,
        None => d.object.strip_prefix("host ")?.to_owned(),
    };
    if host.len() < 4 {
        return None;
    }
    at(cm, &["data"])
        .and_then(Value::as_object)?
        .iter()
        .find(|(_, v)| v.as_str().is_some_and(|v| names(v, &host)))
        .map(|(k, _)| k.clone())
}

/// Whether `text` holds `host` as a whole name: not inside a longer one (`db.shop` is not in
/// `db.shop-v2`, nor in `mydb.shop`).
fn names(text: &str, host: &str) -> bool {
    let part = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    text.match_indices(host).any(|(i, _)| {
        let before = text.get(..i).and_then(|b| b.chars().next_back());
        let after = text.get(i + host.len()..).and_then(|a| a.chars().next());
        !before.is_some_and(part) && !after.is_some_and(part)
    })
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
        let admits_api = |np: &Value| admits(np, "data", "claims", &ns_labels, Some(&labels));
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
    fn a_configmap_holds_a_host_by_its_dns_name_not_by_a_fragment() {
        let cm = json!({"data": {"CARRIER_URL": "http://carrier-gateway.shipping-v2.svc.cluster.local:8080", "TIMEOUT": "2s"}});
        let host = |h: &str| Dependency::new(DepKind::Host, format!("host {h}"), "named");
        let service = |ns: &str| {
            Dependency::of(
                DepKind::Host,
                Target::new("Service", "carrier-gateway", Some(ns.into())),
                "named",
            )
        };
        assert_eq!(
            holds_host(&cm, &host("carrier-gateway.shipping-v2.svc.cluster.local")).as_deref(),
            Some("CARRIER_URL")
        );
        assert_eq!(
            holds_host(&cm, &service("shipping-v2")).as_deref(),
            Some("CARRIER_URL")
        );
        assert_eq!(holds_host(&cm, &service("shipping")), None);
        assert_eq!(holds_host(&cm, &host("db")), None);
    }
}
