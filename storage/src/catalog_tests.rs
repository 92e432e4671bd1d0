//! The catalog against a real PostgreSQL (the testkit's, one server per test).

use std::time::Duration;

use super::*;
use crate::testkit::postgres::Postgres;

const PASSWORD: &str = "hunter2-catalog";

async fn catalog(pg: &Postgres) -> Catalog {
    Catalog::connect(&PostgresUrl::parse(&pg.url(PASSWORD)).unwrap(), 2)
        .await
        .unwrap()
}

/// A catalog on `pg` and node `n1`, claimed: its epoch.
async fn claimed(pg: &Postgres) -> (Catalog, NodeId, i64) {
    let c = catalog(pg).await;
    let n = node("n1");
    let epoch = c.claim_node(&n).await.unwrap();
    (c, n, epoch)
}

fn node(id: &str) -> NodeId {
    NodeId::parse(id).unwrap()
}

const HOUR: i64 = 3_600_000_000_000;

/// A file of `kind` whose rows start from `min` to `max` (hours after the epoch's hour 0).
fn file(key: &str, min: i64, max: i64) -> SpanFile {
    SpanFile {
        key: key.into(),
        kind: FileKind::Spans,
        hour_unix_nano: min / HOUR * HOUR,
        rows: 10,
        bytes: 1000,
        min_start_unix_nano: min,
        max_start_unix_nano: max,
        trace_index_key: Some(format!("{key}.idx")),
    }
}

/// Registers `files` of spans for `n` at `epoch`, the checkpoint advanced to `position`.
async fn register(
    c: &Catalog,
    n: &NodeId,
    epoch: i64,
    files: &[SpanFile],
    position: u64,
) -> Result<Registered, CatalogError> {
    c.register_upload(n, epoch, FileKind::Spans, files, position)
        .await
}

fn keys(files: &[ListedFile]) -> Vec<&str> {
    files.iter().map(|f| f.file.key.as_str()).collect()
}

#[tokio::test]
async fn migrations_apply_once_and_again_change_nothing() {
    let pg = Postgres::start();
    let first = catalog(&pg).await;
    assert_eq!(first.schema_version().await.unwrap(), 7);
    let n = node("n1");
    let epoch = first.claim_node(&n).await.unwrap();
    register(&first, &n, epoch, &[file("a", 5, 9)], 3)
        .await
        .unwrap();
    // A second start (another node, a restart) runs the migrations again: nothing changes.
    let second = catalog(&pg).await;
    assert_eq!(second.schema_version().await.unwrap(), 7);
    assert_eq!(
        keys(&second.live_files(FileKind::Spans, 0, 100).await.unwrap()),
        ["a"]
    );
    assert_eq!(
        second.checkpoint(&n, FileKind::Spans).await.unwrap(),
        Some(3)
    );
}

#[tokio::test]
async fn an_older_epoch_is_fenced_and_changes_nothing() {
    let pg = Postgres::start();
    let c = catalog(&pg).await;
    let n = node("ingest-1");
    assert_eq!(c.owner_epoch(&n).await.unwrap(), None);
    let old = c.claim_node(&n).await.unwrap();
    assert_eq!(old, 1);
    register(&c, &n, old, &[file("old-1", 0, 5)], 10)
        .await
        .unwrap();
    let new = c.claim_node(&n).await.unwrap();
    assert_eq!((new, c.owner_epoch(&n).await.unwrap()), (2, Some(2)));
    let e = register(&c, &n, old, &[file("old-2", 6, 8)], 20)
        .await
        .unwrap_err();
    assert!(matches!(e, CatalogError::Fenced { epoch: 1, .. }), "{e}");
    assert!(e.to_string().contains("ingest-1"), "{e}");
    assert_eq!(
        keys(&c.live_files(FileKind::Spans, 0, 100).await.unwrap()),
        ["old-1"]
    );
    assert_eq!(c.checkpoint(&n, FileKind::Spans).await.unwrap(), Some(10));
    // The new owner writes; another node's epoch is its own.
    register(&c, &n, new, &[file("new-1", 6, 8)], 20)
        .await
        .unwrap();
    assert_eq!(c.checkpoint(&n, FileKind::Spans).await.unwrap(), Some(20));
    assert_eq!(c.claim_node(&node("ingest-2")).await.unwrap(), 1);
}

