//! The ResourceQuota admission check: refuses a create or update that would exceed a quota (403), and charges the quotas' `status.used` before the object is stored.
//!
//! As upstream's `plugin/resourcequota` (`controller.go`): [`check_request`] is its
//! `CheckRequest`, the pure decision over the namespace's quotas; `Registry::admit_quota`
//! reads the quotas from the store, decides, and writes each changed quota's `status.used`
//! with a resourceVersion precondition, re-reading and re-checking the quotas whose write
//! raced (upstream's `checkQuotas` retries) — so concurrent writes cannot overshoot.
//! Upstream serialises the admissions of a namespace through one work queue; here charges
//! are serialised by one lock, taken only when some quota applies.
//!
//! A quota applies only once the ResourceQuota controller has computed its `status.hard`
//! (as upstream); a quota whose `status.hard` names a resource its `status.used` lacks
//! refuses with "status unknown for quota".
//!
//! The entry point takes the admission attributes it needs (namespace, resource,
//! subresource, operation, new and old object, dry run), so it can move into an admission
//! chain unchanged.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, ResourceQuota, Service};
use kcm_machinery::quota::resource_list::{self, ResourceList};
use kcm_machinery::quota::{Evaluator, Object, Operation};
use serde::Deserialize;
use serde_json::Value;

use crate::error::{ApiError, Result};
use crate::object;
use crate::registry::resource::ResourceDef;
use crate::registry::{Registry, decode_stored, encode_for_storage};
use crate::resources::core::RESOURCE_QUOTAS;
use crate::storage::{self, KeyValue};

/// How many times the quotas whose status write raced are re-read and re-checked
/// (upstream's `checkQuotas(..., 3)`).
const QUOTA_UPDATE_RETRIES: usize = 3;

/// What the quota check reads of a write (upstream's `admission.Attributes`).
#[derive(Clone, Copy, Debug)]
pub struct QuotaAttributes<'a> {
    /// The object's namespace (empty for cluster-scoped resources, which no quota limits).
    pub namespace: &'a str,
    /// The object's name (for the refusal).
    pub name: &'a str,
    /// The resource written.
    pub def: &'a ResourceDef,
    /// The subresource (`""` for the main resource).
    pub subresource: &'a str,
    /// Create or update.
    pub operation: Operation,
    /// The object as it would be stored.
    pub object: &'a Value,
    /// The stored object an update replaces.
    pub old_object: Option<&'a Value>,
    /// A dry run is checked but charges nothing.
    pub dry_run: bool,
}

/// An object decoded for its evaluator.
enum Decoded {
    Pod(Box<Pod>),
    Service(Box<Service>),
    Pvc(Box<PersistentVolumeClaim>),
    Other,
}

impl Decoded {
    fn new(evaluator: &Evaluator, obj: &Value) -> Result<Self> {
        let bad = |e: serde_json::Error| ApiError::bad_request(format!("decoding for quota: {e}"));
        Ok(match evaluator {
            Evaluator::Pods => Self::Pod(Box::new(Pod::deserialize(obj).map_err(bad)?)),
            Evaluator::Services => Self::Service(Box::new(Service::deserialize(obj).map_err(bad)?)),
            Evaluator::Pvcs => Self::Pvc(Box::new(
                PersistentVolumeClaim::deserialize(obj).map_err(bad)?,
            )),
            Evaluator::Count { .. } => Self::Other,
        })
    }

    fn as_object(&self) -> Object<'_> {
        match self {
            Self::Pod(p) => Object::Pod(p),
            Self::Service(s) => Object::Service(s),
            Self::Pvc(p) => Object::Pvc(p),
            Self::Other => Object::Other,
        }
    }
}

/// Why [`check_request`] refuses: the text after `<resource> "<name>" is forbidden: `.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal(pub String);

/// The old object of an update, if it was stored (it has a resourceVersion); otherwise the
/// update is a create-on-update and charged in full.
pub struct Previous<'a> {
    /// The stored object.
    pub object: Object<'a>,
}

