//! The report for people: the text table of `dyeline analyze` ([`table`]) and the short
//! summary closing `dyeline demo` ([`summary`]): a header of totals, then one section per
//! detection that ran, each finding's line written by its detection ([`FindingRef::line`]).

use std::fmt::Write as _;

use dyeline_model::Color;

use super::findings::{Detection, FindingRef};
use super::report::Report;

/// The report's findings for people: one section per detection that ran (its title and one
/// line per finding), in the order of [`Detection::ALL`]; those of detections that did not
/// run are left out rather than shown as finding nothing.
fn sections(r: &Report) -> Vec<(&'static str, Vec<String>)> {
    Detection::ALL
        .into_iter()
        .filter(|d| r.ran(*d))
        .map(|d| (d.title(), r.findings_of(d).map(FindingRef::line).collect()))
        .collect()
}

/// The report's totals: spans, instances, malformed and conflicting decisions.
fn header(r: &Report) -> String {
    let unknown = r
        .instances
        .iter()
        .filter(|i| i.color == Color::Unknown)
        .count();
    let mut out = format!(
        "spans analysed: {}\ninstances: {} ({} of unknown colour)",
        r.spans,
        r.instances.len(),
        unknown,
    );
    // Not read by a windowed-only run.
    if r.baggage_faults_read {
        let _ = write!(
            out,
            "; malformed decision pairs: {}; conflicting decisions: {}",
            r.malformed_pairs.total,
            r.conflicting_decisions.len()
        );
    }
    if let Some(names) = &r.detections {
        let _ = write!(out, "\ndetections run: {}", names.join(", "));
    }
    out.push('\n');
    out
}

/// The report for people: one section per detection, headed by its count of findings, then
/// one line per finding, the first `limit` of each (0: all) in the report's order, and how
/// many more there are.
pub fn table(r: &Report, limit: usize) -> String {
    listed(
        r,
        (limit != 0).then_some(limit),
        "\n",
        " (--limit 0 lists all; --format json has every finding)",
    )
}

/// [`table`] with at most `per_section` lines per detection (the rest counted), for a
/// summary at the end of `dyeline demo`.
pub fn summary(r: &Report, per_section: usize) -> String {
    listed(r, Some(per_section), "", "")
}

/// The header, then each section: `gap`, its title and count, its first `limit` lines (all
/// when `None`), and `  … and N more{hint}` for the rest.
fn listed(r: &Report, limit: Option<usize>, gap: &str, hint: &str) -> String {
    let mut out = header(r);
    for (title, lines) in sections(r) {
        let _ = writeln!(out, "{gap}{title}: {}", lines.len());
        let shown = limit.unwrap_or(lines.len()).min(lines.len());
        for l in &lines[..shown] {
            let _ = writeln!(out, "{l}");
        }
        if lines.len() > shown {
            let _ = writeln!(out, "  … and {} more{hint}", lines.len() - shown);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::report::report_of;
    use crate::analyze::testkit::{B, releasing};

    #[test]
    fn only_the_sections_of_detections_run_are_listed_with_the_rest_counted() {
        // Case 17's counts: a spike on green at the channel level and for the app.
        let mut b = B::new();
        releasing(&mut b, "ch1", &["order"], 50);
        b.requests("order", "order-b1", Color::Blue, 0.0, 200, 0)
            .requests("order", "order-g1", Color::Green, 0.0, 200, 30);
        let spans = b.resolved();
        let r = report_of(&spans, &Default::default(), false, &[Detection::ErrorSpike]);
        let lines: Vec<String> = r.findings().map(FindingRef::line).collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(
            lines[0],
            "  2023-11-14T22:14:00Z ch1 (channel) green: 15.00% errors (30 of 200) vs 0.00% on the other side, p = 1.23e-8"
        );
        let head = "spans analysed: 400\ninstances: 0 (0 of unknown colour); malformed decision pairs: 0; conflicting decisions: 0\ndetections run: error_spike\n";
        assert_eq!(
            table(&r, 1),
            format!(
                "{head}\none-sided error spikes: 2\n{}\n  … and 1 more (--limit 0 lists all; --format json has every finding)\n",
                lines[0]
            )
        );
        assert_eq!(
            summary(&r, 1),
            format!(
                "{head}one-sided error spikes: 2\n{}\n  … and 1 more\n",
                lines[0]
            )
        );
        assert_eq!(
            table(&r, 0),
            format!(
                "{head}\none-sided error spikes: 2\n{}\n{}\n",
                lines[0], lines[1]
            )
        );
    }
}
