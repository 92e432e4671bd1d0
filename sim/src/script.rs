//! The scripted release `dyeline demo` walks through the control API (domain §4): channel
//! `trade` goes start → drain blue (0) → deploy v2 to blue → 1 → 50 → 100 (drain green) →
//! deploy v2 to green → 50 → finish; channel `pay` overlaps it with its own steps; the global
//! channel releases once at the end. The gray release runs beside it from the start (its lane
//! group is put by [`ControlWriter::setup`]); with `lane-instance-killed`, inventory's only
//! gray instance is killed at 120 s. [`PLAN`] holds the times at speed 1 (about ten minutes,
//! [`PLAN_SECS`]); at `--speed N` each comes N times sooner.
//!
//! Every control step runs inside [`Fleet::quiesce`]: no request or message is in flight
//! across it. A request that straddles a `start` carries no decision for the new channel
//! (a missing decision), one decided before a ratio change lands after it (skewing the new
//! ratio's first window), one decided for a side that is then drained lands there (drained-
//! side traffic once it outlives the grace period) — all true findings on a real fleet, and
//! on a loaded machine at high `--speed` they would blur the faults the demo shows.

// The demo's log of its steps (stdout) and of its lateness (stderr) is the demo's output.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::time::{Duration, Instant};

use dyeline_model::Color;
use serde_json::json;
use tokio::sync::watch;

use crate::fleet::{
    Fleet, KILLED_INSTANCE, LANE_APPS, LANE_ENTRY_APP, LANE_GROUP, LANE_SPIKE_MIN_REQUESTS, LANES,
    PAY_APPS, TRADE_APPS, V2,
};

