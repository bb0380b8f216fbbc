//! The Remediation mirror's settings (owner: `mirror`): whether each request is mirrored as a
//! `Remediation` object the cluster's users can read with kubectl, where requests without a
//! namespaced target go, and how long a finished one stays.

use std::time::Duration;

use super::declare::{HelpDefault, settings};
use super::{Result, invalid};
use crate::mirror::MirrorSettings;

settings! {
    /// Requests mirrored as `Remediation` objects (kubemedic.io/v1alpha1).
    pub struct MirrorArgs {
        /// Mirror each remediation request as a namespaced `Remediation` object (`kubectl get
        /// remediations -A`), in its target's namespace. Needs the CRD
        /// (charts/kubemedic/crds) and the chart's mirror role; a write that fails is retried
        /// and never holds a request up. The store stays the source of truth.
        #[arg(long, env = "KUBEMEDIC_MIRROR_REMEDIATIONS")]
        pub mirror_remediations: bool,

        /// Namespace of the objects of requests whose target has none (a Node, no target)
        /// [default: the service account's namespace in a pod, else the kubeconfig context's,
        /// else `default`].
        #[arg(long, env = "KUBEMEDIC_MIRROR_NAMESPACE", value_name = "NAMESPACE")]
        pub mirror_namespace: Option<String>,

        /// Seconds a finished request's object stays after its last change before it is
        /// deleted.
        #[arg(
            long,
            env = "KUBEMEDIC_MIRROR_RETENTION_SECONDS",
            value_name = "SECONDS",
            help_default = MirrorSettings::DEFAULT_RETENTION_SECONDS
        )]
        pub mirror_retention_seconds: Option<u64>,
    }
}

impl MirrorArgs {
    /// The mirror's settings; `dashboard` is `--public-url`, the base of each object's link.
    pub fn settings(self, dashboard: Option<String>) -> Result<MirrorSettings> {
        let retention = self
            .mirror_retention_seconds
            .unwrap_or(MirrorSettings::DEFAULT_RETENTION_SECONDS);
        if !(1..=31_536_000).contains(&retention) {
            return Err(invalid(
                "mirror-retention-seconds",
                format!("{retention} is outside 1..=31536000 (a year)"),
            ));
        }
        let namespace = self
            .mirror_namespace
            .map(|n| n.trim().to_owned())
            .filter(|n| !n.is_empty());
        if let Some(ns) = &namespace
            && !super::is_dns_label(ns)
        {
            return Err(invalid(
                "mirror-namespace",
                format!(
                    "`{ns}` is not a namespace name (lower-case letters, digits and `-`, at most 63)"
                ),
            ));
        }
        Ok(MirrorSettings {
            enabled: self.mirror_remediations,
            namespace,
            retention: Duration::from_secs(retention),
            dashboard,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_by_default_a_day_of_retention_and_bad_values_name_the_setting() {
        let s = MirrorArgs::default().settings(None).unwrap();
        assert!(!s.enabled);
        assert_eq!(s.retention, Duration::from_secs(86_400));
        assert_eq!(s.namespace, None);

        let args = MirrorArgs {
            mirror_remediations: true,
            mirror_namespace: Some(" kubemedic ".into()),
            mirror_retention_seconds: Some(60),
        };
        let s = args
            .settings(Some("https://km.example.com".into()))
            .unwrap();
        assert!(s.enabled);
        assert_eq!(s.namespace.as_deref(), Some("kubemedic"));
        assert_eq!(s.dashboard.as_deref(), Some("https://km.example.com"));

        let err = MirrorArgs {
            mirror_retention_seconds: Some(0),
            ..Default::default()
        }
        .settings(None)
        .unwrap_err()
        .to_string();
        assert!(err.contains("--mirror-retention-seconds"), "{err}");
        let err = MirrorArgs {
            mirror_namespace: Some("Kube_Medic".into()),
            ..Default::default()
        }
        .settings(None)
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("--mirror-namespace") && err.contains("KUBEMEDIC_MIRROR_NAMESPACE"),
            "{err}"
        );
    }
}