#[tokio::test]
async fn a_registration_is_one_transaction_and_registers_no_key_twice() {
    let pg = Postgres::start();
    let (c, n, epoch) = claimed(&pg).await;
    // The second file breaks a constraint after the first was inserted: neither the first
    // file nor the checkpoint stays.
    let e = register(&c, &n, epoch, &[file("good", 1, 2), file("bad", 9, 3)], 7)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("registering a file"), "{e}");
    assert!(
        c.live_files(FileKind::Spans, 0, 100)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(c.checkpoint(&n, FileKind::Spans).await.unwrap(), None);

    let done = register(&c, &n, epoch, &[file("a", 1, 2), file("b", 3, 4)], 7)
        .await
        .unwrap();
    assert_eq!((done.inserted, done.already_known), (2, 0));
    // The same keys again (a retry after a lost commit acknowledgement): nothing twice.
    let mut changed = file("a", 1, 2);
    changed.rows = 999;
    let again = register(&c, &n, epoch, &[changed, file("c", 5, 6)], 5)
        .await
        .unwrap();
    assert_eq!((again.inserted, again.already_known), (1, 1));
    let listed = c.live_files(FileKind::Spans, 0, 100).await.unwrap();
    assert_eq!(keys(&listed), ["a", "b", "c"]);
    assert_eq!(
        listed[0].file.rows, 10,
        "a key registered before keeps its row"
    );
    assert_eq!(listed[0].node, "n1");
    // A file of another kind than the registration's is refused before anything is written.
    let mut presence = file("p", 1, 2);
    presence.kind = FileKind::Presence;
    let e = register(&c, &n, epoch, &[presence], 9).await.unwrap_err();
    assert!(matches!(e, CatalogError::Invalid(_)), "{e}");
    // The checkpoint never goes back (5 < 7), and is kept per kind.
    assert_eq!(c.checkpoint(&n, FileKind::Spans).await.unwrap(), Some(7));
    assert_eq!(c.checkpoint(&n, FileKind::Presence).await.unwrap(), None);
}

#[tokio::test]
async fn listings_by_time_deleted_files_and_known_keys() {
    let pg = Postgres::start();
    let (c, n, epoch) = claimed(&pg).await;
    let files = [
        file("spans/h0/a", 0, 10),
        file("spans/h0/b", 10, 20),
        file("spans/h0/c", 20, 30),
    ];
    register(&c, &n, epoch, &files, 1).await.unwrap();
    let mut presence = file("presence/h0/p", 0, 30);
    presence.kind = FileKind::Presence;
    presence.trace_index_key = None;
    c.register_upload(&n, epoch, FileKind::Presence, &[presence], 1)
        .await
        .unwrap();
    // [10, 20) overlaps a (no: its last start is 10, inside), b, not c (starts at 20).
    let listed = c.live_files(FileKind::Spans, 10, 20).await.unwrap();
    assert_eq!(keys(&listed), ["spans/h0/a", "spans/h0/b"]);
    assert_eq!(listed[1].file, files[1]);
    assert_eq!(
        keys(&c.live_files(FileKind::Spans, 31, 40).await.unwrap()),
        Vec::<&str>::new()
    );
    assert_eq!(
        keys(&c.live_files(FileKind::Presence, 0, 1).await.unwrap()),
        ["presence/h0/p"]
    );

    assert_eq!(
        c.mark_deleted(&["spans/h0/a".into(), "nope".into()])
            .await
            .unwrap(),
        1
    );
    assert_eq!(c.mark_deleted(&["spans/h0/a".into()]).await.unwrap(), 0);
    assert_eq!(
        keys(&c.live_files(FileKind::Spans, 0, 40).await.unwrap()),
        ["spans/h0/b", "spans/h0/c"]
    );
    assert!(
        c.deleted_files(Duration::from_secs(3600), 10)
            .await
            .unwrap()
            .is_empty()
    );
    let deleted = c.deleted_files(Duration::ZERO, 10).await.unwrap();
    assert_eq!(
        deleted,
        [DeletedFile {
            key: "spans/h0/a".into(),
            trace_index_key: Some("spans/h0/a.idx".into())
        }]
    );
    // Deleted files stay known until the janitor has deleted their objects.
    assert_eq!(
        c.known_keys("spans/").await.unwrap(),
        [
            "spans/h0/a",
            "spans/h0/a.idx",
            "spans/h0/b",
            "spans/h0/b.idx",
            "spans/h0/c",
            "spans/h0/c.idx"
        ]
    );
    assert_eq!(c.known_keys("presence/").await.unwrap(), ["presence/h0/p"]);
}

