//! Approval messages in Slack: the Web API with a bot token, or an incoming webhook.
//!
//! With a bot token, `offer` is `chat.postMessage` with Block Kit blocks — the same facts as
//! the mail — and, when a signing secret is configured, Approve / Deny buttons whose clicks
//! Slack posts to kubemedic's interaction endpoint (`action_id` `approve` / `deny`, `value` the
//! approval id); it returns `{"channel", "ts"}` and `outcome` is `chat.update` of that message,
//! the buttons replaced by a line saying how it ended. Without a signing secret, or with an
//! incoming webhook only, the buttons are links to whatever `approve_url` / `deny_url` the
//! message carries — the daemon gives a channel none (a channel is not a person), so such a
//! message only informs; a webhook cannot edit what it posted, so its `outcome` is a follow-up
//! message.
//!
//! For the interaction endpoint (whose verification and parsing live with approvals, in
//! `approval::slack`): [`SlackNotifier::respond`] (answer through the `response_url`) and
//! [`outcome_blocks`], so the endpoint and `outcome` show the same thing.
//!
//! The settings and the Web API / webhook client are here; the messages' layout is `layout.rs`.
//!
//! Alert text and model output are untrusted: `&`, `<`, `>` are escaped in every mrkdwn text,
//! so `<!channel>` or a disguised link in a summary arrives as text.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

mod layout;

pub use layout::{
    Buttons, SlackMessage, escape_mrkdwn, followup_message, offer_message, outcome_blocks,
    outcome_message,
};

use super::render;
use super::{Notifier, NotifyError, SettingsError};
use crate::clock::Clock;
use crate::domain::{ApprovalMessage, ApprovalRequest, Channel};
use crate::secret::Secret;

pub const DEFAULT_API_URL: &str = "https://slack.com/api";
/// The `action_id`s of the interactive buttons; only these decide.
pub const APPROVE_ACTION: &str = "approve";
pub const DENY_ACTION: &str = "deny";
/// The `block_id` of the actions block (the one `outcome` replaces).
pub const ACTIONS_BLOCK_ID: &str = "kubemedic_approval";

#[derive(Debug, Clone)]
pub struct SlackSettings {
    /// A bot token (`xoxb-…`) with `chat:write`: messages with buttons, updated in place.
    pub bot_token: Option<Secret>,
    /// Where the bot posts (a channel id `C…` or a name); required with the bot token.
    pub channel: Option<String>,
    /// An incoming webhook (the URL is the credential): link buttons, no updates.
    pub webhook_url: Option<Secret>,
    /// Verifies the interactive callbacks; without it the buttons are links.
    pub signing_secret: Option<Secret>,
    pub api_url: String,
    /// Slack user ids (`U…`, `W…`) who may decide; mentioned in the message.
    pub approvers: Vec<String>,
    pub timeout: Duration,
}

impl Default for SlackSettings {
    fn default() -> Self {
        Self {
            bot_token: None,
            channel: None,
            webhook_url: None,
            signing_secret: None,
            api_url: DEFAULT_API_URL.into(),
            approvers: Vec::new(),
            timeout: Duration::from_secs(10),
        }
    }
}

