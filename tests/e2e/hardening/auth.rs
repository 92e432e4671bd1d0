//! Hardening of the API port's authorization (issue 23, auth): one token check in front of
//! every route (pages, `/live`, `/metrics`, the API), sign-in redirects that stay local,
//! throttled guessing, signed CSRF tokens, the `Bearer` scheme in any case, token strength at
//! start, private data files, the warning for open reads beyond loopback, and the OpenAPI
//! declarations of all that.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::net::IpAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use reqwest::blocking::{Client, Response};
use reqwest::header;
use serde_json::{Value, json};

use super::{HealthWatch, assert_up, peak_rss_bytes, rss_bytes};
use crate::support::{EPHEMERAL_PORTS, Server, dyeline_bin};
use crate::util::{post_json, temp_dir};

const TOKEN: &str = "e2e-auth-token-0123456789";
/// With characters the cookie jar percent-encodes: the cookie still signs in.
const READER: &str = "e2e/auth=reader+0123456789";
const TRACE: &str = "0af7651916cd43dd8448eb211c80319c";

fn client() -> Client {
    client_from(None)
}

/// A client that follows no redirect, optionally from another loopback address.
fn client_from(local: Option<IpAddr>) -> Client {
    let mut b = Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(10));
    if let Some(ip) = local {
        b = b.local_address(ip);
    }
    b.build().expect("client")
}

fn url(s: &Server, path: &str) -> String {
    format!("http://{}{path}", s.api)
}

fn config(dir: &Path) -> std::path::PathBuf {
    let file = dir.join("auth.toml");
    std::fs::write(
        &file,
        format!(
            "[[api.tokens]]\nname = \"writer\"\ntoken = \"{TOKEN}\"\n\
             [[api.tokens]]\nname = \"reader\"\ntoken = \"{READER}\"\nrole = \"read\"\n"
        ),
    )
    .unwrap();
    file
}

/// A server whose reads need a token, with channel `trade` (app `order`) and one stored span
/// of [`TRACE`].
fn closed_server(dir: &Path, env: &[(&str, &str)]) -> Server {
    let file = config(dir);
    let mut all = vec![("DYELINE_API__READ_REQUIRES_TOKEN", "true")];
    all.extend_from_slice(env);
    let s = Server::start_with(
        &dir.join("data"),
        &all,
        &["--config", file.to_str().unwrap()],
    );
    let r = client()
        .put(url(&s, "/api/v1/channels/trade"))
        .bearer_auth(TOKEN)
        .json(&json!({"apps": ["order"]}))
        .send()
        .unwrap();
    assert_eq!(r.status(), 201);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64;
    let span = json!({"resourceSpans": [{
        "resource": {"attributes": [
            {"key": "service.name", "value": {"stringValue": "order"}},
            {"key": "host.name", "value": {"stringValue": "order-blue-1"}}]},
        "scopeSpans": [{"spans": [{
            "traceId": TRACE, "spanId": "b7ad6b7169203331", "name": "GET /order", "kind": 2,
            "startTimeUnixNano": (now - 5_000_000).to_string(),
            "endTimeUnixNano": now.to_string()}]}]}]});
    assert_eq!(post_json(&s, &span.to_string()).status, 200);
    s
}

fn set_cookie(r: &Response, name: &str) -> Option<String> {
    r.headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| v.strip_prefix(&format!("{name}=")))
        .map(|v| v.split(';').next().unwrap_or("").to_owned())
}

fn location(r: &Response) -> String {
    r.headers()
        .get(header::LOCATION)
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default()
}

/// The CSRF nonce cookie and the form token of the sign-in page.
fn login_form(s: &Server) -> (String, String) {
    let r = client().get(url(s, "/login")).send().unwrap();
    assert_eq!(r.status(), 200);
    let nonce = set_cookie(&r, "dyeline_csrf").expect("a csrf cookie");
    let html = r.text().unwrap();
    let at = html.find("name=\"csrf\" value=\"").expect("csrf field") + 19;
    let form = html[at..at + 64].to_owned();
    (nonce, form)
}

