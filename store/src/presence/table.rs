//! The DataFusion table `presence`: the presence rows in memory ∪ its Parquet files
//! ([`super::PresenceLog`]). Filters on `time_unix_nano` skip files by hour partition; every
//! filter goes to the Parquet reader for row-group pruning and is applied again to each row
//! (reported inexact), as for `spans` ([`crate::table`]).

use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::error::Result;
use datafusion::physical_plan::ExecutionPlan;
use dyeline_model::presence::{col, presence_schema};

use super::PresenceLog;
use crate::layout::FileMeta;
use crate::table::{Scan, parquet_scans, store_table_provider, time_bounds, union_or_empty};

/// The `presence` table provider.
pub struct PresenceTable {
    log: Arc<PresenceLog>,
    schema: SchemaRef,
}

impl std::fmt::Debug for PresenceTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PresenceTable")
    }
}

impl PresenceTable {
    /// The table over `log`.
    pub fn new(log: Arc<PresenceLog>) -> Self {
        Self {
            log,
            schema: presence_schema(),
        }
    }
}

store_table_provider!(PresenceTable);

impl PresenceTable {
    /// The plan of a scan: the rows in memory, and the files of the hours the time filters
    /// reach.
    fn plan(&self, scan: &Scan<'_>) -> Result<Arc<dyn ExecutionPlan>> {
        let snap = self.log.snapshot();
        let (lo, hi) = time_bounds(scan.filters, col::TIME_UNIX_NANO);
        let mut inputs: Vec<Arc<dyn ExecutionPlan>> = Vec::new();
        if !snap.memory.is_empty() {
            inputs.push(MemorySourceConfig::try_new_exec(
                &[snap.memory],
                Arc::clone(&self.schema),
                scan.projection.cloned(),
            )?);
        }
        let files: Vec<FileMeta> = snap
            .files
            .into_iter()
            .filter(|f| f.overlaps(lo, hi))
            .collect();
        inputs.extend(parquet_scans(
            scan.state,
            &self.schema,
            &files,
            scan.projection,
            scan.filters,
            scan.limit,
        )?);
        union_or_empty(inputs, &self.schema, scan.projection)
    }
}