impl SlackSettings {
    /// Every setting checked, each error naming its flag. Secrets never appear in a message.
    pub fn validate(&self) -> Result<(), SettingsError> {
        let blank = |s: &Option<Secret>| s.as_ref().is_some_and(|v| v.expose().trim().is_empty());
        if blank(&self.bot_token) {
            return Err(SettingsError::new("--slack-bot-token", "is empty"));
        }
        if blank(&self.webhook_url) {
            return Err(SettingsError::new("--slack-webhook-url", "is empty"));
        }
        if blank(&self.signing_secret) {
            return Err(SettingsError::new("--slack-signing-secret", "is empty"));
        }
        let channel = self
            .channel
            .as_deref()
            .map(str::trim)
            .filter(|c| !c.is_empty());
        match (&self.bot_token, &self.webhook_url) {
            (None, None) => {
                return Err(SettingsError::new(
                    "--slack-bot-token",
                    "Slack needs a bot token (with --slack-channel) or --slack-webhook-url",
                ));
            }
            (Some(_), Some(_)) => {
                return Err(SettingsError::new(
                    "--slack-webhook-url",
                    "give --slack-bot-token or --slack-webhook-url, not both",
                ));
            }
            (Some(_), None) if channel.is_none() => {
                return Err(SettingsError::new(
                    "--slack-channel",
                    "is required with --slack-bot-token: the channel (id or name) approval requests are posted to",
                ));
            }
            (None, Some(_)) if channel.is_some() => {
                return Err(SettingsError::new(
                    "--slack-channel",
                    "only applies with --slack-bot-token; an incoming webhook posts to the channel it was made for",
                ));
            }
            _ => {}
        }
        if let Some(w) = &self.webhook_url {
            check_url("--slack-webhook-url", w.expose(), false)?;
        }
        check_url("--slack-api-url", &self.api_url, true)?;
        for a in &self.approvers {
            if !is_user_id(a.trim()) {
                return Err(SettingsError::new(
                    "--slack-approvers",
                    format!(
                        "{a:?} is not a Slack user id (U… or W…; a profile's \"Copy member ID\")"
                    ),
                ));
            }
        }
        if self.timeout.is_zero() {
            return Err(SettingsError::new(
                "--slack-timeout-seconds",
                "must be more than 0",
            ));
        }
        Ok(())
    }
}

/// `U0123ABC`, `W0123ABC`.
fn is_user_id(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some('U' | 'W'))
        && s.len() >= 3
        && s.len() <= 32
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
}

/// https, or http to a loopback address (a test server). `show`: the URL may be printed (the
/// webhook's path is its credential, so only its host is).
fn check_url(flag: &'static str, raw: &str, show: bool) -> Result<url::Url, SettingsError> {
    let shown = |u: &str| {
        if show {
            format!("{u:?}")
        } else {
            "the URL".into()
        }
    };
    let url = url::Url::parse(raw.trim())
        .map_err(|e| SettingsError::new(flag, format!("{} is not a URL ({e})", shown(raw))))?;
    match url.scheme() {
        "https" => Ok(url),
        "http" if is_loopback(&url) => Ok(url),
        "http" => Err(SettingsError::new(
            flag,
            format!(
                "{} is plain http to {}; only https is accepted (http only to a loopback address)",
                shown(raw),
                url.host_str().unwrap_or("?")
            ),
        )),
        other => Err(SettingsError::new(
            flag,
            format!("scheme {other:?} of {}; use https://", shown(raw)),
        )),
    }
}

