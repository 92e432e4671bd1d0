//! The per-channel colour decision carried in baggage (domain §2) and its codec.
//!
//! This module owns the grammar of the `x-deploy-channel-type` value ([`Decisions::parse`],
//! [`Decisions::encode`]), the house's one reader of W3C baggage members
//! ([`baggage_members`], [`baggage_member`]; lane tags read theirs through it too), the
//! decision text of a whole baggage header (every member joined: [`decision_member`]) and the
//! choice of where on a span the decision is read ([`DecisionSource`], [`read_decision`]).
//! Nothing here fails: malformed text is skipped and counted, never refused.
//!
//! # Limits
//! A decision value comes from a client, so reading it is bounded whatever its size, with the
//! limits of W3C baggage (<https://www.w3.org/TR/baggage/#limits>: 180 list-members, 8,192
//! bytes, as in the OpenTelemetry SDKs): [`Decisions::parse`] reads at most
//! [`MAX_VALUE_BYTES`] bytes of a value and at most [`MAX_PAIRS`] of its pairs. What lies
//! past either limit is not read and the result says so ([`Decisions::truncated`], counted by
//! the receivers as `dyeline_receiver_decisions_truncated_total`). Work is linear in the bytes
//! read (and in a run of whitespace right after them, if any): a repeated channel is found
//! through a hash map, not by a scan of the pairs kept.
//! [`baggage_members`] is one lazy pass over the header; [`baggage_member`] stops at the member
//! found.

use std::borrow::Cow;
use std::collections::HashMap;
use std::collections::hash_map::Entry;

use percent_encoding::percent_decode_str;

use crate::Color;

/// The baggage key that carries the decisions (domain §2).
pub const BAGGAGE_KEY: &str = "x-deploy-channel-type";

/// Most pairs (non-empty `&`-separated pieces, malformed ones included) that
/// [`Decisions::parse`] reads from one value: W3C baggage's limit of 180 list-members.
pub const MAX_PAIRS: usize = 180;

/// Most bytes of one value that [`Decisions::parse`] reads (as given, before
/// percent-decoding): W3C baggage's limit of 8,192 bytes for a whole header.
pub const MAX_VALUE_BYTES: usize = 8192;

/// Decisions read from one `x-deploy-channel-type` value: channel → colour, first pair wins
/// (domain §2), with the count of malformed pairs, the channels decided twice differently, and
/// whether the value went on past the limits ([`MAX_PAIRS`], [`MAX_VALUE_BYTES`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decisions {
    entries: Vec<(String, Color)>,
    malformed_pairs: u32,
    conflicting: Vec<String>,
    truncated: bool,
}

