//! The `Authorization: Bearer <token>` header value, read one way by every credential check
//! (the API's token gate and the OTLP receivers' tokens).

/// The token of an `Authorization` header value: `Some(token)` for `Bearer <token>` with the
/// scheme in any case and one or more spaces before the token (RFC 9110 §11.1: auth schemes
/// are case-insensitive; §11.4: `1*SP`), `None` for any other scheme or shape.
pub fn parse_bearer(value: &str) -> Option<&str> {
    let (scheme, rest) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = rest.trim_start_matches(' ').trim_end();
    (!token.is_empty()).then_some(token)
}