/// What a step does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// `POST /api/v1/channels/{id}/start`.
    Start(&'static str),
    /// `POST /api/v1/channels/{id}/ratio` with this blue_percent.
    Ratio(&'static str, u8),
    /// `POST /api/v1/channels/{id}/finish`.
    Finish(&'static str),
    /// Deploy version 2 to one colour of the channel's apps.
    Deploy(&'static str, Color),
    /// Kill this instance (only with the `lane-instance-killed` fault).
    Kill(&'static str),
    /// The script's end (nothing happens; the release is over).
    End,
}

/// A step at a time after the script's start (speed 1), seconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Step {
    /// Seconds after the start at speed 1.
    pub at_secs: f64,
    /// The action.
    pub action: Action,
}

const fn step(at_secs: f64, action: Action) -> Step {
    Step { at_secs, action }
}

/// The release at speed 1. Each ratio that a detection judges over whole windows (the 50s
/// of `trade`, where ratio deviation and the error spike show) lasts at least two 60 s
/// windows, so one whole window lies inside it whatever the alignment.
pub const PLAN: [Step; 23] = [
    step(10.0, Action::Start("trade")),
    step(60.0, Action::Start("pay")),
    step(100.0, Action::Ratio("pay", 0)),
    step(120.0, Action::Kill(KILLED_INSTANCE)),
    step(130.0, Action::Ratio("trade", 0)),
    step(140.0, Action::Deploy("pay", Color::Blue)),
    step(170.0, Action::Ratio("pay", 50)),
    step(190.0, Action::Deploy("trade", Color::Blue)),
    step(220.0, Action::Ratio("trade", 1)),
    step(260.0, Action::Ratio("trade", 50)),
    step(270.0, Action::Ratio("pay", 100)),
    step(300.0, Action::Deploy("pay", Color::Green)),
    step(330.0, Action::Ratio("pay", 50)),
    step(380.0, Action::Ratio("trade", 100)),
    step(420.0, Action::Finish("pay")),
    step(430.0, Action::Deploy("trade", Color::Green)),
    step(460.0, Action::Ratio("trade", 50)),
    step(520.0, Action::Finish("trade")),
    step(540.0, Action::Start("global")),
    step(555.0, Action::Ratio("global", 30)),
    step(570.0, Action::Ratio("global", 0)),
    step(585.0, Action::Finish("global")),
    step(PLAN_SECS, Action::End),
];

/// The script's length at speed 1, seconds.
pub const PLAN_SECS: f64 = 600.0;

/// Errors of the script.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// A control API write was refused or failed.
    #[error("control API: {0}")]
    Control(String),
    /// A deploy failed.
    #[error("deploy: {0}")]
    Deploy(String),
    /// The control plane's spike guard refused a ratio change (409 `spike_guard`): its
    /// message.
    #[error("control API: refused by the spike guard: {0}")]
    SpikeGuard(String),
}

/// Writes to the control API with a bearer token.
#[derive(Clone, Debug)]
pub struct ControlWriter {
    base: String,
    token: String,
    http: reqwest::Client,
}

impl ControlWriter {
    /// A writer for the API at `base` using `token` (role write).
    pub fn new(base: &str, token: &str) -> Self {
        ControlWriter {
            base: base.trim_end_matches('/').to_owned(),
            token: token.to_owned(),
            http: reqwest::Client::builder()
                .no_proxy()
                .build()
                .unwrap_or_default(),
        }
    }

    /// One request, retried (up to 5 attempts, 30 s each) when it cannot be sent or the
    /// server answers 5xx, as on a loaded machine. A 409 on a retry of `start` / `finish`
    /// means the first attempt landed and counts as success.
    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> Result<serde_json::Value, ScriptError> {
        let mut last = String::new();
        for attempt in 0..5u32 {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(500 * u64::from(attempt))).await;
            }
            let mut req = self
                .http
                .request(method.clone(), format!("{}{path}", self.base))
                .bearer_auth(&self.token)
                .timeout(Duration::from_secs(30));
            if let Some(b) = &body {
                req = req.json(b);
            }
            let resp = match req.send().await {
                Ok(r) => r,
                Err(e) => {
                    last = format!("{method} {path}: {e}");
                    continue;
                }
            };
            let status = resp.status();
            let text = resp.text().await.unwrap_or_default();
            if status.is_server_error() {
                last = format!("{method} {path}: {status} {text}");
                continue;
            }
            let retried_write = attempt > 0
                && status == reqwest::StatusCode::CONFLICT
                && (path.ends_with("/start") || path.ends_with("/finish"));
            if status == reqwest::StatusCode::CONFLICT {
                let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
                if v["error"]["code"] == "spike_guard" {
                    let message = v["error"]["message"].as_str().unwrap_or(&text);
                    return Err(ScriptError::SpikeGuard(message.to_owned()));
                }
            }
            if !status.is_success() && !retried_write {
                return Err(ScriptError::Control(format!(
                    "{method} {path}: {status} {text}"
                )));
            }
            return Ok(serde_json::from_str(&text).unwrap_or(serde_json::Value::Null));
        }
        Err(ScriptError::Control(last))
    }

    /// Creates channels `trade` and `pay` with their apps, first finishing any release left
    /// open in the data directory (a demo interrupted earlier), and puts the gray release's
    /// lane group ([`lane_group`]), replacing one left there.
    ///
    /// # Errors
    /// [`ScriptError::Control`].
    pub async fn setup(&self) -> Result<(), ScriptError> {
        for id in ["trade", "pay", "global"] {
            let path = format!("/api/v1/channels/{id}");
            if let Ok(c) = self.send(reqwest::Method::GET, &path, None).await
                && c["state"] == "releasing"
            {
                self.send(reqwest::Method::POST, &format!("{path}/finish"), None)
                    .await?;
            }
        }
        for (id, apps) in [("trade", &TRADE_APPS[..]), ("pay", &PAY_APPS[..])] {
            self.send(
                reqwest::Method::PUT,
                &format!("/api/v1/channels/{id}"),
                Some(json!({ "apps": apps })),
            )
            .await?;
        }
        self.send(
            reqwest::Method::PUT,
            &format!("/api/v1/lane-groups/{LANE_GROUP}"),
            Some(lane_group()),
        )
        .await?;
        Ok(())
    }

    /// Performs one control action (not deploys).
    ///
    /// # Errors
    /// [`ScriptError::Control`].
    pub async fn apply(&self, action: Action) -> Result<(), ScriptError> {
        let (path, body) = match action {
            Action::Start(c) => (format!("/api/v1/channels/{c}/start"), None),
            Action::Finish(c) => (format!("/api/v1/channels/{c}/finish"), None),
            Action::Ratio(c, r) => (
                format!("/api/v1/channels/{c}/ratio"),
                Some(json!({ "blue_percent": r })),
            ),
            Action::Deploy(..) | Action::Kill(_) | Action::End => return Ok(()),
        };
        match self.send(reqwest::Method::POST, &path, body.clone()).await {
            // The error-spike fault fires on the side the script moves traffic to: the guard
            // (domain §4) refuses, as it would a release owner. The script goes ahead as an
            // owner who has looked would, with `force` (recorded in the op log), so the walk
            // and its windows stay as planned.
            Err(ScriptError::SpikeGuard(message)) => {
                println!(
                    "demo: the spike guard refused {}: {message}",
                    describe(action)
                );
                println!("demo: forcing it, as a release owner who has looked would (recorded)");
                let mut forced = body.unwrap_or_default();
                forced["force"] = json!(true);
                self.send(reqwest::Method::POST, &path, Some(forced))
                    .await?;
                Ok(())
            }
            other => other.map(|_| ()),
        }
    }
}

