//! Tests of the instance lane rules and the lane tag carriers (domain §7.1), unit and
//! property.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

fn map(entries: &[(&str, &str)]) -> Option<BTreeMap<String, String>> {
    Some(
        entries
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    )
}

/// The rules of the lane fixtures' `dyeline.toml`.
fn fixture_rules() -> LaneRules {
    LaneRules::new(&[
        LaneRule::Attribute {
            key: "nacos.metadata.gray".into(),
            map: map(&[("true", "gray"), ("false", "base")]),
        },
        LaneRule::Pattern {
            key: "host.name".into(),
            regex: "^dw[a-z]+-(?P<lane>gray[0-9]*)-v[0-9.]+$".into(),
            map: None,
        },
    ])
    .unwrap()
}

fn resolve(rules: &LaneRules, attrs: &[(&str, &str)]) -> (String, String, Vec<String>) {
    let r = rules.resolve(|k| attrs.iter().find(|(key, _)| *key == k).map(|(_, v)| *v));
    (r.lane.as_str().to_owned(), r.rule, r.invalid_values)
}

fn lane(text: &str, rule: &str, invalid: &[&str]) -> (String, String, Vec<String>) {
    (
        text.to_owned(),
        rule.to_owned(),
        invalid.iter().map(|s| (*s).to_owned()).collect(),
    )
}

#[test]
fn deploy_lane_comes_first_trimmed_and_lower_cased_and_base_is_a_valid_value() {
    let rules = fixture_rules();
    assert_eq!(
        resolve(&rules, &[("deploy.lane", " Gray "), ("host.name", "x")]),
        lane("gray", "deploy.lane", &[])
    );
    // The host name alone would read as gray: `deploy.lane = base` decides first.
    assert_eq!(
        resolve(
            &rules,
            &[
                ("deploy.lane", "base"),
                ("host.name", "dwpricing-gray-v2.0.9")
            ]
        ),
        lane("base", "deploy.lane", &[])
    );
}

#[test]
fn an_invalid_value_does_not_match_is_recorded_and_the_chain_goes_on() {
    let rules = fixture_rules();
    assert_eq!(
        resolve(
            &rules,
            &[
                ("deploy.lane", "gray_2"),
                ("host.name", "dwsettle-gray-v3.0.0")
            ]
        ),
        lane("gray", "host.name", &["gray_2"])
    );
    // A value missing from a rule's map is recorded too; no rule left: base by default.
    assert_eq!(
        resolve(
            &rules,
            &[
                ("deploy.lane", "Gray Lane"),
                ("nacos.metadata.gray", "maybe")
            ]
        ),
        lane("base", "default", &["Gray Lane", "maybe"])
    );
}

#[test]
fn user_rules_follow_in_order_and_nothing_matching_is_base_by_default() {
    let rules = fixture_rules();
    assert_eq!(
        resolve(&rules, &[("nacos.metadata.gray", " TRUE ")]),
        lane("gray", "nacos.metadata.gray", &[])
    );
    assert_eq!(
        resolve(
            &rules,
            &[
                ("nacos.metadata.gray", "false"),
                ("host.name", "dworder-gray2-v1.0.2")
            ]
        ),
        lane("base", "nacos.metadata.gray", &[])
    );
    assert_eq!(
        resolve(&rules, &[("host.name", "dworder-gray2-v1.0.2")]),
        lane("gray2", "host.name", &[])
    );
    // No match of the regex is no marker: nothing recorded.
    assert_eq!(
        resolve(&rules, &[("host.name", "order-blue-1")]),
        lane("base", "default", &[])
    );
    assert_eq!(resolve(&rules, &[]), lane("base", "default", &[]));
    // Blank values are no markers either.
    assert_eq!(
        resolve(
            &rules,
            &[("deploy.lane", "  "), ("nacos.metadata.gray", "")]
        ),
        lane("base", "default", &[])
    );
}

