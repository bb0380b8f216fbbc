//! The accept loop: every connection is served by hyper's HTTP/1.1 connection under the
//! [`HttpLimits`](super::HttpLimits), so no client holds one forever.
//!
//! - **Header timeout** (hyper's `header_read_timeout`): a request head must be complete within
//!   it, counted from when the connection is ready for one. hyper starts that clock at the
//!   accept and again when a response is done, so the same limit closes an idle kept-alive
//!   connection.
//! - **Body timeout**: enforced where bodies are read (`ingest::read_body`), which answers 408
//!   with `Connection: close`. A handler that does not read a body leaves nothing pending:
//!   hyper closes the read side of an unread body once the response is sent.
//! - **Write timeout** ([`tokio_io_timeout::TimeoutStream`]): a write to the socket that
//!   makes no progress for `write_timeout` (the client stopped reading and the buffers are
//!   full) fails the connection. Without it a client that pipelines requests and never reads
//!   the answers holds its connection, and a slot of the cap, forever; no credentials are
//!   needed for that (`/metrics`, `/api/v1/openapi.json`). Progress resets the clock.
//! - **Connection cap**: a semaphore with `max_connections` slots. A connection over the cap is
//!   accepted and closed at once (and counted), rather than left waiting in the kernel's
//!   backlog where the sender cannot tell a full server from a slow one; Alertmanager retries a
//!   failed delivery.
//! - **Shutdown**: stop accepting, let every open connection finish its request in flight (an
//!   idle one closes at once), and return once all are gone. Holding every slot of the cap is
//!   the proof that they are.

use std::io::ErrorKind;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use super::{AppState, router};
use crate::telemetry::Metrics;

/// The most connections the cap can be set to (the settings refuse more).
const MAX_CONNECTIONS: usize = 65536;

/// How often at most the log says that the cap is refusing connections.
const REFUSAL_WARN_EVERY: Duration = Duration::from_secs(60);

/// Serve the router on `listener` until `shutdown` fires, then finish the requests in flight.
pub async fn serve(
    listener: TcpListener,
    state: Arc<AppState>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let limits = state.limits;
    let metrics = state.metrics.clone();
    let app = router(state);
    let cap = limits.max_connections.clamp(1, MAX_CONNECTIONS);
    let slots = Arc::new(Semaphore::new(cap));
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let mut refusals = Refusals::default();

    loop {
        let stream = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    accept_failed(e, &shutdown).await;
                    continue;
                }
            },
        };
        let (stream, peer) = stream;
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            metrics.http_connection_refused();
            refusals.note(cap);
            drop(stream);
            continue;
        };
        // Handlers learn the peer's address (failed-login limits, the trusted auth proxy).
        let service = tower::Layer::layer(
            &axum::Extension(axum::extract::ConnectInfo(peer)),
            app.clone(),
        );
        let mut stream = tokio_io_timeout::TimeoutStream::new(stream);
        stream.set_write_timeout(Some(limits.write_timeout));
        let conn = http.serve_connection(
            TokioIo::new(Box::pin(stream)),
            TowerToHyperService::new(service),
        );
        let open = Open::new(slot, metrics.clone());
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let mut conn = std::pin::pin!(conn);
            let mut draining = false;
            let ended = loop {
                tokio::select! {
                    ended = conn.as_mut() => break ended,
                    () = shutdown.cancelled(), if !draining => {
                        draining = true;
                        conn.as_mut().graceful_shutdown();
                    }
                }
            };
            match ended {
                Ok(()) => {}
                Err(e) if e.is_timeout() => {
                    open.metrics.http_timeout("header");
                    debug!("closed a connection whose request head did not arrive in time");
                }
                Err(e) if write_timed_out(&e) => {
                    open.metrics.http_timeout("write");
                    debug!("closed a connection whose client stopped reading its answers");
                }
                Err(e) => debug!(error = %e, "connection ended with an error"),
            }
            drop(open);
        });
    }
    drop(listener);
    let n = u32::try_from(cap).unwrap_or(u32::MAX);
    // Every open connection holds a slot until it ends: all slots free means all have ended.
    let _ = slots.acquire_many(n).await;
    Ok(())
}

/// Whether the connection failed because a write made no progress within the write timeout
/// (or the kernel gave up retransmitting to the client, which is counted the same: the client
/// stopped taking what it asked for).
fn write_timed_out(e: &hyper::Error) -> bool {
    let mut source = std::error::Error::source(e);
    while let Some(err) = source {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            return io.kind() == ErrorKind::TimedOut;
        }
        source = err.source();
    }
    false
}

/// A served connection: its slot of the cap and its place in the open-connections gauge, both
/// given back when it ends, however it ends.
struct Open {
    _slot: OwnedSemaphorePermit,
    metrics: Arc<Metrics>,
}

impl Open {
    fn new(slot: OwnedSemaphorePermit, metrics: Arc<Metrics>) -> Self {
        metrics.http_connection_opened();
        Open {
            _slot: slot,
            metrics,
        }
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.metrics.http_connection_closed();
    }
}

/// Refused connections, logged at most once a minute (a flood must not flood the log too).
#[derive(Default)]
struct Refusals {
    last_warned: Option<Instant>,
    unreported: u64,
}

impl Refusals {
    fn note(&mut self, cap: usize) {
        self.unreported += 1;
        if self
            .last_warned
            .is_none_or(|t| t.elapsed() >= REFUSAL_WARN_EVERY)
        {
            warn!(
                max_connections = cap,
                refused = self.unreported,
                "connection cap reached: closing new connections unserved until some end \
                 (see --http-max-connections and kubemedic_http_connections_refused_total)"
            );
            self.last_warned = Some(Instant::now());
            self.unreported = 0;
        }
    }
}

/// A failed accept. A connection that died in the backlog is nothing; anything else (out of
/// file descriptors, say) is logged and retried after a pause instead of spinning.
async fn accept_failed(e: std::io::Error, shutdown: &CancellationToken) {
    if matches!(
        e.kind(),
        ErrorKind::ConnectionRefused | ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset
    ) {
        return;
    }
    warn!(error = %e, "cannot accept a connection; retrying in 1 s");
    tokio::select! {
        () = shutdown.cancelled() => {}
        () = tokio::time::sleep(Duration::from_secs(1)) => {}
    }
}
