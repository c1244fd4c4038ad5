//! The `default/kubernetes` Service and Endpoints, kept by kube-apiserver's bootstrap controller (`kubernetesservice`).

use std::net::IpAddr;

use serde_json::{Value, json};

use crate::error::Result;
use crate::registry::Registry;
use crate::registry::options::WriteOptions;
use crate::registry::resource::ResourceDef;
use crate::registry::service_ip::ServiceIpRange;
use crate::registry::update::Target;
use crate::resources::{core, discovery, service};

/// The Service's and Endpoints' name.
pub const KUBERNETES_SERVICE_NAME: &str = "kubernetes";
/// Their namespace.
pub const KUBERNETES_SERVICE_NAMESPACE: &str = "default";
/// The Service port (upstream's fixed `ServicePort`, 443).
pub const KUBERNETES_SERVICE_PORT: i32 = 443;
/// How often kube-apiserver re-checks the Service and Endpoints (`--endpoint-reconciler`
/// interval, 10 s).
pub const KUBERNETES_SERVICE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);

/// The `default/kubernetes` Service for a server serving on `secure_port`, with the first
/// address of `range`, as upstream's `CreateOrUpdateMasterServiceIfNeeded` creates it.
pub fn kubernetes_service(range: &ServiceIpRange, secure_port: u16) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": KUBERNETES_SERVICE_NAME,
            "namespace": KUBERNETES_SERVICE_NAMESPACE,
            "labels": {"component": "apiserver", "provider": "kubernetes"},
        },
        "spec": {
            "type": "ClusterIP",
            "clusterIP": range.kubernetes_ip().to_string(),
            "ipFamilyPolicy": "SingleStack",
            "sessionAffinity": "None",
            "ports": [{
                "name": "https",
                "port": KUBERNETES_SERVICE_PORT,
                "protocol": "TCP",
                "targetPort": secure_port,
            }],
        },
    })
}

/// The `default/kubernetes` EndpointSlice mirroring the Endpoints' first subset, as upstream's
/// `endpointSliceFromEndpoints`: named and labelled (`kubernetes.io/service-name`) after the
/// Service, each address a ready endpoint, the subset's ports. `None` when there is no subset
/// or an address is loopback or unspecified, which EndpointSlice validation refuses
/// (`ValidateNonSpecialIP`): a server advertising one keeps no slice.
pub fn kubernetes_endpoint_slice(subsets: &Value) -> Option<Value> {
    let subset = subsets.get(0)?;
    let ips: Vec<IpAddr> = subset
        .get("addresses")?
        .as_array()?
        .iter()
        .filter_map(|a| a.get("ip")?.as_str()?.parse().ok())
        .collect();
    if ips.is_empty() || ips.iter().any(|ip| ip.is_loopback() || ip.is_unspecified()) {
        return None;
    }
    let address_type = if ips.iter().all(IpAddr::is_ipv6) {
        "IPv6"
    } else {
        "IPv4"
    };
    let endpoints: Vec<Value> = ips
        .iter()
        .filter(|ip| ip.is_ipv6() == (address_type == "IPv6"))
        .map(|ip| json!({"addresses": [ip.to_string()], "conditions": {"ready": true}}))
        .collect();
    Some(json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": KUBERNETES_SERVICE_NAME,
            "namespace": KUBERNETES_SERVICE_NAMESPACE,
            "labels": {"kubernetes.io/service-name": KUBERNETES_SERVICE_NAME},
        },
        "addressType": address_type,
        "endpoints": endpoints,
        "ports": subset.get("ports").cloned().unwrap_or_else(|| json!([])),
    }))
}

/// The Endpoints subsets advertising the server at `ip:secure_port`.
pub fn kubernetes_subsets(ip: IpAddr, secure_port: u16) -> Value {
    json!([{
        "addresses": [{"ip": ip.to_string()}],
        "ports": [{"name": "https", "port": secure_port, "protocol": "TCP"}],
    }])
}

impl Registry {
    /// Creates the `default/kubernetes` Service if it is missing (an existing one is left
    /// as is, as upstream since 1.17), and creates or repairs the `default/kubernetes`
    /// Endpoints so they list `advertise:secure_port` only (upstream's endpoint reconciler
    /// for a single server), and the `kubernetes` EndpointSlice mirroring them (see
    /// [`kubernetes_endpoint_slice`]).
    pub async fn ensure_kubernetes_service(
        &self,
        advertise: IpAddr,
        secure_port: u16,
    ) -> Result<()> {
        self.ensure_kubernetes_service_subsets(
            secure_port,
            kubernetes_subsets(advertise, secure_port),
        )
        .await
    }

