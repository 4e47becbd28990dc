//! Filtering and sorting the list: `filter[author_id]`, `filter[year]`, `filter[title]`
//! and `sort`, their errors, and the links that carry them.

use super::*;

const LIST_QUERIES_UNSERVED: &str = "This server cannot filter or sort the list: its store \
                                     lists every book by id. Ask without filter[...] and sort.";

/// Whether the harness's store lacks the list queries tier: then a filtered or sorted
/// list is a 501 (checked here) and a plain one is served as ever.
async fn list_queries_unserved(app: &App<impl Harness>) -> bool {
    if app.harness.tiers().list_queries {
        return false;
    }
    for query in [
        "filter[year]=2020",
        "sort=-year",
        "filter%5Btitle%5D=x&page=2",
    ] {
        let reply = app.get(&format!("/api/books?{query}")).await;
        reply.problem(501, LIST_QUERIES_UNSERVED);
    }
    let plain = app.get("/api/books?filter[title]=&sort=").await;
    drop(plain.expect(200));
    true
}

/// Books by three authors over the years, titles chosen for the title rules; the
/// authors' ids.
async fn shelf(app: &App<impl Harness>) -> (i64, i64, i64) {
    let (ann, bob, cy) = (
        app.author("Ann").await,
        app.author("Bob").await,
        app.author("Cy").await,
    );
    for (title, author, year) in [
        ("Dune", ann, "2015"),
        ("Dune Messiah", ann, "2017"),
        ("children of dune", bob, "2015"),
        ("Élan", bob, "2020"),
        ("50% off_sale", cy, "2024"),
        ("Apple", ann, "2010"),
        ("banana", cy, "2010"),
    ] {
        let pairs = [
            ("title", title),
            ("author_id", &author.to_string()),
            ("year", year),
        ];
        drop(app.form("POST", "/api/books", &pairs).await.expect(201));
    }
    (ann, bob, cy)
}

fn titles(body: &Value) -> Vec<&str> {
    body["data"]
        .as_array()
        .expect("data")
        .iter()
        .map(|book| book["title"].as_str().expect("title"))
        .collect()
}

pub async fn list_filters_and_sorts_select_and_order(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    if list_queries_unserved(&app).await {
        return;
    }
    let (ann, bob, cy) = shelf(&app).await;
    let cases = [
        (
            format!("filter[author_id]={ann}"),
            vec!["Dune", "Dune Messiah", "Apple"],
        ),
        (
            format!("filter%5Bauthor_id%5D={bob},%20{cy}&sort=title"),
            vec!["50% off_sale", "banana", "children of dune", "Élan"],
        ),
        ("filter[year]=2015".into(), vec!["Dune", "children of dune"]),
        (
            "filter[year]=2010,2024".into(),
            vec!["50% off_sale", "Apple", "banana"],
        ),
        (
            "filter[year]=2016..2020".into(),
            vec!["Dune Messiah", "Élan"],
        ),
        (
            "filter[year]=2017..".into(),
            vec!["Dune Messiah", "Élan", "50% off_sale"],
        ),
        ("filter[year]=..2010".into(), vec!["Apple", "banana"]),
        (
            "filter[title]=DUNE".into(),
            vec!["Dune", "Dune Messiah", "children of dune"],
        ),
        ("filter[title]=%25".into(), vec!["50% off_sale"]),
        ("filter[title]=f_s".into(), vec!["50% off_sale"]),
        ("filter[title]=o_f".into(), vec![]),
        ("filter[title]=%C3%A9lan".into(), vec![]),
        (
            format!("filter[author_id]={ann}&filter[year]=2015..&filter[title]=dune&sort=-year"),
            vec!["Dune Messiah", "Dune"],
        ),
        (
            "sort=-year".into(),
            vec![
                "50% off_sale",
                "Élan",
                "Dune Messiah",
                "Dune",
                "children of dune",
                "Apple",
                "banana",
            ],
        ),
        (
            "sort=title".into(),
            vec![
                "50% off_sale",
                "Apple",
                "banana",
                "children of dune",
                "Dune",
                "Dune Messiah",
                "Élan",
            ],
        ),
        (
            "sort=year,-title".into(),
            vec![
                "banana",
                "Apple",
                "Dune",
                "children of dune",
                "Dune Messiah",
                "Élan",
                "50% off_sale",
            ],
        ),
        (
            "sort=-id".into(),
            vec![
                "banana",
                "Apple",
                "50% off_sale",
                "Élan",
                "children of dune",
                "Dune Messiah",
                "Dune",
            ],
        ),
    ];
    for (query, want) in cases {
        for list in ["/api/books", "/api/books/list"] {
            let body = app.get(&format!("{list}?{query}")).await.expect(200).json();
            assert_eq!(titles(&body), want, "{list}?{query}");
            assert_eq!(body["meta"]["total"], want.len(), "{query}");
        }
    }
    // XML says the same.
    let path = format!("/api/books?filter[author_id]={ann}&sort=-year&include=author");
    let json = app.get(&path).await.expect(200).json();
    app.accept(&path, "application/xml")
        .await
        .expect(200)
        .xml()
        .assert_mirrors(&json, "book");
}

