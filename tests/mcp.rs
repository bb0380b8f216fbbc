//! The MCP server with the client its users have: the official MCP Python SDK (from PyPI)
//! against `/mcp` on the daemon, over streamable HTTP. On the real API server: a production
//! incident waits for a human; the client lists the tools, reads the requests and the pending
//! approval, is refused the decision with a viewer key (an MCP error naming the role) and
//! decides with an approver key; the decision is audited with the key's name and channel `mcp`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

mod common;

use std::process::Command;

use kubemedic::domain::Role;
use serde_json::Value;

use common::incident::{awaiting, production_incident};
use common::kube::Kube;

/// The MCP SDK's Python, installed by scripts/test (scripts/lib/python-tools.sh).
fn mcp_python() -> Option<String> {
    common::component("KUBEMEDIC_MCP_PYTHON", "the MCP Python SDK")
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
                    out["result"] = json.loads(res.content[0].text)
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
                out["result"] = json.loads(res.content[0].text)
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
    // A bad argument is an MCP error naming it.
    let bad = call(&viewer, "get_request", r#"{"id": "nope"}"#);
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap()
            .contains("id: `nope` is not a UUID"),
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
    let why = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        why.contains("has role viewer; this tool needs approver"),
        "{refused:#}"
    );

    // A viewer is refused the decision, with the role named; nothing is decided.
    let decide = format!(
        r#"{{"approval_id": "{approval_id}", "decision": "approve", "message": "from the assistant"}}"#
    );
    let refused = call(&viewer, "decide_approval", &decide);
    let why = refused["error"]["message"].as_str().unwrap_or_default();
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
    let why = again["error"]["message"].as_str().unwrap_or_default();
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
