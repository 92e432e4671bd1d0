//! API tokens (issue: control plane, item 4): named bearer tokens from config or
//! `DYELINE_API_TOKEN`, one generated at first start when none is configured, and the check
//! every route makes. Token values never appear in `Debug` output or logs.

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

use axum::http::{HeaderMap, header};
use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;

use crate::error::ControlError;

/// File (in the data dir) holding the generated token, mode 0600.
pub const TOKEN_FILE: &str = "api-token";

/// Name (actor) of the generated token.
pub const GENERATED_TOKEN_NAME: &str = "admin";

/// What a token may do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Read and write (the default).
    #[default]
    Write,
    /// Read only: writes answer 403.
    Read,
}

/// One configured token.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiToken {
    /// Recorded as the actor of each operation made with it.
    pub name: String,
    /// The secret sent as `Authorization: Bearer <token>`.
    pub token: String,
    /// `write` (default) or `read`.
    #[serde(default)]
    pub role: Role,
}

impl fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiToken")
            .field("name", &self.name)
            .field("token", &"<redacted>")
            .field("role", &self.role)
            .finish()
    }
}

/// Whether a route reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// GET routes (open unless `read_requires_token`).
    Read,
    /// Every write (always needs a `write` token).
    Write,
}

/// The token check of the API.
#[derive(Clone, Debug, Default)]
pub struct Auth {
    tokens: Vec<ApiToken>,
    read_requires_token: bool,
}

impl Auth {
    /// Checks against `tokens`; reads need one only when `read_requires_token`.
    pub fn new(tokens: Vec<ApiToken>, read_requires_token: bool) -> Self {
        Auth {
            tokens,
            read_requires_token,
        }
    }

    /// The actor (token name) allowed to make a request with these headers, or `None` for an
    /// open read without a token.
    ///
    /// # Errors
    /// [`ControlError::Unauthorized`] (401) without a bearer token where one is needed, or
    /// with one that is not configured; [`ControlError::Forbidden`] (403) for a write with a
    /// `read` token.
    pub fn authorize(
        &self,
        headers: &HeaderMap,
        access: Access,
    ) -> Result<Option<String>, ControlError> {
        let presented = headers
            .get(header::AUTHORIZATION)
            .map(|v| v.to_str().unwrap_or(""))
            .map(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
                    .unwrap_or("")
                    .trim()
            });
        let needed = access == Access::Write || self.read_requires_token;
        let Some(presented) = presented else {
            return if needed {
                Err(ControlError::Unauthorized(
                    "this request needs an Authorization: Bearer <token> header",
                ))
            } else {
                Ok(None)
            };
        };
        let found = self
            .tokens
            .iter()
            .find(|t| bool::from(t.token.as_bytes().ct_eq(presented.as_bytes())));
        match found {
            None if !needed && presented.is_empty() => Ok(None),
            None => Err(ControlError::Unauthorized("the bearer token is not valid")),
            Some(t) if access == Access::Write && t.role == Role::Read => {
                Err(ControlError::Forbidden(t.name.clone()))
            }
            Some(t) => Ok(Some(t.name.clone())),
        }
    }
}

/// Reads `data_dir/api-token`, creating it (readable by the owner only) with a random
/// 256-bit hex token when absent. Returns its path, the token and whether it was created.
///
/// # Errors
/// I/O errors; a token file that is empty.
pub fn ensure_token_file(data_dir: &Path) -> std::io::Result<(PathBuf, String, bool)> {
    let path = data_dir.join(TOKEN_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let token = text.trim().to_owned();
            if token.is_empty() {
                return Err(std::io::Error::other(format!(
                    "{} is empty",
                    path.display()
                )));
            }
            Ok((path, token, false))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(data_dir)?;
            let mut bytes = [0u8; 32];
            getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
            let token = hex::encode(bytes);
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let mut f = options.open(&path)?;
            writeln!(f, "{token}")?;
            f.sync_all()?;
            Ok((path, token, true))
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(auth: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(a) = auth {
            h.insert(header::AUTHORIZATION, HeaderValue::from_str(a).unwrap());
        }
        h
    }

    #[test]
    fn writes_need_a_write_token_reads_are_open_by_default() {
        let auth = Auth::new(
            vec![
                ApiToken {
                    name: "alice".into(),
                    token: "s3cret".into(),
                    role: Role::Write,
                },
                ApiToken {
                    name: "ro".into(),
                    token: "look".into(),
                    role: Role::Read,
                },
            ],
            false,
        );
        assert_eq!(auth.authorize(&headers(None), Access::Read).unwrap(), None);
        assert_eq!(
            auth.authorize(&headers(None), Access::Write)
                .unwrap_err()
                .code(),
            "unauthorized"
        );
        assert_eq!(
            auth.authorize(&headers(Some("Bearer nope")), Access::Write)
                .unwrap_err()
                .code(),
            "unauthorized"
        );
        assert_eq!(
            auth.authorize(&headers(Some("Bearer s3cret")), Access::Write)
                .unwrap(),
            Some("alice".into())
        );
        assert_eq!(
            auth.authorize(&headers(Some("Bearer look")), Access::Write)
                .unwrap_err()
                .code(),
            "forbidden"
        );
        let closed = Auth::new(auth.tokens.clone(), true);
        assert_eq!(
            closed
                .authorize(&headers(None), Access::Read)
                .unwrap_err()
                .code(),
            "unauthorized"
        );
        assert_eq!(
            closed
                .authorize(&headers(Some("Bearer look")), Access::Read)
                .unwrap(),
            Some("ro".into())
        );
    }

    #[test]
    fn debug_output_hides_the_token() {
        let t = ApiToken {
            name: "alice".into(),
            token: "s3cret".into(),
            role: Role::Write,
        };
        assert!(!format!("{t:?}").contains("s3cret"));
    }

    #[test]
    fn generated_token_file_is_private_and_stable() {
        let dir = tempfile::tempdir().unwrap();
        let (path, token, created) = ensure_token_file(dir.path()).unwrap();
        assert!(created);
        assert_eq!(token.len(), 64);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
        let (_, again, created) = ensure_token_file(dir.path()).unwrap();
        assert_eq!((again, created), (token, false));
    }
}
