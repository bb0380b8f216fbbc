//! [`LlmInvestigator`]: the two invocations with a real model.
//!
//! Invocation 1: a fresh session with the RCA prompt (with the pre-fetched cluster view), the
//! read-only cluster tools (and the allowlisted tools of the configured MCP servers, named
//! `mcp__SERVER__TOOL`; a server that is down only loses its tools, a call that is not
//! allowlisted is refused and audited) and the `submit_result` sentinel; the plan the model states before
//! its calls is recorded on the analysis ([`plan`]). Tool calls of one turn run concurrently;
//! caps on turns, calls per tool, total calls and per-call time; the context tools also carry
//! the remediation history.
//! Invocation 2: a fresh session with only the structured RCA, the catalog tools and the two
//! sentinels; a selection is validated against the catalog with up to three corrections after
//! the first submission (none when the target is unverified: that is `rca_incomplete`).
//! Both run one loop ([`converse`]): the model answers, the invocation acts on the answer,
//! until its submit tool answers; an answer that cannot be read is asked for again once, with
//! the sentinel forced. Output repair and the truncation retry (2x tokens, capped at 16384)
//! apply to both. Token usage is budgeted and recorded per call. What the model
//! writes while a call runs goes to the [`LiveTokens`] hub under the request's id (for the
//! chat); each tool's whole output (sanitised, bounded) goes to the trail, its cut text to the
//! model.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use serde_json::{Map, Value, json};
use tracing::{Instrument as _, debug, info, warn};

use super::gather;
use super::plan;
use super::playbooks::Playbooks;
use super::prompt;
use super::repair;
use super::route::{Invocation2, merge, route};
use super::view::{self, ViewLimits};
use super::{InvestigateError, Investigator};
use crate::catalog::{Catalog, SelectionContext};
use crate::clock::Clock;
use crate::cluster::tools::{self, ClusterTools, ToolLimits, ToolResult};
use crate::cluster::{ClusterReader, MemoReader};
use crate::domain::Severity;
use crate::domain::{
    AlternativeWorkflow, Analysis, FinishReason, InvestigationOutcome, LearnedUse, LlmCallRecord,
    RcaResult, RemediationRequest, RemoteToolNote, RemoteToolNoteKind, RootCauseAnalysis,
    SelectedWorkflow, Selection, TOOL_OUTPUTS_BYTES, ToolCallRecord, Usage, ValidationAttempt,
    whole_output,
};
use crate::history::{RemediationHistory, patterns, prompt_section};
use crate::live::Live;
use crate::llm::{
    ChatRequest, ChatResponse, LiveTokens, Llm, LlmError, Message, TokenBudget, ToolCall,
    ToolChoice, ToolDef, Unwatched, Watch,
};
use crate::mcp_client::{self, Offer, RemoteTools, Route};
use crate::prove::graph;
use crate::redact::Redacted;
use crate::telemetry::Metrics;

mod converse;
mod offered;
mod session;

use converse::{Conversation, Step, converse};
use offered::{RemoteUse, args_of, tool_defs_rca, tool_defs_selection};
use session::{Ran, Session};

/// Dependencies with a finding the first prompt names at most.
const NEIGHBOURHOOD_LINES: usize = 4;

#[derive(Debug, Clone)]
pub struct LlmInvestigatorSettings {
    pub rca_model: String,
    pub selection_model: String,
    pub max_turns: usize,
    pub max_tool_calls: usize,
    pub max_calls_per_tool: usize,
    pub tool_timeout: Duration,
    pub max_tokens: u32,
    pub selection_turns: usize,
    /// Corrections fed back after the first invalid selection (so up to this + 1 submissions).
    pub validation_retries: usize,
    /// Whether invocation 1's prompt carries the pre-fetched cluster view ([`view`]). Always on
    /// in kubemedic; benches/investigate.rs turns it off to measure what it saves.
    pub cluster_view: bool,
}

impl LlmInvestigatorSettings {
    /// Model turns of invocation 1, unless configured.
    pub const DEFAULT_MAX_TURNS: usize = 12;
    /// Tool calls per investigation, unless configured.
    pub const DEFAULT_MAX_TOOL_CALLS: usize = 30;
    /// Calls of one tool per investigation, unless configured.
    pub const DEFAULT_MAX_CALLS_PER_TOOL: usize = 8;
    /// Seconds one tool call may take, unless configured.
    pub const DEFAULT_TOOL_TIMEOUT_SECONDS: u64 = 20;
}