#[test]
fn patterns_read_their_capture_through_the_map_and_attributes_without_a_map_read_the_id() {
    let rules = LaneRules::new(&[
        LaneRule::Pattern {
            key: "k8s.pod.name".into(),
            regex: r"-(?P<lane>[a-z0-9]+)(?:-canary)?-[0-9]+$|^(?P<other>x)$".into(),
            map: map(&[("g", "gray"), ("G2", "gray2")]),
        },
        LaneRule::Attribute {
            key: "nacos.metadata.lane".into(),
            map: None,
        },
    ])
    .unwrap();
    assert_eq!(
        resolve(&rules, &[("k8s.pod.name", "order-g2-canary-7")]),
        lane("gray2", "k8s.pod.name", &[])
    );
    assert_eq!(
        resolve(&rules, &[("k8s.pod.name", "order-g-7")]),
        lane("gray", "k8s.pod.name", &[])
    );
    // The capture is looked up case-insensitively; one missing from the map is recorded.
    assert_eq!(
        resolve(
            &rules,
            &[
                ("k8s.pod.name", "order-zz-7"),
                ("nacos.metadata.lane", "Gray3")
            ]
        ),
        lane("gray3", "nacos.metadata.lane", &["zz"])
    );
    // A `lane` group that took no part in the match: the rule does not apply.
    assert_eq!(
        resolve(&rules, &[("k8s.pod.name", "x")]),
        lane("base", "default", &[])
    );
}

#[test]
fn the_default_chain_is_deploy_lane_alone() {
    let rules = LaneRules::default();
    assert_eq!(
        resolve(&rules, &[("deploy.lane", "gray2")]),
        lane("gray2", "deploy.lane", &[])
    );
    assert_eq!(
        resolve(&rules, &[("host.name", "dwuser-gray-v1.0.1")]),
        lane("base", "default", &[])
    );
}

fn rule_error(rule: LaneRule) -> String {
    LaneRules::new(&[
        LaneRule::Attribute {
            key: "ok".into(),
            map: None,
        },
        rule,
    ])
    .unwrap_err()
    .to_string()
}

#[test]
fn bad_rules_are_refused_with_their_key_named() {
    let pattern = |regex: &str, m| LaneRule::Pattern {
        key: "host.name".into(),
        regex: regex.into(),
        map: m,
    };
    let e = rule_error(pattern("(?P<lane>[a-z", None));
    assert!(
        e.starts_with("lane rule #1 `host.name`: invalid regex"),
        "{e}"
    );
    let e = rule_error(pattern("-(?P<color>gray)-", None));
    assert!(
        e.contains("lane rule #1 `host.name`: regex `-(?P<color>gray)-` has no named group `lane`"),
        "{e}"
    );
    let e = rule_error(pattern("(?P<lane>g)", map(&[])));
    assert!(
        e.contains("lane rule #1 `host.name`: `map` is empty"),
        "{e}"
    );
    let e = rule_error(LaneRule::Attribute {
        key: "nacos.metadata.gray".into(),
        map: map(&[("true", "Gray")]),
    });
    assert!(
        e.contains("lane rule #1 `nacos.metadata.gray`: map entry `true` = `Gray`: the value must be a lane id"),
        "{e}"
    );
    let e = rule_error(LaneRule::Attribute {
        key: "nacos.metadata.gray".into(),
        map: map(&[("true", "gray"), (" TRUE", "gray2")]),
    });
    assert!(
        e.contains("`nacos.metadata.gray`: map key `true` is given twice"),
        "{e}"
    );
    // The same lane twice is harmless.
    assert!(
        LaneRules::new(&[LaneRule::Attribute {
            key: "k".into(),
            map: map(&[("true", "gray"), ("TRUE", "gray")]),
        }])
        .is_ok()
    );
    let e = rule_error(LaneRule::Attribute {
        key: " ".into(),
        map: None,
    });
    assert_eq!(e, "lane rule #1: the attribute key is empty");
}

