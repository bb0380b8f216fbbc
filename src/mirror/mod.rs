//! Requests visible with kubectl: each remediation request mirrored as a namespaced
//! `Remediation` object (kubemedic.io/v1alpha1, charts/kubemedic/crds), so `kubectl get
//! remediations -A` lists them and `kubectl describe` shows their timeline and phase Events.
//!
//! Input: the store — the requests changed since a watermark on the audit trail
//! ([`crate::store::Audit::changed_requests`]), each read whole with its trail. Output: the
//! objects, through [`RemediationObjects`] ([`KubeRemediations`] on a real cluster): created
//! when missing, their status written through the status subresource, their phase label kept,
//! an Event per phase entered.
//!
//! Invariants:
//! - The store is the source of truth; the objects are a view of it. A write that fails is
//!   logged, counted (`kubemedic_remediation_mirror_writes{op,result}`) and retried with a
//!   backoff; it never blocks or fails a request (the mirror runs beside the pipeline and
//!   the pipeline never waits for it).
//! - Every replica may write: an object is a function of the stored request
//!   ([`object::remediation`]), so two replicas write the same content; a write is skipped when
//!   the object shows it already, refused when it shows a later view (`auditEventId`), and
//!   conditional on the version read; a delete of an object already gone is no error.
//! - Bounded: a timeline of the last events; a finished request's object is deleted once it
//!   has not changed for the retention period, and a finished request older than that is not
//!   mirrored again. Nothing secret reaches an object (`crate::redact`).

pub mod kube;
pub mod object;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument as _, debug, info, warn};
use uuid::Uuid;

pub use self::kube::KubeRemediations;
pub use self::object::{PhaseEvent, Remediation};
use crate::clock::Clock;
use crate::domain::Phase;
use crate::store::{RequestFilter, Store, StoreError};
use crate::telemetry::Metrics;

/// The mirror's settings, as configured (`--mirror-*`, `--public-url`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorSettings {
    pub enabled: bool,
    /// The namespace of objects whose request has no namespaced target; `None`: the client's
    /// default (the pod's own namespace in a cluster).
    pub namespace: Option<String>,
    /// How long a finished request's object stays after its last change.
    pub retention: Duration,
    /// The dashboard's base URL, for each object's link.
    pub dashboard: Option<String>,
}

impl MirrorSettings {
    pub const DEFAULT_RETENTION_SECONDS: u64 = 86_400;
}

impl Default for MirrorSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            namespace: None,
            retention: Duration::from_secs(Self::DEFAULT_RETENTION_SECONDS),
            dashboard: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum MirrorError {
    #[error(
        "the API server does not serve remediations.kubemedic.io: install the CRD \
         (kubectl apply -f charts/kubemedic/crds/) or turn the mirror off \
         (--mirror-remediations): {0}"
    )]
    NotInstalled(String),
    #[error("namespace {0} does not exist")]
    NoNamespace(String),
    #[error("the Kubernetes API answered {0}")]
    Api(String),
    #[error("reading the request: {0}")]
    Store(#[from] StoreError),
}

pub type Result<T, E = MirrorError> = std::result::Result<T, E>;

/// An object as written: where it is, and the phase its label said before (`None`: it was
/// created by this write).
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    pub namespace: String,
    pub name: String,
    pub uid: Option<String>,
    pub before: Option<String>,
    /// The object showed a later view of the request already (another replica's), and was
    /// left as it was.
    pub outdated: bool,
}

/// A mirrored object as listed.
#[derive(Debug, Clone, PartialEq)]
pub struct Mirrored {
    pub namespace: String,
    pub name: String,
    pub request_id: Option<Uuid>,
    pub phase: Option<Phase>,
    pub updated_at: Option<DateTime<Utc>>,
}

/// The cluster's `Remediation` objects: what the mirror writes to.
#[async_trait]
pub trait RemediationObjects: Send + Sync {
    /// Create the object when it is missing, write its status through the status subresource
    /// (unless the object shows the same or a later view of the request already) and set its
    /// labels.
    async fn write(&self, object: &Remediation) -> Result<Written>;
    /// Every object kubemedic mirrored, in every namespace.
    async fn list(&self) -> Result<Vec<Mirrored>>;
    /// Delete an object; one that is gone already is no error.
    async fn delete(&self, namespace: &str, name: &str) -> Result<()>;
    /// Publish an Event about a written object.
    async fn publish(&self, about: &Written, event: &PhaseEvent) -> Result<()>;
}

