//! The pod-template hash that names a Deployment's ReplicaSets (and labels a DaemonSet's pods), as upstream `controller.ComputeHash`.
//!
//! kube-controller-manager v1.36 computes it as:
//!
//! 1. `hashutil.DeepHashObject(fnv.New32a(), *template)`: FNV-32a over go-spew's `%#v`
//!    rendering of the Go `v1.PodTemplateSpec` value, with apimachinery's `dump.ForHash`
//!    configuration (`SortKeys`, `SpewKeys`, `DisableMethods`, `DisablePointerAddresses`,
//!    `DisableCapacities`);
//! 2. if the Deployment has a collision count, an 8-byte buffer holding it as a little-endian
//!    `uint32` in the first four bytes;
//! 3. the decimal `Sum32`, mapped through `rand.SafeEncodeString`'s alphabet
//!    (`bcdfghjklmnpqrstvwxz2456789`), e.g. `nginx-deployment-6c5f67b5f7` for the
//!    Kubernetes documentation's `nginx-deployment` example (`nginx:1.14.2`, three replicas).
//!
//! kcm does the same, byte for byte. The spew text names every Go type and field of the
//! template in Go declaration order, zero values and nil pointers included, and prints
//! `resource.Quantity` by its private parsed state, so it is produced from data rather than from
//! the Rust types:
//!
//! - `layout` is a generated table of the Go layout of every struct reachable from
//!   `v1.PodTemplateSpec` in Kubernetes v1.36 (`gen_layout.py` beside it says how);
//! - `spew` walks the template's JSON (`serde_json::to_value` of the k8s-openapi type) along
//!   that table and streams spew's text straight into the hasher, reading a missing member as
//!   the Go zero value and an empty list or map as nil, as kube-controller-manager sees objects
//!   decoded from protobuf;
//! - `spew_quantity` prints a quantity's state as Go parses it ([`crate::quantity`] is the
//!   port of `ParseQuantity`);
//! - `sink` is where the text goes: the hasher ([`Fnv32a`], in `fnv`), or a buffer in tests.
//!
//! Known differences, all outside what an API server hands a controller for a pod template:
//! a non-zero `metav1.Time` inside a template prints with the `Local` zone of a container
//! without time zone data (Go prints whatever `time.Local` is on the controller's host), and
//! `managedFields[].fieldsV1` prints serde_json's compact encoding where Go keeps the raw bytes
//! it received. Both need an identical layout table: a Kubernetes release that adds a field to
//! a pod template type changes every hash, upstream as here, and needs a regenerated table.

use k8s_openapi::api::core::v1::PodTemplateSpec;

mod fnv;
mod layout;
mod sink;
mod spew;
mod spew_quantity;

pub use fnv::{Fnv32, Fnv32a};

#[cfg(test)]
mod vectors;

/// The characters `rand.SafeEncodeString` maps bytes onto (no vowels, no look-alikes).
const SAFE_ALPHABET: &[u8; 27] = b"bcdfghjklmnpqrstvwxz2456789";

/// Maps every character of `s` onto the safe alphabet, as apimachinery's
/// `rand.SafeEncodeString` (used on decimal digits, where it is a bijection).
pub fn safe_encode_string(s: &str) -> String {
    s.chars()
        .map(|c| char::from(SAFE_ALPHABET[(c as usize) % SAFE_ALPHABET.len()]))
        .collect()
}

/// The raw 32-bit hash behind [`compute_hash`].
pub fn compute_hash_u32(template: &PodTemplateSpec, collision_count: Option<i32>) -> u32 {
    let mut hasher = Fnv32a::new();
    write_spew(&mut hasher, template);
    if let Some(count) = collision_count {
        // Upstream writes an 8-byte buffer holding the little-endian u32 in its first half.
        let mut bytes = [0u8; 8];
        bytes[..4].copy_from_slice(&(count as u32).to_le_bytes());
        hasher.update(&bytes);
    }
    hasher.sum32()
}

/// Streams go-spew's `%#v` text of `template` (as upstream `dump.ForHash`) into `out`.
fn write_spew(out: &mut impl sink::Sink, template: &PodTemplateSpec) {
    match serde_json::to_value(template) {
        Ok(value) => spew::write_value(out, &layout::T_V1_POD_TEMPLATE_SPEC, Some(&value), true),
        // Cannot happen: the k8s-openapi `Serialize` impls only emit strings, numbers, maps
        // with string keys and sequences. Hash the zero template rather than panic.
        Err(err) => {
            tracing::error!(%err, "serializing a pod template for hashing failed");
            spew::write_value(out, &layout::T_V1_POD_TEMPLATE_SPEC, None, true);
        }
    }
}

