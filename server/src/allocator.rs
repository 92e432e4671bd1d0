//! The allocator's one setting the server changes: how long mimalloc keeps memory that was
//! freed before it hands it back to the kernel (its purge delay).
//!
//! Under steady ingest the store's flusher frees and allocates again a few hundred MB every
//! few seconds (segments decoded a column group at a time, the rows in storage order, the
//! Parquet pages), and the receivers free each request's Arrow builders. mimalloc 3 returns
//! freed pages to the kernel (`madvise(MADV_DONTNEED)`) 1 s after they were freed, so each
//! flush touched its memory as new pages again and the kernel zeroed every one of them:
//! `clear_page_erms` was about a quarter of the server's CPU under `loadgen` (perf, 1M spans).
//! Touching new memory costs about 0.55 s per GB on this machine.
//!
//! [`keep_freed_memory`] sets the delay to [`PURGE_DELAY_MS`] (10 s, jemalloc's default decay
//! time for dirty pages), longer than the time between two flushes at full rate. The cost is
//! resident memory: what a flush freed stays mapped up to 10 s after it.
//! `MIMALLOC_PURGE_DELAY` in the environment still wins (mimalloc reads it at start).

use std::os::raw::c_long;

/// `mi_option_purge_delay` of mimalloc's `mi_option_e` (`mimalloc.h`, versions 2 and 3): ms
/// that freed memory waits before it is returned to the kernel; `-1` never.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// The purge delay the server sets, in milliseconds.
pub const PURGE_DELAY_MS: c_long = 10_000;

/// Sets mimalloc's purge delay to [`PURGE_DELAY_MS`] unless `MIMALLOC_PURGE_DELAY` is set;
/// returns the delay in force afterwards (ms). Called first thing in `main`, before any other
/// thread exists.
pub fn keep_freed_memory() -> c_long {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: `mi_option_set` stores one value in mimalloc's option table; mimalloc reads
        // it whenever it schedules a purge. No other thread exists yet, so nothing races it.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS) };
    }
    purge_delay_ms()
}

/// The purge delay mimalloc uses now, in milliseconds.
pub fn purge_delay_ms() -> c_long {
    // SAFETY: `mi_option_get` reads one value of mimalloc's option table.
    unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_purge_delay_is_set_unless_the_environment_sets_it() {
        let before = purge_delay_ms();
        let expected = match std::env::var("MIMALLOC_PURGE_DELAY") {
            Ok(v) => v.parse().expect("a number of ms"),
            Err(_) => PURGE_DELAY_MS,
        };
        // mimalloc 3's own default is 1,000 ms: the call must change what it reads back.
        assert_eq!(keep_freed_memory(), expected);
        assert_eq!(purge_delay_ms(), expected);
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            assert_ne!(before, expected, "mimalloc's default is not already 10 s");
        }
    }
}
