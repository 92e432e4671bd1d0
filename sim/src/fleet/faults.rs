//! [`Faults`]: the faults the demo fleet can show, each caught by one detection of domain §6,
//! and their names on the command line (`--faults`).

/// The faults the fleet can show, each caught by one detection of domain §6.
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
}

impl Faults {
    /// The names `--faults` accepts, in order.
    pub const NAMES: [&'static str; 6] = [
        "legacy-hop",
        "error-spike",
        "instance-skew",
        "job-left-running",
        "consumers-not-stopped",
        "unequal-clusters",
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
