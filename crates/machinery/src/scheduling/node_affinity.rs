//! A pod's required node affinity matched against a node, as upstream's `nodeaffinity.RequiredNodeAffinity` and `LazyErrorNodeSelector`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeSelector, NodeSelectorRequirement, Pod};

use crate::labels::{Operator, Requirement};

/// The one node field a node selector term may match on (`matchFields`), as apimachinery's
/// `metav1.ObjectNameField`.
pub const NODE_NAME_FIELD: &str = "metadata.name";

/// Why a node selector term does not parse. The term then matches no node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A `matchExpressions` requirement is not a valid label requirement.
    #[error("{path}: {source}")]
    Expression {
        /// The field path of the requirement, e.g. `nodeSelectorTerms[0].matchExpressions[1]`.
        path: String,
        /// The label-selector error.
        #[source]
        source: crate::labels::Error,
    },
    /// A `matchFields` requirement names a field other than `metadata.name`.
    #[error("{path}.key: Invalid value: {key:?}: not a valid field selector key")]
    FieldKey {
        /// The field path of the requirement.
        path: String,
        /// The key given.
        key: String,
    },
    /// A `matchFields` requirement does not have exactly one value.
    #[error("{path}.values: Invalid value: {count}: must have one element")]
    FieldValues {
        /// The field path of the requirement.
        path: String,
        /// How many values it has.
        count: usize,
    },
    /// A `matchFields` or `matchExpressions` operator that is not supported.
    #[error("{path}.operator: Invalid value: {operator:?}: not a valid selector operator")]
    Operator {
        /// The field path of the requirement.
        path: String,
        /// The operator given.
        operator: String,
    },
}

/// One parsed `nodeSelectorTerms` entry: its label requirements and its `metadata.name`
/// requirements (`(name, in)`: `In` when true, `NotIn` when false), all of which must hold.
#[derive(Clone, Debug)]
struct Term {
    labels: Vec<Requirement>,
    fields: Vec<(String, bool)>,
}

impl Term {
    fn matches(&self, labels: &BTreeMap<String, String>, node_name: &str) -> bool {
        self.labels.iter().all(|r| r.matches(labels))
            && self
                .fields
                .iter()
                .all(|(name, is_in)| (name == node_name) == *is_in)
    }
}

/// A node selector parsed once, matched against many nodes, as upstream's
/// `LazyErrorNodeSelector`: terms are ORed; an empty term, or one that does not parse,
/// matches nothing (the parse errors are kept, not raised).
#[derive(Clone, Debug, Default)]
pub struct ParsedNodeSelector {
    terms: Vec<Term>,
    errors: Vec<Error>,
}

impl ParsedNodeSelector {
    /// Parses `selector`'s terms.
    pub fn new(selector: &NodeSelector) -> Self {
        let mut parsed = Self::default();
        for (i, term) in selector.node_selector_terms.iter().enumerate() {
            let exprs = term.match_expressions.as_deref().unwrap_or(&[]);
            let fields = term.match_fields.as_deref().unwrap_or(&[]);
            if exprs.is_empty() && fields.is_empty() {
                continue;
            }
            let path = format!("nodeSelectorTerms[{i}]");
            match parse_term(exprs, fields, &path) {
                Ok(t) => parsed.terms.push(t),
                Err(e) => parsed.errors.push(e),
            }
        }
        parsed
    }

    /// Whether any term matches `node`.
    pub fn matches(&self, node: &Node) -> bool {
        let empty = BTreeMap::new();
        let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
        let name = node.metadata.name.as_deref().unwrap_or_default();
        self.terms.iter().any(|t| t.matches(labels, name))
    }

    /// The parse errors of the terms that were dropped.
    pub fn errors(&self) -> &[Error] {
        &self.errors
    }
}

