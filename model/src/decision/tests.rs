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

/// Domain §2: the member given twice in one baggage header, or in two captured header values,
/// is one value joined with `&` in header order: the first pair wins, a conflict is flagged.
#[test]
fn a_repeated_baggage_member_is_joined_in_header_order() {
    let header = "a=1, x-deploy-channel-type=trade%3Dblue ;p, x-deploy-channel-type = trade=green%26pay=blue";
    assert_eq!(
        decision_member(header).as_deref(),
        Some("trade=blue&trade=green&pay=blue")
    );
    assert_eq!(
        baggage_members(header, BAGGAGE_KEY).collect::<Vec<_>>(),
        ["trade=blue", "trade=green&pay=blue"]
    );
    let r = read(&[("http.request.header.baggage", &[header])]).unwrap();
    assert_eq!(r.text, "trade=blue&trade=green&pay=blue");
    assert_eq!(pairs(&r.decisions), [("trade", BLUE), ("pay", BLUE)]);
    assert_eq!(r.decisions.conflicting(), ["trade"]);
    // Two captured header values (an array attribute): joined the same way, in their order.
    let two: &[&str] = &[
        "x-deploy-channel-type=pay%3Dgreen",
        "u=1,x-deploy-channel-type=pay%3Dblue%26trade%3Dgreen",
    ];
    let r = read(&[("http.request.header.baggage", two)]).unwrap();
    assert_eq!(r.text, "pay=green&pay=blue&trade=green");
    assert_eq!(pairs(&r.decisions), [("pay", GREEN), ("trade", GREEN)]);
    assert_eq!(r.decisions.conflicting(), ["pay"]);
    // An identical repeat is harmless; an empty member adds an empty piece, ignored.
    let r = read(&[(
        "http.request.header.baggage",
        &["x-deploy-channel-type=pay%3Dblue,x-deploy-channel-type=,x-deploy-channel-type=pay=blue"],
    )])
    .unwrap();
    assert_eq!(pairs(&r.decisions), [("pay", BLUE)]);
    assert!(r.decisions.conflicting().is_empty());
    assert_eq!(r.decisions.malformed_pairs(), 0);
    assert_eq!(decision_member("a=1"), None);
    // Members past the limit are not joined: the text stays about MAX_VALUE_BYTES long.
    let big = format!("{BAGGAGE_KEY}={}", "a=blue%26".repeat(1000));
    let many = vec![big.as_str(); 50].join(",");
    let text = decision_member(&many).unwrap();
    assert!(text.len() < 2 * MAX_VALUE_BYTES, "{}", text.len());
    assert!(Decisions::parse(&text).truncated());
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

    /// Headers of members drawn from a few keys and values: the decision text is every
    /// member's value joined with `&`, the first one first, and it parses as the values
    /// one after the other would (first pair wins).
    #[test]
    fn the_decision_member_joins_every_member_in_header_order(
        members in prop::collection::vec(
            (
                prop::sample::select(vec![BAGGAGE_KEY, " x-deploy-channel-type ", "a", "x"]),
                prop::sample::select(vec!["t=blue", "t%3Dgreen", "", "p=green;ttl=1", "u=blue%26t=green"]),
            ),
            0..6,
        ),
    ) {
        let header = members
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",");
        let all: Vec<String> = baggage_members(&header, BAGGAGE_KEY)
            .map(std::borrow::Cow::into_owned)
            .collect();
        let expected: Vec<String> = members
            .iter()
            .filter(|(k, _)| k.trim() == BAGGAGE_KEY)
            .map(|(_, v)| {
                let v = v.split(';').next().unwrap_or_default();
                percent_encoding::percent_decode_str(v).decode_utf8_lossy().into_owned()
            })
            .collect();
        prop_assert_eq!(&all, &expected);
        prop_assert_eq!(decision_member(&header), (!all.is_empty()).then(|| all.join("&")));
        prop_assert_eq!(baggage_member(&header, BAGGAGE_KEY), all.first().cloned());
        // The first colour given for `t` is the one kept.
        let first_t = all
            .iter()
            .flat_map(|v| v.split('&'))
            .find_map(|p| p.strip_prefix("t="))
            .and_then(Color::parse);
        let parsed = decision_member(&header).map(|t| Decisions::parse(&t));
        prop_assert_eq!(parsed.and_then(|d| d.get("t")), first_t);
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

/// The parse before the limits, kept as the reference model: a scan of the kept pairs per
/// pair (quadratic in the number of channels), no limit on pairs or bytes.
fn reference_parse(value: &str) -> (Vec<(String, Color)>, u32, Vec<String>) {
    let decoded = percent_decode_str(value).decode_utf8_lossy();
    let body = decoded.split(';').next().unwrap_or_default();
    let (mut entries, mut malformed, mut conflicting) = (Vec::new(), 0, Vec::<String>::new());
    for piece in body.split('&') {
        let piece = piece.trim();
        if piece.is_empty() {
            continue;
        }
        let Some((channel, color)) = piece.split_once('=') else {
            malformed += 1;
            continue;
        };
        let channel = channel.trim();
        let Some(color) = Color::parse(color).filter(|_| !channel.is_empty()) else {
            malformed += 1;
            continue;
        };
        match entries.iter().find(|(c, _)| c == channel) {
            None => entries.push((channel.to_owned(), color)),
            Some((_, kept)) if *kept != color && !conflicting.iter().any(|c| c == channel) => {
                conflicting.push(channel.to_owned());
            }
            Some(_) => {}
        }
    }
    (entries, malformed, conflicting)
}

fn model_of(d: &Decisions) -> (Vec<(String, Color)>, u32, Vec<String>) {
    (
        d.iter().map(|(c, col)| (c.to_owned(), col)).collect(),
        d.malformed_pairs(),
        d.conflicting().to_vec(),
    )
}

/// `n` pairs `c0=blue&c1=blue&…`.
fn blue_pairs(n: usize) -> String {
    (0..n)
        .map(|i| format!("c{i}=blue"))
        .collect::<Vec<_>>()
        .join("&")
}

#[test]
fn at_most_max_pairs_are_read() {
    // The span: 100,000 pairs, one channel each.
    let value = blue_pairs(100_000);
    let d = Decisions::parse(&value);
    assert_eq!(d.len(), MAX_PAIRS);
    assert!(d.truncated());
    assert_eq!((d.malformed_pairs(), d.conflicting().len()), (0, 0));
    assert_eq!(d.get("c179"), Some(BLUE));
    assert_eq!(d.get("c180"), None);
    // Malformed pieces count towards the limit too: 100,000 of them examine 180.
    let junk = "x&".repeat(100_000);
    let d = Decisions::parse(&junk);
    assert_eq!(
        (d.len(), d.malformed_pairs(), d.truncated()),
        (0, 180, true)
    );
    assert!(!d.is_blank(), "a truncated value is present");
    // Exactly at the limit nothing is lost; empty pieces do not count.
    let d = Decisions::parse(&format!("{}&&&", blue_pairs(MAX_PAIRS)));
    assert_eq!((d.len(), d.truncated()), (MAX_PAIRS, false));
}

/// `n` pairs of 100 bytes each (`cNNN…=green`), 10 of them and a separator per kibibyte.
fn long_pairs(n: usize) -> String {
    (0..n)
        .map(|i| format!("c{i:0>93}=green"))
        .collect::<Vec<_>>()
        .join("&")
}

#[test]
fn at_most_max_value_bytes_are_read() {
    let value = long_pairs(100);
    assert_eq!(value.len(), 100 * 100 + 99);
    let d = Decisions::parse(&value);
    // Pair i spans bytes [101 i, 101 i + 100): 81 pairs end within 8,192 bytes, the 82nd is
    // cut at byte 8,192 and dropped, not counted as malformed.
    assert_eq!((d.len(), d.malformed_pairs(), d.truncated()), (81, 0, true));
    assert_eq!(d.get(&format!("c{:0>93}", 80)), Some(GREEN));
    // A cut just before a separator keeps the last pair whole: `d=green` ends at byte 8,192.
    let head = format!("b=blue&{}&d=green", "x".repeat(MAX_VALUE_BYTES - 15));
    assert_eq!(head.len(), MAX_VALUE_BYTES);
    for (sep, truncated) in [
        ("&", true),
        ("%26", true),
        (" \t&", true),
        (";", false),
        ("%3b", false),
        ("%3B", false),
    ] {
        let d = Decisions::parse(&format!("{head}{sep}e=blue&f=blue"));
        assert_eq!(pairs(&d), [("b", BLUE), ("d", GREEN)], "{sep:?}");
        assert_eq!(d.malformed_pairs(), 1, "{sep:?}: the x run");
        assert_eq!(d.truncated(), truncated, "{sep:?}");
    }
    // Anything else, and the cut piece is dropped (here it would have read `d=greenx`).
    for sep in ["x", "%2", "%25"] {
        let d = Decisions::parse(&format!("{head}{sep}&e=blue"));
        assert_eq!(pairs(&d), [("b", BLUE)], "{sep:?}");
        assert_eq!((d.malformed_pairs(), d.truncated()), (1, true), "{sep:?}");
    }
    // Only whitespace past the limit: nothing is lost.
    let value = format!("a=blue{}", " ".repeat(MAX_VALUE_BYTES * 2));
    let d = Decisions::parse(&value);
    assert_eq!((pairs(&d), d.truncated()), (vec![("a", BLUE)], false));
    // Properties that run past the limit: the pairs are whole.
    let value = format!("a=blue&b=green;{}", "p".repeat(MAX_VALUE_BYTES * 2));
    let d = Decisions::parse(&value);
    assert_eq!((d.len(), d.truncated()), (2, false));
    // One piece longer than the limit: nothing decided, but present.
    let d = Decisions::parse(&format!("a={}", "b".repeat(MAX_VALUE_BYTES)));
    assert_eq!((d.len(), d.malformed_pairs(), d.truncated()), (0, 0, true));
    let long = "z=blue&".repeat(2000);
    let r = read(&[("x-deploy-channel-type", &[long.as_str()])]).unwrap();
    assert_eq!((r.decisions.len(), r.decisions.truncated()), (1, true));
    // The limit falls inside a three-byte character: cut before it.
    let d = Decisions::parse(&format!("a=blue&{}", "€".repeat(MAX_VALUE_BYTES)));
    assert_eq!((pairs(&d), d.truncated()), (vec![("a", BLUE)], true));
    // A cut inside a percent-escape drops that piece.
    let mut value = "a=blue&".to_owned();
    value.push_str(&"y".repeat(MAX_VALUE_BYTES - value.len() - 9));
    value.push_str("&b=blue%2");
    assert_eq!(value.len(), MAX_VALUE_BYTES);
    value.push_str("6c=green");
    let d = Decisions::parse(&value);
    assert_eq!((pairs(&d), d.truncated()), (vec![("a", BLUE)], true));
    assert_eq!(d.malformed_pairs(), 1, "the y run");
}

#[test]
fn insert_stops_at_the_limits() {
    let mut d = Decisions::default();
    for i in 0..MAX_PAIRS {
        assert!(d.insert(&format!("c{i}"), BLUE), "{i}");
    }
    assert!(!d.insert("one-more", GREEN));
    assert_eq!(Decisions::parse(&d.encode()), d);

    let mut d = Decisions::default();
    let mut i = 0;
    while d.insert(&format!("{i:0>94}"), GREEN) {
        i += 1;
    }
    // 100 bytes per pair and a separator: 81 fit in 8,192 bytes.
    assert_eq!(i, 81);
    assert!(d.encode().len() <= MAX_VALUE_BYTES);
    assert!(d.insert("short", BLUE), "a shorter pair still fits");
    assert!(d.encode().len() <= MAX_VALUE_BYTES);
    assert_eq!(Decisions::parse(&d.encode()), d);
}

/// Text with long runs of the grammar's characters: over the limits as often as under them.
fn long_text() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            "[a-c]{1,3}=(blue|green|BLUE|purple)",
            "[a-c]{0,2}",
            Just("%26".to_owned()),
            Just("%3D".to_owned()),
            Just(";p".to_owned()),
            Just("€".to_owned()),
            "[a-z]{50,120}=blue",
        ],
        0..400,
    )
    .prop_map(|pieces| pieces.join("&"))
}

