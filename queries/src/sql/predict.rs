//! Sizes of values and predictions of what an amplifying function will build, from its
//! arguments, before it runs (for [`super::guard`]). Per row and in bytes; saturating, so a
//! count of 1e18 predicts `u64::MAX` rather than wrapping.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Int64Type, IntervalMonthDayNanoType, IntervalUnit, TimeUnit};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::ColumnarValue;

/// The functions whose result can be far larger than their arguments, with how it is
/// predicted (per row, in bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Amplifier {
    /// `repeat(s, n)`: `len(s) × n`.
    Repeat,
    /// `lpad`/`rpad(s, n [, fill])`: `n` characters of up to 4 bytes.
    Pad,
    /// `replace(s, from, to)`: every match of `from` (every character boundary for an empty
    /// one) becomes `to`.
    Replace,
    /// `regexp_replace(s, pattern, replacement [, flags])`: every match (possibly empty) becomes
    /// the replacement, whose group references each expand to at most `len(s)`.
    RegexpReplace,
    /// `regexp_match(s, pattern)`: a list of the groups, each at most `len(s)`.
    RegexpMatch,
    /// `array_repeat(e, n)`: `size(e) × n`.
    ArrayRepeat,
    /// `range`/`generate_series(start, stop [, step])` as list functions: 8 bytes per element.
    Range,
    /// `array_resize(list, n [, fill])`: `n` elements.
    ArrayResize,
    /// `array_to_string(list, delimiter [, null])`: the elements as text and one delimiter
    /// (and null text) per element.
    ArrayToString,
    /// `array_replace[_n|_all](list, from, to [, n])`: one `to` per element.
    ArrayReplace,
    /// `concat_ws(sep, …)`: the arguments and one separator per argument.
    ConcatWs,
    /// `to_char(t, format)`: the format expanded (a specifier such as `%+` is 2 bytes for 32).
    ToChar,
    /// `concat`, `make_array`, `array_concat`, `array_append`, `array_prepend`, `map`,
    /// `arrays_zip`: the sum of the arguments, so naming one value many times repeats it.
    Sum,
}

impl Amplifier {
    /// The amplifier of a function name (aliases included), if it is one.
    pub fn of(name: &str) -> Option<Self> {
        Some(match name {
            "repeat" => Self::Repeat,
            "lpad" | "rpad" => Self::Pad,
            "replace" => Self::Replace,
            "regexp_replace" => Self::RegexpReplace,
            "regexp_match" => Self::RegexpMatch,
            "array_repeat" | "list_repeat" => Self::ArrayRepeat,
            "range" | "generate_series" => Self::Range,
            "array_resize" | "list_resize" => Self::ArrayResize,
            "array_to_string" | "list_to_string" | "array_join" | "list_join" => {
                Self::ArrayToString
            }
            "array_replace" | "list_replace" | "array_replace_n" | "list_replace_n"
            | "array_replace_all" | "list_replace_all" => Self::ArrayReplace,
            "concat_ws" => Self::ConcatWs,
            "to_char" | "date_format" => Self::ToChar,
            "concat" | "make_array" | "make_list" | "array_concat" | "array_cat"
            | "list_concat" | "list_cat" | "array_append" | "list_append" | "array_push_back"
            | "list_push_back" | "array_prepend" | "list_prepend" | "array_push_front"
            | "list_push_front" | "map" | "arrays_zip" | "list_zip" => Self::Sum,
            _ => return None,
        })
    }
}

/// True for results whose size is not fixed by their type.
pub(super) fn variable_width(t: &DataType) -> bool {
    !(t.is_primitive() || matches!(t, DataType::Boolean | DataType::Null))
}

/// Bytes of a scalar's value (its text, bytes or elements).
pub(super) fn scalar_bytes(v: &ScalarValue) -> u64 {
    match v {
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => s.len() as u64,
        ScalarValue::Binary(Some(b))
        | ScalarValue::LargeBinary(Some(b))
        | ScalarValue::BinaryView(Some(b)) => b.len() as u64,
        other => other
            .size()
            .saturating_sub(std::mem::size_of::<ScalarValue>()) as u64,
    }
}

