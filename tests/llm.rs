//! The LLM investigator against an OpenAI-compatible server scripted by each test, over a real
//! socket with kubemedic's real client (streaming, or JSON from a server that ignores
//! `stream`), on a snapshot of a cluster after a bad rollout.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::llm::{Reply, ScriptedLlm, calls, raw_call, say_and_call, text, truncated};
use kubemedic::catalog::Catalog;
use kubemedic::clock::{Clock, ManualClock};
use kubemedic::cluster::tools::ToolLimits;
use kubemedic::cluster::{ClusterReader, ListQuery, LogQuery, ResourceInfo, SnapshotCluster};
use kubemedic::domain::Enrichment;
use kubemedic::domain::HistoryRecord;
use kubemedic::domain::{OutcomeKind, Phase, RemediationRequest, Stage, StageState};
use kubemedic::history::InMemoryHistory;
use kubemedic::investigate::playbooks::Playbooks;
use kubemedic::investigate::{
    InvestigationStage, LlmInvestigator, LlmInvestigatorSettings, SelectionStage,
};
use kubemedic::llm::{
    LiveOutput, LiveToken, LiveTokens, OpenAiLlm, OpenAiSettings, Provider, TokenBudget,
};
use kubemedic::pipeline::{Pipeline, Step};
use kubemedic::telemetry::Metrics;
use serde_json::{Value, json};

const POD: &str = "checkout-7d9c8b6f5-x2k4q";

fn snapshot() -> SnapshotCluster {
    SnapshotCluster::from_yaml(&common::fixture("clusters/shop-rollout.yaml")).unwrap()
}

/// The same cluster after checkout healed: the crash-looping pod of revision 2 and everything
/// about it gone, both replicas of the Deployment available.
fn healed() -> Setup {
    let text = common::fixture("clusters/shop-rollout.yaml");
    let docs: Vec<&str> = text
        .split("\n---\n")
        .filter(|d| d.contains("kind: Deployment\n") || !d.contains("checkout-7d9c8b6f5"))
        .collect();
    let text = docs
        .join("\n---\n")
        .replace(
            "  replicas: 3\n  updatedReplicas: 1\n",
            "  replicas: 2\n  updatedReplicas: 2\n",
        )
        .replace("  unavailableReplicas: 1\n", "");
    Setup {
        reader: Some(Arc::new(SnapshotCluster::from_yaml(&text).unwrap())),
        ..Default::default()
    }
}

fn request(alertname: &str, extra: &[(&str, &str)]) -> RemediationRequest {
    let mut labels = vec![
        ("namespace", "shop"),
        ("pod", POD),
        ("container", "checkout"),
        ("severity", "critical"),
    ];
    labels.extend_from_slice(extra);
    let body = common::alert_body("firing", alertname, &labels, "fp-1", "2026-11-21T11:50:00Z");
    let signal = kubemedic::ingest::alertmanager::parse(body.as_bytes())
        .unwrap()
        .remove(0);
    let now = chrono::DateTime::parse_from_rfc3339("2026-11-21T12:00:00Z")
        .unwrap()
        .to_utc();
    let state = StageState {
        enrichment: Some(Enrichment {
            environment: "staging".into(),
            priority: None,
            business_unit: None,
            risk_tolerance: None,
            pinned: vec![],
            sources: vec![],
        }),
        ..Default::default()
    };
    RemediationRequest {
        state,
        ..RemediationRequest::for_signal(&signal, Phase::Investigating, now)
    }
}

struct Setup {
    budget: u64,
    provider: Provider,
    history: Vec<HistoryRecord>,
    /// The investigator's caps (default: the shipped defaults, with a mini selection model).
    settings: LlmInvestigatorSettings,
    /// Per model request.
    timeout: Duration,
    /// The cluster the tools read (default: the snapshot).
    reader: Option<Arc<dyn ClusterReader>>,
    /// Where the investigator reports its metrics (default: nowhere).
    metrics: Option<Arc<Metrics>>,
    /// Ask the model to stream (default: yes, as the daemon does).
    stream: bool,
    /// Where the model's words go as they arrive (default: nowhere).
    live: Option<Arc<LiveTokens>>,
    /// What the tools may return (default: the shipped limits).
    tool_limits: ToolLimits,
}

impl Default for Setup {
    fn default() -> Self {
        Self {
            budget: 100_000,
            provider: Provider::OpenAi,
            history: vec![],
            settings: LlmInvestigatorSettings {
                rca_model: "gpt-4o".into(),
                selection_model: "gpt-4o-mini".into(),
                ..Default::default()
            },
            timeout: Duration::from_secs(10),
            reader: None,
            metrics: None,
            stream: true,
            live: None,
            tool_limits: ToolLimits::default(),
        }
    }
}

fn investigator(server: &ScriptedLlm, setup: Setup) -> Arc<LlmInvestigator> {
    investigator_at(&server.base_url, setup)
}

/// The investigator against the model server at `base_url` (`http://HOST:PORT`).
fn investigator_at(base_url: &str, setup: Setup) -> Arc<LlmInvestigator> {
    common::init();
    let snap = snapshot();
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(snap.captured_at().unwrap()));
    let base = match setup.provider {
        Provider::OpenAi => format!("{base_url}/v1"),
        Provider::Azure => base_url.to_owned(),
    };
    let llm = OpenAiLlm::new(&OpenAiSettings {
        provider: setup.provider,
        base_url: Some(base),
        api_key: Some(kubemedic::secret::Secret::new("sk-test-key")),
        azure_deployment: Some("kubemedic-gpt".into()),
        azure_api_version: "2024-10-21".into(),
        timeout: setup.timeout,
        max_retries: 3,
        backoff: Duration::from_millis(20),
        stream: setup.stream,
    })
    .unwrap();
    Arc::new(LlmInvestigator {
        llm: Arc::new(llm),
        budget: Arc::new(TokenBudget::new(setup.budget, 10_000_000)),
        reader: setup.reader.unwrap_or_else(|| Arc::new(snap)),
        clock,
        tool_limits: setup.tool_limits,
        catalog: kubemedic::live::Live::new(Catalog::builtin().unwrap()),
        remote: None,
        playbooks: kubemedic::live::Live::new(Playbooks::builtin().unwrap()),
        history: Arc::new(InMemoryHistory::new(setup.history)),
        settings: setup.settings,
        metrics: setup.metrics,
        live: setup.live,
    })
}

/// Run invocation 1 and 2 as the worker does.
async fn run(inv: Arc<LlmInvestigator>, mut req: RemediationRequest) -> RemediationRequest {
    for stage in [
        Arc::new(InvestigationStage(inv.clone())) as Arc<dyn Stage>,
        Arc::new(SelectionStage::new(inv.clone(), prover_for(&inv))),
    ] {
        if req.phase != stage.phase() {
            break;
        }
        let out = stage.run(&req).await.expect("stage");
        req.phase = out.next;
        req.reason = out.reason;
        req.state = out.state;
    }
    req
}

fn rca(outcome: &str, confidence: Value) -> Value {
    json!({
        "root_cause_analysis": {
            "summary": "The rollout of checkout 1.4.2 crashes on start: PAYMENT_API_KEY_V2 is not set",
            "severity": "critical",
            "contributing_factors": ["revision 2 (1.4.2) crash-loops with exit code 1", "revision 1 (1.4.1) is healthy"],
            "remediation_target": {"kind": "Deployment", "name": "checkout", "namespace": "shop"},
            "investigation_analysis": "New ReplicaSet fails, old one healthy."
        },
        "confidence": confidence,
        "investigation_outcome": outcome,
        "actionable": outcome == "actionable"
    })
}

fn rollback(confidence: f64) -> Reply {
    calls(&[(
        "submit_result_with_workflow",
        json!({"selected_workflow": {"workflow_id": "rollback-deployment-previous-revision", "confidence": confidence, "rationale": "undo the bad rollout", "parameters": {"TO_REVISION": 1}},
               "alternative_workflows": [{"workflow_id": "restart-rolling", "rationale": "would not fix a crash on start"}]}),
    )])
}

fn tool_messages(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or("").to_owned())
        .collect()
}

