//! One configuration, assembled from flags, `KUBEMEDIC_*` environment variables and an optional
//! YAML file (in that order of precedence), validated once at start-up.
//!
//! Each owner's settings live in their own file, each setting declared once ([`declare`]): one
//! struct field is the flag, the environment variable and the file key, and its default is one
//! constant the help text and the code read. This module assembles the owners into
//! [`DaemonArgs`] (what `serve`, `migrate` and the admin commands take) and [`Settings`] (what
//! the daemon runs on), and [`reference`] prints the table of every setting.
//!
//! Input: [`DaemonArgs`] as clap parsed them (flags and env) and the file named by `--config`.
//! Output: [`Settings`], fully typed; every later stage reads only that. Invariant: a bad value is
//! rejected before anything listens, with an error naming the flag, the variable and the file key.
//! Secrets are [`Secret`]s: their `Debug`/`Display` never print the value, clap hides their env
//! values in `--help`, and they have no defaults to show.

pub mod approval;
pub mod cluster;
pub(crate) mod declare;
pub mod execute;
pub mod investigate;
pub mod mcp_client;
pub mod mirror;
pub mod notify;
pub mod pipeline;
pub mod policy;
pub mod reference;
pub mod store;
pub mod telemetry;
pub mod verify;
pub mod web;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;

pub use self::approval::{ApprovalArgs, ApprovalConfig};
pub use self::cluster::ClusterArgs;
pub use self::declare::HelpDefault;
use self::declare::{Layered, env_of, file_keys};
pub use self::execute::ExecuteArgs;
pub use self::investigate::{InvestigateArgs, LlmMode};
pub use self::mcp_client::McpClientArgs;
pub use self::mirror::MirrorArgs;
pub use self::notify::{MailArgs, SlackArgs};
pub use self::pipeline::PipelineArgs;
pub use self::policy::{GateArgs, GateParts};
pub use self::store::{AuditKeySource, StoreArgs};
pub use self::telemetry::TelemetryArgs;
pub use self::verify::VerifyArgs;
pub use self::web::WebArgs;
use crate::cluster::ClusterSettings;
use crate::enrich::EnrichSettings;
use crate::execute::ExecuteSettings;
use crate::gate::GateSettings;
use crate::investigate::InvestigateSettings;
use crate::mcp_client::McpClientSettings;
use crate::mirror::MirrorSettings;
use crate::pipeline::PhaseTimeouts;
use crate::policy::PolicySettings;
use crate::secret::Secret;
use crate::store::DatabaseUrl;
use crate::telemetry::LogFormat;
use crate::verify::VerifySettings;
use crate::web::auth::ProxyAuth;
use crate::web::{HttpLimits, WebhookAuth};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("invalid setting {flag} ({env} / config key `{key}`): {message}")]
    Invalid {
        flag: String,
        env: String,
        key: String,
        message: String,
    },
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config file {path}: {message}")]
    Parse { path: PathBuf, message: String },
}

pub type Result<T, E = ConfigError> = std::result::Result<T, E>;

/// The setting known by the long flag `key` (`listen`) has a bad value: the error names the
/// flag, the variable and the file key, which the declaration spells alike.
fn invalid(key: &str, message: String) -> ConfigError {
    ConfigError::Invalid {
        flag: format!("--{key}"),
        env: env_of(key),
        key: key.to_owned(),
        message,
    }
}

/// An empty value (an unset key of a Kubernetes Secret, say) means "not configured".
fn non_empty(value: Option<Secret>) -> Option<Secret> {
    value.filter(|secret| !secret.expose().trim().is_empty())
}

/// One owner's settings, for the reference and the config file's key check.
pub struct Owner {
    /// The reference's heading.
    pub title: &'static str,
    /// Its declaration, as clap sees it.
    pub args: fn(clap::Command) -> clap::Command,
    /// Its file keys, as serde sees them.
    pub keys: fn() -> &'static [&'static str],
}

