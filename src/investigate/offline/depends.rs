//! When the rules see only the symptom, the neighbourhood may see the cause: what the target
//! depends on that is unhealthy now or changed just before the failures began.
//!
//! Input: the rules' [`Diagnosis`] and the target's ranked [`Neighbourhood`]. Output: the
//! diagnosis to keep — the rules' when it determines the cause on its own, else one naming the
//! culprit, what is wrong with it and the timeline. An action only where a catalog workflow
//! fits the culprit (a node everything fails on: cordon and drain it — its proof decides);
//! otherwise a human decides, told what to look at.

use super::rules::Diagnosis;
pub(super) use super::rules::Standing;
use crate::domain::{
    ActionParams, ActionType, DepKind, Dependency, InvestigationOutcome, Neighbourhood, Proposal,
    Severity, Target,
};

/// How far `d` stands: its rule's declared standing (`Rule::standing`, one per rule in
/// `rules::RULES`), except that a diagnosis about kills for memory (`Diagnosis::killed_for_memory`:
/// an OOM kill, a prediction for a container already killed) stands only unless a node that ran
/// short of memory itself explains the kills.
pub(super) fn standing(d: &Diagnosis) -> Standing {
    if d.killed_for_memory {
        Standing::UnlessUnhealthy
    } else {
        d.standing
    }
}

/// Whether an unhealthy dependency `c` can explain what `rule` saw directly of the alerted
/// container. A container killed at its own memory limit used that memory itself: only a node
/// that ran short of memory itself explains such a kill (the kernel's system-wide OOM killer
/// kills inside the container's cgroup, and the kubelet reports `OOMKilled` then too), as the
/// memory proof asks ([`crate::domain::OnNode::short_of_memory`]); a node in other trouble (a full disk, a
/// flapping readiness), a Service, a host, a volume or a policy does not, however unhealthy.
/// What changed in what the pods read is the memory proof's question
/// (`memory.no-change-explains`), not an override here.
fn explains(d: &Diagnosis, c: &Dependency) -> bool {
    if !d.killed_for_memory {
        return true;
    }
    c.kind == DepKind::Node
        && c.on_node
            .as_ref()
            .is_some_and(|o| o.short_of_memory.is_some())
}

