//! Lanes (domain §7): what a router does with a request marked for a gray lane.
//!
//! - **Reading the tag** ([`LaneReader`]): the member `x-deploy-lane` of the W3C `baggage`
//!   header, then the user's carriers of the form `http.request.header.<name>` (a header such
//!   as seed 001's `gray: true`, through its value map), with the collector's own rules
//!   ([`LaneCarriers`]: trimmed, lower-cased, percent-decoded; a value that is no lane id is
//!   skipped and the next carrier tried). The same `[[lane_carriers]]` a user gives Dyeline
//!   configure the reader, so the router and the analyzer read a request alike.
//! - **Passing it on** ([`lane_of`], [`with_lane`]): whatever carrier brought the tag in, it
//!   travels on as the baggage member `x-deploy-lane` of the context the calls are made in
//!   (and the span processor copies it into each span's attribute `x-deploy-lane`).
//! - **Choosing the instances** ([`lane_candidates`], pure): a tagged request goes to the
//!   instances of its lane; when the app has none registered it falls back to base (a strict
//!   lane, [`LanePolicy::strict`], fails instead); an untagged or base-tagged request goes to
//!   base only, or, with [`LanePolicy::reverse_fallback`] and no base instance, to a lane.
//! - **The groups' fallbacks** ([`LanePolicies`]): each app's strict lanes and reverse
//!   fallback, read from the control plane's lane groups (`GET /api/v1/lane-groups`, by
//!   [`super::ControlClient::lane_policies`]); an app in no group uses the defaults.
//! - **MQ** ([`consumer_lane`], pure): a message tagged for a lane is consumed by that lane's
//!   consumer group while one of its consumers runs, else by base; [`consumer_group`] names
//!   the groups (`<app>-<lane>`).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use dyeline_model::lane::LaneRuleError;
use dyeline_model::lane::TAG_KEY;
use dyeline_model::release::Fallback;
use dyeline_model::{LaneCarrier, LaneCarriers, LaneId};
use opentelemetry::Context;
use opentelemetry::baggage::{Baggage, BaggageExt};

use super::propagation::Headers;
use super::registry::Endpoint;

/// The attribute prefix of a captured HTTP request header (OpenTelemetry semantic
/// conventions): a carrier `http.request.header.gray` is read from the header `gray`.
pub const HEADER_PREFIX: &str = "http.request.header.";

/// Reads a request's lane tag from its headers: the `x-deploy-lane` member of `baggage`, then
/// the user carriers that name a captured request header (`http.request.header.<name>`), in
/// their order. Carriers naming other span attributes are not headers and are skipped.
#[derive(Debug, Clone, Default)]
pub struct LaneReader {
    carriers: LaneCarriers,
}

impl LaneReader {
    /// A reader for the built-in carriers and `carriers` (the `[[lane_carriers]]` of
    /// Dyeline's configuration).
    ///
    /// # Errors
    /// The [`LaneRuleError`] of a carrier Dyeline would refuse too.
    pub fn new(carriers: &[LaneCarrier]) -> Result<Self, LaneRuleError> {
        Ok(LaneReader {
            carriers: LaneCarriers::new(carriers)?,
        })
    }

    /// The lane the request asks for (`base` for an explicit base tag); `None` when no
    /// carrier gives a lane id.
    pub fn read(&self, headers: &Headers) -> Option<LaneId> {
        self.carriers
            .resolve(|key| {
                let name = if key == dyeline_model::lane::BAGGAGE_HEADER_KEY {
                    "baggage"
                } else {
                    key.strip_prefix(HEADER_PREFIX)?
                };
                headers
                    .get(&name.to_ascii_lowercase())
                    .map(|v| std::iter::once(v.as_str()))
            })
            .tag
    }
}

/// The lane tag in `cx`'s baggage (member `x-deploy-lane`), read as a lane id.
pub fn lane_of(cx: &Context) -> Option<LaneId> {
    cx.baggage()
        .get(TAG_KEY)
        .and_then(|v| LaneId::read(v.as_str()))
}

/// `cx` with its baggage member `x-deploy-lane` set to `lane` (removed for `None`; other
/// baggage kept). What a hop that loses the tag does is `with_lane(cx, None)`.
pub fn with_lane(cx: &Context, lane: Option<&LaneId>) -> Context {
    let mut b: Baggage = cx
        .baggage()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    match lane {
        Some(l) => {
            b.insert(TAG_KEY, l.as_str().to_owned());
        }
        None => {
            b.remove(TAG_KEY);
        }
    }
    cx.with_baggage(b)
}

/// How the lanes of one app's callers fall back (the router's side of a lane group, domain
/// §7.1). The default: every lane falls back to base, no reverse fallback.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LanePolicy {
    /// Strict lanes (`fallback: none`): a request for one whose app has no instance of it
    /// fails rather than being served by base.
    pub strict: BTreeSet<LaneId>,
    /// Base traffic may go to a lane's instances while the app has no base instance (seed
    /// 004's disaster fallback).
    pub reverse_fallback: bool,
}

