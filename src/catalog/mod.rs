//! The workflow catalog: action types and the workflows that implement them, from
//! `workflows/*.yaml`.
//!
//! A file holds one `actionType` (`name, what, whenToUse, whenNotToUse`) and its `workflows`
//! (`id, version, description, labels` for scoring, `parameters` as a JSON-Schema subset,
//! `engine`). [`Catalog::load`] reports every error with its file and field path — that is
//! also `kubemedic catalog validate`. The three discovery tools of invocation 2
//! (`list_available_actions`, `list_workflows`, `get_workflow`) filter and rank by the signal
//! context and the target's detected labels; [`Catalog::validate_selection`] checks a chosen
//! workflow and its parameters before anything may run.

mod schema;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

pub use schema::{ParamSchema, ParamType, Property};

use crate::actions::{BuiltinAction, check_args};
use crate::domain::{DetectedLabels, Target};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ActionType {
    pub name: String,
    pub what: String,
    pub when_to_use: String,
    pub when_not_to_use: String,
}

/// When a workflow applies. Lists match any element; `"*"` or an empty list matches all.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkflowLabels {
    #[serde(default)]
    pub severity: Vec<String>,
    #[serde(default)]
    pub environment: Vec<String>,
    /// Target kinds the workflow acts on.
    #[serde(default)]
    pub target_kinds: Vec<String>,
    /// Detected labels that must be true (e.g. `hpaEnabled`).
    #[serde(default)]
    pub requires: Vec<String>,
    /// Detected labels that must not be true (e.g. `gitOpsManaged` for a direct patch).
    #[serde(default)]
    pub excludes: Vec<String>,
    /// Signal modes it suits (`reactive`, `proactive`); empty = both.
    #[serde(default)]
    pub signal_modes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Step {
    pub action: String,
    /// Arguments; strings may reference parameters as `${NAME}`.
    #[serde(default, rename = "with")]
    pub with: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", deny_unknown_fields)]
pub enum Engine {
    /// Steps through the Kubernetes API, each a [`BuiltinAction`] with its arguments.
    Builtin { steps: Vec<Step> },
    /// A Kubernetes Job from an image, parameters as env, its own service account.
    #[serde(rename_all = "camelCase")]
    Job {
        image: String,
        #[serde(default)]
        command: Vec<String>,
        service_account: String,
        #[serde(default = "default_job_timeout")]
        timeout_seconds: u64,
    },
    /// A change proposed to a human (e.g. a git revert for a GitOps-managed target); nothing
    /// is applied to the cluster.
    Proposal { template: String },
}

fn default_job_timeout() -> u64 {
    600
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Workflow {
    pub id: String,
    #[serde(deserialize_with = "version_text")]
    pub version: String,
    #[serde(default)]
    pub action_type: String,
    pub description: String,
    #[serde(default)]
    pub labels: WorkflowLabels,
    pub parameters: ParamSchema,
    pub engine: Engine,
}

/// A file, read in two steps so that one bad workflow does not hide the problems of the
/// others: the outline first, then each workflow on its own.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CatalogFile {
    action_type: ActionType,
    #[serde(default)]
    workflows: Vec<Value>,
}

/// `1.0.0`, or a number a YAML author wrote unquoted (`1.0`), as text; the format is checked
/// afterwards with the other problems.
fn version_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    match Value::deserialize(d)? {
        Value::String(s) => Ok(s),
        Value::Number(n) => Ok(n.to_string()),
        other => Err(serde::de::Error::custom(format!(
            "expected a version like 1.0.0, got {other}"
        ))),
    }
}

