//! Field errors and the validations every object shares (names, labels, annotations, metadata updates).
//!
//! [`FieldError`] renders exactly as apimachinery's `field.Error` (`spec.replicas: Invalid
//! value: -1: must be greater than or equal to 0`), so `Invalid` statuses read as upstream's.

use std::collections::BTreeSet;
use std::fmt;

use kcm_machinery::labels::{
    is_dns1123_label, is_dns1123_subdomain, validate_label_key, validate_label_value,
};
use serde_json::Value;

use crate::object;
use crate::pointer::At;

/// The kind of a field error, as apimachinery's `field.ErrorType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldErrorKind {
    /// `Not found`.
    NotFound,
    /// `Required value`.
    Required,
    /// `Duplicate value`.
    Duplicate,
    /// `Invalid value`.
    Invalid,
    /// `Unsupported value`.
    NotSupported,
    /// `Forbidden`.
    Forbidden,
    /// `Too long`.
    TooLong,
    /// `Too many`: a list longer than allowed (the value is its length).
    TooMany,
}

impl FieldErrorKind {
    /// The `details.causes[].reason` string (`field.ErrorType`'s value).
    pub fn cause(self) -> &'static str {
        match self {
            FieldErrorKind::NotFound => "FieldValueNotFound",
            FieldErrorKind::Required => "FieldValueRequired",
            FieldErrorKind::Duplicate => "FieldValueDuplicate",
            FieldErrorKind::Invalid => "FieldValueInvalid",
            FieldErrorKind::NotSupported => "FieldValueNotSupported",
            FieldErrorKind::Forbidden => "FieldValueForbidden",
            FieldErrorKind::TooLong => "FieldValueTooLong",
            FieldErrorKind::TooMany => "FieldValueTooMany",
        }
    }

    fn text(self) -> &'static str {
        match self {
            FieldErrorKind::NotFound => "Not found",
            FieldErrorKind::Required => "Required value",
            FieldErrorKind::Duplicate => "Duplicate value",
            FieldErrorKind::Invalid => "Invalid value",
            FieldErrorKind::NotSupported => "Unsupported value",
            FieldErrorKind::Forbidden => "Forbidden",
            FieldErrorKind::TooLong => "Too long",
            FieldErrorKind::TooMany => "Too many",
        }
    }

    /// Whether the message shows the bad value (as upstream's `ErrorBody`).
    fn shows_value(self) -> bool {
        matches!(
            self,
            FieldErrorKind::NotFound
                | FieldErrorKind::Duplicate
                | FieldErrorKind::Invalid
                | FieldErrorKind::NotSupported
                | FieldErrorKind::TooMany
        )
    }
}

/// One validation failure on one field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// What went wrong.
    pub kind: FieldErrorKind,
    /// The field path, e.g. `spec.template.metadata.labels`.
    pub field: String,
    /// The offending value, already rendered as upstream prints it (strings quoted).
    pub value: String,
    /// Further explanation.
    pub detail: String,
}