fn is_loopback(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// `scheme://host[:port]`: how a webhook or response URL is named in errors.
fn origin(raw: &str) -> String {
    match url::Url::parse(raw) {
        Ok(u) => u.origin().ascii_serialization(),
        Err(_) => "an unparsable URL".into(),
    }
}

enum Mode {
    Bot { token: Secret, channel: String },
    Webhook { url: Secret },
}

/// Posts approval messages to Slack and answers interactions through their `response_url`.
pub struct SlackNotifier {
    http: reqwest::Client,
    mode: Mode,
    api_url: String,
    interactive: bool,
    approvers: Vec<String>,
    clock: Arc<dyn Clock>,
}

impl SlackNotifier {
    pub fn new(settings: &SlackSettings, clock: Arc<dyn Clock>) -> Result<Self, SettingsError> {
        settings.validate()?;
        let mode = match (
            &settings.bot_token,
            &settings.webhook_url,
            &settings.channel,
        ) {
            (Some(token), _, Some(channel)) => Mode::Bot {
                token: token.clone(),
                channel: channel.trim().to_owned(),
            },
            (None, Some(url), _) => Mode::Webhook { url: url.clone() },
            _ => {
                return Err(SettingsError::new(
                    "--slack-bot-token",
                    "Slack needs a bot token (with --slack-channel) or --slack-webhook-url",
                ));
            }
        };
        let interactive = matches!(mode, Mode::Bot { .. }) && settings.signing_secret.is_some();
        let http = reqwest::Client::builder()
            .timeout(settings.timeout)
            .connect_timeout(settings.timeout)
            // Slack answers where it is asked; a redirect is a misconfiguration, not a hint.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("kubemedic/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| SettingsError::new("--slack-api-url", format!("HTTP client: {e}")))?;
        Ok(Self {
            http,
            mode,
            api_url: settings.api_url.trim().trim_end_matches('/').to_owned(),
            interactive,
            approvers: settings
                .approvers
                .iter()
                .map(|a| a.trim().to_owned())
                .collect(),
            clock,
        })
    }

    /// Whether the offer carries interactive buttons (bot token and signing secret) rather
    /// than links to the confirmation pages.
    pub fn interactive(&self) -> bool {
        self.interactive
    }

    /// Answer an interaction through its `response_url` (valid 30 minutes, five uses):
    /// `replace_original` edits the message the button was in.
    pub async fn respond(
        &self,
        response_url: &str,
        message: &SlackMessage,
        replace_original: bool,
    ) -> Result<(), NotifyError> {
        let url = check_url("response_url", response_url, false).map_err(|e| {
            NotifyError::permanent(format!("Slack response_url refused: {}", e.message))
        })?;
        let body = json!({
            "replace_original": replace_original,
            "text": message.text,
            "blocks": message.blocks,
        });
        let what = format!("Slack response_url at {}", origin(response_url));
        let resp = self
            .http
            .post(url)
            .json(&body)
            .send()
            .await
            .map_err(|e| transport_error(&what, &e))?;
        plain_answer(&what, resp).await
    }

    /// The approvers to mention: the approval's own, else the configured ones.
    fn mentions<'a>(&'a self, a: &'a ApprovalRequest) -> &'a [String] {
        if a.slack_approvers.is_empty() {
            &self.approvers
        } else {
            &a.slack_approvers
        }
    }

    /// One Web API call; the answer's fields when `ok`.
    async fn call(&self, method: &str, token: &Secret, body: &Value) -> Result<Value, NotifyError> {
        let what = format!("Slack {method} at {}", self.api_url);
        let resp = self
            .http
            .post(format!("{}/{method}", self.api_url))
            .bearer_auth(token.expose())
            .json(body)
            .send()
            .await
            .map_err(|e| transport_error(&what, &e))?;
        let status = resp.status();
        if let Some(e) = status_error(&what, status, resp.headers()) {
            return Err(e);
        }
        let answer: Value = resp.json().await.map_err(|e| {
            NotifyError::permanent(format!(
                "{what}: the answer is not Slack's JSON ({e}); is --slack-api-url right?"
            ))
        })?;
        if answer.get("ok").and_then(Value::as_bool) == Some(true) {
            return Ok(answer);
        }
        let code = answer
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("unknown_error");
        let mut message = format!("{what}: {code}");
        if let Some(needed) = answer.get("needed").and_then(Value::as_str) {
            message.push_str(&format!(" (needed: {needed})"));
        }
        if let Some(hint) = error_hint(code) {
            message.push_str("; ");
            message.push_str(hint);
        }
        Err(if is_retryable_code(code) {
            NotifyError::retryable(message)
        } else {
            NotifyError::permanent(message)
        })
    }

    async fn post_webhook(&self, url: &Secret, message: &SlackMessage) -> Result<(), NotifyError> {
        let what = format!("Slack incoming webhook at {}", origin(url.expose()));
        let body = json!({
            "text": message.text,
            "blocks": message.blocks,
            "unfurl_links": false,
            "unfurl_media": false,
        });
        let resp = self
            .http
            .post(url.expose())
            .json(&body)
            .send()
            .await
            .map_err(|e| transport_error(&what, &e))?;
        plain_answer(&what, resp).await
    }

    async fn post_message(
        &self,
        token: &Secret,
        channel: &str,
        message: &SlackMessage,
    ) -> Result<Value, NotifyError> {
        let body = json!({
            "channel": channel,
            "text": message.text,
            "blocks": message.blocks,
            "unfurl_links": false,
            "unfurl_media": false,
        });
        let answer = self.call("chat.postMessage", token, &body).await?;
        match (
            answer.get("channel").and_then(Value::as_str),
            answer.get("ts").and_then(Value::as_str),
        ) {
            (Some(channel), Some(ts)) => Ok(json!({ "channel": channel, "ts": ts })),
            _ => Err(NotifyError::permanent(format!(
                "Slack chat.postMessage at {}: the answer has no channel and ts",
                self.api_url
            ))),
        }
    }
}

/// A time-out or a refused connection: worth another attempt.
fn transport_error(what: &str, e: &reqwest::Error) -> NotifyError {
    let why = if e.is_timeout() {
        "timed out".to_owned()
    } else if e.is_connect() {
        "could not connect".to_owned()
    } else {
        "request failed".to_owned()
    };
    let mut detail = String::new();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        detail.push_str(": ");
        detail.push_str(&s.to_string());
        source = s.source();
    }
    // reqwest's own Display names the URL, which for a webhook is the credential: not used.
    NotifyError::retryable(format!("{what}: {why}{detail}"))
}

