//! `kcm up` as a process, driven by the installed `kubectl` exactly as the README's quick start
//! does: apply the nginx Deployment, wait for the rollout, update the image, replace a deleted
//! pod, scale to 0 and back, cordon a node, stop with SIGTERM (exit 0), restart on the same data
//! directory (and the same etcd) with the cluster's state intact, then the ReplicaSet example
//! and deletions through the garbage collector. Each scenario runs on SQLite and on etcd.
//! Skipped (with a note) when `kubectl` (or, for the etcd runs, `etcd`) is not installed.

mod kcm_up;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use kcm_up::{Backend, Up};

const NODES: [&str; 3] = ["kcm-node-0", "kcm-node-1", "kcm-node-2"];
/// The README's example Deployment and its pods' labels.
const DEPLOYMENT: &str = "deployment/nginx";
const SELECTOR: &str = "app=nginx";

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// Starts `kcm up` with three nodes and checks its banner.
fn start(backend: &Backend, data_dir: &Path) -> Up {
    let up = Up::start(backend, data_dir, &[], "info");
    let banner = &up.banner;
    assert!(
        banner[0].starts_with("kcm up: cluster running with 3 simulated nodes"),
        "{banner:?}"
    );
    assert!(
        banner[1]
            .trim()
            .starts_with("API server: https://127.0.0.1:"),
        "{banner:?}"
    );
    assert!(up.kubeconfig.starts_with(data_dir), "{banner:?}");
    assert!(up.kubeconfig.is_file());
    up
}

/// The pod queries of these scenarios.
impl Up {
    /// The pods matching `selector`.
    fn pods(&self, selector: &str) -> Vec<PodRow> {
        let out = self.kubectl_ok(&[
            "get",
            "pods",
            "-l",
            selector,
            "-o",
            "jsonpath={range .items[*]}{.metadata.name}{\"\\t\"}{.status.phase}{\"\\t\"}\
             {.status.conditions[?(@.type==\"Ready\")].status}{\"\\t\"}{.spec.nodeName}{\"\\t\"}\
             {.status.podIP}{\"\\t\"}{.metadata.deletionTimestamp}{\"\\t\"}\
             {.spec.containers[0].image}{\"\\n\"}{end}",
        ]);
        out.lines()
            .filter(|l| !l.is_empty())
            .map(|line| {
                let f: Vec<&str> = line.split('\t').collect();
                assert_eq!(f.len(), 7, "{line:?}");
                PodRow {
                    name: f[0].to_owned(),
                    running_ready: f[1] == "Running" && f[2] == "True" && f[5].is_empty(),
                    node: f[3].to_owned(),
                    ip: f[4].to_owned(),
                    image: f[6].to_owned(),
                }
            })
            .collect()
    }

    /// Waits until exactly `n` pods match `selector`, all Running and Ready (none terminating).
    fn wait_running(&self, selector: &str, n: usize) -> Vec<PodRow> {
        self.wait_for(&format!("{n} running pods {selector}"), || {
            let pods = self.pods(selector);
            (pods.len() == n && pods.iter().all(|p| p.running_ready)).then_some(pods)
        })
    }

    /// Waits until the three simulated nodes are registered, Ready and schedulable: the
    /// TaintNodesByCondition admission plugin registers a node with the
    /// `node.kubernetes.io/not-ready` taint, which the node lifecycle controller lifts just
    /// after the node turns Ready (as on a real cluster), and a Deployment created in between
    /// would not spread over all three.
    fn wait_nodes_ready(&self) {
        self.wait_for("3 Ready, untainted nodes", || {
            let out = self.kubectl_ok(&[
                "get",
                "nodes",
                "-o",
                "jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type==\"Ready\")].status}={.spec.taints[*].key}{\"\\n\"}{end}",
            ]);
            let ready: BTreeSet<&str> = out
                .lines()
                .filter(|l| !l.contains("node.kubernetes.io/not-ready"))
                .filter_map(|l| l.split_once("=True=").map(|(name, _)| name))
                .collect();
            (ready == NODES.into_iter().collect()).then_some(())
        });
    }
}

#[derive(Clone, Debug, PartialEq)]
struct PodRow {
    name: String,
    running_ready: bool,
    node: String,
    ip: String,
    image: String,
}

kcm_up::on_each_backend!(
    cluster_drives_and_resumes_after_restart:
        up_runs_a_cluster_that_kubectl_drives_and_resumes_after_restart_sqlite,
        up_runs_a_cluster_that_kubectl_drives_and_resumes_after_restart_etcd
);

