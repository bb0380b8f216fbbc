//! Undoing a remediation that made its target worse (docs/adr/0035-undo-what-made-it-worse.md).
//!
//! Execution records the target's health before its first write ([`TargetHealth`], beside the
//! spec it restores); verification compares the health after the window with it
//! ([`TargetHealth::worse`]). When the target is worse, the request carries an [`Undo`]: what
//! is worse, before and after, whether the policy let kubemedic restore the recorded spec, and
//! — once the executor ran it — what the restore did. Either way a person takes the request
//! over.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::proof::Proof;

/// One pod that fails, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodFailure {
    pub pod: String,
    /// The failure's cause in a word (`CrashLoopBackOff`, `ImagePullBackOff`, `OOMKilled`,
    /// `Unschedulable`, `NotReady`, …): what "a new failure reason" compares.
    pub cause: String,
    /// The line that shows it (`container web CrashLoopBackOff, 4 restarts, …`).
    pub line: String,
}

/// A workload's pods at one moment: how many run, how many are ready, which fail and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetHealth {
    pub observed_at: DateTime<Utc>,
    /// Pods of the target, not being deleted.
    pub pods: u32,
    pub ready: u32,
    /// The replicas its spec asks for, when it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired: Option<u32>,
    #[serde(default)]
    pub failing: Vec<PodFailure>,
}

impl TargetHealth {
    /// The failure causes among its pods.
    pub fn causes(&self) -> BTreeSet<&str> {
        self.failing.iter().map(|f| f.cause.as_str()).collect()
    }

    /// How `after` is worse than `self` (the health before the remediation), one line each;
    /// empty when it is not:
    /// - fewer ready pods, unless the spec now asks for no more than are ready (a scale-down
    ///   that did what it said);
    /// - more failing pods;
    /// - a failure cause none of the pods showed before.
    pub fn worse(&self, after: &TargetHealth) -> Vec<String> {
        let mut out = Vec::new();
        let asked_fewer = after.desired.is_some_and(|d| after.ready >= d);
        if after.ready < self.ready && !asked_fewer {
            out.push(format!(
                "{} ready pod(s), {} before the remediation",
                after.ready, self.ready
            ));
        }
        if after.failing.len() > self.failing.len() {
            out.push(format!(
                "{} failing pod(s), {} before the remediation",
                after.failing.len(),
                self.failing.len()
            ));
        }
        let before = self.causes();
        for cause in after.causes().difference(&before) {
            if let Some(f) = after.failing.iter().find(|f| f.cause == *cause) {
                out.push(format!(
                    "a failure not seen before: pod {} {}",
                    f.pod, f.line
                ));
            }
        }
        out
    }

    /// `2 of 3 pods ready, 1 failing (CrashLoopBackOff)`.
    pub fn summary(&self) -> String {
        let mut s = format!("{} of {} pods ready", self.ready, self.pods);
        if let Some(d) = self.desired {
            s.push_str(&format!(" ({d} asked for)"));
        }
        if !self.failing.is_empty() {
            let causes: Vec<&str> = self.causes().into_iter().collect();
            s.push_str(&format!(
                ", {} failing ({})",
                self.failing.len(),
                causes.join(", ")
            ));
        }
        s
    }
}

/// A remediation found to have made its target worse, and what was done about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Undo {
    /// How the target is worse than before the remediation ([`TargetHealth::worse`]).
    pub worse: Vec<String>,
    pub before: TargetHealth,
    pub after: TargetHealth,
    /// Whether kubemedic restores the spec it recorded before its first write.
    pub decided: bool,
    /// Why (or why not): the policy's answer, a setting, an action a spec cannot take back.
    pub decision: String,
    pub decided_at: DateTime<Utc>,
    /// What the restore did, once the executor ran it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore: Option<Restore>,
}

/// The restore's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Restore {
    /// The spec recorded before the first write is back on the target.
    pub restored: bool,
    /// One line for humans: what was written, or why nothing was.
    pub message: String,
    /// The restore's own proof: the target was not changed by somebody else since the
    /// remediation, the recorded spec exists, the API server accepts it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proof: Option<Proof>,
    /// The spec hash before the remediation (what was restored) and after the restore.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored_spec_hash: Option<String>,
    pub at: DateTime<Utc>,
}

/// The step index the restore's intent and stamp carry (`<request>/undo`): after every step a
/// workflow can have.
pub const UNDO_STEP: u32 = 1000;

#[cfg(test)]
mod tests {
    use super::*;

    fn at() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-03-01T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    fn health(
        pods: u32,
        ready: u32,
        desired: Option<u32>,
        failing: &[(&str, &str)],
    ) -> TargetHealth {
        TargetHealth {
            observed_at: at(),
            pods,
            ready,
            desired,
            failing: failing
                .iter()
                .map(|(pod, cause)| PodFailure {
                    pod: (*pod).into(),
                    cause: (*cause).into(),
                    line: format!("container app {cause}"),
                })
                .collect(),
        }
    }

    #[test]
    fn fewer_ready_more_failing_or_a_new_cause_is_worse() {
        let before = health(2, 1, Some(2), &[("web-a", "NotReady")]);
        // The same, or better: not worse.
        assert!(before.worse(&before).is_empty());
        assert!(before.worse(&health(2, 2, Some(2), &[])).is_empty());
        // Fewer ready.
        let w = before.worse(&health(2, 0, Some(2), &[("web-a", "NotReady")]));
        assert_eq!(w, ["0 ready pod(s), 1 before the remediation"]);
        // More failing, with a cause not seen before.
        let w = before.worse(&health(
            3,
            1,
            Some(3),
            &[("web-a", "NotReady"), ("web-c", "CrashLoopBackOff")],
        ));
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w[1].contains("web-c container app CrashLoopBackOff"),
            "{w:?}"
        );
        // The same number failing, for a new reason.
        let w = before.worse(&health(2, 1, Some(2), &[("web-b", "ImagePullBackOff")]));
        assert_eq!(w.len(), 1, "{w:?}");
    }

    #[test]
    fn a_scale_down_that_did_what_it_said_is_not_worse() {
        let before = health(4, 4, Some(4), &[]);
        assert!(before.worse(&health(2, 2, Some(2), &[])).is_empty());
        // Asked for two, one ready: worse.
        assert!(!before.worse(&health(2, 1, Some(2), &[])).is_empty());
    }
}
