//! Layered configuration: built-in defaults < TOML file (`--config`) < `DYELINE_*` environment
//! variables (nested keys with `__`, e.g. `DYELINE_STORE__FSYNC=never`) < command-line flags.
//! Unknown keys are refused; values are validated after loading.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytesize::ByteSize;
use dyeline_control::{ApiToken, Role};
use dyeline_model::ColorRule;
use dyeline_queries::analyze::AnalyzerConfig;
use dyeline_store::FsyncPolicy;
use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::{Deserialize, Serialize};

/// The whole configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Data directory (WAL, Parquet, databases). Default `./data`.
    pub data_dir: PathBuf,
    /// OTLP/gRPC listen address. Default `127.0.0.1:4317`.
    pub otlp_grpc_addr: SocketAddr,
    /// OTLP/HTTP listen address. Default `127.0.0.1:4318`.
    pub otlp_http_addr: SocketAddr,
    /// API and UI listen address. Default `127.0.0.1:8080`.
    pub api_addr: SocketAddr,
    /// Receiver settings.
    pub receiver: ReceiverConfig,
    /// Store settings.
    pub store: StoreSettings,
    /// SQL endpoint settings.
    pub sql: SqlSettings,
    /// Colour rules run after the defaults of domain §1 (`deploy.color`, then `blue`/`green`
    /// tokens in `host.name`, `k8s.pod.name`, `k8s.deployment.name`).
    pub color_rules: Vec<ColorRule>,
    /// Log format: `text` or `json`.
    pub log_format: LogFormat,
    /// API settings: tokens, read access, weight-update spread.
    pub api: ApiSettings,
    /// One more write token, named `env` (`DYELINE_API_TOKEN`).
    pub api_token: Option<Secret>,
    /// Detection thresholds (`[analyzer.defaults]`, `[analyzer.channels.<id>]`).
    pub analyzer: AnalyzerConfig,
    /// Live evaluation and alert delivery.
    pub alerts: crate::alerting::AlertSettings,
    /// Metrics derived from spans.
    pub metrics: MetricsSettings,
    /// How much of one trace a view loads (`GET /api/v1/traces/{id}`, `/traces/{id}`).
    pub trace_view: TraceViewSettings,
}

/// `[trace_view]` settings: one trace view (API or page) is a page of the trace's spans.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TraceViewSettings {
    /// Spans one trace view returns at most (the API's `limit` and the page's length); the
    /// view says how many it left out and pages with `offset`. Default 10000: such a page is
    /// about 4 MB of JSON and 5 MB of HTML (11 MB of JSON when every span is a hop), and
    /// takes well under a second; real traces rarely hold more. At most 1000000.
    pub max_spans: usize,
}

impl Default for TraceViewSettings {
    fn default() -> Self {
        Self { max_spans: 10_000 }
    }
}

/// `[metrics]` settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsSettings {
    /// Label sets (channel, app, colour, kind) kept at most; further apps count as `_other`.
    /// Default 5000.
    pub max_series: usize,
}

impl Default for MetricsSettings {
    fn default() -> Self {
        Self { max_series: 5000 }
    }
}

/// A secret string: read and written as a plain string, never printed by `Debug`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// API settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApiSettings {
    /// Named bearer tokens (`[[api.tokens]] name = "alice", token = "…", role = "write"`).
    /// When none is configured (here or in `DYELINE_API_TOKEN`), `serve` generates one in
    /// `<data_dir>/api-token`.
    pub tokens: Vec<ApiToken>,
    /// Require a token for reads too (SQL, channels, events, timeline). Default false.
    pub read_requires_token: bool,
    /// Registry weight updates are spread over this long (per-instance delay from a hash of
    /// the instance id, domain §5). Default `10s`.
    #[serde(with = "humantime_serde")]
    pub weights_apply_spread: Duration,
}

impl Default for ApiSettings {
    fn default() -> Self {
        Self {
            tokens: Vec::new(),
            read_requires_token: false,
            weights_apply_spread: Duration::from_secs(10),
        }
    }
}

impl Config {
    /// Configured tokens: `api.tokens` plus `DYELINE_API_TOKEN` (named `env`, role write).
    pub fn configured_tokens(&self) -> Vec<ApiToken> {
        let mut t = self.api.tokens.clone();
        if let Some(Secret(token)) = &self.api_token
            && !token.trim().is_empty()
        {
            t.push(ApiToken {
                name: "env".into(),
                token: token.trim().to_owned(),
                role: Role::Write,
            });
        }
        t
    }
}

/// Log output format.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per event.
    Json,
}

