//! The cluster fixtures themselves: a pg_auto_failover formation replicates, switches over
//! and fails over (losing an unreplicated commit once asynchronous); a Galera cluster
//! replicates and takes a killed node back; a promoted PostgreSQL or MariaDB replica has
//! what it received and not what it missed. Each test runs where its tools are installed
//! (or under `CI=true`, where it fails without them); elsewhere it shows as ignored with
//! the reason (`gates.rs`).

use std::time::{Duration, Instant};

use books_test_support::{Cluster, Galera, MariaDb, PgAutoFailover, started};

/// Asks `answer` until it is `expected` (replication reaches a reader a moment late),
/// within `within`; whether it was.
fn eventually(
    mut answer: impl FnMut() -> Option<String>,
    expected: &str,
    within: Duration,
) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if answer().as_deref() == Some(expected) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

/// The rows of table `t`, in order, comma-separated (PostgreSQL).
const ROWS: &str = "SELECT string_agg(v, ',' ORDER BY v) FROM t";

#[test]
#[cfg_attr(
    not(books_test_pg_auto_failover),
    ignore = "pg_autoctl is not installed (.ci/install-clusters)"
)]
fn pg_auto_failover_replicates_switches_over_and_fails_over() {
    let at = Instant::now();
    let mut formation = started(PgAutoFailover::start(), "a pg_auto_failover formation");
    eprintln!("pg_auto_failover: started in {:?}", at.elapsed());
    assert!(formation.create_database("books"));
    let url = formation.url("books");
    let write = "CREATE TABLE t (v text); INSERT INTO t VALUES ('one')";
    assert!(PgAutoFailover::sql_url(&url, write).is_some());
    let primary = formation.primary_port().expect("a primary");
    let standby = *formation
        .node_ports()
        .iter()
        .find(|&&p| p != primary)
        .unwrap();
    let read = || formation.sql(standby, "books", ROWS);
    assert!(
        eventually(read, "one", Duration::from_secs(10)),
        "the standby has the write"
    );

    let at = Instant::now();
    assert_eq!(
        formation.switchover(),
        Some(standby),
        "the standby became the primary"
    );
    eprintln!("pg_auto_failover: switchover in {:?}", at.elapsed());
    let port = PgAutoFailover::sql_url(&url, "SELECT inet_server_port()");
    assert_eq!(
        port,
        Some(standby.to_string()),
        "read-write lands on the new primary"
    );
    let write = "INSERT INTO t VALUES ('two')";
    assert!(PgAutoFailover::sql_url(&url, write).is_some());

    let at = Instant::now();
    let killed = formation.kill_primary().expect("the primary killed");
    assert_eq!(killed, standby);
    let survivor = formation.wait_for_primary(Some(killed), Duration::from_secs(60));
    eprintln!(
        "pg_auto_failover: failover after kill in {:?}",
        at.elapsed()
    );
    assert_eq!(survivor, Some(primary), "the other node took the writes");
    let read = || formation.sql(primary, "books", ROWS);
    assert!(
        eventually(read, "one,two", Duration::from_secs(5)),
        "no commit lost"
    );
    let port = PgAutoFailover::sql_url(&url, "SELECT inet_server_port()");
    assert_eq!(port, Some(primary.to_string()));

    let at = Instant::now();
    assert!(
        formation.restart_node(killed),
        "the killed node rejoins as a standby"
    );
    eprintln!("pg_auto_failover: rejoin in {:?}", at.elapsed());
    let read = || formation.sql(killed, "books", ROWS);
    assert!(eventually(read, "one,two", Duration::from_secs(10)));
}

#[test]
#[cfg_attr(
    not(books_test_pg_auto_failover),
    ignore = "pg_autoctl is not installed (.ci/install-clusters)"
)]
fn pg_auto_failover_loses_an_unreplicated_commit_once_asynchronous() {
    let mut formation = started(PgAutoFailover::start(), "a pg_auto_failover formation");
    assert!(formation.create_database("books"));
    let url = formation.url("books");
    let write = "CREATE TABLE t (v text); INSERT INTO t VALUES ('one')";
    assert!(PgAutoFailover::sql_url(&url, write).is_some());
    let primary = formation.primary_port().expect("a primary");
    let standby = *formation
        .node_ports()
        .iter()
        .find(|&&p| p != primary)
        .unwrap();
    let read = |formation: &PgAutoFailover, port| formation.sql(port, "books", ROWS);
    assert!(eventually(
        || read(&formation, standby),
        "one",
        Duration::from_secs(10)
    ));
    assert!(formation.set_asynchronous(), "replication-quorum false");
    assert!(formation.pause_replication());
    let write = "INSERT INTO t VALUES ('lost')";
    assert!(
        PgAutoFailover::sql_url(&url, write).is_some(),
        "commits without the standby"
    );
    assert_eq!(formation.kill_primary(), Some(primary));
    let at = Instant::now();
    let survivor = formation.wait_for_primary(Some(primary), Duration::from_secs(60));
    eprintln!(
        "pg_auto_failover: asynchronous failover after kill in {:?}",
        at.elapsed()
    );
    assert_eq!(survivor, Some(standby));
    let rows = read(&formation, standby);
    assert_eq!(
        rows.as_deref(),
        Some("one"),
        "the unreplicated commit is lost"
    );
    assert!(
        formation.restart_node(primary),
        "the old primary rejoins (pg_rewind)"
    );
    assert!(eventually(
        || read(&formation, primary),
        "one",
        Duration::from_secs(10)
    ));
}