impl Decisions {
    /// Parses a value such as `trade=blue&pay=green` (domain §2). Never fails.
    ///
    /// In order: the value is percent-decoded (`trade%3Dblue%26pay%3Dgreen`; invalid escapes
    /// are kept as text, invalid UTF-8 replaced); W3C properties are dropped (everything from
    /// the first `;`, as in `ch1=blue&ch2=green;ttl=30`); the rest is split on `&`. Pieces
    /// empty after trimming whitespace are ignored and not counted. A piece splits on its
    /// first `=` into channel and colour, each trimmed; it is skipped and counted in
    /// [`Decisions::malformed_pairs`] when it has no `=`, an empty channel, or a colour other
    /// than `blue` / `green` (case-insensitive). The first pair for a channel wins; a later pair
    /// with another colour lists the channel (once) in [`Decisions::conflicting`]; an identical
    /// repeat is harmless. Channel names are kept as written (case-sensitive).
    ///
    /// Limits (module doc): only the first [`MAX_VALUE_BYTES`] bytes of `value` are read (to a
    /// character boundary, before percent-decoding). When the value goes on past them and its
    /// properties did not start before, the piece the limit cuts through is dropped (it may be
    /// incomplete) unless the unread rest starts with a separator (`&`, `;`, `%26`, `%3B`,
    /// after optional whitespace), and [`Decisions::truncated`] is set unless that rest is only
    /// whitespace or properties (it starts with `;` or `%3B`). Of the non-empty pieces, only the
    /// first [`MAX_PAIRS`] are read; a further one sets [`Decisions::truncated`]. Pieces not
    /// read are not counted as malformed.
    pub fn parse(value: &str) -> Self {
        let mut out = Self::default();
        let mut read_len = value.len().min(MAX_VALUE_BYTES);
        while !value.is_char_boundary(read_len) {
            read_len -= 1;
        }
        let (read, rest) = value.split_at(read_len);
        let decoded: Cow<'_, str> = if read.contains('%') {
            percent_decode_str(read).decode_utf8_lossy()
        } else {
            Cow::Borrowed(read)
        };
        let body: &str = match decoded.split_once(';') {
            Some((body, _properties)) => body,
            None => {
                let rest = rest.trim_start();
                match separator(rest) {
                    // Nothing but whitespace or properties was left unread.
                    None if rest.is_empty() => &decoded,
                    Some(';') => &decoded,
                    Some(_) => {
                        out.truncated = true;
                        &decoded
                    }
                    None => {
                        out.truncated = true;
                        // The limit cuts through the last piece: it may be incomplete.
                        decoded.rsplit_once('&').map_or("", |(whole, _cut)| whole)
                    }
                }
            }
        };
        // Channel → (the colour kept, listed as conflicting): one lookup per pair.
        let mut seen: HashMap<&str, (Color, bool)> = HashMap::new();
        let mut pieces = 0usize;
        for piece in body.split('&') {
            let piece = piece.trim();
            if piece.is_empty() {
                continue;
            }
            if pieces == MAX_PAIRS {
                out.truncated = true;
                break;
            }
            pieces += 1;
            let Some((channel, color)) = piece.split_once('=') else {
                out.malformed_pairs += 1;
                continue;
            };
            let channel = channel.trim();
            let Some(color) = Color::parse(color).filter(|_| !channel.is_empty()) else {
                out.malformed_pairs += 1;
                continue;
            };
            match seen.entry(channel) {
                Entry::Vacant(e) => {
                    e.insert((color, false));
                    out.entries.push((channel.to_owned(), color));
                }
                Entry::Occupied(mut e) => {
                    let (kept, listed) = e.get_mut();
                    if *kept != color && !*listed {
                        *listed = true;
                        out.conflicting.push(channel.to_owned());
                    }
                }
            }
        }
        out
    }

    /// Records `color` for `channel` when the channel has no decision yet (first decision
    /// wins, domain §2: "one blue to the end"), appending it after the existing ones.
    ///
    /// Returns `true` when appended; `false` when the channel is already decided or when the
    /// pair could not be written and read back by [`Decisions::encode`] / [`Decisions::parse`]:
    /// `color` is [`Color::Unknown`], or `channel` is empty, has surrounding whitespace, or
    /// contains `&`, `=`, `;` or `%`, or the decisions are full ([`MAX_PAIRS`] channels, or an
    /// encoding longer than [`MAX_VALUE_BYTES`] with this pair).
    pub fn insert(&mut self, channel: &str, color: Color) -> bool {
        let encodable = !channel.is_empty()
            && channel.trim() == channel
            && !channel.contains(['&', '=', ';', '%']);
        if color == Color::Unknown || !encodable || self.get(channel).is_some() {
            return false;
        }
        let separator = usize::from(!self.entries.is_empty());
        let grown = self.encoded_len() + separator + channel.len() + 1 + color.as_str().len();
        if self.entries.len() >= MAX_PAIRS || grown > MAX_VALUE_BYTES {
            return false;
        }
        self.entries.push((channel.to_owned(), color));
        true
    }

    /// The length of [`Decisions::encode`]'s text, without writing it.
    fn encoded_len(&self) -> usize {
        let pairs: usize = self
            .entries
            .iter()
            .map(|(c, col)| c.len() + 2 * c.matches('%').count() + 1 + col.as_str().len())
            .sum();
        pairs + self.entries.len().saturating_sub(1)
    }

    /// The value a traffic SDK writes: `channel=color` pairs joined by `&` in first-seen
    /// order, colours lower-case (`trade=blue&pay=green`); empty when no channel is decided.
    /// Not otherwise percent-encoded (encode it when placing it in a baggage header), except
    /// that a `%` inside a channel name is written `%25`: [`Decisions::parse`] decodes once, so a
    /// name it produced from `%25…` still holds `%` and would be decoded again. Malformed-pair
    /// counts, conflicts and truncation are not written: `Decisions::parse(&d.encode())` gives
    /// back the channels and colours of `d` (found by the `baggage` fuzz target in
    /// `bench/fuzz`) whenever the text fits in [`MAX_VALUE_BYTES`], which it always does for
    /// decisions built with [`Decisions::insert`]. Parsed decisions can encode longer (a `%`
    /// read as text is written `%25`); parsing such a text gives back their first channels, with
    /// [`Decisions::truncated`] set.
    pub fn encode(&self) -> String {
        let mut out = String::with_capacity(self.entries.iter().map(|(c, _)| c.len() + 7).sum());
        for (i, (channel, color)) in self.entries.iter().enumerate() {
            if i > 0 {
                out.push('&');
            }
            for (j, part) in channel.split('%').enumerate() {
                if j > 0 {
                    out.push_str("%25");
                }
                out.push_str(part);
            }
            out.push('=');
            out.push_str(color.as_str());
        }
        out
    }

    /// The colour decided for `channel` (exact, case-sensitive name), `None` when undecided. A
    /// scan of at most [`MAX_PAIRS`] channels: [`Decisions::parse`] and [`Decisions::insert`]
    /// keep no more.
    pub fn get(&self, channel: &str) -> Option<Color> {
        self.entries
            .iter()
            .find(|(c, _)| c == channel)
            .map(|(_, col)| *col)
    }
    /// Channel → colour in first-seen order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, Color)> {
        self.entries.iter().map(|(c, col)| (c.as_str(), *col))
    }
    /// Number of channels decided.
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    /// True when no channel is decided.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    /// Pairs skipped as malformed (no `=`, empty channel, colour not blue/green).
    pub fn malformed_pairs(&self) -> u32 {
        self.malformed_pairs
    }
    /// Channels that appeared again with a different colour, each once, in first-conflict order.
    pub fn conflicting(&self) -> &[String] {
        &self.conflicting
    }
    /// True when the value went on past the limits ([`MAX_VALUE_BYTES`] bytes, [`MAX_PAIRS`]
    /// pairs) and the rest was not read (see [`Decisions::parse`]).
    pub fn truncated(&self) -> bool {
        self.truncated
    }
    /// True when the value held no non-empty piece at all: no decision, no malformed pair and
    /// nothing past the limits (e.g. ``, `  `, `&&`). [`read_decision`] treats such a source as
    /// absent.
    pub fn is_blank(&self) -> bool {
        self.entries.is_empty() && self.malformed_pairs == 0 && !self.truncated
    }
}