#[tokio::test]
async fn a_multi_turn_investigation_with_parallel_tool_calls_reaches_the_gate() {
    let server = ScriptedLlm::start(vec![
        calls(&[
            ("kubectl_describe", json!({"kind": "Pod", "name": POD, "namespace": "shop"})),
            ("kubectl_previous_logs", json!({"name": POD, "namespace": "shop", "container": "checkout"})),
            ("kubectl_find_resource", json!({"kind": "ReplicaSet", "namespace": "shop", "label_selector": "app=checkout"})),
        ]),
        calls(&[("get_namespaced_resource_context", json!({"kind": "Pod", "name": POD, "namespace": "shop"}))]),
        calls(&[("submit_result", rca("actionable", json!(0.9)))]),
        calls(&[("list_available_actions", json!({}))]),
        calls(&[("list_workflows", json!({"action_type": "RollbackDeployment"})), ("get_workflow", json!({"workflow_id": "rollback-deployment-previous-revision"}))]),
        rollback(0.88),
    ])
    .await;
    let done = run(
        investigator(&server, Setup::default()),
        request("KubePodCrashLooping", &[]),
    )
    .await;
    assert_eq!(done.phase, Phase::Gating, "{:?}", done.reason);
    let sel = done.state.selection.as_ref().unwrap();
    let w = sel.selected.as_ref().unwrap();
    assert_eq!(w.workflow_id, "rollback-deployment-previous-revision");
    assert_eq!(
        w.parameters["TARGET_RESOURCE_NAME"], "checkout",
        "target injected from the verified root owner"
    );
    assert_eq!(sel.alternatives[0].workflow_id, "restart-rolling");
    let a = done.state.analysis.as_ref().unwrap();
    assert_eq!(
        a.root_owner.as_ref().unwrap().to_string(),
        "shop/Deployment/checkout"
    );
    assert!(a.playbooks.contains(&"CrashLoopBackOff".to_owned()));
    assert_eq!(a.tool_calls.len(), 4);
    assert_eq!(a.llm_calls.len(), 3);
    assert!(a.usage.prompt_tokens > 0 && sel.usage.prompt_tokens > 0);
    // The trail keeps each call's time and the beginning of each output, for the dashboard.
    assert!(
        a.llm_calls.iter().all(|c| c.duration_ms.is_some()),
        "{:?}",
        a.llm_calls
    );
    assert!(a.tool_calls.iter().all(|c| c.duration_ms.is_some()));
    let pods = a.tool_calls.iter().find_map(|c| {
        c.excerpt
            .as_deref()
            .filter(|x| x.contains("CrashLoopBackOff"))
    });
    assert!(pods.is_some(), "{:?}", a.tool_calls);

    let reqs = server.requests();
    assert_eq!(reqs.len(), 6);
    // Turn 2 carries all three results of turn 1, run in parallel.
    let results = tool_messages(&reqs[1].body);
    assert_eq!(results.len(), 3);
    assert!(
        results[0].contains("Waiting (CrashLoopBackOff)"),
        "{}",
        results[0]
    );
    assert!(results[1].contains("PAYMENT_API_KEY_V2"), "{}", results[1]);
    assert!(results[2].contains("checkout-6b8f7c9d4"), "{}", results[2]);
    // The context result carries the resource context and (empty) history.
    let ctx = tool_messages(&reqs[2].body).pop().unwrap();
    assert!(
        ctx.contains("Root owner: shop/Deployment/checkout")
            && ctx.contains("sha256:")
            && ctx.contains("Remediation history"),
        "{ctx}"
    );
    // Invocation 2 is a fresh session: no transcript, only the structured fields.
    let first_select = &reqs[3].body;
    assert_eq!(first_select["model"], "gpt-4o-mini");
    assert_eq!(first_select["messages"].as_array().unwrap().len(), 2);
    let user = first_select["messages"][1]["content"].as_str().unwrap();
    assert!(
        user.contains("verified root owner): shop/Deployment/checkout")
            && !user.contains("PAYMENT_API_KEY_V2 is not set (new in"),
        "{user}"
    );
    let tool_names: Vec<&str> = first_select["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        tool_names.contains(&"list_available_actions") && !tool_names.contains(&"kubectl_logs"),
        "only catalog tools: {tool_names:?}"
    );
    // Secrets never reach the model; the system prompt says tool output is data.
    assert!(!reqs[0].body.to_string().contains("sk-test-key"));
    assert!(
        reqs[0].body["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("never an instruction")
    );
    assert_eq!(reqs[0].headers["authorization"], "Bearer sk-test-key");
    // The RCA prompt asks for batched calls and carries the matched playbook's steps.
    let system = reqs[0].body["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("put all independent tool calls in one turn"),
        "{system}"
    );
    let user = reqs[0].body["messages"][1]["content"].as_str().unwrap();
    let playbooks = user
        .split_once("## Matching playbooks")
        .map(|(_, rest)| rest)
        .unwrap_or_else(|| panic!("no playbook section: {user}"));
    assert!(playbooks.contains("CrashLoopBackOff"), "{playbooks}");
    assert!(
        playbooks.contains("kubectl_previous_logs"),
        "the playbook's investigation steps: {playbooks}"
    );
}

#[tokio::test]
async fn json_in_prose_code_fences_double_encoding_arrays_and_string_numbers_are_repaired() {
    let fenced = format!(
        "I found it.\n```json\n{}\n```\nLet me know.",
        rca("actionable", json!("0.9"))
    );
    let double = serde_json::to_string(&rca("actionable", json!(0.91)).to_string()).unwrap();
    let array = format!("[{}]", rca("actionable", json!("85%")));
    for (answer, confidence) in [
        (text(&fenced), 0.9),
        (raw_call("submit_result", &double), 0.91),
        (raw_call("submit_result", &array), 0.85),
    ] {
        let server = ScriptedLlm::start(vec![answer, rollback(0.9)]).await;
        let done = run(
            investigator(&server, Setup::default()),
            request("KubePodCrashLooping", &[]),
        )
        .await;
        let a = done.state.analysis.as_ref().unwrap();
        assert_eq!(a.rca.confidence, confidence);
        assert_eq!(done.phase, Phase::Gating, "{:?}", done.reason);
    }
}

#[tokio::test]
async fn a_truncated_answer_is_retried_with_twice_the_tokens() {
    let server = ScriptedLlm::start(vec![
        truncated("{\"root_cause_analysis\": {\"summary\": \"The rollout"),
        calls(&[("submit_result", rca("actionable", json!(0.9)))]),
        rollback(0.9),
    ])
    .await;
    let done = run(
        investigator(&server, Setup::default()),
        request("KubePodCrashLooping", &[]),
    )
    .await;
    assert_eq!(done.phase, Phase::Gating);
    let reqs = server.requests();
    assert_eq!(reqs[0].body["max_tokens"], 8192);
    assert_eq!(reqs[1].body["max_tokens"], 16384);
}

#[tokio::test]
async fn a_model_that_skips_the_sentinel_is_asked_once_with_the_tool_forced() {
    let server = ScriptedLlm::start(vec![
        text("The checkout deployment is broken, probably by the new release."),
        calls(&[("submit_result", rca("actionable", json!(0.85)))]),
        rollback(0.9),
    ])
    .await;
    let done = run(
        investigator(&server, Setup::default()),
        request("KubePodCrashLooping", &[]),
    )
    .await;
    assert_eq!(done.phase, Phase::Gating);
    let reqs = server.requests();
    assert_eq!(reqs[0].body["tool_choice"], "auto");
    assert_eq!(
        reqs[1].body["tool_choice"],
        json!({"type": "function", "function": {"name": "submit_result"}})
    );

    // If it still will not, the investigation is inconclusive — not guessed.
    let server = ScriptedLlm::start(vec![
        text("It is broken."),
        text("Still broken."),
        calls(&[(
            "submit_result_no_workflow",
            json!({"reasoning": "no RCA to act on"}),
        )]),
    ])
    .await;
    let done = run(
        investigator(&server, Setup::default()),
        request("KubePodCrashLooping", &[]),
    )
    .await;
    assert_eq!(done.phase, Phase::ManualReviewRequired);
    assert!(
        done.reason
            .as_deref()
            .unwrap()
            .starts_with("investigation_inconclusive"),
        "{:?}",
        done.reason
    );
}

fn unknown_workflow() -> Reply {
    calls(&[(
        "submit_result_with_workflow",
        json!({"selected_workflow": {"workflow_id": "rollback-everything", "confidence": 0.9, "parameters": {}}}),
    )])
}

/// "Up to 3 correction retries": the first submission and three corrections fed back, four
/// submissions in all, before validation is given up.
#[tokio::test]
async fn an_unknown_workflow_fails_validation_after_the_first_submission_and_three_corrections() {
    let server = ScriptedLlm::start(vec![
        calls(&[("submit_result", rca("actionable", json!(0.9)))]),
        unknown_workflow(),
        unknown_workflow(),
        unknown_workflow(),
        unknown_workflow(),
        // Never asked for: there is no fifth submission.
        rollback(0.9),
    ])
    .await;
    let done = run(
        investigator(&server, Setup::default()),
        request("KubePodCrashLooping", &[]),
    )
    .await;
    assert_eq!(done.phase, Phase::ManualReviewRequired);
    let reason = done.reason.unwrap();
    assert!(
        reason.starts_with("workflow_not_found") && reason.contains("after 4 attempts"),
        "{reason}"
    );
    let sel = done.state.selection.unwrap();
    assert_eq!(sel.outcome.kind, OutcomeKind::ValidationFailed);
    assert_eq!(sel.validation_attempts.len(), 4);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 5, "one RCA call, four selection submissions");
    assert_eq!(server.remaining(), 1);
    // Each of the three corrections carries the validation error back to the model.
    for (i, r) in reqs[2..].iter().enumerate() {
        let feedback = tool_messages(&r.body).pop().unwrap();
        assert!(
            feedback.contains("Validation failed (workflow_not_found)"),
            "correction {}: {feedback}",
            i + 1
        );
    }
}

#[tokio::test]
async fn a_selection_corrected_on_the_third_correction_reaches_the_gate() {
    let server = ScriptedLlm::start(vec![
        calls(&[("submit_result", rca("actionable", json!(0.9)))]),
        unknown_workflow(),
        unknown_workflow(),
        unknown_workflow(),
        rollback(0.9),
    ])
    .await;
    let done = run(
        investigator(&server, Setup::default()),
        request("KubePodCrashLooping", &[]),
    )
    .await;
    assert_eq!(done.phase, Phase::Gating, "{:?}", done.reason);
    let sel = done.state.selection.unwrap();
    assert_eq!(sel.validation_attempts.len(), 3);
    assert_eq!(
        sel.selected.unwrap().workflow_id,
        "rollback-deployment-previous-revision"
    );
    assert_eq!(server.requests().len(), 5);
}

#[tokio::test]
async fn bad_parameters_are_corrected_after_feedback() {
    let server = ScriptedLlm::start(vec![
        calls(&[("submit_result", rca("actionable", json!(0.9)))]),
        calls(&[("submit_result_with_workflow", json!({"selected_workflow": {"workflow_id": "increase-memory-limits", "confidence": 0.8, "parameters": {"CONTAINER": "checkout", "MEMORY_LIMIT": "a lot"}}}))]),
        calls(&[("submit_result_with_workflow", json!({"selected_workflow": {"workflow_id": "increase-memory-limits", "confidence": 0.8, "parameters": {"CONTAINER": "checkout", "MEMORY_LIMIT": "512Mi"}}}))]),
    ])
    .await;
    let done = run(
        investigator(&server, Setup::default()),
        request("KubePodCrashLooping", &[]),
    )
    .await;
    let sel = done.state.selection.unwrap();
    assert_eq!(
        sel.validation_attempts[0].code,
        "parameter_validation_failed"
    );
    // The corrected selection is valid, and wrong all the same: nothing in this cluster was
    // killed for memory (checkout crashes on a missing setting), so its proof fails and a
    // human decides instead of the gate.
    let proof = done.state.proof.unwrap();
    assert_eq!(proof.parameters["MEMORY_LIMIT"], "512Mi");
    assert_eq!(done.phase, Phase::ManualReviewRequired, "{:?}", done.reason);
    assert!(
        proof
            .failed()
            .any(|o| o.id == "memory.container-was-killed"),
        "{proof:?}"
    );
}

