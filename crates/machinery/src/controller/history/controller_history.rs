//! A controller's revision history over the API and an informer cache, as upstream's `history.Interface` (`realHistory`).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::Patch;
use kube::core::GroupVersionKind;
use serde_json::json;

use super::client::{RevisionClient, is_already_exists};
use super::hash::{controller_revision_name, hash_controller_revision};
use super::revisions::revision_data_bytes;
use crate::controller::api_status::{ApiStatus, error_message};
use crate::controller::controller_ref::get_controller_of;
use crate::informer::index::NAMESPACE_INDEX;
use crate::informer::keys::object_key;
use crate::informer::store::Indexer;
use crate::labels::Selector;

/// The most names [`History::create_controller_revision`] tries before giving up (upstream
/// tries forever; a server that reports every name as taken would otherwise spin).
const MAX_COLLISIONS: usize = 100;

/// The delays between the attempts of [`History::update_controller_revision`] on conflicts,
/// as client-go's `retry.DefaultBackoff` (10ms growing fivefold, four attempts).
const CONFLICT_RETRY_DELAYS: [Duration; 3] = [
    Duration::from_millis(10),
    Duration::from_millis(50),
    Duration::from_millis(250),
];

/// Why a history operation failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server refused or failed a call.
    #[error("{verb} ControllerRevision {key}: {message}", message = error_message(.source))]
    Api {
        /// `create`, `get`, `update`, `delete` or `patch`.
        verb: &'static str,
        /// The revision, `namespace/name`.
        key: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Adoption of a revision another controller owns.
    #[error("attempt to adopt revision owned by {owner}")]
    AlreadyOwned {
        /// The owner's kind and name.
        owner: String,
    },
    /// Every name tried was taken by a revision with other data.
    #[error("creating a ControllerRevision for {parent}: {tries} names collided")]
    TooManyCollisions {
        /// The parent, `namespace/name`.
        parent: String,
        /// How many names were tried.
        tries: usize,
    },
}

impl ApiStatus for Error {
    fn api_status(&self) -> Option<&kube::core::Status> {
        match self {
            Error::Api { source, .. } => source.api_status(),
            Error::AlreadyOwned { .. } | Error::TooManyCollisions { .. } => None,
        }
    }
}

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A controller's revision history: reads from an informer cache, writes through a
/// [`RevisionClient`], as upstream's `NewHistory`.
#[derive(Clone)]
pub struct History {
    client: Arc<dyn RevisionClient>,
    cache: Indexer<ControllerRevision>,
}

impl std::fmt::Debug for History {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("History").finish_non_exhaustive()
    }
}

fn meta_key(meta: &ObjectMeta) -> String {
    object_key(
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default(),
    )
}

impl History {
    /// History through `client`, listing from `cache`.
    pub fn new(client: Arc<dyn RevisionClient>, cache: Indexer<ControllerRevision>) -> Self {
        Self { client, cache }
    }

    /// The client the history writes through.
    pub fn client(&self) -> &Arc<dyn RevisionClient> {
        &self.client
    }

    /// The cached revisions of `parent`'s namespace that `selector` matches and that `parent`
    /// controls or no one does, as `ListControllerRevisions`.
    pub fn list_controller_revisions(
        &self,
        parent: &ObjectMeta,
        selector: &Selector,
    ) -> Vec<Arc<ControllerRevision>> {
        let namespace = parent.namespace.as_deref().unwrap_or_default();
        let uid = parent.uid.as_deref().unwrap_or_default();
        let in_namespace = self
            .cache
            .by_index(NAMESPACE_INDEX, namespace)
            .unwrap_or_else(|_| {
                self.cache
                    .list()
                    .into_iter()
                    .filter(|r| r.metadata.namespace.as_deref() == Some(namespace))
                    .collect()
            });
        in_namespace
            .into_iter()
            .filter(|r| selector.matches_opt(r.metadata.labels.as_ref()))
            .filter(|r| get_controller_of(&r.metadata).is_none_or(|c| c.uid == uid))
            .collect()
    }

