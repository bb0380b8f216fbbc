//! `kubemedic policy test`: data-driven cases for the approval policy.
//!
//! Input: YAML case files (by default every `*.yaml` in `<policy dir>/tests/`), each a sequence
//! of cases:
//!
//! ```yaml
//! - name: staging deployment is auto-approved
//!   policy: broken                 # optional: another policy directory, relative to this file
//!   input:                         # a GateInput, exactly as the daemon builds it
//!     environment: staging
//!     remediation_target: {kind: Deployment, name: web, namespace: shop}
//!   want:
//!     require_approval: false
//!     degraded: false              # the default: no case passes on a broken policy by accident
//!     reason: "..."                # exact; or reason_contains: "..."
//!     risk_scores: [80, 70]        # every factor's score, highest first
//!     rules: {is_production: true} # values of rules of package kubemedic.approval
//! ```
//!
//! Output: a [`Report`] — per case the decision, the value of every rule of the approval package
//! for its input, and what did not match. Each case is evaluated by the same
//! [`PolicySnapshot::decide`] the daemon uses (the RVM), and again by regorus's interpreter: a
//! difference between the two is a failure. Arrays compare as sets (Rego sets have no order) and
//! numbers by value.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::engine::Evaluator;
use super::{GateInput, PolicySnapshot};
use crate::domain::GateDecision;

#[derive(Debug, thiserror::Error)]
pub enum CaseError {
    #[error("cannot read {path}: {message}")]
    Read { path: PathBuf, message: String },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("no case files (*.yaml) in {0}")]
    NoCases(PathBuf),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub name: String,
    #[serde(default)]
    pub policy: Option<PathBuf>,
    pub input: GateInput,
    pub want: Want,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Want {
    pub require_approval: bool,
    #[serde(default)]
    pub degraded: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason_contains: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk_scores: Option<Vec<i64>>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub rules: BTreeMap<String, Value>,
}

/// One case's result.
#[derive(Debug, Clone, Serialize)]
pub struct CaseReport {
    pub file: PathBuf,
    pub name: String,
    pub policy_dir: PathBuf,
    pub policy_revision: Option<String>,
    /// The regorus evaluator that made `decision` (as in the daemon).
    pub evaluator: Evaluator,
    /// The input exactly as the policy saw it.
    pub input: Value,
    pub want: Want,
    pub decision: GateDecision,
    /// Every rule of package `kubemedic.approval` for this input (absent when degraded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rules: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rules_error: Option<String>,
    /// What did not match; empty when the case passed.
    pub failures: Vec<String>,
}

impl CaseReport {
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub passed: usize,
    pub failed: usize,
    pub cases: Vec<CaseReport>,
}

/// The case files to run: each argument is a file or a directory (its `*.yaml`, `*.yml`, not
/// recursive); no arguments means `<policy_dir>/tests`.
pub fn collect_files(policy_dir: &Path, args: &[PathBuf]) -> Result<Vec<PathBuf>, CaseError> {
    let defaults = [policy_dir.join("tests")];
    let args = if args.is_empty() { &defaults[..] } else { args };
    let mut files = Vec::new();
    for arg in args {
        let meta = std::fs::metadata(arg).map_err(|e| CaseError::Read {
            path: arg.clone(),
            message: e.to_string(),
        })?;
        if meta.is_file() {
            files.push(arg.clone());
            continue;
        }
        let mut found: Vec<PathBuf> = std::fs::read_dir(arg)
            .map_err(|e| CaseError::Read {
                path: arg.clone(),
                message: e.to_string(),
            })?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
            .collect();
        if found.is_empty() {
            return Err(CaseError::NoCases(arg.clone()));
        }
        found.sort();
        files.extend(found);
    }
    Ok(files)
}

pub fn load_file(path: &Path) -> Result<Vec<Case>, CaseError> {
    let text = std::fs::read_to_string(path).map_err(|e| CaseError::Read {
        path: path.to_owned(),
        message: e.to_string(),
    })?;
    serde_saphyr::from_str(&text).map_err(|e| CaseError::Parse {
        path: path.to_owned(),
        message: e.to_string(),
    })
}

