//! The Verifying stage (DESIGN §3.7): after the stabilisation window, did the remediation
//! help? Then remember it.
//!
//! Input: a request in `Verifying` with its [`Execution`]. Until `finished_at + window` the
//! stage asks to be run again at that time. Then it assesses the verified root owner (the
//! effectiveness monitor's defaults):
//! - health 0–1 from the pods (1.0 all ready; 0.75 ready but restarted since the remediation;
//!   0.5 partially ready; 0.25 ready but OOMKilled since; 0 crash-looping, none ready or the
//!   target gone), from the Node's readiness, from the PVC's phase;
//! - alert 1 when a resolved notification of the signal arrived after the execution began, or
//!   when Alertmanager (`--alertmanager-url`) no longer lists the alert among its active ones;
//!   else 0. Alertmanager unreachable: the notification record alone counts, and the details
//!   say so — an unanswered question is never a resolved alert;
//! - metrics, when Prometheus is configured (`--prometheus-url`): the alert's own expression
//!   (the `g0.expr` of its `generatorURL`) evaluated now; 1 when none of the series it gives is
//!   the alert's, 0 when one still is. No expression, or Prometheus unreachable: not assessed;
//! - the spec hash now: different from the one the execution left means somebody else changed
//!   the target during the window — `SpecDrift`, inconclusive and not effective.
//!
//! Output: an [`Assessment`] (score = weighted mean of the assessed parts: health 0.40,
//! alert 0.35, metrics 0.25), a history entry in the store (what the next investigation of the
//! target and the guardrails read), an `assessment` audit event, and `Completed` with the
//! verdict as its reason. A dry run is completed with a `NoExecution` assessment and no history.
//!
//! Made worse (docs/adr/0035-undo-what-made-it-worse.md, `worse`): a workload whose pods are
//! worse than the execution recorded before its first write (fewer ready, more failing, a new
//! failure cause) is not effective and not `Completed`: the request carries an `Undo` and goes
//! back to `Executing` when the setting, the action and the policy's rule `undo` allow
//! restoring the recorded spec, else to `ManualReviewRequired`, the approvers told.
//!
//! Outcome learning (docs/adr/0024-outcome-learning.md): an assessment of a real execution —
//! effective or not, spec drift excepted (it measured somebody else's change) — is also
//! written as a [`PatternOutcome`] under the signature the investigation recorded, with the
//! workflow that ran (an approver's alternative, and what it replaced), and audited as
//! `pattern_learned`. Nothing else writes a pattern.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};
use tracing::{info, instrument, warn};

use crate::clock::Clock;
use crate::cluster::context::{spec_hash, unchanged_spec};
use crate::cluster::observed;
use crate::cluster::observed::OOM_KILL_EVENT;
use crate::cluster::{ClusterReader, ErrorKind, ListQuery};
use crate::domain::audit;
use crate::domain::{
    Assessment, AssessmentReason, AuditDraft, DEFAULT_EFFECTIVENESS_THRESHOLD, Execution,
    ExecutionOutcome, HistoryOutcome, HistoryRecord, PatternOutcome, Phase, RemediationRequest,
    SignalSource, Stage, StageError, StageOutcome, Target, TargetHealth,
};
use crate::monitoring::{AlertmanagerClient, Endpoint, PrometheusClient, expression};
use crate::policy::RegoGate;
use crate::prove::findings;
use crate::store::{Approvals, History, Patterns, Requests, Store};
use crate::telemetry::Metrics;

mod worse;

const HEALTH_WEIGHT: f64 = 0.40;
const ALERT_WEIGHT: f64 = 0.35;
const METRICS_WEIGHT: f64 = 0.25;

/// The verification settings.
#[derive(Debug, Clone, PartialEq)]
pub struct VerifySettings {
    /// How long the target is left to settle before it is assessed.
    pub window: Duration,
    /// At or above this score a remediation is effective.
    pub effectiveness_threshold: f64,
    /// Alertmanager's API, asked whether the alert still fires.
    pub alertmanager: Option<Endpoint>,
    /// Prometheus' API, asked whether the alert's condition still holds.
    pub prometheus: Option<Endpoint>,
    /// Restore the recorded spec of a target a remediation made worse, when the policy's
    /// `undo` rule says so (off: such a request only goes to a person).
    pub undo_worse: bool,
}

