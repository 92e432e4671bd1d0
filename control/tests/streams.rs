//! The event streams of domain §4: the test vector against
//! `../shared/fixtures/events/expected-app-streams.json`, a property test over random
//! interleavings, restart continuity, timeline import, and operation notes (recorded, shown on
//! events, kept across restarts and schema upgrades).

use dyeline_control::plane::{ControlPlane, Cursor, Event};
use dyeline_model::ChannelId;
use dyeline_model::release::{Channels, EventKind, Op, TimelineDoc, app_events};
use proptest::prelude::*;

mod common;
use serde_json::Value;

const VECTOR: &str = include_str!("../../../shared/fixtures/events/expected-app-streams.json");

fn op_of(step: &Value) -> Op {
    match step["op"].as_str().unwrap() {
        "start" => Op::Start,
        "finish" => Op::Finish,
        "ratio" => Op::Ratio(step["blue_percent"].as_u64().unwrap() as u8),
        other => panic!("op {other}"),
    }
}

/// (step, event, channel, from, to, replay) as in the fixture.
type Row = (u64, String, String, Option<u64>, Option<u64>, Option<bool>);

fn expected_rows(v: &Value, app: &str) -> Vec<Row> {
    v["apps"][app]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let flow = e["event"] == "flow_change";
            (
                e["step"].as_u64().unwrap(),
                e["event"].as_str().unwrap().to_owned(),
                e["channel"].as_str().unwrap().to_owned(),
                e["from"].as_u64(),
                e["to"].as_u64(),
                if flow {
                    Some(e["replay"].as_bool().unwrap())
                } else {
                    None
                },
            )
        })
        .collect()
}

fn actual_rows(events: &[Event], seq_of_step: &dyn Fn(u64) -> u64) -> Vec<Row> {
    events
        .iter()
        .map(|e| {
            let step = (1..=64)
                .find(|s| seq_of_step(*s) == e.seq)
                .expect("event of a step");
            (
                step,
                e.event.as_str().to_owned(),
                e.channel.to_string(),
                e.from.map(u64::from),
                e.to.map(u64::from),
                e.replay,
            )
        })
        .collect()
}

#[tokio::test]
async fn domain_4_test_vector_gives_the_expected_app_streams() {
    let v: Value = serde_json::from_str(VECTOR).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let plane = ControlPlane::open(dir.path()).await.unwrap();
    let mut setup = 0;
    for ch in v["channels"].as_array().unwrap() {
        if let Some(apps) = ch["apps"].as_array() {
            let apps = apps
                .iter()
                .map(|a| a.as_str().unwrap().to_owned())
                .collect();
            plane
                .write(
                    ch["id"].as_str().unwrap(),
                    Op::Apps(apps),
                    "test",
                    None,
                    None,
                )
                .await
                .unwrap();
            setup += 1;
        }
    }
    for step in v["channel_events"].as_array().unwrap() {
        let out = plane
            .write(
                step["channel"].as_str().unwrap(),
                op_of(step),
                "test",
                None,
                None,
            )
            .await
            .unwrap();
        assert_eq!(out.seq, setup + step["step"].as_u64().unwrap());
    }
    let seq_of_step = |s: u64| setup + s;
    for app in v["apps"].as_object().unwrap().keys() {
        let events = plane.app_events(app, Cursor::default());
        assert_eq!(
            actual_rows(&events, &seq_of_step),
            expected_rows(&v, app),
            "app {app}"
        );
        // ids count each operation's events for the app from 0
        for w in events.windows(2) {
            let n = |e: &Event| e.id.split_once('.').unwrap().1.parse::<u32>().unwrap();
            if w[0].seq == w[1].seq {
                assert_eq!(n(&w[1]), n(&w[0]) + 1);
            } else {
                assert_eq!(n(&w[1]), 0);
            }
        }
        // resuming after any event id gives exactly the rest
        for (i, e) in events.iter().enumerate() {
            let rest = plane.app_events(app, e.id.parse().unwrap());
            assert_eq!(rest, events[i + 1..].to_vec());
        }
    }

    // Restart: state, versions and the sequence continue.
    let before: Vec<_> = plane.channels();
    let last = plane.latest_seq();
    plane.close().await;
    drop(plane);
    let plane = ControlPlane::open(dir.path()).await.unwrap();
    assert_eq!(plane.channels(), before);
    assert_eq!(plane.latest_seq(), last);
    let out = plane
        .write("global", Op::Start, "test", None, None)
        .await
        .unwrap();
    assert_eq!(out.seq, last + 1);
    let order = plane.app_events("order", Cursor::after_seq(last));
    assert_eq!(order.len(), 1);
    assert_eq!(
        (order[0].event, order[0].id.as_str()),
        (EventKind::Start, &*format!("{}.0", last + 1))
    );
}