#[tokio::test]
async fn the_pool_reconnects_after_a_restart_and_errors_hide_the_password() {
    let pg = Postgres::start();
    let (c, n, epoch) = claimed(&pg).await;
    pg.crash();
    let down = c.owner_epoch(&n).await.unwrap_err().to_string();
    assert!(!down.contains(PASSWORD), "{down}");
    let refused = Catalog::connect(&PostgresUrl::parse(&pg.url(PASSWORD)).unwrap(), 1)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("cannot connect")
            && refused.contains("127.0.0.1")
            && !refused.contains(PASSWORD),
        "{refused}"
    );
    pg.restart();
    // The same pool, its old connections broken: the next statements get fresh ones.
    assert_eq!(c.owner_epoch(&n).await.unwrap(), Some(epoch));
    register(&c, &n, epoch, &[file("after", 1, 2)], 4)
        .await
        .unwrap();
    assert_eq!(c.checkpoint(&n, FileKind::Spans).await.unwrap(), Some(4));
}

#[tokio::test]
async fn tls_is_spoken_when_asked_and_an_unknown_issuer_is_refused() {
    let pg = Postgres::start();
    let url =
        |mode: &str| PostgresUrl::parse(&format!("{}?sslmode={mode}", pg.url(PASSWORD))).unwrap();
    let c = Catalog::connect(&url("require"), 1).await.unwrap();
    assert_eq!(c.schema_version().await.unwrap(), 7);
    let tls: String =
        sqlx::query_scalar("SELECT ssl::text FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
            .fetch_one(&c.pool)
            .await
            .unwrap();
    assert_eq!(tls, "true");
    let e = Catalog::connect(&url("verify-full"), 1)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot connect") && !e.contains(PASSWORD), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_pairs_the_files_with_the_checkpoint_and_a_compaction_swaps_one_hour_once() {
    let pg = Postgres::start();
    let (c, n, epoch) = claimed(&pg).await;
    // No checkpoint before the first upload; none asked without a node.
    let empty = c.listing(Some(&n), FileKind::Spans).await.unwrap();
    assert_eq!(
        (empty.files.len(), empty.uploaded_through_unix_ms),
        (0, None)
    );
    let hour0 = [file("spans/h0/a", 0, 1), file("spans/h0/b", 2, 3)];
    register(&c, &n, epoch, &hour0, 1_000).await.unwrap();
    register(&c, &n, epoch, &[file("spans/h1/c", HOUR, HOUR + 1)], 2_000)
        .await
        .unwrap();
    let l = c.listing(Some(&n), FileKind::Spans).await.unwrap();
    assert_eq!(l.uploaded_through_unix_ms, Some(2_000));
    assert_eq!(keys(&l.files), ["spans/h0/a", "spans/h0/b", "spans/h1/c"]);
    assert_eq!(
        c.listing(None, FileKind::Spans)
            .await
            .unwrap()
            .uploaded_through_unix_ms,
        None
    );
    assert!(
        c.listing(Some(&n), FileKind::Presence)
            .await
            .unwrap()
            .files
            .is_empty()
    );

    // Hour 0 holds two files of 1000 bytes: due at a 2000-byte target (2 > ceil(2000/2000)),
    // not at 1000 (2 = ceil(2000/1000)); hour 1 (one file) never; an hour not yet closed
    // (ending after `closed_before`) not either.
    let hour_cooldown = Duration::from_secs(3600);
    let due = |target: u64, closed: i64| {
        c.compaction_due(FileKind::Spans, closed, target, hour_cooldown, 10)
    };
    assert_eq!(due(2000, 10 * HOUR).await.unwrap(), [0]);
    assert!(due(1000, 10 * HOUR).await.unwrap().is_empty());
    assert!(due(2000, HOUR - 1).await.unwrap().is_empty());

    // Two compactions of one hour: the second finds its rows locked and claims nothing.
    let claim = c
        .claim_hour(FileKind::Spans, 0)
        .await
        .unwrap()
        .expect("two files");
    assert_eq!(keys(&claim.inputs), ["spans/h0/a", "spans/h0/b"]);
    assert!(c.claim_hour(FileKind::Spans, 0).await.unwrap().is_none());
    // A claim by a fenced-off epoch changes nothing.
    let newer = c.claim_node(&n).await.unwrap();
    let out = [file("spans/h0/ab1", 0, 1), file("spans/h0/ab2", 2, 3)];
    let err = claim.commit(&n, epoch, &out).await.unwrap_err();
    assert!(matches!(err, CatalogError::Fenced { .. }), "{err}");
    let l = c.listing(Some(&n), FileKind::Spans).await.unwrap();
    assert_eq!(keys(&l.files), ["spans/h0/a", "spans/h0/b", "spans/h1/c"]);
    // The owner's compaction swaps in one transaction; its outputs alone are not due again,
    // though two files of 2000 bytes would be at a 1 MB target.
    let claim = c.claim_hour(FileKind::Spans, 0).await.unwrap().unwrap();
    claim.commit(&n, newer, &out).await.unwrap();
    let l = c.listing(Some(&n), FileKind::Spans).await.unwrap();
    assert_eq!(
        keys(&l.files),
        ["spans/h0/ab1", "spans/h0/ab2", "spans/h1/c"]
    );
    assert!(due(1_000_000, 10 * HOUR).await.unwrap().is_empty());
    assert_eq!(
        c.deleted_files(Duration::ZERO, 10).await.unwrap().len(),
        2,
        "the inputs wait for deletion"
    );
    // Late spans uploaded into the compacted hour: not merged with it again within the
    // cooldown after its compaction (the whole hour would be fetched and put again at every
    // pass), due once the cooldown is over.
    register(&c, &n, newer, &[file("spans/h0/late", 4, 5)], 3_000)
        .await
        .unwrap();
    assert!(due(1_000_000, 10 * HOUR).await.unwrap().is_empty());
    let after = |cooldown| c.compaction_due(FileKind::Spans, 10 * HOUR, 1_000_000, cooldown, 10);
    assert_eq!(after(Duration::ZERO).await.unwrap(), [0]);
}

#[tokio::test]
async fn heartbeats_are_fenced_and_the_status_reads_them_back_with_checkpoints_and_files() {
    use crate::catalog::nodes::Beat;
    use crate::status::{Liveness, read};

    let pg = Postgres::start();
    let (c, n1, e1) = claimed(&pg).await;
    let n2 = node("n2");
    let e2 = c.claim_node(&n2).await.unwrap();
    register(&c, &n1, e1, &[file("a", 5, 9), file("b", 10, 12)], 7)
        .await
        .unwrap();
    let beat = Beat {
        started_unix_ms: 1_700_000_000_000,
        version: "9.9.9".into(),
        staging_bytes: 12_345,
        upload_lag_ms: 6_000,
        api_url: Some("http://10.0.0.7:8080".into()),
    };
    c.heartbeat(&n1, e1, &beat).await.unwrap();

    // Another process claims n1: the old owner's heartbeat is refused and changes nothing.
    let e1b = c.claim_node(&n1).await.unwrap();
    let stale = Beat {
        staging_bytes: 1,
        ..beat.clone()
    };
    assert!(matches!(
        c.heartbeat(&n1, e1, &stale).await,
        Err(CatalogError::Fenced { .. })
    ));

    let status = read(&c, Duration::from_secs(5)).await.unwrap();
    assert_eq!(status.alert_leader.holder, None);
    let ids: Vec<&str> = status
        .nodes
        .iter()
        .map(|l| l.node.node_id.as_str())
        .collect();
    assert_eq!(ids, ["n1", "n2"]);
    let one = &status.nodes[0];
    assert_eq!(one.state, Liveness::Alive);
    assert_eq!(one.node.owner_epoch, e1b);
    assert_eq!(one.node.started_unix_ms, Some(1_700_000_000_000));
    assert_eq!(one.node.version.as_deref(), Some("9.9.9"));
    assert_eq!(one.node.staging_bytes, Some(12_345));
    assert_eq!(one.node.upload_lag_ms, Some(6_000));
    assert_eq!(one.node.api_url.as_deref(), Some("http://10.0.0.7:8080"));
    assert_eq!(one.node.spans_uploaded_through_unix_ms, Some(7));
    assert_eq!(
        (one.node.live_span_files, one.node.live_span_bytes),
        (2, 2000)
    );
    let two = &status.nodes[1];
    assert_eq!((two.state, two.node.owner_epoch), (Liveness::Never, e2));
    assert_eq!(
        (two.node.live_span_files, two.node.staging_bytes),
        (0, None)
    );
    assert_eq!(two.node.api_url, None);
    let text = status.to_string();
    assert!(text.contains("1 of 2 nodes alive"), "{text}");
    assert!(text.contains("http://10.0.0.7:8080"), "{text}");
    assert!(
        text.contains("12.3 KB") || text.contains("12.1 KiB"),
        "{text}"
    );

    // Judged by a short interval, the same heartbeat is stale once three have passed.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let later = read(&c, Duration::from_millis(100)).await.unwrap();
    assert_eq!(later.nodes[0].state, Liveness::Stale);
    assert!(later.nodes[0].node.heartbeat_age_s.unwrap() >= 0.4);
}

/// A share replaces the node's previous one; the leader reads the fresh shares and the live
/// nodes without one; a node reads the others' signals only.
#[tokio::test]
async fn shares_replace_and_a_live_node_without_a_fresh_one_is_missing() {
    use crate::catalog::nodes::Beat;

    let pg = Postgres::start();
    let (c, n1, e1) = claimed(&pg).await;
    let n2 = node("n2");
    let e2 = c.claim_node(&n2).await.unwrap();
    let beat = Beat {
        started_unix_ms: 1,
        version: "t".into(),
        staging_bytes: 0,
        upload_lag_ms: 0,
        api_url: None,
    };
    c.heartbeat(&n1, e1, &beat).await.unwrap();
    c.heartbeat(&n2, e2, &beat).await.unwrap();
    let (fresh, alive) = (Duration::from_secs(30), Duration::from_secs(30));

    c.put_share(&n1, b"first", b"s1").await.unwrap();
    c.put_share(&n1, b"second", b"s1b").await.unwrap();
    let s = c.shares(fresh, alive).await.unwrap();
    assert_eq!(s.fresh, vec![("n1".to_owned(), b"second".to_vec())]);
    assert_eq!(s.missing, vec!["n2".to_owned()]);
    assert_eq!(
        c.other_signals(&n2, fresh).await.unwrap(),
        vec![b"s1b".to_vec()]
    );
    assert!(c.other_signals(&n1, fresh).await.unwrap().is_empty());

    c.put_share(&n2, b"two", b"s2").await.unwrap();
    let s = c.shares(fresh, alive).await.unwrap();
    assert_eq!(s.fresh.len(), 2);
    assert!(s.missing.is_empty());

    // Past the freshness bound a share is neither merged nor read, and its node is missing
    // while its heartbeat is recent.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let s = c.shares(Duration::from_millis(100), alive).await.unwrap();
    assert!(s.fresh.is_empty());
    assert_eq!(s.missing, vec!["n1".to_owned(), "n2".to_owned()]);
    // A node whose heartbeat stopped is not expected.
    let s = c
        .shares(Duration::from_millis(100), Duration::from_millis(100))
        .await
        .unwrap();
    assert!(s.missing.is_empty());
}
