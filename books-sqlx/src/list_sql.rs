//! The SQL of a filtered or sorted list, written once for every database from a
//! [`ListQuery`]: its `WHERE` and `ORDER BY`, every value a bound parameter (nothing a
//! client sends is ever written into the text). The page and its total come from one
//! statement, so from one snapshot (a sort alone takes the total the triggers keep); the
//! sort's keys, then the id ascending, order both the ids of the page (a deferred join:
//! the offset walks the keys' index) and the page.

use books_core::store::{ListQuery, SortField, fold_title};

use crate::statement::{Arg, Dialect, Statement};

/// PostgreSQL's ASCII-only lowering of a title (its `lower()` lowers every letter): the
/// expression its title indexes are built on.
pub(crate) const FOLD_POSTGRES: &str =
    "translate(b.title, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')";

/// A value the statements bind.
#[derive(Debug, Clone)]
enum Value {
    Int(i64),
    Int4(i32),
    Text(String),
}

/// A filtered or sorted list's statements and their arguments.
#[derive(Debug)]
pub(crate) struct ListSql {
    /// The page, each row with the list's total and the store's version.
    pub(crate) page: Statement,
    /// The total and the version alone, for an empty page.
    pub(crate) tally: Statement,
    values: Vec<Value>,
}

impl ListSql {
    /// The statements for `query` over the tables behind `schema`.
    pub(crate) fn new(dialect: Dialect, schema: &str, query: &ListQuery) -> Self {
        let mut values = vec![
            Value::Int(i64::from(query.limit)),
            Value::Int(i64::try_from(query.offset).unwrap_or(i64::MAX)),
        ];
        let mut bind = |value: Value| {
            values.push(value);
            format!("${}", values.len())
        };
        let mut conditions = Vec::new();
        let filter = &query.filter;
        if !filter.author_ids.is_empty() {
            let ids: Vec<String> = filter
                .author_ids
                .iter()
                .map(|&id| bind(Value::Int(id)))
                .collect();
            conditions.push(format!("b.author_id IN ({})", ids.join(", ")));
        }
        if !filter.years.is_empty() {
            let ranges: Vec<String> = filter
                .years
                .iter()
                .map(|range| match (range.from, range.to) {
                    (Some(from), Some(to)) if from == to => {
                        format!("b.year = {}", bind(Value::Int4(from)))
                    }
                    (Some(from), Some(to)) => format!(
                        "b.year BETWEEN {} AND {}",
                        bind(Value::Int4(from)),
                        bind(Value::Int4(to))
                    ),
                    (Some(from), None) => format!("b.year >= {}", bind(Value::Int4(from))),
                    (None, Some(to)) => format!("b.year <= {}", bind(Value::Int4(to))),
                    (None, None) => "TRUE".to_owned(),
                })
                .collect();
            conditions.push(format!("({})", ranges.join(" OR ")));
        }
        if let Some(title) = &filter.title {
            let folded = fold_title(title);
            let trigrams = title.chars().count() >= 3;
            conditions.push(match dialect {
                // Books the trigram index finds, each checked (it folds case more widely).
                Dialect::Sqlite if trigrams => format!(
                    "b.id IN (SELECT rowid FROM {{s}}books_title_trigrams \
                     WHERE books_title_trigrams MATCH {}) AND instr(lower(b.title), {}) > 0",
                    bind(Value::Text(format!("\"{}\"", title.replace('"', "\"\"")))),
                    bind(Value::Text(folded))
                ),
                Dialect::Sqlite => {
                    format!("instr(lower(b.title), {}) > 0", bind(Value::Text(folded)))
                }
                Dialect::Postgres => format!(
                    "{FOLD_POSTGRES} LIKE {}",
                    bind(Value::Text(format!("%{}%", escape_like(&folded))))
                ),
                Dialect::MySql => format!("LOCATE({}, b.title_key) > 0", bind(Value::Text(folded))),
            });
        }
        let filtered = if conditions.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", conditions.join(" AND "))
        };
        let mut order: Vec<String> = query
            .sort
            .iter()
            .map(|key| {
                let column = match key.field {
                    SortField::Id => "b.id",
                    SortField::Title => title_order(dialect),
                    SortField::Year => "b.year",
                    SortField::CreatedAt => "b.created_at",
                    SortField::UpdatedAt => "b.updated_at",
                };
                format!("{column}{}", if key.descending { " DESC" } else { "" })
            })
            .collect();
        if !query.sort.iter().any(|key| key.field == SortField::Id) {
            order.push("b.id".to_owned());
        }
        let order = order.join(", ");
        // A sort alone keeps every book: the count the triggers keep, not a scan.
        let total = if conditions.is_empty() {
            "(SELECT CAST(SUM(n) AS {int8}) FROM {s}book_count)".to_owned()
        } else {
            format!("(SELECT COUNT(*) FROM {{s}}books b{filtered})")
        };
        // SQLite would otherwise read every book in the sort's index order to join the
        // page to them (no final sort), not the page's 20 ids to their books: a `CROSS
        // JOIN` keeps its order as written (55 ms against 0.02 ms at 1M books, sorted).
        let join = if dialect == Dialect::Sqlite {
            "CROSS JOIN"
        } else {
            "JOIN"
        };
        let page = format!(
            "SELECT b.id, b.title, b.year, b.author_id, a.name AS author_name, b.created_at, \
             b.updated_at, {total} AS total, \
             (SELECT CAST(SUM(version) AS {{int8}}) FROM {{s}}book_count) AS version \
             FROM (SELECT b.id FROM {{s}}books b{filtered} ORDER BY {order} LIMIT $1 OFFSET $2) p \
             {join} {{s}}books b ON b.id = p.id LEFT JOIN {{s}}authors a ON a.id = b.author_id \
             ORDER BY {order}"
        );
        let tally = format!(
            "SELECT CAST({total} AS {{int8}}), \
             (SELECT CAST(SUM(version) AS {{int8}}) FROM {{s}}book_count)"
        );
        let (mut page, mut tally) = (
            Statement::new(&page, schema, dialect),
            Statement::new(&tally, schema, dialect),
        );
        // A plan for any pattern walks every book in id order (the trigram index is
        // worth it only for a pattern the planner sees).
        if filter.title.is_some() && dialect == Dialect::Postgres {
            (page, tally) = (page.planned_per_run(), tally.planned_per_run());
        }
        Self {
            page,
            tally,
            values,
        }
    }

    /// The arguments both statements take (each binds those it names).
    pub(crate) fn args(&self) -> Vec<Arg<'_>> {
        self.values
            .iter()
            .map(|value| match value {
                Value::Int(n) => Arg::Int(*n),
                Value::Int4(n) => Arg::Int4(*n),
                Value::Text(text) => Arg::Text(text),
            })
            .collect()
    }
}

