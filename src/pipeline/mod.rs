//! The remediation pipeline: the request state machine and the stages that move it.
//!
//! [`Pipeline::step`] takes a request in a runnable phase and decides its next committed state
//! (a [`Step`]); it touches nothing durable itself. The [`worker`] claims requests from the
//! store, calls `step` and commits each result with its audit events in one transaction. The
//! same `step` drives `kubemedic investigate` without a store, so the daemon and the CLI run the
//! same code.

mod slots;
pub mod worker;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tracing::Instrument as _;

use chrono::{DateTime, Utc};

use crate::clock::Clock;
use crate::domain::{
    AuditDraft, DEFAULT_APPROVAL_TIMEOUT_SECONDS, Phase, RemediationRequest, Stage, StageError,
    StageState, Waiting, stage_name,
};

/// The next committed state of a request.
#[derive(Debug, Clone)]
pub enum Step {
    /// Move to `to` (possibly terminal) with the stage's results.
    Move {
        to: Phase,
        reason: Option<String>,
        state: StageState,
        events: Vec<AuditDraft>,
    },
    /// Stay in the phase; try again at `not_before`.
    Wait {
        state: StageState,
        not_before: DateTime<Utc>,
        events: Vec<AuditDraft>,
    },
}

/// How long a request may stay in a phase, and in the pipeline as a whole, before it is ended
/// with the reason (a stuck investigation, an approval nobody gives, an execution or a
/// verification that never finishes). `None` means no limit.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PhaseTimeouts {
    pub investigating: Option<Duration>,
    pub awaiting_approval: Option<Duration>,
    pub executing: Option<Duration>,
    pub verifying: Option<Duration>,
    pub overall: Option<Duration>,
}

impl PhaseTimeouts {
    /// Investigating (and Selecting), unless configured: 10 min.
    pub const DEFAULT_INVESTIGATING_SECONDS: u64 = 600;
    /// Executing, unless configured: 30 min.
    pub const DEFAULT_EXECUTING_SECONDS: u64 = 1800;
    /// Verifying (its window included), unless configured: 30 min.
    pub const DEFAULT_VERIFYING_SECONDS: u64 = 1800;
    /// The whole request, unless configured: 1 h.
    pub const DEFAULT_OVERALL_SECONDS: u64 = 3600;

    /// The daemon's defaults: investigating 10 min, awaiting approval 15 min, executing and
    /// verifying 30 min each, the whole request 1 h.
    pub fn defaults() -> Self {
        Self {
            investigating: Some(Duration::from_secs(Self::DEFAULT_INVESTIGATING_SECONDS)),
            awaiting_approval: Some(Duration::from_secs(DEFAULT_APPROVAL_TIMEOUT_SECONDS)),
            executing: Some(Duration::from_secs(Self::DEFAULT_EXECUTING_SECONDS)),
            verifying: Some(Duration::from_secs(Self::DEFAULT_VERIFYING_SECONDS)),
            overall: Some(Duration::from_secs(Self::DEFAULT_OVERALL_SECONDS)),
        }
    }

    fn of(&self, phase: Phase) -> Option<Duration> {
        match phase {
            Phase::Investigating | Phase::Selecting => self.investigating,
            Phase::AwaitingApproval => self.awaiting_approval,
            Phase::Executing => self.executing,
            Phase::Verifying => self.verifying,
            _ => None,
        }
    }