#[test]
fn rules_and_carriers_deserialise_strictly() {
    let rule: LaneRule = serde_json::from_str(
        r#"{"kind":"attribute","key":"nacos.metadata.gray","map":{"true":"gray"}}"#,
    )
    .unwrap();
    assert_eq!(rule.key(), "nacos.metadata.gray");
    let rule: LaneRule =
        serde_json::from_str(r#"{"kind":"pattern","key":"host.name","regex":"-(?P<lane>gray)-"}"#)
            .unwrap();
    assert!(matches!(rule, LaneRule::Pattern { map: None, .. }));
    for bad in [
        r#"{"kind":"attribute","key":"k","mapping":{}}"#,
        r#"{"kind":"token","key":"k"}"#,
        r#"{"kind":"pattern","key":"k"}"#,
    ] {
        assert!(serde_json::from_str::<LaneRule>(bad).is_err(), "{bad}");
    }
    let c: LaneCarrier = serde_json::from_str(r#"{"key":"http.request.header.gray"}"#).unwrap();
    assert_eq!(c.map, None);
    assert!(serde_json::from_str::<LaneCarrier>(r#"{"key":"k","kind":"x"}"#).is_err());
}

/// The carriers of the lane fixtures' `dyeline.toml`.
fn fixture_carriers() -> LaneCarriers {
    LaneCarriers::new(&[LaneCarrier {
        key: "http.request.header.gray".into(),
        map: map(&[("true", "gray"), ("false", "base")]),
    }])
    .unwrap()
}

type Attrs<'a> = [(&'a str, &'a [&'a str])];

fn tag(carriers: &LaneCarriers, attrs: &Attrs<'_>) -> (Option<String>, Option<String>, u32) {
    let t = carriers.resolve(|k| {
        attrs
            .iter()
            .find(|(key, _)| *key == k)
            .map(|(_, v)| v.iter().copied())
    });
    (
        t.tag.map(|l| l.as_str().to_owned()),
        t.source.map(str::to_owned),
        t.malformed,
    )
}

fn got(tag: &str, source: &str, malformed: u32) -> (Option<String>, Option<String>, u32) {
    (Some(tag.to_owned()), Some(source.to_owned()), malformed)
}

const NONE: (Option<String>, Option<String>, u32) = (None, None, 0);

#[test]
fn the_built_in_carriers_come_first_in_order() {
    let c = fixture_carriers();
    let all: &Attrs<'_> = &[
        ("http.request.header.gray", &["false"]),
        ("http.request.header.baggage", &["x-deploy-lane=gray3"]),
        ("baggage.x-deploy-lane", &["gray2"]),
        ("x-deploy-lane", &[" Gray "]),
    ];
    assert_eq!(tag(&c, all), got("gray", "x-deploy-lane", 0));
    assert_eq!(tag(&c, &all[..3]), got("gray2", "baggage.x-deploy-lane", 0));
    assert_eq!(
        tag(&c, &all[..2]),
        got("gray3", "http.request.header.baggage", 0)
    );
    assert_eq!(
        tag(&c, &all[..1]),
        got("base", "http.request.header.gray", 0)
    );
    assert_eq!(tag(&c, &[]), NONE);
    assert_eq!(tag(&c, &[("other", &["gray"])]), NONE);
}

#[test]
fn a_baggage_header_is_searched_member_by_member_in_every_element() {
    let c = LaneCarriers::default();
    let header = |h: &'static [&'static str]| tag(&c, &[("http.request.header.baggage", h)]);
    let source = "http.request.header.baggage";
    // Properties dropped, the value percent-decoded, other members skipped.
    assert_eq!(
        header(&["userId=alice%40example.com,x-deploy-lane=%67ray;ttl=30 , sessionId=s%2F42"]),
        got("gray", source, 0)
    );
    assert_eq!(
        header(&[" x-deploy-lane = GRAY2 ; p1 ; p2=v "]),
        got("gray2", source, 0)
    );
    // Every element is searched: the member may be in a later one.
    assert_eq!(
        header(&["a=1,b=2", "c=3, x-deploy-lane=gray"]),
        got("gray", source, 0)
    );
    // The first member counts, even when a later one would be valid.
    assert_eq!(
        header(&["x-deploy-lane=gray%2Fv2", "x-deploy-lane=gray"]),
        (None, None, 1)
    );
    // No member, or a blank one: no carrier (not counted).
    assert_eq!(header(&["a=1,x-deploy-lane-2=gray"]), NONE);
    assert_eq!(header(&["x-deploy-lane=  ;p"]), NONE);
    assert_eq!(header(&[]), NONE);
}

