//! Assembles the daemon from validated [`Settings`]: store, metrics, pipeline, worker pool and
//! HTTP server; runs it until the shutdown token fires; then stops accepting, lets in-flight
//! commits finish and returns.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::approval::dispatch::Dispatcher;
use crate::approval::{ApprovalStage, Approvals, LinkSigner};
use crate::clock::{Clock, SystemClock};
use crate::cluster::{CacheDependency, CachedReader, ClusterReader, KubeCluster, WatchCache};
use crate::config::{GateParts, Settings};
use crate::domain::{HistoryRecord, Target};
use crate::domain::{Phase, RemediationRequest, Stage, StageError, StageOutcome};
use crate::enrich::{EnrichSettings, EnrichmentStage};
use crate::execute::ExecutionStage;
use crate::gate::{GateSettings, GateStage};
use crate::history::{HistoryError, RemediationHistory};
use crate::ingest::IngestQueue;
use crate::investigate::{InvestigationStage, SelectionStage};
use crate::llm::{LiveTokens, LlmStatus};
use crate::monitoring::PrometheusClient;
use crate::notify::Notifier;
use crate::notify::email::EmailNotifier;
use crate::notify::slack::SlackNotifier;
use crate::pipeline::Pipeline;
use crate::pipeline::worker::WorkerPool;
use crate::policy::{PolicyDependency, RELOAD_INTERVAL, RegoGate};
use crate::prove::Prover;
use crate::readiness::{Dependency, DependencyStatus};
use crate::store::{self, Store, StoreError};
use crate::telemetry::Metrics;
use crate::verify::VerificationStage;
use crate::web::{self, AppState};

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("HTTP server failed: {0}")]
    Serve(std::io::Error),
    #[error(transparent)]
    AuditKey(#[from] crate::store::chain::KeyError),
    #[error(
        "this database's audit trail is signed with audit key {database}, this daemon's key is \
         {ours}: every replica sharing a database must be given the same --audit-key \
         (KUBEMEDIC_AUDIT_KEY), and a replica started with an old key after a rotation must \
         be given the new keyring; refusing to start rather than write events no one key \
         verifies"
    )]
    AnotherAuditKey { database: String, ours: String },
}

/// Open the configured store with the configured audit key.
pub async fn open_store(
    settings: &Settings,
    clock: Arc<dyn Clock>,
) -> Result<Arc<dyn Store>, DaemonError> {
    check_state_files(settings)?;
    let key = settings.audit_key.load()?;
    Ok(store::open(&settings.database, clock, key).await?)
}

/// Refuse a data directory, database directory or audit key file that others can write
/// (`serve`, `migrate`, the admin commands and the demo all pass here before opening anything).
pub fn check_state_files(settings: &Settings) -> Result<(), DaemonError> {
    if let Some(from) = &settings.adopt_state_from {
        let moved = store::files::adopt(from, &settings.data_dir).map_err(|e| {
            DaemonError::Store(store::StoreError::Setup(format!(
                "moving the state from {} into {}: {e}",
                from.display(),
                settings.data_dir.display()
            )))
        })?;
        if !moved.is_empty() {
            info!(
                from = %from.display(),
                to = %settings.data_dir.display(),
                files = ?moved,
                "moved the state an earlier layout kept into the data directory"
            );
        }
    }
    let key_file = match &settings.audit_key {
        crate::config::AuditKeySource::File(path) => Some(path.as_path()),
        crate::config::AuditKeySource::Given(_) => None,
    };
    Ok(store::check_state_files(
        &settings.data_dir,
        &settings.database,
        key_file,
    )?)
}

