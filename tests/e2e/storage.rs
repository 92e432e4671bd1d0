//! Shared storage (issue 26), first slice: `dyeline storage check` against a real SeaweedFS
//! and a real PostgreSQL (the storage crate's testkit, also for the later upload tests), a
//! down catalog, refused settings, and `serve` ingesting while its catalog is down. No
//! message or output may hold the catalog's password.

use std::process::Command;

use dyeline_storage::testkit::{free_ports, postgres::Postgres, seaweed::Seaweed};

use crate::support::{Server, dyeline_bin};
use crate::util::*;

const PASSWORD: &str = "hunter2-e2e";

/// Runs `dyeline storage check --data-dir DIR` with `env`: (success, stdout, stderr).
fn storage_check(data_dir: &std::path::Path, env: &[(&str, String)]) -> (bool, String, String) {
    let mut cmd = Command::new(dyeline_bin());
    cmd.args(["storage", "check", "--data-dir"])
        .arg(data_dir)
        .env("DYELINE_LOG", "warn");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run dyeline storage check");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn storage_check_passes_against_seaweedfs_and_postgresql() {
    let weed = Seaweed::start();
    let pg = Postgres::start();
    let dir = temp_dir();
    let data = dir.path().join("data");
    let mut env = weed.aws_env();
    env.push((
        "DYELINE_STORAGE__OBJECT_STORE_URL",
        "s3://dyeline/e2e/spans".into(),
    ));
    env.push(("DYELINE_CATALOG__POSTGRES_URL", pg.url(PASSWORD)));
    let (ok, out, err) = storage_check(&data, &env);
    assert!(ok, "stdout: {out}\nstderr: {err}");
    let node = std::fs::read_to_string(data.join("node_id")).expect("the derived node id is kept");
    let expected = format!(
        "object store: s3://dyeline/e2e/spans\n\
         self-test: ok (a second conditional create is refused)\n\
         catalog: 127.0.0.1:{} database postgres\n\
         schema version: 7\n\
         node id: {}\n\
         owner epoch: none (not claimed yet)\n",
        pg.port(),
        node.trim()
    );
    assert_eq!(out, expected);
    assert!(
        !out.contains(PASSWORD) && !err.contains(PASSWORD),
        "{out}{err}"
    );

    // A configured node id wins; a second check finds the schema as it left it.
    env.push(("DYELINE_CLUSTER__NODE_ID", "ingest-7".into()));
    let (ok, out, err) = storage_check(&data, &env);
    assert!(ok, "{err}");
    assert!(
        out.contains("node id: ingest-7\n") && out.contains("schema version: 7\n"),
        "{out}"
    );
}

#[test]
fn storage_check_passes_on_a_local_directory_and_fails_on_a_down_catalog() {
    let dir = temp_dir();
    let objects = dir.path().join("objects");
    std::fs::create_dir_all(&objects).unwrap();
    // Nothing listens on this port: the catalog is down.
    let port = free_ports(1)[0];
    let env = [
        (
            "DYELINE_STORAGE__OBJECT_STORE_URL",
            format!("file://{}", objects.display()),
        ),
        (
            "DYELINE_CATALOG__POSTGRES_URL",
            format!("postgres://dyeline:{PASSWORD}@127.0.0.1:{port}/catalog"),
        ),
        ("DYELINE_CLUSTER__NODE_ID", "n1".into()),
    ];
    let (ok, out, err) = storage_check(&dir.path().join("data"), &env);
    assert!(!ok, "a down catalog passed: {out}");
    assert!(
        err.contains(&format!(
            "catalog postgres://dyeline@127.0.0.1:{port}/catalog: cannot connect"
        )),
        "{err}"
    );
    // The cause, not the pool's "timed out".
    assert!(err.contains("refused"), "{err}");
    assert!(
        !out.contains(PASSWORD) && !err.contains(PASSWORD),
        "{out}{err}"
    );
    // The self-test ran first, passed, and left nothing behind.
    assert_eq!(
        std::fs::read_dir(&objects)
            .unwrap()
            .flatten()
            .filter(|e| e.path().is_file())
            .count(),
        0
    );
    let probes = objects.join("_dyeline/probe");
    assert!(!probes.exists() || std::fs::read_dir(&probes).unwrap().next().is_none());
}

#[test]
fn bad_storage_settings_are_refused_naming_the_key() {
    let dir = temp_dir();
    for (env, key) in [
        (
            vec![
                (
                    "DYELINE_STORAGE__OBJECT_STORE_URL",
                    "s3:///no-bucket".to_owned(),
                ),
                (
                    "DYELINE_CATALOG__POSTGRES_URL",
                    format!("postgres://u:{PASSWORD}@h/d"),
                ),
            ],
            "[storage] object_store_url: no bucket",
        ),
        (
            vec![
                ("DYELINE_STORAGE__OBJECT_STORE_URL", "s3://b/p".to_owned()),
                (
                    "DYELINE_CATALOG__POSTGRES_URL",
                    format!("mysql://u:{PASSWORD}@h/d"),
                ),
            ],
            "[catalog] postgres_url: scheme mysql: is not PostgreSQL",
        ),
        (
            vec![(
                "DYELINE_CATALOG__POSTGRES_URL",
                format!("postgres://u:{PASSWORD}@h/d"),
            )],
            "[storage] object_store_url: not set",
        ),
        (
            vec![("DYELINE_CLUSTER__NODE_ID", "Bad_Id".to_owned())],
            "[cluster] node_id",
        ),
        (vec![], "nothing to check: shared storage is off"),
    ] {
        let (ok, out, err) = storage_check(&dir.path().join("data"), &env);
        assert!(!ok, "{env:?} passed: {out}");
        assert!(err.contains(key), "{env:?}: {err}");
        assert!(!err.contains(PASSWORD), "{err}");
    }
}

