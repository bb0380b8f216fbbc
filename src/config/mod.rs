//! One configuration, assembled from flags, `KUBEMEDIC_*` environment variables and an optional
//! YAML file (in that order of precedence), validated once at start-up.
//!
//! Input: [`DaemonArgs`] as clap parsed them (flags and env) and the file named by `--config`.
//! Output: [`Settings`], fully typed; every later stage reads only that. Invariant: a bad value is
//! rejected before anything listens, with an error naming the flag, the variable and the file key.
//! Secrets are [`Secret`]s: their `Debug`/`Display` never print the value, clap hides their env
//! values in `--help`, and they have no defaults to show.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use serde::Deserialize;

use crate::approval::ApprovalSettings;
use crate::cluster::tools::ToolLimits;
use crate::cluster::{ClusterSettings, ReadPolicy};
use crate::enrich::EnrichSettings;
use crate::execute::{ExecuteSettings, Guardrails};
use crate::gate::{DEFAULT_CONFIDENCE_THRESHOLD, GateSettings};
use crate::investigate::{InvestigateSettings, LlmInvestigatorSettings};
use crate::llm::{OpenAiSettings, Provider};
use crate::monitoring::Endpoint;
use crate::notify::SettingsError;
use crate::notify::email::EmailSettings;
use crate::notify::slack::SlackSettings;
use crate::pipeline::PhaseTimeouts;
use crate::policy::PolicySettings;
use crate::secret::{Secret, redact_url};
use crate::store::DatabaseUrl;
use crate::store::chain::{AuditKey, KeyError};
use crate::telemetry::LogFormat;
use crate::verify::VerifySettings;
use crate::web::{HttpLimits, WebhookAuth};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("invalid setting {flag} ({env} / config key `{key}`): {message}")]
    Invalid {
        flag: &'static str,
        env: &'static str,
        key: &'static str,
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

/// Settings shared by `serve`, `demo` and `migrate`. Every field is optional here so that a value
/// can come from the flag, the environment or the config file; defaults are applied in
/// [`Settings::load`] and are spelled out in the help text.
#[derive(Debug, Clone, Default, Args)]
pub struct DaemonArgs {
    /// YAML config file; keys are the long flag names (e.g. `listen`, `database-url`).
    #[arg(long, env = "KUBEMEDIC_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Address to listen on [default: 127.0.0.1:8080].
    #[arg(long, env = "KUBEMEDIC_LISTEN", value_name = "ADDR")]
    pub listen: Option<String>,

    /// Directory for the embedded database and other state [default: ./kubemedic-data].
    #[arg(long, env = "KUBEMEDIC_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,

    /// `sqlite://PATH` or `postgres://…` [default: sqlite://<data-dir>/kubemedic.db].
    #[arg(
        long,
        env = "KUBEMEDIC_DATABASE_URL",
        value_name = "URL",
        hide_env_values = true
    )]
    pub database_url: Option<Secret>,

    /// Bearer token Alertmanager must send to the webhook.
    #[arg(
        long,
        env = "KUBEMEDIC_WEBHOOK_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    pub webhook_token: Option<Secret>,

    /// Basic-auth credentials Alertmanager may send to the webhook instead, as USER:PASS.
    #[arg(
        long,
        env = "KUBEMEDIC_WEBHOOK_BASIC_AUTH",
        value_name = "USER:PASS",
        hide_env_values = true
    )]
    pub webhook_basic_auth: Option<Secret>,

    /// Accept webhook calls without credentials. Off by default: refuse to start without auth.
    #[arg(long, env = "KUBEMEDIC_WEBHOOK_INSECURE_NO_AUTH")]
    pub webhook_insecure_no_auth: bool,

    /// Admin bearer token for the JSON API; without one every API call is refused (401).
    #[arg(
        long,
        env = "KUBEMEDIC_API_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    pub api_token: Option<Secret>,

    /// The audit trail's signing key (hex, at least 64 digits), for several replicas that
    /// share one database; they must all have the same key. `NEW,OLD` gives a keyring: the
    /// first key signs, the retired ones check the events they signed, and a daemon started
    /// with a new key in front hands the trail over to it [default: read from, or created in,
    /// --audit-key-file].
    #[arg(
        long,
        env = "KUBEMEDIC_AUDIT_KEY",
        value_name = "HEX",
        hide_env_values = true
    )]
    pub audit_key: Option<Secret>,

    /// File holding the audit trail's signing key (one hex key per line: the signing key, then
    /// the retired ones); created (mode 0600) when missing [default: <data-dir>/audit.key].
    /// Keep it out of the database's reach: whoever holds it can re-sign an edited trail.
    #[arg(long, env = "KUBEMEDIC_AUDIT_KEY_FILE", value_name = "FILE")]
    pub audit_key_file: Option<PathBuf>,

    /// Trust an SSO auth proxy: the header that names the signed-in user (e.g.
    /// `X-Forwarded-User`). Off unless set; needs --auth-proxy-roles and
    /// --auth-proxy-trusted-peers.
    #[arg(long, env = "KUBEMEDIC_AUTH_PROXY_USER_HEADER", value_name = "HEADER")]
    pub auth_proxy_user_header: Option<String>,

    /// The auth proxy's header with the user's groups, comma-separated
    /// [default: X-Forwarded-Groups].
    #[arg(
        long,
        env = "KUBEMEDIC_AUTH_PROXY_GROUPS_HEADER",
        value_name = "HEADER"
    )]
    pub auth_proxy_groups_header: Option<String>,

    /// Which group gives which role, as GROUP=ROLE pairs, comma-separated (e.g.
    /// `sre=approver,platform=admin,eng=viewer`); a user in none of them gets nothing.
    #[arg(
        long,
        env = "KUBEMEDIC_AUTH_PROXY_ROLES",
        value_name = "GROUP=ROLE,..."
    )]
    pub auth_proxy_roles: Option<String>,

    /// The proxy's addresses, comma-separated: the headers of anyone else are ignored.
    #[arg(
        long,
        env = "KUBEMEDIC_AUTH_PROXY_TRUSTED_PEERS",
        value_name = "IP,..."
    )]
    pub auth_proxy_trusted_peers: Option<String>,

    /// How long a dashboard login lasts, in seconds [default: 43200].
    #[arg(long, env = "KUBEMEDIC_SESSION_TTL_SECONDS", value_name = "SECONDS")]
    pub session_ttl_seconds: Option<u64>,

    /// Largest accepted webhook body in bytes [default: 1048576].
    #[arg(long, env = "KUBEMEDIC_MAX_BODY_BYTES", value_name = "BYTES")]
    pub max_body_bytes: Option<usize>,

    /// Seconds a client has to send a complete request head, counted from when its connection
    /// is ready for one (accepted, or done with the previous response, so an idle kept-alive
    /// connection is closed after this too) [default: 10].
    #[arg(
        long,
        env = "KUBEMEDIC_HTTP_HEADER_TIMEOUT_SECONDS",
        value_name = "SECONDS"
    )]
    pub http_header_timeout_seconds: Option<u64>,

    /// Seconds a client has to send a whole request body once its head is in; a slower one
    /// gets 408 and is disconnected [default: 30].
    #[arg(
        long,
        env = "KUBEMEDIC_HTTP_BODY_TIMEOUT_SECONDS",
        value_name = "SECONDS"
    )]
    pub http_body_timeout_seconds: Option<u64>,

    /// Seconds a response write may make no progress (the client reads nothing) before the
    /// connection is closed; a client that reads slowly but steadily is not cut
    /// [default: 30].
    #[arg(
        long,
        env = "KUBEMEDIC_HTTP_WRITE_TIMEOUT_SECONDS",
        value_name = "SECONDS"
    )]
    pub http_write_timeout_seconds: Option<u64>,

    /// HTTP connections open at once; one more is accepted and closed at once [default: 512].
    #[arg(long, env = "KUBEMEDIC_HTTP_MAX_CONNECTIONS", value_name = "N")]
    pub http_max_connections: Option<usize>,

    /// Stages run at once by the worker pool: enrichment, investigation, policy, execution and
    /// verification work (the pool holds up to max(4 × N, 256) requests) [default: 4].
    #[arg(long, env = "KUBEMEDIC_WORKERS", value_name = "N")]
    pub workers: Option<usize>,

    /// Seconds a worker's claim on a request lasts without renewal; after a crash another
    /// worker resumes the request once it lapses [default: 30].
    #[arg(long, env = "KUBEMEDIC_LEASE_SECONDS", value_name = "SECONDS")]
    pub lease_seconds: Option<u64>,

    /// Seconds a request waits for an unreachable dependency (cluster, LLM, mail) before it
    /// ends in ManualReviewRequired with that reason [default: 900].
    #[arg(long, env = "KUBEMEDIC_MAX_WAIT_SECONDS", value_name = "SECONDS")]
    pub max_wait_seconds: Option<u64>,

    /// Seconds a request may stay in Investigating/Selecting before it goes to review;
    /// 0 = no limit [default: 600].
    #[arg(
        long,
        env = "KUBEMEDIC_INVESTIGATION_TIMEOUT_SECONDS",
        value_name = "SECONDS"
    )]
    pub investigation_timeout_seconds: Option<u64>,

    /// Seconds a request waits for a human's approval before it Expires; 0 = no limit
    /// [default: 900].
    #[arg(
        long,
        env = "KUBEMEDIC_APPROVAL_TIMEOUT_SECONDS",
        value_name = "SECONDS"
    )]
    pub approval_timeout_seconds: Option<u64>,

    /// Seconds a request may stay in Executing before it goes to review; 0 = no limit
    /// [default: 1800].
    #[arg(
        long,
        env = "KUBEMEDIC_EXECUTION_TIMEOUT_SECONDS",
        value_name = "SECONDS"
    )]
    pub execution_timeout_seconds: Option<u64>,

    /// Seconds a request may stay in Verifying (the window included) before it goes to
    /// review; 0 = no limit [default: 1800].
    #[arg(
        long,
        env = "KUBEMEDIC_VERIFICATION_TIMEOUT_SECONDS",
        value_name = "SECONDS"
    )]
    pub verification_timeout_seconds: Option<u64>,

    /// Seconds a request may take from its first alert to its end; 0 = no limit
    /// [default: 3600].
    #[arg(
        long,
        env = "KUBEMEDIC_REQUEST_TIMEOUT_SECONDS",
        value_name = "SECONDS"
    )]
    pub request_timeout_seconds: Option<u64>,

    /// Log format: auto (text on a terminal, JSON otherwise), json or text [default: auto].
    #[arg(long, env = "KUBEMEDIC_LOG_FORMAT", value_enum)]
    pub log_format: Option<LogFormat>,

    /// Log filter in `tracing` syntax, e.g. `info,kubemedic=debug` [default: info].
    #[arg(long, env = "KUBEMEDIC_LOG_LEVEL", value_name = "FILTER")]
    pub log_level: Option<String>,

    #[command(flatten)]
    pub cluster: ClusterArgs,

    #[command(flatten)]
    pub investigate: InvestigateArgs,

    #[command(flatten)]
    pub gate: GateArgs,

    #[command(flatten)]
    pub execute: ExecuteArgs,

    #[command(flatten)]
    pub approvals: ApprovalArgs,
}

