//! The dashboard's access rules and live events over real HTTP: roles on every route, browser
//! sessions (cookie flags, CSRF, sign-out, expiry by revocation), failed sign-ins limited, the
//! trusted auth proxy, and the event stream resuming from the audit trail without gaps and woken
//! by new events (on Postgres, written by another replica).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed assumption fails the test

mod common;

use std::sync::Arc;

use common::{API_TOKEN, TestDaemon, alert_body};
use kubemedic::domain::{AuditDraft, Role};
use kubemedic::store::Store;
use reqwest::StatusCode;
use reqwest::header::{COOKIE, LOCATION, SET_COOKIE};
use serde_json::Value;

async fn key(d: &TestDaemon, role: Role, name: &str) -> String {
    common::create_key(d.store.as_ref(), role, name).await
}

fn form(fields: &[(&str, &str)]) -> String {
    let mut f = form_urlencoded::Serializer::new(String::new());
    for (k, v) in fields {
        f.append_pair(k, v);
    }
    f.finish()
}

fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

async fn get(d: &TestDaemon, path: &str, bearer: Option<&str>) -> reqwest::Response {
    let mut r = no_redirects().get(d.url(path));
    if let Some(k) = bearer {
        r = r.bearer_auth(k);
    }
    r.send().await.unwrap()
}

