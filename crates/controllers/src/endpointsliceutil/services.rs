//! The Services a pod event concerns, as upstream's `GetPodUpdateProjectionKey`, `GetServicesToUpdate` and `getServicesForPod`.

use k8s_openapi::api::core::v1::{Pod, Service};
use kcm_machinery::informer::store::Indexer;
use std::collections::{BTreeMap, BTreeSet};

use super::pod::pod_endpoints_changed;

/// What a pod event tells about Service membership, as upstream's `PodProjectionKey`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodProjectionKey {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's current labels.
    pub labels: BTreeMap<String, String>,
    /// The pod's previous labels, when an update changed them (or its hostname/subdomain).
    pub old_labels: Option<BTreeMap<String, String>>,
    /// Whether the update also changed what the pod's endpoint looks like.
    pub pod_changed: bool,
}

/// The projection key of a pod event, as upstream's `GetPodUpdateProjectionKey`: an add or a
/// delete (one side `None`) concerns the pod's Services; an update that is a resync (same
/// resourceVersion) or changes nothing endpoints show concerns nobody (`None`).
pub fn pod_update_projection_key(old: Option<&Pod>, new: Option<&Pod>) -> Option<PodProjectionKey> {
    let key_of = |pod: &Pod| PodProjectionKey {
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        labels: pod.metadata.labels.clone().unwrap_or_default(),
        old_labels: None,
        pod_changed: false,
    };
    match (old, new) {
        (None, None) => None,
        (None, Some(pod)) | (Some(pod), None) => Some(key_of(pod)),
        (Some(old), Some(new)) => {
            // Resyncs are covered by the Service informer's own resync.
            if old.metadata.resource_version == new.metadata.resource_version {
                return None;
            }
            let (pod_changed, labels_changed) = pod_endpoints_changed(old, new);
            if !pod_changed && !labels_changed {
                return None;
            }
            let mut key = key_of(new);
            if labels_changed {
                key.old_labels = Some(old.metadata.labels.clone().unwrap_or_default());
                key.pod_changed = pod_changed;
            }
            Some(key)
        }
    }
}

/// The keys (`namespace/name`) of the Services a projection key concerns, as upstream's
/// `GetServicesToUpdate`: those selecting the pod's labels; after a label change, those whose
/// membership changed (the symmetric difference), or all old and new ones when the endpoint
/// itself changed too.
pub fn services_to_update(services: &Indexer<Service>, key: &PodProjectionKey) -> BTreeSet<String> {
    let current = services_for_pod(services, &key.namespace, &key.labels);
    let Some(old_labels) = &key.old_labels else {
        return current;
    };
    let old = services_for_pod(services, &key.namespace, old_labels);
    if key.pod_changed {
        current.union(&old).cloned().collect()
    } else {
        current.symmetric_difference(&old).cloned().collect()
    }
}

/// The keys of the Services of `namespace` whose selector matches `labels`, as upstream's
/// `getServicesForPod`. A Service without a selector selects nothing (its endpoints are
/// managed by someone else); an empty selector selects every pod, as a Go label set does.
pub fn services_for_pod(
    services: &Indexer<Service>,
    namespace: &str,
    labels: &BTreeMap<String, String>,
) -> BTreeSet<String> {
    super::list_namespace(services, namespace)
        .iter()
        .filter(|svc| {
            svc.spec
                .as_ref()
                .and_then(|s| s.selector.as_ref())
                .is_some_and(|selector| selector_matches(selector, labels))
        })
        .map(|svc| {
            format!(
                "{namespace}/{}",
                svc.metadata.name.as_deref().unwrap_or_default()
            )
        })
        .collect()
}

/// Whether a Service's set selector matches `labels`: every pair present (an empty selector
/// matches everything).
pub fn selector_matches(
    selector: &BTreeMap<String, String>,
    labels: &BTreeMap<String, String>,
) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use kcm_testing::prelude::*;

    use super::*;

    fn cache(services: Vec<Service>) -> Indexer<Service> {
        let indexer = Indexer::new();
        for svc in services {
            indexer.add(Arc::new(svc)).expect("add");
        }
        indexer
    }

    #[test]
    fn services_selecting_a_pod() {
        let services = cache(vec![
            service("a")
                .namespace("ns")
                .selector(&[("app", "a")])
                .build(),
            service("b")
                .namespace("ns")
                .selector(&[("app", "b")])
                .build(),
            service("all")
                .namespace("ns")
                .with(|s| s.spec.get_or_insert_default().selector = Some(BTreeMap::new()))
                .build(),
            service("none").namespace("ns").build(),
            service("a")
                .namespace("other")
                .selector(&[("app", "a")])
                .build(),
        ]);
        let got = services_for_pod(&services, "ns", &labels(&[("app", "a"), ("tier", "x")]));
        assert_eq!(
            got,
            BTreeSet::from(["ns/a".to_owned(), "ns/all".to_owned()])
        );
    }

    #[test]
    fn projection_of_updates_like_upstream() {
        let services = cache(vec![
            service("a")
                .namespace("ns")
                .selector(&[("app", "a")])
                .build(),
            service("b")
                .namespace("ns")
                .selector(&[("app", "b")])
                .build(),
            service("ab")
                .namespace("ns")
                .selector(&[("group", "x")])
                .build(),
        ]);
        let base = pod("p")
            .namespace("ns")
            .resource_version("1")
            .labels(&[("app", "a"), ("group", "x")]);
        let old = base.clone().build();
        struct Case {
            name: &'static str,
            new: Pod,
            want: Vec<&'static str>,
        }
        let cases = [
            Case {
                name: "resync",
                new: base.clone().build(),
                want: vec![],
            },
            Case {
                name: "irrelevant change",
                new: base
                    .clone()
                    .resource_version("2")
                    .annotation("k", "v")
                    .build(),
                want: vec![],
            },
            Case {
                name: "ready",
                new: base.clone().resource_version("2").ready().build(),
                want: vec!["ns/a", "ns/ab"],
            },
            Case {
                name: "labels only: membership changes",
                new: base
                    .clone()
                    .resource_version("2")
                    .with(|p| p.metadata.labels = Some(labels(&[("app", "b"), ("group", "x")])))
                    .build(),
                want: vec!["ns/a", "ns/b"],
            },
            Case {
                name: "labels and readiness: old and new",
                new: base
                    .clone()
                    .resource_version("2")
                    .ready()
                    .with(|p| p.metadata.labels = Some(labels(&[("app", "b"), ("group", "x")])))
                    .build(),
                want: vec!["ns/a", "ns/ab", "ns/b"],
            },
        ];
        for case in cases {
            let got = pod_update_projection_key(Some(&old), Some(&case.new))
                .map(|key| services_to_update(&services, &key))
                .unwrap_or_default();
            let want: BTreeSet<String> = case.want.iter().map(|s| (*s).to_owned()).collect();
            assert_eq!(got, want, "{}", case.name);
        }
        let added = pod_update_projection_key(None, Some(&old)).expect("add");
        assert_eq!(services_to_update(&services, &added).len(), 2);
    }
}
