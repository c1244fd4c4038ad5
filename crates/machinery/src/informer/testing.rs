//! Test support: a scripted ListerWatcher and object builders shared by the informer tests.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream;
use k8s_openapi::api::core::v1::Pod;
use kcm_testing::MetaBuilder;
use kube::api::{ListParams, WatchEvent, WatchParams};
use kube::core::watch::{Bookmark, BookmarkMeta};
use kube::core::{ListMeta, ObjectList, Status, TypeMeta};
use tokio::time::Instant;

use super::lister_watcher::{ListerWatcher, WatchStream};

pub(crate) fn pod(name: &str, rv: &str) -> Pod {
    kcm_testing::pod(name)
        .namespace("ns")
        .resource_version(rv)
        .build()
}

pub(crate) fn list(rv: &str, cont: Option<&str>, items: Vec<Pod>) -> ObjectList<Pod> {
    ObjectList {
        types: TypeMeta::list::<Pod>(),
        metadata: ListMeta {
            resource_version: Some(rv.into()),
            continue_: cont.map(str::to_owned),
            ..ListMeta::default()
        },
        items,
    }
}

pub(crate) fn api_error(code: u16, reason: &str) -> kube::Error {
    kube::Error::Api(Box::new(Status {
        code,
        reason: reason.into(),
        message: format!("{code} {reason}"),
        ..Status::default()
    }))
}

pub(crate) fn bookmark(rv: &str) -> WatchEvent<Pod> {
    WatchEvent::Bookmark(Bookmark {
        types: TypeMeta::resource::<Pod>(),
        metadata: BookmarkMeta {
            resource_version: rv.into(),
            annotations: Default::default(),
        },
    })
}

pub(crate) type ListResult = Result<ObjectList<Pod>, kube::Error>;
pub(crate) type WatchItem = Result<WatchEvent<Pod>, kube::Error>;

/// One scripted watch: an HTTP error, or a stream of items that then ends or hangs.
pub(crate) enum WatchScript {
    Fail(kube::Error),
    Stream {
        items: Vec<WatchItem>,
        hang: bool,
    },
    /// Items pushed by the test as it goes; ends when the sender is dropped.
    Channel(futures::channel::mpsc::UnboundedReceiver<WatchItem>),
}

/// A watch whose events the test pushes through the returned sender.
pub(crate) fn channel() -> (
    futures::channel::mpsc::UnboundedSender<WatchItem>,
    WatchScript,
) {
    let (tx, rx) = futures::channel::mpsc::unbounded();
    (tx, WatchScript::Channel(rx))
}

pub(crate) fn ends(items: Vec<WatchItem>) -> WatchScript {
    WatchScript::Stream { items, hang: false }
}
pub(crate) fn hangs(items: Vec<WatchItem>) -> WatchScript {
    WatchScript::Stream { items, hang: true }
}

/// A scripted ListerWatcher recording every call and when it happened. Once a script
/// runs out, lists and watches hang (so nothing loops).
#[derive(Default)]
pub(crate) struct FakeLw {
    lists: Mutex<VecDeque<ListResult>>,
    watches: Mutex<VecDeque<WatchScript>>,
    list_calls: Mutex<Vec<(Instant, ListParams)>>,
    watch_calls: Mutex<Vec<(Instant, WatchParams, String)>>,
    /// When set, every list fails with this code (ignoring `lists`).
    pub(crate) always_fail_list: Mutex<Option<u16>>,
}

impl FakeLw {
    pub(crate) fn new(lists: Vec<ListResult>, watches: Vec<WatchScript>) -> Arc<Self> {
        Arc::new(Self {
            lists: Mutex::new(lists.into()),
            watches: Mutex::new(watches.into()),
            ..Self::default()
        })
    }
    pub(crate) fn list_calls(&self) -> Vec<(Instant, ListParams)> {
        self.list_calls.lock().expect("lock").clone()
    }
    pub(crate) fn watch_calls(&self) -> Vec<(Instant, WatchParams, String)> {
        self.watch_calls.lock().expect("lock").clone()
    }
}

#[async_trait]
impl ListerWatcher<Pod> for FakeLw {
    async fn list(&self, params: &ListParams) -> Result<ObjectList<Pod>, kube::Error> {
        self.list_calls
            .lock()
            .expect("lock")
            .push((Instant::now(), params.clone()));
        if let Some(code) = *self.always_fail_list.lock().expect("lock") {
            return Err(api_error(code, "InternalError"));
        }
        let next = self.lists.lock().expect("lock").pop_front();
        match next {
            Some(result) => result,
            None => futures::future::pending().await,
        }
    }

    async fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> Result<WatchStream<Pod>, kube::Error> {
        self.watch_calls.lock().expect("lock").push((
            Instant::now(),
            params.clone(),
            resource_version.to_owned(),
        ));
        let next = self.watches.lock().expect("lock").pop_front();
        match next {
            None => Ok(stream::pending().boxed()),
            Some(WatchScript::Fail(err)) => Err(err),
            Some(WatchScript::Stream { items, hang: false }) => Ok(stream::iter(items).boxed()),
            Some(WatchScript::Channel(rx)) => Ok(rx.boxed()),
            Some(WatchScript::Stream { items, hang: true }) => {
                Ok(stream::iter(items).chain(stream::pending()).boxed())
            }
        }
    }
}
