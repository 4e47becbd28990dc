//! The comparison server: the books API's reads and creates written by hand with axum and
//! sqlx the way a competent developer would (a `COUNT(*)` and a page query per list, one
//! statement per create, no cache, no triggers, its own tables). Used by
//! `scripts/load.py --versus`; not an example to copy.
//!
//! `handwritten <sqlite://FILE | postgres://… | mysql://…/DB> <listen>`: creates its
//! tables (in schema `handwritten` on PostgreSQL, in database `DB_handwritten` on
//! MariaDB) and 50 authors if there are none.
//!
//! One file of a little over 400 lines, as such a server is written: its routes, and each
//! database's tables and statements, read together.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Form, Json, Router};
use chrono::{DateTime, Datelike, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;
use sqlx::mysql::{MySqlConnectOptions, MySqlPoolOptions};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
use sqlx::{MySqlPool, PgPool, SqlitePool};

const PER_PAGE: i64 = 20;

enum Db {
    Sqlite {
        readers: SqlitePool,
        writer: SqlitePool,
    },
    Postgres(PgPool),
    MySql(MySqlPool),
}

/// Runs the same code against whichever pool `$db` holds.
macro_rules! on_db {
    ($db:expr, $read:ident, $write:ident => $body:expr) => {
        match $db {
            Db::Sqlite {
                readers: $read,
                writer: $write,
            } => $body,
            Db::Postgres(pool) => {
                let ($read, $write) = (pool, pool);
                $body
            }
            Db::MySql(pool) => {
                let ($read, $write) = (pool, pool);
                $body
            }
        }
    };
}

/// `sql` as `db` takes it: `?` placeholders on MariaDB (the statements here take their
/// arguments in order).
fn dialect(db: &Db, sql: &str) -> sqlx::AssertSqlSafe<String> {
    let text = match db {
        Db::MySql(_) => {
            let mut text = sql.to_owned();
            for n in (1..=9).rev() {
                text = text.replace(&format!("${n}"), "?");
            }
            text
        }
        _ => sql.to_owned(),
    };
    sqlx::AssertSqlSafe(text)
}

#[derive(Serialize, sqlx::FromRow)]
struct Book {
    id: i64,
    title: String,
    author_id: Option<i64>,
    #[serde(skip)]
    author_name: Option<String>,
    year: i32,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    #[sqlx(skip)]
    #[serde(skip_serializing_if = "Option::is_none")]
    author: Option<serde_json::Value>,
}

impl Book {
    fn with_author(mut self, include: bool) -> Self {
        if include {
            self.author = Some(match self.author_id {
                Some(id) => json!({"id": id, "name": self.author_name}),
                None => serde_json::Value::Null,
            });
        }
        self
    }
}

#[derive(Deserialize)]
struct ListQuery {
    page: Option<i64>,
    include: Option<String>,
    #[serde(rename = "filter[author_id]")]
    author_id: Option<String>,
    #[serde(rename = "filter[year]")]
    year: Option<String>,
    #[serde(rename = "filter[title]")]
    title: Option<String>,
    sort: Option<String>,
}

/// A value a list's `WHERE` binds.
enum Bound {
    Int(i64),
    Text(String),
}

impl ListQuery {
    /// The obvious `WHERE` (author ids with `IN`, a year or a range, the title with a
    /// case-insensitive `LIKE`) and `ORDER BY` (known columns only), and their values.
    fn sql(&self, db: &Db) -> (String, String, Vec<Bound>) {
        let mut conditions = Vec::new();
        let mut values = Vec::new();
        if let Some(ids) = self.author_id.as_deref().filter(|s| !s.is_empty()) {
            let ids: Vec<i64> = ids
                .split(',')
                .filter_map(|id| id.trim().parse().ok())
                .collect();
            let marks = vec!["?"; ids.len()].join(", ");
            conditions.push(format!("b.author_id IN ({marks})"));
            values.extend(ids.into_iter().map(Bound::Int));
        }
        if let Some(year) = self.year.as_deref().filter(|s| !s.is_empty()) {
            match year.split_once("..") {
                Some((from, to)) => {
                    if let Ok(from) = from.parse() {
                        conditions.push("b.year >= ?".to_owned());
                        values.push(Bound::Int(from));
                    }
                    if let Ok(to) = to.parse() {
                        conditions.push("b.year <= ?".to_owned());
                        values.push(Bound::Int(to));
                    }
                }
                None => {
                    conditions.push("b.year = ?".to_owned());
                    values.push(Bound::Int(year.parse().unwrap_or(0)));
                }
            }
        }
        if let Some(title) = self.title.as_deref().filter(|s| !s.is_empty()) {
            let like = match db {
                Db::Postgres(_) => "ILIKE",
                _ => "LIKE",
            };
            conditions.push(format!("b.title {like} ?"));
            values.push(Bound::Text(format!("%{title}%")));
        }
        let filter = if conditions.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", conditions.join(" AND "))
        };
        let mut order = Vec::new();
        for key in self
            .sort
            .as_deref()
            .unwrap_or("")
            .split(',')
            .filter(|k| !k.is_empty())
        {
            let (column, direction) = match key.strip_prefix('-') {
                Some(column) => (column, " DESC"),
                None => (key, ""),
            };
            if ["id", "title", "year", "created_at", "updated_at"].contains(&column) {
                order.push(format!("b.{column}{direction}"));
            }
        }
        order.push("b.id".to_owned());
        let numbered = |sql: String| match db {
            Db::MySql(_) => sql,
            _ => {
                let mut n = 0;
                sql.split('?')
                    .enumerate()
                    .map(|(at, part)| {
                        if at == 0 {
                            part.to_owned()
                        } else {
                            n += 1;
                            format!("${n}{part}")
                        }
                    })
                    .collect()
            }
        };
        (
            numbered(format!("SELECT COUNT(*) FROM books b{filter}")),
            numbered(format!(
                "{SELECT}{filter} ORDER BY {} LIMIT ? OFFSET ?",
                order.join(", ")
            )),
            values,
        )
    }
}

