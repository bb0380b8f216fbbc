//! The ingest queue: group commit of accepted signals.
//!
//! Concurrent deliveries are committed together: one transaction (one fsync) for whatever
//! arrived while the previous commit was running. A caller's `submit` returns only once its
//! signals are durable, or with the store's error, so the HTTP layer answers 2xx only after a
//! commit. A batch that fails is retried delivery by delivery, so one bad delivery cannot fail
//! its neighbours.

use std::sync::Arc;

use tokio::sync::{Mutex, Notify, mpsc, oneshot};
use tracing::warn;

use crate::domain::NewSignal;
use crate::store::{IngestOutcome, Requests, StoreError};

/// Largest number of signals committed in one transaction.
const MAX_BATCH_SIGNALS: usize = 512;

struct Job {
    signals: Vec<NewSignal>,
    reply: oneshot::Sender<Result<Vec<IngestOutcome>, String>>,
}

/// Serialises ingest commits into few transactions. SQLite gets one writer (it has one write
/// lock anyway); Postgres several.
pub struct IngestQueue {
    tx: mpsc::Sender<Job>,
}

impl IngestQueue {
    /// Needs of the store only what ingest does: [`Requests`].
    pub fn start(store: Arc<dyn Requests>, writers: usize, wake: Arc<Notify>) -> Arc<Self> {
        let (tx, rx) = mpsc::channel::<Job>(4096);
        let rx = Arc::new(Mutex::new(rx));
        for _ in 0..writers.max(1) {
            let rx = rx.clone();
            let store = store.clone();
            let wake = wake.clone();
            tokio::spawn(async move { writer(rx, store, wake).await });
        }
        Arc::new(Self { tx })
    }

    /// Commit `signals`; returns once they are durable (or the store failed).
    pub async fn submit(&self, signals: Vec<NewSignal>) -> Result<Vec<IngestOutcome>, String> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(Job { signals, reply })
            .await
            .map_err(|_| "ingest queue is shut down".to_owned())?;
        answer
            .await
            .map_err(|_| "ingest writer stopped before answering".to_owned())?
    }
}

async fn writer(rx: Arc<Mutex<mpsc::Receiver<Job>>>, store: Arc<dyn Requests>, wake: Arc<Notify>) {
    loop {
        let mut jobs = Vec::new();
        {
            let mut rx = rx.lock().await;
            let Some(first) = rx.recv().await else {
                return;
            };
            let mut n = first.signals.len();
            jobs.push(first);
            while n < MAX_BATCH_SIGNALS {
                match rx.try_recv() {
                    Ok(job) => {
                        n += job.signals.len();
                        jobs.push(job);
                    }
                    Err(_) => break,
                }
            }
        }
        let all: Vec<NewSignal> = jobs
            .iter()
            .flat_map(|j| j.signals.iter().cloned())
            .collect();
        match store.ingest(&all).await {
            Ok(outcomes) => {
                let mut rest = outcomes.into_iter();
                for job in jobs {
                    let mine: Vec<_> = rest.by_ref().take(job.signals.len()).collect();
                    let _ = job.reply.send(Ok(mine));
                }
            }
            Err(e) if jobs.len() > 1 => {
                // Do not let one delivery fail its neighbours: commit each on its own.
                warn!(error = %e, jobs = jobs.len(), "batched ingest failed; retrying one by one");
                for job in jobs {
                    let result = store.ingest(&job.signals).await.map_err(describe);
                    let _ = job.reply.send(result);
                }
            }
            Err(e) => {
                let message = e.to_string();
                for job in jobs {
                    let _ = job.reply.send(Err(message.clone()));
                }
            }
        }
        wake.notify_one();
    }
}

fn describe(e: StoreError) -> String {
    e.to_string()
}
