//! `dyeline sql`: one read-only SQL query on a data directory's `spans` table, printed as a
//! table, JSON or CSV (a header line of the column names, then a row per result row).

use std::path::PathBuf;

use dyeline_queries::{SqlEngine, render};
use dyeline_store::Store;

use super::BoxError;
use super::DataFormat;
use super::serve::store_config;
use crate::config::Config;

#[derive(clap::Args)]
pub struct SqlArgs {
    /// Data directory.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: DataFormat,
    /// The query, e.g. "SELECT service_name, count(*) FROM spans GROUP BY 1".
    pub query: String,
}

/// `dyeline sql`: opens the data directory read-only and prints the result.
///
/// # Errors
/// The store cannot be read; the query fails.
pub async fn run(config: Config, query: &str, format: DataFormat) -> Result<(), BoxError> {
    let mut sc = store_config(&config);
    sc.read_only = true;
    if !config.data_dir.exists() {
        return Err(format!(
            "data directory {} does not exist",
            config.data_dir.display()
        )
        .into());
    }
    let store = tokio::task::spawn_blocking(move || Store::open(sc)).await??;
    super::storage::attach_read_only(&config, &store).await?;
    let engine = SqlEngine::bounded(store.table(), config.sql.bounds())?;
    engine.register_table("presence", store.presence_table())?;
    let limits = config.sql.limits();
    let result = engine.query(query, limits).await?;
    if format == DataFormat::Csv {
        let mut w = csv::Writer::from_writer(std::io::stdout().lock());
        w.write_record(&result.columns)?;
        for row in render::rows(&result.batches) {
            w.write_record(row.iter().map(|v| match v {
                serde_json::Value::Null => String::new(),
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            }))?;
        }
        w.flush()?;
        if result.truncated {
            eprintln!(
                "(cut at {} rows; set sql.max_rows to see more)",
                limits.max_rows
            );
        }
    } else if format == DataFormat::Json {
        let out = serde_json::json!({
            "columns": result.columns,
            "rows": render::rows(&result.batches),
            "truncated": result.truncated,
        });
        println!("{out}");
    } else {
        println!("{}", render::table(&result.batches)?);
        if result.truncated {
            eprintln!(
                "(cut at {} rows; set sql.max_rows to see more)",
                limits.max_rows
            );
        }
    }
    Ok(())
}