impl VerifySettings {
    /// Seconds a remediated target settles before it is assessed, unless configured.
    pub const DEFAULT_WINDOW_SECONDS: u64 = 300;
}

impl Default for VerifySettings {
    fn default() -> Self {
        Self {
            window: Duration::seconds(Self::DEFAULT_WINDOW_SECONDS as i64),
            effectiveness_threshold: DEFAULT_EFFECTIVENESS_THRESHOLD,
            alertmanager: None,
            prometheus: None,
            undo_worse: true,
        }
    }
}

/// A configured monitoring client, or why it could not be built (then reported as not asked).
type Client<C> = Option<Result<C, String>>;

/// What verification uses of the store: whether the alert's resolved notification arrived
/// (requests), the history entry and the learned outcome it writes.
#[derive(Clone)]
pub struct VerifyStore {
    pub requests: Arc<dyn Requests>,
    pub history: Arc<dyn History>,
    pub patterns: Arc<dyn Patterns>,
    /// Tells the approvers of a remediation that made its target worse.
    pub approvals: Arc<dyn Approvals>,
}

impl From<Arc<dyn Store>> for VerifyStore {
    fn from(s: Arc<dyn Store>) -> Self {
        Self {
            requests: s.clone(),
            history: s.clone(),
            patterns: s.clone(),
            approvals: s,
        }
    }
}

impl<S: Store + 'static> From<Arc<S>> for VerifyStore {
    fn from(s: Arc<S>) -> Self {
        Self {
            requests: s.clone(),
            history: s.clone(),
            patterns: s.clone(),
            approvals: s,
        }
    }
}

/// The outcome to learn from a verified execution: `None` without a signature (the target was
/// never verified, or the request predates learning) or when the assessment measured nothing
/// kubemedic did (spec drift, a dry run).
pub fn outcome_to_learn(
    request: &RemediationRequest,
    execution: &Execution,
    assessment: &Assessment,
) -> Option<PatternOutcome> {
    if matches!(
        assessment.reason,
        AssessmentReason::SpecDrift | AssessmentReason::NoExecution
    ) || execution.outcome == ExecutionOutcome::DryRun
    {
        return None;
    }
    let signature = request.state.analysis.as_ref()?.signature.clone()?;
    Some(PatternOutcome {
        request_id: request.id,
        signature,
        workflow_id: execution.workflow_id.clone(),
        action_type: execution.action_type.clone(),
        replaced: request
            .state
            .selection
            .as_ref()
            .and_then(|s| s.replaced.clone()),
        target: execution.target.clone(),
        effective: assessment.effective,
        score: assessment.score,
        recorded_at: assessment.assessed_at,
    })
}

pub struct VerificationStage {
    reader: Arc<dyn ClusterReader>,
    store: VerifyStore,
    clock: Arc<dyn Clock>,
    settings: VerifySettings,
    alertmanager: Client<AlertmanagerClient>,
    prometheus: Client<PrometheusClient>,
    metrics: Option<Arc<Metrics>>,
    /// Asked whether to undo a remediation that made its target worse; none: never undone.
    policy: Option<Arc<RegoGate>>,
}

/// The health part of the score of a node: Ready with nothing its conditions show wrong
/// ([`observed::Node::trouble`], what "healthy again" and the drain's proof ask) and a
/// readiness that does not flap (`flaps`: [`findings::flaps`] of its events, which the
/// "resolved" proof and the node rules ask), Ready but under a pressure or a problem condition
/// or flapping, or not Ready.
pub fn node_health(node: &observed::Node, flaps: Option<&str>) -> (f64, String) {
    match (node.ready, node.trouble(), flaps) {
        (true, None, None) => (1.0, format!("Node {} Ready", node.name)),
        (true, Some((trouble, _)), _) => (0.5, format!("Node {} Ready, but {trouble}", node.name)),
        (true, None, Some(flaps)) => (0.5, format!("Node {} Ready, but {flaps}", node.name)),
        (false, _, _) => (0.0, format!("Node {} not Ready", node.name)),
    }
}