#[test]
fn a_malformed_carrier_is_counted_and_the_next_one_decides() {
    let c = fixture_carriers();
    // lanes-small 1d00000000000003: two malformed built-ins, then the captured header.
    assert_eq!(
        tag(
            &c,
            &[
                ("x-deploy-lane", &["gray_v2"]),
                ("http.request.header.baggage", &["x-deploy-lane=gray%2Fv2"]),
                ("http.request.header.gray", &["true"]),
            ]
        ),
        got("gray", "http.request.header.gray", 2)
    );
    // A value missing from the map is malformed; nothing left: no tag, one malformed.
    assert_eq!(
        tag(&c, &[("http.request.header.gray", &["yes"])]),
        (None, None, 1)
    );
    // A captured header's first element counts.
    assert_eq!(
        tag(&c, &[("http.request.header.gray", &["FALSE ", "true"])]),
        got("base", "http.request.header.gray", 0)
    );
    // A carrier after the deciding one is not read.
    assert_eq!(
        tag(
            &c,
            &[
                ("x-deploy-lane", &["gray"]),
                ("http.request.header.gray", &["bad"])
            ]
        ),
        got("gray", "x-deploy-lane", 0)
    );
    // Blank values and attributes with no string value are absent.
    assert_eq!(
        tag(
            &c,
            &[("x-deploy-lane", &[" "]), ("baggage.x-deploy-lane", &[])]
        ),
        NONE
    );
}

#[test]
fn user_carriers_without_a_map_read_the_percent_decoded_id() {
    let c = LaneCarriers::new(&[
        LaneCarrier {
            key: "x-env".into(),
            map: None,
        },
        LaneCarrier {
            key: "http.request.header.x-gray".into(),
            map: map(&[("1", "gray")]),
        },
    ])
    .unwrap();
    assert_eq!(
        tag(&c, &[("x-env", &["%20Gray%32"])]),
        got("gray2", "x-env", 0)
    );
    assert_eq!(
        tag(
            &c,
            &[
                ("x-env", &["gray 2"]),
                ("http.request.header.x-gray", &["1"])
            ]
        ),
        got("gray", "http.request.header.x-gray", 1)
    );
    assert_eq!(
        c.user_keys().collect::<Vec<_>>(),
        ["x-env", "http.request.header.x-gray"]
    );
    assert_eq!(LaneCarriers::default().user_keys().len(), 0);
}

#[test]
fn bad_carriers_are_refused_with_their_key_named() {
    let err = |carriers: &[LaneCarrier]| LaneCarriers::new(carriers).unwrap_err().to_string();
    let carrier = |key: &str, m| LaneCarrier {
        key: key.into(),
        map: m,
    };
    let e = err(&[carrier("x-deploy-lane", None)]);
    assert!(
        e.starts_with("lane carrier #0 `x-deploy-lane`: the key is a built-in carrier"),
        "{e}"
    );
    let e = err(&[carrier("h", None), carrier("h", None)]);
    assert!(
        e.starts_with("lane carrier #1 `h`: the key is given twice"),
        "{e}"
    );
    let e = err(&[carrier("h", map(&[("true", "gray lane")]))]);
    assert!(
        e.contains("lane carrier #0 `h`: map entry `true` = `gray lane`"),
        "{e}"
    );
    let e = err(&[carrier("", None)]);
    assert_eq!(e, "lane carrier #0: the attribute key is empty");
}

/// A lane id, written as a client might: any case, surrounding spaces, some bytes
/// percent-encoded.
fn written(id: &str, upper: &[bool], encode: &[bool]) -> String {
    let mut out = String::from(" ");
    for (i, ch) in id.chars().enumerate() {
        let ch = if upper[i % upper.len()] {
            ch.to_ascii_uppercase()
        } else {
            ch
        };
        if encode[i % encode.len()] {
            out.push_str(&format!("%{:02X}", ch as u32));
        } else {
            out.push(ch);
        }
    }
    out.push(' ');
    out
}

