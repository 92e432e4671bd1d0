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
        .map(|h| h.trim().to_owned())
        .unwrap_or_default()
}

/// Checks `[cluster] advertise_url`: an `http` or `https` URL with a host and nothing after
/// the authority but an optional `/`; returns it without that `/`.
///
/// # Errors
/// What is wrong with it.
pub fn parse_advertise_url(text: &str) -> Result<String, String> {
    let url = url::Url::parse(text).map_err(|e| format!("{text:?} is not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") || !url.has_host() {
        return Err(format!(
            "{text:?}: expected http://HOST:PORT or https://HOST:PORT"
        ));
    }
    if url.path() != "/" || url.query().is_some() || url.fragment().is_some() {
        return Err(format!(
            "{text:?}: expected no path, query or fragment (the API's routes are added to it)"
        ));
    }
    Ok(text.trim_end_matches('/').to_owned())
}

/// Where other nodes reach this node's API: `advertise` (`[cluster] advertise_url`) when set;
/// else the bound address, with the host name in place of an unspecified IP (`0.0.0.0`,
/// `::`), which no other machine can dial.
pub fn api_url(advertise: Option<&str>, bound: std::net::SocketAddr) -> String {
    if let Some(a) = advertise {
        return a.trim_end_matches('/').to_owned();
    }
    let host = host_name();
    if bound.ip().is_unspecified() && !host.is_empty() {
        format!("http://{host}:{}", bound.port())
    } else {
        format!("http://{bound}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_url_is_the_advertised_one_or_a_dialable_bound_address() {
        let bound = |s: &str| s.parse::<std::net::SocketAddr>().unwrap();
        assert_eq!(
            api_url(Some("http://node-1.dyeline:8080/"), bound("0.0.0.0:8080")),
            "http://node-1.dyeline:8080"
        );
        assert_eq!(
            api_url(None, bound("127.0.0.1:4321")),
            "http://127.0.0.1:4321"
        );
        assert_eq!(api_url(None, bound("[::1]:80")), "http://[::1]:80");
        let any = api_url(None, bound("0.0.0.0:8080"));
        let host = host_name();
        if host.is_empty() {
            assert_eq!(any, "http://0.0.0.0:8080");
        } else {
            assert_eq!(any, format!("http://{host}:8080"));
        }
        assert_eq!(
            parse_advertise_url("https://dyeline-0.dyeline.svc:8080/").unwrap(),
            "https://dyeline-0.dyeline.svc:8080"
        );
        for bad in [
            "dyeline-0:8080",
            "ftp://h:1",
            "http://h:1/api",
            "http://h:1/?x=1",
            "",
        ] {
            assert!(parse_advertise_url(bad).is_err(), "{bad:?}");
        }
    }

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
