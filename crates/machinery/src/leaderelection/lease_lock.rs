//! A `LeaseLock` over a real `coordination.k8s.io/v1` Lease, through `kube::Api<Lease>`.

use async_trait::async_trait;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::PostParams;

use super::error::{Error, Result};
use super::lock::LeaseLock;
use super::record::LeaderElectionRecord;

/// The Lease lock, as client-go's `resourcelock.LeaseLock`.
///
/// `update` sends the whole Lease last read or written, so the API server checks its
/// `resourceVersion`: a concurrent writer turns the update into [`Error::Conflict`].
pub struct KubeLeaseLock {
    /// Leases in the lock's namespace.
    api: Api<Lease>,
    /// Namespace of the lease.
    namespace: String,
    /// Name of the lease.
    name: String,
    /// The Lease as last returned by the server (`get`, `create` or `update`); `None` until then.
    lease: Option<Lease>,
}

impl KubeLeaseLock {
    /// A lock on the Lease `namespace/name`.
    pub fn new(client: kube::Client, namespace: &str, name: &str) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            lease: None,
        }
    }

    /// Maps a client error, turning the statuses the elector branches on into their own variants.
    fn map_err(&self, op: &'static str, err: kube::Error) -> Error {
        let lease = self.describe();
        match &err {
            kube::Error::Api(status) if status.is_not_found() => Error::NotFound { lease },
            kube::Error::Api(status) if status.is_conflict() => Error::Conflict { lease },
            kube::Error::Api(status) if status.is_already_exists() => {
                Error::AlreadyExists { lease }
            }
            _ => Error::Api {
                lease,
                op,
                source: err,
            },
        }
    }
}

#[async_trait]
impl LeaseLock for KubeLeaseLock {
    async fn get(&mut self) -> Result<LeaderElectionRecord> {
        let lease = self
            .api
            .get(&self.name)
            .await
            .map_err(|e| self.map_err("get", e))?;
        let record = lease
            .spec
            .as_ref()
            .map(LeaderElectionRecord::from_lease_spec)
            .unwrap_or_default();
        self.lease = Some(lease);
        Ok(record)
    }

    async fn create(&mut self, record: &LeaderElectionRecord) -> Result<()> {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(record.to_lease_spec()),
        };
        let created = self
            .api
            .create(&PostParams::default(), &lease)
            .await
            .map_err(|e| self.map_err("create", e))?;
        self.lease = Some(created);
        Ok(())
    }

    async fn update(&mut self, record: &LeaderElectionRecord) -> Result<()> {
        let Some(mut lease) = self.lease.clone() else {
            return Err(Error::NotInitialized {
                lease: self.describe(),
            });
        };
        lease.spec = Some(record.to_lease_spec());
        let updated = self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
            .map_err(|e| self.map_err("update", e))?;
        self.lease = Some(updated);
        Ok(())
    }

    fn describe(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}