    /// Creates `revision` for `parent`, named by the hash of its data and `collision_count`;
    /// when the name is taken by a revision with the same data that one is returned, else the
    /// count is bumped and the next name tried, as `CreateControllerRevision`.
    pub async fn create_controller_revision(
        &self,
        parent: &ObjectMeta,
        revision: &ControllerRevision,
        collision_count: &mut i32,
    ) -> Result<ControllerRevision> {
        let namespace = parent.namespace.as_deref().unwrap_or_default();
        let parent_name = parent.name.as_deref().unwrap_or_default();
        let mut clone = revision.clone();
        for _ in 0..MAX_COLLISIONS {
            let hash = hash_controller_revision(revision, Some(*collision_count));
            let name = controller_revision_name(parent_name, &hash);
            clone.metadata.name = Some(name.clone());
            let key = object_key(namespace, &name);
            match self.client.create(namespace, &clone).await {
                Ok(created) => return Ok(created),
                Err(err) if is_already_exists(&err) => {
                    let existing =
                        self.client
                            .get(namespace, &name)
                            .await
                            .map_err(|source| Error::Api {
                                verb: "get",
                                key: key.clone(),
                                source,
                            })?;
                    if revision_data_bytes(&existing) == revision_data_bytes(&clone) {
                        return Ok(existing);
                    }
                    *collision_count = collision_count.saturating_add(1);
                }
                Err(source) => {
                    return Err(Error::Api {
                        verb: "create",
                        key,
                        source,
                    });
                }
            }
        }
        Err(Error::TooManyCollisions {
            parent: meta_key(parent),
            tries: MAX_COLLISIONS,
        })
    }

    /// Deletes `revision`, as `DeleteControllerRevision`.
    pub async fn delete_controller_revision(&self, revision: &ControllerRevision) -> Result<()> {
        let namespace = revision.metadata.namespace.as_deref().unwrap_or_default();
        let name = revision.metadata.name.as_deref().unwrap_or_default();
        self.client
            .delete(namespace, name)
            .await
            .map_err(|source| Error::Api {
                verb: "delete",
                key: meta_key(&revision.metadata),
                source,
            })
    }

    /// Sets `revision`'s number to `new_revision`, retrying conflicts on the cached copy, as
    /// `UpdateControllerRevision`.
    pub async fn update_controller_revision(
        &self,
        revision: &ControllerRevision,
        new_revision: i64,
    ) -> Result<ControllerRevision> {
        let key = meta_key(&revision.metadata);
        let mut clone = revision.clone();
        let mut delays = CONFLICT_RETRY_DELAYS.iter();
        loop {
            if clone.revision == new_revision {
                return Ok(clone);
            }
            clone.revision = new_revision;
            let err = match self.client.update(&clone).await {
                Ok(updated) => return Ok(updated),
                Err(err) => err,
            };
            let retry = err.is_conflict();
            if let Some(cached) = self.cache.get_by_key(&key) {
                clone = (*cached).clone();
            }
            match delays.next() {
                Some(delay) if retry => tokio::time::sleep(*delay).await,
                _ => {
                    return Err(Error::Api {
                        verb: "update",
                        key,
                        source: err,
                    });
                }
            }
        }
    }

    /// Makes `parent` (of `parent_kind`) the controller of `revision`, which must have no
    /// controller, as `AdoptControllerRevision`.
    pub async fn adopt_controller_revision(
        &self,
        parent: &ObjectMeta,
        parent_kind: &GroupVersionKind,
        revision: &ControllerRevision,
    ) -> Result<ControllerRevision> {
        if let Some(owner) = get_controller_of(&revision.metadata) {
            return Err(Error::AlreadyOwned {
                owner: format!("{}/{}", owner.kind, owner.name),
            });
        }
        let patch = json!({"metadata": {
            "ownerReferences": [{
                "apiVersion": parent_kind.api_version(),
                "kind": parent_kind.kind,
                "name": parent.name.as_deref().unwrap_or_default(),
                "uid": parent.uid.as_deref().unwrap_or_default(),
                "controller": true,
                "blockOwnerDeletion": true,
            }],
            "uid": revision.metadata.uid.as_deref().unwrap_or_default(),
        }});
        self.patch(revision, patch).await
    }

