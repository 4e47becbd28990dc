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
        // And the version and origin of the total last counted.
        let bound = if dialect == Dialect::Sqlite { 10 } else { 9 };
        assert_eq!(sql.args(None, None).len(), bound, "{dialect:?}");
        let host = BookColumns::OURS;
        let clauses = ListClauses::new(dialect, &host, &query, 1);
        let condition = clauses.condition.unwrap();
        assert!(
            !condition.contains("DROP") && !condition.contains("2020"),
            "{condition}"
        );
    }
    let sql = ListSql::new(Dialect::Postgres, "", &query);
    assert!(
        matches!(sql.args(None, None)[6], Arg::Text(t) if t == "%robert'); drop table books; --%")
    );
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
fn postgres_first_pages_are_written_into_the_stores_own_lists() {
    let mut filter = ListFilter::default();
    filter.years = vec![YearRange::year(2010)];
    let filtered = ListSql::new(
        Dialect::Postgres,
        "",
        &ListQuery::new(80, 20).with_filter(filter),
    );
    let plain = crate::store_sql::Statements::new(Dialect::Postgres, "");
    for statement in [&filtered.page, &plain.list] {
        let paged = statement.paged(20, 80);
        for text in [paged.text.as_str(), paged.numbered.as_str()] {
            assert!(text.contains("LIMIT 20 OFFSET 80"), "{text}");
            assert!(!text.contains("$1") && !text.contains("$2 "), "{text}");
        }
    }
}

/// A sorted page's ids bring their sort keys out of the subquery, and those order
/// the page, in the same directions; the id is the subquery's own.
#[test]
fn a_sorted_page_is_ordered_by_the_keys_its_ids_came_with() {
    let sort = |keys: &[(SortField, bool)]| {
        let keys = keys
            .iter()
            .map(|&(field, descending)| SortKey { field, descending });
        let query = ListQuery::new(0, 20).with_sort(keys.collect());
        ListSql::new(Dialect::Postgres, "", &query)
            .page
            .text
            .as_str()
            .to_owned()
    };
    let page = sort(&[(SortField::Year, true), (SortField::Title, false)]);
    let inner = "SELECT b.id, b.year AS k0, lower(b.title COLLATE \"C\") AS k1 FROM books b \
                 ORDER BY b.year DESC, lower(b.title COLLATE \"C\"), b.id";
    assert!(page.contains(inner), "{page}");
    assert!(page.ends_with("ORDER BY p.k0 DESC, p.k1, p.id"), "{page}");
    let page = sort(&[(SortField::Title, false), (SortField::Id, true)]);
    assert!(page.ends_with("ORDER BY p.k0, p.id DESC"), "{page}");
    assert!(!page.contains("AS k1"), "{page}");
}

/// PostgreSQL's count reads a year's or an author's values behind a scalar subquery
/// (so the kept plan is the one for any value); the page and a title's count, and the
/// other databases, read them as they are.
#[test]
fn postgres_counts_hide_their_values_unless_a_title_is_filtered() {
    let mut filter = ListFilter::default();
    filter.years = vec![YearRange::year(2010)];
    let year = ListQuery::new(0, 20).with_filter(filter.clone());
    filter.title = Some("dune".into());
    let titled = ListQuery::new(0, 20).with_filter(filter);
    let text = |dialect, query: &ListQuery| {
        let sql = ListSql::new(dialect, "", query);
        sql.page.text.as_str().to_owned()
    };
    let page = text(Dialect::Postgres, &year);
    assert!(
        page.contains("COUNT(*) FROM books b WHERE (b.year = (SELECT $3))"),
        "{page}"
    );
    assert!(
        page.contains("(SELECT b.id FROM books b WHERE (b.year = $3)"),
        "{page}"
    );
    assert!(!text(Dialect::Postgres, &titled).contains("(SELECT $"));
    assert!(!text(Dialect::Sqlite, &year).contains("(SELECT $"));
}