/// Human approvals: who decides, how they are told, and the links they use.
#[derive(Debug, Clone, Default, Args)]
pub struct ApprovalArgs {
    /// The address approvers reach kubemedic at (`https://kubemedic.example.com`): the base of
    /// every link in an approval mail or Slack message. Required when e-mail or Slack is set.
    #[arg(long, env = "KUBEMEDIC_PUBLIC_URL", value_name = "URL")]
    pub public_url: Option<String>,

    /// E-mail addresses that may approve, comma-separated; each gets the approval mail with
    /// their own signed links, and may decide through the API.
    #[arg(
        long,
        env = "KUBEMEDIC_APPROVERS",
        value_name = "LIST",
        value_delimiter = ','
    )]
    pub approvers: Option<Vec<String>>,

    /// From this risk score (0-100) on, an approver confirming through a link must type the
    /// target's name [default: 80].
    #[arg(long, env = "KUBEMEDIC_HIGH_RISK_SCORE", value_name = "0..100")]
    pub high_risk_score: Option<i64>,

    /// The key approval links are signed with (HMAC-SHA256) [default: a random key generated
    /// once and kept in the store, so links survive restarts].
    #[arg(
        long,
        env = "KUBEMEDIC_LINK_SIGNING_KEY",
        value_name = "KEY",
        hide_env_values = true
    )]
    pub link_signing_key: Option<Secret>,

    /// SMTP server: `smtp://HOST[:PORT]` (plain), `smtp+starttls://HOST[:PORT]` (STARTTLS) or
    /// `smtps://HOST[:PORT]` (implicit TLS).
    #[arg(long, env = "KUBEMEDIC_SMTP_URL", value_name = "URL")]
    pub smtp_url: Option<String>,

    /// SMTP user name (authentication is used only when set).
    #[arg(long, env = "KUBEMEDIC_SMTP_USERNAME", value_name = "USER")]
    pub smtp_username: Option<String>,

    /// SMTP password.
    #[arg(
        long,
        env = "KUBEMEDIC_SMTP_PASSWORD",
        value_name = "PASSWORD",
        hide_env_values = true
    )]
    pub smtp_password: Option<Secret>,

    /// A PEM file of extra CA certificates to trust for the SMTP server's TLS (a private
    /// relay); the Mozilla roots are always trusted.
    #[arg(long, env = "KUBEMEDIC_SMTP_CA_FILE", value_name = "FILE")]
    pub smtp_ca_file: Option<PathBuf>,

    /// The sender of approval mail (`kubemedic <kubemedic@example.com>`).
    #[arg(long, env = "KUBEMEDIC_EMAIL_FROM", value_name = "MAILBOX")]
    pub email_from: Option<String>,

    /// Slack bot token (`xoxb-…`): approvals are posted with Approve / Deny buttons.
    #[arg(
        long,
        env = "KUBEMEDIC_SLACK_BOT_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    pub slack_bot_token: Option<Secret>,

    /// The Slack channel approvals are posted to (with a bot token).
    #[arg(long, env = "KUBEMEDIC_SLACK_CHANNEL", value_name = "CHANNEL")]
    pub slack_channel: Option<String>,

    /// A Slack incoming webhook URL (no buttons: the message links to the confirmation pages).
    #[arg(
        long,
        env = "KUBEMEDIC_SLACK_WEBHOOK_URL",
        value_name = "URL",
        hide_env_values = true
    )]
    pub slack_webhook_url: Option<Secret>,

    /// Slack's signing secret: verifies `POST /api/v1/slack/interactions` (the buttons).
    #[arg(
        long,
        env = "KUBEMEDIC_SLACK_SIGNING_SECRET",
        value_name = "SECRET",
        hide_env_values = true
    )]
    pub slack_signing_secret: Option<Secret>,

    /// Slack's Web API base [default: https://slack.com/api].
    #[arg(long, env = "KUBEMEDIC_SLACK_API_URL", value_name = "URL")]
    pub slack_api_url: Option<String>,

    /// Slack user ids that may approve with the buttons, comma-separated.
    #[arg(
        long,
        env = "KUBEMEDIC_SLACK_APPROVERS",
        value_name = "LIST",
        value_delimiter = ','
    )]
    pub slack_approvers: Option<Vec<String>>,
}

/// Execution, verification and the guardrails around them.
#[derive(Debug, Clone, Default, Args)]
pub struct ExecuteArgs {
    /// Send every change with `dryRun=All` and create no Jobs: requests record exactly what
    /// would have run, and nothing changes.
    #[arg(long, env = "KUBEMEDIC_DRY_RUN")]
    pub dry_run: bool,

    /// Seconds a remediated target is left to settle before it is assessed [default: 300].
    #[arg(
        long,
        env = "KUBEMEDIC_VERIFICATION_WINDOW_SECONDS",
        value_name = "SECONDS"
    )]
    pub verification_window_seconds: Option<u64>,

    /// Effectiveness score (0..1) at or above which a remediation helped [default: 0.7].
    #[arg(long, env = "KUBEMEDIC_EFFECTIVENESS_THRESHOLD", value_name = "0..1")]
    pub effectiveness_threshold: Option<f64>,

    /// Alertmanager's base URL (http://alertmanager:9093); verification asks its API whether
    /// the alert still fires. May carry basic-auth credentials (`http://USER:PASS@…`).
    #[arg(
        long,
        env = "KUBEMEDIC_ALERTMANAGER_URL",
        value_name = "URL",
        hide_env_values = true
    )]
    pub alertmanager_url: Option<Secret>,

    /// Prometheus' base URL (http://prometheus:9090); verification re-evaluates the alert's
    /// expression there (the metrics part of the score). May carry basic-auth credentials.
    #[arg(
        long,
        env = "KUBEMEDIC_PROMETHEUS_URL",
        value_name = "URL",
        hide_env_values = true
    )]
    pub prometheus_url: Option<Secret>,

    /// Executions running at once in the cluster [default: 10].
    #[arg(long, env = "KUBEMEDIC_MAX_CONCURRENT_EXECUTIONS", value_name = "N")]
    pub max_concurrent_executions: Option<usize>,

    /// Executions running at once in one namespace [default: 3].
    #[arg(
        long,
        env = "KUBEMEDIC_MAX_CONCURRENT_EXECUTIONS_PER_NAMESPACE",
        value_name = "N"
    )]
    pub max_concurrent_executions_per_namespace: Option<usize>,

    /// Consecutive ineffective remediations of a target that block the next one
    /// (IneffectiveChain); 0 turns the guardrail off [default: 3].
    #[arg(long, env = "KUBEMEDIC_INEFFECTIVE_CHAIN_THRESHOLD", value_name = "N")]
    pub ineffective_chain_threshold: Option<usize>,

    /// Remediations of a target within the lookback window that block the next one
    /// (RecurrenceCap); 0 turns it off [default: 5].
    #[arg(long, env = "KUBEMEDIC_RECURRENCE_THRESHOLD", value_name = "N")]
    pub recurrence_threshold: Option<usize>,

    /// The guardrails' lookback window in seconds [default: 14400].
    #[arg(
        long,
        env = "KUBEMEDIC_GUARDRAIL_LOOKBACK_SECONDS",
        value_name = "SECONDS"
    )]
    pub guardrail_lookback_seconds: Option<u64>,

    /// Seconds before the same workflow may run on the same target again
    /// (RecentlyRemediated) [default: 300].
    #[arg(long, env = "KUBEMEDIC_COOLDOWN_SECONDS", value_name = "SECONDS")]
    pub cooldown_seconds: Option<u64>,
}

