//! docs/lanes.md's examples hold: each TOML block loads through [`Config::load`] (the real
//! loader, validation included), each example written in a block as a comment
//! `# <attribute> = <JSON value> => lane <id>` or `=> tag <id|none>` resolves so with that
//! block's lane rules or carriers, and each lane group body the page puts is a valid group.

use std::collections::BTreeMap;

use dyeline_model::release::{LaneGroup, LaneGroupSpec};
use dyeline_model::{LaneCarriers, LaneRules};
use figment::Figment;

use super::Config;

const DOC: &str = include_str!("../../../docs/lanes.md");

/// The bodies of the page's fenced blocks of `lang`.
fn blocks(lang: &str) -> Vec<&'static str> {
    let fence = format!("```{lang}\n");
    let mut out = Vec::new();
    let mut rest = DOC;
    while let Some(start) = rest.find(&fence) {
        let body = &rest[start + fence.len()..];
        let end = body.find("```").expect("a closed block");
        out.push(&body[..end]);
        rest = &body[end..];
    }
    out
}

/// An example line of a block: (attribute, its values, `lane` or `tag`, the expected id or
/// `none`).
fn example(line: &str) -> Option<(String, Vec<String>, &str, &str)> {
    let (what, expected) = line.strip_prefix("# ")?.split_once(" => ")?;
    let (key, value) = what.split_once(" = ")?;
    let values = match serde_json::from_str(value).ok()? {
        serde_json::Value::String(s) => vec![s],
        serde_json::Value::Array(a) => a
            .into_iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<_>>()?,
        _ => return None,
    };
    let (kind, id) = expected.split_once(' ')?;
    Some((key.to_owned(), values, kind, id))
}

#[test]
fn every_toml_block_loads_and_its_examples_resolve_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lanes.toml");
    let (mut rules_seen, mut lanes_checked, mut tags_checked) = (0, 0, 0);
    let toml = blocks("toml");
    for (i, block) in toml.iter().enumerate() {
        std::fs::write(&file, block).unwrap();
        let cfg = Config::load(Some(&file), Figment::new())
            .unwrap_or_else(|e| panic!("block #{i} does not load: {e}\n{block}"));
        rules_seen += cfg.lane_rules.len() + cfg.lane_carriers.len();
        let rules = LaneRules::new(&cfg.lane_rules).unwrap();
        let carriers = LaneCarriers::new(&cfg.lane_carriers).unwrap();
        for line in block.lines().filter(|l| l.contains(" => ")) {
            let (key, values, kind, want) =
                example(line).unwrap_or_else(|| panic!("block #{i}: unreadable example {line:?}"));
            let got = match kind {
                "lane" => {
                    assert_eq!(values.len(), 1, "{line}");
                    lanes_checked += 1;
                    let lane = rules.resolve(|k| (k == key).then_some(values[0].as_str()));
                    lane.lane.as_str().to_owned()
                }
                "tag" => {
                    tags_checked += 1;
                    let tag =
                        carriers.resolve(|k| (k == key).then(|| values.iter().map(String::as_str)));
                    tag.tag
                        .map_or_else(|| "none".to_owned(), |t| t.as_str().to_owned())
                }
                _ => panic!("block #{i}: {line:?} says neither `lane` nor `tag`"),
            };
            assert_eq!(got, want, "block #{i}: {line}");
        }
    }
    // The page's recipes and reference: this many blocks, rules and examples at least.
    assert!(toml.len() >= 4, "{} toml blocks", toml.len());
    assert!(rules_seen >= 11, "{rules_seen} rules and carriers");
    assert!(
        lanes_checked >= 16 && tags_checked >= 10,
        "{lanes_checked} lane and {tags_checked} tag examples"
    );
}

#[test]
fn every_lane_group_the_page_puts_is_valid() {
    // `dyeline lane-group put <id> - <<'JSON'` … `JSON`, and the curl example's `-d '…'`.
    let mut groups: BTreeMap<String, String> = BTreeMap::new();
    for block in blocks("sh") {
        let mut rest = block;
        while let Some(at) = rest.find("lane-group put ") {
            let line = rest[at..].lines().next().unwrap();
            let words: Vec<&str> = line.split_whitespace().collect();
            rest = &rest[at + line.len()..];
            if words.get(3) != Some(&"-") {
                continue;
            }
            let body = rest.strip_prefix('\n').unwrap();
            let end = body.find("\nJSON").expect("the heredoc ends");
            groups.insert(words[2].to_owned(), body[..end].to_owned());
        }
        if let Some(at) = block.find("/api/v1/lane-groups/") {
            let id = block[at + "/api/v1/lane-groups/".len()..]
                .split_whitespace()
                .next()
                .unwrap();
            let body = block.split_once("-d '").unwrap().1;
            groups.insert(id.to_owned(), body[..body.find('\'').unwrap()].to_owned());
        }
    }
    assert_eq!(groups.len(), 3, "{groups:?}");
    for (id, body) in &groups {
        let spec: LaneGroupSpec =
            serde_json::from_str(body).unwrap_or_else(|e| panic!("{id}: {e}\n{body}"));
        let group = LaneGroup::from_spec(spec, Some(id)).unwrap_or_else(|e| panic!("{id}: {e}"));
        assert!(!group.lanes().is_empty(), "{id} names its lanes");
    }
}
