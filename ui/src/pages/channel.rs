//! The channel page `/channels/{id}`: blue share observed against blue_percent in force with
//! every operation annotated; requests/s, error rate and p99 per colour; per-app table; hop
//! edges, missing decisions, drained-side traffic by kind and the other window findings;
//! instances with skew and weights; alerts; the event log; and the release controls.

use leptos::prelude::*;

use super::{Chrome, chip, encode, error_rate, millis, per_second, trace_link};
use crate::chart::{Annotation, Series, line_chart};
use crate::source::{ChannelPage, OpLine, WindowFinding};
use dyeline_model::time::rfc3339_secs;

fn op_label(op: &OpLine) -> String {
    match (op.op.as_str(), op.blue_percent) {
        ("ratio", Some(p)) => format!("→ {p}%"),
        (name, _) => name.to_owned(),
    }
}

fn charts(chrome: &Chrome, page: &ChannelPage) -> AnyView {
    let (from, to) = (chrome.range.from_unix_nano, chrome.range.to_unix_nano);
    let step_s = page.step_seconds.max(1) as f64;
    let notes: Vec<Annotation> = page
        .ops
        .iter()
        .map(|o| Annotation {
            t_unix_nano: o.t_unix_nano,
            label: op_label(o),
        })
        .collect();
    let pts = |f: &dyn Fn(&crate::source::Step) -> Option<f64>| {
        page.steps
            .iter()
            .map(|s| (s.start_unix_nano, f(s)))
            .collect::<Vec<_>>()
    };
    let share = line_chart(
        "Blue share observed vs blue_percent in force",
        from,
        to,
        &[
            Series {
                label: "blue_percent in force".into(),
                class: "s-target",
                marker: "none",
                step: true,
                points: pts(&|s| s.blue_percent.map(f64::from)),
            },
            Series {
                label: "observed blue share".into(),
                class: "s-blue",
                marker: "circle",
                step: false,
                points: pts(&|s| s.blue_share.map(|v| v * 100.0)),
            },
        ],
        &notes,
        Some(100.0),
        "%",
    );
    let per_color =
        |title: &str, unit: &str, f: &dyn Fn(&crate::source::ColorLoad) -> Option<f64>| {
            line_chart(
                title,
                from,
                to,
                &[
                    Series {
                        label: "blue".into(),
                        class: "s-blue",
                        marker: "circle",
                        step: false,
                        points: pts(&|s| f(&s.blue)),
                    },
                    Series {
                        label: "green".into(),
                        class: "s-green",
                        marker: "square",
                        step: false,
                        points: pts(&|s| f(&s.green)),
                    },
                ],
                &notes,
                None,
                unit,
            )
        };
    let rps = per_color("Requests per second by colour", "/s", &|l| {
        Some(l.requests as f64 / step_s)
    });
    let errors = per_color("Error rate by colour", "%", &|l| {
        l.error_rate().map(|r| r * 100.0)
    });
    let p99 = per_color("p99 latency by colour", " ms", &|l| l.p99_ms);
    view! {
        <section class="charts">
            <figure><figcaption>"Blue share observed (solid, circles) vs blue_percent in force (dashed steps); lines mark start / ratio / finish"</figcaption><div inner_html=share></div></figure>
            <figure><figcaption>"Requests/s: blue (solid, circles), green (dashed, squares)"</figcaption><div inner_html=rps></div></figure>
            <figure><figcaption>"Error rate: blue (solid, circles), green (dashed, squares)"</figcaption><div inner_html=errors></div></figure>
            <figure><figcaption>"p99 latency: blue (solid, circles), green (dashed, squares)"</figcaption><div inner_html=p99></div></figure>
        </section>
    }
    .into_any()
}

