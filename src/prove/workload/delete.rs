//! Delete one pod so its controller replaces it.

use super::*;
use crate::cluster::observed::Node;
use crate::cluster::observed::Unready;
use crate::prove::findings::StateKept;
use crate::prove::findings::{self, Replacement};

/// The deletion's obligations, in their declared order, judged on the pod named, its siblings,
/// the workload and the namespace's events, read once. A claim that names no pod, or a pod that
/// is not the target's, is refused on that alone.
pub(in crate::prove) async fn delete_pod(
    scene: &Scene,
    pod_name: Option<&str>,
) -> Read<Vec<Obligation>> {
    // Nothing is read for a claim that names no pod.
    let (w, pods, events) = match pod_name {
        Some(_) => {
            let w = scene.target_obj().await?;
            let pods = scene.pods_of(&w).await?;
            let events = scene.events(None).await?;
            (w, pods, events)
        }
        None => (Value::Null, vec![], vec![]),
    };
    let pod = match pod_of_target(pod_name, &w, &pods) {
        Ok(found) => found,
        Err(refused) => return Ok(vec![refused]),
    };
    // The only replica: no sibling shows the template runs.
    let replicas = Workload::parse(&w).replicas;
    let only = Replacement::of(pod, &pods, replicas, None).only;
    let kept = state_kept(scene, pod, only, &events).await;
    let replacement = Replacement::of(pod, &pods, replicas, kept.as_ref());
    let mut out = vec![match replacement.controlled() {
        Ok(line) => ob::delete::POD_OWNED_BY_TARGET.holds(vec![line]),
        Err(line) => ob::delete::POD_OWNED_BY_TARGET.fails(vec![line]),
    }];
    out.extend(pod_still_running(&replacement));
    out.extend([
        siblings_ready(&replacement),
        no_rollout_in_progress(&w, &ob::delete::NO_ROLLOUT_IN_PROGRESS),
        failed_past_startup(scene, pod),
        failure_not_shared(&replacement, &events),
        failure_not_the_nodes(scene, &replacement).await?,
        failure_not_in_the_template(&replacement),
        config_unchanged_since_siblings(scene, &replacement).await?,
        node_not_at_fault(scene, &replacement).await?,
    ]);
    Ok(out)
}

/// The pod named (POD_NAME) among the target's pods, which the obligations judge (whether a
/// controller replaces it is [`Replacement::controlled`]); or `delete.pod-owned-by-target`
/// failing, which ends the proof, when no pod is named or it is not among them.
fn pod_of_target<'p>(
    named: Option<&str>,
    w: &Value,
    pods: &'p [Pod],
) -> Result<&'p Pod, Obligation> {
    let obligation = &ob::delete::POD_OWNED_BY_TARGET;
    let Some(named) = named else {
        return Err(obligation.fails(vec!["POD_NAME is missing".into()]));
    };
    pods.iter().find(|p| p.name == named).ok_or_else(|| {
        obligation.fails(vec![format!(
            "pod {named} is not among the {} pods of {} {}",
            pods.len(),
            obj::kind(w),
            obj::name(w)
        )])
    })
}

/// Whether the pod is still one of its controller's replicas ([`Replacement::still_running`],
/// which the rules ask too); stated only when it is not.
fn pod_still_running(replacement: &Replacement) -> Option<Obligation> {
    replacement
        .still_running()
        .err()
        .map(|why| ob::delete::POD_STILL_RUNNING.fails(vec![why]))
}

/// What shows that the only replica, not ready, fails on state it keeps, which a new pod starts
/// without ([`findings::state_kept`], with the previous log of its restarting container): no
/// sibling shows the template runs, so the pod's own history must.
async fn state_kept(scene: &Scene, pod: &Pod, only: bool, events: &[Event]) -> Option<StateKept> {
    if !only || pod.ready {
        return None;
    }
    let log = match findings::restarting_container(pod) {
        Some(c) => scene.previous_log(&pod.name, &c.name).await,
        None => None,
    };
    findings::state_kept(pod, events, log.as_deref())
}

/// Whether some sibling is ready, from their readiness; or, for the only replica failing on
/// state it keeps, that deleting it takes nothing away that runs ([`Replacement::sibling_ready`]).
fn siblings_ready(r: &Replacement) -> Obligation {
    let obligation = &ob::delete::SIBLINGS_READY;
    match r.sibling_ready() {
        Ok(line) => obligation.holds(vec![line]),
        Err(line) => obligation.fails(vec![line]),
    }
}

/// Whether the pod has failed for longer than its start-up allows ([`Pod::unready`]: its
/// readiness, its restarts and its probes); a pod already terminating has not.
fn failed_past_startup(scene: &Scene, pod: &Pod) -> Obligation {
    let obligation = &ob::delete::FAILED_PAST_STARTUP;
    if pod.deleting {
        return obligation.fails(vec![format!(
            "pod {} is already terminating{}",
            pod.name,
            if pod.finalizers.is_empty() {
                String::new()
            } else {
                format!(" (finalizers: {})", pod.finalizers.join(", "))
            }
        )]);
    }
    let Unready {
        failing_for,
        restarts,
        allowance,
        past_startup,
    } = pod.unready(scene.now);
    obligation.check(
        past_startup,
        vec![match failing_for {
            None => format!("pod {} is ready", pod.name),
            Some(d) => format!(
                "pod {} not ready for {} (its start-up allows {}){}{}",
                pod.name,
                ago(d),
                ago(allowance),
                if restarts > 0 {
                    format!(", {restarts} restarts")
                } else {
                    String::new()
                },
                pod.broken().map(|f| format!("; {f}")).unwrap_or_default()
            ),
        }],
    )
}

