//! The versions tier over a host's own tables ([`VersionTriggers`]): a table of counters
//! and the triggers that move it with every committed write, whoever makes it, in the
//! same way as this crate's stores.
//!
//! One module over 400 lines: one public type and its statements for each of the three
//! databases, which share the counter table, the step and the history and differ only in
//! how a trigger is written; the three writers read side by side.

use std::marker::PhantomData;
use std::sync::Arc;

use books_core::store::{BooksTally, Version};

use crate::Error;
use crate::backend::Backend;
use crate::lineage::{Lineage, POSITION_SQL, Position};
use crate::rows::StoreRow;
use crate::statement::{Arg, Dialect, Statement};

/// A version for a store over a host's own tables, kept by the database: a counter table
/// of 16 slots and triggers on the host's tables that move it in the writing transaction,
/// whoever writes (the host's other programs, a migration, an import). Each write counts
/// in one of the slots — on PostgreSQL one that no open transaction holds (so writers
/// wait for each other only when 16 transactions that wrote are open at once), on
/// MariaDB its connection's (two connections meet on one 1 time in 16), while SQLite has
/// one writer at a time — and by a random step, so that two histories (a database
/// restored from a backup, say) are unlikely to reach the same count.
///
/// ```no_run
/// # #[cfg(feature = "postgres")]
/// # async fn run(pool: books_sqlx::sqlx::PgPool) -> Result<(), books_sqlx::Error> {
/// use books_sqlx::VersionTriggers;
/// use books_sqlx::sqlx::Postgres;
/// // `press.titles` holds the books, `press.people` their authors.
/// let version = VersionTriggers::<Postgres>::new("press.api_version", "press.titles")?
///     .also("press.people")?
///     .with_tally("title_code")?;
/// version.install(&pool).await?; // once, beside the host's migrations (takes the tables' locks)
/// let mut conn = pool.acquire().await?;
/// let now = version.version(&mut conn).await?; // Versions::version
/// // Reads select `version.count_sql()` in the same statement as their data.
/// # let _ = now; Ok(()) }
/// ```
///
/// With [`with_tally`](Self::with_tally), the counters also keep the books' total and a
/// `changes` count that inserts of books leave alone, which
/// [`tallied_version`](Self::tallied_version) reads for
/// [`VersionTally`](books_core::store::VersionTally): cached pages then survive creates.
///
/// Use one value (and its clones) per database: it remembers the history it last told
/// (PostgreSQL's, across a promotion that lost nothing), which another database's
/// versions would mix with.
#[derive(Debug)]
pub struct VersionTriggers<DB: Backend> {
    database: PhantomData<fn() -> DB>,
    dialect: Dialect,
    counter: String,
    books: String,
    others: Vec<String>,
    /// The books' id column, when the tally is kept.
    id: Option<String>,
    /// The history told across lossless promotions, shared by clones.
    lineage: Arc<Lineage>,
}

impl<DB: Backend> Clone for VersionTriggers<DB> {
    fn clone(&self) -> Self {
        Self {
            database: PhantomData,
            dialect: self.dialect,
            counter: self.counter.clone(),
            books: self.books.clone(),
            others: self.others.clone(),
            id: self.id.clone(),
            lineage: self.lineage.clone(),
        }
    }
}

impl<DB: Backend> VersionTriggers<DB> {
    /// Counters in table `counter` (created by [`install`](Self::install)), moved by
    /// writes to `books`. Names are identifiers of `a-z`, `0-9` and `_`, optionally after
    /// a schema (PostgreSQL) or database (MariaDB) and a dot.
    pub fn new(counter: &str, books: &str) -> Result<Self, Error> {
        Ok(Self {
            database: PhantomData,
            dialect: DB::DIALECT,
            counter: name(counter)?,
            books: name(books)?,
            others: Vec::new(),
            id: None,
            lineage: Arc::default(),
        })
    }

    /// Writes to `table` move the version too (the authors: their names show in books).
    pub fn also(mut self, table: &str) -> Result<Self, Error> {
        self.others.push(name(table)?);
        Ok(self)
    }

    /// The counters keep the books' total and `changes` too; `id` is the books' id column.
    pub fn with_tally(mut self, id: &str) -> Result<Self, Error> {
        self.id = Some(name(id)?);
        Ok(self)
    }

    /// Whether the counters keep the tally ([`with_tally`](Self::with_tally)).
    pub fn tallies(&self) -> bool {
        self.id.is_some()
    }

