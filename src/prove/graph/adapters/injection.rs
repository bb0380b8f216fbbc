//! What an admission webhook adds to pods when they are created: a sidecar, an init container.
//! When the failing pods of one template lack containers that every serving sibling has and
//! that the template does not name, the injection happened for the older pods and not for
//! those created since: what selects the injection (the namespace's labels) changed. The
//! namespace is the dependency, with the injected containers that are missing and, for the
//! meshes that say which label selects them (Istio's `sidecar.istio.io/status`, Linkerd's
//! proxy annotation), the label it needs.

use std::collections::BTreeSet;

use serde_json::Value;

use super::super::{Ctx, DepKind, Dependency, Read, last_change, time};
use super::template;
use crate::cluster::obj::{self, array, str_at};
use crate::domain::Target;

/// The container names (init and regular) of a pod spec.
fn containers(spec: &Value) -> BTreeSet<String> {
    ["initContainers", "containers"]
        .iter()
        .flat_map(|k| array(spec, &[k]).iter())
        .filter_map(|c| str_at(c, &["name"]).map(str::to_owned))
        .collect()
}

/// The namespace label a mesh's injector selects by, as the serving pods' annotations say.
fn injection_label(pod: &Value) -> Option<(String, String)> {
    if let Some(status) = obj::annotation(pod, "sidecar.istio.io/status") {
        let revision = serde_json::from_str::<Value>(status)
            .ok()
            .and_then(|s| s.get("revision").and_then(Value::as_str).map(str::to_owned))
            .unwrap_or_else(|| "default".to_owned());
        return Some(if revision == "default" {
            ("istio-injection".into(), "enabled".into())
        } else {
            ("istio.io/rev".into(), revision)
        });
    }
    obj::annotation(pod, "linkerd.io/proxy-version")
        .map(|_| ("linkerd.io/inject".into(), "enabled".into()))
}

pub(in crate::prove::graph) async fn injection(ctx: &Ctx) -> Read<Vec<Dependency>> {
    let Some(ns) = ctx.ns.as_deref() else {
        return Ok(vec![]);
    };
    if ctx.failing.is_empty() {
        return Ok(vec![]);
    }
    let declared = containers(&template(ctx)["spec"]);
    let live: Vec<&Value> = ctx
        .pods
        .iter()
        .filter(|p| !p.deleting)
        .map(|p| &p.raw)
        .collect();
    let (failing, serving): (Vec<&Value>, Vec<&Value>) = live
        .into_iter()
        .partition(|p| ctx.failing.iter().any(|f| f == obj::name(p)));
    if serving.is_empty() || declared.is_empty() {
        return Ok(vec![]);
    }
    let injected = |p: &Value| -> BTreeSet<String> {
        containers(&p["spec"])
            .difference(&declared)
            .cloned()
            .collect()
    };
    // What every serving pod had injected…
    let mut every: Option<BTreeSet<String>> = None;
    for p in &serving {
        let i = injected(p);
        every = Some(match every {
            None => i,
            Some(e) => e.intersection(&i).cloned().collect(),
        });
    }
    let every = every.unwrap_or_default();
    if every.is_empty() {
        return Ok(vec![]);
    }
    // …and every failing pod lacks.
    let missing: BTreeSet<String> = every
        .iter()
        .filter(|c| failing.iter().all(|p| !injected(p).contains(*c)))
        .cloned()
        .collect();
    if missing.is_empty() {
        return Ok(vec![]);
    }
    let missing: Vec<String> = missing.into_iter().collect();
    let newest_serving = serving
        .iter()
        .filter_map(|p| time(p, &["metadata", "creationTimestamp"]))
        .max();
    let first_failing = failing
        .iter()
        .filter_map(|p| time(p, &["metadata", "creationTimestamp"]))
        .min();
    let namespace = ctx.get("Namespace", None, ns).await?;
    let label = serving.iter().find_map(|p| injection_label(p));
    let labels = namespace
        .as_ref()
        .map(|n| {
            obj::labels(n)
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let unhealthy = match &label {
        Some((k, v)) if !labels.iter().any(|(lk, lv)| lk == k && lv == v) => format!(
            "has no label {k}={v}, which selects the injection of {}: new pods go without",
            missing.join(", ")
        ),
        _ => format!(
            "no longer gets {} injected into new pods",
            missing.join(", ")
        ),
    };
    let names = |ps: &[&Value]| {
        ps.iter()
            .take(3)
            .map(|p| obj::name(p).to_owned())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut d = Dependency::of(
        DepKind::Admission,
        Target::new("Namespace", ns, None),
        format!(
            "its labels select the admission webhook that injected {} into the pods",
            missing.join(", ")
        ),
    )
    .unhealthy(unhealthy, first_failing)
    .changed(namespace.as_ref().and_then(last_change))
    .evidence(format!(
        "serving pods {} carry {} (not in the template); failing pods {} do not",
        names(&serving),
        missing.join(", "),
        names(&failing)
    ));
    if let (Some(s), Some(f)) = (newest_serving, first_failing)
        && f > s
    {
        d = d.evidence(format!(
            "the last pod injected was created at {}, the first without at {}",
            s.format("%H:%M"),
            f.format("%H:%M")
        ));
    }
    Ok(vec![d])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_mesh_says_which_label_selects_its_injection() {
        let istio = json!({"metadata": {"annotations": {
            "sidecar.istio.io/status": "{\"containers\":[\"istio-proxy\"],\"revision\":\"default\"}"}}});
        assert_eq!(
            injection_label(&istio),
            Some(("istio-injection".into(), "enabled".into()))
        );
        let canary = json!({"metadata": {"annotations": {
            "sidecar.istio.io/status": "{\"revision\":\"1-22\"}"}}});
        assert_eq!(
            injection_label(&canary),
            Some(("istio.io/rev".into(), "1-22".into()))
        );
        let linkerd =
            json!({"metadata": {"annotations": {"linkerd.io/proxy-version": "stable-2.14"}}});
        assert_eq!(
            injection_label(&linkerd),
            Some(("linkerd.io/inject".into(), "enabled".into()))
        );
        assert_eq!(injection_label(&json!({})), None);
    }

    #[test]
    fn containers_are_the_init_and_regular_ones() {
        let spec = json!({"initContainers": [{"name": "istio-init"}], "containers": [{"name": "app"}, {"name": "istio-proxy"}]});
        let c: Vec<String> = containers(&spec).into_iter().collect();
        assert_eq!(c, ["app", "istio-init", "istio-proxy"]);
    }
}