/// What the daemon runs with besides its settings: the stages available in this build and
/// configuration, the outside systems `/readyz` should report on, and the metrics registry when
/// a component already reports into it (the approval gate); `None` makes a fresh one.
#[derive(Default)]
pub struct Components {
    pub stages: Vec<Arc<dyn Stage>>,
    pub dependencies: Vec<Arc<dyn Dependency>>,
    /// Shared with the stages that report metrics (LLM tokens…); made fresh if absent.
    pub metrics: Option<Arc<Metrics>>,
    /// Human approvals (their stage is among `stages`); the daemon serves their pages and API
    /// and runs their notification dispatcher.
    pub approvals: Option<Arc<Approvals>>,
    /// What the dashboard shows of the configuration: the catalog, the playbooks, the policy.
    pub dashboard: DashboardParts,
    /// The cluster a chat question is read against (which objects it names).
    pub reader: Option<Arc<dyn ClusterReader>>,
    /// What the model writes as it works, from the investigator (give it the same hub) to the
    /// chat's streams.
    pub live: Arc<LiveTokens>,
    /// The requests mirrored as `Remediation` objects (`--mirror-remediations`), run beside
    /// the workers.
    pub mirror: Option<Arc<crate::mirror::Mirror>>,
    /// The watch-backed view investigations read (`--no-watch-cache` leaves it out).
    pub cache: Option<Arc<WatchCache>>,
}

/// The configuration the dashboard's catalog and policy pages show.
#[derive(Default, Clone)]
pub struct DashboardParts {
    pub catalog: Option<Arc<crate::live::Live<crate::catalog::Catalog>>>,
    pub playbooks: Option<Arc<crate::live::Live<crate::investigate::playbooks::Playbooks>>>,
    pub policy: Option<Arc<RegoGate>>,
}

impl DashboardParts {
    /// The configured catalog and playbooks — loaded once, shared by every stage and page,
    /// replaceable while the daemon runs — and `policy`. What does not load is `None`, logged;
    /// the stages that need it are then left out.
    pub fn load(settings: &Settings, policy: Option<Arc<RegoGate>>) -> Self {
        let catalog = crate::investigate::load_catalog(settings.investigate.catalog_dir.as_deref())
            .map_err(|e| tracing::error!(error = %e, "the catalog does not load: investigation, approvals and execution are not available"))
            .map(crate::live::Live::new)
            .ok();
        let playbooks =
            crate::investigate::load_playbooks(settings.investigate.playbooks_dir.as_deref())
                .map_err(|e| tracing::error!(error = %e, "the playbooks do not load: investigation is not available"))
                .map(crate::live::Live::new)
                .ok();
        Self {
            catalog,
            playbooks,
            policy,
        }
    }

    /// The catalog and the playbooks, when both loaded.
    pub fn live(&self) -> Option<crate::investigate::LiveConfig> {
        Some((self.catalog.clone()?, self.playbooks.clone()?))
    }
}

/// Who may call the API and the dashboard: the configured bootstrap key (`--api-token`, an
/// admin), the stored keys, sessions of the configured length.
pub fn auth_settings(settings: &Settings) -> crate::web::auth::AuthSettings {
    use crate::web::auth::{AuthSettings, BootstrapKey};
    AuthSettings {
        bootstrap: settings
            .api_token
            .iter()
            .map(|t| BootstrapKey::new("api-token", crate::domain::Role::Admin, t.expose()))
            .collect(),
        session_ttl: settings.session_ttl,
        secure_cookies: settings
            .approvals
            .settings
            .public_url
            .as_deref()
            .is_some_and(|u| u.starts_with("https://")),
        proxy: settings.auth_proxy.clone(),
    }
}

pub struct Running {
    pub addr: SocketAddr,
    pub state: Arc<AppState>,
    server: JoinHandle<Result<(), std::io::Error>>,
    workers: JoinHandle<()>,
    /// The notification dispatcher and the mirror: each ends at shutdown once what it is
    /// doing is done, so a delivery or a write in flight (and its span) completes.
    background: Vec<JoinHandle<()>>,
    shutdown: CancellationToken,
}

/// How long `wait` gives the background tasks to finish what they are doing.
const BACKGROUND_GRACE: Duration = Duration::from_secs(10);

impl Running {
    /// Ask the daemon to stop (as SIGTERM does).
    pub fn shutdown(&self) {
        self.shutdown.cancel();
    }

    /// Wait until the server and the workers have stopped.
    pub async fn wait(self) -> Result<(), DaemonError> {
        let served = self.server.await;
        self.shutdown.cancel();
        if let Err(e) = self.workers.await {
            warn!(error = %e, "worker pool ended abnormally");
        }
        for task in self.background {
            match tokio::time::timeout(BACKGROUND_GRACE, task).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => warn!(error = %e, "a background task ended abnormally"),
                Err(_) => warn!(
                    grace_seconds = BACKGROUND_GRACE.as_secs(),
                    "a background task did not stop in time; it is left behind"
                ),
            }
        }
        match served {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(DaemonError::Serve(e)),
            Err(e) => Err(DaemonError::Serve(std::io::Error::other(e.to_string()))),
        }
    }
}