    /// As [`Registry::ensure_kubernetes_service`] for several API servers sharing one store
    /// (upstream's lease endpoint reconciler): renews this server's lease at `now` (Unix
    /// seconds) and makes the Endpoints list every server whose lease is live.
    pub async fn reconcile_kubernetes_endpoints(
        &self,
        advertise: IpAddr,
        secure_port: u16,
        now: i64,
    ) -> Result<()> {
        self.renew_apiserver_lease(advertise, secure_port, now)
            .await?;
        let mut live = self.live_apiservers(now).await?;
        if !live.contains(&(advertise, secure_port)) {
            live.push((advertise, secure_port));
        }
        let subsets = crate::registry::apiserver_leases::apiserver_subsets(&live);
        self.ensure_kubernetes_service_subsets(secure_port, subsets)
            .await
    }

    /// Creates the Service if missing and makes the Endpoints hold `subsets`.
    async fn ensure_kubernetes_service_subsets(
        &self,
        secure_port: u16,
        subsets: Value,
    ) -> Result<()> {
        if let Some(def) = self.served(&service::SERVICES)
            && self
                .get_kv(def, KUBERNETES_SERVICE_NAMESPACE, KUBERNETES_SERVICE_NAME)
                .await?
                .is_none()
        {
            self.create_kubernetes_object(
                def,
                kubernetes_service(self.service_ip_range(), secure_port),
            )
            .await?;
        }
        // The Endpoints first: a slice that cannot be written never keeps them stale.
        let slice = kubernetes_endpoint_slice(&subsets);
        self.ensure_kubernetes_endpoints(subsets).await?;
        match slice {
            Some(slice) => self.ensure_kubernetes_endpoint_slice(slice).await,
            None => Ok(()),
        }
    }

