//! What every channel says about an approval, as plain text: the e-mail and Slack renderers
//! escape these strings for their medium (HTML, mrkdwn) and lay them out; the wording and the
//! facts stay the same everywhere.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use crate::domain::{ApprovalRequest, Decision, ObligationStatus};

/// `Approve RollbackDeployment on prod/Deployment/checkout?`
pub fn question(a: &ApprovalRequest) -> String {
    format!("Approve {} on {}?", a.action_type, a.target)
}

/// `rollback-deployment v1.2.0 (RollbackDeployment)`
pub fn workflow(a: &ApprovalRequest) -> String {
    format!(
        "{} v{} ({})",
        a.workflow_id,
        a.workflow_version.trim_start_matches('v'),
        a.action_type
    )
}

pub fn environment(a: &ApprovalRequest) -> String {
    a.environment.clone().unwrap_or_else(|| "unknown".into())
}

/// `82%`
pub fn confidence(a: &ApprovalRequest) -> String {
    let pct = (a.confidence.clamp(0.0, 1.0) * 100.0).round();
    format!("{pct:.0}%")
}

/// `85 — production namespace`
pub fn risk(a: &ApprovalRequest) -> String {
    format!("{} — {}", a.risk_score, a.risk_reason)
}

/// `2025-06-01 12:15:00 UTC (in 15 minutes)`: absolute, and relative to `now`.
pub fn expiry(a: &ApprovalRequest, now: DateTime<Utc>) -> String {
    format!("{} ({})", utc(a.expires_at), relative(a.expires_at, now))
}

/// `in 15 minutes`, `in 1 minute`, `already expired`. Rounded up: 14 min 30 s is 15 minutes.
pub fn relative(at: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let seconds = (at - now).num_seconds();
    if seconds <= 0 {
        return "already expired".into();
    }
    let minutes = (seconds + 59) / 60;
    if minutes == 1 {
        "in 1 minute".into()
    } else {
        format!("in {minutes} minutes")
    }
}

pub fn utc(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// One `name = value` line per parameter, strings without their JSON quotes.
pub fn parameters(params: &Map<String, Value>) -> Vec<String> {
    params
        .iter()
        .map(|(k, v)| match v {
            Value::String(s) => format!("{k} = {s}"),
            other => format!("{k} = {other}"),
        })
        .collect()
}

/// `workflow-id: rationale`, or the id alone.
pub fn alternatives(a: &ApprovalRequest) -> Vec<String> {
    a.alternatives
        .iter()
        .map(|alt| {
            if alt.rationale.trim().is_empty() {
                alt.workflow_id.clone()
            } else {
                format!("{}: {}", alt.workflow_id, alt.rationale)
            }
        })
        .collect()
}

pub fn policy_revision(a: &ApprovalRequest) -> String {
    a.policy_revision
        .clone()
        .unwrap_or_else(|| "unknown".into())
}

/// The outcome in one sentence: `Approved by alice@example.com via slack at 2025-… UTC.`,
/// with the approver's message and the alternative they chose, if any.
pub fn outcome(a: &ApprovalRequest) -> String {
    let Some(d) = &a.decision else {
        return "This approval is no longer pending.".into();
    };
    let mut s = match d.decision {
        Decision::Approved => format!(
            "Approved by {} via {} at {}.",
            d.decided_by,
            d.decided_via,
            utc(d.decided_at)
        ),
        Decision::Rejected => format!(
            "Denied by {} via {} at {}.",
            d.decided_by,
            d.decided_via,
            utc(d.decided_at)
        ),
        Decision::Expired => format!("Expired at {} without a decision.", utc(d.decided_at)),
    };
    if let Some(alt) = &d.alternative {
        s.push_str(&format!(" Chosen instead: {alt}."));
    }
    if let Some(m) = d.message.as_deref().filter(|m| !m.trim().is_empty()) {
        s.push_str(&format!(" Message: {m}"));
    }
    if let Some(n) = a.note.as_deref().filter(|n| !n.trim().is_empty()) {
        s.push_str(&format!(" {n}"));
    }
    s
}

/// The change the API server's dry run says the action makes, a line per change
/// (`Deployment shop/checkout: image of container checkout shop/checkout:1.4.2 → …`).
pub fn change(a: &ApprovalRequest) -> Vec<String> {
    match a.proof.as_ref().and_then(|p| p.change.as_ref()) {
        Some(c) => c.lines(),
        None => vec!["no dry run was recorded".into()],
    }
}

/// What was checked against the cluster before asking: one line per obligation, its status
/// and the first piece of its evidence.
pub fn checked(a: &ApprovalRequest) -> Vec<String> {
    let Some(p) = &a.proof else {
        return vec!["nothing was checked against the cluster".into()];
    };
    let mut out: Vec<String> = p
        .obligations
        .iter()
        .map(|o| {
            let mark = match o.status {
                ObligationStatus::Holds => "holds",
                ObligationStatus::Fails => "FAILS",
                ObligationStatus::Unknown => "UNKNOWN",
            };
            match o.evidence.first() {
                Some(e) => format!("[{mark}] {} — {e}", o.statement),
                None => format!("[{mark}] {}", o.statement),
            }
        })
        .collect();
    if out.is_empty() {
        out.push(format!(
            "{}: kubemedic knows no obligations for this action type (unverified)",
            p.action_type
        ));
    }
    out
}

/// The spec the approval is bound to (`sha256:3f2a…`), when known.
pub fn bound_to(a: &ApprovalRequest) -> Option<String> {
    a.proof.as_ref()?.spec_hash.clone()
}

/// `Approved`, `Denied`, `Expired`, `Closed`: the outcome in a word.
pub fn outcome_word(a: &ApprovalRequest) -> &'static str {
    match a.decision.as_ref().map(|d| d.decision) {
        Some(Decision::Approved) => "Approved",
        Some(Decision::Rejected) => "Denied",
        Some(Decision::Expired) => "Expired",
        None => "Closed",
    }
}

/// At most `max` characters, the cut marked with `…` (Slack refuses over-long fields).
pub fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Control characters (a newline in an alert name) become spaces: for one-line places such as
/// a mail subject or a Slack header.
pub fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn relative_rounds_up_and_says_expired() {
        let now = Utc.with_ymd_and_hms(2025, 6, 1, 12, 0, 0).unwrap();
        let at = |s: i64| now + chrono::Duration::seconds(s);
        assert_eq!(relative(at(15 * 60), now), "in 15 minutes");
        assert_eq!(relative(at(14 * 60 + 30), now), "in 15 minutes");
        assert_eq!(relative(at(20), now), "in 1 minute");
        assert_eq!(relative(at(0), now), "already expired");
        assert_eq!(relative(at(-60), now), "already expired");
    }

    #[test]
    fn clip_counts_characters_not_bytes() {
        assert_eq!(clip("abc", 3), "abc");
        assert_eq!(clip("äöüß", 3), "äö…");
    }

    #[test]
    fn one_line_removes_newlines() {
        assert_eq!(one_line("a\r\nb\tc"), "a  b c");
    }
}
