//! The Rego policy engine (DESIGN §3.2, §3.8): the approval policy that decides whether a
//! selected remediation may run without a human, and the optional enrichment policy.
//!
//! A shared layer below the stages: the Gating stage (`gate`) asks it for decisions, the
//! Enriching stage (`enrich`) for derived values; neither imports the other.
//!
//! Input: a [`GateInput`] — environment and business classification from enrichment, the
//! investigation's verified target, the selected workflow's action type and confidence, detected
//! labels, failed detections, warnings and the signal mode. Output: a [`GateDecision`] —
//! `require_approval`, the scored risk factors (highest first), the reason approvers see (the
//! highest factor's), whether the policy was degraded, and the revision of the policy that
//! decided.
//!
//! The policy is the `*.rego` files of one directory (`policies/` by default): package
//! `kubemedic.approval` must define the document `decision` = `{require_approval, risk_factors,
//! reason}`; package `kubemedic.enrichment`, if present, derives enrichment values
//! ([`enrichment`]). [`RegoGate`] compiles the directory once with regorus when it loads or
//! changes (to RVM bytecode for the decision, see [`engine`]), and evaluates each decision off
//! the async worker threads under an execution-time limit.
//!
//! Invariants:
//! - Fail closed: a directory that cannot be read, a policy that does not compile, an evaluation
//!   error or timeout, or a decision of the wrong shape gives `require_approval: true, degraded:
//!   true`, reason "approval policy unavailable: …". The state shows on `/readyz` (check
//!   `policy`) and in `kubemedic_gate_degraded`.
//! - Reload: the directory is re-read every few seconds; a changed source set (by content hash,
//!   so a ConfigMap symlink swap counts) is compiled and swapped in whole, broken or not — a
//!   broken policy fails closed rather than silently keeping an older one
//!   (docs/adr/0005-approval-gate.md). A decision keeps the snapshot it started with.
//!
//! Submodules: [`engine`] (reading, compiling, evaluating one policy revision), [`enrichment`]
//! (the enrichment policy's input and output), [`cases`] (`kubemedic policy test`).

pub mod cases;
pub mod engine;
pub mod enrichment;
mod input;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tracing::{error, info, warn};

pub use engine::{PolicySnapshot, PolicySources};
pub(crate) use enrichment::non_empty;
pub use enrichment::{Derived, EnrichmentPolicyInput, NamespaceFacts, SignalFacts};

use crate::domain::Severity;
use crate::domain::{DetectedLabels, GateDecision, RemediationRequest, SignalMode, Target};
use crate::readiness::{Dependency, DependencyStatus};
use crate::telemetry::Metrics;

/// Where the policy lives and how long one evaluation may take.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicySettings {
    pub dir: PathBuf,
    /// Whether `dir` was configured. When it was not and `./policies` does not exist (a
    /// container, an installed binary), the daemon uses the policy built into the binary.
    pub dir_configured: bool,
    pub eval_timeout: Duration,
}

impl PolicySettings {
    /// Milliseconds one evaluation may run, unless configured.
    pub const DEFAULT_EVAL_TIMEOUT_MS: u64 = 100;
}

/// The confidence threshold when nothing else is configured (the seed's default). It is the
/// default of `GateInput.confidence_threshold` too, so a policy test case may leave it out.
pub const DEFAULT_CONFIDENCE_THRESHOLD: f64 = 0.8;

/// How often the policy directory is re-read for changes.
pub const RELOAD_INTERVAL: Duration = Duration::from_secs(2);

/// Business classification of the target's namespace (from enrichment).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BusinessClassification {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub business_unit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk_tolerance: Option<String>,
}