/// Requests whose write is pending at most; more are dropped (logged) until they change again.
const MAX_PENDING: usize = 10_000;
/// Changed requests read from the store at once.
const FEED_PAGE: i64 = 500;
/// Writes in one round; the rest wait for the next.
const WRITES_PER_ROUND: usize = 200;
/// The longest wait before a failed write is tried again.
const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// How often a run of failures is summarised in the log.
const COMPLAINT_INTERVAL: Duration = Duration::from_secs(60);

/// The mirror: follows the store, writes the objects, deletes the expired ones.
pub struct Mirror {
    store: Arc<dyn Store>,
    objects: Arc<dyn RemediationObjects>,
    own_namespace: String,
    settings: MirrorSettings,
    clock: Arc<dyn Clock>,
    metrics: Option<Arc<Metrics>>,
    interval: Duration,
    complaints: Complaints,
}

/// A request whose object is to be written, and when.
#[derive(Debug, Clone, Copy)]
struct Pending {
    failures: u32,
    due: Instant,
}

/// What one mirror remembers between rounds.
struct Progress {
    /// The last audit event followed.
    watermark: i64,
    pending: HashMap<Uuid, Pending>,
    next_sweep: Instant,
}

impl Mirror {
    /// How often the store is asked what changed.
    pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(2);

    pub fn new(
        store: Arc<dyn Store>,
        objects: Arc<dyn RemediationObjects>,
        own_namespace: String,
        settings: MirrorSettings,
        clock: Arc<dyn Clock>,
        metrics: Option<Arc<Metrics>>,
    ) -> Self {
        Self {
            store,
            objects,
            own_namespace,
            settings,
            clock,
            metrics,
            interval: Self::DEFAULT_INTERVAL,
            complaints: Complaints::default(),
        }
    }

