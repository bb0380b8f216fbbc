//! Whether a message decides a pending approval: the words of the HITL contract
//! (`approve`, `yes`, `continue`… / `deny`, `no`, `cancel`…), alone or with a few words of
//! courtesy around them. Anything longer is a question, never a decision: "no, why is it
//! crashing?" must not deny a fix by accident, and "yes please restart everything" must not
//! approve anything but the pending action.

/// Words that approve the pending action.
pub const APPROVE_WORDS: &[&str] = &[
    "approve", "approved", "yes", "y", "continue", "proceed", "ok", "okay",
];
/// Words that deny it.
pub const DENY_WORDS: &[&str] = &["deny", "denied", "no", "n", "reject", "cancel", "stop"];
/// Words that may stand beside a decision word without changing it.
const FILLER: &[&str] = &[
    "please", "it", "this", "that", "go", "ahead", "do", "the", "fix",
];

/// A decision, when the whole message is one.
pub fn decision(message: &str) -> Option<bool> {
    let words: Vec<String> = message
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    if words.is_empty() || words.len() > 4 {
        return None;
    }
    let approve = words.iter().any(|w| APPROVE_WORDS.contains(&w.as_str()));
    let deny = words.iter().any(|w| DENY_WORDS.contains(&w.as_str()));
    let other = words.iter().any(|w| {
        !APPROVE_WORDS.contains(&w.as_str())
            && !DENY_WORDS.contains(&w.as_str())
            && !FILLER.contains(&w.as_str())
    });
    match (approve, deny, other) {
        (true, false, false) => Some(true),
        (false, true, false) => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::decision;

    #[test]
    fn the_contracts_words_decide() {
        for w in [
            "approve", "Approved", "yes", "y", "continue", "proceed", "OK", "okay",
        ] {
            assert_eq!(decision(w), Some(true), "{w}");
        }
        for w in ["deny", "denied", "no", "n", "reject", "cancel", "Stop"] {
            assert_eq!(decision(w), Some(false), "{w}");
        }
        assert_eq!(decision("yes, please go ahead"), Some(true));
        assert_eq!(decision("approve it."), Some(true));
        assert_eq!(decision("no, cancel"), Some(false));
    }

    #[test]
    fn a_question_or_a_mixed_answer_decides_nothing() {
        for m in [
            "no, why is it crashing?",
            "yes no",
            "is checkout ok in shop",
            "yes please restart everything in prod",
            "",
            "what would you do",
        ] {
            assert_eq!(decision(m), None, "{m}");
        }
    }
}
