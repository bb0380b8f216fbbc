//! The sanitiser: credentials out of everything kubemedic shows anyone — the LLM, logs, the
//! audit trail, the dashboard.
//!
//! Two rule sets find what to redact (docs/adr/0009-secret-rules-from-gitleaks.md):
//! gitleaks' default rules, vendored as data (`gitleaks.json`, see `gitleaks.rs`), and
//! kubemedic's own rules for the forms a cluster shows and gitleaks does not look for:
//! private key blocks, URL and header credentials, `KEY=value` by key name, credentials in
//! command lines and probe commands, free text, base64 `user:pass`, webhook URLs (see
//! `rules.rs`). Both report spans; overlapping spans merge and each becomes one marker.
//!
//! [`sanitize_text`] applies them to text. [`sanitize_value`] walks JSON: Secret
//! `data`/`stringData`, values under key names that say password/secret/token/key, env
//! entries whose *name* says so are redacted whole; every other string goes through the text
//! pass with its key in front (`NAME=value`), and a list of strings (a command, args, an exec
//! probe) goes through it as one command line, so `["--password", "hunter2"]` loses its second
//! element. Redactions read `[REDACTED]` (or `[REDACTED PRIVATE KEY]`, `[REDACTED CERTIFICATE]`)
//! so a reader knows something was there, and sanitising twice changes nothing.
//!
//! False positives (a redacted harmless value) cost the investigation and are kept rare by the
//! look-alike corpus (tests/redact_corpus.rs); false negatives are bugs.

mod context;
mod encoded;
mod gitleaks;
mod pattern;
mod rules;
mod text;

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

pub use text::Redacted;

pub const REDACTED: &str = "[REDACTED]";
pub const REDACTED_PRIVATE_KEY: &str = "[REDACTED PRIVATE KEY]";
pub const REDACTED_CERTIFICATE: &str = "[REDACTED CERTIFICATE]";

/// What a redacted span becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Marker {
    Redacted,
    Certificate,
    PrivateKey,
}

impl Marker {
    fn text(self) -> &'static str {
        match self {
            Marker::Redacted => REDACTED,
            Marker::Certificate => REDACTED_CERTIFICATE,
            Marker::PrivateKey => REDACTED_PRIVATE_KEY,
        }
    }
}

/// A byte range of the text to redact, and the rule that found it.
#[derive(Debug, Clone, Copy)]
struct Span {
    start: usize,
    end: usize,
    marker: Marker,
    rule: &'static str,
}

/// One redaction the sanitiser would make: the rule and the byte range of the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub rule: &'static str,
    pub start: usize,
    pub end: usize,
}

/// Key names that hold credentials.
static SENSITIVE_KEY: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"(?i)(pass(word|wd|phrase)?|pwd|secret|token|api[-_.]?key|apikey|access[-_.]?key|private[-_.]?key",
        r"|client[-_.]?secret|credential|session[-_.]?key|signing[-_.]?key|encryption[-_.]?key|master[-_.]?key",
        r"|(^|[^a-z])dsn($|[^a-z])|connection[-_.]?string|conn[-_.]?str|^auth$|^authorization$|cookie",
        r"|(^|[-_.])pw$|(^|[-_.])auth$|[-_.]key$|key[-_.]?data$|account[-_.]?key|shared[-_.]?access",
        r"|auth[-_.]?key|licen[cs]e[-_.]?key|ssh[-_.]?key|webhook|htpasswd|(^|[-_.])sas($|[-_.]))",
    ))
});

/// Key names that merely *refer* to a credential (`secretName`, `tokenFile`…) or describe it.
static REFERENCE_KEY: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"(?i)((name|names|ref|refs|path|file|mount|mountpath|kind|type|namespace|mode|enabled|required|seconds",
        r"|ttl|expiry|expiration|audience|issuer|length|count|policy|provider|version|stdin|url|uri|endpoint",
        r"|header|field|format|algorithm|dir|location|prefix|selector|generation|source)$",
        r"|(auth|tls)-secret$)",
    ))
});

