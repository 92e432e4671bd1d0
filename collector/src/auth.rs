//! Who may export (`[otlp] tokens`, `DYELINE_OTLP_TOKEN`): the bearer tokens both receivers
//! accept. The spans they take steer releases (an error spike on one colour freezes a ratio), so
//! once a token is configured every export must carry one in `Authorization: Bearer <token>`
//! (the gRPC metadata key `authorization` is the same header). The check reads the request
//! head only: a refused export's body is never read. A refusal is HTTP 401 with
//! `WWW-Authenticate: Bearer` or gRPC UNAUTHENTICATED, not retryable, counted as
//! `dyeline_receiver_requests_refused_total{reason="unauthenticated"}` (metrics and logs: `dyeline_receiver_presence_requests_refused_total`). Tokens are kept as SHA-256
//! digests and compared in constant time.

use http::HeaderMap;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::error::IngestError;

/// The accepted tokens; none: exports need no token.
#[derive(Clone, Default)]
pub struct OtlpAuth {
    digests: Vec<[u8; 32]>,
}

impl std::fmt::Debug for OtlpAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtlpAuth")
            .field("tokens", &self.digests.len())
            .finish()
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl OtlpAuth {
    /// Accepts exactly `tokens` (none: every export).
    pub fn new<I, S>(tokens: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Self {
            digests: tokens.into_iter().map(|t| digest(t.as_ref())).collect(),
        }
    }

    /// Whether exports need a token.
    pub fn required(&self) -> bool {
        !self.digests.is_empty()
    }

    /// `Ok` when `headers` may export.
    ///
    /// # Errors
    /// [`IngestError::Unauthenticated`]: no `Authorization: Bearer` header, or a token that is
    /// not configured.
    pub fn check(&self, headers: &HeaderMap) -> Result<(), IngestError> {
        if self.digests.is_empty() {
            return Ok(());
        }
        let Some(value) = headers.get(http::header::AUTHORIZATION) else {
            return Err(IngestError::Unauthenticated(
                "no OTLP token: send `Authorization: Bearer <token>` with a token of [otlp] tokens \
                 (OTEL_EXPORTER_OTLP_HEADERS=\"Authorization=Bearer%20<token>\")"
                    .into(),
            ));
        };
        let Some(token) = value
            .to_str()
            .ok()
            .and_then(dyeline_model::bearer::parse_bearer)
        else {
            return Err(IngestError::Unauthenticated(
                "the Authorization header is not `Bearer <token>`".into(),
            ));
        };
        let given = digest(token);
        // Every configured digest is compared, so the time does not tell which one matched.
        let matched = self
            .digests
            .iter()
            .fold(subtle::Choice::from(0), |acc, d| acc | d.ct_eq(&given));
        if bool::from(matched) {
            Ok(())
        } else {
            Err(IngestError::Unauthenticated(
                "the OTLP token is not one of [otlp] tokens".into(),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn with(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(http::header::AUTHORIZATION, value.parse().unwrap());
        h
    }

    #[test]
    fn a_configured_token_passes_and_anything_else_is_unauthenticated() {
        let auth = OtlpAuth::new(["first-token", "second-token"]);
        assert!(auth.required());
        assert!(auth.check(&with("Bearer first-token")).is_ok());
        assert!(auth.check(&with("bearer second-token")).is_ok());
        assert!(auth.check(&with("BEARER  second-token ")).is_ok());
        for bad in [
            "Bearer third",
            "Basic Zmlyc3QtdG9rZW4=",
            "first-token",
            "Bearer ",
        ] {
            let e = auth.check(&with(bad)).unwrap_err();
            assert_eq!(e.reason(), "unauthenticated", "{bad}");
            assert_eq!(e.http_status().as_u16(), 401);
        }
        let e = auth.check(&HeaderMap::new()).unwrap_err();
        assert!(e.to_string().contains("no OTLP token"), "{e}");
    }

    #[test]
    fn without_tokens_every_export_passes() {
        let auth = OtlpAuth::new(Vec::<String>::new());
        assert!(!auth.required());
        assert!(auth.check(&HeaderMap::new()).is_ok());
        assert!(auth.check(&with("Bearer anything")).is_ok());
    }

    proptest! {
        #[test]
        fn only_the_token_itself_passes(token in "[!-~]{1,40}", other in "[!-~]{1,40}") {
            let auth = OtlpAuth::new([token.as_str()]);
            let good = with(&format!("Bearer {token}"));
            let bad = with(&format!("Bearer {other}"));
            prop_assert!(auth.check(&good).is_ok());
            prop_assert_eq!(auth.check(&bad).is_ok(), other == token);
        }
    }
}
