//! Server-rendered SVG line charts. Colours are never the only cue: each series has its own
//! dash pattern and marker shape and is labelled with its word (`blue`, `green`) in the
//! legend and at its last point; annotations are labelled vertical lines. Colours come from
//! CSS classes, so light and dark themes both apply.

use std::fmt::Write;

use crate::locale::Zone;

/// One series: a label, a CSS class (`s-blue`, `s-green`, `s-target`) and points (time in
/// Unix ns, value or none for a gap).
pub struct Series {
    /// Legend text.
    pub label: String,
    /// CSS class giving stroke colour and dash pattern.
    pub class: &'static str,
    /// Marker shape: `circle`, `square` or `none`.
    pub marker: &'static str,
    /// Draw as a step line (a value holds until the next point).
    pub step: bool,
    /// Points in time order.
    pub points: Vec<(i64, Option<f64>)>,
}

/// A labelled vertical line (a control operation).
pub struct Annotation {
    /// When, Unix ns.
    pub t_unix_nano: i64,
    /// Label, e.g. `start`, `→ 10%`.
    pub label: String,
}

/// Escapes text for SVG/HTML.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const W: f64 = 720.0;
const H: f64 = 200.0;
const L: f64 = 48.0;
const R: f64 = 64.0;
const T: f64 = 14.0;
const B: f64 = 26.0;

fn nice_max(max: f64) -> f64 {
    if max <= 0.0 || !max.is_finite() {
        return 1.0;
    }
    let mag = 10f64.powf(max.log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if m * mag >= max {
            return m * mag;
        }
    }
    10.0 * mag
}

fn fmt_value(v: f64, unit: &str) -> String {
    if unit == "%" {
        format!("{v:.0}%")
    } else if v >= 100.0 || v == v.trunc() {
        format!("{v:.0}{unit}")
    } else {
        format!("{v:.2}{unit}")
    }
}

