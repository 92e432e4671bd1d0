//! In-memory segments: a batch of `spans` rows with its row count, start-time range and
//! [`TraceIndex`] (so a trace lookup decodes only the segments holding the trace). A segment
//! holds its rows plain (the batch a write brought, as it came) or sealed: one hour's rows
//! encoded as an in-memory Parquet file ([`Part`]), the bytes a flush later copies into a
//! file without decoding them. The store seals plain rows once enough have gathered, so
//! memory holds about what the files will (tens of bytes per span), and each row is encoded
//! once, not once for memory and again for the file.
//!
//! Also the WAL record codec: a batch as one LZ4-compressed Arrow IPC stream
//! ([`encode_record`], [`decode`]).

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
use parquet::arrow::ProjectionMask;

use crate::part::{Part, part_reader, start_range};
use crate::trace_index::TraceIndex;

/// One batch of rows: plain or sealed (see the module doc).
#[derive(Clone, Debug)]
pub struct Segment {
    body: Body,
    rows: usize,
    bytes: usize,
    start_range: Option<(i64, i64)>,
    traces: Option<Arc<TraceIndex>>,
}

impl Segment {
    /// The rows of `batch` held as they are (no copy: its buffers are shared); computes the
    /// start-time range and trace index.
    pub fn plain(batch: RecordBatch) -> Self {
        Self {
            rows: batch.num_rows(),
            bytes: batch.get_array_memory_size(),
            start_range: start_range(&batch),
            traces: TraceIndex::of_batch(&batch).map(Arc::new),
            body: Body::Plain(batch),
        }
    }

    /// One hour's rows sealed as Parquet ([`crate::seal::encode_parts`]).
    pub fn from_part(part: Part) -> Self {
        Self {
            rows: part.rows,
            bytes: part.bytes.len(),
            start_range: Some(part.start_range),
            traces: Some(Arc::clone(&part.traces)),
            body: Body::Parquet(part),
        }
    }

    /// True when the rows are held plain ([`Segment::plain`]).
    pub fn is_plain(&self) -> bool {
        matches!(self.body, Body::Plain(_))
    }

    /// The sealed rows (`None` for plain rows).
    pub fn part(&self) -> Option<&Part> {
        match &self.body {
            Body::Parquet(part) => Some(part),
            Body::Plain(_) => None,
        }
    }

    /// Decodes the rows.
    ///
    /// # Errors
    /// Parquet errors (as [`ArrowError::ExternalError`]) for sealed rows.
    pub fn decode(&self) -> Result<RecordBatch, ArrowError> {
        match &self.body {
            Body::Parquet(part) => decode_part(part, None),
            Body::Plain(batch) => Ok(batch.clone()),
        }
    }

    /// Decodes only the columns at `projection` (schema order of the result follows
    /// `projection`); the other columns are not read.
    ///
    /// # Errors
    /// Parquet errors, an index out of the schema.
    pub fn decode_columns(&self, projection: &[usize]) -> Result<RecordBatch, ArrowError> {
        match &self.body {
            Body::Parquet(part) => decode_part(part, Some(projection)),
            Body::Plain(batch) => batch.project(projection),
        }
    }

    /// The schema of the rows (for sealed rows, read from the Parquet footer).
    ///
    /// # Errors
    /// Parquet errors.
    pub fn schema(&self) -> Result<SchemaRef, ArrowError> {
        match &self.body {
            Body::Parquet(part) => Ok(part_reader(part.bytes.clone())
                .map_err(external)?
                .schema()
                .clone()),
            Body::Plain(batch) => Ok(batch.schema()),
        }
    }

