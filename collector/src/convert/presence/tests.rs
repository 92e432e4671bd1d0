//! Unit and property tests of the presence conversion.

use super::*;
use arrow::array::{Array, AsArray};
use arrow::datatypes::Int64Type;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};
use opentelemetry_proto::tonic::logs::v1::{ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::metrics::v1::{
    ExponentialHistogram, ExponentialHistogramDataPoint, Gauge, Histogram, HistogramDataPoint,
    NumberDataPoint, ResourceMetrics, ScopeMetrics, Sum, Summary, SummaryDataPoint,
};
use proptest::prelude::*;

fn kv(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(Value::StringValue(value.into())),
        }),
        ..Default::default()
    }
}

fn resource(attrs: &[(&str, &str)]) -> Option<Resource> {
    Some(Resource {
        attributes: attrs.iter().map(|(k, v)| kv(k, v)).collect(),
        ..Default::default()
    })
}

fn number(start: u64, time: u64) -> NumberDataPoint {
    NumberDataPoint {
        start_time_unix_nano: start,
        time_unix_nano: time,
        ..Default::default()
    }
}

fn metric(name: &str, data: Data) -> Metric {
    Metric {
        name: name.into(),
        data: Some(data),
        ..Default::default()
    }
}

fn metrics_request(resources: Vec<(Option<Resource>, Vec<Metric>)>) -> ExportMetricsServiceRequest {
    ExportMetricsServiceRequest {
        resource_metrics: resources
            .into_iter()
            .map(|(resource, metrics)| ResourceMetrics {
                resource,
                scope_metrics: vec![ScopeMetrics {
                    metrics,
                    ..Default::default()
                }],
                ..Default::default()
            })
            .collect(),
    }
}

/// (instance_id, service_name, color, time, signal) of each row.
fn rows(p: &PresenceRows) -> Vec<(String, String, String, i64, String)> {
    let Some(b) = &p.batch else {
        return Vec::new();
    };
    let s = |name: &str| b.column_by_name(name).unwrap().as_string::<i32>().clone();
    let (inst, app, color, signal) = (s("instance_id"), s("service_name"), s("color"), s("signal"));
    let time = b
        .column_by_name("time_unix_nano")
        .unwrap()
        .as_primitive::<Int64Type>();
    (0..b.num_rows())
        .map(|i| {
            (
                inst.value(i).to_owned(),
                app.value(i).to_owned(),
                color.value(i).to_owned(),
                time.value(i),
                signal.value(i).to_owned(),
            )
        })
        .collect()
}

#[test]
fn every_metric_kind_counts_at_its_data_points_time_never_its_start() {
    let all = vec![
        metric(
            "g",
            Data::Gauge(Gauge {
                data_points: vec![number(0, 100)],
            }),
        ),
        metric(
            "s",
            Data::Sum(Sum {
                data_points: vec![number(5, 200)],
                ..Default::default()
            }),
        ),
        metric(
            "h",
            Data::Histogram(Histogram {
                data_points: vec![HistogramDataPoint {
                    start_time_unix_nano: 6,
                    time_unix_nano: 300,
                    ..Default::default()
                }],
                ..Default::default()
            }),
        ),
        metric(
            "e",
            Data::ExponentialHistogram(ExponentialHistogram {
                data_points: vec![ExponentialHistogramDataPoint {
                    start_time_unix_nano: 7,
                    time_unix_nano: 400,
                    ..Default::default()
                }],
                ..Default::default()
            }),
        ),
        metric(
            "q",
            Data::Summary(Summary {
                data_points: vec![SummaryDataPoint {
                    start_time_unix_nano: 8,
                    time_unix_nano: 500,
                    ..Default::default()
                }],
            }),
        ),
        Metric::default(),
    ];
    let times: Vec<Vec<u64>> = all.iter().map(data_point_times).collect();
    assert_eq!(
        times,
        [
            vec![100],
            vec![200],
            vec![300],
            vec![400],
            vec![500],
            vec![]
        ]
    );
    let req = metrics_request(vec![(
        resource(&[
            ("service.name", "order"),
            ("host.name", "order-green-1"),
            ("service.instance.id", "order-1"),
        ]),
        all,
    )]);
    let p = metrics_presence(&req, &ConvertOptions::default()).unwrap();
    let got: Vec<i64> = rows(&p).iter().map(|r| r.3).collect();
    assert_eq!(
        got,
        [100, 200, 300, 400, 500],
        "the start times (5..8) are never rows"
    );
    let first = &rows(&p)[0];
    assert_eq!(
        (
            first.0.as_str(),
            first.1.as_str(),
            first.2.as_str(),
            first.4.as_str()
        ),
        ("order-1", "order", "green", "metrics")
    );
    assert_eq!((p.rejected, p.repeated), (0, 0));
}

