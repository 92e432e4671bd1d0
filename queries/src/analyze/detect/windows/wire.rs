//! [`WindowCounts`] as data another process reads back (a cluster node's share of the live
//! evaluation, issue 27 item 3): the names by id, then every count keyed by those ids, as
//! lists (a JSON map's keys are strings only). Reading back gives counts that judge and merge
//! exactly as the written ones.

use std::collections::BTreeSet;

use dyeline_model::{Color, TrafficKind};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::WindowCounts;
use super::counts::{ColorCounts, Group};
use crate::analyze::intern::Interner;

#[derive(Serialize, Deserialize)]
struct Side {
    requests: u64,
    errors: u64,
    /// (instance id, requests, exemplars).
    instances: Vec<(u32, u64, Vec<u128>)>,
    exemplars: Vec<u128>,
    error_exemplars: Vec<u128>,
}

#[derive(Serialize, Deserialize)]
struct GroupRow {
    channel: u32,
    app: Option<u32>,
    window_start: i64,
    blue: Side,
    green: Side,
    blue_percent: u8,
    straddles: bool,
}

#[derive(Serialize, Deserialize)]
struct DrainRow {
    channel: u32,
    app: u32,
    blue: bool,
    kind: TrafficKind,
    window_start: i64,
    spans: u64,
    instances: BTreeSet<u32>,
    traces: BTreeSet<u128>,
    blue_percent: u8,
}

#[derive(Serialize, Deserialize)]
struct Wire {
    apps: Vec<String>,
    instances: Vec<String>,
    channels: Vec<String>,
    spans: u64,
    instance_rules: Vec<(String, String, Color, String)>,
    groups: Vec<GroupRow>,
    drain: Vec<DrainRow>,
}

fn names(i: &Interner) -> Vec<String> {
    (0..i.len() as u32)
        .map(|id| i.name(id).to_owned())
        .collect()
}

fn side_out(c: &ColorCounts) -> Side {
    Side {
        requests: c.requests,
        errors: c.errors,
        instances: c
            .instances
            .iter()
            .map(|(i, (n, ts))| (*i, *n, ts.clone()))
            .collect(),
        exemplars: c.exemplars.clone(),
        error_exemplars: c.error_exemplars.clone(),
    }
}

fn side_in(s: Side) -> ColorCounts {
    ColorCounts {
        requests: s.requests,
        errors: s.errors,
        instances: s
            .instances
            .into_iter()
            .map(|(i, n, ts)| (i, (n, ts)))
            .collect(),
        exemplars: s.exemplars,
        error_exemplars: s.error_exemplars,
    }
}

impl Serialize for WindowCounts {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Wire {
            apps: names(&self.names.apps),
            instances: names(&self.names.instances),
            channels: names(&self.names.channels),
            spans: self.spans,
            instance_rules: self.instance_rules.clone(),
            groups: self
                .acc
                .groups
                .iter()
                .map(|((c, a, ws), g)| GroupRow {
                    channel: *c,
                    app: *a,
                    window_start: *ws,
                    blue: side_out(&g.blue),
                    green: side_out(&g.green),
                    blue_percent: g.blue_percent,
                    straddles: g.straddles,
                })
                .collect(),
            drain: self
                .acc
                .drain
                .iter()
                .map(|((c, a, blue, kind, ws), (n, is, ts, bp))| DrainRow {
                    channel: *c,
                    app: *a,
                    blue: *blue,
                    kind: *kind,
                    window_start: *ws,
                    spans: *n,
                    instances: is.clone(),
                    traces: ts.clone(),
                    blue_percent: *bp,
                })
                .collect(),
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for WindowCounts {
    /// Refuses counts whose ids name no app, instance or channel of their lists.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let w = Wire::deserialize(deserializer)?;
        let mut out = WindowCounts {
            spans: w.spans,
            instance_rules: w.instance_rules,
            ..WindowCounts::default()
        };
        for a in &w.apps {
            out.names.apps.intern(a);
        }
        for i in &w.instances {
            out.names.instances.intern(i);
        }
        for c in &w.channels {
            out.names.channels.intern(c);
        }
        let (apps, instances, channels) = (w.apps.len(), w.instances.len(), w.channels.len());
        let known = |id: u32, n: usize| (id as usize) < n;
        let bad = || D::Error::custom("window counts name an id past their lists");
        for g in w.groups {
            let sides_known = [&g.blue, &g.green]
                .iter()
                .all(|s| s.instances.iter().all(|(i, _, _)| known(*i, instances)));
            if !known(g.channel, channels) || !g.app.is_none_or(|a| known(a, apps)) || !sides_known
            {
                return Err(bad());
            }
            out.acc.groups.insert(
                (g.channel, g.app, g.window_start),
                Group {
                    blue: side_in(g.blue),
                    green: side_in(g.green),
                    blue_percent: g.blue_percent,
                    straddles: g.straddles,
                },
            );
        }
        for d in w.drain {
            if !known(d.channel, channels)
                || !known(d.app, apps)
                || !d.instances.iter().all(|i| known(*i, instances))
            {
                return Err(bad());
            }
            out.acc.drain.insert(
                (d.channel, d.app, d.blue, d.kind, d.window_start),
                (d.spans, d.instances, d.traces, d.blue_percent),
            );
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use dyeline_model::release::Op;

    use super::*;
    use crate::analyze::AnalyzerConfig;
    use crate::analyze::spans::Kind;
    use crate::analyze::testkit::{B, Sp};

    fn judged(c: WindowCounts, config: &AnalyzerConfig) -> Vec<String> {
        let (mut d, mut r, mut k, mut s) = Default::default();
        c.judge(config, &mut d, &mut r, &mut k, &mut s);
        let mut out: Vec<String> = d
            .iter()
            .map(|x| serde_json::to_string(x).unwrap())
            .chain(r.iter().map(|x| serde_json::to_string(x).unwrap()))
            .chain(k.iter().map(|x| serde_json::to_string(x).unwrap()))
            .chain(s.iter().map(|x| serde_json::to_string(x).unwrap()))
            .collect();
        out.sort();
        out
    }

    /// Counts written and read back judge as the counts themselves, and a count naming an
    /// unknown id is refused.
    #[test]
    fn counts_read_back_judge_the_same() {
        let mut b = B::new();
        b.channel("trade", &["order", "settle"])
            .op(-100.0, "trade", Op::Start)
            .op(-100.0, "trade", Op::Ratio(20))
            .op(125.0, "trade", Op::Ratio(0));
        b.requests("order", "order-b1", Color::Blue, 0.0, 200, 0)
            .requests("order", "order-b2", Color::Blue, 0.0, 20, 1)
            .requests("order", "order-g1", Color::Green, 0.0, 120, 25);
        for (i, t) in [140.0, 150.0].into_iter().enumerate() {
            b.span(Sp {
                trace: 9_000 + i as u128,
                app: "settle",
                instance: "settle-b1",
                kind: Kind::Other,
                t,
                ..Sp::default()
            });
        }
        let spans = b.resolved();
        let config = AnalyzerConfig::default();
        let direct = judged(super::super::count(&spans, &config), &config);
        assert!(direct.len() >= 3, "{direct:?}");
        let text = serde_json::to_string(&super::super::count(&spans, &config)).unwrap();
        let back: WindowCounts = serde_json::from_str(&text).unwrap();
        assert_eq!(judged(back, &config), direct);

        let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
        v["groups"][0]["channel"] = 99.into();
        assert!(serde_json::from_value::<WindowCounts>(v).is_err());
    }
}
