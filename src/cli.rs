//! The command line: `serve`, `demo`, `migrate`, `version`.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tokio_util::sync::CancellationToken;

use crate::config::{DaemonArgs, Settings};
use crate::daemon::{self, Components};
use crate::demo::{self, DemoArgs};
use crate::telemetry;

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

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon: webhook receiver, worker pool, API.
    Serve(DaemonArgs),
    /// Run the whole loop on embedded defaults (SQLite, offline) and show what happened.
    Demo(DemoArgs),
    /// Apply database migrations and exit.
    Migrate(DaemonArgs),
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
            telemetry::init_logging(settings.log_format, &settings.log_level);
            let shutdown = CancellationToken::new();
            daemon::cancel_on_signals(shutdown.clone());
            let running = match daemon::start(&settings, Components::default(), shutdown).await {
                Ok(r) => r,
                Err(e) => return fail(e),
            };
            match running.wait().await {
                Ok(()) => {
                    tracing::info!("stopped");
                    ExitCode::SUCCESS
                }
                Err(e) => fail(e),
            }
        }
        Command::Demo(args) => match demo::run(args).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(e),
        },
    }
}

fn config_error(e: crate::config::ConfigError) -> ExitCode {
    eprintln!("error: {e}");
    ExitCode::from(2)
}

fn fail(e: impl std::fmt::Display) -> ExitCode {
    tracing::error!(error = %e, "fatal");
    eprintln!("error: {e}");
    ExitCode::FAILURE
}
