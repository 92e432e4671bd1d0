//! The dashboard's query-result cache: one load and report of a range (a [`Snapshot`])
//! serves every span-derived panel of a page ([`super`]); the live parts (channel state,
//! operations, alerts, weights in force) are read fresh by the server on every request, so a
//! write shows at once.
//!
//! A snapshot is made at a data version ([`SnapshotInputs::data_version`]: rows written,
//! newest control op, alert changes). When the data has moved on, a request is answered from
//! the newest snapshot of the same range, or of a range of the same length ending at most
//! [`MAX_LAG_NS`] earlier (a live range moves every second), while a fresh snapshot is
//! computed in the background (one at a time); pages say up to when their spans were
//! analysed. Only a range never seen before is computed while the request waits, and that
//! reads through the analyzer's per-file cache ([`crate::analyze::read::files`]): only the
//! files not read before and the memory segments are scanned.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};

use dyeline_model::release::Timeline;
use dyeline_store::table::SpansTable;
use parking_lot::Mutex;

use super::{ChannelParts, OverviewParts, TimeRange, channel_parts, overview_parts};
use crate::analyze::read::files::{SpanCache, load_cached};
use crate::analyze::spans::Spans;
use crate::analyze::{AnalyzerConfig, Report, report};
use crate::sql::SqlError;

/// How far (ns) the end of a served snapshot's range may lag the requested end for a range of
/// the same length (5 s).
pub const MAX_LAG_NS: i64 = 5_000_000_000;
/// Snapshots kept (the most recently made).
const KEEP: usize = 8;

/// What a snapshot is made from, read when it is made: the data version and the release
/// timeline now (the server's wiring gives them from the store and the control plane).
pub trait SnapshotInputs: Send + Sync + 'static {
    /// The version of everything a snapshot shows (changes when any of it may have).
    fn data_version(&self) -> u64;
    /// The release timeline now.
    fn timeline(&self) -> Timeline;
}

/// One load and report of a range at a data version, with its panels computed on demand.
pub struct Snapshot {
    /// The range analysed.
    pub range: TimeRange,
    version: u64,
    /// Its spans.
    pub spans: Spans,
    /// Start of the first span, Unix ns (rates divide from here).
    pub first_start: Option<i64>,
    /// Their report (every detection).
    pub report: Report,
    timeline: Timeline,
    overview: OnceLock<OverviewParts>,
    channels: Mutex<HashMap<String, Arc<ChannelParts>>>,
}

/// The snapshots of the ranges asked for lately (see the module docs).
pub struct Snapshots {
    inputs: Arc<dyn SnapshotInputs>,
    analyzer: AnalyzerConfig,
    table: Arc<SpansTable>,
    cache: Arc<SpanCache>,
    snapshots: Mutex<Vec<Arc<Snapshot>>>,
    /// A background analysis is running.
    refreshing: AtomicBool,
}

impl Snapshots {
    /// No snapshot yet, of `table` (read through a [`SpanCache`] of its files) judged with
    /// `analyzer`.
    pub fn new(
        inputs: Arc<dyn SnapshotInputs>,
        analyzer: AnalyzerConfig,
        table: Arc<SpansTable>,
    ) -> Self {
        Self {
            inputs,
            analyzer,
            table,
            cache: Arc::new(SpanCache::default()),
            snapshots: Mutex::new(Vec::new()),
            refreshing: AtomicBool::new(false),
        }
    }