fn parse_term(
    exprs: &[NodeSelectorRequirement],
    fields: &[NodeSelectorRequirement],
    path: &str,
) -> Result<Term, Error> {
    let mut term = Term {
        labels: Vec::with_capacity(exprs.len()),
        fields: Vec::with_capacity(fields.len()),
    };
    for (j, expr) in exprs.iter().enumerate() {
        let path = format!("{path}.matchExpressions[{j}]");
        let operator = match expr.operator.as_str() {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            "Gt" => Operator::GreaterThan,
            "Lt" => Operator::LessThan,
            other => {
                return Err(Error::Operator {
                    path,
                    operator: other.to_owned(),
                });
            }
        };
        let values = expr.values.clone().unwrap_or_default();
        let requirement = Requirement::new(expr.key.clone(), operator, values)
            .map_err(|source| Error::Expression { path, source })?;
        term.labels.push(requirement);
    }
    for (j, field) in fields.iter().enumerate() {
        let path = format!("{path}.matchFields[{j}]");
        if field.key != NODE_NAME_FIELD {
            return Err(Error::FieldKey {
                path,
                key: field.key.clone(),
            });
        }
        let is_in = match field.operator.as_str() {
            "In" => true,
            "NotIn" => false,
            other => {
                return Err(Error::Operator {
                    path,
                    operator: other.to_owned(),
                });
            }
        };
        let values = field.values.as_deref().unwrap_or(&[]);
        let [value] = values else {
            return Err(Error::FieldValues {
                path,
                count: values.len(),
            });
        };
        term.fields.push((value.clone(), is_in));
    }
    Ok(term)
}

/// A pod's hard node constraints: its `nodeSelector` and its required node affinity, as
/// upstream's `RequiredNodeAffinity` (from `GetRequiredNodeAffinity`).
#[derive(Clone, Debug, Default)]
pub struct RequiredNodeAffinity {
    /// `spec.nodeSelector`; `None` when empty.
    node_selector: Option<BTreeMap<String, String>>,
    /// The required node affinity; `None` when the pod has none.
    required: Option<ParsedNodeSelector>,
}

