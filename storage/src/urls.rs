//! The two locations shared storage is configured with, parsed and checked once: the object
//! store's URL ([`ObjectStoreUrl`]: `s3://bucket/prefix` or `file:///path`) and the catalog's
//! PostgreSQL URL ([`PostgresUrl`]). Both print without secrets: `Debug` and `Display` of a
//! PostgreSQL URL leave out its password (and any `password` parameter), and an `s3://` URL
//! may not carry credentials at all (they come from the standard AWS variables). Errors name
//! the problem, never the secret.
//!
//! Does not own opening them ([`crate::objects`], [`crate::catalog`]) nor the settings' key
//! names (the server's config, which puts them in front of these messages).

use std::fmt;

use url::Url;

/// Why a URL was refused (the message says what is accepted; the caller names the key).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UrlError(String);

/// Where objects live: an S3 bucket (and a key prefix) or a local directory.
#[derive(Clone, PartialEq, Eq)]
pub enum ObjectStoreUrl {
    /// `s3://bucket/prefix`: the endpoint, region and credentials come from the standard AWS
    /// variables (`AWS_ENDPOINT_URL`, `AWS_REGION`, `AWS_ACCESS_KEY_ID`, …).
    S3 {
        /// The bucket.
        bucket: String,
        /// The key prefix under which every object is written (no leading or trailing `/`;
        /// empty for the bucket's root).
        prefix: String,
    },
    /// `file:///path`: a local (or mounted) directory, which must exist.
    File {
        /// The absolute directory.
        path: std::path::PathBuf,
    },
}

impl ObjectStoreUrl {
    /// Parses `s3://bucket/prefix` or `file:///path`.
    ///
    /// # Errors
    /// Another scheme, a bucket-less `s3://` URL, credentials, a query or a fragment in the
    /// URL, a relative or non-local `file:` URL.
    pub fn parse(text: &str) -> Result<Self, UrlError> {
        let expected = "expected s3://bucket/prefix or file:///absolute/path";
        let url = Url::parse(text.trim())
            .map_err(|e| UrlError(format!("not a URL ({e}); {expected}")))?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err(UrlError(
                "credentials do not go in the URL: set AWS_ACCESS_KEY_ID and \
                 AWS_SECRET_ACCESS_KEY"
                    .into(),
            ));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(UrlError(format!(
                "no query or fragment is accepted; {expected}"
            )));
        }
        match url.scheme() {
            "s3" => {
                let bucket = url.host_str().unwrap_or_default().to_owned();
                if bucket.is_empty() {
                    return Err(UrlError(format!("no bucket; {expected}")));
                }
                if url.port().is_some() {
                    return Err(UrlError(
                        "a port is not part of an s3:// URL: set the endpoint in AWS_ENDPOINT_URL"
                            .into(),
                    ));
                }
                let prefix = url.path().trim_matches('/').to_owned();
                if prefix
                    .split('/')
                    .any(|s| s.is_empty() && !prefix.is_empty())
                {
                    return Err(UrlError("the prefix has an empty segment (`//`)".into()));
                }
                Ok(Self::S3 { bucket, prefix })
            }
            "file" => {
                if url
                    .host_str()
                    .is_some_and(|h| !h.is_empty() && h != "localhost")
                {
                    return Err(UrlError(format!(
                        "a file: URL names a local path, not a host; {expected}"
                    )));
                }
                let path = url
                    .to_file_path()
                    .map_err(|()| UrlError(format!("not an absolute path; {expected}")))?;
                Ok(Self::File { path })
            }
            other => Err(UrlError(format!(
                "scheme {other}: is not supported; {expected}"
            ))),
        }
    }
}

impl fmt::Display for ObjectStoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::S3 { bucket, prefix } if prefix.is_empty() => write!(f, "s3://{bucket}"),
            Self::S3 { bucket, prefix } => write!(f, "s3://{bucket}/{prefix}"),
            Self::File { path } => write!(f, "file://{}", path.display()),
        }
    }
}

impl fmt::Debug for ObjectStoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ObjectStoreUrl({self})")
    }
}

/// A PostgreSQL connection URL (`postgres://user:password@host:port/database?…`). Shown as
/// `postgres://user@host:port/database`: never its password.
#[derive(Clone, PartialEq, Eq)]
pub struct PostgresUrl(Url);

