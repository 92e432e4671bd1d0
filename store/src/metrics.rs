//! The store's own metrics ([`StoreMetrics`]): each `dyeline_store_*` name, help text and
//! histogram bucket, registered by [`StoreMetrics::register`].

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// The store's own metrics.
#[derive(Debug, Clone)]
pub struct StoreMetrics {
    /// `dyeline_store_wal_bytes_total`.
    pub wal_bytes: Counter,
    /// `dyeline_store_rows_written_total`.
    pub rows_written: Counter,
    /// `dyeline_store_duplicate_rows_total`.
    pub duplicate_rows: Counter,
    /// `dyeline_store_flush_seconds`.
    pub flush_seconds: Histogram,
    /// `dyeline_store_memory_rows`.
    pub memory_rows: Gauge,
    /// `dyeline_store_memory_bytes`: bytes the rows held in memory take
    /// ([`Segment::memory_bytes`]: plain Arrow buffers as allocated, sealed Parquet bytes).
    ///
    /// [`Segment::memory_bytes`]: crate::segment::Segment::memory_bytes
    pub memory_bytes: Gauge,
    /// `dyeline_store_duplicate_filter_keys`: span keys the duplicate filter holds
    /// ([`dedupe`]: every key of each hour partition being written, 16 bytes each in a hash
    /// table, about 19–39 bytes with its overhead); set by the writer thread every loop
    /// (at most 250 ms apart).
    ///
    /// [`dedupe`]: crate::dedupe
    pub duplicate_filter_keys: Gauge,
    /// `dyeline_store_parquet_files`.
    pub parquet_files: Gauge,
    /// `dyeline_store_trace_index_bytes`: bytes of the Parquet files' trace indexes held
    /// (at most [`StoreConfig::trace_index_max_bytes`]).
    ///
    /// [`StoreConfig::trace_index_max_bytes`]: crate::StoreConfig::trace_index_max_bytes
    pub trace_index_bytes: Gauge,
    /// `dyeline_store_parquet_bytes`.
    pub parquet_bytes: Gauge,
    /// `dyeline_store_wal_replayed_rows_total`.
    pub wal_replayed_rows: Counter,
    /// `dyeline_store_wal_torn_tails_total`.
    pub wal_torn_tails: Counter,
    /// `dyeline_store_flush_errors_total` (span and presence flushes).
    pub flush_errors: Counter,
    /// `dyeline_store_presence_rows_written_total`: presence rows stored ([`crate::presence`]).
    pub presence_rows_written: Counter,
    /// `dyeline_store_presence_duplicate_rows_total`: presence rows dropped as sent again.
    pub presence_duplicate_rows: Counter,
    /// `dyeline_store_presence_memory_rows`: presence rows not yet in files.
    pub presence_memory_rows: Gauge,
    /// `dyeline_store_presence_replayed_rows_total`: presence rows recovered from the WAL.
    pub presence_replayed_rows: Counter,
    /// `dyeline_store_compactions_total`: hours compacted ([`crate::compact`]).
    pub compactions: Counter,
    /// `dyeline_store_compaction_failures_total`: hour compactions that failed (the files
    /// stay as they were; tried again at the next pass).
    pub compaction_failures: Counter,
    /// `dyeline_store_compaction_input_files_total`: files merged by compactions.
    pub compaction_input_files: Counter,
    /// `dyeline_store_compaction_output_files_total`: files compactions wrote.
    pub compaction_output_files: Counter,
    /// `dyeline_store_compaction_input_bytes_total`: bytes of the files merged.
    pub compaction_input_bytes: Counter,
    /// `dyeline_store_compaction_output_bytes_total`: bytes of the files written.
    pub compaction_output_bytes: Counter,
    /// `dyeline_store_compaction_duplicate_rows_total`: rows compactions dropped as
    /// duplicates of a span key.
    pub compaction_duplicate_rows: Counter,
    /// `dyeline_store_compaction_seconds`: time to compact one hour.
    pub compaction_seconds: Histogram,
}

