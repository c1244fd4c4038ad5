//! What the Endpoints, EndpointSlice and EndpointSlice mirroring controllers share, as upstream's `k8s.io/endpointslice/util` and `pkg/controller/util/endpointslice`.
//!
//! - [`pod`]: which pods belong in endpoints (`ShouldPodBeInEndpoints`), hostnames, named
//!   target ports (`FindPort`), and which pod changes matter to endpoints.
//! - [`services`]: the Services a pod event concerns (`GetPodUpdateProjectionKey`,
//!   `GetServicesToUpdate`).
//! - [`endpoint_set`]: endpoints identified by address, hostname and target (`EndpointSet`,
//!   `EndpointsEqualBeyondHash`).
//! - [`ports`]: slices grouped by their port list (`PortMapKey`).
//! - [`tracker`]: the generations this process wrote per Service, so a sync never acts on a
//!   slice cache older than its own writes (`EndpointSliceTracker`).
//! - [`trigger_time`]: the `endpoints.kubernetes.io/last-change-trigger-time` annotation
//!   (`TriggerTimeTracker`).
//! - [`client`]: the seam for EndpointSlice writes, with an in-memory fake that counts them.

pub mod client;
pub mod endpoint_set;
pub mod pod;
pub mod ports;
pub mod services;
pub mod slices;
pub mod tracker;
pub mod trigger_time;

pub use client::{
    ApiEndpointSliceClient, EndpointSliceClient, FakeEndpointSliceClient, SliceAction,
};
pub use endpoint_set::{EndpointKey, EndpointSet, endpoints_equal_beyond_hash};
pub use pod::{
    find_port, is_pod_ready, pod_endpoints_changed, should_pod_be_in_endpoints, should_set_hostname,
};
pub use ports::{PortMapKey, sort_ports};
pub use services::{
    PodProjectionKey, pod_update_projection_key, services_for_pod, services_to_update,
};
pub use tracker::EndpointSliceTracker;
pub use trigger_time::TriggerTimeTracker;

use std::collections::BTreeMap;

use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use kcm_machinery::informer::index::NAMESPACE_INDEX;
use kcm_machinery::informer::store::Indexer;
use kube::Resource;

/// The label naming the Service an EndpointSlice belongs to (discovery/v1 `LabelServiceName`).
pub const LABEL_SERVICE_NAME: &str = "kubernetes.io/service-name";
/// The label naming the controller or entity managing an EndpointSlice (`LabelManagedBy`).
pub const LABEL_MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
/// The label that keeps an Endpoints resource from being mirrored (`LabelSkipMirror`).
pub const LABEL_SKIP_MIRROR: &str = "endpointslice.kubernetes.io/skip-mirror";
/// The label set on the Endpoints and EndpointSlices of a headless Service
/// (core/v1 `IsHeadlessService`).
pub const IS_HEADLESS_SERVICE: &str = "service.kubernetes.io/headless";
/// When the change that led to this endpoints object happened (core/v1
/// `EndpointsLastChangeTriggerTime`), RFC 3339 with nanoseconds.
pub const ENDPOINTS_LAST_CHANGE_TRIGGER_TIME: &str =
    "endpoints.kubernetes.io/last-change-trigger-time";
/// Set to `truncated` on Endpoints cut at the capacity (core/v1 `EndpointsOverCapacity`).
pub const ENDPOINTS_OVER_CAPACITY: &str = "endpoints.kubernetes.io/over-capacity";
/// The annotation holding a leader election record (client-go's
/// `LeaderElectionRecordAnnotationKey`); such Endpoints are locks, not endpoints.
pub const LEADER_ELECTION_RECORD_ANNOTATION: &str = "control-plane.alpha.kubernetes.io/leader";
/// The node label naming the node's zone (core/v1 `LabelTopologyZone`).
pub const LABEL_TOPOLOGY_ZONE: &str = "topology.kubernetes.io/zone";
/// kubectl's last-applied annotation, never copied onto mirrored slices.
pub const LAST_APPLIED_CONFIG_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// The `IPv4` address type of an EndpointSlice.
pub const ADDRESS_TYPE_IPV4: &str = "IPv4";
/// The `IPv6` address type of an EndpointSlice.
pub const ADDRESS_TYPE_IPV6: &str = "IPv6";

/// Two optional maps equal as apimachinery's `Semantic.DeepEqual` sees them: absent and empty
/// are the same.
pub fn maps_equal(
    a: Option<&BTreeMap<String, String>>,
    b: Option<&BTreeMap<String, String>>,
) -> bool {
    let empty = BTreeMap::new();
    a.unwrap_or(&empty) == b.unwrap_or(&empty)
}