/// Every app's [`LanePolicy`]: the lane group it is in decides (domain §7.1), the default
/// policy holds for an app in no group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LanePolicies {
    by_app: HashMap<String, LanePolicy>,
}

impl LanePolicies {
    /// These policies with `app` following `policy`.
    #[must_use]
    pub fn with(mut self, app: &str, policy: LanePolicy) -> Self {
        self.by_app.insert(app.to_owned(), policy);
        self
    }

    /// The policy of `app` (the default when it is in no group).
    pub fn of(&self, app: &str) -> &LanePolicy {
        static DEFAULT: LanePolicy = LanePolicy {
            strict: BTreeSet::new(),
            reverse_fallback: false,
        };
        self.by_app.get(app).unwrap_or(&DEFAULT)
    }

    /// The policies the groups of a `GET /api/v1/lane-groups` answer give their apps. A lane
    /// key that is no lane id is skipped (the control plane refuses them anyway).
    pub fn from_groups(body: &LaneGroupsBody) -> Self {
        let mut by_app = HashMap::new();
        for g in &body.lane_groups {
            let policy = LanePolicy {
                strict: g
                    .lanes
                    .iter()
                    .filter(|(_, l)| l.fallback == Fallback::None)
                    .filter_map(|(k, _)| LaneId::new(k).ok())
                    .collect(),
                reverse_fallback: g.reverse_fallback,
            };
            for app in &g.apps {
                by_app.insert(app.clone(), policy.clone());
            }
        }
        LanePolicies { by_app }
    }
}

/// The answer of `GET /api/v1/lane-groups`, as much of it as routing reads.
#[derive(Clone, Debug, serde::Deserialize)]
pub struct LaneGroupsBody {
    /// The groups.
    pub lane_groups: Vec<LaneGroupBody>,
}

/// One lane group, as much of it as routing reads.
#[derive(Clone, Debug, serde::Deserialize)]
pub struct LaneGroupBody {
    /// Its apps.
    pub apps: Vec<String>,
    /// Its lanes and their fallback.
    #[serde(default)]
    pub lanes: BTreeMap<String, LaneBody>,
    /// Base traffic may go to a lane while the app has no base instance.
    #[serde(default)]
    pub reverse_fallback: bool,
}

/// One lane of a group.
#[derive(Clone, Debug, serde::Deserialize)]
pub struct LaneBody {
    /// Where its requests go in an app without an instance of it.
    #[serde(default)]
    pub fallback: Fallback,
}

/// Which instances served a call, in lane terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LaneOutcome {
    /// An untagged or base-tagged request, to base.
    Base,
    /// A tagged request, to its lane.
    InLane,
    /// A tagged request whose lane has no instance in the app, to base (the expected path,
    /// domain §7.3.1 `lane_fallback`).
    Fallback,
    /// A base request while the app has no base instance, to a lane (allowed by
    /// [`LanePolicy::reverse_fallback`]).
    ReverseFallback,
    /// Every instance whatever its lane: a balancer that filters nothing (seed 001's with a
    /// blank cluster name).
    Unfiltered,
}

/// The instances of `endpoints` (one app's) a request tagged `tag` may go to, and how
/// (see [`LaneOutcome`]). `None` when it may go nowhere: a strict lane without an instance,
/// or a base request without a base instance (and no reverse fallback).
pub fn lane_candidates<'e>(
    tag: Option<&LaneId>,
    endpoints: &'e [Endpoint],
    policy: &LanePolicy,
) -> Option<(LaneOutcome, Vec<&'e Endpoint>)> {
    let of = |lane: &LaneId| -> Vec<&'e Endpoint> {
        endpoints.iter().filter(|e| e.lane == *lane).collect()
    };
    let base = LaneId::base();
    match tag.filter(|t| !t.is_base()) {
        Some(lane) => {
            let own = of(lane);
            if !own.is_empty() {
                Some((LaneOutcome::InLane, own))
            } else if policy.strict.contains(lane) {
                None
            } else {
                let b = of(&base);
                (!b.is_empty()).then_some((LaneOutcome::Fallback, b))
            }
        }
        None => {
            let b = of(&base);
            if !b.is_empty() {
                Some((LaneOutcome::Base, b))
            } else if policy.reverse_fallback && !endpoints.is_empty() {
                Some((LaneOutcome::ReverseFallback, endpoints.iter().collect()))
            } else {
                None
            }
        }
    }
}