/// `*_KEY` names that are not credentials.
static NON_SECRET_KEY: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)(public|pub|primary|foreign|partition|sort|cache|routing|idempotency|bucket|hash|range|shard|object|lookup|group|unique|index|label|metric)[-_.]?key$",
    )
});

/// Always credentials, whatever they end with (`SLACK_WEBHOOK_URL`).
static ALWAYS_SECRET_KEY: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)webhook[-_.]?(url|uri)$"));

fn re(pattern: &str) -> Regex {
    // The patterns are constants checked by the tests below; a bad one is a build-time bug.
    #[allow(clippy::expect_used)]
    Regex::new(pattern).expect("sanitiser pattern")
}

/// True when a value under this key must not be shown.
pub fn is_sensitive_key(key: &str) -> bool {
    ALWAYS_SECRET_KEY.is_match(key)
        || (SENSITIVE_KEY.is_match(key)
            && !REFERENCE_KEY.is_match(key)
            && !NON_SECRET_KEY.is_match(key))
}

/// What was loaded of the vendored gitleaks rules.
#[derive(Debug, Clone)]
pub struct VendoredRules {
    /// Rules in force.
    pub loaded: usize,
    /// Rules in the upstream file, path-only rules included.
    pub upstream: usize,
    /// Rules that did not load (id, why).
    pub skipped: Vec<(String, String)>,
    /// Upstream rules that match only file names: not converted.
    pub path_only: Vec<String>,
    /// The upstream commit the data was taken from.
    pub commit: String,
}

/// The vendored gitleaks rules: how many loaded, which did not and why, the upstream commit.
pub fn gitleaks_rules() -> VendoredRules {
    let r = &*gitleaks::RULES;
    VendoredRules {
        loaded: r.loaded(),
        upstream: r.upstream_rules,
        skipped: r.skipped.clone(),
        path_only: r.path_only.clone(),
        commit: r.commit.clone(),
    }
}

/// Every redaction [`sanitize_text`] would make in `text`, merged, with the rule that found
/// it (the first, when several did). For tests and for explaining a redaction.
pub fn findings(text: &str) -> Vec<Finding> {
    spans(text)
        .into_iter()
        .map(|s| Finding {
            rule: s.rule,
            start: s.start,
            end: s.end,
        })
        .collect()
}

/// The spans to redact in `text`, sorted and merged.
fn spans(text: &str) -> Vec<Span> {
    let mut found = Vec::new();
    rules::find(text, &mut found);
    gitleaks::find(text, &mut found);
    merge(found)
}

fn merge(mut found: Vec<Span>) -> Vec<Span> {
    found.sort_by_key(|s| (s.start, std::cmp::Reverse(s.end)));
    let mut out: Vec<Span> = Vec::with_capacity(found.len());
    for s in found {
        match out.last_mut() {
            Some(last) if s.start <= last.end => {
                last.end = last.end.max(s.end);
                last.marker = last.marker.max(s.marker);
            }
            _ => out.push(s),
        }
    }
    out
}

/// `text` with `spans` (sorted, disjoint, within `lo..hi`) replaced by their markers.
fn apply(text: &str, spans: &[Span], lo: usize, hi: usize) -> String {
    let mut out = String::with_capacity(hi - lo);
    let mut at = lo;
    for s in spans {
        let (start, end) = (s.start.max(lo), s.end.min(hi));
        if start >= end || start < at {
            continue;
        }
        out.push_str(&text[at..start]);
        out.push_str(s.marker.text());
        at = end;
    }
    out.push_str(&text[at..hi]);
    out
}

/// Redact credentials in free text (logs, events, rendered objects, prompts).
pub fn sanitize_text(text: &str) -> String {
    let spans = spans(text);
    if spans.is_empty() {
        return text.to_owned();
    }
    apply(text, &spans, 0, text.len())
}

