//! The HTTP server's settings (owner: `web`): where it listens, who may call it (webhook
//! credentials, the API token, dashboard logins, a trusted SSO proxy) and the limits it puts on
//! every client.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use super::declare::{HelpDefault, settings};
use super::{Result, invalid, non_empty};
use crate::domain::Role;
use crate::secret::Secret;
use crate::web::auth::{AuthSettings, ProxyAuth};
use crate::web::{DEFAULT_STREAM_POLL_SECONDS, HttpLimits, WebhookAuth};

/// Where the daemon listens unless configured.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
/// The largest accepted webhook body unless configured: 1 MiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;

settings! {
    /// The HTTP server: address, callers' credentials, limits.
    pub struct WebArgs {
        /// Address to listen on.
        #[arg(long, env = "KUBEMEDIC_LISTEN", value_name = "ADDR", help_default = DEFAULT_LISTEN)]
        pub listen: Option<String>,

        /// Bearer token Alertmanager must send to the webhook.
        #[arg(
            long,
            env = "KUBEMEDIC_WEBHOOK_TOKEN",
            value_name = "TOKEN",
            hide_env_values = true
        )]
        pub webhook_token: Option<Secret>,

        /// Basic-auth credentials Alertmanager may send to the webhook instead, as USER:PASS.
        #[arg(
            long,
            env = "KUBEMEDIC_WEBHOOK_BASIC_AUTH",
            value_name = "USER:PASS",
            hide_env_values = true
        )]
        pub webhook_basic_auth: Option<Secret>,

        /// Accept webhook calls without credentials. Off by default: refuse to start without
        /// auth.
        #[arg(long, env = "KUBEMEDIC_WEBHOOK_INSECURE_NO_AUTH")]
        pub webhook_insecure_no_auth: bool,

        /// Admin bearer token for the JSON API; without one every API call is refused (401).
        #[arg(
            long,
            env = "KUBEMEDIC_API_TOKEN",
            value_name = "TOKEN",
            hide_env_values = true
        )]
        pub api_token: Option<Secret>,

        /// Trust an SSO auth proxy: the header that names the signed-in user (e.g.
        /// `X-Forwarded-User`). Off unless set; needs --auth-proxy-roles and
        /// --auth-proxy-trusted-peers.
        #[arg(long, env = "KUBEMEDIC_AUTH_PROXY_USER_HEADER", value_name = "HEADER")]
        pub auth_proxy_user_header: Option<String>,

        /// The auth proxy's header with the user's groups, comma-separated.
        #[arg(
            long,
            env = "KUBEMEDIC_AUTH_PROXY_GROUPS_HEADER",
            value_name = "HEADER",
            help_default = ProxyAuth::DEFAULT_GROUPS_HEADER
        )]
        pub auth_proxy_groups_header: Option<String>,

        /// Which group gives which role, as GROUP=ROLE pairs, comma-separated (e.g.
        /// `sre=approver,platform=admin,eng=viewer`); a user in none of them gets nothing.
        #[arg(
            long,
            env = "KUBEMEDIC_AUTH_PROXY_ROLES",
            value_name = "GROUP=ROLE,..."
        )]
        pub auth_proxy_roles: Option<String>,

        /// The proxy's addresses, comma-separated: the headers of anyone else are ignored.
        #[arg(
            long,
            env = "KUBEMEDIC_AUTH_PROXY_TRUSTED_PEERS",
            value_name = "IP,..."
        )]
        pub auth_proxy_trusted_peers: Option<String>,

        /// How long a dashboard login lasts, in seconds.
        #[arg(
            long,
            env = "KUBEMEDIC_SESSION_TTL_SECONDS",
            value_name = "SECONDS",
            help_default = AuthSettings::DEFAULT_SESSION_TTL_SECONDS
        )]
        pub session_ttl_seconds: Option<u64>,

        /// Largest accepted webhook body in bytes.
        #[arg(
            long,
            env = "KUBEMEDIC_MAX_BODY_BYTES",
            value_name = "BYTES",
            help_default = DEFAULT_MAX_BODY_BYTES
        )]
        pub max_body_bytes: Option<usize>,

        /// Seconds a client has to send a complete request head, counted from when its
        /// connection is ready for one (accepted, or done with the previous response, so an idle
        /// kept-alive connection is closed after this too).
        #[arg(
            long,
            env = "KUBEMEDIC_HTTP_HEADER_TIMEOUT_SECONDS",
            value_name = "SECONDS",
            help_default = HttpLimits::DEFAULT_HEADER_TIMEOUT_SECONDS
        )]
        pub http_header_timeout_seconds: Option<u64>,

        /// Seconds a client has to send a whole request body once its head is in; a slower one
        /// gets 408 and is disconnected.
        #[arg(
            long,
            env = "KUBEMEDIC_HTTP_BODY_TIMEOUT_SECONDS",
            value_name = "SECONDS",
            help_default = HttpLimits::DEFAULT_BODY_TIMEOUT_SECONDS
        )]
        pub http_body_timeout_seconds: Option<u64>,

        /// Seconds a response write may make no progress (the client reads nothing) before the
        /// connection is closed; a client that reads slowly but steadily is not cut.
        #[arg(
            long,
            env = "KUBEMEDIC_HTTP_WRITE_TIMEOUT_SECONDS",
            value_name = "SECONDS",
            help_default = HttpLimits::DEFAULT_WRITE_TIMEOUT_SECONDS
        )]
        pub http_write_timeout_seconds: Option<u64>,

        /// HTTP connections open at once; one more is accepted and closed at once.
        #[arg(
            long,
            env = "KUBEMEDIC_HTTP_MAX_CONNECTIONS",
            value_name = "N",
            help_default = HttpLimits::DEFAULT_MAX_CONNECTIONS
        )]
        pub http_max_connections: Option<usize>,

        /// Seconds a live event stream (a request's events, a chat) waits to be woken before
        /// it reads the audit trail anyway. A new audit event wakes its streams at once — on
        /// PostgreSQL from any replica, through LISTEN/NOTIFY — so this is only the safety
        /// net; while wake-ups cannot be delivered (the listener's connection to PostgreSQL is
        /// down) the streams read every 0.5 s.
        #[arg(
            long,
            env = "KUBEMEDIC_EVENT_STREAM_POLL_SECONDS",
            value_name = "SECONDS",
            help_default = DEFAULT_STREAM_POLL_SECONDS
        )]
        pub event_stream_poll_seconds: Option<u64>,
    }
}

