//! Who is calling, and what their role lets them do.
//!
//! A caller is known by one of: an API key as `Authorization: Bearer KEY` (scripts, pages and
//! API alike), the session cookie a browser got at `/login` with a key, or — when configured,
//! for SSO deployments — the user and groups headers of a trusted auth proxy, mapped to a role.
//! Keys are looked up by their SHA-256 digest: the store never holds a key, and the bootstrap
//! keys given by configuration (the `--api-token`, an admin) are compared in constant time.
//!
//! Every state-changing request made with a session cookie carries the session's CSRF token
//! (a form field, or the `x-csrf-token` header); a bearer key needs none (nothing ambient).
//! Failed logins are counted per client address, in the store (shared by the replicas), and
//! refused for a while after too many.

use std::net::IpAddr;
use std::time::Duration;

use axum::http::{HeaderMap, header};
use base64::Engine as _;
use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};

use super::{ApiError, AppState, ct_eq};
use crate::domain::{ApiKey, Role};
use crate::store::{Auth, StoreError};

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "km_session";

/// A key given by configuration rather than stored (`--api-token` is the admin one).
#[derive(Clone)]
pub struct BootstrapKey {
    pub name: String,
    pub role: Role,
    digest: String,
}

impl std::fmt::Debug for BootstrapKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BootstrapKey({}, {})", self.name, self.role)
    }
}

impl BootstrapKey {
    pub fn new(name: &str, role: Role, key: &str) -> Self {
        Self {
            name: name.to_owned(),
            role,
            digest: digest(key),
        }
    }
}

/// The trusted auth proxy: which headers name the user and their groups, which group gives
/// which role (the highest wins), and which peers may set them.
#[derive(Debug, Clone, Default)]
pub struct ProxyAuth {
    pub user_header: String,
    pub groups_header: String,
    pub group_roles: Vec<(String, Role)>,
    /// Only requests from these addresses may assert a user; anyone else's headers are ignored.
    pub trusted: Vec<IpAddr>,
}

/// How the daemon authenticates callers.
#[derive(Debug, Clone)]
pub struct AuthSettings {
    pub bootstrap: Vec<BootstrapKey>,
    pub session_ttl: Duration,
    /// Mark the session cookie `Secure` (the dashboard is reached over TLS, directly or through
    /// a proxy).
    pub secure_cookies: bool,
    pub proxy: Option<ProxyAuth>,
}

impl AuthSettings {
    /// How long a dashboard login lasts, unless configured: 12 h.
    pub const DEFAULT_SESSION_TTL_SECONDS: u64 = 12 * 3600;
}

impl ProxyAuth {
    /// The auth proxy's groups header, unless configured.
    pub const DEFAULT_GROUPS_HEADER: &str = "X-Forwarded-Groups";
}

impl Default for AuthSettings {
    fn default() -> Self {
        Self {
            bootstrap: Vec::new(),
            session_ttl: Duration::from_secs(Self::DEFAULT_SESSION_TTL_SECONDS),
            secure_cookies: false,
            proxy: None,
        }
    }
}

/// How a caller proved who they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    Key,
    Session,
    Proxy,
}

/// An authenticated caller.
#[derive(Debug, Clone)]
pub struct Principal {
    /// Who, as the audit trail names them: `key:<name>` or `proxy:<user>`.
    pub subject: String,
    pub role: Role,
    pub via: Via,
    /// The session's CSRF token (sessions only).
    pub csrf: Option<String>,
    /// The digest of the session's token (sessions only), to end it at logout.
    pub session: Option<String>,
}

impl Principal {
    /// Whether a state-changing request may proceed: a session must present its CSRF token;
    /// keys and proxy users carry no ambient credential a foreign page could ride on.
    pub fn csrf_ok(&self, presented: Option<&str>) -> bool {
        match (&self.csrf, self.via) {
            (Some(expected), Via::Session) => {
                presented.is_some_and(|p| ct_eq(p.as_bytes(), expected.as_bytes()))
            }
            (None, Via::Session) => false,
            _ => true,
        }
    }
}

/// Hex SHA-256 of a key or token: how the store knows them.
pub fn digest(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// A fresh API key: `km_` and 32 random bytes, base64url.
pub fn new_key() -> String {
    format!("km_{}", random_token())
}

/// 32 random bytes, base64url without padding.
pub fn random_token() -> String {
    let bytes: [u8; 32] = rand::random();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// The first characters of a key, to tell keys apart in a list.
pub fn key_prefix(key: &str) -> String {
    key.chars().take(7).collect()
}

/// The CSRF token a script sends with a state-changing API call from a browser session.
pub fn csrf_header(headers: &HeaderMap) -> Option<&str> {
    headers.get("x-csrf-token").and_then(|v| v.to_str().ok())
}

fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, given)| given.trim())
        .filter(|given| !given.is_empty())
}

