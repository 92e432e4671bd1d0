//! The dashboard's data: [`DashboardAdapter`] implements `dyeline_ui::DashboardSource` over
//! the store (through the snapshots of [`dyeline_queries::panels::snapshots`]), the control
//! plane and the live alerts. It computes nothing itself: it copies the panels of
//! [`dyeline_queries::panels`] into the pages' types, adds the live parts (channel state,
//! operations, alerts, weights in force) per request, and maps errors to the pages'.

use std::sync::Arc;

use async_trait::async_trait;
use dyeline_control::{ControlError, Role};
use dyeline_model::release::{Op, ReleaseState, Timeline};
use dyeline_model::weights::count_aware_weights;
use dyeline_model::{Color, HasCategory};
use dyeline_queries::alerts::AlertState;
use dyeline_queries::panels::snapshots::{Snapshot, SnapshotInputs, Snapshots};
use dyeline_queries::panels::{self, FIVE_MIN_NS, lanes};
use dyeline_queries::{SqlError, drilldown, search, span_detail};
use dyeline_ui::{
    Action, AlertLine, AppRow, ChannelPage, ChannelRow, ColorLatency, ColorLoad, DashboardSource,
    HopEdge, Identity, InstanceRow, LaneAppRow, LaneCell, LaneCountsView, LaneErrorSeries,
    LaneFindingRow, LaneGroupLine, LaneGroupView, LaneInstance, LaneScope, LanesIndex, LanesPage,
    LatencyComparison, MissingRow, OpLine, Overview, SourceError, Step, TimeRange, TraceHit,
    TraceSearch, TraceView, UnknownInstance, WeightPreview, WindowFinding,
};
use parking_lot::Mutex;

use crate::wiring::http::ApiState;
use trace::trace_span;

mod trace;

struct Inner {
    state: Arc<ApiState>,
    rows_written: prometheus_client::metrics::counter::Counter,
    /// (data version, newest span start) of the last lookup.
    newest: Mutex<Option<(u64, Option<i64>)>>,
}

/// The dashboard's source over the server's state.
pub struct DashboardAdapter {
    inner: Arc<Inner>,
    snapshots: Arc<Snapshots>,
}

impl DashboardAdapter {
    /// An adapter over `state`; `rows_written` is the store's rows-written counter (a
    /// clone shares its value), part of the data version; `table` is the store's `spans`
    /// table, read through the snapshots' cache of its files.
    pub fn new(
        state: Arc<ApiState>,
        rows_written: prometheus_client::metrics::counter::Counter,
        table: Arc<dyeline_store::table::SpansTable>,
    ) -> Self {
        let analyzer = state.analysis.analyzer.clone();
        let inner = Arc::new(Inner {
            state,
            rows_written,
            newest: Mutex::new(None),
        });
        let snapshots = Arc::new(Snapshots::new(
            Arc::clone(&inner) as Arc<dyn SnapshotInputs>,
            analyzer,
            table,
        ));
        Self { inner, snapshots }
    }
}

impl DashboardAdapter {
    /// Analyses the pages' default range in the background ([`dyeline_ui::range::resolve`]:
    /// the last 5 minutes, or the hour that ends at the newest span of an older capture), so
    /// the first page after the server starts does not wait for every Parquet file of that
    /// hour to be read (about 0.5 s on an hour of demo data). Failures are logged at warn.
    pub fn warm(&self) {
        let me = Arc::clone(&self.inner);
        let snapshots = Arc::clone(&self.snapshots);
        tokio::spawn(async move {
            let newest = match me.state.analysis.sql.newest_span_unix_nano().await {
                Ok(n) => n,
                Err(e) => {
                    tracing::warn!(error = %e, "dashboard warm-up failed");
                    return;
                }
            };
            let now = dyeline_ui::range::now_whole_seconds();
            let Ok(range) = dyeline_ui::range::resolve(
                None,
                None,
                now,
                newest,
                &dyeline_ui::locale::Zone::utc(),
            ) else {
                return;
            };
            if let Err(e) = snapshots.make(queries_range(range)).await {
                tracing::warn!(error = %sql_error(e), "dashboard warm-up failed");
            }
        });
    }