/// Whether the pod's failure is its own, from its siblings' state and the warnings about it: no
/// sibling shares it ([`Replacement::sharing`]).
fn failure_not_shared(r: &Replacement, events: &[Event]) -> Obligation {
    let pod = r.pod;
    let sharing = r.sharing();
    let warned: Vec<&Event> = events
        .iter()
        .filter(|e| e.warning && e.kind == "Pod" && e.name == pod.name)
        .take(1)
        .collect();
    let mut ev: Vec<String> = sharing
        .iter()
        .take(3)
        .map(|p| {
            format!(
                "sibling {} is not ready either{}",
                p.name,
                p.failure()
                    .map(|f| format!(" ({})", f.cause))
                    .unwrap_or_default()
            )
        })
        .collect();
    if sharing.is_empty() {
        ev.push(format!("no sibling shows the failure of {}", pod.name));
    }
    ev.extend(warned.iter().map(|e| e.line()));
    ob::delete::FAILURE_NOT_SHARED.check(sharing.is_empty(), ev)
}

/// Whether no configuration its replacement reads changed between its ready siblings and it
/// ([`Replacement::config_changed`]), from the ConfigMaps its template names, read now.
async fn config_unchanged_since_siblings(scene: &Scene, r: &Replacement<'_>) -> Read<Obligation> {
    let obligation = &ob::delete::CONFIG_UNCHANGED_SINCE_SIBLINGS;
    let mut written = std::collections::BTreeMap::new();
    for name in super::configmaps(&r.pod.raw) {
        match scene.get("ConfigMap", scene.ns(), &name).await {
            Ok(cm) => {
                written.insert(name, last_written(&cm));
            }
            Err(e) if e.is_unreachable() => return Err(e),
            Err(_) => {}
        }
    }
    Ok(
        match r.config_changed(|name| written.get(name).copied().flatten()) {
            Ok(lines) => obligation.holds(lines),
            Err(lines) => obligation.fails(lines),
        },
    )
}

/// Whether the pod's failure does not come with its template ([`Replacement::template_fails`]):
/// a deleted pod is replaced from the same template.
fn failure_not_in_the_template(r: &Replacement) -> Obligation {
    let obligation = &ob::delete::FAILURE_NOT_IN_THE_TEMPLATE;
    match r.template_fails() {
        Ok(lines) => obligation.holds(lines),
        Err(line) => obligation.fails(vec![line]),
    }
}

/// Whether the failure does not follow the pod's node ([`Replacement::follows_node`]): its own
/// node and those of its ready siblings, read one by one (a node that cannot be read is not
/// compared).
async fn failure_not_the_nodes(scene: &Scene, r: &Replacement<'_>) -> Read<Obligation> {
    let obligation = &ob::delete::FAILURE_NOT_THE_NODES;
    let read = |name: String| async move {
        match scene.get("Node", None, &name).await {
            Ok(n) => Ok(Some(Node::parse(&n))),
            Err(e) if e.is_unreachable() => Err(e),
            Err(_) => Ok(None),
        }
    };
    let mut nodes = Vec::new();
    if let Some(own) = r.pod.node.clone().filter(|_| r.pinned())
        && let Some(n) = read(own).await?
    {
        nodes.push(n);
        for name in r.ready_sibling_nodes() {
            nodes.extend(read(name).await?);
        }
    }
    Ok(match r.follows_node(&nodes.iter().collect::<Vec<_>>()) {
        Ok(line) => obligation.holds(vec![line]),
        Err(lines) => obligation.fails(lines),
    })
}

/// Whether the pod's node is not the common factor of the failures
/// ([`Replacement::node_not_at_fault`]), from the nodes and the pods on them: read only when the
/// node is in question.
async fn node_not_at_fault(scene: &Scene, replacement: &Replacement<'_>) -> Read<Obligation> {
    let obligation = &ob::delete::NODE_NOT_AT_FAULT;
    let nodes = scene.nodes().await?;
    let name = replacement.pod.node.as_deref();
    let node = nodes.iter().find(|n| Some(n.name.as_str()) == name);
    if let Some(line) = replacement.node_out_of_question(node) {
        return Ok(obligation.holds(vec![line]));
    }
    let (on_node, flaps) = match name {
        Some(n) => (scene.pods_on(n).await?, scene.node_flaps(n).await?),
        None => (vec![], None),
    };
    let all = scene.list("Pod", None, &Default::default()).await?;
    let all: Vec<Pod> = all.iter().map(|p| Pod::at(p, scene.now)).collect();
    Ok(
        match replacement.node_not_at_fault(node, flaps.as_deref(), &on_node, &all) {
            Ok(ev) => obligation.holds(ev),
            Err(ev) => obligation.fails(ev),
        },
    )
}