/// The approval gate and the enrichment that feeds it.
#[derive(Debug, Clone, Default, Args)]
pub struct GateArgs {
    /// Directory of the Rego policies: approval.rego (package kubemedic.approval) and an
    /// optional enrichment.rego; re-read when its files change [default: ./policies if it
    /// exists, else the policy built into kubemedic].
    #[arg(long, env = "KUBEMEDIC_POLICY_DIR", value_name = "DIR")]
    pub policy_dir: Option<PathBuf>,

    /// Confidence threshold handed to the approval policy as `confidence_threshold`, 0..=1
    /// [default: 0.8].
    #[arg(long, env = "KUBEMEDIC_CONFIDENCE_THRESHOLD", value_name = "0..1")]
    pub confidence_threshold: Option<f64>,

    /// Environment of a target whose namespace has no `kubemedic.io/environment` label and no
    /// enrichment policy value [default: production].
    #[arg(long, env = "KUBEMEDIC_DEFAULT_ENVIRONMENT", value_name = "NAME")]
    pub default_environment: Option<String>,

    /// Milliseconds one policy evaluation may run before it is stopped; a stopped evaluation
    /// requires approval [default: 100].
    #[arg(long, env = "KUBEMEDIC_POLICY_EVAL_TIMEOUT_MS", value_name = "MS")]
    pub policy_eval_timeout_ms: Option<u64>,
}

/// Which investigator runs invocation 1 and 2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LlmMode {
    /// The deterministic offline investigator: no model, no network.
    Offline,
    /// OpenAI, or any OpenAI-compatible server given with --llm-base-url (Ollama, vLLM, llama.cpp).
    Openai,
    /// Azure OpenAI (--llm-base-url is the resource endpoint).
    Azure,
}

/// How investigations run: the model (or none), the catalog and playbooks, the caps.
#[derive(Debug, Clone, Default, Args)]
pub struct InvestigateArgs {
    /// Investigator: offline (no LLM), openai or azure [default: offline].
    #[arg(long, env = "KUBEMEDIC_LLM", value_enum)]
    pub llm: Option<LlmMode>,
    /// Base URL of the model API (OpenAI-compatible server, or the Azure resource endpoint).
    #[arg(long, env = "KUBEMEDIC_LLM_BASE_URL", value_name = "URL")]
    pub llm_base_url: Option<String>,
    /// API key of the model provider.
    #[arg(
        long,
        env = "KUBEMEDIC_LLM_API_KEY",
        value_name = "KEY",
        hide_env_values = true
    )]
    pub llm_api_key: Option<Secret>,
    /// Model for invocation 1 (and 2, unless --llm-selection-model is given).
    #[arg(long, env = "KUBEMEDIC_LLM_MODEL", value_name = "MODEL")]
    pub llm_model: Option<String>,
    /// Model for invocation 2 (workflow selection) [default: --llm-model].
    #[arg(long, env = "KUBEMEDIC_LLM_SELECTION_MODEL", value_name = "MODEL")]
    pub llm_selection_model: Option<String>,
    /// Azure deployment name [default: --llm-model].
    #[arg(long, env = "KUBEMEDIC_LLM_AZURE_DEPLOYMENT", value_name = "NAME")]
    pub llm_azure_deployment: Option<String>,
    /// Azure API version [default: 2024-10-21].
    #[arg(long, env = "KUBEMEDIC_LLM_AZURE_API_VERSION", value_name = "VERSION")]
    pub llm_azure_api_version: Option<String>,
    /// Seconds one model request may take [default: 120].
    #[arg(long, env = "KUBEMEDIC_LLM_TIMEOUT_SECONDS", value_name = "SECONDS")]
    pub llm_timeout_seconds: Option<u64>,
    /// Retries on 429/5xx/network errors, with exponential backoff [default: 4].
    #[arg(long, env = "KUBEMEDIC_LLM_MAX_RETRIES", value_name = "N")]
    pub llm_max_retries: Option<u32>,
    /// Tokens one investigation (both invocations) may spend [default: 60000].
    #[arg(long, env = "KUBEMEDIC_LLM_TOKEN_BUDGET", value_name = "TOKENS")]
    pub llm_token_budget: Option<u64>,
    /// Tokens all investigations may spend per UTC day [default: 2000000].
    #[arg(long, env = "KUBEMEDIC_LLM_DAILY_TOKEN_BUDGET", value_name = "TOKENS")]
    pub llm_daily_token_budget: Option<u64>,
    /// Workflow catalog directory [default: the catalog built into the binary].
    #[arg(long, env = "KUBEMEDIC_CATALOG_DIR", value_name = "DIR")]
    pub catalog_dir: Option<PathBuf>,
    /// Playbook directory [default: the playbooks built into the binary].
    #[arg(long, env = "KUBEMEDIC_PLAYBOOKS_DIR", value_name = "DIR")]
    pub playbooks_dir: Option<PathBuf>,
    /// Model turns of invocation 1 [default: 12].
    #[arg(long, env = "KUBEMEDIC_MAX_TURNS", value_name = "N")]
    pub max_turns: Option<usize>,
    /// Tool calls per investigation [default: 30].
    #[arg(long, env = "KUBEMEDIC_MAX_TOOL_CALLS", value_name = "N")]
    pub max_tool_calls: Option<usize>,
    /// Calls of one tool per investigation [default: 8].
    #[arg(long, env = "KUBEMEDIC_MAX_CALLS_PER_TOOL", value_name = "N")]
    pub max_calls_per_tool: Option<usize>,
    /// Seconds one tool call may take [default: 20].
    #[arg(long, env = "KUBEMEDIC_TOOL_TIMEOUT_SECONDS", value_name = "SECONDS")]
    pub tool_timeout_seconds: Option<u64>,
}

/// Investigation settings from flags/env only (commands without a daemon config file).
pub fn investigate_settings(args: &InvestigateArgs) -> Result<InvestigateSettings> {
    merge_investigate(args, None)
}

fn merge_investigate(a: &InvestigateArgs, f: Option<&FileSettings>) -> Result<InvestigateSettings> {
    let f = f.cloned().unwrap_or_default();
    let mode = a.llm.or(f.llm).unwrap_or(LlmMode::Offline);
    let base_url = a
        .llm_base_url
        .clone()
        .or(f.llm_base_url)
        .filter(|u| !u.trim().is_empty());
    let api_key = non_empty(a.llm_api_key.clone().or(f.llm_api_key));
    let model = a
        .llm_model
        .clone()
        .or(f.llm_model)
        .filter(|m| !m.trim().is_empty());
    let selection_model = a
        .llm_selection_model
        .clone()
        .or(f.llm_selection_model)
        .filter(|m| !m.trim().is_empty());
    let positive = |v: Option<u64>,
                    d: u64,
                    flag: &'static str,
                    env: &'static str,
                    key: &'static str|
     -> Result<u64> {
        let v = v.unwrap_or(d);
        if v == 0 {
            return Err(invalid(flag, env, key, "must be greater than 0".into()));
        }
        Ok(v)
    };
    let timeout = positive(
        a.llm_timeout_seconds.or(f.llm_timeout_seconds),
        120,
        "--llm-timeout-seconds",
        "KUBEMEDIC_LLM_TIMEOUT_SECONDS",
        "llm-timeout-seconds",
    )?;
    let token_budget = positive(
        a.llm_token_budget.or(f.llm_token_budget),
        60_000,
        "--llm-token-budget",
        "KUBEMEDIC_LLM_TOKEN_BUDGET",
        "llm-token-budget",
    )?;
    let daily_token_budget = positive(
        a.llm_daily_token_budget.or(f.llm_daily_token_budget),
        2_000_000,
        "--llm-daily-token-budget",
        "KUBEMEDIC_LLM_DAILY_TOKEN_BUDGET",
        "llm-daily-token-budget",
    )?;
    let tool_timeout = positive(
        a.tool_timeout_seconds.or(f.tool_timeout_seconds),
        20,
        "--tool-timeout-seconds",
        "KUBEMEDIC_TOOL_TIMEOUT_SECONDS",
        "tool-timeout-seconds",
    )?;
    let max_turns = positive(
        a.max_turns.or(f.max_turns).map(|v| v as u64),
        12,
        "--max-turns",
        "KUBEMEDIC_MAX_TURNS",
        "max-turns",
    )? as usize;
    let max_tool_calls = positive(
        a.max_tool_calls.or(f.max_tool_calls).map(|v| v as u64),
        30,
        "--max-tool-calls",
        "KUBEMEDIC_MAX_TOOL_CALLS",
        "max-tool-calls",
    )? as usize;
    let max_calls_per_tool = positive(
        a.max_calls_per_tool
            .or(f.max_calls_per_tool)
            .map(|v| v as u64),
        8,
        "--max-calls-per-tool",
        "KUBEMEDIC_MAX_CALLS_PER_TOOL",
        "max-calls-per-tool",
    )? as usize;
    let openai = match mode {
        LlmMode::Offline => None,
        LlmMode::Openai | LlmMode::Azure => {
            let Some(model) = model.clone() else {
                return Err(invalid(
                    "--llm-model",
                    "KUBEMEDIC_LLM_MODEL",
                    "llm-model",
                    format!(
                        "required with --llm {}",
                        if mode == LlmMode::Azure {
                            "azure"
                        } else {
                            "openai"
                        }
                    ),
                ));
            };
            if mode == LlmMode::Azure && base_url.is_none() {
                return Err(invalid(
                    "--llm-base-url",
                    "KUBEMEDIC_LLM_BASE_URL",
                    "llm-base-url",
                    "Azure OpenAI needs the resource endpoint, e.g. https://NAME.openai.azure.com"
                        .into(),
                ));
            }
            if base_url.is_none() && api_key.is_none() {
                return Err(invalid(
                    "--llm-api-key",
                    "KUBEMEDIC_LLM_API_KEY",
                    "llm-api-key",
                    "required for api.openai.com (or give --llm-base-url for a compatible server)"
                        .into(),
                ));
            }
            if let Some(u) = &base_url
                && !(u.starts_with("http://") || u.starts_with("https://"))
            {
                return Err(invalid(
                    "--llm-base-url",
                    "KUBEMEDIC_LLM_BASE_URL",
                    "llm-base-url",
                    format!("`{}` is not an http(s) URL", redact_url(u)),
                ));
            }
            Some(OpenAiSettings {
                provider: if mode == LlmMode::Azure {
                    Provider::Azure
                } else {
                    Provider::OpenAi
                },
                base_url: base_url.clone(),
                api_key: api_key.clone(),
                azure_deployment: a
                    .llm_azure_deployment
                    .clone()
                    .or(f.llm_azure_deployment)
                    .or(Some(model)),
                azure_api_version: a
                    .llm_azure_api_version
                    .clone()
                    .or(f.llm_azure_api_version)
                    .unwrap_or_else(|| "2024-10-21".into()),
                timeout: Duration::from_secs(timeout),
                max_retries: a.llm_max_retries.or(f.llm_max_retries).unwrap_or(4),
                backoff: Duration::from_millis(500),
            })
        }
    };
    let rca_model = model.unwrap_or_else(|| "offline".into());
    Ok(InvestigateSettings {
        openai,
        llm: LlmInvestigatorSettings {
            selection_model: selection_model.unwrap_or_else(|| rca_model.clone()),
            rca_model,
            max_turns,
            max_tool_calls,
            max_calls_per_tool,
            tool_timeout: Duration::from_secs(tool_timeout),
            ..Default::default()
        },
        token_budget,
        daily_token_budget,
        catalog_dir: a.catalog_dir.clone().or(f.catalog_dir),
        playbooks_dir: a.playbooks_dir.clone().or(f.playbooks_dir),
    })
}

