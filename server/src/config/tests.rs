//! The configuration's loading, layering, validation and example file, tested.

use std::collections::BTreeSet;

use super::*;

/// The dotted path and value of each leaf of `v`: a value that is not a table, or an
/// empty table.
fn leaves(v: &serde_json::Value, path: &str, out: &mut Vec<(String, serde_json::Value)>) {
    match v {
        serde_json::Value::Object(m) if !m.is_empty() => {
            for (k, v) in m {
                let key = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                leaves(v, &key, out);
            }
        }
        _ => out.push((path.to_owned(), v.clone())),
    }
}

/// `deploy/config/dyeline.example.toml` holds every setting at its default: it loads to
/// `Config::default()`, each setting with a value by default has its line, and each one
/// empty by default (none, `[]`, `{}`) is shown commented out.
#[test]
fn the_example_config_holds_every_setting_at_its_default() {
    let text = include_str!("../../../deploy/config/dyeline.example.toml");
    // Not `Config::load`: the environment (other tests set `DYELINE_*` in a jail) stays out.
    let cfg: Config = Figment::from(Serialized::defaults(Config::default()))
        .merge(Toml::string(text))
        .extract()
        .unwrap_or_else(|e| panic!("{e}"));
    cfg.validate().unwrap();
    assert_eq!(
        cfg,
        Config::default(),
        "a value of the example is not the default"
    );

    let written: serde_json::Value = Figment::from(Toml::string(text)).extract().unwrap();
    let mut in_file = Vec::new();
    leaves(&written, "", &mut in_file);
    let in_file: BTreeSet<String> = in_file.into_iter().map(|(k, _)| k).collect();
    let mut all = Vec::new();
    leaves(
        &serde_json::to_value(Config::default()).unwrap(),
        "",
        &mut all,
    );
    let empty = |v: &serde_json::Value| {
        v.is_null()
            || v.as_array().is_some_and(Vec::is_empty)
            || v.as_object().is_some_and(serde_json::Map::is_empty)
    };
    let with_value: BTreeSet<String> = all
        .iter()
        .filter(|(_, v)| !empty(v))
        .map(|(k, _)| k.clone())
        .collect();
    let missing: Vec<&String> = with_value.difference(&in_file).collect();
    let extra: Vec<&String> = in_file.difference(&with_value).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "settings without their line in the example: {missing:?}; lines for settings \
         empty by default (show them commented out): {extra:?}"
    );
    let commented: Vec<&str> = text.lines().filter(|l| l.starts_with("# ")).collect();
    for (key, _) in all.iter().filter(|(_, v)| empty(v)) {
        let leaf = key.rsplit('.').next().unwrap_or(key);
        assert!(
            commented
                .iter()
                .any(|l| l.contains(key.as_str()) || l.starts_with(&format!("# {leaf} ="))),
            "{key} is empty by default: the example shows it commented out (`# {leaf} = …`)"
        );
    }
}

