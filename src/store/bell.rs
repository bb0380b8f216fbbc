//! Wake-ups for the live streams: "the audit trail of request R grew".
//!
//! Inputs: on PostgreSQL, the notifications the database sends when an audited transaction
//! commits (the trigger of migration 0011), heard by one `LISTEN` connection per store,
//! started by its first watcher (`postgres.rs`) — so an event written by any replica wakes the
//! streams of every replica; on SQLite (one process), the store itself, after each audited
//! commit. Output: [`TrailWatch`]es, one per stream, fed by one broadcast channel.
//!
//! Invariant: a wake-up is a hint, never the data. A stream reads the trail from its own
//! position after every wake-up and after every fallback wait, so a lost notification (a
//! listener reconnecting, a watcher that fell behind) delays an event by at most the fallback,
//! and a spurious one costs one read. While wake-ups cannot be delivered (the listener is
//! down) a wait lasts at most [`DEAF_POLL`], as the streams polled before they had a bell.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::broadcast;
use uuid::Uuid;

/// How long a wait lasts at most while wake-ups cannot be delivered: the streams' poll
/// interval from before they were woken.
pub const DEAF_POLL: Duration = Duration::from_millis(500);

/// Wake-ups a watcher may fall behind by before it is told to read again ([`Woken::Resync`]).
const CAPACITY: usize = 1024;

/// What a ring says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Grew {
    Request(Uuid),
    /// Wake-ups may have been lost: everyone reads again.
    Any,
}

/// What ended a [`TrailWatch::wait`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Woken {
    /// This request's trail grew (the one waited for, or any with no filter).
    Grew(Uuid),
    /// Wake-ups may have been lost (the listener lost its connection or is back; the watcher
    /// fell behind): read again.
    Resync,
    /// Nothing came within the wait.
    Quiet,
}

/// Whether wake-ups are delivered now, and how often they were interrupted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BellStatus {
    /// SQLite: always. PostgreSQL: while the listener's connection is up and listening.
    pub live: bool,
    /// Times the listener lost its connection (0 on SQLite).
    pub losses: u64,
}

struct State {
    live: AtomicBool,
    losses: AtomicU64,
    /// Whether the listener was ever up (its first start is no reconnection).
    was_up: AtomicBool,
}

/// The sending side, handed to whoever hears the database (the store on SQLite, the listener
/// task on PostgreSQL).
#[derive(Clone)]
pub(crate) struct Ring {
    tx: broadcast::Sender<Grew>,
    state: Arc<State>,
}

impl Ring {
    /// The trail of `request` grew (a committed append).
    pub(crate) fn grew(&self, request: Uuid) {
        let _ = self.tx.send(Grew::Request(request));
    }

    /// Wake-ups may have been lost: every watcher reads again.
    pub(crate) fn resync(&self) {
        let _ = self.tx.send(Grew::Any);
    }

    /// The listener is listening. Answers whether this is a return (it was up before).
    pub(crate) fn up(&self) -> bool {
        self.state.live.store(true, Ordering::Release);
        self.state.was_up.swap(true, Ordering::AcqRel)
    }

    /// The listener lost its connection; answers whether it was live until now (a loss,
    /// counted; not a failed attempt to come back).
    pub(crate) fn lost(&self) -> bool {
        let was_live = self.state.live.swap(false, Ordering::AcqRel);
        if was_live {
            self.state.losses.fetch_add(1, Ordering::AcqRel);
        }
        was_live
    }
}

/// The future that hears the database and rings: PostgreSQL's listener.
pub(crate) type Listen = Box<dyn FnOnce(Ring) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

enum Listener {
    /// Rung by the store itself (SQLite).
    None,
    NotStarted(Listen),
    Running(tokio::task::AbortHandle),
}

/// The store's bell: one per store, shared by all of its watchers.
pub struct TrailBell {
    ring: Ring,
    listener: Mutex<Listener>,
}

impl TrailBell {
    fn new(live: bool, listener: Listener) -> Self {
        let (tx, _) = broadcast::channel(CAPACITY);
        Self {
            ring: Ring {
                tx,
                state: Arc::new(State {
                    live: AtomicBool::new(live),
                    losses: AtomicU64::new(0),
                    was_up: AtomicBool::new(live),
                }),
            },
            listener: Mutex::new(listener),
        }
    }

    /// Rung in the process, by the store after its audited commits: always live.
    pub(crate) fn in_process() -> Self {
        Self::new(true, Listener::None)
    }

    /// Rung by `listen`, started by the first watcher (so a store nobody watches — a command
    /// — opens no connection for it; the daemon takes one as it starts serving) and stopped
    /// with the bell.
    pub(crate) fn listening(listen: Listen) -> Self {
        Self::new(false, Listener::NotStarted(listen))
    }

    /// The ring, for the store to ring after its commits.
    pub(crate) fn ring(&self) -> &Ring {
        &self.ring
    }

    /// A watcher: it hears every ring from now on. Take it before the first read of the
    /// trail, so nothing committed after that read goes unheard.
    pub fn watch(&self) -> TrailWatch {
        self.start();
        TrailWatch {
            rx: self.ring.tx.subscribe(),
            state: self.ring.state.clone(),
        }
    }

