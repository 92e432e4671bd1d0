//! In-memory segments: a batch of `spans` rows held as one zstd-compressed Arrow IPC stream,
//! with its row count and start-time range. The same bytes are the WAL record, so a write is
//! encoded once (by the caller, off the writer thread) and memory holds a few tens of bytes per
//! span instead of the uncompressed Arrow buffers. Scans decode segments one at a time. Each
//! segment keeps the [`TraceIndex`] of its rows, so a trace lookup decodes only the segments
//! holding the trace.
//!
//! A segment may also hold its rows uncompressed ([`Segment::into_plain`]): the store keeps small
//! writes that way until it has enough of them to encode together, because an IPC stream
//! costs several KB whatever its rows (its schema message, its batch header, and each of about
//! a hundred buffers padded to 64 bytes).

use std::cell::RefCell;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use arrow::ipc::reader::StreamReader;
use arrow::ipc::writer::{
    DictionaryTracker, IpcDataGenerator, IpcWriteContext, IpcWriteOptions, write_message,
};
use arrow::ipc::{CompressionType, MetadataVersion};
use bytes::Bytes;

use crate::files::start_range;
use crate::trace_index::TraceIndex;

/// One batch of rows: compressed, or plain (see the module doc).
#[derive(Clone, Debug)]
pub struct Segment {
    body: Body,
    rows: usize,
    start_range: Option<(i64, i64)>,
    traces: Option<Arc<TraceIndex>>,
}

impl Segment {
    /// Encodes `batch` (zstd-compressed Arrow IPC stream).
    ///
    /// # Errors
    /// Arrow IPC errors.
    pub fn encode(batch: &RecordBatch) -> Result<Self, ArrowError> {
        let buf = ENCODER.with_borrow_mut(|e| e.stream(batch))?;
        Ok(Self {
            body: Body::Ipc(Bytes::from(buf)),
            rows: batch.num_rows(),
            start_range: start_range(batch),
            traces: TraceIndex::of_batch(batch).map(Arc::new),
        })
    }

    /// A segment from IPC bytes written by [`Segment::encode`] (WAL replay) and the batch they
    /// hold (already decoded by the caller).
    pub fn from_parts(ipc: Bytes, batch: &RecordBatch) -> Self {
        Self {
            body: Body::Ipc(ipc),
            rows: batch.num_rows(),
            start_range: start_range(batch),
            traces: TraceIndex::of_batch(batch).map(Arc::new),
        }
    }

    /// The same rows held uncompressed: `batch` is the batch this segment was encoded from
    /// (no copy: its buffers are shared). The trace index and time range already computed are
    /// kept. A batch of another row count is not this segment's: the segment is returned as it
    /// is.
    pub fn into_plain(self, batch: RecordBatch) -> Self {
        if batch.num_rows() != self.rows {
            return self;
        }
        Self {
            body: Body::Plain(batch),
            ..self
        }
    }

    /// True when the rows are held uncompressed ([`Segment::into_plain`]).
    pub fn is_plain(&self) -> bool {
        matches!(self.body, Body::Plain(_))
    }

    /// Decodes the rows.
    ///
    /// # Errors
    /// Arrow IPC errors (corrupt bytes).
    pub fn decode(&self) -> Result<RecordBatch, ArrowError> {
        match &self.body {
            Body::Ipc(ipc) => decode(ipc),
            Body::Plain(batch) => Ok(batch.clone()),
        }
    }

    /// Decodes only the columns at `projection` (schema order of the result follows
    /// `projection`); the other columns' buffers are skipped, not decompressed.
    ///
    /// # Errors
    /// Arrow IPC errors (corrupt bytes, an index out of the schema).
    pub fn decode_columns(&self, projection: &[usize]) -> Result<RecordBatch, ArrowError> {
        match &self.body {
            Body::Ipc(ipc) => decode_projected(ipc, Some(projection.to_vec())),
            Body::Plain(batch) => batch.project(projection),
        }
    }

    /// The schema of the rows (read from the stream's first message, no row decoded).
    ///
    /// # Errors
    /// Arrow IPC errors (corrupt bytes).
    pub fn schema(&self) -> Result<arrow::datatypes::SchemaRef, ArrowError> {
        match &self.body {
            Body::Ipc(ipc) => Ok(StreamReader::try_new(&ipc[..], None)?.schema()),
            Body::Plain(batch) => Ok(batch.schema()),
        }
    }