    /// Creates the `default/kubernetes` Endpoints with `subsets`, or repairs them to hold
    /// exactly those.
    async fn ensure_kubernetes_endpoints(&self, subsets: Value) -> Result<()> {
        let Some(def) = self.served(&core::ENDPOINTS) else {
            return Ok(());
        };
        let existing = self
            .get_kv(def, KUBERNETES_SERVICE_NAMESPACE, KUBERNETES_SERVICE_NAME)
            .await?;
        match existing {
            None => {
                let body = json!({
                    "apiVersion": "v1",
                    "kind": "Endpoints",
                    "metadata": {
                        "name": KUBERNETES_SERVICE_NAME,
                        "namespace": KUBERNETES_SERVICE_NAMESPACE,
                        "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"},
                    },
                    "subsets": subsets,
                });
                self.create_kubernetes_object(def, body).await
            }
            Some((ep, _)) if ep.get("subsets") == Some(&subsets) => Ok(()),
            Some((mut ep, _)) => {
                ep["subsets"] = subsets;
                self.replace_kubernetes_object(def, ep).await
            }
        }
    }

    /// Creates the `kubernetes` EndpointSlice as `want`, or updates it when its endpoints,
    /// ports or labels differ; a changed address type is a delete and a create, as upstream's
    /// `EnsureEndpointSliceFromEndpoints`.
    async fn ensure_kubernetes_endpoint_slice(&self, want: Value) -> Result<()> {
        let Some(def) = self.served(&discovery::ENDPOINT_SLICES) else {
            return Ok(());
        };
        let existing = self
            .get_kv(def, KUBERNETES_SERVICE_NAMESPACE, KUBERNETES_SERVICE_NAME)
            .await?;
        let Some((mut slice, _)) = existing else {
            return self.create_kubernetes_object(def, want).await;
        };
        if slice.get("addressType") != want.get("addressType") {
            self.delete(
                def,
                KUBERNETES_SERVICE_NAMESPACE,
                KUBERNETES_SERVICE_NAME,
                &crate::registry::delete::DeleteOptions::default(),
            )
            .await?;
            return self.create_kubernetes_object(def, want).await;
        }
        let same = ["endpoints", "ports"]
            .iter()
            .all(|f| slice.get(f) == want.get(f))
            && slice.pointer("/metadata/labels") == want.pointer("/metadata/labels");
        if same {
            return Ok(());
        }
        for f in ["endpoints", "ports"] {
            slice[f] = want[f].clone();
        }
        slice["metadata"]["labels"] = want["metadata"]["labels"].clone();
        self.replace_kubernetes_object(def, slice).await
    }

    /// Creates `body`, one of the `default/kubernetes` objects of `def`; another writer
    /// having stored it since the read is no error.
    async fn create_kubernetes_object(&self, def: &ResourceDef, body: Value) -> Result<()> {
        match self
            .create(
                def,
                KUBERNETES_SERVICE_NAMESPACE,
                body,
                &WriteOptions::default(),
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.reason == "AlreadyExists" => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Writes `obj` over the `default/kubernetes` object of `def` (its read
    /// resourceVersion guards the write).
    async fn replace_kubernetes_object(&self, def: &ResourceDef, obj: Value) -> Result<()> {
        self.update(
            def,
            KUBERNETES_SERVICE_NAMESPACE,
            KUBERNETES_SERVICE_NAME,
            obj,
            Target::Main,
            &WriteOptions::default(),
        )
        .await
        .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_targets_the_secure_port_on_443() {
        let svc = kubernetes_service(&ServiceIpRange::default(), 6443);
        assert_eq!(svc["spec"]["clusterIP"], "10.96.0.1");
        assert_eq!(
            svc["spec"]["ports"],
            json!([{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}])
        );
        assert_eq!(svc["metadata"]["labels"]["provider"], "kubernetes");
        assert_eq!(svc["metadata"]["labels"]["component"], "apiserver");
    }

    #[test]
    fn the_slice_mirrors_the_first_subset_unless_an_address_is_loopback() {
        let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
        let slice = kubernetes_endpoint_slice(&kubernetes_subsets(ip("192.0.2.10"), 6443))
            .expect("a slice");
        assert_eq!(slice["metadata"]["name"], "kubernetes");
        assert_eq!(slice["metadata"]["namespace"], "default");
        assert_eq!(
            slice["metadata"]["labels"],
            json!({"kubernetes.io/service-name": "kubernetes"})
        );
        assert_eq!(slice["addressType"], "IPv4");
        assert_eq!(
            slice["endpoints"],
            json!([{"addresses": ["192.0.2.10"], "conditions": {"ready": true}}])
        );
        assert_eq!(
            slice["ports"],
            json!([{"name": "https", "port": 6443, "protocol": "TCP"}])
        );
        let v6 = kubernetes_endpoint_slice(&kubernetes_subsets(ip("2001:db8::1"), 6443))
            .expect("a slice");
        assert_eq!(v6["addressType"], "IPv6");
        assert_eq!(
            kubernetes_endpoint_slice(&kubernetes_subsets(ip("127.0.0.1"), 6443)),
            None
        );
        assert_eq!(kubernetes_endpoint_slice(&json!([])), None);
    }

    #[tokio::test]
    async fn the_slice_is_created_and_follows_the_advertised_address() {
        use std::sync::Arc;

        use crate::storage::MemoryStorage;

        let r = Registry::new(Arc::new(MemoryStorage::new()) as Arc<dyn crate::storage::Storage>);
        r.ensure_bootstrap_objects().await.expect("bootstrap");
        async fn slice(r: &Registry) -> Option<Value> {
            r.get_kv(&discovery::ENDPOINT_SLICES, "default", "kubernetes")
                .await
                .expect("get")
                .map(|(v, _)| v)
        }
        r.ensure_kubernetes_service("192.0.2.10".parse().expect("ip"), 6443)
            .await
            .expect("ensure");
        let first = slice(&r).await.expect("created");
        assert_eq!(first["endpoints"][0]["addresses"], json!(["192.0.2.10"]));
        // Unchanged: no write.
        r.ensure_kubernetes_service("192.0.2.10".parse().expect("ip"), 6443)
            .await
            .expect("ensure");
        let same = slice(&r).await.expect("kept");
        assert_eq!(
            same["metadata"]["resourceVersion"],
            first["metadata"]["resourceVersion"]
        );
        // Another address: updated in place.
        r.ensure_kubernetes_service("192.0.2.11".parse().expect("ip"), 7443)
            .await
            .expect("ensure");
        let moved = slice(&r).await.expect("updated");
        assert_eq!(moved["endpoints"][0]["addresses"], json!(["192.0.2.11"]));
        assert_eq!(moved["ports"][0]["port"], 7443);
        assert_eq!(moved["metadata"]["uid"], first["metadata"]["uid"]);
        // Another family: replaced.
        r.ensure_kubernetes_service("2001:db8::1".parse().expect("ip"), 7443)
            .await
            .expect("ensure");
        let v6 = slice(&r).await.expect("replaced");
        assert_eq!(v6["addressType"], "IPv6");
        assert_ne!(v6["metadata"]["uid"], first["metadata"]["uid"]);
    }
}
