//! The sanitiser: credentials out of everything kubemedic shows anyone — the LLM, logs, the
//! audit trail, the dashboard.
//!
//! Two passes. [`sanitize_value`] walks JSON objects: Secret `data`/`stringData`, values under
//! key names that say password/secret/token/key, env entries whose *name* says so, and every
//! string through the text pass. [`sanitize_text`] redacts by pattern: PEM private keys and
//! certificates, URLs and connection strings with passwords, authorization headers, JWTs,
//! OpenAI/GitHub/AWS/Slack/Google/Stripe keys, and `key=value` / `key: value` pairs whose key
//! says it is a secret. Redactions read `[REDACTED]` so a reader knows something was there.
//! False positives (a redacted harmless value) are accepted; false negatives are bugs.

mod text;

use std::sync::LazyLock;

use regex::{Captures, Regex};
use serde_json::Value;

pub use text::Redacted;

pub const REDACTED: &str = "[REDACTED]";

/// Key names that hold credentials.
static SENSITIVE_KEY: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)(pass(word|wd|phrase)?|pwd|secret|token|api[-_.]?key|apikey|access[-_.]?key|private[-_.]?key|client[-_.]?secret|credential|session[-_.]?key|signing[-_.]?key|encryption[-_.]?key|master[-_.]?key|\bdsn\b|connection[-_.]?string|conn[-_.]?str|^auth$|^authorization$|cookie)",
    )
});

/// Key names that merely *refer* to a credential (`secretName`, `tokenFile`…) or describe it.
static REFERENCE_KEY: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)(name|names|ref|refs|path|file|mount|mountpath|kind|type|namespace|mode|enabled|required|seconds|ttl|expiry|expiration|audience|issuer|length|count|policy|provider|version)$",
    )
});

fn re(pattern: &str) -> Regex {
    // The patterns are constants checked by the tests below; a bad one is a build-time bug.
    #[allow(clippy::expect_used)]
    Regex::new(pattern).expect("sanitiser pattern")
}

/// True when a value under this key must not be shown.
pub fn is_sensitive_key(key: &str) -> bool {
    SENSITIVE_KEY.is_match(key) && !REFERENCE_KEY.is_match(key)
}

struct Rule {
    re: Regex,
    replace: fn(&Captures) -> String,
}

