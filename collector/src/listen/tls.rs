//! TLS on a listener (`[otlp.tls]`): rustls with the aws-lc-rs provider, a certificate chain
//! and its private key read from PEM files, ALPN offering what the listener speaks (`h2` for
//! gRPC, `h2` and `http/1.1` for OTLP/HTTP). The files are read again when either one changes
//! (checked every `reload_interval` by [`Tls::watch`]), so a certificate renewed on disk
//! (cert-manager, certbot) is served to the next connection without a restart; a reload that
//! fails keeps the last good pair, is logged and counted
//! (`dyeline_listener_tls_reloads_total{listener,outcome}`). A handshake that fails or does not
//! finish within the listener's `header_read_timeout` closes the connection, counted as
//! `dyeline_listener_connections_closed_total{reason="tls_handshake"}`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use prometheus_client::metrics::counter::Counter;
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

use super::Protocols;
use super::metrics::{ListenerMetrics, TlsReloadLabel};

/// Where a listener's certificate chain and key are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// PEM: the server certificate first, then its intermediates.
    pub cert: PathBuf,
    /// PEM: the private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// Why the certificate or key could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read or holds no usable PEM item.
    #[error("{path}: {message}")]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// rustls refused the pair (a key that does not match the certificate, say).
    #[error("the certificate and key cannot be served: {0}")]
    Config(String),
}

/// The TLS state of one listener: the config new connections get, and where it came from.
pub struct Tls {
    files: TlsFiles,
    alpn: Vec<Vec<u8>>,
    current: RwLock<Loaded>,
    reloaded: Counter,
    failed: Counter,
}

struct Loaded {
    acceptor: TlsAcceptor,
    stamp: (Option<SystemTime>, Option<SystemTime>),
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").field("files", &self.files).finish()
    }
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

fn file_error(path: &Path, message: impl std::fmt::Display) -> TlsError {
    TlsError::File {
        path: path.to_owned(),
        message: message.to_string(),
    }
}

/// A PEM error in words: rustls' own prints the marker it missed as a list of bytes.
fn pem_error(path: &Path, e: rustls::pki_types::pem::Error) -> TlsError {
    use rustls::pki_types::pem::Error as E;
    match e {
        E::MissingSectionEnd { end_marker } => file_error(
            path,
            format!(
                "a PEM section has no end line (-----END {}-----)",
                String::from_utf8_lossy(&end_marker)
            ),
        ),
        E::IllegalSectionStart { line } => file_error(
            path,
            format!(
                "a PEM section starts with a malformed line ({})",
                String::from_utf8_lossy(&line)
            ),
        ),
        E::NoItemsFound => file_error(path, "no PEM item of the expected kind"),
        other => file_error(path, other),
    }
}

/// Reads the pair and builds the server config offering `alpn`.
fn build(files: &TlsFiles, alpn: &[Vec<u8>]) -> Result<Arc<ServerConfig>, TlsError> {
    let chain = CertificateDer::pem_file_iter(&files.cert)
        .map_err(|e| pem_error(&files.cert, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(&files.cert, e))?;
    if chain.is_empty() {
        return Err(file_error(&files.cert, "no CERTIFICATE in the file"));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| pem_error(&files.key, e))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| TlsError::Config(e.to_string()))?;
    config.alpn_protocols = alpn.to_vec();
    Ok(Arc::new(config))
}

impl Tls {
    /// Reads `files` for the listener `listener` speaking `protocols`.
    ///
    /// # Errors
    /// A file that cannot be read or parsed, or a pair rustls refuses: the server does not
    /// start with it.
    pub fn load(
        files: TlsFiles,
        listener: &'static str,
        protocols: Protocols,
        metrics: &ListenerMetrics,
    ) -> Result<Arc<Self>, TlsError> {
        let alpn: Vec<Vec<u8>> = match protocols {
            Protocols::Http2Only => vec![b"h2".to_vec()],
            Protocols::Http1AndH2c => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
        };
        let stamp = (modified(&files.cert), modified(&files.key));
        let config = build(&files, &alpn)?;
        let counter = |outcome| {
            metrics
                .tls_reloads
                .get_or_create(&TlsReloadLabel { listener, outcome })
                .clone()
        };
        Ok(Arc::new(Self {
            reloaded: counter("ok"),
            failed: counter("failed"),
            files,
            alpn,
            current: RwLock::new(Loaded {
                acceptor: TlsAcceptor::from(config),
                stamp,
            }),
        }))
    }

    /// The acceptor for a new connection.
    pub(crate) fn acceptor(&self) -> TlsAcceptor {
        self.current.read().expect("tls lock").acceptor.clone()
    }

    /// Reads the files again when either changed since the last read: `Ok(true)` when the
    /// new pair is served from now on, `Ok(false)` when nothing changed.
    ///
    /// # Errors
    /// The new files cannot be used; the last good pair stays.
    pub fn reload_if_changed(&self) -> Result<bool, TlsError> {
        let stamp = (modified(&self.files.cert), modified(&self.files.key));
        if self.current.read().expect("tls lock").stamp == stamp {
            return Ok(false);
        }
        let built = build(&self.files, &self.alpn);
        let mut current = self.current.write().expect("tls lock");
        // The stamp is taken either way: a broken file is reported once, not every check.
        current.stamp = stamp;
        match built {
            Ok(config) => {
                current.acceptor = TlsAcceptor::from(config);
                self.reloaded.inc();
                Ok(true)
            }
            Err(e) => {
                self.failed.inc();
                Err(e)
            }
        }
    }

    /// Checks the files every `every` until `stop` becomes true.
    pub fn watch(self: Arc<Self>, every: Duration, mut stop: watch::Receiver<bool>) {
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every.max(Duration::from_millis(100)));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tokio::select! {
                    _ = tick.tick() => match self.reload_if_changed() {
                        Ok(true) => tracing::info!(
                            cert = %self.files.cert.display(),
                            "tls certificate reloaded"
                        ),
                        Ok(false) => {}
                        Err(e) => tracing::error!(
                            error = %e,
                            "tls certificate reload failed; the last good certificate is still served"
                        ),
                    },
                    _ = stop.wait_for(|s| *s) => return,
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_or_empty_file_is_refused_naming_it() {
        let dir = std::env::temp_dir().join(format!("dyeline-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cert = dir.join("cert.pem");
        let key = dir.join("key.pem");
        std::fs::write(&cert, "not a pem\n").unwrap();
        let m = ListenerMetrics::default();
        let refusal = || {
            let files = TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
            };
            Tls::load(files, "otlp_http", Protocols::Http1AndH2c, &m)
                .unwrap_err()
                .to_string()
        };
        let e = refusal();
        assert!(e.contains("cert.pem"), "{e}");
        assert!(e.contains("no CERTIFICATE"), "{e}");
        std::fs::write(&cert, "-----BEGIN CERTIFICATE-----\nAAAA\n").unwrap();
        let e = refusal();
        assert!(e.contains("no end line (-----END CERTIFICATE-----)"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