/// `kubemedic serve`: open the store, assemble the components on it, bind the listener and
/// start serving and working.
pub async fn serve(
    settings: &Settings,
    shutdown: CancellationToken,
) -> Result<Running, DaemonError> {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let store = open_store(settings, clock.clone()).await?;
    one_audit_key(settings, store.as_ref()).await?;
    info!(database = %settings.database.redacted(), "store ready");
    let components = serve_components(settings, store.clone()).await;
    let listener =
        TcpListener::bind(settings.listen)
            .await
            .map_err(|source| DaemonError::Bind {
                addr: settings.listen,
                source,
            })?;
    start_on(settings, components, shutdown, store, clock, listener).await
}

/// Replicas that share a database extend one audit chain, so they must sign it with one key.
/// Left to its default, each replica would create its own key file in its own data directory
/// and the chain would interleave rows no single key verifies (`audit verify` would call half of
/// them forged). The first daemon to serve a database records its key's id (not secret: every
/// audit row carries it); a daemon holding another key refuses to start, naming the setting.
///
/// A keyring whose first key is new and which still holds the database's key (`NEW,OLD`, see
/// docs/operations.md, "Rotate keys") rotates the trail to the new key here: one `key_rotated`
/// event signed with the old key. Replicas still running with the old key write nothing more
/// from then on (their appends are refused until they restart with the new keyring).
async fn one_audit_key(settings: &Settings, store: &dyn Store) -> Result<(), DaemonError> {
    let key = settings.audit_key.load()?;
    let ours = key.id().to_owned();
    let database = store
        .setting_or_init("audit_key_id", &|| ours.clone())
        .await?;
    if database == ours {
        return Ok(());
    }
    if key.find(&database).is_none() {
        return Err(DaemonError::AnotherAuditKey { database, ours });
    }
    let host = std::env::var("HOSTNAME").unwrap_or_default();
    let actor = format!(
        "kubemedic:{}",
        if host.is_empty() { "serve" } else { &host }
    );
    if let Some((old, new)) = store.rotate_audit_key(&actor).await? {
        info!(old_key = %old, new_key = %new, "audit key rotated: the retired key signed the hand-over");
    }
    Ok(())
}

/// Remediation history from the store: what verification recorded, for the investigation —
/// the target's history and the learned outcomes of a signature. It reads those and nothing
/// else.
pub struct StoreHistory {
    history: Arc<dyn crate::store::History>,
    patterns: Arc<dyn crate::store::Patterns>,
}

impl StoreHistory {
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self {
            history: store.clone(),
            patterns: store,
        }
    }
}

