//! Investigating by dependencies and changes (issue 26, item 3): when no specific rule decides,
//! follow what the failing thing depends on and what changed just before it failed.
//!
//! Input: the verified target, the signal, and a reader (shared with the rest of the
//! investigation, so each object is read once). Output: a [`Neighbourhood`] — the target's
//! dependencies as a typed list of [`Dependency`] nodes, each saying how it relates to the
//! target, whether it is unhealthy now (and since when), and whether it changed shortly before
//! the failures began — ranked, best-supported culprit first; and [`Neighbourhood::explain`],
//! the reason a human reads ("Service ledger-db has no ready endpoints since 10:02; its
//! Deployment was scaled to 0 at 10:01; ledger's pods fail since 10:02").
//!
//! One adapter per kind of dependency (`hosts`, `nodes`, `storage`, `config`, `network`,
//! `admission`, `access`, `injection`, `quota`, `scaling`, `services`), each reading only what its kind needs and only
//! when the failure points its way; no adapter knows an incident class. Text found in logs or
//! objects is only matched against object names in the cluster, never followed as an
//! instruction.
//!
//! Invariants: read-only; an adapter that cannot read something leaves its node out (a gap is
//! never a finding); the ranking prefers what is unhealthy now, then what changed just before
//! the onset, then what is closest to the target.

pub(super) mod adapters;
mod hosts;

use std::fmt::Write as _;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::Value;

pub use crate::domain::{Change, DepKind, Dependency, Neighbourhood};

use crate::cluster::obj::{self, str_at};
use crate::cluster::observed::{self, time};
use crate::cluster::{ClusterError, ClusterReader, ErrorKind, ListQuery, LogQuery};
use crate::domain::Target;

/// What the adapters share: the reader, the target and its pods, the failures' text.
pub(crate) struct Ctx {
    pub r: Arc<dyn ClusterReader>,
    pub target: Target,
    pub ns: Option<String>,
    pub now: DateTime<Utc>,
    /// The target object (None for a gone one).
    pub object: Option<Value>,
    /// The target's pods, as of `now`, having heeded the warnings about them.
    pub pods: Vec<observed::Pod>,
    /// All events of the namespace.
    pub all_events: Vec<Value>,
    /// Text of the failing containers' logs (last lines) and their warnings.
    pub failure_text: String,
    /// Pods of the target that fail (names).
    pub failing: Vec<String>,
    /// When the failures began ([`Neighbourhood::onset`]).
    pub onset: Option<DateTime<Utc>>,
}

pub(crate) type Read<T> = Result<T, ClusterError>;

/// How long one log read may take.
pub(crate) const LOG_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// A connection's timeout in a client's words (Go's `i/o timeout`, gRPC's `deadline exceeded`,
/// Envoy's `upstream request timeout`).
pub const TIMED_OUT: &[&str] = &["i/o timeout", "timed out", "timeout", "deadline exceeded"];
/// A connection that finds no route to its peer.
pub const NO_ROUTE: &[&str] = &["no route to host", "unreachable"];
/// A connection the peer refused (nothing listens, or a policy that rejects).
pub const REFUSED: &[&str] = &["connection refused", "econnrefused"];

impl Ctx {
    pub async fn list(&self, kind: &str, ns: Option<&str>, q: &ListQuery) -> Read<Vec<Value>> {
        let res = self.r.resource(kind).await?;
        self.r.list(&res, ns, q).await
    }

    /// A list that may be refused or not served: empty then (a gap is not a finding).
    pub async fn list_or_empty(&self, kind: &str, ns: Option<&str>) -> Read<Vec<Value>> {
        match self.list(kind, ns, &ListQuery::default()).await {
            Ok(v) => Ok(v),
            Err(e) if e.is_unreachable() => Err(e),
            Err(_) => Ok(vec![]),
        }
    }

    pub async fn get(&self, kind: &str, ns: Option<&str>, name: &str) -> Read<Option<Value>> {
        let res = match self.r.resource(kind).await {
            Ok(r) => r,
            Err(e) if e.is_unreachable() => return Err(e),
            Err(_) => return Ok(None),
        };
        match self.r.get(&res, ns, name).await {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.is_unreachable() => Err(e),
            Err(e) if e.kind == ErrorKind::NotFound => Ok(None),
            Err(_) => Ok(None),
        }
    }