#[tokio::test]
async fn refused_writes_record_nothing_and_consume_no_sequence_number() {
    let dir = tempfile::tempdir().unwrap();
    let plane = ControlPlane::open(dir.path()).await.unwrap();
    plane
        .write("trade", Op::Apps(vec!["order".into()]), "a", None, None)
        .await
        .unwrap();
    plane
        .write("pay", Op::Apps(vec![]), "a", None, None)
        .await
        .unwrap();
    let cases: Vec<(&str, Op, Option<u64>, &str)> = vec![
        ("trade", Op::Ratio(20), None, "not_releasing"),
        ("trade", Op::Finish, None, "not_releasing"),
        ("nope", Op::Start, None, "channel_not_found"),
        ("Bad_Id", Op::Start, None, "invalid_channel_id"),
        (
            "pay",
            Op::Apps(vec!["order".into()]),
            None,
            "app_in_other_channel",
        ),
        ("trade", Op::Start, Some(7), "version_mismatch"),
        ("trade", Op::Ratio(101), None, "invalid_blue_percent"),
    ];
    for (id, op, if_match, code) in cases {
        let e = plane.write(id, op, "a", if_match, None).await.unwrap_err();
        assert_eq!(e.code(), code);
    }
    assert_eq!(plane.latest_seq(), 2);
    let started = plane
        .write("trade", Op::Start, "a", Some(1), None)
        .await
        .unwrap();
    assert_eq!(started.seq, 3);
    assert_eq!(
        plane
            .write("trade", Op::Start, "a", None, None)
            .await
            .unwrap_err()
            .code(),
        "already_releasing"
    );
    // a ratio equal to the current one is accepted and emits nothing
    let same = plane
        .write("trade", Op::Ratio(50), "a", None, None)
        .await
        .unwrap();
    assert_eq!(same.seq, 4);
    assert!(plane.app_events("order", Cursor::after_seq(3)).is_empty());
    assert!(
        plane
            .channel_events("trade", Cursor::after_seq(3))
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn imported_timeline_is_history_and_reimport_changes_nothing() {
    let text = include_str!("../../../shared/fixtures/analysis/release-walk/timeline.json");
    let doc: TimelineDoc = serde_json::from_str(text).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let plane = ControlPlane::open(dir.path()).await.unwrap();
    let rx = plane.subscribe();
    let report = plane.import(&doc).await.unwrap();
    let non_global = doc.channels.iter().filter(|c| c.id != "global").count();
    assert_eq!(report.recorded, doc.events.len() + non_global);
    assert!(
        !rx.has_changed().unwrap(),
        "import must not notify live subscribers"
    );
    let again = plane.import(&doc).await.unwrap();
    assert_eq!((again.recorded, again.skipped), (0, report.recorded));

    let exported = plane.timeline_doc(None, None);
    assert!(
        exported
            .events
            .iter()
            .all(|e| e.actor.as_deref() == Some("import"))
    );
    let times: Vec<i64> = exported.events.iter().map(|e| e.t_unix_nano.0).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]));
    // the same point answers from the document and from the recorded history
    let from_doc = dyeline_model::release::Timeline::from_doc(&doc).unwrap();
    let recorded = plane.timeline();
    for ev in &doc.events {
        for ch in &doc.channels {
            for app in ch
                .apps
                .iter()
                .chain(std::iter::once(&"lonely-app".to_string()))
            {
                for dt in [-1, 0, 1] {
                    let t = ev.t_unix_nano.0 + dt;
                    assert_eq!(from_doc.effective_at(app, t), recorded.effective_at(app, t));
                }
            }
        }
    }
    // each channel is left in the state of its last op
    for ch in plane.channels() {
        let last = doc
            .events
            .iter()
            .rev()
            .find(|e| e.channel.as_deref() == Some(ch.id.as_str()));
        if let Some(last) = last {
            let releasing = last.op != "finish";
            assert_eq!(
                ch.state == dyeline_model::release::ReleaseState::Releasing,
                releasing,
                "{}",
                ch.id
            );
        }
    }

    // Re-importing adds nothing after the channels moved on, nor does the server's own
    // export imported back.
    plane
        .write("trade", Op::Start, "owner", None, None)
        .await
        .unwrap();
    assert_eq!(plane.import(&doc).await.unwrap().recorded, 0);
    let exported = plane.timeline_doc(None, None);
    let back = plane.import(&exported).await.unwrap();
    assert_eq!((back.recorded, back.skipped), (0, exported.events.len()));
    plane
        .write("trade", Op::Finish, "owner", None, None)
        .await
        .unwrap();

    // A timeline whose ops are refused is refused whole, naming the event.
    let bad: TimelineDoc = serde_json::from_value(serde_json::json!({
        "channels": [{"id": "solo", "apps": ["x"]}],
        "events": [
            {"t_unix_nano": "10", "channel": "solo", "op": "start"},
            {"t_unix_nano": "20", "channel": "solo", "op": "start"}
        ]
    }))
    .unwrap();
    let before = plane.latest_seq();
    let e = plane.import(&bad).await.unwrap_err();
    assert_eq!(e.code(), "invalid_timeline");
    assert!(e.to_string().contains("event 2"), "{e}");
    assert_eq!(plane.latest_seq(), before);
    assert!(plane.channel("solo").is_err());
}

