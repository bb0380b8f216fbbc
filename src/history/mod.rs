//! Remediation history: what was done to a target before, and how well it worked, as context
//! for the next investigation (the "learning" of DESIGN §3.7 — contextual memory, not training).
//!
//! Input: the records of past remediations of a target (from a [`RemediationHistory`]
//! implementation: the daemon's reads the store's history table, written when a verified
//! remediation concludes; [`InMemoryHistory`] serves tests and the offline commands) and the
//! target's current spec hash.
//! Output: a [`HistoryContext`] with two tiers (24 h full detail; 24 h–90 d summary of entries
//! that match the current spec), each entry's `hashMatch`, `regressionDetected`, and the
//! warnings the prompt carries ([`warnings`]).
//!
//! The same provider answers for learned patterns ([`patterns`]): the verified outcomes of
//! workflows on incidents of one signature, cluster-wide, read by both investigators as hints.

pub mod patterns;

use std::sync::Mutex;

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};

use crate::domain::{
    ActionType, AssessmentReason, HashMatch, HistoryContext, HistoryEntry, HistoryOutcome,
    HistoryRecord, HistoryWarning, PatternOutcome, Target, Tier,
};

/// Tier 1 of the history an investigation reads: every remediation of the target this recent,
/// whatever its spec (the spec's "recent remediations").
pub const TIER1_WINDOW: Duration = Duration::hours(24);
/// How far back the history of a target is read at all (tier 2: remediations on a spec the
/// hash chain connects to the current one; the dashboard's and the API's history too).
pub const HISTORY_WINDOW: Duration = Duration::days(90);

#[derive(Debug, thiserror::Error)]
#[error("remediation history unavailable: {0}")]
pub struct HistoryError(pub String);

/// Where past remediations come from.
#[async_trait]
pub trait RemediationHistory: Send + Sync {
    /// Records for `target` completed within the last 90 days, oldest first.
    async fn records(
        &self,
        target: &Target,
        now: DateTime<Utc>,
    ) -> Result<Vec<HistoryRecord>, HistoryError>;

    /// Verified outcomes recorded for `signature` within [`patterns::LOOKBACK`] of `now`,
    /// from any target in the cluster. None by default (a provider that keeps no outcomes).
    async fn outcomes(
        &self,
        signature: &str,
        now: DateTime<Utc>,
    ) -> Result<Vec<PatternOutcome>, HistoryError> {
        let _ = (signature, now);
        Ok(vec![])
    }
}

/// History held in memory: used until durable history storage exists, and by tests that seed
/// history.
#[derive(Default)]
pub struct InMemoryHistory(Mutex<Vec<HistoryRecord>>, Mutex<Vec<PatternOutcome>>);

impl InMemoryHistory {
    pub fn new(records: Vec<HistoryRecord>) -> Self {
        Self(Mutex::new(records), Mutex::default())
    }
    pub fn add(&self, r: HistoryRecord) {
        if let Ok(mut v) = self.0.lock() {
            v.push(r);
        }
    }
    /// Remember a verified outcome (what verification writes to the store).
    pub fn learn(&self, o: PatternOutcome) {
        if let Ok(mut v) = self.1.lock() {
            v.push(o);
        }
    }
}

#[async_trait]
impl RemediationHistory for InMemoryHistory {
    async fn records(
        &self,
        target: &Target,
        now: DateTime<Utc>,
    ) -> Result<Vec<HistoryRecord>, HistoryError> {
        let all = self
            .0
            .lock()
            .map_err(|_| HistoryError("lock poisoned".into()))?;
        let mut out: Vec<HistoryRecord> = all
            .iter()
            .filter(|r| &r.target == target && now - r.completed_at <= HISTORY_WINDOW)
            .cloned()
            .collect();
        out.sort_by_key(|r| r.completed_at);
        Ok(out)
    }

