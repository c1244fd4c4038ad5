//! A store wrapper refusing writes larger than etcd's request limit (1.5 MiB), so every backend answers an oversized object as kube-apiserver on etcd does (413).
//!
//! etcd refuses a put whose request exceeds `--max-request-bytes` (1.5 MiB by default) with
//! `etcdserver: request is too large`; kube-apiserver hands that to the client as 413. SQLite
//! and memory have no such limit of their own, so without this a 3 MiB body could store a
//! 3 MiB object that every list and watch then carries. The check counts key and value, as
//! etcd counts the request.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;

use super::{
    Error, KeyValue, ListOptions, ListResult, Result, Revision, Storage, StorageStats, WatchStream,
};

/// etcd's default `--max-request-bytes` (1.5 MiB).
pub const DEFAULT_MAX_VALUE_BYTES: usize = 3 * 512 * 1024;

/// Why a write was refused: key and value together exceed the limit. Carried inside
/// [`Error::Backend`] so backends and their callers need no new variant; the API server
/// recognises it and answers 413.
#[derive(Debug, thiserror::Error)]
#[error("etcdserver: request is too large ({size} bytes for {key}, limit {limit})")]
pub struct ValueTooLarge {
    /// The key written.
    pub key: String,
    /// Key plus value, in bytes.
    pub size: usize,
    /// The limit in force.
    pub limit: usize,
}

/// A store that refuses creates and updates above `limit` bytes and passes everything else on.
pub struct SizeLimited {
    inner: Arc<dyn Storage>,
    limit: usize,
}

impl SizeLimited {
    /// Wraps `inner`, refusing writes whose key and value exceed `limit` bytes.
    pub fn new(inner: Arc<dyn Storage>, limit: usize) -> Self {
        Self { inner, limit }
    }

    fn check(&self, key: &str, value: &Bytes) -> Result<()> {
        let size = key.len().saturating_add(value.len());
        if size > self.limit {
            return Err(Error::Backend(Box::new(ValueTooLarge {
                key: key.to_owned(),
                size,
                limit: self.limit,
            })));
        }
        Ok(())
    }
}

#[async_trait]
impl Storage for SizeLimited {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    async fn stats(&self) -> Result<Option<StorageStats>> {
        self.inner.stats().await
    }

    async fn current_revision(&self) -> Result<Revision> {
        self.inner.current_revision().await
    }

    async fn compacted_revision(&self) -> Result<Revision> {
        self.inner.compacted_revision().await
    }

    async fn progress_revision(&self) -> Result<Revision> {
        self.inner.progress_revision().await
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<Revision> {
        self.check(key, &value)?;
        self.inner.create(key, value).await
    }

    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        self.inner.get(key).await
    }

    async fn list(&self, opts: ListOptions) -> Result<ListResult> {
        self.inner.list(opts).await
    }

    async fn update(&self, key: &str, expected: Revision, value: Bytes) -> Result<Revision> {
        self.check(key, &value)?;
        self.inner.update(key, expected, value).await
    }

    async fn delete(&self, key: &str, expected: Revision) -> Result<(Revision, KeyValue)> {
        self.inner.delete(key, expected).await
    }

    async fn watch(&self, prefix: &str, after: Revision) -> Result<WatchStream> {
        self.inner.watch(prefix, after).await
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        self.inner.compact(revision).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::MemoryStorage;

    #[tokio::test]
    async fn refuses_writes_above_the_limit_only() {
        let store = SizeLimited::new(Arc::new(MemoryStorage::new()), 16);
        // "/k" is 2 bytes: 14 bytes of value fit exactly, 15 do not.
        let rev = store
            .create("/k", Bytes::from(vec![b'a'; 14]))
            .await
            .expect("fits");
        let err = store
            .update("/k", rev, Bytes::from(vec![b'a'; 15]))
            .await
            .expect_err("too large");
        let Error::Backend(inner) = &err else {
            panic!("unexpected error {err}");
        };
        assert!(inner.is::<ValueTooLarge>(), "{err}");
        let api =
            crate::error::ApiError::from_storage(err, crate::error::GroupResource::default(), "k");
        assert_eq!((api.code, api.reason), (413, "RequestEntityTooLarge"));
        assert_eq!(api.message, "etcdserver: request is too large");
        let err = store
            .create("/other", Bytes::from(vec![b'a'; 100]))
            .await
            .expect_err("too large");
        assert!(matches!(err, Error::Backend(_)));
        // The refused writes changed nothing.
        let kv = store.get("/k").await.expect("get").expect("present");
        assert_eq!(kv.mod_revision, rev);
        assert!(store.get("/other").await.expect("get").is_none());
    }
}
