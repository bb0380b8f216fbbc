//! Tokens and requests per investigation, without and with the pre-fetched cluster view in
//! invocation 1's prompt (issue 12, item 4). Figures go in docs/benchmarks.md ("Investigation:
//! tokens and requests per investigation").
//!
//!   scripts/bench-investigate      (cargo bench --profile dev --bench investigate)
//!   BENCH_SHOW_VIEW=1 scripts/bench-investigate    also prints each first prompt with its view
//!
//! The model is the scripted OpenAI-compatible server of the tests (tests/common/llm.rs: a real
//! socket, the real async-openai client), which counts every request's prompt with the o200k
//! tokenizer and every answer's completion the same way; the cluster is a captured scenario
//! (tests/scenarios/*/snapshot.yaml) behind `SnapshotCluster`. Both invocations run as the
//! worker runs them.
//!
//! For each scenario the model is scripted twice with the same investigation (the same plan,
//! describe/logs/context calls, conclusion and workflow selection):
//!
//! - **without the view**: the model must first make the listing calls the view makes
//!   unnecessary — `kubectl_get` of the namespace's pods and `kubectl_events` of the namespace
//!   (for a Node: the node's events and the pods of every namespace). When the alert names the
//!   pod or node, they go in the first turn beside the other calls (no extra request); when it
//!   does not (a Deployment alert, the pod to describe has to be found), they are a turn of
//!   their own, since the describe depends on them.
//! - **with the view**: the same script without those calls.
//!
//! The counts are deterministic (a script, a snapshot, a tokenizer), so the profile does not
//! matter: the script runs a debug build. A run fails if an investigation does not end as its
//! scenario's expected.json says, so the figures are of investigations that worked.
//!
//! A second part counts the API calls one investigation makes (issue 26, item 5: at most 30):
//! every `get`, `list`, `logs` and dry-run write that reaches the cluster, through both
//! invocations and the proof, for the offline investigator on the demo's six incidents and on
//! one of them in a namespace of 500 objects, and for the scripted model on the scenarios
//! above. It fails if one makes more than 30.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench code: a failed assumption fails the run

#[path = "../tests/common/llm.rs"]
mod llm;

use std::sync::Arc;
use std::time::Duration;

use kubemedic::catalog::Catalog;
use kubemedic::clock::{Clock, ManualClock};
use kubemedic::cluster::tools::ToolLimits;
use kubemedic::cluster::{ClusterReader, ListQuery, SnapshotCluster};
use kubemedic::domain::{Phase, RemediationRequest, Stage};
use kubemedic::history::InMemoryHistory;
use kubemedic::investigate::playbooks::Playbooks;
use kubemedic::investigate::{
    InvestigationStage, LlmInvestigator, LlmInvestigatorSettings, SelectionStage,
};
use kubemedic::llm::{OpenAiLlm, OpenAiSettings, Provider, TokenBudget};
use llm::{Reply, ScriptedLlm, calls, say_and_call};
use serde_json::{Value, json};

const SCENARIOS: &[&str] = &[
    "crashloop-rollout",
    "oomkilled",
    "pending-insufficient-resources",
    "imagepull-rollout",
    "node-not-ready",
];

/// A tool call the scripted model makes, and the plan step it states for it.
struct Call {
    tool: &'static str,
    args: Value,
    step: String,
}

fn call(tool: &'static str, args: Value, step: impl Into<String>) -> Call {
    Call {
        tool,
        args,
        step: step.into(),
    }
}

/// One scenario's scripted investigation.
struct Case {
    name: &'static str,
    snapshot: Arc<SnapshotCluster>,
    request: RemediationRequest,
    expected: Value,
    /// The listing calls the view makes unnecessary.
    listing: Vec<Call>,
    /// Whether the first turn's calls depend on the listing (the alert names no pod).
    listing_first: bool,
    /// The turns both scripts make, in order.
    turns: Vec<Vec<Call>>,
    rca: Value,
}

fn dir(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/scenarios")
        .join(name)
}

