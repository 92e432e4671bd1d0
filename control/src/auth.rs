//! API tokens (issue: control plane, item 4): named bearer tokens from config or
//! `DYELINE_API_TOKEN`, one generated at first start when none is configured, their minimum
//! length, the parsing of `Authorization: Bearer …`, and the one check every request to the API
//! port goes through ([`Auth::check`]; the server's gate applies it to the whole router, issue
//! 23), built on who a token is ([`Auth::identify`], which the dashboard's sign-in asks too).
//! Token values never appear in `Debug` output or logs.

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

/// The fewest characters a token may have (configured, `DYELINE_API_TOKEN` or the token
/// file). Sixteen characters of a random token are 64 bits (hex) to 96 bits (base64): with the
/// failed-token throttle (at most a few hundred guesses a minute) out of reach of guessing,
/// while the names people type as tokens (`admin`, `secret`, `changeme`) are refused. The
/// generated token has 64 hex digits (256 bits).
pub const MIN_TOKEN_CHARS: usize = 16;

/// `Ok` for a token long enough to use, else why not (naming where the token came from).
///
/// # Errors
/// A token of fewer than [`MIN_TOKEN_CHARS`] characters (after trimming).
pub fn check_token_strength(token: &str, source: &str) -> Result<(), String> {
    let n = token.trim().chars().count();
    if n < MIN_TOKEN_CHARS {
        return Err(format!(
            "{source}: the token has {n} character{}; tokens need at least {MIN_TOKEN_CHARS} \
             (e.g. `openssl rand -hex 32`)",
            if n == 1 { "" } else { "s" }
        ));
    }
    Ok(())
}

pub use dyeline_model::bearer::parse_bearer;

/// The credential of a request's `Authorization` header: `None` without the header,
/// `Some("")` for one that is not a bearer token (another scheme, not text), else
/// `Some(token)`.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .map(|v| v.to_str().ok().and_then(parse_bearer).unwrap_or(""))
}

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

