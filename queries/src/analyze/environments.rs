//! The deployment environment as a dimension (issue 28, item 9): the spans of each
//! environment (`deployment_environment`, resource `deployment.environment.name`) are judged
//! apart, so no window, ratio, trace walk or lane judgement mixes staging with production;
//! each finding carries its environment, and a report of several is the reports of each, one
//! after the other ([`report_by_environment`]). A span without an environment is judged with
//! the others that have none (environment null).
//!
//! Owns the split's use and the merge of the reports; [`Spans::by_environment`] splits the
//! records and [`EnvironmentFilter`] (beside them) says which are read; `analyze::run` leaves
//! a windowed count of several environments to this path.

use super::config::AnalyzerConfig;
use super::findings::Detection;
use super::report::{Report, report_of};
pub use super::spans::EnvironmentFilter;
use super::spans::Spans;

/// [`report_of`] for each environment of `spans` that `filter` admits, each report's findings
/// tagged with its environment, the reports merged ([`absorb`]); an empty report of the
/// detections when none is admitted.
pub fn report_by_environment(
    spans: Spans,
    config: &AnalyzerConfig,
    with_decisions: bool,
    detections: &[Detection],
    filter: &EnvironmentFilter,
) -> Report {
    let mut out: Option<Report> = None;
    for (env, part) in spans.by_environment() {
        if !filter.admits(env.as_deref()) {
            continue;
        }
        let mut r = report_of(&part, config, with_decisions, detections);
        tag(&mut r, env.as_deref());
        match &mut out {
            Some(o) => absorb(o, r),
            None => out = Some(r),
        }
    }
    out.unwrap_or_else(|| report_of(&Spans::default(), config, with_decisions, detections))
}

/// Sets `env` as the environment of every finding of `r`.
pub fn tag(r: &mut Report, env: Option<&str>) {
    let Some(env) = env else { return };
    let e = || Some(env.to_owned());
    r.cross_color_hops
        .iter_mut()
        .for_each(|f| f.environment = e());
    r.missing_decisions
        .iter_mut()
        .for_each(|f| f.environment = e());
    r.drained_side.iter_mut().for_each(|f| f.environment = e());
    r.ratio_deviation
        .iter_mut()
        .for_each(|f| f.environment = e());
    r.instance_skew.iter_mut().for_each(|f| f.environment = e());
    r.error_spike.iter_mut().for_each(|f| f.environment = e());
    if let Some(l) = &mut r.lane {
        l.leaks.iter_mut().for_each(|f| f.environment = e());
        l.tags_dropped.iter_mut().for_each(|f| f.environment = e());
        l.pollution.iter_mut().for_each(|f| f.environment = e());
        l.tags_changed.iter_mut().for_each(|f| f.environment = e());
        l.error_spikes.iter_mut().for_each(|f| f.environment = e());
        l.coverage.iter_mut().for_each(|f| f.environment = e());
    }
}

/// Adds the report of another environment's spans of the same load to `into`: spans and
/// counts add up, the lists follow one another. The instances (with their colour rules) and
/// the count of instances with an invalid lane value come from the load's tables, which every
/// part of [`Spans::by_environment`] shares: `into`'s stand. The instances' lanes are those of
/// each part's spans (and presence signals): kept once each, by instance.
fn absorb(into: &mut Report, other: Report) {
    let Report {
        spans,
        instances: _,
        decisions,
        malformed_pairs,
        conflicting_decisions,
        baggage_faults_read,
        cross_color_hops,
        missing_decisions,
        drained_side,
        ratio_deviation,
        instance_skew,
        error_spike,
        detections: _,
        lanes,
        lane_tags,
        lane,
        orphan_starts,
    } = other;
    into.spans += spans;
    if let (Some(a), Some(b)) = (&mut into.decisions, decisions) {
        a.extend(b);
    }
    into.malformed_pairs.total += malformed_pairs.total;
    into.malformed_pairs.spans.extend(malformed_pairs.spans);
    into.conflicting_decisions.extend(conflicting_decisions);
    into.baggage_faults_read &= baggage_faults_read;
    into.cross_color_hops.extend(cross_color_hops);
    into.missing_decisions.extend(missing_decisions);
    into.drained_side.extend(drained_side);
    into.ratio_deviation.extend(ratio_deviation);
    into.instance_skew.extend(instance_skew);
    into.error_spike.extend(error_spike);
    if let (Some(a), Some(b)) = (&mut into.lanes, lanes) {
        a.extend(b);
        a.sort_by(|x, y| (&x.instance, &x.app).cmp(&(&y.instance, &y.app)));
        a.dedup();
    }
    if let (Some(a), Some(b)) = (&mut into.lane_tags, lane_tags) {
        a.extend(b);
    }
    if let (Some(a), Some(b)) = (&mut into.lane, lane) {
        let invalid = a.counts.invalid_instance_lanes;
        a.absorb(b);
        a.counts.invalid_instance_lanes = invalid;
    }
    into.orphan_starts.extend(orphan_starts);
}

#[cfg(test)]
mod tests {
    use dyeline_model::Color;

    use super::*;
    use crate::analyze::testkit::{B, Sp, releasing};