/// The catalog shipped in the binary (the repository's `workflows/`), used when no
/// `--catalog-dir` is given so the daemon works from any directory.
const BUILTIN: &[(&str, &str)] = &[
    (
        "workflows/cordon-drain-node.yaml",
        include_str!("../../workflows/cordon-drain-node.yaml"),
    ),
    (
        "workflows/delete-pod.yaml",
        include_str!("../../workflows/delete-pod.yaml"),
    ),
    (
        "workflows/expand-pvc.yaml",
        include_str!("../../workflows/expand-pvc.yaml"),
    ),
    (
        "workflows/git-revert.yaml",
        include_str!("../../workflows/git-revert.yaml"),
    ),
    (
        "workflows/increase-cpu-limits.yaml",
        include_str!("../../workflows/increase-cpu-limits.yaml"),
    ),
    (
        "workflows/increase-memory-limits.yaml",
        include_str!("../../workflows/increase-memory-limits.yaml"),
    ),
    (
        "workflows/patch-hpa-max-replicas.yaml",
        include_str!("../../workflows/patch-hpa-max-replicas.yaml"),
    ),
    (
        "workflows/relax-pdb.yaml",
        include_str!("../../workflows/relax-pdb.yaml"),
    ),
    (
        "workflows/remove-node-taint.yaml",
        include_str!("../../workflows/remove-node-taint.yaml"),
    ),
    (
        "workflows/restart-deployment.yaml",
        include_str!("../../workflows/restart-deployment.yaml"),
    ),
    (
        "workflows/rollback-deployment.yaml",
        include_str!("../../workflows/rollback-deployment.yaml"),
    ),
    (
        "workflows/rollback-statefulset.yaml",
        include_str!("../../workflows/rollback-statefulset.yaml"),
    ),
    (
        "workflows/scale-replicas.yaml",
        include_str!("../../workflows/scale-replicas.yaml"),
    ),
];

/// Parameters kubemedic fills from the verified root owner; a selection never sets them.
pub const TARGET_PARAMS: [&str; 3] = [
    "TARGET_RESOURCE_KIND",
    "TARGET_RESOURCE_NAME",
    "TARGET_RESOURCE_NAMESPACE",
];

/// One problem in a catalog directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CatalogProblem {
    pub file: PathBuf,
    pub field: String,
    pub message: String,
}

impl std::fmt::Display for CatalogProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {}: {}",
            self.file.display(),
            self.field,
            self.message
        )
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("invalid catalog ({} problem(s)):\n{}", .0.len(), .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
pub struct CatalogError(pub Vec<CatalogProblem>);

/// The context a workflow is chosen for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SelectionContext {
    pub severity: Option<String>,
    pub environment: Option<String>,
    pub signal_mode: Option<String>,
    pub target_kind: Option<String>,
    pub detected: DetectedLabels,
}

#[derive(Debug, Clone)]
pub struct Catalog {
    action_types: Vec<ActionType>,
    workflows: Vec<Workflow>,
}

/// A validation failure of a selected workflow, with the reason code of outcome 6.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SelectionError {
    /// `workflow_not_found`, `workflow_not_applicable` or `parameter_validation_failed`.
    pub code: &'static str,
    pub errors: Vec<String>,
}

impl Catalog {
    /// Load and check every `*.yaml` in `dir`. All problems are reported together.
    pub fn load(dir: &Path) -> Result<Self, CatalogError> {
        let mut problems = Vec::new();
        let mut files: Vec<PathBuf> = match std::fs::read_dir(dir) {
            Ok(rd) => rd
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
                .collect(),
            Err(e) => {
                return Err(CatalogError(vec![CatalogProblem {
                    file: dir.to_owned(),
                    field: "-".into(),
                    message: format!("cannot read the directory: {e}"),
                }]));
            }
        };
        files.sort();
        let mut sources = Vec::new();
        for file in files {
            match std::fs::read_to_string(&file) {
                Ok(text) => sources.push((file, text)),
                Err(e) => problems.push(CatalogProblem {
                    file,
                    field: "-".into(),
                    message: format!("cannot read: {e}"),
                }),
            }
        }
        let mut catalog = Self::from_sources(&sources).unwrap_or_else(|CatalogError(p)| {
            problems.extend(p);
            Catalog {
                action_types: vec![],
                workflows: vec![],
            }
        });
        if !problems.is_empty() {
            return Err(CatalogError(problems));
        }
        if catalog.workflows.is_empty() {
            return Err(CatalogError(vec![CatalogProblem {
                file: dir.to_owned(),
                field: "-".into(),
                message: "no workflows found".into(),
            }]));
        }
        catalog.workflows.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(catalog)
    }

