//! Field selectors (`fieldSelector=spec.nodeName=n1,status.phase!=Failed`): parsing and matching, as apimachinery's `fields` package.

use serde_json::Value;

use crate::error::ApiError;
use crate::registry::resource::{ResourceDef, SelectableField};

/// One `field op value` term.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldRequirement {
    /// The field, resolved against the resource's selectable fields.
    pub field: SelectableField,
    /// `true` for `!=`, `false` for `=` and `==`.
    pub negated: bool,
    /// The (unescaped) value.
    pub value: String,
}

/// A conjunction of field requirements; empty selects everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSelector {
    requirements: Vec<FieldRequirement>,
}

impl FieldSelector {
    /// Parses `input` for `def`; an unknown field or bad syntax is a 400, as upstream.
    pub fn parse(input: &str, def: &ResourceDef) -> Result<Self, ApiError> {
        let mut requirements = Vec::new();
        for term in split_unescaped(input, ',') {
            if term.is_empty() {
                continue;
            }
            let (field, negated, value) = split_term(&term).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "invalid selector: '{input}'; can't understand '{term}'"
                ))
            })?;
            let field_name = field.trim();
            let resolved = def.field(field_name).ok_or_else(|| {
                ApiError::bad_request(format!("field label not supported: {field_name}"))
            })?;
            requirements.push(FieldRequirement {
                field: resolved,
                negated,
                value: unescape(&value).map_err(|e| {
                    ApiError::bad_request(format!("invalid selector: '{input}'; {e}"))
                })?,
            });
        }
        Ok(Self { requirements })
    }

    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether `obj` satisfies every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        self.requirements
            .iter()
            .all(|r| (r.field.value(obj) == r.value) != r.negated)
    }

    /// The value an `=` requirement pins `field` to, if any (`MatchesSingle` and
    /// `MatchesSingleNamespace` use it to narrow a list to one key or one namespace).
    pub fn required_value(&self, field: &str) -> Option<&str> {
        self.requirements
            .iter()
            .find(|r| !r.negated && r.field.name == field)
            .map(|r| r.value.as_str())
    }
}

/// Splits on `sep` not preceded by a backslash, keeping escapes for [`unescape`].
fn split_unescaped(input: &str, sep: char) -> Vec<String> {
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut escaped = false;
    for c in input.chars() {
        if escaped {
            cur.push('\\');
            cur.push(c);
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == sep {
            parts.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    if escaped {
        cur.push('\\');
    }
    parts.push(cur);
    parts
}

/// Splits `field op value` at the first unescaped operator.
fn split_term(term: &str) -> Option<(String, bool, String)> {
    let bytes: Vec<char> = term.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            '\\' => i += 2,
            '!' if bytes.get(i + 1) == Some(&'=') => {
                let field: String = bytes[..i].iter().collect();
                let value: String = bytes[i + 2..].iter().collect();
                return Some((field, true, value));
            }
            '=' => {
                let skip = if bytes.get(i + 1) == Some(&'=') { 2 } else { 1 };
                let field: String = bytes[..i].iter().collect();
                let value: String = bytes[i + skip..].iter().collect();
                return Some((field, false, value));
            }
            _ => i += 1,
        }
    }
    None
}

/// Removes backslash escapes (`\\`, `\,`, `\=`), as upstream's `UnescapeValue`.
fn unescape(value: &str) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some(e @ ('\\' | ',' | '=')) => out.push(e),
                Some(e) => return Err(format!("invalid escape sequence \\{e}")),
                None => return Err("unterminated escape sequence".to_owned()),
            }
        } else if c == ',' || c == '=' {
            return Err(format!("unescaped {c:?} in value"));
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::resources::pod;

    #[test]
    fn parse_and_match() {
        struct Case {
            name: &'static str,
            selector: &'static str,
            obj: Value,
            want: bool,
        }
        let cases = [
            Case {
                name: "equals",
                selector: "spec.nodeName=n1",
                obj: json!({"spec": {"nodeName": "n1"}}),
                want: true,
            },
            Case {
                name: "double equals",
                selector: "spec.nodeName==n1",
                obj: json!({"spec": {"nodeName": "n2"}}),
                want: false,
            },
            Case {
                name: "not equals missing field",
                selector: "spec.nodeName!=n1",
                obj: json!({}),
                want: true,
            },
            Case {
                name: "empty value selects unscheduled",
                selector: "spec.nodeName=",
                obj: json!({"spec": {}}),
                want: true,
            },
            Case {
                name: "conjunction",
                selector: "metadata.name=a,status.phase!=Failed",
                obj: json!({"metadata": {"name": "a"}, "status": {"phase": "Running"}}),
                want: true,
            },
            Case {
                name: "escaped comma",
                selector: "metadata.name=a\\,b",
                obj: json!({"metadata": {"name": "a,b"}}),
                want: true,
            },
            Case {
                name: "empty selector",
                selector: "",
                obj: json!({}),
                want: true,
            },
        ];
        for case in cases {
            let sel = FieldSelector::parse(case.selector, &pod::PODS).expect(case.name);
            assert_eq!(sel.matches(&case.obj), case.want, "case {}", case.name);
        }
    }

    #[test]
    fn unknown_field_is_bad_request() {
        let err = FieldSelector::parse("spec.bogus=x", &pod::PODS).expect_err("unknown");
        assert_eq!(err.code, 400);
        assert_eq!(err.message, "field label not supported: spec.bogus");
        let err = FieldSelector::parse("metadata.name", &pod::PODS).expect_err("no operator");
        assert_eq!(err.code, 400);
    }

    #[test]
    fn required_value_finds_equality() {
        let sel = FieldSelector::parse("metadata.namespace=ns,metadata.name!=x", &pod::PODS)
            .expect("parses");
        assert_eq!(sel.required_value("metadata.namespace"), Some("ns"));
        assert_eq!(sel.required_value("metadata.name"), None);
    }
}