/// Posts the sign-in form with `token` and `next` (already URL-encoded).
fn post_login(
    s: &Server,
    c: &Client,
    form: &(String, String),
    token: &str,
    next: &str,
) -> Response {
    c.post(url(s, "/login"))
        .header(header::COOKIE, format!("dyeline_csrf={}", form.0))
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(format!(
            "csrf={}&token={}&next={next}",
            form.1,
            form_encode(token)
        ))
        .send()
        .unwrap()
}

/// `text` as a form value (`application/x-www-form-urlencoded`).
fn form_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Signs in with `token`; returns the Cookie header of the signed-in browser.
fn sign_in(s: &Server, token: &str) -> String {
    let form = login_form(s);
    let r = post_login(s, &client(), &form, token, "%2F");
    assert_eq!(r.status(), 303);
    let t = set_cookie(&r, "dyeline_token").expect("the token cookie");
    format!("dyeline_csrf={}; dyeline_token={t}", form.0)
}

fn metric(s: &Server, line_start: &str) -> f64 {
    let text = client()
        .get(url(s, "/metrics"))
        .bearer_auth(TOKEN)
        .send()
        .unwrap()
        .text()
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(line_start))
        .unwrap_or_else(|| panic!("no {line_start} in {text}"))
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn with_reads_closed_every_page_stream_metric_and_read_needs_the_token() {
    let dir = temp_dir();
    let s = closed_server(dir.path(), &[]);
    let c = client();
    // A lane group named like the channel, so every `{id}` route of the API read below has
    // something to answer.
    let r = c
        .put(url(&s, "/api/v1/lane-groups/trade"))
        .bearer_auth(TOKEN)
        .json(&json!({"apps": ["order"], "lanes": {"gray": {}}}))
        .send()
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().unwrap_or_default());
    let cookie = sign_in(&s, READER);
    let pages = [
        "/",
        "/channels/trade",
        "/channels/global",
        "/lanes",
        "/lanes/trade",
        "/lanes/_ungrouped",
        "/traces",
        &format!("/traces/{TRACE}"),
        "/channels/trade/confirm?action=start",
        "/nothing-here",
    ];
    for page in pages {
        let r = c.get(url(&s, page)).send().unwrap();
        assert_eq!(r.status(), 303, "{page} without a token");
        let to = location(&r);
        assert!(to.starts_with("/login?next=%2F"), "{page} → {to}");
        let body = r.text().unwrap();
        assert!(
            !body.contains("trade") && !body.contains(TRACE),
            "{page}: {body}"
        );
        if page == "/nothing-here" {
            continue;
        }
        for (how, req) in [
            ("bearer", c.get(url(&s, page)).bearer_auth(TOKEN)),
            (
                "cookie",
                c.get(url(&s, page)).header(header::COOKIE, &cookie),
            ),
        ] {
            let r = req.send().unwrap();
            assert_eq!(r.status(), 200, "{page} with the {how}");
        }
    }
    // A wrong cookie is a failed token: back to sign in, the cookie removed.
    let r = c
        .get(url(&s, "/"))
        .header(header::COOKIE, "dyeline_token=not-the-token-at-all")
        .send()
        .unwrap();
    assert_eq!(r.status(), 303);
    assert_eq!(set_cookie(&r, "dyeline_token").as_deref(), Some(""));
    // /live and /metrics: 401 without a token, 200 with it (/live also with the cookie).
    for (path, cookie_ok) in [("/live", true), ("/metrics", false)] {
        let r = c.get(url(&s, path)).send().unwrap();
        assert_eq!(r.status(), 401, "{path}");
        assert_eq!(r.json::<Value>().unwrap()["error"]["code"], "unauthorized");
        let r = c.get(url(&s, path)).bearer_auth(READER).send().unwrap();
        assert_eq!(r.status(), 200, "{path} with the bearer");
        drop(r);
        let r = c
            .get(url(&s, path))
            .header(header::COOKIE, &cookie)
            .send()
            .unwrap();
        assert_eq!(
            r.status(),
            if cookie_ok { 200 } else { 401 },
            "{path} with the cookie"
        );
    }
    // Every GET route of the API, from its own document.
    let doc: Value = c
        .get(url(&s, "/api/v1/openapi.json"))
        .send()
        .unwrap()
        .json()
        .unwrap();
    let mut checked = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        if item.get("get").is_none() || ["/healthz", "/livez", "/readyz"].contains(&path.as_str()) {
            continue;
        }
        let concrete = path
            .replace("{id}", "trade")
            .replace("{app}", "order")
            .replace("{trace_id}", TRACE);
        let r = c.get(url(&s, &concrete)).send().unwrap();
        assert_eq!(r.status(), 401, "GET {concrete} without a token");
        let r = c
            .get(url(&s, &concrete))
            .bearer_auth(READER)
            .send()
            .unwrap();
        if path.starts_with("/api/v1/cluster/") {
            // Node-to-node reads: past the gate, a single node answers that it is not in a
            // cluster.
            assert_eq!(r.status(), 404, "GET {concrete} with the read token");
            assert_eq!(
                r.json::<Value>().unwrap()["error"]["code"],
                "not_a_cluster",
                "GET {concrete}"
            );
        } else {
            assert_eq!(r.status(), 200, "GET {concrete} with the read token");
        }
        // The API takes the bearer header only, not the dashboard's cookie.
        let r = c
            .get(url(&s, &concrete))
            .header(header::COOKIE, &cookie)
            .send()
            .unwrap();
        assert_eq!(r.status(), 401, "GET {concrete} with the cookie");
        checked += 1;
    }
    assert!(checked >= 12, "only {checked} GET routes documented");
    // Open: health, the document, the assets, sign-in.
    for path in [
        "/healthz",
        "/livez",
        "/readyz",
        "/api/v1/openapi.json",
        "/assets/style.css",
        "/assets/live.js",
        "/login",
    ] {
        assert_eq!(c.get(url(&s, path)).send().unwrap().status(), 200, "{path}");
    }
    assert_eq!(
        c.get(url(&s, "/healthz")).send().unwrap().text().unwrap(),
        "ok"
    );
    // A read token still cannot write (403 from the handler, after the gate).
    let r = c
        .post(url(&s, "/api/v1/channels/trade/start"))
        .bearer_auth(READER)
        .send()
        .unwrap();
    assert_eq!(r.status(), 403);
    assert!(metric(&s, "dyeline_auth_failures_total{reason=\"missing_token\"}") >= 30.0);
    assert_eq!(
        metric(&s, "dyeline_auth_failures_total{reason=\"invalid_token\"}"),
        1.0
    );
}

