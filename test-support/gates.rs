//! Tells the tests what they were given, so that a case whose database or tool is missing
//! shows as ignored (with the reason) in the test summary rather than as passed. Under
//! `CI=true` every case runs, and fails without what it needs.
//!
//! | cfg | when |
//! |---|---|
//! | `books_test_postgres` | `BOOKS_TEST_POSTGRES_URL` is set |
//! | `books_test_pg_cluster` | PostgreSQL's server tools are installed (`pg_config --bindir` has `initdb`) |
//! | `books_test_pgbouncer` | PgBouncer is installed |
//! | `books_test_mysql` | `BOOKS_TEST_MYSQL_URL` is set |
//! | `books_test_mariadb_servers` | MariaDB's server tools are installed (`mariadbd`, `mariadb-install-db`) |
//! | `books_test_pg_auto_failover` | pg_auto_failover is installed (`pg_autoctl`) |
//! | `books_test_galera` | the Galera 4 provider is installed (`/usr/lib/galera/libgalera_smm.so`) |
//! | `books_test_chromium` | Chromium and its WebDriver are installed (`chromium`, `chromedriver`) |
//! | `books_test_previous_release` | `BOOKS_TEST_PREVIOUS_BIN` names the previous release's server (`scripts/previous-release`) |
//! | `books_test_nftables` | nftables is installed (`nft`; the partition tests cut loopback traffic with it, as root) |
//!
//! The build scripts of `books-test-support` and of the server's crate run it: neither is
//! published, so nothing here reaches a host's build.

use std::path::Path;
use std::process::Command;

/// Prints the cfgs of what the tests were given.
pub fn main() {
    println!("cargo::rerun-if-env-changed=CI");
    let ci = std::env::var("CI").is_ok_and(|ci| ci == "true");
    let gates: [(&str, &dyn Fn() -> bool); 10] = [
        ("books_test_postgres", &|| given("BOOKS_TEST_POSTGRES_URL")),
        ("books_test_pg_cluster", &pg_cluster),
        ("books_test_pgbouncer", &|| {
            installed("pgbouncer") || exists(Path::new("/usr/sbin/pgbouncer"))
        }),
        ("books_test_mysql", &|| given("BOOKS_TEST_MYSQL_URL")),
        ("books_test_mariadb_servers", &|| {
            (installed("mariadbd") || exists(Path::new("/usr/sbin/mariadbd")))
                && installed("mariadb-install-db")
        }),
        ("books_test_pg_auto_failover", &|| installed("pg_autoctl")),
        ("books_test_galera", &|| {
            exists(Path::new("/usr/lib/galera/libgalera_smm.so"))
                || exists(Path::new("/usr/lib/galera-4/libgalera_smm.so"))
        }),
        ("books_test_chromium", &|| {
            installed("chromium") && installed("chromedriver")
        }),
        ("books_test_previous_release", &|| {
            given("BOOKS_TEST_PREVIOUS_BIN")
        }),
        ("books_test_nftables", &|| {
            installed("nft") || exists(Path::new("/usr/sbin/nft"))
        }),
    ];
    for (cfg, here) in gates {
        println!("cargo::rustc-check-cfg=cfg({cfg})");
        if ci || here() {
            println!("cargo::rustc-cfg={cfg}");
        }
    }
}

/// Whether the environment variable `name` is set (and watched).
fn given(name: &str) -> bool {
    println!("cargo::rerun-if-env-changed={name}");
    std::env::var_os(name).is_some()
}

/// Whether `path` exists; the probe runs again if it goes. A missing path is not watched:
/// cargo would run this script, and rebuild the crate, on every build (a tool installed
/// later shows after `touch test-support/build.rs`, or a change of `PATH`).
fn exists(path: &Path) -> bool {
    let found = path.exists();
    if found {
        println!("cargo::rerun-if-changed={}", path.display());
    }
    found
}

/// Whether `program` is on the `PATH`.
fn installed(program: &str) -> bool {
    println!("cargo::rerun-if-env-changed=PATH");
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| exists(&dir.join(program))))
}

/// Whether `initdb` is where `pg_config --bindir` says PostgreSQL's tools are.
fn pg_cluster() -> bool {
    Command::new("pg_config")
        .arg("--bindir")
        .output()
        .is_ok_and(|out| {
            exists(&Path::new(String::from_utf8_lossy(&out.stdout).trim()).join("initdb"))
        })
}