#[test]
fn the_readme_toml_example_loads() {
    let readme = include_str!("../../../README.md");
    let start = readme.find("```toml\n").expect("a toml block") + "```toml\n".len();
    let len = readme[start..].find("```").expect("closed");
    let dir = std::env::temp_dir().join(format!("dyeline-readme-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("readme.toml");
    std::fs::write(&file, &readme[start..start + len]).unwrap();
    let cfg = Config::load(Some(&file), Figment::new()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cfg.api.tokens.len(), 1);
    assert_eq!(cfg.api.tokens[0].name, "alice");
    assert_eq!(cfg.analyzer.defaults.ratio_min_requests, 200);
    assert_eq!(cfg.alerts.interval, Duration::from_secs(2));
    assert_eq!(cfg.color_rules.len(), 1);
}

#[test]
fn layers_apply_in_order_and_unknown_keys_fail() {
    let dir = std::env::temp_dir().join(format!("dyeline-cfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("c.toml");
    std::fs::write(
        &file,
        "data_dir = \"/tmp/x\"\n[store]\nfsync = \"never\"\nretention = \"2days\"\n[receiver]\nmax_body_size = \"1 MiB\"\n",
    )
    .unwrap();
    let flags = Figment::new().merge(Serialized::default("data_dir", "/tmp/flag"));
    let cfg = Config::load(Some(&file), flags).unwrap();
    assert_eq!(cfg.data_dir, PathBuf::from("/tmp/flag"));
    assert_eq!(cfg.store.fsync, FsyncPolicy::Never);
    assert_eq!(cfg.store.retention, Duration::from_secs(2 * 86400));
    assert_eq!(cfg.receiver.max_body_size, ByteSize::mib(1));
    assert_eq!(cfg.store.max_memory, ByteSize::gib(1));
    assert_eq!(
        store_config_max_memory(&cfg),
        1 << 30,
        "the store gets the setting"
    );
    assert_eq!(cfg.otlp_grpc_addr, "127.0.0.1:4317".parse().unwrap());
    std::fs::write(&file, "[analyzer.channels.trade]\nwindow = \"0s\"\n").unwrap();
    let err = Config::load(Some(&file), Figment::new()).unwrap_err();
    assert!(err.to_string().contains("analyzer.trade"), "{err}");
    std::fs::write(&file, "[analyzer.lanes]\npresence_window = \"0s\"\n").unwrap();
    let err = Config::load(Some(&file), Figment::new()).unwrap_err();
    assert!(
        err.to_string().contains("analyzer.lanes.presence_window"),
        "{err}"
    );
    std::fs::write(&file, "[analyzer.lanes]\npresence_window = \"90s\"\n").unwrap();
    let cfg = Config::load(Some(&file), Figment::new()).unwrap();
    assert_eq!(cfg.analyzer.lanes.presence_window, Duration::from_secs(90));
    assert_eq!(cfg.analyzer.lanes.window, Duration::from_secs(60));
    std::fs::write(&file, "nonsense = 1\n").unwrap();
    let err = Config::load(Some(&file), Figment::new()).unwrap_err();
    assert!(err.to_string().contains("nonsense"), "{err}");
}

#[test]
fn short_tokens_and_nonsense_throttles_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.toml");
    let load = |text: &str| {
        std::fs::write(&file, text).unwrap();
        Config::load(Some(&file), Figment::new())
    };
    let err = load("[[api.tokens]]\nname = \"bob\"\ntoken = \"short-secret\"\n").unwrap_err();
    assert!(
        err.to_string()
            .contains("api.tokens \"bob\": the token has 12 characters; tokens need at least 16"),
        "{err}"
    );
    let short_env = Figment::new().merge(Serialized::default("api_token", "x"));
    let err = Config::load(None, short_env).unwrap_err();
    assert!(
        err.to_string()
            .contains("DYELINE_API_TOKEN: the token has 1 character;"),
        "{err}"
    );
    let cfg = load("[[api.tokens]]\nname = \"bob\"\ntoken = \"0123456789abcdef\"\n").unwrap();
    assert_eq!(cfg.configured_tokens().len(), 1);
    assert_eq!(cfg.api.throttle.limits().per_client, 20);
    let err = load("[api.throttle]\nfailures_per_client = 0\n").unwrap_err();
    assert!(err.to_string().contains("api.throttle"), "{err}");
    let err = load("[api.throttle]\nwindow = \"0s\"\n").unwrap_err();
    assert!(err.to_string().contains("api.throttle.window"), "{err}");
    let cfg =
        load("[api.throttle]\nfailures_per_client = 5\nfailures_total = 50\nwindow = \"2s\"\n")
            .unwrap();
    assert_eq!(
        cfg.api.throttle.limits(),
        dyeline_control::throttle::ThrottleLimits {
            per_client: 5,
            total: 50,
            window: Duration::from_secs(2)
        }
    );
}

fn store_config_max_memory(cfg: &Config) -> usize {
    crate::commands::serve::store_config(cfg).max_memory_bytes
}

#[test]
fn the_memory_bound_is_read_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.toml");
    std::fs::write(&file, "[store]\nmax_memory = \"256 MiB\"\n").unwrap();
    let cfg = Config::load(Some(&file), Figment::new()).unwrap();
    assert_eq!(store_config_max_memory(&cfg), 256 << 20);
    std::fs::write(&file, "[store]\nmax_memory = \"1 MiB\"\n").unwrap();
    let err = Config::load(Some(&file), Figment::new()).unwrap_err();
    assert!(
        err.to_string()
            .contains("store.max_memory must be at least 64 MiB"),
        "{err}"
    );
}

#[test]
fn the_trace_view_cap_is_read_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.toml");
    assert_eq!(Config::default().trace_view.max_spans, 10_000);
    std::fs::write(&file, "[trace_view]\nmax_spans = 500\n").unwrap();
    let cfg = Config::load(Some(&file), Figment::new()).unwrap();
    assert_eq!(cfg.trace_view.max_spans, 500);
    for bad in ["0", "1000001"] {
        std::fs::write(&file, format!("[trace_view]\nmax_spans = {bad}\n")).unwrap();
        let err = Config::load(Some(&file), Figment::new()).unwrap_err();
        assert!(
            err.to_string()
                .contains("trace_view.max_spans must be 1..=1000000"),
            "{err}"
        );
    }
}

#[test]
fn byte_sizes_are_numbers_or_sizes_with_units_and_errors_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.toml");
    let load = |value: &str| {
        std::fs::write(
            &file,
            format!(
                "[receiver]\nmax_body_size = {value}\n[store]\ntrace_index_max_bytes = {value}\n"
            ),
        )
        .unwrap();
        Config::load(Some(&file), Figment::new())
    };
    for (value, bytes) in [
        ("2048", 2048),
        ("\"16MB\"", 16_000_000),
        ("\"16 MiB\"", 16 << 20),
        ("\"512kib\"", 512 << 10),
    ] {
        let cfg = load(value).unwrap();
        assert_eq!(cfg.receiver.max_body_size.as_u64(), bytes, "{value}");
        assert_eq!(cfg.store.trace_index_max_bytes.as_u64(), bytes, "{value}");
    }
    for value in ["\"sixteen\"", "-1", "\"16 parsecs\""] {
        let err = load(value).unwrap_err().to_string();
        assert!(
            err.contains("expected a byte size") && err.contains("16MiB"),
            "{value}: {err}"
        );
    }
}

