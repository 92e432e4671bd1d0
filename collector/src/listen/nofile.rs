//! The process's open-files limit (`RLIMIT_NOFILE`): raised from its soft to its hard value at
//! start (as Go's runtime and Prometheus do), and the listeners' connection caps fitted under
//! it, so that a full listener refuses or evicts instead of every listener failing its
//! accepts with EMFILE.

/// File descriptors kept for everything but connections: the store's WAL and Parquet files,
/// the control database, query scans, the listening sockets.
pub const RESERVED_FDS: u64 = 512;

/// Raises the soft `RLIMIT_NOFILE` to the hard limit. Returns the soft limit before and after
/// (equal when it was already at the hard limit or the hard limit is unlimited).
///
/// # Errors
/// `setrlimit` refused.
pub fn raise_open_files_limit() -> std::io::Result<(u64, u64)> {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let before = limit.current.unwrap_or(u64::MAX);
    let Some(hard) = limit.maximum else {
        return Ok((before, before));
    };
    if before >= hard {
        return Ok((before, before));
    }
    let mut raised = limit;
    raised.current = Some(hard);
    setrlimit(Resource::Nofile, raised)?;
    Ok((before, hard))
}

/// The soft `RLIMIT_NOFILE` (`u64::MAX` when unlimited).
pub fn open_files_limit() -> u64 {
    rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(u64::MAX)
}

/// Lowers `caps` (the listeners' `max_connections`) in proportion when together they would
/// use more than `open_files` minus [`RESERVED_FDS`] (at least half of `open_files` is left to
/// connections). Returns whether they were lowered. Every cap stays at least 1.
pub fn fit_connection_caps(caps: &mut [usize], open_files: u64) -> bool {
    let room = open_files
        .saturating_sub(RESERVED_FDS)
        .max(open_files / 2)
        .max(1);
    let total: u64 = caps.iter().map(|&c| c as u64).sum();
    if total <= room {
        return false;
    }
    for c in caps.iter_mut() {
        *c = ((*c as u64 * room / total) as usize).max(1);
    }
    true
}
