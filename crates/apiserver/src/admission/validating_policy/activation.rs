//! The variables a policy's expressions see (upstream's `plugin/cel` activation): `object`, `oldObject`, `request`, `namespaceObject` built once per request, `params` per binding, and `variables` evaluated lazily, each at most once.
//!
//! Not offered: `authorizer` and `authorizer.requestResource` (kcm runs no authorizer an
//! expression could query); an expression naming them does not compile, so its policy's
//! `failurePolicy` decides.

use std::sync::OnceLock;

use cel::ExecutionError;
use cel::common::types::{CelString, DYN_TYPE, Type};
use cel::common::value::{CowVal, Val};
use cel::context::VariableResolver;
use serde_json::{Value, json};

use super::cost::Sizes;
use super::expression::Expression;
use crate::admission::attributes::Attributes;

/// One request's values as CEL values, converted once and shared by every policy.
#[derive(Debug)]
pub struct Inputs {
    object: Box<dyn Val>,
    old_object: Box<dyn Val>,
    request: Box<dyn Val>,
    namespace_object: Box<dyn Val>,
    /// Bounds on the sizes inside the four values.
    sizes: Sizes,
}

/// Converts JSON to a CEL value.
pub fn to_val(value: &Value) -> Box<dyn Val> {
    Box::<dyn Val>::try_from(to_cel(value))
        .unwrap_or_else(|_| Box::new(cel::common::types::CelNull))
}

/// JSON as CEL sees a Kubernetes object: integers are `int` (Kubernetes' integers are
/// int64; serde's conversion would make positive ones `uint`, which CEL will not mix with
/// `int` literals), other numbers `double`.
fn to_cel(value: &Value) -> cel::Value {
    match value {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => cel::Value::Int(i),
            (None, Some(u)) => cel::Value::UInt(u),
            _ => cel::Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => cel::Value::String(std::sync::Arc::new(s.clone())),
        Value::Array(items) => {
            cel::Value::List(std::sync::Arc::new(items.iter().map(to_cel).collect()))
        }
        Value::Object(map) => cel::Value::from(
            map.iter()
                .map(|(k, v)| (k.clone(), to_cel(v)))
                .collect::<std::collections::HashMap<String, cel::Value>>(),
        ),
    }
}

impl Inputs {
    /// The inputs of `a`, with `namespace` the request's namespace object (if any).
    pub fn new(a: &Attributes<'_>, namespace: Option<&Value>) -> Inputs {
        let null = Value::Null;
        let object = a.object.as_ref().unwrap_or(&null);
        let old_object = a.old_object.unwrap_or(&null);
        // Upstream's `request` is the webhook's AdmissionRequest; the policy's has no uid.
        let request = a.admission_request("");
        let namespace_object = namespace.map(namespace_object_of).unwrap_or(Value::Null);
        let sizes = [object, old_object, &request, &namespace_object]
            .into_iter()
            .map(Sizes::of)
            .fold(Sizes::default(), Sizes::max);
        Inputs {
            object: to_val(object),
            old_object: to_val(old_object),
            request: to_val(&request),
            namespace_object: to_val(&namespace_object),
            sizes,
        }
    }
}

/// `namespaceObject`: the namespace's metadata (without managed fields), spec and status,
/// as upstream's `CreateNamespaceObject`.
fn namespace_object_of(ns: &Value) -> Value {
    let mut metadata = ns.get("metadata").cloned().unwrap_or_else(|| json!({}));
    if let Some(m) = metadata.as_object_mut() {
        m.remove("managedFields");
        m.remove("ownerReferences");
        m.remove("finalizers");
    }
    json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": metadata,
        "spec": ns.get("spec").cloned().unwrap_or_else(|| json!({})),
        "status": ns.get("status").cloned().unwrap_or_else(|| json!({})),
    })
}

/// One policy evaluation: the request's inputs, one param, and the policy's variables,
/// each evaluated on first use and remembered.
#[derive(Debug)]
pub struct Activation<'a> {
    inputs: &'a Inputs,
    /// `params`: the param object, or null.
    params: Box<dyn Val>,
    /// The policy's variables, in order.
    variables: &'a [(String, Expression)],
    /// Each variable's value once evaluated (index-aligned with `variables`).
    memo: Vec<OnceLock<Result<Box<dyn Val>, ExecutionError>>>,
    /// The inputs' sizes with the param's.
    sizes: Sizes,
}