#[test]
#[allow(clippy::result_large_err)] // figment::Jail's closure returns figment's own error
fn unrelated_dyeline_variables_are_ignored_and_settings_still_apply() {
    let keys = Config::top_level_keys();
    for k in ["data_dir", "sql", "store", "api_token", "alerts"] {
        assert!(keys.iter().any(|x| x == k), "{k} in {keys:?}");
    }
    figment::Jail::expect_with(|jail| {
        // What Kubernetes injects for a Service named `dyeline`, and the CLI's own flags.
        jail.set_env("DYELINE_PORT", "tcp://10.0.0.1:8080");
        jail.set_env("DYELINE_PORT_8080_TCP_ADDR", "10.0.0.1");
        jail.set_env("DYELINE_SERVICE_HOST", "10.0.0.1");
        jail.set_env("DYELINE_SERVICE_PORT", "8080");
        jail.set_env("DYELINE_SERVER", "http://10.0.0.1:8080");
        jail.set_env("DYELINE_SQL__MAX_VALUE_BYTES", "128KiB");
        jail.set_env("DYELINE_API_TOKEN", "from-the-environment");
        let cfg = Config::load(None, Figment::new()).map_err(|e| e.to_string())?;
        assert_eq!(cfg.sql.max_value_bytes, ByteSize::kib(128));
        assert_eq!(
            cfg.api_token.as_ref().map(|s| s.0.as_str()),
            Some("from-the-environment")
        );
        let ignored = ignored_env_vars();
        for v in ["DYELINE_PORT", "DYELINE_SERVICE_HOST", "DYELINE_SERVER"] {
            assert!(ignored.iter().any(|x| x == v), "{v} in {ignored:?}");
        }
        assert!(!ignored.iter().any(|x| x == "DYELINE_SQL__MAX_VALUE_BYTES"));
        Ok(())
    });
    // A wrong key inside a known section is passed on, so refused as unknown (the
    // refusal itself: `layers_apply_in_order_and_unknown_keys_fail`, and end to end).
    assert!(is_setting(&keys, "sql__timeoutt"));
    assert!(is_setting(&keys, "SQL__TIMEOUT"));
    assert!(!is_setting(&keys, "port_8080_tcp"));
    assert!(!is_setting(&keys, "log"));
}

