//! Obligations of raising a container's memory or CPU limit: the container named is the one
//! killed or throttled, by its own limit, nothing on its node explains it instead, and the new
//! value is a bounded step that fits the namespace's quota and the nodes.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::findings;
use super::scene::{Read, Scene, hhmm};
use crate::cluster::obj::{self, at};
use crate::cluster::observed::{
    self as observed, Event, MEMORY_KILL_LOOKBACK_HOURS, Node, Pod, PodSpec, SIGKILL_EXIT, Workload,
};
use crate::cluster::quantity;
use crate::cluster::{ErrorKind, ListQuery};
use crate::domain::LimitResource as Resource;
use crate::domain::Obligation;
use crate::domain::obligations::{self as ob, ObligationSpec};

/// The obligations both raises state, as this resource's proof declares them:
/// container in template, raise bounded, fits the quota, fits a node.
fn obligations(resource: Resource) -> [&'static ObligationSpec; 4] {
    match resource {
        Resource::Memory => [
            &ob::memory::CONTAINER_IN_TEMPLATE,
            &ob::memory::RAISES_BOUNDED,
            &ob::memory::FITS_QUOTA,
            &ob::memory::FITS_NODES,
        ],
        Resource::Cpu => [
            &ob::cpu::CONTAINER_IN_TEMPLATE,
            &ob::cpu::RAISES_BOUNDED,
            &ob::cpu::FITS_QUOTA,
            &ob::cpu::FITS_NODES,
        ],
    }
}

/// The metrics API's current use of `resource` by the container, the highest over the pods.
async fn usage(scene: &Scene, pods: &[Pod], container: &str, resource: &str) -> Read<Option<u128>> {
    let metrics = match scene
        .list("PodMetrics", scene.ns(), &ListQuery::default())
        .await
    {
        Ok(m) => m,
        Err(e) if e.is_unreachable() => return Err(e),
        Err(_) => return Ok(None),
    };
    let metrics: Vec<observed::PodMetrics> =
        metrics.iter().map(observed::PodMetrics::parse).collect();
    Ok(observed::peak_use(
        &metrics,
        pods.iter().map(|p| p.name.as_str()),
        container,
        resource,
    ))
}

fn show(resource: Resource, v: u128) -> String {
    quantity::format_amount(resource.name(), v)
}

/// The named container's limit now, as written and as an amount, and its use now (the metrics
/// API's, the highest over the pods).
struct Current {
    limit: Option<String>,
    limit_value: Option<u128>,
    used: Option<u128>,
}

/// A container killed for memory lately ([`MEMORY_KILL_LOOKBACK_HOURS`]): its pod, its name,
/// and when.
type Kill<'p> = (&'p Pod, String, Option<DateTime<Utc>>);

/// The warnings that may say a container was killed for memory ([`Pod::memory_kills`]): the
/// namespace's events, read only when a container of `pods` exited as a kill for memory does
/// without its status saying so.
async fn kill_reports(scene: &Scene, pods: &[Pod]) -> Read<Vec<Event>> {
    let unexplained = pods.iter().flat_map(|p| &p.containers).any(|c| {
        matches!(&c.terminated, Some((r, code, _)) if *code == SIGKILL_EXIT && r != "OOMKilled")
    });
    if unexplained {
        scene.events(None).await
    } else {
        Ok(Vec::new())
    }
}

/// The containers of `pods` killed for memory lately ([`Pod::recent_memory_kills`]).
fn recent_kills<'p>(scene: &Scene, pods: &'p [Pod], events: &[Event]) -> Vec<Kill<'p>> {
    pods.iter()
        .flat_map(|p| {
            p.recent_memory_kills(events, scene.now)
                .into_iter()
                .map(move |(c, t)| (p, c.name.clone(), t))
        })
        .collect()
}