/// The diagnosis the neighbourhood supports instead of `d`, if any.
pub(super) fn decide(n: &Neighbourhood, d: &Diagnosis, target: &Target) -> Option<Diagnosis> {
    let standing = standing(d);
    if standing == Standing::Determined {
        return None;
    }
    let c = n.culprit()?;
    if standing == Standing::UnlessUnhealthy && (c.unhealthy.is_none() || !explains(d, c)) {
        return None;
    }
    let explain = n.explain()?;
    // A node where pods of the target fail, the common factor of their failures as far as the
    // graph read (its conditions, its readiness flapping, or pods failing on it while their
    // siblings elsewhere are ready): drain it (its proof asks the same of every pod on it, and
    // that it is not the last node, and the budgets).
    if c.kind == DepKind::Node
        && c.unhealthy.is_some()
        && c.blocks.is_none()
        && let Some(on) = &c.on_node
        && on.at_fault
        && on.failing > 0
    {
        let node = on.node.as_str();
        let mut out = Diagnosis::new(
            "NodeFailure",
            format!(
                "Pods of {target} fail on node {node}, which {}",
                c.unhealthy.as_deref().unwrap_or("is unhealthy")
            ),
        );
        out.factors = n.symptoms.clone();
        out.factors.extend(c.evidence.iter().cloned());
        out.factors.push(explain);
        out.confidence = 0.8;
        out.severity = Severity::High;
        out.target = Some(Target::new("Node", node, None));
        out.proposal = Some(Proposal {
            action_type: ActionType::CordonDrainNode,
            parameters: ActionParams::Drain.to_map(),
            git_change: String::new(),
            workflow_id: None,
        });
        out.analysis = format!(
            "Followed what {target} depends on: its failing pods run on node {node}, which is unhealthy; moving them to healthy nodes addresses it."
        );
        return Some(out);
    }
    // A dependency that is healthy again but moved (its endpoints changed) just before the
    // pods stopped being ready, while they run: they hold what was there before (pooled
    // connections, a cached address). A rolling restart reconnects them (its proof checks
    // that they run but are wedged, that ready pods stay, and that nothing they depend on is
    // broken: new pods would meet it, so with one broken a human decides).
    let running_not_ready = n.failing_pods_run;
    if c.kind == DepKind::Host
        && c.unhealthy.is_none()
        && c.changed.is_some()
        && running_not_ready
        && n.broken().next().is_none()
        && matches!(
            target.kind.as_str(),
            "Deployment" | "StatefulSet" | "DaemonSet"
        )
    {
        let mut out = Diagnosis::new(
            "StaleDependency",
            format!(
                "The pods of {target} run but are not ready since {} changed under them: {explain}",
                c.object
            ),
        );
        out.factors = n.symptoms.clone();
        out.factors.extend(c.evidence.iter().cloned());
        out.confidence = 0.75;
        out.severity = Severity::High;
        out.target = Some(target.clone());
        out.proposal = Some(Proposal {
            action_type: ActionType::RestartDeployment,
            parameters: ActionParams::Restart.to_map(),
            git_change: String::new(),
            workflow_id: None,
        });
        out.analysis = format!(
            "{} is healthy now, but it changed just before {target}'s pods stopped being ready while they kept running: they hold connections or addresses from before; fresh processes pick up the new ones.",
            c.object
        );
        return Some(out);
    }
    // A workload whose own rollout broke what depends on it (its pods no longer carry the
    // labels a Service selects), with the revision before that rollout kept: roll it back (its
    // proof checks the revision served, that the change is in the pod template and that the
    // trouble began with the rollout).
    if c.kind == DepKind::Rollout
        && c.unhealthy.is_some()
        && let Some(undo) = &c.undo
    {
        let mut out = Diagnosis::new(
            "RolloutBrokeDependent",
            format!("{target} fails: {explain}"),
        );
        out.factors = n.symptoms.clone();
        out.factors.extend(c.evidence.iter().cloned());
        out.factors.push(format!("{} {}", c.object, c.relation));
        out.confidence = 0.8;
        out.severity = Severity::High;
        out.target = Some(undo.target.clone());
        out.proposal = Some(Proposal {
            action_type: ActionType::RollbackDeployment,
            parameters: ActionParams::rollback(undo.to_revision).to_map(),
            git_change: format!("revert the change to {}'s pod labels", undo.target),
            workflow_id: None,
        });
        out.analysis = format!(
            "Followed what {target} depends on: {} lost what it served when {} rolled out a new revision; the revision before it still carried what the dependent needs.",
            c.causes
                .as_ref()
                .map_or("a dependency".to_owned(), ToString::to_string),
            c.object
        );
        return Some(out);
    }
    let mut out = Diagnosis::new(
        "DependencyFailure",
        format!("{target} fails because of {}: {explain}", c.object),
    );
    out.factors = n.symptoms.clone();
    out.factors.extend(c.evidence.iter().cloned());
    for other in n
        .dependencies
        .iter()
        .skip(1)
        .filter(|x| x.score > 0)
        .take(2)
    {
        out.factors.push(format!(
            "also: {} ({}){}",
            other.object,
            other.relation,
            other
                .unhealthy
                .as_deref()
                .map(|u| format!(" {u}"))
                .unwrap_or_default()
        ));
    }
    out.outcome = InvestigationOutcome::Actionable;
    out.confidence = if c.unhealthy.is_some() { 0.8 } else { 0.7 };
    out.severity = Severity::High;
    out.target = d.target.clone().or_else(|| Some(target.clone()));
    out.human = Some(match &c.blocks {
        Some(why) => format!("{explain}. {why}"),
        None => format!(
            "{explain}. kubemedic does not change what {target} depends on: a human must decide about {}",
            c.object
        ),
    });
    out.analysis = format!(
        "Followed what {target} depends on and what changed before it failed; {} explains the failures better than anything about {target} itself.",
        c.object
    );
    Some(out)
}

