//! Helpers shared by the end-to-end tests.

use std::io::Write;

pub use crate::support::{EPHEMERAL_PORTS, Server, run_cli, run_cli_in, shared_dir};

/// Host names like `order-b1` / `stock-g1` (the cases' convention) through a user pattern
/// colour rule.
pub const PATTERN_CONFIG: &str = r#"
[[color_rules]]
kind = "pattern"
key = "host.name"
regex = '^[a-z.]+-(?P<color>[bg])\d+$'
map = { b = "blue", g = "green" }
"#;

/// A fresh temporary data directory.
pub fn temp_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("dyeline-e2e-")
        .tempdir()
        .expect("tempdir")
}

/// A response: status, content type, body.
pub struct Resp {
    pub status: u16,
    pub content_type: String,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// POSTs `body` to `/v1/traces` with the given headers.
pub fn post_traces(server: &Server, headers: &[(&str, &str)], body: Vec<u8>) -> Resp {
    let client = reqwest::blocking::Client::builder()
        .timeout(std::time::Duration::from_secs(60))
        .build()
        .expect("client");
    let mut req = client
        .post(format!("http://{}/v1/traces", server.http))
        .body(body);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().expect("send");
    Resp {
        status: resp.status().as_u16(),
        content_type: resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned(),
        body: resp.bytes().expect("body").to_vec(),
    }
}

/// POSTs OTLP/JSON text.
pub fn post_json(server: &Server, json: &str) -> Resp {
    post_traces(
        server,
        &[("content-type", "application/json")],
        json.as_bytes().to_vec(),
    )
}

/// gzip of `data`.
pub fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(data).expect("gzip");
    enc.finish().expect("gzip")
}

/// A single-valued SQL query result.
pub fn scalar(server: &Server, sql: &str) -> serde_json::Value {
    let rows = server.sql(sql);
    assert_eq!(rows.len(), 1, "{sql}: {rows:?}");
    rows[0][0].clone()
}

/// Span count of a trace.
pub fn count_trace(server: &Server, trace_id: &str) -> i64 {
    scalar(
        server,
        &format!("SELECT count(*) FROM spans WHERE trace_id = '{trace_id}'"),
    )
    .as_i64()
    .expect("count")
}

/// All spans rows count.
pub fn count_all(server: &Server) -> i64 {
    scalar(server, "SELECT count(*) FROM spans")
        .as_i64()
        .expect("count")
}

/// Runs the Python script `tests/python/<script>` with `args` (the real OpenTelemetry SDK,
/// `pip install -r tests/requirements.txt`); its stdout, one JSON object per line.
pub fn python_json_lines(script: &str, args: &[&str]) -> Vec<serde_json::Value> {
    crate::otlp_python::run_script(script, args)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect()
}