impl AuthSettings {
    /// The key with this value: a bootstrap key, or an active stored key — its name, its role
    /// and, for a stored key, its record.
    pub async fn key_named_by(
        &self,
        store: &dyn Auth,
        key: &str,
    ) -> Result<Option<(String, Role, Option<ApiKey>)>, StoreError> {
        let d = digest(key);
        // Every bootstrap key is compared, whichever matches.
        let mut found = None;
        for b in &self.bootstrap {
            if ct_eq(d.as_bytes(), b.digest.as_bytes()) {
                found = Some((b.name.clone(), b.role, None));
            }
        }
        if found.is_some() {
            return Ok(found);
        }
        match store.api_key_by_hash(&d).await? {
            Some(k) if k.revoked_at.is_none() => Ok(Some((k.name.clone(), k.role, Some(k)))),
            _ => Ok(None),
        }
    }
}

impl AppState {
    /// The key with this value: a bootstrap key, or an active stored key.
    pub async fn key_named_by(
        &self,
        key: &str,
    ) -> Result<Option<(String, Role, Option<ApiKey>)>, ApiError> {
        Ok(self.auth.key_named_by(self.store.as_ref(), key).await?)
    }

    /// Who is calling, if anyone. A bearer key that does not hold is not overridden by a
    /// cookie: the caller meant the key.
    pub async fn principal(
        &self,
        headers: &HeaderMap,
        peer: Option<IpAddr>,
    ) -> Result<Option<Principal>, ApiError> {
        if let Some(key) = bearer(headers) {
            return Ok(self
                .key_named_by(key)
                .await?
                .map(|(name, role, _)| Principal {
                    subject: format!("key:{name}"),
                    role,
                    via: Via::Key,
                    csrf: None,
                    session: None,
                }));
        }
        if let Some(token) = cookie(headers, SESSION_COOKIE) {
            let d = digest(token);
            if let Some(s) = self.store.session(&d).await? {
                return Ok(Some(Principal {
                    subject: s.subject,
                    role: s.role,
                    via: Via::Session,
                    csrf: Some(s.csrf),
                    session: Some(d),
                }));
            }
        }
        if let (Some(proxy), Some(peer)) = (&self.auth.proxy, peer)
            && proxy.trusted.contains(&peer)
        {
            return Ok(proxy_principal(proxy, headers));
        }
        Ok(None)
    }

    /// The caller, if their role includes `needed`: 401 for nobody, 403 for too little.
    pub async fn require(&self, headers: &HeaderMap, needed: Role) -> Result<Principal, ApiError> {
        self.require_from(headers, None, needed).await
    }

    pub async fn require_from(
        &self,
        headers: &HeaderMap,
        peer: Option<IpAddr>,
        needed: Role,
    ) -> Result<Principal, ApiError> {
        match self.principal(headers, peer).await? {
            None => Err(ApiError::Unauthorized),
            Some(p) if p.role.allows(needed) => Ok(p),
            Some(p) => Err(ApiError::Forbidden(format!(
                "{} has role {}; this needs {needed}",
                p.subject, p.role
            ))),
        }
    }
}

fn proxy_principal(proxy: &ProxyAuth, headers: &HeaderMap) -> Option<Principal> {
    let user = headers
        .get(proxy.user_header.as_str())
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|u| !u.is_empty() && u.len() <= 256)?;
    let groups: Vec<&str> = headers
        .get_all(proxy.groups_header.as_str())
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .collect();
    let role = proxy
        .group_roles
        .iter()
        .filter(|(g, _)| groups.contains(&g.as_str()))
        .map(|(_, r)| *r)
        .max()?;
    Some(Principal {
        subject: format!("proxy:{user}"),
        role,
        via: Via::Proxy,
        csrf: None,
        session: None,
    })
}

/// Failed logins per client address: after `MAX_FAILURES` within `WINDOW`, logins from the
/// address are refused until the oldest of those failures is `WINDOW` old. The failures are
/// kept in the store, so every replica behind the load balancer counts the same ones.
#[derive(Debug, Clone, Copy)]
pub struct LoginLimiter {
    max_failures: usize,
    window: Duration,
}