impl Default for StoreMetrics {
    fn default() -> Self {
        Self {
            wal_bytes: Counter::default(),
            rows_written: Counter::default(),
            duplicate_rows: Counter::default(),
            flush_seconds: Histogram::new([0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0]),
            memory_rows: Gauge::default(),
            memory_bytes: Gauge::default(),
            duplicate_filter_keys: Gauge::default(),
            parquet_files: Gauge::default(),
            trace_index_bytes: Gauge::default(),
            parquet_bytes: Gauge::default(),
            wal_replayed_rows: Counter::default(),
            wal_torn_tails: Counter::default(),
            flush_errors: Counter::default(),
            presence_rows_written: Counter::default(),
            presence_duplicate_rows: Counter::default(),
            presence_memory_rows: Gauge::default(),
            presence_replayed_rows: Counter::default(),
            compactions: Counter::default(),
            compaction_failures: Counter::default(),
            compaction_input_files: Counter::default(),
            compaction_output_files: Counter::default(),
            compaction_input_bytes: Counter::default(),
            compaction_output_bytes: Counter::default(),
            compaction_duplicate_rows: Counter::default(),
            compaction_seconds: Histogram::new([
                0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
            ]),
        }
    }
}

impl StoreMetrics {
    /// Registers every metric.
    pub fn register(&self, r: &mut Registry) {
        r.register(
            "dyeline_store_wal_bytes",
            "Bytes appended to the WAL",
            self.wal_bytes.clone(),
        );
        r.register(
            "dyeline_store_rows_written",
            "Rows stored",
            self.rows_written.clone(),
        );
        r.register(
            "dyeline_store_duplicate_rows",
            "Rows dropped as already stored",
            self.duplicate_rows.clone(),
        );
        r.register(
            "dyeline_store_flush_seconds",
            "Time to flush memory to Parquet",
            self.flush_seconds.clone(),
        );
        r.register(
            "dyeline_store_memory_rows",
            "Rows held in memory",
            self.memory_rows.clone(),
        );
        r.register(
            "dyeline_store_memory_bytes",
            "Bytes the rows held in memory take (plain Arrow buffers, sealed Parquet)",
            self.memory_bytes.clone(),
        );
        r.register(
            "dyeline_store_duplicate_filter_keys",
            "Span keys held by the duplicate filter (every span of the hours being written)",
            self.duplicate_filter_keys.clone(),
        );
        r.register(
            "dyeline_store_parquet_files",
            "Parquet files",
            self.parquet_files.clone(),
        );
        r.register(
            "dyeline_store_trace_index_bytes",
            "Bytes of the Parquet files' trace-id indexes held in memory",
            self.trace_index_bytes.clone(),
        );
        r.register(
            "dyeline_store_parquet_bytes",
            "Bytes in Parquet files",
            self.parquet_bytes.clone(),
        );
        r.register(
            "dyeline_store_wal_replayed_rows",
            "Rows recovered from the WAL at start",
            self.wal_replayed_rows.clone(),
        );
        r.register(
            "dyeline_store_wal_torn_tails",
            "WAL segments that ended in a torn record",
            self.wal_torn_tails.clone(),
        );
        r.register(
            "dyeline_store_flush_errors",
            "Failed flushes (retried)",
            self.flush_errors.clone(),
        );
        r.register(
            "dyeline_store_presence_rows_written",
            "Presence rows stored (one per instance and signal time of a metrics or logs export)",
            self.presence_rows_written.clone(),
        );
        r.register(
            "dyeline_store_presence_duplicate_rows",
            "Presence rows dropped as sent again",
            self.presence_duplicate_rows.clone(),
        );
        r.register(
            "dyeline_store_presence_memory_rows",
            "Presence rows not yet in Parquet files",
            self.presence_memory_rows.clone(),
        );
        r.register(
            "dyeline_store_presence_replayed_rows",
            "Presence rows recovered from the WAL at start",
            self.presence_replayed_rows.clone(),
        );
        for (name, help, counter) in [
            (
                "dyeline_store_compactions",
                "Hours whose files were compacted",
                &self.compactions,
            ),
            (
                "dyeline_store_compaction_failures",
                "Hour compactions that failed (the files stay; tried again)",
                &self.compaction_failures,
            ),
            (
                "dyeline_store_compaction_input_files",
                "Files merged by compactions",
                &self.compaction_input_files,
            ),
            (
                "dyeline_store_compaction_output_files",
                "Files written by compactions",
                &self.compaction_output_files,
            ),
            (
                "dyeline_store_compaction_input_bytes",
                "Bytes of the files merged by compactions",
                &self.compaction_input_bytes,
            ),
            (
                "dyeline_store_compaction_output_bytes",
                "Bytes of the files written by compactions",
                &self.compaction_output_bytes,
            ),
            (
                "dyeline_store_compaction_duplicate_rows",
                "Rows compactions dropped as duplicates of a span key",
                &self.compaction_duplicate_rows,
            ),
        ] {
            r.register(name, help, counter.clone());
        }
        r.register(
            "dyeline_store_compaction_seconds",
            "Time to compact one hour's files",
            self.compaction_seconds.clone(),
        );
    }
}
