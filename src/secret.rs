//! Credentials and the redaction of what may contain them.
//!
//! A leaf module: [`Secret`] never prints its value (`Debug` and `Display` show `***`; only
//! [`Secret::expose`] reveals it), and [`redact_url`] strips the credentials and query from a
//! URL before it is logged or shown. It imports nothing of the crate.

use serde::Deserialize;

/// A credential. Printing it (Debug or Display) shows `***`; only [`Secret::expose`] reveals it.
#[derive(Clone, Deserialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl std::fmt::Display for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

impl std::str::FromStr for Secret {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Self(s.to_owned()))
    }
}

/// `scheme://user:pass@host/db?x` → `scheme://host/db`.
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let rest = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
    let rest = rest.split_once('?').map_or(rest, |(path, _)| path);
    format!("{scheme}://{rest}")
}
