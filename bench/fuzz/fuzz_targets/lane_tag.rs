//! The lane tag reader (domain §7.1, `LaneCarriers::resolve`) and the instance lane rules
//! (`LaneRules::resolve`) on any text: no panic, a tag always comes with its source and is a
//! lane id, malformed carriers are at most the carriers present, and the tag agrees with an
//! independent reading of the carrier that gave it.
//!
//! The input is split at NUL bytes into up to five values, each given (when non-empty) to one
//! carrier: `x-deploy-lane`, `baggage.x-deploy-lane`, `http.request.header.baggage` (split
//! again at `\x01` into the elements of a captured header array), the user carrier
//! `http.request.header.gray` (with a map) and the user carrier `x-env` (without).
#![no_main]

use std::collections::BTreeMap;
use std::sync::OnceLock;

use dyeline_model::decision::baggage_members;
use dyeline_model::{LaneCarrier, LaneCarriers, LaneId, LaneRule, LaneRules};
use libfuzzer_sys::fuzz_target;

const KEYS: [&str; 5] = [
    "x-deploy-lane",
    "baggage.x-deploy-lane",
    "http.request.header.baggage",
    "http.request.header.gray",
    "x-env",
];

/// Compiled once (the regex compile would dwarf a run).
fn carriers() -> &'static LaneCarriers {
    static CARRIERS: OnceLock<LaneCarriers> = OnceLock::new();
    CARRIERS.get_or_init(compile_carriers)
}

fn rules() -> &'static LaneRules {
    static RULES: OnceLock<LaneRules> = OnceLock::new();
    RULES.get_or_init(compile_rules)
}

fn compile_carriers() -> LaneCarriers {
    let map: BTreeMap<String, String> = [("true", "gray"), ("false", "base")]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    LaneCarriers::new(&[
        LaneCarrier {
            key: KEYS[3].to_owned(),
            map: Some(map),
        },
        LaneCarrier {
            key: KEYS[4].to_owned(),
            map: None,
        },
    ])
    .expect("the carriers compile")
}

fn compile_rules() -> LaneRules {
    LaneRules::new(&[LaneRule::Pattern {
        key: "host.name".to_owned(),
        regex: "-(?P<lane>[^-]*)-".to_owned(),
        map: None,
    }])
    .expect("the rules compile")
}

fuzz_target!(|data: &[u8]| {
    let s = String::from_utf8_lossy(data);
    let parts: Vec<&str> = s.splitn(KEYS.len(), '\0').collect();
    let values: Vec<Option<Vec<&str>>> = (0..KEYS.len())
        .map(|i| {
            let part = parts.get(i).copied().filter(|p| !p.is_empty())?;
            Some(if i == 2 {
                part.split('\u{1}').collect()
            } else {
                vec![part]
            })
        })
        .collect();
    let carriers = carriers();
    let tag = carriers.resolve(|key| {
        let i = KEYS.iter().position(|k| *k == key)?;
        values[i].as_ref().map(|v| v.iter().copied())
    });
    let present = values.iter().filter(|v| v.is_some()).count();
    assert!(tag.malformed as usize <= present, "{tag:?} of {present} carriers; input {s:?}");
    assert_eq!(tag.tag.is_some(), tag.source.is_some(), "{tag:?}");
    if let (Some(lane), Some(source)) = (&tag.tag, tag.source) {
        assert!(LaneId::new(lane.as_str()).is_ok(), "{lane:?} is no lane id");
        // An independent reading of the carrier that gave it.
        let i = KEYS.iter().position(|k| *k == source).expect("a known carrier");
        let first = values[i].as_ref().expect("present")[0];
        match i {
            // Without an escape, percent-decoding changes nothing.
            0 | 1 | 4 if !first.contains('%') => {
                assert_eq!(LaneId::read(first).as_ref(), Some(lane), "input {s:?}");
            }
            0 | 1 | 4 => {}
            2 => {
                let member = values[i]
                    .as_ref()
                    .expect("present")
                    .iter()
                    .find_map(|h| baggage_members(h, "x-deploy-lane").next())
                    .expect("a member");
                assert_eq!(LaneId::read(&member).as_ref(), Some(lane), "input {s:?}");
            }
            _ => assert!(["gray", "base"].contains(&lane.as_str()), "{lane:?}"),
        }
    }
    // The instance lane rules on the same text: a lane id whatever the values.
    let rules = rules();
    let lane = rules.resolve(|key| match key {
        "deploy.lane" => parts.first().copied(),
        "host.name" => parts.get(1).copied(),
        _ => None,
    });
    assert!(LaneId::new(lane.lane.as_str()).is_ok(), "{lane:?}");
    assert!(lane.invalid_values.len() <= 2, "{lane:?}");
});
