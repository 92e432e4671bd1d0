//! Layered configuration: built-in defaults < TOML file (`--config`) < `DYELINE_*` environment
//! variables (nested keys with `__`, e.g. `DYELINE_STORE__FSYNC=never`) < command-line flags.
//! Unknown keys are refused; values are validated after loading.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytesize::ByteSize;
use dyeline_control::{ApiToken, Role};
use dyeline_model::{ColorRule, LaneCarrier, LaneRule};
use dyeline_queries::analyze::AnalyzerConfig;
use dyeline_store::FsyncPolicy;
use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::{Deserialize, Serialize};

mod compaction;
mod control;
#[cfg(test)]
mod deploy_tests;
#[cfg(test)]
mod lanes_doc_tests;
mod listen;
mod otlp;
mod storage;
mod ui;
pub use control::ControlSettings;
pub use listen::ListenSettings;
pub use otlp::OtlpSettings;
pub use storage::{CatalogSettings, ClusterSettings, SharedStorage, StorageSettings};
pub use ui::UiConfig;

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// Who may export and over what: `[otlp] tokens`, `[otlp.tls]`.
    pub otlp: OtlpSettings,
    /// One more OTLP token (`DYELINE_OTLP_TOKEN`).
    pub otlp_token: Option<Secret>,
    /// Store settings.
    pub store: StoreSettings,
    /// SQL endpoint settings.
    pub sql: SqlSettings,
    /// Colour rules run after the defaults of domain §1 (`deploy.color`, then `blue`/`green`
    /// tokens in `host.name`, `k8s.pod.name`, `k8s.deployment.name`).
    pub color_rules: Vec<ColorRule>,
    /// Instance lane rules (`[[lane_rules]]`) run after the built-in `deploy.lane` (domain
    /// §7.1), first match wins, else `base`: `kind = "attribute"` (a resource attribute's value,
    /// through an optional `map`) or `kind = "pattern"` (a `regex` with a named group `lane`
    /// over a resource attribute, optional `map`). Compiled and checked at load.
    pub lane_rules: Vec<LaneRule>,
    /// Lane tag carriers (`[[lane_carriers]]`: a span attribute `key`, an optional value
    /// `map`) tried after the built-in `x-deploy-lane` carriers (domain §7.1), first present
    /// wins. Compiled and checked at load.
    pub lane_carriers: Vec<LaneCarrier>,
    /// Log format: `text` or `json`.
    pub log_format: LogFormat,
    /// API settings: tokens, read access, weight-update spread.
    pub api: ApiSettings,
    /// One more write token, named `env` (`DYELINE_API_TOKEN`).
    pub api_token: Option<Secret>,
    /// Detection thresholds (`[analyzer.defaults]`, `[analyzer.channels.<id>]`).
    pub analyzer: AnalyzerConfig,
    /// Live evaluation and alert delivery.
    pub alerts: dyeline_queries::alerts::AlertSettings,
    /// Metrics derived from spans.
    pub metrics: MetricsSettings,
    /// Limits of each listener's connections and requests (`[listen.otlp_grpc]`,
    /// `[listen.otlp_http]`, `[listen.api]`).
    pub listen: ListenSettings,
    /// How much of one trace a view loads (`GET /api/v1/traces/{id}`, `/traces/{id}`).
    pub trace_view: TraceViewSettings,
    /// Shared storage: the object store (`[storage]`), its catalog (`[catalog]`) and this
    /// node's id (`[cluster]`); off unless both URLs are set.
    pub storage: StorageSettings,
    /// The PostgreSQL catalog of shared storage.
    pub catalog: CatalogSettings,
    /// This node among others.
    pub cluster: ClusterSettings,
    /// Where the control plane keeps its operations (`[control] postgres_url`).
    pub control: ControlSettings,
    /// The release gate (`GET /api/v1/channels/{id}/gate`): which firing alerts fail it
    /// (`[gate] fail_on`, finding types; an unknown one is refused at load).
    pub gate: dyeline_control::api::gate::GateSettings,
    /// The dashboard's default language and time zone (`[ui] default_language`,
    /// `[ui] time_zone`).
    pub ui: UiConfig,
}

