//! The few CEL device selector forms the simulated DRA driver needs, evaluated without a CEL
//! engine.
//!
//! Supported: `device.driver`, `device.attributes["<domain>"].<name>` (also
//! `device.attributes["<domain>"]["<name>"]`), string, integer and boolean literals, `==`,
//! `!=`, `&&`, `||`, `!` and parentheses, e.g. `device.driver == "gpu.sim.kcm.io" &&
//! device.attributes["gpu.sim.kcm.io"].model == "sim-gpu"`. An attribute the device does not
//! have compares unequal to everything (CEL would fail the evaluation, which does not select
//! the device either). Anything else (capacity quantities, functions, `in`, comparisons other
//! than equality) is a [`CelError`]: the device is not selected.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{Device, DeviceAttribute};

/// Why an expression could not be evaluated.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("CEL expression {expression:?} not supported by kcm's simulated DRA: {reason}")]
pub struct CelError {
    /// The expression.
    pub expression: String,
    /// What was not understood.
    pub reason: String,
}

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Ident(String),
    Str(String),
    Int(i64),
    Op(&'static str),
}

fn tokenize(src: &str) -> Result<Vec<Token>, String> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
        if let Some(op) = ["==", "!=", "&&", "||"].into_iter().find(|op| *op == two) {
            out.push(Token::Op(op));
            i += 2;
            continue;
        }
        if let Some(op) = ["!", "(", ")", "[", "]", "."]
            .into_iter()
            .find(|op| op.starts_with(c))
        {
            out.push(Token::Op(op));
            i += 1;
            continue;
        }
        if c == '"' || c == '\'' {
            let quote = c;
            let mut s = String::new();
            i += 1;
            loop {
                match chars.get(i) {
                    None => return Err("unterminated string".into()),
                    Some('\\') => {
                        let Some(next) = chars.get(i + 1) else {
                            return Err("unterminated string".into());
                        };
                        s.push(*next);
                        i += 2;
                    }
                    Some(ch) if *ch == quote => {
                        i += 1;
                        break;
                    }
                    Some(ch) => {
                        s.push(*ch);
                        i += 1;
                    }
                }
            }
            out.push(Token::Str(s));
            continue;
        }
        if c.is_ascii_digit() || (c == '-' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) {
            let start = i;
            i += 1;
            while chars.get(i).is_some_and(char::is_ascii_digit) {
                i += 1;
            }
            let text: String = chars[start..i].iter().collect();
            let n = text.parse().map_err(|_| format!("bad integer {text}"))?;
            out.push(Token::Int(n));
            continue;
        }
        if c.is_alphabetic() || c == '_' {
            let start = i;
            while chars
                .get(i)
                .is_some_and(|ch| ch.is_alphanumeric() || *ch == '_')
            {
                i += 1;
            }
            out.push(Token::Ident(chars[start..i].iter().collect()));
            continue;
        }
        return Err(format!("unexpected character {c:?}"));
    }
    Ok(out)
}

/// A value an operand evaluates to; `Missing` for an attribute the device lacks.
#[derive(Clone, Debug, PartialEq)]
enum Value {
    Str(String),
    Int(i64),
    Bool(bool),
    Missing,
}

struct Eval<'a> {
    tokens: Vec<Token>,
    pos: usize,
    driver: &'a str,
    device: &'a Device,
}

impl Eval<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    fn eat(&mut self, op: &str) -> bool {
        if matches!(self.peek(), Some(Token::Op(o)) if *o == op) {
            self.pos += 1;
            return true;
        }
        false
    }

    fn expect(&mut self, op: &str) -> Result<(), String> {
        if self.eat(op) {
            Ok(())
        } else {
            Err(format!("expected {op:?}"))
        }
    }

    fn or(&mut self) -> Result<bool, String> {
        let mut value = self.and()?;
        while self.eat("||") {
            let rhs = self.and()?;
            value = value || rhs;
        }
        Ok(value)
    }

    fn and(&mut self) -> Result<bool, String> {
        let mut value = self.unary()?;
        while self.eat("&&") {
            let rhs = self.unary()?;
            value = value && rhs;
        }
        Ok(value)
    }

    fn unary(&mut self) -> Result<bool, String> {
        if self.eat("!") {
            return Ok(!self.unary()?);
        }
        if self.eat("(") {
            let value = self.or()?;
            self.expect(")")?;
            return Ok(value);
        }
        let lhs = self.operand()?;
        let negate = if self.eat("==") {
            false
        } else if self.eat("!=") {
            true
        } else {
            return match lhs {
                Value::Bool(b) => Ok(b),
                Value::Missing => Ok(false),
                other => Err(format!("{other:?} is not a boolean")),
            };
        };
        let rhs = self.operand()?;
        let equal = lhs != Value::Missing && rhs != Value::Missing && lhs == rhs;
        Ok(equal != negate)
    }

    fn operand(&mut self) -> Result<Value, String> {
        let token = self.peek().cloned();
        self.pos += 1;
        match token {
            Some(Token::Str(s)) => Ok(Value::Str(s)),
            Some(Token::Int(n)) => Ok(Value::Int(n)),
            Some(Token::Ident(id)) if id == "true" => Ok(Value::Bool(true)),
            Some(Token::Ident(id)) if id == "false" => Ok(Value::Bool(false)),
            Some(Token::Ident(id)) if id == "device" => self.device_path(),
            other => Err(format!("unexpected {other:?}")),
        }
    }

    /// After `device`: `.driver` or `.attributes[...]...`.
    fn device_path(&mut self) -> Result<Value, String> {
        self.expect(".")?;
        let field = match self.peek().cloned() {
            Some(Token::Ident(f)) => f,
            other => return Err(format!("unexpected {other:?} after device.")),
        };
        self.pos += 1;
        match field.as_str() {
            "driver" => Ok(Value::Str(self.driver.to_owned())),
            "attributes" => {
                self.expect("[")?;
                let domain = match self.peek().cloned() {
                    Some(Token::Str(d)) => d,
                    other => return Err(format!("unexpected {other:?} as attribute domain")),
                };
                self.pos += 1;
                self.expect("]")?;
                let name = if self.eat(".") {
                    match self.peek().cloned() {
                        Some(Token::Ident(n)) => {
                            self.pos += 1;
                            n
                        }
                        other => return Err(format!("unexpected {other:?} as attribute name")),
                    }
                } else {
                    self.expect("[")?;
                    let n = match self.peek().cloned() {
                        Some(Token::Str(n)) => n,
                        other => return Err(format!("unexpected {other:?} as attribute name")),
                    };
                    self.pos += 1;
                    self.expect("]")?;
                    n
                };
                Ok(attribute(self.driver, self.device, &domain, &name))
            }
            other => Err(format!("device.{other} is not supported")),
        }
    }
}

