//! Findings: what the cluster shows about a pod or a workload, as pure predicates over the
//! observed model (`cluster::observed`), each returning the finding with the evidence that shows
//! it. A rule of the offline investigator turns findings into a diagnosis; a proof obligation
//! wraps the same findings into a verdict — so a rule that proposes and the proof that checks
//! the proposal cannot disagree about what the cluster shows (issue 43).
//!
//! Invariants:
//! - A predicate lives here once; every threshold and window is a named constant beside it,
//!   with the reason.
//! - No reads: a finding is computed from what the caller read (pods, events, a log), so the
//!   investigator and the prover may read it their own way.

mod changed;
pub mod condition;
mod image;
mod kept;
mod memory;
mod node;
mod onset;
mod quota;
mod replacement;
mod replicas;
pub mod resolved;
mod restart;
mod revision;
mod scheduling;
mod usage;

pub use changed::{
    ChangeExplains, change_explains, configmap_read_live, configmaps, read_only_by, secrets,
};
pub use image::moved_image;
pub use kept::{StateKept, restarting_container, state_kept};
pub use memory::{
    MEMORY_NODES_ASKED, NodeMemory, SHORT_OF_MEMORY, kill_moments, memory_nodes, node_oom_at,
    node_short_at, node_took_memory, short_of_memory,
};
pub use node::{
    NotReadyEvent, cannot_finish_terminating, flaps, node_at_fault, not_ready_events,
    readiness_flaps,
};
pub use onset::{Began, ONSET_SLACK_SECONDS, failures_began, first_onset, onset, predates};
pub use quota::{QuotaNeed, largest_node, quota_needs, raise_need, raised_replicas};
pub use replacement::Replacement;
pub use replicas::{Declared, count_set_by, declared_replicas, more_would_help, short_of_declared};
pub use restart::{
    DEFAULT_MAX_SURGE_PERCENT, DEFAULT_MAX_UNAVAILABLE_PERCENT, STATEFUL_RESTART_MIN_REPLICAS,
    max_unavailable, restart_keeps_ready, template_reaches_pods,
};
pub use revision::{
    FAILURE_REASONS, HeldByOlder, RevisionHealth, UndoOnConfig, attach_conflict, held_by_older,
    not_the_rollout, revision_failures, revision_health, rollout_by_others, runs_differently,
    undo_on_config,
};
pub use scheduling::{
    Blocker, PortHolder, Room, blockers, placement, repelled, room_for_more, takes,
};
pub use usage::{
    MAX_STEP_FACTOR, NEAR_LIMIT_PERCENT, THROTTLED_USE_PERCENT, bounded_step, grown_claim_size,
    is_throttling_alert, limit_now, near_limit, throttled_use, throttling_alert_about,
};

/// A time of day as evidence shows it (UTC).
pub fn hhmm(t: chrono::DateTime<chrono::Utc>) -> String {
    t.format("%H:%M:%S").to_string()
}
