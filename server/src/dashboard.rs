//! The dashboard's data: [`DashboardAdapter`] implements `dyeline_ui::DashboardSource` over
//! the store (through the analyzer's one scan), the control plane and the live alerts.
//!
//! **Snapshots.** One load and report of a range (a snapshot) serves every span-derived panel
//! of a page ([`parts`]); the live parts (channel state, operations, alerts, weights in
//! force) are read fresh on every request, so a write shows at once. A snapshot is made at a
//! data version (rows written, newest control op, alert changes). When the data has moved
//! on, a request is answered from the newest snapshot of the same range, or of a range of
//! the same length ending at most [`MAX_LAG_NS`] earlier (a live range moves every second),
//! while a fresh snapshot is computed in the background (one at a time); pages say
//! up to when their spans were analysed. Only a range never seen before is computed while
//! the request waits, and that reads through the analyzer's per-file cache
//! ([`dyeline_queries::analyze::read::files`]): only the files not read before and the memory
//! segments are scanned.

mod parts;

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use dyeline_control::{ControlError, Role};
use dyeline_model::Color;
use dyeline_model::release::{Op, ReleaseState, Timeline};
use dyeline_model::weights::count_aware_weights;
use dyeline_queries::alerts::AlertState;
use dyeline_queries::analyze::read::files::{SpanCache, load_cached};
use dyeline_queries::analyze::spans::Spans;
use dyeline_queries::analyze::{Report, report};
use dyeline_queries::{SqlError, drilldown, search};
use dyeline_ui::{
    Action, AlertLine, ChannelPage, ChannelRow, DashboardSource, Identity, InstanceRow, OpLine,
    Overview, SourceError, TimeRange, TraceHit, TraceSearch, TraceSpan, TraceView, WeightPreview,
};
use parking_lot::Mutex;

use crate::api::ApiState;
use parts::{ChannelParts, FIVE_MIN_NS, OverviewParts, hop_line};

/// How far (ns) the end of a served snapshot's range may lag the requested end for a range of
/// the same length (5 s).
pub const MAX_LAG_NS: i64 = 5_000_000_000;
/// Snapshots kept (the most recently made).
const KEEP: usize = 8;

/// One load and report of a range at a data version, with its panels computed on demand.
struct Snapshot {
    range: TimeRange,
    version: u64,
    spans: Spans,
    /// Start of the first span, Unix ns (rates divide from here, `TimeRange::rate_seconds`).
    first_start: Option<i64>,
    report: Report,
    timeline: Timeline,
    overview: std::sync::OnceLock<OverviewParts>,
    channels: Mutex<std::collections::HashMap<String, Arc<ChannelParts>>>,
}

struct Inner {
    state: Arc<ApiState>,
    rows_written: prometheus_client::metrics::counter::Counter,
    table: Arc<dyeline_store::table::SpansTable>,
    cache: Arc<SpanCache>,
    snapshots: Mutex<Vec<Arc<Snapshot>>>,
    /// A background analysis is running.
    refreshing: std::sync::atomic::AtomicBool,
    /// (data version, newest span start) of the last lookup.
    newest: Mutex<Option<(u64, Option<i64>)>>,
}

/// The dashboard's source over the server's state.
pub struct DashboardAdapter {
    inner: Arc<Inner>,
}

impl DashboardAdapter {
    /// An adapter over `state`; `rows_written` is the store's rows-written counter (a
    /// clone shares its value), part of the data version; `table` is the store's `spans`
    /// table, read through a [`SpanCache`] of its files.
    pub fn new(
        state: Arc<ApiState>,
        rows_written: prometheus_client::metrics::counter::Counter,
        table: Arc<dyeline_store::table::SpansTable>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                state,
                rows_written,
                table,
                cache: Arc::new(SpanCache::default()),
                snapshots: Mutex::new(Vec::new()),
                refreshing: std::sync::atomic::AtomicBool::new(false),
                newest: Mutex::new(None),
            }),
        }
    }
}

