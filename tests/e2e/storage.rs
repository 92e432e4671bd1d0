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
         schema version: 1\n\
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
        out.contains("node id: ingest-7\n") && out.contains("schema version: 1\n"),
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
/// while its start check retries.
#[test]
fn serve_ingests_while_its_catalog_is_down() {
    let dir = temp_dir();
    let objects = dir.path().join("objects");
    std::fs::create_dir_all(&objects).unwrap();
    let port = free_ports(1)[0];
    let url = format!("file://{}", objects.display());
    let pg_url = format!("postgres://dyeline:{PASSWORD}@127.0.0.1:{port}/catalog");
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
}
