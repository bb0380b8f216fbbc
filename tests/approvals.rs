//! Human approvals on the real API server: a production incident waits for a human; a signed
//! link's GET decides nothing, its form POST approves, the rollback runs and is verified; the
//! API approves or denies; nobody deciding ends in `Expired`; every link attack is refused with
//! a clear page and an audit event, and decides nothing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

mod common;

use std::time::Duration;

use chrono::Utc;
use common::kube::Kube;
use kubemedic::approval::{LinkDecision, LinkSigner};
use kubemedic::secret::Secret;
use serde_json::{Value, json};

const KEY: &str = "test-link-signing-key-0123456789abcdef";
const ALICE: &str = "alice@example.com";

/// A bad rollout staged in `k`'s namespace, labelled production (the shipped policy requires
/// approval there), and the daemon on that cluster with `tweak`.
async fn production_incident(
    k: &Kube,
    tweak: impl FnOnce(&mut kubemedic::config::DaemonArgs),
) -> (common::TestDaemon, Value) {
    let staged = common::scenarios::staged_in("crashloop-rollout", &[k])
        .await
        .remove(0);
    k.patch(
        "v1",
        "Namespace",
        &k.ns,
        json!({"metadata": {"labels": {"kubemedic.io/environment": "production"}}}),
    )
    .await;
    let kubeconfig = k.kubeconfig.clone();
    let policies = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let d = common::TestDaemon::serving(|a| {
        a.cluster.kubeconfig = Some(kubeconfig);
        a.gate.policy_dir = Some(policies);
        a.execute.verification_window_seconds = Some(3);
        a.execute.cooldown_seconds = Some(0);
        a.approvals.approvers = Some(vec![ALICE.into(), "bob@example.com".into()]);
        a.approvals.link_signing_key = Some(Secret::new(KEY));
        tweak(a);
    })
    .await;
    (d, staged.alert)
}