    async fn outcomes(
        &self,
        signature: &str,
        now: DateTime<Utc>,
    ) -> Result<Vec<PatternOutcome>, HistoryError> {
        let all = self
            .1
            .lock()
            .map_err(|_| HistoryError("lock poisoned".into()))?;
        Ok(all
            .iter()
            .filter(|o| o.signature.hash == signature && now - o.recorded_at <= patterns::LOOKBACK)
            .cloned()
            .collect())
    }
}

/// The current spec as the history compares it: its hash, and for a target an autoscaler
/// scales, its hash without `replicas` ([`crate::cluster::context::drift_hash`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct CurrentSpec<'a> {
    pub hash: Option<&'a str>,
    /// Only for an autoscaled target: its scaling is nobody's change to the configuration.
    pub autoscaled_drift: Option<&'a str>,
}

impl<'a> CurrentSpec<'a> {
    /// A target nothing scales: every field of the spec counts.
    pub fn of(hash: Option<&'a str>) -> Self {
        Self {
            hash,
            autoscaled_drift: None,
        }
    }

    /// Whether a recorded spec (its hash, and its hash without `replicas`) is this one:
    /// the same hash, or, for an autoscaled target, the same hash without `replicas`
    /// (`context::unchanged_spec`'s rule). How the history and the guardrails' chain link one
    /// recorded spec to another.
    pub fn is(&self, full: Option<&str>, drift: Option<&str>) -> bool {
        (full.is_some() && full == self.hash) || (drift.is_some() && drift == self.autoscaled_drift)
    }
}

/// The seed's three-way comparison: the current spec is the one before the remediation, else
/// the one after it, else neither.
fn hash_match(r: &HistoryRecord, current: CurrentSpec) -> HashMatch {
    if current.is(
        r.pre_remediation_spec_hash.as_deref(),
        r.pre_remediation_drift_hash.as_deref(),
    ) {
        HashMatch::PreRemediation
    } else if current.is(
        r.post_remediation_spec_hash.as_deref(),
        r.post_remediation_drift_hash.as_deref(),
    ) {
        HashMatch::PostRemediation
    } else {
        HashMatch::None
    }
}

/// Whether the current spec undoes `r` (its `hashMatch` is `m`): it is the spec before it and
/// not the one after. A remediation that left the target's spec as it was (a pod deleted, a
/// maximum raised on its autoscaler, whose scaling then changes only `replicas`) is at both:
/// nothing of it was undone, though its `hashMatch` is `preRemediation` as the seed compares.
fn undone(r: &HistoryRecord, current: CurrentSpec, m: HashMatch) -> bool {
    m == HashMatch::PreRemediation
        && !current.is(
            r.post_remediation_spec_hash.as_deref(),
            r.post_remediation_drift_hash.as_deref(),
        )
}

