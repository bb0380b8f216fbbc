//! The workflow catalog: action types and the workflows that implement them, from
//! `workflows/*.yaml`.
//!
//! A file holds one `actionType` (`name, what, whenToUse, whenNotToUse`) and its `workflows`
//! (`id, version, description, labels` for scoring, `parameters` as a JSON-Schema subset,
//! `engine`). [`Catalog::load`] reports every error with its file and field path — that is
//! also `kubemedic catalog validate` (the checks are in `check.rs`, each builtin step against
//! its action's arguments). The three discovery tools of invocation 2
//! (`list_available_actions`, `list_workflows`, `get_workflow`) filter and rank by the signal
//! context and the target's detected labels; [`Catalog::validate_selection`] checks a chosen
//! workflow and its parameters before anything may run (`select.rs`). Parameters and their
//! `${NAME}` substitution are in `params.rs`, the parameter schema in `schema.rs`.

mod check;
mod params;
mod schema;
mod select;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::domain;
use crate::domain::Severity;
pub use crate::domain::StepAction;

pub use params::{TARGET_PARAMS, parameters, references, substitute};
pub use schema::{ParamSchema, ParamType, Property};
pub use select::{LABEL_NAMES, SelectionContext, SelectionError, cluster_context, detected};

use check::check_workflow;

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
    /// Alert severities it suits, compared without regard to case (`Critical` is `critical`).
    #[serde(default)]
    pub severity: Vec<Severity>,
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
    pub action: StepAction,
    /// Arguments; strings may reference parameters as `${NAME}`.
    #[serde(default, rename = "with")]
    pub with: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", deny_unknown_fields)]