/// (seq, event kind, note) of each event of channel `id`'s stream and of app `app`'s stream.
fn notes(plane: &ControlPlane, id: &str, app: &str) -> Vec<(u64, String, Option<String>)> {
    let channel = plane.channel_events(id, Cursor::default()).unwrap();
    let app = plane.app_events(app, Cursor::default());
    channel
        .iter()
        .chain(&app)
        .map(|e| (e.seq, e.event.as_str().to_owned(), e.note.clone()))
        .collect()
}

#[tokio::test]
async fn a_note_is_recorded_with_its_op_shown_on_its_events_and_survives_restart() {
    let dir = tempfile::tempdir().unwrap();
    let plane = ControlPlane::open(dir.path()).await.unwrap();
    plane
        .write("trade", Op::Apps(vec!["order".into()]), "a", None, None)
        .await
        .unwrap();
    // whitespace only is no note
    let started = plane
        .write("trade", Op::Start, "a", None, Some(" \n "))
        .await
        .unwrap();
    let note = "override: ratio increase while a one-sided error spike fires on green";
    let ratio = plane
        .write(
            "trade",
            Op::Ratio(100),
            "a",
            None,
            Some(&format!("  {note}\n")),
        )
        .await
        .unwrap();
    let expected = |plane: &ControlPlane| {
        let got = notes(plane, "trade", "order");
        // channel stream then app stream: start, then flow_change + enter_all_blue
        let kinds: Vec<&str> = got.iter().map(|(_, k, _)| k.as_str()).collect();
        assert_eq!(
            kinds,
            [
                "start",
                "flow_change",
                "enter_all_blue",
                "start",
                "flow_change",
                "enter_all_blue"
            ]
        );
        for (seq, kind, n) in &got {
            if *seq == ratio.seq {
                assert_eq!(n.as_deref(), Some(note), "{kind}");
            } else {
                assert_eq!((*seq, n.as_deref()), (started.seq, None), "{kind}");
            }
        }
        // JSON: the note next to the event's fields, absent when none
        let events = plane.channel_events("trade", Cursor::default()).unwrap();
        let json: Vec<Value> = events
            .iter()
            .map(|e| serde_json::to_value(e).unwrap())
            .collect();
        assert!(json[0].get("note").is_none(), "{}", json[0]);
        assert_eq!(json[1]["note"], note);
        assert_eq!(json[1]["event"], "flow_change");
        // the timeline document carries it and round-trips it
        let doc = plane.timeline_doc(None, None);
        let ev = doc
            .events
            .iter()
            .find(|e| e.seq == Some(ratio.seq))
            .unwrap();
        assert_eq!(ev.note.as_deref(), Some(note));
        assert!(
            doc.events
                .iter()
                .filter(|e| e.seq != Some(ratio.seq))
                .all(|e| e.note.is_none())
        );
        let text = serde_json::to_string(&doc).unwrap();
        assert_eq!(text.matches("\"note\"").count(), 1, "{text}");
        assert_eq!(serde_json::from_str::<TimelineDoc>(&text).unwrap(), doc);
    };
    expected(&plane);

    // The records keep it too, per channel or all.
    let recs = plane.op_records(Some("trade"));
    assert_eq!(
        recs.iter()
            .map(|r| (r.seq, r.note.as_deref()))
            .collect::<Vec<_>>(),
        [(1, None), (started.seq, None), (ratio.seq, Some(note))]
    );
    assert_eq!(plane.op_records(None), recs);
    assert!(plane.op_records(Some("pay")).is_empty());

    // Refused: one character too many records nothing.
    let before = (plane.latest_seq(), plane.channels());
    let e = plane
        .write("trade", Op::Ratio(40), "a", None, Some(&"x".repeat(501)))
        .await
        .unwrap_err();
    assert_eq!((e.code(), e.status().as_u16()), ("invalid_note", 400));
    assert_eq!((plane.latest_seq(), plane.channels()), before);
    assert_eq!(notes(&plane, "trade", "order").len(), 6);

    // Restart: the note is read back from the database.
    plane.close().await;
    drop(plane);
    let plane = ControlPlane::open(dir.path()).await.unwrap();
    assert_eq!(plane.latest_seq(), before.0);
    expected(&plane);

    // The limit counts characters, not bytes.
    let long = "é".repeat(500);
    let out = plane
        .write("trade", Op::Finish, "a", None, Some(&long))
        .await
        .unwrap();
    let finish = plane
        .channel_events("trade", Cursor::after_seq(ratio.seq))
        .unwrap();
    assert_eq!(finish.len(), 1);
    assert_eq!(
        (finish[0].seq, finish[0].note.as_deref()),
        (out.seq, Some(&*long))
    );

    // An import carries the timeline events' notes into another data dir.
    let exported = plane.timeline_doc(None, None);
    let other = tempfile::tempdir().unwrap();
    let copy = ControlPlane::open(other.path()).await.unwrap();
    copy.import(&exported).await.unwrap();
    let notes_of = |doc: &TimelineDoc| -> Vec<Option<String>> {
        doc.events.iter().map(|e| e.note.clone()).collect()
    };
    assert_eq!(
        notes_of(&copy.timeline_doc(None, None)),
        notes_of(&exported)
    );
    // ... and refuses a timeline whose note is too long, naming it.
    let mut bad = exported.clone();
    bad.events.last_mut().unwrap().note = Some("y".repeat(501));
    let third_dir = tempfile::tempdir().unwrap();
    let third = ControlPlane::open(third_dir.path()).await.unwrap();
    let e = third.import(&bad).await.unwrap_err();
    assert_eq!(e.code(), "invalid_timeline");
    assert!(e.to_string().contains("501 characters"), "{e}");
    assert_eq!(third.latest_seq(), 0);
}

