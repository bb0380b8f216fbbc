//! The offline investigator: deterministic, no model, the embedded default (DESIGN §3.5).
//!
//! Same tools, RCA schema and catalog as the LLM path, in three one-way stages:
//!
//! 1. [`evidence`] gathers, read-only: the owner chain, the root owner's pods, a Deployment's
//!    ReplicaSets, events, the failing pods' logs, metrics, nodes, the claim's StorageClass,
//!    HPA/PDB/quota state — and parses them into typed objects, leaving out what does not parse.
//! 2. [`facts`] derives what the rules decide on, once: failing and healthy pods, last
//!    terminations, waiting reasons, restarts, a recent rollout whose pods fail while the
//!    previous revision's ran, the scheduler's complaint, limits, memory use and quota, node
//!    conditions and taints.
//! 3. [`rules`] is an ordered table of named rules, each named after the playbook it
//!    implements; the first that fires decides, in order of how strongly the evidence
//!    determines the cause. When nothing determines it (a crash loop with no recent change, a
//!    missing Secret it may not read) the result is inconclusive or asks for a human instead of
//!    a guess.
//!
//! Input: a remediation request. Output: an [`Analysis`] with the RCA and a [`Proposal`], then
//! a [`Selection`] from the catalog, with the alternatives the matched playbooks recommend.
//!
//! Learned patterns (docs/adr/0024-outcome-learning.md) are hints here too: recorded in the
//! analysis, offered as alternatives, and proposed instead of the rules' workflow only where
//! approvers replaced exactly that workflow with the learned one and it verified effective
//! (and no ineffective outcome put it in cooldown since). What is proposed is validated,
//! proven, gated and approved like any proposal. The alert's text never decides anything, and text found in
//! logs or objects is only ever quoted as evidence, never followed.

mod depends;
mod evidence;
mod facts;
pub use crate::cluster::quantity;
mod rules;

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use self::facts::Facts;
use self::rules::Diagnosis;
use super::gather;
use super::playbooks::Playbooks;
use super::route::{Invocation2, merge, route};
use super::{InvestigateError, Investigator};
use crate::catalog::{Catalog, SelectionContext};
use crate::clock::Clock;
use crate::cluster::tools::{ClusterTools, ToolLimits};
use crate::cluster::{ClusterReader, MemoReader};
use crate::domain::{ActionParams, ActionType, Severity};
use crate::domain::{
    AlternativeWorkflow, Analysis, InvestigationOutcome, InvestigationPlan, LearnedUse, PlanSource,
    PlanStep, RcaResult, RemediationRequest, RootCauseAnalysis, SelectedWorkflow, Selection,
    SignalContext, TargetRef, ToolCallRecord, ValidationAttempt,
};
use crate::history::RemediationHistory;
use crate::history::patterns::{describe, suggestible};
use crate::live::Live;
use crate::prove::graph;

pub struct OfflineInvestigator {
    pub reader: Arc<dyn ClusterReader>,
    pub clock: Arc<dyn Clock>,
    pub tool_limits: ToolLimits,
    pub catalog: Arc<Live<Catalog>>,
    pub playbooks: Arc<Live<Playbooks>>,
    pub history: Arc<dyn RemediationHistory>,
}

impl OfflineInvestigator {
    fn rca_from(&self, d: &Diagnosis) -> RcaResult {
        RcaResult {
            root_cause_analysis: RootCauseAnalysis {
                summary: d.summary.clone(),
                severity: d.severity.clone(),
                contributing_factors: d.factors.clone(),
                remediation_target: d.target.as_ref().map(|t| TargetRef {
                    kind: t.kind.clone(),
                    name: t.name.clone(),
                    namespace: t.namespace.clone(),
                    api_version: None,
                }),
                investigation_analysis: if d.analysis.is_empty() {
                    format!("Failure mode: {}.", d.mode)
                } else {
                    format!("Failure mode: {}. {}", d.mode, d.analysis)
                },
            },
            confidence: d.confidence,
            investigation_outcome: d.outcome,
            actionable: d.outcome == InvestigationOutcome::Actionable,
            needs_human_review: d.human.is_some(),
            human_review_reason: d.human.clone(),
        }
    }
}

