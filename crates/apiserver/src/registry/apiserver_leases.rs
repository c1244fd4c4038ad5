//! The API servers' endpoint leases, as kube-apiserver's lease endpoint reconciler (`reconcilers/lease.go`).
//!
//! Every API server renews a lease under `/registry/masterleases/` each reconcile interval,
//! valid for [`APISERVER_LEASE_TTL_SECS`]; the `default/kubernetes` Endpoints list exactly
//! the servers whose lease is live, so clients of a multi-server cluster see the whole set and
//! a crashed server drops out within one TTL. Upstream keeps the lease as an etcd key with a
//! TTL; the store here has no TTLs (SQLite, memory), so the lease records its expiry and
//! readers ignore, and delete, expired ones. Time is passed in (`now`, Unix seconds).

use std::net::IpAddr;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::{ApiError, Result};
use crate::registry::Registry;
use crate::storage::{self, ListOptions};

/// Where the leases live (upstream's `/masterleases/` under the etcd prefix).
pub const APISERVER_LEASES_PREFIX: &str = "/registry/masterleases/";

/// How long a lease lives unless renewed (upstream's `--endpoint-reconciler` TTL, 15 s).
pub const APISERVER_LEASE_TTL_SECS: i64 = 15;

/// One API server's lease.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct ApiserverLease {
    ip: IpAddr,
    port: u16,
    /// Unix seconds after which the lease is dead.
    expires: i64,
}

/// The store key of the lease of the server at `ip:port`.
fn lease_key(ip: IpAddr, port: u16) -> String {
    format!("{APISERVER_LEASES_PREFIX}{ip}:{port}")
}

fn store_err(what: &str) -> impl FnOnce(storage::Error) -> ApiError + '_ {
    move |e| ApiError::internal(format!("{what}: {e}"))
}

/// The Endpoints subsets for `servers`: one subset per port, addresses sorted, as upstream's
/// reconciler writes one subset for the shared secure port.
pub fn apiserver_subsets(servers: &[(IpAddr, u16)]) -> Value {
    let mut ports: Vec<u16> = servers.iter().map(|(_, p)| *p).collect();
    ports.sort_unstable();
    ports.dedup();
    let subsets: Vec<Value> = ports
        .into_iter()
        .map(|port| {
            let mut ips: Vec<IpAddr> = servers
                .iter()
                .filter(|(_, p)| *p == port)
                .map(|(ip, _)| *ip)
                .collect();
            ips.sort_unstable();
            ips.dedup();
            json!({
                "addresses": ips.iter().map(|ip| json!({"ip": ip.to_string()})).collect::<Vec<_>>(),
                "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
            })
        })
        .collect();
    Value::Array(subsets)
}

impl Registry {
    /// Creates or extends this server's lease to `now + TTL` (upstream's `UpdateLease`).
    pub async fn renew_apiserver_lease(&self, ip: IpAddr, port: u16, now: i64) -> Result<()> {
        let key = lease_key(ip, port);
        let lease = ApiserverLease {
            ip,
            port,
            expires: now + APISERVER_LEASE_TTL_SECS,
        };
        let bytes = Bytes::from(serde_json::to_vec(&lease).map_err(ApiError::internal)?);
        // Only this server writes its own lease; a conflict means a restart raced itself.
        for _ in 0..3 {
            let current = self
                .storage()
                .get(&key)
                .await
                .map_err(store_err("reading the API server lease"))?;
            let written = match current {
                Some(kv) => {
                    self.storage()
                        .update(&key, kv.mod_revision, bytes.clone())
                        .await
                }
                None => self.storage().create(&key, bytes.clone()).await,
            };
            match written {
                Ok(_) => return Ok(()),
                Err(
                    storage::Error::Conflict { .. }
                    | storage::Error::AlreadyExists { .. }
                    | storage::Error::NotFound { .. },
                ) => continue,
                Err(e) => return Err(store_err("writing the API server lease")(e)),
            }
        }
        Err(ApiError::internal(
            "writing the API server lease: conflicting writers",
        ))
    }

