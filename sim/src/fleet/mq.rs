//! [`Topic`]: the demo's in-process MQ topic with consumer groups origin, blue and green
//! (domain §3) and one per lane (§7): where a message goes by its lane and its colour, what a
//! stopped or drained consumer does, and the messages dropped when no consumer runs.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use dyeline_model::{Color, LaneId};
use parking_lot::Mutex;
use tokio::sync::mpsc;

use crate::routing::propagation::{self, Headers};
use crate::routing::{ConfigCache, LaneReader, consumer_group, consumer_lane, decisions_of};

/// State of one MQ consumer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConsumerState {
    /// Consuming its group's messages.
    Running,
    /// Stopped (its side is drained).
    Stopped,
    /// Its side is drained but it was not stopped: it keeps pulling the topic's shared
    /// queue, whatever the messages' colour (MQ returns to 50/50, domain §3).
    RunningDrained,
}

pub(super) struct Message {
    pub(super) headers: Headers,
    pub(super) group: String,
}

struct ConsumerSlot {
    instance: String,
    color: Color,
    lane: LaneId,
    state: ConsumerState,
    tx: mpsc::UnboundedSender<Message>,
}

/// An in-process topic with consumer groups origin, blue and green (domain §3) and one per
/// lane (`<app>-gray`, domain §7). A message tagged for a lane goes to that lane's running
/// consumers while there are any ([`consumer_lane`]; with `mq_leak`, the base consumers take
/// their share of them too), else to base like any other. Among the base consumers, a
/// message's colour is its decision for the consumer app's effective channel: decided
/// messages go to the running consumers of their colour's group (`<app>-blue` /
/// `<app>-green`) plus any consumer left running on a drained side; when that group has none
/// (its side was drained and stopped) the other side takes them over; undecided messages go
/// to the origin group (`<app>-origin`, every running base consumer). Within a pool, round
/// robin.
pub struct Topic {
    consumer_app: String,
    cache: Arc<ConfigCache>,
    lanes: Arc<LaneReader>,
    mq_leak: bool,
    slots: Mutex<Vec<ConsumerSlot>>,
    next: AtomicU64,
    pub(super) dropped: AtomicU64,
}