/// Alertmanager and webhook URLs must be http(s) with a host; the message names the key
/// and never the URL (a webhook's may carry a token).
/// `[gate] fail_on` names finding types; an unknown name is refused when the configuration
/// loads, naming the key and the valid names.
#[test]
fn gate_fail_on_is_validated_at_load() {
    use dyeline_model::Detection;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.toml");
    let load = |body: &str| {
        std::fs::write(&file, format!("[gate]\n{body}\n")).unwrap();
        Config::load(Some(&file), Figment::new())
    };
    assert_eq!(
        Config::default().gate.fail_on,
        [
            Detection::ErrorSpike,
            Detection::CrossColorHop,
            Detection::DrainedSide,
            Detection::LaneLeak,
            Detection::LaneErrorSpike
        ]
    );
    let ok = load("fail_on = [\"error_spike\", \"lane_tag_dropped\"]").unwrap();
    assert_eq!(
        ok.gate.fail_on,
        [Detection::ErrorSpike, Detection::LaneTagDropped]
    );
    let e = load("fail_on = [\"error_spike\", \"spikes\"]")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("gate.fail_on") && e.contains("spikes") && e.contains("cross_color_hop"),
        "{e}"
    );
    assert!(load("fail_on = \"error_spike\"").is_err());
}

#[test]
fn otlp_tokens_and_tls_are_checked_at_load_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.toml");
    let load = |body: &str| {
        std::fs::write(&file, format!("[otlp]\n{body}\n")).unwrap();
        Config::load(Some(&file), Figment::new())
    };
    let ok = load(
        "tokens = [\"0123456789abcdef-otlp\"]\n[otlp.cors]\n\
         allowed_origins = [\"https://shop.example\", \"http://127.0.0.1:3000\", \"*\"]",
    )
    .unwrap();
    assert_eq!(ok.otlp.all_tokens(None), ["0123456789abcdef-otlp"]);
    assert_eq!(ok.otlp.cors.allowed_origins.len(), 3);
    assert!(ok.otlp.tls.files().is_none());
    let missing = dir.path().join("nowhere.pem");
    let missing = format!(
        "[otlp.tls]\ncert = \"{}\"\nkey = \"{}\"",
        missing.display(),
        missing.display()
    );
    for (body, key) in [
        (
            "tokens = [\"0123456789abcdef\", \"short\"]",
            "otlp.tokens[1]",
        ),
        ("[otlp.tls]\ncert = \"/x.pem\"", "otlp.tls.key"),
        ("[otlp.tls]\nkey = \"/x.key\"", "otlp.tls.cert"),
        (
            "[otlp.tls]\ncert = \"/x.pem\"\nkey = \"/x.key\"\nreload_interval = \"10ms\"",
            "otlp.tls.reload_interval",
        ),
        (missing.as_str(), "nowhere.pem"),
        (
            "[otlp.cors]\nallowed_origins = [\"https://a.example\", \"https://b.example/app\"]",
            "otlp.cors.allowed_origins[1]",
        ),
        (
            "[otlp.cors]\nallowed_origins = [\"shop.example\"]",
            "otlp.cors.allowed_origins[0]",
        ),
        (
            "[otlp.rate_limit]\nrequests_per_second_per_source = 5\nburst = 0",
            "otlp.rate_limit.burst",
        ),
    ] {
        let e = load(body).expect_err(body).to_string();
        assert!(e.contains(key), "{body}: {e}");
    }
}

#[test]
fn alert_urls_that_are_not_http_are_refused_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.toml");
    let load = |body: &str| {
        std::fs::write(&file, format!("[alerts]\n{body}\n")).unwrap();
        Config::load(Some(&file), Figment::new())
    };
    let ok = load(
        "alertmanager_url = \"http://am-0:9093\"\nalertmanager_urls = [\"https://am-1:9093\"]\n\
         webhooks = [\"http://hooks/x?token=s3cret\"]",
    )
    .unwrap();
    assert_eq!(
        ok.alerts.alertmanagers(),
        ["http://am-0:9093", "https://am-1:9093"]
    );
    for (body, key) in [
        (
            "alertmanager_url = \"am-0:9093\"",
            "alerts.alertmanager_url",
        ),
        (
            "alertmanager_urls = [\"http://a:1\", \"ftp://b\"]",
            "alerts.alertmanager_urls[1]",
        ),
        ("webhooks = [\"file:///s3cret\"]", "alerts.webhooks[0]"),
    ] {
        let e = load(body).expect_err(body).to_string();
        assert!(e.contains(key) && e.contains("not an http"), "{body}: {e}");
        assert!(!e.contains("s3cret"), "{e}");
    }
}

