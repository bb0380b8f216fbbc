//! `POST /api/v1/signals`: one signal in kubemedic's own JSON form, for prediction jobs and
//! other producers that are not Alertmanager.
//!
//! ```json
//! {"name": "PredictedMemoryExhaustion", "severity": "warning", "mode": "proactive",
//!  "target": {"kind": "Deployment", "name": "checkout", "namespace": "shop"},
//!  "starts_at": "2026-11-21T10:00:00Z", "summary": "…", "description": "…",
//!  "labels": {…}, "annotations": {…}, "source": "capacity-forecaster"}
//! ```
//! Only `name` is required. `starts_at` defaults to now and `fingerprint` to a hash of the name,
//! target and labels; a producer that retries should send both so a retry is recognised as a
//! redelivery. Unknown fields are rejected by name, so a typo is not silently dropped.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Deserialize;

use super::{IngestError, alertmanager::parse_json, detect_mode, label_fingerprint};
use crate::domain::Severity;
use crate::domain::{NewSignal, SignalMode, SignalSource, SignalStatus, Target, is_cluster_scoped};

#[derive(Debug, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a signal (an object with at least `name`)"
)]
pub struct NativeSignal {
    pub name: String,
    #[serde(default)]
    pub severity: Option<String>,
    #[serde(default)]
    pub mode: Option<String>,
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub target: Option<NativeTarget>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    #[serde(default)]
    pub summary: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub starts_at: Option<String>,
    #[serde(default)]
    pub ends_at: Option<String>,
    #[serde(default)]
    pub fingerprint: Option<String>,
    #[serde(default)]
    pub source: Option<String>,
    #[serde(default)]
    pub generator_url: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a target (an object with `kind`, `name` and, for a namespaced kind, `namespace`)"
)]
pub struct NativeTarget {
    pub kind: String,
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
}

