//! Retention: a file is deleted `retention` after it was written (its write time, not its rows':
//! [`crate::layout`]), checked on the flusher thread once a minute; the same rule for the
//! `spans` files and the `presence` files ([`crate::presence`]).

use std::time::Duration;

use crate::layout::{FileMeta, now_unix_ms};
use crate::state::Shared;

pub(crate) fn apply_retention(shared: &Shared, retention: Duration) {
    let expired = {
        let mut s = shared.state.write();
        let old = take_expired(&mut s.files, retention);
        shared.files_changed(&mut s);
        old
    };
    delete_files(expired);
}

/// Removes from `files` those written more than `retention` ago and returns them.
pub(crate) fn take_expired(files: &mut Vec<FileMeta>, retention: Duration) -> Vec<FileMeta> {
    let cutoff = now_unix_ms() - retention.as_millis() as i64;
    // Objects of shared storage are kept by the catalog's retention, not this one.
    let (old, keep): (Vec<_>, Vec<_>) = files
        .drain(..)
        .partition(|f| f.is_local() && f.written_unix_ms < cutoff);
    *files = keep;
    old
}

/// Deletes `expired` files, and their hour directories once empty.
pub(crate) fn delete_files(expired: Vec<FileMeta>) {
    for f in expired {
        tracing::info!(path = %f.path.display(), "retention: deleting partition file");
        if let Err(e) = std::fs::remove_file(&f.path) {
            tracing::warn!(path = %f.path.display(), error = %e, "retention: cannot delete");
        }
        if let Some(dir) = f.path.parent() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}