impl Default for LlmInvestigatorSettings {
    fn default() -> Self {
        Self {
            rca_model: "gpt-4o".into(),
            selection_model: "gpt-4o".into(),
            max_turns: Self::DEFAULT_MAX_TURNS,
            max_tool_calls: Self::DEFAULT_MAX_TOOL_CALLS,
            max_calls_per_tool: Self::DEFAULT_MAX_CALLS_PER_TOOL,
            tool_timeout: Duration::from_secs(Self::DEFAULT_TOOL_TIMEOUT_SECONDS),
            max_tokens: 8192,
            selection_turns: 10,
            validation_retries: 3,
            cluster_view: true,
        }
    }
}

pub struct LlmInvestigator {
    pub llm: Arc<dyn Llm>,
    pub budget: Arc<TokenBudget>,
    pub reader: Arc<dyn ClusterReader>,
    pub clock: Arc<dyn Clock>,
    pub tool_limits: ToolLimits,
    pub catalog: Arc<Live<Catalog>>,
    pub playbooks: Arc<Live<Playbooks>>,
    pub history: Arc<dyn RemediationHistory>,
    pub settings: LlmInvestigatorSettings,
    pub metrics: Option<Arc<Metrics>>,
    /// Where the model's text goes as it arrives, for the chat (`None`: nowhere).
    pub live: Option<Arc<LiveTokens>>,
    /// Other teams' MCP servers whose allowlisted tools invocation 1 may call (`None`: the
    /// cluster tools only). Invocation 2 never gets them.
    pub remote: Option<Arc<RemoteTools>>,
}

fn inconclusive(summary: &str) -> RcaResult {
    RcaResult {
        root_cause_analysis: RootCauseAnalysis {
            summary: summary.into(),
            severity: "unknown".into(),
            contributing_factors: vec![],
            remediation_target: None,
            investigation_analysis: String::new(),
        },
        confidence: 0.0,
        investigation_outcome: InvestigationOutcome::Inconclusive,
        actionable: false,
        needs_human_review: false,
        human_review_reason: None,
    }
}

#[async_trait]
impl Investigator for LlmInvestigator {
    fn name(&self) -> String {
        format!("llm:{}", self.llm.describe())
    }

