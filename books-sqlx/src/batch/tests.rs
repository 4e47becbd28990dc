//! The batching's own tests: who a written row goes to, and when a write waits for the
//! callers just answered (on tokio's paused clock).

use super::*;

fn new(title: &str, author_id: i64) -> NewBook {
    NewBook {
        book: BookInput {
            title: title.to_owned(),
            author_id,
            year: 2020,
        },
        now: DateTime::UNIX_EPOCH,
        key: None,
    }
}

fn row(id: i64, new: &NewBook) -> BookRecord {
    BookRecord {
        id,
        title: new.book.title.clone(),
        year: new.book.year,
        author_id: Some(new.book.author_id),
        author_name: None,
        created_at: new.now,
        updated_at: new.now,
    }
}

#[test]
fn rows_go_to_the_books_they_match() {
    let books = [new("a", 1), new("b", 9), new("a", 1), new("c", 1)];
    let rows = vec![row(7, &books[3]), row(5, &books[0]), row(6, &books[2])];
    let created = attribute(&books, rows).expect("every row matches");
    let ids: Vec<_> = created
        .iter()
        .map(|c| match c {
            Ok(KeyedCreate::Created(book)) => Ok(book.id),
            _ => Err(()),
        })
        .collect();
    assert!(matches!(ids[..], [Ok(5), Err(_), Ok(6), Ok(7)]), "{ids:?}");
    assert!(matches!(created[1], Err(StoreError::AuthorNotFound(9))));
}

#[test]
fn a_row_changed_on_its_way_is_nobodys() {
    let books = [new("a", 1), new("b", 1)];
    let mut changed = row(2, &books[1]);
    changed.title = "B".to_owned();
    assert!(attribute(&books, vec![row(1, &books[0]), changed]).is_none());
    let twice = vec![row(1, &books[0]), row(2, &books[0])];
    assert!(attribute(&books, twice).is_none(), "one book, two rows");
}

/// A store whose every write takes [`WRITE`], and which keeps each write's size.
#[derive(Clone, Default)]
struct Slow {
    sizes: Arc<Mutex<Vec<usize>>>,
}

const WRITE: Duration = Duration::from_millis(20);

impl Slow {
    async fn wrote(&self, books: &[NewBook]) -> Vec<Created> {
        self.sizes.lock().unwrap().push(books.len());
        tokio::time::sleep(WRITE).await;
        let rows = books.iter().map(|book| row(1, book)).collect();
        attribute(books, rows).expect("the rows are the books")
    }

    fn sizes(&self) -> Vec<usize> {
        self.sizes.lock().unwrap().clone()
    }
}

impl CreateWriter for Slow {
    async fn create_one(&self, book: &NewBook) -> Created {
        let mut created = self.wrote(std::slice::from_ref(book)).await;
        created.remove(0)
    }

    async fn create_all(&self, books: &[NewBook]) -> Result<Option<Vec<Created>>, sqlx::Error> {
        Ok(Some(self.wrote(books).await))
    }
}

/// `callers` callers, each creating `each` books and pausing 1 to 4 ms (by its
/// number) between an answer and its next create: the time a client takes to send it.
async fn callers(creates: &Arc<Creates>, store: &Slow, callers: u64, each: usize) {
    let callers: Vec<_> = (0..callers)
        .map(|caller| {
            let (creates, store) = (creates.clone(), store.clone());
            tokio::spawn(async move {
                for create in 0..each {
                    if create > 0 {
                        tokio::time::sleep(Duration::from_millis(caller / 2 + 1)).await;
                    }
                    let created = creates.create(&store, new("a", 1)).await;
                    assert!(created.is_ok(), "{created:?}");
                }
            })
        })
        .collect();
    for caller in callers {
        caller.await.expect("a caller finished");
    }
}

#[tokio::test(start_paused = true)]
async fn callers_answered_together_share_their_next_write() {
    let (creates, store) = (Arc::new(Creates::default()), Slow::default());
    callers(&creates, &store, 8, 4).await;
    // Without the wait: [8, 1, 7, 1, 7, ...], the first back written alone.
    assert_eq!(store.sizes(), [8, 8, 8, 8]);
}

#[tokio::test(start_paused = true)]
async fn a_wait_nobody_fills_ends_within_five_milliseconds() {
    let (creates, store) = (Arc::new(Creates::default()), Slow::default());
    callers(&creates, &store, 8, 1).await;
    // The writer now waits for the eight; one comes.
    let asked = Instant::now();
    assert!(creates.create(&store, new("b", 1)).await.is_ok());
    assert_eq!(store.sizes(), [8, 1]);
    // The wait (the shorter of the last write's 20 ms and 5 ms), then its own write.
    assert_eq!(asked.elapsed(), MOST_WAIT + WRITE);
}

#[test]
fn waits_that_do_not_pay_are_skipped_for_longer_each_time() {
    let mut patience = Patience::default();
    let mut pattern = String::new();
    for paid in [false, false, false, true] {
        while !patience.waits() {
            pattern.push('-');
        }
        pattern.push(if paid { 'W' } else { 'w' });
        patience.record(paid);
    }
    assert!(patience.waits(), "a wait that paid ends the skipping");
    assert_eq!(pattern, "w-w--w----W");
}
