//! The durable worker pool.
//!
//! Claims runnable requests from the store (a lease, renewed while a stage runs), drives each
//! through [`Pipeline::step`] and commits every step with its audit events. Bounded by a
//! semaphore. A crash leaves leases behind; they lapse and any worker (this process after a
//! restart, or another replica) resumes the request from its last committed phase. On shutdown
//! no new request is claimed, in-flight steps finish and commit, and claims are released.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, error, info, info_span, warn};

use super::{Pipeline, Step};
use crate::domain::RemediationRequest;
use crate::store::{StepCommit, Store};
use crate::telemetry::Metrics;

pub struct WorkerPool {
    store: Arc<dyn Store>,
    pipeline: Arc<Pipeline>,
    worker_id: String,
    concurrency: usize,
    lease: Duration,
    poll: Duration,
    wake: Arc<Notify>,
    metrics: Arc<Metrics>,
}

impl WorkerPool {
    pub fn new(
        store: Arc<dyn Store>,
        pipeline: Arc<Pipeline>,
        concurrency: usize,
        lease: Duration,
        wake: Arc<Notify>,
        metrics: Arc<Metrics>,
    ) -> Self {
        let worker_id = format!(
            "{}-{}",
            hostname(),
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        Self {
            store,
            pipeline,
            worker_id,
            concurrency: concurrency.max(1),
            lease,
            poll: Duration::from_secs(1),
            wake,
            metrics,
        }
    }

    pub fn worker_id(&self) -> &str {
        &self.worker_id
    }

    /// Run until `shutdown` is cancelled, then let in-flight steps commit (at most `grace`).
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken, grace: Duration) {
        let permits = Arc::new(Semaphore::new(self.concurrency));
        let mut tasks = JoinSet::new();
        info!(worker = %self.worker_id, concurrency = self.concurrency, "worker pool started");
        loop {
            while tasks.try_join_next().is_some() {}
            let permit = tokio::select! {
                p = permits.clone().acquire_owned() => match p {
                    Ok(p) => p,
                    Err(_) => break,
                },
                _ = shutdown.cancelled() => break,
            };
            match self.store.claim(&self.worker_id, self.lease).await {
                Ok(Some(request)) => {
                    let me = self.clone();
                    let stop = shutdown.clone();
                    let span = info_span!("request", request_id = %request.id);
                    tasks.spawn(
                        async move {
                            me.drive(request, stop).await;
                            drop(permit);
                        }
                        .instrument(span),
                    );
                }
                Ok(None) => {
                    drop(permit);
                    tokio::select! {
                        _ = self.wake.notified() => {}
                        _ = tokio::time::sleep(self.poll) => {}
                        _ = shutdown.cancelled() => break,
                    }
                }
                Err(e) => {
                    drop(permit);
                    warn!(error = %e, "cannot claim work; retrying");
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_secs(2)) => {}
                        _ = shutdown.cancelled() => break,
                    }
                }
            }
        }
        info!(in_flight = tasks.len(), "worker pool stopping");
        let drained =
            tokio::time::timeout(grace, async { while tasks.join_next().await.is_some() {} }).await;
        if drained.is_err() {
            warn!("in-flight requests did not finish in time; their leases will lapse");
            tasks.abort_all();
        }
    }

    /// Drive one claimed request until it is released: terminal, waiting, handed to a human, or
    /// the process is stopping.
    async fn drive(&self, mut request: RemediationRequest, shutdown: CancellationToken) {
        loop {
            let from = request.phase;
            let started = std::time::Instant::now();
            let step = self.step_with_heartbeat(&request).await;
            let commit = match step {
                Step::Move {
                    to,
                    reason,
                    state,
                    events,
                } => StepCommit {
                    release: !to.is_runnable() || shutdown.is_cancelled(),
                    to,
                    reason,
                    state,
                    attempts: 0,
                    not_before: None,
                    events,
                },
                Step::Wait {
                    state,
                    not_before,
                    events,
                } => StepCommit {
                    to: from,
                    reason: state
                        .waiting
                        .as_ref()
                        .map(|w| format!("waiting for {}: {}", w.dependency, w.message)),
                    state,
                    attempts: request.attempts.saturating_add(1),
                    not_before: Some(not_before),
                    release: true,
                    events,
                },
            };
            let to = commit.to;
            let release = commit.release;
            match self
                .store
                .commit_step(request.id, &self.worker_id, from, commit)
                .await
            {
                Ok(Some(updated)) => {
                    self.metrics.observe_stage(from, started.elapsed());
                    if to != from {
                        self.metrics.transition(to);
                        info!(from = %from, to = %to, reason = updated.reason.as_deref().unwrap_or(""), "phase changed");
                    } else {
                        debug!(phase = %from, "waiting");
                    }
                    if release {
                        return;
                    }
                    request = updated;
                }
                Ok(None) => {
                    warn!(phase = %from, "lost the claim on this request; another worker has it");
                    return;
                }
                Err(e) => {
                    error!(phase = %from, error = %e, "cannot commit step; the request will be retried");
                    if let Err(e) = self.store.release(request.id, &self.worker_id).await {
                        warn!(error = %e, "cannot release claim; it lapses with its lease");
                    }
                    return;
                }
            }
        }
    }

    /// Run one step while renewing the lease, so a long LLM call does not lose the claim.
    async fn step_with_heartbeat(&self, request: &RemediationRequest) -> Step {
        let every = (self.lease / 3).max(Duration::from_millis(200));
        let heartbeat = async {
            loop {
                tokio::time::sleep(every).await;
                match self
                    .store
                    .renew(request.id, &self.worker_id, self.lease)
                    .await
                {
                    Ok(true) => {}
                    Ok(false) => warn!("claim taken over while a stage was running"),
                    Err(e) => warn!(error = %e, "cannot renew claim"),
                }
            }
        };
        tokio::select! {
            step = self.pipeline.step(request) => step,
            _ = heartbeat => unreachable_step(),
        }
    }
}

/// The heartbeat loop never ends; this keeps `select!` total without a panic.
fn unreachable_step() -> Step {
    Step::Wait {
        state: Default::default(),
        not_before: chrono::Utc::now(),
        events: vec![],
    }
}

fn hostname() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
        })
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "kubemedic".to_owned())
}
