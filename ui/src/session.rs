//! Sign-in, CSRF protection of the dashboard's forms, and where a sign-in may send the browser.
//!
//! - The API token given on `/login` is kept in the `dyeline_token` cookie: `HttpOnly`,
//!   `SameSite=Strict`, `Path=/` (no `Secure`, because `serve` listens on plain HTTP; put a
//!   TLS proxy in front to add it). The server's gate checks it like a bearer token on every
//!   page and `/live`; every write goes through the control API's token check with it, so the
//!   actor recorded is the token's name.
//! - Forms carry a signed double-submit token (OWASP): the `dyeline_csrf` cookie holds a random
//!   128-bit nonce, and the form's `csrf` field is HMAC-SHA256(server key, nonce, signed-in
//!   token). The key is random per process ([`CsrfKey::random`]: forms rendered before a restart
//!   are refused once, then the page is reloaded), so a cookie tossed in by a sibling site
//!   (same site, other origin) cannot be paired with a form value without the server, and a
//!   pair the attacker got for themselves does not hold for a victim signed in with another
//!   token. A request carrying two `dyeline_csrf` or two `dyeline_token` cookies (one tossed
//!   with another `Domain` or `Path`) is refused rather than one of them picked.
//! - `next` after sign-in is a local path only ([`local_path`]).

use std::borrow::Cow;

use axum::http::{HeaderMap, header};
use axum_extra::extract::cookie::{Cookie, CookieJar, SameSite};
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Cookie holding the API token.
pub const TOKEN_COOKIE: &str = "dyeline_token";
/// Cookie holding the CSRF nonce.
pub const CSRF_COOKIE: &str = "dyeline_csrf";

/// The longest `next` kept after sign-in; longer ones go to `/`.
pub const MAX_NEXT_BYTES: usize = 2048;

/// The server's key for the forms' CSRF tokens.
#[derive(Clone)]
pub struct CsrfKey([u8; 32]);

impl std::fmt::Debug for CsrfKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CsrfKey(<redacted>)")
    }
}

impl CsrfKey {
    /// A key from the OS random source.
    ///
    /// # Panics
    /// Without an OS random source (the process cannot make secrets at all then).
    pub fn random() -> Self {
        let mut k = [0u8; 32];
        getrandom::fill(&mut k).expect("an OS random source for the CSRF key");
        Self(k)
    }

    /// A fixed key (tests).
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }
}

fn cookie(name: &'static str, value: String) -> Cookie<'static> {
    Cookie::build((name, value))
        .http_only(true)
        .same_site(SameSite::Strict)
        .path("/")
        .build()
}

/// Every value of cookie `name` in the request's `Cookie` headers, in order.
pub fn cookie_values<'a>(headers: &'a HeaderMap, name: &str) -> Vec<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| {
            let (k, v) = pair.split_once('=')?;
            (k.trim() == name).then(|| v.trim())
        })
        .collect()
}

/// The request carried a cookie twice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DuplicateCookie(pub &'static str);

impl std::fmt::Display for DuplicateCookie {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the request carries two {} cookies (one may have been set by another site); \
             clear this site's cookies and sign in again",
            self.0
        )
    }
}

/// The one value of cookie `name`, percent-decoded as the cookie jar decodes it (`None` when
/// absent or empty).
///
/// # Errors
/// [`DuplicateCookie`] when the request carries it more than once.
pub fn unique_cookie<'a>(
    headers: &'a HeaderMap,
    name: &'static str,
) -> Result<Option<Cow<'a, str>>, DuplicateCookie> {
    match cookie_values(headers, name).as_slice() {
        [] => Ok(None),
        [""] => Ok(None),
        [v] => Ok(Some(
            percent_encoding::percent_decode_str(v).decode_utf8_lossy(),
        )),
        _ => Err(DuplicateCookie(name)),
    }
}

/// The CSRF nonce of this browser, creating (and setting) one when absent.
pub fn csrf(jar: CookieJar) -> (CookieJar, String) {
    if let Some(c) = jar.get(CSRF_COOKIE)
        && is_nonce(c.value())
    {
        let v = c.value().to_owned();
        return (jar, v);
    }
    let mut bytes = [0u8; 16];
    // getrandom fails only without an OS random source; fall back to the clock so the page
    // still renders (the form token is still signed with the server's key).
    if getrandom::fill(&mut bytes).is_err() {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        bytes = t.to_le_bytes();
    }
    let v = hex::encode(bytes);
    (jar.add(cookie(CSRF_COOKIE, v.clone())), v)
}

fn is_nonce(v: &str) -> bool {
    v.len() == 32 && v.bytes().all(|b| b.is_ascii_hexdigit())
}

fn mac(key: &CsrfKey, nonce: &str, token: Option<&str>) -> Hmac<Sha256> {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(&key.0).expect("HMAC takes any key length");
    // Length-prefixed parts: no two (nonce, token) pairs feed the same bytes.
    for part in [nonce, token.unwrap_or("")] {
        m.update(&(part.len() as u64).to_be_bytes());
        m.update(part.as_bytes());
    }
    m
}

