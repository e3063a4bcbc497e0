//! Hostile tool input: whatever text a model sends as
//! `todo_write` arguments, the real compiled tool-todo library, called
//! through the host's tool registry, answers with a clear error naming the
//! limit or the JSON path at fault, never panics or overflows its stack, and
//! appends nothing to the calling session when it refuses the call.
//!
//! The examples come first; the property test at the end throws arbitrary
//! JSON values and arbitrary text at the plugin and checks the same promises,
//! plus agreement with the in-process pipeline (the same code, linked as an
//! rlib).

use std::sync::Arc;

use cordis_abi::schema::Checker;
use cordis_abi::sdk::parse_arguments;
use cordis_engine::agent::{Agent, Quiet, ScriptedModel};
use cordis_engine::tools::{ToolCall, ToolResult, MAX_ARGUMENT_BYTES};
use cordis_engine::Host;
use cordis_session::{Appender, Session};
use cordis_tests::Scratch;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{json, Value};
use tool_todo::{check_todo_write, validate_call, Policy, TodoArgs};

fn composition(parallel: bool) -> String {
    format!("- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: {parallel}\n")
}

/// A host with tool-todo loaded and a session with an open turn.
struct Rig {
    host: Host,
    session: Arc<Session>,
    calls: std::cell::Cell<u64>,
    _scratch: Scratch,
}

impl Rig {
    fn new(parallel: bool) -> Rig {
        Rig::with_storage(parallel, true)
    }

    fn with_storage(parallel: bool, in_memory: bool) -> Rig {
        let scratch = Scratch::new();
        let host = scratch.boot(&composition(parallel), in_memory);
        let session = host.services.sessions.create(None).expect("create a session");
        session.append_value("turn/start", &json!({"turn": 1}), Appender::Host).expect("open a turn");
        Rig { host, session, calls: std::cell::Cell::new(0), _scratch: scratch }
    }

    /// Runs `todo_write` with `arguments` as the session's agent; returns
    /// the result and the events the call appended.
    fn call(&self, arguments: &str) -> (ToolResult, Vec<(String, Value)>) {
        let n = self.calls.get();
        self.calls.set(n + 1);
        let before = self.session.len();
        let id = format!("hostile-{n}");
        let result = self.host.services.tools.execute(&ToolCall { id: &id, name: "todo_write", arguments }, Some(&*self.session));
        let appended = self.session.with_events(|events| events[before..].iter().map(|e| (e.kind.clone(), e.data_value())).collect());
        (result, appended)
    }

    /// Runs a call that must be refused: returns the error text (without
    /// `Error: `) after checking nothing was appended and no panic leaked.
    fn refused(&self, arguments: &str) -> String {
        let (result, appended) = self.call(arguments);
        let shown: String = arguments.chars().take(120).collect();
        assert!(result.is_error, "accepted {shown:?}: {result:?}");
        assert!(appended.is_empty(), "a refused call appended {appended:?} for {shown:?}");
        assert!(result.value.is_none(), "{result:?}");
        assert!(!result.text.contains("panicked"), "{}", result.text);
        let message = result.text.strip_prefix("Error: ").unwrap_or_else(|| panic!("no `Error: ` prefix: {}", result.text));
        message.to_string()
    }

    /// Runs a call that must be accepted: returns the appended `todo/write`
    /// data after checking it is the only event and passes the invariant.
    fn accepted(&self, arguments: &str) -> Value {
        let (result, appended) = self.call(arguments);
        let shown: String = arguments.chars().take(120).collect();
        assert!(!result.is_error, "refused {shown:?}: {}", result.text);
        assert_eq!(appended.len(), 1, "{appended:?}");
        let (kind, data) = &appended[0];
        assert_eq!(kind, "todo/write");
        check_todo_write(&data.to_string()).expect("the stored list passes the invariant");
        data.clone()
    }
}

fn item(content: &str, status: &str) -> Value {
    json!({"content": content, "status": status})
}

fn todos(items: Vec<Value>) -> String {
    json!({ "todos": items }).to_string()
}

/// Short enough to read: an error meant for a model must not echo a
/// megabyte of input back.
const MAX_ERROR_CHARS: usize = 8 * 1024;

