//! Signed approval links: HMAC-SHA256 over the approval, the recipient, the decision, the
//! expiry and a nonce. The nonce is consumed in the store when the link is used, so a link
//! works once; the signature makes every other field unforgeable.
//!
//! A token is `<claims>.<mac>`, both base64url without padding; `claims` is compact JSON. The
//! key is `--link-signing-key` or, by default, 32 random bytes generated once and kept in the
//! store, so links survive restarts and work on every replica.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, TimeZone, Utc};
use hmac::{Hmac, KeyInit, Mac};
use rand::RngCore as _;
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use uuid::Uuid;

use crate::secret::Secret;

type HmacSha256 = Hmac<Sha256>;

/// What a link may decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkDecision {
    Approve,
    Deny,
}

impl LinkDecision {
    pub fn as_str(self) -> &'static str {
        match self {
            LinkDecision::Approve => "approve",
            LinkDecision::Deny => "deny",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "approve" => Some(LinkDecision::Approve),
            "deny" => Some(LinkDecision::Deny),
            _ => None,
        }
    }
}

/// The signed fields of a link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// The approval.
    #[serde(rename = "a")]
    pub approval: Uuid,
    /// Who the link was sent to: the identity a decision through it records.
    #[serde(rename = "r")]
    pub recipient: String,
    #[serde(rename = "d")]
    pub decision: LinkDecision,
    /// Unix seconds.
    #[serde(rename = "e")]
    pub expires: i64,
    #[serde(rename = "n")]
    pub nonce: String,
}

impl Claims {
    pub fn expires_at(&self) -> DateTime<Utc> {
        Utc.timestamp_opt(self.expires, 0)
            .single()
            .unwrap_or(DateTime::<Utc>::MIN_UTC)
    }
}

/// Why a link was refused. Each is shown on a page and audited.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    #[error("this link is malformed")]
    Malformed,
    #[error(
        "this link's signature is not valid: it was not issued by kubemedic, or it was altered"
    )]
    Forged,
    #[error("this link expired at {0}")]
    Expired(DateTime<Utc>),
}

/// Signs and checks links with one key.
#[derive(Clone)]
pub struct LinkSigner {
    key: Secret,
}

impl LinkSigner {
    pub fn new(key: Secret) -> Self {
        Self { key }
    }

    /// A fresh random key, hex-encoded (what the store keeps by default).
    pub fn generate_key() -> String {
        let mut bytes = [0u8; 32];
        rand::rng().fill_bytes(&mut bytes);
        hex::encode(bytes)
    }

    fn mac(&self) -> HmacSha256 {
        // HMAC takes a key of any length; this cannot fail.
        match HmacSha256::new_from_slice(self.key.expose().as_bytes()) {
            Ok(m) => m,
            Err(_) => unreachable_key(),
        }
    }

    /// A token for `recipient` to `decision` `approval` until `expires`.
    pub fn sign(
        &self,
        approval: Uuid,
        recipient: &str,
        decision: LinkDecision,
        expires: DateTime<Utc>,
    ) -> String {
        let mut nonce = [0u8; 16];
        rand::rng().fill_bytes(&mut nonce);
        let claims = Claims {
            approval,
            recipient: recipient.to_owned(),
            decision,
            expires: expires.timestamp(),
            nonce: hex::encode(nonce),
        };
        let body = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims).unwrap_or_default());
        let mut mac = self.mac();
        mac.update(body.as_bytes());
        let tag = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
        format!("{body}.{tag}")
    }

    /// The claims of a genuine, unexpired token. The signature is checked (in constant time)
    /// before anything in the token is believed.
    pub fn verify(&self, token: &str, now: DateTime<Utc>) -> Result<Claims, LinkError> {
        if token.len() > 2048 {
            return Err(LinkError::Malformed);
        }
        let (body, tag) = token.split_once('.').ok_or(LinkError::Malformed)?;
        let tag = URL_SAFE_NO_PAD
            .decode(tag)
            .map_err(|_| LinkError::Malformed)?;
        let mut mac = self.mac();
        mac.update(body.as_bytes());
        mac.verify_slice(&tag).map_err(|_| LinkError::Forged)?;
        let raw = URL_SAFE_NO_PAD
            .decode(body)
            .map_err(|_| LinkError::Malformed)?;
        let claims: Claims = serde_json::from_slice(&raw).map_err(|_| LinkError::Malformed)?;
        if claims.expires_at() <= now {
            return Err(LinkError::Expired(claims.expires_at()));
        }
        Ok(claims)
    }
}

#[cold]
fn unreachable_key() -> HmacSha256 {
    // `Hmac::new_from_slice` accepts every key length; keep a total function anyway.
    #[allow(clippy::expect_used)]
    HmacSha256::new_from_slice(&[0u8; 32]).expect("HMAC accepts a 32-byte key")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_800_000_000 + s, 0).unwrap()
    }

    #[test]
    fn a_link_carries_what_it_was_signed_for_and_nothing_else_verifies() {
        let s = LinkSigner::new(Secret::new("k1"));
        let id = Uuid::new_v4();
        let t = s.sign(id, "alice@example.com", LinkDecision::Approve, at(600));
        let c = s.verify(&t, at(0)).unwrap();
        assert_eq!(c.approval, id);
        assert_eq!(c.recipient, "alice@example.com");
        assert_eq!(c.decision, LinkDecision::Approve);
        assert_eq!(c.nonce.len(), 32);
        // Two links for the same thing differ (their nonces do).
        assert_ne!(
            t,
            s.sign(id, "alice@example.com", LinkDecision::Approve, at(600))
        );
        // Expired.
        assert_eq!(s.verify(&t, at(600)), Err(LinkError::Expired(at(600))));
        // Another key.
        assert_eq!(
            LinkSigner::new(Secret::new("k2")).verify(&t, at(0)),
            Err(LinkError::Forged)
        );
        // Altered claims: the decision flipped, the signature kept.
        let (body, tag) = t.split_once('.').unwrap();
        let mut claims: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(body).unwrap()).unwrap();
        claims["d"] = "deny".into();
        let forged = format!(
            "{}.{tag}",
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims).unwrap())
        );
        assert_eq!(s.verify(&forged, at(0)), Err(LinkError::Forged));
        for junk in ["", "x", "a.b", "....", &"A".repeat(5000)] {
            assert!(s.verify(junk, at(0)).is_err(), "{junk}");
        }
    }
}
