//! Set the replica count of a workload.

use super::*;
use crate::cluster::observed::{Hpa, PodMetrics, PodSpec};

/// The scale's obligations, in their declared order, judged on the workload, its pods, its
/// autoscalers and the namespace's events, read once. A claim that names no count is refused on
/// that alone; a scale-down is judged on its count only (what more pods need does not apply).
pub(in crate::prove) async fn scale(scene: &Scene, wanted: Option<i64>) -> Read<Vec<Obligation>> {
    let w = scene.target_obj().await?;
    let pods = scene.pods_of(&w).await?;
    let wanted = match replicas_named(wanted) {
        Ok(wanted) => wanted,
        Err(refused) => return Ok(vec![refused]),
    };
    let hpas = scene.autoscalers().await?;
    let set_by = findings::count_set_by(&hpas, obj::kind(&w), obj::name(&w));
    let events = scene.events(None).await?;
    let current = Workload::parse(&w).wanted();
    let declared = findings::declared_replicas(&w, &pods, &events);
    let mut out = vec![
        no_autoscaler(set_by),
        bounded(current, wanted, declared.as_ref()),
    ];
    if wanted > current {
        let extra = wanted - current;
        out.extend([
            pods_not_failing(
                &pods,
                current,
                findings::resolved::healthy_since(scene.now, Some(scene.signal.starts_at)),
            ),
            schedulable(scene, &w, &pods, extra).await?,
            quota_allows(scene, &w, extra, &ob::scale::QUOTA_ALLOWS).await?,
            short_of_replicas(scene, &w, &pods, current, declared.as_ref()).await?,
            no_broken_dependency(scene, &ob::scale::NO_BROKEN_DEPENDENCY, "scale-up").await?,
            no_change_explains(scene, &ob::scale::NO_CHANGE_EXPLAINS, "More replicas").await?,
        ]);
    }
    Ok(out)
}

/// Whether the claim names the new count (REPLICAS): the count, or the obligation failing,
/// which ends the proof. A count named is not stated as an obligation: the bound shows it.
fn replicas_named(wanted: Option<i64>) -> Result<i64, Obligation> {
    wanted.ok_or_else(|| ob::scale::REPLICAS_NAMED.fails(vec!["REPLICAS is missing".into()]))
}

/// Whether no HorizontalPodAutoscaler sets the count ([`findings::count_set_by`]): one would
/// set it back, and its bounds are what to patch instead.
fn no_autoscaler(set_by: Option<&Hpa>) -> Obligation {
    ob::scale::NO_AUTOSCALER.check(
        set_by.is_none(),
        vec![match set_by {
            Some(h) => format!(
                "HorizontalPodAutoscaler {} scales it: patch its bounds instead",
                h.name
            ),
            None => "no HorizontalPodAutoscaler targets it".to_owned(),
        }],
    )
}

/// How far one scale may go beyond the current count: double it, or five more for a small one
/// (a step a person would take to relieve load, not a new capacity plan).
const SCALE_STEP_FACTOR: i64 = 2;
const SCALE_STEP_MORE: i64 = 5;

/// Whether the new count is a bounded step from the current one: at least one, at most
/// [`SCALE_STEP_FACTOR`] times it (or [`SCALE_STEP_MORE`] more), or back to the count the
/// workload declares.
fn bounded(current: i64, wanted: i64, declared: Option<&findings::Declared>) -> Obligation {
    let bound = (current * SCALE_STEP_FACTOR)
        .max(current + SCALE_STEP_MORE)
        .max(declared.map_or(0, |d| d.count));
    ob::scale::BOUNDED.check(
        wanted >= 1 && wanted <= bound,
        vec![format!(
            "replicas {current} → {wanted}{}",
            declared
                .map(|d| format!("; {}", d.evidence))
                .unwrap_or_default()
        )],
    )
}

/// Whether the workload's pods do not fail, from their state since the look-back "healthy
/// again" judges on ([`findings::more_would_help`], which the scale-back rule asks too): a pod
/// that waits for a node is no failure of what it runs (the schedulable obligation judges it),
/// and a workload scaled to zero has no pod to fail.
fn pods_not_failing(pods: &[Pod], current: i64, since: DateTime<Utc>) -> Obligation {
    let judged = findings::more_would_help(pods, since);
    let held = judged.is_ok() || current == 0 && pods.is_empty();
    ob::scale::PODS_NOT_FAILING.check(
        held,
        judged
            .err()
            .unwrap_or_else(|| vec![format!("{} pod(s), none failing", pods.len())]),
    )
}

/// Whether `extra` new pods can be scheduled ([`room_for`]).
async fn schedulable(scene: &Scene, w: &Value, pods: &[Pod], extra: i64) -> Read<Obligation> {
    let (room, ev) = room_for(scene, w, pods, extra).await?;
    Ok(ob::scale::SCHEDULABLE.check(room, ev))
}

