//! Secure OTLP (issue 28, item 5): both receivers over TLS with a certificate from a
//! self-signed CA (made by the `openssl` CLI) and a bearer token. The real Python SDK
//! exporters (gRPC and HTTP, configured by the standard `OTEL_EXPORTER_OTLP_*` variables) and
//! the Rust `opentelemetry-otlp` HTTP exporter deliver with the CA and the token; with another
//! token every export fails and nothing is stored; without a token an export is refused from
//! its head (the server answers 401 before the body it announced has arrived). A certificate
//! renewed on disk is served to the next connection without a restart.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{Server, workspace_root};
use crate::util::{count_all, metric, temp_dir};

const TOKEN: &str = "otlp-token-0123456789abcdef0123456789";

/// Runs `openssl` with `args` in `dir`.
fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("openssl runs (apt-get install openssl)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA (`ca.pem`) and a server certificate it signed for 127.0.0.1 and localhost
/// (`{name}.pem`, `{name}.key`), in `dir`.
fn certificates(dir: &Path, name: &str) {
    if !dir.join("ca.pem").exists() {
        openssl(
            dir,
            &[
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem",
                "-days",
                "2",
                "-subj",
                "/CN=dyeline test CA",
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
            ],
        );
    }
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n\
         keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.csr"),
            "-subj",
            &format!("/CN={name}"),
        ],
    );
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            &format!("{name}.pem"),
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
        ],
    );
}

/// A server with TLS and the token on both receivers.
fn secure_server(dir: &Path) -> Server {
    certificates(dir, "server");
    let cfg = dir.join("dyeline.toml");
    std::fs::write(
        &cfg,
        format!(
            "[otlp]\ntokens = [\"{TOKEN}\"]\n[otlp.tls]\ncert = \"{}\"\nkey = \"{}\"\n\
             reload_interval = \"1s\"\n",
            dir.join("live.pem").display(),
            dir.join("live.key").display()
        ),
    )
    .unwrap();
    std::fs::copy(dir.join("server.pem"), dir.join("live.pem")).unwrap();
    std::fs::copy(dir.join("server.key"), dir.join("live.key")).unwrap();
    Server::start_with(&dir.join("data"), &[], &["--config", cfg.to_str().unwrap()])
}

/// The Python exporter of `protocol` sending 3 traces to `endpoint` with `token` (none: no
/// header) and the CA: each export's result and the trace ids.
fn python(
    protocol: &str,
    endpoint: &str,
    ca: &Path,
    token: Option<&str>,
) -> (Vec<String>, Vec<String>) {
    let mut cmd = Command::new("python3");
    cmd.arg(workspace_root().join("tests/python/export_tls.py"))
        .args(["--protocol", protocol, "--endpoint", endpoint])
        .env("OTEL_EXPORTER_OTLP_CERTIFICATE", ca)
        .env_remove("OTEL_EXPORTER_OTLP_HEADERS")
        // The HTTP exporter sets the CA on its `requests` session, and `requests` lets
        // REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE (set on some machines, this CI's among them)
        // override a session's CA (psf/requests#3829): a user with those set sees the same.
        .env_remove("REQUESTS_CA_BUNDLE")
        .env_remove("CURL_CA_BUNDLE");
    if let Some(t) = token {
        cmd.env(
            "OTEL_EXPORTER_OTLP_HEADERS",
            format!("authorization=Bearer%20{t}"),
        );
    }
    let out = cmd.output().expect("python3 runs");
    assert!(
        out.status.success(),
        "export_tls.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let strings = |k: &str| -> Vec<String> {
        v[k].as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_str().unwrap().to_owned())
            .collect()
    };
    (strings("results"), strings("traces"))
}

/// The trace ids the store holds.
fn stored(s: &Server) -> Vec<String> {
    s.sql("SELECT DISTINCT trace_id FROM spans ORDER BY trace_id")
        .iter()
        .map(|r| r[0].as_str().unwrap().to_owned())
        .collect()
}

