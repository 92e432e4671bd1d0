//! The channel page's blue-vs-green latency comparison: one row per duration bucket with
//! each colour's share of its own requests drawn as a bar (so a 5 % canary's shape compares
//! with the other side's), and each colour's requests, p50, p90 and p99 above it.

use leptos::prelude::*;

use crate::locale::Lang;
use crate::pages::chip;
use crate::source::{ColorLatency, LatencyComparison};

/// A bucket's label: `≤ 5 ms`, `≤ 1 s`, and `> 10 s` for the last.
fn bucket_label(bounds_ms: &[f64], i: usize) -> String {
    let ms = |v: f64| {
        if v >= 1_000.0 {
            format!("{} s", v / 1_000.0)
        } else {
            format!("{v} ms")
        }
    };
    match bounds_ms.get(i) {
        Some(b) => format!("≤ {}", ms(*b)),
        None => format!(
            "> {}",
            bounds_ms.last().map_or_else(|| "0 ms".into(), |b| ms(*b))
        ),
    }
}

fn ms_text(v: Option<f64>) -> String {
    v.map_or_else(|| "–".to_owned(), |v| format!("{v:.1} ms"))
}

/// A colour's share of its own requests in bucket `i`, 0–100.
fn share(c: &ColorLatency, i: usize) -> f64 {
    if c.requests == 0 {
        return 0.0;
    }
    c.counts.get(i).copied().unwrap_or(0) as f64 * 100.0 / c.requests as f64
}

/// Blue's and green's request durations side by side.
#[component]
pub fn LatencyHistogram<'a>(
    /// The page's language.
    lang: Lang,
    /// The comparison over the page's range.
    latency: &'a LatencyComparison,
) -> impl IntoView + use<> {
    let (lang, l) = (lang, latency);
    let summary = |name: &'static str, c: &ColorLatency| {
        view! {
            <tr data-color=name>
                <td>{chip(lang, name)}</td>
                <td class="num">{c.requests}</td>
                <td class="num">{ms_text(c.p50_ms)}</td>
                <td class="num">{ms_text(c.p90_ms)}</td>
                <td class="num">{ms_text(c.p99_ms)}</td>
            </tr>
        }
    };
    // The buckets from the first to the last that any colour has a request in.
    let used = |c: &ColorLatency| {
        c.counts
            .iter()
            .position(|n| *n > 0)
            .zip(c.counts.iter().rposition(|n| *n > 0))
    };
    let range = match (used(&l.blue), used(&l.green)) {
        (Some((a, b)), Some((c, d))) => Some((a.min(c), b.max(d))),
        (Some(r), None) | (None, Some(r)) => Some(r),
        (None, None) => None,
    };
    let rows = range.map(|(first, last)| {
        (first..=last)
            .map(|i| {
                let (b, g) = (share(&l.blue, i), share(&l.green, i));
                let count = |c: &ColorLatency| c.counts.get(i).copied().unwrap_or(0);
                view! {
                    <tr data-bucket=i>
                        <th>{bucket_label(&l.bounds_ms, i)}</th>
                        <td class="bar"><div class="track"><div class="fill f-blue" style=format!("width:{b:.1}%")></div></div></td>
                        <td class="num">{format!("{b:.1}%")} " (" {count(&l.blue)} ")"</td>
                        <td class="bar"><div class="track"><div class="fill f-green" style=format!("width:{g:.1}%")></div></div></td>
                        <td class="num">{format!("{g:.1}%")} " (" {count(&l.green)} ")"</td>
                    </tr>
                }
            })
            .collect_view()
    });
    let body = match rows {
        Some(rows) => view! {
            <table class="data" id="latency-summary">
                <thead><tr><th>{tr!(lang, "col.colour")}</th><th>{tr!(lang, "latency.requests")}</th><th>"p50"</th><th>"p90"</th><th>"p99"</th></tr></thead>
                <tbody>{summary("blue", &l.blue)}{summary("green", &l.green)}</tbody>
            </table>
            <table class="data histogram" id="latency-histogram">
                <thead><tr><th>{tr!(lang, "latency.duration")}</th><th colspan="2">{tr!(lang, "latency.share_blue")}</th><th colspan="2">{tr!(lang, "latency.share_green")}</th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
        }
        .into_any(),
        None => view! { <p class="empty" id="latency-histogram">{tr!(lang, "latency.empty")}</p> }.into_any(),
    };
    view! {
        <h2>{tr!(lang, "latency.heading")}</h2>
        {body}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_labelled_by_their_upper_bound_and_the_last_by_the_one_before() {
        let b = [1.0, 5.0, 1_000.0, 10_000.0];
        assert_eq!(bucket_label(&b, 0), "≤ 1 ms");
        assert_eq!(bucket_label(&b, 2), "≤ 1 s");
        assert_eq!(bucket_label(&b, 4), "> 10 s");
        let c = ColorLatency {
            counts: vec![1, 3, 0, 0, 0],
            requests: 4,
            ..ColorLatency::default()
        };
        assert_eq!((share(&c, 1), share(&c, 2)), (75.0, 0.0));
        assert_eq!(share(&ColorLatency::default(), 0), 0.0);
    }
}