#[test]
fn the_openapi_document_declares_tokens_and_refusals_on_every_route() {
    let dir = temp_dir();
    for closed in [false, true] {
        let data = dir.path().join(format!("data-{closed}"));
        let flag = if closed { "true" } else { "false" };
        let s = Server::start(
            &data,
            &[
                ("DYELINE_API_TOKEN", TOKEN),
                ("DYELINE_API__READ_REQUIRES_TOKEN", flag),
            ],
        );
        let doc: Value = client()
            .get(url(&s, "/api/v1/openapi.json"))
            .send()
            .unwrap()
            .json()
            .unwrap();
        assert_eq!(
            doc["components"]["securitySchemes"]["bearer"]["scheme"],
            "bearer"
        );
        let mut ops = 0;
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                if !["get", "put", "post", "delete", "patch", "head", "options"]
                    .contains(&method.as_str())
                {
                    continue;
                }
                let codes: Vec<&str> = op["responses"]
                    .as_object()
                    .unwrap()
                    .keys()
                    .map(String::as_str)
                    .collect();
                let security = &op["security"];
                if ["/healthz", "/livez", "/readyz"].contains(&path.as_str()) {
                    assert!(security.is_null(), "{method} {path}: {security}");
                    continue;
                }
                ops += 1;
                // POSTs that only read: SQL, and the release gates a Flagger webhook POSTs to.
                let write = method != "get" && path != "/api/v1/sql" && !path.ends_with("/gate");
                let bearer = json!([{"bearer": []}]);
                if write || closed {
                    assert_eq!(security, &bearer, "{method} {path}");
                } else {
                    assert_eq!(security, &json!([{}, {"bearer": []}]), "{method} {path}");
                }
                for code in ["401", "429"] {
                    assert!(
                        codes.contains(&code),
                        "{method} {path}: no {code} in {codes:?}"
                    );
                }
                assert_eq!(codes.contains(&"403"), write, "{method} {path}: {codes:?}");
            }
        }
        assert!(ops >= 20, "{ops} operations");
    }
}