/// The `csrf` field of a form for the browser holding `nonce` (its `dyeline_csrf` cookie),
/// signed in with `token` (its `dyeline_token` cookie, if any).
pub fn form_token(key: &CsrfKey, nonce: &str, token: Option<&str>) -> String {
    hex::encode(mac(key, nonce, token).finalize().into_bytes())
}

/// Why a form's CSRF check failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CsrfRefusal {
    /// Two `dyeline_csrf` or two `dyeline_token` cookies.
    Duplicate(DuplicateCookie),
    /// No nonce cookie, or a form value that is not its signature for this session.
    Mismatch,
}

impl std::fmt::Display for CsrfRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Duplicate(d) => d.fmt(f),
            Self::Mismatch => f.write_str(
                "the form's CSRF check failed (stale page or cross-site post); reload the page and try again",
            ),
        }
    }
}

/// Checks a form's `csrf` value against the request's one nonce cookie and one token cookie;
/// the comparison is constant-time.
///
/// # Errors
/// [`CsrfRefusal`].
pub fn csrf_check(key: &CsrfKey, headers: &HeaderMap, form_value: &str) -> Result<(), CsrfRefusal> {
    let nonce = unique_cookie(headers, CSRF_COOKIE).map_err(CsrfRefusal::Duplicate)?;
    let token = unique_cookie(headers, TOKEN_COOKIE).map_err(CsrfRefusal::Duplicate)?;
    let Some(nonce) = nonce.filter(|n| is_nonce(n)) else {
        return Err(CsrfRefusal::Mismatch);
    };
    let sent = hex::decode(form_value).map_err(|_| CsrfRefusal::Mismatch)?;
    mac(key, &nonce, token.as_deref())
        .verify_slice(&sent)
        .map_err(|_| CsrfRefusal::Mismatch)
}

/// The signed-in token, if any.
pub fn token(jar: &CookieJar) -> Option<String> {
    jar.get(TOKEN_COOKIE)
        .map(|c| c.value().to_owned())
        .filter(|t| !t.is_empty())
}

/// Stores `token` in the jar.
pub fn sign_in(jar: CookieJar, token: &str) -> CookieJar {
    jar.add(cookie(TOKEN_COOKIE, token.to_owned()))
}

/// Removes the token.
pub fn sign_out(jar: CookieJar) -> CookieJar {
    jar.remove(Cookie::build(TOKEN_COOKIE).path("/"))
}

/// The `Set-Cookie` value that removes the token cookie (for answers built without a jar).
pub fn clear_token_cookie() -> String {
    let mut c = Cookie::build((TOKEN_COOKIE, "")).path("/").build();
    c.make_removal();
    c.to_string()
}

/// Characters percent-encoded in a `next` path: spaces and everything beyond ASCII, so the
/// `Location` header holds visible ASCII only.
const NEXT_ESCAPED: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS.add(b' ');

