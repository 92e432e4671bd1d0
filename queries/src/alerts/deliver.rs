//! Delivery of alert changes: to every member of an Alertmanager cluster
//! (`POST /api/v2/alerts`), to plain webhooks (Alertmanager's webhook JSON) and to chat
//! robots (one message per alert they take, [`super::robots`]), from a queue that never
//! blocks ingest or evaluation (reqwest's async client, 10 s timeout per request). Targets
//! are sent to side by side; a failed request is tried again with jittered exponential
//! backoff, except a 4xx other than 429 (the target refuses it: sending it again changes
//! nothing). The alert leader of a cluster delivers through [`post_once`] instead
//! ([`super::cluster`]), one alert per request with its idempotency key and epoch.

use std::time::Duration;

use dyeline_model::time::rfc3339;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::book::{Alert, AlertState};
use super::robots::{Robot, accepted};

/// The dashboard page of `a`: its channel's, or for a lane alert its lane group's (`_ungrouped`
/// for an app in no group).
fn page(a: &Alert) -> String {
    match (a.labels.get("channel"), a.labels.get("lane")) {
        (None, Some(_)) => format!(
            "lanes/{}",
            a.labels
                .get("lane_group")
                .map_or("_ungrouped", String::as_str)
        ),
        (channel, _) => format!("channels/{}", channel.map_or("", String::as_str)),
    }
}

pub(super) fn am_alert(a: &Alert, external_url: &str) -> Value {
    let mut v = json!({
        "labels": a.labels,
        "annotations": a.annotations,
        "startsAt": rfc3339(a.starts_at_unix_nano),
        "generatorURL": page_url(a, external_url),
    });
    if let Some(end) = a.ends_at_unix_nano {
        v["endsAt"] = json!(rfc3339(end));
    }
    v
}

pub(super) fn webhook_body(alerts: &[Alert], external_url: &str) -> Value {
    let firing = alerts.iter().any(|a| a.state == AlertState::Firing);
    let items: Vec<Value> = alerts
        .iter()
        .map(|a| {
            let mut v = am_alert(a, external_url);
            v["status"] = json!(if a.state == AlertState::Firing {
                "firing"
            } else {
                "resolved"
            });
            if v.get("endsAt").is_none() {
                v["endsAt"] = json!("0001-01-01T00:00:00Z");
            }
            v
        })
        .collect();
    json!({
        "version": "4",
        "groupKey": "{}:{}",
        "truncatedAlerts": 0,
        "status": if firing { "firing" } else { "resolved" },
        "receiver": "dyeline",
        "groupLabels": {},
        "commonLabels": {},
        "commonAnnotations": {},
        "externalURL": external_url,
        "alerts": items,
    })
}

/// Whether a refused request may succeed if sent again: a server error, a timeout or 429, not
/// another 4xx.
fn worth_retrying(status: reqwest::StatusCode) -> bool {
    status == reqwest::StatusCode::TOO_MANY_REQUESTS || !status.is_client_error()
}

/// `d` scaled by a random factor in [0.5, 1.5): retries of many nodes or targets spread out.
fn jittered(d: Duration) -> Duration {
    d.mul_f64(0.5 + fastrand::f64())
}

/// POSTs `body` to `url` until it is accepted (a 2xx, and `ok` says its body accepts it),
/// refused for good (a 4xx other than 429), or 6 attempts failed.
async fn post_with_retry(
    client: &reqwest::Client,
    url: &str,
    body: &Value,
    ok: impl Fn(&str) -> bool,
    what: &str,
) {
    let mut delay = Duration::from_millis(500);
    for attempt in 1..=6 {
        match client.post(url).json(body).send().await {
            Ok(r) if r.status().is_success() => {
                let text = r.text().await.unwrap_or_default();
                if ok(&text) {
                    return;
                }
                tracing::warn!(
                    target = what,
                    attempt,
                    "alert delivery refused in the answer's body"
                );
            }
            Ok(r) if !worth_retrying(r.status()) => {
                tracing::error!(target = what, status = %r.status(), "alert delivery refused; not sent again");
                return;
            }
            Ok(r) => {
                tracing::warn!(target = what, status = %r.status(), attempt, "alert delivery refused")
            }
            Err(e) => {
                tracing::warn!(target = what, error = %e.without_url(), attempt, "alert delivery failed")
            }
        }
        tokio::time::sleep(jittered(delay)).await;
        delay = (delay * 2).min(Duration::from_secs(30));
    }
    tracing::error!(target = what, "alert delivery given up after retries");
}

