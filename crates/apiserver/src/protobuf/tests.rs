//! Bodies encoded with prost from the k8s-pb messages, shaped as Go clients send them
//! (value fields present even when zero), decoded back to JSON.

use k8s_pb::api::apps::v1 as apps;
use k8s_pb::api::core::v1 as core;
use k8s_pb::api::policy::v1 as policy;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::{RawExtension, TypeMeta, Unknown};
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use prost::Message;
use serde_json::json;

use super::*;

fn body(api_version: &str, kind: &str, object: &impl Message) -> Vec<u8> {
    let envelope = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.to_owned()),
            kind: Some(kind.to_owned()),
        }),
        raw: Some(object.encode_to_vec()),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut out = MAGIC.to_vec();
    out.extend(envelope.encode_to_vec());
    out
}

fn s(v: &str) -> Option<String> {
    Some(v.to_owned())
}

/// ObjectMeta as Go marshals it: every value field present, the zero time as an empty
/// message.
fn go_meta(name: &str, namespace: &str) -> meta::ObjectMeta {
    meta::ObjectMeta {
        name: s(name),
        generate_name: s(""),
        namespace: s(namespace),
        self_link: s(""),
        uid: s(""),
        resource_version: s(""),
        generation: Some(0),
        creation_timestamp: Some(meta::Time::default()),
        ..Default::default()
    }
}

#[test]
fn namespace_from_kubectl_create_namespace() {
    let ns = core::Namespace {
        metadata: Some(go_meta("demo", "")),
        spec: Some(core::NamespaceSpec::default()),
        status: Some(core::NamespaceStatus {
            phase: s(""),
            ..Default::default()
        }),
    };
    let got = decode_to_json(&body("v1", "Namespace", &ns)).expect("decode");
    assert_eq!(
        got,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"},
               "spec": {}, "status": {}})
    );
}

#[test]
fn deployment_from_kubectl_create_deployment() {
    let labels: std::collections::BTreeMap<String, String> =
        [("app".to_owned(), "web".to_owned())].into();
    let mut template_meta = go_meta("", "");
    template_meta.labels = labels.clone();
    let mut meta = go_meta("web", "default");
    meta.labels = labels.clone();
    let deployment = apps::Deployment {
        metadata: Some(meta),
        spec: Some(apps::DeploymentSpec {
            replicas: Some(0),
            selector: Some(meta::LabelSelector {
                match_labels: labels,
                match_expressions: vec![],
            }),
            template: Some(core::PodTemplateSpec {
                metadata: Some(template_meta),
                spec: Some(core::PodSpec {
                    containers: vec![core::Container {
                        name: s("nginx"),
                        image: s("nginx"),
                        working_dir: s(""),
                        resources: Some(core::ResourceRequirements::default()),
                        termination_message_path: s(""),
                        image_pull_policy: s(""),
                        stdin: Some(false),
                        tty: Some(false),
                        ports: vec![core::ContainerPort {
                            container_port: Some(80),
                            host_port: Some(0),
                            protocol: s(""),
                            ..Default::default()
                        }],
                        ..Default::default()
                    }],
                    restart_policy: s(""),
                    dns_policy: s(""),
                    host_network: Some(false),
                    ..Default::default()
                }),
            }),
            strategy: Some(apps::DeploymentStrategy {
                r#type: s(""),
                rolling_update: None,
            }),
            min_ready_seconds: Some(0),
            paused: Some(false),
            ..Default::default()
        }),
        status: Some(apps::DeploymentStatus {
            observed_generation: Some(0),
            replicas: Some(0),
            ..Default::default()
        }),
    };
    let got = decode_to_json(&body("apps/v1", "Deployment", &deployment)).expect("decode");
    assert_eq!(
        got,
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
            "spec": {
                // A pointer field: zero replicas were asked for and are kept.
                "replicas": 0,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{
                        "name": "nginx", "image": "nginx", "resources": {},
                        "ports": [{"containerPort": 80}]
                    }]}
                },
                "strategy": {}
            },
            "status": {}
        })
    );
}

