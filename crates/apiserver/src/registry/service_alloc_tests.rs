//! Tests of the Service IP and node port allocation through the registry (upstream's Service REST storage tests, in the cases that matter).

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::registry::delete::DeleteOptions;
use crate::registry::options::WriteOptions;
use crate::registry::update::Target;
use crate::resources::namespace::NAMESPACES;
use crate::resources::service::SERVICES;
use crate::storage::Storage;
use crate::storage::memory::MemoryStorage;

use crate::pointer::At;

async fn registry_on(storage: Arc<MemoryStorage>) -> Registry {
    let registry = Registry::new(storage);
    let _ = registry
        .create(
            &NAMESPACES,
            "",
            json!({"metadata": {"name": "ns"}}),
            &WriteOptions::default(),
        )
        .await;
    registry
}

async fn registry() -> Registry {
    registry_on(Arc::new(MemoryStorage::new())).await
}

fn svc(name: &str, spec: Value) -> Value {
    json!({"metadata": {"name": name, "namespace": "ns"}, "spec": spec})
}

async fn create(r: &Registry, body: Value) -> Result<Value> {
    r.create(&SERVICES, "ns", body, &WriteOptions::default())
        .await
        .map(|o| o.object)
}

async fn update(r: &Registry, body: Value) -> Result<Value> {
    let name = object::name(&body).to_owned();
    r.update(
        &SERVICES,
        "ns",
        &name,
        body,
        Target::Main,
        &WriteOptions::default(),
    )
    .await
    .map(|o| o.object)
}