    async fn analyse(&self, req: &RemediationRequest) -> Result<Analysis, InvestigateError> {
        let now = self.clock.now();
        // One reader for the analysis: the prompt's view, the neighbourhood and the model's
        // tool calls ask the API server each question once.
        let reader: Arc<dyn ClusterReader> = Arc::new(MemoReader::new(self.reader.clone()));
        let tools = ClusterTools::new(reader.clone(), self.clock.clone(), self.tool_limits.clone());
        let (snapshot, namespace_view, seen_pods, seen_events) =
            gather::prefetch(&tools, req).await?;
        let books = self.playbooks.get();
        let matched = books.matching(&snapshot);
        let mut neighbourhood = None;
        let cluster_view = if !self.settings.cluster_view {
            String::new()
        } else if let Some(node) = view::node_target(req) {
            view::node(&tools, node, now, ViewLimits::default()).await?
        } else {
            // What the alerted object depends on that shows a problem, so the model starts
            // from the culprit's neighbourhood rather than the symptom alone.
            let mut v = namespace_view;
            if let Some(t) = &req.target
                && let Ok(ctx) = tools
                    .contexts()
                    .resolve(&t.kind, &t.name, t.namespace.as_deref())
                    .await
            {
                let n = graph::build(reader.clone(), &ctx.root_owner, now).await?;
                let findings = n.findings(NEIGHBOURHOOD_LINES);
                if !findings.is_empty() {
                    v.push_str(&format!(
                        "\nWhat {} depends on that shows a problem (ranked; unhealthy now or changed before the failures began):\n{findings}",
                        n.target
                    ));
                }
                neighbourhood = Some(n);
            }
            v
        };
        let mut messages = vec![
            Message::System {
                content: prompt::rca_system(req.signal.mode, !cluster_view.is_empty()),
            },
            Message::User {
                content: prompt::rca_user(req, &matched, &cluster_view),
            },
        ];
        let mut remote = RemoteUse::default();
        let mut warnings: Vec<String> = Vec::new();
        if let Some(r) = &self.remote {
            remote.offer = r.offer().await;
            for down in remote.offer.unavailable.clone() {
                let message = format!(
                    "the MCP server `{}` is unavailable ({}): its tools were not offered",
                    down.server, down.reason
                );
                warnings.push(crate::redact::sanitize_text(&message));
                remote.note(
                    RemoteToolNoteKind::Unavailable,
                    &down.server,
                    None,
                    &message,
                );
            }
        }
        let mut session = Session {
            inv: self,
            request: req.id,
            invocation: 1,
            model: self.settings.rca_model.clone(),
            usage: Usage::default(),
            spent_before: 0,
            calls: vec![],
        };
        let mut rca_turns = RcaTurns {
            inv: self,
            tools: &tools,
            remote,
            per_tool: HashMap::new(),
            total: 0,
            records: Vec::new(),
            planned: plan::Tracker::default(),
            now,
            forced: false,
            max_turns: self.settings.max_turns,
            recovered_from_text: false,
        };
        let ending = converse(
            &mut session,
            &mut messages,
            self.settings.max_turns,
            &mut rca_turns,
        )
        .await?;
        let RcaTurns {
            remote,
            total,
            records,
            planned,
            recovered_from_text,
            ..
        } = rca_turns;
        if let Some(why) = &ending.asked_again {
            warnings.push(format!("{why}; asked again"));
        }
        if recovered_from_text {
            warnings.push("RCA recovered from free text".into());
        }
        let rca = match ending.result {
            Some(r) => r,
            None => {
                warnings.push(match &ending.unreadable {
                    Some(why) => format!("inconclusive: {why}, after asking again"),
                    None => "inconclusive: no result within the turn limit".into(),
                });
                inconclusive("The investigation did not reach a conclusion.")
            }
        };
        let (plan, no_plan) = planned.finish(total);
        warnings.extend(no_plan);
        for note in &remote.notes {
            if note.kind == RemoteToolNoteKind::Unavailable && note.tool.is_some() {
                warnings.push(note.message.clone());
            }
        }
        let verified = gather::verify_target(&tools, &rca, req.target.as_ref()).await?;
        let history = match &verified {
            Some(ctx) => gather::history(self.history.as_ref(), ctx, now).await,
            None => None,
        };
        let (signature, learned) = gather::signature_and_learned(
            self.history.as_ref(),
            &req.signal.name,
            verified.as_deref(),
            (&seen_pods, &seen_events),
            now,
        )
        .await;
        info!(
            tool_calls = records.len(),
            plan_steps = plan.as_ref().map_or(0, |p| p.steps.len()),
            tokens = session.usage.total(),
            outcome = rca.investigation_outcome.as_str(),
            "invocation 1 done"
        );
        Ok(Analysis {
            root_owner: verified.as_ref().map(|c| c.root_owner.clone()),
            spec_hash: verified.as_ref().and_then(|c| c.spec_hash.clone()),
            detected_labels: verified.as_ref().map(|c| c.detected_labels.clone()),
            history,
            rca,
            warnings,
            playbooks: matched.iter().map(|p| p.spec.name.clone()).collect(),
            tool_calls: records,
            usage: session.usage,
            investigator: self.name(),
            llm_calls: session.calls,
            proposal: None,
            plan,
            neighbourhood,
            signature,
            learned,
            remote_tools: remote.notes,
        })
    }