/// The raise's obligations, in their declared order, judged on the workload, its pods and the
/// container's limit and use now, read once. A container not in the template ends the proof.
pub(super) async fn raise_limit(
    scene: &Scene,
    resource: Resource,
    container: Option<&str>,
    wanted: Option<&str>,
) -> Read<Vec<Obligation>> {
    let [in_template, bounded, quota, nodes] = obligations(resource);
    let w = scene.target_obj().await?;
    let template = observed::pod_template(&w).cloned().unwrap_or(Value::Null);
    let pods = scene.pods_of(&w).await?;
    let container = container.unwrap_or_default().to_owned();
    let named = container_in_template(in_template, &w, &container);
    if !named.holds() {
        return Ok(vec![named]);
    }
    let reaches = match resource {
        Resource::Memory => &ob::memory::REACHES_PODS,
        Resource::Cpu => &ob::cpu::REACHES_PODS,
    };
    let reaches = match findings::template_reaches_pods(&Workload::parse(&w)) {
        Ok(()) => reaches.holds(vec![format!(
            "{} rolls a changed template out to its pods",
            obj::name(&w)
        )]),
        Err(held) => reaches.fails(vec![held]),
    };
    let specs: Vec<PodSpec> = pods.iter().map(|p| PodSpec::of_pod(&p.raw)).collect();
    let spec = PodSpec::parse(at(&template, &["spec"]).unwrap_or(&Value::Null));
    let limit = findings::limit_now(&spec, &specs, &container, resource.name()).map(str::to_owned);
    let now = Current {
        limit_value: limit
            .as_deref()
            .and_then(|l| quantity::amount(resource.name(), l)),
        limit,
        used: usage(scene, &pods, &container, resource.name()).await?,
    };
    let wanted = wanted.and_then(|v| quantity::amount(resource.name(), v));
    let mut out = vec![named, reaches];
    match resource {
        Resource::Memory => {
            let kills = recent_kills(scene, &pods, &kill_reports(scene, &pods).await?);
            out.extend([
                container_was_killed(scene, &pods, &kills, &container, &now),
                killed_by_own_limit(scene, &pods, &kills, &container, &now).await?,
            ]);
        }
        Resource::Cpu => out.push(container_throttled(scene, &spec, &container, &now)),
    }
    out.push(raises_bounded(
        bounded,
        resource,
        &container,
        now.limit_value,
        wanted,
    ));
    if let (Some(old), Some(new)) = (now.limit_value, wanted) {
        out.extend([
            fits_quota(quota, scene, resource, &w, &pods, (old, new)).await?,
            fits_nodes(nodes, scene, &spec, resource, new).await?,
        ]);
    }
    let (obligation, action) = match resource {
        Resource::Memory => (&ob::memory::NO_CHANGE_EXPLAINS, "A higher memory limit"),
        Resource::Cpu => (&ob::cpu::NO_CHANGE_EXPLAINS, "A higher CPU limit"),
    };
    out.push(super::workload::no_change_explains(scene, obligation, action).await?);
    Ok(out)
}

/// Whether the container named is in the workload's pod template (its containers and init
/// containers: [`PodSpec::list_of`], where the write finds it).
fn container_in_template(
    obligation: &ObligationSpec,
    workload: &Value,
    container: &str,
) -> Obligation {
    let spec = PodSpec::of_template(workload);
    let names: Vec<&str> = spec
        .containers
        .iter()
        .chain(&spec.init_containers)
        .map(|c| c.name.as_str())
        .collect();
    obligation.check(
        spec.list_of(container).is_some(),
        vec![format!(
            "container {:?}; the template has {}",
            container,
            names.join(", ")
        )],
    )
}

/// Whether the container named is the one killed for memory lately, from its
/// pods' last states; for a prediction (no kill, a proactive signal), whether its use is near
/// its limit ([`findings::near_limit`]).
fn container_was_killed(
    scene: &Scene,
    pods: &[Pod],
    killed: &[Kill],
    container: &str,
    now: &Current,
) -> Obligation {
    let obligation = &ob::memory::CONTAINER_WAS_KILLED;
    let resource = Resource::Memory;
    if let Some((p, _, t)) = killed.iter().find(|(_, c, _)| c == container) {
        return obligation.holds(vec![format!(
            "container {container} of pod {} was OOMKilled{}",
            p.name,
            t.map(|t| format!(" at {}", hhmm(t))).unwrap_or_default()
        )]);
    }
    if !killed.is_empty() {
        let others: Vec<String> = killed
            .iter()
            .map(|(p, c, _)| format!("container {c} of pod {}", p.name))
            .take(3)
            .collect();
        return obligation.fails(vec![format!(
            "{} was OOMKilled, not {container}",
            others.join(", ")
        )]);
    }
    if !scene.proactive() {
        return obligation.fails(vec![format!(
            "no container of the workload's {} pod(s) was OOMKilled in the last {MEMORY_KILL_LOOKBACK_HOURS} hours",
            pods.len()
        )]);
    }
    let (used, limit) = (now.used, now.limit_value);
    let ok = matches!((used, limit), (Some(u), Some(l)) if findings::near_limit(u, l));
    obligation.check(
        ok,
        vec![match (used, limit) {
            (Some(u), Some(l)) => format!(
                "container {container} uses {} of its {} limit ({}%)",
                show(resource, u),
                show(resource, l),
                u * 100 / l.max(1)
            ),
            (None, _) => "no metrics API answer: its use cannot be compared with its limit".into(),
            (Some(_), None) => format!("container {container} has no memory limit"),
        }],
    )
}

