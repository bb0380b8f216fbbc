//! What the proofs will ask of a proposal, asked before it is made: whichever path proposed it
//! (a rule, the dependency graph's culprit), a proposal on the incident's own workload or node
//! meets the same findings its action's proof holds it to. Where one refuses, a human gets the
//! finding instead of a proposal the proof then refuses.
//!
//! Only what the evidence holds is asked; what it did not read (a node list for a drain of a
//! node the graph found) is left to the proof, which reads it.

use super::*;
use crate::domain::Neighbourhood;
use crate::investigate::offline::evidence::WorkloadState;

/// Ask the proposal in `d`, if any, what its action's proof will ask.
pub(in crate::investigate::offline) fn vet(d: &mut Diagnosis, f: &Facts) {
    let Some(p) = &d.proposal else {
        return;
    };
    let on_target = d.target.is_some() && d.target == f.target;
    let refusal = match &p.action_type {
        ActionType::RestartDeployment if on_target => restart(f),
        ActionType::CordonDrainNode => drain(
            f,
            d.target
                .as_ref()
                .filter(|t| t.kind == "Node")
                .map(|t| t.name.as_str()),
        ),
        ActionType::DeletePod if on_target => {
            let ActionParams::DeletePod { pod: Some(name) } =
                ActionParams::read(&p.action_type, &p.parameters)
            else {
                return;
            };
            d.proposal = None;
            super::replace_pod(d, f, &name);
            return;
        }
        _ => None,
    };
    if let Some(why) = refusal {
        d.proposal = None;
        d.human = Some(why);
    }
}

/// Ask a restart, a scale-up or a raised limit on the incident's own workload what their proofs
/// ask of the neighbourhood `n` (what the workload depends on and what changed before it
/// failed), whichever rule proposed it: nothing it depends on is broken now (a restart's and a
/// scale-up's `no-broken-dependency`: new pods meet the same broken dependency), and no change
/// to what it reads explains the failures better ([`findings::change_explains`], the
/// `no-change-explains` of all three: the action keeps that change).
pub(in crate::investigate::offline) fn vet_neighbourhood(
    d: &mut Diagnosis,
    n: &Neighbourhood,
    f: &Facts,
) {
    let (Some(asks), Some(w)) = (asks_neighbourhood(d, f), &f.workload) else {
        return;
    };
    let refusal = if asks.broken
        && let Some(dep) = n.broken().next()
    {
        Some(format!(
            "{} depends on {} ({}), which is broken: {}; {} meets it too: repair it first",
            f.target_text(),
            dep.object,
            dep.relation,
            dep.unhealthy.as_deref().unwrap_or_default(),
            asks.action
        ))
    } else {
        let pods: Vec<observed::Pod> = f.pods.iter().map(|p| p.observed.clone()).collect();
        let template = w.raw.pointer("/spec/template").unwrap_or(&Value::Null);
        findings::change_explains(n, template, &pods, observed::created(&w.raw)).map(|found| {
            format!(
                "{}; {} leaves {} as it is: the change, not the workload, is what to look at",
                found.evidence.join("; "),
                asks.action,
                found.object
            )
        })
    };
    if let Some(why) = refusal {
        d.proposal = None;
        d.human = Some(why);
    }
}

/// What [`vet_neighbourhood`] asks of a proposal: `None` for an action whose proof does not
/// read the neighbourhood (a rollback, a drain, a scale-down, ...).
pub(in crate::investigate::offline) struct NeighbourhoodAsks {
    /// Whether a broken dependency refuses it (new pods would meet it).
    broken: bool,
    /// The action in a phrase for the reason.
    action: &'static str,
}

/// Whether proposal `p` on workload `w` is one the neighbourhood is asked of, and how
/// (the proofs' `restart`, `scale` when it adds replicas, `memory`/`cpu` raises).
fn asks_of_neighbourhood(p: &Proposal, w: &WorkloadState) -> Option<NeighbourhoodAsks> {
    let (broken, action) = match ActionParams::read(&p.action_type, &p.parameters) {
        ActionParams::Restart => (true, "a restart"),
        ActionParams::Scale { replicas: Some(r) } if r > w.wanted() => (true, "more replicas"),
        ActionParams::Limit {
            resource: LimitResource::Memory,
            ..
        } => (false, "a higher memory limit"),
        ActionParams::Limit {
            resource: LimitResource::Cpu,
            ..
        } => (false, "a higher CPU limit"),
        _ => return None,
    };
    Some(NeighbourhoodAsks { broken, action })
}