impl PostgresUrl {
    /// Parses a `postgres://` or `postgresql://` URL with a host.
    ///
    /// # Errors
    /// Another scheme, no host, not a URL. The message never repeats the text given (it may
    /// hold a password).
    pub fn parse(text: &str) -> Result<Self, UrlError> {
        let expected = "expected postgres://user:password@host:port/database";
        let url = Url::parse(text.trim())
            .map_err(|e| UrlError(format!("not a URL ({e}); {expected}")))?;
        if !matches!(url.scheme(), "postgres" | "postgresql") {
            return Err(UrlError(format!(
                "scheme {}: is not PostgreSQL; {expected}",
                url.scheme()
            )));
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(UrlError(format!("no host; {expected}")));
        }
        Ok(Self(url))
    }

    /// The full URL, password included: only for connecting.
    pub fn expose(&self) -> &str {
        self.0.as_str()
    }

    /// The host and port (`host:port`, port 5432 when none is given).
    pub fn host_port(&self) -> String {
        format!(
            "{}:{}",
            self.0.host_str().unwrap_or_default(),
            self.0.port().unwrap_or(5432)
        )
    }

    /// The database named in the path (empty: the server's default, the user's name).
    pub fn database(&self) -> &str {
        self.0.path().trim_start_matches('/')
    }
}

impl fmt::Display for PostgresUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let user = self.0.username();
        let at = if user.is_empty() { "" } else { "@" };
        write!(
            f,
            "{}://{user}{at}{}/{}",
            self.0.scheme(),
            self.host_port(),
            self.database()
        )
    }
}

impl fmt::Debug for PostgresUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PostgresUrl({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_urls_give_bucket_and_prefix() {
        assert_eq!(
            ObjectStoreUrl::parse("s3://spans/prod/eu/").unwrap(),
            ObjectStoreUrl::S3 {
                bucket: "spans".into(),
                prefix: "prod/eu".into()
            }
        );
        let root = ObjectStoreUrl::parse("s3://spans").unwrap();
        assert_eq!(root.to_string(), "s3://spans");
    }

    #[test]
    fn bad_object_store_urls_are_refused_with_the_reason() {
        for (text, says) in [
            ("s3:///prefix", "no bucket"),
            ("s3://", "no bucket"),
            ("gs://bucket/p", "scheme gs: is not supported"),
            ("http://host/bucket", "scheme http: is not supported"),
            ("file://server/share", "not a host"),
            ("s3://b/p?versioned=1", "no query"),
            ("s3://b:9000/p", "AWS_ENDPOINT_URL"),
            ("s3://b/p//q", "empty segment"),
            ("bucket/prefix", "not a URL"),
        ] {
            let e = ObjectStoreUrl::parse(text).unwrap_err().to_string();
            assert!(e.contains(says), "{text}: {e}");
        }
        let e = ObjectStoreUrl::parse("s3://AKIAKEY:hunter2secret@b/p")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("AWS_SECRET_ACCESS_KEY") && !e.contains("hunter2"),
            "{e}"
        );
    }

    #[test]
    fn file_urls_give_the_directory() {
        assert_eq!(
            ObjectStoreUrl::parse("file:///var/lib/dyeline/objects").unwrap(),
            ObjectStoreUrl::File {
                path: "/var/lib/dyeline/objects".into()
            }
        );
    }

    #[test]
    fn postgres_urls_print_without_their_password() {
        let u = PostgresUrl::parse(
            "postgres://dyeline:hunter2@db.internal:6432/catalog?sslmode=disable&password=hunter2",
        )
        .unwrap();
        assert_eq!(u.to_string(), "postgres://dyeline@db.internal:6432/catalog");
        assert_eq!(
            format!("{u:?}"),
            "PostgresUrl(postgres://dyeline@db.internal:6432/catalog)"
        );
        assert!(u.expose().contains("hunter2"));
        assert_eq!(
            PostgresUrl::parse("postgresql://h/d").unwrap().host_port(),
            "h:5432"
        );
    }

    #[test]
    fn bad_postgres_urls_are_refused_without_echoing_them() {
        for (text, says) in [
            ("mysql://u:hunter2@h/d", "scheme mysql: is not PostgreSQL"),
            ("postgres:///d", "no host"),
            ("hunter2", "not a URL"),
        ] {
            let e = PostgresUrl::parse(text).unwrap_err().to_string();
            assert!(e.contains(says) && !e.contains("hunter2"), "{text}: {e}");
        }
    }
}
