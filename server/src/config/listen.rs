//! `[listen.otlp_grpc]`, `[listen.otlp_http]`, `[listen.api]`: the limits of each listener's
//! connections and requests (enforced by `dyeline_collector::listen`). Environment:
//! `DYELINE_LISTEN__OTLP_HTTP__IDLE_TIMEOUT=30s` and so on.

use std::time::Duration;

use bytesize::ByteSize;
use dyeline_collector::listen::ListenerLimits;
use serde::{Deserialize, Serialize};

use super::{ConfigError, byte_size};

/// The three listeners' limits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ListenSettings {
    /// OTLP/gRPC.
    pub otlp_grpc: ListenerSettings,
    /// OTLP/HTTP.
    pub otlp_http: ListenerSettings,
    /// API and dashboard. Server-sent event streams hold a connection and a request each.
    pub api: ListenerSettings,
}

impl Default for ListenSettings {
    fn default() -> Self {
        Self {
            otlp_grpc: ListenerSettings::default(),
            otlp_http: ListenerSettings::default(),
            api: ListenerSettings {
                max_connections: 4096,
                max_concurrent_requests: 4096,
                max_buffered_request_bytes: ByteSize::mib(64),
                ..ListenerSettings::default()
            },
        }
    }
}

/// One listener's limits. A refusal is counted in `dyeline_listener_*` metrics and its
/// message names the setting that raises it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ListenerSettings {
    /// Connections open at most. At the bound a new connection closes the one that has gone
    /// longest without a request in flight, or is refused (503 / GOAWAY) when every one has a
    /// request in flight. Lowered at start, with a warning, when the three listeners' bounds
    /// do not fit in the open-files limit. Default 1024 (api: 4096).
    pub max_connections: usize,
    /// Requests in flight at most, across connections (an HTTP/2 stream is one); past it 503
    /// / UNAVAILABLE with a retry delay. Default 1024 (api: 4096).
    pub max_concurrent_requests: usize,
    /// An HTTP/1.1 request head must arrive within this; it is also the longest an idle
    /// HTTP/1.1 keep-alive connection waits for its next request. Default `10s`.
    #[serde(with = "humantime_serde")]
    pub header_read_timeout: Duration,
    /// A request body must arrive in full within this of the request head; after it the
    /// request is answered 503 / UNAVAILABLE and its bytes freed. Default `30s`.
    #[serde(with = "humantime_serde")]
    pub request_read_timeout: Duration,
    /// A connection with no request in flight for this long is closed (HTTP/2: GOAWAY).
    /// Default `2m`.
    #[serde(with = "humantime_serde")]
    pub idle_timeout: Duration,
    /// A connection whose response writes have been blocked this long (the client reads
    /// nothing) is closed, between one and two of these after its socket filled. Default `30s`.
    #[serde(with = "humantime_serde")]
    pub write_timeout: Duration,
    /// HTTP/2 streams per connection (`SETTINGS_MAX_CONCURRENT_STREAMS`); streams past it are
    /// refused (REFUSED_STREAM). Default 100.
    pub http2_max_concurrent_streams: u32,
    /// HTTP/2 keep-alive ping interval. Default `60s`.
    #[serde(with = "humantime_serde")]
    pub http2_keepalive_interval: Duration,
    /// A ping unanswered for this long closes the connection. Default `20s`.
    #[serde(with = "humantime_serde")]
    pub http2_keepalive_timeout: Duration,
    /// Largest request head (HTTP/2 `SETTINGS_MAX_HEADER_LIST_SIZE`; the HTTP/1.1 read
    /// buffer, where a larger head is answered 431). 8 KiB to 16 MiB. Default 64 KiB.
    #[serde(deserialize_with = "byte_size")]
    pub max_header_bytes: ByteSize,
    /// Request body bytes held at most across the listener's requests in flight (from read
    /// until the response is sent); past it 503 / UNAVAILABLE with a retry delay. At least
    /// `receiver.max_body_size` on the OTLP listeners. Default 256 MiB (api: 64 MiB).
    #[serde(deserialize_with = "byte_size")]
    pub max_buffered_request_bytes: ByteSize,
}

impl Default for ListenerSettings {
    fn default() -> Self {
        let d = ListenerLimits::default();
        Self {
            max_connections: d.max_connections,
            max_concurrent_requests: d.max_concurrent_requests,
            header_read_timeout: d.header_read_timeout,
            request_read_timeout: d.request_read_timeout,
            idle_timeout: d.idle_timeout,
            write_timeout: d.write_timeout,
            http2_max_concurrent_streams: d.http2_max_concurrent_streams,
            http2_keepalive_interval: d.http2_keepalive_interval,
            http2_keepalive_timeout: d.http2_keepalive_timeout,
            max_header_bytes: ByteSize::b(d.max_header_bytes as u64),
            max_buffered_request_bytes: ByteSize::b(d.max_buffered_request_bytes as u64),
        }
    }
}

