//! Alertmanager webhook v4 bodies → [`NewSignal`]s.
//!
//! The body is parsed with its JSON path tracked, so a bad value is reported as
//! `alerts[2].startsAt: …` rather than "invalid body". Every alert is validated before any is
//! accepted: a payload is all-or-nothing, which is what Alertmanager's retry expects.

use std::collections::BTreeMap;

use chrono::{DateTime, Datelike, Utc};
use serde::Deserialize;

use super::{IngestError, detect_mode, label_fingerprint};
use crate::domain::Severity;
use crate::domain::{NewSignal, SignalSource, SignalStatus};

/// The webhook body as Alertmanager sends it (`version: "4"`).
#[derive(Debug, Deserialize)]
#[serde(
    rename_all = "camelCase",
    expecting = "an Alertmanager webhook body (an object with `alerts`)"
)]
pub struct WebhookPayload {
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub group_key: Option<String>,
    #[serde(default)]
    pub truncated_alerts: Option<u64>,
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub receiver: Option<String>,
    #[serde(default)]
    pub group_labels: BTreeMap<String, String>,
    #[serde(default)]
    pub common_labels: BTreeMap<String, String>,
    #[serde(default)]
    pub common_annotations: BTreeMap<String, String>,
    #[serde(default, rename = "externalURL")]
    pub external_url: Option<String>,
    pub alerts: Vec<WebhookAlert>,
}

#[derive(Debug, Deserialize)]
#[serde(
    rename_all = "camelCase",
    expecting = "an alert (an object with `status`, `labels` and `startsAt`)"
)]
pub struct WebhookAlert {
    pub status: String,
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    pub starts_at: String,
    #[serde(default)]
    pub ends_at: Option<String>,
    #[serde(default, rename = "generatorURL")]
    pub generator_url: Option<String>,
    #[serde(default)]
    pub fingerprint: Option<String>,
}

/// Parse a JSON body, naming the path of the first bad value. A U+0000 in any string or key
/// (JSON carries it only as the escape `\u0000`) is replaced with U+FFFD first, so the alert is
/// stored — the same on both backends — instead of poisoning its batch on PostgreSQL
/// (see [`crate::store::replace_nul`]); the replacement is logged.
pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, IngestError> {
    if body.windows(6).any(|w| w == b"\\u0000") {
        let mut value: serde_json::Value = from_slice(body)?;
        let replaced = crate::store::replace_nul(&mut value);
        if replaced > 0 {
            tracing::warn!(
                replaced,
                "the body carries NUL characters (U+0000); stored as U+FFFD"
            );
        }
        return deserialize(value);
    }
    from_slice(body)
}

/// One JSON document and nothing after it (valid JSON followed by garbage is not a body).
fn from_slice<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, IngestError> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = deserialize(&mut de)?;
    de.end()
        .map_err(|e| IngestError::new("body", format!("invalid JSON: {e}")))?;
    Ok(value)
}

fn deserialize<'de, T: serde::de::DeserializeOwned, D>(de: D) -> Result<T, IngestError>
where
    D: serde::Deserializer<'de, Error = serde_json::Error>,
{
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        // A syntax error leaves an unknown last segment (`.?`); name what is known.
        let path = path.trim_end_matches(".?").trim_end_matches('?').to_owned();
        // A blank key names nothing a reader could find.
        let field = if path.trim().is_empty() || path == "." {
            "body".to_owned()
        } else {
            path
        };
        let message = if inner.is_syntax() || inner.is_eof() {
            format!("invalid JSON: {inner}")
        } else {
            inner.to_string()
        };
        IngestError::new(field, message)
    })
}

/// Parse and validate a webhook body into signals (one per alert), all or nothing.
pub fn parse(body: &[u8]) -> Result<Vec<NewSignal>, IngestError> {
    let payload: WebhookPayload = parse_json(body)?;
    if let Some(version) = &payload.version
        && version != "4"
    {
        return Err(IngestError::new(
            "version",
            format!("unsupported webhook version `{version}`; kubemedic understands version 4"),
        ));
    }
    payload
        .alerts
        .iter()
        .enumerate()
        .map(|(i, alert)| normalise(&payload, i, alert))
        .collect()
}

