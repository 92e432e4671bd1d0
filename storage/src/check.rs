//! The start-up check of shared storage ([`check`]): opens the object store and runs its
//! self-test, connects to the catalog and applies its migrations, and reads the node's owner
//! epoch, without claiming it (a check next to a running node must not fence it). What
//! `dyeline storage check` prints and what `dyeline serve` runs in the background at start.
//!
//! [`check_until_passed`] is the server's form: it retries what may pass later (a store or a
//! catalog that is down, logged each time) and returns on a pass or on what cannot (a store
//! that overwrites). Does not own stopping the server (the caller decides).

use std::fmt;

use crate::catalog::{Catalog, CatalogError};
use crate::node::NodeId;
use crate::objects::{self, ObjectsError, SelfTest};
use crate::urls::{ObjectStoreUrl, PostgresUrl};

/// What to check.
#[derive(Debug, Clone)]
pub struct CheckSettings {
    /// `[storage] object_store_url`.
    pub object_store_url: ObjectStoreUrl,
    /// `[storage] allow_unsafe_overwrite`.
    pub allow_unsafe_overwrite: bool,
    /// `[catalog] postgres_url`.
    pub postgres_url: PostgresUrl,
    /// This process's node id.
    pub node: NodeId,
}

/// What a passed check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckReport {
    /// The store's URL (no secrets).
    pub object_store: String,
    /// The self-test's outcome.
    pub self_test: SelfTest,
    /// The catalog's `host:port`.
    pub catalog_host: String,
    /// The catalog's database.
    pub catalog_database: String,
    /// The newest migration applied.
    pub schema_version: i64,
    /// The node id.
    pub node: NodeId,
    /// Its current owner epoch (`None`: never claimed).
    pub owner_epoch: Option<i64>,
}

impl fmt::Display for CheckReport {
    /// One line per fact, `name: value`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let self_test = match self.self_test {
            SelfTest::RefusesOverwrite => "ok (a second conditional create is refused)",
            SelfTest::OverwritesAllowed => {
                "UNSAFE: the store overwrites; used because allow_unsafe_overwrite = true"
            }
        };
        writeln!(f, "object store: {}", self.object_store)?;
        writeln!(f, "self-test: {self_test}")?;
        writeln!(
            f,
            "catalog: {} database {}",
            self.catalog_host, self.catalog_database
        )?;
        writeln!(f, "schema version: {}", self.schema_version)?;
        writeln!(f, "node id: {}", self.node)?;
        match self.owner_epoch {
            Some(e) => write!(f, "owner epoch: {e}"),
            None => write!(f, "owner epoch: none (not claimed yet)"),
        }
    }
}

/// Why a check failed.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// The object store.
    #[error(transparent)]
    Objects(#[from] ObjectsError),
    /// The catalog.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
}

impl CheckError {
    /// True when retrying cannot help: the store overwrites (or its client cannot be built).
    pub fn is_fatal(&self) -> bool {
        matches!(
            self,
            Self::Objects(ObjectsError::Overwrites { .. } | ObjectsError::Open { .. })
        )
    }
}

/// Runs the checks: the object store's self-test first, then the catalog.
///
/// # Errors
/// [`CheckError`], from the first step that failed.
pub async fn check(settings: &CheckSettings) -> Result<CheckReport, CheckError> {
    let store = objects::open(&settings.object_store_url)?;
    let self_test = objects::self_test(
        store.store.as_ref(),
        &settings.object_store_url,
        settings.allow_unsafe_overwrite,
    )
    .await?;
    let catalog = Catalog::connect(&settings.postgres_url, 1).await?;
    let schema_version = catalog.schema_version().await;
    let owner_epoch = catalog.owner_epoch(&settings.node).await;
    catalog.close().await;
    Ok(CheckReport {
        object_store: settings.object_store_url.to_string(),
        self_test,
        catalog_host: settings.postgres_url.host_port(),
        catalog_database: settings.postgres_url.database().to_owned(),
        schema_version: schema_version?,
        node: settings.node.clone(),
        owner_epoch: owner_epoch?,
    })
}

/// First wait between two attempts of [`check_until_passed`]; it doubles up to
/// [`RETRY_MAX`].
pub const RETRY_FIRST: std::time::Duration = std::time::Duration::from_secs(1);
/// Longest wait between two attempts of [`check_until_passed`].
pub const RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(60);

/// Runs [`check`] until it passes (logged at info) or fails in a way retrying cannot mend
/// ([`CheckError::is_fatal`], returned); any other failure is logged as a warning and tried
/// again after a wait doubling from [`RETRY_FIRST`] to [`RETRY_MAX`].
///
/// # Errors
/// The fatal [`CheckError`].
pub async fn check_until_passed(settings: &CheckSettings) -> Result<CheckReport, CheckError> {
    let mut wait = RETRY_FIRST;
    loop {
        match check(settings).await {
            Ok(report) => {
                tracing::info!(
                    object_store = %report.object_store,
                    catalog = %report.catalog_host,
                    schema_version = report.schema_version,
                    node = %report.node,
                    "shared storage checked"
                );
                return Ok(report);
            }
            Err(e) if e.is_fatal() => return Err(e),
            Err(e) => {
                tracing::warn!(error = %e, retry_in = ?wait, "shared storage unavailable: uploads wait, ingest goes on");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(RETRY_MAX);
            }
        }
    }
}
