//! The `default/kubernetes` Service and Endpoints, kept by kube-apiserver's bootstrap controller (`kubernetesservice`).

use std::net::IpAddr;

use serde_json::{Value, json};

use crate::error::Result;
use crate::registry::Registry;
use crate::registry::options::WriteOptions;
use crate::registry::service_ip::ServiceIpRange;
use crate::registry::update::Target;
use crate::resources::{core, service};

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
    /// for a single server). Upstream's reconciler also keeps a `kubernetes` EndpointSlice;
    /// kcm advertises a loopback address, which EndpointSlice validation refuses
    /// (`ValidateNonSpecialIP`), so it keeps none.
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
            let body = kubernetes_service(self.service_ip_range(), secure_port);
            match self
                .create(
                    def,
                    KUBERNETES_SERVICE_NAMESPACE,
                    body,
                    &WriteOptions::default(),
                )
                .await
            {
                Ok(_) => {}
                // Another writer may have stored it since the read.
                Err(e) if e.reason == "AlreadyExists" => {}
                Err(e) => return Err(e),
            }
        }
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
            Some((ep, _)) if ep.get("subsets") == Some(&subsets) => Ok(()),
            Some((mut ep, _)) => {
                ep["subsets"] = subsets;
                self.update(
                    def,
                    KUBERNETES_SERVICE_NAMESPACE,
                    KUBERNETES_SERVICE_NAME,
                    ep,
                    Target::Main,
                    &WriteOptions::default(),
                )
                .await
                .map(|_| ())
            }
        }
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
}
