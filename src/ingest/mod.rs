//! Ingest: turn what Alertmanager (or a prediction job) sends into [`NewSignal`]s and commit
//! them.
//!
//! Input: raw bodies (the HTTP handlers in `web` hand them over). Output: validated, normalised
//! signals with their target and target aliases, committed by the [`IngestQueue`] in as few
//! store transactions as the load allows. Invariants: parsing never panics; a body that can
//! never succeed is an [`IngestError`] naming the offending field (JSON path); parsing touches
//! neither the store nor the cluster, and the cluster not at all, so alerts are accepted while
//! the cluster is unreachable. Label values, annotations and the generator URL pass the
//! sanitiser ([`redact_signal_text`]) after the fingerprint and the target are taken from
//! them: a password in a rule's annotation or a probe URL is never stored, audited or shown.

pub mod alertmanager;
pub mod native;
mod queue;

use std::collections::BTreeMap;

pub use queue::IngestQueue;

use crate::domain::{SignalMode, Target, fingerprint_of, targets_from_labels};
use crate::redact::sanitize_text;

/// Longest [`IngestError::field`], in bytes.
pub const MAX_ERROR_FIELD: usize = 256;
/// Longest [`IngestError::message`], in bytes.
pub const MAX_ERROR_MESSAGE: usize = 512;

/// A body that can never succeed. `field` is a JSON path such as `alerts[0].startsAt`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct IngestError {
    pub field: String,
    pub message: String,
}

impl IngestError {
    /// An error quotes at most a bounded part of the body, whatever the body holds: it is logged
    /// and sent back. Control characters and bidirectional overrides in `field` and `message` are
    /// escaped (`\n`, `\u{202e}`), and text longer than [`MAX_ERROR_FIELD`] /
    /// [`MAX_ERROR_MESSAGE`] bytes loses its middle to `…`: the start says where and what, the
    /// end why.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: bounded(field.into(), MAX_ERROR_FIELD),
            message: bounded(message.into(), MAX_ERROR_MESSAGE),
        }
    }
}

/// Characters that must not reach a log line raw: control characters, and the bidirectional
/// embeddings, overrides and isolates that make text read other than it is.
fn unsafe_in_text(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// `text` escaped (see [`IngestError::new`]) and cut to at most `max` bytes.
fn bounded(text: String, max: usize) -> String {
    let text = if text.chars().any(unsafe_in_text) {
        let mut out = String::with_capacity(text.len() + 16);
        for c in text.chars() {
            match c {
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c if unsafe_in_text(c) => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
                c => out.push(c),
            }
        }
        out
    } else {
        text
    };
    if text.len() <= max {
        return text;
    }
    const GAP: &str = "…";
    let keep = max.saturating_sub(GAP.len());
    let head = text.floor_char_boundary(keep / 2);
    let tail = text.ceil_char_boundary(text.len() - (keep - keep / 2));
    format!("{}{GAP}{}", &text[..head], &text[tail..])
}

/// DESIGN §3.1: proactive when labelled so, when the alert name says it is a prediction, or when
/// the rule behind it uses `predict_linear`.
pub fn detect_mode(
    name: &str,
    labels: &BTreeMap<String, String>,
    generator_url: Option<&str>,
) -> SignalMode {
    let labelled = labels
        .get("signal_mode")
        .map(|m| m.eq_ignore_ascii_case("proactive"))
        .unwrap_or(false);
    let named = name.starts_with("Predicted") || name.contains("Forecast");
    let predicted_expr = generator_url
        .map(|url| percent_decode(url).contains("predict_linear"))
        .unwrap_or(false);
    if labelled || named || predicted_expr {
        SignalMode::Proactive
    } else {
        SignalMode::Reactive
    }
}

/// Decode `%XX` escapes and `+` (Prometheus URL-encodes the expression in generator URLs).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes.get(i) {
            Some(b'%') => {
                let hex = bytes
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok());
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                    }
                    None => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            Some(b'+') => {
                out.push(b' ');
                i += 1;
            }
            Some(b) => {
                out.push(*b);
                i += 1;
            }
            None => break,
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Redact credentials in an alert's text: label values (a blackbox probe's `instance` may be
/// `https://user:pass@host`), annotation values (rule authors paste connection strings into
/// descriptions) and the generator URL. Keys stay as they are. Called after the fingerprint
/// and the target are derived, so deduplication and routing see the alert as sent.
pub(crate) fn redact_signal_text(
    labels: &mut BTreeMap<String, String>,
    annotations: &mut BTreeMap<String, String>,
    generator_url: &mut Option<String>,
) {
    for v in labels.values_mut().chain(annotations.values_mut()) {
        *v = sanitize_text(v);
    }
    if let Some(url) = generator_url {
        *url = sanitize_text(url);
    }
}

