//! The decision on each span (domain §2), found as [`read_decision`] finds it, with each of the
//! first [`MEMO_MAX`] distinct decision texts of a request parsed once ([`DecisionMemo`]).
//!
//! Owns the memo and which source wins. Does not own the grammar of a decision value
//! ([`Decisions::parse`], in `dyeline_model::decision`) nor where the keys are read
//! ([`SpanAttrs`]).

use dyeline_model::DecisionSource;
use dyeline_model::decision::{Decisions, ReadDecision, read_decision};

use super::attrs::{SpanAttrs, source_slot, string_values};
use crate::wire::Val;

/// Most decisions parsed in one request are kept for reuse.
pub(super) const MEMO_MAX: usize = 16;

/// Decision texts already parsed in this request: the spans of a trace, and of many traces,
/// repeat a handful of texts, so each is parsed once.
#[derive(Default)]
pub(super) struct DecisionMemo {
    entries: Vec<(String, Decisions)>,
}

/// Where a span's decision is: parsed in the memo (by index), or read the general way.
pub(super) enum Found<'a> {
    Memo(DecisionSource, &'a str, usize),
    Read(ReadDecision),
}

impl DecisionMemo {
    /// The index of `text`'s parse, parsing it on a miss; `None` when the memo is full and
    /// `text` is new (the caller then parses it itself).
    fn index(&mut self, text: &str) -> Option<usize> {
        if let Some(i) = self.entries.iter().position(|(t, _)| t == text) {
            return Some(i);
        }
        if self.entries.len() >= MEMO_MAX {
            return None;
        }
        self.entries.push((text.to_owned(), Decisions::parse(text)));
        Some(self.entries.len() - 1)
    }

    /// The decision on a span, exactly as [`read_decision`] finds it: the first source of
    /// `sources` that is present. A single string value of a span attribute source (the usual
    /// case) is parsed through the memo; other shapes go through [`read_decision`].
    pub(super) fn find<'a>(
        &mut self,
        sources: &[DecisionSource],
        attrs: &SpanAttrs<'_, 'a>,
    ) -> Option<Found<'a>> {
        for &source in sources {
            let Some(value) = attrs.decision[source_slot(source)] else {
                continue;
            };
            if source != DecisionSource::BaggageHeader
                && let Val::Str(text) = value
            {
                match self.index(text) {
                    Some(i) if self.entries[i].1.is_blank() => continue,
                    Some(i) => return Some(Found::Memo(source, text, i)),
                    None => {}
                }
            }
            let read = read_decision(&[source], |_| Some(string_values(Some(value))));
            if let Some(read) = read {
                return Some(Found::Read(read));
            }
        }
        None
    }

    /// Source, raw text and decisions of a [`Found`].
    pub(super) fn resolve<'s>(
        &'s self,
        found: &'s Found<'_>,
    ) -> (DecisionSource, &'s str, &'s Decisions) {
        match found {
            Found::Memo(source, text, i) => (*source, text, &self.entries[*i].1),
            Found::Read(r) => (r.source, r.text.as_str(), &r.decisions),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};

    #[test]
    fn a_full_memo_still_parses_new_texts() {
        let mut memo = DecisionMemo::default();
        for i in 0..MEMO_MAX + 3 {
            let attrs = vec![KeyValue {
                key: "x-deploy-channel-type".into(),
                value: Some(AnyValue {
                    value: Some(Value::StringValue(format!("ch{i}=green"))),
                }),
                ..Default::default()
            }];
            let attrs = crate::wire::kvs(&attrs);
            let found = SpanAttrs::of(&attrs, &[]);
            let got = memo.find(&DecisionSource::DEFAULT_ORDER, &found);
            let (_, text, d) = memo.resolve(got.as_ref().unwrap());
            assert_eq!(text, format!("ch{i}=green"));
            assert_eq!(d.get(&format!("ch{i}")), Some(dyeline_model::Color::Green));
        }
        assert_eq!(memo.entries.len(), MEMO_MAX);
    }
}
