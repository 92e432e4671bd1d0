//! `dyeline analyze`: the post-mortem run of the six detections (domain §6) over a data dir's
//! spans and its control plane's history (e.g. recorded by `dyeline import --timeline`).
//! JSON (the format `../shared/tools/check_findings.py` reads) or a table on stdout; logs on
//! stderr.

use std::fmt::Write as _;

use dyeline_control::ControlPlane;
use dyeline_control::api::parse_time;
use dyeline_queries::SqlEngine;
use dyeline_queries::analyze::{Report, analyze};
use dyeline_store::Store;

use crate::config::Config;
use crate::serve::{BoxError, store_config};

/// Runs the analysis of `config.data_dir` between `from` and `to` (RFC 3339 or Unix ns).
///
/// # Errors
/// A missing or unreadable data dir, a time that does not parse, a failed scan.
pub async fn run(
    config: Config,
    from: Option<&str>,
    to: Option<&str>,
    json: bool,
    with_decisions: bool,
) -> Result<(), BoxError> {
    if !config.data_dir.exists() {
        return Err(format!(
            "data directory {} does not exist",
            config.data_dir.display()
        )
        .into());
    }
    let from = from.map(parse_time).transpose()?;
    let to = to.map(parse_time).transpose()?;
    let mut sc = store_config(&config);
    sc.read_only = true;
    let store = tokio::task::spawn_blocking(move || Store::open(sc)).await??;
    let engine = SqlEngine::new(store.table())?;
    let plane = ControlPlane::open_read_only(&config.data_dir).await?;
    let timeline = plane.timeline();
    plane.close().await;
    if timeline.is_empty() {
        tracing::warn!("the data dir has no channel history: no app is in a releasing channel");
    }
    let report = analyze(
        engine.context(),
        &timeline,
        &config.analyzer,
        from,
        to,
        with_decisions,
    )
    .await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", table(&report));
    }
    Ok(())
}

fn ns_text(t: i64) -> String {
    chrono::DateTime::from_timestamp_nanos(t).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The report for people: one section per detection, one line per finding.
pub fn table(r: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "spans analysed: {}", r.spans);
    let unknown = r.instances.iter().filter(|i| i.color == "unknown").count();
    let _ = writeln!(
        out,
        "instances: {} ({} of unknown colour); malformed decision pairs: {}; conflicting decisions: {}",
        r.instances.len(),
        unknown,
        r.malformed_pairs.total,
        r.conflicting_decisions.len()
    );
    let _ = writeln!(out, "\ncross-colour hops: {}", r.cross_color_hops.len());
    for h in &r.cross_color_hops {
        let via = if h.via.is_empty() {
            String::new()
        } else {
            format!(" via {}", h.via.join(" → "))
        };
        let _ = writeln!(
            out,
            "  {} {} {}({}) → {}({}){} {} {} trace {}",
            ns_text(h.t_unix_nano),
            h.channel,
            h.from_app,
            h.from_color.unwrap_or("-"),
            h.to_app,
            h.to_color,
            via,
            h.kind,
            h.reason,
            h.trace_id
        );
    }
    let _ = writeln!(out, "\nmissing decisions: {}", r.missing_decisions.len());
    for m in &r.missing_decisions {
        let _ = writeln!(
            out,
            "  {} {} {} called by {} {} trace {}",
            ns_text(m.t_unix_nano),
            m.channel,
            m.app,
            m.caller_app,
            m.kind,
            m.trace_id
        );
    }
    let _ = writeln!(out, "\ndrained-side traffic: {}", r.drained_side.len());
    for d in &r.drained_side {
        let _ = writeln!(
            out,
            "  {} {} {} on {} ({}% blue) {}: {} spans on {}",
            ns_text(d.window_start_unix_nano),
            d.channel,
            d.app,
            d.color,
            d.blue_percent,
            d.kind,
            d.count,
            d.instances.join(",")
        );
    }
    let _ = writeln!(out, "\nratio deviations: {}", r.ratio_deviation.len());
    for d in &r.ratio_deviation {
        let _ = writeln!(
            out,
            "  {} {} {}: blue share {:.1}% of {} requests vs blue_percent {} (weights imply {:.1}%, {}B/{}G instances){}",
            ns_text(d.window_start_unix_nano),
            d.channel,
            d.app,
            d.blue_share * 100.0,
            d.requests,
            d.blue_percent,
            d.weight_implied_share * 100.0,
            d.blue_instances,
            d.green_instances,
            d.cause.map(|c| format!(" cause {c}")).unwrap_or_default()
        );
    }
    let _ = writeln!(out, "\ninstance skew: {}", r.instance_skew.len());
    for s in &r.instance_skew {
        let _ = writeln!(
            out,
            "  {} {} {} {} {}: {} requests, {:.1}× the mean of {} instances",
            ns_text(s.window_start_unix_nano),
            s.channel,
            s.app,
            s.color,
            s.instance,
            s.requests,
            s.requests as f64 / s.mean_requests,
            s.instances_seen
        );
    }
    let _ = writeln!(out, "\none-sided error spikes: {}", r.error_spike.len());
    for e in &r.error_spike {
        let _ = writeln!(
            out,
            "  {} {} {} {}: {:.2}% errors ({} of {}) vs {:.2}% on the other side, p = {:.2e}",
            ns_text(e.window_start_unix_nano),
            e.channel,
            e.app.as_deref().unwrap_or("(channel)"),
            e.color,
            e.error_rate * 100.0,
            e.errors,
            e.requests,
            e.other_error_rate * 100.0,
            e.p_value
        );
    }
    out
}
