//! The durable worker pool.
//!
//! Claims runnable requests from the store in batches (a lease, renewed while a stage runs),
//! drives each through [`Pipeline::step`] and commits every step with its audit events. Steps
//! that are ready at the same time are committed together: one committer takes whatever steps
//! wait and writes them in one transaction (group commit), so a burst costs a few transactions
//! per batch instead of three per request.
//!
//! Two bounds: at most `concurrency` stages run at once (the work on the cluster, the LLM, the
//! policy), given out fairly ([`FairSlots`]: the namespaces take turns, the oldest request of
//! each first), and at most `in_flight` requests are held at once (claimed and waiting for a stage
//! slot, stepping, or committing). Moving a request on without a stage (received, a phase
//! nobody serves, a timeout) needs no stage slot.
//!
//! A crash leaves leases behind; they lapse and any worker (this process after a restart, or
//! another replica) resumes the request from its last committed phase. On shutdown no new
//! request is claimed, requests still waiting for a stage slot are handed back, in-flight
//! steps finish and commit, and claims are released.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, Semaphore, mpsc, oneshot};

use super::slots::FairSlots;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, error, info, info_span, warn};

use super::{Pipeline, Step};
use crate::domain::{Phase, RemediationRequest};
use crate::store::{Claims, PendingStep, StepCommit, Store, Via};
use crate::telemetry::Metrics;

/// Requests claimed with one statement at most.
const CLAIM_BATCH: usize = 128;

/// Requests held at once at least (claimed, stepping or committing).
const MIN_IN_FLIGHT: usize = 256;

/// Steps committed in one transaction at most.
const COMMIT_BATCH: usize = 256;

pub struct WorkerPool {
    /// The pool claims, renews, commits and releases; nothing else of the store.
    store: Arc<dyn Claims>,
    /// Whether the database takes one write at a time (one committer then).
    serial_writes: bool,
    pipeline: Arc<Pipeline>,
    worker_id: String,
    concurrency: usize,
    in_flight: usize,
    stage_slots: FairSlots,
    /// Requests this pool drives now. A lease that lapsed while this process was slow lets its
    /// own next claim take the request again under the same worker id; it must not start a
    /// second drive of it beside the first.
    driving: std::sync::Mutex<std::collections::HashSet<uuid::Uuid>>,
    lease: Duration,
    poll: Duration,
    wake: Arc<Notify>,
    metrics: Arc<Metrics>,
}

