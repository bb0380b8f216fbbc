//! The SQL both backends share, written once.
//!
//! `sql_store!(Type, Database)` implements [`super::Store`] for a struct with `pool` (reads),
//! `writer` (every write; behind `write_guard`) and `clock` fields. The invoking module supplies
//! what differs between databases: `type Id`/`fn id`/`fn uuid_of` (how a UUID is bound and
//! read), `type Ts`/`fn ts`/`fn time_of` (how a time is bound and read), `fn param` (how the
//! generated statements spell parameter N), `BEGIN` (the statement that opens a write
//! transaction), `CLAIM_SQL` (how a worker claims a request without racing another), and the
//! bulk reads and writes of a batch (`lookup_signals`, `lookup_targets`, `insert_targets`,
//! `insert_requests`, `insert_signals`, `write_audits`, `finish_requests`, `update_steps`):
//! multi-row `VALUES` statements on SQLite, rows bound as arrays on Postgres (ADR 0019).

/// Column list of `remediation_requests`, in the order `request_from_row` reads it.
macro_rules! request_columns {
    () => {
        "id, phase, reason, target_kind, target_name, target_namespace, target_fingerprint, \
         signal, occurrence_count, first_seen, last_seen, created_at, updated_at, attempts, \
         not_before, state"
    };
}
pub(super) use request_columns;

/// The phases a worker may claim, as an SQL list (kept in step with `Phase::RUNNABLE` by a test).
macro_rules! runnable_phases {
    () => {
        "('Received', 'Enriching', 'Investigating', 'Selecting', 'Gating', 'AwaitingApproval', \
         'Executing', 'Verifying')"
    };
}
pub(super) use runnable_phases;

/// Column list of `approvals`.
macro_rules! approval_columns {
    () => {
        "id, request_id, status, created_at, expires_at, decided_at, record"
    };
}
pub(super) use approval_columns;

/// Column list of `notifications`, in the order `notification_from_row` reads it.
macro_rules! notification_columns {
    () => {
        "id, approval_id, channel, recipient, kind, status, attempts, next_attempt_at, \
         last_error, external_ref, created_at, updated_at"
    };
}
pub(super) use notification_columns;

