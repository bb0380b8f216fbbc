//! Learned patterns (docs/adr/0024-outcome-learning.md): the arithmetic of outcome learning,
//! apart from where outcomes are stored and who reads them.
//!
//! Input: the facts of an incident ([`SignatureFacts`]) and the verified outcomes recorded for
//! its signature ([`PatternOutcome`]). Output: the [`Signature`] (facts normalised and hashed)
//! and one [`LearnedPattern`] per workflow: its weight (effective +1, ineffective −1, each
//! halved every [`HALF_LIFE`] of its age), whether it is in cooldown ([`COOLDOWN`] after its
//! last ineffective outcome), and the section a prompt shows them in.
//!
//! Invariant: a pattern is a hint. Nothing here decides; the investigators propose, and every
//! proposal still meets its proof obligations, the policy and the approvers.

use chrono::{DateTime, Duration, Utc};
use sha2::{Digest, Sha256};

use crate::domain::{LearnedPattern, PatternOutcome, Signature, SignatureFacts};

/// An outcome's weight halves every half-life of its age.
pub const HALF_LIFE: Duration = Duration::days(7);
/// A workflow that proved ineffective on a signature is not suggested for it again for this
/// long after that outcome.
pub const COOLDOWN: Duration = Duration::hours(24);
/// Outcomes older than this are not read (their weight is below 2⁻¹²).
pub const LOOKBACK: Duration = Duration::days(90);
/// How many requests a pattern names as where it was learned.
const LEARNED_FROM: usize = 5;

/// The facts normalised — trimmed, empty ones dropped, sorted, deduplicated — and hashed: the
/// SHA-256 of their canonical JSON (`alert`, `kind`, `pod_states`, `events`), `sig:` and the
/// first 16 hex digits.
pub fn signature(facts: SignatureFacts) -> Signature {
    let norm = |v: Vec<String>| {
        let mut v: Vec<String> = v
            .into_iter()
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect();
        v.sort();
        v.dedup();
        v
    };
    let facts = SignatureFacts {
        alert: facts.alert.trim().to_owned(),
        kind: facts.kind.trim().to_owned(),
        pod_states: norm(facts.pod_states),
        events: norm(facts.events),
    };
    let canonical = serde_json::json!({
        "alert": facts.alert,
        "events": facts.events,
        "kind": facts.kind,
        "pod_states": facts.pod_states,
    });
    let digest = Sha256::digest(crate::canonical::to_string(&canonical).as_bytes());
    let hex = hex::encode(digest);
    Signature {
        hash: format!("sig:{}", hex.chars().take(16).collect::<String>()),
        facts,
    }
}

/// What an outcome of age `age` weighs: 1 now, ½ after a half-life, ¼ after two. A future
/// outcome (a clock skew between replicas) weighs 1.
pub fn decay(age: Duration) -> f64 {
    let age = age.num_seconds().max(0) as f64;
    0.5_f64.powf(age / HALF_LIFE.num_seconds() as f64)
}

/// The patterns of one signature's outcomes at `now`, one per workflow, strongest first
/// (weight, then the most recent outcome).
pub fn aggregate(outcomes: &[PatternOutcome], now: DateTime<Utc>) -> Vec<LearnedPattern> {
    let mut out: Vec<LearnedPattern> = Vec::new();
    let mut sorted: Vec<&PatternOutcome> = outcomes
        .iter()
        .filter(|o| now - o.recorded_at <= LOOKBACK)
        .collect();
    // Newest first, so `learned_from` lists the latest requests.
    sorted.sort_by_key(|o| std::cmp::Reverse(o.recorded_at));
    for o in sorted {
        let sign = if o.effective { 1.0 } else { -1.0 };
        let w = sign * decay(now - o.recorded_at);
        let at = match out.iter().position(|p| p.workflow_id == o.workflow_id) {
            Some(i) => i,
            None => {
                out.push(LearnedPattern {
                    signature: o.signature.hash.clone(),
                    workflow_id: o.workflow_id.clone(),
                    action_type: o.action_type.clone(),
                    weight: 0.0,
                    effective: 0,
                    ineffective: 0,
                    cooldown_until: None,
                    suppressed: false,
                    replaced: vec![],
                    learned_from: vec![],
                    last_outcome_at: o.recorded_at,
                });
                out.len() - 1
            }
        };
        let Some(p) = out.get_mut(at) else { continue };
        p.weight += w;
        if o.effective {
            p.effective += 1;
            if let Some(r) = &o.replaced
                && !p.replaced.contains(r)
            {
                p.replaced.push(r.clone());
            }
        } else {
            p.ineffective += 1;
            let until = o.recorded_at + COOLDOWN;
            if p.cooldown_until.is_none_or(|u| until > u) {
                p.cooldown_until = Some(until);
            }
        }
        if p.learned_from.len() < LEARNED_FROM {
            p.learned_from.push(o.request_id);
        }
    }
    for p in &mut out {
        p.weight = (p.weight * 1000.0).round() / 1000.0;
        p.suppressed = p.cooldown_until.is_some_and(|u| now < u);
    }
    out.sort_by(|a, b| {
        b.weight
            .total_cmp(&a.weight)
            .then(b.last_outcome_at.cmp(&a.last_outcome_at))
    });
    out
}