    /// The snapshot serving `range`.
    async fn snapshot(&self, range: TimeRange) -> Result<Arc<Snapshot>, SourceError> {
        self.snapshots
            .snapshot(queries_range(range))
            .await
            .map_err(sql_error)
    }
}

/// The page's range as the panels'.
fn queries_range(r: TimeRange) -> panels::TimeRange {
    panels::TimeRange {
        from_unix_nano: r.from_unix_nano,
        to_unix_nano: r.to_unix_nano,
    }
}

/// A panel's load as the page's.
fn color_load(l: &panels::ColorLoad) -> ColorLoad {
    ColorLoad {
        requests: l.requests,
        errors: l.errors,
        p99_ms: l.p99_ms,
    }
}

impl SnapshotInputs for Inner {
    fn data_version(&self) -> u64 {
        let alerts = self.state.analysis.alerts.lock().version();
        self.rows_written
            .get()
            .wrapping_mul(1_000_003)
            .wrapping_add(self.state.plane.latest_seq())
            .wrapping_mul(1_000_003)
            .wrapping_add(alerts)
    }

    fn timeline(&self) -> Timeline {
        self.state.plane.timeline()
    }
}

impl Inner {
    /// The lane groups as the control plane holds them now: the lanes pages show these (a
    /// snapshot's timeline may predate a change).
    fn lane_groups(&self) -> Vec<dyeline_model::release::LaneGroup> {
        self.state
            .plane
            .lane_groups()
            .into_iter()
            .map(|g| g.group)
            .collect()
    }

    fn alerts_of(&self, channel: &str) -> Vec<AlertLine> {
        self.alerts_where(
            |l| l.get("channel").map(String::as_str) == Some(channel),
            "channel",
        )
    }

    /// The alerts of the lane findings of lane group `group` (`None`: of apps in no group).
    fn lane_alerts_of(&self, group: Option<&str>) -> Vec<AlertLine> {
        self.alerts_where(
            |l| l.contains_key("lane") && l.get("lane_group").map(String::as_str) == group,
            "lane_group",
        )
    }

