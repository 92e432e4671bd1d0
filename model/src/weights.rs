//! Instance weights from blue_percent (domain §5).
//!
//! This module owns the arithmetic by which a channel's blue_percent becomes relative registry
//! weights for its blue and green instances ([`weights`]), the count-aware variant that gives
//! exactly blue_percent for unequal cluster sizes ([`count_aware_weights`]), and the blue share
//! a set of weights really implies for given instance counts ([`implied_blue_share`]). It does
//! not write to a registry or schedule the updates.

/// The weight the larger side keeps (domain §5: "one side stays at 100").
pub const FULL_WEIGHT: u32 = 100;

/// Relative registry weights for the instances of each colour (domain §5).
///
/// One side is always 100 unless a side is drained; `*_exact` are the unrounded real values
/// (finite, in 0.0..=100.0), the integer fields are what is written to the registry: rounded
/// half away from zero, never 0 unless the side is drained (blue_percent 0 or 100).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Weights {
    /// Integer weight of each blue instance, 0..=100.
    pub blue_weight: u32,
    /// Integer weight of each green instance, 0..=100.
    pub green_weight: u32,
    /// Unrounded weight of each blue instance, 0.0..=100.0.
    pub blue_weight_exact: f64,
    /// Unrounded weight of each green instance, 0.0..=100.0.
    pub green_weight_exact: f64,
}

impl Weights {
    /// Blue 100, green 100: the neutral split, and the weights used when only one colour is
    /// present (domain §5: weights are then ignored).
    pub const EVEN: Weights = Weights {
        blue_weight: FULL_WEIGHT,
        green_weight: FULL_WEIGHT,
        blue_weight_exact: 100.0,
        green_weight_exact: 100.0,
    };

    /// The blue share these integer weights give with `blue_instances` and `green_instances`
    /// instances: [`implied_blue_share`] of `blue_weight`, `green_weight`.
    pub fn implied_blue_share(&self, blue_instances: u32, green_instances: u32) -> f64 {
        implied_blue_share(
            f64::from(self.blue_weight),
            f64::from(self.green_weight),
            blue_instances,
            green_instances,
        )
    }
}

/// Why weights could not be computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WeightsError {
    /// blue_percent above 100 (domain §1: an integer 0..=100).
    #[error("blue_percent {0} is out of range 0..=100")]
    BluePercentOutOfRange(u8),
}

/// The weights for one blue and one green instance that give blue share `blue_percent`/100
/// (domain §5), i.e. `W/(100+W) = r/100` with the other side at 100:
///
/// - r = 50: blue 100, green 100;
/// - r < 50: blue = 100·r/(100−r), green 100 (r = 0: blue 0, drained);
/// - r > 50: blue 100, green = 100·(100−r)/r (r = 100: green 0, drained).
///
/// Integer weights round half away from zero and are at least 1 for r in 1..=99. With one
/// instance of each colour the integer weights give a share within 0.005 of r/100.
///
/// # Errors
/// [`WeightsError::BluePercentOutOfRange`] when `blue_percent` > 100.
pub fn weights(blue_percent: u8) -> Result<Weights, WeightsError> {
    count_aware_weights(blue_percent, 1, 1)
}

/// Weights that give blue share exactly `blue_percent`/100 with `blue_instances` blue and
/// `green_instances` green instances (domain §5): `WB/WG = r/(100−r) · nG/nB`, the larger side
/// at 100, the other rounded as in [`weights`] (at least 1 for r in 1..=99). r = 0 and
/// r = 100 drain a side (weight 0) whatever the counts. When only one colour is present (a
/// count of 0) weights are ignored and both are 100 ([`Weights::EVEN`]). With equal counts
/// this is [`weights`].
///
/// # Errors
/// [`WeightsError::BluePercentOutOfRange`] when `blue_percent` > 100.
pub fn count_aware_weights(
    blue_percent: u8,
    blue_instances: u32,
    green_instances: u32,
) -> Result<Weights, WeightsError> {
    if blue_percent > 100 {
        return Err(WeightsError::BluePercentOutOfRange(blue_percent));
    }
    if blue_instances == 0 || green_instances == 0 {
        return Ok(Weights::EVEN);
    }
    // Blue wants r·nG parts against green's (100−r)·nB (exact in f64: below 2^53).
    let blue_parts = f64::from(blue_percent) * f64::from(green_instances);
    let green_parts = f64::from(100 - blue_percent) * f64::from(blue_instances);
    let (blue_weight_exact, green_weight_exact) = if blue_parts <= green_parts {
        (100.0 * blue_parts / green_parts, 100.0)
    } else {
        (100.0, 100.0 * green_parts / blue_parts)
    };
    let drained = blue_percent == 0 || blue_percent == 100;
    let round = |exact: f64| {
        // f64::round rounds half away from zero; exact is in 0.0..=100.0.
        let w = exact.round() as u32;
        if drained { w } else { w.max(1) }
    };
    Ok(Weights {
        blue_weight: round(blue_weight_exact),
        green_weight: round(green_weight_exact),
        blue_weight_exact,
        green_weight_exact,
    })
}