proptest! {
    /// Under the limits, the parse is the reference model's (and not truncated).
    #[test]
    fn parse_equals_the_reference_under_the_limits(g in grammar_text(), l in long_text()) {
        for value in [g, l] {
            let pieces = percent_decode_str(&value)
                .decode_utf8_lossy()
                .split(';')
                .next()
                .unwrap_or_default()
                .split('&')
                .filter(|p| !p.trim().is_empty())
                .count();
            if value.len() <= MAX_VALUE_BYTES && pieces <= MAX_PAIRS {
                let d = Decisions::parse(&value);
                prop_assert_eq!(model_of(&d), reference_parse(&value), "{:?}", value);
                prop_assert!(!d.truncated());
            }
        }
    }

    /// Over them, at most MAX_PAIRS pieces are read and the result is the reference model's
    /// of a prefix of the pieces; `truncated` says so.
    #[test]
    fn parse_reads_at_most_the_limits(l in long_text()) {
        let d = Decisions::parse(&l);
        prop_assert!(d.len() + d.malformed_pairs() as usize <= MAX_PAIRS);
        prop_assert!(d.conflicting().len() <= d.len());
        let reference = reference_parse(&l);
        // The channels kept are the reference's first ones, in order.
        let kept = model_of(&d).0;
        prop_assert_eq!(&reference.0[..kept.len()], &kept[..], "{:?}", l);
        if l.len() <= MAX_VALUE_BYTES && !d.truncated() {
            prop_assert_eq!(model_of(&d), reference);
        }
    }

    /// The fuzz target's round trip: the same channels, or a prefix when the encoding passes
    /// the byte limit (a `%` read as text encodes as `%25`).
    #[test]
    fn reparse_of_encode_keeps_a_prefix(
        l in long_text(),
        p in proptest::collection::vec("[a-c%]{1,90}=(blue|green)", 0..180),
    ) {
        for value in [l, p.join("&")] {
            let d = Decisions::parse(&value);
            let encoded = d.encode();
            let back = Decisions::parse(&encoded);
            if encoded.len() <= MAX_VALUE_BYTES {
                prop_assert_eq!(pairs(&back), pairs(&d));
            } else {
                prop_assert!(back.truncated());
                prop_assert_eq!(&pairs(&d)[..back.len()], &pairs(&back)[..]);
            }
        }
    }
}