async fn open_request(d: &TestDaemon) -> String {
    let body = alert_body(
        "firing",
        "PodCrash",
        &[("namespace", "shop"), ("pod", "cart-0")],
        "fp-dash",
        "2026-01-01T00:00:00Z",
    );
    let v: Value = d.send_alertmanager(&body).await.json().await.unwrap();
    v["outcomes"][0]["request_id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn every_route_checks_the_callers_role() {
    let d = TestDaemon::start(|_| {}).await;
    let viewer = key(&d, Role::Viewer, "vera").await;
    let approver = key(&d, Role::Approver, "alice").await;
    let id = open_request(&d).await;

    // Anonymous: the API says 401, a page sends the browser to sign in.
    for path in [
        "/api/v1/requests",
        &format!("/api/v1/requests/{id}"),
        &format!("/api/v1/requests/{id}/events"),
        "/api/v1/signals",
        "/api/v1/approvals",
        "/api/v1/history?kind=Pod&name=cart-0&namespace=shop",
        "/api/v1/summary",
        "/api/v1/catalog",
        "/api/v1/policy",
        "/api/v1/audit/verify",
        "/api/v1/memory",
        "/api/v1/chat/conversations",
        "/v1/models",
        &format!("/v1/chat/stream/{id}"),
        "/mcp",
    ] {
        assert_eq!(get(&d, path, None).await.status(), 401, "{path}");
        assert_eq!(
            get(&d, path, Some("km_nonsense")).await.status(),
            401,
            "{path}"
        );
    }
    for path in [
        "/requests",
        &format!("/requests/{id}"),
        "/inbox",
        "/summary",
        "/catalog",
        "/policy",
        "/history?kind=Pod&name=cart-0&namespace=shop",
        "/ask",
        "/memory",
    ] {
        let r = get(&d, path, None).await;
        assert_eq!(r.status(), 303, "{path}");
        let to = r.headers()[LOCATION].to_str().unwrap().to_owned();
        assert!(to.starts_with("/login?next=%2F"), "{path} → {to}");
        // A viewer's key opens every page.
        let r = get(&d, path, Some(&viewer)).await;
        assert_eq!(r.status(), 200, "{path}");
        let csp = r.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(
            csp.contains("default-src 'none'") && csp.contains("script-src 'self'"),
            "{csp}"
        );
        let html = r.text().await.unwrap();
        for attr in [
            "src=\"http",
            "href=\"http",
            "action=\"http",
            "src=\"//",
            "href=\"//",
        ] {
            assert!(!html.contains(attr), "{path} points elsewhere: {attr}");
        }
    }
    // Reading is for everyone; deciding needs an approver; the whole chain needs an admin.
    assert_eq!(
        get(&d, "/api/v1/requests", Some(&viewer)).await.status(),
        200
    );
    let decision = |k: &str| {
        no_redirects()
            .post(d.url(&format!(
                "/api/v1/approvals/{}/decision",
                uuid::Uuid::new_v4()
            )))
            .bearer_auth(k.to_owned())
            .header("content-type", "application/json")
            .body(r#"{"decision":"approve"}"#)
            .send()
    };
    let r = decision(&viewer).await.unwrap();
    assert_eq!(r.status(), 403);
    let err: Value = r.json().await.unwrap();
    assert!(err["error"].as_str().unwrap().contains("viewer"), "{err}");
    // An approver gets past the role check (no approvals configured here: 404).
    assert_eq!(decision(&approver).await.unwrap().status(), 404);
    // Pinned context: read by everyone, written by an admin only.
    let put_memory = |k: &str| {
        no_redirects()
            .put(d.url("/api/v1/memory"))
            .bearer_auth(k.to_owned())
            .header("content-type", "application/json")
            .body(r#"{"scope":"cluster","content":"payments is PCI-scoped"}"#)
            .send()
    };
    assert_eq!(put_memory(&viewer).await.unwrap().status(), 403);
    assert_eq!(put_memory(&approver).await.unwrap().status(), 403);
    assert_eq!(get(&d, "/api/v1/memory", Some(&viewer)).await.status(), 200);
    assert_eq!(
        get(&d, "/api/v1/audit/verify", Some(&approver))
            .await
            .status(),
        403
    );
    let verified: Value = get(&d, "/api/v1/audit/verify", Some(API_TOKEN))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(verified["intact"], true, "{verified}");
    let mine: Value = get(
        &d,
        &format!("/api/v1/audit/verify?request_id={id}"),
        Some(&viewer),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(mine["intact"], true, "{mine}");

    // A native signal needs the webhook credentials or an admin, not a viewer.
    let native = |k: &str| {
        no_redirects()
            .post(d.url("/api/v1/signals"))
            .bearer_auth(k.to_owned())
            .header("content-type", "application/json")
            .body("{}")
            .send()
    };
    assert_eq!(native(&viewer).await.unwrap().status(), 401);

    // A revoked key stops working at once.
    d.store
        .revoke_api_key("vera", "test")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        get(&d, "/api/v1/requests", Some(&viewer)).await.status(),
        401
    );
    d.stop().await;
}

/// `(cookie, set-cookie header)` of a sign-in with `key`.
async fn sign_in(d: &TestDaemon, key: &str) -> reqwest::Response {
    no_redirects()
        .post(d.url("/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form(&[("key", key), ("next", "/inbox")]))
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_browser_session_is_strict_http_only_and_needs_its_token_to_change_anything() {
    let d = TestDaemon::start(|_| {}).await;
    let approver = key(&d, Role::Approver, "alice").await;
    let r = sign_in(&d, &approver).await;
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()[LOCATION], "/inbox");
    let set = r.headers()[SET_COOKIE].to_str().unwrap().to_owned();
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=43200"] {
        assert!(set.contains(flag), "{set}");
    }
    assert!(!set.contains("Secure"), "plain HTTP here: {set}");
    assert!(!set.contains(&approver), "the cookie is not the key");
    let cookie = set.split(';').next().unwrap().to_owned();

    let page = no_redirects()
        .get(d.url("/inbox"))
        .header(COOKIE, &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(
        html.contains("key:alice"),
        "the page names who is signed in"
    );
    let csrf = html
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the sign-out form carries the CSRF token")
        .to_owned();

    // A session's JSON call without its token is refused; a sign-out without it too.
    let decide = no_redirects()
        .post(d.url(&format!(
            "/api/v1/approvals/{}/decision",
            uuid::Uuid::new_v4()
        )))
        .header(COOKIE, &cookie)
        .header("content-type", "application/json")
        .body(r#"{"decision":"approve"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(decide.status(), 403);
    let out = no_redirects()
        .post(d.url("/logout"))
        .header(COOKIE, &cookie)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form(&[("csrf", "wrong")]))
        .send()
        .await
        .unwrap();
    assert_eq!(out.status(), 403);

    let out = no_redirects()
        .post(d.url("/logout"))
        .header(COOKIE, &cookie)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form(&[("csrf", csrf.as_str())]))
        .send()
        .await
        .unwrap();
    assert_eq!(out.status(), 303);
    assert!(
        out.headers()[SET_COOKIE]
            .to_str()
            .unwrap()
            .contains("Max-Age=0")
    );
    let after = no_redirects()
        .get(d.url("/inbox"))
        .header(COOKIE, &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(after.status(), 303, "the session ended with the sign-out");

    // Sign-in and sign-out are in the audit trail, with the actor.
    let chain: Value = get(&d, "/api/v1/audit/verify", Some(API_TOKEN))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(chain["intact"], true);
    assert!(chain["report"]["events"].as_u64().unwrap() >= 3, "{chain}");

    // A sign-in only ever returns to this daemon.
    let r = no_redirects()
        .post(d.url("/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form(&[
            ("key", approver.as_str()),
            ("next", "//evil.example/"),
        ]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()[LOCATION], "/requests");
    d.stop().await;
}

#[tokio::test]
async fn failed_sign_ins_are_limited_per_client() {
    let d = TestDaemon::start(|_| {}).await;
    let viewer = key(&d, Role::Viewer, "vera").await;
    for i in 0..5 {
        let r = sign_in(&d, &format!("km_guess-{i}")).await;
        assert_eq!(r.status(), 401, "attempt {i}");
        assert!(r.text().await.unwrap().contains("not valid"));
    }
    let r = sign_in(&d, "km_guess-6").await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    let wait: u64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&wait));
    // Even the right key waits: the limit is on the client, not on the guess.
    assert_eq!(sign_in(&d, &viewer).await.status(), 429);
    // Keys over the API are unaffected (a script with a valid key is not locked out).
    assert_eq!(
        get(&d, "/api/v1/requests", Some(&viewer)).await.status(),
        200
    );
    d.stop().await;
}

#[tokio::test]
async fn the_auth_proxy_is_believed_only_from_its_own_address() {
    let proxied = |trusted: &'static str| {
        move |a: &mut kubemedic::config::DaemonArgs| {
            a.web.auth_proxy_user_header = Some("X-Forwarded-User".into());
            a.web.auth_proxy_roles = Some("sre=approver, eng=viewer".into());
            a.web.auth_proxy_trusted_peers = Some(trusted.into());
        }
    };
    let d = TestDaemon::start(proxied("127.0.0.1")).await;
    let call = |d: &TestDaemon, user: &str, groups: &str| {
        no_redirects()
            .get(d.url("/api/v1/approvals"))
            .header("x-forwarded-user", user.to_owned())
            .header("x-forwarded-groups", groups.to_owned())
            .send()
    };
    assert_eq!(call(&d, "bob", "eng,sre").await.unwrap().status(), 200);
    assert_eq!(
        call(&d, "bob", "guests").await.unwrap().status(),
        401,
        "no mapped group"
    );
    let page = no_redirects()
        .get(d.url("/inbox"))
        .header("x-forwarded-user", "bob")
        .header("x-forwarded-groups", "sre")
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("proxy:bob"));
    d.stop().await;

    let d = TestDaemon::start(proxied("10.9.8.7")).await;
    assert_eq!(
        call(&d, "bob", "sre").await.unwrap().status(),
        401,
        "headers from anyone but the proxy are ignored"
    );
    d.stop().await;

    let bad = kubemedic::config::Settings::load(&kubemedic::config::DaemonArgs {
        web: kubemedic::config::WebArgs {
            auth_proxy_user_header: Some("X-Forwarded-User".into()),
            auth_proxy_roles: Some("sre=root".into()),
            auth_proxy_trusted_peers: Some("127.0.0.1".into()),
            ..Default::default()
        },
        ..Default::default()
    })
    .unwrap_err()
    .to_string();
    assert!(
        bad.contains("sre=root") && bad.contains("auth-proxy-roles"),
        "{bad}"
    );
}

/// One server-sent event.
#[derive(Debug, Clone, PartialEq)]
struct Sse {
    id: Option<String>,
    event: String,
    data: Value,
}

fn parse_sse(text: &str) -> Vec<Sse> {
    text.split("\n\n")
        .filter_map(|block| {
            let mut id = None;
            let mut event = None;
            let mut data = String::new();
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("id:") {
                    id = Some(v.trim().to_owned());
                } else if let Some(v) = line.strip_prefix("event:") {
                    event = Some(v.trim().to_owned());
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push_str(v.trim_start());
                }
            }
            Some(Sse {
                id,
                event: event?,
                data: serde_json::from_str(&data).unwrap_or(Value::Null),
            })
        })
        .collect()
}