    /// Where a request that ran out of time goes, and why.
    fn expired(&self, req: &RemediationRequest, now: DateTime<Utc>) -> Option<(Phase, String)> {
        let since = req.state.phase_entered_at.unwrap_or(req.created_at);
        let over = |limit: Duration, from: DateTime<Utc>| {
            (now - from).to_std().is_ok_and(|spent| spent > limit)
        };
        if let Some(limit) = self.of(req.phase)
            && over(limit, since)
        {
            let to = if req.phase == Phase::AwaitingApproval {
                Phase::Expired
            } else {
                Phase::ManualReviewRequired
            };
            return Some((
                to,
                format!(
                    "timed out: {} for more than {} s ({} did not finish)",
                    req.phase,
                    limit.as_secs(),
                    stage_name(req.phase)
                ),
            ));
        }
        if let Some(limit) = self.overall
            && over(limit, req.created_at)
        {
            return Some((
                Phase::ManualReviewRequired,
                format!(
                    "timed out: the request is older than {} s (last phase {})",
                    limit.as_secs(),
                    req.phase
                ),
            ));
        }
        None
    }
}

pub struct Pipeline {
    stages: HashMap<Phase, Arc<dyn Stage>>,
    clock: Arc<dyn Clock>,
    max_wait: Duration,
    actor: String,
    timeouts: PhaseTimeouts,
}

impl Pipeline {
    pub fn new(clock: Arc<dyn Clock>, max_wait: Duration) -> Self {
        Self {
            stages: HashMap::new(),
            clock,
            max_wait,
            actor: "pipeline".to_owned(),
            timeouts: PhaseTimeouts::default(),
        }
    }