/// Tier 1: every remediation of the target in the last 24 h, full detail (the recent chain).
/// Tier 2: older ones (to 90 d) whose spec matches the current one, summarised.
pub fn build_context(
    target: &Target,
    current: CurrentSpec,
    records: &[HistoryRecord],
    now: DateTime<Utc>,
) -> HistoryContext {
    let mut tier1 = Vec::new();
    let mut tier2 = Vec::new();
    let autoscaled = current.autoscaled_drift.is_some();
    let mut regression_detected = false;
    for r in records {
        let m = hash_match(r, current);
        let age = now - r.completed_at;
        regression_detected |= age <= HISTORY_WINDOW && undone(r, current, m);
        if age <= TIER1_WINDOW {
            tier1.push(HistoryEntry {
                remediation_uid: r.remediation_uid.clone(),
                completed_at: r.completed_at,
                workflow_type: r.workflow_type.clone(),
                outcome: r.outcome,
                effectiveness_score: r.effectiveness_score,
                hash_match: m,
                signal_resolved: r.signal_resolved,
                assessment_reason: r.assessment_reason,
                pre_remediation_spec_hash: r.pre_remediation_spec_hash.clone(),
                post_remediation_spec_hash: r.post_remediation_spec_hash.clone(),
                pre_remediation_drift_hash: r
                    .pre_remediation_drift_hash
                    .clone()
                    .filter(|_| autoscaled),
                post_remediation_drift_hash: r
                    .post_remediation_drift_hash
                    .clone()
                    .filter(|_| autoscaled),
                health_checks: r.health_checks.clone(),
            });
        } else if age <= HISTORY_WINDOW && m != HashMatch::None {
            tier2.push(HistoryEntry {
                remediation_uid: r.remediation_uid.clone(),
                completed_at: r.completed_at,
                workflow_type: r.workflow_type.clone(),
                outcome: r.outcome,
                effectiveness_score: r.effectiveness_score,
                hash_match: m,
                signal_resolved: r.signal_resolved,
                assessment_reason: r.assessment_reason,
                pre_remediation_spec_hash: None,
                post_remediation_spec_hash: None,
                pre_remediation_drift_hash: None,
                post_remediation_drift_hash: None,
                health_checks: None,
            });
        }
    }
    HistoryContext {
        target_resource: target.to_string(),
        current_spec_hash: current.hash.map(str::to_owned),
        current_drift_hash: current.autoscaled_drift.map(str::to_owned),
        regression_detected,
        tier1: Tier {
            window: "24h".into(),
            chain: tier1,
        },
        tier2: Tier {
            window: "2160h".into(),
            chain: tier2,
        },
    }
}

/// How many tries of one remediation before the next goes to a human: once may be bad luck,
/// twice is a remedy that does not fit.
pub const INEFFECTIVE_TRIES_ESCALATE: usize = 2;

/// How many remediations of `action_type` completed without resolving the signal on this
/// configuration: those whose spec before or after is the current one, and the chain of
/// changes that led to it (a forward chain 64 → 128 → 256 Mi counts in full while the current
/// spec is 256 Mi; a resolved link ends it). Tries on a configuration since changed by someone
/// else say nothing of this one, and a remediation that failed never applied its remedy as a
/// whole: a rollout that does not become available still completes (its wait reports it), so
/// what fails after a write is a drain that cordoned and could evict nothing. The seed's
/// contract ("completed successfully multiple times but the same signal keeps recurring"),
/// asked once: the prompt's `repeated_ineffective_remediation` warning and the offline
/// investigator's escalation both count it.
pub fn ineffective_tries(h: &HistoryContext, action_type: &ActionType) -> usize {
    let entries: Vec<&HistoryEntry> = h
        .tier1
        .chain
        .iter()
        .chain(&h.tier2.chain)
        .filter(|e| {
            e.workflow_type == *action_type
                && e.outcome == HistoryOutcome::Completed
                && e.signal_resolved != Some(true)
        })
        .collect();
    let mut counted: Vec<bool> = entries
        .iter()
        .map(|e| e.hash_match != HashMatch::None)
        .collect();
    // Walk the chain back from the current spec, newest first (for an autoscaled target, by
    // the hashes without `replicas` as well).
    let mut at = (h.current_spec_hash.clone(), h.current_drift_hash.clone());
    let mut order: Vec<usize> = (0..entries.len()).collect();
    order.sort_by_key(|i| std::cmp::Reverse(entries[*i].completed_at));
    while at.0.is_some() || at.1.is_some() {
        let here = CurrentSpec {
            hash: at.0.as_deref(),
            autoscaled_drift: at.1.as_deref(),
        };
        let Some(pos) = order.iter().position(|&i| {
            here.is(
                entries[i].post_remediation_spec_hash.as_deref(),
                entries[i].post_remediation_drift_hash.as_deref(),
            )
        }) else {
            break;
        };
        let i = order.remove(pos);
        counted[i] = true;
        at = (
            entries[i].pre_remediation_spec_hash.clone(),
            entries[i].pre_remediation_drift_hash.clone(),
        );
    }
    counted.iter().filter(|c| **c).count()
}