/// The record of reading `root`'s neighbourhood ([`graph::build`]), as the tool calls show it.
fn follow_dependencies_record(
    root: &crate::domain::Target,
    n: &crate::domain::Neighbourhood,
) -> ToolCallRecord {
    ToolCallRecord {
        tool: "follow_dependencies".into(),
        arguments: json!({"kind": root.kind, "name": root.name, "namespace": root.namespace}),
        ok: true,
        output_chars: 0,
        truncated: false,
        excerpt: Some(crate::domain::excerpt(&n.compact(8))),
        output: None,
        duration_ms: None,
    }
}

/// A signal that names no Kubernetes object: nothing in the cluster to investigate. An alert
/// about the alerting pipeline itself (Watchdog, InfoInhibitor) needs no action; any other goes
/// to a person with the labels that identify it — never "healthy again".
fn no_object(signal: &SignalContext) -> Diagnosis {
    let labels = signal.identifying_labels();
    if signal.about_alerting_pipeline() {
        let mut d = Diagnosis::new(
            "AlertingPipeline",
            format!(
                "{} is about the alerting pipeline itself, not about a Kubernetes object: nothing to investigate or remediate ({labels})",
                signal.name
            ),
        );
        d.outcome = InvestigationOutcome::NotActionable;
        d.confidence = 1.0;
        d.severity = Severity::Low;
        return d;
    }
    let mut d = Diagnosis::new(
        "NoObject",
        format!(
            "The alert names no Kubernetes object ({labels}): nothing in the cluster to investigate or remediate; a person must look at it"
        ),
    );
    d.outcome = InvestigationOutcome::InsufficientData;
    d.confidence = 0.2;
    d
}

#[async_trait]
impl Investigator for OfflineInvestigator {
    fn name(&self) -> String {
        "offline".into()
    }

