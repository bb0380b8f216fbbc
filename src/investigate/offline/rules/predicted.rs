//! Proactive rules: a volume predicted to fill, memory predicted to run out.

use super::*;
use crate::prove::findings;

pub(super) fn pvc_fill_predicted(f: &Facts) -> Option<Diagnosis> {
    let name = &f.alert.name;
    let about_storage = f.kind() == "PersistentVolumeClaim"
        || name.contains("disk")
        || name.contains("volume")
        || name.contains("pvc");
    if !(f.alert.proactive && about_storage) {
        return None;
    }
    let claim = &f.claim;
    let class = &claim.class;
    let mut d = Diagnosis::new(
        "PVCFillPredicted",
        format!(
            "PersistentVolumeClaim {} ({}) is predicted to fill up",
            claim.name, claim.capacity
        ),
    );
    d.target = f.target.clone();
    d.severity = Severity::Medium;
    // The cluster contradicts the forecast when the claim is already being resized: its
    // request is above its capacity, or its conditions say so, so the volume the prediction
    // was made on is going away.
    if let Some(conditions) = &claim.resizing {
        d.summary = format!(
            "PersistentVolumeClaim {} is already being expanded from {} to {}: the fill was predicted on the smaller volume",
            claim.name, claim.capacity, claim.requested
        );
        d.factors.push(if conditions.is_empty() {
            format!(
                "requested {} above capacity {} (expansion under way)",
                claim.requested, claim.capacity
            )
        } else {
            format!(
                "requested {}, capacity {}, conditions {} (expansion under way)",
                claim.requested,
                claim.capacity,
                conditions.join(", ")
            )
        });
        d.outcome = InvestigationOutcome::NotActionable;
        d.confidence = 0.8;
        d.severity = Severity::Low;
        return Some(d);
    }
    if let Some(phase) = &claim.unbound {
        d.confidence = 0.7;
        d.factors.push(format!("the claim is {phase}, not Bound"));
        d.human = Some(format!(
            "PersistentVolumeClaim {} is {phase}: it has no volume to expand; a human must see why it is not bound",
            claim.name
        ));
        return Some(d);
    }
    match claim.size_now {
        Some(_) if claim.expandable != Some(true) => {
            d.confidence = 0.8;
            d.factors.push(format!(
                "storage class {class} does not allow volume expansion"
            ));
            d.human = Some(format!(
                "PersistentVolumeClaim {} is on the storage class {class}, which cannot expand volumes; its data must be cleaned up or migrated by a human",
                claim.name
            ));
        }
        Some(bytes) if !class.is_empty() => {
            let new_size = findings::grown_claim_size(bytes);
            d.factors.push(format!(
                "storage class {class}; proposed size {new_size} (x1.5)"
            ));
            d.confidence = 0.8;
            d.proposal = proposal(
                ActionType::ExpandPVC,
                ActionParams::expand_pvc(&claim.name, &new_size),
                format!("grow the claim {} to {new_size}", claim.name),
            );
        }
        _ => {
            d.confidence = 0.6;
            d.human = Some(format!(
                "the size or storage class of PersistentVolumeClaim {} is unknown; a human must decide how to grow or clean it",
                claim.name
            ));
        }
    }
    Some(d)
}

