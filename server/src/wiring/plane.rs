//! The control plane as the queries' port [`Releases`]: the timeline and the channels now.

use std::sync::Arc;

use dyeline_control::ControlPlane;
use dyeline_model::release::Timeline;
use dyeline_queries::ports::Releases;

/// [`Releases`] over the control plane.
pub struct PlaneReleases(pub Arc<ControlPlane>);

impl Releases for PlaneReleases {
    fn timeline(&self) -> Timeline {
        self.0.timeline()
    }

    fn has_channel(&self, id: &str) -> bool {
        self.0.channel(id).is_ok()
    }

    fn effective_channel(&self, app: &str) -> Option<String> {
        self.0.effective(app).channel.map(|c| c.to_string())
    }
}