    async fn analyse(&self, req: &RemediationRequest) -> Result<Analysis, InvestigateError> {
        let now = self.clock.now();
        // One reader for the whole analysis: each object is asked of the API server once,
        // whichever step wants it.
        let reader: Arc<dyn ClusterReader> = Arc::new(MemoReader::new(self.reader.clone()));
        // The rules decide on every item and whole objects, as the proofs read them.
        let tools = ClusterTools::new(reader.clone(), self.clock.clone(), self.tool_limits.clone())
            .for_decisions();
        let (snapshot, _, pods, events) = gather::prefetch(&tools, req).await?;
        let (seen_pods, seen_events) = (pods.clone(), events.clone());
        let matched: Vec<String> = self
            .playbooks
            .get()
            .matching(&snapshot)
            .iter()
            .map(|p| p.spec.name.clone())
            .collect();
        let mut records = vec![
            ToolCallRecord {
                tool: "kubectl_get".into(),
                arguments: json!({"kind": "Pod", "namespace": gather::signal_namespace(req)}),
                ok: true,
                output_chars: 0,
                truncated: false,
                excerpt: None,
                output: None,
                duration_ms: None,
            },
            ToolCallRecord {
                tool: "kubectl_events".into(),
                arguments: json!({"namespace": gather::signal_namespace(req)}),
                ok: true,
                output_chars: 0,
                truncated: false,
                excerpt: None,
                output: None,
                duration_ms: None,
            },
        ];
        let evidence = evidence::gather(
            reader.as_ref(),
            &tools,
            self.clock.now(),
            req,
            &mut records,
            pods,
            events,
        )
        .await?;
        let facts = evidence.as_ref().map(Facts::derive);
        let mut diagnosis = match &facts {
            Some(f) => rules::diagnose(f),
            None => no_object(&req.signal),
        };
        // A proposal on a target kubemedic resolved: verify the (possibly different) target.
        let mut rca = self.rca_from(&diagnosis);
        let fallback = diagnosis.target.clone();
        let mut verified = gather::verify_target(&tools, &rca, fallback.as_ref()).await?;
        // Where the rules saw only the symptom: follow what the target depends on and what
        // changed before it failed.
        let mut neighbourhood = None;
        if let Some(ctx) = verified.clone()
            && depends::standing(&diagnosis) != depends::Standing::Determined
        {
            let n = graph::build(reader.clone(), &ctx.root_owner, now).await?;
            records.push(follow_dependencies_record(&ctx.root_owner, &n));
            if let Some(mut better) = depends::decide(&n, &diagnosis, &ctx.root_owner) {
                better.rule = "dependency-culprit";
                better.rule_playbooks = &[];
                if let Some(f) = &facts {
                    rules::vet(&mut better, f);
                }
                diagnosis = better;
                rca = self.rca_from(&diagnosis);
                if diagnosis.target.as_ref() != Some(&ctx.root_owner) {
                    let fallback = diagnosis.target.clone();
                    verified = gather::verify_target(&tools, &rca, fallback.as_ref()).await?;
                }
            } else if diagnosis.outcome == InvestigationOutcome::Inconclusive {
                diagnosis.factors.extend(depends::context(&n));
                rca = self.rca_from(&diagnosis);
            }
            neighbourhood = Some(n);
        }
        // A restart, a scale-up or a raise meets what its proof asks of the neighbourhood,
        // whichever rule proposed it (read here where the rule needed nothing more).
        if let (Some(ctx), Some(f)) = (verified.as_ref(), &facts)
            && rules::asks_neighbourhood(&diagnosis, f).is_some()
        {
            if neighbourhood.is_none() {
                let n = graph::build(reader.clone(), &ctx.root_owner, now).await?;
                records.push(follow_dependencies_record(&ctx.root_owner, &n));
                neighbourhood = Some(n);
            }
            if let Some(n) = &neighbourhood {
                rules::vet_neighbourhood(&mut diagnosis, n, f);
                rca = self.rca_from(&diagnosis);
            }
        }
        if verified.is_none() && diagnosis.proposal.is_some() {
            diagnosis.proposal = None;
        }
        let history = match &verified {
            Some(ctx) => gather::history(self.history.as_ref(), ctx, now).await,
            None => None,
        };
        // History: a remedy that already failed on this spec is not proposed again.
        if let (Some(h), Some(p)) = (&history, &diagnosis.proposal) {
            let failed_before = crate::history::ineffective_tries(h, &p.action_type);
            if failed_before >= crate::history::INEFFECTIVE_TRIES_ESCALATE {
                diagnosis.human = Some(format!(
                    "{} was already applied {failed_before} times to this configuration (or the chain of changes that led to it) without resolving the signal; escalating to a human",
                    p.action_type
                ));
                rca = self.rca_from(&diagnosis);
            }
        }
        rca.needs_human_review = diagnosis.human.is_some();
        rca.human_review_reason = diagnosis.human.clone();
        let (signature, learned) = gather::signature_and_learned(
            self.history.as_ref(),
            &req.signal.name,
            verified.as_deref(),
            (&seen_pods, &seen_events),
            now,
        )
        .await;
        // No rule determines the cause, but this incident class was resolved before.
        let (adopted, unfit) = match (&verified, &facts) {
            (Some(ctx), Some(f)) => {
                self.learned_for_unknown(&diagnosis, &learned, f, &ctx.root_owner)
            }
            _ => (None, vec![]),
        };
        rca.root_cause_analysis.contributing_factors.extend(unfit);
        if let Some((p, parameters)) = adopted {
            rca.root_cause_analysis.summary = format!(
                "{} — but this incident class ({}) was resolved before by {}",
                rca.root_cause_analysis.summary, p.signature, p.workflow_id
            );
            rca.root_cause_analysis.investigation_analysis = format!(
                "{} No rule determines the cause; the proposal rests on a learned pattern (a hint from verified outcomes, not this incident's evidence): {}.",
                rca.root_cause_analysis.investigation_analysis,
                describe(p)
            );
            rca.investigation_outcome = InvestigationOutcome::Actionable;
            rca.actionable = true;
            rca.confidence = LEARNED_CONFIDENCE;
            diagnosis.proposal = Some(crate::domain::Proposal {
                action_type: p.action_type.clone(),
                parameters,
                git_change: String::new(),
                workflow_id: Some(p.workflow_id.clone()),
            });
        }
        let mut warnings = Vec::new();
        if rca.investigation_outcome == InvestigationOutcome::Inconclusive {
            warnings.push("inconclusive: the evidence does not determine the cause".into());
        }
        let plan = plan(&diagnosis, &self.playbooks.get(), &records);
        Ok(Analysis {
            root_owner: verified.as_ref().map(|c| c.root_owner.clone()),
            spec_hash: verified.as_ref().and_then(|c| c.spec_hash.clone()),
            detected_labels: verified.as_ref().map(|c| c.detected_labels.clone()),
            history,
            rca,
            warnings,
            playbooks: matched,
            tool_calls: records,
            usage: Default::default(),
            investigator: self.name(),
            llm_calls: vec![],
            plan: Some(plan),
            proposal: diagnosis.proposal,
            neighbourhood,
            signature,
            learned,
            remote_tools: vec![],
        })
    }

