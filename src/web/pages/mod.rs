//! The dashboard: HTML pages rendered by the daemon (maud templates, checked at compile time),
//! styled by one stylesheet and made live by one small script, both served from here — a page
//! fetches nothing from anywhere else (the Content-Security-Policy says so to the browser).
//!
//! Every page needs a signed-in caller (an anonymous visitor is sent to `/login`); every
//! route checks the role; every form carries the session's CSRF token. What a page shows comes
//! from the store and the audit trail; model output, alert text and tool arguments are escaped
//! by the templates and passed through the secret redaction first.

mod ask;
mod catalog;
mod inbox;
mod proof;
mod requests;
mod summary;
mod takeover;

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Form, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Redirect, Response};
use chrono::{DateTime, Utc};
use maud::{DOCTYPE, Markup, PreEscaped, html};
use serde::Deserialize;

pub use ask::{ask, memory, memory_submit};
pub use catalog::{catalog, policy};
pub use inbox::{decide, inbox};
pub use requests::{history, request, requests};
pub use summary::summary;
pub use takeover::remediate_form;

use super::auth::{Principal, SESSION_COOKIE, Via, digest, random_token};
use super::{ApiError, AppState, Caller, Peer};
use crate::domain::{AuditDraft, Phase, Role, Session};

const STYLESHEET: &str = include_str!("dashboard.css");
const LIVE_SCRIPT: &str = include_str!("live.js");
const ASK_SCRIPT: &str = include_str!("ask.js");

/// What the browser may load and where forms may go: this daemon only.
const CSP: &str = "default-src 'none'; style-src 'self'; script-src 'self'; connect-src 'self'; \
                   img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; \
                   base-uri 'none'";

/// An HTML response with the dashboard's security headers.
fn respond(status: StatusCode, body: Markup) -> Response {
    let mut r = (status, body.into_string()).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert("content-security-policy", HeaderValue::from_static(CSP));
    h.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    r
}

/// The page's frame: navigation, who is signed in, and the sign-out form.
fn layout(title: &str, who: Option<&Principal>, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="robots" content="noindex, nofollow";
                title { (title) " · kubemedic" }
                link rel="stylesheet" href="/static/dashboard.css";
            }
            body {
                header.top {
                    a.brand href="/requests" { "kubemedic" }
                    @if let Some(p) = who {
                        nav {
                            a href="/requests" { "Requests" }
                            a href="/ask" { "Ask" }
                            a href="/inbox" { "Approvals" }
                            a href="/summary" { "Summary" }
                            a href="/catalog" { "Catalog" }
                            a href="/policy" { "Policy" }
                            a href="/memory" { "Memory" }
                        }
                        span.who {
                            span #who { (p.subject) } " · " span.role #role { (p.role.as_str()) }
                            @if p.via == Via::Session {
                                form.inline method="post" action="/logout" {
                                    (csrf_field(p))
                                    button.link type="submit" { "Sign out" }
                                }
                            }
                        }
                    }
                }
                main { h1 { (title) } (body) }
            }
        }
    }
}

fn csrf_field(p: &Principal) -> Markup {
    html! {
        @if let Some(token) = &p.csrf {
            input type="hidden" name="csrf" value=(token);
        }
    }
}

/// The caller of a page: anonymous visitors are sent to `/login`, callers without the role
/// get a 403 page.
fn page_caller(caller: Caller, uri: &Uri, needed: Role) -> Result<Principal, Box<Response>> {
    match caller.0 {
        None => {
            let next = uri
                .path_and_query()
                .map_or("/requests", |p| p.as_str())
                .to_owned();
            let target = format!(
                "/login?next={}",
                form_urlencoded::byte_serialize(next.as_bytes()).collect::<String>()
            );
            Err(Box::new(Redirect::to(&target).into_response()))
        }
        Some(p) if p.role.allows(needed) => Ok(p),
        Some(p) => Err(Box::new(error_page(
            StatusCode::FORBIDDEN,
            "Not allowed",
            &format!(
                "{} has role {}; this page needs {needed}.",
                p.subject, p.role
            ),
            Some(&p),
        ))),
    }
}

/// The caller of a form that changes something: signed in with `needed`, from this site, with
/// this session's CSRF token; otherwise the page that says why. `what` is what to reload.
fn form_caller(
    caller: Caller,
    uri: &Uri,
    headers: &HeaderMap,
    csrf: Option<&str>,
    needed: Role,
    what: &str,
) -> Result<Principal, Box<Response>> {
    let who = page_caller(caller, uri, needed)?;
    if cross_site(headers) || !who.csrf_ok(csrf) {
        tracing::warn!(subject = %who.subject, "dashboard form refused: no valid CSRF token");
        return Err(Box::new(error_page(
            StatusCode::FORBIDDEN,
            "Refused",
            &format!("The form did not carry this session's token; reload {what} and try again."),
            Some(&who),
        )));
    }
    Ok(who)
}

