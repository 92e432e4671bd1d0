//! The analyzer's records of spans: one compact [`SpanRec`] per span (80 bytes: names are
//! interned, decision sets too) in [`Spans`], grouped by trace, with the names, the decision
//! sets, the baggage faults and the instances' colour rules they refer to.

use std::collections::HashMap;

use dyeline_model::{Color, TrafficKind};
use smallvec::SmallVec;

use super::intern::Interner;

/// Span kinds the analyzer distinguishes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// SERVER.
    Server,
    /// CONSUMER.
    Consumer,
    /// CLIENT.
    Client,
    /// PRODUCER.
    Producer,
    /// INTERNAL, UNSPECIFIED.
    Other,
}

impl Kind {
    /// SERVER or CONSUMER: the spans the trace detections and the lane rules judge.
    pub fn is_judged(self) -> bool {
        matches!(self, Self::Server | Self::Consumer)
    }
}

/// A set of decisions: (channel id, colour) pairs, up to three without a heap allocation (a
/// fourth channel costs one), interned in [`DecisionSets`].
pub type Decisions = SmallVec<[(u32, Color); 3]>;

/// One span as the analyzer sees it.
#[derive(Clone, Debug)]
pub struct SpanRec {
    /// Trace id.
    pub trace: u128,
    /// Span id.
    pub span: u64,
    /// Parent span id, if any (an all-zero id is no parent, as in OTLP; the niche keeps the
    /// field at 8 bytes).
    pub parent: Option<std::num::NonZeroU64>,
    /// App (`service_name`), interned in [`Spans::apps`].
    pub app: u32,
    /// Instance, interned in [`Spans::instances`].
    pub instance: u32,
    /// Instance colour.
    pub color: Color,
    /// SERVER / CONSUMER / other.
    pub kind: Kind,
    /// Traffic kind, if any.
    pub traffic: Option<TrafficKind>,
    /// Start, Unix ns.
    pub start: i64,
    /// End, Unix ns.
    pub end: i64,
    /// Error per domain §6 (resolved at ingest).
    pub is_error: bool,
    /// The span's decisions, a set interned in [`Spans::decision_sets`] (0: none):
    /// [`Spans::decisions`] reads it. The spans of a trace carry the same baggage, so a
    /// release's spans share a handful of sets, and an id keeps the record at 80 bytes.
    pub decision_set: u32,
    /// Effective channel of the app at `start` (interned), if any.
    pub channel: ChannelRef,
    /// Effective blue_percent at `start`.
    pub blue_percent: u8,
    /// The app's configuration interval holding `start`, in the load's intervals (0: the
    /// whole time line, before the span is resolved): [`Spans::interval`] reads it.
    pub interval: u32,
    /// The attribute the decisions were read from, interned in [`Spans::sources`], or
    /// [`NO_SOURCE`] (none; also for a load with more than 254 distinct ones, where the
    /// configured chain has a handful). It fits in the record's padding.
    pub source: u8,
    /// The span's lane facts (its instance's lane and the rule that decided it, its lane
    /// tag), interned in [`Spans::lanes`] ([`LaneTable::fact`]); 0 is base by default with no
    /// tag. It fits in the record's padding.
    pub lane: u16,
    /// The span's deployment environment ([`env_id`] of its id in [`Spans::environments`]);
    /// 0 is none. It fits in the record's padding.
    pub env: u8,
}

/// Which environments an analysis reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum EnvironmentFilter {
    /// Every environment, each judged apart.
    #[default]
    All,
    /// Only the spans of this environment.
    Only(String),
}

impl EnvironmentFilter {
    /// The filter of an optional `environment` parameter (absent or empty: all).
    pub fn of(environment: Option<&str>) -> Self {
        match environment.map(str::trim).filter(|e| !e.is_empty()) {
            Some(e) => Self::Only(e.to_owned()),
            None => Self::All,
        }
    }