/// The warnings the prompt carries (the Kubernaut agent's history section).
pub fn warnings(ctx: &HistoryContext) -> Vec<HistoryWarning> {
    let mut out = Vec::new();
    let warn = |kind: &str, message: String| HistoryWarning {
        kind: kind.into(),
        message,
    };
    if ctx.regression_detected {
        out.push(warn(
            "configuration_regression",
            "The current resource spec matches a pre-remediation state. Consider a different remediation approach.".into(),
        ));
    }
    let entries: Vec<&HistoryEntry> = ctx.tier2.chain.iter().chain(&ctx.tier1.chain).collect();
    let mut types: Vec<&ActionType> = entries.iter().map(|e| &e.workflow_type).collect();
    types.sort_unstable();
    types.dedup();
    for t in types {
        let scores: Vec<f64> = entries
            .iter()
            .filter(|e| e.workflow_type == *t)
            .filter_map(|e| e.effectiveness_score)
            .collect();
        if scores.len() >= 3 && scores.windows(2).all(|w| w[1] < w[0]) {
            out.push(warn(
                "declining_effectiveness",
                format!("{t} was applied {} times with decreasing effectiveness ({}): each successive application is less effective, suggesting the workflow treats the symptom rather than the root cause.",
                    scores.len(),
                    scores.iter().map(|s| format!("{s:.2}")).collect::<Vec<_>>().join(" → "))),
            );
        }
        let ineffective = ineffective_tries(ctx, t);
        if ineffective >= INEFFECTIVE_TRIES_ESCALATE {
            out.push(warn(
                "repeated_ineffective_remediation",
                format!("{t} completed {ineffective} times on this configuration (or the chain of changes that led to it) but the issue recurs. Recommend selecting needs_human_review or an alternative escalation workflow."),
            ));
        }
    }
    for (i, e) in entries.iter().enumerate() {
        if e.assessment_reason == Some(AssessmentReason::SpecDrift) {
            out.push(warn(
                "spec_drift",
                format!("{} ({}): the target resource spec was modified during the assessment window, invalidating effectiveness data. Do not treat as a failed remediation.", e.remediation_uid, e.workflow_type),
            ));
            // The next remediation began where this one left the spec (by the hashes
            // without `replicas` too, which an autoscaled target's entries carry).
            let left = CurrentSpec {
                hash: e.post_remediation_spec_hash.as_deref(),
                autoscaled_drift: e.post_remediation_drift_hash.as_deref(),
            };
            let from_here = |n: &&&HistoryEntry| {
                left.is(
                    n.pre_remediation_spec_hash.as_deref(),
                    n.pre_remediation_drift_hash.as_deref(),
                )
            };
            if entries.iter().skip(i + 1).any(|n| from_here(&n)) {
                out.push(warn(
                    "spec_drift_causal_chain",
                    format!("{}: the outcome was unstable, and a subsequent remediation was triggered from the resulting state.", e.remediation_uid),
                ));
            }
        }
    }
    out
}

