//! The dashboard's data: [`DashboardAdapter`] implements `dyeline_ui::DashboardSource` over
//! the store (through the analyzer's one scan), the control plane and the live alerts.
//!
//! One load of a range serves every panel of a page: the analyzer's report (domain §6), the
//! per-step summary, per-app and per-instance loads. The last load is cached with the data
//! version it was made at (rows written, newest control op, alert changes), so a page, its
//! confirmation and the write behind it, or several viewers of one live range, share it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use async_trait::async_trait;
use axum::http::{HeaderMap, HeaderValue, header};
use dyeline_control::auth::Access;
use dyeline_control::state::{Op, ReleaseState};
use dyeline_control::{ControlError, Timeline};
use dyeline_model::Color;
use dyeline_model::weights::count_aware_weights;
use dyeline_queries::alerts::AlertState;
use dyeline_queries::analyze::load::{Kind, Spans, load};
use dyeline_queries::analyze::{Report, report};
use dyeline_queries::{SqlError, drilldown, search, summary};
use dyeline_ui::{
    Action, AlertLine, AppRow, ChannelPage, ChannelRow, ColorLoad, DashboardSource, HopEdge,
    Identity, InstanceRow, MissingRow, OpLine, Overview, SourceError, Step, TimeRange, TraceHit,
    TraceSearch, TraceSpan, TraceView, UnknownInstance, WeightPreview, WindowFinding,
};
use tokio::sync::Mutex;

use crate::api::ApiState;

const FIVE_MIN_NS: i64 = 5 * 60 * 1_000_000_000;

struct Loaded {
    range: TimeRange,
    version: u64,
    spans: Arc<Spans>,
    report: Arc<Report>,
    timeline: Arc<Timeline>,
}

/// The dashboard's source over the server's state.
pub struct DashboardAdapter {
    state: Arc<ApiState>,
    rows_written: prometheus_client::metrics::counter::Counter,
    last: Mutex<Option<Loaded>>,
    /// (data version, newest span start) of the last lookup.
    newest: parking_lot::Mutex<Option<(u64, Option<i64>)>>,
}

impl DashboardAdapter {
    /// An adapter over `state`; `rows_written` is the store's rows-written counter (a
    /// clone shares its value), part of the data version.
    pub fn new(
        state: Arc<ApiState>,
        rows_written: prometheus_client::metrics::counter::Counter,
    ) -> Self {
        Self {
            state,
            rows_written,
            last: Mutex::new(None),
            newest: parking_lot::Mutex::new(None),
        }
    }

