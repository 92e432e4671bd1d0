//! [`FleetError`]: why the demo fleet could not start or deploy. Each variant shows its cause's
//! own message (transparent), as the boxed error it replaces did.

use crate::routing::RouteError;

/// Why the fleet could not start, or a deploy failed.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// A port that cannot be bound, or its address read.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The HTTP client of the instances cannot be built.
    #[error(transparent)]
    Http(#[from] reqwest::Error),
    /// An instance's OTLP span exporter cannot be built.
    #[error(transparent)]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
    /// A lane carrier the lane reader refuses (as Dyeline would).
    #[error("lane carriers: {0}")]
    Lanes(String),
    /// The control API cannot be read.
    #[error(transparent)]
    Control(#[from] RouteError),
}