/// The catalog down at start pauses nothing but uploads: the server serves and stores spans
/// while its start check retries, and the check passes (the schema appears) once PostgreSQL
/// is back.
#[test]
fn serve_ingests_while_its_catalog_is_down_and_checks_it_once_back() {
    let pg = Postgres::start();
    pg.crash();
    let dir = temp_dir();
    let objects = dir.path().join("objects");
    std::fs::create_dir_all(&objects).unwrap();
    let url = format!("file://{}", objects.display());
    let pg_url = pg.url(PASSWORD);
    let server = Server::start(
        &dir.path().join("data"),
        &[
            ("DYELINE_STORAGE__OBJECT_STORE_URL", url.as_str()),
            ("DYELINE_CATALOG__POSTGRES_URL", pg_url.as_str()),
        ],
    );
    let span = r#"{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"order"}}]},
        "scopeSpans":[{"spans":[{"traceId":"000000000000000000000000000c0a1a","spanId":"000000000000c0a1","name":"ok","kind":2,
        "startTimeUnixNano":"1718000600000000000","endTimeUnixNano":"1718000600001000000"}]}]}]}"#;
    let r = post_json(&server, span);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(count_trace(&server, "000000000000000000000000000c0a1a"), 1);
    // The node id was derived and kept for the uploads to come.
    assert!(dir.path().join("data/node_id").exists());
    assert_eq!(pg.psql("SELECT 1"), None, "the catalog is down");

    pg.restart();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let version = "SELECT max(version) FROM _sqlx_migrations WHERE success";
    while pg.psql(version).as_deref() != Some("7") {
        assert!(
            std::time::Instant::now() < deadline,
            "the start check did not migrate the catalog within 20 s of its return"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert_eq!(count_trace(&server, "000000000000000000000000000c0a1a"), 1);
}

/// A store without conditional creates (here SeaweedFS with the client's
/// `AWS_CONDITIONAL_PUT=disabled`) cannot keep two writers apart: `serve` stops with the
/// message naming the setting that allows it anyway; with that setting the check passes and
/// says it is unsafe.
#[test]
fn a_store_that_cannot_refuse_an_overwrite_stops_serve_unless_allowed() {
    let weed = Seaweed::start();
    let pg = Postgres::start();
    let dir = temp_dir();
    let mut env = weed.aws_env();
    env.push(("AWS_CONDITIONAL_PUT", "disabled".into()));
    env.push((
        "DYELINE_STORAGE__OBJECT_STORE_URL",
        "s3://dyeline/e2e".into(),
    ));
    env.push(("DYELINE_CATALOG__POSTGRES_URL", pg.url(PASSWORD)));
    let mut serve = Command::new(dyeline_bin());
    serve
        .arg("serve")
        .args(crate::support::EPHEMERAL_PORTS)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .env("DYELINE_LOG", "warn");
    for (k, v) in &env {
        serve.env(k, v);
    }
    let out = serve.output().expect("run dyeline serve");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "serve kept running on an unsafe store"
    );
    assert!(
        err.contains("dyeline: object store s3://dyeline/e2e does not refuse to overwrite")
            && err.contains("[storage] allow_unsafe_overwrite = true")
            && err.contains("unsafe"),
        "{err}"
    );
    assert!(!err.contains(PASSWORD), "{err}");

    env.push(("DYELINE_STORAGE__ALLOW_UNSAFE_OVERWRITE", "true".into()));
    let (ok, out, err) = storage_check(&dir.path().join("data"), &env);
    assert!(ok, "{err}");
    assert!(
        out.contains(
            "self-test: UNSAFE: the store overwrites; used because allow_unsafe_overwrite = true\n"
        ),
        "{out}"
    );
}

/// An `s3://` store at a plain `http://` endpoint without `AWS_ALLOW_HTTP` is refused naming
/// the variable (the S3 client alone says only "builder error" on its first request); with
/// the variable set, the same down endpoint is reported unreachable instead.
#[test]
fn a_plain_http_endpoint_without_aws_allow_http_is_refused_naming_it() {
    let dir = temp_dir();
    let port = free_ports(1)[0];
    let mut env = vec![
        (
            "DYELINE_STORAGE__OBJECT_STORE_URL",
            "s3://spans/p".to_owned(),
        ),
        (
            "DYELINE_CATALOG__POSTGRES_URL",
            format!("postgres://dyeline:{PASSWORD}@127.0.0.1:{port}/catalog"),
        ),
        ("DYELINE_CLUSTER__NODE_ID", "n1".into()),
        ("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{port}")),
        ("AWS_REGION", "us-east-1".into()),
        ("AWS_ACCESS_KEY_ID", "k".into()),
        ("AWS_SECRET_ACCESS_KEY", "s".into()),
    ];
    let (ok, out, err) = storage_check(&dir.path().join("data"), &env);
    assert!(!ok, "{out}");
    assert!(err.contains("set AWS_ALLOW_HTTP=true"), "{err}");
    env.push(("AWS_ALLOW_HTTP", "true".into()));
    let (ok, out, err) = storage_check(&dir.path().join("data"), &env);
    assert!(!ok, "{out}");
    assert!(!err.contains("AWS_ALLOW_HTTP"), "{err}");
    assert!(err.contains("s3://spans/p"), "{err}");
}
