//! Obligations of the actions on a workload's pods: roll back (Deployment, StatefulSet),
//! restart, scale, delete one pod.

use std::collections::BTreeSet;

use chrono::{DateTime, Duration, Utc};
use serde_json::{Map, Value};

use super::findings;
use super::scene::{Read, Scene, hhmm, pod_resource};
use super::{check, fails, holds, number, text};
use crate::cluster::ListQuery;
use crate::cluster::obj::{self, array, at, i64_at, str_at};
use crate::cluster::observed::{
    Event, KeptState, NEVER_READY_ALLOWANCE, Pod, SERVED_MIN_SECONDS, ago, created, last_written,
    progress_deadline_exceeded, time,
};
use crate::domain::Obligation;

/// The images of a pod template, `a=img, b=img`.
pub(super) fn images(template: &Value) -> String {
    array(template, &["spec", "containers"])
        .iter()
        .map(|c| str_at(c, &["image"]).unwrap_or("?").to_owned())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The pod template without what changes on every rollout but means nothing (the template
/// hash, restart stamps), for comparing two revisions.
fn material(template: &Value) -> Value {
    let mut t = template.clone();
    if let Some(meta) = t.get_mut("metadata").and_then(Value::as_object_mut) {
        if let Some(l) = meta.get_mut("labels").and_then(Value::as_object_mut) {
            l.remove("pod-template-hash");
            l.remove("controller-revision-hash");
        }
        meta.remove("creationTimestamp");
    }
    t
}

/// Whether two templates differ in what the containers run (not only in annotations).
fn differs_in_containers(a: &Value, b: &Value) -> bool {
    at(&material(a), &["spec"]) != at(&material(b), &["spec"])
}

/// The ConfigMaps a pod template refers to (env, envFrom, volumes, projected volumes).
pub fn configmaps(template: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let spec = at(template, &["spec"]).cloned().unwrap_or(Value::Null);
    for key in ["containers", "initContainers"] {
        for c in array(&spec, &[key]) {
            for e in array(c, &["envFrom"]) {
                if let Some(n) = str_at(e, &["configMapRef", "name"]) {
                    out.insert(n.to_owned());
                }
            }
            for e in array(c, &["env"]) {
                if let Some(n) = str_at(e, &["valueFrom", "configMapKeyRef", "name"]) {
                    out.insert(n.to_owned());
                }
            }
        }
    }
    for v in array(&spec, &["volumes"]) {
        if let Some(n) = str_at(v, &["configMap", "name"]) {
            out.insert(n.to_owned());
        }
        for s in array(v, &["projected", "sources"]) {
            if let Some(n) = str_at(s, &["configMap", "name"]) {
                out.insert(n.to_owned());
            }
        }
    }
    out
}

/// The Secrets a pod template refers to (names only: kubemedic never reads them).
pub fn secrets(template: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let spec = at(template, &["spec"]).cloned().unwrap_or(Value::Null);
    for key in ["containers", "initContainers"] {
        for c in array(&spec, &[key]) {
            for e in array(c, &["envFrom"]) {
                if let Some(n) = str_at(e, &["secretRef", "name"]) {
                    out.insert(n.to_owned());
                }
            }
            for e in array(c, &["env"]) {
                if let Some(n) = str_at(e, &["valueFrom", "secretKeyRef", "name"]) {
                    out.insert(n.to_owned());
                }
            }
        }
    }
    for v in array(&spec, &["volumes"]) {
        if let Some(n) = str_at(v, &["secret", "secretName"]) {
            out.insert(n.to_owned());
        }
    }
    out
}

/// The first warning recorded about a pod, if any.
fn first_warning<'a>(events: &'a [Event], pod: &str) -> Option<&'a Event> {
    events
        .iter()
        .filter(|e| e.warning && e.kind == "Pod" && e.name == pod)
        .min_by_key(|e| e.first)
}

/// When a failing pod began to fail: its first warning (never before the pod existed), else
/// its creation.
fn onset(pod: &Pod, events: &[Event]) -> Option<DateTime<Utc>> {
    let warned = first_warning(events, &pod.name).and_then(|e| e.first);
    match (warned, pod.created) {
        (Some(w), Some(c)) => Some(w.max(c)),
        (w, c) => w.or(c),
    }
}

/// Why a workload's rollout is not finished, if it is not.
pub(super) fn rollout_in_progress(w: &Value) -> Option<String> {
    let kind = obj::kind(w);
    let generation = i64_at(w, &["metadata", "generation"]).unwrap_or(0);
    let observed = i64_at(w, &["status", "observedGeneration"]).unwrap_or(generation);
    if observed < generation {
        return Some(format!(
            "generation {generation} not yet observed by the controller (observed {observed})"
        ));
    }
    if at(w, &["spec", "paused"]).and_then(Value::as_bool) == Some(true) {
        return Some("the rollout is paused".into());
    }
    match kind {
        "StatefulSet" => {
            let cur = str_at(w, &["status", "currentRevision"]);
            let upd = str_at(w, &["status", "updateRevision"]);
            (cur.is_some() && upd.is_some() && cur != upd).then(|| {
                format!(
                    "update from revision {} to {} under way ({} of {} pods updated)",
                    cur.unwrap_or_default(),
                    upd.unwrap_or_default(),
                    i64_at(w, &["status", "updatedReplicas"]).unwrap_or(0),
                    i64_at(w, &["spec", "replicas"]).unwrap_or(1)
                )
            })
        }
        "DaemonSet" => {
            let want = i64_at(w, &["status", "desiredNumberScheduled"]).unwrap_or(0);
            let updated = i64_at(w, &["status", "updatedNumberScheduled"]).unwrap_or(want);
            (updated < want).then(|| format!("{updated} of {want} pods updated"))
        }
        _ => {
            let want = i64_at(w, &["spec", "replicas"]).unwrap_or(1);
            let updated = i64_at(w, &["status", "updatedReplicas"]).unwrap_or(want);
            let total = i64_at(w, &["status", "replicas"]).unwrap_or(want);
            (updated < want || total > want)
                .then(|| format!("{updated} of {want} pods updated, {total} pods in all"))
        }
    }
}