    async fn select(
        &self,
        req: &RemediationRequest,
        analysis: &Analysis,
    ) -> Result<Selection, InvestigateError> {
        let ctx = SelectionContext {
            severity: req
                .signal
                .severity
                .clone()
                .or_else(|| Some(analysis.rca.root_cause_analysis.severity.clone())),
            environment: req.state.enrichment.as_ref().map(|e| e.environment.clone()),
            signal_mode: Some(req.signal.mode.as_str().into()),
            target_kind: analysis.root_owner.as_ref().map(|t| t.kind.clone()),
            detected: analysis.detected_labels.clone().unwrap_or_default(),
        };
        let mut history_section = analysis
            .history
            .as_ref()
            .map(prompt_section)
            .unwrap_or_default();
        history_section.push_str(&patterns::prompt_section(
            analysis.signature.as_ref(),
            &analysis.learned,
        ));
        let mut messages = vec![
            Message::System {
                content: prompt::select_system(),
            },
            Message::User {
                content: prompt::select_user(req, analysis, &history_section),
            },
        ];
        let mut session = Session {
            inv: self,
            request: req.id,
            invocation: 2,
            model: self.settings.selection_model.clone(),
            usage: Usage::default(),
            spent_before: analysis.usage.total(),
            calls: vec![],
        };
        let mut selection_turns = SelectionTurns {
            inv: self,
            analysis,
            ctx: &ctx,
            inv2: Invocation2::default(),
        };
        let ending = converse(
            &mut session,
            &mut messages,
            self.settings.selection_turns,
            &mut selection_turns,
        )
        .await?;
        let mut inv2 = selection_turns.inv2;
        if ending.result.is_none() {
            warn!("workflow selection did not conclude");
            inv2.needs_human_review = true;
            inv2.human_review_reason = Some("workflow selection did not conclude".into());
        }
        let mut merged = merge(&analysis.rca, &inv2);
        let outcome = route(analysis, &inv2, &mut merged);
        // The model was shown the patterns as hints; when it chose a learned workflow, the
        // selection says so.
        let learned = inv2.selected.as_ref().and_then(|w| {
            analysis
                .learned
                .iter()
                .find(|p| patterns::suggestible(p) && p.workflow_id == w.workflow_id)
                .map(|p| LearnedUse {
                    pattern: p.clone(),
                    instead_of: None,
                    reason: format!(
                        "the model selected a workflow learned from verified outcomes on this signature ({}): {}",
                        p.signature,
                        patterns::describe(p)
                    ),
                })
        });
        Ok(Selection {
            selected: inv2.selected.clone(),
            alternatives: inv2.alternatives.clone(),
            no_workflow_reasoning: inv2.no_workflow.clone(),
            validation_attempts: inv2.validation_attempts.clone(),
            merged,
            outcome,
            usage: session.usage,
            llm_calls: session.calls,
            learned,
            replaced: None,
        })
    }
}

/// Invocation 1's side of the conversation: the cluster's (and the MCP servers') tools run
/// until `submit_result` answers; the plan the model states is tracked; two turns before the
/// limit the model is told to conclude, and from then on `submit_result` is forced.
struct RcaTurns<'a> {
    inv: &'a LlmInvestigator,
    tools: &'a ClusterTools,
    remote: RemoteUse,
    per_tool: HashMap<String, usize>,
    /// Tool calls run so far.
    total: usize,
    records: Vec<ToolCallRecord>,
    planned: plan::Tracker,
    now: chrono::DateTime<chrono::Utc>,
    /// `submit_result` is forced from now on.
    forced: bool,
    max_turns: usize,
    /// The result was read from free text, not from `submit_result`.
    recovered_from_text: bool,
}

impl Conversation for RcaTurns<'_> {
    type Output = RcaResult;

    fn tools(&self) -> Vec<ToolDef> {
        tool_defs_rca(&self.remote)
    }

    async fn answer(
        &mut self,
        response: &ChatResponse,
        turn: usize,
    ) -> Result<Step<RcaResult>, InvestigateError> {
        // Stated before the calls this message makes: only `total` calls ran before it.
        let content = response.content.as_deref().map(Redacted::new);
        self.planned.saw(content.as_ref(), self.total);
        const SUBMIT: &str = "submit_result";
        if let Some(submit) = response.tool_calls.iter().find(|c| c.name == SUBMIT) {
            return Ok(match args_of(submit).and_then(|v| repair::rca(&v)) {
                Ok(r) => Step::Done(r),
                Err(e) => {
                    self.forced = true;
                    let replies = response
                        .tool_calls
                        .iter()
                        .map(|c| {
                            let text = if c.id == submit.id {
                                format!(
                                    "Error: {e}. Call submit_result again with arguments matching its schema."
                                )
                            } else {
                                "Not run: the investigation is concluding.".into()
                            };
                            (c.id.clone(), text)
                        })
                        .collect();
                    Step::Unreadable {
                        why: format!("submit_result arguments were invalid ({e})"),
                        replies,
                        say: None,
                        force: SUBMIT.into(),
                    }
                }
            });
        }
        if response.tool_calls.is_empty() {
            // Free text: recover the result from it, else ask again.
            let recovered = response
                .content
                .as_deref()
                .and_then(repair::extract_json)
                .map(|v| repair::rca(&v));
            if let Some(Ok(r)) = recovered {
                self.recovered_from_text = true;
                return Ok(Step::Done(r));
            }
            self.forced = true;
            return Ok(Step::Unreadable {
                why: "the model answered without a parsable result".into(),
                replies: vec![],
                say: Some(
                    "Call submit_result now with your conclusion, following its schema exactly."
                        .into(),
                ),
                force: SUBMIT.into(),
            });
        }
        let calls: Vec<&ToolCall> = response.tool_calls.iter().collect();
        let replies = self
            .inv
            .run_tools(
                self.tools,
                &mut self.remote,
                &calls,
                &mut self.per_tool,
                &mut self.total,
                &mut self.records,
                self.now,
            )
            .await?;
        let mut say = None;
        if turn + 2 >= self.max_turns && !self.forced {
            self.forced = true;
            say = Some("The turn limit is reached: conclude now with submit_result.".into());
        }
        Ok(Step::Next {
            replies,
            say,
            force: self.forced.then(|| SUBMIT.into()),
        })
    }
}

