//! Scheme defaults for pod specs and pod templates, as upstream's `SetDefaults_PodSpec` and friends.
//!
//! Templates (Deployments, ReplicaSets, ...) get exactly what kube-apiserver 1.33 gives a
//! `PodTemplateSpec` and nothing more: the pod-template hash of a Deployment's ReplicaSets is
//! computed from the defaulted template, so a default too many changes every name.
//! [`default_pod_spec`] adds what upstream's `SetDefaults_Pod` gives Pods only.

use k8s_openapi::api::core::v1::{
    Container, EnvVar, EphemeralContainer, HTTPGetAction, Lifecycle, ObjectFieldSelector,
    PodSecurityContext, PodSpec, PodTemplateSpec, Probe, Volume,
};

/// The default mode of secret, configMap, downwardAPI and projected volumes (0644).
const VOLUME_DEFAULT_MODE: i32 = 0o644;
/// The default lifetime of a projected service account token (one hour).
const TOKEN_EXPIRATION_SECONDS: i64 = 3600;

/// Fills the defaults of a Pod's spec: the template defaults, then `SetDefaults_Pod`'s
/// (`enableServiceLinks`, requests from limits, host ports under host networking).
pub fn default_pod_spec(spec: &mut PodSpec) {
    default_template_spec(spec);
    spec.enable_service_links.get_or_insert(true);
    for c in spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten())
    {
        // Requests default to limits when only limits are given.
        if let Some(res) = c.resources.as_mut()
            && let Some(limits) = res.limits.clone()
        {
            let requests = res.requests.get_or_insert_with(Default::default);
            for (k, v) in limits {
                requests.entry(k).or_insert(v);
            }
        }
        if spec.host_network == Some(true) {
            for p in c.ports.iter_mut().flatten() {
                if p.host_port.unwrap_or(0) == 0 {
                    p.host_port = Some(p.container_port);
                }
            }
        }
    }
}

/// Fills a pod template's spec defaults (upstream's `SetObjectDefaults_PodTemplate` on the
/// template: `SetDefaults_PodSpec` and the defaults of everything inside it).
pub fn default_template(template: &mut PodTemplateSpec) {
    if let Some(spec) = template.spec.as_mut() {
        default_template_spec(spec);
    }
}

/// `SetDefaults_PodSpec` plus volumes, containers, probes and handlers inside it.
fn default_template_spec(spec: &mut PodSpec) {
    default_str(&mut spec.dns_policy, "ClusterFirst");
    default_str(&mut spec.restart_policy, "Always");
    default_str(&mut spec.scheduler_name, "default-scheduler");
    spec.termination_grace_period_seconds.get_or_insert(30);
    spec.security_context
        .get_or_insert_with(PodSecurityContext::default);
    // The deprecated `serviceAccount` mirrors `serviceAccountName` (upstream's conversion).
    if spec.service_account_name.is_none() && spec.service_account.is_some() {
        spec.service_account_name = spec.service_account.clone();
    }
    for c in spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten())
    {
        default_container(c);
    }
    for c in spec.ephemeral_containers.iter_mut().flatten() {
        default_ephemeral_container(c);
    }
    for v in spec.volumes.iter_mut().flatten() {
        default_volume(v);
    }
}