/// The README's quick start, a restart on the same state, the ReplicaSet example and the
/// garbage collector.
fn cluster_drives_and_resumes_after_restart(backend: &Backend) {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let up = start(backend, &data);
    up.wait_nodes_ready();

    let manifest = examples_dir().join("nginx-deployment.yaml");
    let manifest = manifest.to_str().expect("utf-8 path");
    up.kubectl_ok(&["apply", "-f", manifest]);

    // Rolled out: three Running, Ready pods, one per node, each with an IP from the /24 the
    // node IPAM controller gave its node (from kcm up's default --cluster-cidr 10.224.0.0/11).
    up.kubectl_ok(&["rollout", "status", DEPLOYMENT, "--timeout=90s"]);
    up.wait_for("the pods to exist", || {
        (up.pods(SELECTOR).len() == 3).then_some(())
    });
    up.kubectl_ok(&[
        "wait",
        "--for=condition=Ready",
        "pod",
        "-l",
        SELECTOR,
        "--timeout=90s",
    ]);
    let pods = up.wait_running(SELECTOR, 3);
    let wide = up.kubectl_ok(&["get", "pods", "-l", SELECTOR, "-o", "wide"]);
    let rows: Vec<Vec<&str>> = wide
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 3, "{wide}");
    let mut nodes_used = BTreeSet::new();
    for row in &rows {
        // NAME READY STATUS RESTARTS AGE IP NODE ...
        assert_eq!(&row[1..3], ["1/1", "Running"], "{wide}");
        let node = row[6];
        let cidr = up.kubectl_ok(&["get", "node", node, "-o", "jsonpath={.spec.podCIDR}"]);
        let prefix = cidr
            .strip_suffix("0/24")
            .filter(|p| {
                let octets: Vec<&str> = p.split('.').collect();
                octets[0] == "10" && octets[1].parse::<u8>().is_ok_and(|b| b >= 224)
            })
            .unwrap_or_else(|| panic!("{node} has a /24 from the cluster CIDR: {cidr:?}"));
        assert!(
            row[5].starts_with(prefix),
            "pod IP from the node's CIDR {cidr}: {wide}"
        );
        nodes_used.insert(node);
    }
    assert_eq!(nodes_used.len(), 3, "spread over the nodes: {wide}");
    let ips: BTreeSet<&str> = pods.iter().map(|p| p.ip.as_str()).collect();
    assert_eq!(ips.len(), 3, "distinct IPs: {pods:?}");

    // Image update: a new ReplicaSet rolls out and replaces every pod.
    up.kubectl_ok(&["set", "image", DEPLOYMENT, "nginx=nginx:1.28"]);
    up.kubectl_ok(&["rollout", "status", DEPLOYMENT, "--timeout=90s"]);
    let pods = up.wait_for("the new image on every pod", || {
        let pods = up.wait_running(SELECTOR, 3);
        pods.iter().all(|p| p.image == "nginx:1.28").then_some(pods)
    });
    let old: BTreeSet<&str> = rows.iter().map(|r| r[0]).collect();
    assert!(pods.iter().all(|p| !old.contains(p.name.as_str())));
    let replica_sets = up.kubectl_ok(&["get", "rs", "-l", SELECTOR, "-o", "name"]);
    assert_eq!(replica_sets.lines().count(), 2, "{replica_sets}");

    // A deleted pod is finalized by its node and replaced.
    let victim = up.pods(SELECTOR)[0].name.clone();
    up.kubectl_ok(&["delete", "pod", &victim, "--timeout=60s"]);
    let pods = up.wait_for("the deleted pod's replacement", || {
        let pods = up.wait_running(SELECTOR, 3);
        pods.iter().all(|p| p.name != victim).then_some(pods)
    });
    assert_eq!(pods.len(), 3);

    // Scale to zero and back.
    up.kubectl_ok(&["scale", DEPLOYMENT, "--replicas=0"]);
    up.wait_running(SELECTOR, 0);
    up.kubectl_ok(&["scale", DEPLOYMENT, "--replicas=3"]);
    up.wait_running(SELECTOR, 3);

    // Cordon a node: new pods avoid it.
    let cordoned = NODES[0];
    up.kubectl_ok(&["cordon", cordoned]);
    // A probe pinned to the cordoned node proves the scheduler has seen the cordon before
    // the Deployment grows (the node and pod watches are separate streams).
    let probe = dir.path().join("probe.yaml");
    std::fs::write(
        &probe,
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: cordon-probe\nspec:\n  \
             nodeSelector:\n    kubernetes.io/hostname: {cordoned}\n  containers:\n  \
             - name: c\n    image: nginx:1.27\n"
        ),
    )
    .expect("write probe");
    let probe = probe.to_str().expect("utf-8 path");
    up.kubectl_ok(&["apply", "-f", probe]);
    up.wait_for("the probe to be refused by the cordon", || {
        let reason = up.kubectl_ok(&[
            "get",
            "pod",
            "cordon-probe",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"PodScheduled\")].reason}",
        ]);
        (reason == "Unschedulable").then_some(())
    });
    up.kubectl_ok(&["delete", "pod", "cordon-probe", "--timeout=60s"]);
    let on_cordoned = |pods: &[PodRow]| -> BTreeSet<String> {
        pods.iter()
            .filter(|p| p.node == cordoned)
            .map(|p| p.name.clone())
            .collect()
    };
    let before = on_cordoned(&up.pods(SELECTOR));
    up.kubectl_ok(&["scale", DEPLOYMENT, "--replicas=7"]);
    let pods = up.wait_running(SELECTOR, 7);
    let after = on_cordoned(&pods);
    assert!(
        after.is_subset(&before),
        "no new pod lands on the cordoned {cordoned}: before {before:?}, after {after:?}"
    );
    let ips: BTreeSet<&str> = pods.iter().map(|p| p.ip.as_str()).collect();
    assert_eq!(ips.len(), 7, "distinct IPs: {pods:?}");

    // SIGTERM stops gracefully.
    let state: BTreeMap<String, PodRow> = pods.into_iter().map(|p| (p.name.clone(), p)).collect();
    let status = up.terminate();
    assert_eq!(
        status.code(),
        Some(0),
        "exit status after SIGTERM: {status}"
    );

    // Restart on the same data directory: same nodes (still cordoned), same pods, same IPs.
    let up = start(backend, &data);
    up.wait_nodes_ready();
    let unschedulable = up.kubectl_ok(&[
        "get",
        "node",
        cordoned,
        "-o",
        "jsonpath={.spec.unschedulable}",
    ]);
    assert_eq!(unschedulable, "true", "the cordon survives the restart");
    let replicas = up.kubectl_ok(&["get", DEPLOYMENT, "-o", "jsonpath={.spec.replicas}"]);
    assert_eq!(replicas, "7");
    let resumed: BTreeMap<String, PodRow> = up
        .wait_running(SELECTOR, 7)
        .into_iter()
        .map(|p| (p.name.clone(), p))
        .collect();
    assert_eq!(resumed, state, "the pods, their nodes and IPs are kept");

    // The resumed cluster keeps working, and a new pod does not reuse a kept IP.
    up.kubectl_ok(&["uncordon", cordoned]);
    up.kubectl_ok(&["scale", DEPLOYMENT, "--replicas=8"]);
    let pods = up.wait_running(SELECTOR, 8);
    let ips: BTreeSet<&str> = pods.iter().map(|p| p.ip.as_str()).collect();
    assert_eq!(ips.len(), 8, "distinct IPs after the restart: {pods:?}");

    // The ReplicaSet example.
    let replica_set = examples_dir().join("nginx-replicaset.yaml");
    let replica_set = replica_set.to_str().expect("utf-8 path");
    up.kubectl_ok(&["apply", "-f", replica_set]);
    up.wait_for("the ReplicaSet's pods to exist", || {
        (up.pods("app=frontend").len() == 3).then_some(())
    });
    up.kubectl_ok(&[
        "wait",
        "--for=condition=Ready",
        "pod",
        "-l",
        "app=frontend",
        "--timeout=90s",
    ]);
    up.wait_running("app=frontend", 3);

    // Deleting an owner takes its pods with it, through the garbage collector.
    up.kubectl_ok(&["delete", "-f", replica_set, "--timeout=60s"]);
    up.kubectl_ok(&["delete", "-f", manifest, "--timeout=60s"]);
    for selector in ["app=frontend", SELECTOR] {
        up.wait_for(
            &format!("the garbage collector to delete {selector}"),
            || up.pods(selector).is_empty().then_some(()),
        );
    }
    let replica_sets = up.kubectl_ok(&["get", "rs", "-o", "name"]);
    assert_eq!(
        replica_sets, "",
        "the Deployment's ReplicaSets are collected too"
    );

    let status = up.terminate();
    assert_eq!(
        status.code(),
        Some(0),
        "exit status after SIGTERM: {status}"
    );
}

