//! The type check of a ValidatingAdmissionPolicy, as upstream's `validating.TypeChecker`: each validation's `expression` and `messageExpression` checked against the schema of every kind the policy's `matchConstraints` name, each failure an `ExpressionWarning`.
//!
//! [`TypeChecker::check`] resolves the kinds ([`types_to_check`]: exact groups, versions and
//! resources only, subresources skipped, at most 10 kinds, sorted), asks the
//! [`SchemaSource`] for each kind's OpenAPI v3 schema (a kind without one is skipped, as
//! upstream), types `object`/`oldObject` by it and `params` by the `paramKind`'s schema,
//! checks the `spec.variables` in order, then each expression ([`checker`]). The warning of
//! an expression lists, per kind that fails, `<group>/<version>, Kind=<kind>: ` and cel-go's
//! errors.

pub mod checker;
pub mod types;

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::admissionregistration::v1::{ExpressionWarning, ValidatingAdmissionPolicy};
use serde_json::Value;

use checker::{Declarations, check};
use types::{Components, Ty};

/// Upstream's `maxTypesToCheck`.
pub const MAX_TYPES_TO_CHECK: usize = 10;

/// A group, version and kind; displayed as Go's `schema.GroupVersionKind.String()`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Gvk {
    /// The API group (`""` for core).
    pub group: String,
    /// The version.
    pub version: String,
    /// The kind.
    pub kind: String,
}

impl fmt::Display for Gvk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}, Kind={}", self.group, self.version, self.kind)
    }
}

/// A kind's schema: the root schema and the components its `$ref`s point into.
#[derive(Clone, Debug)]
pub struct KindSchema {
    /// The document's component schemas.
    pub components: Arc<Components>,
    /// The kind's own schema.
    pub schema: Value,
}

/// Where the checker learns kinds and schemas: discovery and `/openapi/v3`, as upstream's
/// RESTMapper and schema resolver.
#[async_trait]
pub trait SchemaSource: Send + Sync {
    /// The kind `resource` of `group`/`version` is served as; `None` when it is not served.
    async fn kind_for(&self, group: &str, version: &str, resource: &str) -> Option<String>;

    /// The schema of `gvk`; `None` when the server publishes none.
    async fn schema_for(&self, gvk: &Gvk) -> Option<KindSchema>;
}

/// Type-checks policies against the schemas of a [`SchemaSource`].
pub struct TypeChecker {
    /// Kinds and schemas.
    source: Arc<dyn SchemaSource>,
}

impl fmt::Debug for TypeChecker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypeChecker").finish_non_exhaustive()
    }
}

/// The resolved types of a policy: one `object` type per kind, and `params`' when declared.
struct Context {
    /// Each kind checked, with its root type.
    kinds: Vec<(Gvk, Ty)>,
    /// `params`' type when the `paramKind` has a schema (else `params` is undeclared, as
    /// upstream).
    params: Option<Ty>,
}

impl TypeChecker {
    /// A checker over `source`.
    pub fn new(source: Arc<dyn SchemaSource>) -> Self {
        Self { source }
    }

    /// The warnings for `policy`, in `spec.validations` order (each validation's
    /// `expression`, then its `messageExpression`); empty when every expression checks.
    pub async fn check(&self, policy: &ValidatingAdmissionPolicy) -> Vec<ExpressionWarning> {
        let context = self.context(policy).await;
        let Some(spec) = &policy.spec else {
            return Vec::new();
        };
        let variables = spec.variables.as_deref().unwrap_or_default();
        let mut per_kind = Vec::with_capacity(context.kinds.len());
        for (gvk, object) in &context.kinds {
            let mut decls = Declarations::default();
            decls.declare("object", object.clone());
            decls.declare("oldObject", object.clone());
            // The request and namespace types are hand-built upstream; kcm leaves them dyn.
            decls.declare("request", Ty::Dyn);
            decls.declare("namespaceObject", Ty::Dyn);
            decls.declare("authorizer", Ty::Dyn);
            if let Some(params) = &context.params {
                decls.declare("params", params.clone());
            }
            // Each variable sees the ones before it; one that does not check is dyn.
            let mut declared: Vec<(String, Ty)> = Vec::with_capacity(variables.len());
            for variable in variables {
                decls.declare("variables", Ty::Record(Arc::new(declared.clone())));
                let ty = check(&variable.expression, &decls).unwrap_or(Ty::Dyn);
                declared.push((variable.name.clone(), ty));
            }
            decls.declare("variables", Ty::Record(Arc::new(declared)));
            per_kind.push((gvk, decls));
        }
        let check_all = |expression: &str| -> Option<String> {
            let results: Vec<String> = per_kind
                .iter()
                .filter_map(|(gvk, decls)| {
                    check(expression, decls)
                        .err()
                        .map(|issues| format!("{gvk}: {issues}\n"))
                })
                .collect();
            (!results.is_empty()).then(|| results.join("\n"))
        };
        let mut warnings = Vec::new();
        for (i, validation) in spec.validations.iter().flatten().enumerate() {
            if let Some(warning) = check_all(&validation.expression) {
                warnings.push(ExpressionWarning {
                    field_ref: format!("spec.validations[{i}].expression"),
                    warning,
                });
            }
            let Some(message) = validation
                .message_expression
                .as_deref()
                .filter(|m| !m.is_empty())
            else {
                continue;
            };
            if let Some(warning) = check_all(message) {
                warnings.push(ExpressionWarning {
                    field_ref: format!("spec.validations[{i}].messageExpression"),
                    warning,
                });
            }
        }
        warnings
    }

