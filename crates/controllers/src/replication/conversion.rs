//! The adapter that runs the ReplicaSet logic over ReplicationControllers, as upstream's `replication/conversion.go`: RC ↔ RS conversion, an informer adapter that keeps a ReplicaSet-shaped mirror of the RC cache, and a client adapter for the RC API.
//!
//! An RC is a ReplicaSet whose selector is a plain label map: converted, it becomes a
//! ReplicaSet with `matchLabels`, the same metadata (name, namespace, UID, resourceVersion,
//! generation, owners) and the same status fields, so the ReplicaSet controller's code runs
//! unchanged. Its writes come back through [`ApiRcClient`], which converts the other way.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::apps::v1::{
    ReplicaSet, ReplicaSetCondition, ReplicaSetSpec, ReplicaSetStatus,
};
use k8s_openapi::api::core::v1::{
    ReplicationController, ReplicationControllerCondition, ReplicationControllerSpec,
    ReplicationControllerStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kcm_machinery::informer::ResourceEventHandler;
use kcm_machinery::informer::delta::{DeletedFinalStateUnknown, DeletedObject};
use kcm_machinery::informer::store::Indexer;
use kube::api::{Api, PostParams};

use crate::replicaset::{ReplicaSetClient, ReplicaSetEventHandlers};

/// The ReplicaSet an RC converts to, as upstream's `convertRCtoRS`.
pub fn rc_to_rs(rc: &ReplicationController) -> ReplicaSet {
    let spec = rc.spec.as_ref().map(|spec| ReplicaSetSpec {
        replicas: spec.replicas,
        min_ready_seconds: spec.min_ready_seconds,
        selector: LabelSelector {
            match_labels: spec.selector.clone(),
            match_expressions: None,
        },
        template: spec.template.clone(),
    });
    let status = rc.status.as_ref().map(|s| ReplicaSetStatus {
        replicas: s.replicas,
        fully_labeled_replicas: s.fully_labeled_replicas,
        ready_replicas: s.ready_replicas,
        available_replicas: s.available_replicas,
        observed_generation: s.observed_generation,
        conditions: s.conditions.as_ref().map(|cs| {
            cs.iter()
                .map(|c| ReplicaSetCondition {
                    type_: c.type_.clone(),
                    status: c.status.clone(),
                    last_transition_time: c.last_transition_time.clone(),
                    reason: c.reason.clone(),
                    message: c.message.clone(),
                })
                .collect()
        }),
        ..ReplicaSetStatus::default()
    });
    ReplicaSet {
        metadata: rc.metadata.clone(),
        spec,
        status,
    }
}

/// Why a ReplicaSet cannot be an RC again.
#[derive(Debug, thiserror::Error)]
#[error(
    "replica set {name} has a selector with matchExpressions, which a ReplicationController cannot have"
)]
pub struct ConversionError {
    /// The object's name.
    pub name: String,
}

/// The RC a converted ReplicaSet came from, as upstream's `convertRStoRC`. Fails for
/// `matchExpressions` (an RC's selector is a map; converted RCs never have them).
pub fn rs_to_rc(rs: &ReplicaSet) -> Result<ReplicationController, ConversionError> {
    let spec = match &rs.spec {
        None => None,
        Some(spec) => {
            if spec
                .selector
                .match_expressions
                .as_ref()
                .is_some_and(|e| !e.is_empty())
            {
                return Err(ConversionError {
                    name: rs.metadata.name.clone().unwrap_or_default(),
                });
            }
            Some(ReplicationControllerSpec {
                replicas: spec.replicas,
                min_ready_seconds: spec.min_ready_seconds,
                selector: spec.selector.match_labels.clone(),
                template: spec.template.clone(),
            })
        }
    };
    let status = rs.status.as_ref().map(|s| ReplicationControllerStatus {
        replicas: s.replicas,
        fully_labeled_replicas: s.fully_labeled_replicas,
        ready_replicas: s.ready_replicas,
        available_replicas: s.available_replicas,
        observed_generation: s.observed_generation,
        conditions: s.conditions.as_ref().map(|cs| {
            cs.iter()
                .map(|c| ReplicationControllerCondition {
                    type_: c.type_.clone(),
                    status: c.status.clone(),
                    last_transition_time: c.last_transition_time.clone(),
                    reason: c.reason.clone(),
                    message: c.message.clone(),
                })
                .collect()
        }),
    });
    Ok(ReplicationController {
        metadata: rs.metadata.clone(),
        spec,
        status,
    })
}

/// Keeps a ReplicaSet-shaped mirror of the RC informer's cache and forwards every RC event,
/// converted, to the ReplicaSet controller's handlers, as upstream's `informerAdapter`.
#[derive(Clone)]
pub struct RcInformerAdapter {
    /// The converted RCs, the cache the ReplicaSet logic reads.
    mirror: Indexer<ReplicaSet>,
    /// The ReplicaSet controller's handlers.
    handlers: ReplicaSetEventHandlers,
}

impl std::fmt::Debug for RcInformerAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RcInformerAdapter").finish_non_exhaustive()
    }
}

