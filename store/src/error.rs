//! The store's error, [`StoreError`]: what opening, writing and flushing fail with, and its
//! status category: a full queue is saturated (retry shortly), anything else leaves the store
//! unavailable (retry later), which is what the receivers answer a write that met it.
//!
//! `Io` holds its message as text, not as `{ op: &'static str, source: Arc<io::Error> }`: its
//! messages name paths (`lock file /data/LOCK: …`, `data directory /data: …`) and come from
//! I/O, Arrow, Parquet, WAL and task-join errors alike, and one failed flush is sent to every
//! write waiting on it. A static `op` cannot hold those paths without changing the text printed.

use dyeline_model::{Category, HasCategory};

/// Store errors.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The write queue is full; retry later.
    #[error("write queue full")]
    Saturated,
    /// The store is closed.
    #[error("store is closed")]
    Closed,
    /// An I/O or encoding failure.
    #[error("store I/O error: {0}")]
    Io(String),
    /// Another process holds the data directory's lock ([`LOCK_FILE`]): a data directory takes
    /// one writing store at a time. `holder` is what that process wrote in the lock file (its
    /// pid), empty when unreadable.
    ///
    /// [`LOCK_FILE`]: crate::LOCK_FILE
    #[error(
        "data directory {dir} is in use by another process{}: one dyeline serve, import, \
         compact or demo writes to a data directory at a time (readers such as dyeline sql and analyze \
         need no lock)",
        if holder.is_empty() { String::new() } else { format!(" ({holder})") }
    )]
    InUse {
        /// The data directory.
        dir: String,
        /// The holder's note, `pid N`.
        holder: String,
    },
}

impl HasCategory for StoreError {
    fn category(&self) -> Category {
        match self {
            Self::Saturated => Category::Saturated,
            Self::Closed | Self::Io(_) | Self::InUse { .. } => Category::Unavailable,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_has_its_category() {
        let rows = [
            (StoreError::Saturated, Category::Saturated),
            (StoreError::Closed, Category::Unavailable),
            (StoreError::Io("x".into()), Category::Unavailable),
            (
                StoreError::InUse {
                    dir: "/d".into(),
                    holder: String::new(),
                },
                Category::Unavailable,
            ),
        ];
        for (e, category) in rows {
            assert_eq!(e.category(), category, "{e:?}");
        }
    }
}