/// Invocation 2's side: the catalog's tools until `submit_result_with_workflow` gives a valid
/// selection (with up to `validation_retries` corrections) or `submit_result_no_workflow`
/// answers. A result written as free text is read as the sentinel it matches.
struct SelectionTurns<'a> {
    inv: &'a LlmInvestigator,
    analysis: &'a Analysis,
    ctx: &'a SelectionContext,
    inv2: Invocation2,
}

impl Conversation for SelectionTurns<'_> {
    /// Concluded (the selection is in `inv2`).
    type Output = ();

    fn tools(&self) -> Vec<ToolDef> {
        tool_defs_selection()
    }

    async fn answer(
        &mut self,
        response: &ChatResponse,
        _turn: usize,
    ) -> Result<Step<()>, InvestigateError> {
        let mut calls: Vec<(ToolCall, Option<Value>)> = response
            .tool_calls
            .iter()
            .map(|c| (c.clone(), None))
            .collect();
        if calls.is_empty() {
            let recovered = |name: &str, v: Value| {
                (
                    ToolCall {
                        id: "recovered".into(),
                        name: name.into(),
                        arguments: String::new(),
                    },
                    Some(v),
                )
            };
            match response.content.as_deref().and_then(repair::extract_json) {
                Some(v) if v.get("selected_workflow").is_some() => {
                    calls.push(recovered("submit_result_with_workflow", v));
                }
                Some(v) if v.get("workflow_id").is_some() => {
                    calls.push(recovered(
                        "submit_result_with_workflow",
                        json!({"selected_workflow": v}),
                    ));
                }
                Some(v) if v.get("reasoning").is_some() => {
                    calls.push(recovered("submit_result_no_workflow", v));
                }
                _ => {
                    return Ok(Step::Unreadable {
                        why: "the model answered without a selection".into(),
                        replies: vec![],
                        say: Some(
                            "Call submit_result_with_workflow (or submit_result_no_workflow) now."
                                .into(),
                        ),
                        force: "submit_result_with_workflow".into(),
                    });
                }
            }
        }
        let mut replies = Vec::new();
        for (call, recovered) in calls {
            let args = match recovered.map_or_else(|| args_of(&call), Ok) {
                Ok(a) => a,
                Err(e) => {
                    replies.push((call.id.clone(), format!("Error: {e}.")));
                    continue;
                }
            };
            let paging = |a: &Value| {
                (
                    repair::number(a.get("offset")).unwrap_or(0.0).max(0.0) as usize,
                    repair::number(a.get("limit"))
                        .unwrap_or(10.0)
                        .clamp(1.0, 50.0) as usize,
                )
            };
            let catalog = self.inv.catalog.get();
            let text = match call.name.as_str() {
                "list_available_actions" => {
                    let (o, l) = paging(&args);
                    catalog.list_available_actions(self.ctx, o, l).to_string()
                }
                "list_workflows" => {
                    let (o, l) = paging(&args);
                    let at = args
                        .get("action_type")
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    catalog.list_workflows(at, self.ctx, o, l).to_string()
                }
                "get_workflow" => catalog
                    .get_workflow(
                        args.get("workflow_id")
                            .and_then(Value::as_str)
                            .unwrap_or(""),
                    )
                    .to_string(),
                "submit_result_with_workflow" => {
                    match self
                        .inv
                        .accept_selection(&args, self.analysis, self.ctx, &mut self.inv2)
                    {
                        Ok(()) => return Ok(Step::Done(())),
                        Err(_) if self.inv2.validation_failed => return Ok(Step::Done(())),
                        Err(feedback) => feedback,
                    }
                }
                "submit_result_no_workflow" => {
                    let inv2 = &mut self.inv2;
                    inv2.no_workflow = Some(
                        args.get("reasoning")
                            .and_then(Value::as_str)
                            .unwrap_or("no reasoning given")
                            .to_owned(),
                    );
                    inv2.investigation_outcome = repair::outcome(args.get("investigation_outcome"));
                    inv2.needs_human_review =
                        repair::boolean(args.get("needs_human_review")).unwrap_or(false);
                    inv2.human_review_reason = args
                        .get("human_review_reason")
                        .and_then(Value::as_str)
                        .map(str::to_owned);
                    return Ok(Step::Done(()));
                }
                other => format!("Error: unknown tool `{other}`."),
            };
            replies.push((call.id.clone(), text));
        }
        Ok(Step::Next {
            replies,
            say: None,
            force: None,
        })
    }
}

