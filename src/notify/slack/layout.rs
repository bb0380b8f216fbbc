//! What kubemedic posts to Slack, as Block Kit: the offer (the same facts as the mail, the
//! approvers, Approve / Deny and Review), the offer as it reads once decided, and the follow-up
//! where a message cannot be edited. Every untrusted text is escaped and clipped to Block Kit's
//! limits ([`escape_mrkdwn`]).

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Value, json};

use super::{ACTIONS_BLOCK_ID, APPROVE_ACTION, DENY_ACTION, is_user_id};
use crate::domain::{ApprovalMessage, ApprovalRequest, Decision};
use crate::notify::render;

/// A Slack message: the notification `text` (also shown where blocks are not) and the blocks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SlackMessage {
    pub text: String,
    pub blocks: Vec<Value>,
}

/// What the offer's Approve / Deny buttons do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Buttons {
    /// Interactive buttons: Slack posts the click to kubemedic (`action_id` `approve`/`deny`).
    Interactive,
    /// Link buttons to the message's `approve_url` / `deny_url` confirmation pages.
    Links,
}

/// `&`, `<`, `>` escaped as Slack asks, so untrusted text cannot mention `<!channel>`, link,
/// or break out of formatting; cut to `max` characters (escapes counted) with `…`.
pub fn escape_mrkdwn(s: &str, max: usize) -> String {
    let mut out = String::new();
    let mut count = 0usize;
    let total: usize = s
        .chars()
        .map(|c| match c {
            '&' => 5,
            '<' | '>' => 4,
            _ => 1,
        })
        .sum();
    let budget = if total <= max {
        max
    } else {
        max.saturating_sub(1)
    };
    for c in s.chars() {
        let piece = match c {
            '&' => "&amp;",
            '<' => "&lt;",
            '>' => "&gt;",
            _ => "",
        };
        let len = if piece.is_empty() {
            1
        } else {
            piece.chars().count()
        };
        if count + len > budget {
            out.push('…');
            return out;
        }
        if piece.is_empty() {
            out.push(c);
        } else {
            out.push_str(piece);
        }
        count += len;
    }
    out
}

fn plain(text: &str, max: usize) -> Value {
    json!({ "type": "plain_text", "text": render::clip(&render::one_line(text), max), "emoji": true })
}

fn mrkdwn(text: String) -> Value {
    json!({ "type": "mrkdwn", "text": text })
}

fn section(title: &str, body: &str) -> Value {
    json!({ "type": "section", "text": mrkdwn(format!("*{title}*\n{}", escape_mrkdwn(body, 2900))) })
}