#[async_trait::async_trait]
impl RemediationHistory for StoreHistory {
    async fn records(
        &self,
        target: &Target,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<Vec<HistoryRecord>, HistoryError> {
        self.history
            .history(&target.fingerprint(), now - crate::history::HISTORY_WINDOW)
            .await
            .map_err(|e| HistoryError(e.to_string()))
    }

    async fn outcomes(
        &self,
        signature: &str,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<Vec<crate::domain::PatternOutcome>, HistoryError> {
        self.patterns
            .outcomes(signature, now - crate::history::patterns::LOOKBACK)
            .await
            .map_err(|e| HistoryError(e.to_string()))
    }
}

/// Like [`serve`], with the components, store and listener already made (the demo binds its own port).
pub async fn start_on(
    settings: &Settings,
    components: Components,
    shutdown: CancellationToken,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    listener: TcpListener,
) -> Result<Running, DaemonError> {
    let addr = listener.local_addr().map_err(|source| DaemonError::Bind {
        addr: settings.listen,
        source,
    })?;
    let metrics = components
        .metrics
        .clone()
        .unwrap_or_else(|| Arc::new(Metrics::new()));
    let wake = Arc::new(Notify::new());
    let writers = if store.serial_writes() { 1 } else { 4 };
    let ingest = IngestQueue::start(store.clone(), writers, wake.clone());

    let mut pipeline =
        Pipeline::new(clock.clone(), settings.max_wait).with_timeouts(settings.timeouts.clone());
    for stage in components.stages {
        pipeline = pipeline.with_stage(stage);
    }
    let workers = Arc::new(WorkerPool::new(
        store.clone(),
        Arc::new(pipeline),
        settings.workers,
        settings.lease,
        wake,
        metrics.clone(),
    ));
    let pipeline_actor = format!("worker/{}", workers.worker_id());
    info!(worker = %pipeline_actor, "pipeline ready");

    let state = Arc::new(AppState {
        store: store.clone(),
        metrics,
        clock: clock.clone(),
        ingest: ingest.clone(),
        webhook_auth: settings.webhook_auth.clone(),
        auth: auth_settings(settings),
        logins: Default::default(),
        catalog: components.dashboard.catalog.clone(),
        playbooks: components.dashboard.playbooks.clone(),
        policy: components.dashboard.policy.clone(),
        max_body_bytes: settings.max_body_bytes,
        limits: settings.http,
        stream_poll: settings.stream_poll,
        dependencies: components.dependencies,
        approvals: components.approvals.clone(),
        slack_signing_secret: settings.approvals.slack_signing_secret.clone(),
        cluster: components
            .reader
            .clone()
            .map(|reader| crate::mcp::ClusterAccess {
                reader,
                clock: clock.clone(),
                limits: settings.cluster.tool_limits.clone(),
                timeout: settings.investigate.llm.tool_timeout,
            }),
        chat: Some(Arc::new(crate::chat::ChatService::new(
            store,
            ingest,
            components.reader,
            components.approvals.clone(),
            clock,
            components.live,
        ))),
        shutdown: shutdown.clone(),
    });
    let mut background = Vec::new();
    if let Some(approvals) = components.approvals {
        let dispatcher = Arc::new(Dispatcher::new(approvals));
        background.push(tokio::spawn(dispatcher.run(shutdown.clone())));
    }
    // Start the store's audit listener now rather than with the first live stream (a watcher
    // starts it): that stream's first wait is woken too, and /metrics says from the start
    // whether notifications arrive.
    drop(state.store.watch_trail());
    if let Some(mirror) = components.mirror {
        background.push(tokio::spawn(mirror.run(shutdown.clone())));
    }
    let server = tokio::spawn(web::serve(listener, state.clone(), shutdown.clone()));
    let worker_stop = shutdown.clone();
    let workers = tokio::spawn(workers.run(worker_stop, Duration::from_secs(20)));
    info!(%addr, "listening");
    Ok(Running {
        addr,
        state,
        server,
        workers,
        background,
        shutdown,
    })
}

/// `/readyz` entry for the Kubernetes API: reachable (with its version), unreachable, or not
/// configured at all.
pub struct ClusterDependency {
    cluster: Option<Arc<dyn ClusterReader>>,
    problem: Option<String>,
}

impl ClusterDependency {
    pub fn connected(cluster: Arc<dyn ClusterReader>) -> Self {
        Self {
            cluster: Some(cluster),
            problem: None,
        }
    }
    pub fn missing(problem: String) -> Self {
        Self {
            cluster: None,
            problem: Some(problem),
        }
    }
}

#[async_trait::async_trait]
impl Dependency for ClusterDependency {
    fn name(&self) -> &'static str {
        "cluster"
    }
    async fn check(&self) -> DependencyStatus {
        let Some(cluster) = &self.cluster else {
            return DependencyStatus {
                ok: false,
                detail: format!(
                    "not configured: {}",
                    self.problem.as_deref().unwrap_or("no kubeconfig")
                ),
            };
        };
        let probe = tokio::time::timeout(Duration::from_secs(5), cluster.server_version()).await;
        match probe {
            Ok(Ok(v)) => DependencyStatus {
                ok: true,
                detail: format!("Kubernetes {v} reachable"),
            },
            Ok(Err(e)) => DependencyStatus {
                ok: false,
                detail: format!("unreachable: {e}"),
            },
            Err(_) => DependencyStatus {
                ok: false,
                detail: "unreachable: no answer within 5s".into(),
            },
        }
    }
}

/// The components `serve` runs with: the real cluster (if a kubeconfig or in-cluster config
/// can be found — never a simulated one), the approval policy (reloaded when its files change)
/// and every stage, on `store` (execution locks, intents and history live there).
pub async fn serve_components(settings: &Settings, store: Arc<dyn Store>) -> Components {
    let metrics = Arc::new(Metrics::new());
    let mut components = Components {
        metrics: Some(metrics.clone()),
        ..Default::default()
    };
    let gate = {
        let policy_settings = settings.policy.clone();
        let reporting = Some(metrics.clone());
        // Reading and compiling the policy is blocking work.
        match tokio::task::spawn_blocking(move || {
            RegoGate::from_settings(&policy_settings, reporting)
        })
        .await
        {
            Ok(gate) => Arc::new(gate),
            Err(e) => {
                warn!(error = %e, "loading the approval policy failed; loading it inline");
                Arc::new(RegoGate::from_settings(
                    &settings.policy,
                    Some(metrics.clone()),
                ))
            }
        }
    };
    gate.watch(RELOAD_INTERVAL);
    components.dashboard = DashboardParts::load(settings, Some(gate.clone()));
    components
        .dependencies
        .push(Arc::new(PolicyDependency::new(gate.clone())));
    match KubeCluster::connect(&settings.cluster.kube_options()).await {
        Ok(cluster) => {
            let cluster = Arc::new(cluster);
            info!("Kubernetes client configured");
            components.mirror = crate::mirror::Mirror::on_kube(
                cluster.client(),
                store.clone(),
                &settings.mirror,
                Arc::new(SystemClock),
                Some(metrics.clone()),
            );
            // What investigations read: the watch-backed cache, where staleness cannot make a
            // write wrong (docs/adr/0038-watch-cache.md). Approvals, execution and
            // verification read the API server.
            let investigating: Arc<dyn ClusterReader> = if settings.cluster.watch_cache {
                let cache = WatchCache::start(cluster.clone());
                cache.report_to(metrics.clone());
                components
                    .dependencies
                    .push(Arc::new(CacheDependency(cache.clone())));
                components.cache = Some(cache.clone());
                Arc::new(CachedReader::new(cache, cluster.clone()))
            } else {
                cluster.clone()
            };
            components.reader = Some(investigating.clone());
            components.stages.push(Arc::new(
                EnrichmentStage::new(
                    investigating.clone(),
                    gate.clone(),
                    settings.enrich.default_environment.clone(),
                )
                .with_memory(store.clone()),
            ));
            components
                .dependencies
                .push(Arc::new(ClusterDependency::connected(cluster.clone())));
            let clock: Arc<dyn Clock> = Arc::new(SystemClock);
            if settings.cluster.custom_resources
                && let Some(config) = components.dashboard.live()
            {
                crate::resources::Resources::new(
                    cluster.client(),
                    settings.cluster.own_namespace.clone(),
                    (
                        settings.investigate.catalog_dir.clone(),
                        settings.investigate.playbooks_dir.clone(),
                    ),
                    config,
                    gate.clone(),
                    store.clone(),
                    clock.clone(),
                )
                .spawn();
                info!(namespace = %settings.cluster.own_namespace, "watching kubemedic's custom resources");
            }
            let history = Arc::new(StoreHistory::new(store.clone()));
            let (stages, investigator) = investigation_stages(
                settings,
                &components.dashboard,
                investigating,
                (cluster.clone(), cluster.clone()),
                clock.clone(),
                history,
                crate::investigate::Observers {
                    metrics: Some(metrics.clone()),
                    live: Some(components.live.clone()),
                    remote: remote_tools(&settings.mcp_client),
                },
            );
            components.stages.extend(stages);
            components.dependencies.push(investigator);
            components
                .stages
                .push(gate_stage(gate.clone(), &settings.gate));
            if let Some(approvals) = approval_service(
                settings,
                &components.dashboard,
                store.clone(),
                clock.clone(),
                Some(metrics.clone()),
                gate.clone(),
                Some((cluster.clone(), cluster.clone(), clock.clone())),
            )
            .await
            {
                components
                    .stages
                    .push(Arc::new(ApprovalStage(approvals.clone())));
                components.approvals = Some(approvals);
            }
            let parts = components.dashboard.clone();
            components.stages.extend(execution_stages(
                settings,
                &parts,
                (cluster.clone(), cluster, clock.clone()),
                store,
                clock,
                Some(metrics),
            ));
        }
        Err(e) => {
            warn!(error = %e, "no Kubernetes configuration; requests will wait for a cluster");
            components.stages.push(Arc::new(NoCluster {
                problem: e.to_string(),
            }));
            components
                .dependencies
                .push(Arc::new(ClusterDependency::missing(e.to_string())));
        }
    }
    components
}

/// Enrichment without a cluster: every request waits for one, as for an unreachable cluster
/// (`/readyz` says why), and after `--max-wait-seconds` ends in review naming the missing
/// cluster — rather than ending at once as if the stage did not exist.
struct NoCluster {
    problem: String,
}

#[async_trait::async_trait]
impl Stage for NoCluster {
    fn phase(&self) -> Phase {
        Phase::Enriching
    }
    async fn run(&self, _: &RemediationRequest) -> Result<StageOutcome, StageError> {
        Err(StageError::Unavailable {
            dependency: "cluster".into(),
            message: format!("no Kubernetes cluster is configured ({})", self.problem),
        })
    }
}

/// The configured MCP servers' tools for invocation 1 (`None` when no server is configured),
/// their first listing started now so the first investigation finds it ready. A client that
/// cannot be built is logged and left out: the investigation runs with the cluster tools.
pub fn remote_tools(
    settings: &crate::mcp_client::McpClientSettings,
) -> Option<Arc<crate::mcp_client::RemoteTools>> {
    if settings.is_empty() {
        return None;
    }
    match crate::mcp_client::RemoteTools::new(settings) {
        Ok(remote) => {
            let remote = Arc::new(remote);
            info!(servers = ?remote.server_names(), allowlisted = settings.allow.len(), "MCP servers' tools configured for the model");
            let first = remote.clone();
            tokio::spawn(async move {
                let offer = first.offer().await;
                info!(
                    tools = offer.tools.len(),
                    unavailable = offer.unavailable.len(),
                    "MCP servers listed"
                );
            });
            Some(remote)
        }
        Err(e) => {
            tracing::error!(error = %e, "the MCP client could not be built: the model gets the cluster tools only");
            None
        }
    }
}

/// The investigation and selection stages on a cluster, with the configured investigator, and
/// its `/readyz` entry. A catalog or playbook that does not load leaves the stages out
/// (requests then end in review, "investigation not available"), logged and shown on `/readyz`.
/// They judge on `reader` (a watch-backed cache may serve it); the selection's dry runs write
/// through `writer` what they read from `write_reader` (the API server).
pub fn investigation_stages(
    settings: &Settings,
    parts: &DashboardParts,
    reader: Arc<dyn ClusterReader>,
    (write_reader, writer): (
        Arc<dyn ClusterReader>,
        Arc<dyn crate::cluster::ClusterWriter>,
    ),
    clock: Arc<dyn Clock>,
    history: Arc<dyn RemediationHistory>,
    observers: crate::investigate::Observers,
) -> (Vec<Arc<dyn Stage>>, Arc<dyn Dependency>) {
    let Some(config) = parts.live() else {
        return (
            vec![],
            Arc::new(InvestigatorDependency(Err(
                "the catalog or the playbooks do not load (see the log)".into(),
            ))),
        );
    };
    match crate::investigate::build_with(
        &settings.investigate,
        config,
        reader.clone(),
        clock.clone(),
        settings.cluster.tool_limits.clone(),
        history,
        observers,
    ) {
        Ok(built) => {
            let investigator = built.investigator;
            info!(investigator = %investigator.name(), "investigator ready");
            let prometheus = settings.verify.prometheus.clone().and_then(|e| {
                PrometheusClient::new(e)
                    .map_err(|e| {
                        warn!(error = %e, "Prometheus will not be asked whether a problem is resolved");
                    })
                    .ok()
                    .map(Arc::new)
            });
            let prover = Arc::new(
                Prover::new(reader, Some(writer), built.catalog, clock)
                    .with_write_reads(write_reader)
                    .with_prometheus(prometheus),
            );
            (
                vec![
                    Arc::new(InvestigationStage(investigator.clone())),
                    Arc::new(SelectionStage::new(investigator, prover)),
                ],
                Arc::new(InvestigatorDependency(Ok(built.llm))),
            )
        }
        Err(e) => {
            tracing::error!(error = %e, "investigator not available");
            (vec![], Arc::new(InvestigatorDependency(Err(e.to_string()))))
        }
    }
}

/// `/readyz` entry `investigator`: offline, the model's last call and the day's token budget,
/// or why the investigator could not be built.
pub struct InvestigatorDependency(Result<Option<Arc<LlmStatus>>, String>);

#[async_trait::async_trait]
impl Dependency for InvestigatorDependency {
    fn name(&self) -> &'static str {
        "investigator"
    }
    async fn check(&self) -> DependencyStatus {
        let (ok, detail) = match &self.0 {
            Ok(None) => (
                true,
                "offline investigator (no model configured)".to_owned(),
            ),
            Ok(Some(llm)) => llm.status(),
            Err(e) => (false, format!("not available: {e}")),
        };
        DependencyStatus { ok, detail }
    }
}