fn node_ports(svc: &Value) -> Vec<i64> {
    svc.at("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| p.get("nodePort").and_then(Value::as_i64))
        .collect()
}

fn error_text(err: &ApiError) -> String {
    format!("{err:?}")
}

/// Cluster IPs: requested ones are checked (range, taken, the kubernetes address), free ones
/// are unique; a deleted Service's IP is free again.
#[tokio::test]
async fn cluster_ips_are_unique_checked_and_released() {
    let r = registry().await;
    let a = create(
        &r,
        svc(
            "a",
            json!({"clusterIP": "10.96.5.5", "ports": [{"port": 80}]}),
        ),
    )
    .await
    .expect("requested");
    assert_eq!(a["spec"]["clusterIPs"], json!(["10.96.5.5"]));
    assert_eq!(a["spec"]["ipFamilies"], json!(["IPv4"]));
    let taken = create(
        &r,
        svc(
            "b",
            json!({"clusterIP": "10.96.5.5", "ports": [{"port": 80}]}),
        ),
    )
    .await
    .expect_err("taken");
    assert!(
        error_text(&taken).contains("provided IP is already allocated"),
        "{taken:?}"
    );
    let outside = create(
        &r,
        svc(
            "c",
            json!({"clusterIP": "10.200.0.1", "ports": [{"port": 80}]}),
        ),
    )
    .await
    .expect_err("range");
    assert!(
        error_text(&outside).contains("is not in the valid range"),
        "{outside:?}"
    );
    let kubernetes = create(
        &r,
        svc(
            "d",
            json!({"clusterIP": "10.96.0.1", "ports": [{"port": 80}]}),
        ),
    )
    .await
    .expect_err("reserved");
    assert!(
        error_text(&kubernetes).contains("already allocated"),
        "{kubernetes:?}"
    );

    let mut seen = HashSet::new();
    for i in 0..50 {
        let s = create(&r, svc(&format!("s{i}"), json!({"ports": [{"port": 80}]})))
            .await
            .expect("free ip");
        let ip = s["spec"]["clusterIP"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert_ne!(ip, "10.96.0.1");
        assert!(seen.insert(ip.clone()), "{ip} twice");
    }
    assert_eq!(r.service_allocations_used().await.expect("used").0, 51);
    r.delete(&SERVICES, "ns", "a", &DeleteOptions::default())
        .await
        .expect("delete");
    assert_eq!(r.service_allocations_used().await.expect("used").0, 50);
    create(
        &r,
        svc(
            "e",
            json!({"clusterIP": "10.96.5.5", "ports": [{"port": 80}]}),
        ),
    )
    .await
    .expect("free again");
    // Headless and ExternalName Services hold no IP.
    create(&r, svc("h", json!({"clusterIP": "None"})))
        .await
        .expect("headless");
    create(
        &r,
        svc(
            "x",
            json!({"type": "ExternalName", "externalName": "example.com"}),
        ),
    )
    .await
    .expect("external name");
    assert_eq!(r.service_allocations_used().await.expect("used").0, 51);
}

/// Concurrent creates never share an IP or a node port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_creates_never_share() {
    let r = Arc::new(registry().await);
    let mut tasks = Vec::new();
    for i in 0..100 {
        let r = Arc::clone(&r);
        tasks.push(tokio::spawn(async move {
            create(
                &r,
                svc(
                    &format!("s{i}"),
                    json!({"type": "NodePort", "ports": [{"port": 80}]}),
                ),
            )
            .await
            .expect("create")
        }));
    }
    let (mut ips, mut ports) = (HashSet::new(), HashSet::new());
    for t in tasks {
        let s = t.await.expect("task");
        assert!(
            ips.insert(
                s["spec"]["clusterIP"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            )
        );
        for p in node_ports(&s) {
            assert!(ports.insert(p), "node port {p} twice");
            assert!((30000..=32767).contains(&p));
        }
    }
    assert_eq!((ips.len(), ports.len()), (100, 100));
}

/// Node ports: requested ones are checked, free ones allocated, ports sharing a number share
/// a node port; changing the type to ClusterIP releases them; omitted values are kept on
/// update.
#[tokio::test]
async fn node_ports_like_upstream() {
    let r = registry().await;
    let a = create(
        &r,
        svc(
            "a",
            json!({"type": "NodePort", "ports": [
                {"name": "tcp", "port": 53, "protocol": "TCP"},
                {"name": "udp", "port": 53, "protocol": "UDP"},
                {"name": "web", "port": 80, "nodePort": 30080}
            ]}),
        ),
    )
    .await
    .expect("create");
    let ports = node_ports(&a);
    assert_eq!(ports[0], ports[1], "same port number, same node port");
    assert_eq!(ports[2], 30080);
    let taken = create(
        &r,
        svc(
            "b",
            json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 30080}]}),
        ),
    )
    .await
    .expect_err("taken");
    assert!(
        error_text(&taken).contains("provided port is already allocated"),
        "{taken:?}"
    );
    let outside = create(
        &r,
        svc(
            "c",
            json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 8080}]}),
        ),
    )
    .await
    .expect_err("range");
    assert!(
        error_text(&outside).contains("The range of valid ports is 30000-32767"),
        "{outside:?}"
    );
    assert_eq!(r.service_allocations_used().await.expect("used").1, 2);

    // An update that omits the node ports keeps them.
    let mut omitted = a.clone();
    for p in omitted["spec"]["ports"]
        .as_array_mut()
        .into_iter()
        .flatten()
    {
        p.as_object_mut().map(|m| m.remove("nodePort"));
    }
    let kept = update(&r, omitted).await.expect("update");
    assert_eq!(node_ports(&kept), ports);

    // To ClusterIP: node ports dropped and released.
    let mut cluster_ip = kept.clone();
    cluster_ip["spec"]["type"] = json!("ClusterIP");
    let changed = update(&r, cluster_ip).await.expect("to ClusterIP");
    assert!(node_ports(&changed).is_empty());
    assert_eq!(r.service_allocations_used().await.expect("used").1, 0);
    create(
        &r,
        svc(
            "d",
            json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 30080}]}),
        ),
    )
    .await
    .expect("free again");
}