    /// Makes (and keeps) the snapshot of `range` now, whatever is kept.
    ///
    /// # Errors
    /// The spans cannot be read.
    pub async fn make(&self, range: TimeRange) -> Result<Arc<Snapshot>, SqlError> {
        let version = self.inputs.data_version();
        let started = std::time::Instant::now();
        let timeline = self.inputs.timeline();
        let mut spans = load_cached(
            &self.table,
            &self.cache,
            &timeline,
            Some(range.from_unix_nano),
            Some(range.to_unix_nano),
        )
        .await
        .map_err(SqlError::from)?;
        let w = i64::try_from(self.analyzer.lanes.presence_window.as_nanos()).unwrap_or(i64::MAX);
        crate::analyze::read::presence::attach(
            &mut spans,
            &self.table,
            Some(range.from_unix_nano),
            Some(range.to_unix_nano),
            w,
        )
        .map_err(SqlError::from)?;
        let report = report(&spans, &self.analyzer, false);
        let first_start = spans.iter().map(|s| s.start).min();
        let snap = Arc::new(Snapshot {
            range,
            version,
            first_start,
            spans,
            report,
            timeline,
            overview: OnceLock::new(),
            channels: Mutex::new(HashMap::new()),
        });
        tracing::debug!(
            spans = snap.spans.len(),
            seconds = started.elapsed().as_secs_f64(),
            "dashboard snapshot"
        );
        let mut all = self.snapshots.lock();
        all.retain(|s| s.range != range);
        all.push(Arc::clone(&snap));
        if all.len() > KEEP {
            all.remove(0);
        }
        Ok(snap)
    }

    fn refresh_later(self: &Arc<Self>, range: TimeRange) {
        // One background analysis at a time, whatever the range: a live range moves every
        // second, and analyses that overlap would only compete for the same cores.
        use std::sync::atomic::Ordering;
        if self.refreshing.swap(true, Ordering::AcqRel) {
            return;
        }
        let me = Arc::clone(self);
        tokio::spawn(async move {
            if let Err(e) = me.make(range).await {
                tracing::warn!(error = %e, "dashboard snapshot failed");
            }
            me.refreshing.store(false, Ordering::Release);
        });
    }

    /// The snapshot serving `range` (see the module docs).
    ///
    /// # Errors
    /// A snapshot had to be made and the spans cannot be read.
    pub async fn snapshot(self: &Arc<Self>, range: TimeRange) -> Result<Arc<Snapshot>, SqlError> {
        let version = self.inputs.data_version();
        let len = range.to_unix_nano - range.from_unix_nano;
        let best = {
            let all = self.snapshots.lock();
            all.iter()
                .filter(|s| {
                    s.range == range
                        || (s.range.to_unix_nano - s.range.from_unix_nano == len
                            && s.range.to_unix_nano <= range.to_unix_nano
                            && range.to_unix_nano - s.range.to_unix_nano <= MAX_LAG_NS)
                })
                .max_by_key(|s| (s.range == range, s.range.to_unix_nano, s.version))
                .cloned()
        };
        match best {
            Some(s) if s.range == range && s.version == version => Ok(s),
            Some(s) => {
                self.refresh_later(range);
                Ok(s)
            }
            None => self.make(range).await,
        }
    }
}

impl Snapshot {
    /// The overview's parts, computed at the first call.
    pub fn overview(&self) -> &OverviewParts {
        self.overview.get_or_init(|| {
            let started = std::time::Instant::now();
            let parts = overview_parts(&self.spans, &self.report, self.range);
            tracing::debug!(
                ms = started.elapsed().as_secs_f64() * 1e3,
                "dashboard overview parts"
            );
            parts
        })
    }

    /// Channel `id`'s parts in steps of `step_ns`, computed at the first call for `id`.
    ///
    /// # Errors
    /// [`SqlError::Syntax`] for a range with too many steps.
    pub fn channel(
        &self,
        id: &str,
        analyzer: &AnalyzerConfig,
        step_ns: i64,
    ) -> Result<Arc<ChannelParts>, SqlError> {
        if let Some(p) = self.channels.lock().get(id) {
            return Ok(Arc::clone(p));
        }
        let started = std::time::Instant::now();
        let p = Arc::new(channel_parts(
            &self.spans,
            &self.report,
            &self.timeline,
            analyzer,
            id,
            self.range,
            step_ns,
        )?);
        tracing::debug!(
            channel = id,
            ms = started.elapsed().as_secs_f64() * 1e3,
            "dashboard channel parts"
        );
        self.channels.lock().insert(id.to_owned(), Arc::clone(&p));
        Ok(p)
    }
}