impl Up {
    /// `kubectl get <what> -o jsonpath=<path>`.
    fn jsonpath(&self, what: &[&str], path: &str) -> String {
        let mut args = vec!["get"];
        args.extend_from_slice(what);
        let jp = format!("jsonpath={path}");
        args.extend_from_slice(&["-o", &jp]);
        self.kubectl_ok(&args)
    }

    /// `(name, ready)` of the pods matching `selector`, sorted by name.
    fn pod_readiness(&self, selector: &str) -> Vec<(String, bool)> {
        let mut rows: Vec<(String, bool)> = self
            .pods(selector)
            .into_iter()
            .map(|p| (p.name, p.running_ready))
            .collect();
        rows.sort();
        rows
    }
}

/// The example manifest `file` as a path argument.
fn example(file: &str) -> String {
    examples_dir().join(file).to_string_lossy().into_owned()
}

kcm_up::on_each_backend!(
    daemon_sets_stateful_sets_and_replication_controllers:
        up_runs_daemon_sets_stateful_sets_and_replication_controllers_sqlite,
        up_runs_daemon_sets_stateful_sets_and_replication_controllers_etcd
);

/// The acceptance of the DaemonSet, StatefulSet and ReplicationController controllers on
/// `kcm up` with three nodes, driven by `kubectl` as a user would.
fn daemon_sets_stateful_sets_and_replication_controllers(backend: &Backend) {
    let dir = tempfile::tempdir().expect("tempdir");
    let up = start(backend, &dir.path().join("data"));
    up.wait_nodes_ready();

    // ---- DaemonSet: exactly one pod per node.
    const AGENT: &str = "app=node-agent";
    up.kubectl_ok(&["apply", "-f", &example("node-agent-daemonset.yaml")]);
    up.kubectl_ok(&["rollout", "status", "ds/node-agent", "--timeout=90s"]);
    let agents = up.wait_running(AGENT, 3);
    let nodes: BTreeSet<&str> = agents.iter().map(|p| p.node.as_str()).collect();
    assert_eq!(nodes, NODES.into_iter().collect(), "{agents:?}");
    let names = |pods: &[PodRow]| pods.iter().map(|p| p.name.clone()).collect::<BTreeSet<_>>();
    let before = names(&agents);

    // Cordoning evicts nothing (daemon pods tolerate the unschedulable taint).
    up.kubectl_ok(&["cordon", "kcm-node-0"]);
    up.wait_for("the unschedulable taint on kcm-node-0", || {
        up.jsonpath(&["node", "kcm-node-0"], "{.spec.taints[*].key}")
            .contains("node.kubernetes.io/unschedulable")
            .then_some(())
    });
    assert_eq!(
        names(&up.wait_running(AGENT, 3)),
        before,
        "cordon moved daemon pods"
    );
    up.kubectl_ok(&["uncordon", "kcm-node-0"]);

    // A NoSchedule taint keeps the pod there but no longer counts the node as desired.
    up.kubectl_ok(&["taint", "nodes", "kcm-node-1", "dedicated=x:NoSchedule"]);
    up.wait_for("desired 2, misscheduled 1", || {
        let s = up.jsonpath(
            &["ds", "node-agent"],
            "{.status.desiredNumberScheduled}/{.status.numberMisscheduled}",
        );
        (s == "2/1").then_some(())
    });
    assert_eq!(
        names(&up.wait_running(AGENT, 3)),
        before,
        "the taint evicted a daemon pod"
    );
    up.kubectl_ok(&["taint", "nodes", "kcm-node-1", "dedicated-"]);

    // A new nodeSelector moves the pods.
    up.kubectl_ok(&["label", "node", "kcm-node-2", "role=edge"]);
    up.kubectl_ok(&[
        "patch",
        "ds",
        "node-agent",
        "-p",
        r#"{"spec":{"template":{"spec":{"nodeSelector":{"role":"edge"}}}}}"#,
    ]);
    let edge = up.wait_for("the agent only on kcm-node-2", || {
        let pods = up.pods(AGENT);
        (pods.len() == 1 && pods[0].node == "kcm-node-2" && pods[0].running_ready).then_some(pods)
    });
    assert_eq!(edge.len(), 1);
    up.kubectl_ok(&[
        "patch",
        "ds",
        "node-agent",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/spec/template/spec/nodeSelector"}]"#,
    ]);
    up.kubectl_ok(&["rollout", "status", "ds/node-agent", "--timeout=90s"]);
    up.wait_running(AGENT, 3);

    // A template change rolls one node at a time (maxUnavailable 1) and rolls back.
    up.kubectl_ok(&[
        "set",
        "image",
        "ds/node-agent",
        "agent=registry.k8s.io/pause:3.10",
    ]);
    up.wait_for("the rolling update to finish, never two nodes down", || {
        let s = up.jsonpath(
            &["ds", "node-agent"],
            "{.metadata.generation}/{.status.observedGeneration}/{.status.updatedNumberScheduled}/{.status.numberAvailable}/{.status.numberUnavailable}",
        );
        let f: Vec<&str> = s.split('/').collect();
        let unavailable: i64 = f.get(4).and_then(|v| v.parse().ok()).unwrap_or(0);
        assert!(unavailable <= 1, "maxUnavailable 1 exceeded: {s}");
        (f.len() == 5 && f[0] == f[1] && f[2] == "3" && f[3] == "3").then_some(())
    });
    up.kubectl_ok(&["rollout", "status", "ds/node-agent", "--timeout=90s"]);
    assert!(
        up.wait_running(AGENT, 3)
            .iter()
            .all(|p| p.image.ends_with("pause:3.10"))
    );
    up.kubectl_ok(&["rollout", "undo", "ds/node-agent"]);
    up.kubectl_ok(&["rollout", "status", "ds/node-agent", "--timeout=90s"]);
    up.wait_for("the revision-1 image back on every node", || {
        let pods = up.pods(AGENT);
        (pods.len() == 3
            && pods
                .iter()
                .all(|p| p.running_ready && p.image.ends_with("pause:3.9")))
        .then_some(())
    });
    let history = up.kubectl_ok(&["rollout", "history", "ds/node-agent"]);
    assert!(history.contains("REVISION"), "{history}");

    // ---- StatefulSet: OrderedReady creation, claims, scale-down in reverse.
    const WEB: &str = "app=web";
    up.kubectl_ok(&["apply", "-f", &example("web-statefulset.yaml")]);
    let mut seen_ready: BTreeSet<String> = BTreeSet::new();
    up.wait_for("web-0..2 Running and Ready, created in order", || {
        let pods = up.pod_readiness(WEB);
        for (i, (name, _)) in pods.iter().enumerate() {
            if let Some(pred) = name
                .strip_prefix("web-")
                .and_then(|o| o.parse::<usize>().ok())
                .and_then(|o| o.checked_sub(1))
            {
                let pred = format!("web-{pred}");
                let pred_ready_now = pods.iter().any(|(n, r)| *n == pred && *r);
                assert!(
                    seen_ready.contains(&pred) || pred_ready_now,
                    "{name} exists before {pred} was Ready: {pods:?} (#{i})"
                );
            }
        }
        seen_ready.extend(pods.iter().filter(|(_, r)| *r).map(|(n, _)| n.clone()));
        (pods.len() == 3 && pods.iter().all(|(_, r)| *r)).then_some(())
    });
    up.kubectl_ok(&["rollout", "status", "sts/web", "--timeout=90s"]);
    up.wait_for("www-web-0..2 Bound", || {
        let claims = up.jsonpath(
            &["pvc"],
            "{range .items[*]}{.metadata.name}={.status.phase}{\"\\n\"}{end}",
        );
        let bound: BTreeSet<&str> = claims
            .lines()
            .filter_map(|l| l.strip_suffix("=Bound"))
            .collect();
        (bound == BTreeSet::from(["www-web-0", "www-web-1", "www-web-2"])).then_some(())
    });

    up.kubectl_ok(&["scale", "sts", "web", "--replicas=1"]);
    up.wait_for("web-2 then web-1 deleted", || {
        let names: Vec<String> = up.pod_readiness(WEB).into_iter().map(|(n, _)| n).collect();
        assert!(
            !names.contains(&"web-2".to_owned()) || names.contains(&"web-1".to_owned()),
            "web-1 went before web-2: {names:?}"
        );
        (names == ["web-0"]).then_some(())
    });

    // A never-ready pod blocks further creation.
    up.kubectl_ok(&["annotate", "pod", "web-0", "sim.kcm.io/ready=false"]);
    up.wait_for("web-0 not Ready", || {
        (up.pod_readiness(WEB) == [("web-0".to_owned(), false)]).then_some(())
    });
    up.kubectl_ok(&["scale", "sts", "web", "--replicas=3"]);
    up.wait_for("the scale observed", || {
        let s = up.jsonpath(
            &["sts", "web"],
            "{.metadata.generation}/{.status.observedGeneration}",
        );
        let f: Vec<&str> = s.split('/').collect();
        (f.len() == 2 && f[0] == f[1]).then_some(())
    });
    assert_eq!(
        up.pod_readiness(WEB).len(),
        1,
        "web-1 created while web-0 is not Ready"
    );
    up.kubectl_ok(&["annotate", "pod", "web-0", "sim.kcm.io/ready-"]);
    up.kubectl_ok(&["rollout", "status", "sts/web", "--timeout=90s"]);
    up.wait_running(WEB, 3);

    // Partition 2: only web-2 is updated; the history lists both revisions.
    up.kubectl_ok(&[
        "patch",
        "sts",
        "web",
        "-p",
        r#"{"spec":{"updateStrategy":{"rollingUpdate":{"partition":2}}}}"#,
    ]);
    up.kubectl_ok(&[
        "set",
        "image",
        "sts/web",
        "nginx=registry.k8s.io/nginx-slim:0.9",
    ]);
    let images = up.wait_for("web-2 updated", || {
        let pods = up.pods(WEB);
        let image = |n: &str| {
            pods.iter()
                .find(|p| p.name == n && p.running_ready)
                .map(|p| p.image.clone())
        };
        match (image("web-0"), image("web-1"), image("web-2")) {
            (Some(a), Some(b), Some(c)) if c.ends_with("0.9") => Some([a, b, c]),
            _ => None,
        }
    });
    assert!(
        images[0].ends_with("0.8") && images[1].ends_with("0.8"),
        "{images:?}"
    );
    let history = up.kubectl_ok(&["rollout", "history", "sts/web"]);
    let revisions: Vec<&str> = history
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| w.parse::<u32>().is_ok())
        .collect();
    assert_eq!(revisions, ["1", "2"], "{history}");

    // ---- ReplicationController: adopts a matching orphan, scales.
    const RC: &str = "app=frontend-rc";
    up.kubectl_ok(&[
        "run",
        "stray",
        "--image=nginx:1.27",
        "--labels=app=frontend-rc",
    ]);
    up.kubectl_ok(&["apply", "-f", &example("frontend-rc.yaml")]);
    up.wait_for("three pods owned by the RC, the orphan adopted", || {
        let owners = up.jsonpath(
            &["pods", "-l", RC],
            "{range .items[*]}{.metadata.name}={.metadata.ownerReferences[0].kind}{\"\\n\"}{end}",
        );
        let rows: Vec<&str> = owners.lines().collect();
        (rows.len() == 3
            && rows.iter().all(|r| r.ends_with("=ReplicationController"))
            && rows.iter().any(|r| r.starts_with("stray=")))
        .then_some(())
    });
    up.kubectl_ok(&["scale", "rc", "frontend-rc", "--replicas=5"]);
    up.wait_running(RC, 5);

    let status = up.terminate();
    assert_eq!(
        status.code(),
        Some(0),
        "exit status after SIGTERM: {status}"
    );
}