impl<'a> Activation<'a> {
    /// An activation over `inputs` with `params` (null when none).
    pub fn new(
        inputs: &'a Inputs,
        params: Option<&Value>,
        variables: &'a [(String, Expression)],
    ) -> Activation<'a> {
        let sizes = params.map_or(inputs.sizes, |p| inputs.sizes.max(Sizes::of(p)));
        Activation {
            inputs,
            params: params.map_or_else(|| to_val(&Value::Null), to_val),
            variables,
            memo: variables.iter().map(|_| OnceLock::new()).collect(),
            sizes,
        }
    }

    /// The scope a policy's validations see: every variable.
    pub fn scope(&self) -> Scope<'_> {
        Scope {
            activation: self,
            visible: self.variables.len(),
        }
    }

    /// The value of variable `index`, evaluated now if not yet.
    fn variable(&self, index: usize) -> Result<&dyn Val, ExecutionError> {
        let slot = self.memo[index].get_or_init(|| {
            // A variable sees only the variables declared before it, so this never
            // re-enters its own slot.
            let scope = Scope {
                activation: self,
                visible: index,
            };
            let (name, expression) = &self.variables[index];
            match expression.evaluate(&scope, self.sizes) {
                Ok(value) => Box::<dyn Val>::try_from(value),
                Err(e) => Err(ExecutionError::function_error(
                    &format!("variables.{name}"),
                    e,
                )),
            }
        });
        match slot {
            Ok(value) => Ok(value.as_ref()),
            Err(e) => Err(e.clone()),
        }
    }
}

/// The variables one expression resolves: the activation, with the variables it may see.
#[derive(Debug)]
pub struct Scope<'a> {
    activation: &'a Activation<'a>,
    /// How many of the policy's variables (from the first) are visible.
    visible: usize,
}

impl Scope<'_> {
    /// Bounds on every size the expression can see.
    pub fn sizes(&self) -> Sizes {
        self.activation.sizes
    }
}

impl VariableResolver for Scope<'_> {
    fn resolve<'b>(&'b self, variable: &str) -> Option<CowVal<'b, 'b>> {
        let inputs = self.activation.inputs;
        let value: &'b dyn Val = match variable {
            "object" => inputs.object.as_ref(),
            "oldObject" => inputs.old_object.as_ref(),
            "request" => inputs.request.as_ref(),
            "namespaceObject" => inputs.namespace_object.as_ref(),
            "params" => self.activation.params.as_ref(),
            "variables" => {
                return Some(CowVal::owned(Variables {
                    activation: self.activation,
                    visible: self.visible,
                }));
            }
            _ => return None,
        };
        Some(CowVal::Borrowed(value))
    }
}

/// `variables`: a map whose entries are evaluated when first read.
#[derive(Debug, Clone, Copy)]
struct Variables<'a> {
    activation: &'a Activation<'a>,
    visible: usize,
}

impl<'a> Variables<'a> {
    fn lookup(&self, key: &dyn Val) -> Result<&'a dyn Val, ExecutionError> {
        let name = key
            .downcast_ref::<CelString>()
            .map(|s| s.inner().to_owned())
            .ok_or_else(|| ExecutionError::function_error("variables", "key is not a string"))?;
        let index = self.activation.variables[..self.visible]
            .iter()
            .position(|(n, _)| *n == name)
            .ok_or_else(|| ExecutionError::no_such_key(&name))?;
        self.activation.variable(index)
    }
}

