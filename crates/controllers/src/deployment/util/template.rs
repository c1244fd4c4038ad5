//! Pod templates of a Deployment and its ReplicaSets: comparing them ignoring the hash label,
//! and adding or removing that label.

use std::cell::OnceCell;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use serde_json::Value;

/// The label that keeps the pods (and selectors) of a Deployment's ReplicaSets apart
/// (`apps.DefaultDeploymentUniqueLabelKey`).
pub const DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY: &str = "pod-template-hash";

/// Whether two templates are equal, ignoring the value (or absence) of the
/// `pod-template-hash` label, as upstream `EqualIgnoreHash`.
///
/// Upstream compares with `apiequality.Semantic.DeepEqual`, under which a nil and an empty
/// slice or map are equal. Here: an exact comparison first (cheap, and the common answer for
/// the new ReplicaSet); if that fails, both templates are compared as JSON with `null`s,
/// empty arrays and empty `labels`/`annotations`/`nodeSelector` maps dropped, and an empty
/// container `resources` dropped (a Go struct, not a pointer: `{}` and absent are the same
/// value, and `kubectl rollout undo` writes `{}` back for a template that had none). Quantities are
/// compared as written (`"1"` ≠ `"1000m"`), and a zero scalar differs from a missing one;
/// neither can happen between two copies of one template that went through the API server.
pub fn equal_ignore_hash(t1: &PodTemplateSpec, t2: &PodTemplateSpec) -> bool {
    TemplateMatcher::new(t1).matches(t2)
}

/// [`equal_ignore_hash`] against one template many times (a Deployment's template against
/// each of its ReplicaSets): the normalized JSON of the reference is computed at most once.
#[derive(Debug)]
pub struct TemplateMatcher<'a> {
    /// The template every candidate is compared with.
    reference: &'a PodTemplateSpec,
    /// Its normalized JSON, computed on the first slow-path comparison (`None` inside if it
    /// could not be serialized, which makes every slow-path comparison false).
    normalized: OnceCell<Option<Value>>,
}

impl<'a> TemplateMatcher<'a> {
    /// A matcher for `reference`.
    pub fn new(reference: &'a PodTemplateSpec) -> Self {
        Self {
            reference,
            normalized: OnceCell::new(),
        }
    }

    /// Whether `candidate` equals the reference, ignoring the hash label.
    pub fn matches(&self, candidate: &PodTemplateSpec) -> bool {
        let reference = self.reference;
        if reference.spec == candidate.spec
            && meta_equal_ignore_hash(reference.metadata.as_ref(), candidate.metadata.as_ref())
        {
            return true;
        }
        if containers_differ(reference, candidate) {
            // The usual difference between ReplicaSets (a new image), decided without JSON.
            return false;
        }
        match (
            self.normalized.get_or_init(|| normalized(reference)),
            normalized(candidate),
        ) {
            (Some(a), Some(b)) => *a == b,
            _ => false,
        }
    }
}

/// Whether the two templates' containers differ in count, name or image (an unset image
/// equals an empty one, as Go's string). Sound as a shortcut: semantic equality needs all
/// three equal.
fn containers_differ(t1: &PodTemplateSpec, t2: &PodTemplateSpec) -> bool {
    fn containers(t: &PodTemplateSpec) -> &[Container] {
        t.spec.as_ref().map_or(&[], |s| s.containers.as_slice())
    }
    let (c1, c2) = (containers(t1), containers(t2));
    c1.len() != c2.len()
        || c1.iter().zip(c2).any(|(a, b)| {
            a.name != b.name || a.image.as_deref().unwrap_or("") != b.image.as_deref().unwrap_or("")
        })
}