/// The web server's settings, checked.
#[derive(Debug, Clone)]
pub struct WebParts {
    pub listen: SocketAddr,
    pub webhook_auth: WebhookAuth,
    pub api_token: Option<Secret>,
    pub session_ttl: Duration,
    pub auth_proxy: Option<ProxyAuth>,
    pub max_body_bytes: usize,
    pub http: HttpLimits,
    pub stream_poll: Duration,
}

impl WebArgs {
    pub fn settings(self) -> Result<WebParts> {
        let http = self.http_limits()?;
        let listen_raw = self.listen.unwrap_or_else(|| DEFAULT_LISTEN.to_owned());
        let listen: SocketAddr = listen_raw.parse().map_err(|e| {
            invalid(
                "listen",
                format!("`{listen_raw}` is not an address like 127.0.0.1:8080 ({e})"),
            )
        })?;
        let basic = match self.webhook_basic_auth {
            None => None,
            Some(raw) => match raw.expose().split_once(':') {
                Some((user, pass)) if !user.is_empty() && !pass.is_empty() => {
                    Some((user.to_owned(), Secret::new(pass)))
                }
                _ => {
                    return Err(invalid(
                        "webhook-basic-auth",
                        "expected USER:PASS with both parts non-empty".into(),
                    ));
                }
            },
        };
        let webhook_auth = WebhookAuth {
            token: non_empty(self.webhook_token),
            basic,
            insecure_no_auth: self.webhook_insecure_no_auth,
        };
        let session_ttl_seconds = self
            .session_ttl_seconds
            .unwrap_or(AuthSettings::DEFAULT_SESSION_TTL_SECONDS);
        let auth_proxy = auth_proxy(
            self.auth_proxy_user_header,
            self.auth_proxy_groups_header,
            self.auth_proxy_roles,
            self.auth_proxy_trusted_peers,
        )?;
        if !(60..=30 * 24 * 3600).contains(&session_ttl_seconds) {
            return Err(invalid(
                "session-ttl-seconds",
                format!("{session_ttl_seconds} is outside 60..=2592000 (a minute to 30 days)"),
            ));
        }
        let stream_poll_seconds = self
            .event_stream_poll_seconds
            .unwrap_or(DEFAULT_STREAM_POLL_SECONDS);
        if !(1..=3600).contains(&stream_poll_seconds) {
            return Err(invalid(
                "event-stream-poll-seconds",
                format!("{stream_poll_seconds} is outside 1..=3600"),
            ));
        }
        let max_body_bytes = self.max_body_bytes.unwrap_or(DEFAULT_MAX_BODY_BYTES);
        if !(1024..=64 * 1024 * 1024).contains(&max_body_bytes) {
            return Err(invalid(
                "max-body-bytes",
                format!("{max_body_bytes} is outside 1024..=67108864"),
            ));
        }
        Ok(WebParts {
            listen,
            webhook_auth,
            api_token: non_empty(self.api_token),
            session_ttl: Duration::from_secs(session_ttl_seconds),
            auth_proxy,
            max_body_bytes,
            http,
            stream_poll: Duration::from_secs(stream_poll_seconds),
        })
    }