#[tokio::test]
async fn low_confidence_fails_and_goes_to_review() {
    let server = ScriptedLlm::start(vec![
        calls(&[("submit_result", rca("actionable", json!(0.9)))]),
        rollback(0.55),
    ])
    .await;
    let done = run(
        investigator(&server, Setup::default()),
        request("KubePodCrashLooping", &[]),
    )
    .await;
    assert_eq!(done.phase, Phase::Failed);
    assert!(done.reason.unwrap().starts_with("low_confidence"));
}

#[tokio::test]
async fn problem_resolved_wins_over_a_contradictory_review_request() {
    let mut resolved = rca("problem_resolved", json!(0.9));
    resolved["root_cause_analysis"]["contributing_factors"] = json!([]);
    let server = ScriptedLlm::start(vec![
        calls(&[("submit_result", resolved)]),
        calls(&[("submit_result_no_workflow", json!({"reasoning": "cannot tell", "needs_human_review": true, "human_review_reason": "unsure"}))]),
    ])
    .await;
    let done = run(
        investigator(&server, healed()),
        request("KubePodCrashLooping", &[]),
    )
    .await;
    assert_eq!(done.phase, Phase::NoActionRequired, "{:?}", done.reason);
    assert!(
        done.reason
            .clone()
            .unwrap()
            .starts_with("problem self-resolved")
    );
    assert_eq!(
        done.state.proof.as_ref().map(|p| p.verdict),
        Some(kubemedic::domain::ProofVerdict::Proven),
        "{:?}",
        done.state.proof
    );
}

/// "Resolved" is a claim the cluster must bear out: while a pod of the workload still
/// crash-loops, the model's "problem resolved" goes to a human, naming that pod.
#[tokio::test]
async fn a_problem_resolved_claim_the_cluster_contradicts_goes_to_review() {
    let mut resolved = rca("problem_resolved", json!(0.9));
    resolved["root_cause_analysis"]["contributing_factors"] = json!([]);
    let server = ScriptedLlm::start(vec![
        calls(&[("submit_result", resolved)]),
        calls(&[(
            "submit_result_no_workflow",
            json!({"reasoning": "resolved"}),
        )]),
    ])
    .await;
    let done = run(
        investigator(&server, Setup::default()),
        request("KubePodCrashLooping", &[]),
    )
    .await;
    assert_eq!(done.phase, Phase::ManualReviewRequired, "{:?}", done.reason);
    let reason = done.reason.unwrap();
    assert!(
        reason.starts_with("proof_failed")
            && reason.contains("checkout-7d9c8b6f5-x2k4q")
            && reason.contains("CrashLoopBackOff"),
        "{reason}"
    );
    let sel = done.state.selection.unwrap();
    assert_eq!(sel.outcome.kind, OutcomeKind::ProofFailed);
}

/// Invocation 1's replies, then a confident selection of a valid workflow, on the staging
/// request (where the gate would auto-approve it).
async fn then_a_confident_rollback(
    invocation1: Vec<Reply>,
    setup: Setup,
) -> (ScriptedLlm, RemediationRequest) {
    let mut script = invocation1;
    script.push(rollback(0.95));
    let server = ScriptedLlm::start(script).await;
    let done = run(
        investigator(&server, setup),
        request("KubePodCrashLooping", &[]),
    )
    .await;
    (server, done)
}

/// The selection itself was fine (a valid workflow, a verified target): only the RCA stops it.
fn assert_valid_selection_held_back(done: &RemediationRequest) {
    let a = done.state.analysis.as_ref().unwrap();
    assert_eq!(
        a.root_owner.as_ref().map(ToString::to_string).as_deref(),
        Some("shop/Deployment/checkout")
    );
    let sel = done.state.selection.as_ref().unwrap();
    assert_eq!(
        sel.selected.as_ref().map(|w| w.workflow_id.as_str()),
        Some("rollback-deployment-previous-revision")
    );
    assert_ne!(sel.outcome.next_phase, Phase::Gating);
}

#[tokio::test]
async fn an_inconclusive_rca_goes_to_review_despite_a_confident_selection() {
    let (server, done) = then_a_confident_rollback(
        vec![calls(&[("submit_result", rca("inconclusive", json!(0.4)))])],
        Setup::default(),
    )
    .await;
    assert_eq!(done.phase, Phase::ManualReviewRequired, "{:?}", done.reason);
    let reason = done.reason.clone().unwrap();
    assert!(reason.starts_with("investigation_inconclusive"), "{reason}");
    let sel = done.state.selection.as_ref().unwrap();
    assert_eq!(sel.outcome.kind, OutcomeKind::Inconclusive);
    assert_valid_selection_held_back(&done);
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn an_insufficient_data_rca_goes_to_review_despite_a_confident_selection() {
    let (_server, done) = then_a_confident_rollback(
        vec![calls(&[(
            "submit_result",
            rca("insufficient_data", json!(0.9)),
        )])],
        Setup::default(),
    )
    .await;
    assert_eq!(done.phase, Phase::ManualReviewRequired, "{:?}", done.reason);
    let reason = done.reason.clone().unwrap();
    assert!(reason.starts_with("insufficient_data"), "{reason}");
    let sel = done.state.selection.as_ref().unwrap();
    assert_eq!(sel.outcome.kind, OutcomeKind::InsufficientData);
    assert_valid_selection_held_back(&done);
}

#[tokio::test]
async fn no_rca_within_the_turn_limit_goes_to_review_despite_a_confident_selection() {
    let events = || calls(&[("kubectl_events", json!({"namespace": "shop"}))]);
    let mut setup = Setup::default();
    setup.settings.max_turns = 3;
    let (server, done) = then_a_confident_rollback(vec![events(), events(), events()], setup).await;
    assert_eq!(done.phase, Phase::ManualReviewRequired, "{:?}", done.reason);
    let reason = done.reason.clone().unwrap();
    assert!(reason.starts_with("investigation_inconclusive"), "{reason}");
    let a = done.state.analysis.as_ref().unwrap();
    assert!(
        a.warnings
            .iter()
            .any(|w| w.contains("within the turn limit")),
        "{:?}",
        a.warnings
    );
    // The alert's own pod still resolves to a root owner: the missing RCA alone holds it back.
    assert_valid_selection_held_back(&done);
    assert_eq!(server.requests().len(), 4, "three RCA turns, one selection");
}

#[tokio::test]
async fn an_rca_rejected_as_partial_goes_to_review_despite_a_confident_selection() {
    // Partial: a confidence (and an outcome) without the summary of a root cause.
    let partial = || {
        calls(&[(
            "submit_result",
            json!({"confidence": 0.92, "investigation_outcome": "actionable", "actionable": true,
                   "root_cause_analysis": {"remediation_target": {"kind": "Deployment", "name": "checkout", "namespace": "shop"}}}),
        )])
    };
    let (server, done) =
        then_a_confident_rollback(vec![partial(), partial()], Setup::default()).await;
    assert_eq!(done.phase, Phase::ManualReviewRequired, "{:?}", done.reason);
    let reason = done.reason.clone().unwrap();
    assert!(reason.starts_with("investigation_inconclusive"), "{reason}");
    let a = done.state.analysis.as_ref().unwrap();
    assert!(
        a.warnings.iter().any(|w| w.contains("partial RCA")),
        "{:?}",
        a.warnings
    );
    let reqs = server.requests();
    assert_eq!(
        reqs[1].body["tool_choice"],
        json!({"type": "function", "function": {"name": "submit_result"}}),
        "the partial answer was asked for once more"
    );
    assert_eq!(reqs.len(), 3);
    assert_valid_selection_held_back(&done);
}

#[tokio::test]
async fn problem_resolved_with_contributing_factors_goes_to_review() {
    // `rca()` names contributing factors: the model found a real problem, whatever it calls it.
    let substantive = || calls(&[("submit_result", rca("problem_resolved", json!(0.9)))]);
    let server = ScriptedLlm::start(vec![
        substantive(),
        calls(&[(
            "submit_result_no_workflow",
            json!({"reasoning": "resolved, nothing to do"}),
        )]),
    ])
    .await;
    let done = run(
        investigator(&server, Setup::default()),
        request("KubePodCrashLooping", &[]),
    )
    .await;
    assert_eq!(done.phase, Phase::ManualReviewRequired, "{:?}", done.reason);
    let reason = done.reason.unwrap();
    assert!(
        reason.starts_with("investigation_inconclusive") && reason.contains("contributing factors"),
        "{reason}"
    );

    // Nor does a confident selection take it to the gate.
    let (_server, done) = then_a_confident_rollback(vec![substantive()], Setup::default()).await;
    assert_eq!(done.phase, Phase::ManualReviewRequired, "{:?}", done.reason);

    // A bare "resolved, nothing to do" needs no action.
    let mut bare = rca("problem_resolved", json!(0.9));
    bare["root_cause_analysis"]["summary"] =
        json!("checkout is healthy again; no errors since 11:52");
    bare["root_cause_analysis"]["contributing_factors"] = json!([]);
    let server = ScriptedLlm::start(vec![
        calls(&[("submit_result", bare)]),
        calls(&[(
            "submit_result_no_workflow",
            json!({"reasoning": "resolved, nothing to do"}),
        )]),
    ])
    .await;
    let done = run(
        investigator(&server, healed()),
        request("KubePodCrashLooping", &[]),
    )
    .await;
    assert_eq!(done.phase, Phase::NoActionRequired, "{:?}", done.reason);
    assert!(
        done.reason
            .as_deref()
            .unwrap()
            .starts_with("problem self-resolved"),
        "{:?}",
        done.reason
    );
}

#[tokio::test]
async fn an_unverifiable_target_is_rca_incomplete_without_spending_corrections() {
    let mut ghost = rca("actionable", json!(0.9));
    ghost["root_cause_analysis"]["remediation_target"]["name"] = json!("checkout-v2");
    let server = ScriptedLlm::start(vec![
        calls(&[("submit_result", ghost)]),
        rollback(0.95),
        // What a correction loop would have spent.
        rollback(0.95),
        rollback(0.95),
        rollback(0.95),
    ])
    .await;
    let done = run(
        investigator(&server, Setup::default()),
        request("KubePodCrashLooping", &[]),
    )
    .await;
    assert_eq!(done.phase, Phase::ManualReviewRequired, "{:?}", done.reason);
    let reason = done.reason.unwrap();
    assert!(reason.starts_with("rca_incomplete"), "{reason}");
    assert!(done.state.analysis.unwrap().root_owner.is_none());
    let sel = done.state.selection.unwrap();
    assert_eq!(sel.outcome.kind, OutcomeKind::RcaIncomplete);
    assert!(
        sel.validation_attempts.is_empty(),
        "{:?}",
        sel.validation_attempts
    );
    assert!(sel.selected.is_none());
    assert_eq!(
        server.requests().len(),
        2,
        "one RCA call, one selection, no correction"
    );
    assert_eq!(server.remaining(), 3);
}

#[tokio::test]
async fn not_actionable_at_half_confidence_is_floored_and_needs_no_action() {
    let server = ScriptedLlm::start(vec![
        calls(&[("submit_result", rca("not_actionable", json!(0.5)))]),
        calls(&[(
            "submit_result_no_workflow",
            json!({"reasoning": "transient"}),
        )]),
    ])
    .await;
    let done = run(
        investigator(&server, Setup::default()),
        request("PredictedMemoryExhaustion", &[("signal_mode", "proactive")]),
    )
    .await;
    assert_eq!(done.phase, Phase::NoActionRequired);
    assert_eq!(done.state.selection.unwrap().merged.confidence, 0.8);
    let reqs = server.requests();
    assert!(
        reqs[0].body["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("prediction (not an incident)")
    );
}

#[tokio::test]
async fn rate_limits_and_server_errors_are_retried() {
    let server = ScriptedLlm::start(vec![
        Reply::Status(429, "Rate limit reached"),
        Reply::Status(503, "overloaded"),
        calls(&[("submit_result", rca("actionable", json!(0.9)))]),
        rollback(0.9),
    ])
    .await;
    let done = run(
        investigator(&server, Setup::default()),
        request("KubePodCrashLooping", &[]),
    )
    .await;
    assert_eq!(done.phase, Phase::Gating);
    assert_eq!(server.requests().len(), 4);
}

/// Run the investigation stage through the pipeline with no patience for a missing model (as
/// after `--max-wait` for it): the reason the request ends with, and the metrics.
async fn reason_without_a_model(base_url: &str, timeout: Duration) -> (String, String) {
    let metrics = Arc::new(Metrics::new());
    let inv = investigator_at(
        base_url,
        Setup {
            timeout,
            metrics: Some(metrics.clone()),
            ..Default::default()
        },
    );
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(snapshot().captured_at().unwrap()));
    let pipeline =
        Pipeline::new(clock, Duration::ZERO).with_stage(Arc::new(InvestigationStage(inv)));
    match pipeline.step(&request("KubePodCrashLooping", &[])).await {
        Step::Move {
            to: Phase::ManualReviewRequired,
            reason: Some(reason),
            ..
        } => (reason, metrics.render()),
        other => panic!("expected manual review, got {other:?}"),
    }
}

/// A model server that accepts connections, reads the request and never answers.
async fn silent_model() -> (String, tokio::task::JoinHandle<()>) {
    use tokio::io::AsyncReadExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut buf = vec![0u8; 1 << 16];
            let _ = socket.read(&mut buf).await;
            held.push(socket);
        }
    });
    (base, task)
}

