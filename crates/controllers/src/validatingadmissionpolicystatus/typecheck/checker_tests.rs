use std::sync::Arc;

use serde_json::{Value, json};

use super::super::types::{Components, Ty};
use super::*;

/// A Deployment-like schema: `spec.replicas` (int), `spec.template.spec.containers[]`
/// with `image` (string) and `ports[].containerPort` (int), `metadata.labels` (map).
fn deployment_decls() -> Declarations {
    let Value::Object(schemas) = json!({
        "Deployment": {"type": "object", "properties": {
            "metadata": {"$ref": "#/components/schemas/ObjectMeta"},
            "spec": {"allOf": [{"$ref": "#/components/schemas/DeploymentSpec"}]},
        }},
        "ObjectMeta": {"type": "object", "properties": {
            "name": {"type": "string"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "creationTimestamp": {"type": "string", "format": "date-time"},
        }},
        "DeploymentSpec": {"type": "object", "properties": {
            "replicas": {"type": "integer", "format": "int32"},
            "template": {"type": "object", "properties": {
                "spec": {"type": "object", "properties": {
                    "containers": {"type": "array", "items": {"type": "object", "properties": {
                        "image": {"type": "string"},
                        "ports": {"type": "array", "items": {"type": "object", "properties": {
                            "containerPort": {"type": "integer"},
                        }}},
                    }}},
                }},
            }},
        }},
    }) else {
        unreachable!()
    };
    let components = Arc::new(Components::from_schemas(schemas));
    let root = components.schemas()["Deployment"].clone();
    let object = Ty::resource(components, &root, "Deployment");
    let mut decls = Declarations::default();
    decls.declare("object", object.clone());
    decls.declare("oldObject", object);
    decls.declare("request", Ty::Dyn);
    decls.declare("namespaceObject", Ty::Dyn);
    decls.declare("authorizer", Ty::Dyn);
    decls
}

fn error_of(expression: &str) -> String {
    match check(expression, &deployment_decls()) {
        Err(e) => e,
        Ok(ty) => panic!("{expression} checked as {ty}"),
    }
}

#[test]
fn well_typed_expressions_have_no_issues() {
    let decls = deployment_decls();
    for (expression, want) in [
        ("object.spec.replicas > 1", "bool"),
        ("object.spec.replicas > 1.5", "bool"),
        ("object.spec.replicas + 1", "int"),
        ("'replicas: ' + string(object.spec.replicas)", "string"),
        ("object.metadata.labels['app'] == 'web'", "bool"),
        ("'app' in object.metadata.labels", "bool"),
        ("has(object.spec.replicas)", "bool"),
        ("size(object.spec.template.spec.containers) < 3", "bool"),
        (
            "object.spec.template.spec.containers.all(c, c.image.startsWith('registry/'))",
            "bool",
        ),
        (
            "object.spec.template.spec.containers.map(c, c.image)",
            "list(string)",
        ),
        (
            "object.spec.template.spec.containers.exists(c, c.ports.exists_one(p, p.containerPort == 80))",
            "bool",
        ),
        ("object.spec.replicas > 1 ? 'many' : 'one'", "string"),
        ("request.userInfo.username == 'admin'", "bool"),
        ("request.anything > '1'", "bool"),
        (
            "object.metadata.creationTimestamp < timestamp('2020-01-01T00:00:00Z')",
            "bool",
        ),
        ("type(object.spec.replicas) == int", "bool"),
        (
            "object.kind == 'Deployment' && object.apiVersion != ''",
            "bool",
        ),
    ] {
        match check(expression, &decls) {
            Ok(ty) => assert_eq!(ty.to_string(), want, "{expression}"),
            Err(e) => panic!("{expression}: {e}"),
        }
    }
}

#[test]
fn overload_errors_read_as_cel_go_renders_them() {
    assert_eq!(
        error_of("object.spec.replicas > '1'"),
        "ERROR: <input>:1:22: found no matching overload for '_>_' applied to '(int, string)'\n | object.spec.replicas > '1'\n | .....................^"
    );
    let e = error_of("'wants replicas > 1, got ' + object.spec.replicas");
    assert!(
        e.contains("found no matching overload for '_+_' applied to '(string, int)'"),
        "{e}"
    );
    assert!(e.starts_with("ERROR: <input>:1:28: "), "{e}");
    assert!(
        error_of("!object.spec.replicas")
            .contains("found no matching overload for '!_' applied to '(int)'")
    );
    assert!(
        error_of("object.spec.replicas && true")
            .contains("found no matching overload for '_&&_' applied to '(int, bool)'")
    );
    assert!(
        error_of("object.spec.template.spec.containers.all(c, c.image > 1)")
            .contains("found no matching overload for '_>_' applied to '(string, int)'")
    );
}

#[test]
fn undefined_fields_and_references_are_reported() {
    assert_eq!(
        error_of("object.spec.maxRetries < 10"),
        "ERROR: <input>:1:12: undefined field 'maxRetries'\n | object.spec.maxRetries < 10\n | ...........^"
    );
    assert!(error_of("has(object.spec.nope)").contains("undefined field 'nope'"));
    assert!(
        error_of("params.limit > 1").contains("undeclared reference to 'params' (in container '')")
    );
    assert!(
        error_of("object.spec.replicas.value > 1")
            .contains("type 'int' does not support field selection")
    );
}

#[test]
fn every_issue_is_reported_in_source_order_and_errors_do_not_cascade() {
    let e = error_of("object.spec.nope > 1 || object.spec.replicas > 'x'");
    let lines: Vec<&str> = e.lines().filter(|l| l.starts_with("ERROR")).collect();
    assert_eq!(lines.len(), 2, "{e}");
    assert!(lines[0].contains("undefined field 'nope'"), "{e}");
    assert!(lines[1].contains("'_>_' applied to '(int, string)'"), "{e}");
}

#[test]
fn a_syntax_error_is_left_to_the_compiler() {
    assert!(check("object.spec.replicas >", &deployment_decls()).is_ok());
}

#[test]
fn multi_line_expressions_point_at_the_right_line() {
    let e = error_of("object.spec.replicas > 1 &&\n  object.spec.replicas < 'x'");
    assert!(e.starts_with("ERROR: <input>:2:24: "), "{e}");
    assert!(
        e.contains("\n |   object.spec.replicas < 'x'\n | .......................^"),
        "{e}"
    );
}