/// LoadBalancers get node ports (unless told not to) and, with `externalTrafficPolicy:
/// Local`, a health-check node port; the status stays empty (no cloud: pending).
#[tokio::test]
async fn load_balancers_and_health_check_ports() {
    let r = registry().await;
    let lb = create(
        &r,
        svc("lb", json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local", "ports": [{"port": 80}]})),
    )
    .await
    .expect("create");
    let hc = lb["spec"]["healthCheckNodePort"]
        .as_i64()
        .expect("health check port");
    assert!((30000..=32767).contains(&hc));
    assert_eq!(node_ports(&lb).len(), 1);
    assert_ne!(node_ports(&lb)[0], hc);
    assert_eq!(lb["status"], json!({"loadBalancer": {}}));
    assert_eq!(r.service_allocations_used().await.expect("used").1, 2);

    let mut cluster = lb.clone();
    cluster["spec"]["externalTrafficPolicy"] = json!("Cluster");
    let cluster = update(&r, cluster).await.expect("policy change");
    assert!(cluster["spec"].get("healthCheckNodePort").is_none());
    assert_eq!(
        r.service_allocations_used().await.expect("used").1,
        1,
        "health-check port released"
    );

    let no_ports = create(
        &r,
        svc("lb2", json!({"type": "LoadBalancer", "allocateLoadBalancerNodePorts": false, "ports": [{"port": 80}]})),
    )
    .await
    .expect("create");
    assert!(node_ports(&no_ports).is_empty());
    r.delete(&SERVICES, "ns", "lb", &DeleteOptions::default())
        .await
        .expect("delete");
    assert_eq!(r.service_allocations_used().await.expect("used").1, 0);
}

/// A dry run and a failed create give their allocations back.
/// A dry run, a create the store refuses and an update that loses its race take nothing:
/// what they reserved is given back in the stored snapshots too, so another server sharing
/// the store does not see it as taken (upstream's `txn.Revert`).
#[tokio::test]
async fn failed_and_dry_run_writes_release_in_the_store_too() {
    let storage = Arc::new(MemoryStorage::new());
    let r = registry_on(Arc::clone(&storage)).await;
    let other = registry_on(Arc::clone(&storage)).await;
    r.create(
        &SERVICES,
        "ns",
        svc("a", json!({"type": "NodePort", "ports": [{"port": 80}]})),
        &WriteOptions::dry_run(true),
    )
    .await
    .expect("dry run");
    let b = create(&r, svc("b", json!({"ports": [{"port": 80}]})))
        .await
        .expect("create");
    assert!(
        create(
            &r,
            svc("b", json!({"type": "NodePort", "ports": [{"port": 80}]}))
        )
        .await
        .is_err(),
        "exists"
    );
    assert_eq!(r.service_allocations_used().await.expect("used"), (1, 0));
    assert_eq!(
        other.service_allocations_used().await.expect("used"),
        (1, 0),
        "the other server sees only b's cluster IP"
    );

    // An update from a stale resourceVersion to NodePort: allocated, then refused.
    let mut stale = b.clone();
    stale["spec"]["type"] = json!("NodePort");
    let mut labelled = b.clone();
    labelled["metadata"]["labels"] = json!({"moved": "on"});
    update(&r, labelled).await.expect("an update moves b on");
    let refused = update(&r, stale).await.expect_err("stale update");
    assert_eq!(refused.code, 409, "{refused:?}");
    assert_eq!(
        other.service_allocations_used().await.expect("used"),
        (1, 0),
        "the refused update's node port is given back"
    );
}

/// A reservation whose Service is not stored yet survives another server's repair (the
/// repair race), and a reservation whose write had an unknown outcome and left nothing is
/// freed by the repair loop, but only on its third sighting.
#[tokio::test]
async fn repairs_free_leaks_only_after_three_sightings() {
    let storage = Arc::new(MemoryStorage::new());
    let a = registry_on(Arc::clone(&storage)).await;
    let b = registry_on(Arc::clone(&storage)).await;
    b.repair_service_allocations().await.expect("b loads");

    // a reserves 10.96.5.5 and 30055; b repairs before a stores the Service.
    let mut body = svc(
        "slow",
        json!({"clusterIP": "10.96.5.5", "type": "NodePort",
               "ports": [{"port": 80, "nodePort": 30055}]}),
    );
    let txn = a.begin_service_create(&mut body).await.expect("reserve");
    b.repair_service_allocations().await.expect("repair");
    assert_eq!(
        b.service_allocations_used().await.expect("used"),
        (1, 1),
        "the in-flight reservation survives the repair"
    );
    // Its write's outcome is unknown (dropped, neither committed nor aborted): left to repair.
    drop(txn);
    for run in 2..=REPAIRS_BEFORE_LEAK_CLEANUP {
        assert_eq!(
            b.service_allocations_used().await.expect("used"),
            (1, 1),
            "kept before repair {run}"
        );
        b.repair_service_allocations().await.expect("repair");
    }
    assert_eq!(
        b.service_allocations_used().await.expect("used"),
        (0, 0),
        "freed on the third sighting"
    );
    assert_eq!(a.service_allocations_used().await.expect("used"), (0, 0));
    create(
        &a,
        svc(
            "again",
            json!({"clusterIP": "10.96.5.5", "type": "NodePort",
                   "ports": [{"port": 80, "nodePort": 30055}]}),
        ),
    )
    .await
    .expect("the leaked IP and port are free again");
}

/// The snapshots are stored, and a restarted registry rebuilds the bitmaps from the stored
/// Services (leaks freed, missing items marked).
#[tokio::test]
async fn restart_repairs_from_the_stored_services() {
    let storage = Arc::new(MemoryStorage::new());
    let r = registry_on(Arc::clone(&storage)).await;
    let a = create(
        &r,
        svc("a", json!({"type": "NodePort", "ports": [{"port": 80}]})),
    )
    .await
    .expect("create");
    create(&r, svc("b", json!({"ports": [{"port": 80}]})))
        .await
        .expect("create");
    let stored = storage
        .get(SERVICE_IPS_KEY)
        .await
        .expect("get")
        .expect("snapshot stored");
    let snapshot: Value = serde_json::from_slice(&stored.value).expect("json");
    assert_eq!(snapshot["kind"], "RangeAllocation");
    assert_eq!(snapshot["range"], "10.96.0.0/12");
    drop(r);

    let restarted = Registry::new(Arc::clone(&storage) as Arc<dyn crate::storage::Storage>);
    restarted
        .repair_service_allocations()
        .await
        .expect("repair");
    assert_eq!(
        restarted.service_allocations_used().await.expect("used"),
        (2, 1)
    );
    let taken = create(
        &restarted,
        svc(
            "c",
            json!({"clusterIP": a["spec"]["clusterIP"].clone(), "ports": [{"port": 80}]}),
        ),
    )
    .await;
    assert!(taken.is_err(), "the IP is known as taken after the restart");
}

/// Headless Services get IP families as upstream's `initIPFamilyFields` on a single-stack
/// cluster: SingleStack IPv4 with a selector, RequireDualStack IPv4+IPv6 without; what the
/// user set is kept.
#[tokio::test]
async fn headless_services_get_ip_families() {
    let r = registry().await;
    let cases = [
        (
            "selected",
            json!({"clusterIP": "None", "selector": {"app": "a"}, "ports": [{"port": 80}]}),
            json!("SingleStack"),
            json!(["IPv4"]),
        ),
        (
            "selectorless",
            json!({"clusterIP": "None", "ports": [{"port": 80}]}),
            json!("RequireDualStack"),
            json!(["IPv4", "IPv6"]),
        ),
        (
            "selectorless-single",
            json!({"clusterIP": "None", "ipFamilyPolicy": "SingleStack"}),
            json!("SingleStack"),
            json!(["IPv4"]),
        ),
        (
            "selectorless-v6",
            json!({"clusterIP": "None", "ipFamilyPolicy": "PreferDualStack", "ipFamilies": ["IPv6"]}),
            json!("PreferDualStack"),
            json!(["IPv6", "IPv4"]),
        ),
    ];
    for (name, spec, policy, families) in cases {
        let created = create(&r, svc(name, spec)).await.expect(name);
        assert_eq!(created["spec"]["clusterIPs"], json!(["None"]), "{name}");
        assert_eq!(created["spec"]["ipFamilyPolicy"], policy, "{name}");
        assert_eq!(created["spec"]["ipFamilies"], families, "{name}");
    }
}

/// Two API servers (two registries) on one store, as with etcd: the stored snapshot is the
/// truth, so concurrent creates through both never share a cluster IP or node port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_on_one_store_never_hand_out_the_same_ip_or_port() {
    const PER_SERVER: usize = 20;
    let storage = Arc::new(MemoryStorage::new());
    let servers = [
        Arc::new(registry_on(Arc::clone(&storage)).await),
        Arc::new(registry_on(Arc::clone(&storage)).await),
    ];
    let tasks: Vec<_> = (0..PER_SERVER * 2)
        .map(|i| {
            let server = Arc::clone(&servers[i % 2]);
            tokio::spawn(async move {
                create(
                    &server,
                    svc(
                        &format!("s{i}"),
                        json!({"type": "NodePort", "ports": [{"port": 80}]}),
                    ),
                )
                .await
                .expect("create")
            })
        })
        .collect();
    let mut ips = HashSet::new();
    let mut ports = HashSet::new();
    for task in tasks {
        let created = task.await.expect("join");
        let ip = created["spec"]["clusterIP"]
            .as_str()
            .expect("cluster IP")
            .to_owned();
        assert!(ips.insert(ip.clone()), "cluster IP {ip} handed out twice");
        for port in node_ports(&created) {
            assert!(ports.insert(port), "node port {port} handed out twice");
        }
    }
    assert_eq!((ips.len(), ports.len()), (PER_SERVER * 2, PER_SERVER * 2));
    // Each server's view, refreshed from the store, holds every allocation (plus the
    // kubernetes Service's reserved address, which no Service here holds).
    for server in &servers {
        let (used_ips, used_ports) = server.service_allocations_used().await.expect("used");
        assert_eq!(
            (used_ips as usize, used_ports as usize),
            (PER_SERVER * 2, PER_SERVER * 2)
        );
    }
}