fn short(message: &str) {
    let count = message.chars().count();
    assert!(count <= MAX_ERROR_CHARS, "an error of {count} characters: {}…", message.chars().take(200).collect::<String>());
}

#[test]
fn todos_sent_as_a_json_string_is_named_as_a_string() {
    let rig = Rig::new(true);
    let inner = todos(vec![item("read the code", "in_progress")]);
    let inner_list = json!([item("read the code", "in_progress")]).to_string();
    let message = rig.refused(&json!({ "todos": inner_list }).to_string());
    assert!(message.starts_with("invalid arguments: $.todos must be an array, got the string \"[{"), "{message}");
    // The whole arguments object encoded as a string.
    let message = rig.refused(&Value::String(inner).to_string());
    assert!(message.contains("$ must be an object, got the string"), "{message}");
}

#[test]
fn deep_nesting_is_a_clear_error_not_a_stack_overflow() {
    let rig = Rig::new(true);
    let depth = 10_000;
    let arrays = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    let objects = format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth));
    let cases = [
        arrays.clone(),
        objects.clone(),
        format!("{{\"todos\": {arrays}}}"),
        format!("{{\"todos\": [{{\"content\": {arrays}, \"status\": \"pending\"}}]}}"),
        format!("{{\"todos\": [], \"extra\": {objects}}}"),
        // Unclosed: the parser must stop at the depth limit, not at the end.
        "[".repeat(depth),
    ];
    for arguments in &cases {
        let message = rig.refused(arguments);
        assert!(message.starts_with("invalid arguments: not valid JSON"), "{message}");
        assert!(message.contains("nested more than 127 levels deep at line 1 column"), "{message}");
        short(&message);
    }
    // Just under the limit parses, and is then refused by the schema.
    let shallow = format!("{{\"todos\": [{{\"content\": {}1{}, \"status\": \"pending\"}}]}}", "[".repeat(124), "]".repeat(124));
    let message = rig.refused(&shallow);
    assert!(message.contains("$.todos[0].content must be a string, got an array"), "{message}");
}

/// The reference's `todo_write` accepts a list of 1 001 todos and a todo of
/// 5 000 characters with the usual reply; so does ours. The expected values are the oracle's output for the
/// same calls.
#[test]
fn long_lists_and_long_todos_are_accepted_as_the_reference_accepts_them() {
    for parallel in [true, false] {
        let rig = Rig::new(parallel);
        let list = |n: usize| todos((0..n).map(|i| item(&format!("t{i}"), "pending")).collect());
        let (result, events) = rig.call(&list(1001));
        assert!(!result.is_error, "{}", result.text);
        assert_eq!(result.text, "Updated todo list: 1001 pending, 0 in progress, 0 completed.");
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].1["todos"].as_array().map(Vec::len), Some(1001));
        let data = rig.accepted(&list(20_000));
        assert_eq!(data["todos"].as_array().map(Vec::len), Some(20_000));
    }
    let rig = Rig::new(true);
    let long = "x".repeat(5000);
    let (result, events) = rig.call(&todos(vec![item(&long, "pending")]));
    assert_eq!(result.text, "Updated todo list: 1 pending, 0 in progress, 0 completed.", "{}", result.text);
    assert_eq!(events[0].1, json!({"todos": [{"content": long, "status": "pending"}]}));
    // Trimmed, then stored whole: half a megabyte of wide characters.
    let wide = format!("  {}\t", "語".repeat(150_000));
    let data = rig.accepted(&todos(vec![item(&wide, "in_progress")]));
    assert_eq!(data["todos"][0]["content"].as_str().map(|s| s.chars().count()), Some(150_000));
}

/// A call's time is linear in its size: a list filling the 1 MiB argument
/// cap (about 45 000 todos) takes about as long per byte as a small one.
#[test]
fn a_call_filling_the_argument_cap_takes_linear_time() {
    let rig = Rig::new(true);
    let list = |n: usize| todos((0..n).map(|i| item(&format!("task number {i}"), "pending")).collect());
    let mut n = 1000;
    while list(n * 2).len() < MAX_ARGUMENT_BYTES {
        n *= 2;
    }
    let small = list(n / 16);
    let big = list(n);
    let time = |text: &str| {
        let start = std::time::Instant::now();
        rig.accepted(text);
        start.elapsed()
    };
    time(&small);
    let t_small = (0..3).map(|_| time(&small)).min().unwrap();
    let t_big = (0..3).map(|_| time(&big)).min().unwrap();
    // 16 times the input: linear is about 16 times the time; quadratic
    // would be 256. The bound leaves room for a noisy machine.
    assert!(t_big < t_small * 64 + std::time::Duration::from_millis(50), "{t_small:?} for {} bytes, {t_big:?} for {} bytes", small.len(), big.len());
}