    /// End requests that stay too long in a phase (none by default).
    pub fn with_timeouts(mut self, timeouts: PhaseTimeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// Register the stage for its phase (a later registration replaces an earlier one).
    pub fn with_stage(mut self, stage: Arc<dyn Stage>) -> Self {
        self.stages.insert(stage.phase(), stage);
        self
    }

    pub fn with_actor(mut self, actor: impl Into<String>) -> Self {
        self.actor = actor.into();
        self
    }

    pub fn has_stage(&self, phase: Phase) -> bool {
        self.stages.contains_key(&phase)
    }

    /// Whether stepping `req` may run a stage (work on the cluster, the LLM, the policy), as
    /// opposed to a decision made from the request alone (received, no stage, not runnable).
    pub fn runs_stage(&self, req: &RemediationRequest) -> bool {
        req.phase != Phase::Received && req.phase.is_runnable() && self.has_stage(req.phase)
    }

    /// Decide the next state of `req`. Never panics and never leaves a request without a way
    /// forward: every error becomes a wait, a failure or a review with its reason.
    pub async fn step(&self, req: &RemediationRequest) -> Step {
        let step = self.decide(req).await;
        // Remember when the request entered a new phase: the phase timeouts count from there.
        match step {
            Step::Move {
                to,
                reason,
                mut state,
                events,
            } if to != req.phase => {
                state.phase_entered_at = Some(self.clock.now());
                Step::Move {
                    to,
                    reason,
                    state,
                    events,
                }
            }
            other => other,
        }
    }

    async fn decide(&self, req: &RemediationRequest) -> Step {
        let now = self.clock.now();
        // An approval stage decides expiry itself, through the store's first-decision-wins
        // call: a human's approval a second before the deadline must not lose to a timer here.
        // (The request's overall limit still applies: the store then expires the approval.)
        let approval_owns_time =
            req.phase == Phase::AwaitingApproval && self.stages.contains_key(&req.phase);
        let timeouts = if approval_owns_time {
            std::borrow::Cow::Owned(PhaseTimeouts {
                awaiting_approval: None,
                ..self.timeouts.clone()
            })
        } else {
            std::borrow::Cow::Borrowed(&self.timeouts)
        };
        if req.phase.is_runnable()
            && let Some((to, reason)) = timeouts.expired(req, now)
        {
            let mut state = req.state.clone();
            state.waiting = None;
            return Step::Move {
                to,
                events: vec![AuditDraft::new(
                    crate::domain::audit::TIMEOUT,
                    &self.actor,
                    reason.clone(),
                )],
                reason: Some(reason),
                state,
            };
        }
        if req.phase == Phase::Received {
            return Step::Move {
                to: Phase::Enriching,
                reason: None,
                state: req.state.clone(),
                events: vec![],
            };
        }
        if !req.phase.is_runnable() {
            // Nothing to do; the caller should not have handed us this request.
            return Step::Wait {
                state: req.state.clone(),
                not_before: now + chrono::Duration::seconds(60),
                events: vec![],
            };
        }
        let Some(stage) = self.stages.get(&req.phase) else {
            let reason = format!("{} not available", stage_name(req.phase));
            return Step::Move {
                to: Phase::ManualReviewRequired,
                events: vec![],
                reason: Some(reason),
                state: req.state.clone(),
            };
        };
        // The stage's span continues the request's trace, on whichever worker runs it.
        let span = crate::telemetry::stage_span(req);
        let ran = stage.run(req).instrument(span.clone()).await;
        match &ran {
            Ok(outcome) => {
                span.record("kubemedic.next_phase", outcome.next.as_str());
            }
            Err(_) => {
                span.record("otel.status_code", "ERROR");
            }
        }
        match ran {
            Ok(mut outcome) => {
                if !req.phase.can_move_to(outcome.next) {
                    let reason = format!(
                        "{} stage asked for an illegal transition {} -> {}",
                        stage_name(req.phase),
                        req.phase,
                        outcome.next
                    );
                    return Step::Move {
                        to: Phase::Failed,
                        events: vec![],
                        reason: Some(reason),
                        state: req.state.clone(),
                    };
                }
                if outcome.next == req.phase
                    && let Some(at) = outcome.not_before
                {
                    // The stage asked to be run again later (a window still open, a slot not
                    // yet free); what it waits for, if it says, stays in the state.
                    return Step::Wait {
                        state: outcome.state,
                        not_before: at.max(now),
                        events: outcome.events,
                    };
                }
                outcome.state.waiting = None;
                let reason = match (outcome.next.is_terminal(), outcome.reason) {
                    (true, None) => Some(format!("{} ended the request", stage_name(req.phase))),
                    (_, r) => r,
                };
                Step::Move {
                    to: outcome.next,
                    reason,
                    state: outcome.state,
                    events: outcome.events,
                }
            }
            Err(StageError::Failed(message)) => Step::Move {
                to: Phase::Failed,
                events: vec![],
                reason: Some(message),
                state: req.state.clone(),
            },
            Err(StageError::Unavailable {
                dependency,
                message,
            }) => self.wait_or_give_up(req, now, dependency, message),
        }
    }

    fn wait_or_give_up(
        &self,
        req: &RemediationRequest,
        now: DateTime<Utc>,
        dependency: String,
        message: String,
    ) -> Step {
        let since = req
            .state
            .waiting
            .as_ref()
            .filter(|w| w.dependency == dependency)
            .map_or(now, |w| w.since);
        let waited = (now - since).to_std().unwrap_or_default();
        if waited >= self.max_wait {
            let reason = format!(
                "{dependency} not available for {}s: {message}",
                waited.as_secs()
            );
            let mut state = req.state.clone();
            state.waiting = None;
            return Step::Move {
                to: Phase::ManualReviewRequired,
                events: vec![],
                reason: Some(reason),
                state,
            };
        }
        let first = req
            .state
            .waiting
            .as_ref()
            .is_none_or(|w| w.dependency != dependency);
        let mut state = req.state.clone();
        state.waiting = Some(Waiting {
            dependency: dependency.clone(),
            message: message.clone(),
            since,
        });
        // 2, 4, 8 … seconds, at most a minute.
        let backoff = 2u64.saturating_pow(req.attempts.clamp(1, 6) as u32).min(60);
        let events = if first {
            vec![AuditDraft::new(
                "waiting",
                &self.actor,
                format!("waiting for {dependency}: {message}"),
            )]
        } else {
            vec![]
        };
        Step::Wait {
            state,
            not_before: now + chrono::Duration::seconds(backoff as i64),
            events,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::domain::{
        NewSignal, SignalMode, SignalSource, SignalStatus, StageError, StageOutcome,
    };
    use async_trait::async_trait;

    /// A stage whose dependency never answers.
    struct Stuck(Phase);

    #[async_trait]
    impl Stage for Stuck {
        fn phase(&self) -> Phase {
            self.0
        }
        async fn run(&self, _: &RemediationRequest) -> Result<StageOutcome, StageError> {
            Err(StageError::Unavailable {
                dependency: "llm".into(),
                message: "no answer".into(),
            })
        }
    }

    fn request(phase: Phase, now: DateTime<Utc>) -> RemediationRequest {
        let signal = NewSignal {
            fingerprint: "f".into(),
            starts_at: now,
            ends_at: None,
            status: SignalStatus::Firing,
            name: "KubePodCrashLooping".into(),
            severity: None,
            mode: SignalMode::Reactive,
            source: SignalSource::Alertmanager,
            labels: Default::default(),
            annotations: Default::default(),
            generator_url: None,
            receiver: None,
            group_key: None,
            external_url: None,
            target: None,
            target_fingerprint: "t".into(),
            target_aliases: vec![],
            requested: None,
            trace: None,
        };
        RemediationRequest::for_signal(&signal, phase, now)
    }

    fn moved_to(step: &Step) -> Option<(Phase, String)> {
        match step {
            Step::Move { to, reason, .. } => Some((*to, reason.clone().unwrap_or_default())),
            Step::Wait { .. } => None,
        }
    }

    #[tokio::test]
    async fn a_stuck_phase_ends_at_its_timeout_and_an_unanswered_approval_expires() {
        let start = DateTime::parse_from_rfc3339("2026-03-01T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let clock = Arc::new(ManualClock::new(start));
        let pipeline = Pipeline::new(clock.clone(), Duration::from_secs(86_400))
            .with_stage(Arc::new(Stuck(Phase::Investigating)))
            .with_timeouts(PhaseTimeouts::defaults());
        let mut req = request(Phase::Investigating, start);
        req.state.phase_entered_at = Some(start);
        assert!(
            moved_to(&pipeline.step(&req).await).is_none(),
            "waits at first"
        );
        clock.advance(chrono::Duration::seconds(601));
        let (to, reason) = moved_to(&pipeline.step(&req).await).unwrap();
        assert_eq!(to, Phase::ManualReviewRequired);
        assert!(
            reason.starts_with("timed out: Investigating for more than 600 s"),
            "{reason}"
        );

        let mut waiting = request(Phase::AwaitingApproval, start);
        waiting.state.phase_entered_at = Some(clock.now() - chrono::Duration::seconds(901));
        let (to, _) = moved_to(&pipeline.step(&waiting).await).unwrap();
        assert_eq!(to, Phase::Expired);

        // The whole request has an hour, whatever phase it is in.
        let mut old = request(Phase::Investigating, start - chrono::Duration::hours(2));
        old.state.phase_entered_at = Some(clock.now());
        let (to, reason) = moved_to(&pipeline.step(&old).await).unwrap();
        assert_eq!(to, Phase::ManualReviewRequired);
        assert!(reason.contains("older than 3600 s"), "{reason}");
    }

    #[tokio::test]
    async fn moving_to_a_new_phase_records_when() {
        let start = DateTime::parse_from_rfc3339("2026-03-01T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let clock = Arc::new(ManualClock::new(start));
        let pipeline = Pipeline::new(clock.clone(), Duration::from_secs(60));
        let req = request(Phase::Received, start);
        clock.advance(chrono::Duration::seconds(5));
        match pipeline.step(&req).await {
            Step::Move { to, state, .. } => {
                assert_eq!(to, Phase::Enriching);
                assert_eq!(state.phase_entered_at, Some(clock.now()));
            }
            Step::Wait { .. } => panic!("a received request moves on"),
        }
    }
}