impl Topic {
    pub(super) fn new(
        consumer_app: &str,
        cache: Arc<ConfigCache>,
        lanes: Arc<LaneReader>,
        mq_leak: bool,
    ) -> Self {
        Topic {
            consumer_app: consumer_app.to_owned(),
            cache,
            lanes,
            mq_leak,
            slots: Mutex::new(Vec::new()),
            next: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    pub(super) fn subscribe(
        &self,
        instance: &str,
        color: Color,
        lane: LaneId,
    ) -> mpsc::UnboundedReceiver<Message> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.slots.lock().push(ConsumerSlot {
            instance: instance.to_owned(),
            color,
            lane,
            state: ConsumerState::Running,
            tx,
        });
        rx
    }

    pub(super) fn set_state(&self, instance: &str, state: ConsumerState) {
        for s in self.slots.lock().iter_mut() {
            if s.instance == instance {
                s.state = state;
            }
        }
    }

    /// The message's colour: its decision for the consumer app's effective channel.
    fn color_of(&self, headers: &Headers) -> Option<Color> {
        let cfg = self.cache.get(&self.consumer_app);
        cfg.channel
            .as_deref()
            .and_then(|c| decisions_of(&propagation::extract(headers, true)).get(c))
    }

    /// Whether a message that reached `instance` should go back to the topic rather than be
    /// consumed there: the consumer was stopped since (its queue is handed back), or the
    /// message is another colour's and that colour's consumers run again (a takeover that
    /// is over).
    pub(super) fn should_redeliver(&self, instance: &str, headers: &Headers) -> bool {
        let slots = self.slots.lock();
        let Some(me) = slots.iter().find(|s| s.instance == instance) else {
            return false;
        };
        match me.state {
            ConsumerState::Stopped => true,
            ConsumerState::RunningDrained => false,
            ConsumerState::Running if !me.lane.is_base() => false,
            ConsumerState::Running => match self.color_of(headers) {
                Some(c) if c != me.color => slots
                    .iter()
                    .any(|s| s.lane.is_base() && s.color == c && s.state == ConsumerState::Running),
                _ => false,
            },
        }
    }

    /// Delivers; returns false when no consumer runs (the message is dropped and counted).
    pub(super) fn publish(&self, headers: Headers) -> bool {
        let color = self.color_of(&headers);
        let tag = self.lanes.read(&headers);
        let slots = self.slots.lock();
        let running = |s: &&ConsumerSlot| s.state != ConsumerState::Stopped;
        let lane = consumer_lane(tag.as_ref(), |l| {
            slots.iter().filter(running).any(|s| s.lane == *l)
        });
        let base: Vec<&ConsumerSlot> = slots
            .iter()
            .filter(running)
            .filter(|s| s.lane.is_base())
            .collect();
        // Base consumers take a message by its colour.
        let base = match color {
            Some(c) => {
                let own: Vec<&ConsumerSlot> = base
                    .iter()
                    .copied()
                    .filter(|s| s.color == c || s.state == ConsumerState::RunningDrained)
                    .collect();
                if own.is_empty() { base } else { own }
            }
            None => base,
        };
        let pool: Vec<&ConsumerSlot> = if lane.is_base() {
            base
        } else {
            let mut own: Vec<&ConsumerSlot> = slots
                .iter()
                .filter(running)
                .filter(|s| s.lane == lane)
                .collect();
            if self.mq_leak {
                own.extend(base);
            }
            own
        };
        if pool.is_empty() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        let i = (self.next.fetch_add(1, Ordering::Relaxed) % pool.len() as u64) as usize;
        let s = pool[i];
        let group = if !s.lane.is_base() {
            consumer_group(&self.consumer_app, &s.lane)
        } else {
            match color {
                Some(_) => format!("{}-{}", self.consumer_app, s.color.as_str()),
                None => format!("{}-origin", self.consumer_app),
            }
        };
        s.tx.send(Message { headers, group }).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::{CacheOptions, ControlClient, Registry, with_lane};
    use opentelemetry::Context;
    use tokio::sync::watch;

    /// A topic with two consumers: `notify-blue-1` (base) and `notify-gray-1` (gray).
    fn topic(mq_leak: bool) -> (Topic, Vec<mpsc::UnboundedReceiver<Message>>) {
        let (_tx, stop) = watch::channel(false);
        let cache = ConfigCache::new(
            ControlClient::new("http://127.0.0.1:9", None),
            Arc::new(Registry::default()),
            CacheOptions { count_aware: true },
            stop,
        );
        let t = Topic::new("notify", cache, Arc::new(LaneReader::default()), mq_leak);
        let gray = LaneId::new("gray").unwrap();
        let rxs = vec![
            t.subscribe("notify-blue-1", Color::Blue, LaneId::base()),
            t.subscribe("notify-gray-1", Color::Unknown, gray),
        ];
        (t, rxs)
    }

    fn message(lane: Option<&str>) -> Headers {
        let l = lane.map(|l| LaneId::new(l).unwrap());
        propagation::inject(&with_lane(&Context::new(), l.as_ref()), true)
    }

    /// Publishes `n` messages tagged `lane`; the groups that took them.
    fn groups(
        t: &Topic,
        rxs: &mut [mpsc::UnboundedReceiver<Message>],
        lane: Option<&str>,
        n: usize,
    ) -> Vec<String> {
        for _ in 0..n {
            assert!(t.publish(message(lane)));
        }
        let mut got = Vec::new();
        for rx in rxs.iter_mut() {
            while let Ok(m) = rx.try_recv() {
                got.push(m.group);
            }
        }
        got.sort();
        got
    }

    #[test]
    fn gray_messages_go_to_the_gray_group_while_it_runs_and_base_never_does() {
        let (t, mut rxs) = topic(false);
        assert_eq!(
            groups(&t, &mut rxs, Some("gray"), 3),
            vec!["notify-gray"; 3]
        );
        assert_eq!(groups(&t, &mut rxs, None, 3), vec!["notify-origin"; 3]);
        // gray2 has no consumer: base takes it.
        assert_eq!(
            groups(&t, &mut rxs, Some("gray2"), 2),
            vec!["notify-origin"; 2]
        );
        t.set_state("notify-gray-1", ConsumerState::Stopped);
        assert_eq!(
            groups(&t, &mut rxs, Some("gray"), 2),
            vec!["notify-origin"; 2]
        );
    }

    #[test]
    fn a_leaking_base_consumer_takes_gray_messages_beside_the_gray_one() {
        let (t, mut rxs) = topic(true);
        let got = groups(&t, &mut rxs, Some("gray"), 4);
        assert_eq!(
            got,
            vec![
                "notify-gray",
                "notify-gray",
                "notify-origin",
                "notify-origin"
            ]
        );
        assert_eq!(groups(&t, &mut rxs, None, 2), vec!["notify-origin"; 2]);
    }
}
