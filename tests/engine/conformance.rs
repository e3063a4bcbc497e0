//! Reference conformance: every call of `tests/data/oracle/calls.jsonl` (the
//! reference implementation's recorded cases) replayed through the compiled tool-todo
//! library loaded from cordis.yml, under both policies. `isError`, the logged
//! `todo/write` data and the structured value must match the reference
//! TypeScript implementation's output on every line; error texts must name
//! the same offending path or value (the wording is ours).

use cordis_engine::tools::ToolCall;
use cordis_session::Appender;
use cordis_tests::{repo_root, Scratch};
use serde_json::{json, Value};

fn lines(file: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(repo_root().join("tests/data/oracle").join(file)).unwrap();
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn strip_descriptions(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            Value::Object(m.iter().filter(|(k, _)| k.as_str() != "description").map(|(k, v)| (k.clone(), strip_descriptions(v))).collect())
        }
        Value::Array(a) => Value::Array(a.iter().map(strip_descriptions).collect()),
        other => other.clone(),
    }
}

/// The paths and quoted values the reference's error names, and how ours
/// must name them: `"todos[0].status"` → `$.todos[0].status`,
/// `"arguments"` → `$`, a quoted value → the same quoted value.
fn named_things(expected: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = expected;
    while let Some(start) = rest.find('"') {
        let after = &rest[start + 1..];
        let Some(end) = after.find('"') else { break };
        let inner = &after[..end];
        rest = &after[end + 1..];
        if inner == "arguments" {
            out.push("$ ".to_string());
        } else if inner.starts_with("todos") {
            out.push(format!("$.{inner}"));
        } else if !inner.is_empty() && !inner.contains(',') && !["pending", "in_progress", "completed"].contains(&inner) {
            out.push(format!("\"{inner}\""));
        }
    }
    if expected.contains("`content` must be a non-empty string") {
        out.push("content".into());
    }
    if expected.contains("at most one") {
        out.push("at most one".into());
    }
    if expected.contains("owning agent session") {
        out.push("session".into());
    }
    out
}

fn conform(policy: bool, expected_file: &str) {
    let scratch = Scratch::new();
    let host = scratch.boot(&format!("- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: {policy}\n"), true);
    let expected = lines(expected_file);
    let calls = lines("calls.jsonl");
    assert_eq!(expected.len(), calls.len() + 1);

    let ours = host.services.tools.get("todo_write").expect("todo_write is registered").schema.clone();
    let theirs = &expected[0]["tools"][0];
    assert_eq!(ours.name, theirs["name"]);
    assert_eq!(strip_descriptions(&ours.parameters), strip_descriptions(&theirs["parameters"]), "parameter schemas differ");

    let session = host.services.sessions.create(None).unwrap();
    session.append_value("turn/start", &json!({"turn": 1}), Appender::Host).unwrap();
    for (i, (call, want)) in calls.iter().zip(&expected[1..]).enumerate() {
        let note = call["note"].as_str().unwrap_or("");
        // A missing `args` key reaches the tool as empty argument text.
        let arguments = call.get("args").map(Value::to_string).unwrap_or_default();
        let agent = call["agent"].as_bool() != Some(false);
        let before = session.len();
        let result = host
            .services
            .tools
            .execute(&ToolCall { id: &format!("oracle-{i}"), name: "todo_write", arguments: &arguments }, agent.then_some(&*session));
        let events: Vec<Value> = session.with_events(|e| e[before..].iter().filter(|e| e.kind == "todo/write").map(|e| e.data_value()).collect());
        let context = format!("line {} ({note}), allowParallelInProgress: {policy}: ours {result:?}", i + 1);
        assert_eq!(Value::Bool(result.is_error), want["isError"], "{context}");
        assert_eq!(Value::Array(events), want["events"], "{context}");
        assert_eq!(result.value().unwrap_or(Value::Null), want["structured"], "{context}");
        if result.is_error {
            assert!(result.text.starts_with("Error: "), "{context}");
            for thing in named_things(want["text"].as_str().unwrap()) {
                assert!(result.text.contains(&thing), "{context}: our error should name {thing}");
            }
        } else {
            assert_eq!(Value::String(result.text.clone()), want["text"], "{context}");
        }
    }
}

#[test]
fn matches_the_reference_under_the_parallel_policy() {
    conform(true, "expected-parallel.jsonl");
}

#[test]
fn matches_the_reference_under_the_single_policy() {
    conform(false, "expected-single.jsonl");
}
