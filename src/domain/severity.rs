//! Severity: of an alert (its `severity` label, in the words its rules use) and of a root cause
//! (the investigation's judgement: critical, high, medium or low). One type for both, so the
//! offline rules cannot misspell a level and every reader compares variants, not text.
//!
//! Serialised as the exact text it was read from: a known level as its lower-case name, any
//! other word (`page`, `P1`, `Critical` with a capital) kept as written, so a stored request, a
//! policy comparing `input.severity` and a workflow's `labels.severity` see what they always saw.

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Severity {
    Critical,
    High,
    Medium,
    Low,
    /// Alertmanager's usual middle level.
    Warning,
    /// Alertmanager's usual lowest level.
    Info,
    /// Any other word, kept as written.
    Other(String),
}

impl Severity {
    const KNOWN: [Severity; 6] = [
        Severity::Critical,
        Severity::High,
        Severity::Medium,
        Severity::Low,
        Severity::Warning,
        Severity::Info,
    ];

    /// The level `text` names: a known level when it is that level's name exactly.
    pub fn parse(text: &str) -> Self {
        Self::KNOWN
            .iter()
            .find(|k| k.as_str() == text)
            .cloned()
            .unwrap_or_else(|| Severity::Other(text.to_owned()))
    }

    /// The same level, whatever the case it was written in: a workflow meant for `Critical`
    /// suits a `critical` alert.
    pub fn same_level(&self, other: &Severity) -> bool {
        self.as_str().eq_ignore_ascii_case(other.as_str())
    }

    /// `*`: where a list of levels names it (a workflow's labels), any level.
    pub fn is_any(&self) -> bool {
        matches!(self, Severity::Other(text) if text == "*")
    }

    pub fn as_str(&self) -> &str {
        match self {
            Severity::Critical => "critical",
            Severity::High => "high",
            Severity::Medium => "medium",
            Severity::Low => "low",
            Severity::Warning => "warning",
            Severity::Info => "info",
            Severity::Other(text) => text,
        }
    }
}

super::action::named_text!(Severity);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_round_trips_exactly() {
        for text in [
            "critical", "high", "medium", "low", "warning", "info", "page", "Critical",
        ] {
            let s: Severity = serde_json::from_value(serde_json::json!(text)).unwrap();
            assert_eq!(serde_json::to_value(&s).unwrap(), text);
        }
        assert_eq!(Severity::parse("warning"), Severity::Warning);
        assert_eq!(
            Severity::parse("Critical"),
            Severity::Other("Critical".into()),
            "only the exact name is the known level: what a policy compares stays as written"
        );
        assert!(Severity::parse("Critical").same_level(&Severity::Critical));
        assert!(!Severity::Warning.same_level(&Severity::Critical));
        assert!(Severity::parse("*").is_any() && !Severity::Info.is_any());
    }
}
