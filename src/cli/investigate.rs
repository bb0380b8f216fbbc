//! `kubemedic investigate`: run the alerts of an Alertmanager body through the pipeline — the
//! same stages the daemon's worker runs — up to and including the gate decision, without a
//! server or a database, and print each request's final record.
//!
//! JSON output (one object per alert, one per line) is a stable contract:
//! `{"phase", "reason", "rca": {"summary", "severity", "remediation_target", "confidence",
//! "investigation_outcome", "contributing_factors"}, "selection": {…} | null, "gate": {…} | null}`.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use serde_json::{Value, json};

use crate::clock::{Clock, ManualClock, SystemClock};
use crate::cluster::{ClusterReader, KubeCluster, SnapshotCluster};
use crate::config::{ClusterArgs, GateArgs, InvestigateArgs};
use crate::daemon;
use crate::domain::{InvestigationPlan, Phase, PlanSource, RemediationRequest, StageState};
use crate::history::InMemoryHistory;
use crate::ingest;
use crate::investigate::{InvestigationStage, SelectionStage};
use crate::pipeline::{Pipeline, Step};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Json,
    Text,
}

#[derive(Debug, Args)]
pub struct InvestigateCommand {
    /// An Alertmanager webhook body (JSON), every alert in it investigated; or one native
    /// signal (`{"name": …, "target": {…}}`).
    #[arg(long, value_name = "FILE")]
    pub alert: PathBuf,
    /// Investigate a cluster snapshot (from `kubemedic snapshot`) instead of a live cluster.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["kubeconfig", "context"])]
    pub snapshot: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "json")]
    pub format: Format,
    /// Also execute an approved remediation (only where an execution stage exists).
    #[arg(long)]
    pub execute: bool,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    #[command(flatten)]
    pub investigate: InvestigateArgs,
    #[command(flatten)]
    pub gate: GateArgs,
}

#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Failed(String),
}