async fn case(name: &'static str) -> Case {
    let snapshot = Arc::new(SnapshotCluster::load(&dir(name).join("snapshot.yaml")).unwrap());
    let alert: Value =
        serde_json::from_str(&std::fs::read_to_string(dir(name).join("alert.json")).unwrap())
            .unwrap();
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(dir(name).join("expected.json")).unwrap())
            .unwrap();
    let signal = kubemedic::ingest::alertmanager::parse(alert.to_string().as_bytes())
        .unwrap()
        .remove(0);
    let request = RemediationRequest::for_signal(
        &signal,
        Phase::Investigating,
        snapshot.captured_at().unwrap(),
    );
    let label = |k: &str| signal.labels.get(k).cloned().unwrap_or_default();
    let ns = label("namespace");
    let target = &expected["target"];
    let kind = target["kind"].as_str().unwrap();
    let mut target_ref = json!({"kind": kind, "name": target["name"].as_str().unwrap_or("")});
    let namespace_listing = || {
        vec![
            call(
                "kubectl_get",
                json!({"kind": "Pod", "namespace": ns}),
                format!("List the pods of {ns} and their states"),
            ),
            call(
                "kubectl_events",
                json!({"namespace": ns}),
                format!("Read the Warning events of {ns}"),
            ),
        ]
    };
    let (listing, listing_first, turns) = match name {
        "crashloop-rollout" => {
            let (pod, container) = (label("pod"), label("container"));
            (
                namespace_listing(),
                false,
                vec![
                    vec![
                        call(
                            "kubectl_describe",
                            json!({"kind": "Pod", "name": pod, "namespace": ns}),
                            "Describe the crashing pod: state, exit code, restarts, events",
                        ),
                        call(
                            "kubectl_previous_logs",
                            json!({"name": pod, "namespace": ns, "container": container}),
                            "Read the crashed container's previous logs",
                        ),
                        call(
                            "kubectl_get",
                            json!({"kind": "ReplicaSet", "namespace": ns}),
                            "Compare the Deployment's ReplicaSets (a new revision failing?)",
                        ),
                    ],
                    vec![call(
                        "get_namespaced_resource_context",
                        json!({"kind": "Pod", "name": pod, "namespace": ns}),
                        "Resolve the root owner, its spec hash and history",
                    )],
                ],
            )
        }
        "oomkilled" => {
            let (pod, container) = (label("pod"), label("container"));
            (
                namespace_listing(),
                false,
                vec![
                    vec![
                        call(
                            "kubectl_describe",
                            json!({"kind": "Pod", "name": pod, "namespace": ns}),
                            "Describe the pod: last state, exit code 137, memory limit",
                        ),
                        call(
                            "kubectl_previous_logs",
                            json!({"name": pod, "namespace": ns, "container": container}),
                            "Read the killed container's previous logs",
                        ),
                        call(
                            "kubectl_top_pods",
                            json!({"namespace": ns}),
                            "Compare memory usage with the limit",
                        ),
                    ],
                    vec![call(
                        "get_namespaced_resource_context",
                        json!({"kind": "Pod", "name": pod, "namespace": ns}),
                        "Resolve the root owner, its spec hash and history",
                    )],
                ],
            )
        }
        "imagepull-rollout" => {
            let pod = label("pod");
            (
                namespace_listing(),
                false,
                vec![
                    vec![
                        call(
                            "kubectl_describe",
                            json!({"kind": "Pod", "name": pod, "namespace": ns}),
                            "Describe the pod: the image and the pull error",
                        ),
                        call(
                            "kubectl_get",
                            json!({"kind": "ReplicaSet", "namespace": ns}),
                            "Compare the ReplicaSets: which image the previous revision ran",
                        ),
                    ],
                    vec![call(
                        "get_namespaced_resource_context",
                        json!({"kind": "Pod", "name": pod, "namespace": ns}),
                        "Resolve the root owner, its spec hash and history",
                    )],
                ],
            )
        }
        "pending-insufficient-resources" => {
            // The alert names the Deployment; the pod to describe is found by listing (without
            // the view) or read from the view (with it).
            let pods = snapshot
                .list(
                    &snapshot.resource("Pod").await.unwrap(),
                    Some(&ns),
                    &ListQuery::default(),
                )
                .await
                .unwrap();
            let pending = pods
                .iter()
                .find(|p| p["status"]["phase"] == "Pending")
                .map(|p| p["metadata"]["name"].as_str().unwrap().to_owned())
                .expect("a pending pod in the scenario");
            let deployment = label("deployment");
            (
                namespace_listing(),
                true,
                vec![
                    vec![
                        call(
                            "kubectl_describe",
                            json!({"kind": "Pod", "name": pending, "namespace": ns}),
                            "Describe a pending pod: why the scheduler refuses it",
                        ),
                        call(
                            "kubectl_get",
                            json!({"kind": "Node"}),
                            "Check the nodes' capacity and taints",
                        ),
                    ],
                    vec![call(
                        "get_namespaced_resource_context",
                        json!({"kind": "Deployment", "name": deployment, "namespace": ns}),
                        "Resolve the Deployment's context and history",
                    )],
                ],
            )
        }
        "node-not-ready" => {
            let node = label("node");
            target_ref["name"] = json!(node);
            (
                vec![
                    call(
                        "kubectl_events",
                        json!({"node": node}),
                        "Read the node's events",
                    ),
                    call(
                        "kubectl_get",
                        json!({"kind": "Pod"}),
                        "List the pods and find those on the node",
                    ),
                ],
                false,
                vec![
                    vec![call(
                        "kubectl_describe",
                        json!({"kind": "Node", "name": node}),
                        "Describe the node: conditions, pressure, taints",
                    )],
                    vec![call(
                        "get_cluster_resource_context",
                        json!({"kind": "Node", "name": node}),
                        "Resolve the node's context and history",
                    )],
                ],
            )
        }
        other => panic!("no script for {other}"),
    };
    if kind != "Node" {
        target_ref["namespace"] = json!(ns);
    }
    let outcome = expected["investigation_outcome"].as_str().unwrap();
    let rca = json!({
        "root_cause_analysis": {
            "summary": format!("{name}: root cause found in the cluster's evidence"),
            "severity": "high",
            "contributing_factors": [format!("scripted finding for {name}")],
            "remediation_target": target_ref,
            "investigation_analysis": "Scripted for the benchmark."
        },
        "confidence": 0.9,
        "investigation_outcome": outcome,
        "actionable": outcome == "actionable"
    });
    Case {
        name,
        snapshot,
        request,
        expected,
        listing,
        listing_first,
        turns,
        rca,
    }
}

