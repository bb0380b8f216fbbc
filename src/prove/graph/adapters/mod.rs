//! One adapter per kind of dependency besides named hosts: the pods' nodes (and neighbours on
//! a node under pressure), their volumes, the ConfigMaps and Secrets they refer to, the
//! NetworkPolicies selecting them, admission webhooks, quota and limits, the autoscaler, the
//! Services a StatefulSet or an Ingress names, the RBAC behind a refused API call, what an
//! admission webhook injected into some pods and not others, and the workload's own rollout
//! state. Each reads
//! only when the target or its failures point its way.

use std::collections::BTreeSet;

use chrono::Duration;
use serde_json::Value;

use super::{Ctx, DepKind, Dependency, Read, event_time, last_change, time};
use crate::cluster::ListQuery;
use crate::cluster::obj::{self, array, at, str_at};
use crate::cluster::observed::{self, Event, Pod};
use crate::domain::Target;
use crate::prove::findings;

mod access;
mod injection;
mod nodes;
mod orphaned;
mod reach;

pub(in crate::prove::graph) use access::access;
pub(in crate::prove::graph) use injection::injection;
pub(in crate::prove::graph) use nodes::nodes;
use orphaned::orphaned_by_rollout;
use reach::holds_host;
pub(in crate::prove::graph) use reach::ingress_behind;

/// The pod template (a workload's) or the pod spec (a bare Pod's) of the target.
fn template(ctx: &Ctx) -> Value {
    let Some(o) = &ctx.object else {
        return Value::Null;
    };
    match obj::kind(o) {
        "Pod" => serde_json::json!({"spec": at(o, &["spec"]).cloned().unwrap_or(Value::Null)}),
        _ => observed::pod_template(o).cloned().unwrap_or(Value::Null),
    }
}