/// Who a token belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// The token's name, recorded as the actor of its writes.
    pub name: String,
    /// What it may do.
    pub role: Role,
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

    /// True when reads need a token too (`api.read_requires_token`).
    pub fn reads_need_token(&self) -> bool {
        self.read_requires_token
    }

    /// The actor (token name) allowed to make a request with these headers (their bearer
    /// token, see [`bearer`]), or `None` for an open read without a token.
    ///
    /// # Errors
    /// As [`Auth::check`].
    pub fn authorize(
        &self,
        headers: &HeaderMap,
        access: Access,
    ) -> Result<Option<String>, ControlError> {
        self.check(bearer(headers), access)
    }

    /// The check itself, on the credential a request presented (`None`: none; `Some("")`: one
    /// that is not a token): the actor (token name), or `None` for an open read without a
    /// token.
    ///
    /// # Errors
    /// [`ControlError::Unauthorized`] (401) without a token where one is needed, or with one
    /// that is not configured (see [`Auth::identify`]); [`ControlError::Forbidden`] (403) for
    /// a write with a `read` token.
    pub fn check(
        &self,
        presented: Option<&str>,
        access: Access,
    ) -> Result<Option<String>, ControlError> {
        let needed = access == Access::Write || self.read_requires_token;
        let presented = match presented {
            None if needed => {
                return Err(ControlError::Unauthorized(
                    "this request needs an Authorization: Bearer <token> header",
                ));
            }
            None => return Ok(None),
            Some(p) => p,
        };
        match self.identify(presented) {
            Err(_) if !needed && presented.is_empty() => Ok(None),
            Err(e) => Err(e),
            Ok(who) if access == Access::Write && who.role == Role::Read => {
                Err(ControlError::Forbidden(who.name))
            }
            Ok(who) => Ok(Some(who.name)),
        }
    }

    /// Who `token` is: the configured token it equals (compared in constant time), with its
    /// name and role. The API's check above and the dashboard's sign-in both ask this.
    ///
    /// # Errors
    /// [`ControlError::Unauthorized`] (401) for a token that is not configured: "the
    /// Authorization header is not `Bearer <token>`" when it is empty (a credential that was
    /// not a bearer token), else "the bearer token is not valid".
    pub fn identify(&self, token: &str) -> Result<Identity, ControlError> {
        let found = self
            .tokens
            .iter()
            .find(|t| bool::from(t.token.as_bytes().ct_eq(token.as_bytes())));
        match found {
            Some(t) => Ok(Identity {
                name: t.name.clone(),
                role: t.role,
            }),
            None if token.is_empty() => Err(ControlError::Unauthorized(
                "the Authorization header is not `Bearer <token>`",
            )),
            None => Err(ControlError::Unauthorized("the bearer token is not valid")),
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
            check_token_strength(&token, &path.display().to_string())
                .map_err(std::io::Error::other)?;
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

    /// Open reads; `alice` (`s3cret`) writes, `ro` (`look`) reads.
    fn alice_and_ro() -> Auth {
        Auth::new(
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
        )
    }

    #[test]
    fn writes_need_a_write_token_reads_are_open_by_default() {
        let auth = alice_and_ro();
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
    fn the_bearer_scheme_is_case_insensitive_with_one_or_more_spaces() {
        for (value, token) in [
            ("Bearer abc", Some("abc")),
            ("bearer abc", Some("abc")),
            ("BEARER abc", Some("abc")),
            ("BeArEr   abc ", Some("abc")),
            ("Bearer", None),
            ("Bearer ", None),
            ("Bearer    ", None),
            ("Basic YWxhZGRpbjpvcGVuc2VzYW1l", None),
            ("Bearerabc", None),
            ("Token abc", None),
        ] {
            assert_eq!(parse_bearer(value), token, "{value:?}");
        }
        assert_eq!(bearer(&headers(None)), None);
        assert_eq!(bearer(&headers(Some("Basic eA=="))), Some(""));
        assert_eq!(bearer(&headers(Some("BEARER s3cret"))), Some("s3cret"));
        let auth = Auth::new(
            vec![ApiToken {
                name: "alice".into(),
                token: "s3cret".into(),
                role: Role::Write,
            }],
            true,
        );
        for value in ["BEARER s3cret", "bearer  s3cret", "Bearer s3cret"] {
            assert_eq!(
                auth.authorize(&headers(Some(value)), Access::Write)
                    .unwrap(),
                Some("alice".into()),
                "{value}"
            );
        }
        assert_eq!(
            auth.authorize(&headers(Some("Basic eA==")), Access::Read)
                .unwrap_err()
                .to_string(),
            "the Authorization header is not `Bearer <token>`"
        );
    }

    #[test]
    fn identify_names_the_token_and_its_role() {
        let auth = alice_and_ro();
        assert_eq!(
            auth.identify("s3cret").unwrap(),
            Identity {
                name: "alice".into(),
                role: Role::Write
            }
        );
        assert_eq!(auth.identify("look").unwrap().role, Role::Read);
        assert_eq!(
            auth.identify("nope").unwrap_err().to_string(),
            "the bearer token is not valid"
        );
        assert_eq!(auth.identify("").unwrap_err().code(), "unauthorized");
    }

    #[test]
    fn short_tokens_are_refused_with_the_minimum() {
        assert!(check_token_strength(&"x".repeat(16), "t").is_ok());
        let e = check_token_strength(" 123456789012345 ", "api.tokens alice").unwrap_err();
        assert!(
            e.starts_with("api.tokens alice: the token has 15 characters")
                && e.contains("at least 16"),
            "{e}"
        );
        assert!(check_token_strength("x", "t").is_err());
        // Characters, not bytes.
        assert!(check_token_strength(&"é".repeat(15), "t").is_err());
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(TOKEN_FILE), "short\n").unwrap();
        let e = ensure_token_file(dir.path()).unwrap_err().to_string();
        assert!(e.contains("the token has 5 characters"), "{e}");
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