impl Val for Variables<'_> {
    fn get_type(&self) -> &Type {
        &DYN_TYPE
    }

    fn cel_type() -> &'static Type {
        &DYN_TYPE
    }

    fn as_indexer<'b, 'v>(&'b self) -> Option<&'b (dyn cel::common::traits::Indexer + 'v)>
    where
        Self: 'v,
    {
        Some(self)
    }

    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v>
    where
        Self: 'v,
    {
        Box::new(*self)
    }
}

impl cel::common::traits::Indexer for Variables<'_> {
    fn get<'b, 'v>(&'b self, idx: &dyn Val) -> Result<CowVal<'b, 'v>, ExecutionError>
    where
        Self: 'v,
    {
        Ok(CowVal::Borrowed(self.lookup(idx)?))
    }

    fn steal<'v>(self: Box<Self>, idx: &dyn Val) -> Result<Box<dyn Val + 'v>, ExecutionError>
    where
        Self: 'v,
    {
        Ok(self.lookup(idx)?.clone_as_boxed())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::admission::attributes::Operation;
    use crate::admission::validating_policy::expression::Declarations;
    use crate::auth::user::UserInfo;
    use crate::resources::apps::DEPLOYMENTS;

    fn compile(source: &str, variables: &[&str]) -> Expression {
        let decls = Declarations {
            params: true,
            authorizer: false,
            namespaces: &[],
            variables: variables.iter().map(|v| (*v).to_owned()).collect(),
            growth: Vec::new(),
        };
        Expression::compile(source, &decls).expect("compiles")
    }

    #[test]
    fn expressions_see_the_request_and_lazy_variables() {
        let user = UserInfo::admin();
        let deployment = json!({"metadata": {"name": "web", "namespace": "prod",
            "labels": {"app": "web"}}, "spec": {"replicas": 7}});
        let a = Attributes::new(
            Operation::Create,
            &DEPLOYMENTS,
            "prod",
            "web",
            Some(deployment),
            &user,
        );
        let ns = json!({"metadata": {"name": "prod", "labels": {"env": "prod"},
            "managedFields": [{}]}, "spec": {"finalizers": ["kubernetes"]}});
        let inputs = Inputs::new(&a, Some(&ns));
        let variables = vec![
            ("replicas".to_owned(), compile("object.spec.replicas", &[])),
            (
                "tooMany".to_owned(),
                compile("variables.replicas > params.max", &["replicas"]),
            ),
            ("broken".to_owned(), compile("object.spec.nope", &[])),
        ];
        let params = json!({"max": 5});
        let activation = Activation::new(&inputs, Some(&params), &variables);
        let names = ["replicas", "tooMany", "broken"];
        let eval =
            |source: &str| compile(source, &names).evaluate(&activation.scope(), activation.sizes);
        let cases: &[(&str, cel::Value)] = &[
            ("variables.tooMany", cel::Value::Bool(true)),
            ("variables.replicas == 7", cel::Value::Bool(true)),
            ("request.operation == 'CREATE'", cel::Value::Bool(true)),
            (
                "request.kind.group == 'apps' && request.resource.resource == 'deployments'",
                cel::Value::Bool(true),
            ),
            (
                "request.userInfo.username == 'kubernetes-admin'",
                cel::Value::Bool(true),
            ),
            ("oldObject == null", cel::Value::Bool(true)),
            (
                "namespaceObject.metadata.labels.env == 'prod' && !has(namespaceObject.metadata.managedFields)",
                cel::Value::Bool(true),
            ),
        ];
        for (source, want) in cases {
            assert_eq!(eval(source).as_ref(), Ok(want), "{source}");
        }
        // A variable that fails fails only the expressions that read it.
        let err = eval("variables.broken == 1").expect_err("no such key");
        assert!(err.to_string().contains("nope"), "{err}");
        assert_eq!(eval("variables.replicas"), Ok(cel::Value::Int(7)));
    }

    #[test]
    fn a_variable_cannot_see_itself_or_later_ones() {
        let user = UserInfo::admin();
        let a = Attributes::new(
            Operation::Create,
            &DEPLOYMENTS,
            "prod",
            "web",
            Some(json!({})),
            &user,
        );
        let inputs = Inputs::new(&a, None);
        // Indexing bypasses the compile-time check; the scope still hides the variable.
        let variables = vec![("me".to_owned(), compile("variables['me']", &["me"]))];
        let activation = Activation::new(&inputs, None, &variables);
        let err = compile("variables.me", &["me"])
            .evaluate(&activation.scope(), activation.sizes)
            .expect_err("self reference");
        assert!(err.to_string().contains("no such key: me"), "{err}");
    }
}
