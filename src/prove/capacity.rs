//! Obligations of the actions on capacity and disruption: an autoscaler's maximum, a volume's
//! size, a disruption budget.

use serde_json::Value;

use super::scene::{Read, Scene};
use super::workload::quota_allows;
use crate::cluster::obj::{self, array, at, i64_at, str_at};
use crate::cluster::observed::Pod;
use crate::cluster::quantity;
use crate::cluster::selector::Selector;
use crate::domain::Obligation;
use crate::domain::obligations::{self as ob, ObligationSpec};
use crate::domain::params::{self, ParamKey};

// --- HorizontalPodAutoscaler maximum -------------------------------------------------------

/// The object a parameter names (`HPA_NAME`, `PVC_NAME`, …) in the target's namespace, or the
/// first obligation failing because it is not named or cannot be read.
async fn named(
    scene: &Scene,
    name: Option<&str>,
    (param, kind): (ParamKey, &str),
    obligation: &ObligationSpec,
) -> Read<Result<(String, Value), Obligation>> {
    let Some(name) = name else {
        return Ok(Err(
            obligation.fails(vec![format!("{} is missing", param.name)])
        ));
    };
    match scene.get(kind, scene.ns(), name).await {
        Ok(o) => Ok(Ok((name.to_owned(), o))),
        Err(e) if e.is_unreachable() => Err(e),
        Err(e) => Ok(Err(
            obligation.fails(vec![format!("{kind} {name}: {}", e.message)])
        )),
    }
}

/// Utilisation above target, per metric: `(metric, current %, target %)`.
fn utilisation(h: &Value) -> Vec<(String, i64, i64)> {
    let mut out = Vec::new();
    // autoscaling/v1.
    if let (Some(cur), Some(target)) = (
        i64_at(h, &["status", "currentCPUUtilizationPercentage"]),
        i64_at(h, &["spec", "targetCPUUtilizationPercentage"]),
    ) {
        out.push(("cpu".to_owned(), cur, target));
    }
    // v2beta2 / v2: resource metrics with average utilisation.
    for m in array(h, &["spec", "metrics"]) {
        let Some(name) = str_at(m, &["resource", "name"]) else {
            continue;
        };
        let Some(target) = i64_at(m, &["resource", "target", "averageUtilization"]) else {
            continue;
        };
        let cur = array(h, &["status", "currentMetrics"])
            .iter()
            .find_map(|c| {
                (str_at(c, &["resource", "name"]) == Some(name))
                    .then(|| i64_at(c, &["resource", "current", "averageUtilization"]))
                    .flatten()
            });
        if let Some(cur) = cur
            && !out.iter().any(|(n, _, _)| n == name)
        {
            out.push((name.to_owned(), cur, target));
        }
    }
    out
}

pub(super) async fn hpa_max(
    scene: &Scene,
    hpa: Option<&str>,
    wanted: Option<i64>,
) -> Read<Vec<Obligation>> {
    let mut out = Vec::new();
    let obligation = &ob::hpa::SCALES_TARGET;
    let (name, h) = match named(
        scene,
        hpa,
        (params::HPA_NAME, "HorizontalPodAutoscaler"),
        obligation,
    )
    .await?
    {
        Ok(found) => found,
        Err(failed) => {
            out.push(failed);
            return Ok(out);
        }
    };
    let name = name.as_str();
    let scales = (
        str_at(&h, &["spec", "scaleTargetRef", "kind"]).unwrap_or_default(),
        str_at(&h, &["spec", "scaleTargetRef", "name"]).unwrap_or_default(),
    );
    out.push(obligation.check(
        scales.0 == scene.target.kind && scales.1 == scene.target.name,
        vec![format!(
            "HorizontalPodAutoscaler {name} scales {}/{}",
            scales.0, scales.1
        )],
    ));
    let max = i64_at(&h, &["spec", "maxReplicas"]).unwrap_or(0);
    let current = i64_at(&h, &["status", "currentReplicas"]).unwrap_or(0);
    let desired = i64_at(&h, &["status", "desiredReplicas"]).unwrap_or(current);
    out.push(ob::hpa::AT_MAXIMUM.check(
        current >= max && max > 0,
        vec![format!(
            "{current} replicas (desired {desired}) of at most {max}"
        )],
    ));
    let u = utilisation(&h);
    let over: Vec<String> = u
        .iter()
        .filter(|(_, c, t)| c > t)
        .map(|(m, c, t)| format!("{m} at {c}% against a {t}% target"))
        .collect();
    out.push(ob::hpa::ABOVE_TARGET.check(
        !over.is_empty(),
        if u.is_empty() {
            vec!["the autoscaler reports no current utilisation".into()]
        } else if over.is_empty() {
            u.iter()
                .map(|(m, c, t)| format!("{m} at {c}% within its {t}% target"))
                .collect()
        } else {
            over
        },
    ));
    let w = scene.target_obj().await?;
    let pods = scene.pods_of(&w).await?;
    let pending: Vec<&Pod> = pods.iter().filter(|p| p.unschedulable.is_some()).collect();
    out.push(ob::hpa::ROOM_TO_SCHEDULE.check(
        pending.is_empty(),
        vec![match pending.first() {
            Some(p) => format!(
                "pod {} is Pending: {}",
                p.name,
                p.unschedulable.clone().unwrap_or_default()
            ),
            None => format!("none of its {} pods is Pending", pods.len()),
        }],
    ));
    let wanted = wanted.unwrap_or(0);
    out.push(ob::hpa::RAISES_BOUNDED.check(
        wanted > max && wanted <= (max * 2).max(max + 10),
        vec![format!("maxReplicas {max} → {wanted}")],
    ));
    let quota = quota_allows(scene, &w, wanted - current, &ob::hpa::QUOTA_ALLOWS).await?;
    out.push(quota);
    Ok(out)
}

