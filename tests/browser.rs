//! Real-browser tests: Debian's headless Chromium through chromedriver (`scripts/chromedriver.sh`),
//! against the daemon on a real port. Skipped loudly without chromedriver, failed in CI.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

mod common;

use std::net::SocketAddr;

use axum::Router;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse};
use axum::routing::{get, post};
use common::TestDaemon;
use common::browser::{Browser, artifacts_dir};

#[tokio::test]
async fn healthz_in_chromium() {
    let d = TestDaemon::start(|_| {}).await;
    let Some(b) = Browser::start().await else {
        return;
    };
    b.goto(&d.url("/healthz")).await;
    assert_eq!(b.page_text().await.trim(), "ok");
    assert_eq!(b.current_url().await, d.url("/healthz"));
    let foreign = b.foreign_requests(&d.base).await;
    assert!(foreign.is_empty(), "requests to other origins: {foreign:?}");

    let shot = b.screenshot("smoke-healthz.png").await;
    assert_eq!(shot, artifacts_dir().join("smoke-healthz.png"));
    let png = std::fs::read(&shot).unwrap();
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n"),
        "{} is not a PNG",
        shot.display()
    );
    b.close().await;
    d.stop().await;
}

/// The harness itself, on a page made for it: what it calls foreign is what the page really
/// loads or points at elsewhere (so an empty list means something), waits see live changes,
/// fields can be filled and buttons clicked, and a forged form reaches the server as a
/// cross-site one would.
#[tokio::test]
async fn the_harness_sees_other_origins_live_changes_and_forged_forms() {
    let elsewhere = serve(Router::new().fallback(|| async {
        (
            [
                (header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"),
                (header::CONTENT_TYPE, "text/javascript"),
            ],
            "// elsewhere",
        )
    }))
    .await;
    let elsewhere = format!("http://{elsewhere}");
    let page = PAGE.replace("ELSEWHERE", &elsewhere);
    let site = serve(
        Router::new()
            .route("/", get(move || async move { Html(page) }))
            .route("/own.png", get(|| async { StatusCode::NO_CONTENT }))
            .route("/echo", post(echo)),
    )
    .await;
    let site = format!("http://{site}");
    let Some(b) = Browser::start().await else {
        return;
    };

    b.goto(&format!("{site}/")).await;
    // The fetch starts 200 ms after load: only the resource timings can see it.
    let fetched = format!("{elsewhere}/api/later?x=1");
    b.wait_until("the delayed fetch", common::browser::WAIT, async |b| {
        b.foreign_requests(&site).await.contains(&fetched)
    })
    .await;
    let mut want = vec![
        format!("{elsewhere}/app.js"),
        format!("{elsewhere}/pixel.png"),
        format!("{elsewhere}/small.png"),
        format!("{elsewhere}/docs"),
        format!("{elsewhere}/submit"),
        format!("{elsewhere}/bg.png"),
        fetched,
    ];
    want.sort();
    assert_eq!(b.foreign_requests(&site).await, want);
    // The same page seen from the other origin: everything of the site is foreign there.
    assert!(
        b.foreign_requests(&elsewhere)
            .await
            .contains(&format!("{site}/own.png"))
    );

    assert_eq!(b.wait_for_text("#live", "updated").await, "updated 1");
    b.fill("#name", "first").await;
    b.fill("#name", "ada").await;
    b.click("#greet").await;
    assert_eq!(b.text("#greeting").await, "hello ada");
    assert_eq!(
        b.execute("return document.title + arguments[0]", vec!["!".into()])
            .await,
        "harness!"
    );

    b.goto("about:blank").await;
    let r = b
        .submit_raw_form(
            &format!("{site}/echo"),
            &[("decision", "approve"), ("submit", "x y")],
        )
        .await;
    assert_eq!(r.status, 418, "{r:?}");
    assert_eq!(r.url, format!("{site}/echo"));
    assert!(r.content_type.starts_with("text/plain"), "{r:?}");
    assert_eq!(
        r.text, "origin: null\nbody: decision=approve&submit=x+y",
        "a form from about:blank is cross-site: Origin null"
    );
    b.close().await;
}

const PAGE: &str = r##"<!doctype html>
<html><head><title>harness</title>
<script src="ELSEWHERE/app.js"></script>
<style>.bg { background: url(ELSEWHERE/bg.png) }</style>
</head><body>
<img src="/own.png"><img src="ELSEWHERE/pixel.png" srcset="ELSEWHERE/small.png 1x">
<a href="ELSEWHERE/docs">docs</a> <a href="#top">top</a> <a href="mailto:ops@example.com">mail</a>
<form action="ELSEWHERE/submit"></form>
<div class="bg" id="live">waiting</div>
<input id="name"><button id="greet" onclick="greeting.textContent = 'hello ' + document.getElementById('name').value">greet</button>
<p id="greeting"></p>
<script>
setTimeout(() => fetch('ELSEWHERE/api/later?x=1'), 200);
setTimeout(() => { live.textContent = 'updated 1'; }, 300);
</script>
</body></html>"##;

/// The origin the form came from and what it sent, with a status no default would give.
async fn echo(headers: HeaderMap, body: String) -> impl IntoResponse {
    let origin = headers
        .get(header::ORIGIN)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("(none)");
    (
        StatusCode::IM_A_TEAPOT,
        format!("origin: {origin}\nbody: {body}"),
    )
}

async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

// --- The dashboard, end to end, in Chromium.

use common::incident::{awaiting, kubelet, production_incident, resolve_and_finish};
use common::kube::Kube;
use kubemedic::domain::Role;
use std::time::Duration;

/// A stored key of `role`, as `kubemedic apikey create` makes one.
async fn key(d: &TestDaemon, role: Role, name: &str) -> String {
    common::create_key(d.store.as_ref(), role, name).await
}

/// Every page the browser shows must come from the daemon alone.
async fn same_origin_only(b: &Browser, d: &TestDaemon) {
    let foreign = b.foreign_requests(&d.base).await;
    assert!(
        foreign.is_empty(),
        "{} loaded from other origins: {foreign:?}",
        b.current_url().await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_follows_a_request_live_and_an_approver_decides_it_in_the_browser() {
    let Some(k) = Kube::new("brwsr").await else {
        return;
    };
    let Some(viewer) = Browser::start().await else {
        return;
    };
    let Some(approver) = Browser::start().await else {
        return;
    };
    let (d, alert) = production_incident(&k, |_| {}).await;
    let viewer_key = key(&d, Role::Viewer, "vera").await;
    let approver_key = key(&d, Role::Approver, "alice").await;

    // An anonymous visitor is sent to the sign-in page; a wrong key is refused there.
    viewer.goto(&d.url("/requests")).await;
    assert!(
        viewer
            .current_url()
            .await
            .contains("/login?next=%2Frequests"),
        "{}",
        viewer.current_url().await
    );
    same_origin_only(&viewer, &d).await;
    let refused = viewer.sign_in(&d.base, "km_not-a-key").await;
    assert!(
        refused.as_ref().is_err_and(|m| m.contains("not valid")),
        "{refused:?}"
    );
    assert_eq!(
        viewer.sign_in(&d.base, &viewer_key).await.as_deref(),
        Ok("viewer")
    );
    assert_eq!(viewer.text("#who").await, "key:vera");

    // The incident reaches the approval gate.
    let (req, approval) = awaiting(&d, &alert).await;
    let rid = req["id"].as_str().unwrap().to_owned();
    let aid = approval["id"].as_str().unwrap().to_owned();

    // The viewer filters the list down to what waits for a human.
    viewer.goto(&d.url("/requests")).await;
    viewer.wait_for(&format!("tr[data-id='{rid}']")).await;
    viewer
        .execute(
            "document.querySelector('#filters select[name=phase]').value = 'AwaitingApproval';",
            vec![],
        )
        .await;
    let target = req["target"]["name"].as_str().unwrap().to_owned();
    viewer.fill("#filters input[name=target]", &target).await;
    viewer.click("#filters button[type=submit]").await;
    viewer
        .wait_until("the filtered list", Duration::from_secs(10), async |b| {
            b.current_url().await.contains("phase=AwaitingApproval")
        })
        .await;
    let rows = viewer.find_all("#requests tbody tr").await;
    assert_eq!(rows.len(), 1, "one request waits for approval on {target}");
    assert!(viewer.exists(&format!("tr[data-id='{rid}']")).await);
    same_origin_only(&viewer, &d).await;
    viewer
        .goto(&d.url(&format!("/requests?phase=Completed&target={target}")))
        .await;
    viewer.wait_for("#no-requests").await;

    // The viewer sees the inbox but no control to decide, and a POST made with the viewer's
    // own session and token is refused for the role.
    viewer.goto(&d.url("/inbox")).await;
    viewer.wait_for(&format!("#approval-{aid}")).await;
    viewer.wait_for("#read-only").await;
    assert!(
        !viewer.exists("button.approve").await,
        "a viewer sees no approve control"
    );
    assert!(!viewer.exists("button.deny").await);
    let viewer_csrf = viewer
        .execute(
            "return document.querySelector('input[name=csrf]').value;",
            vec![],
        )
        .await;
    let forged = viewer
        .submit_raw_form(
            &d.url(&format!("/inbox/{aid}")),
            &[
                ("csrf", viewer_csrf.as_str().unwrap()),
                ("decision", "approve"),
            ],
        )
        .await;
    assert_eq!(forged.status, 403, "{}", forged.text);
    assert!(forged.text.contains("viewer"), "{}", forged.text);

    // The viewer opens the request and stays on it.
    viewer.goto(&d.url(&format!("/requests/{rid}"))).await;
    viewer.wait_for_text("#phase", "AwaitingApproval").await;
    assert!(
        viewer.text("#chain").await.contains("intact"),
        "{}",
        viewer.text("#chain").await
    );
    viewer.wait_for("#live:not([hidden])").await;
    assert!(
        viewer
            .exists("#timeline li[data-kind=approval_requested]")
            .await
    );
    assert!(
        viewer.exists("#plan").await,
        "the investigation plan is shown"
    );
    same_origin_only(&viewer, &d).await;

    // The approver signs in. A POST without the session's token is refused; so is one from
    // another site (the session cookie stays home); neither decides.
    assert_eq!(
        approver.sign_in(&d.base, &approver_key).await.as_deref(),
        Ok("approver")
    );
    approver.goto(&d.url("/inbox")).await;
    approver
        .wait_for(&format!("#approval-{aid} button.approve"))
        .await;
    same_origin_only(&approver, &d).await;
    let no_token = approver
        .submit_raw_form(&d.url(&format!("/inbox/{aid}")), &[("decision", "approve")])
        .await;
    assert_eq!(no_token.status, 403, "{}", no_token.text);
    approver.goto("about:blank").await;
    let cross_site = approver
        .submit_raw_form(&d.url(&format!("/inbox/{aid}")), &[("decision", "approve")])
        .await;
    assert!(
        cross_site.url.contains("/login") || cross_site.status == 403,
        "{cross_site:?}"
    );
    assert_eq!(
        d.api(&format!("/api/v1/approvals/{aid}")).await["status"],
        "pending"
    );

    // The card shows what the mail and Slack show, from the proof the pipeline made against
    // the API server: the dry run's change first, the spec the approval is bound to, and what
    // was checked — folded while every obligation holds, each with its mark and evidence once
    // opened.
    let ns = req["target"]["namespace"].as_str().unwrap().to_owned();
    let card = format!("#approval-{aid}");
    approver.goto(&d.url("/inbox")).await;
    approver.wait_for(&format!("{card} ul.change")).await;
    let change = approver.text(&format!("{card} ul.change")).await;
    assert!(
        change.contains(&format!(
            "Deployment {ns}/checkout: image of container checkout shop/checkout:1.4.2 → shop/checkout:1.4.1"
        )),
        "{change}"
    );
    let bound = approver.text(&format!("{card} .bound")).await;
    assert!(bound.starts_with("Bound to spec sha256:"), "{bound}");
    let proof = &approval["proof"];
    let obligations = proof["obligations"].as_array().unwrap();
    assert!(obligations.len() > 3, "{proof:#}");
    let summary = approver
        .text(&format!("{card} details.checked summary"))
        .await;
    assert_eq!(
        summary,
        format!(
            "What was checked proven {n} of {n} obligations hold",
            n = obligations.len()
        )
    );
    assert_eq!(
        approver.text(&format!("{card} ul.obligations")).await,
        "",
        "folded while everything holds"
    );
    approver
        .click(&format!("{card} details.checked summary"))
        .await;
    let checked = approver.text(&format!("{card} ul.obligations")).await;
    for o in obligations {
        let statement = o["statement"].as_str().unwrap();
        assert!(
            checked.contains(&format!("✓ holds {statement}")),
            "{statement} in {checked}"
        );
        let first = o["evidence"][0].as_str().unwrap();
        assert!(checked.contains(first), "{first} in {checked}");
    }
    assert!(checked.contains("shop/checkout:1.4.1"), "{checked}");
    assert!(!checked.contains("FAILS"), "{checked}");
    let shown = approver
        .find_all(&format!("{card} ul.obligations > li[data-status=holds]"))
        .await;
    assert_eq!(shown.len(), obligations.len());
    approver
        .execute(
            "document.querySelector(arguments[0]).scrollIntoView();",
            vec![card.clone().into()],
        )
        .await;
    approver.screenshot("dashboard-inbox-proof.png").await;

    // The approver approves from the inbox; the request executes.
    let _kubelet = kubelet(&k);
    approver.goto(&d.url("/inbox")).await;
    approver
        .fill(
            &format!("#approval-{aid} input[name=message]"),
            "rollback looks right",
        )
        .await;
    approver
        .click(&format!("#approval-{aid} button.approve"))
        .await;
    approver
        .wait_until(
            "the request page after deciding",
            Duration::from_secs(15),
            async |b| b.current_url().await.ends_with(&format!("/requests/{rid}")),
        )
        .await;
    let decided = d.api(&format!("/api/v1/approvals/{aid}")).await;
    assert_eq!(decided["status"], "approved", "{decided:#}");
    assert_eq!(decided["decision"]["decided_by"], "key:alice");
    assert_eq!(decided["decision"]["decided_via"], "dashboard");

    // The viewer's page follows without a reload: the decision, then execution.
    viewer
        .wait_for("#timeline li[data-kind=approval_decided]")
        .await;
    viewer
        .wait_for("#timeline li[data-kind=execution_step]")
        .await;
    let done = resolve_and_finish(&d, &alert, &rid).await;
    assert_eq!(done["phase"], "Completed", "{done:#}");
    viewer
        .wait_for("#timeline li[data-kind=verification]")
        .await;
    viewer.wait_for_text("#phase", "Completed").await;
    viewer.wait_for_text("#live", "finished").await;
    viewer.screenshot("dashboard-request.png").await;

    // Reloaded, the page has the whole story, and the approver is named.
    viewer.goto(&d.url(&format!("/requests/{rid}"))).await;
    assert!(
        viewer
            .text("#decided-by")
            .await
            .contains("key:alice via dashboard")
    );
    assert!(viewer.exists("#execution-steps").await);
    // The proof section: the one at selection with its change, and the one made again right
    // before the first write; both proven, both in the timeline.
    let at_selection = viewer.text("#proof-selection").await;
    assert!(at_selection.contains("proven"), "{at_selection}");
    assert!(
        at_selection.contains("shop/checkout:1.4.2 → shop/checkout:1.4.1"),
        "{at_selection}"
    );
    assert!(
        viewer
            .exists("#proof-before-write[data-verdict=proven]")
            .await
    );
    assert!(!viewer.exists("#proof-outcome").await);
    let proofs = viewer.find_all("#timeline li[data-kind=proof]").await;
    assert_eq!(proofs.len(), 2, "at selection and before the first write");
    let line = viewer.text("#timeline li[data-kind=proof] .msg").await;
    assert!(
        line.contains("(proposed by the offline rules): proven:")
            && line.contains("would change: Deployment"),
        "{line}"
    );
    assert!(
        viewer
            .text("#verification-score")
            .await
            .contains("effective")
    );

    viewer.goto(&d.url("/summary?period=1d")).await;
    viewer.wait_for("svg#chart-outcomes").await;
    assert_eq!(viewer.text("#total").await, "1");
    same_origin_only(&viewer, &d).await;
    let shot = viewer.screenshot("dashboard-summary.png").await;
    assert!(std::fs::read(shot).unwrap().starts_with(b"\x89PNG"));

    viewer.close().await;
    approver.close().await;
    d.stop().await;
}

/// An approval whose target changed by hand before it was confirmed: nothing is written, and
/// the request page says why — the reason, the approval's note, the proof made before the
/// first write marked refuted with the obligation that fails, and both in the timeline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_not_executed_shows_why_on_the_request_page() {
    let Some(k) = Kube::new("brwsn").await else {
        return;
    };
    let Some(b) = Browser::start().await else {
        return;
    };
    let (d, alert) = production_incident(&k, |_| {}).await;
    let approver_key = key(&d, Role::Approver, "alice").await;
    let (req, approval) = awaiting(&d, &alert).await;
    let rid = req["id"].as_str().unwrap().to_owned();
    let aid = approval["id"].as_str().unwrap().to_owned();

    // Someone fixes it by hand while the approval waits; then the approver approves.
    k.patch(
        "apps/v1",
        "Deployment",
        "checkout",
        serde_json::json!({"spec": {"template": {"spec": {"containers": [{"name": "checkout", "image": "shop/checkout:1.4.3"}]}}}}),
    )
    .await;
    assert_eq!(
        b.sign_in(&d.base, &approver_key).await.as_deref(),
        Ok("approver")
    );
    b.goto(&d.url("/inbox")).await;

    b.click(&format!("#approval-{aid} button.approve")).await;
    b.wait_until(
        "the request page after deciding",
        Duration::from_secs(15),
        async |b| b.current_url().await.ends_with(&format!("/requests/{rid}")),
    )
    .await;
    let done = d
        .eventually(
            &format!("/api/v1/requests/{rid}"),
            60,
            common::incident::is_terminal,
        )
        .await;
    assert_eq!(done["phase"], "ManualReviewRequired", "{done:#}");

    b.goto(&d.url(&format!("/requests/{rid}"))).await;
    let why = b.text("#proof-outcome").await;
    assert!(
        why.starts_with("Not executed: target_changed:") && why.contains("shop/checkout:1.4.3"),
        "{why}"
    );
    let note = b.text("#approval-note").await;
    assert!(note.starts_with("Not executed: target_changed"), "{note}");
    assert!(b.exists("#proof-selection[data-verdict=proven]").await);
    let before = b.text("#proof-before-write").await;
    assert!(before.contains("refuted"), "{before}");
    assert!(before.contains("Refuted: "), "{before}");
    let failing = b
        .text("#proof-before-write li[data-obligation='binding.target-unchanged']")
        .await;
    assert!(failing.starts_with("✗ FAILS"), "{failing}");
    assert!(failing.contains("shop/checkout:1.4.3"), "{failing}");
    assert!(
        b.exists("#timeline li.bad[data-kind=approval_not_executed]")
            .await
    );
    let refuted = b.text("#timeline li.bad[data-kind=proof] .msg").await;
    assert!(
        refuted.contains("(checked again before the first write): refuted:"),
        "{refuted}"
    );
    same_origin_only(&b, &d).await;
    b.execute("document.getElementById('proof').scrollIntoView();", vec![])
        .await;
    b.screenshot("dashboard-request-not-executed.png").await;
    b.execute(
        "document.getElementById('proof-before-write').scrollIntoView();",
        vec![],
    )
    .await;
    b.screenshot("dashboard-request-refuted-before-write.png")
        .await;
    b.execute(
        "document.querySelector('#timeline li[data-kind=proof]').scrollIntoView();",
        vec![],
    )
    .await;
    b.screenshot("dashboard-timeline-not-executed.png").await;
    b.close().await;
    d.stop().await;
}
