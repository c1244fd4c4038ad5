//! The cloud `kcm up` simulates: every `LoadBalancer` Service gets one address from a pool, as MetalLB or k3s's servicelb give one on a laptop cluster.
//!
//! Its machines are the simulated nodes: the annotation [`INSTANCE_ANNOTATION`] on a Node says
//! `deleted` (the machine is gone) or `shutdown`; the simulated kubelet goes silent for both.
//!
//! Where to start: [`SimulatedCloud::new`]. The pool is an IPv4 CIDR (`kcm up
//! --load-balancer-ip-pool`, default [`DEFAULT_POOL`], TEST-NET-1 of RFC 5737: addresses that
//! route nowhere, so nothing real is shadowed). A Service asking for `spec.loadBalancerIP` gets
//! that address if it is in the pool and free. The state lives in memory; after a restart a
//! Service keeps the address its status already shows, when that address is still free.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, Node, Service};
use kcm_machinery::informer::keys::meta_namespace_key;

use super::{CloudError, CloudProvider, Instances, LoadBalancer};

/// The provider's name.
pub const PROVIDER_NAME: &str = "kcm-simulated";

/// The Node annotation that says what became of its machine: `deleted` or `shutdown`.
pub const INSTANCE_ANNOTATION: &str = "sim.kcm.io/instance";

/// The pool when none is given: TEST-NET-1 (RFC 5737).
pub const DEFAULT_POOL: &str = "192.0.2.0/24";

/// Why a pool is not usable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    /// Not `a.b.c.d/n` with `n` at most 32.
    #[error("invalid load balancer IP pool {0:?}: want an IPv4 CIDR such as {DEFAULT_POOL}")]
    Invalid(String),
}

/// A pool of IPv4 addresses: a CIDR without its network and broadcast addresses (for
/// prefixes shorter than /31).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpPool {
    first: u32,
    last: u32,
    prefix: u8,
    network: Ipv4Addr,
}

impl IpPool {
    /// Parses `a.b.c.d/n`.
    pub fn parse(cidr: &str) -> Result<Self, PoolError> {
        let invalid = || PoolError::Invalid(cidr.to_owned());
        let (addr, prefix) = cidr.trim().split_once('/').ok_or_else(invalid)?;
        let addr: Ipv4Addr = addr.parse().map_err(|_| invalid())?;
        let prefix: u8 = prefix.parse().map_err(|_| invalid())?;
        if prefix > 32 {
            return Err(invalid());
        }
        let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
        let network = u32::from(addr) & mask;
        let broadcast = network | !mask;
        let (first, last) = if prefix >= 31 {
            (network, broadcast)
        } else {
            (network + 1, broadcast - 1)
        };
        Ok(Self {
            first,
            last,
            prefix,
            network: Ipv4Addr::from(network),
        })
    }

    /// Whether `ip` is one of the pool's addresses.
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        (self.first..=self.last).contains(&u32::from(ip))
    }

    /// How many addresses the pool holds.
    pub fn size(&self) -> u64 {
        u64::from(self.last - self.first) + 1
    }

    fn addresses(&self) -> impl Iterator<Item = Ipv4Addr> {
        (self.first..=self.last).map(Ipv4Addr::from)
    }
}

impl std::fmt::Display for IpPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

/// One load balancer: its address and the nodes it sends traffic to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimulatedLoadBalancer {
    /// The ingress address.
    pub ip: Ipv4Addr,
    /// The Service, `namespace/name`.
    pub service: String,
    /// The backend nodes' names, sorted.
    pub nodes: Vec<String>,
}

#[derive(Debug, Default)]
struct State {
    /// Load balancers by the Service's UID (upstream's `GetLoadBalancerName` is `a` + UID: a
    /// Service deleted and created again gets a new one).
    by_uid: HashMap<String, SimulatedLoadBalancer>,
    /// Addresses in use.
    used: BTreeSet<Ipv4Addr>,
}

/// The simulated cloud: load balancers only.
#[derive(Debug)]
pub struct SimulatedCloud {
    pool: IpPool,
    state: Mutex<State>,
}

impl SimulatedCloud {
    /// A cloud handing out addresses of `pool`.
    pub fn new(pool: IpPool) -> Arc<Self> {
        Arc::new(Self {
            pool,
            state: Mutex::new(State::default()),
        })
    }