/// Decides a write against the namespace's quotas (upstream's `CheckRequest`, without
/// limited resources, which kube-apiserver configures none of by default). Returns each
/// quota's new `status.used` where the write changes it, `None` where it does not.
pub fn check_request(
    quotas: &[ResourceQuota],
    evaluator: &Evaluator,
    object: Object<'_>,
    previous: Option<Previous<'_>>,
    now: jiff::Timestamp,
) -> Result<Vec<Option<ResourceList>>, Refusal> {
    let mut out = vec![None; quotas.len()];
    let mut interesting = Vec::new();
    for (i, quota) in quotas.iter().enumerate() {
        if !evaluator.matches(quota, object) {
            continue;
        }
        let status = quota.status.as_ref();
        let hard = resource_list::from_quantities(status.and_then(|s| s.hard.as_ref()));
        let restricted = evaluator.matching_resources(hard.keys());
        let name = quota.metadata.name.as_deref().unwrap_or("");
        if let Err(why) = evaluator.constraints(&restricted, object) {
            return Err(Refusal(format!("failed quota: {name}: {why}")));
        }
        let used = status.and_then(|s| s.used.as_ref());
        let known = restricted
            .iter()
            .all(|r| used.is_some_and(|u| u.contains_key(r)));
        if !known {
            return Err(Refusal(format!(
                "status unknown for quota: {name}, resources: {}",
                resource_list::pretty_print_names(&restricted)
            )));
        }
        interesting.push(i);
    }
    if interesting.is_empty() {
        return Ok(out);
    }
    let input = evaluator.usage(object, now);
    let negative = resource_list::negative(&input);
    if !negative.is_empty() {
        return Err(Refusal(format!(
            "quota usage is negative for resource(s): {}",
            resource_list::pretty_print_names(&negative)
        )));
    }
    for &i in &interesting {
        let quota = &quotas[i];
        // An update is charged its growth, against the quotas that already counted the old
        // object.
        let delta = match &previous {
            Some(prev) if evaluator.matches(quota, prev.object) => {
                resource_list::subtract_non_negative(&input, &evaluator.usage(prev.object, now))
            }
            _ => input.clone(),
        };
        let delta = resource_list::remove_zeros(delta);
        if delta.is_empty() {
            continue;
        }
        let status = quota.status.as_ref();
        let hard = resource_list::from_quantities(status.and_then(|s| s.hard.as_ref()));
        let used = resource_list::from_quantities(status.and_then(|s| s.used.as_ref()));
        let requested = resource_list::mask(&delta, hard.keys());
        let new_used = resource_list::add(&used, &requested);
        let masked_new = resource_list::mask(&new_used, requested.keys());
        let (allowed, exceeded) = resource_list::less_than_or_equal(&masked_new, &hard);
        if !allowed {
            let name = quota.metadata.name.as_deref().unwrap_or("");
            return Err(Refusal(format!(
                "exceeded quota: {name}, requested: {}, used: {}, limited: {}",
                resource_list::pretty_print(&resource_list::mask(&requested, &exceeded)),
                resource_list::pretty_print(&resource_list::mask(&used, &exceeded)),
                resource_list::pretty_print(&resource_list::mask(&hard, &exceeded)),
            )));
        }
        if !resource_list::equals(&used, &new_used) {
            out[i] = Some(new_used);
        }
    }
    Ok(out)
}

