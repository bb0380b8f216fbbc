//! The visible investigation plan of invocation 1 (the KubeIntellect seed's "Visible
//! investigation plan"): the model states its plan before three or more tool calls, as a block
//!
//! ```text
//! INVESTIGATION_PLAN:
//! - Describe the crashing pod
//! - Read its previous logs
//! ```
//!
//! in its message. [`parse`] takes the steps out of that message; [`Tracker`] follows one
//! investigation (the first plan stated wins, the cluster tool calls that ran after it) and
//! turns it into the [`InvestigationPlan`] recorded on the analysis, or into a warning when
//! the model made three or more calls without one. The plan is for transparency — the CLI, the
//! API and the audit trail show it — never a gate: a missing or messy plan does not fail the
//! investigation.
//!
//! Input is model output that has already passed the sanitiser ([`Redacted`]), so the steps
//! are as safe to store and show as the message itself; they are capped in number and length.

use crate::domain::{InvestigationPlan, PlanSource, PlanStep};
use crate::redact::Redacted;

/// The marker line that opens a plan.
pub const MARKER: &str = "INVESTIGATION_PLAN";
/// At most this many steps are kept; a longer plan is cut.
pub const MAX_STEPS: usize = 12;
/// At most this many characters of a step are kept (the rest becomes `…`).
pub const MAX_STEP_CHARS: usize = 200;
/// A model that made this many tool calls without stating a plan gets a warning.
pub const PLAN_EXPECTED_AT: usize = 3;

/// Markdown that may wrap the marker or a step: bold, italics, code, headings, quotes.
const DECORATION: &[char] = &['*', '_', '`', '#', '>', ' ', '\t'];

/// The steps of the first plan block in `content`, or `None` when it holds none (no marker,
/// or a marker with no step under it).
///
/// Tolerated: the marker in any case, wrapped in markdown (`**INVESTIGATION_PLAN:**`,
/// `` `INVESTIGATION_PLAN:` ``, `## INVESTIGATION_PLAN`), indented, anywhere in the message
/// (prose before it, tool calls beside it); steps as `-`, `*`, `+`, `•` or numbered (`1.`,
/// `1)`) bullets, with or without a checkbox (`[ ]`, `[x]`), blank lines between them, and
/// CRLF line ends. A step written on the marker's own line (`INVESTIGATION_PLAN: check X`)
/// counts. The block ends at the first line that is not a step once steps have begun.
pub fn parse(content: &Redacted) -> Option<Vec<String>> {
    let mut lines = content.as_str().lines();
    let rest = lines.by_ref().find_map(after_marker)?;
    let mut steps = Vec::new();
    if let Some(first) = step_text(rest) {
        steps.push(first);
    }
    for line in lines {
        if line.trim().is_empty() {
            continue;
        }
        match bullet(line) {
            Some(text) => {
                if let Some(s) = step_text(text) {
                    steps.push(s);
                }
            }
            None => break,
        }
        if steps.len() == MAX_STEPS {
            break;
        }
    }
    (!steps.is_empty()).then_some(steps)
}

/// What follows the marker on its line, if `line` is the marker line.
fn after_marker(line: &str) -> Option<&str> {
    let t = line.trim_start_matches(DECORATION);
    let head = t.get(..MARKER.len())?;
    if !head.eq_ignore_ascii_case(MARKER) {
        return None;
    }
    let rest = t.get(MARKER.len()..)?.trim_start_matches(DECORATION);
    // `INVESTIGATION_PLANS` or `INVESTIGATION_PLANNER` is another word.
    if rest.starts_with(|c: char| c.is_alphanumeric()) {
        return None;
    }
    Some(rest.trim_start_matches(':').trim_start_matches(DECORATION))
}