    /// The pool.
    pub fn pool(&self) -> IpPool {
        self.pool
    }

    /// Every load balancer, by address.
    pub fn load_balancers(&self) -> BTreeMap<Ipv4Addr, SimulatedLoadBalancer> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state
            .by_uid
            .values()
            .map(|lb| (lb.ip, lb.clone()))
            .collect()
    }

    /// The address to give `service`: the requested one, else the one its status shows (a
    /// restart), else the lowest free one.
    fn pick(&self, state: &State, service: &Service) -> Result<Ipv4Addr, CloudError> {
        let spec = service.spec.as_ref();
        if let Some(requested) = spec
            .and_then(|s| s.load_balancer_ip.as_deref())
            .filter(|ip| !ip.is_empty())
        {
            let ip: Ipv4Addr = requested.parse().map_err(|_| {
                CloudError::Failed(format!(
                    "requested load balancer IP {requested} is not an IPv4 address"
                ))
            })?;
            if !self.pool.contains(ip) {
                return Err(CloudError::Failed(format!(
                    "requested load balancer IP {ip} is not in the pool {}",
                    self.pool
                )));
            }
            if state.used.contains(&ip) {
                return Err(CloudError::Failed(format!(
                    "requested load balancer IP {ip} is already in use"
                )));
            }
            return Ok(ip);
        }
        if let Some(ip) =
            status_ip(service).filter(|ip| self.pool.contains(*ip) && !state.used.contains(ip))
        {
            return Ok(ip);
        }
        self.pool
            .addresses()
            .find(|ip| !state.used.contains(ip))
            .ok_or_else(|| {
                CloudError::Failed(format!(
                    "no free address in the load balancer pool {}",
                    self.pool
                ))
            })
    }
}

/// The first IPv4 ingress address of `service`'s status.
fn status_ip(service: &Service) -> Option<Ipv4Addr> {
    service
        .status
        .as_ref()?
        .load_balancer
        .as_ref()?
        .ingress
        .as_ref()?
        .iter()
        .find_map(|i| i.ip.as_deref()?.parse().ok())
}

fn uid(service: &Service) -> String {
    match service.metadata.uid.as_deref() {
        Some(uid) if !uid.is_empty() => uid.to_owned(),
        _ => key(service),
    }
}

fn key(service: &Service) -> String {
    meta_namespace_key(service).unwrap_or_default()
}

fn node_names(nodes: &[Arc<Node>]) -> Vec<String> {
    let mut names: Vec<String> = nodes
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    names.sort_unstable();
    names
}

fn status_of(ip: Ipv4Addr) -> LoadBalancerStatus {
    LoadBalancerStatus {
        ingress: Some(vec![LoadBalancerIngress {
            ip: Some(ip.to_string()),
            ip_mode: Some("VIP".to_owned()),
            ..LoadBalancerIngress::default()
        }]),
    }
}

#[async_trait]
impl LoadBalancer for SimulatedCloud {
    async fn get_load_balancer(
        &self,
        _cluster_name: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>, CloudError> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(lb) = state.by_uid.get(&uid(service)) {
            return Ok(Some(status_of(lb.ip)));
        }
        // After a restart: the address the status shows, if nobody else holds it.
        Ok(status_ip(service)
            .filter(|ip| self.pool.contains(*ip) && !state.used.contains(ip))
            .map(status_of))
    }

    async fn ensure_load_balancer(
        &self,
        _cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<LoadBalancerStatus, CloudError> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let uid = uid(service);
        let requested = service
            .spec
            .as_ref()
            .and_then(|s| s.load_balancer_ip.as_deref())
            .filter(|ip| !ip.is_empty());
        if let Some(lb) = state.by_uid.get_mut(&uid) {
            // The address stays unless the Service asks for another one.
            if requested.is_none_or(|r| r == lb.ip.to_string()) {
                lb.nodes = node_names(nodes);
                return Ok(status_of(lb.ip));
            }
            let old = lb.ip;
            state.used.remove(&old);
            match self.pick(&state, service) {
                Ok(ip) => {
                    state.used.insert(ip);
                    if let Some(lb) = state.by_uid.get_mut(&uid) {
                        lb.ip = ip;
                        lb.nodes = node_names(nodes);
                    }
                    return Ok(status_of(ip));
                }
                Err(err) => {
                    state.used.insert(old);
                    return Err(err);
                }
            }
        }
        let ip = self.pick(&state, service)?;
        state.used.insert(ip);
        state.by_uid.insert(
            uid,
            SimulatedLoadBalancer {
                ip,
                service: key(service),
                nodes: node_names(nodes),
            },
        );
        Ok(status_of(ip))
    }

