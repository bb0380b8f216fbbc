//! Approval mail over SMTP (lettre, rustls with ring; no OpenSSL).
//!
//! In: an [`ApprovalMessage`] for one approver (its signed Approve / Deny links made by the
//! caller). Out: one `multipart/alternative` mail (text and HTML) with everything the approver
//! needs to decide; later a short follow-up threaded to it (`In-Reply-To`) saying how it ended.
//! `offer` returns `{"message_id": "<…>"}` as the external reference `outcome` threads to.
//!
//! Every value of the approval is untrusted (alert text, model output): the HTML part escapes
//! all of it and the links are only ever the caller's. Errors say which server refused what;
//! connection failures, time-outs and 4xx replies are retryable, 5xx replies (a refused
//! password, a refused address) and addresses that do not parse are not.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use lettre::message::header::{HeaderName, HeaderValue};
use lettre::message::{Mailbox, MultiPart};
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::render;
use super::{Notifier, NotifyError, SettingsError};
use crate::clock::Clock;
use crate::domain::{ApprovalMessage, ApprovalRequest, Channel};
use crate::secret::Secret;

/// How the daemon reaches its SMTP server and whom it asks.
#[derive(Debug, Clone)]
pub struct EmailSettings {
    /// `smtp://host[:25]` (plain), `smtp+starttls://host[:587]` (STARTTLS required),
    /// `smtps://host[:465]` (implicit TLS).
    pub smtp_url: String,
    pub username: Option<String>,
    pub password: Option<Secret>,
    /// The sender, `kubemedic <kubemedic@example.com>` or a bare address.
    pub from: String,
    /// Who is asked: one mail each.
    pub approvers: Vec<String>,
    /// For each SMTP command and the connection.
    pub timeout: Duration,
    /// A PEM file of extra CA certificates to trust for TLS (a private relay); the Mozilla
    /// roots (webpki-roots) are always trusted.
    pub ca_file: Option<PathBuf>,
}

impl EmailSettings {
    /// Every setting checked, each error naming its flag.
    pub fn validate(&self) -> Result<(), SettingsError> {
        parse_smtp_url(&self.smtp_url)?;
        parse_mailbox("--email-from", &self.from)?;
        if self.approvers.is_empty() {
            return Err(SettingsError::new(
                "--approvers",
                "no approver: e-mail needs at least one address to ask",
            ));
        }
        for a in &self.approvers {
            parse_mailbox("--approvers", a)?;
        }
        match (&self.username, &self.password) {
            (Some(u), _) if u.trim().is_empty() => {
                return Err(SettingsError::new("--smtp-username", "is empty"));
            }
            (Some(_), None) => {
                return Err(SettingsError::new(
                    "--smtp-password",
                    "is required with --smtp-username",
                ));
            }
            (None, Some(_)) => {
                return Err(SettingsError::new(
                    "--smtp-username",
                    "is required with --smtp-password",
                ));
            }
            _ => {}
        }
        if self.timeout.is_zero() {
            return Err(SettingsError::new(
                "--smtp-timeout-seconds",
                "must be more than 0",
            ));
        }
        Ok(())
    }
}

/// How the connection to the server is secured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmtpSecurity {
    /// No TLS at all (a relay on localhost, a test server).
    Plain,
    /// Plain connection upgraded with STARTTLS; refused if the server does not offer it.
    StartTls,
    /// TLS from the first byte (SMTPS).
    Tls,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmtpEndpoint {
    pub security: SmtpSecurity,
    pub host: String,
    pub port: u16,
}

impl std::fmt::Display for SmtpEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = match self.security {
            SmtpSecurity::Plain => "smtp",
            SmtpSecurity::StartTls => "smtp+starttls",
            SmtpSecurity::Tls => "smtps",
        };
        if self.host.contains(':') {
            write!(f, "{scheme}://[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{scheme}://{}:{}", self.host, self.port)
        }
    }
}