/// What one server allocated, and released, is seen by the other at its next allocation.
#[tokio::test]
async fn a_second_server_sees_the_first_servers_allocations_and_releases() {
    let storage = Arc::new(MemoryStorage::new());
    let a = registry_on(Arc::clone(&storage)).await;
    let b = registry_on(Arc::clone(&storage)).await;
    // Both load their bitmaps before either allocates.
    b.service_allocations_used().await.expect("load b");
    let spec = json!({"clusterIP": "10.96.7.7", "type": "NodePort",
                      "ports": [{"port": 80, "nodePort": 30080}]});
    let first = create(&a, svc("first", spec.clone()))
        .await
        .expect("through a");
    let taken = create(&b, svc("second", spec.clone()))
        .await
        .expect_err("the same IP through b");
    assert!(
        error_text(&taken).contains("provided IP is already allocated"),
        "{taken:?}"
    );
    let port_taken = create(
        &b,
        svc(
            "third",
            json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 30080}]}),
        ),
    )
    .await
    .expect_err("the same node port through b");
    assert!(
        error_text(&port_taken).contains("provided port is already allocated"),
        "{port_taken:?}"
    );

    // Deleted through a: b may hand the address and port out again.
    a.delete(
        &SERVICES,
        "ns",
        object::name(&first),
        &DeleteOptions::default(),
    )
    .await
    .expect("delete through a");
    create(&b, svc("second", spec))
        .await
        .expect("the released IP and port through b");
}

