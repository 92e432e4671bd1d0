//! Bytes per span on disk: walks a data directory's Parquet files and prints, as JSON, the rows,
//! the total file bytes, bytes per span, and per column the compressed bytes (from the Parquet
//! metadata of every row group) and their share.

// The measurement, as JSON on stdout, is what this benchmark is run for.
#![allow(clippy::print_stdout)]

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use parquet::file::reader::{FileReader, SerializedFileReader};

fn parquet_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            parquet_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "parquet") {
            out.push(p);
        }
    }
}

fn main() {
    let dir = std::env::args()
        .nth(1)
        .expect("usage: parquet_breakdown DATA_DIR");
    let mut files = Vec::new();
    parquet_files(Path::new(&dir), &mut files);
    let mut rows = 0i64;
    let mut total = 0u64;
    let mut columns: BTreeMap<String, i64> = BTreeMap::new();
    for f in &files {
        total += std::fs::metadata(f).map(|m| m.len()).unwrap_or(0);
        let reader = SerializedFileReader::new(File::open(f).expect("open")).expect("parquet");
        let meta = reader.metadata();
        rows += meta.file_metadata().num_rows();
        for rg in meta.row_groups() {
            for c in rg.columns() {
                let top = c.column_path().parts()[0].clone();
                *columns.entry(top).or_default() += c.compressed_size();
            }
        }
    }
    let mut cols: Vec<_> = columns.into_iter().collect();
    cols.sort_by_key(|(_, b)| -b);
    let per_column: Vec<_> = cols
        .iter()
        .map(|(name, b)| {
            serde_json::json!({"column": name, "bytes": b, "bytes_per_span": *b as f64 / rows.max(1) as f64})
        })
        .collect();
    println!(
        "{}",
        serde_json::to_string_pretty(&serde_json::json!({
            "files": files.len(),
            "rows": rows,
            "file_bytes": total,
            "bytes_per_span": total as f64 / rows.max(1) as f64,
            "columns": per_column,
        }))
        .expect("json")
    );
}