/// go-spew's `%#v` text of `template`, exactly what upstream feeds the hasher (for debugging
/// and tests; hashing streams it without building the string).
pub fn spew_text(template: &PodTemplateSpec) -> String {
    let mut out = Vec::new();
    write_spew(&mut out, template);
    String::from_utf8_lossy(&out).into_owned()
}

/// The `pod-template-hash` of a template: FNV-32a of go-spew's rendering of the template and
/// of the collision count, printed in decimal and safe-encoded, as upstream
/// `controller.ComputeHash`.
pub fn compute_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    safe_encode_string(&compute_hash_u32(template, collision_count).to_string())
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};

    use k8s_openapi::api::core::v1::PodTemplateSpec;

    use super::vectors;
    use super::*;

    /// Upstream `hash_test.go`'s template, with `@@VERSION@@` in the image tag.
    const POD_SPEC: &str = r#"
{
    "metadata": {
        "creationTimestamp": null,
        "labels": { "app": "cats" }
    },
    "spec": {
        "containers": [
            {
                "name": "cats",
                "image": "registry/test/cats:v0.@@VERSION@@.0",
                "ports": [ { "name": "http", "containerPort": 9077, "protocol": "TCP" } ],
                "env": [
                    { "name": "DEPLOYMENT_ENVIRONMENT", "value": "cats-stubbed-functional" },
                    { "name": "APP_NAME", "value": "cats" }
                ],
                "resources": {
                    "limits": { "cpu": "1", "memory": "1Gi" },
                    "requests": { "cpu": "1", "memory": "1Gi" }
                },
                "livenessProbe": {
                    "httpGet": { "path": "/private/status", "port": 9077, "scheme": "HTTP" },
                    "initialDelaySeconds": 30, "timeoutSeconds": 1, "periodSeconds": 10,
                    "successThreshold": 1, "failureThreshold": 3
                },
                "readinessProbe": {
                    "httpGet": { "path": "/private/status", "port": 9077, "scheme": "HTTP" },
                    "initialDelaySeconds": 1, "timeoutSeconds": 1, "periodSeconds": 10,
                    "successThreshold": 1, "failureThreshold": 3
                },
                "terminationMessagePath": "/dev/termination-log",
                "imagePullPolicy": "IfNotPresent"
            }
        ],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "securityContext": {}
    }
}
"#;

    fn template(version: usize) -> PodTemplateSpec {
        serde_json::from_str(&POD_SPEC.replace("@@VERSION@@", &version.to_string()))
            .expect("valid template")
    }

    #[test]
    fn safe_encode_string_maps_digits_like_upstream() {
        assert_eq!(safe_encode_string("0123456789"), "456789bcdf");
        assert_eq!(safe_encode_string(""), "");
    }

    #[test]
    fn hash_of_the_same_template_is_stable() {
        let t = template(7);
        let first = compute_hash(&t, None);
        assert_eq!(first, compute_hash(&t.clone(), None));
        // A copy parsed again from JSON (different allocation, same content) hashes the same.
        assert_eq!(first, compute_hash(&template(7), None));
    }

    fn parse(json: &str) -> PodTemplateSpec {
        serde_json::from_str(json).expect("valid template")
    }

    #[test]
    fn hashes_match_kube_controller_manager() {
        let mut failures = Vec::new();
        for v in vectors::VECTORS {
            let got = compute_hash(&parse(v.template), v.collision_count);
            if got != v.hash {
                failures.push(format!("{}: got {got}, want {}", v.name, v.hash));
            }
        }
        assert!(
            failures.is_empty(),
            "{} of {} differ:\n{}",
            failures.len(),
            vectors::VECTORS.len(),
            failures.join("\n")
        );
    }

    fn vector(name: &str) -> &'static vectors::Vector {
        vectors::VECTORS
            .iter()
            .find(|v| v.name == name)
            .expect("vector exists")
    }

    #[test]
    fn spew_text_matches_go_spew_exactly() {
        struct Case {
            name: &'static str,
            want: &'static str,
        }
        let cases = [
            Case {
                name: "nginx defaulted",
                want: vectors::NGINX_SPEW,
            },
            Case {
                name: "quantity 1.5Gi",
                want: vectors::QUANTITY_1_5GI_SPEW,
            },
        ];
        for c in cases {
            assert_eq!(
                spew_text(&parse(vector(c.name).template)),
                c.want,
                "{}",
                c.name
            );
        }
    }

    #[test]
    fn zero_template_prints_every_field_as_a_go_zero_value() {
        let text = spew_text(&PodTemplateSpec::default());
        assert!(text.starts_with(
            "(v1.PodTemplateSpec){ObjectMeta:(v1.ObjectMeta){Name:(string) GenerateName:(string) "
        ));
        assert!(text.contains(
            "CreationTimestamp:(v1.Time){Time:(time.Time){wall:(uint64)0 ext:(int64)0 loc:(*time.Location)<nil>}}"
        ));
        assert!(text.contains("Containers:([]v1.Container)<nil>"));
        assert!(text.ends_with(
            "ResourceClaims:([]v1.PodResourceClaim)<nil> Resources:(*v1.ResourceRequirements)<nil> \
             HostnameOverride:(*string)<nil> SchedulingGroup:(*v1.PodSchedulingGroup)<nil>}}"
        ));
        assert_eq!(
            compute_hash(&PodTemplateSpec::default(), None),
            vector("empty template").hash
        );
    }

    #[test]
    fn empty_lists_and_maps_hash_like_absent_ones() {
        let absent = parse(r#"{"spec":{"containers":[{"name":"c"}]}}"#);
        let empty = parse(
            r#"{"metadata":{"labels":{},"annotations":{}},"spec":{"containers":[{"name":"c","env":[],"command":[],"resources":{"limits":{}}}],"tolerations":[],"nodeSelector":{}}}"#,
        );
        assert_eq!(spew_text(&absent), spew_text(&empty));
        assert_eq!(
            compute_hash(&absent, None),
            vector("minimal container").hash
        );
    }

    #[test]
    fn empty_struct_pointers_stay_non_nil() {
        let absent = parse(r#"{"spec":{"containers":[{"name":"c"}]}}"#);
        let empty = parse(
            r#"{"spec":{"containers":[{"name":"c","securityContext":{}}],"securityContext":{}}}"#,
        );
        let text = spew_text(&empty);
        assert!(text.contains(
            "SecurityContext:(*v1.SecurityContext){Capabilities:(*v1.Capabilities)<nil> "
        ));
        assert!(text.contains(
            "SecurityContext:(*v1.PodSecurityContext){SELinuxOptions:(*v1.SELinuxOptions)<nil> "
        ));
        assert!(spew_text(&absent).contains("SecurityContext:(*v1.SecurityContext)<nil>"));
        assert_ne!(compute_hash(&absent, None), compute_hash(&empty, None));
    }

    #[test]
    fn hash_looks_like_upstream() {
        for i in 0..50 {
            let h = compute_hash(&template(i), None);
            assert!((1..=10).contains(&h.len()), "{h}");
            assert!(h.chars().all(|c| "456789bcdf".contains(c)), "{h}");
        }
    }

    #[test]
    fn thousand_templates_do_not_collide() {
        // Upstream TestPodTemplateSpecHashFnv.
        let mut seen: HashMap<u32, usize> = HashMap::new();
        for i in 0..1000 {
            let h = compute_hash_u32(&template(i), None);
            if let Some(prev) = seen.insert(h, i) {
                panic!("hash collision between versions {prev} and {i}");
            }
        }
    }

    #[test]
    fn collision_count_changes_the_hash() {
        let t = template(1);
        let none = compute_hash(&t, None);
        let zero = compute_hash(&t, Some(0));
        let one = compute_hash(&t, Some(1));
        let two = compute_hash(&t, Some(2));
        assert_ne!(
            none, zero,
            "nil and 0 differ upstream too (8 zero bytes are hashed)"
        );
        assert_ne!(zero, one);
        assert_ne!(one, two);
        assert_eq!(one, compute_hash(&t, Some(1)));
        for (count, name) in [
            (None, "nginx defaulted"),
            (Some(0), "nginx defaulted collision 0"),
            (Some(1), "nginx defaulted collision 1"),
            (Some(7), "nginx defaulted collision 7"),
        ] {
            let v = vector(name);
            assert_eq!(compute_hash(&parse(v.template), count), v.hash, "{name}");
        }
    }

    #[test]
    fn label_order_does_not_matter() {
        let mut a = template(3);
        let mut b = template(3);
        let labels_a: BTreeMap<String, String> = [("x", "1"), ("y", "2")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        let labels_b: BTreeMap<String, String> = [("y", "2"), ("x", "1")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        a.metadata.get_or_insert_with(Default::default).labels = Some(labels_a);
        b.metadata.get_or_insert_with(Default::default).labels = Some(labels_b);
        assert_eq!(compute_hash(&a, None), compute_hash(&b, None));
    }
}