fn controls(chrome: &Chrome, page: &ChannelPage) -> AnyView {
    let c = &page.channel;
    let action = format!("/channels/{}/confirm", c.id);
    let keep = chrome.range_query();
    let hidden_range = (!keep.is_empty()).then(|| {
        view! {
            <input type="hidden" name="from" value=rfc3339_secs(chrome.range.from_unix_nano)/>
            <input type="hidden" name="to" value=rfc3339_secs(chrome.range.to_unix_nano)/>
        }
    });
    let body = if c.state == "releasing" {
        let presets = [0u8, 1, 10, 50, 100]
            .into_iter()
            .map(|p| {
                let class = if p == c.blue_percent { "preset current" } else { "preset" };
                view! { <button type="submit" class=class name="preset" value=p.to_string()>{p}"%"</button> }
            })
            .collect_view();
        view! {
            <form method="get" action=action.clone() class="inline" id="ratio-form">
                <input type="hidden" name="action" value="ratio"/>
                {hidden_range.clone()}
                <span>"Set blue_percent: "</span>
                {presets}
                <label>" or " <input type="number" name="blue_percent" min="0" max="100" step="1" size="4" id="blue-percent-field"/></label>
                <button type="submit" id="ratio-submit">"Set…"</button>
            </form>
            <form method="get" action=action.clone() class="inline">
                <input type="hidden" name="action" value="finish"/>
                {hidden_range.clone()}
                <button type="submit" id="finish">"Finish…"</button>
            </form>
        }
        .into_any()
    } else {
        view! {
            <form method="get" action=action.clone() class="inline">
                <input type="hidden" name="action" value="start"/>
                {hidden_range}
                <button type="submit" id="start">"Start release…"</button>
            </form>
        }
        .into_any()
    };
    let hint = if chrome.identity.is_none() {
        Some(
            view! { <p class="hint">"Sign in with an API token to change the channel; each change shows the weights that will apply and asks to confirm."</p> },
        )
    } else {
        None
    };
    view! { <section class="controls"><h2>"Controls"</h2>{body}{hint}</section> }.into_any()
}

fn finding_rows(chrome: &Chrome, findings: Vec<&WindowFinding>) -> AnyView {
    let _ = chrome;
    findings
        .into_iter()
        .map(|f| {
            let traces = f
                .trace_ids
                .iter()
                .take(3)
                .map(|t| view! { {trace_link(t)} " " })
                .collect_view();
            view! {
                <tr class=format!("finding f-{}", f.finding) data-finding=f.finding.clone()>
                    <td>{f.finding.replace('_', " ")}</td>
                    <td>{f.app.clone().unwrap_or_else(|| "(all)".into())}</td>
                    <td>{chip(&f.color)}</td>
                    <td>{f.kind.clone()}</td>
                    <td>{f.instance.clone().unwrap_or_default()}</td>
                    <td class="detail">{f.detail.clone()}</td>
                    <td>{crate::range::clock(f.window_start_unix_nano)}</td>
                    <td>{traces}</td>
                </tr>
            }
        })
        .collect_view()
        .into_any()
}