kcm_up::on_each_backend!(
    load_balancer_services_get_addresses_from_the_simulated_cloud:
        up_gives_load_balancer_services_an_external_ip_sqlite,
        up_gives_load_balancer_services_an_external_ip_etcd
);

/// The service-lb controller with `kcm up`'s simulated cloud, driven by `kubectl` as a user
/// would: `kubectl expose --type=LoadBalancer` shows an EXTERNAL-IP from the pool, a full pool
/// leaves the next Service pending with `SyncLoadBalancerFailed` until an address is freed
/// (by a deletion or a type change), and a Service with a `loadBalancerClass` is left alone.
fn load_balancer_services_get_addresses_from_the_simulated_cloud(backend: &Backend) {
    let dir = tempfile::tempdir().expect("tempdir");
    // Two addresses: 192.0.2.1 and 192.0.2.2.
    let up = Up::start(
        backend,
        &dir.path().join("data"),
        &["--load-balancer-ip-pool", "192.0.2.0/30"],
        "info",
    );
    up.wait_nodes_ready();
    let ingress = |svc: &str| up.jsonpath(&["svc", svc], "{.status.loadBalancer.ingress[*].ip}");
    let wait_ingress = |svc: &str, want: &str| {
        up.wait_for(&format!("{svc} at {want:?}"), || {
            (ingress(svc) == want).then_some(())
        })
    };

    up.kubectl_ok(&["create", "deployment", "web", "--image=nginx"]);
    up.kubectl_ok(&[
        "expose",
        "deployment",
        "web",
        "--type=LoadBalancer",
        "--port=80",
    ]);
    wait_ingress("web", "192.0.2.1");
    let table = up.kubectl_ok(&["get", "svc", "web"]);
    assert!(table.contains("EXTERNAL-IP"), "{table}");
    assert!(table.contains("192.0.2.1"), "{table}");
    assert_eq!(
        up.jsonpath(&["svc", "web"], "{.metadata.finalizers}"),
        r#"["service.kubernetes.io/load-balancer-cleanup"]"#
    );
    let reasons = |svc: &str| {
        up.kubectl_ok(&[
            "get",
            "events",
            "--field-selector",
            &format!("involvedObject.kind=Service,involvedObject.name={svc}"),
            "-o",
            "jsonpath={range .items[*]}{.reason}{\" \"}{.source.component}{\"\\n\"}{end}",
        ])
    };
    let events = reasons("web");
    for want in [
        "EnsuringLoadBalancer service-controller",
        "EnsuredLoadBalancer service-controller",
    ] {
        assert!(events.contains(want), "{want} missing from\n{events}");
    }

    // The allocator's records: the web Service's cluster IP as an IPAddress, the default
    // ServiceCIDR protected by the service-cidr controller.
    let cluster_ip = up.jsonpath(&["svc", "web"], "{.spec.clusterIP}");
    let addresses = up.kubectl_ok(&["get", "servicecidrs,ipaddresses"]);
    assert!(
        addresses.contains(&format!("ipaddress.networking.k8s.io/{cluster_ip}")),
        "{addresses}"
    );
    assert!(addresses.contains("services/default/web"), "{addresses}");
    up.wait_for("the default ServiceCIDR's finalizer", || {
        (up.jsonpath(&["servicecidr", "kubernetes"], "{.metadata.finalizers}")
            == r#"["networking.k8s.io/service-cidr-finalizer"]"#)
            .then_some(())
    });

    up.kubectl_ok(&["create", "service", "loadbalancer", "second", "--tcp=80"]);
    wait_ingress("second", "192.0.2.2");
    // The pool is full: the third waits, and says why.
    up.kubectl_ok(&["create", "service", "loadbalancer", "third", "--tcp=80"]);
    up.wait_for("SyncLoadBalancerFailed on third", || {
        reasons("third")
            .contains("SyncLoadBalancerFailed")
            .then_some(())
    });
    let message = up.kubectl_ok(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=third,reason=SyncLoadBalancerFailed",
        "-o",
        "jsonpath={.items[0].message}",
    ]);
    assert_eq!(
        message,
        "Error syncing load balancer: failed to ensure load balancer: no free address in the \
         load balancer pool 192.0.2.0/30"
    );
    assert_eq!(ingress("third"), "");

    // Another implementation's Service is not touched.
    let classed = r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"classed"},
        "spec":{"type":"LoadBalancer","loadBalancerClass":"example.com/lb",
        "ports":[{"port":80}]}}"#;
    let manifest = dir.path().join("classed.json");
    std::fs::write(&manifest, classed).expect("manifest");
    up.kubectl_ok(&["apply", "-f", &manifest.to_string_lossy()]);

    // Deleting web frees its address for third (retried with backoff).
    up.kubectl_ok(&["delete", "svc", "web", "--wait=true"]);
    up.wait_for("web's IPAddress gone", || {
        let (found, _, _) = up.kubectl(&["get", "ipaddress", &cluster_ip]);
        (!found).then_some(())
    });
    wait_ingress("third", "192.0.2.1");
    // A type change releases second's address and its finalizer.
    up.kubectl_ok(&[
        "patch",
        "svc",
        "second",
        "--type=merge",
        "-p",
        r#"{"spec":{"type":"ClusterIP"}}"#,
    ]);
    up.wait_for("second released", || {
        (ingress("second").is_empty()
            && up
                .jsonpath(&["svc", "second"], "{.metadata.finalizers}")
                .is_empty())
        .then_some(())
    });
    let events = reasons("second");
    for want in [
        "Type service-controller",
        "DeletedLoadBalancer service-controller",
    ] {
        assert!(events.contains(want), "{want} missing from\n{events}");
    }
    assert_eq!(ingress("classed"), "");
    assert_eq!(
        up.jsonpath(&["svc", "classed"], "{.metadata.finalizers}"),
        ""
    );
}

