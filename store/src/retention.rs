//! Retention: a file is deleted `retention` after it was written (its write time, not its spans':
//! [`crate::layout`]), checked on the flusher thread once a minute.

use std::time::Duration;

use crate::layout::{FileMeta, now_unix_ms};
use crate::state::Shared;

pub(crate) fn apply_retention(shared: &Shared, retention: Duration) {
    let cutoff = now_unix_ms() - retention.as_millis() as i64;
    let expired: Vec<FileMeta> = {
        let mut s = shared.state.write();
        let (old, keep): (Vec<_>, Vec<_>) =
            s.files.drain(..).partition(|f| f.written_unix_ms < cutoff);
        s.files = keep;
        shared.files_changed(&mut s);
        old
    };
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
