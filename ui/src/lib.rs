//! The channel release dashboard (issue 5): Leptos server-side rendered pages, HTML forms
//! and a few lines of JavaScript for live updates, served by `dyeline serve` on the API port.
//!
//! Owns: the pages (`/`, `/channels/{id}`, `/channels/{id}/confirm`, `/traces`,
//! `/traces/{trace_id}`, `/login`), the write forms with their CSRF check and the spike
//! guard ([`guard`]), the live stream `/live`, the static assets, and the port it reads
//! through ([`DashboardSource`]). It never touches the store or the control database
//! directly; the server implements the port.

pub mod chart;
pub mod guard;
pub mod pages;
pub mod range;
mod routes;
pub mod session;
pub mod source;
#[cfg(test)]
mod tests;

pub use routes::{Ui, router};
pub use source::{
    Action, AlertLine, AppRow, ChannelPage, ChannelRow, ColorLoad, DashboardSource, HopEdge,
    Identity, InstanceRow, MissingRow, OpLine, Overview, SourceError, Step, TimeRange, TraceHit,
    TraceSearch, TraceSpan, TraceView, UnknownInstance, WeightPreview, WindowFinding,
};
