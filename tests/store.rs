//! One store contract, run against embedded SQLite and a real PostgreSQL server.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

mod common;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::{TimeZone, Utc};
use kubemedic::clock::{Clock, ManualClock};
use kubemedic::domain::Target;
use kubemedic::domain::{
    ApprovalDecision, ApprovalRequest, ApprovalStatus, Channel, DecideOutcome, Decision,
    DeliveryStatus, Notification, NotificationKind,
};
use kubemedic::domain::{AuditDraft, Phase, StageState};
use kubemedic::domain::{NewSignal, SignalMode, SignalSource, SignalStatus};
use kubemedic::store::{
    DeliveryResult, IngestOutcome, IntentStatus, PendingStep, RequestFilter, SignalFilter,
    StepCommit, Store, TrailWatch, Woken,
};

struct Fixture {
    store: Arc<dyn Store>,
    clock: Arc<ManualClock>,
    url: String,
    _dir: Option<tempfile::TempDir>,
}

async fn sqlite() -> Option<Fixture> {
    common::init();
    let (dir, url) = common::sqlite_url();
    let clock = Arc::new(ManualClock::new(
        Utc.with_ymd_and_hms(2026, 3, 1, 12, 0, 0).unwrap(),
    ));
    let store = common::open_store(&url, clock.clone() as Arc<dyn Clock>).await;
    Some(Fixture {
        store,
        clock,
        url,
        _dir: Some(dir),
    })
}

async fn postgres() -> Option<Fixture> {
    common::init();
    let url = common::fresh_postgres().await?;
    let clock = Arc::new(ManualClock::new(
        Utc.with_ymd_and_hms(2026, 3, 1, 12, 0, 0).unwrap(),
    ));
    let store = common::open_store(&url, clock.clone() as Arc<dyn Clock>).await;
    Some(Fixture {
        store,
        clock,
        url,
        _dir: None,
    })
}

/// Run each contract case on both backends.
macro_rules! contract {
    ($($case:ident),* $(,)?) => {
        mod on_sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $case() {
                    if let Some(f) = super::sqlite().await {
                        super::$case(f).await;
                    }
                }
            )*
        }
        mod on_postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $case() {
                    if let Some(f) = super::postgres().await {
                        super::$case(f).await;
                    }
                }
            )*
        }
    };
}

contract!(
    ingest_opens_folds_and_ignores_redelivery,
    resolved_updates_the_signal_once,
    concurrent_alerts_for_one_target_open_one_request,
    concurrent_redelivery_is_stored_once,
    a_large_batch_decides_like_one_signal_at_a_time,
    claims_are_exclusive_and_leases_lapse,
    concurrent_claims_never_share_a_request,
    batches_are_claimed_once_and_commit_together,
    concurrent_writers_keep_one_unbroken_chain,
    a_step_commits_with_its_audit_events,
    changed_requests_follow_the_audit_trail_from_a_watermark,
    illegal_transitions_are_refused,
    terminal_requests_free_their_target,
    waiting_requests_are_not_claimed_early,
    audit_rows_cannot_be_changed_or_deleted,
    lists_filter_page_and_count,
    the_audit_chain_names_an_edited_or_deleted_event,
    api_keys_are_kept_as_digests_and_revoking_ends_sessions,
    the_summary_counts_outcomes_tokens_and_blocks,
    one_execution_lock_per_target_until_the_holder_finishes,
    an_intent_is_recorded_once_and_settled,
    history_is_kept_per_target_and_in_order,
    outcomes_are_kept_once_per_request_and_read_per_signature,
    a_resolved_signal_is_seen_since_its_time,
    a_nul_character_is_stored_the_same_on_both_backends,
    an_approval_is_created_once_and_the_first_decision_wins,
    a_change_that_made_things_worse_is_told_once_to_whom_its_offer_reached,
    concurrent_decisions_have_exactly_one_winner,
    nonces_are_single_use_and_the_signing_key_is_kept,
    nonces_nothing_can_replay_are_dropped_after_a_day,
    a_notification_is_sent_by_one_sender_and_retried_when_due,
    a_decision_after_the_deadline_or_the_requests_end_is_an_expiry,
    the_audit_key_is_handed_over_once_and_a_retired_key_writes_nothing_more,
    conversations_keep_their_turns_in_order_per_owner,
    pinned_context_is_replaced_deleted_and_audited,
    failed_logins_are_counted_per_client_in_the_window_and_pruned,
    an_audit_append_wakes_the_watchers_of_its_request,
    a_request_keeps_the_trace_context_it_was_opened_with,
);

/// The trace context a signal carries is stored with the request it opens and read back by
/// every read (a claim on another replica continues the same trace); a signal without one
/// gets one derived from the request id, the same on every read. The trail carries the trace
/// id in the new events' payloads, and the chain still verifies.
async fn a_request_keeps_the_trace_context_it_was_opened_with(f: Fixture) {
    use kubemedic::domain::TraceContext;
    let s = &f.store;
    let incoming =
        TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
    let mut traced = signal("traced", 0, CHECKOUT);
    traced.trace = Some(incoming);
    let untraced = signal("untraced", 0, Some(("shop", "Deployment", "cart")));
    let outcomes = s.ingest(&[traced, untraced]).await.unwrap();
    let (a, b) = (
        outcomes[0].request_id().unwrap(),
        outcomes[1].request_id().unwrap(),
    );
    let read = s.get_request(a).await.unwrap().unwrap();
    assert_eq!(read.trace, incoming);
    let other = s.get_request(b).await.unwrap().unwrap();
    assert_eq!(other.trace, TraceContext::for_request(b));
    assert_eq!(s.get_request(b).await.unwrap().unwrap().trace, other.trace);
    // A claim (any worker, any replica) and a committed step give the same context back.
    let claimed = s
        .claim_batch("w2", Duration::from_secs(30), 10)
        .await
        .unwrap();
    let claimed_a = claimed.iter().find(|r| r.id == a).unwrap();
    assert_eq!(claimed_a.trace, incoming);
    let stepped = s
        .commit_step(a, "w2", Phase::Received, step(Phase::Enriching))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stepped.trace, incoming);
    let trail = s.audit_trail(a).await.unwrap();
    let ids: Vec<_> = trail
        .iter()
        .map(|e| (e.kind.as_str(), e.payload["trace_id"].as_str()))
        .collect();
    assert_eq!(
        ids,
        vec![
            ("received", Some("4bf92f3577b34da6a3ce929d0e0e4736")),
            ("transition", Some("4bf92f3577b34da6a3ce929d0e0e4736")),
        ]
    );
    assert!(
        s.verify_chain().await.unwrap().intact(),
        "the chain verifies"
    );
}

fn signal(fingerprint: &str, minute: u32, target: Option<(&str, &str, &str)>) -> NewSignal {
    let mut labels = BTreeMap::new();
    labels.insert("alertname".to_owned(), "PodCrash".to_owned());
    let target = target.map(|(ns, kind, name)| {
        labels.insert("namespace".to_owned(), ns.to_owned());
        Target::new(kind, name, Some(ns.to_owned()))
    });
    let target_fingerprint = target
        .as_ref()
        .map(Target::fingerprint)
        .unwrap_or_else(|| format!("alert-{fingerprint}"));
    NewSignal {
        fingerprint: fingerprint.to_owned(),
        starts_at: Utc.with_ymd_and_hms(2026, 3, 1, 11, minute, 0).unwrap(),
        ends_at: None,
        status: SignalStatus::Firing,
        name: "PodCrash".to_owned(),
        severity: Some("critical".into()),
        mode: SignalMode::Reactive,
        source: SignalSource::Alertmanager,
        labels,
        annotations: BTreeMap::new(),
        generator_url: None,
        receiver: Some("kubemedic".to_owned()),
        group_key: None,
        external_url: None,
        target_aliases: vec![target_fingerprint.clone()],
        requested: None,
        trace: None,
        target,
        target_fingerprint,
    }
}

const CHECKOUT: Option<(&str, &str, &str)> = Some(("shop", "Deployment", "checkout"));

fn page(limit: i64) -> RequestFilter {
    RequestFilter {
        limit,
        ..Default::default()
    }
}

