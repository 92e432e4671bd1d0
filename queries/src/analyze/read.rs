//! Reading the spans the analyzer needs into its records ([`crate::analyze::spans`]): the
//! columns read ([`columns`]), record batches turned into records ([`loader`]), parts merged
//! ([`merge`]), each span's effective channel resolved from the timeline ([`resolve`]), and
//! the two ways in: a DataFusion scan of `spans` ([`scan`]) and a read per Parquet file, with
//! or without a cache ([`files`]); and the presence signals read beside them ([`presence`]).

pub mod columns;
pub mod files;
pub mod loader;
pub mod merge;
pub mod presence;
pub mod resolve;
pub mod scan;