    /// Rows held.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Bytes the rows take in memory: the batch's buffers as allocated (plain), the Parquet
    /// bytes (sealed).
    pub fn memory_bytes(&self) -> usize {
        self.bytes
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

fn external(e: parquet::errors::ParquetError) -> ArrowError {
    ArrowError::ExternalError(Box::new(e))
}

/// The rows of a sealed part, whole or the columns at `projection` (in that order).
fn decode_part(part: &Part, projection: Option<&[usize]>) -> Result<RecordBatch, ArrowError> {
    let builder = part_reader(part.bytes.clone())
        .map_err(external)?
        .with_batch_size(part.rows.max(1));
    let (builder, order) = match projection {
        None => (builder, None),
        Some(projection) => {
            // The reader yields columns in schema order; put them back in the order asked.
            let mut sorted = projection.to_vec();
            sorted.sort_unstable();
            sorted.dedup();
            let order: Vec<usize> = projection
                .iter()
                .map(|c| sorted.binary_search(c).unwrap_or_default())
                .collect();
            if let Some(&c) = sorted.last()
                && c >= builder.schema().fields().len()
            {
                return Err(ArrowError::SchemaError(format!("no column {c}")));
            }
            let mask = ProjectionMask::roots(builder.parquet_schema(), sorted);
            (builder.with_projection(mask), Some(order))
        }
    };
    let reader = builder.build().map_err(external)?;
    let schema = arrow::array::RecordBatchReader::schema(&reader);
    let batches = reader.collect::<Result<Vec<_>, _>>()?;
    let batch = match batches.len() {
        1 => batches.into_iter().next().expect("one batch"),
        _ => arrow::compute::concat_batches(&schema, &batches)?,
    };
    match order {
        Some(order) => batch.project(&order),
        None => Ok(batch),
    }
}

/// Encodes `batch` as a WAL record: one LZ4-compressed Arrow IPC stream (schema message,
/// batch message, end-of-stream marker), read back by [`decode`].
///
/// # Errors
/// Arrow IPC errors.
pub fn encode_record(batch: &RecordBatch) -> Result<Vec<u8>, ArrowError> {
    ENCODER.with_borrow_mut(|e| e.stream(batch))
}

/// Buffer alignment of the IPC messages (arrow's default, as `StreamWriter` writes).
const ALIGNMENT: usize = 64;

/// The IPC options of WAL records: V5, 64-byte alignment, LZ4 frames. A record lives until
/// its rows are flushed, so it is compressed for speed: on loadgen requests LZ4 took 0.39–0.60 s
/// per million spans to zstd level 1's 0.57–1.21 (three alternating `decode_floor` runs), for
/// 179 bytes per span instead of 104.
fn ipc_options() -> Result<IpcWriteOptions, ArrowError> {
    IpcWriteOptions::try_new(ALIGNMENT, false, MetadataVersion::V5)?
        .try_with_compression(Some(CompressionType::LZ4_FRAME))
}

/// How a segment holds its rows.
#[derive(Clone, Debug)]
enum Body {
    /// The batch itself ([`Segment::plain`]).
    Plain(RecordBatch),
    /// Sealed as Parquet ([`Segment::from_part`]).
    Parquet(Part),
}

thread_local! {
    /// Each thread's record encoder, kept between records (see [`Encoder`]).
    static ENCODER: RefCell<Encoder> = RefCell::new(Encoder::default());
}

/// Writes one batch as a whole IPC stream (schema message, batch message, end-of-stream
/// marker: what `StreamWriter` writes), reusing what a `StreamWriter` would build anew for
/// each record: the compression context and the encoded schema message of the last schema
/// seen.
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
        // Sized up front: a grown `Vec` would copy the record as it grows. A message is an 8-byte prefix and its header,
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
    use arrow::array::{AsArray, Int64Array, StringArray};
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
                let record = encode_record(batch).unwrap();
                assert_eq!(
                    record,
                    stream_writer_bytes(batch),
                    "round {round}, batch {i}"
                );
                assert_eq!(&decode(&record).unwrap(), batch);
                assert!(
                    record.capacity() - record.len() < 16,
                    "spare capacity held: {} of {}",
                    record.len(),
                    record.capacity()
                );
            }
        }
    }

    #[test]
    fn zstd_records_of_earlier_versions_still_decode() {
        let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, true)]));
        let batch =
            RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(vec![5; 3000]))]).unwrap();
        let zstd = IpcWriteOptions::try_new(ALIGNMENT, false, MetadataVersion::V5)
            .unwrap()
            .try_with_compression(Some(CompressionType::ZSTD))
            .unwrap();
        let mut buf = Vec::new();
        let mut w =
            arrow::ipc::writer::StreamWriter::try_new_with_options(&mut buf, &batch.schema(), zstd)
                .unwrap();
        w.write(&batch).unwrap();
        w.finish().unwrap();
        drop(w);
        assert_ne!(buf, encode_record(&batch).unwrap());
        assert_eq!(decode(&buf).unwrap(), batch);
    }

    #[test]
    fn sealed_rows_answer_as_the_plain_rows_in_storage_order_and_smaller() {
        let n = 10_000usize;
        // Trace ids out of order, so sealing must sort them.
        let traces: Vec<String> = (0..n).map(|i| format!("{:032x}", (i * 7919) % n)).collect();
        let spans: Vec<String> = (0..n).map(|i| format!("{i:016x}")).collect();
        let starts: Vec<i64> = (0..n as i64).map(|i| 1_000 + i * 7).collect();
        let keys = crate::file_read::key_batch(traces, spans, starts).unwrap();
        let names: Vec<String> = (0..n).map(|i| format!("GET /items/{}", i % 50)).collect();
        let mut fields = keys.schema().fields().to_vec();
        fields.push(Arc::new(Field::new("name", DataType::Utf8, false)));
        let mut columns = keys.columns().to_vec();
        columns.push(Arc::new(StringArray::from(names)));
        let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap();

        let plain = Segment::plain(batch.clone());
        assert!(plain.is_plain() && plain.part().is_none());
        assert_eq!(plain.rows(), n);
        assert_eq!(plain.start_range(), Some((1_000, 1_000 + 9_999 * 7)));
        assert_eq!(plain.decode().unwrap(), batch);
        assert_eq!(
            plain.decode_columns(&[3, 0]).unwrap(),
            batch.project(&[3, 0]).unwrap()
        );

        let parts = crate::seal::encode_parts(&[&plain], 3).unwrap();
        assert_eq!(parts.len(), 1, "one hour");
        let sealed = Segment::from_part(parts.into_iter().next().unwrap());
        assert!(!sealed.is_plain());
        assert_eq!(sealed.rows(), n);
        assert_eq!(sealed.start_range(), plain.start_range());
        assert_eq!(sealed.schema().unwrap(), batch.schema());
        let part = sealed.part().unwrap();
        assert!(
            part.bytes.len() * 4 < batch.get_array_memory_size(),
            "{} bytes sealed",
            part.bytes.len()
        );
        // The same rows, sorted by trace id; projections in the order asked.
        let back = sealed.decode().unwrap();
        let order = arrow::compute::sort_to_indices(batch.column(0), None, None).unwrap();
        let sorted = arrow::compute::take_record_batch(&batch, &order).unwrap();
        assert_eq!(back, sorted);
        assert_eq!(
            sealed.decode_columns(&[3, 0]).unwrap(),
            sorted.project(&[3, 0]).unwrap()
        );
        assert!(sealed.decode_columns(&[9]).is_err());
        let t = batch.column(0).as_string::<i32>().value(17);
        assert!(sealed.traces().unwrap().may_contain(t));
    }
}