// --- Expand a PersistentVolumeClaim --------------------------------------------------------

pub(super) async fn expand_pvc(
    scene: &Scene,
    claim: Option<&str>,
    new_size: Option<&str>,
) -> Read<Vec<Obligation>> {
    let mut out = Vec::new();
    let obligation = &ob::pvc::BELONGS_TO_TARGET;
    let (name, pvc) = match named(
        scene,
        claim,
        (params::PVC_NAME, "PersistentVolumeClaim"),
        obligation,
    )
    .await?
    {
        Ok(found) => found,
        Err(failed) => {
            out.push(failed);
            return Ok(out);
        }
    };
    let name = name.as_str();
    let belongs = match scene.target.kind.as_str() {
        "PersistentVolumeClaim" => scene.target.name == name,
        "StatefulSet" => {
            let sts = scene.target_obj().await?;
            array(&sts, &["spec", "volumeClaimTemplates"])
                .iter()
                .any(|t| name.starts_with(&format!("{}-{}-", obj::name(t), obj::name(&sts))))
        }
        _ => {
            let w = scene.target_obj().await?;
            array(&w, &["spec", "template", "spec", "volumes"])
                .iter()
                .any(|v| str_at(v, &["persistentVolumeClaim", "claimName"]) == Some(name))
        }
    };
    out.push(obligation.check(
        belongs,
        vec![format!(
            "PersistentVolumeClaim {name} {} {}",
            if belongs {
                "belongs to"
            } else {
                "is not used by"
            },
            scene.target
        )],
    ));
    let phase = str_at(&pvc, &["status", "phase"]).unwrap_or("Unknown");
    out.push(ob::pvc::BOUND.check(
        phase == "Bound",
        vec![format!("PersistentVolumeClaim {name} is {phase}")],
    ));
    let class = str_at(&pvc, &["spec", "storageClassName"]).map(str::to_owned);
    let expandable = match &class {
        Some(c) => match scene.get("StorageClass", None, c).await {
            Ok(sc) => Ok((
                at(&sc, &["allowVolumeExpansion"]).and_then(Value::as_bool) == Some(true),
                format!(
                    "StorageClass {c} {} volume expansion",
                    if at(&sc, &["allowVolumeExpansion"]).and_then(Value::as_bool) == Some(true) {
                        "allows"
                    } else {
                        "does not allow"
                    }
                ),
            )),
            Err(e) if e.is_unreachable() => return Err(e),
            Err(e) => Err(format!("StorageClass {c}: {}", e.message)),
        },
        None => Err("the claim names no StorageClass".to_owned()),
    };
    match expandable {
        Ok((ok, ev)) => out.push(ob::pvc::CLASS_EXPANDABLE.check(ok, vec![ev])),
        Err(ev) => out.push(ob::pvc::CLASS_EXPANDABLE.fails(vec![ev])),
    }
    let requested = str_at(&pvc, &["spec", "resources", "requests", "storage"]).unwrap_or_default();
    let capacity = str_at(&pvc, &["status", "capacity", "storage"]).unwrap_or(requested);
    let resizing: Vec<String> = array(&pvc, &["status", "conditions"])
        .iter()
        .filter(|c| str_at(c, &["status"]) == Some("True"))
        .filter_map(|c| str_at(c, &["type"]).map(str::to_owned))
        .collect();
    let growing = match (
        quantity::memory_bytes(requested),
        quantity::memory_bytes(capacity),
    ) {
        (Some(r), Some(c)) => r > c,
        _ => false,
    };
    out.push(ob::pvc::NO_RESIZE_UNDER_WAY.check(
        !growing && resizing.is_empty(),
        vec![format!(
            "requested {requested}, capacity {capacity}{}",
            if resizing.is_empty() {
                String::new()
            } else {
                format!(", conditions {}", resizing.join(", "))
            }
        )],
    ));
    let new = new_size.and_then(quantity::memory_bytes);
    let old = quantity::memory_bytes(requested);
    out.push(ob::pvc::GROWS_BOUNDED.check(
        matches!((old, new), (Some(o), Some(n)) if n > o && n <= o * 4),
        vec![format!(
            "storage {requested} → {}",
            new_size.unwrap_or("(missing)")
        )],
    ));
    Ok(out)
}

