//! Slack's incoming interactions: a click on an offer's Approve / Deny button, as Slack posts it
//! to kubemedic's interaction endpoint. [`verify_signature`] checks Slack's `v0` HMAC-SHA256
//! over `v0:{timestamp}:{raw body}` (five minutes either way, constant-time); only then is
//! [`parse_interaction`]'s reading of the `block_actions` payload — who clicked, which button,
//! which approval — worth anything. The decision itself is [`super::Approvals`]'s.
//! What Slack is sent (the offer, its outcome) is `notify::slack`'s.

use chrono::{DateTime, Utc};
use hmac::{Hmac, KeyInit, Mac};
use serde::Deserialize;
use sha2::Sha256;
use uuid::Uuid;

use crate::domain::Decision;
use crate::notify::slack::{APPROVE_ACTION, DENY_ACTION};
use crate::secret::Secret;

/// The headers Slack signs its requests with.
pub const TIMESTAMP_HEADER: &str = "X-Slack-Request-Timestamp";
pub const SIGNATURE_HEADER: &str = "X-Slack-Signature";
/// How far a request's timestamp may be from now, either way (Slack's own recommendation).
pub const MAX_SKEW_SECONDS: i64 = 5 * 60;

/// Why a request claiming to come from Slack was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SlackAuthError {
    #[error("{TIMESTAMP_HEADER} is missing")]
    MissingTimestamp,
    #[error("{TIMESTAMP_HEADER} is not a Unix time in seconds")]
    MalformedTimestamp,
    #[error(
        "{TIMESTAMP_HEADER} is {0} s away from now; at most {MAX_SKEW_SECONDS} s are accepted (a replay, or a clock that is off)"
    )]
    Stale(i64),
    #[error("{SIGNATURE_HEADER} is missing")]
    MissingSignature,
    #[error("{SIGNATURE_HEADER} is not v0= followed by 64 hex digits")]
    MalformedSignature,
    #[error(
        "{SIGNATURE_HEADER} does not match the body (another signing secret, or a changed body)"
    )]
    Mismatch,
}

type HmacSha256 = Hmac<Sha256>;

fn mac(signing_secret: &Secret, timestamp: &str, raw_body: &[u8]) -> HmacSha256 {
    // HMAC takes a key of any length; new_from_slice cannot fail for it.
    let mut mac = match HmacSha256::new_from_slice(signing_secret.expose().as_bytes()) {
        Ok(m) => m,
        Err(_) => HmacSha256::new(&Default::default()),
    };
    mac.update(b"v0:");
    mac.update(timestamp.as_bytes());
    mac.update(b":");
    mac.update(raw_body);
    mac
}

/// `v0=<hex>`: the signature Slack sends for this body at this time (tests sign with it).
pub fn sign(signing_secret: &Secret, timestamp: i64, raw_body: &[u8]) -> String {
    let bytes = mac(signing_secret, &timestamp.to_string(), raw_body)
        .finalize()
        .into_bytes();
    format!("v0={}", hex::encode(bytes))
}

/// Slack's request signing: HMAC-SHA256 of `v0:{timestamp}:{raw body}` with the signing
/// secret, hex, `v0=` prefix, compared in constant time; the timestamp within
/// [`MAX_SKEW_SECONDS`] of `now` either way. Any doubt is a refusal.
pub fn verify_signature(
    signing_secret: &Secret,
    timestamp_header: Option<&str>,
    signature_header: Option<&str>,
    raw_body: &[u8],
    now: DateTime<Utc>,
) -> Result<(), SlackAuthError> {
    let ts_text = timestamp_header
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or(SlackAuthError::MissingTimestamp)?;
    if !ts_text.bytes().all(|b| b.is_ascii_digit()) || ts_text.len() > 12 {
        return Err(SlackAuthError::MalformedTimestamp);
    }
    let ts: i64 = ts_text
        .parse()
        .map_err(|_| SlackAuthError::MalformedTimestamp)?;
    let skew = now.timestamp().saturating_sub(ts);
    if skew.abs() > MAX_SKEW_SECONDS {
        return Err(SlackAuthError::Stale(skew));
    }
    let signature = signature_header
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .ok_or(SlackAuthError::MissingSignature)?;
    let hex_part = signature
        .strip_prefix("v0=")
        .ok_or(SlackAuthError::MalformedSignature)?;
    if hex_part.len() != 64 {
        return Err(SlackAuthError::MalformedSignature);
    }
    let given = hex::decode(hex_part).map_err(|_| SlackAuthError::MalformedSignature)?;
    mac(signing_secret, ts_text, raw_body)
        .verify_slice(&given)
        .map_err(|_| SlackAuthError::Mismatch)
}

