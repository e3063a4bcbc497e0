//! A tool call's arguments: parsed from the model's JSON text, with nesting
//! and reported violations bounded, and checked against the tool's schema.

use serde::de::DeserializeOwned;
#[cfg(feature = "checker")]
use serde_json::Value;

#[cfg(feature = "checker")]
use crate::schema::{self, Checker};

/// Parses a call's argument text straight into the tool's typed arguments.
///
/// # Errors
/// `invalid arguments: ...`: not valid JSON (as [`parse_arguments`] says
/// it), or not the shape of `A`.
pub fn parse_typed<A: DeserializeOwned>(arguments: &str) -> Result<A, String> {
    serde_json::from_str(arguments).map_err(|e| match e.classify() {
        serde_json::error::Category::Data => format!("invalid arguments: {e}"),
        _ => format!("invalid arguments: not valid JSON ({})", json_error(&e)),
    })
}

/// How deeply arrays and objects may nest in a call's arguments: the JSON
/// parser's own limit, which keeps a hostile `[[[[...` from exhausting the
/// stack. Deeper text is refused as not valid JSON, naming this limit.
pub const MAX_ARGUMENT_DEPTH: usize = 127;

/// How many schema violations one error lists; the rest are counted. A
/// runaway call with thousands of bad items gets an error a model can read.
pub const MAX_LISTED_VIOLATIONS: usize = 20;

/// Parses a call's raw argument text and checks it against the tool's
/// schema: what the host does with every call before the tool runs (feature
/// `checker`).
///
/// # Errors
/// A one-line message starting with `invalid arguments:` when the text is
/// not JSON (with the line and column, and [`MAX_ARGUMENT_DEPTH`] when it
/// nests too deeply), not an object, or violates the schema (the first
/// [`MAX_LISTED_VIOLATIONS`] violations listed, the rest counted).
#[cfg(feature = "checker")]
pub fn parse_arguments(arguments: &str, checker: &Checker) -> Result<Value, String> {
    let value: Value = serde_json::from_str(arguments).map_err(|e| format!("invalid arguments: not valid JSON ({})", json_error(&e)))?;
    if !value.is_object() {
        return Err(format!("invalid arguments: $ must be an object, got {}", schema::describe_value(&value)));
    }
    let violations = checker.violations(&value);
    if !violations.is_empty() {
        let listed = schema::join(&violations[..violations.len().min(MAX_LISTED_VIOLATIONS)]);
        let more = violations.len().saturating_sub(MAX_LISTED_VIOLATIONS);
        return Err(match more {
            0 => format!("invalid arguments: {listed}"),
            1 => format!("invalid arguments: {listed}; and 1 more violation"),
            n => format!("invalid arguments: {listed}; and {n} more violations"),
        });
    }
    Ok(value)
}

/// The parser's message, with two of its terse ones explained: the depth
/// limit (`serde_json` says only "recursion limit exceeded") and bad `\u`
/// escapes, where a lone surrogate is reported as an "unexpected end of hex
/// escape" or a "lone leading surrogate".
pub(super) fn json_error(e: &serde_json::Error) -> String {
    let text = e.to_string();
    if text.starts_with("recursion limit exceeded") {
        format!("arrays and objects nested more than {MAX_ARGUMENT_DEPTH} levels deep at line {} column {}", e.line(), e.column())
    } else if text.contains("hex escape") || text.starts_with("invalid unicode code point") {
        format!("{text}: a \\u escape takes four hex digits, and a surrogate (\\uD800 to \\uDFFF) must be half of a pair")
    } else {
        text
    }
}

#[cfg(all(test, feature = "checker"))]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn checker() -> Checker {
        Checker::new(json!({
            "type": "object",
            "properties": {"items": {"type": "array", "items": {"type": "string"}}},
            "required": ["items"]
        }))
        .unwrap()
    }

    #[test]
    fn nesting_up_to_the_limit_parses_and_deeper_names_the_limit() {
        let nested = |depth: usize| format!("{{\"items\": [], \"x\": {}{}}}", "[".repeat(depth - 1), "]".repeat(depth - 1));
        assert!(parse_arguments(&nested(MAX_ARGUMENT_DEPTH), &checker()).is_ok());
        let err = parse_arguments(&nested(MAX_ARGUMENT_DEPTH + 1), &checker()).unwrap_err();
        assert_eq!(err, "invalid arguments: not valid JSON (arrays and objects nested more than 127 levels deep at line 1 column 146)");
        let err = parse_arguments(&"[".repeat(1_000_000), &checker()).unwrap_err();
        assert!(err.contains("nested more than 127 levels deep at line 1 column 128"), "{err}");
    }

    #[test]
    fn lone_surrogates_are_explained() {
        for (text, at) in [(r#""\ud800""#, "column 19"), (r#""\udc00x""#, "column 18")] {
            let err = parse_arguments(&format!("{{\"items\": [{text}]}}"), &checker()).unwrap_err();
            assert!(err.starts_with("invalid arguments: not valid JSON ("), "{err}");
            assert!(err.contains(at), "{err}");
            assert!(err.ends_with(": a \\u escape takes four hex digits, and a surrogate (\\uD800 to \\uDFFF) must be half of a pair)"), "{err}");
        }
    }

    #[test]
    fn other_parse_errors_keep_the_parser_message() {
        let err = parse_arguments("{\"items\": [}", &checker()).unwrap_err();
        assert_eq!(err, "invalid arguments: not valid JSON (expected value at line 1 column 12)");
    }

    #[test]
    fn violations_past_the_listed_limit_are_counted() {
        let items = |n: usize| json!({"items": vec![0; n]}).to_string();
        let err = parse_arguments(&items(MAX_LISTED_VIOLATIONS), &checker()).unwrap_err();
        assert_eq!(err.matches("must be a string").count(), MAX_LISTED_VIOLATIONS);
        assert!(err.ends_with("$.items[19] must be a string, got the number 0"), "{err}");
        let err = parse_arguments(&items(MAX_LISTED_VIOLATIONS + 1), &checker()).unwrap_err();
        assert!(err.ends_with("$.items[19] must be a string, got the number 0; and 1 more violation"), "{err}");
        let err = parse_arguments(&items(5000), &checker()).unwrap_err();
        assert_eq!(err.matches("must be a string").count(), MAX_LISTED_VIOLATIONS);
        assert!(err.starts_with("invalid arguments: $.items[0] must be a string, got the number 0; $.items[1] "), "{err}");
        assert!(err.ends_with("; and 4980 more violations"), "{err}");
    }
}