/// The separator `rest` starts with, written as is or percent-encoded: `&` (`%26`) between
/// pairs, `;` (`%3B`) before properties; `None` for anything else.
fn separator(rest: &str) -> Option<char> {
    match rest.as_bytes() {
        [b'&', ..] => Some('&'),
        [b';', ..] => Some(';'),
        [b'%', b'2', b'6', ..] => Some('&'),
        [b'%', b'3', b'b' | b'B', ..] => Some(';'),
        _ => None,
    }
}

/// The value of member `key` in a W3C baggage header (e.g. `a=1, x-deploy-channel-type =
/// ch1=blue%26ch2=green ; ttl=30`), percent-decoded (invalid UTF-8 replaced); `None` when no
/// member has that key. The first of [`baggage_members`].
///
/// The value is returned whole: the limits on reading it are [`Decisions::parse`]'s.
pub fn baggage_member(header: &str, key: &str) -> Option<String> {
    baggage_members(header, key).next().map(Cow::into_owned)
}

/// The values of every member `key` of a W3C baggage header, in header order, each
/// percent-decoded (invalid UTF-8 replaced; borrowed when there is nothing to decode). The one
/// reader of baggage members in the house: decisions (domain §2) and lane tags (§7.1) both
/// read members through it.
///
/// Members are split on `,`; each is `key = value ; properties` with optional whitespace
/// around each part. The key is everything before the member's first `=` (trimmed, compared
/// exactly); the value runs to the first `;` (properties dropped) and is trimmed. Members
/// without `=` are skipped. Never fails.
///
/// Lazy: one pass over the header that goes only as far as the members asked for; only their
/// values are decoded.
pub fn baggage_members<'h>(header: &'h str, key: &'h str) -> impl Iterator<Item = Cow<'h, str>> {
    header.split(',').filter_map(move |member| {
        let (k, rest) = member.split_once('=')?;
        if k.trim() != key {
            return None;
        }
        let value = rest.split(';').next().unwrap_or_default().trim();
        Some(percent_decode_str(value).decode_utf8_lossy())
    })
}