    /// Whether the failures' text mentions any of `words` (lower-case).
    pub fn says(&self, words: &[&str]) -> bool {
        let t = self.failure_text.to_ascii_lowercase();
        words.iter().any(|w| t.contains(w))
    }

    /// Whether the failures are connections that time out or find no route ([`TIMED_OUT`],
    /// [`NO_ROUTE`]): what a NetworkPolicy that drops packets looks like from either side. The
    /// egress policy of the pods and the ingress policy behind a Service both ask it.
    pub fn timing_out(&self) -> bool {
        self.says(TIMED_OUT) || self.says(NO_ROUTE)
    }

    /// Whether the failures are connections that fail at all: time out, find no route, or are
    /// refused ([`REFUSED`]). Only then are the NetworkPolicies selecting the pods looked at.
    pub fn connecting_fails(&self) -> bool {
        self.timing_out() || self.says(REFUSED)
    }

    /// The first line of the failures' text that mentions `word` (quoted as evidence).
    pub fn line_with(&self, word: &str) -> Option<String> {
        let w = word.to_ascii_lowercase();
        self.failure_text
            .lines()
            .find(|l| l.to_ascii_lowercase().contains(&w))
            .map(|l| l.trim().chars().take(200).collect())
    }

    /// Events (any type) whose involved object is `kind/name`.
    pub fn events_of<'a>(
        &'a self,
        kind: &'a str,
        name: &'a str,
    ) -> impl Iterator<Item = &'a Value> + 'a {
        self.all_events
            .iter()
            .filter(move |e| observed::event_subject(e) == (kind, name))
    }
}

/// When an event last happened, as the model reads it ([`observed::Event`]).
pub(crate) fn event_time(e: &Value) -> Option<DateTime<Utc>> {
    observed::Event::parse(e).last
}

/// When an event first happened, as the model reads it (its last time when only that is
/// recorded).
pub(crate) fn event_first(e: &Value) -> Option<DateTime<Utc>> {
    let e = observed::Event::parse(e);
    e.first.or(e.last)
}

pub(crate) use observed::last_change;