/// Send the alert; wait until its request awaits approval. Returns (request, approval).
async fn awaiting(d: &common::TestDaemon, alert: &Value) -> (Value, Value) {
    let v: Value = d
        .send_alertmanager(&alert.to_string())
        .await
        .json()
        .await
        .unwrap();
    let id = v["outcomes"][0]["request_id"].as_str().unwrap().to_owned();
    let req = d
        .eventually(&format!("/api/v1/requests/{id}"), 60, |r| {
            r["phase"] == "AwaitingApproval"
                || r["phase"]
                    .as_str()
                    .and_then(kubemedic::domain::Phase::parse)
                    .is_some_and(kubemedic::domain::Phase::is_terminal)
        })
        .await;
    assert_eq!(req["phase"], "AwaitingApproval", "{req:#}");
    let pending = d
        .eventually("/api/v1/approvals?status=pending", 10, |p| {
            p["items"]
                .as_array()
                .unwrap()
                .iter()
                .any(|a| a["request_id"] == id.as_str())
        })
        .await;
    let approval = pending["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["request_id"] == id.as_str())
        .unwrap()
        .clone();
    (req, approval)
}

fn is_terminal(r: &Value) -> bool {
    r["phase"]
        .as_str()
        .and_then(kubemedic::domain::Phase::parse)
        .is_some_and(kubemedic::domain::Phase::is_terminal)
}

/// The kubelet: new checkout pods are scheduled and run (the rolled-back image works).
fn kubelet(k: &Kube) -> tokio::task::JoinHandle<()> {
    let k = k.clone_handle();
    let node = format!("{}-worker-1", k.ns);
    tokio::spawn(async move {
        loop {
            common::scenarios::run_unscheduled(&k, "app=checkout", &node).await;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
}

/// Alertmanager: the alert resolves once the rollback is made, and the request completes.
async fn resolve_and_finish(d: &common::TestDaemon, alert: &Value, id: &str) -> Value {
    d.eventually(&format!("/api/v1/requests/{id}"), 90, |r| {
        r["phase"] == "Verifying" || is_terminal(r)
    })
    .await;
    let mut resolved = alert.clone();
    resolved["status"] = json!("resolved");
    resolved["alerts"][0]["status"] = json!("resolved");
    resolved["alerts"][0]["endsAt"] = json!(Utc::now().to_rfc3339());
    assert_eq!(
        d.send_alertmanager(&resolved.to_string()).await.status(),
        200
    );
    d.eventually(&format!("/api/v1/requests/{id}"), 90, is_terminal)
        .await
}

fn link(approval: &str, to: &str, decision: LinkDecision, expires_in: i64) -> String {
    let signer = LinkSigner::new(Secret::new(KEY));
    let token = signer.sign(
        approval.parse().unwrap(),
        to,
        decision,
        Utc::now() + chrono::Duration::seconds(expires_in),
    );
    format!("/approvals/{approval}/{}?t={token}", decision.as_str())
}

fn token_of(path: &str) -> &str {
    path.split_once("?t=").unwrap().1
}

async fn post_form(d: &common::TestDaemon, path: &str, fields: &[(&str, &str)]) -> (u16, String) {
    let (path, token) = path.split_once("?t=").unwrap();
    let mut form: Vec<(&str, &str)> = vec![("t", token)];
    form.extend_from_slice(fields);
    let body = form
        .iter()
        .map(|(k, v)| format!("{}={}", urlencode(k), urlencode(v)))
        .collect::<Vec<_>>()
        .join("&");
    let r = d
        .client
        .post(d.url(path))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

async fn get_page(d: &common::TestDaemon, path: &str) -> (u16, String) {
    let r = d.client.get(d.url(path)).send().await.unwrap();
    assert_eq!(
        r.headers()["cache-control"],
        "no-store",
        "approval pages are never cached"
    );
    (r.status().as_u16(), r.text().await.unwrap())
}

async fn audit_messages(d: &common::TestDaemon, id: &str, kind: &str) -> Vec<String> {
    d.api(&format!("/api/v1/requests/{id}")).await["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == kind)
        .map(|e| e["message"].as_str().unwrap().to_owned())
        .collect()
}

/// The production rollback waits; the approval carries what a human needs; opening the
/// link decides nothing; every forged, expired, replayed, misdirected link is refused and
/// audited; the high-risk confirmation wants the target's name; the form approves as the
/// link's recipient; the rollback runs once, is verified and completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_production_rollback_is_approved_through_its_link_and_runs_once() {
    let Some(k) = Kube::new("apprl").await else {
        return;
    };
    // The shipped policy scores a production rollback 70; from 70 on, confirming through a
    // link asks for the target's name here.
    let (d, alert) = production_incident(&k, |a| a.approvals.high_risk_score = Some(70)).await;
    let (req, approval) = awaiting(&d, &alert).await;
    let rid = req["id"].as_str().unwrap().to_owned();
    let aid = approval["id"].as_str().unwrap().to_owned();

    // What the approver sees.
    assert_eq!(approval["status"], "pending");
    assert_eq!(
        approval["workflow_id"],
        "rollback-deployment-previous-revision"
    );
    assert_eq!(approval["target"]["name"], "checkout");
    assert_eq!(approval["environment"], "production");
    assert_eq!(approval["risk_score"], 70, "{approval:#}");
    assert!(
        approval["risk_reason"]
            .as_str()
            .unwrap()
            .contains("production")
    );
    assert!(
        approval["policy_revision"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    assert!(
        !approval["evidence"].as_array().unwrap().is_empty(),
        "{approval:#}"
    );
    assert_eq!(approval["approvers"], json!([ALICE, "bob@example.com"]));
    let created =
        chrono::DateTime::parse_from_rfc3339(approval["created_at"].as_str().unwrap()).unwrap();
    let expires =
        chrono::DateTime::parse_from_rfc3339(approval["expires_at"].as_str().unwrap()).unwrap();
    assert!((expires - created).num_seconds() <= 900, "{approval:#}");

    let approve = link(&aid, ALICE, LinkDecision::Approve, 600);

    // A mail scanner fetches the link: a confirmation page, nothing decided.
    for _ in 0..3 {
        let (status, html) = get_page(&d, &approve).await;
        assert_eq!(status, 200, "{html}");
        assert!(html.contains("<form method=\"post\""), "{html}");
        assert!(html.contains("checkout"), "{html}");
        assert!(html.contains(ALICE), "{html}");
    }
    assert_eq!(
        d.api(&format!("/api/v1/requests/{rid}")).await["phase"],
        "AwaitingApproval"
    );

    // Attacks: each refused, each audited, none decides.
    let other = uuid::Uuid::new_v4().to_string();
    let expired = link(&aid, ALICE, LinkDecision::Approve, -5);
    let mallory = link(&aid, "mallory@example.com", LinkDecision::Approve, 600);
    let forged = {
        let signer = LinkSigner::new(Secret::new("not-the-key-0123456789abcdef-000000"));
        let t = signer.sign(
            aid.parse().unwrap(),
            ALICE,
            LinkDecision::Approve,
            Utc::now() + chrono::Duration::minutes(5),
        );
        format!("/approvals/{aid}/approve?t={t}")
    };
    let deny_for_alice = link(&aid, ALICE, LinkDecision::Deny, 600);
    let cases: Vec<(&str, String, u16, &str)> = vec![
        ("forged", forged, 403, "signature is not valid"),
        ("expired", expired, 410, "expired"),
        (
            "wrong recipient",
            mallory,
            403,
            "mallory@example.com is not an approver",
        ),
        (
            "wrong approval",
            format!("/approvals/{other}/approve?t={}", token_of(&approve)),
            403,
            "was issued for approval",
        ),
        (
            "wrong decision",
            format!("/approvals/{aid}/deny?t={}", token_of(&approve)),
            403,
            "issued to approve it, not to deny it",
        ),
        (
            "tampered",
            format!("{}x", approve),
            403,
            "signature is not valid",
        ),
    ];
    for (name, path, status, says) in &cases {
        let (got, html) = get_page(&d, path).await;
        assert_eq!(got, *status, "{name}: {html}");
        assert!(html.contains(says), "{name}: {html}");
        let (got, html) = post_form(&d, path, &[("confirm_target", "checkout")]).await;
        assert_eq!(got, *status, "{name} (POST): {html}");
    }
    let refused = audit_messages(&d, &rid, "approval_refused").await;
    assert!(refused.len() >= 8, "{refused:#?}");
    assert!(
        refused.iter().any(|m| m.contains("mallory")),
        "{refused:#?}"
    );

    // High risk: the form must carry the target's name.
    let (status, html) = post_form(&d, &approve, &[]).await;
    assert_eq!(status, 422, "{html}");
    assert!(html.contains("type the name of the target"), "{html}");
    let (status, _) = post_form(&d, &approve, &[("confirm_target", "payments")]).await;
    assert_eq!(status, 422);
    assert_eq!(
        d.api(&format!("/api/v1/requests/{rid}")).await["phase"],
        "AwaitingApproval",
        "nothing decided yet"
    );

    // The form approves, as the link's recipient (a `decided_by` in the form is ignored).
    let kubelet = kubelet(&k);
    let (status, html) = post_form(
        &d,
        &approve,
        &[
            ("confirm_target", "checkout"),
            ("message", "go ahead"),
            ("decided_by", "ceo@example.com"),
        ],
    )
    .await;
    assert_eq!(status, 200, "{html}");
    assert!(html.contains("approved by alice@example.com"), "{html}");

    // Replayed, and the other link of the same approval: refused, nothing changes.
    let (status, html) = post_form(&d, &approve, &[("confirm_target", "checkout")]).await;
    assert_eq!(status, 409, "{html}");
    let (status, html) = post_form(&d, &deny_for_alice, &[("confirm_target", "checkout")]).await;
    assert_eq!(status, 409, "{html}");
    assert!(html.contains("approved by alice@example.com"), "{html}");

    let done = resolve_and_finish(&d, &alert, &rid).await;
    kubelet.abort();
    assert_eq!(done["phase"], "Completed", "{done:#}");
    assert_eq!(done["state"]["approval"]["decided_by"], ALICE);
    assert_eq!(done["state"]["approval"]["decided_via"], "email");
    assert_eq!(done["state"]["approval"]["message"], "go ahead");
    assert_eq!(
        done["state"]["execution"]["outcome"], "succeeded",
        "{done:#}"
    );
    let deployment = k.get("apps/v1", "Deployment", "checkout").await;
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["image"],
        "shop/checkout:1.4.1"
    );
    let transitions: Vec<String> = done["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "transition")
        .map(|e| e["payload"]["to"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        transitions,
        [
            "Enriching",
            "Investigating",
            "Selecting",
            "Gating",
            "AwaitingApproval",
            "Executing",
            "Verifying",
            "Completed"
        ]
    );
    let decided = audit_messages(&d, &rid, "approval_decided").await;
    assert_eq!(decided.len(), 1, "{decided:#?}");
    assert!(
        decided[0].contains("approved by alice@example.com via email"),
        "{decided:#?}"
    );
    let late = audit_messages(&d, &rid, "approval_refused").await;
    assert!(
        late.iter()
            .filter(|m| m.contains("Already decided via email: approved by alice@example.com"))
            .count()
            >= 2,
        "the replay and the late denial are audited: {late:#?}"
    );
    d.stop().await;
}

/// Through the API: deny ends `Rejected` with nothing run; with a short timeout nobody
/// deciding ends `Expired`, decided by `system`, and a late approval is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denied_ends_rejected_and_undecided_ends_expired() {
    let Some(k) = Kube::new("apprd").await else {
        return;
    };
    let (d, alert) = production_incident(&k, |a| a.approval_timeout_seconds = Some(4)).await;
    let (req, approval) = awaiting(&d, &alert).await;
    let rid = req["id"].as_str().unwrap().to_owned();
    let aid = approval["id"].as_str().unwrap().to_owned();

    // Unauthenticated: refused.
    let r = d
        .client
        .post(d.url(&format!("/api/v1/approvals/{aid}/decision")))
        .json(&json!({"decision": "deny"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    // Bad input: named.
    let r = d
        .client
        .post(d.url(&format!("/api/v1/approvals/{aid}/decision")))
        .bearer_auth(common::API_TOKEN)
        .json(&json!({"decision": "maybe"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("`maybe`"));
    // An alternative that was never offered.
    let r = d
        .client
        .post(d.url(&format!("/api/v1/approvals/{aid}/decision")))
        .bearer_auth(common::API_TOKEN)
        .json(&json!({"decision": "approve", "alternative": "delete-namespace"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert!(
        r.text()
            .await
            .unwrap()
            .contains("not one of the alternatives")
    );

    let r = d
        .client
        .post(d.url(&format!("/api/v1/approvals/{aid}/decision")))
        .bearer_auth(common::API_TOKEN)
        .json(&json!({"decision": "deny", "message": "not during the sale"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let done = d
        .eventually(&format!("/api/v1/requests/{rid}"), 30, is_terminal)
        .await;
    assert_eq!(done["phase"], "Rejected", "{done:#}");
    assert_eq!(
        done["reason"],
        "rejected by api:admin via api: not during the sale"
    );
    assert!(done["state"]["execution"].is_null());
    let again = d
        .client
        .post(d.url(&format!("/api/v1/approvals/{aid}/decision")))
        .bearer_auth(common::API_TOKEN)
        .json(&json!({"decision": "approve"}))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 409);
    let untouched = k.get("apps/v1", "Deployment", "checkout").await;
    assert_eq!(
        untouched["spec"]["template"]["spec"]["containers"][0]["image"],
        "shop/checkout:1.4.2"
    );

    // The same incident again, and nobody decides within 4 s.
    let mut again = alert.clone();
    again["alerts"][0]["startsAt"] = json!(Utc::now().to_rfc3339());
    again["alerts"][0]["fingerprint"] = json!("expiry-round");
    let (req, approval) = awaiting(&d, &again).await;
    let rid = req["id"].as_str().unwrap().to_owned();
    let aid = approval["id"].as_str().unwrap().to_owned();
    let done = d
        .eventually(&format!("/api/v1/requests/{rid}"), 30, is_terminal)
        .await;
    assert_eq!(done["phase"], "Expired", "{done:#}");
    assert_eq!(done["state"]["approval"]["decided_by"], "system");
    let late = link(&aid, ALICE, LinkDecision::Approve, 600);
    let (status, html) = post_form(&d, &late, &[("confirm_target", "checkout")]).await;
    assert_eq!(status, 409, "{html}");
    assert!(html.contains("expired by system"), "{html}");
    let stored = d.api(&format!("/api/v1/approvals/{aid}")).await;
    assert_eq!(stored["status"], "expired");
    d.stop().await;
}