/// Whether the container was killed by its own limit, from its limit and the nodes it was
/// killed on (their pressure, their events, the kernel's kills at the moment of its own): it
/// has one, and no node ran out of memory itself.
async fn killed_by_own_limit(
    scene: &Scene,
    pods: &[Pod],
    killed: &[Kill<'_>],
    container: &str,
    now: &Current,
) -> Read<Obligation> {
    let obligation = &ob::memory::KILLED_BY_OWN_LIMIT;
    let resource = Resource::Memory;
    let this: Vec<&Kill> = killed.iter().filter(|(_, c, _)| c == container).collect();
    let mut ev = Vec::new();
    let mut ok = now.limit.is_some();
    match &now.limit {
        Some(l) => ev.push(format!("container {container} has a memory limit of {l}")),
        None => ev.push(format!(
            "container {container} has no memory limit: the node's own OOM killer took it"
        )),
    }
    let nodes = findings::memory_nodes(
        this.iter().filter_map(|(p, _, _)| p.node.as_deref()),
        pods.iter().filter_map(|p| p.node.as_deref()),
    );
    let all_nodes = match scene.nodes().await {
        Ok(n) => n,
        Err(e) if e.is_unreachable() => return Err(e),
        Err(e) => {
            ev.push(format!("nodes cannot be read: {}", e.message));
            vec![]
        }
    };
    for name in &nodes {
        let node: Option<&Node> = all_nodes.iter().find(|n| n.name == *name);
        let events = match scene.node_events(name).await {
            Ok(e) => e,
            Err(e) if e.is_unreachable() => return Err(e),
            Err(_) => vec![],
        };
        // The pods on the node, for its SystemOOM reports at the moment of this workload's
        // kills (read only when there are some).
        let here = if events.iter().any(|e| e.reason == "SystemOOM") {
            match scene.pods_on(name).await {
                Ok(p) => p,
                Err(e) if e.is_unreachable() => return Err(e),
                Err(_) => vec![],
            }
        } else {
            vec![]
        };
        let moments: Vec<_> = this
            .iter()
            .filter(|(p, _, _)| p.node.as_deref() == Some(name.as_str()))
            .filter_map(|(_, _, t)| *t)
            .collect();
        let took = findings::node_took_memory(node, name, &events, &here, &moments, scene.now);
        if took.took() {
            ok = false;
            ev.extend(took.why);
        } else if let Some(n) = node {
            ev.push(format!(
                "node {name}: {}, no system OOM recorded",
                n.state()
            ));
        }
    }
    if let (Some(u), Some(l)) = (now.used, now.limit_value) {
        ev.push(format!(
            "it uses {} of its {} limit now",
            show(resource, u),
            show(resource, l)
        ));
    }
    Ok(obligation.check(ok, ev))
}

/// Whether the container named is the one throttled at its CPU limit, from the alert (a
/// throttling alert about it, [`findings::throttling_alert_about`]) or its use
/// ([`findings::THROTTLED_USE_PERCENT`] of its limit or more): it must have a limit.
fn container_throttled(
    scene: &Scene,
    template: &PodSpec,
    container: &str,
    now: &Current,
) -> Obligation {
    let obligation = &ob::cpu::CONTAINER_THROTTLED;
    let resource = Resource::Cpu;
    let signal_container = scene.signal_container();
    let names: Vec<&str> = template
        .containers
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    let alert_names_it =
        findings::throttling_alert_about(&scene.signal.name, signal_container.as_deref(), &names)
            == Some(container);
    let near =
        matches!((now.used, now.limit_value), (Some(u), Some(l)) if findings::throttled_use(u, l));
    let mut ev = Vec::new();
    if alert_names_it {
        ev.push(format!(
            "alert {} measures container {container} throttled",
            scene.signal.name
        ));
    } else if let Some(c) = scene.signal_container() {
        ev.push(format!(
            "alert {} is about container {c}",
            scene.signal.name
        ));
    }
    match (now.used, now.limit_value) {
        (Some(u), Some(l)) => ev.push(format!(
            "it uses {} of its {} limit",
            show(resource, u),
            show(resource, l)
        )),
        (_, None) => ev.push(format!(
            "container {container} has no CPU limit to be throttled at"
        )),
        (None, _) => ev.push("no metrics API answer".into()),
    }
    obligation.check(now.limit.is_some() && (alert_names_it || near), ev)
}

/// Whether the new limit is a bounded step up from the current one ([`findings::bounded_step`]).
fn raises_bounded(
    obligation: &ObligationSpec,
    resource: Resource,
    container: &str,
    limit: Option<u128>,
    wanted: Option<u128>,
) -> Obligation {
    match (limit, wanted) {
        (Some(old), Some(new)) => obligation.check(
            findings::bounded_step(old, new),
            vec![format!(
                "{} limit of container {container} {} → {}",
                resource.name(),
                show(resource, old),
                show(resource, new)
            )],
        ),
        (None, _) => obligation.fails(vec![format!(
            "container {container} has no {} limit to raise",
            resource.name()
        )]),
        (_, None) => obligation.fails(vec![format!(
            "{} is missing or not a quantity",
            resource.limit_key().name
        )]),
    }
}

/// Whether the namespace's quota of `limits.<resource>` has room for the raise from `old` to
/// `new` on every replica ([`findings::raise_need`]).
async fn fits_quota(
    obligation: &ObligationSpec,
    scene: &Scene,
    resource: Resource,
    w: &Value,
    pods: &[Pod],
    (old, new): (u128, u128),
) -> Read<Obligation> {
    let replicas = findings::raised_replicas(
        crate::cluster::observed::Workload::parse(w).replicas,
        pods.len(),
    );
    let key = format!("limits.{}", resource.name());
    let room = scene.quota(&key).await?;
    Ok(
        match findings::raise_need(resource, room, replicas, (old, new)) {
            Some(n) => obligation.check(
                n.fits(),
                vec![format!(
                    "ResourceQuota {}: {key} {} used of {}, {} more needed",
                    n.room.name,
                    show(resource, n.room.used),
                    show(resource, n.room.hard),
                    show(resource, n.need)
                )],
            ),
            None => obligation.holds(vec![format!("no ResourceQuota limits {key}")]),
        },
    )
}

/// Whether a node can hold the new limit, from the allocatable capacity of the nodes that take
/// the template's pods ([`findings::largest_node`]; none known, or the nodes not readable for
/// lack of permission: nothing shows it cannot).
async fn fits_nodes(
    obligation: &ObligationSpec,
    scene: &Scene,
    spec: &PodSpec,
    resource: Resource,
    new: u128,
) -> Read<Obligation> {
    let nodes = match scene.nodes().await {
        Ok(n) => n,
        Err(e) if e.is_unreachable() => return Err(e),
        Err(e) if e.kind == ErrorKind::Forbidden => vec![],
        Err(e) => return Err(e),
    };
    let biggest = findings::largest_node(&nodes, spec, resource);
    Ok(obligation.check(
        biggest.is_none_or(|b| new <= b),
        vec![match biggest {
            Some(b) => format!(
                "the largest node its pods may go on allocates {}",
                show(resource, b)
            ),
            None => "no node's allocatable capacity is known".into(),
        }],
    ))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use chrono::{DateTime, Utc};
    use serde_json::{Value, json};

    use super::*;
    use crate::cluster::SnapshotCluster;
    use crate::domain::Target;

    /// Deployment api (memory limit 256Mi) whose two pods' container exited 137 as a plain
    /// `Error`, with `events` in its namespace: the memory raise's `container-was-killed`.
    async fn container_was_killed_with(events: Vec<Value>) -> Obligation {
        raise_on(events, false)
            .await
            .into_iter()
            .find(|o| o.id == ob::memory::CONTAINER_WAS_KILLED.id)
            .unwrap_or_else(|| panic!("no container-was-killed"))
    }

    /// The memory raise's obligations on that Deployment, its rollout `paused` or not.
    async fn raise_on(events: Vec<Value>, paused: bool) -> Vec<Obligation> {
        let now: DateTime<Utc> = "2026-11-21T12:00:00Z".parse().unwrap_or_default();
        let template = json!({"metadata": {"labels": {"app": "api"}},
            "spec": {"containers": [{"name": "api", "image": "shop/api:2.3.0",
                "resources": {"limits": {"memory": "256Mi"}}}]}});
        let mut objects = vec![json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "api", "namespace": "shop", "uid": "api"},
            "spec": {"replicas": 2, "paused": paused, "selector": {"matchLabels": {"app": "api"}},
                "template": template}})];
        for i in 0..2 {
            objects.push(json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("api-5d8f-{i}"), "namespace": "shop",
                    "labels": {"app": "api", "pod-template-hash": "5d8f"}},
                "spec": {"nodeName": "worker-1", "containers": template["spec"]["containers"]},
                "status": {"phase": "Running",
                    "conditions": [{"type": "Ready", "status": "False"}],
                    "containerStatuses": [{"name": "api", "ready": false, "restartCount": 4,
                        "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                        "lastState": {"terminated": {"reason": "Error", "exitCode": 137,
                            "finishedAt": "2026-11-21T11:58:00Z"}}}]}}));
        }
        objects.extend(events);
        let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
        let snap = SnapshotCluster::from_yaml(&list.to_string()).unwrap_or_else(|e| panic!("{e}"));
        let signal = crate::prove::scene::test_signal("KubePodCrashLooping", now);
        let target = Target::new("Deployment", "api", Some("shop".into()));
        let scene = Scene::new(Arc::new(snap), target, now, signal);
        raise_limit(&scene, Resource::Memory, Some("api"), Some("384Mi"))
            .await
            .unwrap_or_else(|e| panic!("{e:?}"))
    }

    /// Issue 43: a raise on a paused Deployment was proven and written, and no pod picked it
    /// up until someone resumed the rollout.
    #[tokio::test]
    async fn a_raise_reaches_the_pods_only_where_the_rollout_is_not_held() {
        let reaches = |obligations: Vec<Obligation>| {
            obligations
                .into_iter()
                .find(|o| o.id == ob::memory::REACHES_PODS.id)
                .unwrap_or_else(|| panic!("no reaches-pods"))
        };
        let o = reaches(raise_on(vec![], false).await);
        assert!(o.holds(), "{o:?}");
        let o = reaches(raise_on(vec![], true).await);
        assert!(!o.holds(), "{o:?}");
        assert!(o.evidence.iter().any(|e| e.contains("paused")), "{o:?}");
    }

    /// The runtime reports the kill as `Error` 137; the kernel's `OOMKilling` warning about the
    /// pod says it was memory — as the OOM rule reads it (`Pod::memory_kills`), so the raise it
    /// proposes is not refused for want of an `OOMKilled` reason. A bare SIGKILL is no such kill.
    #[tokio::test]
    async fn a_sigkill_the_kernel_reported_as_oom_is_a_kill_for_memory() {
        let said = json!({"apiVersion": "v1", "kind": "Event", "type": "Warning",
            "metadata": {"name": "api-5d8f-0.oom", "namespace": "shop"},
            "involvedObject": {"kind": "Pod", "name": "api-5d8f-0", "namespace": "shop"},
            "reason": "OOMKilling", "lastTimestamp": "2026-11-21T11:58:00Z",
            "message": "Memory cgroup out of memory: Killed process 4242 (api)"});
        let o = container_was_killed_with(vec![said]).await;
        assert!(o.holds(), "{o:?}");
        let o = container_was_killed_with(vec![]).await;
        assert!(!o.holds(), "{o:?}");
    }
}
