//! Another program's write transaction left open on a host's own tables under
//! books-sqlx's [`VersionTriggers`]: it holds up no unrelated writer on the counters, even
//! one whose connection number it shares in the last four bits (each connection's slot,
//! as the store's own counters take it).

use books_sqlx::VersionTriggers;
use books_sqlx::sqlx::MySql;

use super::*;

/// The connection's number in the server's last four bits.
async fn low_bits(conn: &mut MySqlConnection) -> i64 {
    let id: i64 = sqlx::query_scalar("SELECT CAST(CONNECTION_ID() & 15 AS SIGNED)")
        .fetch_one(conn)
        .await
        .unwrap();
    id
}

/// A connection to `database` whose number ends in one of `bits` (at most 256 tries).
async fn connection_ending_in(database: &str, bits: &[i64]) -> MySqlConnection {
    for _ in 0..256 {
        let mut conn = options_in(database).connect().await.unwrap();
        if bits.contains(&low_bits(&mut conn).await) {
            return conn;
        }
    }
    panic!("no connection ends in {bits:?}");
}

/// Bounds every lock wait of `conn` to two seconds.
async fn bounded(conn: &mut MySqlConnection) {
    sqlx::raw_sql("SET innodb_lock_wait_timeout = 2, max_statement_time = 5")
        .execute(conn)
        .await
        .unwrap();
}

#[cfg_attr(not(books_test_mysql), ignore = "BOOKS_TEST_MYSQL_URL is not set")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_write_holds_up_no_unrelated_writer() {
    let _cleanup = cleanup();
    let database = fresh_database().await;
    let mut reader = options_in(&database).connect().await.unwrap();
    sqlx::raw_sql(
        "CREATE TABLE people (person_code INT PRIMARY KEY, display_name TEXT); \
         CREATE TABLE titles (title_code BIGINT AUTO_INCREMENT PRIMARY KEY, \
             heading TEXT NOT NULL, penned_by INT, \
             FOREIGN KEY (penned_by) REFERENCES people (person_code) ON DELETE SET NULL)",
    )
    .execute(&mut reader)
    .await
    .unwrap();
    let version = VersionTriggers::<MySql>::new(
        &format!("{database}.api_version"),
        &format!("{database}.titles"),
    )
    .and_then(|version| version.also(&format!("{database}.people")))
    .unwrap();
    let pool = MySqlPool::connect_with(options_in(&database))
        .await
        .unwrap();
    version.install(&pool).await.unwrap();
    let before = version.version(&mut reader).await.unwrap();

    // Another program writes a title and a person and keeps its transaction open.
    let mut holder = options_in(&database).connect().await.unwrap();
    let held_bits = low_bits(&mut holder).await;
    let mut open = holder.begin().await.unwrap();
    sqlx::raw_sql(
        "INSERT INTO people VALUES (1, 'Held'); \
         INSERT INTO titles (heading, penned_by) VALUES ('held', 1)",
    )
    .execute(&mut *open)
    .await
    .unwrap();

    // Unrelated writes, each its own transaction, on a connection whose number ends as
    // the holder's does: none may wait for the open transaction.
    let mut writer = connection_ending_in(&database, &[held_bits]).await;
    bounded(&mut writer).await;
    for n in 0..32 {
        let write = match n % 3 {
            0 => format!("INSERT INTO titles (heading) VALUES ('free {n}'), ('more {n}')"),
            // By key: InnoDB's scan would wait on the held row itself.
            1 => {
                "UPDATE titles SET heading = 'again' WHERE title_code = LAST_INSERT_ID()".to_owned()
            }
            _ => format!("INSERT INTO people VALUES ({}, 'P')", 100 + n),
        };
        sqlx::raw_sql(AssertSqlSafe(write))
            .execute(&mut writer)
            .await
            .unwrap_or_else(|error| panic!("write {n} waited on the open transaction: {error}"));
    }
    let after = version.version(&mut reader).await.unwrap();
    assert_eq!(after.history, before.history);
    assert!(after.count > before.count, "{before:?} then {after:?}");

    // The open transaction commits into its own slot: both writers counted.
    open.commit().await.unwrap();
    let total: i64 = sqlx::query_scalar("SELECT CAST(SUM(n) AS SIGNED) FROM api_version")
        .fetch_one(&mut reader)
        .await
        .unwrap();
    assert_eq!(total, 23, "22 free titles and the held one");
    assert!(version.version(&mut reader).await.unwrap().count > after.count);
}
