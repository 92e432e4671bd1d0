//! The columns of `spans` the analyzer reads ([`LOAD_COLUMN_NAMES`], [`WINDOW_COLUMN_NAMES`],
//! named by [`dyeline_model::schema::col`]) and how their values are read: string columns
//! plain or dictionary-encoded ([`per_row`]), hex ids, colours.

use arrow::array::{Array, AsArray};
use dyeline_model::Color;
use dyeline_model::schema::col;

use crate::sql::SqlError;

/// `f` of each row's value of the string column `col` (`None` for null), plain (`Utf8`) or
/// dictionary-encoded (`Dictionary(Int32, Utf8)`): for a dictionary, `f` runs once per
/// dictionary value and rows take their key's result.
///
/// # Errors
/// [`SqlError::Internal`] for another column type.
pub(super) fn per_row<T: Clone>(
    col: &dyn Array,
    mut f: impl FnMut(Option<&str>) -> T,
) -> Result<Vec<T>, SqlError> {
    if let Some(plain) = col.as_string_opt::<i32>() {
        return Ok((0..plain.len())
            .map(|i| f((!plain.is_null(i)).then(|| plain.value(i))))
            .collect());
    }
    let dict = col
        .as_dictionary_opt::<arrow::datatypes::Int32Type>()
        .ok_or_else(|| sql_err(format!("unexpected column type {}", col.data_type())))?;
    let values = dict
        .values()
        .as_string_opt::<i32>()
        .ok_or_else(|| sql_err("dictionary values are not Utf8"))?;
    let mapped: Vec<T> = (0..values.len())
        .map(|i| f((!values.is_null(i)).then(|| values.value(i))))
        .collect();
    let none = f(None);
    let keys = dict.keys();
    Ok((0..keys.len())
        .map(|i| {
            if keys.is_null(i) {
                return none.clone();
            }
            usize::try_from(keys.value(i))
                .ok()
                .and_then(|k| mapped.get(k))
                .unwrap_or(&none)
                .clone()
        })
        .collect())
}

/// A 32-digit hex trace id (either case), or `None`. `const-hex` decodes with SIMD: ids are
/// three of the loader's sixteen columns and were a seventh of a file read's CPU with a
/// per-digit decoder.
pub(super) fn hex_u128(s: &str) -> Option<u128> {
    let mut b = [0u8; 16];
    const_hex::decode_to_slice(s, &mut b).ok()?;
    Some(u128::from_be_bytes(b))
}

/// A 16-digit hex span id (either case), or `None`.
pub(super) fn hex_u64(s: &str) -> Option<u64> {
    let mut b = [0u8; 8];
    const_hex::decode_to_slice(s, &mut b).ok()?;
    Some(u64::from_be_bytes(b))
}

/// The (trace, span id) of each link of a `links` column value (a JSON array of
/// `{trace_id, span_id, …}`), in order; links whose ids are not hex of their length are left
/// out, and text that is not such an array gives none.
pub(super) fn link_ids(json: &str) -> smallvec::SmallVec<[(u128, u64); 2]> {
    #[derive(serde::Deserialize)]
    struct Link {
        trace_id: String,
        span_id: String,
    }
    serde_json::from_str::<Vec<Link>>(json)
        .unwrap_or_default()
        .iter()
        .filter_map(|l| Some((hex_u128(&l.trace_id)?, hex_u64(&l.span_id)?)))
        .collect()
}

pub(super) fn parse_color(s: &str) -> Color {
    Color::parse(s).unwrap_or(Color::Unknown)
}

pub(super) fn sql_err(e: impl std::fmt::Display) -> SqlError {
    SqlError::Internal(e.to_string())
}

/// The columns of `spans` the analyzer reads ([`Loader::push`] finds them by name). The
/// drilldown selects them in this order and reads its own columns after them. `links` is
/// null on nearly every row (a string column of nulls costs little to read) and parsed only
/// for parentless CONSUMER spans.
///
/// [`Loader::push`]: super::loader::Loader::push
pub const LOAD_COLUMN_NAMES: [&str; 24] = [
    col::TRACE_ID,
    col::SPAN_ID,
    col::PARENT_SPAN_ID,
    col::SERVICE_NAME,
    col::INSTANCE_ID,
    col::COLOR,
    col::COLOR_RULE,
    col::SPAN_KIND,
    col::TRAFFIC_KIND,
    col::START_TIME_UNIX_NANO,
    col::IS_ERROR,
    col::DECISIONS,
    col::DECISION_SOURCE,
    col::MALFORMED_PAIRS,
    col::CONFLICTING_CHANNELS,
    col::END_TIME_UNIX_NANO,
    col::LINKS,
    col::LANE,
    col::LANE_RULE,
    col::LANE_INVALID_VALUES,
    col::LANE_TAG,
    col::LANE_TAG_SOURCE,
    col::MALFORMED_LANE_TAGS,
    col::DEPLOYMENT_ENVIRONMENT,
];

