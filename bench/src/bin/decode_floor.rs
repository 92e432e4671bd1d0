//! The floor of the ingest path: raw `prost` decode of the same requests `loadgen` sends, on
//! one core. Also times the OTLP → Arrow conversion (`convert_request`, in process, no I/O) and
//! sums the Arrow memory of the converted rows; then the receivers' own path: the wire reader
//! (`view::RequestView::decode`, no prost message) and conversion, and that plus the store's
//! segment encoding (`Segment::encode`: the zstd IPC bytes that are both the WAL record and
//! the in-memory copy), and its bytes per span; and the flusher's part: those segments written
//! as Parquet files (`files::write_segments`, wall time of one thread). Prints one JSON line. Uses the server's
//! allocator (mimalloc), so the floor and the full path allocate alike.

use std::time::Instant;

use clap::Parser;
use dyeline_collector::{ConvertOptions, convert_request};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
struct Args {
    /// Requests (1,000 spans each by default).
    #[arg(long, default_value_t = 500)]
    requests: u64,
    /// Spans per request.
    #[arg(long, default_value_t = 1000)]
    spans: usize,
    /// Repetitions; the median is reported.
    #[arg(long, default_value_t = 5)]
    reps: usize,
}

/// The wire reader's views of one request body.
fn wire(body: &[u8]) -> dyeline_collector::view::RequestView<'_> {
    dyeline_collector::view::RequestView::decode(body).expect("wire decode")
}

/// Median wall seconds of `reps` runs of `pass` (one pass over every request); its argument
/// is true on the first run, for what is measured once.
fn median_seconds(reps: usize, mut pass: impl FnMut(bool)) -> f64 {
    let mut runs: Vec<f64> = (0..reps)
        .map(|rep| {
            let t = Instant::now();
            pass(rep == 0);
            t.elapsed().as_secs_f64()
        })
        .collect();
    runs.sort_by(f64::total_cmp);
    runs[runs.len() / 2]
}

fn main() {
    let args = Args::parse();
    let bodies: Vec<Vec<u8>> = (0..args.requests)
        .map(|i| dyeline_bench::request(1, i, args.spans).encode_to_vec())
        .collect();
    let spans = args.requests as f64 * args.spans as f64;
    let bytes: usize = bodies.iter().map(Vec::len).sum();
    let decode = median_seconds(args.reps, |_| {
        for b in &bodies {
            std::hint::black_box(ExportTraceServiceRequest::decode(&b[..]).expect("decode"));
        }
    });
    let options = ConvertOptions::default();
    let mut arrow_bytes = 0usize;
    let full = median_seconds(args.reps, |first| {
        for b in &bodies {
            let r = ExportTraceServiceRequest::decode(&b[..]).expect("decode");
            let rows = convert_request(&r, &options).expect("convert");
            if first {
                arrow_bytes += rows.batch.as_ref().map_or(0, |b| b.get_array_memory_size());
            }
            std::hint::black_box(rows);
        }
    });
    // The receivers' path: the wire reader's views alone, with conversion, with encoding.
    let wire_only = median_seconds(args.reps, |_| {
        for b in &bodies {
            std::hint::black_box(wire(b));
        }
    });
    let wire_convert = median_seconds(args.reps, |_| {
        for b in &bodies {
            let rows = dyeline_collector::convert_view(&wire(b), &options).expect("convert");
            std::hint::black_box(rows);
        }
    });
    let mut segment_bytes = 0usize;
    let encoded = median_seconds(args.reps, |first| {
        for b in &bodies {
            let rows = dyeline_collector::convert_view(&wire(b), &options).expect("convert");
            let batch = rows.batch.expect("rows");
            let segment = dyeline_store::segment::Segment::encode(&batch).expect("encode");
            if first {
                segment_bytes += segment.bytes().map_or(0, <[u8]>::len);
            }
            std::hint::black_box(segment);
        }
    });
    // The flusher's path: the segments of every request written as Parquet files, as one
    // flush of the store writes them (`files::write_segments`, zstd level 3 as the store's
    // default), into a scratch directory removed after each run.
    let segments: Vec<dyeline_store::segment::Segment> = bodies
        .iter()
        .map(|b| {
            let rows = dyeline_collector::convert_view(&wire(b), &options).expect("convert");
            dyeline_store::segment::Segment::encode(&rows.batch.expect("rows")).expect("encode")
        })
        .collect();
    let refs: Vec<&dyeline_store::segment::Segment> = segments.iter().collect();
    let scratch = std::env::temp_dir().join(format!("dyeline-decode-floor-{}", std::process::id()));
    let mut parquet_bytes = 0u64;
    let flush = median_seconds(args.reps, |first| {
        std::fs::create_dir_all(&scratch).expect("scratch dir");
        let mut seq = 0;
        let files =
            dyeline_store::files::write_segments(&scratch, &refs, 0, &mut seq, 3).expect("flush");
        if first {
            parquet_bytes = files.iter().map(|f| f.size).sum();
        }
        std::fs::remove_dir_all(&scratch).expect("remove scratch dir");
    });
    println!(
        "{}",
        serde_json::json!({
            "spans": spans,
            "protobuf_bytes_per_span": bytes as f64 / spans,
            "prost_decode_cpu_s_per_million": decode / spans * 1e6,
            "prost_decode_spans_per_second": spans / decode,
            "decode_and_convert_cpu_s_per_million": full / spans * 1e6,
            "arrow_bytes_per_span": arrow_bytes as f64 / spans,
            "wire_decode_cpu_s_per_million": wire_only / spans * 1e6,
            "wire_decode_and_convert_cpu_s_per_million": wire_convert / spans * 1e6,
            "wire_decode_convert_and_segment_encode_cpu_s_per_million": encoded / spans * 1e6,
            "segment_bytes_per_span": segment_bytes as f64 / spans,
            "flush_cpu_s_per_million": flush / spans * 1e6,
            "parquet_bytes_per_span": parquet_bytes as f64 / spans,
        })
    );
}
