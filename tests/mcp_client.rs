//! kubemedic as an MCP client: another team's MCP server, written with the official MCP Python
//! SDK (tests/fixtures/mcp/deploys_server.py, streamable HTTP, a token header required), lends
//! its allowlisted read-only tool to invocation 1. The scripted model (a real OpenAI-compatible
//! server over a real socket) calls it through kubemedic's rmcp client; it asks for a tool that
//! is not allowlisted (refused, audited, never sent); the server goes down (the investigation
//! finishes and says so) and comes back (its tools come back). The cluster is the snapshot of a
//! bad rollout, as in tests/llm.rs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

mod common;

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use common::llm::{ScriptedLlm, calls};
use kubemedic::catalog::Catalog;
use kubemedic::clock::{Clock, ManualClock};
use kubemedic::cluster::SnapshotCluster;
use kubemedic::cluster::tools::ToolLimits;
use kubemedic::domain::{AuditDraft, Enrichment, Phase, RemediationRequest, Stage, StageState};
use kubemedic::history::InMemoryHistory;
use kubemedic::investigate::playbooks::Playbooks;
use kubemedic::investigate::{
    InvestigationStage, LlmInvestigator, LlmInvestigatorSettings, SelectionStage,
};
use kubemedic::llm::{OpenAiLlm, OpenAiSettings, Provider, TokenBudget};
use kubemedic::mcp_client::{McpClientSettings, McpHeader, McpServer, RemoteTools};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

const POD: &str = "checkout-7d9c8b6f5-x2k4q";
/// The secret-looking token the server's answer carries.
const DEPLOY_TOKEN: &str = "ghp_R8m2Qx7LpZ4vN1kT9cW3yB6hJ0sD5fG2aE8u";
/// The header the server wants.
const API_KEY: &str = "k3y-for-the-deploys-server";

/// The MCP SDK's Python, installed by scripts/test (scripts/lib/python-tools.sh).
fn mcp_python() -> Option<String> {
    common::component("KUBEMEDIC_MCP_PYTHON", "the MCP Python SDK")
}

/// The deploys team's MCP server, a child process (killed when dropped).
struct DeploysServer {
    child: tokio::process::Child,
    port: u16,
    calls: PathBuf,
}