/// `SetDefaults_Volume` and the defaults of its source.
fn default_volume(v: &mut Volume) {
    let has_source = v.aws_elastic_block_store.is_some()
        || v.azure_disk.is_some()
        || v.azure_file.is_some()
        || v.cephfs.is_some()
        || v.cinder.is_some()
        || v.config_map.is_some()
        || v.csi.is_some()
        || v.downward_api.is_some()
        || v.empty_dir.is_some()
        || v.ephemeral.is_some()
        || v.fc.is_some()
        || v.flex_volume.is_some()
        || v.flocker.is_some()
        || v.gce_persistent_disk.is_some()
        || v.git_repo.is_some()
        || v.glusterfs.is_some()
        || v.host_path.is_some()
        || v.image.is_some()
        || v.iscsi.is_some()
        || v.nfs.is_some()
        || v.persistent_volume_claim.is_some()
        || v.photon_persistent_disk.is_some()
        || v.portworx_volume.is_some()
        || v.projected.is_some()
        || v.quobyte.is_some()
        || v.rbd.is_some()
        || v.scale_io.is_some()
        || v.secret.is_some()
        || v.storageos.is_some()
        || v.vsphere_volume.is_some();
    if !has_source {
        v.empty_dir = Some(Default::default());
    }
    if let Some(h) = v.host_path.as_mut() {
        // `HostPathUnset` is the empty string: set, but empty.
        h.type_.get_or_insert_with(String::new);
    }
    if let Some(s) = v.secret.as_mut() {
        s.default_mode.get_or_insert(VOLUME_DEFAULT_MODE);
    }
    if let Some(c) = v.config_map.as_mut() {
        c.default_mode.get_or_insert(VOLUME_DEFAULT_MODE);
    }
    if let Some(d) = v.downward_api.as_mut() {
        d.default_mode.get_or_insert(VOLUME_DEFAULT_MODE);
        for item in d.items.iter_mut().flatten() {
            default_field_selector(item.field_ref.as_mut());
        }
    }
    if let Some(p) = v.projected.as_mut() {
        p.default_mode.get_or_insert(VOLUME_DEFAULT_MODE);
        for source in p.sources.iter_mut().flatten() {
            if let Some(d) = source.downward_api.as_mut() {
                for item in d.items.iter_mut().flatten() {
                    default_field_selector(item.field_ref.as_mut());
                }
            }
            if let Some(t) = source.service_account_token.as_mut() {
                t.expiration_seconds.get_or_insert(TOKEN_EXPIRATION_SECONDS);
            }
        }
    }
    if let Some(spec) = v
        .ephemeral
        .as_mut()
        .and_then(|e| e.volume_claim_template.as_mut())
        .map(|t| &mut t.spec)
    {
        default_str(&mut spec.volume_mode, "Filesystem");
    }
}

/// Sets a string field Go would see as `""` (absent or empty) to `value`.
fn default_str(field: &mut Option<String>, value: &str) {
    if field.as_deref().is_none_or(str::is_empty) {
        *field = Some(value.to_owned());
    }
}

/// `SetDefaults_ObjectFieldSelector`: `apiVersion: v1`.
fn default_field_selector(selector: Option<&mut ObjectFieldSelector>) {
    if let Some(s) = selector {
        default_str(&mut s.api_version, "v1");
    }
}

fn default_env(env: Option<&mut Vec<EnvVar>>) {
    for e in env.into_iter().flatten() {
        default_field_selector(e.value_from.as_mut().and_then(|v| v.field_ref.as_mut()));
    }
}

/// `SetDefaults_Container` and the defaults inside a container. A macro because
/// `EphemeralContainer` repeats `Container`'s fields in another type (upstream converts one
/// into the other).
macro_rules! default_container_fields {
    ($c:expr) => {{
        let c = $c;
        let pull_policy = default_pull_policy(c.image.as_deref().unwrap_or(""));
        default_str(&mut c.image_pull_policy, pull_policy);
        default_str(&mut c.termination_message_path, "/dev/termination-log");
        default_str(&mut c.termination_message_policy, "File");
        for p in c.ports.iter_mut().flatten() {
            default_str(&mut p.protocol, "TCP");
        }
        default_env(c.env.as_mut());
        for probe in [
            c.liveness_probe.as_mut(),
            c.readiness_probe.as_mut(),
            c.startup_probe.as_mut(),
        ]
        .into_iter()
        .flatten()
        {
            default_probe(probe);
        }
        default_lifecycle(c.lifecycle.as_mut());
    }};
}

fn default_container(c: &mut Container) {
    default_container_fields!(c);
}