impl DashboardAdapter {
    /// Analyses the pages' default range in the background ([`dyeline_ui::range::resolve`]:
    /// the last 5 minutes, or the hour that ends at the newest span of an older capture), so
    /// the first page after the server starts does not wait for every Parquet file of that
    /// hour to be read (about 0.5 s on an hour of demo data). Failures are logged at warn.
    pub fn warm(&self) {
        let me = Arc::clone(&self.inner);
        tokio::spawn(async move {
            let newest = match me.state.sql.newest_span_unix_nano().await {
                Ok(n) => n,
                Err(e) => {
                    tracing::warn!(error = %e, "dashboard warm-up failed");
                    return;
                }
            };
            let now = dyeline_ui::range::now_whole_seconds();
            let Ok(range) = dyeline_ui::range::resolve(None, None, now, newest) else {
                return;
            };
            if let Err(e) = me.make(range).await {
                tracing::warn!(error = %e, "dashboard warm-up failed");
            }
        });
    }
}

impl Inner {
    fn data_version(&self) -> u64 {
        let alerts = self.state.alerts.lock().version();
        self.rows_written
            .get()
            .wrapping_mul(1_000_003)
            .wrapping_add(self.state.plane.latest_seq())
            .wrapping_mul(1_000_003)
            .wrapping_add(alerts)
    }

    async fn make(&self, range: TimeRange) -> Result<Arc<Snapshot>, SourceError> {
        let version = self.data_version();
        let started = std::time::Instant::now();
        let timeline = self.state.plane.timeline();
        let spans = load_cached(
            &self.table,
            &self.cache,
            &timeline,
            Some(range.from_unix_nano),
            Some(range.to_unix_nano),
        )
        .await
        .map_err(|e| sql_error(e.into()))?;
        let report = report(&spans, &self.state.analyzer, false);
        let first_start = spans.iter().map(|s| s.start).min();
        let snap = Arc::new(Snapshot {
            range,
            version,
            first_start,
            spans,
            report,
            timeline,
            overview: std::sync::OnceLock::new(),
            channels: Mutex::new(std::collections::HashMap::new()),
        });
        tracing::debug!(
            spans = snap.spans.len(),
            seconds = started.elapsed().as_secs_f64(),
            "dashboard snapshot"
        );
        let mut all = self.snapshots.lock();
        all.retain(|s| s.range != range);
        all.push(Arc::clone(&snap));
        if all.len() > KEEP {
            all.remove(0);
        }
        Ok(snap)
    }

    fn refresh_later(self: &Arc<Self>, range: TimeRange) {
        // One background analysis at a time, whatever the range: a live range moves every
        // second, and analyses that overlap would only compete for the same cores.
        use std::sync::atomic::Ordering;
        if self.refreshing.swap(true, Ordering::AcqRel) {
            return;
        }
        let me = Arc::clone(self);
        tokio::spawn(async move {
            if let Err(e) = me.make(range).await {
                tracing::warn!(error = %e, "dashboard snapshot failed");
            }
            me.refreshing.store(false, Ordering::Release);
        });
    }

    /// The snapshot serving `range` (see the module docs).
    async fn snapshot(self: &Arc<Self>, range: TimeRange) -> Result<Arc<Snapshot>, SourceError> {
        let version = self.data_version();
        let len = range.to_unix_nano - range.from_unix_nano;
        let best = {
            let all = self.snapshots.lock();
            all.iter()
                .filter(|s| {
                    s.range == range
                        || (s.range.to_unix_nano - s.range.from_unix_nano == len
                            && s.range.to_unix_nano <= range.to_unix_nano
                            && range.to_unix_nano - s.range.to_unix_nano <= MAX_LAG_NS)
                })
                .max_by_key(|s| (s.range == range, s.range.to_unix_nano, s.version))
                .cloned()
        };
        match best {
            Some(s) if s.range == range && s.version == version => Ok(s),
            Some(s) => {
                self.refresh_later(range);
                Ok(s)
            }
            None => self.make(range).await,
        }
    }

    fn alerts_of(&self, channel: &str) -> Vec<AlertLine> {
        let mut v: Vec<AlertLine> = self
            .state
            .alerts
            .lock()
            .list(None)
            .into_iter()
            .filter(|a| a.labels.get("channel").map(String::as_str) == Some(channel))
            .map(|a| AlertLine {
                name: a.labels.get("alertname").cloned().unwrap_or_default(),
                state: match a.state {
                    AlertState::Firing => "firing".into(),
                    AlertState::Resolved => "resolved".into(),
                },
                labels: a
                    .labels
                    .iter()
                    .filter(|(k, _)| !matches!(k.as_str(), "alertname" | "channel"))
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(" "),
                summary: a.annotations.get("summary").cloned().unwrap_or_default(),
                color: a.labels.get("color").cloned(),
                kind: a.labels.get("type").cloned().unwrap_or_default(),
                starts_at_unix_nano: a.starts_at_unix_nano,
                ends_at_unix_nano: a.ends_at_unix_nano,
                trace_ids: a.exemplar_trace_ids.clone(),
            })
            .collect();
        v.sort_by(|a, b| {
            (a.state != "firing", -a.starts_at_unix_nano)
                .cmp(&(b.state != "firing", -b.starts_at_unix_nano))
        });
        v
    }
}

