//! The command line: `serve`, `demo`, `migrate`, `investigate`, `snapshot`, `catalog
//! validate`, `policy test`, `policy obligations`, `ask`, `mcp`, `apikey`, `audit`, `config reference`. The top of the crate: `main` parses [`Cli`] and calls [`run`].

mod admin;
pub mod ask;
pub mod catalog;
pub mod investigate;
pub mod mcp;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tokio_util::sync::CancellationToken;

use crate::catalog::{Catalog, CatalogError};
use crate::cluster::{KubeCluster, SnapshotCluster};
use crate::config::HelpDefault;
use crate::config::{ClusterArgs, ConfigError, DaemonArgs, GateArgs, Settings, reference};
use crate::daemon;
use crate::demo::{self, DemoArgs};
use crate::domain::obligations;
use crate::policy::{PolicySettings, cases};
use crate::telemetry::{self, LogFormat};

#[derive(Debug, Parser)]
#[command(
    name = "kubemedic",
    version,
    about = "Turns Alertmanager alerts into safe, audited Kubernetes remediations"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, clap::Args)]
pub struct SnapshotArgs {
    /// Namespace to capture (repeat for several; default: every namespace kubemedic may read).
    #[arg(long = "namespace", short = 'n', value_name = "NS")]
    pub namespaces: Vec<String>,
    /// Where to write the snapshot (multi-document YAML).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: std::path::PathBuf,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// A running daemon to talk to, as `kubemedic ask` and `catalog list` do.
#[derive(Debug, Clone, clap::Args)]
pub struct Remote {
    /// The daemon's address.
    #[arg(
        long,
        env = "KUBEMEDIC_URL",
        value_name = "URL",
        default_value = "http://127.0.0.1:8080"
    )]
    pub url: String,
    /// An API key of the dashboard (viewer to read and ask; approver to decide).
    #[arg(
        long,
        env = "KUBEMEDIC_API_KEY",
        value_name = "KEY",
        hide_env_values = true
    )]
    pub api_key: Option<crate::secret::Secret>,
}

#[derive(Debug, clap::Args)]
pub struct CatalogArgs {
    #[command(subcommand)]
    pub command: CatalogCommand,
}

#[derive(Debug, Subcommand)]
pub enum CatalogCommand {
    /// Check every workflow file and name the file and field of each problem.
    Validate {
        /// Catalog directory [default: workflows].
        dir: Option<std::path::PathBuf>,
    },
    /// List the catalog a running daemon has in force (files and RemediationWorkflow objects)
    /// and where each workflow comes from.
    List(Remote),
}

#[derive(Debug, clap::Args)]
pub struct PolicyArgs {
    #[command(subcommand)]
    pub command: PolicyCommand,
}

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Run YAML cases (`input`, `want`) against the approval policy; exit 1 if any fails.
    Test(PolicyTestArgs),
    /// Print every proof obligation (id, statement) by proof and action type as Markdown: the
    /// ids a policy's `proof.holds` and `proof.failed` name.
    Obligations {
        /// Instead, rewrite the generated part of this Markdown file (between its markers),
        /// e.g. docs/investigation.md.
        #[arg(long, value_name = "FILE")]
        update: Option<std::path::PathBuf>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportFormat {
    Text,
    Json,
}

#[derive(Debug, clap::Args)]
pub struct PolicyTestArgs {
    /// Policy directory (approval.rego, enrichment.rego) [default: policies].
    #[arg(long, env = "KUBEMEDIC_POLICY_DIR", value_name = "DIR")]
    pub policy: Option<std::path::PathBuf>,
    /// Case files or directories of *.yaml case files [default: <policy>/tests].
    #[arg(value_name = "CASES")]
    pub cases: Vec<std::path::PathBuf>,
    /// `text` (PASS/FAIL per case, rule values for failures) or `json` (everything, for tools
    /// such as scripts/opa-crosscheck).
    #[arg(long, value_enum, default_value = "text")]
    pub format: ReportFormat,
    /// Milliseconds one evaluation may run.
    #[arg(
        long,
        env = "KUBEMEDIC_POLICY_EVAL_TIMEOUT_MS",
        value_name = "MS",
        help_default = PolicySettings::DEFAULT_EVAL_TIMEOUT_MS
    )]
    pub policy_eval_timeout_ms: Option<u64>,
}