impl VerificationStage {
    pub fn new(
        reader: Arc<dyn ClusterReader>,
        store: impl Into<VerifyStore>,
        clock: Arc<dyn Clock>,
        settings: VerifySettings,
    ) -> Self {
        let store = store.into();
        // A client that cannot be built is reported in every assessment (and here, once); it
        // never stops verification.
        let alertmanager = settings.alertmanager.clone().map(|e| {
            AlertmanagerClient::new(e).map_err(|e| {
                warn!(error = %e, "Alertmanager will not be asked during verification");
                e.to_string()
            })
        });
        let prometheus = settings.prometheus.clone().map(|e| {
            PrometheusClient::new(e).map_err(|e| {
                warn!(error = %e, "Prometheus will not be asked during verification");
                e.to_string()
            })
        });
        Self {
            reader,
            store,
            clock,
            settings,
            alertmanager,
            prometheus,
            metrics: None,
            policy: None,
        }
    }

    /// Ask `gate`'s policy (its rule `undo`) whether to undo a remediation that made its
    /// target worse.
    pub fn with_policy(mut self, gate: Arc<RegoGate>) -> Self {
        self.policy = Some(gate);
        self
    }

    /// Count assessment verdicts in `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }
}

fn unavailable(dependency: &str, message: String) -> StageError {
    StageError::Unavailable {
        dependency: dependency.into(),
        message,
    }
}

/// The score: the weighted mean of the parts that were assessed (health 0.40, alert 0.35,
/// metrics 0.25), to two decimals; `None` when none was.
pub fn score(health: Option<f64>, alert: Option<f64>, metrics: Option<f64>) -> Option<f64> {
    let parts = [
        (HEALTH_WEIGHT, health),
        (ALERT_WEIGHT, alert),
        (METRICS_WEIGHT, metrics),
    ];
    let (sum, weights) = parts
        .iter()
        .filter_map(|(w, part)| part.map(|p| (w * p, *w)))
        .fold((0.0, 0.0), |(s, ws), (p, w)| (s + p, ws + w));
    (weights > 0.0).then(|| (sum / weights * 100.0).round() / 100.0)
}

/// What Alertmanager said about the signal.
enum AlertmanagerView {
    /// No `--alertmanager-url`.
    NotConfigured,
    /// Configured, but this signal is not Alertmanager's to know (a native signal).
    NotItsSignal,
    StillFiring,
    NoLongerFiring,
    /// Not asked or no answer: why.
    Unanswered(String),
}

/// The alert part: 1 when the signal resolved (a resolved notification since the remediation
/// began, or Alertmanager no longer lists it), else 0; with its detail line.
fn alert_part(notified: bool, view: &AlertmanagerView) -> (f64, String) {
    const NOTIFIED: &str = "resolved after the remediation";
    const NOT_NOTIFIED: &str = "no resolved notification since the remediation";
    const NOT_ITS: &str = "not an Alertmanager alert, so Alertmanager was not asked";
    match (view, notified) {
        (AlertmanagerView::NoLongerFiring, _) => (
            1.0,
            "alert: Alertmanager reports it no longer firing".to_owned(),
        ),
        (AlertmanagerView::StillFiring, true) => (
            1.0,
            format!("alert: {NOTIFIED} (Alertmanager reports it firing again)"),
        ),
        (AlertmanagerView::StillFiring, false) => (
            0.0,
            format!("alert: still firing in Alertmanager; {NOT_NOTIFIED}"),
        ),
        (AlertmanagerView::Unanswered(why), true) => (
            1.0,
            format!("alert: {NOTIFIED} (no answer from Alertmanager: {why})"),
        ),
        (AlertmanagerView::Unanswered(why), false) => (
            0.0,
            format!(
                "alert: {NOT_NOTIFIED}; no answer from Alertmanager ({why}), so the \
                 notifications alone count"
            ),
        ),
        (AlertmanagerView::NotItsSignal, true) => (1.0, format!("alert: {NOTIFIED} ({NOT_ITS})")),
        (AlertmanagerView::NotItsSignal, false) => {
            (0.0, format!("alert: {NOT_NOTIFIED} ({NOT_ITS})"))
        }
        (AlertmanagerView::NotConfigured, true) => (1.0, format!("alert: {NOTIFIED}")),
        (AlertmanagerView::NotConfigured, false) => (0.0, format!("alert: {NOT_NOTIFIED}")),
    }
}

