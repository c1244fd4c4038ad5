//! networking.k8s.io/v1 IPAddress objects for the Service cluster IPs, as kube-apiserver v1.36's allocator shows them (`kubectl get ipaddresses`): one per allocated address, named after it, with the Service as `spec.parentRef`.
//!
//! Where to start: `Registry::sync_service_ip_addresses`. The allocation itself stays the
//! bitmap of [`super::service_alloc`]; these objects follow it. A Service's create adds its
//! addresses, an update that changes them adds and removes, the Service's final removal
//! removes them, and the repair loop (`Registry::repair_service_ip_addresses`, with the
//! allocation repair) recreates missing ones and deletes those whose Service no longer holds
//! the address, as upstream's `repairip` controller. Only objects labelled
//! `ipaddress.kubernetes.io/managed-by: ipallocator.k8s.io` are touched.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::error::{ApiError, Result};
use crate::object;
use crate::pointer::At;
use crate::registry::Registry;
use crate::registry::delete::DeleteOptions;
use crate::registry::options::WriteOptions;
use crate::resources::networking::IP_ADDRESSES;
use crate::storage::ListOptions;

/// The label naming who manages an IPAddress (`networking.LabelManagedBy`).
pub const MANAGED_BY_LABEL: &str = "ipaddress.kubernetes.io/managed-by";
/// The Service allocator's value of [`MANAGED_BY_LABEL`] (`ipallocator.ControllerName`).
pub const MANAGED_BY: &str = "ipallocator.k8s.io";
/// The label giving the address family (`networking.LabelIPAddressFamily`).
pub const IP_FAMILY_LABEL: &str = "ipaddress.kubernetes.io/ip-family";

/// The cluster IPs a Service holds (`spec.clusterIPs`, else `spec.clusterIP`; `None` and
/// empty entries are not addresses).
pub fn service_cluster_ips(svc: &Value) -> BTreeSet<String> {
    let listed: BTreeSet<String> = svc
        .at("/spec/clusterIPs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|ip| is_address(ip))
        .map(str::to_owned)
        .collect();
    if !listed.is_empty() {
        return listed;
    }
    svc.at("/spec/clusterIP")
        .and_then(Value::as_str)
        .filter(|ip| is_address(ip))
        .map(|ip| BTreeSet::from([ip.to_owned()]))
        .unwrap_or_default()
}

fn is_address(ip: &str) -> bool {
    ip.parse::<std::net::IpAddr>().is_ok()
}

/// The IPAddress object of `ip` held by Service `namespace/name`.
pub fn ip_address_object(ip: &str, namespace: &str, name: &str) -> Value {
    let family = if ip.contains(':') { "IPv6" } else { "IPv4" };
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "IPAddress",
        "metadata": {
            "name": ip,
            "labels": {IP_FAMILY_LABEL: family, MANAGED_BY_LABEL: MANAGED_BY},
        },
        "spec": {"parentRef": {
            "group": "",
            "resource": "services",
            "namespace": namespace,
            "name": name,
        }},
    })
}

/// Whether `ip_address` is the allocator's record of Service `namespace/name`.
fn is_held_by(ip_address: &Value, namespace: &str, name: &str) -> bool {
    parent_field(ip_address, "resource") == "services"
        && parent_field(ip_address, "group").is_empty()
        && parent_of(ip_address) == (namespace.to_owned(), name.to_owned())
}

fn is_managed(ip_address: &Value) -> bool {
    ip_address
        .at(&format!(
            "/metadata/labels/{}",
            MANAGED_BY_LABEL.replace('/', "~1")
        ))
        .and_then(Value::as_str)
        == Some(MANAGED_BY)
}

impl Registry {
    /// Brings the IPAddress objects of one Service from what `old` held to what `new` holds
    /// (`None`: not stored, before a create or after the final removal). Failures are logged:
    /// the repair loop settles them.
    pub(crate) async fn sync_service_ip_addresses(&self, old: Option<&Value>, new: Option<&Value>) {
        let ips = |svc: Option<&Value>| svc.map(service_cluster_ips).unwrap_or_default();
        let (before, after) = (ips(old), ips(new));
        if let Some(svc) = new {
            let (namespace, name) = (object::namespace(svc), object::name(svc));
            for ip in after.difference(&before) {
                self.record_service_ip(ip, namespace, name).await;
            }
        }
        if let Some(svc) = old {
            let (namespace, name) = (object::namespace(svc), object::name(svc));
            for ip in before.difference(&after) {
                self.forget_service_ip(ip, namespace, name).await;
            }
        }
    }

    /// Creates the IPAddress of `ip` for Service `namespace/name`; one already there for the
    /// same Service is fine.
    async fn record_service_ip(&self, ip: &str, namespace: &str, name: &str) {
        let obj = ip_address_object(ip, namespace, name);
        // Boxed: a Service's create calls this, and this calls create.
        let created = Box::pin(self.create(&IP_ADDRESSES, "", obj, &WriteOptions::default())).await;
        match created {
            Ok(_) => {}
            Err(err) if err.code == 409 => {
                let held = self
                    .get(&IP_ADDRESSES, "", ip)
                    .await
                    .is_ok_and(|o| is_held_by(&o, namespace, name));
                if !held {
                    tracing::error!(ip, service = %format!("{namespace}/{name}"), "the IPAddress of a Service's cluster IP belongs to something else");
                }
            }
            Err(err) => {
                tracing::warn!(ip, %err, "creating the IPAddress of a Service's cluster IP; the repair loop retries")
            }
        }
    }