impl Registry {
    /// Checks a write against the quotas of its namespace and charges them (see the module
    /// doc). Called once per create or update, after validation and before the store.
    pub(crate) async fn admit_quota(&self, attrs: QuotaAttributes<'_>) -> Result<()> {
        if attrs.namespace.is_empty() || !attrs.def.namespaced || !self.admission().resource_quota()
        {
            return Ok(());
        }
        let Some(quota_def) = self.served(&RESOURCE_QUOTAS) else {
            return Ok(());
        };
        let evaluator = Evaluator::for_resource(&attrs.def.group, &attrs.def.plural);
        if !evaluator.handles(attrs.operation, attrs.subresource) {
            return Ok(());
        }
        // The common case, a namespace without quotas, costs one look at the object cache
        // (consistent with the store), or one list of an empty prefix.
        let prefix = RESOURCE_QUOTAS.storage_prefix(Some(attrs.namespace));
        let none = match self.object_cache.list(quota_def, &prefix).await {
            Some(cached) => cached.is_empty(),
            None => self
                .list_quotas(quota_def, attrs.namespace)
                .await?
                .is_empty(),
        };
        if none {
            return Ok(());
        }
        let new = Decoded::new(&evaluator, attrs.object)?;
        let old = match attrs.old_object {
            Some(old) if !object::resource_version(old).is_empty() => {
                Some(Decoded::new(&evaluator, old)?)
            }
            _ => None,
        };
        let forbid = |Refusal(why): Refusal| {
            ApiError::forbidden(attrs.def.group_resource(), attrs.name, &why)
        };
        let _serialised = self.quota_lock.lock().await;
        // Quotas already charged for this write; a retry re-checks only the others.
        let mut charged: BTreeSet<String> = BTreeSet::new();
        let mut last_conflict = None;
        for _ in 0..=QUOTA_UPDATE_RETRIES {
            let stored: Vec<(ResourceQuota, Value, KeyValue)> = self
                .list_quotas(quota_def, attrs.namespace)
                .await?
                .into_iter()
                .filter(|(q, _, _)| !charged.contains(q.metadata.name.as_deref().unwrap_or("")))
                .collect();
            let quotas: Vec<ResourceQuota> = stored.iter().map(|(q, _, _)| q.clone()).collect();
            let previous = old.as_ref().map(|o| Previous {
                object: o.as_object(),
            });
            let updates = check_request(
                &quotas,
                &evaluator,
                new.as_object(),
                previous,
                jiff::Timestamp::now(),
            )
            .map_err(forbid)?;
            if attrs.dry_run {
                return Ok(());
            }
            let mut raced = false;
            for ((quota, mut value, kv), used) in stored.into_iter().zip(updates) {
                let Some(used) = used else { continue };
                let name = quota.metadata.name.clone().unwrap_or_default();
                value["status"]["used"] = serde_json::to_value(resource_list::to_quantities(&used))
                    .map_err(ApiError::internal)?;
                let bytes = encode_for_storage(quota_def, &value)?;
                match self.storage().update(&kv.key, kv.mod_revision, bytes).await {
                    Ok(_) => {
                        charged.insert(name);
                    }
                    Err(storage::Error::Conflict { .. }) => {
                        raced = true;
                        last_conflict = Some(name);
                    }
                    Err(e) => {
                        return Err(ApiError::from_storage(
                            e,
                            RESOURCE_QUOTAS.group_resource(),
                            &name,
                        ));
                    }
                }
            }
            if !raced {
                return Ok(());
            }
        }
        Err(ApiError::stale(
            RESOURCE_QUOTAS.group_resource(),
            last_conflict.as_deref().unwrap_or(""),
        ))
    }

