//! [`Topic`]: the demo's in-process MQ topic with consumer groups origin, blue and green
//! (domain §3): where a message goes by its colour, what a stopped or drained consumer does,
//! and the messages dropped when no consumer runs.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use dyeline_model::Color;
use parking_lot::Mutex;
use tokio::sync::mpsc;

use crate::routing::propagation::{self, Headers};
use crate::routing::{ConfigCache, decisions_of};

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
    state: ConsumerState,
    tx: mpsc::UnboundedSender<Message>,
}

/// An in-process topic with consumer groups origin, blue and green (domain §3). A message's
/// colour is its decision for the consumer app's effective channel: tagged messages go to
/// the running consumers of their colour's group (`<app>-blue` / `<app>-green`) plus any
/// consumer left running on a drained side; when that group has none (its side was drained
/// and stopped) the other side takes them over; untagged messages go to the origin group
/// (`<app>-origin`, every running consumer). Within a pool, round robin.
pub struct Topic {
    consumer_app: String,
    cache: Arc<ConfigCache>,
    slots: Mutex<Vec<ConsumerSlot>>,
    next: AtomicU64,
    pub(super) dropped: AtomicU64,
}

impl Topic {
    pub(super) fn new(consumer_app: &str, cache: Arc<ConfigCache>) -> Self {
        Topic {
            consumer_app: consumer_app.to_owned(),
            cache,
            slots: Mutex::new(Vec::new()),
            next: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    pub(super) fn subscribe(
        &self,
        instance: &str,
        color: Color,
    ) -> mpsc::UnboundedReceiver<Message> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.slots.lock().push(ConsumerSlot {
            instance: instance.to_owned(),
            color,
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
            ConsumerState::Running => match self.color_of(headers) {
                Some(c) if c != me.color => slots
                    .iter()
                    .any(|s| s.color == c && s.state == ConsumerState::Running),
                _ => false,
            },
        }
    }

    /// Delivers; returns false when no consumer runs (the message is dropped and counted).
    pub(super) fn publish(&self, headers: Headers) -> bool {
        let color = self.color_of(&headers);
        let slots = self.slots.lock();
        let running = |s: &&ConsumerSlot| s.state != ConsumerState::Stopped;
        let pool: Vec<&ConsumerSlot> = match color {
            Some(c) => {
                let own: Vec<&ConsumerSlot> = slots
                    .iter()
                    .filter(running)
                    .filter(|s| s.color == c || s.state == ConsumerState::RunningDrained)
                    .collect();
                if own.is_empty() {
                    slots.iter().filter(running).collect()
                } else {
                    own
                }
            }
            None => slots.iter().filter(running).collect(),
        };
        if pool.is_empty() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        let i = (self.next.fetch_add(1, Ordering::Relaxed) % pool.len() as u64) as usize;
        let s = pool[i];
        let group = match color {
            Some(_) => format!("{}-{}", self.consumer_app, s.color.as_str()),
            None => format!("{}-origin", self.consumer_app),
        };
        s.tx.send(Message { headers, group }).is_ok()
    }
}