/// Bytes of each row's value: strings and binaries exactly, lists by their elements (strings
/// exactly, other elements at their average size), other types at the array's average.
pub(super) fn array_row_bytes(a: &dyn Array) -> Vec<u64> {
    fn diffs<O: Copy + Into<i64>>(offsets: &[O]) -> Vec<u64> {
        offsets
            .windows(2)
            .map(|w| (w[1].into() - w[0].into()).max(0) as u64)
            .collect()
    }
    match a.data_type() {
        DataType::Utf8 => diffs(a.as_string::<i32>().value_offsets()),
        DataType::LargeUtf8 => diffs(a.as_string::<i64>().value_offsets()),
        DataType::Binary => diffs(a.as_binary::<i32>().value_offsets()),
        DataType::LargeBinary => diffs(a.as_binary::<i64>().value_offsets()),
        DataType::Utf8View => a
            .as_string_view()
            .views()
            .iter()
            .map(|v| u64::from(*v as u32))
            .collect(),
        DataType::BinaryView => a
            .as_binary_view()
            .views()
            .iter()
            .map(|v| u64::from(*v as u32))
            .collect(),
        DataType::List(_) => {
            let l = a.as_list::<i32>();
            list_rows(l.value_offsets(), l.values())
        }
        DataType::LargeList(_) => {
            let l = a.as_list::<i64>();
            list_rows(l.value_offsets(), l.values())
        }
        _ => {
            let each = average_bytes(a);
            vec![each; a.len()]
        }
    }
}

/// The average bytes of one of `a`'s rows (its memory over its length).
fn average_bytes(a: &dyn Array) -> u64 {
    (a.get_array_memory_size() as u64).div_ceil(a.len().max(1) as u64)
}

/// Each list row's bytes: its elements' exact bytes for string or binary elements, else their
/// count times the elements' average size (nested lists are not walked: no recursion over a
/// type the query chose).
fn list_rows<O: Copy + Into<i64>>(offsets: &[O], values: &ArrayRef) -> Vec<u64> {
    let exact = matches!(
        values.data_type(),
        DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Binary
            | DataType::LargeBinary
            | DataType::Utf8View
            | DataType::BinaryView
    );
    if exact {
        let each = array_row_bytes(values.as_ref());
        let mut prefix = Vec::with_capacity(each.len() + 1);
        prefix.push(0u64);
        for b in &each {
            prefix.push(prefix.last().copied().unwrap_or(0).saturating_add(*b));
        }
        let at = |o: O| usize::try_from(o.into()).unwrap_or(0).min(each.len());
        offsets
            .windows(2)
            .map(|w| prefix[at(w[1])].saturating_sub(prefix[at(w[0])]))
            .collect()
    } else {
        let each = average_bytes(values.as_ref());
        offsets
            .windows(2)
            .map(|w| ((w[1].into() - w[0].into()).max(0) as u64).saturating_mul(each))
            .collect()
    }
}

/// One argument per row: a constant or a value for each row.
pub(super) enum PerRow<T> {
    Same(T),
    Each(Vec<T>),
}

impl<T: Copy + Default> PerRow<T> {
    fn at(&self, i: usize) -> T {
        match self {
            Self::Same(v) => *v,
            Self::Each(v) => v.get(i).copied().unwrap_or_default(),
        }
    }
}

fn to_array(arg: &ColumnarValue) -> Result<(ArrayRef, bool)> {
    Ok(match arg {
        ColumnarValue::Scalar(v) => (v.to_array_of_size(1)?, true),
        ColumnarValue::Array(a) => (Arc::clone(a), false),
    })
}

pub(super) fn sizes(arg: Option<&ColumnarValue>) -> Result<PerRow<u64>> {
    let Some(arg) = arg else {
        return Ok(PerRow::Same(0));
    };
    let (a, scalar) = to_array(arg)?;
    let each = array_row_bytes(a.as_ref());
    Ok(if scalar {
        PerRow::Same(each.first().copied().unwrap_or(0))
    } else {
        PerRow::Each(each)
    })
}

/// A count argument as i64 per row (nulls as 0).
fn counts(arg: Option<&ColumnarValue>, default: i64) -> Result<PerRow<i64>> {
    let Some(arg) = arg else {
        return Ok(PerRow::Same(default));
    };
    let (a, scalar) = to_array(arg)?;
    let ints = cast(&a, &DataType::Int64)?;
    let ints = ints.as_primitive::<Int64Type>();
    let each: Vec<i64> = (0..ints.len())
        .map(|i| if ints.is_valid(i) { ints.value(i) } else { 0 })
        .collect();
    Ok(if scalar {
        PerRow::Same(each.first().copied().unwrap_or(0))
    } else {
        PerRow::Each(each)
    })
}

