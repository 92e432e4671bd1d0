//! The alert book in a cluster (issue 27, item 3), through the [`AlertCluster`] port: every
//! node evaluates as a single node does, but only the leader feeds the book. Followers
//! replace their book with the stored one at every evaluation (so every node's
//! `/api/v1/alerts` and dashboard show the same alerts). The leader loads the stored book when
//! it takes the lease (a new leader continues the same alerts: same start, no re-fire), then
//! after each evaluation writes the alerts that changed, fenced by its epoch, and only then
//! hands the book to its delivery task.
//!
//! Delivery is an outbox: each alert's latest transition has an idempotency key
//! ([`Alert::delivery_key`]); for every target (each Alertmanager member, each webhook) the
//! leader sends the transitions not recorded as delivered, one alert per request with the key
//! and its epoch as headers, and records each after the target accepted it. A leader that dies
//! between a POST and its record leaves the key unrecorded: the next leader sends it again with
//! the same key (the only repeat). Firing alerts are also re-sent to the Alertmanagers every
//! `resend_interval` (Alertmanager forgets silent ones; it merges them by labels). Nothing is
//! sent once the leader's lease deadline has passed, and no request outlives it (each one's
//! timeout is the lease left).
//!
//! Does not own the election or the storage (the port's implementation).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;

use super::book::{Alert, AlertState, SharedAlerts};
use super::deliver::{am_alert, page_url, post_once, webhook_body};
use super::robots::{Robot, accepted};
use crate::ports::{AlertCluster, ClusterError};

/// What a delivery target is.
#[derive(Debug, Clone)]
enum Kind {
    /// An Alertmanager member (its API).
    Alertmanager,
    /// A webhook (Alertmanager's webhook JSON).
    Webhook,
    /// A chat robot: the alerts it takes, one message each.
    Robot(Robot),
}

/// A delivery target.
#[derive(Debug, Clone)]
struct Target {
    /// Its name in the delivery records and logs: `alertmanager-`, `webhook-` or
    /// `robot-<vendor>-` and a hash of its URL (URLs may carry secrets; the catalog and the
    /// logs keep none).
    name: String,
    /// Where to POST.
    url: String,
    kind: Kind,
}

fn target(url: &str, kind: Kind) -> Target {
    use std::hash::Hasher;
    let mut h = fnv::FnvHasher::default();
    h.write(url.as_bytes());
    let prefix = match &kind {
        Kind::Alertmanager => "alertmanager".to_owned(),
        Kind::Webhook => "webhook".to_owned(),
        Kind::Robot(r) => format!("robot-{}", r.kind.as_str()),
    };
    Target {
        name: format!("{prefix}-{:016x}", h.finish()),
        url: match kind {
            Kind::Alertmanager => format!("{}/api/v2/alerts", url.trim_end_matches('/')),
            _ => url.to_owned(),
        },
        kind,
    }
}

impl Target {
    /// Whether alert `a` goes to it.
    fn takes(&self, a: &Alert) -> bool {
        match &self.kind {
            Kind::Robot(r) => r.takes(a),
            _ => true,
        }
    }

    fn is_alertmanager(&self) -> bool {
        matches!(self.kind, Kind::Alertmanager)
    }

    /// The URL and body announcing `a`.
    fn request(&self, a: &Alert, external_url: &str) -> (String, Value) {
        match &self.kind {
            Kind::Alertmanager => (
                self.url.clone(),
                Value::Array(vec![am_alert(a, external_url)]),
            ),
            Kind::Webhook => (
                self.url.clone(),
                webhook_body(std::slice::from_ref(a), external_url),
            ),
            Kind::Robot(r) => r.request(
                a,
                &page_url(a, external_url),
                dyeline_model::time::now_unix_nano() / 1_000_000,
            ),
        }
    }

    /// Whether a 2xx answer's `body` accepted the delivery.
    fn accepts(&self, body: &str) -> bool {
        match &self.kind {
            Kind::Robot(r) => accepted(r.kind, body),
            _ => true,
        }
    }
}

/// The leader's book as last stored, handed to the delivery task.
pub(super) type Stored = Option<(i64, Vec<Alert>)>;

