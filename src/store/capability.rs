//! What the store can do, one trait per capability, and [`Store`], their sum.
//!
//! A caller that needs one capability can hold just that trait (`Arc<dyn Execution>`); the
//! daemon builds one `Arc<dyn Store>` and hands out views of it (a `dyn Store` coerces to any of
//! its capabilities). Every trait is implemented once, for [`super::SqlStore`] over either
//! dialect, in `sql/<capability>.rs`.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{
    BellStatus, ChainReport, DeliveryResult, ExecutionLock, IngestOutcome, Intent, IntentStatus,
    Page, PendingStep, RequestFilter, RequestPage, Result, SignalFilter, SignalRecord, StepCommit,
    StoreHealth, Summary, TrailWatch,
};
use crate::domain::{
    ApiKey, ApprovalDecision, ApprovalRequest, ApprovalStatus, AuditDraft, AuditEvent, ChatTurn,
    Conversation, DecideOutcome, HistoryRecord, MemoryNote, NewSignal, NewTurn, Notification,
    PatternOutcome, Phase, RemediationRequest, Session,
};

/// Every capability of the store: what the daemon opens and what most callers hold.
pub trait Store:
    Housekeeping + Requests + Claims + Audit + Auth + Approvals + Execution + History + Patterns + Chat
{
}

impl<T> Store for T where
    T: Housekeeping
        + Requests
        + Claims
        + Audit
        + Auth
        + Approvals
        + Execution
        + History
        + Patterns
        + Chat
        + ?Sized
{
}

/// What the store is, whether it is ready, and values generated once and kept.
#[async_trait]
pub trait Housekeeping: Send + Sync {
    fn backend(&self) -> &'static str;

    /// Whether the database takes one write at a time (SQLite's single writer): more than one
    /// concurrent writer of a kind would only queue.
    fn serial_writes(&self) -> bool;

    async fn health(&self) -> Result<StoreHealth>;

    /// A value generated once and kept: the stored one, or `generate()`'s (stored now). Two
    /// replicas starting together get the same value.
    async fn setting_or_init(
        &self,
        key: &str,
        generate: &(dyn Fn() -> String + Sync),
    ) -> Result<String>;
}

/// Signals and the remediation requests they open: ingest, and every read of them.
#[async_trait]
pub trait Requests: Send + Sync {
    /// Record a batch of signals in one transaction and open or update requests.
    async fn ingest(&self, signals: &[NewSignal]) -> Result<Vec<IngestOutcome>>;

    async fn get_request(&self, id: Uuid) -> Result<Option<RemediationRequest>>;
    async fn list_requests(&self, filter: &RequestFilter) -> Result<RequestPage>;
    async fn list_signals(&self, filter: &SignalFilter) -> Result<Page<SignalRecord>>;
    async fn count_by_phase(&self) -> Result<Vec<(Phase, i64)>>;

    /// The summary figures over requests created at or after `since` (all when `None`).
    async fn summary(&self, since: Option<DateTime<Utc>>) -> Result<Summary>;

    /// Whether a resolved notification for the signal `fingerprint` arrived at or after
    /// `since`.
    async fn signal_resolved_since(&self, fingerprint: &str, since: DateTime<Utc>) -> Result<bool>;
}

/// The pipeline worker's: claim runnable requests, hold them, commit their steps.
#[async_trait]
pub trait Claims: Send + Sync {
    /// Claim up to `limit` of the oldest runnable requests whose lease has lapsed and whose
    /// wait is over, in one statement, oldest first. Requests another worker is claiming at the
    /// same moment are skipped, never waited for or taken twice.
    async fn claim_batch(
        &self,
        worker: &str,
        lease: Duration,
        limit: usize,
    ) -> Result<Vec<RemediationRequest>>;

    /// Claim the oldest runnable request whose lease has lapsed and whose wait is over.
    async fn claim(&self, worker: &str, lease: Duration) -> Result<Option<RemediationRequest>> {
        Ok(self.claim_batch(worker, lease, 1).await?.into_iter().next())
    }

    /// Extend a claim; false when the worker no longer holds it.
    async fn renew(&self, id: Uuid, worker: &str, lease: Duration) -> Result<bool>;