#[test]
fn sign_in_redirects_stay_local_and_never_fail() {
    let dir = temp_dir();
    let s = closed_server(dir.path(), &[]);
    let c = client();
    let form = login_form(&s);
    for (next, to) in [
        ("%2Fchannels%2Ftrade", "/channels/trade"),
        ("%2F%09%2Fevil.example", "/"),
        ("%2F%5Cevil.example", "/"),
        ("%5C%5Cevil.example", "/"),
        ("%2F%2Fevil.example", "/"),
        ("https%3A%2F%2Fevil.example", "/"),
        ("%2F%0D%0ASet-Cookie%3A%20dyeline_token%3Dx", "/"),
        ("%2F%0A%2Fevil.example", "/"),
        ("%2Ftraces%3Fapp%3Da%20b", "/traces?app=a%20b"),
    ] {
        let r = post_login(&s, &c, &form, TOKEN, next);
        assert_eq!(r.status(), 303, "next={next}");
        assert_eq!(location(&r), to, "next={next}");
        let r = c
            .get(url(&s, &format!("/login?next={next}")))
            .send()
            .unwrap();
        assert_eq!(r.status(), 200, "GET /login?next={next}");
    }
    // The gate's own redirect carries the page, encoded, whatever its path holds.
    for path in ["/%0d%0a/x", "/traces?q=%0d%0aSet-Cookie:x"] {
        let r = c.get(url(&s, path)).send().unwrap();
        assert_eq!(r.status(), 303, "{path}");
        assert!(location(&r).starts_with("/login?next=%2F"), "{path}");
        assert!(r.headers().get_all(header::SET_COOKIE).iter().count() == 0);
    }
}