/// The pods' claims, volumes and storage classes, and attachments held elsewhere.
pub(super) async fn storage(ctx: &Ctx) -> Read<Vec<Dependency>> {
    let ns = ctx.ns.as_deref().unwrap_or_default();
    let mut claims: Vec<String> = ctx
        .pods
        .iter()
        .flat_map(|p| observed::PodSpec::of_pod(&p.raw).claims_of(Some(&p.name)))
        .collect();
    claims.extend(observed::PodSpec::of_template(&template(ctx)).claims_of(None));
    claims.sort();
    claims.dedup();
    let mut out = Vec::new();
    for claim in claims.iter().take(3) {
        let relation = "a volume of the pods".to_owned();
        let Some(pvc) = ctx.get("PersistentVolumeClaim", Some(ns), claim).await? else {
            out.push(
                Dependency::of(
                    DepKind::Storage,
                    Target::new("PersistentVolumeClaim", claim.as_str(), Some(ns.to_owned())),
                    relation,
                )
                .unhealthy("does not exist", None),
            );
            continue;
        };
        let mut d = Dependency::of(
            DepKind::Storage,
            Target::new("PersistentVolumeClaim", claim.as_str(), Some(ns.to_owned())),
            relation,
        )
        .changed(last_change(&pvc).filter(|c| !c.is_creation()));
        let state = observed::Claim::parse(&pvc);
        let phase = state.phase.as_deref().unwrap_or("Unknown");
        let class = state.class.clone();
        let warnings: Vec<String> = ctx
            .events_of("PersistentVolumeClaim", claim)
            .filter(|e| str_at(e, &["type"]) == Some("Warning"))
            .map(|e| {
                format!(
                    "{}: {}",
                    str_at(e, &["reason"]).unwrap_or(""),
                    str_at(e, &["message"])
                        .unwrap_or("")
                        .chars()
                        .take(200)
                        .collect::<String>()
                )
            })
            .collect();
        if !state.bound() {
            let mut why = format!("leaves PersistentVolumeClaim {ns}/{claim} {phase}");
            if let Some(c) = &class {
                match ctx.get("StorageClass", None, c).await? {
                    None => {
                        why = format!(
                            "does not exist, so PersistentVolumeClaim {ns}/{claim} stays {phase}"
                        );
                        d.rename(Target::new("StorageClass", c.as_str(), None));
                        d.relation = format!(
                            "provisions PersistentVolumeClaim {ns}/{claim}, a volume of the pods"
                        );
                    }
                    Some(sc) => {
                        d = d.evidence(format!(
                            "StorageClass {c} (provisioner {})",
                            str_at(&sc, &["provisioner"]).unwrap_or("?")
                        ));
                        if let Some(w) = warnings.first() {
                            why.push_str(&format!(": {w}"));
                            d.rename(Target::new("StorageClass", c.as_str(), None));
                            d.relation = format!(
                                "provisions PersistentVolumeClaim {ns}/{claim}, a volume of the pods"
                            );
                        }
                    }
                }
            }
            if d.is_a("PersistentVolumeClaim") {
                why = why.replacen(
                    &format!("leaves PersistentVolumeClaim {ns}/{claim} "),
                    "is ",
                    1,
                );
            }
            d = d.unhealthy(why, time(&pvc, &["metadata", "creationTimestamp"]));
            out.push(d);
            continue;
        }
        // Bound: where its volume lives, and whether a node there can take the pod.
        if let Some(pv_name) = str_at(&pvc, &["spec", "volumeName"])
            && let Some(pv) = ctx.get("PersistentVolume", None, pv_name).await?
        {
            let zones: Vec<String> = array(
                &pv,
                &["spec", "nodeAffinity", "required", "nodeSelectorTerms"],
            )
            .iter()
            .flat_map(|t| array(t, &["matchExpressions"]).iter())
            .filter(|e| str_at(e, &["key"]).is_some_and(|k| k.contains("zone")))
            .flat_map(|e| array(e, &["values"]).iter())
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect();
            if !zones.is_empty() {
                let nodes = ctx.list_or_empty("Node", None).await?;
                // A node there that takes the pods ([`findings::takes`]: ready, schedulable,
                // their tolerations, selector and affinity, their requests).
                let spec = ctx
                    .pods
                    .first()
                    .map(|p| observed::PodSpec::of_pod(&p.raw))
                    .unwrap_or_default();
                let takes_in_zone = nodes.iter().any(|n| {
                    let zone = crate::cluster::obj::label(n, "topology.kubernetes.io/zone")
                        .or_else(|| {
                            crate::cluster::obj::label(n, "failure-domain.beta.kubernetes.io/zone")
                        });
                    zone.is_some_and(|z| zones.iter().any(|x| x == z))
                        && findings::takes(&spec, &observed::Node::parse(n))
                });
                if !takes_in_zone {
                    d.rename(Target::new("PersistentVolume", pv_name, None));
                    d = d.unhealthy(
                        format!(
                            "lives in zone {} where no ready, schedulable node is left",
                            zones.join(", ")
                        ),
                        None,
                    );
                }
            }
        }
        // Held by a pod on another node (ReadWriteOnce): the attach of ours waits.
        let attach_blocked = ctx.says(&[
            "multi-attach",
            "already exclusively attached",
            "already used by pod",
        ]);
        if attach_blocked {
            let others = ctx.list_or_empty("Pod", Some(ns)).await?;
            let own: BTreeSet<&str> = ctx.failing.iter().map(String::as_str).collect();
            // The holders the attach controller names in its Multi-Attach warnings about the
            // failing pods ([`findings::attach_conflict`]); without such a warning, a pod
            // elsewhere that mounts the claim.
            let named: BTreeSet<String> = ctx
                .all_events
                .iter()
                .map(observed::Event::parse)
                .filter(|e| e.warning && e.kind == "Pod" && own.contains(e.name.as_str()))
                .filter_map(|e| findings::attach_conflict(&e))
                .flat_map(|(_, holders)| holders)
                .collect();
            let mounting = |p: &&Value| {
                !own.contains(obj::name(p))
                    && observed::PodSpec::of_pod(p)
                        .claims_of(Some(obj::name(p)))
                        .contains(claim)
                    && str_at(p, &["spec", "nodeName"]).is_some()
            };
            let holder = others
                .iter()
                .filter(mounting)
                .find(|p| named.contains(obj::name(p)))
                .or_else(|| others.iter().find(mounting));
            if let Some(holder) = holder {
                d = d.unhealthy(
                    format!(
                        "is {} and attached to node {} for pod {}: the new pod cannot attach it (Multi-Attach)",
                        array(&pvc, &["spec", "accessModes"])
                            .iter()
                            .filter_map(Value::as_str)
                            .collect::<Vec<_>>()
                            .join(","),
                        str_at(holder, &["spec", "nodeName"]).unwrap_or("?"),
                        obj::name(holder)
                    ),
                    None,
                );
            }
        }
        if let Some(w) = warnings.first()
            && d.unhealthy.is_none()
        {
            d = d.unhealthy(w.clone(), None);
        }
        out.push(d);
    }
    Ok(out)
}

