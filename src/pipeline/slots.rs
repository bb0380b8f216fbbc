//! Stage slots, given out fairly (issue 40).
//!
//! At most `n` stages run at once. The namespaces with requests waiting or running take turns
//! (start-time fair queueing: each counts the slots it was given since it became busy, and a
//! namespace that becomes busy starts level with the least served one), and within a namespace
//! the oldest request (by when it was opened) goes first. So a storm in one namespace does not
//! hold back an alert elsewhere for more than a turn, and a request that finished one stage goes
//! on to its next before newer requests start their first: the oldest alerts are decided first,
//! instead of a whole batch being investigated, then selected, then gated in lockstep.
//!
//! A waiter that gives up (its lease ran out, the process stops) leaves the queue; a slot sent
//! to a waiter that is gone comes back at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use chrono::{DateTime, Utc};
use tokio::sync::oneshot;

/// The pool's stage slots.
pub(super) struct FairSlots {
    shared: Arc<Mutex<State>>,
}

struct State {
    free: usize,
    /// Stages running now, by namespace ("" for requests about cluster-scoped objects).
    running: HashMap<String, usize>,
    /// Slots given to each busy namespace (one with requests waiting or running) since it
    /// became busy, counted from the level it started at.
    served: HashMap<String, u64>,
    waiting: Vec<Waiter>,
    next_ticket: u64,
}

struct Waiter {
    ticket: u64,
    namespace: String,
    since: DateTime<Utc>,
    tx: oneshot::Sender<Slot>,
}

/// One stage slot, held while a stage runs; dropping it gives the slot to the next waiter.
pub(super) struct Slot {
    shared: Arc<Mutex<State>>,
    namespace: String,
}

/// How many stages run and how many requests wait for a slot now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Occupancy {
    pub running: usize,
    pub waiting: usize,
}

fn lock(shared: &Mutex<State>) -> MutexGuard<'_, State> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

impl FairSlots {
    pub fn new(n: usize) -> Self {
        Self {
            shared: Arc::new(Mutex::new(State {
                free: n.max(1),
                running: HashMap::new(),
                served: HashMap::new(),
                waiting: Vec::new(),
                next_ticket: 0,
            })),
        }
    }

    /// Slots free now.
    pub fn available(&self) -> usize {
        lock(&self.shared).free
    }

    pub fn occupancy(&self) -> Occupancy {
        let s = lock(&self.shared);
        Occupancy {
            running: s.running.values().sum(),
            waiting: s.waiting.len(),
        }
    }

    /// A slot for a stage of a request in `namespace` opened at `since`: at once when one is
    /// free and nobody waits, else when [`FairSlots`]' order reaches it. Dropping the future
    /// before then leaves the queue.
    pub async fn acquire(&self, namespace: &str, since: DateTime<Utc>) -> Slot {
        let (ticket, rx) = {
            let mut s = lock(&self.shared);
            s.busy(namespace);
            if s.free > 0 && s.waiting.is_empty() {
                s.free -= 1;
                s.given(namespace);
                return Slot {
                    shared: self.shared.clone(),
                    namespace: namespace.to_owned(),
                };
            }
            let (tx, rx) = oneshot::channel();
            let ticket = s.next_ticket;
            s.next_ticket += 1;
            s.waiting.push(Waiter {
                ticket,
                namespace: namespace.to_owned(),
                since,
                tx,
            });
            (ticket, rx)
        };
        let pending = Pending {
            shared: self.shared.clone(),
            ticket,
        };
        let slot = match rx.await {
            Ok(slot) => slot,
            // The sender is only dropped unsent with the whole pool: wait for nothing.
            Err(_) => std::future::pending().await,
        };
        drop(pending);
        slot
    }
}

/// A waiter's place in the queue, removed when the waiter gives up.
struct Pending {
    shared: Arc<Mutex<State>>,
    ticket: u64,
}

impl Drop for Pending {
    fn drop(&mut self) {
        let mut s = lock(&self.shared);
        if let Some(i) = s.waiting.iter().position(|w| w.ticket == self.ticket) {
            let w = s.waiting.swap_remove(i);
            s.idle_if_done(&w.namespace);
        }
    }
}

impl State {
    /// `namespace` has a request waiting or running: a namespace that was idle starts level
    /// with the least served busy one (0 when none is busy).
    fn busy(&mut self, namespace: &str) {
        if !self.served.contains_key(namespace) {
            let level = self.served.values().copied().min().unwrap_or(0);
            self.served.insert(namespace.to_owned(), level);
        }
    }

    /// A slot was given to a request of `namespace`.
    fn given(&mut self, namespace: &str) {
        *self.running.entry(namespace.to_owned()).or_default() += 1;
        *self.served.entry(namespace.to_owned()).or_default() += 1;
    }

    /// Forget `namespace`'s turns once nothing of it waits or runs.
    fn idle_if_done(&mut self, namespace: &str) {
        if !self.running.contains_key(namespace)
            && !self.waiting.iter().any(|w| w.namespace == namespace)
        {
            self.served.remove(namespace);
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let undelivered = {
            let mut s = lock(&self.shared);
            s.free += 1;
            if let Some(n) = s.running.get_mut(&self.namespace) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    s.running.remove(&self.namespace);
                }
            }
            s.idle_if_done(&self.namespace);
            hand_out(&mut s, &self.shared)
        };
        // Slots whose waiter left before it could take them: each comes back as it drops,
        // outside the lock.
        drop(undelivered);
    }
}