/// Sanitise strings that are read together — the arguments of one command, a key and its
/// value — as one text joined by `sep`, and give each part its own result.
fn sanitize_parts(parts: &[&str], sep: &str) -> Vec<String> {
    let joined = parts.join(sep);
    let spans = spans(&joined);
    let mut out = Vec::with_capacity(parts.len());
    let mut at = 0;
    for p in parts {
        let (lo, hi) = (at, at + p.len());
        // Spans cut to the part; a span wholly inside the separator is nobody's.
        let mine: Vec<Span> = spans
            .iter()
            .filter(|s| s.start < hi && s.end > lo)
            .copied()
            .collect();
        out.push(apply(&joined, &mine, lo, hi));
        at = hi + sep.len();
    }
    out
}

/// Keys whose string value is structure, not configuration: read without the key in front.
const STRUCTURAL: &[&str] = &[
    "name",
    "key",
    "kind",
    "apiVersion",
    "uid",
    "resourceVersion",
    "namespace",
    "image",
    "imageID",
    "containerID",
];

/// The value of `key: value`, sanitised as the text `key=value` so that rules which need the
/// key (a vendor name, `..._TOKEN=`) see it.
fn sanitize_pair(key: &str, value: &str) -> String {
    if STRUCTURAL.contains(&key) || key.contains(['\n', '=']) {
        return sanitize_text(value);
    }
    match sanitize_parts(&[key, value], "=").pop() {
        Some(v) => v,
        None => sanitize_text(value),
    }
}

