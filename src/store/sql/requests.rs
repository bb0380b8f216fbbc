//! [`Requests`](crate::store::Requests): ingest of signals, and every read of requests and signals.

use std::borrow::Cow;
use std::collections::HashMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::dialect::Dialect;
use super::facade::{Arg as _, Conn as _, query_as};
use super::{SqlStore, request_columns};
use crate::domain::{AuditDraft, NewSignal, Phase, RemediationRequest, SignalStatus, audit};
use crate::store::{
    Cursor, IngestOutcome, Page, RequestFilter, RequestPage, Requests, Result, SignalFilter,
    SignalRecord, StoreError, Summary, parse_phase,
};

/// What ingest knows of a `(fingerprint, startsAt)`: the stored signal's id (`None` when it
/// came earlier in the same batch), its status, its request.
type Known<D> = (Option<<D as Dialect>::Id>, String, Option<Uuid>);

impl<D: Dialect> SqlStore<D> {
    /// Record a batch in one transaction with a handful of statements whatever its
    /// size: look up what is known (signals by fingerprint, active targets by alias),
    /// decide every signal in order in memory, then write each table with multi-row
    /// statements. A concurrent writer that won a race (same alert, same target) makes
    /// an insert come back short: the batch is retried from the start.
    pub(super) async fn ingest_once(&self, signals: &[NewSignal]) -> Result<Vec<IngestOutcome>> {
        use HashMap;
        let now = self.clock.now();
        let _write = self.write_guard().await;
        let mut tx = self.begin_audited().await?;

        // 1. What the database already knows.
        let mut fingerprints: Vec<&str> = signals.iter().map(|s| s.fingerprint.as_str()).collect();
        fingerprints.sort_unstable();
        fingerprints.dedup();
        let mut known: HashMap<(String, i64), Known<D>> = HashMap::new();
        for (sid, fp, at, status, rid) in D::lookup_signals(&mut tx, &fingerprints).await? {
            known.insert(
                (fp, Self::micros(D::time_of(at)?)),
                (Some(sid), status, rid.map(D::uuid_of)),
            );
        }
        let mut aliases: Vec<&str> = signals
            .iter()
            .flat_map(|s| s.target_aliases.iter().map(String::as_str))
            .collect();
        aliases.sort_unstable();
        aliases.dedup();
        let mut active: HashMap<String, Uuid> = HashMap::new();
        for (fp, rid) in D::lookup_targets(&mut tx, &aliases).await? {
            active.insert(fp, D::uuid_of(rid));
        }

        // 2. Decide, in order: later signals of the batch see earlier ones.
        let mut out = Vec::with_capacity(signals.len());
        let mut inserts: Vec<(&NewSignal, Option<Uuid>, bool)> = Vec::new(); // signal, request, resolved
        let mut opened: Vec<(Uuid, &NewSignal)> = Vec::new();
        let mut targets: Vec<(String, Uuid, bool)> = Vec::new(); // alias, request, primary
        let mut occurrences: Vec<(usize, Uuid, &NewSignal)> = Vec::new();
        let mut resolutions: Vec<(D::Id, &NewSignal, Option<Uuid>)> = Vec::new();
        for s in signals {
            let key = (s.fingerprint.clone(), Self::micros(s.starts_at));
            if let Some((sid, status, rid)) = known.get_mut(&key) {
                let rid = *rid;
                if s.status == SignalStatus::Resolved && status == "firing" {
                    *status = "resolved".into();
                    match sid {
                        Some(sid) => resolutions.push((*sid, s, rid)),
                        // Fired and resolved in this very batch: store it resolved.
                        None => {
                            if let Some(row) = inserts.iter_mut().find(|(i, _, _)| {
                                i.fingerprint == s.fingerprint && Self::micros(i.starts_at) == key.1
                            }) {
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
                    IngestOutcome::Occurrence {
                        request_id: rid,
                        occurrence_count: 0,
                    }
                }
                (SignalStatus::Firing, None) => {
                    let rid = Uuid::new_v4();
                    opened.push((rid, s));
                    targets.push((s.target_fingerprint.clone(), rid, true));
                    active.insert(s.target_fingerprint.clone(), rid);
                    for a in s
                        .target_aliases
                        .iter()
                        .filter(|a| **a != s.target_fingerprint)
                    {
                        if !active.contains_key(a) {
                            targets.push((a.clone(), rid, false));
                            active.insert(a.clone(), rid);
                        }
                    }
                    IngestOutcome::Opened { request_id: rid }
                }
            };
            let status = if s.status == SignalStatus::Resolved {
                "resolved"
            } else {
                "firing"
            };
            known.insert(key, (None, status.into(), outcome.request_id()));
            inserts.push((s, outcome.request_id(), s.status == SignalStatus::Resolved));
            out.push(outcome);
        }

        // 3. Write. Targets first: a primary target another writer took meanwhile
        //    (Postgres) comes back missing and the batch is retried.
        let taken = D::insert_targets(&mut tx, &targets).await?;
        if targets
            .iter()
            .any(|(fp, _, primary)| *primary && !taken.contains(fp))
        {
            return Err(StoreError::Conflict);
        }
        D::insert_requests(&mut tx, now, &opened).await?;
        // Occurrence counts: one UPDATE per request that had repeats.
        let mut audits: Vec<(Option<Uuid>, Option<Phase>, AuditDraft)> = Vec::new();
        let mut per_request: Vec<(Uuid, Vec<(usize, &NewSignal)>)> = Vec::new();
        for (i, rid, s) in &occurrences {
            match per_request.iter_mut().find(|(r, _)| r == rid) {
                Some((_, list)) => list.push((*i, *s)),
                None => per_request.push((*rid, vec![(*i, *s)])),
            }
        }
        // In id order, as step commits lock requests: no deadlock between the two.
        per_request.sort_by_key(|(rid, _)| *rid);
        for (rid, list) in &per_request {
            let (total, phase): (i64, String) = query_as(
                "UPDATE remediation_requests SET occurrence_count = occurrence_count + $1, \
                 last_seen = $2, updated_at = $2 WHERE id = $3 RETURNING occurrence_count, phase",
            )
            .arg(list.len() as i64)
            .arg(D::ts(now))
            .arg(D::id(*rid))
            .fetch_one(tx.conn())
            .await?;
            let phase = parse_phase(&phase)?;
            for (j, (i, s)) in list.iter().enumerate() {
                let count = total - list.len() as i64 + 1 + j as i64;
                if let Some(IngestOutcome::Occurrence {
                    occurrence_count, ..
                }) = out.get_mut(*i)
                {
                    *occurrence_count = count;
                }
                audits.push((
                    Some(*rid),
                    Some(phase),
                    AuditDraft::new(audit::OCCURRENCE, &s.actor(), format!("{} fired again (occurrence {count})", s.name))
                        .with_payload(serde_json::json!({"fingerprint": s.fingerprint, "starts_at": s.starts_at, "occurrence_count": count})),
                ));
            }
        }
        for (sid, s, rid) in &resolutions {
            sqlx::query("UPDATE signals SET status = 'resolved', ends_at = $1, resolved_at = $2 WHERE id = $3")
                .arg(s.ends_at.map(D::ts))
                .arg(D::ts(now))
                .arg(*sid)
                .execute(tx.conn())
                .await?;
            if let Some(rid) = rid {
                let phase = Self::current_phase(&mut tx, *rid).await?;
                audits.push((
                    Some(*rid),
                    phase,
                    AuditDraft::new(audit::SIGNAL_RESOLVED, &s.actor(), format!("alert {} resolved", s.name))
                        .with_payload(serde_json::json!({"fingerprint": s.fingerprint, "starts_at": s.starts_at, "ends_at": s.ends_at})),
                ));
            }
        }
        if D::insert_signals(&mut tx, now, &inserts).await? < inserts.len() {
            // A concurrent delivery of the same alert committed first.
            return Err(StoreError::Conflict);
        }
        for (rid, s) in &opened {
            let target = s
                .target
                .as_ref()
                .map_or_else(|| "no target label".to_owned(), |t| t.to_string());
            audits.push((
                Some(*rid),
                Some(Phase::Received),
                AuditDraft::new(
                    audit::RECEIVED,
                    &s.actor(),
                    format!(
                        "{} ({}) opened a request for {target}",
                        s.name,
                        s.mode.as_str()
                    ),
                )
                .with_payload(serde_json::json!({
                    "fingerprint": s.fingerprint,
                    "starts_at": s.starts_at,
                    "target": s.target,
                    "target_fingerprint": s.target_fingerprint,
                    "source": s.source,
                }))
                .with_trace(&s.trace_for(*rid)),
            ));
        }
        // The trail in the order things happened: openings, then repeats and resolutions.
        audits.sort_by_key(|(_, _, d)| if d.kind == audit::RECEIVED { 0 } else { 1 });
        let audits: Vec<_> = audits
            .into_iter()
            .map(|(r, p, d)| (r, p, Cow::Owned(d)))
            .collect();
        Self::insert_audits(&mut tx, &self.audit_key, now, &audits).await?;
        tx.commit().await?;
        Ok(out)
    }
}

#[async_trait]
impl<D: Dialect> Requests for SqlStore<D> {
    async fn ingest(&self, signals: &[NewSignal]) -> Result<Vec<IngestOutcome>> {
        let mut attempt = 0;
        loop {
            match self.ingest_once(signals).await {
                Err(StoreError::Conflict) if attempt < 8 => attempt += 1,
                other => return other,
            }
        }
    }

    async fn get_request(&self, rid: Uuid) -> Result<Option<RemediationRequest>> {
        let row = sqlx::query(concat!(
            "SELECT ",
            request_columns!(),
            " FROM remediation_requests WHERE id = $1"
        ))
        .arg(D::id(rid))
        .fetch_optional(self.reads())
        .await?;
        row.as_ref().map(Self::request_from_row).transpose()
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
            D::param(n)
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
        sql.push_str(&format!(
            " ORDER BY created_at DESC, id DESC LIMIT {}",
            next()
        ));
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        if let Some(p) = f.phase {
            q = q.arg(p.as_str());
        }
        if let Some(ns) = &f.namespace {
            q = q.arg(ns.clone());
        }
        if let Some(t) = &f.target {
            q = q.arg(t.clone());
        }
        if let Some(a) = &f.signal_name {
            q = q.arg(a.clone());
        }
        if let Some(t) = f.since {
            q = q.arg(D::ts(t));
        }
        if let Some(t) = f.until {
            q = q.arg(D::ts(t));
        }
        if let Some(c) = f.before {
            q = q.arg(D::ts(c.created_at)).arg(D::id(c.id));
        }
        let limit = f.limit.max(0);
        q = q.arg(limit + 1);
        let rows = q.fetch_all(self.reads()).await?;
        let mut items = rows
            .iter()
            .map(Self::request_from_row)
            .collect::<Result<Vec<_>>>()?;
        let more = items.len() as i64 > limit;
        items.truncate(limit as usize);
        let next = if more {
            items.last().map(Cursor::of)
        } else {
            None
        };
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
            D::param(n)
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
        let mut count = query_as::<_, (i64,)>(sqlx::AssertSqlSafe(format!(
            "SELECT count(*) FROM signals{filter}"
        )));
        let mut rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT id, fingerprint, status, name, severity, mode, source, labels, \
             annotations, starts_at, ends_at, target_kind, target_name, \
             target_namespace, request_id, received_at, resolved_at FROM signals{filter} \
             ORDER BY received_at DESC, id LIMIT {limit} OFFSET {offset}"
        )));
        if let Some(s) = f.status {
            count = count.arg(s.as_str());
            rows = rows.arg(s.as_str());
        }
        if let Some(ns) = &f.namespace {
            count = count.arg(ns.clone());
            rows = rows.arg(ns.clone());
        }
        if let Some(r) = f.request_id {
            count = count.arg(D::id(r));
            rows = rows.arg(D::id(r));
        }
        let (total,) = count.fetch_one(self.reads()).await?;
        let rows = rows
            .arg(f.limit)
            .arg(f.offset)
            .fetch_all(self.reads())
            .await?;
        let items = rows
            .iter()
            .map(Self::signal_from_row)
            .collect::<Result<Vec<_>>>()?;
        Ok(Page { total, items })
    }