#[test]
fn forms_refuse_tossed_and_duplicate_cookies() {
    let dir = temp_dir();
    let s = closed_server(dir.path(), &[]);
    let c = client();
    let cookie = sign_in(&s, TOKEN);
    // The confirm page's form token, for this browser's session.
    let html = c
        .get(url(&s, "/channels/trade/confirm?action=start"))
        .header(header::COOKIE, &cookie)
        .send()
        .unwrap()
        .text()
        .unwrap();
    let at = html.find("name=\"csrf\" value=\"").unwrap() + 19;
    let good = html[at..at + 64].to_owned();
    let nonce = cookie
        .split("; ")
        .find_map(|p| p.strip_prefix("dyeline_csrf="))
        .unwrap()
        .to_owned();
    // An attacker's own (nonce, form token) pair from the sign-in page, its nonce tossed in
    // beside the victim's: refused whichever comes first.
    let (theirs, their_form) = login_form(&s);
    let post = |cookies: &str, csrf: &str| {
        c.post(url(&s, "/channels/trade/actions"))
            .header(header::COOKIE, cookies)
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(format!("csrf={csrf}&action=start"))
            .send()
            .unwrap()
    };
    let token_part = cookie.split("; ").nth(1).unwrap();
    for (cookies, csrf, status, says) in [
        (
            format!("dyeline_csrf={theirs}; {cookie}"),
            their_form.as_str(),
            403,
            "two dyeline_csrf cookies",
        ),
        (
            format!("{cookie}; dyeline_csrf={theirs}"),
            their_form.as_str(),
            403,
            "two dyeline_csrf cookies",
        ),
        // Only the attacker's nonce: their form token is for no session, the victim has one.
        (
            format!("dyeline_csrf={theirs}; {token_part}"),
            their_form.as_str(),
            403,
            "CSRF check failed",
        ),
        // The old double submit: the form value equal to the cookie.
        (cookie.clone(), nonce.as_str(), 403, "CSRF check failed"),
        (
            format!("{cookie}; dyeline_token=attackers-own-token-0123"),
            good.as_str(),
            400,
            "two dyeline_token cookies",
        ),
    ] {
        let r = post(&cookies, csrf);
        assert_eq!(r.status(), status, "{cookies}");
        let body = r.text().unwrap();
        assert!(body.contains(says), "{cookies}: {body}");
    }
    let state = |c: &Client| {
        c.get(url(&s, "/api/v1/channels/trade"))
            .bearer_auth(TOKEN)
            .send()
            .unwrap()
            .json::<Value>()
            .unwrap()["state"]
            .clone()
    };
    assert_eq!(state(&c), "idle", "no forged write went through");
    let r = post(&cookie, &good);
    assert_eq!(r.status(), 303);
    assert_eq!(location(&r), "/channels/trade?done=start");
    assert_eq!(state(&c), "releasing");
}

#[test]
fn the_bearer_scheme_is_case_insensitive() {
    let dir = temp_dir();
    let s = closed_server(dir.path(), &[]);
    let c = client();
    for scheme in ["Bearer ", "bearer ", "BEARER ", "BeArEr   "] {
        let r = c
            .get(url(&s, "/api/v1/channels"))
            .header(header::AUTHORIZATION, format!("{scheme}{TOKEN}"))
            .send()
            .unwrap();
        assert_eq!(r.status(), 200, "{scheme:?}");
    }
    let r = c
        .put(url(&s, "/api/v1/channels/pay"))
        .header(header::AUTHORIZATION, format!("BEARER {TOKEN}"))
        .json(&json!({"apps": ["payment"]}))
        .send()
        .unwrap();
    assert_eq!(r.status(), 201);
    let r = c
        .get(url(&s, "/api/v1/channels"))
        .header(header::AUTHORIZATION, format!("Basic {TOKEN}"))
        .send()
        .unwrap();
    assert_eq!(r.status(), 401);
}

