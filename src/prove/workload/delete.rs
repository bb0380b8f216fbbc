//! Delete one pod so its controller replaces it.

use super::*;

pub(in crate::prove) async fn delete_pod(
    scene: &Scene,
    pod_name: Option<&str>,
) -> Read<Vec<Obligation>> {
    let mut out = Vec::new();
    let Some(pod_name) = pod_name else {
        out.push(ob::delete::POD_OWNED_BY_TARGET.fails(vec!["POD_NAME is missing".into()]));
        return Ok(out);
    };
    let w = scene.target_obj().await?;
    let pods = scene.pods_of(&w).await?;
    let events = scene.events(None).await?;
    let Some(pod) = pods.iter().find(|p| p.name == pod_name) else {
        out.push(ob::delete::POD_OWNED_BY_TARGET.fails(vec![format!(
            "pod {pod_name} is not among the {} pods of {} {}",
            pods.len(),
            obj::kind(&w),
            obj::name(&w)
        )]));
        return Ok(out);
    };
    out.push(ob::delete::POD_OWNED_BY_TARGET.check(
        pod.controller.is_some(),
        vec![match &pod.controller {
            Some((k, n)) => format!("pod {pod_name} is controlled by {k} {n}"),
            None => format!("pod {pod_name} has no controller: deleting it loses it"),
        }],
    ));
    // A pod that has ended (Failed, Succeeded) is no longer one of its controller's replicas:
    // it was replaced already, and deleting it only removes its record.
    if matches!(pod.phase.as_str(), "Failed" | "Succeeded") {
        out.push(ob::delete::POD_STILL_RUNNING.fails(vec![format!(
                "pod {pod_name} has ended ({}{}): its controller replaced it already",
                pod.phase,
                str_at(&pod.raw, &["status", "reason"])
                    .map(|r| format!(", {r}"))
                    .unwrap_or_default()
            )]));
    }
    let siblings: Vec<&Pod> = pods
        .iter()
        .filter(|p| p.name != pod_name && !p.deleting)
        .collect();
    let ready = siblings.iter().filter(|p| p.ready).count();
    // The only replica, not ready: no sibling shows the template runs, so the pod's own history
    // must show that what fails is state it keeps, which a new pod starts without.
    let only = siblings.is_empty() && i64_at(&w, &["spec", "replicas"]) == Some(1);
    let kept = if only && !pod.ready {
        let log = match findings::restarting_container(pod) {
            Some(c) => scene.previous_log(&pod.name, &c.name).await,
            None => None,
        };
        findings::state_kept(pod, &events, log.as_deref())
    } else {
        None
    };
    let kept_state = kept.as_ref().map(|k| k.evidence.clone());
    match &kept_state {
        Some(_) => out.push(ob::delete::SIBLINGS_READY.holds(vec![format!(
                "pod {pod_name} is the only replica (spec.replicas 1) and serves nothing now: deleting it takes nothing away that runs"
            )],
        )),
        None => out.push(ob::delete::SIBLINGS_READY.check(ready >= 1,
            vec![format!(
                "{ready} of {} sibling pod(s) ready",
                siblings.len()
            )],
        )),
    }
    out.push(no_rollout_in_progress(&w, &ob::delete::NO_ROLLOUT_IN_PROGRESS));
    // Failed for longer than its start-up allows.
    let allowance = startup_allowance(&pod.raw);
    let since = if pod.ready {
        None
    } else {
        pod.ready_since.or(pod.created)
    };
    let failing_for = since.map(|s| scene.now - s);
    // A container that has already restarted again and again is past its start-up, however
    // recently its Ready condition moved; so is one the kubelet backs off from restarting after
    // its starts failed twice (a start that fails is not a start that takes long).
    let restarts = pod.containers.iter().map(|c| c.restarts).max().unwrap_or(0);
    let backing_off = pod
        .containers
        .iter()
        .any(|c| c.restarts >= 2 && c.waiting.as_deref() == Some("CrashLoopBackOff"));
    let failing = &ob::delete::FAILED_PAST_STARTUP;
    if pod.deleting {
        out.push(failing.fails(vec![format!(
            "pod {pod_name} is already terminating{}",
            if pod.finalizers.is_empty() {
                String::new()
            } else {
                format!(" (finalizers: {})", pod.finalizers.join(", "))
            }
        )]));
    } else {
        let ok = failing_for.is_some_and(|d| d > allowance || restarts >= 3 || backing_off);
        out.push(failing.check(
            ok,
            vec![match failing_for {
                None => format!("pod {pod_name} is ready"),
                Some(d) => format!(
                    "pod {pod_name} not ready for {} (its start-up allows {}){}{}",
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
        ));
    }
    // Its failure is its own.
    let reason = |p: &Pod| {
        p.containers.iter().find_map(|c| {
            c.waiting
                .clone()
                .or_else(|| c.terminated.as_ref().map(|t| t.0.clone()))
        })
    };
    let mine = reason(pod);
    let sharing: Vec<&&Pod> = siblings
        .iter()
        .filter(|p| !p.ready && (mine.is_none() || reason(p) == mine))
        .collect();
    let warned: Vec<&Event> = events
        .iter()
        .filter(|e| e.warning && e.kind == "Pod" && e.name == pod_name)
        .take(1)
        .collect();
    let mut ev: Vec<String> = sharing
        .iter()
        .take(3)
        .map(|p| {
            format!(
                "sibling {} is not ready either{}",
                p.name,
                reason(p).map(|r| format!(" ({r})")).unwrap_or_default()
            )
        })
        .collect();
    if sharing.is_empty() {
        ev.push(format!("no sibling shows the failure of {pod_name}"));
    }
    ev.extend(warned.iter().map(|e| e.line()));
    out.push(ob::delete::FAILURE_NOT_SHARED.check(sharing.is_empty(), ev));
    out.push(failure_not_the_nodes(scene, pod, &siblings).await?);
    out.push(match (&kept_state, only) {
        (Some(ev), _) => ob::delete::FAILURE_NOT_IN_THE_TEMPLATE.holds(ev.clone(),
        ),
        (None, true) => ob::delete::FAILURE_NOT_IN_THE_TEMPLATE.fails(vec![format!(
                "pod {pod_name} is the only replica: no sibling shows its template runs, and nothing shows its failure is state of its own (an error naming a path in its emptyDir, a kill it never recovered from)"
            )],
        ),
        (None, false) => failure_not_in_the_template(pod, &siblings),
    });
    let named = kept.and_then(|k| k.named);
    out.push(config_unchanged_since_siblings(scene, pod, &siblings, named.as_ref()).await?);
    out.push(crate::prove::node::delete_not_at_fault(scene, pod).await?);
    Ok(out)
}

/// A replacement reads the ConfigMaps its template names as they are now. When one of them
/// changed after the ready siblings started and before the failing pod did, the siblings run
/// the old configuration and the pod the new one: the replacement fails like the pod.
///
/// The only pod whose failing starts name state of its own ([`KeptState`]) is the exception:
/// its restarting containers read the changed configuration too, and what they fail on is the
/// state a new pod starts without.
async fn config_unchanged_since_siblings(
    scene: &Scene,
    pod: &Pod,
    siblings: &[&Pod],
    kept: Option<&KeptState>,
) -> Read<Obligation> {
    let obligation = &ob::delete::CONFIG_UNCHANGED_SINCE_SIBLINGS;
    let oldest_ready = siblings
        .iter()
        .filter(|p| p.ready)
        .filter_map(|p| started(p))
        .min();
    // The only pod: what changed since it started, which its restarting containers read.
    let (oldest_ready, mine) = if siblings.is_empty() {
        (started(pod), Some(scene.now))
    } else {
        (oldest_ready, started(pod))
    };
    let (Some(since), Some(mine)) = (oldest_ready, mine) else {
        return Ok(obligation.holds(vec![
            "no ready sibling started before it to compare with".into(),
        ]));
    };
    let mut changed = Vec::new();
    let mut read = Vec::new();
    for name in super::configmaps(&pod.raw) {
        let cm = match scene.get("ConfigMap", scene.ns(), &name).await {
            Ok(cm) => cm,
            Err(e) if e.is_unreachable() => return Err(e),
            Err(_) => continue,
        };
        match last_written(&cm) {
            Some(t) if t > since && t <= mine && siblings.is_empty() => changed.push(format!(
                "ConfigMap {name} changed at {}, after pod {} started ({}): its restarting containers and its replacement read it as it is now",
                hhmm(t),
                pod.name,
                hhmm(since)
            )),
            Some(t) if t > since && t <= mine => changed.push(format!(
                "ConfigMap {name} changed at {}, after its ready siblings started ({}) and before pod {} did ({}): its replacement reads it as it is now",
                hhmm(t),
                hhmm(since),
                pod.name,
                hhmm(mine)
            )),
            _ => read.push(name),
        }
    }
    Ok(match kept {
        _ if changed.is_empty() => obligation.holds(vec![if read.is_empty() {
            "its template reads no ConfigMap".to_owned()
        } else {
            format!("unchanged since its siblings started: {}", read.join(", "))
        }]),
        Some(k) if siblings.is_empty() => {
            changed.push(format!(
                "its failing starts read that configuration already, and the error they end on names {} in its emptyDir volume {}, not it",
                k.path, k.volume
            ));
            obligation.holds(changed)
        }
        _ => obligation.fails(changed),
    })
}

/// Waiting reasons that come with what the pod is made from (its image, its configuration):
/// a replacement made from the same template meets them again.
const TEMPLATE_WAITS: &[&str] = &[
    "CreateContainerConfigError",
    "CreateContainerError",
    "InvalidImageName",
    "ErrImagePull",
    "ImagePullBackOff",
    "ErrImageNeverPull",
];

/// A deleted pod is replaced from the same template (its ReplicaSet's, its revision's). When
/// the failure comes with that template — a configuration or image it cannot start with, or a
/// revision no ready sibling runs — the replacement fails alike.
fn failure_not_in_the_template(pod: &Pod, siblings: &[&Pod]) -> Obligation {
    let obligation = &ob::delete::FAILURE_NOT_IN_THE_TEMPLATE;
    if let Some((c, why)) = pod.containers.iter().find_map(|c| {
        c.waiting
            .as_deref()
            .filter(|w| TEMPLATE_WAITS.contains(w))
            .map(|w| (c, w))
    }) {
        return obligation.fails(vec![format!(
                "container {} of pod {} waits with {why}: its image or configuration is what fails, and a replacement reads the same",
                c.name, pod.name
            )],
        );
    }
    let hash = pod.template_hash.as_ref().or(pod.revision_hash.as_ref());
    let of = |p: &Pod| p.template_hash.as_ref().or(p.revision_hash.as_ref()) == hash;
    let ready: Vec<&&Pod> = siblings.iter().filter(|p| p.ready).collect();
    // Same template, another image: the tag moved (re-pushed) after the siblings pulled it.
    let ready_pods: Vec<&Pod> = ready.iter().map(|p| **p).collect();
    if let Some(moved) = findings::moved_image(pod, &ready_pods) {
        return obligation.fails(vec![moved]);
    }
    match hash {
        Some(h) if !ready.is_empty() && !ready.iter().any(|p| of(p)) => obligation.fails(vec![format!(
                "no ready sibling runs the template of pod {} ({h}); the ready ones run {}: its replacement is made from {h} again",
                pod.name,
                ready
                    .iter()
                    .filter_map(|p| p.template_hash.as_ref().or(p.revision_hash.as_ref()))
                    .map(String::as_str)
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect::<Vec<_>>()
                    .join(", ")
            )],
        ),
        _ => obligation.holds(vec![format!(
                "{} ready sibling(s) run the template of pod {}",
                ready.iter().filter(|p| of(p)).count(),
                pod.name
            )],
        ),
    }
}

/// What a node runs that a pod may depend on (`status.nodeInfo`).
const NODE_INFO: &[(&str, &str)] = &[
    ("kernelVersion", "kernel"),
    ("osImage", "OS image"),
    ("containerRuntimeVersion", "container runtime"),
    ("kubeletVersion", "kubelet"),
    ("architecture", "architecture"),
];

/// A DaemonSet's replacement pod starts on the same node. When that node differs from every
/// node where the siblings run ready (its kernel, OS image, runtime, kubelet), the failure
/// follows the node, and deleting the pod only repeats it.
async fn failure_not_the_nodes(scene: &Scene, pod: &Pod, siblings: &[&Pod]) -> Read<Obligation> {
    let obligation = &ob::delete::FAILURE_NOT_THE_NODES;
    let pinned = pod
        .controller
        .as_ref()
        .is_some_and(|(kind, _)| kind == "DaemonSet");
    let Some(node) = pod.node.as_deref().filter(|_| pinned) else {
        return Ok(obligation.holds(vec![format!(
            "pod {} is replaced wherever the scheduler places it",
            pod.name
        )]));
    };
    let info = |v: &Value| -> Vec<(&'static str, String)> {
        NODE_INFO
            .iter()
            .filter_map(|(key, label)| {
                str_at(v, &["status", "nodeInfo", key])
                    .filter(|s| !s.is_empty())
                    .map(|s| (*label, s.to_owned()))
            })
            .collect()
    };
    let read = |name: String| async move {
        match scene.get("Node", None, &name).await {
            Ok(n) => Ok(Some((name, n))),
            Err(e) if e.is_unreachable() => Err(e),
            Err(_) => Ok(None),
        }
    };
    let Some((_, own)) = read(node.to_owned()).await? else {
        return Ok(obligation.holds(vec![format!(
            "node {node} cannot be read: nothing shows it differs"
        )]));
    };
    let own = info(&own);
    let healthy_nodes: BTreeSet<String> = siblings
        .iter()
        .filter(|p| p.ready)
        .filter_map(|p| p.node.clone())
        .filter(|n| n != node)
        .collect();
    let mut others = Vec::new();
    for name in healthy_nodes {
        if let Some((name, n)) = read(name).await? {
            others.push((name, info(&n)));
        }
    }
    // What this node runs that no node of a ready sibling runs.
    let differs: Vec<String> = own
        .iter()
        .filter(|(label, value)| {
            !others.is_empty()
                && others
                    .iter()
                    .all(|(_, theirs)| theirs.iter().any(|(l, v)| l == label && v != value))
        })
        .map(|(label, value)| {
            let theirs: BTreeSet<&str> = others
                .iter()
                .flat_map(|(_, t)| {
                    t.iter()
                        .filter(|(l, _)| l == label)
                        .map(|(_, v)| v.as_str())
                })
                .collect();
            format!(
                "{label} {value} (the nodes where its siblings run ready: {})",
                theirs.into_iter().collect::<Vec<_>>().join(", ")
            )
        })
        .collect();
    if differs.is_empty() {
        return Ok(obligation.holds(vec![if others.is_empty() {
            format!("no sibling runs ready on another node to compare node {node} with")
        } else {
            format!(
                "node {node} runs what the {} node(s) of its ready siblings run",
                others.len()
            )
        }]));
    }
    let mut ev = vec![format!(
        "pod {} fails on node {node}, and a DaemonSet replaces it on the same node; only node {node} runs {}",
        pod.name,
        differs.join("; ")
    )];
    ev.push(format!(
        "its siblings run ready on {}: the failure follows node {node}, a person decides about that node",
        others
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    Ok(obligation.fails(ev))
}

/// How long a pod may take to start: its startup probe's budget, else its readiness probe's
/// first delay and failures, at least two minutes.
fn startup_allowance(pod: &Value) -> Duration {
    let mut secs = 120;
    for c in array(pod, &["spec", "containers"]) {
        for probe in ["startupProbe", "readinessProbe", "livenessProbe"] {
            let Some(p) = at(c, &[probe]) else { continue };
            let delay = i64_at(p, &["initialDelaySeconds"]).unwrap_or(0);
            let period = i64_at(p, &["periodSeconds"]).unwrap_or(10);
            let failures = i64_at(p, &["failureThreshold"]).unwrap_or(3);
            secs = secs.max(delay + period * failures);
        }
    }
    Duration::seconds(secs)
}