/// `--service-cluster-ip-range`: cluster IPs, the `default/kubernetes` address, the range in
/// errors, the stored snapshot and the default ServiceCIDR all follow the configured range;
/// a restart with another range rebuilds the bitmap from the stored Services instead of
/// reading the old range's snapshot, and a Service left outside the new range holds nothing.
#[tokio::test]
async fn the_service_ip_range_is_configurable() {
    use crate::registry::service_ip::ServiceIpRange;
    use crate::resources::networking::SERVICE_CIDRS;

    let storage = Arc::new(MemoryStorage::new());
    let small: ServiceIpRange = "172.20.0.0/28".parse().expect("range");
    let r = Registry::new(Arc::clone(&storage) as Arc<dyn crate::storage::Storage>)
        .with_service_ip_range(small.clone());
    r.ensure_bootstrap_objects().await.expect("bootstrap");
    r.create(
        &NAMESPACES,
        "",
        json!({"metadata": {"name": "ns"}}),
        &WriteOptions::default(),
    )
    .await
    .expect("namespace");
    r.ensure_kubernetes_service("127.0.0.1".parse().expect("ip"), 6443)
        .await
        .expect("kubernetes service");
    let kubernetes = r
        .get_kv(&SERVICES, "default", "kubernetes")
        .await
        .expect("get")
        .expect("kubernetes service");
    let kubernetes = kubernetes.0;
    assert_eq!(kubernetes["spec"]["clusterIP"], "172.20.0.1");
    let cidr = r
        .get_kv(&SERVICE_CIDRS, "", "kubernetes")
        .await
        .expect("get")
        .expect("default ServiceCIDR");
    let cidr = cidr.0;
    assert_eq!(cidr["spec"]["cidrs"], json!(["172.20.0.0/28"]));

    // 14 usable addresses, one the kubernetes Service's: 13 more Services, then full.
    let mut ips = HashSet::new();
    for i in 0..13 {
        let created = create(&r, svc(&format!("s{i}"), json!({"ports": [{"port": 80}]})))
            .await
            .expect("create");
        let ip: std::net::Ipv4Addr = created["spec"]["clusterIP"]
            .as_str()
            .expect("ip")
            .parse()
            .expect("ipv4");
        assert!(
            small.item(ip).is_some() && ip != small.kubernetes_ip(),
            "{ip}"
        );
        assert!(ips.insert(ip), "{ip} twice");
    }
    let full = create(&r, svc("full", json!({"ports": [{"port": 80}]})))
        .await
        .expect_err("range full");
    assert!(error_text(&full).contains("range is full"), "{full:?}");
    let outside = create(
        &r,
        svc(
            "out",
            json!({"clusterIP": "10.96.0.10", "ports": [{"port": 80}]}),
        ),
    )
    .await
    .expect_err("outside");
    assert!(
        error_text(&outside).contains(
            "the provided IP (10.96.0.10) is not in the valid range. The range of valid IPs is 172.20.0.0/28"
        ),
        "{outside:?}"
    );
    let stored = storage
        .get(SERVICE_IPS_KEY)
        .await
        .expect("get")
        .expect("snapshot");
    let snapshot: Value = serde_json::from_slice(&stored.value).expect("json");
    assert_eq!(snapshot["range"], "172.20.0.0/28");
    drop(r);

    // Restarted with a wider range: the old snapshot is not read as this range's, so only
    // the kubernetes Service's address (the first of both ranges) holds.
    let wide: ServiceIpRange = "172.20.0.0/24".parse().expect("range");
    let restarted = Registry::new(Arc::clone(&storage) as Arc<dyn crate::storage::Storage>)
        .with_service_ip_range(wide);
    restarted
        .repair_service_allocations()
        .await
        .expect("repair");
    assert_eq!(
        restarted.service_allocations_used().await.expect("used").0,
        14,
        "the 13 Services and the kubernetes Service, rebuilt from the stored Services"
    );
    // Restarted with a disjoint range: the stored Services' IPs are outside it.
    let elsewhere: ServiceIpRange = "192.168.0.0/24".parse().expect("range");
    let moved = Registry::new(Arc::clone(&storage) as Arc<dyn crate::storage::Storage>)
        .with_service_ip_range(elsewhere);
    moved.repair_service_allocations().await.expect("repair");
    assert_eq!(moved.service_allocations_used().await.expect("used").0, 0);
    let created = create(&moved, svc("new", json!({"ports": [{"port": 80}]})))
        .await
        .expect("create in the new range");
    let ip = created["spec"]["clusterIP"].as_str().expect("ip");
    assert!(ip.starts_with("192.168.0."), "{ip}");
    assert_ne!(
        ip, "192.168.0.1",
        "the kubernetes Service's address stays reserved"
    );
}
