//! The conditional writes tier: [`ConditionalWrites`]' rules.

use super::vanishing::{Conditionally, author_vanishing_before};
use super::*;
use crate::store::{BookRecord, Conditional, ConditionalWrites, StoreError};

fn conditional<S: TestStore + ConditionalWrites>(store: &Fixture<S>) -> &S {
    store
}

/// `update_if` and `delete_if` ask the precondition about the book as it is (joined
/// with its author) and write only if it holds; a missing book is not asked about.
pub async fn conditional_writes_check_the_book_as_it_is(
    store: Fixture<impl TestStore + ConditionalWrites>,
) {
    let author = author(&store, "Ann").await;
    let id = create(&store, "Start", author).await;
    let current = store.get(id).await.unwrap().unwrap();
    let seen = std::sync::Mutex::new(Vec::new());
    let refuse = |book: &BookRecord| {
        seen.lock().unwrap().push(book.clone());
        false
    };
    let edit = input("Edited", author, 2002);
    let refused = conditional(&store)
        .update_if(id, &edit, at(2), &refuse)
        .await
        .unwrap();
    assert_eq!(refused, Conditional::Refused(current.clone()));
    assert_eq!(
        *seen.lock().unwrap(),
        vec![current.clone()],
        "asked about the book as it is"
    );
    assert_eq!(
        current.author_name.as_deref(),
        Some("Ann"),
        "with its author"
    );
    assert_eq!(
        store.get(id).await.unwrap(),
        Some(current.clone()),
        "nothing changed"
    );
    assert_eq!(
        conditional(&store).delete_if(id, &refuse).await.unwrap(),
        Conditional::Refused(current.clone())
    );
    assert!(store.get(id).await.unwrap().is_some());

    let unasked = |_: &BookRecord| -> bool { panic!("a missing book is not asked about") };
    let missing = conditional(&store)
        .update_if(id + 100, &edit, at(2), &unasked)
        .await;
    assert_eq!(missing.unwrap(), Conditional::Done(None));
    assert_eq!(
        conditional(&store)
            .delete_if(id + 100, &unasked)
            .await
            .unwrap(),
        Conditional::Done(false)
    );

    let allow = |_: &BookRecord| true;
    let Conditional::Done(Some(updated)) = conditional(&store)
        .update_if(id, &edit, at(2), &allow)
        .await
        .unwrap()
    else {
        panic!("updated");
    };
    assert_eq!(updated.title, "Edited");
    assert_eq!(updated.updated_at, at(2));
    assert_eq!(store.get(id).await.unwrap(), Some(updated));
    let missing_author = input("Edited", author + 100, 2002);
    let result = conditional(&store)
        .update_if(id, &missing_author, at(3), &allow)
        .await;
    assert!(
        matches!(result, Err(StoreError::AuthorNotFound(_))),
        "{result:?}"
    );
    assert_eq!(
        conditional(&store).delete_if(id, &allow).await.unwrap(),
        Conditional::Done(true)
    );
    assert_eq!(store.get(id).await.unwrap(), None);
}

/// Sixteen conditional updates at once that each expect the book as it was: exactly one
/// is written, the others are refused with the book the winner wrote.
pub async fn concurrent_conditional_updates_let_one_through(
    store: Fixture<impl TestStore + ConditionalWrites>,
) {
    let author = author(&store, "Ann").await;
    let id = create(&store, "Start", author).await;
    let unchanged = |book: &BookRecord| book.title == "Start";
    let writes = (0..16).map(|n| {
        let (store, edit) = (store.clone(), input(&format!("Writer {n}"), author, 2002));
        async move {
            conditional(&store)
                .update_if(id, &edit, at(2), &unchanged)
                .await
                .unwrap()
        }
    });
    let outcomes = futures_util::future::join_all(writes).await;
    let written: Vec<_> = outcomes
        .iter()
        .filter_map(|o| match o {
            Conditional::Done(Some(book)) => Some(book.title.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(written.len(), 1, "{outcomes:?}");
    for outcome in &outcomes {
        if let Conditional::Refused(book) = outcome {
            assert_eq!(book.title, written[0], "refused with the winner's book");
        }
    }
    assert_eq!(store.get(id).await.unwrap().unwrap().title, written[0]);
}

/// The precondition is asked about the book as a write from outside the store left it.
pub async fn conditional_writes_see_writes_from_outside(
    store: Fixture<impl TestStore + ConditionalWrites>,
) {
    let author = author(&store, "Ann").await;
    let id = create(&store, "Start", author).await;
    store
        .outside(OutsideWrite::Retitle {
            id,
            title: "Changed outside".into(),
        })
        .await;
    let unchanged = |book: &BookRecord| book.title == "Start";
    let edit = input("Mine", author, 2002);
    let refused = conditional(&store)
        .update_if(id, &edit, at(2), &unchanged)
        .await;
    match refused.unwrap() {
        Conditional::Refused(book) => assert_eq!(book.title, "Changed outside"),
        other => panic!("written over a change it never saw: {other:?}"),
    }
    let seen = |book: &BookRecord| book.title == "Changed outside";
    let written = conditional(&store).update_if(id, &edit, at(2), &seen).await;
    assert!(matches!(written.unwrap(), Conditional::Done(Some(_))));
}

/// An author deleted between validation and a conditional update: 422 on `author_id`,
/// nothing changed.
pub async fn author_vanishing_before_a_conditional_write_is_422(
    store: Fixture<impl TestStore + ConditionalWrites>,
) {
    author_vanishing_before::<_, Conditionally>(&store, &[("PUT", Some(("if-match", "*")))]).await;
}