/// How many of `replicas` a rolling replacement may take down at once (`maxUnavailable`,
/// rounded down like the controller), and the strategy's name.
fn max_unavailable(w: &Value) -> (i64, String) {
    let replicas = i64_at(w, &["spec", "replicas"]).unwrap_or(1);
    let resolve = |v: Option<&Value>, default: i64| match v {
        Some(Value::Number(n)) => n.as_i64().unwrap_or(default),
        Some(Value::String(s)) if s.ends_with('%') => s
            .trim_end_matches('%')
            .parse::<i64>()
            .map(|p| replicas * p / 100)
            .unwrap_or(default),
        _ => default,
    };
    match obj::kind(w) {
        "StatefulSet" => {
            let ty = str_at(w, &["spec", "updateStrategy", "type"]).unwrap_or("RollingUpdate");
            (
                resolve(
                    at(
                        w,
                        &["spec", "updateStrategy", "rollingUpdate", "maxUnavailable"],
                    ),
                    1,
                ),
                ty.to_owned(),
            )
        }
        "DaemonSet" => (
            resolve(
                at(
                    w,
                    &["spec", "updateStrategy", "rollingUpdate", "maxUnavailable"],
                ),
                1,
            ),
            str_at(w, &["spec", "updateStrategy", "type"])
                .unwrap_or("RollingUpdate")
                .to_owned(),
        ),
        _ => {
            let ty = str_at(w, &["spec", "strategy", "type"]).unwrap_or("RollingUpdate");
            if ty == "Recreate" {
                return (replicas, ty.to_owned());
            }
            let default = replicas * 25 / 100;
            (
                resolve(
                    at(w, &["spec", "strategy", "rollingUpdate", "maxUnavailable"]),
                    default,
                ),
                ty.to_owned(),
            )
        }
    }
}

// --- Roll back -----------------------------------------------------------------------------

/// One revision of a workload, whichever controller keeps it.
struct Revision {
    number: i64,
    /// ReplicaSet or ControllerRevision name.
    name: String,
    /// What its pods carry (`pod-template-hash` or `controller-revision-hash`).
    hash: String,
    template: Value,
    created: Option<DateTime<Utc>>,
}

fn revisions_of_deployment(rss: &[(i64, Value)]) -> Vec<Revision> {
    rss.iter()
        .map(|(n, rs)| Revision {
            number: *n,
            name: obj::name(rs).to_owned(),
            hash: obj::label(rs, "pod-template-hash")
                .unwrap_or_default()
                .to_owned(),
            template: at(rs, &["spec", "template"])
                .cloned()
                .unwrap_or(Value::Null),
            created: created(rs),
        })
        .collect()
}

fn revisions_of_statefulset(crs: &[(i64, Value)]) -> Vec<Revision> {
    crs.iter()
        .map(|(n, cr)| Revision {
            number: *n,
            name: obj::name(cr).to_owned(),
            hash: obj::name(cr).to_owned(),
            template: at(cr, &["data", "spec", "template"])
                .cloned()
                .unwrap_or(Value::Null),
            created: created(cr),
        })
        .collect()
}

/// The Services of the target's namespace, without ready endpoints, whose selector matches the
/// pod labels of revision `before` but not those of revision `now`: one line each.
async fn orphaned_services(scene: &Scene, now: &Value, before: &Value) -> Read<Vec<String>> {
    use super::graph::adapters::{service_selector, template_selected};
    let mut out = Vec::new();
    for svc in scene
        .list("Service", scene.ns(), &ListQuery::default())
        .await?
    {
        let selector = service_selector(&svc);
        if !template_selected(before, &selector) || template_selected(now, &selector) {
            continue;
        }
        let name = obj::name(&svc);
        let ready: usize = match scene.get("Endpoints", scene.ns(), name).await {
            Ok(e) => array(&e, &["subsets"])
                .iter()
                .map(|s| array(s, &["addresses"]).len())
                .sum(),
            Err(e) if e.is_unreachable() => return Err(e),
            Err(_) => 0,
        };
        if ready > 0 {
            continue;
        }
        let selector: Vec<String> = selector.iter().map(|(k, v)| format!("{k}={v}")).collect();
        out.push(format!(
            "Service {name} selects {}, which the returned-to revision's pods carry and the current one's do not; it has no ready endpoints",
            selector.join(",")
        ));
    }
    Ok(out)
}

