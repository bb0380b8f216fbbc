//! Invocation 2's side of the catalog: how well a workflow fits a request (severity,
//! environment, signal mode, target kind, detected labels), the three discovery tools the
//! model calls (`list_available_actions`, `list_workflows`, `get_workflow`), and the check of
//! the workflow and parameters it chose ([`Catalog::validate_selection`]).

use serde::Serialize;
use serde_json::{Value, json};

use super::params::TARGET_PARAMS;
use super::{ActionType, Catalog, Engine, Workflow};
use crate::domain::Severity;
use crate::domain::{Analysis, DetectedLabels, RemediationRequest, Target};

/// The context a workflow is chosen for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SelectionContext {
    pub severity: Option<Severity>,
    pub environment: Option<String>,
    pub signal_mode: Option<String>,
    pub target_kind: Option<String>,
    pub detected: DetectedLabels,
}

impl SelectionContext {
    /// The context of `req`, investigated as `analysis`: its signal's severity and mode, its
    /// environment, and the verified root owner's kind and detected labels.
    pub fn of(req: &RemediationRequest, analysis: &Analysis) -> Self {
        Self {
            severity: req.signal.severity.clone(),
            environment: req.state.enrichment.as_ref().map(|e| e.environment.clone()),
            signal_mode: Some(req.signal.mode.as_str().into()),
            target_kind: analysis.root_owner.as_ref().map(|t| t.kind.clone()),
            detected: analysis.detected_labels.clone().unwrap_or_default(),
        }
    }
}

/// A validation failure of a selected workflow, with the reason code of outcome 6.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SelectionError {
    /// `workflow_not_found`, `workflow_not_applicable` or `parameter_validation_failed`.
    pub code: &'static str,
    pub errors: Vec<String>,
}

impl Catalog {
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
        if ctx.detected.git_ops_managed && w.action_type.writes_declared_state() {
            return Err(format!(
                "writes what Git declares ({}), and the target is gitOpsManaged: propose the change in Git",
                w.action_type
            ));
        }
        let mut score = 0;
        if !l.severity.is_empty() && !l.severity.iter().any(Severity::is_any) {
            let level = ctx.severity.as_ref();
            if !level.is_some_and(|v| l.severity.iter().any(|s| s.same_level(v))) {
                let named: Vec<&str> = l.severity.iter().map(Severity::as_str).collect();
                return Err(format!("meant for severity {}", named.join("/")));
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

    /// The fitting workflows of one action type, best first (what `list_workflows` pages
    /// through).
    pub fn ranked_workflows(&self, action_type: &str, ctx: &SelectionContext) -> Vec<&Workflow> {
        let mut ranked: Vec<(u32, &Workflow)> = self
            .workflows
            .iter()
            .filter(|w| w.action_type == action_type)
            .filter_map(|w| self.fit(w, ctx).ok().map(|s| (s, w)))
            .collect();
        ranked.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.id.cmp(&b.1.id)));
        ranked.into_iter().map(|(_, w)| w).collect()
    }

    /// The best-fitting workflow of one action type, if any fits.
    pub fn best_workflow(
        &self,
        action_type: &crate::domain::ActionType,
        ctx: &SelectionContext,
    ) -> Option<&Workflow> {
        self.ranked_workflows(action_type.as_str(), ctx)
            .into_iter()
            .next()
    }

    /// `list_workflows`: the fitting workflows of one action type, best first.
    pub fn list_workflows(
        &self,
        action_type: &str,
        ctx: &SelectionContext,
        offset: usize,
        limit: usize,
    ) -> Value {
        let ranked = self.ranked_workflows(action_type, ctx);
        let total = ranked.len();
        let items: Vec<Value> = ranked
            .iter()
            .skip(offset)
            .take(limit)
            .map(|w| {
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