async fn ingest_opens_folds_and_ignores_redelivery(f: Fixture) {
    let s = &f.store;
    let first = s.ingest(&[signal("a1", 0, CHECKOUT)]).await.unwrap();
    let IngestOutcome::Opened { request_id } = first[0] else {
        panic!("{first:?}");
    };
    assert_eq!(
        s.ingest(&[signal("a1", 0, CHECKOUT)]).await.unwrap(),
        vec![IngestOutcome::Redelivery {
            request_id: Some(request_id)
        }]
    );
    f.clock.advance(chrono::Duration::minutes(5));
    assert_eq!(
        s.ingest(&[signal("a1", 5, CHECKOUT)]).await.unwrap(),
        vec![IngestOutcome::Occurrence {
            request_id,
            occurrence_count: 2
        }]
    );
    let r = s.get_request(request_id).await.unwrap().unwrap();
    assert_eq!(r.occurrence_count, 2);
    assert_eq!(r.last_seen - r.first_seen, chrono::Duration::minutes(5));
    assert_eq!(r.phase, Phase::Received);
    assert_eq!(
        r.target,
        Some(Target::new("Deployment", "checkout", Some("shop".into())))
    );
    let signals = s
        .list_signals(&SignalFilter {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(signals.total, 2);
    // A batch with two alerts for one new target opens one request.
    let both = s
        .ingest(&[
            signal("b1", 1, Some(("shop", "Pod", "x"))),
            signal("b2", 1, Some(("shop", "Pod", "x"))),
        ])
        .await
        .unwrap();
    assert!(matches!(both[0], IngestOutcome::Opened { .. }));
    assert!(matches!(
        both[1],
        IngestOutcome::Occurrence {
            occurrence_count: 2,
            ..
        }
    ));
    let trail = s.audit_trail(request_id).await.unwrap();
    assert_eq!(
        trail.iter().map(|e| e.kind.as_str()).collect::<Vec<_>>(),
        ["received", "occurrence"]
    );
    assert_eq!(trail[0].actor, "alertmanager/kubemedic");
}

async fn resolved_updates_the_signal_once(f: Fixture) {
    let s = &f.store;
    let opened = s.ingest(&[signal("r1", 0, CHECKOUT)]).await.unwrap();
    let rid = opened[0].request_id().unwrap();
    let mut resolved = signal("r1", 0, CHECKOUT);
    resolved.status = SignalStatus::Resolved;
    resolved.ends_at = Some(Utc.with_ymd_and_hms(2026, 3, 1, 11, 30, 0).unwrap());
    assert_eq!(
        s.ingest(&[resolved.clone()]).await.unwrap(),
        vec![IngestOutcome::Resolved {
            request_id: Some(rid)
        }]
    );
    assert_eq!(
        s.ingest(&[resolved]).await.unwrap(),
        vec![IngestOutcome::Redelivery {
            request_id: Some(rid)
        }]
    );
    let page = s
        .list_signals(&SignalFilter {
            status: Some(SignalStatus::Resolved),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(page.total, 1);
    assert_eq!(
        page.items[0].ends_at,
        Some(Utc.with_ymd_and_hms(2026, 3, 1, 11, 30, 0).unwrap())
    );
    assert!(page.items[0].resolved_at.is_some());
    let kinds: Vec<String> = s
        .audit_trail(rid)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(kinds, ["received", "signal_resolved"]);
}

async fn concurrent_alerts_for_one_target_open_one_request(f: Fixture) {
    let mut tasks = Vec::new();
    for i in 0..24u32 {
        let store = f.store.clone();
        tasks.push(tokio::spawn(async move {
            store
                .ingest(&[signal(&format!("c{i}"), i, CHECKOUT)])
                .await
                .unwrap()
        }));
    }
    let mut opened = 0;
    for t in tasks {
        if matches!(t.await.unwrap()[0], IngestOutcome::Opened { .. }) {
            opened += 1;
        }
    }
    assert_eq!(opened, 1);
    let page = f.store.list_requests(&page(10)).await.unwrap();
    assert_eq!(page.items.len(), 1);
    assert_eq!(page.items[0].occurrence_count, 24);
}

async fn concurrent_redelivery_is_stored_once(f: Fixture) {
    let mut tasks = Vec::new();
    for _ in 0..12 {
        let store = f.store.clone();
        tasks.push(tokio::spawn(async move {
            store.ingest(&[signal("dup", 0, CHECKOUT)]).await.unwrap()
        }));
    }
    let mut outcomes = Vec::new();
    for t in tasks {
        outcomes.push(t.await.unwrap()[0]);
    }
    let opened = outcomes
        .iter()
        .filter(|o| matches!(o, IngestOutcome::Opened { .. }))
        .count();
    let redelivered = outcomes
        .iter()
        .filter(|o| matches!(o, IngestOutcome::Redelivery { .. }))
        .count();
    assert_eq!((opened, redelivered), (1, 11), "{outcomes:?}");
    let signals = f
        .store
        .list_signals(&SignalFilter {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(signals.total, 1);
    assert_eq!(
        f.store.list_requests(&page(10)).await.unwrap().items[0].occurrence_count,
        1
    );
}

/// The same 260 deliveries, in the same order, for two disjoint sets of alerts: one store call
/// for the whole batch (several statement chunks, duplicates, re-fires and resolutions inside
/// it), then one call per signal. Every outcome, count and audit row must come out the same.
async fn a_large_batch_decides_like_one_signal_at_a_time(f: Fixture) {
    fn deliveries(ns: &str) -> Vec<NewSignal> {
        let mut out: Vec<NewSignal> = Vec::new();
        for i in 0..260u32 {
            let pod = format!("pod-{}", i % 37);
            let mut s = signal(&format!("{ns}-{}", i % 90), i / 90, Some((ns, "Pod", &pod)));
            if i % 11 == 0 {
                s.status = SignalStatus::Resolved;
                s.ends_at = Some(s.starts_at + chrono::Duration::minutes(3));
            }
            out.push(s.clone());
            if i % 7 == 0 {
                out.push(s); // delivered twice in one batch
            }
        }
        out
    }
    /// Outcomes with request ids replaced by the order in which each request first appeared.
    fn shape(outcomes: &[IngestOutcome]) -> Vec<(u8, Option<usize>, i64)> {
        let mut seen: Vec<uuid::Uuid> = Vec::new();
        let mut index = |id: Option<uuid::Uuid>| {
            id.map(|id| match seen.iter().position(|s| *s == id) {
                Some(n) => n,
                None => {
                    seen.push(id);
                    seen.len() - 1
                }
            })
        };
        outcomes
            .iter()
            .map(|o| match *o {
                IngestOutcome::Opened { request_id } => (0, index(Some(request_id)), 1),
                IngestOutcome::Occurrence {
                    request_id,
                    occurrence_count,
                } => (1, index(Some(request_id)), occurrence_count),
                IngestOutcome::Redelivery { request_id } => (2, index(request_id), 0),
                IngestOutcome::Resolved { request_id } => (3, index(request_id), 0),
            })
            .collect()
    }
    let s = &f.store;
    let batch = deliveries("batch");
    let batched = s.ingest(&batch).await.unwrap();
    assert_eq!(batched.len(), batch.len());
    let mut single = Vec::new();
    for signal in deliveries("single") {
        single.extend(s.ingest(&[signal]).await.unwrap());
    }
    assert_eq!(shape(&batched), shape(&single));
    assert!(shape(&batched).iter().any(|o| o.0 == 2), "no redelivery");
    assert!(shape(&batched).iter().any(|o| o.0 == 3), "no resolution");

    let summary = |ns: &'static str| async move {
        let filter = RequestFilter {
            namespace: Some(ns.to_owned()),
            limit: 1000,
            ..Default::default()
        };
        let requests = s.list_requests(&filter).await.unwrap();
        let mut counts: Vec<(String, i64, Vec<String>)> = Vec::new();
        for r in &requests.items {
            let trail = s.audit_trail(r.id).await.unwrap();
            counts.push((
                r.target.as_ref().unwrap().name.clone(),
                r.occurrence_count,
                trail.into_iter().map(|e| e.kind).collect(),
            ));
        }
        counts.sort();
        let signals = s
            .list_signals(&SignalFilter {
                namespace: Some(ns.to_owned()),
                limit: 1,
                ..Default::default()
            })
            .await
            .unwrap()
            .total;
        (counts, signals)
    };
    let (batch_requests, batch_signals) = summary("batch").await;
    let (single_requests, single_signals) = summary("single").await;
    assert_eq!(batch_requests.len(), 37);
    assert_eq!(batch_requests, single_requests);
    assert_eq!(batch_signals, single_signals);
}

fn step(to: Phase) -> StepCommit {
    StepCommit {
        to,
        reason: to.is_terminal().then(|| "test says so".to_owned()),
        state: StageState::default(),
        attempts: 0,
        not_before: None,
        release: false,
        events: vec![],
    }
}

async fn claims_are_exclusive_and_leases_lapse(f: Fixture) {
    let s = &f.store;
    let rid = s.ingest(&[signal("l1", 0, CHECKOUT)]).await.unwrap()[0]
        .request_id()
        .unwrap();
    let lease = Duration::from_secs(30);
    let claimed = s.claim("w1", lease).await.unwrap().expect("claimable");
    assert_eq!(claimed.id, rid);
    assert!(s.claim("w2", lease).await.unwrap().is_none(), "held by w1");
    assert!(
        s.commit_step(rid, "w2", Phase::Received, step(Phase::Enriching))
            .await
            .unwrap()
            .is_none(),
        "a worker without the claim cannot commit"
    );
    let moved = s
        .commit_step(rid, "w1", Phase::Received, step(Phase::Enriching))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(moved.phase, Phase::Enriching);
    assert!(s.renew(rid, "w1", lease).await.unwrap());

    // w1 crashes: after the lease lapses, w2 resumes from the committed phase.
    f.clock.advance(chrono::Duration::seconds(31));
    let resumed = s.claim("w2", lease).await.unwrap().expect("lease lapsed");
    assert_eq!((resumed.id, resumed.phase), (rid, Phase::Enriching));
    assert!(!s.renew(rid, "w1", lease).await.unwrap(), "w1 lost it");
    assert!(
        s.commit_step(rid, "w1", Phase::Enriching, step(Phase::Investigating))
            .await
            .unwrap()
            .is_none(),
        "a stale worker cannot commit over the new owner"
    );
    s.release(rid, "w2").await.unwrap();
    assert!(
        s.claim("w3", lease).await.unwrap().is_some(),
        "released claims are free again"
    );
}

async fn concurrent_claims_never_share_a_request(f: Fixture) {
    for i in 0..20u32 {
        let name = format!("pod-{i}");
        f.store
            .ingest(&[signal(&format!("k{i}"), i, Some(("shop", "Pod", &name)))])
            .await
            .unwrap();
    }
    let mut tasks = Vec::new();
    for w in 0..8 {
        let store = f.store.clone();
        tasks.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            while let Some(r) = store
                .claim(&format!("w{w}"), Duration::from_secs(60))
                .await
                .unwrap()
            {
                mine.push(r.id);
            }
            mine
        }));
    }
    let mut seen = HashSet::new();
    let mut total = 0;
    for t in tasks {
        for id in t.await.unwrap() {
            total += 1;
            assert!(seen.insert(id), "request {id} claimed twice");
        }
    }
    assert_eq!(total, 20);
}

/// Issue 15, item 6: workers claim in batches and commit many steps in one transaction. Four
/// workers claiming 16 at a time share 50 requests without overlap, oldest first; a batch in
/// which one request was taken over commits the others and writes nothing for that one; the
/// finished ones free their targets and the audit chain holds.
async fn batches_are_claimed_once_and_commit_together(f: Fixture) {
    let s = &f.store;
    let mut opened = Vec::new();
    for i in 0..50u32 {
        let name = format!("pod-{i}");
        let out = s
            .ingest(&[signal(&format!("b{i}"), i, Some(("shop", "Pod", &name)))])
            .await
            .unwrap();
        opened.push(out[0].request_id().unwrap());
        f.clock.advance(chrono::Duration::milliseconds(1));
    }
    let mut tasks = Vec::new();
    for w in 0..4 {
        let store = s.clone();
        tasks.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            loop {
                let batch = store
                    .claim_batch(&format!("w{w}"), Duration::from_secs(60), 16)
                    .await
                    .unwrap();
                if batch.is_empty() {
                    return mine;
                }
                assert!(batch.len() <= 16);
                assert!(
                    batch.windows(2).all(|p| p[0].created_at <= p[1].created_at),
                    "a batch comes oldest first"
                );
                mine.push(batch);
            }
        }));
    }
    let mut seen = HashSet::new();
    let mut batches = Vec::new();
    for (w, t) in tasks.into_iter().enumerate() {
        for batch in t.await.unwrap() {
            for r in &batch {
                assert!(seen.insert(r.id), "request {} claimed twice", r.id);
            }
            batches.push((format!("w{w}"), batch));
        }
    }
    assert_eq!(seen.len(), 50);

    // One worker's batch: the second request is taken over by another worker (its lease lapsed
    // and it was released and claimed again) before the batch commits.
    let (worker, batch) = batches.iter().find(|(_, b)| b.len() >= 3).unwrap();
    let stolen = batch[1].id;
    s.release(stolen, worker).await.unwrap();
    assert_eq!(
        s.claim("thief", Duration::from_secs(60))
            .await
            .unwrap()
            .unwrap()
            .id,
        stolen
    );
    let steps: Vec<PendingStep> = batch
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut commit = step(if i == 0 {
                Phase::Failed
            } else {
                Phase::Enriching
            });
            commit.events = vec![AuditDraft::new("note", "test", format!("step {i}"))];
            PendingStep {
                id: r.id,
                from: Phase::Received,
                via: None,
                step: commit,
            }
        })
        .collect();
    let answers = s.commit_steps(worker, &steps).await.unwrap();
    assert_eq!(answers.len(), batch.len());
    assert!(
        answers[1].is_none(),
        "the taken-over request is not written"
    );
    assert_eq!(answers[0].as_ref().unwrap().phase, Phase::Failed);
    for a in &answers[2..] {
        assert_eq!(a.as_ref().unwrap().phase, Phase::Enriching);
    }
    let untouched = s.get_request(stolen).await.unwrap().unwrap();
    assert_eq!(untouched.phase, Phase::Received);
    let trail = s.audit_trail(stolen).await.unwrap();
    assert!(trail.iter().all(|e| e.kind != "note"), "{trail:?}");
    let trail = s.audit_trail(batch[2].id).await.unwrap();
    let kinds: Vec<&str> = trail.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["received", "note", "transition"]);

    // The failed one freed its target: the same pod opens a new request.
    let again = s
        .ingest(&[signal(
            "b-again",
            59,
            Some((
                "shop",
                "Pod",
                batch[0].target.as_ref().unwrap().name.as_str(),
            )),
        )])
        .await
        .unwrap();
    assert!(
        matches!(again[0], IngestOutcome::Opened { .. }),
        "{again:?}"
    );
    let chain = s.verify_chain().await.unwrap();
    assert!(chain.intact(), "{chain:?}");
}