    /// The encoded bytes (the WAL record payload); `None` for a plain segment.
    pub fn bytes(&self) -> Option<&[u8]> {
        match &self.body {
            Body::Ipc(ipc) => Some(ipc),
            Body::Plain(_) => None,
        }
    }

    /// Rows held.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Min and max `start_time_unix_nano` (`None` when empty).
    pub fn start_range(&self) -> Option<(i64, i64)> {
        self.start_range
    }

    /// The trace ids held (`None` when the batch had no `trace_id` string column).
    pub fn traces(&self) -> Option<&TraceIndex> {
        self.traces.as_deref()
    }
}

/// Buffer alignment of the IPC messages (arrow's default, as `StreamWriter` writes).
const ALIGNMENT: usize = 64;

/// zstd level of segment buffers. Level 1 (zstd's "fast" strategy) instead of arrow's
/// default 3: a request's buffers are small (about a thousand rows), where level 3 spent a
/// fifth of the receiving threads' time and compressed no better (measured on loadgen
/// requests: 101.6 against 102.3 bytes per span).
const ZSTD_LEVEL: i32 = 1;

/// The IPC options of segments: V5, 64-byte alignment, zstd at [`ZSTD_LEVEL`].
fn ipc_options() -> Result<IpcWriteOptions, ArrowError> {
    IpcWriteOptions::try_new(ALIGNMENT, false, MetadataVersion::V5)?
        .try_with_compression(Some(CompressionType::ZSTD))?
        .try_with_compression_level(Some(ZSTD_LEVEL))
}

/// How a segment holds its rows.
#[derive(Clone, Debug)]
enum Body {
    /// A zstd-compressed IPC stream ([`Segment::encode`]).
    Ipc(Bytes),
    /// The batch itself ([`Segment::into_plain`]).
    Plain(RecordBatch),
}

thread_local! {
    /// Each thread's segment encoder, kept between segments (see [`Encoder`]).
    static ENCODER: RefCell<Encoder> = RefCell::new(Encoder::default());
}

/// Writes one batch as a whole IPC stream (schema message, batch message, end-of-stream
/// marker: what `StreamWriter` writes), reusing what a `StreamWriter` would build anew for
/// each segment: the zstd compression context (its tables are megabytes, allocated and
/// zeroed per context) and the encoded schema message of the last schema seen.
#[derive(Default)]
struct Encoder {
    context: IpcWriteContext,
    schema: Option<(SchemaRef, Vec<u8>)>,
}

impl Encoder {
    fn stream(&mut self, batch: &RecordBatch) -> Result<Vec<u8>, ArrowError> {
        let options = ipc_options()?;
        let generator = IpcDataGenerator::default();
        let schema = batch.schema();
        if !matches!(&self.schema, Some((s, _)) if *s == schema) {
            let mut tracker = DictionaryTracker::new(false);
            let message =
                generator.schema_to_bytes_with_dictionary_tracker(&schema, &mut tracker, &options);
            let mut bytes = Vec::new();
            write_message(&mut bytes, message, &options)?;
            self.schema = Some((schema, bytes));
        }
        let (_, schema_bytes) = self.schema.as_ref().expect("set above");
        let mut tracker = DictionaryTracker::new(false);
        let (dictionaries, message) =
            generator.encode(batch, &mut tracker, &options, &mut self.context)?;
        // Sized up front: a segment lives in memory until it is flushed, and a grown `Vec`
        // would keep up to twice its bytes. A message is an 8-byte prefix and its header,
        // padded to the alignment, then its body, padded likewise (arrow's IPC writer).
        let padded = |n: usize| n.div_ceil(ALIGNMENT) * ALIGNMENT;
        let message_len = |m: &arrow::ipc::writer::EncodedData| {
            padded(8 + m.ipc_message.len()) + padded(m.arrow_data.len())
        };
        let mut buf = Vec::with_capacity(
            schema_bytes.len()
                + dictionaries.iter().map(message_len).sum::<usize>()
                + message_len(&message)
                + 8,
        );
        buf.extend_from_slice(schema_bytes);
        for d in dictionaries {
            write_message(&mut buf, d, &options)?;
        }
        write_message(&mut buf, message, &options)?;
        // End of stream: the continuation marker and a zero length.
        buf.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
        Ok(buf)
    }
}

/// Decodes one IPC stream holding one batch (several are concatenated).
///
/// # Errors
/// Arrow IPC errors.
pub fn decode(ipc: &[u8]) -> Result<RecordBatch, ArrowError> {
    decode_projected(ipc, None)
}

