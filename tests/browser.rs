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