    /// The catalog compiled into the binary.
    pub fn builtin() -> Result<Self, CatalogError> {
        let sources: Vec<(PathBuf, String)> = BUILTIN
            .iter()
            .map(|(p, t)| (PathBuf::from(p), (*t).to_owned()))
            .collect();
        Self::from_sources(&sources)
    }

    /// Parse catalog files given as (path, text).
    pub fn from_sources(sources: &[(PathBuf, String)]) -> Result<Self, CatalogError> {
        let mut problems = Vec::new();
        let mut action_types = Vec::new();
        let mut workflows: Vec<(PathBuf, usize, Workflow)> = Vec::new();
        for (file, text) in sources {
            let problem = |field: String, message: String| CatalogProblem {
                file: file.clone(),
                field,
                message,
            };
            let value: Value = match serde_saphyr::from_str(text) {
                Ok(v) => v,
                Err(e) => {
                    problems.push(problem("-".into(), format!("invalid YAML: {e}")));
                    continue;
                }
            };
            let parsed: CatalogFile = match serde_path_to_error::deserialize(&value) {
                Ok(p) => p,
                Err(e) => {
                    problems.push(problem(e.path().to_string(), e.into_inner().to_string()));
                    continue;
                }
            };
            let at = parsed.action_type;
            if at.name.trim().is_empty() {
                problems.push(problem(
                    "actionType.name".into(),
                    "must not be empty".into(),
                ));
            }
            for (i, raw) in parsed.workflows.into_iter().enumerate() {
                let mut w: Workflow = match serde_path_to_error::deserialize(&raw) {
                    Ok(w) => w,
                    Err(e) => {
                        let path = e.path().to_string();
                        let field = if path == "." {
                            format!("workflows[{i}]")
                        } else {
                            format!("workflows[{i}].{path}")
                        };
                        problems.push(problem(field, e.into_inner().to_string()));
                        continue;
                    }
                };
                if w.action_type.is_empty() {
                    w.action_type = at.name.clone();
                } else if w.action_type != at.name {
                    problems.push(problem(
                        format!("workflows[{i}].actionType"),
                        format!(
                            "`{}` differs from the file's action type `{}`",
                            w.action_type, at.name
                        ),
                    ));
                }
                for p in check_workflow(&w) {
                    problems.push(problem(format!("workflows[{i}].{}", p.0), p.1));
                }
                workflows.push((file.clone(), i, w));
            }
            if action_types.iter().any(|a: &ActionType| a.name == at.name) {
                problems.push(problem(
                    "actionType.name".into(),
                    format!("action type `{}` defined twice", at.name),
                ));
            }
            action_types.push(at);
        }
        let mut seen = BTreeMap::new();
        for (file, i, w) in &workflows {
            if let Some(first) = seen.insert(w.id.clone(), file.clone()) {
                problems.push(CatalogProblem {
                    file: file.clone(),
                    field: format!("workflows[{i}].id"),
                    message: format!(
                        "workflow id `{}` already defined in {}",
                        w.id,
                        first.display()
                    ),
                });
            }
        }
        if !problems.is_empty() {
            return Err(CatalogError(problems));
        }
        Ok(Self {
            action_types,
            workflows: workflows.into_iter().map(|(_, _, w)| w).collect(),
        })
    }

    pub fn action_types(&self) -> &[ActionType] {
        &self.action_types
    }

    pub fn workflows(&self) -> &[Workflow] {
        &self.workflows
    }

    pub fn workflow(&self, id: &str) -> Option<&Workflow> {
        self.workflows.iter().find(|w| w.id == id)
    }

    pub fn action_type(&self, name: &str) -> Option<&ActionType> {
        self.action_types.iter().find(|a| a.name == name)
    }

