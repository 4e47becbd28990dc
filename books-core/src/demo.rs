//! Demo data: 50 authors and 45 books, for examples and first runs.

use chrono::{DateTime, Utc};

use crate::store::{AuthorStore, BookInput, BookStore, ListQuery, StoreError};

/// Books as (title, author, year); an author of `None` is stored without a name, and
/// `"(removed)"` marks an author deleted after the book was written (the book has none).
const BOOKS: &[(&str, Option<&str>, i32)] = &[
    ("Life of Pi", Some("Yann Martel"), 2001),
    ("Atonement", Some("(removed)"), 2001),
    ("Kafka on the Shore", Some("Haruki Murakami"), 2002),
    ("The Kite Runner", Some("Khaled Hosseini"), 2003),
    (
        "The Curious Incident of the Dog in the Night-Time",
        Some("Mark Haddon"),
        2003,
    ),
    (
        "Jonathan Strange & Mr Norrell",
        Some("Susanna Clarke"),
        2004,
    ),
    ("Cloud Atlas", Some("David Mitchell"), 2004),
    ("Never Let Me Go", Some("Kazuo Ishiguro"), 2005),
    ("The Book Thief", Some("Markus Zusak"), 2005),
    ("The Road", Some("Cormac McCarthy"), 2006),
    (
        "Mistborn: The Final Empire",
        Some("Brandon Sanderson"),
        2006,
    ),
    ("The Name of the Wind", Some("Patrick Rothfuss"), 2007),
    (
        "The Brief Wondrous Life of Oscar Wao",
        Some("Junot Díaz"),
        2007,
    ),
    ("The Three-Body Problem", Some("Liu Cixin"), 2008),
    ("The Hunger Games", Some("Suzanne Collins"), 2008),
    ("Anathem", Some("Neal Stephenson"), 2008),
    ("Wolf Hall", Some("Hilary Mantel"), 2009),
    ("1Q84", Some("Haruki Murakami"), 2009),
    ("The Way of Kings", Some("Brandon Sanderson"), 2010),
    ("A Visit from the Goon Squad", Some("Jennifer Egan"), 2010),
    ("The Martian", Some("Andy Weir"), 2011),
    ("The Song of Achilles", Some("Madeline Miller"), 2011),
    ("Leviathan Wakes", Some("James S. A. Corey"), 2011),
    ("Sapiens", Some("(removed)"), 2011),
    ("Gone Girl", Some("Gillian Flynn"), 2012),
    ("Ancillary Justice", Some("Ann Leckie"), 2013),
    ("Americanah", Some("Chimamanda Ngozi Adichie"), 2013),
    ("The Goldfinch", Some("Donna Tartt"), 2013),
    ("Station Eleven", Some("Emily St. John Mandel"), 2014),
    ("Annihilation", None, 2014),
    ("The Fifth Season", Some("N. K. Jemisin"), 2015),
    ("Children of Time", Some("Adrian Tchaikovsky"), 2015),
    ("The Underground Railroad", Some("Colson Whitehead"), 2016),
    ("Lincoln in the Bardo", Some("George Saunders"), 2017),
    ("Circe", Some("Madeline Miller"), 2018),
    ("The Overstory", Some("Richard Powers"), 2018),
    ("Normal People", Some("Sally Rooney"), 2018),
    ("Educated", Some("Tara Westover"), 2018),
    ("A Memory Called Empire", Some("Arkady Martine"), 2019),
    ("Gideon the Ninth", None, 2019),
    ("Piranesi", Some("Susanna Clarke"), 2020),
    (
        "The Ministry for the Future",
        Some("Kim Stanley Robinson"),
        2020,
    ),
    ("Klara and the Sun", Some("Kazuo Ishiguro"), 2021),
    ("Project Hail Mary", Some("Andy Weir"), 2021),
    (
        "Tomorrow, and Tomorrow, and Tomorrow",
        Some("Gabrielle Zevin"),
        2022,
    ),
];

/// Authors with no book in the demo data, so that there are 50 authors in all.
const MORE_AUTHORS: &[&str] = &[
    "Ursula K. Le Guin",
    "Octavia E. Butler",
    "Terry Pratchett",
    "Iain M. Banks",
    "Ted Chiang",
    "Becky Chambers",
    "Martha Wells",
    "Ken Liu",
    "China Miéville",
    "Nnedi Okorafor",
    "Lois McMaster Bujold",
    "Connie Willis",
    "Samuel R. Delany",
];

/// Loads the demo data if the store holds no book; returns whether it did.
///
/// Not atomic: two processes starting at once on one empty database may both load it.
pub async fn load_if_empty<S>(store: &S, now: DateTime<Utc>) -> Result<bool, StoreError>
where
    S: BookStore + AuthorStore + ?Sized,
{
    load_with_authors(store, store, now).await
}

/// [`load_if_empty`], the authors added and removed through `authors` (for a store whose
/// authors a host writes some other way).
pub async fn load_with_authors<S, A>(
    store: &S,
    authors: &A,
    now: DateTime<Utc>,
) -> Result<bool, StoreError>
where
    S: BookStore + ?Sized,
    A: AuthorStore + ?Sized,
{
    if store.list(&ListQuery::new(0, 1)).await?.total > 0 {
        return Ok(false);
    }
    let mut ids: Vec<(Option<&str>, i64)> = Vec::new();
    let mut removed = Vec::new();
    for &(title, author, year) in BOOKS {
        let known = ids
            .iter()
            .find(|(name, _)| author.is_some() && *name == author);
        let author_id = match known {
            Some(&(_, id)) if author != Some("(removed)") => id,
            _ => {
                let id = authors
                    .add_author(author.filter(|a| *a != "(removed)"))
                    .await?;
                if author == Some("(removed)") {
                    removed.push(id);
                } else {
                    ids.push((author, id));
                }
                id
            }
        };
        let book = BookInput {
            title: title.to_owned(),
            author_id,
            year,
        };
        store.create(&book, now).await?;
    }
    for name in MORE_AUTHORS {
        authors.add_author(Some(name)).await?;
    }
    for id in removed {
        authors.remove_author(id).await?;
    }
    Ok(true)
}
