//! The monitoring systems kubemedic reads: Alertmanager and Prometheus, over their HTTP APIs.
//!
//! Input: an [`Endpoint`] for each (a base URL, the basic-auth credentials its userinfo may
//! carry, a timeout). Output: the alerts Alertmanager holds active under a name
//! ([`AlertmanagerClient::active_alerts`]) and the label sets of an instant PromQL query
//! ([`PrometheusClient::query`]), plus the pure rules verification applies to them
//! ([`same_alert`], [`corresponds`], [`expression`]).
//!
//! Invariants: every call has a timeout; the credentials are taken out of the URL into a
//! [`Secret`] when the endpoint is parsed, so no URL this module prints, and no error it
//! returns, carries them. A failure is an error value; what it means (an unassessed part, never
//! a resolved alert) is the caller's decision.

pub mod alertmanager;
pub mod prometheus;

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use reqwest::Url;
use serde::de::DeserializeOwned;

use crate::secret::{Secret, redact_url};

pub use alertmanager::{ActiveAlert, AlertmanagerClient, same_alert};
pub use prometheus::{PrometheusClient, corresponds, expression};

/// How long one call may take, connection included.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// A label set, as both APIs spell it.
pub type Labels = BTreeMap<String, String>;

#[derive(Debug, thiserror::Error)]
pub enum MonitoringError {
    /// The configured address is no usable base URL. `url` is what may be shown of it
    /// (credentials and query removed), when it has a `scheme://` to tell where they are.
    #[error(
        "{}not a usable base URL: {message}",
        url.as_ref().map(|u| format!("`{u}` is ")).unwrap_or_default()
    )]
    BadUrl {
        url: Option<String>,
        message: String,
    },
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client for {system}: {message}")]
    Client {
        system: &'static str,
        message: String,
    },
    /// No answer: refused, timed out, DNS…
    #[error("{system} at {endpoint} could not be reached: {message}")]
    Unreachable {
        system: &'static str,
        endpoint: String,
        message: String,
    },
    /// An answer that is an error.
    #[error("{system} at {endpoint} answered HTTP {status}: {message}")]
    Refused {
        system: &'static str,
        endpoint: String,
        status: u16,
        message: String,
    },
    /// An answer this module does not understand.
    #[error("{system} at {endpoint} sent an answer kubemedic does not understand: {message}")]
    BadAnswer {
        system: &'static str,
        endpoint: String,
        message: String,
    },
}

pub type Result<T, E = MonitoringError> = std::result::Result<T, E>;

/// Basic-auth credentials taken from a URL's userinfo.
#[derive(Clone, PartialEq, Eq)]
struct BasicAuth {
    username: String,
    password: Option<Secret>,
}

/// Where a monitoring system answers: a base URL without credentials (they are held apart, as
/// a [`Secret`]) and the timeout of each call. `Display` and `Debug` never show the password.
#[derive(Clone, PartialEq)]
pub struct Endpoint {
    url: Url,
    auth: Option<BasicAuth>,
    timeout: Duration,
}

impl Endpoint {
    /// An `http(s)://[user[:pass]@]host[:port][/prefix]` base URL. Errors name the URL with its
    /// credentials and query removed.
    pub fn parse(raw: &str) -> Result<Self> {
        let raw = raw.trim();
        let bad = |message: String| MonitoringError::BadUrl {
            url: raw.contains("://").then(|| redact_url(raw)),
            message,
        };
        let mut url = Url::parse(raw).map_err(|e| bad(e.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(bad(format!(
                "the scheme is `{}`; expected http(s)://HOST[:PORT][/PREFIX]",
                url.scheme()
            )));
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(bad("no host".into()));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(bad(
                "a base URL carries no query or fragment (kubemedic adds the API path)".into(),
            ));
        }
        let username = percent_decode(url.username());
        let password = url.password().map(|p| Secret::new(percent_decode(p)));
        let auth = (!username.is_empty() || password.is_some())
            .then_some(BasicAuth { username, password });
        if auth.is_some() && (url.set_username("").is_err() || url.set_password(None).is_err()) {
            return Err(bad("cannot take the credentials out of the URL".into()));
        }
        Ok(Self {
            url,
            auth,
            timeout: DEFAULT_TIMEOUT,
        })
    }

    /// Whether calls send basic-auth credentials.
    pub fn has_credentials(&self) -> bool {
        self.auth.is_some()
    }

    /// `base` + `path` (`/api/v2/alerts`), keeping a path prefix of the base
    /// (`http://h/alertmanager` → `http://h/alertmanager/api/v2/alerts`).
    fn api(&self, path: &str) -> Url {
        let mut url = self.url.clone();
        let joined = format!("{}{path}", url.path().trim_end_matches('/'));
        url.set_path(&joined);
        url
    }
}

impl fmt::Display for Endpoint {
    /// The base URL, without credentials.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.url.as_str().trim_end_matches('/'))
    }
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("url", &self.to_string())
            .field(
                "auth",
                &self.auth.as_ref().map(|a| format!("{}:***", a.username)),
            )
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// `%XX` escapes of a URL's userinfo (no `+` rule there).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b, hex) {
            (b'%', Some(decoded)) => {
                out.push(decoded);
                i += 3;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// An error and its causes on one line (`error sending request: … : Connection refused`).
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let next = s.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = s.source();
    }
    text
}

