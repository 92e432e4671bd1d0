//! Identifiers: [`TraceId`] (16 bytes), [`SpanId`] (8 bytes) and [`ChannelId`].
//!
//! Ids follow the OTLP rule: a trace or span id is valid only when it has its exact length and is
//! not all zero bytes. Text form is lower-case hex (OTLP/JSON accepts either case on input).

use std::fmt;
use std::num::NonZeroU64;
use std::num::NonZeroU128;
use std::str::FromStr;

/// Why an id could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// The id had `got` bytes (or hex digits / 2) instead of `want`.
    #[error("id has {got} bytes, expected {want}")]
    Length {
        /// Length received, in bytes.
        got: usize,
        /// Required length, in bytes.
        want: usize,
    },
    /// Text that is not hexadecimal.
    #[error("id is not hexadecimal")]
    NotHex,
    /// All bytes zero: an invalid id per the OTLP specification.
    #[error("id is all zero")]
    Zero,
    /// A channel id outside `[a-z0-9][a-z0-9-]{0,62}` (domain §1).
    #[error("channel id must match [a-z0-9][a-z0-9-]{{0,62}}")]
    Channel,
    /// A lane id outside `[a-z0-9][a-z0-9-]{0,62}` (domain §7.1).
    #[error("lane id must match [a-z0-9][a-z0-9-]{{0,62}}")]
    Lane,
}

/// A W3C / OTLP trace id: 16 bytes, not all zero. Displays as 32 lower-case hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TraceId(NonZeroU128);

/// A W3C / OTLP span id: 8 bytes, not all zero. Displays as 16 lower-case hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SpanId(NonZeroU64);

impl TraceId {
    /// Reads the 16 big-endian bytes of an OTLP `trace_id`.
    ///
    /// # Errors
    /// [`IdError::Length`] unless `bytes.len() == 16`, [`IdError::Zero`] when all zero.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, IdError> {
        let arr: [u8; 16] = bytes.try_into().map_err(|_| IdError::Length {
            got: bytes.len(),
            want: 16,
        })?;
        NonZeroU128::new(u128::from_be_bytes(arr))
            .map(Self)
            .ok_or(IdError::Zero)
    }

    /// Reads 32 hex digits, either case.
    ///
    /// # Errors
    /// [`IdError::Length`] for another length, [`IdError::NotHex`], [`IdError::Zero`].
    pub fn from_hex(text: &str) -> Result<Self, IdError> {
        let mut buf = [0u8; 16];
        decode_hex(text, &mut buf)?;
        Self::from_bytes(&buf)
    }

    /// The 16 big-endian bytes.
    pub fn to_bytes(self) -> [u8; 16] {
        self.0.get().to_be_bytes()
    }
}

impl SpanId {
    /// Reads the 8 big-endian bytes of an OTLP `span_id`.
    ///
    /// # Errors
    /// [`IdError::Length`] unless `bytes.len() == 8`, [`IdError::Zero`] when all zero.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, IdError> {
        let arr: [u8; 8] = bytes.try_into().map_err(|_| IdError::Length {
            got: bytes.len(),
            want: 8,
        })?;
        NonZeroU64::new(u64::from_be_bytes(arr))
            .map(Self)
            .ok_or(IdError::Zero)
    }

    /// Reads 16 hex digits, either case.
    ///
    /// # Errors
    /// [`IdError::Length`] for another length, [`IdError::NotHex`], [`IdError::Zero`].
    pub fn from_hex(text: &str) -> Result<Self, IdError> {
        let mut buf = [0u8; 8];
        decode_hex(text, &mut buf)?;
        Self::from_bytes(&buf)
    }

    /// The 8 big-endian bytes.
    pub fn to_bytes(self) -> [u8; 8] {
        self.0.get().to_be_bytes()
    }
}

fn decode_hex(text: &str, out: &mut [u8]) -> Result<(), IdError> {
    if text.len() != out.len() * 2 {
        return Err(IdError::Length {
            got: text.len() / 2,
            want: out.len(),
        });
    }
    hex::decode_to_slice(text, out).map_err(|_| IdError::NotHex)
}

impl fmt::Display for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0.get())
    }
}
impl fmt::Debug for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TraceId({self})")
    }
}
impl fmt::Display for SpanId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0.get())
    }
}
impl fmt::Debug for SpanId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SpanId({self})")
    }
}
impl FromStr for TraceId {
    type Err = IdError;
    fn from_str(s: &str) -> Result<Self, IdError> {
        Self::from_hex(s)
    }
}
impl FromStr for SpanId {
    type Err = IdError;
    fn from_str(s: &str) -> Result<Self, IdError> {
        Self::from_hex(s)
    }
}

/// A release channel id (domain §1): `[a-z0-9][a-z0-9-]{0,62}`. `global` is the reserved id of
/// the global channel.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, serde::Serialize)]
#[serde(transparent)]
pub struct ChannelId(String);

impl ChannelId {
    /// The reserved id of the global channel.
    pub const GLOBAL: &'static str = "global";