impl DeploysServer {
    /// Start it on `port` (0: any) logging its calls to `calls`; wait until it listens.
    async fn start(python: &str, port: u16, calls: PathBuf) -> Self {
        // The crypto provider before the first HTTP client: each test may be its own process.
        common::init();
        let script =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp/deploys_server.py");
        let mut child = tokio::process::Command::new(python)
            .arg(script)
            .env("PORT", port.to_string())
            .env("CALLS", &calls)
            .env("TOKEN", API_KEY)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("start the MCP server");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .expect("the MCP server says its port within a minute")
            .unwrap()
            .expect("the MCP server printed its port");
        let port: u16 = line.strip_prefix("PORT ").unwrap().trim().parse().unwrap();
        // It prints the port once the socket listens; wait until it answers HTTP.
        let url = format!("http://127.0.0.1:{port}/mcp");
        let http = reqwest::Client::new();
        for _ in 0..300 {
            if http.get(&url).send().await.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Self { child, port, calls }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// The tools the server was asked to run, in order.
    fn calls(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.calls)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    async fn stop(mut self) -> (u16, PathBuf) {
        self.child.kill().await.unwrap();
        let _ = self.child.wait().await;
        (self.port, self.calls.clone())
    }
}

/// The client as `--mcp-server deploys=URL --mcp-server-header 'deploys=X-Api-Key: …'
/// --mcp-allow-tool deploys/recent_deploys` configures it.
fn remote(url: &str) -> Arc<RemoteTools> {
    Arc::new(
        RemoteTools::new(&McpClientSettings {
            servers: vec![McpServer {
                name: "deploys".into(),
                url: url.into(),
                header: Some(McpHeader::parse(&format!("X-Api-Key: {API_KEY}")).unwrap()),
            }],
            allow: [("deploys".to_owned(), "recent_deploys".to_owned())].into(),
            timeout: Duration::from_secs(10),
            refresh: Duration::from_secs(60),
        })
        .unwrap(),
    )
}

fn investigator(model: &ScriptedLlm, remote: Arc<RemoteTools>) -> Arc<LlmInvestigator> {
    common::init();
    let snap = SnapshotCluster::from_yaml(&common::fixture("clusters/shop-rollout.yaml")).unwrap();
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(snap.captured_at().unwrap()));
    let llm = OpenAiLlm::new(&OpenAiSettings {
        provider: Provider::OpenAi,
        base_url: Some(format!("{}/v1", model.base_url)),
        api_key: Some(kubemedic::secret::Secret::new("sk-test-key")),
        azure_deployment: None,
        azure_api_version: "2024-10-21".into(),
        timeout: Duration::from_secs(20),
        max_retries: 1,
        backoff: Duration::from_millis(20),
        stream: true,
    })
    .unwrap();
    Arc::new(LlmInvestigator {
        llm: Arc::new(llm),
        budget: Arc::new(TokenBudget::new(100_000, 10_000_000)),
        reader: Arc::new(snap),
        clock,
        tool_limits: ToolLimits::default(),
        catalog: kubemedic::live::Live::new(Catalog::builtin().unwrap()),
        playbooks: kubemedic::live::Live::new(Playbooks::builtin().unwrap()),
        history: Arc::new(InMemoryHistory::new(vec![])),
        settings: LlmInvestigatorSettings {
            rca_model: "gpt-4o".into(),
            selection_model: "gpt-4o-mini".into(),
            ..Default::default()
        },
        metrics: None,
        live: None,
        remote: Some(remote),
    })
}

fn request() -> RemediationRequest {
    let labels = [
        ("namespace", "shop"),
        ("pod", POD),
        ("container", "checkout"),
        ("severity", "critical"),
    ];
    let body = common::alert_body(
        "firing",
        "KubePodCrashLooping",
        &labels,
        "fp-1",
        "2026-11-21T11:50:00Z",
    );
    let signal = kubemedic::ingest::alertmanager::parse(body.as_bytes())
        .unwrap()
        .remove(0);
    let now = chrono::DateTime::parse_from_rfc3339("2026-11-21T12:00:00Z")
        .unwrap()
        .to_utc();
    RemediationRequest {
        state: StageState {
            enrichment: Some(Enrichment {
                environment: "staging".into(),
                priority: None,
                business_unit: None,
                risk_tolerance: None,
                pinned: vec![],
                sources: vec![],
            }),
            ..Default::default()
        },
        ..RemediationRequest::for_signal(&signal, Phase::Investigating, now)
    }
}

/// Invocation 1 and 2 as the worker runs them: the request after both, and the audit events
/// they wrote (the trail).
async fn run(inv: Arc<LlmInvestigator>) -> (RemediationRequest, Vec<AuditDraft>) {
    let prover = Arc::new(kubemedic::prove::Prover::new(
        inv.reader.clone(),
        None,
        inv.catalog.clone(),
        inv.clock.clone(),
    ));
    let mut req = request();
    let mut trail = Vec::new();
    for stage in [
        Arc::new(InvestigationStage(inv.clone())) as Arc<dyn Stage>,
        Arc::new(SelectionStage::new(inv.clone(), prover)),
    ] {
        let out = stage.run(&req).await.expect("stage");
        req.phase = out.next;
        req.reason = out.reason;
        req.state = out.state;
        trail.extend(out.events);
    }
    (req, trail)
}

fn submit() -> common::llm::Reply {
    calls(&[(
        "submit_result",
        json!({
            "root_cause_analysis": {
                "summary": "checkout 1.4.2, deployed at 11:40, crashes on start",
                "severity": "critical",
                "contributing_factors": ["the deploy of v1.4.2 changed PAYMENT_API_KEY_V2"],
                "remediation_target": {"kind": "Deployment", "name": "checkout", "namespace": "shop"},
                "investigation_analysis": "The crash began with the deploy."
            },
            "confidence": 0.9, "investigation_outcome": "actionable", "actionable": true
        }),
    )])
}

fn no_workflow() -> common::llm::Reply {
    calls(&[(
        "submit_result_no_workflow",
        json!({"reasoning": "a person should look first"}),
    )])
}

fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect()
}

/// The tool messages of a request to the model.
fn tool_messages(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or("").to_owned())
        .collect()
}

