//! The pods' nodes as dependencies: a node unhealthy now or lately (its conditions, their
//! flapping, the kernel's OOM kills it reports), and a neighbour on a node under pressure.

use super::*;
use crate::domain::{OnNode, Target};

/// Events a node's condition changes leave (the node controller's and the kubelet's): what
/// they said is in the conditions now. Not its memory: a node that ran short of memory lately
/// ([`findings::short_of_memory`]) may have killed the pods' containers then, whatever its
/// condition says now, as the memory proof holds.
const CONDITION_EVENTS: &[&str] = &["NodeHasDiskPressure", "NodeHasInsufficientPID"];

/// Node events that say the node itself is in trouble, besides its running short of memory
/// ([`findings::SHORT_OF_MEMORY`], [`node_trouble`]).
const NODE_TROUBLE: &[&str] = &[
    "SystemOOM",
    "NodeHasDiskPressure",
    "NodeHasInsufficientPID",
    "NodeNotReady",
    "Rebooted",
    "KernelOops",
    "ReadonlyFilesystem",
    "FilesystemIsReadOnly",
    "ContainerdUnhealthy",
    "DockerHung",
    "TaskHung",
];

/// Whether an event's reason says the node itself is in trouble ([`NODE_TROUBLE`], or short of
/// memory).
fn node_trouble(reason: &str) -> bool {
    NODE_TROUBLE.contains(&reason) || findings::SHORT_OF_MEMORY.contains(&reason)
}

/// How many of a neighbour's last log lines are read for the signs of eating what its node
/// lacks ([`HOG_SIGNS`]): a process that leaks says so over and over.
const NEIGHBOUR_LOG_LINES: i64 = 50;

/// What a neighbour's log says when it is eating a node's shared resources.
const HOG_SIGNS: &[&str] = &[
    "defunct",
    "zombie",
    "not reaped",
    "too many open files",
    "fork: resource temporarily unavailable",
    "cannot allocate memory",
    "no space left on device",
    "out of memory",
];

/// Whether node `name` ran short of memory itself for the target's failing pods on it
/// ([`findings::node_took_memory`], at the moments they were OOM-killed): what lets the node
/// explain a kill for memory, and whether its `SystemOOM` events count as its trouble (the
/// kernel killed more then than the containers that hit their own limits; a kill elsewhere on
/// the node, or at another time, does not explain these pods).
async fn took_memory(
    ctx: &Ctx,
    node: &observed::Node,
    events: &[Event],
) -> Read<findings::NodeMemory> {
    let name = node.name.as_str();
    let failing: Vec<Pod> = ctx
        .pods
        .iter()
        .filter(|p| ctx.failing.contains(&p.name))
        .filter(|p| p.node.as_deref() == Some(name))
        .cloned()
        .collect();
    let warnings: Vec<Event> = ctx.all_events.iter().map(Event::parse).collect();
    let moments = findings::kill_moments(&failing, &warnings, ctx.now);
    let here: Vec<Pod> = if moments.is_empty() || !events.iter().any(|e| e.reason == "SystemOOM") {
        vec![]
    } else {
        match ctx
            .list(
                "Pod",
                None,
                &ListQuery::fields(format!("spec.nodeName={name}")),
            )
            .await
        {
            Ok(p) => p.iter().map(Pod::parse).collect(),
            Err(e) if e.is_unreachable() => return Err(e),
            Err(_) => vec![],
        }
    };
    Ok(findings::node_took_memory(
        Some(node),
        name,
        events,
        &here,
        &moments,
        ctx.now,
    ))
}