/// The decision text of a W3C baggage header (domain §2): the values of every
/// [`BAGGAGE_KEY`] member, in header order, joined with `&`, so that the rules of
/// [`Decisions::parse`] apply unchanged to a member given twice (the first pair for a channel
/// wins, a later one with another colour is a conflict). `None` when no member has the key.
/// Values are joined only while the text is within [`MAX_VALUE_BYTES`] bytes (what
/// [`Decisions::parse`] reads): the members after the one that passes them are not decoded.
pub fn decision_member(header: &str) -> Option<String> {
    let mut members = baggage_members(header, BAGGAGE_KEY);
    let mut text = members.next()?.into_owned();
    for value in members {
        if text.len() > MAX_VALUE_BYTES {
            break;
        }
        text.push('&');
        text.push_str(&value);
    }
    Some(text)
}

/// Where a decision was read from (domain §2), in the default order of precedence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DecisionSource {
    /// Span attribute `x-deploy-channel-type`.
    Attribute,
    /// Span attribute `baggage.x-deploy-channel-type`.
    BaggageAttribute,
    /// Member `x-deploy-channel-type` of span attribute `http.request.header.baggage`.
    BaggageHeader,
}

impl DecisionSource {
    /// The attribute key (a `const fn`, so the collector can match on it).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Attribute => "x-deploy-channel-type",
            Self::BaggageAttribute => "baggage.x-deploy-channel-type",
            Self::BaggageHeader => "http.request.header.baggage",
        }
    }
    /// The default order.
    pub const DEFAULT_ORDER: [DecisionSource; 3] =
        [Self::Attribute, Self::BaggageAttribute, Self::BaggageHeader];

    /// The source whose attribute key is `key` (the inverse of [`DecisionSource::as_str`]).
    pub fn from_key(key: &str) -> Option<Self> {
        Self::DEFAULT_ORDER.into_iter().find(|s| s.as_str() == key)
    }
}

/// A decision as found on a span by [`read_decision`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadDecision {
    /// The attribute it came from.
    pub source: DecisionSource,
    /// The raw attribute text: the attribute's value as found (an array's values joined by
    /// `&`), or for [`DecisionSource::BaggageHeader`] the member's values (percent-decoded,
    /// properties dropped, joined by `&` when the member is given more than once).
    pub text: String,
    /// The parsed decisions ([`Decisions::parse`] of `text`).
    pub decisions: Decisions,
}

/// Finds the decision on a span (domain §2): the first source of `order` that is present
/// gives it; `get(key)` returns the string values of a span attribute (one for a string,
/// several for an array; `None` when absent).
///
/// For [`DecisionSource::Attribute`] and [`DecisionSource::BaggageAttribute`] the values are
/// joined by `&`; for [`DecisionSource::BaggageHeader`] they are one header (joined by `,`, as
/// W3C combines repeated headers) and the values of its `x-deploy-channel-type` members are
/// joined by `&` in header order ([`decision_member`]): a member repeated in one header or in
/// several captured header values is read as one value, first pair winning. A source counts as present only when its text holds at least one
/// non-empty piece ([`Decisions::is_blank`] is false): an absent attribute, a header without
/// the member, and a blank value such as `` or `&` fall through to the next source. A value
/// whose pieces are all malformed (`,`, `trade=purple`) is present: it is returned with no
/// decisions and its malformed count. `None` when no source is present.
pub fn read_decision<'a>(
    order: &[DecisionSource],
    get: impl Fn(&str) -> Option<Vec<&'a str>>,
) -> Option<ReadDecision> {
    order.iter().find_map(|&source| {
        let values = get(source.as_str())?;
        let text = match source {
            DecisionSource::Attribute | DecisionSource::BaggageAttribute => match values.as_slice()
            {
                [one] => (*one).to_owned(),
                many => many.join("&"),
            },
            DecisionSource::BaggageHeader => decision_member(&values.join(","))?,
        };
        let decisions = Decisions::parse(&text);
        (!decisions.is_blank()).then_some(ReadDecision {
            source,
            text,
            decisions,
        })
    })
}

#[cfg(test)]
mod tests;