    async fn update_load_balancer(
        &self,
        _cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<(), CloudError> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        match state.by_uid.get_mut(&uid(service)) {
            Some(lb) => {
                lb.nodes = node_names(nodes);
                Ok(())
            }
            None => Err(CloudError::Failed(format!(
                "no load balancer for service {}",
                key(service)
            ))),
        }
    }

    async fn ensure_load_balancer_deleted(
        &self,
        _cluster_name: &str,
        service: &Service,
    ) -> Result<(), CloudError> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(lb) = state.by_uid.remove(&uid(service)) {
            state.used.remove(&lb.ip);
        }
        Ok(())
    }
}

/// A [`SimulatedCloud`] as a provider: it hands the shared cloud out as its load balancer, so
/// whoever made the cloud can still look at its load balancers.
#[derive(Debug, Clone)]
pub struct SimulatedProvider(pub Arc<SimulatedCloud>);

impl CloudProvider for SimulatedProvider {
    fn provider_name(&self) -> &str {
        PROVIDER_NAME
    }

    fn load_balancer(&self) -> Option<Arc<dyn LoadBalancer>> {
        Some(Arc::clone(&self.0) as Arc<dyn LoadBalancer>)
    }

    fn instances(&self) -> Option<Arc<dyn Instances>> {
        Some(Arc::clone(&self.0) as Arc<dyn Instances>)
    }
}

fn instance_state(node: &Node) -> Option<&str> {
    node.metadata
        .annotations
        .as_ref()?
        .get(INSTANCE_ANNOTATION)
        .map(String::as_str)
}

#[async_trait]
impl Instances for SimulatedCloud {
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError> {
        Ok(instance_state(node) != Some("deleted"))
    }

    async fn instance_shutdown(&self, node: &Node) -> Result<bool, CloudError> {
        Ok(instance_state(node) == Some("shutdown"))
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ServiceSpec, ServiceStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn service(name: &str, uid: &str) -> Service {
        Service {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some("default".to_owned()),
                uid: Some(uid.to_owned()),
                ..ObjectMeta::default()
            },
            spec: Some(ServiceSpec {
                type_: Some("LoadBalancer".to_owned()),
                ..ServiceSpec::default()
            }),
            status: None,
        }
    }

    fn ip_of(status: &LoadBalancerStatus) -> String {
        status.ingress.as_ref().expect("ingress")[0]
            .ip
            .clone()
            .expect("ip")
    }