impl FieldError {
    /// An `Invalid value` error.
    pub fn invalid(
        field: impl Into<String>,
        value: impl Into<Value>,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            kind: FieldErrorKind::Invalid,
            field: field.into(),
            value: render_value(&value.into()),
            detail: detail.into(),
        }
    }

    /// An `Invalid value` error that does not show the value (upstream's
    /// `field.OmitValueType`), for a rule about the field as a whole.
    pub fn invalid_omitting_value(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            kind: FieldErrorKind::Invalid,
            field: field.into(),
            value: String::new(),
            detail: detail.into(),
        }
    }

    /// A `Too many` error: a list has `actual` items, more than `max`.
    pub fn too_many(field: impl Into<String>, actual: usize, max: usize) -> Self {
        Self {
            kind: FieldErrorKind::TooMany,
            field: field.into(),
            value: actual.to_string(),
            detail: format!("must have at most {max} items"),
        }
    }

    /// A `Not found` error: `value` names something that does not exist (a volume mount's
    /// volume).
    pub fn not_found(field: impl Into<String>, value: impl Into<Value>) -> Self {
        Self {
            kind: FieldErrorKind::NotFound,
            field: field.into(),
            value: render_value(&value.into()),
            detail: String::new(),
        }
    }

    /// A `Required value` error.
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            kind: FieldErrorKind::Required,
            field: field.into(),
            value: String::new(),
            detail: detail.into(),
        }
    }

    /// A `Forbidden` error.
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            kind: FieldErrorKind::Forbidden,
            field: field.into(),
            value: String::new(),
            detail: detail.into(),
        }
    }

    /// An `Unsupported value` error listing the supported values.
    pub fn not_supported(
        field: impl Into<String>,
        value: impl Into<Value>,
        supported: &[&str],
    ) -> Self {
        let quoted: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
        Self {
            kind: FieldErrorKind::NotSupported,
            field: field.into(),
            value: render_value(&value.into()),
            detail: format!("supported values: {}", quoted.join(", ")),
        }
    }

    /// A `Duplicate value` error.
    pub fn duplicate(field: impl Into<String>, value: impl Into<Value>) -> Self {
        Self {
            kind: FieldErrorKind::Duplicate,
            field: field.into(),
            value: render_value(&value.into()),
            detail: String::new(),
        }
    }

    /// A `Too long` error.
    pub fn too_long(field: impl Into<String>, max: usize) -> Self {
        Self {
            kind: FieldErrorKind::TooLong,
            field: field.into(),
            value: String::new(),
            detail: format!("must have at most {max} bytes"),
        }
    }

    /// The message without the field path (upstream's `ErrorBody`).
    pub fn body(&self) -> String {
        let mut s = if self.kind.shows_value() && !self.value.is_empty() {
            format!("{}: {}", self.kind.text(), self.value)
        } else {
            self.kind.text().to_owned()
        };
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

fn render_value(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s:?}"),
        Value::Null => "null".to_owned(),
        other => other.to_string(),
    }
}

/// Upstream's message for an invalid RFC 1123 subdomain.
pub const DNS1123_SUBDOMAIN_MESSAGE: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// Upstream's message for an invalid RFC 1123 label.
pub const DNS1123_LABEL_MESSAGE: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

/// Upstream's message for an invalid RFC 1035 label (service names).
pub const DNS1035_LABEL_MESSAGE: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

/// How an object's name must look.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameRule {
    /// An RFC 1123 subdomain (most objects).
    Subdomain,
    /// An RFC 1123 label (namespaces).
    Label,
    /// An RFC 1035 label (services).
    Dns1035Label,
    /// A path segment: anything without `/` or `%`, not `.` or `..` (events, leases).
    PathSegment,
    /// An IP address in canonical form (networking.k8s.io IPAddresses, upstream's
    /// `ValidateIPAddressName`).
    IpAddress,
}

impl NameRule {
    /// The reasons `name` is not acceptable (empty when it is), as upstream's `ValidateNameFunc`.
    pub fn check(self, name: &str) -> Vec<String> {
        let mut out = Vec::new();
        match self {
            NameRule::Subdomain => {
                if name.len() > 253 {
                    out.push("must be no more than 253 characters".to_owned());
                }
                if !is_dns1123_subdomain(name) {
                    out.push(DNS1123_SUBDOMAIN_MESSAGE.to_owned());
                }
            }
            NameRule::Label => {
                if name.len() > 63 {
                    out.push("must be no more than 63 characters".to_owned());
                }
                if !is_dns1123_label(name) {
                    out.push(DNS1123_LABEL_MESSAGE.to_owned());
                }
            }
            NameRule::Dns1035Label => {
                if name.len() > 63 {
                    out.push("must be no more than 63 characters".to_owned());
                }
                let starts_alpha = name.chars().next().is_some_and(|c| c.is_ascii_lowercase());
                if !starts_alpha || !is_dns1123_label(name) {
                    out.push(DNS1035_LABEL_MESSAGE.to_owned());
                }
            }
            NameRule::IpAddress => match name.parse::<std::net::IpAddr>() {
                Err(_) => out.push(format!("ParseAddr({name:?}): unable to parse IP")),
                Ok(ip) if ip.to_string() != name => {
                    out.push("must be a canonical format IP address".to_owned());
                }
                Ok(_) => {}
            },
            NameRule::PathSegment => {
                if name == "." || name == ".." {
                    out.push(format!("may not be '{name}'"));
                }
                for bad in ["/", "%"] {
                    if name.contains(bad) {
                        out.push(format!("may not contain '{bad}'"));
                    }
                }
            }
        }
        out
    }
}