/// What a title sorts by: ASCII letters lowered, then by code point.
fn title_order(dialect: Dialect) -> &'static str {
    match dialect {
        // SQLite's `lower()` lowers ASCII only; its default collation compares bytes.
        Dialect::Sqlite => "lower(b.title)",
        Dialect::Postgres => {
            "translate(b.title, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz') \
             COLLATE \"C\""
        }
        // A stored column of the migration's, in a binary collation.
        Dialect::MySql => "b.title_key",
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
mod tests {
    use books_core::store::{ListFilter, SortKey, YearRange};

    use super::*;

    #[test]
    fn values_are_bound_never_written_in() {
        let mut filter = ListFilter::default();
        filter.author_ids = vec![3, 5];
        filter.years = vec![
            YearRange::year(2020),
            YearRange {
                from: None,
                to: Some(2005),
            },
        ];
        filter.title = Some("Robert'); DROP TABLE books; --".into());
        let query = ListQuery::new(40, 20)
            .with_filter(filter)
            .with_sort(vec![SortKey {
                field: SortField::Title,
                descending: true,
            }]);
        for dialect in [Dialect::Sqlite, Dialect::Postgres, Dialect::MySql] {
            let sql = ListSql::new(dialect, "", &query);
            let text = sql.page.text.as_str();
            assert!(!text.contains("DROP"), "{text}");
            assert!(!text.contains("2020") && !text.contains("2005"), "{text}");
            // SQLite binds the title twice: the trigram match and the check.
            let bound = if dialect == Dialect::Sqlite { 8 } else { 7 };
            assert_eq!(sql.args().len(), bound, "{dialect:?}");
        }
        let sql = ListSql::new(Dialect::Postgres, "", &query);
        assert!(matches!(sql.args()[6], Arg::Text(t) if t == "%robert'); drop table books; --%"));
    }

    #[test]
    fn a_sort_alone_counts_nothing() {
        let sorted = ListQuery::new(0, 20).with_sort(vec![SortKey {
            field: SortField::Year,
            descending: true,
        }]);
        let mut filter = ListFilter::default();
        filter.author_ids = vec![3];
        let filtered = ListQuery::new(0, 20).with_filter(filter);
        for dialect in [Dialect::Sqlite, Dialect::Postgres, Dialect::MySql] {
            let sql = ListSql::new(dialect, "", &sorted);
            assert!(!sql.page.text.as_str().contains("COUNT(*)"), "{dialect:?}");
            let sql = ListSql::new(dialect, "", &filtered);
            assert!(sql.page.text.as_str().contains("COUNT(*)"), "{dialect:?}");
        }
    }

    #[test]
    fn like_wildcards_are_plain_characters() {
        assert_eq!(escape_like(r"100%_a\b"), r"100\%\_a\\b");
    }
}