#[test]
fn config_map_and_secret_maps() {
    let cm = core::ConfigMap {
        metadata: Some(go_meta("cfg", "default")),
        immutable: None,
        data: [("a".to_owned(), "1".to_owned())].into(),
        binary_data: [("b".to_owned(), vec![0u8, 1, 2])].into(),
    };
    let got = decode_to_json(&body("v1", "ConfigMap", &cm)).expect("configmap");
    assert_eq!(got["data"], json!({"a": "1"}));
    assert_eq!(got["binaryData"], json!({"b": "AAEC"}));
    assert!(got.get("immutable").is_none());

    let secret = core::Secret {
        metadata: Some(go_meta("tok", "default")),
        immutable: Some(false),
        data: [("password".to_owned(), b"hunter2".to_vec())].into(),
        string_data: Default::default(),
        r#type: s("Opaque"),
    };
    let got = decode_to_json(&body("v1", "Secret", &secret)).expect("secret");
    assert_eq!(got["data"], json!({"password": "aHVudGVyMg=="}));
    assert_eq!(got["type"], "Opaque");
    // immutable is a pointer: an explicit false is kept.
    assert_eq!(got["immutable"], false);
}

#[test]
fn eviction_and_delete_options_keep_a_zero_grace_period() {
    let eviction = policy::Eviction {
        metadata: Some(go_meta("web-1", "default")),
        delete_options: Some(meta::DeleteOptions {
            grace_period_seconds: Some(0),
            ..Default::default()
        }),
    };
    let got = decode_to_json(&body("policy/v1", "Eviction", &eviction)).expect("eviction");
    assert_eq!(
        got,
        json!({"apiVersion": "policy/v1", "kind": "Eviction",
               "metadata": {"name": "web-1", "namespace": "default"},
               "deleteOptions": {"gracePeriodSeconds": 0}})
    );

    let options = meta::DeleteOptions {
        propagation_policy: s("Foreground"),
        dry_run: vec!["All".to_owned()],
        ..Default::default()
    };
    let got = decode_to_json(&body("v1", "DeleteOptions", &options)).expect("delete options");
    assert_eq!(
        got,
        json!({"apiVersion": "v1", "kind": "DeleteOptions",
               "propagationPolicy": "Foreground", "dryRun": ["All"]})
    );
}

