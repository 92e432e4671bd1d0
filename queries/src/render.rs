//! Rendering query results: JSON values per cell (numbers stay numbers, maps become objects,
//! lists arrays, nulls null) and the text table of `dyeline sql --format table`.

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{
    DataType, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type,
    UInt16Type, UInt32Type, UInt64Type,
};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use serde_json::Value;

/// One cell as JSON.
pub fn cell(array: &ArrayRef, row: usize) -> Value {
    if array.is_null(row) {
        return Value::Null;
    }
    macro_rules! num {
        ($t:ty) => {
            Value::from(array.as_primitive::<$t>().value(row))
        };
    }
    match array.data_type() {
        DataType::Boolean => Value::Bool(array.as_boolean().value(row)),
        DataType::Int8 => num!(Int8Type),
        DataType::Int16 => num!(Int16Type),
        DataType::Int32 => num!(Int32Type),
        DataType::Int64 => num!(Int64Type),
        DataType::UInt8 => num!(UInt8Type),
        DataType::UInt16 => num!(UInt16Type),
        DataType::UInt32 => num!(UInt32Type),
        DataType::UInt64 => num!(UInt64Type),
        DataType::Float32 => num!(Float32Type),
        DataType::Float64 => num!(Float64Type),
        DataType::Utf8 => Value::String(array.as_string::<i32>().value(row).to_owned()),
        DataType::LargeUtf8 => Value::String(array.as_string::<i64>().value(row).to_owned()),
        DataType::Utf8View => Value::String(array.as_string_view().value(row).to_owned()),
        DataType::List(_) => {
            let v = array.as_list::<i32>().value(row);
            Value::Array((0..v.len()).map(|i| cell(&v, i)).collect())
        }
        DataType::Map(_, _) => {
            let m = array.as_map();
            let entries = m.value(row);
            let keys = entries.column(0);
            let values = entries.column(1);
            let mut obj = serde_json::Map::new();
            for i in 0..entries.len() {
                let k = match cell(keys, i) {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                obj.insert(k, cell(values, i));
            }
            Value::Object(obj)
        }
        DataType::Struct(fields) => {
            let s = array.as_struct();
            let mut obj = serde_json::Map::new();
            for (i, f) in fields.iter().enumerate() {
                obj.insert(f.name().clone(), cell(s.column(i), row));
            }
            Value::Object(obj)
        }
        _ => match ArrayFormatter::try_new(array.as_ref(), &FormatOptions::default()) {
            Ok(f) => Value::String(f.value(row).to_string()),
            Err(_) => Value::Null,
        },
    }
}

/// All rows as JSON arrays of cells.
pub fn rows(batches: &[RecordBatch]) -> Vec<Vec<Value>> {
    let mut out = Vec::new();
    for b in batches {
        for r in 0..b.num_rows() {
            out.push(b.columns().iter().map(|c| cell(c, r)).collect());
        }
    }
    out
}

/// A text table (arrow's pretty printer).
///
/// # Errors
/// Arrow formatting errors.
pub fn table(batches: &[RecordBatch]) -> Result<String, arrow::error::ArrowError> {
    Ok(arrow::util::pretty::pretty_format_batches(batches)?.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// `dyeline sql`'s text table: arrow's printer (comfy-table) pads by display width, so
    /// every `|` and `+` of every line is at the same display column with Chinese cells.
    #[test]
    fn the_sql_text_table_lines_up_chinese_cells() {
        use unicode_width::UnicodeWidthStr;
        let app: ArrayRef = Arc::new(arrow::array::StringArray::from(vec![
            "order",
            "订单服务",
            "库存-inventory",
        ]));
        let note: ArrayRef = Arc::new(arrow::array::StringArray::from(vec![
            Some("灰度发布第一批"),
            None,
            Some("ok"),
        ]));
        let b = RecordBatch::try_from_iter([("app", app), ("note", note)]).unwrap();
        let t = table(&[b]).unwrap();
        let marks = |line: &str| -> Vec<usize> {
            line.char_indices()
                .filter(|(_, c)| matches!(c, '|' | '+'))
                .map(|(i, _)| line[..i].width())
                .collect()
        };
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 7, "{t}");
        let first = marks(lines[0]);
        assert_eq!(first.len(), 3, "{t}");
        for l in &lines {
            assert_eq!(marks(l), first, "{t}");
        }
    }

    #[test]
    fn cells_keep_their_json_types() {
        let a: ArrayRef = Arc::new(arrow::array::Int64Array::from(vec![
            Some(1_718_000_000_123_456_789),
            None,
        ]));
        assert_eq!(cell(&a, 0), Value::from(1_718_000_000_123_456_789_i64));
        assert_eq!(cell(&a, 1), Value::Null);
        let s: ArrayRef = Arc::new(arrow::array::StringArray::from(vec!["x"]));
        assert_eq!(cell(&s, 0), Value::from("x"));
    }
}
