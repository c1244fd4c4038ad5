//! Event handlers: what a shared informer tells its users, as client-go's `ResourceEventHandler`.

use std::fmt;
use std::sync::Arc;

use super::delta::DeletedObject;

/// Receives an informer's notifications, as client-go's `ResourceEventHandler`.
///
/// Each registered handler gets every notification in order, from its own task and its own
/// unbounded buffer: a slow handler delays only itself. Handlers must still not block
/// (they run on the async runtime): the usual body computes a key and adds it to a work
/// queue. The objects are the cache's own: shared, read-only.
///
/// A panicking handler loses that one notification (logged) and keeps receiving, as
/// client-go's listener does.
pub trait ResourceEventHandler<K>: Send + Sync + 'static {
    /// An object appeared in the cache. `is_in_initial_list` is true for objects of the
    /// informer's first list, and for the catch-up adds a late-joining handler receives.
    fn on_add(&self, obj: Arc<K>, is_in_initial_list: bool) {
        let _ = (obj, is_in_initial_list);
    }

    /// A cached object changed, or was re-delivered by a resync or relist (then `old` and
    /// `new` have the same resourceVersion, often the same `Arc`).
    fn on_update(&self, old: Arc<K>, new: Arc<K>) {
        let _ = (old, new);
    }

    /// An object left the cache. A [`DeletedObject::Tombstone`] means the deletion was only
    /// noticed by a relist and the object is its last known state.
    fn on_delete(&self, obj: DeletedObject<K>) {
        let _ = obj;
    }
}

/// A shared handler: lets a caller keep an `Arc` to the handler it registers.
impl<K, H: ResourceEventHandler<K>> ResourceEventHandler<K> for Arc<H> {
    fn on_add(&self, obj: Arc<K>, is_in_initial_list: bool) {
        (**self).on_add(obj, is_in_initial_list);
    }
    fn on_update(&self, old: Arc<K>, new: Arc<K>) {
        (**self).on_update(old, new);
    }
    fn on_delete(&self, obj: DeletedObject<K>) {
        (**self).on_delete(obj);
    }
}

type AddFn<K> = Box<dyn Fn(Arc<K>, bool) + Send + Sync>;
type UpdateFn<K> = Box<dyn Fn(Arc<K>, Arc<K>) + Send + Sync>;
type DeleteFn<K> = Box<dyn Fn(DeletedObject<K>) + Send + Sync>;

/// A handler built from closures; unset callbacks ignore their notifications, as client-go's
/// `ResourceEventHandlerFuncs`.
///
/// ```
/// # use std::sync::Arc;
/// # use k8s_openapi::api::core::v1::Pod;
/// use kcm_machinery::informer::ResourceEventHandlerFuncs;
/// let handler = ResourceEventHandlerFuncs::<Pod>::new()
///     .add_func(|pod, _initial| println!("added {:?}", pod.metadata.name))
///     .delete_func(|deleted| println!("deleted {:?}", deleted.object().metadata.name));
/// ```
pub struct ResourceEventHandlerFuncs<K> {
    add: Option<AddFn<K>>,
    update: Option<UpdateFn<K>>,
    delete: Option<DeleteFn<K>>,
}

impl<K> Default for ResourceEventHandlerFuncs<K> {
    fn default() -> Self {
        Self {
            add: None,
            update: None,
            delete: None,
        }
    }
}

impl<K> fmt::Debug for ResourceEventHandlerFuncs<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResourceEventHandlerFuncs")
            .field("add", &self.add.is_some())
            .field("update", &self.update.is_some())
            .field("delete", &self.delete.is_some())
            .finish()
    }
}

impl<K> ResourceEventHandlerFuncs<K> {
    /// A handler that ignores everything until callbacks are set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the add callback (client-go's `AddFunc`).
    pub fn add_func(mut self, f: impl Fn(Arc<K>, bool) + Send + Sync + 'static) -> Self {
        self.add = Some(Box::new(f));
        self
    }

    /// Sets the update callback (client-go's `UpdateFunc`).
    pub fn update_func(mut self, f: impl Fn(Arc<K>, Arc<K>) + Send + Sync + 'static) -> Self {
        self.update = Some(Box::new(f));
        self
    }

    /// Sets the delete callback (client-go's `DeleteFunc`).
    pub fn delete_func(mut self, f: impl Fn(DeletedObject<K>) + Send + Sync + 'static) -> Self {
        self.delete = Some(Box::new(f));
        self
    }
}