/// A range bound as an integer: itself, or a date or time in nanoseconds.
fn bound(arg: Option<&ColumnarValue>, default: i64) -> Result<PerRow<i64>> {
    let Some(arg) = arg else {
        return Ok(PerRow::Same(default));
    };
    let t = arg.data_type();
    if matches!(
        t,
        DataType::Date32 | DataType::Date64 | DataType::Timestamp(_, _)
    ) {
        let (a, scalar) = to_array(arg)?;
        let ns = cast(&a, &DataType::Timestamp(TimeUnit::Nanosecond, None))?;
        let ns = cast(&ns, &DataType::Int64)?;
        let ns = ns.as_primitive::<Int64Type>();
        let each: Vec<i64> = (0..ns.len())
            .map(|i| if ns.is_valid(i) { ns.value(i) } else { 0 })
            .collect();
        return Ok(if scalar {
            PerRow::Same(each.first().copied().unwrap_or(0))
        } else {
            PerRow::Each(each)
        });
    }
    counts(Some(arg), default)
}

/// A range step as an integer: itself, or an interval's shortest length in nanoseconds (a month
/// as 28 days; a step of no positive length as 1 ns, the most elements it could give).
fn step(arg: Option<&ColumnarValue>) -> Result<PerRow<i64>> {
    let Some(arg) = arg else {
        return Ok(PerRow::Same(1));
    };
    if !matches!(arg.data_type(), DataType::Interval(_)) {
        return counts(Some(arg), 1);
    }
    let (a, scalar) = to_array(arg)?;
    let mdn = cast(&a, &DataType::Interval(IntervalUnit::MonthDayNano))?;
    let mdn = mdn.as_primitive::<IntervalMonthDayNanoType>();
    const DAY: i128 = 86_400_000_000_000;
    let each: Vec<i64> = (0..mdn.len())
        .map(|i| {
            if !mdn.is_valid(i) {
                return 1;
            }
            let v = mdn.value(i);
            let ns = i128::from(v.months) * 28 * DAY
                + i128::from(v.days) * DAY
                + i128::from(v.nanoseconds);
            // Mixed signs (`1 month -30 days`) can step less than any part: count it as 1 ns.
            let mixed = (v.months > 0 && v.days < 0)
                || (v.months < 0 && v.days > 0)
                || (v.days != 0 && v.nanoseconds != 0 && (v.days > 0) != (v.nanoseconds > 0));
            if mixed {
                1
            } else {
                ns.abs().clamp(1, i128::from(i64::MAX)) as i64
            }
        })
        .collect();
    Ok(if scalar {
        PerRow::Same(each.first().copied().unwrap_or(1))
    } else {
        PerRow::Each(each)
    })
}

fn nonneg(n: i64) -> u64 {
    n.max(0) as u64
}

