//! The SQL of a filtered or sorted list, written once for every database from a
//! [`ListQuery`]: its `WHERE` and `ORDER BY` ([`ListClauses`], public, over any table's
//! columns), every value a bound parameter (nothing a client sends is written into the
//! text but, on PostgreSQL, a first page's limit and offset as integers:
//! [`Statement::paged`]); and the store's own page and tally statements around them
//! ([`ListSql`]).
//! The page and its total come from one statement, so from one snapshot (a sort alone
//! takes the total the triggers keep); the sort's keys, then the id ascending, order both
//! the ids of the page (a deferred join: the offset walks the keys' index) and the page.
//!
//! One module over 400 lines: the clauses a host uses and the statements the stores build
//! on them are one piece of SQL, and its tests read both; split, each half would need the
//! other's private parts.

use books_core::store::{ListQuery, SortField, fold_title};

use crate::check::database_literal;
use crate::statement::{Arg, Dialect, Statement};
use crate::totals::{Counted, LISTED, Mark, UNCHANGED, count_unless_known, origin_sql};

/// The placeholder of a list's first filter value: `$1` and `$2` are its limit and offset;
/// after the filter's values come the kept total's version and origin, then a mark's id.
const FIRST_VALUE: usize = 3;

/// PostgreSQL's ASCII-only lowering of a text: its `lower()` lowers every letter but
/// under the "C" collation, where it lowers ASCII letters only (and compares by code
/// point).
const FOLD_POSTGRES: &str = "lower({} COLLATE \"C\")";

/// The columns of a books table, as SQL expressions (`t.item_no`, `label`): what a list's
/// filter and sort are written over.
#[derive(Debug, Clone, Copy)]
pub struct BookColumns<'a> {
    /// The id (ties are broken by it, ascending).
    pub id: &'a str,
    /// The title.
    pub title: &'a str,
    /// The publication year.
    pub year: &'a str,
    /// The author's id.
    pub author_id: &'a str,
    /// When the book was created.
    pub created_at: &'a str,
    /// When the book was last written.
    pub updated_at: &'a str,
    /// A column holding the title with ASCII letters lowered (MariaDB: a stored generated
    /// column with an index, as this crate's own table has), if there is one; without it
    /// the title is lowered in the statement.
    pub folded_title: Option<&'a str>,
}

impl BookColumns<'static> {
    /// This crate's own books table, aliased `b`.
    const OURS: Self = Self {
        id: "b.id",
        title: "b.title",
        year: "b.year",
        author_id: "b.author_id",
        created_at: "b.created_at",
        updated_at: "b.updated_at",
        folded_title: None,
    };
}

/// A value [`ListClauses`] binds.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ListValue {
    /// An author id.
    Int(i64),
    /// A year.
    Year(i32),
    /// A title pattern.
    Text(String),
}

impl ListValue {
    /// The value as a statement's argument.
    pub(crate) fn arg(&self) -> Arg<'_> {
        match self {
            Self::Int(n) => Arg::Int(*n),
            Self::Year(n) => Arg::Int4(*n),
            Self::Text(text) => Arg::Text(text),
        }
    }
}

/// A list query's filter and sort as SQL over a table's [`BookColumns`], for a store over
/// a host's own tables: a condition for its `WHERE` and the keys of its `ORDER BY`,
/// every value a parameter in the database's own syntax: numbered `$N` from the first
/// number given on PostgreSQL and SQLite, `?` on MariaDB (bind
/// [`values`](Self::values) in order, which is the order they appear in). A page and its
/// `COUNT(*)` in two statements share one set of clauses: number them from 1 and put the
/// page's limit and offset after them, so that the count binds exactly its own (on
/// MariaDB, the limit's `?` after the condition's). Titles are compared as
/// the contract says ([`fold_title`]: ASCII letters case-insensitively, everything else
/// exactly, `%` and `_` as themselves), by the filter and the sort alike whatever the
/// host column's collation (MariaDB: in `utf8mb4_bin`, so a `utf8mb4` column).
///
/// ```
/// use books_core::store::{ListFilter, ListQuery, SortField, SortKey};
/// use books_sqlx::{BookColumns, Dialect, ListClauses, ListValue};
///
/// let mut filter = ListFilter::default();
/// filter.author_ids = vec![3, 5];
/// let query = ListQuery::new(0, 20)
///     .with_filter(filter)
///     .with_sort(vec![SortKey { field: SortField::Year, descending: true }]);
/// let columns = BookColumns {
///     id: "t.title_code", title: "t.heading", year: "t.released", author_id: "t.penned_by",
///     created_at: "t.inserted_at", updated_at: "t.touched_at", folded_title: None,
/// };
/// let clauses = ListClauses::new(Dialect::Postgres, &columns, &query, 3);
/// assert_eq!(clauses.condition.as_deref(), Some("t.penned_by IN ($3, $4)"));
/// assert_eq!(clauses.order, "t.released DESC, t.title_code");
/// assert_eq!(clauses.values, [ListValue::Int(3), ListValue::Int(5)]);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ListClauses {
    /// What the filter keeps (`None`: every book).
    pub condition: Option<String>,
    /// The sort's keys, then the id ascending.
    pub order: String,
    /// The values of the parameters, the first one numbered as asked.
    pub values: Vec<ListValue>,
    /// The keys of `order`, each with whether it is descending.
    keys: Vec<(String, bool)>,
}

