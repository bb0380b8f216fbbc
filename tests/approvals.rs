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

use common::incident::{
    ALICE, KEY, awaiting, is_terminal, kubelet, mails_for, production_incident, resolve_and_finish,
};

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
        // What the mail shows: the dry run's change, what was checked, the binding.
        assert!(
            html.contains("What would change (the API server&#39;s dry run)")
                && html.contains(
                    "image of container checkout shop/checkout:1.4.2 → shop/checkout:1.4.1"
                ),
            "{html}"
        );
        assert!(
            html.contains("What was checked against the cluster")
                && html.contains("<li>[holds] The revision to return to is named"),
            "{html}"
        );
        assert!(html.contains("Bound to spec"), "{html}");
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
    let (d, alert) =
        production_incident(&k, |a| a.pipeline.approval_timeout_seconds = Some(4)).await;
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
        "rejected by key:api-token via api: not during the sale"
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

// --- The channels, end to end: real SMTP (maildev) and the Slack emulator.

const PUBLIC: &str = "https://kubemedic.example.test";

/// The link in `text` that starts with the public URL and contains `/approve?` or `/deny?`,
/// as a path on the test daemon.
fn link_in(text: &str, decision: &str) -> String {
    let start = text
        .find(&format!("{PUBLIC}/approvals/"))
        .and_then(|_| {
            text.match_indices(&format!("{PUBLIC}/approvals/"))
                .map(|(i, _)| i)
                .find(|&i| {
                    text[i..]
                        .split_whitespace()
                        .next()
                        .unwrap()
                        .contains(&format!("/{decision}?t="))
                })
        })
        .unwrap_or_else(|| panic!("no {decision} link in {text}"));
    let url = text[start..].split_whitespace().next().unwrap();
    url.trim_start_matches(PUBLIC)
        .trim_end_matches(['>', ')', '.'])
        .to_owned()
}

/// Done when: a staged production incident waits for approval; the mail arrives at the real
/// SMTP server; opening its link decides nothing; submitting the confirmation approves; the
/// rollback runs, is verified and completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_approval_mail_arrives_and_its_confirmed_link_runs_the_rollback() {
    let (Some(smtp), Some(user), Some(pass), Some(api)) = (
        common::component("KUBEMEDIC_TEST_SMTP_URL", "maildev (SMTP)"),
        common::component("KUBEMEDIC_TEST_SMTP_USERNAME", "maildev (SMTP)"),
        common::component("KUBEMEDIC_TEST_SMTP_PASSWORD", "maildev (SMTP)"),
        common::component("KUBEMEDIC_TEST_MAILDEV_API", "maildev (HTTP API)"),
    ) else {
        return;
    };
    let Some(k) = Kube::new("apprm").await else {
        return;
    };
    let (d, alert) = production_incident(&k, |a| {
        a.mail.smtp_url = Some(smtp);
        a.mail.smtp_username = Some(user);
        a.mail.smtp_password = Some(Secret::new(pass));
        a.mail.email_from = Some("kubemedic <kubemedic@example.test>".into());
        a.approvals.public_url = Some(PUBLIC.into());
    })
    .await;
    let (req, approval) = awaiting(&d, &alert).await;
    let rid = req["id"].as_str().unwrap().to_owned();
    let aid = approval["id"].as_str().unwrap().to_owned();

    // One mail per approver, each with its own links.
    let mails = mails_for(&api, &aid, 2).await;
    let to_alice = mails
        .iter()
        .find(|m| m["to"].to_string().contains(ALICE))
        .unwrap_or_else(|| panic!("no mail to {ALICE}: {mails:#?}"));
    let text = to_alice["text"].as_str().unwrap();
    assert!(
        text.contains("checkout") && text.contains("production"),
        "{text}"
    );
    let approve = link_in(text, "approve");
    // Beside the decision links, one to the request's page on the dashboard, which decides
    // nothing and shows nothing before a login.
    let review = format!("{PUBLIC}/requests/{rid}");
    assert!(text.contains(&format!("Review:  {review}")), "{text}");
    assert!(
        to_alice["html"].as_str().unwrap().contains(&review),
        "{to_alice:#}"
    );
    let page = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(d.url(&format!("/requests/{rid}")))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 303);
    assert_eq!(
        page.headers()["location"],
        format!("/login?next=%2Frequests%2F{rid}").as_str()
    );
    let to_bob = mails
        .iter()
        .find(|m| m["to"].to_string().contains("bob@"))
        .unwrap();
    assert_ne!(
        link_in(to_bob["text"].as_str().unwrap(), "approve"),
        approve
    );

    // Delivery is audited and recorded.
    let stored = d.api(&format!("/api/v1/approvals/{aid}")).await;
    let delivered = stored["notifications"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["channel"] == "email" && n["status"] == "delivered")
        .count();
    assert_eq!(delivered, 2, "{stored:#}");

    // Opening the link (as a scanner would, twice) decides nothing.
    for _ in 0..2 {
        let (status, html) = get_page(&d, &approve).await;
        assert_eq!(status, 200, "{html}");
    }
    assert_eq!(
        d.api(&format!("/api/v1/requests/{rid}")).await["phase"],
        "AwaitingApproval"
    );

    let kubelet = kubelet(&k);
    let (status, html) = post_form(&d, &approve, &[("message", "ok from mail")]).await;
    assert_eq!(status, 200, "{html}");
    let done = resolve_and_finish(&d, &alert, &rid).await;
    kubelet.abort();
    assert_eq!(done["phase"], "Completed", "{done:#}");
    assert_eq!(done["state"]["approval"]["decided_by"], ALICE);
    assert_eq!(done["state"]["approval"]["decided_via"], "email");
    // The offers are followed by the outcome, so nobody acts on the old links.
    let after = mails_for(&api, &aid, 4).await;
    assert!(
        after.iter().any(|m| m["subject"]
            .as_str()
            .unwrap_or("")
            .to_lowercase()
            .contains("approved")
            || m["text"].as_str().unwrap_or("").contains("no longer work")),
        "{after:#?}"
    );
    d.stop().await;
}

