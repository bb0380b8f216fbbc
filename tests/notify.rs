//! The approval notifiers against real servers: mail through maildev's SMTP servers, read back
//! through its HTTP API (plain SMTP with AUTH, and SMTPS with a throwaway CA), STARTTLS through
//! aiosmtpd with a CA the test makes (`tests/smtp/starttls_server.py`), and Slack through
//! the `emulate` Slack Web API, read back with `conversations.history`. The test script starts
//! both (`scripts/maildev.sh`, `scripts/slack-emulator.sh`). A few failures need no server: a
//! closed port, and a small HTTP stub for the Slack answers the emulator never gives (429 with
//! `Retry-After`, `invalid_auth`). The interaction endpoint's pure functions (Slack's request
//! signature, the `block_actions` payload) are checked here too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

mod common;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use kubemedic::approval::slack::{self as interaction, SlackAuthError};
use kubemedic::clock::{Clock, ManualClock};
use kubemedic::domain::{
    AlternativeWorkflow, ApprovalDecision, ApprovalMessage, ApprovalRequest, Channel, Decision,
    DryRunChange, ObjectChange, Obligation, ObligationStatus, Proof, ProofPoint, ProofVerdict,
    Proposer, Target,
};
use kubemedic::notify::Notifier;
use kubemedic::notify::email::{EmailNotifier, EmailSettings};
use kubemedic::notify::slack::{SlackNotifier, SlackSettings, outcome_message};
use kubemedic::secret::Secret;
use serde_json::{Value, json};
use uuid::Uuid;

const SCRIPT: &str = "<script>alert('pwned')</script>";

fn created() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2030, 6, 1, 12, 0, 0).unwrap()
}

/// An approval as the gate would ask it, with markup planted where alert text and model
/// output go.
fn approval() -> ApprovalRequest {
    let mut parameters = serde_json::Map::new();
    parameters.insert("revision".into(), json!("checkout-7d9f"));
    parameters.insert("replicas".into(), json!(3));
    ApprovalRequest {
        id: Uuid::new_v4(),
        request_id: Uuid::new_v4(),
        created_at: created(),
        expires_at: created() + chrono::Duration::minutes(15),
        signal_name: "KubePodCrashLooping".into(),
        target: Target::new("Deployment", "checkout", Some("prod".into())),
        environment: Some("production".into()),
        summary: format!("The 1.4.2 rollout crashes on start {SCRIPT} & <b>more</b>"),
        evidence: vec![
            "restarts: 17 in 10 minutes".into(),
            "last state OOMKilled <img src=x onerror=alert(1)>".into(),
        ],
        workflow_id: "rollback-deployment".into(),
        workflow_version: "1.2.0".into(),
        action_type: "RollbackDeployment".into(),
        parameters,
        rationale: "the previous revision ran for 9 days without a restart".into(),
        alternatives: vec![
            AlternativeWorkflow {
                workflow_id: "increase-memory".into(),
                rationale: "would help only if the OOM were the cause".into(),
            },
            AlternativeWorkflow {
                workflow_id: "restart-deployment".into(),
                rationale: String::new(),
            },
        ],
        confidence: 0.82,
        risk_score: 85,
        risk_reason: "production namespace".into(),
        required_because: vec![
            "production namespace (85)".into(),
            "rollback changes the running version (60)".into(),
        ],
        policy_revision: Some("sha256:0123456789abcdef".into()),
        approvers: vec!["alice@example.com".into(), "bob@example.com".into()],
        slack_approvers: vec![],
        proof: Some(rollback_proof()),
        decision: None,
        note: None,
    }
}

/// What the prover says about the rollback above, as the pipeline records it against the API
/// server (the obligations' wording is `prove::workload`'s): every obligation holds, with
/// evidence from the cluster, and the change the server-side dry run describes.
fn rollback_proof() -> Proof {
    let holds = |id: &str, statement: &str, evidence: &[&str]| Obligation {
        id: id.into(),
        statement: statement.into(),
        status: ObligationStatus::Holds,
        evidence: evidence.iter().map(|e| (*e).to_owned()).collect(),
    };
    let mut parameters = serde_json::Map::new();
    parameters.insert("TO_REVISION".into(), json!(1));
    Proof {
        action_type: "RollbackDeployment".into(),
        workflow_id: "rollback-deployment".into(),
        parameters,
        proposer: Proposer::Model,
        point: ProofPoint::Selection,
        verdict: ProofVerdict::Proven,
        obligations: vec![
            holds(
                "rollback.revision-named",
                "The revision to return to is named in the parameters (TO_REVISION), exists, and is not the current one",
                &[
                    "revision 1 (shop/checkout:1.4.1) is kept as ReplicaSet checkout-7d9f; the current one is revision 2 (shop/checkout:1.4.2)",
                ],
            ),
            holds(
                "rollback.target-revision-healthy",
                "The revision returned to served healthy and is not failing itself",
                &[
                    "revision 1 (shop/checkout:1.4.1) has no pods left; it served for 9 days before the next revision appeared, and nothing records a failure of it",
                ],
            ),
            holds(
                "rollback.failures-began-after-revision",
                "The failures began after the current revision appeared",
                &[
                    "revision 2 (shop/checkout:1.4.2) appeared at 11:52",
                    "the first failure, of pod checkout-5c8b-x2x9q, at 11:53: Back-off restarting failed container checkout",
                ],
            ),
            holds(
                "rollback.change-in-pod-template",
                "What changed is inside the pod template, which a rollback restores",
                &["the pod specs differ: shop/checkout:1.4.2 → shop/checkout:1.4.1"],
            ),
            holds(
                "rollback.no-rollout-by-others",
                "No rollout or rollback started by someone else is in progress",
                &["the current revision 2 is the one failing"],
            ),
        ],
        target: Target::new("Deployment", "checkout", Some("prod".into())),
        spec_hash: Some(SPEC.into()),
        drift_hash: Some("sha256:d41f00aa".into()),
        change: Some(DryRunChange {
            objects: vec![ObjectChange {
                object: "Deployment prod/checkout".into(),
                changes: vec![
                    "image of container checkout shop/checkout:1.4.2 → shop/checkout:1.4.1".into(),
                    "3 pod(s) replaced, at most 1 unavailable and 1 extra at a time".into(),
                ],
            }],
            refused: None,
            note: None,
        }),
        checked_at: created() - chrono::Duration::seconds(3),
    }
}

/// The spec the rollback is bound to.
const SPEC: &str = "sha256:3f2a9c0e5b7d41aa";