/// `smtp://host:port`, `smtp+starttls://host:port`, `smtps://host:port`; default ports 25, 587,
/// 465. No credentials (they have their own settings, so the URL can be logged), no path.
pub fn parse_smtp_url(s: &str) -> Result<SmtpEndpoint, SettingsError> {
    const FLAG: &str = "--smtp-url";
    let url = url::Url::parse(s.trim()).map_err(|e| {
        SettingsError::new(
            FLAG,
            format!("{s:?} is not a URL ({e}); use smtp://host:25, smtp+starttls://host:587 or smtps://host:465"),
        )
    })?;
    let (security, default_port) = match url.scheme() {
        "smtp" => (SmtpSecurity::Plain, 25),
        "smtp+starttls" => (SmtpSecurity::StartTls, 587),
        "smtps" => (SmtpSecurity::Tls, 465),
        other => {
            return Err(SettingsError::new(
                FLAG,
                format!(
                    "unknown scheme {other:?}; use smtp:// (plain), smtp+starttls:// (STARTTLS) or smtps:// (implicit TLS)"
                ),
            ));
        }
    };
    if !url.username().is_empty() || url.password().is_some() {
        return Err(SettingsError::new(
            FLAG,
            "credentials do not belong in the URL; use --smtp-username and --smtp-password",
        ));
    }
    let host = match url.host() {
        Some(url::Host::Ipv6(ip)) => ip.to_string(),
        Some(h) => h.to_string(),
        None => return Err(SettingsError::new(FLAG, format!("{s:?} names no host"))),
    };
    if host.is_empty() {
        return Err(SettingsError::new(FLAG, format!("{s:?} names no host")));
    }
    if !(url.path().is_empty() || url.path() == "/") || url.query().is_some() {
        return Err(SettingsError::new(
            FLAG,
            format!("{s:?} has a path or query; only scheme://host:port is understood"),
        ));
    }
    let port = url.port().unwrap_or(default_port);
    if port == 0 {
        return Err(SettingsError::new(FLAG, "port 0"));
    }
    Ok(SmtpEndpoint {
        security,
        host,
        port,
    })
}

fn parse_mailbox(flag: &'static str, s: &str) -> Result<Mailbox, SettingsError> {
    s.trim().parse::<Mailbox>().map_err(|e| {
        SettingsError::new(
            flag,
            format!(
                "{s:?} is not an e-mail address ({e}); write a@example.com or Name <a@example.com>"
            ),
        )
    })
}

/// Sends approval mail through one SMTP server (connections pooled by lettre).
pub struct EmailNotifier {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    endpoint: SmtpEndpoint,
    from: Mailbox,
    approvers: Vec<String>,
    clock: Arc<dyn Clock>,
}

impl EmailNotifier {
    pub fn new(settings: &EmailSettings, clock: Arc<dyn Clock>) -> Result<Self, SettingsError> {
        settings.validate()?;
        let endpoint = parse_smtp_url(&settings.smtp_url)?;
        let from = parse_mailbox("--email-from", &settings.from)?;
        let tls = match endpoint.security {
            SmtpSecurity::Plain => Tls::None,
            SmtpSecurity::StartTls => Tls::Required(tls_parameters(&endpoint, settings)?),
            SmtpSecurity::Tls => Tls::Wrapper(tls_parameters(&endpoint, settings)?),
        };
        let mut builder =
            AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(endpoint.host.clone())
                .port(endpoint.port)
                .tls(tls)
                .timeout(Some(settings.timeout));
        if let (Some(user), Some(password)) = (&settings.username, &settings.password) {
            builder =
                builder.credentials(Credentials::new(user.clone(), password.expose().to_owned()));
        }
        Ok(Self {
            transport: builder.build(),
            endpoint,
            from,
            approvers: settings
                .approvers
                .iter()
                .map(|a| a.trim().to_owned())
                .collect(),
            clock,
        })
    }

    /// The server, as errors and logs name it (`smtps://mail.example.com:465`).
    pub fn server(&self) -> &SmtpEndpoint {
        &self.endpoint
    }

    async fn send(&self, what: &str, mail: Message) -> Result<(), NotifyError> {
        match self.transport.send(mail).await {
            Ok(_) => Ok(()),
            Err(e) => Err(classify(&self.endpoint, what, &e)),
        }
    }

    fn message_id(&self, approval: &ApprovalRequest, recipient: &str, kind: &str) -> String {
        let domain = self.from.email.domain().to_owned();
        let mut h = Sha256::new();
        h.update(recipient.trim().to_lowercase().as_bytes());
        let digest = h.finalize();
        let short = hex::encode(digest.get(..6).unwrap_or_default());
        format!("<kubemedic.{}.{short}.{kind}@{domain}>", approval.id)
    }
}