pub(super) async fn rollback(scene: &Scene, params: &Map<String, Value>) -> Read<Vec<Obligation>> {
    let w = scene.target_obj().await?;
    let stateful = obj::kind(&w) == "StatefulSet";
    let (revisions, current_number) = if stateful {
        let crs = scene.controller_revisions(&w).await?;
        let upd = str_at(&w, &["status", "updateRevision"]).unwrap_or_default();
        let cur = crs
            .iter()
            .find(|(_, cr)| obj::name(cr) == upd)
            .map(|(n, _)| *n)
            .or_else(|| crs.last().map(|(n, _)| *n))
            .unwrap_or(0);
        (revisions_of_statefulset(&crs), cur)
    } else {
        let rss = scene.replicasets(&w).await?;
        let cur = obj::annotation(&w, "deployment.kubernetes.io/revision")
            .and_then(|r| r.parse().ok())
            .or_else(|| rss.last().map(|(n, _)| *n))
            .unwrap_or(0);
        (revisions_of_deployment(&rss), cur)
    };
    let pods = scene.pods_of(&w).await?;
    let events = scene.events(None).await?;
    let pod_hash = |p: &Pod| {
        if stateful {
            p.revision_hash.clone()
        } else {
            p.template_hash.clone()
        }
    };
    let describe = |r: &Revision| format!("revision {} ({})", r.number, images(&r.template));
    let mut out = Vec::new();

    // 1. The revision to return to is named, and exists.
    let wanted = number(params, "TO_REVISION");
    let current = revisions.iter().find(|r| r.number == current_number);
    let target = wanted.and_then(|n| revisions.iter().find(|r| r.number == n));
    let named_id = "rollback.revision-named";
    let named_statement = "The revision to return to is named in the parameters (TO_REVISION), exists, and is not the current one";
    let Some(target) = target.filter(|t| t.number != current_number) else {
        let known: Vec<String> = revisions.iter().map(&describe).collect();
        out.push(fails(
            named_id,
            named_statement,
            vec![match wanted {
                None => "TO_REVISION is not given: a rollback never goes to \"the previous revision\" blindly".into(),
                Some(n) if n == current_number => format!("revision {n} is the current revision"),
                Some(n) => format!("revision {n} does not exist"),
            },
            format!("revisions kept: {}", if known.is_empty() { "none".into() } else { known.join("; ") })],
        ));
        return Ok(out);
    };
    out.push(holds(
        named_id,
        named_statement,
        vec![format!(
            "{} is kept as {} {}; the current one is {}",
            describe(target),
            if stateful {
                "ControllerRevision"
            } else {
                "ReplicaSet"
            },
            target.name,
            current
                .map(&describe)
                .unwrap_or_else(|| format!("revision {current_number}"))
        )],
    ));

    // 2. The revision returned to served healthy and is not failing itself.
    let its_pods: Vec<&Pod> = pods
        .iter()
        .filter(|p| pod_hash(p).as_deref() == Some(target.hash.as_str()))
        .collect();
    let failing: Vec<&&Pod> = its_pods.iter().filter(|p| p.broken().is_some()).collect();
    let ready = its_pods.iter().filter(|p| p.ready).count();
    let recorded_failures = findings::revision_failures(&events, &target.name, &target.hash);
    let next_created = revisions
        .iter()
        .filter(|r| r.number > target.number)
        .filter_map(|r| r.created)
        .min();
    let healthy_id = "rollback.target-revision-healthy";
    let healthy_statement = "The revision returned to served healthy and is not failing itself";
    if let Some(p) = failing.first() {
        out.push(fails(
            healthy_id,
            healthy_statement,
            vec![format!(
                "{} fails too: pod {} {}",
                describe(target),
                p.name,
                p.broken().map(|f| f.line).unwrap_or_default()
            )],
        ));
    } else if ready > 0 {
        out.push(holds(
            healthy_id,
            healthy_statement,
            vec![format!("{} has {ready} ready pod(s) now", describe(target))],
        ));
    } else if let Some(e) = recorded_failures.first() {
        out.push(fails(
            healthy_id,
            healthy_statement,
            vec![format!(
                "{} has no pods left, and its pods failed: {}",
                describe(target),
                e.line()
            )],
        ));
    } else {
        let served = match (target.created, next_created) {
            (Some(a), Some(b)) => Some(b - a),
            _ => None,
        };
        let ok = served.is_some_and(|s| s >= Duration::seconds(SERVED_MIN_SECONDS));
        out.push(check(
            healthy_id,
            healthy_statement,
            ok,
            vec![format!(
                "{} has no pods left; it served {} before the next revision appeared, and nothing records a failure of it{}",
                describe(target),
                served.map_or("for an unknown time".into(), |s| format!("for {}", ago(s))),
                if ok { String::new() } else { format!(" (at least {} needed to count as proven)", ago(Duration::seconds(SERVED_MIN_SECONDS))) }
            )],
        ));
    }

    // 3. The failures began after the current revision appeared. A rollout can also break
    // what depends on the pods while they run: a Service whose selector the revision's pod
    // labels no longer match has had no endpoints since the new pods replaced the old.
    let cur_hash = current.map(|c| c.hash.clone()).unwrap_or_default();
    // A pod of the current revision that runs but never became ready fails too, once the
    // rollout's own deadline has passed (the controller says Progressing=False) or it has been
    // unready longer than any start may take: a readiness probe that never passes.
    let stalled = progress_deadline_exceeded(&scene.target_obj().await?);
    let never_ready = |p: &Pod| {
        !cur_hash.is_empty()
            && pod_hash(p).as_deref() == Some(cur_hash.as_str())
            && p.never_ready
                .is_some_and(|d| stalled.is_some() || d > Duration::seconds(NEVER_READY_ALLOWANCE))
    };
    let failing_now: Vec<&Pod> = pods
        .iter()
        .filter(|p| p.broken().is_some() || never_ready(p))
        .collect();
    let orphaned = match current {
        Some(cur) if !stateful => orphaned_services(scene, &cur.template, &target.template).await?,
        _ => vec![],
    };
    let after_id = "rollback.failures-began-after-revision";
    let after_statement = "The failures began after the current revision appeared";
    match (failing_now.is_empty(), current) {
        (true, Some(cur)) if !orphaned.is_empty() => out.push(holds(
            after_id,
            after_statement,
            orphaned
                .iter()
                .map(|s| {
                    format!(
                        "no pod fails, but {s}: it lost its endpoints when {} (at {}) replaced revision {}",
                        describe(cur),
                        cur.created
                            .map(hhmm)
                            .unwrap_or_else(|| "an unknown time".into()),
                        target.number
                    )
                })
                .collect(),
        )),
        (true, _) => out.push(fails(
            after_id,
            after_statement,
            vec!["no pod of the workload fails now: nothing for a rollback to fix".into()],
        )),
        (false, Some(cur)) => {
            let first = failing_now
                .iter()
                .filter_map(|p| onset(p, &events).map(|t| (t, *p)))
                .min_by_key(|(t, _)| *t);
            let older_failing: Vec<&&Pod> = failing_now
                .iter()
                .filter(|p| pod_hash(p).as_deref() != Some(cur_hash.as_str()))
                .collect();
            let ok = older_failing.is_empty()
                && match (first, cur.created) {
                    (Some((t, _)), Some(c)) => t >= c - Duration::seconds(5),
                    _ => false,
                };
            let mut ev = vec![format!(
                "{} appeared at {}",
                describe(cur),
                cur.created
                    .map(hhmm)
                    .unwrap_or_else(|| "an unknown time".into())
            )];
            if let Some((t, p)) = first {
                ev.push(format!(
                    "the first failure, of pod {}, at {}",
                    p.name,
                    hhmm(t)
                ));
            }
            for p in older_failing.iter().take(2) {
                ev.push(format!(
                    "pod {} of an older revision fails too: {}",
                    p.name,
                    p.broken().map(|f| f.line).unwrap_or_default()
                ));
            }
            out.push(check(after_id, after_statement, ok, ev));
        }
        (false, None) => out.push(fails(
            after_id,
            after_statement,
            vec![format!("the current revision {current_number} is not kept")],
        )),
    }

    // 4. What changed is inside the pod template (a ConfigMap rewritten in place is not
    // undone by a rollout undo).
    let change_id = "rollback.change-in-pod-template";
    let change_statement = "What changed is inside the pod template, which a rollback restores";
    if let Some(cur) = current {
        let mut ev = Vec::new();
        let material_change = differs_in_containers(&cur.template, &target.template);
        if material_change {
            ev.push(format!(
                "the pod specs differ: {} → {}",
                images(&cur.template),
                images(&target.template)
            ));
        } else {
            ev.push(format!(
                "revisions {} and {} run the same pod spec (only metadata differs)",
                cur.number, target.number
            ));
        }
        let replaced_at = next_created;
        let mut rewritten = Vec::new();
        for name in configmaps(&cur.template) {
            match scene.get("ConfigMap", scene.ns(), &name).await {
                Ok(cm) => {
                    if let (Some(w), Some(r)) = (last_written(&cm), replaced_at)
                        && w >= r - Duration::minutes(5)
                    {
                        rewritten.push(format!(
                            "ConfigMap {name} was written at {}, after revision {} last ran on it: a rollout undo keeps its new content",
                            hhmm(w),
                            target.number
                        ));
                    }
                }
                Err(e) if e.is_unreachable() => return Err(e),
                Err(e) => ev.push(format!("ConfigMap {name}: {}", e.message)),
            }
        }
        let secrets = secrets(&cur.template);
        if !secrets.is_empty() {
            ev.push(format!(
                "Secrets referenced: {} (kubemedic does not read Secrets: an in-place change to them is not ruled out)",
                secrets.into_iter().collect::<Vec<_>>().join(", ")
            ));
        }
        for s in &orphaned {
            ev.push(format!("the pod labels differ where it matters: {s}"));
        }
        let ok = (material_change || !orphaned.is_empty()) && rewritten.is_empty();
        ev.extend(rewritten);
        out.push(check(change_id, change_statement, ok, ev));
    }

    // 5. Nobody else's rollout or rollback is in progress.
    let others_id = "rollback.no-rollout-by-others";
    let others_statement = "No rollout or rollback started by someone else is in progress";
    let starting: Vec<&Pod> = pods
        .iter()
        .filter(|p| pod_hash(p).as_deref() == Some(cur_hash.as_str()))
        .filter(|p| !p.ready && p.broken().is_none() && !never_ready(p))
        .collect();
    let current_fails = pods.iter().any(|p| {
        pod_hash(p).as_deref() == Some(cur_hash.as_str())
            && (p.broken().is_some() || never_ready(p))
    });
    let paused = at(&w, &["spec", "paused"]).and_then(Value::as_bool) == Some(true);
    if paused {
        out.push(fails(
            others_id,
            others_statement,
            vec!["the rollout is paused".into()],
        ));
    } else if !current_fails && !starting.is_empty() {
        out.push(fails(
            others_id,
            others_statement,
            vec![format!(
                "revision {current_number} is rolling out now and its pods are starting ({}), not failing",
                starting.iter().map(|p| p.name.as_str()).take(3).collect::<Vec<_>>().join(", ")
            )],
        ));
    } else if !current_fails && !failing_now.is_empty() {
        out.push(fails(
            others_id,
            others_statement,
            vec![format!(
                "the failing pods are not of the current revision {current_number}: the workload has moved on since"
            )],
        ));
    } else {
        out.push(holds(
            others_id,
            others_statement,
            vec![format!(
                "the current revision {current_number} is the one failing"
            )],
        ));
    }

    // 6. The current revision's pods are not kept from starting by what an older revision's
    // pods hold. A ReadWriteOnce volume still attached to an old pod on another node blocks
    // every new pod whatever the revision changed: the rollout strategy is what fails, and a
    // rollback only abandons the attempt (the next rollout stops the same way).
    let held_id = "rollback.not-blocked-by-older-pods";
    let held_statement = "The current revision's pods are not kept from starting by a volume an older revision's pod holds (a rollout blocked that way fails whatever it changes)";
    let mut blocked = Vec::new();
    for p in pods
        .iter()
        .filter(|p| pod_hash(p).as_deref() == Some(cur_hash.as_str()) && !p.ready)
    {
        for e in events
            .iter()
            .filter(|e| e.warning && e.kind == "Pod" && e.name == p.name)
        {
            let Some((volume, holders)) = attach_conflict(e) else {
                continue;
            };
            let older: Vec<&Pod> = holders
                .iter()
                .filter_map(|h| pods.iter().find(|o| &o.name == h))
                .filter(|o| pod_hash(o).as_deref() != Some(cur_hash.as_str()))
                .collect();
            let Some(holder) = older.first() else {
                continue;
            };
            let claim = claim_of_volume(scene, p, &volume).await?;
            let strategy = str_at(&w, &["spec", "strategy", "type"])
                .or_else(|| str_at(&w, &["spec", "updateStrategy", "type"]))
                .unwrap_or("RollingUpdate");
            blocked.push(format!(
                "pod {} of revision {current_number} cannot attach volume {volume}{}: it is still attached to pod {} of an older revision{}, which keeps running; with the {strategy} strategy the new pod waits for it forever — the strategy (Recreate, or maxUnavailable ≥ 1) is the fix, not a rollback",
                p.name,
                claim
                    .map(|c| format!(" (PersistentVolumeClaim {c})"))
                    .unwrap_or_default(),
                holder.name,
                holder
                    .node
                    .as_deref()
                    .map(|n| format!(" on node {n}"))
                    .unwrap_or_default(),
            ));
            break;
        }
    }
    if blocked.is_empty() {
        out.push(holds(
            held_id,
            held_statement,
            vec!["no pod of the current revision waits for a volume an older pod holds".into()],
        ));
    } else {
        out.push(fails(held_id, held_statement, blocked));
    }
    Ok(out)
}

