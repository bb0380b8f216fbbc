//! Where the target's failing connections go: the NetworkPolicies on the far side of the
//! Services they time out to, and the configuration that holds the host they cannot reach.
//! Names found in logs are only matched against the objects of the cluster.

use serde_json::Value;

use super::super::{Ctx, DepKind, Dependency, Read, last_change};
use crate::cluster::obj::at;
use crate::cluster::observed;
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
    let labels = Some(&pod.labels).filter(|l| !l.is_null());
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
        let service = observed::Service::parse(&service);
        if service.selector.is_empty() {
            continue;
        }
        // The policy is judged on pods that carry the Service's selector: its backends.
        let backends = serde_json::json!(service.selector);
        for raw in ctx.list_or_empty("NetworkPolicy", Some(svc_ns)).await? {
            let np = observed::NetworkPolicy::parse(&raw);
            if !np.selects(Some(&backends)) || !np.restricts_ingress() {
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
            if np.admits(ns, judged, labels) {
                continue;
            }
            let name = np.name.as_str();
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
                        np.ingress.len(),
                        d.object
                    ),
                    None,
                )
                .changed(last_change(&raw))
                .culprit_of(d),
            );
        }
    }
    Ok(out)
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