#[test]
#[cfg_attr(
    not(books_test_galera),
    ignore = "the Galera provider is not installed (.ci/install-clusters)"
)]
fn galera_replicates_and_takes_a_killed_node_back() {
    let at = Instant::now();
    let mut cluster = started(Galera::start(3), "a three-node Galera cluster");
    eprintln!("galera: started in {:?}", at.elapsed());
    for index in 0..3 {
        assert_eq!(
            cluster.status(index, "wsrep_cluster_size").as_deref(),
            Some("3")
        );
    }
    let write = "CREATE TABLE test.t (id INT AUTO_INCREMENT PRIMARY KEY, v TEXT); \
                 INSERT INTO test.t (v) VALUES ('one')";
    assert!(cluster.sql(0, write).is_some());
    let read = "SET SESSION wsrep_sync_wait = 1; SELECT GROUP_CONCAT(v ORDER BY v) FROM test.t";
    assert_eq!(
        cluster.sql(2, read).as_deref(),
        Some("one"),
        "node 2 reads node 0's write"
    );

    assert!(cluster.kill(1));
    let at = Instant::now();
    assert!(
        cluster.wait_synced(0, Duration::from_secs(30)),
        "the others go on without it"
    );
    eprintln!(
        "galera: two-node primary component after kill in {:?}",
        at.elapsed()
    );
    assert!(
        cluster
            .sql(2, "INSERT INTO test.t (v) VALUES ('two')")
            .is_some()
    );
    let at = Instant::now();
    assert!(cluster.restart(1), "the killed node rejoins, Synced");
    eprintln!("galera: rejoin in {:?}", at.elapsed());
    assert_eq!(
        cluster.sql(1, read).as_deref(),
        Some("one,two"),
        "it has what it missed"
    );
    assert_eq!(
        cluster.status(0, "wsrep_cluster_size").as_deref(),
        Some("3")
    );
}

#[test]
#[cfg_attr(
    not(books_test_pg_cluster),
    ignore = "PostgreSQL's server tools are not installed"
)]
fn cluster_promotes_a_replica_with_or_without_what_it_missed() {
    let mut cluster = started(Cluster::start(), "a private PostgreSQL cluster");
    assert!(cluster.add_replica(Duration::ZERO).is_some());
    assert!(cluster.add_replica(Duration::ZERO).is_some());
    let primary = cluster.primary();
    assert!(
        primary
            .sql("CREATE TABLE t (v text); INSERT INTO t VALUES ('one')")
            .is_some()
    );
    let lsn = primary.sql("SELECT pg_current_wal_lsn()").unwrap();
    let caught_up = format!("SELECT pg_last_wal_replay_lsn() >= '{lsn}'");
    for replica in cluster.replicas() {
        assert!(eventually(
            || replica.sql(&caught_up),
            "t",
            Duration::from_secs(10)
        ));
    }
    let (paused, detached) = (&cluster.replicas()[0], &cluster.replicas()[1]);
    assert!(detached.detach());
    assert!(paused.pause_replay());
    assert!(primary.sql("INSERT INTO t VALUES ('two')").is_some());
    let lsn = primary.sql("SELECT pg_current_wal_lsn()").unwrap();
    let received = format!("SELECT pg_last_wal_receive_lsn() >= '{lsn}'");
    assert!(eventually(
        || paused.sql(&received),
        "t",
        Duration::from_secs(10)
    ));
    let read = "SELECT string_agg(v, ',' ORDER BY v) FROM t";
    assert_eq!(
        paused.sql(read).as_deref(),
        Some("one"),
        "paused: not replayed yet"
    );
    assert!(primary.crash());
    assert!(cluster.promote(0) && cluster.promote(1));
    let (paused, detached) = (&cluster.replicas()[0], &cluster.replicas()[1]);
    assert_eq!(
        paused.sql(read).as_deref(),
        Some("one,two"),
        "a promotion replays all it got"
    );
    assert_eq!(
        detached.sql(read).as_deref(),
        Some("one"),
        "what it never got is lost"
    );
    assert!(detached.sql("INSERT INTO t VALUES ('three')").is_some());
}

#[test]
#[cfg_attr(
    not(books_test_mariadb_servers),
    ignore = "MariaDB's server tools are not installed"
)]
fn mariadb_promotes_a_replica_without_what_it_missed() {
    let mut primary = started(MariaDb::primary(), "a private MariaDB primary");
    let replica = started(
        MariaDb::replica_of(&primary, Duration::ZERO),
        "a MariaDB replica",
    );
    let write =
        "CREATE DATABASE test; CREATE TABLE test.t (v TEXT); INSERT INTO test.t VALUES ('one')";
    assert!(primary.sql(write));
    let read = "SELECT GROUP_CONCAT(v ORDER BY v) FROM test.t";
    assert!(eventually(
        || replica.query(read),
        "one",
        Duration::from_secs(10)
    ));
    assert!(replica.stop_replication());
    assert!(primary.sql("INSERT INTO test.t VALUES ('two')"));
    assert!(primary.down());
    assert!(replica.promote());
    assert_eq!(
        replica.query(read).as_deref(),
        Some("one"),
        "what it never got is lost"
    );
    assert!(replica.sql("INSERT INTO test.t VALUES ('three')"));
    assert_eq!(replica.query(read).as_deref(), Some("one,three"));
}