/// The pods' nodes: their conditions and trouble events; for a node under pressure, the
/// neighbour whose log says it eats what the node lacks; evictions and preemptions of the
/// pods.
pub(in crate::prove::graph) async fn nodes(ctx: &Ctx) -> Read<Vec<Dependency>> {
    let mut out = Vec::new();
    let mut names: Vec<String> = Vec::new();
    for p in ctx
        .pods
        .iter()
        .filter(|p| ctx.failing.contains(&p.name))
        .chain(ctx.pods.iter())
    {
        if let Some(n) = p.node.as_deref()
            && !names.iter().any(|x| x == n)
        {
            names.push(n.to_owned());
        }
    }
    // A node's trouble is looked back at as far as a kill for memory counts.
    let window = ctx.now - Duration::hours(observed::MEMORY_KILL_LOOKBACK_HOURS);
    for name in names.iter().take(3) {
        let Some(node) = ctx.get("Node", None, name).await? else {
            continue;
        };
        let here: Vec<&Pod> = ctx
            .pods
            .iter()
            .filter(|p| p.node.as_deref() == Some(name.as_str()))
            .collect();
        let failing_here = here
            .iter()
            .filter(|p| ctx.failing.contains(&p.name))
            .count();
        let elsewhere_ok = ctx
            .pods
            .iter()
            .filter(|p| p.node.as_deref().is_some_and(|n| n != name))
            .filter(|p| !ctx.failing.contains(&p.name))
            .count();
        let relation = format!(
            "runs {} of the pods ({failing_here} failing){}",
            here.len(),
            if elsewhere_ok > 0 {
                format!("; {elsewhere_ok} elsewhere run fine")
            } else {
                String::new()
            }
        );
        let mut d = Dependency::of(
            DepKind::Node,
            Target::new("Node", name.as_str(), None),
            relation,
        );
        let mut pressure = None;
        let observed_node = observed::Node::parse(&node);
        if let Some((problem, since)) = observed_node.trouble() {
            pressure = Some(problem.clone());
            d = d.unhealthy(format!("is {problem}"), since);
        }
        // The node's own events (a kubelet or node-problem-detector complaint).
        let events = match crate::cluster::node_events(ctx.r.as_ref(), name).await {
            Ok(e) => e,
            Err(e) if e.is_unreachable() => return Err(e),
            Err(_) => vec![],
        };
        // A SystemOOM report is about a process: it speaks of the node, for these pods, only
        // at the moment one of them was killed and beyond the containers killed then.
        let views: Vec<Event> = events.iter().map(Event::parse).collect();
        let memory = took_memory(ctx, &observed_node, &views).await?;
        let oom_counts = memory.kernel_kills > 0;
        // A condition's transition events (NotReady, pressure) are history once the condition
        // has recovered: the conditions now (above) decide, and a readiness that keeps coming
        // and going (readiness_flaps) still counts.
        let flapping = findings::flaps(ctx.now, &views, name);
        let flaps = flapping.is_some();
        let trouble: Vec<&Value> = events
            .iter()
            .filter(|e| match str_at(e, &["reason"]) {
                Some("SystemOOM") => oom_counts,
                Some("NodeNotReady") => flaps,
                Some(r) if CONDITION_EVENTS.contains(&r) => false,
                r => r.is_some_and(node_trouble) || str_at(e, &["type"]) == Some("Warning"),
            })
            .filter(|e| event_time(e).is_none_or(|t| t >= window))
            .collect();
        if let Some(e) = trouble.iter().max_by_key(|e| event_time(e)) {
            let line = format!(
                "{}: {}",
                str_at(e, &["reason"]).unwrap_or(""),
                str_at(e, &["message"]).unwrap_or("")
            );
            d = d.evidence(line.clone());
            pressure = pressure.or(Some(line));
        }
        // What the node reported of its own trouble (not any warning: an old
        // `InvalidDiskCapacity` does not make a node where one pod crash-loops unhealthy).
        if let Some(e) = trouble
            .iter()
            .filter(|e| str_at(e, &["reason"]).is_some_and(node_trouble))
            .max_by_key(|e| event_time(e))
            && d.unhealthy.is_none()
            && failing_here > 0
        {
            let line = format!(
                "{}: {}",
                str_at(e, &["reason"]).unwrap_or(""),
                str_at(e, &["message"]).unwrap_or("")
            );
            d = d.unhealthy(format!("reported {line}"), event_time(e));
        }
        // The drain's question (is the node the common factor of the failures?), asked of the
        // target's pods: what `depends` proposes a drain on, and what the drain's proof asks
        // again of every pod.
        let on_node: Vec<Pod> = here.iter().map(|p| (*p).clone()).collect();
        let (at_fault, why) =
            findings::node_at_fault(&observed_node, flapping.as_deref(), &on_node, &ctx.pods);
        d.on_node = Some(OnNode {
            node: name.clone(),
            pods: here.len(),
            failing: failing_here,
            at_fault,
            short_of_memory: memory.why.first().cloned(),
        });
        if at_fault && d.unhealthy.is_none() {
            let what = match &flapping {
                Some(f) => f.clone(),
                None => "is where pods fail while their siblings elsewhere are ready".to_owned(),
            };
            d = d.unhealthy(what, None);
            d.evidence.extend(why.iter().skip(1).cloned());
        }
        // Pods that were deleted but cannot finish terminating: the kubelet that would stop
        // them is gone, so moving them needs a human to confirm the node is down.
        let stuck = findings::cannot_finish_terminating(&observed_node, &on_node).len();
        if stuck > 0 {
            d.blocks = Some(format!(
                "{stuck} pod(s) on it were deleted and cannot finish terminating while its kubelet is unreachable: a human must confirm the node is gone before force-deleting them (a StatefulSet's replacement cannot start until then)"
            ));
        }
        let troubled = d.unhealthy.is_some();
        out.push(d);
        // A node short of something: who on it eats it.
        if troubled
            && pressure.is_some()
            && let Some(hog) = neighbour_hog(ctx, name).await?
        {
            out.push(hog);
        }
    }
    // Evictions and preemptions of the target's pods (a preemption is a Normal event).
    // Its pods now, and the pods since deleted whose names its controllers generated.
    let own: Vec<&str> = ctx.pods.iter().map(|p| p.name.as_str()).collect();
    for e in ctx
        .all_events
        .iter()
        .filter(|e| observed::about_workload(observed::event_subject(e).1, &ctx.target.name, &own))
    {
        let reason = str_at(e, &["reason"]).unwrap_or("");
        let msg = str_at(e, &["message"]).unwrap_or("");
        if matches!(reason, "Evicted" | "Preempted" | "Preempting")
            || msg.contains("exceeded its local ephemeral storage")
        {
            let by = msg
                .split_once("Preempted by ")
                .map(|(_, rest)| rest.split_whitespace().next().unwrap_or("").to_owned());
            let object = match &by {
                Some(p) if !p.is_empty() => {
                    format!("pod {}", p.trim_end_matches(|c: char| !c.is_alphanumeric()))
                }
                _ => format!(
                    "the pods' {}",
                    if msg.contains("ephemeral") {
                        "ephemeral storage"
                    } else {
                        "node resources"
                    }
                ),
            };
            if out.iter().any(|d: &Dependency| d.object == object) {
                continue;
            }
            out.push(
                Dependency::new(DepKind::Node, object, format!("{reason} the pods")).unhealthy(
                    format!("{reason}: {}", msg.chars().take(200).collect::<String>()),
                    super::super::event_first(e),
                ),
            );
        }
    }
    Ok(out)
}