/// The Executing and Verifying stages on a cluster. A catalog that does not load leaves them
/// out (requests then end in review, "execution not available"), logged. The cluster's clock
/// is the time its state is judged by before the first write (the system's, but for a
/// snapshot frozen at its capture).
pub fn execution_stages(
    settings: &Settings,
    parts: &DashboardParts,
    (reader, writer, cluster_clock): ProvingCluster,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    metrics: Option<Arc<Metrics>>,
) -> Vec<Arc<dyn Stage>> {
    let Some(catalog) = parts.catalog.clone() else {
        tracing::error!("execution not available: the catalog does not load");
        return vec![];
    };
    if settings.execute.dry_run {
        warn!("dry run: changes go to the API server with dryRun=All; nothing is changed");
    }
    let prover = Arc::new(Prover::new(
        reader.clone(),
        None,
        catalog.clone(),
        cluster_clock,
    ));
    let mut execute = ExecutionStage::new(
        reader.clone(),
        writer,
        store.clone(),
        catalog,
        clock.clone(),
        settings.execute.clone(),
    )
    .with_prover(prover);
    let mut verify = VerificationStage::new(reader, store, clock, settings.verify.clone());
    if let Some(gate) = parts.policy.clone() {
        verify = verify.with_policy(gate);
    }
    if let Some(m) = metrics {
        execute = execute.with_metrics(m.clone());
        verify = verify.with_metrics(m);
    }
    vec![Arc::new(execute), Arc::new(verify)]
}