/// The ConfigMaps and Secrets the pods refer to: missing ones (Secrets only from the
/// kubelet's words — their data is never read), missing keys, recent rewrites.
pub(super) async fn config(ctx: &Ctx, found: &[Dependency]) -> Read<Vec<Dependency>> {
    let t = template(ctx);
    if t.is_null() {
        return Ok(vec![]);
    }
    let ns = ctx.ns.as_deref().unwrap_or_default();
    let mut out = Vec::new();
    let wanted_keys = |cm: &str| -> Vec<String> {
        ["containers", "initContainers"]
            .iter()
            .flat_map(|k| array(&t, &["spec", k]).iter())
            .flat_map(|c| array(c, &["env"]).iter())
            .filter(|e| str_at(e, &["valueFrom", "configMapKeyRef", "name"]) == Some(cm))
            .filter(|e| {
                at(e, &["valueFrom", "configMapKeyRef", "optional"]).and_then(Value::as_bool)
                    != Some(true)
            })
            .filter_map(|e| str_at(e, &["valueFrom", "configMapKeyRef", "key"]).map(str::to_owned))
            .collect()
    };
    for name in crate::prove::configmaps(&t).into_iter().take(5) {
        let relation = "configuration the pods read".to_owned();
        match ctx.get("ConfigMap", Some(ns), &name).await? {
            None => {
                let line = ctx
                    .line_with(&format!("\"{name}\""))
                    .or_else(|| ctx.line_with(&name));
                let mut d = Dependency::of(
                    DepKind::Config,
                    Target::new("ConfigMap", name.as_str(), Some(ns.to_owned())),
                    relation,
                )
                .unhealthy("does not exist", None);
                if let Some(l) = line {
                    d = d.evidence(l);
                }
                out.push(d);
            }
            Some(cm) => {
                let keys: BTreeSet<&str> = ["data", "binaryData"]
                    .iter()
                    .filter_map(|k| at(&cm, &[k]).and_then(Value::as_object))
                    .flat_map(|m| m.keys().map(String::as_str))
                    .collect();
                let missing: Vec<String> = wanted_keys(&name)
                    .into_iter()
                    .filter(|k| !keys.contains(k.as_str()))
                    .collect();
                let change = last_change(&cm).filter(|c| !c.is_creation());
                // Read only when a pod starts, and no pod or container started since the change
                // (a restarted container reads its environment again): none has read it, so it
                // explains nothing they do.
                let unread = change.as_ref().filter(|c| {
                    !crate::prove::findings::configmap_read_live(&t, &name)
                        && !ctx.pods.is_empty()
                        && ctx.pods.iter().all(|p| !p.started_since(c.at))
                });
                let mut d = Dependency::of(
                    DepKind::Config,
                    Target::new("ConfigMap", name.as_str(), Some(ns.to_owned())),
                    relation,
                );
                match unread {
                    Some(c) => {
                        d = d.evidence(format!(
                            "{} at {}, after every pod started: they read it only at their start, so none has read it",
                            c.what,
                            c.at.format("%H:%M")
                        ));
                    }
                    None => d = d.changed(change),
                }
                // Changed just before the failures, and it holds the host they cannot reach:
                // the value came from here.
                if d.changed
                    .as_ref()
                    .is_some_and(|c| crate::domain::just_before(ctx.onset, c))
                    && let Some((host, key)) = found
                        .iter()
                        .filter(|h| h.kind == DepKind::Host)
                        .find_map(|h| Some((h, holds_host(&cm, h)?)))
                {
                    d = d
                        .evidence(format!("its key {key} names {}", host.object))
                        .culprit_of(host);
                }
                if !missing.is_empty() {
                    d = d.unhealthy(format!("lacks the key(s) {}", missing.join(", ")), None);
                }
                out.push(d);
            }
        }
    }
    for name in crate::prove::secrets(&t).into_iter().take(5) {
        let quoted = format!("secret \"{name}\" not found");
        if ctx.says(&[quoted.as_str()]) {
            out.push(
                Dependency::of(
                    DepKind::Config,
                    Target::new("Secret", name.as_str(), Some(ns.to_owned())),
                    "credentials the pods read",
                )
                .unhealthy(
                    "is not found (the kubelet says so; kubemedic never reads Secrets)",
                    None,
                )
                .evidence(ctx.line_with(&quoted).unwrap_or_default()),
            );
        }
    }
    Ok(out)
}