/// `[trace_view]` settings: one trace view (API or page) is a page of the trace's spans.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApiSettings {
    /// Named bearer tokens (`[[api.tokens]] name = "alice", token = "…", role = "write"`).
    /// When none is configured (here or in `DYELINE_API_TOKEN`), `serve` generates one in
    /// `<data_dir>/api-token`.
    pub tokens: Vec<ApiToken>,
    /// Require a token for every read on the API port too: the API's GET routes and SQL, the
    /// dashboard's pages (a browser signs in), `/live` and `/metrics`. `/healthz`, the OpenAPI
    /// document, the static assets and `/login` stay open. Default false.
    pub read_requires_token: bool,
    /// Registry weight updates are spread over this long (per-instance delay from a hash of
    /// the instance id, domain §5). Default `10s`.
    #[serde(with = "humantime_serde")]
    pub weights_apply_spread: Duration,
    /// Throttling of failed tokens and sign-ins (`[api.throttle]`).
    pub throttle: ThrottleSettings,
}

impl Default for ApiSettings {
    fn default() -> Self {
        Self {
            tokens: Vec::new(),
            read_requires_token: false,
            weights_apply_spread: Duration::from_secs(10),
            throttle: ThrottleSettings::default(),
        }
    }
}

/// `[api.throttle]`: failed authentications (a wrong bearer token or sign-in cookie, a failed
/// sign-in) counted per client address (IPv6 per /64) and in total over a fixed window. Over
/// either limit, requests carrying a credential get 429 with `Retry-After` until the window
/// ends, without their credential being checked (counted as
/// `dyeline_auth_failures_total{reason="throttled"}`). Valid tokens are never counted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ThrottleSettings {
    /// Failures one client address may make per window. Default 20.
    pub failures_per_client: u32,
    /// Failures all clients together may make per window. Default 200.
    pub failures_total: u32,
    /// The window. Default `60s`.
    #[serde(with = "humantime_serde")]
    pub window: Duration,
}

impl Default for ThrottleSettings {
    fn default() -> Self {
        Self {
            failures_per_client: 20,
            failures_total: 200,
            window: Duration::from_secs(60),
        }
    }
}

