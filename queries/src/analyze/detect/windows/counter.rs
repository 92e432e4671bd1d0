//! [`WindowCounter`]: the windowed detections' counts (domain §6.3–6) of spans read batch by
//! batch, without keeping their records. It reads each batch through [`Loader::push`] and
//! takes the spans straight back out ([`Loader::drain_batch`]).

use dyeline_model::Color;
use dyeline_model::release::Timeline;

use super::{Acc, WindowCounts, per_channel};
use crate::analyze::config::{AnalyzerConfig, Thresholds};
use crate::analyze::read::loader::{Drained, Loader};
use crate::analyze::read::resolve::Changes;
use crate::analyze::spans::EnvironmentFilter;
use crate::analyze::spans::{DecisionSets, RuleSet};
use crate::sql::SqlError;

/// The windowed detections' counts (domain §6.3–6) of spans read batch by batch, without
/// keeping their records: each batch's spans are resolved from the timeline, those starting
/// in `lo..=hi` are counted, and the records are dropped. Memory: the counts (one entry per
/// window, app, colour and instance) and one batch's records, not every span's; it is the
/// windowed-only path of `dyeline analyze`
/// ([`count_windows_once`](crate::analyze::read::files::count_windows_once)).
pub struct WindowCounter<'a> {
    loader: Loader,
    timeline: &'a Timeline,
    config: &'a AnalyzerConfig,
    lo: i64,
    hi: i64,
    /// The changes of the apps interned so far, rebuilt when a batch brings a new one.
    changes: Option<Changes>,
    per_channel: Vec<(&'a Thresholds, i64)>,
    acc: Acc,
    spans: u64,
    rules: RuleSet,
    last_rule: Vec<Option<(u32, Color, u32)>>,
    /// The environments read ([`EnvironmentFilter`]).
    filter: EnvironmentFilter,
    /// The environments of the spans counted, by [`SpanRec::env`](crate::analyze::spans::SpanRec::env).
    environments: [bool; 256],
}

impl<'a> WindowCounter<'a> {
    /// A counter of the spans starting in `lo..=hi` (Unix ns) of the environments `filter`
    /// admits against `timeline`, with `config`'s thresholds and windows.
    pub fn new(
        timeline: &'a Timeline,
        config: &'a AnalyzerConfig,
        lo: i64,
        hi: i64,
        filter: EnvironmentFilter,
    ) -> Self {
        Self {
            loader: Loader::default(),
            timeline,
            config,
            lo,
            hi,
            changes: None,
            per_channel: Vec::new(),
            acc: Acc::default(),
            spans: 0,
            rules: RuleSet::default(),
            last_rule: Vec::new(),
            filter,
            environments: [false; 256],
        }
    }

    /// Counts the rows of `batch` (columns as [`Loader::push`] takes them; at least
    /// [`WINDOW_COLUMN_NAMES`](crate::analyze::read::columns::WINDOW_COLUMN_NAMES)).
    ///
    /// # Errors
    /// As [`Loader::push`].
    pub fn push(&mut self, batch: &arrow::array::RecordBatch) -> Result<(), SqlError> {
        let apps_before = self.loader.names().apps.len();
        self.loader.push(batch)?;
        // The baggage faults are not reported from here: the drain drops them.
        let Drained { names, spans } = self.loader.drain_batch();
        if self.changes.is_none() || names.apps.len() != apps_before {
            self.changes = Some(Changes::new(names, self.timeline));
        }
        if self.per_channel.len() != names.channels.len() {
            self.per_channel = per_channel(names, self.config);
        }
        let Some(changes) = &self.changes else {
            return Ok(());
        };
        self.last_rule.resize(names.instances.len(), None);
        let (lo, hi) = (self.lo, self.hi);
        let (rules, last_rule) = (&mut self.rules, &mut self.last_rule);
        let (filter, environments) = (&self.filter, &mut self.environments);
        let mut counted = 0u64;
        // The spans in range, resolved as they are counted; the loader's vectors keep their
        // room for the next batch.
        let in_range = spans.filter_map(|(mut s, r)| {
            if !(lo..=hi).contains(&s.start) || !filter.admits(names.environment(s.env)) {
                return None;
            }
            environments[usize::from(s.env)] = true;
            changes.apply(&mut s);
            let last = &mut last_rule[s.instance as usize];
            if *last != Some((s.app, s.color, r)) {
                rules.insert((s.instance, s.app, s.color, r));
                *last = Some((s.app, s.color, r));
            }
            counted += 1;
            Some(s)
        });
        self.acc.add(names, &self.per_channel, in_range);
        self.spans += counted;
        Ok(())
    }

    /// The counts, with the names they refer to and the instance rules of the spans counted.
    pub fn finish(self) -> WindowCounts {
        let rules = self.loader.name_rules(self.rules);
        let mut names = self.loader.into_names();
        names.decision_sets = DecisionSets::default();
        let environments = (0..=u8::MAX)
            .filter(|&e| self.environments[usize::from(e)])
            .map(|e| names.environment(e).map(str::to_owned))
            .collect();
        let mut counts = WindowCounts::new(self.acc, names, self.spans, rules);
        counts.environments = environments;
        counts
    }
}