/// The NetworkPolicies selecting the pods, when the failures are connections that time out or
/// are refused.
pub(super) async fn network(ctx: &Ctx) -> Read<Vec<Dependency>> {
    let connecting = ctx.connecting_fails();
    let Some(ns) = ctx.ns.as_deref() else {
        return Ok(vec![]);
    };
    if !connecting || ctx.pods.is_empty() {
        return Ok(vec![]);
    }
    let labels = Some(&ctx.pods[0].labels).filter(|l| !l.is_null());
    let mut out = Vec::new();
    for raw in ctx.list_or_empty("NetworkPolicy", Some(ns)).await? {
        let np = observed::NetworkPolicy::parse(&raw);
        if !np.selects(labels) {
            continue;
        }
        let mut d = Dependency::of(
            DepKind::Network,
            Target::new("NetworkPolicy", np.name.as_str(), Some(ns.to_owned())),
            format!("selects the pods ({})", np.types.join(", ")),
        )
        .changed(last_change(&raw));
        if np.restricts_egress() && ctx.timing_out() {
            let allowed = np.egress.len();
            d = d.unhealthy(
                format!(
                    "restricts the pods' outgoing connections ({allowed} egress rule(s)) while their connections time out"
                ),
                None,
            );
        }
        out.push(d);
    }
    Ok(out)
}