/// How kubemedic reaches and reads the cluster.
#[derive(Debug, Clone, Default, Args)]
pub struct ClusterArgs {
    /// Kubeconfig file [default: $KUBECONFIG, ~/.kube/config, or the in-cluster service account].
    #[arg(long, env = "KUBEMEDIC_KUBECONFIG", value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,

    /// Kubeconfig context [default: the current context].
    #[arg(long, env = "KUBEMEDIC_CONTEXT", value_name = "NAME")]
    pub context: Option<String>,

    /// Seconds one Kubernetes API call may take [default: 15].
    #[arg(
        long,
        env = "KUBEMEDIC_CLUSTER_TIMEOUT_SECONDS",
        value_name = "SECONDS"
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
    /// `[TRUNCATED]` [default: 12000].
    #[arg(long, env = "KUBEMEDIC_TOOL_OUTPUT_MAX_CHARS", value_name = "CHARS")]
    pub tool_output_max_chars: Option<usize>,
}

/// The same settings as they may appear in the YAML file. Unknown keys are an error, so a typo
/// is reported instead of silently ignored.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct FileSettings {
    listen: Option<String>,
    data_dir: Option<PathBuf>,
    database_url: Option<Secret>,
    webhook_token: Option<Secret>,
    webhook_basic_auth: Option<Secret>,
    webhook_insecure_no_auth: Option<bool>,
    api_token: Option<Secret>,
    audit_key: Option<Secret>,
    audit_key_file: Option<PathBuf>,
    session_ttl_seconds: Option<u64>,
    auth_proxy_user_header: Option<String>,
    auth_proxy_groups_header: Option<String>,
    auth_proxy_roles: Option<String>,
    auth_proxy_trusted_peers: Option<String>,
    max_body_bytes: Option<usize>,
    http_header_timeout_seconds: Option<u64>,
    http_body_timeout_seconds: Option<u64>,
    http_write_timeout_seconds: Option<u64>,
    http_max_connections: Option<usize>,
    workers: Option<usize>,
    lease_seconds: Option<u64>,
    max_wait_seconds: Option<u64>,
    investigation_timeout_seconds: Option<u64>,
    approval_timeout_seconds: Option<u64>,
    execution_timeout_seconds: Option<u64>,
    verification_timeout_seconds: Option<u64>,
    request_timeout_seconds: Option<u64>,
    dry_run: Option<bool>,
    verification_window_seconds: Option<u64>,
    effectiveness_threshold: Option<f64>,
    alertmanager_url: Option<Secret>,
    prometheus_url: Option<Secret>,
    max_concurrent_executions: Option<usize>,
    max_concurrent_executions_per_namespace: Option<usize>,
    ineffective_chain_threshold: Option<usize>,
    recurrence_threshold: Option<usize>,
    guardrail_lookback_seconds: Option<u64>,
    cooldown_seconds: Option<u64>,
    log_format: Option<LogFormat>,
    log_level: Option<String>,
    kubeconfig: Option<PathBuf>,
    context: Option<String>,
    cluster_timeout_seconds: Option<u64>,
    blocked_resources: Option<Vec<String>>,
    blocked_namespaces: Option<Vec<String>>,
    tool_output_max_chars: Option<usize>,
    llm: Option<LlmMode>,
    llm_base_url: Option<String>,
    llm_api_key: Option<Secret>,
    llm_model: Option<String>,
    llm_selection_model: Option<String>,
    llm_azure_deployment: Option<String>,
    llm_azure_api_version: Option<String>,
    llm_timeout_seconds: Option<u64>,
    llm_max_retries: Option<u32>,
    llm_token_budget: Option<u64>,
    llm_daily_token_budget: Option<u64>,
    catalog_dir: Option<PathBuf>,
    playbooks_dir: Option<PathBuf>,
    max_turns: Option<usize>,
    max_tool_calls: Option<usize>,
    max_calls_per_tool: Option<usize>,
    tool_timeout_seconds: Option<u64>,
    policy_dir: Option<PathBuf>,
    confidence_threshold: Option<f64>,
    default_environment: Option<String>,
    policy_eval_timeout_ms: Option<u64>,
    public_url: Option<String>,
    approvers: Option<Vec<String>>,
    high_risk_score: Option<i64>,
    link_signing_key: Option<Secret>,
    smtp_url: Option<String>,
    smtp_username: Option<String>,
    smtp_password: Option<Secret>,
    smtp_ca_file: Option<PathBuf>,
    email_from: Option<String>,
    slack_bot_token: Option<Secret>,
    slack_channel: Option<String>,
    slack_webhook_url: Option<Secret>,
    slack_signing_secret: Option<Secret>,
    slack_api_url: Option<String>,
    slack_approvers: Option<Vec<String>>,
}

/// Cluster settings from flags/env only (commands without a daemon config file).
pub fn cluster_settings(args: &ClusterArgs) -> Result<ClusterSettings> {
    merge_cluster(args, None)
}

