//! One query answering for every request that asked before it was sent.

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use super::StoreError;

/// Most scheduler rounds a check waits for callers to join it before it is sent.
const MAX_ROUNDS: u32 = 16;

/// Longest a check waits for callers to join it: rounds are short (each runs what became
/// ready since the last), but a busy runtime's can be long.
const MAX_WAIT: Duration = Duration::from_millis(1);

/// A reading shared by the callers of one check.
type Reading<T> = Result<T, Arc<StoreError>>;

/// A value read by a query sent *after* the caller asked, shared by every caller that
/// asked before that query was sent: under load, one query answers a whole wave of
/// requests, and no caller ever gets a reading older than its own call.
///
/// At most one check is in flight and one queued behind it; a caller joins the queued
/// one, or queues a new one that is sent once the check in flight is done. A queued check
/// waits before it is sent while the runtime keeps bringing callers that join it (under
/// tokio: scheduler rounds, until two quiet ones, 16 rounds or 1 ms), so one query serves
/// a whole wave rather than its first few callers, for a few microseconds of latency.
/// Under tokio a check runs as a task of its own, which wakes each caller once; outside
/// tokio every caller sends a query of its own. A check whose task ends without a reading
/// (a panic, a runtime shutting down) hands its callers an error, and the next caller
/// starts afresh.
///
/// The API's cache shares its version checks this way; a store may share its own reads
/// (the PostgreSQL store shares its primary's WAL position for replica reads).
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use books_core::store::SharedCheck;
/// let check = SharedCheck::new();
/// let reading = check.read(|| async { Ok::<_, books_core::store::StoreError>(42) }).await;
/// assert_eq!(reading.unwrap(), 42);
/// # });
/// ```
pub struct SharedCheck<T> {
    queue: Arc<Mutex<Queue<T>>>,
}

struct Queue<T> {
    next_id: u64,
    /// The check in flight.
    running: Option<(u64, Arc<PendingCheck<T>>)>,
    /// The check not sent yet (it waits for `running`, then for the runtime to run what
    /// is ready); callers arriving meanwhile join it.
    queued: Option<(u64, Arc<PendingCheck<T>>)>,
    /// Callers that joined a check, ever: whether a round brought new ones.
    joined: u64,
}

/// A check not answered yet, and the callers waiting for its reading (each woken once).
struct PendingCheck<T>(Mutex<PendingState<T>>);

struct PendingState<T> {
    reading: Option<Reading<T>>,
    waiting: Vec<Waker>,
}

impl<T> std::fmt::Debug for SharedCheck<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedCheck").finish_non_exhaustive()
    }
}

impl<T: Clone + Send + 'static> Default for SharedCheck<T> {
    fn default() -> Self {
        Self::new()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl<T: Clone + Send + 'static> SharedCheck<T> {
    /// No check yet.
    pub fn new() -> Self {
        Self {
            queue: Arc::new(Mutex::new(Queue {
                next_id: 0,
                running: None,
                queued: None,
                joined: 0,
            })),
        }
    }

    /// The reading of a check sent after this call: `send` makes the query's future if
    /// this call starts the check (it is called at once or not at all; the future runs
    /// when the check is sent), else the call joins the check not sent yet.
    pub async fn read<F, Fut>(&self, send: F) -> Reading<T>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, StoreError>> + Send + 'static,
    {
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => self.join(&runtime, send).reading().await,
            Err(_) => send().await.map_err(Arc::new),
        }
    }

    /// The check not sent yet, started on `runtime` if there is none.
    fn join<F, Fut>(&self, runtime: &tokio::runtime::Handle, send: F) -> Arc<PendingCheck<T>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, StoreError>> + Send + 'static,
    {
        let mut queue = lock(&self.queue);
        queue.joined += 1;
        if let Some((_, queued)) = &queue.queued {
            return queued.clone();
        }
        queue.next_id += 1;
        let id = queue.next_id;
        // Room for a wave of 16 without growing (most are smaller).
        let wave = Arc::new(PendingCheck(Mutex::new(PendingState {
            reading: None,
            waiting: Vec::with_capacity(16),
        })));
        let after = queue.running.as_ref().map(|(_, running)| running.clone());
        queue.queued = Some((id, wave.clone()));
        let sending = CheckTask {
            wave: wave.clone(),
            queue: self.queue.clone(),
            id,
        };
        runtime.spawn(sending.send_after(after, send()));
        wave
    }
}

impl<T: Clone> PendingCheck<T> {
    /// The reading, once the check is done.
    fn reading(self: Arc<Self>) -> impl Future<Output = Reading<T>> {
        std::future::poll_fn(move |cx| {
            let mut state = lock(&self.0);
            match &state.reading {
                Some(reading) => Poll::Ready(reading.clone()),
                None => {
                    if !state.waiting.iter().any(|w| w.will_wake(cx.waker())) {
                        state.waiting.push(cx.waker().clone());
                    }
                    Poll::Pending
                }
            }
        })
    }

    /// Hands `reading` to every caller.
    fn finish(&self, reading: Reading<T>) {
        let waiting = {
            let mut state = lock(&self.0);
            state.reading = Some(reading);
            std::mem::take(&mut state.waiting)
        };
        waiting.into_iter().for_each(Waker::wake);
    }
}

/// A check task's hold on its wave and its place in the queue. Dropped before the
/// reading is in (the task panicked, or its runtime shut down), it gives the place up and
/// hands the callers an error, so no caller waits forever and the next one starts anew.
struct CheckTask<T: Clone> {
    wave: Arc<PendingCheck<T>>,
    queue: Arc<Mutex<Queue<T>>>,
    id: u64,
}

