//! kubemedic's own rules: the forms gitleaks does not look for or looks for only in source
//! code — key blocks, URL and header credentials, `KEY=value` by key name in every notation a
//! Kubernetes object or a log line uses, credentials in command lines and probe commands (as
//! one string, as a JSON or YAML list), free text, base64 `user:pass`, webhook URLs.
//!
//! Each rule finds spans to redact; what is *not* redacted (a `$VAR` reference, an empty
//! value, a marker left by an earlier pass) is decided here too, so that sanitising twice
//! changes nothing.

use std::sync::LazyLock;

use base64::Engine as _;
use regex::{Captures, Regex};

use super::{Marker, Span, is_sensitive_key};

fn re(pattern: &str) -> Regex {
    // The patterns are constants checked by the unit tests; a bad one is a build-time bug.
    #[allow(clippy::expect_used)]
    Regex::new(pattern).expect("sanitiser pattern")
}

/// Pieces the command-line patterns share.
///
/// `SEP` separates two arguments as text: blanks, a JSON or flow-YAML `", "`, or a new YAML
/// list item. `GAP` is the rest of one command: no `;`, `|`, `&` or new line, except a new
/// line that continues a YAML or JSON list. `VALUE` is one argument, quoted or not.
const SEP: &str = r#"(?:["']?(?:[ \t]+|[ \t]*,[ \t]*|[ \t]*\r?\n[ \t]*(?:-[ \t]+)?)["']?)"#;
const GAP: &str = r#"(?:[^\n;|&]|\r?\n[ \t]*(?:-[ \t]|"))*?"#;
const VALUE: &str = r#"("(?:[^"\\\n]|\\.)*"|'[^'\n]*'|[^\s"',\]\-][^\s"',\]]*)"#;
/// Words that make a key or flag name worth a look (`is_sensitive_key` decides).
const WORDS: &str = r"(?i:pass|pwd|pw|secret|token|key|auth|credential|cred|dsn|cookie|sas|signature|webhook|private)";

fn tpl(pattern: &str) -> Regex {
    re(&pattern
        .replace("{SEP}", SEP)
        .replace("{GAP}", GAP)
        .replace("{VALUE}", VALUE)
        .replace("{WORDS}", WORDS))
}

type Finder = fn(&Captures, &str) -> Option<(usize, usize, Marker)>;

pub struct Rule {
    pub name: &'static str,
    re: Regex,
    find: Finder,
}

/// The span of group `i`, if it took part.
fn group(c: &Captures, i: usize) -> Option<(usize, usize)> {
    c.get(i).map(|m| (m.start(), m.end()))
}

/// The span of a value inside its quotes, unless it must stay (see `keep`).
fn value_span(c: &Captures, i: usize) -> Option<(usize, usize, Marker)> {
    let m = c.get(i)?;
    let v = m.as_str();
    let q = ["\\\"", "\"", "'"]
        .into_iter()
        .find(|q| v.len() >= 2 * q.len() && v.starts_with(q) && v.ends_with(q))
        .map_or(0, str::len);
    let inner = &v[q..v.len() - q];
    if keep(inner) {
        return None;
    }
    Some((m.start() + q, m.end() - q, Marker::Redacted))
}

static PLACEHOLDER: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"^(?:\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|\$\(.*\)|\$\{\{.*\}\}|\{\{.*\}\}|%[A-Za-z_]+%|<[A-Za-z_ -]+>|\*+|\[REDACTED[A-Z ]*\].*)$"#,
    )
});

/// Values that are not credentials: empty, a variable or template reference, a placeholder,
/// a redaction marker.
pub fn keep(v: &str) -> bool {
    let v = v.trim();
    v.is_empty() || PLACEHOLDER.is_match(v)
}

