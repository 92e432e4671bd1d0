//! Unit and property tests of the decision codec (domain §2; cases 08 and 10).

use super::*;
use proptest::prelude::*;

fn pairs(d: &Decisions) -> Vec<(&str, Color)> {
    d.iter().collect()
}

fn attr<'a>(entries: &'a [(&'a str, &'a [&'a str])]) -> impl Fn(&str) -> Option<Vec<&'a str>> + 'a {
    move |k| {
        entries
            .iter()
            .find(|(key, _)| *key == k)
            .map(|(_, v)| v.to_vec())
    }
}

fn read(entries: &[(&str, &[&str])]) -> Option<ReadDecision> {
    read_decision(&DecisionSource::DEFAULT_ORDER, attr(entries))
}

const BLUE: Color = Color::Blue;
const GREEN: Color = Color::Green;

#[test]
fn case_08_value_with_equals_properties_and_whitespace() {
    let want = [("ch1", BLUE), ("ch2", GREEN)];
    for value in [
        "ch1=blue&ch2=green",
        "ch1=blue&ch2=green;ttl=30",
        "  ch1=blue&ch2=green  ",
    ] {
        let d = Decisions::parse(value);
        assert_eq!(pairs(&d), want, "{value:?}");
        assert_eq!(d.malformed_pairs(), 0, "{value:?}");
        assert!(d.conflicting().is_empty(), "{value:?}");
    }
    // Row 4: same decisions, other order.
    let d = Decisions::parse("ch2=green&ch1=blue");
    assert_eq!(pairs(&d), [("ch2", GREEN), ("ch1", BLUE)]);
    assert_eq!((d.get("ch1"), d.get("ch2")), (Some(BLUE), Some(GREEN)));

    // Row 3: the whole header captured as `http.request.header.baggage`.
    let row3 = "x-deploy-channel-type = ch1=blue&ch2=green ; src=gw , user-tier=gold";
    assert_eq!(
        baggage_member(row3, BAGGAGE_KEY).as_deref(),
        Some("ch1=blue&ch2=green")
    );
    assert_eq!(baggage_member(row3, "user-tier").as_deref(), Some("gold"));
    let r = read(&[("http.request.header.baggage", &[row3])]).unwrap();
    assert_eq!(r.source, DecisionSource::BaggageHeader);
    assert_eq!(r.text, "ch1=blue&ch2=green");
    assert_eq!(pairs(&r.decisions), want);
    assert_eq!(r.decisions.get("user-tier"), None);

    // Row 6.
    let row6 = "user-tier=gold,x-deploy-channel-type=ch1=green&ch2=green;prop";
    let r = read(&[("http.request.header.baggage", &[row6])]).unwrap();
    assert_eq!(r.text, "ch1=green&ch2=green");
    assert_eq!(pairs(&r.decisions), [("ch1", GREEN), ("ch2", GREEN)]);
    assert_eq!(r.decisions.malformed_pairs(), 0);
}

#[test]
fn case_10_malformed_or_missing_input_a() {
    // (value, decisions, malformed_pairs, conflicting)
    type Row = (
        &'static str,
        &'static [(&'static str, Color)],
        u32,
        &'static [&'static str],
    );
    let rows: [Row; 7] = [
        (
            "ch1=blue&&ch2=green&",
            &[("ch1", BLUE), ("ch2", GREEN)],
            0,
            &[],
        ),
        ("ch1=blue&ch2=", &[("ch1", BLUE)], 1, &[]),
        ("ch1=blue&ch2=purple", &[("ch1", BLUE)], 1, &[]),
        (
            "ch1=blue&ch1=blue&ch2=green",
            &[("ch1", BLUE), ("ch2", GREEN)],
            0,
            &[],
        ),
        (
            "ch1=blue&ch1=green&ch2=green",
            &[("ch1", BLUE), ("ch2", GREEN)],
            0,
            &["ch1"],
        ),
        (",", &[], 1, &[]),
        ("", &[], 0, &[]),
    ];
    for (value, want, malformed, conflicting) in rows {
        let d = Decisions::parse(value);
        assert_eq!(pairs(&d), want, "{value:?}");
        assert_eq!(d.malformed_pairs(), malformed, "{value:?}");
        assert_eq!(d.conflicting(), conflicting, "{value:?}");
    }
    assert_eq!(Decisions::parse("ch1=blue&ch2=").get("ch2"), None);
    assert_eq!(Decisions::parse("ch1=blue&ch2=purple").get("ch2"), None);

    // Row 6 is a present but unreadable source: no decision, one malformed piece.
    let r = read(&[("x-deploy-channel-type", &[","])]).unwrap();
    assert!(r.decisions.is_empty());
    assert_eq!(r.decisions.malformed_pairs(), 1);
    // Row 7 carries nothing: no decision at all, as if absent.
    assert_eq!(read(&[("x-deploy-channel-type", &[""])]), None);
    // A missing attribute (input B's `stock` span) is no decision, not a colour.
    assert_eq!(read(&[("rpc.system", &["apache_dubbo"])]), None);
}