macro_rules! sql_store {
    ($store:ty, $db:ty, $backend:literal) => {
        use sqlx::Row as _;
        use sqlx::types::Json;
        use $crate::store::{
            ExecutionLock, IngestOutcome, Intent, IntentStatus, Page, RequestFilter, RequestPage,
            Result, SignalFilter, SignalRecord, StoreError, StoreHealth, corrupt,
            make_target, parse_phase,
        };
        use $crate::store::chain::{AuditKey, ChainReport, ChainRow, Rotation, StoredLink, Verifier};
        use $crate::domain::{NewSignal, SignalMode, SignalSource, SignalStatus};
        use $crate::domain::{AuditDraft, AuditEvent, Phase, RemediationRequest, SignalContext};

        type Tx = sqlx::Transaction<'static, $db>;
        type DbRow = <$db as sqlx::Database>::Row;

        fn request_from_row(row: &DbRow) -> Result<RemediationRequest> {
            let get = |e: sqlx::Error| corrupt("remediation_requests", e.to_string());
            let phase: String = row.try_get("phase").map_err(get)?;
            let not_before: Option<Ts> = row.try_get("not_before").map_err(get)?;
            Ok(RemediationRequest {
                id: uuid_of(row.try_get("id").map_err(get)?),
                phase: parse_phase(&phase)?,
                reason: row.try_get("reason").map_err(get)?,
                target: make_target(
                    row.try_get("target_kind").map_err(get)?,
                    row.try_get("target_name").map_err(get)?,
                    row.try_get("target_namespace").map_err(get)?,
                ),
                target_fingerprint: row.try_get("target_fingerprint").map_err(get)?,
                signal: row.try_get::<Json<SignalContext>, _>("signal").map_err(get)?.0,
                occurrence_count: row.try_get("occurrence_count").map_err(get)?,
                first_seen: time_of(row.try_get("first_seen").map_err(get)?)?,
                last_seen: time_of(row.try_get("last_seen").map_err(get)?)?,
                created_at: time_of(row.try_get("created_at").map_err(get)?)?,
                updated_at: time_of(row.try_get("updated_at").map_err(get)?)?,
                attempts: row.try_get("attempts").map_err(get)?,
                not_before: not_before.map(time_of).transpose()?,
                state: row
                    .try_get::<Json<$crate::domain::StageState>, _>("state")
                    .map_err(get)?
                    .0,
            })
        }

        fn signal_from_row(row: &DbRow) -> Result<SignalRecord> {
            let get = |e: sqlx::Error| corrupt("signals", e.to_string());
            let status: String = row.try_get("status").map_err(get)?;
            let mode: String = row.try_get("mode").map_err(get)?;
            let source: String = row.try_get("source").map_err(get)?;
            let ends_at: Option<Ts> = row.try_get("ends_at").map_err(get)?;
            let resolved_at: Option<Ts> = row.try_get("resolved_at").map_err(get)?;
            let request_id: Option<Id> = row.try_get("request_id").map_err(get)?;
            Ok(SignalRecord {
                id: uuid_of(row.try_get("id").map_err(get)?),
                fingerprint: row.try_get("fingerprint").map_err(get)?,
                status: SignalStatus::parse(&status)
                    .ok_or_else(|| corrupt("signals", format!("status `{status}`")))?,
                name: row.try_get("name").map_err(get)?,
                severity: row.try_get("severity").map_err(get)?,
                mode: SignalMode::parse(&mode)
                    .ok_or_else(|| corrupt("signals", format!("mode `{mode}`")))?,
                source: SignalSource::parse(&source)
                    .ok_or_else(|| corrupt("signals", format!("source `{source}`")))?,
                labels: row.try_get::<Json<_>, _>("labels").map_err(get)?.0,
                annotations: row.try_get::<Json<_>, _>("annotations").map_err(get)?.0,
                starts_at: time_of(row.try_get("starts_at").map_err(get)?)?,
                ends_at: ends_at.map(time_of).transpose()?,
                target: make_target(
                    row.try_get("target_kind").map_err(get)?,
                    row.try_get("target_name").map_err(get)?,
                    row.try_get("target_namespace").map_err(get)?,
                ),
                request_id: request_id.map(uuid_of),
                received_at: time_of(row.try_get("received_at").map_err(get)?)?,
                resolved_at: resolved_at.map(time_of).transpose()?,
            })
        }

        fn lock_from_row(row: &DbRow) -> Result<ExecutionLock> {
            let get = |e: sqlx::Error| corrupt("execution_locks", e.to_string());
            Ok(ExecutionLock {
                target_fingerprint: row.try_get("target_fingerprint").map_err(get)?,
                request_id: uuid_of(row.try_get("request_id").map_err(get)?),
                namespace: row.try_get("namespace").map_err(get)?,
                acquired_at: time_of(row.try_get("acquired_at").map_err(get)?)?,
            })
        }

        fn intent_from_row(row: &DbRow) -> Result<Intent> {
            let get = |e: sqlx::Error| corrupt("execution_intents", e.to_string());
            let status: String = row.try_get("status").map_err(get)?;
            Ok(Intent {
                request_id: uuid_of(row.try_get("request_id").map_err(get)?),
                step: row.try_get("step").map_err(get)?,
                action: row.try_get("action").map_err(get)?,
                status: IntentStatus::parse(&status)
                    .ok_or_else(|| corrupt("execution_intents", format!("status `{status}`")))?,
                detail: row.try_get::<Json<serde_json::Value>, _>("detail").map_err(get)?.0,
                created_at: time_of(row.try_get("created_at").map_err(get)?)?,
                updated_at: time_of(row.try_get("updated_at").map_err(get)?)?,
            })
        }

        fn approval_from_row(row: &DbRow) -> Result<$crate::domain::ApprovalRequest> {
            let get = |e: sqlx::Error| corrupt("approvals", e.to_string());
            Ok(row
                .try_get::<Json<$crate::domain::ApprovalRequest>, _>("record")
                .map_err(get)?
                .0)
        }

        fn notification_from_row(row: &DbRow) -> Result<$crate::domain::Notification> {
            use $crate::domain::{Channel, DeliveryStatus, NotificationKind};
            let get = |e: sqlx::Error| corrupt("notifications", e.to_string());
            let channel: String = row.try_get("channel").map_err(get)?;
            let kind: String = row.try_get("kind").map_err(get)?;
            let status: String = row.try_get("status").map_err(get)?;
            let next: Option<Ts> = row.try_get("next_attempt_at").map_err(get)?;
            let external: Option<Json<serde_json::Value>> =
                row.try_get("external_ref").map_err(get)?;
            Ok($crate::domain::Notification {
                id: uuid_of(row.try_get("id").map_err(get)?),
                approval_id: uuid_of(row.try_get("approval_id").map_err(get)?),
                channel: Channel::parse(&channel)
                    .ok_or_else(|| corrupt("notifications", format!("channel `{channel}`")))?,
                recipient: row.try_get("recipient").map_err(get)?,
                kind: NotificationKind::parse(&kind)
                    .ok_or_else(|| corrupt("notifications", format!("kind `{kind}`")))?,
                status: DeliveryStatus::parse(&status)
                    .ok_or_else(|| corrupt("notifications", format!("status `{status}`")))?,
                attempts: row.try_get("attempts").map_err(get)?,
                next_attempt_at: next.map(time_of).transpose()?,
                last_error: row.try_get("last_error").map_err(get)?,
                external_ref: external.map(|j| j.0),
                created_at: time_of(row.try_get("created_at").map_err(get)?)?,
                updated_at: time_of(row.try_get("updated_at").map_err(get)?)?,
            })
        }

        async fn insert_notification(
            tx: &mut Tx,
            n: &$crate::domain::Notification,
        ) -> Result<()> {
            sqlx::query(
                "INSERT INTO notifications (id, approval_id, channel, recipient, kind, status, \
                 attempts, next_attempt_at, last_error, external_ref, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) \
                 ON CONFLICT (approval_id, channel, recipient, kind) DO NOTHING",
            )
            .bind(id(n.id))
            .bind(id(n.approval_id))
            .bind(n.channel.as_str())
            .bind($crate::store::storable_text(&n.recipient))
            .bind(n.kind.as_str())
            .bind(n.status.as_str())
            .bind(n.attempts)
            .bind(n.next_attempt_at.map(ts))
            .bind(n.last_error.as_deref().map($crate::store::storable_text))
            .bind(n.external_ref.as_ref().map($crate::store::storable_value))
            .bind(ts(n.created_at))
            .bind(ts(n.updated_at))
            .execute(&mut **tx)
            .await?;
            Ok(())
        }

        fn audit_from_row(row: &DbRow) -> Result<AuditEvent> {
            let get = |e: sqlx::Error| corrupt("audit_events", e.to_string());
            let request_id: Option<Id> = row.try_get("request_id").map_err(get)?;
            let phase: Option<String> = row.try_get("phase").map_err(get)?;
            Ok(AuditEvent {
                id: row.try_get("id").map_err(get)?,
                request_id: request_id.map(uuid_of),
                at: time_of(row.try_get("at").map_err(get)?)?,
                phase: phase.as_deref().map(parse_phase).transpose()?,
                kind: row.try_get("kind").map_err(get)?,
                actor: row.try_get("actor").map_err(get)?,
                message: row.try_get("message").map_err(get)?,
                payload: row.try_get::<Json<serde_json::Value>, _>("payload").map_err(get)?.0,
            })
        }

        fn api_key_from_row(row: &DbRow) -> Result<$crate::domain::ApiKey> {
            let get = |e: sqlx::Error| corrupt("api_keys", e.to_string());
            let role: String = row.try_get("role").map_err(get)?;
            let revoked: Option<Ts> = row.try_get("revoked_at").map_err(get)?;
            Ok($crate::domain::ApiKey {
                id: uuid_of(row.try_get("id").map_err(get)?),
                name: row.try_get("name").map_err(get)?,
                role: $crate::domain::Role::parse(&role)
                    .ok_or_else(|| corrupt("api_keys", format!("role `{role}`")))?,
                prefix: row.try_get("prefix").map_err(get)?,
                created_at: time_of(row.try_get("created_at").map_err(get)?)?,
                created_by: row.try_get("created_by").map_err(get)?,
                revoked_at: revoked.map(time_of).transpose()?,
            })
        }

        /// The hash of the last audit event: the link the next one chains to. Takes the
        /// chain's lock first (Postgres; SQLite's single writer needs none), held until the
        /// transaction ends, so the chain grows one transaction at a time across every replica.
        ///
        /// The lock is taken late, once a transaction's row writes are done, so writers do
        /// their other work in parallel and queue only for the append and the commit. That is
        /// deadlock-free because every audited transaction appends its events last: after the
        /// lock it only inserts audit rows (whose foreign-key checks take KEY SHARE locks, which
        /// no writer's row lock conflicts with) and reads.
        ///
        /// It also checks that `key` may extend the chain: the last event is signed with it,
        /// or is the rotation that handed the chain to it. A daemon whose key was rotated out
        /// while it ran (another replica started with the new keyring) writes nothing more.
        async fn chain_head(tx: &mut Tx, key: &AuditKey) -> Result<Option<String>> {
            if let Some(lock) = CHAIN_LOCK {
                sqlx::query(lock).execute(&mut **tx).await?;
            }
            // (`payload ->> 'x'` reads a JSON field on both databases.)
            let row: Option<(Option<String>, Option<String>, String, Option<String>)> = sqlx::query_as(
                "SELECT hash, key_id, kind, CASE WHEN kind = 'key_rotated' \
                 THEN payload ->> 'new_key_id' END FROM audit_events ORDER BY id DESC LIMIT 1",
            )
            .fetch_optional(&mut **tx)
            .await?;
            let Some((hash, signer, kind, handed_to)) = row else {
                return Ok(None);
            };
            let ours = key.id();
            let allowed = match (signer.as_deref(), kind.as_str()) {
                // Written before the chain existed, or before events carried their key's id.
                (None, _) => true,
                (Some(_), $crate::store::chain::KEY_ROTATED) => handed_to.as_deref() == Some(ours),
                (Some(signer), _) => signer == ours,
            };
            if !allowed {
                let now_at = handed_to.or(signer).unwrap_or_default();
                return Err(StoreError::AuditKey(format!(
                    "the audit trail is now signed with key {now_at}, not with this daemon's key \
                     {ours} (it was rotated, or another key signs this database): restart this \
                     daemon with the current keyring (--audit-key / --audit-key-file)"
                )));
            }
            Ok(hash)
        }

        /// The trail's key rotations, in order (a partial index finds them).
        async fn rotations<'e, E>(db: E) -> Result<Vec<Rotation>>
        where
            E: sqlx::Executor<'e, Database = $db>,
        {
            let rows: Vec<(i64, Option<String>, Option<String>)> = sqlx::query_as(
                "SELECT id, payload ->> 'old_key_id', payload ->> 'new_key_id' FROM audit_events \
                 WHERE kind = 'key_rotated' ORDER BY id",
            )
            .fetch_all(db)
            .await?;
            rows.into_iter()
                .map(|(id, old, new)| match (old, new) {
                    (Some(old_key_id), Some(new_key_id)) => Ok(Rotation { event_id: id, old_key_id, new_key_id }),
                    _ => Err(corrupt("audit_events", format!("key rotation event {id} names no keys"))),
                })
                .collect()
        }

        /// The chain columns of one event about to be written after `prev`.
        fn chain_link(
            key: &AuditKey,
            prev: Option<&str>,
            request_id: Option<uuid::Uuid>,
            phase: Option<Phase>,
            at: chrono::DateTime<chrono::Utc>,
            draft: &AuditDraft,
        ) -> String {
            let rid = request_id.map(|r| r.hyphenated().to_string());
            let message = $crate::store::storable_text(&draft.message);
            let payload = $crate::store::storable_value(&draft.payload);
            key.link(
                prev,
                &ChainRow {
                    request_id: rid.as_deref(),
                    at_micros: at.timestamp_micros(),
                    phase: phase.map(Phase::as_str),
                    kind: &draft.kind,
                    actor: &draft.actor,
                    message: &message,
                    payload: &payload.0,
                },
            )
        }

        /// Times as both databases keep them (microseconds), so the hash covers what is read back.
        fn to_micros(t: chrono::DateTime<chrono::Utc>) -> chrono::DateTime<chrono::Utc> {
            chrono::DateTime::from_timestamp_micros(t.timestamp_micros()).unwrap_or(t)
        }

        async fn insert_audit(
            tx: &mut Tx,
            key: &AuditKey,
            request_id: Option<uuid::Uuid>,
            phase: Option<Phase>,
            at: chrono::DateTime<chrono::Utc>,
            draft: &AuditDraft,
        ) -> Result<()> {
            let at = to_micros(at);
            let prev = chain_head(tx, key).await?;
            let hash = chain_link(key, prev.as_deref(), request_id, phase, at, draft);
            sqlx::query(
                "INSERT INTO audit_events (request_id, at, phase, kind, actor, message, payload, \
                 prev_hash, hash, key_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
            )
            .bind(request_id.map(id))
            .bind(ts(at))
            .bind(phase.map(Phase::as_str))
            .bind(&draft.kind)
            .bind(&draft.actor)
            .bind($crate::store::storable_text(&draft.message))
            .bind($crate::store::storable_value(&draft.payload))
            .bind(prev)
            .bind(hash)
            .bind(key.id())
            .execute(&mut **tx)
            .await?;
            Ok(())
        }

        /// An audit event about to be written, its link computed.
        struct AuditRow<'a> {
            request_id: Option<uuid::Uuid>,
            phase: Option<Phase>,
            draft: &'a AuditDraft,
            prev: Option<String>,
            hash: String,
        }

        /// One request's step, as `update_steps` writes it.
        struct StepRow<'a> {
            id: uuid::Uuid,
            from: Phase,
            to: Phase,
            reason: Option<std::borrow::Cow<'a, str>>,
            /// Still active after the step.
            active: bool,
            state: Json<serde_json::Value>,
            attempts: i32,
            not_before: Option<chrono::DateTime<chrono::Utc>>,
            /// The claim ends with the step.
            release: bool,
            figures: $crate::store::Figures,
        }

        /// Append `events` (request, phase, draft), in order, all at `at`, to the chain: one
        /// read of the chain's head, each link computed in memory, then the backend's bulk
        /// write (`write_audits`). Call inside a transaction opened with `begin_audited`, after
        /// its other writes.
        async fn insert_audits(
            tx: &mut Tx,
            key: &AuditKey,
            at: chrono::DateTime<chrono::Utc>,
            events: &[(Option<uuid::Uuid>, Option<Phase>, std::borrow::Cow<'_, AuditDraft>)],
        ) -> Result<()> {
            if events.is_empty() {
                return Ok(());
            }
            let at = to_micros(at);
            let mut head = chain_head(tx, key).await?;
            let rows: Vec<AuditRow<'_>> = events
                .iter()
                .map(|(rid, phase, d)| {
                    let hash = chain_link(key, head.as_deref(), *rid, *phase, at, d);
                    AuditRow { request_id: *rid, phase: *phase, draft: d, prev: head.replace(hash.clone()), hash }
                })
                .collect();
            write_audits(tx, key.id(), at, &rows).await
        }

        /// Check a run of stored events into `verifier`. The hash stored before each event is
        /// the row's `actual_prev` column, or, when the rows are the whole table in order
        /// (`sequential`), the previous row's hash (carried across calls).
        fn verify_rows(
            verifier: &mut Verifier<'_>,
            rows: &[DbRow],
            mut sequential: Option<&mut Option<String>>,
        ) -> Result<bool> {
            let get = |e: sqlx::Error| corrupt("audit_events", e.to_string());
            for row in rows {
                let event = audit_from_row(row)?;
                let prev_hash: Option<String> = row.try_get("prev_hash").map_err(get)?;
                let hash: Option<String> = row.try_get("hash").map_err(get)?;
                let key_id: Option<String> = row.try_get("key_id").map_err(get)?;
                let actual_prev: Option<String> = match sequential.as_deref_mut() {
                    Some(prev) => std::mem::replace(prev, hash.clone()),
                    None => row.try_get("actual_prev").map_err(get)?,
                };
                let rid = event.request_id.map(|r| r.hyphenated().to_string());
                let link = StoredLink {
                    id: event.id,
                    row: ChainRow {
                        request_id: rid.as_deref(),
                        at_micros: event.at.timestamp_micros(),
                        phase: event.phase.map(Phase::as_str),
                        kind: &event.kind,
                        actor: &event.actor,
                        message: &event.message,
                        payload: &event.payload,
                    },
                    prev_hash: prev_hash.as_deref(),
                    hash: hash.as_deref(),
                    key_id: key_id.as_deref(),
                };
                if !verifier.check(&link, actual_prev.as_deref()) {
                    return Ok(false);
                }
            }
            Ok(true)
        }

        async fn current_phase(tx: &mut Tx, request_id: uuid::Uuid) -> Result<Option<Phase>> {
            let row: Option<(String,)> =
                sqlx::query_as("SELECT phase FROM remediation_requests WHERE id = $1")
                    .bind(id(request_id))
                    .fetch_optional(&mut **tx)
                    .await?;
            row.map(|(p,)| parse_phase(&p)).transpose()
        }

        /// Times are compared at the precision both databases keep.
        fn micros(t: chrono::DateTime<chrono::Utc>) -> i64 {
            t.timestamp_micros()
        }

        impl $store {
            /// A write transaction that may append audit events. It must append them after its
            /// other writes: appending takes the chain's lock (see `chain_head`).
            async fn begin_audited(&self) -> Result<Tx> {
                Ok(self.writer.begin_with(BEGIN).await?)
            }

            /// Record a batch in one transaction with a handful of statements whatever its
            /// size: look up what is known (signals by fingerprint, active targets by alias),
            /// decide every signal in order in memory, then write each table with multi-row
            /// statements. A concurrent writer that won a race (same alert, same target) makes
            /// an insert come back short: the batch is retried from the start.
            async fn ingest_once(&self, signals: &[NewSignal]) -> Result<Vec<IngestOutcome>> {
                use std::collections::HashMap;
                let now = self.clock.now();
                let _write = self.write_guard().await;
                let mut tx: Tx = self.begin_audited().await?;

                // 1. What the database already knows.
                let mut fingerprints: Vec<&str> = signals.iter().map(|s| s.fingerprint.as_str()).collect();
                fingerprints.sort_unstable();
                fingerprints.dedup();
                // (fingerprint, startsAt) -> (signal id, status, request)
                let mut known: HashMap<(String, i64), (Option<Id>, String, Option<uuid::Uuid>)> = HashMap::new();
                for (sid, fp, at, status, rid) in lookup_signals(&mut tx, &fingerprints).await? {
                    known.insert((fp, micros(time_of(at)?)), (Some(sid), status, rid.map(uuid_of)));
                }
                let mut aliases: Vec<&str> = signals.iter().flat_map(|s| s.target_aliases.iter().map(String::as_str)).collect();
                aliases.sort_unstable();
                aliases.dedup();
                let mut active: HashMap<String, uuid::Uuid> = HashMap::new();
                for (fp, rid) in lookup_targets(&mut tx, &aliases).await? {
                    active.insert(fp, uuid_of(rid));
                }

                // 2. Decide, in order: later signals of the batch see earlier ones.
                let mut out = Vec::with_capacity(signals.len());
                let mut inserts: Vec<(&NewSignal, Option<uuid::Uuid>, bool)> = Vec::new(); // signal, request, resolved
                let mut opened: Vec<(uuid::Uuid, &NewSignal)> = Vec::new();
                let mut targets: Vec<(String, uuid::Uuid, bool)> = Vec::new(); // alias, request, primary
                let mut occurrences: Vec<(usize, uuid::Uuid, &NewSignal)> = Vec::new();
                let mut resolutions: Vec<(Id, &NewSignal, Option<uuid::Uuid>)> = Vec::new();
                for s in signals {
                    let key = (s.fingerprint.clone(), micros(s.starts_at));
                    if let Some((sid, status, rid)) = known.get_mut(&key) {
                        let rid = *rid;
                        if s.status == SignalStatus::Resolved && status == "firing" {
                            *status = "resolved".into();
                            match sid {
                                Some(sid) => resolutions.push((*sid, s, rid)),
                                // Fired and resolved in this very batch: store it resolved.
                                None => {
                                    if let Some(row) = inserts.iter_mut().find(|(i, _, _)| i.fingerprint == s.fingerprint && micros(i.starts_at) == key.1) {
                                        row.2 = true;
                                    }
                                }
                            }
                            out.push(IngestOutcome::Resolved { request_id: rid });
                        } else {
                            out.push(IngestOutcome::Redelivery { request_id: rid });
                        }
                        continue;
                    }
                    let hit = s.target_aliases.iter().find_map(|a| active.get(a).copied());
                    let outcome = match (s.status, hit) {
                        (SignalStatus::Resolved, request_id) => IngestOutcome::Resolved { request_id },
                        (SignalStatus::Firing, Some(rid)) => {
                            occurrences.push((out.len(), rid, s));
                            IngestOutcome::Occurrence { request_id: rid, occurrence_count: 0 }
                        }
                        (SignalStatus::Firing, None) => {
                            let rid = uuid::Uuid::new_v4();
                            opened.push((rid, s));
                            targets.push((s.target_fingerprint.clone(), rid, true));
                            active.insert(s.target_fingerprint.clone(), rid);
                            for a in s.target_aliases.iter().filter(|a| **a != s.target_fingerprint) {
                                if !active.contains_key(a) {
                                    targets.push((a.clone(), rid, false));
                                    active.insert(a.clone(), rid);
                                }
                            }
                            IngestOutcome::Opened { request_id: rid }
                        }
                    };
                    let status = if s.status == SignalStatus::Resolved { "resolved" } else { "firing" };
                    known.insert(key, (None, status.into(), outcome.request_id()));
                    inserts.push((s, outcome.request_id(), s.status == SignalStatus::Resolved));
                    out.push(outcome);
                }

                // 3. Write. Targets first: a primary target another writer took meanwhile
                //    (Postgres) comes back missing and the batch is retried.
                let taken = insert_targets(&mut tx, &targets).await?;
                if targets.iter().any(|(fp, _, primary)| *primary && !taken.contains(fp)) {
                    return Err(StoreError::Conflict);
                }
                insert_requests(&mut tx, now, &opened).await?;
                // Occurrence counts: one UPDATE per request that had repeats.
                let mut audits: Vec<(Option<uuid::Uuid>, Option<Phase>, AuditDraft)> = Vec::new();
                let mut per_request: Vec<(uuid::Uuid, Vec<(usize, &NewSignal)>)> = Vec::new();
                for (i, rid, s) in &occurrences {
                    match per_request.iter_mut().find(|(r, _)| r == rid) {
                        Some((_, list)) => list.push((*i, *s)),
                        None => per_request.push((*rid, vec![(*i, *s)])),
                    }
                }
                // In id order, as step commits lock requests: no deadlock between the two.
                per_request.sort_by_key(|(rid, _)| *rid);
                for (rid, list) in &per_request {
                    let (total, phase): (i64, String) = sqlx::query_as(
                        "UPDATE remediation_requests SET occurrence_count = occurrence_count + $1, \
                         last_seen = $2, updated_at = $2 WHERE id = $3 RETURNING occurrence_count, phase",
                    )
                    .bind(list.len() as i64)
                    .bind(ts(now))
                    .bind(id(*rid))
                    .fetch_one(&mut *tx)
                    .await?;
                    let phase = parse_phase(&phase)?;
                    for (j, (i, s)) in list.iter().enumerate() {
                        let count = total - list.len() as i64 + 1 + j as i64;
                        if let Some(IngestOutcome::Occurrence { occurrence_count, .. }) = out.get_mut(*i) {
                            *occurrence_count = count;
                        }
                        audits.push((
                            Some(*rid),
                            Some(phase),
                            AuditDraft::new("occurrence", &s.actor(), format!("{} fired again (occurrence {count})", s.name))
                                .with_payload(serde_json::json!({"fingerprint": s.fingerprint, "starts_at": s.starts_at, "occurrence_count": count})),
                        ));
                    }
                }
                for (sid, s, rid) in &resolutions {
                    sqlx::query("UPDATE signals SET status = 'resolved', ends_at = $1, resolved_at = $2 WHERE id = $3")
                        .bind(s.ends_at.map(ts))
                        .bind(ts(now))
                        .bind(*sid)
                        .execute(&mut *tx)
                        .await?;
                    if let Some(rid) = rid {
                        let phase = current_phase(&mut tx, *rid).await?;
                        audits.push((
                            Some(*rid),
                            phase,
                            AuditDraft::new("signal_resolved", &s.actor(), format!("alert {} resolved", s.name))
                                .with_payload(serde_json::json!({"fingerprint": s.fingerprint, "starts_at": s.starts_at, "ends_at": s.ends_at})),
                        ));
                    }
                }
                if insert_signals(&mut tx, now, &inserts).await? < inserts.len() {
                    // A concurrent delivery of the same alert committed first.
                    return Err(StoreError::Conflict);
                }
                for (rid, s) in &opened {
                    let target = s.target.as_ref().map_or_else(|| "no target label".to_owned(), |t| t.to_string());
                    audits.push((
                        Some(*rid),
                        Some(Phase::Received),
                        AuditDraft::new("received", &s.actor(), format!("{} ({}) opened a request for {target}", s.name, s.mode.as_str()))
                            .with_payload(serde_json::json!({
                                "fingerprint": s.fingerprint,
                                "starts_at": s.starts_at,
                                "target": s.target,
                                "target_fingerprint": s.target_fingerprint,
                                "source": s.source,
                            })),
                    ));
                }
                // The trail in the order things happened: openings, then repeats and resolutions.
                audits.sort_by_key(|(_, _, d)| if d.kind == "received" { 0 } else { 1 });
                let audits: Vec<_> = audits.into_iter().map(|(r, p, d)| (r, p, std::borrow::Cow::Owned(d))).collect();
                insert_audits(&mut tx, &self.audit_key, now, &audits).await?;
                tx.commit().await?;
                Ok(out)
            }
        }

        #[async_trait::async_trait]
        impl $crate::store::Housekeeping for $store {
            fn backend(&self) -> &'static str {
                $backend
            }

            fn serial_writes(&self) -> bool {
                SERIAL_WRITES
            }

            async fn health(&self) -> Result<StoreHealth> {
                let (applied,): (i64,) =
                    sqlx::query_as("SELECT count(*) FROM _sqlx_migrations WHERE success")
                        .fetch_one(&self.pool)
                        .await?;
                let audit_key: Option<(String,)> =
                    sqlx::query_as("SELECT value FROM settings WHERE key = 'audit_key_id'")
                        .fetch_optional(&self.pool)
                        .await?;
                Ok(StoreHealth {
                    backend: $backend,
                    migrations_applied: applied,
                    migrations_expected: MIGRATOR.iter().count() as i64,
                    audit_key: audit_key.map(|(k,)| k),
                    our_audit_key: self.audit_key.id().to_owned(),
                })
            }

            async fn setting_or_init(
                &self,
                key: &str,
                generate: &(dyn Fn() -> String + Sync),
            ) -> Result<String> {
                let _write = self.write_guard().await;
                sqlx::query(
                    "INSERT INTO settings (key, value) VALUES ($1, $2) \
                     ON CONFLICT (key) DO NOTHING",
                )
                .bind(key)
                .bind(generate())
                .execute(&self.writer)
                .await?;
                let (value,): (String,) =
                    sqlx::query_as("SELECT value FROM settings WHERE key = $1")
                        .bind(key)
                        .fetch_one(&self.writer)
                        .await?;
                Ok(value)
            }
        }

        #[async_trait::async_trait]
        impl $crate::store::Requests for $store {
            async fn ingest(&self, signals: &[NewSignal]) -> Result<Vec<IngestOutcome>> {
                let mut attempt = 0;
                loop {
                    match self.ingest_once(signals).await {
                        Err(StoreError::Conflict) if attempt < 8 => attempt += 1,
                        other => return other,
                    }
                }
            }

            async fn get_request(&self, rid: uuid::Uuid) -> Result<Option<RemediationRequest>> {
                let row = sqlx::query(concat!(
                    "SELECT ",
                    request_columns!(),
                    " FROM remediation_requests WHERE id = $1"
                ))
                .bind(id(rid))
                .fetch_optional(&self.pool)
                .await?;
                row.as_ref().map(request_from_row).transpose()
            }

            async fn list_requests(&self, f: &RequestFilter) -> Result<RequestPage> {
                // Only the filters given become predicates, so each query can use the index
                // that leads with its filter; the cursor continues the (created_at, id) order.
                let mut sql = String::from(concat!(
                    "SELECT ",
                    request_columns!(),
                    " FROM remediation_requests WHERE TRUE"
                ));
                let mut n = 0;
                let mut next = || {
                    n += 1;
                    param(n)
                };
                if f.phase.is_some() {
                    sql.push_str(&format!(" AND phase = {}", next()));
                }
                if f.namespace.is_some() {
                    sql.push_str(&format!(" AND target_namespace = {}", next()));
                }
                if f.target.is_some() {
                    sql.push_str(&format!(" AND target_name = {}", next()));
                }
                if f.signal_name.is_some() {
                    sql.push_str(&format!(" AND signal_name = {}", next()));
                }
                if f.since.is_some() {
                    sql.push_str(&format!(" AND created_at >= {}", next()));
                }
                if f.until.is_some() {
                    sql.push_str(&format!(" AND created_at < {}", next()));
                }
                if f.before.is_some() {
                    // A row value, which both databases turn into one index range; the
                    // equivalent `created_at < a OR (created_at = a AND id < b)` made Postgres
                    // filter every newer request first (70 ms at 90,000 requests in).
                    let (a, b) = (next(), next());
                    sql.push_str(&format!(" AND (created_at, id) < ({a}, {b})"));
                }
                sql.push_str(&format!(" ORDER BY created_at DESC, id DESC LIMIT {}", next()));
                let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
                if let Some(p) = f.phase {
                    q = q.bind(p.as_str());
                }
                if let Some(ns) = &f.namespace {
                    q = q.bind(ns.clone());
                }
                if let Some(t) = &f.target {
                    q = q.bind(t.clone());
                }
                if let Some(a) = &f.signal_name {
                    q = q.bind(a.clone());
                }
                if let Some(t) = f.since {
                    q = q.bind(ts(t));
                }
                if let Some(t) = f.until {
                    q = q.bind(ts(t));
                }
                if let Some(c) = f.before {
                    q = q.bind(ts(c.created_at)).bind(id(c.id));
                }
                let limit = f.limit.max(0);
                q = q.bind(limit + 1);
                let rows = q.fetch_all(&self.pool).await?;
                let mut items = rows.iter().map(request_from_row).collect::<Result<Vec<_>>>()?;
                let more = items.len() as i64 > limit;
                items.truncate(limit as usize);
                let next = if more { items.last().map($crate::store::Cursor::of) } else { None };
                Ok(RequestPage { items, next })
            }

            async fn list_signals(&self, f: &SignalFilter) -> Result<Page<SignalRecord>> {
                // Only the filters given become predicates (as in `list_requests`): an
                // `($1 IS NULL OR request_id = $1)` term can use no index, so a request's page
                // counted and sorted every signal ever received.
                let mut filter = String::from(" WHERE TRUE");
                let mut n = 0;
                let mut next = || {
                    n += 1;
                    param(n)
                };
                if f.status.is_some() {
                    filter.push_str(&format!(" AND status = {}", next()));
                }
                if f.namespace.is_some() {
                    filter.push_str(&format!(" AND target_namespace = {}", next()));
                }
                if f.request_id.is_some() {
                    filter.push_str(&format!(" AND request_id = {}", next()));
                }
                let (limit, offset) = (next(), next());
                let mut count =
                    sqlx::query_as::<_, (i64,)>(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM signals{filter}")));
                let mut rows = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT id, fingerprint, status, name, severity, mode, source, labels, \
                     annotations, starts_at, ends_at, target_kind, target_name, \
                     target_namespace, request_id, received_at, resolved_at FROM signals{filter} \
                     ORDER BY received_at DESC, id LIMIT {limit} OFFSET {offset}"
                )));
                if let Some(s) = f.status {
                    count = count.bind(s.as_str());
                    rows = rows.bind(s.as_str());
                }
                if let Some(ns) = &f.namespace {
                    count = count.bind(ns.clone());
                    rows = rows.bind(ns.clone());
                }
                if let Some(r) = f.request_id {
                    count = count.bind(id(r));
                    rows = rows.bind(id(r));
                }
                let (total,) = count.fetch_one(&self.pool).await?;
                let rows = rows.bind(f.limit).bind(f.offset).fetch_all(&self.pool).await?;
                let items = rows.iter().map(signal_from_row).collect::<Result<Vec<_>>>()?;
                Ok(Page { total, items })
            }

            async fn count_by_phase(&self) -> Result<Vec<(Phase, i64)>> {
                let rows: Vec<(String, i64)> = sqlx::query_as(
                    "SELECT phase, count(*) FROM remediation_requests GROUP BY phase",
                )
                .fetch_all(&self.pool)
                .await?;
                rows.into_iter()
                    .map(|(p, n)| Ok((parse_phase(&p)?, n)))
                    .collect()
            }

            async fn summary(
                &self,
                since: Option<chrono::DateTime<chrono::Utc>>,
            ) -> Result<$crate::store::Summary> {
                let since_ts = ts(since.unwrap_or(chrono::DateTime::<chrono::Utc>::UNIX_EPOCH));
                // Three queries, each answered from an index alone (0005_dashboard.sql): the
                // figures of every request in the period in one pass, grouped by what the page
                // counts; the tokens per day; the median time to resolution. Reading the rows
                // instead cost seconds at 100,000 requests (docs/benchmarks.md, "Dashboard at
                // scale"). The effectiveness bins have explicit bounds: CAST(x * 5 AS INTEGER)
                // truncates on SQLite and rounds on Postgres.
                let groups: Vec<(String, Option<bool>, Option<String>, Option<i64>, i64, i64)> =
                    sqlx::query_as(
                        "SELECT phase, auto_approved, guardrail, \
                         CAST(CASE WHEN effectiveness IS NULL THEN NULL \
                         WHEN effectiveness >= 0.8 THEN 4 WHEN effectiveness >= 0.6 THEN 3 \
                         WHEN effectiveness >= 0.4 THEN 2 WHEN effectiveness >= 0.2 THEN 1 \
                         ELSE 0 END AS BIGINT), count(*), count(ttr_ms) \
                         FROM remediation_requests WHERE created_at >= $1 GROUP BY 1, 2, 3, 4",
                    )
                    .bind(since_ts.clone())
                    .fetch_all(&self.pool)
                    .await?;
                let mut phases: std::collections::BTreeMap<String, i64> = Default::default();
                let mut blocks: std::collections::BTreeMap<String, i64> = Default::default();
                let (mut gated, mut auto_approved, mut completed) = (0i64, 0i64, 0i64);
                let mut effectiveness = [0i64; 5];
                for (phase, auto, guardrail, bin, n, with_ttr) in groups {
                    if phase == Phase::Completed.as_str() {
                        completed += with_ttr;
                    }
                    *phases.entry(phase).or_default() += n;
                    if let Some(auto) = auto {
                        gated += n;
                        if auto {
                            auto_approved += n;
                        }
                    }
                    if let Some(bin) = bin {
                        effectiveness[bin.clamp(0, 4) as usize] += n;
                    }
                    if let Some(g) = guardrail {
                        *blocks.entry(g).or_default() += n;
                    }
                }
                let by_phase = phases
                    .into_iter()
                    .map(|(p, n)| Ok((parse_phase(&p)?, n)))
                    .collect::<Result<Vec<_>>>()?;
                let total = by_phase.iter().map(|(_, n)| n).sum();
                let mut guardrail_blocks: Vec<(String, i64)> = blocks.into_iter().collect();
                guardrail_blocks.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
                let median_ttr_seconds = if completed == 0 {
                    None
                } else {
                    let (ms,): (i64,) = sqlx::query_as(
                        "SELECT ttr_ms FROM remediation_requests \
                         WHERE created_at >= $1 AND phase = 'Completed' AND ttr_ms IS NOT NULL \
                         ORDER BY ttr_ms LIMIT 1 OFFSET $2",
                    )
                    .bind(since_ts.clone())
                    .bind(completed / 2)
                    .fetch_one(&self.pool)
                    .await?;
                    Some(ms as f64 / 1000.0)
                };
                let tokens_per_day: Vec<(String, i64)> = sqlx::query_as(concat!(
                    "SELECT ",
                    day_of!("created_at"),
                    " AS day, CAST(sum(tokens) AS BIGINT) FROM remediation_requests \
                     WHERE created_at >= $1 AND tokens > 0 GROUP BY 1 ORDER BY 1"
                ))
                .bind(since_ts)
                .fetch_all(&self.pool)
                .await?;
                Ok($crate::store::Summary {
                    since,
                    total,
                    by_phase,
                    gated,
                    auto_approved,
                    median_ttr_seconds,
                    effectiveness,
                    tokens_per_day,
                    guardrail_blocks,
                })
            }

            async fn signal_resolved_since(
                &self,
                fingerprint: &str,
                since: chrono::DateTime<chrono::Utc>,
            ) -> Result<bool> {
                let (n,): (i64,) = sqlx::query_as(
                    "SELECT count(*) FROM signals WHERE fingerprint = $1 \
                     AND status = 'resolved' AND (resolved_at >= $2 OR ends_at >= $2)",
                )
                .bind(fingerprint)
                .bind(ts(since))
                .fetch_one(&self.pool)
                .await?;
                Ok(n > 0)
            }
        }

        #[async_trait::async_trait]
        impl $crate::store::Claims for $store {
            async fn claim_batch(
                &self,
                worker: &str,
                lease: std::time::Duration,
                limit: usize,
            ) -> Result<Vec<RemediationRequest>> {
                let now = self.clock.now();
                let until = now + chrono::Duration::from_std(lease).unwrap_or_default();
                let _write = self.write_guard().await;
                // A replica whose audit key was rotated out claims nothing (the `NOT EXISTS` on
                // the database's recorded key): it could commit no step, and its stages would
                // call the model and write to the cluster for nothing.
                let rows = sqlx::query(CLAIM_SQL)
                    .bind(worker)
                    .bind(ts(until))
                    .bind(ts(now))
                    .bind(i64::try_from(limit.max(1)).unwrap_or(i64::MAX))
                    .bind(self.audit_key.id())
                    .fetch_all(&self.writer)
                    .await?;
                let mut claimed = rows.iter().map(request_from_row).collect::<Result<Vec<_>>>()?;
                // RETURNING gives no order: the oldest first, as the claim chose them.
                claimed.sort_by_key(|r| (r.created_at, r.id));
                Ok(claimed)
            }

            async fn renew(
                &self,
                rid: uuid::Uuid,
                worker: &str,
                lease: std::time::Duration,
            ) -> Result<bool> {
                let until = self.clock.now() + chrono::Duration::from_std(lease).unwrap_or_default();
                let _write = self.write_guard().await;
                let done = sqlx::query(
                    "UPDATE remediation_requests SET lease_until = $1 \
                     WHERE id = $2 AND claimed_by = $3",
                )
                .bind(ts(until))
                .bind(id(rid))
                .bind(worker)
                .execute(&self.writer)
                .await?;
                Ok(done.rows_affected() == 1)
            }

            async fn commit_steps(
                &self,
                worker: &str,
                steps: &[$crate::store::PendingStep],
            ) -> Result<Vec<Option<RemediationRequest>>> {
                // Everything that can be refused is refused before the transaction opens.
                let mut prepared = Vec::with_capacity(steps.len());
                for (i, pending) in steps.iter().enumerate() {
                    let $crate::store::PendingStep { id: rid, from, ref via, ref step } = *pending;
                    let mut moves = vec![from];
                    moves.extend(via.as_ref().map(|v| v.phase));
                    moves.push(step.to);
                    if let Some(bad) = moves.windows(2).find(|m| !m[0].can_move_to(m[1])) {
                        return Err(corrupt(
                            "remediation_requests",
                            format!("illegal transition {} -> {}", bad[0], bad[1]),
                        ));
                    }
                    let row = StepRow {
                        id: rid,
                        from,
                        to: step.to,
                        reason: step.reason.as_deref().map($crate::store::storable_text),
                        active: !step.to.is_terminal(),
                        state: $crate::store::storable_json(&step.state)?,
                        attempts: step.attempts,
                        not_before: step.not_before,
                        release: step.release || step.to.is_terminal(),
                        figures: $crate::store::Figures::of(step),
                    };
                    prepared.push((i, row, via, step));
                }
                // Rows are locked in id order, as ingest locks the requests it counts
                // occurrences on: two transactions touching the same requests cannot deadlock.
                // The answers keep the order of `steps`.
                prepared.sort_by_key(|p| p.1.id);
                let (order, rows): (Vec<_>, Vec<StepRow<'_>>) =
                    prepared.into_iter().map(|(i, row, via, step)| ((i, via, step), row)).unzip();
                let now = self.clock.now();
                let _write = self.write_guard().await;
                let mut tx: Tx = self.begin_audited().await?;
                // No row back for a request: another worker holds it now; nothing of its step
                // is written.
                let mut updated: std::collections::HashMap<uuid::Uuid, RemediationRequest> = update_steps(&mut tx, worker, now, &rows)
                    .await?
                    .iter()
                    .map(|row| request_from_row(row).map(|r| (r.id, r)))
                    .collect::<Result<_>>()?;
                let mut out: Vec<Option<RemediationRequest>> = vec![None; rows.len()];
                let mut audits: Vec<(Option<uuid::Uuid>, Option<Phase>, std::borrow::Cow<'_, AuditDraft>)> = Vec::new();
                let mut finished: Vec<uuid::Uuid> = Vec::new();
                for ((i, via, step), row) in order.into_iter().zip(&rows) {
                    let (rid, from) = (row.id, row.from);
                    let Some(request) = updated.remove(&rid) else { continue };
                    if step.to.is_terminal() {
                        finished.push(rid);
                    }
                    // What a stage found happened in the phase it ran in; a transition lands in
                    // the phase it moved to.
                    let mut stage_from = from;
                    if let Some(via) = via {
                        audits.extend(via.events.iter().map(|d| (Some(rid), Some(from), std::borrow::Cow::Borrowed(d))));
                        let draft = $crate::domain::transition_event(from, via.phase, via.reason.as_deref(), worker);
                        audits.push((Some(rid), Some(via.phase), std::borrow::Cow::Owned(draft)));
                        stage_from = via.phase;
                    }
                    audits.extend(step.events.iter().map(|d| (Some(rid), Some(stage_from), std::borrow::Cow::Borrowed(d))));
                    if step.to != stage_from {
                        let draft = $crate::domain::transition_event(stage_from, step.to, step.reason.as_deref(), worker);
                        audits.push((Some(rid), Some(step.to), std::borrow::Cow::Owned(draft)));
                    }
                    out[i] = Some(request);
                }
                // Their targets are free again, and a finished request executes nothing more.
                finish_requests(&mut tx, &finished).await?;
                insert_audits(&mut tx, &self.audit_key, now, &audits).await?;
                tx.commit().await?;
                Ok(out)
            }

            async fn release(&self, rid: uuid::Uuid, worker: &str) -> Result<()> {
                let _write = self.write_guard().await;
                sqlx::query(
                    "UPDATE remediation_requests SET claimed_by = NULL, lease_until = NULL \
                     WHERE id = $1 AND claimed_by = $2",
                )
                .bind(id(rid))
                .bind(worker)
                .execute(&self.writer)
                .await?;
                Ok(())
            }
        }

        #[async_trait::async_trait]
        impl $crate::store::Audit for $store {
            async fn audit_trail(&self, rid: uuid::Uuid) -> Result<Vec<AuditEvent>> {
                let rows = sqlx::query(
                    "SELECT id, request_id, at, phase, kind, actor, message, payload \
                     FROM audit_events WHERE request_id = $1 ORDER BY id",
                )
                .bind(id(rid))
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(audit_from_row).collect()
            }

            async fn audit_after(
                &self,
                rid: uuid::Uuid,
                after: i64,
                limit: i64,
            ) -> Result<Vec<AuditEvent>> {
                let rows = sqlx::query(
                    "SELECT id, request_id, at, phase, kind, actor, message, payload \
                     FROM audit_events WHERE request_id = $1 AND id > $2 ORDER BY id LIMIT $3",
                )
                .bind(id(rid))
                .bind(after)
                .bind(limit)
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(audit_from_row).collect()
            }

            async fn verify_request_chain(&self, rid: uuid::Uuid) -> Result<ChainReport> {
                let rows = sqlx::query(
                    "SELECT e.id, e.request_id, e.at, e.phase, e.kind, e.actor, e.message, \
                     e.payload, e.prev_hash, e.hash, e.key_id, \
                     (SELECT p.hash FROM audit_events p WHERE p.id < e.id \
                      ORDER BY p.id DESC LIMIT 1) AS actual_prev \
                     FROM audit_events e WHERE e.request_id = $1 ORDER BY e.id",
                )
                .bind(id(rid))
                .fetch_all(&self.pool)
                .await?;
                let rotations = rotations(&self.pool).await?;
                let mut verifier = Verifier::new(&self.audit_key, rotations);
                verify_rows(&mut verifier, &rows, None)?;
                Ok(verifier.report)
            }

            async fn verify_chain(&self) -> Result<ChainReport> {
                const BATCH: i64 = 5_000;
                let mut verifier = Verifier::whole_trail(&self.audit_key);
                let mut after = 0i64;
                let mut prev: Option<String> = None;
                loop {
                    let rows = sqlx::query(
                        "SELECT id, request_id, at, phase, kind, actor, message, payload, \
                         prev_hash, hash, key_id FROM audit_events WHERE id > $1 \
                         ORDER BY id LIMIT $2",
                    )
                    .bind(after)
                    .bind(BATCH)
                    .fetch_all(&self.pool)
                    .await?;
                    let Some(last) = rows.last() else { break };
                    after = last
                        .try_get("id")
                        .map_err(|e| corrupt("audit_events", e.to_string()))?;
                    if !verify_rows(&mut verifier, &rows, Some(&mut prev))? {
                        break;
                    }
                }
                verifier.finish();
                Ok(verifier.report)
            }

            async fn append_audit(
                &self,
                request_id: Option<uuid::Uuid>,
                phase: Option<Phase>,
                draft: &AuditDraft,
            ) -> Result<()> {
                let _write = self.write_guard().await;
                let mut tx: Tx = self.begin_audited().await?;
                insert_audit(&mut tx, &self.audit_key, request_id, phase, self.clock.now(), draft).await?;
                tx.commit().await?;
                Ok(())
            }

            async fn rotate_audit_key(&self, actor: &str) -> Result<Option<(String, String)>> {
                use $crate::store::chain::KEY_ROTATED;
                let new = self.audit_key.id().to_owned();
                let _write = self.write_guard().await;
                let mut tx: Tx = self.begin_audited().await?;
                // Under the chain's lock: two replicas started with the new keyring rotate once.
                if let Some(lock) = CHAIN_LOCK {
                    sqlx::query(lock).execute(&mut *tx).await?;
                }
                let recorded: Option<(String,)> =
                    sqlx::query_as("SELECT value FROM settings WHERE key = 'audit_key_id'")
                        .fetch_optional(&mut *tx)
                        .await?;
                let Some((old_id,)) = recorded else {
                    return Ok(None);
                };
                if old_id == new {
                    return Ok(None);
                }
                if rotations(&mut *tx).await?.iter().any(|r| r.old_key_id == new) {
                    return Err(StoreError::AuditKey(format!(
                        "key {new} was retired by an earlier rotation, and a retired key never \
                         signs again: give a new key first (the keys given are {})",
                        self.audit_key.describe()
                    )));
                }
                let Some(old) = self.audit_key.find(&old_id) else {
                    return Err(StoreError::AuditKey(format!(
                        "this database's audit trail is signed with key {old_id}, which is not \
                         among the keys given ({}): give the current key too, after the new one",
                        self.audit_key.describe()
                    )));
                };
                let draft = AuditDraft::new(
                    KEY_ROTATED,
                    actor,
                    format!("audit key {old_id} retired; key {new} signs the trail from here on"),
                )
                .with_payload(serde_json::json!({"old_key_id": old_id, "new_key_id": new}));
                // Signed with the key it retires: only its holder can hand the chain over.
                insert_audit(&mut tx, old, None, None, self.clock.now(), &draft).await?;
                sqlx::query("UPDATE settings SET value = $1 WHERE key = 'audit_key_id'")
                    .bind(&new)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(Some((old_id, new)))
            }
        }

        #[async_trait::async_trait]
        impl $crate::store::Auth for $store {
            async fn create_api_key(
                &self,
                key: &$crate::domain::ApiKey,
                key_hash: &str,
            ) -> Result<()> {
                let _write = self.write_guard().await;
                let mut tx: Tx = self.begin_audited().await?;
                sqlx::query(
                    "INSERT INTO api_keys (id, name, role, key_hash, prefix, created_at, created_by) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7)",
                )
                .bind(id(key.id))
                .bind($crate::store::storable_text(&key.name))
                .bind(key.role.as_str())
                .bind(key_hash)
                .bind(&key.prefix)
                .bind(ts(key.created_at))
                .bind($crate::store::storable_text(&key.created_by))
                .execute(&mut *tx)
                .await?;
                let draft = AuditDraft::new(
                    "apikey_created",
                    &key.created_by,
                    format!("API key `{}` created with role {}", key.name, key.role),
                )
                .with_payload(serde_json::json!({
                    "key_id": key.id, "name": key.name, "role": key.role, "prefix": key.prefix,
                }));
                insert_audit(&mut tx, &self.audit_key, None, None, self.clock.now(), &draft).await?;
                tx.commit().await?;
                Ok(())
            }

            async fn api_key_by_hash(&self, key_hash: &str) -> Result<Option<$crate::domain::ApiKey>> {
                let row = sqlx::query(
                    "SELECT id, name, role, prefix, created_at, created_by, revoked_at \
                     FROM api_keys WHERE key_hash = $1",
                )
                .bind(key_hash)
                .fetch_optional(&self.pool)
                .await?;
                row.as_ref().map(api_key_from_row).transpose()
            }

            async fn list_api_keys(&self) -> Result<Vec<$crate::domain::ApiKey>> {
                let rows = sqlx::query(
                    "SELECT id, name, role, prefix, created_at, created_by, revoked_at \
                     FROM api_keys ORDER BY created_at, name",
                )
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(api_key_from_row).collect()
            }

            async fn revoke_api_key(
                &self,
                name: &str,
                actor: &str,
            ) -> Result<Option<$crate::domain::ApiKey>> {
                let now = self.clock.now();
                let _write = self.write_guard().await;
                let mut tx: Tx = self.begin_audited().await?;
                let row = sqlx::query(
                    "UPDATE api_keys SET revoked_at = $1 WHERE name = $2 AND revoked_at IS NULL \
                     RETURNING id, name, role, prefix, created_at, created_by, revoked_at",
                )
                .bind(ts(now))
                .bind(name)
                .fetch_optional(&mut *tx)
                .await?;
                let Some(row) = row else {
                    tx.rollback().await?;
                    return Ok(None);
                };
                let key = api_key_from_row(&row)?;
                sqlx::query("DELETE FROM sessions WHERE key_id = $1")
                    .bind(id(key.id))
                    .execute(&mut *tx)
                    .await?;
                let draft = AuditDraft::new(
                    "apikey_revoked",
                    actor,
                    format!("API key `{}` ({}) revoked; its sessions ended", key.name, key.role),
                )
                .with_payload(serde_json::json!({"key_id": key.id, "name": key.name, "role": key.role}));
                insert_audit(&mut tx, &self.audit_key, None, None, now, &draft).await?;
                tx.commit().await?;
                Ok(Some(key))
            }

            async fn create_session(
                &self,
                token_hash: &str,
                session: &$crate::domain::Session,
            ) -> Result<()> {
                let _write = self.write_guard().await;
                let mut tx: Tx = self.writer.begin_with(BEGIN).await?;
                sqlx::query("DELETE FROM sessions WHERE expires_at < $1")
                    .bind(ts(self.clock.now()))
                    .execute(&mut *tx)
                    .await?;
                sqlx::query(
                    "INSERT INTO sessions (token_hash, subject, key_id, role, csrf, created_at, \
                     expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                )
                .bind(token_hash)
                .bind($crate::store::storable_text(&session.subject))
                .bind(session.key_id.map(id))
                .bind(session.role.as_str())
                .bind(&session.csrf)
                .bind(ts(session.created_at))
                .bind(ts(session.expires_at))
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(())
            }

            async fn session(&self, token_hash: &str) -> Result<Option<$crate::domain::Session>> {
                let row = sqlx::query(
                    "SELECT s.subject, s.key_id, s.role, s.csrf, s.created_at, s.expires_at \
                     FROM sessions s WHERE s.token_hash = $1 AND s.expires_at > $2 \
                     AND (s.key_id IS NULL OR EXISTS (SELECT 1 FROM api_keys k \
                          WHERE k.id = s.key_id AND k.revoked_at IS NULL))",
                )
                .bind(token_hash)
                .bind(ts(self.clock.now()))
                .fetch_optional(&self.pool)
                .await?;
                let Some(row) = row else { return Ok(None) };
                let get = |e: sqlx::Error| corrupt("sessions", e.to_string());
                let role: String = row.try_get("role").map_err(get)?;
                let key_id: Option<Id> = row.try_get("key_id").map_err(get)?;
                Ok(Some($crate::domain::Session {
                    subject: row.try_get("subject").map_err(get)?,
                    key_id: key_id.map(uuid_of),
                    role: $crate::domain::Role::parse(&role)
                        .ok_or_else(|| corrupt("sessions", format!("role `{role}`")))?,
                    csrf: row.try_get("csrf").map_err(get)?,
                    created_at: time_of(row.try_get("created_at").map_err(get)?)?,
                    expires_at: time_of(row.try_get("expires_at").map_err(get)?)?,
                }))
            }

            async fn delete_session(&self, token_hash: &str) -> Result<()> {
                let _write = self.write_guard().await;
                sqlx::query("DELETE FROM sessions WHERE token_hash = $1")
                    .bind(token_hash)
                    .execute(&self.writer)
                    .await?;
                Ok(())
            }
        }

        #[async_trait::async_trait]
        impl $crate::store::Approvals for $store {
            async fn create_approval(
                &self,
                approval: &$crate::domain::ApprovalRequest,
                notifications: &[$crate::domain::Notification],
            ) -> Result<$crate::domain::ApprovalRequest> {
                let _write = self.write_guard().await;
                let mut tx: Tx = self.begin_audited().await?;
                let inserted = sqlx::query(
                    "INSERT INTO approvals (id, request_id, status, created_at, expires_at, \
                     decided_at, record) VALUES ($1, $2, $3, $4, $5, NULL, $6) \
                     ON CONFLICT (request_id) DO NOTHING",
                )
                .bind(id(approval.id))
                .bind(id(approval.request_id))
                .bind(approval.status().as_str())
                .bind(ts(approval.created_at))
                .bind(ts(approval.expires_at))
                .bind($crate::store::storable_json(approval)?)
                .execute(&mut *tx)
                .await?
                .rows_affected()
                    == 1;
                if inserted {
                    for n in notifications {
                        insert_notification(&mut tx, n).await?;
                    }
                    let channels: Vec<String> = notifications
                        .iter()
                        .map(|n| format!("{} {}", n.channel, n.recipient))
                        .collect();
                    let draft = AuditDraft::new(
                        "approval_requested",
                        "approval",
                        format!(
                            "approval {} requested from {}; expires {}",
                            approval.id,
                            if channels.is_empty() {
                                "the API (no notification channel configured)".to_owned()
                            } else {
                                channels.join(", ")
                            },
                            approval.expires_at.to_rfc3339()
                        ),
                    )
                    .with_payload(serde_json::json!({
                        "approval_id": approval.id,
                        "expires_at": approval.expires_at,
                        "approvers": approval.approvers,
                        "slack_approvers": approval.slack_approvers,
                        "risk_score": approval.risk_score,
                        "policy_revision": approval.policy_revision,
                    }));
                    insert_audit(
                        &mut tx,
                        &self.audit_key,
                        Some(approval.request_id),
                        Some(Phase::AwaitingApproval),
                        self.clock.now(),
                        &draft,
                    )
                    .await?;
                }
                let row = sqlx::query(concat!(
                    "SELECT ",
                    approval_columns!(),
                    " FROM approvals WHERE request_id = $1"
                ))
                .bind(id(approval.request_id))
                .fetch_one(&mut *tx)
                .await?;
                tx.commit().await?;
                approval_from_row(&row)
            }

            async fn get_approval(
                &self,
                approval: uuid::Uuid,
            ) -> Result<Option<$crate::domain::ApprovalRequest>> {
                let row = sqlx::query(concat!(
                    "SELECT ",
                    approval_columns!(),
                    " FROM approvals WHERE id = $1"
                ))
                .bind(id(approval))
                .fetch_optional(&self.pool)
                .await?;
                row.as_ref().map(approval_from_row).transpose()
            }

            async fn approval_of_request(
                &self,
                request: uuid::Uuid,
            ) -> Result<Option<$crate::domain::ApprovalRequest>> {
                let row = sqlx::query(concat!(
                    "SELECT ",
                    approval_columns!(),
                    " FROM approvals WHERE request_id = $1"
                ))
                .bind(id(request))
                .fetch_optional(&self.pool)
                .await?;
                row.as_ref().map(approval_from_row).transpose()
            }

            async fn list_approvals(
                &self,
                status: Option<$crate::domain::ApprovalStatus>,
                limit: i64,
                offset: i64,
            ) -> Result<Page<$crate::domain::ApprovalRequest>> {
                // A status filter is a predicate only when given, so the inbox reads the
                // pending ones through `approvals_status` instead of scanning every approval.
                let (total, rows) = match status {
                    Some(status) => {
                        let (total,): (i64,) =
                            sqlx::query_as("SELECT count(*) FROM approvals WHERE status = $1")
                                .bind(status.as_str())
                                .fetch_one(&self.pool)
                                .await?;
                        let rows = sqlx::query(concat!(
                            "SELECT ",
                            approval_columns!(),
                            " FROM approvals WHERE status = $1 \
                             ORDER BY created_at DESC, id LIMIT $2 OFFSET $3"
                        ))
                        .bind(status.as_str())
                        .bind(limit)
                        .bind(offset)
                        .fetch_all(&self.pool)
                        .await?;
                        (total, rows)
                    }
                    None => {
                        let (total,): (i64,) = sqlx::query_as("SELECT count(*) FROM approvals")
                            .fetch_one(&self.pool)
                            .await?;
                        let rows = sqlx::query(concat!(
                            "SELECT ",
                            approval_columns!(),
                            " FROM approvals ORDER BY created_at DESC, id LIMIT $1 OFFSET $2"
                        ))
                        .bind(limit)
                        .bind(offset)
                        .fetch_all(&self.pool)
                        .await?;
                        (total, rows)
                    }
                };
                Ok(Page {
                    total,
                    items: rows.iter().map(approval_from_row).collect::<Result<_>>()?,
                })
            }

            async fn decide_approval(
                &self,
                approval: uuid::Uuid,
                decision: &$crate::domain::ApprovalDecision,
            ) -> Result<$crate::domain::DecideOutcome> {
                use $crate::domain::{DecideOutcome, DeliveryStatus, NotificationKind};
                let now = self.clock.now();
                let _write = self.write_guard().await;
                let mut tx: Tx = self.begin_audited().await?;
                let Some(row) = sqlx::query(concat!(
                    "SELECT ",
                    approval_columns!(),
                    " FROM approvals WHERE id = $1"
                ))
                .bind(id(approval))
                .fetch_optional(&mut *tx)
                .await?
                else {
                    return Ok(DecideOutcome::NotFound);
                };
                let mut current = approval_from_row(&row)?;
                // Fail closed: past its deadline, or once its request has ended some other
                // way, an approval can only expire — whatever decision arrives.
                let request_ended = current_phase(&mut tx, current.request_id)
                    .await?
                    .is_some_and(Phase::is_terminal);
                let late = now >= current.expires_at || request_ended;
                let mut decision = decision.clone();
                let refused_late = if current.decision.is_none()
                    && late
                    && decision.decision != $crate::domain::Decision::Expired
                {
                    let refused = decision.clone();
                    decision = $crate::domain::ApprovalDecision {
                        decision: $crate::domain::Decision::Expired,
                        decided_by: "system".into(),
                        decided_via: $crate::domain::Channel::System,
                        decided_at: now,
                        message: Some(if request_ended {
                            "the request ended before anyone decided".into()
                        } else {
                            "no decision before the deadline".into()
                        }),
                        alternative: None,
                    };
                    Some(refused)
                } else {
                    None
                };
                let decision = &decision;
                if let Some(first) = &current.decision {
                    let draft = AuditDraft::new(
                        "approval_decision_refused",
                        &decision.decided_by,
                        format!(
                            "{} via {} refused: already {} by {} via {}",
                            decision.decision,
                            decision.decided_via,
                            first.decision,
                            first.decided_by,
                            first.decided_via
                        ),
                    );
                    insert_audit(&mut tx, &self.audit_key, Some(current.request_id), None, now, &draft).await?;
                    tx.commit().await?;
                    return Ok(DecideOutcome::AlreadyDecided(current));
                }
                current.decision = Some(decision.clone());
                let updated = sqlx::query(
                    "UPDATE approvals SET status = $1, decided_at = $2, record = $3 \
                     WHERE id = $4 AND status = 'pending'",
                )
                .bind(current.status().as_str())
                .bind(ts(decision.decided_at))
                .bind($crate::store::storable_json(&current)?)
                .bind(id(approval))
                .execute(&mut *tx)
                .await?
                .rows_affected();
                if updated != 1 {
                    // Another replica decided between our read and our write (Postgres, read
                    // committed): theirs stands.
                    tx.rollback().await?;
                    return match self.get_approval(approval).await? {
                        Some(a) => Ok(DecideOutcome::AlreadyDecided(a)),
                        None => Ok(DecideOutcome::NotFound),
                    };
                }
                // Wake the request so its stage acts on the decision now.
                sqlx::query(
                    "UPDATE remediation_requests SET not_before = $1 \
                     WHERE id = $2 AND phase = 'AwaitingApproval'",
                )
                .bind(ts(now))
                .bind(id(current.request_id))
                .execute(&mut *tx)
                .await?;
                // No stale buttons: offers not yet out are cancelled, every delivered (or still
                // retrying) offer gets its outcome message.
                let offers = sqlx::query(concat!(
                    "SELECT ",
                    notification_columns!(),
                    " FROM notifications \
                     WHERE approval_id = $1 AND kind = 'offer'"
                ))
                .bind(id(approval))
                .fetch_all(&mut *tx)
                .await?;
                for offer in offers.iter().map(notification_from_row) {
                    let offer = offer?;
                    match offer.status {
                        DeliveryStatus::Delivered => {
                            let outcome = $crate::domain::Notification {
                                id: uuid::Uuid::new_v4(),
                                kind: NotificationKind::Outcome,
                                status: DeliveryStatus::Pending,
                                attempts: 0,
                                next_attempt_at: Some(now),
                                last_error: None,
                                created_at: now,
                                updated_at: now,
                                ..offer.clone()
                            };
                            insert_notification(&mut tx, &outcome).await?;
                        }
                        DeliveryStatus::Pending => {
                            sqlx::query(
                                "UPDATE notifications SET status = 'cancelled', \
                                 next_attempt_at = NULL, updated_at = $1 WHERE id = $2",
                            )
                            .bind(ts(now))
                            .bind(id(offer.id))
                            .execute(&mut *tx)
                            .await?;
                        }
                        DeliveryStatus::Failed | DeliveryStatus::Cancelled => {}
                    }
                }
                let mut message = format!(
                    "{} by {} via {}",
                    decision.decision, decision.decided_by, decision.decided_via
                );
                if let Some(alt) = &decision.alternative {
                    message.push_str(&format!(", choosing the alternative {alt}"));
                }
                if let Some(m) = decision.message.as_deref().filter(|m| !m.is_empty()) {
                    message.push_str(&format!(": {m}"));
                }
                let draft = AuditDraft::new("approval_decided", &decision.decided_by, message)
                    .with_payload(serde_json::json!({
                        "approval_id": approval,
                        "decision": decision,
                    }));
                insert_audit(
                    &mut tx,
                    &self.audit_key,
                    Some(current.request_id),
                    Some(Phase::AwaitingApproval),
                    now,
                    &draft,
                )
                .await?;
                if let Some(refused) = refused_late {
                    let draft = AuditDraft::new(
                        "approval_decision_refused",
                        &refused.decided_by,
                        format!(
                            "{} via {} refused: the approval expired first",
                            refused.decision, refused.decided_via
                        ),
                    );
                    insert_audit(&mut tx, &self.audit_key, Some(current.request_id), None, now, &draft).await?;
                    tx.commit().await?;
                    return Ok(DecideOutcome::AlreadyDecided(current));
                }
                tx.commit().await?;
                Ok(DecideOutcome::Decided(current))
            }

            async fn approval_not_executed(
                &self,
                request: uuid::Uuid,
                note: &str,
            ) -> Result<()> {
                use $crate::domain::{DeliveryStatus, NotificationKind};
                let now = self.clock.now();
                let _write = self.write_guard().await;
                let mut tx: Tx = self.begin_audited().await?;
                let Some(row) = sqlx::query(concat!(
                    "SELECT ",
                    approval_columns!(),
                    " FROM approvals WHERE request_id = $1"
                ))
                .bind(id(request))
                .fetch_optional(&mut *tx)
                .await?
                else {
                    tx.rollback().await?;
                    return Ok(());
                };
                let mut current = approval_from_row(&row)?;
                if current.note.as_deref() == Some(note) {
                    tx.rollback().await?;
                    return Ok(());
                }
                current.note = Some(note.to_owned());
                sqlx::query("UPDATE approvals SET record = $1 WHERE id = $2")
                    .bind($crate::store::storable_json(&current)?)
                    .bind(id(current.id))
                    .execute(&mut *tx)
                    .await?;
                let offers = sqlx::query(concat!(
                    "SELECT ",
                    notification_columns!(),
                    " FROM notifications \
                     WHERE approval_id = $1 AND kind = 'offer'"
                ))
                .bind(id(current.id))
                .fetch_all(&mut *tx)
                .await?;
                let mut told = 0;
                for offer in offers.iter().map(notification_from_row) {
                    let offer = offer?;
                    if offer.status != DeliveryStatus::Delivered {
                        continue;
                    }
                    let message = $crate::domain::Notification {
                        id: uuid::Uuid::new_v4(),
                        kind: NotificationKind::NotExecuted,
                        status: DeliveryStatus::Pending,
                        attempts: 0,
                        next_attempt_at: Some(now),
                        last_error: None,
                        created_at: now,
                        updated_at: now,
                        ..offer.clone()
                    };
                    insert_notification(&mut tx, &message).await?;
                    told += 1;
                }
                let draft = AuditDraft::new(
                    "approval_not_executed",
                    "executor",
                    format!("{note} ({told} approver message(s) queued)"),
                )
                .with_payload(serde_json::json!({"approval_id": current.id, "note": note}));
                insert_audit(&mut tx, &self.audit_key, Some(request), None, now, &draft).await?;
                tx.commit().await?;
                Ok(())
            }

            async fn consume_nonce(
                &self,
                nonce: &str,
                approval: Option<uuid::Uuid>,
            ) -> Result<bool> {
                let now = self.clock.now();
                let _write = self.write_guard().await;
                let mut tx: Tx = self.writer.begin_with(BEGIN).await?;
                // Nonces nothing can replay any more go as a new one comes in (sessions are
                // pruned the same way), a day after their use: one without an approval (a
                // Slack signature) is refused by its timestamp five minutes on; a link whose
                // approval is decided or expired is refused by the approval.
                sqlx::query(
                    "DELETE FROM used_nonces WHERE used_at < $1 AND (approval_id IS NULL \
                     OR approval_id IN (SELECT id FROM approvals WHERE status <> 'pending'))",
                )
                .bind(ts(now - chrono::Duration::days(1)))
                .execute(&mut *tx)
                .await?;
                let inserted = sqlx::query(
                    "INSERT INTO used_nonces (nonce, approval_id, used_at) VALUES ($1, $2, $3) \
                     ON CONFLICT (nonce) DO NOTHING",
                )
                .bind($crate::store::storable_text(nonce))
                .bind(approval.map(id))
                .bind(ts(now))
                .execute(&mut *tx)
                .await?
                .rows_affected();
                tx.commit().await?;
                Ok(inserted == 1)
            }

            async fn claim_notification(
                &self,
                lease: std::time::Duration,
            ) -> Result<Option<$crate::domain::Notification>> {
                let now = self.clock.now();
                let until = now + chrono::Duration::from_std(lease).unwrap_or(chrono::Duration::seconds(60));
                let _write = self.write_guard().await;
                let row = sqlx::query(concat!(
                    "UPDATE notifications SET next_attempt_at = $1 \
                     WHERE id = (SELECT id FROM notifications WHERE status = 'pending' \
                     AND next_attempt_at <= $2 ORDER BY next_attempt_at LIMIT 1) \
                     AND status = 'pending' AND next_attempt_at <= $2 \
                     RETURNING ",
                    notification_columns!(),
                    ""
                ))
                .bind(ts(until))
                .bind(ts(now))
                .fetch_optional(&self.writer)
                .await?;
                row.as_ref().map(notification_from_row).transpose()
            }

            async fn finish_notification(
                &self,
                notification: uuid::Uuid,
                result: &$crate::store::DeliveryResult,
                audit: &AuditDraft,
            ) -> Result<()> {
                use $crate::store::DeliveryResult;
                let now = self.clock.now();
                let (status, next, error, external) = match result {
                    DeliveryResult::Delivered { external_ref } => {
                        ("delivered", None, None, external_ref.as_ref())
                    }
                    DeliveryResult::Retry { error, at } => ("pending", Some(ts(*at)), Some(error), None),
                    DeliveryResult::GaveUp { error } => ("failed", None, Some(error), None),
                    DeliveryResult::Cancelled { reason } => ("cancelled", None, Some(reason), None),
                };
                let _write = self.write_guard().await;
                let mut tx: Tx = self.begin_audited().await?;
                let row: Option<(Id,)> = sqlx::query_as(
                    "SELECT a.request_id FROM notifications n JOIN approvals a \
                     ON a.id = n.approval_id WHERE n.id = $1",
                )
                .bind(id(notification))
                .fetch_optional(&mut *tx)
                .await?;
                sqlx::query(
                    "UPDATE notifications SET \
                     status = CASE WHEN status = 'cancelled' THEN status ELSE $1 END, \
                     attempts = attempts + 1, \
                     next_attempt_at = CASE WHEN status = 'cancelled' THEN NULL ELSE $2 END, \
                     last_error = $3, \
                     external_ref = COALESCE($4, external_ref), updated_at = $5 WHERE id = $6",
                )
                .bind(status)
                .bind(next)
                .bind(error.map(|e| $crate::store::storable_text(e)))
                .bind(external.map($crate::store::storable_value))
                .bind(ts(now))
                .bind(id(notification))
                .execute(&mut *tx)
                .await?;
                insert_audit(&mut tx, &self.audit_key, row.map(|(r,)| uuid_of(r)), None, now, audit).await?;
                tx.commit().await?;
                Ok(())
            }

            async fn notifications(
                &self,
                approval: uuid::Uuid,
            ) -> Result<Vec<$crate::domain::Notification>> {
                let rows = sqlx::query(concat!(
                    "SELECT ",
                    notification_columns!(),
                    " FROM notifications WHERE approval_id = $1 \
                     ORDER BY created_at, kind, channel, recipient"
                ))
                .bind(id(approval))
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(notification_from_row).collect()
            }
        }

        #[async_trait::async_trait]
        impl $crate::store::Execution for $store {
            async fn acquire_execution_lock(
                &self,
                target_fingerprint: &str,
                namespace: Option<&str>,
                request: uuid::Uuid,
            ) -> Result<ExecutionLock> {
                let _write = self.write_guard().await;
                let mut tx: Tx = self.writer.begin_with(BEGIN).await?;
                sqlx::query(
                    "INSERT INTO execution_locks (target_fingerprint, request_id, namespace, \
                     acquired_at) VALUES ($1, $2, $3, $4) \
                     ON CONFLICT (target_fingerprint) DO NOTHING",
                )
                .bind(target_fingerprint)
                .bind(id(request))
                .bind(namespace)
                .bind(ts(self.clock.now()))
                .execute(&mut *tx)
                .await?;
                let row = sqlx::query(
                    "SELECT target_fingerprint, request_id, namespace, acquired_at \
                     FROM execution_locks WHERE target_fingerprint = $1",
                )
                .bind(target_fingerprint)
                .fetch_one(&mut *tx)
                .await?;
                tx.commit().await?;
                lock_from_row(&row)
            }

            async fn execution_locks(&self, namespace: Option<&str>) -> Result<Vec<ExecutionLock>> {
                let rows = sqlx::query(
                    "SELECT target_fingerprint, request_id, namespace, acquired_at \
                     FROM execution_locks WHERE ($1 IS NULL OR namespace = $1) \
                     ORDER BY acquired_at",
                )
                .bind(namespace)
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(lock_from_row).collect()
            }

            async fn begin_intent(
                &self,
                request: uuid::Uuid,
                step: i32,
                action: &str,
                detail: &serde_json::Value,
            ) -> Result<(Intent, bool)> {
                let now = self.clock.now();
                let _write = self.write_guard().await;
                let mut tx: Tx = self.writer.begin_with(BEGIN).await?;
                // Every write to the cluster is preceded by its intent: a replica whose audit
                // key was rotated out while a stage ran makes no further write.
                let recorded: Option<(String,)> =
                    sqlx::query_as("SELECT value FROM settings WHERE key = 'audit_key_id'")
                        .fetch_optional(&mut *tx)
                        .await?;
                if let Some((key,)) = recorded
                    && key != self.audit_key.id()
                {
                    return Err(StoreError::AuditKey(format!(
                        "the audit trail is now signed with key {key}, not with this daemon's \
                         key {}: no step is started; restart this daemon with the current keyring",
                        self.audit_key.id()
                    )));
                }
                let inserted = sqlx::query(
                    "INSERT INTO execution_intents (request_id, step, action, status, detail, \
                     created_at, updated_at) VALUES ($1, $2, $3, 'started', $4, $5, $5) \
                     ON CONFLICT (request_id, step) DO NOTHING",
                )
                .bind(id(request))
                .bind(step)
                .bind(action)
                .bind($crate::store::storable_value(detail))
                .bind(ts(now))
                .execute(&mut *tx)
                .await?
                .rows_affected()
                    == 1;
                let row = sqlx::query(
                    "SELECT request_id, step, action, status, detail, created_at, updated_at \
                     FROM execution_intents WHERE request_id = $1 AND step = $2",
                )
                .bind(id(request))
                .bind(step)
                .fetch_one(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok((intent_from_row(&row)?, inserted))
            }

            async fn finish_intent(
                &self,
                request: uuid::Uuid,
                step: i32,
                status: IntentStatus,
                detail: &serde_json::Value,
            ) -> Result<()> {
                let _write = self.write_guard().await;
                sqlx::query(
                    "UPDATE execution_intents SET status = $1, detail = $2, updated_at = $3 \
                     WHERE request_id = $4 AND step = $5",
                )
                .bind(status.as_str())
                .bind($crate::store::storable_value(detail))
                .bind(ts(self.clock.now()))
                .bind(id(request))
                .bind(step)
                .execute(&self.writer)
                .await?;
                Ok(())
            }

            async fn intents(&self, request: uuid::Uuid) -> Result<Vec<Intent>> {
                let rows = sqlx::query(
                    "SELECT request_id, step, action, status, detail, created_at, updated_at \
                     FROM execution_intents WHERE request_id = $1 ORDER BY step",
                )
                .bind(id(request))
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(intent_from_row).collect()
            }
        }

        #[async_trait::async_trait]
        impl $crate::store::History for $store {
            async fn record_history(
                &self,
                record: &$crate::domain::HistoryRecord,
            ) -> Result<()> {
                let rid = uuid::Uuid::parse_str(&record.remediation_uid).map_err(|e| {
                    corrupt("remediation_history", format!("remediation uid: {e}"))
                })?;
                let _write = self.write_guard().await;
                sqlx::query(
                    "INSERT INTO remediation_history (request_id, target_fingerprint, \
                     completed_at, record) VALUES ($1, $2, $3, $4) \
                     ON CONFLICT (request_id) DO NOTHING",
                )
                .bind(id(rid))
                .bind(record.target.fingerprint())
                .bind(ts(record.completed_at))
                .bind($crate::store::storable_json(record)?)
                .execute(&self.writer)
                .await?;
                Ok(())
            }

            async fn history(
                &self,
                target_fingerprint: &str,
                since: chrono::DateTime<chrono::Utc>,
            ) -> Result<Vec<$crate::domain::HistoryRecord>> {
                let rows: Vec<(Json<$crate::domain::HistoryRecord>,)> = sqlx::query_as(
                    "SELECT record FROM remediation_history \
                     WHERE target_fingerprint = $1 AND completed_at >= $2 \
                     ORDER BY completed_at, request_id",
                )
                .bind(target_fingerprint)
                .bind(ts(since))
                .fetch_all(&self.pool)
                .await?;
                Ok(rows.into_iter().map(|(r,)| r.0).collect())
            }
        }
    };
}
pub(super) use sql_store;

#[cfg(test)]
mod tests {
    use crate::domain::Phase;

    #[test]
    fn runnable_list_matches_the_state_machine() {
        let sql: &str = runnable_phases!();
        for p in Phase::ALL {
            assert_eq!(
                sql.contains(&format!("'{}'", p.as_str())),
                p.is_runnable(),
                "{p}"
            );
        }
    }
}
