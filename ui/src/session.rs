//! Sign-in and CSRF protection for the dashboard's forms.
//!
//! - The API token given on `/login` is kept in the `dyeline_token` cookie: `HttpOnly`,
//!   `SameSite=Strict`, `Path=/` (no `Secure`, because `serve` listens on plain HTTP; put a
//!   TLS proxy in front to add it). Every write goes through the control API's token check
//!   with it, so the actor recorded is the token's name.
//! - Every form carries a `csrf` field equal to the `dyeline_csrf` cookie (random, 128 bits,
//!   `HttpOnly`, `SameSite=Strict`): a double-submit check, compared in constant time. A
//!   cross-site page can neither read the cookie nor make the browser send it.

use axum_extra::extract::cookie::{Cookie, CookieJar, SameSite};
use subtle::ConstantTimeEq;

/// Cookie holding the API token.
pub const TOKEN_COOKIE: &str = "dyeline_token";
/// Cookie holding the CSRF secret.
pub const CSRF_COOKIE: &str = "dyeline_csrf";

fn cookie(name: &'static str, value: String) -> Cookie<'static> {
    Cookie::build((name, value))
        .http_only(true)
        .same_site(SameSite::Strict)
        .path("/")
        .build()
}

/// The CSRF secret of this browser, creating (and setting) one when absent.
pub fn csrf(jar: CookieJar) -> (CookieJar, String) {
    if let Some(c) = jar.get(CSRF_COOKIE)
        && c.value().len() == 32
    {
        let v = c.value().to_owned();
        return (jar, v);
    }
    let mut bytes = [0u8; 16];
    // getrandom fails only without an OS random source; fall back to the clock so the
    // page still renders (the check then still needs the cookie, which a cross-site
    // request cannot send).
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

/// True when the form's `csrf` value matches the cookie.
pub fn csrf_ok(jar: &CookieJar, form_value: &str) -> bool {
    match jar.get(CSRF_COOKIE) {
        Some(c) if c.value().len() == 32 => {
            c.value().as_bytes().ct_eq(form_value.as_bytes()).into()
        }
        _ => false,
    }
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

/// `next` if it is a local path (`/…`, not `//…`), else `/`: no open redirect.
pub fn local_path(next: &str) -> String {
    if next.starts_with('/') && !next.starts_with("//") && !next.contains('\\') {
        next.to_owned()
    } else {
        "/".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csrf_matches_only_its_cookie() {
        let (jar, v) = csrf(CookieJar::new());
        assert_eq!(v.len(), 32);
        assert!(csrf_ok(&jar, &v));
        assert!(!csrf_ok(&jar, "0".repeat(32).as_str()));
        assert!(!csrf_ok(&CookieJar::new(), &v));
        let (jar2, v2) = csrf(jar);
        assert_eq!(v, v2, "an existing secret is kept");
        assert!(csrf_ok(&jar2, &v));
    }

    #[test]
    fn redirects_stay_local() {
        assert_eq!(local_path("/channels/trade"), "/channels/trade");
        assert_eq!(local_path("//evil.example"), "/");
        assert_eq!(local_path("https://evil.example"), "/");
        assert_eq!(local_path("/\\evil"), "/");
    }
}
