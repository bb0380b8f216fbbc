//! `kubemedic mcp`: the MCP tools (`crate::mcp`) over stdio, for desktop clients that start
//! their servers as processes.
//!
//! It opens the daemon's store with the daemon's settings (the same flags and environment as
//! `serve`) and answers on stdin/stdout; logs go to stderr. The caller is fixed for the whole
//! process: with `--api-key` (or `KUBEMEDIC_API_KEY`) the key's name and role, as over HTTP;
//! without one, the local user as a viewer — it reads, and `decide_approval` is refused.
//!
//! `investigate` runs here, in this process: no pipeline workers run behind stdio, so the
//! question (or the named target) is carried through the daemon's own stages up to the gate —
//! enrichment, the configured investigator, selection with its proof (a server-side dry run),
//! the approval policy — exactly as `kubemedic investigate` does. The pipeline holds no
//! approval or execution stage, so nothing can run; nothing is recorded either, and the result
//! says so and how to have a proposal approved (ask the daemon).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use rmcp::{ErrorData, ServiceExt};
use uuid::Uuid;

use crate::chat::{Resolution, resolve};
use crate::clock::{Clock, SystemClock};
use crate::cluster::ClusterReader;
use crate::config::{DaemonArgs, Settings};
use crate::daemon;
use crate::domain::{Phase, RemediationRequest, Role};
use crate::mcp::investigation::chat_error;
use crate::mcp::{About, Caller, ClusterAccess, Investigated, Investigations, KubemedicMcp, Parts};
use crate::pipeline::Pipeline;
use crate::redact::sanitize_text;
use crate::telemetry;

/// The phases whose stages an investigation over stdio runs: up to and including the gate.
const READ_PHASES: [Phase; 4] = [
    Phase::Enriching,
    Phase::Investigating,
    Phase::Selecting,
    Phase::Gating,
];

/// `investigate` in this process (see the module's header).
struct InProcess {
    reader: Arc<dyn ClusterReader>,
    pipeline: Pipeline,
    clock: Arc<dyn Clock>,
}

impl InProcess {
    /// What a question is about, as the chat resolves it; or an answer that is not an
    /// investigation (a scan's listing), or an error naming why there is nothing to investigate.
    async fn target_of(&self, q: &str) -> Result<Result<crate::domain::Target, String>, ErrorData> {
        let bad = |m: String| ErrorData::invalid_params(format!("question: {m}"), None);
        match resolve::resolve(self.reader.as_ref(), q, None).await {
            Err(e) => Err(ErrorData::internal_error(
                format!("cannot read the cluster to resolve the question: {e}"),
                None,
            )),
            Ok(Resolution::Target { target, .. }) => Ok(Ok(target)),
            Ok(Resolution::Scan { namespace }) => {
                let found = resolve::scan(self.reader.as_ref(), &namespace, self.clock.now())
                    .await
                    .map_err(|e| bad(format!("cannot scan namespace {namespace}: {e}")))?;
                match found.as_slice() {
                    [only] => Ok(Ok(only.target.clone())),
                    [] => Ok(Err(format!(
                        "Nothing in namespace {namespace} looks unhealthy: every pod is running \
                         or completed and its containers are ready."
                    ))),
                    many => Ok(Err(format!(
                        "Unhealthy in namespace {namespace}:\n{}",
                        many.iter()
                            .map(|f| format!("- {}: {}", f.target, f.what))
                            .collect::<Vec<_>>()
                            .join("\n")
                    ))),
                }
            }
            Ok(Resolution::Ambiguous { candidates }) => Err(bad(format!(
                "more than one object matches ({}); name the namespace and the kind, or give a target",
                candidates
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
            Ok(Resolution::Unknown) => Err(bad(
                "it names no object of the cluster (no workload, pod, node or namespace of that \
                 name); name one, or give a target"
                    .into(),
            )),
        }
    }
}

#[async_trait::async_trait]
impl Investigations for InProcess {
    async fn investigate(
        &self,
        who: &Caller,
        about: About,
        wait: Duration,
    ) -> Result<Investigated, ErrorData> {
        let (target, message) = match about {
            About::Target { target, question } => {
                let target = crate::chat::check_target(self.reader.as_ref(), &target)
                    .await
                    .map_err(chat_error)?;
                let message = if question.is_empty() {
                    format!("investigate {target}")
                } else {
                    question
                };
                (target, message)
            }
            About::Question(q) => match self.target_of(&q).await? {
                Ok(target) => (target, q),
                Err(answer) => {
                    return Ok(Investigated {
                        request: None,
                        approval: None,
                        recorded: false,
                        done: true,
                        answer,
                    });
                }
            },
        };
        let message =
            crate::notify::render::clip(&sanitize_text(&message), crate::chat::MAX_MESSAGE_CHARS);
        let now = self.clock.now();
        let fingerprint = format!("mcp-{}", Uuid::new_v4().simple());
        let signal = crate::chat::question_signal(
            &who.subject,
            &target,
            &message,
            "",
            None,
            &fingerprint,
            now,
        )
        .map_err(chat_error)?;
        let req = RemediationRequest::for_signal(&signal, Phase::Received, now);
        let req = tokio::time::timeout(
            wait,
            super::investigate::advance(&self.pipeline, req, false),
        )
        .await
        .map_err(|_| {
            ErrorData::internal_error(
                format!(
                    "investigate: {target} was not investigated within {} s (give more \
                     wait_seconds)",
                    wait.as_secs()
                ),
                None,
            )
        })?;
        let answer = crate::chat::answer::findings(&req);
        Ok(Investigated {
            request: Some(req),
            approval: None,
            recorded: false,
            done: true,
            answer,
        })
    }
}

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
            trace: None,
        },
        Some(key) => match daemon::auth_settings(&settings)
            .key_named_by(store.as_ref(), key)
            .await
        {
            Ok(Some((name, role, _))) => Caller {
                subject: format!("key:{name}"),
                role,
                trace: None,
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
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let investigations = components.reader.clone().map(|reader| {
        let mut pipeline = Pipeline::new(clock.clone(), Duration::ZERO).with_actor("kubemedic-mcp");
        for stage in components
            .stages
            .iter()
            .filter(|s| READ_PHASES.contains(&s.phase()))
        {
            pipeline = pipeline.with_stage(stage.clone());
        }
        Arc::new(InProcess {
            reader,
            pipeline,
            clock: clock.clone(),
        }) as Arc<dyn Investigations>
    });
    let parts = Parts {
        approvals: components.approvals,
        cluster: components.reader.map(|reader| ClusterAccess {
            reader,
            clock: clock.clone(),
            limits: settings.cluster.tool_limits.clone(),
            timeout: settings.investigate.llm.tool_timeout,
        }),
        investigations,
        catalog: components.dashboard.catalog,
        playbooks: components.dashboard.playbooks,
        policy: components.dashboard.policy,
    };
    let server = KubemedicMcp::new(store, Arc::new(parts), Some(caller));
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