impl RequiredNodeAffinity {
    /// The constraints of `pod`.
    pub fn of(pod: &Pod) -> Self {
        let spec = pod.spec.as_ref();
        let node_selector = spec
            .and_then(|s| s.node_selector.clone())
            .filter(|s| !s.is_empty());
        let required = spec
            .and_then(|s| s.affinity.as_ref())
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|na| {
                na.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .map(ParsedNodeSelector::new);
        Self {
            node_selector,
            required,
        }
    }

    /// Whether `node` satisfies both, as upstream's `RequiredNodeAffinity.Match` with parse
    /// errors ignored (a term that does not parse matches nothing).
    pub fn matches(&self, node: &Node) -> bool {
        if let Some(selector) = &self.node_selector {
            let labels = node.metadata.labels.as_ref();
            let fits = selector
                .iter()
                .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v));
            if !fits {
                return false;
            }
        }
        self.required.as_ref().is_none_or(|r| r.matches(node))
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Affinity, NodeAffinity, NodeSelectorTerm, PodSpec};
    use kcm_testing::{MetaBuilder, node};

    use super::*;

    fn req(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| (*v).into()).collect()),
        }
    }

    fn pod_with(node_selector: &[(&str, &str)], terms: Option<Vec<NodeSelectorTerm>>) -> Pod {
        Pod {
            spec: Some(PodSpec {
                node_selector: (!node_selector.is_empty()).then(|| {
                    node_selector
                        .iter()
                        .map(|(k, v)| ((*k).into(), (*v).into()))
                        .collect()
                }),
                affinity: terms.map(|terms| Affinity {
                    node_affinity: Some(NodeAffinity {
                        required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                            node_selector_terms: terms,
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn term(
        exprs: Vec<NodeSelectorRequirement>,
        fields: Vec<NodeSelectorRequirement>,
    ) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: (!exprs.is_empty()).then_some(exprs),
            match_fields: (!fields.is_empty()).then_some(fields),
        }
    }

    /// Upstream's `TestRequiredNodeAffinity` and `TestNodeSelectorMatch` cases that matter.
    #[test]
    fn required_node_affinity_table() {
        struct Case {
            name: &'static str,
            pod: Pod,
            want: bool,
        }
        let cases = vec![
            Case {
                name: "no constraints",
                pod: pod_with(&[], None),
                want: true,
            },
            Case {
                name: "nodeSelector matches",
                pod: pod_with(&[("zone", "a")], None),
                want: true,
            },
            Case {
                name: "nodeSelector does not match",
                pod: pod_with(&[("zone", "b")], None),
                want: false,
            },
            Case {
                name: "no terms matches nothing",
                pod: pod_with(&[], Some(vec![])),
                want: false,
            },
            Case {
                name: "an empty term matches nothing",
                pod: pod_with(&[], Some(vec![term(vec![], vec![])])),
                want: false,
            },
            Case {
                name: "In on a label",
                pod: pod_with(
                    &[],
                    Some(vec![term(vec![req("zone", "In", &["a", "c"])], vec![])]),
                ),
                want: true,
            },
            Case {
                name: "NotIn matches a missing label",
                pod: pod_with(
                    &[],
                    Some(vec![term(vec![req("gpu", "NotIn", &["yes"])], vec![])]),
                ),
                want: true,
            },
            Case {
                name: "DoesNotExist fails on a present label",
                pod: pod_with(
                    &[],
                    Some(vec![term(vec![req("zone", "DoesNotExist", &[])], vec![])]),
                ),
                want: false,
            },
            Case {
                name: "Gt compares integers",
                pod: pod_with(
                    &[],
                    Some(vec![term(vec![req("cores", "Gt", &["3"])], vec![])]),
                ),
                want: true,
            },
            Case {
                name: "Lt compares integers",
                pod: pod_with(
                    &[],
                    Some(vec![term(vec![req("cores", "Lt", &["3"])], vec![])]),
                ),
                want: false,
            },
            Case {
                name: "matchFields metadata.name In",
                pod: pod_with(
                    &[],
                    Some(vec![term(
                        vec![],
                        vec![req(NODE_NAME_FIELD, "In", &["n1"])],
                    )]),
                ),
                want: true,
            },
            Case {
                name: "matchFields metadata.name In another node",
                pod: pod_with(
                    &[],
                    Some(vec![term(
                        vec![],
                        vec![req(NODE_NAME_FIELD, "In", &["n2"])],
                    )]),
                ),
                want: false,
            },
            Case {
                name: "matchFields NotIn",
                pod: pod_with(
                    &[],
                    Some(vec![term(
                        vec![],
                        vec![req(NODE_NAME_FIELD, "NotIn", &["n2"])],
                    )]),
                ),
                want: true,
            },
            Case {
                name: "matchFields with two values does not parse",
                pod: pod_with(
                    &[],
                    Some(vec![term(
                        vec![],
                        vec![req(NODE_NAME_FIELD, "In", &["n1", "n2"])],
                    )]),
                ),
                want: false,
            },
            Case {
                name: "matchFields on another field does not parse",
                pod: pod_with(
                    &[],
                    Some(vec![term(vec![], vec![req("metadata.uid", "In", &["n1"])])]),
                ),
                want: false,
            },
            Case {
                name: "terms are ORed; a bad term is skipped",
                pod: pod_with(
                    &[],
                    Some(vec![
                        term(vec![req("zone", "Bogus", &["a"])], vec![]),
                        term(vec![req("zone", "In", &["a"])], vec![]),
                    ]),
                ),
                want: true,
            },
            Case {
                name: "expressions and fields of one term are ANDed",
                pod: pod_with(
                    &[],
                    Some(vec![term(
                        vec![req("zone", "In", &["a"])],
                        vec![req(NODE_NAME_FIELD, "In", &["n2"])],
                    )]),
                ),
                want: false,
            },
            Case {
                name: "nodeSelector and affinity are ANDed",
                pod: pod_with(
                    &[("zone", "b")],
                    Some(vec![term(vec![req("zone", "In", &["a"])], vec![])]),
                ),
                want: false,
            },
        ];
        let n = node("n1").labels(&[("zone", "a"), ("cores", "4")]).build();
        for c in cases {
            assert_eq!(
                RequiredNodeAffinity::of(&c.pod).matches(&n),
                c.want,
                "{}",
                c.name
            );
        }
    }

    #[test]
    fn parse_errors_are_kept() {
        let selector = NodeSelector {
            node_selector_terms: vec![term(vec![], vec![req("spec.x", "In", &["a"])])],
        };
        let parsed = ParsedNodeSelector::new(&selector);
        assert_eq!(parsed.errors().len(), 1);
        assert!(
            parsed.errors()[0]
                .to_string()
                .contains("not a valid field selector key")
        );
    }
}