#[test]
fn argument_text_over_the_byte_cap_is_refused_before_the_plugin() {
    let rig = Rig::new(true);
    // Valid JSON, and a valid list but for its size: the host refuses it
    // on size alone.
    let pad = " ".repeat(MAX_ARGUMENT_BYTES);
    let arguments = format!("{}{pad}", todos(vec![item("a", "pending")]));
    let message = rig.refused(&arguments);
    assert_eq!(message, format!("invalid arguments: {} bytes is over the limit of 1048576 bytes for one call", arguments.len()));
    // Exactly at the cap goes through to the plugin.
    let head = todos(vec![item("a", "pending")]);
    let at_cap = format!("{head}{}", " ".repeat(MAX_ARGUMENT_BYTES - head.len()));
    assert_eq!(at_cap.len(), MAX_ARGUMENT_BYTES);
    rig.accepted(&at_cap);
}

#[test]
fn huge_values_in_other_places_give_short_errors() {
    let rig = Rig::new(true);
    let big = "z".repeat(600_000);
    let cases = [
        // A huge status: shown as a preview.
        todos(vec![item("a", &big)]),
        // A huge unknown item key.
        json!({"todos": [{"content": "a", "status": "pending", big.clone(): 1}]}).to_string(),
        // A huge string where the object belongs.
        Value::String(big.clone()).to_string(),
        // Tens of thousands of violations.
        todos((0..60_000).map(|_| json!(0)).collect()),
        todos((0..20_000).map(|i| item(&i.to_string(), "done")).collect()),
    ];
    for arguments in &cases {
        assert!(arguments.len() <= MAX_ARGUMENT_BYTES);
        let message = rig.refused(arguments);
        assert!(message.starts_with("invalid arguments: $"), "{}", message.chars().take(200).collect::<String>());
        short(&message);
    }
    let message = rig.refused(&todos((0..60_000).map(|_| json!(0)).collect()));
    assert!(message.starts_with("invalid arguments: $.todos[0] must be an object, got the number 0; $.todos[1] must be"), "{message}");
    assert!(message.contains("more violations"), "{message}");
}

#[test]
fn text_that_is_not_json_is_refused_with_its_position() {
    let rig = Rig::new(true);
    for (arguments, expected) in [
        ("", "EOF while parsing a value at line 1 column 0"),
        ("   \n\t", "EOF while parsing a value at line 2 column 1"),
        ("todos: []", "expected ident at line 1 column 2"),
        ("{\"todos\": [}", "expected value at line 1 column 12"),
        ("{\"todos\": []} trailing", "trailing characters at line 1 column 15"),
        ("{'todos': []}", "key must be a string at line 1 column 2"),
        ("{\"todos\": [],}", "trailing comma at line 1 column 14"),
        ("NaN", "expected value at line 1 column 1"),
        ("{\"todos\": [{\"content\": \"a\", \"status\": \"pending\"}]", "EOF while parsing an object at line 1 column 49"),
        ("\u{feff}{\"todos\": []}", "expected value at line 1 column 1"),
    ] {
        let message = rig.refused(arguments);
        assert_eq!(message, format!("invalid arguments: not valid JSON ({expected})"), "for {arguments:?}");
    }
}

