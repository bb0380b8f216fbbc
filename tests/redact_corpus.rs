//! The sanitiser against a corpus of planted credentials and of look-alikes
//! (tests/fixtures/redact/corpus.yaml; docs/adr/0009-secret-rules-from-gitleaks.md).
//!
//! Every planted credential must be gone from every form the sanitiser sees it in: the object
//! through `sanitize_value`, and the same object rendered as YAML (what `kubectl_get_yaml`
//! shows) and as JSON text through `sanitize_text`. Every look-alike must come out unchanged,
//! so the investigation still sees commit SHAs, digests, UUIDs, names and base64 config.
//! Sanitising twice must change nothing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

use std::collections::{BTreeMap, BTreeSet};

use kubemedic::redact::{findings, gitleaks_rules, sanitize_text, sanitize_value};
use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize)]
struct Corpus {
    secrets: Vec<SecretCase>,
    benign: Vec<BenignCase>,
}

#[derive(Deserialize)]
struct SecretCase {
    case: String,
    place: String,
    secrets: Vec<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    value: Option<Value>,
}

#[derive(Deserialize)]
struct BenignCase {
    case: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    value: Option<Value>,
}

fn corpus() -> Corpus {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/redact/corpus.yaml"
    );
    serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The forms in which a case reaches the sanitiser, each already sanitised: (form, output).
fn sanitised_forms(text: Option<&str>, value: Option<&Value>) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    if let Some(t) = text {
        out.push(("text", sanitize_text(t)));
        out.push((
            "string value",
            sanitize_value(&Value::String(t.to_owned()))
                .as_str()
                .unwrap()
                .to_owned(),
        ));
    }
    if let Some(v) = value {
        out.push(("value", sanitize_value(v).to_string()));
        out.push((
            "YAML text",
            sanitize_text(&serde_saphyr::to_string(v).unwrap()),
        ));
        out.push(("JSON text", sanitize_text(&v.to_string())));
        out.push((
            "pretty JSON text",
            sanitize_text(&serde_json::to_string_pretty(v).unwrap()),
        ));
    }
    out
}

/// The first run of `n` characters of `secret` found in `out`, if any.
fn leaked<'a>(secret: &'a str, out: &str, n: usize) -> Option<&'a str> {
    let chars: Vec<(usize, char)> = secret.char_indices().collect();
    if chars.len() <= n {
        return out.contains(secret).then_some(secret);
    }
    (0..=chars.len() - n).find_map(|i| {
        let start = chars[i].0;
        let end = chars.get(i + n).map_or(secret.len(), |c| c.0);
        let w = &secret[start..end];
        out.contains(w).then_some(w)
    })
}

fn excerpt(out: &str, w: &str) -> String {
    let at = out.find(w).unwrap_or(0);
    let from = out.floor_char_boundary(at.saturating_sub(60));
    let to = out.ceil_char_boundary((at + w.len() + 60).min(out.len()));
    out[from..to].replace('\n', "⏎")
}

#[test]
fn corpus_is_large_enough_and_covers_every_place() {
    let c = corpus();
    let secrets: BTreeSet<&str> = c
        .secrets
        .iter()
        .flat_map(|s| s.secrets.iter().map(String::as_str))
        .collect();
    let total: usize = c.secrets.iter().map(|s| s.secrets.len()).sum();
    assert_eq!(secrets.len(), total, "every planted credential is distinct");
    assert!(total >= 80, "{total} planted credentials");
    assert!(c.benign.len() >= 30, "{} look-alikes", c.benign.len());
    let mut places: BTreeMap<&str, usize> = BTreeMap::new();
    for s in &c.secrets {
        *places.entry(&s.place).or_default() += s.secrets.len();
        assert!(
            s.text.is_some() != s.value.is_some(),
            "{}: a case has a text or a value",
            s.case
        );
    }
    for place in [
        "env",
        "args",
        "command",
        "probe",
        "annotation",
        "configmap",
        "kubeconfig",
        "log",
        "event",
        "alert",
    ] {
        assert!(places.contains_key(place), "no case in {place}: {places:?}");
    }
    eprintln!(
        "{total} planted credentials in {} cases {places:?}; {} look-alikes",
        c.secrets.len(),
        c.benign.len()
    );
}

#[test]
fn no_planted_credential_survives() {
    let mut leaks = Vec::new();
    for case in corpus().secrets {
        for (form, out) in sanitised_forms(case.text.as_deref(), case.value.as_ref()) {
            for secret in &case.secrets {
                if let Some(w) = leaked(secret, &out, 6) {
                    leaks.push(format!(
                        "[{}] {} ({form}): `{w}` of `{secret}` survives: …{}…",
                        case.place,
                        case.case,
                        excerpt(&out, w)
                    ));
                }
            }
        }
    }
    assert!(
        leaks.is_empty(),
        "{} leaks:\n{}",
        leaks.len(),
        leaks.join("\n")
    );
}