/// Maximum total size of annotations (`TotalAnnotationSizeLimitB`).
const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

/// Validates an object's metadata on create and update, as upstream's `ValidateObjectMeta`.
pub fn validate_object_meta(obj: &Value, namespaced: bool, rule: NameRule) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = object::name(obj);
    let generate_name = object::str_at(obj, &["metadata", "generateName"]).unwrap_or("");
    if name.is_empty() {
        if generate_name.is_empty() {
            errs.push(FieldError::required(
                "metadata.name",
                "name or generateName is required",
            ));
        }
    } else {
        for msg in rule.check(name) {
            errs.push(FieldError::invalid("metadata.name", name, msg));
        }
    }
    if !generate_name.is_empty() {
        // The prefix is validated with any trailing '-' tolerated, as upstream's maskTrailingDash.
        let masked = generate_name
            .strip_suffix('-')
            .map_or(generate_name.to_owned(), |p| format!("{p}a"));
        for msg in rule.check(&masked) {
            errs.push(FieldError::invalid(
                "metadata.generateName",
                generate_name,
                msg,
            ));
        }
    }
    let namespace = object::namespace(obj);
    if namespaced {
        if namespace.is_empty() {
            errs.push(FieldError::required("metadata.namespace", ""));
        } else {
            for msg in NameRule::Label.check(namespace) {
                errs.push(FieldError::invalid("metadata.namespace", namespace, msg));
            }
        }
    } else if !namespace.is_empty() {
        errs.push(FieldError::forbidden(
            "metadata.namespace",
            "not allowed on this type",
        ));
    }
    if let Some(labels) = obj.at("/metadata/labels").and_then(Value::as_object) {
        for (key, value) in labels {
            if let Err(e) = validate_label_key(key) {
                errs.push(FieldError::invalid(
                    "metadata.labels",
                    key.as_str(),
                    e.to_string(),
                ));
            }
            match value.as_str() {
                Some(v) => {
                    if let Err(e) = validate_label_value(v) {
                        errs.push(FieldError::invalid("metadata.labels", v, e.to_string()));
                    }
                }
                None => errs.push(FieldError::invalid(
                    "metadata.labels",
                    value.clone(),
                    "label values must be strings",
                )),
            }
        }
    }
    if let Some(annotations) = obj.at("/metadata/annotations").and_then(Value::as_object) {
        let mut total = 0usize;
        for (key, value) in annotations {
            if let Err(e) = validate_label_key(key) {
                errs.push(FieldError::invalid(
                    "metadata.annotations",
                    key.as_str(),
                    e.to_string(),
                ));
            }
            total += key.len() + value.as_str().map_or(0, str::len);
        }
        if total > TOTAL_ANNOTATION_SIZE_LIMIT {
            errs.push(FieldError::too_long(
                "metadata.annotations",
                TOTAL_ANNOTATION_SIZE_LIMIT,
            ));
        }
    }
    if let Some(refs) = obj
        .at("/metadata/ownerReferences")
        .and_then(Value::as_array)
    {
        let mut controllers = 0;
        for (i, r) in refs.iter().enumerate() {
            let path = format!("metadata.ownerReferences[{i}]");
            for field in ["apiVersion", "kind", "name", "uid"] {
                if r.get(field)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .is_empty()
                {
                    let detail = match field {
                        "apiVersion" => "version must not be empty",
                        "kind" => "kind must not be empty",
                        "name" => "name must not be empty",
                        _ => "uid must not be empty",
                    };
                    errs.push(FieldError::invalid(
                        format!("{path}.{field}"),
                        r.get(field)
                            .cloned()
                            .unwrap_or(Value::String(String::new())),
                        detail,
                    ));
                }
            }
            if r.get("controller").and_then(Value::as_bool) == Some(true) {
                controllers += 1;
            }
        }
        if controllers > 1 {
            errs.push(FieldError::invalid(
                "metadata.ownerReferences",
                Value::Null,
                "Only one reference can have Controller set to true",
            ));
        }
    }
    let finalizers = object::finalizers(obj);
    let mut seen = BTreeSet::new();
    for f in &finalizers {
        if let Err(e) = validate_label_key(f) {
            errs.push(FieldError::invalid(
                "metadata.finalizers",
                f.as_str(),
                e.to_string(),
            ));
        }
        if !seen.insert(f.as_str()) {
            errs.push(FieldError::duplicate("metadata.finalizers", f.as_str()));
        }
    }
    if seen.contains(object::FINALIZER_ORPHAN) && seen.contains(object::FINALIZER_FOREGROUND) {
        errs.push(FieldError::invalid(
            "metadata.finalizers",
            Value::Null,
            format!(
                "finalizer {} and {} cannot be both set",
                object::FINALIZER_ORPHAN,
                object::FINALIZER_FOREGROUND
            ),
        ));
    }
    errs
}