/// 429 and 5xx are retryable (429 with Slack's `Retry-After`), other non-2xx are not.
fn status_error(
    what: &str,
    status: reqwest::StatusCode,
    headers: &reqwest::header::HeaderMap,
) -> Option<NotifyError> {
    if status.is_success() {
        return None;
    }
    if status == reqwest::StatusCode::TOO_MANY_REQUESTS {
        // Slack gives the wait in seconds; the next attempt waits at least that long.
        let wait = headers
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(std::time::Duration::from_secs);
        let said = wait.map_or_else(String::new, |w| {
            format!(" (Retry-After: {} s)", w.as_secs())
        });
        let error = NotifyError::retryable(format!("{what}: rate limited, HTTP 429{said}"));
        return Some(match wait {
            Some(w) => error.after(w),
            None => error,
        });
    }
    if status.is_server_error() {
        return Some(NotifyError::retryable(format!("{what}: HTTP {status}")));
    }
    Some(NotifyError::permanent(format!("{what}: HTTP {status}")))
}

/// A webhook or `response_url` answer: 2xx with `ok` or `{"ok": true}`; otherwise its text.
async fn plain_answer(what: &str, resp: reqwest::Response) -> Result<(), NotifyError> {
    let status = resp.status();
    let headers = resp.headers().clone();
    let text = resp.text().await.unwrap_or_default();
    let text = render::clip(text.trim(), 200);
    if let Some(mut e) = status_error(what, status, &headers) {
        if !text.is_empty() {
            e.message.push_str(&format!(": {text}"));
        }
        return Err(e);
    }
    if let Ok(v) = serde_json::from_str::<Value>(&text)
        && v.get("ok").and_then(Value::as_bool) == Some(false)
    {
        let code = v
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("unknown_error");
        let message = format!("{what}: {code}");
        return Err(if is_retryable_code(code) {
            NotifyError::retryable(message)
        } else {
            NotifyError::permanent(message)
        });
    }
    Ok(())
}

/// Slack `error` codes a later attempt may get past; everything else (`invalid_auth`,
/// `channel_not_found`, `missing_scope`, `invalid_blocks`, …) will fail the same way again.
pub fn is_retryable_code(code: &str) -> bool {
    matches!(
        code,
        "ratelimited"
            | "rate_limited"
            | "internal_error"
            | "fatal_error"
            | "service_unavailable"
            | "request_timeout"
    )
}

fn error_hint(code: &str) -> Option<&'static str> {
    match code {
        "invalid_auth" | "not_authed" | "token_revoked" | "token_expired" | "account_inactive" => {
            Some("check --slack-bot-token")
        }
        "channel_not_found" | "not_in_channel" | "is_archived" => {
            Some("check --slack-channel and that the bot is a member of it")
        }
        "missing_scope" => Some("the bot token needs the chat:write scope"),
        _ => None,
    }
}

#[async_trait]
impl Notifier for SlackNotifier {
    fn channel(&self) -> Channel {
        Channel::Slack
    }

    fn recipients(&self, _approval: &ApprovalRequest) -> Vec<String> {
        match &self.mode {
            Mode::Bot { channel, .. } => vec![channel.clone()],
            Mode::Webhook { .. } => vec!["webhook".into()],
        }
    }

    async fn offer(&self, message: &ApprovalMessage) -> Result<Option<Value>, NotifyError> {
        let buttons = if self.interactive {
            Buttons::Interactive
        } else {
            Buttons::Links
        };
        let slack = offer_message(
            message,
            buttons,
            self.mentions(&message.approval),
            self.clock.now(),
        );
        match &self.mode {
            Mode::Bot { token, channel } => {
                let channel = if message.recipient.is_empty() || message.recipient == "webhook" {
                    channel.as_str()
                } else {
                    message.recipient.as_str()
                };
                self.post_message(token, channel, &slack).await.map(Some)
            }
            Mode::Webhook { url } => self.post_webhook(url, &slack).await.map(|()| None),
        }
    }

