//! The report for people: the text table of `dyeline analyze` ([`table`]) and the short
//! summary closing `dyeline demo` ([`summary`]): a header of totals, then one section per
//! detection that ran, each finding's line written by its detection ([`FindingRef::line`]),
//! and when the lane rules ran their counts and coverage ([`lane_counts`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use comfy_table::{CellAlignment, Table, presets};
use dyeline_model::Color;

use super::detect::lanes::LaneReport;
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

/// The lane rules' counts (`lane_fallback`, `failover`, ...: counted, never findings) on one
/// line, then the lane coverage summed over the windows per lane and app, as a table.
fn lane_counts(l: &LaneReport) -> String {
    let c = &l.counts;
    let mut out = format!(
        "lane counts: lane_fallback {}, failover {}, tag_not_recorded {}, reverse_fallback {}, \
         undetermined {}, malformed lane tags {}, invalid instance lanes {}\n",
        c.lane_fallback,
        c.failover,
        c.tag_not_recorded,
        c.reverse_fallback,
        c.undetermined,
        c.malformed_lane_tags,
        c.invalid_instance_lanes
    );
    let mut sums: BTreeMap<(&str, &str), [u64; 6]> = BTreeMap::new();
    for row in &l.coverage {
        let s = sums.entry((&row.lane, &row.app)).or_default();
        let add = [
            row.served_in_lane,
            row.lane_fallback,
            row.failover,
            row.leaked,
            row.requests,
            row.errors,
        ];
        for (s, a) in s.iter_mut().zip(add) {
            *s += a;
        }
    }
    if sums.is_empty() {
        return out;
    }
    let t = coverage_table(sums.iter().map(|((lane, app), s)| (*lane, *app, *s)));
    let _ = writeln!(out, "lane coverage (summed over windows):\n{t}");
    out
}

/// The lane coverage table: one row per (lane, app) with its six sums, the numbers aligned
/// right. comfy-table pads by display width, so Chinese app names keep the columns straight.
fn coverage_table<'a>(rows: impl Iterator<Item = (&'a str, &'a str, [u64; 6])>) -> Table {
    let mut t = Table::new();
    t.load_preset(presets::ASCII_MARKDOWN).set_header([
        "lane",
        "app",
        "served in lane",
        "lane_fallback",
        "failover",
        "leaked",
        "requests",
        "errors",
    ]);
    for (lane, app, s) in rows {
        t.add_row(
            [lane.to_owned(), app.to_owned()]
                .into_iter()
                .chain(s.iter().map(u64::to_string)),
        );
    }
    for c in 2..8 {
        if let Some(col) = t.column_mut(c) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    t
}

/// The header, then each section: `gap`, its title and count, its first `limit` lines (all
/// when `None`), and `  … and N more{hint}` for the rest; then the lane counts.
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
    if let Some(l) = &r.lane {
        let _ = write!(out, "{gap}{}", lane_counts(l));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::report::report_of;
    use crate::analyze::testkit::{B, leak_and_spike, releasing};

    #[test]
    fn lane_findings_have_sections_and_the_lane_counts_a_table() {
        let spans = leak_and_spike();
        let r = report_of(&spans, &Default::default(), false, &Detection::LANE);
        let t = table(&r, 0);
        let leak = "lane leaks: 1\n  2023-11-14T22:14:20Z (no group) lane gray: (none)(-) → order(base) RPC tag_ignored trace 00000000000000000000000000000008\n";
        assert!(t.contains(leak), "{t}");
        for empty in [
            "dropped lane tags: 0",
            "base traffic in a lane: 0",
            "lane tags set or changed mid-trace: 0",
            "lane error spikes: 0",
        ] {
            assert!(t.contains(empty), "{t}");
        }
        assert!(!t.contains("one-sided error spikes"), "{t}");
        assert!(
            t.contains("lane counts: lane_fallback 0, failover 0, tag_not_recorded 0"),
            "{t}"
        );
        // order's gray requests: two served in lane, one leaked.
        let row = t
            .lines()
            .find(|l| l.starts_with("| gray"))
            .unwrap_or_else(|| panic!("{t}"));
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        assert_eq!(
            cells[1..9],
            ["gray", "order", "2", "0", "0", "1", "2", "0"],
            "{t}"
        );
        // The six only: no lane section, no lane counts.
        let six = table(
            &report_of(&spans, &Default::default(), false, &Detection::BLUE_GREEN),
            0,
        );
        assert!(
            !six.contains("lane") && six.contains("one-sided error spikes: 2"),
            "{six}"
        );
    }

    #[test]
    fn the_lane_coverage_table_lines_up_chinese_app_and_lane_names() {
        use unicode_width::UnicodeWidthStr;
        let t = coverage_table(
            [
                ("gray", "order", [2, 0, 0, 1, 2, 0]),
                ("灰度", "订单服务", [10, 200, 3, 0, 12, 1]),
                ("gray2", "库存x", [0, 0, 0, 0, 0, 0]),
            ]
            .into_iter(),
        )
        .to_string();
        // Every `|` of every line at the same display column.
        let bars = |line: &str| -> Vec<usize> {
            line.char_indices()
                .filter(|(_, c)| *c == '|')
                .map(|(i, _)| line[..i].width())
                .collect()
        };
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 5, "{t}");
        let head = bars(lines[0]);
        assert_eq!(head.len(), 9, "{t}");
        for l in &lines[1..] {
            assert_eq!(bars(l), head, "{t}");
        }
    }

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
