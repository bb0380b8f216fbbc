//! The approval policy's settings (owners: `policy`, `gate`, `enrich`): where the Rego lives,
//! the confidence it is handed, and the environment of an unlabelled namespace.

use std::path::PathBuf;
use std::time::Duration;

use super::declare::{HelpDefault, settings};
use super::{Result, invalid};
use crate::enrich::EnrichSettings;
use crate::gate::{DEFAULT_CONFIDENCE_THRESHOLD, GateSettings};
use crate::policy::PolicySettings;

/// The policy directory unless configured (used only when it exists).
pub const DEFAULT_POLICY_DIR: &str = "policies";
/// The environment of a namespace nothing labels, unless configured.
pub const DEFAULT_ENVIRONMENT: &str = "production";

settings! {
    /// The approval gate and the enrichment that feeds it.
    pub struct GateArgs {
        /// Directory of the Rego policies: approval.rego (package kubemedic.approval) and an
        /// optional enrichment.rego; re-read when its files change [default: ./policies if it
        /// exists, else the policy built into kubemedic].
        #[arg(long, env = "KUBEMEDIC_POLICY_DIR", value_name = "DIR")]
        pub policy_dir: Option<PathBuf>,

        /// Confidence threshold handed to the approval policy as `confidence_threshold`, 0..=1.
        #[arg(
            long,
            env = "KUBEMEDIC_CONFIDENCE_THRESHOLD",
            value_name = "0..1",
            help_default = DEFAULT_CONFIDENCE_THRESHOLD
        )]
        pub confidence_threshold: Option<f64>,

        /// Environment of a target whose namespace has no `kubemedic.io/environment` label and
        /// no enrichment policy value.
        #[arg(
            long,
            env = "KUBEMEDIC_DEFAULT_ENVIRONMENT",
            value_name = "NAME",
            help_default = DEFAULT_ENVIRONMENT
        )]
        pub default_environment: Option<String>,

        /// Milliseconds one policy evaluation may run before it is stopped; a stopped
        /// evaluation requires approval.
        #[arg(
            long,
            env = "KUBEMEDIC_POLICY_EVAL_TIMEOUT_MS",
            value_name = "MS",
            help_default = PolicySettings::DEFAULT_EVAL_TIMEOUT_MS
        )]
        pub policy_eval_timeout_ms: Option<u64>,
    }
}

/// The policy, gate and enrichment settings of [`GateArgs`].
#[derive(Debug, Clone, PartialEq)]
pub struct GateParts {
    pub policy: PolicySettings,
    pub gate: GateSettings,
    pub enrich: EnrichSettings,
}

impl GateArgs {
    /// The policy, gate and enrichment settings, checked (also for commands without a daemon
    /// config file).
    pub fn settings(&self) -> Result<GateParts> {
        let configured = self.policy_dir.clone();
        let policy_dir_configured = configured.is_some();
        let policy_dir = configured.unwrap_or_else(|| PathBuf::from(DEFAULT_POLICY_DIR));
        if policy_dir.as_os_str().is_empty() {
            return Err(invalid("policy-dir", "must not be empty".into()));
        }
        let confidence_threshold = self
            .confidence_threshold
            .unwrap_or(DEFAULT_CONFIDENCE_THRESHOLD);
        if !(0.0..=1.0).contains(&confidence_threshold) {
            return Err(invalid(
                "confidence-threshold",
                format!("{confidence_threshold} is outside 0..=1"),
            ));
        }
        let default_environment = self
            .default_environment
            .as_deref()
            .unwrap_or(DEFAULT_ENVIRONMENT)
            .trim()
            .to_owned();
        let label_value = default_environment.len() <= 63
            && default_environment
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if default_environment.is_empty() || !label_value {
            return Err(invalid(
                "default-environment",
                format!(
                    "`{default_environment}` is not a label value like `production` (1-63 \
                     characters: letters, digits, `-`, `_`, `.`)"
                ),
            ));
        }
        let timeout_ms = self
            .policy_eval_timeout_ms
            .unwrap_or(PolicySettings::DEFAULT_EVAL_TIMEOUT_MS);
        if !(1..=10_000).contains(&timeout_ms) {
            return Err(invalid(
                "policy-eval-timeout-ms",
                format!("{timeout_ms} is outside 1..=10000"),
            ));
        }
        Ok(GateParts {
            policy: PolicySettings {
                dir: policy_dir,
                dir_configured: policy_dir_configured,
                eval_timeout: Duration::from_millis(timeout_ms),
            },
            gate: GateSettings {
                confidence_threshold,
            },
            enrich: EnrichSettings {
                default_environment,
            },
        })
    }
}
