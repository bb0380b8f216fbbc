//! Guardrails (DESIGN §3.7; defaults as Kubernaut's orchestrator): the checks that keep a
//! daemon from flapping production, run before anything is executed.
//!
//! Input: the target's remediation history of the lookback window (oldest first), the workflow
//! about to run, and the target object's annotations. Output: the first [`Block`] that applies,
//! or none. Inconclusive assessments (spec drift, expired, unassessed) count as ineffective: a
//! remediation nobody could show to work is not allowed to repeat forever.

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use crate::domain::{
    AssessmentReason, DEFAULT_EFFECTIVENESS_THRESHOLD, HistoryOutcome, HistoryRecord,
};
use crate::history::CurrentSpec;

/// The guardrail settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Guardrails {
    /// Consecutive ineffective remediations of a target that block the next one.
    pub ineffective_chain: usize,
    /// Remediations of a target within the lookback window that block the next one.
    pub recurrence: usize,
    pub lookback: Duration,
    /// The same workflow on the same target is not run again within this.
    pub cooldown: Duration,
    /// Consecutive failed executions of a target…
    pub consecutive_failures: usize,
    /// …block it for this long.
    pub failure_backoff: Duration,
    /// Below this effectiveness score a remediation counts as ineffective.
    pub effectiveness_threshold: f64,
}

impl Guardrails {
    /// Consecutive ineffective remediations that block the next one, unless configured.
    pub const DEFAULT_INEFFECTIVE_CHAIN: usize = 3;
    /// Remediations within the lookback that block the next one, unless configured.
    pub const DEFAULT_RECURRENCE: usize = 5;
    /// The lookback window, unless configured: 4 h.
    pub const DEFAULT_LOOKBACK_SECONDS: u64 = 4 * 3600;
    /// The cooldown of a workflow on a target, unless configured: 5 min.
    pub const DEFAULT_COOLDOWN_SECONDS: u64 = 300;
    /// Failed executions in a row on a target that block the next one.
    pub const CONSECUTIVE_FAILURES: usize = 3;
    /// How long those failures block it: an hour, long enough for a person to look, short
    /// enough that a cause fixed meanwhile is remediated again without one.
    pub const FAILURE_BACKOFF_SECONDS: i64 = 3600;
}

impl Default for Guardrails {
    fn default() -> Self {
        Self {
            ineffective_chain: Self::DEFAULT_INEFFECTIVE_CHAIN,
            recurrence: Self::DEFAULT_RECURRENCE,
            lookback: Duration::seconds(Self::DEFAULT_LOOKBACK_SECONDS as i64),
            cooldown: Duration::seconds(Self::DEFAULT_COOLDOWN_SECONDS as i64),
            consecutive_failures: Self::CONSECUTIVE_FAILURES,
            failure_backoff: Duration::seconds(Self::FAILURE_BACKOFF_SECONDS),
            effectiveness_threshold: DEFAULT_EFFECTIVENESS_THRESHOLD,
        }
    }
}

/// Why a request is blocked; the name is what the audit trail, the metric and the reason say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum BlockKind {
    IneffectiveChain,
    RecurrenceCap,
    RecentlyRemediated,
    ConsecutiveFailures,
    ResourceBusy,
    UnmanagedResource,
}

impl BlockKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BlockKind::IneffectiveChain => "IneffectiveChain",
            BlockKind::RecurrenceCap => "RecurrenceCap",
            BlockKind::RecentlyRemediated => "RecentlyRemediated",
            BlockKind::ConsecutiveFailures => "ConsecutiveFailures",
            BlockKind::ResourceBusy => "ResourceBusy",
            BlockKind::UnmanagedResource => "UnmanagedResource",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Block {
    pub kind: BlockKind,
    pub message: String,
}

impl Block {
    fn new(kind: BlockKind, message: String) -> Self {
        Self { kind, message }
    }

    /// The request's reason: `IneffectiveChain: …`.
    pub fn reason(&self) -> String {
        format!("{}: {}", self.kind.as_str(), self.message)
    }
}

/// Whether a past remediation helped. Failed executions, inconclusive assessments and scores
/// under the threshold did not.
pub fn effective(r: &HistoryRecord, threshold: f64) -> bool {
    r.outcome == HistoryOutcome::Completed
        && r.assessment_reason
            .is_none_or(|a| matches!(a, AssessmentReason::Full | AssessmentReason::Partial))
        && r.effectiveness_score.is_some_and(|s| s >= threshold)
}

