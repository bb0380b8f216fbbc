//! The worker pool's settings (owner: `pipeline`): how many stages run at once, how long a
//! claim lasts, and how long a request may stay in each phase.

use std::time::Duration;

use super::declare::{HelpDefault, settings};
use super::{Result, invalid};
use crate::domain::DEFAULT_APPROVAL_TIMEOUT_SECONDS;
use crate::pipeline::PhaseTimeouts;

/// Stages run at once unless configured.
pub const DEFAULT_WORKERS: usize = 4;
/// Seconds a worker's claim lasts without renewal unless configured.
pub const DEFAULT_LEASE_SECONDS: u64 = 30;
/// Seconds a request waits for an unreachable dependency unless configured.
pub const DEFAULT_MAX_WAIT_SECONDS: u64 = 900;

settings! {
    /// The worker pool and the phases' time limits.
    pub struct PipelineArgs {
        /// Stages run at once by the worker pool: enrichment, investigation, policy, execution
        /// and verification work (the pool holds up to max(4 × N, 256) requests).
        #[arg(long, env = "KUBEMEDIC_WORKERS", value_name = "N", help_default = DEFAULT_WORKERS)]
        pub workers: Option<usize>,

        /// Seconds a worker's claim on a request lasts without renewal; after a crash another
        /// worker resumes the request once it lapses.
        #[arg(
            long,
            env = "KUBEMEDIC_LEASE_SECONDS",
            value_name = "SECONDS",
            help_default = DEFAULT_LEASE_SECONDS
        )]
        pub lease_seconds: Option<u64>,

        /// Seconds a request waits for an unreachable dependency (cluster, LLM, mail) before it
        /// ends in ManualReviewRequired with that reason.
        #[arg(
            long,
            env = "KUBEMEDIC_MAX_WAIT_SECONDS",
            value_name = "SECONDS",
            help_default = DEFAULT_MAX_WAIT_SECONDS
        )]
        pub max_wait_seconds: Option<u64>,

        /// Seconds a request may stay in Investigating/Selecting before it goes to review;
        /// 0 = no limit.
        #[arg(
            long,
            env = "KUBEMEDIC_INVESTIGATION_TIMEOUT_SECONDS",
            value_name = "SECONDS",
            help_default = PhaseTimeouts::DEFAULT_INVESTIGATING_SECONDS
        )]
        pub investigation_timeout_seconds: Option<u64>,

        /// Seconds a request waits for a human's approval before it Expires; 0 = no limit.
        #[arg(
            long,
            env = "KUBEMEDIC_APPROVAL_TIMEOUT_SECONDS",
            value_name = "SECONDS",
            help_default = DEFAULT_APPROVAL_TIMEOUT_SECONDS
        )]
        pub approval_timeout_seconds: Option<u64>,

        /// Seconds a request may stay in Executing before it goes to review; 0 = no limit.
        #[arg(
            long,
            env = "KUBEMEDIC_EXECUTION_TIMEOUT_SECONDS",
            value_name = "SECONDS",
            help_default = PhaseTimeouts::DEFAULT_EXECUTING_SECONDS
        )]
        pub execution_timeout_seconds: Option<u64>,

        /// Seconds a request may stay in Verifying (the window included) before it goes to
        /// review; 0 = no limit.
        #[arg(
            long,
            env = "KUBEMEDIC_VERIFICATION_TIMEOUT_SECONDS",
            value_name = "SECONDS",
            help_default = PhaseTimeouts::DEFAULT_VERIFYING_SECONDS
        )]
        pub verification_timeout_seconds: Option<u64>,

        /// Seconds a request may take from its first alert to its end; 0 = no limit.
        #[arg(
            long,
            env = "KUBEMEDIC_REQUEST_TIMEOUT_SECONDS",
            value_name = "SECONDS",
            help_default = PhaseTimeouts::DEFAULT_OVERALL_SECONDS
        )]
        pub request_timeout_seconds: Option<u64>,
    }
}

/// The worker pool's settings, checked.
#[derive(Debug, Clone)]
pub struct PipelineParts {
    pub workers: usize,
    pub lease: Duration,
    pub max_wait: Duration,
    pub timeouts: PhaseTimeouts,
}

impl PipelineArgs {
    pub fn settings(&self) -> Result<PipelineParts> {
        // 0 turns a limit off.
        let limit = |value: Option<u64>, default: u64| match value.unwrap_or(default) {
            0 => None,
            s => Some(Duration::from_secs(s)),
        };
        let timeouts = PhaseTimeouts {
            investigating: limit(
                self.investigation_timeout_seconds,
                PhaseTimeouts::DEFAULT_INVESTIGATING_SECONDS,
            ),
            awaiting_approval: limit(
                self.approval_timeout_seconds,
                DEFAULT_APPROVAL_TIMEOUT_SECONDS,
            ),
            executing: limit(
                self.execution_timeout_seconds,
                PhaseTimeouts::DEFAULT_EXECUTING_SECONDS,
            ),
            verifying: limit(
                self.verification_timeout_seconds,
                PhaseTimeouts::DEFAULT_VERIFYING_SECONDS,
            ),
            overall: limit(
                self.request_timeout_seconds,
                PhaseTimeouts::DEFAULT_OVERALL_SECONDS,
            ),
        };
        let workers = self.workers.unwrap_or(DEFAULT_WORKERS);
        if !(1..=256).contains(&workers) {
            return Err(invalid("workers", format!("{workers} is outside 1..=256")));
        }
        let lease_seconds = self.lease_seconds.unwrap_or(DEFAULT_LEASE_SECONDS);
        if !(1..=3600).contains(&lease_seconds) {
            return Err(invalid(
                "lease-seconds",
                format!("{lease_seconds} is outside 1..=3600"),
            ));
        }
        let max_wait_seconds = self.max_wait_seconds.unwrap_or(DEFAULT_MAX_WAIT_SECONDS);
        Ok(PipelineParts {
            workers,
            lease: Duration::from_secs(lease_seconds),
            max_wait: Duration::from_secs(max_wait_seconds),
            timeouts,
        })
    }
}
