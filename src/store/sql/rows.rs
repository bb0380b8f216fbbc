//! Rows read back into the domain, the same on both databases.

use sqlx::types::Json;

use super::dialect::Dialect;
use super::facade::Col as _;
use super::{DbRow, SqlStore};
use crate::domain::{
    ApiKey, ApprovalRequest, AuditEvent, Notification, RemediationRequest, Role, Severity,
    SignalContext, SignalMode, SignalSource, SignalStatus, StageState, TraceContext,
};
use crate::store::{
    ExecutionLock, Intent, IntentStatus, Result, SignalRecord, corrupt, make_target, parse_phase,
};

impl<D: Dialect> SqlStore<D> {
    pub(super) fn request_from_row(row: &DbRow<D>) -> Result<RemediationRequest> {
        let get = |e: sqlx::Error| corrupt("remediation_requests", e.to_string());
        let phase: String = row.col("phase").map_err(get)?;
        let not_before: Option<D::Ts> = row.col("not_before").map_err(get)?;
        let id = D::uuid_of(row.col("id").map_err(get)?);
        // NULL for a request opened before trace contexts were stored: derived from its id.
        let trace: Option<String> = row.col("trace_parent").map_err(get)?;
        let trace = match trace {
            Some(t) => TraceContext::parse(&t)
                .ok_or_else(|| corrupt("remediation_requests", format!("trace_parent `{t}`")))?,
            None => TraceContext::for_request(id),
        };
        Ok(RemediationRequest {
            id,
            phase: parse_phase(&phase)?,
            reason: row.col("reason").map_err(get)?,
            target: make_target(
                row.col("target_kind").map_err(get)?,
                row.col("target_name").map_err(get)?,
                row.col("target_namespace").map_err(get)?,
            ),
            target_fingerprint: row.col("target_fingerprint").map_err(get)?,
            signal: row.col::<Json<SignalContext>>("signal").map_err(get)?.0,
            occurrence_count: row.col("occurrence_count").map_err(get)?,
            first_seen: D::time_of(row.col("first_seen").map_err(get)?)?,
            last_seen: D::time_of(row.col("last_seen").map_err(get)?)?,
            created_at: D::time_of(row.col("created_at").map_err(get)?)?,
            updated_at: D::time_of(row.col("updated_at").map_err(get)?)?,
            attempts: row.col("attempts").map_err(get)?,
            not_before: not_before.map(D::time_of).transpose()?,
            state: row.col::<Json<StageState>>("state").map_err(get)?.0,
            trace,
        })
    }

    pub(super) fn signal_from_row(row: &DbRow<D>) -> Result<SignalRecord> {
        let get = |e: sqlx::Error| corrupt("signals", e.to_string());
        let status: String = row.col("status").map_err(get)?;
        let mode: String = row.col("mode").map_err(get)?;
        let source: String = row.col("source").map_err(get)?;
        let ends_at: Option<D::Ts> = row.col("ends_at").map_err(get)?;
        let resolved_at: Option<D::Ts> = row.col("resolved_at").map_err(get)?;
        let request_id: Option<D::Id> = row.col("request_id").map_err(get)?;
        Ok(SignalRecord {
            id: D::uuid_of(row.col("id").map_err(get)?),
            fingerprint: row.col("fingerprint").map_err(get)?,
            status: SignalStatus::parse(&status)
                .ok_or_else(|| corrupt("signals", format!("status `{status}`")))?,
            name: row.col("name").map_err(get)?,
            severity: row
                .col::<Option<String>>("severity")
                .map_err(get)?
                .map(Severity::from),
            mode: SignalMode::parse(&mode)
                .ok_or_else(|| corrupt("signals", format!("mode `{mode}`")))?,
            source: SignalSource::parse(&source)
                .ok_or_else(|| corrupt("signals", format!("source `{source}`")))?,
            labels: row.col::<Json<_>>("labels").map_err(get)?.0,
            annotations: row.col::<Json<_>>("annotations").map_err(get)?.0,
            starts_at: D::time_of(row.col("starts_at").map_err(get)?)?,
            ends_at: ends_at.map(D::time_of).transpose()?,
            target: make_target(
                row.col("target_kind").map_err(get)?,
                row.col("target_name").map_err(get)?,
                row.col("target_namespace").map_err(get)?,
            ),
            request_id: request_id.map(D::uuid_of),
            received_at: D::time_of(row.col("received_at").map_err(get)?)?,
            resolved_at: resolved_at.map(D::time_of).transpose()?,
        })
    }