fn error_page(status: StatusCode, title: &str, message: &str, who: Option<&Principal>) -> Response {
    respond(
        status,
        layout(
            title,
            who,
            html! { p.error { (message) } p { a href="/requests" { "Back to the requests" } } },
        ),
    )
}

/// A page for an API error met while rendering one.
fn failed(e: ApiError, who: &Principal) -> Response {
    let (status, message) = match e {
        ApiError::NotFound(m) => (StatusCode::NOT_FOUND, m),
        ApiError::BadRequest { field, message } => (
            StatusCode::BAD_REQUEST,
            match field {
                Some(f) => format!("{f}: {message}"),
                None => message,
            },
        ),
        ApiError::Forbidden(m) => (StatusCode::FORBIDDEN, m),
        ApiError::Unavailable(m) => (StatusCode::SERVICE_UNAVAILABLE, m),
        other => {
            return other.into_response();
        }
    };
    error_page(status, "Cannot show this page", &message, Some(who))
}

/// A phase as a coloured badge.
fn phase_badge(phase: Phase) -> Markup {
    let class = match phase {
        Phase::Completed => "ok",
        Phase::Failed => "bad",
        Phase::Blocked | Phase::Rejected | Phase::Expired | Phase::ManualReviewRequired => "warn",
        Phase::AwaitingApproval => "wait",
        p if p.is_terminal() => "done",
        _ => "run",
    };
    html! { span class={ "badge " (class) } data-phase=(phase.as_str()) { (phase.as_str()) } }
}

/// `3m`, `2h`, `5d`: how long ago.
fn age(now: DateTime<Utc>, t: DateTime<Utc>) -> String {
    let s = (now - t).num_seconds().max(0);
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86_400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

fn when(t: DateTime<Utc>) -> Markup {
    html! { time datetime=(t.to_rfc3339()) title=(t.to_rfc3339()) { (t.format("%Y-%m-%d %H:%M:%S UTC")) } }
}

/// A short id for lists.
fn short(id: &uuid::Uuid) -> String {
    id.to_string()[..8].to_owned()
}

/// `GET /`: the request list.
pub async fn home() -> Redirect {
    Redirect::to("/requests")
}

pub async fn stylesheet() -> Response {
    static_text("text/css; charset=utf-8", STYLESHEET)
}

pub async fn live_script() -> Response {
    static_text("text/javascript; charset=utf-8", LIVE_SCRIPT)
}

pub async fn ask_script() -> Response {
    static_text("text/javascript; charset=utf-8", ASK_SCRIPT)
}

fn static_text(content_type: &'static str, text: &'static str) -> Response {
    let mut r = text.into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=300"),
    );
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    r
}

/// Where to go after signing in: a path on this daemon only.
fn local_path(next: Option<&str>) -> String {
    match next {
        Some(n) if n.starts_with('/') && !n.starts_with("//") && !n.contains('\\') => n.to_owned(),
        _ => "/requests".to_owned(),
    }
}

fn login_form(next: &str, message: Option<&str>) -> Markup {
    layout(
        "Sign in",
        None,
        html! {
            @if let Some(m) = message { p.error #login-error { (m) } }
            form.login method="post" action="/login" {
                input type="hidden" name="next" value=(next);
                label for="key" { "API key" }
                input #key type="password" name="key" autocomplete="current-password" required autofocus;
                button.primary type="submit" { "Sign in" }
            }
            p.hint { "Keys are made with " code { "kubemedic apikey create --role viewer|approver|admin --name NAME" } "." }
        },
    )
}

/// `GET /login`
pub async fn login_page(Query(q): Query<HashMap<String, String>>) -> Response {
    let next = local_path(q.get("next").map(String::as_str));
    respond(StatusCode::OK, login_form(&next, None))
}

#[derive(Deserialize)]
pub struct LoginForm {
    key: String,
    #[serde(default)]
    next: Option<String>,
}

/// A form POST from another site: refused whatever its credentials (defence in depth beside
/// the SameSite cookie and the CSRF token).
fn cross_site(headers: &HeaderMap) -> bool {
    headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == "cross-site")
}