/// An expression as the details show it: on one line, at most 200 characters.
fn shown(expr: &str) -> String {
    let one_line = expr.split_whitespace().collect::<Vec<_>>().join(" ");
    match one_line.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &one_line[..i]),
        None => one_line,
    }
}

/// The health part of the score from the pods of a workload, as of `now`, with what it rests
/// on. The pods are read through the model ([`observed::Pod`]): failing is what
/// [`observed::Pod::broken`] says (a crash loop, an image that cannot be pulled, an init
/// container that fails, a pod stuck creating), the undo's and the proofs' definition; a
/// restart is a container whose latest termination came after `since`; a kill for memory is
/// what [`observed::Pod::memory_kills`] says of the pods and the warnings about them in
/// `events` (the OOM rule's and the memory proof's definition). `wanted`, for a workload, is
/// the pods it is meant to run ([`observed::Workload::wanted`]): all its pods ready but fewer
/// than that is not healthy again, as the "resolved" proof's desired state says.
pub fn pods_health(
    pods: &[observed::Pod],
    events: &[observed::Event],
    wanted: Option<i64>,
    since: DateTime<Utc>,
) -> (f64, String) {
    // A pod its node ended is a record its controller replaced, not a replica.
    let live: Vec<&observed::Pod> = pods
        .iter()
        .filter(|p| !p.deleting && !p.outlived())
        .collect();
    if live.is_empty() {
        return (0.0, "no pods".into());
    }
    let n = live.len();
    let ready_n = live.iter().filter(|p| p.ready).count();
    let failing: Vec<observed::Failure> = live.iter().filter_map(|p| p.broken()).collect();
    let after = |t: Option<DateTime<Utc>>| t.is_some_and(|t| t > since);
    let restarted = live.iter().flat_map(|p| &p.containers).any(|c| {
        c.exited_since(since)
            .is_some_and(|(_, _, t)| after(Some(t)))
    });
    let oom = live
        .iter()
        .flat_map(|p| p.memory_kills(events))
        .any(|(_, t)| after(t));
    if !failing.is_empty() {
        let causes: std::collections::BTreeSet<&str> =
            failing.iter().map(|f| f.cause.as_str()).collect();
        let causes: Vec<&str> = causes.into_iter().collect();
        return (
            0.0,
            format!(
                "{} of {n} pods failing ({})",
                failing.len(),
                causes.join(", ")
            ),
        );
    }
    if ready_n == 0 {
        return (0.0, format!("none of {n} pods ready"));
    }
    if ready_n < n {
        return (0.5, format!("{ready_n} of {n} pods ready"));
    }
    if let Some(w) = wanted.filter(|w| (ready_n as i64) < *w) {
        return (
            0.5,
            format!("{ready_n} pods ready of the {w} the workload is meant to run"),
        );
    }
    if oom {
        return (
            0.25,
            format!("all {n} pods ready, but OOMKilled since the remediation"),
        );
    }
    if restarted {
        return (
            0.75,
            format!("all {n} pods ready, but restarted since the remediation"),
        );
    }
    (
        1.0,
        format!("all {n} pods ready, no restart since the remediation"),
    )
}

impl VerificationStage {
    /// Whether node `name`'s readiness flaps ([`findings::flaps`]), from its events; an event
    /// list the server cannot read reads as no flaps (the conditions still judge the node). A
    /// server that refuses the field selector on events gets the `default` namespace's, where
    /// node events are recorded, as the proofs' scene reads them.
    async fn node_flaps(&self, name: &str) -> Result<Option<String>, StageError> {
        let res = match self.reader.resource("Event").await {
            Ok(r) => r,
            Err(e) if e.is_unreachable() => return Err(unavailable("cluster", e.message)),
            Err(_) => return Ok(None),
        };
        let query = ListQuery::fields(format!(
            "involvedObject.kind=Node,involvedObject.name={name}"
        ));
        match self.reader.list(&res, None, &query).await {
            Ok(events) => {
                let events: Vec<_> = events.iter().map(observed::Event::parse).collect();
                Ok(findings::flaps(self.clock.now(), &events, name))
            }
            Err(e) if e.is_unreachable() => Err(unavailable("cluster", e.message)),
            Err(e) if e.kind == ErrorKind::Invalid => {
                match self
                    .reader
                    .list(&res, Some("default"), &ListQuery::default())
                    .await
                {
                    Ok(events) => {
                        let events: Vec<_> = events.iter().map(observed::Event::parse).collect();
                        Ok(findings::flaps(self.clock.now(), &events, name))
                    }
                    Err(e) if e.is_unreachable() => Err(unavailable("cluster", e.message)),
                    Err(_) => Ok(None),
                }
            }
            Err(_) => Ok(None),
        }
    }