/// The text of a bullet line (`- x`, `* x`, `+ x`, `• x`, `1. x`, `1) x`, also quoted with
/// `>`), or `None`.
fn bullet(line: &str) -> Option<&str> {
    let t = line.trim_start_matches(|c: char| c == '>' || c.is_whitespace());
    for b in ['-', '*', '+', '•'] {
        if let Some(rest) = t.strip_prefix(b) {
            // `**bold**` at the start of a line is not a bullet; `*` followed by a space is.
            if rest.is_empty() || rest.starts_with(char::is_whitespace) {
                return Some(rest);
            }
        }
    }
    let digits = t.len() - t.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    if digits > 0 && digits <= 3 {
        let rest = t.get(digits..)?;
        let rest = rest.strip_prefix('.').or_else(|| rest.strip_prefix(')'))?;
        if rest.is_empty() || rest.starts_with(char::is_whitespace) {
            return Some(rest);
        }
    }
    None
}

/// A step's text without checkbox and emphasis, capped; `None` when nothing is left.
fn step_text(raw: &str) -> Option<String> {
    let mut t = raw.trim();
    for checkbox in ["[ ]", "[x]", "[X]"] {
        if let Some(rest) = t.strip_prefix(checkbox) {
            t = rest.trim_start();
        }
    }
    // Emphasis around the whole step (`**Describe the pod**`), not code spans inside it.
    for w in ["**", "__", "*", "_"] {
        if let Some(inner) = t.strip_prefix(w).and_then(|r| r.strip_suffix(w)) {
            t = inner.trim();
            break;
        }
    }
    if t.is_empty() {
        return None;
    }
    if t.chars().count() <= MAX_STEP_CHARS {
        return Some(t.to_owned());
    }
    let mut cut: String = t.chars().take(MAX_STEP_CHARS - 1).collect();
    cut.push('…');
    Some(cut)
}

/// One investigation's plan: the first one stated, and how many cluster tool calls had run by
/// then.
#[derive(Debug, Default)]
pub struct Tracker {
    stated: Option<(Vec<String>, usize)>,
}

impl Tracker {
    /// Look for a plan in an assistant message. `calls_run` is the number of cluster tool calls
    /// run before this message — the calls the message itself asks for come after the plan it
    /// states. Only the first plan is kept.
    pub fn saw(&mut self, content: Option<&Redacted>, calls_run: usize) {
        if self.stated.is_some() {
            return;
        }
        if let Some(steps) = content.and_then(parse) {
            self.stated = Some((steps, calls_run));
        }
    }