#[test]
fn failed_tokens_and_sign_ins_are_throttled_without_slowing_valid_ones() {
    let dir = temp_dir();
    let mut s = closed_server(
        dir.path(),
        &[
            ("DYELINE_API__THROTTLE__WINDOW", "3s"),
            ("DYELINE_API__THROTTLE__FAILURES_PER_CLIENT", "20"),
            ("DYELINE_API__THROTTLE__FAILURES_TOTAL", "1000"),
        ],
    );
    let c = client();
    let form = login_form(&s);
    let watch = HealthWatch::start(&s);
    let started = Instant::now();
    let mut seen: BTreeMap<u16, usize> = BTreeMap::new();
    let mut retry_after = None;
    for i in 0..200 {
        let r = if i % 2 == 0 {
            post_login(&s, &c, &form, &format!("guess-{i:020}"), "%2F")
        } else {
            c.get(url(&s, "/api/v1/channels"))
                .bearer_auth(format!("guess-{i:020}"))
                .send()
                .unwrap()
        };
        if r.status() == 429 && retry_after.is_none() {
            retry_after = r
                .headers()
                .get(header::RETRY_AFTER)
                .map(|v| v.to_str().unwrap().parse::<u64>().unwrap());
            let body: Value = r.json().unwrap();
            let m = body["error"]["message"].as_str().unwrap();
            assert!(m.contains("[api.throttle] failures_per_client"), "{m}");
            *seen.entry(429).or_default() += 1;
            continue;
        }
        *seen.entry(r.status().as_u16()).or_default() += 1;
    }
    let burst = started.elapsed();
    assert_eq!(
        seen.get(&401),
        Some(&20),
        "{seen:?}: 20 guesses are checked"
    );
    assert_eq!(
        seen.get(&429),
        Some(&180),
        "{seen:?}: the rest are refused unchecked"
    );
    let retry_after = retry_after.expect("Retry-After on 429");
    assert!((1..=3).contains(&retry_after), "{retry_after}");
    // While throttled, the right token from the same client is refused too (no oracle)…
    let r = c
        .get(url(&s, "/api/v1/channels"))
        .bearer_auth(TOKEN)
        .send()
        .unwrap();
    assert_eq!(r.status(), 429);
    // …while another client (127.0.0.2) with it is served at once.
    let other = client_from(Some("127.0.0.2".parse().unwrap()));
    let t = Instant::now();
    let r = other
        .get(url(&s, "/api/v1/channels"))
        .bearer_auth(TOKEN)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        t.elapsed() < Duration::from_millis(500),
        "{:?}",
        t.elapsed()
    );
    watch.assert_healthy("200 wrong tokens and sign-ins");
    // After the window the right token works again, for the API and for signing in.
    std::thread::sleep(Duration::from_secs(retry_after) + Duration::from_millis(200));
    let r = c
        .get(url(&s, "/api/v1/channels"))
        .bearer_auth(TOKEN)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = post_login(&s, &c, &form, TOKEN, "%2F");
    assert_eq!(r.status(), 303);
    assert_eq!(
        metric(&s, "dyeline_auth_failures_total{reason=\"throttled\"}"),
        181.0
    );
    assert_eq!(
        metric(&s, "dyeline_auth_failures_total{reason=\"sign_in\"}"),
        10.0
    );
    assert_eq!(
        metric(&s, "dyeline_auth_failures_total{reason=\"invalid_token\"}"),
        10.0
    );
    // The burst ran at full speed (the refusals cost nothing): well under the 3 s window.
    assert!(burst < Duration::from_secs(3), "{burst:?}");
    assert_up(&mut s, "after the guessing");
    // Counting failures holds at most one entry per failing client per window.
    let (rss, peak) = (rss_bytes(&s), peak_rss_bytes(&s));
    assert!(
        peak < 512 << 20,
        "peak resident memory {peak} bytes (rss {rss})"
    );
}

/// Runs `dyeline serve` that must stop at start; returns (exit code, stderr).
fn serve_refused(data: &Path, env: &[(&str, &str)], args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(dyeline_bin())
        .args(args)
        .arg("serve")
        .args(EPHEMERAL_PORTS)
        .arg("--data-dir")
        .arg(data)
        .envs(env.iter().copied())
        .env("DYELINE_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            return (status.code(), err);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("serve did not stop at start");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn short_tokens_are_refused_at_start() {
    let dir = temp_dir();
    let data = dir.path().join("data");
    let (code, err) = serve_refused(&data, &[("DYELINE_API_TOKEN", "x")], &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("DYELINE_API_TOKEN: the token has 1 character; tokens need at least 16"),
        "{err}"
    );
    let file = dir.path().join("short.toml");
    std::fs::write(
        &file,
        "[[api.tokens]]\nname = \"bob\"\ntoken = \"fifteen-chars-x\"\n",
    )
    .unwrap();
    let (code, err) = serve_refused(&data, &[], &["--config", file.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("api.tokens \"bob\": the token has 15 characters"),
        "{err}"
    );
    // A token file edited down to a short token is refused too.
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("api-token"), "admin\n").unwrap();
    let (code, err) = serve_refused(&data, &[], &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("the token has 5 characters"), "{err}");
}

/// Every file under `data` (relative paths), asserting each directory is 0700 and each file
/// 0600.
#[cfg(unix)]
fn private_files(data: &Path) -> Vec<String> {
    use std::os::unix::fs::PermissionsExt;
    let mut files = Vec::new();
    let mut dirs = vec![data.to_path_buf()];
    while let Some(d) = dirs.pop() {
        let mode = std::fs::metadata(&d).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", d.display());
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                dirs.push(e.path());
            } else {
                let mode = e.metadata().unwrap().permissions().mode() & 0o777;
                assert_eq!(mode, 0o600, "{}", e.path().display());
                let rel = e
                    .path()
                    .strip_prefix(data)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                files.push(rel);
            }
        }
    }
    files
}