impl ListClauses {
    /// The clauses for `query` over `columns`, its parameters numbered from `first`
    /// (MariaDB: `?`, `first` unused).
    pub fn new(
        dialect: Dialect,
        columns: &BookColumns<'_>,
        query: &ListQuery,
        first: usize,
    ) -> Self {
        let mut clauses = Self::written(dialect, columns, query, first, None, false);
        if dialect == Dialect::MySql {
            clauses.condition = clauses.condition.map(|numbered| {
                Statement::new(&numbered, "", Dialect::MySql)
                    .text
                    .as_str()
                    .to_owned()
            });
        }
        clauses
    }

    /// Adds the [`values`](Self::values) to `arguments` after what they hold, in order,
    /// whatever the database: for `sqlx::query_with`, `query_as_with` or
    /// `query_scalar_with` (further values with their `.bind`; a page and its count each
    /// take a clone). The error converts to a `StoreError` with `?`.
    ///
    /// ```
    /// # use books_core::store::{ListFilter, ListQuery};
    /// # use books_sqlx::{BookColumns, Dialect, ListClauses};
    /// # use books_sqlx::sqlx::{self, Arguments, AssertSqlSafe, postgres::PgArguments};
    /// # let columns = BookColumns { id: "id", title: "title", year: "year",
    /// #     author_id: "author_id", created_at: "at", updated_at: "at", folded_title: None };
    /// # let mut filter = ListFilter::default();
    /// # filter.author_ids = vec![3];
    /// # let query = ListQuery::new(0, 20).with_filter(filter);
    /// let clauses = ListClauses::new(Dialect::Postgres, &columns, &query, 1);
    /// let mut arguments = PgArguments::default();
    /// clauses.add_to(&mut arguments).unwrap();
    /// arguments.add(20_i64).unwrap(); // the limit, numbered after the clauses
    /// assert_eq!(arguments.len(), 2); // the author, then the limit
    /// let text = format!("SELECT id FROM titles WHERE {} ORDER BY {} LIMIT $2",
    ///     clauses.condition.as_deref().unwrap_or("true"), clauses.order);
    /// let page = sqlx::query_scalar_with::<_, i64, _>(AssertSqlSafe(text), arguments);
    /// # let _ = page;
    /// ```
    pub fn add_to<A: sqlx::Arguments>(&self, arguments: &mut A) -> Result<(), crate::Error>
    where
        i64: for<'t> sqlx::Encode<'t, A::Database> + sqlx::Type<A::Database>,
        i32: for<'t> sqlx::Encode<'t, A::Database> + sqlx::Type<A::Database>,
        String: for<'t> sqlx::Encode<'t, A::Database> + sqlx::Type<A::Database>,
    {
        for value in &self.values {
            match value {
                ListValue::Int(value) => arguments.add(*value),
                ListValue::Year(value) => arguments.add(*value),
                ListValue::Text(value) => arguments.add(value.clone()),
            }
            .map_err(sqlx::Error::Encode)?;
        }
        Ok(())
    }

