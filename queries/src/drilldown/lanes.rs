//! The lane side of a trace view (domain §7): each span's lane, tag, intended lane and the
//! lane group of its app at its start, and the lane marks the analyzer's judge gives its spans
//! ([`crate::analyze::detect::lanes::marks`]). The judge asks whether instances were present
//! around the trace, so the signals around it are read from the store first ([`around`]):
//! the spans of every instance and the `presence` table's rows within the presence window W
//! of the trace, each instance's signals grouped into buckets W long (a bucket's first start
//! and last end stand for its signals: for any t, an instance is present by the bucket's
//! interval exactly when it is by its signals, since no two signals of a bucket are more
//! than W apart), so a view reads a few rows per instance, not every span around.

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Int64Type};
use datafusion::prelude::SessionContext;
use dyeline_model::LaneId;

use crate::analyze::config::LaneWindows;
use crate::analyze::detect::lanes::{Covered, LaneMark, TraceLanes, asks_capacity, trace_lanes};
use crate::analyze::spans::Spans;
use crate::sql::SqlError;

/// What a page row shows of its span's lane.
#[derive(Clone, Debug, Default)]
pub(super) struct SpanLane {
    pub lane: String,
    pub tag: Option<String>,
    pub intended: Option<String>,
    pub group: Option<String>,
    pub marks: Vec<LaneMark>,
}

/// The lane side of a trace: its marks, and the rows of the spans `page` names (indices of
/// [`Spans::iter`]).
pub(super) struct ViewLanes {
    /// Spans of the whole trace with a lane mark.
    pub marked_spans: usize,
    /// The page's rows, in page order.
    pub rows: Vec<SpanLane>,
}

/// The signals around `spans` (one trace) that its lane marks need, when any rule may ask for
/// capacity ([`asks_capacity`]); none otherwise.
///
/// # Errors
/// [`SqlError::Internal`] when a scan fails.
pub(super) async fn around(
    ctx: &SessionContext,
    spans: &Spans,
    windows: &LaneWindows,
) -> Result<Vec<Covered>, SqlError> {
    if spans.is_empty() || !asks_capacity(spans) {
        return Ok(Vec::new());
    }
    let lo = spans.iter().map(|s| s.start).min().unwrap_or(0);
    let hi = spans.iter().map(|s| s.end.max(s.start)).max().unwrap_or(lo);
    let w = i64::try_from(windows.presence_window.as_nanos()).unwrap_or(i64::MAX);
    let bucket = w.max(1);
    let (from, to) = (lo.saturating_sub(w), hi.saturating_add(w));
    // A span started up to 2W before the trace that still ran W before it is a signal too.
    let lane = format!("COALESCE(CAST(lane AS VARCHAR), '{}')", LaneId::BASE);
    let spans_sql = format!(
        "SELECT CAST(service_name AS VARCHAR), CAST(instance_id AS VARCHAR), {lane}, \
         min(start_time_unix_nano), max(end_time_unix_nano) FROM spans \
         WHERE start_time_unix_nano >= {} AND start_time_unix_nano <= {to} \
         AND end_time_unix_nano >= {from} \
         GROUP BY service_name, instance_id, {lane}, start_time_unix_nano / {bucket}",
        lo.saturating_sub(w.saturating_mul(2)),
    );
    let out = super::scan(ctx, &spans_sql, Vec::new(), push).await?;
    presence_rows(ctx, from, to, w, out).await
}

/// `out` with the `presence` table's rows in `[from, to]` (none when the session has no such
/// table) added, each instance's grouped in buckets W = `window_ns` long (see the module
/// docs).
///
/// # Errors
/// [`SqlError::Internal`] when the scan fails.
pub(crate) async fn presence_rows(
    ctx: &SessionContext,
    from: i64,
    to: i64,
    window_ns: i64,
    out: Vec<Covered>,
) -> Result<Vec<Covered>, SqlError> {
    let has_presence = ctx
        .table_exist("presence")
        .map_err(|e| SqlError::Internal(e.to_string()))?;
    if !has_presence {
        return Ok(out);
    }
    let lane = format!("COALESCE(CAST(lane AS VARCHAR), '{}')", LaneId::BASE);
    let bucket = window_ns.max(1);
    let presence_sql = format!(
        "SELECT CAST(service_name AS VARCHAR), CAST(instance_id AS VARCHAR), {lane}, \
         min(time_unix_nano), max(time_unix_nano) FROM presence \
         WHERE time_unix_nano >= {from} AND time_unix_nano <= {to} \
         GROUP BY service_name, instance_id, {lane}, time_unix_nano / {bucket}"
    );
    super::scan(ctx, &presence_sql, out, push).await
}

/// The rows of one batch of [`around`]'s queries: app, instance, lane, first, last.
fn push(out: &mut Vec<Covered>, b: RecordBatch) -> Result<(), SqlError> {
    let bad = || SqlError::Internal("unexpected columns around a trace".into());
    if b.num_columns() != 5 {
        return Err(bad());
    }
    // Strings may come as views or dictionaries, whatever the plan made of them.
    let cast = |k: usize, to: &DataType| {
        arrow::compute::cast(b.column(k), to).map_err(|e| SqlError::Internal(e.to_string()))
    };
    let cols = [
        cast(0, &DataType::Utf8)?,
        cast(1, &DataType::Utf8)?,
        cast(2, &DataType::Utf8)?,
        cast(3, &DataType::Int64)?,
        cast(4, &DataType::Int64)?,
    ];
    let text = |k: usize| cols[k].as_string_opt::<i32>().ok_or_else(bad);
    let int = |k: usize| cols[k].as_primitive_opt::<Int64Type>().ok_or_else(bad);
    let (app, instance, lane, first, last) = (text(0)?, text(1)?, text(2)?, int(3)?, int(4)?);
    for r in 0..b.num_rows() {
        if app.is_null(r) || instance.is_null(r) || first.is_null(r) {
            continue;
        }
        let start = first.value(r);
        out.push(Covered {
            app: app.value(r).to_owned(),
            instance: instance.value(r).to_owned(),
            lane: lane.value(r).to_owned(),
            start,
            end: if last.is_null(r) {
                start
            } else {
                last.value(r).max(start)
            },
        });
    }
    Ok(())
}

/// The lane side of `spans` (one trace) for the page's spans `page` (indices of
/// [`Spans::iter`]), judged with the signals `around` it.
pub(super) fn view_lanes(
    spans: &Spans,
    windows: &LaneWindows,
    around: &[Covered],
    page: impl Iterator<Item = usize>,
) -> ViewLanes {
    let judged: TraceLanes = trace_lanes(spans, windows, around);
    let names = &spans.lanes.names;
    let rows = page
        .map(|i| {
            let s = spans.get(i);
            let fact = spans.lanes.fact(s.lane);
            SpanLane {
                lane: names.name(fact.lane).to_owned(),
                tag: fact.tag.map(|t| names.name(t).to_owned()),
                intended: judged.intended(names, i),
                group: spans
                    .lane_groups
                    .group_at(spans.apps.name(s.app), s.start)
                    .map(|g| g.id().as_str().to_owned()),
                marks: judged.marks(i).to_vec(),
            }
        })
        .collect();
    ViewLanes {
        marked_spans: judged.marked_spans(),
        rows,
    }
}
