//! The duplicate filter: one row per span key ([`SpanKey`]: trace_id, span_id and whether the
//! span is a SERVER half, domain §1: a resent span adds nothing, and the CLIENT and SERVER
//! halves of a Zipkin/B3 shared span id are two spans). Keys are kept per hour partition of span start time, and an hour's set is dropped
//! once the hour has been quiet for the filter window (its rows are in Parquet by then), so
//! memory stays bounded by the hours being written.
//!
//! A set made while its hour already has Parquet files (a span arriving after the hour's set
//! was dropped: a long job's span, a backfill; or the first spans after a restart) does not
//! load those files' keys, which at a busy hour are tens of millions read while every write
//! waits. It keeps each such file's trace-id index (the store's own when it has one, else read
//! from the file's `trace_id` column) and their union (8 bytes per trace of the hour), and looks
//! a new key's trace up in the files whose index holds it, reading only the pages holding that
//! trace ([`read_keys_of_traces`]); the keys found join the set, and the trace is marked looked
//! up, so its later spans need no read. A trace in no file (most keys after a restart) costs one
//! search of the union. Once those lookups have read as many rows as the files hold (a capture
//! imported again looks up every trace), the files' keys are loaded whole, so a set never costs
//! more than twice a load.
//!
//! A key is held as a 16-byte [`Fingerprint`]: the span id and a 64-bit hash of the trace id
//! and the SERVER flag (seeded per process), instead of the 32 bytes a [`SpanKey`] takes in a table (its `u128`
//! is 16-byte aligned). That halves the filter's memory, about 35 MB per million keys held.
//! Two different spans share a fingerprint only when their span ids are equal and their trace
//! ids' hashes collide: for `p` pairs of held spans with equal span ids the chance of one
//! wrongly dropped span is about `p / 2⁶⁴`, and for random span ids `p` is itself about
//! `n² / 2⁶⁵`.
//!
//! A compaction ([`crate::compact`]) replaces an hour's files by others holding the same rows:
//! a lookup that finds one of its listed files gone lists the hour's files again and looks
//! the traces up there (the keys of files flushed since the set was made are in it already,
//! so listing them as unchecked again only costs a read).
//!
//! Also [`keys_of`]: the keys of a stored batch, read back from its id columns (WAL replay filters
//! its records with them).

use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{AsArray, BooleanArray, RecordBatch};
use arrow::datatypes::Int64Type;
use dyeline_model::schema::col;
use dyeline_model::{SpanId, SpanKey, TraceId};

use crate::file_read::{
    StoredKey, read_keys, read_keys_of_traces, read_rows, read_trace_index, server_rows,
};
use crate::layout::{FileMeta, hour_of};
use crate::trace_index::{TraceIndex, trace_hash};

/// A key as the filter holds it: the span id in the low 64 bits, a seeded hash of the trace
/// id and the SERVER flag in the high 64.
pub type Fingerprint = u128;

type Set = HashSet<Fingerprint, foldhash::fast::RandomState>;