#[test]
fn parse_details() {
    let d = Decisions::parse("trade%3Dgreen%26pay%3Dblue");
    assert_eq!(pairs(&d), [("trade", GREEN), ("pay", BLUE)]);
    let d = Decisions::parse(" pay = Green & trade = BLUE ");
    assert_eq!(pairs(&d), [("pay", GREEN), ("trade", BLUE)]);
    // Split on the first `=` only: `blue=x` is not a colour.
    let d = Decisions::parse("a=blue=x&b=green");
    assert_eq!((pairs(&d), d.malformed_pairs()), (vec![("b", GREEN)], 1));
    let d = Decisions::parse("pay=green&&risk&=blue&trade=purple&");
    assert_eq!((pairs(&d), d.malformed_pairs()), (vec![("pay", GREEN)], 3));
    // A conflicting channel is listed once however often it conflicts.
    let d = Decisions::parse("t=blue&t=green&t=green&t=blue&p=green&p=blue");
    assert_eq!(pairs(&d), [("t", BLUE), ("p", GREEN)]);
    assert_eq!(d.conflicting(), ["t", "p"]);
    // `unknown` is not a decision; invalid escapes are kept as text.
    assert_eq!(Decisions::parse("a=unknown").malformed_pairs(), 1);
    assert_eq!(pairs(&Decisions::parse("a%zz=blue")), [("a%zz", BLUE)]);
    assert!(Decisions::parse(" & &\t").is_blank());
}

#[test]
fn insert_and_encode() {
    let mut d = Decisions::default();
    assert_eq!(d.encode(), "");
    assert!(d.insert("a", BLUE));
    assert!(d.insert("b", GREEN));
    assert!(!d.insert("a", GREEN), "first decision wins");
    assert!(!d.insert("c", Color::Unknown));
    for bad in ["", " c", "c&d", "c=d", "c;d", "c%41"] {
        assert!(!d.insert(bad, BLUE), "{bad:?}");
    }
    assert_eq!(d.encode(), "a=blue&b=green");
    assert_eq!(Decisions::parse(&d.encode()), d);
    assert_eq!(d.get("a"), Some(BLUE));
    assert_eq!(d.len(), 2);
}

#[test]
fn baggage_member_rules() {
    assert_eq!(baggage_member("", BAGGAGE_KEY), None);
    assert_eq!(baggage_member(",", BAGGAGE_KEY), None);
    assert_eq!(baggage_member("x-deploy-channel-type", BAGGAGE_KEY), None);
    assert_eq!(
        baggage_member(
            "a=1,x-deploy-channel-type=t%3Dblue,x-deploy-channel-type=t=green",
            BAGGAGE_KEY
        )
        .as_deref(),
        Some("t=blue"),
        "first member wins"
    );
    assert_eq!(
        baggage_member("\tx-deploy-channel-type\t=\tt=blue\t;\tp", BAGGAGE_KEY).as_deref(),
        Some("t=blue")
    );
    assert_eq!(
        baggage_member("X-Deploy-Channel-Type=t=blue", BAGGAGE_KEY),
        None
    );
    assert_eq!(
        baggage_member("x-deploy-channel-type=", BAGGAGE_KEY).as_deref(),
        Some("")
    );
    assert_eq!(
        baggage_member("sessionId=s%2F42", "sessionId").as_deref(),
        Some("s/42")
    );
}