    /// Removes `parent`'s reference from `revision`, as `ReleaseControllerRevision`: a revision
    /// already gone (NotFound) or not owned (Invalid) gives `None`.
    pub async fn release_controller_revision(
        &self,
        parent: &ObjectMeta,
        revision: &ControllerRevision,
    ) -> Result<Option<ControllerRevision>> {
        let patch = json!({"metadata": {
            "ownerReferences": [{"$patch": "delete", "uid": parent.uid.as_deref().unwrap_or_default()}],
            "uid": revision.metadata.uid.as_deref().unwrap_or_default(),
        }});
        match self.patch(revision, patch).await {
            Ok(released) => Ok(Some(released)),
            Err(err) if err.is_not_found() || err.is_invalid() => Ok(None),
            Err(err) => Err(err),
        }
    }

    async fn patch(
        &self,
        revision: &ControllerRevision,
        patch: serde_json::Value,
    ) -> Result<ControllerRevision> {
        let namespace = revision.metadata.namespace.as_deref().unwrap_or_default();
        let name = revision.metadata.name.as_deref().unwrap_or_default();
        self.client
            .patch(namespace, name, &Patch::Strategic(patch))
            .await
            .map_err(|source| Error::Api {
                verb: "patch",
                key: meta_key(&revision.metadata),
                source,
            })
    }
}

#[cfg(test)]
mod tests {
    use kcm_testing::{MetaBuilder, meta};
    use serde_json::json;

    use super::super::client::FakeRevisionClient;
    use super::super::revisions::new_controller_revision;
    use super::*;
    use crate::controller::api_status;

    fn parent(uid: &str) -> ObjectMeta {
        meta("ss1").namespace("default").uid(uid).build()
    }

    fn gvk() -> GroupVersionKind {
        GroupVersionKind::gvk("apps", "v1", "StatefulSet")
    }

    fn history() -> (
        History,
        Arc<FakeRevisionClient>,
        Indexer<ControllerRevision>,
    ) {
        let cache = Indexer::new();
        let client = Arc::new(FakeRevisionClient::with_cache(cache.clone()));
        (History::new(client.clone(), cache.clone()), client, cache)
    }

    fn revision(data: serde_json::Value, number: i64) -> ControllerRevision {
        let labels = [("app".to_owned(), "web".to_owned())].into();
        new_controller_revision(&parent("uid-1"), &gvk(), Some(&labels), data, number, None)
    }

    /// Upstream's `TestRealHistory_CreateControllerRevision`: create, return the existing
    /// revision on an identical retry, rename (bumping the count) on a real collision.
    #[tokio::test]
    async fn create_handles_existing_and_colliding_names() {
        let (h, client, cache) = history();
        let p = parent("uid-1");
        let mut count = 0;
        let first = h
            .create_controller_revision(&p, &revision(json!({"a": 1}), 1), &mut count)
            .await
            .unwrap_or_default();
        assert_eq!(count, 0);
        assert_eq!(first.metadata.namespace.as_deref(), Some("default"));
        assert_eq!(cache.len(), 1, "the fake mirrors into the cache");

        let again = h
            .create_controller_revision(&p, &revision(json!({"a": 1}), 1), &mut count)
            .await
            .unwrap_or_default();
        assert_eq!(again.metadata.name, first.metadata.name);
        assert_eq!(count, 0, "same data: no collision");

        // A revision with other data squats the name the next revision would get.
        let next = revision(json!({"a": 2}), 2);
        let taken = hash_controller_revision(&next, Some(0));
        let mut squatter = revision(json!({"other": true}), 9);
        squatter.metadata.name = Some(controller_revision_name("ss1", &taken));
        squatter.metadata.namespace = Some("default".into());
        client.insert(squatter);
        let created = h
            .create_controller_revision(&p, &next, &mut count)
            .await
            .unwrap_or_default();
        assert_eq!(count, 1);
        assert_eq!(
            created.metadata.name.as_deref(),
            Some(
                controller_revision_name("ss1", &hash_controller_revision(&next, Some(1))).as_str()
            )
        );
    }

