//! Scheme defaults for pod specs and pod templates, as upstream's `SetDefaults_PodSpec` and friends.

use k8s_openapi::api::core::v1::{Container, PodSecurityContext, PodSpec, PodTemplateSpec, Probe};

/// Fills the defaults of a pod spec (`SetDefaults_PodSpec`, `SetDefaults_Container`, ...).
pub fn default_pod_spec(spec: &mut PodSpec) {
    spec.dns_policy
        .get_or_insert_with(|| "ClusterFirst".to_owned());
    spec.restart_policy
        .get_or_insert_with(|| "Always".to_owned());
    spec.scheduler_name
        .get_or_insert_with(|| "default-scheduler".to_owned());
    spec.termination_grace_period_seconds.get_or_insert(30);
    spec.security_context
        .get_or_insert_with(PodSecurityContext::default);
    spec.enable_service_links.get_or_insert(true);
    // The deprecated `serviceAccount` mirrors `serviceAccountName` (upstream's conversion).
    if spec.service_account_name.is_none() && spec.service_account.is_some() {
        spec.service_account_name = spec.service_account.clone();
    }
    for c in spec.containers.iter_mut() {
        default_container(c);
    }
    for c in spec.init_containers.iter_mut().flatten() {
        default_container(c);
    }
    for v in spec.volumes.iter_mut().flatten() {
        if let Some(s) = v.secret.as_mut() {
            s.default_mode.get_or_insert(0o644);
        }
        if let Some(c) = v.config_map.as_mut() {
            c.default_mode.get_or_insert(0o644);
        }
    }
}

/// Fills a pod template's spec defaults.
pub fn default_template(template: &mut PodTemplateSpec) {
    if let Some(spec) = template.spec.as_mut() {
        default_pod_spec(spec);
    }
}

fn default_container(c: &mut Container) {
    if c.image_pull_policy.is_none() {
        c.image_pull_policy =
            Some(default_pull_policy(c.image.as_deref().unwrap_or("")).to_owned());
    }
    c.termination_message_path
        .get_or_insert_with(|| "/dev/termination-log".to_owned());
    c.termination_message_policy
        .get_or_insert_with(|| "File".to_owned());
    for p in c.ports.iter_mut().flatten() {
        p.protocol.get_or_insert_with(|| "TCP".to_owned());
    }
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
    // Requests default to limits when only limits are given (`SetDefaults_Pod`).
    if let Some(res) = c.resources.as_mut()
        && let Some(limits) = res.limits.clone()
    {
        let requests = res.requests.get_or_insert_with(Default::default);
        for (k, v) in limits {
            requests.entry(k).or_insert(v);
        }
    }
}

fn default_probe(p: &mut Probe) {
    p.timeout_seconds.get_or_insert(1);
    p.period_seconds.get_or_insert(10);
    p.success_threshold.get_or_insert(1);
    p.failure_threshold.get_or_insert(3);
    if let Some(h) = p.http_get.as_mut() {
        h.scheme.get_or_insert_with(|| "HTTP".to_owned());
        h.path.get_or_insert_with(|| "/".to_owned());
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
}