/// A `FailedAttachVolume` Multi-Attach event: the volume, and the pods said to hold it.
fn attach_conflict(e: &Event) -> Option<(String, Vec<String>)> {
    if e.reason != "FailedAttachVolume" || !e.message.contains("Multi-Attach") {
        return None;
    }
    let volume = e.message.split('"').nth(1)?.to_owned();
    let (_, holders) = e.message.split_once("used by pod(s)")?;
    let holders = holders
        .split(',')
        .map(|h| h.trim().trim_end_matches('.').to_owned())
        .filter(|h| !h.is_empty())
        .collect();
    Some((volume, holders))
}

/// The claim of `pod` bound to the PersistentVolume `volume`, if the pod mounts one.
async fn claim_of_volume(scene: &Scene, pod: &Pod, volume: &str) -> Read<Option<String>> {
    let claims: Vec<String> = array(&pod.raw, &["spec", "volumes"])
        .iter()
        .filter_map(|v| str_at(v, &["persistentVolumeClaim", "claimName"]))
        .map(str::to_owned)
        .collect();
    for claim in claims {
        match scene.get("PersistentVolumeClaim", scene.ns(), &claim).await {
            Ok(pvc) if str_at(&pvc, &["spec", "volumeName"]) == Some(volume) => {
                return Ok(Some(claim));
            }
            Ok(_) => {}
            Err(e) if e.is_unreachable() => return Err(e),
            Err(_) => {}
        }
    }
    Ok(None)
}

