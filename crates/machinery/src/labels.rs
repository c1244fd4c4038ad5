//! Kubernetes label selectors: parsing, conversion from `LabelSelector`, matching.
//!
//! Semantics follow apimachinery's `labels` package: a [`Selector`] is a conjunction of
//! [`Requirement`]s; `!=` and `notin` match objects that lack the key; a `nil` `LabelSelector`
//! selects nothing while an empty one selects everything (`LabelSelectorAsSelector`).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a selector could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The selector string does not parse: upstream's message (`found 'b', expected: in,
    /// notin, =, ==, !=, gt, lt`; any error within one requirement — syntax, key or value —
    /// prefixed with `unable to parse requirement: `, as upstream's).
    #[error("{0}")]
    Parse(String),
    /// A key is not a valid qualified name.
    #[error("invalid label key {key:?}: {reason}")]
    InvalidKey {
        /// The offending key.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A value is not a valid label value.
    #[error("invalid label value {value:?}: {reason}")]
    InvalidValue {
        /// The offending value.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An operator got the wrong number of values or is unknown.
    #[error("invalid requirement for key {key:?}: {reason}")]
    InvalidRequirement {
        /// The requirement's key.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// A selector operator, as apimachinery's `selection.Operator`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operator {
    /// `key=value` or `key==value`.
    Equals,
    /// `key!=value`: also matches objects without the key.
    NotEquals,
    /// `key in (a,b)`.
    In,
    /// `key notin (a,b)`: also matches objects without the key.
    NotIn,
    /// `key`.
    Exists,
    /// `!key`.
    DoesNotExist,
    /// `key>n` (integer comparison).
    GreaterThan,
    /// `key<n` (integer comparison).
    LessThan,
}

/// One condition on one label key.
///
/// Invariant: `values` has exactly one element for `Equals`, `NotEquals`, `GreaterThan` and
/// `LessThan`, at least one for `In` and `NotIn`, and none for `Exists` and `DoesNotExist`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Requirement {
    key: String,
    operator: Operator,
    values: BTreeSet<String>,
}

impl Requirement {
    /// Builds a validated requirement, as apimachinery's `labels.NewRequirement`.
    pub fn new(
        key: impl Into<String>,
        operator: Operator,
        values: impl IntoIterator<Item = String>,
    ) -> Result<Self> {
        let key = key.into();
        validate_label_key(&key)?;
        let values: BTreeSet<String> = values.into_iter().collect();
        let invalid = |reason: &str| Error::InvalidRequirement {
            key: key.clone(),
            reason: reason.to_owned(),
        };
        match operator {
            Operator::In | Operator::NotIn if values.is_empty() => {
                return Err(invalid(
                    "for 'in', 'notin' operators, values set can't be empty",
                ));
            }
            Operator::Equals | Operator::NotEquals if values.len() != 1 => {
                return Err(invalid(
                    "exact-match compatibility requires one single value",
                ));
            }
            Operator::Exists | Operator::DoesNotExist if !values.is_empty() => {
                return Err(invalid(
                    "values set must be empty for exists and does not exist",
                ));
            }
            Operator::GreaterThan | Operator::LessThan => {
                if values.len() != 1 {
                    return Err(invalid(
                        "for 'Gt', 'Lt' operators, exactly one value is required",
                    ));
                }
                if values.iter().any(|v| v.parse::<i64>().is_err()) {
                    return Err(invalid(
                        "for 'Gt', 'Lt' operators, the value must be an integer",
                    ));
                }
            }
            _ => {}
        }
        if !matches!(operator, Operator::GreaterThan | Operator::LessThan) {
            for value in &values {
                validate_label_value(value)?;
            }
        }
        Ok(Self {
            key,
            operator,
            values,
        })
    }

    /// The label key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The operator.
    pub fn operator(&self) -> Operator {
        self.operator
    }

    /// The values, sorted.
    pub fn values(&self) -> &BTreeSet<String> {
        &self.values
    }

    /// Whether `labels` satisfy this requirement, as apimachinery's `Requirement.Matches`.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        match self.operator {
            Operator::Equals | Operator::In => value.is_some_and(|v| self.values.contains(v)),
            Operator::NotEquals | Operator::NotIn => value.is_none_or(|v| !self.values.contains(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let Some(actual) = value.and_then(|v| v.parse::<i64>().ok()) else {
                    return false;
                };
                let Some(bound) = self
                    .values
                    .iter()
                    .next()
                    .and_then(|v| v.parse::<i64>().ok())
                else {
                    return false;
                };
                if self.operator == Operator::GreaterThan {
                    actual > bound
                } else {
                    actual < bound
                }
            }
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let join = |values: &BTreeSet<String>| values.iter().cloned().collect::<Vec<_>>().join(",");
        match self.operator {
            Operator::Equals => write!(f, "{}={}", self.key, join(&self.values)),
            Operator::NotEquals => write!(f, "{}!={}", self.key, join(&self.values)),
            Operator::In => write!(f, "{} in ({})", self.key, join(&self.values)),
            Operator::NotIn => write!(f, "{} notin ({})", self.key, join(&self.values)),
            Operator::Exists => write!(f, "{}", self.key),
            Operator::DoesNotExist => write!(f, "!{}", self.key),
            Operator::GreaterThan => write!(f, "{}>{}", self.key, join(&self.values)),
            Operator::LessThan => write!(f, "{}<{}", self.key, join(&self.values)),
        }
    }
}

/// A label selector: every requirement must hold. Cheap to clone and to match.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Selector {
    /// Sorted by key (then operator), so equal selectors print equally.
    requirements: Vec<Requirement>,
    /// True for the selector built from a `nil` `LabelSelector`: it matches nothing.
    nothing: bool,
}

