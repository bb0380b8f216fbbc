//! What was proven about a proposal, as the dashboard shows it: the change the API server's dry
//! run describes, the obligations checked against the cluster with their evidence, the verdict
//! and the spec the approval is bound to. The inbox card (compact: the change first, the
//! obligations folded when there are many) and the request page (everything) use these pieces.
//!
//! The wording is the approval mail's and Slack's (`notify::render`); the evidence and change
//! lines come from the cluster, so they are redacted and escaped like any outside text.

use maud::{Markup, html};

use super::{said, when};
use crate::domain::{ObligationStatus, Proof, ProofPoint, ProofVerdict, Proposer};
use crate::notify::render;

/// More obligations than this fold away on the inbox card.
const OPEN_UP_TO: usize = 3;

/// The verdict as a badge, coloured like a phase: proven green, refuted red, unverified amber.
pub fn verdict_badge(v: ProofVerdict) -> Markup {
    let class = match v {
        ProofVerdict::Proven => "ok",
        ProofVerdict::Refuted => "bad",
        ProofVerdict::Unverified => "warn",
    };
    html! { span class={ "badge " (class) } data-verdict=(v.as_str()) { (v.as_str()) } }
}

/// The dry run's change, a line each (or why there is none).
pub fn change(proof: Option<&Proof>) -> Markup {
    let refused = proof
        .and_then(|p| p.change.as_ref())
        .is_some_and(|c| c.refused.is_some());
    html! {
        ul.change.refused[refused] {
            @for line in render::change_of(proof) { li { (said(&line)) } }
        }
    }
}

fn mark(status: ObligationStatus) -> Markup {
    let (class, sign) = match status {
        ObligationStatus::Holds => ("holds", "✓"),
        ObligationStatus::Fails => ("fails", "✗"),
        ObligationStatus::Unknown => ("unknown", "?"),
    };
    html! { span class={ "mark " (class) } { (sign) " " (render::mark(status)) } }
}

/// Each obligation: its mark, its statement (its id on hover), its evidence lines.
pub fn obligations(p: &Proof) -> Markup {
    html! {
        @if p.obligations.is_empty() {
            p.empty { (render::unverified(p)) }
        } @else {
            ul.obligations {
                @for o in &p.obligations {
                    li data-obligation=(o.id) data-status=(render::mark(o.status).to_lowercase()) {
                        (mark(o.status)) " " span.statement title=(o.id) { (o.statement) }
                        @if !o.evidence.is_empty() {
                            ul.evidence { @for e in &o.evidence { li { (said(e)) } } }
                        }
                    }
                }
            }
        }
    }
}

fn proposer(p: Proposer) -> &'static str {
    match p {
        Proposer::Offline => "the offline investigator's rules",
        Proposer::Model => "the model",
        Proposer::Approver => "an approver (an alternative they picked)",
        Proposer::Reviewer => "a reviewer (the workflow they asked for after review)",
    }
}

/// `Bound to spec sha256:…: …`, when the proof knows the target's spec.
fn bound(p: &Proof) -> Markup {
    html! {
        @if let Some(h) = &p.spec_hash {
            p.bound { "Bound to spec " code { (h) } ": if the target changes before it runs, nothing is written." }
        }
    }
}

/// The inbox card's part: the change first, then what was checked (folded when long, open
/// when something does not hold), then the spec the approval is bound to.
pub fn card(proof: Option<&Proof>) -> Markup {
    html! {
        section.proof {
            h3 { "What would change" }
            (change(proof))
            @match proof {
                None => p.empty { "Nothing was checked against the cluster." },
                Some(p) => {
                    details.checked open[p.obligations.len() <= OPEN_UP_TO || p.verdict != ProofVerdict::Proven] {
                        summary { "What was checked " (verdict_badge(p.verdict)) " " span.verdict { (render::tally(p)) } }
                        (obligations(p))
                    }
                    (bound(p))
                }
            }
        }
    }
}

/// The request page's account of one proof: who proposed what, the verdict (a refuted proof
/// is framed in red and says so), the change (at selection) and every obligation.
pub fn detail(p: &Proof, id: &str) -> Markup {
    html! {
        div.proof id=(id) data-verdict=(p.verdict.as_str()) {
            dl.facts {
                dt { "Verdict" } dd.verdict { (verdict_badge(p.verdict)) " " (render::tally(p)) }
                dt { "Proposal" } dd { code { (p.workflow_id) } " (" (p.action_type) ") on " (p.target.to_string()) }
                dt { "Proposed by" } dd { (proposer(p.proposer)) }
                dt { "Checked" } dd { (when(p.checked_at)) }
                @if let Some(h) = &p.spec_hash { dt { "Bound to spec" } dd { code { (h) } } }
            }
            @if p.verdict == ProofVerdict::Refuted {
                p.error.refutation { strong { "Refuted: " } (render::tally(p)) " (marked below); nothing may run on this proof." }
            }
            @if p.point == ProofPoint::Selection {
                h4 { "What would change" }
                (change(Some(p)))
            }
            h4 { "What was checked" }
            (obligations(p))
            @if !p.parameters.is_empty() {
                (super::json_block("Parameters proven", &serde_json::Value::Object(p.parameters.clone())))
            }
        }
    }
}