impl ListenerSettings {
    /// The limits the listener enforces.
    pub fn limits(&self) -> ListenerLimits {
        let size = |b: ByteSize| usize::try_from(b.as_u64()).unwrap_or(usize::MAX);
        ListenerLimits {
            max_connections: self.max_connections,
            max_concurrent_requests: self.max_concurrent_requests,
            header_read_timeout: self.header_read_timeout,
            request_read_timeout: self.request_read_timeout,
            idle_timeout: self.idle_timeout,
            write_timeout: self.write_timeout,
            http2_max_concurrent_streams: self.http2_max_concurrent_streams,
            http2_keepalive_interval: self.http2_keepalive_interval,
            http2_keepalive_timeout: self.http2_keepalive_timeout,
            max_header_bytes: size(self.max_header_bytes),
            max_buffered_request_bytes: size(self.max_buffered_request_bytes),
        }
    }

    fn validate(&self, name: &str, min_buffered: ByteSize) -> Result<(), ConfigError> {
        let invalid = |what: String| Err(ConfigError::Invalid(format!("listen.{name}.{what}")));
        for (key, d) in [
            ("header_read_timeout", self.header_read_timeout),
            ("request_read_timeout", self.request_read_timeout),
            ("idle_timeout", self.idle_timeout),
            ("write_timeout", self.write_timeout),
            ("http2_keepalive_interval", self.http2_keepalive_interval),
            ("http2_keepalive_timeout", self.http2_keepalive_timeout),
        ] {
            if d.is_zero() {
                return invalid(format!("{key} must be positive (0 would never time out)"));
            }
        }
        for (key, n) in [
            ("max_connections", self.max_connections),
            ("max_concurrent_requests", self.max_concurrent_requests),
            (
                "http2_max_concurrent_streams",
                self.http2_max_concurrent_streams as usize,
            ),
        ] {
            if n == 0 {
                return invalid(format!("{key} must be at least 1"));
            }
        }
        if !(8 << 10..=16 << 20).contains(&self.max_header_bytes.as_u64()) {
            return invalid("max_header_bytes must be 8 KiB to 16 MiB".into());
        }
        if self.max_buffered_request_bytes < min_buffered {
            return invalid(format!(
                "max_buffered_request_bytes must be at least {min_buffered} (a request of the largest accepted size)"
            ));
        }
        Ok(())
    }
}

impl ListenSettings {
    /// Refuses zero timeouts and bounds, header sizes out of range, and buffered-bytes bounds
    /// too small for one request of the largest accepted size (`max_body_size` on the OTLP
    /// listeners, 1 MiB on the API).
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming the key.
    pub fn validate(&self, max_body_size: ByteSize) -> Result<(), ConfigError> {
        self.otlp_grpc.validate("otlp_grpc", max_body_size)?;
        self.otlp_http.validate("otlp_http", max_body_size)?;
        self.api.validate("api", ByteSize::mib(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use figment::Figment;

    fn load(toml: &str) -> Result<Config, ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.toml");
        std::fs::write(&file, toml).unwrap();
        Config::load(Some(&file), Figment::new())
    }

    #[test]
    fn each_listener_keeps_its_own_defaults_under_a_partial_section() {
        let cfg = load("[listen.api]\nidle_timeout = \"5s\"\n[listen.otlp_http]\nmax_buffered_request_bytes = \"32 MiB\"\n").unwrap();
        assert_eq!(cfg.listen.api.idle_timeout, Duration::from_secs(5));
        assert_eq!(cfg.listen.api.max_connections, 4096, "the api default");
        assert_eq!(cfg.listen.api.max_buffered_request_bytes, ByteSize::mib(64));
        let http = cfg.listen.otlp_http.limits();
        assert_eq!(http.max_buffered_request_bytes, 32 << 20);
        assert_eq!(http.max_connections, 1024);
        assert_eq!(http.http2_max_concurrent_streams, 100);
        assert_eq!(http.idle_timeout, Duration::from_secs(120));
        assert_eq!(cfg.listen.otlp_grpc.limits(), ListenerLimits::default());
    }

    #[test]
    fn nonsense_values_are_refused_naming_the_key() {
        for (toml, needle) in [
            (
                "[listen.otlp_grpc]\nidle_timeout = \"0s\"\n",
                "listen.otlp_grpc.idle_timeout must be positive",
            ),
            (
                "[listen.api]\nheader_read_timeout = \"0ms\"\n",
                "listen.api.header_read_timeout must be positive",
            ),
            (
                "[listen.otlp_http]\nmax_connections = 0\n",
                "listen.otlp_http.max_connections must be at least 1",
            ),
            (
                "[listen.otlp_grpc]\nhttp2_max_concurrent_streams = 0\n",
                "http2_max_concurrent_streams must be at least 1",
            ),
            (
                "[listen.api]\nmax_header_bytes = 1024\n",
                "listen.api.max_header_bytes must be 8 KiB to 16 MiB",
            ),
            (
                "[listen.otlp_http]\nmax_buffered_request_bytes = \"8 MiB\"\n",
                "listen.otlp_http.max_buffered_request_bytes must be at least",
            ),
            ("[listen.api]\nmax_conections = 5\n", "max_conections"),
        ] {
            let err = load(toml).unwrap_err().to_string();
            assert!(err.contains(needle), "{toml}: {err}");
        }
        let ok = load(
            "[receiver]\nmax_body_size = \"4 MiB\"\n[listen.otlp_http]\nmax_buffered_request_bytes = \"8 MiB\"\n",
        );
        assert!(ok.is_ok(), "a bound above the body size is fine");
    }
}
