//! [`Approvals`](crate::store::Approvals): approvals, single-use tokens and the notifications
//! that offer them.

use std::time::Duration;

use async_trait::async_trait;
use uuid::Uuid;

use super::dialect::Dialect;
use super::facade::{Arg as _, Conn as _, RowsAffected as _, query_as};
use super::{SqlStore, Tx, approval_columns, notification_columns};
use crate::domain::audit;
use crate::domain::{
    ApprovalDecision, ApprovalRequest, ApprovalStatus, AuditDraft, Channel, DecideOutcome,
    Decision, Notification, Phase,
};
use crate::store::{
    Approvals, DeliveryResult, Page, Result, storable_json, storable_text, storable_value,
};

impl<D: Dialect> SqlStore<D> {
    pub(super) async fn insert_notification(tx: &mut Tx<D>, n: &Notification) -> Result<()> {
        sqlx::query(
            "INSERT INTO notifications (id, approval_id, channel, recipient, kind, status, \
             attempts, next_attempt_at, last_error, external_ref, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) \
             ON CONFLICT (approval_id, channel, recipient, kind) DO NOTHING",
        )
        .arg(D::id(n.id))
        .arg(D::id(n.approval_id))
        .arg(n.channel.as_str())
        .arg(storable_text(&n.recipient))
        .arg(n.kind.as_str())
        .arg(n.status.as_str())
        .arg(n.attempts)
        .arg(n.next_attempt_at.map(D::ts))
        .arg(n.last_error.as_deref().map(storable_text))
        .arg(n.external_ref.as_ref().map(storable_value))
        .arg(D::ts(n.created_at))
        .arg(D::ts(n.updated_at))
        .execute(tx.conn())
        .await?;
        Ok(())
    }

    /// Keep `note` on the approval of `request` and queue a `kind` message with it to every
    /// recipient its offer reached, audited as `audit_kind`, in one transaction. A request
    /// without an approval (auto-approved) changes nothing.
    async fn follow_up(
        &self,
        request: Uuid,
        note: &str,
        kind: crate::domain::NotificationKind,
        audit_kind: &str,
        actor: &str,
    ) -> Result<()> {
        use crate::domain::DeliveryStatus;
        let now = self.clock.now();
        let _write = self.write_guard().await;
        let mut tx = self.begin_audited().await?;
        let Some(row) = sqlx::query(concat!(
            "SELECT ",
            approval_columns!(),
            " FROM approvals WHERE request_id = $1"
        ))
        .arg(D::id(request))
        .fetch_optional(tx.conn())
        .await?
        else {
            tx.rollback().await?;
            return Ok(());
        };
        let mut current = Self::approval_from_row(&row)?;
        if current.note.as_deref() == Some(note) {
            tx.rollback().await?;
            return Ok(());
        }
        current.note = Some(note.to_owned());
        sqlx::query("UPDATE approvals SET record = $1 WHERE id = $2")
            .arg(storable_json(&current)?)
            .arg(D::id(current.id))
            .execute(tx.conn())
            .await?;
        let offers = sqlx::query(concat!(
            "SELECT ",
            notification_columns!(),
            " FROM notifications \
             WHERE approval_id = $1 AND kind = 'offer'"
        ))
        .arg(D::id(current.id))
        .fetch_all(tx.conn())
        .await?;
        let mut told = 0;
        for offer in offers.iter().map(Self::notification_from_row) {
            let offer = offer?;
            if offer.status != DeliveryStatus::Delivered {
                continue;
            }
            let message = Notification {
                id: Uuid::new_v4(),
                kind,
                status: DeliveryStatus::Pending,
                attempts: 0,
                next_attempt_at: Some(now),
                last_error: None,
                created_at: now,
                updated_at: now,
                ..offer.clone()
            };
            Self::insert_notification(&mut tx, &message).await?;
            told += 1;
        }
        let draft = AuditDraft::new(
            audit_kind,
            actor,
            format!("{note} ({told} approver message(s) queued)"),
        )
        .with_payload(
            serde_json::to_value(audit::FollowUpPayload {
                approval_id: current.id,
                note: note.to_owned(),
            })
            .unwrap_or_default(),
        );
        Self::insert_audit(&mut tx, &self.audit_key, Some(request), None, now, &draft).await?;
        tx.commit().await?;
        Ok(())
    }
}