#[test]
fn pod_with_embedded_structs_quantities_and_int_or_strings() {
    let mut meta = go_meta("web-1", "default");
    meta.creation_timestamp = Some(meta::Time {
        seconds: Some(1_714_564_800),
        nanos: Some(0),
    });
    let pod = core::Pod {
        metadata: Some(meta),
        spec: Some(core::PodSpec {
            volumes: vec![core::Volume {
                name: s("cfg"),
                volume_source: Some(core::VolumeSource {
                    config_map: Some(core::ConfigMapVolumeSource {
                        local_object_reference: Some(core::LocalObjectReference { name: s("cfg") }),
                        default_mode: Some(420),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
            }],
            containers: vec![core::Container {
                name: s("app"),
                readiness_probe: Some(core::Probe {
                    handler: Some(core::ProbeHandler {
                        http_get: Some(core::HttpGetAction {
                            path: s("/healthz"),
                            port: Some(IntOrString {
                                r#type: Some(1),
                                int_val: Some(0),
                                str_val: s("http"),
                            }),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    period_seconds: Some(5),
                    ..Default::default()
                }),
                resources: Some(core::ResourceRequirements {
                    limits: [("cpu".to_owned(), Quantity { string: s("500m") })].into(),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            termination_grace_period_seconds: Some(0),
            ..Default::default()
        }),
        status: None,
    };
    let got = decode_to_json(&body("v1", "Pod", &pod)).expect("pod");
    assert_eq!(got["metadata"]["creationTimestamp"], "2024-05-01T12:00:00Z");
    assert_eq!(
        got["spec"]["volumes"],
        json!([{"name": "cfg", "configMap": {"name": "cfg", "defaultMode": 420}}])
    );
    assert_eq!(
        got["spec"]["containers"][0]["readinessProbe"],
        json!({"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 5})
    );
    assert_eq!(
        got["spec"]["containers"][0]["resources"],
        json!({"limits": {"cpu": "500m"}})
    );
    assert_eq!(got["spec"]["terminationGracePeriodSeconds"], 0);
}

#[test]
fn service_ports_and_controller_revision_data() {
    let svc = core::Service {
        metadata: Some(go_meta("web", "default")),
        spec: Some(core::ServiceSpec {
            ports: vec![core::ServicePort {
                name: s("http"),
                port: Some(80),
                target_port: Some(IntOrString {
                    r#type: Some(0),
                    int_val: Some(8080),
                    str_val: s(""),
                }),
                protocol: s("TCP"),
                ..Default::default()
            }],
            selector: [("app".to_owned(), "web".to_owned())].into(),
            r#type: s("ClusterIP"),
            ..Default::default()
        }),
        status: None,
    };
    let got = decode_to_json(&body("v1", "Service", &svc)).expect("service");
    assert_eq!(
        got["spec"],
        json!({"ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}],
               "selector": {"app": "web"}, "type": "ClusterIP"})
    );

    let revision = apps::ControllerRevision {
        metadata: Some(go_meta("web-1", "default")),
        data: Some(RawExtension {
            raw: Some(br#"{"spec":{"template":{"x":1}}}"#.to_vec()),
        }),
        revision: Some(3),
    };
    let got = decode_to_json(&body("apps/v1", "ControllerRevision", &revision)).expect("cr");
    assert_eq!(got["data"], json!({"spec": {"template": {"x": 1}}}));
    assert_eq!(got["revision"], 3);
}

#[test]
fn lease_micro_times() {
    let lease = k8s_pb::api::coordination::v1::Lease {
        metadata: Some(go_meta("kcm", "kube-system")),
        spec: Some(k8s_pb::api::coordination::v1::LeaseSpec {
            holder_identity: s("host_1"),
            lease_duration_seconds: Some(15),
            renew_time: Some(meta::MicroTime {
                seconds: Some(1_714_564_800),
                nanos: Some(123_456_000),
            }),
            ..Default::default()
        }),
    };
    let got = decode_to_json(&body("coordination.k8s.io/v1", "Lease", &lease)).expect("lease");
    assert_eq!(
        got["spec"],
        json!({"holderIdentity": "host_1", "leaseDurationSeconds": 15,
               "renewTime": "2024-05-01T12:00:00.123456Z"})
    );
}

/// client-go's body for an admissionregistration.k8s.io/v1 MutatingAdmissionPolicy, which
/// v1beta1's messages describe tag for tag (k8s-pb has no v1 ones).
#[test]
fn mutating_admission_policy_v1_from_client_go() {
    use k8s_pb::api::admissionregistration::{v1 as reg, v1beta1 as beta};
    let policy = beta::MutatingAdmissionPolicy {
        metadata: Some(go_meta("p", "")),
        spec: Some(beta::MutatingAdmissionPolicySpec {
            match_constraints: Some(beta::MatchResources {
                namespace_selector: Some(meta::LabelSelector {
                    match_labels: [("team".to_owned(), "a".to_owned())].into(),
                    ..Default::default()
                }),
                resource_rules: vec![beta::NamedRuleWithOperations {
                    rule_with_operations: Some(reg::RuleWithOperations {
                        operations: vec!["CREATE".to_owned()],
                        rule: Some(reg::Rule {
                            api_groups: vec!["apps".to_owned()],
                            api_versions: vec!["v1".to_owned()],
                            resources: vec!["deployments".to_owned()],
                            scope: None,
                        }),
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            mutations: vec![beta::Mutation {
                patch_type: s("ApplyConfiguration"),
                apply_configuration: Some(beta::ApplyConfiguration {
                    expression: s("Object{spec: Object.spec{replicas: 1337}}"),
                }),
                json_patch: None,
            }],
            reinvocation_policy: s("Never"),
            ..Default::default()
        }),
    };
    let got = decode_to_json(&body(
        "admissionregistration.k8s.io/v1",
        "MutatingAdmissionPolicy",
        &policy,
    ))
    .expect("decode");
    assert_eq!(
        got["spec"],
        json!({
            "matchConstraints": {"namespaceSelector": {"matchLabels": {"team": "a"}},
                "resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                    "operations": ["CREATE"], "resources": ["deployments"]}]},
            "mutations": [{"patchType": "ApplyConfiguration",
                "applyConfiguration": {"expression": "Object{spec: Object.spec{replicas: 1337}}"}}],
            "reinvocationPolicy": "Never"})
    );
}

#[test]
fn bad_bodies_are_errors() {
    struct Case {
        name: &'static str,
        body: Vec<u8>,
        want: Error,
    }
    let ns = core::Namespace::default();
    let mut truncated = body(
        "v1",
        "Namespace",
        &core::Namespace {
            metadata: Some(go_meta("x", "")),
            ..Default::default()
        },
    );
    truncated.truncate(truncated.len() - 3);
    let mut garbage_raw = MAGIC.to_vec();
    garbage_raw.extend(
        Unknown {
            type_meta: Some(TypeMeta {
                api_version: s("v1"),
                kind: s("Namespace"),
            }),
            raw: Some(vec![0x0a, 0x10, 0x01]),
            ..Default::default()
        }
        .encode_to_vec(),
    );
    let mut gzip = MAGIC.to_vec();
    gzip.extend(
        Unknown {
            type_meta: Some(TypeMeta {
                api_version: s("v1"),
                kind: s("Namespace"),
            }),
            content_encoding: s("gzip"),
            ..Default::default()
        }
        .encode_to_vec(),
    );
    let cases = [
        Case {
            name: "json body",
            body: br#"{"kind":"Namespace"}"#.to_vec(),
            want: Error::MissingMagic,
        },
        Case {
            name: "unknown kind",
            body: body("example.com/v1", "Widget", &ns),
            want: Error::UnsupportedKind {
                api_version: "example.com/v1".to_owned(),
                kind: "Widget".to_owned(),
            },
        },
        Case {
            name: "object bytes cut short",
            body: garbage_raw,
            want: Error::Malformed("length past the end of the message"),
        },
        Case {
            name: "compressed",
            body: gzip,
            want: Error::UnsupportedEncoding("gzip".to_owned()),
        },
    ];
    for case in cases {
        assert_eq!(decode_to_json(&case.body), Err(case.want), "{}", case.name);
    }
    assert!(
        matches!(decode_to_json(&truncated), Err(Error::Envelope(_))),
        "truncated envelope"
    );
    assert_eq!(
        Error::UnsupportedKind {
            api_version: String::new(),
            kind: String::new()
        }
        .status_code(),
        415
    );
}

/// Bodies the installed kubectl v1.32 sent (captured from `kubectl create namespace demo`,
/// `create deployment web --image=nginx --replicas=0 --port=80`, `create configmap cfg
/// --from-literal=a=1`, `create secret generic tok --from-literal=p=hunter2`,
/// `create service clusterip web --tcp=80:8080`).
mod captured {
    use serde_json::Value;

    use super::*;

    const NAMESPACE: &[u8] =
        b"\x6b\x38\x73\x00\x0a\x0f\x0a\x02\x76\x31\x12\x09\x4e\x61\x6d\x65\x73\x70\x61\x63\x65\x12\
        \x1c\x0a\x14\x0a\x04\x64\x65\x6d\x6f\x12\x00\x1a\x00\x22\x00\x2a\x00\x32\x00\x38\x00\x42\
        \x00\x12\x00\x1a\x02\x0a\x00\x1a\x00\x22\x00";
    const DEPLOYMENT: &[u8] =
        b"\x6b\x38\x73\x00\x0a\x15\x0a\x07\x61\x70\x70\x73\x2f\x76\x31\x12\x0a\x44\x65\x70\x6c\x6f\
        \x79\x6d\x65\x6e\x74\x12\xbf\x01\x0a\x26\x0a\x03\x77\x65\x62\x12\x00\x1a\x07\x64\x65\x66\
        \x61\x75\x6c\x74\x22\x00\x2a\x00\x32\x00\x38\x00\x42\x00\x5a\x0a\x0a\x03\x61\x70\x70\x12\
        \x03\x77\x65\x62\x12\x86\x01\x08\x00\x12\x0c\x0a\x0a\x0a\x03\x61\x70\x70\x12\x03\x77\x65\
        \x62\x1a\x6c\x0a\x1c\x0a\x00\x12\x00\x1a\x00\x22\x00\x2a\x00\x32\x00\x38\x00\x42\x00\x5a\
        \x0a\x0a\x03\x61\x70\x70\x12\x03\x77\x65\x62\x12\x4c\x12\x2e\x0a\x05\x6e\x67\x69\x6e\x78\
        \x12\x05\x6e\x67\x69\x6e\x78\x2a\x00\x32\x0a\x0a\x00\x10\x00\x18\x50\x22\x00\x2a\x00\x42\
        \x00\x6a\x00\x72\x00\x80\x01\x00\x88\x01\x00\x90\x01\x00\xa2\x01\x00\x1a\x00\x32\x00\x42\
        \x00\x4a\x00\x52\x00\x58\x00\x60\x00\x68\x00\x82\x01\x00\x8a\x01\x00\x9a\x01\x00\xc2\x01\
        \x00\x22\x02\x0a\x00\x28\x00\x38\x00\x1a\x0c\x08\x00\x10\x00\x18\x00\x20\x00\x28\x00\x38\
        \x00\x1a\x00\x22\x00";
    const CONFIG_MAP: &[u8] =
        b"\x6b\x38\x73\x00\x0a\x0f\x0a\x02\x76\x31\x12\x09\x43\x6f\x6e\x66\x69\x67\x4d\x61\x70\x12\
        \x24\x0a\x1a\x0a\x03\x63\x66\x67\x12\x00\x1a\x07\x64\x65\x66\x61\x75\x6c\x74\x22\x00\x2a\
        \x00\x32\x00\x38\x00\x42\x00\x12\x06\x0a\x01\x61\x12\x01\x31\x1a\x00\x22\x00";
    const SECRET: &[u8] =
        b"\x6b\x38\x73\x00\x0a\x0c\x0a\x02\x76\x31\x12\x06\x53\x65\x63\x72\x65\x74\x12\x2c\x0a\x1a\
        \x0a\x03\x74\x6f\x6b\x12\x00\x1a\x07\x64\x65\x66\x61\x75\x6c\x74\x22\x00\x2a\x00\x32\x00\
        \x38\x00\x42\x00\x12\x0c\x0a\x01\x70\x12\x07\x68\x75\x6e\x74\x65\x72\x32\x1a\x00\x1a\x00\
        \x22\x00";
    const SERVICE: &[u8] =
        b"\x6b\x38\x73\x00\x0a\x0d\x0a\x02\x76\x31\x12\x07\x53\x65\x72\x76\x69\x63\x65\x12\x70\x0a\
        \x26\x0a\x03\x77\x65\x62\x12\x00\x1a\x07\x64\x65\x66\x61\x75\x6c\x74\x22\x00\x2a\x00\x32\
        \x00\x38\x00\x42\x00\x5a\x0a\x0a\x03\x61\x70\x70\x12\x03\x77\x65\x62\x12\x42\x0a\x1b\x0a\
        \x07\x38\x30\x2d\x38\x30\x38\x30\x12\x03\x54\x43\x50\x18\x50\x22\x07\x08\x00\x10\x90\x3f\
        \x1a\x00\x28\x00\x12\x0a\x0a\x03\x61\x70\x70\x12\x03\x77\x65\x62\x1a\x00\x22\x09\x43\x6c\
        \x75\x73\x74\x65\x72\x49\x50\x3a\x00\x42\x00\x52\x00\x5a\x00\x60\x00\x68\x00\x1a\x02\x0a\
        \x00\x1a\x00\x22\x00";

    #[test]
    fn kubectl_create_bodies_decode_to_the_json_kubectl_would_send() {
        struct Case {
            name: &'static str,
            body: &'static [u8],
            want: Value,
        }
        let meta = json!({"name": "web", "namespace": "default", "labels": {"app": "web"}});
        let cases = [
            Case {
                name: "namespace",
                body: NAMESPACE,
                want: json!({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": "demo"}, "spec": {}, "status": {}}),
            },
            Case {
                name: "deployment",
                body: DEPLOYMENT,
                want: json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
                    "spec": {
                        "replicas": 0,
                        "selector": {"matchLabels": {"app": "web"}},
                        "strategy": {},
                        "template": {
                            "metadata": {"labels": {"app": "web"}},
                            "spec": {"containers": [{"name": "nginx", "image": "nginx",
                                "ports": [{"containerPort": 80}], "resources": {}}]}
                        }
                    },
                    "status": {}}),
            },
            Case {
                name: "configmap",
                body: CONFIG_MAP,
                want: json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "cfg", "namespace": "default"}, "data": {"a": "1"}}),
            },
            Case {
                name: "secret",
                body: SECRET,
                want: json!({"apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": "tok", "namespace": "default"},
                    "data": {"p": "aHVudGVyMg=="}}),
            },
            Case {
                name: "service",
                body: SERVICE,
                want: json!({"apiVersion": "v1", "kind": "Service", "metadata": meta,
                    "spec": {"ports": [{"name": "80-8080", "port": 80, "protocol": "TCP",
                        "targetPort": 8080}], "selector": {"app": "web"}, "type": "ClusterIP"},
                    "status": {"loadBalancer": {}}}),
            },
        ];
        for case in cases {
            assert_eq!(
                decode_to_json(case.body).expect(case.name),
                case.want,
                "{}",
                case.name
            );
        }
    }
}

/// CustomResourceDefinitions as client-go sends them with the protobuf content type (the
/// e2e framework's clients, kube-controller-manager's `--kube-api-content-type`).
mod crd {
    use k8s_pb::apiextensions_apiserver::pkg::apis::apiextensions::v1 as ext;

    use super::*;

    /// JSONSchemaProps as Go marshals it: every value field present, pointers only if set.
    fn go_props(ty: &str) -> ext::JsonSchemaProps {
        ext::JsonSchemaProps {
            id: s(""),
            schema: s(""),
            description: s(""),
            r#type: s(ty),
            format: s(""),
            title: s(""),
            exclusive_maximum: Some(false),
            exclusive_minimum: Some(false),
            pattern: s(""),
            unique_items: Some(false),
            nullable: Some(false),
            x_kubernetes_embedded_resource: Some(false),
            x_kubernetes_int_or_string: Some(false),
            ..Default::default()
        }
    }

    fn raw(json: &str) -> ext::Json {
        ext::Json {
            raw: Some(json.as_bytes().to_vec()),
        }
    }

    fn version(
        name: &str,
        served: bool,
        storage: bool,
        schema: ext::JsonSchemaProps,
    ) -> ext::CustomResourceDefinitionVersion {
        ext::CustomResourceDefinitionVersion {
            name: s(name),
            served: Some(served),
            storage: Some(storage),
            deprecated: Some(false),
            schema: Some(ext::CustomResourceValidation {
                open_apiv3_schema: Some(schema),
            }),
            ..Default::default()
        }
    }

    fn names() -> ext::CustomResourceDefinitionNames {
        ext::CustomResourceDefinitionNames {
            plural: s("widgets"),
            singular: s("widget"),
            short_names: vec!["wd".to_owned()],
            kind: s("Widget"),
            list_kind: s("WidgetList"),
            categories: vec![],
        }
    }

    #[test]
    fn crd_with_schema_unions_raw_json_and_doubles_decodes_to_its_json() {
        let mut replicas = go_props("integer");
        replicas.maximum = Some(5.0);
        replicas.minimum = Some(0.0);
        replicas.default = Some(raw("1"));
        let mut ratio = go_props("number");
        ratio.multiple_of = Some(0.5);
        let mut color = go_props("string");
        color.r#enum = vec![raw(r#""red""#), raw(r#""blue""#), ext::Json::default()];
        color.max_length = Some(0);
        let mut tags = go_props("array");
        tags.items = Some(Box::new(ext::JsonSchemaPropsOrArray {
            schema: Some(Box::new(go_props("string"))),
            j_son_schemas: vec![],
        }));
        tags.x_kubernetes_list_type = s("set");
        let mut tuple = go_props("array");
        tuple.items = Some(Box::new(ext::JsonSchemaPropsOrArray {
            schema: None,
            j_son_schemas: vec![go_props("string"), go_props("integer")],
        }));
        tuple.additional_items = Some(Box::new(ext::JsonSchemaPropsOrBool {
            allows: Some(false),
            schema: None,
        }));
        let mut labels = go_props("object");
        labels.additional_properties = Some(Box::new(ext::JsonSchemaPropsOrBool {
            allows: Some(true),
            schema: Some(Box::new(go_props("string"))),
        }));
        let mut spec = go_props("object");
        spec.properties = [
            ("replicas".to_owned(), replicas),
            ("ratio".to_owned(), ratio),
            ("color".to_owned(), color),
            ("tags".to_owned(), tags),
            ("tuple".to_owned(), tuple),
            ("labels".to_owned(), labels),
        ]
        .into();
        spec.required = vec!["replicas".to_owned()];
        spec.dependencies = [
            (
                "ratio".to_owned(),
                ext::JsonSchemaPropsOrStringArray {
                    schema: None,
                    property: vec!["replicas".to_owned()],
                },
            ),
            (
                "color".to_owned(),
                ext::JsonSchemaPropsOrStringArray {
                    schema: Some(go_props("object")),
                    property: vec![],
                },
            ),
        ]
        .into();
        spec.x_kubernetes_validations = vec![ext::ValidationRule {
            rule: s("self.replicas >= 0"),
            message: s(""),
            message_expression: s(""),
            field_path: s(""),
            ..Default::default()
        }];
        let mut root = go_props("object");
        root.r#ref = s("");
        root.properties = [("spec".to_owned(), spec)].into();
        let mut status = go_props("object");
        status.x_kubernetes_preserve_unknown_fields = Some(true);
        root.properties.insert("status".to_owned(), status);
        root.example = Some(raw(r#"{"spec":{"replicas":1}}"#));

        let mut v1 = version("v1", true, true, root);
        v1.subresources = Some(ext::CustomResourceSubresources {
            status: Some(ext::CustomResourceSubresourceStatus {}),
            scale: Some(ext::CustomResourceSubresourceScale {
                spec_replicas_path: s(".spec.replicas"),
                status_replicas_path: s(".status.replicas"),
                label_selector_path: None,
            }),
        });
        v1.additional_printer_columns = vec![ext::CustomResourceColumnDefinition {
            name: s("Replicas"),
            r#type: s("integer"),
            format: s(""),
            description: s(""),
            priority: Some(0),
            json_path: s(".spec.replicas"),
        }];
        v1.selectable_fields = vec![ext::SelectableField {
            json_path: s(".spec.color"),
        }];
        let mut v2 = version("v2", false, false, go_props("object"));
        v2.deprecated = Some(true);
        v2.deprecation_warning = s("");
        let crd = ext::CustomResourceDefinition {
            metadata: Some(go_meta("widgets.example.com", "")),
            spec: Some(ext::CustomResourceDefinitionSpec {
                group: s("example.com"),
                names: Some(names()),
                scope: s("Namespaced"),
                versions: vec![v1, v2],
                conversion: Some(ext::CustomResourceConversion {
                    strategy: s("Webhook"),
                    webhook: Some(ext::WebhookConversion {
                        client_config: Some(ext::WebhookClientConfig {
                            url: None,
                            service: Some(ext::ServiceReference {
                                namespace: s("default"),
                                name: s("conv"),
                                path: s("/convert"),
                                port: Some(443),
                            }),
                            ca_bundle: Some(vec![0, 1, 2]),
                        }),
                        conversion_review_versions: vec!["v1".to_owned()],
                    }),
                }),
                preserve_unknown_fields: Some(false),
            }),
            status: Some(ext::CustomResourceDefinitionStatus {
                conditions: vec![],
                accepted_names: Some(ext::CustomResourceDefinitionNames {
                    plural: s(""),
                    singular: s(""),
                    kind: s(""),
                    list_kind: s(""),
                    ..Default::default()
                }),
                stored_versions: vec![],
                observed_generation: Some(0),
            }),
        };
        let got = decode_to_json(&body(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            &crd,
        ))
        .expect("decode");
        let want = json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com",
                "names": {"plural": "widgets", "singular": "widget", "shortNames": ["wd"],
                          "kind": "Widget", "listKind": "WidgetList"},
                "scope": "Namespaced",
                "versions": [
                    {
                        "name": "v1", "served": true, "storage": true,
                        "schema": {"openAPIV3Schema": {
                            "type": "object",
                            "$ref": "",
                            "example": {"spec": {"replicas": 1}},
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "required": ["replicas"],
                                    "properties": {
                                        "replicas": {"type": "integer", "maximum": 5,
                                                     "minimum": 0, "default": 1},
                                        "ratio": {"type": "number", "multipleOf": 0.5},
                                        "color": {"type": "string", "maxLength": 0,
                                                  "enum": ["red", "blue", null]},
                                        "tags": {"type": "array", "items": {"type": "string"},
                                                 "x-kubernetes-list-type": "set"},
                                        "tuple": {"type": "array",
                                                  "items": [{"type": "string"},
                                                            {"type": "integer"}],
                                                  "additionalItems": false},
                                        "labels": {"type": "object",
                                                   "additionalProperties": {"type": "string"}}
                                    },
                                    "dependencies": {"ratio": ["replicas"],
                                                     "color": {"type": "object"}},
                                    "x-kubernetes-validations": [
                                        {"rule": "self.replicas >= 0"}
                                    ]
                                },
                                "status": {"type": "object",
                                           "x-kubernetes-preserve-unknown-fields": true}
                            }
                        }},
                        "subresources": {"status": {}, "scale": {
                            "specReplicasPath": ".spec.replicas",
                            "statusReplicasPath": ".status.replicas"}},
                        "additionalPrinterColumns": [{"name": "Replicas", "type": "integer",
                                                      "jsonPath": ".spec.replicas"}],
                        "selectableFields": [{"jsonPath": ".spec.color"}]
                    },
                    {
                        "name": "v2", "served": false, "storage": false, "deprecated": true,
                        "deprecationWarning": "",
                        "schema": {"openAPIV3Schema": {"type": "object"}}
                    }
                ],
                "conversion": {"strategy": "Webhook", "webhook": {
                    "clientConfig": {"service": {"namespace": "default", "name": "conv",
                                                 "path": "/convert", "port": 443},
                                     "caBundle": "AAEC"},
                    "conversionReviewVersions": ["v1"]}}
            },
            "status": {"acceptedNames": {"plural": "", "kind": ""}}
        });
        assert_eq!(got, want);
        let typed: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition =
            serde_json::from_value(got).expect("a CRD k8s-openapi reads");
        assert!(!typed.spec.versions[1].served);
    }

    /// Schemas are recursive; a body nesting them deeper than any JSON body could is
    /// refused, not decoded until the stack runs out.
    #[test]
    fn deeply_nested_schemas_are_refused_not_a_stack_overflow() {
        /// A length-delimited field `tag` holding `inner`.
        fn field(tag: u32, inner: &[u8]) -> Vec<u8> {
            let mut out = Vec::new();
            prost::encoding::encode_key(tag, prost::encoding::WireType::LengthDelimited, &mut out);
            prost::encoding::encode_varint(inner.len() as u64, &mut out);
            out.extend_from_slice(inner);
            out
        }
        /// A CRD whose schema is `levels` schemas nested by `not` (tag 28): spec (2),
        /// versions (7), schema (4), openAPIV3Schema (1).
        fn crd(levels: usize) -> Vec<u8> {
            let mut schema = Vec::new();
            for _ in 0..levels {
                schema = field(28, &schema);
            }
            let raw = field(2, &field(7, &field(4, &field(1, &schema))));
            let envelope = Unknown {
                type_meta: Some(TypeMeta {
                    api_version: s("apiextensions.k8s.io/v1"),
                    kind: s("CustomResourceDefinition"),
                }),
                raw: Some(raw),
                ..Default::default()
            };
            let mut out = MAGIC.to_vec();
            out.extend(envelope.encode_to_vec());
            out
        }
        let got = decode_to_json(&crd(90)).expect("90 levels");
        let text = serde_json::to_vec(&got).expect("json");
        assert!(
            serde_json::from_slice::<serde_json::Value>(&text).is_ok(),
            "what is decoded parses again"
        );
        assert_eq!(
            decode_to_json(&crd(20_000)),
            Err(Error::TooDeep(decode::MAX_DEPTH))
        );
        // An embedded document counts too: a `default` of 100 nested arrays under the
        // schema (JSON, field 1 of the default, tag 8) would make the whole too deep.
        let deep_default = format!("{}{}", "[".repeat(100), "]".repeat(100));
        let mut schema = field(8, &field(1, deep_default.as_bytes()));
        schema = field(28, &schema);
        let raw = field(2, &field(7, &field(4, &field(1, &schema))));
        let mut body = MAGIC.to_vec();
        body.extend(
            Unknown {
                type_meta: Some(TypeMeta {
                    api_version: s("apiextensions.k8s.io/v1"),
                    kind: s("CustomResourceDefinition"),
                }),
                raw: Some(raw),
                ..Default::default()
            }
            .encode_to_vec(),
        );
        assert_eq!(
            decode_to_json(&body),
            Err(Error::TooDeep(decode::MAX_DEPTH))
        );
    }
}