/// Exact metadata comparison, ignoring the hash label and nil-vs-empty label maps.
fn meta_equal_ignore_hash(m1: Option<&ObjectMeta>, m2: Option<&ObjectMeta>) -> bool {
    let empty = ObjectMeta::default();
    let (m1, m2) = (m1.unwrap_or(&empty), m2.unwrap_or(&empty));
    let labels_equal = {
        let l1 = m1.labels.iter().flatten();
        let l2 = m2.labels.iter().flatten();
        l1.filter(|(k, _)| k.as_str() != DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY)
            .eq(l2.filter(|(k, _)| k.as_str() != DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY))
    };
    if !labels_equal {
        return false;
    }
    // Everything but the labels must match exactly.
    let strip = |m: &ObjectMeta| ObjectMeta {
        labels: None,
        ..m.clone()
    };
    strip(m1) == strip(m2)
}

/// The template as JSON with the hash label removed and Go's nil-vs-empty distinctions erased.
fn normalized(t: &PodTemplateSpec) -> Option<Value> {
    let mut v = serde_json::to_value(t).ok()?;
    if let Some(labels) = v
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        labels.remove(DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY);
    }
    for map in [
        "/metadata/labels",
        "/metadata/annotations",
        "/spec/nodeSelector",
    ] {
        drop_if_empty_object(&mut v, map);
    }
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        let count = v
            .pointer(&format!("/spec/{list}"))
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        for i in 0..count {
            drop_if_empty_object(&mut v, &format!("/spec/{list}/{i}/resources"));
        }
    }
    drop_nulls_and_empty_arrays(&mut v);
    let empty_meta = v
        .get("metadata")
        .and_then(Value::as_object)
        .is_some_and(|m| m.is_empty());
    if let Some(obj) = v.as_object_mut().filter(|_| empty_meta) {
        obj.remove("metadata");
    }
    Some(v)
}

fn drop_if_empty_object(v: &mut Value, pointer: &str) {
    let Some((parent, key)) = pointer.rsplit_once('/') else {
        return;
    };
    let empty = v
        .pointer(pointer)
        .and_then(Value::as_object)
        .is_some_and(|m| m.is_empty());
    if let Some(obj) = v
        .pointer_mut(parent)
        .and_then(Value::as_object_mut)
        .filter(|_| empty)
    {
        obj.remove(key);
    }
}

fn drop_nulls_and_empty_arrays(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.retain(|_, child| {
                !(child.is_null() || child.as_array().is_some_and(|a| a.is_empty()))
            });
            for child in map.values_mut() {
                drop_nulls_and_empty_arrays(child);
            }
        }
        Value::Array(items) => {
            for child in items {
                drop_nulls_and_empty_arrays(child);
            }
        }
        _ => {}
    }
}

/// A copy of `labels` with `key=value` added, as upstream `labelsutil.CloneAndAddLabel`
/// (an empty key returns the labels unchanged).
pub fn clone_and_add_label(
    labels: Option<&BTreeMap<String, String>>,
    key: &str,
    value: &str,
) -> BTreeMap<String, String> {
    let mut out = labels.cloned().unwrap_or_default();
    if !key.is_empty() {
        out.insert(key.to_owned(), value.to_owned());
    }
    out
}

/// A copy of `labels` without `key`, as upstream `labelsutil.CloneAndRemoveLabel`.
pub fn clone_and_remove_label(
    labels: Option<&BTreeMap<String, String>>,
    key: &str,
) -> Option<BTreeMap<String, String>> {
    let mut out = labels.cloned()?;
    out.remove(key);
    Some(out)
}