pub enum Engine {
    /// Steps through the Kubernetes API, each a [`domain::BuiltinAction`] with its arguments.
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

fn unset_action_type() -> domain::ActionType {
    domain::ActionType::Custom(String::new())
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
    /// The file's action type when the workflow names none (the loader sets it).
    #[serde(default = "unset_action_type")]
    pub action_type: domain::ActionType,
    pub description: String,
    #[serde(default)]
    pub labels: WorkflowLabels,
    pub parameters: ParamSchema,
    pub engine: Engine,
    /// Where it comes from: a file of the catalog directory (or the built-in catalog), or a
    /// `RemediationWorkflow` object (`RemediationWorkflow/<namespace>/<name>`). Set by the
    /// loader, whatever a file says.
    #[serde(default)]
    pub source: String,
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

#[derive(Debug, Clone)]
pub struct Catalog {
    action_types: Vec<ActionType>,
    workflows: Vec<Workflow>,
}

impl Catalog {
    /// Load and check every `*.yaml` in `dir`. All problems are reported together.
    pub fn load(dir: &Path) -> Result<Self, CatalogError> {
        let mut problems = Vec::new();
        let sources = Self::read_dir(dir, &mut problems)?;
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

    /// The catalog files of `dir`, sorted (the problems reading them go to `problems`).
    fn read_dir(
        dir: &Path,
        problems: &mut Vec<CatalogProblem>,
    ) -> Result<Vec<(PathBuf, String)>, CatalogError> {
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
        Ok(sources)
    }

    /// The sources of the catalog `dir` names, or of the built-in one: what a catalog made of
    /// files and custom resources starts from.
    pub fn file_sources(dir: Option<&Path>) -> Result<Vec<(PathBuf, String)>, CatalogError> {
        match dir {
            None => Ok(BUILTIN
                .iter()
                .map(|(p, t)| (PathBuf::from(p), (*t).to_owned()))
                .collect()),
            Some(d) => {
                let mut problems = Vec::new();
                let sources = Self::read_dir(d, &mut problems)?;
                if problems.is_empty() {
                    Ok(sources)
                } else {
                    Err(CatalogError(problems))
                }
            }
        }
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
            } else if domain::ActionType::parse(&at.name) == domain::ActionType::NoAction {
                problems.push(problem(
                    "actionType.name".into(),
                    format!(
                        "`{}` is reserved: it names the proof that no action is needed",
                        at.name
                    ),
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
                w.source = file.display().to_string();
                if w.action_type.as_str().is_empty() {
                    w.action_type = domain::ActionType::parse(&at.name);
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
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::domain::Target;

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
        // Every action that writes what Git declares, whatever its workflow's labels say; the
        // node actions stay (a node is not in Git).
        for declared in domain::ActionType::BUILTIN
            .iter()
            .filter(|a| a.writes_declared_state())
        {
            assert!(!names.contains(&declared.as_str()), "{declared}: {names:?}");
        }
        let mut node_ctx = ctx.clone();
        node_ctx.target_kind = Some("Node".into());
        let w = c.workflow("cordon-drain-node").unwrap();
        assert!(c.fit(w, &node_ctx).is_ok());
        let hpa = c.workflow("patch-hpa-max-replicas").unwrap();
        let mut hpa_ctx = ctx.clone();
        hpa_ctx.detected.hpa_enabled = true;
        assert!(
            c.fit(hpa, &hpa_ctx)
                .is_err_and(|e| e.contains("writes what Git declares")),
            "an autoscaler Git declares is not patched directly"
        );
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

    #[test]
    fn no_action_is_not_an_action_type_a_catalog_may_declare() {
        let bad = vec![(
            PathBuf::from("workflows/nothing.yaml"),
            "actionType: {name: NoAction, what: a, whenToUse: b, whenNotToUse: c}\nworkflows:\n  - id: nothing\n    version: '1'\n    description: d\n    parameters: {type: object, properties: {}}\n    engine: {type: builtin, steps: [{action: annotate, with: {key: a, value: b}}]}\n".to_owned(),
        )];
        let CatalogError(problems) = Catalog::from_sources(&bad).unwrap_err();
        let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert!(
            text.iter().any(|t| t.contains("workflows/nothing.yaml")
                && t.contains("actionType.name")
                && t.contains("`NoAction` is reserved")),
            "{text:#?}"
        );
    }

    #[test]
    fn an_unknown_action_is_named_at_its_step_beside_the_workflow_s_other_problems() {
        let bad = vec![(
            PathBuf::from("workflows/bad.yaml"),
            "actionType: {name: X, what: a, whenToUse: b, whenNotToUse: c}\nworkflows:\n  - id: x\n    version: '1'\n    description: d\n    parameters: {type: object, properties: {N: {type: integer}}}\n    engine: {type: builtin, steps: [{action: explode}, {action: scale, with: {replicas: '${MISSING}'}}]}\n".to_owned(),
        )];
        let CatalogError(problems) = Catalog::from_sources(&bad).unwrap_err();
        let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert!(
            text.iter()
                .any(|t| t.contains("workflows[0].engine.steps[0].action")
                    && t.contains("unknown action `explode`")
                    && t.contains("rollout_undo")),
            "{text:#?}"
        );
        assert!(
            text.iter()
                .any(|t| t.contains("workflows[0].engine.steps[1].with.replicas")),
            "{text:#?}"
        );
    }

    #[test]
    fn a_step_action_reads_and_writes_as_its_name() {
        let step: Step = serde_json::from_value(json!({"action": "rollout_undo"})).unwrap();
        assert_eq!(
            step.action,
            StepAction::Builtin(crate::domain::BuiltinAction::RolloutUndo)
        );
        assert_eq!(
            serde_json::to_value(&step).unwrap()["action"],
            "rollout_undo"
        );
        let step: Step = serde_json::from_value(json!({"action": "rolout_undo"})).unwrap();
        assert_eq!(step.action.builtin(), None);
        assert_eq!(
            serde_json::to_value(&step).unwrap()["action"],
            "rolout_undo"
        );
    }

    #[test]
    fn a_builtin_workflow_must_declare_what_its_proof_reads() {
        let rollback = |params: &str| {
            vec![(
                PathBuf::from("workflows/rollback.yaml"),
                format!(
                    "actionType: {{name: RollbackDeployment, what: a, whenToUse: b, whenNotToUse: c}}\nworkflows:\n  - id: back\n    version: 1.0.0\n    description: d\n    parameters: {params}\n    engine: {{type: builtin, steps: [{{action: rollout_undo, with: {{toRevision: '${{REVISION}}'}}}}]}}\n"
                ),
            )]
        };
        let CatalogError(problems) = Catalog::from_sources(&rollback(
            "{type: object, properties: {REVISION: {type: integer}}, required: [REVISION]}",
        ))
        .unwrap_err();
        let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert!(
            text.iter()
                .any(|t| t.contains("parameters.properties.TO_REVISION")
                    && t.contains("its proof reads it")),
            "{text:#?}"
        );
        let CatalogError(problems) = Catalog::from_sources(&rollback(
            "{type: object, properties: {REVISION: {type: integer}, TO_REVISION: {type: string}}}",
        ))
        .unwrap_err();
        let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert!(
            text.iter()
                .any(|t| t.contains("TO_REVISION.type") && t.contains("integer")),
            "{text:#?}"
        );
        assert!(
            text.iter()
                .any(|t| t.contains("must require `TO_REVISION`")),
            "{text:#?}"
        );
    }
}
