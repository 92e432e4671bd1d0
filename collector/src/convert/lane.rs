//! The lanes read at ingest (domain §7.1): the lane columns of a row, the instance lane
//! (resolved once per resource, [`super::attrs::ResourceInfo`]) and the lane tag of each span.
//!
//! Owns how a span's carriers are handed to [`LaneCarriers::resolve`] and what each lane
//! column holds. Does not own the rules, the carriers or their grammar
//! (`dyeline_model::lane`), nor where the carriers' attributes are found ([`SpanAttrs`], in
//! the one pass over a span's attributes).
//!
//! A span with no carrier (almost every span) costs one check of four empty slots: the chain
//! runs only when a carrier's attribute is present.

use arrow::array::{ListBuilder, StringBuilder};
use dyeline_model::lane::{BAGGAGE_HEADER_KEY, BAGGAGE_TAG_KEY, TAG_KEY};
use dyeline_model::{InstanceLane, LaneCarriers, LaneTag};

use super::attrs::{SpanAttrs, str_value};
use super::columns::SpanColumns;
use crate::wire::Val;

/// The string values of an attribute as a carrier reads them: a string; a boolean as `true` /
/// `false` (a flag such as `gray=true` sent as a boolean); each string item of an array (a
/// captured header). Nothing for another type.
fn str_items<'v, 'a>(v: &'v Val<'a>) -> impl Iterator<Item = &'a str> + 'v {
    let (one, many): (Option<&'a str>, &'v [Val<'a>]) = match v {
        Val::Str(s) => (Some(s), &[]),
        Val::Bool(true) => (Some("true"), &[]),
        Val::Bool(false) => (Some("false"), &[]),
        Val::Array(items) => (None, items),
        _ => (None, &[]),
    };
    one.into_iter().chain(many.iter().filter_map(str_value))
}

/// The lane tag of a span whose attributes are `found`: [`LaneTag::NONE`] without running the
/// chain when no carrier is present.
pub(super) fn lane_tag<'c>(found: &SpanAttrs<'_, '_>, carriers: &'c LaneCarriers) -> LaneTag<'c> {
    let header =
        found.decision[super::attrs::source_slot(dyeline_model::DecisionSource::BaggageHeader)];
    if found.lane.iter().all(Option::is_none) && header.is_none() && found.lane_user.is_empty() {
        return LaneTag::NONE;
    }
    carriers.resolve(|key| {
        let slot = match key {
            TAG_KEY => found.lane[0],
            BAGGAGE_TAG_KEY => found.lane[1],
            BAGGAGE_HEADER_KEY => header,
            _ => found
                .lane_user
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| *v),
        };
        slot.map(str_items)
    })
}

/// Appends the instance lane columns (`lane`, `lane_rule`, `lane_invalid_values`, of `spans`
/// and `presence` alike); all null when lane resolution is skipped (`None`).
pub(super) fn append_instance_lane(
    lane_col: &mut StringBuilder,
    rule_col: &mut StringBuilder,
    invalid_col: &mut ListBuilder<StringBuilder>,
    lane: Option<&InstanceLane>,
) {
    match lane {
        Some(l) => {
            lane_col.append_value(l.lane.as_str());
            rule_col.append_value(&l.rule);
            if l.invalid_values.is_empty() {
                invalid_col.append(false);
            } else {
                for v in &l.invalid_values {
                    invalid_col.values().append_value(v);
                }
                invalid_col.append(true);
            }
        }
        None => {
            lane_col.append_null();
            rule_col.append_null();
            invalid_col.append(false);
        }
    }
}

/// Appends the lane tag columns (`lane_tag`, `lane_tag_source`, `malformed_lane_tags`); all
/// null when lane resolution is skipped (`None`).
pub(super) fn append_lane_tag(b: &mut SpanColumns, tag: Option<&LaneTag<'_>>) {
    match tag {
        Some(t) => {
            b.lane_tag
                .append_option(t.tag.as_ref().map(dyeline_model::LaneId::as_str));
            b.lane_tag_source.append_option(t.source);
            b.malformed_lane_tags.append_value(t.malformed);
        }
        None => {
            b.lane_tag.append_null();
            b.lane_tag_source.append_null();
            b.malformed_lane_tags.append_null();
        }
    }
}