fn tls_parameters(
    endpoint: &SmtpEndpoint,
    settings: &EmailSettings,
) -> Result<TlsParameters, SettingsError> {
    let mut builder = TlsParameters::builder(endpoint.host.clone());
    if let Some(path) = &settings.ca_file {
        let pem = std::fs::read(path).map_err(|e| {
            SettingsError::new("--smtp-ca-file", format!("{}: {e}", path.display()))
        })?;
        let cert = Certificate::from_pem(&pem).map_err(|e| {
            SettingsError::new(
                "--smtp-ca-file",
                format!("{}: not a PEM certificate ({e})", path.display()),
            )
        })?;
        builder = builder.add_root_certificate(cert);
    }
    builder
        .build_rustls()
        .map_err(|e| SettingsError::new("--smtp-url", format!("TLS set-up failed: {e}")))
}

/// Which lettre failures a later attempt may get past.
fn classify(
    endpoint: &SmtpEndpoint,
    what: &str,
    e: &lettre::transport::smtp::Error,
) -> NotifyError {
    let detail = chain(e);
    let message = format!("sending the {what} through {endpoint}: {detail}");
    if !e.is_transient() && !e.is_permanent() && detail.contains("certificate") {
        // The server's certificate is not trusted, expired or for another name: retrying
        // changes nothing until somebody changes the server or the trust.
        NotifyError::permanent(format!(
            "{message} (is the server's CA in --smtp-ca-file, and the host its certificate's name?)"
        ))
    } else if e.is_permanent() {
        // 5xx: a refused password (535), a refused recipient (550), no relaying (554).
        NotifyError::permanent(message)
    } else if e.is_client() {
        // lettre refused before the server was asked (no common auth mechanism, bad envelope).
        NotifyError::permanent(message)
    } else {
        // 4xx, connection refused, time-outs, TLS handshakes cut short, garbled replies.
        NotifyError::retryable(message)
    }
}

/// The error and its sources, `: `-joined (lettre's Display shows only the top).
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        let text = inner.to_string();
        if !s.contains(&text) {
            let _ = write!(s, ": {text}");
        }
        source = inner.source();
    }
    // lettre nests its own errors: "Connection error: Connection error: …".
    while let Some(i) = s.find("Connection error: Connection error: ") {
        s.replace_range(i..i + "Connection error: ".len(), "");
    }
    s
}

fn header(name: &'static str, value: impl Into<String>) -> HeaderValue {
    HeaderValue::new(HeaderName::new_from_ascii_str(name), value.into())
}

#[async_trait]
impl Notifier for EmailNotifier {
    fn channel(&self) -> Channel {
        Channel::Email
    }

    fn recipients(&self, _approval: &ApprovalRequest) -> Vec<String> {
        self.approvers.clone()
    }

    async fn offer(&self, message: &ApprovalMessage) -> Result<Option<Value>, NotifyError> {
        let to = message.recipient.trim().parse::<Mailbox>().map_err(|e| {
            NotifyError::permanent(format!(
                "recipient {:?} is not an e-mail address: {e}",
                message.recipient
            ))
        })?;
        let a = &message.approval;
        let now = self.clock.now();
        let message_id = self.message_id(a, &message.recipient, "offer");
        let mail = base(&self.from, to, a, &message_id)
            .subject(offer_subject(a))
            .multipart(MultiPart::alternative_plain_html(
                offer_text(message, now),
                offer_html(message, now),
            ))
            .map_err(|e| NotifyError::permanent(format!("building the approval mail: {e}")))?;
        self.send("approval mail", mail).await?;
        Ok(Some(json!({ "message_id": message_id })))
    }

    async fn outcome(
        &self,
        message: &ApprovalMessage,
        external_ref: Option<&Value>,
    ) -> Result<(), NotifyError> {
        let to = message.recipient.trim().parse::<Mailbox>().map_err(|e| {
            NotifyError::permanent(format!(
                "recipient {:?} is not an e-mail address: {e}",
                message.recipient
            ))
        })?;
        let a = &message.approval;
        let message_id = self.message_id(a, &message.recipient, "outcome");
        let mut builder =
            base(&self.from, to, a, &message_id).subject(format!("Re: {}", offer_subject(a)));
        let offer_id = external_ref
            .and_then(|r| r.get("message_id"))
            .and_then(Value::as_str)
            .map(str::to_owned)
            // Without the reference (offer never delivered) the id is the one it would have had.
            .unwrap_or_else(|| self.message_id(a, &message.recipient, "offer"));
        builder = builder.in_reply_to(offer_id.clone()).references(offer_id);
        let mail = builder
            .multipart(MultiPart::alternative_plain_html(
                outcome_text(message),
                outcome_html(message),
            ))
            .map_err(|e| NotifyError::permanent(format!("building the outcome mail: {e}")))?;
        self.send("outcome mail", mail).await
    }
}

