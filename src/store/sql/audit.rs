//! [`Audit`](crate::store::Audit): the hash-chained trail, how events are appended to it and
//! how it is checked.

use std::borrow::Cow;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::dialect::Dialect;
use super::facade::{Arg as _, Col as _, Conn as _, query_as};
use super::{AuditRow, Audited, DbRow, SqlStore, Tx};
use crate::domain::{AuditDraft, AuditEvent, Phase};
use crate::store::chain::{
    AuditKey, ChainReport, ChainRow, KEY_ROTATED, Rotation, StoredLink, Verifier,
};
use crate::store::{
    Audit, BellStatus, Result, StoreError, TrailWatch, corrupt, storable_text, storable_value,
};

/// The last audit event as the next one needs it: its hash, the key that signed it, its kind,
/// and the key a rotation handed the chain to.
type ChainHead = (Option<String>, Option<String>, String, Option<String>);

impl<D: Dialect> SqlStore<D> {
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
    pub(super) async fn chain_head(tx: &mut Tx<D>, key: &AuditKey) -> Result<Option<String>> {
        if let Some(lock) = D::CHAIN_LOCK {
            sqlx::query(lock).execute(tx.conn()).await?;
        }
        // (`payload ->> 'x'` reads a JSON field on both databases.)
        let row: Option<ChainHead> = query_as(
            "SELECT hash, key_id, kind, CASE WHEN kind = 'key_rotated' \
             THEN payload ->> 'new_key_id' END FROM audit_events ORDER BY id DESC LIMIT 1",
        )
        .fetch_optional(tx.conn())
        .await?;
        let Some((hash, signer, kind, handed_to)) = row else {
            return Ok(None);
        };
        let ours = key.id();
        let allowed = match (signer.as_deref(), kind.as_str()) {
            // Written before the chain existed, or before events carried their key's id.
            (None, _) => true,
            (Some(_), KEY_ROTATED) => handed_to.as_deref() == Some(ours),
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
    pub(super) async fn rotations<'e, E>(db: E) -> Result<Vec<Rotation>>
    where
        E: sqlx::Executor<'e, Database = D::Db>,
    {
        let rows: Vec<(i64, Option<String>, Option<String>)> = query_as(
            "SELECT id, payload ->> 'old_key_id', payload ->> 'new_key_id' FROM audit_events \
             WHERE kind = 'key_rotated' ORDER BY id",
        )
        .fetch_all(db)
        .await?;
        rows.into_iter()
            .map(|(id, old, new)| match (old, new) {
                (Some(old_key_id), Some(new_key_id)) => Ok(Rotation {
                    event_id: id,
                    old_key_id,
                    new_key_id,
                }),
                _ => Err(corrupt(
                    "audit_events",
                    format!("key rotation event {id} names no keys"),
                )),
            })
            .collect()
    }

    /// The chain columns of one event about to be written after `prev`.
    pub(super) fn chain_link(
        key: &AuditKey,
        prev: Option<&str>,
        request_id: Option<Uuid>,
        phase: Option<Phase>,
        at: DateTime<Utc>,
        draft: &AuditDraft,
    ) -> String {
        let rid = request_id.map(|r| r.hyphenated().to_string());
        let message = storable_text(&draft.message);
        let payload = storable_value(&draft.payload);
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
    pub(super) fn to_micros(t: DateTime<Utc>) -> DateTime<Utc> {
        DateTime::from_timestamp_micros(t.timestamp_micros()).unwrap_or(t)
    }

    pub(super) async fn insert_audit(
        tx: &mut Audited<D>,
        key: &AuditKey,
        request_id: Option<Uuid>,
        phase: Option<Phase>,
        at: DateTime<Utc>,
        draft: &AuditDraft,
    ) -> Result<()> {
        tx.grows(request_id);
        let at = Self::to_micros(at);
        let prev = Self::chain_head(tx, key).await?;
        let hash = Self::chain_link(key, prev.as_deref(), request_id, phase, at, draft);
        sqlx::query(
            "INSERT INTO audit_events (request_id, at, phase, kind, actor, message, payload, \
             prev_hash, hash, key_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .arg(request_id.map(D::id))
        .arg(D::ts(at))
        .arg(phase.map(Phase::as_str))
        .arg(&draft.kind)
        .arg(&draft.actor)
        .arg(storable_text(&draft.message))
        .arg(storable_value(&draft.payload))
        .arg(prev)
        .arg(hash)
        .arg(key.id())
        .execute(tx.conn())
        .await?;
        Ok(())
    }

    /// Append `events` (request, phase, draft), in order, all at `at`, to the chain: one
    /// read of the chain's head, each link computed in memory, then the backend's bulk
    /// write (`write_audits`). Call inside a transaction opened with `begin_audited`, after
    /// its other writes.
    pub(super) async fn insert_audits(
        tx: &mut Audited<D>,
        key: &AuditKey,
        at: DateTime<Utc>,
        events: &[(Option<Uuid>, Option<Phase>, Cow<'_, AuditDraft>)],
    ) -> Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        for (rid, _, _) in events {
            tx.grows(*rid);
        }
        let at = Self::to_micros(at);
        let mut head = Self::chain_head(tx, key).await?;
        let rows: Vec<AuditRow<'_>> = events
            .iter()
            .map(|(rid, phase, d)| {
                let hash = Self::chain_link(key, head.as_deref(), *rid, *phase, at, d);
                AuditRow {
                    request_id: *rid,
                    phase: *phase,
                    draft: d,
                    prev: head.replace(hash.clone()),
                    hash,
                }
            })
            .collect();
        D::write_audits(tx, key.id(), at, &rows).await
    }

    /// Check a run of stored events into `verifier`. The hash stored before each event is
    /// the row's `actual_prev` column, or, when the rows are the whole table in order
    /// (`sequential`), the previous row's hash (carried across calls).
    pub(super) fn verify_rows(
        verifier: &mut Verifier<'_>,
        rows: &[DbRow<D>],
        mut sequential: Option<&mut Option<String>>,
    ) -> Result<bool> {
        let get = |e: sqlx::Error| corrupt("audit_events", e.to_string());
        for row in rows {
            let event = Self::audit_from_row(row)?;
            let prev_hash: Option<String> = row.col("prev_hash").map_err(get)?;
            let hash: Option<String> = row.col("hash").map_err(get)?;
            let key_id: Option<String> = row.col("key_id").map_err(get)?;
            let actual_prev: Option<String> = match sequential.as_deref_mut() {
                Some(prev) => std::mem::replace(prev, hash.clone()),
                None => row.col("actual_prev").map_err(get)?,
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
}

#[async_trait]
impl<D: Dialect> Audit for SqlStore<D> {
    async fn audit_trail(&self, rid: Uuid) -> Result<Vec<AuditEvent>> {
        let rows = sqlx::query(
            "SELECT id, request_id, at, phase, kind, actor, message, payload \
             FROM audit_events WHERE request_id = $1 ORDER BY id",
        )
        .arg(D::id(rid))
        .fetch_all(self.reads())
        .await?;
        rows.iter().map(Self::audit_from_row).collect()
    }

    async fn audit_after(&self, rid: Uuid, after: i64, limit: i64) -> Result<Vec<AuditEvent>> {
        let rows = sqlx::query(
            "SELECT id, request_id, at, phase, kind, actor, message, payload \
             FROM audit_events WHERE request_id = $1 AND id > $2 ORDER BY id LIMIT $3",
        )
        .arg(D::id(rid))
        .arg(after)
        .arg(limit)
        .fetch_all(self.reads())
        .await?;
        rows.iter().map(Self::audit_from_row).collect()
    }

    async fn audit_of_kind(&self, kind: &str, limit: i64) -> Result<Vec<AuditEvent>> {
        let rows = sqlx::query(
            "SELECT id, request_id, at, phase, kind, actor, message, payload \
             FROM audit_events WHERE request_id IS NULL AND kind = $1 ORDER BY id DESC LIMIT $2",
        )
        .arg(kind)
        .arg(limit)
        .fetch_all(self.reads())
        .await?;
        rows.iter().map(Self::audit_from_row).collect()
    }

    fn watch_trail(&self) -> TrailWatch {
        self.bell.watch()
    }

    fn trail_bell(&self) -> BellStatus {
        self.bell.status()
    }

    async fn notification_queue_usage(&self) -> Result<Option<f64>> {
        let Some(sql) = D::NOTIFY_QUEUE_USAGE else {
            return Ok(None);
        };
        let (text,): (String,) = query_as(sql).fetch_one(self.reads()).await?;
        text.trim()
            .parse()
            .map(Some)
            .map_err(|e| corrupt("pg_notification_queue_usage", format!("{text:?}: {e}")))
    }

    async fn changed_requests(&self, after: i64, limit: i64) -> Result<Vec<(i64, Uuid)>> {
        // The primary key bounds the scan to the events after the watermark.
        let rows = sqlx::query(
            "SELECT MAX(id) AS last, request_id FROM audit_events \
             WHERE id > $1 AND request_id IS NOT NULL \
             GROUP BY request_id ORDER BY last LIMIT $2",
        )
        .arg(after)
        .arg(limit)
        .fetch_all(self.reads())
        .await?;
        let get = |e: sqlx::Error| corrupt("audit_events", e.to_string());
        rows.iter()
            .map(|row| {
                let last: i64 = row.col("last").map_err(get)?;
                let id: D::Id = row.col("request_id").map_err(get)?;
                Ok((last, D::uuid_of(id)))
            })
            .collect()
    }

    async fn audit_head(&self) -> Result<i64> {
        let (head,): (i64,) = query_as("SELECT COALESCE(MAX(id), 0) FROM audit_events")
            .fetch_one(self.reads())
            .await?;
        Ok(head)
    }

    async fn verify_request_chain(&self, rid: Uuid) -> Result<ChainReport> {
        let rows = sqlx::query(
            "SELECT e.id, e.request_id, e.at, e.phase, e.kind, e.actor, e.message, \
             e.payload, e.prev_hash, e.hash, e.key_id, \
             (SELECT p.hash FROM audit_events p WHERE p.id < e.id \
             ORDER BY p.id DESC LIMIT 1) AS actual_prev \
             FROM audit_events e WHERE e.request_id = $1 ORDER BY e.id",
        )
        .arg(D::id(rid))
        .fetch_all(self.reads())
        .await?;
        let rotations = Self::rotations(self.reads()).await?;
        let mut verifier = Verifier::new(&self.audit_key, rotations);
        Self::verify_rows(&mut verifier, &rows, None)?;
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
            .arg(after)
            .arg(BATCH)
            .fetch_all(self.reads())
            .await?;
            let Some(last) = rows.last() else { break };
            after = last
                .col("id")
                .map_err(|e| corrupt("audit_events", e.to_string()))?;
            if !Self::verify_rows(&mut verifier, &rows, Some(&mut prev))? {
                break;
            }
        }
        verifier.finish();
        Ok(verifier.report)
    }

    async fn append_audit(
        &self,
        request_id: Option<Uuid>,
        phase: Option<Phase>,
        draft: &AuditDraft,
    ) -> Result<()> {
        let _write = self.write_guard().await;
        let mut tx = self.begin_audited().await?;
        Self::insert_audit(
            &mut tx,
            &self.audit_key,
            request_id,
            phase,
            self.clock.now(),
            draft,
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn rotate_audit_key(&self, actor: &str) -> Result<Option<(String, String)>> {
        let new = self.audit_key.id().to_owned();
        let _write = self.write_guard().await;
        let mut tx = self.begin_audited().await?;
        // Under the chain's lock: two replicas started with the new keyring rotate once.
        if let Some(lock) = D::CHAIN_LOCK {
            sqlx::query(lock).execute(tx.conn()).await?;
        }
        let recorded: Option<(String,)> =
            query_as("SELECT value FROM settings WHERE key = 'audit_key_id'")
                .fetch_optional(tx.conn())
                .await?;
        let Some((old_id,)) = recorded else {
            return Ok(None);
        };
        if old_id == new {
            return Ok(None);
        }
        if Self::rotations(tx.conn())
            .await?
            .iter()
            .any(|r| r.old_key_id == new)
        {
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
        Self::insert_audit(&mut tx, old, None, None, self.clock.now(), &draft).await?;
        sqlx::query("UPDATE settings SET value = $1 WHERE key = 'audit_key_id'")
            .arg(&new)
            .execute(tx.conn())
            .await?;
        tx.commit().await?;
        Ok(Some((old_id, new)))
    }
}