fn normalise(
    payload: &WebhookPayload,
    i: usize,
    alert: &WebhookAlert,
) -> Result<NewSignal, IngestError> {
    let field = |name: &str| format!("alerts[{i}].{name}");
    let status = SignalStatus::parse(&alert.status).ok_or_else(|| {
        IngestError::new(
            field("status"),
            format!("`{}` is neither `firing` nor `resolved`", alert.status),
        )
    })?;
    let name = alert
        .labels
        .get("alertname")
        .filter(|n| !n.trim().is_empty())
        .cloned()
        .ok_or_else(|| IngestError::new(field("labels.alertname"), "missing or empty"))?;
    let starts_at = parse_time(&alert.starts_at)
        .map_err(|m| IngestError::new(field("startsAt"), m))?
        .ok_or_else(|| IngestError::new(field("startsAt"), "the zero time is not a start time"))?;
    let ends_at = match &alert.ends_at {
        None => None,
        Some(raw) => parse_time(raw).map_err(|m| IngestError::new(field("endsAt"), m))?,
    };
    let fingerprint = match &alert.fingerprint {
        Some(fp) if fp.len() > 128 => {
            return Err(IngestError::new(
                field("fingerprint"),
                "longer than 128 characters",
            ));
        }
        Some(fp) if !fp.trim().is_empty() => fp.clone(),
        _ => label_fingerprint(&alert.labels),
    };
    let generator_url = alert.generator_url.clone().filter(|u| !u.is_empty());
    let mode = detect_mode(&name, &alert.labels, generator_url.as_deref());
    let (target, target_fingerprint, target_aliases) =
        super::resolve_targets(&alert.labels, &fingerprint);
    let mut labels = alert.labels.clone();
    let mut annotations = alert.annotations.clone();
    let mut generator_url = generator_url;
    super::redact_signal_text(&mut labels, &mut annotations, &mut generator_url);
    Ok(NewSignal {
        fingerprint,
        starts_at,
        ends_at,
        status,
        severity: alert.labels.get("severity").map(|s| Severity::parse(s)),
        name,
        mode,
        source: SignalSource::Alertmanager,
        labels,
        annotations,
        generator_url,
        receiver: payload.receiver.clone(),
        group_key: payload.group_key.clone(),
        external_url: payload.external_url.clone(),
        target,
        target_fingerprint,
        target_aliases,
        requested: None,
        trace: None,
    })
}