    /// The clauses with `$N` placeholders on every database, a title filtered through
    /// `trigrams` (SQLite's FTS5 table of this crate's migration) where given, each
    /// placeholder behind a scalar subquery (`(SELECT $N)`) if `hidden`: the planner
    /// then estimates the condition as for any value.
    pub(crate) fn written(
        dialect: Dialect,
        columns: &BookColumns<'_>,
        query: &ListQuery,
        first: usize,
        trigrams: Option<&str>,
        hidden: bool,
    ) -> Self {
        let mut values = Vec::new();
        let mut bind = |value: ListValue| {
            values.push(value);
            let number = first + values.len() - 1;
            if hidden {
                format!("(SELECT ${number})")
            } else {
                format!("${number}")
            }
        };
        let mut conditions = Vec::new();
        let filter = &query.filter;
        if !filter.author_ids.is_empty() {
            let ids: Vec<String> = filter
                .author_ids
                .iter()
                .map(|&id| bind(ListValue::Int(id)))
                .collect();
            conditions.push(format!("{} IN ({})", columns.author_id, ids.join(", ")));
        }
        if !filter.years.is_empty() {
            let year = columns.year;
            let ranges: Vec<String> = filter
                .years
                .iter()
                .map(|range| match (range.from, range.to) {
                    (Some(from), Some(to)) if from == to => {
                        format!("{year} = {}", bind(ListValue::Year(from)))
                    }
                    (Some(from), Some(to)) => format!(
                        "{year} BETWEEN {} AND {}",
                        bind(ListValue::Year(from)),
                        bind(ListValue::Year(to))
                    ),
                    (Some(from), None) => format!("{year} >= {}", bind(ListValue::Year(from))),
                    (None, Some(to)) => format!("{year} <= {}", bind(ListValue::Year(to))),
                    (None, None) => "TRUE".to_owned(),
                })
                .collect();
            conditions.push(format!("({})", ranges.join(" OR ")));
        }
        if let Some(title) = &filter.title {
            let folded = fold_title(title);
            let column = columns.title;
            conditions.push(match (dialect, trigrams) {
                // Books the trigram index finds, each checked (it folds case more widely).
                (Dialect::Sqlite, Some(trigrams)) if title.chars().count() >= 3 => format!(
                    "{} IN (SELECT rowid FROM {trigrams} WHERE {trigrams} MATCH {}) \
                     AND instr(lower({column}), {}) > 0",
                    columns.id,
                    bind(ListValue::Text(format!(
                        "\"{}\"",
                        title.replace('"', "\"\"")
                    ))),
                    bind(ListValue::Text(folded))
                ),
                (Dialect::Sqlite, _) => {
                    format!(
                        "instr(lower({column}), {}) > 0",
                        bind(ListValue::Text(folded))
                    )
                }
                (Dialect::Postgres, _) => format!(
                    "{} LIKE {}",
                    FOLD_POSTGRES.replace("{}", column),
                    bind(ListValue::Text(format!("%{}%", escape_like(&folded))))
                ),
                (Dialect::MySql, _) => format!(
                    "LOCATE({}, {}) > 0",
                    bind(ListValue::Text(folded)),
                    title_order(dialect, columns)
                ),
            });
        }
        let mut keys: Vec<(String, bool)> = query
            .sort
            .iter()
            .map(|key| {
                let column = match key.field {
                    SortField::Id => columns.id.to_owned(),
                    SortField::Title => title_order(dialect, columns),
                    SortField::Year => columns.year.to_owned(),
                    SortField::CreatedAt => columns.created_at.to_owned(),
                    SortField::UpdatedAt => columns.updated_at.to_owned(),
                };
                (column, key.descending)
            })
            .collect();
        if !query.sort.iter().any(|key| key.field == SortField::Id) {
            keys.push((columns.id.to_owned(), false));
        }
        let order = keys
            .iter()
            .map(|(column, descending)| ordered(column, *descending));
        Self {
            condition: (!conditions.is_empty()).then(|| conditions.join(" AND ")),
            order: order.collect::<Vec<_>>().join(", "),
            keys,
            values,
        }
    }
}

/// `column` in an `ORDER BY`.
fn ordered(column: &str, descending: bool) -> String {
    format!("{column}{}", if descending { " DESC" } else { "" })
}

/// What a title sorts by: ASCII letters lowered, then by code point.
fn title_order(dialect: Dialect, columns: &BookColumns<'_>) -> String {
    match dialect {
        // SQLite's `lower()` lowers ASCII only; its default collation compares bytes.
        Dialect::Sqlite => format!("lower({})", columns.title),
        Dialect::Postgres => FOLD_POSTGRES.replace("{}", columns.title),
        // In a binary collation.
        Dialect::MySql => match columns.folded_title {
            Some(folded) => folded.to_owned(),
            None => format!("{} COLLATE utf8mb4_bin", folded_mysql(columns)),
        },
    }
}