/// Admission webhooks, when the pods' creation failed calling one.
pub(super) async fn admission(ctx: &Ctx) -> Read<Vec<Dependency>> {
    if !ctx.says(&["failed calling webhook"]) {
        return Ok(vec![]);
    }
    let mut out = Vec::new();
    for kind in [
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
    ] {
        for cfg in ctx.list_or_empty(kind, None).await? {
            for w in array(&cfg, &["webhooks"]) {
                let name = str_at(w, &["name"]).unwrap_or("");
                if name.is_empty() || !ctx.says(&[name]) {
                    continue;
                }
                let mut d = Dependency::new(
                    DepKind::Admission,
                    format!("{kind} {} (webhook {name})", obj::name(&cfg)),
                    "admits the pods".to_owned(),
                )
                .about(Target::new(kind, obj::name(&cfg), None))
                .changed(last_change(&cfg));
                if let (Some(sns), Some(sname)) = (
                    str_at(w, &["clientConfig", "service", "namespace"]),
                    str_at(w, &["clientConfig", "service", "name"]),
                ) {
                    let ready = observed::Endpoints::parse(
                        ctx.get("Endpoints", Some(sns), sname).await?.as_ref(),
                    )
                    .ready;
                    d = d.evidence(format!(
                        "its backend is Service {sns}/{sname} ({ready} ready endpoint(s))"
                    ));
                    if ready == 0 {
                        // Its failure policy turns its backend's outage into refused pods: it
                        // outranks the bare Service the API server's error names by URL (which
                        // the hosts adapter follows), however old the webhook is.
                        d = d
                            .unhealthy(
                                format!("its backend Service {sns}/{sname} has no ready endpoints"),
                                None,
                            )
                            .culprit_of_object(&Target::new(
                                "Service",
                                sname,
                                Some(sns.to_string()),
                            ));
                    }
                }
                if d.unhealthy.is_none() {
                    d = d.unhealthy(
                        ctx.line_with("failed calling webhook")
                            .unwrap_or_else(|| "refuses the pods".into()),
                        None,
                    );
                }
                out.push(d);
            }
        }
    }
    Ok(out)
}

/// ResourceQuota and LimitRange, when the pods' creation was refused by them.
pub(super) async fn quota(ctx: &Ctx) -> Read<Vec<Dependency>> {
    let Some(ns) = ctx.ns.as_deref() else {
        return Ok(vec![]);
    };
    let mut out = Vec::new();
    if ctx.says(&["exceeded quota"]) {
        for q in ctx.list_or_empty("ResourceQuota", Some(ns)).await? {
            let name = obj::name(&q);
            if !ctx.says(&[name]) {
                continue;
            }
            let one = std::slice::from_ref(&q);
            let full: Vec<String> = observed::quota_limited(one)
                .into_iter()
                .filter_map(|k| {
                    let room = observed::tightest_quota(one, &k)?;
                    room.used_up()
                        .then(|| format!("{k} {} of {}", room.used_text, room.hard_text))
                })
                .collect();
            let mut d = Dependency::of(
                DepKind::Quota,
                Target::new("ResourceQuota", name, Some(ns.to_owned())),
                "caps what the namespace may run",
            )
            .unhealthy(
                if full.is_empty() {
                    "refuses the pods (exceeded quota)".to_owned()
                } else {
                    format!("is used up: {}", full.join(", "))
                },
                None,
            )
            .changed(last_change(&q));
            // The refusal itself, from the target's own warnings: the pods it would not let be
            // created (none of them shows up as a failing pod).
            if let Some(line) = ctx.line_with(&format!("exceeded quota: {name}")) {
                d = d.evidence(line);
            }
            out.push(d);
        }
    }
    if ctx.says(&[
        "limitrange",
        "maximum memory",
        "maximum cpu",
        "minimum memory",
        "minimum cpu",
    ]) {
        for l in ctx.list_or_empty("LimitRange", Some(ns)).await? {
            out.push(
                Dependency::of(
                    DepKind::Quota,
                    Target::new("LimitRange", obj::name(&l), Some(ns.to_owned())),
                    "bounds the pods' resources",
                )
                .unhealthy(
                    ctx.line_with("forbidden")
                        .unwrap_or_else(|| "refuses the pods' resources".into()),
                    None,
                )
                .changed(last_change(&l)),
            );
        }
    }
    Ok(out)
}

