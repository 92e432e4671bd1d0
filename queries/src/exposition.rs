//! The text of `/metrics` in the format the scraper asks for. The registry encodes
//! OpenMetrics 1.0 (with exemplars: trace ids on the span series); a scraper that does not
//! accept `application/openmetrics-text` (an older Prometheus, `promtool check metrics`,
//! `curl`) gets the Prometheus text format 0.0.4 converted from it ([`prometheus_text`]):
//! no exemplars, `# UNIT` and `# EOF` lines, no `_created` samples, and a counter's `# HELP`
//! and `# TYPE` named with its `_total` samples' name, an info metric as a gauge.

/// The content type of the OpenMetrics text.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The content type of the Prometheus text format.
pub const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// True when an `Accept` header value takes OpenMetrics.
pub fn accepts_openmetrics(accept: &str) -> bool {
    accept.split(',').any(|part| {
        let mut fields = part.split(';').map(str::trim);
        let media = fields.next().unwrap_or("");
        let refused = fields.any(|f| f.replace(' ', "") == "q=0");
        media.eq_ignore_ascii_case("application/openmetrics-text") && !refused
    })
}

/// The Prometheus text format 0.0.4 of the OpenMetrics text `om`.
pub fn prometheus_text(om: &str) -> String {
    // Families by name → their type, to rename counters' and infos' metadata lines.
    let mut types: std::collections::HashMap<&str, &str> = std::collections::HashMap::new();
    for line in om.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ")
            && let Some((name, kind)) = rest.split_once(' ')
        {
            types.insert(name, kind.trim());
        }
    }
    let renamed = |name: &str| -> String {
        match types.get(name).copied() {
            Some("counter") => format!("{name}_total"),
            Some("info") => format!("{name}_info"),
            _ => name.to_owned(),
        }
    };
    let mut out = String::with_capacity(om.len());
    for line in om.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            out.push_str(&format!("# HELP {} {help}\n", renamed(name)));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let kind = match kind.trim() {
                "info" | "stateset" => "gauge",
                "gaugehistogram" => "histogram",
                "unknown" => "untyped",
                k => k,
            };
            out.push_str(&format!("# TYPE {} {kind}\n", renamed(name)));
            continue;
        }
        if line.starts_with('#') {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        let name_end = line.find(['{', ' ']).unwrap_or(line.len());
        if line[..name_end].ends_with("_created") {
            continue;
        }
        // A sample: its exemplar (after " # ") dropped. A label value may hold " # ", so
        // the exemplar is looked for after the labels' closing brace.
        let after_labels = match line[name_end..].starts_with('{') {
            true => closing_brace(line, name_end).map_or(line.len(), |i| i + 1),
            false => name_end,
        };
        let sample = match line[after_labels..].find(" # ") {
            Some(i) => &line[..after_labels + i],
            None => line,
        };
        out.push_str(sample);
        out.push('\n');
    }
    out
}

/// The index of the `}` closing the label set that opens at `open` (a `{`), skipping quoted
/// values with their escapes.
fn closing_brace(line: &str, open: usize) -> Option<usize> {
    let mut quoted = false;
    let mut escaped = false;
    for (i, c) in line[open..].char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '}' if !quoted => return Some(open + i),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openmetrics_becomes_prometheus_text() {
        let om = "# HELP dyeline_spans_requests Spans.\n\
                  # TYPE dyeline_spans_requests counter\n\
                  dyeline_spans_requests_total{app=\"a # b\",kind=\"RPC\"} 3 # {trace_id=\"0af7\"} 1.0\n\
                  dyeline_spans_requests_created{app=\"a\"} 1.7e9\n\
                  # HELP dyeline_build Build.\n\
                  # TYPE dyeline_build info\n\
                  dyeline_build_info{version=\"0.1.0\"} 1\n\
                  # HELP dyeline_up_seconds Up.\n\
                  # TYPE dyeline_up_seconds gauge\n\
                  # UNIT dyeline_up_seconds seconds\n\
                  dyeline_up_seconds 5\n\
                  # EOF\n";
        assert_eq!(
            prometheus_text(om),
            "# HELP dyeline_spans_requests_total Spans.\n\
             # TYPE dyeline_spans_requests_total counter\n\
             dyeline_spans_requests_total{app=\"a # b\",kind=\"RPC\"} 3\n\
             # HELP dyeline_build_info Build.\n\
             # TYPE dyeline_build_info gauge\n\
             dyeline_build_info{version=\"0.1.0\"} 1\n\
             # HELP dyeline_up_seconds Up.\n\
             # TYPE dyeline_up_seconds gauge\n\
             dyeline_up_seconds 5\n"
        );
    }

    #[test]
    fn only_an_accepted_openmetrics_is_openmetrics() {
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert!(accepts_openmetrics(prometheus));
        assert!(!accepts_openmetrics("*/*"));
        assert!(!accepts_openmetrics("text/plain"));
        assert!(!accepts_openmetrics("application/openmetrics-text;q=0"));
    }
}