/// Words that follow "password is" in messages about a password, not in a password.
const PROSE: &[&str] = &[
    "a",
    "an",
    "the",
    "not",
    "no",
    "now",
    "still",
    "too",
    "being",
    "been",
    "set",
    "unset",
    "empty",
    "blank",
    "missing",
    "required",
    "mandatory",
    "optional",
    "needed",
    "invalid",
    "incorrect",
    "wrong",
    "correct",
    "valid",
    "expired",
    "expiring",
    "revoked",
    "rotated",
    "changed",
    "reset",
    "locked",
    "disabled",
    "enabled",
    "stored",
    "present",
    "absent",
    "configured",
    "defined",
    "provided",
    "given",
    "null",
    "none",
    "nil",
    "undefined",
    "weak",
    "short",
    "long",
    "ok",
    "fine",
    "good",
    "bad",
    "in",
    "on",
    "for",
    "from",
    "of",
    "to",
    "via",
    "used",
    "mounted",
    "loaded",
    "read",
    "sent",
    "redacted",
    "hidden",
    "masked",
    "updated",
    "about",
    "going",
    "accepted",
    "rejected",
    "denied",
    "verified",
    "unknown",
    "unavailable",
    "different",
    "same",
    "too",
    "only",
    "also",
    "and",
    "or",
    "but",
    "is",
    "was",
    "will",
    "should",
    "must",
    "can",
    "cannot",
    "could",
    "would",
    "may",
    "might",
    "has",
    "have",
    "had",
    "does",
    "did",
    "do",
    "ignored",
    "deprecated",
    "generated",
    "created",
    "deleted",
    "removed",
    "added",
    "saved",
    "true",
    "false",
    "yes",
    "never",
    "always",
    "managed",
    "rotating",
    "refreshed",
    "renewed",
    "mismatch",
    "mismatched",
    "matching",
    "match",
    "file",
    "secret",
    "stdin",
    "env",
];

fn prose(v: &str) -> bool {
    let w = v
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_ascii_lowercase();
    PROSE.contains(&w.as_str())
}

