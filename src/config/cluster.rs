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

        /// The namespace kubemedic runs in: the only one it reads its custom resources
        /// (RemediationWorkflow, InvestigationPlaybook, ClusterContext, ApprovalPolicy) from
        /// [default: the in-cluster service account's namespace, else kubemedic].
        #[arg(long, env = "KUBEMEDIC_OWN_NAMESPACE", value_name = "NAME")]
        pub own_namespace: Option<String>,

        /// Do not watch kubemedic's custom resources (docs/kubernetes-resources.md): the
        /// catalog, playbooks, pinned context and policy then come from files only.
        #[arg(long, env = "KUBEMEDIC_NO_CUSTOM_RESOURCES")]
        pub no_custom_resources: bool,

        /// Read the cluster directly for every investigation instead of through watches
        /// (docs/adr/0038-watch-cache.md): more API requests, no cache memory.
        #[arg(long, env = "KUBEMEDIC_NO_WATCH_CACHE")]
        pub no_watch_cache: bool,
    }
}

/// Where a pod finds the namespace it runs in.
const SERVICE_ACCOUNT_NAMESPACE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

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
        let own_namespace = match self.own_namespace.as_deref().map(str::trim) {
            Some(n) if !super::is_dns_label(n) => {
                return Err(invalid(
                    "own-namespace",
                    format!(
                        "`{n}` is not a namespace name (lowercase letters, digits and '-', at most 63)"
                    ),
                ));
            }
            Some(n) => n.to_owned(),
            None => std::fs::read_to_string(SERVICE_ACCOUNT_NAMESPACE)
                .ok()
                .map(|n| n.trim().to_owned())
                .filter(|n| super::is_dns_label(n))
                .unwrap_or_else(|| "kubemedic".into()),
        };
        Ok(ClusterSettings {
            own_namespace,
            custom_resources: !self.no_custom_resources,
            watch_cache: !self.no_watch_cache,
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