    /// Why a workflow does not fit the context (`None`: it fits), and its score when it does.
    pub fn fit(&self, w: &Workflow, ctx: &SelectionContext) -> Result<u32, String> {
        let l = &w.labels;
        let matches = |list: &[String], value: Option<&str>| {
            list.is_empty()
                || list.iter().any(|x| x == "*")
                || value.is_some_and(|v| list.iter().any(|x| x.eq_ignore_ascii_case(v)))
        };
        if !matches(&l.target_kinds, ctx.target_kind.as_deref()) {
            return Err(format!(
                "acts on {}, not on {}",
                l.target_kinds.join("/"),
                ctx.target_kind.as_deref().unwrap_or("an unknown kind")
            ));
        }
        if !matches(&l.signal_modes, ctx.signal_mode.as_deref()) {
            return Err(format!("meant for {} signals", l.signal_modes.join("/")));
        }
        for req in &l.requires {
            if !detected(&ctx.detected, req) {
                return Err(format!("requires the target to be {req}"));
            }
        }
        for ex in &l.excludes {
            if detected(&ctx.detected, ex) {
                return Err(format!("not for targets that are {ex}"));
            }
        }
        let mut score = 0;
        if !l.severity.is_empty() && !l.severity.iter().any(|s| s == "*") {
            if !matches(&l.severity, ctx.severity.as_deref()) {
                return Err(format!("meant for severity {}", l.severity.join("/")));
            }
            score += 2;
        }
        if !l.environment.is_empty() && !l.environment.iter().any(|s| s == "*") {
            if !matches(&l.environment, ctx.environment.as_deref()) {
                return Err(format!("meant for environment {}", l.environment.join("/")));
            }
            score += 2;
        }
        score += 3 * l.requires.len() as u32 + l.target_kinds.len().min(1) as u32;
        Ok(score)
    }

