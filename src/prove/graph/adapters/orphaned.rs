//! A Service left without endpoints by a Deployment's own rollout: the new revision's pod labels
//! no longer match its selector. The graph names the Deployment as the culprit and offers the
//! revision to return to only when the questions its rollback's proof asks hold of it.

use std::collections::BTreeMap;

use serde_json::Value;

use super::super::{Change, Ctx, DepKind, Dependency, Read};
use crate::cluster::ListQuery;
use crate::cluster::obj::{self, at};
use crate::cluster::observed::{self, Event, Pod, Revision};
use crate::domain::Target;
use crate::prove::findings::{self, UndoOnConfig};

/// A Deployment whose rollout took its pods out of Service `name`'s selector: the revision
/// before its current one (the one its annotation names, as the rollback proof reads it) has
/// pod labels the selector matches, the current one's do not. The Service lost its endpoints
/// when the new pods replaced the old ones.
pub(super) async fn orphaned_by_rollout(
    ctx: &Ctx,
    ns: &str,
    name: &str,
    svc: &Value,
) -> Read<Option<Dependency>> {
    let service = observed::Service::parse(svc);
    if service.selector.is_empty() {
        return Ok(None);
    }
    fn labels(r: &Revision) -> Option<&Value> {
        at(&r.template, &["metadata", "labels"])
    }
    // The namespace's ReplicaSets, by the Deployment their controller reference names (whose
    // they are, `obj::owned_by`, is asked once that Deployment is read).
    let mut by_deployment: BTreeMap<String, Vec<(Value, Revision)>> = BTreeMap::new();
    for rs in ctx.list_or_empty("ReplicaSet", Some(ns)).await? {
        let owner = match obj::controller(&rs) {
            Some(("Deployment", name)) => name.to_owned(),
            _ => continue,
        };
        if let Some(r) = Revision::of_replicaset(&rs) {
            by_deployment.entry(owner).or_default().push((rs, r));
        }
    }
    for (deployment, sets) in by_deployment {
        // Only a Deployment some of whose revisions the Service selects, and not all, is read.
        let selected = sets
            .iter()
            .filter(|(_, r)| service.selects(labels(r)))
            .count();
        if selected == 0 || selected == sets.len() {
            continue;
        }
        let Some(object) = ctx.get("Deployment", Some(ns), &deployment).await? else {
            continue;
        };
        let revisions: Vec<Revision> = sets
            .into_iter()
            .filter(|(rs, _)| obj::owned_by(rs, &object))
            .map(|(_, r)| r)
            .collect();
        let w = observed::Workload::parse(&object);
        let Some(cur) = w
            .current_revision_number(&revisions)
            .and_then(|n| revisions.iter().find(|r| r.number == n))
        else {
            continue;
        };
        let Some(prev) = revisions
            .iter()
            .filter(|r| r.number < cur.number)
            .max_by_key(|r| r.number)
        else {
            continue;
        };
        if !service.selects(labels(prev)) || service.selects(labels(cur)) {
            continue;
        }
        let (prev_n, cur_n) = (prev.number, cur.number);
        let lost = service.lost(labels(cur));
        let rolled = cur.created;
        let d = Dependency::of(
            DepKind::Rollout,
            Target::new("Deployment", deployment.as_str(), Some(ns.to_string())),
            format!("its pods served Service {ns}/{name} until revision {cur_n}"),
        )
        .unhealthy(
            format!(
                "its rollout to revision {cur_n} changed the pod labels Service {ns}/{name} selects ({}): the Service selects none of its pods",
                lost.join(", ")
            ),
            rolled,
        )
        .changed(rolled.map(|at| Change {
            at,
            what: format!("rolled out revision {cur_n}"),
        }))
        .evidence(format!(
            "revision {prev_n}'s pod labels match the Service's selector; revision {cur_n}'s do not"
        ))
        .culprit_of_object(&Target::new("Service", name, Some(ns.to_string())))
        .at(2);
        let d = match undo_refused(ctx, ns, &object, &w, cur, prev, &revisions).await? {
            Some(why) => {
                let mut d = d;
                d.blocks = Some(why);
                d
            }
            None => d.undo_to(
                crate::domain::Target::new("Deployment", deployment, Some(ns.to_owned())),
                prev_n,
            ),
        };
        return Ok(Some(d));
    }
    Ok(None)
}

/// Why a return of Deployment `object` to revision `to` would be refused, if it would: the
/// questions the rollout rule and the rollback proof ask of a return, asked of a Deployment
/// that is not the incident's own — a rollout someone else runs
/// ([`findings::rollout_by_others`]), a revision not shown to work
/// ([`findings::revision_health`]), a ConfigMap rewritten in place that the return would keep
/// ([`findings::undo_on_config`]).
async fn undo_refused(
    ctx: &Ctx,
    ns: &str,
    object: &Value,
    w: &observed::Workload,
    current: &Revision,
    to: &Revision,
    revisions: &[Revision],
) -> Read<Option<String>> {
    let who = format!("Deployment {ns}/{}", obj::name(object));
    let events: Vec<Event> = ctx.all_events.iter().map(Event::parse).collect();
    // Parsed as of the moment, having heeded the warnings about them (`Pod::heed`), as the
    // graph's own pods are.
    let pods: Vec<Pod> = match observed::pod_selector(object) {
        Some(sel) => match ctx
            .list("Pod", Some(ns), &ListQuery::labels(sel.to_query()))
            .await
        {
            Ok(p) => p
                .iter()
                .map(|p| Pod::at(p, ctx.now).heed(&events))
                .filter(|p| p.selected_by("Deployment", obj::name(object)))
                .collect(),
            Err(e) if e.is_unreachable() => return Err(e),
            Err(_) => vec![],
        },
        None => vec![],
    };
    let its: Vec<&Pod> = pods.iter().collect();
    if let Err(why) = findings::rollout_by_others(
        w.paused,
        Some(current),
        current.number,
        &its,
        observed::progress_deadline_exceeded(object).is_some(),
    ) {
        return Ok(Some(format!(
            "a rollback of {who} to revision {} would cut across its rollout: {why}; a human decides",
            to.number
        )));
    }
    let replaced_at = to.replaced_at(revisions);
    let health = findings::revision_health(to, &pods, &events, replaced_at);
    if !health.proven() {
        return Ok(Some(format!(
            "nothing shows revision {} of {who} worked ({}): a human chooses the revision to return to",
            to.number,
            unproven(&health)
        )));
    }
    for name in findings::configmaps(&current.template) {
        let Some(written) = ctx
            .get("ConfigMap", Some(ns), &name)
            .await?
            .as_ref()
            .and_then(observed::last_written)
        else {
            continue;
        };
        if let UndoOnConfig::Kept(line) =
            findings::undo_on_config(to, &name, written, replaced_at, &its)
        {
            return Ok(Some(format!(
                "rolling {who} back to revision {} would not restore its configuration: {line}",
                to.number
            )));
        }
    }
    Ok(None)
}

/// A revision's health that is not proven, in a few words.
fn unproven(health: &findings::RevisionHealth<'_>) -> String {
    let served = |s: Option<chrono::Duration>| {
        s.map_or("for an unknown time".into(), |s| {
            format!("for {}", observed::ago(s))
        })
    };
    match health {
        findings::RevisionHealth::Fails(p, f) => format!("its pod {} {}", p.name, f.line),
        findings::RevisionHealth::FailedBefore(e) => {
            format!("its pods failed: {} {}", e.name, e.reason)
        }
        findings::RevisionHealth::Served(s) => format!("it served {} only", served(*s)),
        findings::RevisionHealth::Ready(_) => String::new(),
    }
}