/// Run every case of `files` against `policy_dir` (or the directory a case names).
pub fn run(policy_dir: &Path, files: &[PathBuf], limit: Duration) -> Result<Report, CaseError> {
    let mut snapshots: HashMap<PathBuf, PolicySnapshot> = HashMap::new();
    let mut cases = Vec::new();
    for file in files {
        for case in load_file(file)? {
            let dir = match &case.policy {
                Some(p) => file.parent().unwrap_or(Path::new(".")).join(p),
                None => policy_dir.to_owned(),
            };
            let snapshot = snapshots
                .entry(dir.clone())
                .or_insert_with(|| PolicySnapshot::load(&dir, limit));
            cases.push(run_case(file, &dir, snapshot, case));
        }
    }
    let failed = cases.iter().filter(|c| !c.passed()).count();
    Ok(Report {
        passed: cases.len() - failed,
        failed,
        cases,
    })
}

/// Run `cases` (from an `ApprovalPolicy` object) against `snapshot`, the policy they come with.
pub fn run_cases(dir: &Path, snapshot: &PolicySnapshot, cases: Vec<Case>) -> Report {
    let cases: Vec<CaseReport> = cases
        .into_iter()
        .map(|c| run_case(Path::new("spec.tests"), dir, snapshot, c))
        .collect();
    let failed = cases.iter().filter(|c| !c.passed()).count();
    Report {
        passed: cases.len() - failed,
        failed,
        cases,
    }
}

fn run_case(file: &Path, dir: &Path, snapshot: &PolicySnapshot, case: Case) -> CaseReport {
    let decision = snapshot.decide(&case.input);
    let (rules, rules_error) = if decision.degraded {
        (None, None)
    } else {
        match snapshot.approval_document(&case.input) {
            Ok(doc) => (Some(doc), None),
            Err(e) => (None, Some(e.to_string())),
        }
    };
    let mut failures = check(
        &case.want,
        &decision,
        rules.as_ref(),
        rules_error.as_deref(),
    );
    let evaluator = snapshot.evaluator().0;
    if evaluator == Evaluator::Rvm {
        let interpreted = snapshot
            .evaluate_with_interpreter(&case.input)
            .unwrap_or_else(|e| GateDecision::degraded(&e, snapshot.revision().map(str::to_owned)));
        if let Some(diff) = disagreement(&decision, &interpreted) {
            failures.push(format!("regorus RVM and interpreter disagree: {diff}"));
        }
    }
    CaseReport {
        file: file.to_owned(),
        name: case.name,
        policy_dir: dir.to_owned(),
        policy_revision: snapshot.revision().map(str::to_owned),
        evaluator,
        input: serde_json::to_value(&case.input).unwrap_or(Value::Null),
        want: case.want,
        decision,
        rules,
        rules_error,
        failures,
    }
}

/// How two decisions for the same input differ, if they do. Two degraded decisions agree (their
/// error texts may differ).
fn disagreement(rvm: &GateDecision, interpreter: &GateDecision) -> Option<String> {
    let summary = |d: &GateDecision| {
        format!(
            "degraded={} require_approval={} reason={:?} scores={:?}",
            d.degraded,
            d.require_approval,
            d.reason,
            d.risk_factors.iter().map(|f| f.score).collect::<Vec<_>>()
        )
    };
    let same = rvm.degraded == interpreter.degraded
        && rvm.require_approval == interpreter.require_approval
        && (rvm.degraded
            || (rvm.reason == interpreter.reason && rvm.risk_factors == interpreter.risk_factors));
    (!same).then(|| format!("RVM {}, interpreter {}", summary(rvm), summary(interpreter)))
}