    /// The kernel's warnings that a container was killed for memory ([`OOM_KILL_EVENT`]) in the
    /// target's namespace, read only when a pod's container was killed (exit 137) since the
    /// remediation without its status saying `OOMKilled`: some runtimes report such a kill so.
    async fn kill_reports(
        &self,
        target: &Target,
        pods: &[observed::Pod],
        since: DateTime<Utc>,
    ) -> Result<Vec<observed::Event>, StageError> {
        let unexplained = pods
            .iter()
            .flat_map(|p| &p.containers)
            .any(|c| {
                matches!(&c.terminated, Some((r, code, t))
                    if *code == observed::SIGKILL_EXIT && r != "OOMKilled" && t.is_some_and(|t| t > since))
            });
        if !unexplained {
            return Ok(Vec::new());
        }
        let res = match self.reader.resource("Event").await {
            Ok(r) => r,
            Err(e) if e.is_unreachable() => return Err(unavailable("cluster", e.message)),
            Err(_) => return Ok(Vec::new()),
        };
        let query = ListQuery::fields(format!("reason={OOM_KILL_EVENT}"));
        match self
            .reader
            .list(&res, target.namespace.as_deref(), &query)
            .await
        {
            Ok(events) => Ok(events.iter().map(observed::Event::parse).collect()),
            Err(e) if e.is_unreachable() => Err(unavailable("cluster", e.message)),
            Err(_) => Ok(Vec::new()),
        }
    }

    async fn get(&self, target: &Target) -> Result<Option<Value>, StageError> {
        let res = match self.reader.resource(&target.kind).await {
            Ok(r) => r,
            Err(e) if e.is_unreachable() => return Err(unavailable("cluster", e.message)),
            Err(_) => return Ok(None),
        };
        match self
            .reader
            .get(&res, target.namespace.as_deref(), &target.name)
            .await
        {
            Ok(o) => Ok(Some(o)),
            Err(e) if e.is_unreachable() => Err(unavailable("cluster", e.message)),
            Err(e) if e.kind == ErrorKind::NotFound => Ok(Some(Value::Null)),
            Err(_) => Ok(None),
        }
    }

    /// Health of the target: `None` when it cannot be assessed (unreadable, or a kind with no
    /// health signal here); with a workload's pods as the undo compares them.
    async fn health(
        &self,
        target: &Target,
        object: &Value,
        since: DateTime<Utc>,
    ) -> Result<(Option<(f64, String)>, Option<TargetHealth>), StageError> {
        if object.is_null() {
            return Ok((Some((0.0, format!("{target} is gone"))), None));
        }
        match target.kind.as_str() {
            "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" => {
                let now = self.clock.now();
                match crate::cluster::workload_pods(self.reader.as_ref(), target, object, now).await
                {
                    Ok(Some(pods)) => {
                        let events = self.kill_reports(target, &pods, since).await?;
                        Ok((
                            Some(pods_health(
                                &pods,
                                &events,
                                Some(observed::Workload::parse(object).wanted()),
                                since,
                            )),
                            Some(observed::target_health(object, &pods, now)),
                        ))
                    }
                    Ok(None) => Ok((None, None)),
                    Err(e) if e.is_unreachable() => Err(unavailable("cluster", e.message)),
                    Err(_) => Ok((None, None)),
                }
            }
            "Pod" => {
                let pods = [observed::Pod::at(object, self.clock.now())];
                let events = self.kill_reports(target, &pods, since).await?;
                Ok((Some(pods_health(&pods, &events, None, since)), None))
            }
            "Node" => {
                let node = observed::Node::parse(object);
                let flaps = self.node_flaps(&node.name).await?;
                Ok((Some(node_health(&node, flaps.as_deref())), None))
            }
            "PersistentVolumeClaim" => {
                let bound = observed::Claim::parse(object).bound();
                Ok((
                    Some(if bound {
                        (1.0, "PVC Bound".to_owned())
                    } else {
                        (0.0, "PVC not Bound".to_owned())
                    }),
                    None,
                ))
            }
            _ => Ok((None, None)),
        }
    }

