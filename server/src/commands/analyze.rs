//! `dyeline analyze`: the post-mortem run of the detections (domain §6 and §7) over a data dir's
//! spans and its control plane's history (e.g. recorded by `dyeline import --timeline`).
//! JSON (the format `../shared/tools/check_findings.py` reads), CSV (every finding, one row
//! each: [`csv_table`]) or a table on stdout; logs on stderr. `--fail-on TYPES` makes a CI gate
//! of it: exit status [`EXIT_FINDINGS`] when the report has a finding of one of those types.
//! The analysis and its text are `dyeline_queries::analyze`'s ([`analyze::run`], [`text`]);
//! this opens the data dir and prints.

use std::path::PathBuf;

use dyeline_model::time::parse_time;
use dyeline_queries::analyze::{self, Detection, Report, text};
use dyeline_store::Store;

use super::{DataFormat, EXIT_FINDINGS};
use crate::commands::BoxError;
use crate::commands::serve::store_config;
use crate::config::Config;

#[derive(clap::Args)]
pub struct AnalyzeArgs {
    /// Data directory.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Spans starting at or after this time (RFC 3339 or Unix nanoseconds).
    #[arg(long)]
    pub from: Option<String>,
    /// Spans starting before this time.
    #[arg(long)]
    pub to: Option<String>,
    /// Output format. CSV: one table of every finding, a row each, `type` in the first
    /// column and the union of the finding types' fields after it (empty where a type has no
    /// such field; lists joined with spaces).
    #[arg(long, value_enum, default_value = "table")]
    pub format: DataFormat,
    /// Findings listed per detection in the table (the count heads each section); 0 lists
    /// all. JSON always has every finding.
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
    /// Also list every span's parsed decisions.
    #[arg(long)]
    pub with_decisions: bool,
    /// Only the spans of this deployment environment (resource
    /// `deployment.environment.name`). Default: every environment, each judged apart, each
    /// finding naming its own. A name no span in the range carries is warned about.
    #[arg(long, value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub environment: Option<String>,
    /// Run only these detections (comma-separated finding types: cross_color_hop,
    /// missing_decision, drained_side, ratio_deviation, instance_skew, error_spike, and the
    /// lane ones lane_leak, lane_tag_dropped, lane_pollution, lane_tag_changed,
    /// lane_error_spike). Default: all. With only drained_side, ratio_deviation,
    /// instance_skew and error_spike and no --with-decisions, the span ids, decisions and ends
    /// are not read, which makes the run faster; without a lane type the lane rules do not
    /// run, without one of the first six their work is skipped.
    #[arg(long, value_delimiter = ',', num_args = 1..)]
    pub detections: Vec<dyeline_queries::analyze::Detection>,
    /// Exit with status 3 when the report has a finding of one of these types
    /// (comma-separated finding types as for --detections, or `any`), 0 when it has none;
    /// the output is printed either way. For CI gates.
    #[arg(long, value_name = "TYPES", value_delimiter = ',', num_args = 1.., value_parser = parse_fail_on)]
    pub fail_on: Vec<FailOn>,
}

/// One value of `--fail-on`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailOn {
    /// Every finding type.
    Any,
    /// One finding type.
    Type(Detection),
}

/// Reads one `--fail-on` value: `any` or a finding type's name; an unknown name is a usage
/// error (exit 2) naming the valid ones.
fn parse_fail_on(s: &str) -> Result<FailOn, String> {
    let s = s.trim();
    if s == "any" {
        return Ok(FailOn::Any);
    }
    s.parse::<Detection>().map(FailOn::Type).map_err(|_| {
        let names: Vec<&str> = Detection::ALL.iter().map(|d| d.as_str()).collect();
        format!(
            "unknown finding type {s:?}: one of any, {}",
            names.join(", ")
        )
    })
}

/// Whether `detection` is one `fail_on` names.
fn fails_on(fail_on: &[FailOn], detection: Detection) -> bool {
    fail_on
        .iter()
        .any(|f| *f == FailOn::Any || *f == FailOn::Type(detection))
}