/// What the approval policy sees as `input`. Field names are the policy's contract; unknown fields
/// are refused so a typo in a policy test case is an error, not a silently missing value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateInput {
    /// `production`, `staging`, … — anything the policy does not know counts as production.
    pub environment: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<Severity>,
    /// The selected workflow's confidence, 0–1.
    #[serde(default)]
    pub confidence: f64,
    #[serde(default = "default_threshold")]
    pub confidence_threshold: f64,
    /// The verified root owner the workflow would act on; absent when the investigation found
    /// none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remediation_target: Option<Target>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_id: Option<String>,
    #[serde(default)]
    pub detected_labels: DetectedLabels,
    /// Detections that could not be made (their labels above are unknown, not false).
    #[serde(default)]
    pub failed_detections: Vec<String>,
    /// Investigation warnings (history regressions, declining effectiveness, …).
    #[serde(default)]
    pub warnings: Vec<String>,
    #[serde(default)]
    pub business_classification: BusinessClassification,
    #[serde(default = "reactive")]
    pub signal_mode: SignalMode,
    /// What was proven about the action against the cluster; absent: nothing was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proof: Option<ProofInput>,
    /// Only when verification asks whether to undo a remediation that made its target worse
    /// (the rule `undo`); absent for the approval decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undo: Option<UndoInput>,
}

/// The policy's view of a remediation that made its target worse (`input.undo`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UndoInput {
    /// How it is worse, one line each.
    #[serde(default)]
    pub worse: Vec<String>,
    pub ready_before: u32,
    pub ready_after: u32,
    pub failing_before: u32,
    pub failing_after: u32,
    /// Failure causes none of the pods showed before (`CrashLoopBackOff`, …).
    #[serde(default)]
    pub new_causes: Vec<String>,
}

impl UndoInput {
    pub fn of(u: &crate::domain::Undo) -> Self {
        let before = u.before.causes();
        Self {
            worse: u.worse.clone(),
            ready_before: u.before.ready,
            ready_after: u.after.ready,
            failing_before: u32::try_from(u.before.failing.len()).unwrap_or(u32::MAX),
            failing_after: u32::try_from(u.after.failing.len()).unwrap_or(u32::MAX),
            new_causes: u
                .after
                .causes()
                .difference(&before)
                .map(|c| (*c).to_owned())
                .collect(),
        }
    }
}

/// The policy's view of a proof (`input.proof`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProofInput {
    /// `proven`, `refuted` or `unverified` (an action type with no known obligations).
    pub verdict: String,
    /// The ids of the obligations that hold…
    #[serde(default)]
    pub holds: Vec<String>,
    /// …and of those that do not.
    #[serde(default)]
    pub failed: Vec<String>,
}

impl ProofInput {
    pub fn of(p: &crate::domain::Proof) -> Self {
        Self {
            verdict: p.verdict.as_str().to_owned(),
            holds: p
                .obligations
                .iter()
                .filter(|o| o.holds())
                .map(|o| o.id.clone())
                .collect(),
            failed: p.failed().map(|o| o.id.clone()).collect(),
        }
    }
}

fn default_threshold() -> f64 {
    DEFAULT_CONFIDENCE_THRESHOLD
}

fn reactive() -> SignalMode {
    SignalMode::Reactive
}

impl GateInput {
    /// The part of the input the request itself knows: environment and business classification
    /// from its enrichment, severity and mode from its signal. The caller adds what the
    /// investigation and selection found (target, action type, workflow, confidence, labels,
    /// warnings). A request that was never enriched gets environment `unknown`, which the
    /// default policy treats as production.
    pub fn from_request(request: &RemediationRequest, confidence_threshold: f64) -> Self {
        let enrichment = request.state.enrichment.as_ref();
        Self {
            environment: enrichment
                .map(|e| e.environment.clone())
                .unwrap_or_else(|| "unknown".to_owned()),
            severity: request.signal.severity.clone(),
            confidence: 0.0,
            confidence_threshold,
            remediation_target: None,
            action_type: None,
            workflow_id: None,
            detected_labels: DetectedLabels::default(),
            failed_detections: vec![],
            warnings: vec![],
            business_classification: BusinessClassification {
                business_unit: enrichment.and_then(|e| e.business_unit.clone()),
                priority: enrichment.and_then(|e| e.priority.clone()),
                risk_tolerance: enrichment.and_then(|e| e.risk_tolerance.clone()),
            },
            signal_mode: request.signal.mode,
            proof: request.state.proof.as_ref().map(ProofInput::of),
            undo: None,
        }
    }

    /// Set the detected labels, and copy their failed detections to the top-level field the
    /// policy reads.
    pub fn with_detected_labels(mut self, labels: DetectedLabels) -> Self {
        for d in &labels.failed_detections {
            if !self.failed_detections.contains(d) {
                self.failed_detections.push(d.clone());
            }
        }
        self.detected_labels = labels;
        self
    }
}

