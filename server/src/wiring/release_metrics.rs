//! The release state on `/metrics` (issue 28, item 2), read from the control plane and the
//! alert book at each scrape: `dyeline_channel_blue_percent{channel}` (the share of traffic
//! to blue, 0–100), `dyeline_channel_releasing{channel}` (1 while releasing, 0 idle) and
//! `dyeline_alerts_firing{type}` (firing alerts per finding type, every type listed, 0 when
//! none), so a Grafana panel can draw a release's ratio beside its error rates and alert on
//! alerts.

use std::sync::Arc;

use dyeline_control::ControlPlane;
use dyeline_model::Detection;
use dyeline_model::release::ReleaseState;
use dyeline_queries::alerts::SharedAlerts;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

/// Label: a channel.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ChannelLabel {
    channel: String,
}

/// Label: a finding type.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TypeLabel {
    r#type: String,
}

/// The collector.
pub struct ReleaseMetrics {
    /// The control plane (the channels now).
    pub plane: Arc<ControlPlane>,
    /// The alert book (the firing alerts).
    pub book: SharedAlerts,
}

impl std::fmt::Debug for ReleaseMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReleaseMetrics")
    }
}

fn put<L, M>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    family: &Family<L, M>,
) -> Result<(), std::fmt::Error>
where
    L: Clone + std::hash::Hash + Eq + EncodeLabelSet + std::fmt::Debug,
    M: EncodeMetric + prometheus_client::metrics::TypedMetric + Default,
{
    let metric = encoder.encode_descriptor(name, help, None, family.metric_type())?;
    family.encode(metric)
}

impl Collector for ReleaseMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let blue: Family<ChannelLabel, Gauge> = Family::default();
        let releasing: Family<ChannelLabel, Gauge> = Family::default();
        for c in self.plane.channels() {
            let label = ChannelLabel {
                channel: c.id.to_string(),
            };
            blue.get_or_create(&label).set(i64::from(c.blue_percent));
            releasing
                .get_or_create(&label)
                .set(i64::from(c.state == ReleaseState::Releasing));
        }
        let firing: Family<TypeLabel, Gauge> = Family::default();
        for d in Detection::ALL {
            let _ = firing.get_or_create(&TypeLabel {
                r#type: d.as_str().to_owned(),
            });
        }
        for a in self.book.lock().firing() {
            if let Some(t) = a.labels.get("type") {
                firing.get_or_create(&TypeLabel { r#type: t.clone() }).inc();
            }
        }
        put(
            &mut encoder,
            "dyeline_channel_blue_percent",
            "Share of the channel's traffic sent to blue instances now, 0 to 100 (domain §4)",
            &blue,
        )?;
        put(
            &mut encoder,
            "dyeline_channel_releasing",
            "1 while the channel is releasing, 0 when idle",
            &releasing,
        )?;
        put(
            &mut encoder,
            "dyeline_alerts_firing",
            "Firing alerts of this node's alert book per finding type",
            &firing,
        )
    }
}
