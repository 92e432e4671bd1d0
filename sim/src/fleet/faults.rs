//! [`Faults`]: the faults the demo fleet can show, each caught by one detection of domain §6
//! or one lane rule of §7, and their names on the command line (`--faults`).

/// The faults the fleet can show, each caught by one detection of domain §6 or a lane rule of
/// §7 (the `lane-*` ones; each a plain switch, on from the start unless it says otherwise).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Faults {
    /// `legacy-hop`: one order in five reaches inventory through `legacy-proxy`, which drops
    /// the baggage → cross-colour hops and missing decisions (§6.1, §6.2).
    pub legacy_hop: bool,
    /// `error-spike`: inventory at version 2 fails 10 % of requests → a one-sided error
    /// spike while only one colour runs it (§6.6).
    pub error_spike: bool,
    /// `instance-skew`: the first risk instance of each colour is registered at 8× the
    /// factor of its peers → instance skew (§6.5).
    pub instance_skew: bool,
    /// `job-left-running`: settle's JOB is not handed over when its side is drained →
    /// drained-side JOB traffic (§6.3).
    pub job_left_running: bool,
    /// `consumers-not-stopped`: notify's consumers on a drained side keep pulling the topic
    /// → drained-side MQ traffic (§6.3).
    pub consumers_not_stopped: bool,
    /// `unequal-clusters`: order (the entry of `trade`) runs 1 blue and 3 green instances
    /// and callers use the plain weights → a ratio deviation whose cause is unequal cluster
    /// sizes (§6.4).
    pub unequal_clusters: bool,
    /// `lane-tag-ignored`: payment routes its calls to risk as if untagged → gray requests
    /// served by base risk while risk's gray instance is present: `lane_leak` `tag_ignored`
    /// (§7.3.1).
    pub lane_tag_ignored: bool,
    /// `lane-tag-dropped`: order publishes every other order event from a thread pool that
    /// loses the lane context (the tag, not the trace or the decisions) → `lane_tag_dropped`
    /// at notify, `in_process`, and its leaks `tag_dropped` (§7.3.2).
    pub lane_tag_dropped: bool,
    /// `lane-pollution`: order's balancer for payment has a blank cluster name (seed 001) and
    /// filters nothing → base requests on payment's gray instance: `lane_pollution`
    /// `untagged` (§7.3.3), and gray ones on base payment: `lane_leak` `tag_ignored`.
    pub lane_pollution: bool,
    /// `lane-mq-leak`: notify's base consumers also take gray messages while the gray
    /// consumer runs → `lane_leak` of kind MQ, `tag_ignored` (§7.3).
    pub lane_mq_leak: bool,
    /// `lane-instance-killed`: inventory's only gray instance is killed at 120 s (speed 1)
    /// → its gray requests fall back to base: `lane_fallback` counts and coverage from its
    /// last signal on, no finding (§7.3.1).
    pub lane_instance_killed: bool,
    /// `lane-error-spike`: order's gray instance fails 20 % of requests → `lane_error_spike`
    /// with gray the worse side (§7.4).
    pub lane_error_spike: bool,
}

impl Faults {
    /// The names `--faults` accepts, in order.
    pub const NAMES: [&'static str; 12] = [
        "legacy-hop",
        "error-spike",
        "instance-skew",
        "job-left-running",
        "consumers-not-stopped",
        "unequal-clusters",
        "lane-tag-ignored",
        "lane-tag-dropped",
        "lane-pollution",
        "lane-mq-leak",
        "lane-instance-killed",
        "lane-error-spike",
    ];

    /// Every fault on.
    pub fn all() -> Self {
        Faults {
            legacy_hop: true,
            error_spike: true,
            instance_skew: true,
            job_left_running: true,
            consumers_not_stopped: true,
            unequal_clusters: true,
            lane_tag_ignored: true,
            lane_tag_dropped: true,
            lane_pollution: true,
            lane_mq_leak: true,
            lane_instance_killed: true,
            lane_error_spike: true,
        }
    }

    fn flag(&mut self, name: &str) -> Option<&mut bool> {
        Some(match name {
            "legacy-hop" => &mut self.legacy_hop,
            "error-spike" => &mut self.error_spike,
            "instance-skew" => &mut self.instance_skew,
            "job-left-running" => &mut self.job_left_running,
            "consumers-not-stopped" => &mut self.consumers_not_stopped,
            "unequal-clusters" => &mut self.unequal_clusters,
            "lane-tag-ignored" => &mut self.lane_tag_ignored,
            "lane-tag-dropped" => &mut self.lane_tag_dropped,
            "lane-pollution" => &mut self.lane_pollution,
            "lane-mq-leak" => &mut self.lane_mq_leak,
            "lane-instance-killed" => &mut self.lane_instance_killed,
            "lane-error-spike" => &mut self.lane_error_spike,
            _ => return None,
        })
    }

    /// Parses `all`, `none` or a comma-separated list of [`Faults::NAMES`].
    ///
    /// # Errors
    /// A message naming the unknown fault and the accepted names.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.trim() {
            "all" => return Ok(Self::all()),
            "none" | "" => return Ok(Self::default()),
            _ => {}
        }
        let mut f = Self::default();
        for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            *f.flag(name).ok_or_else(|| {
                format!(
                    "unknown fault {name:?}: use all, none or a comma list of {}",
                    Self::NAMES.join(", ")
                )
            })? = true;
        }
        Ok(f)
    }

    /// The names of the faults that are on.
    pub fn enabled(&self) -> Vec<&'static str> {
        let mut me = *self;
        Self::NAMES
            .into_iter()
            .filter(|n| *me.flag(n).expect("known name"))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_parses_to_its_own_switch_and_all_is_every_switch() {
        for name in Faults::NAMES {
            let f = Faults::parse(name).unwrap();
            assert_eq!(f.enabled(), vec![name], "{name}");
        }
        assert_eq!(Faults::all().enabled(), Faults::NAMES.to_vec());
        assert_eq!(
            Faults::parse(" lane-pollution , lane-mq-leak ")
                .unwrap()
                .enabled(),
            vec!["lane-pollution", "lane-mq-leak"]
        );
        let err = Faults::parse("lane-typo").unwrap_err();
        assert!(
            err.contains("lane-typo") && err.contains("lane-error-spike"),
            "{err}"
        );
    }
}
