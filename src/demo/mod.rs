//! `kubemedic demo`: the daemon's main job on embedded defaults, with no configuration and no
//! network beyond loopback.
//!
//! Starts the real daemon (same code as `serve`) on a fresh SQLite file, with a simulated
//! cluster (`cluster.yaml`: incidents staged on a real kube-apiserver and captured, see
//! scripts/make-demo-cluster), the offline investigator and the shipped approval policy. It
//! sends the bundled Alertmanager webhook bodies over HTTP exactly as Alertmanager would (a
//! redelivery and a broken body included), waits for the worker, and prints what happened to
//! each alert — root cause, workflow, the policy's decision, the execution and its
//! verification — and where to look. Keeps serving until Ctrl-C unless `--exit` is given.
//!
//! Auto-approved remediations execute against the simulated cluster
//! ([`crate::cluster::SnapshotCluster::simulating`]): the writes are applied to its objects,
//! and its controllers and kubelet are stand-ins (a pod a remediation starts runs ready). The
//! demo also stands in for Alertmanager once a remediation has run: it sends the resolved
//! notification for the alert. Both are labelled "simulated" in the output; the verification
//! that follows is the code that verifies a real cluster.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::config::web::DEFAULT_LISTEN;
use crate::config::{DaemonArgs, HelpDefault, Settings};
use crate::daemon::{self, Components};
use crate::secret::Secret;
use crate::store::RequestFilter;
use crate::telemetry::LogFormat;

