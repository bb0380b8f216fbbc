//! A request's trace context: the W3C `traceparent` its spans hang under.
//!
//! Stored with the request (one column), so every stage a worker runs — on any replica, after
//! any restart — opens its span as a child of the span that received the request, and the
//! request is one trace from the webhook to verification. Every request has one, traced or
//! not: a request opened while tracing was off keeps its id, so a link built from it works once
//! tracing is on. Only ids and a flag: a traceparent carries nothing secret.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use uuid::Uuid;

/// A W3C trace context (`00-<32 hex trace id>-<16 hex span id>-<2 hex flags>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceContext {
    trace_id: [u8; 16],
    span_id: [u8; 8],
    sampled: bool,
}

impl TraceContext {
    /// A context from its parts; `None` when an id is all zeros (invalid in W3C).
    pub fn new(trace_id: [u8; 16], span_id: [u8; 8], sampled: bool) -> Option<Self> {
        (trace_id != [0; 16] && span_id != [0; 8]).then_some(Self {
            trace_id,
            span_id,
            sampled,
        })
    }

    /// Parse a `traceparent` header value. Version `00` is read exactly; a later version is
    /// read by its first four fields, as the W3C recommendation asks; `ff`, malformed text or
    /// zero ids are `None` (the caller starts a new trace).
    pub fn parse(value: &str) -> Option<Self> {
        let value = value.trim();
        let mut parts = value.split('-');
        let version = parts.next()?;
        let (trace, span, flags) = (parts.next()?, parts.next()?, parts.next()?);
        let lower_hex = |s: &str, n: usize| {
            s.len() == n
                && s.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        if !lower_hex(version, 2) || version == "ff" {
            return None;
        }
        if version == "00" && parts.next().is_some() {
            return None;
        }
        if !lower_hex(trace, 32) || !lower_hex(span, 16) || !lower_hex(flags, 2) {
            return None;
        }
        let mut trace_id = [0u8; 16];
        let mut span_id = [0u8; 8];
        hex_into(trace, &mut trace_id)?;
        hex_into(span, &mut span_id)?;
        let mut flag = [0u8; 1];
        hex_into(flags, &mut flag)?;
        Self::new(trace_id, span_id, flag[0] & 1 == 1)
    }

    /// The context of a request stored without one (opened before trace contexts were
    /// stored, or through the store directly): derived from the request id, so it is the same
    /// on every read. A UUID is 16 bytes, like a trace id; the span id is its second half.
    pub fn for_request(id: Uuid) -> Self {
        let trace_id = *id.as_bytes();
        let mut span_id = [0u8; 8];
        span_id.copy_from_slice(id.as_bytes().get(8..16).unwrap_or(&[1; 8]));
        Self::new(trace_id, span_id, true).unwrap_or(Self {
            trace_id: [1; 16],
            span_id: [1; 8],
            sampled: true,
        })
    }

    pub fn trace_id(&self) -> [u8; 16] {
        self.trace_id
    }

    pub fn span_id(&self) -> [u8; 8] {
        self.span_id
    }

    pub fn sampled(&self) -> bool {
        self.sampled
    }

    /// The trace id as 32 lower-case hex digits (what trace backends search by).
    pub fn trace_id_hex(&self) -> String {
        hex_of(&self.trace_id)
    }

    /// The `traceparent` header value.
    pub fn traceparent(&self) -> String {
        format!(
            "00-{}-{}-{:02x}",
            hex_of(&self.trace_id),
            hex_of(&self.span_id),
            u8::from(self.sampled)
        )
    }
}

impl std::fmt::Display for TraceContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.traceparent())
    }
}

impl Serialize for TraceContext {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.traceparent())
    }
}

impl<'de> Deserialize<'de> for TraceContext {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Self::parse(&text)
            .ok_or_else(|| serde::de::Error::custom(format!("`{text}` is not a W3C traceparent")))
    }
}

fn hex_of(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        // Writing into a String cannot fail.
        let _ = write!(out, "{b:02x}");
    }
    out
}

fn hex_into(text: &str, out: &mut [u8]) -> Option<()> {
    if text.len() != out.len() * 2 {
        return None;
    }
    for (i, slot) in out.iter_mut().enumerate() {
        *slot = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const W3C_EXAMPLE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn the_w3c_example_reads_and_writes_back() {
        let t = TraceContext::parse(W3C_EXAMPLE).unwrap();
        assert_eq!(t.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert!(t.sampled());
        assert_eq!(t.traceparent(), W3C_EXAMPLE);
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(serde_json::from_str::<TraceContext>(&json).unwrap(), t);
    }

    #[test]
    fn malformed_or_zero_contexts_are_refused() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",
        ] {
            assert_eq!(TraceContext::parse(bad), None, "{bad}");
        }
        // A later version: its first four fields count.
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-what-comes";
        let t = TraceContext::parse(later).unwrap();
        assert!(!t.sampled());
    }

    #[test]
    fn a_request_without_a_stored_context_always_gets_the_same_one() {
        let id = Uuid::new_v4();
        assert_eq!(TraceContext::for_request(id), TraceContext::for_request(id));
        assert_eq!(
            TraceContext::for_request(id).trace_id_hex(),
            id.simple().to_string()
        );
    }
}
