//! OTLP metrics and logs exports → rows of the `presence` table (domain §7.1, Presence;
//! [`dyeline_model::presence`]): per resource, its instance as spans see it (identity, app,
//! colour, lane: the same resource reading, `super::attrs`) and the signal times; the data
//! itself is not kept.
//!
//! Owns which time an item counts at ([`data_point_times`], [`log_record_time`]): a data
//! point's `time_unix_nano`, whatever its metric kind (a sum's `start_time_unix_nano` is the
//! process or series start and means nothing for presence); a log record's `time_unix_nano`,
//! else its `observed_time_unix_nano`; never the time the export was received. An item with no
//! usable time (0, or past the year 2262) is rejected one by one (OTLP partial success:
//! `rejected_data_points`, `rejected_log_records`) and the rest kept. Repeated (instance, time)
//! pairs within one request are one row (a metrics export carries one time for each of its
//! many data points).

use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Builder, ListBuilder, RecordBatch, StringBuilder};
use arrow::error::ArrowError;
use dyeline_model::PresenceSignal;
use dyeline_model::presence::presence_schema;
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::logs::v1::LogRecord;
use opentelemetry_proto::tonic::metrics::v1::Metric;
use opentelemetry_proto::tonic::metrics::v1::metric::Data;
use opentelemetry_proto::tonic::resource::v1::Resource;

use super::ConvertOptions;
use super::attrs::{ResourceInfo, resource_info};
use crate::wire::kvs;

/// The presence rows of one metrics or logs export.
#[derive(Debug, Clone, Default)]
pub struct PresenceRows {
    /// Rows in the `presence` schema; `None` when there is none.
    pub batch: Option<RecordBatch>,
    /// Data points or log records rejected for their time.
    pub rejected: u64,
    /// The first rejection, phrased for the OTLP `partial_success.error_message`.
    pub first_error: Option<String>,
    /// Items whose (instance, time) another item of the request already gave (not rejected:
    /// recorded once).
    pub repeated: u64,
}

impl PresenceRows {
    /// Rows held.
    pub fn len(&self) -> usize {
        self.batch.as_ref().map_or(0, RecordBatch::num_rows)
    }

    /// True when no row is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The `time_unix_nano` of every data point of `metric`, in order, whatever its kind (gauge,
/// sum, histogram, exponential histogram, summary); none for a metric without data.
pub fn data_point_times(metric: &Metric) -> Vec<u64> {
    match &metric.data {
        Some(Data::Gauge(d)) => d.data_points.iter().map(|p| p.time_unix_nano).collect(),
        Some(Data::Sum(d)) => d.data_points.iter().map(|p| p.time_unix_nano).collect(),
        Some(Data::Histogram(d)) => d.data_points.iter().map(|p| p.time_unix_nano).collect(),
        Some(Data::ExponentialHistogram(d)) => {
            d.data_points.iter().map(|p| p.time_unix_nano).collect()
        }
        Some(Data::Summary(d)) => d.data_points.iter().map(|p| p.time_unix_nano).collect(),
        None => Vec::new(),
    }
}

/// The time a log record counts at: its `time_unix_nano`, else (0: unknown, OTLP) its
/// `observed_time_unix_nano`; 0 when neither is set.
pub fn log_record_time(record: &LogRecord) -> u64 {
    if record.time_unix_nano != 0 {
        record.time_unix_nano
    } else {
        record.observed_time_unix_nano
    }
}

/// A signal time as stored, or why it cannot be.
fn usable(t: u64) -> Result<i64, &'static str> {
    match t {
        0 => Err("no time (0)"),
        t => i64::try_from(t).map_err(|_| "a time beyond the year 2262"),
    }
}

/// Presence of a metrics export: one row per instance and distinct data point time.
///
/// # Errors
/// Only an internal Arrow error (a bug).
pub fn metrics_presence(
    request: &ExportMetricsServiceRequest,
    options: &ConvertOptions,
) -> Result<PresenceRows, ArrowError> {
    let mut b = Rows::new(PresenceSignal::Metrics);
    for (ri, rm) in request.resource_metrics.iter().enumerate() {
        let res = resource(rm.resource.as_ref(), options);
        for (si, sm) in rm.scope_metrics.iter().enumerate() {
            for (mi, metric) in sm.metrics.iter().enumerate() {
                for (pi, t) in data_point_times(metric).into_iter().enumerate() {
                    b.push(&res, t, || {
                        format!(
                            "resource_metrics[{ri}].scope_metrics[{si}].metrics[{mi}] ({:?}).data_points[{pi}]: time_unix_nano",
                            metric.name
                        )
                    });
                }
            }
        }
    }
    b.finish()
}