    /// Validates `id`.
    ///
    /// # Errors
    /// [`IdError::Channel`] when `id` does not match `[a-z0-9][a-z0-9-]{0,62}`.
    pub fn new(id: &str) -> Result<Self, IdError> {
        if is_id(id) {
            Ok(Self(id.to_owned()))
        } else {
            Err(IdError::Channel)
        }
    }

    /// The id text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// True for the reserved `global` channel.
    pub fn is_global(&self) -> bool {
        self.0 == Self::GLOBAL
    }
}

impl fmt::Display for ChannelId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The id grammar of channels and lanes, `[a-z0-9][a-z0-9-]{0,62}` (domain §1, §7.1).
pub(crate) fn is_id(id: &str) -> bool {
    let b = id.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_ids_read_either_case_and_print_lower() {
        let a = TraceId::from_hex("7D3F0C9A2B1E4F5A8C6D0E1F2A3B4C5D").unwrap();
        let b = TraceId::from_hex("7d3f0c9a2b1e4f5a8c6d0e1f2a3b4c5d").unwrap();
        assert_eq!(a, b);
        assert_eq!(a.to_string(), "7d3f0c9a2b1e4f5a8c6d0e1f2a3b4c5d");
        assert_eq!(
            SpanId::from_hex("0BADF00D00000001").unwrap().to_string(),
            "0badf00d00000001"
        );
    }

    #[test]
    fn invalid_ids_are_refused() {
        assert_eq!(
            TraceId::from_hex("fT8MmiseT1qMbQ4fKjtMXQ=="),
            Err(IdError::Length { got: 12, want: 16 })
        );
        assert_eq!(SpanId::from_hex("c0ffee0000a1b2cz"), Err(IdError::NotHex));
        assert_eq!(SpanId::from_bytes(&[0; 8]), Err(IdError::Zero));
        assert_eq!(
            SpanId::from_bytes(&[1; 7]),
            Err(IdError::Length { got: 7, want: 8 })
        );
        assert_eq!(
            TraceId::from_bytes(&[]),
            Err(IdError::Length { got: 0, want: 16 })
        );
    }

    #[test]
    fn a_server_half_and_a_client_half_of_one_span_id_are_two_keys() {
        use crate::SpanKind;
        let t = TraceId::from_hex("7d3f0c9a2b1e4f5a8c6d0e1f2a3b4c5d").unwrap();
        let s = SpanId::from_hex("0badf00d00000001").unwrap();
        let server = SpanKey::of_kind(t, s, SpanKind::Server);
        let client = SpanKey::of_kind(t, s, SpanKind::Client);
        assert_ne!(server, client);
        assert!(server.server && !client.server);
        // Every kind but SERVER is "the rest": a resend of the same kind is the same key.
        for kind in [
            SpanKind::Client,
            SpanKind::Producer,
            SpanKind::Consumer,
            SpanKind::Internal,
            SpanKind::Unspecified,
        ] {
            assert_eq!(SpanKey::of_kind(t, s, kind), client, "{kind:?}");
            assert!(!SpanKey::is_server_text(kind.as_str()));
        }
        assert!(SpanKey::is_server_text(SpanKind::Server.as_str()));
    }

    #[test]
    fn channel_ids_follow_the_grammar() {
        assert!(ChannelId::new("trade").is_ok());
        assert!(ChannelId::new("0-a").is_ok());
        assert!(ChannelId::new("-a").is_err());
        assert!(ChannelId::new("Trade").is_err());
        assert!(ChannelId::new("").is_err());
        assert!(ChannelId::new(&"a".repeat(63)).is_ok());
        assert!(ChannelId::new(&"a".repeat(64)).is_err());
        assert!(ChannelId::new("global").unwrap().is_global());
    }
}

/// The identity of a span (domain §1): a resent span with the same key is the same span.
///
/// Zipkin/B3 instrumentation shares one span id between the CLIENT and the SERVER half of a
/// call, so the key tells a SERVER span from the rest: a SERVER span and a CLIENT span with the
/// same (trace_id, span_id) are two spans, and a resend of the same kind is still a retry. Every
/// place that deduplicates spans (the store's duplicate filter and its reload from files) uses
/// this key; [`SpanKey::of_kind`] and [`SpanKey::is_server_text`] build it from a span's kind.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct SpanKey {
    /// The trace.
    pub trace_id: TraceId,
    /// The span within it.
    pub span_id: SpanId,
    /// True for a SERVER span: the half of a shared (Zipkin/B3) span id that is the other
    /// half's child. False for every other kind.
    pub server: bool,
}

impl SpanKey {
    /// The key of a span of `kind`.
    pub fn of_kind(trace_id: TraceId, span_id: SpanId, kind: crate::SpanKind) -> Self {
        Self {
            trace_id,
            span_id,
            server: kind == crate::SpanKind::Server,
        }
    }

    /// Whether `span_kind` as stored (the `span_kind` column's text) is the SERVER half.
    pub fn is_server_text(span_kind: &str) -> bool {
        span_kind == crate::SpanKind::Server.as_str()
    }
}
