//! Event derivation (domain §4): the events one operation yields on a channel's own stream and
//! on each app's stream, from the channel states before and after it. Pure; the control plane
//! stores the states and numbers the events.

use serde::Serialize;
use utoipa::ToSchema;

use super::channels::{Channels, Effective, NEUTRAL_BLUE_PERCENT, Op};
use crate::ids::ChannelId;

/// The kind of an event (domain §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// The channel (or, on an app stream, the app's release under that channel) started.
    Start,
    /// It finished; the app's effective blue_percent is back at 50.
    Finish,
    /// blue_percent moved `from` → `to`.
    FlowChange,
    /// Derived: `to` = 100 and `from` ≠ 100.
    EnterAllBlue,
    /// Derived: `from` = 100 and `to` ≠ 100.
    ExitAllBlue,
    /// Derived: `to` = 0 and `from` ≠ 0.
    EnterAllGreen,
    /// Derived: `from` = 0 and `to` ≠ 0.
    ExitAllGreen,
}

impl EventKind {
    /// The snake_case name, as in JSON and the SSE `event` field.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Start => "start",
            EventKind::Finish => "finish",
            EventKind::FlowChange => "flow_change",
            EventKind::EnterAllBlue => "enter_all_blue",
            EventKind::ExitAllBlue => "exit_all_blue",
            EventKind::EnterAllGreen => "enter_all_green",
            EventKind::ExitAllGreen => "exit_all_green",
        }
    }
}

/// One event before it is numbered: kind, channel and, on flow changes, from / to / replay.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventBody {
    /// The kind.
    pub event: EventKind,
    /// The channel it comes from.
    pub channel: ChannelId,
    /// On flow changes: (from, to, replay).
    pub flow: Option<(u8, u8, bool)>,
}

impl EventBody {
    fn plain(event: EventKind, channel: &ChannelId) -> Self {
        EventBody {
            event,
            channel: channel.clone(),
            flow: None,
        }
    }
}

/// A flow change `from` → `to` followed by its derived events, exits before enters
/// (domain §4: 100 → 0 gives `exit_all_blue`, then `enter_all_green`).
pub fn flow_change(channel: &ChannelId, from: u8, to: u8, replay: bool) -> Vec<EventBody> {
    let mut out = vec![EventBody {
        event: EventKind::FlowChange,
        channel: channel.clone(),
        flow: Some((from, to, replay)),
    }];
    if from == 100 && to != 100 {
        out.push(EventBody::plain(EventKind::ExitAllBlue, channel));
    }
    if from == 0 && to != 0 {
        out.push(EventBody::plain(EventKind::ExitAllGreen, channel));
    }
    if to == 100 && from != 100 {
        out.push(EventBody::plain(EventKind::EnterAllBlue, channel));
    }
    if to == 0 && from != 0 {
        out.push(EventBody::plain(EventKind::EnterAllGreen, channel));
    }
    out
}

/// The events an app receives when its effective configuration goes from `before` to
/// `after` (domain §4):
///
/// - same channel, new blue_percent: a flow change (from the app's previous effective value)
///   and its derived events;
/// - none → Y: `start(Y)` (and a replayed flow change if Y is not at 50);
/// - X → none: `finish(X)`;
/// - X → Y: `finish(X)`, `start(Y)`, then the replayed `flow_change(Y, 50 → Y's
///   blue_percent, replay = true)` with its derived events.
///
/// Operations that leave the app's effective configuration unchanged yield nothing: events
/// of a channel that is not the app's source are recorded, not delivered.
pub fn app_transition(before: &Effective, after: &Effective) -> Vec<EventBody> {
    match (&before.channel, &after.channel) {
        (None, None) => Vec::new(),
        (None, Some(y)) => {
            let mut out = vec![EventBody::plain(EventKind::Start, y)];
            if after.blue_percent != NEUTRAL_BLUE_PERCENT {
                out.extend(flow_change(
                    y,
                    NEUTRAL_BLUE_PERCENT,
                    after.blue_percent,
                    true,
                ));
            }
            out
        }
        (Some(x), None) => vec![EventBody::plain(EventKind::Finish, x)],
        (Some(x), Some(y)) if x == y => {
            if before.blue_percent == after.blue_percent {
                Vec::new()
            } else {
                flow_change(x, before.blue_percent, after.blue_percent, false)
            }
        }
        (Some(x), Some(y)) => {
            let mut out = vec![
                EventBody::plain(EventKind::Finish, x),
                EventBody::plain(EventKind::Start, y),
            ];
            out.extend(flow_change(
                y,
                NEUTRAL_BLUE_PERCENT,
                after.blue_percent,
                true,
            ));
            out
        }
    }
}

/// The events of `app` for one operation, from the channel states around it.
pub fn app_events(app: &str, before: &Channels, after: &Channels) -> Vec<EventBody> {
    app_transition(&before.effective(app), &after.effective(app))
}

/// The events on channel `id`'s own stream for `op`: `start`, `finish`, or a flow change with
/// its derived events (nothing for a ratio equal to the current one, nor for app-list changes
/// and deletion).
pub fn channel_events(id: &ChannelId, op: &Op, before: &Channels) -> Vec<EventBody> {
    match op {
        Op::Start => vec![EventBody::plain(EventKind::Start, id)],
        Op::Finish => vec![EventBody::plain(EventKind::Finish, id)],
        Op::Ratio(to) => {
            let from = before
                .get(id.as_str())
                .map_or(NEUTRAL_BLUE_PERCENT, |c| c.blue_percent);
            if from == *to {
                Vec::new()
            } else {
                flow_change(id, from, *to, false)
            }
        }
        Op::Apps(_) | Op::Delete => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(v: &[EventBody]) -> Vec<&'static str> {
        v.iter().map(|e| e.event.as_str()).collect()
    }

    #[test]
    fn derived_events_exit_before_enter() {
        let c = ChannelId::new("c").unwrap();
        assert_eq!(
            kinds(&flow_change(&c, 100, 0, false)),
            ["flow_change", "exit_all_blue", "enter_all_green"]
        );
        assert_eq!(
            kinds(&flow_change(&c, 0, 100, false)),
            ["flow_change", "exit_all_green", "enter_all_blue"]
        );
        assert_eq!(kinds(&flow_change(&c, 30, 70, false)), ["flow_change"]);
        assert_eq!(
            kinds(&flow_change(&c, 50, 0, false)),
            ["flow_change", "enter_all_green"]
        );
        assert_eq!(
            kinds(&flow_change(&c, 100, 20, false)),
            ["flow_change", "exit_all_blue"]
        );
    }
}