    /// The mirror on a real cluster, when the settings turn it on: objects of requests without
    /// a namespaced target go to the configured namespace, or the client's default.
    pub fn on_kube(
        client: ::kube::Client,
        store: Arc<dyn Store>,
        settings: &MirrorSettings,
        clock: Arc<dyn Clock>,
        metrics: Option<Arc<Metrics>>,
    ) -> Option<Arc<Self>> {
        if !settings.enabled {
            return None;
        }
        let own = settings
            .namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_owned());
        Some(Arc::new(Self::new(
            store,
            Arc::new(KubeRemediations::new(client)),
            own,
            settings.clone(),
            clock,
            metrics,
        )))
    }

    pub fn with_interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// Follow the store until `shutdown`: first what is active or recent, then every change.
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken) {
        info!(
            namespace = %self.own_namespace,
            retention_seconds = self.settings.retention.as_secs(),
            "mirroring requests as Remediation objects"
        );
        // Changes from here on come from the audit trail; what came before, from the list.
        let watermark = loop {
            match self.store.audit_head().await {
                Ok(head) => break head,
                Err(e) => {
                    self.complain("reading the audit trail", &e);
                    if stopped(&shutdown, self.interval).await {
                        return;
                    }
                }
            }
        };
        let mut progress = Progress {
            watermark,
            pending: HashMap::new(),
            next_sweep: Instant::now(),
        };
        self.catch_up(&mut progress).await;
        loop {
            self.round(&mut progress, &shutdown).await;
            if stopped(&shutdown, self.interval).await {
                return;
            }
        }
    }

    /// One round: read what changed, write what is due, and sweep when it is time.
    async fn round(&self, progress: &mut Progress, shutdown: &CancellationToken) {
        self.follow(progress).await;
        self.write_due(progress, shutdown).await;
        let now = Instant::now();
        if progress.next_sweep <= now {
            self.sweep(progress).await;
            progress.next_sweep = now + self.sweep_interval();
        }
    }

    /// Half the retention, between a second and a minute.
    fn sweep_interval(&self) -> Duration {
        (self.settings.retention / 2).clamp(Duration::from_secs(1), Duration::from_secs(60))
    }

    /// The requests that are still running, and those changed within the retention period.
    async fn catch_up(&self, progress: &mut Progress) {
        let mut filters: Vec<RequestFilter> = Phase::RUNNABLE
            .into_iter()
            .map(|phase| RequestFilter {
                phase: Some(phase),
                ..Default::default()
            })
            .collect();
        let retention = chrono::Duration::from_std(self.settings.retention)
            .unwrap_or(chrono::Duration::days(1));
        filters.push(RequestFilter {
            since: Some(self.clock.now() - retention),
            ..Default::default()
        });
        for mut filter in filters {
            filter.limit = 200;
            loop {
                let page = match self.store.list_requests(&filter).await {
                    Ok(p) => p,
                    Err(e) => {
                        self.complain("listing requests to mirror", &e);
                        break;
                    }
                };
                for r in &page.items {
                    progress.want(r.id, &self.complaints);
                }
                match page.next {
                    Some(next) if progress.pending.len() < MAX_PENDING => {
                        filter.before = Some(next)
                    }
                    _ => break,
                }
            }
        }
        debug!(
            requests = progress.pending.len(),
            "requests to mirror at start"
        );
    }

    /// Every request the audit trail says changed since the watermark becomes due.
    async fn follow(&self, progress: &mut Progress) {
        loop {
            let changed = match self
                .store
                .changed_requests(progress.watermark, FEED_PAGE)
                .await
            {
                Ok(c) => c,
                Err(e) => {
                    self.complain("reading what changed", &e);
                    return;
                }
            };
            for (last, id) in &changed {
                progress.watermark = *last;
                progress.want(*id, &self.complaints);
            }
            if changed.len() < FEED_PAGE as usize {
                return;
            }
        }
    }

    async fn write_due(&self, progress: &mut Progress, shutdown: &CancellationToken) {
        let now = Instant::now();
        let mut due: Vec<(Instant, Uuid)> = progress
            .pending
            .iter()
            .filter(|(_, p)| p.due <= now)
            .map(|(id, p)| (p.due, *id))
            .collect();
        due.sort();
        for (_, id) in due.into_iter().take(WRITES_PER_ROUND) {
            if shutdown.is_cancelled() {
                return;
            }
            match self.mirror(id).await {
                Ok(()) => {
                    progress.pending.remove(&id);
                    if self.complaints.recovered() {
                        // The cluster takes writes again (the CRD installed, the role
                        // granted): what was backing off is due now.
                        let now = Instant::now();
                        for p in progress.pending.values_mut() {
                            p.due = now;
                        }
                    }
                }
                Err(e) => {
                    self.count("write", "failed");
                    self.complain(&format!("mirroring request {id}"), &e);
                    if let Some(p) = progress.pending.get_mut(&id) {
                        p.failures = p.failures.saturating_add(1);
                        p.due = Instant::now() + backoff(self.interval, p.failures);
                    }
                }
            }
        }
    }

    /// Write one request's object (and announce the phases it entered).
    pub async fn mirror(&self, id: Uuid) -> Result<()> {
        let Some(request) = self.store.get_request(id).await? else {
            return Ok(());
        };
        if request.phase.is_terminal() && self.expired(request.updated_at) {
            // Finished long ago: its object is the sweep's to delete, not to bring back.
            return Ok(());
        }
        // The writes are spans of the request's trace, under a span of their own.
        let span = tracing::info_span!(
            target: crate::telemetry::TRACE_TARGET,
            "mirror",
            otel.name = "mirror Remediation",
            kubemedic.request_id = %id,
            kubemedic.phase = request.phase.as_str(),
        );
        crate::telemetry::continue_trace(&span, &request.trace);
        self.mirror_request(request).instrument(span).await
    }

    async fn mirror_request(&self, request: crate::domain::RemediationRequest) -> Result<()> {
        let id = request.id;
        let trail = self.store.audit_trail(id).await?;
        let dashboard = self.settings.dashboard.as_deref();
        let namespace = object::namespace_for(&request, &self.own_namespace);
        let mut desired = object::remediation(&request, &trail, &namespace, dashboard);
        let written = match self.objects.write(&desired).await {
            // The target's namespace is gone: the request shows in kubemedic's own.
            Err(MirrorError::NoNamespace(_)) if namespace != self.own_namespace => {
                desired = object::remediation(&request, &trail, &self.own_namespace, dashboard);
                self.objects.write(&desired).await?
            }
            other => other?,
        };
        self.count("write", "ok");
        if !written.outdated && written.before.as_deref() != Some(request.phase.as_str()) {
            for event in object::phase_events(&trail, written.before.as_deref()) {
                match self.objects.publish(&written, &event).await {
                    Ok(()) => self.count("event", "ok"),
                    Err(e) => {
                        self.count("event", "failed");
                        debug!(request_id = %id, error = %e, "phase Event not published");
                    }
                }
            }
        }
        Ok(())
    }

    /// Delete the objects of requests finished longer than the retention ago; bring back due
    /// any unfinished object that is behind its request (a change no replica mirrored).
    async fn sweep(&self, progress: &mut Progress) {
        let objects = match self.objects.list().await {
            Ok(o) => o,
            Err(e) => {
                self.count("list", "failed");
                self.complain("listing the Remediation objects", &e);
                return;
            }
        };
        for o in objects {
            let finished = o.phase.is_some_and(Phase::is_terminal);
            if finished {
                if o.updated_at.is_some_and(|t| self.expired(t)) {
                    match self.objects.delete(&o.namespace, &o.name).await {
                        Ok(()) => {
                            self.count("delete", "ok");
                            debug!(namespace = %o.namespace, name = %o.name, "finished request's object deleted after its retention");
                        }
                        Err(e) => {
                            self.count("delete", "failed");
                            self.complain(&format!("deleting {}/{}", o.namespace, o.name), &e);
                        }
                    }
                }
                continue;
            }
            let Some(id) = o.request_id else { continue };
            match self.store.get_request(id).await {
                Ok(Some(r)) if Some(r.updated_at) != o.updated_at => {
                    progress.want(id, &self.complaints)
                }
                Ok(_) => {}
                Err(e) => self.complain("reading a mirrored request", &e),
            }
        }
    }

    fn expired(&self, updated_at: DateTime<Utc>) -> bool {
        chrono::Duration::from_std(self.settings.retention)
            .is_ok_and(|r| updated_at + r < self.clock.now())
    }

    fn count(&self, op: &str, result: &str) {
        if let Some(m) = &self.metrics {
            m.mirror_write(op, result);
        }
    }

    fn complain(&self, what: &str, error: &dyn std::fmt::Display) {
        self.complaints.failed(what, error);
    }
}