#[derive(Deserialize)]
struct NewBook {
    title: String,
    author_id: i64,
    year: i32,
}

const SELECT: &str = "SELECT b.id, b.title, b.author_id, a.name AS author_name, b.year, \
    b.created_at, b.updated_at FROM books b LEFT JOIN authors a ON a.id = b.author_id";
const INSERT: &str = "INSERT INTO books (title, author_id, year, created_at, updated_at) \
    VALUES ($1, $2, $3, $4, $4) RETURNING id, title, author_id, \
    (SELECT name FROM authors WHERE authors.id = books.author_id) AS author_name, year, \
    created_at, updated_at";

fn failed(error: sqlx::Error) -> Response {
    match error {
        sqlx::Error::Database(e) if e.is_foreign_key_violation() => (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({"errors": {"author_id": ["The selected author id is invalid."]}})),
        )
            .into_response(),
        _ => StatusCode::SERVICE_UNAVAILABLE.into_response(),
    }
}

/// Ping as the books API's extended ping answers it: status, time, version.
async fn ping() -> Json<serde_json::Value> {
    Json(json!({
        "status": "ok",
        "time": Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        "version": env!("CARGO_PKG_VERSION"),
    }))
}

async fn list(State(db): State<Arc<Db>>, Query(q): Query<ListQuery>) -> Response {
    let page = q.page.unwrap_or(1).max(1);
    let include = q.include.as_deref() == Some("author");
    let (count_sql, page_sql, values) = q.sql(&db);
    let result = on_db!(&*db, readers, _writer => async {
        let mut count = sqlx::query_scalar(sqlx::AssertSqlSafe(count_sql));
        let mut books = sqlx::query_as(sqlx::AssertSqlSafe(page_sql));
        for value in &values {
            (count, books) = match value {
                Bound::Int(n) => (count.bind(*n), books.bind(*n)),
                Bound::Text(text) => (count.bind(text.as_str()), books.bind(text.as_str())),
            };
        }
        let total: i64 = count.fetch_one(readers).await?;
        let books: Vec<Book> = books
            .bind(PER_PAGE)
            .bind((page - 1) * PER_PAGE)
            .fetch_all(readers)
            .await?;
        Ok::<_, sqlx::Error>((total, books))
    }
    .await);
    let (total, books) = match result {
        Ok(found) => found,
        Err(e) => return failed(e),
    };
    let last = ((total + PER_PAGE - 1) / PER_PAGE).max(1);
    let link = |n: i64| format!("http://localhost/api/books?page={n}");
    Json(json!({
        "data": books.into_iter().map(|b| b.with_author(include)).collect::<Vec<_>>(),
        "meta": {"currentPage": page, "perPage": PER_PAGE, "total": total, "totalPages": last},
        "links": {
            "first": link(1),
            "last": link(last),
            "prev": (page > 1).then(|| link(page - 1)),
            "next": (page < last).then(|| link(page + 1)),
        },
    }))
    .into_response()
}

async fn show(
    State(db): State<Arc<Db>>,
    Path(id): Path<i64>,
    Query(q): Query<ListQuery>,
) -> Response {
    let include = q.include.as_deref() == Some("author");
    let sql = dialect(&db, &format!("{SELECT} WHERE b.id = $1"));
    let found: Result<Option<Book>, _> = on_db!(&*db, readers, _writer =>
        sqlx::query_as(sql).bind(id).fetch_optional(readers).await);
    match found {
        Ok(Some(book)) => Json(json!({"data": book.with_author(include)})).into_response(),
        Ok(None) => StatusCode::NOT_FOUND.into_response(),
        Err(e) => failed(e),
    }
}