/// Refuses a `--fail-on` type that `--detections` leaves out: that run would not look for it,
/// so it could never fail on it.
///
/// # Errors
/// The first such type, with the detections that run.
pub fn check_fail_on(args: &AnalyzeArgs) -> Result<(), String> {
    if args.detections.is_empty() {
        return Ok(());
    }
    for f in &args.fail_on {
        if let FailOn::Type(d) = f
            && !args.detections.contains(d)
        {
            return Err(format!(
                "--fail-on {d}: not among --detections ({}), so never looked for",
                args.detections
                    .iter()
                    .map(|d| d.as_str())
                    .collect::<Vec<_>>()
                    .join(",")
            ));
        }
    }
    Ok(())
}

/// Runs the analysis of `config.data_dir` between `args.from` and `args.to` (RFC 3339 or
/// Unix ns) and prints it: JSON (every finding), CSV ([`csv_table`]), or [`text::table`] with
/// at most `args.limit` findings per detection (0: all). No `args.detections`: all. The exit
/// status: [`EXIT_FINDINGS`] when a finding is of a type `args.fail_on` names, else 0.
///
/// # Errors
/// A missing or unreadable data dir, a time that does not parse, a failed scan.
pub async fn run(config: Config, args: &AnalyzeArgs) -> Result<u8, BoxError> {
    let from = args.from.as_deref().map(parse_time).transpose()?;
    let to = args.to.as_deref().map(parse_time).transpose()?;
    let report = analyze_dir(
        &config,
        from,
        to,
        args.with_decisions,
        &args.detections,
        &analyze::EnvironmentFilter::of(args.environment.as_deref()),
    )
    .await?;
    if let Some(env) = &args.environment
        && report.spans == 0
    {
        eprintln!(
            "dyeline: warning: no span in the range names the deployment environment {env:?} \
             (resource deployment.environment.name)"
        );
    }
    match args.format {
        DataFormat::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        DataFormat::Csv => print!("{}", csv_table(&report)?),
        DataFormat::Table => print!("{}", text::table(&report, args.limit)),
    }
    let failing: Vec<Detection> = Detection::ALL
        .into_iter()
        .filter(|d| fails_on(&args.fail_on, *d))
        .filter(|d| report.findings().any(|f| f.detection() == *d))
        .collect();
    if failing.is_empty() {
        return Ok(0);
    }
    let counts: Vec<String> = failing
        .iter()
        .map(|d| {
            let n = report.findings().filter(|f| f.detection() == *d).count();
            format!("{n} {d}")
        })
        .collect();
    eprintln!(
        "dyeline: --fail-on: {} (exit status {EXIT_FINDINGS})",
        counts.join(", ")
    );
    Ok(EXIT_FINDINGS)
}

/// Every finding of `report` as one CSV table (what a spreadsheet opens as one sheet, and
/// what filters by its first column): a header line, then a row per finding in the report's
/// order. Columns: `type` (the finding type, as `--detections` names it), then each field of
/// the finding types present, each once (a field several types have, such as `channel` or
/// `app`, is one column): first those of [`LEAD_COLUMNS`] in that order, then the others in
/// alphabetical order. A cell is empty where the finding's type has
/// no such field or its value is null; a list is its items joined with spaces; an object is
/// its JSON. No finding: the header `type` alone.
///
/// # Errors
/// Only a failed serialization (none expected).
pub fn csv_table(report: &Report) -> Result<String, BoxError> {
    let rows: Vec<(Detection, serde_json::Map<String, serde_json::Value>)> = report
        .findings()
        .map(|f| match serde_json::to_value(f) {
            Ok(serde_json::Value::Object(m)) => Ok((f.detection(), m)),
            Ok(other) => Err(format!("a finding is not an object: {other}").into()),
            Err(e) => Err(BoxError::from(e)),
        })
        .collect::<Result<_, BoxError>>()?;
    let mut columns: Vec<&str> = Vec::new();
    for (_, m) in &rows {
        for k in m.keys() {
            if !columns.contains(&k.as_str()) {
                columns.push(k);
            }
        }
    }
    columns.sort_by_key(|c| {
        let lead = LEAD_COLUMNS.iter().position(|l| l == c);
        (lead.unwrap_or(LEAD_COLUMNS.len()), *c)
    });
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(std::iter::once("type").chain(columns.iter().copied()))?;
    for (d, m) in &rows {
        let cells = columns.iter().map(|c| cell(m.get(*c)));
        w.write_record(std::iter::once(d.as_str().to_owned()).chain(cells))?;
    }
    Ok(String::from_utf8(
        w.into_inner().map_err(|e| e.to_string())?,
    )?)
}