/// `next` if it is a path on this site, else `/`: no open redirect, nothing unsafe in the
/// `Location` header.
///
/// Browsers remove tabs and line breaks anywhere in a URL and read `\` as `/`, so
/// `/\t/evil.example` (`/%09/evil.example` after the query is decoded) and `/\evil.example`
/// lead to `//evil.example`, another host. Refused: anything not starting with `/`, a start of
/// `//`, any control character or backslash, more than [`MAX_NEXT_BYTES`]. What is kept has
/// spaces and non-ASCII percent-encoded, so it is a valid header value as it is.
pub fn local_path(next: &str) -> String {
    let refused = !next.starts_with('/')
        || next.starts_with("//")
        || next.len() > MAX_NEXT_BYTES
        || next.chars().any(|c| c.is_control() || c == '\\');
    if refused {
        return "/".to_owned();
    }
    percent_encoding::utf8_percent_encode(next, NEXT_ESCAPED).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;
    use proptest::prelude::*;

    fn headers(cookies: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for c in cookies {
            h.append(header::COOKIE, HeaderValue::from_str(c).unwrap());
        }
        h
    }

    const NONCE: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn the_form_token_is_signed_for_the_nonce_and_the_session() {
        let key = CsrfKey::from_bytes([7; 32]);
        let v = form_token(&key, NONCE, Some("alice-token-0123456"));
        assert_eq!(v.len(), 64);
        let h = headers(&[&format!(
            "{CSRF_COOKIE}={NONCE}; {TOKEN_COOKIE}=alice-token-0123456"
        )]);
        assert_eq!(csrf_check(&key, &h, &v), Ok(()));
        // Another key (another server, or after a restart), nonce or session: refused.
        let other = CsrfKey::from_bytes([8; 32]);
        assert_eq!(csrf_check(&other, &h, &v), Err(CsrfRefusal::Mismatch));
        let h2 = headers(&[&format!("{CSRF_COOKIE}={}", "f".repeat(32))]);
        assert_eq!(csrf_check(&key, &h2, &v), Err(CsrfRefusal::Mismatch));
        // A pair an attacker got for themselves (not signed in) does not hold for a victim
        // signed in with a token.
        let attacker = form_token(&key, NONCE, None);
        assert_eq!(csrf_check(&key, &h, &attacker), Err(CsrfRefusal::Mismatch));
        // The old double submit (form value = cookie) no longer passes.
        assert_eq!(csrf_check(&key, &h, NONCE), Err(CsrfRefusal::Mismatch));
        assert_eq!(
            csrf_check(&key, &HeaderMap::new(), &v),
            Err(CsrfRefusal::Mismatch)
        );
        assert_eq!(csrf_check(&key, &h, "zz"), Err(CsrfRefusal::Mismatch));
    }

    #[test]
    fn duplicate_cookies_are_refused_whichever_comes_last() {
        let key = CsrfKey::from_bytes([7; 32]);
        let tossed = "ffffffffffffffffffffffffffffffff";
        let v = form_token(&key, tossed, None);
        for h in [
            headers(&[&format!("{CSRF_COOKIE}={NONCE}; {CSRF_COOKIE}={tossed}")]),
            headers(&[
                &format!("{CSRF_COOKIE}={NONCE}"),
                &format!("{CSRF_COOKIE}={tossed}"),
            ]),
        ] {
            assert_eq!(
                csrf_check(&key, &h, &v),
                Err(CsrfRefusal::Duplicate(DuplicateCookie(CSRF_COOKIE)))
            );
        }
        let h = headers(&[&format!(
            "{CSRF_COOKIE}={tossed}; {TOKEN_COOKIE}=a; {TOKEN_COOKIE}=b"
        )]);
        assert_eq!(
            csrf_check(&key, &h, &v),
            Err(CsrfRefusal::Duplicate(DuplicateCookie(TOKEN_COOKIE)))
        );
        assert_eq!(
            unique_cookie(&h, TOKEN_COOKIE),
            Err(DuplicateCookie(TOKEN_COOKIE))
        );
        assert_eq!(unique_cookie(&h, CSRF_COOKIE), Ok(Some(tossed.into())));
        assert_eq!(unique_cookie(&h, "other"), Ok(None));
        // Decoded as the jar decodes what it set (a token with `/`, `=` or `+`).
        let token = "abc/def+ghi=";
        let set = sign_in(CookieJar::new(), token)
            .get(TOKEN_COOKIE)
            .unwrap()
            .encoded()
            .to_string();
        assert_ne!(set, format!("{TOKEN_COOKIE}={token}"), "the jar encodes it");
        let h = headers(&[&set]);
        assert_eq!(unique_cookie(&h, TOKEN_COOKIE), Ok(Some(token.into())));
    }

    #[test]
    fn an_existing_nonce_is_kept_and_a_bad_one_replaced() {
        let (jar, v) = csrf(CookieJar::new());
        assert!(is_nonce(&v));
        let (_, again) = csrf(jar);
        assert_eq!(v, again);
        let bad = CookieJar::new().add(Cookie::new(CSRF_COOKIE, "x\"<"));
        let (_, fresh) = csrf(bad);
        assert!(is_nonce(&fresh));
    }

    #[test]
    fn redirects_stay_local() {
        for (next, to) in [
            ("/channels/trade", "/channels/trade"),
            (
                "/traces?app=order&min_duration_ms=5",
                "/traces?app=order&min_duration_ms=5",
            ),
            ("/traces?app=a b", "/traces?app=a%20b"),
            ("/café", "/caf%C3%A9"),
            ("//evil.example", "/"),
            ("https://evil.example", "/"),
            ("evil.example", "/"),
            ("", "/"),
            ("/\\evil", "/"),
            ("\\/evil", "/"),
            // `/%09/evil.example` as the query parser hands it over.
            ("/\t/evil.example", "/"),
            ("/\r\n/evil.example", "/"),
            ("/\n/evil.example", "/"),
            ("/ok\r\nSet-Cookie: x=1", "/"),
            ("/\u{7f}x", "/"),
            ("/\u{85}x", "/"),
        ] {
            assert_eq!(local_path(next), to, "{next:?}");
        }
        assert_eq!(local_path(&format!("/{}", "a".repeat(MAX_NEXT_BYTES))), "/");
    }

    proptest! {
        #[test]
        fn every_next_becomes_a_header_safe_local_path(next in "\\PC*|[/\\\\\t\r\n a-z%.:?#&=]{0,24}") {
            let out = local_path(&next);
            prop_assert!(HeaderValue::from_str(&out).is_ok(), "{out:?}");
            prop_assert!(out.bytes().all(|b| (0x21..=0x7e).contains(&b)), "{out:?}");
            prop_assert!(out.starts_with('/'));
            prop_assert!(!out.starts_with("//"));
            prop_assert!(!out.contains('\\'));
            // What a browser resolves it to stays on this host: with tabs and line breaks
            // removed and `\` read as `/`, it still does not start with `//`.
            let browser: String = out
                .chars()
                .filter(|c| !matches!(c, '\t' | '\r' | '\n'))
                .map(|c| if c == '\\' { '/' } else { c })
                .collect();
            prop_assert!(!browser.starts_with("//"));
        }

        #[test]
        fn plain_local_paths_are_kept(next in "/[a-z0-9][a-z0-9/_.?=&-]{0,40}") {
            prop_assert_eq!(local_path(&next), next);
        }
    }
}