/// Whether `extra` new pods of workload `w` can be placed ([`findings::room_for_more`]), from
/// its pods, the nodes and, when its pods bind host ports or keep apart by a required
/// anti-affinity, every pod. A scale-up and a higher
/// autoscaler maximum both ask it (`scale.schedulable`, `hpa.room-to-schedule`), and the rules
/// before they propose either.
pub(in crate::prove) async fn room_for(
    scene: &Scene,
    w: &Value,
    pods: &[Pod],
    extra: i64,
) -> Read<(bool, Vec<String>)> {
    let nodes = scene.nodes().await?;
    let template = PodSpec::of_template(w);
    let everywhere: Vec<Pod> =
        if template.host_ports.is_empty() && template.anti_affinity.is_empty() {
            vec![]
        } else {
            let all = scene.list("Pod", None, &Default::default()).await?;
            all.iter().map(|p| Pod::at(p, scene.now)).collect()
        };
    Ok(findings::room_for_more(
        &template,
        scene.ns().unwrap_or_default(),
        pods,
        &nodes,
        &everywhere,
        extra,
    ))
}

/// CPU use of the ready pods against what they request, from the metrics API (`None`: not
/// served or nothing measured): (used, requested), in millicores.
async fn cpu_load(scene: &Scene, w: &Value, pods: &[Pod]) -> Read<Option<(u128, u128)>> {
    let metrics = match scene.list_optional("PodMetrics", scene.ns()).await {
        Ok(m) => m,
        Err(e) if e.is_unreachable() => return Err(e),
        Err(_) => return Ok(None),
    };
    let ready: Vec<&Pod> = pods.iter().filter(|p| p.ready).collect();
    let used: Vec<u128> = metrics
        .iter()
        .map(PodMetrics::parse)
        .filter(|m| ready.iter().any(|p| p.name == m.name))
        .map(|m| m.total("cpu"))
        .collect();
    let spec = PodSpec::of_template(w);
    let per_pod = match spec.total("requests", "cpu") {
        0 => spec.total("limits", "cpu"),
        r => r,
    };
    if used.is_empty() || per_pod == 0 {
        return Ok(None);
    }
    Ok(Some((used.iter().sum(), per_pod * used.len() as u128)))
}

/// Whether the workload runs short of replicas: none at all, fewer than its applied
/// configuration declares, or its ready pods busy near what they request. More replicas help
/// only a workload short of them; a failure of what the pods run or depend on is not one.
async fn short_of_replicas(
    scene: &Scene,
    w: &Value,
    pods: &[Pod],
    current: i64,
    declared: Option<&findings::Declared>,
) -> Read<Obligation> {
    let obligation = &ob::scale::SHORT_OF_REPLICAS;
    if current == 0 {
        return Ok(obligation.holds(vec![format!(
            "{} runs no replica: nothing serves",
            obj::name(w)
        )]));
    }
    if let Some(d) = declared.filter(|d| d.count > current) {
        return Ok(obligation.holds(vec![format!("{}; it runs {current}", d.evidence)]));
    }
    let load = cpu_load(scene, w, pods).await?;
    if let Some((used, requested)) = load
        && findings::near_limit(used, requested)
    {
        return Ok(obligation.holds(vec![format!(
            "its ready pods use {used}m of the {requested}m CPU they request (≥ {}%)",
            findings::NEAR_LIMIT_PERCENT
        )]));
    }
    let ready = pods.iter().filter(|p| p.ready).count();
    Ok(obligation.fails(vec![format!(
        "{ready} of {current} replicas ready{}; {}: nothing shows it short of replicas",
        declared
            .map(|d| format!(", {} declared", d.count))
            .unwrap_or_default(),
        match load {
            Some((used, requested)) => {
                format!("its ready pods use {used}m of the {requested}m CPU they request")
            }
            None => "no CPU use measured (metrics API)".into(),
        }
    )]))
}

/// Whether the namespace's quota has room for `extra` more pods of the workload
/// ([`findings::quota_needs`]).
pub(in crate::prove) async fn quota_allows(
    scene: &Scene,
    w: &Value,
    extra: i64,
    obligation: &ObligationSpec,
) -> Read<Obligation> {
    let quotas = scene.list_optional("ResourceQuota", scene.ns()).await?;
    let needs = findings::quota_needs(&PodSpec::of_template(w), extra, |r| {
        crate::cluster::observed::tightest_quota(&quotas, r)
    });
    let mut ev: Vec<String> = needs
        .iter()
        .map(|n| {
            format!(
                "ResourceQuota {}: {} {} used of {}, {} more needed{}",
                n.room.name,
                n.resource,
                n.room.used,
                n.room.hard,
                n.need,
                if n.fits() { "" } else { " — no room" }
            )
        })
        .collect();
    if ev.is_empty() {
        ev.push("no ResourceQuota limits the namespace".into());
    }
    Ok(obligation.check(needs.iter().all(findings::QuotaNeed::fits), ev))
}