/// The cluster side of one evaluation.
pub(super) struct ClusterBook {
    cluster: Arc<dyn AlertCluster>,
    book: SharedAlerts,
    /// The epoch whose book is loaded in memory (`None`: following).
    loaded: Option<i64>,
    /// The alerts as stored, by fingerprint: only the ones that differ are written.
    stored: HashMap<String, Alert>,
    deliver: watch::Sender<Stored>,
}

impl ClusterBook {
    /// A cluster book over `cluster` and `book`, with its delivery task for `alertmanagers`
    /// and `webhooks` (links to `external_url`).
    pub(super) fn start(
        cluster: Arc<dyn AlertCluster>,
        book: SharedAlerts,
        alertmanagers: &[String],
        webhooks: &[String],
        robots: &[Robot],
        external_url: String,
        resend: Duration,
    ) -> Self {
        let targets: Vec<Target> = alertmanagers
            .iter()
            .map(|u| target(u, Kind::Alertmanager))
            .chain(webhooks.iter().map(|u| target(u, Kind::Webhook)))
            .chain(
                robots
                    .iter()
                    .map(|r| target(&r.url, Kind::Robot(r.clone()))),
            )
            .collect();
        let (deliver, rx) = watch::channel(None);
        tokio::spawn(deliver_loop(
            Arc::clone(&cluster),
            targets,
            external_url,
            resend,
            rx,
        ));
        Self {
            cluster,
            book,
            loaded: None,
            stored: HashMap::new(),
            deliver,
        }
    }

    /// The cluster port.
    pub(super) fn port(&self) -> &dyn AlertCluster {
        self.cluster.as_ref()
    }

    /// Loads the stored book into memory.
    async fn load(&mut self) -> Result<(), ClusterError> {
        let alerts = self.cluster.load().await?;
        self.stored = alerts
            .iter()
            .map(|a| (a.fingerprint(), a.clone()))
            .collect();
        self.book.lock().replace(alerts);
        Ok(())
    }

    /// After one evaluation: a follower reads the stored book; the leader runs `evaluate` on
    /// its book (loaded first when it just took the lease), stores what changed and hands the
    /// book to delivery.
    pub(super) async fn step(
        &mut self,
        evaluate: impl FnOnce(&mut super::book::AlertBook) -> Vec<super::book::Change>,
    ) {
        let Some(epoch) = self.cluster.leading() else {
            self.loaded = None;
            if let Err(e) = self.load().await {
                tracing::warn!(error = %e, "alert book not read from the cluster");
            }
            return;
        };
        if self.loaded != Some(epoch) {
            if let Err(e) = self.load().await {
                tracing::warn!(error = %e, epoch, "alert leader: the stored book cannot be read; not evaluating");
                return;
            }
            tracing::info!(
                epoch,
                alerts = self.stored.len(),
                "alert leader: book loaded"
            );
            self.loaded = Some(epoch);
        }
        let (changes, all) = {
            let mut b = self.book.lock();
            let changes = evaluate(&mut b);
            (changes, b.list(None))
        };
        for c in &changes {
            let (super::book::Change::Fired(a) | super::book::Change::Resolved(a)) = c;
            tracing::info!(alert = %a.labels["alertname"], state = ?a.state, labels = ?a.labels, epoch, "alert");
        }
        let changed: Vec<Alert> = all
            .iter()
            .filter(|a| self.stored.get(&a.fingerprint()) != Some(*a))
            .cloned()
            .collect();
        if !changed.is_empty() {
            match self.cluster.save(epoch, &changed).await {
                Ok(()) => {
                    for a in changed {
                        self.stored.insert(a.fingerprint(), a);
                    }
                }
                Err(e) => {
                    if matches!(e, ClusterError::Fenced(_)) {
                        self.loaded = None;
                    }
                    tracing::warn!(error = %e, epoch, "alert book not stored; nothing delivered");
                    return;
                }
            }
        }
        self.deliver.send_replace(Some((epoch, all)));
    }
}