/// Two object references equal apart from their resourceVersion, as upstream's
/// `semanticIgnoreResourceVersion`: a pod's resourceVersion changes on every status write and
/// must not rewrite its endpoints.
pub fn refs_equal_ignoring_resource_version(
    a: Option<&ObjectReference>,
    b: Option<&ObjectReference>,
) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => {
            a.api_version == b.api_version
                && a.field_path == b.field_path
                && a.kind == b.kind
                && a.name == b.name
                && a.namespace == b.namespace
                && a.uid == b.uid
        }
        _ => false,
    }
}

/// The Service key (`namespace/name`) an EndpointSlice belongs to, from its
/// [`LABEL_SERVICE_NAME`] label, as upstream's `ServiceControllerKey`; `None` without the
/// label.
pub fn service_controller_key(
    slice: &k8s_openapi::api::discovery::v1::EndpointSlice,
) -> Option<String> {
    let name = slice
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(LABEL_SERVICE_NAME))
        .filter(|n| !n.is_empty())?;
    let namespace = slice.metadata.namespace.as_deref().unwrap_or_default();
    Some(format!("{namespace}/{name}"))
}

/// The value of `slice`'s [`LABEL_MANAGED_BY`] label, empty when absent.
pub fn managed_by(slice: &k8s_openapi::api::discovery::v1::EndpointSlice) -> &str {
    slice
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(LABEL_MANAGED_BY))
        .map_or("", String::as_str)
}

/// The cached objects of `namespace`, through the namespace index when the cache has it (as
/// client-go's namespace listers), else by filtering everything.
pub fn list_namespace<K>(cache: &Indexer<K>, namespace: &str) -> Vec<Arc<K>>
where
    K: Resource + Send + Sync + 'static,
{
    match cache.by_index(NAMESPACE_INDEX, namespace) {
        Ok(objects) => objects,
        Err(_) => cache
            .list()
            .into_iter()
            .filter(|o| o.meta().namespace.as_deref() == Some(namespace))
            .collect(),
    }
}

/// Formats a trigger time as Go's `time.RFC3339Nano` in UTC (fraction trimmed of trailing
/// zeros, none when whole).
pub fn format_rfc3339_nano(t: jiff::Timestamp) -> String {
    let seconds = t.as_second();
    let nanos = t.subsec_nanosecond();
    let whole = jiff::Timestamp::from_second(seconds).unwrap_or(t);
    let base = whole.strftime("%Y-%m-%dT%H:%M:%S").to_string();
    if nanos == 0 {
        return format!("{base}Z");
    }
    let fraction = format!("{nanos:09}");
    format!("{base}.{}Z", fraction.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_nano_is_gos() {
        let cases = [
            (
                "whole seconds",
                "2024-05-01T10:00:00Z",
                "2024-05-01T10:00:00Z",
            ),
            (
                "millis",
                "2024-05-01T10:00:00.120Z",
                "2024-05-01T10:00:00.12Z",
            ),
            (
                "nanos",
                "2024-05-01T10:00:00.000000001Z",
                "2024-05-01T10:00:00.000000001Z",
            ),
        ];
        for (name, input, want) in cases {
            let t: jiff::Timestamp = input.parse().expect("timestamp");
            assert_eq!(format_rfc3339_nano(t), want, "{name}");
        }
    }

    #[test]
    fn absent_and_empty_maps_are_equal() {
        let empty = BTreeMap::new();
        let one = BTreeMap::from([("a".to_owned(), "b".to_owned())]);
        assert!(maps_equal(None, Some(&empty)));
        assert!(!maps_equal(None, Some(&one)));
        assert!(maps_equal(Some(&one), Some(&one.clone())));
    }

    #[test]
    fn resource_version_is_ignored_in_refs() {
        let a = ObjectReference {
            kind: Some("Pod".into()),
            name: Some("p".into()),
            resource_version: Some("1".into()),
            ..ObjectReference::default()
        };
        let mut b = a.clone();
        b.resource_version = Some("2".into());
        assert!(refs_equal_ignoring_resource_version(Some(&a), Some(&b)));
        b.name = Some("q".into());
        assert!(!refs_equal_ignoring_resource_version(Some(&a), Some(&b)));
        assert!(!refs_equal_ignoring_resource_version(Some(&a), None));
    }
}