/// The columns of [`csv_table`] that come first (after `type`), where present: where and
/// when, then the finding's own fields.
pub const LEAD_COLUMNS: [&str; 14] = [
    "channel",
    "lane_group",
    "app",
    "lane",
    "color",
    "kind",
    "reason",
    "count",
    "window_start_unix_nano",
    "window_end_unix_nano",
    "t_unix_nano",
    "trace_id",
    "span_id",
    "from_app",
];

/// A JSON value as a CSV cell: strings bare, null empty, lists joined with spaces.
fn cell(v: Option<&serde_json::Value>) -> String {
    use serde_json::Value;
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| cell(Some(i)))
            .collect::<Vec<_>>()
            .join(" "),
        Some(other) => other.to_string(),
    }
}

/// The report of `detections` over the spans of `config.data_dir` starting in `[from, to)`
/// (Unix ns; all when absent; every detection when none is given) against its control
/// plane's history, with `config.analyzer`'s thresholds ([`analyze::run`], which chooses
/// between counting and loading the spans). Opens the store and the control plane read-only,
/// so a server may hold the data dir.
///
/// # Errors
/// A missing or unreadable data dir, a failed read.
pub async fn analyze_dir(
    config: &Config,
    from: Option<i64>,
    to: Option<i64>,
    with_decisions: bool,
    detections: &[Detection],
    environment: &analyze::EnvironmentFilter,
) -> Result<Report, BoxError> {
    if !config.data_dir.exists() {
        return Err(format!(
            "data directory {} does not exist",
            config.data_dir.display()
        )
        .into());
    }
    let mut sc = store_config(config);
    sc.read_only = true;
    let store = tokio::task::spawn_blocking(move || Store::open(sc)).await??;
    super::storage::attach_read_only(config, &store).await?;
    let plane = crate::wiring::plane::open_read_only(config).await?;
    let timeline = plane.timeline();
    plane.close().await;
    if timeline.is_empty() {
        tracing::warn!("the data dir has no channel history: no app is in a releasing channel");
    }
    Ok(analyze::run(
        &store.table(),
        &timeline,
        &config.analyzer,
        (from, to),
        detections,
        with_decisions,
        environment,
    )
    .await?)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use dyeline_queries::SqlEngine;
    use dyeline_queries::analyze::read::files::{SpanCache, load_cached};
    use dyeline_queries::analyze::read::scan::load;
    use dyeline_queries::analyze::spans::{NO_SOURCE, Spans};
    use dyeline_queries::analyze::{report_of, report_windows};

    use dyeline_control::ControlPlane;

    use super::*;

    /// Everything a report depends on, in an order that depends neither on interning order
    /// nor on the order of whole traces (a merge of files leaves traces grouped, a scan sorts
    /// them): each trace's lines in the spans' order, the traces sorted.
    fn canonical(s: &Spans) -> Vec<String> {
        let mut v: Vec<String> = s
            .iter()
            .map(|r| {
                let mut d: Vec<String> = s
                    .decisions(r)
                    .iter()
                    .map(|(c, col)| format!("{}={}", s.channels.name(*c), col.as_str()))
                    .collect();
                d.sort();
                format!(
                    "{:032x} {:016x} {:?} {} {} {} {:?} {:?} {} {} {} {:?} {:?} {} {:?} {:?}",
                    r.trace,
                    r.span,
                    r.parent,
                    s.apps.name(r.app),
                    s.instances.name(r.instance),
                    r.color.as_str(),
                    r.kind,
                    r.traffic,
                    r.start,
                    r.end,
                    r.is_error,
                    d,
                    r.channel.get().map(|c| s.channels.name(c).to_owned()),
                    r.blue_percent,
                    s.interval(r),
                    (r.source != NO_SOURCE).then(|| s.sources.name(u32::from(r.source)))
                )
            })
            .collect();
        for d in &s.decision_recs {
            let r = s.get(d.index);
            v.push(format!(
                "rec {:016x} {} {:?}",
                r.span, d.malformed_pairs, d.conflicting
            ));
        }
        // Span lines grouped per trace (each trace's spans are contiguous), in trace order.
        let n = s.len();
        let mut traces: Vec<&[String]> = v[..n].chunk_by(|a, b| a[..32] == b[..32]).collect();
        traces.sort();
        let mut out: Vec<String> = traces.concat();
        let mut recs = v[n..].to_vec();
        recs.sort();
        out.extend(recs);
        out.push(format!("{:?}", s.instance_rules));
        out
    }

    /// The shared analysis fixtures.
    fn fixtures() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/analysis")
    }

    /// A configuration over a data dir in a new temporary directory (kept while the guard is).
    fn temp_config() -> (tempfile::TempDir, Config) {
        let dir = tempfile::tempdir().unwrap();
        let config = Config {
            data_dir: dir.path().join("data"),
            ..Config::default()
        };
        (dir, config)
    }

    /// The first `n` OTLP/JSON requests (lines) of the release-walk capture.
    fn walk_requests(n: usize) -> Vec<String> {
        use std::io::BufRead as _;
        let walk = std::fs::File::open(fixtures().join("release-walk/spans.jsonl.gz")).unwrap();
        std::io::BufReader::new(flate2::read::GzDecoder::new(walk))
            .lines()
            .take(n)
            .map(Result::unwrap)
            .collect()
    }

    /// A store over a new data dir holding release-walk's first `n` requests: the first
    /// `in_files` imported into Parquet files (with the timeline), the rest written to
    /// memory segments (no flush for an hour). Asserts both are there.
    async fn files_then_memory(n: usize, in_files: usize) -> (tempfile::TempDir, Config, Store) {
        let (dir, config) = temp_config();
        let lines = walk_requests(n);
        let head_path = dir.path().join("walk-head.jsonl");
        std::fs::write(&head_path, lines[..in_files].join("\n")).unwrap();
        crate::commands::import::run(
            config.clone(),
            &[head_path],
            Some(&fixtures().join("release-walk/timeline.json")),
        )
        .await
        .unwrap();
        let mut sc = store_config(&config);
        sc.flush_interval = std::time::Duration::from_secs(3600);
        let store = open_store(sc).await;
        let options = crate::commands::serve::convert_options(&config).unwrap();
        for line in &lines[in_files..] {
            let request = dyeline_collector::json::decode_export_request(line.as_bytes()).unwrap();
            let rows = dyeline_collector::convert_request(&request, &options).unwrap();
            if let Some(batch) = rows.batch {
                store.write_waiting(batch, rows.keys).await.unwrap();
            }
        }
        let snap = store.snapshot();
        assert!(!snap.segments.is_empty() && !snap.files.is_empty());
        (dir, config, store)
    }

    async fn open_store(sc: dyeline_store::StoreConfig) -> Store {
        tokio::task::spawn_blocking(move || Store::open(sc))
            .await
            .unwrap()
            .unwrap()
    }

    /// The cached load (dashboard) returns what a scan returns, for the whole data and for a
    /// sub-range, the first time (files read) and the second (files from the cache).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn cached_load_equals_a_scan_of_release_small() {
        let fixture = fixtures().join("release-small");
        let (_dir, config) = temp_config();
        crate::commands::import::run(
            config.clone(),
            &[fixture.join("spans.jsonl")],
            Some(&fixture.join("timeline.json")),
        )
        .await
        .unwrap();
        let mut sc = store_config(&config);
        sc.read_only = true;
        let store = open_store(sc).await;
        let table = store.table();
        let engine = SqlEngine::new(store.table()).unwrap();
        let plane = ControlPlane::open_read_only(&config.data_dir)
            .await
            .unwrap();
        let timeline = plane.timeline();
        let cache = Arc::new(SpanCache::new(10_000_000));
        let whole = load(engine.context(), &timeline, None, None).await.unwrap();
        assert!(whole.len() > 100, "{}", whole.len());
        assert_eq!(cache.held(), (0, 0));
        let first = load_cached(&table, &cache, &timeline, None, None)
            .await
            .unwrap();
        assert_eq!(canonical(&first), canonical(&whole));
        let (files, held) = cache.held();
        assert!(files >= 1 && held == whole.len(), "{files} {held}");
        let again = load_cached(&table, &cache, &timeline, None, None)
            .await
            .unwrap();
        assert_eq!(canonical(&again), canonical(&whole));
        // A sub-range: the middle third of the spans' starts.
        let (min, max) = whole.iter().fold((i64::MAX, i64::MIN), |(a, b), s| {
            (a.min(s.start), b.max(s.start))
        });
        let (from, to) = (min + (max - min) / 3, min + 2 * (max - min) / 3);
        let part = load(engine.context(), &timeline, Some(from), Some(to))
            .await
            .unwrap();
        assert!(!part.is_empty() && part.len() < whole.len());
        let cached = load_cached(&table, &cache, &timeline, Some(from), Some(to))
            .await
            .unwrap();
        assert_eq!(canonical(&cached), canonical(&part), "a sub-range");
        // A cache too small for every file still answers the same.
        let tiny = Arc::new(SpanCache::new(1));
        let small = load_cached(&table, &tiny, &timeline, None, None)
            .await
            .unwrap();
        assert_eq!(canonical(&small), canonical(&whole));
        assert!(tiny.held().0 <= 1);
    }

    /// A lookup by trace id opens only the files whose trace index holds the id: the index
    /// of a file the store wrote, and of files found at open once the background pass has
    /// read them. The answer is the trace's spans either way.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn trace_lookups_skip_files_without_the_trace() {
        let (dir, config) = temp_config();
        // Two imports (two sets of files holding different traces): release-small, and the
        // first three requests of release-walk.
        let head_path = dir.path().join("walk-head.jsonl");
        std::fs::write(&head_path, walk_requests(3).join("\n")).unwrap();
        for file in [fixtures().join("release-small/spans.jsonl"), head_path] {
            crate::commands::import::run(config.clone(), &[file], None)
                .await
                .unwrap();
        }
        let store = open_store(store_config(&config)).await;
        let files = store.snapshot().files.len();
        assert!(files >= 2, "{files} files");
        // Files found at open are indexed in the background.
        for _ in 0..600 {
            if store.snapshot().files.iter().all(|f| f.traces.is_some()) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        let snap = store.snapshot();
        assert!(snap.files.iter().all(|f| f.traces.is_some()));
        let engine = SqlEngine::new(store.table()).unwrap();
        let text = |sql: String| {
            let ctx = engine.context().clone();
            async move {
                let batches = ctx.sql(&sql).await.unwrap().collect().await.unwrap();
                arrow::util::pretty::pretty_format_batches(&batches)
                    .unwrap()
                    .to_string()
            }
        };
        let first = text("SELECT trace_id FROM spans ORDER BY trace_id LIMIT 1".into()).await;
        let id = first
            .split(|c: char| !c.is_ascii_hexdigit())
            .find(|w| w.len() == 32)
            .unwrap()
            .to_owned();
        let holding = snap
            .files
            .iter()
            .filter(|f| f.traces.as_ref().unwrap().may_contain(&id))
            .count();
        assert!(holding >= 1 && holding < files, "{holding} of {files}");
        let plan = text(format!(
            "EXPLAIN SELECT * FROM spans WHERE trace_id = '{id}'"
        ))
        .await;
        // Files named in the plan (a large file may be split into byte ranges).
        let opened: std::collections::BTreeSet<&str> = plan
            .split(|c: char| !(c.is_ascii_alphanumeric() || "/._-=".contains(c)))
            .filter(|w| w.ends_with(".parquet"))
            .collect();
        assert_eq!(opened.len(), holding, "{plan}");
        // Same spans as a filter the index cannot use (every file read).
        let count = |filter: String| {
            let text = &text;
            async move {
                let t = text(format!("SELECT count(*) AS n FROM spans WHERE {filter}")).await;
                t.split(|c: char| !c.is_ascii_digit())
                    .find(|w| !w.is_empty())
                    .unwrap()
                    .parse::<u64>()
                    .unwrap()
            }
        };
        let indexed = count(format!("trace_id = '{id}'")).await;
        let scanned = count(format!("upper(trace_id) = upper('{id}')")).await;
        assert!(indexed >= 1);
        assert_eq!(indexed, scanned);
        drop(engine);
        tokio::task::block_in_place(|| store.close());
    }

    /// With files and memory segments both in the range: the cached load (first without, then
    /// with the files' merge order, for the whole data and a sub-range) returns what a scan
    /// returns.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn cached_load_with_memory_segments_equals_a_scan() {
        // release-walk's first three requests in files, the next three in memory.
        let (_dir, config, store) = files_then_memory(6, 3).await;
        let table = store.table();
        let engine = SqlEngine::new(store.table()).unwrap();
        let plane = ControlPlane::open_read_only(&config.data_dir)
            .await
            .unwrap();
        let timeline = plane.timeline();
        let cache = Arc::new(SpanCache::new(10_000_000));
        let whole = load(engine.context(), &timeline, None, None).await.unwrap();
        for round in 0..2 {
            let cached = load_cached(&table, &cache, &timeline, None, None)
                .await
                .unwrap();
            assert_eq!(canonical(&cached), canonical(&whole), "round {round}");
        }
        // Sub-ranges: files cut by the range, the memory's spans merged in.
        let (min, max) = whole.iter().fold((i64::MAX, i64::MIN), |(a, b), s| {
            (a.min(s.start), b.max(s.start))
        });
        for (from, to) in [
            (min + (max - min) / 3, max + 1),
            (min, min + (max - min) / 2),
        ] {
            let part = load(engine.context(), &timeline, Some(from), Some(to))
                .await
                .unwrap();
            assert!(!part.is_empty() && part.len() < whole.len());
            let cached = load_cached(&table, &cache, &timeline, Some(from), Some(to))
                .await
                .unwrap();
            assert_eq!(canonical(&cached), canonical(&part));
        }
        drop(engine);
        tokio::task::block_in_place(|| store.close());
    }

    /// The windowed-only path (files counted as read, memory segments too) finds what the
    /// full load's window detections find, with the same spans and instances, for the whole
    /// data and for sub-ranges that cut windows: release-walk's first 330 requests in
    /// files, the rest (its error spike included) in memory.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn window_counts_over_files_and_memory_equal_the_full_load() {
        use dyeline_queries::analyze::read::files::count_windows_once;
        let (_dir, config, store) = files_then_memory(usize::MAX, 330).await;
        let table = store.table();
        let engine = SqlEngine::new(store.table()).unwrap();
        let plane = ControlPlane::open_read_only(&config.data_dir)
            .await
            .unwrap();
        let timeline = plane.timeline();
        let windowed: Vec<Detection> = Detection::ALL
            .into_iter()
            .filter(|d| d.is_counted())
            .collect();
        let json = |r: &Report| serde_json::to_value(r).unwrap();
        let whole = load(engine.context(), &timeline, None, None).await.unwrap();
        let (min, max) = whole.iter().fold((i64::MAX, i64::MIN), |(a, b), s| {
            (a.min(s.start), b.max(s.start))
        });
        let mut spikes = 0;
        for (from, to) in [
            (None, None),
            (Some(min + (max - min) / 3), Some(max + 1)),
            (Some(min + 7_777_777_777), Some(min + (max - min) / 2)),
        ] {
            let spans = load(engine.context(), &timeline, from, to).await.unwrap();
            let mut full = json(&report_of(&spans, &config.analyzer, false, &windowed));
            let counts = count_windows_once(
                &table,
                &timeline,
                &config.analyzer,
                from,
                to,
                &Default::default(),
            )
            .await
            .unwrap();
            let counted = json(&report_windows(counts, &config.analyzer, &windowed));
            // The counts do not read the decisions: no baggage faults, rather than none.
            for key in ["malformed_pairs", "conflicting_decisions"] {
                assert!(full.as_object_mut().unwrap().remove(key).is_some());
                assert!(counted.get(key).is_none(), "{key}");
            }
            assert_eq!(counted, full, "range {from:?}..{to:?}");
            spikes += full["error_spike"].as_array().unwrap().len();
        }
        // The comparison is not between empty reports: release-walk's spike is found.
        assert!(spikes > 0);
        drop(engine);
        tokio::task::block_in_place(|| store.close());
    }
}