#[test]
fn a_host_without_a_folded_column_folds_in_the_statement() {
    let mut filter = ListFilter::default();
    filter.title = Some("Dune".into());
    let query = ListQuery::new(0, 20).with_filter(filter);
    let clauses = ListClauses::new(Dialect::MySql, &BookColumns::OURS, &query, 1);
    let condition = clauses.condition.unwrap();
    assert!(
        condition.contains("REPLACE(b.title, 'A', 'a')"),
        "{condition}"
    );
    // Compared as the sort compares, whatever the column's collation.
    assert!(condition.contains(" COLLATE utf8mb4_bin"), "{condition}");
    assert_eq!(clauses.values, [ListValue::Text("dune".into())]);
}

/// MariaDB takes `?`, in the order the values are bound; the others `$N`.
#[test]
fn each_database_gets_its_own_placeholders() {
    let mut filter = ListFilter::default();
    filter.author_ids = vec![3, 5];
    filter.title = Some("Dune".into());
    filter.years = vec![YearRange::year(2020)];
    let query = ListQuery::new(0, 20).with_filter(filter);
    let mysql = ListClauses::new(Dialect::MySql, &BookColumns::OURS, &query, 1);
    let condition = mysql.condition.unwrap();
    assert!(!condition.contains('$'), "{condition}");
    assert_eq!(
        condition.matches('?').count(),
        mysql.values.len(),
        "{condition}"
    );
    let postgres = ListClauses::new(Dialect::Postgres, &BookColumns::OURS, &query, 2);
    let condition = postgres.condition.unwrap();
    assert!(
        condition.contains("$2") && condition.contains("$5"),
        "{condition}"
    );
    assert!(
        !condition.contains("$6") && !condition.contains('?'),
        "{condition}"
    );
}

#[test]
fn like_wildcards_are_plain_characters() {
    assert_eq!(escape_like(r"100%_a\b"), r"100\%\_a\\b");
}

/// A page of kept ids takes their list alone (`$1`), so its text is one for every filter
/// whatever the types of their values, and can be written in for a replica; the ids of
/// the filter are read in one row, one more than are kept at most.
#[test]
fn a_page_of_kept_ids_is_one_statement_for_every_filter() {
    let mut year = ListFilter::default();
    year.years = vec![YearRange::year(2010)];
    let mut title = ListFilter::default();
    title.title = Some("dune".into());
    for dialect in [Dialect::Sqlite, Dialect::Postgres, Dialect::MySql] {
        let sql = |filter: &ListFilter| {
            ListSql::new(
                dialect,
                "",
                &ListQuery::new(0, 20).with_filter(filter.clone()),
            )
        };
        let (year, title) = (sql(&year), sql(&title));
        let listed = year.listed().unwrap();
        assert_eq!(
            listed.numbered.as_str(),
            title.listed().unwrap().numbered.as_str()
        );
        let ids = year.ids_arg(&[3, 14]);
        let expected = if dialect == Dialect::Postgres {
            "{3,14}"
        } else {
            "[3,14]"
        };
        assert_eq!(ids, expected);
        if dialect != Dialect::Sqlite {
            let written = listed.inline(&[Arg::Text(&ids)]).unwrap();
            assert!(!written.contains("$1"), "{written}");
        }
        let every = title.every_id().unwrap();
        let every = every.numbered.as_str();
        let limited = format!(" LIMIT {}) i) AS ids", LISTED + 1);
        assert!(!every.contains("ORDER BY"), "{every}");
        assert!(every.contains(&limited), "{every}");
    }
    // Sorted, a page is neither from a mark nor of kept ids.
    let sorted = ListQuery::new(0, 20)
        .with_filter(year)
        .with_sort(vec![SortKey {
            field: SortField::Year,
            descending: false,
        }]);
    let sql = ListSql::new(Dialect::Postgres, "", &sorted);
    assert!(!sql.by_id() && sql.listed().is_none() && sql.every_id().is_none());
}

#[test]
fn ids_are_read_in_order_and_only_all_of_them() {
    assert_eq!(ids_of("3:14,3,15"), Some(vec![3, 14, 15]));
    assert_eq!(ids_of("0:"), Some(vec![]));
    assert_eq!(ids_of("3:14,3"), None, "cut short");
    assert_eq!(ids_of("1:x"), None);
    assert_eq!(ids_of(""), None);
}