/// Invocation 1's turns (the plan stated in the first), the conclusion, then the selection.
fn script(c: &Case, with_view: bool) -> Vec<Reply> {
    let mut turns: Vec<&[Call]> = Vec::new();
    let mut first: Vec<&Call> = Vec::new();
    if !with_view {
        if c.listing_first {
            turns.push(&c.listing);
        } else {
            first.extend(&c.listing);
        }
    }
    let mut turns: Vec<Vec<&Call>> = turns.into_iter().map(|t| t.iter().collect()).collect();
    for (i, t) in c.turns.iter().enumerate() {
        let mut calls: Vec<&Call> = t.iter().collect();
        if i == 0 {
            calls.splice(0..0, first.iter().copied());
        }
        turns.push(calls);
    }
    let plan: String = turns
        .iter()
        .flatten()
        .map(|c| format!("- {}\n", c.step))
        .collect();
    let mut replies: Vec<Reply> = turns
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let list: Vec<(&str, Value)> = t.iter().map(|c| (c.tool, c.args.clone())).collect();
            if i == 0 {
                say_and_call(&format!("INVESTIGATION_PLAN:\n{plan}"), &list)
            } else {
                calls(&list)
            }
        })
        .collect();
    replies.push(calls(&[("submit_result", c.rca.clone())]));
    // Invocation 2: the same whatever the view.
    replies.push(calls(&[("list_available_actions", json!({}))]));
    match c.expected["workflow_id"].as_str() {
        Some(id) => {
            let action = c.expected["action_type"].as_str().unwrap();
            replies.push(calls(&[
                ("list_workflows", json!({"action_type": action})),
                ("get_workflow", json!({"workflow_id": id})),
            ]));
            let params = c.expected.get("parameters").cloned().unwrap_or(json!({}));
            replies.push(calls(&[(
                "submit_result_with_workflow",
                json!({"selected_workflow": {"workflow_id": id, "confidence": 0.9, "rationale": "scripted", "parameters": params}}),
            )]));
        }
        None => replies.push(calls(&[(
            "submit_result_no_workflow",
            json!({"reasoning": "the fix needs capacity a human must add", "needs_human_review": true, "human_review_reason": "capacity"}),
        )])),
    }
    replies
}