/// MariaDB's title with ASCII letters lowered (its `LOWER()` lowers every letter): the
/// folded column, or 26 `REPLACE`s.
fn folded_mysql(columns: &BookColumns<'_>) -> String {
    if let Some(folded) = columns.folded_title {
        return folded.to_owned();
    }
    ('A'..='Z').fold(columns.title.to_owned(), |text, upper| {
        format!(
            "REPLACE({text}, '{upper}', '{}')",
            upper.to_ascii_lowercase()
        )
    })
}

/// A filter as its statement counts it: its condition as written and the values bound.
pub(crate) type Filter = (String, Vec<ListValue>);

/// The store's own filtered or sorted list: its statements and their arguments.
#[derive(Debug)]
pub(crate) struct ListSql {
    /// The page, each row with the list's total and the store's version (and, filtered,
    /// the origin of both).
    pub(crate) page: Statement,
    /// The total and the version (and origin) alone, for an empty page.
    pub(crate) tally: Statement,
    /// What a filtered list counts, its total kept between pages ([`Totals`]); `None`
    /// for a sort alone.
    ///
    /// [`Totals`]: crate::totals::Totals
    pub(crate) filter: Option<Filter>,
    /// A filtered page in id order's other statements; `None` for other lists.
    by_id: Option<ById>,
    dialect: Dialect,
    /// Whether PostgreSQL plans the page anew at each run: a title's, whose plan for
    /// any pattern walks every book in id order (the trigram index is worth it only for
    /// a pattern the planner sees).
    per_run: bool,
    values: Vec<ListValue>,
}

/// The texts of a filtered page in id order's other statements: its page from a mark's id
/// (`AND b.id >= $N`), its page of kept ids (`$1`: their list), and its every id.
#[derive(Debug)]
struct ById {
    seek: String,
    listed: String,
    every: String,
}

