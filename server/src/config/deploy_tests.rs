//! The configurations deploy/ runs `dyeline serve` with (issue 27, item 5) load with this
//! binary's own loader, each with the environment its container gets: the image's
//! `deploy/docker/dyeline.toml`, `deploy/compose/dyeline.toml` for each compose node, the
//! Kubernetes ConfigMaps with the StatefulSet's and the single-node Deployment's variables.
//! `tests/python/deploy.py configs` reads them out of the YAML (the node ids from the service
//! and pod names, the Secret example's values) and prints them as JSON; unknown keys are
//! refused at load, so a setting the binary does not have yet fails here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use super::Config;

/// One configuration of deploy/ and the environment it runs with.
#[derive(Debug, serde::Deserialize)]
struct Case {
    name: String,
    /// `docker`, `compose`, `k8s`, `k8s-single`, `k8s-example-secret`.
    deployment: String,
    toml: String,
    env: BTreeMap<String, String>,
    /// Shared storage (bucket and catalog) is configured.
    shared_storage: bool,
    /// Loading must fail with a message containing this.
    #[serde(default)]
    refused_with: Option<String>,
}

fn cases() -> Vec<Case> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("server/ has a parent");
    // Its own working directory: figment's Jail (other config tests) moves the process's into
    // a temporary one and deletes it.
    let out = Command::new("python3")
        .current_dir(root)
        .arg(root.join("tests/python/deploy.py"))
        .arg("configs")
        .output()
        .expect("python3 runs (pip install -r tests/requirements.txt)");
    assert!(
        out.status.success(),
        "deploy.py configs failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cases: Vec<Case> = serde_json::from_slice(&out.stdout).expect("deploy.py configs: JSON");
    assert!(cases.len() >= 8, "too few configurations: {cases:?}");
    cases
}

/// Loads `toml` with `env` as its environment, as `dyeline serve --config FILE` in that
/// container would (without setting them process-wide: concurrent tests load too).
fn load(toml: &str, env: &BTreeMap<String, String>) -> Result<Config, String> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("dyeline.toml");
    std::fs::write(&file, toml).expect("write the configuration");
    let vars: Vec<(String, String)> = env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    Config::load_with_vars(Some(&file), &vars).map_err(|e| e.to_string())
}

#[test]
fn every_deploy_configuration_loads_with_its_environment() {
    let mut node_ids: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for case in cases() {
        let name = &case.name;
        let loaded = load(&case.toml, &case.env);
        if let Some(why) = &case.refused_with {
            let err = match loaded {
                Ok(_) => panic!("{name}: must be refused as written"),
                Err(e) => e,
            };
            assert!(
                err.contains(why.as_str()),
                "{name}: refused, but not for {why}: {err}"
            );
            continue;
        }
        let cfg = loaded.unwrap_or_else(|e| panic!("{name}: {e}"));
        // Reachable from outside the container, and no open reads there.
        for (key, addr) in [
            ("otlp_grpc_addr", cfg.otlp_grpc_addr),
            ("otlp_http_addr", cfg.otlp_http_addr),
            ("api_addr", cfg.api_addr),
        ] {
            assert!(
                addr.ip().is_unspecified(),
                "{name}: {key} {addr} is not reachable from outside the container"
            );
        }
        assert!(
            cfg.api.read_requires_token,
            "{name}: the API listens beyond loopback with reads open"
        );
        assert!(
            cfg.data_dir.starts_with("/var/lib/dyeline") && cfg.data_dir.is_absolute(),
            "{name}: data_dir {} is not on the volume /var/lib/dyeline",
            cfg.data_dir.display()
        );
        let shared = cfg
            .shared_storage()
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            shared.is_some(),
            case.shared_storage,
            "{name}: shared storage on is {}",
            shared.is_some()
        );
        if let Some(shared) = shared {
            let id = shared.node_id.unwrap_or_else(|| {
                panic!("{name}: no [cluster] node_id (DYELINE_CLUSTER__NODE_ID)")
            });
            assert!(
                node_ids
                    .entry(case.deployment.clone())
                    .or_default()
                    .insert(id.as_str().to_owned()),
                "{name}: node id {} is another node's too",
                id.as_str()
            );
            // The nodes share one control plane, rather than each its own SQLite file.
            assert!(
                cfg.control.postgres_url.is_some(),
                "{name}: no [control] postgres_url (DYELINE_CONTROL__POSTGRES_URL)"
            );
            // Every node takes the same write token, rather than each making its own.
            assert!(
                !cfg.configured_tokens().is_empty(),
                "{name}: no API token configured: each node would generate its own"
            );
        }
        if case.deployment == "compose" {
            assert!(
                cfg.alerts.alertmanager_url.is_some(),
                "{name}: no Alertmanager"
            );
        }
    }
    assert_eq!(node_ids["compose"].len(), 3, "{node_ids:?}");
    assert_eq!(node_ids["k8s"].len(), 3, "{node_ids:?}");
}