impl LlmInvestigator {
    /// Validate a `submit_result_with_workflow`. `Ok` concludes invocation 2 (a valid selection,
    /// or any selection when the target is unverified: that is `rca_incomplete`, not worth a
    /// correction); on failure return the correction prompt, and mark the failure final once
    /// the first submission and `validation_retries` corrections have all failed.
    fn accept_selection(
        &self,
        args: &Value,
        analysis: &Analysis,
        ctx: &SelectionContext,
        inv2: &mut Invocation2,
    ) -> Result<(), String> {
        let sel = args
            .get("selected_workflow")
            .cloned()
            .map(repair::unwrap_layers)
            .unwrap_or(Value::Null);
        let workflow_id = sel
            .get("workflow_id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let confidence = repair::number(sel.get("confidence"))
            .unwrap_or(0.0)
            .clamp(0.0, 1.0);
        let parameters: Map<String, Value> =
            match sel.get("parameters").cloned().map(repair::unwrap_layers) {
                Some(Value::Object(m)) => m,
                _ => Map::new(),
            };
        inv2.severity = args
            .get("severity")
            .and_then(Value::as_str)
            .map(Severity::parse);
        inv2.needs_human_review = repair::boolean(args.get("needs_human_review")).unwrap_or(false);
        inv2.human_review_reason = args
            .get("human_review_reason")
            .and_then(Value::as_str)
            .map(str::to_owned);
        inv2.alternatives = args
            .get("alternative_workflows")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|w| {
                        Some(AlternativeWorkflow {
                            workflow_id: w.get("workflow_id")?.as_str()?.to_owned(),
                            rationale: w
                                .get("rationale")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_owned(),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        if analysis.root_owner.is_none() {
            // rca_incomplete whatever the selection: no correction could make it runnable
            // (its target parameters come from the verified root owner), so none is asked for.
            inv2.unverified_selection = Some(workflow_id);
            return Ok(());
        }
        match self.catalog.get().validate_selection(
            &workflow_id,
            &parameters,
            analysis.root_owner.as_ref(),
            ctx,
        ) {
            Ok(params) => {
                let catalog = self.catalog.get();
                let w = catalog.workflow(&workflow_id);
                inv2.selected = Some(SelectedWorkflow {
                    action_type: w.map_or_else(|| "".into(), |w| w.action_type.clone()),
                    version: w.map(|w| w.version.clone()).unwrap_or_default(),
                    workflow_id,
                    confidence,
                    rationale: sel
                        .get("rationale")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned(),
                    parameters: params,
                });
                Ok(())
            }
            Err(e) => {
                inv2.validation_attempts.push(ValidationAttempt {
                    workflow_id: workflow_id.clone(),
                    code: e.code.into(),
                    errors: e.errors.clone(),
                });
                // The first submission plus `validation_retries` corrections.
                if inv2.validation_attempts.len() > self.settings.validation_retries {
                    inv2.validation_failed = true;
                }
                Err(format!(
                    "Validation failed ({}): {}. Correct the selection (list_workflows / get_workflow show valid ids and parameters) and call submit_result_with_workflow again, or submit_result_no_workflow.",
                    e.code,
                    e.errors.join("; ")
                ))
            }
        }
    }
}