/// Fingerprint of a label set, for signals that arrive without one: sha256 over the sorted
/// `name=value` pairs, first 16 hex digits (Alertmanager's are 16 hex digits too).
pub fn label_fingerprint(labels: &BTreeMap<String, String>) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for (k, v) in labels {
        h.update(k.as_bytes());
        h.update([0xff]);
        h.update(v.as_bytes());
        h.update([0xff]);
    }
    hex::encode(h.finalize()).chars().take(16).collect()
}

/// Fill `target`, `target_fingerprint` and `target_aliases` from the labels.
pub(crate) fn resolve_targets(
    labels: &BTreeMap<String, String>,
    fingerprint: &str,
) -> (Option<Target>, String, Vec<String>) {
    let targets = targets_from_labels(labels);
    match targets.first() {
        Some(primary) => {
            let aliases = targets.iter().map(Target::fingerprint).collect();
            (Some(primary.clone()), primary.fingerprint(), aliases)
        }
        None => {
            // No target label: key the request on the alert itself.
            let fp = fingerprint_of("", "Alert", fingerprint);
            (None, fp.clone(), vec![fp])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn pod_is_more_specific_than_deployment_and_node_is_not_an_alias() {
        let l = labels(&[
            ("namespace", "shop"),
            ("pod", "checkout-7d9c8b6f5-x2k4q"),
            ("deployment", "checkout"),
            ("node", "worker-1"),
            ("job", "kube-state-metrics"),
        ]);
        let t = targets_from_labels(&l);
        assert_eq!(t.len(), 2);
        assert_eq!(
            t[0],
            Target::new("Pod", "checkout-7d9c8b6f5-x2k4q", Some("shop".into()))
        );
        assert_eq!(
            t[1],
            Target::new("Deployment", "checkout", Some("shop".into()))
        );
    }

    #[test]
    fn node_alert_is_cluster_scoped_and_scrape_job_is_ignored() {
        let l = labels(&[
            ("node", "worker-3"),
            ("job", "node-exporter"),
            ("namespace", "monitoring"),
        ]);
        let t = targets_from_labels(&l);
        assert_eq!(t, vec![Target::new("Node", "worker-3", None)]);
    }

    #[test]
    fn a_real_job_label_counts() {
        let l = labels(&[("namespace", "batch"), ("job_name", "nightly-backup-29061")]);
        assert_eq!(
            targets_from_labels(&l),
            vec![Target::new(
                "Job",
                "nightly-backup-29061",
                Some("batch".into())
            )]
        );
    }

    #[test]
    fn error_text_is_escaped_and_cut_in_the_middle() {
        let e = IngestError::new("a\nb", "x\u{0}\u{1b}\u{202e}y\u{2069}é");
        assert_eq!(e.field, "a\\nb");
        assert_eq!(e.message, "x\\u{0}\\u{1b}\\u{202e}y\\u{2069}é");
        let long = format!("start {} end", "é".repeat(1000));
        let e = IngestError::new(long.clone(), long);
        assert!(e.field.len() <= MAX_ERROR_FIELD && e.field.len() > MAX_ERROR_FIELD - 4);
        assert!(e.message.len() <= MAX_ERROR_MESSAGE && e.message.len() > MAX_ERROR_MESSAGE - 4);
        assert!(e.message.starts_with("start é") && e.message.ends_with("é end"));
        assert_eq!(e.message.matches('…').count(), 1);
        let short = IngestError::new("alerts[0].status", "`x` is neither `firing` nor `resolved`");
        assert_eq!(
            short.to_string(),
            "alerts[0].status: `x` is neither `firing` nor `resolved`"
        );
    }

    #[test]
    fn proactive_detection() {
        let none = BTreeMap::new();
        assert_eq!(
            detect_mode("PredictedDiskFull", &none, None),
            SignalMode::Proactive
        );
        assert_eq!(
            detect_mode("MemoryForecastHigh", &none, None),
            SignalMode::Proactive
        );
        assert_eq!(
            detect_mode("X", &labels(&[("signal_mode", "proactive")]), None),
            SignalMode::Proactive
        );
        assert_eq!(
            detect_mode(
                "PVCFillingUp",
                &none,
                Some(
                    "http://p/graph?g0.expr=predict_linear%28kubelet_volume_stats_available_bytes%5B6h%5D%2C+4+%2A+3600%29+%3C+0"
                )
            ),
            SignalMode::Proactive
        );
        assert_eq!(
            detect_mode("KubePodCrashLooping", &none, None),
            SignalMode::Reactive
        );
    }
}