#[test]
fn sql_limits_that_disable_themselves_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.toml");
    let load = |body: &str| {
        std::fs::write(&file, format!("[sql]\n{body}\n")).unwrap();
        Config::load(Some(&file), Figment::new())
    };
    let cfg = load("max_memory = \"256 MiB\"\nmax_concurrent_queries = 2").unwrap();
    let b = cfg.sql.bounds();
    assert_eq!(
        (
            b.max_memory_bytes,
            b.max_concurrent_queries,
            b.max_value_bytes
        ),
        (256 << 20, 2, 64 << 10)
    );
    for (body, message) in [
        (
            "timeout = \"0s\"",
            "sql.timeout must be between 100ms and 1h",
        ),
        (
            "timeout = \"3days\"",
            "sql.timeout must be between 100ms and 1h",
        ),
        ("max_rows = 0", "sql.max_rows must be positive"),
        (
            "max_concurrent_queries = 0",
            "sql.max_concurrent_queries must be between 1 and 256",
        ),
        (
            "max_memory = \"1 KiB\"",
            "sql.max_memory must be between 16 MiB and 1 TiB",
        ),
        (
            "max_memory = \"1 EiB\"",
            "sql.max_memory must be between 16 MiB and 1 TiB",
        ),
        (
            "max_value_bytes = 10",
            "sql.max_value_bytes must be at least 1 KiB",
        ),
        (
            "max_memory = \"16 MiB\"\nmax_value_bytes = \"32 MiB\"",
            "at most sql.max_memory",
        ),
    ] {
        let err = load(body).unwrap_err().to_string();
        assert!(err.contains(message), "{body}: {err}");
    }
}

/// The lane fixtures' `dyeline.toml` loads; a bad lane rule or carrier is refused at load
/// with a message naming the list and the entry's key.
#[test]
fn lane_rules_and_carriers_load_and_bad_ones_are_refused_naming_their_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.toml");
    let load = |body: &str| {
        std::fs::write(&file, body).unwrap();
        Config::load(Some(&file), Figment::new())
    };
    let fixture = include_str!("../../../../shared/fixtures/analysis/lanes-small/dyeline.toml");
    let cfg = load(fixture).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        cfg.lane_rules.iter().map(LaneRule::key).collect::<Vec<_>>(),
        ["nacos.metadata.gray", "host.name"]
    );
    assert_eq!(cfg.lane_carriers[0].key, "http.request.header.gray");
    for (body, message) in [
        (
            "[[lane_rules]]\nkind = \"pattern\"\nkey = \"host.name\"\nregex = \"-(?P<lane>gray\"\n",
            "lane_rules: lane rule #0 `host.name`: invalid regex",
        ),
        (
            "[[lane_rules]]\nkind = \"pattern\"\nkey = \"k8s.pod.name\"\nregex = \"-(gray)-\"\n",
            "lane_rules: lane rule #0 `k8s.pod.name`: regex `-(gray)-` has no named group `lane`",
        ),
        (
            "[[lane_rules]]\nkind = \"attribute\"\nkey = \"nacos.metadata.gray\"\nmap = { \"true\" = \"Gray Lane\" }\n",
            "lane_rules: lane rule #0 `nacos.metadata.gray`: map entry `true` = `Gray Lane`",
        ),
        (
            "[[lane_carriers]]\nkey = \"http.request.header.gray\"\nmap = {}\n",
            "lane_carriers: lane carrier #0 `http.request.header.gray`: `map` is empty",
        ),
        (
            "[[lane_carriers]]\nkey = \"x-deploy-lane\"\n",
            "lane_carriers: lane carrier #0 `x-deploy-lane`: the key is a built-in carrier",
        ),
        // Unknown fields and kinds are refused by name too.
        (
            "[[lane_carriers]]\nkey = \"h\"\nregex = \"x\"\n",
            "unknown field: found `regex`",
        ),
        (
            "[[lane_rules]]\nkind = \"token\"\nkey = \"host.name\"\n",
            "unknown variant: found `token`",
        ),
    ] {
        let err = load(body).unwrap_err().to_string();
        assert!(err.contains(message), "{body}: {err}");
    }
}