    /// `list_available_actions`: action types with at least one fitting workflow, best first.
    pub fn list_available_actions(
        &self,
        ctx: &SelectionContext,
        offset: usize,
        limit: usize,
    ) -> Value {
        let mut ranked: Vec<(u32, &ActionType, usize)> = self
            .action_types
            .iter()
            .filter_map(|at| {
                let scores: Vec<u32> = self
                    .workflows
                    .iter()
                    .filter(|w| w.action_type == at.name)
                    .filter_map(|w| self.fit(w, ctx).ok())
                    .collect();
                scores.iter().max().map(|best| (*best, at, scores.len()))
            })
            .collect();
        ranked.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.name.cmp(&b.1.name)));
        let total = ranked.len();
        let items: Vec<Value> = ranked
            .iter()
            .skip(offset)
            .take(limit)
            .map(|(_, at, n)| {
                json!({"name": at.name, "what": at.what, "whenToUse": at.when_to_use,
                       "whenNotToUse": at.when_not_to_use, "workflow_count": n})
            })
            .collect();
        json!({
            "actionTypes": items,
            "total": total,
            "hasMore": offset + items.len() < total,
            "cluster_context": cluster_context(&ctx.detected),
        })
    }

    /// `list_workflows`: the fitting workflows of one action type, best first.
    pub fn list_workflows(
        &self,
        action_type: &str,
        ctx: &SelectionContext,
        offset: usize,
        limit: usize,
    ) -> Value {
        let mut ranked: Vec<(u32, &Workflow)> = self
            .workflows
            .iter()
            .filter(|w| w.action_type == action_type)
            .filter_map(|w| self.fit(w, ctx).ok().map(|s| (s, w)))
            .collect();
        ranked.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.id.cmp(&b.1.id)));
        let total = ranked.len();
        let items: Vec<Value> = ranked
            .iter()
            .skip(offset)
            .take(limit)
            .map(|(_, w)| {
                json!({"workflow_id": w.id, "version": w.version, "description": w.description,
                       "parameters": w.parameters.summary()})
            })
            .collect();
        let mut out = json!({"action_type": action_type, "workflows": items, "total": total,
                             "hasMore": offset + items.len() < total});
        if self.action_type(action_type).is_none() {
            out["error"] = json!(format!(
                "unknown action type `{action_type}`; call list_available_actions"
            ));
        }
        out
    }

    /// `get_workflow`: full details and the parameter schema (without the injected target
    /// parameters, which the model must not set).
    pub fn get_workflow(&self, id: &str) -> Value {
        match self.workflow(id) {
            None => json!({"error": format!("workflow `{id}` not found; call list_workflows")}),
            Some(w) => json!({
                "workflow_id": w.id, "version": w.version, "action_type": w.action_type,
                "description": w.description, "parameters": w.parameters.for_model(),
                "engine": match &w.engine {
                    Engine::Builtin { steps } => json!({"type": "builtin", "steps": steps.iter().map(|s| s.action.clone()).collect::<Vec<_>>()}),
                    Engine::Job { image, .. } => json!({"type": "job", "image": image}),
                    Engine::Proposal { .. } => json!({"type": "proposal", "note": "proposes a change to a human; applies nothing"}),
                },
                "note": "TARGET_RESOURCE_KIND/NAME/NAMESPACE are filled by kubemedic from the verified root owner; do not set them.",
            }),
        }
    }

    /// Check a selection: the workflow exists and fits the context, and its parameters (with
    /// the target parameters injected from the verified root owner) satisfy the schema.
    /// Returns the full parameter set to execute with.
    pub fn validate_selection(
        &self,
        workflow_id: &str,
        parameters: &serde_json::Map<String, Value>,
        root_owner: Option<&Target>,
        ctx: &SelectionContext,
    ) -> Result<serde_json::Map<String, Value>, SelectionError> {
        let Some(w) = self.workflow(workflow_id) else {
            return Err(SelectionError {
                code: "workflow_not_found",
                errors: vec![format!("workflow `{workflow_id}` is not in the catalog")],
            });
        };
        if let Err(why) = self.fit(w, ctx) {
            return Err(SelectionError {
                code: "workflow_not_applicable",
                errors: vec![format!(
                    "workflow `{workflow_id}` does not fit this target: it {why}"
                )],
            });
        }
        let mut params = parameters.clone();
        for p in TARGET_PARAMS {
            params.remove(p);
        }
        if let Some(t) = root_owner {
            params.insert("TARGET_RESOURCE_KIND".into(), json!(t.kind));
            params.insert("TARGET_RESOURCE_NAME".into(), json!(t.name));
            params.insert(
                "TARGET_RESOURCE_NAMESPACE".into(),
                json!(t.namespace.clone().unwrap_or_default()),
            );
        }
        w.parameters
            .validate(&mut params)
            .map_err(|errors| SelectionError {
                code: "parameter_validation_failed",
                errors,
            })?;
        Ok(params)
    }
}

/// Whether a detected label (by its contract name) is true.
pub fn detected(d: &DetectedLabels, name: &str) -> bool {
    match name {
        "gitOpsManaged" => d.git_ops_managed,
        "helmManaged" => d.helm_managed,
        "pdbProtected" => d.pdb_protected,
        "hpaEnabled" => d.hpa_enabled,
        "stateful" => d.stateful,
        "networkIsolated" => d.network_isolated,
        "serviceMesh" => d.service_mesh,
        "resourceQuotaConstrained" => d.resource_quota_constrained,
        _ => false,
    }
}

pub const LABEL_NAMES: &[&str] = &[
    "gitOpsManaged",
    "helmManaged",
    "pdbProtected",
    "hpaEnabled",
    "stateful",
    "networkIsolated",
    "serviceMesh",
    "resourceQuotaConstrained",
];