// --- Restart -------------------------------------------------------------------------------

pub(super) async fn restart(scene: &Scene) -> Read<Vec<Obligation>> {
    let w = scene.target_obj().await?;
    let pods = scene.pods_of(&w).await?;
    let events = scene.events(None).await?;
    let mut out = Vec::new();

    let wedged_id = "restart.pods-run-but-wedged";
    let wedged_statement =
        "The pods run but are wedged (not crashing on start, not waiting to be scheduled)";
    let crashing: Vec<&Pod> = pods.iter().filter(|p| p.broken().is_some()).collect();
    // Pods that run but are not ready: wedged if they were ready once; a pod that has not been
    // ready since it started shows how a fresh pod of its template starts, not a wedge.
    let (never, stuck): (Vec<&Pod>, Vec<&Pod>) = pods
        .iter()
        .filter(|p| p.running_not_ready())
        .partition(|p| never_ready(p) == Some(true));
    let window = scene.now - Duration::minutes(15);
    let probe_failures: Vec<&Event> = events
        .iter()
        .filter(|e| e.warning && e.reason == "Unhealthy" && e.last.is_some_and(|t| t >= window))
        .filter(|e| {
            pods.iter()
                .any(|p| p.name == e.name && !never.iter().any(|n| n.name == p.name))
        })
        .collect();
    if let Some(p) = crashing.first() {
        out.push(fails(
            wedged_id,
            wedged_statement,
            vec![format!(
                "pod {} {}: a restart does not help pods that cannot run",
                p.name,
                p.broken().map(|f| f.line).unwrap_or_default()
            )],
        ));
    } else if stuck.is_empty() && probe_failures.is_empty() {
        out.push(fails(
            wedged_id,
            wedged_statement,
            match never.first() {
                Some(p) => vec![format!(
                    "pod {} has not been ready since it started{}: a fresh pod of the same template starts the same way",
                    p.name,
                    time(&p.raw, &["status", "startTime"])
                        .map(|t| format!(" at {}", hhmm(t)))
                        .unwrap_or_default()
                )],
                None => vec![format!(
                    "all {} pods run and are ready, with no probe failure in the last 15 minutes: nothing shows them wedged",
                    pods.len()
                )],
            },
        ));
    } else {
        let mut ev: Vec<String> = stuck
            .iter()
            .take(3)
            .map(|p| format!("pod {} runs but is not ready", p.name))
            .collect();
        ev.extend(probe_failures.iter().take(2).map(|e| e.line()));
        out.push(holds(wedged_id, wedged_statement, ev));
    }

    out.push(keeps_ready_pods(&w, &pods));
    out.push(no_rollout(&w, "restart.no-rollout-in-progress"));
    out.push(no_broken_dependency(scene, "restart.no-broken-dependency", "restart").await?);
    Ok(out)
}

/// Whether nothing the target depends on is broken now (its neighbourhood, as the
/// investigation reads it: the Services and hosts its failures name, its configuration, the
/// policies and webhooks in its way, its nodes and volumes). New pods — from a restart or from
/// more replicas — meet the same broken dependency, so the action cannot help while it lasts.
async fn no_broken_dependency(scene: &Scene, id: &str, action: &str) -> Read<Obligation> {
    let statement =
        "Nothing the workload depends on is broken now (new pods would meet the same failure)";
    let n = super::graph::build(scene.r.clone(), &scene.target, scene.now).await?;
    let broken: Vec<String> = n
        .dependencies
        .iter()
        .filter_map(|d| {
            let what = d.unhealthy.as_ref()?;
            Some(format!(
                "{} ({}) {what}: a {action} does not change it",
                d.object, d.relation
            ))
        })
        .collect();
    Ok(if broken.is_empty() {
        holds(
            id,
            statement,
            vec![format!(
                "{} dependency(ies) read, none broken now",
                n.dependencies.len()
            )],
        )
    } else {
        fails(id, statement, broken.into_iter().take(3).collect())
    })
}

