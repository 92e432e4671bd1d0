//! Chat robots (issue 28, item 3): a live cross-colour hop alert reaches robots configured as
//! DingTalk, Feishu, WeCom and Slack, each in its vendor's documented shape, against a
//! recording server that answers as the vendor does. The DingTalk and Feishu signatures are
//! checked with Python's standard library (hmac, hashlib, base64) by the vendors' algorithms,
//! not Dyeline's code. Routing by label: a robot whose `match` the alert does not meet gets
//! nothing. A robot answering 400 is not sent the message again; one answering 429 is.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use crate::cluster_alerts::hop;
use crate::control::{TOKEN, write};
use crate::support::Server;
use crate::util::{post_json, temp_dir};

/// One request: its path with the query, and its JSON body.
#[derive(Debug, Clone)]
struct Got {
    path: String,
    body: Value,
}

/// A server answering each robot path as its vendor does (`/dingtalk`, `/wecom`:
/// `{"errcode":0}`; `/feishu`: `{"code":0}`; `/slack`: `ok`; `/refuse`: 400; `/busy`: 429
/// the first time, then `ok`), keeping every request.
fn vendors() -> (u16, Arc<Mutex<Vec<Got>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let got = Arc::new(Mutex::new(Vec::<Got>::new()));
    let keep = Arc::clone(&got);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            let path = line.split_whitespace().nth(1).unwrap_or("").to_owned();
            let mut len = 0usize;
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
                    break;
                }
                if let Some((k, v)) = h.split_once(':')
                    && k.trim().eq_ignore_ascii_case("content-length")
                {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; len];
            let _ = reader.read_exact(&mut body);
            let seen_busy = {
                let mut g = keep.lock().unwrap();
                let n = g.iter().filter(|x| x.path.starts_with("/busy")).count();
                g.push(Got {
                    path: path.clone(),
                    body: serde_json::from_slice(&body).unwrap_or(Value::Null),
                });
                n
            };
            let (status, answer) = match path.split('?').next().unwrap_or("") {
                "/dingtalk" | "/wecom" => ("200 OK", r#"{"errcode":0,"errmsg":"ok"}"#),
                "/feishu" => ("200 OK", r#"{"code":0,"msg":"success"}"#),
                "/refuse" => ("400 Bad Request", "invalid_payload"),
                "/busy" if seen_busy == 0 => ("429 Too Many Requests", "rate_limited"),
                _ => ("200 OK", "ok"),
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                answer.len()
            );
        }
    });
    (port, got)
}

/// base64(HMAC-SHA256(key, message)) by Python's standard library.
fn python_hmac(key: &str, message: &str) -> String {
    let out = Command::new("python3")
        .args([
            "-c",
            "import sys,hmac,hashlib,base64;\
             print(base64.b64encode(hmac.new(sys.argv[1].encode(),sys.argv[2].encode(),\
             hashlib.sha256).digest()).decode())",
            key,
            message,
        ])
        .output()
        .expect("python3");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// The query parameters of `path`, decoded.
fn query(path: &str) -> BTreeMap<String, String> {
    reqwest::Url::parse(&format!("http://robot{path}"))
        .unwrap()
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

#[test]
fn a_hop_alert_reaches_each_vendors_robot_in_its_shape_and_signature() {
    let dir = temp_dir();
    let (port, got) = vendors();
    let base = format!("http://127.0.0.1:{port}");
    let cfg = dir.path().join("dyeline.toml");
    std::fs::write(
        &cfg,
        format!(
            "[alerts]\ninterval = \"500ms\"\nlateness = \"5s\"\ntrace_quiet = \"1s\"\n\
             [[alerts.robots]]\nkind = \"dingtalk\"\nurl = \"{base}/dingtalk?access_token=tok\"\n\
             secret = \"SEC-ding\"\n\
             [[alerts.robots]]\nkind = \"feishu\"\nurl = \"{base}/feishu\"\nsecret = \"fs-secret\"\n\
             [[alerts.robots]]\nkind = \"wecom\"\nurl = \"{base}/wecom\"\n\
             match = {{ channel = \"other\" }}\n\
             [[alerts.robots]]\nkind = \"slack\"\nurl = \"{base}/slack\"\n\
             match = {{ type = \"cross_color_hop\", channel = \"trade\" }}\n\
             [[alerts.robots]]\nkind = \"slack\"\nurl = \"{base}/refuse\"\n\
             [[alerts.robots]]\nkind = \"slack\"\nurl = \"{base}/busy\"\n"
        ),
    )
    .unwrap();
    let s = Server::start_with(
        &dir.path().join("data"),
        &[("DYELINE_API_TOKEN", TOKEN)],
        &["--config", cfg.to_str().unwrap()],
    );
    write(
        &s,
        "PUT",
        "/api/v1/channels/trade",
        Some(r#"{"apps": ["order", "pay"]}"#),
    );
    write(&s, "POST", "/api/v1/channels/trade/start", None);
    // The hop's spans start 1 s before it is posted: after the release started.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(post_json(&s, &hop(0xb0b, "order", "pay")).status, 200);
    let count = |prefix: &str| {
        got.lock()
            .unwrap()
            .iter()
            .filter(|g| g.path.starts_with(prefix))
            .count()
    };
    let heard = || {
        count("/dingtalk") >= 1
            && count("/feishu") >= 1
            && count("/slack") >= 1
            && count("/busy") >= 2
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !heard() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        heard(),
        "the robots did not hear of the hop within 30 s; they got {:?}; alert metrics:\n{}",
        got.lock()
            .unwrap()
            .iter()
            .map(|g| g.path.clone())
            .collect::<Vec<_>>(),
        s.metrics()
            .lines()
            .filter(|l| l.contains("alert") && !l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n")
    );
    std::thread::sleep(Duration::from_secs(2));
    let all = got.lock().unwrap().clone();
    let one = |prefix: &str| {
        all.iter()
            .find(|g| g.path.starts_with(prefix))
            .unwrap()
            .clone()
    };

    // DingTalk: markdown, signed in the query.
    let d = one("/dingtalk");
    let q = query(&d.path);
    assert_eq!(q["access_token"], "tok");
    let ts = &q["timestamp"];
    assert_eq!(
        q["sign"],
        python_hmac("SEC-ding", &format!("{ts}\nSEC-ding"))
    );
    assert_eq!(d.body["msgtype"], "markdown");
    assert_eq!(d.body["markdown"]["title"], "[FIRING] DyelineCrossColorHop");
    let text = d.body["markdown"]["text"].as_str().unwrap();
    assert!(text.contains(&format!("{:032x}", 0xb0b)), "{text}");
    assert!(text.contains("/channels/trade"), "{text}");

    // Feishu: text, signed in the body (key: timestamp + "\n" + secret, empty message).
    let f = one("/feishu");
    let ts = f.body["timestamp"].as_str().unwrap();
    assert_eq!(f.body["sign"], python_hmac(&format!("{ts}\nfs-secret"), ""));
    assert_eq!(f.body["msg_type"], "text");
    assert!(
        f.body["content"]["text"]
            .as_str()
            .unwrap()
            .starts_with("[FIRING] DyelineCrossColorHop")
    );

    // Slack: its text; WeCom's match (channel other) takes nothing.
    assert!(
        one("/slack").body["text"]
            .as_str()
            .unwrap()
            .starts_with("*[FIRING] DyelineCrossColorHop*")
    );
    assert_eq!(count("/wecom"), 0, "routing by label");
    // 400 is final; 429 is tried again.
    assert_eq!(count("/refuse"), 1, "a 400 was sent again");
    assert!(count("/busy") >= 2);
}
