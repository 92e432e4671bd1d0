//! The deployment environment as a dimension (issue 28, item 9): the spans of each
//! environment (`deployment_environment`, resource `deployment.environment.name`) are judged
//! apart, so no window, ratio, trace walk or lane judgement mixes staging with production;
//! each finding carries its environment, and a report of several is the reports of each, one
//! after the other ([`report_by_environment`]). A span without an environment is judged with
//! the others that have none (environment null).
//!
//! Owns the split's use and the merge of the reports; [`Spans::by_environment`] splits the
//! records, [`crate::analyze::read::files`] leaves a windowed count of several environments
//! to this path.

use super::config::AnalyzerConfig;
use super::findings::Detection;
use super::report::{Report, report_of};
use super::spans::Spans;

/// Which environments an analysis reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum EnvironmentFilter {
    /// Every environment, each judged apart.
    #[default]
    All,
    /// Only the spans of this environment.
    Only(String),
}

impl EnvironmentFilter {
    /// The filter of an optional `environment` parameter (absent or empty: all).
    pub fn of(environment: Option<&str>) -> Self {
        match environment.map(str::trim).filter(|e| !e.is_empty()) {
            Some(e) => Self::Only(e.to_owned()),
            None => Self::All,
        }
    }

    /// True when spans of environment `env` (`None`: none) are read.
    pub fn admits(&self, env: Option<&str>) -> bool {
        match self {
            Self::All => true,
            Self::Only(e) => env == Some(e.as_str()),
        }
    }
}

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

/// Adds the report of another environment's spans to `into`: spans and counts add up, the
/// lists follow one another, the instances (and their lanes), which every environment's
/// report lists alike, are kept once.
pub fn absorb(into: &mut Report, other: Report) {
    let Report {
        spans,
        instances,
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
    into.instances.extend(instances);
    into.instances.sort_by(|a, b| {
        (&a.instance, &a.app, a.color.as_str(), &a.rule).cmp(&(
            &b.instance,
            &b.app,
            b.color.as_str(),
            &b.rule,
        ))
    });
    into.instances.dedup();
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
        // Instances are not split by environment: each report counts the same ones.
        let invalid = a
            .counts
            .invalid_instance_lanes
            .max(b.counts.invalid_instance_lanes);
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

    /// A release of `trade` at 50 % in two environments: production's green side errs, and
    /// staging's blue side errs and carries a cross-colour hop. Judged apart there are two
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
        // Staging: blue order calls green pay under a blue decision.
        for (span, parent, app, color, t) in [
            (1, None, "order", Color::Blue, 5.0),
            (2, Some(1), "pay", Color::Green, 5.1),
        ] {
            b.span(Sp {
                trace: 1,
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
                env: Some("staging"),
                ..Sp::default()
            });
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
        assert_eq!(all.spans, 482);
        let hop_envs: Vec<_> = all
            .cross_color_hops
            .iter()
            .map(|h| h.environment.as_deref())
            .collect();
        assert_eq!(hop_envs, [Some("staging")]);
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
        assert_eq!(prod.spans, 240);
        assert!(prod.cross_color_hops.is_empty());
        assert_eq!(prod.error_spike.len(), 2);
        let staging = run(EnvironmentFilter::of(Some("staging")));
        assert_eq!(staging.spans, 242);
        assert_eq!(staging.cross_color_hops.len(), 1);
        let json = serde_json::to_value(&staging).unwrap();
        assert_eq!(json["cross_color_hops"][0]["environment"], "staging");
        assert_eq!(run(EnvironmentFilter::of(Some("qa"))).spans, 0);
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