    /// Ask Alertmanager whether the signal still fires.
    async fn alertmanager_view(&self, request: &RemediationRequest) -> AlertmanagerView {
        let Some(client) = &self.alertmanager else {
            return AlertmanagerView::NotConfigured;
        };
        if request.signal.source != SignalSource::Alertmanager {
            // Alertmanager never heard of it: its silence would prove nothing.
            return AlertmanagerView::NotItsSignal;
        }
        let client = match client {
            Ok(c) => c,
            Err(why) => return AlertmanagerView::Unanswered(why.clone()),
        };
        match client
            .firing(&request.signal.fingerprint, &request.signal.labels)
            .await
        {
            Ok(true) => AlertmanagerView::StillFiring,
            Ok(false) => AlertmanagerView::NoLongerFiring,
            Err(e) => {
                warn!(error = %e, "no usable answer from Alertmanager; the alert part rests on the notifications");
                AlertmanagerView::Unanswered(e.to_string())
            }
        }
    }

    /// The metrics part, when Prometheus is configured: the score (`None`: not assessed) and
    /// its detail line.
    async fn metrics_part(&self, request: &RemediationRequest) -> Option<(Option<f64>, String)> {
        let client = match self.prometheus.as_ref()? {
            Ok(c) => c,
            Err(why) => {
                return Some((
                    None,
                    format!("metrics: not assessed: Prometheus not asked ({why})"),
                ));
            }
        };
        let Some(expr) = request.signal.generator_url.as_deref().and_then(expression) else {
            return Some((
                None,
                "metrics: not assessed: the signal carries no expression to re-evaluate (no \
                 generatorURL with g0.expr)"
                    .to_owned(),
            ));
        };
        let holding = match client.holding(&expr, &request.signal.labels).await {
            Ok(n) => n,
            Err(e) => {
                warn!(error = %e, "no usable answer from Prometheus; metrics not assessed");
                return Some((None, format!("metrics: not assessed: {e}")));
            }
        };
        Some(if holding == 0 {
            (
                Some(1.0),
                format!(
                    "metrics: the alert's condition no longer holds in Prometheus (expr `{}`)",
                    shown(&expr)
                ),
            )
        } else {
            (
                Some(0.0),
                format!(
                    "metrics: the alert's condition still holds in Prometheus for {holding} \
                     series (expr `{}`)",
                    shown(&expr)
                ),
            )
        })
    }