    /// Commit steps of requests the worker holds, with their audit events, in one
    /// transaction: one answer per step, in order, `None` where the claim was lost (another
    /// worker took over; nothing of that step was written). An error writes nothing at all.
    async fn commit_steps(
        &self,
        worker: &str,
        steps: &[PendingStep],
    ) -> Result<Vec<Option<RemediationRequest>>>;

    /// Commit a step for a request the worker holds in phase `from`. `None` when the claim was
    /// lost (another worker took over): nothing was written.
    async fn commit_step(
        &self,
        id: Uuid,
        worker: &str,
        from: Phase,
        step: StepCommit,
    ) -> Result<Option<RemediationRequest>> {
        let steps = [PendingStep {
            id,
            from,
            via: None,
            step,
        }];
        Ok(self
            .commit_steps(worker, &steps)
            .await?
            .into_iter()
            .next()
            .flatten())
    }

    /// Give up a claim without changing the request.
    async fn release(&self, id: Uuid, worker: &str) -> Result<()>;
}

/// The append-only, hash-chained audit trail (DESIGN §3.8).
#[async_trait]
pub trait Audit: Send + Sync {
    async fn audit_trail(&self, request_id: Uuid) -> Result<Vec<AuditEvent>>;

    /// The request's audit events after event `after` (exclusive), at most `limit`, in order.
    async fn audit_after(
        &self,
        request_id: Uuid,
        after: i64,
        limit: i64,
    ) -> Result<Vec<AuditEvent>>;

    /// The newest audit events of `kind` that belong to no request (configuration changes,
    /// key rotations…), newest first, at most `limit`.
    async fn audit_of_kind(&self, kind: &str, limit: i64) -> Result<Vec<AuditEvent>>;

    /// A watcher that wakes when an audit trail grows (a commit of this store's, or on
    /// PostgreSQL of any replica's): a live stream takes one before its first read and waits
    /// on it between reads. A hint only; see [`TrailWatch::wait`].
    fn watch_trail(&self) -> TrailWatch;

    /// Whether the watchers are woken now, and how often their wake-ups were interrupted.
    fn trail_bell(&self) -> BellStatus;

    /// The share (0 to 1) of the database's notification queue in use: on PostgreSQL, what
    /// listeners have not read yet (a replica frozen while connected holds it back, and writes
    /// that notify fail once it is full); `None` where there is no such queue (SQLite).
    async fn notification_queue_usage(&self) -> Result<Option<f64>>;
    /// The requests the audit events after event `after` (exclusive) are about, each with the
    /// id of its last such event, ordered by that id, at most `limit`: what changed since a
    /// watermark. Continue from the last id answered. Ids grow in commit order (appends take
    /// the chain's lock, see `SqlStore::chain_head`), so a reader that continues from the last
    /// id it saw misses no change.
    async fn changed_requests(&self, after: i64, limit: i64) -> Result<Vec<(i64, Uuid)>>;

    /// The id of the last audit event (0 for an empty trail): a watermark for
    /// [`Audit::changed_requests`].
    async fn audit_head(&self) -> Result<i64>;

    /// Check the hash chain of one request's events: each event's hash, and that it follows
    /// the event stored just before it.
    async fn verify_request_chain(&self, request_id: Uuid) -> Result<ChainReport>;

    /// Walk the whole audit chain in order and name the first broken link.
    async fn verify_chain(&self) -> Result<ChainReport>;

    /// Append an audit event outside a phase change (an approval viewed, a signal resolved…).
    async fn append_audit(
        &self,
        request_id: Option<Uuid>,
        phase: Option<Phase>,
        draft: &AuditDraft,
    ) -> Result<()>;

    /// Hand the audit trail over to this store's signing key: when the database's key
    /// (`audit_key_id` in the settings) is one of this keyring's retired keys, append one
    /// `key_rotated` event signed with that key naming the new one, and record the new key as
    /// the database's, in one transaction. Answers the (old, new) key ids, or `None` when the
    /// database is already signed with the signing key. A database whose key is not in the
    /// keyring is refused ([`super::StoreError::AuditKey`]).
    async fn rotate_audit_key(&self, actor: &str) -> Result<Option<(String, String)>>;
}

