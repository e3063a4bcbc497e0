//! Agreement with the reference TypeScript implementation.
//!
//! `tests/data/oracle/` (at the workspace root) holds the reference's recorded cases: `calls.jsonl`
//! (varied calls) and the reference's outputs under both policies. For every
//! call we run the same pipeline as the tool's `execute` (the SDK's
//! `parse_arguments` against our schema, then `execute_call`, whose first
//! step is `validate_call`) in-process, and compare with the reference:
//! `isError`, the stored lists (`events`), the structured value, and the
//! exact reply text on success. Error wording is ours; we check that it names
//! the same offending path or value.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed unwrap is a failed test

use std::cell::RefCell;

use cordis_abi::schema::Checker;
use cordis_abi::sdk::parse_arguments;
use cordis_abi::{JsonStr, JsonText};
use serde_json::Value;
use tool_todo::{execute_call, execute_call_encoded, tool, validate_call, Policy, TodoArgs, TodoSink, TodoWrite};

const CALLS: &str = include_str!("../../../../tests/data/oracle/calls.jsonl");
const EXPECTED_PARALLEL: &str = include_str!("../../../../tests/data/oracle/expected-parallel.jsonl");
const EXPECTED_SINGLE: &str = include_str!("../../../../tests/data/oracle/expected-single.jsonl");