#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// Address to listen on; if it is taken, a free port is used.
    #[arg(long, value_name = "ADDR", help_default = DEFAULT_LISTEN)]
    pub listen: Option<String>,
    /// Keep the demo database here instead of a fresh temporary directory.
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Print the summary and stop instead of serving until Ctrl-C.
    #[arg(long)]
    pub exit: bool,
    /// Log filter for the daemon's own log lines (stderr) [default: error].
    #[arg(long, value_name = "FILTER")]
    pub log_level: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Daemon(#[from] daemon::DaemonError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error("cannot prepare {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("demo HTTP call failed: {0}")]
    Http(#[from] reqwest::Error),
    #[error("the demo cluster does not load: {0}")]
    Cluster(String),
    #[error(transparent)]
    Traces(#[from] crate::telemetry::TraceError),
}

/// Every stage on the simulated cluster, as `serve` builds them on a real one.
/// The simulated cluster, and the time its state is judged by (its capture).
type DemoCluster = daemon::ProvingCluster;

fn demo_components(
    settings: &Settings,
    data_dir: &std::path::Path,
    store: std::sync::Arc<dyn crate::store::Store>,
) -> Result<(Components, DemoCluster), DemoError> {
    use std::sync::Arc;
    let system: Arc<dyn crate::clock::Clock> = Arc::new(crate::clock::SystemClock);
    let snapshot = crate::cluster::SnapshotCluster::from_yaml(CLUSTER)
        .map_err(|e| DemoError::Cluster(e.to_string()))?
        .simulating(system.clone());
    // The cluster is frozen at capture time; the investigator reads it as of then.
    let clock: Arc<dyn crate::clock::Clock> = match snapshot.captured_at() {
        Some(t) => Arc::new(crate::clock::ManualClock::new(t)),
        None => Arc::new(crate::clock::SystemClock),
    };
    let cluster = Arc::new(snapshot);
    let reader: Arc<dyn crate::cluster::ClusterReader> = cluster.clone();
    let policy_dir = data_dir.join("policies");
    std::fs::create_dir_all(&policy_dir).map_err(|source| DemoError::Io {
        path: policy_dir.clone(),
        source,
    })?;
    for (name, text) in crate::policy::BUILTIN_POLICIES {
        let path = policy_dir.join(name);
        std::fs::write(&path, text).map_err(|source| DemoError::Io { path, source })?;
    }
    let metrics = Arc::new(crate::telemetry::Metrics::new());
    let gate = Arc::new(crate::policy::RegoGate::load(
        policy_dir,
        settings.policy.eval_timeout,
        Some(metrics.clone()),
    ));
    let mut stages: Vec<Arc<dyn crate::domain::Stage>> = vec![daemon::enrichment_stage(
        reader.clone(),
        gate.clone(),
        &settings.enrich,
    )];
    let parts = daemon::DashboardParts::load(settings, Some(gate.clone()));
    let live = Arc::new(crate::llm::LiveTokens::new());
    let (investigation, investigator) = daemon::investigation_stages(
        settings,
        &parts,
        reader.clone(),
        (reader.clone(), cluster.clone()),
        clock.clone(),
        Arc::new(daemon::StoreHistory::new(store.clone())),
        crate::investigate::Observers {
            metrics: Some(metrics.clone()),
            live: Some(live.clone()),
            remote: None,
        },
    );
    stages.extend(investigation);
    stages.push(daemon::gate_stage(gate.clone(), &settings.gate));
    let demo_cluster: DemoCluster = (reader.clone(), cluster.clone(), clock.clone());
    let chat_reader: Arc<dyn crate::cluster::ClusterReader> = reader.clone();
    stages.extend(daemon::execution_stages(
        settings,
        &parts,
        (reader, cluster, clock),
        store,
        system,
        Some(metrics.clone()),
    ));
    let components = Components {
        stages,
        dashboard: parts,
        dependencies: vec![
            Arc::new(crate::policy::PolicyDependency::new(gate)),
            investigator,
        ],
        metrics: Some(metrics),
        approvals: None,
        reader: Some(chat_reader),
        live,
        // The demo's cluster is a snapshot: nothing to mirror to.
        mirror: None,
        // Nor to watch: the snapshot is read in memory already.
        cache: None,
    };
    Ok((components, demo_cluster))
}

/// How long the demo lets a remediated target settle before verifying it (a real deployment
/// waits 300 s by default).
const VERIFICATION_WINDOW_SECONDS: u64 = 3;

/// The simulated cluster the demo investigates.
const CLUSTER: &str = include_str!("cluster.yaml");

/// The webhook bodies sent by the demo, in order: the incidents of the simulated cluster,
/// then alerts about objects it does not have, a broken body and a redelivery.
const SAMPLES: &[(&str, &str)] = &[
    (
        "01-crashloop-rollout.json",
        include_str!("alerts/01-crashloop-rollout.json"),
    ),
    (
        "02-oomkilled.json",
        include_str!("alerts/02-oomkilled.json"),
    ),
    (
        "03-pvc-fill-predicted.json",
        include_str!("alerts/03-pvc-fill-predicted.json"),
    ),
    (
        "04-problem-resolved.json",
        include_str!("alerts/04-problem-resolved.json"),
    ),
    (
        "05-dependency-scaled-to-zero.json",
        include_str!("alerts/05-dependency-scaled-to-zero.json"),
    ),
    (
        "06-create-container-config-error.json",
        include_str!("alerts/06-create-container-config-error.json"),
    ),
    (
        "kubernaut-pod-crash.json",
        include_str!("../../tests/fixtures/alertmanager/kubernaut-pod-crash.json"),
    ),
    (
        "kubernaut-invalid-payload.json",
        include_str!("../../tests/fixtures/alertmanager/kubernaut-invalid-payload.json"),
    ),
    (
        "01-crashloop-rollout.json (redelivered)",
        include_str!("alerts/01-crashloop-rollout.json"),
    ),
];

fn random_token() -> String {
    use rand::Rng as _;
    let bytes: [u8; 18] = rand::rng().random();
    hex::encode(bytes)
}

pub async fn run(args: DemoArgs) -> Result<(), DemoError> {
    let data_dir = match &args.data_dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("kubemedic-demo-{}", &random_token()[..8])),
    };
    crate::store::files::private_dir(&data_dir).map_err(|source| DemoError::Io {
        path: data_dir.clone(),
        source,
    })?;
    let webhook_token = random_token();
    let api_token = random_token();
    let mut daemon = DaemonArgs::default();
    daemon.store.data_dir = Some(data_dir.clone());
    daemon.web.webhook_token = Some(Secret::new(webhook_token.clone()));
    daemon.web.api_token = Some(Secret::new(api_token.clone()));
    daemon.pipeline.lease_seconds = Some(10);
    daemon.telemetry.log_format = Some(LogFormat::Text);
    daemon.telemetry.log_level = Some(args.log_level.clone().unwrap_or_else(|| "error".into()));
    daemon.verify.verification_window_seconds = Some(VERIFICATION_WINDOW_SECONDS);
    // A production change waits for a human; without mail or Slack, the dashboard (and the
    // API) is where the demo's approver decides.
    daemon.approvals.approvers = Some(vec![DEMO_APPROVER.into()]);
    let settings = Settings::load(&daemon)?;
    // Traces as `serve` sends them, where OTEL_EXPORTER_OTLP_ENDPOINT (or --otlp-endpoint's
    // variable) says.
    let traces = crate::telemetry::Traces::init(
        settings.log_format,
        &settings.log_level,
        settings.traces.as_ref(),
    )?;

    let wanted: std::net::SocketAddr = args
        .listen
        .as_deref()
        .unwrap_or(DEFAULT_LISTEN)
        .parse()
        .map_err(|e| {
            DemoError::Config(crate::config::ConfigError::Invalid {
                flag: "--listen".into(),
                env: "-".into(),
                key: "listen".into(),
                message: format!("{e}"),
            })
        })?;
    let listener = match tokio::net::TcpListener::bind(wanted).await {
        Ok(l) => l,
        Err(_) => {
            let fallback = std::net::SocketAddr::new(wanted.ip(), 0);
            tokio::net::TcpListener::bind(fallback)
                .await
                .map_err(|source| daemon::DaemonError::Bind {
                    addr: fallback,
                    source,
                })?
        }
    };
    let clock: std::sync::Arc<dyn crate::clock::Clock> =
        std::sync::Arc::new(crate::clock::SystemClock);
    let store = daemon::open_store(&settings, clock.clone()).await?;
    let shutdown = CancellationToken::new();
    daemon::cancel_on_signals(shutdown.clone());
    let (mut components, demo_cluster) = demo_components(&settings, &data_dir, store.clone())?;
    let policy = match components.dashboard.policy.clone() {
        Some(p) => p,
        None => std::sync::Arc::new(crate::policy::RegoGate::builtin(
            settings.policy.eval_timeout,
            components.metrics.clone(),
        )),
    };
    let parts = components.dashboard.clone();
    if let Some(approvals) = daemon::approval_service(
        &settings,
        &parts,
        store.clone(),
        clock.clone(),
        components.metrics.clone(),
        policy,
        Some(demo_cluster),
    )
    .await
    {
        components
            .stages
            .push(std::sync::Arc::new(crate::approval::ApprovalStage(
                approvals.clone(),
            )));
        components.approvals = Some(approvals);
    }
    let (viewer_key, approver_key) = demo_keys(store.as_ref()).await?;
    let running = daemon::start_on(
        &settings,
        components,
        shutdown.clone(),
        store.clone(),
        clock,
        listener,
    )
    .await?;
    let base = format!("http://{}", running.addr);

    println!("kubemedic demo");
    println!("  database   {}", settings.database.redacted());
    println!("  listening  {base}");
    println!(
        "  cluster    simulated: incidents captured from a real kube-apiserver; remediations are"
    );
    println!(
        "             applied to it, and its controllers and kubelet are simulated (the pods a"
    );
    println!(
        "             remediation starts run ready). Verification window {VERIFICATION_WINDOW_SECONDS} s."
    );
    println!();
    println!(
        "Sending {} Alertmanager webhook bodies to {base}/api/v1/alerts/alertmanager:",
        SAMPLES.len()
    );
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()?;
    for (name, body) in SAMPLES {
        let response = client
            .post(format!("{base}/api/v1/alerts/alertmanager"))
            .bearer_auth(&webhook_token)
            .header("content-type", "application/json")
            .body(*body)
            .send()
            .await?;
        let status = response.status();
        let json: Value = response.json().await.unwrap_or(Value::Null);
        println!(
            "  {:<52} {}  {}",
            name,
            status.as_u16(),
            describe_answer(&json)
        );
    }

    // Wait until every request has left the phases a worker drives. A remediation that ran is
    // followed by the resolved notification Alertmanager would send once the (simulated) pods
    // run.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut resolved = std::collections::HashSet::new();
    let mut notes = Vec::new();
    loop {
        let page = store
            .list_requests(&RequestFilter {
                limit: 500,
                ..Default::default()
            })
            .await?;
        for r in &page.items {
            if r.phase == crate::domain::Phase::Verifying && resolved.insert(r.id) {
                let status = client
                    .post(format!("{base}/api/v1/alerts/alertmanager"))
                    .bearer_auth(&webhook_token)
                    .header("content-type", "application/json")
                    .body(resolved_body(&r.signal).to_string())
                    .send()
                    .await?
                    .status();
                notes.push(format!(
                    "  simulated Alertmanager: {} resolved after the remediation of {} ({})",
                    r.signal.name,
                    short(&r.id.to_string()),
                    status.as_u16()
                ));
            }
        }
        // A request waiting for a human is settled for the demo: it waits in the dashboard.
        let busy = page
            .items
            .iter()
            .filter(|r| r.phase.is_runnable() && r.phase != crate::domain::Phase::AwaitingApproval)
            .count();
        if busy == 0 || tokio::time::Instant::now() > deadline {
            if !notes.is_empty() {
                println!();
                for n in &notes {
                    println!("{n}");
                }
            }
            print_requests(&page.items);
            if busy > 0 {
                println!("  ({busy} request(s) still in progress after 60 s)");
            }
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    println!();
    println!("The dashboard: {base}/");
    println!("  viewer key    {viewer_key}");
    println!("  approver key  {approver_key}  (decides what waits in {base}/inbox)");
    println!();
    println!("Look around (the API needs the admin token printed here):");
    println!("  curl -s -H 'Authorization: Bearer {api_token}' {base}/api/v1/requests");
    println!("  curl -s -H 'Authorization: Bearer {api_token}' {base}/api/v1/signals");
    println!("  curl -s {base}/readyz");
    println!("  curl -s {base}/metrics");
    if args.data_dir.is_some() {
        println!("  data directory: {}", data_dir.display());
    } else {
        println!(
            "  data directory: {} (temporary: removed when the demo stops; keep one with --data-dir)",
            data_dir.display()
        );
    }
    if args.exit {
        running.shutdown();
    } else {
        println!();
        println!("Serving until Ctrl-C.");
    }
    let result = running.wait().await;
    // The spans of the last steps go out before the process ends.
    traces.shutdown().await;
    if args.data_dir.is_none() {
        let _ = std::fs::remove_dir_all(&data_dir);
    }
    result?;
    Ok(())
}

/// The approver the demo's approvals name (no mail is sent: there is no SMTP server).
const DEMO_APPROVER: &str = "approver@kubemedic.demo";

/// A viewer key and an approver key for the dashboard, stored as `kubemedic apikey create`
/// stores them.
async fn demo_keys(store: &dyn crate::store::Store) -> Result<(String, String), DemoError> {
    use crate::domain::{ApiKey, Role};
    use crate::web::auth::{digest, key_prefix, new_key};
    let mut keys = Vec::new();
    for (name, role) in [
        ("demo-viewer", Role::Viewer),
        ("demo-approver", Role::Approver),
    ] {
        let key = new_key();
        let record = ApiKey {
            id: uuid::Uuid::new_v4(),
            name: format!("{name}-{}", &random_token()[..6]),
            role,
            prefix: key_prefix(&key),
            created_at: chrono::Utc::now(),
            created_by: "demo".into(),
            revoked_at: None,
        };
        store.create_api_key(&record, &digest(&key)).await?;
        keys.push(key);
    }
    let approver = keys.pop().unwrap_or_default();
    let viewer = keys.pop().unwrap_or_default();
    Ok((viewer, approver))
}

fn short(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}

/// The notification Alertmanager sends when `signal` stops firing.
fn resolved_body(signal: &crate::domain::SignalContext) -> Value {
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    serde_json::json!({
        "version": "4", "status": "resolved", "receiver": "kubemedic",
        "groupKey": format!("{{}}:{{alertname=\"{}\"}}", signal.name),
        "groupLabels": {"alertname": signal.name}, "commonLabels": signal.labels,
        "commonAnnotations": signal.annotations, "externalURL": "http://alertmanager.simulated",
        "alerts": [{
            "status": "resolved", "labels": signal.labels, "annotations": signal.annotations,
            "startsAt": signal.starts_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            "endsAt": now, "generatorURL": signal.generator_url.clone().unwrap_or_default(),
            "fingerprint": signal.fingerprint,
        }]
    })
}

fn describe_answer(json: &Value) -> String {
    if let Some(err) = json.get("error").and_then(Value::as_str) {
        return format!("rejected: {err}");
    }
    let Some(outcomes) = json.get("outcomes").and_then(Value::as_array) else {
        return String::new();
    };
    outcomes
        .iter()
        .map(|o| {
            let kind = o.get("outcome").and_then(Value::as_str).unwrap_or("?");
            let id = o
                .get("request_id")
                .and_then(Value::as_str)
                .map(short)
                .unwrap_or("-");
            format!("{kind} {id}")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn print_requests(items: &[crate::domain::RemediationRequest]) {
    println!();
    println!("Remediation requests ({}):", items.len());
    for r in items.iter().rev() {
        let id = r.id.to_string();
        let target = r
            .state
            .analysis
            .as_ref()
            .and_then(|a| a.root_owner.clone())
            .or_else(|| r.target.clone())
            .map_or_else(|| "-".to_owned(), |t| t.to_string());
        println!();
        println!(
            "  {}  {} on {}  (x{})",
            short(&id),
            r.signal.name,
            target,
            r.occurrence_count
        );
        if let Some(e) = &r.state.enrichment {
            println!("            environment  {}", e.environment);
        }
        if let Some(a) = &r.state.analysis {
            println!(
                "            root cause   {} ({}, confidence {:.2})",
                a.rca.root_cause_analysis.summary,
                a.rca.investigation_outcome.as_str(),
                a.rca.confidence
            );
        }
        if let Some(w) = r.state.selection.as_ref().and_then(|s| s.selected.as_ref()) {
            let params: Vec<String> = w
                .parameters
                .iter()
                .filter(|(k, _)| !k.starts_with("TARGET_RESOURCE_"))
                .map(|(k, v)| {
                    format!(
                        "{k}={}",
                        v.as_str().map_or_else(|| v.to_string(), str::to_owned)
                    )
                })
                .collect();
            println!(
                "            workflow     {} ({}){}",
                w.workflow_id,
                w.action_type,
                if params.is_empty() {
                    String::new()
                } else {
                    format!(" {}", params.join(" "))
                }
            );
        }
        if let Some(g) = &r.state.gate {
            if g.require_approval {
                println!("            policy       approval required — {}", g.reason);
            } else {
                println!("            policy       {}", g.reason);
            }
        }
        if let Some(x) = &r.state.execution {
            let steps: Vec<String> = x
                .steps
                .iter()
                .map(|s| {
                    format!(
                        "{} {}",
                        s.action,
                        serde_json::to_value(s.status)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_owned))
                            .unwrap_or_default()
                    )
                })
                .collect();
            println!(
                "            executed     on the simulated cluster: {} — {}",
                steps.join(", "),
                x.message
            );
        }
        if let Some(a) = &r.state.assessment {
            println!(
                "            verified     score {} (health {}, alert {}; read from the simulated cluster and notification)",
                a.score
                    .map_or_else(|| "-".to_owned(), |s| format!("{s:.2}")),
                a.health_score
                    .map_or_else(|| "-".to_owned(), |s| format!("{s:.2}")),
                a.alert_score
                    .map_or_else(|| "-".to_owned(), |s| format!("{s:.2}")),
            );
        }
        println!(
            "            now          {}{}",
            r.phase,
            r.reason
                .as_deref()
                .map(|x| format!(" — {x}"))
                .unwrap_or_default()
        );
    }
}