/// What one investigation cost.
#[derive(Default, Clone, Copy)]
struct Cost {
    requests: usize,
    requests_rca: usize,
    prompt: u64,
    completion: u64,
    tool_calls: usize,
    view_chars: usize,
    /// Tokens of invocation 1's system prompt (paid on each of its requests).
    system_tokens: usize,
    /// Calls that reached the cluster (gets, lists, logs, dry runs).
    api_calls: usize,
}

impl std::ops::AddAssign for Cost {
    fn add_assign(&mut self, o: Self) {
        self.requests += o.requests;
        self.requests_rca += o.requests_rca;
        self.prompt += o.prompt;
        self.completion += o.completion;
        self.tool_calls += o.tool_calls;
        self.view_chars += o.view_chars;
        self.api_calls += o.api_calls;
        self.system_tokens = o.system_tokens;
    }
}

async fn measure(c: &Case, with_view: bool) -> Cost {
    let server = ScriptedLlm::start(script(c, with_view)).await;
    let counting = Counting::new(c.snapshot.clone());
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(c.snapshot.captured_at().unwrap()));
    let llm = OpenAiLlm::new(&OpenAiSettings {
        provider: Provider::OpenAi,
        base_url: Some(format!("{}/v1", server.base_url)),
        api_key: Some(kubemedic::secret::Secret::new("sk-bench")),
        azure_deployment: None,
        azure_api_version: "2024-10-21".into(),
        timeout: Duration::from_secs(30),
        max_retries: 0,
        backoff: Duration::from_millis(10),
        stream: true,
    })
    .unwrap();
    let inv = Arc::new(LlmInvestigator {
        llm: Arc::new(llm),
        budget: Arc::new(TokenBudget::new(1_000_000, 10_000_000)),
        reader: counting.clone(),
        clock,
        tool_limits: ToolLimits::default(),
        catalog: kubemedic::live::Live::new(Catalog::builtin().unwrap()),
        remote: None,
        playbooks: kubemedic::live::Live::new(Playbooks::builtin().unwrap()),
        history: Arc::new(InMemoryHistory::default()),
        settings: LlmInvestigatorSettings {
            rca_model: "gpt-4o".into(),
            selection_model: "gpt-4o-mini".into(),
            cluster_view: with_view,
            ..Default::default()
        },
        metrics: None,
        live: None,
    });
    let mut req = c.request.clone();
    for stage in [
        Arc::new(InvestigationStage(inv.clone())) as Arc<dyn Stage>,
        Arc::new(SelectionStage::new(inv.clone(), prover_for(&inv))),
    ] {
        let out = stage.run(&req).await.expect("stage");
        req.phase = out.next;
        req.reason = out.reason;
        req.state = out.state;
    }
    // The investigation worked as the scenario expects, with every call answered.
    let variant = if with_view {
        "with view"
    } else {
        "without view"
    };
    let a = req.state.analysis.as_ref().unwrap();
    let sel = req.state.selection.as_ref().unwrap();
    assert_eq!(
        json!(req.phase),
        c.expected["phase"],
        "{} {variant}: {:?}",
        c.name,
        req.reason
    );
    assert_eq!(
        json!(sel.outcome.kind),
        c.expected["outcome"],
        "{} {variant}",
        c.name
    );
    assert!(
        a.tool_calls.iter().all(|t| t.ok),
        "{} {variant}: {:?}",
        c.name,
        a.tool_calls
    );
    let plan = a.plan.as_ref().expect("the plan was parsed");
    assert!(plan.steps.iter().all(|s| s.done));
    assert_eq!(
        server.remaining(),
        0,
        "{} {variant}: script left over",
        c.name
    );
    let requests = server.requests();
    let first_user = requests[0].body["messages"][1]["content"]
        .as_str()
        .unwrap_or("");
    if with_view && std::env::var_os("BENCH_SHOW_VIEW").is_some() {
        eprintln!("--- {}: the first prompt\n{first_user}\n", c.name);
    }
    Cost {
        requests: requests.len(),
        requests_rca: requests
            .iter()
            .filter(|r| r.body["model"] == "gpt-4o")
            .count(),
        prompt: a.usage.prompt_tokens + sel.usage.prompt_tokens,
        completion: a.usage.completion_tokens + sel.usage.completion_tokens,
        tool_calls: a.tool_calls.len(),
        view_chars: first_user
            .split_once("## Cluster view")
            .map_or(0, |(_, v)| v.len()),
        system_tokens: llm::prompt_tokens(&json!({"messages": [requests[0].body["messages"][0]]})),
        api_calls: counting.calls(),
    }
}