/// The longest run of consecutive remediations where each one's post-remediation spec hash is
/// the next one's pre-remediation hash, with the same action type and the signal unresolved:
/// memory raised 64 → 128 → 256 Mi and still OOMKilled, each step a "success" that did not help.
/// Linked by the hashes without `replicas` too, where both records keep them: an autoscaler
/// scaling the target between two raises breaks no chain (for an operator's cap, erring toward
/// linking is the safe side).
fn forward_chain(history: &[&HistoryRecord]) -> usize {
    let mut best = 0;
    let mut run = 0;
    let mut prev: Option<&HistoryRecord> = None;
    for r in history {
        let unresolved = r.signal_resolved != Some(true);
        let links = prev.is_some_and(|p| {
            let left = CurrentSpec {
                hash: p.post_remediation_spec_hash.as_deref(),
                autoscaled_drift: p.post_remediation_drift_hash.as_deref(),
            };
            p.workflow_type == r.workflow_type
                && left.is(
                    r.pre_remediation_spec_hash.as_deref(),
                    r.pre_remediation_drift_hash.as_deref(),
                )
        });
        run = match (unresolved, links) {
            (true, true) => run + 1,
            (true, false) => 1,
            (false, _) => 0,
        };
        best = best.max(run);
        prev = Some(r);
    }
    best
}