    /// True when spans of environment `env` (`None`: none) are read.
    pub fn admits(&self, env: Option<&str>) -> bool {
        match self {
            Self::All => true,
            Self::Only(e) => env == Some(e.as_str()),
        }
    }
}

/// [`SpanRec::env`] of the environment interned as `id`: `id + 1`, or 0 (none) past 254
/// distinct environments in one load (a handful in practice).
pub fn env_id(id: u32) -> u8 {
    u8::try_from(id + 1).unwrap_or(0)
}

impl SpanRec {
    /// A request is a SERVER span: what the summary, the windowed detections and the
    /// dashboard's totals and charts count as requests (decided here, once). In the trace
    /// detections a request arrives over RPC; every other span they judge is an MQ message.
    pub fn is_request(&self) -> bool {
        self.kind == Kind::Server
    }
}

/// A span's effective channel id ([`Spans::channels`]) or none, in 4 bytes where
/// `Option<u32>` takes 8 (the record's 80 bytes hold its environment with it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ChannelRef(u32);

impl ChannelRef {
    /// No channel.
    pub const NONE: Self = Self(u32::MAX);

    /// `id`, or none. Channel id `u32::MAX` (never given: ids count up from 0) is none.
    pub fn of(id: Option<u32>) -> Self {
        id.map_or(Self::NONE, Self)
    }

    /// The channel id, if any.
    pub fn get(self) -> Option<u32> {
        (self != Self::NONE).then_some(self.0)
    }
}

/// [`SpanRec::source`] of a span without a decision source.
pub const NO_SOURCE: u8 = u8::MAX;

/// `id` as a [`SpanRec::source`].
pub(super) fn source_id(id: u32) -> u8 {
    u8::try_from(id)
        .ok()
        .filter(|&v| v != NO_SOURCE)
        .unwrap_or(NO_SOURCE)
}

/// Distinct decision sets, interned: id 0 is the empty set.
#[derive(Clone, Debug)]
pub struct DecisionSets {
    sets: Vec<Decisions>,
    ids: HashMap<Decisions, u32, foldhash::fast::RandomState>,
}

impl Default for DecisionSets {
    fn default() -> Self {
        Self {
            sets: vec![Decisions::new()],
            ids: HashMap::default(),
        }
    }
}

impl DecisionSets {
    /// The id of `set`, adding it if new (the empty set is 0).
    pub fn intern(&mut self, set: Decisions) -> u32 {
        if set.is_empty() {
            return 0;
        }
        if let Some(&id) = self.ids.get(&set) {
            return id;
        }
        let id = self.sets.len() as u32;
        self.sets.push(set.clone());
        self.ids.insert(set, id);
        id
    }

    /// The set `id` ((channel, colour) pairs, channels interned in [`Spans::channels`]).
    ///
    /// # Panics
    /// For an id this table did not give.
    pub fn get(&self, id: u32) -> &[(u32, Color)] {
        &self.sets[id as usize]
    }

    /// Number of sets, the empty one included.
    pub fn len(&self) -> usize {
        self.sets.len()
    }

    /// Always false: the empty set is always there.
    pub fn is_empty(&self) -> bool {
        self.sets.is_empty()
    }
}

/// The baggage faults of a span that has them (malformed pairs skipped, channels given twice):
/// few spans, so they are kept beside the records rather than in each.
#[derive(Clone, Debug)]
pub struct DecisionRec {
    /// Index of the span in [`Spans::iter`]'s order.
    pub index: usize,
    /// Malformed pairs skipped.
    pub malformed_pairs: u32,
    /// Channels given twice with different colours.
    pub conflicting: Vec<String>,
}

impl DecisionRec {
    /// This record for the span at `index` of a merged result.
    pub(super) fn at(&self, index: usize) -> DecisionRec {
        DecisionRec {
            index,
            ..self.clone()
        }
    }
}

/// The span links of batch consumers (domain §3): for each CONSUMER span with no parent that
/// names its producers by links, keyed by its (trace, span id), the (trace, span id) of each
/// linked span in link order. Few spans have them, so they are kept beside the records.
pub type ConsumerLinks =
    HashMap<(u128, u64), SmallVec<[(u128, u64); 2]>, foldhash::fast::RandomState>;