    async fn loaded(
        &self,
        range: TimeRange,
    ) -> Result<(Arc<Spans>, Arc<Report>, Arc<Timeline>), SourceError> {
        let version = self.data_version();
        let mut last = self.last.lock().await;
        if let Some(l) = last.as_ref()
            && l.range == range
            && l.version == version
        {
            return Ok((l.spans.clone(), l.report.clone(), l.timeline.clone()));
        }
        let timeline = Arc::new(self.state.plane.timeline());
        let spans = load(
            self.state.sql.context(),
            &timeline,
            Some(range.from_unix_nano),
            Some(range.to_unix_nano),
        )
        .await
        .map_err(sql_error)?;
        let rep = report(&spans, &self.state.analyzer, false);
        let l = Loaded {
            range,
            version,
            spans: Arc::new(spans),
            report: Arc::new(rep),
            timeline,
        };
        let out = (l.spans.clone(), l.report.clone(), l.timeline.clone());
        *last = Some(l);
        Ok(out)
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

    fn channel_rows(&self, spans: &Spans, rep: &Report, range: TimeRange) -> Vec<ChannelRow> {
        let loads = loads_by(spans, |s| s.channel);
        let firing: Vec<_> = self.state.alerts.lock().firing();
        let mut rows: Vec<ChannelRow> = self
            .state
            .plane
            .channels()
            .into_iter()
            .map(|c| {
                let id = c.id.to_string();
                let cid = spans.channels.get(&id);
                let l = cid
                    .and_then(|i| loads.get(&Some(i)))
                    .cloned()
                    .unwrap_or_default();
                ChannelRow {
                    state: c.state.as_str().to_owned(),
                    blue_percent: c.blue_percent,
                    apps: c.apps.clone(),
                    blue: l.blue.finish(),
                    green: l.green.finish(),
                    unknown_requests: l.unknown,
                    firing_alerts: firing
                        .iter()
                        .filter(|a| a.labels.get("channel") == Some(&id))
                        .count(),
                    hops_last_5m: rep
                        .cross_color_hops
                        .iter()
                        .filter(|h| {
                            h.channel == id && h.t_unix_nano >= range.to_unix_nano - FIVE_MIN_NS
                        })
                        .count() as u64,
                    id,
                }
            })
            .collect();
        rows.sort_by(|a, b| (a.id != "global", &a.id).cmp(&(b.id != "global", &b.id)));
        rows
    }
}

fn sql_error(e: SqlError) -> SourceError {
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

/// Durations and errors of one colour, finished into a [`ColorLoad`].
#[derive(Clone, Default)]
struct Acc {
    durations: Vec<i64>,
    errors: u64,
}

impl Acc {
    fn finish(&self) -> ColorLoad {
        let mut d = self.durations.clone();
        d.sort_unstable();
        ColorLoad {
            requests: d.len() as u64,
            errors: self.errors,
            p99_ms: (!d.is_empty())
                .then(|| d[((d.len() as f64 - 1.0) * 0.99).round() as usize] as f64 / 1e6),
        }
    }
}

#[derive(Clone, Default)]
struct ColorAcc {
    blue: Acc,
    green: Acc,
    unknown: u64,
}

/// Requests (SERVER spans, as the summary counts them) by `key`, per colour.
fn loads_by<K: std::hash::Hash + Eq>(
    spans: &Spans,
    key: impl Fn(&dyeline_queries::analyze::load::SpanRec) -> K,
) -> HashMap<K, ColorAcc> {
    let mut out: HashMap<K, ColorAcc> = HashMap::new();
    for s in spans.spans.iter().filter(|s| s.kind == Kind::Server) {
        let e = out.entry(key(s)).or_default();
        let acc = match s.color {
            Color::Blue => &mut e.blue,
            Color::Green => &mut e.green,
            Color::Unknown => {
                e.unknown += 1;
                continue;
            }
        };
        acc.durations.push(s.end.saturating_sub(s.start).max(0));
        acc.errors += u64::from(s.is_error);
    }
    out
}

fn hop_line(h: &dyeline_queries::analyze::CrossColorHop) -> String {
    format!(
        "{}: {}({}) → {}({}) {}{}",
        h.channel,
        h.from_app,
        h.from_color.unwrap_or("-"),
        h.to_app,
        h.to_color,
        h.reason,
        if h.via.is_empty() {
            String::new()
        } else {
            format!(" via {}", h.via.join(" → "))
        }
    )
}

fn flatten(node: &drilldown::SpanNode, depth: usize, out: &mut Vec<TraceSpan>) {
    out.push(TraceSpan {
        span_id: node.span_id.clone(),
        parent_span_id: node.parent_span_id.clone(),
        depth,
        name: node.name.clone(),
        span_kind: node.span_kind.clone(),
        traffic_kind: node.traffic_kind.clone(),
        app: node.app.clone(),
        instance: node.instance.clone(),
        host: node.host.clone(),
        color: node.color.clone(),
        decisions: node
            .decisions
            .iter()
            .map(|(c, v)| format!("{c}={v}"))
            .collect::<Vec<_>>()
            .join("&"),
        start_unix_nano: node.start_time_unix_nano.parse().unwrap_or(0),
        duration_ns: node.duration_ns,
        status_code: node.status_code.clone(),
        is_error: node.is_error,
        waiting_for_parent: node.waiting_for_parent,
        hops: node.hops.iter().map(hop_line).collect(),
        missing_decision_channels: node.missing_decision_channels.clone(),
    });
    for c in &node.children {
        flatten(c, depth + 1, out);
    }
}

#[async_trait]
impl DashboardSource for DashboardAdapter {
    async fn newest_span_unix_nano(&self) -> Result<Option<i64>, SourceError> {
        self.state
            .sql
            .newest_span_unix_nano()
            .await
            .map_err(sql_error)
    }

    async fn overview(&self, range: TimeRange) -> Result<Overview, SourceError> {
        let (spans, rep, _) = self.loaded(range).await?;
        let mut unknown: BTreeMap<(u32, u32), u64> = BTreeMap::new();
        for s in spans.spans.iter().filter(|s| s.color == Color::Unknown) {
            *unknown.entry((s.app, s.instance)).or_default() += 1;
        }
        let mut unknown_instances: Vec<UnknownInstance> = unknown
            .into_iter()
            .map(|((app, instance), n)| UnknownInstance {
                app: spans.apps.name(app).to_owned(),
                instance: spans.instances.name(instance).to_owned(),
                host: None,
                spans: n,
            })
            .collect();
        unknown_instances.sort_by(|a, b| (&a.app, &a.instance).cmp(&(&b.app, &b.instance)));
        Ok(Overview {
            channels: self.channel_rows(&spans, &rep, range),
            unknown_instances,
        })
    }

    async fn channel(
        &self,
        id: &str,
        range: TimeRange,
    ) -> Result<Option<ChannelPage>, SourceError> {
        let Ok(now) = self.state.plane.channel(id) else {
            return Ok(None);
        };
        let (spans, rep, timeline) = self.loaded(range).await?;
        let Some(row) = self
            .channel_rows(&spans, &rep, range)
            .into_iter()
            .find(|c| c.id == id)
        else {
            return Ok(None);
        };
        let step = dyeline_ui::range::step_ns(&range);
        let sum = summary::summarize(
            &spans,
            &rep,
            &timeline,
            id,
            range.from_unix_nano,
            range.to_unix_nano,
            step,
        )
        .map_err(sql_error)?;
        let steps = sum
            .steps
            .iter()
            .map(|s| Step {
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
            })
            .collect();
        let cid = spans.channels.get(id);
        let in_channel =
            |s: &dyeline_queries::analyze::load::SpanRec| cid.is_some() && s.channel == cid;
        let by_app = loads_by(&spans, |s| in_channel(s).then_some(s.app));
        let mut apps: Vec<AppRow> = by_app
            .iter()
            .filter_map(|(k, l)| k.map(|app| (app, l)))
            .map(|(app, l)| AppRow {
                app: spans.apps.name(app).to_owned(),
                blue: l.blue.finish(),
                green: l.green.finish(),
                unknown_requests: l.unknown,
            })
            .collect();
        apps.sort_by(|a, b| a.app.cmp(&b.app));

        let mut edges: BTreeMap<
            (
                String,
                Option<String>,
                String,
                String,
                String,
                String,
                Vec<String>,
            ),
            (u64, Vec<String>),
        > = BTreeMap::new();
        for h in rep.cross_color_hops.iter().filter(|h| h.channel == id) {
            let e = edges
                .entry((
                    h.from_app.clone(),
                    h.from_color.map(str::to_owned),
                    h.to_app.clone(),
                    h.to_color.to_owned(),
                    h.kind.to_owned(),
                    h.reason.to_owned(),
                    h.via.clone(),
                ))
                .or_default();
            e.0 += 1;
            if e.1.len() < 5 && !e.1.contains(&h.trace_id) {
                e.1.push(h.trace_id.clone());
            }
        }
        let mut hops: Vec<HopEdge> = edges
            .into_iter()
            .map(
                |(
                    (from_app, from_color, to_app, to_color, kind, reason, via),
                    (count, trace_ids),
                )| HopEdge {
                    from_app,
                    from_color,
                    to_app,
                    to_color,
                    kind,
                    reason,
                    via,
                    count,
                    trace_ids,
                },
            )
            .collect();
        hops.sort_by_key(|h| std::cmp::Reverse(h.count));

        let mut miss: BTreeMap<(String, String, String), (u64, Vec<String>)> = BTreeMap::new();
        for m in rep.missing_decisions.iter().filter(|m| m.channel == id) {
            let e = miss
                .entry((m.caller_app.clone(), m.app.clone(), m.kind.to_owned()))
                .or_default();
            e.0 += 1;
            if e.1.len() < 5 && !e.1.contains(&m.trace_id) {
                e.1.push(m.trace_id.clone());
            }
        }
        let missing = miss
            .into_iter()
            .map(|((caller_app, app, kind), (count, trace_ids))| MissingRow {
                caller_app,
                app,
                kind,
                count,
                trace_ids,
            })
            .collect();

        let mut findings = Vec::new();
        for d in rep.drained_side.iter().filter(|d| d.channel == id) {
            findings.push(WindowFinding {
                finding: "drained_side".into(),
                app: Some(d.app.clone()),
                color: d.color.into(),
                kind: d.kind.into(),
                instance: None,
                detail: format!(
                    "{} {} span(s) on drained {} at blue_percent {} ({}); threshold 0",
                    d.count,
                    d.kind,
                    d.color,
                    d.blue_percent,
                    d.instances.join(", ")
                ),
                window_start_unix_nano: d.window_start_unix_nano,
                trace_ids: d.trace_ids.iter().take(5).cloned().collect(),
            });
        }
        for d in rep.ratio_deviation.iter().filter(|d| d.channel == id) {
            findings.push(WindowFinding {
                finding: "ratio_deviation".into(),
                app: Some(d.app.clone()),
                color: d.color.into(),
                kind: d.kind.into(),
                instance: None,
                detail: format!(
                    "blue share {:.1}% of {} requests vs blue_percent {}: gap {:.1} pp > tolerance {:.1} pp{}",
                    d.blue_share * 100.0,
                    d.requests,
                    d.blue_percent,
                    (d.blue_share * 100.0 - f64::from(d.blue_percent)).abs(),
                    d.tolerance * 100.0,
                    d.cause.map(|c| format!(" (cause: {c})")).unwrap_or_default()
                ),
                window_start_unix_nano: d.window_start_unix_nano,
                trace_ids: d.exemplar_trace_ids.clone(),
            });
        }
        let skew_factor = self.state.analyzer.for_channel(id).skew_factor;
        for s in rep.instance_skew.iter().filter(|s| s.channel == id) {
            findings.push(WindowFinding {
                finding: "instance_skew".into(),
                app: Some(s.app.clone()),
                color: s.color.into(),
                kind: s.kind.into(),
                instance: Some(s.instance.clone()),
                detail: format!(
                    "{} of {} {} requests: {:.1}× the mean {:.1} > {}×",
                    s.requests,
                    s.color_requests,
                    s.color,
                    s.requests as f64 / s.mean_requests.max(1e-9),
                    s.mean_requests,
                    skew_factor
                ),
                window_start_unix_nano: s.window_start_unix_nano,
                trace_ids: s.exemplar_trace_ids.clone(),
            });
        }
        let t = self.state.analyzer.for_channel(id);
        for e in rep.error_spike.iter().filter(|e| e.channel == id) {
            findings.push(WindowFinding {
                finding: "error_spike".into(),
                app: e.app.clone(),
                color: e.color.into(),
                kind: e.kind.into(),
                instance: None,
                detail: format!(
                    "error rate {:.2}% ({} of {}) vs other side {:.2}% ({} of {}): ≥ {:.0}% and ≥ {}×, p = {:.1e} < {}",
                    e.error_rate * 100.0,
                    e.errors,
                    e.requests,
                    e.other_error_rate * 100.0,
                    e.other_errors,
                    e.other_requests,
                    t.spike_min_error_rate * 100.0,
                    t.spike_factor,
                    e.p_value,
                    t.spike_p_value
                ),
                window_start_unix_nano: e.window_start_unix_nano,
                trace_ids: e.exemplar_trace_ids.clone(),
            });
        }
        findings.sort_by_key(|f| std::cmp::Reverse(f.window_start_unix_nano));

        // Instances: requests per (app, instance, colour) of the channel's spans.
        let mut per_instance: BTreeMap<(u32, u32, Color), u64> = BTreeMap::new();
        for s in spans
            .spans
            .iter()
            .filter(|s| s.kind == Kind::Server && in_channel(s))
        {
            *per_instance
                .entry((s.app, s.instance, s.color))
                .or_default() += 1;
        }
        let mut group: HashMap<(u32, Color), (u64, u32)> = HashMap::new();
        for (&(app, _, color), &n) in &per_instance {
            let g = group.entry((app, color)).or_default();
            g.0 += n;
            g.1 += 1;
        }
        let releasing = now.state == ReleaseState::Releasing;
        let instances = per_instance
            .iter()
            .map(|(&(app, instance, color), &n)| {
                let (total, count) = group[&(app, color)];
                let name = spans.instances.name(instance).to_owned();
                let nb = group.get(&(app, Color::Blue)).map_or(0, |g| g.1);
                let ng = group.get(&(app, Color::Green)).map_or(0, |g| g.1);
                let weight = (releasing && color != Color::Unknown)
                    .then(|| count_aware_weights(now.blue_percent, nb.max(1), ng.max(1)).ok())
                    .flatten()
                    .map(|w| {
                        if color == Color::Blue {
                            w.blue_weight
                        } else {
                            w.green_weight
                        }
                    });
                InstanceRow {
                    app: spans.apps.name(app).to_owned(),
                    skewed: rep
                        .instance_skew
                        .iter()
                        .any(|s| s.channel == id && s.instance == name),
                    instance: name,
                    color: color.as_str().to_owned(),
                    requests: n,
                    color_mean: total as f64 / f64::from(count.max(1)),
                    weight,
                }
            })
            .collect();
        let ops = self
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
            step_seconds: (step / 1_000_000_000) as u64,
            steps,
            ops,
            apps,
            hops,
            missing,
            findings,
            instances,
            alerts: self.alerts_of(id),
        }))
    }

    async fn trace(&self, trace_id: &str) -> Result<Option<TraceView>, SourceError> {
        let timeline = self.state.plane.timeline();
        let view = drilldown::trace(
            self.state.sql.context(),
            &timeline,
            &self.state.analyzer,
            trace_id,
        )
        .await
        .map_err(sql_error)?;
        Ok(view.map(|v| {
            let mut spans = Vec::with_capacity(v.span_count);
            for r in &v.roots {
                flatten(r, 0, &mut spans);
            }
            TraceView {
                trace_id: v.trace_id,
                spans,
            }
        }))
    }

    async fn search(
        &self,
        q: &TraceSearch,
        range: TimeRange,
    ) -> Result<Vec<TraceHit>, SourceError> {
        let timeline = self.state.plane.timeline();
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
        let hits = search::search(self.state.sql.context(), &timeline, &query)
            .await
            .map_err(sql_error)?;
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
        let channel = self.state.plane.channel(id).map_err(control_error)?;
        let recent = TimeRange {
            from_unix_nano: range.from_unix_nano.max(range.to_unix_nano - FIVE_MIN_NS),
            to_unix_nano: range.to_unix_nano,
        };
        let (spans, _, _) = self.loaded(range).await?;
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
        for s in spans.spans.iter().filter(|s| {
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
        let mut h = HeaderMap::new();
        let value = HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| SourceError::Unauthorized("the token is not valid".into()))?;
        h.insert(header::AUTHORIZATION, value);
        match self.state.auth.authorize(&h, Access::Write) {
            Ok(Some(name)) => Ok(Identity {
                name,
                can_write: true,
            }),
            Err(ControlError::Forbidden(name)) => Ok(Identity {
                name,
                can_write: false,
            }),
            Ok(None) => Err(SourceError::Unauthorized("give a token".into())),
            Err(e) => Err(control_error(e)),
        }
    }

    async fn write(
        &self,
        token: &str,
        id: &str,
        action: &Action,
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
        self.state
            .plane
            .write(id, op, &who.name, None, note)
            .await
            .map(|_| ())
            .map_err(control_error)
    }

    fn data_version(&self) -> u64 {
        let alerts = self.state.alerts.lock().version();
        self.rows_written
            .get()
            .wrapping_mul(1_000_003)
            .wrapping_add(self.state.plane.latest_seq())
            .wrapping_mul(1_000_003)
            .wrapping_add(alerts)
    }
}