/// The gray release's lane group as the demo puts it (`PUT /api/v1/lane-groups/mall`): its
/// apps, the gateway as entry app, lanes `gray` and `gray2` falling back to base, and the
/// lane error spike's minimum requests lowered to the demo's gray share.
pub fn lane_group() -> serde_json::Value {
    let lanes: serde_json::Map<String, serde_json::Value> = LANES
        .iter()
        .map(|l| ((*l).to_owned(), json!({ "fallback": "base" })))
        .collect();
    json!({
        "apps": LANE_APPS,
        "entry_apps": [LANE_ENTRY_APP],
        "lanes": lanes,
        "thresholds": { "spike_min_requests": LANE_SPIKE_MIN_REQUESTS },
    })
}

fn describe(a: Action) -> String {
    match a {
        Action::Start(c) => format!("{c} start"),
        Action::Finish(c) => format!("{c} finish"),
        Action::Ratio(c, r) => format!("{c} blue_percent {r}"),
        Action::Deploy(c, col) => format!("deploy {V2} to {c} {col}"),
        Action::Kill(i) => format!("kill {i} (lane-instance-killed)"),
        Action::End => "end".to_owned(),
    }
}

/// Runs [`PLAN`] at `speed` against `writer` and `fleet`, printing each step on stdout, until
/// its end or until `stop` becomes true (returns `Ok(false)` then).
///
/// # Errors
/// The first control write or deploy that fails.
pub async fn run(
    fleet: &Fleet,
    writer: &ControlWriter,
    speed: f64,
    mut stop: watch::Receiver<bool>,
) -> Result<bool, ScriptError> {
    let t0 = Instant::now();
    // How far the script runs behind its schedule: a step that took longer than planned (a
    // busy machine) pushes the later ones back rather than squeezing the time between them,
    // so each ratio still holds for its whole planned time (the windows the analyzer judges).
    let mut behind = Duration::ZERO;
    let mut said = Duration::ZERO;
    for s in PLAN {
        let planned = t0 + Duration::from_secs_f64(s.at_secs / speed);
        let now = Instant::now();
        if now > planned + behind {
            behind = now - planned;
            if behind >= said + Duration::from_secs(1) {
                said = behind;
                eprintln!(
                    "dyeline demo: the script runs {:.1} s behind its schedule (a step took longer than planned; the machine may be busy); later steps keep their full length",
                    behind.as_secs_f64()
                );
            }
        }
        let at = planned + behind;
        tokio::select! {
            _ = tokio::time::sleep_until(at.into()) => {}
            _ = stop.wait_for(|s| *s) => return Ok(false),
        }
        if s.action == Action::End {
            break;
        }
        match s.action {
            Action::Deploy(ch, color) => {
                let apps: &[&str] = if ch == "trade" {
                    &TRADE_APPS
                } else {
                    &PAY_APPS
                };
                fleet
                    .deploy(apps, color, V2)
                    .await
                    .map_err(|e| ScriptError::Deploy(e.to_string()))?;
            }
            Action::Start(_) | Action::Finish(_) | Action::Ratio(..) => {
                fleet.quiesce(writer.apply(s.action)).await?;
            }
            Action::Kill(_) if !fleet.faults().lane_instance_killed => continue,
            Action::Kill(instance) => {
                fleet.kill(instance).await;
            }
            Action::End => {}
        }
        println!(
            "demo: t={:>6.1}s (speed-1 time {:>5.0}s) {}",
            t0.elapsed().as_secs_f64(),
            s.at_secs,
            describe(s.action)
        );
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_is_a_well_formed_release_in_time_order() {
        assert!(PLAN.windows(2).all(|w| w[0].at_secs < w[1].at_secs));
        assert_eq!(PLAN.last().map(|s| s.action), Some(Action::End));
        assert_eq!(PLAN.last().map(|s| s.at_secs), Some(PLAN_SECS));
        for ch in ["trade", "pay", "global"] {
            let ops: Vec<Action> = PLAN
                .iter()
                .map(|s| s.action)
                .filter(|a| match a {
                    Action::Start(c) | Action::Finish(c) | Action::Ratio(c, _) => *c == ch,
                    _ => false,
                })
                .collect();
            assert_eq!(ops.first(), Some(&Action::Start(ch)), "{ch}");
            assert_eq!(ops.last(), Some(&Action::Finish(ch)), "{ch}");
        }
    }

    /// The lane group the demo puts is one the control plane accepts, with the fleet's lanes,
    /// its entry app and every app that has a lane instance.
    #[test]
    fn the_lane_group_is_valid_and_holds_every_lane_instance() {
        use dyeline_model::release::{LaneGroup, LaneGroupSpec};
        let spec: LaneGroupSpec = serde_json::from_value(lane_group()).unwrap();
        let g = LaneGroup::from_spec(spec, Some(LANE_GROUP)).unwrap();
        assert!(g.is_entry_app(LANE_ENTRY_APP));
        assert_eq!(g.thresholds().spike_min_requests, LANE_SPIKE_MIN_REQUESTS);
        for (app, lane, _) in crate::fleet::LANE_INSTANCES {
            assert!(g.contains(app), "{app}");
            assert!(
                g.lanes().keys().any(|l| l.as_str() == lane),
                "{lane} of {app}"
            );
        }
    }

    /// Ratio deviation and error spikes are judged on whole windows inside one ratio: the
    /// 50 % steps of `trade` (at start and after the blue deploy) last two 60 s windows.
    #[test]
    fn trade_holds_fifty_percent_for_two_windows_twice() {
        let trade: Vec<(f64, Action)> = PLAN
            .iter()
            .filter(|s| match s.action {
                Action::Start(c) | Action::Finish(c) | Action::Ratio(c, _) => c == "trade",
                _ => false,
            })
            .map(|s| (s.at_secs, s.action))
            .collect();
        let long_fifties = trade
            .windows(2)
            .filter(|w| {
                matches!(w[0].1, Action::Start(_) | Action::Ratio(_, 50))
                    && w[1].0 - w[0].0 >= 120.0
            })
            .count();
        assert!(long_fifties >= 2, "{trade:?}");
    }
}