/// The autoscaler of the target, when it cannot do its job.
pub(super) async fn scaling(ctx: &Ctx) -> Read<Vec<Dependency>> {
    let Some(ns) = ctx.ns.as_deref() else {
        return Ok(vec![]);
    };
    if !matches!(
        ctx.target.kind.as_str(),
        "Deployment" | "StatefulSet" | "ReplicaSet"
    ) {
        return Ok(vec![]);
    }
    let mut out = Vec::new();
    for h in ctx
        .list_or_empty("HorizontalPodAutoscaler", Some(ns))
        .await?
    {
        let hpa = observed::Hpa::parse(&h);
        if !hpa.scales(&ctx.target.kind, &ctx.target.name) {
            continue;
        }
        let mut d = Dependency::of(
            DepKind::Scaling,
            Target::new("HorizontalPodAutoscaler", &hpa.name, Some(ns.to_owned())),
            "scales the workload",
        );
        if let Some(c) = hpa.conditions.iter().find(|c| {
            matches!(c.kind.as_str(), "AbleToScale" | "ScalingActive") && c.status == "False"
        }) {
            // "missing request for cpu": which container of the template has none.
            if let Some(resource) = c
                .message
                .split("missing request for ")
                .nth(1)
                .and_then(|r| r.split_whitespace().next())
            {
                let t = template(ctx);
                for container in array(&t, &["spec", "containers"]) {
                    if str_at(container, &["resources", "requests", resource]).is_none() {
                        d = d.evidence(format!(
                            "container {} of the pod template has no {resource} request, so the autoscaler cannot compute the pods' utilisation",
                            str_at(container, &["name"]).unwrap_or("?")
                        ));
                    }
                }
            }
            d = d.unhealthy(
                format!("{} False ({}): {}", c.kind, c.reason, c.message),
                c.since,
            );
        }
        out.push(d);
    }
    Ok(out)
}

/// The Services the target names or needs: a StatefulSet's governing Service, an Ingress's
/// backends.
pub(super) async fn services(ctx: &Ctx) -> Read<Vec<Dependency>> {
    let (Some(o), Some(ns)) = (&ctx.object, ctx.ns.as_deref()) else {
        return Ok(vec![]);
    };
    let mut wanted: Vec<(String, String)> = Vec::new();
    match obj::kind(o) {
        "StatefulSet" => {
            if let Some(s) = str_at(o, &["spec", "serviceName"]).filter(|s| !s.is_empty()) {
                wanted.push((
                    s.to_owned(),
                    "governs the StatefulSet's pod names (serviceName)".into(),
                ));
            }
        }
        "Ingress" => {
            let mut names = BTreeSet::new();
            if let Some(s) = str_at(o, &["spec", "defaultBackend", "service", "name"]) {
                names.insert(s.to_owned());
            }
            for rule in array(o, &["spec", "rules"]) {
                for p in array(rule, &["http", "paths"]) {
                    if let Some(s) = str_at(p, &["backend", "service", "name"])
                        .or_else(|| str_at(p, &["backend", "serviceName"]))
                    {
                        names.insert(s.to_owned());
                    }
                }
            }
            for n in names {
                wanted.push((n, "a backend the Ingress routes to".into()));
            }
        }
        _ => {}
    }
    let mut out = Vec::new();
    for (name, relation) in wanted.into_iter().take(5) {
        let d = match ctx.get("Service", Some(ns), &name).await? {
            None => Dependency::of(
                DepKind::Service,
                Target::new("Service", name.as_str(), Some(ns.to_owned())),
                relation,
            )
            .unhealthy("does not exist", None),
            Some(s) => {
                let ready = observed::Endpoints::parse(
                    ctx.get("Endpoints", Some(ns), &name).await?.as_ref(),
                )
                .ready;
                let mut d = Dependency::of(
                    DepKind::Service,
                    Target::new("Service", name.as_str(), Some(ns.to_owned())),
                    relation,
                )
                .changed(last_change(&s).filter(|c| !c.is_creation()));
                let mut orphaned = None;
                if ready == 0 && obj::kind(o) == "Ingress" {
                    d = d.unhealthy("has no ready endpoints", None);
                    orphaned = orphaned_by_rollout(ctx, ns, &name, &s).await?;
                }
                if let Some(w) = orphaned {
                    out.push(d);
                    w
                } else {
                    d
                }
            }
        };
        out.push(d);
    }
    Ok(out)
}

