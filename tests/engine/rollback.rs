//! Fibers own their effects: a plugin whose `apply` fails or panics after
//! registering leaves nothing behind, the other entries still load, and
//! disposing a fiber unregisters what it registered.

use cordis_engine::loader::EntryState;
use cordis_engine::tools::ToolCall;
use cordis_session::Appender;
use cordis_tests::Scratch;
use serde_json::json;

const COMPOSITION: &str = "\
- id: fails
  name: fixture-faulty/fails-apply
- id: panics
  name: fixture-faulty/panics-apply
- id: echo
  name: fixture-faulty/echo
- id: todo
  name: tool-todo
  config:
    allowParallelInProgress: true
";

fn failure(state: &EntryState) -> String {
    match state {
        EntryState::Failed(m) => m.join("\n"),
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[test]
fn failed_apply_leaves_no_tool_and_no_event_type() {
    let scratch = Scratch::new();
    let host = scratch.boot(COMPOSITION, true);
    let fails = failure(&host.reports[0].state);
    assert!(fails.contains("cordis.yml:1: entry fails: plugin fails-apply failed to apply: fixture failure"), "{fails}");
    let panics = failure(&host.reports[1].state);
    assert!(panics.contains("plugin panics-apply panicked in apply: fixture panic in apply"), "{panics}");

    assert!(host.services.tools.get("fails_tool").is_none(), "the failed fiber's tool must be disposed");
    assert!(host.services.tools.get("panics_tool").is_none(), "the panicked fiber's tool must be disposed");
    assert!(host.services.events.get("fails/event").is_none(), "the failed fiber's event type must be released");

    assert_eq!(host.reports[2].state, EntryState::Loaded);
    assert_eq!(host.reports[3].state, EntryState::Loaded);
    let names: Vec<String> = host.services.tools.schemas().into_iter().map(|s| s.name).collect();
    assert_eq!(names, vec!["echo", "todo_write"]);
}

#[test]
fn disposing_a_fiber_unregisters_its_tool_event_type_and_projection() {
    let scratch = Scratch::new();
    let host = scratch.boot(COMPOSITION, true);
    assert!(host.loader.dispose("todo"));
    assert!(host.services.tools.get("todo_write").is_none());
    assert!(host.services.events.get("todo/write").is_none());
    assert!(host.services.projections.get("todos").is_none());
    assert!(host.services.tools.get("echo").is_some(), "other fibers are untouched");
    assert!(!host.loader.dispose("todo"), "disposing twice is a no-op");

    // Calling a disposed tool is an error result, not a crash.
    let result = host.services.tools.execute(&ToolCall { id: "c", name: "todo_write", arguments: "{}" }, None);
    assert!(result.is_error);
    assert!(result.text.contains("unknown tool `todo_write`"), "{}", result.text);
}

#[test]
fn a_panicking_execute_becomes_an_error_result() {
    let scratch = Scratch::new();
    let host = scratch.boot("- id: p\n  name: fixture-faulty/panics-execute\n", true);
    let session = host.services.sessions.create(None).unwrap();
    session.append_value("turn/start", &json!({"turn": 1}), Appender::Host).unwrap();
    let result = host.services.tools.execute(&ToolCall { id: "c", name: "panicking_tool", arguments: r#"{"text": "x"}"# }, Some(&session));
    assert!(result.is_error);
    assert!(result.text.contains("plugin panics-execute panicked in panicking_tool.execute"), "{}", result.text);
    // The host keeps working.
    let again = host.services.tools.execute(&ToolCall { id: "d", name: "panicking_tool", arguments: "[]" }, Some(&session));
    assert!(again.text.contains("$ must be an object"), "{}", again.text);
}

#[test]
fn plugins_append_only_their_own_types_and_only_inside_a_turn() {
    let scratch = Scratch::new();
    let host = scratch.boot(COMPOSITION, true);
    let session = host.services.sessions.create(None).unwrap();
    let call = ToolCall { id: "c", name: "echo", arguments: r#"{"text": "hi"}"# };
    let outside = host.services.tools.execute(&call, Some(&session));
    assert!(outside.is_error && outside.text.contains("inside an open turn"), "{}", outside.text);
    session.append_value("turn/start", &json!({"turn": 1}), Appender::Host).unwrap();
    let inside = host.services.tools.execute(&call, Some(&session));
    assert!(!inside.is_error, "{}", inside.text);
    assert_eq!(session.events().last().unwrap().kind, "echo/said");
    // Nobody owns this type: appends are refused.
    let err = session.append_text("nobody/owns", "{}", Appender::Host).unwrap_err().to_string();
    assert!(err.contains("no loaded plugin owns event type `nobody/owns`"), "{err}");
}