#[test]
fn lone_surrogates_are_refused() {
    let rig = Rig::new(true);
    for (content, problem) in [
        (r#""\ud800""#, "unexpected end of hex escape at line 1 column 31"),
        (r#""\ud83d""#, "unexpected end of hex escape at line 1 column 31"),
        (r#""a\udc00b""#, "lone leading surrogate in hex escape at line 1 column 31"),
        (r#""\ud800\u0041""#, "lone leading surrogate in hex escape at line 1 column 36"),
    ] {
        let arguments = format!("{{\"todos\": [{{\"content\": {content}, \"status\": \"pending\"}}]}}");
        let message = rig.refused(&arguments);
        assert!(message.starts_with("invalid arguments: not valid JSON ("), "{message}");
        assert!(message.contains(problem), "{content}: {message}");
        assert!(message.contains("a surrogate (\\uD800 to \\uDFFF) must be half of a pair"), "{message}");
    }
    // A proper pair is a character like any other.
    let data = rig.accepted(r#"{"todos": [{"content": "ship \ud83d\ude80", "status": "pending"}]}"#);
    assert_eq!(data["todos"][0]["content"], "ship 🚀");
}

#[test]
fn control_characters_raw_are_refused_and_escaped_are_kept_whole() {
    let rig = Rig::new(true);
    for raw in ["\0", "\u{1}", "\n", "\u{1b}"] {
        let arguments = format!("{{\"todos\": [{{\"content\": \"a{raw}b\", \"status\": \"pending\"}}]}}");
        let message = rig.refused(&arguments);
        assert!(message.starts_with("invalid arguments: not valid JSON (control character"), "{message}");
    }
    let message = rig.refused("\0");
    assert!(message.starts_with("invalid arguments: not valid JSON (expected value at line 1 column 1"), "{message}");
    // Escaped, a NUL is a character of the string: JSON allows it and so
    // does the reference. It is stored escaped, never as a NUL byte.
    let message = rig.refused(r#"{"todos": [{"content": "\u0000", "status": "pending"}, {"content": "\u0000", "status": "pending"}]}"#);
    assert!(message.starts_with(r#"$.todos[1].content "\u0000" repeats $.todos[0].content"#), "{message}");
    let data = rig.accepted(r#"{"todos": [{"content": "a\u0000b", "status": "pending"}]}"#);
    assert_eq!(data["todos"][0]["content"], "a\u{0}b");
}

#[test]
fn escaped_nul_content_survives_the_log_and_replay() {
    let scratch = Scratch::new();
    let arguments = r#"{"todos": [{"content": "nul \u0000 inside", "status": "in_progress"}]}"#;
    let id = {
        let host = scratch.boot(&composition(true), false);
        let session = host.services.sessions.create(None).unwrap();
        session.append_value("turn/start", &json!({"turn": 1}), Appender::Host).unwrap();
        let result = host.services.tools.execute(&ToolCall { id: "c1", name: "todo_write", arguments }, Some(&*session));
        assert!(!result.is_error, "{}", result.text);
        session.id().to_string()
    };
    let file = scratch.path().join(".cordis/sessions").join(format!("{id}.jsonl"));
    let bytes = std::fs::read(&file).unwrap();
    assert!(!bytes.contains(&0), "no NUL byte reaches the log file");
    let host = scratch.boot(&composition(true), false);
    let (session, problems) = host.services.sessions.open(&id).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    let plan: Value = serde_json::from_str(&session.state("todos").unwrap()).unwrap();
    assert_eq!(plan, json!([{"content": "nul \u{0} inside", "status": "in_progress"}]));
}

#[test]
fn every_refusal_leaves_the_session_and_plan_as_they_were() {
    let rig = Rig::new(false);
    rig.accepted(&todos(vec![item("keep me", "in_progress")]));
    let plan = rig.session.state("todos");
    let len = rig.session.len();
    let hostile = [
        String::new(),
        "null".into(),
        "[]".into(),
        "{}".into(),
        r#"{"todos": null}"#.into(),
        r#"{"todos": {}}"#.into(),
        r#"{"todos": [null]}"#.into(),
        r#"{"todos": [{"content": "a"}]}"#.into(),
        r#"{"todos": [{"content": "a", "status": "pending", "id": 1}]}"#.into(),
        r#"{"todos": [{"content": "a", "status": "in_progress"}, {"content": "b", "status": "in_progress"}]}"#.into(),
        r#"{"todos": [{"content": " ", "status": "pending"}]}"#.into(),
        r#"{"todos": [{"content": 1e400, "status": "pending"}]}"#.into(),
        r#"{"todos": [{"content": "a", "status": "pending"}, {"content": "a ", "status": "pending"}]}"#.into(),
        "[".repeat(100_000),
    ];
    for arguments in &hostile {
        rig.refused(arguments);
        assert_eq!(rig.session.len(), len);
        assert_eq!(rig.session.state("todos"), plan);
    }
}

#[test]
fn hostile_calls_in_an_agent_turn_are_answered_and_the_log_replays() {
    let scratch = Scratch::new();
    let first = todos(vec![item("read the code", "in_progress"), item("fix it", "pending")]);
    let hostile = [
        format!("{first}{}", " ".repeat(MAX_ARGUMENT_BYTES)),
        "[".repeat(10_000),
        json!({ "todos": json!([item("a", "pending")]).to_string() }).to_string(),
        String::new(),
        r#"{"todos": [{"content": "\ud800", "status": "pending"}]}"#.to_string(),
    ];
    let call = |arguments: &str| json!({"name": "todo_write", "arguments": arguments});
    // JSON is YAML: the script is written as JSON so any text survives.
    let script = json!({"steps": [
        {"text": "plan", "calls": [call(&first)]},
        {"text": "hostile", "calls": hostile.iter().map(|a| call(a)).collect::<Vec<_>>()},
        {"text": "done"},
    ]});
    let mut model = ScriptedModel::parse(&script.to_string(), "hostile.yml").expect("the script parses");

    let id = {
        let host = scratch.boot(&composition(false), false);
        let session = host.services.sessions.create(None).unwrap();
        let summary = Agent::new(session.clone(), host.services.tools.clone(), &mut model).run_turn("go", &mut Quiet).unwrap();
        assert_eq!((summary.tool_calls, summary.tool_errors), (1 + hostile.len() as u32, hostile.len() as u32));
        let events = session.events();
        assert_eq!(events.iter().filter(|e| e.kind == "todo/write").count(), 1, "only the valid call is recorded");
        let results: Vec<Value> = events.iter().filter(|e| e.kind == "tool/result").map(|e| e.data_value()).collect();
        assert_eq!(results.len(), 1 + hostile.len());
        for result in &results[1..] {
            let text = result.to_string();
            assert!(text.contains("Error: ") && !text.contains("panicked"), "{}", text.chars().take(300).collect::<String>());
        }
        session.id().to_string()
    };

    let host = scratch.boot(&composition(false), false);
    let (session, problems) = host.services.sessions.open(&id).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    let plan: Value = serde_json::from_str(&session.state("todos").unwrap()).unwrap();
    assert_eq!(plan, json!([item("read the code", "in_progress"), item("fix it", "pending")]), "the plan survives the hostile calls");
}

// ---------------------------------------------------------------------------
// Property test: arbitrary JSON and text through the loaded plugin.

/// Leaves of arbitrary JSON, biased towards the strings the tool cares about.
fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        any::<String>().prop_map(Value::String),
        interesting_string().prop_map(Value::String),
    ]
}

fn interesting_string() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("pending".to_string()),
        Just("in_progress".to_string()),
        Just("completed".to_string()),
        Just("todos".to_string()),
        Just("content".to_string()),
        Just("status".to_string()),
        "[ \t\n\u{a0}\u{feff}\u{2028}]{0,3}[a-c]{1,3}[ \t\n\u{3000}]{0,3}",
        "\\PC{0,12}",
    ]
}

/// Arbitrary JSON values, a few levels deep.
fn any_json() -> impl Strategy<Value = Value> {
    json_leaf().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((interesting_string(), inner), 0..6).prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
        ]
    })
}

/// Values shaped like a `todo_write` call, with mistakes mixed in, so that
/// both the accepting and the refusing paths are well covered.
fn todo_shaped() -> impl Strategy<Value = Value> {
    let status = prop_oneof![
        10 => prop_oneof![Just("pending"), Just("in_progress"), Just("completed")].prop_map(Value::from),
        1 => json_leaf(),
    ];
    let content = prop_oneof![10 => interesting_string().prop_map(Value::String), 1 => json_leaf()];
    let todo = (content, status, prop::option::weighted(0.05, (interesting_string(), json_leaf()))).prop_map(|(c, s, extra)| {
        let mut map = serde_json::Map::new();
        map.insert("content".into(), c);
        map.insert("status".into(), s);
        if let Some((k, v)) = extra {
            map.insert(k, v);
        }
        Value::Object(map)
    });
    let item = prop_oneof![20 => todo, 1 => any_json()];
    (prop::collection::vec(item, 0..6), prop::option::weighted(0.1, (interesting_string(), any_json()))).prop_map(|(items, extra)| {
        let mut map = serde_json::Map::new();
        map.insert("todos".into(), Value::Array(items));
        if let Some((k, v)) = extra {
            map.insert(k, v);
        }
        Value::Object(map)
    })
}

/// Argument text: JSON values (compact or pretty), raw strings, or a valid
/// value with a cut or spliced tail.
fn argument_text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => todo_shaped().prop_map(|v| v.to_string()),
        1 => todo_shaped().prop_map(|v| serde_json::to_string_pretty(&v).unwrap_or_default()),
        2 => any_json().prop_map(|v| v.to_string()),
        1 => any::<String>(),
        1 => (todo_shaped(), any::<prop::sample::Index>(), "\\PC{0,3}").prop_map(|(v, at, tail)| {
            let text = v.to_string();
            let cut = at.index(text.len() + 1);
            let cut = (0..=cut).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
            format!("{}{tail}", &text[..cut])
        }),
    ]
}

