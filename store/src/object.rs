//! An object of shared storage (issue 26) as a file of the store: [`RemoteFile`] (its key,
//! the node that uploaded it, how to read it) in a [`FileMeta`](crate::layout::FileMeta), and
//! [`RemoteObjects`], the port the `storage` crate implements (the object store client and a
//! local cache of whole objects). The vocabulary only; what the store does with objects is
//! [`crate::remote`].

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::Arc;

use object_store::ObjectStore;

/// Which rows a file list holds: the `spans` or the `presence` table's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rows {
    /// Spans.
    Spans,
    /// Presence records (domain §7.1).
    Presence,
}

/// Reads objects of shared storage for the store's readers.
pub trait RemoteObjects: Send + Sync + fmt::Debug {
    /// Makes the object `key` readable whole at `path` (its place in the local cache),
    /// fetching it when it is not there. Blocks; call it off the async runtime's workers.
    ///
    /// # Errors
    /// The object cannot be read or written to the cache.
    fn fetch(&self, key: &str, path: &Path) -> io::Result<()>;

    /// The object store client, whose keys are the catalog's (relative to the configured
    /// prefix): scans read byte ranges of an object through it.
    fn object_store(&self) -> Arc<dyn ObjectStore>;
}

/// An object of shared storage holding rows of the store.
#[derive(Clone)]
pub struct RemoteFile {
    /// Its key in the object store (as the catalog lists it).
    pub key: String,
    /// The node that uploaded it.
    pub node: String,
    /// How to read it.
    pub objects: Arc<dyn RemoteObjects>,
}

impl fmt::Debug for RemoteFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteFile")
            .field("key", &self.key)
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

impl PartialEq for RemoteFile {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key && self.node == other.node
    }
}

impl Eq for RemoteFile {}