#[tokio::test]
async fn a_database_from_before_notes_upgrades_in_place() {
    let dir = tempfile::tempdir().unwrap();
    // A control.db with only the first migration applied and one op recorded.
    common::database_before(dir.path(), &["0001_init.sql"]).await;
    // Read-only (not migrated): the old op, without a note.
    let ro = ControlPlane::open_read_only(dir.path()).await.unwrap();
    assert_eq!(ro.latest_seq(), 1);
    assert_eq!(ro.timeline_doc(None, None).events[0].note, None);
    ro.close().await;
    drop(ro);
    // Read-write: migrated; the old op keeps no note and new ops take one.
    let plane = ControlPlane::open(dir.path()).await.unwrap();
    assert_eq!(
        plane.channel("trade").unwrap().apps,
        vec!["order".to_string()]
    );
    let out = plane
        .write("trade", Op::Start, "a", None, Some("after the upgrade"))
        .await
        .unwrap();
    assert_eq!(out.seq, 2);
    let doc = plane.timeline_doc(None, None);
    assert_eq!(
        doc.events
            .iter()
            .map(|e| e.note.as_deref())
            .collect::<Vec<_>>(),
        [None, Some("after the upgrade")]
    );
    plane.close().await;
    drop(plane);
    let plane = ControlPlane::open_read_only(dir.path()).await.unwrap();
    assert_eq!(
        plane.channel_events("trade", Cursor::default()).unwrap()[0]
            .note
            .as_deref(),
        Some("after the upgrade")
    );
}