/// The delivery task: at every stored book, sends each target the transitions it has not
/// been recorded to have, while this node leads with the book's epoch.
async fn deliver_loop(
    cluster: Arc<dyn AlertCluster>,
    targets: Vec<Target>,
    external_url: String,
    resend: Duration,
    mut rx: watch::Receiver<Stored>,
) {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap_or_default();
    let mut last_resend = tokio::time::Instant::now();
    while rx.changed().await.is_ok() {
        let Some((epoch, alerts)) = rx.borrow_and_update().clone() else {
            continue;
        };
        if cluster.leading() != Some(epoch) {
            continue;
        }
        let keys: Vec<String> = alerts.iter().map(Alert::delivery_key).collect();
        let delivered = match cluster.delivered(&keys).await {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(error = %e, "alert deliveries not read; trying at the next evaluation");
                continue;
            }
        };
        // Each target in turn through its own pending transitions; targets side by side, so
        // one member that does not answer delays no other.
        let sends = targets.iter().map(|t| {
            let pending: Vec<(&Alert, &String)> = alerts
                .iter()
                .zip(&keys)
                .filter(|(a, _)| t.takes(a))
                .filter(|(_, k)| !delivered.contains(&((*k).clone(), t.name.clone())))
                .collect();
            let (cluster, client, ext) = (&cluster, &client, external_url.as_str());
            async move {
                for (a, key) in pending {
                    if cluster.leading() != Some(epoch) {
                        return; // the lease's deadline passed: not one more request
                    }
                    let (url, body) = t.request(a, ext);
                    let within = cluster.lease_left();
                    let to = (url.as_str(), t.name.as_str());
                    let ok = |b: &str| t.accepts(b);
                    if !post_once(client, to, &body, (key, epoch), within, ok).await {
                        continue; // tried again at the next evaluation
                    }
                    match cluster.record(epoch, key, &t.name).await {
                        Ok(()) => {}
                        Err(ClusterError::Fenced(_)) => return,
                        Err(e) => {
                            tracing::warn!(error = %e, key, "alert delivery not recorded; it will be sent again");
                        }
                    }
                }
            }
        });
        futures::future::join_all(sends).await;
        if last_resend.elapsed() >= resend {
            last_resend = tokio::time::Instant::now();
            let firing: Vec<&Alert> = alerts
                .iter()
                .filter(|a| a.state == AlertState::Firing)
                .collect();
            let resends = targets.iter().filter(|t| t.is_alertmanager()).map(|t| {
                let (cluster, client, ext) = (&cluster, &client, external_url.as_str());
                let firing = &firing;
                async move {
                    for a in firing {
                        if cluster.leading() != Some(epoch) {
                            return;
                        }
                        let body = Value::Array(vec![am_alert(a, ext)]);
                        let within = cluster.lease_left();
                        let to = (t.url.as_str(), t.name.as_str());
                        let key = a.delivery_key();
                        post_once(client, to, &body, (&key, epoch), within, |_| true).await;
                    }
                }
            });
            futures::future::join_all(resends).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashSet};

    use parking_lot::Mutex;

    use super::*;
    use crate::alerts::book::AlertBook;

    /// The port in memory: who leads, the stored book, the recorded deliveries; `record`
    /// fails while `lose_records` (a leader dying between a POST and its record).
    #[derive(Default)]
    struct Fake {
        leading: Mutex<Option<i64>>,
        book: Mutex<Vec<Alert>>,
        delivered: Mutex<HashSet<(String, String)>>,
        lose_records: Mutex<bool>,
    }

    #[async_trait::async_trait]
    impl AlertCluster for Fake {
        fn leading(&self) -> Option<i64> {
            *self.leading.lock()
        }
        fn lease_left(&self) -> Duration {
            if self.leading().is_some() {
                Duration::from_secs(5)
            } else {
                Duration::ZERO
            }
        }
        async fn load(&self) -> Result<Vec<Alert>, ClusterError> {
            Ok(self.book.lock().clone())
        }
        async fn save(&self, epoch: i64, alerts: &[Alert]) -> Result<(), ClusterError> {
            if self.leading() != Some(epoch) {
                return Err(ClusterError::Fenced(epoch));
            }
            let mut b = self.book.lock();
            for a in alerts {
                b.retain(|x| x.labels != a.labels);
                b.push(a.clone());
            }
            Ok(())
        }
        async fn delivered(
            &self,
            keys: &[String],
        ) -> Result<HashSet<(String, String)>, ClusterError> {
            Ok(self
                .delivered
                .lock()
                .iter()
                .filter(|(k, _)| keys.contains(k))
                .cloned()
                .collect())
        }
        async fn record(&self, epoch: i64, key: &str, target: &str) -> Result<(), ClusterError> {
            if *self.lose_records.lock() {
                return Err(ClusterError::Unavailable("killed before recording".into()));
            }
            if self.leading() != Some(epoch) {
                return Err(ClusterError::Fenced(epoch));
            }
            self.delivered.lock().insert((key.into(), target.into()));
            Ok(())
        }
        fn node(&self) -> String {
            "fake".into()
        }
        async fn publish(&self, _: Vec<u8>, _: Vec<u8>) -> Result<(), ClusterError> {
            Ok(())
        }
        async fn other_signals(&self) -> Result<Vec<Vec<u8>>, ClusterError> {
            Ok(Vec::new())
        }
        async fn shares(&self) -> Result<(Vec<(String, Vec<u8>)>, Vec<String>), ClusterError> {
            Ok((Vec::new(), Vec::new()))
        }
    }

    /// A webhook on a free port: the (idempotency key, epoch) of every request it got.
    async fn webhook() -> (String, Arc<Mutex<Vec<(String, String)>>>) {
        let got: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
        let keep = Arc::clone(&got);
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(move |h: axum::http::HeaderMap| {
                let keep = Arc::clone(&keep);
                async move {
                    let get = |n: &str| {
                        h.get(n)
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or("")
                            .to_owned()
                    };
                    keep.lock().push((
                        get(super::super::deliver::IDEMPOTENCY_KEY),
                        get(super::super::deliver::EPOCH_HEADER),
                    ));
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        (url, got)
    }

    fn firing() -> Alert {
        Alert {
            labels: BTreeMap::from([("alertname".into(), "DyelineErrorSpike".into())]),
            annotations: BTreeMap::new(),
            state: AlertState::Firing,
            starts_at_unix_nano: 42,
            ends_at_unix_nano: None,
            last_window_end_unix_nano: 60,
            exemplar_trace_ids: Vec::new(),
            window_ns: 60,
        }
    }

    async fn settle() {
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    /// Waits (up to 20 s: a loaded CI machine delivers slowly) until the webhook got `n`
    /// requests.
    async fn received(got: &Mutex<Vec<(String, String)>>, n: usize) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while got.lock().len() < n && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// A leader killed after the POST and before its record: the next leader sends the
    /// same key again (the only repeat), records it, and sends it no more; a follower
    /// sends nothing.
    #[tokio::test]
    async fn an_unrecorded_delivery_is_sent_again_with_its_key_and_a_recorded_one_never() {
        let (hook, got) = webhook().await;
        let fake = Arc::new(Fake::default());
        *fake.leading.lock() = Some(1);
        *fake.lose_records.lock() = true;
        let start = |fake: &Arc<Fake>| {
            ClusterBook::start(
                Arc::clone(fake) as Arc<dyn AlertCluster>,
                Arc::new(Mutex::new(AlertBook::default())),
                &[],
                std::slice::from_ref(&hook),
                &[],
                "http://dyeline".into(),
                Duration::from_secs(3600),
            )
        };
        let mut first = start(&fake);
        first
            .step(|b| {
                b.replace(vec![firing()]);
                Vec::new()
            })
            .await;
        received(&got, 1).await;
        let key = firing().delivery_key();
        assert_eq!(*got.lock(), [(key.clone(), "1".to_owned())]);
        drop(first); // killed; its record never made
        *fake.lose_records.lock() = false;
        *fake.leading.lock() = Some(2);
        let mut second = start(&fake);
        second.step(|_| Vec::new()).await;
        received(&got, 2).await;
        // Further steps of the same leader send nothing again.
        for _ in 0..2 {
            second.step(|_| Vec::new()).await;
            settle().await;
        }
        assert_eq!(
            *got.lock(),
            [(key.clone(), "1".to_owned()), (key.clone(), "2".to_owned())]
        );
        // The continued alert kept its start; a follower only reads.
        assert_eq!(second.book.lock().firing()[0].starts_at_unix_nano, 42);
        *fake.leading.lock() = None;
        second
            .step(|b| {
                b.replace(Vec::new());
                Vec::new()
            })
            .await;
        settle().await;
        assert_eq!(got.lock().len(), 2);
        assert_eq!(
            second.book.lock().list(None).len(),
            1,
            "a follower serves the stored book"
        );
    }
}