/// The SHA-256 fingerprint (hex, `AA:BB:…`) of the certificate the server at `addr` serves,
/// by `openssl s_client`.
fn served_fingerprint(dir: &Path, addr: std::net::SocketAddr) -> String {
    let out = Command::new("sh")
        .current_dir(dir)
        .arg("-c")
        .arg(format!(
            "openssl s_client -connect {addr} -servername localhost -CAfile ca.pem </dev/null \
             2>/dev/null | openssl x509 -noout -fingerprint -sha256"
        ))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn fingerprint(dir: &Path, pem: &str) -> String {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(["x509", "-noout", "-fingerprint", "-sha256", "-in", pem])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn python_exporters_deliver_over_tls_with_the_token_and_nothing_without_it() {
    let dir = temp_dir();
    let s = secure_server(dir.path());
    let ca: PathBuf = dir.path().join("ca.pem");
    let grpc = format!("https://127.0.0.1:{}", s.grpc.port());
    let http = format!("https://127.0.0.1:{}/v1/traces", s.http.port());

    // With the CA and the token: every export succeeds and every trace is stored.
    let mut sent = Vec::new();
    for (protocol, endpoint) in [("grpc", &grpc), ("http", &http)] {
        let (results, traces) = python(protocol, endpoint, &ca, Some(TOKEN));
        assert_eq!(results, ["SUCCESS"; 3], "{protocol}");
        sent.extend(traces);
    }
    sent.sort();
    assert_eq!(stored(&s), sent);

    // Another token, or none: every export fails, nothing more is stored, each is counted.
    for (protocol, endpoint) in [("grpc", &grpc), ("http", &http)] {
        for token in [Some("another-token-0123456789abcdef0123"), None] {
            let (results, _) = python(protocol, endpoint, &ca, token);
            assert_eq!(results, ["FAILURE"; 3], "{protocol} {token:?}");
        }
    }
    assert_eq!(stored(&s), sent);
    let m = s.metrics();
    assert_eq!(
        metric(
            &m,
            "dyeline_receiver_requests_refused_total",
            &[("reason", "unauthenticated")]
        ),
        12.0
    );
}

/// An export without the token announcing a 1 MB body (under the size limit) gets its 401 at
/// once: the server answers from the head, without waiting for (or reading) the body.
#[test]
fn a_refused_export_is_answered_before_its_body_is_sent() {
    let dir = temp_dir();
    let s = secure_server(dir.path());
    let addr = s.http;
    // TLS by openssl s_client (-quiet: the bytes of the request are stdin, the answer stdout).
    let mut child = Command::new("openssl")
        .current_dir(dir.path())
        .args([
            "s_client",
            "-quiet",
            "-connect",
            &addr.to_string(),
            "-CAfile",
            "ca.pem",
            "-verify_return_error",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let mut stdin = child.stdin.take().unwrap();
    write!(
        stdin,
        "POST /v1/traces HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/x-protobuf\r\n\
         content-length: 1000000\r\n\r\n"
    )
    .unwrap();
    stdin.flush().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut head = [0u8; 12];
    stdout.read_exact(&mut head).unwrap();
    let elapsed = started.elapsed();
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(&head, b"HTTP/1.1 401");
    // The body's request_read_timeout is 10 s by default: an answer after the body would
    // come only then.
    assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
    assert_eq!(count_all(&s), 0);
}

/// The Rust SDK's HTTP exporter with a client trusting the CA and the token as a header.
#[test]
fn the_rust_exporter_delivers_over_tls_with_the_token() {
    use opentelemetry::trace::{Tracer, TracerProvider as _};
    use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
    let dir = temp_dir();
    let s = secure_server(dir.path());
    let ca = std::fs::read(dir.path().join("ca.pem")).unwrap();
    let client = reqwest::blocking::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&ca).unwrap())
        .build()
        .unwrap();
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_http_client(client)
        .with_headers(HashMap::from([(
            "authorization".to_owned(),
            format!("Bearer {TOKEN}"),
        )]))
        .with_endpoint(format!("https://127.0.0.1:{}/v1/traces", s.http.port()))
        .build()
        .unwrap();
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_simple_exporter(exporter)
        .with_resource(
            opentelemetry_sdk::Resource::builder_empty()
                .with_service_name("order")
                .with_attribute(opentelemetry::KeyValue::new("host.name", "order-green-1"))
                .build(),
        )
        .build();
    let tracer = provider.tracer("dyeline-e2e");
    for i in 0..4 {
        tracer.in_span(format!("GET /order/{i}"), |_| {});
    }
    provider.shutdown().unwrap();
    let colors = s.sql("SELECT color, count(*) FROM spans GROUP BY color");
    assert_eq!(colors.len(), 1, "{colors:?}");
    assert_eq!(colors[0][0], "green");
    assert_eq!(colors[0][1], 4);
}

/// A certificate renewed on disk is served to the next connection (no restart); a broken
/// file is refused and the last good certificate kept, both counted.
#[test]
fn a_renewed_certificate_is_served_without_a_restart() {
    let dir = temp_dir();
    let s = secure_server(dir.path());
    let first = fingerprint(dir.path(), "server.pem");
    assert_eq!(served_fingerprint(dir.path(), s.http), first);
    certificates(dir.path(), "renewed");
    let renewed = fingerprint(dir.path(), "renewed.pem");
    assert_ne!(renewed, first);
    // The key first, then the certificate: a check between the two sees a mismatched pair
    // (refused, the old one kept) and the next one the new pair.
    std::fs::copy(dir.path().join("renewed.key"), dir.path().join("live.key")).unwrap();
    std::fs::copy(dir.path().join("renewed.pem"), dir.path().join("live.pem")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while served_fingerprint(dir.path(), s.http) != renewed && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(300));
    }
    assert_eq!(served_fingerprint(dir.path(), s.http), renewed);
    assert_eq!(served_fingerprint(dir.path(), s.grpc), renewed);
    let m = s.metrics();
    for listener in ["otlp_grpc", "otlp_http"] {
        assert!(
            metric(
                &m,
                "dyeline_listener_tls_reloads_total",
                &[("listener", listener), ("outcome", "ok")]
            ) >= 1.0,
            "{listener}"
        );
    }
    // A broken certificate: refused, the renewed one still served.
    std::fs::write(
        dir.path().join("live.pem"),
        "-----BEGIN CERTIFICATE-----\nbroken\n",
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let failed = |m: &str| {
        metric(
            m,
            "dyeline_listener_tls_reloads_total",
            &[("listener", "otlp_http"), ("outcome", "failed")],
        )
    };
    let before = failed(&m);
    while failed(&s.metrics()) <= before && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(300));
    }
    assert!(failed(&s.metrics()) > before);
    assert_eq!(served_fingerprint(dir.path(), s.http), renewed);
}