async fn stream(d: &TestDaemon, id: &str, last: Option<&str>) -> Vec<Sse> {
    let mut r = no_redirects()
        .get(d.url(&format!("/api/v1/requests/{id}/events")))
        .bearer_auth(API_TOKEN)
        .timeout(std::time::Duration::from_secs(20));
    if let Some(l) = last {
        r = r.header("last-event-id", l);
    }
    let r = r.send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    // The request is finished: the stream ends by itself after `end`.
    parse_sse(&r.text().await.unwrap())
}

#[tokio::test]
async fn the_event_stream_resumes_from_the_audit_trail_without_gaps() {
    let d = TestDaemon::start(|_| {}).await;
    let id = open_request(&d).await;
    // Without stages the worker ends the request in review.
    d.eventually(&format!("/api/v1/requests/{id}"), 15, |r| {
        r["phase"] == "ManualReviewRequired"
    })
    .await;
    let all = stream(&d, &id, None).await;
    assert_eq!(all.last().unwrap().event, "end", "{all:#?}");
    let typed: Vec<&Sse> = all.iter().filter(|e| e.id.is_some()).collect();
    assert!(typed.len() >= 2, "{all:#?}");
    assert_eq!(typed[0].event, "signal");
    assert!(
        typed
            .iter()
            .any(|e| e.event == "phase" && e.data["to"] == "ManualReviewRequired")
    );
    for e in &typed {
        assert!(
            e.data["audit_id"].is_i64() && e.data["at"].is_string(),
            "{e:?}"
        );
    }
    // Reconnecting after the first event gives exactly the rest, in order.
    let rest = stream(&d, &id, typed[0].id.as_deref()).await;
    let rest: Vec<&Sse> = rest.iter().filter(|e| e.id.is_some()).collect();
    assert_eq!(rest, typed[1..].to_vec());
    // After the last, nothing but the end.
    let none = stream(&d, &id, typed.last().unwrap().id.as_deref()).await;
    assert_eq!(
        none.iter().map(|e| e.event.as_str()).collect::<Vec<_>>(),
        ["end"]
    );
    // A malformed Last-Event-ID is a clear error.
    let r = no_redirects()
        .get(d.url(&format!("/api/v1/requests/{id}/events")))
        .bearer_auth(API_TOKEN)
        .header("last-event-id", "yesterday")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    d.stop().await;
}