/// What `d`'s proposal on the incident's own workload asks of the neighbourhood
/// ([`vet_neighbourhood`]), if anything: the investigation reads it for such a proposal even
/// where the rule that made it needs no more evidence.
pub(in crate::investigate::offline) fn asks_neighbourhood(
    d: &Diagnosis,
    f: &Facts,
) -> Option<NeighbourhoodAsks> {
    match (&d.proposal, &f.workload) {
        (Some(p), Some(w)) if d.target.is_some() && d.target == f.target => {
            asks_of_neighbourhood(p, w)
        }
        _ => None,
    }
}

/// Whether `action_type` with `parameters` on `target` meets what [`vet`] asks: `Err` with the
/// finding that refuses it. For a proposal no rule made (a learned pattern's).
pub(in crate::investigate::offline) fn vetted(
    action_type: &ActionType,
    parameters: &serde_json::Map<String, Value>,
    f: &Facts,
    target: &Target,
) -> Result<(), String> {
    let mut d = Diagnosis::new("Learned", String::new());
    d.target = Some(target.clone());
    d.proposal = Some(Proposal {
        action_type: action_type.clone(),
        parameters: parameters.clone(),
        git_change: String::new(),
        workflow_id: None,
    });
    vet(&mut d, f);
    match (d.proposal, d.human) {
        (Some(_), _) => Ok(()),
        (None, Some(why)) => Err(why),
        (None, None) => Err("its parameters do not name what to act on".into()),
    }
}

/// Why a rolling restart of the workload would not help or would take it down, if it would:
/// what its proof asks of the strategy and the ready pods
/// ([`findings::restart_keeps_ready`]), a rollout under way, and a replica count short of the
/// one declared ([`findings::short_of_declared`]).
fn restart(f: &Facts) -> Option<String> {
    let w = f.workload.as_ref()?;
    let pods: Vec<observed::Pod> = f.pods.iter().map(|p| p.observed.clone()).collect();
    if let Err(why) = findings::restart_keeps_ready(&w.raw, &pods) {
        return Some(format!(
            "a rolling restart of {} is no safe remedy: {why}",
            f.target_text()
        ));
    }
    if let Some(why) = w.rollout_in_progress() {
        return Some(format!(
            "a rollout of {} is under way ({why}): it replaces the pods itself; look again once it has finished",
            f.target_text()
        ));
    }
    let replicas = w.wanted();
    let declared =
        findings::short_of_declared(f.declared.as_ref(), replicas, f.count_set_by.as_ref())?;
    Some(format!(
        "{} runs {replicas} replica(s) where {}: new pods would carry the same load; scaling back is the remedy, not a restart",
        f.target_text(),
        declared.evidence
    ))
}

/// Why draining node `node` would not help, if the evidence shows it, as the drain's proof
/// asks: several nodes not ready at once are the cluster's trouble ([`observed::cluster_wide`]);
/// no other node ready and schedulable ([`findings::takes`]) leaves its pods nowhere to go
/// (asked only where the evidence read the node list the node is in), and neither does room
/// no single other node has for one of them (`drain.capacity-elsewhere`'s
/// [`findings::placement`]).
fn drain(f: &Facts, node: Option<&str>) -> Option<String> {
    let total = f.nodes.len();
    let not_ready = f.not_ready_nodes();
    if observed::cluster_wide(not_ready.len(), total) {
        return Some(format!(
            "{} of {total} nodes are not ready ({}): a cluster-wide problem (network, control plane, a bad node image); draining one would not help",
            not_ready.len(),
            listed(&not_ready),
        ));
    }
    let node = node.filter(|n| f.nodes.iter().any(|x| x.name == *n))?;
    let others = f
        .nodes
        .iter()
        .filter(|n| n.name != node && findings::takes(&observed::PodSpec::default(), &n.observed))
        .count();
    if others == 0 {
        return Some(format!(
            "no other node of {total} is ready and schedulable: draining node {node} leaves its pods nowhere to run; a human adds capacity or repairs the node"
        ));
    }
    match f.drain_nowhere.get(node) {
        Some(nowhere) if nowhere.is_empty() => None,
        Some(nowhere) => Some(format!(
            "draining node {node} would leave pods it runs nowhere to go ({}): a human adds capacity or repairs the node",
            nowhere.join("; ")
        )),
        // Not judged (fail closed): what runs there may fit nowhere else.
        None => Some(format!(
            "the pods on node {node} were not read: whether a drain leaves them somewhere to go is unknown; a human decides"
        )),
    }
}
