//! Alert messages to the chat robots release owners are paged on (issue 28, item 3):
//! DingTalk and Feishu (Lark) custom robots with their signatures, WeCom group robots and Slack
//! incoming webhooks, each in its documented message shape ([`Robot::request`]), each
//! receiving the alerts whose labels match its `match` (routing by label). What an alert says
//! is the same on every vendor ([`text`]): its name and state, summary, labels and a link to
//! its dashboard page. Delivery itself is [`super::deliver`]'s (and the cluster leader's).
//!
//! Signing, as the vendors document it:
//! - DingTalk: `timestamp` (ms) and `sign` query parameters, `sign` = URL-encoded
//!   base64(HMAC-SHA256(key = secret, message = `timestamp + "\n" + secret`)).
//! - Feishu: `timestamp` (s) and `sign` fields in the body, `sign` =
//!   base64(HMAC-SHA256(key = `timestamp + "\n" + secret`, message = empty)).
//!
//! A vendor answers 200 with an error code in the body when it refuses a message
//! ([`accepted`]).

use std::collections::BTreeMap;

use base64::Engine;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::Sha256;

use super::book::{Alert, AlertState};

/// A robot's vendor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RobotKind {
    /// DingTalk custom robot (`https://oapi.dingtalk.com/robot/send?access_token=…`).
    Dingtalk,
    /// Feishu / Lark custom bot (`https://open.feishu.cn/open-apis/bot/v2/hook/…`).
    Feishu,
    /// WeCom group robot (`https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=…`).
    Wecom,
    /// Slack incoming webhook (`https://hooks.slack.com/services/…`).
    Slack,
}

impl RobotKind {
    /// Its name in config and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            RobotKind::Dingtalk => "dingtalk",
            RobotKind::Feishu => "feishu",
            RobotKind::Wecom => "wecom",
            RobotKind::Slack => "slack",
        }
    }
}

/// `[[alerts.robots]]`: one robot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Robot {
    /// Its vendor.
    pub kind: RobotKind,
    /// Its webhook URL (it holds the robot's token: never logged).
    pub url: String,
    /// The signing secret (DingTalk "加签", Feishu "签名校验"); none: unsigned.
    #[serde(default)]
    pub secret: Option<String>,
    /// Labels an alert must have, each with this value, to reach this robot (e.g. `type =
    /// "error_spike"`, `channel = "trade"`); empty: every alert.
    #[serde(default, rename = "match")]
    pub matches: BTreeMap<String, String>,
}

impl Robot {
    /// Whether `a` goes to this robot.
    pub fn takes(&self, a: &Alert) -> bool {
        self.matches.iter().all(|(k, v)| a.labels.get(k) == Some(v))
    }

    /// The URL and body of the message announcing `a`, signed at `now_ms` (Unix ms) where
    /// the vendor signs; `page` is the alert's dashboard link.
    pub fn request(&self, a: &Alert, page: &str, now_ms: i64) -> (String, Value) {
        let (title, body) = text(a, page);
        match self.kind {
            RobotKind::Dingtalk => {
                let mut url = self.url.clone();
                if let Some(secret) = &self.secret {
                    let sign = dingtalk_sign(secret, now_ms);
                    let sep = if url.contains('?') { '&' } else { '?' };
                    let sign: String = percent_encoding::utf8_percent_encode(
                        &sign,
                        percent_encoding::NON_ALPHANUMERIC,
                    )
                    .collect();
                    url = format!("{url}{sep}timestamp={now_ms}&sign={sign}");
                }
                let text = format!("### {title}\n\n{}", body.replace('\n', "\n\n"));
                (
                    url,
                    json!({"msgtype": "markdown", "markdown": {"title": title, "text": text}}),
                )
            }
            RobotKind::Feishu => {
                let mut v = json!({
                    "msg_type": "text",
                    "content": {"text": format!("{title}\n{body}")},
                });
                if let Some(secret) = &self.secret {
                    let ts = now_ms / 1000;
                    v["timestamp"] = json!(ts.to_string());
                    v["sign"] = json!(feishu_sign(secret, ts));
                }
                (self.url.clone(), v)
            }
            RobotKind::Wecom => (
                self.url.clone(),
                json!({"msgtype": "markdown",
                       "markdown": {"content": format!("**{title}**\n{body}")}}),
            ),
            RobotKind::Slack => (
                self.url.clone(),
                json!({"text": format!("*{title}*\n{body}")}),
            ),
        }
    }
}

/// The title and lines of `a`'s message, with `page` its dashboard link.
pub fn text(a: &Alert, page: &str) -> (String, String) {
    let state = match a.state {
        AlertState::Firing => "FIRING",
        AlertState::Resolved => "RESOLVED",
    };
    let name = a.labels.get("alertname").map_or("Dyeline", String::as_str);
    let title = format!("[{state}] {name}");
    let mut lines = Vec::new();
    if let Some(s) = a.annotations.get("summary") {
        lines.push(s.clone());
    }
    let labels: Vec<String> = a
        .labels
        .iter()
        .filter(|(k, _)| *k != "alertname")
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    lines.push(labels.join(", "));
    if !a.exemplar_trace_ids.is_empty() {
        lines.push(format!("traces: {}", a.exemplar_trace_ids.join(", ")));
    }
    lines.push(page.to_owned());
    (title, lines.join("\n"))
}