fn bullets(items: &[String]) -> String {
    if items.is_empty() {
        return "(none)".into();
    }
    items
        .iter()
        .map(|i| format!("• {}", render::one_line(i)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The facts every message shows, before its buttons or outcome line. `expires`: what the
/// Expires field says (absolute and relative in an offer, absolute once decided).
fn detail_blocks(a: &ApprovalRequest, expires: String) -> Vec<Value> {
    let field =
        |label: &str, value: &str| mrkdwn(format!("*{label}*\n{}", escape_mrkdwn(value, 1900)));
    let mut required = bullets(&a.required_because);
    required.push_str(&format!(
        "\nPolicy revision: {}",
        render::policy_revision(a)
    ));
    vec![
        json!({ "type": "header", "text": plain(&render::question(a), 150) }),
        json!({
            "type": "section",
            "fields": [
                field("Signal", &a.signal_name),
                field("Target", &a.target.to_string()),
                field("Environment", &render::environment(a)),
                field("Workflow", &render::workflow(a)),
                field("Confidence", &render::confidence(a)),
                field("Risk", &render::risk(a)),
                field("Expires", &expires),
            ],
        }),
        section("Summary", &a.summary),
        section("Evidence", &bullets(&a.evidence)),
        section("Parameters", &bullets(&render::parameters(&a.parameters))),
        section("What would change (dry run)", &bullets(&render::change(a))),
        section("What was checked", &bullets(&render::checked(a))),
        section("Why this workflow", &a.rationale),
        section("Alternatives", &bullets(&render::alternatives(a))),
        section("Approval is required because", &required),
    ]
}

fn ids_context(a: &ApprovalRequest, mentions: &[String]) -> Value {
    let mut parts = Vec::new();
    let ids: Vec<String> = mentions
        .iter()
        .filter(|m| is_user_id(m))
        .map(|m| format!("<@{m}>"))
        .collect();
    if !ids.is_empty() {
        parts.push(mrkdwn(format!("Approvers: {}", ids.join(" "))));
    }
    parts.push(mrkdwn(format!(
        "Approval {} · request {}",
        a.id, a.request_id
    )));
    json!({ "type": "context", "elements": parts })
}

fn confirm(title: &str, text: &str, yes: &str, style: &str) -> Value {
    json!({
        "title": plain(title, 100),
        "text": mrkdwn(escape_mrkdwn(text, 300)),
        "confirm": plain(yes, 30),
        "deny": plain("Cancel", 30),
        "style": style,
    })
}

/// The offer: the facts, the approvers, and Approve / Deny (and Review) buttons.
pub fn offer_message(
    m: &ApprovalMessage,
    buttons: Buttons,
    mentions: &[String],
    now: DateTime<Utc>,
) -> SlackMessage {
    let a = &m.approval;
    let mut blocks = detail_blocks(a, render::expiry(a, now));
    blocks.push(ids_context(a, mentions));
    let id = a.id.to_string();
    let question = render::question(a);
    let mut elements = Vec::new();
    match buttons {
        Buttons::Interactive => {
            elements.push(json!({
                "type": "button", "action_id": APPROVE_ACTION, "value": id,
                "text": plain("Approve", 75), "style": "primary",
                "confirm": confirm("Approve?", &question, "Approve", "primary"),
            }));
            elements.push(json!({
                "type": "button", "action_id": DENY_ACTION, "value": id,
                "text": plain("Deny", 75), "style": "danger",
                "confirm": confirm("Deny?", &question, "Deny", "danger"),
            }));
        }
        Buttons::Links => {
            if let Some(u) = &m.approve_url {
                elements.push(json!({
                    "type": "button", "action_id": "approve_link", "url": u,
                    "text": plain("Approve", 75), "style": "primary",
                }));
            }
            if let Some(u) = &m.deny_url {
                elements.push(json!({
                    "type": "button", "action_id": "deny_link", "url": u,
                    "text": plain("Deny", 75), "style": "danger",
                }));
            }
        }
    }
    if let Some(u) = &m.view_url {
        elements.push(json!({
            "type": "button", "action_id": "review", "url": u, "text": plain("Review", 75),
        }));
    }
    if elements.is_empty() {
        blocks.push(json!({
            "type": "context",
            "elements": [mrkdwn("Decide in kubemedic's approval inbox.".into())],
        }));
    } else {
        blocks
            .push(json!({ "type": "actions", "block_id": ACTIONS_BLOCK_ID, "elements": elements }));
    }
    SlackMessage {
        text: escape_mrkdwn(
            &format!("Approval needed: {question} (risk {})", a.risk_score),
            2000,
        ),
        blocks,
    }
}

fn outcome_emoji(a: &ApprovalRequest) -> &'static str {
    match a.decision.as_ref().map(|d| d.decision) {
        Some(Decision::Approved) if render::not_executed(a) => ":warning:",
        Some(Decision::Approved) if render::made_worse(a) == Some(true) => ":rewind:",
        Some(Decision::Approved) if render::made_worse(a) == Some(false) => ":rotating_light:",
        Some(Decision::Approved) => ":white_check_mark:",
        Some(Decision::Rejected) => ":no_entry:",
        Some(Decision::Expired) => ":hourglass:",
        None => ":information_source:",
    }
}

fn outcome_context(a: &ApprovalRequest) -> Value {
    json!({
        "type": "context",
        "elements": [mrkdwn(format!(
            "{} *{}* · {}",
            outcome_emoji(a),
            render::outcome_word(a),
            escape_mrkdwn(&render::outcome(a), 2500)
        ))],
    })
}

/// The offer as it reads once decided: the same facts, the buttons replaced by a line saying
/// who decided, how and when (or that it expired). What `outcome` writes with `chat.update`
/// and the interaction endpoint sends through the `response_url`.
pub fn outcome_blocks(a: &ApprovalRequest) -> Vec<Value> {
    let mut blocks = detail_blocks(a, render::utc(a.expires_at));
    blocks.push(ids_context(a, &[]));
    blocks.push(outcome_context(a));
    blocks
}

/// [`outcome_blocks`] with its notification text.
pub fn outcome_message(a: &ApprovalRequest) -> SlackMessage {
    SlackMessage {
        text: escape_mrkdwn(
            &format!(
                "{}: {} {}",
                render::outcome_word(a),
                render::question(a),
                render::outcome(a)
            ),
            2000,
        ),
        blocks: outcome_blocks(a),
    }
}

/// A short message after the offer, where the offer cannot be edited (incoming webhook).
pub fn followup_message(a: &ApprovalRequest) -> SlackMessage {
    let text = format!(
        "{} {}: {} — {}",
        outcome_emoji(a),
        render::outcome_word(a),
        render::question(a),
        render::outcome(a)
    );
    SlackMessage {
        text: escape_mrkdwn(&text, 2000),
        blocks: vec![
            json!({
                "type": "section",
                "text": mrkdwn(format!(
                    "{} *{}*: {}\n{}\nThe buttons of the earlier message no longer work.",
                    outcome_emoji(a),
                    render::outcome_word(a),
                    escape_mrkdwn(&render::question(a), 500),
                    escape_mrkdwn(&render::outcome(a), 2000)
                )),
            }),
            ids_context(a, &[]),
        ],
    }
}