/// A plain server with `body` appended to its config.
fn server_with(dir: &Path, body: &str) -> Server {
    let cfg = dir.join("dyeline.toml");
    std::fs::write(&cfg, body).unwrap();
    Server::start_with(&dir.join("data"), &[], &["--config", cfg.to_str().unwrap()])
}

/// An empty OTLP/JSON export.
const EMPTY: &str = r#"{"resourceSpans":[]}"#;

/// CORS (`[otlp.cors]`): a browser's preflight from an allowed origin is answered for POST with
/// the headers it asks for, and the export's answer names the origin; another origin gets no
/// CORS header at all.
#[test]
fn allowed_browser_origins_get_cors_and_others_none() {
    let dir = temp_dir();
    let s = server_with(
        dir.path(),
        "[otlp.cors]\nallowed_origins = [\"https://shop.example\"]\n",
    );
    let c = reqwest::blocking::Client::new();
    let url = format!("http://{}/v1/traces", s.http);
    let preflight = |origin: &str| {
        c.request(reqwest::Method::OPTIONS, &url)
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "content-type,authorization",
            )
            .send()
            .unwrap()
    };
    let ok = preflight("https://shop.example");
    assert!(ok.status().is_success(), "{}", ok.status());
    let h = ok.headers();
    assert_eq!(h["access-control-allow-origin"], "https://shop.example");
    assert!(
        h["access-control-allow-methods"]
            .to_str()
            .unwrap()
            .contains("POST")
    );
    assert_eq!(
        h["access-control-allow-headers"],
        "content-type,authorization"
    );
    let other = preflight("https://evil.example");
    assert!(other.headers().get("access-control-allow-origin").is_none());
    let export = |origin: &str| {
        c.post(&url)
            .header("origin", origin)
            .header("content-type", "application/json")
            .body(EMPTY)
            .send()
            .unwrap()
    };
    let r = export("https://shop.example");
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers()["access-control-allow-origin"],
        "https://shop.example"
    );
    let r = export("https://evil.example");
    assert!(r.headers().get("access-control-allow-origin").is_none());
}

/// `[otlp.rate_limit]`: a source past its burst gets 429 with Retry-After on HTTP and
/// UNAVAILABLE with a retry delay on gRPC (the two receivers share its bucket), counted;
/// another source (127.0.0.2) is not slowed.
#[test]
fn a_source_past_its_rate_is_throttled_and_others_are_not() {
    let dir = temp_dir();
    let s = server_with(
        dir.path(),
        "[otlp.rate_limit]\nrequests_per_second_per_source = 1\nburst = 3\n",
    );
    let url = format!("http://{}/v1/traces", s.http);
    let client = |from: &str| {
        reqwest::blocking::Client::builder()
            .local_address(from.parse::<std::net::IpAddr>().unwrap())
            .build()
            .unwrap()
    };
    let post = |c: &reqwest::blocking::Client| {
        c.post(&url)
            .header("content-type", "application/json")
            .body(EMPTY)
            .send()
            .unwrap()
    };
    let one = client("127.0.0.1");
    let statuses: Vec<u16> = (0..3).map(|_| post(&one).status().as_u16()).collect();
    assert_eq!(statuses, [200, 200, 200]);
    let throttled = post(&one);
    assert_eq!(throttled.status(), 429);
    assert!(throttled.headers().contains_key("retry-after"));
    let body: Value = throttled.json().unwrap();
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("requests_per_second_per_source"),
        "{body}"
    );
    // gRPC from the same address shares the bucket: UNAVAILABLE.
    let (status, _) = crate::util::grpc_unary_raw(
        s.grpc,
        "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
        &[],
    )
    .unwrap();
    assert_eq!(status, "14", "gRPC from the throttled source");
    let two = client("127.0.0.2");
    assert_eq!(post(&two).status(), 200, "another source");
    let m = s.metrics();
    assert!(
        metric(
            &m,
            "dyeline_receiver_requests_refused_total",
            &[("reason", "rate_limited")]
        ) >= 2.0
    );
}
