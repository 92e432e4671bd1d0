//! Shared span storage (issue 26): what a node needs beyond its data directory to keep spans
//! in S3-compatible object storage with a catalog in PostgreSQL. Owns the object store
//! ([`objects`]: opening `s3://` and `file://` stores, the start-up self-test), the catalog
//! ([`catalog`]: its schema and migrations, owner-epoch fencing, upload registration, file
//! listings), the node id ([`node`]), the two URLs and their printing without secrets
//! ([`urls`]) and the start-up check of both ([`check`]). Later: the uploader, the janitor,
//! shared compaction and retention.
//!
//! Does not own local staging (the `store` crate: WAL, memory, hourly files), reading remote
//! files, or configuration (the server's `[storage]`, `[catalog]` and `[cluster]` sections
//! hand these types their values).
//!
//! ```text
//! settings ─▶ urls::{ObjectStoreUrl, PostgresUrl}, node::NodeId
//!          ─▶ check::check: objects::open + objects::self_test, catalog::Catalog::connect
//!             (migrations) + schema version + owner epoch
//! uploader (later) ─▶ Catalog::claim_node ─▶ put objects (PutMode::Create)
//!                  ─▶ Catalog::register_upload (files + checkpoint, one transaction, fenced)
//! ```

pub mod catalog;
pub mod check;
pub mod node;
pub mod objects;
pub mod urls;

#[cfg(any(test, feature = "testkit"))]
pub mod testkit;

pub use catalog::{Catalog, CatalogError, FileKind, SpanFile};
pub use check::{CheckError, CheckReport, CheckSettings, check, check_until_passed};
pub use node::NodeId;
pub use objects::{Objects, ObjectsError, SelfTest};
pub use urls::{ObjectStoreUrl, PostgresUrl, UrlError};