/// Among the other pods on `node`, one whose log says it eats the node's shared resources.
async fn neighbour_hog(ctx: &Ctx, node: &str) -> Read<Option<Dependency>> {
    let pods = match ctx
        .list(
            "Pod",
            None,
            &ListQuery::fields(format!("spec.nodeName={node}")),
        )
        .await
    {
        Ok(p) => p,
        Err(e) if e.is_unreachable() => return Err(e),
        Err(_) => return Ok(None),
    };
    let own: BTreeSet<&str> = ctx.pods.iter().map(|p| p.name.as_str()).collect();
    for p in pods.iter().filter(|p| !own.contains(obj::name(p))).take(4) {
        let ns = obj::namespace(p).unwrap_or_default();
        let q = crate::cluster::LogQuery {
            container: None,
            previous: false,
            tail_lines: Some(NEIGHBOUR_LOG_LINES),
            since_seconds: None,
        };
        let log =
            match tokio::time::timeout(super::super::LOG_TIMEOUT, ctx.r.logs(ns, obj::name(p), &q))
                .await
            {
                Ok(Ok(l)) => l,
                Ok(Err(e)) if e.is_unreachable() => return Err(e),
                Ok(Err(_)) | Err(_) => continue,
            };
        let lower = log.to_ascii_lowercase();
        if let Some(line) = log
            .lines()
            .zip(lower.lines())
            .find(|(_, l)| HOG_SIGNS.iter().any(|s| l.contains(s)))
            .map(|(l, _)| l.trim().chars().take(200).collect::<String>())
        {
            let owner = array(p, &["metadata", "ownerReferences"])
                .first()
                .and_then(|o| str_at(o, &["name"]))
                .unwrap_or(obj::name(p));
            // It explains the node's trouble better than the node does: draining the node
            // would move the victims and leave it behind.
            return Ok(Some(
                Dependency::new(
                    DepKind::Node,
                    format!("pod {ns}/{} ({owner})", obj::name(p)),
                    format!("shares node {node}, whose shortage breaks the pods"),
                )
                .about(Target::new("Pod", obj::name(p), Some(ns.to_string())))
                .unhealthy(
                    format!("its log says \"{}\"", crate::redact::sanitize_text(&line)),
                    None,
                )
                .culprit_of_object(&Target::new("Node", node.to_string(), None)),
            ));
        }
    }
    Ok(None)
}
