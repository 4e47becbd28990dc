//! One statement as a store sends it: its dialect's placeholders, its arguments bound in
//! the order they take them, or written into its text where it cannot be prepared.

// Each store uses its own part of what is here: with its feature off, that part is unused.
#![cfg_attr(
    not(all(feature = "sqlite", feature = "postgres", feature = "mysql")),
    allow(dead_code)
)]

use std::borrow::Cow;
use std::fmt::Write as _;

use chrono::{DateTime, Utc};
use sqlx::{AssertSqlSafe, SqlSafeStr, SqlStr};

/// A value bound to a statement.
#[derive(Debug, Clone, Copy)]
pub enum Arg<'a> {
    Int(i64),
    Int4(i32),
    Text(&'a str),
    Name(Option<&'a str>),
    Time(DateTime<Utc>),
    Blob(&'a [u8]),
}

/// The SQL a database speaks, as this crate writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Dialect {
    /// SQLite (3.35 or later: `RETURNING`).
    Sqlite,
    /// PostgreSQL (13 or later).
    Postgres,
    /// MariaDB (10.6 or later; `?` placeholders, taken in order; `CAST(… AS SIGNED)`).
    MySql,
}

/// How many first pages of a list PostgreSQL runs with their limit and offset written
/// in ([`Statement::paged`]).
const PAGES_WRITTEN_IN: u64 = 5;

/// One statement as a store sends it.
#[derive(Debug, Clone)]
pub struct Statement {
    /// The text with `$N` placeholders (a read's arguments are written into it where a
    /// statement cannot be prepared: through a pooler, on a replica).
    pub(crate) numbered: SqlStr,
    /// The text as prepared (`?` placeholders on MariaDB).
    pub(crate) text: SqlStr,
    /// Which argument each placeholder binds, in order (0-based).
    binds: Box<[usize]>,
    dialect: Dialect,
    /// Whether the connection keeps it prepared (a named statement, which PostgreSQL may
    /// run with a plan made for any arguments).
    persistent: bool,
}

impl Statement {
    pub(crate) fn new(template: &str, schema: &str, dialect: Dialect) -> Self {
        let int8 = if dialect == Dialect::MySql {
            "SIGNED"
        } else {
            "BIGINT"
        };
        let numbered = template.replace("{s}", schema).replace("{int8}", int8);
        let (text, binds) = match dialect {
            Dialect::MySql => positional(&numbered),
            _ => {
                let count = numbers(&numbered).max().unwrap_or(0);
                (numbered.clone(), (0..count).collect())
            }
        };
        // Safe: `schema` is empty or an identifier checked by the store.
        Self {
            numbered: AssertSqlSafe(numbered).into_sql_str(),
            text: AssertSqlSafe(text).into_sql_str(),
            binds: binds.into(),
            dialect,
            persistent: true,
        }
    }

    /// This statement planned anew for its arguments each time it runs, never kept
    /// prepared: for one whose best plan depends on them (PostgreSQL's plan for a
    /// `LIKE $1` without its pattern walks every book).
    pub(crate) fn planned_per_run(self) -> Self {
        Self {
            persistent: false,
            ..self
        }
    }

    /// This statement for the page at `offset`, `limit` books long (its `$1` and `$2`).
    /// On PostgreSQL, for a statement kept prepared and an offset below
    /// [`PAGES_WRITTEN_IN`] pages, they are written into its `LIMIT $1 OFFSET $2`, so
    /// that PostgreSQL may keep one plan for it: with them bound it plans the page anew at
    /// every run, which took about half its time (pgbench at 1M books, the plain page 1:
    /// 2,500 runs a second, 5,400 written in; a year's, 2,200 and 4,400 where PostgreSQL
    /// keeps the plan, which it does only where that costs no more than one made for the
    /// value). Later pages stay bound, so that a client walking every page does not
    /// prepare a statement per page. Otherwise, the statement as it is.
    pub(crate) fn paged(&self, limit: u32, offset: u64) -> Cow<'_, Self> {
        let first = offset < u64::from(limit).saturating_mul(PAGES_WRITTEN_IN);
        if self.dialect != Dialect::Postgres || !self.persistent || !first {
            return Cow::Borrowed(self);
        }
        let page = format!("LIMIT {limit} OFFSET {offset}");
        // Safe: two integers written in.
        let text = AssertSqlSafe(self.numbered.as_str().replace("LIMIT $1 OFFSET $2", &page))
            .into_sql_str();
        Cow::Owned(Self {
            numbered: text.clone(),
            text,
            // PostgreSQL takes `$1` and `$2` still, declared and unused.
            binds: self.binds.clone(),
            dialect: self.dialect,
            persistent: self.persistent,
        })
    }

    /// The text with its arguments written in ([`inline`]), for where a statement cannot
    /// be prepared (one message through a pooler, or to a replica).
    pub(crate) fn inline(&self, args: &[Arg<'_>]) -> Result<String, sqlx::Error> {
        inline(self.numbered.as_str(), args, self.dialect)
    }

    /// The statement with its arguments bound: each placeholder's from `args` (which may
    /// hold more than it takes).
    pub(crate) fn query<'a, DB>(
        &self,
        args: &[Arg<'a>],
    ) -> sqlx::query::Query<'a, DB, DB::Arguments>
    where
        DB: sqlx::Database + sqlx::database::HasStatementCache,
        i64: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
        i32: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
        &'a str: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
        Option<&'a str>: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
        chrono::DateTime<chrono::Utc>: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
        &'a [u8]: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    {
        let mut query = sqlx::query(self.text.clone()).persistent(self.persistent);
        for arg in self.binds.iter().filter_map(|&at| args.get(at)) {
            query = match *arg {
                Arg::Int(value) => query.bind(value),
                Arg::Int4(value) => query.bind(value),
                Arg::Text(value) => query.bind(value),
                Arg::Name(value) => query.bind(value),
                Arg::Time(value) => query.bind(value),
                Arg::Blob(value) => query.bind(value),
            };
        }
        query
    }
}

