//! A hook that counts the store calls it is around: what a test of a wrapped store
//! ([`Hooked`](crate::store::Hooked)) checks its calls by.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::store::{StoreCall, StoreFuture, StoreHook};

/// Counts each [`StoreCall`] it is around, and lets the call through.
#[derive(Debug, Default)]
pub struct CountingHook(Mutex<HashMap<StoreCall, usize>>);

impl CountingHook {
    /// How many times `call` was made.
    pub fn count(&self, call: StoreCall) -> usize {
        let counts = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        counts.get(&call).copied().unwrap_or(0)
    }
}

impl StoreHook for CountingHook {
    fn around<'a, T: Send + 'a>(
        &'a self,
        call: StoreCall,
        run: StoreFuture<'a, T>,
    ) -> StoreFuture<'a, T> {
        let mut counts = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        *counts.entry(call).or_default() += 1;
        run
    }
}