/// The `cluster_context` text of `list_available_actions`.
pub fn cluster_context(d: &DetectedLabels) -> String {
    let mut text = format!("Target: {}.", d.describe());
    if d.git_ops_managed {
        text.push_str(&format!(
            " The target is managed by GitOps ({}): prefer git-based action types (GitRevert) — a direct patch would be reverted by the GitOps controller or fight it.",
            d.git_ops_tool.as_deref().unwrap_or("unknown tool")
        ));
    }
    if d.resource_quota_constrained && !d.quota_details.is_empty() {
        let q: Vec<String> = d
            .quota_details
            .iter()
            .map(|(r, u)| format!("{r} {}/{}", u.used, u.hard))
            .collect();
        text.push_str(&format!(" Namespace quota (used/hard): {}.", q.join(", ")));
    }
    if !d.failed_detections.is_empty() {
        text.push_str(&format!(
            " Unknown (detection failed): {}.",
            d.failed_detections.join(", ")
        ));
    }
    text
}

/// Structural checks of one workflow: (field, message) pairs.
fn check_workflow(w: &Workflow) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if w.id.trim().is_empty()
        || !w
            .id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
    {
        out.push((
            "id".into(),
            format!("`{}` must be non-empty, letters, digits, `-` and `.`", w.id),
        ));
    }
    let parts: Vec<&str> = w.version.split('.').collect();
    if parts.len() != 3 || parts.iter().any(|p| p.parse::<u32>().is_err()) {
        out.push((
            "version".into(),
            format!("`{}` is not MAJOR.MINOR.PATCH", w.version),
        ));
    }
    if w.description.trim().is_empty() {
        out.push(("description".into(), "must not be empty".into()));
    }
    for (field, list) in [
        ("labels.requires", &w.labels.requires),
        ("labels.excludes", &w.labels.excludes),
    ] {
        for l in list {
            if !LABEL_NAMES.contains(&l.as_str()) {
                out.push((
                    field.into(),
                    format!(
                        "unknown detected label `{l}`; known: {}",
                        LABEL_NAMES.join(", ")
                    ),
                ));
            }
        }
    }
    for m in &w.labels.signal_modes {
        if m != "reactive" && m != "proactive" {
            out.push((
                "labels.signalModes".into(),
                format!("`{m}` is neither reactive nor proactive"),
            ));
        }
    }
    for (field, message) in w.parameters.check() {
        out.push((format!("parameters.{field}"), message));
    }
    match &w.engine {
        Engine::Builtin { steps } => {
            if steps.is_empty() {
                out.push((
                    "engine.steps".into(),
                    "a builtin engine needs at least one step".into(),
                ));
            }
            for (i, s) in steps.iter().enumerate() {
                match BuiltinAction::parse(&s.action) {
                    None => out.push((
                        format!("engine.steps[{i}].action"),
                        format!(
                            "unknown action `{}`; known: {}",
                            s.action,
                            BuiltinAction::names()
                        ),
                    )),
                    Some(action) => {
                        for (arg, problem) in check_args(action, &s.with) {
                            out.push((format!("engine.steps[{i}].with.{arg}"), problem));
                        }
                    }
                }
                for (k, v) in &s.with {
                    if let Some(text) = v.as_str() {
                        for name in references(text) {
                            if !w.parameters.properties.contains_key(&name) {
                                out.push((
                                    format!("engine.steps[{i}].with.{k}"),
                                    format!("references `${{{name}}}`, which is not a parameter"),
                                ));
                            }
                        }
                    }
                }
            }
        }
        Engine::Job {
            image,
            service_account,
            ..
        } => {
            if image.trim().is_empty() {
                out.push(("engine.image".into(), "must not be empty".into()));
            }
            if service_account.trim().is_empty() {
                out.push((
                    "engine.serviceAccount".into(),
                    "a job runs with its own service account".into(),
                ));
            }
        }
        Engine::Proposal { template } => {
            if template.trim().is_empty() {
                out.push(("engine.template".into(), "must not be empty".into()));
            }
        }
    }
    out
}

/// `${NAME}` references in a string.
pub fn references(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else { break };
        out.push(after[..end].to_owned());
        rest = &after[end + 1..];
    }
    out
}