kcm_up::on_each_backend!(
    pods_with_claims_get_their_volumes_attached_and_detached:
        up_attaches_a_pods_volume_and_detaches_it_when_the_pod_goes_sqlite,
        up_attaches_a_pods_volume_and_detaches_it_when_the_pod_goes_etcd
);

/// The attach/detach controller with the simulated CSI driver: a pod with a claim of the default
/// class runs once its volume is attached (a VolumeAttachment `attached: true`, the node listing
/// `kubernetes.io/csi/hostpath.sim.kcm.io^<handle>` in `volumesAttached` and `volumesInUse`);
/// deleting the pod removes the VolumeAttachment and the node's entries.
fn pods_with_claims_get_their_volumes_attached_and_detached(backend: &Backend) {
    let dir = tempfile::tempdir().expect("tempdir");
    let up = start(backend, &dir.path().join("data"));
    up.wait_nodes_ready();
    let manifest = dir.path().join("pod.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data}\n\
         spec:\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 1Gi}}\n\
         ---\napiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n\
         \x20 containers: [{name: c, image: nginx}]\n\
         \x20 volumes: [{name: d, persistentVolumeClaim: {claimName: data}}]\n",
    )
    .expect("manifest");
    up.kubectl_ok(&["apply", "-f", &manifest.to_string_lossy()]);
    up.wait_for("pod web running", || {
        (up.jsonpath(&["pod", "web"], "{.status.phase}") == "Running").then_some(())
    });
    let node = up.jsonpath(&["pod", "web"], "{.spec.nodeName}");
    let pv = up.jsonpath(&["pvc", "data"], "{.spec.volumeName}");
    assert_eq!(
        up.jsonpath(&["pv", &pv], "{.spec.csi.driver}"),
        "hostpath.sim.kcm.io"
    );
    let handle = up.jsonpath(&["pv", &pv], "{.spec.csi.volumeHandle}");
    let unique = format!("kubernetes.io/csi/hostpath.sim.kcm.io^{handle}");
    let attachments = || {
        up.kubectl_ok(&[
            "get",
            "volumeattachments",
            "-o",
            "jsonpath={range .items[*]}{.spec.attacher} {.spec.nodeName} \
             {.spec.source.persistentVolumeName} {.status.attached}{\"\\n\"}{end}",
        ])
    };
    assert_eq!(
        attachments(),
        format!("hostpath.sim.kcm.io {node} {pv} true\n")
    );
    assert_eq!(
        up.jsonpath(&["node", &node], "{.status.volumesAttached[*].name}"),
        unique
    );
    up.wait_for("the volume in use on the node", || {
        (up.jsonpath(&["node", &node], "{.status.volumesInUse}") == format!("[\"{unique}\"]"))
            .then_some(())
    });
    let event = up.wait_for("the SuccessfulAttachVolume event", || {
        let out = up.kubectl_ok(&[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=web,reason=SuccessfulAttachVolume",
            "-o",
            "jsonpath={range .items[*]}{.source.component}: {.message}{end}",
        ]);
        (!out.is_empty()).then_some(out)
    });
    assert_eq!(
        event.trim_end(),
        format!("attachdetach-controller: AttachVolume.Attach succeeded for volume \"{pv}\"")
    );

    up.kubectl_ok(&["delete", "pod", "web", "--wait=true"]);
    up.wait_for("the VolumeAttachment gone", || {
        attachments().is_empty().then_some(())
    });
    up.wait_for("the node's volume entries gone", || {
        (up.jsonpath(&["node", &node], "{.status.volumesAttached}")
            .is_empty()
            && matches!(
                up.jsonpath(&["node", &node], "{.status.volumesInUse}")
                    .as_str(),
                "" | "[]"
            ))
        .then_some(())
    });
}