fn merge_cluster(args: &ClusterArgs, file: Option<&FileSettings>) -> Result<ClusterSettings> {
    let timeout = args
        .cluster_timeout_seconds
        .or(file.and_then(|f| f.cluster_timeout_seconds))
        .unwrap_or(15);
    if !(1..=600).contains(&timeout) {
        return Err(invalid(
            "--cluster-timeout-seconds",
            "KUBEMEDIC_CLUSTER_TIMEOUT_SECONDS",
            "cluster-timeout-seconds",
            format!("{timeout} is outside 1..=600"),
        ));
    }
    let mut blocked_resources: Vec<String> = args
        .blocked_resources
        .clone()
        .or(file.and_then(|f| f.blocked_resources.clone()))
        .unwrap_or_default()
        .into_iter()
        .map(|r| r.trim().to_ascii_lowercase())
        .filter(|r| !r.is_empty())
        .collect();
    // Secrets are never read, whatever the configuration says.
    if !blocked_resources.iter().any(|r| r == "secrets") {
        blocked_resources.push("secrets".into());
    }
    let blocked_namespaces: Vec<String> = args
        .blocked_namespaces
        .clone()
        .or(file.and_then(|f| f.blocked_namespaces.clone()))
        .unwrap_or_default()
        .into_iter()
        .map(|n| n.trim().to_owned())
        .filter(|n| !n.is_empty())
        .collect();
    let max_chars = args
        .tool_output_max_chars
        .or(file.and_then(|f| f.tool_output_max_chars))
        .unwrap_or(12_000);
    if !(500..=1_000_000).contains(&max_chars) {
        return Err(invalid(
            "--tool-output-max-chars",
            "KUBEMEDIC_TOOL_OUTPUT_MAX_CHARS",
            "tool-output-max-chars",
            format!("{max_chars} is outside 500..=1000000"),
        ));
    }
    Ok(ClusterSettings {
        kubeconfig: args
            .kubeconfig
            .clone()
            .or(file.and_then(|f| f.kubeconfig.clone())),
        context: args
            .context
            .clone()
            .or(file.and_then(|f| f.context.clone())),
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

/// Execution and verification settings from [`ExecuteArgs`] over the file.
fn merge_execute(a: &ExecuteArgs, f: &FileSettings) -> Result<(ExecuteSettings, VerifySettings)> {
    let window = a
        .verification_window_seconds
        .or(f.verification_window_seconds)
        .unwrap_or(300);
    if window > 86_400 {
        return Err(invalid(
            "--verification-window-seconds",
            "KUBEMEDIC_VERIFICATION_WINDOW_SECONDS",
            "verification-window-seconds",
            format!("{window} is outside 0..=86400"),
        ));
    }
    let threshold = a
        .effectiveness_threshold
        .or(f.effectiveness_threshold)
        .unwrap_or(0.7);
    if !(0.0..=1.0).contains(&threshold) {
        return Err(invalid(
            "--effectiveness-threshold",
            "KUBEMEDIC_EFFECTIVENESS_THRESHOLD",
            "effectiveness-threshold",
            format!("{threshold} is outside 0..=1"),
        ));
    }
    let endpoint = |raw: Option<Secret>, flag, env, key| -> Result<Option<Endpoint>> {
        non_empty(raw)
            .map(|raw| {
                Endpoint::parse(raw.expose()).map_err(|e| invalid(flag, env, key, e.to_string()))
            })
            .transpose()
    };
    let alertmanager = endpoint(
        a.alertmanager_url.clone().or(f.alertmanager_url.clone()),
        "--alertmanager-url",
        "KUBEMEDIC_ALERTMANAGER_URL",
        "alertmanager-url",
    )?;
    let prometheus = endpoint(
        a.prometheus_url.clone().or(f.prometheus_url.clone()),
        "--prometheus-url",
        "KUBEMEDIC_PROMETHEUS_URL",
        "prometheus-url",
    )?;
    let positive = |v: usize, flag, env, key| {
        if v == 0 {
            Err(invalid(flag, env, key, "must be at least 1".into()))
        } else {
            Ok(v)
        }
    };
    let max_concurrent = positive(
        a.max_concurrent_executions
            .or(f.max_concurrent_executions)
            .unwrap_or(10),
        "--max-concurrent-executions",
        "KUBEMEDIC_MAX_CONCURRENT_EXECUTIONS",
        "max-concurrent-executions",
    )?;
    let per_namespace = positive(
        a.max_concurrent_executions_per_namespace
            .or(f.max_concurrent_executions_per_namespace)
            .unwrap_or(3),
        "--max-concurrent-executions-per-namespace",
        "KUBEMEDIC_MAX_CONCURRENT_EXECUTIONS_PER_NAMESPACE",
        "max-concurrent-executions-per-namespace",
    )?;
    let defaults = Guardrails::default();
    let lookback = a
        .guardrail_lookback_seconds
        .or(f.guardrail_lookback_seconds)
        .unwrap_or(14_400);
    if !(60..=7 * 86_400).contains(&lookback) {
        return Err(invalid(
            "--guardrail-lookback-seconds",
            "KUBEMEDIC_GUARDRAIL_LOOKBACK_SECONDS",
            "guardrail-lookback-seconds",
            format!("{lookback} is outside 60..=604800"),
        ));
    }
    let cooldown = a.cooldown_seconds.or(f.cooldown_seconds).unwrap_or(300);
    if cooldown > 86_400 {
        return Err(invalid(
            "--cooldown-seconds",
            "KUBEMEDIC_COOLDOWN_SECONDS",
            "cooldown-seconds",
            format!("{cooldown} is outside 0..=86400"),
        ));
    }
    let guardrails = Guardrails {
        ineffective_chain: a
            .ineffective_chain_threshold
            .or(f.ineffective_chain_threshold)
            .unwrap_or(defaults.ineffective_chain),
        recurrence: a
            .recurrence_threshold
            .or(f.recurrence_threshold)
            .unwrap_or(defaults.recurrence),
        lookback: chrono::Duration::seconds(lookback as i64),
        cooldown: chrono::Duration::seconds(cooldown as i64),
        effectiveness_threshold: threshold,
        ..defaults
    };
    Ok((
        ExecuteSettings {
            dry_run: a.dry_run || f.dry_run.unwrap_or(false),
            max_concurrent,
            max_concurrent_per_namespace: per_namespace,
            guardrails,
            ..ExecuteSettings::default()
        },
        VerifySettings {
            window: chrono::Duration::seconds(window as i64),
            effectiveness_threshold: threshold,
            alertmanager,
            prometheus,
        },
    ))
}

/// The policy, gate and enrichment settings of [`GateArgs`].
#[derive(Debug, Clone, PartialEq)]
pub struct GateParts {
    pub policy: PolicySettings,
    pub gate: GateSettings,
    pub enrich: EnrichSettings,
}

/// Policy, gate and enrichment settings from flags/env only (commands without a daemon config
/// file).
pub fn gate_settings(args: &GateArgs) -> Result<GateParts> {
    merge_gate(args, None)
}

fn merge_gate(args: &GateArgs, file: Option<&FileSettings>) -> Result<GateParts> {
    let configured = args
        .policy_dir
        .clone()
        .or(file.and_then(|f| f.policy_dir.clone()));
    let policy_dir_configured = configured.is_some();
    let policy_dir = configured.unwrap_or_else(|| PathBuf::from("policies"));
    if policy_dir.as_os_str().is_empty() {
        return Err(invalid(
            "--policy-dir",
            "KUBEMEDIC_POLICY_DIR",
            "policy-dir",
            "must not be empty".into(),
        ));
    }
    let confidence_threshold = args
        .confidence_threshold
        .or(file.and_then(|f| f.confidence_threshold))
        .unwrap_or(DEFAULT_CONFIDENCE_THRESHOLD);
    if !(0.0..=1.0).contains(&confidence_threshold) {
        return Err(invalid(
            "--confidence-threshold",
            "KUBEMEDIC_CONFIDENCE_THRESHOLD",
            "confidence-threshold",
            format!("{confidence_threshold} is outside 0..=1"),
        ));
    }
    let default_environment = args
        .default_environment
        .clone()
        .or(file.and_then(|f| f.default_environment.clone()))
        .unwrap_or_else(|| "production".to_owned());
    let default_environment = default_environment.trim().to_owned();
    let label_value = default_environment.len() <= 63
        && default_environment
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if default_environment.is_empty() || !label_value {
        return Err(invalid(
            "--default-environment",
            "KUBEMEDIC_DEFAULT_ENVIRONMENT",
            "default-environment",
            format!(
                "`{default_environment}` is not a label value like `production` (1-63 \
                     characters: letters, digits, `-`, `_`, `.`)"
            ),
        ));
    }
    let timeout_ms = args
        .policy_eval_timeout_ms
        .or(file.and_then(|f| f.policy_eval_timeout_ms))
        .unwrap_or(100);
    if !(1..=10_000).contains(&timeout_ms) {
        return Err(invalid(
            "--policy-eval-timeout-ms",
            "KUBEMEDIC_POLICY_EVAL_TIMEOUT_MS",
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

/// Where the audit trail's signing key comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuditKeySource {
    /// Given as hex (`--audit-key`).
    Given(Secret),
    /// A file, created with a fresh key when missing.
    File(PathBuf),
}

impl AuditKeySource {
    pub fn load(&self) -> std::result::Result<AuditKey, KeyError> {
        match self {
            AuditKeySource::Given(hex) => AuditKey::from_hex(hex.expose()),
            AuditKeySource::File(path) => AuditKey::load_or_create(path),
        }
    }
}

/// The validated, typed configuration.
#[derive(Debug, Clone)]
pub struct Settings {
    pub listen: SocketAddr,
    pub data_dir: PathBuf,
    pub database: DatabaseUrl,
    pub webhook_auth: WebhookAuth,
    pub api_token: Option<Secret>,
    /// Where the audit trail's signing key comes from.
    pub audit_key: AuditKeySource,
    /// How long a dashboard login lasts.
    pub session_ttl: Duration,
    /// The trusted SSO auth proxy, when configured.
    pub auth_proxy: Option<crate::web::auth::ProxyAuth>,
    pub max_body_bytes: usize,
    pub http: HttpLimits,
    pub workers: usize,
    pub lease: Duration,
    pub max_wait: Duration,
    pub log_format: LogFormat,
    pub log_level: String,
    pub cluster: ClusterSettings,
    pub investigate: InvestigateSettings,
    pub policy: PolicySettings,
    pub gate: GateSettings,
    pub enrich: EnrichSettings,
    pub execute: ExecuteSettings,
    pub verify: VerifySettings,
    pub timeouts: PhaseTimeouts,
    pub approvals: ApprovalConfig,
}

/// Approvals as configured: the stage's settings, the link key, and the channels.
#[derive(Debug, Clone, Default)]
pub struct ApprovalConfig {
    pub settings: ApprovalSettings,
    pub link_signing_key: Option<Secret>,
    pub email: Option<EmailSettings>,
    pub slack: Option<SlackSettings>,
    /// Verifies `POST /api/v1/slack/interactions`.
    pub slack_signing_secret: Option<Secret>,
}

impl ApprovalConfig {
    /// Somebody can decide: approvals are on.
    pub fn enabled(&self) -> bool {
        !self.settings.approvers.is_empty() || !self.settings.slack_approvers.is_empty()
    }
}

/// A notifier setting refused, as the flag / variable / key it came from.
fn notify_invalid(e: SettingsError) -> ConfigError {
    let (flag, env, key) = match e.setting {
        "--smtp-url" => ("--smtp-url", "KUBEMEDIC_SMTP_URL", "smtp-url"),
        "--smtp-username" => (
            "--smtp-username",
            "KUBEMEDIC_SMTP_USERNAME",
            "smtp-username",
        ),
        "--smtp-password" => (
            "--smtp-password",
            "KUBEMEDIC_SMTP_PASSWORD",
            "smtp-password",
        ),
        "--smtp-ca-file" => ("--smtp-ca-file", "KUBEMEDIC_SMTP_CA_FILE", "smtp-ca-file"),
        "--email-from" => ("--email-from", "KUBEMEDIC_EMAIL_FROM", "email-from"),
        "--approvers" => ("--approvers", "KUBEMEDIC_APPROVERS", "approvers"),
        "--slack-bot-token" => (
            "--slack-bot-token",
            "KUBEMEDIC_SLACK_BOT_TOKEN",
            "slack-bot-token",
        ),
        "--slack-channel" => (
            "--slack-channel",
            "KUBEMEDIC_SLACK_CHANNEL",
            "slack-channel",
        ),
        "--slack-webhook-url" => (
            "--slack-webhook-url",
            "KUBEMEDIC_SLACK_WEBHOOK_URL",
            "slack-webhook-url",
        ),
        "--slack-signing-secret" => (
            "--slack-signing-secret",
            "KUBEMEDIC_SLACK_SIGNING_SECRET",
            "slack-signing-secret",
        ),
        "--slack-api-url" => (
            "--slack-api-url",
            "KUBEMEDIC_SLACK_API_URL",
            "slack-api-url",
        ),
        "--slack-approvers" => (
            "--slack-approvers",
            "KUBEMEDIC_SLACK_APPROVERS",
            "slack-approvers",
        ),
        other => (other, "KUBEMEDIC_*", "-"),
    };
    invalid(flag, env, key, e.message)
}

fn merge_approvals(
    a: &ApprovalArgs,
    f: &FileSettings,
    timeout: Option<Duration>,
) -> Result<ApprovalConfig> {
    let text = |v: Option<String>| v.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty());
    let list = |v: Option<Vec<String>>| -> Vec<String> {
        v.unwrap_or_default()
            .into_iter()
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect()
    };
    let approvers = list(a.approvers.clone().or(f.approvers.clone()));
    for addr in &approvers {
        let ok = addr.split_once('@').is_some_and(|(l, d)| {
            !l.is_empty() && d.contains('.') && !addr.contains(char::is_whitespace)
        });
        if !ok {
            return Err(invalid(
                "--approvers",
                "KUBEMEDIC_APPROVERS",
                "approvers",
                format!("`{addr}` is not an e-mail address"),
            ));
        }
    }
    let slack_approvers = list(a.slack_approvers.clone().or(f.slack_approvers.clone()));
    let high_risk_score = a.high_risk_score.or(f.high_risk_score).unwrap_or(80);
    if !(0..=100).contains(&high_risk_score) {
        return Err(invalid(
            "--high-risk-score",
            "KUBEMEDIC_HIGH_RISK_SCORE",
            "high-risk-score",
            format!("{high_risk_score} is outside 0..=100"),
        ));
    }
    let public_url = text(a.public_url.clone().or(f.public_url.clone()));
    if let Some(u) = &public_url {
        let ok = (u.starts_with("https://") || u.starts_with("http://"))
            && !u.contains(char::is_whitespace)
            && !u.contains('?')
            && !u.contains('#');
        if !ok {
            return Err(invalid(
                "--public-url",
                "KUBEMEDIC_PUBLIC_URL",
                "public-url",
                format!("`{u}` is not an http(s) base URL (no query, no fragment)"),
            ));
        }
    }
    let settings = ApprovalSettings {
        timeout,
        approvers,
        slack_approvers,
        high_risk_score,
        public_url: public_url.map(|u| u.trim_end_matches('/').to_owned()),
    };
    let link_signing_key = non_empty(a.link_signing_key.clone().or(f.link_signing_key.clone()));
    if let Some(k) = &link_signing_key
        && k.expose().len() < 32
    {
        return Err(invalid(
            "--link-signing-key",
            "KUBEMEDIC_LINK_SIGNING_KEY",
            "link-signing-key",
            "shorter than 32 characters; use a long random value".into(),
        ));
    }
    let email = match text(a.smtp_url.clone().or(f.smtp_url.clone())) {
        None => None,
        Some(smtp_url) => {
            let e = EmailSettings {
                smtp_url,
                username: text(a.smtp_username.clone().or(f.smtp_username.clone())),
                password: non_empty(a.smtp_password.clone().or(f.smtp_password.clone())),
                from: text(a.email_from.clone().or(f.email_from.clone())).unwrap_or_default(),
                approvers: settings.approvers.clone(),
                timeout: Duration::from_secs(10),
                ca_file: a.smtp_ca_file.clone().or(f.smtp_ca_file.clone()),
            };
            e.validate().map_err(notify_invalid)?;
            Some(e)
        }
    };
    let slack_signing_secret = non_empty(
        a.slack_signing_secret
            .clone()
            .or(f.slack_signing_secret.clone()),
    );
    let bot_token = non_empty(a.slack_bot_token.clone().or(f.slack_bot_token.clone()));
    let webhook_url = non_empty(a.slack_webhook_url.clone().or(f.slack_webhook_url.clone()));
    let slack = if bot_token.is_some() || webhook_url.is_some() {
        let mut sl = SlackSettings {
            bot_token,
            channel: text(a.slack_channel.clone().or(f.slack_channel.clone())),
            webhook_url,
            signing_secret: slack_signing_secret.clone(),
            approvers: settings.slack_approvers.clone(),
            ..SlackSettings::default()
        };
        if let Some(api) = text(a.slack_api_url.clone().or(f.slack_api_url.clone())) {
            sl.api_url = api;
        }
        sl.validate().map_err(notify_invalid)?;
        Some(sl)
    } else {
        None
    };
    let config = ApprovalConfig {
        settings,
        link_signing_key,
        email,
        slack,
        slack_signing_secret,
    };
    let notifying = config.email.is_some() || config.slack.is_some();
    if notifying && config.settings.public_url.is_none() {
        return Err(invalid(
            "--public-url",
            "KUBEMEDIC_PUBLIC_URL",
            "public-url",
            "approval notifications are configured (e-mail or Slack) but their links need the \
             address approvers reach kubemedic at"
                .into(),
        ));
    }
    if notifying && !config.enabled() {
        return Err(invalid(
            "--approvers",
            "KUBEMEDIC_APPROVERS",
            "approvers",
            "approval notifications are configured but nobody may approve: set --approvers \
             and/or --slack-approvers"
                .into(),
        ));
    }
    let slack_buttons = config
        .slack
        .as_ref()
        .is_some_and(|s| s.bot_token.is_some() && s.signing_secret.is_some());
    if config.slack.is_some() && !slack_buttons && config.settings.approvers.is_empty() {
        return Err(invalid(
            "--approvers",
            "KUBEMEDIC_APPROVERS",
            "approvers",
            "Slack without interactive buttons (a webhook, or a bot token without \
             --slack-signing-secret) only informs: set --approvers so somebody can decide"
                .into(),
        ));
    }
    if config.slack.as_ref().is_some_and(|s| s.bot_token.is_some())
        && config.settings.slack_approvers.is_empty()
    {
        return Err(invalid(
            "--slack-approvers",
            "KUBEMEDIC_SLACK_APPROVERS",
            "slack-approvers",
            "a Slack bot token posts Approve / Deny buttons, but no Slack user may press them"
                .into(),
        ));
    }
    Ok(config)
}

fn invalid(
    flag: &'static str,
    env: &'static str,
    key: &'static str,
    message: String,
) -> ConfigError {
    ConfigError::Invalid {
        flag,
        env,
        key,
        message,
    }
}

impl Settings {
    /// Merge flags/env (already in `args`) over the config file over defaults, and validate.
    pub fn load(args: &DaemonArgs) -> Result<Self> {
        let file = match &args.config {
            Some(path) => read_file(path)?,
            None => FileSettings::default(),
        };
        let cluster = merge_cluster(&args.cluster, Some(&file))?;
        let investigate = merge_investigate(&args.investigate, Some(&file))?;
        let GateParts {
            policy,
            gate,
            enrich,
        } = merge_gate(&args.gate, Some(&file))?;
        let (execute, verify) = merge_execute(&args.execute, &file)?;
        let http = http_limits(args, &file)?;
        let limit = |flag: Option<u64>, key: Option<u64>, default: u64| match flag
            .or(key)
            .unwrap_or(default)
        {
            0 => None,
            s => Some(Duration::from_secs(s)),
        };
        let approvals = merge_approvals(
            &args.approvals,
            &file,
            limit(
                args.approval_timeout_seconds,
                file.approval_timeout_seconds,
                900,
            ),
        )?;
        let timeouts = PhaseTimeouts {
            investigating: limit(
                args.investigation_timeout_seconds,
                file.investigation_timeout_seconds,
                600,
            ),
            awaiting_approval: limit(
                args.approval_timeout_seconds,
                file.approval_timeout_seconds,
                900,
            ),
            executing: limit(
                args.execution_timeout_seconds,
                file.execution_timeout_seconds,
                1800,
            ),
            verifying: limit(
                args.verification_timeout_seconds,
                file.verification_timeout_seconds,
                1800,
            ),
            overall: limit(
                args.request_timeout_seconds,
                file.request_timeout_seconds,
                3600,
            ),
        };
        // A window the verification timeout cuts off would end every remediation unassessed.
        if let (Some(limit), Ok(window)) = (timeouts.verifying, verify.window.to_std())
            && window >= limit
        {
            return Err(invalid(
                "--verification-window-seconds",
                "KUBEMEDIC_VERIFICATION_WINDOW_SECONDS",
                "verification-window-seconds",
                format!(
                    "{} s is not shorter than --verification-timeout-seconds ({} s)",
                    window.as_secs(),
                    limit.as_secs()
                ),
            ));
        }
        let listen_raw = args
            .listen
            .clone()
            .or(file.listen)
            .unwrap_or_else(|| "127.0.0.1:8080".to_owned());
        let listen: SocketAddr = listen_raw.parse().map_err(|e| {
            invalid(
                "--listen",
                "KUBEMEDIC_LISTEN",
                "listen",
                format!("`{listen_raw}` is not an address like 127.0.0.1:8080 ({e})"),
            )
        })?;
        let data_dir = args
            .data_dir
            .clone()
            .or(file.data_dir)
            .unwrap_or_else(|| PathBuf::from("kubemedic-data"));
        let database = parse_database_url(
            args.database_url.clone().or(file.database_url).as_ref(),
            &data_dir,
        )?;

        let basic = match args.webhook_basic_auth.clone().or(file.webhook_basic_auth) {
            None => None,
            Some(raw) => match raw.expose().split_once(':') {
                Some((user, pass)) if !user.is_empty() && !pass.is_empty() => {
                    Some((user.to_owned(), Secret::new(pass)))
                }
                _ => {
                    return Err(invalid(
                        "--webhook-basic-auth",
                        "KUBEMEDIC_WEBHOOK_BASIC_AUTH",
                        "webhook-basic-auth",
                        "expected USER:PASS with both parts non-empty".into(),
                    ));
                }
            },
        };
        let token = non_empty(args.webhook_token.clone().or(file.webhook_token));
        let insecure_no_auth =
            args.webhook_insecure_no_auth || file.webhook_insecure_no_auth.unwrap_or(false);
        let api_token = non_empty(args.api_token.clone().or(file.api_token));
        let audit_key = match non_empty(args.audit_key.clone().or(file.audit_key)) {
            Some(hex) => AuditKeySource::Given(hex),
            None => AuditKeySource::File(
                args.audit_key_file
                    .clone()
                    .or(file.audit_key_file)
                    .unwrap_or_else(|| data_dir.join("audit.key")),
            ),
        };
        let session_ttl_seconds = args
            .session_ttl_seconds
            .or(file.session_ttl_seconds)
            .unwrap_or(12 * 3600);
        let auth_proxy = auth_proxy(
            args.auth_proxy_user_header
                .clone()
                .or(file.auth_proxy_user_header),
            args.auth_proxy_groups_header
                .clone()
                .or(file.auth_proxy_groups_header),
            args.auth_proxy_roles.clone().or(file.auth_proxy_roles),
            args.auth_proxy_trusted_peers
                .clone()
                .or(file.auth_proxy_trusted_peers),
        )?;
        if !(60..=30 * 24 * 3600).contains(&session_ttl_seconds) {
            return Err(invalid(
                "--session-ttl-seconds",
                "KUBEMEDIC_SESSION_TTL_SECONDS",
                "session-ttl-seconds",
                format!("{session_ttl_seconds} is outside 60..=2592000 (a minute to 30 days)"),
            ));
        }

        let max_body_bytes = args
            .max_body_bytes
            .or(file.max_body_bytes)
            .unwrap_or(1024 * 1024);
        if !(1024..=64 * 1024 * 1024).contains(&max_body_bytes) {
            return Err(invalid(
                "--max-body-bytes",
                "KUBEMEDIC_MAX_BODY_BYTES",
                "max-body-bytes",
                format!("{max_body_bytes} is outside 1024..=67108864"),
            ));
        }
        let workers = args.workers.or(file.workers).unwrap_or(4);
        if !(1..=256).contains(&workers) {
            return Err(invalid(
                "--workers",
                "KUBEMEDIC_WORKERS",
                "workers",
                format!("{workers} is outside 1..=256"),
            ));
        }
        let lease_seconds = args.lease_seconds.or(file.lease_seconds).unwrap_or(30);
        if !(1..=3600).contains(&lease_seconds) {
            return Err(invalid(
                "--lease-seconds",
                "KUBEMEDIC_LEASE_SECONDS",
                "lease-seconds",
                format!("{lease_seconds} is outside 1..=3600"),
            ));
        }
        let max_wait_seconds = args
            .max_wait_seconds
            .or(file.max_wait_seconds)
            .unwrap_or(900);
        let log_format = args
            .log_format
            .or(file.log_format)
            .unwrap_or(LogFormat::Auto);
        let log_level = args
            .log_level
            .clone()
            .or(file.log_level)
            .unwrap_or_else(|| "info".to_owned());
        if let Err(e) = tracing_subscriber::EnvFilter::try_new(&log_level) {
            return Err(invalid(
                "--log-level",
                "KUBEMEDIC_LOG_LEVEL",
                "log-level",
                format!("`{log_level}` is not a valid filter: {e}"),
            ));
        }

        Ok(Settings {
            listen,
            data_dir,
            database,
            webhook_auth: WebhookAuth {
                token,
                basic,
                insecure_no_auth,
            },
            api_token,
            audit_key,
            session_ttl: Duration::from_secs(session_ttl_seconds),
            auth_proxy,
            max_body_bytes,
            http,
            workers,
            lease: Duration::from_secs(lease_seconds),
            max_wait: Duration::from_secs(max_wait_seconds),
            log_format,
            log_level,
            cluster,
            investigate,
            policy,
            gate,
            enrich,
            execute,
            verify,
            approvals,
            timeouts,
        })
    }

    /// Checks that only make sense for a long-running server (not for `migrate`).
    pub fn validate_for_serve(&self) -> Result<()> {
        let auth = &self.webhook_auth;
        if auth.token.is_none() && auth.basic.is_none() && !auth.insecure_no_auth {
            return Err(invalid(
                "--webhook-token",
                "KUBEMEDIC_WEBHOOK_TOKEN",
                "webhook-token",
                "no webhook authentication configured: set --webhook-token and/or \
                 --webhook-basic-auth (or --webhook-insecure-no-auth to accept anyone)"
                    .into(),
            ));
        }
        Ok(())
    }
}

/// The HTTP server's limits. None can be turned off: 0 is refused like an absurdly large value,
/// because a server without them holds connections forever.
fn http_limits(args: &DaemonArgs, file: &FileSettings) -> Result<HttpLimits> {
    let default = HttpLimits::default();
    let seconds = |value: Option<u64>,
                   default: Duration,
                   max: u64,
                   (flag, env, key): (&'static str, &'static str, &'static str)|
     -> Result<Duration> {
        match value {
            None => Ok(default),
            Some(s) if (1..=max).contains(&s) => Ok(Duration::from_secs(s)),
            Some(s) => Err(invalid(flag, env, key, format!("{s} is outside 1..={max}"))),
        }
    };
    let header_timeout = seconds(
        args.http_header_timeout_seconds
            .or(file.http_header_timeout_seconds),
        default.header_timeout,
        300,
        (
            "--http-header-timeout-seconds",
            "KUBEMEDIC_HTTP_HEADER_TIMEOUT_SECONDS",
            "http-header-timeout-seconds",
        ),
    )?;
    let body_timeout = seconds(
        args.http_body_timeout_seconds
            .or(file.http_body_timeout_seconds),
        default.body_timeout,
        3600,
        (
            "--http-body-timeout-seconds",
            "KUBEMEDIC_HTTP_BODY_TIMEOUT_SECONDS",
            "http-body-timeout-seconds",
        ),
    )?;
    let write_timeout = seconds(
        args.http_write_timeout_seconds
            .or(file.http_write_timeout_seconds),
        default.write_timeout,
        3600,
        (
            "--http-write-timeout-seconds",
            "KUBEMEDIC_HTTP_WRITE_TIMEOUT_SECONDS",
            "http-write-timeout-seconds",
        ),
    )?;
    let max_connections = args
        .http_max_connections
        .or(file.http_max_connections)
        .unwrap_or(default.max_connections);
    if !(1..=65536).contains(&max_connections) {
        return Err(invalid(
            "--http-max-connections",
            "KUBEMEDIC_HTTP_MAX_CONNECTIONS",
            "http-max-connections",
            format!("{max_connections} is outside 1..=65536"),
        ));
    }
    Ok(HttpLimits {
        header_timeout,
        body_timeout,
        write_timeout,
        max_connections,
    })
}

/// An empty value (an unset key of a Kubernetes Secret, say) means "not configured".
/// The trusted auth proxy: all of user header, roles and peers, or none of them.
fn auth_proxy(
    user: Option<String>,
    groups: Option<String>,
    roles: Option<String>,
    peers: Option<String>,
) -> Result<Option<crate::web::auth::ProxyAuth>> {
    let bad = |flag: &'static str, env: &'static str, key: &'static str, m: String| {
        invalid(flag, env, key, m)
    };
    let given = |v: Option<String>| v.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty());
    let (user, groups, roles, peers) = (given(user), given(groups), given(roles), given(peers));
    let Some(user_header) = user else {
        if roles.is_some() || peers.is_some() {
            return Err(bad(
                "--auth-proxy-user-header",
                "KUBEMEDIC_AUTH_PROXY_USER_HEADER",
                "auth-proxy-user-header",
                "the auth proxy's roles or peers are set but not its user header".into(),
            ));
        }
        return Ok(None);
    };
    let mut group_roles = Vec::new();
    for pair in roles
        .as_deref()
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        let parsed = pair
            .split_once('=')
            .and_then(|(g, r)| Some((g.trim().to_owned(), crate::domain::Role::parse(r.trim())?)))
            .filter(|(g, _)| !g.is_empty());
        match parsed {
            Some(gr) => group_roles.push(gr),
            None => {
                return Err(bad(
                    "--auth-proxy-roles",
                    "KUBEMEDIC_AUTH_PROXY_ROLES",
                    "auth-proxy-roles",
                    format!("`{pair}` is not GROUP=ROLE with ROLE one of viewer, approver, admin"),
                ));
            }
        }
    }
    if group_roles.is_empty() {
        return Err(bad(
            "--auth-proxy-roles",
            "KUBEMEDIC_AUTH_PROXY_ROLES",
            "auth-proxy-roles",
            "the auth proxy needs at least one GROUP=ROLE".into(),
        ));
    }
    let mut trusted = Vec::new();
    for raw in peers
        .as_deref()
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        match raw.parse::<std::net::IpAddr>() {
            Ok(ip) => trusted.push(ip),
            Err(_) => {
                return Err(bad(
                    "--auth-proxy-trusted-peers",
                    "KUBEMEDIC_AUTH_PROXY_TRUSTED_PEERS",
                    "auth-proxy-trusted-peers",
                    format!("`{raw}` is not an IP address"),
                ));
            }
        }
    }
    if trusted.is_empty() {
        return Err(bad(
            "--auth-proxy-trusted-peers",
            "KUBEMEDIC_AUTH_PROXY_TRUSTED_PEERS",
            "auth-proxy-trusted-peers",
            "the auth proxy needs the addresses it connects from: anyone else could send the header".into(),
        ));
    }
    Ok(Some(crate::web::auth::ProxyAuth {
        user_header: user_header.to_ascii_lowercase(),
        groups_header: groups
            .unwrap_or_else(|| "X-Forwarded-Groups".into())
            .to_ascii_lowercase(),
        group_roles,
        trusted,
    }))
}

fn non_empty(value: Option<Secret>) -> Option<Secret> {
    value.filter(|secret| !secret.expose().trim().is_empty())
}

fn read_file(path: &Path) -> Result<FileSettings> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_owned(),
        source,
    })?;
    if text.trim().is_empty() {
        return Ok(FileSettings::default());
    }
    serde_saphyr::from_str(&text).map_err(|e| ConfigError::Parse {
        path: path.to_owned(),
        message: e.to_string(),
    })
}

