//! [`decide_color`]: the colour a call into an app goes to (domain §2, §5), sticky per
//! channel and weighted by the instance weights the control API serves. Pure: no I/O; what
//! the property tests exercise.

use dyeline_model::{Color, Decisions};

use super::balance::Picker;
use super::client::AppConfig;

/// The colour a call into an app goes to (domain §2, §5), recording a new decision in
/// `decisions`:
///
/// - the app follows no channel: `None` (no decision; any instance);
/// - `decisions` already holds one for the channel: that colour (sticky);
/// - only one colour has instances: that colour (weights ignored), recorded;
/// - otherwise blue with share `nB·WB / (nB·WB + nG·WG)` (WB, WG from `config`, nB, nG =
///   `counts`), picked by `picker`, recorded.
///
/// Returns `None` also when the app has no instance at all.
pub fn decide_color(
    config: &AppConfig,
    counts: (u32, u32),
    decisions: &mut Decisions,
    picker: &mut Picker,
) -> Option<Color> {
    let channel = config.channel.as_deref()?;
    if let Some(c) = decisions.get(channel) {
        return Some(c);
    }
    let (nb, ng) = counts;
    let color = match (nb, ng) {
        (0, 0) => return None,
        (_, 0) => Color::Blue,
        (0, _) => Color::Green,
        _ => {
            let w = [
                u64::from(nb) * u64::from(config.blue_weight),
                u64::from(ng) * u64::from(config.green_weight),
            ];
            // Both weights 0 cannot be served (domain §5 keeps one side at 100); fall back
            // to the count split rather than fail the request.
            let i = picker
                .pick(&w)
                .or_else(|| picker.pick(&[u64::from(nb), u64::from(ng)]))?;
            if i == 0 { Color::Blue } else { Color::Green }
        }
    };
    decisions.insert(channel, color);
    Some(color)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::routing::balance::Balance;
    use proptest::prelude::*;

    fn cfg(channel: Option<&str>, r: u8, counts: (u32, u32)) -> AppConfig {
        let w = dyeline_model::weights::count_aware_weights(r, counts.0, counts.1).unwrap();
        AppConfig {
            channel: channel.map(str::to_owned),
            blue_percent: r,
            blue_weight: w.blue_weight,
            green_weight: w.green_weight,
            seq: 1,
        }
    }

    #[test]
    fn no_channel_no_decision() {
        let mut d = Decisions::default();
        let c = decide_color(
            &cfg(None, 50, (2, 2)),
            (2, 2),
            &mut d,
            &mut Picker::default(),
        );
        assert_eq!(c, None);
        assert!(d.is_empty());
    }

    #[test]
    fn one_colour_present_ignores_weights() {
        let mut d = Decisions::default();
        let c = decide_color(
            &cfg(Some("t"), 0, (3, 0)),
            (3, 0),
            &mut d,
            &mut Picker::default(),
        );
        assert_eq!(c, Some(Color::Blue));
        assert_eq!(d.encode(), "t=blue");
    }

    #[test]
    fn drained_side_is_never_chosen_for_new_requests() {
        let mut p = Picker::default();
        for _ in 0..1000 {
            let mut d = Decisions::default();
            let c = decide_color(&cfg(Some("t"), 0, (2, 2)), (2, 2), &mut d, &mut p);
            assert_eq!(c, Some(Color::Green));
        }
    }

    #[test]
    fn plain_weights_with_unequal_clusters_miss_r_and_count_aware_hit_it() {
        // r = 50 with 1 blue and 3 green: plain weights give 1·100 / (1·100 + 3·100) = 25 %.
        let plain = AppConfig {
            channel: Some("t".into()),
            blue_percent: 50,
            blue_weight: 100,
            green_weight: 100,
            seq: 1,
        };
        let share = |c: &AppConfig| {
            let mut p = Picker::default();
            let blue = (0..4000)
                .filter(|_| {
                    let mut d = Decisions::default();
                    decide_color(c, (1, 3), &mut d, &mut p) == Some(Color::Blue)
                })
                .count();
            blue as f64 / 4000.0
        };
        assert!((share(&plain) - 0.25).abs() < 0.001);
        assert!((share(&cfg(Some("t"), 50, (1, 3))) - 0.5).abs() < 0.01);
    }

    proptest! {
        /// Once a channel is decided, every later call into it (through any other channels,
        /// at any ratio) reuses the first colour, and other decisions are kept.
        #[test]
        fn decisions_are_sticky(
            calls in proptest::collection::vec((0usize..3, 0u8..=100, 0u32..4, 0u32..4), 1..40),
            random in any::<bool>(),
        ) {
            let channels = ["trade", "pay", "global"];
            let mut p = Picker::new(if random { Balance::Random } else { Balance::RoundRobin });
            let mut d = Decisions::default();
            let mut first: HashMap<&str, Color> = HashMap::new();
            for (ch, r, nb, ng) in calls {
                let c = cfg(Some(channels[ch]), r, (nb, ng));
                let got = decide_color(&c, (nb, ng), &mut d, &mut p);
                if let Some(col) = got {
                    let kept = *first.entry(channels[ch]).or_insert(col);
                    prop_assert_eq!(col, kept);
                }
                for (k, v) in &first {
                    prop_assert_eq!(d.get(k), Some(*v));
                }
            }
        }

        /// Fresh requests go blue with share r (count-aware weights, any cluster sizes):
        /// round robin within one pick's granularity per 100, random within 5 standard errors.
        #[test]
        fn weights_are_respected(r in 0u8..=100, nb in 1u32..5, ng in 1u32..5, random in any::<bool>()) {
            let c = cfg(Some("trade"), r, (nb, ng));
            let mut p = Picker::new(if random { Balance::Random } else { Balance::RoundRobin });
            let n = 4000u32;
            let blue = (0..n).filter(|_| {
                let mut d = Decisions::default();
                decide_color(&c, (nb, ng), &mut d, &mut p) == Some(Color::Blue)
            }).count() as f64 / f64::from(n);
            // The share the served integer weights imply (domain §5 rounds them; r itself
            // is the API's concern and tested there).
            let wb = f64::from(nb) * f64::from(c.blue_weight);
            let wg = f64::from(ng) * f64::from(c.green_weight);
            let implied = wb / (wb + wg);
            let tol = if random {
                5.0 * (implied * (1.0 - implied) / f64::from(n)).sqrt() + 1e-9
            } else {
                2.0 / f64::from(n)
            };
            prop_assert!((blue - implied).abs() <= tol, "share {blue} implied {implied}");
        }
    }
}