    async fn assess(
        &self,
        request: &RemediationRequest,
        execution: &Execution,
        now: DateTime<Utc>,
    ) -> Result<(Assessment, Option<TargetHealth>), StageError> {
        let target = &execution.target;
        let mut details = Vec::new();
        let object = self.get(target).await?;
        let (health, after) = match &object {
            Some(o) => self.health(target, o, execution.finished_at).await?,
            None => (None, None),
        };
        match &health {
            Some((_, why)) => details.push(format!("health: {why}")),
            None => details.push(format!("health: {target} could not be assessed")),
        }
        // A question asked in a conversation has no alert that could resolve: the cluster's
        // health (and the metrics) are the judges.
        let asked = request.signal.source == SignalSource::Chat;
        let view = if asked {
            AlertmanagerView::NotItsSignal
        } else {
            self.alertmanager_view(request).await
        };
        let alert = if asked {
            details.push("alert: none (asked in a conversation, not alerted)".to_owned());
            None
        } else {
            let notified = self
                .store
                .requests
                .signal_resolved_since(&request.signal.fingerprint, execution.started_at)
                .await
                .map_err(|e| unavailable("store", e.to_string()))?;
            let (alert, why) = alert_part(notified, &view);
            details.push(why);
            Some(alert)
        };
        let metrics = self.metrics_part(request).await;
        let metrics_score = metrics.as_ref().and_then(|(m, _)| *m);
        if let Some((_, why)) = metrics {
            details.push(why);
        }
        // A configured source that could not be used leaves the assessment partial.
        let unanswered = matches!(view, AlertmanagerView::Unanswered(_))
            || (self.prometheus.is_some() && metrics_score.is_none());
        let spec = object.as_ref().and_then(|o| o.get("spec"));
        let post = spec.map(spec_hash);
        // Changed by somebody else since the remediation wrote it, as the undo and a proof's
        // binding ask: an autoscaler's scaling is not such a change, `kubectl scale` is. What
        // cannot be read counts every field (older records have only the whole-spec hash).
        let drift = match (spec, execution.post_spec_hash.as_deref()) {
            // The spec the remediation left: nothing to ask of autoscalers.
            (Some(_), Some(ours)) if post.as_deref() == Some(ours) => false,
            (Some(spec), Some(ours)) => {
                let autoscaled =
                    match crate::cluster::autoscaled(self.reader.as_ref(), &execution.target).await
                    {
                        Ok(a) => a,
                        Err(e) if e.is_unreachable() => {
                            return Err(unavailable("cluster", e.message));
                        }
                        Err(_) => false,
                    };
                !unchanged_spec(
                    Some(ours),
                    execution.post_drift_hash.as_deref(),
                    spec,
                    autoscaled,
                )
            }
            _ => false,
        };
        if drift {
            details.push("spec: changed by somebody else during the window".to_owned());
        }
        let health_score = health.as_ref().map(|(h, _)| *h);
        let score = score(health_score, alert, metrics_score);
        let reason = if drift {
            AssessmentReason::SpecDrift
        } else if health.is_none() || unanswered {
            AssessmentReason::Partial
        } else {
            AssessmentReason::Full
        };
        let assessment = Assessment {
            score,
            health_score,
            alert_score: alert,
            metrics_score,
            post_spec_hash: post,
            signal_resolved: alert.is_some_and(|a| a >= 1.0),
            reason,
            effective: !drift && score.is_some_and(|s| s >= self.settings.effectiveness_threshold),
            details,
            assessed_at: now,
        };
        Ok((assessment, after))
    }
}

/// "effective (score 0.93)", "not effective (score 0.20)", "inconclusive: spec drift".
fn verdict(a: &Assessment) -> String {
    let score = a
        .score
        .map_or_else(|| "no score".to_owned(), |s| format!("score {s:.2}"));
    let parts = a.details.join("; ");
    match a.reason {
        AssessmentReason::SpecDrift => format!("inconclusive: spec drift ({score}; {parts})"),
        _ if a.effective => format!("effective ({score}; {parts})"),
        _ => format!("not effective ({score}; {parts})"),
    }
}

#[async_trait]
impl Stage for VerificationStage {
    fn phase(&self) -> Phase {
        Phase::Verifying
    }

