//! The PostgreSQL store and the plane on it, against a real PostgreSQL (the storage crate's
//! testkit, one server per test): versioned rewrites, sequence numbers in commit order, the
//! catch-up inside a write, the listener's wake-ups across a killed connection, the gap guard.

use std::sync::Arc;
use std::time::{Duration, Instant};

use dyeline_model::release::{Channels, Op};
use dyeline_storage::testkit::postgres::Postgres;

use super::*;
use crate::plane::ControlPlane;

const PASSWORD: &str = "hunter2-control";

/// A plane on `pg` following the others (listener on, polling slowly so a test sees the
/// listener's work, not the timer's).
async fn following(pg: &Postgres) -> Arc<ControlPlane> {
    ControlPlane::open_postgres(&pg.url(PASSWORD), "test", Duration::from_secs(3600))
        .await
        .unwrap()
}

/// A plane on `pg` with no listener: it learns of other writes only inside its own.
async fn deaf(pg: &Postgres) -> ControlPlane {
    let store = PgStore::connect(&pg.url(PASSWORD), "test", false)
        .await
        .unwrap();
    ControlPlane::load(Box::new(store), false).await.unwrap()
}

/// Waits up to 10 s for `plane` to hold operation `seq`.
async fn wait_for(plane: &ControlPlane, seq: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while plane.latest_seq() < seq {
        assert!(
            Instant::now() < deadline,
            "the plane stayed at {} waiting for {seq}",
            plane.latest_seq()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Terminates the listener's connection, once it is there (up to 10 s).
async fn kill_listener(pg: &Postgres) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let killed = pg
            .psql(&format!(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                 WHERE application_name = '{LISTENER_APPLICATION_NAME}'"
            ))
            .unwrap();
        if killed == "1" {
            return;
        }
        assert!(Instant::now() < deadline, "no listener connection to kill");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn seqs(plane: &ControlPlane) -> Vec<u64> {
    let mut all: Vec<u64> = plane.op_records(None).iter().map(|r| r.seq).collect();
    all.extend(plane.lane_group_records(None).iter().map(|r| r.seq));
    all.sort_unstable();
    all
}

#[tokio::test]
async fn rewrites_are_guarded_by_the_version_validated_against() {
    let pg = Postgres::start();
    let store = PgStore::connect(&pg.url(PASSWORD), "test", false)
        .await
        .unwrap();
    let mut channels = Channels::new();
    let id = ChannelId::new("trade").unwrap();
    channels.apply(&id, &Op::Apps(vec!["order".into()]));
    let v1 = channels.get("trade").unwrap().clone();
    channels.apply(&id, &Op::Start);
    let v2 = channels.get("trade").unwrap().clone();

    let mut tx = store.begin().await.unwrap();
    // Created at version 0 → 1; a second creation finds version 1.
    assert_eq!(
        tx.store_channel(&id, Some(&v1), Guard::Version(0))
            .await
            .unwrap(),
        Stored::Done
    );
    assert_eq!(
        tx.store_channel(&id, Some(&v1), Guard::Version(0))
            .await
            .unwrap(),
        Stored::Stale { actual: 1 }
    );
    // An update from a version the row is not at changes nothing.
    assert_eq!(
        tx.store_channel(&id, Some(&v2), Guard::Version(7))
            .await
            .unwrap(),
        Stored::Stale { actual: 1 }
    );
    assert_eq!(
        tx.store_channel(&id, Some(&v2), Guard::Version(1))
            .await
            .unwrap(),
        Stored::Done
    );
    // A delete at a stale version neither.
    assert_eq!(
        tx.store_channel(&id, None, Guard::Version(1))
            .await
            .unwrap(),
        Stored::Stale { actual: 2 }
    );
    tx.commit().await.unwrap();
    assert_eq!(
        pg.psql("SELECT state, version FROM dyeline_control.control_channels WHERE id = 'trade'")
            .as_deref(),
        Some("releasing|2")
    );
    // A missing row is version 0.
    let mut tx = store.begin().await.unwrap();
    let gone = ChannelId::new("gone").unwrap();
    assert_eq!(
        tx.store_channel(&gone, Some(&v2), Guard::Version(3))
            .await
            .unwrap(),
        Stored::Stale { actual: 0 }
    );
}

#[tokio::test]
async fn sequence_numbers_follow_commit_order_and_refusals_consume_none() {
    let pg = Postgres::start();
    let store = PgStore::connect(&pg.url(PASSWORD), "test", false)
        .await
        .unwrap();
    let rec = |t: i64| crate::plane::OpRecord {
        seq: 0,
        t_unix_nano: t,
        channel: ChannelId::new("trade").unwrap(),
        op: Op::Ratio(10),
        actor: "t".into(),
        imported: false,
        note: None,
    };
    let mut tx = store.begin().await.unwrap();
    assert_eq!(tx.committed_seq(), Some(0));
    assert_eq!(tx.insert(OpRow::of_channel(&rec(1))).await.unwrap(), 1);
    assert_eq!(tx.insert(OpRow::of_channel(&rec(2))).await.unwrap(), 2);
    tx.commit().await.unwrap();
    // Rolled back: its number is given back.
    let mut tx = store.begin().await.unwrap();
    assert_eq!(tx.committed_seq(), Some(2));
    assert_eq!(tx.insert(OpRow::of_channel(&rec(3))).await.unwrap(), 3);
    drop(tx);
    // A second writer waits for the first one's lock, then continues after its numbers.
    let mut first = store.begin().await.unwrap();
    let store = Arc::new(store);
    let second = tokio::spawn({
        let store = Arc::clone(&store);
        async move {
            let mut tx = store.begin().await.unwrap();
            let seen = tx.committed_seq();
            let seq = tx.insert(OpRow::of_channel(&rec(5))).await.unwrap();
            tx.commit().await.unwrap();
            (seen, seq)
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!second.is_finished(), "the second writer did not wait");
    assert_eq!(first.insert(OpRow::of_channel(&rec(4))).await.unwrap(), 3);
    first.commit().await.unwrap();
    assert_eq!(second.await.unwrap(), (Some(3), 4));
    let ops = store.ops_after(0).await.unwrap();
    let got: Vec<(u64, i64)> = ops
        .iter()
        .map(|o| match o {
            StoredOp::Channel(r) => (r.seq, r.t_unix_nano),
            StoredOp::LaneGroup(r) => (r.seq, r.t_unix_nano),
        })
        .collect();
    assert_eq!(got, [(1, 1), (2, 2), (3, 4), (4, 5)]);
    assert_eq!(
        pg.psql("SELECT seq FROM dyeline_control.control_seq")
            .as_deref(),
        Some("4")
    );
}

#[tokio::test]
async fn a_write_first_applies_what_other_nodes_committed() {
    let pg = Postgres::start();
    let a = deaf(&pg).await;
    let b = deaf(&pg).await;
    a.write("trade", Op::Apps(vec!["order".into()]), "a", None, None)
        .await
        .unwrap();
    a.write("trade", Op::Start, "a", None, None).await.unwrap();
    // b has heard nothing; its write reads both ops first and is judged on them.
    assert_eq!(b.latest_seq(), 0);
    let e = b
        .write("trade", Op::Start, "b", None, None)
        .await
        .unwrap_err();
    assert_eq!(e.code(), "already_releasing", "{e}");
    assert_eq!(b.latest_seq(), 2);
    assert_eq!(b.channel("trade").unwrap().version, 2);
    // a stale If-Match (the version b had seen before) is 412, and records nothing
    let e = b
        .write("trade", Op::Ratio(30), "b", Some(1), None)
        .await
        .unwrap_err();
    assert_eq!(e.code(), "version_mismatch", "{e}");
    let out = b
        .write("trade", Op::Ratio(30), "b", Some(2), None)
        .await
        .unwrap();
    assert_eq!(out.seq, 3);
    // and a, in turn, applies b's op before its own
    let out = a
        .write("trade", Op::Ratio(40), "a", Some(3), None)
        .await
        .unwrap();
    assert_eq!(out.seq, 4);
    assert_eq!(seqs(&a), [1, 2, 3, 4]);
    assert_eq!(a.op_records(None)[2].actor, "b");
    // A new plane replays the same history.
    let c = deaf(&pg).await;
    assert_eq!(c.op_records(None), a.op_records(None));
    assert_eq!(c.channels(), a.channels());
}

#[tokio::test]
async fn a_follower_applies_other_writes_after_notifications_and_reconnections() {
    let pg = Postgres::start();
    let writer = deaf(&pg).await;
    let follower = following(&pg).await;
    let mut rx = follower.subscribe();
    writer
        .write("trade", Op::Apps(vec!["order".into()]), "w", None, None)
        .await
        .unwrap();
    wait_for(&follower, 1).await;
    assert!(rx.has_changed().unwrap(), "subscribers were not woken");
    assert_eq!(*rx.borrow_and_update(), 1);
    for round in 0..3 {
        // The listener's connection is killed; what is written meanwhile still arrives (the
        // listener re-reads after reconnecting even when no notification reaches it).
        kill_listener(&pg).await;
        let op = if round % 2 == 0 {
            Op::Start
        } else {
            Op::Finish
        };
        let out = writer.write("trade", op, "w", None, None).await.unwrap();
        wait_for(&follower, out.seq).await;
    }
    // A write committed in the same session right after the listener's connection is gone
    // (pg_terminate_backend waits for it): its notification reaches no listener, so it
    // arrives only through the re-read after the reconnection.
    let deadline = Instant::now() + Duration::from_secs(10);
    let listener =
        format!("FROM pg_stat_activity WHERE application_name = '{LISTENER_APPLICATION_NAME}'");
    while pg.psql(&format!("SELECT count(*) {listener}")).as_deref() != Some("1") {
        assert!(Instant::now() < deadline, "the listener did not reconnect");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let out = pg
        .psql(&format!(
            "SELECT count(pg_terminate_backend(pid, 5000)) {listener}; \
             WITH next AS (UPDATE dyeline_control.control_seq SET seq = seq + 1 RETURNING seq) \
             INSERT INTO dyeline_control.control_ops (seq, t_unix_nano, subject, op, \
             blue_percent, actor) SELECT seq, 1, 'trade', 'ratio', 30, 'psql' FROM next; \
             UPDATE dyeline_control.control_channels SET blue_percent = 30, \
             version = version + 1 WHERE id = 'trade'; \
             NOTIFY {NOTIFY_CHANNEL}"
        ))
        .unwrap();
    assert!(out.starts_with('1'), "{out}");
    wait_for(&follower, 5).await;
    assert_eq!(follower.channel("trade").unwrap().blue_percent, 30);
    let out = writer
        .write("trade", Op::Ratio(40), "w", None, None)
        .await
        .unwrap();
    assert_eq!(out.seq, 6);
    wait_for(&follower, 6).await;
    assert_eq!(follower.op_records(None), writer.op_records(None));
    assert_eq!(
        follower.channel("trade").unwrap(),
        writer.channel("trade").unwrap()
    );
    // The follower writes too, after what it followed.
    let out = follower
        .write("trade", Op::Finish, "f", None, None)
        .await
        .unwrap();
    assert_eq!(out.seq, 7);
    follower.close().await;
}

#[tokio::test]
async fn operations_are_applied_in_sequence_order_only() {
    let pg = Postgres::start();
    let a = deaf(&pg).await;
    a.write("trade", Op::Apps(vec!["order".into()]), "a", None, None)
        .await
        .unwrap();
    let b = deaf(&pg).await;
    assert_eq!(b.latest_seq(), 1);
    // A row past a hole (which the counter row never lets a writer make) is not applied:
    // the plane keeps its state and says why.
    pg.psql(
        "INSERT INTO dyeline_control.control_ops (seq, t_unix_nano, subject, op, actor) \
         VALUES (3, 3, 'trade', 'start', 'forged')",
    )
    .unwrap();
    let e = b.refresh().await.unwrap_err();
    assert!(e.to_string().contains("3 follows 1"), "{e}");
    assert_eq!(b.latest_seq(), 1);
    assert_eq!(seqs(&b), [1]);
    // Once the hole is filled, both apply in order.
    pg.psql(
        "INSERT INTO dyeline_control.control_ops (seq, t_unix_nano, subject, op, blue_percent, \
         actor) VALUES (2, 2, 'global', 'start', NULL, 'forged'); \
         UPDATE dyeline_control.control_seq SET seq = 3",
    )
    .unwrap();
    assert_eq!(b.refresh().await.unwrap(), 2);
    assert_eq!(seqs(&b), [1, 2, 3]);
    assert_eq!(
        b.channel("trade").unwrap().state,
        dyeline_model::release::ReleaseState::Releasing
    );
}