    async fn select(
        &self,
        req: &RemediationRequest,
        analysis: &Analysis,
    ) -> Result<Selection, InvestigateError> {
        let ctx = SelectionContext::of(req, analysis);
        let detected = &ctx.detected;
        let mut inv2 = Invocation2::default();
        match &analysis.proposal {
            Some(p)
                if analysis.rca.investigation_outcome == InvestigationOutcome::Actionable
                    && !analysis.rca.needs_human_review =>
            {
                let mut action_type = p.action_type.clone();
                let mut params = p.parameters.clone();
                // GitOps: a change of what Git declares goes to Git as a proposal, never as a
                // direct write (`ActionType::writes_declared_state`, as the catalog asks).
                if detected.git_ops_managed && action_type.writes_declared_state() {
                    action_type = ActionType::GitRevert;
                    let change = if p.git_change.is_empty() {
                        format!(
                            "apply {} ({})",
                            p.action_type,
                            serde_json::to_string(&p.parameters).unwrap_or_default()
                        )
                    } else {
                        p.git_change.clone()
                    };
                    params = ActionParams::GitRevert {
                        proposed_change: Some(format!(
                            "{change} — in the Git source of truth (managed by {})",
                            detected.git_ops_tool.as_deref().unwrap_or("GitOps")
                        )),
                    }
                    .to_map();
                }
                let first = match &p.workflow_id {
                    // A named workflow (a learned pattern's), unless GitOps turned the action
                    // into a proposal for Git.
                    Some(id) if action_type == p.action_type => Some(id.clone()),
                    _ => self
                        .catalog
                        .get()
                        .best_workflow(&action_type, &ctx)
                        .map(|w| w.id.clone()),
                };
                match first {
                    None => {
                        inv2.no_workflow =
                            Some(format!("no {action_type} workflow fits this target"));
                    }
                    Some(id) => match self.catalog.get().validate_selection(
                        &id,
                        &params,
                        analysis.root_owner.as_ref(),
                        &ctx,
                    ) {
                        Ok(full) => {
                            let catalog = self.catalog.get();
                            let w = catalog.workflow(&id);
                            inv2.selected = Some(SelectedWorkflow {
                                workflow_id: id.clone(),
                                action_type: action_type.clone(),
                                version: w.map(|w| w.version.clone()).unwrap_or_default(),
                                confidence: analysis.rca.confidence,
                                rationale: format!(
                                    "{} for: {}",
                                    action_type, analysis.rca.root_cause_analysis.summary
                                ),
                                parameters: full,
                            });
                        }
                        Err(e) => {
                            inv2.validation_attempts.push(ValidationAttempt {
                                workflow_id: id,
                                code: e.code.into(),
                                errors: e.errors,
                            });
                            inv2.validation_failed = true;
                        }
                    },
                }
            }
            _ => {
                inv2.no_workflow = Some(
                    analysis
                        .rca
                        .human_review_reason
                        .clone()
                        .unwrap_or_else(|| analysis.rca.root_cause_analysis.summary.clone()),
                );
            }
        }
        let learned = self
            .learned_instead(analysis, &ctx, &mut inv2)
            .or_else(|| learned_proposal(analysis, &inv2));
        self.offer_alternatives(analysis, &ctx, &mut inv2);
        let mut merged = merge(&analysis.rca, &inv2);
        let outcome = route(analysis, &inv2, &mut merged);
        Ok(Selection {
            selected: inv2.selected.clone(),
            alternatives: inv2.alternatives.clone(),
            no_workflow_reasoning: inv2.no_workflow.clone(),
            validation_attempts: inv2.validation_attempts.clone(),
            merged,
            outcome,
            usage: Default::default(),
            llm_calls: vec![],
            learned,
            replaced: None,
        })
    }
}

/// A learned pattern proposed for an incident no rule knows, with the parameters the incident
/// gives its workflow.
type Adopted<'a> = (&'a crate::domain::LearnedPattern, Map<String, Value>);

/// The confidence of a proposal that rests on a learned pattern alone (no rule determines the
/// cause): enough to propose it, never enough to act without a person — the gate asks one for
/// every learned proposal.
const LEARNED_CONFIDENCE: f64 = 0.75;