/// The change and what was checked, as every channel words them.
const CHANGE: &[&str] = &[
    "Deployment prod/checkout: image of container checkout shop/checkout:1.4.2 → shop/checkout:1.4.1",
    "Deployment prod/checkout: 3 pod(s) replaced, at most 1 unavailable and 1 extra at a time",
];
const CHECKED: &[&str] = &[
    "[holds] The revision to return to is named in the parameters (TO_REVISION), exists, and is not the current one — revision 1 (shop/checkout:1.4.1) is kept as ReplicaSet checkout-7d9f",
    "[holds] The revision returned to served healthy and is not failing itself — revision 1 (shop/checkout:1.4.1) has no pods left",
    "[holds] The failures began after the current revision appeared — revision 2 (shop/checkout:1.4.2) appeared at 11:52",
    "[holds] What changed is inside the pod template, which a rollback restores — the pod specs differ: shop/checkout:1.4.2 → shop/checkout:1.4.1",
    "[holds] No rollout or rollback started by someone else is in progress — the current revision 2 is the one failing",
];

/// The note the executor leaves when the target changed after the approval.
const NOT_EXECUTED: &str = "Not executed: target_changed: prod/Deployment/checkout changed after it was approved (spec sha256:3f2a9c0e approved, sha256:77b1e0c2 now; prod/Deployment/checkout now: image shop/checkout:1.4.3, set by kubectl-edit at 12:06); nothing was written — investigate again if the alert still fires";

fn links(a: &ApprovalRequest, recipient: &str) -> (String, String) {
    let base = format!("https://kubemedic.example.com/approvals/{}", a.id);
    let recipient: String = recipient
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    (
        format!("{base}/approve?recipient={recipient}&expires=1906020900&sig=AbC-123_x"),
        format!("{base}/deny?recipient={recipient}&expires=1906020900&sig=ZyX-987_y"),
    )
}

fn message(a: &ApprovalRequest, recipient: &str) -> ApprovalMessage {
    let (approve, deny) = links(a, recipient);
    ApprovalMessage {
        approval: a.clone(),
        recipient: recipient.into(),
        approve_url: Some(approve),
        deny_url: Some(deny),
        view_url: Some(format!(
            "https://kubemedic.example.com/requests/{}",
            a.request_id
        )),
    }
}

fn decided(mut a: ApprovalRequest, decision: Decision, by: &str, via: Channel) -> ApprovalRequest {
    a.decision = Some(ApprovalDecision {
        decision,
        decided_by: by.into(),
        decided_via: via,
        decided_at: created() + chrono::Duration::minutes(4),
        message: None,
        alternative: None,
    });
    a
}

fn clock() -> Arc<dyn Clock> {
    Arc::new(ManualClock::new(created()))
}

// ---------------------------------------------------------------------------------------------
// E-mail

struct Maildev {
    smtp_url: String,
    username: String,
    password: String,
    api: String,
}

fn maildev() -> Option<Maildev> {
    common::init();
    Some(Maildev {
        smtp_url: common::component("KUBEMEDIC_TEST_SMTP_URL", "maildev (SMTP)")?,
        username: common::component("KUBEMEDIC_TEST_SMTP_USERNAME", "maildev (SMTP)")?,
        password: common::component("KUBEMEDIC_TEST_SMTP_PASSWORD", "maildev (SMTP)")?,
        api: common::component("KUBEMEDIC_TEST_MAILDEV_API", "maildev (HTTP API)")?,
    })
}

fn email_settings(md: &Maildev) -> EmailSettings {
    EmailSettings {
        smtp_url: md.smtp_url.clone(),
        username: Some(md.username.clone()),
        password: Some(Secret::new(md.password.clone())),
        from: "kubemedic <kubemedic@kubemedic.example.com>".into(),
        approvers: vec!["alice@example.com".into(), "Bob <bob@example.com>".into()],
        timeout: Duration::from_secs(10),
        ca_file: None,
    }
}

