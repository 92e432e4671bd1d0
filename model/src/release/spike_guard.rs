//! The spike guard (domain §4): a ratio change that moves traffic toward the colour whose
//! one-sided error spike (§6.6) is firing for the channel is refused unless forced. The rule
//! lives here once; the control plane enforces it on every write (API and dashboard) and the
//! dashboard shows it before asking.

use crate::{Color, Detection};

/// The colour a change of blue_percent from `from` to `to` gives more traffic: blue when it
/// rises, green when it falls, none when it stays (start and finish keep 50 → 50 for the
/// channel; a finish from 100 gives green back its share).
pub fn gaining_color(from: u8, to: u8) -> Option<Color> {
    match to.cmp(&from) {
        std::cmp::Ordering::Greater => Some(Color::Blue),
        std::cmp::Ordering::Less => Some(Color::Green),
        std::cmp::Ordering::Equal => None,
    }
}

/// Whether a firing alert of type `detection` on `color` (its `type` and `color` labels)
/// blocks a change of the channel's blue_percent from `from` to `to`: it is a one-sided error
/// spike on the colour that would gain traffic.
pub fn blocks(from: u8, to: u8, detection: &str, color: Option<&str>) -> bool {
    let Some(gaining) = gaining_color(from, to) else {
        return false;
    };
    detection == Detection::ErrorSpike.as_str() && color == Some(gaining.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_spike_on_the_gaining_colour_blocks() {
        assert!(blocks(10, 50, "error_spike", Some("blue")));
        assert!(blocks(50, 0, "error_spike", Some("green")));
        assert!(!blocks(50, 0, "error_spike", Some("blue")), "moving away");
        assert!(!blocks(50, 50, "error_spike", Some("blue")), "no change");
        assert!(!blocks(10, 50, "cross_color_hop", Some("blue")));
        assert!(!blocks(10, 50, "error_spike", None));
        assert_eq!(gaining_color(100, 50), Some(Color::Green));
    }
}