impl WorkerPool {
    /// A pool running at most `concurrency` stages at once and holding at most
    /// `max(4 × concurrency, 256)` requests, of which about `concurrency` wait for a stage.
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
        let concurrency = concurrency.max(1);
        let serial_writes = store.serial_writes();
        Self {
            store,
            serial_writes,
            pipeline,
            worker_id,
            concurrency,
            in_flight: concurrency.saturating_mul(4).max(MIN_IN_FLIGHT),
            stage_slots: FairSlots::new(concurrency),
            driving: Default::default(),
            lease,
            poll: Duration::from_secs(1),
            wake,
            metrics,
        }
    }

    pub fn worker_id(&self) -> &str {
        &self.worker_id
    }

    /// The stage slots' occupancy now, to `/metrics`.
    fn report_stages(&self) {
        let now = self.stage_slots.occupancy();
        self.metrics.set_stages(now.running, now.waiting);
    }

    /// The requests this pool drives (a poisoned lock still holds a valid set).
    fn driving_set(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<uuid::Uuid>> {
        self.driving.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Run until `shutdown` is cancelled, then let in-flight steps commit (at most `grace`).
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken, grace: Duration) {
        let holds = Arc::new(Semaphore::new(self.in_flight));
        let (commits, mut committers) = CommitQueue::start(
            self.store.clone(),
            self.serial_writes,
            self.worker_id.clone(),
        );
        let mut tasks = JoinSet::new();
        info!(
            worker = %self.worker_id,
            concurrency = self.concurrency,
            in_flight = self.in_flight,
            "worker pool started"
        );
        loop {
            while tasks.try_join_next().is_some() {}
            let first = tokio::select! {
                p = holds.clone().acquire_owned() => match p {
                    Ok(p) => p,
                    Err(_) => break,
                },
                _ = shutdown.cancelled() => break,
            };
            // Every stage slot busy and a full round of requests already held behind them
            // (claimed ones count at once, before their task first runs): claim nothing more
            // for now, so requests this replica cannot start soon stay free for another one.
            let saturated = self.stage_slots.available() == 0;
            let held = self.in_flight - holds.available_permits() - 1;
            let queued = held.saturating_sub(self.concurrency);
            if saturated && queued >= self.concurrency {
                drop(first);
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                    _ = shutdown.cancelled() => break,
                }
                continue;
            }
            let mut permits = vec![first];
            while permits.len() < CLAIM_BATCH {
                match holds.clone().try_acquire_owned() {
                    Ok(p) => permits.push(p),
                    Err(_) => break,
                }
            }
            // Every stage slot busy: claim no more than makes up that round.
            let mut wanted = permits.len();
            if saturated {
                wanted = wanted.min(self.concurrency - queued);
            }
            let idle = match self
                .store
                .claim_batch(&self.worker_id, self.lease, wanted)
                .await
            {
                Ok(requests) => {
                    let short = requests.len() < wanted;
                    for request in requests {
                        let id = request.id;
                        if !self.driving_set().insert(id) {
                            debug!(request_id = %id, "claimed again while this pool drives it; the drive goes on");
                            continue;
                        }
                        let Some(permit) = permits.pop() else { break };
                        let me = self.clone();
                        let stop = shutdown.clone();
                        let commits = commits.clone();
                        let span = info_span!(
                            "request",
                            request_id = %request.id,
                            trace_id = %request.trace.trace_id_hex()
                        );
                        tasks.spawn(
                            async move {
                                me.drive(request, stop, &commits).await;
                                me.driving_set().remove(&id);
                                drop(permit);
                            }
                            .instrument(span),
                        );
                    }
                    // Fewer than asked for: the backlog is empty for now.
                    short.then_some(self.poll)
                }
                Err(e) => {
                    warn!(error = %e, "cannot claim work; retrying");
                    Some(Duration::from_secs(2))
                }
            };
            drop(permits);
            if let Some(wait) = idle {
                tokio::select! {
                    _ = self.wake.notified() => {}
                    _ = tokio::time::sleep(wait) => {}
                    _ = shutdown.cancelled() => break,
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
        drop(commits);
        while committers.join_next().await.is_some() {}
    }

    /// Drive one claimed request until it is released: terminal, waiting, handed to a human, or
    /// the process is stopping.
    async fn drive(
        &self,
        mut request: RemediationRequest,
        shutdown: CancellationToken,
        commits: &CommitQueue,
    ) {
        // A move made in memory, committed with the next step: leaving `Received` runs no
        // stage and changes nothing outside the store, so it needs no transaction of its own
        // (a crash before the next commit only means it is made again).
        let mut carried: Option<(Phase, Via)> = None;
        loop {
            let from = request.phase;
            let started = std::time::Instant::now();
            let Some(step) = self.step_with_heartbeat(&request, &shutdown).await else {
                // Stopping before its stage could start, no slot within a lease, or the claim
                // was lost: hand it back as it is (a no-op if another worker holds it now).
                if let Err(e) = self.store.release(request.id, &self.worker_id).await {
                    warn!(error = %e, "cannot release claim; it lapses with its lease");
                }
                return;
            };
            if from == Phase::Received
                && carried.is_none()
                && !shutdown.is_cancelled()
                && matches!(&step, Step::Move { to, .. } if to.is_runnable())
                && let Step::Move {
                    to,
                    reason,
                    state,
                    events,
                } = step
            {
                carried = Some((
                    from,
                    Via {
                        phase: to,
                        reason,
                        events,
                    },
                ));
                request.phase = to;
                request.state = state;
                continue;
            }
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
            let (stored, via) = match carried.take() {
                Some((stored, via)) => (stored, Some(via)),
                None => (from, None),
            };
            let passed = via.as_ref().map(|v| v.phase);
            match commits.commit(request.id, stored, via, commit).await {
                Ok(Some(updated)) => {
                    self.metrics.observe_stage(from, started.elapsed());
                    if let Some(phase) = passed {
                        self.metrics.transition(phase);
                        info!(from = %stored, to = %phase, "phase changed");
                    }
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

    /// Run one step while renewing the lease, so a long LLM call (or a wait for a stage slot)
    /// does not lose the claim. `None` when the process stops before the stage could start,
    /// when no stage slot came free within a lease, or when the claim was lost all the same
    /// (the step is abandoned).
    async fn step_with_heartbeat(
        &self,
        request: &RemediationRequest,
        shutdown: &CancellationToken,
    ) -> Option<Step> {
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
                    Ok(false) => {
                        // Another worker took the request over (this one stalled past its
                        // lease): stop the stage here, as a crash would, rather than keep
                        // working on a request someone else now drives.
                        warn!("claim taken over while a stage was running; abandoning the step");
                        return;
                    }
                    Err(e) => warn!(error = %e, "cannot renew claim"),
                }
            }
        };
        let work = async {
            let slot = if self.pipeline.runs_stage(request) {
                // A request that waits a whole lease for a slot is handed back: this replica
                // claims nothing while it is saturated, so another one can take it.
                let namespace = namespace_of(request);
                let acquire = self.stage_slots.acquire(&namespace, request.created_at);
                tokio::select! {
                    biased;
                    _ = shutdown.cancelled() => return None,
                    slot = acquire => {
                        self.report_stages();
                        Some(slot)
                    }
                    _ = tokio::time::sleep(self.lease) => {
                        debug!("no stage slot within a lease; handing the request back");
                        return None;
                    }
                }
            } else {
                None
            };
            let step = self.pipeline.step(request).await;
            drop(slot);
            self.report_stages();
            Some(step)
        };
        tokio::select! {
            step = work => step,
            _ = heartbeat => None,
        }
    }
}

/// The namespace a request's stages count against for fairness: its target's, else the one
/// its alert names, else none (a cluster-scoped object).
fn namespace_of(request: &RemediationRequest) -> String {
    request
        .target
        .as_ref()
        .and_then(|t| t.namespace.clone())
        .or_else(|| request.signal.labels.get("namespace").cloned())
        .unwrap_or_default()
}

/// Where a driven request hands its step to be committed, and waits for the answer.
#[derive(Clone)]
struct CommitQueue(mpsc::Sender<Queued>);

struct Queued {
    step: PendingStep,
    answer: oneshot::Sender<Result<Option<RemediationRequest>, String>>,
}

impl CommitQueue {
    /// The queue and its committer tasks, which end once every sender is gone. SQLite has
    /// one writer, so one committer; on Postgres two, so one batch's statements run while
    /// another's wait for the database (they queue only to append to the audit chain).
    fn start(store: Arc<dyn Claims>, serial_writes: bool, worker: String) -> (Self, JoinSet<()>) {
        let (tx, rx) = mpsc::channel(COMMIT_BATCH * 4);
        let rx = Arc::new(tokio::sync::Mutex::new(rx));
        let committers = if serial_writes { 1 } else { 2 };
        let mut tasks = JoinSet::new();
        for _ in 0..committers {
            tasks.spawn(committer(store.clone(), worker.clone(), rx.clone()));
        }
        (Self(tx), tasks)
    }

    async fn commit(
        &self,
        id: uuid::Uuid,
        from: Phase,
        via: Option<Via>,
        step: StepCommit,
    ) -> Result<Option<RemediationRequest>, String> {
        let (answer, answered) = oneshot::channel();
        let queued = Queued {
            step: PendingStep {
                id,
                from,
                via,
                step,
            },
            answer,
        };
        let gone = || "the committer has stopped".to_owned();
        self.0.send(queued).await.map_err(|_| gone())?;
        answered.await.map_err(|_| gone())?
    }
}

/// Commit whatever steps wait, up to [`COMMIT_BATCH`], in one transaction; while it runs the
/// next batch gathers. A batch the database refuses is committed again one step at a time, so
/// one bad step fails alone.
async fn committer(
    store: Arc<dyn Claims>,
    worker: String,
    queue: Arc<tokio::sync::Mutex<mpsc::Receiver<Queued>>>,
) {
    let mut batch = Vec::with_capacity(COMMIT_BATCH);
    loop {
        // One committer at a time takes what waits; the other commits meanwhile.
        if queue.lock().await.recv_many(&mut batch, COMMIT_BATCH).await == 0 {
            return;
        }
        let (steps, answers): (Vec<_>, Vec<_>) =
            batch.drain(..).map(|q| (q.step, q.answer)).unzip();
        match store.commit_steps(&worker, &steps).await {
            Ok(results) => {
                for (answer, result) in answers.into_iter().zip(results) {
                    let _ = answer.send(Ok(result));
                }
            }
            Err(e) if steps.len() > 1 => {
                warn!(error = %e, steps = steps.len(), "a batch of steps did not commit; committing them one by one");
                for (step, answer) in steps.iter().zip(answers) {
                    let result = store
                        .commit_steps(&worker, std::slice::from_ref(step))
                        .await
                        .map(|r| r.into_iter().next().flatten())
                        .map_err(|e| e.to_string());
                    let _ = answer.send(result);
                }
            }
            Err(e) => {
                for answer in answers {
                    let _ = answer.send(Err(e.to_string()));
                }
            }
        }
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
