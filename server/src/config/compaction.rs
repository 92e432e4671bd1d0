//! The checks of the `[store] compaction_*` settings (the store's local compaction,
//! `dyeline_store::compact`): each refusal names its key.

use std::time::Duration;

use bytesize::ByteSize;

use super::{ConfigError, SqlSettings, StoreSettings};

/// Refuses compaction settings that cannot be meant: a target size outside 1 MiB..=64 GiB, a
/// lateness over a day, and a grace shorter than the SQL timeout (a query could find a file
/// it listed deleted).
pub(super) fn validate(store: &StoreSettings, sql: &SqlSettings) -> Result<(), ConfigError> {
    let bad = |m: String| Err(ConfigError::Invalid(format!("store.{m}")));
    let target = store.compaction_target_bytes;
    if target < ByteSize::mib(1) || target > ByteSize::gib(64) {
        return bad(format!(
            "compaction_target_bytes must be between 1 MiB and 64 GiB (got {target})"
        ));
    }
    if store.compaction_lateness > Duration::from_secs(86_400) {
        return bad("compaction_lateness must be at most 1day".into());
    }
    if store.compaction_grace < sql.timeout {
        return bad(format!(
            "compaction_grace must be at least sql.timeout ({}): a query could find the files \
             it reads deleted",
            humantime::format_duration(sql.timeout)
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    /// `[store]` lines loaded from a TOML file (not the environment, which tests running
    /// beside this one read).
    fn load(lines: &str) -> Result<Config, String> {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("dyeline.toml");
        std::fs::write(&file, format!("[store]\n{lines}\n")).unwrap();
        Config::load(Some(&file), figment::Figment::new()).map_err(|e| e.to_string())
    }

    /// Each bad value is refused with its key named; good ones load.
    #[test]
    fn bad_compaction_settings_are_refused_naming_the_key() {
        for (key, bad) in [
            ("compaction_target_bytes", "\"1KiB\""),
            ("compaction_lateness", "\"2days\""),
            ("compaction_grace", "\"10s\""),
        ] {
            let e = load(&format!("{key} = {bad}")).unwrap_err();
            assert!(e.contains(&format!("store.{key}")), "{key}: {e}");
        }
        let c = load("compaction = false\ncompaction_target_bytes = \"2MiB\"").unwrap();
        assert!(!c.store.compaction);
        assert_eq!(c.store.compaction_target_bytes.as_u64(), 2 << 20);
    }
}