/// The blue share, 0.0..=1.0, that weights really give (domain §5):
/// `nB·WB / (nB·WB + nG·WG)` for `blue_instances` nB of weight `blue_weight` WB and
/// `green_instances` nG of weight `green_weight` WG (relative weights, any unit).
///
/// Never NaN or infinite: a negative or non-finite weight counts as 0; when only one colour is
/// present the weights are ignored (1.0 with only blue instances, 0.0 with only green); when
/// both colours are present but all weight is 0 the balancer's fallback of equal weights is
/// assumed (nB/(nB+nG)); with no instance at all the neutral 0.5.
pub fn implied_blue_share(
    blue_weight: f64,
    green_weight: f64,
    blue_instances: u32,
    green_instances: u32,
) -> f64 {
    let clean = |w: f64| if w.is_finite() && w > 0.0 { w } else { 0.0 };
    let (nb, ng) = (f64::from(blue_instances), f64::from(green_instances));
    match (blue_instances, green_instances) {
        (0, 0) => 0.5,
        (_, 0) => 1.0,
        (0, _) => 0.0,
        _ => {
            // Scale by the larger weight first so that huge weights cannot overflow.
            let (wb, wg) = (clean(blue_weight), clean(green_weight));
            let max = wb.max(wg);
            if max == 0.0 {
                return nb / (nb + ng);
            }
            let (blue, green) = (nb * (wb / max), ng * (wg / max));
            blue / (blue + green)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    const FIXTURE: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/fixtures/weights.json"
    );

    fn fixture_text() -> String {
        std::fs::read_to_string(FIXTURE).unwrap_or_else(|e| panic!("{FIXTURE}: {e}"))
    }

    fn fixture() -> Value {
        serde_json::from_str(&fixture_text()).expect("weights.json is JSON")
    }

    /// Every number written after `"key":` in the fixture, in file order, read with Rust's
    /// correctly rounded `f64` parser (serde_json's default float parser may be one ulp off,
    /// which would hide or fake an exact mismatch).
    fn floats(key: &str) -> Vec<f64> {
        let re = regex::Regex::new(&format!(r#""{key}"\s*:\s*([-+0-9.eE]+)"#)).unwrap();
        re.captures_iter(&fixture_text())
            .map(|c| c[1].parse::<f64>().unwrap())
            .collect()
    }

    fn num(row: &Value, key: &str) -> u64 {
        row[key]
            .as_u64()
            .unwrap_or_else(|| panic!("{key} in {row}"))
    }

    #[test]
    fn plain_weights_match_fixture_exactly() {
        let fixture = fixture();
        let rows = fixture["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 101);
        let (blue_exact, green_exact) = (floats("blue_weight_exact"), floats("green_weight_exact"));
        assert_eq!((blue_exact.len(), green_exact.len()), (101, 101));
        for (i, row) in rows.iter().enumerate() {
            let r = u8::try_from(num(row, "blue_percent")).unwrap();
            let w = weights(r).unwrap();
            assert_eq!(u64::from(w.blue_weight), num(row, "blue_weight"), "r={r}");
            assert_eq!(u64::from(w.green_weight), num(row, "green_weight"), "r={r}");
            assert_eq!(w.blue_weight_exact, blue_exact[i], "r={r}");
            assert_eq!(w.green_weight_exact, green_exact[i], "r={r}");
        }
    }

    #[test]
    fn count_aware_weights_match_fixture_exactly() {
        let fixture = fixture();
        let rows = fixture["count_aware"].as_array().unwrap();
        let shares = floats("plain_weights_implied_blue_share");
        assert_eq!(shares.len(), rows.len());
        assert!(!rows.is_empty());
        for (row, share) in rows.iter().zip(shares) {
            let r = u8::try_from(num(row, "blue_percent")).unwrap();
            let nb = u32::try_from(num(row, "blue_instances")).unwrap();
            let ng = u32::try_from(num(row, "green_instances")).unwrap();
            let w = count_aware_weights(r, nb, ng).unwrap();
            assert_eq!(u64::from(w.blue_weight), num(row, "blue_weight"), "{row}");
            assert_eq!(u64::from(w.green_weight), num(row, "green_weight"), "{row}");
            let implied = weights(r).unwrap().implied_blue_share(nb, ng);
            let rounded = (implied * 10_000.0).round() / 10_000.0;
            assert_eq!(rounded, share, "{row}");
            // The count-aware exact weights give exactly r.
            let exact = implied_blue_share(w.blue_weight_exact, w.green_weight_exact, nb, ng);
            assert!(
                (exact - f64::from(r) / 100.0).abs() < 1e-12,
                "{row}: {exact}"
            );
        }
    }

    #[test]
    fn case_13_edges_and_share_tolerance() {
        assert_eq!(weights(101), Err(WeightsError::BluePercentOutOfRange(101)));
        assert_eq!(weights(255), Err(WeightsError::BluePercentOutOfRange(255)));
        assert!(count_aware_weights(101, 0, 0).is_err());
        let table = [
            (50, 100, 100),
            (20, 25, 100),
            (25, 33, 100),
            (33, 49, 100),
            (75, 100, 33),
        ];
        for (r, b, g) in table {
            let w = weights(r).unwrap();
            assert_eq!((w.blue_weight, w.green_weight), (b, g), "r={r}");
        }
        let w0 = weights(0).unwrap();
        assert_eq!(
            (w0.blue_weight, w0.green_weight, w0.blue_weight_exact),
            (0, 100, 0.0)
        );
        let w100 = weights(100).unwrap();
        assert_eq!(
            (w100.blue_weight, w100.green_weight, w100.green_weight_exact),
            (100, 0, 0.0)
        );
        for r in 1..=99u8 {
            let w = weights(r).unwrap();
            assert!(w.blue_weight >= 1 && w.green_weight >= 1, "r={r}");
            assert!(w.blue_weight == 100 || w.green_weight == 100, "r={r}");
            let share = w.implied_blue_share(1, 1);
            assert!(
                (share - f64::from(r) / 100.0).abs() <= 0.005,
                "r={r}: {share}"
            );
        }
        assert_eq!(implied_blue_share(0.0, 100.0, 1, 1), 0.0);
        assert_eq!(implied_blue_share(100.0, 0.0, 1, 1), 1.0);
    }

    #[test]
    fn one_colour_present_ignores_weights() {
        for r in [0u8, 1, 30, 50, 99, 100] {
            assert_eq!(count_aware_weights(r, 0, 4), Ok(Weights::EVEN));
            assert_eq!(count_aware_weights(r, 3, 0), Ok(Weights::EVEN));
            assert_eq!(count_aware_weights(r, 0, 0), Ok(Weights::EVEN));
        }
        assert_eq!(implied_blue_share(0.0, 100.0, 3, 0), 1.0);
        assert_eq!(implied_blue_share(100.0, 0.0, 0, 3), 0.0);
        assert_eq!(implied_blue_share(100.0, 100.0, 0, 0), 0.5);
    }

    #[test]
    fn count_aware_never_rounds_a_live_side_to_zero() {
        let w = count_aware_weights(1, 1000, 1).unwrap();
        assert_eq!((w.blue_weight, w.green_weight), (1, 100));
        let w = count_aware_weights(99, 1, 1000).unwrap();
        assert_eq!((w.blue_weight, w.green_weight), (100, 1));
        assert_eq!(count_aware_weights(0, 1, 1000).unwrap().blue_weight, 0);
        let w = count_aware_weights(30, 7, 7).unwrap();
        assert_eq!(w, weights(30).unwrap());
    }

    #[test]
    fn implied_share_is_always_finite() {
        let cases = [
            (f64::NAN, 100.0, 2, 2),
            (f64::INFINITY, 1.0, 2, 2),
            (-5.0, 10.0, 2, 2),
            (0.0, 0.0, 3, 1),
            (f64::MAX, f64::MAX, u32::MAX, u32::MAX),
        ];
        for (wb, wg, nb, ng) in cases {
            let s = implied_blue_share(wb, wg, nb, ng);
            assert!(
                s.is_finite() && (0.0..=1.0).contains(&s),
                "{wb} {wg} {nb} {ng}: {s}"
            );
        }
        assert_eq!(implied_blue_share(0.0, 0.0, 3, 1), 0.75);
        assert_eq!(implied_blue_share(f64::MAX, f64::MAX, 1, 1), 0.5);
    }
}