impl Snapshot {
    fn overview(&self) -> &OverviewParts {
        self.overview.get_or_init(|| {
            let started = std::time::Instant::now();
            let parts = parts::overview_parts(&self.spans, &self.report, self.range);
            tracing::debug!(
                ms = started.elapsed().as_secs_f64() * 1e3,
                "dashboard overview parts"
            );
            parts
        })
    }

    fn channel(
        &self,
        id: &str,
        analyzer: &dyeline_queries::analyze::AnalyzerConfig,
    ) -> Result<Arc<ChannelParts>, SourceError> {
        if let Some(p) = self.channels.lock().get(id) {
            return Ok(Arc::clone(p));
        }
        let started = std::time::Instant::now();
        let p = Arc::new(parts::channel_parts(
            &self.spans,
            &self.report,
            &self.timeline,
            analyzer,
            id,
            self.range,
        )?);
        tracing::debug!(
            channel = id,
            ms = started.elapsed().as_secs_f64() * 1e3,
            "dashboard channel parts"
        );
        self.channels.lock().insert(id.to_owned(), Arc::clone(&p));
        Ok(p)
    }
}

impl Inner {
    /// Rows of the overview: live channel state with the snapshot's loads.
    fn channel_rows(&self, snap: &Snapshot) -> Vec<ChannelRow> {
        let parts = snap.overview();
        let firing = self.state.alerts.lock().firing();
        let mut rows: Vec<ChannelRow> = self
            .state
            .plane
            .channels()
            .into_iter()
            .map(|c| {
                let id = c.id.to_string();
                let l = parts.channels.get(&id).cloned().unwrap_or_default();
                ChannelRow {
                    state: c.state.as_str().to_owned(),
                    blue_percent: c.blue_percent,
                    apps: c.apps.clone(),
                    blue: l.blue,
                    green: l.green,
                    unknown_requests: l.unknown_requests,
                    firing_alerts: firing
                        .iter()
                        .filter(|a| a.labels.get("channel") == Some(&id))
                        .count(),
                    hops_last_5m: l.hops_last_5m,
                    id,
                }
            })
            .collect();
        rows.sort_by(|a, b| (a.id != "global", &a.id).cmp(&(b.id != "global", &b.id)));
        rows
    }
}

/// Maps an analysis error to the page's.
pub(crate) fn sql_error(e: SqlError) -> SourceError {
    match e {
        SqlError::Syntax(m) => SourceError::Invalid(m),
        other => SourceError::Internal(other.to_string()),
    }
}

fn control_error(e: ControlError) -> SourceError {
    let m = e.to_string();
    match e.status().as_u16() {
        400 => SourceError::Invalid(m),
        401 => SourceError::Unauthorized(m),
        403 => SourceError::Forbidden(m),
        404 => SourceError::NotFound(m),
        409 | 412 => SourceError::Conflict(m),
        _ => SourceError::Internal(m),
    }
}

/// The page's row of a drilldown span (already flat: the drilldown gives depth-first order).
fn trace_span(node: drilldown::SpanNode) -> TraceSpan {
    TraceSpan {
        span_id: node.span_id,
        parent_span_id: node.parent_span_id,
        depth: node.depth,
        name: node.name,
        span_kind: node.span_kind,
        traffic_kind: node.traffic_kind,
        app: node.app,
        instance: node.instance,
        host: node.host,
        color: node.color,
        decisions: node
            .decisions
            .iter()
            .map(|(c, v)| format!("{c}={v}"))
            .collect::<Vec<_>>()
            .join("&"),
        start_unix_nano: node.start_time_unix_nano.parse().unwrap_or(0),
        duration_ns: node.duration_ns,
        status_code: node.status_code,
        is_error: node.is_error,
        waiting_for_parent: node.waiting_for_parent,
        hops: node.hops.iter().map(hop_line).collect(),
        missing_decision_channels: node.missing_decision_channels,
    }
}