impl ListSql {
    /// The statements for `query` over the store's tables behind `schema`.
    pub(crate) fn new(dialect: Dialect, schema: &str, query: &ListQuery) -> Self {
        let columns = BookColumns {
            folded_title: (dialect == Dialect::MySql).then_some("b.title_key"),
            ..BookColumns::OURS
        };
        let trigrams = format!("{schema}books_title_trigrams");
        let written = |hidden| {
            ListClauses::written(
                dialect,
                &columns,
                query,
                FIRST_VALUE,
                Some(&trigrams),
                hidden,
            )
        };
        let clauses = written(false);
        let per_run = query.filter.title.is_some() && dialect == Dialect::Postgres;
        let filter = clauses
            .condition
            .clone()
            .map(|condition| (condition, clauses.values.clone()));
        let filtered = clauses
            .condition
            .as_ref()
            .map(|condition| format!(" WHERE {condition}"))
            .unwrap_or_default();
        let order = &clauses.order;
        // The version, and a filter's origin: on MariaDB (whose origin is a look-up) and
        // SQLite read once, in a one-row table `k` the rest names; on PostgreSQL written
        // where they are named (it plans these pages anew each run, and took longer over
        // the one-row table than a second reading costs).
        let version = "(SELECT CAST(SUM(version) AS {int8}) FROM {s}book_count)";
        let origin = (!filtered.is_empty()).then(|| origin_sql(dialect));
        let (version, origin, known) = if dialect == Dialect::Postgres {
            (version.to_owned(), origin.map(str::to_owned), None)
        } else {
            let read = origin.map_or(String::new(), |o| format!(", {o} AS origin"));
            let known = format!("(SELECT {version} AS version{read}) k");
            let origin = origin.map(|_| "k.origin".to_owned());
            ("k.version".to_owned(), origin, Some(known))
        };
        // A sort alone keeps every book: the count the triggers keep, not a scan. A
        // filter's count, unless the last one counted still holds (its version and origin
        // numbered after the filter's values).
        let total = match &origin {
            None => "(SELECT CAST(SUM(n) AS {int8}) FROM {s}book_count)".to_owned(),
            Some(origin) => {
                // PostgreSQL plans a kept page anew at each run while a plan made for its
                // values looks cheaper than the one for any value, and the count (not run
                // while the kept total holds) is most of either estimate: every page of a
                // year rarer than the average was planned anew (1M books: 0.62 ms planning,
                // 0.27 ms running, 0.09 ms with the generic plan). Its values hidden, the
                // count is estimated alike in both. A title's page is planned per run.
                let counted = if dialect == Dialect::Postgres && !per_run {
                    written(true)
                        .condition
                        .map(|condition| format!(" WHERE {condition}"))
                } else {
                    None
                };
                let counted = counted.as_deref().unwrap_or(&filtered);
                let count = format!("(SELECT COUNT(*) FROM {{s}}books b{counted})");
                let first = FIRST_VALUE + clauses.values.len();
                count_unless_known(&count, [&version, origin], [first, first + 1])
            }
        };
        // Read once for every row (PostgreSQL's expression would be run for each).
        let origin_once = origin.as_ref().map_or(String::new(), |o| match dialect {
            Dialect::Postgres => format!(", (SELECT {o}) AS origin"),
            _ => format!(", {o} AS origin"),
        });
        let origin = origin.map_or(String::new(), |o| format!(", {o} AS origin"));
        let columns = format!("{total} AS total, {version} AS version{origin}");
        // SQLite would otherwise read every book in the sort's index order to join the
        // page to them (no final sort), not the page's 20 ids to their books: a `CROSS
        // JOIN` keeps its order as written (55 ms against 0.02 ms at 1M books, sorted).
        let join = if dialect == Dialect::Sqlite {
            "CROSS JOIN"
        } else {
            "JOIN"
        };
        // The page's ids come with their sort keys, which order the page: MariaDB sorted
        // the joined books by theirs in a temporary table (sort=title, 0.55 against
        // 0.29 ms a statement at 180,000 books).
        let (mut carried, mut outer) = (String::new(), Vec::new());
        for (n, (column, descending)) in clauses.keys.iter().enumerate() {
            if column == BookColumns::OURS.id {
                outer.push(ordered("p.id", *descending));
            } else {
                carried.push_str(&format!(", {column} AS k{n}"));
                outer.push(ordered(&format!("p.k{n}"), *descending));
            }
        }
        let outer = outer.join(", ");
        let (before_page, tallied_from) = known.map_or((String::new(), String::new()), |k| {
            (format!("{k} CROSS JOIN "), format!(" FROM {k}"))
        });
        // MariaDB's origin names the tables' database.
        let database = database_literal(schema.strip_suffix('.'));
        // The page of the ids `ids` names (aliased `p`), each row with `columns`.
        let page = |ids: &str, columns: &str| {
            let page = format!(
                "SELECT b.id, b.title, b.year, b.author_id, a.name AS author_name, \
                 b.created_at, b.updated_at, {columns} FROM {before_page}{ids} p \
                 {join} {{s}}books b ON b.id = p.id \
                 LEFT JOIN {{s}}authors a ON a.id = b.author_id ORDER BY {outer}"
            );
            page.replace("{db}", &database).replace("{s}", schema)
        };
        let ids = |seek: &str| {
            format!(
                "(SELECT b.id{carried} FROM {{s}}books b{filtered}{seek} ORDER BY {order} \
                 LIMIT $1 OFFSET $2)"
            )
        };
        let by_id = query
            .sort
            .iter()
            .all(|key| key.field == SortField::Id && !key.descending);
        // A filtered page in id order may start from a mark (the last placeholder's id),
        // or be of the ids kept (`$1`, its only one: statements of one text may be of
        // filters whose values are of other types).
        let number = FIRST_VALUE + clauses.values.len() + 2;
        let ordered_by_id = (filter.is_some() && by_id).then(|| {
            let kept = match dialect {
                Dialect::Sqlite => "(SELECT value AS id FROM json_each($1))",
                Dialect::Postgres => "(SELECT unnest(CAST($1 AS text)::bigint[]) AS id)",
                Dialect::MySql => "JSON_TABLE($1, '$[*]' COLUMNS (id BIGINT PATH '$'))",
            };
            // Its total is the kept one if the version holds; the store checks it.
            let kept_total =
                format!("CAST({UNCHANGED} AS {{int8}}) AS total, {version} AS version{origin}");
            // In one row (a row each cost SQLite's driver more than the search), with how
            // many, which a length bound on MariaDB's `GROUP_CONCAT` may not have kept.
            let listing = match dialect {
                Dialect::Sqlite => "COUNT(*) || ':' || COALESCE(group_concat(i.id), '')",
                Dialect::Postgres => "COUNT(*) || ':' || COALESCE(string_agg(i.id::text, ','), '')",
                Dialect::MySql => {
                    "CAST(CONCAT(COUNT(*), ':', COALESCE(GROUP_CONCAT(i.id), '')) AS CHAR)"
                }
            };
            // In no order (`ids_of` sorts them): ordered by id with a limit, PostgreSQL
            // may walk the ids until the limit is met, every book for a title's 1,000.
            let every = format!(
                "SELECT (SELECT {listing} FROM (SELECT b.id FROM {{s}}books b{filtered} \
                 LIMIT {}) i) AS ids, {version} AS version{origin_once}{tallied_from}",
                LISTED + 1
            );
            ById {
                seek: page(&ids(&format!(" AND b.id >= ${number}")), &columns),
                listed: page(kept, &kept_total),
                every: every.replace("{db}", &database).replace("{s}", schema),
            }
        });
        let tally = Statement::new(
            &format!("SELECT {columns}{tallied_from}").replace("{db}", &database),
            schema,
            dialect,
        );
        let mut values = vec![
            ListValue::Int(i64::from(query.limit)),
            ListValue::Int(i64::try_from(query.offset).unwrap_or(i64::MAX)),
        ];
        values.extend(clauses.values);
        let page = Statement::new(&page(&ids(""), &columns), "", dialect);
        Self {
            page: planned(page, per_run),
            tally: planned(tally, per_run),
            filter,
            by_id: ordered_by_id,
            dialect,
            per_run,
            values,
        }
    }

