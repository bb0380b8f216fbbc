//! The cluster's settings (owner: `cluster`): how kubemedic reaches the API server and what it
//! never reads.

use std::path::PathBuf;
use std::time::Duration;

use super::declare::{HelpDefault, settings};
use super::{Result, invalid};
use crate::cluster::tools::ToolLimits;
use crate::cluster::{ClusterSettings, ReadPolicy};

settings! {
    /// How kubemedic reaches and reads the cluster.
    pub struct ClusterArgs {
        /// Kubeconfig file [default: $KUBECONFIG, ~/.kube/config, or the in-cluster service
        /// account].
        #[arg(long, env = "KUBEMEDIC_KUBECONFIG", value_name = "FILE")]
        pub kubeconfig: Option<PathBuf>,

        /// Kubeconfig context [default: the current context].
        #[arg(long, env = "KUBEMEDIC_CONTEXT", value_name = "NAME")]
        pub context: Option<String>,

        /// Seconds one Kubernetes API call may take.
        #[arg(
            long,
            env = "KUBEMEDIC_CLUSTER_TIMEOUT_SECONDS",
            value_name = "SECONDS",
            help_default = ClusterSettings::DEFAULT_TIMEOUT_SECONDS
        )]
        pub cluster_timeout_seconds: Option<u64>,

        /// Resources kubemedic never reads, comma-separated plural names; `secrets` is always
        /// included [default: secrets].
        #[arg(
            long,
            env = "KUBEMEDIC_BLOCKED_RESOURCES",
            value_name = "LIST",
            value_delimiter = ','
        )]
        pub blocked_resources: Option<Vec<String>>,

        /// Namespaces kubemedic never reads, comma-separated [default: none].
        #[arg(
            long,
            env = "KUBEMEDIC_BLOCKED_NAMESPACES",
            value_name = "LIST",
            value_delimiter = ','
        )]
        pub blocked_namespaces: Option<Vec<String>>,

        /// Characters one investigation tool result may have before it is cut and marked
        /// `[TRUNCATED]`.
        #[arg(
            long,
            env = "KUBEMEDIC_TOOL_OUTPUT_MAX_CHARS",
            value_name = "CHARS",
            help_default = ToolLimits::DEFAULT_MAX_OUTPUT_CHARS
        )]
        pub tool_output_max_chars: Option<usize>,
    }
}

impl ClusterArgs {
    /// The cluster settings, checked (also for commands without a daemon config file).
    pub fn settings(&self) -> Result<ClusterSettings> {
        let timeout = self
            .cluster_timeout_seconds
            .unwrap_or(ClusterSettings::DEFAULT_TIMEOUT_SECONDS);
        if !(1..=600).contains(&timeout) {
            return Err(invalid(
                "cluster-timeout-seconds",
                format!("{timeout} is outside 1..=600"),
            ));
        }
        let mut blocked_resources: Vec<String> = self
            .blocked_resources
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|r| r.trim().to_ascii_lowercase())
            .filter(|r| !r.is_empty())
            .collect();
        // Secrets are never read, whatever the configuration says.
        if !blocked_resources.iter().any(|r| r == "secrets") {
            blocked_resources.push("secrets".into());
        }
        let blocked_namespaces: Vec<String> = self
            .blocked_namespaces
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|n| n.trim().to_owned())
            .filter(|n| !n.is_empty())
            .collect();
        let max_chars = self
            .tool_output_max_chars
            .unwrap_or(ToolLimits::DEFAULT_MAX_OUTPUT_CHARS);
        if !(500..=1_000_000).contains(&max_chars) {
            return Err(invalid(
                "tool-output-max-chars",
                format!("{max_chars} is outside 500..=1000000"),
            ));
        }
        Ok(ClusterSettings {
            kubeconfig: self.kubeconfig.clone(),
            context: self.context.clone(),
            timeout: Duration::from_secs(timeout),
            policy: ReadPolicy {
                blocked_resources,
                blocked_namespaces,
            },
            tool_limits: ToolLimits {
                max_output_chars: max_chars,
                ..Default::default()
            },
        })
    }
}