pub fn parse(body: &[u8], now: DateTime<Utc>) -> Result<NewSignal, IngestError> {
    let raw: NativeSignal = parse_json(body)?;
    if raw.name.trim().is_empty() {
        return Err(IngestError::new("name", "must not be empty"));
    }
    let status = match raw.status.as_deref() {
        None => SignalStatus::Firing,
        Some(s) => SignalStatus::parse(s).ok_or_else(|| {
            IngestError::new(
                "status",
                format!("`{s}` is neither `firing` nor `resolved`"),
            )
        })?,
    };
    let mut labels = raw.labels;
    labels
        .entry("alertname".into())
        .or_insert_with(|| raw.name.clone());
    if let Some(sev) = &raw.severity {
        labels
            .entry("severity".into())
            .or_insert_with(|| sev.clone());
    }
    if let Some(t) = &raw.target {
        if t.kind.trim().is_empty() {
            return Err(IngestError::new("target.kind", "must not be empty"));
        }
        if t.name.trim().is_empty() {
            return Err(IngestError::new("target.name", "must not be empty"));
        }
        let ns = t.namespace.clone().filter(|n| !n.trim().is_empty());
        if ns.is_none() && !is_cluster_scoped(&t.kind) {
            return Err(IngestError::new(
                "target.namespace",
                format!("required for the namespaced kind {}", t.kind),
            ));
        }
        if let Some(ns) = &ns {
            labels
                .entry("namespace".into())
                .or_insert_with(|| ns.clone());
        }
    }
    let mut annotations = raw.annotations;
    if let Some(s) = raw.summary {
        annotations.insert("summary".into(), s);
    }
    if let Some(d) = raw.description {
        annotations.insert("description".into(), d);
    }
    let starts_at = match raw.starts_at.as_deref() {
        None => now,
        Some(s) => super::alertmanager::parse_time(s)
            .map_err(|m| IngestError::new("starts_at", m))?
            .ok_or_else(|| IngestError::new("starts_at", "the zero time is not a start time"))?,
    };
    let ends_at = match raw.ends_at.as_deref() {
        None => None,
        Some(s) => {
            super::alertmanager::parse_time(s).map_err(|m| IngestError::new("ends_at", m))?
        }
    };
    let explicit_mode = match raw.mode.as_deref() {
        None => None,
        Some(m) => Some(SignalMode::parse(m).ok_or_else(|| {
            IngestError::new(
                "mode",
                format!("`{m}` is neither `reactive` nor `proactive`"),
            )
        })?),
    };
    let mode = explicit_mode
        .unwrap_or_else(|| detect_mode(&raw.name, &labels, raw.generator_url.as_deref()));

    let explicit_target = raw.target.map(|t| Target::new(t.kind, t.name, t.namespace));
    let mut fp_labels = labels.clone();
    if let Some(t) = &explicit_target {
        fp_labels.insert("__target__".into(), t.to_string());
    }
    let fingerprint = match raw.fingerprint {
        Some(fp) if fp.len() > 128 => {
            return Err(IngestError::new(
                "fingerprint",
                "longer than 128 characters",
            ));
        }
        Some(fp) if !fp.trim().is_empty() => fp,
        _ => label_fingerprint(&fp_labels),
    };
    let (target, target_fingerprint, target_aliases) = match explicit_target {
        Some(t) => {
            let fp = t.fingerprint();
            (Some(t), fp.clone(), vec![fp])
        }
        None => super::resolve_targets(&labels, &fingerprint),
    };
    let (mut labels, mut annotations, mut generator_url) = (labels, annotations, raw.generator_url);
    super::redact_signal_text(&mut labels, &mut annotations, &mut generator_url);
    Ok(NewSignal {
        fingerprint,
        starts_at,
        ends_at,
        status,
        name: raw.name,
        severity: raw.severity.map(Severity::from),
        mode,
        source: SignalSource::Native,
        labels,
        annotations,
        generator_url,
        receiver: raw.source,
        group_key: None,
        external_url: None,
        target,
        target_fingerprint,
        target_aliases,
        requested: None,
        trace: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::{MAX_ERROR_FIELD, MAX_ERROR_MESSAGE};

    #[test]
    fn minimal_prediction() {
        let now = Utc::now();
        let s = parse(
            br#"{"name":"PredictedMemoryExhaustion","target":{"kind":"Deployment","name":"checkout","namespace":"shop"}}"#,
            now,
        )
        .unwrap();
        assert_eq!(s.mode, SignalMode::Proactive);
        assert_eq!(s.starts_at, now);
        assert_eq!(s.target.unwrap().to_string(), "shop/Deployment/checkout");
    }

    #[test]
    fn typo_is_named() {
        let err = parse(br#"{"name":"X","severty":"critical"}"#, Utc::now()).unwrap_err();
        assert!(err.message.contains("severty"), "{err}");
    }

    // Found by tests/fuzz.rs: an unknown key, a kind or a time was quoted whole, raw.
    #[test]
    fn a_huge_unknown_key_is_quoted_in_part_and_the_known_ones_listed() {
        let key = "x".repeat(50_000);
        let body = format!(r#"{{"name":"X","{key}":1}}"#);
        let err = parse(body.as_bytes(), Utc::now()).unwrap_err();
        assert!(err.field.len() <= MAX_ERROR_FIELD, "{}", err.field.len());
        assert!(
            err.message.len() <= MAX_ERROR_MESSAGE,
            "{}",
            err.message.len()
        );
        assert!(err.message.starts_with("unknown field `xxxx"), "{err}");
        assert!(err.message.contains("`source`, `generator_url`"), "{err}");

        let kind = "Deployment".repeat(10_000);
        let body = format!(r#"{{"name":"X","target":{{"kind":"{kind}","name":"a"}}}}"#);
        let err = parse(body.as_bytes(), Utc::now()).unwrap_err();
        assert_eq!(err.field, "target.namespace");
        assert!(
            err.message.len() <= MAX_ERROR_MESSAGE,
            "{}",
            err.message.len()
        );
        assert!(
            err.message
                .starts_with("required for the namespaced kind Deployment"),
            "{err}"
        );
    }

    #[test]
    fn control_characters_in_an_error_are_escaped() {
        let err = parse(br#"{"name":"X","su\u007fmmary":"s"}"#, Utc::now()).unwrap_err();
        assert_eq!(err.field, r"su\u{7f}mmary");
        assert!(
            err.message.starts_with(r"unknown field `su\u{7f}mmary`"),
            "{err}"
        );
        let err = parse(
            br#"{"name":"X","starts_at":"\u2066yesterday\n"}"#,
            Utc::now(),
        )
        .unwrap_err();
        assert!(
            err.message.starts_with(r"`\u{2066}yesterday\n` is not"),
            "{err}"
        );
    }

    #[test]
    fn a_target_of_the_wrong_type_says_what_a_target_is() {
        let err = parse(br#"{"name":"X","target":"Pod/a"}"#, Utc::now()).unwrap_err();
        assert_eq!(err.field, "target");
        assert!(!err.message.contains("NativeTarget"), "{err}");
        assert!(err.message.contains("expected a target"), "{err}");
        let err = parse(b"[]", Utc::now()).unwrap_err();
        assert!(!err.message.contains("NativeSignal"), "{err}");
    }

    // Found by tests/fuzz.rs: a blank namespace counted as one.
    #[test]
    fn a_blank_namespace_is_no_namespace() {
        let err = parse(
            br#"{"name":"X","target":{"kind":"Deployment","name":"a","namespace":" 	"}}"#,
            Utc::now(),
        )
        .unwrap_err();
        assert_eq!(err.field, "target.namespace");
        let node = parse(
            br#"{"name":"X","target":{"kind":"Node","name":"n","namespace":" "}}"#,
            Utc::now(),
        )
        .unwrap();
        assert_eq!(node.target.unwrap().namespace, None);
        assert!(!node.labels.contains_key("namespace"));
    }

    // Found by scripts/fuzz: an unknown blank key was reported at the field " ".
    #[test]
    fn an_unknown_blank_key_is_named_in_the_message() {
        let err = parse(br#"{"name":"X","  ":1}"#, Utc::now()).unwrap_err();
        assert_eq!(err.field, "body", "{err}");
        assert!(err.message.starts_with("unknown field `  `"), "{err}");
    }

    #[test]
    fn namespaced_target_needs_namespace() {
        let err = parse(
            br#"{"name":"X","target":{"kind":"Deployment","name":"a"}}"#,
            Utc::now(),
        )
        .unwrap_err();
        assert_eq!(err.field, "target.namespace");
    }
}
