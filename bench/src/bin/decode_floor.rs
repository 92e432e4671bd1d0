//! The floor of the ingest path: raw `prost` decode of the same requests `loadgen` sends, on
//! one core. Also times the OTLP → Arrow conversion (`convert_request`, in process, no I/O) and
//! sums the Arrow memory of the converted rows; then the receivers' own path: the wire reader
//! (`view::RequestView::decode`, no prost message) and conversion, and that plus the store's
//! segment encoding (`Segment::encode`: the zstd IPC bytes that are both the WAL record and
//! the in-memory copy), and its bytes per span. Prints one JSON line. Uses the server's
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

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args = Args::parse();
    let bodies: Vec<Vec<u8>> = (0..args.requests)
        .map(|i| dyeline_bench::request(1, i, args.spans).encode_to_vec())
        .collect();
    let spans = args.requests as f64 * args.spans as f64;
    let bytes: usize = bodies.iter().map(Vec::len).sum();
    let mut decode = Vec::new();
    for _ in 0..args.reps {
        let t = Instant::now();
        for b in &bodies {
            let r = ExportTraceServiceRequest::decode(&b[..]).expect("decode");
            std::hint::black_box(r);
        }
        decode.push(t.elapsed().as_secs_f64());
    }
    let options = ConvertOptions::default();
    let mut full = Vec::new();
    let mut arrow_bytes = 0usize;
    for rep in 0..args.reps {
        let t = Instant::now();
        for b in &bodies {
            let r = ExportTraceServiceRequest::decode(&b[..]).expect("decode");
            let rows = convert_request(&r, &options).expect("convert");
            if rep == 0 {
                arrow_bytes += rows.batch.as_ref().map_or(0, |b| b.get_array_memory_size());
            }
            std::hint::black_box(rows);
        }
        full.push(t.elapsed().as_secs_f64());
    }
    // The receivers' path: the wire reader's views alone, then with conversion.
    let mut wire_only = Vec::new();
    for _ in 0..args.reps {
        let t = Instant::now();
        for b in &bodies {
            let view = dyeline_collector::view::RequestView::decode(b).expect("wire decode");
            std::hint::black_box(view);
        }
        wire_only.push(t.elapsed().as_secs_f64());
    }
    let mut wire = Vec::new();
    for _ in 0..args.reps {
        let t = Instant::now();
        for b in &bodies {
            let view = dyeline_collector::view::RequestView::decode(b).expect("wire decode");
            let rows = dyeline_collector::convert_view(&view, &options).expect("convert");
            std::hint::black_box(rows);
        }
        wire.push(t.elapsed().as_secs_f64());
    }
    let mut encoded = Vec::new();
    let mut segment_bytes = 0usize;
    for rep in 0..args.reps {
        let t = Instant::now();
        for b in &bodies {
            let view = dyeline_collector::view::RequestView::decode(b).expect("wire decode");
            let rows = dyeline_collector::convert_view(&view, &options).expect("convert");
            let batch = rows.batch.expect("rows");
            let segment = dyeline_store::segment::Segment::encode(&batch).expect("encode");
            if rep == 0 {
                segment_bytes += segment.bytes().map_or(0, <[u8]>::len);
            }
            std::hint::black_box(segment);
        }
        encoded.push(t.elapsed().as_secs_f64());
    }
    let decode = median(decode);
    let full = median(full);
    let encoded = median(encoded);
    let wire = median(wire);
    let wire_only = median(wire_only);
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
            "wire_decode_and_convert_cpu_s_per_million": wire / spans * 1e6,
            "wire_decode_convert_and_segment_encode_cpu_s_per_million": encoded / spans * 1e6,
            "segment_bytes_per_span": segment_bytes as f64 / spans,
        })
    );
}