proptest! {
    /// Any attribute values whatsoever: resolving never panics, a tag comes with its source,
    /// and malformed carriers are at most the carriers.
    #[test]
    fn resolving_never_fails(
        values in proptest::collection::vec(proptest::option::of(proptest::collection::vec(".{0,40}", 0..3)), 4),
    ) {
        let c = fixture_carriers();
        let keys = ["x-deploy-lane", "baggage.x-deploy-lane", "http.request.header.baggage", "http.request.header.gray"];
        let t = c.resolve(|k| {
            let i = keys.iter().position(|key| *key == k)?;
            values[i].as_ref().map(|v| v.iter().map(String::as_str))
        });
        prop_assert_eq!(t.tag.is_some(), t.source.is_some());
        prop_assert!(t.malformed <= 4);
        if let Some(tag) = &t.tag {
            prop_assert!(LaneId::new(tag.as_str()).is_ok());
        }
    }

    /// A lane id written with any case, spaces and percent-encoding reads back, from a span
    /// attribute and from a baggage header among other members with properties.
    #[test]
    fn a_written_lane_id_reads_back(
        id in "[a-z0-9][a-z0-9-]{0,20}",
        upper in proptest::collection::vec(any::<bool>(), 1..4),
        encode in proptest::collection::vec(any::<bool>(), 1..4),
        before in proptest::collection::vec("[a-w]{1,8}=[a-z0-9%]{0,8}(;[a-z]{1,4})?", 0..4),
        after in proptest::collection::vec("[a-w]{1,8}=[a-z0-9]{0,8}", 0..4),
        props in "(;[a-z]{1,5}(=[a-z0-9]{1,5})?){0,2}",
    ) {
        let c = LaneCarriers::default();
        let text = written(&id, &upper, &encode);
        let t = c.resolve(|k| (k == "x-deploy-lane").then_some([text.as_str()]));
        prop_assert_eq!(t.tag.as_ref().map(LaneId::as_str), Some(id.as_str()));
        let mut members = before.clone();
        members.push(format!("x-deploy-lane={text}{props}"));
        members.extend(after.iter().cloned());
        let header = members.join(",");
        let t = c.resolve(|k| (k == "http.request.header.baggage").then_some([header.as_str()]));
        prop_assert_eq!(t.tag.as_ref().map(LaneId::as_str), Some(id.as_str()));
        prop_assert_eq!(t.source, Some("http.request.header.baggage"));
        prop_assert_eq!(t.malformed, 0);
    }

    /// Instance lanes: any resource values give a lane id; each value recorded as invalid is
    /// one that is not a lane id.
    #[test]
    fn instance_lanes_never_fail(
        deploy in proptest::option::of(".{0,20}"),
        nacos in proptest::option::of("(true|false|TRUE|x|.{0,5})"),
        host in proptest::option::of("(dw[a-z]{1,5}-gray[0-9]?-v1|.{0,20})"),
    ) {
        let rules = fixture_rules();
        let r = rules.resolve(|k| match k {
            "deploy.lane" => deploy.as_deref(),
            "nacos.metadata.gray" => nacos.as_deref(),
            "host.name" => host.as_deref(),
            _ => None,
        });
        prop_assert!(LaneId::new(r.lane.as_str()).is_ok());
        prop_assert!(["deploy.lane", "nacos.metadata.gray", "host.name", "default"].contains(&r.rule.as_str()));
        prop_assert!(r.invalid_values.len() <= 2);
        for v in &r.invalid_values {
            // Not a lane id, or the Nacos value missing from its map.
            prop_assert!(LaneId::read(v).is_none() || nacos.as_deref() == Some(v.as_str()), "{v:?}");
        }
        if let Some(d) = deploy.as_deref().and_then(LaneId::read) {
            prop_assert_eq!(r.lane, d);
            prop_assert_eq!(r.rule.as_str(), "deploy.lane");
        }
    }
}
