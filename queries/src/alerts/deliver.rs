//! Delivery of alert changes: to a real Alertmanager (`POST /api/v2/alerts`) and to plain
//! webhooks (Alertmanager's webhook JSON), from a queue with retries and backoff that never
//! blocks ingest or evaluation (reqwest's async client, 10 s timeout per request).

use std::time::Duration;

use dyeline_model::time::rfc3339;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::book::{Alert, AlertState};

fn am_alert(a: &Alert, external_url: &str) -> Value {
    let mut v = json!({
        "labels": a.labels,
        "annotations": a.annotations,
        "startsAt": rfc3339(a.starts_at_unix_nano),
        "generatorURL": format!(
            "{}/channels/{}",
            external_url.trim_end_matches('/'),
            a.labels.get("channel").map_or("", String::as_str)
        ),
    });
    if let Some(end) = a.ends_at_unix_nano {
        v["endsAt"] = json!(rfc3339(end));
    }
    v
}

fn webhook_body(alerts: &[Alert], external_url: &str) -> Value {
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

/// Starts the delivery worker for `alertmanager_url` and `webhooks` (links to
/// `external_url`); it stops when every sender of the returned queue is dropped.
pub fn start(
    alertmanager_url: Option<String>,
    webhooks: Vec<String>,
    external_url: String,
) -> mpsc::Sender<Vec<Alert>> {
    let (tx, mut rx) = mpsc::channel::<Vec<Alert>>(256);
    let targets = (alertmanager_url, webhooks);
    let ext = external_url;
    tokio::spawn(async move {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap_or_default();
        while let Some(alerts) = rx.recv().await {
            if let Some(am) = &targets.0 {
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