/// Each `$` of `text`: where it is, where its digits end, and its number (`None` for a
/// `$` without digits).
fn placeholders(text: &str) -> impl Iterator<Item = (usize, usize, Option<usize>)> + '_ {
    text.match_indices('$').map(|(at, _)| {
        let digits = text[at + 1..]
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len() - at - 1);
        let end = at + 1 + digits;
        (at, end, text[at + 1..end].parse().ok())
    })
}

/// The numbers of `text`'s `$N` placeholders, in order.
fn numbers(text: &str) -> impl Iterator<Item = usize> + '_ {
    placeholders(text).filter_map(|(_, _, number)| number)
}

/// `text` with each `$N` as `?`, and which argument each `?` takes.
fn positional(text: &str) -> (String, Vec<usize>) {
    let mut out = String::with_capacity(text.len());
    let mut binds = Vec::new();
    let mut from = 0;
    for (at, end, number) in placeholders(text) {
        out.push_str(&text[from..at]);
        match number {
            Some(number) if number > 0 => {
                out.push('?');
                binds.push(number - 1);
            }
            _ => out.push_str(&text[at..end]),
        }
        from = end;
    }
    out.push_str(&text[from..]);
    (out, binds)
}

/// `sql` with each `$N` replaced by the `N`th argument: integers as decimal literals,
/// text as hexadecimal digits turned back into UTF-8 text by the database
/// (`convert_from(decode('…', 'hex'), 'UTF8')` on PostgreSQL, `_utf8mb4 X'…'` on
/// MariaDB), so nothing a client sends reaches the text but as digits, a sign and hex.
/// Any other argument is an error.
pub(crate) fn inline(sql: &str, args: &[Arg<'_>], dialect: Dialect) -> Result<String, sqlx::Error> {
    let mut text = String::with_capacity(sql.len() + 16 * args.len());
    let mut from = 0;
    for (at, end, number) in placeholders(sql) {
        text.push_str(&sql[from..at]);
        // A `$` without a number is the text's own (MariaDB's JSON paths).
        let Some(number) = number else {
            text.push('$');
            from = end;
            continue;
        };
        match number.checked_sub(1).and_then(|index| args.get(index)) {
            Some(Arg::Int(value)) => write!(text, "{value}").expect("writing to a String"),
            Some(Arg::Int4(value)) => write!(text, "{value}").expect("writing to a String"),
            Some(Arg::Text(value)) if dialect != Dialect::Sqlite => {
                let hex: String = value.bytes().map(|b| format!("{b:02x}")).collect();
                match dialect {
                    Dialect::MySql => write!(text, "_utf8mb4 X'{hex}'"),
                    _ => write!(text, "convert_from(decode('{hex}', 'hex'), 'UTF8')"),
                }
                .expect("writing to a String");
            }
            _ => {
                return Err(sqlx::Error::Protocol(format!(
                    "argument ${number} of {sql:?} cannot be written in"
                )));
            }
        }
        from = end;
    }
    text.push_str(&sql[from..]);
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_placeholders_become_positional_ones() {
        let (text, binds) = positional("a = $2 AND b = $1 AND c = $2 LIMIT $10");
        assert_eq!(text, "a = ? AND b = ? AND c = ? LIMIT ?");
        assert_eq!(binds, [1, 0, 1, 9]);
        assert_eq!(positional("cost $ 5").0, "cost $ 5");
    }

    #[test]
    fn numbered_dialects_bind_every_argument_up_to_the_greatest_number() {
        let statement = Statement::new("x = $3 OR y = $1 OR z = $3", "", Dialect::Postgres);
        assert_eq!(&*statement.binds, [0, 1, 2]);
        assert_eq!(statement.text.as_str(), "x = $3 OR y = $1 OR z = $3");
        let statement = Statement::new("x = $3 OR y = $1", "s.", Dialect::MySql);
        assert_eq!(&*statement.binds, [2, 0]);
        assert_eq!(statement.text.as_str(), "x = ? OR y = ?");
        assert_eq!(statement.numbered.as_str(), "x = $3 OR y = $1");
    }

    #[test]
    fn postgres_first_pages_have_their_limit_and_offset_written_in() {
        let template = "SELECT id FROM t WHERE y = $3 ORDER BY id LIMIT $1 OFFSET $2";
        let page = |dialect, limit, offset| {
            let statement = Statement::new(template, "", dialect);
            let paged = statement.paged(limit, offset);
            (paged.text.as_str().to_owned(), paged.binds.to_vec())
        };
        let written = "SELECT id FROM t WHERE y = $3 ORDER BY id LIMIT 20 OFFSET 80";
        assert_eq!(
            page(Dialect::Postgres, 20, 80),
            (written.to_owned(), vec![0, 1, 2])
        );
        let statement = Statement::new(template, "", Dialect::Postgres);
        let inlined = statement
            .paged(20, 80)
            .inline(&[Arg::Int(0), Arg::Int(0), Arg::Int(7)]);
        assert_eq!(
            inlined.unwrap(),
            "SELECT id FROM t WHERE y = 7 ORDER BY id LIMIT 20 OFFSET 80",
            "through a pooler or to a replica"
        );
        assert_eq!(page(Dialect::Postgres, 20, 100).0, template, "page 6 bound");
        assert_eq!(page(Dialect::Sqlite, 20, 0).0, template);
        assert_eq!(
            page(Dialect::MySql, 20, 0).0,
            "SELECT id FROM t WHERE y = ? ORDER BY id LIMIT ? OFFSET ?"
        );
        let per_run = Statement::new(template, "", Dialect::Postgres).planned_per_run();
        assert_eq!(
            per_run.paged(20, 0).text.as_str(),
            template,
            "planned anyway"
        );
    }

    #[test]
    fn integers_are_written_in_by_number() {
        let args: Vec<Arg> = (1..=11).map(|n| Arg::Int(n * 100)).collect();
        assert_eq!(
            inline(
                "LIMIT $1 OFFSET $2 WHERE x > $11 - $2",
                &args,
                Dialect::Postgres
            )
            .unwrap(),
            "LIMIT 100 OFFSET 200 WHERE x > 1100 - 200"
        );
        assert_eq!(
            inline("id = $1", &[Arg::Int(-7)], Dialect::Postgres).unwrap(),
            "id = -7",
            "a sign and digits only"
        );
        assert_eq!(
            inline("SELECT 1", &[], Dialect::Postgres).unwrap(),
            "SELECT 1"
        );
    }

    #[test]
    fn nothing_but_integers_is_written_in() {
        let pg = Dialect::Postgres;
        assert!(inline("id = $2", &[Arg::Int(1)], pg).is_err(), "missing");
        assert!(inline("id = $0", &[Arg::Int(1)], pg).is_err(), "no $0");
        // A `$` without a number is the text's own.
        let path = "JSON_TABLE($1, '$[*]' COLUMNS (id BIGINT PATH '$'))";
        assert_eq!(
            inline(path, &[Arg::Text("[1]")], Dialect::MySql).unwrap(),
            "JSON_TABLE(_utf8mb4 X'5b315d', '$[*]' COLUMNS (id BIGINT PATH '$'))"
        );
        assert!(inline("at = $1", &[Arg::Time(chrono::DateTime::UNIX_EPOCH)], pg).is_err());
    }

    #[test]
    fn text_is_written_in_as_hex_digits() {
        let hostile = [Arg::Text("'; DROP TABLE books; --é")];
        let pg = inline("title = $1", &hostile, Dialect::Postgres).unwrap();
        assert_eq!(
            pg,
            "title = convert_from(decode('273b2044524f50205441424c4520626f6f6b733b202d2dc3a9', \
             'hex'), 'UTF8')"
        );
        let mysql = inline("title = $1", &hostile, Dialect::MySql).unwrap();
        assert!(mysql.starts_with("title = _utf8mb4 X'273b"), "{mysql}");
        assert!(inline("t = $1", &hostile, Dialect::Sqlite).is_err());
    }
}