#[derive(Debug, clap::Args)]
pub struct ConfigArgs {
    #[command(subcommand)]
    pub command: ConfigCommand,
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print the reference table of every setting (flag, environment variable, file key,
    /// default, description) as Markdown, generated from the settings' declaration.
    Reference {
        /// Instead, rewrite the generated part of this Markdown file (between its markers),
        /// e.g. docs/configuration.md.
        #[arg(long, value_name = "FILE")]
        update: Option<std::path::PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon: webhook receiver, worker pool, API.
    Serve(DaemonArgs),
    /// Run the whole loop on embedded defaults (SQLite, offline) and show what happened.
    Demo(DemoArgs),
    /// Apply database migrations and exit.
    Migrate(DaemonArgs),
    /// Investigate the alerts of an Alertmanager body up to the gate decision, without a server.
    Investigate(investigate::InvestigateCommand),
    /// Check a workflow catalog directory.
    Catalog(CatalogArgs),
    /// Capture namespaces of a live cluster into a snapshot file (never Secrets) for replay.
    Snapshot(SnapshotArgs),
    /// Work with the approval policy.
    Policy(PolicyArgs),
    /// Ask a running daemon about the cluster; watch the investigation and decide its fix.
    Ask(ask::AskArgs),
    /// Serve the MCP tools over stdio, for desktop clients (docs/mcp.md).
    Mcp(mcp::McpArgs),
    /// Manage the API keys of the dashboard and the API.
    Apikey(admin::ApikeyArgs),
    /// Check the audit trail.
    Audit(admin::AuditArgs),
    /// Describe the configuration.
    Config(ConfigArgs),
    /// Print the version.
    Version,
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    // One process-wide TLS provider (ring); see docs/adr/0002-tls-and-crates.md.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(run(cli))
}

async fn run(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Config(ConfigArgs {
            command: ConfigCommand::Reference { update },
        }) => generated(
            &reference::markdown(),
            (reference::BEGIN, reference::END),
            update.as_deref(),
        ),
        Command::Version => {
            println!("kubemedic {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Command::Migrate(args) => {
            let settings = match Settings::load(&args) {
                Ok(s) => s,
                Err(e) => return config_error(e),
            };
            telemetry::init_logging(settings.log_format, &settings.log_level);
            if let Err(e) = daemon::check_state_files(&settings) {
                return fail(e);
            }
            match crate::store::migrate(&settings.database).await {
                Ok(h) => {
                    println!(
                        "{}: {} of {} migrations applied ({})",
                        settings.database.redacted(),
                        h.migrations_applied,
                        h.migrations_expected,
                        h.backend
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => fail(e),
            }
        }
        Command::Serve(args) => {
            let settings = match Settings::load(&args).and_then(|s| {
                s.validate_for_serve()?;
                Ok(s)
            }) {
                Ok(s) => s,
                Err(e) => return config_error(e),
            };
            let traces = match telemetry::Traces::init(
                settings.log_format,
                &settings.log_level,
                settings.traces.as_ref(),
            ) {
                Ok(t) => t,
                Err(e) => return fail(e),
            };
            let shutdown = CancellationToken::new();
            daemon::cancel_on_signals(shutdown.clone());
            let running = match daemon::serve(&settings, shutdown).await {
                Ok(r) => r,
                Err(e) => {
                    traces.shutdown().await;
                    return fail(e);
                }
            };
            let stopped = running.wait().await;
            // The spans of the last steps go out before the process ends.
            traces.shutdown().await;
            match stopped {
                Ok(()) => {
                    tracing::info!("stopped");
                    ExitCode::SUCCESS
                }
                Err(e) => fail(e),
            }
        }
        Command::Snapshot(args) => snapshot(args).await,
        Command::Ask(args) => ask::run(args).await,
        Command::Mcp(args) => mcp::run(args).await,
        Command::Apikey(args) => admin::apikey(args).await,
        Command::Audit(args) => admin::audit(args).await,
        Command::Investigate(cmd) => {
            telemetry::init_logging(LogFormat::Text, "warn");
            match investigate::run(&cmd).await {
                Ok(out) => {
                    print!("{out}");
                    ExitCode::SUCCESS
                }
                Err(investigate::CommandError::Usage(e)) => {
                    eprintln!("error: {e}");
                    ExitCode::from(2)
                }
                Err(e) => fail(e),
            }
        }
        Command::Catalog(CatalogArgs {
            command: CatalogCommand::List(args),
        }) => catalog::list(args).await,
        Command::Catalog(CatalogArgs {
            command: CatalogCommand::Validate { dir },
        }) => {
            let dir = dir.unwrap_or_else(|| "workflows".into());
            match Catalog::load(&dir) {
                Ok(c) => {
                    println!(
                        "{}: {} action types, {} workflows, no problems",
                        dir.display(),
                        c.action_types().len(),
                        c.workflows().len()
                    );
                    ExitCode::SUCCESS
                }
                Err(CatalogError(problems)) => {
                    for p in &problems {
                        eprintln!("{p}");
                    }
                    eprintln!("{} problem(s) in {}", problems.len(), dir.display());
                    ExitCode::FAILURE
                }
            }
        }
        Command::Policy(PolicyArgs {
            command: PolicyCommand::Test(args),
        }) => policy_test(args),
        Command::Policy(PolicyArgs {
            command: PolicyCommand::Obligations { update },
        }) => generated(
            &obligations::markdown(),
            (obligations::DOC_BEGIN, obligations::DOC_END),
            update.as_deref(),
        ),
        Command::Demo(args) => match demo::run(args).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(e),
        },
    }
}

async fn snapshot(args: SnapshotArgs) -> ExitCode {
    telemetry::init_logging(LogFormat::Text, "warn");
    let settings = match args.cluster.settings() {
        Ok(s) => s,
        Err(e) => return config_error(e),
    };
    let cluster = match KubeCluster::connect(&settings.kube_options()).await {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let text =
        match crate::cluster::snapshot::capture(&cluster, &args.namespaces, chrono::Utc::now())
            .await
        {
            Ok(t) => t,
            Err(e) => return fail(e),
        };
    if let Err(e) = std::fs::write(&args.output, &text) {
        return fail(format!("cannot write {}: {e}", args.output.display()));
    }
    match SnapshotCluster::from_yaml(&text) {
        Ok(s) => {
            println!(
                "wrote {}: {} objects, {} log documents from {}",
                args.output.display(),
                s.objects().len(),
                s.pod_logs().len(),
                if args.namespaces.is_empty() {
                    "every readable namespace".to_owned()
                } else {
                    args.namespaces.join(", ")
                }
            );
            ExitCode::SUCCESS
        }
        Err(e) => fail(format!("the written snapshot does not load back: {e}")),
    }
}

/// `kubemedic policy test`: exit 0 when every case passes, 1 when one fails, 2 when the cases
/// or settings cannot be read.
fn policy_test(args: PolicyTestArgs) -> ExitCode {
    let gate = GateArgs {
        policy_dir: args.policy.clone(),
        policy_eval_timeout_ms: args.policy_eval_timeout_ms,
        ..Default::default()
    };
    let parts = match gate.settings() {
        Ok(s) => s,
        Err(e) => return config_error(e),
    };
    let dir = parts.policy.dir;
    let report = cases::collect_files(&dir, &args.cases)
        .and_then(|files| cases::run(&dir, &files, parts.policy.eval_timeout));
    let report = match report {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    match args.format {
        ReportFormat::Text => print!("{}", cases::render_text(&report)),
        ReportFormat::Json => match serde_json::to_string_pretty(&report) {
            Ok(text) => println!("{text}"),
            Err(e) => return fail(format!("cannot encode the report: {e}")),
        },
    }
    if report.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// A generated table (`kubemedic config reference`, `kubemedic policy obligations`): printed,
/// or with `--update FILE` spliced into FILE between its markers.
fn generated(
    table: &str,
    (begin, end): (&str, &str),
    update: Option<&std::path::Path>,
) -> ExitCode {
    let Some(path) = update else {
        print!("{table}");
        return ExitCode::SUCCESS;
    };
    let doc = match std::fs::read_to_string(path) {
        Ok(d) => d,
        Err(e) => return fail(format!("cannot read {}: {e}", path.display())),
    };
    let Some(new) = reference::splice_between(&doc, (begin, end), table) else {
        eprintln!(
            "error: {} lacks the markers of the generated part:\n{begin}\n{end}",
            path.display(),
        );
        return ExitCode::from(2);
    };
    match std::fs::write(path, new) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(format!("cannot write {}: {e}", path.display())),
    }
}

fn config_error(e: ConfigError) -> ExitCode {
    eprintln!("error: {e}");
    ExitCode::from(2)
}

fn fail(e: impl std::fmt::Display) -> ExitCode {
    tracing::error!(error = %e, "fatal");
    eprintln!("error: {e}");
    ExitCode::FAILURE
}