    async fn outcome(
        &self,
        message: &ApprovalMessage,
        external_ref: Option<&Value>,
    ) -> Result<(), NotifyError> {
        let a = &message.approval;
        match &self.mode {
            Mode::Bot { token, channel } => {
                let found = external_ref.and_then(|r| {
                    Some((
                        r.get("channel")?.as_str()?.to_owned(),
                        r.get("ts")?.as_str()?.to_owned(),
                    ))
                });
                match found {
                    Some((channel, ts)) => {
                        let m = outcome_message(a);
                        let body = json!({
                            "channel": channel,
                            "ts": ts,
                            "text": m.text,
                            "blocks": m.blocks,
                        });
                        self.call("chat.update", token, &body).await.map(|_| ())
                    }
                    // The offer was never posted (or its reference is lost): say it anew.
                    None => self
                        .post_message(token, channel, &followup_message(a))
                        .await
                        .map(|_| ()),
                }
            }
            Mode::Webhook { url } => self.post_webhook(url, &followup_message(a)).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};
    use uuid::Uuid;

    #[test]
    fn a_rate_limit_carries_slacks_retry_after() {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(reqwest::header::RETRY_AFTER, "42".parse().unwrap());
        let e = status_error(
            "chat.postMessage",
            reqwest::StatusCode::TOO_MANY_REQUESTS,
            &headers,
        )
        .unwrap();
        assert!(e.retryable);
        assert_eq!(e.retry_after, Some(std::time::Duration::from_secs(42)));
        assert!(e.message.contains("Retry-After: 42 s"), "{}", e.message);
        let bare = reqwest::header::HeaderMap::new();
        let e = status_error(
            "chat.postMessage",
            reqwest::StatusCode::TOO_MANY_REQUESTS,
            &bare,
        )
        .unwrap();
        assert_eq!((e.retryable, e.retry_after), (true, None));
        let e = status_error(
            "chat.postMessage",
            reqwest::StatusCode::SERVICE_UNAVAILABLE,
            &headers,
        )
        .unwrap();
        assert_eq!((e.retryable, e.retry_after), (true, None));
    }

    fn bot() -> SlackSettings {
        SlackSettings {
            bot_token: Some(Secret::new("xoxb-1")),
            channel: Some("C0123".into()),
            signing_secret: Some(Secret::new("s3cret")),
            approvers: vec!["U0123ABC".into()],
            ..Default::default()
        }
    }

    #[test]
    fn settings_validation_names_each_flag() {
        bot().validate().unwrap();
        let webhook = SlackSettings {
            webhook_url: Some(Secret::new("https://hooks.slack.com/services/T/B/x")),
            ..Default::default()
        };
        webhook.validate().unwrap();
        let bad = |f: fn(&mut SlackSettings)| {
            let mut s = bot();
            f(&mut s);
            s.validate().unwrap_err().setting
        };
        assert_eq!(bad(|s| s.channel = None), "--slack-channel");
        assert_eq!(bad(|s| s.channel = Some(" ".into())), "--slack-channel");
        assert_eq!(bad(|s| s.bot_token = None), "--slack-bot-token");
        assert_eq!(
            bad(|s| s.bot_token = Some(Secret::new(""))),
            "--slack-bot-token"
        );
        assert_eq!(
            bad(|s| s.webhook_url = Some(Secret::new("https://hooks.slack.com/x"))),
            "--slack-webhook-url"
        );
        assert_eq!(
            bad(|s| s.signing_secret = Some(Secret::new(" "))),
            "--slack-signing-secret"
        );
        assert_eq!(
            bad(|s| s.api_url = "http://slack.example.com/api".into()),
            "--slack-api-url"
        );
        assert_eq!(bad(|s| s.api_url = "nope".into()), "--slack-api-url");
        assert_eq!(
            bad(|s| s.approvers = vec!["alice".into()]),
            "--slack-approvers"
        );
        let mut w = webhook.clone();
        w.channel = Some("#ops".into());
        assert_eq!(w.validate().unwrap_err().setting, "--slack-channel");
        let mut w = webhook;
        w.webhook_url = Some(Secret::new(
            "http://hooks.example.com/services/T/B/supersecret",
        ));
        let e = w.validate().unwrap_err();
        assert_eq!(e.setting, "--slack-webhook-url");
        assert!(!e.to_string().contains("supersecret"), "{e}");
        let mut local = bot();
        local.api_url = "http://127.0.0.1:4000/api".into();
        local.validate().unwrap();
    }

    #[test]
    fn mrkdwn_escapes_control_characters_and_counts_them_when_clipping() {
        assert_eq!(
            escape_mrkdwn("<!channel> & <https://evil|click>", 100),
            "&lt;!channel&gt; &amp; &lt;https://evil|click&gt;"
        );
        assert_eq!(escape_mrkdwn("abcdef", 4), "abc…");
        // Never half an escape.
        assert_eq!(escape_mrkdwn("a&b", 4), "a…");
        assert!(escape_mrkdwn(&"<".repeat(1000), 3000).chars().count() <= 3000);
    }

    fn huge_approval() -> ApprovalMessage {
        let long = "<&>".repeat(5000);
        let approval = ApprovalRequest {
            id: Uuid::new_v4(),
            request_id: Uuid::new_v4(),
            created_at: Utc.timestamp_opt(1_900_000_000, 0).unwrap(),
            expires_at: Utc.timestamp_opt(1_900_000_900, 0).unwrap(),
            signal_name: long.clone(),
            target: crate::domain::Target::new("Deployment", long.clone(), Some("prod".into())),
            environment: Some(long.clone()),
            summary: long.clone(),
            evidence: vec![long.clone(); 200],
            workflow_id: long.clone(),
            workflow_version: "1".into(),
            action_type: long.as_str().into(),
            parameters: Default::default(),
            rationale: long.clone(),
            alternatives: vec![],
            confidence: 0.5,
            risk_score: 90,
            risk_reason: long.clone(),
            required_because: vec![long.clone(); 50],
            policy_revision: None,
            approvers: vec![],
            slack_approvers: vec![],
            proof: None,
            decision: None,
            note: None,
        };
        ApprovalMessage {
            approval,
            recipient: "C1".into(),
            approve_url: Some("https://km.example.com/a".into()),
            deny_url: Some("https://km.example.com/d".into()),
            view_url: Some("https://km.example.com/v".into()),
        }
    }

    /// Slack refuses a message whose texts exceed its limits (invalid_blocks): header 150,
    /// section text 3000, field 2000, confirm text 300, at most 10 fields and 50 blocks.
    #[test]
    fn over_long_alert_text_stays_within_block_kit_limits() {
        let m = huge_approval();
        let now = m.approval.created_at;
        for blocks in [
            offer_message(&m, Buttons::Interactive, &[], now).blocks,
            offer_message(&m, Buttons::Links, &[], now).blocks,
            outcome_blocks(&m.approval),
        ] {
            assert!(blocks.len() <= 50);
            for b in &blocks {
                let len = |v: &Value| v.as_str().map_or(0, |s| s.chars().count());
                match b["type"].as_str().unwrap() {
                    "header" => assert!(len(&b["text"]["text"]) <= 150),
                    "section" => {
                        assert!(len(&b["text"]["text"]) <= 3000);
                        if let Some(fields) = b["fields"].as_array() {
                            assert!(fields.len() <= 10);
                            assert!(fields.iter().all(|f| len(&f["text"]) <= 2000));
                        }
                    }
                    "context" => assert!(
                        b["elements"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .all(|e| len(&e["text"]) <= 3000)
                    ),
                    "actions" => {
                        for e in b["elements"].as_array().unwrap() {
                            assert!(len(&e["text"]["text"]) <= 75);
                            if e.get("confirm").is_some() {
                                assert!(len(&e["confirm"]["text"]["text"]) <= 300);
                                assert!(len(&e["confirm"]["title"]["text"]) <= 100);
                            }
                        }
                    }
                    other => panic!("unexpected block {other}"),
                }
            }
        }
    }
}
