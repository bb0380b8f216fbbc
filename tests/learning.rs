//! Outcome learning end to end (docs/adr/0024-outcome-learning.md), on the real API server with
//! the offline investigator and the shipped policy.
//!
//! The incident: one pod of Deployment `checkout` has been running but not ready for ten
//! minutes (its readiness probe fails) while its siblings serve, in a namespace labelled
//! production. The offline rules propose deleting that pod; the approver knows better (the
//! others are about to wedge too) and picks the rolling restart the readiness playbook also
//! recommends. It verifies effective, and the outcome is learned under the incident's signature.
//! The same incident in another namespace: kubemedic now proposes the rolling restart itself
//! — proven, gated and still waiting for the approver — with the learned pattern in the
//! evidence. That run proves ineffective (the alert never resolves), so the pattern goes into
//! cooldown: the third time, kubemedic proposes what its rules say again.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

mod common;

use common::incident::{awaiting, is_terminal, kubelet, resolve_and_finish, serving, wedged_pod};
use common::kube::Kube;
use serde_json::{Value, json};

fn kinds(req: &Value) -> Vec<String> {
    req["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["kind"].as_str().map(str::to_owned))
        .collect()
}

fn event<'a>(req: &'a Value, kind: &str) -> &'a Value {
    req["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} event in {:#}", req["timeline"]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approvers_verified_choice_is_proposed_next_time_until_it_proves_ineffective() {
    let Some(first) = Kube::new("learn1").await else {
        return;
    };
    let second = Kube::new("learn2").await.unwrap();
    let third = Kube::new("learn3").await.unwrap();
    let d = serving(&first, |_| {}).await;
    let decide = |aid: String, body: Value| {
        d.client
            .post(d.url(&format!("/api/v1/approvals/{aid}/decision")))
            .bearer_auth(common::API_TOKEN)
            .json(&body)
            .send()
    };

    // First occurrence: the rules propose deleting the pod; the approver picks the restart.
    let (_, alert) = wedged_pod(&first).await;
    let (req, approval) = awaiting(&d, &alert).await;
    let rid = req["id"].as_str().unwrap().to_owned();
    assert_eq!(approval["workflow_id"], "delete-pod", "{approval:#}");
    let offered: Vec<&str> = approval["alternatives"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["workflow_id"].as_str().unwrap())
        .collect();
    assert!(offered.contains(&"restart-rolling"), "{approval:#}");
    let signature = req["state"]["analysis"]["signature"].clone();
    assert_eq!(
        signature["facts"]["alert"], "KubePodNotReady",
        "{signature:#}"
    );
    assert_eq!(signature["facts"]["kind"], "Deployment");
    assert_eq!(signature["facts"]["pod_states"], json!(["not-ready"]));
    assert_eq!(signature["facts"]["events"], json!(["Unhealthy"]));
    assert_eq!(
        req["state"]["analysis"]["learned"],
        Value::Null,
        "nothing learned yet"
    );
    let r = decide(
        approval["id"].as_str().unwrap().to_owned(),
        json!({"decision": "approve", "alternative": "restart-rolling"}),
    )
    .await
    .unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    let node = kubelet(&first);
    let done = resolve_and_finish(&d, &alert, &rid).await;
    node.abort();
    assert_eq!(done["phase"], "Completed", "{done:#}");
    assert_eq!(done["state"]["execution"]["workflow_id"], "restart-rolling");
    assert_eq!(done["state"]["assessment"]["effective"], true, "{done:#}");
    assert_eq!(done["state"]["selection"]["replaced"], "delete-pod");
    let learned = event(&done, "pattern_learned");
    assert_eq!(
        learned["payload"]["outcome"]["workflow_id"],
        "restart-rolling"
    );
    assert_eq!(learned["payload"]["outcome"]["replaced"], "delete-pod");
    assert_eq!(learned["payload"]["outcome"]["effective"], true);
    assert_eq!(
        learned["payload"]["outcome"]["signature"]["hash"],
        signature["hash"]
    );

    // Second occurrence, another namespace: kubemedic proposes the learned restart, and it
    // still waits for the approver.
    let (_, alert) = wedged_pod(&second).await;
    let (req, approval) = awaiting(&d, &alert).await;
    let rid = req["id"].as_str().unwrap().to_owned();
    assert_eq!(
        req["state"]["analysis"]["signature"]["hash"], signature["hash"],
        "the same class elsewhere has the same signature"
    );
    assert_eq!(approval["workflow_id"], "restart-rolling", "{approval:#}");
    assert_eq!(approval["proof"]["verdict"], "proven", "{approval:#}");
    assert_eq!(req["state"]["gate"]["require_approval"], true);
    let used = &req["state"]["selection"]["learned"];
    assert_eq!(used["instead_of"], "delete-pod", "{used:#}");
    assert_eq!(used["pattern"]["workflow_id"], "restart-rolling");
    assert_eq!(used["pattern"]["effective"], 1);
    assert!(
        used["pattern"]["weight"].as_f64().unwrap() > 0.9,
        "{used:#}"
    );
    assert!(
        approval["alternatives"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["workflow_id"] == "delete-pod"),
        "the rules' own proposal stays an alternative: {approval:#}"
    );
    let shown = kinds(&req);
    assert!(shown.contains(&"learned_hint".to_owned()), "{shown:?}");
    assert!(
        event(&req, "learned_hint")["message"]
            .as_str()
            .unwrap()
            .contains("hint"),
    );
    // The request's live events and page say so too.
    let page = d
        .client
        .get(d.url(&format!("/requests/{rid}")))
        .bearer_auth(common::API_TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("Learned (hints, not instructions)") && page.contains("learned-use"),
        "the request page shows the learned pattern"
    );
    let r = decide(
        approval["id"].as_str().unwrap().to_owned(),
        json!({"decision": "approve"}),
    )
    .await
    .unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    // The restart runs, but the alert never resolves: not effective.
    let node = kubelet(&second);
    let done = d
        .eventually(&format!("/api/v1/requests/{rid}"), 120, is_terminal)
        .await;
    node.abort();
    assert_eq!(done["phase"], "Completed", "{done:#}");
    assert_eq!(done["state"]["assessment"]["effective"], false, "{done:#}");
    let learned = event(&done, "pattern_learned");
    assert_eq!(learned["payload"]["outcome"]["effective"], false);
    assert!(
        learned["message"].as_str().unwrap().contains("cooldown"),
        "{learned:#}"
    );

    // Third occurrence: the learned restart is in cooldown, so the rules' proposal stands, and
    // the evidence says why.
    let (_, alert) = wedged_pod(&third).await;
    let (req, approval) = awaiting(&d, &alert).await;
    assert_eq!(approval["workflow_id"], "delete-pod", "{approval:#}");
    assert_eq!(req["state"]["selection"]["learned"], Value::Null);
    let hints = req["state"]["analysis"]["learned"].as_array().unwrap();
    let restart = hints
        .iter()
        .find(|p| p["workflow_id"] == "restart-rolling")
        .unwrap();
    assert_eq!(restart["suppressed"], true, "{restart:#}");
    assert_eq!(restart["ineffective"], 1);
    assert!(
        !approval["alternatives"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["rationale"].as_str().unwrap_or("").contains("learned")),
        "a suppressed pattern is not offered as learned: {approval:#}"
    );
    let r = decide(
        approval["id"].as_str().unwrap().to_owned(),
        json!({"decision": "deny"}),
    )
    .await
    .unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    d.stop().await;
}

/// The pending approval of request `id`.
async fn approval_of(d: &common::TestDaemon, id: &str) -> Value {
    let pending = d
        .eventually("/api/v1/approvals?status=pending", 30, |p| {
            p["items"]
                .as_array()
                .unwrap()
                .iter()
                .any(|a| a["request_id"] == id)
        })
        .await;
    pending["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["request_id"] == id)
        .unwrap()
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_incident_class_no_rule_knows_is_learned_from_a_reviewers_verified_fix() {
    let Some(first) = Kube::new("unknown1").await else {
        return;
    };
    let second = Kube::new("unknown2").await.unwrap();
    let third = Kube::new("unknown3").await.unwrap();
    let d = serving(&first, |_| {}).await;
    let viewer =
        common::create_key(d.store.as_ref(), kubemedic::domain::Role::Viewer, "vera").await;
    let post = |path: String, key: String, body: Value| {
        d.client
            .post(d.url(&path))
            .bearer_auth(key)
            .json(&body)
            .send()
    };
    let approve = |aid: &str| {
        post(
            format!("/api/v1/approvals/{aid}/decision"),
            common::API_TOKEN.into(),
            json!({"decision": "approve"}),
        )
    };

    // First occurrence: no rule determines the cause, so kubemedic proposes nothing.
    let (_, alert) = common::incident::all_wedged(&first).await;
    let v: Value = d
        .send_alertmanager(&alert.to_string())
        .await
        .json()
        .await
        .unwrap();
    let reviewed = v["outcomes"][0]["request_id"].as_str().unwrap().to_owned();
    let req = d
        .eventually(&format!("/api/v1/requests/{reviewed}"), 60, is_terminal)
        .await;
    assert_eq!(req["phase"], "ManualReviewRequired", "{req:#}");
    assert_eq!(
        req["state"]["selection"]["selected"],
        Value::Null,
        "{req:#}"
    );
    let signature = req["state"]["analysis"]["signature"].clone();
    assert_eq!(signature["facts"]["pod_states"], json!(["not-ready"]));

    // The request page offers an approver the workflows that fit the target.
    let page = d
        .client
        .get(d.url(&format!("/requests/{reviewed}")))
        .bearer_auth(common::API_TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("Remediate after review") && page.contains(r#"value="restart-rolling""#),
        "the request page offers the takeover"
    );

    // A viewer may not; a workflow that does not exist is named; then the reviewer asks for
    // the rolling restart.
    let path = format!("/api/v1/requests/{reviewed}/remediate");
    let r = post(
        path.clone(),
        viewer.clone(),
        json!({"workflow_id": "restart-rolling"}),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 403, "{}", r.text().await.unwrap());
    let r = post(
        path.clone(),
        common::API_TOKEN.into(),
        json!({"workflow_id": "reboot-the-datacenter"}),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 400);
    assert!(
        r.text().await.unwrap().contains("reboot-the-datacenter"),
        "the error names the workflow"
    );
    let r = post(
        path.clone(),
        common::API_TOKEN.into(),
        json!({"workflow_id": "restart-rolling",
               "message": "the pods wedged after the cache failover; a restart clears it"}),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 202, "{}", r.text().await.unwrap());
    let opened: Value = r.json().await.unwrap();
    let rid = opened["request_id"].as_str().unwrap().to_owned();
    assert_ne!(rid, reviewed);

    // The new request: investigated afresh, the reviewer's workflow proven and gated, and an
    // approver confirms it — the policy alone never runs a reviewer's request.
    let req = d
        .eventually(&format!("/api/v1/requests/{rid}"), 60, |r| {
            r["phase"] == "AwaitingApproval" || is_terminal(r)
        })
        .await;
    assert_eq!(req["phase"], "AwaitingApproval", "{req:#}");
    assert_eq!(req["signal"]["source"], "review", "{req:#}");
    assert_eq!(req["signal"]["requested"]["follows"], reviewed.as_str());
    assert_eq!(
        req["state"]["selection"]["selected"]["workflow_id"],
        "restart-rolling"
    );
    assert_eq!(req["state"]["proof"]["verdict"], "proven", "{req:#}");
    assert_eq!(req["state"]["proof"]["proposer"], "reviewer");
    assert_eq!(req["state"]["gate"]["require_approval"], true);
    assert_eq!(
        req["state"]["analysis"]["signature"]["hash"], signature["hash"],
        "the fresh investigation sees the same incident class"
    );
    // Both trails name each other.
    let back = d
        .eventually(&format!("/api/v1/requests/{reviewed}"), 10, |r| {
            kinds(r).contains(&"review_takeover".to_owned())
        })
        .await;
    assert!(
        event(&back, "review_takeover")["message"]
            .as_str()
            .unwrap()
            .contains(&rid)
    );
    // Taking over a request that is not closed is refused.
    let r = post(
        format!("/api/v1/requests/{rid}/remediate"),
        common::API_TOKEN.into(),
        json!({"workflow_id": "restart-rolling"}),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 409);

    let approval = approval_of(&d, &rid).await;
    assert_eq!(approval["workflow_id"], "restart-rolling");
    let r = approve(approval["id"].as_str().unwrap()).await.unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    let node = kubelet(&first);
    let done = resolve_and_finish(&d, &alert, &rid).await;
    node.abort();
    assert_eq!(done["phase"], "Completed", "{done:#}");
    assert_eq!(done["state"]["assessment"]["effective"], true, "{done:#}");
    let learned = event(&done, "pattern_learned");
    assert_eq!(
        learned["payload"]["outcome"]["workflow_id"],
        "restart-rolling"
    );
    assert_eq!(learned["payload"]["outcome"]["effective"], true);

    // Second occurrence, another namespace: kubemedic now proposes the restart itself, from
    // the learned pattern, and a person still decides.
    let (_, alert) = common::incident::all_wedged(&second).await;
    let (req, approval) = awaiting(&d, &alert).await;
    let rid = req["id"].as_str().unwrap().to_owned();
    assert_eq!(req["signal"]["source"], "alertmanager");
    assert_eq!(
        req["state"]["analysis"]["signature"]["hash"],
        signature["hash"]
    );
    assert_eq!(approval["workflow_id"], "restart-rolling", "{approval:#}");
    assert_eq!(approval["proof"]["verdict"], "proven", "{approval:#}");
    let used = &req["state"]["selection"]["learned"];
    assert_eq!(used["instead_of"], Value::Null, "{used:#}");
    assert!(
        used["reason"].as_str().unwrap().contains("no rule knows"),
        "{used:#}"
    );
    assert_eq!(req["state"]["gate"]["require_approval"], true);
    assert!(
        req["state"]["gate"]["risk_factors"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["reason"].as_str().unwrap().contains("learned pattern")),
        "the gate records that a person decides a learned proposal: {:#}",
        req["state"]["gate"]
    );
    assert!(kinds(&req).contains(&"learned_hint".to_owned()));
    let r = approve(approval["id"].as_str().unwrap()).await.unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    // This time the alert never resolves: not effective, so the pattern cools down.
    let node = kubelet(&second);
    let done = d
        .eventually(&format!("/api/v1/requests/{rid}"), 120, is_terminal)
        .await;
    node.abort();
    assert_eq!(done["state"]["assessment"]["effective"], false, "{done:#}");

    // Third occurrence: nothing to propose again; a human reviews it.
    let (_, alert) = common::incident::all_wedged(&third).await;
    let v: Value = d
        .send_alertmanager(&alert.to_string())
        .await
        .json()
        .await
        .unwrap();
    let id = v["outcomes"][0]["request_id"].as_str().unwrap().to_owned();
    let req = d
        .eventually(&format!("/api/v1/requests/{id}"), 60, is_terminal)
        .await;
    assert_eq!(req["phase"], "ManualReviewRequired", "{req:#}");
    let hints = req["state"]["analysis"]["learned"].as_array().unwrap();
    assert!(
        hints
            .iter()
            .any(|p| p["workflow_id"] == "restart-rolling" && p["suppressed"] == true),
        "{hints:#?}"
    );
    d.stop().await;
}