/// API keys and sessions (DESIGN §3.10).
#[async_trait]
pub trait Auth: Send + Sync {
    /// Store a key (by digest) and audit its creation by `key.created_by`. `Conflict` when an
    /// active key has the name already.
    async fn create_api_key(&self, key: &ApiKey, key_hash: &str) -> Result<()>;
    /// The key with this digest, revoked or not.
    async fn api_key_by_hash(&self, key_hash: &str) -> Result<Option<ApiKey>>;
    async fn list_api_keys(&self) -> Result<Vec<ApiKey>>;
    /// Revoke the active key named `name` (ending its sessions) and audit it; `None` when
    /// there is no such active key.
    async fn revoke_api_key(&self, name: &str, actor: &str) -> Result<Option<ApiKey>>;
    /// Store a session (by the digest of its token); expired sessions are pruned.
    async fn create_session(&self, token_hash: &str, session: &Session) -> Result<()>;
    /// The live session with this digest: not expired, and its key not revoked.
    async fn session(&self, token_hash: &str) -> Result<Option<Session>>;
    async fn delete_session(&self, token_hash: &str) -> Result<()>;
    /// Remember a failed sign-in from `client` at `at`, and forget every client's failures
    /// from before `at - window` (the table holds one window's worth). Shared by all replicas,
    /// so a client cannot spread its guesses over them.
    async fn record_failed_login(
        &self,
        client: &str,
        at: DateTime<Utc>,
        window: Duration,
    ) -> Result<()>;
    /// The times of `client`'s failed sign-ins since `since`, oldest first (at most
    /// [`super::MAX_LOGIN_FAILURES_READ`]).
    async fn failed_logins(&self, client: &str, since: DateTime<Utc>)
    -> Result<Vec<DateTime<Utc>>>;
    /// Forget `client`'s failed sign-ins (it signed in).
    async fn clear_failed_logins(&self, client: &str) -> Result<()>;
}

/// Approvals, their single-use tokens and the notifications that offer them (DESIGN §3.9).
#[async_trait]
pub trait Approvals: Send + Sync {
    /// Create the approval of a request with the notifications that offer it, and audit it.
    /// Idempotent per request: a second call returns the approval already stored.
    async fn create_approval(
        &self,
        approval: &ApprovalRequest,
        notifications: &[Notification],
    ) -> Result<ApprovalRequest>;
    async fn get_approval(&self, id: Uuid) -> Result<Option<ApprovalRequest>>;
    async fn approval_of_request(&self, request_id: Uuid) -> Result<Option<ApprovalRequest>>;
    async fn list_approvals(
        &self,
        status: Option<ApprovalStatus>,
        limit: i64,
        offset: i64,
    ) -> Result<Page<ApprovalRequest>>;
    /// Decide, atomically: the first decision wins. The winner is audited, wakes the request
    /// (its `not_before` becomes now), cancels offers not yet sent and queues an outcome
    /// message for every offer delivered; a later decision is refused and audited too.
    async fn decide_approval(&self, id: Uuid, decision: &ApprovalDecision)
    -> Result<DecideOutcome>;
    /// An approved request was not executed: keep `note` (why) on its approval and queue a
    /// `not_executed` message to every recipient its offer reached, audited, in one
    /// transaction. A request without an approval (auto-approved) changes nothing here.
    async fn approval_not_executed(&self, request_id: Uuid, note: &str) -> Result<()>;
    /// An executed remediation made its target worse: keep `note` (what, and whether it was
    /// undone) on its approval and queue a `made_worse` message to every recipient its offer
    /// reached, audited, in one transaction. Nothing for an auto-approved request.
    async fn approval_made_worse(&self, request_id: Uuid, note: &str) -> Result<()>;
    /// Use a single-use token. `false`: it was used before.
    async fn consume_nonce(&self, nonce: &str, approval_id: Option<Uuid>) -> Result<bool>;
    /// Take the next due notification for one attempt: it is not due again before
    /// `now + lease`, so another replica does not send it at the same time.
    async fn claim_notification(&self, lease: Duration) -> Result<Option<Notification>>;
    /// Record one attempt's result, with its audit event on the approval's request.
    async fn finish_notification(
        &self,
        id: Uuid,
        result: &DeliveryResult,
        audit: &AuditDraft,
    ) -> Result<()>;
    async fn notifications(&self, approval_id: Uuid) -> Result<Vec<Notification>>;
}

