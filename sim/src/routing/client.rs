//! The control API as the routing library reads it: [`ControlClient`] (the effective
//! configuration of an app, its channel's weights, its event stream over server-sent events,
//! the lane groups' fallbacks)
//! and its answer types, [`AppConfig`] and [`AppEvent`].
//!
//! Owns the read routes' paths and bodies and the SSE reconnection with `Last-Event-ID`. Does
//! not own caching or reacting to events ([`super::cache`]).

use std::time::Duration;

use serde::Deserialize;
use tokio::sync::watch;

use super::error::RouteError;
use super::lane::{LaneGroupsBody, LanePolicies};

/// An app's effective configuration as the SDK holds it (domain §4, §5).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppConfig {
    /// The channel the app follows now; `None` outside a release.
    pub channel: Option<String>,
    /// That channel's blue_percent (50 when none).
    pub blue_percent: u8,
    /// Weight of each blue instance, as served by the control API.
    pub blue_weight: u32,
    /// Weight of each green instance.
    pub green_weight: u32,
    /// Sequence number of the newest control operation this reflects.
    pub seq: u64,
}

impl Default for AppConfig {
    fn default() -> Self {
        AppConfig {
            channel: None,
            blue_percent: 50,
            blue_weight: 100,
            green_weight: 100,
            seq: 0,
        }
    }
}

/// One event of an app's stream (domain §4), as the control API sends it.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct AppEvent {
    /// `"<seq>.<n>"`.
    pub id: String,
    /// Operation sequence number.
    pub seq: u64,
    /// `start`, `finish`, `flow_change`, `enter_all_blue`, `exit_all_blue`,
    /// `enter_all_green`, `exit_all_green`.
    pub event: String,
    /// The channel it comes from.
    pub channel: String,
    /// Flow changes: blue_percent before.
    #[serde(default)]
    pub from: Option<u8>,
    /// Flow changes: blue_percent after.
    #[serde(default)]
    pub to: Option<u8>,
}

/// A client of the control API (read routes; the token is sent when given).
#[derive(Clone, Debug)]
pub struct ControlClient {
    base: String,
    token: Option<String>,
    http: reqwest::Client,
}

#[derive(Deserialize)]
struct EffectiveBody {
    channel: Option<String>,
    blue_percent: u8,
    blue_weight: u32,
    green_weight: u32,
    seq: u64,
}

#[derive(Deserialize)]
struct WeightsBody {
    blue_weight: u32,
    green_weight: u32,
}

impl ControlClient {
    /// A client of the API at `base` (e.g. `http://127.0.0.1:8080`).
    pub fn new(base: &str, token: Option<String>) -> Self {
        ControlClient {
            base: base.trim_end_matches('/').to_owned(),
            token,
            http: reqwest::Client::builder()
                .no_proxy()
                .build()
                .unwrap_or_default(),
        }
    }

    /// The API base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    fn get(&self, path: &str) -> reqwest::RequestBuilder {
        let r = self.http.get(format!("{}{path}", self.base));
        match &self.token {
            Some(t) => r.bearer_auth(t),
            None => r,
        }
    }

    async fn json<T: serde::de::DeserializeOwned>(&self, path: &str) -> Result<T, RouteError> {
        let resp = self
            .get(path)
            .timeout(Duration::from_secs(10))
            .send()
            .await
            .map_err(|e| RouteError::Control(format!("GET {path}: {e}")))?;
        if !resp.status().is_success() {
            return Err(RouteError::Control(format!(
                "GET {path}: {}",
                resp.status()
            )));
        }
        resp.json()
            .await
            .map_err(|e| RouteError::Control(format!("GET {path}: {e}")))
    }

    /// The app's effective configuration now, with the weights the API serves for its
    /// channel: count-aware for `counts` = (blue, green) instances when given, else plain.
    ///
    /// # Errors
    /// [`RouteError::Control`] when the API cannot be reached or refuses.
    pub async fn app_config(
        &self,
        app: &str,
        counts: Option<(u32, u32)>,
    ) -> Result<AppConfig, RouteError> {
        let e: EffectiveBody = self.json(&format!("/api/v1/apps/{app}/effective")).await?;
        let mut cfg = AppConfig {
            channel: e.channel,
            blue_percent: e.blue_percent,
            blue_weight: e.blue_weight,
            green_weight: e.green_weight,
            seq: e.seq,
        };
        if let (Some(ch), Some((b, g))) = (&cfg.channel, counts) {
            let w: WeightsBody = self
                .json(&format!(
                    "/api/v1/channels/{ch}/weights?blue_instances={b}&green_instances={g}"
                ))
                .await?;
            cfg.blue_weight = w.blue_weight;
            cfg.green_weight = w.green_weight;
        }
        Ok(cfg)
    }

    /// Every app's lane fallbacks, from the lane groups now (`GET /api/v1/lane-groups`).
    ///
    /// # Errors
    /// [`RouteError::Control`] when the API cannot be reached or refuses.
    pub async fn lane_policies(&self) -> Result<LanePolicies, RouteError> {
        let body: LaneGroupsBody = self.json("/api/v1/lane-groups").await?;
        Ok(LanePolicies::from_groups(&body))
    }

    /// Follows the app's event stream (SSE) after operation `after`, sending each event to
    /// `tx` until `stop` becomes true; reconnects with `Last-Event-ID` when the connection
    /// drops.
    pub async fn follow_events(
        &self,
        app: &str,
        after: u64,
        tx: tokio::sync::mpsc::UnboundedSender<AppEvent>,
        mut stop: watch::Receiver<bool>,
    ) {
        let mut last_id = format!("{after}.{}", u32::MAX);
        loop {
            if *stop.borrow() {
                return;
            }
            let req = self
                .get(&format!("/api/v1/apps/{app}/events/stream"))
                .header("last-event-id", &last_id)
                .send();
            let resp = tokio::select! {
                r = req => r,
                _ = stop.changed() => return,
            };
            if let Ok(mut resp) = resp.and_then(|r| r.error_for_status()) {
                let mut buf = String::new();
                loop {
                    let chunk = tokio::select! {
                        c = resp.chunk() => c,
                        _ = stop.changed() => return,
                    };
                    let Ok(Some(bytes)) = chunk else { break };
                    buf.push_str(&String::from_utf8_lossy(&bytes));
                    while let Some(end) = buf.find("\n\n") {
                        let block: String = buf.drain(..end + 2).collect();
                        for line in block.lines() {
                            if let Some(data) = line.strip_prefix("data:")
                                && let Ok(ev) = serde_json::from_str::<AppEvent>(data.trim())
                            {
                                last_id = ev.id.clone();
                                if tx.send(ev).is_err() {
                                    return;
                                }
                            }
                        }
                    }
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                _ = stop.changed() => return,
            }
        }
    }
}