    /// The alerts whose labels `keep` keeps, firing first, newest first, each with its
    /// labels but `alertname` and `scope` (the label the page is of).
    fn alerts_where(
        &self,
        keep: impl Fn(&std::collections::BTreeMap<String, String>) -> bool,
        scope: &str,
    ) -> Vec<AlertLine> {
        let mut v: Vec<AlertLine> = self
            .state
            .analysis
            .alerts
            .lock()
            .list(None)
            .into_iter()
            .filter(|a| keep(&a.labels))
            .map(|a| AlertLine {
                name: a.labels.get("alertname").cloned().unwrap_or_default(),
                state: match a.state {
                    AlertState::Firing => "firing".into(),
                    AlertState::Resolved => "resolved".into(),
                },
                labels: a
                    .labels
                    .iter()
                    .filter(|(k, _)| k.as_str() != "alertname" && k.as_str() != scope)
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

impl Inner {
    /// Rows of the overview: live channel state with the snapshot's loads.
    fn channel_rows(&self, snap: &Snapshot) -> Vec<ChannelRow> {
        let parts = snap.overview();
        let firing = self.state.analysis.alerts.lock().firing();
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
                    blue: color_load(&l.blue),
                    green: color_load(&l.green),
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
fn sql_error(e: SqlError) -> SourceError {
    match e {
        SqlError::Syntax(m) => SourceError::Invalid(m),
        other => SourceError::Internal(other.to_string()),
    }
}

/// Maps a control-plane error to the page's by its category (409 and 412 both as a conflict).
fn control_error(e: ControlError) -> SourceError {
    SourceError::from_category(e.category(), e.to_string())
}

/// The latency comparison as the page's.
fn latency_comparison(l: &panels::latency::LatencyComparison) -> LatencyComparison {
    let color = |c: &panels::latency::ColorLatency| ColorLatency {
        counts: c.counts.clone(),
        requests: c.requests,
        p50_ms: c.p50_ms,
        p90_ms: c.p90_ms,
        p99_ms: c.p99_ms,
    };
    LatencyComparison {
        bounds_ms: l.bounds_ms.clone(),
        blue: color(&l.blue),
        green: color(&l.green),
    }
}

/// A step of the panel's time series as the page's.
fn step(s: &dyeline_queries::summary::Step) -> Step {
    Step {
        start_unix_nano: s.start_unix_nano.parse().unwrap_or(0),
        blue: ColorLoad {
            requests: s.blue.requests,
            errors: s.blue.errors,
            p99_ms: s.blue.p99_ms,
        },
        green: ColorLoad {
            requests: s.green.requests,
            errors: s.green.errors,
            p99_ms: s.green.p99_ms,
        },
        blue_share: s.blue_share,
        blue_percent: s.blue_percent,
        hops: s.hops,
    }
}

fn app_row(a: &panels::AppRow) -> AppRow {
    AppRow {
        app: a.app.clone(),
        blue: color_load(&a.blue),
        green: color_load(&a.green),
        unknown_requests: a.unknown_requests,
    }
}

fn hop_edge(h: &panels::HopEdge) -> HopEdge {
    HopEdge {
        from_app: h.from_app.clone(),
        from_color: h.from_color.clone(),
        to_app: h.to_app.clone(),
        to_color: h.to_color.clone(),
        kind: h.kind.clone(),
        reason: h.reason.clone(),
        via: h.via.clone(),
        count: h.count,
        trace_ids: h.trace_ids.clone(),
    }
}

fn missing_row(m: &panels::MissingRow) -> MissingRow {
    MissingRow {
        caller_app: m.caller_app.clone(),
        app: m.app.clone(),
        kind: m.kind.clone(),
        count: m.count,
        trace_ids: m.trace_ids.clone(),
    }
}

fn window_finding(w: &dyeline_queries::analyze::WindowFinding) -> WindowFinding {
    WindowFinding {
        finding: w.finding,
        app: w.app.clone(),
        color: w.color.as_str().into(),
        kind: w.kind.as_str().into(),
        instance: w.instance.clone(),
        detail: w.detail.clone(),
        window_start_unix_nano: w.window_start_unix_nano,
        trace_ids: w.trace_ids.clone(),
    }
}

/// A lanes panel's cell as the page's.
fn lane_cell(c: lanes::Cell) -> LaneCell {
    LaneCell {
        instances: c
            .instances
            .into_iter()
            .map(|i| LaneInstance {
                instance: i.instance,
                signals: i.signals,
                present_at_end: i.recent,
            })
            .collect(),
        served_in_lane: c.served_in_lane,
        lane_fallback: c.lane_fallback,
        failover: c.failover,
        leaked: c.leaked,
        pollution: c.pollution,
        requests: c.requests,
        errors: c.errors,
        p99_ms: c.p99_ms,
    }
}

#[async_trait]
impl DashboardSource for DashboardAdapter {
    async fn newest_span_unix_nano(&self) -> Result<Option<i64>, SourceError> {
        let me = &self.inner;
        // Rows written count every accepted span, so an unchanged version means no newer span.
        let version = SnapshotInputs::data_version(me.as_ref());
        if let Some((v, newest)) = *me.newest.lock()
            && v == version
        {
            return Ok(newest);
        }
        let newest = me
            .state
            .analysis
            .sql
            .newest_span_unix_nano()
            .await
            .map_err(sql_error)?;
        *me.newest.lock() = Some((version, newest));
        Ok(newest)
    }

    async fn overview(&self, range: TimeRange) -> Result<Overview, SourceError> {
        let snap = self.snapshot(range).await?;
        Ok(Overview {
            channels: self.inner.channel_rows(&snap),
            unknown_instances: snap
                .overview()
                .unknown_instances
                .iter()
                .map(|u| UnknownInstance {
                    app: u.app.clone(),
                    instance: u.instance.clone(),
                    host: None,
                    spans: u.spans,
                })
                .collect(),
            analysed_to_unix_nano: (snap.range != queries_range(range))
                .then_some(snap.range.to_unix_nano),
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
        let snap = self.snapshot(range).await?;
        let Some(row) = me.channel_rows(&snap).into_iter().find(|c| c.id == id) else {
            return Ok(None);
        };
        let p = snap
            .channel(
                id,
                &me.state.analysis.analyzer,
                dyeline_ui::range::step_ns(&range),
            )
            .map_err(sql_error)?;
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
            steps: p.steps.iter().map(step).collect(),
            ops,
            apps: p.apps.iter().map(app_row).collect(),
            hops: p.hops.iter().map(hop_edge).collect(),
            missing: p.missing.iter().map(missing_row).collect(),
            findings: p.findings.iter().map(window_finding).collect(),
            instances,
            alerts: me.alerts_of(id),
            analysed_to_unix_nano: (snap.range != queries_range(range))
                .then_some(snap.range.to_unix_nano),
            data_from_unix_nano: snap.first_start,
            latency: latency_comparison(&p.latency),
        }))
    }

    async fn trace(&self, trace_id: &str, offset: usize) -> Result<Option<TraceView>, SourceError> {
        let state = &self.inner.state;
        let timeline = state.plane.timeline();
        let page_size = state.analysis.trace_views.max_spans();
        let page = drilldown::TracePage {
            offset,
            limit: page_size,
        };
        let id = drilldown::normalize_trace_id(trace_id).map_err(sql_error)?;
        let (ctx, _) = state.analysis.trace_session(&id).await.map_err(sql_error)?;
        let view = drilldown::trace(
            &ctx,
            &timeline,
            &state.analysis.analyzer.lanes,
            trace_id,
            page,
        )
        .await
        .map_err(sql_error)?;
        Ok(view.map(|v| {
            state.analysis.trace_views.served(&v);
            TraceView {
                trace_id: v.trace_id,
                span_count: v.span_count,
                offset: v.offset,
                page_size,
                start_unix_nano: v.start_time_unix_nano.parse().unwrap_or(0),
                end_unix_nano: v.end_time_unix_nano.parse().unwrap_or(0),
                hop_spans: v.hop_span_count,
                missing_spans: v.missing_decision_span_count,
                lane_mark_spans: v.lane_mark_span_count,
                spans: v.spans.into_iter().map(trace_span).collect(),
            }
        }))
    }

    async fn lanes_index(&self, range: TimeRange) -> Result<LanesIndex, SourceError> {
        let snap = self.snapshot(range).await?;
        let firing = self.inner.state.analysis.alerts.lock().firing();
        let current = self.inner.lane_groups();
        let groups = lanes::lanes_index(&snap.spans, &snap.report, &current)
            .into_iter()
            .map(|g| LaneGroupLine {
                firing_alerts: firing
                    .iter()
                    .filter(|a| {
                        a.labels.get("lane_group").map(String::as_str) == g.group.as_deref()
                            && a.labels.contains_key("lane")
                    })
                    .count(),
                group: g.group,
                apps: g.apps,
                lanes: g.lanes,
                findings: g.findings,
                lane_fallback: g.lane_fallback,
            })
            .collect();
        Ok(LanesIndex {
            groups,
            analysed_to_unix_nano: (snap.range != queries_range(range))
                .then_some(snap.range.to_unix_nano),
        })
    }

    async fn lanes(
        &self,
        scope: LaneScope<'_>,
        range: TimeRange,
    ) -> Result<Option<LanesPage>, SourceError> {
        let current = self.inner.lane_groups();
        let scope = match scope {
            LaneScope::Group(id) => match current.iter().find(|g| g.id().as_str() == id) {
                Some(g) => Some(g),
                None => return Ok(None),
            },
            LaneScope::Ungrouped => None,
        };
        let alerts = self.inner.lane_alerts_of(scope.map(|g| g.id().as_str()));
        let snap = self.snapshot(range).await?;
        let step = dyeline_ui::range::step_ns(&range);
        let w = self.inner.state.analysis.analyzer.lanes.presence_window;
        let w = i64::try_from(w.as_nanos()).unwrap_or(i64::MAX);
        let p = lanes::lanes_panel(
            &snap.spans,
            &snap.report,
            scope,
            &current,
            snap.range,
            step,
            w,
        );
        Ok(Some(LanesPage {
            alerts,
            group: p.group.map(|g| LaneGroupView {
                id: g.id,
                entry_apps: g.entry_apps,
                strict_lanes: g.strict_lanes,
                reverse_fallback: g.reverse_fallback,
            }),
            apps: p
                .apps
                .into_iter()
                .map(|(app, cells)| LaneAppRow {
                    app,
                    cells: cells.into_iter().map(lane_cell).collect(),
                })
                .collect(),
            lanes: p.lanes,
            findings: p
                .findings
                .into_iter()
                .map(|f| LaneFindingRow {
                    finding: f.finding.to_owned(),
                    place: f.place,
                    lane: f.lane,
                    kind: f.kind,
                    reason: f.reason,
                    count: f.count,
                    first_unix_nano: f.first_unix_nano,
                    trace_ids: f.trace_ids,
                })
                .collect(),
            counts: LaneCountsView {
                lane_fallback: p.counts.lane_fallback,
                failover: p.counts.failover,
                tag_not_recorded: p.counts.tag_not_recorded,
                reverse_fallback: p.counts.reverse_fallback,
                undetermined: p.counts.undetermined,
                malformed_lane_tags: p.counts.malformed_lane_tags,
            },
            step_seconds: u64::try_from(step / 1_000_000_000).unwrap_or(1),
            error_rates: p
                .error_rates
                .into_iter()
                .map(|(app, lanes)| LaneErrorSeries { app, lanes })
                .collect(),
            analysed_to_unix_nano: (snap.range != queries_range(range))
                .then_some(snap.range.to_unix_nano),
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
            lane: q.lane.clone(),
            lane_tag: q.lane_tag.clone(),
            lane_group: q.lane_group.clone(),
            lane_finding: q
                .lane_finding
                .as_deref()
                .and_then(search::lane_finding_type),
            attribute: q
                .attribute
                .as_deref()
                .map(span_detail::AttributeFilter::parse)
                .transpose()
                .map_err(SourceError::Invalid)?,
            from: range.from_unix_nano,
            to: range.to_unix_nano,
            limit: q.limit,
        };
        let snap = self.snapshot(range).await?;
        let with_attribute =
            search::attribute_traces(self.inner.state.analysis.sql.context(), &query)
                .await
                .map_err(sql_error)?;
        let hits = search::search_in(
            &snap.spans,
            &snap.report.cross_color_hops,
            snap.report.lane.as_ref(),
            with_attribute.as_ref(),
            &query,
        );
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
        let snap = self.snapshot(range).await?;
        // Instances seen per app and colour: the channel's apps (global: the apps whose
        // effective channel was global), in the last 5 minutes of the range.
        let since = range.from_unix_nano.max(range.to_unix_nano - FIVE_MIN_NS);
        let seen = panels::instances_seen(&snap.spans, id, &channel.apps, since);
        let bp = action.blue_percent_after();
        seen.into_iter()
            .map(|(app, nb, ng)| {
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
        force: bool,
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
            .write_with(id, op, &who.name, if_match, note, force)
            .await
            .map(|_| ())
            .map_err(control_error)
    }

    fn data_version(&self) -> u64 {
        self.inner.data_version()
    }
}
