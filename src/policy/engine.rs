//! One revision of a policy directory: its sources and their hash, the compiled regorus engine,
//! and the evaluations kubemedic makes with it — the approval decision, the whole approval
//! package (for `kubemedic policy test`, to show the value of every rule) and the enrichment
//! package.
//!
//! The decision runs on regorus's RVM: the policy compiled to bytecode for the one document
//! `data.kubemedic.approval.decision`, executed by a VM taken from a small pool (several times
//! faster than the tree-walking interpreter on this policy, docs/benchmarks.md). The interpreter
//! (a prepared engine, cloned per evaluation) evaluates whole packages — enrichment and the rule
//! values `policy test` prints — and decides when a policy uses something the RVM cannot
//! compile. `policy test` checks that both give the same decision on every case.
//!
//! Invariants: a snapshot never changes after it is built; evaluations share nothing mutable
//! (a VM is used by one evaluation at a time, an engine clone by one); every evaluation runs
//! under the execution-time limit; every failure is a [`GateError`] naming the file or document
//! at fault.

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use regorus::rvm::{Program, RegoVM};

use regorus::utils::limits::ExecutionTimerConfig;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::enrichment::{Derived, ENRICHMENT_PACKAGE, EnrichmentPolicyInput};
use super::{GateError, GateInput};
use crate::domain::{GateDecision, RiskFactor};

/// The package every approval policy declares.
pub const APPROVAL_PACKAGE: &str = "data.kubemedic.approval";
/// The document kubemedic evaluates per decision.
pub const DECISION_DOCUMENT: &str = "data.kubemedic.approval.decision";
/// The document kubemedic evaluates when a remediation made its target worse: `true` restores
/// the spec recorded before it; anything else (false, undefined, an error) does not.
pub const UNDO_DOCUMENT: &str = "data.kubemedic.approval.undo";

/// Work units between two clock reads of regorus's execution timer: frequent enough to stop a
/// runaway loop within microseconds of the limit, rare enough not to show in a 10 µs decision.
const CHECK_INTERVAL: NonZeroU32 = match NonZeroU32::new(64) {
    Some(n) => n,
    None => NonZeroU32::MIN,
};

/// The `*.rego` files directly in a policy directory (symlinks followed, as in a ConfigMap
/// mount; subdirectories such as `tests/` ignored), sorted by name, and their revision.
#[derive(Debug, Clone)]
pub struct PolicySources {
    pub dir: PathBuf,
    /// (file name, contents)
    pub files: Vec<(String, String)>,
    /// `sha256:<hex>` over every file's name and contents.
    pub revision: String,
}

impl PolicySources {
    pub fn read(dir: &Path) -> Result<Self, GateError> {
        let read_dir_error = |e: std::io::Error| GateError::ReadDir {
            dir: dir.to_owned(),
            message: e.to_string(),
        };
        let mut files = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(read_dir_error)? {
            let entry = entry.map_err(read_dir_error)?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.ends_with(".rego") || name.starts_with('.') {
                continue;
            }
            let path = entry.path();
            let read_error = |e: std::io::Error| GateError::ReadFile {
                path: path.clone(),
                message: e.to_string(),
            };
            if !std::fs::metadata(&path).map_err(read_error)?.is_file() {
                continue;
            }
            let text = std::fs::read_to_string(&path).map_err(read_error)?;
            files.push((name, text));
        }
        Self::from_files(dir, files)
    }

    /// Sources held in memory (the built-in policy); `dir` names them in messages.
    pub fn from_files(dir: &Path, mut files: Vec<(String, String)>) -> Result<Self, GateError> {
        if files.is_empty() {
            return Err(GateError::NoPolicies {
                dir: dir.to_owned(),
            });
        }
        files.sort();
        let mut hash = Sha256::new();
        for (name, text) in &files {
            hash.update(name.as_bytes());
            hash.update([0u8]);
            hash.update(text.as_bytes());
            hash.update([0u8]);
        }
        Ok(Self {
            dir: dir.to_owned(),
            files,
            revision: format!("sha256:{}", hex::encode(hash.finalize())),
        })
    }
}

/// VMs kept for reuse; more are made when more decisions run at once.
const VM_POOL_MAX: usize = 16;

struct Compiled {
    /// Parsed, analysed and prepared; cloned per evaluation (its parts are shared `Arc`s).
    engine: regorus::Engine,
    /// The decision as RVM bytecode; `Err` says why the RVM cannot run this policy (the
    /// interpreter decides instead).
    program: Result<Arc<Program>, String>,
    vms: Mutex<Vec<RegoVM>>,
    has_enrichment: bool,
}