/// A button click, as Slack's `block_actions` payload describes it. Who clicked is Slack's
/// word (`user_id`), to be trusted only after [`verify_signature`] passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interaction {
    pub user_id: String,
    pub user_name: String,
    pub team_id: String,
    pub action_id: String,
    pub value: String,
    pub response_url: String,
    pub channel_id: String,
    pub message_ts: String,
}

impl Interaction {
    /// `approve` → approved, `deny` → rejected; any other button (Review, a link) decides
    /// nothing.
    pub fn decision(&self) -> Option<Decision> {
        match self.action_id.as_str() {
            APPROVE_ACTION => Some(Decision::Approved),
            DENY_ACTION => Some(Decision::Rejected),
            _ => None,
        }
    }

    /// The approval the button belongs to (its `value`).
    pub fn approval_id(&self) -> Option<Uuid> {
        Uuid::parse_str(self.value.trim()).ok()
    }
}

#[derive(Deserialize)]
struct Payload {
    #[serde(rename = "type")]
    kind: String,
    user: Option<PayloadUser>,
    team: Option<PayloadId>,
    channel: Option<PayloadId>,
    container: Option<PayloadContainer>,
    message: Option<PayloadMessage>,
    response_url: Option<String>,
    #[serde(default)]
    actions: Vec<PayloadAction>,
}

#[derive(Deserialize)]
struct PayloadUser {
    id: String,
    username: Option<String>,
    name: Option<String>,
    team_id: Option<String>,
}

#[derive(Deserialize)]
struct PayloadId {
    id: String,
}

#[derive(Deserialize)]
struct PayloadContainer {
    channel_id: Option<String>,
    message_ts: Option<String>,
}

#[derive(Deserialize)]
struct PayloadMessage {
    ts: Option<String>,
}

#[derive(Deserialize)]
struct PayloadAction {
    action_id: String,
    value: Option<String>,
}

/// Slack's interaction request body: `application/x-www-form-urlencoded` with one `payload`
/// field holding JSON of type `block_actions`. The first action is the click.
pub fn parse_interaction(raw_body: &[u8]) -> Result<Interaction, String> {
    let payload = form_urlencoded::parse(raw_body)
        .find(|(k, _)| k == "payload")
        .map(|(_, v)| v.into_owned())
        .ok_or("the body has no payload field")?;
    let p: Payload = serde_json::from_str(&payload)
        .map_err(|e| format!("the payload is not a Slack interaction: {e}"))?;
    if p.kind != "block_actions" {
        return Err(format!(
            "interaction type {:?} is not handled (only block_actions)",
            p.kind
        ));
    }
    let user = p.user.ok_or("the payload names no user")?;
    let action = p
        .actions
        .into_iter()
        .next()
        .ok_or("the payload has no action")?;
    let team_id = p
        .team
        .map(|t| t.id)
        .or(user.team_id)
        .ok_or("the payload names no team")?;
    let channel_id = p
        .channel
        .map(|c| c.id)
        .or_else(|| p.container.as_ref().and_then(|c| c.channel_id.clone()))
        .ok_or("the payload names no channel")?;
    let message_ts = p
        .container
        .as_ref()
        .and_then(|c| c.message_ts.clone())
        .or_else(|| p.message.and_then(|m| m.ts))
        .ok_or("the payload names no message")?;
    let response_url = p.response_url.ok_or("the payload has no response_url")?;
    if user.id.trim().is_empty() {
        return Err("the payload's user has no id".into());
    }
    Ok(Interaction {
        user_name: user
            .username
            .or(user.name)
            .unwrap_or_else(|| user.id.clone()),
        user_id: user.id,
        team_id,
        action_id: action.action_id,
        value: action.value.unwrap_or_default(),
        response_url,
        channel_id,
        message_ts,
    })
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    #[test]
    fn signatures_as_slack_documents_them() {
        // Slack's documented example (api.slack.com/authentication/verifying-requests-from-slack).
        let secret = Secret::new("8f742231b10e8888abcd99yyyzzz85a5");
        let body = b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
        let sig = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";
        let now = Utc.timestamp_opt(1531420618, 0).unwrap();
        assert_eq!(sign(&secret, 1531420618, body), sig);
        verify_signature(&secret, Some("1531420618"), Some(sig), body, now).unwrap();
    }
}