    pub(super) fn lock_from_row(row: &DbRow<D>) -> Result<ExecutionLock> {
        let get = |e: sqlx::Error| corrupt("execution_locks", e.to_string());
        Ok(ExecutionLock {
            target_fingerprint: row.col("target_fingerprint").map_err(get)?,
            request_id: D::uuid_of(row.col("request_id").map_err(get)?),
            namespace: row.col("namespace").map_err(get)?,
            acquired_at: D::time_of(row.col("acquired_at").map_err(get)?)?,
        })
    }

    pub(super) fn intent_from_row(row: &DbRow<D>) -> Result<Intent> {
        let get = |e: sqlx::Error| corrupt("execution_intents", e.to_string());
        let status: String = row.col("status").map_err(get)?;
        Ok(Intent {
            request_id: D::uuid_of(row.col("request_id").map_err(get)?),
            step: row.col("step").map_err(get)?,
            action: row.col("action").map_err(get)?,
            status: IntentStatus::parse(&status)
                .ok_or_else(|| corrupt("execution_intents", format!("status `{status}`")))?,
            detail: row.col::<Json<serde_json::Value>>("detail").map_err(get)?.0,
            created_at: D::time_of(row.col("created_at").map_err(get)?)?,
            updated_at: D::time_of(row.col("updated_at").map_err(get)?)?,
        })
    }

    pub(super) fn approval_from_row(row: &DbRow<D>) -> Result<ApprovalRequest> {
        let get = |e: sqlx::Error| corrupt("approvals", e.to_string());
        Ok(row.col::<Json<ApprovalRequest>>("record").map_err(get)?.0)
    }

    pub(super) fn notification_from_row(row: &DbRow<D>) -> Result<Notification> {
        use crate::domain::{Channel, DeliveryStatus, NotificationKind};
        let get = |e: sqlx::Error| corrupt("notifications", e.to_string());
        let channel: String = row.col("channel").map_err(get)?;
        let kind: String = row.col("kind").map_err(get)?;
        let status: String = row.col("status").map_err(get)?;
        let next: Option<D::Ts> = row.col("next_attempt_at").map_err(get)?;
        let external: Option<Json<serde_json::Value>> = row.col("external_ref").map_err(get)?;
        Ok(Notification {
            id: D::uuid_of(row.col("id").map_err(get)?),
            approval_id: D::uuid_of(row.col("approval_id").map_err(get)?),
            channel: Channel::parse(&channel)
                .ok_or_else(|| corrupt("notifications", format!("channel `{channel}`")))?,
            recipient: row.col("recipient").map_err(get)?,
            kind: NotificationKind::parse(&kind)
                .ok_or_else(|| corrupt("notifications", format!("kind `{kind}`")))?,
            status: DeliveryStatus::parse(&status)
                .ok_or_else(|| corrupt("notifications", format!("status `{status}`")))?,
            attempts: row.col("attempts").map_err(get)?,
            next_attempt_at: next.map(D::time_of).transpose()?,
            last_error: row.col("last_error").map_err(get)?,
            external_ref: external.map(|j| j.0),
            created_at: D::time_of(row.col("created_at").map_err(get)?)?,
            updated_at: D::time_of(row.col("updated_at").map_err(get)?)?,
        })
    }

    pub(super) fn audit_from_row(row: &DbRow<D>) -> Result<AuditEvent> {
        let get = |e: sqlx::Error| corrupt("audit_events", e.to_string());
        let request_id: Option<D::Id> = row.col("request_id").map_err(get)?;
        let phase: Option<String> = row.col("phase").map_err(get)?;
        Ok(AuditEvent {
            id: row.col("id").map_err(get)?,
            request_id: request_id.map(D::uuid_of),
            at: D::time_of(row.col("at").map_err(get)?)?,
            phase: phase.as_deref().map(parse_phase).transpose()?,
            kind: row.col("kind").map_err(get)?,
            actor: row.col("actor").map_err(get)?,
            message: row.col("message").map_err(get)?,
            payload: row
                .col::<Json<serde_json::Value>>("payload")
                .map_err(get)?
                .0,
        })
    }

    pub(super) fn api_key_from_row(row: &DbRow<D>) -> Result<ApiKey> {
        let get = |e: sqlx::Error| corrupt("api_keys", e.to_string());
        let role: String = row.col("role").map_err(get)?;
        let revoked: Option<D::Ts> = row.col("revoked_at").map_err(get)?;
        Ok(ApiKey {
            id: D::uuid_of(row.col("id").map_err(get)?),
            name: row.col("name").map_err(get)?,
            role: Role::parse(&role)
                .ok_or_else(|| corrupt("api_keys", format!("role `{role}`")))?,
            prefix: row.col("prefix").map_err(get)?,
            created_at: D::time_of(row.col("created_at").map_err(get)?)?,
            created_by: row.col("created_by").map_err(get)?,
            revoked_at: revoked.map(D::time_of).transpose()?,
        })
    }
}