    /// The statements [`install`](Self::install) runs, for a host that migrates with
    /// tools of its own. Each may be run again.
    pub fn statements(&self) -> Vec<String> {
        match self.dialect {
            Dialect::Postgres => self.postgres(),
            Dialect::MySql => self.mysql(),
            Dialect::Sqlite => self.sqlite(),
        }
    }

    /// Creates the counters (counting the books already there) and the triggers, if not
    /// there yet, on one of `pool`'s connections.
    pub async fn install(&self, pool: &sqlx::Pool<DB>) -> Result<(), Error> {
        let mut conn = pool.acquire().await?;
        for statement in self.statements() {
            DB::text_rows(&mut conn, statement).await?;
        }
        Ok(())
    }

    /// The version's count as a scalar subquery, to select in the same statement as a
    /// read's data (rule 4 of [`Versions`](books_core::store::Versions)).
    pub fn count_sql(&self) -> String {
        let int8 = self.int8();
        format!(
            "(SELECT CAST(SUM(version) AS {int8}) FROM {})",
            self.counter
        )
    }

    /// The version now, read on `conn`: its count, and the history the database tells
    /// (as this crate's stores read it: on PostgreSQL, kept across a promotion of a
    /// standby that replayed every position this value's reads saw).
    pub async fn version(&self, conn: &mut DB::Connection) -> Result<Version, Error> {
        let text = format!(
            "SELECT {}, {}{}",
            self.count_sql(),
            self.history_sql(),
            self.position_sql()
        );
        let covered = self.lineage.reads();
        let rows = DB::text_rows(conn, text).await?;
        let row = rows.first().ok_or(sqlx::Error::RowNotFound)?;
        let count = row.int(0)? as u64;
        Ok(Version::new(self.told(row, 1, count, covered)?, count))
    }

    /// [`VersionTally::tallied_version`](books_core::store::VersionTally::tallied_version)
    /// on `conn`: the version and, in the same snapshot, the books' tally counting the
    /// books above `above`. Needs [`with_tally`](Self::with_tally).
    pub async fn tallied_version(
        &self,
        conn: &mut DB::Connection,
        above: i64,
    ) -> Result<(Version, BooksTally), Error> {
        let id = self
            .id
            .as_deref()
            .ok_or(Error::InvalidSchema("the tally needs with_tally".into()))?;
        let int8 = self.int8();
        let text = format!(
            "SELECT CAST(SUM(version) AS {int8}), CAST(SUM(changes) AS {int8}), \
             CAST(SUM(n) AS {int8}), (SELECT COALESCE(MAX({id}), 0) FROM {books}), \
             (SELECT COUNT(*) FROM {books} WHERE {id} > $1), {history}{position} FROM {counter}",
            books = self.books,
            counter = self.counter,
            history = self.history_sql(),
            position = self.position_sql(),
        );
        let statement = Statement::new(&text, "", self.dialect);
        let covered = self.lineage.reads();
        let rows = DB::rows(conn, &statement, &[Arg::Int(above)], false).await?;
        let row = rows.first().ok_or(sqlx::Error::RowNotFound)?;
        let count = |n: i64| u64::try_from(n).unwrap_or(0);
        let tally = BooksTally {
            changes: count(row.int(1)?),
            total: count(row.int(2)?),
            max_id: row.int(3)?,
            above,
            count_above: count(row.int(4)?),
        };
        let at = count(row.int(0)?);
        Ok((Version::new(self.told(row, 5, at, covered)?, at), tally))
    }