/// Predicts an amplifier's largest value and its whole result (bytes) for `rows` rows.
pub(super) fn predict(kind: Amplifier, args: &[ColumnarValue], rows: u64) -> Result<(u64, u64)> {
    let all_scalar = args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)));
    let n = if all_scalar { 1 } else { rows as usize };
    let arg = |i: usize| args.get(i);
    let per_row: Box<dyn Fn(usize) -> u64> = match kind {
        Amplifier::Repeat => {
            let (s, k) = (sizes(arg(0))?, counts(arg(1), 0)?);
            Box::new(move |i| s.at(i).saturating_mul(nonneg(k.at(i))))
        }
        Amplifier::Pad => {
            let k = counts(arg(1), 0)?;
            Box::new(move |i| nonneg(k.at(i)).saturating_mul(4))
        }
        Amplifier::Replace => {
            let (s, from, to) = (sizes(arg(0))?, sizes(arg(1))?, sizes(arg(2))?);
            Box::new(move |i| {
                let (s, from, to) = (s.at(i), from.at(i), to.at(i));
                // An empty `from` matches at every character boundary.
                let matches = s.checked_div(from).unwrap_or(s.saturating_add(1));
                s.saturating_add(matches.saturating_mul(to))
            })
        }
        Amplifier::RegexpReplace => {
            let (s, to) = (sizes(arg(0))?, sizes(arg(2))?);
            Box::new(move |i| {
                let (s, to) = (s.at(i), to.at(i));
                // Each of at most s+1 matches becomes the replacement, whose every byte may be
                // a group reference expanding to at most s bytes.
                s.saturating_add(
                    s.saturating_add(1)
                        .saturating_mul(to.saturating_mul(s.max(1))),
                )
            })
        }
        Amplifier::RegexpMatch => {
            let (s, pattern) = (sizes(arg(0))?, sizes(arg(1))?);
            Box::new(move |i| s.at(i).saturating_mul(pattern.at(i).saturating_add(1)))
        }
        Amplifier::ArrayRepeat => {
            let (e, k) = (sizes(arg(0))?, counts(arg(1), 0)?);
            Box::new(move |i| e.at(i).max(8).saturating_mul(nonneg(k.at(i))))
        }
        Amplifier::Range => {
            let (start, stop, by) = if args.len() == 1 {
                (PerRow::Same(0), bound(arg(0), 0)?, PerRow::Same(1))
            } else {
                (bound(arg(0), 0)?, bound(arg(1), 0)?, step(arg(2))?)
            };
            Box::new(move |i| {
                let span = (i128::from(stop.at(i)) - i128::from(start.at(i))).unsigned_abs();
                let by = i128::from(by.at(i)).unsigned_abs().max(1);
                let elements = u64::try_from(span / by)
                    .unwrap_or(u64::MAX)
                    .saturating_add(1);
                elements.saturating_mul(8)
            })
        }
        Amplifier::ArrayResize => {
            let (list, k, fill) = (sizes(arg(0))?, counts(arg(1), 0)?, sizes(arg(2))?);
            Box::new(move |i| {
                list.at(i)
                    .saturating_add(nonneg(k.at(i)).saturating_mul(fill.at(i).max(8)))
            })
        }
        Amplifier::ArrayToString => {
            let (list, delim, null) = (sizes(arg(0))?, sizes(arg(1))?, sizes(arg(2))?);
            let elements = element_counts(arg(0))?;
            Box::new(move |i| {
                let k = elements.at(i);
                // Numbers print in at most 24 characters per 8 bytes.
                list.at(i)
                    .saturating_mul(3)
                    .saturating_add(k.saturating_mul(delim.at(i).saturating_add(null.at(i))))
            })
        }
        Amplifier::ArrayReplace => {
            let (list, to) = (sizes(arg(0))?, sizes(arg(2))?);
            let elements = element_counts(arg(0))?;
            Box::new(move |i| {
                list.at(i)
                    .saturating_add(elements.at(i).saturating_mul(to.at(i)))
            })
        }
        Amplifier::ConcatWs => {
            let each: Vec<PerRow<u64>> =
                args.iter().map(|a| sizes(Some(a))).collect::<Result<_>>()?;
            let k = args.len() as u64;
            Box::new(move |i| {
                let sep = each.first().map_or(0, |s| s.at(i));
                each.iter()
                    .skip(1)
                    .fold(0u64, |t, s| t.saturating_add(s.at(i)))
                    .saturating_add(sep.saturating_mul(k))
            })
        }
        Amplifier::ToChar => {
            let format = sizes(arg(1))?;
            Box::new(move |i| format.at(i).saturating_mul(16).saturating_add(64))
        }
        Amplifier::Sum => {
            let each: Vec<PerRow<u64>> =
                args.iter().map(|a| sizes(Some(a))).collect::<Result<_>>()?;
            Box::new(move |i| {
                each.iter()
                    .fold(16u64, |t, s| t.saturating_add(s.at(i)).saturating_add(16))
            })
        }
    };
    let mut largest = 0u64;
    let mut total = 0u64;
    for i in 0..n {
        let b = per_row(i);
        largest = largest.max(b);
        total = total.saturating_add(b);
    }
    if all_scalar {
        // The caller repeats a scalar result to the batch's length.
        total = largest.saturating_mul(rows.max(1));
    }
    Ok((largest, total))
}

/// Each list row's element count (top level); 0 for other types.
fn element_counts(arg: Option<&ColumnarValue>) -> Result<PerRow<u64>> {
    let Some(arg) = arg else {
        return Ok(PerRow::Same(0));
    };
    let (a, scalar) = to_array(arg)?;
    fn diffs<O: Copy + Into<i64>>(offsets: &[O]) -> Vec<u64> {
        offsets
            .windows(2)
            .map(|w| (w[1].into() - w[0].into()).max(0) as u64)
            .collect()
    }
    let each = match a.data_type() {
        DataType::List(_) => diffs(a.as_list::<i32>().value_offsets()),
        DataType::LargeList(_) => diffs(a.as_list::<i64>().value_offsets()),
        DataType::FixedSizeList(_, k) => vec![nonneg(i64::from(*k)); a.len()],
        _ => vec![0; a.len()],
    };
    Ok(if scalar {
        PerRow::Same(each.first().copied().unwrap_or(0))
    } else {
        PerRow::Each(each)
    })
}
