//! The data directory's lock: one writing store per data directory ([`LOCK_FILE`]).

use std::path::Path;

use crate::error::StoreError;

/// The file a writable store locks in its data directory, for as long as it is open (an
/// exclusive `flock`, released by the kernel when the process ends, even by SIGKILL). A
/// second writer on the same directory would replay the first one's WAL and, at its next
/// flush, delete WAL segments the first is still appending to: acknowledged spans lost at
/// the first one's next crash. The file holds the holder's `pid N`, for the error message.
pub const LOCK_FILE: &str = "LOCK";

/// Takes the lock of `data_dir` ([`LOCK_FILE`]) and writes this process's pid in it.
pub(crate) fn lock_data_dir(data_dir: &Path) -> Result<std::fs::File, StoreError> {
    use std::io::{Seek, Write};
    let path = data_dir.join(LOCK_FILE);
    let io = |e: std::io::Error| StoreError::Io(format!("lock file {}: {e}", path.display()));
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&path)
        .map_err(io)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let holder = std::fs::read_to_string(&path).unwrap_or_default();
            return Err(StoreError::InUse {
                dir: data_dir.display().to_string(),
                holder: holder.trim().to_owned(),
            });
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(io(e)),
    }
    file.set_len(0).map_err(io)?;
    file.rewind().map_err(io)?;
    write!(file, "pid {}", std::process::id()).map_err(io)?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{close, open_unsynced, write};
    use crate::{Store, StoreConfig};

    #[tokio::test]
    async fn a_second_writer_on_a_data_dir_is_refused_until_the_first_is_closed() {
        let dir = tempfile::tempdir().unwrap();
        let first = open_unsynced(dir.path());
        assert_eq!(write(&first, 0, 100).await.stored, 100);

        let second = Store::open(StoreConfig::new(dir.path()));
        match second {
            Err(StoreError::InUse { holder, .. }) => {
                assert_eq!(holder, format!("pid {}", std::process::id()));
            }
            Err(e) => panic!("expected InUse, got {e}"),
            Ok(_) => panic!("a second writer opened a locked data directory"),
        }
        // A reader takes no lock: it sees the first writer's rows (replayed from its WAL).
        let mut read = StoreConfig::new(dir.path());
        read.read_only = true;
        let reader = Store::open(read).unwrap();
        assert_eq!(reader.metrics().wal_replayed_rows.get(), 100);
        drop(reader);

        // The refused writer touched nothing: the first still writes, and after it closes a
        // new writer opens and holds every row once.
        assert_eq!(write(&first, 100, 50).await.stored, 50);
        close(first).await;
        let reopened = open_unsynced(dir.path());
        assert_eq!(write(&reopened, 0, 150).await.duplicates, 150);
        close(reopened).await;
    }
}