#[test]
fn repeated_instance_and_time_pairs_are_one_row() {
    // Two metrics at one export time, the same instance again in a second resource, and a
    // second instance at the same time.
    let at = |t| {
        vec![
            metric(
                "a",
                Data::Gauge(Gauge {
                    data_points: vec![number(0, t), number(0, t)],
                }),
            ),
            metric(
                "b",
                Data::Sum(Sum {
                    data_points: vec![number(1, t)],
                    ..Default::default()
                }),
            ),
        ]
    };
    let req = metrics_request(vec![
        (
            resource(&[("service.name", "pay"), ("host.name", "pay-1")]),
            at(10),
        ),
        (
            resource(&[("service.name", "pay"), ("host.name", "pay-1")]),
            at(10),
        ),
        (
            resource(&[("service.name", "pay"), ("host.name", "pay-2")]),
            at(10),
        ),
        (
            resource(&[("service.name", "pay"), ("host.name", "pay-1")]),
            at(20),
        ),
    ]);
    let p = metrics_presence(&req, &ConvertOptions::default()).unwrap();
    let got: Vec<(String, i64)> = rows(&p).into_iter().map(|r| (r.0, r.3)).collect();
    assert_eq!(
        got,
        [("pay-1", 10), ("pay-2", 10), ("pay-1", 20)].map(|(i, t)| (i.to_owned(), t))
    );
    assert_eq!(p.repeated, 12 - 3);
    assert_eq!(p.rejected, 0);
}

#[test]
fn items_without_a_usable_time_are_rejected_and_counted_exactly() {
    let req = metrics_request(vec![(
        resource(&[("k8s.pod.name", "cart-blue-5f7")]),
        vec![
            metric(
                "ok",
                Data::Gauge(Gauge {
                    data_points: vec![number(0, 0), number(0, 42), number(0, u64::MAX)],
                }),
            ),
            metric(
                "late",
                Data::Sum(Sum {
                    data_points: vec![number(0, i64::MAX as u64 + 1)],
                    ..Default::default()
                }),
            ),
        ],
    )]);
    let p = metrics_presence(&req, &ConvertOptions::default()).unwrap();
    assert_eq!(p.rejected, 3);
    assert_eq!(
        p.first_error.as_deref(),
        Some(
            "resource_metrics[0].scope_metrics[0].metrics[0] (\"ok\").data_points[0]: \
             time_unix_nano: no time (0)"
        )
    );
    let r = rows(&p);
    assert_eq!(r.len(), 1);
    // Identity from the pod name, the colour from its token; the app defaults.
    assert_eq!(
        (r[0].0.as_str(), r[0].1.as_str(), r[0].2.as_str(), r[0].3),
        ("cart-blue-5f7", "unknown_service", "blue", 42)
    );
    // Nothing usable: no batch, and the count says why.
    let none = metrics_request(vec![(
        None,
        vec![metric(
            "z",
            Data::Gauge(Gauge {
                data_points: vec![number(9, 0)],
            }),
        )],
    )]);
    let p = metrics_presence(&none, &ConvertOptions::default()).unwrap();
    assert!(p.batch.is_none() && p.is_empty());
    assert_eq!(p.rejected, 1);
}

fn record(time: u64, observed: u64) -> LogRecord {
    LogRecord {
        time_unix_nano: time,
        observed_time_unix_nano: observed,
        ..Default::default()
    }
}

#[test]
fn log_records_count_at_their_time_else_when_observed() {
    assert_eq!(log_record_time(&record(5, 9)), 5);
    assert_eq!(log_record_time(&record(0, 9)), 9);
    assert_eq!(log_record_time(&record(0, 0)), 0);
    let req = ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: resource(&[("service.name", "notify"), ("service.instance.id", "n-1")]),
            scope_logs: vec![ScopeLogs {
                log_records: vec![
                    record(5, 9),
                    record(0, 7),
                    record(0, 0),
                    record(5, 100),
                    record(u64::MAX, 3),
                ],
                ..Default::default()
            }],
            ..Default::default()
        }],
    };
    let p = logs_presence(&req, &ConvertOptions::default()).unwrap();
    let got: Vec<(i64, String)> = rows(&p).into_iter().map(|r| (r.3, r.4)).collect();
    assert_eq!(got, [(5, "logs".to_owned()), (7, "logs".to_owned())]);
    // (0, 0) has no time; u64::MAX is past 2262 (its observed time does not stand in).
    assert_eq!((p.rejected, p.repeated), (2, 1));
    assert_eq!(
        p.first_error.as_deref(),
        Some(
            "resource_logs[0].scope_logs[0].log_records[2]: time_unix_nano and \
             observed_time_unix_nano: no time (0)"
        )
    );
}