fn hmac_b64(key: &[u8], message: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(message);
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

/// DingTalk's signature at `timestamp_ms` (before URL encoding).
pub fn dingtalk_sign(secret: &str, timestamp_ms: i64) -> String {
    hmac_b64(
        secret.as_bytes(),
        format!("{timestamp_ms}\n{secret}").as_bytes(),
    )
}

/// Feishu's signature at `timestamp_s`.
pub fn feishu_sign(secret: &str, timestamp_s: i64) -> String {
    hmac_b64(format!("{timestamp_s}\n{secret}").as_bytes(), b"")
}

/// Whether a vendor's 2xx answer `body` accepted the message: DingTalk and WeCom say
/// `errcode` 0, Feishu `code` (or the older `StatusCode`) 0; Slack answers `ok`.
pub fn accepted(kind: RobotKind, body: &str) -> bool {
    let code =
        |v: &Value, keys: &[&str]| keys.iter().find_map(|k| v.get(*k).and_then(Value::as_i64));
    match kind {
        RobotKind::Slack => true,
        RobotKind::Dingtalk | RobotKind::Wecom => {
            serde_json::from_str::<Value>(body).is_ok_and(|v| code(&v, &["errcode"]) == Some(0))
        }
        RobotKind::Feishu => serde_json::from_str::<Value>(body)
            .is_ok_and(|v| code(&v, &["code", "StatusCode"]) == Some(0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alert() -> Alert {
        Alert {
            labels: BTreeMap::from([
                ("alertname".into(), "DyelineErrorSpike".into()),
                ("type".into(), "error_spike".into()),
                ("channel".into(), "trade".into()),
            ]),
            annotations: BTreeMap::from([("summary".into(), "green 10% errors".into())]),
            state: AlertState::Firing,
            starts_at_unix_nano: 0,
            ends_at_unix_nano: None,
            last_window_end_unix_nano: 0,
            exemplar_trace_ids: vec!["0af7651916cd43dd8448eb211c80319c".into()],
            window_ns: 1,
        }
    }

    fn robot(kind: RobotKind, secret: Option<&str>) -> Robot {
        Robot {
            kind,
            url: "https://robot.example/send?access_token=t".into(),
            secret: secret.map(str::to_owned),
            matches: BTreeMap::new(),
        }
    }

    /// The signatures against values computed by the vendors' documented algorithm with
    /// Python's standard library (hmac, hashlib, base64), not this code.
    #[test]
    fn signatures_match_the_vendors_algorithms() {
        // python3 -c 'import hmac,hashlib,base64;s="SECxyz";t=1700000000000;
        //   print(base64.b64encode(hmac.new(s.encode(),f"{t}\n{s}".encode(),hashlib.sha256).digest()).decode())'
        assert_eq!(
            dingtalk_sign("SECxyz", 1_700_000_000_000),
            DINGTALK_EXPECTED
        );
        // python3 -c 'import hmac,hashlib,base64;s="feishu-secret";t=1700000000;
        //   print(base64.b64encode(hmac.new(f"{t}\n{s}".encode(),b"",hashlib.sha256).digest()).decode())'
        assert_eq!(feishu_sign("feishu-secret", 1_700_000_000), FEISHU_EXPECTED);
    }

    const DINGTALK_EXPECTED: &str = "0PUR1j8g85Xg3vlFV/UrEcxXfF5HpCAGzcjrNfyJoyg=";
    const FEISHU_EXPECTED: &str = "OrBzY1Y01Gq+HgJsl+7OfWcMVwc7YocohQm5iiZwjhU=";

    #[test]
    fn each_vendor_gets_its_shape() {
        let a = alert();
        let (url, v) =
            robot(RobotKind::Dingtalk, Some("SECxyz")).request(&a, "http://d/x", 1_700_000_000_000);
        assert!(
            url.starts_with(
                "https://robot.example/send?access_token=t&timestamp=1700000000000&sign="
            ),
            "{url}"
        );
        assert_eq!(v["msgtype"], "markdown");
        assert_eq!(v["markdown"]["title"], "[FIRING] DyelineErrorSpike");
        assert!(
            v["markdown"]["text"]
                .as_str()
                .unwrap()
                .contains("green 10% errors")
        );
        let (_, v) = robot(RobotKind::Feishu, Some("feishu-secret")).request(
            &a,
            "http://d/x",
            1_700_000_000_123,
        );
        assert_eq!(v["timestamp"], "1700000000");
        assert_eq!(v["sign"], FEISHU_EXPECTED);
        assert_eq!(v["msg_type"], "text");
        let (_, v) = robot(RobotKind::Wecom, None).request(&a, "http://d/x", 0);
        assert!(
            v["markdown"]["content"]
                .as_str()
                .unwrap()
                .contains("channel=trade")
        );
        let (_, v) = robot(RobotKind::Slack, None).request(&a, "http://d/x", 0);
        assert!(v["text"].as_str().unwrap().ends_with("http://d/x"));
    }

    #[test]
    fn routing_by_label_and_the_vendors_error_codes() {
        let mut r = robot(RobotKind::Wecom, None);
        assert!(r.takes(&alert()));
        r.matches.insert("channel".into(), "pay".into());
        assert!(!r.takes(&alert()));
        r.matches.insert("channel".into(), "trade".into());
        assert!(r.takes(&alert()));
        assert!(accepted(
            RobotKind::Dingtalk,
            r#"{"errcode":0,"errmsg":"ok"}"#
        ));
        assert!(!accepted(
            RobotKind::Dingtalk,
            r#"{"errcode":310000,"errmsg":"sign not match"}"#
        ));
        assert!(accepted(RobotKind::Feishu, r#"{"code":0,"msg":"success"}"#));
        assert!(accepted(RobotKind::Feishu, r#"{"StatusCode":0}"#));
        assert!(!accepted(
            RobotKind::Feishu,
            r#"{"code":19021,"msg":"sign match fail"}"#
        ));
        assert!(!accepted(RobotKind::Wecom, "not json"));
    }
}