#[test]
fn look_alikes_survive_unchanged() {
    let mut changed = Vec::new();
    for case in corpus().benign {
        let mut texts: Vec<(&str, String)> = Vec::new();
        if let Some(t) = &case.text {
            texts.push(("text", t.clone()));
        }
        if let Some(v) = &case.value {
            let out = sanitize_value(v);
            if &out != v {
                changed.push(format!("{} (value): {v}\n  -> {out}", case.case));
            }
            texts.push(("YAML text", serde_saphyr::to_string(v).unwrap()));
            texts.push(("JSON text", v.to_string()));
        }
        for (form, t) in texts {
            let out = sanitize_text(&t);
            if out != t {
                let why: Vec<String> = findings(&t)
                    .iter()
                    .map(|f| format!("{} redacts `{}`", f.rule, &t[f.start..f.end]))
                    .collect();
                changed.push(format!("{} ({form}): {}", case.case, why.join("; ")));
            }
        }
    }
    assert!(
        changed.is_empty(),
        "{} look-alikes changed:\n{}",
        changed.len(),
        changed.join("\n")
    );
}

#[test]
fn sanitising_twice_changes_nothing() {
    let c = corpus();
    let mut texts: Vec<(String, String)> = Vec::new();
    let mut values: Vec<(String, Value)> = Vec::new();
    let cases = c
        .secrets
        .iter()
        .map(|s| (&s.case, &s.text, &s.value))
        .chain(c.benign.iter().map(|b| (&b.case, &b.text, &b.value)));
    for (name, text, value) in cases {
        if let Some(t) = text {
            texts.push((name.clone(), t.clone()));
        }
        if let Some(v) = value {
            values.push((name.clone(), v.clone()));
            texts.push((
                format!("{name} (YAML)"),
                serde_saphyr::to_string(v).unwrap(),
            ));
            texts.push((format!("{name} (JSON)"), v.to_string()));
        }
    }
    let mut unstable = Vec::new();
    for (name, t) in texts {
        let once = sanitize_text(&t);
        let twice = sanitize_text(&once);
        if once != twice {
            unstable.push(format!("{name}:\n  once:  {once}\n  twice: {twice}"));
        }
    }
    for (name, v) in values {
        let once = sanitize_value(&v);
        let twice = sanitize_value(&once);
        if once != twice {
            unstable.push(format!(
                "{name} (value):\n  once:  {once}\n  twice: {twice}"
            ));
        }
    }
    assert!(unstable.is_empty(), "{}", unstable.join("\n"));
}

/// The benign messages (tests/fixtures/redact/benign-messages.txt): (line number, section,
/// message).
fn benign_messages() -> Vec<(usize, String, String)> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/redact/benign-messages.txt"
    );
    let mut section = String::new();
    let mut out = Vec::new();
    for (i, line) in std::fs::read_to_string(path).unwrap().lines().enumerate() {
        if let Some(name) = line.strip_prefix("## ") {
            section = name.to_owned();
        } else if !line.is_empty() && !line.starts_with('#') {
            out.push((i + 1, section.clone(), line.to_owned()));
        }
    }
    out
}

/// What Kubernetes, kubelets, runtimes and servers write must reach the investigator as it
/// was written: redaction removes credentials and nothing else (issue 31). Each message is
/// checked as a log line, as an event message in an object, and as an annotation value.
#[test]
fn benign_messages_pass_unchanged() {
    let messages = benign_messages();
    assert!(messages.len() >= 60, "{} benign messages", messages.len());
    let mut changed = Vec::new();
    let mut messages_changed = 0;
    for (line, section, text) in &messages {
        let before = changed.len();
        let event = serde_json::json!({"kind": "Event", "reason": "Failed", "message": text});
        let annotated =
            serde_json::json!({"metadata": {"annotations": {"example.com/last-error": text}}});
        let mut forms = vec![("text", text.clone(), sanitize_text(text))];
        for (form, v) in [("event", &event), ("annotation", &annotated)] {
            let out = sanitize_value(v);
            if &out != v {
                forms.push((form, v.to_string(), out.to_string()));
            }
        }
        for (form, input, out) in forms {
            if out != input {
                let why: Vec<String> = findings(&input)
                    .iter()
                    .map(|f| format!("{} redacts `{}`", f.rule, &input[f.start..f.end]))
                    .collect();
                changed.push(format!(
                    "line {line} [{section}] ({form}): {}\n  -> {out}",
                    if why.is_empty() {
                        "(a key-name rule)".to_owned()
                    } else {
                        why.join("; ")
                    }
                ));
            }
        }
        messages_changed += usize::from(changed.len() > before);
    }
    assert!(
        changed.is_empty(),
        "{messages_changed} of {} benign messages changed:\n{}",
        messages.len(),
        changed.join("\n")
    );
    eprintln!("{n}/{n} benign messages pass unchanged", n = messages.len());
}

