//! A small cache of answers that expire, for the token and access reviews (the framework's
//! `cache.NewLRUExpireCache` in front of its webhooks). Bounded: when full, expired
//! entries are dropped, and if none expired the new answer is not kept.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Instant;

/// Most answers kept at once.
const CAPACITY: usize = 4096;

/// Answers by key until their time is up. Its `Debug` shows the size only: keys may be
/// bearer tokens.
pub(crate) struct ExpiringCache<K, V> {
    entries: Mutex<HashMap<K, (V, Instant)>>,
}

impl<K, V> std::fmt::Debug for ExpiringCache<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let len = self.entries.lock().map_or(0, |entries| entries.len());
        f.debug_struct("ExpiringCache")
            .field("entries", &len)
            .finish()
    }
}

impl<K, V> Default for ExpiringCache<K, V> {
    fn default() -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Eq + Hash, V: Clone> ExpiringCache<K, V> {
    /// The answer for `key` if it has not expired.
    pub(crate) fn get(&self, key: &K) -> Option<V> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries
            .get(key)
            .filter(|(_, until)| Instant::now() < *until)
            .map(|(value, _)| value.clone())
    }

    /// Keeps `value` for `key` until `until`.
    pub(crate) fn insert(&self, key: K, value: V, until: Instant) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() >= CAPACITY {
            let now = Instant::now();
            entries.retain(|_, (_, until)| now < *until);
            if entries.len() >= CAPACITY {
                return;
            }
        }
        entries.insert(key, (value, until));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn answers_expire_and_the_cache_stays_bounded() {
        let cache = ExpiringCache::default();
        let now = Instant::now();
        cache.insert("a", 1, now + Duration::from_secs(60));
        cache.insert("b", 2, now);
        assert_eq!(cache.get(&"a"), Some(1));
        assert_eq!(cache.get(&"b"), None, "expired");
        let cache = ExpiringCache::default();
        for i in 0..CAPACITY + 10 {
            cache.insert(i, i, now + Duration::from_secs(60));
        }
        assert_eq!(cache.get(&(CAPACITY + 5)), None, "full: not kept");
        assert_eq!(cache.get(&0), Some(0));
        assert!(format!("{cache:?}").contains("entries: 4096"));
    }
}