/// Redact credentials in a Kubernetes object (or any JSON, Lists included).
pub fn sanitize_value(v: &Value) -> Value {
    match v {
        Value::String(s) => Value::String(sanitize_text(s)),
        Value::Array(items) => {
            let strings: Option<Vec<&str>> = items.iter().map(Value::as_str).collect();
            match strings {
                // A command, args, an exec probe: one command line.
                Some(parts) if parts.len() > 1 => Value::Array(
                    sanitize_parts(&parts, " ")
                        .into_iter()
                        .map(Value::String)
                        .collect(),
                ),
                _ => Value::Array(items.iter().map(sanitize_value).collect()),
            }
        }
        Value::Object(map) => {
            let is_secret = map.get("kind").and_then(Value::as_str) == Some("Secret");
            // An env entry or similar `{name: DB_PASSWORD, value: "…"}`.
            let entry_name = map
                .get("name")
                .and_then(Value::as_str)
                .filter(|_| map.get("value").is_some_and(Value::is_string));
            let named_secret = entry_name.is_some_and(is_sensitive_key);
            let mut out = serde_json::Map::with_capacity(map.len());
            for (k, val) in map {
                let redact = (is_secret && (k == "data" || k == "stringData"))
                    || (named_secret && k == "value")
                    || (is_sensitive_key(k)
                        && !(val.is_object() || val.is_array() || val.is_null()));
                let new = if redact {
                    redact_value(val)
                } else if is_secret && k == "metadata" {
                    secret_metadata(val)
                } else if let Value::String(s) = val {
                    let key = match entry_name {
                        Some(name) if k == "value" => name,
                        _ => k,
                    };
                    Value::String(sanitize_pair(key, s))
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

/// A Secret's metadata: `kubectl apply` keeps the whole Secret, data included, in an
/// annotation.
fn secret_metadata(v: &Value) -> Value {
    let mut out = sanitize_value(v);
    if let Some(a) = out
        .get_mut("annotations")
        .and_then(|a| a.get_mut("kubectl.kubernetes.io/last-applied-configuration"))
    {
        *a = Value::String(REDACTED.into());
    }
    out
}

fn redact_value(v: &Value) -> Value {
    match v {
        Value::Object(map) => Value::Object(
            map.keys()
                .map(|k| (k.clone(), Value::String(REDACTED.into())))
                .collect(),
        ),
        Value::Bool(_) => v.clone(),
        // Nothing to hide in an empty value or a `$(VAR)` reference; both help a diagnosis.
        Value::String(s) if rules::keep(s) => v.clone(),
        _ => Value::String(REDACTED.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every upstream rule is accounted for: loaded, path-only (left out by the converter), or
    /// skipped because its regex does not compile in Rust — named here, so that a refresh of
    /// `gitleaks.json` that loses a rule fails loudly.
    #[test]
    fn gitleaks_rules_load() {
        const SKIPPED: &[&str] = &[];
        let r = gitleaks_rules();
        let skipped: Vec<&str> = r.skipped.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(skipped, SKIPPED, "{:?}", r.skipped);
        assert_eq!(r.path_only, ["pkcs12-file"]);
        assert_eq!(r.upstream, 222);
        assert_eq!(r.loaded + r.path_only.len() + r.skipped.len(), r.upstream);
        assert!(r.loaded >= 200, "{r:?}");
        assert_eq!(r.commit.len(), 40);
    }

    #[test]
    fn patterns_compile() {
        assert!(rules::RULES.len() > 5);
        for key in [
            "DB_PASSWORD",
            "apiKey",
            "SMTP_PW",
            "REDIS_AUTH",
            "STRIPE_KEY",
            "JWT_SECRET",
            "GITHUB_TOKEN",
            "LDAP_PASS",
            "SENTRY_DSN",
            "client-key-data",
            "AccountKey",
            "SharedAccessKey",
            "SLACK_WEBHOOK_URL",
            "_auth",
            "--password",
        ] {
            assert!(is_sensitive_key(key), "{key}");
        }
        for key in [
            "secretName",
            "serviceAccountName",
            "tokenExpirationSeconds",
            "key",
            "PRIMARY_KEY",
            "PUBLIC_KEY",
            "cache-key",
            "DB_PASSWORD_FILE",
            "password-stdin",
            "nginx.ingress.kubernetes.io/auth-secret",
            "auth-type",
            "TOKEN_URL",
        ] {
            assert!(!is_sensitive_key(key), "{key}");
        }
    }

    #[test]
    fn url_passwords_may_hold_slash_and_at() {
        let out = sanitize_text("postgres://orders:S3cr/et@Pa55@db.shop.svc:5432/orders");
        assert_eq!(out, "postgres://orders:[REDACTED]@db.shop.svc:5432/orders");
        // An image reference by digest behind a registry port is no password.
        let digest = "docker-pullable://registry.local:5000/shop/checkout@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        assert_eq!(sanitize_text(digest), digest);
    }

    #[test]
    fn a_credential_flag_redacts_the_next_list_element() {
        let v = json!({"args": ["--user", "app", "--password", "hunter2", "--port", "5432"]});
        assert_eq!(
            sanitize_value(&v),
            json!({"args": ["--user", "app", "--password", REDACTED, "--port", "5432"]})
        );
        let probe = json!({"command": ["redis-cli", "-a", "r3d1s-pw", "ping"]});
        assert_eq!(
            sanitize_value(&probe),
            json!({"command": ["redis-cli", "-a", REDACTED, "ping"]})
        );
        // The same as YAML text, as `kubectl_get_yaml` shows it.
        let yaml = "args:\n- --token\n- t0k3n-value-77\n- --verbose\n";
        assert_eq!(
            sanitize_text(yaml),
            "args:\n- --token\n- [REDACTED]\n- --verbose\n"
        );
    }

    #[test]
    fn command_lines_lose_their_passwords() {
        for (text, secret) in [
            ("mysql -h db -uroot -pS3cretPw orders", "S3cretPw"),
            ("sshpass -p 'ss h pw' ssh backup@host", "ss h pw"),
            ("curl -fsS -u deploy:cUrLpw1 https://ci/job", "cUrLpw1"),
            ("htpasswd -bc /etc/nginx/.htpasswd admin Htpw77", "Htpw77"),
            ("htpasswd -nbB ops Htpw88 > /auth/htpasswd", "Htpw88"),
            ("redis-cli -h r -a R3dis-pw ping", "R3dis-pw"),
            (
                "docker login -u ci -p D0ckerpw registry.example.com",
                "D0ckerpw",
            ),
            ("pg_dumpall --password=Pg-pw-99 --host=db", "Pg-pw-99"),
            ("keytool -list -storepass Ks-pw-42", "Ks-pw-42"),
        ] {
            let out = sanitize_text(text);
            assert!(!out.contains(secret), "{text} -> {out}");
        }
        // References and prompts are not credentials.
        for text in [
            "mysqladmin ping -uroot -p\"$MYSQL_ROOT_PASSWORD\"",
            "docker run -p 8080:80 nginx",
            "pg_isready -U orders -h 127.0.0.1 -p 5432",
        ] {
            assert_eq!(sanitize_text(text), text);
        }
    }

    #[test]
    fn keys_inside_a_config_map_value_are_redacted_and_the_rest_kept() {
        // Issue 38: a ConfigMap as the investigator reads it, with a bare Telegram bot token and
        // a Datadog key after a blank-separated directive inside its files.
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "alerting", "namespace": "ops"},
        "data": {
            "notify.yaml": "telegram:\n  chat: 42\n  bot: 123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw-\n  retries: 3\n",
            "datadog.conf": "site datadoghq.eu\napiKeyValue 0123456789abcdef0123456789abcdef\nflush 10s\n"
        }});
        let out = sanitize_value(&cm);
        let text = out.to_string();
        for secret in [
            "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw",
            "0123456789abcdef0123456789abcdef",
        ] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        let notify = out["data"]["notify.yaml"].as_str().unwrap_or_default();
        let datadog = out["data"]["datadog.conf"].as_str().unwrap_or_default();
        assert!(
            notify.contains(REDACTED) && datadog.contains(REDACTED),
            "{text}"
        );
        // What a diagnosis needs stays.
        assert!(
            notify.contains("chat: 42") && notify.contains("retries: 3"),
            "{notify}"
        );
        assert!(
            datadog.contains("site datadoghq.eu") && datadog.contains("flush 10s"),
            "{datadog}"
        );
        assert_eq!(out["metadata"], cm["metadata"]);
    }

    #[test]
    fn env_names_in_text_and_json() {
        let v = json!({"env": [
            {"name": "SMTP_PW", "value": "smtp-pw-1"},
            {"name": "REDIS_AUTH", "value": "redis-auth-2"},
            {"name": "DB_PASSWORD", "value": ""},
            {"name": "API_TOKEN", "value": "$(TOKEN_FROM_SECRET)"},
            {"name": "LOG_LEVEL", "value": "debug"}
        ]});
        let out = sanitize_value(&v);
        assert_eq!(out["env"][0]["value"], REDACTED);
        assert_eq!(out["env"][1]["value"], REDACTED);
        // Empty and referenced values help a diagnosis and hide nothing.
        assert_eq!(out["env"][2]["value"], "");
        assert_eq!(out["env"][3]["value"], "$(TOKEN_FROM_SECRET)");
        assert_eq!(out["env"][4]["value"], "debug");
        let yaml =
            "env:\n- name: STRIPE_KEY\n  value: rk_live_abcdef\n- name: MODE\n  value: fast\n";
        assert_eq!(
            sanitize_text(yaml),
            "env:\n- name: STRIPE_KEY\n  value: [REDACTED]\n- name: MODE\n  value: fast\n"
        );
    }

    #[test]
    fn free_text_and_base64() {
        let out = sanitize_text("bootstrap: initial password is Xq9-bootstrap.");
        assert_eq!(out, "bootstrap: initial password is [REDACTED].");
        assert_eq!(
            sanitize_text("the password is incorrect"),
            "the password is incorrect"
        );
        // base64("ops:b64-secret-pw")
        let out = sanitize_text("retrying with b3BzOmI2NC1zZWNyZXQtcHc= now");
        assert_eq!(out, "retrying with [REDACTED] now");
        // base64 of a private key (kubeconfig client-key-data) and of a certificate.
        let key = "LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlFcEFJQkFBS0NBUUVB";
        assert_eq!(sanitize_text(key), REDACTED_PRIVATE_KEY);
        let cert = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUM1ekNDQWMr";
        assert_eq!(sanitize_text(cert), cert);
    }

    #[test]
    fn a_secrets_last_applied_configuration_is_withheld() {
        let secret = json!({"kind": "Secret", "metadata": {"name": "s", "annotations": {
            "kubectl.kubernetes.io/last-applied-configuration": "{\"data\":{\"config.yaml\":\"c2VjcmV0\"},\"kind\":\"Secret\"}"
        }}, "data": {"config.yaml": "c2VjcmV0"}});
        let out = sanitize_value(&secret);
        assert_eq!(
            out["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"],
            REDACTED
        );
        assert_eq!(out["data"]["config.yaml"], REDACTED);
    }

    #[test]
    fn findings_name_the_rule_and_sanitising_twice_changes_nothing() {
        let text = "DB_PASSWORD=hunter2 token ghp_abcdefghijklmnopqrstuvwxyz0123456789";
        let f = findings(text);
        assert_eq!(f.len(), 2, "{f:?}");
        assert_eq!(f[0].rule, "key-value");
        assert_eq!(&text[f[0].start..f[0].end], "hunter2");
        let once = sanitize_text(text);
        assert_eq!(sanitize_text(&once), once);
        assert!(
            findings(&once)
                .iter()
                .all(|f| &once[f.start..f.end] == REDACTED)
        );
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
            // Issue 38: a bare Telegram bot token in a ConfigMap value, ending in `-`; a
            // Datadog key after a blank-separated directive.
            "chat: 42\nbot: 123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw-\n",
            "apiKeyValue 0123456789abcdef0123456789abcdef\n",
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
            "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw",
            "0123456789abcdef",
        ];
        assert_eq!(cases.len(), secrets.len());
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
            // A directive whose value is no generated key stays.
            "api_key_file /etc/datadog/api-key\n",
            "tokenizer wordpiece-uncased-v2\n",
        ] {
            assert_eq!(sanitize_text(s), s);
        }
    }

    /// Issue 31: an admission webhook error reached the investigator as
    /// `[REDACTED] "https://gatekeeper-webhook-service.gatekeeper-system.svc:[REDACTED]"` —
    /// key-value read `webhook: Post` and `…webhook-service…svc:443/v1/admit` as credentials.
    #[test]
    fn a_webhook_error_keeps_its_verb_port_path_and_query() {
        let text = concat!(
            r#"failed calling webhook "validation.gatekeeper.sh": failed to call webhook: "#,
            r#"Post "https://gatekeeper-webhook-service.gatekeeper-system.svc:443/v1/admit?timeout=3s": "#,
            "dial tcp 10.96.112.41:443: connect: connection refused",
        );
        assert_eq!(sanitize_text(text), text, "{:?}", findings(text));
        let event = json!({"reason": "FailedCreate", "message": text});
        assert_eq!(sanitize_value(&event), event);
        // The same shapes still lose a credential.
        for (text, secret) in [
            ("db_password:5432", "5432"),
            ("redis-auth:6379/0", "6379"),
            ("failed to get token: s3cr3t-T0ken-9", "s3cr3t-T0ken-9"),
            ("token: unexpected", "unexpected"),
            ("- token: Post", "Post"),
            (
                "SLACK_WEBHOOK: https://hooks.slack.com/services/T0/B0/XXXXXXXXXXXX",
                "XXXXXXXXXXXX",
            ),
            ("login with api-key: 9f8e7d6c5b4a-token", "9f8e7d6c5b4a"),
            (
                "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJlLXNpZw",
                "c2lnbmF0dXJl",
            ),
        ] {
            let out = sanitize_text(text);
            assert!(!out.contains(secret), "{text} -> {out}");
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