/// Presence of a logs export: one row per instance and distinct log record time.
///
/// # Errors
/// Only an internal Arrow error (a bug).
pub fn logs_presence(
    request: &ExportLogsServiceRequest,
    options: &ConvertOptions,
) -> Result<PresenceRows, ArrowError> {
    let mut b = Rows::new(PresenceSignal::Logs);
    for (ri, rl) in request.resource_logs.iter().enumerate() {
        let res = resource(rl.resource.as_ref(), options);
        for (si, sl) in rl.scope_logs.iter().enumerate() {
            for (li, record) in sl.log_records.iter().enumerate() {
                b.push(&res, log_record_time(record), || {
                    format!(
                        "resource_logs[{ri}].scope_logs[{si}].log_records[{li}]: time_unix_nano and observed_time_unix_nano"
                    )
                });
            }
        }
    }
    b.finish()
}

/// The resource's instance as spans see it, with its lane by the same rules.
fn resource(resource: Option<&Resource>, options: &ConvertOptions) -> ResourceInfo {
    let attrs = resource.map_or_else(Vec::new, |r| kvs(&r.attributes));
    resource_info(&attrs, &options.color_rules, Some(&options.lane_rules))
}

/// The builders of one request's rows, its rejections and the (instance, time) pairs seen.
struct Rows {
    signal: PresenceSignal,
    seen: HashSet<(String, i64)>,
    instance_id: StringBuilder,
    service_name: StringBuilder,
    host_name: StringBuilder,
    color: StringBuilder,
    color_rule: StringBuilder,
    lane: StringBuilder,
    lane_rule: StringBuilder,
    lane_invalid_values: ListBuilder<StringBuilder>,
    time_unix_nano: Int64Builder,
    out: PresenceRows,
}

impl Rows {
    fn new(signal: PresenceSignal) -> Self {
        let schema = presence_schema();
        let item = match schema
            .field_with_name(dyeline_model::presence::col::LANE_INVALID_VALUES)
            .map(|f| f.data_type().clone())
        {
            Ok(arrow::datatypes::DataType::List(item)) => item,
            _ => unreachable!("lane_invalid_values is a list"),
        };
        Self {
            signal,
            seen: HashSet::new(),
            instance_id: StringBuilder::new(),
            service_name: StringBuilder::new(),
            host_name: StringBuilder::new(),
            color: StringBuilder::new(),
            color_rule: StringBuilder::new(),
            lane: StringBuilder::new(),
            lane_rule: StringBuilder::new(),
            lane_invalid_values: ListBuilder::new(StringBuilder::new()).with_field(item),
            time_unix_nano: Int64Builder::new(),
            out: PresenceRows::default(),
        }
    }

    /// Records `res` at `time`, or rejects the item (`at` names it, for the message).
    fn push(&mut self, res: &ResourceInfo, time: u64, at: impl FnOnce() -> String) {
        let time = match usable(time) {
            Ok(t) => t,
            Err(why) => {
                self.out.rejected += 1;
                self.out
                    .first_error
                    .get_or_insert_with(|| format!("{}: {why}", at()));
                return;
            }
        };
        if !self.seen.insert((res.instance_id.clone(), time)) {
            self.out.repeated += 1;
            return;
        }
        self.instance_id.append_value(&res.instance_id);
        self.service_name.append_value(&res.service_name);
        self.host_name.append_option(res.host_name.as_deref());
        self.color.append_value(res.color);
        self.color_rule.append_value(&res.color_rule);
        super::lane::append_instance_lane(
            &mut self.lane,
            &mut self.lane_rule,
            &mut self.lane_invalid_values,
            res.lane.as_ref(),
        );
        self.time_unix_nano.append_value(time);
    }

    fn finish(mut self) -> Result<PresenceRows, ArrowError> {
        if self.seen.is_empty() {
            return Ok(self.out);
        }
        let n = self.seen.len();
        let mut signal = StringBuilder::with_capacity(n, n * 7);
        for _ in 0..n {
            signal.append_value(self.signal.as_str());
        }
        // In the schema's order (`presence_schema`; `RecordBatch::try_new` checks the types).
        let columns: Vec<ArrayRef> = vec![
            Arc::new(self.instance_id.finish()),
            Arc::new(self.service_name.finish()),
            Arc::new(self.host_name.finish()),
            Arc::new(self.color.finish()),
            Arc::new(self.color_rule.finish()),
            Arc::new(self.lane.finish()),
            Arc::new(self.lane_rule.finish()),
            Arc::new(self.lane_invalid_values.finish()),
            Arc::new(self.time_unix_nano.finish()),
            Arc::new(signal.finish()),
        ];
        self.out.batch = Some(RecordBatch::try_new(presence_schema(), columns)?);
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests;