/// The workload's own rollout: paused with a template it never rolled out. Paused with every
/// pod updated, nothing is held back ([`observed::Workload::rollout_in_progress`], as the rules
/// and the proofs read it): a pause someone left after a finished rollout is nobody's culprit.
pub(super) async fn rollout(ctx: &Ctx) -> Read<Vec<Dependency>> {
    let Some(o) = &ctx.object else {
        return Ok(vec![]);
    };
    let w = observed::Workload::parse(o);
    if w.hold() != Some(observed::Hold::Paused) || w.rollout_in_progress().is_none() {
        return Ok(vec![]);
    }
    let generation = w.generation.unwrap_or(0);
    let observed = w.observed_generation.unwrap_or(generation);
    let updated = w.updated_replicas.unwrap_or(0);
    let want = w.wanted();
    let paused_at = array(o, &["status", "conditions"])
        .iter()
        .find(|c| str_at(c, &["reason"]) == Some("DeploymentPaused"))
        .and_then(|c| time(c, &["lastTransitionTime"]));
    Ok(vec![
        Dependency::new(
            DepKind::Rollout,
            format!("Deployment {}/{} rollout", obj::namespace(o).unwrap_or_default(), obj::name(o)),
            "rolls out the pod template",
        )
        .about(Target::new(
            "Deployment",
            obj::name(o),
            obj::namespace(o).map(str::to_owned),
        ))
        .unhealthy(
            format!(
                "is paused: {updated} of {want} pods run the current template (generation {generation}, observed {observed}) — its pods keep the old revision until someone resumes it"
            ),
            paused_at,
        )
        .changed(last_change(o)),
    ])
}

/// The pods' own liveness or startup probe, when it is what kills their containers
/// ([`Event::probe_kill`]).
pub(super) async fn probes(ctx: &Ctx) -> Read<Vec<Dependency>> {
    let killed = ctx.all_events.iter().find_map(|e| {
        let view = Event::parse(e);
        let kind = view.probe_kill()?;
        (view.kind == "Pod" && ctx.pods.iter().any(|p| p.name == view.name)).then_some((e, kind))
    });
    let Some((killed, kind)) = killed else {
        return Ok(vec![]);
    };
    let t = template(ctx);
    let mut out = Vec::new();
    for c in array(&t, &["spec", "containers"]) {
        let Some(probe) = at(c, &[kind]) else {
            continue;
        };
        let name = str_at(c, &["name"]).unwrap_or("?");
        let killing = observed::Probe::parse(probe);
        let observed::Probe {
            initial_delay: delay,
            period,
            failure_threshold: failures,
            timeout,
        } = killing;
        // A startup probe holds the liveness probe off until it passes: then its budget is
        // what the container has to start.
        let grace = observed::Probe::of(c, "startupProbe")
            .unwrap_or(killing)
            .budget();
        let mut d = Dependency::new(
            DepKind::Probe,
            format!(
                "{} probe of container {name}",
                kind.trim_end_matches("Probe")
            ),
            "restarts the container when it fails",
        )
        .unhealthy(
            format!(
                "kills the container ({}); it allows {grace}s to start: initialDelaySeconds {delay}, periodSeconds {period}, failureThreshold {failures}, timeoutSeconds {timeout}{}",
                str_at(killed, &["message"]).unwrap_or(""),
                if at(c, &["startupProbe"]).is_some() {
                    ", with a startupProbe"
                } else {
                    ", no startupProbe"
                }
            ),
            super::event_first(killed),
        );
        if let Some(line) =
            ctx.line_with(&format!("{} probe failed", kind.trim_end_matches("Probe")))
        {
            d = d.evidence(line);
        }
        out.push(d);
    }
    Ok(out)
}