/// An approval is bound to what was shown (issue 26): a production rollback waits for approval,
/// someone fixes the Deployment by hand meanwhile, then the approver confirms the mail's link.
/// kubemedic writes nothing — not the "previous revision", not a stamp — ends the request saying
/// the target changed, and tells both approvers by mail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_approval_writes_nothing_and_the_approvers_are_told() {
    let (Some(smtp), Some(user), Some(pass), Some(api)) = (
        common::component("KUBEMEDIC_TEST_SMTP_URL", "maildev (SMTP)"),
        common::component("KUBEMEDIC_TEST_SMTP_USERNAME", "maildev (SMTP)"),
        common::component("KUBEMEDIC_TEST_SMTP_PASSWORD", "maildev (SMTP)"),
        common::component("KUBEMEDIC_TEST_MAILDEV_API", "maildev (HTTP API)"),
    ) else {
        return;
    };
    let Some(k) = Kube::new("apprs").await else {
        return;
    };
    let (d, alert) = production_incident(&k, |a| {
        a.mail.smtp_url = Some(smtp);
        a.mail.smtp_username = Some(user);
        a.mail.smtp_password = Some(Secret::new(pass));
        a.mail.email_from = Some("kubemedic <kubemedic@example.test>".into());
        a.approvals.public_url = Some(PUBLIC.into());
    })
    .await;
    let (req, approval) = awaiting(&d, &alert).await;
    let rid = req["id"].as_str().unwrap().to_owned();
    let aid = approval["id"].as_str().unwrap().to_owned();

    // The approver is shown what was proven and the change the API server's dry run describes,
    // with the revision named.
    let proof = &approval["proof"];
    assert_eq!(proof["verdict"], "proven", "{approval:#}");
    assert_eq!(proof["parameters"]["TO_REVISION"], 1, "{proof:#}");
    let change = proof["change"]["objects"].to_string();
    assert!(
        change.contains("shop/checkout:1.4.2 → shop/checkout:1.4.1"),
        "{proof:#}"
    );
    let mails = mails_for(&api, &aid, 2).await;
    let to_alice = mails
        .iter()
        .find(|m| m["to"].to_string().contains(ALICE))
        .unwrap();
    let approve = link_in(to_alice["text"].as_str().unwrap(), "approve");

    // Someone fixes it by hand while the approval waits.
    k.patch(
        "apps/v1",
        "Deployment",
        "checkout",
        json!({"spec": {"template": {"spec": {"containers": [{"name": "checkout", "image": "shop/checkout:1.4.3"}]}}}}),
    )
    .await;
    let fixed = k.get("apps/v1", "Deployment", "checkout").await;

    let (status, html) = post_form(&d, &approve, &[("message", "go")]).await;
    assert_eq!(status, 200, "{html}");
    let done = d
        .eventually(&format!("/api/v1/requests/{rid}"), 60, |r| {
            r["phase"]
                .as_str()
                .and_then(kubemedic::domain::Phase::parse)
                .is_some_and(kubemedic::domain::Phase::is_terminal)
        })
        .await;
    assert_eq!(done["phase"], "ManualReviewRequired", "{done:#}");
    let reason = done["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("target_changed") && reason.contains("nothing was written"),
        "{reason}"
    );
    assert!(reason.contains("shop/checkout:1.4.3"), "{reason}");
    assert!(done["state"]["execution"].is_null(), "{done:#}");

    // Nothing was written: the Deployment is as the person left it.
    let now = k.get("apps/v1", "Deployment", "checkout").await;
    assert_eq!(
        now["spec"]["template"]["spec"]["containers"][0]["image"],
        "shop/checkout:1.4.3"
    );
    assert_eq!(
        now["metadata"]["generation"],
        fixed["metadata"]["generation"]
    );
    assert!(
        now["metadata"]["annotations"]
            .get("kubemedic.io/remediation")
            .is_none(),
        "{now:#}"
    );

    // Both approvers are told, and the trail says why. The decision's own mail may already
    // carry the note (when it is written after the note), so each approver is told at least
    // once, whichever mail tells them.
    let mut told_to: Vec<String> = Vec::new();
    for _ in 0..300 {
        told_to = mails_for(&api, &aid, 2)
            .await
            .iter()
            .filter(|m| m["text"].as_str().unwrap_or("").contains("Not executed"))
            .filter_map(|m| m["to"][0]["address"].as_str().map(str::to_owned))
            .collect();
        told_to.sort();
        told_to.dedup();
        if told_to.len() == 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(told_to, [ALICE, "bob@example.com"], "not told: {told_to:?}");
    let stored = d.api(&format!("/api/v1/approvals/{aid}")).await;
    assert!(
        stored["note"].as_str().unwrap().contains("target_changed"),
        "{stored:#}"
    );
    let events = audit_messages(&d, &rid, "approval_not_executed").await;
    assert_eq!(events.len(), 1, "{events:#?}");
    d.stop().await;
}