#[derive(Deserialize)]
struct Family {
    family: String,
    place: String,
    #[serde(default)]
    name: Option<String>,
    secret: String,
    text: String,
    look_alike: String,
    #[serde(default)]
    before: Option<String>,
}

fn families() -> Vec<Family> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/redact/credential-families.yaml"
    );
    serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// `text` where a family's `place` puts it: (log text, or the object holding it).
fn placed(f: &Family, text: &str) -> (Option<String>, Option<Value>) {
    let name = f.name.as_deref().unwrap_or("EXTRA_ARGS");
    match f.place.as_str() {
        "log" => (Some(text.to_owned()), None),
        "env" => (
            None,
            Some(
                serde_json::json!({"kind": "Pod", "metadata": {"name": "checkout"}, "spec": {
                "containers": [{"name": "app", "env": [{"name": name, "value": text}]}]}}),
            ),
        ),
        "annotation" => (
            None,
            Some(
                serde_json::json!({"kind": "Deployment", "metadata": {"name": "checkout",
                "annotations": {"example.com/note": text}}}),
            ),
        ),
        "configmap" => (
            None,
            Some(
                serde_json::json!({"kind": "ConfigMap", "metadata": {"name": "checkout"},
                "data": {"app.conf": text}}),
            ),
        ),
        other => panic!("{}: unknown place {other}", f.family),
    }
}

/// Issue 31, item 1: credential families from the detector lists of trufflehog and
/// detect-secrets, each planted in a ConfigMap, an annotation, an env value or a log line,
/// are redacted; each family's benign look-alike passes unchanged.
#[test]
fn credential_families() {
    let families = families();
    assert!(families.len() >= 70, "{} families", families.len());
    let (mut leaks, mut changed) = (Vec::new(), Vec::new());
    for f in &families {
        assert!(
            f.text.contains(&f.secret),
            "{}: the text holds the secret",
            f.family
        );
        let (text, value) = placed(f, &f.text);
        for (form, out) in sanitised_forms(text.as_deref(), value.as_ref()) {
            if let Some(w) = leaked(&f.secret, &out, 6) {
                leaks.push(format!(
                    "[{}] {} ({form}): `{w}` survives: …{}…",
                    f.place,
                    f.family,
                    excerpt(&out, w)
                ));
            }
        }
        let (text, value) = placed(f, &f.look_alike);
        let mut inputs: Vec<String> = text.into_iter().collect();
        if let Some(v) = &value {
            let out = sanitize_value(v);
            if &out != v {
                changed.push(format!("{} look-alike (value): {out}", f.family));
            }
            inputs.push(serde_saphyr::to_string(v).unwrap());
            inputs.push(v.to_string());
        }
        for t in inputs {
            if sanitize_text(&t) != t {
                let why: Vec<String> = findings(&t)
                    .iter()
                    .map(|x| format!("{} redacts `{}`", x.rule, &t[x.start..x.end]))
                    .collect();
                changed.push(format!("{} look-alike: {}", f.family, why.join("; ")));
            }
        }
    }
    let caught_before = families.iter().filter(|f| f.before.is_some()).count();
    assert!(
        leaks.is_empty() && changed.is_empty(),
        "{} leaks:\n{}\n{} look-alikes changed:\n{}",
        leaks.len(),
        leaks.join("\n"),
        changed.len(),
        changed.join("\n")
    );
    eprintln!(
        "{n}/{n} credential families redacted ({caught_before} caught before issue 31), \
         {n}/{n} look-alikes unchanged",
        n = families.len()
    );
}

#[test]
fn constant_prompt_text_survives() {
    for s in [
        "Secrets are never readable; do not try.",
        "Finish by calling submit_result exactly once.",
        "You investigate one Kubernetes alert. Read the cluster with the tools; credentials in tool output are shown as [REDACTED].",
        "If the evidence is not enough, say so: confidence low, no workflow.",
    ] {
        assert_eq!(sanitize_text(s), s);
    }
}

#[test]
fn the_vendored_gitleaks_rules_load() {
    let r = gitleaks_rules();
    assert_eq!(r.upstream, 222, "{r:?}");
    assert!(r.loaded >= 200, "{r:?}");
}