/// Reads a byte size: a whole number of bytes (`1048576`), or a number and a unit as
/// `bytesize` parses it (`16MiB`, `16 MiB`, `512KB`, `1.5GB`; units are case-insensitive, `KB`
/// is 1000 and `KiB` 1024). Anything else is refused with the accepted forms in the message
/// (bytesize's own said `expected parsable string`, or `integer overflow` for `-1`).
fn byte_size<'de, D: serde::Deserializer<'de>>(d: D) -> Result<ByteSize, D::Error> {
    use serde::de::{Error, Unexpected, Visitor};
    struct ByteSizeVisitor;
    impl Visitor<'_> for ByteSizeVisitor {
        type Value = ByteSize;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a byte size: a whole number of bytes, or a number and a unit such as 16MiB, 512KB or 1GB")
        }
        fn visit_u64<E: Error>(self, v: u64) -> Result<ByteSize, E> {
            Ok(ByteSize::b(v))
        }
        fn visit_i64<E: Error>(self, v: i64) -> Result<ByteSize, E> {
            u64::try_from(v)
                .map(ByteSize::b)
                .map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
        }
        fn visit_str<E: Error>(self, v: &str) -> Result<ByteSize, E> {
            v.trim()
                .parse()
                .map_err(|_| E::invalid_value(Unexpected::Str(v), &self))
        }
    }
    d.deserialize_any(ByteSizeVisitor)
}

/// Receiver limits.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReceiverConfig {
    /// Largest request body after decompression. Default 16 MiB.
    #[serde(deserialize_with = "byte_size")]
    pub max_body_size: ByteSize,
}

/// Store settings (see `dyeline_store::StoreConfig`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreSettings {
    /// `always` (group commit fsync before acknowledging; default) or `never`.
    pub fsync: FsyncPolicy,
    /// Flush memory to Parquet at least this often. Default `60s`.
    #[serde(with = "humantime_serde")]
    pub flush_interval: Duration,
    /// … or once memory holds this many rows. Default 500000.
    pub flush_max_rows: usize,
    /// Delete Parquet files this long after they were written. Default `7days`.
    #[serde(with = "humantime_serde")]
    pub retention: Duration,
    /// Writes queued before new ones get 429 / UNAVAILABLE. Default 256.
    pub queue_capacity: usize,
    /// Memory the rows held before their flush may take (sealed, plain, being flushed);
    /// above it writes get 429 / UNAVAILABLE and a flush starts (`import` waits). Default
    /// 1 GiB.
    #[serde(deserialize_with = "byte_size")]
    pub max_memory: ByteSize,
    /// Write nothing to disk (benchmarks only): no WAL, no Parquet files; rows are held,
    /// sealed and queryable in memory until the process ends. Default false.
    pub in_memory_only: bool,
    /// Store nothing (benchmarks only): the receivers decode, validate and convert each
    /// request as usual, then acknowledge it and drop its rows, the work of a collector
    /// exporting to a blackhole. Queries, span metrics and rollups see none of them;
    /// `dyeline_receiver_spans_accepted_total` counts them. Default false.
    pub discard: bool,
    /// Memory for the Parquet files' trace-id indexes (8 bytes per trace per file; the
    /// newest files keep theirs, a lookup opens the others). Default 256 MiB.
    #[serde(deserialize_with = "byte_size")]
    pub trace_index_max_bytes: ByteSize,
}

/// SQL endpoint limits.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SqlSettings {
    /// Rows returned at most. Default 10000.
    pub max_rows: usize,
    /// Cancel after. Default `30s`.
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            data_dir: PathBuf::from("./data"),
            otlp_grpc_addr: ([127, 0, 0, 1], 4317).into(),
            otlp_http_addr: ([127, 0, 0, 1], 4318).into(),
            api_addr: ([127, 0, 0, 1], 8080).into(),
            receiver: ReceiverConfig::default(),
            store: StoreSettings::default(),
            sql: SqlSettings::default(),
            color_rules: Vec::new(),
            log_format: LogFormat::Text,
            api: ApiSettings::default(),
            api_token: None,
            analyzer: AnalyzerConfig::default(),
            alerts: crate::alerting::AlertSettings::default(),
            metrics: MetricsSettings::default(),
            trace_view: TraceViewSettings::default(),
        }
    }
}

impl Default for ReceiverConfig {
    fn default() -> Self {
        Self {
            max_body_size: ByteSize::mib(16),
        }
    }
}

