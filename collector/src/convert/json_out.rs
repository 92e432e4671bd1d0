//! The JSON text of the `resource_attributes`, `attributes`, `events` and `links` columns:
//! attribute values and objects written straight into a `String`, with RFC 8259 string
//! escaping.
//!
//! Owns the JSON form of an `AnyValue` (bytes as lower-case hex, non-finite doubles as
//! strings). Does not own which keys are left out (the callers' `skip`).

use std::fmt::Write as _;

use crate::wire::{Kv, LinkView, Val};

/// Writes an AnyValue as JSON: strings, numbers, booleans, arrays, objects (kvlist), and bytes
/// as lower-case hex. It recurses once per level of nesting, which decoding bounds: the wire
/// reader reads [`crate::wire::MAX_DEPTH`] levels, prost [`crate::wire::MAX_ARRAY_DEPTH`], the
/// OTLP/JSON decoder about 40 ([`crate::json::RECURSION_MESSAGE`]); deeper is refused.
pub(super) fn write_json_value(out: &mut String, v: &Val<'_>) {
    match v {
        Val::Empty => out.push_str("null"),
        Val::Str(s) => write_json_str(out, s),
        Val::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Val::Int(i) => out.push_str(itoa::Buffer::new().format(*i)),
        Val::Double(d) => {
            if d.is_finite() {
                let _ = write!(out, "{d:?}");
            } else {
                write_json_str(out, &d.to_string());
            }
        }
        Val::Bytes(b) => write_json_str(out, &hex::encode(b)),
        Val::Array(a) => {
            out.push('[');
            for (i, item) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json_value(out, item);
            }
            out.push(']');
        }
        Val::Kvlist(kv) => write_json_object(out, kv, |_| false),
    }
}

pub(super) fn write_json_object(out: &mut String, attrs: &[Kv<'_>], skip: impl Fn(&str) -> bool) {
    out.push('{');
    let mut first = true;
    for kv in attrs {
        if skip(kv.key) {
            continue;
        }
        if !first {
            out.push(',');
        }
        first = false;
        write_json_str(out, kv.key);
        out.push(':');
        write_json_value(out, &kv.value);
    }
    out.push('}');
}

/// Writes span links as the `links` column holds them: a JSON array of `{"trace_id",
/// "span_id", "trace_state" (left out when empty), "attributes"}`, ids as lower-case hex of the
/// bytes sent.
pub(super) fn write_links(out: &mut String, links: &[LinkView<'_>]) {
    out.push('[');
    for (i, link) in links.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"trace_id\":");
        write_json_str(out, &hex::encode(link.trace_id));
        out.push_str(",\"span_id\":");
        write_json_str(out, &hex::encode(link.span_id));
        if !link.trace_state.is_empty() {
            out.push_str(",\"trace_state\":");
            write_json_str(out, link.trace_state);
        }
        out.push_str(",\"attributes\":");
        write_json_object(out, &link.attributes, |_| false);
        out.push('}');
    }
    out.push(']');
}

/// Writes `s` as a JSON string (RFC 8259 escaping: quote, backslash, control characters).
/// Text that needs no escape (nearly all) is copied whole.
pub(super) fn write_json_str(out: &mut String, s: &str) {
    out.push('"');
    if s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        write_escaped(out, s);
    } else {
        out.push_str(s);
    }
    out.push('"');
}

fn write_escaped(out: &mut String, s: &str) {
    let mut plain_from = 0;
    for (i, c) in s.char_indices() {
        let esc = match c {
            '"' => "\\\"",
            '\\' => "\\\\",
            '\n' => "\\n",
            '\r' => "\\r",
            '\t' => "\\t",
            '\u{8}' => "\\b",
            '\u{c}' => "\\f",
            c if (c as u32) < 0x20 => "",
            _ => continue,
        };
        out.push_str(&s[plain_from..i]);
        if esc.is_empty() {
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push_str(esc);
        }
        plain_from = i + c.len_utf8();
    }
    out.push_str(&s[plain_from..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_strings_escape_like_serde_json() {
        for s in [
            "plain",
            "quote \" and \\ back",
            "line\nbreak\ttab\r",
            "\u{1}\u{8}\u{c}\u{1f}\u{7f}",
            "ünï ☃ 🎉",
            "",
        ] {
            let mut out = String::new();
            write_json_str(&mut out, s);
            assert_eq!(out, serde_json::to_string(s).unwrap(), "{s:?}");
        }
    }
}
