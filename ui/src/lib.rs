//! The channel release dashboard (issue 5): Leptos server-side rendered pages, HTML forms
//! and a few lines of JavaScript for live updates, served by `dyeline serve` on the API port.
//!
//! Owns: the pages (`/`, `/channels/{id}`, `/channels/{id}/confirm`, `/traces`,
//! `/traces/{trace_id}`, `/login`), the write forms with their CSRF check and the spike
//! guard ([`guard`]), the live stream `/live`, the static assets, and the port it reads
//! through ([`DashboardSource`]). It never touches the store or the control database
//! directly; the server implements the port.
//!
//! Every page is written in English or Simplified Chinese and shows its times in one zone,
//! as the reader chose ([`locale`]); the text is in `locales/ui.yml`.
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

// The catalog of every page's text, `locales/ui.yml` (English and Simplified Chinese side by
// side), compiled in; looked up with the request's locale, never a process-wide one.
rust_i18n::i18n!("locales", fallback = "en");

/// `tr!(lang, "key")` or `tr!(lang, "key", name = value, …)`: the catalog's text of `key` in
/// `lang` (a [`locale::Lang`]), `%{name}` replaced.
macro_rules! tr {
    ($lang:expr, $key:literal) => {
        rust_i18n::t!($key, locale = $lang.code()).into_owned()
    };
    ($lang:expr, $key:literal, $($name:ident = $value:expr),+ $(,)?) => {
        rust_i18n::t!($key, locale = $lang.code(), $($name = $value),+).into_owned()
    };
}

pub mod chart;
pub mod guard;
pub mod locale;
pub mod pages;
pub mod panels;
pub mod range;
mod routes;
pub mod session;
pub mod source;
#[cfg(test)]
mod tests;

pub use locale::{Lang, TimeZoneSetting, UiSettings};
pub use routes::{Ui, router};
pub use source::{
    Action, AlertLine, AppRow, ChannelPage, ChannelRow, ColorLatency, ColorLoad, DashboardSource,
    Detection, HopEdge, Identity, InstanceRow, LaneAppRow, LaneCell, LaneCountsView,
    LaneErrorSeries, LaneFindingRow, LaneGroupLine, LaneGroupView, LaneInstance, LaneMarkLine,
    LaneScope, LanesIndex, LanesPage, LatencyComparison, MissingRow, OpLine, Overview, SourceError,
    Step, StepPoints, TimeRange, TraceEvent, TraceHit, TraceLink, TraceSearch, TraceSpan,
    TraceView, UnknownInstance, WeightPreview, WindowFinding,
};