/// Read the target's neighbourhood. `pods`/`events` may be what the caller already read (the
/// same objects the reader would return); `logs` the failing containers' last lines.
pub async fn build(
    r: Arc<dyn ClusterReader>,
    target: &Target,
    now: DateTime<Utc>,
) -> Result<Neighbourhood, ClusterError> {
    let ns = target.namespace.clone();
    let object = match r.resource(&target.kind).await {
        Ok(res) => match r.get(&res, ns.as_deref(), &target.name).await {
            Ok(o) => Some(o),
            Err(e) if e.is_unreachable() => return Err(e),
            Err(_) => None,
        },
        Err(e) if e.is_unreachable() => return Err(e),
        Err(_) => None,
    };
    let pods = match (&object, target.kind.as_str()) {
        (Some(o), "Pod") => vec![o.clone()],
        (Some(o), kind) => match if kind == "Service" {
            observed::Service::parse(o)
                .label_selector()
                .filter(|s| !s.is_empty())
        } else {
            observed::pod_selector(o)
        } {
            Some(sel) => {
                let res = r.resource("Pod").await?;
                match r
                    .list(&res, ns.as_deref(), &ListQuery::labels(sel.to_query()))
                    .await
                {
                    // A Service's pods are whatever it selects; a workload's, its own.
                    Ok(p) if kind == "Service" => p,
                    Ok(p) => p.into_iter().filter(|p| observed::its_pod(o, p)).collect(),
                    Err(e) if e.is_unreachable() => return Err(e),
                    Err(_) => vec![],
                }
            }
            _ => vec![],
        },
        _ => vec![],
    };
    let all_events = match &ns {
        Some(n) => {
            let res = r.resource("Event").await?;
            match r.list(&res, Some(n), &ListQuery::default()).await {
                Ok(e) => e,
                Err(e) if e.is_unreachable() => return Err(e),
                Err(_) => vec![],
            }
        }
        None => vec![],
    };
    let pod_names: Vec<&str> = pods.iter().map(obj::name).collect();
    let own = |e: &Value| {
        observed::about_workload(observed::event_subject(e).1, &target.name, &pod_names)
    };
    let events: Vec<Value> = all_events
        .iter()
        .filter(|e| own(e) && str_at(e, &["type"]) == Some("Warning"))
        .cloned()
        .collect();
    // The pods, parsed once as of `now`, having heeded the warnings about them (a pod seconds
    // into ContainerCreating with a FailedAttachVolume is failing to start).
    let warnings: Vec<observed::Event> = events.iter().map(observed::Event::parse).collect();
    let pods: Vec<observed::Pod> = pods
        .iter()
        .map(|p| observed::Pod::at(p, now).heed(&warnings))
        .collect();
    let failures: Vec<(&observed::Pod, observed::Failure)> = pods
        .iter()
        .filter_map(|p| Some((p, p.failure()?)))
        .collect();
    let failing: Vec<String> = failures.iter().map(|(p, _)| p.name.clone()).collect();
    // The failures' own words: the failing containers' last log lines, and the warnings.
    let mut text = String::new();
    // The first two failing pods with a container whose log shows it (a pod still being
    // created has none yet).
    let logged = failures.iter().filter_map(|(p, _)| {
        let logs = p.failure_logs();
        (!logs.is_empty()).then_some((p.name.as_str(), logs))
    });
    for (name, logs) in logged.take(2) {
        for c in logs {
            let q = LogQuery {
                container: Some(c.container),
                previous: c.previous,
                tail_lines: Some(observed::FAILURE_LOG_LINES),
                since_seconds: None,
            };
            // A log that does not come (a kubelet that does not answer) is a gap, not a
            // reason to stall the investigation.
            match tokio::time::timeout(LOG_TIMEOUT, r.logs(ns.as_deref().unwrap_or(""), name, &q))
                .await
            {
                Ok(Ok(l)) => {
                    text.push_str(&l);
                    text.push('\n');
                }
                Ok(Err(e)) if e.is_unreachable() => return Err(e),
                Ok(Err(_)) | Err(_) => {}
            }
        }
    }
    for e in &warnings {
        let _ = writeln!(text, "{}: {}", e.reason, e.message);
    }
    let onset = super::findings::first_onset(failures.iter().map(|(p, _)| *p), &warnings);
    let symptoms: Vec<String> = failures
        .iter()
        .map(|(p, f)| format!("pod {}: {f}", p.name))
        .take(3)
        .collect();
    // Wedged, not broken ([`observed::Pod::wedged`]): every failing pod runs, not ready, after
    // it was ready once.
    let failing_pods_run = !failures.is_empty()
        && failures
            .iter()
            .all(|(p, f)| f.kind == observed::FailureKind::NotReady && p.wedged());
    let ctx = Ctx {
        r,
        target: target.clone(),
        ns,
        now,
        object,
        pods,
        all_events,
        failure_text: crate::redact::sanitize_text(&text),
        failing,
        onset,
    };
    let mut deps = Vec::new();
    deps.extend(hosts::follow(&ctx).await?);
    deps.extend(adapters::nodes(&ctx).await?);
    deps.extend(adapters::storage(&ctx).await?);
    let config = adapters::config(&ctx, &deps).await?;
    deps.extend(config);
    let behind = adapters::ingress_behind(&ctx, &deps).await?;
    deps.extend(adapters::network(&ctx).await?);
    deps.extend(behind);
    deps.extend(adapters::admission(&ctx).await?);
    deps.extend(adapters::access(&ctx).await?);
    deps.extend(adapters::injection(&ctx).await?);
    deps.extend(adapters::quota(&ctx).await?);
    deps.extend(adapters::scaling(&ctx).await?);
    deps.extend(adapters::services(&ctx).await?);
    deps.extend(adapters::rollout(&ctx).await?);
    deps.extend(adapters::probes(&ctx).await?);
    let mut n = Neighbourhood {
        target: format!(
            "{} {}",
            target.kind,
            match &target.namespace {
                Some(ns) => format!("{ns}/{}", target.name),
                None => target.name.clone(),
            }
        ),
        onset,
        symptoms,
        failing_pods_run,
        dependencies: deps,
    };
    n.rank(now);
    Ok(n)
}