/// The mails maildev holds for this approval (its `X-Kubemedic-Approval` header), waiting up
/// to 10 s for `want` of them.
async fn mails_for(api: &str, approval: Uuid, want: usize) -> Vec<Value> {
    let client = reqwest::Client::new();
    let mut found = Vec::new();
    for _ in 0..100 {
        let all: Vec<Value> = client
            .get(format!("{api}/email"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        found = all
            .into_iter()
            .filter(|m| m["headers"]["x-kubemedic-approval"] == approval.to_string())
            .collect();
        if found.len() >= want {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "expected {want} mails for approval {approval}, found {}",
        found.len()
    );
}

/// The HTML part exactly as it was sent: maildev's JSON shows it after its own sanitiser ran,
/// which would hide a `<script>` that got through, so the raw message is decoded here.
async fn raw_html(api: &str, mail: &Value) -> String {
    let source = reqwest::get(format!(
        "{api}/email/{}/source",
        mail["id"].as_str().unwrap()
    ))
    .await
    .unwrap()
    .text()
    .await
    .unwrap();
    let part = source
        .split("Content-Type: text/html")
        .nth(1)
        .expect("an HTML part");
    let (head, rest) = part.split_once("\r\n\r\n").expect("part headers");
    assert!(head.contains("quoted-printable"), "{head}");
    let body = rest.split("\r\n--").next().unwrap();
    let decoded = quoted_printable::decode(body, quoted_printable::ParseMode::Strict).unwrap();
    String::from_utf8(decoded).unwrap()
}

fn to_address(mail: &Value) -> String {
    mail["to"][0]["address"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn the_offer_reaches_each_approver_with_every_fact_in_text_and_html() {
    let Some(md) = maildev() else { return };
    let notifier = EmailNotifier::new(&email_settings(&md), clock()).unwrap();
    let a = approval();
    let recipients = notifier.recipients(&a);
    assert_eq!(recipients, ["alice@example.com", "Bob <bob@example.com>"]);
    let mut refs = Vec::new();
    for r in &recipients {
        refs.push(notifier.offer(&message(&a, r)).await.unwrap().unwrap());
    }
    assert_ne!(
        refs[0], refs[1],
        "each recipient's mail has its own Message-ID"
    );

    let mails = mails_for(&md.api, a.id, 2).await;
    assert_eq!(mails.len(), 2, "one mail per approver");
    let mut to: Vec<String> = mails.iter().map(to_address).collect();
    to.sort();
    assert_eq!(to, ["alice@example.com", "bob@example.com"]);

    for mail in &mails {
        let recipient = if to_address(mail) == "alice@example.com" {
            "alice@example.com"
        } else {
            "Bob <bob@example.com>"
        };
        let (approve, deny) = links(&a, recipient);
        assert_eq!(
            mail["subject"],
            "[kubemedic] Approve RollbackDeployment on prod/Deployment/checkout? (risk 85)"
        );
        let headers = &mail["headers"];
        assert_eq!(headers["auto-submitted"], "auto-generated");
        assert_eq!(headers["x-auto-response-suppress"], "All");
        assert_eq!(headers["x-kubemedic-request"], a.request_id.to_string());
        let own_ref = refs
            .iter()
            .find(|r| r["message_id"] == headers["message-id"])
            .expect("offer() returned the Message-ID the mail carries");
        assert!(
            own_ref["message_id"]
                .as_str()
                .unwrap()
                .contains(&a.id.to_string())
        );

        let text = mail["text"].as_str().expect("a text part");
        let html = &raw_html(&md.api, mail).await;
        // Every fact, in both parts (the HTML one escaped).
        let facts = [
            "KubePodCrashLooping",
            "prod/Deployment/checkout",
            "production",
            "The 1.4.2 rollout crashes on start",
            "restarts: 17 in 10 minutes",
            "last state OOMKilled",
            "rollback-deployment",
            "1.2.0",
            "RollbackDeployment",
            "revision = checkout-7d9f",
            "replicas = 3",
            "the previous revision ran for 9 days without a restart",
            "increase-memory: would help only if the OOM were the cause",
            "restart-deployment",
            "82%",
            "85 — production namespace",
            "production namespace (85)",
            "rollback changes the running version (60)",
            "sha256:0123456789abcdef",
            "2030-06-01 12:15:00 UTC",
            "in 15 minutes",
        ];
        for fact in facts {
            assert!(text.contains(fact), "text part lacks {fact:?}:\n{text}");
            assert!(html.contains(fact), "HTML part lacks {fact:?}:\n{html}");
        }
        // What would change and what was checked, each a line of its section, change first.
        let change_at = text
            .find("What would change (the API server's dry run)\n")
            .expect("the change section");
        let checked_at = text
            .find("What was checked against the cluster\n")
            .expect("the checked section");
        assert!(change_at < checked_at, "{text}");
        for line in CHANGE {
            assert!(
                text.contains(&format!("  - {line}\n")),
                "{line:?} in\n{text}"
            );
            assert!(
                html.contains(&format!("<li>{line}</li>")),
                "{line:?} in\n{html}"
            );
        }
        for line in CHECKED {
            assert!(text.contains(&format!("  - {line}")), "{line:?} in\n{text}");
            assert!(html.contains(&format!("<li>{line}")), "{line:?} in\n{html}");
        }
        assert!(
            text.contains(&format!(
                "Bound to spec {SPEC}: if the target changes before it runs, nothing is written."
            )),
            "{text}"
        );
        assert!(
            html.contains(&format!("Bound to spec <code>{SPEC}</code>")),
            "{html}"
        );
        assert!(text.contains(&a.id.to_string()) && html.contains(&a.id.to_string()));
        // The links exactly as given: verbatim in the text, attribute-escaped in the HTML.
        assert!(text.contains(&format!("Approve: {approve}\n")), "{text}");
        assert!(text.contains(&format!("Deny:    {deny}\n")), "{text}");
        assert!(html.contains(&format!("href=\"{}\"", approve.replace('&', "&amp;"))));
        assert!(html.contains(&format!("href=\"{}\"", deny.replace('&', "&amp;"))));
        // Planted markup arrives inert.
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(!html.contains("<b>more"), "{html}");
        assert!(
            html.contains("&lt;script&gt;alert(&#39;pwned&#39;)&lt;/script&gt;"),
            "{html}"
        );
        assert!(
            html.contains("&lt;img src=x onerror=alert(1)&gt;"),
            "{html}"
        );
    }
}

#[tokio::test]
async fn the_outcome_mail_is_threaded_to_the_offer() {
    let Some(md) = maildev() else { return };
    let notifier = EmailNotifier::new(&email_settings(&md), clock()).unwrap();
    let a = approval();
    let offer = notifier
        .offer(&message(&a, "alice@example.com"))
        .await
        .unwrap()
        .unwrap();
    let done = decided(
        a.clone(),
        Decision::Approved,
        "carol@example.com",
        Channel::Slack,
    );
    notifier
        .outcome(&message(&done, "alice@example.com"), Some(&offer))
        .await
        .unwrap();

    let mails = mails_for(&md.api, a.id, 2).await;
    let offer_id = offer["message_id"].as_str().unwrap();
    let follow = mails
        .iter()
        .find(|m| m["headers"]["in-reply-to"].is_string())
        .expect("an outcome mail with In-Reply-To");
    assert_eq!(follow["headers"]["in-reply-to"], offer_id);
    assert_eq!(follow["headers"]["references"], offer_id);
    assert_ne!(follow["headers"]["message-id"], offer_id);
    assert_eq!(
        follow["subject"],
        "Re: [kubemedic] Approve RollbackDeployment on prod/Deployment/checkout? (risk 85)"
    );
    let text = follow["text"].as_str().unwrap();
    assert!(
        text.contains("Approved by carol@example.com via slack at 2030-06-01 12:04:00 UTC."),
        "{text}"
    );
    assert!(
        text.contains("The links in the earlier mail no longer work."),
        "{text}"
    );
    assert!(
        follow["html"]
            .as_str()
            .unwrap()
            .contains("Approved by carol@example.com")
    );

    // Expiry reads as such.
    let expired = decided(a.clone(), Decision::Expired, "kubemedic", Channel::System);
    notifier
        .outcome(&message(&expired, "alice@example.com"), Some(&offer))
        .await
        .unwrap();
    let mails = mails_for(&md.api, a.id, 3).await;
    assert!(mails.iter().any(|m| {
        m["text"]
            .as_str()
            .unwrap()
            .contains("Expired at 2030-06-01 12:04:00 UTC without a decision.")
    }));
}

/// An approved change the executor did not make (the target changed after the approval): the
/// approvers get a mail in the offer's thread saying so, with the note, in both parts.
#[tokio::test]
async fn a_change_not_executed_is_told_in_the_offers_thread() {
    let Some(md) = maildev() else { return };
    let notifier = EmailNotifier::new(&email_settings(&md), clock()).unwrap();
    let a = approval();
    let offer = notifier
        .offer(&message(&a, "alice@example.com"))
        .await
        .unwrap()
        .unwrap();
    let mut told = decided(
        a.clone(),
        Decision::Approved,
        "alice@example.com",
        Channel::Email,
    );
    told.note = Some(NOT_EXECUTED.into());
    notifier
        .outcome(&message(&told, "alice@example.com"), Some(&offer))
        .await
        .unwrap();

    let mails = mails_for(&md.api, a.id, 2).await;
    let follow = mails
        .iter()
        .find(|m| m["headers"]["in-reply-to"] == offer["message_id"])
        .expect("a mail in the offer's thread");
    let text = follow["text"].as_str().unwrap();
    assert!(
        text.starts_with(&format!(
            "Approved by alice@example.com via email at 2030-06-01 12:04:00 UTC. {NOT_EXECUTED}\n"
        )),
        "{text}"
    );
    let html = raw_html(&md.api, follow).await;
    assert!(
        html.contains(
            "Not executed: target_changed: prod/Deployment/checkout changed after it was approved"
        ),
        "{html}"
    );
    assert!(html.contains("nothing was written"), "{html}");
}

#[tokio::test]
async fn a_closed_smtp_port_is_retryable_and_names_the_server() {
    common::init();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let settings = EmailSettings {
        smtp_url: format!("smtp://127.0.0.1:{port}"),
        username: None,
        password: None,
        from: "kubemedic@kubemedic.example.com".into(),
        approvers: vec!["alice@example.com".into()],
        timeout: Duration::from_secs(5),
        ca_file: None,
    };
    let notifier = EmailNotifier::new(&settings, clock()).unwrap();
    let e = notifier
        .offer(&message(&approval(), "alice@example.com"))
        .await
        .unwrap_err();
    assert!(e.retryable, "{e}");
    assert!(
        e.message.contains(&format!("smtp://127.0.0.1:{port}")),
        "{e}"
    );
}

#[tokio::test]
async fn a_refused_password_or_no_login_is_permanent() {
    let Some(md) = maildev() else { return };
    let mut wrong = email_settings(&md);
    wrong.password = Some(Secret::new("not-the-password"));
    let e = EmailNotifier::new(&wrong, clock())
        .unwrap()
        .offer(&message(&approval(), "alice@example.com"))
        .await
        .unwrap_err();
    assert!(!e.retryable, "{e}");
    assert!(e.message.contains("535"), "{e}");
    assert!(e.message.contains(&md.smtp_url), "{e}");
    assert!(!e.message.contains("not-the-password"), "{e}");

    let mut anonymous = email_settings(&md);
    anonymous.username = None;
    anonymous.password = None;
    let e = EmailNotifier::new(&anonymous, clock())
        .unwrap()
        .offer(&message(&approval(), "alice@example.com"))
        .await
        .unwrap_err();
    assert!(!e.retryable, "{e}");
    assert!(e.message.contains("530"), "{e}");
}

#[tokio::test]
async fn a_recipient_that_is_no_address_is_permanent() {
    let Some(md) = maildev() else { return };
    let notifier = EmailNotifier::new(&email_settings(&md), clock()).unwrap();
    let e = notifier
        .offer(&message(&approval(), "not an address"))
        .await
        .unwrap_err();
    assert!(!e.retryable, "{e}");
    assert!(e.message.contains("not an address"), "{e}");
}

#[tokio::test]
async fn smtps_with_the_servers_ca_delivers_and_without_it_is_refused() {
    common::init();
    let Some(url) = common::component("KUBEMEDIC_TEST_SMTPS_URL", "maildev (SMTPS)") else {
        return;
    };
    let Some(ca) = common::component("KUBEMEDIC_TEST_SMTPS_CA_FILE", "maildev (SMTPS)") else {
        return;
    };
    let Some(api) = common::component("KUBEMEDIC_TEST_MAILDEV_TLS_API", "maildev (SMTPS)") else {
        return;
    };
    let mut settings = EmailSettings {
        smtp_url: url,
        username: None,
        password: None,
        from: "kubemedic@kubemedic.example.com".into(),
        approvers: vec!["alice@example.com".into()],
        timeout: Duration::from_secs(10),
        ca_file: Some(ca.into()),
    };
    let a = approval();
    EmailNotifier::new(&settings, clock())
        .unwrap()
        .offer(&message(&a, "alice@example.com"))
        .await
        .unwrap();
    let mails = mails_for(&api, a.id, 1).await;
    assert_eq!(to_address(&mails[0]), "alice@example.com");

    // Only the public roots: the test CA is not among them.
    settings.ca_file = None;
    let e = EmailNotifier::new(&settings, clock())
        .unwrap()
        .offer(&message(&approval(), "alice@example.com"))
        .await
        .unwrap_err();
    assert!(!e.retryable, "{e}");
    assert!(e.message.contains("certificate"), "{e}");
}

/// A real SMTP server that requires STARTTLS (PyPI aiosmtpd, `tests/smtp/starttls_server.py`),
/// with a certificate for 127.0.0.1 signed by a CA this test made. It reports each mail and
/// each command it refused for coming before the TLS handshake, one JSON line each.
struct StartTlsServer {
    child: std::process::Child,
    port: u16,
    lines: Arc<std::sync::Mutex<Vec<Value>>>,
    _dir: tempfile::TempDir,
    ca: std::path::PathBuf,
    other_ca: std::path::PathBuf,
}

fn openssl(dir: &std::path::Path, args: &[&str]) {
    let out = std::process::Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A self-signed CA named `name` in `dir` (`name.pem`, `name.key`).
fn make_ca(dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    let (pem, key) = (format!("{name}.pem"), format!("{name}.key"));
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "1",
            "-subj",
            &format!("/CN={name}"),
            "-keyout",
            &key,
            "-out",
            &pem,
        ],
    );
    dir.join(pem)
}

impl StartTlsServer {
    fn start() -> Option<Self> {
        common::init();
        let python = common::component("KUBEMEDIC_SMTP_PYTHON", "aiosmtpd (SMTP with STARTTLS)")?;
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let ca = make_ca(d, "test-ca");
        let other_ca = make_ca(d, "other-ca");
        openssl(
            d,
            &[
                "req",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-subj",
                "/CN=127.0.0.1",
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
            ],
        );
        std::fs::write(d.join("san.ext"), "subjectAltName=IP:127.0.0.1\n").unwrap();
        openssl(
            d,
            &[
                "x509",
                "-req",
                "-in",
                "server.csr",
                "-CA",
                "test-ca.pem",
                "-CAkey",
                "test-ca.key",
                "-CAcreateserial",
                "-days",
                "1",
                "-extfile",
                "san.ext",
                "-out",
                "server.pem",
            ],
        );
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/smtp/starttls_server.py");
        let mut child = std::process::Command::new(python)
            .arg(script)
            .arg(d.join("server.pem"))
            .arg(d.join("server.key"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start the STARTTLS server");
        let stdout = child.stdout.take().unwrap();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let lines = Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = lines.clone();
        std::thread::spawn(move || {
            use std::io::BufRead as _;
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if let Some(port) = line.strip_prefix("READY ") {
                    let _ = ready_tx.send(port.trim().parse::<u16>().unwrap());
                } else if let Ok(v) = serde_json::from_str(&line) {
                    sink.lock().unwrap().push(v);
                }
            }
        });
        let port = ready_rx
            .recv_timeout(Duration::from_secs(20))
            .expect("the STARTTLS server said READY");
        Some(Self {
            child,
            port,
            lines,
            _dir: dir,
            ca,
            other_ca,
        })
    }

    fn settings(&self, ca_file: Option<&std::path::Path>) -> EmailSettings {
        EmailSettings {
            smtp_url: format!("smtp+starttls://127.0.0.1:{}", self.port),
            username: None,
            password: None,
            from: "kubemedic@kubemedic.example.com".into(),
            approvers: vec!["alice@example.com".into()],
            timeout: Duration::from_secs(10),
            ca_file: ca_file.map(Into::into),
        }
    }

    fn seen(&self) -> Vec<Value> {
        self.lines.lock().unwrap().clone()
    }

    /// What the server recorded, once it has recorded `n` sessions (it writes a session's
    /// record after the client has its answer, so the record can come a moment later).
    async fn seen_at_least(&self, n: usize) -> Vec<Value> {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let seen = self.seen();
            if seen.len() >= n || std::time::Instant::now() > deadline {
                return seen;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for StartTlsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// STARTTLS against a real server: with the test's CA trusted the mail goes over TLS; with a
/// certificate that does not verify (only the public roots, or another CA) the notifier refuses
/// for good, naming the certificate, and the server received no mail and no command in clear.
#[tokio::test]
async fn starttls_delivers_over_tls_and_refuses_a_certificate_that_does_not_verify() {
    let Some(server) = StartTlsServer::start() else {
        return;
    };
    let a = approval();
    EmailNotifier::new(&server.settings(Some(&server.ca)), clock())
        .unwrap()
        .offer(&message(&a, "alice@example.com"))
        .await
        .unwrap();
    let seen = server.seen_at_least(1).await;
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0]["tls"], true, "the mail went over TLS: {seen:?}");
    assert_eq!(seen[0]["to"], json!(["alice@example.com"]));
    assert!(
        seen[0]["data"]
            .as_str()
            .unwrap()
            .contains(&a.id.to_string()),
        "the offer itself was delivered"
    );

    for ca in [None, Some(server.other_ca.as_path())] {
        let e = EmailNotifier::new(&server.settings(ca), clock())
            .unwrap()
            .offer(&message(&approval(), "alice@example.com"))
            .await
            .unwrap_err();
        assert!(
            !e.retryable,
            "a certificate that does not verify is not retried: {e}"
        );
        assert!(e.message.contains("certificate"), "{e}");
        assert!(
            e.message.contains("--smtp-ca-file"),
            "says what to fix: {e}"
        );
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let seen = server.seen();
    assert_eq!(
        seen.len(),
        1,
        "nothing more was received, and nothing was tried in clear: {seen:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Slack

struct Emulator {
    api: String,
    token: String,
    channel: String,
    webhook: String,
}

fn emulator() -> Option<Emulator> {
    common::init();
    let what = "the Slack emulator";
    Some(Emulator {
        api: common::component("KUBEMEDIC_TEST_SLACK_API_URL", what)?,
        token: common::component("KUBEMEDIC_TEST_SLACK_BOT_TOKEN", what)?,
        channel: common::component("KUBEMEDIC_TEST_SLACK_CHANNEL", what)?,
        webhook: common::component("KUBEMEDIC_TEST_SLACK_WEBHOOK_URL", what)?,
    })
}

fn bot_settings(em: &Emulator) -> SlackSettings {
    SlackSettings {
        bot_token: Some(Secret::new(em.token.clone())),
        channel: Some(em.channel.clone()),
        signing_secret: Some(Secret::new("test-signing-secret")),
        api_url: em.api.clone(),
        approvers: vec!["U0APPROVE1".into(), "W0APPROVE2".into()],
        ..Default::default()
    }
}

fn webhook_settings(em: &Emulator) -> SlackSettings {
    SlackSettings {
        webhook_url: Some(Secret::new(em.webhook.clone())),
        api_url: em.api.clone(),
        ..Default::default()
    }
}

/// Every message of a channel, newest first, as `conversations.history` gives them.
async fn history(em: &Emulator, channel: &str) -> Vec<Value> {
    let answer: Value = reqwest::Client::new()
        .post(format!("{}/conversations.history", em.api))
        .bearer_auth(&em.token)
        .json(&json!({ "channel": channel, "limit": 1000 }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answer["ok"], true, "{answer}");
    answer["messages"].as_array().unwrap().clone()
}

fn blocks_of_type<'a>(message: &'a Value, kind: &str) -> Vec<&'a Value> {
    message["blocks"]
        .as_array()
        .map(|b| b.iter().filter(|b| b["type"] == kind).collect())
        .unwrap_or_default()
}

/// All text in a message's blocks, joined.
fn all_text(message: &Value) -> String {
    let mut out = Vec::new();
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(t)) = m.get("text") {
                    out.push(t.clone());
                }
                m.values().for_each(|v| walk(v, out));
            }
            Value::Array(a) => a.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    walk(&message["blocks"], &mut out);
    out.join("\n")
}

#[tokio::test]
async fn chat_post_message_offers_buttons_and_chat_update_replaces_them() {
    let Some(em) = emulator() else { return };
    let notifier = SlackNotifier::new(&bot_settings(&em), clock()).unwrap();
    assert!(notifier.interactive());
    let a = approval();
    assert_eq!(notifier.recipients(&a), vec![em.channel.clone()]);
    let reference = notifier
        .offer(&message(&a, &em.channel))
        .await
        .unwrap()
        .expect("channel and ts");
    let channel = reference["channel"].as_str().unwrap().to_owned();
    let ts = reference["ts"].as_str().unwrap().to_owned();
    assert!(channel.starts_with('C'), "{reference}");

    let messages = history(&em, &channel).await;
    let posted = messages.iter().find(|m| m["ts"] == ts.as_str()).unwrap();
    let actions = blocks_of_type(posted, "actions");
    assert_eq!(actions.len(), 1, "{posted}");
    let buttons = actions[0]["elements"].as_array().unwrap();
    let approve = buttons
        .iter()
        .find(|b| b["action_id"] == "approve")
        .unwrap();
    let deny = buttons.iter().find(|b| b["action_id"] == "deny").unwrap();
    assert_eq!(approve["value"], a.id.to_string());
    assert_eq!(approve["style"], "primary");
    assert_eq!(deny["value"], a.id.to_string());
    assert_eq!(deny["style"], "danger");
    let review = buttons.iter().find(|b| b["action_id"] == "review").unwrap();
    assert_eq!(
        review["url"],
        format!("https://kubemedic.example.com/requests/{}", a.request_id)
    );
    let header = blocks_of_type(posted, "header");
    assert_eq!(
        header[0]["text"]["text"],
        "Approve RollbackDeployment on prod/Deployment/checkout?"
    );
    let text = all_text(posted);
    for fact in [
        "KubePodCrashLooping",
        "prod/Deployment/checkout",
        "production",
        "restarts: 17 in 10 minutes",
        "rollback-deployment v1.2.0 (RollbackDeployment)",
        "replicas = 3",
        "increase-memory: would help only if the OOM were the cause",
        "82%",
        "85 — production namespace",
        "sha256:0123456789abcdef",
        "2030-06-01 12:15:00 UTC (in 15 minutes)",
        "<@U0APPROVE1> <@W0APPROVE2>",
    ] {
        assert!(text.contains(fact), "message lacks {fact:?}:\n{text}");
    }
    // What would change and what was checked: their own sections, a bullet a line.
    let section = |title: &str| {
        blocks_of_type(posted, "section")
            .into_iter()
            .filter_map(|b| b["text"]["text"].as_str())
            .find(|t| t.starts_with(&format!("*{title}*\n")))
            .unwrap_or_else(|| panic!("no {title} section in {posted}"))
            .to_owned()
    };
    let change = section("What would change (dry run)");
    for line in CHANGE {
        assert!(
            change.contains(&format!("• {line}")),
            "{line:?} in {change}"
        );
    }
    let checked = section("What was checked");
    for line in CHECKED {
        assert!(
            checked.contains(&format!("• {line}")),
            "{line:?} in {checked}"
        );
    }
    // Untrusted text cannot format, mention or link.
    assert!(
        text.contains("&lt;script&gt;alert('pwned')&lt;/script&gt; &amp; &lt;b&gt;more&lt;/b&gt;"),
        "{text}"
    );
    assert!(!text.contains("<script>"), "{text}");

    let done = decided(a.clone(), Decision::Approved, "U0APPROVE1", Channel::Slack);
    notifier
        .outcome(&message(&done, &em.channel), Some(&reference))
        .await
        .unwrap();
    let messages = history(&em, &channel).await;
    let updated = messages.iter().find(|m| m["ts"] == ts.as_str()).unwrap();
    assert!(blocks_of_type(updated, "actions").is_empty(), "{updated}");
    let text = all_text(updated);
    assert!(
        text.contains("*Approved* · Approved by U0APPROVE1 via slack at 2030-06-01 12:04:00 UTC."),
        "{text}"
    );
    assert!(
        text.contains("KubePodCrashLooping"),
        "the facts stay: {text}"
    );
    // What the interaction endpoint would send through response_url is the same.
    assert_eq!(updated["blocks"], json!(outcome_message(&done).blocks));
}

/// An approved change the executor did not make: `chat.update` rewrites the offer (already
/// showing the approval) to say it was not executed and why, the facts kept.
#[tokio::test]
async fn chat_update_says_an_approved_change_was_not_executed() {
    let Some(em) = emulator() else { return };
    let notifier = SlackNotifier::new(&bot_settings(&em), clock()).unwrap();
    let a = approval();
    let reference = notifier
        .offer(&message(&a, &em.channel))
        .await
        .unwrap()
        .expect("channel and ts");
    let channel = reference["channel"].as_str().unwrap().to_owned();
    let ts = reference["ts"].as_str().unwrap().to_owned();
    let approved = decided(a.clone(), Decision::Approved, "U0APPROVE1", Channel::Slack);
    notifier
        .outcome(&message(&approved, &em.channel), Some(&reference))
        .await
        .unwrap();
    let mut told = approved.clone();
    told.note = Some(NOT_EXECUTED.into());
    notifier
        .outcome(&message(&told, &em.channel), Some(&reference))
        .await
        .unwrap();

    let messages = history(&em, &channel).await;
    let ours: Vec<&Value> = messages
        .iter()
        .filter(|m| all_text(m).contains(&a.id.to_string()))
        .collect();
    assert_eq!(
        ours.len(),
        1,
        "the offer is updated, not followed up: {ours:#?}"
    );
    let updated = ours[0];
    assert_eq!(updated["ts"], ts.as_str());
    assert!(blocks_of_type(updated, "actions").is_empty(), "{updated}");
    let context = blocks_of_type(updated, "context");
    let last = context.last().unwrap()["elements"][0]["text"]
        .as_str()
        .unwrap();
    assert_eq!(
        last,
        format!(
            ":warning: *Approved, not executed* · Approved by U0APPROVE1 via slack at 2030-06-01 12:04:00 UTC. {NOT_EXECUTED}"
        )
    );
    let text = all_text(updated);
    assert!(text.contains(CHANGE[0]), "the facts stay: {text}");
    assert_eq!(updated["blocks"], json!(outcome_message(&told).blocks));
}

#[tokio::test]
async fn an_unknown_bot_token_is_permanent() {
    let Some(em) = emulator() else { return };
    let mut settings = bot_settings(&em);
    settings.bot_token = Some(Secret::new("xoxb-not-a-token-of-this-workspace"));
    let notifier = SlackNotifier::new(&settings, clock()).unwrap();
    let e = notifier
        .offer(&message(&approval(), &em.channel))
        .await
        .unwrap_err();
    assert!(!e.retryable, "{e}");
    // The emulator takes an unknown token as a user without scopes (Slack: invalid_auth).
    assert!(e.message.contains("missing_scope"), "{e}");
    assert!(e.message.contains(&em.api), "{e}");
    assert!(!e.message.contains("xoxb-not-a-token"), "{e}");
}

#[tokio::test]
async fn a_channel_that_does_not_exist_is_permanent() {
    let Some(em) = emulator() else { return };
    let mut settings = bot_settings(&em);
    settings.channel = Some("no-such-channel".into());
    let notifier = SlackNotifier::new(&settings, clock()).unwrap();
    let e = notifier
        .offer(&message(&approval(), "no-such-channel"))
        .await
        .unwrap_err();
    assert!(!e.retryable, "{e}");
    assert!(e.message.contains("channel_not_found"), "{e}");
    assert!(e.message.contains("--slack-channel"), "{e}");
}

#[tokio::test]
async fn an_incoming_webhook_posts_link_buttons_to_general_and_follows_up() {
    let Some(em) = emulator() else { return };
    let notifier = SlackNotifier::new(&webhook_settings(&em), clock()).unwrap();
    assert!(!notifier.interactive());
    let a = approval();
    assert_eq!(notifier.recipients(&a), ["webhook"]);
    let m = message(&a, "webhook");
    assert_eq!(notifier.offer(&m).await.unwrap(), None);
    let done = decided(
        a.clone(),
        Decision::Rejected,
        "bob@example.com",
        Channel::Email,
    );
    notifier
        .outcome(&message(&done, "webhook"), None)
        .await
        .unwrap();

    let general = history(&em, "C000000001").await;
    let ours: Vec<&Value> = general
        .iter()
        .filter(|m| all_text(m).contains(&a.id.to_string()))
        .collect();
    assert_eq!(ours.len(), 2, "offer and follow-up");
    let offer = ours
        .iter()
        .find(|m| !blocks_of_type(m, "actions").is_empty())
        .unwrap();
    let buttons = blocks_of_type(offer, "actions")[0]["elements"]
        .as_array()
        .unwrap()
        .clone();
    let urls: Vec<&str> = buttons.iter().filter_map(|b| b["url"].as_str()).collect();
    assert!(
        urls.contains(&m.approve_url.as_deref().unwrap()),
        "{urls:?}"
    );
    assert!(urls.contains(&m.deny_url.as_deref().unwrap()), "{urls:?}");
    assert!(
        buttons
            .iter()
            .all(|b| b["action_id"] != "approve" && b["action_id"] != "deny"),
        "a webhook message carries no interactive button: {buttons:?}"
    );
    let follow = ours
        .iter()
        .find(|m| blocks_of_type(m, "actions").is_empty())
        .unwrap();
    assert!(
        all_text(follow)
            .contains("Denied by bob@example.com via email at 2030-06-01 12:04:00 UTC."),
        "{follow}"
    );
}

#[tokio::test]
async fn respond_posts_the_outcome_to_the_response_url() {
    let Some(em) = emulator() else { return };
    let notifier = SlackNotifier::new(&bot_settings(&em), clock()).unwrap();
    let a = decided(approval(), Decision::Approved, "U0APPROVE1", Channel::Slack);
    // The emulator sends no interactions, so no response_url; its incoming webhook accepts
    // the same JSON a response_url does.
    notifier
        .respond(&em.webhook, &outcome_message(&a), true)
        .await
        .unwrap();
    let general = history(&em, "C000000001").await;
    assert!(
        general
            .iter()
            .any(|m| all_text(m).contains(&a.id.to_string())
                && all_text(m).contains("Approved by U0APPROVE1"))
    );

    let e = notifier
        .respond(
            "http://hooks.example.com/actions/x",
            &outcome_message(&a),
            true,
        )
        .await
        .unwrap_err();
    assert!(!e.retryable && e.message.contains("https"), "{e}");
}

#[tokio::test]
async fn an_unreachable_slack_api_is_retryable_and_named() {
    common::init();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let settings = SlackSettings {
        bot_token: Some(Secret::new("xoxb-1")),
        channel: Some("approvals".into()),
        api_url: format!("http://127.0.0.1:{port}/api"),
        ..Default::default()
    };
    let e = SlackNotifier::new(&settings, clock())
        .unwrap()
        .offer(&message(&approval(), "approvals"))
        .await
        .unwrap_err();
    assert!(e.retryable, "{e}");
    assert!(
        e.message.contains(&format!("http://127.0.0.1:{port}/api")),
        "{e}"
    );
}

/// An HTTP server on a free port that gives every request the same answer.
async fn stub(answer: &'static str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                let mut seen = Vec::new();
                // Read the head and the body (Content-Length) before answering.
                loop {
                    let n = sock.read(&mut buf).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&seen).to_string();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let len = text[..end]
                            .lines()
                            .find_map(|l| {
                                let (k, v) = l.split_once(':')?;
                                k.eq_ignore_ascii_case("content-length")
                                    .then(|| v.trim().parse::<usize>().ok())?
                            })
                            .unwrap_or(0);
                        if seen.len() >= end + 4 + len {
                            break;
                        }
                    }
                }
                let _ = sock.write_all(answer.as_bytes()).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    format!("http://{addr}/api")
}

#[tokio::test]
async fn slack_answers_the_emulator_never_gives() {
    common::init();
    let notifier = |api: String| {
        SlackNotifier::new(
            &SlackSettings {
                bot_token: Some(Secret::new("xoxb-1")),
                channel: Some("approvals".into()),
                api_url: api,
                ..Default::default()
            },
            clock(),
        )
        .unwrap()
    };
    let limited = stub(
        "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 30\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    )
    .await;
    let e = notifier(limited)
        .offer(&message(&approval(), "approvals"))
        .await
        .unwrap_err();
    assert!(e.retryable, "{e}");
    assert!(e.message.contains("Retry-After: 30 s"), "{e}");

    let body = r#"{"ok":false,"error":"invalid_auth"}"#;
    let answer: &'static str = Box::leak(
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .into_boxed_str(),
    );
    let e = notifier(stub(answer).await)
        .offer(&message(&approval(), "approvals"))
        .await
        .unwrap_err();
    assert!(!e.retryable, "{e}");
    assert!(
        e.message.contains("invalid_auth; check --slack-bot-token"),
        "{e}"
    );

    let body = r#"{"ok":false,"error":"ratelimited"}"#;
    let answer: &'static str = Box::leak(
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .into_boxed_str(),
    );
    let e = notifier(stub(answer).await)
        .offer(&message(&approval(), "approvals"))
        .await
        .unwrap_err();
    assert!(e.retryable, "{e}");

    let e = notifier(
        stub("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            .await,
    )
    .offer(&message(&approval(), "approvals"))
    .await
    .unwrap_err();
    assert!(e.retryable, "{e}");
}

// ---------------------------------------------------------------------------------------------
// The interaction endpoint's pure functions

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2030, 6, 1, 12, 5, 0).unwrap()
}

#[test]
fn a_correctly_signed_body_passes_and_every_doubt_is_refused() {
    let secret = Secret::new("8f742231b10e8888abcd99yyyzzz85a5");
    let body = interaction_body(Uuid::new_v4(), "approve");
    let ts = now().timestamp();
    let sig = interaction::sign(&secret, ts, body.as_bytes());
    let ts_text = ts.to_string();
    let verify = |secret: &Secret, ts: Option<&str>, sig: Option<&str>, body: &str| {
        interaction::verify_signature(secret, ts, sig, body.as_bytes(), now())
    };

    verify(&secret, Some(&ts_text), Some(&sig), &body).unwrap();
    // Four minutes either way is still fine.
    let early = (ts - 240).to_string();
    let early_sig = interaction::sign(&secret, ts - 240, body.as_bytes());
    verify(&secret, Some(&early), Some(&early_sig), &body).unwrap();

    assert_eq!(
        verify(
            &Secret::new("another secret"),
            Some(&ts_text),
            Some(&sig),
            &body
        ),
        Err(SlackAuthError::Mismatch)
    );
    let changed = body.replace("approve", "deny");
    assert_eq!(
        verify(&secret, Some(&ts_text), Some(&sig), &changed),
        Err(SlackAuthError::Mismatch)
    );
    let old = ts - 6 * 60;
    let old_sig = interaction::sign(&secret, old, body.as_bytes());
    assert_eq!(
        verify(&secret, Some(&old.to_string()), Some(&old_sig), &body),
        Err(SlackAuthError::Stale(360))
    );
    let future = ts + 6 * 60;
    let future_sig = interaction::sign(&secret, future, body.as_bytes());
    assert_eq!(
        verify(&secret, Some(&future.to_string()), Some(&future_sig), &body),
        Err(SlackAuthError::Stale(-360))
    );
    assert_eq!(
        verify(&secret, None, Some(&sig), &body),
        Err(SlackAuthError::MissingTimestamp)
    );
    assert_eq!(
        verify(&secret, Some(&ts_text), None, &body),
        Err(SlackAuthError::MissingSignature)
    );
    assert_eq!(
        verify(&secret, Some("yesterday"), Some(&sig), &body),
        Err(SlackAuthError::MalformedTimestamp)
    );
    assert_eq!(
        verify(
            &secret,
            Some(&ts_text),
            Some(&sig.replacen("v0=", "v1=", 1)),
            &body
        ),
        Err(SlackAuthError::MalformedSignature)
    );
    assert_eq!(
        verify(&secret, Some(&ts_text), Some("v0=zz"), &body),
        Err(SlackAuthError::MalformedSignature)
    );
    // The replay of an old timestamp with a signature made for a fresh one.
    assert_eq!(
        verify(&secret, Some(&old.to_string()), Some(&sig), &body),
        Err(SlackAuthError::Stale(360))
    );
}

/// A `block_actions` body as Slack posts it (modelled on the payload Slack documents for a
/// button in a message), form-encoded.
fn interaction_body(approval: Uuid, action_id: &str) -> String {
    let payload = json!({
        "type": "block_actions",
        "user": {
            "id": "U0APPROVE1",
            "username": "alice",
            "name": "alice",
            "team_id": "T9TK3CUKW"
        },
        "api_app_id": "A0KMAPP01",
        "token": "verification-token-deprecated",
        "container": {
            "type": "message",
            "message_ts": "1906020000.000100",
            "channel_id": "C0APPROVAL",
            "is_ephemeral": false
        },
        "trigger_id": "12321423423.333649436676.d8c1bb837935619ccad0f624c448ffb3",
        "team": { "id": "T9TK3CUKW", "domain": "example" },
        "enterprise": null,
        "is_enterprise_install": false,
        "channel": { "id": "C0APPROVAL", "name": "approvals" },
        "message": {
            "bot_id": "B0KMBOT01",
            "type": "message",
            "text": "Approval needed: Approve RollbackDeployment on prod/Deployment/checkout? (risk 85)",
            "user": "U0KMBOT01",
            "ts": "1906020000.000100",
            "blocks": []
        },
        "state": { "values": {} },
        "response_url": "https://hooks.slack.com/actions/T9TK3CUKW/5912345678/sEcReTpAtH",
        "actions": [{
            "action_id": action_id,
            "block_id": "kubemedic_approval",
            "text": { "type": "plain_text", "text": "Approve", "emoji": true },
            "value": approval.to_string(),
            "style": "primary",
            "type": "button",
            "action_ts": "1906020290.123456"
        }]
    });
    form_encode(&[("payload", &payload.to_string())])
}

fn form_encode(pairs: &[(&str, &str)]) -> String {
    let enc = |s: &str| {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'*' => {
                    (b as char).to_string()
                }
                b' ' => "+".into(),
                _ => format!("%{b:02X}"),
            })
            .collect::<String>()
    };
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

#[test]
fn a_block_actions_payload_parses_into_the_click() {
    let id = Uuid::new_v4();
    let click = interaction::parse_interaction(interaction_body(id, "approve").as_bytes()).unwrap();
    assert_eq!(
        click,
        interaction::Interaction {
            user_id: "U0APPROVE1".into(),
            user_name: "alice".into(),
            team_id: "T9TK3CUKW".into(),
            action_id: "approve".into(),
            value: id.to_string(),
            response_url: "https://hooks.slack.com/actions/T9TK3CUKW/5912345678/sEcReTpAtH".into(),
            channel_id: "C0APPROVAL".into(),
            message_ts: "1906020000.000100".into(),
        }
    );
    assert_eq!(click.decision(), Some(Decision::Approved));
    assert_eq!(click.approval_id(), Some(id));

    let deny = interaction::parse_interaction(interaction_body(id, "deny").as_bytes()).unwrap();
    assert_eq!(deny.decision(), Some(Decision::Rejected));
    let review = interaction::parse_interaction(interaction_body(id, "review").as_bytes()).unwrap();
    assert_eq!(review.decision(), None, "only approve and deny decide");

    for (body, why) in [
        ("".to_owned(), "no payload"),
        (
            form_encode(&[("payload", "{not json")]),
            "not a Slack interaction",
        ),
        (
            form_encode(&[(
                "payload",
                r#"{"type":"view_submission","user":{"id":"U1"}}"#,
            )]),
            "view_submission",
        ),
        (
            form_encode(&[(
                "payload",
                r#"{"type":"block_actions","user":{"id":"U1"},"team":{"id":"T1"},"actions":[]}"#,
            )]),
            "no action",
        ),
    ] {
        let e = interaction::parse_interaction(body.as_bytes()).unwrap_err();
        assert!(e.contains(why), "{why}: {e}");
    }
}