/// Why a policy could not be loaded or evaluated. Every variant names the file, directory or
/// document at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GateError {
    #[error("cannot read policy directory {dir}: {message}")]
    ReadDir { dir: PathBuf, message: String },
    #[error("cannot read policy file {path}: {message}")]
    ReadFile { path: PathBuf, message: String },
    #[error("no *.rego files in policy directory {dir}")]
    NoPolicies { dir: PathBuf },
    #[error("policy file {path} does not parse: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("no policy in {dir} declares package kubemedic.approval")]
    NoApprovalPackage { dir: PathBuf },
    #[error("policy in {dir} does not compile: {message}")]
    Compile { dir: PathBuf, message: String },
    #[error("evaluating {document} failed: {message}")]
    Eval { document: String, message: String },
    #[error("evaluating {document} exceeded the time limit of {limit_ms} ms")]
    TimedOut { document: String, limit_ms: u128 },
    #[error("{document} is undefined for this input")]
    Undefined { document: String },
    #[error("{document} has the wrong shape: {message}")]
    Shape { document: String, message: String },
    #[error("policy evaluation did not finish: {0}")]
    Task(String),
}

/// The policy shipped with kubemedic (`policies/` of the source tree), built into the binary.
pub const BUILTIN_POLICIES: &[(&str, &str)] = &[
    (
        "approval.rego",
        include_str!("../../policies/approval.rego"),
    ),
    (
        "enrichment.rego",
        include_str!("../../policies/enrichment.rego"),
    ),
];

/// How the built-in policy is named where a directory would be.
pub const BUILTIN_POLICY_DIR: &str = "(built into kubemedic)";

/// The approval gate: one policy directory, compiled once per revision, evaluated per decision.
pub struct RegoGate {
    dir: PathBuf,
    limit: Duration,
    current: RwLock<Arc<PolicySnapshot>>,
    /// The last evaluation error of the current revision (cleared by a successful one).
    last_eval_error: Mutex<Option<String>>,
    metrics: Option<Arc<Metrics>>,
    /// The built-in policy: nothing to re-read.
    builtin: bool,
    /// Modules from `ApprovalPolicy` objects over the directory's (docs/kubernetes-resources.md).
    overlay: RwLock<Option<Overlay>>,
}

/// Rego modules that replace the directory's files of the same name, or add to them, and
/// where they come from.
#[derive(Debug, Clone, PartialEq)]
pub struct Overlay {
    /// (file name, Rego source)
    pub files: Vec<(String, String)>,
    /// `ApprovalPolicy kubemedic/strict (generation 3)`.
    pub origin: String,
}

impl RegoGate {
    /// The gate `serve` and `investigate` use: the configured policy directory; else
    /// `./policies` if there is one (a source checkout); else the policy built into the binary
    /// (a container, an installed binary). A configured directory that is missing or broken is
    /// never replaced by the built-in policy: the gate fails closed and says so.
    pub fn from_settings(settings: &PolicySettings, metrics: Option<Arc<Metrics>>) -> Self {
        if settings.dir_configured || settings.dir.is_dir() {
            return Self::load(settings.dir.clone(), settings.eval_timeout, metrics);
        }
        tracing::info!(
            "no policy directory configured and no ./policies: using the built-in approval policy"
        );
        Self::builtin(settings.eval_timeout, metrics)
    }

    /// The policy shipped with kubemedic, compiled from the copy built into the binary.
    pub fn builtin(limit: Duration, metrics: Option<Arc<Metrics>>) -> Self {
        let dir = PathBuf::from(BUILTIN_POLICY_DIR);
        let files = BUILTIN_POLICIES
            .iter()
            .map(|(name, text)| ((*name).to_owned(), (*text).to_owned()))
            .collect();
        let sources = engine::PolicySources::from_files(&dir, files);
        let snapshot = Arc::new(PolicySnapshot::compile(&dir, sources, limit));
        log_loaded(&snapshot, "loaded");
        let gate = Self {
            dir,
            limit,
            current: RwLock::new(snapshot),
            last_eval_error: Mutex::new(None),
            metrics,
            builtin: true,
            overlay: RwLock::new(None),
        };
        gate.publish_state();
        gate
    }

