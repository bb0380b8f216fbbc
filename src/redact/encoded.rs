//! Credentials no keyword announces, found by decoding: base64 that holds `user:password` or
//! a PEM private key, and Discord bot tokens (their first part is a numeric id in base64).

use base64::Engine as _;

use super::{Marker, Span};

/// base64 tokens that decode to `user:password` (HTTP basic, docker `auth`) or to a PEM
/// private key (kubeconfig `client-key-data`, a Secret's data shown as text).
pub fn find_base64(text: &str, out: &mut Vec<Span>) {
    let bytes = text.as_bytes();
    let b64 = |b: u8| b.is_ascii_alphanumeric() || b == b'+' || b == b'/';
    // Part of a longer word (`x-…`, `…_…`) is not a token on its own.
    let glued = |b: Option<&u8>| b.is_some_and(|b| *b == b'_' || *b == b'-' || *b == b'.');
    let mut i = 0;
    while i < bytes.len() {
        if !b64(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && b64(bytes[i]) {
            i += 1;
        }
        let body = i;
        while i < bytes.len() && bytes[i] == b'=' && i - body < 2 {
            i += 1;
        }
        let len = i - start;
        if len < 8 || glued(bytes.get(i)) || (start > 0 && glued(bytes.get(start - 1))) {
            continue;
        }
        let token = &text[start..i];
        let (marker, rule) = if token.starts_with("LS0tLS1CRUdJTi") {
            // "-----BEGIN": a PEM block; a private key goes, a certificate stays.
            let head = &token[..token.len().min(80) / 4 * 4];
            match base64::engine::general_purpose::STANDARD.decode(head) {
                Ok(d) if String::from_utf8_lossy(&d).contains("PRIVATE KEY") => {
                    (Marker::PrivateKey, "base64-private-key")
                }
                _ => continue,
            }
        } else {
            if len > 512 {
                continue;
            }
            let decoded = if token.ends_with('=') || len % 4 == 0 {
                base64::engine::general_purpose::STANDARD.decode(token)
            } else {
                base64::engine::general_purpose::STANDARD_NO_PAD.decode(token)
            };
            match decoded {
                Ok(d) if user_pass(&d) => (Marker::Redacted, "base64-user-pass"),
                _ => continue,
            }
        };
        out.push(Span {
            start,
            end: i,
            marker,
            rule,
        });
    }
}

/// Discord bot tokens (trufflehog `discordbottoken`, detect-secrets `DiscordBotTokenDetector`):
/// `<base64 of the bot's numeric id>.<6>.<27–38>`. No keyword announces them, so instead of a
/// regex over every text this looks only at each `.` that is followed by six base64url
/// characters and a second `.`, and the first part must decode to the 17–20 digits of an id —
/// other dotted base64 (a cursor, a version) stays.
pub fn find_discord_bot_tokens(text: &str, out: &mut Vec<Span>) {
    let bytes = text.as_bytes();
    let url64 = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-';
    let run = |from: usize| {
        bytes
            .get(from..)
            .map_or(0, |r| r.iter().take_while(|b| url64(**b)).count())
    };
    let mut i = 0;
    while let Some(off) = bytes
        .get(i..)
        .and_then(|r| r.iter().position(|b| *b == b'.'))
    {
        let dot = i + off;
        i = dot + 1;
        if run(dot + 1) != 6 || bytes.get(dot + 7) != Some(&b'.') {
            continue;
        }
        let tail = run(dot + 8);
        let head = bytes
            .get(..dot)
            .map_or(0, |r| r.iter().rev().take_while(|b| url64(**b)).count());
        if !(27..=38).contains(&tail) || !(23..=28).contains(&head) {
            continue;
        }
        let (start, end) = (dot - head, dot + 8 + tail);
        let id = text.get(start..dot).and_then(|h| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(h)
                .ok()
        });
        if id.is_some_and(|d| (17..=20).contains(&d.len()) && d.iter().all(u8::is_ascii_digit)) {
            out.push(Span {
                start,
                end,
                marker: Marker::Redacted,
                rule: "discord-bot-token",
            });
            i = end;
        }
    }
}

/// `user:password`, one line of printable ASCII.
fn user_pass(d: &[u8]) -> bool {
    if d.len() < 5 || !d.iter().all(|b| (0x21..=0x7e).contains(b)) {
        return false;
    }
    let Some(colon) = d.iter().position(|b| *b == b':') else {
        return false;
    };
    let (user, pass) = (&d[..colon], &d[colon + 1..]);
    !user.is_empty()
        && user.len() <= 64
        && user
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"._@+-$\\".contains(b))
        && pass.len() >= 3
        && !pass.iter().all(u8::is_ascii_digit)
        && !pass.starts_with(b"//")
        && !pass.contains(&b'{')
}
