//! Bad input: each gets its documented status and message, the server keeps serving, and the
//! valid requests sent around them are all stored.

use crate::util::*;

/// The error message, decoded in the response's encoding (the request's); a protobuf one
/// says INVALID_ARGUMENT.
fn error_message(r: &Resp) -> String {
    let st = otlp_error(r);
    if r.content_type == "application/x-protobuf" {
        assert_eq!(st.code, 3, "INVALID_ARGUMENT");
    }
    st.message
}

fn valid(i: usize) -> String {
    format!(
        r#"{{"resourceSpans":[{{"resource":{{"attributes":[{{"key":"service.name","value":{{"stringValue":"order"}}}}]}},
        "scopeSpans":[{{"spans":[{{"traceId":"{:032x}","spanId":"{:016x}","name":"ok","kind":2,
        "startTimeUnixNano":"1718000600000000000","endTimeUnixNano":"1718000600001000000"}}]}}]}}]}}"#,
        0xfeed_0000_u128 + i as u128,
        0xbeef_0000_u64 + i as u64
    )
}

fn nested(depth: usize) -> String {
    let mut v = String::from(r#"{"stringValue":"x"}"#);
    for _ in 0..depth {
        v = format!(r#"{{"arrayValue":{{"values":[{v}]}}}}"#);
    }
    format!(
        r#"{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{{"traceId":"0000000000000000000000000000d00d","spanId":"000000000000d00d","name":"deep",
        "attributes":[{{"key":"deep","value":{v}}}]}}]}}]}}]}}"#
    )
}

#[test]
fn bad_input_is_refused_with_its_status_and_costs_nothing_else() {
    let dir = temp_dir();
    let mut s = Server::start(&dir.path().join("data"), &[]);
    let json = [("content-type", "application/json")];
    let pb = [("content-type", "application/x-protobuf")];
    let mut sent_valid = 0;
    let mut send_valid = |s: &Server| {
        let r = post_json(s, &valid(sent_valid));
        assert_eq!(r.status, 200, "valid request {sent_valid}: {}", r.text());
        sent_valid += 1;
    };
    let truncated = {
        let mut b = crate::cases::case01_protobuf();
        b.truncate(b.len() - 7);
        b
    };
    let mut invalid_utf8 = valid(9999).into_bytes();
    let pos = invalid_utf8
        .windows(4)
        .position(|w| w == b"\"ok\"")
        .unwrap();
    invalid_utf8[pos + 1] = 0xff;
    let bomb = gzip(&vec![b' '; 200 * 1024 * 1024]);
    let rfc3339 = valid(9998).replace("\"1718000600000000000\"", "\"2024-06-10T06:13:20Z\"");
    let base64 = valid(9997).replacen(
        &format!("{:032x}", 0xfeed_0000_u128 + 9997),
        "fT8MmiseT1qMbQ4fKjtMXQ==",
        1,
    );
    let short_id = valid(9996).replacen(&format!("{:016x}", 0xbeef_0000_u64 + 9996), "abcd", 1);
    // (what, headers, body, status, a word the message must contain)
    type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, Vec<u8>, u16, &'a str);
    let cases: Vec<Case> = vec![
        (
            "truncated protobuf",
            pb.to_vec(),
            truncated,
            400,
            "protobuf",
        ),
        (
            "invalid JSON",
            json.to_vec(),
            b"{\"resourceSpans\": [".to_vec(),
            400,
            "JSON",
        ),
        (
            "wrong content type",
            vec![("content-type", "text/plain")],
            valid(9995).into_bytes(),
            415,
            "application/x-protobuf",
        ),
        ("empty JSON body", json.to_vec(), Vec::new(), 400, "empty"),
        (
            "base64 ids",
            json.to_vec(),
            base64.into_bytes(),
            400,
            "traceId",
        ),
        (
            "id of wrong length",
            json.to_vec(),
            short_id.into_bytes(),
            400,
            "spanId",
        ),
        (
            "gzip header lies",
            vec![json[0], ("content-encoding", "gzip")],
            valid(9994).into_bytes(),
            400,
            "gzip",
        ),
        (
            "gzip bomb",
            vec![json[0], ("content-encoding", "gzip")],
            bomb,
            413,
            "limit",
        ),
        (
            "100 MB body",
            json.to_vec(),
            vec![b' '; 100 * 1024 * 1024],
            413,
            "limit",
        ),
        ("invalid UTF-8", json.to_vec(), invalid_utf8, 400, "UTF-8"),
        (
            "AnyValue nested 10,000 deep",
            json.to_vec(),
            nested(10_000).into_bytes(),
            400,
            "recursion",
        ),
        (
            "RFC 3339 timestamp",
            json.to_vec(),
            rfc3339.into_bytes(),
            400,
            "startTimeUnixNano",
        ),
    ];
    for (what, headers, body, status, needle) in cases {
        send_valid(&s);
        let r = post_traces(&s, &headers, body);
        assert_eq!(r.status, status, "{what}: {}", r.text());
        let msg = error_message(&r);
        assert!(
            msg.to_lowercase().contains(&needle.to_lowercase()),
            "{what}: message {msg:?} should mention {needle:?}"
        );
        send_valid(&s);
    }
    // All-zero ids: partial success, the span rejected and counted, the request accepted.
    let zero = valid(9993).replacen(
        &format!("{:032x}", 0xfeed_0000_u128 + 9993),
        &"0".repeat(32),
        1,
    );
    let r = post_json(&s, &zero);
    assert_eq!(r.status, 200);
    assert_eq!(
        r.json()["partialSuccess"]["rejectedSpans"],
        "1",
        "{}",
        r.text()
    );
    assert!(
        r.json()["partialSuccess"]["errorMessage"]
            .as_str()
            .unwrap()
            .contains("trace_id")
    );
    // Valid, not bad: empty requests.
    for (headers, body) in [
        (&json[..], b"{}".to_vec()),
        (&json[..], b"{\"resourceSpans\": []}".to_vec()),
        (&pb[..], Vec::new()),
    ] {
        let r = post_traces(&s, headers, body);
        assert_eq!(r.status, 200);
        if headers == &json[..] {
            assert_eq!(r.text(), "{}");
        } else {
            assert!(r.body.is_empty());
        }
    }
    assert!(s.is_running(), "the server survived every bad request");
    assert_eq!(
        count_all(&s),
        sent_valid as i64,
        "every valid request stored, nothing else"
    );
    let metrics = s.metrics();
    assert!(
        metrics.contains("dyeline_receiver_spans_discarded_total{reason=\"invalid_trace_id\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("dyeline_receiver_requests_refused_total{reason=\"bad_data\"}"));
}
