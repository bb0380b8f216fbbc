//! The SQL both backends share, written once.
//!
//! `sql_store!(Type, Database)` implements [`super::Store`] for a struct with `pool` and `clock`
//! fields. The invoking module supplies what differs between databases:
//! `type Id`/`fn id`/`fn uuid_of` (how a UUID is bound and read), `type Ts`/`fn ts`/`fn time_of`
//! (how a time is bound and read), `BEGIN` (the statement that opens a write transaction) and
//! `CLAIM_SQL` (how a worker claims a request without racing another).

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

macro_rules! sql_store {
    ($store:ty, $db:ty, $backend:literal) => {
        use sqlx::Row as _;
        use sqlx::types::Json;
        use $crate::store::{
            IngestOutcome, Page, RequestFilter, Result, SignalFilter, SignalRecord, StepCommit,
            StoreError, StoreHealth, corrupt, make_target, parse_phase,
        };
        use $crate::ingest::{NewSignal, SignalMode, SignalSource, SignalStatus};
        use $crate::pipeline::{AuditDraft, AuditEvent, Phase, RemediationRequest, SignalContext};

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
                    .try_get::<Json<$crate::pipeline::StageState>, _>("state")
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

        async fn insert_audit(
            tx: &mut Tx,
            request_id: Option<uuid::Uuid>,
            phase: Option<Phase>,
            at: chrono::DateTime<chrono::Utc>,
            draft: &AuditDraft,
        ) -> Result<()> {
            sqlx::query(
                "INSERT INTO audit_events (request_id, at, phase, kind, actor, message, payload) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .bind(request_id.map(id))
            .bind(ts(at))
            .bind(phase.map(Phase::as_str))
            .bind(&draft.kind)
            .bind(&draft.actor)
            .bind(&draft.message)
            .bind(Json(&draft.payload))
            .execute(&mut **tx)
            .await?;
            Ok(())
        }

        /// The active request holding any of `aliases`, with its phase.
        async fn find_active(tx: &mut Tx, aliases: &[String]) -> Result<Option<uuid::Uuid>> {
            for alias in aliases {
                let found: Option<(Id,)> = sqlx::query_as(
                    "SELECT request_id FROM request_targets WHERE fingerprint = $1 AND active",
                )
                .bind(alias)
                .fetch_optional(&mut **tx)
                .await?;
                if let Some((rid,)) = found {
                    return Ok(Some(uuid_of(rid)));
                }
            }
            Ok(None)
        }

        async fn current_phase(tx: &mut Tx, request_id: uuid::Uuid) -> Result<Option<Phase>> {
            let row: Option<(String,)> =
                sqlx::query_as("SELECT phase FROM remediation_requests WHERE id = $1")
                    .bind(id(request_id))
                    .fetch_optional(&mut **tx)
                    .await?;
            row.map(|(p,)| parse_phase(&p)).transpose()
        }

        impl $store {
            async fn ingest_once(&self, signals: &[NewSignal]) -> Result<Vec<IngestOutcome>> {
                let now = self.clock.now();
                let mut tx: Tx = self.pool.begin_with(BEGIN).await?;
                let mut out = Vec::with_capacity(signals.len());
                for s in signals {
                    let actor = &s.actor();
                    let existing: Option<(Id, String, Option<Id>)> = sqlx::query_as(
                        "SELECT id, status, request_id FROM signals \
                         WHERE fingerprint = $1 AND starts_at = $2",
                    )
                    .bind(&s.fingerprint)
                    .bind(ts(s.starts_at))
                    .fetch_optional(&mut *tx)
                    .await?;
                    if let Some((signal_id, status, request)) = existing {
                        let request = request.map(uuid_of);
                        if s.status == SignalStatus::Resolved && status == "firing" {
                            sqlx::query(
                                "UPDATE signals SET status = 'resolved', ends_at = $1, \
                                 resolved_at = $2 WHERE id = $3",
                            )
                            .bind(s.ends_at.map(ts))
                            .bind(ts(now))
                            .bind(signal_id)
                            .execute(&mut *tx)
                            .await?;
                            if let Some(rid) = request {
                                let phase = current_phase(&mut tx, rid).await?;
                                let draft = AuditDraft::new(
                                    "signal_resolved",
                                    actor,
                                    format!("alert {} resolved", s.name),
                                )
                                .with_payload(serde_json::json!({
                                    "fingerprint": s.fingerprint,
                                    "starts_at": s.starts_at,
                                    "ends_at": s.ends_at,
                                }));
                                insert_audit(&mut tx, Some(rid), phase, now, &draft).await?;
                            }
                            out.push(IngestOutcome::Resolved { request_id: request });
                        } else {
                            out.push(IngestOutcome::Redelivery { request_id: request });
                        }
                        continue;
                    }

                    let active = find_active(&mut tx, &s.target_aliases).await?;
                    let outcome = match (s.status, active) {
                        (SignalStatus::Resolved, request_id) => {
                            IngestOutcome::Resolved { request_id }
                        }
                        (SignalStatus::Firing, Some(rid)) => {
                            let (count, phase): (i64, String) = sqlx::query_as(
                                "UPDATE remediation_requests SET \
                                 occurrence_count = occurrence_count + 1, last_seen = $1, \
                                 updated_at = $1 WHERE id = $2 \
                                 RETURNING occurrence_count, phase",
                            )
                            .bind(ts(now))
                            .bind(id(rid))
                            .fetch_one(&mut *tx)
                            .await?;
                            let draft = AuditDraft::new(
                                "occurrence",
                                actor,
                                format!("{} fired again (occurrence {count})", s.name),
                            )
                            .with_payload(serde_json::json!({
                                "fingerprint": s.fingerprint,
                                "starts_at": s.starts_at,
                                "occurrence_count": count,
                            }));
                            insert_audit(&mut tx, Some(rid), Some(parse_phase(&phase)?), now, &draft)
                                .await?;
                            IngestOutcome::Occurrence {
                                request_id: rid,
                                occurrence_count: count,
                            }
                        }
                        (SignalStatus::Firing, None) => {
                            let rid = uuid::Uuid::new_v4();
                            self.open_request(&mut tx, rid, s, now, actor).await?;
                            IngestOutcome::Opened { request_id: rid }
                        }
                    };
                    let inserted = sqlx::query(
                        "INSERT INTO signals (id, fingerprint, starts_at, status, ends_at, name, \
                         severity, mode, source, labels, annotations, generator_url, receiver, \
                         group_key, target_kind, target_name, target_namespace, \
                         target_fingerprint, request_id, received_at, resolved_at) \
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, \
                         $15, $16, $17, $18, $19, $20, $21) \
                         ON CONFLICT (fingerprint, starts_at) DO NOTHING",
                    )
                    .bind(id(uuid::Uuid::new_v4()))
                    .bind(&s.fingerprint)
                    .bind(ts(s.starts_at))
                    .bind(s.status.as_str())
                    .bind(s.ends_at.map(ts))
                    .bind(&s.name)
                    .bind(&s.severity)
                    .bind(s.mode.as_str())
                    .bind(s.source.as_str())
                    .bind(Json(&s.labels))
                    .bind(Json(&s.annotations))
                    .bind(&s.generator_url)
                    .bind(&s.receiver)
                    .bind(&s.group_key)
                    .bind(s.target.as_ref().map(|t| t.kind.as_str()))
                    .bind(s.target.as_ref().map(|t| t.name.as_str()))
                    .bind(s.target.as_ref().and_then(|t| t.namespace.as_deref()))
                    .bind(&s.target_fingerprint)
                    .bind(outcome.request_id().map(id))
                    .bind(ts(now))
                    .bind((s.status == SignalStatus::Resolved).then(|| ts(now)))
                    .execute(&mut *tx)
                    .await?;
                    if inserted.rows_affected() == 0 {
                        // A concurrent delivery of the same alert committed first.
                        return Err(StoreError::Conflict);
                    }
                    out.push(outcome);
                }
                tx.commit().await?;
                Ok(out)
            }

            async fn open_request(
                &self,
                tx: &mut Tx,
                rid: uuid::Uuid,
                s: &NewSignal,
                now: chrono::DateTime<chrono::Utc>,
                actor: &str,
            ) -> Result<()> {
                // Take the primary target first: if another writer holds it, retry the batch.
                let taken = sqlx::query(
                    "INSERT INTO request_targets (fingerprint, request_id, active) \
                     VALUES ($1, $2, TRUE) ON CONFLICT DO NOTHING",
                )
                .bind(&s.target_fingerprint)
                .bind(id(rid))
                .execute(&mut **tx)
                .await?;
                if taken.rows_affected() == 0 {
                    return Err(StoreError::Conflict);
                }
                let context = SignalContext::from_signal(s, now);
                sqlx::query(
                    "INSERT INTO remediation_requests (id, phase, reason, active, target_kind, \
                     target_name, target_namespace, target_fingerprint, signal_name, severity, \
                     signal_mode, signal, occurrence_count, first_seen, last_seen, created_at, \
                     updated_at, attempts, state) \
                     VALUES ($1, 'Received', NULL, TRUE, $2, $3, $4, $5, $6, $7, $8, $9, 1, \
                     $10, $10, $10, $10, 0, $11)",
                )
                .bind(id(rid))
                .bind(s.target.as_ref().map(|t| t.kind.as_str()))
                .bind(s.target.as_ref().map(|t| t.name.as_str()))
                .bind(s.target.as_ref().and_then(|t| t.namespace.as_deref()))
                .bind(&s.target_fingerprint)
                .bind(&s.name)
                .bind(&s.severity)
                .bind(s.mode.as_str())
                .bind(Json(&context))
                .bind(ts(now))
                .bind(Json($crate::pipeline::StageState::default()))
                .execute(&mut **tx)
                .await?;
                for alias in s.target_aliases.iter().filter(|a| **a != s.target_fingerprint) {
                    sqlx::query(
                        "INSERT INTO request_targets (fingerprint, request_id, active) \
                         VALUES ($1, $2, TRUE) ON CONFLICT DO NOTHING",
                    )
                    .bind(alias)
                    .bind(id(rid))
                    .execute(&mut **tx)
                    .await?;
                }
                let target = s
                    .target
                    .as_ref()
                    .map_or_else(|| "no target label".to_owned(), |t| t.to_string());
                let draft = AuditDraft::new(
                    "received",
                    actor,
                    format!("{} ({}) opened a request for {target}", s.name, s.mode.as_str()),
                )
                .with_payload(serde_json::json!({
                    "fingerprint": s.fingerprint,
                    "starts_at": s.starts_at,
                    "target": s.target,
                    "target_fingerprint": s.target_fingerprint,
                    "source": s.source,
                }));
                insert_audit(tx, Some(rid), Some(Phase::Received), now, &draft).await
            }
        }

        #[async_trait::async_trait]
        impl $crate::store::Store for $store {
            fn backend(&self) -> &'static str {
                $backend
            }

            async fn ingest(&self, signals: &[NewSignal]) -> Result<Vec<IngestOutcome>> {
                let mut attempt = 0;
                loop {
                    match self.ingest_once(signals).await {
                        Err(StoreError::Conflict) if attempt < 8 => attempt += 1,
                        other => return other,
                    }
                }
            }

            async fn claim(
                &self,
                worker: &str,
                lease: std::time::Duration,
            ) -> Result<Option<RemediationRequest>> {
                let now = self.clock.now();
                let until = now + chrono::Duration::from_std(lease).unwrap_or_default();
                let row = sqlx::query(CLAIM_SQL)
                    .bind(worker)
                    .bind(ts(until))
                    .bind(ts(now))
                    .fetch_optional(&self.pool)
                    .await?;
                row.as_ref().map(request_from_row).transpose()
            }

            async fn renew(
                &self,
                rid: uuid::Uuid,
                worker: &str,
                lease: std::time::Duration,
            ) -> Result<bool> {
                let until = self.clock.now() + chrono::Duration::from_std(lease).unwrap_or_default();
                let done = sqlx::query(
                    "UPDATE remediation_requests SET lease_until = $1 \
                     WHERE id = $2 AND claimed_by = $3",
                )
                .bind(ts(until))
                .bind(id(rid))
                .bind(worker)
                .execute(&self.pool)
                .await?;
                Ok(done.rows_affected() == 1)
            }

            async fn commit_step(
                &self,
                rid: uuid::Uuid,
                worker: &str,
                from: Phase,
                step: StepCommit,
            ) -> Result<Option<RemediationRequest>> {
                if !from.can_move_to(step.to) {
                    return Err(corrupt(
                        "remediation_requests",
                        format!("illegal transition {from} -> {}", step.to),
                    ));
                }
                let now = self.clock.now();
                let mut tx: Tx = self.pool.begin_with(BEGIN).await?;
                let row = sqlx::query(concat!(
                    "UPDATE remediation_requests SET phase = $1, reason = $2, active = $3, \
                     state = $4, attempts = $5, not_before = $6, updated_at = $7, \
                     claimed_by = CASE WHEN $8 THEN NULL ELSE claimed_by END, \
                     lease_until = CASE WHEN $8 THEN NULL ELSE lease_until END \
                     WHERE id = $9 AND phase = $10 AND claimed_by = $11 RETURNING ",
                    request_columns!()
                ))
                .bind(step.to.as_str())
                .bind(&step.reason)
                .bind(!step.to.is_terminal())
                .bind(Json(&step.state))
                .bind(step.attempts)
                .bind(step.not_before.map(ts))
                .bind(ts(now))
                .bind(step.release || step.to.is_terminal())
                .bind(id(rid))
                .bind(from.as_str())
                .bind(worker)
                .fetch_optional(&mut *tx)
                .await?;
                let Some(row) = row else {
                    tx.rollback().await?;
                    return Ok(None);
                };
                let request = request_from_row(&row)?;
                if step.to.is_terminal() {
                    sqlx::query("UPDATE request_targets SET active = FALSE WHERE request_id = $1")
                        .bind(id(rid))
                        .execute(&mut *tx)
                        .await?;
                }
                // What the stage found happened in `from`; the transition lands in `to`.
                for draft in &step.events {
                    insert_audit(&mut tx, Some(rid), Some(from), now, draft).await?;
                }
                if step.to != from {
                    let draft = $crate::pipeline::transition_event(
                        from,
                        step.to,
                        step.reason.as_deref(),
                        worker,
                    );
                    insert_audit(&mut tx, Some(rid), Some(step.to), now, &draft).await?;
                }
                tx.commit().await?;
                Ok(Some(request))
            }

            async fn release(&self, rid: uuid::Uuid, worker: &str) -> Result<()> {
                sqlx::query(
                    "UPDATE remediation_requests SET claimed_by = NULL, lease_until = NULL \
                     WHERE id = $1 AND claimed_by = $2",
                )
                .bind(id(rid))
                .bind(worker)
                .execute(&self.pool)
                .await?;
                Ok(())
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

            async fn list_requests(
                &self,
                f: &RequestFilter,
            ) -> Result<Page<RemediationRequest>> {
                let phase = f.phase.map(Phase::as_str);
                let (total,): (i64,) = sqlx::query_as(
                    "SELECT count(*) FROM remediation_requests \
                     WHERE ($1 IS NULL OR phase = $1) AND ($2 IS NULL OR target_namespace = $2)",
                )
                .bind(phase)
                .bind(&f.namespace)
                .fetch_one(&self.pool)
                .await?;
                let rows = sqlx::query(concat!(
                    "SELECT ",
                    request_columns!(),
                    " FROM remediation_requests \
                     WHERE ($1 IS NULL OR phase = $1) AND ($2 IS NULL OR target_namespace = $2) \
                     ORDER BY created_at DESC, id LIMIT $3 OFFSET $4"
                ))
                .bind(phase)
                .bind(&f.namespace)
                .bind(f.limit)
                .bind(f.offset)
                .fetch_all(&self.pool)
                .await?;
                let items = rows.iter().map(request_from_row).collect::<Result<Vec<_>>>()?;
                Ok(Page { total, items })
            }

            async fn list_signals(&self, f: &SignalFilter) -> Result<Page<SignalRecord>> {
                let status = f.status.map(SignalStatus::as_str);
                let request = f.request_id.map(id);
                let (total,): (i64,) = sqlx::query_as(
                    "SELECT count(*) FROM signals WHERE ($1 IS NULL OR status = $1) \
                     AND ($2 IS NULL OR target_namespace = $2) \
                     AND ($3 IS NULL OR request_id = $3)",
                )
                .bind(status)
                .bind(&f.namespace)
                .bind(request.clone())
                .fetch_one(&self.pool)
                .await?;
                let rows = sqlx::query(
                    "SELECT id, fingerprint, status, name, severity, mode, source, labels, \
                     annotations, starts_at, ends_at, target_kind, target_name, \
                     target_namespace, request_id, received_at, resolved_at FROM signals \
                     WHERE ($1 IS NULL OR status = $1) AND ($2 IS NULL OR target_namespace = $2) \
                     AND ($3 IS NULL OR request_id = $3) \
                     ORDER BY received_at DESC, id LIMIT $4 OFFSET $5",
                )
                .bind(status)
                .bind(&f.namespace)
                .bind(request)
                .bind(f.limit)
                .bind(f.offset)
                .fetch_all(&self.pool)
                .await?;
                let items = rows.iter().map(signal_from_row).collect::<Result<Vec<_>>>()?;
                Ok(Page { total, items })
            }

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

            async fn append_audit(
                &self,
                request_id: Option<uuid::Uuid>,
                phase: Option<Phase>,
                draft: &AuditDraft,
            ) -> Result<()> {
                let mut tx: Tx = self.pool.begin_with(BEGIN).await?;
                insert_audit(&mut tx, request_id, phase, self.clock.now(), draft).await?;
                tx.commit().await?;
                Ok(())
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

            async fn health(&self) -> Result<StoreHealth> {
                let (applied,): (i64,) =
                    sqlx::query_as("SELECT count(*) FROM _sqlx_migrations WHERE success")
                        .fetch_one(&self.pool)
                        .await?;
                Ok(StoreHealth {
                    backend: $backend,
                    migrations_applied: applied,
                    migrations_expected: MIGRATOR.iter().count() as i64,
                })
            }
        }
    };
}
pub(super) use sql_store;

#[cfg(test)]
mod tests {
    use crate::pipeline::Phase;

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
