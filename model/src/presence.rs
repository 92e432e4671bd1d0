//! Presence (domain §7.1): the Arrow schema of the `presence` table, its version, and the two
//! signals recorded in it ([`PresenceSignal`]).
//!
//! One row per instance and signal time of an OTLP metrics or logs export: only the resource's
//! instance (identity, app, colour, lane) and the time are kept, never the data. Spans are
//! signals too, but they are in `spans` already; this table holds the signals that are not.
//! `docs/schema.md` describes every column; the collector builds rows, the store persists them
//! (`DATA_DIR/presence/`) and SQL reads them.

use std::sync::{Arc, OnceLock};

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use crate::schema::instance_resolution_fields;

/// The version of the `presence` layout below, written to the Parquet key-value metadata of
/// each presence file under [`PRESENCE_SCHEMA_VERSION_KEY`] as decimal text. Raise it when a
/// column is added, removed, renamed, or changes type, nullability or meaning.
pub const PRESENCE_SCHEMA_VERSION: u32 = 1;

/// The Parquet key-value metadata key holding [`PRESENCE_SCHEMA_VERSION`].
pub const PRESENCE_SCHEMA_VERSION_KEY: &str = "dyeline.presence.schema_version";

/// Column names, in schema order: the instance's as in `spans` ([`crate::schema::col`]), then
/// the signal's.
pub mod col {
    pub use crate::schema::col::{
        COLOR, COLOR_RULE, HOST_NAME, INSTANCE_ID, LANE, LANE_INVALID_VALUES, LANE_RULE,
        SERVICE_NAME,
    };
    /// The signal time, Unix nanoseconds (a data point's `timeUnixNano`, a log record's
    /// `timeUnixNano`, else its `observedTimeUnixNano`).
    pub const TIME_UNIX_NANO: &str = "time_unix_nano";
    /// [`PresenceSignal`](super::PresenceSignal): `metrics` or `logs`.
    pub const SIGNAL: &str = "signal";
}

/// The `presence` schema (see [`col`] for each column's meaning).
pub fn presence_schema() -> SchemaRef {
    static SCHEMA: OnceLock<SchemaRef> = OnceLock::new();
    SCHEMA
        .get_or_init(|| {
            let s = |n: &str, null: bool| Field::new(n, DataType::Utf8, null);
            let fields = [
                s(col::INSTANCE_ID, false),
                s(col::SERVICE_NAME, false),
                s(col::HOST_NAME, true),
            ]
            .into_iter()
            .chain(instance_resolution_fields())
            .chain([
                Field::new(col::TIME_UNIX_NANO, DataType::Int64, false),
                s(col::SIGNAL, false),
            ]);
            Arc::new(Schema::new(fields.collect::<Vec<_>>()))
        })
        .clone()
}

/// The OTLP signal a presence row came from (spans are signals too, but not rows here).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PresenceSignal {
    /// An OTLP metrics export (`MetricsService`, `/v1/metrics`): one row per data point time.
    Metrics,
    /// An OTLP logs export (`LogsService`, `/v1/logs`): one row per log record time.
    Logs,
}

impl PresenceSignal {
    /// Both, in the order of their names.
    pub const ALL: [Self; 2] = [Self::Metrics, Self::Logs];

    /// The `signal` column value (and metric label).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Metrics => "metrics",
            Self::Logs => "logs",
        }
    }

    /// Reads a `signal` column value.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_names_the_instance_its_lane_and_the_signal_time() {
        let schema = presence_schema();
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(
            names,
            [
                "instance_id",
                "service_name",
                "host_name",
                "color",
                "color_rule",
                "lane",
                "lane_rule",
                "lane_invalid_values",
                "time_unix_nano",
                "signal"
            ]
        );
        let time = schema.field_with_name(col::TIME_UNIX_NANO).unwrap();
        assert_eq!(
            (time.data_type(), time.is_nullable()),
            (&DataType::Int64, false)
        );
        // Lanes are optional: rows written before lanes were resolved still read.
        assert!(schema.field_with_name(col::LANE).unwrap().is_nullable());
    }

    #[test]
    fn signals_read_back_from_their_names() {
        for s in PresenceSignal::ALL {
            assert_eq!(PresenceSignal::parse(s.as_str()), Some(s));
        }
        assert_eq!(PresenceSignal::parse("traces"), None);
    }
}
