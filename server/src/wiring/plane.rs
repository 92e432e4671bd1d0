//! The control plane as configured ([`open`], [`open_read_only`]: SQLite in the data
//! directory, or PostgreSQL with `[control] postgres_url`) and as the queries' port
//! [`Releases`]: the timeline and the channels now; and the alert book as the control plane's
//! port [`FiringAlerts`] ([`BookAlerts`]).

use std::sync::Arc;
use std::time::Duration;

use dyeline_control::plane::DB_FILE;
use dyeline_control::{ControlPlane, FiringAlert, FiringAlerts};
use dyeline_model::release::Timeline;
use dyeline_queries::ports::Releases;

use crate::commands::BoxError;
use crate::config::Config;

/// How often a node on PostgreSQL re-reads the operations without a notification (a safety
/// net: notifications and reconnections of the listener wake it sooner).
const FOLLOW_POLL: Duration = Duration::from_secs(5);

/// Opens the control plane of `config` for writing: `DATA_DIR/control.db`, or the PostgreSQL
/// database of `[control] postgres_url`, following the other nodes' writes.
///
/// # Errors
/// The database cannot be opened, reached or migrated (never showing the URL's password).
pub async fn open(config: &Config) -> Result<Arc<ControlPlane>, BoxError> {
    Ok(match config.control.postgres_url()? {
        None => Arc::new(ControlPlane::open(&config.data_dir).await?),
        Some(url) => {
            ControlPlane::open_postgres(url.expose(), &url.to_string(), FOLLOW_POLL).await?
        }
    })
}

/// With `[control] postgres_url` set, warns when `DATA_DIR/control.db` holds operations that
/// `plane` (PostgreSQL) lacks: they are not served, and not moved by themselves. A local
/// database that cannot be read is warned of too; neither stops the server.
pub async fn warn_of_local_ops(config: &Config, plane: &ControlPlane) {
    let local = config.data_dir.join(DB_FILE);
    if config.control.postgres_url.is_none() || !local.exists() {
        return;
    }
    let old = match ControlPlane::open_read_only(&config.data_dir).await {
        Ok(old) => old,
        Err(e) => {
            tracing::warn!(file = %local.display(), error = %e, "cannot read the local control database");
            return;
        }
    };
    let missing = old.ops_missing_from(plane);
    old.close().await;
    if missing > 0 {
        tracing::warn!(
            operations = missing,
            file = %local.display(),
            "the local control database has operations the PostgreSQL control plane lacks; \
             they are not served. To move them: save GET /api/v1/timeline of a server on this \
             data directory without [control] postgres_url, then run \
             `dyeline import --timeline FILE` with it set"
        );
    }
}

/// Opens the control plane of `config` read-only (`dyeline analyze`): `DATA_DIR/control.db`,
/// or the operations in PostgreSQL now.
///
/// # Errors
/// The database cannot be opened or reached.
pub async fn open_read_only(config: &Config) -> Result<ControlPlane, BoxError> {
    Ok(match config.control.postgres_url()? {
        None => ControlPlane::open_read_only(&config.data_dir).await?,
        Some(url) => ControlPlane::open_postgres_read_only(url.expose(), &url.to_string()).await?,
    })
}

/// [`Releases`] over the control plane.
pub struct PlaneReleases(pub Arc<ControlPlane>);

impl Releases for PlaneReleases {
    fn timeline(&self) -> Timeline {
        self.0.timeline()
    }

    fn has_channel(&self, id: &str) -> bool {
        self.0.channel(id).is_ok()
    }

    fn effective_channel(&self, app: &str) -> Option<String> {
        self.0.effective(app).channel.map(|c| c.to_string())
    }
}

/// The control plane's port [`FiringAlerts`] over the alert book (the spike guard and the
/// release gate read it): each firing alert's labels, summary and start.
pub struct BookAlerts(pub dyeline_queries::alerts::SharedAlerts);

impl FiringAlerts for BookAlerts {
    fn firing(&self) -> Vec<FiringAlert> {
        self.0
            .lock()
            .firing()
            .into_iter()
            .map(|a| FiringAlert {
                summary: a.annotations.get("summary").cloned().unwrap_or_default(),
                labels: a.labels,
                starts_at_unix_nano: a.starts_at_unix_nano,
            })
            .collect()
    }
}