/// Every span of the analysed range.
#[derive(Clone, Debug, Default)]
pub struct Spans {
    /// The spans in chunks (a merge of parts keeps one chunk per part), grouped by trace:
    /// each trace's spans are contiguous within one chunk, by start then span id. A single
    /// load ([`load`](super::read::scan::load)) is one chunk with the traces sorted by id; a
    /// merge of parts ([`Loader::merge_finish`](super::read::loader::Loader::merge_finish))
    /// leaves them in the parts' order.
    chunks: Vec<Vec<SpanRec>>,
    /// Index of each chunk's first span among all the spans.
    offsets: Vec<usize>,
    /// Spans in all the chunks.
    len: usize,
    /// Spans that carry a decision source.
    pub decision_recs: Vec<DecisionRec>,
    /// The links of parentless CONSUMER spans ([`ConsumerLinks`]).
    pub consumer_links: ConsumerLinks,
    /// App names.
    pub apps: Interner,
    /// Instance ids.
    pub instances: Interner,
    /// Channel ids (from decisions and the timeline).
    pub channels: Interner,
    /// Deployment environments of [`SpanRec::env`] (`deployment_environment`).
    pub environments: Interner,
    /// Decision sources (attribute names) of [`SpanRec::source`].
    pub sources: Interner,
    /// Decision sets of [`SpanRec::decision_set`].
    pub decision_sets: DecisionSets,
    /// Configuration intervals of [`SpanRec::interval`]: (since, until), Unix ns, the app's
    /// last change at or before the span's start (`i64::MIN` if never) and its next change
    /// (`i64::MAX` if never). Entry 0 is the whole time line.
    pub(super) intervals: Vec<(i64, i64)>,
    /// (instance, app, color, rule) seen.
    pub instance_rules: Vec<(String, String, Color, String)>,
    /// The lanes, lane rules and tag carriers of [`SpanRec::lane`] (domain §7).
    pub lanes: LaneTable,
    /// The lane groups of the timeline the spans were resolved by (domain §7.1).
    pub lane_groups: dyeline_model::release::LaneGroupTimeline,
    /// The presence signals of OTLP metrics and logs exports around the spans (domain §7.1).
    pub signals: Vec<Signal>,
}

/// A presence signal of an OTLP metrics or logs export (domain §7.1): an instance (of an app,
/// in a lane) at an instant.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Signal {
    /// App.
    pub app: String,
    /// Instance id.
    pub instance: String,
    /// The instance's lane.
    pub lane: String,
    /// The rule that decided it.
    pub lane_rule: String,
    /// When, Unix ns.
    pub t_unix_nano: i64,
}

/// One span's lane facts: its instance's lane and the rule that decided it, and its lane tag
/// (ids of [`LaneTable::names`] and [`LaneTable::rules`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LaneFact {
    /// The instance's lane (0: base).
    pub lane: u32,
    /// The rule that decided it.
    pub rule: u32,
    /// The lane tag the span carries.
    pub tag: Option<u32>,
}

/// The spans on which a lane carrier is present, by (trace, span id, SERVER half): the carrier
/// that gave the tag (an id of [`LaneTable::sources`]) and the carriers that gave no lane id.
pub type Carriers = HashMap<(u128, u64, bool), (Option<u32>, u32), foldhash::fast::RandomState>;

/// The lane facts of the spans, interned (domain §7.1): the lanes (`base` is id 0), the rules
/// that decided them, the spans' (lane, rule, tag) facts, and beside the records, keyed by
/// span, the carriers present on the few spans that have one, and each instance's invalid lane
/// values.
#[derive(Clone, Debug)]
pub struct LaneTable {
    /// Lane ids; `base` is 0.
    pub names: Interner,
    /// Lane rule names (`deploy.lane`, a user rule's key, `default`).
    pub rules: Interner,
    /// Tag carrier keys.
    pub sources: Interner,
    facts: Vec<LaneFact>,
    ids: HashMap<LaneFact, u16, foldhash::fast::RandomState>,
    /// Spans on which a lane carrier is present, by (trace, span id, SERVER half): the carrier
    /// that gave the tag (an id of `sources`) and the carriers that gave no lane id.
    pub carriers: Carriers,
    /// Lane marker values that are not lane ids, by instance.
    pub invalid_values: std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
}