/// A mail server that refuses every connection: the approval exists all the same, the failed
/// attempt and the next one are visible, and it is decided through the API.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_smtp_server_loses_nothing_and_the_retries_are_visible() {
    let Some(k) = Kube::new("apprf").await else {
        return;
    };
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let (d, alert) = production_incident(&k, |a| {
        a.mail.smtp_url = Some(format!("smtp://127.0.0.1:{closed}"));
        a.mail.email_from = Some("kubemedic@example.test".into());
        a.approvals.public_url = Some(PUBLIC.into());
    })
    .await;
    let (req, approval) = awaiting(&d, &alert).await;
    let rid = req["id"].as_str().unwrap().to_owned();
    let aid = approval["id"].as_str().unwrap().to_owned();
    let stored = d
        .eventually(&format!("/api/v1/approvals/{aid}"), 20, |a| {
            a["notifications"]
                .as_array()
                .unwrap()
                .iter()
                .all(|n| n["attempts"] == 1)
        })
        .await;
    for n in stored["notifications"].as_array().unwrap() {
        assert_eq!(n["status"], "pending", "{n:#}");
        assert!(
            n["last_error"]
                .as_str()
                .unwrap()
                .contains(&closed.to_string()),
            "{n:#}"
        );
        assert!(n["next_attempt_at"].is_string(), "{n:#}");
    }
    let attempts = audit_messages(&d, &rid, "notification").await;
    assert!(
        attempts
            .iter()
            .any(|m| m.contains("attempt 1 of 5 failed") && m.contains("next attempt at")),
        "{attempts:#?}"
    );
    let metrics = d
        .client
        .get(d.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(
            "kubemedic_notifications_total{channel=\"email\",kind=\"offer\",result=\"retry\"} 2"
        ),
        "{metrics}"
    );
    let kubelet = kubelet(&k);
    let r = d
        .client
        .post(d.url(&format!("/api/v1/approvals/{aid}/decision")))
        .bearer_auth(common::API_TOKEN)
        .json(&json!({"decision": "approve"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let done = resolve_and_finish(&d, &alert, &rid).await;
    kubelet.abort();
    assert_eq!(done["phase"], "Completed", "{done:#}");
    assert_eq!(done["state"]["approval"]["decided_via"], "api");
    d.stop().await;
}

struct Slack {
    api: String,
    token: String,
    channel: String,
}

fn slack() -> Option<Slack> {
    let what = "the Slack emulator";
    Some(Slack {
        api: common::component("KUBEMEDIC_TEST_SLACK_API_URL", what)?,
        token: common::component("KUBEMEDIC_TEST_SLACK_BOT_TOKEN", what)?,
        channel: common::component("KUBEMEDIC_TEST_SLACK_CHANNEL", what)?,
    })
}

async fn slack_history(s: &Slack) -> Vec<Value> {
    let list: Value = reqwest::Client::new()
        .post(format!("{}/conversations.list", s.api))
        .bearer_auth(&s.token)
        .json(&json!({"limit": 1000}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let channel = list["channels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == s.channel.trim_start_matches('#') || c["id"] == s.channel.as_str())
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .unwrap_or_else(|| s.channel.clone());
    let answer: Value = reqwest::Client::new()
        .post(format!("{}/conversations.history", s.api))
        .bearer_auth(&s.token)
        .json(&json!({"channel": channel, "limit": 1000}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answer["ok"], true, "{answer}");
    answer["messages"].as_array().unwrap().clone()
}

const SIGNING: &str = "slack-signing-secret-for-tests";
const SLACK_APPROVER: &str = "U0APPROVE1";

fn click(approval: &str, user: &str, action: &str, response_url: &str) -> String {
    let payload = json!({
        "type": "block_actions",
        "user": {"id": user, "username": "alice", "name": "alice", "team_id": "T0TEAM"},
        "team": {"id": "T0TEAM", "domain": "example"},
        "channel": {"id": "C0APPROVAL", "name": "approvals"},
        "container": {"type": "message", "message_ts": "1906020000.000100", "channel_id": "C0APPROVAL"},
        "response_url": response_url,
        "actions": [{
            "action_id": action,
            "block_id": "kubemedic_approval",
            "value": approval,
            "type": "button",
            "action_ts": "1906020290.123456"
        }]
    });
    format!("payload={}", urlencode(&payload.to_string()))
}

async fn post_interaction(
    d: &common::TestDaemon,
    body: &str,
    secret: &str,
    at: chrono::DateTime<Utc>,
) -> u16 {
    let ts = at.timestamp();
    let signature = kubemedic::approval::slack::sign(&Secret::new(secret), ts, body.as_bytes());
    d.client
        .post(d.url("/api/v1/slack/interactions"))
        .header("content-type", "application/x-www-form-urlencoded")
        .header(kubemedic::approval::slack::TIMESTAMP_HEADER, ts.to_string())
        .header(kubemedic::approval::slack::SIGNATURE_HEADER, signature)
        .body(body.to_owned())
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// The same through Slack: the message with its buttons arrives at the emulator; badly signed,
/// stale, replayed clicks and a click by someone who is not an approver decide nothing; a
/// correctly signed click by an approver approves, the rollback runs, and the message's
/// buttons are replaced by the outcome.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slack_button_approves_and_forged_stale_or_replayed_clicks_do_not() {
    let Some(s) = slack() else {
        return;
    };
    let Some(k) = Kube::new("apprs").await else {
        return;
    };
    let (api, token, channel) = (s.api.clone(), s.token.clone(), s.channel.clone());
    let (d, alert) = production_incident(&k, |a| {
        a.approvals.approvers = None;
        a.slack.slack_bot_token = Some(Secret::new(token));
        a.slack.slack_channel = Some(channel);
        a.slack.slack_api_url = Some(api);
        a.slack.slack_signing_secret = Some(Secret::new(SIGNING));
        a.slack.slack_approvers = Some(vec![SLACK_APPROVER.into()]);
        a.approvals.public_url = Some(PUBLIC.into());
    })
    .await;
    let (req, approval) = awaiting(&d, &alert).await;
    let rid = req["id"].as_str().unwrap().to_owned();
    let aid = approval["id"].as_str().unwrap().to_owned();

    // The message, with both buttons.
    let mut offer = None;
    for _ in 0..100 {
        offer = slack_history(&s)
            .await
            .into_iter()
            .find(|m| m.to_string().contains(&aid));
        if offer.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let offer = offer.expect("the approval message reached Slack");
    let buttons = offer.to_string();
    assert!(
        buttons.contains("\"action_id\":\"approve\"") && buttons.contains("\"action_id\":\"deny\""),
        "{offer:#}"
    );
    // No signed link in a channel: anyone reading it could decide with one.
    assert!(!buttons.contains("/approvals/"), "{offer:#}");

    // The emulator sends no clicks and has no response_url: its incoming webhook takes the same
    // JSON, so the answers go there.
    let hook = common::component("KUBEMEDIC_TEST_SLACK_WEBHOOK_URL", "the Slack emulator").unwrap();
    let approve = click(&aid, SLACK_APPROVER, "approve", &hook);
    let now = Utc::now();
    assert_eq!(
        post_interaction(&d, &approve, "wrong-secret", now).await,
        401,
        "bad signature"
    );
    assert_eq!(
        post_interaction(&d, &approve, SIGNING, now - chrono::Duration::minutes(6)).await,
        401,
        "stale"
    );
    let stranger = click(&aid, "U0STRANGER", "approve", &hook);
    assert_eq!(post_interaction(&d, &stranger, SIGNING, now).await, 200);
    let refused = d
        .eventually(&format!("/api/v1/requests/{rid}"), 10, |r| {
            r["timeline"].as_array().unwrap().iter().any(|e| {
                e["kind"] == "approval_refused"
                    && e["message"].as_str().unwrap().contains("U0STRANGER")
            })
        })
        .await;
    assert_eq!(refused["phase"], "AwaitingApproval");

    let kubelet = kubelet(&k);
    assert_eq!(post_interaction(&d, &approve, SIGNING, now).await, 200);
    // The very same signed request again: a replay.
    assert_eq!(
        post_interaction(&d, &approve, SIGNING, now).await,
        409,
        "replay"
    );

    let done = resolve_and_finish(&d, &alert, &rid).await;
    kubelet.abort();
    assert_eq!(done["phase"], "Completed", "{done:#}");
    assert_eq!(done["state"]["approval"]["decided_via"], "slack");
    assert!(
        done["state"]["approval"]["decided_by"]
            .as_str()
            .unwrap()
            .starts_with(&format!("slack:{SLACK_APPROVER}")),
        "{done:#}"
    );
    // No stale buttons: the message now says what happened instead.
    let mut updated = None;
    for _ in 0..100 {
        updated = slack_history(&s).await.into_iter().find(|m| {
            m.to_string().contains(&aid) && !m.to_string().contains("\"action_id\":\"approve\"")
        });
        if updated.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let updated = updated.expect("the buttons were replaced");
    assert!(updated.to_string().contains("Approved"), "{updated:#}");
    let refusals = audit_messages(&d, &rid, "approval_refused").await;
    assert!(
        refusals.iter().any(|m| m.contains("U0STRANGER")),
        "{refusals:#?}"
    );
    d.stop().await;
}

/// An approver may pick one of the selection's alternatives instead of the selected workflow;
/// what runs is proven and gated like anything else. A pod of checkout is wedged: the model
/// selects deleting it, with a rolling restart as the alternative, and both are provable here.
/// The approval policy (the shipped one, plus a rule about restarts) first cannot decide on the
/// alternative, which is refused; reloaded with a rule that makes restarting a production
/// Deployment a high risk (95), it decides, the dashboard asks for the target's name although
/// the selected deletion is only 70, and once approved the request runs the restart with its
/// proof and the policy's decision on it in its state and trail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alternative_an_approver_picks_goes_through_the_approval_policy() {
    use common::llm::{ScriptedLlm, calls};
    let Some(k) = Kube::new("apalt").await else {
        return;
    };
    let (wedged, alert) = common::incident::wedged_pod(&k).await;
    let target = json!({"kind": "Deployment", "name": "checkout", "namespace": k.ns});
    let model = ScriptedLlm::start(vec![
        calls(&[("get_namespaced_resource_context", target.clone())]),
        calls(&[(
            "submit_result",
            json!({
                "root_cause_analysis": {
                    "summary": "One pod of checkout is wedged: its readiness probe fails",
                    "severity": "high",
                    "contributing_factors": [format!("pod {wedged} is not ready for 10 minutes; its siblings serve")],
                    "remediation_target": target,
                    "investigation_analysis": "A wedged process in one pod."
                },
                "confidence": 0.9, "investigation_outcome": "actionable", "actionable": true
            }),
        )]),
        calls(&[(
            "submit_result_with_workflow",
            json!({"selected_workflow": {"workflow_id": "delete-pod",
                    "confidence": 0.9, "rationale": "replace the wedged pod", "parameters": {"POD_NAME": wedged}},
                "alternative_workflows": [{"workflow_id": "restart-rolling",
                    "rationale": "if the others are about to wedge too"}]}),
        )]),
    ])
    .await;
    let policies = tempfile::tempdir().unwrap();
    let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    for name in ["approval.rego", "enrichment.rego"] {
        std::fs::copy(shipped.join(name), policies.path().join(name)).unwrap();
    }
    // A rule that conflicts with the shipped `reason` for a restart: evaluating it fails.
    let extra = policies.path().join("restarts.rego");
    std::fs::write(
        &extra,
        "package kubemedic.approval\n\nreason := \"restarts\" if input.action_type == \"RestartDeployment\"\n",
    )
    .unwrap();
    let base_url = format!("{}/v1", model.base_url);
    let policy_dir = policies.path().to_owned();
    let d = common::incident::serving(&k, move |a| {
        a.gate.policy_dir = Some(policy_dir);
        a.investigate.llm = Some(kubemedic::config::LlmMode::Openai);
        a.investigate.llm_base_url = Some(base_url);
        a.investigate.llm_api_key = Some(Secret::new("sk-alternatives"));
        a.investigate.llm_model = Some("gpt-4o".into());
    })
    .await;
    let (req, approval) = awaiting(&d, &alert).await;
    let rid = req["id"].as_str().unwrap().to_owned();
    let aid = approval["id"].as_str().unwrap().to_owned();
    assert_eq!(approval["workflow_id"], "delete-pod");
    assert_eq!(approval["proof"]["verdict"], "proven", "{approval:#}");
    assert_eq!(approval["risk_score"], 70, "{approval:#}");
    let decide = |body: Value| {
        d.client
            .post(d.url(&format!("/api/v1/approvals/{aid}/decision")))
            .bearer_auth(common::API_TOKEN)
            .json(&body)
            .send()
    };

    let r = decide(json!({"decision": "approve", "alternative": "restart-rolling"}))
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    let why = r.text().await.unwrap();
    assert!(why.contains("cannot decide on restart-rolling"), "{why}");
    let refused = audit_messages(&d, &rid, "approval_refused").await;
    assert!(
        refused
            .iter()
            .any(|m| m.contains("cannot decide on restart-rolling")),
        "{refused:#?}"
    );
    assert_eq!(
        d.api(&format!("/api/v1/requests/{rid}")).await["phase"],
        "AwaitingApproval"
    );

    // The policy is fixed: a restart in production is a high risk. It is reloaded in place.
    let revision = d.api("/api/v1/policy").await["revision"].clone();
    std::fs::write(
        &extra,
        "package kubemedic.approval\n\nrisk_factors contains {\"score\": 95, \"reason\": \
         \"restarting a production Deployment drops the requests in flight\"} if {\n\
         \tis_production\n\tinput.action_type == \"RestartDeployment\"\n}\n",
    )
    .unwrap();
    d.eventually("/api/v1/policy", 30, |p| p["revision"] != revision)
        .await;

    let inbox = |confirm: &'static str| {
        d.client
            .post(d.url(&format!("/inbox/{aid}")))
            .bearer_auth(common::API_TOKEN)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!(
                "decision=approve&alternative=restart-rolling&confirm={confirm}"
            ))
            .send()
    };
    let r = inbox("").await.unwrap();
    assert_eq!(r.status(), 422);
    let page = r.text().await.unwrap();
    assert!(
        page.contains("risk 95") && page.contains("checkout"),
        "{page}"
    );
    let r = inbox("checkout").await.unwrap();
    assert!(
        r.status().is_redirection() || r.status() == 200,
        "{}",
        r.status()
    );

    let done = d
        .eventually(&format!("/api/v1/requests/{rid}"), 60, |r| {
            r["phase"] != "AwaitingApproval"
        })
        .await;
    assert_eq!(done["phase"], "Executing", "{done:#}");
    assert_eq!(
        done["state"]["selection"]["selected"]["workflow_id"],
        "restart-rolling"
    );
    // The gate's own decision stays in the state (a human was asked: the summary does not
    // count this as auto-approved); the policy's answer on the alternative is in the trail.
    assert_eq!(done["state"]["gate"]["require_approval"], true);
    let gates: Vec<&Value> = done["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "gate")
        .collect();
    assert_eq!(
        gates.len(),
        2,
        "the gate, then the policy on the alternative"
    );
    assert_eq!(gates[1]["payload"]["alternative"], "restart-rolling");
    let scores: Vec<i64> = gates[1]["payload"]["output"]["risk_factors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["score"].as_i64().unwrap())
        .collect();
    assert!(scores.contains(&95), "{:#}", gates[1]);
    assert_eq!(
        gates[1]["payload"]["input"]["action_type"],
        "RestartDeployment"
    );
    assert_eq!(
        gates[1]["payload"]["input"]["proof"]["verdict"], "proven",
        "{:#}",
        gates[1]
    );
    // What runs is bound to what was proven for it: the approver's restart.
    assert_eq!(done["state"]["proof"]["action_type"], "RestartDeployment");
    assert_eq!(done["state"]["proof"]["proposer"], "approver");
    d.stop().await;
}

/// An approver's alternative is proven like anyone's proposal: on a crash-looping rollout a
/// rolling restart helps nobody (the pods crash on start), so picking it is refused with the
/// obligation that fails, audited, and nothing is decided.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alternative_whose_obligations_fail_is_refused() {
    use common::llm::{ScriptedLlm, bad_rollout_investigation, calls};
    let Some(k) = Kube::new("apaltr").await else {
        return;
    };
    let target = json!({"kind": "Deployment", "name": "checkout", "namespace": k.ns});
    let mut script = bad_rollout_investigation(&target);
    script.extend([
        calls(&[(
            "submit_result_with_workflow",
            json!({"selected_workflow": {"workflow_id": "rollback-deployment-previous-revision",
                    "confidence": 0.9, "rationale": "the previous revision ran", "parameters": {"TO_REVISION": 1}},
                "alternative_workflows": [{"workflow_id": "restart-rolling",
                    "rationale": "if the crash is a transient dependency"}]}),
        )]),
    ]);
    let model = ScriptedLlm::start(script).await;
    let base_url = format!("{}/v1", model.base_url);
    let (d, alert) = production_incident(&k, move |a| {
        a.investigate.llm = Some(kubemedic::config::LlmMode::Openai);
        a.investigate.llm_base_url = Some(base_url);
        a.investigate.llm_api_key = Some(Secret::new("sk-alternatives"));
        a.investigate.llm_model = Some("gpt-4o".into());
    })
    .await;
    let (req, approval) = awaiting(&d, &alert).await;
    let rid = req["id"].as_str().unwrap().to_owned();
    let aid = approval["id"].as_str().unwrap().to_owned();
    // The model's rollback is proven (the revision named, the old one serving).
    assert_eq!(approval["proof"]["verdict"], "proven", "{approval:#}");
    let r = d
        .client
        .post(d.url(&format!("/api/v1/approvals/{aid}/decision")))
        .bearer_auth(common::API_TOKEN)
        .json(&json!({"decision": "approve", "alternative": "restart-rolling"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    let why = r.text().await.unwrap();
    assert!(
        why.contains("not proven right and safe") && why.contains("restart.pods-run-but-wedged"),
        "{why}"
    );
    let refused = audit_messages(&d, &rid, "approval_refused").await;
    assert!(
        refused
            .iter()
            .any(|m| m.contains("restart.pods-run-but-wedged")),
        "{refused:#?}"
    );
    let now = d.api(&format!("/api/v1/requests/{rid}")).await;
    assert_eq!(now["phase"], "AwaitingApproval");
    assert_eq!(
        d.api(&format!("/api/v1/approvals/{aid}")).await["status"],
        "pending"
    );
    d.stop().await;
}
