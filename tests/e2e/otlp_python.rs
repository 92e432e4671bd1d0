//! The Python OpenTelemetry SDK from pip (`opentelemetry-sdk`, OTLP exporters over gRPC and
//! HTTP) exports spans; the store holds each exactly once with colour, decisions and parent.

use crate::util::*;

/// Runs the script `tests/python/{name}` with `args`; its standard output.
pub(crate) fn run_script(name: &str, args: &[&str]) -> String {
    let script = crate::support::workspace_root()
        .join("tests/python")
        .join(name);
    let out = std::process::Command::new("python3")
        .arg(script)
        .args(args)
        .output()
        .expect("python3 runs (pip install -r tests/requirements.txt)");
    assert!(
        out.status.success(),
        "{name} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn run_python(protocol: &str, endpoint: &str) -> Vec<serde_json::Value> {
    python_json_lines(
        "export_spans.py",
        &[
            "--protocol",
            protocol,
            "--endpoint",
            endpoint,
            "--traces",
            "15",
        ],
    )
}

fn check(s: &Server, expected: Vec<serde_json::Value>) {
    assert_eq!(expected.len(), 45);
    assert_eq!(count_all(s), expected.len() as i64);
    for e in expected {
        let rows = s.sql(&format!(
            "SELECT coalesce(parent_span_id, ''), service_name, color, color_rule, decisions FROM spans \
             WHERE trace_id = '{}' AND span_id = '{}'",
            e["trace_id"].as_str().unwrap(),
            e["span_id"].as_str().unwrap()
        ));
        assert_eq!(rows.len(), 1, "exactly once: {e}");
        let r = &rows[0];
        assert_eq!(r[0], e["parent_span_id"], "{e}");
        assert_eq!(r[1], e["service"], "{e}");
        assert_eq!(r[2], e["color"], "{e}");
        assert_eq!(r[3], serde_json::json!("host.name"), "{e}");
        let want = if e["decisions"].as_object().is_some_and(|o| o.is_empty()) {
            serde_json::Value::Null
        } else {
            e["decisions"].clone()
        };
        assert_eq!(r[4], want, "{e}");
    }
}

#[test]
fn python_grpc_exporter() {
    let dir = temp_dir();
    let s = Server::start(&dir.path().join("data"), &[]);
    let expected = run_python("grpc", &format!("http://{}", s.grpc));
    check(&s, expected);
}

#[test]
fn python_http_exporter() {
    let dir = temp_dir();
    let s = Server::start(&dir.path().join("data"), &[]);
    let expected = run_python("http", &format!("http://{}/v1/traces", s.http));
    check(&s, expected);
}
