//! [`ConfigCache`]: the effective configuration of the apps a process calls, kept current
//! from the control API (one watcher per app following its event stream), with the events
//! passed on to subscribers.
//!
//! Owns when a configuration is read again (after every event, retried) and whether weights
//! are count-aware ([`CacheOptions`]). Does not own the HTTP routes ([`super::client`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::{broadcast, watch};

use super::client::{AppConfig, AppEvent, ControlClient};
use super::error::RouteError;
use super::registry::Registry;

/// Options of a [`ConfigCache`].
#[derive(Clone, Copy, Debug)]
pub struct CacheOptions {
    /// Ask the control API for count-aware weights (domain §5: `WB/WG = r/(100−r) · nG/nB`)
    /// using the registry's instance counts, so the blue share is exactly r whatever the
    /// cluster sizes. Without it the plain weights are used, and unequal cluster sizes skew
    /// the share to `nB·WB / (nB·WB + nG·WG)`.
    pub count_aware: bool,
}

struct Watched {
    config: watch::Sender<AppConfig>,
    events: broadcast::Sender<AppEvent>,
}

/// The effective configuration of the apps a process calls, kept current from the control
/// API: one watcher per app reads `GET …/effective` (and the channel's weights), then follows
/// the app's event stream and reads them again after each event. Subscribers get the events
/// too ([`ConfigCache::subscribe`]).
pub struct ConfigCache {
    control: ControlClient,
    registry: Arc<Registry>,
    options: CacheOptions,
    apps: Mutex<HashMap<String, Arc<Watched>>>,
    stop: watch::Receiver<bool>,
}

impl ConfigCache {
    /// A cache reading from `control`, instance counts from `registry`; its watchers end when
    /// `stop` becomes true.
    pub fn new(
        control: ControlClient,
        registry: Arc<Registry>,
        options: CacheOptions,
        stop: watch::Receiver<bool>,
    ) -> Arc<Self> {
        Arc::new(ConfigCache {
            control,
            registry,
            options,
            apps: Mutex::new(HashMap::new()),
            stop,
        })
    }

    /// The control API client.
    pub fn control(&self) -> &ControlClient {
        &self.control
    }

    /// Starts following `app` (once; later calls do nothing) and waits for its first
    /// configuration. Must run inside a tokio runtime.
    ///
    /// # Errors
    /// [`RouteError::Control`] when the first read fails.
    pub async fn watch(self: &Arc<Self>, app: &str) -> Result<(), RouteError> {
        if self.apps.lock().contains_key(app) {
            return Ok(());
        }
        let first = self.control.app_config(app, self.counts(app)).await?;
        let seq = first.seq;
        let (config, _) = watch::channel(first);
        let (events, _) = broadcast::channel(256);
        let w = Arc::new(Watched { config, events });
        {
            let mut apps = self.apps.lock();
            if apps.contains_key(app) {
                return Ok(());
            }
            apps.insert(app.to_owned(), Arc::clone(&w));
        }
        let me = Arc::clone(self);
        let app = app.to_owned();
        tokio::spawn(async move {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
            let follower = {
                let me = Arc::clone(&me);
                let app = app.clone();
                let stop = me.stop.clone();
                tokio::spawn(async move { me.control.follow_events(&app, seq, tx, stop).await })
            };
            while let Some(ev) = rx.recv().await {
                // Read the whole configuration again rather than folding events: the answer
                // also carries the weights, and a missed event cannot leave it stale.
                let mut tries = 0;
                loop {
                    match me.control.app_config(&app, me.counts(&app)).await {
                        Ok(c) => {
                            w.config.send_replace(c);
                            break;
                        }
                        Err(e) if tries < 20 => {
                            tries += 1;
                            tracing::debug!(app, error = %e, "re-reading the effective config");
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                        Err(e) => {
                            tracing::warn!(app, error = %e, "effective config not refreshed");
                            break;
                        }
                    }
                }
                let _ = w.events.send(ev);
            }
            follower.abort();
        });
        Ok(())
    }

    fn counts(&self, app: &str) -> Option<(u32, u32)> {
        self.options.count_aware.then(|| self.registry.counts(app))
    }

    /// The app's configuration now (the neutral default when it is not watched).
    pub fn get(&self, app: &str) -> AppConfig {
        self.apps
            .lock()
            .get(app)
            .map(|w| w.config.borrow().clone())
            .unwrap_or_default()
    }

    /// The app's events from now on (after its configuration was refreshed for each); `None`
    /// when the app is not watched.
    pub fn subscribe(&self, app: &str) -> Option<broadcast::Receiver<AppEvent>> {
        self.apps.lock().get(app).map(|w| w.events.subscribe())
    }

    /// Reads every watched app's configuration from the API now and replaces the cached
    /// one; returns whether all of them were already current.
    ///
    /// # Errors
    /// [`RouteError::Control`].
    pub async fn is_current(&self) -> Result<bool, RouteError> {
        let apps: Vec<(String, Arc<Watched>)> = self
            .apps
            .lock()
            .iter()
            .map(|(a, w)| (a.clone(), Arc::clone(w)))
            .collect();
        let mut current = true;
        for (app, w) in apps {
            let fresh = self.control.app_config(&app, self.counts(&app)).await?;
            let held = w.config.borrow().clone();
            if (held.channel.as_deref(), held.blue_percent)
                != (fresh.channel.as_deref(), fresh.blue_percent)
            {
                current = false;
            }
        }
        Ok(current)
    }
}