    async fn count_by_phase(&self) -> Result<Vec<(Phase, i64)>> {
        let rows: Vec<(String, i64)> =
            query_as("SELECT phase, count(*) FROM remediation_requests GROUP BY phase")
                .fetch_all(self.reads())
                .await?;
        rows.into_iter()
            .map(|(p, n)| Ok((parse_phase(&p)?, n)))
            .collect()
    }

    async fn summary(&self, since: Option<DateTime<Utc>>) -> Result<Summary> {
        let since_ts = D::ts(since.unwrap_or(DateTime::<Utc>::UNIX_EPOCH));
        // Three queries, each answered from an index alone (0005_dashboard.sql): the
        // figures of every request in the period in one pass, grouped by what the page
        // counts; the tokens per day; the median time to resolution. Reading the rows
        // instead cost seconds at 100,000 requests (docs/benchmarks.md, "Dashboard at
        // scale"). The effectiveness bins have explicit bounds: CAST(x * 5 AS INTEGER)
        // truncates on SQLite and rounds on Postgres.
        let groups: Vec<(String, Option<bool>, Option<String>, Option<i64>, i64, i64)> = query_as(
            "SELECT phase, auto_approved, guardrail, \
             CAST(CASE WHEN effectiveness IS NULL THEN NULL \
             WHEN effectiveness >= 0.8 THEN 4 WHEN effectiveness >= 0.6 THEN 3 \
             WHEN effectiveness >= 0.4 THEN 2 WHEN effectiveness >= 0.2 THEN 1 \
             ELSE 0 END AS BIGINT), count(*), count(ttr_ms) \
             FROM remediation_requests WHERE created_at >= $1 GROUP BY 1, 2, 3, 4",
        )
        .arg(since_ts.clone())
        .fetch_all(self.reads())
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
            if let Some(slot) = bin.and_then(|b| effectiveness.get_mut(b.clamp(0, 4) as usize)) {
                *slot += n;
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
            let (ms,): (i64,) = query_as(
                "SELECT ttr_ms FROM remediation_requests \
                 WHERE created_at >= $1 AND phase = 'Completed' AND ttr_ms IS NOT NULL \
                 ORDER BY ttr_ms LIMIT 1 OFFSET $2",
            )
            .arg(since_ts.clone())
            .arg(completed / 2)
            .fetch_one(self.reads())
            .await?;
            Some(ms as f64 / 1000.0)
        };
        let tokens_per_day: Vec<(String, i64)> = query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {} AS day, CAST(sum(tokens) AS BIGINT) FROM remediation_requests \
             WHERE created_at >= $1 AND tokens > 0 GROUP BY 1 ORDER BY 1",
            D::DAY_OF_CREATED_AT
        )))
        .arg(since_ts)
        .fetch_all(self.reads())
        .await?;
        Ok(Summary {
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

    async fn signal_resolved_since(&self, fingerprint: &str, since: DateTime<Utc>) -> Result<bool> {
        let (n,): (i64,) = query_as(
            "SELECT count(*) FROM signals WHERE fingerprint = $1 \
             AND status = 'resolved' AND (resolved_at >= $2 OR ends_at >= $2)",
        )
        .arg(fingerprint)
        .arg(D::ts(since))
        .fetch_one(self.reads())
        .await?;
        Ok(n > 0)
    }
}