    /// Read and compile `dir`. Never fails: a broken directory gives a gate that requires
    /// approval for everything and says why (see [`RegoGate::problem`]).
    pub fn load(dir: impl Into<PathBuf>, limit: Duration, metrics: Option<Arc<Metrics>>) -> Self {
        let dir = dir.into();
        let snapshot = Arc::new(PolicySnapshot::load(&dir, limit));
        log_loaded(&snapshot, "loaded");
        let gate = Self {
            dir,
            limit,
            current: RwLock::new(snapshot),
            last_eval_error: Mutex::new(None),
            metrics,
            builtin: false,
            overlay: RwLock::new(None),
        };
        gate.publish_state();
        gate
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn eval_limit(&self) -> Duration {
        self.limit
    }

    /// The policy revision decisions start with now. Holding it keeps it alive: a reload swaps
    /// in a new one without touching decisions already running on this one.
    pub fn snapshot(&self) -> Arc<PolicySnapshot> {
        match self.current.read() {
            Ok(c) => c.clone(),
            // A writer panicked mid-swap; the value itself is still a whole Arc.
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Re-read the directory; if its sources changed, compile them and swap them in (broken or
    /// not: a broken policy fails closed). Returns true when a new revision was swapped in.
    pub fn reload_if_changed(&self) -> bool {
        let overlay = self.overlay();
        if self.builtin && overlay.is_none() {
            return false;
        }
        let sources = self.sources(overlay.as_ref());
        let current = self.snapshot();
        let unchanged = match &sources {
            Ok(s) => current.revision() == Some(s.revision.as_str()),
            Err(e) => current.sources_error() == Some(e),
        };
        if unchanged {
            return false;
        }
        let snapshot = Arc::new(PolicySnapshot::compile(&self.dir, sources, self.limit));
        log_loaded(&snapshot, "reloaded");
        match self.current.write() {
            Ok(mut c) => *c = snapshot,
            Err(poisoned) => *poisoned.into_inner() = snapshot,
        }
        if let Ok(mut last) = self.last_eval_error.lock() {
            *last = None;
        }
        self.publish_state();
        true
    }

    /// The directory's sources (or the built-in ones) with `overlay`'s modules over them.
    fn sources(&self, overlay: Option<&Overlay>) -> Result<PolicySources, GateError> {
        let base = if self.builtin {
            BUILTIN_POLICIES
                .iter()
                .map(|(name, text)| ((*name).to_owned(), (*text).to_owned()))
                .collect()
        } else {
            engine::PolicySources::read(&self.dir)?.files
        };
        let Some(overlay) = overlay else {
            return engine::PolicySources::from_files(&self.dir, base);
        };
        let mut files: Vec<(String, String)> = base
            .into_iter()
            .filter(|(name, _)| !overlay.files.iter().any(|(n, _)| n == name))
            .collect();
        files.extend(overlay.files.iter().cloned());
        engine::PolicySources::from_files(&self.dir, files)
    }

    /// The modules in force as their sources are now: the directory's (or the built-in)
    /// files with the `ApprovalPolicy` objects' modules over them, and their revision (the
    /// loaded snapshot's, unless the files changed since the last reload).
    pub fn modules(&self) -> Result<PolicySources, GateError> {
        self.sources(self.overlay().as_ref())
    }

    /// The modules of `ApprovalPolicy` objects in force, if any.
    pub fn overlay(&self) -> Option<Overlay> {
        match self.overlay.read() {
            Ok(o) => o.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Where the policy in force comes from: the directory, and the objects over it.
    pub fn origin(&self) -> String {
        let base = if self.builtin {
            "the policy built into kubemedic".to_owned()
        } else {
            format!("the policy directory {}", self.dir.display())
        };
        match self.overlay() {
            Some(o) => format!("{} over {base}", o.origin),
            None => base,
        }
    }

    /// Put `overlay` in force if the policy it makes compiles and passes `cases`; else leave
    /// the policy in force as it is and say why (the message names the module or the case).
    /// `None` goes back to the directory alone. Answers the new revision.
    pub fn set_overlay(
        &self,
        overlay: Option<Overlay>,
        cases: Vec<cases::Case>,
    ) -> Result<String, String> {
        let sources = self.sources(overlay.as_ref()).map_err(|e| e.to_string())?;
        let snapshot = Arc::new(PolicySnapshot::compile(&self.dir, Ok(sources), self.limit));
        if let Some(e) = snapshot.error() {
            return Err(e.to_string());
        }
        let report = cases::run_cases(&self.dir, &snapshot, cases);
        if report.failed > 0 {
            let failed: Vec<String> = report
                .cases
                .iter()
                .filter(|c| !c.passed())
                .map(|c| format!("{}: {}", c.name, c.failures.join("; ")))
                .collect();
            return Err(format!(
                "{} of {} policy test(s) failed: {}",
                report.failed,
                report.failed + report.passed,
                failed.join(" | ")
            ));
        }
        let revision = snapshot.revision().unwrap_or_default().to_owned();
        match self.overlay.write() {
            Ok(mut o) => *o = overlay,
            Err(poisoned) => *poisoned.into_inner() = overlay,
        }
        log_loaded(&snapshot, "loaded from custom resources");
        match self.current.write() {
            Ok(mut c) => *c = snapshot,
            Err(poisoned) => *poisoned.into_inner() = snapshot,
        }
        if let Ok(mut last) = self.last_eval_error.lock() {
            *last = None;
        }
        self.publish_state();
        Ok(revision)
    }

    /// Poll the directory every `every` until the gate is dropped.
    pub fn watch(self: &Arc<Self>, every: Duration) -> tokio::task::JoinHandle<()> {
        let weak: Weak<Self> = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tick.tick().await;
                let Some(gate) = weak.upgrade() else { return };
                // Reading and compiling is blocking file and CPU work.
                let done = tokio::task::spawn_blocking(move || {
                    gate.reload_if_changed();
                })
                .await;
                if let Err(e) = done {
                    warn!(error = %e, "policy reload task failed");
                }
            }
        })
    }

    /// Decide for `input` with the policy current at the call. Never fails: every error is a
    /// degraded decision that requires approval.
    ///
    /// A pathological policy runs until the execution-time limit, so evaluation must not hold an
    /// async worker: on the multi-threaded runtime it runs under `block_in_place` (the runtime
    /// hands this worker's other tasks to another thread; the decision itself starts at once,
    /// with no thread wake-up on its path), elsewhere on the blocking pool.
    pub async fn decide(&self, input: &GateInput) -> GateDecision {
        let snapshot = self.snapshot();
        let revision = snapshot.revision().map(str::to_owned);
        let started = Instant::now();
        let multi_thread = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        let result = if multi_thread {
            tokio::task::block_in_place(|| snapshot.evaluate(input))
        } else {
            let owned = input.clone();
            match tokio::task::spawn_blocking(move || snapshot.evaluate(&owned)).await {
                Ok(r) => r,
                Err(e) => Err(GateError::Task(e.to_string())),
            }
        };
        self.record(result, revision, started.elapsed())
    }

    /// Whether the policy in force says to undo the remediation `input.undo` describes
    /// ([`engine::UNDO_DOCUMENT`]), with the revision that answered. Rare (once per remediation
    /// found worse), so it runs on the interpreter, off the async threads.
    pub async fn undo(&self, input: &GateInput) -> (Result<bool, GateError>, Option<String>) {
        let snapshot = self.snapshot();
        let revision = snapshot.revision().map(str::to_owned);
        let owned = input.clone();
        let result = match tokio::task::spawn_blocking(move || snapshot.undo(&owned)).await {
            Ok(r) => r,
            Err(e) => Err(GateError::Task(e.to_string())),
        };
        (result, revision)
    }

    /// [`RegoGate::decide`] on the calling thread (the CLI, benchmarks).
    pub fn decide_blocking(&self, input: &GateInput) -> GateDecision {
        let snapshot = self.snapshot();
        let revision = snapshot.revision().map(str::to_owned);
        let started = Instant::now();
        let result = snapshot.evaluate(input);
        self.record(result, revision, started.elapsed())
    }

    fn record(
        &self,
        result: Result<GateDecision, GateError>,
        revision: Option<String>,
        elapsed: Duration,
    ) -> GateDecision {
        let decision = match result {
            Ok(d) => {
                if let Ok(mut last) = self.last_eval_error.lock() {
                    *last = None;
                }
                d
            }
            Err(e) => {
                error!(error = %e, policy_revision = revision.as_deref().unwrap_or("none"),
                    "approval policy failed; approval required");
                if let Ok(mut last) = self.last_eval_error.lock() {
                    *last = Some(e.to_string());
                }
                GateDecision::degraded(&e, revision)
            }
        };
        if let Some(m) = &self.metrics {
            m.gate_decision(decision.label(), elapsed);
        }
        self.publish_state();
        decision
    }

    /// Why the gate is degraded now, if it is: the current revision failed to load, or the last
    /// evaluation with it failed.
    pub fn problem(&self) -> Option<String> {
        let snapshot = self.snapshot();
        if let Some(e) = snapshot.error() {
            return Some(e.to_string());
        }
        self.last_eval_error
            .lock()
            .ok()
            .and_then(|l| l.clone())
            .map(|e| format!("last evaluation failed: {e}"))
    }

    fn publish_state(&self) {
        if let Some(m) = &self.metrics {
            m.set_gate_degraded(self.problem().is_some());
        }
    }

    /// Evaluate the optional enrichment policy (package `kubemedic.enrichment`) on the blocking
    /// pool. `Ok(None)`: this policy directory has no enrichment policy.
    pub async fn enrich(
        &self,
        input: &EnrichmentPolicyInput,
    ) -> (Option<String>, Result<Option<Derived>, GateError>) {
        let snapshot = self.snapshot();
        let revision = snapshot.revision().map(str::to_owned);
        let owned = input.clone();
        let result = tokio::task::spawn_blocking(move || snapshot.enrich(&owned)).await;
        let result = match result {
            Ok(r) => r,
            Err(e) => Err(GateError::Task(e.to_string())),
        };
        (revision, result)
    }
}

fn log_loaded(snapshot: &PolicySnapshot, what: &str) {
    match snapshot.error() {
        None => info!(
            dir = %snapshot.dir().display(),
            revision = snapshot.revision().unwrap_or("none"),
            files = %snapshot.files().join(","),
            "approval policy {what}"
        ),
        Some(e) => error!(
            dir = %snapshot.dir().display(),
            revision = snapshot.revision().unwrap_or("none"),
            error = %e,
            "approval policy {what} BROKEN: every remediation requires approval until it is fixed"
        ),
    }
}

/// `sha256:0123456789ab` — short enough for messages.
pub fn short_revision(revision: Option<&str>) -> String {
    match revision {
        Some(r) => r.chars().take("sha256:".len() + 12).collect(),
        None => "none".to_owned(),
    }
}

/// `/readyz` entry `policy`: the loaded revision, or why every remediation needs approval now.
pub struct PolicyDependency {
    gate: Arc<RegoGate>,
}

impl PolicyDependency {
    pub fn new(gate: Arc<RegoGate>) -> Self {
        Self { gate }
    }
}

#[async_trait::async_trait]
impl Dependency for PolicyDependency {
    fn name(&self) -> &'static str {
        "policy"
    }

    async fn check(&self) -> DependencyStatus {
        let snapshot = self.gate.snapshot();
        match self.gate.problem() {
            Some(problem) => DependencyStatus {
                ok: false,
                detail: format!(
                    "degraded, every remediation requires approval: {problem} (revision {})",
                    short_revision(snapshot.revision())
                ),
            },
            None => {
                let evaluator = match snapshot.evaluator() {
                    (engine::Evaluator::Rvm, _) => "the regorus RVM".to_owned(),
                    (engine::Evaluator::Interpreter, why) => format!(
                        "the regorus interpreter ({})",
                        why.unwrap_or("the RVM is not in use")
                    ),
                };
                DependencyStatus {
                    ok: true,
                    detail: format!(
                        "approval policy {} loaded from {} ({}), decided by {evaluator}",
                        short_revision(snapshot.revision()),
                        snapshot.dir().display(),
                        snapshot.files().join(", ")
                    ),
                }
            }
        }
    }
}
