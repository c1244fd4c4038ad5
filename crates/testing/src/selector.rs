//! Label selectors: [`selector`] for the usual `matchLabels`, [`label_selector`] for expressions.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use crate::meta::labels;

/// A selector matching exactly `pairs` (`matchLabels` only).
pub fn selector(pairs: &[(&str, &str)]) -> LabelSelector {
    LabelSelector {
        match_labels: Some(labels(pairs)),
        match_expressions: None,
    }
}

/// Builds a [`LabelSelector`] with expressions; starts empty (selects everything).
#[derive(Clone, Debug, Default)]
pub struct SelectorBuilder {
    selector: LabelSelector,
}

/// An empty selector to add labels and expressions to.
pub fn label_selector() -> SelectorBuilder {
    SelectorBuilder::default()
}

impl SelectorBuilder {
    /// Adds `key=value` to `matchLabels`.
    pub fn match_label(mut self, key: &str, value: &str) -> Self {
        self.selector
            .match_labels
            .get_or_insert_default()
            .insert(key.to_owned(), value.to_owned());
        self
    }

    /// Adds a `matchExpressions` requirement (`operator` is `In`, `NotIn`, `Exists` or
    /// `DoesNotExist`; no values leaves `values` unset).
    pub fn expression(mut self, key: &str, operator: &str, values: &[&str]) -> Self {
        self.selector
            .match_expressions
            .get_or_insert_default()
            .push(LabelSelectorRequirement {
                key: key.to_owned(),
                operator: operator.to_owned(),
                values: (!values.is_empty())
                    .then(|| values.iter().map(|v| (*v).to_owned()).collect()),
            });
        self
    }

    /// The selector.
    pub fn build(self) -> LabelSelector {
        self.selector
    }
}

from_builder!(SelectorBuilder => LabelSelector);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selector_sets_match_labels_only() {
        let s = selector(&[("app", "web")]);
        assert_eq!(s.match_labels, Some(labels(&[("app", "web")])));
        assert_eq!(s.match_expressions, None);
    }

    #[test]
    fn builder_starts_empty_and_adds_expressions() {
        assert_eq!(label_selector().build(), LabelSelector::default());
        let s = label_selector()
            .match_label("a", "1")
            .expression("tier", "In", &["web", "db"])
            .expression("gone", "DoesNotExist", &[])
            .build();
        assert_eq!(s.match_labels, Some(labels(&[("a", "1")])));
        let exprs = s.match_expressions.unwrap_or_default();
        assert_eq!(exprs.len(), 2);
        assert_eq!(exprs[0].values, Some(vec!["web".into(), "db".into()]));
        assert_eq!(exprs[1].values, None);
    }
}
