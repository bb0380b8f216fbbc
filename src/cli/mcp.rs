//! `kubemedic mcp`: the MCP tools (`crate::mcp`) over stdio, for desktop clients that start
//! their servers as processes.
//!
//! It opens the daemon's store with the daemon's settings (the same flags and environment as
//! `serve`) and answers on stdin/stdout; logs go to stderr. The caller is fixed for the whole
//! process: with `--api-key` (or `KUBEMEDIC_API_KEY`) the key's name and role, as over HTTP;
//! without one, the local user as a viewer — it reads, and `decide_approval` is refused.

use std::process::ExitCode;
use std::sync::Arc;

use rmcp::ServiceExt;

use crate::clock::{Clock, SystemClock};
use crate::config::{DaemonArgs, Settings};
use crate::daemon;
use crate::domain::Role;
use crate::mcp::{Caller, KubemedicMcp};
use crate::telemetry;

#[derive(Debug, clap::Args)]
pub struct McpArgs {
    /// An API key (`kubemedic apikey create`): the tools run with its name and role, so an
    /// approver's key may decide approvals. Without one the tools only read, as the local user.
    #[arg(
        long,
        env = "KUBEMEDIC_API_KEY",
        hide_env_values = true,
        value_name = "KEY"
    )]
    pub api_key: Option<String>,
    #[command(flatten)]
    pub daemon: DaemonArgs,
}

/// The local user, as the audit trail would name them.
fn local_user() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "unknown".into());
    format!("stdio:{user}")
}

pub async fn run(args: McpArgs) -> ExitCode {
    let settings = match Settings::load(&args.daemon) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    // stdout is the protocol's: logs go to stderr (as `init_logging` always does).
    telemetry::init_logging(settings.log_format, &settings.log_level);
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let store = match daemon::open_store(&settings, clock).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let caller = match args.api_key.as_deref().map(str::trim) {
        None | Some("") => Caller {
            subject: local_user(),
            role: Role::Viewer,
        },
        Some(key) => match daemon::auth_settings(&settings)
            .key_named_by(store.as_ref(), key)
            .await
        {
            Ok(Some((name, role, _))) => Caller {
                subject: format!("key:{name}"),
                role,
            },
            Ok(None) => {
                eprintln!("error: --api-key: no such key (or it was revoked)");
                return ExitCode::from(2);
            }
            Err(e) => {
                eprintln!("error: cannot look the key up: {e}");
                return ExitCode::FAILURE;
            }
        },
    };
    let components = daemon::serve_components(&settings, store.clone()).await;
    let server = KubemedicMcp::new(store, components.approvals, Some(caller));
    let running = match server.serve(rmcp::transport::stdio()).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: the MCP client did not initialise: {e}");
            return ExitCode::FAILURE;
        }
    };
    match running.waiting().await {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