impl ThrottleSettings {
    /// The limits of the throttle.
    pub fn limits(&self) -> dyeline_control::throttle::ThrottleLimits {
        dyeline_control::throttle::ThrottleLimits {
            per_client: self.failures_per_client,
            total: self.failures_total,
            window: self.window,
        }
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let t = self;
        if t.failures_per_client == 0 || t.failures_total < t.failures_per_client {
            return Err(ConfigError::Invalid(
                "api.throttle: failures_per_client must be positive and failures_total at least as large".into(),
            ));
        }
        if t.window < Duration::from_secs(1) || t.window > Duration::from_secs(86_400) {
            return Err(ConfigError::Invalid(
                "api.throttle.window must be 1s..=1day".into(),
            ));
        }
        Ok(())
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReceiverConfig {
    /// Largest request body after decompression. Default 16 MiB.
    #[serde(deserialize_with = "byte_size")]
    pub max_body_size: ByteSize,
}

/// Store settings (see `dyeline_store::StoreConfig`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// Merge each closed hour's files into few large ones (docs/storage.md, "Local
    /// compaction"). Default true.
    pub compaction: bool,
    /// An hour is compacted this long after it ends. Default `10m`.
    #[serde(with = "humantime_serde")]
    pub compaction_lateness: Duration,
    /// Size compacted files are cut at, about. Default 512 MiB.
    #[serde(deserialize_with = "byte_size")]
    pub compaction_target_bytes: ByteSize,
    /// Files a compaction replaced are deleted this long after it (queries that started
    /// before still read them); at least `sql.timeout`. Default `65m`.
    #[serde(with = "humantime_serde")]
    pub compaction_grace: Duration,
    /// With shared storage on: OTLP writes are refused as saturated (with Retry-After) while
    /// the local files not uploaded yet take this much or more (the bucket or catalog down).
    /// Not applied to the single-node store, whose files are the data. Default 32 GiB.
    #[serde(deserialize_with = "byte_size")]
    pub staging_max_bytes: ByteSize,
}

/// SQL endpoint limits (`POST /api/v1/sql`, `dyeline sql`). A refusal by any of them names
/// the setting and is counted in `dyeline_sql_queries_refused_total{reason}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SqlSettings {
    /// Rows returned at most. Default 10000.
    pub max_rows: usize,
    /// Cancel after. Default `30s`.
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// Memory the running queries may hold together: sorts, aggregations, join tables and the
    /// results of functions that build large values; past it a query is refused (400
    /// `memory_limit`). Nothing spills to disk. Default 1 GiB.
    #[serde(deserialize_with = "byte_size")]
    pub max_memory: ByteSize,
    /// Queries running at once; one more is refused at once (429 `too_many_queries`,
    /// `Retry-After: 1`). Default 4.
    pub max_concurrent_queries: usize,
    /// The largest value a query may build with a function (`repeat`, `lpad`, `concat`,
    /// `range`, `array_repeat`, …) or write as a literal; past it the query is refused (400
    /// `value_too_large`). Default 64 KiB.
    #[serde(deserialize_with = "byte_size")]
    pub max_value_bytes: ByteSize,
}

impl SqlSettings {
    /// The bounds of the callers' SQL session.
    pub fn bounds(&self) -> dyeline_queries::SqlBounds {
        let usize_of = |b: ByteSize| usize::try_from(b.as_u64()).unwrap_or(usize::MAX);
        dyeline_queries::SqlBounds {
            max_memory_bytes: usize_of(self.max_memory),
            max_concurrent_queries: self.max_concurrent_queries,
            max_value_bytes: usize_of(self.max_value_bytes),
        }
    }

    /// The limits of one query.
    pub fn limits(&self) -> dyeline_queries::SqlLimits {
        dyeline_queries::SqlLimits {
            max_rows: self.max_rows,
            timeout: self.timeout,
        }
    }

    /// Refuses values that would disable a limit or cannot be meant.
    fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: &str| Err(ConfigError::Invalid(format!("sql.{m}")));
        if self.max_rows == 0 {
            return bad("max_rows must be positive");
        }
        if self.timeout < Duration::from_millis(100) || self.timeout > Duration::from_secs(3600) {
            return bad("timeout must be between 100ms and 1h (0s would never cancel a query)");
        }
        if !(1..=256).contains(&self.max_concurrent_queries) {
            return bad("max_concurrent_queries must be between 1 and 256");
        }
        if self.max_memory < ByteSize::mib(16) || self.max_memory > ByteSize::tib(1) {
            return bad("max_memory must be between 16 MiB and 1 TiB");
        }
        if self.max_value_bytes < ByteSize::kib(1) || self.max_value_bytes > self.max_memory {
            return bad("max_value_bytes must be at least 1 KiB and at most sql.max_memory");
        }
        Ok(())
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            data_dir: PathBuf::from("./data"),
            otlp_grpc_addr: ([127, 0, 0, 1], 4317).into(),
            otlp_http_addr: ([127, 0, 0, 1], 4318).into(),
            api_addr: ([127, 0, 0, 1], 8080).into(),
            receiver: ReceiverConfig::default(),
            otlp: OtlpSettings::default(),
            otlp_token: None,
            store: StoreSettings::default(),
            sql: SqlSettings::default(),
            color_rules: Vec::new(),
            lane_rules: Vec::new(),
            lane_carriers: Vec::new(),
            log_format: LogFormat::Text,
            api: ApiSettings::default(),
            api_token: None,
            analyzer: AnalyzerConfig::default(),
            alerts: dyeline_queries::alerts::AlertSettings::default(),
            metrics: MetricsSettings::default(),
            listen: ListenSettings::default(),
            trace_view: TraceViewSettings::default(),
            storage: StorageSettings::default(),
            catalog: CatalogSettings::default(),
            cluster: ClusterSettings::default(),
            control: ControlSettings::default(),
            gate: dyeline_control::api::gate::GateSettings::default(),
            ui: UiConfig::default(),
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
            compaction: d.compaction,
            compaction_lateness: d.compaction_lateness,
            compaction_target_bytes: ByteSize::b(d.compaction_target_bytes),
            compaction_grace: d.compaction_grace,
            staging_max_bytes: ByteSize::gib(32),
        }
    }
}