/// The header naming a delivery's transition: `<fingerprint>-<starts_at ns>-<firing|resolved>`.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
/// The header carrying the alert leader's epoch.
pub const EPOCH_HEADER: &str = "x-dyeline-epoch";

/// One POST of `body` to `url` (named `name` in the logs: a URL may hold a token) with the
/// idempotency key and epoch headers, abandoned after `within` (the leader's lease left);
/// true when the target accepted it (a 2xx whose body `ok` accepts).
pub(super) async fn post_once(
    client: &reqwest::Client,
    (url, name): (&str, &str),
    body: &Value,
    (key, epoch): (&str, i64),
    within: Duration,
    ok: impl Fn(&str) -> bool,
) -> bool {
    if within.is_zero() {
        return false;
    }
    match client
        .post(url)
        .timeout(within.min(Duration::from_secs(10)))
        .header(IDEMPOTENCY_KEY, key)
        .header(EPOCH_HEADER, epoch)
        .json(body)
        .send()
        .await
    {
        Ok(r) if r.status().is_success() => {
            let text = r.text().await.unwrap_or_default();
            let accepted = ok(&text);
            if !accepted {
                tracing::warn!(
                    target = name,
                    key,
                    "alert delivery refused in the answer's body"
                );
            }
            accepted
        }
        Ok(r) => {
            tracing::warn!(target = name, status = %r.status(), key, "alert delivery refused");
            false
        }
        Err(e) => {
            tracing::warn!(target = name, error = %e.without_url(), key, "alert delivery failed");
            false
        }
    }
}

/// Starts the delivery worker for the Alertmanager members `alertmanagers`, `webhooks` and
/// `robots` (links to `external_url`); it stops when every sender of the returned queue is
/// dropped.
pub fn start(
    alertmanagers: Vec<String>,
    webhooks: Vec<String>,
    robots: Vec<Robot>,
    external_url: String,
) -> mpsc::Sender<Vec<Alert>> {
    let (tx, mut rx) = mpsc::channel::<Vec<Alert>>(256);
    let ext = external_url;
    tokio::spawn(async move {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap_or_default();
        while let Some(alerts) = rx.recv().await {
            let all = |_: &str| true;
            let am_body = Value::Array(alerts.iter().map(|a| am_alert(a, &ext)).collect());
            let hook_body = webhook_body(&alerts, &ext);
            let mut sends: Vec<futures::future::BoxFuture<'_, ()>> = Vec::new();
            for am in &alertmanagers {
                let url = format!("{}/api/v2/alerts", am.trim_end_matches('/'));
                let (client, body) = (&client, &am_body);
                sends.push(Box::pin(async move {
                    post_with_retry(client, &url, body, all, "alertmanager").await;
                }));
            }
            for hook in &webhooks {
                let (client, body) = (&client, &hook_body);
                sends.push(Box::pin(post_with_retry(
                    client, hook, body, all, "webhook",
                )));
            }
            for r in &robots {
                let (client, alerts, ext) = (&client, &alerts, &ext);
                sends.push(Box::pin(async move {
                    for a in alerts.iter().filter(|a| r.takes(a)) {
                        let now_ms = dyeline_model::time::now_unix_nano() / 1_000_000;
                        let (url, body) = r.request(a, &page_url(a, ext), now_ms);
                        let ok = |b: &str| accepted(r.kind, b);
                        post_with_retry(client, &url, &body, ok, r.kind.as_str()).await;
                    }
                }));
            }
            futures::future::join_all(sends).await;
        }
    });
    tx
}

/// The full URL of `a`'s dashboard page.
pub(super) fn page_url(a: &Alert, external_url: &str) -> String {
    format!("{}/{}", external_url.trim_end_matches('/'), page(a))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn alert(labels: &[(&str, &str)]) -> Alert {
        Alert {
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            annotations: BTreeMap::new(),
            state: AlertState::Firing,
            starts_at_unix_nano: 0,
            ends_at_unix_nano: None,
            last_window_end_unix_nano: 0,
            exemplar_trace_ids: Vec::new(),
            window_ns: 1,
        }
    }

    #[test]
    fn an_alert_links_to_its_channel_or_lane_group_page() {
        let url = |a: &Alert| am_alert(a, "http://d:1/")["generatorURL"].clone();
        assert_eq!(
            url(&alert(&[("channel", "trade")])),
            "http://d:1/channels/trade"
        );
        assert_eq!(
            url(&alert(&[("lane_group", "mall"), ("lane", "gray")])),
            "http://d:1/lanes/mall"
        );
        assert_eq!(
            url(&alert(&[("lane", "gray")])),
            "http://d:1/lanes/_ungrouped"
        );
    }
}