#[async_trait]
impl DashboardSource for DashboardAdapter {
    async fn newest_span_unix_nano(&self) -> Result<Option<i64>, SourceError> {
        let me = &self.inner;
        // Rows written count every accepted span, so an unchanged version means no newer span.
        let version = me.data_version();
        if let Some((v, newest)) = *me.newest.lock()
            && v == version
        {
            return Ok(newest);
        }
        let newest = me
            .state
            .sql
            .newest_span_unix_nano()
            .await
            .map_err(sql_error)?;
        *me.newest.lock() = Some((version, newest));
        Ok(newest)
    }

    async fn overview(&self, range: TimeRange) -> Result<Overview, SourceError> {
        let snap = self.inner.snapshot(range).await?;
        Ok(Overview {
            channels: self.inner.channel_rows(&snap),
            unknown_instances: snap.overview().unknown_instances.clone(),
            analysed_to_unix_nano: (snap.range != range).then_some(snap.range.to_unix_nano),
            data_from_unix_nano: snap.first_start,
        })
    }

    async fn channel(
        &self,
        id: &str,
        range: TimeRange,
    ) -> Result<Option<ChannelPage>, SourceError> {
        let me = &self.inner;
        let Ok(now) = me.state.plane.channel(id) else {
            return Ok(None);
        };
        let snap = me.snapshot(range).await?;
        let Some(row) = me.channel_rows(&snap).into_iter().find(|c| c.id == id) else {
            return Ok(None);
        };
        let p = snap.channel(id, &me.state.analyzer)?;
        let releasing = now.state == ReleaseState::Releasing;
        let instances = p
            .instances
            .iter()
            .map(|i| {
                let (nb, ng) = i.app_instances;
                let weight = (releasing && i.color != Color::Unknown)
                    .then(|| count_aware_weights(now.blue_percent, nb.max(1), ng.max(1)).ok())
                    .flatten()
                    .map(|w| {
                        if i.color == Color::Blue {
                            w.blue_weight
                        } else {
                            w.green_weight
                        }
                    });
                InstanceRow {
                    app: i.app.clone(),
                    instance: i.instance.clone(),
                    color: i.color.as_str().to_owned(),
                    requests: i.requests,
                    color_mean: i.color_mean,
                    skewed: i.skewed,
                    weight,
                }
            })
            .collect();
        let ops = me
            .state
            .plane
            .op_records(Some(id))
            .into_iter()
            .map(|r| OpLine {
                seq: r.seq,
                t_unix_nano: r.t_unix_nano,
                op: r.op.name().to_owned(),
                blue_percent: match r.op {
                    Op::Ratio(p) => Some(p),
                    _ => None,
                },
                actor: r.actor,
                note: r.note,
            })
            .collect();
        Ok(Some(ChannelPage {
            channel: row,
            version: now.version,
            step_seconds: p.step_seconds,
            steps: p.steps.clone(),
            ops,
            apps: p.apps.clone(),
            hops: p.hops.clone(),
            missing: p.missing.clone(),
            findings: p.findings.clone(),
            instances,
            alerts: me.alerts_of(id),
            analysed_to_unix_nano: (snap.range != range).then_some(snap.range.to_unix_nano),
            data_from_unix_nano: snap.first_start,
        }))
    }

    async fn trace(&self, trace_id: &str, offset: usize) -> Result<Option<TraceView>, SourceError> {
        let state = &self.inner.state;
        let timeline = state.plane.timeline();
        let page_size = state.trace_views.max_spans();
        let page = drilldown::TracePage {
            offset,
            limit: page_size,
        };
        let view = drilldown::trace(state.sql.context(), &timeline, trace_id, page)
            .await
            .map_err(sql_error)?;
        Ok(view.map(|v| {
            state.trace_views.served(&v);
            TraceView {
                trace_id: v.trace_id,
                span_count: v.span_count,
                offset: v.offset,
                page_size,
                start_unix_nano: v.start_time_unix_nano.parse().unwrap_or(0),
                end_unix_nano: v.end_time_unix_nano.parse().unwrap_or(0),
                hop_spans: v.hop_span_count,
                missing_spans: v.missing_decision_span_count,
                spans: v.spans.into_iter().map(trace_span).collect(),
            }
        }))
    }