fn row(name: &str, variant: &str, c: Cost) {
    println!(
        "| {name} | {variant} | {} ({} + {}) | {} | {} | {} | {} | {} |",
        c.requests,
        c.requests_rca,
        c.requests - c.requests_rca,
        c.prompt,
        c.completion,
        c.prompt + c.completion,
        c.tool_calls,
        c.view_chars
    );
}

fn change(before: u64, after: u64) -> String {
    let d = after as f64 - before as f64;
    format!("{:+.0} ({:+.1} %)", d, 100.0 * d / before as f64)
}

/// A cluster that counts every call reaching it (discovery aside: a real client caches it).
struct Counting {
    inner: Arc<SnapshotCluster>,
    calls: std::sync::atomic::AtomicUsize,
}

impl Counting {
    fn new(inner: Arc<SnapshotCluster>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            calls: std::sync::atomic::AtomicUsize::new(0),
        })
    }
    fn count(&self) {
        self.calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    fn calls(&self) -> usize {
        self.calls.load(std::sync::atomic::Ordering::Relaxed)
    }
}

#[async_trait::async_trait]
impl ClusterReader for Counting {
    async fn resource(
        &self,
        kind: &str,
    ) -> kubemedic::cluster::Result<kubemedic::cluster::ResourceInfo> {
        self.inner.resource(kind).await
    }
    async fn get(
        &self,
        res: &kubemedic::cluster::ResourceInfo,
        namespace: Option<&str>,
        name: &str,
    ) -> kubemedic::cluster::Result<Value> {
        self.count();
        self.inner.get(res, namespace, name).await
    }
    async fn list(
        &self,
        res: &kubemedic::cluster::ResourceInfo,
        namespace: Option<&str>,
        query: &ListQuery,
    ) -> kubemedic::cluster::Result<Vec<Value>> {
        self.count();
        self.inner.list(res, namespace, query).await
    }
    async fn logs(
        &self,
        namespace: &str,
        pod: &str,
        query: &kubemedic::cluster::LogQuery,
    ) -> kubemedic::cluster::Result<String> {
        self.count();
        self.inner.logs(namespace, pod, query).await
    }
    async fn server_version(&self) -> kubemedic::cluster::Result<String> {
        self.inner.server_version().await
    }
}

#[async_trait::async_trait]
impl kubemedic::cluster::ClusterWriter for Counting {
    async fn patch(
        &self,
        res: &kubemedic::cluster::ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        patch_type: kubemedic::cluster::PatchType,
        patch: &Value,
        dry_run: bool,
    ) -> kubemedic::cluster::Result<Value> {
        self.count();
        self.inner
            .patch(res, namespace, name, patch_type, patch, dry_run)
            .await
    }
    async fn replace(
        &self,
        res: &kubemedic::cluster::ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        obj: &Value,
        dry_run: bool,
    ) -> kubemedic::cluster::Result<Value> {
        self.count();
        self.inner.replace(res, namespace, name, obj, dry_run).await
    }
    async fn create(
        &self,
        res: &kubemedic::cluster::ResourceInfo,
        namespace: Option<&str>,
        obj: &Value,
        dry_run: bool,
    ) -> kubemedic::cluster::Result<Value> {
        self.count();
        self.inner.create(res, namespace, obj, dry_run).await
    }
    async fn delete(
        &self,
        res: &kubemedic::cluster::ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        dry_run: bool,
    ) -> kubemedic::cluster::Result<()> {
        self.count();
        self.inner.delete(res, namespace, name, dry_run).await
    }
    async fn evict(
        &self,
        namespace: &str,
        pod: &str,
        dry_run: bool,
    ) -> kubemedic::cluster::Result<()> {
        self.count();
        self.inner.evict(namespace, pod, dry_run).await
    }
}

/// The demo's incidents (src/demo: the scenarios it is made of).
const DEMO: &[&str] = &[
    "crashloop-rollout",
    "oomkilled",
    "pvc-fill-predicted",
    "problem-resolved",
    "dependency-scaled-to-zero",
    "create-container-config-error",
];