impl Selector {
    /// The selector that matches every object (an empty `LabelSelector`, an empty string).
    pub fn everything() -> Self {
        Self {
            requirements: Vec::new(),
            nothing: false,
        }
    }

    /// The selector that matches no object (a `nil` `LabelSelector`).
    pub fn nothing() -> Self {
        Self {
            requirements: Vec::new(),
            nothing: true,
        }
    }

    /// A selector from requirements (sorted for a stable string form).
    pub fn from_requirements(mut requirements: Vec<Requirement>) -> Self {
        requirements.sort_by(|a, b| (&a.key, a.operator).cmp(&(&b.key, b.operator)));
        Self {
            requirements,
            nothing: false,
        }
    }

    /// `key=value` for every entry, as apimachinery's `SelectorFromSet` (validated).
    pub fn from_map(labels: &BTreeMap<String, String>) -> Result<Self> {
        let requirements = labels
            .iter()
            .map(|(k, v)| Requirement::new(k.clone(), Operator::Equals, [v.clone()]))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self::from_requirements(requirements))
    }

    /// Converts a `LabelSelector`, as apimachinery's `LabelSelectorAsSelector`: an empty
    /// selector matches everything; invalid keys, values or operators are errors.
    pub fn from_label_selector(selector: &LabelSelector) -> Result<Self> {
        let mut requirements = Vec::new();
        for (key, value) in selector.match_labels.iter().flatten() {
            requirements.push(Requirement::new(
                key.clone(),
                Operator::Equals,
                [value.clone()],
            )?);
        }
        for expr in selector.match_expressions.iter().flatten() {
            let operator = match expr.operator.as_str() {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                other => {
                    return Err(Error::InvalidRequirement {
                        key: expr.key.clone(),
                        reason: format!("{other:?} is not a valid label selector operator"),
                    });
                }
            };
            let values = expr.values.clone().unwrap_or_default();
            requirements.push(Requirement::new(expr.key.clone(), operator, values)?);
        }
        Ok(Self::from_requirements(requirements))
    }

    /// Converts an optional `LabelSelector`: `None` matches nothing, as upstream.
    pub fn from_optional(selector: Option<&LabelSelector>) -> Result<Self> {
        match selector {
            Some(s) => Self::from_label_selector(s),
            None => Ok(Self::nothing()),
        }
    }

    /// Parses the string form used by `?labelSelector=` and `kubectl -l`, as apimachinery's
    /// `labels.Parse`: `a=b`, `a==b`, `a!=b`, `a in (b,c)`, `a notin (b)`, `a`, `!a`, `a>1`,
    /// `a<1`, separated by commas. The empty string matches everything.
    pub fn parse(input: &str) -> Result<Self> {
        Parser::new(input).parse()
    }

    /// The requirements, sorted by key.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// True when this selector matches every object.
    pub fn is_everything(&self) -> bool {
        !self.nothing && self.requirements.is_empty()
    }

    /// True when this selector matches no object (built from a `nil` `LabelSelector`).
    pub fn is_nothing(&self) -> bool {
        self.nothing
    }

    /// Whether an object with `labels` is selected.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        !self.nothing && self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Whether an object with optional labels (`metadata.labels` may be absent) is selected.
    pub fn matches_opt(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        static EMPTY: BTreeMap<String, String> = BTreeMap::new();
        self.matches(labels.unwrap_or(&EMPTY))
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for Selector {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

/// Validates a label key: an optional DNS-subdomain prefix and `/`, then a name of at most 63
/// characters of alphanumerics, `-`, `_` and `.`, starting and ending alphanumeric.
pub fn validate_label_key(key: &str) -> Result<()> {
    let invalid = |reason: String| Error::InvalidKey {
        key: key.to_owned(),
        reason,
    };
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            return Err(invalid("prefix part must be non-empty".into()));
        }
        if !is_dns1123_subdomain(prefix) {
            return Err(invalid(
                "prefix part must be a lowercase RFC 1123 subdomain".into(),
            ));
        }
    }
    if name.is_empty() {
        return Err(invalid("name part must be non-empty".into()));
    }
    if name.len() > 63 {
        return Err(invalid(
            "name part must be no more than 63 characters".into(),
        ));
    }
    if !is_qualified_name_part(name) {
        return Err(invalid(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character".into(),
        ));
    }
    Ok(())
}