/// Which regorus evaluator decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Evaluator {
    Rvm,
    Interpreter,
}

/// One immutable revision of the policy directory, compiled or failed.
pub struct PolicySnapshot {
    dir: PathBuf,
    revision: Option<String>,
    files: Vec<String>,
    limit: Duration,
    compiled: Result<Compiled, GateError>,
    /// Set when the directory itself could not be read (then there is no revision).
    sources_error: Option<GateError>,
}

impl PolicySnapshot {
    /// Read and compile `dir`.
    pub fn load(dir: &Path, limit: Duration) -> Self {
        Self::compile(dir, PolicySources::read(dir), limit)
    }

    /// Compile sources already read (or record why they could not be).
    pub fn compile(dir: &Path, sources: Result<PolicySources, GateError>, limit: Duration) -> Self {
        match sources {
            Err(e) => Self {
                dir: dir.to_owned(),
                revision: None,
                files: vec![],
                limit,
                compiled: Err(e.clone()),
                sources_error: Some(e),
            },
            Ok(sources) => Self {
                dir: dir.to_owned(),
                revision: Some(sources.revision.clone()),
                files: sources.files.iter().map(|(n, _)| n.clone()).collect(),
                limit,
                compiled: compile(&sources, limit),
                sources_error: None,
            },
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn revision(&self) -> Option<&str> {
        self.revision.as_deref()
    }

    /// File names of the sources, sorted.
    pub fn files(&self) -> &[String] {
        &self.files
    }

    /// Why this revision cannot decide, if it cannot.
    pub fn error(&self) -> Option<&GateError> {
        self.compiled.as_ref().err()
    }

    pub(super) fn sources_error(&self) -> Option<&GateError> {
        self.sources_error.as_ref()
    }

    pub fn has_enrichment(&self) -> bool {
        self.compiled.as_ref().is_ok_and(|c| c.has_enrichment)
    }

    /// The evaluator decisions use, and why not the RVM when it is the interpreter.
    pub fn evaluator(&self) -> (Evaluator, Option<&str>) {
        match &self.compiled {
            Ok(c) => match &c.program {
                Ok(_) => (Evaluator::Rvm, None),
                Err(e) => (Evaluator::Interpreter, Some(e.as_str())),
            },
            Err(_) => (Evaluator::Interpreter, None),
        }
    }

    fn engine(&self) -> Result<regorus::Engine, GateError> {
        match &self.compiled {
            Ok(c) => Ok(c.engine.clone()),
            Err(e) => Err(e.clone()),
        }
    }

    /// The decision for `input`, or why there is none. [`Self::decide`] turns the error into the
    /// fail-closed decision.
    pub fn evaluate(&self, input: &GateInput) -> Result<GateDecision, GateError> {
        let compiled = self.compiled.as_ref().map_err(Clone::clone)?;
        let input = super::input::to_value(input);
        let value = match &compiled.program {
            Ok(program) => match self.run_vm(compiled, program, input.clone()) {
                Ok(v) if v != regorus::Value::Undefined => v,
                Err(e @ GateError::TimedOut { .. }) => return Err(e),
                // The RVM found no decision: ask the interpreter why (a rule conflict, say, is
                // an error there and just "undefined" in the RVM). Only the explanation is
                // used; the decision stays "approval required".
                failed => return Err(self.explain_failure(input, failed.err())),
            },
            Err(_) => self.run_interpreter(input)?,
        };
        parse_decision(&value, self.revision.clone())
    }

    fn explain_failure(&self, input: regorus::Value, rvm_error: Option<GateError>) -> GateError {
        match (self.run_interpreter(input), rvm_error) {
            (Err(e), _) => e,
            (Ok(_), Some(e)) => e,
            (Ok(regorus::Value::Undefined), None) => GateError::Undefined {
                document: DECISION_DOCUMENT.to_owned(),
            },
            (Ok(_), None) => GateError::Eval {
                document: DECISION_DOCUMENT.to_owned(),
                message: "the regorus RVM found it undefined but the interpreter did not; \
                          failing closed"
                    .to_owned(),
            },
        }
    }

    /// The decision as the interpreter makes it, whichever evaluator the daemon uses (for
    /// `policy test`, which checks that the two agree).
    pub fn evaluate_with_interpreter(&self, input: &GateInput) -> Result<GateDecision, GateError> {
        let value = self.run_interpreter(super::input::to_value(input))?;
        parse_decision(&value, self.revision.clone())
    }

    fn run_interpreter(&self, input: regorus::Value) -> Result<regorus::Value, GateError> {
        let mut engine = self.engine()?;
        engine.set_input(input);
        engine
            .eval_rule(DECISION_DOCUMENT.to_owned())
            .map_err(|e| eval_error(DECISION_DOCUMENT, &e, self.limit))
    }

    fn run_vm(
        &self,
        compiled: &Compiled,
        program: &Arc<Program>,
        input: regorus::Value,
    ) -> Result<regorus::Value, GateError> {
        let pooled = compiled.vms.lock().ok().and_then(|mut p| p.pop());
        let mut vm = pooled.unwrap_or_else(|| new_vm(program, self.limit));
        vm.set_input(input);
        let result = vm.execute_entry_point_by_name(DECISION_DOCUMENT);
        // Each run resets the VM's execution state; its input is dropped here so the pool holds
        // no request data.
        vm.set_input(regorus::Value::Undefined);
        if let Ok(mut pool) = compiled.vms.lock()
            && pool.len() < VM_POOL_MAX
        {
            pool.push(vm);
        }
        result.map_err(|e| match e {
            regorus::rvm::vm::VmError::TimeLimitExceeded { .. } => GateError::TimedOut {
                document: DECISION_DOCUMENT.to_owned(),
                limit_ms: self.limit.as_millis(),
            },
            other => GateError::Eval {
                document: DECISION_DOCUMENT.to_owned(),
                message: one_line(&anyhow::Error::from(other)),
            },
        })
    }

    /// The decision for `input`; any failure is the degraded decision (approval required).
    pub fn decide(&self, input: &GateInput) -> GateDecision {
        self.evaluate(input)
            .unwrap_or_else(|e| GateDecision::degraded(&e, self.revision.clone()))
    }

    /// The value of every rule of package `kubemedic.approval` for `input` (functions excluded),
    /// as `policy test` prints them when a case fails.
    pub fn approval_document(&self, input: &GateInput) -> Result<serde_json::Value, GateError> {
        Ok(self
            .query_document(APPROVAL_PACKAGE, super::input::to_value(input))?
            .unwrap_or(serde_json::Value::Null))
    }

    /// Whether the policy says to undo the remediation `input.undo` describes: only `true` is
    /// yes; undefined is no; any other value, or an evaluation that fails, is an error (and
    /// then nothing is undone either).
    pub fn undo(&self, input: &GateInput) -> Result<bool, GateError> {
        match self.query_document(UNDO_DOCUMENT, super::input::to_value(input))? {
            None => Ok(false),
            Some(serde_json::Value::Bool(b)) => Ok(b),
            Some(other) => Err(GateError::Shape {
                document: UNDO_DOCUMENT.to_owned(),
                message: format!("expected true or false, got {other}"),
            }),
        }
    }

    /// What the enrichment policy derives for `input`; `Ok(None)` when this directory has no
    /// enrichment policy.
    pub fn enrich(&self, input: &EnrichmentPolicyInput) -> Result<Option<Derived>, GateError> {
        if self.compiled.is_ok() && !self.has_enrichment() {
            return Ok(None);
        }
        let Some(doc) = self.query_document(ENRICHMENT_PACKAGE, to_rego(input, "input")?)? else {
            return Ok(Some(Derived::default()));
        };
        Derived::from_document(&doc).map(Some)
    }

    fn query_document(
        &self,
        document: &str,
        input: regorus::Value,
    ) -> Result<Option<serde_json::Value>, GateError> {
        let mut engine = self.engine()?;
        engine.set_input(input);
        let results = engine
            .eval_query(document.to_owned(), false)
            .map_err(|e| eval_error(document, &e, self.limit))?;
        let value = results
            .result
            .into_iter()
            .next()
            .and_then(|r| r.expressions.into_iter().next())
            .map(|e| e.value);
        match value {
            None | Some(regorus::Value::Undefined) => Ok(None),
            Some(v) => serde_json::to_value(&v)
                .map(Some)
                .map_err(|e| GateError::Shape {
                    document: document.to_owned(),
                    message: e.to_string(),
                }),
        }
    }
}

fn compile(sources: &PolicySources, limit: Duration) -> Result<Compiled, GateError> {
    let mut engine = regorus::Engine::new();
    engine.set_execution_timer_config(ExecutionTimerConfig {
        limit,
        check_interval: CHECK_INTERVAL,
    });
    for (name, text) in &sources.files {
        let path = sources.dir.join(name);
        engine
            .add_policy(path.display().to_string(), text.clone())
            .map_err(|e| GateError::Parse {
                path: path.clone(),
                message: one_line(&e),
            })?;
    }
    let compile_error = |e: anyhow::Error| GateError::Compile {
        dir: sources.dir.clone(),
        message: one_line(&e),
    };
    let packages = engine.get_packages().map_err(compile_error)?;
    if !packages.iter().any(|p| p == APPROVAL_PACKAGE) {
        return Err(GateError::NoApprovalPackage {
            dir: sources.dir.clone(),
        });
    }
    let has_enrichment = packages.iter().any(|p| p == ENRICHMENT_PACKAGE);
    // Analyse, schedule and type-check once, now: evaluation clones the prepared engine.
    let compiled = engine
        .compile_with_entrypoint(&regorus::Rc::from(DECISION_DOCUMENT))
        .map_err(compile_error)?;
    let program = regorus::languages::rego::compiler::Compiler::compile_from_policy(
        &compiled,
        &[DECISION_DOCUMENT],
    )
    .map_err(|e| format!("the RVM cannot compile this policy: {e}"));
    let vms = match &program {
        // One VM ready for the first decision.
        Ok(p) => vec![new_vm(p, limit)],
        Err(_) => vec![],
    };
    Ok(Compiled {
        engine,
        program,
        vms: Mutex::new(vms),
        has_enrichment,
    })
}

fn new_vm(program: &Arc<Program>, limit: Duration) -> RegoVM {
    let mut vm = RegoVM::new();
    vm.load_program(program.clone());
    // The time limit bounds an evaluation, not RVM's default instruction budget (25 000), which
    // a legitimate policy with loops can exceed.
    vm.set_max_instructions(usize::MAX);
    vm.set_execution_timer_config(Some(ExecutionTimerConfig {
        limit,
        check_interval: CHECK_INTERVAL,
    }));
    vm
}

/// A value as the policy's `input` (the enrichment input; the gate input is built directly, see
/// `input.rs`). Through JSON text: regorus's `From<serde_json::Value>` hides errors.
fn to_rego(value: &impl Serialize, what: &str) -> Result<regorus::Value, GateError> {
    let shape = |message: String| GateError::Shape {
        document: what.to_owned(),
        message,
    };
    let text = serde_json::to_string(value).map_err(|e| shape(e.to_string()))?;
    regorus::Value::from_json_str(&text).map_err(|e| shape(e.to_string()))
}

fn eval_error(document: &str, e: &anyhow::Error, limit: Duration) -> GateError {
    let timed_out = e
        .chain()
        .any(|c| c.downcast_ref::<regorus::LimitError>().is_some())
        || e.to_string().contains("exceeded time limit");
    if timed_out {
        GateError::TimedOut {
            document: document.to_owned(),
            limit_ms: limit.as_millis(),
        }
    } else {
        GateError::Eval {
            document: document.to_owned(),
            message: one_line(e),
        }
    }
}

/// regorus reports source errors over several lines (`--> file:line:col`, the source line, a
/// caret, `error: message`); reasons and `/readyz` details are one line: `file:line:col:
/// message`.
fn one_line(e: &anyhow::Error) -> String {
    let text = format!("{e:#}");
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let location = lines
        .iter()
        .find_map(|l| l.strip_prefix("-->"))
        .map(str::trim);
    let message = lines
        .iter()
        .find_map(|l| l.strip_prefix("error:"))
        .map(str::trim);
    match (location, message) {
        (Some(at), Some(message)) => format!("{at}: {message}"),
        _ => lines
            .into_iter()
            .filter(|l| !l.is_empty() && l.chars().any(|c| !matches!(c, '|' | '^' | ' ')))
            .collect::<Vec<_>>()
            .join(" | "),
    }
}

#[derive(Deserialize)]
struct RawFactor {
    score: serde_json::Number,
    reason: String,
}

#[derive(Deserialize)]
struct RawDecision {
    require_approval: bool,
    #[serde(default)]
    risk_factors: Vec<RawFactor>,
    #[serde(default)]
    reason: Option<String>,
}

fn parse_decision(
    value: &regorus::Value,
    policy_revision: Option<String>,
) -> Result<GateDecision, GateError> {
    let shape = |message: String| GateError::Shape {
        document: DECISION_DOCUMENT.to_owned(),
        message,
    };
    if *value == regorus::Value::Undefined {
        return Err(GateError::Undefined {
            document: DECISION_DOCUMENT.to_owned(),
        });
    }
    let json = serde_json::to_value(value).map_err(|e| shape(e.to_string()))?;
    let raw: RawDecision = serde_json::from_value(json).map_err(|e| {
        shape(format!(
            "{e}; expected {{require_approval: bool, risk_factors: [{{score, reason}}], reason}}"
        ))
    })?;
    let mut risk_factors = Vec::with_capacity(raw.risk_factors.len());
    for f in raw.risk_factors {
        let score = f
            .score
            .as_i64()
            .or_else(|| {
                f.score
                    .as_f64()
                    .filter(|s| s.fract() == 0.0 && s.abs() < 1e15)
                    .map(|s| s as i64)
            })
            .ok_or_else(|| {
                shape(format!(
                    "risk factor score {} is not a whole number",
                    f.score
                ))
            })?;
        risk_factors.push(RiskFactor {
            score,
            reason: f.reason,
        });
    }
    risk_factors.sort_by(|a, b| b.score.cmp(&a.score).then_with(|| a.reason.cmp(&b.reason)));
    let reason = raw
        .reason
        .filter(|r| !r.trim().is_empty())
        .or_else(|| risk_factors.first().map(|f| f.reason.clone()))
        .unwrap_or_else(|| {
            if raw.require_approval {
                "approval required by policy".to_owned()
            } else {
                "auto-approved by policy".to_owned()
            }
        });
    Ok(GateDecision {
        require_approval: raw.require_approval,
        reason,
        risk_factors,
        degraded: false,
        policy_revision,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_with(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        dir
    }

    const MINIMAL: &str = r#"package kubemedic.approval
risk_factors contains {"score": 70, "reason": "production"} if input.environment == "production"
risk_factors contains {"score": 90, "reason": "no target"} if not input.remediation_target
require_approval := count(risk_factors) > 0
decision := {"require_approval": require_approval, "risk_factors": risk_factors}
"#;

    fn input(env: &str) -> GateInput {
        serde_json::from_value(serde_json::json!({"environment": env})).unwrap()
    }

    #[test]
    fn revision_covers_names_and_contents_and_ignores_other_files() {
        let a = dir_with(&[("approval.rego", MINIMAL), ("README.md", "x")]);
        let b = dir_with(&[("approval.rego", MINIMAL)]);
        let ra = PolicySources::read(a.path()).unwrap().revision;
        assert_eq!(ra, PolicySources::read(b.path()).unwrap().revision);
        std::fs::write(b.path().join("approval.rego"), format!("{MINIMAL}\n")).unwrap();
        assert_ne!(ra, PolicySources::read(b.path()).unwrap().revision);
        assert!(ra.starts_with("sha256:") && ra.len() == 7 + 64, "{ra}");
    }

    #[test]
    fn factors_are_sorted_and_the_top_one_is_the_reason() {
        let dir = dir_with(&[("approval.rego", MINIMAL)]);
        let snap = PolicySnapshot::load(dir.path(), Duration::from_secs(1));
        let d = snap.evaluate(&input("production")).unwrap();
        assert!(d.require_approval && !d.degraded);
        assert_eq!(
            d.risk_factors.iter().map(|f| f.score).collect::<Vec<_>>(),
            [90, 70]
        );
        assert_eq!(d.reason, "no target");
        let d = snap.evaluate(&input("staging")).unwrap();
        assert_eq!(d.reason, "no target");
    }

    #[test]
    fn a_decision_of_the_wrong_shape_fails_closed() {
        let dir = dir_with(&[(
            "approval.rego",
            "package kubemedic.approval\ndecision := {\"require_approval\": \"no\"}\n",
        )]);
        let snap = PolicySnapshot::load(dir.path(), Duration::from_secs(1));
        let d = snap.decide(&input("staging"));
        assert!(d.require_approval && d.degraded, "{d:?}");
        assert!(d.reason.contains("wrong shape"), "{}", d.reason);
    }

    #[test]
    fn a_missing_package_or_directory_is_named() {
        let dir = dir_with(&[("other.rego", "package other\nx := 1\n")]);
        let snap = PolicySnapshot::load(dir.path(), Duration::from_secs(1));
        assert!(matches!(
            snap.error(),
            Some(GateError::NoApprovalPackage { .. })
        ));
        let missing = dir.path().join("nope");
        let snap = PolicySnapshot::load(&missing, Duration::from_secs(1));
        let e = snap.error().unwrap().to_string();
        assert!(e.contains("nope"), "{e}");
        assert_eq!(snap.revision(), None);
    }
}
