//! How the sanitiser's own patterns are compiled: ASCII word boundaries, and a bad pattern is
//! a build-time bug the unit tests catch.

use regex::Regex;

pub(super) fn re(pattern: &str) -> Regex {
    // The patterns are constants checked by the unit tests; a bad one is a build-time bug.
    #[allow(clippy::expect_used)]
    Regex::new(&ascii_word_boundaries(pattern)).expect("sanitiser pattern")
}

/// `\b` as an ASCII word boundary. A Unicode `\b` makes the regex crate's fast DFA give up on
/// any text with a non-ASCII character (a log line with an emoji) and fall back to a far
/// slower engine; the credentials these rules look for are ASCII.
fn ascii_word_boundaries(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('b') => out.push_str("(?-u:\\b)"),
            Some(n) => {
                out.push(c);
                out.push(n);
            }
            None => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_boundaries_are_ascii() {
        assert_eq!(
            ascii_word_boundaries(r"\bcurl\b\\b\s"),
            r"(?-u:\b)curl(?-u:\b)\\b\s"
        );
    }
}