impl Default for LaneTable {
    fn default() -> Self {
        let mut names = Interner::default();
        names.intern(dyeline_model::LaneId::BASE);
        let mut rules = Interner::default();
        rules.intern(dyeline_model::lane::DEFAULT_RULE);
        let base = LaneFact {
            lane: 0,
            rule: 0,
            tag: None,
        };
        Self {
            names,
            rules,
            sources: Interner::default(),
            facts: vec![base],
            ids: std::iter::once((base, 0)).collect(),
            carriers: HashMap::default(),
            invalid_values: Default::default(),
        }
    }
}

impl LaneTable {
    /// The id of `fact`, adding it if new; 0 (base by default, no tag) past 65,535 distinct
    /// facts in one load (lanes × rules × tags: a handful in practice).
    pub fn intern(&mut self, fact: LaneFact) -> u16 {
        if let Some(&id) = self.ids.get(&fact) {
            return id;
        }
        let Ok(id) = u16::try_from(self.facts.len()) else {
            return 0;
        };
        self.facts.push(fact);
        self.ids.insert(fact, id);
        id
    }

    /// The facts of id `id`.
    pub fn fact(&self, id: u16) -> LaneFact {
        self.facts
            .get(usize::from(id))
            .copied()
            .unwrap_or(self.facts[0])
    }

    /// Number of distinct facts.
    pub fn facts(&self) -> usize {
        self.facts.len()
    }
}

impl Spans {
    /// The name of environment `env` (a [`SpanRec::env`]); `None` for 0, no environment.
    pub fn environment(&self, env: u8) -> Option<&str> {
        env.checked_sub(1)
            .map(|id| self.environments.name(u32::from(id)))
    }

    /// `s`'s decisions: (channel, colour) pairs, first-wins already.
    pub fn decisions(&self, s: &SpanRec) -> &[(u32, Color)] {
        self.decision_sets.get(s.decision_set)
    }

    /// `s`'s decision for `channel`.
    pub fn decision(&self, s: &SpanRec, channel: u32) -> Option<Color> {
        self.decisions(s)
            .iter()
            .find(|(c, _)| *c == channel)
            .map(|(_, col)| *col)
    }

    /// (since, until) of `s`'s app configuration (an entry of the load's intervals): when it last
    /// changed at or before `s.start` and when it next changes, Unix ns.
    pub fn interval(&self, s: &SpanRec) -> (i64, i64) {
        self.intervals
            .get(s.interval as usize)
            .copied()
            .unwrap_or((i64::MIN, i64::MAX))
    }

    /// Number of spans.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when there is no span.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every span, chunk after chunk (each trace's spans together).
    pub fn iter(&self) -> impl Iterator<Item = &SpanRec> + Clone {
        self.chunks.iter().flatten()
    }

    /// The span at `index` of [`Spans::iter`]'s order (a [`DecisionRec::index`]).
    ///
    /// # Panics
    /// When `index >= self.len()`, as a slice index does.
    pub fn get(&self, index: usize) -> &SpanRec {
        let c = self
            .offsets
            .partition_point(|&o| o <= index)
            .saturating_sub(1);
        &self.chunks[c][index - self.offsets[c]]
    }

    /// The spans as slices, in [`Spans::iter`]'s order; no trace spans two slices.
    pub fn chunks(&self) -> impl Iterator<Item = &[SpanRec]> {
        self.chunks.iter().map(Vec::as_slice)
    }