kcm_up::on_each_backend!(
    claims_bind_wait_for_their_consumer_stay_while_used_and_release:
        up_binds_claims_to_volumes_protects_them_in_use_and_releases_them_sqlite,
        up_binds_claims_to_volumes_protects_them_in_use_and_releases_them_etcd
);

/// The storage controllers with the simulated scheduler and CSI driver, as a user sees them:
/// - a pre-created `Retain` volume binds to a matching claim; once the claim is deleted the
///   volume is `Released` and a new matching claim stays `Pending`;
/// - a `WaitForFirstConsumer` claim of a `kubernetes.io/no-provisioner` class stays `Pending`
///   until its pod is scheduled, then binds to the volume on that pod's node, the only node
///   the volume admits;
/// - a claim in use, deleted, stays (with its deletion timestamp) until its pod is gone;
/// - a generic ephemeral volume gets claim `<pod>-<volume>`, owned by the pod, bound, and
///   garbage-collected with the pod; its `Delete` volume goes with it.
fn claims_bind_wait_for_their_consumer_stay_while_used_and_release(backend: &Backend) {
    let dir = tempfile::tempdir().expect("tempdir");
    let up = start(backend, &dir.path().join("data"));
    up.wait_nodes_ready();
    let apply = |name: &str, yaml: &str| {
        let file = dir.path().join(name);
        std::fs::write(&file, yaml).expect("manifest");
        up.kubectl_ok(&["apply", "-f", &file.to_string_lossy()]);
    };
    let phase = |kind: &str, name: &str| up.jsonpath(&[kind, name], "{.status.phase}");

    // ---- A pre-created Retain volume, bound and released.
    apply(
        "retain.yaml",
        "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: manual}\n\
         provisioner: kubernetes.io/no-provisioner\n\
         ---\napiVersion: v1\nkind: PersistentVolume\nmetadata: {name: kept}\nspec:\n\
         \x20 capacity: {storage: 2Gi}\n  accessModes: [ReadWriteOnce]\n\
         \x20 storageClassName: manual\n  persistentVolumeReclaimPolicy: Retain\n\
         \x20 hostPath: {path: /tmp/kept}\n\
         ---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: first}\nspec:\n\
         \x20 accessModes: [ReadWriteOnce]\n  storageClassName: manual\n\
         \x20 resources: {requests: {storage: 1Gi}}\n",
    );
    up.wait_for("claim first Bound to kept", || {
        (phase("pvc", "first") == "Bound"
            && up.jsonpath(&["pvc", "first"], "{.spec.volumeName}") == "kept"
            && phase("pv", "kept") == "Bound")
            .then_some(())
    });
    up.kubectl_ok(&["delete", "pvc", "first", "--wait=true"]);
    up.wait_for("volume kept Released", || {
        (phase("pv", "kept") == "Released").then_some(())
    });
    apply(
        "second.yaml",
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: second}\nspec:\n\
         \x20 accessModes: [ReadWriteOnce]\n  storageClassName: manual\n\
         \x20 resources: {requests: {storage: 1Gi}}\n",
    );
    // Once the PV controller has synced the new claim (its event says so), it is still pending.
    let said = up.wait_for("an event on claim second", || {
        let out = up.kubectl_ok(&[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=second",
            "-o",
            "jsonpath={.items[0].reason}",
        ]);
        (!out.is_empty()).then_some(out)
    });
    assert_eq!(
        phase("pvc", "second"),
        "Pending",
        "a Released volume is not rebound ({said})"
    );
    assert_eq!(phase("pv", "kept"), "Released");

    // ---- WaitForFirstConsumer: bound once the pod is scheduled, to the volume on its node.
    apply(
        "local.yaml",
        "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: local}\n\
         provisioner: kubernetes.io/no-provisioner\nvolumeBindingMode: WaitForFirstConsumer\n\
         ---\napiVersion: v1\nkind: PersistentVolume\nmetadata: {name: disk-2}\nspec:\n\
         \x20 capacity: {storage: 1Gi}\n  accessModes: [ReadWriteOnce]\n\
         \x20 storageClassName: local\n  local: {path: /mnt/disk}\n  nodeAffinity:\n\
         \x20   required:\n      nodeSelectorTerms:\n\
         \x20     - matchExpressions:\n\
         \x20       - {key: kubernetes.io/hostname, operator: In, values: [kcm-node-2]}\n\
         ---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: near}\nspec:\n\
         \x20 accessModes: [ReadWriteOnce]\n  storageClassName: local\n\
         \x20 resources: {requests: {storage: 1Gi}}\n",
    );
    let waiting = up.wait_for("the WaitForFirstConsumer event", || {
        let out = up.kubectl_ok(&[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=near,reason=WaitForFirstConsumer",
            "-o",
            "jsonpath={.items[0].message}",
        ]);
        (!out.is_empty()).then_some(out)
    });
    assert_eq!(
        waiting,
        "waiting for first consumer to be created before binding"
    );
    assert_eq!(phase("pvc", "near"), "Pending");
    apply(
        "user.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: user}\nspec:\n\
         \x20 containers: [{name: c, image: nginx}]\n\
         \x20 volumes: [{name: d, persistentVolumeClaim: {claimName: near}}]\n",
    );
    up.wait_for("pod user running", || {
        (phase("pod", "user") == "Running").then_some(())
    });
    assert_eq!(
        up.jsonpath(&["pod", "user"], "{.spec.nodeName}"),
        "kcm-node-2"
    );
    assert_eq!(phase("pvc", "near"), "Bound");
    assert_eq!(
        up.jsonpath(&["pvc", "near"], "{.spec.volumeName}"),
        "disk-2"
    );
    assert_eq!(
        up.jsonpath(
            &["pv", "disk-2"],
            "{.metadata.annotations.pv\\.kubernetes\\.io/bound-by-controller}"
        ),
        "yes"
    );

    // ---- A claim in use stays until its pod is gone.
    up.kubectl_ok(&["delete", "pvc", "near", "--wait=false"]);
    up.wait_for("claim near marked for deletion", || {
        (!up.jsonpath(&["pvc", "near"], "{.metadata.deletionTimestamp}")
            .is_empty())
        .then_some(())
    });
    assert_eq!(
        up.jsonpath(&["pvc", "near"], "{.metadata.finalizers}"),
        "[\"kubernetes.io/pvc-protection\"]",
        "kept while its pod runs"
    );
    up.kubectl_ok(&["delete", "pod", "user", "--wait=true"]);
    up.wait_for("claim near gone", || {
        let (ok, _, err) = up.kubectl(&["get", "pvc", "near"]);
        (!ok && err.contains("NotFound")).then_some(())
    });

    // ---- A generic ephemeral volume: its claim comes and goes with the pod.
    apply(
        "scratch.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: scratch}\nspec:\n\
         \x20 containers: [{name: c, image: nginx}]\n\
         \x20 volumes:\n  - name: tmp\n    ephemeral:\n      volumeClaimTemplate:\n\
         \x20       spec:\n          accessModes: [ReadWriteOnce]\n\
         \x20         resources: {requests: {storage: 1Gi}}\n",
    );
    up.wait_for("pod scratch running", || {
        (phase("pod", "scratch") == "Running").then_some(())
    });
    assert_eq!(phase("pvc", "scratch-tmp"), "Bound");
    assert_eq!(
        up.jsonpath(
            &["pvc", "scratch-tmp"],
            "{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}"
        ),
        "Pod/scratch"
    );
    let provisioned = up.jsonpath(&["pvc", "scratch-tmp"], "{.spec.volumeName}");
    assert_eq!(
        up.jsonpath(
            &["pv", &provisioned],
            "{.spec.persistentVolumeReclaimPolicy}"
        ),
        "Delete"
    );
    up.kubectl_ok(&["delete", "pod", "scratch", "--wait=true"]);
    up.wait_for("claim scratch-tmp and its volume gone", || {
        let (claim, _, _) = up.kubectl(&["get", "pvc", "scratch-tmp"]);
        let (volume, _, _) = up.kubectl(&["get", "pv", &provisioned]);
        (!claim && !volume).then_some(())
    });
}

