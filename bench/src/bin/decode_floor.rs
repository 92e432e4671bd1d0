//! The floor of the ingest path: raw `prost` decode of the same requests `loadgen` sends, on
//! one core. Also times the OTLP → Arrow conversion (`convert_request`, in process, no I/O) and
//! sums the Arrow memory of the converted rows; then the receivers' own path: the wire reader
//! (`wire::RequestView::decode`, no prost message) and conversion, and that plus the store's
//! WAL record encoding (`segment::encode_record`: LZ4 Arrow IPC), and its bytes per span (and
//! the encoding alone); and the flusher thread's part: the rows sealed as in-memory Parquet,
//! `SEAL_ROWS` at a time (`seal::encode_parts`; its sort, `part::storage_order`, also
//! alone), then those parts written as files (`file_write::write_segments`, which copies their row
//! groups), wall time of one thread each. Prints one JSON line (`--skip-lanes`: the same
//! without lane resolution, for its cost). Uses the
//! server's allocator (mimalloc) with transparent huge pages off, as the server runs, so the
//! floor and the full path allocate alike.

// The measurement, as JSON on stdout, is what this benchmark is run for.
#![allow(clippy::print_stdout)]

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
    /// zstd level of the sealed Parquet (the store's default is 1).
    #[arg(long, default_value_t = 1)]
    zstd_level: i32,
    /// Time only the flusher's part (for profiling it); the other figures are left out.
    #[arg(long)]
    flush_only: bool,
    /// Lane rules and carriers from this TOML file (its `[[lane_rules]]` and `[[lane_carriers]]`,
    /// e.g. a lane fixture's `dyeline.toml`), and requests marked by `stain_lanes` (a quarter
    /// of the instances gray, most spans with a lane tag): the cost of lanes where there are
    /// lanes. Without it: the default chains on requests without lane marks.
    #[arg(long)]
    lane_config: Option<std::path::PathBuf>,
    /// Convert with lane resolution skipped (`ConvertOptions::skip_lanes_bench_only`; the
    /// six lane columns null), to compare with a default run: the cost of reading lanes.
    #[arg(long)]
    skip_lanes: bool,
}

/// The lane sections of a `dyeline.toml` (other keys ignored).
#[derive(serde::Deserialize)]
struct LaneConfig {
    #[serde(default)]
    lane_rules: Vec<dyeline_model::LaneRule>,
    #[serde(default)]
    lane_carriers: Vec<dyeline_model::LaneCarrier>,
}

/// The wire reader's views of one request body.
fn wire(body: &[u8]) -> dyeline_collector::wire::RequestView<'_> {
    dyeline_collector::wire::RequestView::decode(body).expect("wire decode")
}

/// Median wall seconds of `reps` runs of `pass` (one pass over every request); its argument
/// is true on the first run, for what is measured once. NaN (JSON null) for no run.
fn median_seconds(reps: usize, mut pass: impl FnMut(bool)) -> f64 {
    let mut runs: Vec<f64> = (0..reps)
        .map(|rep| {
            let t = Instant::now();
            pass(rep == 0);
            t.elapsed().as_secs_f64()
        })
        .collect();
    runs.sort_by(f64::total_cmp);
    runs.get(runs.len() / 2).copied().unwrap_or(f64::NAN)
}

