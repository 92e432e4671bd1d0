//! Shared span storage (issue 26): what a node needs beyond its data directory to keep spans
//! in S3-compatible object storage with a catalog in PostgreSQL. Owns the object store
//! ([`objects`]: opening `s3://` and `file://` stores, the start-up self-test), the catalog
//! ([`catalog`]: its schema and migrations, owner-epoch fencing, upload registration, file
//! listings), the node id ([`node`]), the two URLs and their printing without secrets
//! ([`urls`]), the start-up check of both ([`check`]), the uploader of the node's local files
//! and the store's listing of the catalog's objects ([`uploader`]), the local cache of
//! objects read whole ([`cache`], the store's `RemoteObjects` port), shared compaction
//! ([`compaction`]), retention and the janitor ([`maintenance`]), the node's heartbeat in
//! the catalog ([`heartbeat`], read back by `dyeline cluster status`), and the alert leader's
//! election ([`leader`]) with its book and deliveries in the catalog ([`catalog::alerts`]).
//!
//! Does not own local staging (the `store` crate: WAL, memory, hourly files, and how its
//! readers tell an object from a local file), or configuration (the server's `[storage]`,
//! `[catalog]` and `[cluster]` sections hand these types their values).
//!
//! ```text
//! settings ─▶ urls::{ObjectStoreUrl, PostgresUrl}, node::NodeId
//!          ─▶ check::check: objects::open + objects::self_test, catalog::Catalog::connect
//!             (migrations) + schema version + owner epoch
//! uploader ─▶ Catalog::claim_node ─▶ Store::upload_cut ─▶ put objects (PutMode::Create)
//!          ─▶ Catalog::register_upload (files + checkpoint, one transaction, fenced)
//!          ─▶ Store::uploaded (local files swapped for objects) ─▶ delete after a grace
//!          ─▶ Catalog::listing ─▶ Store::set_remote (every node's objects, via the cache)
//! ```

pub mod cache;
pub mod catalog;
pub mod check;
pub mod compaction;
pub mod heartbeat;
pub mod leader;
pub mod maintenance;
pub mod node;
pub mod objects;
pub mod put;
pub mod status;
pub mod uploader;
pub mod urls;

#[cfg(any(test, feature = "testkit"))]
pub mod testkit;

pub use cache::ObjectCache;
pub use catalog::{Catalog, CatalogError, FileKind, Listing, SpanFile};
pub use check::{CheckError, CheckReport, CheckSettings, check, check_until_passed};
pub use node::NodeId;
pub use objects::{Objects, ObjectsError, SelfTest};
pub use put::UploadError;
pub use uploader::{Fault, UploadMetrics, UploadSettings, Uploader};
pub use urls::{ObjectStoreUrl, PostgresUrl, UrlError};
