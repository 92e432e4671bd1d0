//! Delivery of alert changes: to every member of an Alertmanager cluster
//! (`POST /api/v2/alerts`) and to plain webhooks (Alertmanager's webhook JSON), from a queue
//! with retries and backoff that never blocks ingest or evaluation (reqwest's async client,
//! 10 s timeout per request). The alert leader of a cluster delivers through [`post_once`]
//! instead ([`super::cluster`]), one alert per request with its idempotency key and epoch.

use std::time::Duration;

use dyeline_model::time::rfc3339;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::book::{Alert, AlertState};

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
        "generatorURL": format!("{}/{}", external_url.trim_end_matches('/'), page(a)),
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

async fn post_with_retry(client: &reqwest::Client, url: &str, body: &Value) {
    let mut delay = Duration::from_millis(500);
    for attempt in 1..=6 {
        match client.post(url).json(body).send().await {
            Ok(r) if r.status().is_success() => return,
            Ok(r) => tracing::warn!(url, status = %r.status(), attempt, "alert delivery refused"),
            Err(e) => tracing::warn!(url, error = %e, attempt, "alert delivery failed"),
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(30));
    }
    tracing::error!(url, "alert delivery given up after retries");
}

/// The header naming a delivery's transition: `<fingerprint>-<starts_at ns>-<firing|resolved>`.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
/// The header carrying the alert leader's epoch.
pub const EPOCH_HEADER: &str = "x-dyeline-epoch";

/// One POST of `body` to `url` with the idempotency key and epoch headers, abandoned after
/// `within` (the leader's lease left); true when the target accepted it (a 2xx).
pub(super) async fn post_once(
    client: &reqwest::Client,
    url: &str,
    body: &Value,
    (key, epoch): (&str, i64),
    within: Duration,
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
        Ok(r) if r.status().is_success() => true,
        Ok(r) => {
            tracing::warn!(url, status = %r.status(), key, "alert delivery refused");
            false
        }
        Err(e) => {
            tracing::warn!(url, error = %e, key, "alert delivery failed");
            false
        }
    }
}

/// Starts the delivery worker for the Alertmanager members `alertmanagers` and `webhooks`
/// (links to `external_url`); it stops when every sender of the returned queue is dropped.
pub fn start(
    alertmanagers: Vec<String>,
    webhooks: Vec<String>,
    external_url: String,
) -> mpsc::Sender<Vec<Alert>> {
    let (tx, mut rx) = mpsc::channel::<Vec<Alert>>(256);
    let targets = (alertmanagers, webhooks);
    let ext = external_url;
    tokio::spawn(async move {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap_or_default();
        while let Some(alerts) = rx.recv().await {
            for am in &targets.0 {
                let body = Value::Array(alerts.iter().map(|a| am_alert(a, &ext)).collect());
                post_with_retry(
                    &client,
                    &format!("{}/api/v2/alerts", am.trim_end_matches('/')),
                    &body,
                )
                .await;
            }
            for hook in &targets.1 {
                post_with_retry(&client, hook, &webhook_body(&alerts, &ext)).await;
            }
        }
    });
    tx
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