/// Headers every kubemedic mail carries: addressing, threading, and the RFC 3834 / Exchange
/// hints that keep auto-responders (out of office, bounces to bots) away.
fn base(
    from: &Mailbox,
    to: Mailbox,
    a: &ApprovalRequest,
    message_id: &str,
) -> lettre::message::MessageBuilder {
    Message::builder()
        .from(from.clone())
        .to(to)
        .message_id(Some(message_id.to_owned()))
        .date_now()
        .raw_header(header("Auto-Submitted", "auto-generated"))
        .raw_header(header("X-Auto-Response-Suppress", "All"))
        .raw_header(header("X-Kubemedic-Approval", a.id.to_string()))
        .raw_header(header("X-Kubemedic-Request", a.request_id.to_string()))
}

/// `[kubemedic] Approve RollbackDeployment on prod/Deployment/checkout? (risk 85)`
pub fn offer_subject(a: &ApprovalRequest) -> String {
    render::one_line(&format!(
        "[kubemedic] {} (risk {})",
        render::question(a),
        a.risk_score
    ))
}

/// The facts as (label, value) rows, the same in both parts.
fn facts(a: &ApprovalRequest, now: DateTime<Utc>) -> Vec<(&'static str, String)> {
    vec![
        ("Signal", a.signal_name.clone()),
        ("Target", a.target.to_string()),
        ("Environment", render::environment(a)),
        ("Workflow", render::workflow(a)),
        ("Confidence", render::confidence(a)),
        ("Risk", render::risk(a)),
        ("Expires", render::expiry(a, now)),
        ("Approval", a.id.to_string()),
        ("Request", a.request_id.to_string()),
    ]
}

fn list_or_none(items: &[String]) -> Vec<String> {
    if items.is_empty() {
        vec!["(none)".into()]
    } else {
        items.to_vec()
    }
}

pub(crate) fn offer_text(m: &ApprovalMessage, now: DateTime<Utc>) -> String {
    let a = &m.approval;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "kubemedic asks for your approval: {}",
        render::question(a)
    );
    let _ = writeln!(s);
    for (label, value) in facts(a, now) {
        let _ = writeln!(s, "{:<13}{}", format!("{label}:"), value);
    }
    let section = |s: &mut String, title: &str, lines: Vec<String>| {
        let _ = writeln!(s, "\n{title}");
        for l in lines {
            let _ = writeln!(s, "  - {l}");
        }
    };
    let _ = writeln!(s, "\nSummary\n  {}", a.summary);
    section(&mut s, "Evidence", list_or_none(&a.evidence));
    section(
        &mut s,
        "Parameters",
        list_or_none(&render::parameters(&a.parameters)),
    );
    section(
        &mut s,
        "What would change (the API server's dry run)",
        render::change(a),
    );
    section(
        &mut s,
        "What was checked against the cluster",
        render::checked(a),
    );
    if let Some(h) = render::bound_to(a) {
        let _ = writeln!(
            s,
            "  Bound to spec {h}: if the target changes before it runs, nothing is written."
        );
    }
    let _ = writeln!(s, "\nWhy this workflow\n  {}", a.rationale);
    section(
        &mut s,
        "Alternatives",
        list_or_none(&render::alternatives(a)),
    );
    section(
        &mut s,
        "Approval is required because",
        list_or_none(&a.required_because),
    );
    let _ = writeln!(s, "  Policy revision: {}", render::policy_revision(a));
    let _ = writeln!(s);
    if let Some(u) = &m.approve_url {
        let _ = writeln!(s, "Approve: {u}");
    }
    if let Some(u) = &m.deny_url {
        let _ = writeln!(s, "Deny:    {u}");
    }
    if let Some(u) = &m.view_url {
        let _ = writeln!(s, "Review:  {u}");
    }
    let _ = writeln!(
        s,
        "\nEach link opens a confirmation page; nothing is decided until you confirm there.\nThe links are yours alone, work once, and stop working {}.",
        render::relative(a.expires_at, now).replace("already expired", "now")
    );
    s
}

