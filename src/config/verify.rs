//! Verification's settings (owner: `verify`, with `monitoring`): how long a remediated target
//! settles, the score that counts as helped, and the monitoring it asks.

use super::declare::{HelpDefault, settings};
use super::{Result, invalid, non_empty};
use crate::domain::DEFAULT_EFFECTIVENESS_THRESHOLD;
use crate::monitoring::Endpoint;
use crate::secret::Secret;
use crate::verify::VerifySettings;

settings! {
    /// Verification: the window, the threshold, Alertmanager and Prometheus.
    pub struct VerifyArgs {
        /// Seconds a remediated target is left to settle before it is assessed.
        #[arg(
            long,
            env = "KUBEMEDIC_VERIFICATION_WINDOW_SECONDS",
            value_name = "SECONDS",
            help_default = VerifySettings::DEFAULT_WINDOW_SECONDS
        )]
        pub verification_window_seconds: Option<u64>,

        /// Effectiveness score (0..1) at or above which a remediation helped.
        #[arg(
            long,
            env = "KUBEMEDIC_EFFECTIVENESS_THRESHOLD",
            value_name = "0..1",
            help_default = DEFAULT_EFFECTIVENESS_THRESHOLD
        )]
        pub effectiveness_threshold: Option<f64>,

        /// Alertmanager's base URL (http://alertmanager:9093); verification asks its API
        /// whether the alert still fires. May carry basic-auth credentials
        /// (`http://USER:PASS@…`).
        #[arg(
            long,
            env = "KUBEMEDIC_ALERTMANAGER_URL",
            value_name = "URL",
            hide_env_values = true
        )]
        pub alertmanager_url: Option<Secret>,

        /// Prometheus' base URL (http://prometheus:9090); verification re-evaluates the alert's
        /// expression there (the metrics part of the score), and so does the "resolved" proof
        /// for an alert whose condition the cluster's objects cannot show (`up`, application
        /// series). May carry basic-auth credentials.
        #[arg(
            long,
            env = "KUBEMEDIC_PROMETHEUS_URL",
            value_name = "URL",
            hide_env_values = true
        )]
        pub prometheus_url: Option<Secret>,

        /// Restore the spec recorded before a remediation that made its target worse (fewer
        /// ready pods, more failing pods, a new failure), when the approval policy's rule
        /// `undo` says so (the shipped policy: outside production always; in production when
        /// ready pods were lost). `false`: such a request only goes to a person.
        #[arg(
            long,
            env = "KUBEMEDIC_UNDO_WORSE",
            value_name = "true|false",
            help_default = true
        )]
        pub undo_worse: Option<bool>,
    }
}

impl VerifyArgs {
    pub fn settings(self) -> Result<VerifySettings> {
        let window = self
            .verification_window_seconds
            .unwrap_or(VerifySettings::DEFAULT_WINDOW_SECONDS);
        if window > 86_400 {
            return Err(invalid(
                "verification-window-seconds",
                format!("{window} is outside 0..=86400"),
            ));
        }
        let threshold = self
            .effectiveness_threshold
            .unwrap_or(DEFAULT_EFFECTIVENESS_THRESHOLD);
        if !(0.0..=1.0).contains(&threshold) {
            return Err(invalid(
                "effectiveness-threshold",
                format!("{threshold} is outside 0..=1"),
            ));
        }
        let endpoint = |raw: Option<Secret>, key: &str| -> Result<Option<Endpoint>> {
            non_empty(raw)
                .map(|raw| Endpoint::parse(raw.expose()).map_err(|e| invalid(key, e.to_string())))
                .transpose()
        };
        Ok(VerifySettings {
            window: chrono::Duration::seconds(window as i64),
            effectiveness_threshold: threshold,
            alertmanager: endpoint(self.alertmanager_url, "alertmanager-url")?,
            prometheus: endpoint(self.prometheus_url, "prometheus-url")?,
            undo_worse: self.undo_worse.unwrap_or(true),
        })
    }
}