struct HourSet {
    keys: Set,
    touched: Instant,
    /// Files of the hour written before the set was made, whose keys the set does not hold
    /// (module doc); empty when the hour had no file then, or once they were loaded whole.
    unchecked: Vec<(PathBuf, Arc<TraceIndex>)>,
    /// The union of the `unchecked` files' indexes: one search tells a new trace (most keys
    /// after a restart) from one a file may hold.
    unchecked_traces: TraceIndex,
    /// [`trace_hash`]es of the traces already looked up in the `unchecked` files: their keys
    /// there are in `keys`, so a new span of such a trace needs no second lookup.
    looked_up: HashSet<u64, foldhash::fast::RandomState>,
    /// Rows of the `unchecked` files.
    unchecked_rows: u64,
    /// Rows read by lookups in them so far.
    rows_read: u64,
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
        self.hours.entry(hour).or_insert_with(|| {
            let mut set = HourSet {
                keys: Set::default(),
                touched: Instant::now(),
                unchecked: Vec::new(),
                unchecked_traces: TraceIndex::default(),
                looked_up: HashSet::default(),
                unchecked_rows: 0,
                rows_read: 0,
            };
            set.list_unchecked(files(hour));
            set
        })
    }

    /// Looks `traces` (lower-case hex) up in the unchecked files of `hour` whose index holds
    /// them, adding the keys found to the hour's set; loads the files whole once lookups have
    /// read as many rows as they hold (module doc). When one of those files is gone (replaced
    /// by a compaction), lists the hour's files again (`files`) and looks up there.
    fn look_up(&mut self, hour: i64, traces: Vec<String>, files: &dyn Fn(i64) -> Vec<FileMeta>) {
        if self.look_up_listed(hour, traces.clone())
            && let Some(set) = self.hours.get_mut(&hour)
        {
            set.list_unchecked(files(hour));
            self.look_up_listed(hour, traces);
        }
    }

    /// [`Dedupe::look_up`] in the files listed; true when one of them was gone.
    fn look_up_listed(&mut self, hour: i64, mut traces: Vec<String>) -> bool {
        let Self {
            hours,
            trace_hasher,
            ..
        } = self;
        let Some(set) = hours.get_mut(&hour) else {
            return false;
        };
        let mut gone = false;
        traces.sort_unstable();
        traces.dedup();
        let mut all_read = true;
        for (path, index) in &set.unchecked {
            let wanted: Vec<String> = traces
                .iter()
                .filter(|t| index.may_contain(t))
                .cloned()
                .collect();
            if wanted.is_empty() {
                continue;
            }
            match read_keys_of_traces(path, &wanted) {
                Ok((pairs, read)) => {
                    set.rows_read += read as u64;
                    insert_pairs(&mut set.keys, trace_hasher, pairs);
                }
                Err(e) => {
                    all_read = false;
                    gone |= e.kind() == std::io::ErrorKind::NotFound;
                    tracing::warn!(path = %path.display(), error = %e, "cannot read keys for the duplicate filter");
                }
            }
        }
        // A trace is not looked up again unless a read failed (then the next span retries).
        if all_read {
            set.looked_up.extend(traces.iter().map(|t| trace_hash(t)));
        }
        if !gone && !set.unchecked.is_empty() && set.rows_read >= set.unchecked_rows {
            for (path, _) in std::mem::take(&mut set.unchecked) {
                gone |= !load_keys(&mut set.keys, trace_hasher, &path);
            }
            set.unchecked_traces = TraceIndex::default();
            set.looked_up = HashSet::default();
        }
        gone
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
        let hashed: Vec<(i64, Fingerprint)> = keys
            .iter()
            .enumerate()
            .map(|(i, key)| (hour_of(starts.value(i)), self.fingerprint(key)))
            .collect();
        // Keys of hours with files the set does not hold: look their traces up there first.
        let mut lookups: HashMap<i64, Vec<String>> = HashMap::new();
        let mut last: Option<(i64, bool)> = None;
        for (key, &(hour, fp)) in keys.iter().zip(&hashed) {
            let unchecked = match last {
                Some((h, unchecked)) if h == hour => unchecked,
                _ => {
                    let unchecked = !self.hour_set(hour, files).unchecked.is_empty();
                    last = Some((hour, unchecked));
                    unchecked
                }
            };
            if !unchecked {
                continue;
            }
            let Some(set) = self.hours.get(&hour) else {
                continue;
            };
            if set.keys.contains(&fp) {
                continue;
            }
            // The id as stored (lower-case hex), formatted on the stack.
            let mut hex = [0u8; 32];
            let Ok(()) = hex::encode_to_slice(key.trace_id.to_bytes(), &mut hex) else {
                continue;
            };
            let trace = std::str::from_utf8(&hex).unwrap_or_default();
            let hash = trace_hash(trace);
            if set.unchecked_traces.may_contain_hash(hash) && !set.looked_up.contains(&hash) {
                lookups.entry(hour).or_default().push(trace.to_owned());
            }
        }
        for (hour, traces) in lookups {
            self.look_up(hour, traces, files);
        }
        let mut keep = Vec::with_capacity(keys.len());
        let mut inserted = Vec::with_capacity(keys.len());
        let now = Instant::now();
        for &(hour, fp) in &hashed {
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

/// Adds the keys read from a file to `keys`.
fn insert_pairs(
    keys: &mut Set,
    hasher: &foldhash::fast::RandomState,
    pairs: impl IntoIterator<Item = StoredKey>,
) {
    for (t, s, server) in pairs {
        if let (Ok(trace_id), Ok(span_id)) = (TraceId::from_hex(&t), SpanId::from_hex(&s)) {
            keys.insert(fingerprint(
                hasher,
                &SpanKey {
                    trace_id,
                    span_id,
                    server,
                },
            ));
        }
    }
}

impl HourSet {
    /// Takes `files` (the hour's, listed now) as the files whose keys the set does not hold:
    /// their trace indexes, their union and their rows; no trace looked up in them yet.
    fn list_unchecked(&mut self, files: Vec<FileMeta>) {
        self.unchecked.clear();
        self.unchecked_rows = 0;
        self.rows_read = 0;
        self.looked_up.clear();
        for f in files {
            let traces = match &f.traces {
                Some(t) => Ok(Arc::clone(t)),
                None => read_trace_index(&f.path).map(Arc::new),
            };
            match traces.and_then(|t| Ok((t, read_rows(&f.path)?))) {
                Ok((traces, rows)) => {
                    self.unchecked_rows += rows;
                    self.unchecked.push((f.path, traces));
                }
                Err(e) => {
                    tracing::warn!(path = %f.path.display(), error = %e, "cannot read keys for the duplicate filter");
                }
            }
        }
        self.unchecked_traces = TraceIndex::union(self.unchecked.iter().map(|(_, t)| &**t));
    }
}

/// Adds every key of the file at `path` to `keys`; false when the file is gone (a file that
/// cannot be read is logged and passed over).
fn load_keys(keys: &mut Set, hasher: &foldhash::fast::RandomState, path: &Path) -> bool {
    match read_keys(path) {
        Ok(pairs) => insert_pairs(keys, hasher, pairs),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot read keys for the duplicate filter");
            return e.kind() != std::io::ErrorKind::NotFound;
        }
    }
    true
}

fn fingerprint(hasher: &foldhash::fast::RandomState, key: &SpanKey) -> Fingerprint {
    let trace = hasher.hash_one((key.trace_id.to_bytes(), key.server));
    (u128::from(trace) << 64) | u128::from(u64::from_be_bytes(key.span_id.to_bytes()))
}

/// Reads the keys of a stored batch back from its id and `span_kind` columns (a batch without
/// `span_kind` holds no SERVER span).
pub fn keys_of(batch: &RecordBatch) -> Vec<SpanKey> {
    let (Some(t), Some(s)) = (
        batch.column_by_name(col::TRACE_ID),
        batch.column_by_name(col::SPAN_ID),
    ) else {
        return Vec::new();
    };
    let (t, s) = (t.as_string::<i32>(), s.as_string::<i32>());
    let server = server_rows(batch);
    (0..batch.num_rows())
        .filter_map(|i| {
            Some(SpanKey {
                trace_id: TraceId::from_hex(t.value(i)).ok()?,
                span_id: SpanId::from_hex(s.value(i)).ok()?,
                server: server.get(i).copied().unwrap_or(false),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, Int64Array};
    use arrow::datatypes::{DataType, Field, Schema};

    fn key(trace: u128, span: u64) -> SpanKey {
        SpanKey {
            trace_id: TraceId::from_bytes(&trace.to_be_bytes()).unwrap(),
            span_id: SpanId::from_bytes(&span.to_be_bytes()).unwrap(),
            server: false,
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

    /// Rows of `keys` as the store holds them (ids as hex), all starting at `start`.
    fn keyed_batch(keys: &[SpanKey], start: i64) -> RecordBatch {
        crate::file_read::key_batch(
            keys.iter().map(|k| k.trace_id.to_string()),
            keys.iter().map(|k| k.span_id.to_string()),
            keys.iter().map(|_| start),
        )
        .unwrap()
    }

    fn span_ids(batch: &RecordBatch) -> Vec<String> {
        let ids = batch.column(1).as_string::<i32>();
        (0..ids.len()).map(|i| ids.value(i).to_owned()).collect()
    }

    #[test]
    fn a_set_made_after_its_hour_has_files_looks_traces_up_and_loads_them_only_when_cheaper() {
        let dir = tempfile::tempdir().unwrap();
        let hour = 3_600_000_000_000i64;
        // 40,000 spans of 8,000 traces (5 each) in one file: five pages of trace ids.
        let n = 40_000u64;
        let keys: Vec<SpanKey> = (0..n).map(|i| key(u128::from(i / 5 + 1), i + 1)).collect();
        let capture = keyed_batch(&keys, hour);
        let segment = crate::segment::Segment::plain(capture.clone());
        let mut seq = 0;
        let written =
            crate::file_write::write_segments(dir.path(), &[&segment], 0, &mut seq, 3).unwrap();
        // As found at open: no trace index yet.
        let listed: Vec<FileMeta> = written
            .into_iter()
            .map(|f| FileMeta { traces: None, ..f })
            .collect();
        let files = move |h: i64| {
            if h == hour {
                listed.clone()
            } else {
                Vec::new()
            }
        };

        let mut d = Dedupe::new(Duration::from_secs(60));
        // A resent span of trace 7 (its spans are 31..=35), a new span of that trace, a new
        // trace.
        let probe = [key(7, 31), key(7, 1_000_000), key(999_999, 1)];
        let f = d.filter(keyed_batch(&probe, hour), &probe, &files).unwrap();
        assert_eq!(f.duplicates, 1);
        assert_eq!(
            span_ids(&f.batch.unwrap()),
            [key(7, 1_000_000), key(999_999, 1)].map(|k| k.span_id.to_string())
        );
        // Only trace 7's five keys joined the set (and the two new ones), read from about one
        // page instead of the file's 40,000 rows.
        assert_eq!(d.len(), 5 + 2);
        let set = &d.hours[&hour];
        assert!(
            set.rows_read > 0 && set.rows_read <= 10_000,
            "{}",
            set.rows_read
        );
        assert_eq!(set.unchecked_rows, n);
        // Another resent span of trace 7 is known without a read, and so is a new one (the
        // trace was looked up already).
        let before = d.hours[&hour].rows_read;
        let again = [key(7, 35), key(7, 2_000_000)];
        let f = d.filter(keyed_batch(&again, hour), &again, &files).unwrap();
        assert_eq!(f.duplicates, 1);
        assert_eq!(
            span_ids(&f.batch.unwrap()),
            [key(7, 2_000_000).span_id.to_string()]
        );
        assert_eq!(d.hours[&hour].rows_read, before);
        // The whole capture again: its lookups read the file's rows, so the file is loaded
        // whole, and every span is a duplicate.
        let f = d.filter(capture, &keys, &files).unwrap();
        assert_eq!(f.duplicates, n);
        assert!(f.batch.is_none());
        assert!(d.hours[&hour].unchecked.is_empty());
        assert_eq!(d.len(), n as usize + 3);
    }

    /// Rows of `keys` with their `span_kind` (SERVER for a server key, else CLIENT), all
    /// starting at `start`.
    fn kinded_batch(keys: &[SpanKey], start: i64) -> RecordBatch {
        use arrow::array::StringArray;
        let base = keyed_batch(keys, start);
        let mut fields = base.schema().fields().to_vec();
        fields.push(Arc::new(Field::new(col::SPAN_KIND, DataType::Utf8, false)));
        let mut columns = base.columns().to_vec();
        columns.push(Arc::new(StringArray::from_iter_values(
            keys.iter()
                .map(|k| if k.server { "SERVER" } else { "CLIENT" }),
        )));
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
    }

    /// Domain §1: the CLIENT and SERVER halves of a Zipkin/B3 shared span id are two spans, in
    /// one batch, in later batches and after the filter is rebuilt from files; a resend of
    /// either half is a duplicate.
    #[test]
    fn the_halves_of_a_shared_span_id_are_two_spans_and_each_resend_a_duplicate() {
        let hour = 3_600_000_000_000i64;
        let server = |trace, span| SpanKey {
            server: true,
            ..key(trace, span)
        };
        let none = |_: i64| Vec::new();
        let mut d = Dedupe::new(Duration::from_secs(60));
        let keys = [key(1, 7), server(1, 7), server(1, 7), key(1, 7)];
        let f = d.filter(kinded_batch(&keys, hour), &keys, &none).unwrap();
        assert_eq!(f.duplicates, 2);
        assert_eq!(f.batch.unwrap().num_rows(), 2);
        assert_ne!(d.fingerprint(&key(1, 7)), d.fingerprint(&server(1, 7)));
        // keys_of reads the halves back from the span kind.
        assert_eq!(keys_of(&kinded_batch(&keys, hour)), keys);

        // In a file: a new filter looks the trace up there and tells the halves apart.
        let dir = tempfile::tempdir().unwrap();
        let stored = [key(2, 7), server(3, 7)];
        let segment = crate::segment::Segment::plain(kinded_batch(&stored, hour));
        let mut seq = 0;
        let written =
            crate::file_write::write_segments(dir.path(), &[&segment], 0, &mut seq, 3).unwrap();
        assert_eq!(
            read_keys(&written[0].path).unwrap(),
            [
                (
                    key(2, 7).trace_id.to_string(),
                    key(2, 7).span_id.to_string(),
                    false
                ),
                (
                    key(3, 7).trace_id.to_string(),
                    key(3, 7).span_id.to_string(),
                    true
                ),
            ]
        );
        let files = move |h: i64| {
            if h == hour {
                written.clone()
            } else {
                Vec::new()
            }
        };
        let mut d = Dedupe::new(Duration::from_secs(60));
        let probe = [server(2, 7), key(2, 7), key(3, 7), server(3, 7)];
        let f = d
            .filter(kinded_batch(&probe, hour), &probe, &files)
            .unwrap();
        assert_eq!(f.duplicates, 2);
        assert_eq!(keys_of(&f.batch.unwrap()), [server(2, 7), key(3, 7)]);
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