/// Most API calls one investigation may make.
const MAX_API_CALLS: usize = 30;

/// `snapshot` with `n` more objects in namespace `ns`: healthy Deployments with their
/// ReplicaSets and pods, Services, ConfigMaps and Normal events, as a busy namespace has.
fn crowded(snapshot: &str, ns: &str, n: usize) -> String {
    let mut out = snapshot.to_owned();
    let mut i = 0;
    while i < n {
        let k = i / 10;
        let docs = [
            format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: filler-{k}, namespace: {ns}, uid: f-d-{k}, creationTimestamp: \"2026-11-01T00:00:00Z\", labels: {{app: filler-{k}}}, annotations: {{deployment.kubernetes.io/revision: \"1\"}}}}\nspec: {{replicas: 3, selector: {{matchLabels: {{app: filler-{k}}}}}, template: {{metadata: {{labels: {{app: filler-{k}}}}}, spec: {{containers: [{{name: app, image: \"shop/filler:1\"}}]}}}}}}\nstatus: {{replicas: 3, readyReplicas: 3, availableReplicas: 3, updatedReplicas: 3}}\n"
            ),
            format!(
                "apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {{name: filler-{k}-abc, namespace: {ns}, uid: f-rs-{k}, creationTimestamp: \"2026-11-01T00:00:00Z\", labels: {{app: filler-{k}, pod-template-hash: abc}}, annotations: {{deployment.kubernetes.io/revision: \"1\"}}, ownerReferences: [{{apiVersion: apps/v1, kind: Deployment, name: filler-{k}, uid: f-d-{k}, controller: true}}]}}\nspec: {{replicas: 3, selector: {{matchLabels: {{app: filler-{k}, pod-template-hash: abc}}}}, template: {{metadata: {{labels: {{app: filler-{k}, pod-template-hash: abc}}}}, spec: {{containers: [{{name: app, image: \"shop/filler:1\"}}]}}}}}}\nstatus: {{replicas: 3, readyReplicas: 3, availableReplicas: 3}}\n"
            ),
            format!(
                "apiVersion: v1\nkind: Service\nmetadata: {{name: filler-{k}, namespace: {ns}, creationTimestamp: \"2026-11-01T00:00:00Z\"}}\nspec: {{selector: {{app: filler-{k}}}, ports: [{{port: 80, targetPort: 8080}}]}}\n"
            ),
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: filler-{k}, namespace: {ns}, creationTimestamp: \"2026-11-01T00:00:00Z\"}}\ndata: {{a: b}}\n"
            ),
        ];
        for d in docs {
            out.push_str("---\n");
            out.push_str(&d);
            i += 1;
        }
        for p in 0..3 {
            out.push_str(&format!("---\napiVersion: v1\nkind: Pod\nmetadata: {{name: filler-{k}-abc-{p}, namespace: {ns}, creationTimestamp: \"2026-11-01T00:00:00Z\", labels: {{app: filler-{k}, pod-template-hash: abc}}, ownerReferences: [{{apiVersion: apps/v1, kind: ReplicaSet, name: filler-{k}-abc, uid: f-rs-{k}, controller: true}}]}}\nspec: {{nodeName: worker-1, containers: [{{name: app, image: \"shop/filler:1\"}}]}}\nstatus: {{phase: Running, conditions: [{{type: Ready, status: \"True\"}}], containerStatuses: [{{name: app, ready: true, restartCount: 0, image: \"shop/filler:1\", state: {{running: {{startedAt: \"2026-11-01T00:00:10Z\"}}}}}}]}}\n"));
            i += 1;
        }
    }
    out
}