/// The columns the windowed detections read (domain §6.3–6): the spans' apps, instances,
/// colours, kinds, starts, errors and environments, and the trace ids their findings name. A
/// subset of [`LOAD_COLUMN_NAMES`].
pub const WINDOW_COLUMN_NAMES: [&str; 10] = [
    col::TRACE_ID,
    col::SERVICE_NAME,
    col::INSTANCE_ID,
    col::COLOR,
    col::COLOR_RULE,
    col::SPAN_KIND,
    col::TRAFFIC_KIND,
    col::START_TIME_UNIX_NANO,
    col::IS_ERROR,
    col::DEPLOYMENT_ENVIRONMENT,
];

/// Which of the analyzer's columns a load reads from Parquet files.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LoadColumns {
    /// [`LOAD_COLUMN_NAMES`]: what every detection and the decision report need.
    #[default]
    All,
    /// [`WINDOW_COLUMN_NAMES`]: enough for the four windowed detections
    /// ([`WindowCounter`]). The span and parent ids, the decisions with their source and
    /// faults, and the end are not read (they are the larger part of a file's bytes, and
    /// of its read time); the records' fields for them are empty ([`Loader::push`]).
    ///
    /// [`WindowCounter`]: crate::analyze::detect::windows::counter::WindowCounter
    /// [`Loader::push`]: super::loader::Loader::push
    Windows,
}

impl LoadColumns {
    /// The column names read.
    pub fn names(self) -> &'static [&'static str] {
        match self {
            LoadColumns::All => &LOAD_COLUMN_NAMES,
            LoadColumns::Windows => &WINDOW_COLUMN_NAMES,
        }
    }
}

/// Number of [`LOAD_COLUMN_NAMES`].
pub const LOAD_COLUMN_COUNT: usize = LOAD_COLUMN_NAMES.len();

/// [`LOAD_COLUMN_NAMES`] as a SQL select list.
pub fn load_columns_sql() -> String {
    LOAD_COLUMN_NAMES.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_decode_from_hex_of_their_length_only() {
        assert_eq!(
            hex_u128("0123456789abcdefFEDCBA9876543210"),
            Some(0x0123_4567_89ab_cdef_fedc_ba98_7654_3210)
        );
        assert_eq!(hex_u64("00000000000000Ff"), Some(255));
        for bad in [
            "",
            "ff",
            "0123456789abcdef0",
            "012345678gabcdef",
            "+123456789abcdef",
        ] {
            assert_eq!(hex_u64(bad), None, "{bad}");
        }
        assert_eq!(hex_u128("0123456789abcdef"), None);
    }

    #[test]
    fn link_ids_are_read_from_the_links_json_in_order() {
        let a = "ab".repeat(16);
        let json = format!(
            r#"[{{"trace_id":"{a}","span_id":"00000000000000ff","trace_state":"x","attributes":{{"k":[1]}}}},{{"trace_id":"zz","span_id":"01","attributes":{{}}}},{{"trace_id":"{}","span_id":"0000000000000001","attributes":{{}}}}]"#,
            "0".repeat(31) + "7"
        );
        assert_eq!(
            link_ids(&json).to_vec(),
            [(u128::from_be_bytes([0xab; 16]), 255), (7, 1)]
        );
        for bad in ["", "null", "{}", "[1]", "[{\"trace_id\":1}]"] {
            assert!(link_ids(bad).is_empty(), "{bad}");
        }
    }

    proptest::proptest! {
        /// Any links written as the collector writes them (ids as hex, attributes of any
        /// shape) read back in order.
        #[test]
        fn link_ids_read_back_what_the_links_column_holds(
            links in proptest::collection::vec(
                (proptest::num::u128::ANY, proptest::num::u64::ANY, "[a-z=,]{0,8}", "[a-z\\\\\"]{0,6}"),
                0..5,
            )
        ) {
            let json = serde_json::Value::Array(
                links
                    .iter()
                    .map(|(t, s, state, attr)| {
                        let mut l = serde_json::json!({
                            "trace_id": format!("{t:032x}"),
                            "span_id": format!("{s:016x}"),
                            "attributes": {"k": attr, "n": [1, {"x": null}]}
                        });
                        if !state.is_empty() {
                            l["trace_state"] = serde_json::json!(state);
                        }
                        l
                    })
                    .collect(),
            )
            .to_string();
            let expected: Vec<(u128, u64)> = links.iter().map(|(t, s, _, _)| (*t, *s)).collect();
            proptest::prop_assert_eq!(link_ids(&json).to_vec(), expected);
        }
    }
}