// --- Relax a PodDisruptionBudget -----------------------------------------------------------

pub(super) async fn relax_pdb(
    scene: &Scene,
    budget: Option<&str>,
    wanted: Option<i64>,
) -> Read<Vec<Obligation>> {
    let mut out = Vec::new();
    let obligation = &ob::pdb::GUARDS_TARGET;
    let (_, pdb) = match named(
        scene,
        budget,
        (params::PDB_NAME, "PodDisruptionBudget"),
        obligation,
    )
    .await?
    {
        Ok(found) => found,
        Err(failed) => {
            out.push(failed);
            return Ok(out);
        }
    };
    let w = scene.target_obj().await?;
    let pods = scene.pods_of(&w).await?;
    let selector = at(&pdb, &["spec", "selector"]).and_then(Selector::from_object);
    let guarded: Vec<&Pod> = pods
        .iter()
        .filter(|p| {
            selector
                .as_ref()
                .is_some_and(|s| s.matches_value(Some(&p.labels)))
        })
        .collect();
    out.push(obligation.check(
        !guarded.is_empty(),
        vec![format!(
            "it selects {} of the {} pods of {}",
            guarded.len(),
            pods.len(),
            scene.target
        )],
    ));
    let allowed = i64_at(&pdb, &["status", "disruptionsAllowed"])
        .or_else(|| i64_at(&pdb, &["status", "podDisruptionsAllowed"]))
        .unwrap_or(0);
    let healthy = i64_at(&pdb, &["status", "currentHealthy"]).unwrap_or(0);
    let desired = i64_at(&pdb, &["status", "desiredHealthy"]).unwrap_or(0);
    let expected = i64_at(&pdb, &["status", "expectedPods"]).unwrap_or(guarded.len() as i64);
    let nodes = scene.nodes().await?;
    let draining: Vec<String> = nodes
        .iter()
        .filter(|n| n.unschedulable)
        .filter(|n| {
            guarded
                .iter()
                .any(|p| p.node.as_deref() == Some(n.name.as_str()))
        })
        .map(|n| n.name.clone())
        .collect();
    out.push(ob::pdb::BLOCKS_A_WAITING_DRAIN.check(
        allowed == 0 && !draining.is_empty(),
        vec![
            format!("{allowed} disruption(s) allowed"),
            if draining.is_empty() {
                "no cordoned node holds a pod it guards: no drain waits".into()
            } else {
                format!(
                    "cordoned node(s) {} still hold pods it guards",
                    draining.join(", ")
                )
            },
        ],
    ));
    out.push(ob::pdb::PODS_HEALTHY.check(
        healthy >= expected && expected > 0,
        vec![format!(
            "{healthy} of {expected} healthy, {desired} required"
        )],
    ));
    let stateful = obj::kind(&w) == "StatefulSet";
    let quorum = stateful || (expected >= 3 && desired * 2 > expected);
    out.push(ob::pdb::GUARDS_NO_QUORUM.check(
        !quorum,
        vec![format!(
            "{} {} with {expected} pods, {desired} required",
            obj::kind(&w),
            obj::name(&w)
        )],
    ));
    let wanted = wanted.unwrap_or(0);
    out.push(ob::pdb::RELAXED_MINIMALLY.check(
        wanted >= 1 && wanted <= (expected / 2).max(1),
        vec![format!("maxUnavailable → {wanted} of {expected} pods")],
    ));
    Ok(out)
}

/// Obligations of a Git revert: the target is GitOps-managed and the change is identified.
pub(super) async fn git_revert(scene: &Scene, change: Option<&str>) -> Read<Vec<Obligation>> {
    let w = scene.target_obj().await?;
    let marker = [
        ("annotation", "argocd.argoproj.io/tracking-id"),
        ("label", "argocd.argoproj.io/instance"),
        ("annotation", "argocd.argoproj.io/managed-by"),
        ("label", "kustomize.toolkit.fluxcd.io/name"),
        ("label", "helm.toolkit.fluxcd.io/name"),
    ]
    .iter()
    .find(|(where_, key)| match *where_ {
        "label" => obj::label(&w, key).is_some(),
        _ => obj::annotation(&w, key).is_some(),
    })
    .map(|(where_, key)| format!("{where_} {key}"));
    let mut out = vec![ob::gitrevert::GITOPS_MANAGED.check(
        marker.is_some(),
        vec![match &marker {
            Some(m) => format!("{} carries the {m}", scene.target),
            None => format!("{} carries no Argo CD or Flux marker", scene.target),
        }],
    )];
    let change = change.unwrap_or_default();
    out.push(if change.chars().count() >= 10 {
        ob::gitrevert::CHANGE_IDENTIFIED.holds(vec![change.chars().take(200).collect()])
    } else {
        ob::gitrevert::CHANGE_IDENTIFIED
            .fails(vec!["PROPOSED_CHANGE does not say what to change".into()])
    });
    Ok(out)
}