    /// The spans cut in two halves of about equal length, each as slices in
    /// [`Spans::iter`]'s order (for folds on two threads; a trace may be cut).
    pub fn halves(&self) -> [Vec<&[SpanRec]>; 2] {
        let mut halves: [Vec<&[SpanRec]>; 2] = [Vec::new(), Vec::new()];
        let mut left = self.len / 2;
        for c in &self.chunks {
            let (a, b) = c.split_at(left.min(c.len()));
            left -= a.len();
            for (half, part) in halves.iter_mut().zip([a, b]) {
                if !part.is_empty() {
                    half.push(part);
                }
            }
        }
        halves
    }

    /// The spans cut in two halves of about equal length at a trace boundary, each as slices
    /// in [`Spans::iter`]'s order, every trace whole in one of them (for per-trace folds on two
    /// threads).
    pub fn trace_halves(&self) -> [Vec<&[SpanRec]>; 2] {
        let mut halves: [Vec<&[SpanRec]>; 2] = [Vec::new(), Vec::new()];
        let mut left = self.len / 2;
        for c in &self.chunks {
            let mut at = left.min(c.len());
            // No trace spans two chunks, but the cut may fall inside one: move it to the
            // trace's end.
            if let Some(t) = at.checked_sub(1).map(|i| c[i].trace) {
                at += c[at..].iter().take_while(|s| s.trace == t).count();
            }
            let (a, b) = c.split_at(at);
            left = left.saturating_sub(a.len());
            for (half, part) in halves.iter_mut().zip([a, b]) {
                if !part.is_empty() {
                    half.push(part);
                }
            }
        }
        halves
    }

    /// The spans of each trace (they are grouped by trace), one slice per trace.
    pub fn traces(&self) -> impl Iterator<Item = &[SpanRec]> {
        self.chunks
            .iter()
            .flat_map(|c| c.chunk_by(|a, b| a.trace == b.trace))
    }

    /// Appends `s` to the last chunk (a new trace, or the next span of the last trace).
    pub fn push(&mut self, s: SpanRec) {
        if self.chunks.is_empty() {
            self.chunks.push(Vec::new());
            self.offsets.push(0);
        }
        if let Some(last) = self.chunks.last_mut() {
            last.push(s);
        }
        self.len += 1;
    }

    /// Replaces the spans with `chunks` (empty ones are dropped).
    pub(super) fn set_chunks(&mut self, chunks: Vec<Vec<SpanRec>>) {
        self.chunks = chunks.into_iter().filter(|c| !c.is_empty()).collect();
        self.offsets = Vec::with_capacity(self.chunks.len());
        let mut at = 0;
        for c in &self.chunks {
            self.offsets.push(at);
            at += c.len();
        }
        self.len = at;
    }

    /// The environments of the spans ([`SpanRec::env`] ids, 0 for none), in id order.
    pub fn environment_ids(&self) -> Vec<u8> {
        let mut seen = [false; 256];
        for s in self.iter() {
            seen[usize::from(s.env)] = true;
        }
        (0..=u8::MAX).filter(|&e| seen[usize::from(e)]).collect()
    }

