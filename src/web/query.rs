//! What the API and the pages read alike: query parameters (paging, the request filters,
//! times, periods) and views of the state (the loaded policy). Both sides import this file;
//! it imports neither.

use std::collections::HashMap;

use super::{ApiError, AppState};
use crate::domain::Phase;
use crate::store::{Cursor, RequestFilter};

const DEFAULT_LIMIT: i64 = 50;
pub const MAX_LIMIT: i64 = 500;

pub fn paging(q: &HashMap<String, String>) -> Result<(i64, i64), ApiError> {
    let number = |key: &str, default: i64, max: i64| -> Result<i64, ApiError> {
        match q.get(key) {
            None => Ok(default),
            Some(raw) => match raw.parse::<i64>() {
                Ok(n) if (0..=max).contains(&n) => Ok(n),
                _ => Err(ApiError::bad(
                    key,
                    format!("`{raw}` is not an integer in 0..={max}"),
                )),
            },
        }
    };
    Ok((
        number("limit", DEFAULT_LIMIT, MAX_LIMIT)?,
        number("offset", 0, i64::MAX)?,
    ))
}

pub fn reject_unknown(q: &HashMap<String, String>, known: &[&str]) -> Result<(), ApiError> {
    match q.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(ApiError::bad(
            k,
            format!("unknown query parameter; known: {}", known.join(", ")),
        )),
        None => Ok(()),
    }
}

/// The request filters of the list page and `GET /api/v1/requests`, parsed from a query.
pub fn request_filter(q: &HashMap<String, String>) -> Result<RequestFilter, ApiError> {
    reject_unknown(
        q,
        &[
            "phase",
            "namespace",
            "target",
            "alert",
            "since",
            "until",
            "before",
            "limit",
        ],
    )?;
    let given = |key: &str| q.get(key).map(|v| v.trim()).filter(|v| !v.is_empty());
    let phase = match given("phase") {
        None => None,
        Some(p) => Some(Phase::parse(p).ok_or_else(|| {
            ApiError::bad(
                "phase",
                format!("`{p}` is not a phase (e.g. Received, Completed)"),
            )
        })?),
    };
    let time = |key: &str| -> Result<Option<chrono::DateTime<chrono::Utc>>, ApiError> {
        given(key)
            .map(|raw| parse_time(raw).ok_or_else(|| {
                ApiError::bad(
                    key,
                    format!("`{raw}` is not a time (RFC 3339, e.g. 2026-11-23T08:00:00Z, or a date like 2026-11-23)"),
                )
            }))
            .transpose()
    };
    let before = given("before")
        .map(|c| {
            Cursor::decode(c).ok_or_else(|| {
                ApiError::bad("before", "not a cursor from a previous page's `next`")
            })
        })
        .transpose()?;
    let (limit, _) = paging(q)?;
    Ok(RequestFilter {
        phase,
        namespace: given("namespace").map(str::to_owned),
        target: given("target").map(str::to_owned),
        signal_name: given("alert").map(str::to_owned),
        since: time("since")?,
        until: time("until")?,
        before,
        limit,
    })
}

/// RFC 3339, or a bare date (its midnight UTC).
pub fn parse_time(raw: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(raw) {
        return Some(t.with_timezone(&chrono::Utc));
    }
    if let Ok(t) = chrono::NaiveDateTime::parse_from_str(raw, "%Y-%m-%dT%H:%M") {
        return Some(t.and_utc());
    }
    chrono::NaiveDate::parse_from_str(raw, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc())
}

/// The periods offered, as (query value, label, days).
pub const PERIODS: [(&str, &str, Option<i64>); 4] = [
    ("1d", "24 hours", Some(1)),
    ("7d", "7 days", Some(7)),
    ("30d", "30 days", Some(30)),
    ("all", "all time", None),
];

/// The `since` of a period value (`7d` when absent); an unknown value is an error.
pub fn period_since(
    raw: Option<&str>,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(&'static str, Option<chrono::DateTime<chrono::Utc>>), ApiError> {
    let raw = raw.unwrap_or("7d");
    PERIODS
        .iter()
        .find(|(v, _, _)| *v == raw)
        .map(|(v, _, days)| (*v, days.map(|d| now - chrono::Duration::days(d))))
        .ok_or_else(|| ApiError::bad("period", format!("`{raw}` is not one of 1d, 7d, 30d, all")))
}

/// The loaded policy as the page and the API show it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PolicyInfo {
    pub revision: Option<String>,
    pub dir: String,
    pub problem: Option<String>,
    pub files: Vec<String>,
    /// The files as they are on disk now (the loaded revision unless they changed since).
    pub sources: Vec<(String, String)>,
    pub on_disk_revision: Option<String>,
    /// Where the policy in force comes from: the directory, or ApprovalPolicy objects over it.
    pub origin: String,
    /// The modules ApprovalPolicy objects put over the directory's.
    pub from_objects: Vec<String>,
}

pub fn policy_view(state: &AppState) -> Option<PolicyInfo> {
    let gate = state.policy.as_ref()?;
    let snapshot = gate.snapshot();
    let on_disk = crate::policy::PolicySources::read(snapshot.dir()).ok();
    Some(PolicyInfo {
        revision: snapshot.revision().map(str::to_owned),
        dir: snapshot.dir().display().to_string(),
        problem: gate.problem(),
        files: snapshot.files().to_vec(),
        on_disk_revision: on_disk.as_ref().map(|s| s.revision.clone()),
        sources: on_disk.map(|s| s.files).unwrap_or_default(),
        origin: gate.origin(),
        from_objects: gate
            .overlay()
            .map(|o| o.files.into_iter().map(|(n, _)| n).collect())
            .unwrap_or_default(),
    })
}
