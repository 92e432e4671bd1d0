//! Unit tests of the colour chain (domain §1).

use super::*;

fn attrs<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<&'a str> + 'a {
    move |k| pairs.iter().find(|(key, _)| *key == k).map(|(_, v)| *v)
}

fn resolve<'a>(rules: &'a ColorRules, pairs: &'a [(&'a str, &'a str)]) -> (Color, &'a str) {
    let r = rules.resolve(attrs(pairs));
    (r.color, r.rule)
}

fn host_pattern() -> ColorRule {
    ColorRule::Pattern {
        key: "host.name".into(),
        regex: r"-(?P<color>[bg])\d+$".into(),
        map: [("b", "blue"), ("G", "Green")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        name: None,
    }
}

#[test]
fn default_chain_follows_domain_order() {
    let rules = ColorRules::default();
    assert_eq!(
        resolve(
            &rules,
            &[("deploy.color", " GREEN "), ("host.name", "order-blue-1")]
        ),
        (Color::Green, "deploy.color")
    );
    assert_eq!(
        resolve(
            &rules,
            &[("deploy.color", "teal"), ("host.name", "order-blue-1")]
        ),
        (Color::Blue, "host.name")
    );
    assert_eq!(
        resolve(
            &rules,
            &[
                ("host.name", "node-7"),
                ("k8s.pod.name", "risk-green-5d8f-k2")
            ]
        ),
        (Color::Green, "k8s.pod.name")
    );
    assert_eq!(
        resolve(&rules, &[("k8s.deployment.name", "pay.Blue")]),
        (Color::Blue, "k8s.deployment.name")
    );
    assert_eq!(resolve(&rules, &[]), (Color::Unknown, "none"));
}

#[test]
fn tokens_need_delimiters() {
    let cases = [
        ("order-blue-7d9f-x2k", Some(Color::Blue)),
        ("inventory.blue.1", Some(Color::Blue)),
        ("order_green_01", Some(Color::Green)),
        ("GREEN", Some(Color::Green)),
        ("x-Blue", Some(Color::Blue)),
        ("bluebird-1", None),
        ("order-bluegreen-1", None),
        ("evergreen.2", None),
        ("blue-green-1", None),
        ("", None),
    ];
    for (value, want) in cases {
        assert_eq!(token_color(value), want, "{value}");
    }
}

#[test]
fn ambiguous_token_falls_through_to_next_rule() {
    let rules = ColorRules::default();
    assert_eq!(
        resolve(
            &rules,
            &[("host.name", "blue-green-1"), ("k8s.pod.name", "p-green-1")]
        ),
        (Color::Green, "k8s.pod.name")
    );
}

#[test]
fn user_pattern_maps_capture_case_insensitively() {
    let rules = ColorRules::with_user_rules(vec![host_pattern()]).unwrap();
    assert_eq!(
        resolve(&rules, &[("host.name", "order-b1")]),
        (Color::Blue, "host.name")
    );
    assert_eq!(
        resolve(&rules, &[("host.name", "order-g12")]),
        (Color::Green, "host.name")
    );
    assert_eq!(
        resolve(&rules, &[("host.name", "order-x1")]),
        (Color::Unknown, "none")
    );
    // The built-in token rule comes first.
    assert_eq!(
        resolve(&rules, &[("host.name", "order-green-b1")]),
        (Color::Green, "host.name")
    );

    let named = ColorRules::new(vec![ColorRule::Pattern {
        key: "host.name".into(),
        regex: r"^(?P<color>[A-Z])-".into(),
        map: [("b".to_owned(), "blue".to_owned())].into(),
        name: Some("host-prefix".into()),
    }])
    .unwrap();
    assert_eq!(
        resolve(&named, &[("host.name", "B-order")]),
        (Color::Blue, "host-prefix")
    );
    // `new` has no default rules.
    assert_eq!(
        resolve(&named, &[("deploy.color", "green")]),
        (Color::Unknown, "none")
    );
}

#[test]
fn rules_deserialise_from_config() {
    let json = r#"[{"kind":"attribute","key":"deploy.color"},
        {"kind":"pattern","key":"host.name","regex":"-(?P<color>[bg])\\d+$","map":{"b":"blue","g":"green"}}]"#;
    let rules: Vec<ColorRule> = serde_json::from_str(json).unwrap();
    assert_eq!(rules[1].name(), "host.name");
    let chain = ColorRules::new(rules).unwrap();
    assert_eq!(chain.rules().len(), 2);
    assert_eq!(
        resolve(&chain, &[("host.name", "order-g1")]),
        (Color::Green, "host.name")
    );
    let bad = r#"{"kind":"token","key":"host.name","extra":1}"#;
    assert!(serde_json::from_str::<ColorRule>(bad).is_err());
}

#[test]
fn bad_rules_are_refused_with_a_reason() {
    let pattern = |regex: &str, map: &[(&str, &str)]| ColorRule::Pattern {
        key: "host.name".into(),
        regex: regex.into(),
        map: map
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        name: None,
    };
    let err = ColorRules::new(vec![pattern("(?P<color>[bg]", &[("b", "blue")])]).unwrap_err();
    assert!(matches!(err, ColorRuleError::InvalidRegex { .. }), "{err}");
    assert!(err.to_string().contains("invalid regex"));
    let err = ColorRules::new(vec![pattern("-(?P<colour>[bg])", &[("b", "blue")])]).unwrap_err();
    assert!(
        matches!(err, ColorRuleError::MissingColorGroup { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("named group `color`"));
    let err = ColorRules::new(vec![pattern("(?P<color>b)", &[("b", "azure")])]).unwrap_err();
    assert!(
        matches!(&err, ColorRuleError::BadMapValue { value, .. } if value == "azure"),
        "{err}"
    );
    let err = ColorRules::new(vec![pattern("(?P<color>b)", &[])]).unwrap_err();
    assert!(matches!(err, ColorRuleError::EmptyMap { .. }), "{err}");
    let err = ColorRules::new(vec![pattern(
        "(?P<color>b)",
        &[("b", "blue"), ("B", "green")],
    )])
    .unwrap_err();
    assert!(
        matches!(err, ColorRuleError::AmbiguousMapKey { .. }),
        "{err}"
    );
    let err =
        ColorRules::with_user_rules(vec![ColorRule::Token { key: String::new() }]).unwrap_err();
    assert!(
        matches!(err, ColorRuleError::EmptyKey { index: 4 }),
        "{err}"
    );
}

#[test]
fn color_text_forms() {
    assert_eq!(Color::parse(" Blue\t"), Some(Color::Blue));
    assert_eq!(Color::parse("unknown"), None);
    assert_eq!(Color::Green.to_string(), "green");
    assert_eq!(
        serde_json::to_string(&Color::Unknown).unwrap(),
        "\"unknown\""
    );
}