    async fn search(
        &self,
        q: &TraceSearch,
        range: TimeRange,
    ) -> Result<Vec<TraceHit>, SourceError> {
        let query = search::TraceQuery {
            channel: q.channel.clone(),
            app: q.app.clone(),
            color: q.color.as_deref().and_then(Color::parse),
            error: q.error,
            hop: q.hop,
            min_duration_ms: q.min_duration_ms,
            from: range.from_unix_nano,
            to: range.to_unix_nano,
            limit: q.limit,
        };
        let snap = self.inner.snapshot(range).await?;
        let hits = search::search_in(&snap.spans, &snap.report.cross_color_hops, &query);
        Ok(hits
            .into_iter()
            .map(|h| TraceHit {
                trace_id: h.trace_id,
                start_unix_nano: h.start_unix_nano.parse().unwrap_or(0),
                duration_ms: h.duration_ms,
                spans: h.spans,
                apps: h.apps,
                colors: h.colors,
                error: h.error,
                hops: h.hops,
            })
            .collect())
    }

    async fn preview(
        &self,
        id: &str,
        action: &Action,
        range: TimeRange,
    ) -> Result<Vec<WeightPreview>, SourceError> {
        let channel = self.inner.state.plane.channel(id).map_err(control_error)?;
        let recent = TimeRange {
            from_unix_nano: range.from_unix_nano.max(range.to_unix_nano - FIVE_MIN_NS),
            to_unix_nano: range.to_unix_nano,
        };
        let snap = self.inner.snapshot(range).await?;
        let spans = &snap.spans;
        // Instances seen per app and colour: the channel's apps (global: the apps whose
        // effective channel was global), in the last 5 minutes of the range.
        let cid = spans.channels.get(id);
        let mut seen: BTreeMap<
            String,
            (
                std::collections::BTreeSet<u32>,
                std::collections::BTreeSet<u32>,
            ),
        > = BTreeMap::new();
        for a in &channel.apps {
            seen.entry(a.clone()).or_default();
        }
        for s in spans.iter().filter(|s| {
            s.start >= recent.from_unix_nano
                && (channel
                    .apps
                    .iter()
                    .any(|a| spans.apps.get(a) == Some(s.app))
                    || (channel.apps.is_empty() && cid.is_some() && s.channel == cid))
        }) {
            let e = seen.entry(spans.apps.name(s.app).to_owned()).or_default();
            match s.color {
                Color::Blue => {
                    e.0.insert(s.instance);
                }
                Color::Green => {
                    e.1.insert(s.instance);
                }
                Color::Unknown => {}
            }
        }
        let bp = action.blue_percent_after();
        seen.into_iter()
            .map(|(app, (b, g))| {
                let (nb, ng) = (b.len() as u32, g.len() as u32);
                let w = count_aware_weights(bp, nb.max(1), ng.max(1))
                    .map_err(|e| SourceError::Invalid(e.to_string()))?;
                Ok(WeightPreview {
                    app,
                    blue_instances: nb,
                    green_instances: ng,
                    blue_weight: w.blue_weight,
                    green_weight: w.green_weight,
                })
            })
            .collect()
    }

    async fn identify(&self, token: &str) -> Result<Identity, SourceError> {
        let who = self
            .inner
            .state
            .auth
            .identify(token)
            .map_err(control_error)?;
        Ok(Identity {
            name: who.name,
            can_write: who.role == Role::Write,
        })
    }

    async fn write(
        &self,
        token: &str,
        id: &str,
        action: &Action,
        if_match: Option<u64>,
        note: Option<&str>,
    ) -> Result<(), SourceError> {
        let who = self.identify(token).await?;
        if !who.can_write {
            return Err(SourceError::Forbidden(format!(
                "token {:?} may only read",
                who.name
            )));
        }
        let op = match action {
            Action::Start => Op::Start,
            Action::Ratio(p) => Op::Ratio(*p),
            Action::Finish => Op::Finish,
        };
        self.inner
            .state
            .plane
            .write(id, op, &who.name, if_match, note)
            .await
            .map(|_| ())
            .map_err(control_error)
    }

    fn data_version(&self) -> u64 {
        self.inner.data_version()
    }
}
