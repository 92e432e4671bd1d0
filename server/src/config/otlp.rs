//! `[otlp]`: who may send spans and over what (issue 28, item 5). Bearer tokens the receivers
//! accept (`tokens`, plus `DYELINE_OTLP_TOKEN`), TLS on both receivers (`[otlp.tls]`: a
//! certificate chain and key in PEM, read again when they change), CORS origins for browser
//! exporters (`[otlp.cors]`) and per-source rate limits (`[otlp.rate_limit]`). Checked at
//! load: a short token, a half-set TLS pair, a file that cannot be read or an origin that is
//! not one is refused naming its key.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{ConfigError, Secret};

/// `[otlp]` settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct OtlpSettings {
    /// Bearer tokens an export must carry (`Authorization: Bearer <token>`); none (and no
    /// `DYELINE_OTLP_TOKEN`): exports need none.
    pub tokens: Vec<Secret>,
    /// TLS on both receivers; off unless `cert` and `key` are set.
    pub tls: OtlpTlsSettings,
    /// CORS on OTLP/HTTP for exporters in browsers.
    pub cors: OtlpCorsSettings,
    /// Export requests per second from each client address.
    pub rate_limit: OtlpRateLimitSettings,
}

/// `[otlp.cors]` settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct OtlpCorsSettings {
    /// Origins whose pages may export (`https://shop.example.com`, or `*` for any); none:
    /// no CORS (browsers cannot export cross-origin).
    pub allowed_origins: Vec<String>,
}

/// `[otlp.rate_limit]` settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OtlpRateLimitSettings {
    /// Export requests a second from one client address (both receivers together); past it
    /// 429 / UNAVAILABLE with a retry delay. 0 (the default): no limit.
    pub requests_per_second_per_source: u32,
    /// Requests one source may send at once above its rate. Default 100.
    pub burst: u32,
}

impl Default for OtlpRateLimitSettings {
    fn default() -> Self {
        Self {
            requests_per_second_per_source: 0,
            burst: 100,
        }
    }
}

/// `[otlp.tls]` settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OtlpTlsSettings {
    /// PEM certificate chain (the server's first).
    pub cert: Option<PathBuf>,
    /// PEM private key.
    pub key: Option<PathBuf>,
    /// How often the files are checked for a change. Default `10s`.
    #[serde(with = "humantime_serde")]
    pub reload_interval: Duration,
}

impl Default for OtlpTlsSettings {
    fn default() -> Self {
        Self {
            cert: None,
            key: None,
            reload_interval: Duration::from_secs(10),
        }
    }
}

impl OtlpTlsSettings {
    /// The pair, when TLS is on.
    pub fn files(&self) -> Option<dyeline_collector::listen::TlsFiles> {
        Some(dyeline_collector::listen::TlsFiles {
            cert: self.cert.clone()?,
            key: self.key.clone()?,
        })
    }
}

impl OtlpSettings {
    /// Every accepted token: `tokens` and `env` (`DYELINE_OTLP_TOKEN`), blanks left out.
    pub fn all_tokens(&self, env: Option<&Secret>) -> Vec<String> {
        self.tokens
            .iter()
            .chain(env)
            .map(|Secret(t)| t.trim().to_owned())
            .filter(|t| !t.is_empty())
            .collect()
    }

    /// Refuses a weak token, a half-set TLS pair, a reload interval under 1s, and a pair that
    /// cannot be served.
    pub(super) fn validate(&self, env: Option<&Secret>) -> Result<(), ConfigError> {
        for (i, Secret(t)) in self.tokens.iter().enumerate() {
            dyeline_control::auth::check_token_strength(t.trim(), &format!("otlp.tokens[{i}]"))
                .map_err(ConfigError::Invalid)?;
        }
        if let Some(Secret(t)) = env
            && !t.trim().is_empty()
        {
            dyeline_control::auth::check_token_strength(t.trim(), "DYELINE_OTLP_TOKEN")
                .map_err(ConfigError::Invalid)?;
        }
        let tls = &self.tls;
        match (&tls.cert, &tls.key) {
            (Some(_), None) => {
                return Err(ConfigError::Invalid(
                    "otlp.tls.key: set with otlp.tls.cert (TLS needs both)".into(),
                ));
            }
            (None, Some(_)) => {
                return Err(ConfigError::Invalid(
                    "otlp.tls.cert: set with otlp.tls.key (TLS needs both)".into(),
                ));
            }
            _ => {}
        }
        for (i, o) in self.cors.allowed_origins.iter().enumerate() {
            let ok = o == "*"
                || reqwest::Url::parse(o).is_ok_and(|u| {
                    matches!(u.scheme(), "http" | "https")
                        && u.has_host()
                        && u.path() == "/"
                        && u.query().is_none()
                        && !o.ends_with('/')
                });
            if !ok {
                return Err(ConfigError::Invalid(format!(
                    "otlp.cors.allowed_origins[{i}]: {o:?} is not an origin \
                     (scheme://host[:port], no path, or \"*\")"
                )));
            }
        }
        if self.rate_limit.requests_per_second_per_source > 0 && self.rate_limit.burst == 0 {
            return Err(ConfigError::Invalid(
                "otlp.rate_limit.burst must be at least 1".into(),
            ));
        }
        if tls.reload_interval < Duration::from_secs(1) {
            return Err(ConfigError::Invalid(
                "otlp.tls.reload_interval must be at least 1s".into(),
            ));
        }
        if let Some(files) = tls.files() {
            dyeline_collector::listen::Tls::load(
                files,
                "otlp_http",
                dyeline_collector::listen::Protocols::Http1AndH2c,
                &dyeline_collector::listen::ListenerMetrics::default(),
            )
            .map_err(|e| ConfigError::Invalid(format!("otlp.tls: {e}")))?;
        }
        Ok(())
    }
}