#[derive(Debug, Clone)]
enum Step {
    Start(usize),
    Ratio(usize, u8),
    Finish(usize),
}

fn step() -> impl Strategy<Value = Step> {
    let ratio = prop_oneof![Just(0u8), Just(50), Just(100), 0u8..=100];
    prop_oneof![
        (0usize..3).prop_map(Step::Start),
        ((0usize..3), ratio).prop_map(|(c, r)| Step::Ratio(c, r)),
        (0usize..3).prop_map(Step::Finish),
    ]
}

proptest! {
    /// For random interleavings of start/ratio/finish on global and two local channels,
    /// every app's stream is well formed and its effective blue_percent follows the matrix.
    #[test]
    fn app_streams_are_well_formed(steps in proptest::collection::vec(step(), 0..80)) {
        let ids = [ChannelId::new("global").unwrap(), ChannelId::new("a").unwrap(), ChannelId::new("b").unwrap()];
        let mut chans = Channels::new();
        chans.apply(&ids[1], &Op::Apps(vec!["x".into()]));
        chans.apply(&ids[2], &Op::Apps(vec!["y".into()]));
        let apps = ["x", "y", "z"];
        // per app: Some(channel, blue_percent) while started
        let mut seen: Vec<Option<(String, u8)>> = vec![None; 3];
        for s in steps {
            let (id, op) = match s {
                Step::Start(c) => (&ids[c], Op::Start),
                Step::Ratio(c, r) => (&ids[c], Op::Ratio(r)),
                Step::Finish(c) => (&ids[c], Op::Finish),
            };
            if chans.check(id, &op).is_err() {
                continue;
            }
            let before = chans.clone();
            chans.apply(id, &op);
            for (i, app) in apps.iter().enumerate() {
                let events = app_events(app, &before, &chans);
                let mut last_flow: Option<(u8, u8)> = None;
                for e in &events {
                    let ch = e.channel.to_string();
                    match e.event {
                        EventKind::Start => {
                            prop_assert!(seen[i].is_none(), "two starts in a row for {app}");
                            seen[i] = Some((ch, 50));
                            last_flow = None;
                        }
                        EventKind::Finish => {
                            prop_assert_eq!(seen[i].as_ref().map(|s| &s.0), Some(&ch));
                            seen[i] = None;
                            last_flow = None;
                        }
                        EventKind::FlowChange => {
                            let (from, to, _) = e.flow.unwrap();
                            let cur = seen[i].as_mut().expect("flow change outside start..finish");
                            prop_assert_eq!(&cur.0, &ch);
                            prop_assert_eq!(cur.1, from);
                            cur.1 = to;
                            last_flow = Some((from, to));
                        }
                        derived => {
                            let (from, to) = last_flow.expect("derived event follows a flow change");
                            let ok = match derived {
                                EventKind::EnterAllBlue => to == 100 && from != 100,
                                EventKind::ExitAllBlue => from == 100 && to != 100,
                                EventKind::EnterAllGreen => to == 0 && from != 0,
                                EventKind::ExitAllGreen => from == 0 && to != 0,
                                _ => unreachable!(),
                            };
                            prop_assert!(ok, "{derived:?} after {from}->{to}");
                        }
                    }
                }
                // every derived event that should follow the flow change is there
                if let Some((from, to)) = last_flow {
                    let want = usize::from(from == 100 && to != 100) + usize::from(from == 0 && to != 0)
                        + usize::from(to == 100 && from != 100) + usize::from(to == 0 && from != 0);
                    let flow_at = events.iter().rposition(|e| e.event == EventKind::FlowChange).unwrap();
                    prop_assert_eq!(events.len() - flow_at - 1, want);
                }
                // the stream's state equals the matrix of domain §4
                let eff = chans.effective(app);
                let stream_bp = seen[i].as_ref().map_or(50, |s| s.1);
                prop_assert_eq!(stream_bp, eff.blue_percent);
                prop_assert_eq!(seen[i].as_ref().map(|s| s.0.clone()), eff.channel.map(|c| c.to_string()));
            }
        }
    }
}
