//! `pods/{name}/binding` and the `bindings` collection: assigns a pod to a node (sets `spec.nodeName` and `PodScheduled=True`), as the scheduler does.

use serde_json::{Value, json};

use crate::error::{ApiError, GroupKind, Result};
use crate::object;
use crate::pointer::At;
use crate::registry::resource::ResourceDef;
use crate::registry::store_hooks::StoreHooks;
use crate::registry::{MAX_WRITE_RETRIES, Registry, encode_for_storage};
use crate::resources::pod::PODS;
use crate::storage;
use crate::validation::FieldError;

impl Registry {
    /// `POST .../namespaces/{ns}/bindings`: the collection form of `pods/{name}/binding`,
    /// naming the pod in the Binding's `metadata.name` (upstream serves one `BindingREST`
    /// under both). Answers the success `Status`.
    pub(crate) async fn create_binding(
        &self,
        namespace: &str,
        binding: &Value,
        dry_run: bool,
    ) -> Result<Value> {
        let name = object::name(binding);
        if name.is_empty() {
            return Err(ApiError::invalid(
                GroupKind {
                    group: "",
                    kind: "Binding",
                },
                "",
                &[FieldError::required(
                    "metadata.name",
                    "name or generateName is required",
                )],
            ));
        }
        self.bind(&PODS, namespace, name, binding, dry_run).await?;
        Ok(
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
        )
    }

    /// Binds pod `name` to the node in `binding.target`, as upstream's `BindingREST.Create`:
    /// 409 if the pod is already bound or being deleted.
    pub async fn bind(
        &self,
        pods: &ResourceDef,
        namespace: &str,
        name: &str,
        binding: &Value,
        dry_run: bool,
    ) -> Result<()> {
        let gr = pods.group_resource();
        let kind = binding
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("Binding");
        if kind != "Binding" {
            return Err(ApiError::bad_request(format!(
                "the object provided is unrecognized (must be of type Binding): kind {kind:?} does not match"
            )));
        }
        let binding_name = object::name(binding);
        if !binding_name.is_empty() && binding_name != name {
            return Err(ApiError::bad_request(
                "name in URL does not match name in Binding object",
            ));
        }
        let target_kind = binding
            .at("/target/kind")
            .and_then(Value::as_str)
            .unwrap_or("");
        let node = binding
            .at("/target/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let mut errs = Vec::new();
        if !target_kind.is_empty() && target_kind != "Node" {
            errs.push(FieldError::not_supported(
                "target.kind",
                target_kind,
                &["Node", "<empty>"],
            ));
        }
        if node.is_empty() {
            errs.push(FieldError::required("target.name", ""));
        }
        if !errs.is_empty() {
            return Err(ApiError::invalid(
                GroupKind {
                    group: "",
                    kind: "Binding",
                },
                name,
                &errs,
            ));
        }
        let uid_precondition = object::uid(binding).to_owned();
        let annotations = binding
            .at("/metadata/annotations")
            .and_then(Value::as_object)
            .cloned();
        for _ in 0..MAX_WRITE_RETRIES {
            let Some((mut pod, kv)) = self.get_kv(pods, namespace, name).await? else {
                return Err(ApiError::not_found(gr, name));
            };
            if !uid_precondition.is_empty() && uid_precondition != object::uid(&pod) {
                return Err(ApiError::conflict(
                    gr,
                    name,
                    &format!(
                        "Precondition failed: UID in precondition: {uid_precondition}, UID in object meta: {}",
                        object::uid(&pod)
                    ),
                ));
            }
            if object::deletion_timestamp(&pod).is_some() {
                return Err(ApiError::conflict(
                    gr,
                    name,
                    &format!("pod {name} is being deleted, cannot be assigned to a host"),
                ));
            }
            let current = pod
                .at("/spec/nodeName")
                .and_then(Value::as_str)
                .unwrap_or("");
            if !current.is_empty() {
                return Err(ApiError::conflict(
                    gr,
                    name,
                    &format!("pod {name} is already assigned to node {current:?}"),
                ));
            }
            pod["spec"]["nodeName"] = Value::String(node.to_owned());
            if let Some(annotations) = &annotations {
                let meta = object::metadata_mut(&mut pod);
                let target = meta.entry("annotations").or_insert_with(|| json!({}));
                if let Some(target) = target.as_object_mut() {
                    for (k, v) in annotations {
                        target.insert(k.clone(), v.clone());
                    }
                }
            }
            set_condition(&mut pod, "PodScheduled", "True");
            if dry_run {
                return Ok(());
            }
            let bytes = encode_for_storage(pods, &pod)?;
            match self.storage().update(&kv.key, kv.mod_revision, bytes).await {
                Ok(_) => return Ok(()),
                Err(storage::Error::Conflict { .. }) => continue,
                Err(e) => return Err(ApiError::from_storage(e, gr, name)),
            }
        }
        Err(ApiError::stale(gr, name))
    }
}

/// Sets a pod condition's status, with a new `lastTransitionTime` when it changes
/// (upstream's `podutil.UpdatePodCondition`).
pub fn set_condition(pod: &mut Value, kind: &str, status: &str) {
    if !pod.get("status").is_some_and(Value::is_object) {
        pod["status"] = json!({});
    }
    let now = object::now_rfc3339();
    let conditions = &mut pod["status"]["conditions"];
    if !conditions.is_array() {
        *conditions = json!([]);
    }
    if let Some(list) = conditions.as_array_mut() {
        match list
            .iter_mut()
            .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
        {
            Some(existing) => {
                if existing.get("status").and_then(Value::as_str) != Some(status) {
                    existing["status"] = Value::String(status.to_owned());
                    existing["lastTransitionTime"] = Value::String(now);
                }
            }
            None => list.push(json!({
                "type": kind,
                "status": status,
                "lastProbeTime": null,
                "lastTransitionTime": now,
            })),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_condition_adds_then_updates() {
        let mut pod = json!({"status": {"phase": "Pending"}});
        set_condition(&mut pod, "PodScheduled", "True");
        assert_eq!(pod["status"]["conditions"][0]["status"], "True");
        set_condition(&mut pod, "PodScheduled", "False");
        assert_eq!(
            pod["status"]["conditions"].as_array().map(Vec::len),
            Some(1)
        );
        assert_eq!(pod["status"]["conditions"][0]["status"], "False");
    }
}

/// The bindings resource's storage (upstream's `BindingREST`, served under both
/// `pods/{name}/binding` and `bindings`): a create binds the pod the Binding names.
#[derive(Debug, Default)]
pub struct BindingHooks;

#[async_trait::async_trait]
impl StoreHooks for BindingHooks {
    async fn create(
        &self,
        registry: &Registry,
        _def: &ResourceDef,
        namespace: &str,
        obj: &Value,
        dry_run: bool,
    ) -> Option<Result<Value>> {
        Some(registry.create_binding(namespace, obj, dry_run).await)
    }
}