impl Default for SqlSettings {
    fn default() -> Self {
        let d = dyeline_queries::SqlLimits::default();
        let b = dyeline_queries::SqlBounds::default();
        Self {
            max_rows: d.max_rows,
            timeout: d.timeout,
            max_memory: ByteSize::b(b.max_memory_bytes as u64),
            max_concurrent_queries: b.max_concurrent_queries,
            max_value_bytes: ByteSize::b(b.max_value_bytes as u64),
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

/// The `DYELINE_*` variables that are settings: those whose first key (before any `__`) is a
/// top-level key of [`Config`]. Others are not ours and are left alone: Kubernetes gives every
/// pod `DYELINE_PORT=tcp://…`, `DYELINE_SERVICE_HOST`, … for a Service named `dyeline`, the CLI
/// reads `DYELINE_SERVER`, the logger `DYELINE_LOG`. A wrong key inside a known section
/// (`DYELINE_SQL__TIMEOUTT`) is still refused.
fn settings_env() -> Env {
    let known = Config::top_level_keys();
    Env::prefixed("DYELINE_")
        .filter(move |key| is_setting(&known, key.as_str()))
        .split("__")
}

fn is_setting(known: &[String], key: &str) -> bool {
    let first = key.split("__").next().unwrap_or(key);
    known.iter().any(|k| k.eq_ignore_ascii_case(first))
}

/// The `DYELINE_*` variables set in this process that are not settings and were ignored (for
/// a debug line once logging is up: they are expected in Kubernetes, so not a warning).
pub fn ignored_env_vars() -> Vec<String> {
    let known = Config::top_level_keys();
    std::env::vars_os()
        .filter_map(|(k, _)| k.into_string().ok())
        .filter(|k| {
            k.strip_prefix("DYELINE_")
                .is_some_and(|rest| !is_setting(&known, rest))
        })
        .collect()
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
        Self::load_layers(defaults, file, settings_env(), overrides)
    }

    /// As [`Config::load`], with `vars` (`DYELINE_*` and others) in place of the process
    /// environment, filtered and nested as `settings_env` does: tests load a deployment's
    /// configuration with its container's variables without setting them process-wide, where
    /// concurrent tests would read them.
    #[cfg(test)]
    pub(crate) fn load_with_vars(
        file: Option<&Path>,
        vars: &[(String, String)],
    ) -> Result<Self, ConfigError> {
        let known = Config::top_level_keys();
        let mut env = Figment::new();
        for (k, v) in vars {
            let Some(rest) = k.strip_prefix("DYELINE_") else {
                continue;
            };
            if !is_setting(&known, rest) {
                continue;
            }
            let key = rest.trim().to_ascii_lowercase().replace("__", ".");
            let value: figment::value::Value = v.parse().expect("infallible");
            env = env.merge(Serialized::defaults(figment::util::nest(&key, value)));
        }
        Self::load_layers(Config::default(), file, env, Figment::new())
    }

    /// Defaults < `file` < `env` < `overrides`, then validated.
    fn load_layers(
        defaults: Config,
        file: Option<&Path>,
        env: impl figment::Provider,
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
        fig = fig.merge(env);
        let cfg: Config = fig.merge(overrides).extract().map_err(Box::new)?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// The top-level keys of the configuration, from its serialized defaults.
    fn top_level_keys() -> Vec<String> {
        use figment::Provider;
        Serialized::defaults(Config::default())
            .data()
            .map(|profiles| {
                profiles
                    .into_values()
                    .flat_map(|dict| dict.into_keys())
                    .collect()
            })
            .unwrap_or_default()
    }

    fn validate(&self) -> Result<(), ConfigError> {
        self.listen.validate(self.receiver.max_body_size)?;
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
        self.sql.validate()?;
        compaction::validate(&self.store, &self.sql)?;
        if !(1..=1_000_000).contains(&self.trace_view.max_spans) {
            return Err(ConfigError::Invalid(
                "trace_view.max_spans must be 1..=1000000".into(),
            ));
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
        let lanes = &self.analyzer.lanes;
        let day = Duration::from_secs(86_400);
        for (key, d) in [
            ("presence_window", lanes.presence_window),
            ("window", lanes.window),
        ] {
            if d < Duration::from_secs(1) || d > day {
                return Err(ConfigError::Invalid(format!(
                    "analyzer.lanes.{key} must be 1s..=1day"
                )));
            }
        }
        if self.alerts.interval < Duration::from_millis(100) {
            return Err(ConfigError::Invalid(
                "alerts.interval must be at least 100ms".into(),
            ));
        }
        // The URLs are not quoted back: a webhook's may carry a token.
        let alert_urls = self
            .alerts
            .alertmanager_url
            .iter()
            .map(|u| ("alertmanager_url".to_owned(), u))
            .chain(
                self.alerts
                    .alertmanager_urls
                    .iter()
                    .enumerate()
                    .map(|(i, u)| (format!("alertmanager_urls[{i}]"), u)),
            )
            .chain(
                self.alerts
                    .webhooks
                    .iter()
                    .enumerate()
                    .map(|(i, u)| (format!("webhooks[{i}]"), u)),
            )
            .chain(
                self.alerts
                    .robots
                    .iter()
                    .enumerate()
                    .map(|(i, r)| (format!("robots[{i}].url"), &r.url)),
            );
        for (key, u) in alert_urls {
            let ok = reqwest::Url::parse(u)
                .is_ok_and(|p| matches!(p.scheme(), "http" | "https") && p.has_host());
            if !ok {
                return Err(ConfigError::Invalid(format!(
                    "alerts.{key}: not an http:// or https:// URL"
                )));
            }
        }
        for t in &self.api.tokens {
            if t.name.trim().is_empty() {
                return Err(ConfigError::Invalid(
                    "api.tokens: every token needs a name".into(),
                ));
            }
            dyeline_control::auth::check_token_strength(
                &t.token,
                &format!("api.tokens {:?}", t.name),
            )
            .map_err(ConfigError::Invalid)?;
        }
        if let Some(Secret(token)) = &self.api_token
            && !token.trim().is_empty()
        {
            dyeline_control::auth::check_token_strength(token, "DYELINE_API_TOKEN")
                .map_err(ConfigError::Invalid)?;
        }
        self.otlp.validate(self.otlp_token.as_ref())?;
        self.api.throttle.validate()?;
        self.shared_storage()?;
        self.control.postgres_url()?;
        dyeline_model::ColorRules::with_user_rules(self.color_rules.clone())
            .map_err(|e| ConfigError::Invalid(e.to_string()))?;
        dyeline_model::LaneRules::new(&self.lane_rules)
            .map_err(|e| ConfigError::Invalid(format!("lane_rules: {e}")))?;
        dyeline_model::LaneCarriers::new(&self.lane_carriers)
            .map_err(|e| ConfigError::Invalid(format!("lane_carriers: {e}")))?;
        self.ui.settings()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