/// The workflow's parameters with `TARGET_RESOURCE_*` taken from the verified root owner
/// (whatever the selection said).
pub fn parameters(selected: &Map<String, Value>, target: &Target) -> Map<String, Value> {
    let mut p = selected.clone();
    p.insert("TARGET_RESOURCE_KIND".into(), json!(target.kind));
    p.insert("TARGET_RESOURCE_NAME".into(), json!(target.name));
    p.insert(
        "TARGET_RESOURCE_NAMESPACE".into(),
        json!(target.namespace.clone().unwrap_or_default()),
    );
    p
}

/// `${NAME}` in step arguments: a whole-string reference takes the parameter's JSON value (a
/// number stays a number); references inside text are replaced by the value's text.
pub fn substitute(v: &Value, params: &Map<String, Value>) -> Value {
    match v {
        Value::String(s) => {
            if let Some(name) = s.strip_prefix("${").and_then(|r| r.strip_suffix('}'))
                && !name.contains(['$', '{', '}'])
            {
                return params.get(name).cloned().unwrap_or(Value::Null);
            }
            let mut out = s.clone();
            for (k, val) in params {
                let text = match val {
                    Value::String(t) => t.clone(),
                    other => other.to_string(),
                };
                out = out.replace(&format!("${{{k}}}"), &text);
            }
            Value::String(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(|x| substitute(x, params)).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, x)| (k.clone(), substitute(x, params)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog() -> Catalog {
        Catalog::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("workflows")).unwrap()
    }

    #[test]
    fn shipped_catalog_is_valid_and_complete() {
        let c = catalog();
        for at in [
            "RollbackDeployment",
            "RestartDeployment",
            "ScaleReplicas",
            "IncreaseMemoryLimits",
            "IncreaseCPULimits",
            "PatchHPAMaxReplicas",
            "RelaxPDB",
            "DeletePod",
            "CordonDrainNode",
            "RemoveNodeTaint",
            "ExpandPVC",
            "RollbackStatefulSet",
            "GitRevert",
        ] {
            assert!(c.action_type(at).is_some(), "{at}");
            assert!(
                c.workflows().iter().any(|w| w.action_type == at),
                "{at} has a workflow"
            );
        }
    }

    #[test]
    fn builtin_matches_the_directory() {
        assert_eq!(
            Catalog::builtin().unwrap().workflows().len(),
            catalog().workflows().len()
        );
    }

    #[test]
    fn gitops_targets_only_see_git_based_actions_for_spec_changes() {
        let c = catalog();
        let mut ctx = SelectionContext {
            target_kind: Some("Deployment".into()),
            severity: Some("critical".into()),
            ..Default::default()
        };
        ctx.detected.git_ops_managed = true;
        ctx.detected.git_ops_tool = Some("argocd".into());
        let v = c.list_available_actions(&ctx, 0, 20);
        let names: Vec<&str> = v["actionTypes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["name"].as_str().unwrap())
            .collect();
        assert!(names.contains(&"GitRevert"), "{names:?}");
        assert!(!names.contains(&"RollbackDeployment"), "{names:?}");
        assert!(
            v["cluster_context"]
                .as_str()
                .unwrap()
                .contains("prefer git-based")
        );
    }

    #[test]
    fn selection_validation() {
        let c = catalog();
        let ctx = SelectionContext {
            target_kind: Some("Deployment".into()),
            ..Default::default()
        };
        let target = Target::new("Deployment", "web", Some("shop".into()));
        let err = c
            .validate_selection("nope", &Default::default(), Some(&target), &ctx)
            .unwrap_err();
        assert_eq!(err.code, "workflow_not_found");
        let w = c
            .workflows()
            .iter()
            .find(|w| w.action_type == "ScaleReplicas")
            .unwrap();
        let mut p = serde_json::Map::new();
        p.insert("REPLICAS".into(), json!(-3));
        let err = c
            .validate_selection(&w.id, &p, Some(&target), &ctx)
            .unwrap_err();
        assert_eq!(err.code, "parameter_validation_failed");
        assert!(err.errors.iter().any(|e| e.contains("REPLICAS")), "{err:?}");
        p.insert("REPLICAS".into(), json!("4"));
        let ok = c
            .validate_selection(&w.id, &p, Some(&target), &ctx)
            .unwrap();
        assert_eq!(ok["REPLICAS"], 4, "string numbers are coerced");
        assert_eq!(ok["TARGET_RESOURCE_NAME"], "web");
    }

    #[test]
    fn workflows_are_ranked_by_fit_and_paged() {
        let wf = |id: &str, labels: &str| {
            format!(
                "  - id: {id}\n    version: 1.0.0\n    description: {id}\n    labels: {labels}\n    parameters: {{type: object, properties: {{TARGET_RESOURCE_NAME: {{type: string}}}}}}\n    engine: {{type: builtin, steps: [{{action: rollout_restart}}]}}\n"
            )
        };
        let yaml = format!(
            "actionType: {{name: RestartDeployment, what: a, whenToUse: b, whenNotToUse: c}}\nworkflows:\n{}{}{}{}",
            wf("plain", "{}"),
            wf(
                "for-critical",
                "{targetKinds: [Deployment], severity: [critical]}"
            ),
            wf(
                "for-pdb",
                "{targetKinds: [Deployment], requires: [pdbProtected]}"
            ),
            wf("production-only", "{environment: [production]}"),
        );
        let c = Catalog::from_sources(&[(PathBuf::from("workflows/restart.yaml"), yaml)]).unwrap();
        let mut ctx = SelectionContext {
            target_kind: Some("Deployment".into()),
            severity: Some("critical".into()),
            environment: Some("staging".into()),
            ..Default::default()
        };
        ctx.detected.pdb_protected = true;
        let ids = |v: &Value| -> Vec<String> {
            v["workflows"]
                .as_array()
                .unwrap()
                .iter()
                .map(|w| w["workflow_id"].as_str().unwrap().to_owned())
                .collect()
        };
        let page1 = c.list_workflows("RestartDeployment", &ctx, 0, 2);
        assert_eq!(ids(&page1), ["for-pdb", "for-critical"], "{page1}");
        assert_eq!(
            (page1["total"].as_u64(), page1["hasMore"].as_bool()),
            (Some(3), Some(true))
        );
        let page2 = c.list_workflows("RestartDeployment", &ctx, 2, 2);
        assert_eq!(
            ids(&page2),
            ["plain"],
            "the production-only one does not fit staging"
        );
        assert_eq!(page2["hasMore"], false);
        let actions = c.list_available_actions(&ctx, 0, 10);
        assert_eq!(actions["actionTypes"][0]["workflow_count"], 3, "{actions}");
        // Without a PDB the workflow that requires one is gone, not just ranked lower.
        ctx.detected.pdb_protected = false;
        let v = c.list_workflows("RestartDeployment", &ctx, 0, 10);
        assert_eq!(ids(&v), ["for-critical", "plain"]);
        let unknown = c.list_workflows("Nope", &ctx, 0, 10);
        assert!(
            unknown["error"]
                .as_str()
                .unwrap()
                .contains("list_available_actions")
        );
    }

    #[test]
    fn problems_name_file_and_field() {
        let bad = vec![(
            PathBuf::from("workflows/bad.yaml"),
            "actionType: {name: X, what: a, whenToUse: b, whenNotToUse: c}\nworkflows:\n  - id: x\n    version: '1'\n    description: d\n    parameters: {type: object, properties: {N: {type: integr}}}\n    engine: {type: builtin, steps: [{action: explode}]}\n".to_owned(),
        )];
        let CatalogError(problems) = Catalog::from_sources(&bad).unwrap_err();
        let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert!(
            text.iter().any(|t| t.contains("workflows/bad.yaml")
                && t.contains("workflows[0].parameters.properties.N.type")),
            "{text:#?}"
        );
    }
}