    fn int8(&self) -> &'static str {
        match self.dialect {
            Dialect::MySql => "SIGNED",
            _ => "BIGINT",
        }
    }

    /// The history told for the one read in `row`'s column `history` at `count`, by a
    /// statement sent when the data reads not covered were `covered` (PostgreSQL: with the
    /// position after it, see [`Lineage`]).
    fn told<R: StoreRow>(
        &self,
        row: &R,
        history: usize,
        count: u64,
        covered: u64,
    ) -> Result<u64, sqlx::Error> {
        let at = match self.dialect {
            Dialect::Postgres => Some(Position::read(row, history + 1)?),
            _ => None,
        };
        Ok(self
            .lineage
            .tell(row.int(history)? as u64, at, count, covered))
    }

    /// The columns of a version read's [`Position`] after a comma, on PostgreSQL.
    fn position_sql(&self) -> String {
        match self.dialect {
            Dialect::Postgres => {
                format!(", {}", POSITION_SQL.join(", ")).replace("{s}book_count", &self.counter)
            }
            _ => String::new(),
        }
    }

    /// The database's history, as the stores' version check reads it.
    fn history_sql(&self) -> String {
        let database = crate::check::database_literal(
            self.counter.split_once('.').map(|(database, _)| database),
        );
        crate::check::history_sql(self.dialect)
            .replace("{s}book_count", &self.counter)
            .replace("{db}", &database)
            .replace("'book_count'", &format!("'{}'", last(&self.counter)))
    }

    /// The random step a write moves the version by, at least 1.
    fn step(&self) -> &'static str {
        match self.dialect {
            Dialect::Postgres => "(1 + floor(random() * 1048576)::bigint)",
            Dialect::MySql => "(1 + FLOOR(RAND() * 1048576))",
            Dialect::Sqlite => "(1 + (random() & 1048575))",
        }
    }

    /// The counters, counting the books there are when first made.
    fn counter_table(&self, create: &str, seed: &str) -> [String; 2] {
        let (counter, books) = (&self.counter, &self.books);
        [
            format!(
                "{create} {counter} (id INTEGER NOT NULL PRIMARY KEY, n BIGINT NOT NULL DEFAULT 0, \
                 version BIGINT NOT NULL DEFAULT 0, changes BIGINT NOT NULL DEFAULT 0)"
            ),
            format!(
                "{seed} INTO {counter} (id, n) SELECT s.id, CASE WHEN s.id = 1 THEN \
                 (SELECT COUNT(*) FROM {books}) ELSE 0 END FROM ({}) s",
                (1..=16)
                    .map(|id| format!("SELECT {id} AS id"))
                    .collect::<Vec<_>>()
                    .join(" UNION ALL ")
            ),
        ]
    }

    /// PostgreSQL: statement-level triggers (one counter update per statement, however
    /// many rows), each in a slot no open transaction holds, drawn at random once per
    /// statement (`SKIP LOCKED`; a slot at random if all 16 are held).
    fn postgres(&self) -> Vec<String> {
        let (counter, books, step) = (&self.counter, &self.books, self.step());
        let [create, mut seed] = self.counter_table("CREATE TABLE IF NOT EXISTS", "INSERT");
        seed.push_str(" ON CONFLICT (id) DO NOTHING");
        let function = |suffix: &str, body: &str| {
            format!(
                "CREATE OR REPLACE FUNCTION {counter}_{suffix}() RETURNS trigger \
                 LANGUAGE plpgsql AS $$ DECLARE slot INTEGER; BEGIN \
                 SELECT id INTO slot FROM {counter} ORDER BY random() \
                 FOR UPDATE SKIP LOCKED LIMIT 1; \
                 slot := COALESCE(slot, 1 + floor(random() * 16)::int); \
                 {body}; RETURN NULL; END $$"
            )
        };
        let trigger = |table: &str, suffix: &str, when: &str, function: &str| {
            let name = format!("{}_{}_{suffix}", last(counter), last(table));
            format!("CREATE OR REPLACE TRIGGER {name} AFTER {when} ON {table} {function}")
        };
        let mut sql = vec![
            create,
            seed,
            function(
                "inserted",
                &format!(
                    "UPDATE {counter} SET n = n + (SELECT COUNT(*) FROM new_rows), \
                     version = version + {step} WHERE id = slot"
                ),
            ),
            function(
                "deleted",
                &format!(
                    "UPDATE {counter} SET n = n - (SELECT COUNT(*) FROM old_rows), \
                     version = version + {step}, changes = changes + {step} WHERE id = slot"
                ),
            ),
            function(
                "changed",
                &format!(
                    "UPDATE {counter} SET version = version + {step}, \
                     changes = changes + {step} WHERE id = slot"
                ),
            ),
            function(
                "emptied",
                &format!(
                    "UPDATE {counter} SET n = 0, version = version + {step}, \
                     changes = changes + {step}"
                ),
            ),
        ];
        let each = "FOR EACH STATEMENT EXECUTE FUNCTION";
        sql.push(trigger(
            books,
            "insert",
            "INSERT",
            &format!("REFERENCING NEW TABLE AS new_rows {each} {counter}_inserted()"),
        ));
        sql.push(trigger(
            books,
            "delete",
            "DELETE",
            &format!("REFERENCING OLD TABLE AS old_rows {each} {counter}_deleted()"),
        ));
        sql.push(trigger(
            books,
            "update",
            "UPDATE",
            &format!("{each} {counter}_changed()"),
        ));
        sql.push(trigger(
            books,
            "truncate",
            "TRUNCATE",
            &format!("{each} {counter}_emptied()"),
        ));
        for table in &self.others {
            let when = "INSERT OR UPDATE OR DELETE OR TRUNCATE";
            sql.push(trigger(
                table,
                "write",
                when,
                &format!("{each} {counter}_changed()"),
            ));
        }
        sql
    }

    /// MariaDB: row-level triggers, each in the writing connection's slot.
    fn mysql(&self) -> Vec<String> {
        let (counter, step) = (&self.counter, self.step());
        let [create, seed] = self.counter_table("CREATE TABLE IF NOT EXISTS", "INSERT IGNORE");
        let slot = "id = 1 + (CONNECTION_ID() & 15)";
        self.row_triggers(
            vec![create, seed],
            "CREATE TRIGGER IF NOT EXISTS",
            |moves| {
                format!("UPDATE {counter} SET {moves}, version = version + {step} WHERE {slot}")
            },
        )
    }

    /// SQLite: row-level triggers in one slot (one writer at a time).
    fn sqlite(&self) -> Vec<String> {
        let (counter, step) = (&self.counter, self.step());
        let [create, seed] = self.counter_table("CREATE TABLE IF NOT EXISTS", "INSERT OR IGNORE");
        self.row_triggers(vec![create, seed], "CREATE TRIGGER IF NOT EXISTS", |moves| {
            format!("BEGIN UPDATE {counter} SET {moves}, version = version + {step} WHERE id = 1; END")
        })
    }

    /// Row-level triggers after each write to the books and the other tables, their
    /// bodies from `update` given what else moves.
    fn row_triggers(
        &self,
        mut sql: Vec<String>,
        create: &str,
        update: impl Fn(&str) -> String,
    ) -> Vec<String> {
        let step = self.step();
        let changes = format!("changes = changes + {step}");
        let mut trigger = |table: &str, when: &str, moves: &str| {
            let name = format!(
                "{}_{}_{}",
                last(&self.counter),
                last(table),
                when.to_lowercase()
            );
            let schema = table
                .rsplit_once('.')
                .map_or(String::new(), |(s, _)| format!("{s}."));
            sql.push(format!(
                "{create} {schema}{name} AFTER {when} ON {table} FOR EACH ROW {}",
                update(moves)
            ));
        };
        trigger(&self.books, "INSERT", "n = n + 1");
        trigger(&self.books, "DELETE", &format!("n = n - 1, {changes}"));
        trigger(&self.books, "UPDATE", &format!("n = n, {changes}"));
        for table in &self.others {
            for when in ["INSERT", "UPDATE", "DELETE"] {
                trigger(table, when, &format!("n = n, {changes}"));
            }
        }
        sql
    }
}