/// Every owner, in the order of `--help` and of the reference.
pub const OWNERS: &[Owner] = &[
    Owner {
        title: "Web server and callers",
        args: WebArgs::augment_args,
        keys: file_keys::<WebArgs>,
    },
    Owner {
        title: "Store and audit trail",
        args: StoreArgs::augment_args,
        keys: file_keys::<StoreArgs>,
    },
    Owner {
        title: "Worker pool and time limits",
        args: PipelineArgs::augment_args,
        keys: file_keys::<PipelineArgs>,
    },
    Owner {
        title: "Logs",
        args: TelemetryArgs::augment_args,
        keys: file_keys::<TelemetryArgs>,
    },
    Owner {
        title: "Cluster",
        args: ClusterArgs::augment_args,
        keys: file_keys::<ClusterArgs>,
    },
    Owner {
        title: "Investigation and LLM",
        args: InvestigateArgs::augment_args,
        keys: file_keys::<InvestigateArgs>,
    },
    Owner {
        title: "MCP servers the model may use",
        args: McpClientArgs::augment_args,
        keys: file_keys::<McpClientArgs>,
    },
    Owner {
        title: "Policy and gate",
        args: GateArgs::augment_args,
        keys: file_keys::<GateArgs>,
    },
    Owner {
        title: "Execution and guardrails",
        args: ExecuteArgs::augment_args,
        keys: file_keys::<ExecuteArgs>,
    },
    Owner {
        title: "Verification",
        args: VerifyArgs::augment_args,
        keys: file_keys::<VerifyArgs>,
    },
    Owner {
        title: "Approvals",
        args: ApprovalArgs::augment_args,
        keys: file_keys::<ApprovalArgs>,
    },
    Owner {
        title: "Approval mail",
        args: MailArgs::augment_args,
        keys: file_keys::<MailArgs>,
    },
    Owner {
        title: "Approvals in Slack",
        args: SlackArgs::augment_args,
        keys: file_keys::<SlackArgs>,
    },
    Owner {
        title: "Remediations in Kubernetes",
        args: MirrorArgs::augment_args,
        keys: file_keys::<MirrorArgs>,
    },
];

/// Settings shared by `serve`, `migrate` and the admin commands: the config file and every
/// owner's settings. Each value may come from the flag, the environment or the config file;
/// defaults are applied in [`Settings::load`] and are spelled out in the help text.
#[derive(Debug, Clone, Default, Args)]
pub struct DaemonArgs {
    /// YAML config file; keys are the long flag names (e.g. `listen`, `database-url`).
    #[arg(long, env = "KUBEMEDIC_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub web: WebArgs,
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub pipeline: PipelineArgs,
    #[command(flatten)]
    pub telemetry: TelemetryArgs,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    #[command(flatten)]
    pub investigate: InvestigateArgs,
    #[command(flatten)]
    pub mcp_client: McpClientArgs,
    #[command(flatten)]
    pub gate: GateArgs,
    #[command(flatten)]
    pub execute: ExecuteArgs,
    #[command(flatten)]
    pub verify: VerifyArgs,
    #[command(flatten)]
    pub approvals: ApprovalArgs,
    #[command(flatten)]
    pub mail: MailArgs,
    #[command(flatten)]
    pub slack: SlackArgs,
    #[command(flatten)]
    pub mirror: MirrorArgs,
}

impl DaemonArgs {
    /// Flags and environment (already in `self`) over the file named by `--config`.
    fn with_file(&self) -> Result<Self> {
        let mut args = self.clone();
        if let Some(path) = &self.config {
            let file = read_file(path)?;
            args.web.fill_from(file.web);
            args.store.fill_from(file.store);
            args.pipeline.fill_from(file.pipeline);
            args.telemetry.fill_from(file.telemetry);
            args.cluster.fill_from(file.cluster);
            args.investigate.fill_from(file.investigate);
            args.mcp_client.fill_from(file.mcp_client);
            args.gate.fill_from(file.gate);
            args.execute.fill_from(file.execute);
            args.verify.fill_from(file.verify);
            args.approvals.fill_from(file.approvals);
            args.mail.fill_from(file.mail);
            args.slack.fill_from(file.slack);
            args.mirror.fill_from(file.mirror);
        }
        Ok(args)
    }
}