/// The executor's: a target's execution lock, and the durable intent of each step.
#[async_trait]
pub trait Execution: Send + Sync {
    /// Take the execution lock of a target for `request` (idempotent for its holder). Returns
    /// the holder: `request` itself when it got (or already had) the lock, another request when
    /// that one is executing on the target. Released by the commit that makes the holder
    /// terminal.
    async fn acquire_execution_lock(
        &self,
        target_fingerprint: &str,
        namespace: Option<&str>,
        request: Uuid,
    ) -> Result<ExecutionLock>;

    /// Execution locks held now, optionally of one namespace (for the concurrency caps).
    async fn execution_locks(&self, namespace: Option<&str>) -> Result<Vec<ExecutionLock>>;

    /// Record the intent of a step before its side effect. When the step has an intent
    /// already (a retry after a crash), that one is returned unchanged, so the caller sees
    /// whether it was applied, failed or left in doubt. The flag says whether this call
    /// created it.
    async fn begin_intent(
        &self,
        request: Uuid,
        step: i32,
        action: &str,
        detail: &serde_json::Value,
    ) -> Result<(Intent, bool)>;

    /// Settle a step's intent.
    async fn finish_intent(
        &self,
        request: Uuid,
        step: i32,
        status: IntentStatus,
        detail: &serde_json::Value,
    ) -> Result<()>;

    async fn intents(&self, request: Uuid) -> Result<Vec<Intent>>;
}

/// Finished remediations per target, for the history guard and the verifier.
#[async_trait]
pub trait History: Send + Sync {
    /// Add a finished remediation to the history (idempotent per request).
    async fn record_history(&self, record: &HistoryRecord) -> Result<()>;

    /// The history of a target (by fingerprint) completed at or after `since`, oldest first.
    async fn history(
        &self,
        target_fingerprint: &str,
        since: DateTime<Utc>,
    ) -> Result<Vec<HistoryRecord>>;
}

/// Verified outcomes per incident signature, cluster-wide: what outcome learning writes after
/// verification and both investigators read as hints (docs/adr/0024-outcome-learning.md).
#[async_trait]
pub trait Patterns: Send + Sync {
    /// Add a verified outcome (idempotent per request: the first one stays). `true` when it
    /// was added now.
    async fn record_outcome(&self, outcome: &PatternOutcome) -> Result<bool>;

    /// The outcomes recorded for `signature` at or after `since`, oldest first.
    async fn outcomes(&self, signature: &str, since: DateTime<Utc>) -> Result<Vec<PatternOutcome>>;
}

/// Conversations (`POST /v1/chat/completions`) and the pinned context investigations read.
#[async_trait]
pub trait Chat: Send + Sync {
    /// Store a new conversation; an existing one with the id is left as it is.
    async fn open_conversation(&self, conversation: &Conversation) -> Result<()>;
    async fn conversation(&self, id: Uuid) -> Result<Option<Conversation>>;
    /// The owner's conversations, most recent first.
    async fn conversations(&self, owner: &str, limit: i64) -> Result<Vec<Conversation>>;
    /// Append a turn (numbered by the store) and touch its conversation.
    async fn add_turn(&self, turn: &NewTurn) -> Result<ChatTurn>;
    /// The conversation's turns after turn `after` (exclusive), at most `limit`, in order.
    async fn turns(&self, conversation: Uuid, after: i64, limit: i64) -> Result<Vec<ChatTurn>>;
    /// Keep a turn's answer once it is done; the first answer stays.
    async fn finish_turn(&self, id: i64, answer: &str) -> Result<()>;

    /// The pinned context of a scope (`cluster`, `user:<name>`).
    async fn memory(&self, scope: &str) -> Result<Option<MemoryNote>>;
    async fn memories(&self) -> Result<Vec<MemoryNote>>;
    /// Replace (or with `None`, delete) a scope's pinned context, audited with `actor`.
    async fn set_memory(&self, scope: &str, content: Option<&str>, actor: &str) -> Result<()>;
}