/// The cluster an approver's alternative is proven against: its reader, the writer its dry run
/// goes through, and the time its state is judged by.
pub type ProvingCluster = (
    Arc<dyn ClusterReader>,
    Arc<dyn crate::cluster::ClusterWriter>,
    Arc<dyn Clock>,
);

/// Human approvals, when somebody may approve (`--approvers`, `--slack-approvers`): the link
/// key (configured, or generated once and kept in the store), the catalog (an approver's
/// alternative is checked against it) and the notifiers. `None` otherwise, and then a request
/// the gate sends to a human ends "human approval not available", as it should when nobody
/// could decide.
pub async fn approval_service(
    settings: &Settings,
    parts: &DashboardParts,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    metrics: Option<Arc<Metrics>>,
    policy: Arc<RegoGate>,
    cluster: Option<ProvingCluster>,
) -> Option<Arc<Approvals>> {
    let config = &settings.approvals;
    if !config.enabled() {
        return None;
    }
    let Some(catalog) = parts.catalog.clone() else {
        tracing::error!("approvals not available: the catalog does not load");
        return None;
    };
    let key = match &config.link_signing_key {
        Some(k) => k.clone(),
        None => match store
            .setting_or_init("link_signing_key", &LinkSigner::generate_key)
            .await
        {
            Ok(k) => crate::secret::Secret::new(k),
            Err(e) => {
                tracing::error!(error = %e, "approvals not available: no link signing key");
                return None;
            }
        },
    };
    let (notifiers, slack) = match approval_notifiers(config, clock.clone()) {
        Ok(n) => n,
        Err(e) => {
            tracing::error!(error = %e, "approvals not available: a notifier cannot be built");
            return None;
        }
    };
    info!(
        approvers = config.settings.approvers.len(),
        slack_approvers = config.settings.slack_approvers.len(),
        channels = notifiers.len(),
        "approvals ready"
    );
    let prover = cluster.map(|(reader, writer, cluster_clock)| {
        Arc::new(Prover::new(
            reader,
            Some(writer),
            catalog.clone(),
            cluster_clock,
        ))
    });
    Some(Arc::new(Approvals {
        store: store.into(),
        settings: config.settings.clone(),
        notifiers,
        signer: LinkSigner::new(key),
        catalog,
        clock,
        metrics,
        wake: Arc::new(Notify::new()),
        slack,
        policy: Arc::new(PolicyOnAlternatives {
            gate: policy,
            confidence_threshold: settings.gate.confidence_threshold,
        }),
        prover,
    }))
}