    /// Resolves the kinds to check and their types, as upstream's `CreateContext`.
    async fn context(&self, policy: &ValidatingAdmissionPolicy) -> Context {
        let mut kinds = Vec::new();
        for gvk in types_to_check(policy, self.source.as_ref()).await {
            if let Some(schema) = self.source.schema_for(&gvk).await {
                let ty = Ty::resource(schema.components, &schema.schema, &gvk.kind);
                kinds.push((gvk, ty));
            }
        }
        let params = match policy.spec.as_ref().and_then(|s| s.param_kind.as_ref()) {
            Some(param_kind) => {
                let (group, version) = split_api_version(param_kind.api_version.as_deref());
                match param_kind.kind.as_deref() {
                    Some(kind) if !version.is_empty() && !kind.is_empty() => {
                        let gvk = Gvk {
                            group: group.to_owned(),
                            version: version.to_owned(),
                            kind: kind.to_owned(),
                        };
                        self.source
                            .schema_for(&gvk)
                            .await
                            .map(|s| Ty::resource(s.components, &s.schema, kind))
                    }
                    _ => None,
                }
            }
            None => None,
        };
        Context { kinds, params }
    }
}

/// `apiVersion` as group and version (`v1` is the core group's).
fn split_api_version(api_version: Option<&str>) -> (&str, &str) {
    match api_version.unwrap_or_default().split_once('/') {
        Some((group, version)) => (group, version),
        None => ("", api_version.unwrap_or_default()),
    }
}

/// The kinds `policy` is checked against, as upstream's `typesToCheck`: for each resource
/// rule with no wildcard group or version, every group × version × resource (wildcard and
/// subresource entries skipped) resolved to its kind, at most [`MAX_TYPES_TO_CHECK`], sorted
/// by group, version and kind.
pub async fn types_to_check(
    policy: &ValidatingAdmissionPolicy,
    source: &dyn SchemaSource,
) -> Vec<Gvk> {
    let rules = policy
        .spec
        .as_ref()
        .and_then(|s| s.match_constraints.as_ref())
        .and_then(|m| m.resource_rules.as_deref())
        .unwrap_or_default();
    let mut gvks = std::collections::BTreeSet::new();
    let mut count = 0;
    for rule in rules {
        let exact = |values: &Option<Vec<String>>| -> Option<Vec<String>> {
            let values = values.as_deref().unwrap_or_default();
            if values.is_empty() || values.iter().any(|v| v.contains('*')) {
                return None;
            }
            let mut values = values.to_vec();
            values.sort();
            Some(values)
        };
        let (Some(groups), Some(versions)) = (exact(&rule.api_groups), exact(&rule.api_versions))
        else {
            continue;
        };
        let mut resources: Vec<&String> = rule
            .resources
            .iter()
            .flatten()
            .filter(|r| !r.contains('*') && !r.contains('/'))
            .collect();
        resources.sort();
        for group in &groups {
            for version in &versions {
                for resource in &resources {
                    let Some(kind) = source.kind_for(group, version, resource).await else {
                        continue;
                    };
                    gvks.insert(Gvk {
                        group: group.clone(),
                        version: version.clone(),
                        kind,
                    });
                    count += 1;
                    if count == MAX_TYPES_TO_CHECK {
                        return gvks.into_iter().collect();
                    }
                }
            }
        }
    }
    gvks.into_iter().collect()
}

#[cfg(test)]
#[path = "typecheck_tests.rs"]
mod tests;