/// Validates what an update may not change in metadata, as upstream's `ValidateObjectMetaUpdate`.
pub fn validate_object_meta_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (field, path) in [
        ("metadata.name", &["metadata", "name"]),
        ("metadata.namespace", &["metadata", "namespace"]),
        ("metadata.uid", &["metadata", "uid"]),
        (
            "metadata.creationTimestamp",
            &["metadata", "creationTimestamp"],
        ),
    ] {
        let n = object::str_at(new, path).unwrap_or("");
        let o = object::str_at(old, path).unwrap_or("");
        if n != o {
            errs.push(FieldError::invalid(field, n, "field is immutable"));
        }
    }
    if object::deletion_timestamp(old).is_none() && object::deletion_timestamp(new).is_some() {
        errs.push(FieldError::invalid(
            "metadata.deletionTimestamp",
            object::deletion_timestamp(new).unwrap_or(""),
            "field is immutable; may only be changed via deletion",
        ));
    }
    let new_grace = new.at("/metadata/deletionGracePeriodSeconds");
    let old_grace = old.at("/metadata/deletionGracePeriodSeconds");
    if old_grace.is_some() && new_grace != old_grace {
        errs.push(FieldError::invalid(
            "metadata.deletionGracePeriodSeconds",
            new_grace.cloned().unwrap_or(Value::Null),
            "field is immutable; may only be changed via deletion",
        ));
    }
    if object::deletion_timestamp(old).is_some() {
        let old_set: BTreeSet<String> = object::finalizers(old).into_iter().collect();
        let added: Vec<String> = object::finalizers(new)
            .into_iter()
            .filter(|f| !old_set.contains(f))
            .collect();
        if !added.is_empty() {
            errs.push(FieldError::forbidden(
                "metadata.finalizers",
                format!(
                    "no new finalizers can be added if the object is being deleted, found new finalizers {added:?}"
                ),
            ));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn field_error_renders_like_upstream() {
        let cases = [
            (
                "invalid string",
                FieldError::invalid("metadata.name", "Foo", "bad"),
                "metadata.name: Invalid value: \"Foo\": bad",
            ),
            (
                "required without detail",
                FieldError::required("metadata.namespace", ""),
                "metadata.namespace: Required value",
            ),
            (
                "not supported",
                FieldError::not_supported("spec.type", "X", &["A", "B"]),
                "spec.type: Unsupported value: \"X\": supported values: \"A\", \"B\"",
            ),
        ];
        for (name, err, want) in cases {
            assert_eq!(err.to_string(), want, "case {name}");
        }
    }

    #[test]
    fn object_meta_validation() {
        struct Case {
            name: &'static str,
            obj: Value,
            namespaced: bool,
            fields: Vec<&'static str>,
        }
        let cases = vec![
            Case {
                name: "valid",
                obj: json!({"metadata": {"name": "a.b-c", "namespace": "ns", "labels": {"app": "x"}}}),
                namespaced: true,
                fields: vec![],
            },
            Case {
                name: "uppercase name",
                obj: json!({"metadata": {"name": "Abc", "namespace": "ns"}}),
                namespaced: true,
                fields: vec!["metadata.name"],
            },
            Case {
                name: "missing name and namespace",
                obj: json!({"metadata": {}}),
                namespaced: true,
                fields: vec!["metadata.name", "metadata.namespace"],
            },
            Case {
                name: "generateName with trailing dash",
                obj: json!({"metadata": {"generateName": "web-", "namespace": "ns"}}),
                namespaced: true,
                fields: vec![],
            },
            Case {
                name: "bad label value",
                obj: json!({"metadata": {"name": "a", "labels": {"app": "a b"}}}),
                namespaced: false,
                fields: vec!["metadata.labels"],
            },
            Case {
                name: "namespace on cluster-scoped",
                obj: json!({"metadata": {"name": "a", "namespace": "x"}}),
                namespaced: false,
                fields: vec!["metadata.namespace"],
            },
            Case {
                name: "two controllers",
                obj: json!({"metadata": {"name": "a", "ownerReferences": [
                    {"apiVersion": "v1", "kind": "A", "name": "a", "uid": "1", "controller": true},
                    {"apiVersion": "v1", "kind": "B", "name": "b", "uid": "2", "controller": true}
                ]}}),
                namespaced: false,
                fields: vec!["metadata.ownerReferences"],
            },
        ];
        for case in cases {
            let errs = validate_object_meta(&case.obj, case.namespaced, NameRule::Subdomain);
            let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
            assert_eq!(fields, case.fields, "case {}", case.name);
        }
    }

    #[test]
    fn meta_update_rejects_uid_change_and_new_finalizers_while_deleting() {
        let old = json!({"metadata": {"name": "a", "uid": "1", "deletionTimestamp": "2024-01-01T00:00:00Z", "finalizers": ["x/y"]}});
        let new = json!({"metadata": {"name": "a", "uid": "2", "deletionTimestamp": "2024-01-01T00:00:00Z", "finalizers": ["x/y", "x/z"]}});
        let errs = validate_object_meta_update(&new, &old);
        let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, vec!["metadata.uid", "metadata.finalizers"]);
    }

    #[test]
    fn name_rules() {
        assert!(NameRule::Label.check("a.b").len() == 1);
        assert!(NameRule::Subdomain.check("a.b").is_empty());
        assert!(NameRule::Dns1035Label.check("1abc").len() == 1);
        assert!(NameRule::IpAddress.check("10.96.0.10").is_empty());
        assert!(NameRule::IpAddress.check("2001:db8::1").is_empty());
        assert_eq!(
            NameRule::IpAddress.check("2001:db8:0::1"),
            ["must be a canonical format IP address"]
        );
        assert_eq!(
            NameRule::IpAddress.check("web"),
            [r#"ParseAddr("web"): unable to parse IP"#]
        );
        assert!(NameRule::PathSegment.check("a:b").is_empty());
        assert!(!NameRule::PathSegment.check("a/b").is_empty());
    }
}
