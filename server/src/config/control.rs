//! `[control]`: where the control plane keeps its operations. Unset (the default), in
//! `DATA_DIR/control.db` (SQLite), one node's; `postgres_url` set
//! (`DYELINE_CONTROL__POSTGRES_URL`), in that PostgreSQL database, shared by every node that
//! names it. The URL is parsed by `dyeline_storage` like the catalog's; it is a [`Secret`]
//! (never in `Debug`), and no refusal repeats it.

use dyeline_storage::PostgresUrl;
use serde::{Deserialize, Serialize};

use super::{ConfigError, Secret};

/// `[control]`: the control plane's database.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ControlSettings {
    /// `postgres://user:password@host:port/database`: the control plane (channels, lane
    /// groups, their operations) in PostgreSQL, shared by the nodes of a cluster (schema
    /// `dyeline_control`; it may be the catalog's database). Default none: `DATA_DIR/control.db`.
    pub postgres_url: Option<Secret>,
}

impl ControlSettings {
    /// The PostgreSQL URL, parsed: `None` when the control plane is in SQLite.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming `[control] postgres_url`.
    pub fn postgres_url(&self) -> Result<Option<PostgresUrl>, ConfigError> {
        self.postgres_url
            .as_ref()
            .map(|Secret(u)| {
                PostgresUrl::parse(u)
                    .map_err(|e| ConfigError::Invalid(format!("[control] postgres_url: {e}")))
            })
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use figment::Figment;

    use super::super::Config;

    const PASSWORD: &str = "hunter2-control";

    fn load(jail: &mut figment::Jail, toml: &str) -> Result<Config, String> {
        jail.create_file("dyeline.toml", toml)
            .map_err(|e| e.to_string())?;
        Config::load(Some(std::path::Path::new("dyeline.toml")), Figment::new())
            .map_err(|e| e.to_string())
    }

    #[test]
    #[allow(clippy::result_large_err)] // figment::Jail's closure returns figment's own error
    fn the_control_url_is_off_by_default_read_from_the_environment_and_never_shown() {
        figment::Jail::expect_with(|jail| {
            let off = load(jail, "")?;
            assert!(
                off.control
                    .postgres_url()
                    .map_err(|e| e.to_string())?
                    .is_none()
            );
            jail.set_env(
                "DYELINE_CONTROL__POSTGRES_URL",
                format!("postgres://dyeline:{PASSWORD}@db:5432/dyeline"),
            );
            let on = load(jail, "")?;
            let url = on
                .control
                .postgres_url()
                .map_err(|e| e.to_string())?
                .expect("set");
            assert_eq!(url.to_string(), "postgres://dyeline@db:5432/dyeline");
            assert!(url.expose().contains(PASSWORD));
            let shown = format!("{on:?} {url:?}");
            assert!(!shown.contains(PASSWORD), "{shown}");
            // Shared storage stays off: the control plane needs no bucket.
            assert!(on.shared_storage().map_err(|e| e.to_string())?.is_none());
            Ok(())
        });
    }

    #[test]
    #[allow(clippy::result_large_err)] // figment::Jail's closure returns figment's own error
    fn a_bad_control_url_is_refused_naming_the_key_and_never_the_password() {
        figment::Jail::expect_with(|jail| {
            for (url, says) in [
                (format!("mysql://u:{PASSWORD}@db/c"), "is not PostgreSQL"),
                (format!("postgres:///c?password={PASSWORD}"), "no host"),
                (PASSWORD.to_owned(), "not a URL"),
            ] {
                let toml = format!("[control]\npostgres_url = \"{url}\"\n");
                let e = load(jail, &toml).expect_err(&toml);
                assert!(
                    e.contains("[control] postgres_url") && e.contains(says),
                    "{toml}: {e}"
                );
                assert!(!e.contains(PASSWORD), "{toml}: {e}");
            }
            Ok(())
        });
    }
}
