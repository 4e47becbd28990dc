use super::*;

fn read(query: &str) -> ListRequest {
    list_request(Some(query)).unwrap_or_else(|p| panic!("{query}: {:?}", p.errors))
}

fn refused(query: &str) -> Vec<String> {
    let problem = list_request(Some(query)).expect_err(query);
    assert_eq!(problem.status, 400, "{query}");
    problem
        .errors
        .as_ref()
        .map(|errors| errors.fields().map(str::to_owned).collect())
        .unwrap_or_default()
}

#[test]
fn filters_are_read() {
    let request =
        read("filter%5Bauthor_id%5D=3,%205&filter[year]=2010..2020,1999&filter[title]=dUne");
    assert_eq!(request.filter.author_ids, [3, 5]);
    assert_eq!(
        request.filter.years,
        [
            YearRange {
                from: Some(2010),
                to: Some(2020)
            },
            YearRange::year(1999)
        ]
    );
    assert_eq!(request.filter.title.as_deref(), Some("dUne"));
    let open = read("filter[year]=2015..").filter.years;
    assert_eq!((open[0].from, open[0].to), (Some(2015), None));
    let open = read("filter[year]=..2005").filter.years;
    assert_eq!((open[0].from, open[0].to), (None, Some(2005)));
    assert!(
        read("filter[title]=&sort=&filter[year]=").is_plain(),
        "empty is absent"
    );
    assert_eq!(
        read("filter[year]=2020&filter[year]=2021").filter.years,
        [YearRange::year(2021)],
        "the last counts"
    );
    assert!(
        read("filter=3&other[x]=1").is_plain(),
        "other parameters are ignored"
    );
}

#[test]
fn sorts_are_read() {
    let keys = read("sort=-year, title").sort;
    assert_eq!(
        keys,
        [
            SortKey {
                field: SortField::Year,
                descending: true
            },
            SortKey {
                field: SortField::Title,
                descending: false
            }
        ]
    );
    assert!(read("sort=id").is_plain(), "the default order");
    assert_eq!(
        read("sort=-id,title").sort.len(),
        1,
        "nothing orders after an id"
    );
    assert_eq!(read("sort=created_at,-updated_at").sort.len(), 2);
}

#[test]
fn bad_filters_and_sorts_are_400_by_parameter() {
    for (query, field) in [
        ("filter[author_id]=0", "filter[author_id]"),
        ("filter[author_id]=x", "filter[author_id]"),
        ("filter[author_id]=3,,5", "filter[author_id]"),
        ("filter[author_id]=9223372036854775808", "filter[author_id]"),
        ("filter[year]=0", "filter[year]"),
        ("filter[year]=10000", "filter[year]"),
        ("filter[year]=2020..2010", "filter[year]"),
        ("filter[year]=..", "filter[year]"),
        ("filter[year]=20x0", "filter[year]"),
        ("filter[publisher]=x", "filter[publisher]"),
        ("filter%5Bpublisher%5D=x", "filter[publisher]"),
        ("sort=publisher", "sort"),
        ("sort=year,-year", "sort"),
        ("sort=--year", "sort"),
    ] {
        assert_eq!(refused(query), [field], "{query}");
    }
    let title = format!("filter[title]={}", "é".repeat(256));
    assert_eq!(refused(&title), ["filter[title]"]);
    assert!(list_request(Some(&format!("filter[title]={}", "é".repeat(255)))).is_ok());
    assert_eq!(
        refused("page=0&filter[year]=x&sort=y&filter[a]=1"),
        ["page", "filter[year]", "sort", "filter[a]"],
        "every error at once"
    );
}

#[test]
fn links_carry_filters_and_sort_percent_encoded() {
    let request = read("filter[year]=2010..2020&sort=-year&filter[title]=a%26b c&include=author");
    assert_eq!(
        request.carried,
        "&filter%5Byear%5D=2010..2020&filter%5Btitle%5D=a%26b%20c&sort=-year"
    );
    assert_eq!(read("page=2").carried, "");
}
