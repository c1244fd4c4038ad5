//! CEL evaluation errors in cel-go's words: kube-apiserver's messages quote cel-go (`no such key: x`, `division by zero`), the `cel` crate words them its own way.

use cel::{ExecutionError, Value};

/// The text cel-go gives for the error `e` (its `types.Err` messages); an error cel-go has
/// no counterpart for keeps the crate's text.
pub fn message(e: &ExecutionError) -> String {
    match e {
        ExecutionError::NoSuchKey(key) => format!("no such key: {key}"),
        ExecutionError::DivisionByZero(_) => "division by zero".to_owned(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".to_owned(),
        ExecutionError::Overflow(_, Value::UInt(_), _) => "unsigned integer overflow".to_owned(),
        ExecutionError::Overflow(..) => "integer overflow".to_owned(),
        // cel-go also names the list's size ("... in list size '3'"), which the crate's error
        // does not carry.
        ExecutionError::IndexOutOfBounds(Value::Int(i)) => format!("index '{i}' out of range"),
        ExecutionError::NoSuchOverload(_)
        | ExecutionError::UnexpectedType { .. }
        | ExecutionError::UnsupportedBinaryOperator(..)
        | ExecutionError::ValuesNotComparable(..) => "no such overload".to_owned(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use cel::{Context, Program};

    use super::*;

    fn error_of(expression: &str) -> String {
        let program = Program::compile(expression).expect("compiles");
        match program.execute(&Context::default()) {
            Err(e) => message(&e),
            Ok(v) => panic!("{expression} evaluated to {v:?}"),
        }
    }

    #[test]
    fn evaluation_errors_read_as_cel_go_words_them() {
        for (expression, want) in [
            ("{'a': 1}.b", "no such key: b"),
            ("{'a': 1}['b']", "no such key: b"),
            ("1 / 0", "division by zero"),
            ("5 % 0", "modulus by zero"),
            ("9223372036854775807 + 1", "integer overflow"),
            ("18446744073709551615u + 1u", "unsigned integer overflow"),
            ("[1, 2][5]", "index '5' out of range"),
            ("1 + 'a'", "no such overload"),
        ] {
            assert_eq!(error_of(expression), want, "{expression}");
        }
    }
}
