//! The summary: outcomes, the auto-approved share, the median time to remediation, the
//! effectiveness distribution, tokens per day and guardrail blocks, over a chosen period —
//! charts drawn on the server as inline SVG.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use maud::{Markup, html};

use super::{count, failed, layout, page_caller, respond, trusted};
use crate::domain::Role;
use crate::web::query::{PERIODS, period_since};
use crate::web::{ApiError, AppState, Caller};

/// Horizontal bars, one per (label, value), with the value at the end of each.
fn bars(id: &str, items: &[(String, i64)], colour: &str) -> Markup {
    if items.is_empty() {
        return html! { p.empty { "Nothing in this period." } };
    }
    let max = items.iter().map(|(_, v)| *v).max().unwrap_or(1).max(1);
    let (label_w, bar_w, row_h) = (170.0, 360.0, 22.0);
    let height = row_h * items.len() as f64 + 4.0;
    let mut svg = format!(
        "<svg id=\"{id}\" class=\"chart\" role=\"img\" viewBox=\"0 0 {w} {height}\" width=\"{w}\" height=\"{height}\">",
        w = label_w + bar_w + 70.0
    );
    for (i, (label, value)) in items.iter().enumerate() {
        let y = i as f64 * row_h + 2.0;
        let w = (*value as f64 / max as f64 * bar_w).max(if *value > 0 { 1.0 } else { 0.0 });
        let _ = write!(
            svg,
            "<text x=\"{lx}\" y=\"{ty}\" text-anchor=\"end\">{label}</text>\
             <rect x=\"{label_w}\" y=\"{y}\" width=\"{w:.1}\" height=\"{bh}\" fill=\"{colour}\">\
             <title>{label}: {value}</title></rect>\
             <text x=\"{vx:.1}\" y=\"{ty}\">{shown}</text>",
            lx = label_w - 8.0,
            ty = y + 15.0,
            bh = row_h - 6.0,
            vx = label_w + w + 6.0,
            label = escape(label),
            shown = count(*value),
        );
    }
    svg.push_str("</svg>");
    trusted(svg)
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// `GET /summary?period=1d|7d|30d|all`
pub async fn summary(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    uri: Uri,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let who = match page_caller(caller, &uri, Role::Viewer) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    let (period, since) = match period_since(q.get("period").map(String::as_str), state.clock.now())
    {
        Ok(p) => p,
        Err(e) => return failed(e, &who),
    };
    let s = match state.store.summary(since).await {
        Ok(s) => s,
        Err(e) => return failed(ApiError::from(e), &who),
    };
    let outcomes: Vec<(String, i64)> = s
        .by_phase
        .iter()
        .map(|(p, n)| (p.as_str().to_owned(), *n))
        .collect();
    let share = if s.gated > 0 {
        format!("{:.0} %", s.auto_approved as f64 * 100.0 / s.gated as f64)
    } else {
        "—".into()
    };
    let ttr = s.median_ttr_seconds.map_or("—".into(), |secs| {
        if secs < 120.0 {
            format!("{secs:.0} s")
        } else {
            format!("{:.1} min", secs / 60.0)
        }
    });
    let bins = ["0–0.2", "0.2–0.4", "0.4–0.6", "0.6–0.8", "0.8–1"];
    let effectiveness: Vec<(String, i64)> = bins
        .iter()
        .zip(s.effectiveness.iter())
        .map(|(l, n)| ((*l).to_owned(), *n))
        .collect();
    let body = html! {
        nav.periods {
            @for (value, label, _) in PERIODS {
                @if value == period { strong { (label) } } @else { a href={ "/summary?period=" (value) } { (label) } }
            }
        }
        section.figures #figures {
            div.figure { span.value #total { (count(s.total)) } span.label { "requests" } }
            div.figure { span.value #auto-share { (share) } span.label { "auto-approved (" (s.auto_approved) " of " (s.gated) " gated)" } }
            div.figure { span.value #median-ttr { (ttr) } span.label { "median time to remediation" } }
            div.figure { span.value { (count(s.tokens_per_day.iter().map(|(_, n)| n).sum())) } span.label { "LLM tokens" } }
        }
        section { h2 { "Requests by outcome" } (bars("chart-outcomes", &outcomes, "#3b6ea8")) }
        section { h2 { "Effectiveness of verified remediations" } (bars("chart-effectiveness", &effectiveness, "#2f8f4e")) }
        section { h2 { "Tokens per day" } (bars("chart-tokens", &s.tokens_per_day, "#8a5a9e")) }
        section { h2 { "Blocks by guardrail" } (bars("chart-guardrails", &s.guardrail_blocks, "#b5542c")) }
    };
    respond(StatusCode::OK, layout("Summary", Some(&who), body))
}
