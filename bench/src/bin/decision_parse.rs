//! What one hostile decision value costs (issue 23, defect 5): `Decisions::parse` of `--pairs`
//! `cN=blue` pairs, against the parse before the W3C baggage limits (a scan of the pairs kept
//! for each pair, no limit: quadratic in the channels), and the conversion of one span carrying
//! that value (`convert_request`). Medians of `--reps` runs, one JSON line. The former parse
//! is skipped above `--former-max` pairs (it took 16 s for 100,000).

// The measurement, as JSON on stdout, is what this benchmark is run for.
#![allow(clippy::print_stdout)]

use std::time::Instant;

use clap::Parser;
use dyeline_collector::{ConvertOptions, convert_request};
use dyeline_model::{Color, Decisions};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
struct Args {
    /// Pairs in the value.
    #[arg(long, default_value_t = 100_000)]
    pairs: usize,
    /// Repetitions; the median is reported.
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Largest value the former parse is timed on.
    #[arg(long, default_value_t = 100_000)]
    former_max: usize,
}

/// The parse before the limits (kept for comparison): channels and colours only, of a value
/// without percent-escapes (as here).
fn former_parse(value: &str) -> Vec<(String, Color)> {
    let body = value.split(';').next().unwrap_or_default();
    let mut entries: Vec<(String, Color)> = Vec::new();
    for piece in body.split('&') {
        let Some((channel, color)) = piece.trim().split_once('=') else {
            continue;
        };
        let channel = channel.trim();
        let Some(color) = Color::parse(color).filter(|_| !channel.is_empty()) else {
            continue;
        };
        if !entries.iter().any(|(c, _)| c == channel) {
            entries.push((channel.to_owned(), color));
        }
    }
    entries
}

fn median_seconds(reps: usize, mut run: impl FnMut()) -> f64 {
    let mut runs: Vec<f64> = (0..reps)
        .map(|_| {
            let t = Instant::now();
            run();
            t.elapsed().as_secs_f64()
        })
        .collect();
    runs.sort_by(f64::total_cmp);
    runs.get(runs.len() / 2).copied().unwrap_or(f64::NAN)
}

fn main() {
    let args = Args::parse();
    let value = (0..args.pairs)
        .map(|i| format!("c{i}=blue"))
        .collect::<Vec<_>>()
        .join("&");
    let parse = median_seconds(args.reps, || {
        std::hint::black_box(Decisions::parse(&value));
    });
    let kept = Decisions::parse(&value).len();
    let former = if args.pairs <= args.former_max {
        median_seconds(args.reps.min(3), || {
            std::hint::black_box(former_parse(&value));
        })
    } else {
        f64::NAN
    };
    let request = ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![ScopeSpans {
                spans: vec![Span {
                    trace_id: vec![1; 16],
                    span_id: vec![2; 8],
                    attributes: vec![KeyValue {
                        key: "baggage.x-deploy-channel-type".into(),
                        value: Some(AnyValue {
                            value: Some(Value::StringValue(value.clone())),
                        }),
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
    };
    let options = ConvertOptions::default();
    let convert = median_seconds(args.reps, || {
        std::hint::black_box(convert_request(&request, &options).expect("convert"));
    });
    let json = |x: f64| serde_json::Number::from_f64(x).map_or(serde_json::Value::Null, Into::into);
    println!(
        "{}",
        serde_json::json!({
            "pairs": args.pairs,
            "value_bytes": value.len(),
            "decisions_kept": kept,
            "parse_seconds": json(parse),
            "former_parse_seconds": json(former),
            "convert_one_span_seconds": json(convert),
            "debug_build": cfg!(debug_assertions),
        })
    );
}