/// Ingest and step commits from many tasks at once (on Postgres, parallel transactions that
/// queue for the chain's lock only to append) still leave one unbroken chain, and no deadlock.
async fn concurrent_writers_keep_one_unbroken_chain(f: Fixture) {
    let mut tasks = Vec::new();
    for w in 0..8u32 {
        let store = f.store.clone();
        tasks.push(tokio::spawn(async move {
            let worker = format!("w{w}");
            for i in 0..10u32 {
                let name = format!("pod-{w}-{i}");
                let fp = format!("c{w}-{i}");
                store
                    .ingest(&[signal(&fp, i, Some(("shop", "Pod", &name)))])
                    .await
                    .unwrap();
                let batch = store
                    .claim_batch(&worker, Duration::from_secs(60), 4)
                    .await
                    .unwrap();
                let steps: Vec<PendingStep> = batch
                    .iter()
                    .map(|r| PendingStep {
                        id: r.id,
                        from: r.phase,
                        via: None,
                        step: step(if r.phase == Phase::Received {
                            Phase::Enriching
                        } else {
                            Phase::Failed
                        }),
                    })
                    .collect();
                store.commit_steps(&worker, &steps).await.unwrap();
                for r in &batch {
                    store.release(r.id, &worker).await.unwrap();
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let chain = f.store.verify_chain().await.unwrap();
    assert!(chain.intact(), "{chain:?}");
    assert!(chain.events >= 80, "{chain:?}");
}

async fn a_step_commits_with_its_audit_events(f: Fixture) {
    let s = &f.store;
    let rid = s.ingest(&[signal("t1", 0, CHECKOUT)]).await.unwrap()[0]
        .request_id()
        .unwrap();
    s.claim("w1", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    s.commit_step(rid, "w1", Phase::Received, step(Phase::Enriching))
        .await
        .unwrap()
        .unwrap();
    let mut commit = step(Phase::ManualReviewRequired);
    commit.reason = Some("investigation not available".into());
    commit.events = vec![
        AuditDraft::new("note", "test", "looked at it")
            .with_payload(serde_json::json!({"tool_calls": 3})),
    ];
    let done = s
        .commit_step(rid, "w1", Phase::Enriching, commit)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(done.phase, Phase::ManualReviewRequired);
    assert_eq!(done.reason.as_deref(), Some("investigation not available"));
    let trail = s.audit_trail(rid).await.unwrap();
    let summary: Vec<(String, Option<Phase>, String)> = trail
        .iter()
        .map(|e| (e.kind.clone(), e.phase, e.message.clone()))
        .collect();
    assert_eq!(
        summary,
        vec![
            (
                "received".into(),
                Some(Phase::Received),
                summary[0].2.clone()
            ),
            (
                "transition".into(),
                Some(Phase::Enriching),
                "Received -> Enriching".into()
            ),
            ("note".into(), Some(Phase::Enriching), "looked at it".into()),
            (
                "transition".into(),
                Some(Phase::ManualReviewRequired),
                "Enriching -> ManualReviewRequired: investigation not available".into()
            ),
        ]
    );
    assert_eq!(trail[2].payload["tool_calls"], 3);
    assert_eq!(trail[3].actor, "w1");
    assert!(
        s.claim("w1", Duration::from_secs(30))
            .await
            .unwrap()
            .is_none(),
        "terminal is not claimable"
    );
}

/// What the Remediation mirror (src/mirror) follows: the requests changed since a watermark,
/// each once, in the order of its last change, paged by that id.
async fn changed_requests_follow_the_audit_trail_from_a_watermark(f: Fixture) {
    let s = &f.store;
    let start = s.audit_head().await.unwrap();
    assert!(s.changed_requests(start, 10).await.unwrap().is_empty());
    let a = s.ingest(&[signal("w1", 0, CHECKOUT)]).await.unwrap()[0]
        .request_id()
        .unwrap();
    let b = s
        .ingest(&[signal("w2", 0, Some(("shop", "Deployment", "cart")))])
        .await
        .unwrap()[0]
        .request_id()
        .unwrap();
    // `a` changes again after `b` opened: it comes last, once.
    s.claim_batch("w", Duration::from_secs(30), 10)
        .await
        .unwrap();
    s.commit_step(a, "w", Phase::Received, step(Phase::Enriching))
        .await
        .unwrap()
        .unwrap();
    s.append_audit(
        None,
        None,
        &AuditDraft::new("note", "test", "about no request"),
    )
    .await
    .unwrap();
    let changed = s.changed_requests(start, 10).await.unwrap();
    let ids: Vec<uuid::Uuid> = changed.iter().map(|(_, id)| *id).collect();
    assert_eq!(ids, vec![b, a]);
    assert!(changed[0].0 < changed[1].0);
    let head = s.audit_head().await.unwrap();
    assert!(head > changed[1].0, "the last event is about no request");
    // Paged: continue from the last id answered.
    let first = s.changed_requests(start, 1).await.unwrap();
    assert_eq!(first, vec![changed[0]]);
    let rest = s.changed_requests(first[0].0, 10).await.unwrap();
    assert_eq!(rest, vec![changed[1]]);
    assert!(s.changed_requests(head, 10).await.unwrap().is_empty());
}

async fn illegal_transitions_are_refused(f: Fixture) {
    let s = &f.store;
    let rid = s.ingest(&[signal("i1", 0, CHECKOUT)]).await.unwrap()[0]
        .request_id()
        .unwrap();
    s.claim("w1", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    assert!(
        s.commit_step(rid, "w1", Phase::Received, step(Phase::Executing))
            .await
            .is_err()
    );
    let r = s.get_request(rid).await.unwrap().unwrap();
    assert_eq!(r.phase, Phase::Received, "nothing changed");
    assert_eq!(s.audit_trail(rid).await.unwrap().len(), 1);
}

async fn terminal_requests_free_their_target(f: Fixture) {
    let s = &f.store;
    let first = s.ingest(&[signal("f1", 0, CHECKOUT)]).await.unwrap()[0]
        .request_id()
        .unwrap();
    s.claim("w1", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    s.commit_step(first, "w1", Phase::Received, step(Phase::Failed))
        .await
        .unwrap()
        .unwrap();
    let second = s.ingest(&[signal("f1", 9, CHECKOUT)]).await.unwrap();
    match second[0] {
        IngestOutcome::Opened { request_id } => assert_ne!(request_id, first),
        other => panic!("expected a new request, got {other:?}"),
    }
}

async fn waiting_requests_are_not_claimed_early(f: Fixture) {
    let s = &f.store;
    let rid = s.ingest(&[signal("w1", 0, CHECKOUT)]).await.unwrap()[0]
        .request_id()
        .unwrap();
    s.claim("w1", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    let mut wait = step(Phase::Received);
    wait.not_before = Some(f.clock.now() + chrono::Duration::seconds(10));
    wait.attempts = 1;
    wait.release = true;
    s.commit_step(rid, "w1", Phase::Received, wait)
        .await
        .unwrap()
        .unwrap();
    assert!(
        s.claim("w2", Duration::from_secs(30))
            .await
            .unwrap()
            .is_none()
    );
    f.clock.advance(chrono::Duration::seconds(11));
    let r = s
        .claim("w2", Duration::from_secs(30))
        .await
        .unwrap()
        .expect("wait is over");
    assert_eq!(r.attempts, 1);
}

async fn audit_rows_cannot_be_changed_or_deleted(f: Fixture) {
    let rid = f.store.ingest(&[signal("x1", 0, CHECKOUT)]).await.unwrap()[0]
        .request_id()
        .unwrap();
    assert_eq!(f.store.audit_trail(rid).await.unwrap().len(), 1);
    let statements = [
        "UPDATE audit_events SET message = 'nothing happened'",
        "DELETE FROM audit_events",
    ];
    if f.url.starts_with("sqlite") {
        let mut conn = <sqlx::SqliteConnection as sqlx::Connection>::connect(&f.url)
            .await
            .unwrap();
        for sql in statements {
            let err = sqlx::query(sql).execute(&mut conn).await.unwrap_err();
            assert!(err.to_string().contains("append-only"), "{sql}: {err}");
        }
    } else {
        let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&f.url)
            .await
            .unwrap();
        for sql in statements.iter().chain(&["TRUNCATE audit_events"]) {
            let err = sqlx::query(*sql).execute(&mut conn).await.unwrap_err();
            assert!(err.to_string().contains("append-only"), "{sql}: {err}");
        }
    }
    let trail = f.store.audit_trail(rid).await.unwrap();
    assert_eq!(trail.len(), 1);
    assert_ne!(trail[0].message, "nothing happened");
}

async fn lists_filter_page_and_count(f: Fixture) {
    let s = &f.store;
    for i in 0..7u32 {
        let ns = if i % 2 == 0 { "shop" } else { "billing" };
        let name = format!("p{i}");
        s.ingest(&[signal(&format!("q{i}"), i, Some((ns, "Pod", &name)))])
            .await
            .unwrap();
        f.clock.advance(chrono::Duration::seconds(1));
    }
    let all = s.list_requests(&page(100)).await.unwrap();
    assert_eq!(all.items.len(), 7);
    assert!(all.next.is_none(), "everything fit in one page");
    assert!(
        all.items
            .windows(2)
            .all(|w| w[0].created_at >= w[1].created_at),
        "newest first"
    );
    // Paged by key: two pages of two, newest first, each continuing where the last stopped.
    let shop = |before| RequestFilter {
        namespace: Some("shop".into()),
        limit: 2,
        before,
        ..Default::default()
    };
    let first = s.list_requests(&shop(None)).await.unwrap();
    let names = |p: &kubemedic::store::RequestPage| -> Vec<String> {
        p.items
            .iter()
            .map(|r| r.target.as_ref().unwrap().name.clone())
            .collect()
    };
    assert_eq!(names(&first), ["p6", "p4"]);
    let second = s.list_requests(&shop(first.next)).await.unwrap();
    assert_eq!(names(&second), ["p2", "p0"]);
    assert!(second.next.is_none(), "no third page: {:?}", second.next);
    let cursor = first.next.unwrap();
    assert_eq!(
        kubemedic::store::Cursor::decode(&cursor.encode()),
        Some(cursor),
        "a cursor survives a URL"
    );
    // Target, alert name and a time range.
    let p3 = s
        .list_requests(&RequestFilter {
            target: Some("p3".into()),
            signal_name: Some("PodCrash".into()),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(names(&p3), ["p3"]);
    let t0 = all.items.last().unwrap().created_at;
    let window = s
        .list_requests(&RequestFilter {
            since: Some(t0 + chrono::Duration::seconds(2)),
            until: Some(t0 + chrono::Duration::seconds(4)),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(names(&window), ["p3", "p2"]);
    let none = s
        .list_requests(&RequestFilter {
            signal_name: Some("OtherAlert".into()),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(none.items.is_empty());
    let received = s
        .list_requests(&RequestFilter {
            phase: Some(Phase::Received),
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(received.items.len(), 7);
    let counts = s.count_by_phase().await.unwrap();
    assert_eq!(counts, vec![(Phase::Received, 7)]);
    let health = s.health().await.unwrap();
    assert_eq!(health.migrations_applied, health.migrations_expected);
    let signals = s
        .list_signals(&SignalFilter {
            namespace: Some("billing".into()),
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(signals.total, 3);
}

async fn one_execution_lock_per_target_until_the_holder_finishes(f: Fixture) {
    let s = &f.store;
    let a = s.ingest(&[signal("l1", 0, CHECKOUT)]).await.unwrap()[0]
        .request_id()
        .unwrap();
    let b = uuid::Uuid::new_v4();
    let target = Target::new("Deployment", "checkout", Some("shop".into())).fingerprint();
    let held = s
        .acquire_execution_lock(&target, Some("shop"), a)
        .await
        .unwrap();
    assert_eq!(held.request_id, a);
    // The holder may take it again (a retry after a crash); another request may not.
    assert_eq!(
        s.acquire_execution_lock(&target, Some("shop"), a)
            .await
            .unwrap()
            .request_id,
        a
    );
    assert_eq!(
        s.acquire_execution_lock(&target, Some("shop"), b)
            .await
            .unwrap()
            .request_id,
        a,
        "a second request on the same target sees who holds it"
    );
    assert_eq!(s.execution_locks(Some("shop")).await.unwrap().len(), 1);
    assert_eq!(s.execution_locks(Some("other")).await.unwrap().len(), 0);
    // The commit that ends the holder frees the target.
    s.claim("w1", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    s.commit_step(a, "w1", Phase::Received, step(Phase::Failed))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        s.acquire_execution_lock(&target, Some("shop"), b)
            .await
            .unwrap()
            .request_id,
        b
    );
}

async fn an_intent_is_recorded_once_and_settled(f: Fixture) {
    let s = &f.store;
    let r = uuid::Uuid::new_v4();
    let (first, created) = s
        .begin_intent(r, 1, "rollout_undo", &serde_json::json!({"uid": "u1"}))
        .await
        .unwrap();
    assert_eq!(first.status, IntentStatus::Started);
    assert!(created);
    // A retry after a crash finds the intent as it was, not a fresh one.
    let (again, created) = s
        .begin_intent(r, 1, "rollout_undo", &serde_json::json!({"uid": "u2"}))
        .await
        .unwrap();
    assert_eq!(again.status, IntentStatus::Started);
    assert!(!created, "the retry finds the intent of the first attempt");
    assert_eq!(again.detail["uid"], "u1");
    s.finish_intent(
        r,
        1,
        IntentStatus::Applied,
        &serde_json::json!({"toRevision": 1}),
    )
    .await
    .unwrap();
    let (settled, _) = s
        .begin_intent(r, 1, "rollout_undo", &serde_json::json!({}))
        .await
        .unwrap();
    assert_eq!(settled.status, IntentStatus::Applied);
    assert_eq!(settled.detail["toRevision"], 1);
    s.begin_intent(r, 2, "wait_rollout", &serde_json::json!({}))
        .await
        .unwrap();
    let all = s.intents(r).await.unwrap();
    assert_eq!(
        all.iter().map(|i| (i.step, i.status)).collect::<Vec<_>>(),
        vec![(1, IntentStatus::Applied), (2, IntentStatus::Started)]
    );
}

fn record(
    target: &Target,
    minutes_ago: i64,
    now: chrono::DateTime<Utc>,
    score: f64,
) -> kubemedic::domain::HistoryRecord {
    serde_json::from_value(serde_json::json!({
        "remediationUid": uuid::Uuid::new_v4().to_string(),
        "target": target,
        "completedAt": now - chrono::Duration::minutes(minutes_ago),
        "signalName": "PodCrash",
        "workflowType": "RollbackDeployment",
        "workflowId": "rollback-deployment-previous-revision",
        "outcome": "completed",
        "effectivenessScore": score,
        "preRemediationSpecHash": "sha256:pre",
        "postRemediationSpecHash": "sha256:post",
        "signalResolved": score > 0.5,
        "assessmentReason": "Full",
    }))
    .unwrap()
}

async fn history_is_kept_per_target_and_in_order(f: Fixture) {
    let s = &f.store;
    let now = f.clock.now();
    let checkout = Target::new("Deployment", "checkout", Some("shop".into()));
    let cart = Target::new("Deployment", "cart", Some("shop".into()));
    let old = record(&checkout, 60 * 24 * 100, now, 0.9);
    let early = record(&checkout, 120, now, 0.2);
    let late = record(&checkout, 10, now, 0.4);
    for r in [&late, &early, &old, &record(&cart, 5, now, 1.0)] {
        s.record_history(r).await.unwrap();
    }
    // Recording the same remediation twice keeps one entry.
    s.record_history(&late).await.unwrap();
    let since = now - chrono::Duration::days(90);
    let got = s.history(&checkout.fingerprint(), since).await.unwrap();
    assert_eq!(
        got,
        vec![early, late],
        "oldest first, the target's own, within the window"
    );
}

fn outcome(
    signature: &kubemedic::domain::Signature,
    workflow: &str,
    effective: bool,
    at: chrono::DateTime<Utc>,
) -> kubemedic::domain::PatternOutcome {
    kubemedic::domain::PatternOutcome {
        request_id: uuid::Uuid::new_v4(),
        signature: signature.clone(),
        workflow_id: workflow.into(),
        action_type: "RestartDeployment".into(),
        replaced: effective.then(|| "delete-pod".to_owned()),
        target: Target::new("Deployment", "checkout", Some("shop".into())),
        effective,
        score: Some(if effective { 1.0 } else { 0.53 }),
        recorded_at: at,
    }
}

async fn outcomes_are_kept_once_per_request_and_read_per_signature(f: Fixture) {
    use kubemedic::domain::SignatureFacts;
    use kubemedic::history::patterns::signature;
    let s = &f.store;
    let now = f.clock.now();
    let facts = |states: &[&str]| SignatureFacts {
        alert: "KubePodNotReady".into(),
        kind: "Deployment".into(),
        pod_states: states.iter().map(|s| (*s).to_owned()).collect(),
        events: vec!["Unhealthy".into()],
    };
    let wedged = signature(facts(&["not-ready"]));
    let looping = signature(facts(&["not-ready", "waiting:CrashLoopBackOff"]));
    let old = outcome(
        &wedged,
        "restart-rolling",
        true,
        now - chrono::Duration::days(100),
    );
    let first = outcome(
        &wedged,
        "restart-rolling",
        true,
        now - chrono::Duration::hours(5),
    );
    let second = outcome(
        &wedged,
        "restart-rolling",
        false,
        now - chrono::Duration::hours(1),
    );
    let other = outcome(&looping, "rollback-deployment", true, now);
    for o in [&second, &old, &first, &other] {
        assert!(s.record_outcome(o).await.unwrap());
    }
    // Recording a request's outcome again (a retried verification) keeps the first.
    let mut again = first.clone();
    again.effective = false;
    assert!(!s.record_outcome(&again).await.unwrap());
    let got = s
        .outcomes(&wedged.hash, now - chrono::Duration::days(90))
        .await
        .unwrap();
    assert_eq!(
        got,
        vec![first, second],
        "oldest first, the signature's own, within the window"
    );
    assert_eq!(got[0].signature.facts.pod_states, vec!["not-ready"]);
}

async fn a_resolved_signal_is_seen_since_its_time(f: Fixture) {
    let s = &f.store;
    s.ingest(&[signal("r1", 0, CHECKOUT)]).await.unwrap();
    let before = f.clock.now();
    assert!(!s.signal_resolved_since("r1", before).await.unwrap());
    f.clock.advance(chrono::Duration::minutes(1));
    let mut resolved = signal("r1", 0, CHECKOUT);
    resolved.status = SignalStatus::Resolved;
    resolved.ends_at = Some(f.clock.now());
    s.ingest(&[resolved]).await.unwrap();
    assert!(s.signal_resolved_since("r1", before).await.unwrap());
    assert!(
        !s.signal_resolved_since("r1", f.clock.now() + chrono::Duration::minutes(5))
            .await
            .unwrap(),
        "a resolution before the window does not count"
    );
    assert!(!s.signal_resolved_since("other", before).await.unwrap());
}

/// A U+0000 in what a stage produced (a log line, a model's answer) would make PostgreSQL refuse
/// the whole commit — and the worker retry it forever. Both backends store U+FFFD instead.
async fn a_nul_character_is_stored_the_same_on_both_backends(f: Fixture) {
    let s = &f.store;
    let rid = s.ingest(&[signal("nul", 0, CHECKOUT)]).await.unwrap()[0]
        .request_id()
        .unwrap();
    s.claim("w1", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    let mut commit = step(Phase::ManualReviewRequired);
    commit.reason = Some("the log says \u{0}boom".into());
    commit.state.waiting = Some(kubemedic::domain::Waiting {
        dependency: "cluster".into(),
        message: "answered \u{0}".into(),
        since: f.clock.now(),
    });
    commit.events = vec![
        AuditDraft::new("note", "test", "tool output \u{0}here").with_payload(
            serde_json::json!({"output": "binary\u{0}data", "key\u{0}": [1, "x\u{0}"]}),
        ),
    ];
    let done = s
        .commit_step(rid, "w1", Phase::Received, commit)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(done.reason.as_deref(), Some("the log says \u{FFFD}boom"));
    assert_eq!(done.state.waiting.unwrap().message, "answered \u{FFFD}");
    let trail = s.audit_trail(rid).await.unwrap();
    let note = trail.iter().find(|e| e.kind == "note").unwrap();
    assert_eq!(note.message, "tool output \u{FFFD}here");
    assert_eq!(note.payload["output"], "binary\u{FFFD}data");
    assert_eq!(note.payload["key\u{FFFD}"][1], "x\u{FFFD}");
}

/// The database kubemedic creates holds the audit trail: its directory is 0700 and its files
/// 0600, whatever the umask.
#[cfg(unix)]
#[tokio::test]
async fn the_sqlite_database_it_creates_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let db = dir.join("kubemedic.db");
    let url = format!("sqlite://{}", db.display());
    let store = common::open_store(&url, Arc::new(kubemedic::clock::SystemClock)).await;
    store
        .ingest(&[signal("private", 0, CHECKOUT)])
        .await
        .unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&db), 0o600);
    let wal = dir.join("kubemedic.db-wal");
    if wal.exists() {
        assert_eq!(mode(&wal), 0o600);
    }
}

fn approval_for(request_id: uuid::Uuid, now: chrono::DateTime<Utc>) -> ApprovalRequest {
    ApprovalRequest {
        id: uuid::Uuid::new_v4(),
        request_id,
        created_at: now,
        expires_at: now + chrono::Duration::minutes(15),
        signal_name: "KubePodCrashLooping".into(),
        target: Target::new("Deployment", "checkout", Some("shop".into())),
        environment: Some("production".into()),
        summary: "checkout 1.4.2 crashes on start".into(),
        evidence: vec!["revision 2 crash-loops".into()],
        workflow_id: "rollback-deployment-previous-revision".into(),
        workflow_version: "1.0.0".into(),
        action_type: "RollbackDeployment".into(),
        parameters: Default::default(),
        rationale: "undo the bad rollout".into(),
        alternatives: vec![],
        confidence: 0.9,
        risk_score: 85,
        risk_reason: "production".into(),
        required_because: vec!["production".into()],
        policy_revision: Some("sha256:abc".into()),
        approvers: vec!["alice@example.com".into()],
        slack_approvers: vec![],
        proof: None,
        decision: None,
        note: None,
    }
}

fn offer(approval: &ApprovalRequest, channel: Channel, to: &str) -> Notification {
    Notification {
        id: uuid::Uuid::new_v4(),
        approval_id: approval.id,
        channel,
        recipient: to.into(),
        kind: NotificationKind::Offer,
        status: DeliveryStatus::Pending,
        attempts: 0,
        next_attempt_at: Some(approval.created_at),
        last_error: None,
        external_ref: None,
        created_at: approval.created_at,
        updated_at: approval.created_at,
    }
}

fn decision(d: Decision, by: &str, via: Channel, at: chrono::DateTime<Utc>) -> ApprovalDecision {
    ApprovalDecision {
        decision: d,
        decided_by: by.into(),
        decided_via: via,
        decided_at: at,
        message: None,
        alternative: None,
    }
}

async fn awaiting(f: &Fixture, fp: &str) -> uuid::Uuid {
    f.store.ingest(&[signal(fp, 0, CHECKOUT)]).await.unwrap()[0]
        .request_id()
        .unwrap()
}

async fn an_approval_is_created_once_and_the_first_decision_wins(f: Fixture) {
    let s = &f.store;
    let rid = awaiting(&f, "appr").await;
    let now = f.clock.now();
    let a = approval_for(rid, now);
    let mail = offer(&a, Channel::Email, "alice@example.com");
    let slack = offer(&a, Channel::Slack, "#ops");
    let stored = s
        .create_approval(&a, &[mail.clone(), slack.clone()])
        .await
        .unwrap();
    assert_eq!(stored, a);
    // Idempotent per request: a second creation (a retried stage) returns the first.
    let again = approval_for(rid, now);
    assert_eq!(s.create_approval(&again, &[]).await.unwrap().id, a.id);
    assert_eq!(s.approval_of_request(rid).await.unwrap().unwrap().id, a.id);
    assert_eq!(s.notifications(a.id).await.unwrap().len(), 2);
    let pending = s
        .list_approvals(Some(ApprovalStatus::Pending), 10, 0)
        .await
        .unwrap();
    assert_eq!(pending.total, 1);

    // The mail goes out; the Slack message does not (yet).
    let claimed = s
        .claim_notification(Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    let delivered = claimed.id;
    s.finish_notification(
        delivered,
        &DeliveryResult::Delivered {
            external_ref: Some(serde_json::json!({"message_id": "<x@kubemedic>"})),
        },
        &AuditDraft::new("notification", "approval", "delivered"),
    )
    .await
    .unwrap();

    f.clock.advance(chrono::Duration::seconds(60));
    let first = decision(
        Decision::Approved,
        "alice@example.com",
        Channel::Email,
        f.clock.now(),
    );
    let DecideOutcome::Decided(decided) = s.decide_approval(a.id, &first).await.unwrap() else {
        panic!("the first decision must win");
    };
    assert_eq!(decided.status(), ApprovalStatus::Approved);
    let late = decision(
        Decision::Rejected,
        "bob@example.com",
        Channel::Slack,
        f.clock.now(),
    );
    let DecideOutcome::AlreadyDecided(kept) = s.decide_approval(a.id, &late).await.unwrap() else {
        panic!("a later decision must be refused");
    };
    assert_eq!(kept.decision.unwrap().decided_by, "alice@example.com");
    assert_eq!(
        s.get_approval(a.id)
            .await
            .unwrap()
            .unwrap()
            .decision
            .unwrap(),
        first
    );
    assert_eq!(
        s.decide_approval(uuid::Uuid::new_v4(), &late)
            .await
            .unwrap(),
        DecideOutcome::NotFound
    );

    // No stale buttons: the delivered offer gets an outcome message, the unsent one is dropped.
    let notes = s.notifications(a.id).await.unwrap();
    let outcome: Vec<_> = notes
        .iter()
        .filter(|n| n.kind == NotificationKind::Outcome)
        .collect();
    assert_eq!(outcome.len(), 1, "{notes:#?}");
    assert_eq!(outcome[0].recipient, claimed.recipient);
    assert_eq!(outcome[0].status, DeliveryStatus::Pending);
    assert_eq!(
        outcome[0].external_ref,
        Some(serde_json::json!({"message_id": "<x@kubemedic>"}))
    );
    let unsent = notes
        .iter()
        .find(|n| n.kind == NotificationKind::Offer && n.id != delivered)
        .unwrap();
    assert_eq!(unsent.status, DeliveryStatus::Cancelled);

    assert_eq!(
        s.list_approvals(Some(ApprovalStatus::Pending), 10, 0)
            .await
            .unwrap()
            .total,
        0
    );
    assert_eq!(
        s.list_approvals(Some(ApprovalStatus::Approved), 10, 0)
            .await
            .unwrap()
            .total,
        1
    );
    let kinds: Vec<String> = s
        .audit_trail(rid)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    for k in [
        "approval_requested",
        "notification",
        "approval_decided",
        "approval_decision_refused",
    ] {
        assert!(kinds.iter().any(|x| x == k), "{k} not in {kinds:?}");
    }
}

/// An approved change that made its target worse: the note (what, and that it was undone) is
/// kept on the approval, a `made_worse` message goes to the recipient the offer reached, in
/// its thread, and the trail says so — once, however often the verifier or the undo retries.
/// A request nobody approved has nobody to tell.
async fn a_change_that_made_things_worse_is_told_once_to_whom_its_offer_reached(f: Fixture) {
    let s = &f.store;
    let rid = awaiting(&f, "worse").await;
    let a = approval_for(rid, f.clock.now());
    let mail = offer(&a, Channel::Email, "alice@example.com");
    let slack = offer(&a, Channel::Slack, "#ops");
    s.create_approval(&a, &[mail.clone(), slack.clone()])
        .await
        .unwrap();
    // Only the mail was delivered before the decision.
    let claimed = s
        .claim_notification(Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    let thread = serde_json::json!({"message_id": "<offer@kubemedic>"});
    s.finish_notification(
        claimed.id,
        &DeliveryResult::Delivered {
            external_ref: Some(thread.clone()),
        },
        &AuditDraft::new("notification", "approval", "delivered"),
    )
    .await
    .unwrap();
    let approved = decision(
        Decision::Approved,
        "alice@example.com",
        Channel::Email,
        f.clock.now(),
    );
    s.decide_approval(a.id, &approved).await.unwrap();

    let note = "Undone: scale-replicas made shop/Deployment/checkout worse (new CrashLoopBackOff); undone: the spec before it is back — a person must look";
    for _ in 0..2 {
        s.approval_made_worse(rid, note).await.unwrap();
    }
    let kept = s.get_approval(a.id).await.unwrap().unwrap();
    assert_eq!(kept.note.as_deref(), Some(note));
    assert_eq!(
        kept.status(),
        ApprovalStatus::Approved,
        "the decision stands"
    );
    let told: Vec<Notification> = s
        .notifications(a.id)
        .await
        .unwrap()
        .into_iter()
        .filter(|n| n.kind == NotificationKind::MadeWorse)
        .collect();
    assert_eq!(
        told.len(),
        1,
        "once, to the one the offer reached: {told:#?}"
    );
    assert_eq!(told[0].recipient, claimed.recipient);
    assert_eq!(told[0].status, DeliveryStatus::Pending);
    assert_eq!(told[0].external_ref, Some(thread), "in the offer's thread");
    let trail = s.audit_trail(rid).await.unwrap();
    let worse: Vec<_> = trail
        .iter()
        .filter(|e| e.kind == "approval_made_worse")
        .collect();
    assert_eq!(worse.len(), 1, "{trail:#?}");

    // A request without an approval: nothing to keep, nobody to tell.
    let alone = s.ingest(&[signal("alone", 1, None)]).await.unwrap()[0]
        .request_id()
        .unwrap();
    s.approval_made_worse(alone, note).await.unwrap();
    assert!(s.approval_of_request(alone).await.unwrap().is_none());
    assert!(
        !s.audit_trail(alone)
            .await
            .unwrap()
            .iter()
            .any(|e| e.kind == "approval_made_worse")
    );
}

async fn concurrent_decisions_have_exactly_one_winner(f: Fixture) {
    let rid = awaiting(&f, "race").await;
    let a = approval_for(rid, f.clock.now());
    f.store.create_approval(&a, &[]).await.unwrap();
    let tasks: Vec<_> = (0..12)
        .map(|i| {
            let s = f.store.clone();
            let d = decision(
                if i % 2 == 0 {
                    Decision::Approved
                } else {
                    Decision::Rejected
                },
                &format!("approver-{i}"),
                Channel::Api,
                f.clock.now(),
            );
            tokio::spawn(async move { s.decide_approval(a.id, &d).await.unwrap() })
        })
        .collect();
    let mut winners = Vec::new();
    for t in tasks {
        if let DecideOutcome::Decided(d) = t.await.unwrap() {
            winners.push(d.decision.unwrap());
        }
    }
    assert_eq!(winners.len(), 1, "{winners:?}");
    let stored = f
        .store
        .get_approval(a.id)
        .await
        .unwrap()
        .unwrap()
        .decision
        .unwrap();
    assert_eq!(stored, winners[0]);
}

async fn nonces_nothing_can_replay_are_dropped_after_a_day(f: Fixture) {
    let s = &f.store;
    let clock = &f.clock;
    let open = |name: &'static str| async move {
        let rid = s
            .ingest(&[signal(name, 0, Some(("shop", "Deployment", name)))])
            .await
            .unwrap()[0]
            .request_id()
            .unwrap();
        let a = approval_for(rid, clock.now());
        s.create_approval(&a, &[]).await.unwrap();
        a
    };
    let pending = open("nonce-pending").await;
    let decided = open("nonce-decided").await;
    let by = decision(
        Decision::Approved,
        "alice@example.com",
        Channel::Email,
        f.clock.now(),
    );
    s.decide_approval(decided.id, &by).await.unwrap();
    assert!(s.consume_nonce("slack:sig", None).await.unwrap());
    assert!(
        s.consume_nonce("link:pending", Some(pending.id))
            .await
            .unwrap()
    );
    assert!(
        s.consume_nonce("link:decided", Some(decided.id))
            .await
            .unwrap()
    );

    // Within the day every nonce still refuses its replay.
    f.clock.advance(chrono::Duration::hours(23));
    assert!(!s.consume_nonce("slack:sig", None).await.unwrap());
    assert!(
        !s.consume_nonce("link:decided", Some(decided.id))
            .await
            .unwrap()
    );

    // A day on, the next use drops the Slack signature and the decided approval's link (the
    // signature's timestamp and the decision refuse those now), and keeps the pending one's.
    f.clock.advance(chrono::Duration::hours(2));
    assert!(s.consume_nonce("slack:other", None).await.unwrap());
    assert!(
        !s.consume_nonce("link:pending", Some(pending.id))
            .await
            .unwrap()
    );
    assert!(s.consume_nonce("slack:sig", None).await.unwrap());
    assert!(
        s.consume_nonce("link:decided", Some(decided.id))
            .await
            .unwrap()
    );
}

async fn nonces_are_single_use_and_the_signing_key_is_kept(f: Fixture) {
    let s = &f.store;
    assert!(s.consume_nonce("n-1", None).await.unwrap());
    assert!(!s.consume_nonce("n-1", None).await.unwrap());
    assert!(
        s.consume_nonce("n-2", Some(uuid::Uuid::new_v4()))
            .await
            .unwrap()
    );
    let first = s
        .setting_or_init("link_signing_key", &|| "k1".into())
        .await
        .unwrap();
    let second = s
        .setting_or_init("link_signing_key", &|| "k2".into())
        .await
        .unwrap();
    assert_eq!((first.as_str(), second.as_str()), ("k1", "k1"));
    // Survives a reopen (a restart).
    let reopened = common::open_store(&f.url, f.clock.clone() as Arc<dyn Clock>).await;
    let third = reopened
        .setting_or_init("link_signing_key", &|| "k3".into())
        .await
        .unwrap();
    assert_eq!(third, "k1");
}

async fn a_notification_is_sent_by_one_sender_and_retried_when_due(f: Fixture) {
    let s = &f.store;
    let rid = awaiting(&f, "retry").await;
    let a = approval_for(rid, f.clock.now());
    s.create_approval(&a, &[offer(&a, Channel::Email, "alice@example.com")])
        .await
        .unwrap();
    let n = s
        .claim_notification(Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    assert!(
        s.claim_notification(Duration::from_secs(60))
            .await
            .unwrap()
            .is_none(),
        "claimed twice"
    );
    let retry_at = f.clock.now() + chrono::Duration::seconds(30);
    s.finish_notification(
        n.id,
        &DeliveryResult::Retry {
            error: "connection refused".into(),
            at: retry_at,
        },
        &AuditDraft::new("notification", "approval", "attempt 1 failed"),
    )
    .await
    .unwrap();
    assert!(
        s.claim_notification(Duration::from_secs(60))
            .await
            .unwrap()
            .is_none(),
        "not due yet"
    );
    f.clock.advance(chrono::Duration::seconds(31));
    let again = s
        .claim_notification(Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((again.id, again.attempts), (n.id, 1));
    assert_eq!(again.last_error.as_deref(), Some("connection refused"));
    s.finish_notification(
        n.id,
        &DeliveryResult::GaveUp {
            error: "connection refused".into(),
        },
        &AuditDraft::new("notification", "approval", "gave up"),
    )
    .await
    .unwrap();
    let done = &s.notifications(a.id).await.unwrap()[0];
    assert_eq!((done.status, done.attempts), (DeliveryStatus::Failed, 2));
    f.clock.advance(chrono::Duration::seconds(3600));
    assert!(
        s.claim_notification(Duration::from_secs(60))
            .await
            .unwrap()
            .is_none()
    );
}

/// Fail closed: a decision that arrives after the approval's deadline (before the stage got to
/// expire it) or after its request ended some other way does not count: the approval expires,
/// decided by `system`, and the late decision is audited as refused.
async fn a_decision_after_the_deadline_or_the_requests_end_is_an_expiry(f: Fixture) {
    let s = &f.store;
    let rid = awaiting(&f, "late").await;
    let a = approval_for(rid, f.clock.now());
    s.create_approval(&a, &[]).await.unwrap();
    f.clock.advance(chrono::Duration::minutes(16));
    let late = decision(
        Decision::Approved,
        "alice@example.com",
        Channel::Api,
        f.clock.now(),
    );
    let DecideOutcome::AlreadyDecided(expired) = s.decide_approval(a.id, &late).await.unwrap()
    else {
        panic!("an approval past its deadline must not be approved");
    };
    let d = expired.decision.unwrap();
    assert_eq!(
        (d.decision, d.decided_by.as_str()),
        (Decision::Expired, "system")
    );
    let kinds: Vec<String> = s
        .audit_trail(rid)
        .await
        .unwrap()
        .into_iter()
        .map(|e| format!("{}: {}", e.kind, e.message))
        .collect();
    assert!(
        kinds
            .iter()
            .any(|k| k.starts_with("approval_decision_refused") && k.contains("expired first")),
        "{kinds:#?}"
    );

    // The request ended (a terminal phase) before anyone decided. (Another target: one active
    // request per target, and the first one is still open.)
    let rid = s
        .ingest(&[signal("ended", 1, Some(("shop", "Deployment", "payments")))])
        .await
        .unwrap()[0]
        .request_id()
        .unwrap();
    let b = approval_for(rid, f.clock.now());
    s.create_approval(&b, &[]).await.unwrap();
    // The earlier request may be claimed first; take claims until this one is ours.
    let mut ours = false;
    for _ in 0..3 {
        let claimed = s.claim("w1", Duration::from_secs(30)).await.unwrap();
        if claimed.is_some_and(|r| r.id == rid) {
            ours = true;
            break;
        }
    }
    assert!(ours, "the request was not claimed");
    s.commit_step(rid, "w1", Phase::Received, step(Phase::Enriching))
        .await
        .unwrap()
        .unwrap();
    s.commit_step(
        rid,
        "w1",
        Phase::Enriching,
        step(Phase::ManualReviewRequired),
    )
    .await
    .unwrap()
    .unwrap();
    let DecideOutcome::AlreadyDecided(ended) = s
        .decide_approval(
            b.id,
            &decision(
                Decision::Approved,
                "alice@example.com",
                Channel::Email,
                f.clock.now(),
            ),
        )
        .await
        .unwrap()
    else {
        panic!("an approval of an ended request must not be approved");
    };
    assert_eq!(ended.decision.unwrap().decision, Decision::Expired);
}

/// Connect to the fixture's database as someone with write access to it (an attacker, or an
/// operator by mistake) and run `sql` with the append-only triggers out of the way.
async fn tamper(f: &Fixture, sql: &str) {
    if f.url.starts_with("sqlite") {
        let mut conn = <sqlx::SqliteConnection as sqlx::Connection>::connect(&f.url)
            .await
            .unwrap();
        for drop in [
            "DROP TRIGGER audit_events_no_update",
            "DROP TRIGGER audit_events_no_delete",
        ] {
            let _ = sqlx::query(drop).execute(&mut conn).await;
        }
        sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
            .execute(&mut conn)
            .await
            .unwrap();
    } else {
        let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&f.url)
            .await
            .unwrap();
        sqlx::query("ALTER TABLE audit_events DISABLE TRIGGER USER")
            .execute(&mut conn)
            .await
            .unwrap();
        sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
            .execute(&mut conn)
            .await
            .unwrap();
    }
}

async fn the_audit_chain_names_an_edited_or_deleted_event(f: Fixture) {
    let s = &f.store;
    // A batch (chained in memory), single appends and a step commit all extend one chain.
    let opened = s
        .ingest(&[
            signal("c1", 0, CHECKOUT),
            signal("c2", 1, Some(("shop", "Pod", "cart-0"))),
        ])
        .await
        .unwrap();
    let rid = opened[0].request_id().unwrap();
    s.append_audit(
        Some(rid),
        None,
        &AuditDraft::new("note", "user:alice", "a note with a payload")
            .with_payload(serde_json::json!({"z": 1, "a": [1.5, -0.0, "x"], "m": {"k": null}})),
    )
    .await
    .unwrap();
    s.ingest(&[signal("c1", 0, CHECKOUT), signal("c3", 2, CHECKOUT)])
        .await
        .unwrap();
    let whole = s.verify_chain().await.unwrap();
    assert!(whole.intact(), "{whole:?}");
    assert_eq!(whole.events, 4, "{whole:?}");
    assert!(whole.head.is_some());
    let mine = s.verify_request_chain(rid).await.unwrap();
    assert!(mine.intact(), "{mine:?}");
    assert_eq!(mine.events, 3);

    let trail = s.audit_trail(rid).await.unwrap();
    let edited = trail[1].id;
    tamper(
        &f,
        &format!("UPDATE audit_events SET message = 'nothing to see' WHERE id = {edited}"),
    )
    .await;
    let report = s.verify_chain().await.unwrap();
    let broken = report.broken.expect("an edited row breaks the chain");
    assert_eq!(broken.event_id, edited);
    assert!(broken.reason.contains("edited"), "{}", broken.reason);
    assert_eq!(broken.request_id, Some(rid.to_string()));
    assert!(!s.verify_request_chain(rid).await.unwrap().intact());
}

async fn api_keys_are_kept_as_digests_and_revoking_ends_sessions(f: Fixture) {
    use kubemedic::domain::{ApiKey, Role, Session};
    let s = &f.store;
    let key = ApiKey {
        id: uuid::Uuid::new_v4(),
        name: "alice".into(),
        role: Role::Approver,
        prefix: "km_abcd".into(),
        created_at: f.clock.now(),
        created_by: "cli:root".into(),
        revoked_at: None,
    };
    s.create_api_key(&key, "digest-1").await.unwrap();
    let again = ApiKey {
        id: uuid::Uuid::new_v4(),
        ..key.clone()
    };
    assert!(
        matches!(
            s.create_api_key(&again, "digest-2").await,
            Err(kubemedic::store::StoreError::Conflict)
        ),
        "two active keys cannot share a name"
    );
    assert_eq!(
        s.api_key_by_hash("digest-1").await.unwrap(),
        Some(key.clone())
    );
    assert_eq!(s.api_key_by_hash("digest-x").await.unwrap(), None);
    let session = Session {
        subject: "key:alice".into(),
        key_id: Some(key.id),
        role: Role::Approver,
        csrf: "csrf-token".into(),
        created_at: f.clock.now(),
        expires_at: f.clock.now() + chrono::Duration::hours(1),
    };
    s.create_session("s-1", &session).await.unwrap();
    assert_eq!(s.session("s-1").await.unwrap(), Some(session.clone()));
    f.clock.advance(chrono::Duration::hours(2));
    assert_eq!(
        s.session("s-1").await.unwrap(),
        None,
        "an expired session is gone"
    );
    let later = Session {
        created_at: f.clock.now(),
        expires_at: f.clock.now() + chrono::Duration::hours(1),
        ..session
    };
    s.create_session("s-2", &later).await.unwrap();
    assert!(s.session("s-2").await.unwrap().is_some());
    let revoked = s
        .revoke_api_key("alice", "cli:root")
        .await
        .unwrap()
        .unwrap();
    assert!(revoked.revoked_at.is_some());
    assert_eq!(
        s.session("s-2").await.unwrap(),
        None,
        "revoking a key ends its sessions"
    );
    assert!(
        s.revoke_api_key("alice", "cli:root")
            .await
            .unwrap()
            .is_none()
    );
    // The name is free again; creations and revocations are in the (intact) audit chain.
    s.create_api_key(&again, "digest-2").await.unwrap();
    let keys = s.list_api_keys().await.unwrap();
    assert_eq!(keys.len(), 2);
    let chain = s.verify_chain().await.unwrap();
    assert!(chain.intact() && chain.events == 3, "{chain:?}");
}

async fn the_summary_counts_outcomes_tokens_and_blocks(f: Fixture) {
    use kubemedic::domain::{GateDecision, Usage};
    let s = &f.store;
    let mut ids = Vec::new();
    for i in 0..5u32 {
        let name = format!("api-{i}");
        let out = s
            .ingest(&[signal(
                &format!("s{i}"),
                i,
                Some(("shop", "Deployment", &name)),
            )])
            .await
            .unwrap();
        ids.push(out[0].request_id().unwrap());
        // One second apart: the claims below take them oldest first.
        f.clock.advance(chrono::Duration::seconds(1));
    }
    let gate = |auto: bool| GateDecision {
        require_approval: !auto,
        reason: "r".into(),
        risk_factors: vec![],
        degraded: false,
        policy_revision: None,
    };
    let finish = |rid: uuid::Uuid, to: Phase, state: StageState, events: Vec<AuditDraft>| {
        let s = s.clone();
        let clock = f.clock.clone();
        async move {
            let claimed = s
                .claim("w", std::time::Duration::from_secs(30))
                .await
                .unwrap()
                .unwrap();
            assert_eq!(claimed.id, rid);
            clock.advance(chrono::Duration::seconds(90));
            s.commit_step(
                rid,
                "w",
                Phase::Received,
                StepCommit {
                    to,
                    reason: None,
                    state,
                    attempts: 0,
                    not_before: None,
                    release: true,
                    events,
                },
            )
            .await
            .unwrap()
            .unwrap();
        }
    };
    let mut done = StageState {
        gate: Some(gate(true)),
        ..Default::default()
    };
    let analysis: kubemedic::domain::Analysis = serde_json::from_value(serde_json::json!({
        "rca": {"root_cause_analysis": {"summary": "s", "severity": "high", "contributing_factors": [], "investigation_analysis": ""},
                "confidence": 0.9, "investigation_outcome": "actionable", "actionable": true},
        "investigator": "offline",
        "usage": {"prompt_tokens": 1000, "completion_tokens": 234},
    })).unwrap();
    done.analysis = Some(analysis);
    let _ = Usage::default();
    finish(ids[0], Phase::Failed, done, vec![]).await;
    finish(
        ids[1],
        Phase::Blocked,
        StageState {
            gate: Some(gate(false)),
            ..Default::default()
        },
        vec![
            AuditDraft::new("guardrail", "executor", "RecurrenceCap: too often")
                .with_payload(serde_json::json!({"guardrail": "RecurrenceCap"})),
        ],
    )
    .await;
    // Two requests verified: 0.95 and 0.3 (a score that rounding would move to another bin).
    let complete = |rid: uuid::Uuid, score: f64| {
        let s = s.clone();
        let clock = f.clock.clone();
        async move {
            let claimed = s
                .claim("w", std::time::Duration::from_secs(30))
                .await
                .unwrap()
                .unwrap();
            assert_eq!(claimed.id, rid);
            clock.advance(chrono::Duration::seconds(90));
            let assessment: kubemedic::domain::Assessment =
                serde_json::from_value(serde_json::json!({
                    "score": score, "health_score": score, "alert_score": null,
                    "metrics_score": null, "post_spec_hash": null, "signal_resolved": true,
                    "reason": "partial", "effective": score >= 0.7, "details": [],
                    "assessed_at": clock.now(),
                }))
                .unwrap();
            let path = [
                Phase::Received,
                Phase::Enriching,
                Phase::Investigating,
                Phase::Selecting,
                Phase::Gating,
                Phase::Executing,
                Phase::Verifying,
                Phase::Completed,
            ];
            for step in path.windows(2) {
                let (from, to) = (step[0], step[1]);
                let state = StageState {
                    gate: Some(gate(true)),
                    assessment: (to == Phase::Completed).then(|| assessment.clone()),
                    ..Default::default()
                };
                s.commit_step(
                    rid,
                    "w",
                    from,
                    StepCommit {
                        to,
                        reason: None,
                        state,
                        attempts: 0,
                        not_before: None,
                        release: to == Phase::Completed,
                        events: vec![],
                    },
                )
                .await
                .unwrap()
                .unwrap();
            }
        }
    };
    complete(ids[2], 0.95).await;
    complete(ids[3], 0.3).await;
    let summary = s.summary(None).await.unwrap();
    assert_eq!(summary.total, 5);
    assert_eq!((summary.gated, summary.auto_approved), (4, 3));
    assert_eq!(summary.effectiveness, [0, 1, 0, 0, 1]);
    // Opened at +2 s and +3 s, finished at +275 s and +365 s; the upper median of two.
    assert_eq!(summary.median_ttr_seconds, Some(362.0));
    assert_eq!(
        summary.tokens_per_day.iter().map(|(_, n)| n).sum::<i64>(),
        1234
    );
    assert_eq!(
        summary.guardrail_blocks,
        vec![("RecurrenceCap".to_owned(), 1)]
    );
    let phases: std::collections::HashMap<Phase, i64> = summary.by_phase.into_iter().collect();
    assert_eq!(
        (
            phases[&Phase::Failed],
            phases[&Phase::Blocked],
            phases[&Phase::Completed],
            phases[&Phase::Received]
        ),
        (1, 1, 2, 1)
    );
    let later = s.summary(Some(f.clock.now())).await.unwrap();
    assert_eq!(later.total, 0, "nothing was opened since");
}

/// A replica stopped in the middle of a transaction (SIGSTOP, a frozen VM) holds what that
/// transaction locked. Here it stopped after inserting the intent of a step and before
/// committing it, so the other replica, which took the request over and records the same step,
/// queues behind the uncommitted key. Postgres ends the stopped session once it has sat idle in
/// its transaction for `IDLE_IN_TRANSACTION` (the store sets that on each of its sessions), so
/// the other replica goes on, finds no intent, and the stopped one finds its session gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_stopped_inside_a_transaction_does_not_hold_the_other_replicas() {
    let Some(f) = postgres().await else {
        return;
    };
    let request = uuid::Uuid::new_v4();
    // A session of a pool made as the store makes its own.
    let pool = kubemedic::store::PgStore::pool_options()
        .connect(&f.url)
        .await
        .unwrap();
    let (timeout,): (String,) = sqlx::query_as("SHOW idle_in_transaction_session_timeout")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(timeout, "10s");
    let mut stopped = pool.acquire().await.unwrap().detach();
    sqlx::query("BEGIN").execute(&mut stopped).await.unwrap();
    sqlx::query(
        "INSERT INTO execution_intents (request_id, step, action, status, detail, created_at, \
         updated_at) VALUES ($1, 2, 'wait_rollout', 'started', '{}', now(), now())",
    )
    .bind(request)
    .execute(&mut stopped)
    .await
    .unwrap();

    let limit = kubemedic::store::IDLE_IN_TRANSACTION + Duration::from_secs(20);
    let (intent, fresh) = tokio::time::timeout(
        limit,
        f.store.begin_intent(
            request,
            2,
            "wait_rollout",
            &serde_json::json!({"by": "other"}),
        ),
    )
    .await
    .expect("the other replica still waits for the stopped one's transaction")
    .unwrap();
    assert!(fresh, "the stopped transaction was rolled back: {intent:?}");
    assert_eq!(intent.detail["by"], "other");
    assert!(
        sqlx::query("COMMIT").execute(&mut stopped).await.is_err(),
        "the stopped session was ended"
    );
}

/// How long a test waits for a wake-up before it calls the wake-up lost: a guard against
/// hanging, not a measure (a wake-up takes milliseconds).
const HANG_GUARD: Duration = Duration::from_secs(10);
/// A fallback no test waits out: only a wake-up ends a wait this long.
const FOREVER: Duration = Duration::from_secs(3600);

/// Wait until the store's watchers are woken at all (on Postgres its listener, started by the
/// first watcher, is listening).
async fn listening(store: &dyn Store) {
    tokio::time::timeout(HANG_GUARD, async {
        while !store.trail_bell().live {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the store's listener never listened");
}

/// Wait for a wake-up that says `request`'s trail grew; a call to read again (lost wake-ups) is
/// no such proof and is waited past, a wake-up for another request fails the test.
async fn woken(watch: &mut TrailWatch, request: uuid::Uuid) {
    tokio::time::timeout(HANG_GUARD, async {
        loop {
            match watch.wait(Some(request), FOREVER).await {
                Woken::Grew(r) => {
                    assert_eq!(r, request, "woken for another request's trail");
                    return;
                }
                Woken::Resync => {}
                Woken::Quiet => panic!("a wait of an hour ended without a wake-up"),
            }
        }
    })
    .await
    .expect("no wake-up for the request's trail");
}

/// Every audited write wakes the watchers of the request whose trail it grew (SQLite: the
/// store, after the commit; Postgres: NOTIFY on commit, heard by the store's own listener), so
/// the read that follows sees it, and a watcher sleeps through other requests' events.
async fn an_audit_append_wakes_the_watchers_of_its_request(f: Fixture) {
    let s = &f.store;
    let mut watch = s.watch_trail();
    listening(s.as_ref()).await;
    let rid = s.ingest(&[signal("bell-1", 0, CHECKOUT)]).await.unwrap()[0]
        .request_id()
        .unwrap();
    woken(&mut watch, rid).await;
    assert_eq!(s.audit_after(rid, 0, 10).await.unwrap().len(), 1);

    // Another request's events do not wake it; this request's step commit does.
    let other = s
        .ingest(&[signal("bell-2", 0, Some(("shop", "Deployment", "cart")))])
        .await
        .unwrap()[0]
        .request_id()
        .unwrap();
    let claimed = s
        .claim_batch("w1", Duration::from_secs(30), 2)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 2);
    s.commit_step(other, "w1", Phase::Received, step(Phase::Enriching))
        .await
        .unwrap()
        .unwrap();
    s.commit_step(rid, "w1", Phase::Received, step(Phase::Enriching))
        .await
        .unwrap()
        .unwrap();
    woken(&mut watch, rid).await;
    assert_eq!(s.audit_after(rid, 0, 10).await.unwrap().len(), 2);

    // An event appended outside a step.
    s.append_audit(
        Some(other),
        None,
        &AuditDraft::new("note", "test", "not this one"),
    )
    .await
    .unwrap();
    s.append_audit(
        Some(rid),
        None,
        &AuditDraft::new("note", "test", "this one"),
    )
    .await
    .unwrap();
    woken(&mut watch, rid).await;
    assert_eq!(s.audit_after(rid, 0, 10).await.unwrap().len(), 3);
}

/// Replicas share one Postgres: an audit event one of them writes wakes, at once, the live
/// streams another serves (NOTIFY on commit, heard by that replica's listener) — not after a
/// poll interval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_audit_event_written_by_one_replica_wakes_the_watchers_of_another() {
    let Some(f) = postgres().await else {
        return;
    };
    let a = &f.store;
    let b = common::open_store(&f.url, f.clock.clone() as Arc<dyn Clock>).await;
    let mut watch = b.watch_trail();
    listening(b.as_ref()).await;
    let rid = a.ingest(&[signal("replica-1", 0, CHECKOUT)]).await.unwrap()[0]
        .request_id()
        .unwrap();
    woken(&mut watch, rid).await;
    a.append_audit(
        Some(rid),
        None,
        &AuditDraft::new("note", "replica-a", "written on A"),
    )
    .await
    .unwrap();
    woken(&mut watch, rid).await;
    let seen = b.audit_after(rid, 0, 10).await.unwrap();
    assert_eq!(seen.last().unwrap().message, "written on A");
}

/// PostgreSQL keeps notifications until every listening session has read them: a session that
/// listens but stays in a transaction (a replica frozen mid-transaction) holds them back, and
/// the share of the queue in use (`kubemedic_store_notification_queue_usage`) grows until it
/// lets go. SQLite has no such queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_notification_queue_usage_shows_a_listener_holding_notifications_back() {
    if let Some(f) = sqlite().await {
        assert_eq!(f.store.notification_queue_usage().await.unwrap(), None);
    }
    let Some(f) = postgres().await else {
        return;
    };
    let s = &f.store;
    let free = s.notification_queue_usage().await.unwrap().unwrap();
    assert!((0.0..1.0).contains(&free), "{free}");
    let mut frozen = <sqlx::PgConnection as sqlx::Connection>::connect(&f.url)
        .await
        .unwrap();
    assert_eq!(kubemedic::store::AUDIT_CHANNEL, "kubemedic_audit");
    sqlx::query("LISTEN kubemedic_audit")
        .execute(&mut frozen)
        .await
        .unwrap();
    sqlx::query("BEGIN").execute(&mut frozen).await.unwrap();
    sqlx::query("SELECT 1").execute(&mut frozen).await.unwrap();
    let rid = s.ingest(&[signal("queue-1", 0, CHECKOUT)]).await.unwrap()[0]
        .request_id()
        .unwrap();
    // A queue page holds about a hundred of these notifications; fill a few.
    for i in 0..400 {
        s.append_audit(
            Some(rid),
            None,
            &AuditDraft::new("note", "test", format!("{i}")),
        )
        .await
        .unwrap();
    }
    let held = s.notification_queue_usage().await.unwrap().unwrap();
    assert!(held > free, "held back: {held}, before: {free}");
    // The frozen replica goes away (its session ends; reading on this connection would meet
    // the notifications sqlx's plain connection does not expect).
    drop(frozen);
    tokio::time::timeout(HANG_GUARD, async {
        while s.notification_queue_usage().await.unwrap().unwrap() >= held {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the queue was not freed once the session let go");
}

/// The listener's session ends (a failover, a connection reaper, an operator): it connects
/// again, counts the loss, tells its watchers to read again (what was notified in between is
/// lost), and wakes them as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_listener_connects_again_when_its_session_is_ended() {
    let Some(f) = postgres().await else {
        return;
    };
    let a = &f.store;
    let b = common::open_store(&f.url, f.clock.clone() as Arc<dyn Clock>).await;
    let mut watch = b.watch_trail();
    listening(b.as_ref()).await;
    assert_eq!(b.trail_bell().losses, 0);

    let admin = sqlx::PgPool::connect(&f.url).await.unwrap();
    let ended: Vec<(bool,)> = sqlx::query_as(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE application_name = $1 AND datname = current_database()",
    )
    .bind(kubemedic::store::LISTENER_NAME)
    .fetch_all(&admin)
    .await
    .unwrap();
    assert_eq!(ended, vec![(true,)], "one listener, B's");
    tokio::time::timeout(HANG_GUARD, async {
        while b.trail_bell().losses == 0 || !b.trail_bell().live {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the listener did not come back");
    assert_eq!(b.trail_bell().losses, 1);
    assert_eq!(
        tokio::time::timeout(HANG_GUARD, watch.wait(None, FOREVER))
            .await
            .unwrap(),
        Woken::Resync,
        "the watchers read again: notifications may have been lost meanwhile"
    );

    let rid = a.ingest(&[signal("replica-2", 0, CHECKOUT)]).await.unwrap()[0]
        .request_id()
        .unwrap();
    woken(&mut watch, rid).await;
}

/// The store on `f`'s database with the audit keyring `keys` (hex, the first one signing).
async fn with_keys(f: &Fixture, keys: &str) -> Arc<dyn Store> {
    let settings = kubemedic::config::Settings::load(&kubemedic::config::DaemonArgs {
        store: kubemedic::config::StoreArgs {
            database_url: Some(kubemedic::secret::Secret::new(&f.url)),
            audit_key: Some(kubemedic::secret::Secret::new(keys)),
            ..Default::default()
        },
        ..Default::default()
    })
    .unwrap();
    kubemedic::daemon::open_store(&settings, f.clock.clone() as Arc<dyn Clock>)
        .await
        .unwrap()
}

/// Key rotation: the store holding `NEW,OLD` hands the trail over with one event signed by the
/// old key; from then on the old key writes nothing (its daemon is not ready), the new one
/// writes, and checking the trail needs both keys: each alone names the first event it cannot
/// check.
async fn the_audit_key_is_handed_over_once_and_a_retired_key_writes_nothing_more(f: Fixture) {
    use kubemedic::store::{AuditKey, StoreError};
    let hex = |k: &AuditKey| k.to_file_text().trim().to_owned();
    let (old, new) = (AuditKey::generate(), AuditKey::generate());
    let a = with_keys(&f, &hex(&old)).await;
    assert_eq!(
        a.setting_or_init("audit_key_id", &|| old.id().to_owned())
            .await
            .unwrap(),
        old.id()
    );
    let first = a.ingest(&[signal("fp-1", 1, CHECKOUT)]).await.unwrap()[0]
        .request_id()
        .unwrap();

    // A keyring that does not hold the database's key cannot take it over.
    let stranger = with_keys(&f, &hex(&AuditKey::generate())).await;
    match stranger.rotate_audit_key("test").await {
        Err(StoreError::AuditKey(why)) => assert!(why.contains(old.id()), "{why}"),
        other => panic!("a stranger's key took the trail over: {other:?}"),
    }

    let b = with_keys(&f, &format!("{},{}", hex(&new), hex(&old))).await;
    assert!(!b.health().await.unwrap().audit_key_current());
    assert_eq!(
        b.rotate_audit_key("cli:test").await.unwrap(),
        Some((old.id().to_owned(), new.id().to_owned()))
    );
    assert_eq!(b.rotate_audit_key("cli:test").await.unwrap(), None, "once");
    assert!(b.health().await.unwrap().audit_key_current());
    assert!(!a.health().await.unwrap().audit_key_current());

    // The retired key's daemon is refused, and writes nothing: no event, no claim (its
    // stages would call the model and the cluster for nothing), no intent of a cluster write.
    match a
        .ingest(&[signal("fp-2", 2, Some(("shop", "Deployment", "cart")))])
        .await
    {
        Err(StoreError::AuditKey(why)) => assert!(why.contains(new.id()), "{why}"),
        other => panic!("the retired key still writes: {other:?}"),
    }
    let lease = Duration::from_secs(30);
    assert!(
        a.claim_batch("old-replica", lease, 8)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(matches!(
        a.begin_intent(first, 1, "rollout_undo", &serde_json::json!({}))
            .await,
        Err(StoreError::AuditKey(_))
    ));
    let claimed = b.claim_batch("new-replica", lease, 8).await.unwrap();
    assert_eq!(
        claimed.iter().map(|r| r.id).collect::<Vec<_>>(),
        vec![first]
    );
    b.release(first, "new-replica").await.unwrap();
    let second = b
        .ingest(&[signal("fp-2", 2, Some(("shop", "Deployment", "cart")))])
        .await
        .unwrap()[0]
        .request_id()
        .unwrap();
    let report = b.verify_chain().await.unwrap();
    assert!(report.intact(), "{report:?}");
    assert_eq!(report.events, 3, "received, key_rotated, received");
    assert!(b.verify_request_chain(first).await.unwrap().intact());
    assert!(b.verify_request_chain(second).await.unwrap().intact());

    // The keyring in the wrong order would hand the trail back to the retired key: refused.
    let backwards = with_keys(&f, &format!("{},{}", hex(&old), hex(&new))).await;
    match backwards.rotate_audit_key("cli:test").await {
        Err(StoreError::AuditKey(why)) => assert!(why.contains("retired"), "{why}"),
        other => panic!("the trail went back to a retired key: {other:?}"),
    }

    // Each key alone stops at the first event it cannot check: the other key's.
    for (alone, stops_at, unknown) in [(&new, first, &old), (&old, second, &new)] {
        let report = with_keys(&f, &hex(alone)).await.verify_chain().await;
        let broken = report.unwrap().broken.unwrap();
        assert_eq!(broken.request_id, Some(stops_at.to_string()));
        assert!(broken.reason.contains(unknown.id()), "{}", broken.reason);
    }
}

async fn conversations_keep_their_turns_in_order_per_owner(f: Fixture) {
    use kubemedic::domain::{ChatLine, Conversation, NewTurn, TurnKind};
    let s = &f.store;
    let now = f.clock.now();
    let mine = Conversation {
        id: uuid::Uuid::new_v4(),
        owner: "key:alice".into(),
        title: "why is checkout crashing?".into(),
        created_at: now,
        updated_at: now,
    };
    s.open_conversation(&mine).await.unwrap();
    // Opening it again changes nothing.
    s.open_conversation(&Conversation {
        title: "another title".into(),
        ..mine.clone()
    })
    .await
    .unwrap();
    let theirs = Conversation {
        id: uuid::Uuid::new_v4(),
        owner: "key:bob".into(),
        ..mine.clone()
    };
    s.open_conversation(&theirs).await.unwrap();
    assert_eq!(
        s.conversation(mine.id).await.unwrap().unwrap().title,
        mine.title
    );

    let request = uuid::Uuid::new_v4();
    let turn = |q: &str, kind: TurnKind| NewTurn {
        conversation_id: mine.id,
        at: now,
        asked_by: "key:alice".into(),
        kind,
        question: q.into(),
        target: Some(Target::new("Deployment", "checkout", Some("shop".into()))),
        request_id: Some(request),
        after_audit: 7,
        action_id: None,
        preamble: vec![
            ChatLine::new("plan", "investigate shop/Deployment/checkout")
                .with_data(serde_json::json!({"steps": ["a", "b"]})),
        ],
        answer: None,
    };
    let first = s
        .add_turn(&turn("why is checkout crashing?", TurnKind::Question))
        .await
        .unwrap();
    f.clock.advance(chrono::Duration::seconds(5));
    let mut decision = turn("approve", TurnKind::Decision);
    decision.at = f.clock.now();
    let second = s.add_turn(&decision).await.unwrap();
    assert!(second.id > first.id);
    let all = s.turns(mine.id, 0, 10).await.unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!(all[0], first, "a turn reads back as it was written");
    assert_eq!(
        s.turns(mine.id, first.id, 10).await.unwrap(),
        vec![second.clone()]
    );
    assert!(s.turns(theirs.id, 0, 10).await.unwrap().is_empty());

    // The first answer stays.
    s.finish_turn(first.id, "the root cause is …")
        .await
        .unwrap();
    s.finish_turn(first.id, "a later answer").await.unwrap();
    let read = s.turns(mine.id, 0, 1).await.unwrap();
    assert_eq!(read[0].turn.answer.as_deref(), Some("the root cause is …"));

    // Each owner sees theirs, the most recently continued first.
    let alices = s.conversations("key:alice", 10).await.unwrap();
    assert_eq!(alices.len(), 1);
    assert_eq!(alices[0].id, mine.id);
    assert_eq!(alices[0].updated_at, f.clock.now());
    assert_eq!(
        s.conversations("key:bob", 10).await.unwrap()[0].id,
        theirs.id
    );
    assert!(s.conversations("key:carol", 10).await.unwrap().is_empty());
}

async fn pinned_context_is_replaced_deleted_and_audited(f: Fixture) {
    let s = &f.store;
    assert!(s.memory("cluster").await.unwrap().is_none());
    s.set_memory("cluster", Some("payments is PCI-scoped"), "key:admin")
        .await
        .unwrap();
    s.set_memory(
        "cluster",
        Some("payments is PCI-scoped: never restart it in business hours"),
        "key:admin",
    )
    .await
    .unwrap();
    s.set_memory(
        "user:key:alice",
        Some("default namespace is shop"),
        "key:admin",
    )
    .await
    .unwrap();
    let note = s.memory("cluster").await.unwrap().unwrap();
    assert!(note.content.ends_with("business hours"));
    assert_eq!(note.updated_by, "key:admin");
    assert_eq!(s.memories().await.unwrap().len(), 2);
    s.set_memory("user:key:alice", None, "key:admin")
        .await
        .unwrap();
    assert!(s.memory("user:key:alice").await.unwrap().is_none());
    // Every change is in the audit chain, which still verifies.
    let chain = s.verify_chain().await.unwrap();
    assert!(chain.intact(), "{chain:?}");
    assert_eq!(chain.events, 4, "{chain:?}");
}

async fn failed_logins_are_counted_per_client_in_the_window_and_pruned(f: Fixture) {
    let s = &f.store;
    let t0 = f.clock.now();
    let at = |secs: i64| t0 + chrono::Duration::seconds(secs);
    let window = Duration::from_secs(60);
    for i in 0..3 {
        s.record_failed_login("10.0.0.1", at(i), window)
            .await
            .unwrap();
    }
    s.record_failed_login("10.0.0.2", at(1), window)
        .await
        .unwrap();
    assert_eq!(
        s.failed_logins("10.0.0.1", at(-60)).await.unwrap(),
        vec![at(0), at(1), at(2)],
        "oldest first, and only this client's"
    );
    assert_eq!(
        s.failed_logins("10.0.0.1", at(1)).await.unwrap(),
        vec![at(1), at(2)],
        "only those since the time asked"
    );
    assert!(
        s.failed_logins("10.0.0.3", at(-60))
            .await
            .unwrap()
            .is_empty()
    );

    // A failure recorded at 62 s forgets every client's failures from before 2 s.
    s.record_failed_login("10.0.0.3", at(62), window)
        .await
        .unwrap();
    assert_eq!(
        s.failed_logins("10.0.0.1", at(-60)).await.unwrap(),
        vec![at(2)],
        "the two failures older than the window were deleted"
    );
    assert!(
        s.failed_logins("10.0.0.2", at(-60))
            .await
            .unwrap()
            .is_empty()
    );

    // A sign-in clears its client's failures, and no one else's.
    s.clear_failed_logins("10.0.0.1").await.unwrap();
    assert!(
        s.failed_logins("10.0.0.1", at(-60))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        s.failed_logins("10.0.0.3", at(-60)).await.unwrap(),
        vec![at(62)]
    );
}