/// How the selection used a learned pattern when the analysis proposed its workflow (no rule
/// knew the incident class).
fn learned_proposal(analysis: &Analysis, inv2: &Invocation2) -> Option<LearnedUse> {
    let named = analysis.proposal.as_ref()?.workflow_id.as_ref()?;
    let selected = inv2.selected.as_ref()?;
    if &selected.workflow_id != named {
        return None;
    }
    let pattern = analysis.learned.iter().find(|p| &p.workflow_id == named)?;
    Some(LearnedUse {
        pattern: pattern.clone(),
        instead_of: None,
        reason: format!(
            "no rule knows this incident class; learned from verified outcomes on this signature ({}): {}",
            pattern.signature,
            describe(pattern)
        ),
    })
}

impl OfflineInvestigator {
    /// The learned pattern to propose when no rule determines the cause, with the parameters
    /// this incident gives its workflow: the strongest that may be suggested, with at least one
    /// effective verified outcome, whose workflow's parameter schema the parameters the facts
    /// supply pass (a rollback learned on another incident has nothing to roll back to here
    /// without a recent rollout). Only for an inconclusive diagnosis that did not ask for a human for a reason of
    /// its own (a remedy that already failed here). Also, one line for each pattern passed over
    /// for want of parameters.
    fn learned_for_unknown<'a>(
        &self,
        diagnosis: &Diagnosis,
        learned: &'a [crate::domain::LearnedPattern],
        facts: &Facts,
        target: &crate::domain::Target,
    ) -> (Option<Adopted<'a>>, Vec<String>) {
        let mut unfit = Vec::new();
        if diagnosis.outcome != InvestigationOutcome::Inconclusive
            || diagnosis.human.is_some()
            || diagnosis.proposal.is_some()
        {
            return (None, unfit);
        }
        let catalog = self.catalog.get();
        for p in learned.iter().filter(|p| suggestible(p) && p.effective > 0) {
            let Some(w) = catalog.workflow(&p.workflow_id) else {
                continue;
            };
            let params = rules::learned_parameters(&p.action_type, facts);
            match w
                .parameters
                .validate(&mut crate::catalog::parameters(&params, target))
            {
                // A learned action meets what its proof will ask, as a rule's does.
                Ok(()) => match rules::vetted(&p.action_type, &params, facts, target) {
                    Ok(()) => return (Some((p, params)), unfit),
                    Err(why) => unfit.push(format!(
                        "learned pattern {} ({}) not proposed: {why}",
                        p.workflow_id, p.signature
                    )),
                },
                Err(errors) => unfit.push(format!(
                    "learned pattern {} ({}) not proposed: {}",
                    p.workflow_id,
                    p.signature,
                    errors.join("; ")
                )),
            }
        }
        (None, unfit)
    }

    /// `workflow_id` on the analysed target, with the parameters of `carried` it takes (the
    /// target's are bound again from the verified root owner); `None` when it does not fit or
    /// its parameters cannot be bound.
    fn bind(
        &self,
        workflow_id: &str,
        carried: &Map<String, Value>,
        analysis: &Analysis,
        ctx: &SelectionContext,
    ) -> Option<SelectedWorkflow> {
        let catalog = self.catalog.get();
        let w = catalog.workflow(workflow_id)?;
        let params: Map<String, Value> = carried
            .iter()
            .filter(|(k, _)| !k.starts_with("TARGET_RESOURCE_"))
            .filter(|(k, _)| w.parameters.properties.contains_key(*k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let full = self
            .catalog
            .get()
            .validate_selection(workflow_id, &params, analysis.root_owner.as_ref(), ctx)
            .ok()?;
        Some(SelectedWorkflow {
            workflow_id: w.id.clone(),
            action_type: w.action_type.clone(),
            version: w.version.clone(),
            confidence: analysis.rca.confidence,
            rationale: String::new(),
            parameters: full,
        })
    }

    /// The learned workflow instead of the rules' one, where approvers replaced exactly that
    /// workflow with it in runs that verified effective, and it is not in cooldown. The rules'
    /// workflow becomes the first alternative.
    fn learned_instead(
        &self,
        analysis: &Analysis,
        ctx: &SelectionContext,
        inv2: &mut Invocation2,
    ) -> Option<LearnedUse> {
        let rule = inv2.selected.clone()?;
        let (pattern, mut chosen) = analysis
            .learned
            .iter()
            .filter(|p| {
                suggestible(p)
                    && p.workflow_id != rule.workflow_id
                    && p.replaced.contains(&rule.workflow_id)
            })
            .find_map(|p| {
                self.bind(&p.workflow_id, &rule.parameters, analysis, ctx)
                    .map(|w| (p, w))
            })?;
        let reason = format!(
            "learned from verified outcomes on this signature ({}): {}",
            pattern.signature,
            describe(pattern)
        );
        chosen.confidence = rule.confidence;
        chosen.rationale = format!(
            "{} for: {} — {reason}; the rules proposed {}",
            chosen.action_type, analysis.rca.root_cause_analysis.summary, rule.workflow_id
        );
        inv2.alternatives.push(AlternativeWorkflow {
            workflow_id: rule.workflow_id.clone(),
            rationale: format!("the rules' proposal: {}", rule.rationale),
        });
        inv2.selected = Some(chosen);
        Some(LearnedUse {
            pattern: pattern.clone(),
            instead_of: Some(rule.workflow_id),
            reason,
        })
    }

    /// What an approver may choose instead of the selected workflow: the first fitting
    /// workflow of each action type the matched playbooks recommend, then the learned
    /// workflows that may be suggested — each only when it fits the target with the selection's
    /// parameters.
    fn offer_alternatives(
        &self,
        analysis: &Analysis,
        ctx: &SelectionContext,
        inv2: &mut Invocation2,
    ) {
        let Some(selected) = inv2.selected.clone() else {
            return;
        };
        let mut offered: Vec<String> = inv2
            .alternatives
            .iter()
            .map(|a| a.workflow_id.clone())
            .collect();
        offered.push(selected.workflow_id.clone());
        let mut candidates: Vec<(String, String)> = Vec::new();
        for book in self
            .playbooks
            .get()
            .all()
            .iter()
            .filter(|p| analysis.playbooks.contains(&p.spec.name))
        {
            for action in &book.spec.recommended_action_types {
                if let Some(w) = self.catalog.get().best_workflow(action, ctx) {
                    candidates.push((
                        w.id.clone(),
                        format!("the {} playbook also recommends {action}", book.spec.name),
                    ));
                }
            }
        }
        for p in analysis.learned.iter().filter(|p| suggestible(p)) {
            candidates.push((
                p.workflow_id.clone(),
                format!("learned from verified outcomes (a hint): {}", describe(p)),
            ));
        }
        for (id, rationale) in candidates {
            if offered.contains(&id)
                || self
                    .bind(&id, &selected.parameters, analysis, ctx)
                    .is_none()
            {
                continue;
            }
            offered.push(id.clone());
            inv2.alternatives.push(AlternativeWorkflow {
                workflow_id: id,
                rationale,
            });
        }
    }
}

/// The offline investigator's plan: the steps of the playbook the deciding rule implements,
/// each marked done when a call it made answers it; a rule no playbook describes lists the
/// calls it made instead. The offline investigator reads objects whole (`kubectl_get`,
/// `kubectl_find_resource`, the owner-chain context), so a `kubectl_describe` step counts as
/// done when it read any object, and either log tool answers a log step.
fn plan(d: &Diagnosis, playbooks: &Playbooks, records: &[ToolCallRecord]) -> InvestigationPlan {
    let called = |tool: &str| records.iter().any(|r| r.tool == tool);
    let answered = |tool: &str| match tool {
        "kubectl_describe" => {
            called("kubectl_get")
                || called("kubectl_find_resource")
                || called("get_namespaced_resource_context")
                || called("get_cluster_resource_context")
        }
        "kubectl_logs" | "kubectl_previous_logs" => {
            called("kubectl_logs") || called("kubectl_previous_logs")
        }
        t => called(t),
    };
    let book = d
        .rule_playbooks
        .first()
        .and_then(|name| playbooks.all().iter().find(|p| p.spec.name == *name));
    match book {
        Some(p) => InvestigationPlan {
            source: PlanSource::Playbook,
            from: Some(p.spec.name.clone()),
            steps: p
                .spec
                .investigation_steps
                .iter()
                .map(|s| PlanStep {
                    step: s.clone(),
                    done: s
                        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                        .next()
                        .is_some_and(answered),
                })
                .collect(),
        },
        None => InvestigationPlan {
            source: PlanSource::Playbook,
            from: Some(format!("rule {}", d.rule)),
            steps: records
                .iter()
                .map(|r| PlanStep {
                    step: format!("{} {}", r.tool, r.arguments),
                    done: true,
                })
                .collect(),
        },
    }
}