fn default_ephemeral_container(c: &mut EphemeralContainer) {
    default_container_fields!(c);
}

fn default_probe(p: &mut Probe) {
    p.timeout_seconds.get_or_insert(1);
    p.period_seconds.get_or_insert(10);
    p.success_threshold.get_or_insert(1);
    p.failure_threshold.get_or_insert(3);
    default_http_get(p.http_get.as_mut());
    if let Some(g) = p.grpc.as_mut() {
        g.service.get_or_insert_with(String::new);
    }
}

fn default_lifecycle(lifecycle: Option<&mut Lifecycle>) {
    if let Some(l) = lifecycle {
        for handler in [l.post_start.as_mut(), l.pre_stop.as_mut()]
            .into_iter()
            .flatten()
        {
            default_http_get(handler.http_get.as_mut());
        }
    }
}

/// `SetDefaults_HTTPGetAction`: path `/`, scheme `HTTP`.
fn default_http_get(action: Option<&mut HTTPGetAction>) {
    if let Some(h) = action {
        default_str(&mut h.scheme, "HTTP");
        default_str(&mut h.path, "/");
    }
}

/// `Always` for `:latest` or untagged images, `IfNotPresent` otherwise.
fn default_pull_policy(image: &str) -> &'static str {
    // A digest pins the image; the tag is after the last ':' that follows the last '/'.
    if image.contains('@') {
        return "IfNotPresent";
    }
    let last_segment = image.rsplit('/').next().unwrap_or(image);
    match last_segment.rsplit_once(':') {
        Some((_, "latest")) | None => "Always",
        Some(_) => "IfNotPresent",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_policy_follows_the_tag() {
        let cases = [
            ("untagged", "nginx", "Always"),
            ("latest", "nginx:latest", "Always"),
            ("tagged", "nginx:1.25", "IfNotPresent"),
            ("registry port untagged", "localhost:5000/nginx", "Always"),
            (
                "registry port tagged",
                "localhost:5000/nginx:1",
                "IfNotPresent",
            ),
            ("digest", "nginx@sha256:abc", "IfNotPresent"),
        ];
        for (name, image, want) in cases {
            assert_eq!(default_pull_policy(image), want, "case {name}");
        }
    }

    #[test]
    fn pod_spec_defaults() {
        let mut spec = PodSpec {
            containers: vec![Container {
                name: "c".to_owned(),
                image: Some("busybox:1".to_owned()),
                ..Default::default()
            }],
            ..Default::default()
        };
        default_pod_spec(&mut spec);
        assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
        assert_eq!(spec.termination_grace_period_seconds, Some(30));
        assert_eq!(spec.scheduler_name.as_deref(), Some("default-scheduler"));
        assert_eq!(
            spec.containers[0].image_pull_policy.as_deref(),
            Some("IfNotPresent")
        );
        assert_eq!(
            spec.containers[0].termination_message_path.as_deref(),
            Some("/dev/termination-log")
        );
    }

    fn spec_from(json: serde_json::Value) -> PodSpec {
        serde_json::from_value(json).expect("pod spec")
    }

    #[test]
    fn templates_get_only_what_upstream_gives_templates() {
        let raw = serde_json::json!({
            "containers": [{
                "name": "c",
                "image": "nginx",
                "resources": {"limits": {"cpu": "1"}},
                "ports": [{"containerPort": 80}],
            }],
            "hostNetwork": true,
        });
        let mut template = PodTemplateSpec {
            spec: Some(spec_from(raw.clone())),
            ..Default::default()
        };
        default_template(&mut template);
        let spec = template.spec.expect("spec");
        assert_eq!(spec.enable_service_links, None, "SetDefaults_Pod only");
        let c = &spec.containers[0];
        assert_eq!(
            c.resources.as_ref().and_then(|r| r.requests.as_ref()),
            None,
            "requests from limits: Pods only"
        );
        let port = &c.ports.as_ref().expect("ports")[0];
        assert_eq!(port.host_port, None, "host ports: Pods only");
        assert_eq!(port.protocol.as_deref(), Some("TCP"));
        assert_eq!(c.image_pull_policy.as_deref(), Some("Always"));

        // The same spec in a Pod gets the Pod-only defaults too.
        let mut pod = spec_from(raw);
        default_pod_spec(&mut pod);
        assert_eq!(pod.enable_service_links, Some(true));
        let c = &pod.containers[0];
        let requests = c.resources.as_ref().and_then(|r| r.requests.clone());
        assert_eq!(
            requests.and_then(|r| r.get("cpu").map(|q| q.0.clone())),
            Some("1".to_owned())
        );
        assert_eq!(c.ports.as_ref().expect("ports")[0].host_port, Some(80));
    }

    #[test]
    fn nested_defaults_as_upstream() {
        let mut spec = spec_from(serde_json::json!({
            "dnsPolicy": "",
            "containers": [{
                "name": "c",
                "image": "nginx:1.27",
                "env": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
                "livenessProbe": {"grpc": {"port": 9000}},
                "readinessProbe": {"httpGet": {"port": 80, "path": ""}},
                "lifecycle": {"preStop": {"httpGet": {"port": 80}}},
            }],
            "volumes": [
                {"name": "scratch"},
                {"name": "host", "hostPath": {"path": "/var/log"}},
                {"name": "info", "downwardAPI": {"items": [
                    {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}
                ]}},
                {"name": "token", "projected": {"sources": [
                    {"serviceAccountToken": {"path": "token"}}
                ]}},
                {"name": "claim", "ephemeral": {"volumeClaimTemplate": {"spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}},
                }}}},
            ],
        }));
        default_template_spec(&mut spec);
        assert_eq!(
            spec.dns_policy.as_deref(),
            Some("ClusterFirst"),
            "empty counts as unset"
        );
        let c = &spec.containers[0];
        let env = &c.env.as_ref().expect("env")[0];
        let field_ref = env.value_from.as_ref().and_then(|v| v.field_ref.as_ref());
        assert_eq!(field_ref.and_then(|f| f.api_version.as_deref()), Some("v1"));
        let grpc = c.liveness_probe.as_ref().and_then(|p| p.grpc.as_ref());
        assert_eq!(grpc.and_then(|g| g.service.as_deref()), Some(""));
        let get = c.readiness_probe.as_ref().and_then(|p| p.http_get.as_ref());
        assert_eq!(get.and_then(|g| g.path.as_deref()), Some("/"));
        let pre_stop = c.lifecycle.as_ref().and_then(|l| l.pre_stop.as_ref());
        let get = pre_stop.and_then(|h| h.http_get.as_ref());
        assert_eq!(get.and_then(|g| g.scheme.as_deref()), Some("HTTP"));

        let volumes = spec.volumes.expect("volumes");
        assert!(volumes[0].empty_dir.is_some(), "no source: emptyDir");
        assert_eq!(
            volumes[1]
                .host_path
                .as_ref()
                .and_then(|h| h.type_.as_deref()),
            Some("")
        );
        let downward = volumes[2].downward_api.as_ref().expect("downwardAPI");
        assert_eq!(downward.default_mode, Some(0o644));
        let item = &downward.items.as_ref().expect("items")[0];
        assert_eq!(
            item.field_ref
                .as_ref()
                .and_then(|f| f.api_version.as_deref()),
            Some("v1")
        );
        let projected = volumes[3].projected.as_ref().expect("projected");
        assert_eq!(projected.default_mode, Some(0o644));
        let token = projected.sources.as_ref().expect("sources")[0]
            .service_account_token
            .as_ref()
            .expect("token");
        assert_eq!(token.expiration_seconds, Some(3600));
        let claim = volumes[4]
            .ephemeral
            .as_ref()
            .and_then(|e| e.volume_claim_template.as_ref())
            .expect("template");
        assert_eq!(claim.spec.volume_mode.as_deref(), Some("Filesystem"));
    }
}