/// For a diagnosis that stays inconclusive: what was checked of the neighbourhood, so the
/// human starts from there.
pub(super) fn context(n: &Neighbourhood) -> Vec<String> {
    n.dependencies
        .iter()
        .take(3)
        .map(|d| {
            let mut s = format!("checked {} ({})", d.object, d.relation);
            if let Some(u) = &d.unhealthy {
                s.push_str(&format!(": {u}"));
            }
            for e in d.evidence.iter().take(1) {
                s.push_str(&format!("; {e}"));
            }
            s
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::*;
    use crate::domain::{Change, OnNode};

    fn neighbourhood(culprit: Dependency) -> Neighbourhood {
        let now = Utc::now();
        let mut n = Neighbourhood {
            target: "StatefulSet shop/ledger".into(),
            onset: Some(now),
            symptoms: vec!["pod ledger-0: OOMKilled at its limit 256Mi".into()],
            failing_pods_run: false,
            dependencies: vec![culprit],
        };
        n.rank(now);
        n
    }

    #[test]
    fn a_kill_at_the_container_s_own_limit_outranks_an_unhealthy_service_but_not_its_node() {
        let target = Target::new("StatefulSet", "ledger", Some("shop".into()));
        let mut oom = Diagnosis::new("OOMKilled", "ledger-0 was killed at its memory limit");
        oom.rule = "oomkilled";
        oom.standing = Standing::UnlessUnhealthy;
        oom.killed_for_memory = true;
        let service = Dependency::new(
            DepKind::Service,
            "Service shop/ledger-headless",
            "governing Service of StatefulSet ledger",
        )
        .unhealthy("does not exist", None);
        assert!(
            decide(&neighbourhood(service), &oom, &target).is_none(),
            "a missing Service does not explain a kill at the container's own limit"
        );
        // Its node in trouble of another kind (a full disk) does not explain it; the same
        // node short of memory itself (what the memory proof asks) does.
        let node = |memory: Option<&str>| {
            let mut n =
                Dependency::new(DepKind::Node, "Node worker-1", "runs ledger-0 (1 failing)")
                    .unhealthy("is DiskPressure", None);
            n.on_node = Some(OnNode {
                node: "worker-1".into(),
                pods: 1,
                failing: 1,
                at_fault: true,
                short_of_memory: memory.map(str::to_owned),
            });
            n
        };
        assert!(
            decide(&neighbourhood(node(None)), &oom, &target).is_none(),
            "a node in other trouble does not explain a kill at the container's own limit"
        );
        assert!(
            decide(
                &neighbourhood(node(Some("node worker-1 is under MemoryPressure"))),
                &oom,
                &target
            )
            .is_some(),
            "a node short of memory itself explains it"
        );
        // Where the rule saw a pull failure, the same unhealthy Service still decides: only
        // a kill at the container's own limit is evidence no dependency of that kind explains.
        let mut pull = Diagnosis::new("ImagePullBackOff", "ledger-0 cannot pull its image");
        pull.rule = "imagepullbackoff";
        pull.standing = Standing::UnlessUnhealthy;
        let service = Dependency::new(DepKind::Service, "Service shop/registry", "named in events")
            .unhealthy("has no ready endpoints", None);
        assert!(decide(&neighbourhood(service), &pull, &target).is_some());
    }

    #[test]
    fn a_prediction_for_a_container_already_killed_asks_whether_its_node_took_the_memory() {
        let target = Target::new("StatefulSet", "ledger", Some("shop".into()));
        let short = {
            let mut n =
                Dependency::new(DepKind::Node, "Node worker-1", "runs ledger-0 (1 failing)")
                    .unhealthy("is MemoryPressure", None);
            n.on_node = Some(OnNode {
                node: "worker-1".into(),
                pods: 1,
                failing: 1,
                at_fault: true,
                short_of_memory: Some("node worker-1 is under MemoryPressure".into()),
            });
            n
        };
        let mut predicted = Diagnosis::new("MemoryExhaustionPredicted", "ledger nears its limit");
        predicted.rule = "memory-exhaustion-predicted";
        predicted.standing = Standing::Determined;
        // Nothing killed yet: the prediction is about the container's own use.
        assert_eq!(standing(&predicted), Standing::Determined);
        assert!(decide(&neighbourhood(short.clone()), &predicted, &target).is_none());
        // Killed already: the node short of memory itself explains the kills, as it does an
        // `oomkilled` finding (the raise's proof refuses then); an unhealthy Service does not.
        predicted.killed_for_memory = true;
        assert_eq!(standing(&predicted), Standing::UnlessUnhealthy);
        assert!(decide(&neighbourhood(short), &predicted, &target).is_some());
        let service = Dependency::new(DepKind::Service, "Service shop/ledger", "selects ledger")
            .unhealthy("has no ready endpoints", None);
        assert!(decide(&neighbourhood(service), &predicted, &target).is_none());
    }

    #[test]
    fn a_restart_for_a_moved_dependency_is_proposed_only_while_nothing_is_broken() {
        let target = Target::new("Deployment", "orders", Some("shop".into()));
        let mut wedged = Diagnosis::new("NotReady", "orders' pods run but are not ready");
        wedged.rule = "readiness";
        let now = Utc::now();
        let moved = Dependency::new(DepKind::Host, "Service shop/db", "named in orders' logs")
            .changed(Some(Change {
                what: "its endpoints changed".into(),
                at: now - chrono::Duration::minutes(2),
            }))
            .at(0);
        let n = |deps: Vec<Dependency>| {
            let mut n = Neighbourhood {
                target: "Deployment shop/orders".into(),
                onset: Some(now),
                symptoms: vec!["pod orders-1: running, not ready".into()],
                failing_pods_run: true,
                dependencies: deps,
            };
            n.rank(now);
            n
        };
        let d = decide(&n(vec![moved.clone()]), &wedged, &target).expect("the move explains");
        assert_eq!(
            d.proposal.map(|p| p.action_type),
            Some(ActionType::RestartDeployment)
        );
        // A farther dependency broken now ranks below the move, yet new pods meet it: the
        // restart's proof refuses (`restart.no-broken-dependency`), so nothing proposes it.
        let broken = Dependency::new(DepKind::Service, "Service shop/cache", "named in logs")
            .unhealthy("has no ready endpoints", None)
            .at(3);
        let n = n(vec![moved, broken]);
        assert_eq!(n.culprit().map(|c| c.kind), Some(DepKind::Host));
        let d = decide(&n, &wedged, &target).expect("still explained, for a human");
        assert!(d.proposal.is_none(), "{:?}", d.proposal);
        assert!(
            d.factors.iter().any(|f| f.contains("Service shop/cache")),
            "{:?}",
            d.factors
        );
    }

    #[test]
    fn a_drain_is_proposed_only_for_a_node_that_is_the_common_factor() {
        let target = Target::new("Deployment", "cart", Some("shop".into()));
        let mut crash = Diagnosis::new("CrashLoopBackOff", "cart crash-loops");
        crash.rule = "crashloop";
        let on = |failing, at_fault| OnNode {
            node: "worker-2".into(),
            pods: 2,
            failing,
            at_fault,
            short_of_memory: None,
        };
        // A node that reported trouble where one pod fails: a human decides about the node.
        let mut reported = Dependency::new(
            DepKind::Node,
            "Node worker-2",
            "runs 2 of the pods (1 failing)",
        )
        .unhealthy("reported KernelOops: BUG: soft lockup", None);
        reported.on_node = Some(on(1, false));
        let d = decide(&neighbourhood(reported), &crash, &target).expect("the node explains");
        assert!(d.proposal.is_none(), "{:?}", d.proposal);
        assert!(d.human.is_some_and(|h| h.contains("Node worker-2")));
        // Two pods failing there while their siblings elsewhere are ready: drain it.
        let mut factor = Dependency::new(
            DepKind::Node,
            "Node worker-2",
            "runs 2 of the pods (1 failing)",
        )
        .unhealthy(
            "is where pods fail while their siblings elsewhere are ready",
            None,
        );
        factor.on_node = Some(on(2, true));
        let d = decide(&neighbourhood(factor), &crash, &target).expect("the node explains");
        assert_eq!(
            d.proposal.map(|p| p.action_type),
            Some(ActionType::CordonDrainNode)
        );
        assert_eq!(d.target, Some(Target::new("Node", "worker-2", None)));
    }
}