/// Memory exhaustion predicted: compare usage with the limit.
pub(super) fn memory_exhaustion_predicted(f: &Facts) -> Option<Diagnosis> {
    if !f.alert.proactive {
        return None;
    }
    let target = f.target.clone();
    let subject = f.target_text();
    let Some(container) = f.template_container.clone() else {
        let mut d = Diagnosis::new(
            "MemoryExhaustionPredicted",
            "The predicted workload has no containers to assess",
        );
        d.outcome = InvestigationOutcome::InsufficientData;
        d.confidence = 0.3;
        d.target = target;
        return Some(d);
    };
    let limit = f.limit(&container, "memory");
    let usage = f.memory_peaks.get(&container).copied();
    // The container the raise is for, killed for memory lately, as the memory proof asks.
    let oom_restarts = f.pods.iter().any(|p| p.memory_killed.contains(&container));
    let mut d = Diagnosis::new("MemoryExhaustionPredicted", String::new());
    d.target = target;
    d.killed_for_memory = oom_restarts;
    // Another container killed for memory lately and not this one: the memory proof refuses a
    // raise for this one then (`memory.container-was-killed`), and the kills say which
    // container runs short.
    let others: Vec<String> = f
        .pods
        .iter()
        .flat_map(|p| {
            p.memory_killed
                .iter()
                .filter(|c| **c != container)
                .map(move |c| format!("container {c} of pod {}", p.name))
        })
        .take(3)
        .collect();
    if !oom_restarts && !others.is_empty() {
        d.summary = format!(
            "Memory exhaustion of {subject} is predicted, and {} was OOMKilled, not {container}",
            others.join(", ")
        );
        d.confidence = 0.6;
        d.human = Some(format!(
            "{} was OOMKilled lately, not {container}, the container the prediction is about: a human decides which container's limit to raise",
            others.join(", ")
        ));
        return Some(d);
    }
    let (Some(limit), Some(used)) = (limit.clone(), usage) else {
        if oom_restarts {
            d.summary = format!(
                "Memory exhaustion of {subject} is predicted and containers are already OOMKilled"
            );
            d.confidence = 0.75;
            if let Some(new_limit) = limit
                .as_deref()
                .and_then(|l| quantity::raised_memory(l, RAISE_FACTOR))
            {
                if let Some(problem) = f.raise_problem(
                    LimitResource::Memory,
                    &container,
                    limit.as_deref().unwrap_or("0"),
                    &new_limit,
                ) {
                    d.human = Some(format!("container {container} of {subject}: {problem}"));
                    return Some(d);
                }
                d.proposal = proposal(
                    ActionType::IncreaseMemoryLimits,
                    ActionParams::limit(LimitResource::Memory, &container, &new_limit),
                    format!("raise the memory limit of {container} to {new_limit}"),
                );
            }
            return Some(d);
        }
        d.summary = format!(
            "The memory use of container {container} of {subject} cannot be compared with its limit ({}): check its memory graph against the limit before acting on the prediction",
            match (&limit, usage) {
                (None, _) => "it has no memory limit".to_owned(),
                (Some(l), None) => format!("no metrics API to read its use against the {l} limit"),
                (Some(_), Some(_)) => "unknown".to_owned(),
            }
        );
        d.outcome = InvestigationOutcome::InsufficientData;
        d.confidence = 0.4;
        return Some(d);
    };
    let limit_bytes = quantity::memory_bytes(&limit).unwrap_or(u128::MAX);
    let ratio = used as f64 / limit_bytes as f64;
    d.factors.push(format!(
        "container {container} uses {} of its {limit} limit ({:.0}%)",
        quantity::format_mi(used),
        ratio * 100.0
    ));
    if findings::near_limit(used, limit_bytes) || oom_restarts {
        let new_limit = quantity::raised_memory(&limit, RAISE_FACTOR).unwrap_or(limit.clone());
        d.summary = format!(
            "{subject} will reach its memory limit: container {container} already uses {:.0}% of {limit}",
            ratio * 100.0
        );
        d.confidence = 0.8;
        d.severity = Severity::Medium;
        if let Some(problem) =
            f.raise_problem(LimitResource::Memory, &container, &limit, &new_limit)
        {
            d.human = Some(format!("container {container} of {subject}: {problem}"));
        } else {
            d.proposal = proposal(
                ActionType::IncreaseMemoryLimits,
                ActionParams::limit(LimitResource::Memory, &container, &new_limit),
                format!("raise the memory limit of {container} to {new_limit}"),
            );
        }
    } else {
        d.summary = format!(
            "The prediction is unlikely to materialise soon: {subject} uses {:.0}% of its memory limit",
            ratio * 100.0
        );
        d.outcome = InvestigationOutcome::NotActionable;
        d.confidence = 0.8;
        d.severity = Severity::Low;
    }
    Some(d)
}