#[async_trait]
impl<D: Dialect> Approvals for SqlStore<D> {
    async fn create_approval(
        &self,
        approval: &ApprovalRequest,
        notifications: &[Notification],
    ) -> Result<ApprovalRequest> {
        let _write = self.write_guard().await;
        let mut tx = self.begin_audited().await?;
        let inserted = sqlx::query(
            "INSERT INTO approvals (id, request_id, status, created_at, expires_at, \
             decided_at, record) VALUES ($1, $2, $3, $4, $5, NULL, $6) \
             ON CONFLICT (request_id) DO NOTHING",
        )
        .arg(D::id(approval.id))
        .arg(D::id(approval.request_id))
        .arg(approval.status().as_str())
        .arg(D::ts(approval.created_at))
        .arg(D::ts(approval.expires_at))
        .arg(storable_json(approval)?)
        .execute(tx.conn())
        .await?
        .rows_affected()
            == 1;
        if inserted {
            for n in notifications {
                Self::insert_notification(&mut tx, n).await?;
            }
            let channels: Vec<String> = notifications
                .iter()
                .map(|n| format!("{} {}", n.channel, n.recipient))
                .collect();
            let draft = AuditDraft::new(
                audit::APPROVAL_REQUESTED,
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
            Self::insert_audit(
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
        .arg(D::id(approval.request_id))
        .fetch_one(tx.conn())
        .await?;
        tx.commit().await?;
        Self::approval_from_row(&row)
    }

    async fn get_approval(&self, approval: Uuid) -> Result<Option<ApprovalRequest>> {
        let row = sqlx::query(concat!(
            "SELECT ",
            approval_columns!(),
            " FROM approvals WHERE id = $1"
        ))
        .arg(D::id(approval))
        .fetch_optional(self.reads())
        .await?;
        row.as_ref().map(Self::approval_from_row).transpose()
    }

    async fn approval_of_request(&self, request: Uuid) -> Result<Option<ApprovalRequest>> {
        let row = sqlx::query(concat!(
            "SELECT ",
            approval_columns!(),
            " FROM approvals WHERE request_id = $1"
        ))
        .arg(D::id(request))
        .fetch_optional(self.reads())
        .await?;
        row.as_ref().map(Self::approval_from_row).transpose()
    }

    async fn list_approvals(
        &self,
        status: Option<ApprovalStatus>,
        limit: i64,
        offset: i64,
    ) -> Result<Page<ApprovalRequest>> {
        // A status filter is a predicate only when given, so the inbox reads the
        // pending ones through `approvals_status` instead of scanning every approval.
        let (total, rows) = match status {
            Some(status) => {
                let (total,): (i64,) = query_as("SELECT count(*) FROM approvals WHERE status = $1")
                    .arg(status.as_str())
                    .fetch_one(self.reads())
                    .await?;
                let rows = sqlx::query(concat!(
                    "SELECT ",
                    approval_columns!(),
                    " FROM approvals WHERE status = $1 \
                     ORDER BY created_at DESC, id LIMIT $2 OFFSET $3"
                ))
                .arg(status.as_str())
                .arg(limit)
                .arg(offset)
                .fetch_all(self.reads())
                .await?;
                (total, rows)
            }
            None => {
                let (total,): (i64,) = query_as("SELECT count(*) FROM approvals")
                    .fetch_one(self.reads())
                    .await?;
                let rows = sqlx::query(concat!(
                    "SELECT ",
                    approval_columns!(),
                    " FROM approvals ORDER BY created_at DESC, id LIMIT $1 OFFSET $2"
                ))
                .arg(limit)
                .arg(offset)
                .fetch_all(self.reads())
                .await?;
                (total, rows)
            }
        };
        Ok(Page {
            total,
            items: rows
                .iter()
                .map(Self::approval_from_row)
                .collect::<Result<_>>()?,
        })
    }

    async fn decide_approval(
        &self,
        approval: Uuid,
        decision: &ApprovalDecision,
    ) -> Result<DecideOutcome> {
        use crate::domain::{DecideOutcome, DeliveryStatus, NotificationKind};
        let now = self.clock.now();
        let _write = self.write_guard().await;
        let mut tx = self.begin_audited().await?;
        let Some(row) = sqlx::query(concat!(
            "SELECT ",
            approval_columns!(),
            " FROM approvals WHERE id = $1"
        ))
        .arg(D::id(approval))
        .fetch_optional(tx.conn())
        .await?
        else {
            return Ok(DecideOutcome::NotFound);
        };
        let mut current = Self::approval_from_row(&row)?;
        // Fail closed: past its deadline, or once its request has ended some other
        // way, an approval can only expire — whatever decision arrives.
        let request_ended = Self::current_phase(&mut tx, current.request_id)
            .await?
            .is_some_and(Phase::is_terminal);
        let late = now >= current.expires_at || request_ended;
        let mut decision = decision.clone();
        let refused_late =
            if current.decision.is_none() && late && decision.decision != Decision::Expired {
                let refused = decision.clone();
                decision = ApprovalDecision {
                    decision: Decision::Expired,
                    decided_by: "system".into(),
                    decided_via: Channel::System,
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
                crate::domain::audit::APPROVAL_DECISION_REFUSED,
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
            Self::insert_audit(
                &mut tx,
                &self.audit_key,
                Some(current.request_id),
                None,
                now,
                &draft,
            )
            .await?;
            tx.commit().await?;
            return Ok(DecideOutcome::AlreadyDecided(current));
        }
        current.decision = Some(decision.clone());
        let updated = sqlx::query(
            "UPDATE approvals SET status = $1, decided_at = $2, record = $3 \
             WHERE id = $4 AND status = 'pending'",
        )
        .arg(current.status().as_str())
        .arg(D::ts(decision.decided_at))
        .arg(storable_json(&current)?)
        .arg(D::id(approval))
        .execute(tx.conn())
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
        .arg(D::ts(now))
        .arg(D::id(current.request_id))
        .execute(tx.conn())
        .await?;
        // No stale buttons: offers not yet out are cancelled, every delivered (or still
        // retrying) offer gets its outcome message.
        let offers = sqlx::query(concat!(
            "SELECT ",
            notification_columns!(),
            " FROM notifications \
             WHERE approval_id = $1 AND kind = 'offer'"
        ))
        .arg(D::id(approval))
        .fetch_all(tx.conn())
        .await?;
        for offer in offers.iter().map(Self::notification_from_row) {
            let offer = offer?;
            match offer.status {
                DeliveryStatus::Delivered => {
                    let outcome = Notification {
                        id: Uuid::new_v4(),
                        kind: NotificationKind::Outcome,
                        status: DeliveryStatus::Pending,
                        attempts: 0,
                        next_attempt_at: Some(now),
                        last_error: None,
                        created_at: now,
                        updated_at: now,
                        ..offer.clone()
                    };
                    Self::insert_notification(&mut tx, &outcome).await?;
                }
                DeliveryStatus::Pending => {
                    sqlx::query(
                        "UPDATE notifications SET status = 'cancelled', \
                         next_attempt_at = NULL, updated_at = $1 WHERE id = $2",
                    )
                    .arg(D::ts(now))
                    .arg(D::id(offer.id))
                    .execute(tx.conn())
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
        let draft = AuditDraft::typed(
            audit::APPROVAL_DECIDED,
            &decision.decided_by,
            message,
            &audit::ApprovalDecidedPayload {
                approval_id: approval,
                decision: decision.clone(),
            },
        );
        Self::insert_audit(
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
                crate::domain::audit::APPROVAL_DECISION_REFUSED,
                &refused.decided_by,
                format!(
                    "{} via {} refused: the approval expired first",
                    refused.decision, refused.decided_via
                ),
            );
            Self::insert_audit(
                &mut tx,
                &self.audit_key,
                Some(current.request_id),
                None,
                now,
                &draft,
            )
            .await?;
            tx.commit().await?;
            return Ok(DecideOutcome::AlreadyDecided(current));
        }
        tx.commit().await?;
        Ok(DecideOutcome::Decided(current))
    }

    async fn approval_not_executed(&self, request: Uuid, note: &str) -> Result<()> {
        self.follow_up(
            request,
            note,
            crate::domain::NotificationKind::NotExecuted,
            audit::APPROVAL_NOT_EXECUTED,
            "executor",
        )
        .await
    }

    async fn approval_made_worse(&self, request: Uuid, note: &str) -> Result<()> {
        self.follow_up(
            request,
            note,
            crate::domain::NotificationKind::MadeWorse,
            audit::APPROVAL_MADE_WORSE,
            "verifier",
        )
        .await
    }

    async fn consume_nonce(&self, nonce: &str, approval: Option<Uuid>) -> Result<bool> {
        let now = self.clock.now();
        let _write = self.write_guard().await;
        let mut tx: Tx<D> = self.writer.begin_with(D::BEGIN).await?;
        // Nonces nothing can replay any more go as a new one comes in (sessions are
        // pruned the same way), a day after their use: one without an approval (a
        // Slack signature) is refused by its timestamp five minutes on; a link whose
        // approval is decided or expired is refused by the approval.
        sqlx::query(
            "DELETE FROM used_nonces WHERE used_at < $1 AND (approval_id IS NULL \
             OR approval_id IN (SELECT id FROM approvals WHERE status <> 'pending'))",
        )
        .arg(D::ts(now - chrono::Duration::days(1)))
        .execute(tx.conn())
        .await?;
        let inserted = sqlx::query(
            "INSERT INTO used_nonces (nonce, approval_id, used_at) VALUES ($1, $2, $3) \
             ON CONFLICT (nonce) DO NOTHING",
        )
        .arg(storable_text(nonce))
        .arg(approval.map(D::id))
        .arg(D::ts(now))
        .execute(tx.conn())
        .await?
        .rows_affected();
        tx.commit().await?;
        Ok(inserted == 1)
    }

    async fn claim_notification(&self, lease: Duration) -> Result<Option<Notification>> {
        let now = self.clock.now();
        let until =
            now + chrono::Duration::from_std(lease).unwrap_or(chrono::Duration::seconds(60));
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
        .arg(D::ts(until))
        .arg(D::ts(now))
        .fetch_optional(self.writes())
        .await?;
        row.as_ref().map(Self::notification_from_row).transpose()
    }

    async fn finish_notification(
        &self,
        notification: Uuid,
        result: &DeliveryResult,
        audit: &AuditDraft,
    ) -> Result<()> {
        use DeliveryResult;
        let now = self.clock.now();
        let (status, next, error, external) = match result {
            DeliveryResult::Delivered { external_ref } => {
                ("delivered", None, None, external_ref.as_ref())
            }
            DeliveryResult::Retry { error, at } => ("pending", Some(D::ts(*at)), Some(error), None),
            DeliveryResult::GaveUp { error } => ("failed", None, Some(error), None),
            DeliveryResult::Cancelled { reason } => ("cancelled", None, Some(reason), None),
        };
        let _write = self.write_guard().await;
        let mut tx = self.begin_audited().await?;
        let row: Option<(D::Id,)> = query_as(
            "SELECT a.request_id FROM notifications n JOIN approvals a \
             ON a.id = n.approval_id WHERE n.id = $1",
        )
        .arg(D::id(notification))
        .fetch_optional(tx.conn())
        .await?;
        sqlx::query(
            "UPDATE notifications SET \
             status = CASE WHEN status = 'cancelled' THEN status ELSE $1 END, \
             attempts = attempts + 1, \
             next_attempt_at = CASE WHEN status = 'cancelled' THEN NULL ELSE $2 END, \
             last_error = $3, \
             external_ref = COALESCE($4, external_ref), updated_at = $5 WHERE id = $6",
        )
        .arg(status)
        .arg(next)
        .arg(error.map(|e| storable_text(e)))
        .arg(external.map(storable_value))
        .arg(D::ts(now))
        .arg(D::id(notification))
        .execute(tx.conn())
        .await?;
        Self::insert_audit(
            &mut tx,
            &self.audit_key,
            row.map(|(r,)| D::uuid_of(r)),
            None,
            now,
            audit,
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn notifications(&self, approval: Uuid) -> Result<Vec<Notification>> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            notification_columns!(),
            " FROM notifications WHERE approval_id = $1 \
             ORDER BY created_at, kind, channel, recipient"
        ))
        .arg(D::id(approval))
        .fetch_all(self.reads())
        .await?;
        rows.iter().map(Self::notification_from_row).collect()
    }
}
