//! A map bounded in entries and in bytes: what the rendered answers and the compressed
//! bodies are kept in, one budget for both.

use std::collections::HashMap;
use std::hash::Hash;

use crate::config::CacheLimits;

/// Values with their sizes, within [`CacheLimits`]: at most `entries` of them and
/// `bytes` of their sizes together. Room is made by dropping arbitrary entries (the
/// cheapest to find: hashing spreads them).
#[derive(Debug)]
pub(crate) struct BoundedMap<K, V> {
    map: HashMap<K, (V, usize), foldhash::fast::RandomState>,
    bytes: usize,
    limits: CacheLimits,
}

impl<K: Hash + Eq + Clone, V> BoundedMap<K, V> {
    /// An empty map within `limits`.
    pub(crate) fn new(limits: CacheLimits) -> Self {
        Self {
            map: HashMap::default(),
            bytes: 0,
            limits,
        }
    }

    pub(crate) fn get(&self, key: &K) -> Option<&V> {
        self.map.get(key).map(|(value, _)| value)
    }

    pub(crate) fn contains_key(&self, key: &K) -> bool {
        self.map.contains_key(key)
    }

    /// Keeps `value` (`size` bytes) under `key`, replacing what `key` held, and drops
    /// other entries while the limits need room. A value that could never fit (larger
    /// than the byte bound, or no entries allowed) is not kept and drops nothing.
    pub(crate) fn insert(&mut self, key: K, value: V, size: usize) -> bool {
        if self.limits.entries == 0 || size > self.limits.bytes {
            return false;
        }
        self.remove(&key);
        while self.map.len() >= self.limits.entries || self.bytes + size > self.limits.bytes {
            let Some(victim) = self.map.keys().next().cloned() else {
                break;
            };
            self.remove(&victim);
        }
        self.bytes += size;
        self.map.insert(key, (value, size));
        true
    }

    fn remove(&mut self, key: &K) {
        if let Some((_, size)) = self.map.remove(key) {
            self.bytes -= size;
        }
    }

    /// Keeps only the entries `keep` says yes to.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&K, &V) -> bool) {
        let mut bytes = 0;
        self.map.retain(|key, (value, size)| {
            let kept = keep(key, value);
            if kept {
                bytes += *size;
            }
            kept
        });
        self.bytes = bytes;
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(entries: usize, bytes: usize) -> BoundedMap<u32, &'static str> {
        BoundedMap::new(CacheLimits { entries, bytes })
    }

    #[test]
    fn stays_within_both_bounds() {
        let mut kept = map(3, 100);
        for key in 0..10 {
            assert!(kept.insert(key, "v", 30));
            assert!(kept.len() <= 3 && kept.bytes() <= 100);
        }
        assert_eq!((kept.len(), kept.bytes()), (3, 90));
        assert!(kept.insert(99, "big", 100));
        assert_eq!((kept.len(), kept.bytes()), (1, 100), "room made for it");
    }

    /// A value larger than the byte bound is not kept, and empties nothing to try.
    #[test]
    fn a_value_that_cannot_fit_drops_nothing() {
        let mut kept = map(10, 100);
        kept.insert(1, "a", 40);
        kept.insert(2, "b", 40);
        assert!(!kept.insert(3, "too big", 101));
        assert_eq!((kept.len(), kept.bytes()), (2, 80));
        assert!(kept.contains_key(&1) && kept.contains_key(&2));
        let mut none = map(0, 100);
        assert!(!none.insert(1, "a", 1));
        assert_eq!(none.len(), 0);
    }

    /// Replacing a key at the entry bound takes the old value's place (and its bytes)
    /// rather than dropping an unrelated entry.
    #[test]
    fn replacing_a_key_keeps_the_others() {
        let mut kept = map(2, 100);
        kept.insert(1, "a", 40);
        kept.insert(2, "b", 40);
        assert!(kept.insert(2, "b again", 50));
        assert_eq!(kept.get(&1), Some(&"a"), "the other entry stays");
        assert_eq!(kept.get(&2), Some(&"b again"));
        assert_eq!(kept.bytes(), 90, "the old value's bytes are given back");
    }

    #[test]
    fn retain_recounts_the_bytes() {
        let mut kept = map(10, 100);
        for key in 0..5 {
            kept.insert(key, "v", 10 + key as usize);
        }
        kept.retain(|key, _| key % 2 == 0);
        assert_eq!((kept.len(), kept.bytes()), (3, 10 + 12 + 14));
    }
}
