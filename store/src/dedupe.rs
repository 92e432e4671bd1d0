//! The duplicate filter: one row per (trace_id, span_id) (domain §1: a resent span adds
//! nothing). Keys are kept per hour partition of span start time; an hour's set is loaded from
//! its Parquet files the first time a span of that hour arrives, and dropped once the hour has
//! been quiet for the filter window (its rows are in Parquet by then), so memory stays bounded by
//! the hours being written.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use arrow::array::{AsArray, BooleanArray, RecordBatch};
use arrow::datatypes::Int64Type;
use dyeline_model::schema::col;
use dyeline_model::{SpanId, SpanKey, TraceId};

use crate::files::{FileMeta, hour_of, read_keys};

struct HourSet {
    keys: HashSet<SpanKey>,
    touched: Instant,
}

/// Per-hour key sets.
pub struct Dedupe {
    hours: HashMap<i64, HourSet>,
    window: Duration,
    last_sweep: Instant,
}

/// Result of filtering one batch.
pub struct Filtered {
    /// The rows not seen before (`None` when every row was a duplicate).
    pub batch: Option<RecordBatch>,
    /// Keys newly inserted (to roll back if the write then fails).
    pub inserted: Vec<(i64, SpanKey)>,
    /// Rows dropped as duplicates.
    pub duplicates: u64,
}

impl Dedupe {
    /// An empty filter whose hour sets expire after `window` without new spans.
    pub fn new(window: Duration) -> Self {
        Self {
            hours: HashMap::new(),
            window,
            last_sweep: Instant::now(),
        }
    }

    fn hour_set(&mut self, hour: i64, files: &dyn Fn(i64) -> Vec<FileMeta>) -> &mut HourSet {
        self.hours.entry(hour).or_insert_with(|| {
            let mut keys = HashSet::new();
            for f in files(hour) {
                match read_keys(&f.path) {
                    Ok(pairs) => {
                        for (t, s) in pairs {
                            if let (Ok(trace_id), Ok(span_id)) =
                                (TraceId::from_hex(&t), SpanId::from_hex(&s))
                            {
                                keys.insert(SpanKey { trace_id, span_id });
                            }
                        }
                    }
                    Err(e) => tracing::warn!(path = %f.path.display(), error = %e, "cannot read keys for the duplicate filter"),
                }
            }
            HourSet {
                keys,
                touched: Instant::now(),
            }
        })
    }

    /// Drops rows whose key was seen before (in this batch, in memory or in Parquet).
    /// `keys[i]` is row i's key; `files(hour)` lists the Parquet files of an hour.
    ///
    /// # Errors
    /// Arrow errors (schema mismatch).
    pub fn filter(
        &mut self,
        batch: RecordBatch,
        keys: &[SpanKey],
        files: &dyn Fn(i64) -> Vec<FileMeta>,
    ) -> Result<Filtered, arrow::error::ArrowError> {
        let starts = batch
            .column_by_name(col::START_TIME_UNIX_NANO)
            .ok_or_else(|| arrow::error::ArrowError::SchemaError("no start time".into()))?
            .as_primitive::<Int64Type>()
            .clone();
        let mut keep = Vec::with_capacity(keys.len());
        let mut inserted = Vec::with_capacity(keys.len());
        let now = Instant::now();
        for (i, key) in keys.iter().enumerate() {
            let hour = hour_of(starts.value(i));
            let set = self.hour_set(hour, files);
            set.touched = now;
            let fresh = set.keys.insert(*key);
            if fresh {
                inserted.push((hour, *key));
            }
            keep.push(fresh);
        }
        let duplicates = keep.iter().filter(|k| !**k).count() as u64;
        let batch = if duplicates == 0 {
            Some(batch)
        } else if duplicates as usize == keep.len() {
            None
        } else {
            let mask = BooleanArray::from(keep);
            Some(arrow::compute::filter_record_batch(&batch, &mask)?)
        };
        Ok(Filtered {
            batch,
            inserted,
            duplicates,
        })
    }

    /// Forgets keys inserted by a write that then failed, so a retry is not taken for a
    /// duplicate.
    pub fn roll_back(&mut self, inserted: &[(i64, SpanKey)]) {
        for (hour, key) in inserted {
            if let Some(set) = self.hours.get_mut(hour) {
                set.keys.remove(key);
            }
        }
    }

    /// Drops hour sets quiet for longer than the window (checked at most once a minute).
    pub fn sweep(&mut self) {
        if self.last_sweep.elapsed() < Duration::from_secs(60) {
            return;
        }
        self.last_sweep = Instant::now();
        let window = self.window;
        self.hours.retain(|_, s| s.touched.elapsed() < window);
    }

    /// Keys held in memory (for the memory gauge).
    pub fn len(&self) -> usize {
        self.hours.values().map(|s| s.keys.len()).sum()
    }

    /// True when no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
