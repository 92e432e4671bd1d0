//! The bounds of one trace view (`[trace_view]`), shared by `GET /api/v1/traces/{id}` and the
//! trace page `/traces/{id}`: which page of the trace's depth-first span order a request
//! gets ([`TraceViews::page`]), and the counters of views (`dyeline_trace_views_total` by
//! outcome, `dyeline_trace_view_spans_left_out_total`). The drilldown itself is
//! [`crate::drilldown`].

use crate::drilldown::{TracePage, TraceView};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// Label: how a trace view ended.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabel {
    /// `whole` (every span returned), `partial` (spans left out: over the cap, or a page
    /// asked for), `refused` (a bad `offset`/`limit`).
    pub outcome: &'static str,
}

/// The trace views' cap and counters.
#[derive(Debug)]
pub struct TraceViews {
    max_spans: usize,
    views: Family<OutcomeLabel, Counter>,
    left_out: Counter,
}

impl TraceViews {
    /// Views of at most `max_spans` spans (`[trace_view] max_spans`).
    pub fn new(max_spans: usize) -> Self {
        let views = Family::default();
        for outcome in ["whole", "partial", "refused"] {
            let _ = views.get_or_create(&OutcomeLabel { outcome });
        }
        Self {
            max_spans: max_spans.max(1),
            views,
            left_out: Counter::default(),
        }
    }

    /// Most spans one view returns.
    pub fn max_spans(&self) -> usize {
        self.max_spans
    }

    /// Registers the counters.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "dyeline_trace_views",
            "Trace views (API and page) by outcome: whole, partial (spans left out), refused",
            self.views.clone(),
        );
        registry.register(
            "dyeline_trace_view_spans_left_out",
            "Spans of viewed traces left out of the view (beyond [trace_view] max_spans or outside the page asked for)",
            self.left_out.clone(),
        );
    }

    /// The page for a request's `offset` (default 0) and `limit` (default and most
    /// [`TraceViews::max_spans`]); a refusal (counted) names the setting.
    ///
    /// # Errors
    /// A message for a `limit` of 0 or above the cap.
    pub fn page(&self, offset: Option<usize>, limit: Option<usize>) -> Result<TracePage, String> {
        let limit = limit.unwrap_or(self.max_spans);
        if limit == 0 || limit > self.max_spans {
            self.refused();
            return Err(format!(
                "limit {limit} is not 1..={}: one trace view returns at most that many spans \
                 (page with offset, or raise [trace_view] max_spans)",
                self.max_spans
            ));
        }
        Ok(TracePage {
            offset: offset.unwrap_or(0),
            limit,
        })
    }

    /// Counts a refused request (a malformed `offset` or `limit`).
    pub fn refused(&self) {
        self.views
            .get_or_create(&OutcomeLabel { outcome: "refused" })
            .inc();
    }

    /// Counts a view served.
    pub fn served(&self, view: &TraceView) {
        let outcome = if view.left_out == 0 {
            "whole"
        } else {
            "partial"
        };
        self.views.get_or_create(&OutcomeLabel { outcome }).inc();
        self.left_out.inc_by(view.left_out as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_default_to_the_cap_and_refuse_more_naming_the_setting() {
        let t = TraceViews::new(100);
        assert_eq!(
            t.page(None, None),
            Ok(TracePage {
                offset: 0,
                limit: 100
            })
        );
        assert_eq!(
            t.page(Some(300), Some(7)),
            Ok(TracePage {
                offset: 300,
                limit: 7
            })
        );
        for bad in [0, 101] {
            let e = t.page(None, Some(bad)).unwrap_err();
            assert!(e.contains("[trace_view] max_spans"), "{e}");
        }
        let refused = t
            .views
            .get_or_create(&OutcomeLabel { outcome: "refused" })
            .get();
        assert_eq!(refused, 2);
    }
}