/// HTML-escaped: `&`, `<`, `>`, `"`, `'`.
pub fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Only http(s) links become `href`s; anything else is shown as text.
fn link(url: &str, label: &str, colour: &str) -> String {
    let lower = url.trim_start().to_ascii_lowercase();
    if lower.starts_with("https://") || lower.starts_with("http://") {
        format!(
            r#"<a href="{}" style="display:inline-block;padding:10px 18px;margin-right:8px;border-radius:4px;background:{colour};color:#ffffff;text-decoration:none;font-weight:bold">{}</a>"#,
            escape_html(url),
            escape_html(label)
        )
    } else {
        format!("{}: {}", escape_html(label), escape_html(url))
    }
}

fn html_list(items: &[String]) -> String {
    let mut s = String::from("<ul>");
    for i in list_or_none(items) {
        let _ = write!(s, "<li>{}</li>", escape_html(&i));
    }
    s.push_str("</ul>");
    s
}

const HTML_HEAD: &str = r#"<!DOCTYPE html><html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"></head><body style="font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;font-size:14px;color:#1f2328;max-width:720px">"#;

pub(crate) fn offer_html(m: &ApprovalMessage, now: DateTime<Utc>) -> String {
    let a = &m.approval;
    let mut s = String::from(HTML_HEAD);
    let _ = write!(
        s,
        "<h2>kubemedic asks for your approval</h2><p><strong>{}</strong></p>",
        escape_html(&render::question(a))
    );
    s.push_str(r#"<table cellpadding="4" style="border-collapse:collapse">"#);
    for (label, value) in facts(a, now) {
        let _ = write!(
            s,
            r#"<tr><th align="left" valign="top">{}</th><td>{}</td></tr>"#,
            escape_html(label),
            escape_html(&value)
        );
    }
    s.push_str("</table>");
    let _ = write!(s, "<h3>Summary</h3><p>{}</p>", escape_html(&a.summary));
    let _ = write!(s, "<h3>Evidence</h3>{}", html_list(&a.evidence));
    let _ = write!(
        s,
        "<h3>Parameters</h3>{}",
        html_list(&render::parameters(&a.parameters))
    );
    let _ = write!(
        s,
        "<h3>What would change (the API server's dry run)</h3>{}",
        html_list(&render::change(a))
    );
    let _ = write!(
        s,
        "<h3>What was checked against the cluster</h3>{}",
        html_list(&render::checked(a))
    );
    if let Some(h) = render::bound_to(a) {
        let _ = write!(
            s,
            "<p>Bound to spec <code>{}</code>: if the target changes before it runs, nothing is written.</p>",
            escape_html(&h)
        );
    }
    let _ = write!(
        s,
        "<h3>Why this workflow</h3><p>{}</p>",
        escape_html(&a.rationale)
    );
    let _ = write!(
        s,
        "<h3>Alternatives</h3>{}",
        html_list(&render::alternatives(a))
    );
    let _ = write!(
        s,
        "<h3>Approval is required because</h3>{}<p>Policy revision: <code>{}</code></p>",
        html_list(&a.required_because),
        escape_html(&render::policy_revision(a))
    );
    s.push_str(r#"<p style="margin:24px 0">"#);
    if let Some(u) = &m.approve_url {
        s.push_str(&link(u, "Approve", "#1a7f37"));
    }
    if let Some(u) = &m.deny_url {
        s.push_str(&link(u, "Deny", "#cf222e"));
    }
    if let Some(u) = &m.view_url {
        s.push_str(&link(u, "Review", "#57606a"));
    }
    s.push_str("</p>");
    let _ = write!(
        s,
        r#"<p style="color:#57606a">Each link opens a confirmation page; nothing is decided until you confirm there. The links are yours alone, work once, and stop working at {}.</p></body></html>"#,
        escape_html(&render::utc(a.expires_at))
    );
    s
}

const OUTCOME_TAIL: &str = "The links in the earlier mail no longer work.";

pub(crate) fn outcome_text(m: &ApprovalMessage) -> String {
    let a = &m.approval;
    let mut s = format!(
        "{}\n\n{} — {}\n{}\n",
        render::outcome(a),
        render::question(a),
        render::workflow(a),
        OUTCOME_TAIL
    );
    if let Some(u) = &m.view_url {
        let _ = writeln!(s, "\nReview: {u}");
    }
    let _ = writeln!(s, "\nApproval {} · request {}", a.id, a.request_id);
    s
}

pub(crate) fn outcome_html(m: &ApprovalMessage) -> String {
    let a = &m.approval;
    let mut s = String::from(HTML_HEAD);
    let _ = write!(
        s,
        "<p><strong>{}</strong></p><p>{} — {}</p><p>{}</p>",
        escape_html(&render::outcome(a)),
        escape_html(&render::question(a)),
        escape_html(&render::workflow(a)),
        escape_html(OUTCOME_TAIL)
    );
    if let Some(u) = &m.view_url {
        let _ = write!(s, "<p>{}</p>", link(u, "Review", "#57606a"));
    }
    let _ = write!(
        s,
        r#"<p style="color:#57606a">Approval {} · request {}</p></body></html>"#,
        a.id, a.request_id
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> EmailSettings {
        EmailSettings {
            smtp_url: "smtp://127.0.0.1:2525".into(),
            username: None,
            password: None,
            from: "kubemedic <kubemedic@example.com>".into(),
            approvers: vec!["alice@example.com".into(), "Bob <bob@example.com>".into()],
            timeout: Duration::from_secs(10),
            ca_file: None,
        }
    }

    #[test]
    fn smtp_urls_and_their_default_ports() {
        let p = |s: &str| parse_smtp_url(s).unwrap();
        assert_eq!(
            p("smtp://mail.example.com"),
            SmtpEndpoint {
                security: SmtpSecurity::Plain,
                host: "mail.example.com".into(),
                port: 25
            }
        );
        assert_eq!(p("smtp+starttls://mail.example.com").port, 587);
        assert_eq!(
            p("smtp+starttls://mail.example.com").security,
            SmtpSecurity::StartTls
        );
        assert_eq!(p("smtps://mail.example.com").port, 465);
        assert_eq!(p("smtps://mail.example.com").security, SmtpSecurity::Tls);
        assert_eq!(p("smtp://127.0.0.1:2525").port, 2525);
        assert_eq!(p("smtp://[::1]:2525").host, "::1");
        assert_eq!(p("smtp://[::1]:2525").to_string(), "smtp://[::1]:2525");
        assert_eq!(
            p("smtps://mail.example.com/").to_string(),
            "smtps://mail.example.com:465"
        );
    }

    #[test]
    fn bad_smtp_urls_name_the_flag_and_say_why() {
        for (url, why) in [
            ("mail.example.com:25", "unknown scheme"),
            ("//mail.example.com", "not a URL"),
            ("http://mail.example.com", "unknown scheme"),
            ("smtp://user:pw@mail.example.com", "credentials"),
            ("smtp://mail.example.com/x", "path"),
            ("smtp://", "no host"),
        ] {
            let e = parse_smtp_url(url).unwrap_err();
            assert_eq!(e.setting, "--smtp-url", "{url}");
            assert!(e.to_string().contains(why), "{url}: {e}");
        }
    }

    #[test]
    fn settings_validation_names_each_flag() {
        settings().validate().unwrap();
        let bad = |f: fn(&mut EmailSettings)| {
            let mut s = settings();
            f(&mut s);
            s.validate().unwrap_err()
        };
        assert_eq!(
            bad(|s| s.from = "not an address".into()).setting,
            "--email-from"
        );
        let e = bad(|s| s.approvers.push("bob@".into()));
        assert_eq!(e.setting, "--approvers");
        assert!(e.message.contains("bob@"), "{e}");
        assert_eq!(bad(|s| s.approvers.clear()).setting, "--approvers");
        assert_eq!(bad(|s| s.smtp_url = "ftp://x".into()).setting, "--smtp-url");
        assert_eq!(
            bad(|s| s.username = Some("u".into())).setting,
            "--smtp-password"
        );
        assert_eq!(
            bad(|s| s.password = Some(Secret::new("p"))).setting,
            "--smtp-username"
        );
    }

    #[test]
    fn the_password_never_shows_in_debug_output() {
        let mut s = settings();
        s.username = Some("u".into());
        s.password = Some(Secret::new("hunter2"));
        assert!(!format!("{s:?}").contains("hunter2"));
    }

    #[test]
    fn escape_html_neutralises_markup() {
        assert_eq!(
            escape_html(r#"<script>alert("x")</script> & 'y'"#),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;"
        );
    }

    #[test]
    fn only_http_links_become_hrefs() {
        assert!(link("javascript:alert(1)", "Approve", "#000").starts_with("Approve: "));
        assert!(
            link("https://km.example.com/a?x=1&y=2", "Approve", "#000")
                .contains(r#"href="https://km.example.com/a?x=1&amp;y=2""#)
        );
    }
}
