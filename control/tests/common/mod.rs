//! What the control plane's integration tests share: a database as an earlier version left it.

use std::path::Path;

/// Creates `dir/control.db` with only `migrations` (file names in `migrations/`) applied and
/// one operation recorded: channel `trade` given the apps `["order"]` by actor `old`, seq 1.
pub async fn database_before(dir: &Path, migrations: &[&str]) {
    let only = tempfile::tempdir().unwrap();
    for m in migrations {
        std::fs::copy(
            format!("{}/migrations/{m}", env!("CARGO_MANIFEST_DIR")),
            only.path().join(m),
        )
        .unwrap();
    }
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(dir.join(dyeline_control::plane::DB_FILE))
        .create_if_missing(true);
    let pool = sqlx::SqlitePool::connect_with(options).await.unwrap();
    sqlx::migrate::Migrator::new(only.path())
        .await
        .unwrap()
        .run(&pool)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO ops (t_unix_nano, channel, op, apps, actor) \
         VALUES (1, 'trade', 'apps', '[\"order\"]', 'old')",
    )
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
}
