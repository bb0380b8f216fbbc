//! A model (or a reviewer) proposing something on a captured cluster: the real LLM investigator
//! talks to a scripted OpenAI-compatible server over a real socket, and the investigation and
//! selection stages run on the snapshot, with the prover checking whatever is proposed. Used by
//! tests/proofs.rs (each action type, right and wrong) and tests/unseen_proposals.rs (a
//! confidently wrong model on incidents nobody wrote down).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use kubemedic::catalog::Catalog;
use kubemedic::clock::{Clock, ManualClock};
use kubemedic::cluster::SnapshotCluster;
use kubemedic::cluster::tools::ToolLimits;
use kubemedic::domain::{Proposer, RemediationRequest, RequestedWorkflow, Stage};
use kubemedic::history::InMemoryHistory;
use kubemedic::investigate::playbooks::Playbooks;
use kubemedic::investigate::{
    InvestigationStage, LlmInvestigator, LlmInvestigatorSettings, SelectionStage,
};
use kubemedic::live::Live;
use kubemedic::llm::{OpenAiLlm, OpenAiSettings, Provider, TokenBudget};
use kubemedic::prove::Prover;
use serde_json::{Value, json};

use super::llm::{Reply, ScriptedLlm, calls};

/// One proposal: an action type on a target of a captured cluster, with the workflow's
/// parameters as the model submits them.
pub struct Proposal {
    pub action_type: String,
    /// The remediation target the model names: kind and name (the namespace is the alert's).
    pub target: (String, String),
    pub parameters: Value,
    /// Why the proposer thinks so (the model's words).
    pub why: String,
}

/// The investigator on the scripted model, reading `cluster`.
pub fn investigator(
    server: &ScriptedLlm,
    cluster: Arc<SnapshotCluster>,
    clock: Arc<dyn Clock>,
    catalog: Arc<Live<Catalog>>,
) -> Arc<LlmInvestigator> {
    let llm = OpenAiLlm::new(&OpenAiSettings {
        provider: Provider::OpenAi,
        base_url: Some(format!("{}/v1", server.base_url)),
        api_key: Some(kubemedic::secret::Secret::new("sk-test-key")),
        azure_deployment: None,
        azure_api_version: "2024-10-21".into(),
        timeout: Duration::from_secs(10),
        max_retries: 1,
        backoff: Duration::from_millis(20),
        stream: true,
    })
    .unwrap();
    Arc::new(LlmInvestigator {
        llm: Arc::new(llm),
        budget: Arc::new(TokenBudget::new(1_000_000, 10_000_000)),
        reader: cluster,
        clock,
        tool_limits: ToolLimits::default(),
        catalog,
        playbooks: Live::new(Playbooks::builtin().unwrap()),
        remote: None,
        history: Arc::new(InMemoryHistory::default()),
        settings: LlmInvestigatorSettings {
            rca_model: "gpt-4o".into(),
            selection_model: "gpt-4o-mini".into(),
            ..Default::default()
        },
        metrics: None,
        live: None,
    })
}

/// A captured incident: its cluster, its clock (the capture time) and the request its alert
/// makes.
pub struct Incident {
    pub cluster: Arc<SnapshotCluster>,
    pub clock: Arc<dyn Clock>,
    pub request: RemediationRequest,
}

impl Incident {
    /// `dir` holds `snapshot.yaml` and `alert.json`.
    pub fn load(dir: &Path) -> Self {
        super::init();
        let cluster = Arc::new(SnapshotCluster::load(&dir.join("snapshot.yaml")).unwrap());
        let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(cluster.captured_at().unwrap()));
        let alert: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("alert.json")).unwrap())
                .unwrap();
        let request = super::scenarios::request(&alert, clock.now());
        Self {
            cluster,
            clock,
            request,
        }
    }

    /// The alerted object's namespace (what a model names for a namespaced target).
    pub fn namespace(&self) -> Option<String> {
        self.request
            .target
            .as_ref()
            .and_then(|t| t.namespace.clone())
    }

    /// Run invocation 1 and 2 on the scripted replies (selection proven by the prover on this
    /// cluster), as far as the request goes. Returns the request and how the model was used.
    pub async fn run(self, script: Vec<Reply>) -> (RemediationRequest, ScriptedLlm) {
        let catalog = Live::new(Catalog::builtin().unwrap());
        let server = ScriptedLlm::start(script).await;
        let inv = investigator(
            &server,
            self.cluster.clone(),
            self.clock.clone(),
            catalog.clone(),
        );
        let prover = Arc::new(Prover::new(
            self.cluster.clone(),
            Some(self.cluster.clone()),
            catalog,
            self.clock.clone(),
        ));
        let mut req = self.request;
        for stage in [
            Arc::new(InvestigationStage(inv.clone())) as Arc<dyn Stage>,
            Arc::new(SelectionStage::new(inv, prover)),
        ] {
            if req.phase != stage.phase() {
                break;
            }
            let out = stage.run(&req).await.expect("stage");
            req.phase = out.next;
            req.reason = out.reason;
            req.state = out.state;
        }
        (req, server)
    }

    /// `p` proposed by `by` on this incident: invocation 1 names the target, then invocation 2
    /// selects the action type's workflow with the proposal's parameters (or, for a reviewer,
    /// the reviewer asks for it and the model answers only invocation 1).
    pub async fn propose(
        mut self,
        p: &Proposal,
        by: Proposer,
    ) -> (RemediationRequest, ScriptedLlm) {
        let script = self.script(p, by);
        self.run(script).await
    }

    /// The model's replies for `p` proposed by `by` (a reviewer's request is set on the
    /// request): invocation 1's root cause, then (for the model) invocation 2's selection.
    pub fn script(&mut self, p: &Proposal, by: Proposer) -> Vec<Reply> {
        let workflow = Catalog::builtin()
            .unwrap()
            .workflows()
            .iter()
            .find(|w| w.action_type == p.action_type)
            .unwrap_or_else(|| panic!("no workflow of {}", p.action_type))
            .id
            .clone();
        let namespace = match p.target.0.as_str() {
            "Node" => None,
            _ => self.namespace(),
        };
        let mut script = vec![calls(&[(
            "submit_result",
            actionable_rca(p, namespace.as_deref()),
        )])];
        match by {
            Proposer::Reviewer => {
                self.request.signal.requested = Some(RequestedWorkflow {
                    workflow_id: workflow,
                    parameters: p.parameters.as_object().unwrap().clone(),
                    requested_by: "key:rita".into(),
                    follows: uuid::Uuid::new_v4(),
                    message: Some(p.why.clone()),
                });
            }
            _ => script.push(calls(&[(
                "submit_result_with_workflow",
                json!({"selected_workflow": {"workflow_id": workflow, "confidence": 0.9,
                           "rationale": p.why, "parameters": p.parameters}}),
            )])),
        }
        script
    }
}

/// Invocation 1: a confident, actionable root cause naming the proposal's target.
fn actionable_rca(p: &Proposal, namespace: Option<&str>) -> Value {
    let (kind, name) = &p.target;
    let mut target = json!({"kind": kind, "name": name});
    if let Some(ns) = namespace {
        target["namespace"] = json!(ns);
    }
    json!({
        "root_cause_analysis": {
            "summary": format!("{kind} {name} needs {}", p.action_type),
            "severity": "high",
            "contributing_factors": [p.why],
            "remediation_target": target,
            "investigation_analysis": p.why
        },
        "confidence": 0.9,
        "investigation_outcome": "actionable",
        "actionable": true
    })
}
