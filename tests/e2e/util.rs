//! Helpers shared by the end-to-end tests.

use std::io::Write;

use prost::Message;

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

/// `text` percent-encoded for a URL query value (every byte but RFC 3986's unreserved ones).
pub fn enc(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

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
    post_otlp(server, "/v1/traces", headers, body)
}

/// POSTs `body` to the OTLP/HTTP `path` (`/v1/traces`, `/v1/metrics`, `/v1/logs`) with the
/// given headers.
pub fn post_otlp(server: &Server, path: &str, headers: &[(&str, &str)], body: Vec<u8>) -> Resp {
    let client = reqwest::blocking::Client::builder()
        .timeout(std::time::Duration::from_secs(60))
        .build()
        .expect("client");
    let mut req = client
        .post(format!("http://{}{path}", server.http))
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

/// The value of the series `name{labels…}` in the `/metrics` text.
pub fn metric(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .find(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} {labels:?} in /metrics"))
}

/// One gRPC unary call of `path` with the message bytes `message` as sent (not checked: any
/// bytes) over a fresh HTTP/2 connection (the `h2` client); returns the `grpc-status` and the
/// `SETTINGS_MAX_CONCURRENT_STREAMS` the server advertised.
pub fn grpc_unary_raw(
    addr: std::net::SocketAddr,
    path: &str,
    message: &[u8],
) -> Result<(String, usize), String> {
    grpc_unary_frame(addr, path, message, false)
}

/// As [`grpc_unary_raw`], the message bytes sent as a compressed frame (`grpc-encoding: gzip`,
/// compressed flag 1): `message` is what the compressed frame holds, gzip or not.
pub fn grpc_unary_gzip(
    addr: std::net::SocketAddr,
    path: &str,
    message: &[u8],
) -> Result<(String, usize), String> {
    grpc_unary_frame(addr, path, message, true)
}

fn grpc_unary_frame(
    addr: std::net::SocketAddr,
    path: &str,
    message: &[u8],
    compressed: bool,
) -> Result<(String, usize), String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async move {
        let tcp = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let (client, conn) = h2::client::handshake(tcp)
            .await
            .map_err(|e| format!("handshake: {e}"))?;
        tokio::spawn(conn);
        let mut client = client.ready().await.map_err(|e| format!("ready: {e}"))?;
        let mut request = axum::http::Request::builder()
            .method("POST")
            .uri(format!("http://{addr}{path}"))
            .header("content-type", "application/grpc")
            .header("te", "trailers");
        if compressed {
            request = request.header("grpc-encoding", "gzip");
        }
        let request = request.body(()).map_err(|e| e.to_string())?;
        let (response, mut send) = client
            .send_request(request, false)
            .map_err(|e| format!("send: {e}"))?;
        let mut framed = vec![u8::from(compressed)];
        framed.extend_from_slice(&(message.len() as u32).to_be_bytes());
        framed.extend_from_slice(message);
        send.send_data(framed.into(), true)
            .map_err(|e| format!("data: {e}"))?;
        let response = tokio::time::timeout(std::time::Duration::from_secs(5), response)
            .await
            .map_err(|_| "no response within 5 s".to_string())?
            .map_err(|e| format!("response: {e}"))?;
        let advertised = client.current_max_send_streams();
        // A trailers-only response (a refusal) carries the status in its head.
        if let Some(status) = response.headers().get("grpc-status") {
            let status = status.to_str().unwrap_or("?").to_owned();
            return Ok((status, advertised));
        }
        let mut body = response.into_body();
        while let Some(chunk) = body.data().await {
            let chunk = chunk.map_err(|e| format!("body: {e}"))?;
            let _ = body.flow_control().release_capacity(chunk.len());
        }
        let trailers = body
            .trailers()
            .await
            .map_err(|e| format!("trailers: {e}"))?
            .ok_or("no trailers")?;
        let status = trailers
            .get("grpc-status")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("?")
            .to_owned();
        Ok((status, advertised))
    })
}

/// `google.rpc.Status`, the OTLP/HTTP error body.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RpcStatus {
    /// The gRPC code.
    #[prost(int32, tag = "1")]
    pub code: i32,
    /// The message.
    #[prost(string, tag = "2")]
    pub message: String,
}

/// The error body of an OTLP/HTTP refusal, decoded in the response's encoding (the request's:
/// protobuf, else JSON).
pub fn otlp_error(r: &Resp) -> RpcStatus {
    if r.content_type == "application/x-protobuf" {
        RpcStatus::decode(&r.body[..]).expect("a protobuf google.rpc.Status body")
    } else {
        let v = r.json();
        RpcStatus {
            code: v["code"]
                .as_i64()
                .and_then(|c| i32::try_from(c).ok())
                .unwrap_or(-1),
            message: v["message"].as_str().unwrap_or_default().to_owned(),
        }
    }
}