/// `POST /login`: a key in, a session cookie out.
pub async fn login(
    State(state): State<Arc<AppState>>,
    Peer(peer): Peer,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Response {
    let next = local_path(form.next.as_deref());
    if cross_site(&headers) {
        return respond(
            StatusCode::FORBIDDEN,
            login_form(&next, Some("Sign-in from another site refused.")),
        );
    }
    let ip = peer.unwrap_or(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED));
    let blocked = state
        .logins
        .blocked(state.store.as_ref(), ip, state.clock.now())
        .await;
    let blocked = match blocked {
        Ok(b) => b,
        Err(e) => return ApiError::from(e).into_response(),
    };
    if let Some(wait) = blocked {
        let secs = wait.as_secs().max(1);
        let mut r = respond(
            StatusCode::TOO_MANY_REQUESTS,
            login_form(
                &next,
                Some(&format!("Too many failed sign-ins; try again in {secs} s.")),
            ),
        );
        if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
            r.headers_mut().insert(header::RETRY_AFTER, v);
        }
        return r;
    }
    let key = match state.key_named_by(form.key.trim()).await {
        Ok(k) => k,
        Err(e) => return e.into_response(),
    };
    let Some((name, role, stored)) = key else {
        if let Err(e) = state
            .logins
            .failed(state.store.as_ref(), ip, state.clock.now())
            .await
        {
            tracing::error!(peer = %ip, error = %e, "a failed sign-in could not be counted");
            return ApiError::from(e).into_response();
        }
        tracing::warn!(peer = %ip, "dashboard sign-in with an unknown or revoked key");
        return respond(
            StatusCode::UNAUTHORIZED,
            login_form(&next, Some("That key is not valid (unknown or revoked).")),
        );
    };
    if let Err(e) = state.logins.succeeded(state.store.as_ref(), ip).await {
        return ApiError::from(e).into_response();
    }
    let token = random_token();
    let now = state.clock.now();
    let ttl = chrono::Duration::from_std(state.auth.session_ttl)
        .unwrap_or_else(|_| chrono::Duration::hours(12));
    let session = Session {
        subject: format!("key:{name}"),
        key_id: stored.as_ref().map(|k| k.id),
        role,
        csrf: random_token(),
        created_at: now,
        expires_at: now + ttl,
    };
    if let Err(e) = state.store.create_session(&digest(&token), &session).await {
        return ApiError::from(e).into_response();
    }
    let audit = AuditDraft::new(
        "login",
        &session.subject,
        format!("{} signed in to the dashboard as {role}", session.subject),
    )
    .with_payload(serde_json::json!({"peer": ip.to_string(), "role": role}));
    if let Err(e) = state.store.append_audit(None, None, &audit).await {
        tracing::warn!(error = %e, "the sign-in could not be audited");
    }
    let mut cookie = format!(
        "{SESSION_COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}",
        state.auth.session_ttl.as_secs()
    );
    if state.auth.secure_cookies {
        cookie.push_str("; Secure");
    }
    let mut r = Redirect::to(&next).into_response();
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}

#[derive(Deserialize)]
pub struct CsrfForm {
    #[serde(default)]
    csrf: Option<String>,
}

/// `POST /logout`
pub async fn logout(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    uri: Uri,
    Form(form): Form<CsrfForm>,
) -> Response {
    let who = match page_caller(caller, &uri, Role::Viewer) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    if !who.csrf_ok(form.csrf.as_deref()) {
        return error_page(
            StatusCode::FORBIDDEN,
            "Refused",
            "The form did not carry this session's token.",
            Some(&who),
        );
    }
    if let Some(session) = &who.session {
        if let Err(e) = state.store.delete_session(session).await {
            return ApiError::from(e).into_response();
        }
        let audit = AuditDraft::new(
            "logout",
            &who.subject,
            format!("{} signed out", who.subject),
        );
        if let Err(e) = state.store.append_audit(None, None, &audit).await {
            tracing::warn!(error = %e, "the sign-out could not be audited");
        }
    }
    let mut r = Redirect::to("/login").into_response();
    let expired = format!("{SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0");
    if let Ok(v) = HeaderValue::from_str(&expired) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}

/// Pretty JSON, redacted, in a collapsible block.
fn json_block(summary: &str, v: &serde_json::Value) -> Markup {
    let clean = crate::redact::sanitize_value(v);
    let text = serde_json::to_string_pretty(&clean).unwrap_or_default();
    html! { details.json { summary { (summary) } pre { (text) } } }
}

/// Text from a model or an alert: redacted, then escaped by the template.
fn said(text: &str) -> Markup {
    html! { (crate::redact::sanitize_text(text)) }
}

/// A number with a thin-space thousands separator.
fn count(n: i64) -> String {
    let s = n.abs().to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push('\u{202f}');
        }
        out.push(c);
    }
    if n < 0 { format!("-{out}") } else { out }
}

/// Raw markup we built ourselves (an SVG chart): never text from outside.
fn trusted(svg: String) -> Markup {
    PreEscaped(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sign_in_only_returns_to_paths_on_this_daemon() {
        assert_eq!(
            local_path(Some("/requests?phase=Completed")),
            "/requests?phase=Completed"
        );
        assert_eq!(local_path(Some("//evil.example/x")), "/requests");
        assert_eq!(local_path(Some("https://evil.example")), "/requests");
        assert_eq!(local_path(Some("/\\evil")), "/requests");
        assert_eq!(local_path(None), "/requests");
    }

    #[test]
    fn counts_and_ages_read_well() {
        assert_eq!(count(1234567), "1\u{202f}234\u{202f}567");
        assert_eq!(count(12), "12");
        let now = Utc::now();
        assert_eq!(age(now, now - chrono::Duration::minutes(3)), "3m");
        assert_eq!(age(now, now - chrono::Duration::days(2)), "2d");
    }
}