impl Progress {
    /// Make `id` due now (a request failing already keeps its backoff).
    fn want(&mut self, id: Uuid, complaints: &Complaints) {
        if self.pending.contains_key(&id) {
            return;
        }
        if self.pending.len() >= MAX_PENDING {
            complaints.failed(
                &format!("queueing request {id}"),
                &format!("{MAX_PENDING} requests are waiting to be mirrored already"),
            );
            return;
        }
        self.pending.insert(
            id,
            Pending {
                failures: 0,
                due: Instant::now(),
            },
        );
    }
}

/// The wait after `failures` failed writes: the interval doubled each time, at most
/// [`MAX_BACKOFF`].
fn backoff(interval: Duration, failures: u32) -> Duration {
    interval
        .saturating_mul(2u32.saturating_pow(failures.min(16)))
        .min(MAX_BACKOFF)
}

/// Sleep `interval`; true when `shutdown` fired first.
async fn stopped(shutdown: &CancellationToken, interval: Duration) -> bool {
    tokio::select! {
        _ = shutdown.cancelled() => true,
        _ = tokio::time::sleep(interval) => false,
    }
}

/// Failures in the log without a line per failed write: the first of a run at once, then a
/// summary at most every [`COMPLAINT_INTERVAL`], and one line when writes succeed again.
#[derive(Default)]
struct Complaints(Mutex<Run>);

#[derive(Default)]
struct Run {
    failures: u64,
    last_report: Option<std::time::Instant>,
}

impl Complaints {
    fn failed(&self, what: &str, error: &dyn std::fmt::Display) {
        let Ok(mut run) = self.0.lock() else { return };
        run.failures += 1;
        let due = run
            .last_report
            .is_none_or(|t| t.elapsed() >= COMPLAINT_INTERVAL);
        if due {
            warn!(
                failures = run.failures,
                error = %error,
                "Remediation mirror: {what} failed; requests go on, the write is retried"
            );
            run.last_report = Some(std::time::Instant::now());
        }
    }

    /// A write succeeded: true when it ends a run of failures.
    fn recovered(&self) -> bool {
        let Ok(mut run) = self.0.lock() else {
            return false;
        };
        if run.failures == 0 {
            return false;
        }
        info!(failures = run.failures, "Remediation mirror: writing again");
        *run = Run::default();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_writes_back_off_to_five_minutes() {
        let i = Duration::from_secs(2);
        assert_eq!(backoff(i, 1), Duration::from_secs(4));
        assert_eq!(backoff(i, 3), Duration::from_secs(16));
        assert_eq!(backoff(i, 9), MAX_BACKOFF);
        assert_eq!(backoff(i, u32::MAX), MAX_BACKOFF);
    }
}
