//! How far back "healthy again" looks: one window for the rule that says a problem resolved
//! and the proof that checks the claim.

use chrono::{DateTime, Duration, Utc};

/// However recently the alert began, the look-back reaches at least this far: a container that
/// exited minutes before the alert is part of what it is about.
pub const MIN_LOOK_BACK: Duration = Duration::minutes(10);
/// An alert investigated long after it began (queued, or during a long outage) is judged on
/// this much: pods ready, without an exit or a failure for half an hour, have recovered,
/// whatever happened before.
pub const STABLE: Duration = Duration::minutes(30);
/// An Event lives an hour by default (the API server's `--event-ttl`): a pod that ended with an
/// event about it still listed ended recently, so only endings older than this are settled.
pub const ENDED_QUIET: Duration = Duration::minutes(60);

/// Since when a workload must have had no exit and no failure to count as healthy again: since
/// the alert began, looking back at least [`MIN_LOOK_BACK`] and at most [`STABLE`].
pub fn healthy_since(now: DateTime<Utc>, alert_started: Option<DateTime<Utc>>) -> DateTime<Utc> {
    alert_started
        .unwrap_or(now)
        .min(now - MIN_LOOK_BACK)
        .max(now - STABLE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_look_back_is_the_alert_s_age_between_ten_and_thirty_minutes() {
        let now = Utc::now();
        let since = |minutes: i64| healthy_since(now, Some(now - Duration::minutes(minutes)));
        assert_eq!(since(2), now - Duration::minutes(10));
        assert_eq!(since(20), now - Duration::minutes(20));
        assert_eq!(since(300), now - Duration::minutes(30));
        assert_eq!(healthy_since(now, None), now - Duration::minutes(10));
    }
}