fn decode_projected(ipc: &[u8], projection: Option<Vec<usize>>) -> Result<RecordBatch, ArrowError> {
    let reader = StreamReader::try_new(ipc, projection)?;
    let schema = reader.schema();
    let batches = reader.collect::<Result<Vec<_>, _>>()?;
    match batches.len() {
        1 => Ok(batches.into_iter().next().expect("one batch")),
        _ => arrow::compute::concat_batches(&schema, &batches),
    }
}

/// Shared handle for scans.
pub type Segments = Arc<Vec<Segment>>;

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};

    /// What `StreamWriter` writes for `batch` alone, with the segments' options.
    fn stream_writer_bytes(batch: &RecordBatch) -> Vec<u8> {
        let options = ipc_options().unwrap();
        let mut buf = Vec::new();
        let mut w = arrow::ipc::writer::StreamWriter::try_new_with_options(
            &mut buf,
            &batch.schema(),
            options,
        )
        .unwrap();
        w.write(batch).unwrap();
        w.finish().unwrap();
        drop(w);
        buf
    }

    #[test]
    fn the_reused_encoder_writes_what_a_stream_writer_writes() {
        let a = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, true)]));
        let b = Arc::new(Schema::new(vec![
            Field::new("name", DataType::Utf8, false),
            Field::new("n", DataType::Int64, true),
        ]));
        let batches = [
            RecordBatch::try_new(
                a.clone(),
                vec![Arc::new(Int64Array::from(vec![Some(1), None, Some(3)]))],
            )
            .unwrap(),
            RecordBatch::try_new(a, vec![Arc::new(Int64Array::from(vec![7; 5000]))]).unwrap(),
            RecordBatch::try_new(
                b,
                vec![
                    Arc::new(StringArray::from(vec!["x", "yy"])),
                    Arc::new(Int64Array::from(vec![None, Some(2)])),
                ],
            )
            .unwrap(),
        ];
        // Twice over: the second round reuses the context and the schema messages.
        for round in 0..2 {
            for (i, batch) in batches.iter().enumerate() {
                let seg = Segment::encode(batch).unwrap();
                assert_eq!(
                    seg.bytes(),
                    Some(&stream_writer_bytes(batch)[..]),
                    "round {round}, batch {i}"
                );
                assert_eq!(&seg.decode().unwrap(), batch);
                let buf = ENCODER.with_borrow_mut(|e| e.stream(batch)).unwrap();
                assert!(
                    buf.capacity() - buf.len() < 16,
                    "spare capacity held: {} of {}",
                    buf.len(),
                    buf.capacity()
                );
            }
        }
    }

    #[test]
    fn segments_round_trip_smaller_than_the_batch() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("start_time_unix_nano", DataType::Int64, false),
            Field::new("name", DataType::Utf8, false),
        ]));
        let starts: Vec<i64> = (0..10_000).map(|i| 1_000 + i * 7).collect();
        let names: Vec<String> = (0..10_000)
            .map(|i| format!("GET /items/{}", i % 50))
            .collect();
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(starts)),
                Arc::new(StringArray::from(names)),
            ],
        )
        .unwrap();
        let seg = Segment::encode(&batch).unwrap();
        assert_eq!(seg.rows(), 10_000);
        assert_eq!(seg.start_range(), Some((1_000, 1_000 + 9_999 * 7)));
        assert_eq!(seg.decode().unwrap(), batch);
        let bytes = seg.bytes().unwrap();
        assert!(
            bytes.len() * 4 < batch.get_array_memory_size(),
            "{}",
            bytes.len()
        );
        let again = Segment::from_parts(Bytes::copy_from_slice(bytes), &batch);
        assert_eq!(again.decode().unwrap(), batch);
        assert_eq!(seg.schema().unwrap(), batch.schema());
        let names = seg.decode_columns(&[1]).unwrap();
        assert_eq!(names.num_columns(), 1);
        assert_eq!(names.column(0), batch.column(1));
        // The same rows held plain answer alike, and have no WAL bytes.
        let plain = seg.clone().into_plain(batch.clone());
        assert!(plain.is_plain() && !seg.is_plain());
        assert!(!seg.clone().into_plain(batch.slice(0, 3)).is_plain());
        assert_eq!(plain.rows(), seg.rows());
        assert_eq!(plain.start_range(), seg.start_range());
        assert_eq!(plain.decode().unwrap(), batch);
        assert_eq!(plain.decode_columns(&[1]).unwrap(), names);
        assert_eq!(plain.schema().unwrap(), batch.schema());
        assert_eq!(plain.bytes(), None);
    }
}
