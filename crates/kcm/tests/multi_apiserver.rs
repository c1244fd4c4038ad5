//! Two `kcm apiserver` processes on one etcd: writes through one are seen by watches on the
//! other in order, concurrent updates through both have one winner per resourceVersion,
//! Service cluster IPs allocated through both never collide, and the `kubernetes` Endpoints
//! list both servers. Skipped (with a note) when the `etcd` binary is not installed.

mod etcd_support;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use etcd_support::{DEADLINE, config_map, port_of, rv, two_servers};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Endpoints, Service};
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_through_one_server_is_seen_in_order_by_a_watch_on_the_other() {
    let Some((_etcd, _dir, a, b)) = two_servers().await else {
        return;
    };
    let on_a: Api<ConfigMap> = Api::namespaced(a.client().await, "default");
    let on_b: Api<ConfigMap> = Api::namespaced(b.client().await, "default");
    let start = on_b
        .list_metadata(&Default::default())
        .await
        .expect("list on b")
        .metadata
        .resource_version
        .expect("list resourceVersion");
    let mut watch = on_b
        .watch(&WatchParams::default().timeout(50), &start)
        .await
        .expect("watch on b")
        .boxed();

    let mut written = Vec::new();
    for i in 0..10 {
        let created = on_a
            .create(&PostParams::default(), &config_map(&format!("c{i}"), "1"))
            .await
            .expect("create through a");
        written.push((format!("c{i}"), rv(&created)));
    }
    let mut updated = on_a.get("c3").await.expect("get");
    updated.data = Some([("v".to_owned(), "2".to_owned())].into());
    let updated = on_a
        .replace("c3", &PostParams::default(), &updated)
        .await
        .expect("update through a");
    written.push(("c3".into(), rv(&updated)));

    let mut seen = Vec::new();
    while seen.len() < written.len() {
        let event = tokio::time::timeout(DEADLINE, watch.try_next())
            .await
            .expect("a watch event in time")
            .expect("watch stream")
            .expect("watch open");
        match event {
            WatchEvent::Added(cm) | WatchEvent::Modified(cm) => {
                seen.push((cm.metadata.name.clone().unwrap_or_default(), rv(&cm)));
            }
            WatchEvent::Bookmark(_) => {}
            other => panic!("unexpected event {other:?}"),
        }
    }
    assert_eq!(seen, written, "every write, once, in order");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_updates_through_both_servers_have_one_winner_per_resource_version() {
    let Some((_etcd, _dir, a, b)) = two_servers().await else {
        return;
    };
    let apis: [Api<ConfigMap>; 2] = [
        Api::namespaced(a.client().await, "default"),
        Api::namespaced(b.client().await, "default"),
    ];
    apis[0]
        .create(&PostParams::default(), &config_map("race", "0"))
        .await
        .expect("create");
    for round in 0..10 {
        let base = apis[round % 2].get("race").await.expect("get");
        let writers = apis.iter().enumerate().map(|(i, api)| {
            let mut next = base.clone();
            next.data = Some([("v".to_owned(), format!("{round}-{i}"))].into());
            let api = api.clone();
            async move { api.replace("race", &PostParams::default(), &next).await }
        });
        let results = futures::future::join_all(writers).await;
        let winners: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        for result in &results {
            if let Err(kube::Error::Api(status)) = result {
                assert_eq!(status.code, 409, "round {round}: {status:?}");
            }
        }
        let now = apis[(round + 1) % 2].get("race").await.expect("get");
        assert_eq!(
            now.data, winners[0].data,
            "round {round}: the winner's write is stored"
        );
        assert!(rv(&now) > rv(&base));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_ips_allocated_concurrently_through_both_servers_never_collide() {
    const PER_SERVER: usize = 15;
    let Some((_etcd, _dir, a, b)) = two_servers().await else {
        return;
    };
    let apis: [Api<Service>; 2] = [
        Api::namespaced(a.client().await, "default"),
        Api::namespaced(b.client().await, "default"),
    ];
    let creates = (0..PER_SERVER * 2).map(|i| {
        let api = apis[i % 2].clone();
        async move {
            let svc: Service = serde_json::from_value(json!({
                "metadata": {"name": format!("s{i}")},
                "spec": {"type": "NodePort", "ports": [{"port": 80}]},
            }))
            .expect("service");
            api.create(&PostParams::default(), &svc).await
        }
    });
    let created = futures::future::join_all(creates).await;
    let mut ips = HashSet::new();
    let mut ports = HashSet::new();
    for svc in created {
        let svc = svc.expect("create service");
        let spec = svc.spec.expect("spec");
        let ip = spec.cluster_ip.expect("cluster IP");
        assert!(ips.insert(ip.clone()), "cluster IP {ip} handed out twice");
        for port in spec.ports.unwrap_or_default() {
            let node_port = port.node_port.expect("node port");
            assert!(
                ports.insert(node_port),
                "node port {node_port} handed out twice"
            );
        }
    }
    assert_eq!(ips.len(), PER_SERVER * 2);

    // The kubernetes Endpoints list both servers (each renews its lease every 10 s).
    let endpoints: Api<Endpoints> = Api::namespaced(a.client().await, "default");
    let want: HashSet<i32> = [&a, &b].iter().map(|s| i32::from(port_of(s))).collect();
    let deadline = Instant::now() + DEADLINE;
    loop {
        let ep = endpoints.get("kubernetes").await.expect("endpoints");
        let got: HashSet<i32> = ep
            .subsets
            .unwrap_or_default()
            .iter()
            .flat_map(|s| s.ports.clone().unwrap_or_default())
            .map(|p| p.port)
            .collect();
        if got == want {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the kubernetes Endpoints list {got:?}, not both servers {want:?}\n{}",
            a.logs()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