proptest! {
    /// Rows are the distinct usable times; every other item is rejected or repeated, and
    /// together they are all the items.
    #[test]
    fn rows_rejections_and_repeats_add_up(times in prop::collection::vec(
        prop_oneof![Just(0u64), 1u64..50, Just(u64::MAX), (i64::MAX as u64)..=(i64::MAX as u64 + 2)],
        0..40,
    )) {
        let points = times.iter().map(|&t| number(0, t)).collect();
        let req = metrics_request(vec![(
            resource(&[("host.name", "h")]),
            vec![metric("m", Data::Gauge(Gauge { data_points: points }))],
        )]);
        let p = metrics_presence(&req, &ConvertOptions::default()).unwrap();
        let usable: std::collections::BTreeSet<u64> =
            times.iter().copied().filter(|&t| t != 0 && t <= i64::MAX as u64).collect();
        let got: Vec<i64> = rows(&p).iter().map(|r| r.3).collect();
        let mut sorted = got.clone();
        sorted.sort_unstable();
        prop_assert_eq!(sorted, usable.iter().map(|&t| t as i64).collect::<Vec<_>>());
        let bad = times.iter().filter(|&&t| t == 0 || t > i64::MAX as u64).count() as u64;
        prop_assert_eq!(p.rejected, bad);
        prop_assert_eq!(p.rejected + p.repeated + got.len() as u64, times.len() as u64);
    }
}

/// (instance, lane, lane_rule, lane_invalid_values) of each row.
fn lanes(p: &PresenceRows) -> Vec<(String, String, String, Vec<String>)> {
    let b = p.batch.as_ref().unwrap();
    let s = |name: &str| b.column_by_name(name).unwrap().as_string::<i32>().clone();
    let (inst, lane, rule) = (s("instance_id"), s("lane"), s("lane_rule"));
    let invalid = b
        .column_by_name("lane_invalid_values")
        .unwrap()
        .as_list::<i32>();
    (0..b.num_rows())
        .map(|i| {
            let values = if invalid.is_null(i) {
                Vec::new()
            } else {
                let v = invalid.value(i);
                let v = v.as_string::<i32>();
                (0..v.len()).map(|j| v.value(j).to_owned()).collect()
            };
            (
                inst.value(i).to_owned(),
                lane.value(i).to_owned(),
                rule.value(i).to_owned(),
                values,
            )
        })
        .collect()
}

#[test]
fn each_resource_gets_its_lane_by_the_configured_rules() {
    use dyeline_model::{LaneRule, LaneRules};
    let rules = LaneRules::new(&[LaneRule::Attribute {
        key: "nacos.metadata.gray".into(),
        map: Some([("true".to_owned(), "gray".to_owned())].into()),
    }])
    .unwrap();
    let options = ConvertOptions {
        lane_rules: Arc::new(rules),
        ..ConvertOptions::default()
    };
    let flag = |v: bool| KeyValue {
        key: "nacos.metadata.gray".into(),
        value: Some(AnyValue {
            value: Some(Value::BoolValue(v)),
        }),
        ..Default::default()
    };
    let with = |host: &str, extra: Vec<KeyValue>| {
        let mut r = resource(&[("host.name", host)]).unwrap();
        r.attributes.extend(extra);
        Some(r)
    };
    let up = || {
        vec![metric(
            "up",
            Data::Gauge(Gauge {
                data_points: vec![number(0, 7)],
            }),
        )]
    };
    let req = metrics_request(vec![
        (with("a", vec![kv("deploy.lane", " Gray2 ")]), up()),
        (with("b", vec![flag(true)]), up()),
        (
            with("c", vec![kv("deploy.lane", "gray_2"), flag(false)]),
            up(),
        ),
        (with("d", vec![]), up()),
    ]);
    let p = metrics_presence(&req, &options).unwrap();
    let row = |i: &str, l: &str, r: &str, bad: &[&str]| {
        (
            i.to_owned(),
            l.to_owned(),
            r.to_owned(),
            bad.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>(),
        )
    };
    assert_eq!(
        lanes(&p),
        [
            row("a", "gray2", "deploy.lane", &[]),
            row("b", "gray", "nacos.metadata.gray", &[]),
            // Not a lane id, and a value the map lacks: both kept, the chain ends at base.
            row("c", "base", "default", &["gray_2", "false"]),
            row("d", "base", "default", &[]),
        ]
    );
    let invalid = p
        .batch
        .as_ref()
        .unwrap()
        .column_by_name("lane_invalid_values")
        .unwrap()
        .clone();
    assert_eq!(invalid.null_count(), 3, "null when none");
}