/// Validates a label value: empty, or at most 63 characters of alphanumerics, `-`, `_` and
/// `.`, starting and ending alphanumeric.
pub fn validate_label_value(value: &str) -> Result<()> {
    let invalid = |reason: &str| Error::InvalidValue {
        value: value.to_owned(),
        reason: reason.to_owned(),
    };
    if value.len() > 63 {
        return Err(invalid("must be no more than 63 characters"));
    }
    if !value.is_empty() && !is_qualified_name_part(value) {
        return Err(invalid(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
        ));
    }
    Ok(())
}

fn is_qualified_name_part(s: &str) -> bool {
    let bytes = s.as_bytes();
    let (Some(first), Some(last)) = (bytes.first(), bytes.last()) else {
        return false;
    };
    first.is_ascii_alphanumeric()
        && last.is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// A lowercase RFC 1123 subdomain: dot-separated parts of `[a-z0-9-]`, each starting and
/// ending alphanumeric, at most 253 characters in all. As upstream's `IsDNS1123Subdomain`
/// (one regular expression and the total length), a part is not limited to a label's 63
/// characters: `projected-configmap-test-volume-<uuid>` (68) is a valid object name.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns1123_part)
}

/// A lowercase RFC 1123 label: `[a-z0-9-]`, starting and ending alphanumeric, at most 63
/// characters.
pub fn is_dns1123_label(s: &str) -> bool {
    s.len() <= 63 && is_dns1123_part(s)
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?` of any length.
fn is_dns1123_part(s: &str) -> bool {
    let bytes = s.as_bytes();
    let (Some(first), Some(last)) = (bytes.first(), bytes.last()) else {
        return false;
    };
    (first.is_ascii_lowercase() || first.is_ascii_digit())
        && (last.is_ascii_lowercase() || last.is_ascii_digit())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

/// A recursive-descent parser over the selector string's tokens.
struct Parser<'a> {
    input: &'a str,
    pos: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Token<'a> {
    Identifier(&'a str),
    Comma,
    Not,
    Equals,
    DoubleEquals,
    NotEquals,
    Greater,
    Less,
    OpenParen,
    CloseParen,
    End,
}

impl<'a> Token<'a> {
    /// The text the token was read from (upstream's literal; empty at the end).
    fn literal(self) -> &'a str {
        match self {
            Token::Identifier(s) => s,
            Token::Comma => ",",
            Token::Not => "!",
            Token::Equals => "=",
            Token::DoubleEquals => "==",
            Token::NotEquals => "!=",
            Token::Greater => ">",
            Token::Less => "<",
            Token::OpenParen => "(",
            Token::CloseParen => ")",
            Token::End => "",
        }
    }
}

/// A syntax error: upstream's `found '<literal>', expected: <what>` (`expected` with its own
/// separator, as upstream's texts vary).
fn syntax(token: Token<'_>, expected: &str) -> Error {
    Error::Parse(format!("found '{}'{expected}", token.literal()))
}

impl<'a> Parser<'a> {
    fn new(input: &'a str) -> Self {
        Self { input, pos: 0 }
    }

    fn skip_whitespace(&mut self) {
        while let Some(c) = self.input[self.pos..].chars().next() {
            if c.is_whitespace() {
                self.pos += c.len_utf8();
            } else {
                break;
            }
        }
    }

    /// Reads the next token without consuming it.
    fn peek(&mut self) -> Token<'a> {
        let saved = self.pos;
        let token = self.next();
        self.pos = saved;
        token
    }

    fn next(&mut self) -> Token<'a> {
        self.skip_whitespace();
        let rest = &self.input[self.pos..];
        let two = |p: &mut Self, t| {
            p.pos += 2;
            t
        };
        let one = |p: &mut Self, t| {
            p.pos += 1;
            t
        };
        if rest.starts_with("==") {
            return two(self, Token::DoubleEquals);
        }
        if rest.starts_with("!=") {
            return two(self, Token::NotEquals);
        }
        match rest.chars().next() {
            None => Token::End,
            Some(',') => one(self, Token::Comma),
            Some('!') => one(self, Token::Not),
            Some('=') => one(self, Token::Equals),
            Some('>') => one(self, Token::Greater),
            Some('<') => one(self, Token::Less),
            Some('(') => one(self, Token::OpenParen),
            Some(')') => one(self, Token::CloseParen),
            Some(_) => {
                let len = rest
                    .find(|c: char| c.is_whitespace() || ",!=><()".contains(c))
                    .unwrap_or(rest.len());
                let ident = &rest[..len];
                self.pos += len;
                Token::Identifier(ident)
            }
        }
    }

    /// Upstream's `Parser.parse`, with its messages.
    fn parse(mut self) -> Result<Selector> {
        let mut requirements = Vec::new();
        match self.peek() {
            Token::End => return Ok(Selector::everything()),
            Token::Identifier(_) | Token::Not => {}
            other => {
                return Err(syntax(
                    other,
                    ", expected: !, identifier, or 'end of string'",
                ));
            }
        }
        loop {
            // Every error within a requirement (syntax, key, value), as upstream's `parse`.
            let requirement = self
                .requirement()
                .map_err(|e| Error::Parse(format!("unable to parse requirement: {e}")))?;
            requirements.push(requirement);
            match self.next() {
                Token::End => break,
                Token::Comma => match self.peek() {
                    Token::Identifier(_) | Token::Not => {}
                    other => {
                        return Err(syntax(other, ", expected: identifier after ','"));
                    }
                },
                other => {
                    return Err(syntax(other, ", expected: ',' or 'end of string'"));
                }
            }
        }
        Ok(Selector::from_requirements(requirements))
    }

    fn requirement(&mut self) -> Result<Requirement> {
        let negated = if self.peek() == Token::Not {
            self.next();
            true
        } else {
            false
        };
        let key = match self.next() {
            Token::Identifier(k) => k.to_owned(),
            other => return Err(syntax(other, ", expected: identifier")),
        };
        if negated {
            return Requirement::new(key, Operator::DoesNotExist, []);
        }
        let operator = match self.peek() {
            Token::End | Token::Comma => return Requirement::new(key, Operator::Exists, []),
            Token::Equals | Token::DoubleEquals => Operator::Equals,
            Token::NotEquals => Operator::NotEquals,
            Token::Greater => Operator::GreaterThan,
            Token::Less => Operator::LessThan,
            Token::Identifier("in") => Operator::In,
            Token::Identifier("notin") => Operator::NotIn,
            other => {
                return Err(syntax(other, ", expected: in, notin, =, ==, !=, gt, lt"));
            }
        };
        self.next();
        let values = match operator {
            Operator::In | Operator::NotIn => self.value_set()?,
            _ => match self.peek() {
                Token::Identifier(v) => {
                    self.next();
                    vec![v.to_owned()]
                }
                // `a=` selects the empty value, as upstream.
                Token::End | Token::Comma => vec![String::new()],
                other => return Err(syntax(other, ", expected: identifier")),
            },
        };
        Requirement::new(key, operator, values)
    }

    fn value_set(&mut self) -> Result<Vec<String>> {
        let open = self.next();
        if open != Token::OpenParen {
            // Upstream's text has no comma here.
            return Err(syntax(open, " expected: '('"));
        }
        match self.peek() {
            Token::Identifier(_) | Token::Comma | Token::CloseParen => {}
            other => {
                return Err(syntax(other, ", expected: ',', ')' or identifier"));
            }
        }
        // A missing value is the empty value, as upstream's `parseValues` and
        // `parseIdentifiersList`: `()` is `{""}`, and so are the gaps in `(,a)`, `(a,)`,
        // `(a,,b)` — which is also how a requirement on the empty value prints.
        let mut values = Vec::new();
        let mut want_value = true;
        loop {
            match self.next() {
                Token::Identifier(v) if want_value => {
                    values.push(v.to_owned());
                    want_value = false;
                }
                Token::Comma => {
                    if want_value {
                        values.push(String::new());
                    }
                    want_value = true;
                }
                Token::CloseParen => {
                    if want_value {
                        values.push(String::new());
                    }
                    return Ok(values);
                }
                other if want_value => {
                    return Err(syntax(other, ", expected: ',', or identifier"));
                }
                other => return Err(syntax(other, ", expected: ',' or ')'")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcm_testing::{label_selector, labels, selector};

    /// Upstream's `TestIsDNS1123Subdomain` cases, and the e2e suite's long generated names.
    #[test]
    fn subdomains_are_one_expression_and_253_characters_not_63_per_part() {
        let long_part = "projected-configmap-test-volume-afb608ff-3e96-4753-ad42-5b3a69b242c5";
        for good in [
            "a",
            "ab",
            "a-b",
            "0",
            "1.a",
            "a.b.c.d.e",
            "11.22.33.44.55",
            long_part,
            &format!("{long_part}.example.com"),
            &"a".repeat(253),
        ] {
            assert!(is_dns1123_subdomain(good), "{good}");
        }
        for bad in [
            "",
            "A",
            "a..b",
            "-a",
            "a-",
            "a.-b",
            "a_b",
            "a.",
            &"a".repeat(254),
        ] {
            assert!(!is_dns1123_subdomain(bad), "{bad}");
        }
        assert!(!is_dns1123_label(long_part), "a label keeps its 63");
        assert!(is_dns1123_label(&"a".repeat(63)));
    }

    /// Found by the property tests: `a in ()` (how a requirement on the empty value prints)
    /// did not parse back.
    #[test]
    fn missing_values_in_a_set_are_the_empty_value() {
        let cases = [
            ("a in ()", vec![""]),
            ("a notin ()", vec![""]),
            ("a in (,b)", vec!["", "b"]),
            ("a in (b,)", vec!["", "b"]),
            ("a in (b,,c)", vec!["", "b", "c"]),
        ];
        for (text, want) in cases {
            let selector = Selector::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            let got: Vec<&str> = selector.requirements()[0]
                .values()
                .iter()
                .map(String::as_str)
                .collect();
            assert_eq!(got, want, "{text}");
            assert_eq!(
                Selector::parse(&selector.to_string()).ok(),
                Some(selector),
                "{text}"
            );
        }
        for bad in ["a in (b c)", "a in (b", "a in b"] {
            assert!(Selector::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn parse_and_match_table() {
        struct Case {
            name: &'static str,
            selector: &'static str,
            labels: &'static [(&'static str, &'static str)],
            want: bool,
        }
        let cases = [
            Case {
                name: "empty selects all",
                selector: "",
                labels: &[("a", "b")],
                want: true,
            },
            Case {
                name: "equals",
                selector: "x=a",
                labels: &[("x", "a")],
                want: true,
            },
            Case {
                name: "double equals",
                selector: "x==a",
                labels: &[("x", "a")],
                want: true,
            },
            Case {
                name: "equals mismatch",
                selector: "x=a",
                labels: &[("x", "b")],
                want: false,
            },
            Case {
                name: "equals missing",
                selector: "x=a",
                labels: &[],
                want: false,
            },
            Case {
                name: "not equals missing key",
                selector: "x!=a",
                labels: &[],
                want: true,
            },
            Case {
                name: "not equals same",
                selector: "x!=a",
                labels: &[("x", "a")],
                want: false,
            },
            Case {
                name: "in",
                selector: "x in (a, b)",
                labels: &[("x", "b")],
                want: true,
            },
            Case {
                name: "in miss",
                selector: "x in (a,b)",
                labels: &[("x", "c")],
                want: false,
            },
            Case {
                name: "notin missing",
                selector: "x notin (a)",
                labels: &[],
                want: true,
            },
            Case {
                name: "notin hit",
                selector: "x notin (a)",
                labels: &[("x", "a")],
                want: false,
            },
            Case {
                name: "exists",
                selector: "x",
                labels: &[("x", "")],
                want: true,
            },
            Case {
                name: "not exists",
                selector: "!x",
                labels: &[("x", "")],
                want: false,
            },
            Case {
                name: "not exists absent",
                selector: "!x",
                labels: &[("y", "1")],
                want: true,
            },
            Case {
                name: "gt",
                selector: "x>1",
                labels: &[("x", "2")],
                want: true,
            },
            Case {
                name: "lt",
                selector: "x<1",
                labels: &[("x", "2")],
                want: false,
            },
            Case {
                name: "gt non-int label",
                selector: "x>1",
                labels: &[("x", "a")],
                want: false,
            },
            Case {
                name: "conjunction",
                selector: "app=web, tier in (fe,be),!canary",
                labels: &[("app", "web"), ("tier", "be")],
                want: true,
            },
            Case {
                name: "empty value",
                selector: "x=",
                labels: &[("x", "")],
                want: true,
            },
            Case {
                name: "prefixed key",
                selector: "app.kubernetes.io/name=web",
                labels: &[("app.kubernetes.io/name", "web")],
                want: true,
            },
        ];
        for case in cases {
            let selector = Selector::parse(case.selector)
                .unwrap_or_else(|e| panic!("{}: parse failed: {e}", case.name));
            assert_eq!(
                selector.matches(&labels(case.labels)),
                case.want,
                "{}",
                case.name
            );
        }
    }

    #[test]
    fn parse_errors() {
        for bad in [
            // `x in ()` parses (upstream: the empty value); see below.
            "x in a", "x in (a", "x=a,", ",x", "x=a=b", "-x=a", "x=-a", "x>a", "x=a b", "x y", "(x)",
        ] {
            assert!(Selector::parse(bad).is_err(), "{bad:?} should not parse");
        }
    }

    /// Syntax errors read as upstream's parser words them (`labels.Parser`); errors within
    /// one requirement carry its `unable to parse requirement: ` prefix, the others do not.
    #[test]
    fn syntax_errors_read_as_upstream() {
        let requirement = "unable to parse requirement: ";
        for (bad, want) in [
            (
                "x y",
                format!("{requirement}found 'y', expected: in, notin, =, ==, !=, gt, lt"),
            ),
            ("x in a", format!("{requirement}found 'a' expected: '('")),
            (
                "x in (a",
                format!("{requirement}found '', expected: ',' or ')'"),
            ),
            (
                "x in (a b)",
                format!("{requirement}found 'b', expected: ',' or ')'"),
            ),
            (
                "x in (a,=)",
                format!("{requirement}found '=', expected: ',', or identifier"),
            ),
            (
                "x in (=)",
                format!("{requirement}found '=', expected: ',', ')' or identifier"),
            ),
            (
                "x=(",
                format!("{requirement}found '(', expected: identifier"),
            ),
            (
                "!!x",
                format!("{requirement}found '!', expected: identifier"),
            ),
            (
                "x=a,",
                "found '', expected: identifier after ','".to_owned(),
            ),
            (
                "x=a,,y",
                "found ',', expected: identifier after ','".to_owned(),
            ),
            (
                "x=a=b",
                "found '=', expected: ',' or 'end of string'".to_owned(),
            ),
            (
                "x=a b",
                "found 'b', expected: ',' or 'end of string'".to_owned(),
            ),
            (
                "!x=a",
                "found '=', expected: ',' or 'end of string'".to_owned(),
            ),
            (
                ",x",
                "found ',', expected: !, identifier, or 'end of string'".to_owned(),
            ),
            (
                "(x)",
                "found '(', expected: !, identifier, or 'end of string'".to_owned(),
            ),
            (
                "!=x",
                "found '!=', expected: !, identifier, or 'end of string'".to_owned(),
            ),
        ] {
            match Selector::parse(bad) {
                Err(Error::Parse(message)) => assert_eq!(message, want, "{bad:?}"),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn display_round_trips_sorted() {
        let s = Selector::parse("z=1,a in (c,b),!m,k").expect("parses");
        assert_eq!(s.to_string(), "a in (b,c),k,!m,z=1");
        assert_eq!(Selector::parse(&s.to_string()).expect("reparses"), s);
    }

    #[test]
    fn label_selector_conversion() {
        let web_not_db = label_selector()
            .match_label("app", "web")
            .expression("tier", "NotIn", &["db"])
            .build();
        let s = Selector::from_label_selector(&web_not_db).expect("valid");
        assert!(s.matches(&labels(&[("app", "web")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("tier", "db")])));
        assert_eq!(s.to_string(), "app=web,tier notin (db)");

        let empty = Selector::from_label_selector(&LabelSelector::default()).expect("valid");
        assert!(empty.is_everything());
        assert!(empty.matches(&BTreeMap::new()));

        let none = Selector::from_optional(None).expect("valid");
        assert!(none.is_nothing());
        assert!(!none.matches(&BTreeMap::new()));
    }

    #[test]
    fn label_selector_conversion_errors() {
        let bad_op = label_selector().expression("a", "Gt", &["1"]).build();
        assert!(Selector::from_label_selector(&bad_op).is_err());
        let in_without_values = label_selector().expression("a", "In", &[]).build();
        assert!(Selector::from_label_selector(&in_without_values).is_err());
        let exists_with_values = label_selector().expression("a", "Exists", &["x"]).build();
        assert!(Selector::from_label_selector(&exists_with_values).is_err());
        let bad_key = selector(&[("bad key", "x")]);
        assert!(matches!(
            Selector::from_label_selector(&bad_key),
            Err(Error::InvalidKey { .. })
        ));
    }

    #[test]
    fn key_and_value_validation() {
        assert!(validate_label_key("app").is_ok());
        assert!(validate_label_key("example.com/app-name_1.x").is_ok());
        assert!(validate_label_key("/app").is_err());
        assert!(validate_label_key("Example.com/app").is_err());
        assert!(validate_label_key(&"a".repeat(64)).is_err());
        assert!(validate_label_value("").is_ok());
        assert!(validate_label_value("v1.2_3-x").is_ok());
        assert!(validate_label_value("-v").is_err());
        assert!(validate_label_value(&"a".repeat(64)).is_err());
    }
}