/// `text` if it is an identifier the helper writes into SQL as is, optionally after a
/// schema and a dot.
pub(crate) fn name(text: &str) -> Result<String, Error> {
    let identifier = |part: &str| {
        (1..=63).contains(&part.len())
            && !part.starts_with(|c: char| c.is_ascii_digit())
            && part
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    };
    let valid = match text.split_once('.') {
        Some((schema, table)) => identifier(schema) && identifier(table),
        None => identifier(text),
    };
    if valid {
        Ok(text.to_owned())
    } else {
        Err(Error::InvalidSchema(text.to_owned()))
    }
}

/// A name without its schema.
pub(crate) fn last(name: &str) -> &str {
    name.rsplit_once('.').map_or(name, |(_, last)| last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "sqlite")]
    #[test]
    fn names_are_identifiers_only() {
        for bad in ["Titles", "titles; DROP", "1titles", "a.b.c", "", "ti-tles"] {
            assert!(
                VersionTriggers::<sqlx::Sqlite>::new("v", bad).is_err(),
                "{bad}"
            );
        }
        assert!(VersionTriggers::<sqlx::Sqlite>::new("press.v", "press.titles").is_ok());
    }

    #[cfg(feature = "mysql")]
    #[test]
    fn every_write_to_every_table_is_watched() {
        let triggers = VersionTriggers::<sqlx::MySql>::new("press.v", "press.titles")
            .unwrap()
            .also("press.people")
            .unwrap();
        let sql = triggers.statements().join("\n");
        for (table, when) in [
            ("press.titles", "INSERT"),
            ("press.titles", "DELETE"),
            ("press.titles", "UPDATE"),
            ("press.people", "INSERT"),
            ("press.people", "UPDATE"),
            ("press.people", "DELETE"),
        ] {
            assert!(
                sql.contains(&format!("AFTER {when} ON {table} ")),
                "{when} {table}"
            );
        }
        assert!(
            sql.contains("CONNECTION_ID() & 15"),
            "a slot per connection"
        );
    }
}