/// An Alertmanager webhook body, or one native signal (`{"name": …, "target": …}`, as
/// `POST /api/v1/signals` takes it), received at `now`.
fn signals(
    body: &[u8],
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Vec<crate::domain::NewSignal>, ingest::IngestError> {
    let native = serde_json::from_slice::<Value>(body)
        .is_ok_and(|v| v.get("alerts").is_none() && v.get("name").is_some());
    if native {
        Ok(vec![ingest::native::parse(body, now)?])
    } else {
        ingest::alertmanager::parse(body)
    }
}

/// Run the command; returns what to print.
pub async fn run(cmd: &InvestigateCommand) -> Result<String, CommandError> {
    let body = std::fs::read(&cmd.alert)
        .map_err(|e| CommandError::Usage(format!("cannot read {}: {e}", cmd.alert.display())))?;
    let cluster = cmd
        .cluster
        .settings()
        .map_err(|e| CommandError::Usage(e.to_string()))?;
    let settings = cmd
        .investigate
        .settings()
        .map_err(|e| CommandError::Usage(e.to_string()))?;
    let gate = cmd
        .gate
        .settings()
        .map_err(|e| CommandError::Usage(e.to_string()))?;
    // The writer only ever dry-runs here (the proof's change): a snapshot records it, a
    // cluster answers `dryRun=All`.
    let (reader, writer, clock): (
        Arc<dyn ClusterReader>,
        Arc<dyn crate::cluster::ClusterWriter>,
        Arc<dyn Clock>,
    ) = match &cmd.snapshot {
        Some(path) => {
            let snap = SnapshotCluster::load(path)
                .map_err(|e| CommandError::Usage(format!("{}: {e}", path.display())))?;
            let clock: Arc<dyn Clock> = match snap.captured_at() {
                Some(t) => Arc::new(ManualClock::new(t)),
                None => Arc::new(SystemClock),
            };
            let snap = Arc::new(snap.with_policy(cluster.policy.clone()));
            (snap.clone(), snap, clock)
        }
        None => {
            let kube = Arc::new(
                KubeCluster::connect(&cluster.kube_options())
                    .await
                    .map_err(|e| CommandError::Failed(e.to_string()))?,
            );
            (kube.clone(), kube, Arc::new(SystemClock))
        }
    };
    let signals = signals(&body, clock.now())
        .map_err(|e| CommandError::Usage(format!("{}: {e}", cmd.alert.display())))?;
    let history = Arc::new(InMemoryHistory::default());
    let built = crate::investigate::build(
        &settings,
        reader.clone(),
        clock.clone(),
        cluster.tool_limits.clone(),
        history,
        Default::default(),
    )
    .map_err(|e| CommandError::Failed(e.to_string()))?;
    let investigator = built.investigator;
    let prover = Arc::new(crate::prove::Prover::new(
        reader.clone(),
        Some(writer),
        built.catalog,
        clock.clone(),
    ));
    let mut pipeline = Pipeline::new(clock.clone(), std::time::Duration::from_secs(0))
        .with_actor("kubemedic-investigate");
    for stage in daemon::command_stages(&gate, reader.clone()) {
        pipeline = pipeline.with_stage(stage);
    }
    pipeline = pipeline
        .with_stage(Arc::new(InvestigationStage(investigator.clone())))
        .with_stage(Arc::new(SelectionStage::new(investigator, prover)));
    let mut out = String::new();
    for signal in &signals {
        let req = RemediationRequest::for_signal(signal, Phase::Received, clock.now());
        let req = advance(&pipeline, req, cmd.execute).await;
        let record = record(&req);
        match cmd.format {
            Format::Json => out.push_str(&record.to_string()),
            Format::Text => out.push_str(&text(&req, &record)),
        }
        out.push('\n');
    }
    Ok(out)
}

/// Carry `req` through `pipeline` in this process, without a store: until it ends, awaits an
/// approval, waits for a dependency, or — unless `execute` — is about to execute. Nothing is
/// executed that the pipeline has no stage for.
pub async fn advance(
    pipeline: &Pipeline,
    mut req: RemediationRequest,
    execute: bool,
) -> RemediationRequest {
    loop {
        let stop = req.phase.is_terminal()
            || req.phase == Phase::AwaitingApproval
            || (req.phase == Phase::Executing && !execute);
        if stop {
            return req;
        }
        match pipeline.step(&req).await {
            Step::Move {
                to, reason, state, ..
            } => {
                req.phase = to;
                req.reason = reason;
                req.state = state;
            }
            Step::Wait { state, .. } => {
                req.reason = state
                    .waiting
                    .as_ref()
                    .map(|w| format!("waiting for {}: {}", w.dependency, w.message));
                req.state = state;
                return req;
            }
        }
    }
}

/// The stable JSON record of a request.
pub fn record(req: &RemediationRequest) -> Value {
    record_of(req.phase, req.reason.as_deref(), &req.state)
}

/// The stable JSON record of a request's phase, reason and stage results: what `investigate`
/// prints, and what the real-node tests score a `serve` request by (from its API body).
pub fn record_of(phase: Phase, reason: Option<&str>, state: &StageState) -> Value {
    let rca = state
        .selection
        .as_ref()
        .map(|s| &s.merged)
        .or(state.analysis.as_ref().map(|a| &a.rca));
    let root = state.analysis.as_ref().and_then(|a| a.root_owner.clone());
    json!({
        "phase": phase,
        "reason": reason,
        "rca": rca.map(|r| json!({
            "summary": r.root_cause_analysis.summary,
            "severity": r.root_cause_analysis.severity,
            "remediation_target": root.as_ref().map(|t| json!({"kind": t.kind, "name": t.name, "namespace": t.namespace}))
                .or_else(|| r.root_cause_analysis.remediation_target.as_ref().map(|t| json!({"kind": t.kind, "name": t.name, "namespace": t.namespace}))),
            "confidence": r.confidence,
            "investigation_outcome": r.investigation_outcome,
            "contributing_factors": r.root_cause_analysis.contributing_factors,
        })),
        "selection": state.selection.as_ref().and_then(|s| s.selected.as_ref()).map(|w| json!({
            "workflow_id": w.workflow_id,
            "action_type": w.action_type,
            "parameters": w.parameters,
            "confidence": w.confidence,
        })),
        "gate": state.gate.as_ref().map_or(
            Value::Null,
            |g| json!({"require_approval": g.require_approval, "reason": g.reason}),
        ),
    })
}

/// The plan as a checklist: `[x]` for a step the investigation carried out.
fn plan_text(plan: &InvestigationPlan) -> String {
    let source = match (plan.source, &plan.from) {
        (PlanSource::Model, _) => "model".to_owned(),
        // A rule no playbook describes lists the calls it made ("rule hpa-maxed-out").
        (PlanSource::Playbook, Some(from)) if from.starts_with("rule ") => from.clone(),
        (PlanSource::Playbook, Some(from)) => format!("playbook {from}"),
        (PlanSource::Playbook, None) => "playbook".to_owned(),
    };
    let mut s = format!("  Plan ({source}):\n");
    for step in &plan.steps {
        let mark = if step.done { 'x' } else { ' ' };
        s.push_str(&format!("    [{mark}] {}\n", step.step));
    }
    s
}

fn text(req: &RemediationRequest, record: &Value) -> String {
    let mut s = format!(
        "{} {}\n",
        req.signal.name,
        req.target
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default()
    );
    s.push_str(&format!("  phase: {}\n", req.phase));
    if let Some(r) = &req.reason {
        s.push_str(&format!("  reason: {r}\n"));
    }
    if let Some(rca) = record.get("rca").filter(|r| !r.is_null()) {
        s.push_str(&format!(
            "  root cause: {} (outcome {}, confidence {:.2})\n",
            rca["summary"].as_str().unwrap_or(""),
            rca["investigation_outcome"].as_str().unwrap_or(""),
            rca["confidence"].as_f64().unwrap_or(0.0)
        ));
        for f in rca["contributing_factors"].as_array().into_iter().flatten() {
            s.push_str(&format!("    - {}\n", f.as_str().unwrap_or("")));
        }
        if let Some(t) = rca.get("remediation_target").filter(|t| !t.is_null()) {
            s.push_str(&format!(
                "  target: {}/{}/{}\n",
                t["namespace"].as_str().unwrap_or("-"),
                t["kind"].as_str().unwrap_or(""),
                t["name"].as_str().unwrap_or("")
            ));
        }
    }
    if let Some(w) = record.get("selection").filter(|w| !w.is_null()) {
        s.push_str(&format!(
            "  workflow: {} ({}) confidence {:.2} parameters {}\n",
            w["workflow_id"].as_str().unwrap_or(""),
            w["action_type"].as_str().unwrap_or(""),
            w["confidence"].as_f64().unwrap_or(0.0),
            w["parameters"]
        ));
    }
    if let Some(g) = record.get("gate").filter(|g| !g.is_null()) {
        s.push_str(&format!(
            "  gate: require_approval={} ({})\n",
            g["require_approval"],
            g["reason"].as_str().unwrap_or("")
        ));
    }
    // How it was reached: not part of the JSON contract, for the person reading along.
    if let Some(a) = &req.state.analysis {
        s.push_str(&format!("  investigator: {}\n", a.investigator));
        if !a.playbooks.is_empty() {
            s.push_str(&format!("  playbooks: {}\n", a.playbooks.join(", ")));
        }
        if let Some(p) = &a.plan {
            s.push_str(&plan_text(p));
        }
        if let Some(n) = a
            .neighbourhood
            .as_ref()
            .filter(|n| !n.dependencies.is_empty())
        {
            s.push_str(&format!(
                "  Dependencies of {} (ranked{}):\n",
                n.target,
                n.onset
                    .map(|o| format!("; failing since {}", o.format("%H:%M:%S")))
                    .unwrap_or_default()
            ));
            for line in n.compact(8).lines() {
                s.push_str(&format!("    {}\n", line.trim_start_matches("- ")));
            }
        }
        if let Some(p) = &req.state.proof {
            s.push_str(&format!(
                "  Proof of {} ({}): {}\n",
                if p.action_type == crate::domain::ActionType::NoAction {
                    "no action needed"
                } else {
                    p.action_type.as_str()
                },
                p.proposer.as_str(),
                p.verdict.as_str()
            ));
            for o in &p.obligations {
                s.push_str(&format!(
                    "    [{}] {}{}\n",
                    if o.holds() { "x" } else { " " },
                    o.statement,
                    o.evidence
                        .first()
                        .map(|e| format!(" — {e}"))
                        .unwrap_or_default()
                ));
            }
            if let Some(c) = &p.change {
                for line in c.lines() {
                    s.push_str(&format!("    change: {line}\n"));
                }
            }
        }
        let calls: Vec<&str> = a.tool_calls.iter().map(|c| c.tool.as_str()).collect();
        s.push_str(&format!("  tool calls: {}", calls.len()));
        if !calls.is_empty() {
            s.push_str(&format!(" ({})", calls.join(", ")));
        }
        s.push('\n');
        let selection = req
            .state
            .selection
            .as_ref()
            .map(|x| x.usage)
            .unwrap_or_default();
        let (prompt, completion) = (
            a.usage.prompt_tokens + selection.prompt_tokens,
            a.usage.completion_tokens + selection.completion_tokens,
        );
        if prompt + completion > 0 {
            s.push_str(&format!(
                "  tokens: {prompt} prompt + {completion} completion\n"
            ));
        }
        for w in &a.warnings {
            s.push_str(&format!("  warning: {w}\n"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{
        Analysis, InvestigationOutcome, PlanStep, RcaResult, RootCauseAnalysis, Usage,
    };

    fn request(plan: Option<InvestigationPlan>) -> RemediationRequest {
        let body = r#"{"version": "4", "status": "firing", "receiver": "kubemedic", "groupKey": "g",
            "alerts": [{"status": "firing", "fingerprint": "f1", "startsAt": "2026-11-21T11:50:00Z",
                        "labels": {"alertname": "KubePodCrashLooping", "namespace": "shop", "pod": "web-1"}}]}"#;
        let signal = ingest::alertmanager::parse(body.as_bytes())
            .unwrap()
            .remove(0);
        let mut req =
            RemediationRequest::for_signal(&signal, Phase::ManualReviewRequired, signal.starts_at);
        req.state.analysis = Some(Analysis {
            rca: RcaResult {
                root_cause_analysis: RootCauseAnalysis {
                    summary: "web crashes on start".into(),
                    severity: "high".into(),
                    contributing_factors: vec![],
                    remediation_target: None,
                    investigation_analysis: String::new(),
                },
                confidence: 0.8,
                investigation_outcome: InvestigationOutcome::Actionable,
                actionable: true,
                needs_human_review: false,
                human_review_reason: None,
            },
            root_owner: None,
            spec_hash: None,
            detected_labels: None,
            history: None,
            warnings: vec![],
            playbooks: vec!["CrashLoopBackOff".into()],
            tool_calls: vec![],
            usage: Usage::default(),
            investigator: "llm:test".into(),
            llm_calls: vec![],
            proposal: None,
            plan,
            neighbourhood: None,
            signature: None,
            learned: vec![],
            remote_tools: vec![],
        });
        req
    }

    fn steps(list: &[(&str, bool)]) -> Vec<PlanStep> {
        list.iter()
            .map(|(s, done)| PlanStep {
                step: (*s).into(),
                done: *done,
            })
            .collect()
    }

    #[test]
    fn the_text_format_shows_the_plan_as_a_checklist() {
        let req = request(Some(InvestigationPlan {
            source: PlanSource::Model,
            from: None,
            steps: steps(&[("Describe the crashing pod", true), ("Read its logs", true)]),
        }));
        let out = text(&req, &record(&req));
        assert!(
            out.contains(
                "  playbooks: CrashLoopBackOff\n  Plan (model):\n    [x] Describe the crashing pod\n    [x] Read its logs\n  tool calls: 0"
            ),
            "{out}"
        );

        let req = request(Some(InvestigationPlan {
            source: PlanSource::Playbook,
            from: Some("CrashLoopBackOff".into()),
            steps: steps(&[
                ("kubectl_describe the pod", true),
                ("kubectl_previous_logs", false),
            ]),
        }));
        let out = text(&req, &record(&req));
        assert!(
            out.contains(
                "  Plan (playbook CrashLoopBackOff):\n    [x] kubectl_describe the pod\n    [ ] kubectl_previous_logs\n"
            ),
            "{out}"
        );

        // No plan, no section; and the JSON contract is unchanged either way.
        let req = request(None);
        assert!(!text(&req, &record(&req)).contains("Plan"));
        assert!(record(&req).get("plan").is_none());
    }
}
