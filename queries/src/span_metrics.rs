//! Metrics derived from spans (issue: analyzer, item 4): requests, errors and a duration
//! histogram per channel, app, colour and traffic kind on `/metrics`, so an existing
//! Prometheus and Grafana can chart a release. Counted from the rows the store kept (a resent
//! span counts once); the channel is the app's effective channel when the span arrives
//! (`none` outside a release). Label sets are bounded: past `max_series`, new apps are
//! counted under app `_other`. Each series carries an OpenMetrics exemplar: a trace id of the
//! latest write it counted (for errors, an errored span's; for the duration, the slowest span
//! of the write in its bucket), so a Grafana panel links a spike to a trace.

use std::collections::{HashMap, HashSet};

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::Int64Type;
use dyeline_model::schema::col;
use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::exemplar::{CounterWithExemplar, HistogramWithExemplars};
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use crate::ports::{KeptRowsObserver, Releases};

/// Labels of the span metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SpanLabels {
    /// Effective channel of the app, or `none`.
    pub channel: String,
    /// App (`service.name`), or `_other` past the series limit.
    pub app: String,
    /// blue, green, unknown.
    pub color: String,
    /// RPC, MQ, JOB.
    pub kind: String,
}

/// The exemplar's labels: one trace id.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TraceExemplar {
    /// Lower-case hex.
    pub trace_id: String,
}

/// Per (app, colour, kind) of one batch: spans, errors, durations in seconds, the row of its
/// last span, of its last error, and of its slowest span.
#[derive(Default)]
struct Group {
    spans: u64,
    errors: u64,
    durations: Vec<f64>,
    last: usize,
    last_error: Option<usize>,
    /// (duration, its place in `durations`, its row).
    slowest: Option<(f64, usize, usize)>,
}

type Durations = HistogramWithExemplars<TraceExemplar>;

fn duration_histogram() -> Durations {
    HistogramWithExemplars::new(
        [
            0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
        ]
        .into_iter(),
    )
}

/// The span metric families.
pub struct SpanMetrics {
    requests: Family<SpanLabels, CounterWithExemplar<TraceExemplar>>,
    errors: Family<SpanLabels, CounterWithExemplar<TraceExemplar>>,
    duration: Family<SpanLabels, Durations, fn() -> Durations>,
    series: Mutex<HashSet<SpanLabels>>,
    max_series: usize,
}

impl SpanMetrics {
    /// Families with at most `max_series` label sets.
    pub fn new(max_series: usize) -> Self {
        SpanMetrics {
            requests: Family::default(),
            errors: Family::default(),
            duration: Family::new_with_constructor(duration_histogram),
            series: Mutex::new(HashSet::new()),
            max_series,
        }
    }

    /// Registers `dyeline_spans_requests`, `dyeline_spans_errors` (counters) and
    /// `dyeline_spans_duration_seconds` (histogram).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "dyeline_spans_requests",
            "Spans per channel, app, colour and traffic kind (RPC: server spans, MQ: consumer spans, JOB)",
            self.requests.clone(),
        );
        registry.register(
            "dyeline_spans_errors",
            "Error spans (status ERROR, HTTP >= 500, gRPC status != 0) per channel, app, colour and kind",
            self.errors.clone(),
        );
        registry.register(
            "dyeline_spans_duration_seconds",
            "Span duration per channel, app, colour and kind",
            self.duration.clone(),
        );
    }

    /// Counts the spans of `batch` (rows of the `spans` schema).
    pub fn observe(&self, batch: &RecordBatch, releases: &dyn Releases) {
        let (Some(app), Some(color), Some(kind), Some(err), Some(dur), Some(trace)) = (
            batch.column_by_name(col::SERVICE_NAME),
            batch.column_by_name(col::COLOR),
            batch.column_by_name(col::TRAFFIC_KIND),
            batch.column_by_name(col::IS_ERROR),
            batch.column_by_name(col::DURATION_NS),
            batch.column_by_name(col::TRACE_ID),
        ) else {
            return;
        };
        let trace = trace.as_string::<i32>();
        let exemplar = |row: usize| {
            Some(TraceExemplar {
                trace_id: trace.value(row).to_owned(),
            })
        };
        let (app, color, kind) = (
            app.as_string::<i32>(),
            color.as_string::<i32>(),
            kind.as_string::<i32>(),
        );
        let (err, dur) = (err.as_boolean(), dur.as_primitive::<Int64Type>());
        // (app, color, kind) → (count, errors, durations)
        let mut groups: HashMap<(&str, &str, &str), Group> = HashMap::new();
        for i in 0..batch.num_rows() {
            if kind.is_null(i) {
                continue;
            }
            let g = groups
                .entry((app.value(i), color.value(i), kind.value(i)))
                .or_default();
            let d = dur.value(i).max(0) as f64 / 1e9;
            g.spans += 1;
            g.last = i;
            if err.value(i) {
                g.errors += 1;
                g.last_error = Some(i);
            }
            if g.slowest.is_none_or(|(s, _, _)| d > s) {
                g.slowest = Some((d, g.durations.len(), i));
            }
            g.durations.push(d);
        }
        let mut channels: HashMap<&str, String> = HashMap::new();
        for ((a, c, k), g) in groups {
            let channel = channels
                .entry(a)
                .or_insert_with(|| {
                    releases
                        .effective_channel(a)
                        .unwrap_or_else(|| "none".to_owned())
                })
                .clone();
            let mut labels = SpanLabels {
                channel,
                app: a.to_owned(),
                color: c.to_owned(),
                kind: k.to_owned(),
            };
            {
                let mut series = self.series.lock();
                if !series.contains(&labels) {
                    if series.len() >= self.max_series {
                        labels.app = "_other".into();
                    }
                    series.insert(labels.clone());
                }
            }
            self.requests
                .get_or_create(&labels)
                .inc_by(g.spans, exemplar(g.last), None);
            let errors = self.errors.get_or_create(&labels);
            if let Some(row) = g.last_error {
                errors.inc_by(g.errors, exemplar(row), None);
            }
            let h = self.duration.get_or_create(&labels);
            for (j, d) in g.durations.into_iter().enumerate() {
                // The slowest span's observation carries the exemplar of its bucket.
                let label = match g.slowest {
                    Some((_, at, row)) if at == j => exemplar(row),
                    _ => None,
                };
                h.observe(d, label, None);
            }
        }
    }
}

/// The span metrics as an observer of the rows the store keeps, each app's channel named by
/// `releases`.
pub struct SpanMetricsObserver {
    /// The metrics.
    pub metrics: std::sync::Arc<SpanMetrics>,
    /// The release state now.
    pub releases: std::sync::Arc<dyn Releases>,
}

impl KeptRowsObserver for SpanMetricsObserver {
    fn observe(&self, kept: &RecordBatch) {
        self.metrics.observe(kept, self.releases.as_ref());
    }
}