/// The config file as every owner reads it. Unknown keys are an error, so a typo is reported
/// instead of silently ignored. Each owner reads the whole mapping (and skips the others' keys)
/// because serde cannot refuse unknown keys across flattened structs.
fn read_file(path: &Path) -> Result<DaemonArgs> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_owned(),
        source,
    })?;
    if text.trim().is_empty() {
        return Ok(DaemonArgs::default());
    }
    fn parse<T: for<'de> serde::Deserialize<'de>>(path: &Path, text: &str) -> Result<T> {
        serde_saphyr::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_owned(),
            message: e.to_string(),
        })
    }
    let keys: BTreeMap<String, serde::de::IgnoredAny> = parse(path, &text)?;
    if let Some(unknown) = keys
        .keys()
        .find(|k| !OWNERS.iter().any(|o| (o.keys)().contains(&k.as_str())))
    {
        return Err(ConfigError::Parse {
            path: path.to_owned(),
            message: format!(
                "unknown key `{unknown}`: the keys are the long flag names without `--` \
                 (`kubemedic config reference` lists them)"
            ),
        });
    }
    Ok(DaemonArgs {
        config: None,
        web: parse(path, &text)?,
        store: parse(path, &text)?,
        pipeline: parse(path, &text)?,
        telemetry: parse(path, &text)?,
        cluster: parse(path, &text)?,
        investigate: parse(path, &text)?,
        mcp_client: parse(path, &text)?,
        gate: parse(path, &text)?,
        execute: parse(path, &text)?,
        verify: parse(path, &text)?,
        approvals: parse(path, &text)?,
        mail: parse(path, &text)?,
        slack: parse(path, &text)?,
        mirror: parse(path, &text)?,
    })
}

/// The validated, typed configuration.
#[derive(Debug, Clone)]
pub struct Settings {
    pub listen: SocketAddr,
    pub data_dir: PathBuf,
    /// Where an earlier layout kept the state, to move into `data_dir` at start-up.
    pub adopt_state_from: Option<PathBuf>,
    pub database: DatabaseUrl,
    pub webhook_auth: WebhookAuth,
    pub api_token: Option<Secret>,
    /// Where the audit trail's signing key comes from.
    pub audit_key: AuditKeySource,
    /// How long a dashboard login lasts.
    pub session_ttl: Duration,
    /// The trusted SSO auth proxy, when configured.
    pub auth_proxy: Option<ProxyAuth>,
    pub max_body_bytes: usize,
    pub http: HttpLimits,
    /// How long a live event stream waits to be woken before it reads the trail anyway.
    pub stream_poll: Duration,
    pub workers: usize,
    pub lease: Duration,
    pub max_wait: Duration,
    pub log_format: LogFormat,
    pub log_level: String,
    /// Where traces go; `None`: tracing is off (no OpenTelemetry layer at all).
    pub traces: Option<crate::telemetry::TraceSettings>,
    pub cluster: ClusterSettings,
    pub investigate: InvestigateSettings,
    /// The MCP servers whose allowlisted tools invocation 1 may call.
    pub mcp_client: McpClientSettings,
    pub policy: PolicySettings,
    pub gate: GateSettings,
    pub enrich: EnrichSettings,
    pub execute: ExecuteSettings,
    pub verify: VerifySettings,
    pub timeouts: PhaseTimeouts,
    pub approvals: ApprovalConfig,
    /// Requests mirrored as `Remediation` objects.
    pub mirror: MirrorSettings,
}

impl Settings {
    /// Merge flags/env (already in `args`) over the config file over defaults, and validate.
    pub fn load(args: &DaemonArgs) -> Result<Self> {
        // Destructured, so a setting no owner turns into settings fails to compile.
        let DaemonArgs {
            config: _,
            web,
            store,
            pipeline,
            telemetry,
            cluster,
            investigate,
            mcp_client,
            gate,
            execute,
            verify,
            approvals,
            mail,
            slack,
            mirror,
        } = args.with_file()?;
        let cluster = cluster.settings()?;
        let investigate = investigate.settings()?;
        let mcp_client = mcp_client.settings()?;
        let GateParts {
            policy,
            gate,
            enrich,
        } = gate.settings()?;
        let verify = verify.settings()?;
        let execute = execute.settings(verify.effectiveness_threshold)?;
        let pipeline = pipeline.settings()?;
        let approvals = approvals.settings(mail, slack, pipeline.timeouts.awaiting_approval)?;
        let mirror = mirror.settings(approvals.settings.public_url.clone())?;
        // A window the verification timeout cuts off would end every remediation unassessed.
        if let (Some(limit), Ok(window)) = (pipeline.timeouts.verifying, verify.window.to_std())
            && window >= limit
        {
            return Err(invalid(
                "verification-window-seconds",
                format!(
                    "{} s is not shorter than --verification-timeout-seconds ({} s)",
                    window.as_secs(),
                    limit.as_secs()
                ),
            ));
        }
        let web = web.settings()?;
        let store = store.settings()?;
        let traces = telemetry.traces(|name| std::env::var(name).ok())?;
        let (log_format, log_level) = telemetry.settings()?;
        Ok(Settings {
            listen: web.listen,
            data_dir: store.data_dir,
            adopt_state_from: store.adopt_state_from,
            database: store.database,
            webhook_auth: web.webhook_auth,
            api_token: web.api_token,
            audit_key: store.audit_key,
            session_ttl: web.session_ttl,
            auth_proxy: web.auth_proxy,
            max_body_bytes: web.max_body_bytes,
            http: web.http,
            stream_poll: web.stream_poll,
            workers: pipeline.workers,
            lease: pipeline.lease,
            max_wait: pipeline.max_wait,
            log_format,
            log_level,
            traces,
            cluster,
            investigate,
            mcp_client,
            policy,
            gate,
            enrich,
            execute,
            verify,
            timeouts: pipeline.timeouts,
            approvals,
            mirror,
        })
    }