fn parse_database_url(raw: Option<&Secret>, data_dir: &Path) -> Result<DatabaseUrl> {
    let Some(raw) = raw.filter(|r| !r.expose().trim().is_empty()) else {
        return Ok(DatabaseUrl::Sqlite(data_dir.join("kubemedic.db")));
    };
    let url = raw.expose();
    let bad = |message: String| {
        invalid(
            "--database-url",
            "KUBEMEDIC_DATABASE_URL",
            "database-url",
            message,
        )
    };
    if let Some(path) = url
        .strip_prefix("sqlite://")
        .or(url.strip_prefix("sqlite:"))
    {
        let path = path.split_once('?').map_or(path, |(p, _)| p);
        if path.is_empty() || path == ":memory:" {
            return Err(bad(
                "an SQLite database needs a file path (sqlite://PATH); an in-memory database \
                 would lose acknowledged alerts on restart"
                    .into(),
            ));
        }
        return Ok(DatabaseUrl::Sqlite(PathBuf::from(path)));
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Ok(DatabaseUrl::Postgres(raw.clone()));
    }
    Err(bad(format!(
        "`{}` is neither sqlite://PATH nor postgres://…",
        redact_url(url)
    )))
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
        let args = DaemonArgs {
            listen: Some("localhost".into()),
            ..Default::default()
        };
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
        let args = DaemonArgs {
            config: Some(path.clone()),
            workers: Some(2),
            ..Default::default()
        };
        let s = Settings::load(&args).unwrap();
        assert_eq!(s.listen.to_string(), "0.0.0.0:9000");
        assert_eq!(s.workers, 2);

        std::fs::write(&path, "listne: 0.0.0.0:9000\n").unwrap();
        let err = Settings::load(&args).unwrap_err().to_string();
        assert!(err.contains("listne"), "unknown key is named: {err}");
    }

    #[test]
    fn secrets_do_not_print() {
        let args = DaemonArgs {
            webhook_token: Some(Secret::new("hunter2")),
            database_url: Some(Secret::new("postgres://u:pw@db:5432/km")),
            ..Default::default()
        };
        let s = Settings::load(&args).unwrap();
        let dump = format!("{s:?} {}", s.database.redacted());
        assert!(!dump.contains("hunter2") && !dump.contains("pw@"), "{dump}");
        assert!(dump.contains("postgres://db:5432/km"));
    }

    #[test]
    fn a_verification_window_the_timeout_would_cut_off_is_refused() {
        let mut args = DaemonArgs::default();
        args.execute.verification_window_seconds = Some(1800);
        let err = Settings::load(&args).unwrap_err().to_string();
        assert!(
            err.contains("--verification-window-seconds")
                && err.contains("--verification-timeout-seconds"),
            "{err}"
        );
        args.verification_timeout_seconds = Some(0);
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
        args.execute.alertmanager_url = Some(Secret::new("alertmanager:9093"));
        let err = Settings::load(&args).unwrap_err().to_string();
        assert!(
            err.contains("--alertmanager-url") && err.contains("KUBEMEDIC_ALERTMANAGER_URL"),
            "{err}"
        );
        let mut args = DaemonArgs::default();
        args.execute.prometheus_url = Some(Secret::new("ftp://u:hunter2@prometheus/"));
        let err = Settings::load(&args).unwrap_err().to_string();
        assert!(err.contains("--prometheus-url"), "{err}");
        assert!(!err.contains("hunter2"), "{err}");

        let mut args = DaemonArgs::default();
        args.execute.alertmanager_url = Some(Secret::new("https://km:hunter2@am.example:9093/"));
        args.execute.prometheus_url = Some(Secret::new(" "));
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
                (|a: &mut DaemonArgs| a.http_header_timeout_seconds = Some(0))
                    as fn(&mut DaemonArgs),
                "--http-header-timeout-seconds",
                "KUBEMEDIC_HTTP_HEADER_TIMEOUT_SECONDS",
            ),
            (
                |a| a.http_header_timeout_seconds = Some(301),
                "--http-header-timeout-seconds",
                "KUBEMEDIC_HTTP_HEADER_TIMEOUT_SECONDS",
            ),
            (
                |a| a.http_body_timeout_seconds = Some(0),
                "--http-body-timeout-seconds",
                "KUBEMEDIC_HTTP_BODY_TIMEOUT_SECONDS",
            ),
            (
                |a| a.http_body_timeout_seconds = Some(86_400),
                "--http-body-timeout-seconds",
                "KUBEMEDIC_HTTP_BODY_TIMEOUT_SECONDS",
            ),
            (
                |a| a.http_max_connections = Some(0),
                "--http-max-connections",
                "KUBEMEDIC_HTTP_MAX_CONNECTIONS",
            ),
            (
                |a| a.http_max_connections = Some(1_000_000),
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
        let args = DaemonArgs {
            config: Some(path),
            http_max_connections: Some(128),
            ..Default::default()
        };
        let s = Settings::load(&args).unwrap();
        assert_eq!(s.http.header_timeout, Duration::from_secs(5));
        assert_eq!(s.http.body_timeout, Duration::from_secs(60));
        assert_eq!(s.http.max_connections, 128, "the flag wins over the file");
    }

    #[test]
    fn memory_sqlite_is_refused() {
        let args = DaemonArgs {
            database_url: Some(Secret::new("sqlite::memory:")),
            ..Default::default()
        };
        let err = Settings::load(&args).unwrap_err().to_string();
        assert!(err.contains("--database-url"), "{err}");
    }
}