fn check(
    want: &Want,
    got: &GateDecision,
    rules: Option<&Value>,
    rules_error: Option<&str>,
) -> Vec<String> {
    let mut failures = Vec::new();
    if want.degraded != got.degraded {
        failures.push(if got.degraded {
            format!("degraded: want false, got true ({})", got.reason)
        } else {
            "degraded: want true, got false".to_owned()
        });
    }
    if want.require_approval != got.require_approval {
        failures.push(format!(
            "require_approval: want {}, got {}",
            want.require_approval, got.require_approval
        ));
    }
    if let Some(r) = &want.reason
        && *r != got.reason
    {
        failures.push(format!("reason: want {r:?}, got {:?}", got.reason));
    }
    if let Some(r) = &want.reason_contains
        && !got.reason.contains(r.as_str())
    {
        failures.push(format!(
            "reason: want it to contain {r:?}, got {:?}",
            got.reason
        ));
    }
    if let Some(scores) = &want.risk_scores {
        let got_scores: Vec<i64> = got.risk_factors.iter().map(|f| f.score).collect();
        let mut want_scores = scores.clone();
        want_scores.sort_unstable_by(|a, b| b.cmp(a));
        if want_scores != got_scores {
            failures.push(format!(
                "risk_scores: want {want_scores:?}, got {got_scores:?}"
            ));
        }
    }
    for (rule, want_value) in &want.rules {
        match (rules, rules_error) {
            (Some(doc), _) => {
                let got_value = doc.get(rule);
                let same = got_value.is_some_and(|g| normalize(g) == normalize(want_value));
                if !same {
                    failures.push(format!(
                        "rule {rule}: want {want_value}, got {}",
                        got_value.map_or("undefined".to_owned(), Value::to_string)
                    ));
                }
            }
            (None, Some(e)) => failures.push(format!("rule {rule}: cannot evaluate: {e}")),
            (None, None) => failures.push(format!("rule {rule}: the policy is degraded")),
        }
    }
    failures
}

/// Numbers by value, arrays as sets (sorted by their JSON text), objects by key.
pub fn normalize(v: &Value) -> Value {
    match v {
        Value::Number(n) => n
            .as_f64()
            .and_then(serde_json::Number::from_f64)
            .map_or(Value::Number(n.clone()), Value::Number),
        Value::Array(items) => {
            let mut items: Vec<Value> = items.iter().map(normalize).collect();
            items.sort_by_key(|i| i.to_string());
            Value::Array(items)
        }
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), normalize(v))).collect())
        }
        other => other.clone(),
    }
}

/// The human report: one line per case; for a failure, what differed and the value of every
/// rule of the approval package for that input.
pub fn render_text(report: &Report) -> String {
    let mut out = String::new();
    for c in &report.cases {
        let status = if c.passed() { "PASS" } else { "FAIL" };
        out.push_str(&format!("{status}  {}: {}\n", c.file.display(), c.name));
        if c.passed() {
            continue;
        }
        for f in &c.failures {
            out.push_str(&format!("        {f}\n"));
        }
        out.push_str(&format!(
            "        decision: require_approval={} degraded={} reason={:?}\n",
            c.decision.require_approval, c.decision.degraded, c.decision.reason
        ));
        for f in &c.decision.risk_factors {
            out.push_str(&format!(
                "          risk factor {:>3}  {}\n",
                f.score, f.reason
            ));
        }
        let revision = super::short_revision(c.policy_revision.as_deref());
        match (&c.rules, &c.rules_error) {
            (Some(Value::Object(rules)), _) => {
                out.push_str(&format!(
                    "        rules of kubemedic.approval in {} ({revision}) for this input:\n",
                    c.policy_dir.display()
                ));
                for (name, value) in rules {
                    out.push_str(&format!("          {name} = {value}\n"));
                }
            }
            (_, Some(e)) => out.push_str(&format!("        rules cannot be evaluated: {e}\n")),
            _ => out.push_str(&format!(
                "        policy {} ({revision}) is degraded: no rule values\n",
                c.policy_dir.display()
            )),
        }
        out.push_str(&format!("        input: {}\n", c.input));
    }
    out.push_str(&format!(
        "{} cases: {} passed, {} failed\n",
        report.cases.len(),
        report.passed,
        report.failed
    ));
    out
}