impl Default for StoreSettings {
    fn default() -> Self {
        let d = dyeline_store::StoreConfig::new(".");
        Self {
            fsync: d.fsync,
            flush_interval: d.flush_interval,
            flush_max_rows: d.flush_max_rows,
            retention: d.retention,
            queue_capacity: d.queue_capacity,
            max_memory: ByteSize::b(d.max_memory_bytes as u64),
            in_memory_only: false,
            discard: false,
            trace_index_max_bytes: ByteSize::b(d.trace_index_max_bytes as u64),
        }
    }
}

impl Default for SqlSettings {
    fn default() -> Self {
        let d = dyeline_queries::SqlLimits::default();
        Self {
            max_rows: d.max_rows,
            timeout: d.timeout,
        }
    }
}

/// Errors loading the configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A file, variable or value could not be read.
    #[error("configuration: {0}")]
    Load(#[from] Box<figment::Error>),
    /// A value is out of range.
    #[error("configuration: {0}")]
    Invalid(String),
}

impl Config {
    /// Loads defaults < `file` < environment, then `overrides` (the flags given).
    ///
    /// # Errors
    /// [`ConfigError`] naming the key at fault.
    pub fn load(file: Option<&Path>, overrides: Figment) -> Result<Self, ConfigError> {
        Self::load_over(Config::default(), file, overrides)
    }