fn main() {
    // As `dyeline` does at start (server/src/main.rs): without this, a quarter of this
    // program's samples were the kernel clearing huge pages, which the product does not pay.
    #[cfg(target_os = "linux")]
    let _ = rustix::thread::disable_transparent_huge_pages(true);
    let args = Args::parse();
    let bodies: Vec<Vec<u8>> = (0..args.requests)
        .map(|i| {
            let mut r = dyeline_bench::request(1, i, args.spans);
            if args.lane_config.is_some() {
                dyeline_bench::stain_lanes(&mut r);
            }
            r.encode_to_vec()
        })
        .collect();
    let spans = args.requests as f64 * args.spans as f64;
    let bytes: usize = bodies.iter().map(Vec::len).sum();
    // With --flush-only the stages before the flush are not timed.
    let stage_reps = if args.flush_only { 0 } else { args.reps };
    let decode = median_seconds(stage_reps, |_| {
        for b in &bodies {
            std::hint::black_box(ExportTraceServiceRequest::decode(&b[..]).expect("decode"));
        }
    });
    let mut options = ConvertOptions {
        skip_lanes_bench_only: args.skip_lanes,
        ..ConvertOptions::default()
    };
    if let Some(path) = &args.lane_config {
        use figment::providers::Format;
        let lanes: LaneConfig = figment::Figment::from(figment::providers::Toml::file(path))
            .extract()
            .expect("lane config");
        options.lane_rules = std::sync::Arc::new(
            dyeline_model::LaneRules::new(&lanes.lane_rules).expect("lane rules"),
        );
        options.lane_carriers = std::sync::Arc::new(
            dyeline_model::LaneCarriers::new(&lanes.lane_carriers).expect("lane carriers"),
        );
    }
    let mut arrow_bytes = 0usize;
    let mut column_bytes: std::collections::BTreeMap<String, usize> = Default::default();
    let full = median_seconds(stage_reps, |first| {
        for b in &bodies {
            let r = ExportTraceServiceRequest::decode(&b[..]).expect("decode");
            let rows = convert_request(&r, &options).expect("convert");
            if first {
                arrow_bytes += rows.batch.as_ref().map_or(0, |b| b.get_array_memory_size());
                if let Some(batch) = &rows.batch {
                    for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
                        let used = column.to_data().get_slice_memory_size().unwrap_or(0);
                        *column_bytes.entry(field.name().clone()).or_default() += used;
                    }
                }
            }
            std::hint::black_box(rows);
        }
    });
    // The receivers' path: the wire reader's views alone, with conversion, with encoding.
    let wire_only = median_seconds(stage_reps, |_| {
        for b in &bodies {
            std::hint::black_box(wire(b));
        }
    });
    let wire_convert = median_seconds(stage_reps, |_| {
        for b in &bodies {
            let rows = dyeline_collector::convert_view(&wire(b), &options).expect("convert");
            std::hint::black_box(rows);
        }
    });
    let mut record_bytes = 0usize;
    let encoded = median_seconds(stage_reps, |first| {
        for b in &bodies {
            let rows = dyeline_collector::convert_view(&wire(b), &options).expect("convert");
            let batch = rows.batch.expect("rows");
            let record = dyeline_store::segment::encode_record(&batch).expect("encode");
            if first {
                record_bytes += record.len();
            }
            std::hint::black_box(record);
        }
    });
    // The flusher thread's path: the plain rows sealed SEAL_ROWS at a time, as the store seals
    // them (at --zstd-level: the store's default, 1, unless given), then the parts written as
    // files by one flush, into a scratch directory removed after each run.
    use dyeline_store::segment::Segment;
    let plain: Vec<Segment> = bodies
        .iter()
        .map(|b| {
            let rows = dyeline_collector::convert_view(&wire(b), &options).expect("convert");
            Segment::plain(rows.batch.expect("rows"))
        })
        .collect();
    // The WAL record alone, on the converted rows.
    let record_only = median_seconds(stage_reps, |_| {
        for segment in &plain {
            let batch = segment.decode().expect("plain rows");
            std::hint::black_box(dyeline_store::segment::encode_record(&batch).expect("encode"));
        }
    });
    let mut chunks: Vec<Vec<&Segment>> = vec![Vec::new()];
    let mut gathered = 0;
    for segment in &plain {
        if gathered >= dyeline_store::SEAL_ROWS {
            chunks.push(Vec::new());
            gathered = 0;
        }
        gathered += segment.rows();
        chunks.last_mut().expect("one").push(segment);
    }
    // The seal's sort alone (`part::storage_order`), on the same groups of rows.
    let chunk_batches: Vec<Vec<arrow::array::RecordBatch>> = chunks
        .iter()
        .map(|c| c.iter().map(|s| s.decode().expect("plain rows")).collect())
        .collect();
    let order = median_seconds(stage_reps, |_| {
        for batches in &chunk_batches {
            std::hint::black_box(dyeline_store::part::storage_order(batches).expect("order"));
        }
    });
    drop(chunk_batches);
    let mut sealed: Vec<Segment> = Vec::new();
    let seal = median_seconds(args.reps, |_| {
        sealed = chunks
            .iter()
            .flat_map(|c| dyeline_store::seal::encode_parts(c, args.zstd_level).expect("seal"))
            .map(Segment::from_part)
            .collect();
    });
    let sealed_bytes: usize = sealed
        .iter()
        .filter_map(Segment::part)
        .map(|p| p.bytes.len())
        .sum();
    drop(plain);
    let refs: Vec<&Segment> = sealed.iter().collect();
    let scratch = std::env::temp_dir().join(format!("dyeline-decode-floor-{}", std::process::id()));
    let mut parquet_bytes = 0u64;
    let flush = median_seconds(args.reps, |first| {
        std::fs::create_dir_all(&scratch).expect("scratch dir");
        let mut seq = 0;
        let files = dyeline_store::file_write::write_segments(
            &scratch,
            &refs,
            0,
            &mut seq,
            args.zstd_level,
        )
        .expect("flush");
        if first {
            parquet_bytes = files.iter().map(|f| f.size).sum();
        }
        std::fs::remove_dir_all(&scratch).expect("remove scratch dir");
    });
    println!(
        "{}",
        serde_json::json!({
            "spans": spans,
            "lanes_skipped": args.skip_lanes,
            "lane_config": args.lane_config.as_ref().map(|p| p.display().to_string()),
            "protobuf_bytes_per_span": bytes as f64 / spans,
            "prost_decode_cpu_s_per_million": decode / spans * 1e6,
            "prost_decode_spans_per_second": spans / decode,
            "decode_and_convert_cpu_s_per_million": full / spans * 1e6,
            "arrow_bytes_per_span": arrow_bytes as f64 / spans,
            "arrow_used_bytes_per_span_by_column": column_bytes
                .iter()
                .map(|(k, v)| (k.clone(), serde_json::json!(*v as f64 / spans)))
                .collect::<serde_json::Map<_, _>>(),
            "wire_decode_cpu_s_per_million": wire_only / spans * 1e6,
            "wire_decode_and_convert_cpu_s_per_million": wire_convert / spans * 1e6,
            "wire_decode_convert_and_record_encode_cpu_s_per_million": encoded / spans * 1e6,
            "wal_record_bytes_per_span": record_bytes as f64 / spans,
            "record_encode_cpu_s_per_million": record_only / spans * 1e6,
            "seal_cpu_s_per_million": seal / spans * 1e6,
            "seal_sort_cpu_s_per_million": order / spans * 1e6,
            "sealed_bytes_per_span": sealed_bytes as f64 / spans,
            "flush_cpu_s_per_million": flush / spans * 1e6,
            "parquet_bytes_per_span": parquet_bytes as f64 / spans,
        })
    );
}