    pub fn status(&self) -> BellStatus {
        BellStatus {
            live: self.ring.state.live.load(Ordering::Acquire),
            losses: self.ring.state.losses.load(Ordering::Acquire),
        }
    }

    /// Start the listener if it is not running. Outside a Tokio runtime nothing starts (the
    /// watcher then waits at most [`DEAF_POLL`]); the next watcher tries again.
    fn start(&self) {
        let Ok(mut listener) = self.listener.lock() else {
            return;
        };
        if !matches!(*listener, Listener::NotStarted(_)) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if let Listener::NotStarted(listen) = std::mem::replace(&mut *listener, Listener::None) {
            let task = runtime.spawn(listen(self.ring.clone()));
            *listener = Listener::Running(task.abort_handle());
        }
    }
}

impl Drop for TrailBell {
    fn drop(&mut self) {
        if let Ok(Listener::Running(task)) = self.listener.get_mut() {
            task.abort();
        }
    }
}

/// One stream's ear on the bell.
pub struct TrailWatch {
    rx: broadcast::Receiver<Grew>,
    state: Arc<State>,
}

impl TrailWatch {
    /// Wait until the trail of `request` grows (of any request with `None`), or `fallback`
    /// passes — at most [`DEAF_POLL`] while wake-ups cannot be delivered. Then read the trail:
    /// whatever woke the watcher, and whatever else it had heard (all committed before this
    /// returns, so that read sees it), is one read.
    pub async fn wait(&mut self, request: Option<Uuid>, fallback: Duration) -> Woken {
        let limit = if self.state.live.load(Ordering::Acquire) {
            fallback
        } else {
            fallback.min(DEAF_POLL)
        };
        let woken = tokio::time::timeout(limit, self.next(request))
            .await
            .unwrap_or(Woken::Quiet);
        // Until the channel is empty (a lag is skipped like a ring: the read covers it).
        while let Ok(_) | Err(broadcast::error::TryRecvError::Lagged(_)) = self.rx.try_recv() {}
        woken
    }

    async fn next(&mut self, request: Option<Uuid>) -> Woken {
        loop {
            match self.rx.recv().await {
                Ok(Grew::Request(id)) if request.is_none_or(|r| r == id) => {
                    return Woken::Grew(id);
                }
                Ok(Grew::Request(_)) => {}
                Ok(Grew::Any) | Err(broadcast::error::RecvError::Lagged(_)) => {
                    return Woken::Resync;
                }
                // The store is gone: nothing will ring again; the fallback ends the wait.
                Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A wait that must be ended by a wake-up (the test would hang for an hour otherwise).
    const LONG: Duration = Duration::from_secs(3600);
    /// A wait that nothing ends: the fallback passes.
    const SHORT: Duration = Duration::from_millis(20);

    #[tokio::test]
    async fn a_watcher_wakes_for_its_request_only_and_reads_once_for_many_rings() {
        let bell = TrailBell::in_process();
        let (mine, other) = (Uuid::new_v4(), Uuid::new_v4());
        let mut watch = bell.watch();
        bell.ring().grew(other);
        assert_eq!(watch.wait(Some(mine), SHORT).await, Woken::Quiet);
        bell.ring().grew(other);
        bell.ring().grew(mine);
        bell.ring().grew(mine);
        assert_eq!(watch.wait(Some(mine), LONG).await, Woken::Grew(mine));
        // The second ring was heard with the first: one read covers both.
        assert_eq!(watch.wait(Some(mine), SHORT).await, Woken::Quiet);
        bell.ring().grew(other);
        assert_eq!(watch.wait(None, LONG).await, Woken::Grew(other));
    }

    #[tokio::test]
    async fn lost_wake_ups_make_every_watcher_read_again() {
        let bell = TrailBell::in_process();
        let mut watch = bell.watch();
        bell.ring().resync();
        assert_eq!(watch.wait(Some(Uuid::new_v4()), LONG).await, Woken::Resync);
        // A watcher that fell behind the channel is told so, not left waiting.
        for _ in 0..CAPACITY + 1 {
            bell.ring().grew(Uuid::new_v4());
        }
        assert_eq!(watch.wait(Some(Uuid::new_v4()), LONG).await, Woken::Resync);
    }

    #[tokio::test]
    async fn while_deaf_a_wait_is_the_old_poll() {
        let bell = TrailBell::listening(Box::new(|_| Box::pin(std::future::pending())));
        assert!(!bell.status().live);
        let mut watch = bell.watch();
        assert_eq!(
            watch.wait(None, LONG).await,
            Woken::Quiet,
            "ended by DEAF_POLL"
        );

        assert!(!bell.ring().up(), "its first start is no return");
        assert!(bell.status().live);
        assert!(bell.ring().lost());
        assert!(
            !bell.ring().lost(),
            "a failed attempt to come back is no new loss"
        );
        assert_eq!(
            bell.status(),
            BellStatus {
                live: false,
                losses: 1
            }
        );
        assert!(bell.ring().up(), "a return");
    }
}
