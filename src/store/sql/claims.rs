//! [`Claims`](crate::store::Claims): the worker claims requests and commits their steps.

use std::borrow::Cow;
use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use uuid::Uuid;

use super::dialect::Dialect;
use super::facade::{Arg as _, RowsAffected as _};
use super::{SqlStore, StepRow};
use crate::domain::{AuditDraft, Phase, RemediationRequest, transition_event};
use crate::store::{Claims, Figures, PendingStep, Result, corrupt, storable_json, storable_text};

#[async_trait]
impl<D: Dialect> Claims for SqlStore<D> {
    async fn claim_batch(
        &self,
        worker: &str,
        lease: Duration,
        limit: usize,
    ) -> Result<Vec<RemediationRequest>> {
        let now = self.clock.now();
        let until = now + chrono::Duration::from_std(lease).unwrap_or_default();
        let _write = self.write_guard().await;
        // A replica whose audit key was rotated out claims nothing (the `NOT EXISTS` on
        // the database's recorded key): it could commit no step, and its stages would
        // call the model and write to the cluster for nothing.
        let rows = sqlx::query(D::CLAIM_SQL)
            .arg(worker)
            .arg(D::ts(until))
            .arg(D::ts(now))
            .arg(i64::try_from(limit.max(1)).unwrap_or(i64::MAX))
            .arg(self.audit_key.id())
            .fetch_all(self.writes())
            .await?;
        let mut claimed = rows
            .iter()
            .map(Self::request_from_row)
            .collect::<Result<Vec<_>>>()?;
        // RETURNING gives no order: the oldest first, as the claim chose them.
        claimed.sort_by_key(|r| (r.created_at, r.id));
        Ok(claimed)
    }

    async fn renew(&self, rid: Uuid, worker: &str, lease: Duration) -> Result<bool> {
        let until = self.clock.now() + chrono::Duration::from_std(lease).unwrap_or_default();
        let _write = self.write_guard().await;
        let done = sqlx::query(
            "UPDATE remediation_requests SET lease_until = $1 \
             WHERE id = $2 AND claimed_by = $3",
        )
        .arg(D::ts(until))
        .arg(D::id(rid))
        .arg(worker)
        .execute(self.writes())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn commit_steps(
        &self,
        worker: &str,
        steps: &[PendingStep],
    ) -> Result<Vec<Option<RemediationRequest>>> {
        // Everything that can be refused is refused before the transaction opens.
        let mut prepared = Vec::with_capacity(steps.len());
        for (i, pending) in steps.iter().enumerate() {
            let PendingStep {
                id: rid,
                from,
                ref via,
                ref step,
            } = *pending;
            let mut moves = vec![from];
            moves.extend(via.as_ref().map(|v| v.phase));
            moves.push(step.to);
            if let Some((a, b)) = moves
                .iter()
                .zip(moves.iter().skip(1))
                .find(|(a, b)| !a.can_move_to(**b))
            {
                return Err(corrupt(
                    "remediation_requests",
                    format!("illegal transition {a} -> {b}"),
                ));
            }
            let row = StepRow {
                id: rid,
                from,
                to: step.to,
                reason: step.reason.as_deref().map(storable_text),
                active: !step.to.is_terminal(),
                state: storable_json(&step.state)?,
                attempts: step.attempts,
                not_before: step.not_before,
                release: step.release || step.to.is_terminal(),
                figures: Figures::of(step),
            };
            prepared.push((i, row, via, step));
        }
        // Rows are locked in id order, as ingest locks the requests it counts
        // occurrences on: two transactions touching the same requests cannot deadlock.
        // The answers keep the order of `steps`.
        prepared.sort_by_key(|p| p.1.id);
        let (order, rows): (Vec<_>, Vec<StepRow<'_>>) = prepared
            .into_iter()
            .map(|(i, row, via, step)| ((i, via, step), row))
            .unzip();
        let now = self.clock.now();
        let _write = self.write_guard().await;
        let mut tx = self.begin_audited().await?;
        // No row back for a request: another worker holds it now; nothing of its step
        // is written.
        let mut updated: HashMap<Uuid, RemediationRequest> =
            D::update_steps(&mut tx, worker, now, &rows)
                .await?
                .iter()
                .map(|row| Self::request_from_row(row).map(|r| (r.id, r)))
                .collect::<Result<_>>()?;
        let mut out: Vec<Option<RemediationRequest>> = vec![None; rows.len()];
        let mut audits: Vec<(Option<Uuid>, Option<Phase>, Cow<'_, AuditDraft>)> = Vec::new();
        let mut finished: Vec<Uuid> = Vec::new();
        for ((i, via, step), row) in order.into_iter().zip(&rows) {
            let (rid, from) = (row.id, row.from);
            let Some(request) = updated.remove(&rid) else {
                continue;
            };
            if step.to.is_terminal() {
                finished.push(rid);
            }
            // What a stage found happened in the phase it ran in; a transition lands in
            // the phase it moved to.
            let mut stage_from = from;
            if let Some(via) = via {
                audits.extend(
                    via.events
                        .iter()
                        .map(|d| (Some(rid), Some(from), Cow::Borrowed(d))),
                );
                let draft = transition_event(from, via.phase, via.reason.as_deref(), worker)
                    .with_trace(&request.trace);
                audits.push((Some(rid), Some(via.phase), Cow::Owned(draft)));
                stage_from = via.phase;
            }
            audits.extend(
                step.events
                    .iter()
                    .map(|d| (Some(rid), Some(stage_from), Cow::Borrowed(d))),
            );
            if step.to != stage_from {
                let draft = transition_event(stage_from, step.to, step.reason.as_deref(), worker)
                    .with_trace(&request.trace);
                audits.push((Some(rid), Some(step.to), Cow::Owned(draft)));
            }
            if let Some(slot) = out.get_mut(i) {
                *slot = Some(request);
            }
        }
        // Their targets are free again, and a finished request executes nothing more.
        D::finish_requests(&mut tx, &finished).await?;
        Self::insert_audits(&mut tx, &self.audit_key, now, &audits).await?;
        tx.commit().await?;
        Ok(out)
    }

    async fn release(&self, rid: Uuid, worker: &str) -> Result<()> {
        let _write = self.write_guard().await;
        sqlx::query(
            "UPDATE remediation_requests SET claimed_by = NULL, lease_until = NULL \
             WHERE id = $1 AND claimed_by = $2",
        )
        .arg(D::id(rid))
        .arg(worker)
        .execute(self.writes())
        .await?;
        Ok(())
    }
}