/// The first guardrail that blocks running `workflow_id` on the target now. `history` is the
/// target's, oldest first; entries outside the lookback window are ignored.
pub fn check(
    g: &Guardrails,
    history: &[HistoryRecord],
    workflow_id: &str,
    now: DateTime<Utc>,
) -> Option<Block> {
    let recent: Vec<&HistoryRecord> = history
        .iter()
        .filter(|r| now - r.completed_at <= g.lookback)
        .collect();
    // Consecutive ineffective remediations, newest backwards.
    let ineffective_run = recent
        .iter()
        .rev()
        .take_while(|r| !effective(r, g.effectiveness_threshold))
        .count();
    if g.ineffective_chain > 0 && ineffective_run >= g.ineffective_chain {
        return Some(Block::new(
            BlockKind::IneffectiveChain,
            format!(
                "the last {ineffective_run} remediations of this target within {} h were not effective; a human must look at it",
                g.lookback.num_hours()
            ),
        ));
    }
    let chain = forward_chain(&recent);
    if g.ineffective_chain > 0 && chain >= g.ineffective_chain {
        return Some(Block::new(
            BlockKind::IneffectiveChain,
            format!(
                "{chain} remediations in a row each started from the spec the previous one left, with the same action and the signal still firing"
            ),
        ));
    }
    if g.recurrence > 0 && recent.len() >= g.recurrence {
        return Some(Block::new(
            BlockKind::RecurrenceCap,
            format!(
                "{} remediations of this target within {} h (cap {})",
                recent.len(),
                g.lookback.num_hours(),
                g.recurrence
            ),
        ));
    }
    let failures = history
        .iter()
        .rev()
        .take_while(|r| {
            r.outcome == HistoryOutcome::Failed && now - r.completed_at <= g.failure_backoff
        })
        .count();
    if g.consecutive_failures > 0 && failures >= g.consecutive_failures {
        return Some(Block::new(
            BlockKind::ConsecutiveFailures,
            format!(
                "the last {failures} executions on this target failed; no new attempt for {} min after the last",
                g.failure_backoff.num_minutes()
            ),
        ));
    }
    if let Some(last) = history
        .iter()
        .rev()
        .find(|r| r.workflow_id == workflow_id && now - r.completed_at < g.cooldown)
    {
        return Some(Block::new(
            BlockKind::RecentlyRemediated,
            format!(
                "{workflow_id} ran on this target {} s ago (cooldown {} s)",
                (now - last.completed_at).num_seconds(),
                g.cooldown.num_seconds()
            ),
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Target;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-03-01T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    fn entry(minutes_ago: i64, workflow: &str, score: f64) -> HistoryRecord {
        HistoryRecord {
            remediation_uid: format!("r-{minutes_ago}"),
            target: Target::new("Deployment", "api", Some("shop".into())),
            completed_at: now() - Duration::minutes(minutes_ago),
            signal_name: "KubePodCrashLooping".into(),
            workflow_type: "IncreaseMemoryLimits".into(),
            workflow_id: workflow.into(),
            outcome: HistoryOutcome::Completed,
            effectiveness_score: Some(score),
            pre_remediation_spec_hash: None,
            post_remediation_spec_hash: None,
            pre_remediation_drift_hash: None,
            post_remediation_drift_hash: None,
            signal_resolved: Some(score >= 0.7),
            assessment_reason: Some(AssessmentReason::Full),
            health_checks: None,
        }
    }

    #[test]
    fn three_ineffective_remediations_block_the_fourth() {
        let g = Guardrails::default();
        let h = vec![
            entry(90, "a", 0.2),
            entry(60, "b", 0.1),
            entry(30, "a", 0.3),
        ];
        let b = check(&g, &h, "c", now()).unwrap();
        assert_eq!(b.kind, BlockKind::IneffectiveChain);
        assert!(b.reason().starts_with("IneffectiveChain: the last 3"));
        // An effective one in between breaks the run.
        let h = vec![
            entry(90, "a", 0.2),
            entry(60, "b", 0.9),
            entry(30, "a", 0.3),
        ];
        assert_eq!(check(&g, &h, "c", now()), None);
        // Outside the window they do not count.
        let h = vec![
            entry(600, "a", 0.2),
            entry(500, "b", 0.1),
            entry(30, "a", 0.3),
        ];
        assert_eq!(check(&g, &h, "c", now()), None);
    }

    #[test]
    fn spec_drift_counts_as_ineffective() {
        let g = Guardrails::default();
        let mut drifted = entry(30, "a", 0.9);
        drifted.assessment_reason = Some(AssessmentReason::SpecDrift);
        let h = vec![entry(90, "a", 0.2), entry(60, "b", 0.1), drifted];
        assert_eq!(
            check(&g, &h, "c", now()).unwrap().kind,
            BlockKind::IneffectiveChain
        );
    }

    #[test]
    fn a_forward_chain_of_successful_but_unhelpful_changes_is_blocked() {
        // 64 → 128 → 256 Mi: each "completed" with a good score, the signal never resolved.
        let g = Guardrails::default();
        let mut h = Vec::new();
        for (i, (pre, post)) in [("h64", "h128"), ("h128", "h256"), ("h256", "h512")]
            .iter()
            .enumerate()
        {
            let mut e = entry(90 - 30 * i as i64, "raise", 0.8);
            e.pre_remediation_spec_hash = Some((*pre).into());
            e.post_remediation_spec_hash = Some((*post).into());
            e.signal_resolved = Some(false);
            h.push(e);
        }
        let b = check(&g, &h, "raise", now()).unwrap();
        assert_eq!(b.kind, BlockKind::IneffectiveChain);
        assert!(
            b.message.contains("3 remediations in a row"),
            "{}",
            b.message
        );
        // An autoscaler scaled the target between the raises: the whole specs do not link,
        // the specs without replicas do.
        for (i, e) in h.iter_mut().enumerate() {
            e.pre_remediation_spec_hash = Some(format!("scaled-{i}-pre"));
            e.post_remediation_spec_hash = Some(format!("scaled-{i}-post"));
        }
        assert!(
            check(&g, &h, "raise", now()).is_none_or(|b| b.kind != BlockKind::IneffectiveChain)
        );
        for (e, (pre, post)) in
            h.iter_mut()
                .zip([("d64", "d128"), ("d128", "d256"), ("d256", "d512")])
        {
            e.pre_remediation_drift_hash = Some(pre.into());
            e.post_remediation_drift_hash = Some(post.into());
        }
        assert_eq!(
            check(&g, &h, "raise", now()).map(|b| b.kind),
            Some(BlockKind::IneffectiveChain)
        );
    }

    #[test]
    fn recurrence_cap_cooldown_and_consecutive_failures() {
        let g = Guardrails::default();
        let h: Vec<_> = (0..5).map(|i| entry(200 - i * 40, "a", 0.9)).collect();
        assert_eq!(
            check(&g, &h, "b", now()).unwrap().kind,
            BlockKind::RecurrenceCap
        );

        let h = vec![entry(3, "a", 0.9)];
        assert_eq!(
            check(&g, &h, "a", now()).unwrap().kind,
            BlockKind::RecentlyRemediated
        );
        assert_eq!(
            check(&g, &h, "b", now()),
            None,
            "another workflow is not cooled down"
        );
        let h = vec![entry(6, "a", 0.9)];
        assert_eq!(check(&g, &h, "a", now()), None, "five minutes have passed");

        let failed = |m| {
            let mut e = entry(m, "a", 0.0);
            e.outcome = HistoryOutcome::Failed;
            e.effectiveness_score = None;
            e
        };
        // Failures count as ineffective too, so three of them are first an ineffective chain;
        // with the chain guardrail off, the failure backoff applies.
        let g = Guardrails {
            ineffective_chain: 0,
            ..Guardrails::default()
        };
        let h = vec![failed(50), failed(40), failed(30)];
        assert_eq!(
            check(&g, &h, "b", now()).unwrap().kind,
            BlockKind::ConsecutiveFailures
        );
        let h = vec![failed(150), failed(140), failed(130)];
        assert_eq!(check(&g, &h, "b", now()), None, "the backoff is over");
    }
}