    /// Whether a page of this list may start from a [`Mark`] or be of kept ids:
    /// filtered, in id order.
    pub(crate) fn by_id(&self) -> bool {
        self.by_id.is_some()
    }

    /// The page from a mark's id, for [`args`](Self::args) with the mark.
    pub(crate) fn seeking(&self) -> Option<Statement> {
        let page = Statement::new(&self.by_id.as_ref()?.seek, "", self.dialect);
        Some(planned(page, self.per_run))
    }

    /// The page of kept ids, their list ([`ids_arg`](Self::ids_arg)) its one argument,
    /// answering [`UNCHANGED`] as its total: the caller checks the version and origin it
    /// answers.
    pub(crate) fn listed(&self) -> Option<Statement> {
        let page = &self.by_id.as_ref()?.listed;
        Some(Statement::new(page, "", self.dialect))
    }

    /// Every book's id the filter keeps, [`LISTED`] + 1 at most, as one text (`n:id,id,…`,
    /// [`ids_of`]), with the version and origin.
    pub(crate) fn every_id(&self) -> Option<Statement> {
        let every = Statement::new(&self.by_id.as_ref()?.every, "", self.dialect);
        Some(planned(every, self.per_run))
    }

    /// `ids` as [`listed`](Self::listed) takes them.
    pub(crate) fn ids_arg(&self, ids: &[i64]) -> String {
        let ids: Vec<String> = ids.iter().map(i64::to_string).collect();
        match self.dialect {
            Dialect::Postgres => format!("{{{}}}", ids.join(",")),
            _ => format!("[{}]", ids.join(",")),
        }
    }

    /// The arguments the other statements take (each binds those it names), a filter's
    /// with the total last counted for it (`known`), if any; with a mark (`seek`), the
    /// offset counted from the mark and the mark's id after the rest.
    pub(crate) fn args(&self, known: Option<Counted>, seek: Option<Mark>) -> Vec<Arg<'_>> {
        let mut args: Vec<Arg<'_>> = self.values.iter().map(ListValue::arg).collect();
        if self.filter.is_some() {
            // No version is negative: -1 counts whatever the version.
            let (version, origin) = known.map_or((-1, 0), |known| (known.version, known.origin));
            args.extend([Arg::Int(version), Arg::Int(origin)]);
        }
        if let (Some(mark), ListValue::Int(offset)) = (seek, &self.values[1]) {
            args[1] = Arg::Int(offset - i64::try_from(mark.before).unwrap_or(i64::MAX));
            args.push(Arg::Int(mark.id));
        }
        args
    }
}

/// The ids in [`ListSql::every_id`]'s text, in order; `None` if it does not hold as many
/// as it says.
pub(crate) fn ids_of(text: &str) -> Option<Vec<i64>> {
    let (count, ids) = text.split_once(':')?;
    let mut ids: Vec<i64> = if ids.is_empty() {
        Vec::new()
    } else {
        ids.split(',')
            .map(str::parse)
            .collect::<Result<_, _>>()
            .ok()?
    };
    ids.sort_unstable();
    (count.parse() == Ok(ids.len())).then_some(ids)
}

/// `statement`, planned anew at each run if `per_run`.
fn planned(statement: Statement, per_run: bool) -> Statement {
    if per_run {
        statement.planned_per_run()
    } else {
        statement
    }
}

/// `text` for a `LIKE` pattern whose escape character is `\`: `%`, `_` and `\` as
/// themselves.
fn escape_like(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

#[cfg(test)]
mod tests;