    #[test]
    fn a_pool_skips_its_network_and_broadcast_addresses() {
        let pool = IpPool::parse("192.0.2.0/30").expect("pool");
        assert_eq!(pool.size(), 2);
        assert!(!pool.contains("192.0.2.0".parse().expect("ip")));
        assert!(pool.contains("192.0.2.1".parse().expect("ip")));
        assert!(pool.contains("192.0.2.2".parse().expect("ip")));
        assert!(!pool.contains("192.0.2.3".parse().expect("ip")));
        assert_eq!(pool.to_string(), "192.0.2.0/30");
        assert_eq!(IpPool::parse("10.0.0.7/32").expect("pool").size(), 1);
        for bad in ["192.0.2.0", "192.0.2.0/33", "x/24", "::1/128"] {
            assert!(IpPool::parse(bad).is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn addresses_are_handed_out_lowest_first_and_freed_on_delete() {
        let cloud = SimulatedCloud::new(IpPool::parse("192.0.2.0/30").expect("pool"));
        let (a, b, c) = (service("a", "1"), service("b", "2"), service("c", "3"));
        let got_a = cloud.ensure_load_balancer("k", &a, &[]).await.expect("a");
        let got_b = cloud.ensure_load_balancer("k", &b, &[]).await.expect("b");
        assert_eq!(
            (ip_of(&got_a).as_str(), ip_of(&got_b).as_str()),
            ("192.0.2.1", "192.0.2.2")
        );
        // Idempotent: ensuring again keeps the address.
        let again = cloud.ensure_load_balancer("k", &a, &[]).await.expect("a");
        assert_eq!(ip_of(&again), "192.0.2.1");
        let full = cloud.ensure_load_balancer("k", &c, &[]).await;
        assert_eq!(
            full,
            Err(CloudError::Failed(
                "no free address in the load balancer pool 192.0.2.0/30".to_owned()
            ))
        );
        cloud
            .ensure_load_balancer_deleted("k", &a)
            .await
            .expect("delete");
        assert_eq!(cloud.get_load_balancer("k", &a).await, Ok(None));
        let got_c = cloud.ensure_load_balancer("k", &c, &[]).await.expect("c");
        assert_eq!(ip_of(&got_c), "192.0.2.1");
    }

    #[tokio::test]
    async fn a_requested_address_must_be_in_the_pool_and_free() {
        let cloud = SimulatedCloud::new(IpPool::parse(DEFAULT_POOL).expect("pool"));
        let mut a = service("a", "1");
        a.spec.as_mut().expect("spec").load_balancer_ip = Some("192.0.2.77".to_owned());
        let got = cloud.ensure_load_balancer("k", &a, &[]).await.expect("a");
        assert_eq!(ip_of(&got), "192.0.2.77");
        let mut b = service("b", "2");
        b.spec.as_mut().expect("spec").load_balancer_ip = Some("192.0.2.77".to_owned());
        assert_eq!(
            cloud.ensure_load_balancer("k", &b, &[]).await,
            Err(CloudError::Failed(
                "requested load balancer IP 192.0.2.77 is already in use".to_owned()
            ))
        );
        b.spec.as_mut().expect("spec").load_balancer_ip = Some("10.0.0.1".to_owned());
        assert_eq!(
            cloud.ensure_load_balancer("k", &b, &[]).await,
            Err(CloudError::Failed(
                "requested load balancer IP 10.0.0.1 is not in the pool 192.0.2.0/24".to_owned()
            ))
        );
    }

    #[tokio::test]
    async fn after_a_restart_a_service_keeps_the_address_its_status_shows() {
        let cloud = SimulatedCloud::new(IpPool::parse(DEFAULT_POOL).expect("pool"));
        let mut a = service("a", "1");
        a.status = Some(ServiceStatus {
            load_balancer: Some(status_of("192.0.2.9".parse().expect("ip"))),
            ..ServiceStatus::default()
        });
        // It exists (so a deletion still cleans up and says so)...
        assert!(
            cloud
                .get_load_balancer("k", &a)
                .await
                .expect("get")
                .is_some()
        );
        // ...and ensuring it keeps the address.
        let got = cloud.ensure_load_balancer("k", &a, &[]).await.expect("a");
        assert_eq!(ip_of(&got), "192.0.2.9");
        let b = service("b", "2");
        let got_b = cloud.ensure_load_balancer("k", &b, &[]).await.expect("b");
        assert_eq!(ip_of(&got_b), "192.0.2.1");
    }

    #[tokio::test]
    async fn backends_follow_the_nodes_given() {
        let cloud = SimulatedCloud::new(IpPool::parse(DEFAULT_POOL).expect("pool"));
        let node = |name: &str| {
            Arc::new(Node {
                metadata: ObjectMeta {
                    name: Some(name.to_owned()),
                    ..ObjectMeta::default()
                },
                ..Node::default()
            })
        };
        let a = service("a", "1");
        cloud
            .ensure_load_balancer("k", &a, &[node("n2"), node("n1")])
            .await
            .expect("a");
        cloud
            .update_load_balancer("k", &a, &[node("n3")])
            .await
            .expect("update");
        let lbs = cloud.load_balancers();
        let lb = lbs.values().next().expect("one");
        assert_eq!(lb.nodes, ["n3"]);
        assert_eq!(lb.service, "default/a");
        assert!(
            cloud
                .update_load_balancer("k", &service("x", "9"), &[])
                .await
                .is_err()
        );
    }
}