/// Whether the pod has not been ready since it started ([`Pod::was_ready`]). `None`: the
/// times are not recorded.
fn never_ready(p: &Pod) -> Option<bool> {
    p.was_ready().map(|r| !r)
}

fn keeps_ready_pods(w: &Value, pods: &[Pod]) -> Obligation {
    let id = "restart.keeps-ready-pods";
    let statement = "Replacing the pods never takes away the last ready ones";
    let ready = pods.iter().filter(|p| p.ready).count() as i64;
    let replicas = i64_at(w, &["spec", "replicas"]).unwrap_or(pods.len() as i64);
    let (unavailable, strategy) = max_unavailable(w);
    let kind = obj::kind(w);
    if strategy == "OnDelete" {
        return fails(
            id,
            statement,
            vec!["updateStrategy OnDelete: changing the template replaces no pod".into()],
        );
    }
    let (ok, why) = match kind {
        "DaemonSet" => (
            true,
            format!("a DaemonSet replaces its pods node by node (maxUnavailable {unavailable})"),
        ),
        "StatefulSet" => (
            ready == 0 || replicas >= 2,
            format!(
                "{strategy} replaces one pod at a time and waits for it to be ready; {ready} of {replicas} ready now"
            ),
        ),
        _ => (
            ready == 0 || (strategy != "Recreate" && replicas - unavailable >= 1),
            if strategy == "Recreate" {
                format!("strategy Recreate stops all {replicas} pods first; {ready} ready now")
            } else {
                format!(
                    "{strategy} keeps at least {} of {replicas} available (maxUnavailable {unavailable}); {ready} ready now",
                    (replicas - unavailable).max(0)
                )
            },
        ),
    };
    check(id, statement, ok, vec![why])
}

fn no_rollout(w: &Value, id: &str) -> Obligation {
    let statement = "No rollout of the workload is in progress";
    match rollout_in_progress(w) {
        Some(why) => fails(
            id,
            statement,
            vec![format!("{} {}: {why}", obj::kind(w), obj::name(w))],
        ),
        None => holds(
            id,
            statement,
            vec![format!(
                "{} {} is at its current revision",
                obj::kind(w),
                obj::name(w)
            )],
        ),
    }
}

// --- Scale ---------------------------------------------------------------------------------