#[tokio::test]
async fn the_openapi_document_describes_every_api_route_and_only_real_ones() {
    let d = TestDaemon::start(|_| {}).await;
    let doc: Value = get(&d, "/api/v1/openapi.json", None)
        .await
        .json()
        .await
        .unwrap();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."), "{doc}");
    let mut documented = Vec::new();
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for method in ops.as_object().unwrap().keys() {
            documented.push(format!("{} {path}", method.to_uppercase()));
        }
    }
    documented.sort();
    // The router's JSON API (web::router), minus Slack's callback and this document.
    let mut routed = vec![
        "GET /api/v1/requests",
        "GET /api/v1/requests/{id}",
        "GET /api/v1/requests/{id}/events",
        "GET /api/v1/signals",
        "POST /api/v1/signals",
        "GET /api/v1/history",
        "GET /api/v1/summary",
        "GET /api/v1/catalog",
        "GET /api/v1/policy",
        "GET /api/v1/audit/verify",
        "GET /api/v1/approvals",
        "GET /api/v1/approvals/{id}",
        "POST /api/v1/approvals/{id}/decision",
        "POST /api/v1/requests/{id}/remediate",
        "POST /api/v1/alerts/alertmanager",
        "POST /v1/chat/completions",
        "GET /v1/chat/stream/{session_id}",
        "GET /v1/models",
        "POST /api/v1/chat/hitl/resume",
        "GET /api/v1/chat/conversations",
        "GET /api/v1/memory",
        "PUT /api/v1/memory",
        "DELETE /api/v1/memory",
    ];
    routed.sort();
    assert_eq!(documented, routed);
    // Each documented path is served (the fallback's "no such endpoint" never answers).
    for op in &documented {
        let (method, path) = op.split_once(' ').unwrap();
        let path = path.replace("{id}", &uuid::Uuid::new_v4().to_string());
        let r = no_redirects()
            .request(method.parse().unwrap(), d.url(&path))
            .bearer_auth(API_TOKEN)
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .unwrap();
        let body = r.text().await.unwrap();
        assert!(!body.contains("no such endpoint"), "{op}: {body}");
    }
    for scheme in ["bearer", "session", "webhook"] {
        assert!(
            doc["components"]["securitySchemes"][scheme].is_object(),
            "{scheme}"
        );
    }
    assert!(doc["components"]["schemas"]["ErrorBody"].is_object());
    // An approval and a request say what was proven (the schemas' fields are held to the
    // domain types by web::openapi's unit tests).
    let op = |path: &str| {
        doc["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
            ["$ref"]
            .clone()
    };
    assert_eq!(
        op("/api/v1/approvals/{id}"),
        "#/components/schemas/Approval"
    );
    assert_eq!(
        op("/api/v1/requests/{id}"),
        "#/components/schemas/RequestDetail"
    );
    let schemas = &doc["components"]["schemas"];
    assert!(schemas["Approval"]["properties"]["proof"].is_object());
    assert!(schemas["Approval"]["properties"]["note"].is_object());
    assert!(schemas["RequestState"]["properties"]["proof_before_write"].is_object());
    for name in ["Proof", "Obligation", "DryRunChange"] {
        assert!(schemas[name].is_object(), "{name}");
    }
    d.stop().await;
}