/// Renders a line chart over `[from, to)` as an `<svg>` string with a `<title>` (`title`) and
/// a legend. `y_max`: fixed top of the axis (e.g. 100 for percentages) or none to fit the
/// data. `unit` is appended to axis labels (`%`, `/s`, ` ms`); the time axis reads in `zone`.
// Eight plain values, each a different part of the picture; a struct for them would be built
// once per call site and read once here.
#[allow(clippy::too_many_arguments)]
pub fn line_chart(
    title: &str,
    from: i64,
    to: i64,
    series: &[Series],
    annotations: &[Annotation],
    y_max: Option<f64>,
    unit: &str,
    zone: &Zone,
) -> String {
    let data_max = series
        .iter()
        .flat_map(|s| s.points.iter().filter_map(|p| p.1))
        .fold(0.0f64, f64::max);
    let top = y_max.unwrap_or_else(|| nice_max(data_max));
    let span = (to - from).max(1) as f64;
    let x = |t: i64| L + (t - from) as f64 / span * (W - L - R);
    let y = |v: f64| T + (1.0 - (v / top).clamp(0.0, 1.0)) * (H - T - B);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="chart" viewBox="0 0 {W} {H}" role="img" aria-label="{t}"><title>{t}</title>"#,
        t = esc(title)
    );
    for i in 0..=4 {
        let v = top * f64::from(i) / 4.0;
        let yy = y(v);
        let _ = write!(
            s,
            r#"<line class="grid" x1="{L}" x2="{x2}" y1="{yy:.1}" y2="{yy:.1}"/><text class="axis" x="{lx}" y="{ty:.1}" text-anchor="end">{lab}</text>"#,
            x2 = W - R,
            lx = L - 4.0,
            ty = yy + 4.0,
            lab = esc(&fmt_value(v, unit))
        );
    }
    for i in 0..=4 {
        let t = from + ((to - from) as f64 * f64::from(i) / 4.0) as i64;
        let _ = write!(
            s,
            r#"<text class="axis" x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
            x(t),
            H - 8.0,
            zone.clock(t)
        );
    }
    // Labels of nearby operations would overlap: each goes one line lower than the previous
    // one when it is less than 60 px to its right, cycling over three lines.
    let mut last_x = f64::NEG_INFINITY;
    let mut line = 0u32;
    for a in annotations
        .iter()
        .filter(|a| a.t_unix_nano >= from && a.t_unix_nano < to)
    {
        let xx = x(a.t_unix_nano);
        line = if xx - last_x < 60.0 {
            (line + 1) % 3
        } else {
            0
        };
        last_x = xx;
        let _ = write!(
            s,
            r#"<g class="annotation"><line x1="{xx:.1}" x2="{xx:.1}" y1="{T}" y2="{yb}"/><text x="{tx:.1}" y="{ty}">{lab}</text></g>"#,
            yb = H - B,
            tx = xx + 2.0,
            ty = T + 9.0 + f64::from(line) * 11.0,
            lab = esc(&a.label)
        );
    }
    for se in series {
        let mut d = String::new();
        let mut pen_up = true;
        let mut last: Option<(f64, f64)> = None;
        for &(t, v) in &se.points {
            let Some(v) = v else {
                pen_up = true;
                continue;
            };
            let (xx, yy) = (x(t), y(v));
            if pen_up {
                let _ = write!(d, "M{xx:.1},{yy:.1}");
            } else if se.step {
                let _ = write!(d, "H{xx:.1}V{yy:.1}");
            } else {
                let _ = write!(d, "L{xx:.1},{yy:.1}");
            }
            pen_up = false;
            last = Some((xx, yy));
        }
        if d.is_empty() {
            continue;
        }
        let _ = write!(s, r#"<g class="series {}"><path d="{d}"/>"#, se.class);
        if se.marker != "none" {
            for &(t, v) in &se.points {
                if let Some(v) = v {
                    let (xx, yy) = (x(t), y(v));
                    if se.marker == "square" {
                        let _ = write!(
                            s,
                            r#"<rect class="marker" x="{:.1}" y="{:.1}" width="4" height="4"/>"#,
                            xx - 2.0,
                            yy - 2.0
                        );
                    } else {
                        let _ = write!(
                            s,
                            r#"<circle class="marker" cx="{xx:.1}" cy="{yy:.1}" r="2"/>"#
                        );
                    }
                }
            }
        }
        if let Some((xx, yy)) = last {
            let _ = write!(
                s,
                r#"<text class="end-label" x="{:.1}" y="{:.1}">{}</text>"#,
                xx + 4.0,
                yy + 4.0,
                esc(&se.label)
            );
        }
        s.push_str("</g>");
    }
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chart_labels_series_with_words_and_marks_gaps() {
        let svg = line_chart(
            "blue share",
            0,
            100,
            &[Series {
                label: "blue <observed>".into(),
                class: "s-blue",
                marker: "circle",
                step: false,
                points: vec![(0, Some(10.0)), (50, None), (60, Some(50.0))],
            }],
            &[Annotation {
                t_unix_nano: 40,
                label: "→ 50%".into(),
            }],
            Some(100.0),
            "%",
            &Zone::utc(),
        );
        assert!(svg.contains("blue &lt;observed&gt;"), "{svg}");
        assert!(svg.contains("→ 50%"));
        // A gap starts a new subpath: two M commands.
        assert_eq!(svg.matches('M').count(), 2, "{svg}");
        assert_eq!(svg.matches("<circle").count(), 2);
        assert!(svg.contains(">100%<"));
    }

    #[test]
    fn axis_top_is_a_round_number_above_the_data() {
        assert_eq!(nice_max(0.0), 1.0);
        assert_eq!(nice_max(7.3), 10.0);
        assert_eq!(nice_max(120.0), 200.0);
        assert_eq!(nice_max(0.22), 0.25);
    }
}
