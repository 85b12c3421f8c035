//! [`SharedListing`]: a list call whose answer the reconciles of one view of the account
//! share, per key (the account's certificates, a tier's internal rules, the routing
//! firewall companions' objects), so a resync makes it once, not once per Service.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use super::account_view::AccountView;

/// Listings of `T` by key, each kept for one view of the account. Reconciles that ask at
/// the same time wait for one listing. A listing begun before a change of what it lists
/// ended is never reused (it may miss what the change made): every change is announced
/// with [`SharedListing::changing`].
#[derive(Debug)]
pub(crate) struct SharedListing<T> {
    keys: Mutex<HashMap<String, Arc<Entry<T>>>>,
}

impl<T> Default for SharedListing<T> {
    fn default() -> Self {
        SharedListing {
            keys: Mutex::default(),
        }
    }
}

/// One key's listing.
#[derive(Debug)]
struct Entry<T> {
    /// Bumped when a change of what the key lists begins and when it ends.
    generation: AtomicU64,
    /// The listing kept, if any.
    listed: tokio::sync::Mutex<Option<Kept<T>>>,
}

/// A listing kept: the view it serves, the generation it was begun at, the listing.
type Kept<T> = (Weak<AccountView>, u64, Arc<T>);

impl<T> Default for Entry<T> {
    fn default() -> Self {
        Entry {
            generation: AtomicU64::new(0),
            listed: tokio::sync::Mutex::new(None),
        }
    }
}

/// A change in progress of what one key lists (see [`SharedListing::changing`]).
pub(crate) struct ListingChange<T> {
    entry: Arc<Entry<T>>,
}

impl<T> Drop for ListingChange<T> {
    fn drop(&mut self) {
        self.entry.generation.fetch_add(1, Ordering::SeqCst);
    }
}

impl<T> SharedListing<T> {
    /// The listing of `key` for `view`: kept, or made now with `list`.
    pub(crate) async fn get<E, Fut>(
        &self,
        view: &Arc<AccountView>,
        key: &str,
        list: impl FnOnce() -> Fut,
    ) -> Result<Arc<T>, E>
    where
        Fut: Future<Output = Result<T, E>>,
    {
        let entry = self.entry(key);
        let mut listed = entry.listed.lock().await;
        let generation = entry.generation.load(Ordering::SeqCst);
        if let Some((of, at, kept)) = listed.as_ref()
            && *at == generation
            && of.upgrade().is_some_and(|v| Arc::ptr_eq(&v, view))
        {
            return Ok(kept.clone());
        }
        let fresh = Arc::new(list().await?);
        *listed = Some((Arc::downgrade(view), generation, fresh.clone()));
        Ok(fresh)
    }

    /// Marks what `key` lists as being changed until the guard is dropped (also when the
    /// change is dropped half-way): no listing begun before its end is reused.
    pub(crate) fn changing(&self, key: &str) -> ListingChange<T> {
        let entry = self.entry(key);
        entry.generation.fetch_add(1, Ordering::SeqCst);
        ListingChange { entry }
    }

    /// Forgets the listing of `key` (a change of what it lists has ended); a listing
    /// begun before is not reused either.
    pub(crate) fn invalidate(&self, key: &str) {
        drop(self.changing(key));
    }

    fn entry(&self, key: &str) -> Arc<Entry<T>> {
        self.keys
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key.to_string())
            .or_default()
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> Arc<AccountView> {
        Arc::new(AccountView::from_parts(
            Vec::new(),
            Vec::new(),
            Vec::new(),
            Vec::new(),
        ))
    }

    #[tokio::test]
    async fn one_listing_per_view_and_none_kept_across_a_change() {
        let cache = SharedListing::<u32>::default();
        let calls = AtomicU64::new(0);
        let list = || async {
            Ok::<_, ()>(u32::try_from(calls.fetch_add(1, Ordering::SeqCst)).unwrap_or(0))
        };
        let first = view();
        assert_eq!(*cache.get(&first, "tier", list).await.unwrap(), 0);
        assert_eq!(*cache.get(&first, "tier", list).await.unwrap(), 0, "kept");
        assert_eq!(
            *cache.get(&first, "other", list).await.unwrap(),
            1,
            "per key"
        );
        let change = cache.changing("tier");
        assert_eq!(
            *cache.get(&first, "tier", list).await.unwrap(),
            2,
            "changing"
        );
        drop(change);
        assert_eq!(
            *cache.get(&first, "tier", list).await.unwrap(),
            3,
            "begun before the change ended"
        );
        assert_eq!(
            *cache.get(&first, "tier", list).await.unwrap(),
            3,
            "kept again"
        );
        assert_eq!(
            *cache.get(&view(), "tier", list).await.unwrap(),
            4,
            "a new view"
        );
    }
}