    /// The HTTP server's limits. None can be turned off: 0 is refused like an absurdly large
    /// value, because a server without them holds connections forever.
    fn http_limits(&self) -> Result<HttpLimits> {
        let seconds = |value: Option<u64>, default: u64, max: u64, key: &str| match value {
            None => Ok(Duration::from_secs(default)),
            Some(s) if (1..=max).contains(&s) => Ok(Duration::from_secs(s)),
            Some(s) => Err(invalid(key, format!("{s} is outside 1..={max}"))),
        };
        let header_timeout = seconds(
            self.http_header_timeout_seconds,
            HttpLimits::DEFAULT_HEADER_TIMEOUT_SECONDS,
            300,
            "http-header-timeout-seconds",
        )?;
        let body_timeout = seconds(
            self.http_body_timeout_seconds,
            HttpLimits::DEFAULT_BODY_TIMEOUT_SECONDS,
            3600,
            "http-body-timeout-seconds",
        )?;
        let write_timeout = seconds(
            self.http_write_timeout_seconds,
            HttpLimits::DEFAULT_WRITE_TIMEOUT_SECONDS,
            3600,
            "http-write-timeout-seconds",
        )?;
        let max_connections = self
            .http_max_connections
            .unwrap_or(HttpLimits::DEFAULT_MAX_CONNECTIONS);
        if !(1..=65536).contains(&max_connections) {
            return Err(invalid(
                "http-max-connections",
                format!("{max_connections} is outside 1..=65536"),
            ));
        }
        Ok(HttpLimits {
            header_timeout,
            body_timeout,
            write_timeout,
            max_connections,
        })
    }
}

/// The trusted auth proxy: all of user header, roles and peers, or none of them.
fn auth_proxy(
    user: Option<String>,
    groups: Option<String>,
    roles: Option<String>,
    peers: Option<String>,
) -> Result<Option<ProxyAuth>> {
    let given = |v: Option<String>| v.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty());
    let (user, groups, roles, peers) = (given(user), given(groups), given(roles), given(peers));
    let Some(user_header) = user else {
        if roles.is_some() || peers.is_some() {
            return Err(invalid(
                "auth-proxy-user-header",
                "the auth proxy's roles or peers are set but not its user header".into(),
            ));
        }
        return Ok(None);
    };
    let mut group_roles = Vec::new();
    for pair in roles
        .as_deref()
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        let parsed = pair
            .split_once('=')
            .and_then(|(g, r)| Some((g.trim().to_owned(), Role::parse(r.trim())?)))
            .filter(|(g, _)| !g.is_empty());
        match parsed {
            Some(gr) => group_roles.push(gr),
            None => {
                return Err(invalid(
                    "auth-proxy-roles",
                    format!("`{pair}` is not GROUP=ROLE with ROLE one of viewer, approver, admin"),
                ));
            }
        }
    }
    if group_roles.is_empty() {
        return Err(invalid(
            "auth-proxy-roles",
            "the auth proxy needs at least one GROUP=ROLE".into(),
        ));
    }
    let mut trusted = Vec::new();
    for raw in peers
        .as_deref()
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        match raw.parse::<IpAddr>() {
            Ok(ip) => trusted.push(ip),
            Err(_) => {
                return Err(invalid(
                    "auth-proxy-trusted-peers",
                    format!("`{raw}` is not an IP address"),
                ));
            }
        }
    }
    if trusted.is_empty() {
        return Err(invalid(
            "auth-proxy-trusted-peers",
            "the auth proxy needs the addresses it connects from: anyone else could send the \
             header"
                .into(),
        ));
    }
    Ok(Some(ProxyAuth {
        user_header: user_header.to_ascii_lowercase(),
        groups_header: groups
            .unwrap_or_else(|| ProxyAuth::DEFAULT_GROUPS_HEADER.into())
            .to_ascii_lowercase(),
        group_roles,
        trusted,
    }))
}
