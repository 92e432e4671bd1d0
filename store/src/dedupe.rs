//! The duplicate filter: one row per (trace_id, span_id) (domain §1: a resent span adds
//! nothing). Keys are kept per hour partition of span start time; an hour's set is loaded from
//! its Parquet files the first time a span of that hour arrives, and dropped once the hour has
//! been quiet for the filter window (its rows are in Parquet by then), so memory stays bounded by
//! the hours being written.
//!
//! A key is held as a 16-byte [`Fingerprint`]: the span id and a 64-bit hash of the trace id
//! (seeded per process), instead of the 32 bytes a [`SpanKey`] takes in a table (its `u128`
//! is 16-byte aligned). That halves the filter's memory, about 35 MB per million keys held.
//! Two different spans share a fingerprint only when their span ids are equal and their trace
//! ids' hashes collide: for `p` pairs of held spans with equal span ids the chance of one
//! wrongly dropped span is about `p / 2⁶⁴`, and for random span ids `p` is itself about
//! `n² / 2⁶⁵`.

use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;
use std::time::{Duration, Instant};

use arrow::array::{AsArray, BooleanArray, RecordBatch};
use arrow::datatypes::Int64Type;
use dyeline_model::schema::col;
use dyeline_model::{SpanId, SpanKey, TraceId};

use crate::files::{FileMeta, hour_of, read_keys};

/// A key as the filter holds it: the span id in the low 64 bits, a seeded hash of the trace
/// id in the high 64.
pub type Fingerprint = u128;

type Set = HashSet<Fingerprint, foldhash::fast::RandomState>;

struct HourSet {
    keys: Set,
    touched: Instant,
}

/// Per-hour key sets.
pub struct Dedupe {
    hours: HashMap<i64, HourSet>,
    window: Duration,
    last_sweep: Instant,
    trace_hasher: foldhash::fast::RandomState,
}

/// Result of filtering one batch.
pub struct Filtered {
    /// The rows not seen before (`None` when every row was a duplicate).
    pub batch: Option<RecordBatch>,
    /// Keys newly inserted, with their hour (to roll back if the write then fails).
    pub inserted: Vec<(i64, Fingerprint)>,
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
            trace_hasher: foldhash::fast::RandomState::default(),
        }
    }

    /// The fingerprint of `key` (this filter's seed).
    pub fn fingerprint(&self, key: &SpanKey) -> Fingerprint {
        fingerprint(&self.trace_hasher, key)
    }

    fn hour_set(&mut self, hour: i64, files: &dyn Fn(i64) -> Vec<FileMeta>) -> &mut HourSet {
        let hasher = &self.trace_hasher;
        self.hours.entry(hour).or_insert_with(|| {
            let mut keys = Set::default();
            for f in files(hour) {
                match read_keys(&f.path) {
                    Ok(pairs) => {
                        for (t, s) in pairs {
                            if let (Ok(trace_id), Ok(span_id)) =
                                (TraceId::from_hex(&t), SpanId::from_hex(&s))
                            {
                                keys.insert(fingerprint(
                                    hasher,
                                    &SpanKey { trace_id, span_id },
                                ));
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
            let fp = self.fingerprint(key);
            let set = self.hour_set(hour, files);
            set.touched = now;
            let fresh = set.keys.insert(fp);
            if fresh {
                inserted.push((hour, fp));
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
    pub fn roll_back(&mut self, inserted: &[(i64, Fingerprint)]) {
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

fn fingerprint(hasher: &foldhash::fast::RandomState, key: &SpanKey) -> Fingerprint {
    let trace = hasher.hash_one(key.trace_id.to_bytes());
    (u128::from(trace) << 64) | u128::from(u64::from_be_bytes(key.span_id.to_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Int64Array;
    use arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

    fn key(trace: u128, span: u64) -> SpanKey {
        SpanKey {
            trace_id: TraceId::from_bytes(&trace.to_be_bytes()).unwrap(),
            span_id: SpanId::from_bytes(&span.to_be_bytes()).unwrap(),
        }
    }

    fn batch(starts: &[i64]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new(
            col::START_TIME_UNIX_NANO,
            DataType::Int64,
            false,
        )]));
        RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(starts.to_vec()))]).unwrap()
    }

    #[test]
    fn fingerprints_keep_the_span_id_and_tell_traces_apart() {
        let d = Dedupe::new(Duration::from_secs(60));
        let a = d.fingerprint(&key(1, 7));
        assert_eq!(a as u64, 7, "the low half is the span id");
        assert_eq!(a, d.fingerprint(&key(1, 7)));
        // Same span id in other traces, ids that differ only in their high or low half.
        for other in [2u128, 1 << 64, (1 << 64) | 1, u128::MAX] {
            assert_ne!(a, d.fingerprint(&key(other, 7)), "trace {other:x}");
        }
        assert_ne!(a, d.fingerprint(&key(1, 8)));
    }

    #[test]
    fn a_resent_key_is_dropped_in_the_batch_and_later_and_a_rolled_back_one_is_not() {
        let mut d = Dedupe::new(Duration::from_secs(60));
        let none = |_: i64| Vec::new();
        let hour = 3_600_000_000_000i64;
        // Row 2 repeats row 0 inside the batch.
        let keys = [key(1, 1), key(1, 2), key(1, 1)];
        let f = d
            .filter(batch(&[hour, hour + 1, hour]), &keys, &none)
            .unwrap();
        assert_eq!(f.duplicates, 1);
        assert_eq!(f.batch.unwrap().num_rows(), 2);
        assert_eq!(f.inserted.len(), 2);
        assert_eq!(d.len(), 2);
        // A later batch: one old key (dropped), one new key in the next hour.
        let keys = [key(1, 2), key(9, 2)];
        let f = d
            .filter(batch(&[hour + 1, 2 * hour]), &keys, &none)
            .unwrap();
        assert_eq!(f.duplicates, 1);
        let kept = f.batch.unwrap();
        assert_eq!(
            kept.column(0).as_primitive::<Int64Type>().values().to_vec(),
            vec![2 * hour]
        );
        // The write of that new key fails: after the roll back its retry is fresh.
        d.roll_back(&f.inserted);
        let f = d.filter(batch(&[2 * hour]), &[key(9, 2)], &none).unwrap();
        assert_eq!(f.duplicates, 0);
        assert_eq!(d.len(), 3);
        // Every row a duplicate: no batch.
        let f = d.filter(batch(&[2 * hour]), &[key(9, 2)], &none).unwrap();
        assert!(f.batch.is_none());
        assert_eq!(f.duplicates, 1);
    }
}