    /// The spans split by deployment environment (domain: a dimension no detection mixes),
    /// one [`Spans`] per environment in id order (none first), each with the names, decision
    /// sets, intervals, lanes, lane groups and presence signals of the whole and its own
    /// spans in the same order (a trace's spans of one environment stay together), and of
    /// the lane carriers ([`LaneTable::carriers`]) those on its spans. All in one environment
    /// (or none): the spans as they are, not copied.
    pub fn by_environment(mut self) -> Vec<(Option<String>, Spans)> {
        let ids = self.environment_ids();
        if ids.len() <= 1 {
            let name = ids
                .first()
                .and_then(|&e| self.environment(e))
                .map(str::to_owned);
            return vec![(name, self)];
        }
        let all_carriers = std::mem::take(&mut self.lanes.carriers);
        let mut parts: Vec<(Vec<Vec<SpanRec>>, Vec<DecisionRec>, Carriers)> = ids
            .iter()
            .map(|_| (Vec::new(), Vec::new(), Carriers::default()))
            .collect();
        let slot = |env: u8| ids.binary_search(&env).unwrap_or(0);
        let mut recs = self.decision_recs.clone();
        recs.sort_by_key(|r| r.index);
        let mut next_rec = recs.iter().peekable();
        let mut counts = vec![0usize; ids.len()];
        let mut index = 0usize;
        for chunk in &self.chunks {
            for (chunk_part, _, _) in &mut parts {
                chunk_part.push(Vec::new());
            }
            for s in chunk {
                let k = slot(s.env);
                while let Some(r) = next_rec.next_if(|r| r.index <= index) {
                    if r.index == index {
                        parts[k].1.push(r.at(counts[k]));
                    }
                }
                let key = (s.trace, s.span, s.kind == Kind::Server);
                if let Some(&c) = all_carriers.get(&key) {
                    parts[k].2.insert(key, c);
                }
                if let Some(last) = parts[k].0.last_mut() {
                    last.push(s.clone());
                }
                counts[k] += 1;
                index += 1;
            }
        }
        ids.iter()
            .zip(parts)
            .map(|(&env, (chunks, decision_recs, carriers))| {
                let mut part = Spans {
                    chunks: Vec::new(),
                    offsets: Vec::new(),
                    len: 0,
                    decision_recs,
                    consumer_links: self.consumer_links.clone(),
                    apps: self.apps.clone(),
                    instances: self.instances.clone(),
                    channels: self.channels.clone(),
                    environments: self.environments.clone(),
                    sources: self.sources.clone(),
                    decision_sets: self.decision_sets.clone(),
                    intervals: self.intervals.clone(),
                    instance_rules: self.instance_rules.clone(),
                    lanes: LaneTable {
                        carriers,
                        ..self.lanes.clone()
                    },
                    lane_groups: self.lane_groups.clone(),
                    signals: self.signals.clone(),
                };
                part.set_chunks(chunks);
                (self.environment(env).map(str::to_owned), part)
            })
            .collect()
    }

    /// The spans as one vector, the chunks emptied.
    pub(super) fn take_flat(&mut self) -> Vec<SpanRec> {
        let chunks = std::mem::take(&mut self.chunks);
        self.offsets.clear();
        self.len = 0;
        if chunks.len() == 1 {
            return chunks.into_iter().next().unwrap_or_default();
        }
        chunks.concat()
    }
}

/// Distinct (instance, app, colour, rule) ids.
pub(super) type RuleSet =
    std::collections::HashSet<(u32, u32, Color, u32), foldhash::fast::RandomState>;

/// The instance rules of `rules` by name, in a total order: an instance seen with two colours
/// or rules lists them the same way every run.
pub(super) fn named_rules(
    out: &Spans,
    rule_names: &Interner,
    rules: RuleSet,
) -> Vec<(String, String, Color, String)> {
    let mut inst: Vec<(String, String, Color, String)> = rules
        .into_iter()
        .map(|(i, a, c, r)| {
            (
                out.instances.name(i).to_owned(),
                out.apps.name(a).to_owned(),
                c,
                rule_names.name(r).to_owned(),
            )
        })
        .collect();
    sort_instance_rules(&mut inst);
    inst
}

/// Sorts (instance, app, colour, rule) by instance, app, colour name and rule: the order of
/// [`Spans::instance_rules`] and the report's instances, the same every run.
pub(super) fn sort_instance_rules(rules: &mut [(String, String, Color, String)]) {
    rules.sort_by(|a, b| (&a.0, &a.1, a.2.as_str(), &a.3).cmp(&(&b.0, &b.1, b.2.as_str(), &b.3)));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every pass of the analyzer and the dashboard streams these records, and a load holds
    /// one per span: keep them at 80 bytes (the parent id's niche made 144 bytes 128;
    /// interned decision sets and configuration intervals made 128 bytes 80).
    #[test]
    fn span_records_stay_at_80_bytes() {
        assert_eq!(std::mem::size_of::<SpanRec>(), 80);
    }
}