/// RFC 3339; Alertmanager's zero time (`0001-01-01T00:00:00Z`) means "not set".
pub(crate) fn parse_time(raw: &str) -> Result<Option<DateTime<Utc>>, String> {
    let t = DateTime::parse_from_rfc3339(raw)
        .map_err(|e| format!("`{raw}` is not an RFC 3339 time ({e})"))?
        .with_timezone(&Utc);
    if t.timestamp() <= -62_135_596_800 {
        return Ok(None);
    }
    // RFC 3339 writes 9999-12-31T23:59:59-01:00, an hour into the year 10000 in UTC; the stores
    // keep UTC times as fixed-width text with four-digit years (compared as text).
    if t.year() > 9999 {
        return Err(format!("`{raw}` is after the year 9999 in UTC"));
    }
    Ok(Some(t))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::{MAX_ERROR_FIELD, MAX_ERROR_MESSAGE};

    #[test]
    fn broken_json_names_where_it_broke() {
        let err = parse(b"{\"alerts\": [ {\"status\": \"firing\", ").unwrap_err();
        assert!(err.message.contains("invalid JSON"), "{err}");
    }

    #[test]
    fn bad_start_time_names_the_field() {
        let body = br#"{"version":"4","alerts":[{"status":"firing","labels":{"alertname":"A"},"startsAt":"2024-01-01T00:00:00Z"},{"status":"firing","labels":{"alertname":"B"},"startsAt":"yesterday"}]}"#;
        let err = parse(body).unwrap_err();
        assert_eq!(err.field, "alerts[1].startsAt");
    }

    #[test]
    fn non_string_label_names_the_label() {
        let body = br#"{"alerts":[{"status":"firing","labels":{"alertname":"A","replicas":3},"startsAt":"2024-01-01T00:00:00Z"}]}"#;
        let err = parse(body).unwrap_err();
        assert_eq!(err.field, "alerts[0].labels.replicas");
    }

    // Found by tests/fuzz.rs: errors quoted whole values, keys and paths of any length, raw.
    #[test]
    fn a_huge_value_is_quoted_in_part() {
        let huge = "A".repeat(300_000);
        let body = format!(
            r#"{{"alerts":[{{"status":"firing","labels":{{"alertname":"A"}},"startsAt":"{huge}"}}]}}"#
        );
        let err = parse(body.as_bytes()).unwrap_err();
        assert_eq!(err.field, "alerts[0].startsAt");
        assert!(
            err.message.len() <= MAX_ERROR_MESSAGE,
            "{}",
            err.message.len()
        );
        assert!(err.message.starts_with("`AAAA"), "{err}");
        assert!(
            err.message
                .ends_with("is not an RFC 3339 time (input contains invalid characters)"),
            "{err}"
        );

        let body = format!(r#"{{"truncatedAlerts":"{huge}","alerts":[]}}"#);
        let err = parse(body.as_bytes()).unwrap_err();
        assert_eq!(err.field, "truncatedAlerts");
        assert!(
            err.message.len() <= MAX_ERROR_MESSAGE,
            "{}",
            err.message.len()
        );
        assert!(
            err.message.starts_with("invalid type: string \"AAAA"),
            "{err}"
        );
        assert!(err.message.contains("expected u64"), "{err}");
    }

    #[test]
    fn a_huge_key_is_named_in_part() {
        // An unknown key is ignored, but a syntax error inside its value is reported at it.
        let key = "k".repeat(100_000);
        let body = format!(r#"{{"{key}": [1, }}"#);
        let err = parse(body.as_bytes()).unwrap_err();
        assert!(err.field.len() <= MAX_ERROR_FIELD, "{}", err.field.len());
        assert!(
            err.field.starts_with("kkkk") && err.field.contains('…'),
            "{}",
            err.field
        );
        let label = format!(
            r#"{{"alerts":[{{"status":"firing","labels":{{"alertname":"A","{key}":3}},"startsAt":"2024-01-01T00:00:00Z"}}]}}"#
        );
        let err = parse(label.as_bytes()).unwrap_err();
        assert!(
            err.field.starts_with("alerts[0].labels.kkkk"),
            "{}",
            err.field
        );
        assert!(err.field.len() <= MAX_ERROR_FIELD, "{}", err.field.len());
    }

    #[test]
    fn control_characters_in_an_error_are_escaped() {
        let body = br#"{"alerts":[{"status":"firing","labels":{"alertname":"A"},"startsAt":" \t\u001b[31m\u202e"}]}"#;
        let err = parse(body).unwrap_err();
        assert!(
            err.message
                .starts_with(r"` \t\u{1b}[31m\u{202e}` is not an RFC 3339 time ("),
            "{err}"
        );
        // A NUL in a key before a syntax error: the body never reaches the NUL replacement.
        let err = parse(br#"{"ale\u0000rts": [1,"#).unwrap_err();
        assert_eq!(err.field, r"ale\u{0}rts", "{err}");
        let err = parse(b"{\"al\\rerts\": [1,").unwrap_err();
        assert_eq!(err.field, r"al\rerts", "{err}");
    }

    #[test]
    fn errors_say_what_is_expected_in_the_bodys_terms() {
        let err = parse(br#""firing""#).unwrap_err();
        assert_eq!(err.field, "body");
        assert!(!err.message.contains("WebhookPayload"), "{err}");
        assert!(
            err.message
                .contains("expected an Alertmanager webhook body"),
            "{err}"
        );
        let err = parse(br#"{"alerts":[3]}"#).unwrap_err();
        assert_eq!(err.field, "alerts[0]");
        assert!(err.message.contains("expected an alert"), "{err}");
    }

    #[test]
    fn times_past_the_year_9999_are_refused() {
        // RFC 3339 allows 9999-12-31T23:59:59-23:59, which is in the year 10000 in UTC: the
        // stores keep times as fixed-width UTC text with four-digit years.
        let body = br#"{"alerts":[{"status":"firing","labels":{"alertname":"A"},"startsAt":"2024-01-01T00:00:00Z","endsAt":"9999-12-31T23:59:59-23:59"}]}"#;
        let err = parse(body).unwrap_err();
        assert_eq!(err.field, "alerts[0].endsAt");
        assert!(err.message.contains("after the year 9999"), "{err}");
        assert!(
            parse_time("9999-12-31T23:59:59.999999999Z")
                .unwrap()
                .is_some()
        );
        assert!(parse_time("9999-12-31T23:59:59+01:00").unwrap().is_some());
    }

    // Found by scripts/fuzz: a syntax error inside the value of a blank key was reported at
    // the field "   ".
    #[test]
    fn a_blank_key_is_not_a_field() {
        let err = parse(b"{\n  \"   \":\"5 ").unwrap_err();
        assert_eq!(err.field, "body", "{err}");
        assert!(err.message.starts_with("invalid JSON: EOF"), "{err}");
    }

    #[test]
    fn zero_end_time_is_none() {
        assert_eq!(parse_time("0001-01-01T00:00:00Z").unwrap(), None);
        assert!(parse_time("2024-01-15T14:20:00.000Z").unwrap().is_some());
    }
}