pub static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    vec![
        // PEM private keys (RSA, EC, DSA, OpenSSH, PKCS#8, encrypted), PGP private key blocks;
        // complete, or cut off by a cap.
        Rule {
            name: "private-key",
            re: re(
                r"-----BEGIN ((?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?)-----(?s:.*?)(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\z)",
            ),
            find: |c, _| {
                let (s, e) = group(c, 0)?;
                Some((s, e, Marker::PrivateKey))
            },
        },
        Rule {
            name: "putty-private-key",
            re: re(r"Private-Lines: \d+(?:\r?\n|\\n)(?:[A-Za-z0-9+/=]+(?:\r?\n|\\n)?)+"),
            find: |c, _| {
                let (s, e) = group(c, 0)?;
                Some((s, e, Marker::PrivateKey))
            },
        },
        Rule {
            name: "certificate",
            re: re(
                r"-----BEGIN (CERTIFICATE|TRUSTED CERTIFICATE|CERTIFICATE REQUEST)-----(?s:.*?)(-----END [A-Z ]+-----|\z)",
            ),
            find: |c, _| {
                let (s, e) = group(c, 0)?;
                Some((s, e, Marker::Certificate))
            },
        },
        Rule {
            name: "age-secret-key",
            re: re(r"AGE-SECRET-KEY-1[0-9A-Z]{50,}"),
            find: |c, _| {
                let (s, e) = group(c, 0)?;
                Some((s, e, Marker::PrivateKey))
            },
        },
        // user:password@ in any URL or connection string (postgres, mysql, mongodb(+srv),
        // redis(s), amqp(s), http…). The password may hold `/` and `@`: it runs to the last `@`
        // of the URL. `host:port/path@…` (an image reference by digest) is no password.
        Rule {
            name: "url-password",
            re: re(r#"(?i)\b[a-z][a-z0-9+.-]*://([^:/?#\s"'<>]*):([^\s"'<>]*)@"#),
            find: |c, _| {
                let pass = c.get(2)?.as_str();
                let head = pass.split('/').next().unwrap_or(pass);
                if pass.contains('/')
                    && !head.is_empty()
                    && head.bytes().all(|b| b.is_ascii_digit())
                {
                    return None;
                }
                if pass.is_empty() || keep(pass) {
                    return None;
                }
                let (s, e) = group(c, 2)?;
                Some((s, e, Marker::Redacted))
            },
        },
        // Authorization headers: the scheme stays, the credentials go.
        Rule {
            name: "authorization-header",
            re: re(
                r#"(?i)\b(?:proxy-)?authorization["']?\s*[:=]\s*["']?(?:(?:bearer|basic|token|digest|negotiate|apikey|sso-key)\s+)?([^\s"',;]+)"#,
            ),
            find: |c, _| {
                if keep(c.get(1)?.as_str()) {
                    return None;
                }
                let (s, e) = group(c, 1)?;
                Some((s, e, Marker::Redacted))
            },
        },
        Rule {
            name: "bearer-basic",
            re: re(r"(?i)\b(?:bearer|basic)\s+([A-Za-z0-9._~+/=-]{8,})"),
            find: |c, _| {
                let v = c.get(1)?.as_str();
                // "basic authentication", "bearer tokens": words, not credentials.
                if v.bytes().all(|b| b.is_ascii_lowercase()) || keep(v) {
                    return None;
                }
                let (s, e) = group(c, 1)?;
                Some((s, e, Marker::Redacted))
            },
        },
        Rule {
            name: "jwt",
            re: re(r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}"),
            find: |c, _| {
                let (s, e) = group(c, 0)?;
                Some((s, e, Marker::Redacted))
            },
        },
        // Provider keys by shape (gitleaks has most of them too, some only beside a keyword
        // or above an entropy a realistic key can miss).
        Rule {
            name: "provider-key",
            re: re(concat!(
                r"\b(?:sk-(?:proj-|ant-(?:api\d\d-)?|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",
                r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,}",
                r"|xox[abposre]-[A-Za-z0-9-]{10,}|xapp-\d-[A-Za-z0-9-]{10,}",
                r"|AIza[0-9A-Za-z_-]{35}|(?:sk|rk|pk|whsec)_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{24,}",
                r"|glpat-[A-Za-z0-9_-]{20,}|gl(?:dt|rt|ptt|ft|imt|agent|cbt|oas|soat)-[A-Za-z0-9_-]{20,}",
                r"|npm_[A-Za-z0-9]{36}|pypi-AgE[A-Za-z0-9_-]{50,}|hf_[A-Za-z0-9]{30,}|api_org_[A-Za-z0-9]{30,}",
                r"|SG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{30,64}|SK[0-9a-f]{32}",
                r"|hv[sbr]\.[A-Za-z0-9_-]{20,}|do[por]_v1_[a-f0-9]{64}|shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}",
                r"|NRAK-[A-Z0-9]{27}|NRJS-[a-f0-9]{19}|NRII-[A-Za-z0-9_-]{32}|NRRA-[a-f0-9]{42}",
                r"|key-[0-9a-f]{32}|pubkey-[0-9a-f]{32}",
                r"|gl(?:c|sa)_[A-Za-z0-9+/_=-]{32,}|eyJrIjoi[A-Za-z0-9+/=]{30,}",
                r"|dd[ap]_[A-Za-z0-9]{30,}|ATATT3[A-Za-z0-9_=-]{100,}|lin_api_[A-Za-z0-9]{40}",
                r"|sntry[su]_[A-Za-z0-9+/=_-]{30,}|dp\.(?:st|ct|sa|scim|audit)\.[A-Za-z0-9_.-]{30,}",
                r")",
            )),
            find: |c, _| {
                let (s, e) = group(c, 0)?;
                Some((s, e, Marker::Redacted))
            },
        },
        Rule {
            name: "telegram-bot-token",
            re: re(r"(?:\b|bot)(\d{5,16}:A[A-Za-z0-9_-]{34})\b"),
            find: |c, _| {
                let (s, e) = group(c, 1)?;
                Some((s, e, Marker::Redacted))
            },
        },
        Rule {
            name: "aws-access-key-id",
            re: re(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA|ABIA|ACCA)[A-Z0-9]{16}\b"),
            find: |c, _| {
                let (s, e) = group(c, 0)?;
                Some((s, e, Marker::Redacted))
            },
        },
        // Webhook URLs are credentials: anyone holding one can post.
        Rule {
            name: "webhook-url",
            re: re(concat!(
                r#"(?i)https://(?:hooks\.slack\.com/(?:services|workflows|triggers)/|(?:[a-z]+\.)?discord(?:app)?\.com/api/webhooks/"#,
                r#"|[a-z0-9.-]*\.webhook\.office\.com/webhookb2/|outlook\.office(?:365)?\.com/webhook/"#,
                r#"|chat\.googleapis\.com/v1/spaces/|api\.telegram\.org/bot)([^\s"'<>]+)"#,
            )),
            find: |c, _| {
                let (s, e) = group(c, 1)?;
                Some((s, e, Marker::Redacted))
            },
        },
        // Shared access signatures (Azure SAS, Power Automate / Logic Apps trigger URLs).
        Rule {
            name: "sas-signature",
            re: re(r#"(?i)[?&;](?:sig|signature|x-amz-signature|x-goog-signature)=([^&\s"'<>;]+)"#),
            find: |c, _| {
                if keep(c.get(1)?.as_str()) {
                    return None;
                }
                let (s, e) = group(c, 1)?;
                Some((s, e, Marker::Redacted))
            },
        },
        // key=value, key: value, "key": "value", key := value where the key says it is a
        // credential (is_sensitive_key) — .env files, properties, JSON, YAML, connection
        // strings, `--flag=value`, `-e NAME=value`, query strings.
        Rule {
            name: "key-value",
            re: tpl(
                r#"(\\?["']?)([A-Za-z0-9_.\-]*{WORDS}[A-Za-z0-9_.\-]*)(\\?["']?)[ \t]*(?::=|[:=])[ \t]*(\\"(?:[^"\\\n]|\\[^"])*\\"|"(?:[^"\\\n]|\\.)*"|'[^'\n]*'|[^\s,;&"'<>(){}\[\]\\][^\s,;&"'<>)\]}\\]*)"#,
            ),
            find: |c, _| {
                let key = c.get(2)?.as_str().trim_start_matches('-');
                if !is_sensitive_key(key) {
                    return None;
                }
                // `name: password` inside a secretKeyRef names a key; `key: x` is not a
                // credential either: is_sensitive_key said so above.
                value_span(c, 4)
            },
        },
        // Config files that separate key and value by blanks.
        Rule {
            name: "config-directive",
            re: re(
                r#"(?im)^[ \t]*(?:requirepass|masterauth|masterpassword|auth_pass|password|passwd|secret|rpcpassword|bind_pw|rootpw)[ \t]+("[^"\n]*"|'[^'\n]*'|[^\s"'=:][^\s]*)[ \t]*\r?$"#,
            ),
            find: |c, _| {
                if prose(c.get(1)?.as_str()) {
                    return None;
                }
                value_span(c, 1)
            },
        },
        // netrc: machine host login user password secret
        Rule {
            name: "netrc",
            re: re(r#"(?i)\blogin[ \t]+\S+[ \t]+password[ \t]+("[^"\n]*"|[^\s"]+)"#),
            find: |c, _| value_span(c, 1),
        },
        // An env entry written out: `name: DB_PASSWORD` then `value: …` (YAML, JSON, flow).
        Rule {
            name: "env-entry",
            re: re(
                r#"["']?\bname["']?[ \t]*:[ \t]*["']?([A-Za-z_][A-Za-z0-9_.\-]*)["']?[ \t]*(?:,[ \t]*|\r?\n[ \t]*)["']?value["']?[ \t]*:[ \t]*("(?:[^"\\\n]|\\.)*"|'[^'\n]*'|[^\s"'\n][^\n]*)"#,
            ),
            find: |c, _| {
                if !is_sensitive_key(c.get(1)?.as_str()) {
                    return None;
                }
                let v = c.get(2)?;
                let raw = v.as_str();
                if raw.starts_with('"') || raw.starts_with('\'') {
                    return value_span(c, 2);
                }
                // A plain YAML scalar runs to the end of the line; a flow mapping ends at `}`.
                let trimmed = raw.trim_end_matches(|ch: char| {
                    ch.is_whitespace() || ch == '}' || ch == ']' || ch == ','
                });
                if keep(trimmed) {
                    return None;
                }
                Some((v.start(), v.start() + trimmed.len(), Marker::Redacted))
            },
        },
        // `<add key="ApiKey" value="…"/>`, `<property name="password" value="…"/>`.
        Rule {
            name: "xml-key-value",
            re: re(r#"(?i)\b(?:key|name)=["']([^"'\n]+)["'][ \t]+value=("[^"\n]*"|'[^'\n]*')"#),
            find: |c, _| {
                if !is_sensitive_key(c.get(1)?.as_str()) {
                    return None;
                }
                value_span(c, 2)
            },
        },
        // `<password>…</password>`
        Rule {
            name: "xml-element",
            re: tpl(r#"<([A-Za-z0-9_.:\-]*{WORDS}[A-Za-z0-9_.:\-]*)>([^<\n]+)</"#),
            find: |c, _| {
                if !is_sensitive_key(c.get(1)?.as_str()) || keep(c.get(2)?.as_str()) {
                    return None;
                }
                let (s, e) = group(c, 2)?;
                Some((s, e, Marker::Redacted))
            },
        },
        // `--password VALUE`, `-storepass VALUE`, `["--token", "VALUE"]`, YAML `- --token`
        // `- VALUE`: a credential flag followed by its value as the next argument.
        Rule {
            name: "flag-argument",
            re: tpl(r#"(?:^|[\s"'\[,(])(--?[A-Za-z0-9_.\-]*{WORDS}[A-Za-z0-9_.\-]*){SEP}{VALUE}"#),
            find: |c, _| {
                let flag = c.get(1)?.as_str().trim_start_matches('-');
                if !is_sensitive_key(flag) || prose(c.get(2)?.as_str()) {
                    return None;
                }
                value_span(c, 2)
            },
        },
        // `-p VALUE` where the command makes `-p` a password.
        Rule {
            name: "command-p-flag",
            re: tpl(
                r#"\b(?:sshpass|mongo|mongosh|mongodump|mongorestore|mongoexport|mongoimport|mongostat|mongotop|(?:docker|podman|nerdctl|buildah|skopeo|oras|helm|crane|regctl)\b{GAP}\blogin)\b{GAP}[\s"',]-p(?:[ \t]*|{SEP}){VALUE}"#,
            ),
            find: |c, _| value_span(c, 1),
        },
        // `mysql -pSECRET` (glued; `-p` alone prompts).
        Rule {
            name: "mysql-p",
            re: tpl(
                r#"\b(?:mysql|mysqladmin|mysqldump|mysqlcheck|mysqlimport|mysqlshow|mysqlslap|mysqlsh|mysqlpump|mariadb|mariadb-admin|mariadb-dump|mariadb-check)\b{GAP}[\s"',]-p("(?:[^"\\\n]|\\.)*"|'[^'\n]*'|[^\s"',\]]+)"#,
            ),
            find: |c, _| value_span(c, 1),
        },
        // `redis-cli -a SECRET` (and `--pass`, caught by flag-argument).
        Rule {
            name: "redis-cli-a",
            re: tpl(r#"\bredis-cli\b{GAP}[\s"',]-a{SEP}{VALUE}"#),
            find: |c, _| value_span(c, 1),
        },
        // `curl -u user:pass`, `curl --user=user:pass`, `-uuser:pass`.
        Rule {
            name: "curl-user",
            re: tpl(
                r#"\bcurl\b{GAP}[\s"',](?:-u|--user|--proxy-user|-U)(?:=|{SEP})?["']?([^\s"':]*):([^\s"',\]]+)"#,
            ),
            find: |c, _| {
                if keep(c.get(2)?.as_str()) {
                    return None;
                }
                let (s, e) = group(c, 2)?;
                Some((s, e, Marker::Redacted))
            },
        },
        // `htpasswd -b[flags] file user pass`, `htpasswd -nb user pass`.
        Rule {
            name: "htpasswd-b",
            re: tpl(
                r#"\bhtpasswd{SEP}(-[A-Za-z]*b[A-Za-z]*)((?:{SEP}-[A-Za-z]+)*){SEP}([^\s"',\]]+){SEP}([^\s"',\]]+)(?:{SEP}([^\s"',\]\-][^\s"',\]]*))?"#,
            ),
            find: |c, _| {
                let flags = format!(
                    "{}{}",
                    c.get(1)?.as_str(),
                    c.get(2).map_or("", |m| m.as_str())
                );
                let pass = if flags.contains('n') { 4 } else { 5 };
                let (s, e) = group(c, pass)?;
                if keep(&c.get(pass)?.as_str().replace(['"', '\''], "")) {
                    return None;
                }
                Some((s, e, Marker::Redacted))
            },
        },
        // Free text: "password is X", "the token for user admin was X", "with password X".
        Rule {
            name: "prose-password",
            re: re(
                r#"(?i)\b(?:(?:password|passwd|passphrase|pwd|secret|token|api[ _-]?key|credentials?)(?:[ \t]+for[ \t]+(?:(?:the[ \t]+)?user[ \t]+)?\S+)?[ \t]+(?:is|was|=|set[ \t]+to|changed[ \t]+to|reset[ \t]+to|is[ \t]+now)|(?:with|using)[ \t]+(?:the[ \t]+)?(?:password|passwd|passphrase|token|secret|api[ _-]?key))[ \t]*[:=]?[ \t]*("[^"\n]+"|'[^'\n]+'|[^\s"',;]+)"#,
            ),
            find: |c, _| {
                let v = c.get(1)?;
                if prose(v.as_str()) {
                    return None;
                }
                let raw = v.as_str();
                if raw.starts_with('"') || raw.starts_with('\'') {
                    return value_span(c, 1);
                }
                let trimmed = raw.trim_end_matches(['.', ',', ':', '!', '?', ')']);
                if trimmed.is_empty() || keep(trimmed) {
                    return None;
                }
                Some((v.start(), v.start() + trimmed.len(), Marker::Redacted))
            },
        },
    ]
});

/// base64 tokens that decode to `user:password` (HTTP basic, docker `auth`) or to a PEM
/// private key (kubeconfig `client-key-data`, a Secret's data shown as text).
pub fn find_base64(text: &str, out: &mut Vec<Span>) {
    let bytes = text.as_bytes();
    let b64 = |b: u8| b.is_ascii_alphanumeric() || b == b'+' || b == b'/';
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
        // Part of a longer word (`x-…`, `…_…`) is not a token on its own.
        let glued = |b: Option<&u8>| b.is_some_and(|b| *b == b'_' || *b == b'-' || *b == b'.');
        if len < 8 || glued(bytes.get(i)) || (start > 0 && glued(bytes.get(start - 1))) {
            continue;
        }
        let token = &text[start..i];
        if token.starts_with("LS0tLS1CRUdJTi") {
            let head = &token[..token.len().min(80) / 4 * 4];
            if let Ok(d) = base64::engine::general_purpose::STANDARD.decode(head)
                && String::from_utf8_lossy(&d).contains("PRIVATE KEY")
            {
                out.push(Span {
                    start,
                    end: i,
                    marker: Marker::PrivateKey,
                    rule: "base64-private-key",
                });
            }
            continue;
        }
        if len > 512 {
            continue;
        }
        let decoded = if token.ends_with('=') || len % 4 == 0 {
            base64::engine::general_purpose::STANDARD.decode(token)
        } else {
            base64::engine::general_purpose::STANDARD_NO_PAD.decode(token)
        };
        if let Ok(d) = decoded
            && user_pass(&d)
        {
            out.push(Span {
                start,
                end: i,
                marker: Marker::Redacted,
                rule: "base64-user-pass",
            });
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
            .all(|b| b.is_ascii_alphanumeric() || b"._@+-\\".contains(b))
        && pass.len() >= 3
        && !pass.iter().all(u8::is_ascii_digit)
        && !pass.starts_with(b"//")
        && !pass.contains(&b'{')
}

/// Every finding of kubemedic's rules in `text`.
pub fn find(text: &str, out: &mut Vec<Span>) {
    for rule in RULES.iter() {
        for c in rule.re.captures_iter(text) {
            if let Some((start, end, marker)) = (rule.find)(&c, text)
                && start < end
            {
                out.push(Span {
                    start,
                    end,
                    marker,
                    rule: rule.name,
                });
            }
        }
    }
    find_base64(text, out);
}
