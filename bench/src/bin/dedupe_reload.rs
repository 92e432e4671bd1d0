//! What the duplicate filter's first write to an hour that already has Parquet files costs (a
//! span arriving after the hour's keys were dropped, such as a long job's span or a backfill,
//! or the first write after a restart): `Dedupe::filter` of one span, against the filter's
//! former way, loading every key of the hour's files (`file_read::read_keys`, a parse and a set
//! insert per key). The hour holds `--requests` x 1,000 `loadgen` spans, written as the store
//! flushes them (500 requests per file). Cases: a span of a new trace with the files' trace
//! indexes in memory (as the store holds them), the same without (right after a restart,
//! before the background pass built them: each file's `trace_id` column is read), and a resent
//! span of a stored trace (its pages are read). Medians of `--reps` runs, one JSON line.

// The measurement, as JSON on stdout, is what this benchmark is run for.
#![allow(clippy::print_stdout)]

use std::time::{Duration, Instant};

use arrow::array::RecordBatch;
use clap::Parser;
use dyeline_model::{SpanId, SpanKey, TraceId};
use dyeline_store::dedupe::Dedupe;
use dyeline_store::layout::{self, FileMeta};
use dyeline_store::segment::Segment;
use dyeline_store::{file_read, file_write, part};
use prost::Message;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
struct Args {
    /// Requests of 1,000 spans in the hour.
    #[arg(long, default_value_t = 2000)]
    requests: u64,
    /// Repetitions; the median is reported.
    #[arg(long, default_value_t = 5)]
    reps: usize,
}

fn median(mut runs: Vec<f64>) -> f64 {
    runs.sort_by(f64::total_cmp);
    runs[runs.len() / 2]
}

fn time(reps: usize, mut run: impl FnMut() -> usize) -> (f64, usize) {
    let mut out = 0;
    let runs = (0..reps)
        .map(|_| {
            let t = Instant::now();
            out = run();
            t.elapsed().as_secs_f64()
        })
        .collect();
    (median(runs), out)
}

fn one_span(key: SpanKey, start: i64) -> RecordBatch {
    file_read::key_batch(
        [key.trace_id.to_string()],
        [key.span_id.to_string()],
        [start],
    )
    .expect("batch")
}

fn main() {
    let args = Args::parse();
    let options = dyeline_collector::ConvertOptions::default();
    let dir = std::env::temp_dir().join(format!("dyeline-dedupe-reload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let mut metas: Vec<FileMeta> = Vec::new();
    let mut seq = 0;
    let mut start = 0i64;
    for chunk in (0..args.requests).collect::<Vec<_>>().chunks(500) {
        let segments: Vec<Segment> = chunk
            .iter()
            .map(|&i| {
                let body = dyeline_bench::request(1, i, 1000).encode_to_vec();
                let view = dyeline_collector::wire::RequestView::decode(&body).expect("decode");
                let batch = dyeline_collector::convert_view(&view, &options)
                    .expect("convert")
                    .batch
                    .expect("rows");
                start = part::start_range(&batch).expect("rows").0;
                Segment::plain(batch)
            })
            .collect();
        let refs: Vec<&Segment> = segments.iter().collect();
        metas.extend(file_write::write_segments(&dir, &refs, 0, &mut seq, 3).expect("flush"));
    }
    let hour = layout::hour_of(start);
    assert!(
        metas.iter().all(|f| f.hour_start_unix_nano == hour),
        "one hour"
    );
    let rows: u64 = metas
        .iter()
        .map(|f| file_read::read_rows(&f.path).expect("rows"))
        .sum();
    let unindexed: Vec<FileMeta> = metas
        .iter()
        .cloned()
        .map(|f| FileMeta { traces: None, ..f })
        .collect();

    let (load_all, held) = time(args.reps, || {
        let d = Dedupe::new(Duration::from_secs(3600));
        let mut set = std::collections::HashSet::new();
        for f in &metas {
            for (t, s, server) in file_read::read_keys(&f.path).expect("keys") {
                let key = SpanKey {
                    trace_id: TraceId::from_hex(&t).expect("trace"),
                    span_id: SpanId::from_hex(&s).expect("span"),
                    server,
                };
                set.insert(d.fingerprint(&key));
            }
        }
        set.len()
    });
    let new_key = SpanKey {
        trace_id: TraceId::from_bytes(&u128::MAX.to_be_bytes()).expect("trace"),
        span_id: SpanId::from_bytes(&7u64.to_be_bytes()).expect("span"),
        server: false,
    };
    let (t, s, server) = file_read::read_keys(&metas[0].path).expect("keys")[0].clone();
    let stored_key = SpanKey {
        trace_id: TraceId::from_hex(&t).expect("trace"),
        span_id: SpanId::from_hex(&s).expect("span"),
        server,
    };
    let filter = |listed: &[FileMeta], key: SpanKey| {
        let listed = listed.to_vec();
        time(args.reps, move || {
            let mut d = Dedupe::new(Duration::from_secs(3600));
            let list = |h: i64| {
                if h == hour {
                    listed.clone()
                } else {
                    Vec::new()
                }
            };
            let f = d
                .filter(one_span(key, start), &[key], &list)
                .expect("filter");
            assert_eq!(f.duplicates, u64::from(key == stored_key), "exact");
            d.len()
        })
    };
    let (indexed, indexed_held) = filter(&metas, new_key);
    let (restart, restart_held) = filter(&unindexed, new_key);
    let (resent, resent_held) = filter(&metas, stored_key);
    std::fs::remove_dir_all(&dir).expect("remove scratch dir");
    println!(
        "{}",
        serde_json::json!({
            "hour_rows": rows,
            "files": metas.len(),
            "load_all_keys_seconds": load_all,
            "load_all_keys_held": held,
            "new_trace_indexed_seconds": indexed,
            "new_trace_indexed_keys_held": indexed_held,
            "new_trace_after_restart_seconds": restart,
            "new_trace_after_restart_keys_held": restart_held,
            "resent_span_seconds": resent,
            "resent_span_keys_held": resent_held,
            "ratio_load_all_to_new_trace_indexed": load_all / indexed,
            "ratio_load_all_to_new_trace_after_restart": load_all / restart,
            "ratio_load_all_to_resent_span": load_all / resent,
        })
    );
}