/// A copy of `selector` with `key=value` added to its `matchLabels`, as upstream
/// `labelsutil.CloneSelectorAndAddLabel`.
pub fn clone_selector_and_add_label(
    selector: &LabelSelector,
    key: &str,
    value: &str,
) -> LabelSelector {
    let mut out = selector.clone();
    if !key.is_empty() {
        out.match_labels
            .get_or_insert_with(BTreeMap::new)
            .insert(key.to_owned(), value.to_owned());
    }
    out
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Container, PodSpec};
    use kcm_testing::{MetaBuilder, PodSpecBuilder, labels};

    use super::*;

    /// Upstream `generatePodTemplateSpec`.
    fn pod_template(
        name: &str,
        node_name: &str,
        annotations: &[(&str, &str)],
        label_pairs: &[(&str, &str)],
    ) -> PodTemplateSpec {
        kcm_testing::pod_template()
            .name(name)
            .annotations(annotations)
            .labels(label_pairs)
            .node(node_name)
            .build()
    }

    const HASH: &str = DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY;

    #[test]
    fn equal_ignore_hash_table() {
        // Upstream TestEqualIgnoreHash, each case run in both orders.
        struct Case {
            name: &'static str,
            former: PodTemplateSpec,
            latter: PodTemplateSpec,
            expected: bool,
        }
        let cases = [
            Case {
                name: "Same spec, same labels",
                former: pod_template(
                    "foo",
                    "foo-node",
                    &[],
                    &[(HASH, "value-1"), ("something", "else")],
                ),
                latter: pod_template(
                    "foo",
                    "foo-node",
                    &[],
                    &[(HASH, "value-1"), ("something", "else")],
                ),
                expected: true,
            },
            Case {
                name: "Same spec, only pod-template-hash label value is different",
                former: pod_template(
                    "foo",
                    "foo-node",
                    &[],
                    &[(HASH, "value-1"), ("something", "else")],
                ),
                latter: pod_template(
                    "foo",
                    "foo-node",
                    &[],
                    &[(HASH, "value-2"), ("something", "else")],
                ),
                expected: true,
            },
            Case {
                name: "Same spec, the former doesn't have pod-template-hash label",
                former: pod_template("foo", "foo-node", &[], &[("something", "else")]),
                latter: pod_template(
                    "foo",
                    "foo-node",
                    &[],
                    &[(HASH, "value-2"), ("something", "else")],
                ),
                expected: true,
            },
            Case {
                name: "Same spec, the label is different, the former doesn't have pod-template-hash label, same number of labels",
                former: pod_template("foo", "foo-node", &[], &[("something", "else")]),
                latter: pod_template("foo", "foo-node", &[], &[(HASH, "value-2")]),
                expected: false,
            },
            Case {
                name: "Same spec, the label is different, the latter doesn't have pod-template-hash label, same number of labels",
                former: pod_template("foo", "foo-node", &[], &[(HASH, "value-1")]),
                latter: pod_template("foo", "foo-node", &[], &[("something", "else")]),
                expected: false,
            },
            Case {
                name: "Same spec, the label is different, and the pod-template-hash label value is the same",
                former: pod_template("foo", "foo-node", &[], &[(HASH, "value-1")]),
                latter: pod_template(
                    "foo",
                    "foo-node",
                    &[],
                    &[(HASH, "value-1"), ("something", "else")],
                ),
                expected: false,
            },
            Case {
                name: "Different spec, same labels",
                former: pod_template(
                    "foo",
                    "foo-node",
                    &[("former", "value")],
                    &[(HASH, "value-1"), ("something", "else")],
                ),
                latter: pod_template(
                    "foo",
                    "foo-node",
                    &[("latter", "value")],
                    &[(HASH, "value-1"), ("something", "else")],
                ),
                expected: false,
            },
            Case {
                name: "Different spec, different pod-template-hash label value",
                former: pod_template(
                    "foo-1",
                    "foo-node",
                    &[],
                    &[(HASH, "value-1"), ("something", "else")],
                ),
                latter: pod_template(
                    "foo-2",
                    "foo-node",
                    &[],
                    &[(HASH, "value-2"), ("something", "else")],
                ),
                expected: false,
            },
            Case {
                name: "Different spec, the former doesn't have pod-template-hash label",
                former: pod_template("foo-1", "foo-node-1", &[], &[("something", "else")]),
                latter: pod_template(
                    "foo-2",
                    "foo-node-2",
                    &[],
                    &[(HASH, "value-2"), ("something", "else")],
                ),
                expected: false,
            },
            Case {
                name: "Different spec, different labels",
                former: pod_template("foo", "foo-node-1", &[], &[("something", "else")]),
                latter: pod_template("foo", "foo-node-2", &[], &[("nothing", "else")]),
                expected: false,
            },
        ];
        for c in cases {
            assert_eq!(
                equal_ignore_hash(&c.former, &c.latter),
                c.expected,
                "{}",
                c.name
            );
            assert_eq!(
                equal_ignore_hash(&c.latter, &c.former),
                c.expected,
                "{} (reverse order)",
                c.name
            );
            // The inputs are borrowed: their labels are untouched.
            assert!(
                c.former
                    .metadata
                    .as_ref()
                    .and_then(|m| m.labels.as_ref())
                    .is_some()
            );
        }
    }

    #[test]
    fn nil_and_empty_collections_are_semantically_equal() {
        struct Case {
            name: &'static str,
            former: PodTemplateSpec,
            latter: PodTemplateSpec,
            expected: bool,
        }
        let container = |args: Option<Vec<String>>| Container {
            name: "c".into(),
            image: Some("nginx".into()),
            args,
            ..Default::default()
        };
        let with = |meta: Option<ObjectMeta>, c: Container| PodTemplateSpec {
            metadata: meta,
            spec: Some(PodSpec {
                containers: vec![c],
                ..Default::default()
            }),
        };
        let cases = [
            Case {
                name: "empty args equals no args",
                former: with(None, container(Some(vec![]))),
                latter: with(None, container(None)),
                expected: true,
            },
            Case {
                name: "only the hash label equals no labels",
                former: with(
                    Some(ObjectMeta {
                        labels: Some(labels(&[(HASH, "abc")])),
                        ..Default::default()
                    }),
                    container(None),
                ),
                latter: with(None, container(None)),
                expected: true,
            },
            Case {
                name: "empty annotations equal no annotations",
                former: with(
                    Some(ObjectMeta {
                        annotations: Some(BTreeMap::new()),
                        ..Default::default()
                    }),
                    container(None),
                ),
                latter: with(Some(ObjectMeta::default()), container(None)),
                expected: true,
            },
            Case {
                name: "empty resources equal no resources",
                former: with(
                    None,
                    Container {
                        resources: Some(Default::default()),
                        ..container(None)
                    },
                ),
                latter: with(None, container(None)),
                expected: true,
            },
            Case {
                name: "different args differ",
                former: with(None, container(Some(vec!["a".into()]))),
                latter: with(None, container(None)),
                expected: false,
            },
        ];
        for c in cases {
            assert_eq!(
                equal_ignore_hash(&c.former, &c.latter),
                c.expected,
                "{}",
                c.name
            );
            assert_eq!(
                equal_ignore_hash(&c.latter, &c.former),
                c.expected,
                "{} (reverse)",
                c.name
            );
        }
    }

    #[test]
    fn label_helpers() {
        let base = labels(&[("app", "x")]);
        assert_eq!(
            clone_and_add_label(Some(&base), HASH, "h"),
            labels(&[("app", "x"), (HASH, "h")])
        );
        assert_eq!(clone_and_add_label(None, HASH, "h"), labels(&[(HASH, "h")]));
        assert_eq!(clone_and_add_label(Some(&base), "", "h"), base);
        let with_hash = labels(&[("app", "x"), (HASH, "h")]);
        assert_eq!(
            clone_and_remove_label(Some(&with_hash), HASH),
            Some(base.clone())
        );
        assert_eq!(clone_and_remove_label(None, HASH), None);
        let sel = clone_selector_and_add_label(
            &LabelSelector {
                match_labels: Some(base.clone()),
                ..Default::default()
            },
            HASH,
            "h",
        );
        assert_eq!(sel.match_labels, Some(with_hash));
    }
}
