//! Container environment and `subPathExpr` expansion, as far as the kubelet refuses to start a
//! container over it (`makeMounts` in upstream's `kubelet_pods.go`).

use std::collections::{BTreeSet, HashMap};

use k8s_openapi::api::core::v1::{Container, Pod};

/// Expands `$(NAME)` references in `input` as upstream's `third_party/forked/golang/expansion`
/// `Expand`: `$$` is a literal `$`, `$(NAME)` is replaced by `mapping(NAME)`, anything else
/// is copied as it is (an unclosed `$(` included).
pub fn expand(input: &str, mut mapping: impl FnMut(&str) -> String) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(body) = after.strip_prefix('(')
            && let Some(close) = body.find(')')
        {
            out.push_str(&mapping(&body[..close]));
            rest = &body[close + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// The value of a downward-API `fieldPath` for `pod`, as the kubelet's `podFieldSelectorRuntimeValue`;
/// `None` for a path it resolves from elsewhere or does not know.
fn field_value(pod: &Pod, path: &str) -> Option<String> {
    let meta = &pod.metadata;
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    let keyed = |prefix: &str, map: Option<&std::collections::BTreeMap<String, String>>| {
        let key = path
            .strip_prefix(prefix)?
            .strip_prefix("['")?
            .strip_suffix("']")?;
        Some(map.and_then(|m| m.get(key)).cloned().unwrap_or_default())
    };
    if let Some(v) = keyed("metadata.annotations", meta.annotations.as_ref()) {
        return Some(v);
    }
    if let Some(v) = keyed("metadata.labels", meta.labels.as_ref()) {
        return Some(v);
    }
    let value = match path {
        "metadata.name" => meta.name.clone(),
        "metadata.namespace" => meta.namespace.clone(),
        "metadata.uid" => meta.uid.clone(),
        "spec.nodeName" => spec.and_then(|s| s.node_name.clone()),
        "spec.serviceAccountName" => spec.and_then(|s| s.service_account_name.clone()),
        "status.hostIP" => status.and_then(|s| s.host_ip.clone()),
        "status.podIP" => status.and_then(|s| s.pod_ip.clone()),
        _ => return None,
    };
    Some(value.unwrap_or_default())
}

/// The container's environment as the kubelet builds it (`makeEnvironmentVariables`), for the
/// variables the simulator can know: literal values (with `$(VAR)` references to earlier
/// ones expanded) and downward-API `fieldRef`s. A variable from a ConfigMap, a Secret or a
/// resource field maps to `None` (unknown).
fn environment(pod: &Pod, container: &Container) -> HashMap<String, Option<String>> {
    let mut env: HashMap<String, Option<String>> = HashMap::new();
    for var in container.env.iter().flatten() {
        let value = match (&var.value, &var.value_from) {
            (_, Some(from)) => from
                .field_ref
                .as_ref()
                .and_then(|f| field_value(pod, &f.field_path)),
            (Some(value), None) => {
                let mut unknown = false;
                let expanded = expand(value, |name| match env.get(name) {
                    Some(Some(v)) => v.clone(),
                    Some(None) => {
                        unknown = true;
                        String::new()
                    }
                    None => format!("$({name})"),
                });
                (!unknown).then_some(expanded)
            }
            (None, None) => Some(String::new()),
        };
        env.insert(var.name.clone(), value);
    }
    env
}

/// Why the kubelet would refuse to create `container` of `pod` over its volume mounts'
/// `subPathExpr`s (the waiting reason is then `CreateContainerConfigError`), with upstream's
/// messages: a variable without a value (`ExpandContainerVolumeMounts`), an absolute path, or
/// a `..` step (`makeMounts`). `None` when it starts, or when the expansion depends on a
/// variable the simulator cannot know.
pub fn subpath_error(pod: &Pod, container: &Container) -> Option<String> {
    let mounts = container.volume_mounts.as_ref()?;
    if mounts
        .iter()
        .all(|m| m.sub_path_expr.as_deref().is_none_or(str::is_empty))
    {
        return None;
    }
    let env = environment(pod, container);
    let has_env_from = container.env_from.as_ref().is_some_and(|e| !e.is_empty());
    for mount in mounts {
        let Some(expr) = mount.sub_path_expr.as_deref().filter(|e| !e.is_empty()) else {
            continue;
        };
        let mut missing = BTreeSet::new();
        let mut unknown = false;
        let sub_path = expand(expr, |name| match env.get(name) {
            Some(Some(value)) => {
                if value.is_empty() {
                    missing.insert(name.to_owned());
                }
                value.clone()
            }
            Some(None) => {
                unknown = true;
                String::new()
            }
            None if has_env_from => {
                unknown = true;
                String::new()
            }
            None => {
                missing.insert(name.to_owned());
                String::new()
            }
        });
        if unknown {
            continue;
        }
        if !missing.is_empty() {
            let names: Vec<String> = missing.into_iter().collect();
            return Some(format!("missing value for {}", names.join(", ")));
        }
        if sub_path.starts_with('/') {
            return Some(format!(
                "error SubPath `{sub_path}` must not be an absolute path"
            ));
        }
        if sub_path.split('/').any(|part| part == "..") {
            return Some(format!(
                "unable to provision SubPath `{sub_path}`: must not contain '..'"
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, ObjectFieldSelector, VolumeMount};

    fn lit(name: &str, value: &str) -> EnvVar {
        EnvVar {
            name: name.into(),
            value: Some(value.into()),
            ..EnvVar::default()
        }
    }

    fn field(name: &str, path: &str) -> EnvVar {
        EnvVar {
            name: name.into(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    field_path: path.into(),
                    api_version: Some("v1".into()),
                }),
                ..EnvVarSource::default()
            }),
            ..EnvVar::default()
        }
    }

    fn container(env: Vec<EnvVar>, expr: &str) -> Container {
        Container {
            name: "c".into(),
            env: Some(env),
            volume_mounts: Some(vec![VolumeMount {
                name: "v".into(),
                mount_path: "/m".into(),
                sub_path_expr: Some(expr.into()),
                ..VolumeMount::default()
            }]),
            ..Container::default()
        }
    }

    #[test]
    fn expand_follows_gos_expansion() {
        let map = |name: &str| match name {
            "A" => "a".to_owned(),
            other => format!("$({other})"),
        };
        assert_eq!(expand("$(A)/$(B)", map), "a/$(B)");
        assert_eq!(expand("$$(A) $ $(", map), "$(A) $ $(");
    }

    #[test]
    fn absolute_and_backstep_subpaths_are_refused() {
        let pod = Pod::default();
        assert_eq!(
            subpath_error(
                &pod,
                &container(vec![lit("POD_NAME", "/tmp")], "$(POD_NAME)")
            ),
            Some("error SubPath `/tmp` must not be an absolute path".into())
        );
        assert_eq!(
            subpath_error(&pod, &container(vec![lit("POD_NAME", "..")], "$(POD_NAME)")),
            Some("unable to provision SubPath `..`: must not contain '..'".into())
        );
        assert_eq!(
            subpath_error(
                &pod,
                &container(vec![lit("POD_NAME", "foo")], "$(POD_NAME)/x")
            ),
            None
        );
        assert_eq!(
            subpath_error(&pod, &container(vec![], "$(NOPE)")),
            Some("missing value for NOPE".into())
        );
    }

    #[test]
    fn annotations_through_the_downward_api_decide_the_subpath() {
        let c = container(
            vec![
                lit("POD_NAME", "foo"),
                field("ANNOTATION", "metadata.annotations['mysubpath']"),
            ],
            "$(ANNOTATION)/$(POD_NAME)",
        );
        let mut pod = Pod::default();
        assert_eq!(
            subpath_error(&pod, &c),
            Some("missing value for ANNOTATION".into())
        );
        pod.metadata.annotations = Some([("mysubpath".to_owned(), "mypath".to_owned())].into());
        assert_eq!(subpath_error(&pod, &c), None);
    }

    #[test]
    fn unknown_sources_are_not_judged() {
        let mut secret = field("S", "x");
        if let Some(from) = secret.value_from.as_mut() {
            from.field_ref = None;
        }
        assert_eq!(
            subpath_error(&Pod::default(), &container(vec![secret], "$(S)")),
            None
        );
    }
}