    /// The plan to record once the investigation has run `calls_run` cluster tool calls in all,
    /// and the warning when a plan was expected but none was stated.
    ///
    /// A step is marked done when at least one cluster tool call ran after the plan was
    /// stated, and then every step is: kubemedic cannot tell reliably which call answered
    /// which step (the steps are free text), so it claims only what it knows — that the
    /// investigation went on to gather evidence after planning. A plan stated after the last
    /// call (or with only `submit_result`) has no step done.
    pub fn finish(self, calls_run: usize) -> (Option<InvestigationPlan>, Option<String>) {
        match self.stated {
            Some((steps, at)) => {
                let done = calls_run > at;
                let plan = InvestigationPlan {
                    source: PlanSource::Model,
                    from: None,
                    steps: steps
                        .into_iter()
                        .map(|step| PlanStep { step, done })
                        .collect(),
                };
                (Some(plan), None)
            }
            None if calls_run >= PLAN_EXPECTED_AT => (
                None,
                Some(format!(
                    "no investigation plan stated before {calls_run} tool calls"
                )),
            ),
            None => (None, None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(text: &str) -> Option<Vec<String>> {
        parse(&Redacted::new(text))
    }

    #[test]
    fn the_seed_format_is_read() {
        let got = steps(
            "INVESTIGATION_PLAN:\n- Check pod status in default namespace\n- Describe the crashing pod\n- Query Loki for errors in the last 30m\n- Propose a fix\n",
        );
        assert_eq!(
            got.unwrap(),
            [
                "Check pod status in default namespace",
                "Describe the crashing pod",
                "Query Loki for errors in the last 30m",
                "Propose a fix"
            ]
        );
    }

    #[test]
    fn markdown_indentation_bullets_and_crlf_are_tolerated() {
        for (text, want) in [
            (
                "**INVESTIGATION_PLAN:**\r\n* Describe the pod\r\n* **Read previous logs**\r\n",
                vec!["Describe the pod", "Read previous logs"],
            ),
            (
                "I will look at the rollout first.\n\n   `INVESTIGATION_PLAN:`\n\n  1. Describe `checkout`\n  2) Compare ReplicaSets\n\n  3. Resolve the root owner\nThen I conclude.",
                vec![
                    "Describe `checkout`",
                    "Compare ReplicaSets",
                    "Resolve the root owner",
                ],
            ),
            (
                "## Investigation_Plan\n+ one\n• two\n- [x] three\n- [ ] four\n",
                vec!["one", "two", "three", "four"],
            ),
            (
                "INVESTIGATION_PLAN: describe the node\n- list its pods",
                vec!["describe the node", "list its pods"],
            ),
            (
                "> **INVESTIGATION_PLAN**:\n> - quoted\n> 2. also quoted\n\nDone.",
                vec!["quoted", "also quoted"],
            ),
            (
                "INVESTIGATION_PLAN:\n- look at `__init__`\n- _stress_\n",
                vec!["look at `__init__`", "stress"],
            ),
        ] {
            assert_eq!(steps(text).unwrap_or_default(), want, "{text:?}");
        }
    }

    #[test]
    fn no_marker_no_steps_or_another_word_is_no_plan() {
        for text in [
            "",
            "Let me check the pod.\n- describe it",
            "INVESTIGATION_PLAN:\n",
            "INVESTIGATION_PLAN:\nI will describe the pod.\n- too late",
            "INVESTIGATION_PLANNER:\n- not the marker",
            "**INVESTIGATION_PLAN:**\n- \n- [ ]\n",
        ] {
            assert_eq!(steps(text), None, "{text:?}");
        }
    }

    #[test]
    fn steps_are_capped_in_number_and_length() {
        let many: String = (1..=40).map(|i| format!("- step {i}\n")).collect();
        let got = steps(&format!("INVESTIGATION_PLAN:\n{many}")).unwrap();
        assert_eq!(got.len(), MAX_STEPS);
        assert_eq!(got[11], "step 12");

        let long = "é".repeat(500);
        let got = steps(&format!("INVESTIGATION_PLAN:\n- {long}\n")).unwrap();
        assert_eq!(got[0].chars().count(), MAX_STEP_CHARS);
        assert!(got[0].ends_with('…'));
    }

    #[test]
    fn credentials_in_a_step_are_redacted() {
        let got = steps(
            "INVESTIGATION_PLAN:\n- Try the DB with postgres://app:Sup3rS3cretPw@db:5432/app\n",
        )
        .unwrap();
        assert!(!got[0].contains("Sup3rS3cretPw"), "{got:?}");
        assert!(got[0].contains("[REDACTED]"), "{got:?}");
    }

    #[test]
    fn the_first_plan_wins_and_steps_are_done_once_calls_ran_after_it() {
        let first = Redacted::new("INVESTIGATION_PLAN:\n- a\n- b");
        let second = Redacted::new("INVESTIGATION_PLAN:\n- c");
        let mut t = Tracker::default();
        t.saw(None, 0);
        t.saw(Some(&first), 1);
        t.saw(Some(&second), 3);
        let (plan, warning) = t.finish(4);
        let plan = plan.unwrap();
        assert_eq!(plan.source, PlanSource::Model);
        assert_eq!(plan.from, None);
        let got: Vec<(&str, bool)> = plan
            .steps
            .iter()
            .map(|s| (s.step.as_str(), s.done))
            .collect();
        assert_eq!(got, [("a", true), ("b", true)]);
        assert_eq!(warning, None);

        // Stated, then no call ran: nothing is done.
        let mut t = Tracker::default();
        t.saw(Some(&first), 2);
        let (plan, _) = t.finish(2);
        assert!(plan.unwrap().steps.iter().all(|s| !s.done));
    }

    #[test]
    fn three_calls_without_a_plan_warn_and_fewer_do_not() {
        let (plan, warning) = Tracker::default().finish(3);
        assert_eq!(plan, None);
        assert_eq!(
            warning.as_deref(),
            Some("no investigation plan stated before 3 tool calls")
        );
        assert_eq!(Tracker::default().finish(2), (None, None));
    }
}