const MAX_FAILURES: usize = 5;
const WINDOW: Duration = Duration::from_secs(60);

impl Default for LoginLimiter {
    fn default() -> Self {
        Self {
            max_failures: MAX_FAILURES,
            window: WINDOW,
        }
    }
}

impl LoginLimiter {
    fn since(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        now - chrono::Duration::from_std(self.window).unwrap_or(chrono::Duration::MAX)
    }

    /// `Some(wait)` when `ip` must wait before trying again. A store that cannot answer is
    /// an error: the caller refuses the sign-in (fail closed).
    pub async fn blocked(
        &self,
        store: &dyn Auth,
        ip: IpAddr,
        now: DateTime<Utc>,
    ) -> Result<Option<Duration>, StoreError> {
        let failures = store
            .failed_logins(&ip.to_string(), self.since(now))
            .await?;
        Ok(self.wait(&failures, now))
    }

    /// How long until fewer than `max_failures` of `failures` (oldest first) are in the
    /// window; `None` when they already are.
    fn wait(&self, failures: &[DateTime<Utc>], now: DateTime<Utc>) -> Option<Duration> {
        let excess = failures.len().checked_sub(self.max_failures)?;
        let oldest_that_counts = failures.get(excess)?;
        let window = chrono::Duration::from_std(self.window).ok()?;
        let left = (*oldest_that_counts + window - now).to_std().ok()?;
        Some(left.max(Duration::from_secs(1)))
    }

    pub async fn failed(
        &self,
        store: &dyn Auth,
        ip: IpAddr,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        store
            .record_failed_login(&ip.to_string(), now, self.window)
            .await
    }

    pub async fn succeeded(&self, store: &dyn Auth, ip: IpAddr) -> Result<(), StoreError> {
        store.clear_failed_logins(&ip.to_string()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_random_and_prefixed() {
        let (a, b) = (new_key(), new_key());
        assert!(a.starts_with("km_") && a.len() > 40);
        assert_ne!(a, b);
        assert_eq!(key_prefix(&a).len(), 7);
        assert_eq!(digest("x").len(), 64);
    }

    #[test]
    fn a_session_needs_its_csrf_token_and_a_key_needs_none() {
        let session = Principal {
            subject: "key:alice".into(),
            role: Role::Approver,
            via: Via::Session,
            csrf: Some("tok".into()),
            session: Some("d".into()),
        };
        assert!(session.csrf_ok(Some("tok")));
        assert!(!session.csrf_ok(Some("tok2")));
        assert!(!session.csrf_ok(None));
        let key = Principal {
            via: Via::Key,
            csrf: None,
            session: None,
            ..session
        };
        assert!(key.csrf_ok(None));
    }

    #[test]
    fn the_proxy_maps_the_highest_role_of_the_users_groups() {
        let proxy = ProxyAuth {
            user_header: "x-forwarded-user".into(),
            groups_header: "x-forwarded-groups".into(),
            group_roles: vec![("sre".into(), Role::Approver), ("all".into(), Role::Viewer)],
            trusted: vec![],
        };
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-user", "alice".parse().unwrap());
        h.insert("x-forwarded-groups", "all, sre".parse().unwrap());
        let p = proxy_principal(&proxy, &h).unwrap();
        assert_eq!(
            (p.subject.as_str(), p.role),
            ("proxy:alice", Role::Approver)
        );
        h.insert("x-forwarded-groups", "guests".parse().unwrap());
        assert!(
            proxy_principal(&proxy, &h).is_none(),
            "no mapped group, no role"
        );
    }

    #[test]
    fn logins_wait_until_the_oldest_counted_failure_leaves_the_window() {
        let limiter = LoginLimiter::default();
        let t0 = Utc::now();
        let at = |s: i64| t0 + chrono::Duration::seconds(s);
        let four: Vec<_> = (0..4).map(at).collect();
        assert_eq!(
            limiter.wait(&four, at(5)),
            None,
            "four failures are allowed"
        );
        let five: Vec<_> = (0..5).map(at).collect();
        assert_eq!(limiter.wait(&five, at(5)), Some(Duration::from_secs(55)));
        let seven: Vec<_> = (0..7).map(at).collect();
        assert_eq!(
            limiter.wait(&seven, at(10)),
            Some(Duration::from_secs(52)),
            "the two oldest do not matter: five remain in the window until the third is old"
        );
        assert_eq!(limiter.wait(&five, at(60)), Some(Duration::from_secs(1)));
    }
}