/// A pattern that may be suggested: not in cooldown, and its outcomes add up to more good than
/// bad.
pub fn suggestible(p: &LearnedPattern) -> bool {
    !p.suppressed && p.weight > 0.0
}

/// The strongest pattern that may be suggested.
pub fn strongest(patterns: &[LearnedPattern]) -> Option<&LearnedPattern> {
    patterns.iter().find(|p| suggestible(p))
}

/// One line about a pattern, for the evidence and the prompt.
pub fn describe(p: &LearnedPattern) -> String {
    let mut s = format!(
        "{} ({}): weight {:.2} from {} effective and {} ineffective verified outcome(s), last {}",
        p.workflow_id,
        p.action_type,
        p.weight,
        p.effective,
        p.ineffective,
        p.last_outcome_at.format("%Y-%m-%d %H:%M UTC"),
    );
    if !p.replaced.is_empty() {
        s.push_str(&format!(
            "; approvers chose it instead of {}",
            p.replaced.join(", ")
        ));
    }
    match p.cooldown_until {
        Some(u) if p.suppressed => s.push_str(&format!(
            "; SUPPRESSED: proved ineffective, in cooldown until {}",
            u.format("%Y-%m-%d %H:%M UTC")
        )),
        _ => {}
    }
    s
}

/// The prompt section of the patterns (empty when there are none).
pub fn prompt_section(signature: Option<&Signature>, patterns: &[LearnedPattern]) -> String {
    let Some(sig) = signature else {
        return String::new();
    };
    if patterns.is_empty() {
        return String::new();
    }
    let mut s = format!(
        "## Learned from verified outcomes (hints, not instructions)\nIncidents with the same signature ({}: alert {}, kind {}, pod states [{}], warning events [{}]) were remediated before, and verification measured the effect:\n",
        sig.hash,
        sig.facts.alert,
        sig.facts.kind,
        sig.facts.pod_states.join(", "),
        sig.facts.events.join(", "),
    );
    for p in patterns {
        s.push_str(&format!("- {}\n", describe(p)));
    }
    s.push_str("These are hints: weigh them against the evidence of this incident; a suppressed workflow proved ineffective recently and should not be selected. Any workflow you select is still proven against the cluster, gated by the policy and approved as usual.\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Target;
    use uuid::Uuid;

    fn facts(alert: &str, kind: &str, states: &[&str], events: &[&str]) -> SignatureFacts {
        SignatureFacts {
            alert: alert.into(),
            kind: kind.into(),
            pod_states: states.iter().map(|s| (*s).to_owned()).collect(),
            events: events.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-03-10T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    fn outcome(workflow: &str, effective: bool, hours_ago: i64) -> PatternOutcome {
        PatternOutcome {
            request_id: Uuid::new_v4(),
            signature: signature(facts("A", "Deployment", &["not-ready"], &[])),
            workflow_id: workflow.into(),
            action_type: "RestartDeployment".into(),
            replaced: effective.then(|| "delete-pod".to_owned()),
            target: Target::new("Deployment", "x", Some("ns".into())),
            effective,
            score: Some(if effective { 1.0 } else { 0.2 }),
            recorded_at: now() - Duration::hours(hours_ago),
        }
    }

    #[test]
    fn the_signature_ignores_order_duplicates_and_blanks() {
        let a = signature(facts(
            "KubePodNotReady",
            "Deployment",
            &["not-ready", "waiting:CrashLoopBackOff", "not-ready"],
            &["Unhealthy", " BackOff "],
        ));
        let b = signature(facts(
            "KubePodNotReady ",
            "Deployment",
            &["waiting:CrashLoopBackOff", "", "not-ready"],
            &["BackOff", "Unhealthy", "Unhealthy"],
        ));
        assert_eq!(a, b);
        assert!(
            a.hash.starts_with("sig:") && a.hash.len() == 20,
            "{}",
            a.hash
        );
        assert_eq!(a.facts.events, vec!["BackOff", "Unhealthy"]);
        // Each fact is part of the class: another alert, kind, state or event is another one.
        for other in [
            facts(
                "KubePodCrashLooping",
                "Deployment",
                &["not-ready", "waiting:CrashLoopBackOff"],
                &["BackOff", "Unhealthy"],
            ),
            facts(
                "KubePodNotReady",
                "StatefulSet",
                &["not-ready", "waiting:CrashLoopBackOff"],
                &["BackOff", "Unhealthy"],
            ),
            facts(
                "KubePodNotReady",
                "Deployment",
                &["not-ready"],
                &["BackOff", "Unhealthy"],
            ),
            facts(
                "KubePodNotReady",
                "Deployment",
                &["not-ready", "waiting:CrashLoopBackOff"],
                &["Unhealthy"],
            ),
        ] {
            assert_ne!(signature(other).hash, a.hash);
        }
    }

    #[test]
    fn an_outcome_weighs_half_as_much_every_half_life() {
        assert_eq!(decay(Duration::zero()), 1.0);
        assert!((decay(HALF_LIFE) - 0.5).abs() < 1e-9);
        assert!((decay(HALF_LIFE * 2) - 0.25).abs() < 1e-9);
        assert!((decay(Duration::days(1)) - 0.5_f64.powf(1.0 / 7.0)).abs() < 1e-9);
        // A clock ahead on another replica does not make an outcome weigh more than one.
        assert_eq!(decay(Duration::hours(-3)), 1.0);
    }

    #[test]
    fn weights_add_up_decayed_and_the_strongest_comes_first() {
        let got = aggregate(
            &[
                outcome("restart-rolling", true, 0),
                outcome("restart-rolling", true, 7 * 24),
                outcome("scale-replicas", true, 14 * 24),
                // Outside the look-back: not counted at all.
                outcome("delete-pod", true, 100 * 24),
            ],
            now(),
        );
        assert_eq!(got.len(), 2);
        let first = got.first().unwrap();
        assert_eq!(first.workflow_id, "restart-rolling");
        assert_eq!(first.weight, 1.5);
        assert_eq!(first.effective, 2);
        assert_eq!(first.replaced, vec!["delete-pod"]);
        assert_eq!(first.learned_from.len(), 2);
        assert_eq!(got.get(1).unwrap().weight, 0.25);
        assert_eq!(strongest(&got).unwrap().workflow_id, "restart-rolling");
    }

    #[test]
    fn an_ineffective_outcome_suppresses_its_workflow_for_the_cooldown() {
        let outcomes = [
            outcome("restart-rolling", true, 30),
            outcome("restart-rolling", true, 29),
            outcome("restart-rolling", false, 2),
            outcome("scale-replicas", true, 48),
        ];
        let got = aggregate(&outcomes, now());
        let restart = got
            .iter()
            .find(|p| p.workflow_id == "restart-rolling")
            .unwrap();
        // Still more good than bad, but in cooldown: never suggested until it ends.
        assert!(restart.weight > 0.0);
        assert!(restart.suppressed);
        assert_eq!(
            restart.cooldown_until,
            Some(now() - Duration::hours(2) + COOLDOWN)
        );
        assert_eq!(strongest(&got).unwrap().workflow_id, "scale-replicas");
        assert!(describe(restart).contains("SUPPRESSED"));
        // After the cooldown it may be suggested again, while its weight stays positive.
        let later = aggregate(&outcomes, now() + COOLDOWN);
        let restart = later
            .iter()
            .find(|p| p.workflow_id == "restart-rolling")
            .unwrap();
        assert!(!restart.suppressed && suggestible(restart));
        // An ineffective outcome alone leaves nothing to suggest, cooldown or not.
        let bad = aggregate(&[outcome("restart-rolling", false, 48)], now());
        assert!(!bad.first().unwrap().suppressed);
        assert!(strongest(&bad).is_none());
    }

    #[test]
    fn the_prompt_calls_them_hints() {
        let sig = signature(facts("A", "Deployment", &["not-ready"], &["Unhealthy"]));
        assert_eq!(prompt_section(Some(&sig), &[]), "");
        let s = prompt_section(
            Some(&sig),
            &aggregate(&[outcome("restart-rolling", true, 1)], now()),
        );
        assert!(
            s.starts_with("## Learned from verified outcomes (hints, not instructions)"),
            "{s}"
        );
        assert!(s.contains("restart-rolling") && s.contains("instead of delete-pod"));
    }
}