pub async fn list_filters_count_pages_and_links_carry_them(make: &impl MakeHarness) {
    let app = start(make, |c| c.with_page_size(NonZeroU32::new(2).unwrap())).await;
    if list_queries_unserved(&app).await {
        return;
    }
    shelf(&app).await;
    let body = app
        .get("/api/books?filter[year]=2010..2017&sort=-year&include=author&page=2")
        .await
        .expect(200)
        .json();
    assert_eq!(titles(&body), ["children of dune", "Apple"]);
    assert_eq!(
        body["meta"],
        json!({"page": 2, "perPage": 2, "total": 5, "totalPages": 3})
    );
    let link = |page: u64| {
        format!(
            "{BASE}/api/books?page={page}&include=author&filter%5Byear%5D=2010..2017&sort=-year"
        )
    };
    assert_eq!(
        body["links"],
        json!({"self": link(2), "first": link(1), "last": link(3), "prev": link(1), "next": link(3)})
    );
    // A link read back gives its page.
    let next = body["links"]["next"]
        .as_str()
        .unwrap()
        .trim_start_matches(BASE);
    assert_eq!(titles(&app.get(next).await.expect(200).json()), ["banana"]);
    // Reserved characters are percent-encoded, and come back decoded.
    let body = app
        .get("/api/books?filter[title]=%25%20off&filter[author_id]=1,2,3")
        .await
        .expect(200)
        .json();
    let first = body["links"]["first"].as_str().unwrap();
    assert_eq!(
        first,
        format!(
            "{BASE}/api/books?page=1&filter%5Bauthor_id%5D=1%2C2%2C3&filter%5Btitle%5D=%25%20off"
        )
    );
    // Beyond the last page: no books, the filtered total.
    let beyond = app
        .get("/api/books?filter[year]=2015&page=9")
        .await
        .expect(200)
        .json();
    assert_eq!(
        (titles(&beyond).len(), &beyond["meta"]["total"]),
        (0, &json!(2))
    );
    // Empty values are absent: the plain list, byte for byte.
    let plain = app.get("/api/books?page=1").await.expect(200).body;
    let empty = app
        .get("/api/books?page=1&filter[title]=&sort=&filter[year]=")
        .await;
    assert_eq!(empty.expect(200).body, plain);
}

pub async fn list_filter_and_sort_errors_are_400_by_parameter(make: &impl MakeHarness) {
    let app = start(make, |c| c).await;
    let cases = [
        ("filter[author_id]=0", "filter[author_id]"),
        ("filter[author_id]=3,x", "filter[author_id]"),
        ("filter[year]=10000", "filter[year]"),
        ("filter[year]=2020..2010", "filter[year]"),
        ("filter[year]=twenty", "filter[year]"),
        ("filter[publisher]=x", "filter[publisher]"),
        ("sort=publisher", "sort"),
        ("sort=year,-year", "sort"),
    ];
    for (query, parameter) in cases {
        let body = app
            .get(&format!("/api/books?{query}"))
            .await
            .problem(400, &format!("Invalid query parameter: {parameter}."));
        let errors = body["errors"].as_object().expect("errors");
        assert_eq!(errors.keys().collect::<Vec<_>>(), [parameter], "{query}");
        assert!(errors[parameter][0].is_string(), "{query}");
    }
    let unknown = app.get("/api/books?filter[publisher]=x").await.json();
    assert!(
        unknown["errors"]["filter[publisher]"][0]
            .as_str()
            .unwrap()
            .contains("author_id, year, title"),
        "the message lists the allowed filters"
    );
    let title = format!("/api/books?filter[title]={}", "x".repeat(256));
    app.get(&title)
        .await
        .problem(400, "Invalid query parameter: filter[title].");
    let several = app
        .get("/api/books?filter[year]=x&sort=nope&page=0")
        .await
        .problem(400, "Invalid query parameters: page, filter[year], sort.");
    assert_eq!(several["errors"].as_object().unwrap().len(), 3);
    // In XML, a parameter's name is no element name: <member name="filter[year]">.
    let path = "/api/books?filter[year]=x&sort=nope";
    let json = app.get(path).await.json();
    let xml = app
        .accept(path, "application/xml")
        .await
        .expect(400)
        .xml_problem();
    let errors = xml.child("errors").expect("<errors>");
    let names: Vec<_> = errors.children.iter().map(|c| c.member_name()).collect();
    assert_eq!(names, ["filter[year]", "sort"]);
    errors.assert_mirrors(&json["errors"], "message");
}