pub(super) async fn scale(scene: &Scene, params: &Map<String, Value>) -> Read<Vec<Obligation>> {
    let w = scene.target_obj().await?;
    let pods = scene.pods_of(&w).await?;
    let mut out = Vec::new();
    let current = i64_at(&w, &["spec", "replicas"]).unwrap_or(1);
    let Some(wanted) = number(params, "REPLICAS") else {
        out.push(fails(
            "scale.replicas-named",
            "The new replica count is named (REPLICAS)",
            vec!["REPLICAS is missing".into()],
        ));
        return Ok(out);
    };
    let hpas = scene.autoscalers_of(obj::kind(&w), obj::name(&w)).await?;
    out.push(check(
        "scale.no-autoscaler",
        "No HorizontalPodAutoscaler owns the replica count",
        hpas.is_empty(),
        hpas.iter()
            .map(|h| {
                format!(
                    "HorizontalPodAutoscaler {} scales it: patch its bounds instead",
                    obj::name(h)
                )
            })
            .collect::<Vec<_>>()
            .into_iter()
            .chain(
                hpas.is_empty()
                    .then(|| "no HorizontalPodAutoscaler targets it".to_owned()),
            )
            .collect(),
    ));
    let declared = obj::annotation(&w, "kubectl.kubernetes.io/last-applied-configuration")
        .and_then(|a| serde_json::from_str::<Value>(a).ok())
        .and_then(|a| i64_at(&a, &["spec", "replicas"]));
    let bound = (current * 2).max(current + 5).max(declared.unwrap_or(0));
    out.push(check(
        "scale.bounded",
        "The new count is a bounded step (at most double, or back to the declared count), and never zero",
        wanted >= 1 && wanted <= bound,
        vec![format!(
            "replicas {current} → {wanted}{}",
            declared.map(|d| format!("; declared {d} in the applied configuration")).unwrap_or_default()
        )],
    ));
    if wanted > current {
        let failing: Vec<&Pod> = pods.iter().filter(|p| p.broken().is_some()).collect();
        let unscheduled: Vec<&&Pod> = failing
            .iter()
            .filter(|p| p.unschedulable.is_some())
            .collect();
        out.push(check(
            "scale.pods-not-failing",
            "The workload's pods do not fail (more failing pods help nobody)",
            failing.iter().all(|p| p.unschedulable.is_some()) || current == 0 && pods.is_empty(),
            if failing.is_empty() {
                vec![format!("{} pod(s), none failing", pods.len())]
            } else {
                failing
                    .iter()
                    .take(3)
                    .map(|p| {
                        format!(
                            "pod {} {}",
                            p.name,
                            p.broken().map(|f| f.line).unwrap_or_default()
                        )
                    })
                    .collect()
            },
        ));
        let nodes = scene.nodes().await?;
        let taking = nodes.iter().filter(|n| n.takes_pods()).count();
        out.push(check(
            "scale.schedulable",
            "New pods can be scheduled: none of its pods waits for a node, and nodes take pods",
            unscheduled.is_empty() && taking > 0,
            vec![match unscheduled.first() {
                Some(p) => format!(
                    "pod {} is already Pending: {}",
                    p.name,
                    p.unschedulable.clone().unwrap_or_default()
                ),
                None => format!(
                    "{taking} of {} nodes are ready and schedulable",
                    nodes.len()
                ),
            }],
        ));
        out.push(quota_allows(scene, &w, wanted - current).await?);
        out.push(short_of_replicas(scene, &w, &pods, current, declared).await?);
        out.push(no_broken_dependency(scene, "scale.no-broken-dependency", "scale-up").await?);
    }
    Ok(out)
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
        .filter(|m| {
            ready
                .iter()
                .any(|p| Some(p.name.as_str()) == str_at(m, &["metadata", "name"]))
        })
        .map(|m| {
            array(m, &["containers"])
                .iter()
                .filter_map(|c| str_at(c, &["usage", "cpu"]))
                .filter_map(|q| crate::cluster::quantity::amount("cpu", q))
                .sum()
        })
        .collect();
    let spec = at(w, &["spec", "template", "spec"])
        .cloned()
        .unwrap_or(Value::Null);
    let per_pod = match pod_resource(&spec, "requests", "cpu") {
        0 => pod_resource(&spec, "limits", "cpu"),
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
    declared: Option<i64>,
) -> Read<Obligation> {
    let id = "scale.short-of-replicas";
    let statement = "The workload runs short of replicas: none, fewer than declared, or its pods busy near their CPU requests";
    if current == 0 {
        return Ok(holds(
            id,
            statement,
            vec![format!("{} runs no replica: nothing serves", obj::name(w))],
        ));
    }
    if let Some(d) = declared.filter(|d| *d > current) {
        return Ok(holds(
            id,
            statement,
            vec![format!(
                "its applied configuration declares {d} replicas; it runs {current}"
            )],
        ));
    }
    let load = cpu_load(scene, w, pods).await?;
    if let Some((used, requested)) = load
        && used * 10 >= requested * 8
    {
        return Ok(holds(
            id,
            statement,
            vec![format!(
                "its ready pods use {used}m of the {requested}m CPU they request (≥ 80%)"
            )],
        ));
    }
    let ready = pods.iter().filter(|p| p.ready).count();
    Ok(fails(
        id,
        statement,
        vec![format!(
            "{ready} of {current} replicas ready{}; {}: nothing shows it short of replicas",
            declared
                .map(|d| format!(", {d} declared"))
                .unwrap_or_default(),
            match load {
                Some((used, requested)) => {
                    format!("its ready pods use {used}m of the {requested}m CPU they request")
                }
                None => "no CPU use measured (metrics API)".into(),
            }
        )],
    ))
}

/// Whether the namespace's quota has room for `extra` more pods of the workload.
pub(super) async fn quota_allows(scene: &Scene, w: &Value, extra: i64) -> Read<Obligation> {
    let id = "scale.quota-allows";
    let statement = "The namespace's ResourceQuota has room for the new pods";
    let spec = at(w, &["spec", "template", "spec"])
        .cloned()
        .unwrap_or(Value::Null);
    let extra = extra.max(0) as u128;
    let mut ev = Vec::new();
    let mut ok = true;
    for (resource, per_pod) in [
        ("pods", 1u128),
        ("requests.cpu", pod_resource(&spec, "requests", "cpu")),
        ("requests.memory", pod_resource(&spec, "requests", "memory")),
        ("limits.cpu", pod_resource(&spec, "limits", "cpu")),
        ("limits.memory", pod_resource(&spec, "limits", "memory")),
    ] {
        if let Some((hard, used, name)) = scene.quota(resource).await? {
            let need = per_pod * extra;
            let fits = used + need <= hard;
            ok &= fits;
            ev.push(format!(
                "ResourceQuota {name}: {resource} {used} used of {hard}, {need} more needed{}",
                if fits { "" } else { " — no room" }
            ));
        }
    }
    if ev.is_empty() {
        ev.push("no ResourceQuota limits the namespace".into());
    }
    Ok(check(id, statement, ok, ev))
}

// --- Delete one pod ------------------------------------------------------------------------

pub(super) async fn delete_pod(
    scene: &Scene,
    params: &Map<String, Value>,
) -> Read<Vec<Obligation>> {
    let mut out = Vec::new();
    let Some(pod_name) = text(params, "POD_NAME") else {
        out.push(fails(
            "delete.pod-owned-by-target",
            "The pod named belongs to the target and has a controller to replace it",
            vec!["POD_NAME is missing".into()],
        ));
        return Ok(out);
    };
    let w = scene.target_obj().await?;
    let pods = scene.pods_of(&w).await?;
    let events = scene.events(None).await?;
    let Some(pod) = pods.iter().find(|p| p.name == pod_name) else {
        out.push(fails(
            "delete.pod-owned-by-target",
            "The pod named belongs to the target and has a controller to replace it",
            vec![format!(
                "pod {pod_name} is not among the {} pods of {} {}",
                pods.len(),
                obj::kind(&w),
                obj::name(&w)
            )],
        ));
        return Ok(out);
    };
    out.push(check(
        "delete.pod-owned-by-target",
        "The pod named belongs to the target and has a controller to replace it",
        pod.controller.is_some(),
        vec![match &pod.controller {
            Some((k, n)) => format!("pod {pod_name} is controlled by {k} {n}"),
            None => format!("pod {pod_name} has no controller: deleting it loses it"),
        }],
    ));
    // A pod that has ended (Failed, Succeeded) is no longer one of its controller's replicas:
    // it was replaced already, and deleting it only removes its record.
    if matches!(pod.phase.as_str(), "Failed" | "Succeeded") {
        out.push(fails(
            "delete.pod-still-running",
            "The pod is still one of its controller's replicas (not ended)",
            vec![format!(
                "pod {pod_name} has ended ({}{}): its controller replaced it already",
                pod.phase,
                str_at(&pod.raw, &["status", "reason"])
                    .map(|r| format!(", {r}"))
                    .unwrap_or_default()
            )],
        ));
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
        Some(_) => out.push(holds(
            "delete.siblings-ready",
            "Its siblings are ready",
            vec![format!(
                "pod {pod_name} is the only replica (spec.replicas 1) and serves nothing now: deleting it takes nothing away that runs"
            )],
        )),
        None => out.push(check(
            "delete.siblings-ready",
            "Its siblings are ready",
            ready >= 1,
            vec![format!(
                "{ready} of {} sibling pod(s) ready",
                siblings.len()
            )],
        )),
    }
    out.push(no_rollout(&w, "delete.no-rollout-in-progress"));
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
    let failing_id = "delete.failed-past-startup";
    let failing_statement = "The pod has failed for longer than its start-up allows";
    if pod.deleting {
        out.push(fails(
            failing_id,
            failing_statement,
            vec![format!(
                "pod {pod_name} is already terminating{}",
                if pod.finalizers.is_empty() {
                    String::new()
                } else {
                    format!(" (finalizers: {})", pod.finalizers.join(", "))
                }
            )],
        ));
    } else {
        let ok = failing_for.is_some_and(|d| d > allowance || restarts >= 3 || backing_off);
        out.push(check(
            failing_id,
            failing_statement,
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
    out.push(check(
        "delete.failure-not-shared",
        "Its failure is not shared by its siblings",
        sharing.is_empty(),
        ev,
    ));
    out.push(failure_not_the_nodes(scene, pod, &siblings).await?);
    out.push(match (&kept_state, only) {
        (Some(ev), _) => holds(
            "delete.failure-not-in-the-template",
            "Its failure does not come with the template its replacement is made from",
            ev.clone(),
        ),
        (None, true) => fails(
            "delete.failure-not-in-the-template",
            "Its failure does not come with the template its replacement is made from",
            vec![format!(
                "pod {pod_name} is the only replica: no sibling shows its template runs, and nothing shows its failure is state of its own (an error naming a path in its emptyDir, a kill it never recovered from)"
            )],
        ),
        (None, false) => failure_not_in_the_template(pod, &siblings),
    });
    let named = kept.and_then(|k| k.named);
    out.push(config_unchanged_since_siblings(scene, pod, &siblings, named.as_ref()).await?);
    out.push(super::node::delete_not_at_fault(scene, pod).await?);
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
    let id = "delete.config-unchanged-since-siblings";
    let statement = "No configuration its replacement reads changed between its ready siblings' start and its own";
    let started = |p: &Pod| time(&p.raw, &["status", "startTime"]).or(p.created);
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
        return Ok(holds(
            id,
            statement,
            vec!["no ready sibling started before it to compare with".into()],
        ));
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
        _ if changed.is_empty() => holds(
            id,
            statement,
            vec![if read.is_empty() {
                "its template reads no ConfigMap".to_owned()
            } else {
                format!("unchanged since its siblings started: {}", read.join(", "))
            }],
        ),
        Some(k) if siblings.is_empty() => {
            changed.push(format!(
                "its failing starts read that configuration already, and the error they end on names {} in its emptyDir volume {}, not it",
                k.path, k.volume
            ));
            holds(id, statement, changed)
        }
        _ => fails(id, statement, changed),
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
    let id = "delete.failure-not-in-the-template";
    let statement = "Its failure does not come with the template its replacement is made from";
    if let Some((c, why)) = pod.containers.iter().find_map(|c| {
        c.waiting
            .as_deref()
            .filter(|w| TEMPLATE_WAITS.contains(w))
            .map(|w| (c, w))
    }) {
        return fails(
            id,
            statement,
            vec![format!(
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
        return fails(id, statement, vec![moved]);
    }
    match hash {
        Some(h) if !ready.is_empty() && !ready.iter().any(|p| of(p)) => fails(
            id,
            statement,
            vec![format!(
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
        _ => holds(
            id,
            statement,
            vec![format!(
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
    let id = "delete.failure-not-the-nodes";
    let statement = "Its replacement does not start where the failure follows it (a DaemonSet's pod is replaced on the same node)";
    let pinned = pod
        .controller
        .as_ref()
        .is_some_and(|(kind, _)| kind == "DaemonSet");
    let Some(node) = pod.node.as_deref().filter(|_| pinned) else {
        return Ok(holds(
            id,
            statement,
            vec![format!(
                "pod {} is replaced wherever the scheduler places it",
                pod.name
            )],
        ));
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
        return Ok(holds(
            id,
            statement,
            vec![format!(
                "node {node} cannot be read: nothing shows it differs"
            )],
        ));
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
        return Ok(holds(
            id,
            statement,
            vec![if others.is_empty() {
                format!("no sibling runs ready on another node to compare node {node} with")
            } else {
                format!(
                    "node {node} runs what the {} node(s) of its ready siblings run",
                    others.len()
                )
            }],
        ));
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
    Ok(fails(id, statement, ev))
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(started: &str, ready_changed: Option<&str>) -> Pod {
        let mut cond = json!({"type": "Ready", "status": "False"});
        if let Some(t) = ready_changed {
            cond["lastTransitionTime"] = json!(t);
        }
        Pod::parse(&json!({
            "metadata": {"name": "search-1"},
            "status": {"phase": "Running", "startTime": started, "conditions": [cond]}
        }))
    }

    #[test]
    fn a_pod_unready_since_its_start_was_never_ready_and_one_that_served_was() {
        // The kubelet set Ready False as it started: it has not been ready since.
        let fresh = pod("2026-11-26T10:00:00Z", Some("2026-11-26T10:00:01Z"));
        assert_eq!(never_ready(&fresh), Some(true));
        // Ready for a moment, then not (a real singleton that failed three seconds in).
        let moment = pod("2026-11-26T10:00:00Z", Some("2026-11-26T10:00:03Z"));
        assert_eq!(never_ready(&moment), Some(false));
        // Ready False since long after it started: it served, then got stuck.
        let served = pod("2026-11-26T08:00:00Z", Some("2026-11-26T10:00:00Z"));
        assert_eq!(never_ready(&served), Some(false));
        // No times recorded: unknown.
        assert_eq!(never_ready(&pod("2026-11-26T08:00:00Z", None)), None);
    }
}