impl<K: Send + Sync + 'static> ResourceEventHandler<K> for ResourceEventHandlerFuncs<K> {
    fn on_add(&self, obj: Arc<K>, is_in_initial_list: bool) {
        if let Some(f) = &self.add {
            f(obj, is_in_initial_list);
        }
    }

    fn on_update(&self, old: Arc<K>, new: Arc<K>) {
        if let Some(f) = &self.update {
            f(old, new);
        }
    }

    fn on_delete(&self, obj: DeletedObject<K>) {
        if let Some(f) = &self.delete {
            f(obj);
        }
    }
}

/// Passes only objects accepted by `filter` to `handler`, turning updates that cross the
/// filter into adds or deletes, as client-go's `FilteringResourceEventHandler`.
pub struct FilteringResourceEventHandler<K, H> {
    filter: Box<dyn Fn(&K) -> bool + Send + Sync>,
    handler: H,
}

impl<K, H> FilteringResourceEventHandler<K, H> {
    /// Wraps `handler`; for tombstones the filter sees the last known state.
    pub fn new(filter: impl Fn(&K) -> bool + Send + Sync + 'static, handler: H) -> Self {
        Self {
            filter: Box::new(filter),
            handler,
        }
    }
}

impl<K, H> ResourceEventHandler<K> for FilteringResourceEventHandler<K, H>
where
    K: Send + Sync + 'static,
    H: ResourceEventHandler<K>,
{
    fn on_add(&self, obj: Arc<K>, is_in_initial_list: bool) {
        if (self.filter)(&obj) {
            self.handler.on_add(obj, is_in_initial_list);
        }
    }

    fn on_update(&self, old: Arc<K>, new: Arc<K>) {
        match ((self.filter)(&old), (self.filter)(&new)) {
            (true, true) => self.handler.on_update(old, new),
            (true, false) => self.handler.on_delete(DeletedObject::Object(old)),
            (false, true) => self.handler.on_add(new, false),
            (false, false) => {}
        }
    }

    fn on_delete(&self, obj: DeletedObject<K>) {
        if (self.filter)(obj.object()) {
            self.handler.on_delete(obj);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[derive(Default)]
    struct Recorder(Mutex<Vec<String>>);

    impl ResourceEventHandler<i32> for Recorder {
        fn on_add(&self, obj: Arc<i32>, initial: bool) {
            self.0
                .lock()
                .expect("lock")
                .push(format!("add {obj} {initial}"));
        }
        fn on_update(&self, old: Arc<i32>, new: Arc<i32>) {
            self.0
                .lock()
                .expect("lock")
                .push(format!("update {old}->{new}"));
        }
        fn on_delete(&self, obj: DeletedObject<i32>) {
            self.0
                .lock()
                .expect("lock")
                .push(format!("delete {}", obj.object()));
        }
    }

    #[test]
    fn funcs_call_only_what_is_set() {
        let adds = Arc::new(Mutex::new(Vec::new()));
        let h = ResourceEventHandlerFuncs::<i32>::new().add_func({
            let adds = adds.clone();
            move |o, initial| adds.lock().expect("lock").push((*o, initial))
        });
        h.on_add(Arc::new(1), true);
        h.on_update(Arc::new(1), Arc::new(2));
        h.on_delete(DeletedObject::Object(Arc::new(2)));
        assert_eq!(*adds.lock().expect("lock"), vec![(1, true)]);
    }

    #[test]
    fn filtering_turns_crossing_updates_into_adds_and_deletes() {
        // As client-go's FilteringResourceEventHandler.OnUpdate.
        let rec = Arc::new(Recorder::default());
        let h = FilteringResourceEventHandler::new(|o: &i32| *o % 2 == 0, rec.clone());
        h.on_add(Arc::new(1), true);
        h.on_add(Arc::new(2), true);
        h.on_update(Arc::new(2), Arc::new(4));
        h.on_update(Arc::new(4), Arc::new(5));
        h.on_update(Arc::new(5), Arc::new(6));
        h.on_update(Arc::new(7), Arc::new(9));
        h.on_delete(DeletedObject::Object(Arc::new(9)));
        h.on_delete(DeletedObject::Object(Arc::new(6)));
        assert_eq!(
            *rec.0.lock().expect("lock"),
            vec![
                "add 2 true",
                "update 2->4",
                "delete 4",
                "add 6 false",
                "delete 6"
            ]
        );
    }
}
