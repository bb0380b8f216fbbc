//! Alertmanager's API v2: which alerts it holds active, and whether one of them is a given
//! signal.

use serde::Deserialize;

use super::{Endpoint, Http, Labels, Result};

/// One alert Alertmanager holds active (firing, whether or not silenced or inhibited).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ActiveAlert {
    /// Alertmanager's fingerprint of the label set (what its webhook sends as `fingerprint`).
    pub fingerprint: String,
    pub labels: Labels,
}

pub struct AlertmanagerClient {
    http: Http,
}

impl AlertmanagerClient {
    pub fn new(endpoint: Endpoint) -> Result<Self> {
        Ok(Self {
            http: Http::new("Alertmanager", endpoint)?,
        })
    }

    /// The active alerts named `alertname` (all active alerts when it is `None`): firing,
    /// silenced, inhibited or not yet processed — everything that is not resolved.
    pub async fn active_alerts(&self, alertname: Option<&str>) -> Result<Vec<ActiveAlert>> {
        let filter = alertname.map(|n| format!("alertname=\"{}\"", escape(n)));
        let mut query = vec![
            ("active", "true"),
            ("silenced", "true"),
            ("inhibited", "true"),
            ("unprocessed", "true"),
        ];
        if let Some(f) = &filter {
            query.push(("filter", f.as_str()));
        }
        self.http
            .get("/api/v2/alerts", &query, |body| {
                // Errors are a JSON string (`"matcher value contains …"`).
                serde_json::from_str::<String>(body).ok()
            })
            .await
    }

    /// Whether the alert with this fingerprint and these labels is still active.
    pub async fn firing(&self, fingerprint: &str, labels: &Labels) -> Result<bool> {
        let active = self
            .active_alerts(labels.get("alertname").map(String::as_str))
            .await?;
        Ok(active.iter().any(|a| same_alert(a, fingerprint, labels)))
    }
}

/// Whether `active` is the signal: the same fingerprint (a webhook from Alertmanager carries
/// Alertmanager's own) or, for a signal whose fingerprint kubemedic computed, the same label
/// set — all labels equal, none more, none fewer.
pub fn same_alert(active: &ActiveAlert, fingerprint: &str, labels: &Labels) -> bool {
    active.fingerprint == fingerprint || active.labels == *labels
}

/// A matcher value between double quotes: `\` and `"` escaped, newlines as `\n`.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn the_same_alert_is_the_same_fingerprint_or_the_same_labels() {
        let active = ActiveAlert {
            fingerprint: "7b35afbe9130f3c4".into(),
            labels: labels(&[("alertname", "A"), ("job", "x")]),
        };
        assert!(same_alert(&active, "7b35afbe9130f3c4", &Labels::new()));
        assert!(same_alert(
            &active,
            "computed",
            &labels(&[("alertname", "A"), ("job", "x")])
        ));
        assert!(!same_alert(
            &active,
            "computed",
            &labels(&[("alertname", "A"), ("job", "y")])
        ));
        assert!(
            !same_alert(&active, "computed", &labels(&[("alertname", "A")])),
            "a subset of the labels is another alert"
        );
    }

    #[test]
    fn matcher_values_are_escaped() {
        assert_eq!(escape(r#"a"b\c"#), r#"a\"b\\c"#);
    }
}
