//! Execution's settings (owner: `execute`): dry runs, how many run at once, and the guardrails
//! that block a remediation that keeps not helping.

use super::declare::{HelpDefault, settings};
use super::{Result, invalid};
use crate::execute::{ExecuteSettings, Guardrails};

settings! {
    /// Execution and the guardrails around it.
    pub struct ExecuteArgs {
        /// Send every change with `dryRun=All` and create no Jobs: requests record exactly what
        /// would have run, and nothing changes.
        #[arg(long, env = "KUBEMEDIC_DRY_RUN")]
        pub dry_run: bool,

        /// Executions running at once in the cluster.
        #[arg(
            long,
            env = "KUBEMEDIC_MAX_CONCURRENT_EXECUTIONS",
            value_name = "N",
            help_default = ExecuteSettings::DEFAULT_MAX_CONCURRENT
        )]
        pub max_concurrent_executions: Option<usize>,

        /// Executions running at once in one namespace.
        #[arg(
            long,
            env = "KUBEMEDIC_MAX_CONCURRENT_EXECUTIONS_PER_NAMESPACE",
            value_name = "N",
            help_default = ExecuteSettings::DEFAULT_MAX_CONCURRENT_PER_NAMESPACE
        )]
        pub max_concurrent_executions_per_namespace: Option<usize>,

        /// Consecutive ineffective remediations of a target that block the next one
        /// (IneffectiveChain); 0 turns the guardrail off.
        #[arg(
            long,
            env = "KUBEMEDIC_INEFFECTIVE_CHAIN_THRESHOLD",
            value_name = "N",
            help_default = Guardrails::DEFAULT_INEFFECTIVE_CHAIN
        )]
        pub ineffective_chain_threshold: Option<usize>,

        /// Remediations of a target within the lookback window that block the next one
        /// (RecurrenceCap); 0 turns it off.
        #[arg(
            long,
            env = "KUBEMEDIC_RECURRENCE_THRESHOLD",
            value_name = "N",
            help_default = Guardrails::DEFAULT_RECURRENCE
        )]
        pub recurrence_threshold: Option<usize>,

        /// The guardrails' lookback window in seconds.
        #[arg(
            long,
            env = "KUBEMEDIC_GUARDRAIL_LOOKBACK_SECONDS",
            value_name = "SECONDS",
            help_default = Guardrails::DEFAULT_LOOKBACK_SECONDS
        )]
        pub guardrail_lookback_seconds: Option<u64>,

        /// Seconds before the same workflow may run on the same target again
        /// (RecentlyRemediated).
        #[arg(
            long,
            env = "KUBEMEDIC_COOLDOWN_SECONDS",
            value_name = "SECONDS",
            help_default = Guardrails::DEFAULT_COOLDOWN_SECONDS
        )]
        pub cooldown_seconds: Option<u64>,
    }
}

impl ExecuteArgs {
    /// The execution settings; `effectiveness_threshold` is verification's, which the
    /// guardrails count ineffective remediations by.
    pub fn settings(self, effectiveness_threshold: f64) -> Result<ExecuteSettings> {
        let at_least_one = |v: usize, key: &str| {
            if v == 0 {
                Err(invalid(key, "must be at least 1".into()))
            } else {
                Ok(v)
            }
        };
        let max_concurrent = at_least_one(
            self.max_concurrent_executions
                .unwrap_or(ExecuteSettings::DEFAULT_MAX_CONCURRENT),
            "max-concurrent-executions",
        )?;
        let per_namespace = at_least_one(
            self.max_concurrent_executions_per_namespace
                .unwrap_or(ExecuteSettings::DEFAULT_MAX_CONCURRENT_PER_NAMESPACE),
            "max-concurrent-executions-per-namespace",
        )?;
        let lookback = self
            .guardrail_lookback_seconds
            .unwrap_or(Guardrails::DEFAULT_LOOKBACK_SECONDS);
        if !(60..=7 * 86_400).contains(&lookback) {
            return Err(invalid(
                "guardrail-lookback-seconds",
                format!("{lookback} is outside 60..=604800"),
            ));
        }
        let cooldown = self
            .cooldown_seconds
            .unwrap_or(Guardrails::DEFAULT_COOLDOWN_SECONDS);
        if cooldown > 86_400 {
            return Err(invalid(
                "cooldown-seconds",
                format!("{cooldown} is outside 0..=86400"),
            ));
        }
        let guardrails = Guardrails {
            ineffective_chain: self
                .ineffective_chain_threshold
                .unwrap_or(Guardrails::DEFAULT_INEFFECTIVE_CHAIN),
            recurrence: self
                .recurrence_threshold
                .unwrap_or(Guardrails::DEFAULT_RECURRENCE),
            lookback: chrono::Duration::seconds(lookback as i64),
            cooldown: chrono::Duration::seconds(cooldown as i64),
            effectiveness_threshold,
            ..Guardrails::default()
        };
        Ok(ExecuteSettings {
            dry_run: self.dry_run,
            max_concurrent,
            max_concurrent_per_namespace: per_namespace,
            guardrails,
            ..ExecuteSettings::default()
        })
    }
}