/// The attribute `domain`/`name` of the device: keys are qualified (`domain/name`) or, in the
/// driver's own domain, bare.
fn attribute(driver: &str, device: &Device, domain: &str, name: &str) -> Value {
    let empty = BTreeMap::new();
    let attributes = device.attributes.as_ref().unwrap_or(&empty);
    let found = attributes
        .get(&format!("{domain}/{name}"))
        .or_else(|| (domain == driver).then(|| attributes.get(name)).flatten());
    match found {
        Some(DeviceAttribute {
            string: Some(s), ..
        }) => Value::Str(s.clone()),
        Some(DeviceAttribute { int: Some(n), .. }) => Value::Int(*n),
        Some(DeviceAttribute { bool: Some(b), .. }) => Value::Bool(*b),
        Some(DeviceAttribute {
            version: Some(v), ..
        }) => Value::Str(v.clone()),
        _ => Value::Missing,
    }
}

/// Whether `expression` selects `device` of `driver`.
pub fn selects(expression: &str, driver: &str, device: &Device) -> Result<bool, CelError> {
    let error = |reason: String| CelError {
        expression: expression.to_owned(),
        reason,
    };
    let tokens = tokenize(expression).map_err(error)?;
    let mut eval = Eval {
        tokens,
        pos: 0,
        driver,
        device,
    };
    let value = eval.or().map_err(error)?;
    if eval.pos != eval.tokens.len() {
        return Err(error(format!("unexpected {:?}", eval.peek())));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu() -> Device {
        let mut attributes = BTreeMap::new();
        attributes.insert(
            "model".to_owned(),
            DeviceAttribute {
                string: Some("sim-gpu".into()),
                ..DeviceAttribute::default()
            },
        );
        attributes.insert(
            "gpu.sim.kcm.io/index".to_owned(),
            DeviceAttribute {
                int: Some(1),
                ..DeviceAttribute::default()
            },
        );
        Device {
            name: "gpu-1".into(),
            attributes: Some(attributes),
            ..Device::default()
        }
    }

    #[test]
    fn evaluates_the_supported_forms() {
        let d = gpu();
        let cases: &[(&str, bool)] = &[
            (r#"device.driver == "gpu.sim.kcm.io""#, true),
            (r#"device.driver == 'other.example.com'"#, false),
            (r#"device.driver != "other""#, true),
            (
                r#"device.attributes["gpu.sim.kcm.io"].model == "sim-gpu""#,
                true,
            ),
            (r#"device.attributes["gpu.sim.kcm.io"]["index"] == 1"#, true),
            (r#"device.attributes["gpu.sim.kcm.io"].index == 2"#, false),
            (r#"device.attributes["other.io"].model == "sim-gpu""#, false),
            (
                r#"device.driver == "gpu.sim.kcm.io" && !(device.attributes["gpu.sim.kcm.io"].index == 0)"#,
                true,
            ),
            (r#"device.driver == "x" || true"#, true),
            ("true", true),
        ];
        for (expression, want) in cases {
            assert_eq!(
                selects(expression, "gpu.sim.kcm.io", &d),
                Ok(*want),
                "{expression}"
            );
        }
    }

    #[test]
    fn unsupported_forms_are_errors() {
        for expression in [
            r#"device.capacity["gpu.sim.kcm.io"].memory.compareTo(quantity("1Gi")) >= 0"#,
            r#"device.driver == "#,
            r#"device.driver == "x" extra"#,
        ] {
            assert!(
                selects(expression, "gpu.sim.kcm.io", &gpu()).is_err(),
                "{expression}"
            );
        }
    }
}