kcm_up::on_each_backend!(
    claims_grow_through_the_resizer_and_the_node:
        up_expands_a_claim_through_the_resizer_then_on_the_node_of_its_next_pod_sqlite,
        up_expands_a_claim_through_the_resizer_then_on_the_node_of_its_next_pod_etcd
);

/// Volume expansion with the simulated CSI driver, as a user drives it: a bound claim of the
/// default class (`allowVolumeExpansion: true`) patched from 1Gi to 2Gi while no pod uses it is
/// resized by the simulated external-resizer (the PV shows 2Gi, the claim
/// `FileSystemResizePending` / `NodeResizePending` with its capacity still 1Gi); the next pod
/// using it finishes the expansion on its node (capacity 2Gi, the conditions gone).
fn claims_grow_through_the_resizer_and_the_node(backend: &Backend) {
    let dir = tempfile::tempdir().expect("tempdir");
    let up = start(backend, &dir.path().join("data"));
    up.wait_nodes_ready();
    let claim = dir.path().join("claim.yaml");
    std::fs::write(
        &claim,
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data}\n\
         spec:\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 1Gi}}\n",
    )
    .expect("manifest");
    let pod = dir.path().join("pod.yaml");
    std::fs::write(
        &pod,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n\
         \x20 containers: [{name: c, image: nginx}]\n\
         \x20 volumes: [{name: d, persistentVolumeClaim: {claimName: data}}]\n",
    )
    .expect("manifest");
    up.kubectl_ok(&["apply", "-f", &claim.to_string_lossy()]);
    up.kubectl_ok(&["apply", "-f", &pod.to_string_lossy()]);
    up.wait_for("claim data bound and pod web running", || {
        (up.jsonpath(&["pvc", "data"], "{.status.phase}") == "Bound"
            && up.jsonpath(&["pod", "web"], "{.status.phase}") == "Running")
            .then_some(())
    });
    assert_eq!(
        up.jsonpath(&["storageclass", "standard"], "{.allowVolumeExpansion}"),
        "true"
    );
    let pv = up.jsonpath(&["pvc", "data"], "{.spec.volumeName}");
    up.kubectl_ok(&["delete", "pod", "web", "--wait=true"]);

    up.kubectl_ok(&[
        "patch",
        "pvc",
        "data",
        "-p",
        r#"{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}"#,
    ]);
    let condition = |type_: &str| {
        up.jsonpath(
            &["pvc", "data"],
            &format!("{{.status.conditions[?(@.type==\"{type_}\")].status}}"),
        )
    };
    up.wait_for("the claim pending its file system resize", || {
        (condition("FileSystemResizePending") == "True").then_some(())
    });
    assert_eq!(up.jsonpath(&["pv", &pv], "{.spec.capacity.storage}"), "2Gi");
    assert_eq!(
        up.jsonpath(&["pvc", "data"], "{.status.capacity.storage}"),
        "1Gi"
    );
    assert_eq!(
        up.jsonpath(&["pvc", "data"], "{.status.allocatedResources.storage}"),
        "2Gi"
    );
    assert_eq!(
        up.jsonpath(
            &["pvc", "data"],
            "{.status.allocatedResourceStatuses.storage}"
        ),
        "NodeResizePending"
    );
    let claim_events = || {
        up.kubectl_ok(&[
            "get",
            "events",
            "--field-selector",
            "involvedObject.kind=PersistentVolumeClaim,involvedObject.name=data",
            "-o",
            "jsonpath={range .items[*]}{.reason}|{.source.component}|{.message}{\"\\n\"}{end}",
        ])
    };
    let events = up.wait_for("the resizer's events", || {
        let out = claim_events();
        out.contains("FileSystemResizeRequired").then_some(out)
    });
    for want in [
        format!("Resizing|external-resizer hostpath.sim.kcm.io|External resizer is resizing volume {pv}"),
        "FileSystemResizeRequired|external-resizer hostpath.sim.kcm.io|Require file system resize of volume on node".to_owned(),
    ] {
        assert!(events.contains(&want), "{want} missing from\n{events}");
    }
    assert!(
        !events.contains("FileSystemResizeSuccessful"),
        "no pod uses the claim: {events}"
    );

    up.kubectl_ok(&["apply", "-f", &pod.to_string_lossy()]);
    up.wait_for("the claim expanded on the node", || {
        (up.jsonpath(&["pvc", "data"], "{.status.capacity.storage}") == "2Gi"
            && condition("FileSystemResizePending").is_empty()
            && condition("Resizing").is_empty())
        .then_some(())
    });
    assert_eq!(
        up.jsonpath(&["pvc", "data"], "{.status.allocatedResourceStatuses}"),
        ""
    );
    let node = up.jsonpath(&["pod", "web"], "{.spec.nodeName}");
    let pod_event = up.wait_for("the kubelet's event on the pod", || {
        let out = up.kubectl_ok(&[
            "get",
            "events",
            "--field-selector",
            "involvedObject.kind=Pod,involvedObject.name=web,reason=FileSystemResizeSuccessful",
            "-o",
            "jsonpath={range .items[*]}{.source.component}|{.message}{end}",
        ]);
        (!out.is_empty()).then_some(out)
    });
    assert_eq!(
        pod_event,
        format!("kubelet|MountVolume.NodeExpandVolume succeeded for volume \"{pv}\" {node}")
    );
    up.wait_for("running again", || {
        (up.jsonpath(&["pod", "web"], "{.status.phase}") == "Running").then_some(())
    });
}