/// The API calls of one offline investigation (both invocations and the proof).
async fn offline_calls(snapshot: Arc<SnapshotCluster>, alert: &Value) -> (usize, Value) {
    use kubemedic::investigate::Investigator;
    let counting = Counting::new(snapshot.clone());
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(snapshot.captured_at().unwrap()));
    let catalog = kubemedic::live::Live::new(Catalog::builtin().unwrap());
    let inv = Arc::new(kubemedic::investigate::offline::OfflineInvestigator {
        reader: counting.clone(),
        clock: clock.clone(),
        tool_limits: ToolLimits::default(),
        catalog: catalog.clone(),
        playbooks: kubemedic::live::Live::new(Playbooks::builtin().unwrap()),
        history: Arc::new(InMemoryHistory::default()),
    });
    let prover = Arc::new(kubemedic::prove::Prover::new(
        counting.clone(),
        Some(counting.clone()),
        catalog,
        clock.clone(),
    ));
    let signal = kubemedic::ingest::alertmanager::parse(alert.to_string().as_bytes())
        .unwrap()
        .remove(0);
    let mut req = RemediationRequest::for_signal(&signal, Phase::Investigating, clock.now());
    let analysis = inv.analyse(&req).await.unwrap();
    req.state.analysis = Some(analysis);
    req.phase = Phase::Selecting;
    let out = SelectionStage::new(inv, prover).run(&req).await.unwrap();
    (counting.calls(), json!(out.next))
}

async fn api_calls() {
    println!("\n| incident | investigator | API calls (both invocations and the proof) | ended |");
    println!("|---|---|---:|---|");
    let mut worst = 0;
    for name in DEMO {
        let text = std::fs::read_to_string(dir(name).join("snapshot.yaml")).unwrap();
        let alert: Value =
            serde_json::from_str(&std::fs::read_to_string(dir(name).join("alert.json")).unwrap())
                .unwrap();
        let snapshot = Arc::new(SnapshotCluster::from_yaml(&text).unwrap());
        let (calls, phase) = offline_calls(snapshot, &alert).await;
        println!(
            "| {name} | offline | {calls} | {} |",
            phase.as_str().unwrap_or("")
        );
        worst = worst.max(calls);
        if *name == "crashloop-rollout" {
            let ns = alert["alerts"][0]["labels"]["namespace"]
                .as_str()
                .unwrap()
                .to_owned();
            let big = crowded(&text, &ns, 500);
            let snapshot = Arc::new(SnapshotCluster::from_yaml(&big).unwrap());
            let objects = snapshot
                .list(
                    &snapshot.resource("Pod").await.unwrap(),
                    Some(&ns),
                    &Default::default(),
                )
                .await
                .unwrap()
                .len();
            let (calls, phase) = offline_calls(snapshot, &alert).await;
            println!(
                "| {name} in a namespace of 500 more objects ({objects} pods) | offline | {calls} | {} |",
                phase.as_str().unwrap_or("")
            );
            worst = worst.max(calls);
        }
    }
    for name in SCENARIOS {
        let c = case(name).await;
        let calls = measure(&c, true).await.api_calls;
        println!(
            "| {name} | scripted model (with view) | {calls} | {} |",
            c.expected["phase"].as_str().unwrap_or("")
        );
        worst = worst.max(calls);
    }
    println!("\nmost API calls of one investigation: {worst} (at most {MAX_API_CALLS})");
    assert!(
        worst <= MAX_API_CALLS,
        "an investigation made {worst} API calls"
    );
}

#[tokio::main]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    if std::env::args().any(|a| a == "--api-calls") {
        api_calls().await;
        return;
    }
    println!(
        "| scenario | prompt | model requests (invocation 1 + 2) | prompt tokens | completion tokens | total tokens | cluster tool calls | view chars |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    let mut totals = [Cost::default(), Cost::default()];
    let mut deltas = Vec::new();
    for name in SCENARIOS {
        let c = case(name).await;
        let without = measure(&c, false).await;
        let with = measure(&c, true).await;
        row(name, "without view", without);
        row(name, "with view", with);
        totals[0] += without;
        totals[1] += with;
        deltas.push((name, without, with));
    }
    row("**total**", "without view", totals[0]);
    row("**total**", "with view", totals[1]);
    println!(
        "\ninvocation 1's system prompt: {} tokens without the view, {} with it (its rule)\n",
        totals[0].system_tokens, totals[1].system_tokens
    );
    println!("| scenario | requests | total tokens | cluster tool calls |");
    println!("|---|---:|---:|---:|");
    for (name, w, v) in deltas
        .iter()
        .chain(std::iter::once(&(&"**total**", totals[0], totals[1])))
    {
        println!(
            "| {name} | {:+} | {} | {:+} |",
            v.requests as i64 - w.requests as i64,
            change(w.prompt + w.completion, v.prompt + v.completion),
            v.tool_calls as i64 - w.tool_calls as i64
        );
    }
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