/// Give the free slots to the waiters, fairest first: the least served namespace, then the
/// oldest request, then the first to ask. The slots whose waiter is gone are returned
/// (to be dropped outside the lock).
fn hand_out(s: &mut State, shared: &Arc<Mutex<State>>) -> Vec<Slot> {
    let mut undelivered = Vec::new();
    while s.free > 0 && !s.waiting.is_empty() {
        let served = &s.served;
        let Some(best) = s
            .waiting
            .iter()
            .enumerate()
            .min_by_key(|(_, w)| {
                (
                    served.get(&w.namespace).copied().unwrap_or(0),
                    w.since,
                    w.ticket,
                )
            })
            .map(|(i, _)| i)
        else {
            break;
        };
        let w = s.waiting.swap_remove(best);
        s.free -= 1;
        s.given(&w.namespace);
        let slot = Slot {
            shared: shared.clone(),
            namespace: w.namespace,
        };
        if let Err(slot) = w.tx.send(slot) {
            undelivered.push(slot);
        }
    }
    undelivered
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use chrono::TimeZone;

    use super::*;

    fn at(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_800_000_000 + secs, 0)
            .single()
            .unwrap_or_default()
    }

    /// Spawn a waiter and wait until it is queued; it reports its name when it gets the slot,
    /// and holds the slot until told to let go.
    async fn waiter(
        slots: &Arc<FairSlots>,
        name: &'static str,
        namespace: &'static str,
        since: i64,
        got: tokio::sync::mpsc::UnboundedSender<&'static str>,
    ) -> oneshot::Sender<()> {
        let (release, released) = oneshot::channel::<()>();
        let before = slots.occupancy().waiting;
        let s = slots.clone();
        tokio::spawn(async move {
            let slot = s.acquire(namespace, at(since)).await;
            let _ = got.send(name);
            let _ = released.await;
            drop(slot);
        });
        while slots.occupancy().waiting == before {
            tokio::task::yield_now().await;
        }
        release
    }

    #[tokio::test]
    async fn namespaces_take_turns_and_the_oldest_request_of_each_goes_first() {
        let slots = Arc::new(FairSlots::new(1));
        let busy = slots.acquire("storm", at(0)).await;
        let (tx, mut got) = tokio::sync::mpsc::unbounded_channel();
        // Three storm requests queue first, older than the one from another namespace.
        let mut releases = vec![
            waiter(&slots, "storm-3", "storm", 3, tx.clone()).await,
            waiter(&slots, "storm-1", "storm", 1, tx.clone()).await,
            waiter(&slots, "storm-2", "storm", 2, tx.clone()).await,
            waiter(&slots, "elsewhere", "shop", 10, tx.clone()).await,
        ];
        assert_eq!(
            slots.occupancy(),
            Occupancy {
                running: 1,
                waiting: 4
            }
        );
        // The storm had its turn (the slot it holds) and the alert elsewhere started level
        // with it: the storm's oldest, then the alert elsewhere, then the rest of the storm,
        // oldest first — not the whole storm before it.
        drop(busy);
        assert_eq!(got.recv().await, Some("storm-1"));
        releases.remove(1).send(()).ok();
        assert_eq!(got.recv().await, Some("elsewhere"));
        releases.pop().map(|r| r.send(()));
        assert_eq!(got.recv().await, Some("storm-2"));
        releases.remove(1).send(()).ok();
        assert_eq!(got.recv().await, Some("storm-3"));
        releases.remove(0).send(()).ok();
        tokio::time::timeout(Duration::from_secs(5), async {
            while slots.available() != 1 {
                tokio::task::yield_now().await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("the slot did not come back: {:?}", slots.occupancy()));
    }

    #[tokio::test]
    async fn a_waiter_that_gives_up_leaves_the_queue_and_loses_no_slot() {
        let slots = Arc::new(FairSlots::new(1));
        let busy = slots.acquire("a", at(0)).await;
        // Gives up while queued.
        let gave_up =
            tokio::time::timeout(Duration::from_millis(20), slots.acquire("b", at(1))).await;
        assert!(gave_up.is_err());
        assert_eq!(slots.occupancy().waiting, 0);
        drop(busy);
        assert_eq!(slots.available(), 1);
        // A slot sent to a waiter that is gone by the time it could take it comes back.
        let busy = slots.acquire("a", at(2)).await;
        let s = slots.clone();
        let task = tokio::spawn(async move {
            let _slot = s.acquire("b", at(3)).await;
        });
        while slots.occupancy().waiting == 0 {
            tokio::task::yield_now().await;
        }
        task.abort();
        let _ = task.await;
        drop(busy);
        assert_eq!(slots.available(), 1);
        assert_eq!(
            slots.occupancy(),
            Occupancy {
                running: 0,
                waiting: 0
            }
        );
        let _again = slots.acquire("c", at(4)).await;
        assert_eq!(slots.available(), 0);
    }
}