/// The history section of a prompt (empty when there is no history).
pub fn prompt_section(ctx: &HistoryContext) -> String {
    if ctx.is_empty() {
        return String::new();
    }
    let mut s = String::from("## Remediation history of this target\n");
    for e in ctx.tier1.chain.iter().chain(&ctx.tier2.chain) {
        s.push_str(&format!(
            "- {} {} {}: outcome {}, effectiveness {}, hashMatch {:?}, signal resolved {}{}\n",
            e.completed_at.format("%Y-%m-%d %H:%M"),
            e.remediation_uid,
            e.workflow_type,
            e.outcome,
            e.effectiveness_score
                .map_or("n/a".into(), |s| format!("{s:.2}")),
            e.hash_match,
            e.signal_resolved
                .map_or("unknown".into(), |b| b.to_string()),
            e.assessment_reason
                .map(|r| format!(", assessment {}", r.history_name()))
                .unwrap_or_default()
        ));
    }
    let ws = warnings(ctx);
    if !ws.is_empty() {
        s.push_str("Warnings:\n");
        for w in &ws {
            s.push_str(&format!("- {}: {}\n", w.kind, w.message));
        }
    }
    s.push_str("Avoid repeating workflows that previously failed or had poor effectiveness. If a workflow completed successfully multiple times but the same signal keeps recurring, escalate to human review.\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(
        uid: &str,
        hours_ago: i64,
        wtype: &str,
        score: f64,
        pre: &str,
        post: &str,
        resolved: bool,
    ) -> HistoryRecord {
        HistoryRecord {
            remediation_uid: uid.into(),
            target: Target::new("Deployment", "my-app", Some("production".into())),
            completed_at: Utc::now() - Duration::hours(hours_ago),
            signal_name: "KubePodCrashLooping".into(),
            workflow_type: wtype.into(),
            workflow_id: wtype.to_lowercase(),
            outcome: HistoryOutcome::Completed,
            effectiveness_score: Some(score),
            pre_remediation_spec_hash: Some(pre.into()),
            post_remediation_spec_hash: Some(post.into()),
            pre_remediation_drift_hash: None,
            post_remediation_drift_hash: None,
            signal_resolved: Some(resolved),
            assessment_reason: None,
            health_checks: None,
        }
    }

    #[test]
    fn the_seed_chain_example() {
        let t = Target::new("Deployment", "my-app", Some("production".into()));
        let records = vec![
            record(
                "rr-001",
                10,
                "RestartPod",
                0.35,
                "sha256:AAA",
                "sha256:AAA",
                false,
            ),
            record(
                "rr-002",
                8,
                "IncreaseMemory",
                0.60,
                "sha256:AAA",
                "sha256:BBB",
                false,
            ),
            record(
                "rr-003",
                4,
                "RollbackDeployment",
                0.20,
                "sha256:BBB",
                "sha256:CCC",
                false,
            ),
            record(
                "rr-old",
                45 * 24,
                "RollbackDeployment",
                0.92,
                "sha256:AAA",
                "sha256:DDD",
                true,
            ),
            record(
                "rr-unrelated",
                50 * 24,
                "ScaleReplicas",
                0.9,
                "sha256:ZZZ",
                "sha256:YYY",
                true,
            ),
        ];
        let ctx = build_context(
            &t,
            CurrentSpec::of(Some("sha256:AAA")),
            &records,
            Utc::now(),
        );
        assert!(ctx.regression_detected);
        let m: Vec<HashMatch> = ctx.tier1.chain.iter().map(|e| e.hash_match).collect();
        assert_eq!(
            m,
            [
                HashMatch::PreRemediation,
                HashMatch::PreRemediation,
                HashMatch::None
            ]
        );
        assert_eq!(ctx.tier2.chain.len(), 1, "only matching older entries");
        assert_eq!(ctx.tier2.chain[0].remediation_uid, "rr-old");
        let kinds: Vec<String> = warnings(&ctx).into_iter().map(|w| w.kind).collect();
        assert!(
            kinds.contains(&"configuration_regression".to_owned()),
            "{kinds:?}"
        );
    }

    #[test]
    fn declining_and_drift_warnings_but_no_repeat_on_a_changed_configuration() {
        let t = Target::new("Deployment", "my-app", Some("production".into()));
        let mut records = vec![
            record("a", 20, "RestartDeployment", 0.8, "h1", "h1", false),
            record("b", 15, "RestartDeployment", 0.5, "h1", "h1", false),
            record("c", 10, "RestartDeployment", 0.2, "h1", "h1", false),
        ];
        let mut drift = record("d", 5, "IncreaseMemoryLimits", 0.4, "h1", "h2", false);
        drift.assessment_reason = Some(AssessmentReason::SpecDrift);
        records.push(drift);
        records.push(record("e", 2, "RollbackDeployment", 0.5, "h2", "h3", true));
        let ctx = build_context(&t, CurrentSpec::of(Some("h9")), &records, Utc::now());
        let kinds: Vec<String> = warnings(&ctx).into_iter().map(|w| w.kind).collect();
        for k in [
            "declining_effectiveness",
            "spec_drift",
            "spec_drift_causal_chain",
        ] {
            assert!(kinds.contains(&k.to_owned()), "{k}: {kinds:?}");
        }
        assert!(!kinds.contains(&"configuration_regression".to_owned()));
        // The three restarts were tried on h1; the spec is h9 now, changed since by someone
        // else: they say nothing of this configuration ([`ineffective_tries`]).
        assert!(!kinds.contains(&"repeated_ineffective_remediation".to_owned()));
        assert!(prompt_section(&ctx).contains("Warnings:"));
    }

    fn tried(uid: &str, hours_ago: i64, pre: &str, post: &str, resolved: bool) -> HistoryRecord {
        HistoryRecord {
            remediation_uid: uid.into(),
            target: Target::new("Deployment", "api", Some("shop".into())),
            completed_at: Utc::now() - Duration::hours(hours_ago),
            signal_name: "KubePodCrashLooping".into(),
            workflow_type: "IncreaseMemoryLimits".into(),
            workflow_id: "increase-memory-limits".into(),
            outcome: HistoryOutcome::Completed,
            effectiveness_score: Some(0.1),
            pre_remediation_spec_hash: Some(pre.into()),
            post_remediation_spec_hash: Some(post.into()),
            pre_remediation_drift_hash: None,
            post_remediation_drift_hash: None,
            signal_resolved: Some(resolved),
            assessment_reason: Some(AssessmentReason::Full),
            health_checks: None,
        }
    }

    fn tries_count(current: &str, records: &[HistoryRecord]) -> usize {
        let target = Target::new("Deployment", "api", Some("shop".into()));
        let h = build_context(&target, CurrentSpec::of(Some(current)), records, Utc::now());
        ineffective_tries(&h, &ActionType::IncreaseMemoryLimits)
    }

    #[test]
    fn a_forward_chain_of_unresolved_remediations_counts_in_full() {
        // 64 → 128 → 256 Mi, still OOMKilled: both count although only the last one's
        // post-remediation spec is the current one.
        let chain = [
            tried("rr-1", 3, "h64", "h128", false),
            tried("rr-2", 2, "h128", "h256", false),
        ];
        assert_eq!(tries_count("h256", &chain), 2);
        // A resolved link ends the count of failures; an unrelated spec counts nothing.
        let healed = [
            tried("rr-1", 3, "h64", "h128", true),
            tried("rr-2", 2, "h128", "h256", false),
        ];
        assert_eq!(tries_count("h256", &healed), 1);
        assert_eq!(tries_count("h999", &chain), 0);
        // A regression back to a configuration that was already remediated counts too.
        assert_eq!(tries_count("h64", &chain), 1);
        // A remediation that failed never applied its remedy as a whole (a drain that
        // cordoned and evicted nothing): it is no ineffective try.
        let mut failed = tried("rr-2", 2, "h128", "h128", false);
        failed.outcome = HistoryOutcome::Failed;
        assert_eq!(tries_count("h128", &[chain[0].clone(), failed]), 1);
    }

    /// Issue 43: the prompt's warning and the offline escalation count the same tries: two
    /// on a configuration since changed by someone else warn of nothing (the model was told
    /// "completed 2 times" while the rules proposed the remedy again).
    #[test]
    fn the_prompt_warns_of_the_ineffective_tries_the_escalation_counts() {
        let target = Target::new("Deployment", "api", Some("shop".into()));
        let tries = [
            tried("rr-1", 3, "h64", "h128", false),
            tried("rr-2", 2, "h128", "h256", false),
        ];
        let warned = |current: &str| {
            let h = build_context(&target, CurrentSpec::of(Some(current)), &tries, Utc::now());
            warnings(&h)
                .iter()
                .any(|w| w.kind == "repeated_ineffective_remediation")
        };
        assert!(warned("h256"));
        assert_eq!(tries_count("h256", &tries), 2);
        assert!(!warned("h999"));
        assert_eq!(tries_count("h999", &tries), 0);
    }

    /// Issue 43: an autoscaler scaling the target after two ineffective memory raises changes
    /// its spec's hash, not its configuration (`context::unchanged_spec`): the tries still count,
    /// by the hashes without `replicas`, and regressions are still seen. A target nothing scales
    /// keeps every field: a count set by hand is somebody's change.
    #[test]
    fn an_autoscalers_scaling_hides_no_ineffective_try() {
        let target = Target::new("Deployment", "api", Some("shop".into()));
        let with_drift = |mut r: HistoryRecord, pre: &str, post: &str| {
            r.pre_remediation_drift_hash = Some(pre.into());
            r.post_remediation_drift_hash = Some(post.into());
            r
        };
        // 64 → 128 → 256 Mi at 3 replicas; the autoscaler has since set 5.
        let tries = [
            with_drift(tried("rr-1", 3, "h64x3", "h128x3", false), "d64", "d128"),
            with_drift(tried("rr-2", 2, "h128x3", "h256x3", false), "d128", "d256"),
        ];
        let context = |drift: Option<&str>| {
            let current = CurrentSpec {
                hash: Some("h256x5"),
                autoscaled_drift: drift,
            };
            build_context(&target, current, &tries, Utc::now())
        };
        let scaled = context(Some("d256"));
        assert_eq!(
            ineffective_tries(&scaled, &ActionType::IncreaseMemoryLimits),
            2
        );
        assert!(
            warnings(&scaled)
                .iter()
                .any(|w| w.kind == "repeated_ineffective_remediation")
        );
        assert_eq!(
            ineffective_tries(&context(None), &ActionType::IncreaseMemoryLimits),
            0
        );
        // Back at 64 Mi, 5 replicas: a regression to a spec already remediated.
        let current = CurrentSpec {
            hash: Some("h64x5"),
            autoscaled_drift: Some("d64"),
        };
        assert!(build_context(&target, current, &tries, Utc::now()).regression_detected);
        // A maximum raised on its autoscaler left the spec as it was (before = after): the
        // autoscaler then scaling it is where the remediation left it, no regression.
        let mut raised = tried("rr-3", 1, "h256x5", "h256x5", true);
        raised.workflow_type = "PatchHPAMaxReplicas".into();
        let raised = with_drift(raised, "d256", "d256");
        let current = CurrentSpec {
            hash: Some("h256x8"),
            autoscaled_drift: Some("d256"),
        };
        let h = build_context(&target, current, &[raised], Utc::now());
        assert!(!h.regression_detected);
        // A remediation whose assessment the spec's drift invalidated, and the next one begun
        // where it left the configuration, the autoscaler having scaled in between.
        let mut drifted = with_drift(tried("rr-4", 3, "h128x3", "h256x3", false), "d128", "d256");
        drifted.assessment_reason = Some(AssessmentReason::SpecDrift);
        let next = with_drift(tried("rr-5", 2, "h256x5", "h512x5", false), "d256", "d512");
        let current = CurrentSpec {
            hash: Some("h512x5"),
            autoscaled_drift: Some("d512"),
        };
        let kinds: Vec<String> = warnings(&build_context(
            &target,
            current,
            &[drifted, next],
            Utc::now(),
        ))
        .into_iter()
        .map(|w| w.kind)
        .collect();
        assert!(
            kinds.contains(&"spec_drift_causal_chain".to_owned()),
            "{kinds:?}"
        );
    }
}