/// At most `max` characters of `s`, marked when cut.
fn cut(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

/// One endpoint and its HTTP client (the timeout is the client's).
struct Http {
    system: &'static str,
    endpoint: Endpoint,
    client: reqwest::Client,
}

impl Http {
    fn new(system: &'static str, endpoint: Endpoint) -> Result<Self> {
        let client = reqwest::Client::builder()
            .timeout(endpoint.timeout)
            .connect_timeout(endpoint.timeout)
            .build()
            .map_err(|e| MonitoringError::Client {
                system,
                message: chain(&e.without_url()),
            })?;
        Ok(Self {
            system,
            endpoint,
            client,
        })
    }

    /// `GET base+path?query` as JSON. `error_message` pulls the message out of an error body.
    async fn get<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, &str)],
        error_message: fn(&str) -> Option<String>,
    ) -> Result<T> {
        let mut url = self.endpoint.api(path);
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        let mut request = self.client.get(url);
        if let Some(auth) = &self.endpoint.auth {
            request = request.basic_auth(
                &auth.username,
                auth.password.as_ref().map(|p| p.expose().to_owned()),
            );
        }
        let endpoint = || self.endpoint.to_string();
        let response = request
            .send()
            .await
            .map_err(|e| MonitoringError::Unreachable {
                system: self.system,
                endpoint: endpoint(),
                message: chain(&e.without_url()),
            })?;
        let status = response.status();
        let body = response
            .text()
            .await
            .map_err(|e| MonitoringError::Unreachable {
                system: self.system,
                endpoint: endpoint(),
                message: chain(&e.without_url()),
            })?;
        if !status.is_success() {
            let message = error_message(&body).unwrap_or_else(|| cut(body.trim(), 300));
            return Err(MonitoringError::Refused {
                system: self.system,
                endpoint: endpoint(),
                status: status.as_u16(),
                message,
            });
        }
        serde_json::from_str(&body).map_err(|e| MonitoringError::BadAnswer {
            system: self.system,
            endpoint: endpoint(),
            message: e.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_leave_the_url_and_never_print() {
        let e =
            Endpoint::parse("https://am%40corp:s3cr%3At@alertmanager.example:9093/am/").unwrap();
        assert!(e.has_credentials());
        let auth = e.auth.clone().unwrap();
        assert_eq!(auth.username, "am@corp");
        assert_eq!(auth.password.unwrap().expose(), "s3cr:t");
        let shown = format!("{e} {e:?}");
        assert!(!shown.contains("s3cr"), "{shown}");
        assert_eq!(e.to_string(), "https://alertmanager.example:9093/am");
        assert_eq!(
            e.api("/api/v2/alerts").as_str(),
            "https://alertmanager.example:9093/am/api/v2/alerts"
        );
        let plain = Endpoint::parse("http://127.0.0.1:9090").unwrap();
        assert!(!plain.has_credentials());
        assert_eq!(
            plain.api("/api/v1/query").as_str(),
            "http://127.0.0.1:9090/api/v1/query"
        );
    }

    #[test]
    fn bad_urls_are_refused_without_their_credentials() {
        for raw in [
            "alertmanager:9093",
            "ftp://u:hunter2@host/",
            "http://u:hunter2@host/?x=1",
            "not a url",
        ] {
            let err = Endpoint::parse(raw).unwrap_err().to_string();
            assert!(!err.contains("hunter2"), "{err}");
            assert!(err.contains("not a usable base URL"), "{err}");
        }
        assert_eq!(
            Endpoint::parse("ftp://u:hunter2@host/")
                .unwrap_err()
                .to_string(),
            "`ftp://host/` is not a usable base URL: the scheme is `ftp`; expected \
             http(s)://HOST[:PORT][/PREFIX]"
        );
        assert_eq!(
            Endpoint::parse("am:hunter2@host:9093")
                .unwrap_err()
                .to_string(),
            "not a usable base URL: the scheme is `am`; expected http(s)://HOST[:PORT][/PREFIX]"
        );
    }

    #[test]
    fn cut_marks_what_it_cut() {
        assert_eq!(cut("abcdef", 3), "abc…");
        assert_eq!(cut("abc", 3), "abc");
    }
}
