//! The channel release dashboard (issue 5): Leptos server-side rendered pages, HTML forms
//! and a few lines of JavaScript for live updates, served by `dyeline serve` on the API port.
//!
//! Owns: the pages (`/`, `/channels/{id}`, `/channels/{id}/confirm`, `/traces`,
//! `/traces/{trace_id}`, `/login`), the write forms with their CSRF check and the spike
//! guard ([`guard`]), the live stream `/live`, the static assets, and the port it reads
//! through ([`DashboardSource`]). It never touches the store or the control database
//! directly; the server implements the port.
//!
//! Each page body ([`pages`]) lays out panels, and each panel (a chart, table or form) is
//! one Leptos `#[component]` in its own file under [`panels`], rendered on the server only.
//!
//! # Adding a panel
//!
//! One obvious file per layer, with the computation outside this crate:
//! 1. A field on [`ChannelPage`] (or [`Overview`]) in `source.rs`, with a plain view-model
//!    type beside the others there if it needs one.
//! 2. The function that computes it from a snapshot: today `server/src/dashboard/parts.rs`
//!    (span-derived parts) or `server/src/dashboard.rs` (live parts); after layout §4.4,
//!    `queries/src/panels.rs`.
//! 3. The field copy where the server builds the page (`DashboardAdapter::channel` in
//!    `server/src/dashboard.rs`; after layout §4.4, `server/src/wiring/dashboard.rs`).
//! 4. A component in `ui/src/panels/` (one file, `pub use`d in `panels/mod.rs`), placed in
//!    the page body (`pages/channel.rs` or `pages/overview.rs`). It renders its heading and
//!    its content; the page groups panels into `<section>`s.
//! 5. A fixture value in `ui/src/tests.rs`, and an assertion that it reaches the HTML.

pub mod chart;
pub mod guard;
pub mod pages;
pub mod panels;
pub mod range;
mod routes;
pub mod session;
pub mod source;
#[cfg(test)]
mod tests;

pub use routes::{Ui, router};
pub use source::{
    Action, AlertLine, AppRow, ChannelPage, ChannelRow, ColorLatency, ColorLoad, DashboardSource,
    Detection, HopEdge, Identity, InstanceRow, LaneAppRow, LaneCell, LaneCountsView,
    LaneErrorSeries, LaneFindingRow, LaneGroupLine, LaneGroupView, LaneInstance, LaneMarkLine,
    LaneScope, LanesIndex, LanesPage, LatencyComparison, MissingRow, OpLine, Overview, SourceError,
    Step, StepPoints, TimeRange, TraceEvent, TraceHit, TraceLink, TraceSearch, TraceSpan,
    TraceView, UnknownInstance, WeightPreview, WindowFinding,
};