#[test]
fn encode_of_parsed_percent_channels_reparses_to_a_prefix() {
    // 150 channels of 40 `%` read as text: 7 KiB as sent, 19 KiB encoded (`%25` each).
    let value = (0..150)
        .map(|i| format!("{i:03}{}=blue", "%".repeat(40)))
        .collect::<Vec<_>>()
        .join("&");
    assert!(value.len() <= MAX_VALUE_BYTES);
    let d = Decisions::parse(&value);
    assert_eq!((d.len(), d.truncated()), (150, false));
    let encoded = d.encode();
    assert_eq!(encoded.len(), 150 * (3 + 120 + 5) + 149);
    let back = Decisions::parse(&encoded);
    // 129 bytes a pair with its separator: 63 whole pairs in 8,192 bytes.
    assert_eq!((back.len(), back.truncated()), (63, true));
    assert_eq!(pairs(&back), pairs(&d)[..63]);
}

#[test]
fn baggage_members_yields_every_member_of_a_key_in_header_order() {
    let header = "a=1, x-deploy-lane = %67ray ; p, b , x-deploy-lane=gray2,x-deploy-lane";
    let all: Vec<_> = baggage_members(header, "x-deploy-lane").collect();
    assert_eq!(all, ["gray", "gray2"]);
    // Nothing to decode: borrowed from the header.
    assert!(matches!(
        baggage_members(header, "a").next(),
        Some(Cow::Borrowed("1"))
    ));
    assert_eq!(
        baggage_member(header, "x-deploy-lane").as_deref(),
        Some("gray")
    );
    assert_eq!(baggage_members(header, "c").count(), 0);
}
