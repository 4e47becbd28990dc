//! Exact mode's known version on SQLite (the WAL index): trusted after a check until
//! anyone commits, and never where the file cannot tell.

use books_sqlx::sqlx::sqlite::SqliteJournalMode;

use super::*;

fn book(author_id: i64) -> BookInput {
    BookInput {
        title: "T".into(),
        author_id,
        year: 2020,
    }
}

/// Known after a check, gone the moment another connection commits (nothing waited
/// for), and known again after the next check; the store's own writes end it too.
#[tokio::test]
async fn any_commit_ends_the_known_version_at_once() {
    let store = fresh().await;
    let author = store.add_author(Some("A")).await.unwrap();
    for round in 0..20 {
        let checked = store.version().await.unwrap();
        assert_eq!(store.known_version(), Some(checked), "round {round}");
        let name = format!("Renamed {round}");
        host_writes(
            store.clone(),
            OutsideWrite::RenameAuthor { id: author, name },
        )
        .await;
        assert_eq!(
            store.known_version(),
            None,
            "round {round}: after another's commit"
        );
        let after = store.version().await.unwrap();
        assert!(after.count > checked.count, "round {round}");
        assert_eq!(store.known_version(), Some(after), "round {round}");
        store.create(&book(author), Utc::now()).await.unwrap();
        assert_eq!(
            store.known_version(),
            None,
            "round {round}: after our create"
        );
    }
}

/// A closed store knows nothing: its cached reads fail as its queries do.
#[tokio::test]
async fn a_closed_store_knows_no_version() {
    let store = fresh().await;
    let checked = store.version().await.unwrap();
    assert_eq!(store.known_version(), Some(checked));
    store.close().await;
    assert_eq!(store.known_version(), None);
}

/// Checks, and expects the version known until the host renames `author` on `host`.
async fn known_until_the_host_commits(
    store: &SqliteStore,
    host: &mut sqlx::SqliteConnection,
    author: i64,
    round: usize,
) {
    let checked = store.version().await.unwrap();
    assert_eq!(store.known_version(), Some(checked), "round {round}");
    sqlx::query("UPDATE authors SET name = ? WHERE id = ?")
        .bind(format!("Renamed {round}"))
        .bind(author)
        .execute(host)
        .await
        .unwrap();
    assert_eq!(
        store.known_version(),
        None,
        "round {round}: after the host's commit"
    );
}

/// A checkpoint that empties the WAL rewrites its index; the writes after it still end
/// the known version.
#[tokio::test]
async fn writes_after_a_truncating_checkpoint_end_the_known_version() {
    let store = fresh().await;
    let author = store.add_author(Some("A")).await.unwrap();
    let path = store.writer().connect_options().get_filename().to_owned();
    let mut host = sqlx::SqliteConnection::connect(&url(&path)).await.unwrap();
    for round in 0..5 {
        sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
            .execute(&mut host)
            .await
            .unwrap();
        known_until_the_host_commits(&store, &mut host, author, round).await;
    }
}

/// Where no WAL index tells of every commit, every cached read asks: a file in
/// rollback-journal mode, a database in memory, and a host's pool (its connections
/// may all close, and the index with them).
#[tokio::test]
async fn without_a_wal_index_of_its_own_the_store_never_knows() {
    let options = SqliteStore::options(&url(&fresh_path()))
        .unwrap()
        .journal_mode(SqliteJournalMode::Delete);
    let rollback = SqliteStore::connect_with(options).await.unwrap();
    let in_memory = SqliteStore::connect("sqlite::memory:").await.unwrap();
    let pool = SqlitePool::connect_with(SqliteStore::options(&url(&fresh_path())).unwrap())
        .await
        .unwrap();
    let hosts = SqliteStore::from_pool(pool);
    for store in [rollback, in_memory, hosts] {
        store.migrate().await.unwrap();
        store.version().await.unwrap();
        assert_eq!(store.known_version(), None, "{store:?}");
    }
}

/// A commit from another process, through another build of SQLite (Python's), ends the
/// known version as one from this process does.
#[tokio::test]
async fn a_commit_from_another_process_ends_the_known_version() {
    let store = fresh().await;
    let author = store.add_author(Some("A")).await.unwrap();
    let path = store.writer().connect_options().get_filename().to_owned();
    let rename = "import sqlite3, sys\n\
                  c = sqlite3.connect(sys.argv[1], timeout=5)\n\
                  c.execute('UPDATE authors SET name = ? WHERE id = ?', (sys.argv[2], int(sys.argv[3])))\n\
                  c.commit()";
    for round in 0..5 {
        let checked = store.version().await.unwrap();
        assert_eq!(store.known_version(), Some(checked), "round {round}");
        let written = std::process::Command::new("python3")
            .args(["-c", rename])
            .arg(&path)
            .args([format!("Renamed {round}"), author.to_string()])
            .output()
            .expect("python3 runs");
        assert!(written.status.success(), "{written:?}");
        assert_eq!(store.known_version(), None, "round {round}");
        assert!(store.version().await.unwrap().count > checked.count);
    }
}

/// A database reached through a link: the index watched is the one SQLite uses, beside
/// the file the link resolves to, not a stale file beside the link's own name.
#[tokio::test]
async fn a_database_behind_a_link_watches_the_index_sqlite_uses() {
    let real = fresh_path();
    let link = real.with_extension("link.db");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    // A leftover index beside the link's name: a valid header that never moves.
    let mut header = [0u8; 48];
    header[12] = 1;
    let mut leftover = link.as_os_str().to_owned();
    leftover.push("-shm");
    std::fs::write(&leftover, [header, header].concat()).unwrap();

    let store = SqliteStore::connect(&url(&link)).await.unwrap();
    store.migrate().await.unwrap();
    let author = store.add_author(Some("A")).await.unwrap();
    let mut host = sqlx::SqliteConnection::connect(&url(&real)).await.unwrap();
    for round in 0..3 {
        known_until_the_host_commits(&store, &mut host, author, round).await;
    }
}
