//! When a match is not a credential after all: the text around it says it is a port, an
//! endpoint, an error message going on, prose about a password, or dotted base64 that is not a
//! JWT. The rules in `rules.rs` ask these before they redact.

use std::sync::LazyLock;

use base64::Engine as _;
use regex::{Captures, Regex};

use super::pattern::re;

/// Words that follow "password is" in messages about a password, not in a password.
const PROSE: &str = "a an the not no now still too being been set unset empty blank missing \
    required mandatory optional needed invalid incorrect wrong correct valid expired expiring \
    revoked rotated changed reset locked disabled enabled stored present absent configured \
    defined provided given null none nil undefined weak short long ok fine good bad in on for \
    from of to via used mounted loaded read sent redacted hidden masked updated about going \
    accepted rejected denied verified unknown unavailable different same only also and or but \
    is was will should must can cannot could would may might has have had does did do ignored \
    deprecated generated created deleted removed added saved true false yes never always \
    managed rotating refreshed renewed mismatch mismatched matching match file secret stdin \
    env";

pub(super) fn prose(v: &str) -> bool {
    let w = v
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_ascii_lowercase();
    PROSE.split_whitespace().any(|p| p == w)
}

/// The last word of a key name that makes it a credential's name, even when its value looks
/// like a port.
const CREDENTIAL_WORDS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "pass",
    "pwd",
    "pw",
    "secret",
    "secrets",
    "token",
    "key",
    "apikey",
    "auth",
    "credential",
    "credentials",
    "cred",
    "creds",
    "sas",
    "signature",
    "private",
    "dsn",
    "cookie",
];

/// `host:port` read as `key:value`: a host name holding a credential word
/// (`gatekeeper-webhook-service.gatekeeper-system.svc:443/v1/admit`,
/// `token-service.auth.svc:8080`). The separator is a bare `:` and the value a port, maybe
/// followed by a path or query; the "key" is a URL's host, or a name whose last word is not
/// a credential's (`svc`, `service`, `webhook`), so `db_password:1234` is still redacted.
pub(super) fn host_and_port(text: &str, c: &Captures) -> bool {
    let (Some(open), Some(key), Some(close), Some(sep), Some(value)) =
        (c.get(1), c.get(2), c.get(3), c.get(4), c.get(5))
    else {
        return false;
    };
    if !open.is_empty() || !close.is_empty() || sep.as_str() != ":" {
        return false;
    }
    let v = value.as_str();
    let digits = v.bytes().take_while(u8::is_ascii_digit).count();
    let port = v
        .get(..digits)
        .filter(|d| (1..=5).contains(&d.len()))
        .and_then(|d| d.parse::<u32>().ok())
        .is_some_and(|p| (1..=65535).contains(&p));
    let rest = v.get(digits..).unwrap_or("");
    if !port || !(rest.is_empty() || rest.starts_with(['/', '?', '#', ':'])) {
        return false;
    }
    let before = text.get(..key.start()).unwrap_or("");
    if before.ends_with("//") || before.ends_with('@') {
        return true;
    }
    let last = key.as_str().rsplit(['.', '-', '_']).next().unwrap_or("");
    !CREDENTIAL_WORDS.contains(&last.to_ascii_lowercase().as_str())
}

/// `Authorization: Bearer …`: the scheme stays, and authorization-header redacts what
/// follows it.
pub(super) fn auth_scheme(c: &Captures) -> bool {
    let (Some(key), Some(value)) = (c.get(2), c.get(5)) else {
        return false;
    };
    key.as_str().to_ascii_lowercase().ends_with("authorization")
        && AUTH_SCHEMES
            .split_whitespace()
            .any(|s| s.eq_ignore_ascii_case(value.as_str()))
}

/// The schemes authorization-header keeps.
const AUTH_SCHEMES: &str =
    "bearer basic token digest negotiate apikey sso-key ssws api-token geniekey splunk bot oauth";

static ENDPOINT: LazyLock<Regex> =
    LazyLock::new(|| re(r"^[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+:[0-9]{1,5}$"));

/// A value that is a `host:port` (`token-service: token-service.auth.svc:8080`): an
/// endpoint, not a credential.
pub(super) fn endpoint(c: &Captures) -> bool {
    c.get(5).is_some_and(|v| ENDPOINT.is_match(v.as_str()))
}

/// Words that start the rest of an error message: what follows `token:` in
/// `failed to get token: context deadline exceeded`.
const MESSAGE_WORDS: &str = "failed failure unable unexpected unexpectedly context deadline dial \
    lookup connect connection timeout eof x509 tls oauth2 rpc http http2 request response status \
    error err forbidden unauthorized unauthenticated refused reset server client permission \
    get post put patch delete head options";

/// The value after `key: ` where the key ends a phrase (`failed to call webhook: Post "…"`,
/// `failed calling webhook "x": failed to call…`, `…/token": dial tcp…`) and the value is a
/// word that carries the message on (see `MESSAGE_WORDS`, `PROSE`), or the name of a
/// Kubernetes resource before a quoted object name (`token: serviceaccounts "checkout" is
/// forbidden`). A Go error chain, not a setting: a setting's key starts its line, an item or
/// a mapping (`token: x`, `- token: x`, `{token: x}`, `"token": "x"`).
pub(super) fn message_goes_on(text: &str, c: &Captures) -> bool {
    let (Some(open), Some(sep), Some(value)) = (c.get(1), c.get(4), c.get(5)) else {
        return false;
    };
    let v = value.as_str();
    if sep.as_str().trim() != ":" || v.starts_with(['"', '\'', '\\']) {
        return false;
    }
    let before = text.get(..open.start()).unwrap_or("");
    let line = before.rsplit('\n').next().unwrap_or(before);
    let line = line.rsplit("\\n").next().unwrap_or(line);
    let phrase_end = line.trim_end().chars().next_back().is_some_and(|ch| {
        (ch.is_ascii_alphanumeric() || "\"')]".contains(ch)) && line.ends_with([' ', '\t'])
    }) || line.ends_with('/');
    if !phrase_end {
        return false;
    }
    let word = v.trim_end_matches(':');
    let lower = word.to_ascii_lowercase();
    if prose(word) || MESSAGE_WORDS.split_whitespace().any(|w| w == lower) {
        return true;
    }
    let after = text.get(value.end()..).unwrap_or("");
    word.bytes()
        .all(|b| b.is_ascii_lowercase() || b == b'.' || b == b'-')
        && (after.starts_with(" \"") || after.starts_with(" \\\""))
}

/// A three-part `eyJ….eyJ….…` string whose first part is JSON without `alg`: not a JWT, whose
/// header must name its algorithm (RFC 7515 §4.1.1), but base64 JSON joined by dots (a
/// cursor, a signed cache entry). An undecodable header counts as a JWT.
pub(super) fn not_a_jwt(token: &str) -> bool {
    let head = token.split('.').next().unwrap_or("");
    let Ok(bytes) = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(head) else {
        return false;
    };
    match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(serde_json::Value::Object(header)) => !header.contains_key("alg"),
        _ => false,
    }
}
