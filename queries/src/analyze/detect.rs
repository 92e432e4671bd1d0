//! The six detections of domain §6, one file each where they are judged: per trace
//! ([`traces`]: cross-colour hops and missing decisions, judged together in one walk of each
//! trace), and per tumbling window ([`windows`]: the counts, then [`drained_side`],
//! [`ratio_deviation`], [`instance_skew`] and [`error_spike`], each judging them); and the
//! lane rules of domain §7 ([`lanes`], with what their findings tell the text table and the
//! alerts in [`lane_alerts`]).

pub mod drained_side;
pub mod error_spike;
pub mod instance_skew;
pub mod lane_alerts;
pub mod lanes;
pub mod ratio_deviation;
pub mod traces;
pub mod windows;