/// The channel page's body; `app_filter` narrows the per-app table (case-insensitive
/// substring).
pub fn body(
    chrome: &Chrome,
    page: &ChannelPage,
    app_filter: Option<&str>,
    flash: Option<&str>,
) -> AnyView {
    let c = &page.channel;
    let secs = chrome.range.rate_seconds(page.data_from_unix_nano);
    let state_class = format!("state s-{}", c.state);
    let flash =
        flash.map(|m| view! { <p class="flash" role="status" id="flash">{m.to_owned()}</p> });
    let filter = app_filter.unwrap_or("").to_lowercase();
    let apps = page
        .apps
        .iter()
        .filter(|a| filter.is_empty() || a.app.to_lowercase().contains(&filter))
        .map(|a| {
            view! {
                <tr>
                    <td>{a.app.clone()}</td>
                    <td class="num">{per_second(a.blue.requests, secs)}</td>
                    <td class="num">{per_second(a.green.requests, secs)}</td>
                    <td class="num">{error_rate(&a.blue)}</td>
                    <td class="num">{error_rate(&a.green)}</td>
                    <td class="num">{millis(a.blue.p99_ms)}</td>
                    <td class="num">{millis(a.green.p99_ms)}</td>
                    <td class="num">{a.unknown_requests}</td>
                </tr>
            }
        })
        .collect_view();
    let hops = page
        .hops
        .iter()
        .map(|h| {
            let traces = h.trace_ids.iter().take(3).map(|t| view! { {trace_link(t)} " " }).collect_view();
            let via = if h.via.is_empty() { "–".to_owned() } else { h.via.join(" → ") };
            view! {
                <tr class="finding f-cross_color_hop" data-finding="cross_color_hop">
                    <td>{h.from_app.clone()} " " {chip(h.from_color.as_deref().unwrap_or("unknown"))}</td>
                    <td>{h.to_app.clone()} " " {chip(&h.to_color)}</td>
                    <td>{h.kind.clone()}</td>
                    <td>{h.reason.clone()}</td>
                    <td>{via}</td>
                    <td class="num">{h.count}</td>
                    <td>{traces}</td>
                </tr>
            }
        })
        .collect_view();
    let missing = page
        .missing
        .iter()
        .map(|m| {
            let traces = m
                .trace_ids
                .iter()
                .take(3)
                .map(|t| view! { {trace_link(t)} " " })
                .collect_view();
            view! {
                <tr class="finding f-missing_decision" data-finding="missing_decision">
                    <td>{m.caller_app.clone()}</td><td>{m.app.clone()}</td><td>{m.kind.clone()}</td>
                    <td class="num">{m.count}</td><td>{traces}</td>
                </tr>
            }
        })
        .collect_view();
    let drained_total = |k: &str| -> u64 {
        page.findings
            .iter()
            .filter(|f| f.finding == "drained_side" && f.kind == k)
            .count() as u64
    };
    let drained_by_kind = ["RPC", "MQ", "JOB"]
        .into_iter()
        .map(|k| view! { <li>{k} ": " <span class="num">{drained_total(k)}</span> " window(s)"</li> })
        .collect_view();
    let of = |name: &str| {
        page.findings
            .iter()
            .filter(|f| f.finding == name)
            .collect::<Vec<_>>()
    };
    let window_findings = finding_rows(chrome, {
        let mut v = of("drained_side");
        v.extend(of("ratio_deviation"));
        v.extend(of("instance_skew"));
        v.extend(of("error_spike"));
        v
    });
    let instances = page
        .instances
        .iter()
        .map(|i| {
            let ratio = if i.color_mean > 0.0 { i.requests as f64 / i.color_mean } else { 0.0 };
            let mark = i.skewed.then(|| view! { <span class="mark">"skewed"</span> });
            view! {
                <tr class=if i.skewed { "skewed" } else { "" }>
                    <td>{i.app.clone()}</td><td>{i.instance.clone()}</td><td>{chip(&i.color)}</td>
                    <td class="num">{i.requests}</td>
                    <td class="num">{format!("{:.1}", i.color_mean)}</td>
                    <td class="num">{format!("{ratio:.2}×")}</td>
                    <td>{mark}</td>
                    <td class="num">{i.weight.map_or_else(|| "–".to_owned(), |w| w.to_string())}</td>
                </tr>
            }
        })
        .collect_view();
    let alerts = page
        .alerts
        .iter()
        .map(|a| {
            let traces = a
                .trace_ids
                .iter()
                .take(3)
                .map(|t| view! { {trace_link(t)} " " })
                .collect_view();
            view! {
                <tr class=format!("alert a-{}", a.state) data-alert=a.kind.clone()>
                    <td>{a.name.clone()}</td>
                    <td><span class=format!("state s-{}", a.state)>{a.state.clone()}</span></td>
                    <td>{a.labels.clone()}</td>
                    <td class="detail">{a.summary.clone()}</td>
                    <td>{rfc3339_secs(a.starts_at_unix_nano)}</td>
                    <td>{a.ends_at_unix_nano.map(rfc3339_secs).unwrap_or_default()}</td>
                    <td>{traces}</td>
                </tr>
            }
        })
        .collect_view();
    let events = page
        .ops
        .iter()
        .rev()
        .map(|o| {
            view! {
                <tr>
                    <td class="num">{o.seq}</td>
                    <td>{rfc3339_secs(o.t_unix_nano)}</td>
                    <td>{op_label(o)}</td>
                    <td>{o.actor.clone()}</td>
                    <td class="note">{o.note.clone().unwrap_or_default()}</td>
                </tr>
            }
        })
        .collect_view();
    let path = chrome.path.clone();
    let filter_value = app_filter.unwrap_or("").to_owned();
    let keep_range = (!chrome.range_query().is_empty()).then(|| {
        view! {
            <input type="hidden" name="from" value=rfc3339_secs(chrome.range.from_unix_nano)/>
            <input type="hidden" name="to" value=rfc3339_secs(chrome.range.to_unix_nano)/>
        }
    });
    let search = chrome.link(&format!("/traces?channel={}", encode(&c.id)));
    view! {
        <h1>"Channel " <span id="channel-id">{c.id.clone()}</span></h1>
        {flash}
        {super::staleness(page.analysed_to_unix_nano)}
        <p class="facts">
            <span class=state_class id="channel-state">{c.state.clone()}</span>
            " blue_percent " <strong id="blue-percent">{c.blue_percent}</strong> "%"
            " · apps: " {if c.apps.is_empty() { "(global: every app without a releasing local channel)".to_owned() } else { c.apps.join(", ") }}
            " · version " {page.version}
            " · " <a href=search>"traces of this channel"</a>
        </p>
        {controls(chrome, page)}
        {charts(chrome, page)}
        <section>
            <h2>"Apps"</h2>
            <p class="hint">"Work per app: RPC requests served, MQ messages consumed and JOB runs."</p>
            <form method="get" action=path class="inline">
                {keep_range}
                <label>"Filter apps " <input name="app" value=filter_value/></label>
                <button type="submit">"Filter"</button>
            </form>
            <table class="data" id="apps">
                <thead><tr><th>"app"</th><th>"blue work/s"</th><th>"green work/s"</th><th>"blue errors"</th><th>"green errors"</th><th>"blue p99"</th><th>"green p99"</th><th>"unknown-colour requests"</th></tr></thead>
                <tbody>{apps}</tbody>
            </table>
        </section>
        <section>
            <h2>"Cross-colour hops"</h2>
            <table class="data" id="hops">
                <thead><tr><th>"from"</th><th>"to"</th><th>"kind"</th><th>"reason"</th><th>"via"</th><th>"count"</th><th>"example traces"</th></tr></thead>
                <tbody>{hops}</tbody>
            </table>
            <h2>"Missing decisions by caller"</h2>
            <table class="data" id="missing">
                <thead><tr><th>"caller app"</th><th>"app"</th><th>"kind"</th><th>"spans"</th><th>"example traces"</th></tr></thead>
                <tbody>{missing}</tbody>
            </table>
            <h2>"Drained-side traffic by kind"</h2>
            <ul class="drained" id="drained-by-kind">{drained_by_kind}</ul>
            <h2>"Window findings"</h2>
            <table class="data" id="findings">
                <thead><tr><th>"finding"</th><th>"app"</th><th>"colour"</th><th>"kind"</th><th>"instance"</th><th>"observed vs threshold"</th><th>"window"</th><th>"example traces"</th></tr></thead>
                <tbody>{window_findings}</tbody>
            </table>
        </section>
        <section>
            <h2>"Instances"</h2>
            <table class="data" id="instances">
                <thead><tr><th>"app"</th><th>"instance"</th><th>"colour"</th><th>"requests"</th><th>"colour mean"</th><th>"load vs mean"</th><th></th><th>"weight in force"</th></tr></thead>
                <tbody>{instances}</tbody>
            </table>
        </section>
        <section>
            <h2>"Alerts"</h2>
            <table class="data" id="alerts">
                <thead><tr><th>"alert"</th><th>"state"</th><th>"labels"</th><th>"observed, comparator, threshold"</th><th>"since"</th><th>"resolved"</th><th>"example traces"</th></tr></thead>
                <tbody>{alerts}</tbody>
            </table>
        </section>
        <section>
            <h2>"Event log"</h2>
            <table class="data" id="events">
                <thead><tr><th>"seq"</th><th>"time"</th><th>"operation"</th><th>"actor"</th><th>"note"</th></tr></thead>
                <tbody>{events}</tbody>
            </table>
        </section>
    }
    .into_any()
}
