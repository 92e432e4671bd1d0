//! The node id ([`NodeId`]): the name of one writer in object keys (`…/node=ID/…`) and in the
//! catalog. Grammar: 1 to 63 characters of lowercase ASCII letters, digits and `-`, starting
//! and ending with a letter or digit (a DNS label, safe in a key and a URL). Configured as
//! `[cluster] node_id`; without it, derived once from the host name ([`NodeId::from_host_name`])
//! and kept in `DATA_DIR/node_id`, which later starts read back ([`resolve`]): renaming the
//! host does not rename the node.
//!
//! Does not own ownership of a node id (the catalog's owner epoch, [`crate::catalog`]).

use std::fmt;
use std::path::Path;

/// The file in the data directory that keeps the derived node id.
pub const NODE_ID_FILE: &str = "node_id";

/// A valid node id (see the module's grammar).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(String);

/// Why a node id was refused, or could not be kept.
#[derive(Debug, thiserror::Error)]
pub enum NodeIdError {
    /// The text does not follow the grammar.
    #[error(
        "{0:?} is not a node id: 1 to 63 lowercase letters, digits and '-', starting and ending \
         with a letter or digit"
    )]
    Invalid(String),
    /// `DATA_DIR/node_id` could not be read or written.
    #[error("{path}: {source}")]
    File {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
}

impl NodeId {
    /// Checks `text` against the grammar.
    ///
    /// # Errors
    /// [`NodeIdError::Invalid`].
    pub fn parse(text: &str) -> Result<Self, NodeIdError> {
        let ok = (1..=63).contains(&text.len())
            && text
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !text.starts_with('-')
            && !text.ends_with('-');
        if ok {
            Ok(Self(text.to_owned()))
        } else {
            Err(NodeIdError::Invalid(text.to_owned()))
        }
    }

    /// The id derived from a host name: its first label, lowercased, each other character
    /// turned into `-`, cut to 63 characters, `-` trimmed at the ends; `node` when nothing is
    /// left.
    pub fn from_host_name(host: &str) -> Self {
        let label = host.trim().split('.').next().unwrap_or_default();
        let mapped: String = label
            .chars()
            .map(|c| match c.to_ascii_lowercase() {
                c @ ('a'..='z' | '0'..='9') => c,
                _ => '-',
            })
            .take(63)
            .collect();
        let trimmed = mapped.trim_matches('-');
        Self::parse(trimmed).unwrap_or_else(|_| Self("node".to_owned()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NodeId({})", self.0)
    }
}

/// The node id of this process: `configured` when given (kept in `data_dir/node_id` too, so
/// a reader of the data directory without the setting, e.g. `dyeline sql`, knows whose
/// checkpoint covers its local files); else the one kept there; else one derived from the
/// host name, written there first.
///
/// # Errors
/// A kept file that cannot be read or holds no valid id, or cannot be written.
pub fn resolve(configured: Option<&NodeId>, data_dir: &Path) -> Result<NodeId, NodeIdError> {
    let path = data_dir.join(NODE_ID_FILE);
    let file_error = |source| NodeIdError::File {
        path: path.display().to_string(),
        source,
    };
    if let Some(id) = configured {
        // A configured id wins over a kept one, even an unreadable one.
        if read_kept(data_dir).ok().flatten().as_ref() != Some(id) {
            std::fs::create_dir_all(data_dir).map_err(file_error)?;
            std::fs::write(&path, format!("{id}\n")).map_err(file_error)?;
        }
        return Ok(id.clone());
    }
    match std::fs::read_to_string(&path) {
        Ok(text) => NodeId::parse(text.trim()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let id = NodeId::from_host_name(&host_name());
            std::fs::create_dir_all(data_dir).map_err(file_error)?;
            std::fs::write(&path, format!("{id}\n")).map_err(file_error)?;
            Ok(id)
        }
        Err(e) => Err(file_error(e)),
    }
}

/// The node id kept in `data_dir/node_id`, if any, without writing one (readers).
///
/// # Errors
/// A kept file that cannot be read or holds no valid id.
pub fn read_kept(data_dir: &Path) -> Result<Option<NodeId>, NodeIdError> {
    let path = data_dir.join(NODE_ID_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => NodeId::parse(text.trim()).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(NodeIdError::File {
            path: path.display().to_string(),
            source,
        }),
    }
}

/// The kernel's host name (Linux), else `HOSTNAME`, else empty.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grammar_accepts_dns_labels_only() {
        for ok in ["a", "node-1", "ingest-eu-west-3a", &"x".repeat(63)] {
            assert_eq!(NodeId::parse(ok).unwrap().as_str(), ok);
        }
        for bad in [
            "",
            "-a",
            "a-",
            "Node1",
            "a.b",
            "a/b",
            "a b",
            "naïve",
            &"x".repeat(64),
        ] {
            let e = NodeId::parse(bad).unwrap_err().to_string();
            assert!(e.contains("is not a node id"), "{bad}: {e}");
        }
    }

    #[test]
    fn host_names_map_onto_the_grammar() {
        for (host, id) in [
            ("ip-10-0-3-17.eu-west-1.compute.internal", "ip-10-0-3-17"),
            ("Dyeline_Ingest_2\n", "dyeline-ingest-2"),
            ("--", "node"),
            ("", "node"),
        ] {
            assert_eq!(NodeId::from_host_name(host).as_str(), id, "{host:?}");
        }
    }

    #[test]
    fn the_derived_id_is_kept_and_reused_and_a_configured_one_wins() {
        let dir = tempfile::tempdir().unwrap();
        let first = resolve(None, dir.path()).unwrap();
        assert_eq!(first, NodeId::from_host_name(&host_name()));
        // A later start reads the file back, whatever the host is called by then.
        std::fs::write(dir.path().join(NODE_ID_FILE), "renamed-7\n").unwrap();
        assert_eq!(resolve(None, dir.path()).unwrap().as_str(), "renamed-7");
        std::fs::write(dir.path().join(NODE_ID_FILE), "Bad Id").unwrap();
        assert!(resolve(None, dir.path()).is_err());
        // A configured id wins, and is kept for readers of the directory without the setting
        // (`dyeline sql` must know whose checkpoint covers the local files).
        let configured = NodeId::parse("configured").unwrap();
        assert_eq!(resolve(Some(&configured), dir.path()).unwrap(), configured);
        assert_eq!(read_kept(dir.path()).unwrap(), Some(configured.clone()));
        assert_eq!(resolve(None, dir.path()).unwrap(), configured);
    }
}