/// The approval policy on an alternative an approver picks: the gate's input for the request
/// with that workflow selected, decided by the same (hot-reloaded) policy.
struct PolicyOnAlternatives {
    gate: Arc<RegoGate>,
    confidence_threshold: f64,
}

#[async_trait::async_trait]
impl crate::approval::AlternativeGate for PolicyOnAlternatives {
    async fn decide(
        &self,
        request: &crate::domain::RemediationRequest,
        chosen: &crate::domain::SelectedWorkflow,
    ) -> Option<(crate::policy::GateInput, crate::domain::GateDecision)> {
        let mut request = request.clone();
        request.state.selection.as_mut()?.selected = Some(chosen.clone());
        let input = crate::gate::input_for(&request, self.confidence_threshold)?;
        let decision = self.gate.decide(&input).await;
        Some((input, decision))
    }
}

type Notifiers = (Vec<Arc<dyn Notifier>>, Option<Arc<SlackNotifier>>);

/// The e-mail and Slack notifiers the configuration asks for.
fn approval_notifiers(
    config: &crate::config::ApprovalConfig,
    clock: Arc<dyn Clock>,
) -> Result<Notifiers, crate::notify::SettingsError> {
    let mut notifiers: Vec<Arc<dyn Notifier>> = Vec::new();
    if let Some(email) = &config.email {
        notifiers.push(Arc::new(EmailNotifier::new(email, clock.clone())?));
    }
    let mut slack_notifier = None;
    if let Some(slack) = &config.slack {
        let n = Arc::new(SlackNotifier::new(slack, clock)?);
        notifiers.push(n.clone());
        slack_notifier = Some(n);
    }
    Ok((notifiers, slack_notifier))
}