    /// A release of `trade` at 50 % in two environments: production's green side errs,
    /// staging's blue side errs, and each carries the same cross-colour hop. Judged apart there are two
    /// one-sided spikes, production's green and staging's blue; mixed, both colours would err
    /// at the same rate and neither would spike. The filter keeps one environment only.
    #[test]
    fn each_environment_is_judged_apart_and_its_findings_carry_it() {
        let mut b = B::new();
        releasing(&mut b, "trade", &["order", "pay"], 50);
        let mut trace = 10u128;
        for i in 0..120 {
            for (env, color, error) in [
                ("production", Color::Blue, false),
                ("production", Color::Green, true),
                ("staging", Color::Blue, true),
                ("staging", Color::Green, false),
            ] {
                trace += 1;
                b.span(Sp {
                    trace,
                    span: 1,
                    app: "order",
                    instance: if color == Color::Blue {
                        "order-blue-1"
                    } else {
                        "order-green-1"
                    },
                    color,
                    t: f64::from(i) * 0.4,
                    decisions: &[("trade", color)],
                    error,
                    env: Some(env),
                    ..Sp::default()
                });
            }
        }
        // In each environment, blue order calls green pay under a blue decision.
        for (trace, env) in [(1, "staging"), (2, "production")] {
            for (span, parent, app, color, t) in [
                (1, None, "order", Color::Blue, 5.0),
                (2, Some(1), "pay", Color::Green, 5.1),
            ] {
                b.span(Sp {
                    trace,
                    span,
                    parent,
                    app,
                    instance: if color == Color::Blue {
                        "x-blue-1"
                    } else {
                        "x-green-1"
                    },
                    color,
                    t,
                    decisions: &[("trade", Color::Blue)],
                    env: Some(env),
                    ..Sp::default()
                });
            }
        }
        let spans = b.resolved();
        let config = AnalyzerConfig::default();
        let run = |filter: EnvironmentFilter| {
            report_by_environment(
                spans.clone(),
                &config,
                false,
                &Detection::BLUE_GREEN,
                &filter,
            )
        };
        let all = run(EnvironmentFilter::All);
        assert_eq!(all.spans, 484);
        let hop_envs: Vec<_> = all
            .cross_color_hops
            .iter()
            .map(|h| h.environment.as_deref())
            .collect();
        assert_eq!(hop_envs, [Some("production"), Some("staging")]);
        // The same hop in two environments is two alerts, each counting its own one hop.
        let mut seen = Default::default();
        let alerts: Vec<_> = all
            .findings_of(Detection::CrossColorHop)
            .map(|f| f.alert(&config, &mut seen))
            .collect();
        assert_eq!(alerts.len(), 2);
        assert_ne!(alerts[0].labels, alerts[1].labels);
        for (a, env) in alerts.iter().zip(["production", "staging"]) {
            assert_eq!(a.labels["environment"], env);
            assert_eq!(a.counted.as_ref().map(|c| c.0), Some(1));
        }
        // Each side's spike is found for the channel and for its app.
        let mut spikes: Vec<_> = all
            .error_spike
            .iter()
            .map(|s| (s.environment.as_deref(), s.color))
            .collect();
        assert_eq!(spikes.len(), 4);
        spikes.dedup();
        assert_eq!(
            spikes,
            [
                (Some("production"), Color::Green),
                (Some("staging"), Color::Blue)
            ]
        );
        let prod = run(EnvironmentFilter::of(Some("production")));
        assert_eq!(prod.spans, 242);
        assert_eq!(prod.cross_color_hops.len(), 1);
        assert_eq!(prod.error_spike.len(), 2);
        let staging = run(EnvironmentFilter::of(Some("staging")));
        assert_eq!(staging.spans, 242);
        assert_eq!(staging.cross_color_hops.len(), 1);
        let hop = staging
            .findings_of(Detection::CrossColorHop)
            .next()
            .unwrap();
        assert!(
            hop.line().ends_with(" (environment staging)"),
            "{}",
            hop.line()
        );
        let json = serde_json::to_value(&staging).unwrap();
        assert_eq!(json["cross_color_hops"][0]["environment"], "staging");
        assert_eq!(run(EnvironmentFilter::of(Some("qa"))).spans, 0);
    }

    /// A lane carrier that gave no lane id is counted once, in its own span's environment,
    /// whatever the number of environments.
    #[test]
    fn a_malformed_lane_tag_is_counted_once_in_its_environment() {
        let mut b = B::new();
        for (trace, env) in [(1, "production"), (2, "staging"), (3, "qa")] {
            b.span(Sp {
                trace,
                env: Some(env),
                ..Sp::default()
            });
        }
        let mut spans = b.resolved();
        spans.lanes.carriers.insert((2, 1, true), (None, 1));
        let config = AnalyzerConfig::default();
        let lanes = |filter: EnvironmentFilter| {
            report_by_environment(spans.clone(), &config, false, &Detection::LANE, &filter)
                .lane
                .unwrap()
                .counts
                .malformed_lane_tags
        };
        assert_eq!(lanes(EnvironmentFilter::All), 1);
        assert_eq!(lanes(EnvironmentFilter::of(Some("staging"))), 1);
        assert_eq!(lanes(EnvironmentFilter::of(Some("qa"))), 0);
    }

    /// Spans without an environment are judged as before: one part, findings without the key.
    #[test]
    fn spans_without_an_environment_are_one_part_and_findings_leave_it_out() {
        let mut b = B::new();
        b.span(Sp::default());
        let spans = b.resolved();
        let parts = spans.clone().by_environment();
        assert_eq!(parts.len(), 1);
        assert_eq!(parts[0].0, None);
        assert_eq!(parts[0].1.len(), 1);
        let mut b = B::new();
        b.span(Sp {
            env: Some("qa"),
            ..Sp::default()
        })
        .span(Sp {
            trace: 2,
            ..Sp::default()
        });
        let parts = b.resolved().by_environment();
        let names: Vec<_> = parts.iter().map(|(e, p)| (e.clone(), p.len())).collect();
        assert_eq!(names, [(None, 1), (Some("qa".to_owned()), 1)]);
    }
}