    /// Checks that only make sense for a long-running server (not for `migrate`).
    pub fn validate_for_serve(&self) -> Result<()> {
        let auth = &self.webhook_auth;
        if auth.token.is_none() && auth.basic.is_none() && !auth.insecure_no_auth {
            return Err(invalid(
                "webhook-token",
                "no webhook authentication configured: set --webhook-token and/or \
                 --webhook-basic-auth (or --webhook-insecure-no-auth to accept anyone)"
                    .into(),
            ));
        }
        Ok(())
    }
}

/// A DNS-1123 label, as Kubernetes requires of a namespace's name.
pub(crate) fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_local_and_sqlite() {
        let s = Settings::load(&DaemonArgs::default()).unwrap();
        assert_eq!(s.listen.to_string(), "127.0.0.1:8080");
        assert_eq!(
            s.database,
            DatabaseUrl::Sqlite(PathBuf::from("kubemedic-data/kubemedic.db"))
        );
        assert!(
            s.validate_for_serve().is_err(),
            "serve refuses to run without webhook auth"
        );
    }

    #[test]
    fn bad_listen_names_the_setting() {
        let mut args = DaemonArgs::default();
        args.web.listen = Some("localhost".into());
        let err = Settings::load(&args).unwrap_err().to_string();
        assert!(
            err.contains("--listen") && err.contains("KUBEMEDIC_LISTEN"),
            "{err}"
        );
    }

    #[test]
    fn file_values_apply_and_flags_win() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.yaml");
        std::fs::write(&path, "listen: 0.0.0.0:9000\nworkers: 8\n").unwrap();
        let mut args = DaemonArgs {
            config: Some(path.clone()),
            ..Default::default()
        };
        args.pipeline.workers = Some(2);
        let s = Settings::load(&args).unwrap();
        assert_eq!(s.listen.to_string(), "0.0.0.0:9000");
        assert_eq!(s.workers, 2);

        std::fs::write(&path, "listne: 0.0.0.0:9000\n").unwrap();
        let err = Settings::load(&args).unwrap_err().to_string();
        assert!(err.contains("listne"), "unknown key is named: {err}");
    }

    #[test]
    fn the_file_fills_only_what_flags_and_environment_left_unset() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.yaml");
        std::fs::write(
            &path,
            "dry-run: true\napprovers: [a@example.com, b@example.com]\nlog-level: debug\n\
             blocked-namespaces: [kube-system]\nsmtp-password: 12345678\nllm: offline\n",
        )
        .unwrap();
        let mut args = DaemonArgs {
            config: Some(path.clone()),
            ..Default::default()
        };
        args.telemetry.log_level = Some("warn".into());
        let filled = args.with_file().unwrap();
        assert!(filled.execute.dry_run, "a switch the file turns on is on");
        assert_eq!(
            filled.approvals.approvers,
            Some(vec!["a@example.com".into(), "b@example.com".into()])
        );
        assert_eq!(filled.telemetry.log_level.as_deref(), Some("warn"));
        assert_eq!(
            filled.cluster.blocked_namespaces,
            Some(vec!["kube-system".into()])
        );
        assert_eq!(
            filled
                .mail
                .smtp_password
                .as_ref()
                .map(|p| p.expose().to_owned()),
            Some("12345678".into()),
            "a number where a string is wanted is read as its text"
        );
        assert_eq!(filled.investigate.llm, Some(LlmMode::Offline));

        std::fs::write(&path, "workers: many\n").unwrap();
        let err = Settings::load(&args).unwrap_err().to_string();
        assert!(err.contains("k.yaml"), "{err}");
        std::fs::write(&path, "config: other.yaml\n").unwrap();
        let err = Settings::load(&args).unwrap_err().to_string();
        assert!(err.contains("unknown key `config`"), "{err}");
        std::fs::write(&path, "\n").unwrap();
        assert!(Settings::load(&args).is_ok(), "an empty file sets nothing");
    }

    #[test]
    fn secrets_do_not_print() {
        let mut args = DaemonArgs::default();
        args.web.webhook_token = Some(Secret::new("hunter2"));
        args.store.database_url = Some(Secret::new("postgres://u:pw@db:5432/km"));
        let s = Settings::load(&args).unwrap();
        let dump = format!("{s:?} {}", s.database.redacted());
        assert!(!dump.contains("hunter2") && !dump.contains("pw@"), "{dump}");
        assert!(dump.contains("postgres://db:5432/km"));
    }

    #[test]
    fn a_verification_window_the_timeout_would_cut_off_is_refused() {
        let mut args = DaemonArgs::default();
        args.verify.verification_window_seconds = Some(1800);
        let err = Settings::load(&args).unwrap_err().to_string();
        assert!(
            err.contains("--verification-window-seconds")
                && err.contains("--verification-timeout-seconds"),
            "{err}"
        );
        args.pipeline.verification_timeout_seconds = Some(0);
        assert!(Settings::load(&args).is_ok(), "no timeout, no conflict");
        let mut args = DaemonArgs::default();
        args.execute.cooldown_seconds = Some(100_000);
        let err = Settings::load(&args).unwrap_err().to_string();
        assert!(err.contains("--cooldown-seconds"), "{err}");
    }

    #[test]
    fn gate_defaults_and_bad_values_name_the_setting() {
        let s = Settings::load(&DaemonArgs::default()).unwrap();
        assert_eq!(s.policy.dir, PathBuf::from("policies"));
        assert_eq!(s.gate.confidence_threshold, 0.8);
        assert_eq!(s.enrich.default_environment, "production");
        assert_eq!(s.policy.eval_timeout, Duration::from_millis(100));

        let mut args = DaemonArgs::default();
        args.gate.confidence_threshold = Some(1.5);
        let err = Settings::load(&args).unwrap_err().to_string();
        assert!(
            err.contains("--confidence-threshold")
                && err.contains("KUBEMEDIC_CONFIDENCE_THRESHOLD")
                && err.contains("confidence-threshold`"),
            "{err}"
        );
        let mut args = DaemonArgs::default();
        args.gate.confidence_threshold = Some(f64::NAN);
        assert!(Settings::load(&args).is_err(), "NaN is not a threshold");

        let mut args = DaemonArgs::default();
        args.gate.default_environment = Some("prod env".into());
        let err = Settings::load(&args).unwrap_err().to_string();
        assert!(err.contains("--default-environment"), "{err}");

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.yaml");
        std::fs::write(
            &path,
            "policy-dir: /etc/kubemedic/policies\nconfidence-threshold: 0.9\ndefault-environment: staging\n",
        )
        .unwrap();
        let args = DaemonArgs {
            config: Some(path),
            ..Default::default()
        };
        let s = Settings::load(&args).unwrap();
        assert_eq!(s.policy.dir, PathBuf::from("/etc/kubemedic/policies"));
        assert_eq!(s.gate.confidence_threshold, 0.9);
        assert_eq!(s.enrich.default_environment, "staging");
    }

    #[test]
    fn monitoring_urls_are_checked_and_their_credentials_kept_secret() {
        let mut args = DaemonArgs::default();
        args.verify.alertmanager_url = Some(Secret::new("alertmanager:9093"));
        let err = Settings::load(&args).unwrap_err().to_string();
        assert!(
            err.contains("--alertmanager-url") && err.contains("KUBEMEDIC_ALERTMANAGER_URL"),
            "{err}"
        );
        let mut args = DaemonArgs::default();
        args.verify.prometheus_url = Some(Secret::new("ftp://u:hunter2@prometheus/"));
        let err = Settings::load(&args).unwrap_err().to_string();
        assert!(err.contains("--prometheus-url"), "{err}");
        assert!(!err.contains("hunter2"), "{err}");

        let mut args = DaemonArgs::default();
        args.verify.alertmanager_url = Some(Secret::new("https://km:hunter2@am.example:9093/"));
        args.verify.prometheus_url = Some(Secret::new(" "));
        let s = Settings::load(&args).unwrap();
        let am = s.verify.alertmanager.as_ref().unwrap();
        assert!(am.has_credentials());
        assert_eq!(am.to_string(), "https://am.example:9093");
        assert_eq!(
            s.verify.prometheus, None,
            "an empty value is not configured"
        );
        let dump = format!("{s:?}");
        assert!(!dump.contains("hunter2"), "{dump}");

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.yaml");
        std::fs::write(&path, "prometheus-url: http://prometheus:9090\n").unwrap();
        let args = DaemonArgs {
            config: Some(path),
            ..Default::default()
        };
        let s = Settings::load(&args).unwrap();
        assert_eq!(
            s.verify.prometheus.unwrap().to_string(),
            "http://prometheus:9090"
        );
        assert_eq!(s.verify.alertmanager, None);
    }

    #[test]
    fn http_limits_have_defaults_and_refuse_zero_or_absurd_values_by_name() {
        let s = Settings::load(&DaemonArgs::default()).unwrap();
        assert_eq!(s.http.header_timeout, Duration::from_secs(10));
        assert_eq!(s.http.body_timeout, Duration::from_secs(30));
        assert_eq!(s.http.max_connections, 512);

        for (tweak, flag, env) in [
            (
                (|a: &mut DaemonArgs| a.web.http_header_timeout_seconds = Some(0))
                    as fn(&mut DaemonArgs),
                "--http-header-timeout-seconds",
                "KUBEMEDIC_HTTP_HEADER_TIMEOUT_SECONDS",
            ),
            (
                |a| a.web.http_header_timeout_seconds = Some(301),
                "--http-header-timeout-seconds",
                "KUBEMEDIC_HTTP_HEADER_TIMEOUT_SECONDS",
            ),
            (
                |a| a.web.http_body_timeout_seconds = Some(0),
                "--http-body-timeout-seconds",
                "KUBEMEDIC_HTTP_BODY_TIMEOUT_SECONDS",
            ),
            (
                |a| a.web.http_body_timeout_seconds = Some(86_400),
                "--http-body-timeout-seconds",
                "KUBEMEDIC_HTTP_BODY_TIMEOUT_SECONDS",
            ),
            (
                |a| a.web.http_max_connections = Some(0),
                "--http-max-connections",
                "KUBEMEDIC_HTTP_MAX_CONNECTIONS",
            ),
            (
                |a| a.web.http_max_connections = Some(1_000_000),
                "--http-max-connections",
                "KUBEMEDIC_HTTP_MAX_CONNECTIONS",
            ),
        ] {
            let mut args = DaemonArgs::default();
            tweak(&mut args);
            let err = Settings::load(&args).unwrap_err().to_string();
            assert!(err.contains(flag) && err.contains(env), "{err}");
        }

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.yaml");
        std::fs::write(
            &path,
            "http-header-timeout-seconds: 5\nhttp-body-timeout-seconds: 60\nhttp-max-connections: 64\n",
        )
        .unwrap();
        let mut args = DaemonArgs {
            config: Some(path),
            ..Default::default()
        };
        args.web.http_max_connections = Some(128);
        let s = Settings::load(&args).unwrap();
        assert_eq!(s.http.header_timeout, Duration::from_secs(5));
        assert_eq!(s.http.body_timeout, Duration::from_secs(60));
        assert_eq!(s.http.max_connections, 128, "the flag wins over the file");
    }

    #[test]
    fn memory_sqlite_is_refused() {
        let mut args = DaemonArgs::default();
        args.store.database_url = Some(Secret::new("sqlite::memory:"));
        let err = Settings::load(&args).unwrap_err().to_string();
        assert!(err.contains("--database-url"), "{err}");
    }
}
