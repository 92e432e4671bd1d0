//! What keeps a server's data to its owner (issue 23): the process umask, so every file and
//! directory Dyeline creates (WAL, Parquet, `LOCK`, `control.db` and its `-wal`/`-shm`,
//! `api-token`) is private whichever library creates it; an existing data directory's mode
//! tightened to 0700 when a command opens it to write; and the warning when the API listens
//! beyond loopback with reads open.

// Its warnings go to stderr before the logs are set up (they decide whether the data dir is used).
#![allow(clippy::print_stderr)]

use std::net::SocketAddr;
use std::path::Path;

/// Sets the process umask to 0o077 (first thing in `main`, before any thread): files are
/// created 0600 and directories 0700 at most.
#[cfg(unix)]
pub fn restrict_umask() {
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
}

/// Sets the process umask (nothing to do off Unix).
#[cfg(not(unix))]
pub fn restrict_umask() {}

/// Tightens an existing `data_dir` to 0700 (what a data directory of an older version, or one
/// made by hand, may lack), saying so on stderr; warns when another user owns it. Its files
/// are then out of other users' reach whatever their own modes. A directory that does not
/// exist yet is created under the umask.
///
/// # Errors
/// The directory's mode cannot be read or set.
#[cfg(unix)]
pub fn secure_data_dir(data_dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let meta = match std::fs::metadata(data_dir) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if !meta.is_dir() {
        return Ok(());
    }
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me {
        tracing::warn!(data_dir = %data_dir.display(), owner = meta.uid(), user = me,
            "the data directory belongs to another user");
        eprintln!(
            "dyeline: warning: the data directory {} belongs to user {}, not to this process's user {me}; that user can read every span",
            data_dir.display(),
            meta.uid()
        );
        return Ok(());
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        std::fs::set_permissions(data_dir, std::fs::Permissions::from_mode(0o700))?;
        tracing::warn!(data_dir = %data_dir.display(), was = format!("{mode:o}"), "data directory tightened to 0700");
        eprintln!(
            "dyeline: the data directory {} was readable by other users (mode {mode:o}); set it to 700",
            data_dir.display()
        );
    }
    Ok(())
}

/// Tightens the data directory (nothing to do off Unix).
#[cfg(not(unix))]
pub fn secure_data_dir(_: &Path) -> std::io::Result<()> {
    Ok(())
}

/// The warning for an API listening beyond loopback while reads need no token, as a
/// `tracing` event and a line on stderr (`None` when there is nothing to warn about).
pub fn open_reads_warning(api: SocketAddr, read_requires_token: bool) -> Option<String> {
    (!api.ip().is_loopback() && !read_requires_token).then(|| {
        format!(
            "dyeline: warning: the API and dashboard listen on {api}, beyond loopback, and reads need no token: anyone who can reach it reads every channel, trace and host; set api.read_requires_token = true (DYELINE_API__READ_REQUIRES_TOKEN=true) or listen on 127.0.0.1"
        )
    })
}

/// Logs and prints [`open_reads_warning`] when there is one.
pub fn warn_open_reads(api: SocketAddr, read_requires_token: bool) {
    if let Some(w) = open_reads_warning(api, read_requires_token) {
        tracing::warn!(%api, "the API listens beyond loopback with reads open (api.read_requires_token = false)");
        eprintln!("{w}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_open_reads_beyond_loopback_are_warned_about() {
        let any: SocketAddr = "0.0.0.0:8080".parse().unwrap();
        let v6: SocketAddr = "[::]:8080".parse().unwrap();
        let local: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let local6: SocketAddr = "[::1]:8080".parse().unwrap();
        assert!(
            open_reads_warning(any, false)
                .unwrap()
                .contains("api.read_requires_token = true")
        );
        assert!(open_reads_warning(v6, false).is_some());
        assert_eq!(open_reads_warning(any, true), None);
        assert_eq!(open_reads_warning(local, false), None);
        assert_eq!(open_reads_warning(local6, false), None);
    }

    #[cfg(unix)]
    #[test]
    fn an_open_data_dir_is_tightened() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
        secure_data_dir(&data).unwrap();
        let mode = std::fs::metadata(&data).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        secure_data_dir(&dir.path().join("absent")).unwrap();
    }
}
