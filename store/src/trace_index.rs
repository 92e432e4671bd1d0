//! Trace-id indexes of memory segments and Parquet files: the sorted 64-bit hashes of the
//! distinct trace ids a segment or file holds. A scan with `trace_id = '…'` (or
//! `trace_id IN (…)`) skips every segment and file whose index lacks the id's hash, so a
//! trace lookup decodes one or two segments and opens one or two files instead of all of
//! them (issue 4: trace lookup by id ≤ 20 ms).
//!
//! A hash may collide (two ids, one hash: about `n / 2⁶⁴` per lookup for `n` indexed
//! traces), which only costs a needless read: the scan still applies the filter to every
//! row. Memory: 8 bytes per distinct trace per segment or file. A segment's index lives as
//! long as the segment (until its flush); files' indexes are held within a byte budget
//! (`StoreConfig::trace_index_max_bytes`): the newest files keep theirs, an older file's is
//! dropped and a lookup then opens that file (its Parquet bloom filter and page index still
//! skip the row groups and pages without the id).

use std::hash::BuildHasher;

use arrow::array::{AsArray, RecordBatch};
use dyeline_model::schema::col;

/// Seed of the id hash. Fixed, so indexes built by different threads agree; never stored.
const SEED: u64 = 0x6479_656c_696e_6521;

/// The 64-bit hash of a trace id as stored (32 lower-case hex digits).
pub fn trace_hash(trace_id: &str) -> u64 {
    foldhash::fast::FixedState::with_seed(SEED).hash_one(trace_id.as_bytes())
}

/// The distinct trace ids of a segment or file, as sorted hashes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TraceIndex {
    hashes: Box<[u64]>,
}

impl TraceIndex {
    /// The index of these ids (any order, repeats allowed).
    pub fn from_ids<'a>(ids: impl IntoIterator<Item = &'a str>) -> Self {
        Self::from_hashes(ids.into_iter().map(trace_hash).collect())
    }

    /// The index of these [`trace_hash`]es (any order, repeats allowed).
    pub fn from_hashes(mut hashes: Vec<u64>) -> Self {
        hashes.sort_unstable();
        hashes.dedup();
        Self {
            hashes: hashes.into_boxed_slice(),
        }
    }

    /// The index of every id of `indexes`.
    pub fn union<'a>(indexes: impl IntoIterator<Item = &'a TraceIndex>) -> Self {
        Self::from_hashes(
            indexes
                .into_iter()
                .flat_map(|ix| ix.hashes.iter().copied())
                .collect(),
        )
    }

    /// The index of the `trace_id` column of `batch` (a `spans` batch); `None` when the batch
    /// has no string column `trace_id` (then nothing can be skipped).
    pub fn of_batch(batch: &RecordBatch) -> Option<Self> {
        let ids = batch
            .column_by_name(col::TRACE_ID)?
            .as_string_opt::<i32>()?;
        Some(Self::from_ids(ids.iter().flatten()))
    }

    /// False only when no id of the index is `trace_id` (exact string, as stored).
    pub fn may_contain(&self, trace_id: &str) -> bool {
        self.may_contain_hash(trace_hash(trace_id))
    }

    /// [`TraceIndex::may_contain`] of an id's [`trace_hash`].
    pub fn may_contain_hash(&self, hash: u64) -> bool {
        self.hashes.binary_search(&hash).is_ok()
    }

    /// Distinct hashes held.
    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    /// No id indexed.
    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    /// Heap bytes the index holds: 8 per distinct id.
    pub fn bytes(&self) -> usize {
        std::mem::size_of_val(&*self.hashes)
    }

    /// The index as kept beside an object in shared storage: [`ENCODED_HEADER`], then each
    /// hash as 8 little-endian bytes, ascending.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(ENCODED_HEADER.len() + self.bytes());
        out.extend_from_slice(ENCODED_HEADER);
        for h in &self.hashes {
            out.extend_from_slice(&h.to_le_bytes());
        }
        out
    }

    /// Reads [`TraceIndex::encode`]'s bytes; `None` for anything else (another header, a
    /// length that is not a whole number of hashes, hashes out of order).
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let body = bytes.strip_prefix(ENCODED_HEADER)?;
        if body.len() % 8 != 0 {
            return None;
        }
        let hashes: Vec<u64> = body
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
            .collect();
        if hashes.windows(2).any(|w| w[0] >= w[1]) {
            return None;
        }
        Some(Self {
            hashes: hashes.into_boxed_slice(),
        })
    }
}

/// The first bytes of an encoded [`TraceIndex`] (its format and version).
pub const ENCODED_HEADER: &[u8] = b"dyeline-trace-index 1\n";

/// True when `index` (if any) may hold one of `ids` (if any): `None` for either means "may".
pub fn may_hold_any(index: Option<&TraceIndex>, ids: Option<&[String]>) -> bool {
    match (index, ids) {
        (Some(ix), Some(ids)) => ids.iter().any(|id| ix.may_contain(id)),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Every id put in is found; an id not put in is (with overwhelming probability)
        /// not found: a wrong hash, sort or search would fail one side.
        #[test]
        fn finds_exactly_the_ids_put_in(ids in proptest::collection::vec("[0-9a-f]{32}", 0..200),
                                        probe in "[0-9a-f]{32}") {
            let ix = TraceIndex::from_ids(ids.iter().map(String::as_str));
            for id in &ids {
                prop_assert!(ix.may_contain(id));
            }
            prop_assert_eq!(ix.may_contain(&probe), ids.contains(&probe));
            let mut distinct = ids.clone();
            distinct.sort();
            distinct.dedup();
            prop_assert_eq!(ix.len(), distinct.len());
        }
    }

    #[test]
    fn a_union_holds_every_id_of_its_parts_once() {
        let u = TraceIndex::union([
            &TraceIndex::from_ids(["a", "b"]),
            &TraceIndex::from_ids(["b", "c"]),
        ]);
        assert_eq!(u, TraceIndex::from_ids(["a", "b", "c"]));
        assert!(!u.may_contain("d"));
    }

    #[test]
    fn an_encoded_index_decodes_to_itself_and_damage_is_refused() {
        let ix = TraceIndex::from_ids(["a", "b", "c"]);
        let bytes = ix.encode();
        assert_eq!(bytes.len(), ENCODED_HEADER.len() + 24);
        assert_eq!(TraceIndex::decode(&bytes), Some(ix.clone()));
        assert_eq!(TraceIndex::decode(&bytes[..bytes.len() - 1]), None);
        assert_eq!(TraceIndex::decode(&bytes[1..]), None);
        let mut swapped = bytes.clone();
        let h = ENCODED_HEADER.len();
        swapped[h..h + 16].rotate_left(8);
        assert_eq!(TraceIndex::decode(&swapped), None);
        assert_eq!(
            TraceIndex::decode(&TraceIndex::default().encode()),
            Some(TraceIndex::default())
        );
    }

    #[test]
    fn bytes_are_eight_per_distinct_id() {
        assert_eq!(TraceIndex::from_ids(["a", "b", "a"]).bytes(), 16);
        assert_eq!(TraceIndex::default().bytes(), 0);
    }

    #[test]
    fn none_means_may() {
        let ix = TraceIndex::from_ids(["a", "b"]);
        let ids = vec!["c".to_owned()];
        assert!(!may_hold_any(Some(&ix), Some(&ids)));
        assert!(may_hold_any(None, Some(&ids)));
        assert!(may_hold_any(Some(&ix), None));
        let ids = vec!["c".to_owned(), "b".to_owned()];
        assert!(may_hold_any(Some(&ix), Some(&ids)));
    }
}