async fn create(State(db): State<Arc<Db>>, Form(new): Form<NewBook>) -> Response {
    let title = new.title.trim();
    if title.is_empty()
        || title.chars().count() > 255
        || !(2000..=Utc::now().year()).contains(&new.year)
    {
        return StatusCode::UNPROCESSABLE_ENTITY.into_response();
    }
    let now = Utc::now();
    let insert = dialect(&db, INSERT);
    let created: Result<Book, _> = on_db!(&*db, _readers, writer => {
        let insert = sqlx::query_as(insert)
            .bind(title)
            .bind(new.author_id)
            .bind(new.year)
            .bind(now);
        // `$4` twice: MariaDB's `?` takes it twice.
        let insert = if matches!(&*db, Db::MySql(_)) { insert.bind(now) } else { insert };
        insert.fetch_one(writer).await
    });
    match created {
        Ok(book) => (StatusCode::CREATED, Json(json!({"data": book}))).into_response(),
        Err(e) => failed(e),
    }
}

/// MariaDB's tables: a foreign key is a table constraint, times `DATETIME(6)` in UTC.
const SCHEMA_MYSQL: [&str; 2] = [
    "CREATE TABLE IF NOT EXISTS authors (id BIGINT PRIMARY KEY, name TEXT)",
    "CREATE TABLE IF NOT EXISTS books (id BIGINT AUTO_INCREMENT PRIMARY KEY, \
     title VARCHAR(255) NOT NULL, author_id BIGINT, year INT NOT NULL, \
     created_at DATETIME(6) NOT NULL, updated_at DATETIME(6) NOT NULL, \
     FOREIGN KEY (author_id) REFERENCES authors (id) ON DELETE SET NULL, \
     INDEX books_year (year), INDEX books_title (title)) DEFAULT CHARSET = utf8mb4",
];

const SCHEMA: [&str; 5] = [
    "CREATE TABLE IF NOT EXISTS authors (id BIGINT PRIMARY KEY, name TEXT)",
    "CREATE TABLE IF NOT EXISTS books (id {ID}, title TEXT NOT NULL, \
     author_id BIGINT REFERENCES authors (id) ON DELETE SET NULL, year INTEGER NOT NULL, \
     created_at {TS} NOT NULL, updated_at {TS} NOT NULL)",
    "CREATE INDEX IF NOT EXISTS books_author_id ON books (author_id)",
    "CREATE INDEX IF NOT EXISTS books_year ON books (year)",
    "CREATE INDEX IF NOT EXISTS books_title ON books (title)",
];

async fn connect(url: &str) -> Result<Db, sqlx::Error> {
    let (db, id, ts) = if url.starts_with("sqlite:") {
        let options = url
            .parse::<SqliteConnectOptions>()?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal);
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options.clone())
            .await?;
        let readers = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options.read_only(true))
            .await?;
        let db = Db::Sqlite { readers, writer };
        (db, "INTEGER PRIMARY KEY AUTOINCREMENT", "TEXT")
    } else if url.starts_with("mysql:") {
        let options = url.parse::<MySqlConnectOptions>()?;
        let database = format!("{}_handwritten", options.get_database().unwrap_or("books"));
        let server = MySqlPoolOptions::new()
            .max_connections(1)
            .connect_with(options.clone())
            .await?;
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "CREATE DATABASE IF NOT EXISTS {database}"
        )))
        .execute(&server)
        .await?;
        server.close().await;
        let pool = MySqlPoolOptions::new()
            .max_connections(10)
            .connect_with(options.database(&database))
            .await?;
        for statement in SCHEMA_MYSQL {
            sqlx::raw_sql(statement).execute(&pool).await?;
        }
        for n in 1..=50_i64 {
            sqlx::query("INSERT IGNORE INTO authors (id, name) VALUES (?, ?)")
                .bind(n)
                .bind(format!("Author {n}"))
                .execute(&pool)
                .await?;
        }
        return Ok(Db::MySql(pool));
    } else {
        let options = url
            .parse::<PgConnectOptions>()?
            .options([("search_path", "handwritten")]);
        let pool = PgPoolOptions::new()
            .max_connections(10)
            .connect_with(options)
            .await?;
        sqlx::query("CREATE SCHEMA IF NOT EXISTS handwritten")
            .execute(&pool)
            .await?;
        let db = Db::Postgres(pool);
        (
            db,
            "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
            "TIMESTAMPTZ",
        )
    };
    on_db!(&db, _readers, writer => {
        for statement in SCHEMA {
            let sql = statement.replace("{ID}", id).replace("{TS}", ts);
            sqlx::query(sqlx::AssertSqlSafe(sql)).execute(writer).await?;
        }
        sqlx::query("INSERT INTO authors (id, name) SELECT 1, 'Author 1' WHERE NOT EXISTS (SELECT 1 FROM authors)")
            .execute(writer)
            .await?;
        for n in 2..=50 {
            sqlx::query("INSERT INTO authors (id, name) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING")
                .bind(n as i64)
                .bind(format!("Author {n}"))
                .execute(writer)
                .await?;
        }
    });
    Ok(db)
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let db = connect(&args[0]).await.expect("database");
    let app = Router::new()
        .route("/api/ping", get(ping))
        .route("/api/books", get(list).post(create))
        .route("/api/books/{id}", get(show))
        .with_state(Arc::new(db));
    let listener = tokio::net::TcpListener::bind(&args[1]).await.unwrap();
    println!(
        "handwritten listening on http://{}",
        listener.local_addr().unwrap()
    );
    axum::serve(listener, app).await.unwrap();
}