#[test]
fn read_decision_precedence_and_fall_through() {
    let both: &[(&str, &[&str])] = &[
        ("x-deploy-channel-type", &[" pay = Green "]),
        (
            "http.request.header.baggage",
            &["x-deploy-channel-type=pay%3Dblue"],
        ),
    ];
    let r = read(both).unwrap();
    assert_eq!(r.source, DecisionSource::Attribute);
    assert_eq!(r.text, " pay = Green ");
    assert_eq!(pairs(&r.decisions), [("pay", GREEN)]);

    // A blank higher source falls through to the next one.
    let r = read(&[
        ("x-deploy-channel-type", &["  "]),
        ("baggage.x-deploy-channel-type", &["&"]),
        (
            "http.request.header.baggage",
            &["x-deploy-channel-type=pay%3Dblue"],
        ),
    ])
    .unwrap();
    assert_eq!(r.source, DecisionSource::BaggageHeader);
    assert_eq!(
        (r.text.as_str(), pairs(&r.decisions)),
        ("pay=blue", vec![("pay", BLUE)])
    );

    // A malformed higher source does not.
    let r = read(&[
        ("x-deploy-channel-type", &["pay=purple"]),
        ("baggage.x-deploy-channel-type", &["pay=blue"]),
    ])
    .unwrap();
    assert_eq!(r.source, DecisionSource::Attribute);
    assert_eq!((r.decisions.len(), r.decisions.malformed_pairs()), (0, 1));

    // Array values: attributes join with `&`, header values are one header.
    let r = read(&[("baggage.x-deploy-channel-type", &["a=blue", "b=green"])]).unwrap();
    assert_eq!(r.text, "a=blue&b=green");
    let r = read(&[(
        "http.request.header.baggage",
        &["userId=u-1001", "x-deploy-channel-type=a%3Dgreen;ttl=30"],
    )])
    .unwrap();
    assert_eq!(
        (r.text.as_str(), pairs(&r.decisions)),
        ("a=green", vec![("a", GREEN)])
    );
    // A header without the member is no source; a custom order is honoured.
    assert_eq!(
        read(&[("http.request.header.baggage", &["userId=u-1"])]),
        None
    );
    let order = [DecisionSource::BaggageHeader, DecisionSource::Attribute];
    let r = read_decision(&order, attr(both)).unwrap();
    assert_eq!(r.source, DecisionSource::BaggageHeader);
    assert_eq!(
        DecisionSource::from_key("baggage.x-deploy-channel-type"),
        Some(DecisionSource::BaggageAttribute)
    );
}

fn color() -> impl Strategy<Value = Color> {
    prop_oneof![Just(BLUE), Just(GREEN)]
}

fn decisions() -> impl Strategy<Value = Decisions> {
    proptest::collection::vec(("[a-z0-9][a-z0-9-]{0,20}", color()), 0..8).prop_map(|v| {
        let mut d = Decisions::default();
        for (c, col) in v {
            d.insert(&c, col);
        }
        d
    })
}

fn grammar_text() -> impl Strategy<Value = String> {
    "[a-cA-C0-9=&;%, \t\u{e9}-]{0,40}"
}

proptest! {
    #[test]
    fn parse_never_panics(s in any::<String>(), g in grammar_text()) {
        let _ = Decisions::parse(&s);
        let d = Decisions::parse(&g);
        // Invariants: unique, non-empty, trimmed channels; conflicts are decided channels.
        for (i, (c, col)) in d.iter().enumerate() {
            prop_assert!(!c.is_empty() && c.trim() == c && !c.contains(['&', '=', ';']));
            prop_assert!(col != Color::Unknown);
            prop_assert!(d.iter().skip(i + 1).all(|(o, _)| o != c));
        }
        for c in d.conflicting() {
            prop_assert!(d.get(c).is_some());
        }
    }

    #[test]
    fn baggage_member_never_panics(s in any::<String>(), g in "[a-z0-9=,; %-]{0,60}") {
        let _ = baggage_member(&s, BAGGAGE_KEY);
        let _ = baggage_member(&g, "x");
        let _ = read(&[("http.request.header.baggage", &[s.as_str(), g.as_str()])]);
    }

    #[test]
    fn encode_round_trips(d in decisions()) {
        prop_assert_eq!(Decisions::parse(&d.encode()), d.clone());
        let encoded = percent_encoding::utf8_percent_encode(
            &d.encode(), percent_encoding::NON_ALPHANUMERIC).to_string();
        prop_assert_eq!(Decisions::parse(&encoded), d.clone());
        // As a baggage member, with properties and other members around it.
        let header = format!("k=v , {BAGGAGE_KEY} = {encoded} ;ttl=30, z=1");
        let r = read(&[("http.request.header.baggage", &[header.as_str()])]);
        if d.is_empty() {
            prop_assert_eq!(r, None);
        } else {
            prop_assert_eq!(r.map(|r| r.decisions), Some(d));
        }
    }

    #[test]
    fn reparse_of_encode_keeps_decisions(g in "[a-cA-C0-9=&;, \t%-]{0,40}") {
        let d = Decisions::parse(&g);
        let again = Decisions::parse(&d.encode());
        prop_assert_eq!(pairs(&again), pairs(&d));
    }
}

/// Found by the `baggage` fuzz target: `%%326=blue` parses to channel `%26`, which `encode`
/// must write as `%2526` so that parsing it again does not decode a second time.
#[test]
fn encode_escapes_percent_in_parsed_channel_names() {
    for input in ["%%326=blue", "trade%2541=blue&pay=green"] {
        let d = Decisions::parse(input);
        assert!(!d.is_empty(), "{input}");
        assert_eq!(
            Decisions::parse(&d.encode()),
            d,
            "{input} -> {}",
            d.encode()
        );
    }
    assert_eq!(
        Decisions::parse("trade%2541=blue").encode(),
        "trade%2541=blue"
    );
}