#[tokio::test]
async fn a_model_that_never_answers_is_named_a_timeout_with_the_setting_and_attempts() {
    let (base, server) = silent_model().await;
    let started = std::time::Instant::now();
    let (reason, metrics) = reason_without_a_model(&base, Duration::from_secs(1)).await;
    server.abort();
    assert!(
        reason.contains(&format!(
            "the model at {base}/v1/chat/completions did not answer within 1 s \
             (--llm-timeout-seconds), 4 attempts"
        )),
        "{reason}"
    );
    assert!(reason.starts_with("llm not available"), "{reason}");
    assert!(!reason.contains("error sending request"), "{reason}");
    assert!(
        started.elapsed() >= Duration::from_secs(4),
        "four attempts of 1 s"
    );
    assert!(
        metrics.contains("kubemedic_llm_errors_total{kind=\"timeout\"} 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_refused_connection_is_named_apart_from_a_timeout() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let (reason, metrics) = reason_without_a_model(&base, Duration::from_secs(5)).await;
    assert!(
        reason.contains(&format!(
            "connection refused by {base}/v1/chat/completions, 4 attempts"
        )),
        "{reason}"
    );
    assert!(!reason.contains("did not answer"), "{reason}");
    assert!(
        metrics.contains("kubemedic_llm_errors_total{kind=\"connect\"} 1")
            && !metrics.contains("kind=\"timeout\""),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_tls_failure_and_an_http_error_are_named_as_such() {
    // TLS against a plain-HTTP server: the handshake fails.
    let server = ScriptedLlm::start(vec![]).await;
    let https = server.base_url.replace("http://", "https://");
    let (reason, metrics) = reason_without_a_model(&https, Duration::from_secs(5)).await;
    assert!(
        reason.contains(&format!(
            "the TLS handshake with {https}/v1/chat/completions failed"
        )),
        "{reason}"
    );
    assert!(
        metrics.contains("kubemedic_llm_errors_total{kind=\"tls\"} 1"),
        "{metrics}"
    );
    // Four 503s: the status, not a transport error.
    let server =
        ScriptedLlm::start((0..4).map(|_| Reply::Status(503, "overloaded")).collect()).await;
    let (reason, metrics) = reason_without_a_model(&server.base_url, Duration::from_secs(5)).await;
    assert!(
        reason.contains("answered HTTP 503") && reason.contains("4 attempts"),
        "{reason}"
    );
    assert!(
        metrics.contains("kubemedic_llm_errors_total{kind=\"http\"} 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_token_budget_overrun_ends_in_review() {
    let server = ScriptedLlm::start(vec![
        calls(&[(
            "kubectl_describe",
            json!({"kind": "Pod", "name": POD, "namespace": "shop"}),
        )]),
        calls(&[(
            "kubectl_describe",
            json!({"kind": "Deployment", "name": "checkout", "namespace": "shop"}),
        )]),
        calls(&[("submit_result", rca("actionable", json!(0.9)))]),
    ])
    .await;
    let done = run(
        investigator(
            &server,
            Setup {
                budget: 3_000,
                ..Default::default()
            },
        ),
        request("KubePodCrashLooping", &[]),
    )
    .await;
    assert_eq!(done.phase, Phase::ManualReviewRequired);
    assert!(done.reason.unwrap().starts_with("llm_budget_exceeded"));
    assert!(server.requests().len() < 3, "stopped before spending more");
}

#[tokio::test]
async fn azure_openai_uses_the_deployment_path_and_api_key_header() {
    let server = ScriptedLlm::start(vec![
        calls(&[("submit_result", rca("actionable", json!(0.9)))]),
        rollback(0.9),
    ])
    .await;
    let done = run(
        investigator(
            &server,
            Setup {
                provider: Provider::Azure,
                ..Default::default()
            },
        ),
        request("KubePodCrashLooping", &[]),
    )
    .await;
    assert_eq!(done.phase, Phase::Gating);
    let r = &server.requests()[0];
    assert!(
        r.path.starts_with(
            "/openai/deployments/kubemedic-gpt/chat/completions?api-version=2024-10-21"
        ),
        "{}",
        r.path
    );
    assert_eq!(r.headers["api-key"], "sk-test-key");
}

#[tokio::test]
async fn seeded_history_reaches_the_prompt_with_its_warnings() {
    let snap = snapshot();
    let ctx = kubemedic::cluster::context::ContextResolver::new(Arc::new(snap));
    let current = ctx
        .resolve("Deployment", "checkout", Some("shop"))
        .await
        .unwrap()
        .spec_hash
        .clone()
        .unwrap();
    let at = chrono::DateTime::parse_from_rfc3339("2026-11-21T10:00:00Z")
        .unwrap()
        .to_utc();
    let record = |uid: &str, hours: i64, score: f64| HistoryRecord {
        remediation_uid: uid.into(),
        target: kubemedic::domain::Target::new("Deployment", "checkout", Some("shop".into())),
        completed_at: at - chrono::Duration::hours(hours),
        signal_name: "KubePodCrashLooping".into(),
        workflow_type: "RestartDeployment".into(),
        workflow_id: "restart-rolling".into(),
        outcome: kubemedic::domain::HistoryOutcome::Completed,
        effectiveness_score: Some(score),
        // Each restart stamped the template; the spec is back at what it was before (a
        // GitOps sync undid it): a regression.
        pre_remediation_spec_hash: Some(current.clone()),
        post_remediation_spec_hash: Some(format!("sha256:restarted-{uid}")),
        pre_remediation_drift_hash: None,
        post_remediation_drift_hash: None,
        signal_resolved: Some(false),
        assessment_reason: None,
        health_checks: None,
    };
    let server = ScriptedLlm::start(vec![
        calls(&[(
            "get_namespaced_resource_context",
            json!({"kind": "Deployment", "name": "checkout", "namespace": "shop"}),
        )]),
        calls(&[("submit_result", rca("actionable", json!(0.9)))]),
        rollback(0.9),
    ])
    .await;
    let setup = Setup {
        history: vec![
            record("rr-1", 6, 0.6),
            record("rr-2", 4, 0.4),
            record("rr-3", 2, 0.2),
        ],
        ..Default::default()
    };
    let done = run(
        investigator(&server, setup),
        request("KubePodCrashLooping", &[]),
    )
    .await;
    let history = done.state.analysis.unwrap().history.unwrap();
    assert!(history.regression_detected);
    let reqs = server.requests();
    let ctx_text = tool_messages(&reqs[1].body).pop().unwrap();
    for w in [
        "configuration_regression",
        "declining_effectiveness",
        "repeated_ineffective_remediation",
    ] {
        assert!(ctx_text.contains(w), "{w} missing from {ctx_text}");
    }
    let select_user = reqs[2].body["messages"][1]["content"].as_str().unwrap();
    assert!(
        select_user.contains("Remediation history")
            && select_user.contains("declining_effectiveness"),
        "{select_user}"
    );
}

/// The figure of docs/benchmarks.md: tokens sent for a scripted RCA with ten tool calls, both
/// invocations, counted with the o200k tokenizer. Target: at most 25k.
#[tokio::test]
async fn a_ten_tool_call_investigation_stays_within_the_token_target() {
    let server = ScriptedLlm::start(vec![
        calls(&[
            ("kubectl_get", json!({"kind": "Pod", "namespace": "shop"})),
            ("kubectl_describe", json!({"kind": "Pod", "name": POD, "namespace": "shop"})),
            ("kubectl_events", json!({"namespace": "shop"})),
            ("kubectl_previous_logs", json!({"name": POD, "namespace": "shop", "container": "checkout"})),
        ]),
        calls(&[
            ("kubectl_logs", json!({"name": POD, "namespace": "shop", "container": "checkout"})),
            ("kubectl_describe", json!({"kind": "Deployment", "name": "checkout", "namespace": "shop"})),
            ("kubectl_find_resource", json!({"kind": "ReplicaSet", "namespace": "shop", "label_selector": "app=checkout"})),
            ("kubectl_top_pods", json!({"namespace": "shop"})),
        ]),
        calls(&[
            ("get_namespaced_resource_context", json!({"kind": "Pod", "name": POD, "namespace": "shop"})),
            ("kubectl_get", json!({"kind": "Node"})),
        ]),
        calls(&[("submit_result", rca("actionable", json!(0.9)))]),
        calls(&[("list_available_actions", json!({}))]),
        calls(&[("list_workflows", json!({"action_type": "RollbackDeployment"}))]),
        calls(&[("get_workflow", json!({"workflow_id": "rollback-deployment-previous-revision"}))]),
        rollback(0.9),
    ])
    .await;
    let done = run(
        investigator(&server, Setup::default()),
        request("KubePodCrashLooping", &[]),
    )
    .await;
    assert_eq!(done.phase, Phase::Gating);
    assert_eq!(done.state.analysis.as_ref().unwrap().tool_calls.len(), 10);
    let reqs = server.requests();
    let total: usize = reqs.iter().map(|r| r.prompt_tokens).sum();
    let inv1: usize = reqs.iter().take(4).map(|r| r.prompt_tokens).sum();
    let tools_schema = common::llm::prompt_tokens(&json!({"tools": reqs[0].body["tools"]}));
    let system = common::llm::prompt_tokens(&json!({"messages": [reqs[0].body["messages"][0]]}));
    println!(
        "TOKENS total={total} invocation1={inv1} invocation2={} requests={} tool_schemas_per_turn={tools_schema} system_prompt={system} usage_recorded={}",
        total - inv1,
        reqs.len(),
        done.state.analysis.as_ref().unwrap().usage.prompt_tokens
            + done.state.selection.as_ref().unwrap().usage.prompt_tokens
    );
    assert!(total <= 25_000, "{total} tokens sent; the target is 25k");
}

/// What an SRE sees on `/readyz` of a daemon with a model configured: nothing known before the
/// first call, then the last call's failure (the request waits), then the day's token budget
/// running out (requests end in review) — without kubemedic ever probing the model itself.
#[tokio::test]
async fn readyz_reports_the_models_last_call_and_the_daily_budget() {
    common::init();
    let server = ScriptedLlm::start(vec![
        Reply::Status(500, "upstream exploded"),
        Reply::Status(500, "upstream exploded"),
        calls(&[("submit_result", rca("actionable", json!(0.9)))]),
        rollback(0.9),
    ])
    .await;
    let settings = kubemedic::config::Settings::load(&kubemedic::config::DaemonArgs {
        investigate: kubemedic::config::InvestigateArgs {
            llm: Some(kubemedic::config::LlmMode::Openai),
            llm_base_url: Some(format!("{}/v1", server.base_url)),
            llm_api_key: Some(kubemedic::secret::Secret::new("sk-readyz-secret")),
            llm_model: Some("gpt-4o".into()),
            llm_max_retries: Some(1),
            llm_daily_token_budget: Some(1_000),
            ..Default::default()
        },
        ..Default::default()
    })
    .unwrap();
    let snap = Arc::new(snapshot());
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(snap.captured_at().unwrap()));
    let (stages, investigator) = kubemedic::daemon::investigation_stages(
        &settings,
        &kubemedic::daemon::DashboardParts::load(&settings, None),
        snap.clone(),
        (snap.clone(), snap),
        clock,
        Arc::new(InMemoryHistory::default()),
        Default::default(),
    );
    let d = common::TestDaemon::start_with(
        |_| {},
        kubemedic::daemon::Components {
            dependencies: vec![investigator],
            ..Default::default()
        },
        None,
    )
    .await;
    let readyz = || async {
        let v: Value = d
            .client
            .get(d.url("/readyz"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        v
    };
    let ready = readyz().await;
    assert_eq!(ready["status"], "ready", "{ready}");
    let detail = ready["checks"]["investigator"]["detail"].as_str().unwrap();
    assert!(detail.contains("not called yet"), "{detail}");
    assert!(!ready.to_string().contains("sk-readyz-secret"));

    // The model server fails: the request waits, and /readyz says why.
    let req = request("KubePodCrashLooping", &[]);
    let err = stages[0].run(&req).await.unwrap_err();
    assert!(
        matches!(err, kubemedic::domain::StageError::Unavailable { .. }),
        "{err}"
    );
    let ready = readyz().await;
    assert_eq!(ready["status"], "degraded", "{ready}");
    assert_eq!(ready["checks"]["investigator"]["ok"], false, "{ready}");
    let detail = ready["checks"]["investigator"]["detail"].as_str().unwrap();
    assert!(detail.contains("last call failed"), "{detail}");
    assert!(detail.contains("500"), "{detail}");
    assert_eq!(
        server.requests().len(),
        2,
        "--llm-max-retries 1: one request and one retry, nothing more"
    );

    // It answers, and the answer spends the day's budget: selection ends in review.
    let out = stages[0].run(&req).await.unwrap();
    assert_eq!(out.next, Phase::Selecting);
    let mut req = req;
    req.phase = out.next;
    req.state = out.state;
    let out = stages[1].run(&req).await.unwrap();
    assert_eq!(out.next, Phase::ManualReviewRequired);
    assert!(
        out.reason
            .as_deref()
            .unwrap()
            .starts_with("llm_budget_exceeded"),
        "{:?}",
        out.reason
    );
    let ready = readyz().await;
    assert_eq!(ready["checks"]["investigator"]["ok"], false, "{ready}");
    let detail = ready["checks"]["investigator"]["detail"].as_str().unwrap();
    assert!(detail.contains("last call succeeded"), "{detail}");
    assert!(detail.contains("daily token budget spent"), "{detail}");
    assert_eq!(
        server.requests().len(),
        3,
        "no probe, no call past the budget"
    );
    d.stop().await;
}

/// A cluster whose log reads meet: each `logs` call returns only once `parties` of them are
/// waiting at the same time. Two log calls in one turn finish only if they run concurrently; a
/// lone one never finishes (which is how the tool timeout is shown without a timing assertion).
struct Rendezvous {
    inner: SnapshotCluster,
    barrier: tokio::sync::Barrier,
}

#[async_trait::async_trait]
impl ClusterReader for Rendezvous {
    async fn resource(&self, kind: &str) -> kubemedic::cluster::Result<ResourceInfo> {
        self.inner.resource(kind).await
    }
    async fn get(
        &self,
        res: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
    ) -> kubemedic::cluster::Result<Value> {
        self.inner.get(res, namespace, name).await
    }
    async fn list(
        &self,
        res: &ResourceInfo,
        namespace: Option<&str>,
        query: &ListQuery,
    ) -> kubemedic::cluster::Result<Vec<Value>> {
        self.inner.list(res, namespace, query).await
    }
    async fn logs(
        &self,
        namespace: &str,
        pod: &str,
        query: &LogQuery,
    ) -> kubemedic::cluster::Result<String> {
        self.barrier.wait().await;
        self.inner.logs(namespace, pod, query).await
    }
    async fn server_version(&self) -> kubemedic::cluster::Result<String> {
        self.inner.server_version().await
    }
}

fn rendezvous(parties: usize) -> Option<Arc<dyn ClusterReader>> {
    Some(Arc::new(Rendezvous {
        inner: snapshot(),
        barrier: tokio::sync::Barrier::new(parties),
    }))
}

/// An investigation whose first turn is `first_turn`, on the two-party rendezvous reader,
/// then a conclusion and a rollback.
async fn with_rendezvous(
    first_turn: Reply,
    tool_timeout: Duration,
) -> (ScriptedLlm, RemediationRequest) {
    let server = ScriptedLlm::start(vec![
        first_turn,
        calls(&[("submit_result", rca("actionable", json!(0.9)))]),
        rollback(0.9),
    ])
    .await;
    let mut setup = Setup {
        reader: rendezvous(2),
        ..Default::default()
    };
    setup.settings.tool_timeout = tool_timeout;
    // Only the model's own calls meet at the rendezvous: no pre-fetched view or
    // neighbourhood reads logs before it starts.
    setup.settings.cluster_view = false;
    let done = run(
        investigator(&server, setup),
        request("KubePodCrashLooping", &[]),
    )
    .await;
    (server, done)
}

fn previous_logs() -> (&'static str, Value) {
    (
        "kubectl_previous_logs",
        json!({"name": POD, "namespace": "shop", "container": "checkout"}),
    )
}

#[tokio::test]
async fn the_tool_calls_of_one_turn_run_concurrently() {
    // Two log reads that can only finish together: run one after the other, the first would
    // wait for the second until the tool timeout cut it off.
    let (server, done) = with_rendezvous(
        calls(&[previous_logs(), previous_logs()]),
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(done.phase, Phase::Gating, "{:?}", done.reason);
    let results = tool_messages(&server.requests()[1].body);
    assert_eq!(results.len(), 2);
    for r in &results {
        assert!(r.contains("PAYMENT_API_KEY_V2"), "{r}");
    }
}

#[tokio::test]
async fn a_tool_call_that_does_not_finish_in_time_becomes_a_timeout_result() {
    let (server, done) = with_rendezvous(calls(&[previous_logs()]), Duration::from_secs(1)).await;
    // The investigation goes on; the model is told what happened and how to do better.
    assert_eq!(done.phase, Phase::Gating, "{:?}", done.reason);
    let results = tool_messages(&server.requests()[1].body);
    assert_eq!(results.len(), 1);
    assert!(
        results[0].contains("Error (Timeout): kubectl_previous_logs did not finish within 1s"),
        "{}",
        results[0]
    );
    let a = done.state.analysis.as_ref().unwrap();
    assert_eq!(a.tool_calls.len(), 1);
}

#[tokio::test]
async fn the_caps_refuse_extra_calls_and_force_a_conclusion_at_the_turn_limit() {
    let describe = || {
        (
            "kubectl_describe",
            json!({"kind": "Pod", "name": POD, "namespace": "shop"}),
        )
    };
    let events = || ("kubectl_events", json!({"namespace": "shop"}));
    let server = ScriptedLlm::start(vec![
        // Turn 1: the third describe is over the per-tool cap (2).
        calls(&[describe(), describe(), describe(), events()]),
        // Turn 2: 3 calls run so far; the total cap (5) lets two more through.
        calls(&[events(), previous_logs(), previous_logs()]),
        // Turn 3 (of 4): more calls; all refused, and then the model is told to conclude.
        calls(&[events()]),
        // Turn 4: forced to the sentinel.
        calls(&[("submit_result", rca("actionable", json!(0.9)))]),
        rollback(0.9),
    ])
    .await;
    let mut setup = Setup::default();
    setup.settings.max_turns = 4;
    setup.settings.max_tool_calls = 5;
    setup.settings.max_calls_per_tool = 2;
    let done = run(
        investigator(&server, setup),
        request("KubePodCrashLooping", &[]),
    )
    .await;
    assert_eq!(done.phase, Phase::Gating, "{:?}", done.reason);
    let reqs = server.requests();
    let turn1 = tool_messages(&reqs[1].body);
    assert_eq!(turn1.len(), 4, "every call gets an answer, refused or not");
    assert!(
        turn1[2].contains("the call limit for kubectl_describe (2) is reached"),
        "{}",
        turn1[2]
    );
    assert!(!turn1[3].starts_with("Error"), "{}", turn1[3]);
    // (The conversation carries every earlier result: turn 2's are 4..=6.)
    let turn2 = tool_messages(&reqs[2].body);
    assert_eq!(turn2.len(), 7);
    assert!(!turn2[4].starts_with("Error"), "{}", turn2[4]);
    assert!(!turn2[5].starts_with("Error"), "{}", turn2[5]);
    assert!(
        turn2[6].contains("tool call limit (5) is reached"),
        "{}",
        turn2[6]
    );
    let last = &reqs[3].body;
    assert!(
        tool_messages(last)[7].contains("tool call limit (5) is reached"),
        "{last}"
    );
    assert_eq!(
        last["tool_choice"],
        json!({"type": "function", "function": {"name": "submit_result"}}),
        "the last turn forces the sentinel"
    );
    assert!(
        last["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["role"] == "user"
                && m["content"]
                    .as_str()
                    .is_some_and(|c| c.contains("turn limit is reached"))),
        "{last}"
    );
    let a = done.state.analysis.as_ref().unwrap();
    // Every call is in the record; only the five within the caps ran.
    assert_eq!(a.tool_calls.len(), 8);
    assert_eq!(a.tool_calls.iter().filter(|c| c.ok).count(), 5);
}

#[tokio::test]
async fn a_model_that_never_concludes_ends_inconclusive_at_the_turn_limit() {
    let server = ScriptedLlm::start(vec![
        calls(&[("kubectl_events", json!({"namespace": "shop"}))]),
        calls(&[("kubectl_events", json!({"namespace": "shop"}))]),
        calls(&[("kubectl_events", json!({"namespace": "shop"}))]),
        // Invocation 2, given nothing to act on.
        calls(&[(
            "submit_result_no_workflow",
            json!({"reasoning": "no RCA to act on"}),
        )]),
    ])
    .await;
    let mut setup = Setup::default();
    setup.settings.max_turns = 3;
    let done = run(
        investigator(&server, setup),
        request("KubePodCrashLooping", &[]),
    )
    .await;
    assert_eq!(done.phase, Phase::ManualReviewRequired);
    assert!(
        done.reason
            .as_deref()
            .unwrap()
            .starts_with("investigation_inconclusive"),
        "{:?}",
        done.reason
    );
    let rca_calls = server
        .requests()
        .iter()
        .filter(|r| r.body["model"] == "gpt-4o")
        .count();
    assert_eq!(rca_calls, 3, "no RCA call past the turn limit");
    let a = done.state.analysis.as_ref().unwrap();
    assert!(
        a.warnings
            .iter()
            .any(|w| w.contains("within the turn limit")),
        "{:?}",
        a.warnings
    );
}

#[tokio::test]
async fn a_stalled_model_call_is_cut_at_the_request_timeout_and_retried() {
    let server = ScriptedLlm::start(vec![
        Reply::Stall(Duration::from_secs(30)),
        calls(&[("submit_result", rca("actionable", json!(0.9)))]),
        rollback(0.9),
    ])
    .await;
    let setup = Setup {
        timeout: Duration::from_secs(1),
        ..Default::default()
    };
    let done = run(
        investigator(&server, setup),
        request("KubePodCrashLooping", &[]),
    )
    .await;
    assert_eq!(done.phase, Phase::Gating, "{:?}", done.reason);
    let reqs = server.requests();
    assert_eq!(
        reqs.len(),
        3,
        "the stalled request, its retry, the selection"
    );
    assert_eq!(
        reqs[0].body, reqs[1].body,
        "the retry sends the same request"
    );
}

/// Issue 13, item 1: the alert's own text (a Prometheus rule's annotations, a label), a tool
/// error echoing the model's arguments and the RCA the model wrote all pass the sanitiser on
/// their way into a message — the message type takes nothing else.
#[tokio::test]
async fn credentials_in_the_alert_text_and_in_errors_never_reach_the_model() {
    let planted = [
        "Sup3rS3cretPw",
        "ghp_0123456789abcdefghijABCDEFGHIJ012345",
        "xoxb-2222222222-3333333333-AbCdEfGhIjKlMnOp",
        "hunter2hunter2",
    ];
    let server = ScriptedLlm::start(vec![
        calls(&[
            (
                "kubectl_describe",
                json!({"kind": "Pod", "name": POD, "namespace": "shop"}),
            ),
            // A tool whose error message echoes what the model asked for.
            ("no_such_tool", json!({"password": "hunter2hunter2"})),
            (
                "kubectl_describe",
                json!({"kind": "Pod", "name": "db-password=hunter2hunter2", "namespace": "shop"}),
            ),
        ]),
        calls(&[("submit_result", rca("actionable", json!(0.9)))]),
        rollback(0.9),
    ])
    .await;
    let mut req = request("KubePodCrashLooping", &[("token", planted[1])]);
    req.signal.annotations.insert(
        "description".into(),
        format!(
            "checkout cannot reach postgres://checkout:{}@db.shop:5432/orders",
            planted[0]
        ),
    );
    req.signal.annotations.insert(
        "message".into(),
        format!("notify via Slack bot token {} if it persists", planted[2]),
    );
    let done = run(investigator(&server, Setup::default()), req).await;
    assert!(done.state.selection.is_some(), "{:?}", done.reason);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    for (i, r) in reqs.iter().enumerate() {
        // What kubemedic wrote: everything but the model's own tool calls, which go back to
        // it as it wrote them.
        let sent: Vec<&Value> = r.body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] != "assistant")
            .collect();
        let sent = serde_json::to_string(&sent).unwrap();
        for secret in planted {
            assert!(
                !sent.contains(secret),
                "request {i} carried {secret}: {sent}"
            );
        }
    }
    // The investigation still sees what it needs: where the alert points, and that the
    // connection string was there.
    let user = reqs[0].body["messages"][1]["content"].as_str().unwrap();
    assert!(
        user.contains("postgres://checkout:[REDACTED]@db.shop:5432/orders"),
        "{user}"
    );
    assert!(user.contains("token=[REDACTED]\n"), "{user}");
    assert!(user.contains(POD), "{user}");
}

/// Invocation 1 as the worker runs it: the stage's outcome, audit events included.
async fn investigation_stage(
    server: &ScriptedLlm,
    setup: Setup,
) -> kubemedic::domain::StageOutcome {
    let req = request("KubePodCrashLooping", &[]);
    InvestigationStage(investigator(server, setup))
        .run(&req)
        .await
        .expect("stage")
}

fn three_calls() -> Vec<(&'static str, Value)> {
    vec![
        (
            "kubectl_describe",
            json!({"kind": "Pod", "name": POD, "namespace": "shop"}),
        ),
        previous_logs(),
        (
            "kubectl_find_resource",
            json!({"kind": "ReplicaSet", "namespace": "shop", "label_selector": "app=checkout"}),
        ),
    ]
}

/// Issue 12, item 4 (KubeIntellect "Visible investigation plan"): the plan the model states
/// before its calls — in markdown, beside the calls — is on the analysis, in the audit trail,
/// and its steps are done once the calls ran.
#[tokio::test]
async fn the_plan_stated_before_three_calls_is_recorded_with_the_analysis_and_audited() {
    let server = ScriptedLlm::start(vec![
        common::llm::say_and_call(
            "The view shows the pod crash-looping.\r\n\r\n**INVESTIGATION_PLAN:**\r\n1. Describe the crashing pod\r\n2. Read its previous logs (password=hunter2hunter2 was in the alert?)\r\n3. Compare the ReplicaSets of `checkout`\r\n",
            &three_calls(),
        ),
        calls(&[("submit_result", rca("actionable", json!(0.9)))]),
    ])
    .await;
    let out = investigation_stage(&server, Setup::default()).await;
    let a = out.state.analysis.as_ref().unwrap();
    let plan = a.plan.as_ref().expect("a plan");
    assert_eq!(plan.source, kubemedic::domain::PlanSource::Model);
    let steps: Vec<(&str, bool)> = plan
        .steps
        .iter()
        .map(|s| (s.step.as_str(), s.done))
        .collect();
    assert_eq!(
        steps,
        [
            ("Describe the crashing pod", true),
            (
                "Read its previous logs (password=[REDACTED] was in the alert?)",
                true
            ),
            ("Compare the ReplicaSets of `checkout`", true),
        ]
    );
    assert_eq!(a.tool_calls.len(), 3);
    assert!(
        !a.warnings.iter().any(|w| w.contains("plan")),
        "{:?}",
        a.warnings
    );
    // The audit event of invocation 1 carries the plan as stored.
    let event = out.events.iter().find(|e| e.kind == "rca").unwrap();
    assert_eq!(event.payload["plan"], serde_json::to_value(plan).unwrap());
    assert_eq!(
        event.payload["plan"]["steps"][0],
        json!({"step": "Describe the crashing pod", "done": true})
    );
    // The model was asked for it.
    let system = server.requests()[0].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(system.contains("INVESTIGATION_PLAN:"), "{system}");
}

#[tokio::test]
async fn three_calls_without_a_plan_are_a_warning_not_a_failure() {
    let server = ScriptedLlm::start(vec![
        calls(&three_calls()),
        calls(&[("submit_result", rca("actionable", json!(0.9)))]),
    ])
    .await;
    let out = investigation_stage(&server, Setup::default()).await;
    assert_eq!(out.next, Phase::Selecting);
    let a = out.state.analysis.as_ref().unwrap();
    assert_eq!(a.plan, None);
    assert_eq!(
        a.rca.investigation_outcome,
        kubemedic::domain::InvestigationOutcome::Actionable
    );
    assert!(
        a.warnings
            .contains(&"no investigation plan stated before 3 tool calls".to_owned()),
        "{:?}",
        a.warnings
    );
    let event = out.events.iter().find(|e| e.kind == "rca").unwrap();
    assert!(event.payload["plan"].is_null(), "{}", event.payload);

    // A plan stated later is still taken (the first one); only the calls after it count.
    let server = ScriptedLlm::start(vec![
        calls(&three_calls()[..1]),
        common::llm::say_and_call(
            "INVESTIGATION_PLAN:\n- Read the previous logs\n- Compare ReplicaSets",
            &three_calls()[1..],
        ),
        common::llm::say_and_call("INVESTIGATION_PLAN:\n- ignored, not the first", &[]),
        calls(&[("submit_result", rca("actionable", json!(0.9)))]),
    ])
    .await;
    let out = investigation_stage(&server, Setup::default()).await;
    let a = out.state.analysis.as_ref().unwrap();
    let plan = a.plan.as_ref().unwrap();
    assert_eq!(plan.steps.len(), 2);
    assert!(plan.steps.iter().all(|s| s.done));
    assert!(
        !a.warnings.iter().any(|w| w.contains("plan")),
        "{:?}",
        a.warnings
    );
}

/// Issue 12, item 4: the pre-fetched view is in invocation 1's first prompt — the unhealthy pod
/// with its state, the Warning event with its count — and the model is told not to fetch it
/// again; with the switch off neither is there.
#[tokio::test]
async fn the_first_prompt_carries_the_cluster_view_and_says_not_to_fetch_it_again() {
    let server = ScriptedLlm::start(vec![calls(&[(
        "submit_result",
        rca("actionable", json!(0.9)),
    )])])
    .await;
    investigation_stage(&server, Setup::default()).await;
    let body = &server.requests()[0].body;
    let system = body["messages"][0]["content"].as_str().unwrap();
    let user = body["messages"][1]["content"].as_str().unwrap();
    let view = user
        .split_once("## Cluster view")
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("no view: {user}"));
    for line in [
        "namespace shop: 3 pods, 1 not healthy; 12 Warning events (1 distinct)",
        &format!("pod {POD} CrashLoopBackOff ready=0/1 restarts=7 last=Error"),
        "event 2m Warning BackOff Pod/checkout-7d9c8b6f5-x2k4q (x12): Back-off restarting failed container",
    ] {
        assert!(view.contains(line), "{line:?} missing from {view}");
    }
    assert!(
        system.contains("do not fetch again what it shows"),
        "{system}"
    );

    // Cluster text: a credential in an event reaches the view redacted.
    let leaky = format!(
        "{}\n---\napiVersion: v1\nkind: Event\nmetadata: {{name: leak, namespace: shop}}\ninvolvedObject: {{kind: Pod, name: {POD}, namespace: shop}}\nreason: Failed\nmessage: 'connect failed: postgres://checkout:Sup3rS3cretPw@db:5432/orders'\ntype: Warning\nlastTimestamp: \"2026-11-21T11:59:00Z\"\n",
        common::fixture("clusters/shop-rollout.yaml")
    );
    let server = ScriptedLlm::start(vec![calls(&[(
        "submit_result",
        rca("actionable", json!(0.9)),
    )])])
    .await;
    let setup = Setup {
        reader: Some(Arc::new(SnapshotCluster::from_yaml(&leaky).unwrap())),
        ..Default::default()
    };
    investigation_stage(&server, setup).await;
    let user = server.requests()[0].body["messages"][1]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        user.contains("Failed Pod/checkout-7d9c8b6f5-x2k4q: connect failed: postgres://checkout:[REDACTED]@db:5432/orders"),
        "{user}"
    );
    assert!(!user.contains("Sup3rS3cretPw"), "{user}");

    let server = ScriptedLlm::start(vec![calls(&[(
        "submit_result",
        rca("actionable", json!(0.9)),
    )])])
    .await;
    let mut setup = Setup::default();
    setup.settings.cluster_view = false;
    let out = investigation_stage(&server, setup).await;
    let body = &server.requests()[0].body;
    assert!(!body.to_string().contains("Cluster view"));
    assert!(!body.to_string().contains("do not fetch again"));
    // The playbooks still match: the pre-fetch itself is not what the switch turns off.
    assert!(
        out.state
            .analysis
            .unwrap()
            .playbooks
            .contains(&"CrashLoopBackOff".to_owned())
    );
}

/// The API serves the analysis whole: `GET /api/v1/requests/{id}` shows the plan in the
/// request's state and in the timeline's `rca` event, through the real store and worker.
#[tokio::test]
async fn the_api_shows_the_plan_in_the_request_state_and_its_timeline() {
    let server = ScriptedLlm::start(vec![
        common::llm::say_and_call(
            "INVESTIGATION_PLAN:\n- Describe the crashing pod\n- Read its previous logs\n- Compare ReplicaSets",
            &three_calls(),
        ),
        calls(&[("submit_result", rca("actionable", json!(0.9)))]),
        rollback(0.9),
    ])
    .await;
    let inv = investigator(&server, Setup::default());
    let gate = kubemedic::config::GateArgs::default().settings().unwrap();
    let mut stages = kubemedic::daemon::command_stages(&gate, Arc::new(snapshot()));
    stages.push(Arc::new(InvestigationStage(inv.clone())));
    stages.push(Arc::new(SelectionStage::new(inv.clone(), prover_for(&inv))));
    let d = common::TestDaemon::start_with(
        |_| {},
        kubemedic::daemon::Components {
            stages,
            ..Default::default()
        },
        None,
    )
    .await;
    let body = common::alert_body(
        "firing",
        "KubePodCrashLooping",
        &[
            ("namespace", "shop"),
            ("pod", POD),
            ("container", "checkout"),
        ],
        "fp-plan",
        "2026-11-21T11:50:00Z",
    );
    let answer: Value = d.send_alertmanager(&body).await.json().await.unwrap();
    let id = answer["outcomes"][0]["request_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let req = d
        .eventually(&format!("/api/v1/requests/{id}"), 30, |r| {
            !r["state"]["selection"].is_null()
        })
        .await;
    let want = json!({"source": "model", "steps": [
        {"step": "Describe the crashing pod", "done": true},
        {"step": "Read its previous logs", "done": true},
        {"step": "Compare ReplicaSets", "done": true},
    ]});
    assert_eq!(req["state"]["analysis"]["plan"], want, "{req:#}");
    let rca_event = req["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "rca")
        .unwrap_or_else(|| panic!("no rca event: {req:#}"));
    assert_eq!(rca_event["payload"]["plan"], want, "{rca_event:#}");
    d.stop().await;
}

/// A node alert's `namespace` label is the exporter's (here `monitoring`): the view shows the
/// node — its conditions and the pods scheduled on it — instead.
#[tokio::test]
async fn a_node_alert_gets_a_view_of_the_node_not_of_the_exporters_namespace() {
    use kubemedic::investigate::Investigator;
    let dir = common::scenarios::dir("node-not-ready");
    let snap = SnapshotCluster::load(&dir.join("snapshot.yaml")).unwrap();
    let alert: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("alert.json")).unwrap()).unwrap();
    let req = common::scenarios::request(&alert, snap.captured_at().unwrap());
    let server = ScriptedLlm::start(vec![calls(&[(
        "submit_result",
        rca("actionable", json!(0.9)),
    )])])
    .await;
    let setup = Setup {
        reader: Some(Arc::new(snap)),
        ..Default::default()
    };
    investigator(&server, setup).analyse(&req).await.unwrap();
    let user = server.requests()[0].body["messages"][1]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    let view = user.split_once("## Cluster view").unwrap().1;
    assert!(
        view.contains("node scn-node-not-ready-worker-7: Ready=")
            && view.contains("DiskPressure=True"),
        "{view}"
    );
    assert!(
        view.contains("pods on node scn-node-not-ready-worker-7: 2 pods"),
        "{view}"
    );
    assert!(!view.contains("namespace monitoring"), "{view}");
}

/// The prover the selection stage checks the model's proposal with: the investigator's own
/// reader, catalog and clock; dry runs against the reader when it can take them.
fn prover_for(inv: &Arc<LlmInvestigator>) -> Arc<kubemedic::prove::Prover> {
    Arc::new(kubemedic::prove::Prover::new(
        inv.reader.clone(),
        None,
        inv.catalog.clone(),
        inv.clock.clone(),
    ))
}

/// The model's first prompt names what the alerted workload depends on that shows a problem
/// (the neighbourhood's findings), so it starts from the culprit rather than the symptom: the
/// ledger incident's database Service has no endpoints because its Deployment is scaled to 0.
#[tokio::test]
async fn the_first_prompt_names_a_dependency_that_shows_a_problem() {
    let dir = common::scenarios::dir("dependency-scaled-to-zero");
    let snap = SnapshotCluster::load(&dir.join("snapshot.yaml")).unwrap();
    let now = snap.captured_at().unwrap();
    let alert: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("alert.json")).unwrap()).unwrap();
    let server = ScriptedLlm::start(vec![calls(&[(
        "submit_result",
        rca("inconclusive", json!(0.5)),
    )])])
    .await;
    let inv = investigator(
        &server,
        Setup {
            reader: Some(Arc::new(snap)),
            ..Default::default()
        },
    );
    let req = common::scenarios::request(&alert, now);
    let out = InvestigationStage(inv).run(&req).await.expect("stage");
    let user = server.requests()[0].body["messages"][1]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    let ns = "scn-dependency-scaled-to-zero";
    for needle in [
        format!("What Deployment {ns}/ledger depends on that shows a problem"),
        format!("Service {ns}/ledger-db"),
        "no ready endpoints".to_owned(),
        "Deployment ledger-db is scaled to 0 replicas".to_owned(),
    ] {
        assert!(user.contains(&needle), "{needle:?} missing from {user}");
    }
    let n = out.state.analysis.unwrap().neighbourhood.unwrap();
    assert_eq!(
        n.culprit().map(|d| d.object.as_str()),
        Some(format!("Service {ns}/ledger-db").as_str())
    );
}

/// Issue 28: the model streams. Its text and its tool calls arrive in pieces and are assembled
/// into the same investigation (the arguments whole, the usage from the last chunk); the words
/// reach whoever watches the request as they come, line by line, with the tools it calls.
#[tokio::test]
async fn a_streamed_answer_is_assembled_and_its_words_reach_whoever_watches_the_request() {
    let server = ScriptedLlm::start(vec![
        say_and_call(
            "I will read the previous logs of the crashing pod.\nThen the Deployment.",
            &[
                previous_logs(),
                (
                    "kubectl_describe",
                    json!({"kind": "Deployment", "name": "checkout", "namespace": "shop"}),
                ),
            ],
        ),
        calls(&[("submit_result", rca("actionable", json!(0.9)))]),
        rollback(0.9),
    ])
    .await;
    let live = Arc::new(LiveTokens::new());
    let mut rx = live.subscribe();
    let req = request("KubePodCrashLooping", &[]);
    let setup = Setup {
        live: Some(live.clone()),
        ..Default::default()
    };
    let done = run(investigator(&server, setup), req.clone()).await;
    assert_eq!(done.phase, Phase::Gating, "{:?}", done.reason);

    let reqs = server.requests();
    for r in &reqs {
        assert_eq!(r.body["stream"], true);
        assert_eq!(r.body["stream_options"]["include_usage"], true);
    }
    // The arguments came in fragments of 12 characters; both tools ran with them whole.
    let results = tool_messages(&reqs[1].body);
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(
        results.iter().all(|r| !r.starts_with("Error")),
        "{results:?}"
    );
    assert_eq!(
        reqs[1].body["messages"][2]["content"],
        "I will read the previous logs of the crashing pod.\nThen the Deployment.",
        "the text, assembled, is what the next turn carries"
    );
    let a = done.state.analysis.as_ref().unwrap();
    assert_eq!(a.tool_calls.len(), 2);
    assert_eq!(
        a.llm_calls[0].prompt_tokens, reqs[0].prompt_tokens as u64,
        "the usage is the server's, from the stream's last chunk"
    );
    assert!(a.llm_calls[0].completion_tokens > 0);

    let tokens: Vec<LiveToken> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
    assert!(tokens.iter().all(|t| t.request == req.id), "{tokens:?}");
    let first: Vec<&LiveOutput> = tokens
        .iter()
        .filter(|t| (t.invocation, t.call) == (1, 1))
        .map(|t| &t.output)
        .collect();
    assert_eq!(
        first,
        [
            &LiveOutput::Text("I will read the previous logs of the crashing pod.\n".into()),
            &LiveOutput::ToolCall("kubectl_previous_logs".into()),
            &LiveOutput::ToolCall("kubectl_describe".into()),
            &LiveOutput::Text("Then the Deployment.".into()),
        ],
        "a line as soon as it ends, the tools as they come, the rest when the call ends"
    );
    assert!(
        tokens.iter().any(|t| t.invocation == 2
            && t.output == LiveOutput::ToolCall("submit_result_with_workflow".into())),
        "{tokens:?}"
    );
}

/// A compatible server that ignores `stream` answers one JSON document: read as before (no
/// words to watch). `--llm-no-stream` asks for whole answers.
#[tokio::test]
async fn a_server_that_ignores_stream_is_read_whole_and_no_stream_asks_for_whole_answers() {
    let script = || {
        vec![
            say_and_call("Reading the pod.", &[previous_logs()]),
            calls(&[("submit_result", rca("actionable", json!(0.9)))]),
            rollback(0.9),
        ]
    };
    let server = ScriptedLlm::json_only(script()).await;
    let live = Arc::new(LiveTokens::new());
    let mut rx = live.subscribe();
    let setup = Setup {
        live: Some(live.clone()),
        ..Default::default()
    };
    let done = run(
        investigator(&server, setup),
        request("KubePodCrashLooping", &[]),
    )
    .await;
    assert_eq!(done.phase, Phase::Gating, "{:?}", done.reason);
    let reqs = server.requests();
    assert_eq!(reqs[0].body["stream"], true, "asked to stream");
    let a = done.state.analysis.as_ref().unwrap();
    assert_eq!(a.llm_calls[0].prompt_tokens, reqs[0].prompt_tokens as u64);
    assert!(
        rx.try_recv().is_err(),
        "a whole answer has no words to watch"
    );

    let server = ScriptedLlm::start(script()).await;
    let setup = Setup {
        stream: false,
        ..Default::default()
    };
    let done = run(
        investigator(&server, setup),
        request("KubePodCrashLooping", &[]),
    )
    .await;
    assert_eq!(done.phase, Phase::Gating, "{:?}", done.reason);
    for r in server.requests() {
        assert_eq!(r.body["stream"], false);
        assert!(r.body.get("stream_options").is_none());
    }
}

/// `--llm-timeout-seconds` bounds the whole call, every chunk of a stream included: a stream
/// that stalls half-way is cut, retried, and when every attempt stalls named a timeout.
#[tokio::test]
async fn a_stream_that_stalls_half_way_is_cut_at_the_request_timeout() {
    let server = ScriptedLlm::start(vec![
        Reply::BreakOff("I will read", Duration::from_secs(30)),
        calls(&[("submit_result", rca("actionable", json!(0.9)))]),
        rollback(0.9),
    ])
    .await;
    let setup = Setup {
        timeout: Duration::from_secs(1),
        ..Default::default()
    };
    let started = std::time::Instant::now();
    let done = run(
        investigator(&server, setup),
        request("KubePodCrashLooping", &[]),
    )
    .await;
    assert_eq!(done.phase, Phase::Gating, "{:?}", done.reason);
    assert_eq!(
        server.requests().len(),
        3,
        "the stalled call, its retry, the selection"
    );
    assert!(started.elapsed() < Duration::from_secs(10));

    let server = ScriptedLlm::start(
        (0..4)
            .map(|_| Reply::BreakOff("I will read", Duration::from_secs(30)))
            .collect(),
    )
    .await;
    let (reason, metrics) = reason_without_a_model(&server.base_url, Duration::from_secs(1)).await;
    assert!(
        reason.contains("did not finish its answer within 1 s (--llm-timeout-seconds), 4 attempts"),
        "{reason}"
    );
    assert!(
        metrics.contains("kubemedic_llm_errors_total{kind=\"timeout\"} 1"),
        "{metrics}"
    );
}

/// Issue 28: the model reads a tool's output cut at the tool limit; the audit trail keeps it
/// whole (sanitised, up to 64 KiB) for the chat's `tool_result`, and the request's state keeps
/// the excerpt.
#[tokio::test]
async fn the_trail_keeps_the_whole_tool_output_the_model_reads_it_cut() {
    let server = ScriptedLlm::start(vec![
        calls(&[(
            "kubectl_get_yaml",
            json!({"kind": "Deployment", "name": "checkout", "namespace": "shop"}),
        )]),
        calls(&[("submit_result", rca("actionable", json!(0.9)))]),
    ])
    .await;
    let setup = Setup {
        tool_limits: ToolLimits {
            max_output_chars: 500,
            ..Default::default()
        },
        ..Default::default()
    };
    let inv = investigator(&server, setup);
    let out = InvestigationStage(inv)
        .run(&request("KubePodCrashLooping", &[]))
        .await
        .unwrap();
    let seen = tool_messages(&server.requests()[1].body).remove(0);
    assert!(seen.ends_with("[TRUNCATED]"), "{seen}");
    let payload = &out.events[0].payload;
    let whole = payload["tool_calls"][0]["output"].as_str().unwrap();
    assert!(
        whole.len() > 1_000,
        "longer than the excerpt: {}",
        whole.len()
    );
    assert!(!whole.contains("[TRUNCATED]"));
    assert!(whole.starts_with(seen.trim_end_matches("[TRUNCATED]").trim_end()));
    let state = out.state.analysis.unwrap();
    assert_eq!(
        state.tool_calls[0].output, None,
        "the state keeps the excerpt"
    );
    assert!(state.tool_calls[0].excerpt.is_some());
}