#[cfg(unix)]
#[test]
fn every_file_serve_writes_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp_dir();
    let data = dir.path().join("data");
    // A data directory made open by hand is tightened at start.
    std::fs::create_dir(&data).unwrap();
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut s = Server::start(&data, &[("DYELINE_STORE__FLUSH_INTERVAL", "1s")]);
    let token = std::fs::read_to_string(data.join("api-token")).unwrap();
    let r = client()
        .put(url(&s, "/api/v1/channels/trade"))
        .bearer_auth(token.trim())
        .json(&json!({"apps": ["order"]}))
        .send()
        .unwrap();
    assert_eq!(r.status(), 201);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64;
    let span = json!({"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "order"}}]},
        "scopeSpans": [{"spans": [{
            "traceId": TRACE, "spanId": "b7ad6b7169203331", "name": "x", "kind": 2,
            "startTimeUnixNano": (now - 5_000_000).to_string(),
            "endTimeUnixNano": now.to_string()}]}]}]});
    assert_eq!(post_json(&s, &span.to_string()).status, 200);
    // While it runs (the flush interval passed: a Parquet file is written): every file the
    // store, SQLite and the token code made.
    let deadline = Instant::now() + Duration::from_secs(10);
    let running = loop {
        let files = private_files(&data);
        if files.iter().any(|f| f.ends_with(".parquet")) || Instant::now() > deadline {
            break files;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    for expected in ["api-token", "control.db", "control.db-wal", "LOCK"] {
        assert!(
            running.iter().any(|f| f == expected),
            "no {expected} in {running:?}"
        );
    }
    assert!(
        running.iter().any(|f| f.ends_with(".parquet")),
        "{running:?}"
    );
    assert!(running.iter().any(|f| f.starts_with("wal/")), "{running:?}");
    assert!(s.stop(), "clean stop");
    let stopped = private_files(&data);
    assert!(
        stopped.iter().any(|f| f.ends_with(".parquet")),
        "{stopped:?}"
    );
}

#[test]
fn open_reads_beyond_loopback_are_warned_about_at_start() {
    let dir = temp_dir();
    for closed in [false, true] {
        let mut child = Command::new(dyeline_bin())
            .args([
                "serve",
                "--otlp-grpc-addr",
                "127.0.0.1:0",
                "--otlp-http-addr",
                "127.0.0.1:0",
            ])
            .args(["--api-addr", "0.0.0.0:0", "--data-dir"])
            .arg(dir.path().join(format!("data-{closed}")))
            .env("DYELINE_LOG", "warn")
            .env("DYELINE_API_TOKEN", TOKEN)
            .env(
                "DYELINE_API__READ_REQUIRES_TOKEN",
                if closed { "true" } else { "false" },
            )
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.contains("api=0.0.0.0:"), "{line}");
        // The warning is printed right after the listening line; give it a moment.
        std::thread::sleep(Duration::from_millis(500));
        let _ = child.kill();
        let _ = child.wait();
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        let warned = err.contains("beyond loopback, and reads need no token")
            && err.contains("api.read_requires_token = true");
        assert_eq!(warned, !closed, "read_requires_token={closed}: {err}");
    }
}