fn lines(text: &str) -> Vec<Value> {
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// A session stand-in that records appended `todo/write` data.
struct Recorder {
    session: bool,
    events: RefCell<Vec<Value>>,
}

impl TodoSink for Recorder {
    fn has_session(&self) -> bool {
        self.session
    }
    fn append_todo_write(&self, data: JsonStr<'_>) -> Result<u64, String> {
        let data = data.as_str();
        // What the host would check before writing.
        serde_json::from_str::<TodoWrite>(data).map_err(|e| e.to_string())?;
        tool_todo::check_todo_write(data)?;
        let mut events = self.events.borrow_mut();
        events.push(serde_json::from_str(data).unwrap());
        Ok(events.len() as u64 - 1)
    }
}

/// Our error text (without the SDK's `Error: ` prefix) must name what the
/// reference's error names.
fn assert_same_complaint(note: &str, expected: &str, ours: &str) {
    let expected = expected.strip_prefix("Error: ").unwrap_or(expected);
    if let Some(rest) = expected.strip_prefix("invalid arguments: ") {
        assert!(ours.starts_with("invalid arguments: "), "{note}: {ours}");
        let ours_rest = &ours["invalid arguments: ".len()..];
        let theirs: Vec<&str> = rest.split("; ").collect();
        let mine: Vec<&str> = ours_rest.split("; ").collect();
        assert_eq!(theirs.len(), mine.len(), "{note}: violation count\n theirs: {rest}\n ours:   {ours_rest}");
        // Same violations in the same order: per object, missing keys,
        // then checks on values in the schema's property order, then
        // unknown keys.
        for (t, m) in theirs.iter().zip(&mine) {
            let want = our_violation_prefix(t);
            assert!(m.starts_with(&want), "{note}: expected a violation starting {want:?}, got {m:?} (all: {mine:?})");
        }
    } else if expected.contains("`content` must be a non-empty string") {
        assert!(ours.contains(".content must not be empty"), "{note}: {ours}");
    } else if let Some(dup) = expected.strip_prefix("invalid todos: duplicate content ") {
        // `dup` is the JSON-quoted content.
        assert!(ours.contains(&format!("content {dup} repeats")), "{note}: {ours}");
    } else if let Some(got) = expected.strip_prefix("invalid todos: at most one task may be in_progress (got ") {
        let n = got.trim_end_matches(')');
        assert!(ours.contains("at most one todo may be in_progress"), "{note}: {ours}");
        assert!(ours.ends_with(&format!(" {n}")), "{note}: {ours}");
    } else if expected.contains("requires an owning agent session") {
        assert!(ours.contains("needs an agent session"), "{note}: {ours}");
    } else if expected.contains("losslessly JSON-serializable") {
        // No arguments at all: the raw text is empty.
        assert!(ours.starts_with("invalid arguments: not valid JSON"), "{note}: {ours}");
    } else {
        panic!("{note}: unclassified reference error {expected:?} (ours: {ours:?})");
    }
}

/// The start of our violation text for one of the reference's violations.
fn our_violation_prefix(theirs: &str) -> String {
    let quoted = |s: &str| -> String {
        let start = s.find('"').unwrap() + 1;
        let end = start + s[start..].find('"').unwrap();
        s[start..end].to_string()
    };
    if theirs.starts_with("missing required property ") {
        format!("$.{} is required", quoted(theirs))
    } else if theirs == "\"arguments\" must be an object" {
        "$ must be an object".into()
    } else if theirs.ends_with("is not a declared property (additionalProperties: false)") {
        format!("$.{} is not an allowed key", quoted(theirs))
    } else if theirs.contains("\" must be one of ") {
        format!("$.{} must be one of \"pending\", \"in_progress\", \"completed\"", quoted(theirs))
    } else if let Some(i) = theirs.find("\" must be ") {
        format!("$.{} must be {}", quoted(theirs), &theirs[i + "\" must be ".len()..])
    } else {
        panic!("unclassified reference violation {theirs:?}")
    }
}

fn check_policy(policy: Policy, expected_text: &str) {
    let calls = lines(CALLS);
    let expected = lines(expected_text);
    assert!(expected[0].get("tools").is_some(), "first line is the schema");
    let expected = &expected[1..];
    assert_eq!(calls.len(), expected.len());
    let checker = Checker::new(tool::parameters()).unwrap();
    let mut past_schema = 0;

    for (call, want) in calls.iter().zip(expected) {
        let note = call["note"].as_str().unwrap();
        let raw = call.get("args").map(Value::to_string).unwrap_or_default();
        let agent = call["agent"].as_bool().unwrap();
        let want_error = want["isError"].as_bool().unwrap();
        let want_text = want["text"].as_str().unwrap();

        let value = match parse_arguments(&raw, &checker) {
            Ok(value) => value,
            Err(ours) => {
                assert!(want_error, "{note}: we reject at the schema stage ({ours}), the reference accepts");
                assert_same_complaint(note, want_text, &ours);
                continue;
            }
        };
        past_schema += 1;
        let args: TodoArgs = serde_json::from_value(value).unwrap();

        // The validation alone.
        let validated = validate_call(args.clone(), policy);
        let want_events = want["events"].as_array().unwrap();
        match &validated {
            Ok(list) if agent => {
                assert!(!want_error, "{note}: we accept, the reference rejects with {want_text}");
                assert_eq!(want_events.len(), 1, "{note}");
                assert_eq!(serde_json::json!({"todos": list}), want_events[0], "{note}: stored list");
            }
            Ok(_) => assert!(want_error, "{note}: non-agent call must fail"),
            Err(ours) => {
                assert!(want_error, "{note}: we reject ({ours}), the reference accepts");
                assert_same_complaint(note, want_text, ours);
            }
        }

        // The whole execute path.
        let sink = Recorder { session: agent, events: RefCell::new(Vec::new()) };
        let args_again = args.clone();
        match execute_call(args, policy, &sink) {
            Ok(reply) => {
                assert!(!want_error, "{note}: we accept, the reference rejects with {want_text}");
                assert_eq!(reply.text, want_text, "{note}: reply text");
                assert_eq!(reply.value.as_ref(), Some(&want["structured"]), "{note}: structured value");
                // Byte-for-byte: same keys in the same order.
                assert_eq!(reply.value.unwrap().to_string(), want["structured"].to_string(), "{note}");
                // The path the tool runs (the value encoded straight to
                // text) appends and answers the same.
                let encoded_sink = Recorder { session: agent, events: RefCell::new(Vec::new()) };
                let encoded = execute_call_encoded(args_again, policy, &encoded_sink)
                    .unwrap_or_else(|e| panic!("{note}: the encoded path failed ({e}) where the plain one did not"));
                assert_eq!(encoded.text, want_text, "{note}: encoded reply text");
                assert_eq!(
                    encoded.value.as_ref().map(JsonText::as_str),
                    Some(want["structured"].to_string().as_str()),
                    "{note}: encoded structured value"
                );
                assert_eq!(&*encoded_sink.events.borrow(), want_events, "{note}: encoded events");
            }
            Err(ours) => {
                assert!(want_error, "{note}: we reject ({ours}), the reference accepts");
                assert!(want["structured"].is_null(), "{note}");
                assert_same_complaint(note, want_text, &ours.0);
            }
        }
        assert_eq!(&*sink.events.borrow(), want_events, "{note}: events");
    }
    assert!(past_schema >= 15, "most calls reach the validation ({past_schema})");
}

#[test]
fn agrees_with_the_reference_under_the_parallel_policy() {
    check_policy(Policy::Parallel, EXPECTED_PARALLEL);
}

#[test]
fn agrees_with_the_reference_under_the_single_policy() {
    check_policy(Policy::Single, EXPECTED_SINGLE);
}

fn strip_descriptions(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.remove("description");
            map.values_mut().for_each(strip_descriptions);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_descriptions),
        _ => {}
    }
}

#[test]
fn schema_matches_the_reference_apart_from_wording() {
    for (policy, text) in [(Policy::Parallel, EXPECTED_PARALLEL), (Policy::Single, EXPECTED_SINGLE)] {
        let first = &lines(text)[0]["tools"][0];
        assert_eq!(first["name"], tool_todo::TOOL_NAME);
        let mut theirs = first["parameters"].clone();
        let mut ours = tool::parameters();
        for path in ["/properties/todos", "/properties/todos/items/properties/content", "/properties/todos/items/properties/status"] {
            let d = ours.pointer(path).and_then(|s| s.get("description")).and_then(Value::as_str).unwrap();
            assert!(!d.is_empty());
            assert_ne!(Some(d), theirs.pointer(path).and_then(|s| s.get("description")).and_then(Value::as_str), "own words at {path}");
        }
        strip_descriptions(&mut theirs);
        strip_descriptions(&mut ours);
        assert_eq!(ours, theirs);
        assert_ne!(tool::description(policy), first["description"].as_str().unwrap(), "own words");
    }
}
