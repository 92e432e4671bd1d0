//! Picking one of several weighted candidates: [`Balance`] (round robin or random),
//! [`SmoothWrr`] (smooth weighted round robin, as nginx and Dubbo) and [`Picker`] (a balance
//! with its state). Pure: no I/O.

/// How an instance is picked among candidates of equal standing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Balance {
    /// Smooth weighted round robin (nginx, Dubbo `RoundRobinLoadBalance`): over any run of
    /// picks each candidate's share is within one pick of its weight's share.
    #[default]
    RoundRobin,
    /// Weighted random (Dubbo `RandomLoadBalance`).
    Random,
}

/// Smooth weighted round robin over a list of weights: each pick adds every weight to its
/// running value, picks the largest, and subtracts the total from it. Deterministic; a weight
/// of 0 is never picked. The state resets when the number of candidates changes.
#[derive(Clone, Debug, Default)]
pub struct SmoothWrr {
    current: Vec<i64>,
}

impl SmoothWrr {
    /// The index picked for `weights`, `None` when every weight is 0.
    pub fn pick(&mut self, weights: &[u64]) -> Option<usize> {
        let total: i64 = weights.iter().map(|&w| w as i64).sum();
        if total == 0 {
            return None;
        }
        if self.current.len() != weights.len() {
            self.current = vec![0; weights.len()];
        }
        let mut best = None::<usize>;
        for (i, &w) in weights.iter().enumerate() {
            if w == 0 {
                continue;
            }
            self.current[i] += w as i64;
            if best.is_none_or(|b| self.current[i] > self.current[b]) {
                best = Some(i);
            }
        }
        let b = best?;
        self.current[b] -= total;
        Some(b)
    }
}

/// A picker: [`Balance`] with its state.
#[derive(Clone, Debug, Default)]
pub struct Picker {
    balance: Balance,
    wrr: SmoothWrr,
}

impl Picker {
    /// A picker using `balance`.
    pub fn new(balance: Balance) -> Self {
        Picker {
            balance,
            wrr: SmoothWrr::default(),
        }
    }

    /// An index in `weights` chosen with probability (or, round robin, share) proportional to
    /// its weight; `None` when all are 0.
    pub fn pick(&mut self, weights: &[u64]) -> Option<usize> {
        match self.balance {
            Balance::RoundRobin => self.wrr.pick(weights),
            Balance::Random => {
                let total: u64 = weights.iter().sum();
                if total == 0 {
                    return None;
                }
                let mut x = fastrand::u64(0..total);
                weights.iter().position(|&w| {
                    if x < w {
                        true
                    } else {
                        x -= w;
                        false
                    }
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smooth_wrr_interleaves() {
        let mut w = SmoothWrr::default();
        let picks: Vec<usize> = (0..7).map(|_| w.pick(&[5, 1, 1]).unwrap()).collect();
        assert_eq!(picks, [0, 0, 1, 0, 2, 0, 0]);
        assert_eq!(w.pick(&[0, 0]), None);
    }
}