    /// The namespace's quotas as stored: typed, as JSON, and with their revision.
    async fn list_quotas(
        &self,
        def: &ResourceDef,
        namespace: &str,
    ) -> Result<Vec<(ResourceQuota, Value, KeyValue)>> {
        let page = self
            .storage()
            .list(storage::ListOptions {
                prefix: RESOURCE_QUOTAS.storage_prefix(Some(namespace)),
                ..Default::default()
            })
            .await
            .map_err(|e| ApiError::from_storage(e, RESOURCE_QUOTAS.group_resource(), ""))?;
        let mut out = Vec::with_capacity(page.kvs.len());
        for kv in page.kvs {
            let value = decode_stored(def, &kv)?;
            let quota = ResourceQuota::deserialize(&value)
                .map_err(|e| ApiError::internal(format!("decoding quota {}: {e}", kv.key)))?;
            out.push((quota, value, kv));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn quota(name: &str, hard: Value, used: Option<Value>) -> ResourceQuota {
        let mut status = json!({"hard": hard.clone()});
        if let Some(used) = used {
            status["used"] = used;
        }
        serde_json::from_value(
            json!({"metadata": {"name": name}, "spec": {"hard": hard}, "status": status}),
        )
        .expect("quota")
    }

    fn pod(spec: Value) -> Pod {
        serde_json::from_value(
            json!({"metadata": {"name": "p", "resourceVersion": "1"}, "spec": spec}),
        )
        .expect("pod")
    }

    fn now() -> jiff::Timestamp {
        jiff::Timestamp::UNIX_EPOCH
    }

    fn used_of(list: &Option<ResourceList>) -> Option<String> {
        list.as_ref().map(resource_list::pretty_print)
    }

    #[test]
    fn pod_creates_against_quotas() {
        let best_effort = pod(json!({"containers": [{"name": "app"}]}));
        let with_cpu = pod(
            json!({"containers": [{"name": "app", "resources": {"requests": {"cpu": "500m"}}}]}),
        );
        struct Case {
            name: &'static str,
            quota: ResourceQuota,
            pod: Pod,
            want: Result<Option<&'static str>, &'static str>,
        }
        let cases = [
            Case {
                name: "room left",
                quota: quota("q", json!({"pods": "2"}), Some(json!({"pods": "1"}))),
                pod: best_effort.clone(),
                want: Ok(Some("pods=2")),
            },
            Case {
                name: "full",
                quota: quota("q", json!({"pods": "2"}), Some(json!({"pods": "2"}))),
                pod: best_effort.clone(),
                want: Err("exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2"),
            },
            Case {
                name: "status unknown",
                quota: quota(
                    "q",
                    json!({"pods": "2", "requests.cpu": "1"}),
                    Some(json!({"pods": "0"})),
                ),
                pod: with_cpu.clone(),
                want: Err("status unknown for quota: q, resources: pods,requests.cpu"),
            },
            Case {
                name: "cpu over",
                quota: quota(
                    "compute",
                    json!({"requests.cpu": "1", "pods": "5"}),
                    Some(json!({"requests.cpu": "800m", "pods": "1"})),
                ),
                pod: with_cpu.clone(),
                want: Err(
                    "exceeded quota: compute, requested: requests.cpu=500m, used: requests.cpu=800m, limited: requests.cpu=1",
                ),
            },
            Case {
                name: "cpu quota requires requests",
                quota: quota(
                    "compute",
                    json!({"requests.cpu": "1"}),
                    Some(json!({"requests.cpu": "0"})),
                ),
                pod: best_effort.clone(),
                want: Err("failed quota: compute: must specify requests.cpu for: app"),
            },
            Case {
                name: "unrelated quota",
                quota: quota(
                    "svc",
                    json!({"services": "1"}),
                    Some(json!({"services": "1"})),
                ),
                pod: best_effort.clone(),
                want: Ok(None),
            },
            Case {
                name: "object count",
                quota: quota(
                    "count",
                    json!({"count/pods": "3"}),
                    Some(json!({"count/pods": "1"})),
                ),
                pod: best_effort.clone(),
                want: Ok(Some("count/pods=2")),
            },
        ];
        for case in cases {
            let got = check_request(
                std::slice::from_ref(&case.quota),
                &Evaluator::Pods,
                Object::Pod(&case.pod),
                None,
                now(),
            );
            match (got, case.want) {
                (Ok(updates), Ok(want)) => {
                    assert_eq!(used_of(&updates[0]).as_deref(), want, "case {}", case.name)
                }
                (Err(Refusal(got)), Err(want)) => assert_eq!(got, want, "case {}", case.name),
                (got, want) => panic!("case {}: got {got:?}, want {want:?}", case.name),
            }
        }
    }

    #[test]
    fn an_uncomputed_quota_does_not_apply() {
        let q: ResourceQuota = serde_json::from_value(
            json!({"metadata": {"name": "q"}, "spec": {"hard": {"pods": "0"}}}),
        )
        .expect("quota");
        let p = pod(json!({"containers": [{"name": "app"}]}));
        let got = check_request(&[q], &Evaluator::Pods, Object::Pod(&p), None, now());
        assert_eq!(got, Ok(vec![None]));
    }

    #[test]
    fn updates_charge_only_their_growth() {
        let evaluator = Evaluator::Services;
        let q = quota(
            "q",
            json!({"services.nodeports": "2", "services": "5"}),
            Some(json!({"services.nodeports": "1", "services": "1"})),
        );
        let old: Service = serde_json::from_value(
            json!({"metadata": {}, "spec": {"type": "NodePort", "ports": [{"port": 80}]}}),
        )
        .expect("svc");
        let grown: Service = serde_json::from_value(json!({"metadata": {}, "spec": {"type": "NodePort", "ports": [{"port": 80}, {"port": 81}]}})).expect("svc");
        let got = check_request(
            std::slice::from_ref(&q),
            &evaluator,
            Object::Service(&grown),
            Some(Previous {
                object: Object::Service(&old),
            }),
            now(),
        )
        .expect("fits");
        assert_eq!(
            used_of(&got[0]).as_deref(),
            Some("services=1,services.nodeports=2")
        );
        let same = check_request(
            std::slice::from_ref(&q),
            &evaluator,
            Object::Service(&old),
            Some(Previous {
                object: Object::Service(&old),
            }),
            now(),
        )
        .expect("fits");
        assert_eq!(got.len(), 1);
        assert_eq!(same, vec![None]);
    }

    #[test]
    fn every_matching_quota_must_fit() {
        let p = pod(json!({"containers": [{"name": "app"}]}));
        let roomy = quota("a", json!({"pods": "10"}), Some(json!({"pods": "0"})));
        let full = quota(
            "b",
            json!({"count/pods": "1"}),
            Some(json!({"count/pods": "1"})),
        );
        let got = check_request(
            &[roomy, full],
            &Evaluator::Pods,
            Object::Pod(&p),
            None,
            now(),
        );
        assert_eq!(
            got,
            Err(Refusal("exceeded quota: b, requested: count/pods=1, used: count/pods=1, limited: count/pods=1".to_owned()))
        );
    }
}