/// The Enriching stage: namespace labels and the enrichment policy.
pub fn enrichment_stage(
    reader: Arc<dyn ClusterReader>,
    gate: Arc<RegoGate>,
    settings: &EnrichSettings,
) -> Arc<dyn Stage> {
    Arc::new(EnrichmentStage::new(
        reader,
        gate,
        settings.default_environment.clone(),
    ))
}

/// The Gating stage: the approval policy decides on the selected workflow.
pub fn gate_stage(gate: Arc<RegoGate>, settings: &GateSettings) -> Arc<dyn Stage> {
    Arc::new(GateStage::new(gate, settings.clone()))
}

/// Stages `kubemedic investigate` runs besides investigation and selection — enrichment and
/// the gate — built the way `serve` builds them, on the policy loaded once (not watched).
pub fn command_stages(parts: &GateParts, reader: Arc<dyn ClusterReader>) -> Vec<Arc<dyn Stage>> {
    let gate = Arc::new(RegoGate::from_settings(&parts.policy, None));
    if let Some(problem) = gate.problem() {
        warn!(problem = %problem, "approval policy degraded: every remediation will require approval");
    }
    vec![
        enrichment_stage(reader, gate.clone(), &parts.enrich),
        gate_stage(gate, &parts.gate),
    ]
}

/// Cancel `token` on SIGTERM or SIGINT.
pub fn cancel_on_signals(token: CancellationToken) {
    tokio::spawn(async move {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        {
            let mut term =
                match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                    Ok(s) => s,
                    Err(e) => {
                        warn!(error = %e, "cannot listen for SIGTERM");
                        let _ = ctrl_c.await;
                        token.cancel();
                        return;
                    }
                };
            tokio::select! {
                _ = ctrl_c => info!("SIGINT: shutting down"),
                _ = term.recv() => info!("SIGTERM: shutting down"),
            }
        }
        #[cfg(not(unix))]
        {
            let _ = ctrl_c.await;
        }
        token.cancel();
    });
}