    #[tokio::test]
    async fn create_fails_on_other_errors() {
        let (h, client, _) = history();
        client.set_error("create", Some(api_status::internal_error("boom")));
        let mut count = 0;
        let err = h
            .create_controller_revision(&parent("uid-1"), &revision(json!({}), 1), &mut count)
            .await
            .err();
        assert!(
            matches!(err, Some(Error::Api { verb: "create", .. })),
            "{err:?}"
        );
    }

    /// Upstream's `TestRealHistory_ListControllerRevisions`: the selector and ownership filter.
    #[tokio::test]
    async fn list_keeps_owned_and_orphaned_matching_revisions() {
        let (h, client, _) = history();
        let mut owned = revision(json!({"a": 1}), 1);
        owned.metadata.namespace = Some("default".into());
        let mut orphan = revision(json!({"a": 2}), 2);
        orphan.metadata.name = Some("orphan".into());
        orphan.metadata.namespace = Some("default".into());
        orphan.metadata.owner_references = None;
        let mut foreign = revision(json!({"a": 3}), 3);
        foreign.metadata.name = Some("foreign".into());
        foreign.metadata.namespace = Some("default".into());
        if let Some(refs) = foreign.metadata.owner_references.as_mut() {
            refs[0].uid = "someone-else".into();
        }
        let mut elsewhere = owned.clone();
        elsewhere.metadata.namespace = Some("other".into());
        for r in [owned, orphan, foreign, elsewhere] {
            client.insert(r);
        }
        let selector = Selector::from_map(&[("app".to_owned(), "web".to_owned())].into())
            .unwrap_or_else(|_| Selector::nothing());
        let mut names: Vec<_> = h
            .list_controller_revisions(&parent("uid-1"), &selector)
            .iter()
            .filter_map(|r| r.metadata.name.clone())
            .collect();
        names.sort();
        assert_eq!(names.len(), 2);
        assert!(names.contains(&"orphan".to_owned()));
        let other = Selector::from_map(&[("app".to_owned(), "db".to_owned())].into())
            .unwrap_or_else(|_| Selector::nothing());
        assert!(
            h.list_controller_revisions(&parent("uid-1"), &other)
                .is_empty()
        );
    }

    #[tokio::test]
    async fn update_sets_the_revision_number() {
        let (h, client, _) = history();
        let mut r = revision(json!({"a": 1}), 1);
        r.metadata.namespace = Some("default".into());
        client.insert(r.clone());
        let updated = h
            .update_controller_revision(&r, 5)
            .await
            .unwrap_or_default();
        assert_eq!(updated.revision, 5);
        client.clear_actions();
        let same = h
            .update_controller_revision(&updated, 5)
            .await
            .unwrap_or_default();
        assert_eq!(same.revision, 5);
        assert!(
            client.actions().is_empty(),
            "already at that number: no write"
        );
    }

    #[tokio::test]
    async fn adopt_and_release() {
        let (h, client, _) = history();
        let mut orphan = revision(json!({"a": 1}), 1);
        orphan.metadata.namespace = Some("default".into());
        orphan.metadata.owner_references = None;
        client.insert(orphan.clone());
        let adopted = h
            .adopt_controller_revision(&parent("uid-1"), &gvk(), &orphan)
            .await
            .unwrap_or_default();
        assert_eq!(
            get_controller_of(&adopted.metadata).map(|r| r.uid.as_str()),
            Some("uid-1")
        );
        let err = h
            .adopt_controller_revision(&parent("uid-2"), &gvk(), &adopted)
            .await
            .err();
        assert!(matches!(err, Some(Error::AlreadyOwned { .. })), "{err:?}");
        let released = h
            .release_controller_revision(&parent("uid-1"), &adopted)
            .await
            .ok()
            .flatten();
        assert!(released.is_some_and(|r| get_controller_of(&r.metadata).is_none()));
        client.set_error(
            "patch",
            Some(api_status::not_found("controllerrevisions.apps", "x")),
        );
        assert!(matches!(
            h.release_controller_revision(&parent("uid-1"), &adopted)
                .await,
            Ok(None)
        ));
    }
}