    /// As [`Config::load`], with `defaults` in place of the built-in defaults (`dyeline demo`
    /// starts from its own: a temporary data directory, ports chosen by the OS).
    ///
    /// # Errors
    /// [`ConfigError`] naming the key at fault.
    pub fn load_over(
        defaults: Config,
        file: Option<&Path>,
        overrides: Figment,
    ) -> Result<Self, ConfigError> {
        let mut fig = Figment::from(Serialized::defaults(defaults));
        if let Some(f) = file {
            if !f.exists() {
                return Err(ConfigError::Invalid(format!(
                    "config file {} not found",
                    f.display()
                )));
            }
            fig = fig.merge(Toml::file(f));
        }
        // `DYELINE_LOG` is the log filter, read by the logger, not a configuration key.
        fig = fig.merge(Env::prefixed("DYELINE_").ignore(&["log"]).split("__"));
        let cfg: Config = fig.merge(overrides).extract().map_err(Box::new)?;
        cfg.validate()?;
        Ok(cfg)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if self.receiver.max_body_size.as_u64() < 1024 {
            return Err(ConfigError::Invalid(
                "receiver.max_body_size must be at least 1 KiB".into(),
            ));
        }
        // Room for the plain rows of a seal (32 MiB) and the sealed rows beside them.
        if self.store.max_memory.as_u64() < 64 << 20 {
            return Err(ConfigError::Invalid(
                "store.max_memory must be at least 64 MiB".into(),
            ));
        }
        if self.store.queue_capacity == 0 || self.store.flush_max_rows == 0 {
            return Err(ConfigError::Invalid(
                "store.queue_capacity and store.flush_max_rows must be positive".into(),
            ));
        }
        if !(1..=1_000_000).contains(&self.trace_view.max_spans) {
            return Err(ConfigError::Invalid(
                "trace_view.max_spans must be 1..=1000000".into(),
            ));
        }
        if self.sql.max_rows == 0 {
            return Err(ConfigError::Invalid("sql.max_rows must be positive".into()));
        }
        for (name, t) in std::iter::once(("defaults", &self.analyzer.defaults))
            .chain(self.analyzer.channels.iter().map(|(k, v)| (k.as_str(), v)))
        {
            let day = Duration::from_secs(86_400);
            if t.window < Duration::from_secs(1) || t.window > day || t.grace > day {
                return Err(ConfigError::Invalid(format!(
                    "analyzer.{name}: window must be 1s..=1day and grace at most 1day"
                )));
            }
        }
        if self.alerts.interval < Duration::from_millis(100) {
            return Err(ConfigError::Invalid(
                "alerts.interval must be at least 100ms".into(),
            ));
        }
        for t in &self.api.tokens {
            if t.name.trim().is_empty() || t.token.trim().len() < 8 {
                return Err(ConfigError::Invalid(format!(
                    "api.tokens: token {:?} needs a name and a secret of at least 8 characters",
                    t.name
                )));
            }
        }
        dyeline_model::ColorRules::with_user_rules(self.color_rules.clone())
            .map_err(|e| ConfigError::Invalid(e.to_string()))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_readme_toml_example_loads() {
        let readme = include_str!("../../README.md");
        let start = readme.find("```toml\n").expect("a toml block") + "```toml\n".len();
        let len = readme[start..].find("```").expect("closed");
        let dir = std::env::temp_dir().join(format!("dyeline-readme-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("readme.toml");
        std::fs::write(&file, &readme[start..start + len]).unwrap();
        let cfg = Config::load(Some(&file), Figment::new()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cfg.api.tokens.len(), 1);
        assert_eq!(cfg.api.tokens[0].name, "alice");
        assert_eq!(cfg.analyzer.defaults.ratio_min_requests, 200);
        assert_eq!(cfg.alerts.interval, Duration::from_secs(2));
        assert_eq!(cfg.color_rules.len(), 1);
    }

    #[test]
    fn layers_apply_in_order_and_unknown_keys_fail() {
        let dir = std::env::temp_dir().join(format!("dyeline-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("c.toml");
        std::fs::write(
            &file,
            "data_dir = \"/tmp/x\"\n[store]\nfsync = \"never\"\nretention = \"2days\"\n[receiver]\nmax_body_size = \"1 MiB\"\n",
        )
        .unwrap();
        let flags = Figment::new().merge(Serialized::default("data_dir", "/tmp/flag"));
        let cfg = Config::load(Some(&file), flags).unwrap();
        assert_eq!(cfg.data_dir, PathBuf::from("/tmp/flag"));
        assert_eq!(cfg.store.fsync, FsyncPolicy::Never);
        assert_eq!(cfg.store.retention, Duration::from_secs(2 * 86400));
        assert_eq!(cfg.receiver.max_body_size, ByteSize::mib(1));
        assert_eq!(cfg.store.max_memory, ByteSize::gib(1));
        assert_eq!(
            store_config_max_memory(&cfg),
            1 << 30,
            "the store gets the setting"
        );
        assert_eq!(cfg.otlp_grpc_addr, "127.0.0.1:4317".parse().unwrap());
        std::fs::write(&file, "[analyzer.channels.trade]\nwindow = \"0s\"\n").unwrap();
        let err = Config::load(Some(&file), Figment::new()).unwrap_err();
        assert!(err.to_string().contains("analyzer.trade"), "{err}");
        std::fs::write(&file, "nonsense = 1\n").unwrap();
        let err = Config::load(Some(&file), Figment::new()).unwrap_err();
        assert!(err.to_string().contains("nonsense"), "{err}");
    }

    fn store_config_max_memory(cfg: &Config) -> usize {
        crate::serve::store_config(cfg).max_memory_bytes
    }

    #[test]
    fn the_memory_bound_is_read_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.toml");
        std::fs::write(&file, "[store]\nmax_memory = \"256 MiB\"\n").unwrap();
        let cfg = Config::load(Some(&file), Figment::new()).unwrap();
        assert_eq!(store_config_max_memory(&cfg), 256 << 20);
        std::fs::write(&file, "[store]\nmax_memory = \"1 MiB\"\n").unwrap();
        let err = Config::load(Some(&file), Figment::new()).unwrap_err();
        assert!(
            err.to_string()
                .contains("store.max_memory must be at least 64 MiB"),
            "{err}"
        );
    }

    #[test]
    fn the_trace_view_cap_is_read_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.toml");
        assert_eq!(Config::default().trace_view.max_spans, 10_000);
        std::fs::write(&file, "[trace_view]\nmax_spans = 500\n").unwrap();
        let cfg = Config::load(Some(&file), Figment::new()).unwrap();
        assert_eq!(cfg.trace_view.max_spans, 500);
        for bad in ["0", "1000001"] {
            std::fs::write(&file, format!("[trace_view]\nmax_spans = {bad}\n")).unwrap();
            let err = Config::load(Some(&file), Figment::new()).unwrap_err();
            assert!(
                err.to_string()
                    .contains("trace_view.max_spans must be 1..=1000000"),
                "{err}"
            );
        }
    }

    #[test]
    fn byte_sizes_are_numbers_or_sizes_with_units_and_errors_say_so() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.toml");
        let load = |value: &str| {
            std::fs::write(
                &file,
                format!("[receiver]\nmax_body_size = {value}\n[store]\ntrace_index_max_bytes = {value}\n"),
            )
            .unwrap();
            Config::load(Some(&file), Figment::new())
        };
        for (value, bytes) in [
            ("2048", 2048),
            ("\"16MB\"", 16_000_000),
            ("\"16 MiB\"", 16 << 20),
            ("\"512kib\"", 512 << 10),
        ] {
            let cfg = load(value).unwrap();
            assert_eq!(cfg.receiver.max_body_size.as_u64(), bytes, "{value}");
            assert_eq!(cfg.store.trace_index_max_bytes.as_u64(), bytes, "{value}");
        }
        for value in ["\"sixteen\"", "-1", "\"16 parsecs\""] {
            let err = load(value).unwrap_err().to_string();
            assert!(
                err.contains("expected a byte size") && err.contains("16MiB"),
                "{value}: {err}"
            );
        }
    }
}