kcm_up::on_each_backend!(
    pods_with_resource_claims_get_simulated_devices:
        up_allocates_simulated_devices_to_pods_and_frees_them_sqlite,
        up_allocates_simulated_devices_to_pods_and_frees_them_etcd
);

/// DRA on `kcm up`: a pod with a ResourceClaimTemplate gets a claim from the resourceclaim
/// controller, which the scheduler allocates from the simulated driver's devices on the node it
/// picks; the pod runs there, and deleting it deletes the generated claim. A pod naming a
/// shared ResourceClaim is in its `reservedFor` while it exists; when it is deleted the
/// controller removes the reservation and deallocates the claim.
fn pods_with_resource_claims_get_simulated_devices(backend: &Backend) {
    let dir = tempfile::tempdir().expect("tempdir");
    let up = Up::start(backend, &dir.path().join("data"), &["--nodes", "1"], "info");
    let manifest = dir.path().join("dra.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata:\n  name: gpu\n\
         spec:\n  spec:\n    devices:\n      requests:\n      - name: gpu\n        exactly:\n          \
         deviceClassName: gpu.sim.kcm.io\n---\n\
         apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata:\n  name: shared\n\
         spec:\n  devices:\n    requests:\n    - name: gpu\n      exactly:\n        \
         deviceClassName: gpu.sim.kcm.io\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata:\n  name: trainer\nspec:\n  containers:\n  \
         - name: c\n    image: nginx\n    resources:\n      claims:\n      - name: gpu\n  \
         resourceClaims:\n  - name: gpu\n    resourceClaimTemplateName: gpu\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata:\n  name: user\nspec:\n  containers:\n  \
         - name: c\n    image: nginx\n    resources:\n      claims:\n      - name: gpu\n  \
         resourceClaims:\n  - name: gpu\n    resourceClaimName: shared\n",
    )
    .expect("manifest");
    up.kubectl_ok(&["apply", "-f", &manifest.to_string_lossy()]);
    for pod in ["trainer", "user"] {
        up.wait_for(&format!("{pod} running"), || {
            (up.jsonpath(&["pod", pod], "{.status.phase}") == "Running").then_some(())
        });
    }
    let node = up.jsonpath(&["pod", "trainer"], "{.spec.nodeName}");
    let generated = up.jsonpath(
        &["pod", "trainer"],
        "{.status.resourceClaimStatuses[0].resourceClaimName}",
    );
    assert!(generated.starts_with("trainer-gpu-"), "{generated:?}");
    let allocation = |claim: &str| {
        up.jsonpath(
            &["resourceclaim", claim],
            "{.status.allocation.devices.results[*].driver}/{.status.allocation.devices.results[*].pool}/{.status.allocation.devices.results[*].device} {.status.reservedFor[*].name}",
        )
    };
    let trainer = allocation(&generated);
    assert!(
        trainer.starts_with(&format!("gpu.sim.kcm.io/{node}/gpu-"))
            && trainer.ends_with(" trainer"),
        "{trainer}"
    );
    let shared = allocation("shared");
    assert!(shared.ends_with(" user"), "{shared}");
    assert_ne!(
        trainer.split(' ').next(),
        shared.split(' ').next(),
        "two claims got one device"
    );
    assert_eq!(
        up.jsonpath(&["resourceclaim", "shared"], "{.metadata.finalizers}"),
        r#"["resource.kubernetes.io/delete-protection"]"#
    );

    up.kubectl_ok(&["delete", "pod", "trainer", "user", "--wait=true"]);
    up.wait_for("the generated claim deleted", || {
        let (found, _, _) = up.kubectl(&["get", "resourceclaim", &generated]);
        (!found).then_some(())
    });
    up.wait_for("the shared claim deallocated", || {
        (allocation("shared") == "// ").then_some(())
    });
}