static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    vec![
        // PEM private keys (complete, or cut off by a cap) and certificates.
        Rule {
            re: re(
                r"-----BEGIN ([A-Z0-9 ]*PRIVATE KEY)-----(?s:.*?)(-----END [A-Z0-9 ]*PRIVATE KEY-----|\z)",
            ),
            replace: |_| "[REDACTED PRIVATE KEY]".into(),
        },
        Rule {
            re: re(
                r"-----BEGIN (CERTIFICATE|TRUSTED CERTIFICATE|CERTIFICATE REQUEST)-----(?s:.*?)(-----END [A-Z ]+-----|\z)",
            ),
            replace: |_| "[REDACTED CERTIFICATE]".into(),
        },
        // user:password@ in any URL or connection string (postgres, mysql, mongodb(+srv),
        // redis(s), amqp(s), http…).
        Rule {
            re: re(r"(?i)\b([a-z][a-z0-9+.-]*://)([^:/?#@\s]*):([^@\s/]+)@"),
            replace: |c| format!("{}{}:{REDACTED}@", &c[1], &c[2]),
        },
        // Authorization headers and bearer tokens.
        Rule {
            re: re(
                r#"(?i)\b(authorization|proxy-authorization)(["']?\s*[:=]\s*["']?)(bearer|basic|token|digest)?\s*[^\s"',;]+"#,
            ),
            replace: |c| format!("{}{}{REDACTED}", &c[1], &c[2]),
        },
        Rule {
            re: re(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"),
            replace: |c| format!("{} {REDACTED}", &c[1]),
        },
        // JWTs.
        Rule {
            re: re(r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}"),
            replace: |_| REDACTED.into(),
        },
        // Provider keys.
        Rule {
            re: re(
                r"\b(sk-(?:proj-|ant-|svcacct-)?[A-Za-z0-9_-]{20,}|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,}|xox[abposr]-[A-Za-z0-9-]{10,}|xapp-\d-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{35}|(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}|glpat-[A-Za-z0-9_-]{20,})",
            ),
            replace: |_| REDACTED.into(),
        },
        Rule {
            re: re(r"\b(AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b"),
            replace: |_| REDACTED.into(),
        },
        Rule {
            re: re(r"https://hooks\.slack\.com/(services|workflows)/[A-Za-z0-9/_-]+"),
            replace: |_| format!("https://hooks.slack.com/{REDACTED}"),
        },
        // key=value, key: value, "key": "value" where the key says it is a secret.
        Rule {
            re: re(
                r#"(?i)(\\?["']?)([A-Za-z0-9_.\-]*(?:pass(?:word|wd|phrase)?|pwd|secret|token|api[-_.]?key|apikey|access[-_.]?key|private[-_.]?key|client[-_.]?secret|credentials?|session[-_.]?key|signing[-_.]?key|encryption[-_.]?key|master[-_.]?key|dsn|cookie)[A-Za-z0-9_.\-]*)(\\?["']?)([ \t]*[:=][ \t]*)(\\"(?:[^"\\\n]|\\[^"])*\\"|"[^"\n]*"|'[^'\n]*'|[^\s,;&"'<>)\]}\\]+)"#,
            ),
            replace: |c| {
                if REFERENCE_KEY.is_match(&c[2]) || c[5].starts_with("[REDACTED") {
                    return c[0].to_owned();
                }
                format!("{}{}{}{}{REDACTED}", &c[1], &c[2], &c[3], &c[4])
            },
        },
        // `auth` alone (docker config) as a JSON/YAML key.
        Rule {
            re: re(
                r#"(?i)(["']?\bauth["']?[ \t]*[:=][ \t]*)("[^"\n]*"|'[^'\n]*'|[A-Za-z0-9+/=]{8,})"#,
            ),
            replace: |c| format!("{}{REDACTED}", &c[1]),
        },
    ]
});

/// Redact credentials in free text (logs, events, rendered objects).
pub fn sanitize_text(text: &str) -> String {
    let mut out = std::borrow::Cow::Borrowed(text);
    for rule in RULES.iter() {
        if rule.re.is_match(&out) {
            let replaced = rule
                .re
                .replace_all(&out, |c: &Captures| (rule.replace)(c))
                .into_owned();
            out = std::borrow::Cow::Owned(replaced);
        }
    }
    out.into_owned()
}

