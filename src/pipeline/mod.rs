//! The remediation pipeline: the request state machine and the stages that move it.
//!
//! [`Pipeline::step`] takes a request in a runnable phase and decides its next committed state
//! (a [`Step`]); it touches nothing durable itself. The [`worker`] claims requests from the
//! store, calls `step` and commits each result with its audit events in one transaction. The
//! same `step` drives `kubemedic investigate` without a store, so the daemon and the CLI run the
//! same code.

pub mod worker;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::clock::Clock;
use crate::domain::{
    AuditDraft, Phase, RemediationRequest, Stage, StageError, StageState, Waiting, stage_name,
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

pub struct Pipeline {
    stages: HashMap<Phase, Arc<dyn Stage>>,
    clock: Arc<dyn Clock>,
    max_wait: Duration,
    actor: String,
}

impl Pipeline {
    pub fn new(clock: Arc<dyn Clock>, max_wait: Duration) -> Self {
        Self {
            stages: HashMap::new(),
            clock,
            max_wait,
            actor: "pipeline".to_owned(),
        }
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

    /// Decide the next state of `req`. Never panics and never leaves a request without a way
    /// forward: every error becomes a wait, a failure or a review with its reason.
    pub async fn step(&self, req: &RemediationRequest) -> Step {
        let now = self.clock.now();
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
        match stage.run(req).await {
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
                outcome.state.waiting = None;
                if outcome.next == req.phase
                    && let Some(at) = outcome.not_before
                {
                    // The stage asked to be run again later (a window still open).
                    return Step::Wait {
                        state: outcome.state,
                        not_before: at.max(now),
                        events: outcome.events,
                    };
                }
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
                "{dependency} unreachable for {}s: {message}",
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