    /// Removes this server's lease (on shutdown, as upstream's `RemoveEndpoints`).
    pub async fn remove_apiserver_lease(&self, ip: IpAddr, port: u16) -> Result<()> {
        let key = lease_key(ip, port);
        if let Some(kv) = self
            .storage()
            .get(&key)
            .await
            .map_err(store_err("reading the API server lease"))?
        {
            match self.storage().delete(&key, kv.mod_revision).await {
                Ok(_) | Err(storage::Error::NotFound { .. } | storage::Error::Conflict { .. }) => {}
                Err(e) => return Err(store_err("removing the API server lease")(e)),
            }
        }
        Ok(())
    }

    /// The servers whose lease is live at `now`, sorted; expired leases are deleted (upstream
    /// lets etcd's TTL do that).
    pub async fn live_apiservers(&self, now: i64) -> Result<Vec<(IpAddr, u16)>> {
        let listed = self
            .storage()
            .list(ListOptions {
                prefix: APISERVER_LEASES_PREFIX.to_owned(),
                ..ListOptions::default()
            })
            .await
            .map_err(store_err("listing the API server leases"))?;
        let mut live = Vec::new();
        for kv in &listed.kvs {
            match serde_json::from_slice::<ApiserverLease>(&kv.value) {
                Ok(lease) if lease.expires > now => live.push((lease.ip, lease.port)),
                // Expired or unreadable: nobody renews it any more.
                _ => {
                    if let Err(e) = self.storage().delete(&kv.key, kv.mod_revision).await {
                        tracing::debug!(key = %kv.key, error = %e, "expired API server lease not removed");
                    }
                }
            }
        }
        live.sort_unstable();
        Ok(live)
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;
    use std::sync::Arc;

    use super::*;
    use crate::storage::{MemoryStorage, Storage};

    fn ip(last: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, last))
    }

    #[tokio::test]
    async fn live_leases_are_listed_and_expired_ones_removed() {
        let storage = Arc::new(MemoryStorage::new());
        let registry = Registry::new(Arc::clone(&storage) as Arc<dyn Storage>);
        registry
            .renew_apiserver_lease(ip(2), 6443, 100)
            .await
            .expect("renew");
        registry
            .renew_apiserver_lease(ip(1), 6443, 100)
            .await
            .expect("renew");
        registry
            .renew_apiserver_lease(ip(3), 6443, 80)
            .await
            .expect("renew");
        assert_eq!(
            registry.live_apiservers(100).await.expect("live"),
            [(ip(1), 6443), (ip(2), 6443)],
            "the lease last renewed at 80 expired at 95"
        );
        let left = storage
            .list(ListOptions {
                prefix: APISERVER_LEASES_PREFIX.into(),
                ..ListOptions::default()
            })
            .await
            .expect("list");
        assert_eq!(left.kvs.len(), 2, "the expired lease is deleted");

        // Renewing extends; removing drops at once.
        registry
            .renew_apiserver_lease(ip(1), 6443, 110)
            .await
            .expect("renew");
        assert_eq!(
            registry.live_apiservers(120).await.expect("live"),
            [(ip(1), 6443)]
        );
        registry
            .remove_apiserver_lease(ip(1), 6443)
            .await
            .expect("remove");
        assert!(
            registry
                .live_apiservers(120)
                .await
                .expect("live")
                .is_empty()
        );
    }

    #[test]
    fn subsets_group_servers_by_port() {
        let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
        assert_eq!(
            apiserver_subsets(&[(ip(2), 6443), (ip(1), 6443), (lo, 7443)]),
            json!([
                {"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}],
                 "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]},
                {"addresses": [{"ip": "127.0.0.1"}],
                 "ports": [{"name": "https", "port": 7443, "protocol": "TCP"}]},
            ])
        );
        assert_eq!(
            apiserver_subsets(&[(lo, 6443)]),
            json!([{
                "addresses": [{"ip": "127.0.0.1"}],
                "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}],
            }]),
            "one server: the same Endpoints as `kubernetes_subsets` gives"
        );
    }
}