/// Redact credentials in a Kubernetes object (or any JSON, Lists included).
pub fn sanitize_value(v: &Value) -> Value {
    match v {
        Value::String(s) => Value::String(sanitize_text(s)),
        Value::Array(items) => Value::Array(items.iter().map(sanitize_value).collect()),
        Value::Object(map) => {
            let is_secret = map.get("kind").and_then(Value::as_str) == Some("Secret");
            // An env entry or similar `{name: DB_PASSWORD, value: "…"}`.
            let named_secret = map
                .get("name")
                .and_then(Value::as_str)
                .is_some_and(is_sensitive_key);
            let mut out = serde_json::Map::with_capacity(map.len());
            for (k, val) in map {
                let redact = (is_secret && (k == "data" || k == "stringData"))
                    || (named_secret && k == "value" && val.is_string())
                    || (is_sensitive_key(k)
                        && !(val.is_object() || val.is_array() || val.is_null()));
                let new = if redact {
                    redact_value(val)
                } else {
                    sanitize_value(val)
                };
                out.insert(k.clone(), new);
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

fn redact_value(v: &Value) -> Value {
    match v {
        Value::Object(map) => Value::Object(
            map.keys()
                .map(|k| (k.clone(), Value::String(REDACTED.into())))
                .collect(),
        ),
        Value::Bool(_) => v.clone(),
        _ => Value::String(REDACTED.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn patterns_compile() {
        assert!(RULES.len() > 5);
        assert!(is_sensitive_key("DB_PASSWORD"));
        assert!(is_sensitive_key("apiKey"));
        assert!(!is_sensitive_key("secretName"));
        assert!(!is_sensitive_key("serviceAccountName"));
        assert!(!is_sensitive_key("tokenExpirationSeconds"));
    }

    #[test]
    fn text_secrets_are_redacted() {
        let cases = [
            "postgres://app:s3cr3tpw@db:5432/app",
            "mongodb+srv://root:m0ng0pw@cluster0.example.net/test",
            "redis://:r3dispw@cache:6379/0",
            "amqp://guest:amqppw1@rabbit:5672/",
            "Authorization: Bearer abcdefghijklmnop123",
            "curl -H 'Authorization: Basic dXNlcjpwYXNz' x",
            "token=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            "OPENAI_API_KEY is sk-proj-abcdefghijklmnopqrstuvwxyz123456",
            "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
            "AKIAIOSFODNN7EXAMPLE",
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "xoxb-123456789012-1234567890123-abcdefghijkl",
            "https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXX",
            "DB_PASSWORD=hunter2",
            "\"client_secret\": \"c1i3nt\"",
            r#"{\"client_secret\": \"esc4ped\"}"#,
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
            "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg (cut by a cap",
        ];
        let secrets = [
            "s3cr3tpw",
            "m0ng0pw",
            "r3dispw",
            "amqppw1",
            "abcdefghijklmnop123",
            "dXNlcjpwYXNz",
            "dozjgNryP4J3",
            "abcdefghijklmnopqrstuvwxyz123456",
            "ghp_abcdef",
            "AKIAIOSFODNN7EXAMPLE",
            "wJalrXUtnFEMI",
            "xoxb-1234",
            "XXXXXXXXXXXXXXXX",
            "hunter2",
            "c1i3nt",
            "esc4ped",
            "MIIEpAIBAAKCAQEA",
            "MIIEvQIBADANBg",
        ];
        for (case, secret) in cases.iter().zip(secrets) {
            let out = sanitize_text(case);
            assert!(!out.contains(secret), "{case} -> {out}");
            assert!(out.contains("REDACTED"), "{case} -> {out}");
        }
    }

    #[test]
    fn harmless_text_survives() {
        for s in [
            "- name: default-token-6pjlh\n  secret:\n    defaultMode: 420\n    secretName: default-token-6pjlh",
            "Back-off restarting failed container checkout in pod checkout-7d9c8b6f5-x2k4q",
            "secret \"db-credentials\" not found",
            "reading secrets is blocked by kubemedic's read policy",
            "secretName: db-credentials",
            "Error: couldn't find key password in Secret shop/db",
            "http://checkout.shop.svc:8080/healthz",
            "exit code 137 (OOMKilled)",
        ] {
            assert_eq!(sanitize_text(s), s);
        }
    }

    #[test]
    fn objects_are_walked() {
        let pod = json!({
            "kind": "Pod",
            "metadata": {"name": "p", "annotations": {"vault.io/token": "hvs.CAESIJ"}},
            "spec": {"containers": [{
                "name": "app",
                "env": [
                    {"name": "DB_PASSWORD", "value": "pa55"},
                    {"name": "LOG_LEVEL", "value": "debug"},
                    {"name": "API_KEY", "valueFrom": {"secretKeyRef": {"name": "k", "key": "api"}}}
                ]
            }]}
        });
        let out = sanitize_value(&pod).to_string();
        assert!(
            !out.contains("pa55") && !out.contains("hvs.CAESIJ"),
            "{out}"
        );
        assert!(
            out.contains("debug") && out.contains("secretKeyRef"),
            "{out}"
        );

        let secret = json!({"kind": "Secret", "metadata": {"name": "s"}, "data": {"password": "aHVudGVyMg=="}});
        let out = sanitize_value(&secret);
        assert_eq!(out["data"]["password"], REDACTED);
        assert_eq!(out["metadata"]["name"], "s");
    }
}
#[cfg(test)]
mod debug_tests {
    #[test]
    fn oauth_json() {
        let s = r#"{"client_id": "kubemedic", "client_secret": "client-secret-value-77"}"#;
        println!("{}", super::sanitize_text(s));
        let v = serde_json::json!({"kind": "ConfigMap", "data": {"oauth.json": s}});
        println!("{}", super::sanitize_value(&v));
    }
}