/// What the in-process pipeline (the plugin's own code, without the ABI)
/// decides for `arguments`: the stored list, or an error.
fn in_process(arguments: &str, checker: &Checker, policy: Policy) -> Result<Vec<tool_todo::Todo>, String> {
    let value = parse_arguments(arguments, checker)?;
    let args: TodoArgs = serde_json::from_value(value).map_err(|e| format!("invalid arguments: {e}"))?;
    validate_call(args, policy)
}

#[test]
fn arbitrary_arguments_never_panic_and_never_half_record() {
    let rigs = [Rig::new(true), Rig::new(false)];
    let checker = Checker::new(tool_todo::tool::parameters()).unwrap();
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(256);
    let config = Config { cases, failure_persistence: None, ..Config::default() };
    let mut runner = TestRunner::new(config);
    let (accepted, refused) = (std::cell::Cell::new(0u32), std::cell::Cell::new(0u32));
    let outcome = runner.run(&(argument_text(), any::<bool>()), |(arguments, parallel)| {
        let rig = &rigs[usize::from(!parallel)];
        let policy = if parallel { Policy::Parallel } else { Policy::Single };
        let (result, appended) = rig.call(&arguments);
        prop_assert!(!result.text.contains("panicked"), "a panic reached the result: {}", result.text);
        let expected = in_process(&arguments, &checker, policy);
        if result.is_error {
            refused.set(refused.get() + 1);
            prop_assert!(appended.is_empty(), "refused, yet appended {:?}", appended);
            prop_assert!(result.text.starts_with("Error: "), "{}", result.text);
            let Err(reason) = expected else {
                return Err(TestCaseError::fail(format!("the plugin refused what the pipeline accepts: {}", result.text)));
            };
            prop_assert_eq!(&result.text["Error: ".len()..], reason.as_str());
        } else {
            accepted.set(accepted.get() + 1);
            prop_assert_eq!(appended.len(), 1, "{:?}", appended);
            let (kind, data) = &appended[0];
            prop_assert_eq!(kind.as_str(), "todo/write");
            check_todo_write(&data.to_string()).map_err(TestCaseError::fail)?;
            let stored = data["todos"].as_array().map_or(0, Vec::len);
            let value = result.value().ok_or_else(|| TestCaseError::fail("no value"))?;
            prop_assert_eq!(&value["todos"], &data["todos"]);
            let counts = &value["counts"];
            let counted: u64 = ["pending", "inProgress", "completed"].iter().filter_map(|k| counts[*k].as_u64()).sum();
            prop_assert_eq!(counted, stored as u64);
            let expected = expected.map_err(|e| TestCaseError::fail(format!("the plugin accepted what the pipeline refuses: {e}")))?;
            prop_assert_eq!(data, &json!({ "todos": expected }));
        }
        Ok(())
    });
    if let Err(e) = outcome {
        panic!("{e}");
    }
    // The generators reach both paths (not a flaky bound: about half of the
    // todo-shaped values are valid).
    let (accepted, refused) = (accepted.get(), refused.get());
    eprintln!("accepted {accepted}, refused {refused}");
    assert!(accepted > 0 && refused > 0, "accepted {accepted}, refused {refused}");
}