fn kinds(trail: &[AuditDraft]) -> Vec<&str> {
    trail.iter().map(|e| e.kind.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_calls_an_allowlisted_tool_and_reads_its_output_redacted() {
    let Some(python) = mcp_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let server = DeploysServer::start(&python, 0, dir.path().join("calls.jsonl")).await;
    let model = ScriptedLlm::start(vec![
        calls(&[(
            "mcp__deploys__recent_deploys",
            json!({"service": "checkout"}),
        )]),
        submit(),
        no_workflow(),
    ])
    .await;
    let (done, trail) = run(investigator(&model, remote(&server.url()))).await;
    let requests = model.requests();

    // Offered to invocation 1 with the server's description and schema, namespaced; the tool
    // that is not allowlisted is not offered.
    let first = &requests[0].body;
    let names = tool_names(first);
    assert!(
        names.contains(&"mcp__deploys__recent_deploys".to_owned()),
        "{names:?}"
    );
    assert!(
        !names.iter().any(|n| n.contains("restart_service")),
        "{names:?}"
    );
    let offered = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "mcp__deploys__recent_deploys")
        .unwrap();
    let description = offered["function"]["description"].as_str().unwrap();
    assert!(
        description.contains("deploys of a service"),
        "{description}"
    );
    assert!(description.contains("`deploys`"), "{description}");
    assert_eq!(
        offered["function"]["parameters"]["properties"]["service"]["type"],
        "string"
    );

    // The server ran it once, with the model's arguments (so the token header arrived).
    assert_eq!(
        server.calls(),
        vec![json!({"tool": "recent_deploys", "arguments": {"service": "checkout"}})]
    );

    // The model's next turn read the output, sanitised.
    let output = tool_messages(&requests[1].body).join("\n");
    assert!(
        output.contains("v1.4.2 deployed 2026-11-21T11:40:00Z"),
        "{output}"
    );
    assert!(output.contains("[REDACTED]"), "{output}");
    assert!(!output.contains(DEPLOY_TOKEN), "{output}");

    // The call is in the trail (the rca event's tool calls), redacted too.
    let rca = trail.iter().find(|e| e.kind == "rca").unwrap();
    let recorded = rca.payload["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["tool"] == "mcp__deploys__recent_deploys")
        .expect("the remote call is in the trail");
    assert_eq!(recorded["ok"], true);
    assert_eq!(recorded["arguments"]["service"], "checkout");
    assert!(recorded["excerpt"].as_str().unwrap().contains("v1.4.2"));
    let whole_trail = serde_json::to_string(&trail).unwrap();
    assert!(!whole_trail.contains(DEPLOY_TOKEN));
    assert!(
        !whole_trail.contains(API_KEY),
        "the header never reaches the trail"
    );

    // Invocation 2 (workflow selection) gets no remote tools.
    let selection = requests
        .iter()
        .find(|r| tool_names(&r.body).contains(&"submit_result_no_workflow".to_owned()))
        .unwrap();
    assert!(
        !tool_names(&selection.body)
            .iter()
            .any(|n| n.starts_with("mcp__")),
        "{:?}",
        tool_names(&selection.body)
    );
    assert!(done.state.analysis.unwrap().remote_tools.is_empty());
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_that_is_not_allowlisted_is_refused_audited_and_never_sent() {
    let Some(python) = mcp_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let server = DeploysServer::start(&python, 0, dir.path().join("calls.jsonl")).await;
    let model = ScriptedLlm::start(vec![
        calls(&[
            (
                "mcp__deploys__restart_service",
                json!({"service": "checkout"}),
            ),
            ("mcp__payments__refund", json!({})),
        ]),
        submit(),
        no_workflow(),
    ])
    .await;
    let (done, trail) = run(investigator(&model, remote(&server.url()))).await;
    let requests = model.requests();

    // The model is told, call by call.
    let answers = tool_messages(&requests[1].body);
    assert_eq!(answers.len(), 2, "{answers:?}");
    assert!(
        answers[0].contains("`restart_service` of the MCP server `deploys` is not allowlisted"),
        "{answers:?}"
    );
    assert!(
        answers[1].contains("`payments` is not a configured MCP server"),
        "{answers:?}"
    );

    // Audited on the request, one event per refusal.
    let refused: Vec<&AuditDraft> = trail
        .iter()
        .filter(|e| e.kind == "mcp_tool_refused")
        .collect();
    assert_eq!(refused.len(), 2, "{:?}", kinds(&trail));
    assert_eq!(refused[0].payload["remote_tool"]["server"], "deploys");
    assert_eq!(
        refused[0].payload["remote_tool"]["tool"],
        "mcp__deploys__restart_service"
    );
    assert!(
        refused[0].message.contains("not allowlisted"),
        "{}",
        refused[0].message
    );
    let analysis = done.state.analysis.unwrap();
    assert_eq!(analysis.remote_tools.len(), 2);
    let record = analysis
        .tool_calls
        .iter()
        .find(|c| c.tool == "mcp__deploys__restart_service")
        .unwrap();
    assert!(!record.ok);

    // The server never received it (nor anything else).
    assert_eq!(server.calls(), Vec::<Value>::new());
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_is_down_only_loses_its_tools_and_gets_them_back() {
    let Some(python) = mcp_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let server = DeploysServer::start(&python, 0, dir.path().join("calls.jsonl")).await;
    let client = remote(&server.url());
    // Listed while up (as at start-up), then the server stops.
    let before = client.offer().await;
    assert_eq!(before.tools.len(), 1, "{before:?}");
    let (port, calls_file) = server.stop().await;

    let model = ScriptedLlm::start(vec![
        // The model asks anyway (it was not offered the tool).
        calls(&[(
            "mcp__deploys__recent_deploys",
            json!({"service": "checkout"}),
        )]),
        submit(),
        no_workflow(),
    ])
    .await;
    // The cached listing is not trusted after a failure: the session's stream broke. The
    // investigation asks again, finds the server down, and goes on without its tools.
    let (done, trail) = run(investigator(&model, client.clone())).await;
    assert_eq!(
        done.phase,
        Phase::ManualReviewRequired,
        "the investigation finished: {:?}",
        done.reason
    );
    let analysis = done.state.analysis.as_ref().unwrap();
    assert_eq!(
        analysis.rca.root_cause_analysis.summary,
        "checkout 1.4.2, deployed at 11:40, crashes on start"
    );
    let requests = model.requests();
    // Either not offered at all (the listing saw it down) or withdrawn after the failed call:
    // in both cases no later turn offers it, the investigation says so and audits it.
    let last = &requests[1].body;
    assert!(
        !tool_names(last).iter().any(|n| n.starts_with("mcp__")),
        "{:?}",
        tool_names(last)
    );
    let said = analysis.warnings.join("\n");
    assert!(said.contains("MCP server `deploys`"), "{said}");
    let down: Vec<&AuditDraft> = trail
        .iter()
        .filter(|e| e.kind == "mcp_server_unavailable")
        .collect();
    assert!(!down.is_empty(), "{:?}", kinds(&trail));
    assert!(down[0].message.contains("deploys"), "{}", down[0].message);
    assert!(!serde_json::to_string(&trail).unwrap().contains(API_KEY));

    // The server comes back on the same address: the next investigation gets its tools back.
    let server = DeploysServer::start(&python, port, calls_file).await;
    let model = ScriptedLlm::start(vec![
        calls(&[(
            "mcp__deploys__recent_deploys",
            json!({"service": "checkout"}),
        )]),
        submit(),
        no_workflow(),
    ])
    .await;
    let (done, trail) = run(investigator(&model, client)).await;
    let requests = model.requests();
    assert!(
        tool_names(&requests[0].body).contains(&"mcp__deploys__recent_deploys".to_owned()),
        "{:?}",
        tool_names(&requests[0].body)
    );
    let output = tool_messages(&requests[1].body).join("\n");
    assert!(output.contains("v1.4.2 deployed"), "{output}");
    assert!(done.state.analysis.unwrap().remote_tools.is_empty());
    assert!(!kinds(&trail).contains(&"mcp_server_unavailable"));
    assert_eq!(server.calls().len(), 1);
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_was_never_up_is_named_and_the_investigation_goes_on() {
    common::init();
    // A port nobody listens on.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let model = ScriptedLlm::start(vec![submit(), no_workflow()]).await;
    let (done, trail) = run(investigator(
        &model,
        remote(&format!("http://127.0.0.1:{port}/mcp")),
    ))
    .await;
    assert_eq!(done.phase, Phase::ManualReviewRequired, "{:?}", done.reason);
    let tools = tool_names(&model.requests()[0].body);
    assert!(tools.contains(&"kubectl_describe".to_owned()));
    assert!(!tools.iter().any(|n| n.starts_with("mcp__")), "{tools:?}");
    let analysis = done.state.analysis.unwrap();
    let said = analysis.warnings.join("\n");
    assert!(
        said.contains("the MCP server `deploys` is unavailable")
            && said.contains("its tools were not offered"),
        "{said}"
    );
    assert!(kinds(&trail).contains(&"mcp_server_unavailable"));
}

/// Through a running daemon (`kubemedic serve`, the real binary, configured with its flags) on
/// the real API server: an Alertmanager alert about a staged bad rollout is investigated by the
/// scripted model, which calls the allowlisted remote tool and one that is not allowlisted. The
/// allowed call's output reached the model redacted; the refused one is audited
/// `mcp_tool_refused` on the request and never reached the server; the request finishes. Each
/// remote call is an `execute_tool mcp__deploys__…` span of the request's trace, inside the
/// investigation, with the GenAI tool attributes — the refused one an error — and no span holds
/// the server's token or its header.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_running_daemon_calls_the_allowlisted_remote_tool_and_refuses_the_other() {
    use common::otlp::{Daemon, Receiver, post_alert, strings};
    use std::collections::HashMap;
    common::init();
    let Some(python) = mcp_python() else {
        return;
    };
    let Some(receiver) = Receiver::start() else {
        return;
    };
    let Some(database_url) = common::fresh_postgres().await else {
        return;
    };
    let Some(k) = common::kube::Kube::new("mcpd").await else {
        return;
    };
    let staged = common::scenarios::staged_in("crashloop-rollout", &[&k])
        .await
        .remove(0)
        .alert;
    let dir = tempfile::tempdir().unwrap();
    let server = DeploysServer::start(&python, 0, dir.path().join("calls.jsonl")).await;
    let target = json!({"kind": "Deployment", "name": "checkout", "namespace": k.ns});
    let model = ScriptedLlm::start(vec![
        calls(&[
            (
                "mcp__deploys__recent_deploys",
                json!({"service": "checkout"}),
            ),
            (
                "mcp__deploys__restart_service",
                json!({"service": "checkout"}),
            ),
        ]),
        calls(&[(
            "submit_result",
            json!({
                "root_cause_analysis": {
                    "summary": "checkout 1.4.2, deployed at 11:40, crashes on start",
                    "severity": "critical",
                    "contributing_factors": ["the deploy of v1.4.2 changed PAYMENT_API_KEY_V2"],
                    "remediation_target": target,
                    "investigation_analysis": "The crash began with the deploy."
                },
                "confidence": 0.9, "investigation_outcome": "actionable", "actionable": true
            }),
        )]),
        no_workflow(),
    ])
    .await;
    let policies = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("policies");
    let args: Vec<String> = [
        "--kubeconfig",
        k.kubeconfig.to_str().unwrap(),
        "--policy-dir",
        policies.to_str().unwrap(),
        "--llm",
        "openai",
        "--llm-base-url",
        &format!("{}/v1", model.base_url),
        "--llm-api-key",
        "sk-mcp-daemon-key",
        "--llm-model",
        "gpt-4o",
        "--mcp-server",
        &format!("deploys={}", server.url()),
        "--mcp-server-header",
        &format!("deploys=X-Api-Key: {API_KEY}"),
        "--mcp-allow-tool",
        "deploys/recent_deploys",
    ]
    .map(str::to_owned)
    .to_vec();
    let mut d = Daemon::start("replica-mcp", &database_url, &receiver.endpoint, &args).await;
    let answer = post_alert(&d.base, &staged, None).await;
    let id = answer["outcomes"][0]["request_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let done = d
        .until(
            &format!("/api/v1/requests/{id}"),
            120,
            common::incident::is_terminal,
        )
        .await;
    let trace_id = done["trace_id"].as_str().unwrap().to_owned();

    // The model read the allowed tool's answer, redacted, and the refusal.
    let requests = model.requests();
    assert_eq!(requests.len(), 3, "three model calls");
    let offered = tool_names(&requests[0].body);
    assert!(
        offered.contains(&"mcp__deploys__recent_deploys".to_owned()),
        "{offered:?}"
    );
    assert!(
        !offered.contains(&"mcp__deploys__restart_service".to_owned()),
        "{offered:?}"
    );
    let answers = tool_messages(&requests[1].body);
    assert_eq!(answers.len(), 2, "{answers:?}");
    assert!(answers[0].contains("v1.4.2 deployed"), "{answers:?}");
    assert!(!answers[0].contains(DEPLOY_TOKEN), "{answers:?}");
    assert!(answers[0].contains("[REDACTED]"), "{answers:?}");
    assert!(
        answers[1].contains("`restart_service` of the MCP server `deploys` is not allowlisted"),
        "{answers:?}"
    );
    // The server ran the allowed tool only.
    assert_eq!(
        server.calls(),
        vec![json!({"tool": "recent_deploys", "arguments": {"service": "checkout"}})]
    );
    // The trail: the refusal is audited on the request; nothing of the token is in it.
    let timeline = done["timeline"].as_array().unwrap();
    let refused: Vec<&Value> = timeline
        .iter()
        .filter(|e| e["kind"] == "mcp_tool_refused")
        .collect();
    assert_eq!(refused.len(), 1, "{timeline:#?}");
    assert_eq!(
        refused[0]["payload"]["remote_tool"]["tool"], "mcp__deploys__restart_service",
        "{:#}",
        refused[0]
    );
    let trail_text = done.to_string();
    assert!(
        !trail_text.contains(DEPLOY_TOKEN),
        "the token is in the request"
    );
    assert!(
        !trail_text.contains(API_KEY),
        "the header is in the request"
    );
    d.stop();

    // The remote calls in the request's trace, inside the investigation.
    let all = receiver.spans();
    let spans: Vec<&Value> = all
        .iter()
        .filter(|s| s["trace_id"] == trace_id.as_str())
        .collect();
    let ids: HashMap<&str, &Value> = spans
        .iter()
        .map(|s| (s["span_id"].as_str().unwrap(), *s))
        .collect();
    let stage_of = |s: &Value| -> String {
        let mut up = s;
        loop {
            let parent = up["parent_span_id"].as_str().unwrap();
            up = ids
                .get(parent)
                .unwrap_or_else(|| panic!("{} is not inside a stage: {s:#}", s["name"]));
            if up["name"].as_str().unwrap().starts_with("stage ") {
                return up["name"].as_str().unwrap().to_owned();
            }
        }
    };
    let called = spans
        .iter()
        .find(|s| s["name"] == "execute_tool mcp__deploys__recent_deploys")
        .unwrap_or_else(|| panic!("no span of the allowed call: {spans:#?}"));
    let a = &called["attributes"];
    assert_eq!(a["gen_ai.operation.name"], "execute_tool", "{called:#}");
    assert_eq!(
        a["gen_ai.tool.name"], "mcp__deploys__recent_deploys",
        "{called:#}"
    );
    assert_eq!(a["kubemedic.mcp.server"], "deploys", "{called:#}");
    assert_eq!(a["kubemedic.tool.ok"], true, "{called:#}");
    assert_ne!(called["status"], 2, "{called:#}");
    assert_eq!(stage_of(called), "stage investigate");
    let refused = spans
        .iter()
        .find(|s| s["name"] == "execute_tool mcp__deploys__restart_service")
        .unwrap_or_else(|| panic!("no span of the refused call: {spans:#?}"));
    assert_eq!(refused["status"], 2, "an error: {refused:#}");
    assert_eq!(
        refused["attributes"]["error.type"], "refused",
        "{refused:#}"
    );
    assert_eq!(
        refused["attributes"]["kubemedic.tool.ok"], false,
        "{refused:#}"
    );
    assert_eq!(stage_of(refused), "stage investigate");
    for s in &all {
        for text in strings(s) {
            for never in [DEPLOY_TOKEN, API_KEY, "sk-mcp-daemon-key"] {
                assert!(
                    !text.contains(never),
                    "`{never}` in span {}: {s:#}",
                    s["name"]
                );
            }
        }
    }
    drop(server);
}
