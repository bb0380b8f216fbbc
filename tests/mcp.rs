//! The MCP server with the client its users have: the official MCP Python SDK (from PyPI)
//! against `/mcp` on the daemon, over streamable HTTP. On the real API server: a production
//! incident waits for a human; the client lists the tools, reads the requests and the pending
//! approval, is refused the decision with a viewer key (an MCP error naming the role) and
//! decides with an approver key; the decision is audited with the key's name and channel `mcp`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

mod common;

use std::process::Command;

use kubemedic::domain::Role;
use serde_json::{Value, json};

use common::incident::{awaiting, production_incident, serving};
use common::kube::Kube;

/// The MCP SDK's Python, installed by scripts/test (scripts/lib/python-tools.sh).
fn mcp_python() -> Option<String> {
    common::component("KUBEMEDIC_MCP_PYTHON", "the MCP Python SDK")
}

/// The message of a tool's refusal: MCP puts a tool's own errors (a role too low, a bad
/// argument, a decision already made) in its result with `isError`, not in a JSON-RPC error.
fn refusal(v: &Value) -> String {
    assert_eq!(v["is_error"], true, "a refusal in the tool's result: {v:#}");
    v["result"].as_str().unwrap_or_default().to_owned()
}

/// Run `code`; it prints one JSON document, returned here.
fn py(python: &str, code: &str, env: &[(&str, &str)]) -> Value {
    let out = Command::new(python)
        .arg("-c")
        .arg(code)
        .envs(env.iter().copied())
        .output()
        .expect("run python");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "python failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// Connect over streamable HTTP with `KEY`, list the tools, call `TOOL` with `ARGS` (JSON):
/// the tool names, and the call's JSON result or the MCP error.
const CALL: &str = r#"
import asyncio, json, os
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

async def main():
    http = create_mcp_http_client(headers={"Authorization": "Bearer " + os.environ["KEY"]})
    async with http:
        async with streamable_http_client(os.environ["BASE"] + "/mcp", http_client=http) as (r, w):
            async with ClientSession(r, w) as s:
                init = await s.initialize()
                tools = await s.list_tools()
                out = {"server": init.server_info.name,
                       "tools": {t.name: {"description": t.description,
                                          "schema": t.input_schema} for t in tools.tools}}
                try:
                    res = await s.call_tool(os.environ["TOOL"], json.loads(os.environ["ARGS"]))
                    out["is_error"] = bool(res.is_error)
                    try:
                        out["result"] = json.loads(res.content[0].text)
                    except ValueError:
                        out["result"] = res.content[0].text
                except MCPError as e:
                    out["error"] = {"code": e.code, "message": e.message}
                print(json.dumps(out))

asyncio.run(main())
"#;

/// The same over stdio: `kubemedic mcp ARGS…` (JSON list) started by the SDK, with
/// `KUBEMEDIC_API_KEY` set to `KEY` when `KEY` is not empty.
const CALL_STDIO: &str = r#"
import asyncio, json, os
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

async def main():
    env = {"KUBEMEDIC_API_KEY": os.environ["KEY"]} if os.environ["KEY"] else {}
    server = StdioServerParameters(command=os.environ["BIN"], args=json.loads(os.environ["SERVER_ARGS"]), env=env)
    async with stdio_client(server) as (r, w):
        async with ClientSession(r, w) as s:
            init = await s.initialize()
            tools = await s.list_tools()
            out = {"server": init.server_info.name, "tools": sorted(t.name for t in tools.tools)}
            try:
                res = await s.call_tool(os.environ["TOOL"], json.loads(os.environ["ARGS"]))
                out["is_error"] = bool(res.is_error)
                try:
                    out["result"] = json.loads(res.content[0].text)
                except ValueError:
                    out["result"] = res.content[0].text
            except MCPError as e:
                out["error"] = {"code": e.code, "message": e.message}
            print(json.dumps(out))

asyncio.run(main())
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_client_reads_the_requests_and_only_an_approver_decides() {
    let Some(python) = mcp_python() else {
        return;
    };
    let Some(k) = Kube::new("mcp").await else {
        return;
    };
    // The stdio server opens the daemon's store: the same data folder and approval settings.
    let data = tempfile::tempdir().unwrap();
    let data_dir = data.path().to_owned();
    let (d, alert) = production_incident(&k, |a| a.store.data_dir = Some(data_dir.clone())).await;
    let (req, approval) = awaiting(&d, &alert).await;
    let request = req["id"].as_str().unwrap().to_owned();
    let approval_id = approval["id"].as_str().unwrap().to_owned();
    let viewer = common::create_key(d.store.as_ref(), Role::Viewer, "vera").await;
    let approver = common::create_key(d.store.as_ref(), Role::Approver, "alice").await;
    let base = d.base.clone();
    let call = |key: &str, tool: &str, args: &str| {
        py(
            &python,
            CALL,
            &[
                ("BASE", &base),
                ("KEY", key),
                ("TOOL", tool),
                ("ARGS", args),
            ],
        )
    };

    // The tools, each with a description and a JSON schema of its arguments.
    let listed = call(&viewer, "list_requests", "{}");
    assert_eq!(listed["server"], "kubemedic", "{listed:#}");
    for tool in [
        "list_requests",
        "get_request",
        "list_pending_approvals",
        "decide_approval",
    ] {
        let t = &listed["tools"][tool];
        assert!(
            t["description"].as_str().is_some_and(|d| d.len() > 20),
            "{tool}: {listed:#}"
        );
        assert_eq!(t["schema"]["type"], "object", "{tool}: {t:#}");
    }
    assert!(
        listed["tools"]["decide_approval"]["schema"]["required"]
            .as_array()
            .unwrap()
            .contains(&Value::from("approval_id")),
        "{listed:#}"
    );
    let items = listed["result"]["items"].as_array().unwrap();
    assert!(
        items.iter().any(|r| r["id"] == request.as_str()),
        "{listed:#}"
    );

    // A request with its trail.
    let got = call(&viewer, "get_request", &format!(r#"{{"id": "{request}"}}"#));
    assert_eq!(got["result"]["phase"], "AwaitingApproval", "{got:#}");
    assert!(
        !got["result"]["trail"].as_array().unwrap().is_empty(),
        "{got:#}"
    );
    // A bad argument is the tool's refusal, naming it.
    let bad = call(&viewer, "get_request", r#"{"id": "nope"}"#);
    assert!(
        refusal(&bad).contains("id: `nope` is not a UUID"),
        "{bad:#}"
    );

    let pending = call(&viewer, "list_pending_approvals", "{}");
    assert!(
        pending["result"]["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["id"] == approval_id.as_str()),
        "{pending:#}"
    );

    // Over stdio, `kubemedic mcp` with the daemon's settings: without a key the local user
    // reads, as a viewer, and is refused the decision.
    let policies = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let server_args = serde_json::to_string(&[
        "mcp",
        "--data-dir",
        data_dir.to_str().unwrap(),
        "--policy-dir",
        policies.to_str().unwrap(),
        "--kubeconfig",
        k.kubeconfig.to_str().unwrap(),
        "--approvers",
        common::incident::ALICE,
        "--link-signing-key",
        common::incident::KEY,
    ])
    .unwrap();
    let stdio = |key: &str, tool: &str, args: &str| {
        py(
            &python,
            CALL_STDIO,
            &[
                ("BIN", env!("CARGO_BIN_EXE_kubemedic")),
                ("SERVER_ARGS", &server_args),
                ("KEY", key),
                ("TOOL", tool),
                ("ARGS", args),
            ],
        )
    };
    let local = stdio("", "list_pending_approvals", "{}");
    assert_eq!(local["server"], "kubemedic", "{local:#}");
    assert!(
        local["tools"]
            .as_array()
            .unwrap()
            .contains(&Value::from("decide_approval")),
        "{local:#}"
    );
    assert!(
        local["result"]["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["id"] == approval_id.as_str()),
        "{local:#}"
    );
    let decide = format!(
        r#"{{"approval_id": "{approval_id}", "decision": "approve", "message": "from the assistant"}}"#
    );
    let refused = stdio("", "decide_approval", &decide);
    let why = refusal(&refused);
    assert!(
        why.contains("has role viewer; this tool needs approver"),
        "{refused:#}"
    );

    // A viewer is refused the decision, with the role named; nothing is decided.
    let decide = format!(
        r#"{{"approval_id": "{approval_id}", "decision": "approve", "message": "from the assistant"}}"#
    );
    let refused = call(&viewer, "decide_approval", &decide);
    let why = refusal(&refused);
    assert!(why.contains("key:vera has role viewer"), "{refused:#}");
    assert!(why.contains("approver"), "{refused:#}");
    let still = d.api(&format!("/api/v1/approvals/{approval_id}")).await;
    assert_eq!(still["status"], "pending", "{still:#}");

    // The approver decides; the decision is the approval's, with the key's name and the channel.
    let decided = call(&approver, "decide_approval", &decide);
    assert_eq!(decided["is_error"], false, "{decided:#}");
    assert_eq!(decided["result"]["status"], "approved", "{decided:#}");
    let approval = d.api(&format!("/api/v1/approvals/{approval_id}")).await;
    assert_eq!(approval["status"], "approved", "{approval:#}");
    assert_eq!(
        approval["decision"]["decided_by"], "key:alice",
        "{approval:#}"
    );
    assert_eq!(approval["decision"]["decided_via"], "mcp", "{approval:#}");

    // Over stdio an approver's key passes the role check and reaches the approvals, which
    // refuse a second decision: the first one won.
    let again = stdio(&approver, "decide_approval", &decide);
    let why = refusal(&again);
    assert!(!why.contains("role"), "{again:#}");
    assert!(why.to_lowercase().contains("already"), "{again:#}");

    // Without a key, /mcp answers 401 before any tool runs.
    let anonymous = d
        .client
        .post(d.url("/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    d.stop().await;
}

/// Connect (over streamable HTTP with `KEY`, or over stdio to `kubemedic mcp SERVER_ARGS…`),
/// list the tools, then run `OPS` (JSON list): `{"call": tool, "args": {…}}`, `{"read": uri}`
/// or `{"resources": true}`. Prints the tools (description, schema, annotations) and each
/// op's result: the JSON of a tool's text (or the text), `is_error`, or the MCP error.
const OPS: &str = r#"
import asyncio, json, os
from contextlib import asynccontextmanager
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError

@asynccontextmanager
async def connect():
    if os.environ["TRANSPORT"] == "http":
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client
        http = create_mcp_http_client(headers={"Authorization": "Bearer " + os.environ["KEY"]})
        async with http:
            async with streamable_http_client(os.environ["BASE"] + "/mcp", http_client=http) as (r, w):
                yield r, w
    else:
        from mcp.client.stdio import StdioServerParameters, stdio_client
        env = {"KUBEMEDIC_API_KEY": os.environ["KEY"]} if os.environ.get("KEY") else {}
        server = StdioServerParameters(command=os.environ["BIN"],
                                       args=json.loads(os.environ["SERVER_ARGS"]), env=env)
        async with stdio_client(server) as (r, w):
            yield r, w

def text_of(content):
    t = content.text
    try:
        return json.loads(t)
    except ValueError:
        return t

async def main():
    async with connect() as (r, w):
        async with ClientSession(r, w) as s:
            init = await s.initialize()
            tools = await s.list_tools()
            out = {"server": init.server_info.name,
                   "tools": {t.name: {"description": t.description, "schema": t.input_schema,
                                      "read_only": bool(t.annotations and t.annotations.read_only_hint)}
                             for t in tools.tools},
                   "results": []}
            for op in json.loads(os.environ["OPS"]):
                try:
                    if "call" in op:
                        res = await s.call_tool(op["call"], op.get("args", {}))
                        out["results"].append({"is_error": bool(res.is_error),
                                               "result": text_of(res.content[0])})
                    elif "read" in op:
                        res = await s.read_resource(op["read"])
                        out["results"].append({"result": json.loads(res.contents[0].text),
                                               "mime": res.contents[0].mime_type})
                    else:
                        res = await s.list_resources()
                        out["results"].append({"result": [str(x.uri) for x in res.resources]})
                except MCPError as e:
                    out["results"].append({"error": {"code": e.code, "message": e.message}})
            print(json.dumps(out))

asyncio.run(main())
"#;

/// What the model reads from the cluster tool `name` called with `args` on the daemon's own
/// reader, limits and clock: the investigation's view, to compare an MCP client's with.
async fn model_reads(d: &common::TestDaemon, name: &str, args: &Value) -> String {
    let access = d.running.as_ref().unwrap().state.cluster.clone().unwrap();
    kubemedic::cluster::tools::ClusterTools::new(access.reader, access.clock, access.limits)
        .call(name, args)
        .await
        .text
}

const SECRET_VALUE: &str = "Sup3r-s3cret-Value-9f2k";
const CONFIG_PASSWORD: &str = "Pa55w0rd-zz81-qq";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_client_reads_the_cluster_as_the_model_does_and_investigates_a_real_incident() {
    let Some(python) = mcp_python() else {
        return;
    };
    let Some(k) = Kube::new("mcp-tools").await else {
        return;
    };
    // A bad rollout of `checkout` (staging), a Secret, and a ConfigMap holding credentials.
    common::scenarios::staged_in("crashloop-rollout", &[&k]).await;
    k.apply(
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "checkout-db"},
                   "stringData": {"password": SECRET_VALUE}}),
    )
    .await;
    k.apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "checkout-config"},
                   "data": {"DATABASE_URL": format!("postgres://app:{CONFIG_PASSWORD}@db:5432/shop"),
                            "db_password": CONFIG_PASSWORD, "LOG_LEVEL": "info"}}))
        .await;
    let data = tempfile::tempdir().unwrap();
    let data_dir = data.path().to_owned();
    let d = serving(&k, |a| {
        a.store.data_dir = Some(data_dir.clone());
        a.cluster.blocked_namespaces = Some(vec!["kube-system".into()]);
    })
    .await;
    let viewer = common::create_key(d.store.as_ref(), Role::Viewer, "vera").await;
    let ns = k.ns.clone();
    let base = d.base.clone();
    let http = |ops: &Value| {
        py(
            &python,
            OPS,
            &[
                ("TRANSPORT", "http"),
                ("BASE", &base),
                ("KEY", &viewer),
                ("OPS", &ops.to_string()),
            ],
        )
    };

    let secret = json!({"kind": "Secret", "name": "checkout-db", "namespace": ns});
    let blocked = json!({"kind": "Pod", "namespace": "kube-system"});
    let config = json!({"kind": "ConfigMap", "name": "checkout-config", "namespace": ns});
    let out = http(&json!([
        {"call": "kubectl_get_yaml", "args": secret},
        {"call": "kubectl_get", "args": blocked},
        {"call": "kubectl_get_yaml", "args": config},
        {"call": "kubectl_describe", "args": {"kind": "Deployment", "name": "checkout", "namespace": ns}},
        {"call": "kubectl_delete", "args": {"kind": "Pod", "name": "x"}},
        {"call": "investigate", "args": {"target": {"kind": "Deployment", "name": "checkout", "namespace": ns}}},
    ]));
    // The cluster tools are listed with the model's descriptions and schemas, read-only.
    for spec in kubemedic::cluster::tools::specs() {
        let t = &out["tools"][spec.name];
        assert_eq!(t["description"], spec.description, "{}: {t:#}", spec.name);
        assert_eq!(t["schema"], spec.parameters, "{}: {t:#}", spec.name);
        assert_eq!(t["read_only"], true, "{}: {t:#}", spec.name);
    }
    for tool in ["investigate", "explain_policy_decision", "get_request"] {
        assert!(
            out["tools"][tool]["description"].is_string(),
            "{tool}: {out:#}"
        );
    }
    let results = out["results"].as_array().unwrap();

    // A Secret is refused, as the model is refused it: the same text, no value.
    let r = &results[0];
    assert_eq!(r["is_error"], true, "{r:#}");
    let said = r["result"].as_str().unwrap();
    assert!(
        said.contains("blocked by kubemedic's read policy"),
        "{said}"
    );
    assert!(!said.contains(SECRET_VALUE), "{said}");
    assert_eq!(said, model_reads(&d, "kubectl_get_yaml", &secret).await);
    // So is a blocked namespace.
    let r = &results[1];
    assert_eq!(r["is_error"], true, "{r:#}");
    let said = r["result"].as_str().unwrap();
    assert!(
        said.contains("namespace kube-system is blocked by kubemedic's read policy"),
        "{said}"
    );
    assert_eq!(said, model_reads(&d, "kubectl_get", &blocked).await);
    // A credential in a ConfigMap is redacted; the harmless value is kept.
    let r = &results[2];
    assert_eq!(r["is_error"], false, "{r:#}");
    let said = r["result"].as_str().unwrap();
    assert!(!said.contains(CONFIG_PASSWORD), "{said}");
    assert!(
        said.contains("[REDACTED]") && said.contains("LOG_LEVEL"),
        "{said}"
    );
    assert_eq!(said, model_reads(&d, "kubectl_get_yaml", &config).await);
    // An ordinary read answers from the real API server.
    let r = &results[3];
    assert_eq!(r["is_error"], false, "{r:#}");
    assert!(r["result"].as_str().unwrap().contains("checkout"), "{r:#}");
    // A tool that does not exist is an MCP error naming it.
    let why = results[4]["error"]["message"].as_str().unwrap_or_default();
    assert!(
        why.contains("unknown tool `kubectl_delete`"),
        "{:#}",
        results[4]
    );

    // `investigate` on the staged incident: a request of source chat, investigated by the
    // offline investigator (no model configured), which names the bad rollout and proposes
    // the rollback — and executes nothing: the proposal waits for an approver.
    let inv = &results[5];
    assert_eq!(inv["is_error"], false, "{inv:#}");
    let inv = &inv["result"];
    assert_eq!(inv["recorded"], true, "{inv:#}");
    assert_eq!(inv["done"], true, "{inv:#}");
    assert_eq!(inv["offline_investigator"], true, "{inv:#}");
    assert_eq!(inv["phase"], "AwaitingApproval", "{inv:#}");
    assert_eq!(
        inv["proposed_workflow"]["action_type"], "RollbackDeployment",
        "{inv:#}"
    );
    assert_eq!(
        inv["root_cause"]["remediation_target"]["name"], "checkout",
        "{inv:#}"
    );
    assert!(inv["confidence"].as_f64().unwrap() > 0.5, "{inv:#}");
    assert!(
        !inv["evidence"]["contributing_factors"]
            .as_array()
            .unwrap()
            .is_empty(),
        "{inv:#}"
    );
    assert_eq!(inv["gate"]["decision"], "approval_required", "{inv:#}");
    let approval = inv["approval_id"].as_str().unwrap().to_owned();
    assert!(
        inv["next"].as_str().unwrap().contains("decide_approval"),
        "{inv:#}"
    );
    let request = inv["request_id"].as_str().unwrap().to_owned();
    let req = d.api(&format!("/api/v1/requests/{request}")).await;
    assert_eq!(req["signal"]["source"], "chat", "{req:#}");
    assert_eq!(req["phase"], "AwaitingApproval", "{req:#}");
    let pending = d.api(&format!("/api/v1/approvals/{approval}")).await;
    assert_eq!(pending["status"], "pending", "{pending:#}");

    // An alert about a pod that is not there ends before the gate.
    let ghost = common::scenarios::alert(
        "KubePodCrashLooping",
        "warning",
        &[("namespace", &ns), ("pod", "ghost-0")],
        &[("summary", "ghost")],
        "",
    );
    let sent: Value = d
        .send_alertmanager(&ghost.to_string())
        .await
        .json()
        .await
        .unwrap();
    let ghost_id = sent["outcomes"][0]["request_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let ended = d
        .eventually(
            &format!("/api/v1/requests/{ghost_id}"),
            60,
            common::incident::is_terminal,
        )
        .await;
    assert!(ended["state"]["gate"].is_null(), "{ended:#}");

    // Why the policy decided: approval required (asked in a conversation), by the revision
    // of the shipped policy directory in force, on the facts recorded; and a request without
    // a decision, named.
    let out = http(&json!([
        {"call": "explain_policy_decision", "args": {"id": request}},
        {"call": "explain_policy_decision", "args": {"id": ghost_id}},
        {"resources": true},
        {"read": "kubemedic://policy"},
        {"read": "kubemedic://catalog/RollbackDeployment"},
        {"read": "kubemedic://playbooks/CrashLoopBackOff"},
        {"read": "kubemedic://catalog/NoSuchAction"},
    ]));
    let results = out["results"].as_array().unwrap();
    let why = &results[0]["result"];
    assert_eq!(why["decision"], "approval_required", "{why:#}");
    assert!(
        why["reason"]
            .as_str()
            .unwrap()
            .contains("asked in a conversation"),
        "{why:#}"
    );
    assert!(
        !why["risk_factors"].as_array().unwrap().is_empty(),
        "{why:#}"
    );
    assert!(
        why["policy_revision"]
            .as_str()
            .unwrap()
            .starts_with("sha256:"),
        "{why:#}"
    );
    assert_eq!(
        why["policy_now"]["decided_by_this_revision"], true,
        "{why:#}"
    );
    assert!(
        why["policy_origin"]
            .as_str()
            .unwrap()
            .contains("the policy directory"),
        "{why:#}"
    );
    assert_eq!(why["input"]["action_type"], "RollbackDeployment", "{why:#}");
    assert_eq!(why["input"]["environment"], "staging", "{why:#}");
    assert_eq!(why["human_decision"]["status"], "pending", "{why:#}");
    let none = refusal(&results[1]);
    assert!(
        none.contains(&format!("request {ghost_id} has no policy decision yet")),
        "{:#}",
        results[1]
    );
    // The resources: the catalog by action type, the playbooks, the policy.
    let uris = results[2]["result"].as_array().unwrap();
    for uri in [
        "kubemedic://catalog",
        "kubemedic://catalog/RollbackDeployment",
        "kubemedic://playbooks/CrashLoopBackOff",
        "kubemedic://policy",
    ] {
        assert!(uris.contains(&Value::from(uri)), "{uri}: {uris:#?}");
    }
    let policy = &results[3]["result"];
    assert_eq!(results[3]["mime"], "application/json");
    assert_eq!(policy["revision"], why["policy_revision"], "{policy:#}");
    let modules = policy["modules"].as_array().unwrap();
    assert!(
        modules.iter().any(|m| m["name"] == "approval.rego"
            && m["source"]
                .as_str()
                .unwrap()
                .contains("package kubemedic.approval")),
        "{policy:#}"
    );
    let rollback = &results[4]["result"];
    assert_eq!(rollback["action_type"]["name"], "RollbackDeployment");
    let wf = rollback["workflows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["id"] == "rollback-deployment-previous-revision")
        .unwrap_or_else(|| panic!("{rollback:#}"));
    assert!(wf["source"].as_str().unwrap().ends_with(".yaml"), "{wf:#}");
    assert_eq!(results[5]["result"]["name"], "CrashLoopBackOff");
    let missing = results[6]["error"]["message"].as_str().unwrap_or_default();
    assert!(
        missing.contains("kubemedic://catalog/NoSuchAction: no action type `NoSuchAction`"),
        "{:#}",
        results[6]
    );

    // A policy change takes effect without a restart: modules an ApprovalPolicy object puts
    // over the directory show at the next read, with their origin.
    let gate = d.running.as_ref().unwrap().state.policy.clone().unwrap();
    gate.set_overlay(
        Some(kubemedic::policy::Overlay {
            files: vec![(
                "extra.rego".into(),
                "package kubemedic.extra\n\nmarker := 1\n".into(),
            )],
            origin: "ApprovalPolicy kubemedic/extra (generation 1)".into(),
        }),
        vec![],
    )
    .unwrap();
    let out = http(&json!([{"read": "kubemedic://policy"}]));
    let policy = &out["results"][0]["result"];
    assert!(
        policy["origin"]
            .as_str()
            .unwrap()
            .starts_with("ApprovalPolicy kubemedic/extra (generation 1) over the policy directory"),
        "{policy:#}"
    );
    assert!(
        policy["modules"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["name"] == "extra.rego" && m["from_object"] == true),
        "{policy:#}"
    );
    gate.set_overlay(None, vec![]).unwrap();

    // Over stdio, `kubemedic mcp` with the daemon's settings and no key: a viewer. The same
    // tools and refusals; `investigate` runs the stages up to the gate in that process and
    // names the same cause, recorded nowhere and executing nothing.
    let policies = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let server_args = serde_json::to_string(&[
        "mcp",
        "--data-dir",
        data_dir.to_str().unwrap(),
        "--policy-dir",
        policies.to_str().unwrap(),
        "--kubeconfig",
        k.kubeconfig.to_str().unwrap(),
        "--blocked-namespaces",
        "kube-system",
    ])
    .unwrap();
    let out = py(
        &python,
        OPS,
        &[
            ("TRANSPORT", "stdio"),
            ("BIN", env!("CARGO_BIN_EXE_kubemedic")),
            ("SERVER_ARGS", &server_args),
            (
                "OPS",
                &json!([
                    {"call": "kubectl_get_yaml", "args": secret},
                    {"call": "kubectl_get_yaml", "args": config},
                    {"call": "investigate", "args": {"question": format!("why is checkout crashing in {ns}?")}},
                    {"call": "explain_policy_decision", "args": {"id": request}},
                    {"read": "kubemedic://catalog/RollbackDeployment"},
                    {"call": "investigate", "args": {"target": {"kind": "Deployment", "name": "nope", "namespace": ns}}},
                ])
                .to_string(),
            ),
        ],
    );
    for spec in kubemedic::cluster::tools::specs() {
        assert_eq!(
            out["tools"][spec.name]["schema"], spec.parameters,
            "{}",
            spec.name
        );
    }
    let results = out["results"].as_array().unwrap();
    let said = results[0]["result"].as_str().unwrap();
    assert_eq!(results[0]["is_error"], true, "{:#}", results[0]);
    assert!(
        said.contains("blocked by kubemedic's read policy"),
        "{said}"
    );
    let said = results[1]["result"].as_str().unwrap();
    assert!(
        !said.contains(CONFIG_PASSWORD) && said.contains("[REDACTED]"),
        "{said}"
    );
    let inv = &results[2]["result"];
    assert_eq!(results[2]["is_error"], false, "{:#}", results[2]);
    assert_eq!(inv["recorded"], false, "{inv:#}");
    assert!(inv["request_id"].is_null(), "{inv:#}");
    assert_eq!(inv["offline_investigator"], true, "{inv:#}");
    assert_eq!(
        inv["proposed_workflow"]["action_type"], "RollbackDeployment",
        "{inv:#}"
    );
    assert_eq!(inv["gate"]["decision"], "approval_required", "{inv:#}");
    assert!(
        inv["next"]
            .as_str()
            .unwrap()
            .contains("nothing was recorded"),
        "{inv:#}"
    );
    assert_eq!(
        results[3]["result"]["decision"], "approval_required",
        "{:#}",
        results[3]
    );
    assert_eq!(
        results[4]["result"]["action_type"]["name"], "RollbackDeployment",
        "{:#}",
        results[4]
    );
    let why = refusal(&results[5]);
    assert!(
        why.contains("Deployment nope") || why.contains("/Deployment/nope"),
        "{:#}",
        results[5]
    );
    assert!(why.contains("no such Deployment"), "{:#}", results[5]);

    // Nothing was executed: the rollback still waits for its approver.
    let still = d.api(&format!("/api/v1/approvals/{approval}")).await;
    assert_eq!(still["status"], "pending", "{still:#}");
    d.stop().await;
}