    /// Deletes the IPAddress of `ip` if Service `namespace/name` holds it.
    async fn forget_service_ip(&self, ip: &str, namespace: &str, name: &str) {
        let Ok(current) = self.get(&IP_ADDRESSES, "", ip).await else {
            return;
        };
        if !is_held_by(&current, namespace, name) {
            return;
        }
        let opts = DeleteOptions {
            precondition_uid: Some(object::uid(&current).to_owned()),
            ..DeleteOptions::default()
        };
        // Boxed: a Service's deletion calls this, and this calls delete.
        if let Err(err) = Box::pin(self.delete(&IP_ADDRESSES, "", ip, &opts)).await
            && err.code != 404
            && err.code != 409
        {
            tracing::warn!(ip, %err, "deleting the IPAddress of a released cluster IP; the repair loop retries");
        }
    }

    /// Makes the allocator's IPAddress objects match the stored Services: a missing one is
    /// created, one whose Service is gone or no longer holds the address is deleted, as
    /// upstream's `repairip` controller. `services` are the stored Services (the allocation
    /// repair has just read them).
    pub(crate) async fn repair_service_ip_addresses(&self, services: &[Value]) -> Result<()> {
        let mut held: BTreeMap<String, (String, String)> = BTreeMap::new();
        for svc in services {
            for ip in service_cluster_ips(svc) {
                held.insert(
                    ip,
                    (
                        object::namespace(svc).to_owned(),
                        object::name(svc).to_owned(),
                    ),
                );
            }
        }
        let existing = self.list_stored(&IP_ADDRESSES).await?;
        let mut recorded = BTreeSet::new();
        for ip_address in &existing {
            let ip = object::name(ip_address);
            match held.get(ip) {
                Some((namespace, name)) if is_held_by(ip_address, namespace, name) => {
                    recorded.insert(ip.to_owned());
                }
                // Someone else's record of an address a Service holds: left alone, logged.
                Some(_) if !is_managed(ip_address) => {
                    recorded.insert(ip.to_owned());
                    tracing::warn!(ip, "a cluster IP's IPAddress is not the allocator's");
                }
                Some(_) | None if is_managed(ip_address) => {
                    let (namespace, name) = parent_of(ip_address);
                    self.forget_service_ip(ip, &namespace, &name).await;
                }
                _ => {}
            }
        }
        for (ip, (namespace, name)) in &held {
            if !recorded.contains(ip) {
                self.record_service_ip(ip, namespace, name).await;
            }
        }
        Ok(())
    }

    /// Every stored object of `def`, decoded (unreadable ones skipped).
    async fn list_stored(
        &self,
        def: &crate::registry::resource::ResourceDef,
    ) -> Result<Vec<Value>> {
        let listed = self
            .storage()
            .list(ListOptions {
                prefix: def.storage_prefix(None),
                ..ListOptions::default()
            })
            .await
            .map_err(|e| ApiError::from_storage(e, def.group_resource(), ""))?;
        Ok(listed
            .kvs
            .iter()
            .filter_map(|kv| serde_json::from_slice::<Value>(&kv.value).ok())
            .collect())
    }
}

fn parent_field<'a>(ip_address: &'a Value, key: &str) -> &'a str {
    ip_address
        .at("/spec/parentRef")
        .and_then(|p| p.get(key))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The namespace and name of the IPAddress's parent.
fn parent_of(ip_address: &Value) -> (String, String) {
    (
        parent_field(ip_address, "namespace").to_owned(),
        parent_field(ip_address, "name").to_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::strategy::Strategy;

    #[test]
    fn cluster_ips_come_from_cluster_ips_then_cluster_ip() {
        let dual =
            json!({"spec": {"clusterIP": "10.96.0.5", "clusterIPs": ["10.96.0.5", "fd00::5"]}});
        assert_eq!(
            service_cluster_ips(&dual),
            BTreeSet::from(["10.96.0.5".to_owned(), "fd00::5".to_owned()])
        );
        let single = json!({"spec": {"clusterIP": "10.96.0.7"}});
        assert_eq!(service_cluster_ips(&single).len(), 1);
        for none in [
            json!({"spec": {"clusterIP": "None", "clusterIPs": ["None"]}}),
            json!({"spec": {"type": "ExternalName", "externalName": "x.example"}}),
            json!({"spec": {"clusterIP": ""}}),
        ] {
            assert!(service_cluster_ips(&none).is_empty(), "{none}");
        }
    }

    #[test]
    fn the_object_names_the_address_and_its_service() {
        let obj = ip_address_object("10.96.0.9", "web", "front");
        assert_eq!(obj["metadata"]["name"], "10.96.0.9");
        assert_eq!(obj["metadata"]["labels"][IP_FAMILY_LABEL], "IPv4");
        assert_eq!(obj["metadata"]["labels"][MANAGED_BY_LABEL], MANAGED_BY);
        assert!(is_managed(&obj));
        assert!(is_held_by(&obj, "web", "front"));
        assert!(!is_held_by(&obj, "web", "back"));
        assert_eq!(
            ip_address_object("fd00::1", "a", "b")["metadata"]["labels"][IP_FAMILY_LABEL],
            "IPv6"
        );
        assert!(
            crate::resources::service_cidr::IpAddressStrategy
                .validate(&obj)
                .is_empty()
        );
    }
}