    #[instrument(skip_all, fields(request_id = %request.id, trace_id = %request.trace.trace_id_hex(), phase = "Verifying"))]
    async fn run(&self, request: &RemediationRequest) -> Result<StageOutcome, StageError> {
        let Some(execution) = request.state.execution.as_ref() else {
            return Err(StageError::Failed("nothing was executed to verify".into()));
        };
        let now = self.clock.now();
        let mut state = request.state.clone();
        if execution.outcome == ExecutionOutcome::DryRun {
            let assessment = Assessment {
                score: None,
                health_score: None,
                alert_score: None,
                metrics_score: None,
                post_spec_hash: None,
                signal_resolved: false,
                reason: AssessmentReason::NoExecution,
                effective: false,
                details: vec!["dry run: nothing was changed, nothing to assess".into()],
                assessed_at: now,
            };
            state.assessment = Some(assessment);
            return Ok(StageOutcome::to(
                Phase::Completed,
                Some(format!("dry run: {}", execution.message)),
                state,
                vec![],
            ));
        }
        let due = execution.finished_at + self.settings.window;
        if now < due {
            return Ok(StageOutcome::later(Phase::Verifying, state, due, vec![]));
        }
        let (mut assessment, after) = self.assess(request, execution, now).await?;
        let undo = self
            .worse(request, execution, after, assessment.reason, now)
            .await;
        if let Some(u) = &undo {
            // Worse than before is not effective, whatever the alert says.
            assessment.effective = false;
            assessment
                .details
                .push(format!("worse than before: {}", u.worse.join("; ")));
        }
        let verdict = verdict(&assessment);
        info!(score = ?assessment.score, effective = assessment.effective, worse = undo.is_some(), "assessed");
        if let Some(m) = &self.metrics {
            m.assessment(match (assessment.reason, assessment.effective, &undo) {
                (AssessmentReason::SpecDrift, _, _) => "spec_drift",
                (_, _, Some(_)) => "worse",
                (_, true, None) => "effective",
                (_, false, None) => "not_effective",
            });
        }
        let record = HistoryRecord {
            remediation_uid: request.id.to_string(),
            target: execution.target.clone(),
            completed_at: now,
            signal_name: request.signal.name.clone(),
            workflow_type: execution.action_type.clone(),
            workflow_id: execution.workflow_id.clone(),
            outcome: HistoryOutcome::Completed,
            effectiveness_score: assessment.score,
            pre_remediation_spec_hash: execution.pre_spec_hash.clone(),
            post_remediation_spec_hash: execution.post_spec_hash.clone(),
            pre_remediation_drift_hash: execution.pre_drift_hash.clone(),
            post_remediation_drift_hash: execution.post_drift_hash.clone(),
            signal_resolved: Some(assessment.signal_resolved),
            assessment_reason: Some(assessment.reason),
            health_checks: Some(json!({
                "health": assessment.health_score,
                "alert": assessment.alert_score,
                "metrics": assessment.metrics_score,
                "details": assessment.details,
            })),
        };
        if let Err(e) = self.store.history.record_history(&record).await {
            warn!(error = %e, "cannot record the remediation in the history; retrying");
            return Err(unavailable("store", e.to_string()));
        }
        let mut events = vec![
            AuditDraft::new(
                crate::domain::audit::ASSESSMENT,
                "verifier",
                verdict.clone(),
            )
            .with_payload(serde_json::to_value(&assessment).unwrap_or(Value::Null)),
        ];
        if let Some(learned) = outcome_to_learn(request, execution, &assessment) {
            match self.store.patterns.record_outcome(&learned).await {
                Ok(added) => {
                    if added {
                        events.push(learned_event(&learned));
                    }
                }
                Err(e) => {
                    warn!(error = %e, "cannot record the learned outcome; retrying");
                    return Err(unavailable("store", e.to_string()));
                }
            }
        }
        state.assessment = Some(assessment);
        let Some(undo) = undo else {
            return Ok(StageOutcome::to(
                Phase::Completed,
                Some(verdict),
                state,
                events,
            ));
        };
        events.push(worse::decided_event(&undo, execution));
        let made_worse = format!(
            "{} made {} worse: {}",
            execution.workflow_id,
            execution.target,
            undo.worse.join("; ")
        );
        let (next, reason) = if undo.decided {
            (
                Phase::Executing,
                format!(
                    "{made_worse}; undoing: restoring the spec recorded before its first write"
                ),
            )
        } else {
            (
                Phase::ManualReviewRequired,
                format!("{made_worse}; {} — a person must look", undo.decision),
            )
        };
        warn!(%reason, "remediation made its target worse");
        if !undo.decided
            && let Err(e) = self
                .store
                .approvals
                .approval_made_worse(
                    request.id,
                    &format!("{} {reason}", crate::notify::render::MADE_WORSE),
                )
                .await
        {
            warn!(error = %e, "cannot tell the approvers; retrying");
            return Err(unavailable("store", e.to_string()));
        }
        state.undo = Some(undo);
        Ok(StageOutcome::to(next, Some(reason), state, events))
    }
}

/// The `pattern_learned` audit event: what was learned, under which signature.
fn learned_event(o: &PatternOutcome) -> AuditDraft {
    let effect = if o.effective {
        "effective"
    } else {
        "ineffective: not suggested for this signature during the cooldown"
    };
    let instead = o
        .replaced
        .as_deref()
        .map(|r| format!(", chosen by an approver instead of {r}"))
        .unwrap_or_default();
    AuditDraft::typed(
        audit::PATTERN_LEARNED,
        "verifier",
        format!(
            "learned: {} ({}) on {} was {effect} (score {}){instead}",
            o.workflow_id,
            o.signature.hash,
            o.target,
            o.score
                .map_or_else(|| "none".to_owned(), |s| format!("{s:.2}")),
        ),
        &audit::PatternLearnedPayload { outcome: o.clone() },
    )
}

#[cfg(test)]
mod tests;