impl RcInformerAdapter {
    /// An adapter writing into `mirror` and forwarding to `handlers`.
    pub fn new(mirror: Indexer<ReplicaSet>, handlers: ReplicaSetEventHandlers) -> Self {
        Self { mirror, handlers }
    }
}

impl ResourceEventHandler<ReplicationController> for RcInformerAdapter {
    fn on_add(&self, rc: Arc<ReplicationController>, _is_in_initial_list: bool) {
        let rs = Arc::new(rc_to_rs(&rc));
        if let Err(err) = self.mirror.update(Arc::clone(&rs)) {
            tracing::error!(%err, "mirroring a ReplicationController");
        }
        self.handlers.add_rs(&rs);
    }

    fn on_update(&self, old: Arc<ReplicationController>, new: Arc<ReplicationController>) {
        let (old, new) = (rc_to_rs(&old), Arc::new(rc_to_rs(&new)));
        if let Err(err) = self.mirror.update(Arc::clone(&new)) {
            tracing::error!(%err, "mirroring a ReplicationController");
        }
        self.handlers.update_rs(&old, &new);
    }

    fn on_delete(&self, obj: DeletedObject<ReplicationController>) {
        let rs = Arc::new(rc_to_rs(obj.object()));
        if let Err(err) = self.mirror.delete(&rs) {
            tracing::error!(%err, "removing a ReplicationController from the mirror");
        }
        let converted = match &obj {
            DeletedObject::Object(_) => DeletedObject::Object(rs),
            DeletedObject::Tombstone(t) => DeletedObject::Tombstone(DeletedFinalStateUnknown {
                key: t.key.clone(),
                obj: rs,
            }),
        };
        self.handlers.delete_rs(&converted);
    }
}

/// The ReplicaSet controller's direct API calls, made on RCs, as upstream's
/// `clientsetAdapter`: reads convert RC → RS, status writes RS → RC → RS.
#[derive(Clone)]
pub struct ApiRcClient {
    client: kube::Client,
}

impl ApiRcClient {
    /// RC calls through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }

    fn api(&self, namespace: &str) -> Api<ReplicationController> {
        Api::namespaced(self.client.clone(), namespace)
    }
}

impl std::fmt::Debug for ApiRcClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiRcClient").finish_non_exhaustive()
    }
}

#[async_trait]
impl ReplicaSetClient for ApiRcClient {
    async fn get(&self, namespace: &str, name: &str) -> Result<ReplicaSet, kube::Error> {
        self.api(namespace).get(name).await.map(|rc| rc_to_rs(&rc))
    }

    async fn update_status(&self, rs: &ReplicaSet) -> Result<ReplicaSet, kube::Error> {
        let rc = rs_to_rc(rs).map_err(|e| {
            kube::Error::Api(
                kcm_machinery::controller::api_status::invalid(
                    "replicationcontrollers",
                    &e.name,
                    &e.to_string(),
                )
                .boxed(),
            )
        })?;
        let namespace = rc.metadata.namespace.as_deref().unwrap_or_default();
        let name = rc.metadata.name.as_deref().unwrap_or_default();
        self.api(namespace)
            .replace_status(name, &PostParams::default(), &rc)
            .await
            .map(|stored| rc_to_rs(&stored))
    }
}

/// The labels of an RC's selector (its template's labels when the API server defaulted it).
pub fn rc_selector(rc: &ReplicationController) -> Option<&BTreeMap<String, String>> {
    rc.spec.as_ref().and_then(|s| s.selector.as_ref())
}

#[cfg(test)]
mod tests {
    use kcm_testing::{MetaBuilder, container, replication_controller};

    use super::*;

    #[test]
    fn conversion_round_trips() {
        let mut rc = replication_controller("rc")
            .namespace("ns")
            .uid("u")
            .resource_version("7")
            .replicas(3)
            .min_ready_seconds(5)
            .selecting(&[("app", "a")])
            .container(container("c"))
            .build();
        rc.status = Some(ReplicationControllerStatus {
            replicas: 2,
            ready_replicas: Some(1),
            observed_generation: Some(4),
            conditions: Some(vec![ReplicationControllerCondition {
                type_: "ReplicaFailure".into(),
                status: "True".into(),
                reason: Some("FailedCreate".into()),
                ..Default::default()
            }]),
            ..Default::default()
        });
        let rs = rc_to_rs(&rc);
        assert_eq!(rs.metadata, rc.metadata);
        let spec = rs.spec.clone().unwrap_or_default();
        assert_eq!(spec.replicas, Some(3));
        assert_eq!(spec.min_ready_seconds, Some(5));
        assert_eq!(spec.selector.match_labels, rc_selector(&rc).cloned());
        assert_eq!(rs.status.as_ref().map(|s| s.replicas), Some(2));
        let back = rs_to_rc(&rs).unwrap_or_default();
        assert_eq!(back, rc);
    }

    #[test]
    fn match_expressions_do_not_convert_back() {
        let mut rs = rc_to_rs(
            &replication_controller("rc")
                .selecting(&[("a", "b")])
                .build(),
        );
        if let Some(spec) = rs.spec.as_mut() {
            spec.selector.match_expressions = Some(vec![Default::default()]);
        }
        assert!(rs_to_rc(&rs).is_err());
    }
}