/// A stream open on a running request does not keep the daemon from stopping.
#[tokio::test]
async fn an_open_event_stream_ends_when_the_daemon_stops() {
    let d = TestDaemon::start_with(|_| {}, common::stalled(), None).await;
    let id = open_request(&d).await;
    let mut r = no_redirects()
        .get(d.url(&format!("/api/v1/requests/{id}/events")))
        .bearer_auth(API_TOKEN)
        .send()
        .await
        .unwrap();
    let first = r.chunk().await.unwrap().unwrap();
    assert!(
        String::from_utf8_lossy(&first).contains("event: signal"),
        "{first:?}"
    );
    let stopped = tokio::time::timeout(std::time::Duration::from_secs(10), d.stop()).await;
    assert!(
        stopped.is_ok(),
        "the daemon did not stop with a stream open"
    );
    // The stream ended (no `end`: the request is not finished; the client resumes elsewhere).
    let mut rest = String::new();
    while let Ok(Some(chunk)) = r.chunk().await {
        rest.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(!rest.contains("event: end"), "{rest}");
}

/// Read `r`'s event stream until `needle` shows; fails after 10 s (a guard against hanging,
/// not a measure: the daemon's fallback poll is an hour in these tests).
async fn read_until(r: &mut reqwest::Response, seen: &mut String, needle: &str) {
    tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while !seen.contains(needle) {
            let chunk = r.chunk().await.unwrap().expect("the stream ended");
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
    })
    .await
    .unwrap_or_else(|_| panic!("`{needle}` never came; the stream so far:\n{seen}"));
}

/// An open event stream sends an audit event `writer` appends as soon as it is committed: the
/// daemon `d` polls the trail only once an hour (`--event-stream-poll-seconds 3600`), so only a
/// wake-up can deliver it.
async fn a_stream_is_woken_by_events_written_through(d: &TestDaemon, writer: &dyn Store) {
    let id = open_request(d).await;
    let mut r = no_redirects()
        .get(d.url(&format!("/api/v1/requests/{id}/events")))
        .bearer_auth(API_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let mut seen = String::new();
    read_until(&mut r, &mut seen, "event: signal").await;
    // On Postgres the daemon's listener, started by the stream, is listening now; a wait the
    // stream began before that may still end with the 0.5 s poll of a deaf bell, so the second
    // event is the one only a wake-up brings.
    tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while !d.store.trail_bell().live {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the daemon's listener never listened");
    let request = uuid::Uuid::parse_str(&id).unwrap();
    for n in 1..=2 {
        let message = format!("written elsewhere, {n}");
        writer
            .append_audit(
                Some(request),
                None,
                &AuditDraft::new("note", "other-replica", message.clone()),
            )
            .await
            .unwrap();
        read_until(&mut r, &mut seen, &message).await;
    }
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
        metrics.contains("kubemedic_audit_listener_up 1")
            && metrics.contains("kubemedic_audit_listener_losses_total 0"),
        "{metrics}"
    );
}

/// SQLite: an event the daemon's own store commits wakes the stream (in the process).
#[tokio::test]
async fn an_open_event_stream_sends_a_new_event_at_once() {
    let d = TestDaemon::start_with(
        |a| a.web.event_stream_poll_seconds = Some(3600),
        common::stalled(),
        None,
    )
    .await;
    a_stream_is_woken_by_events_written_through(&d, d.store.as_ref()).await;
    d.stop().await;
}

/// Postgres, two replicas: an event written through another store on the same database (the
/// other replica) wakes the stream this daemon serves — LISTEN/NOTIFY, not a poll.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_another_replica_writes_reaches_an_open_stream_at_once() {
    let Some(url) = common::fresh_postgres().await else {
        return;
    };
    // Replicas sign the one audit chain with one key.
    let key = kubemedic::secret::Secret::new(
        "5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed",
    );
    let mut args = kubemedic::config::DaemonArgs::default();
    args.store.database_url = Some(kubemedic::secret::Secret::new(&url));
    args.store.audit_key = Some(key);
    let d = TestDaemon::start_with(
        |a| {
            a.store.database_url = args.store.database_url.clone();
            a.store.audit_key = args.store.audit_key.clone();
            a.web.event_stream_poll_seconds = Some(3600);
        },
        common::stalled(),
        None,
    )
    .await;
    let settings = kubemedic::config::Settings::load(&args).unwrap();
    let other: Arc<dyn Store> =
        kubemedic::daemon::open_store(&settings, Arc::new(kubemedic::clock::SystemClock))
            .await
            .unwrap();
    a_stream_is_woken_by_events_written_through(&d, other.as_ref()).await;
    d.stop().await;
}