/// The lane whose consumer group takes a message tagged `tag`: that lane while one of its
/// consumers runs (`running(lane)`), else base (untagged and base-tagged messages too).
pub fn consumer_lane(tag: Option<&LaneId>, running: impl Fn(&LaneId) -> bool) -> LaneId {
    match tag {
        Some(l) if !l.is_base() && running(l) => l.clone(),
        _ => LaneId::base(),
    }
}

/// The consumer group of `app`'s consumers in `lane` (`notify-gray`).
pub fn consumer_group(app: &str, lane: &LaneId) -> String {
    format!("{app}-{}", lane.as_str())
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use super::*;
    use crate::routing::propagation;
    use dyeline_model::Color;
    use proptest::prelude::*;

    fn lane(s: &str) -> LaneId {
        LaneId::new(s).unwrap()
    }

    fn ep(instance: &str, l: &str) -> Endpoint {
        Endpoint {
            app: "order".into(),
            instance: instance.into(),
            color: Color::Blue,
            lane: lane(l),
            addr: SocketAddr::from(([127, 0, 0, 1], 1)),
            factor: 1,
        }
    }

    fn gray_header_reader() -> LaneReader {
        LaneReader::new(&[LaneCarrier {
            key: "http.request.header.gray".into(),
            map: Some(BTreeMap::from([
                ("true".into(), "gray".into()),
                ("false".into(), "base".into()),
            ])),
        }])
        .unwrap()
    }

    fn headers(pairs: &[(&str, &str)]) -> Headers {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn the_baggage_member_comes_first_then_the_users_header_through_its_map() {
        let r = gray_header_reader();
        let both = headers(&[("baggage", "a=1,x-deploy-lane=Gray2;p=1"), ("gray", "true")]);
        assert_eq!(r.read(&both), Some(lane("gray2")));
        assert_eq!(r.read(&headers(&[("gray", " TRUE ")])), Some(lane("gray")));
        assert_eq!(r.read(&headers(&[("gray", "false")])), Some(lane("base")));
        // A value the map does not list is skipped (the collector counts it as malformed).
        assert_eq!(r.read(&headers(&[("gray", "maybe")])), None);
        // Not a lane id in baggage: the header is tried next.
        let bad = headers(&[("baggage", "x-deploy-lane=gray_2"), ("gray", "true")]);
        assert_eq!(r.read(&bad), Some(lane("gray")));
        assert_eq!(r.read(&headers(&[("x-other", "gray")])), None);
        // Without the carrier the header means nothing.
        assert_eq!(
            LaneReader::default().read(&headers(&[("gray", "true")])),
            None
        );
    }

    #[test]
    fn a_carrier_dyeline_refuses_is_refused() {
        let err = LaneReader::new(&[LaneCarrier {
            key: "x-deploy-lane".into(),
            map: None,
        }]);
        assert!(err.is_err());
    }

    #[test]
    fn the_tag_travels_in_baggage_and_a_dropping_hop_loses_only_it() {
        let mut d = dyeline_model::Decisions::default();
        d.insert("trade", Color::Green);
        let cx = crate::routing::with_decisions(&Context::new(), &d);
        let cx = with_lane(&cx, Some(&lane("gray")));
        let h = propagation::inject(&cx, true);
        assert_eq!(LaneReader::default().read(&h), Some(lane("gray")));
        let back = propagation::extract(&h, true);
        assert_eq!(lane_of(&back), Some(lane("gray")));
        let dropped = with_lane(&back, None);
        assert_eq!(lane_of(&dropped), None);
        assert_eq!(
            crate::routing::decisions_of(&dropped).encode(),
            "trade=green"
        );
    }

    #[test]
    fn a_tagged_request_goes_to_its_lane_and_falls_back_to_base_without_one() {
        let eps = [ep("b1", "base"), ep("g1", "gray"), ep("b2", "base")];
        let p = LanePolicy::default();
        let (o, c) = lane_candidates(Some(&lane("gray")), &eps, &p).unwrap();
        assert_eq!(o, LaneOutcome::InLane);
        assert_eq!(c, vec![&eps[1]]);
        let (o, c) = lane_candidates(Some(&lane("gray2")), &eps, &p).unwrap();
        assert_eq!(o, LaneOutcome::Fallback);
        assert_eq!(c, vec![&eps[0], &eps[2]]);
        for tag in [None, Some(lane("base"))] {
            let (o, c) = lane_candidates(tag.as_ref(), &eps, &p).unwrap();
            assert_eq!(o, LaneOutcome::Base);
            assert_eq!(c, vec![&eps[0], &eps[2]]);
        }
    }

    #[test]
    fn strict_lanes_fail_and_reverse_fallback_is_opt_in() {
        let strict = LanePolicy {
            strict: BTreeSet::from([lane("gray2")]),
            reverse_fallback: false,
        };
        assert!(lane_candidates(Some(&lane("gray2")), &[ep("b1", "base")], &strict).is_none());
        let only_gray = [ep("g1", "gray")];
        assert!(lane_candidates(None, &only_gray, &LanePolicy::default()).is_none());
        let reverse = LanePolicy {
            reverse_fallback: true,
            ..LanePolicy::default()
        };
        let (o, c) = lane_candidates(None, &only_gray, &reverse).unwrap();
        assert_eq!(o, LaneOutcome::ReverseFallback);
        assert_eq!(c, vec![&only_gray[0]]);
        assert!(lane_candidates(None, &[], &reverse).is_none());
    }

    #[test]
    fn each_app_follows_the_policy_of_its_group() {
        let body: LaneGroupsBody = serde_json::from_value(serde_json::json!({"lane_groups": [
            {"id": "mall", "version": 3, "apps": ["order", "pay"], "entry_apps": ["order"],
             "lanes": {"gray": {"fallback": "base"}, "gray2": {"fallback": "none"}},
             "reverse_fallback": false},
            {"id": "promo", "version": 1, "apps": ["coupon"], "entry_apps": [], "lanes": {},
             "reverse_fallback": true}
        ]}))
        .unwrap();
        let p = LanePolicies::from_groups(&body);
        assert_eq!(p.of("pay").strict, BTreeSet::from([lane("gray2")]));
        assert!(!p.of("pay").reverse_fallback);
        assert!(p.of("coupon").reverse_fallback && p.of("coupon").strict.is_empty());
        assert_eq!(p.of("elsewhere"), &LanePolicy::default());
    }

    #[test]
    fn a_gray_message_goes_to_the_gray_group_while_it_runs() {
        let gray = lane("gray");
        assert_eq!(consumer_lane(Some(&gray), |l| l == &gray), gray);
        assert_eq!(consumer_lane(Some(&gray), |_| false), LaneId::base());
        assert_eq!(consumer_lane(None, |_| true), LaneId::base());
        assert_eq!(
            consumer_lane(Some(&LaneId::base()), |_| true),
            LaneId::base()
        );
        assert_eq!(consumer_group("notify", &gray), "notify-gray");
    }

    proptest! {
        /// Whatever the instances' lanes and the tag: a request is never sent across lanes
        /// except by the two fallbacks; a tagged one reaches its lane whenever the app has it;
        /// base traffic reaches a lane only by the reverse fallback.
        #[test]
        fn candidates_keep_to_the_lane(
            lanes in proptest::collection::vec(0usize..4, 0..8),
            tag in proptest::option::of(0usize..4),
            strict in any::<bool>(),
            reverse in any::<bool>(),
        ) {
            let names = ["base", "gray", "gray2", "blue-lane"];
            let eps: Vec<Endpoint> = lanes.iter().enumerate()
                .map(|(i, &l)| ep(&format!("i{i}"), names[l])).collect();
            let tag = tag.map(|t| lane(names[t]));
            let policy = LanePolicy {
                strict: if strict { BTreeSet::from([lane("gray2")]) } else { BTreeSet::new() },
                reverse_fallback: reverse,
            };
            let has = |l: &str| eps.iter().any(|e| e.lane.as_str() == l);
            let want = tag.clone().unwrap_or_else(LaneId::base);
            match lane_candidates(tag.as_ref(), &eps, &policy) {
                Some((outcome, c)) => {
                    prop_assert!(!c.is_empty());
                    let served: BTreeSet<&str> = c.iter().map(|e| e.lane.as_str()).collect();
                    match outcome {
                        LaneOutcome::InLane | LaneOutcome::Base => {
                            prop_assert_eq!(served, BTreeSet::from([want.as_str()]));
                        }
                        LaneOutcome::Fallback => {
                            prop_assert!(!has(want.as_str()));
                            prop_assert_eq!(served, BTreeSet::from(["base"]));
                        }
                        LaneOutcome::ReverseFallback => {
                            prop_assert!(reverse && want.is_base() && !has("base"));
                        }
                        LaneOutcome::Unfiltered => prop_assert!(false, "never chosen here"),
                    }
                }
                None => {
                    let strict_miss = strict && want.as_str() == "gray2" && !has("gray2");
                    let no_base = !has("base") && (want.is_base() || !has(want.as_str()));
                    prop_assert!(strict_miss || (no_base && !(reverse && want.is_base() && !eps.is_empty())));
                }
            }
        }

        /// Any lane id survives the trip through baggage headers, whatever its case or
        /// padding on the way in.
        #[test]
        fn a_lane_id_round_trips_through_headers(id in "[a-z0-9][a-z0-9-]{0,20}", upper in any::<bool>()) {
            let text = if upper { format!("  {}  ", id.to_ascii_uppercase()) } else { id.clone() };
            let h = headers(&[("baggage", &format!("k=v,x-deploy-lane={text}"))]);
            prop_assert_eq!(LaneReader::default().read(&h), Some(lane(&id)));
        }
    }
}
