//! [`Redacted`]: text that has passed the sanitiser.
//!
//! The type is the guarantee. Its only constructors run [`sanitize_text`] (or
//! [`sanitize_value`]), so whatever requires a `Redacted` — every message sent to the model —
//! cannot be handed raw alert text, tool output, history, playbooks or error messages by
//! mistake. Sanitising is idempotent, so text that was already sanitised (cluster tool output)
//! passes through unchanged.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use super::{sanitize_text, sanitize_value};

/// Sanitised text. Build it with [`Redacted::new`] / [`Redacted::from_value`]; read it with
/// [`Redacted::as_str`]. Deserialising sanitises again, so a stored transcript read back is as
/// safe as one built here.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(transparent)]
pub struct Redacted(String);

impl Redacted {
    /// Sanitise `text`.
    pub fn new(text: impl AsRef<str>) -> Self {
        Self(sanitize_text(text.as_ref()))
    }

    /// Sanitise a JSON value (key names count: `{"password": "…"}` is redacted whatever the
    /// value looks like) and render it compactly.
    pub fn from_value(value: &Value) -> Self {
        Self(sanitize_value(value).to_string())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

impl std::fmt::Display for Redacted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for Redacted {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for Redacted {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(Self::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_only_way_in_is_through_the_sanitiser() {
        let r = Redacted::new("DATABASE_URL=postgres://app:hunter2pw@db:5432/app");
        assert!(!r.as_str().contains("hunter2pw"), "{r}");
        let back: Redacted =
            serde_json::from_str(r#""token=abcdefghijklmnopqrstuvwxyz012345""#).unwrap();
        assert!(!back.as_str().contains("abcdefghij"), "{back}");
        let v = Redacted::from_value(&serde_json::json!({"password": "plain"}));
        assert!(!v.as_str().contains("plain"), "{v}");
    }

    #[test]
    fn sanitised_text_is_left_as_it_is() {
        let once = Redacted::new("Authorization: Bearer abcdefghijklmnop123 and x=1");
        assert_eq!(Redacted::new(once.as_str()), once);
        let plain = "Pod web-7d9f OOMKilled (exit 137), limit 64Mi; image sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        assert_eq!(Redacted::new(plain).as_str(), plain);
    }
}