impl<T: Clone> CheckTask<T> {
    /// Sends `query` once `after` (the check in flight) is done and the callers the
    /// runtime has already brought had their turn to join; its reading goes to the wave.
    async fn send_after(
        self,
        after: Option<Arc<PendingCheck<T>>>,
        query: impl Future<Output = Result<T, StoreError>>,
    ) {
        if let Some(after) = after {
            let _ = after.reading().await;
        }
        // Under tokio a yield resumes once every ready task ran and the I/O driver was
        // polled: wait while rounds bring new callers (two at least: a resumed task runs
        // before those its round woke), up to `MAX_ROUNDS` and `MAX_WAIT`.
        let mut seen = lock(&self.queue).joined;
        let mut quiet = 0;
        let waiting = Instant::now();
        for _ in 1..=MAX_ROUNDS {
            if waiting.elapsed() >= MAX_WAIT {
                break;
            }
            tokio::task::yield_now().await;
            let joined = lock(&self.queue).joined;
            quiet = if joined == seen { quiet + 1 } else { 0 };
            if quiet == 2 {
                break;
            }
            seen = joined;
        }
        {
            let mut queue = lock(&self.queue);
            if queue.queued.as_ref().is_some_and(|(id, _)| *id == self.id) {
                queue.running = queue.queued.take();
            }
        }
        let reading = query.await.map_err(Arc::new);
        {
            let mut queue = lock(&self.queue);
            if queue.running.as_ref().is_some_and(|(id, _)| *id == self.id) {
                queue.running = None;
            }
        }
        self.wave.finish(reading);
    }
}

impl<T: Clone> Drop for CheckTask<T> {
    fn drop(&mut self) {
        if lock(&self.wave.0).reading.is_some() {
            return;
        }
        {
            let queue = &mut *lock(&self.queue);
            for slot in [&mut queue.queued, &mut queue.running] {
                if slot.as_ref().is_some_and(|(id, _)| *id == self.id) {
                    *slot = None;
                }
            }
        }
        let error = StoreError::other("the check ended without a reading");
        self.wave.finish(Err(Arc::new(error)));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;

    /// Counts the queries sent; each answers its number once the test lets it through.
    struct Gate {
        sent: AtomicU64,
        open: tokio::sync::Semaphore,
    }

    impl Gate {
        fn new(permits: usize) -> Arc<Self> {
            Arc::new(Self {
                sent: AtomicU64::new(0),
                open: tokio::sync::Semaphore::new(permits),
            })
        }

        fn sent(&self) -> u64 {
            self.sent.load(Ordering::SeqCst)
        }

        /// A query: numbered when sent, answered when the gate lets it through.
        fn query(self: &Arc<Self>) -> impl Future<Output = Result<u64, StoreError>> + use<> {
            let gate = self.clone();
            async move {
                let number = gate.sent.fetch_add(1, Ordering::SeqCst) + 1;
                gate.open.acquire().await.expect("open").forget();
                Ok(number)
            }
        }
    }

    /// Callers that ask before a check is sent share it; one that asks after it was sent
    /// waits for a check of its own, sent after the first is done.
    #[tokio::test]
    async fn checks_are_shared_but_never_older_than_the_caller() {
        let check = Arc::new(SharedCheck::new());
        let gate = Gate::new(0);
        let ask = |n: usize| {
            (0..n)
                .map(|_| {
                    let (check, gate) = (check.clone(), gate.clone());
                    tokio::spawn(async move { check.read(|| gate.query()).await.unwrap() })
                })
                .collect::<Vec<_>>()
        };
        let early = ask(5);
        while gate.sent() == 0 {
            tokio::task::yield_now().await;
        }
        let late = ask(3);
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
        assert_eq!(gate.sent(), 1, "one in flight, one queued behind it");
        gate.open.add_permits(2);
        for early in early {
            assert_eq!(early.await.unwrap(), 1);
        }
        for late in late {
            assert_eq!(late.await.unwrap(), 2, "a check sent after it asked");
        }
        assert_eq!(gate.sent(), 2);
    }

    /// A check whose task panics hands its callers an error, and the next caller starts a
    /// check of its own rather than joining the dead one.
    #[tokio::test]
    async fn a_check_that_panics_fails_its_wave_only() {
        let check = SharedCheck::new();
        let panics = check.read(|| async { panic!("a query that panics") });
        let failed = tokio::time::timeout(Duration::from_secs(5), panics).await;
        assert!(failed.expect("answered, not stuck").is_err());
        let next = check.read(|| async { Ok(2) });
        let next = tokio::time::timeout(Duration::from_secs(5), next).await;
        assert_eq!(next.expect("answered").expect("a reading"), 2);
    }

    /// A failed query is every waiting caller's error, and the next check is sent anew.
    #[tokio::test]
    async fn a_failed_check_fails_its_callers_and_the_next_is_sent() {
        let check = SharedCheck::<u64>::new();
        let failed = check.read(|| async { Err(StoreError::unavailable("down")) });
        assert!(matches!(
            &*failed.await.unwrap_err(),
            StoreError::Unavailable(_)
        ));
        assert_eq!(check.read(|| async { Ok(3) }).await.unwrap(), 3);
    }

    /// Outside tokio every caller sends its own query.
    #[test]
    fn outside_tokio_each_caller_sends_its_own() {
        let check = SharedCheck::new();
        let sent = AtomicU64::new(0);
        for expected in 1..=3 {
            let reading = futures_util::FutureExt::now_or_never(check.read(|| {
                let number = sent.fetch_add(1, Ordering::SeqCst) + 1;
                async move { Ok(number) }
            }));
            assert_eq!(reading.expect("ready").unwrap(), expected);
        }
    }
}
