//! `todo-read` with `tool-todo`, through the real binary and the compiled
//! libraries: the tool reads the plan of the session that calls it through
//! the `session.read` capability (cordis-abi 1.4), with no session id from
//! the model; a 1.0 host refuses it before it runs, naming the capability.

use cordis_tests::dev::Dev;
use cordis_tests::{library, Scratch};
use serde_json::json;

const COMPOSITION: &str = "- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: false\n- id: read\n  name: todo-read\n";

#[test]
fn todo_read_answers_with_the_calling_sessions_plan() {
    let scratch = Scratch::new();
    scratch.composition(COMPOSITION);
    let mut dev = Dev::start(scratch.path(), &[]);

    let before = dev.call("todo_read", "{}");
    assert_eq!(before["isError"], false, "{before}");
    assert!(before["text"].as_str().unwrap().starts_with("There is no current plan"), "{before}");
    assert_eq!(before["value"], json!({"todos": []}));

    let plan = json!({"todos": [
        {"content": "read the loader", "status": "completed"},
        {"content": "fix the reload", "status": "in_progress"},
        {"content": "write the test", "status": "pending"}
    ]});
    assert_eq!(dev.call("todo_write", &plan.to_string())["isError"], false);
    let after = dev.call("todo_read", "{}");
    assert_eq!(after["isError"], false, "{after}");
    assert_eq!(after["text"], "[completed] read the loader\n[in_progress] fix the reload\n[pending] write the test");
    assert_eq!(after["value"], plan);

    // Arguments are refused: the tool takes none.
    let refused = dev.call("todo_read", r#"{"session": "s-1"}"#);
    assert_eq!(refused["isError"], true, "{refused}");
}

#[test]
fn without_tool_todo_todo_read_waits_and_check_says_for_what() {
    let scratch = Scratch::new();
    scratch.composition("- id: read\n  name: todo-read\n");
    let stdout = String::from_utf8_lossy(&scratch.cordis(&["check"]).stdout).to_string();
    assert!(stdout.contains("waiting  read (todo-read)"), "{stdout}");
    assert!(stdout.contains("waiting for service `todos`, which nothing provides"), "{stdout}");
}

#[test]
fn the_library_declares_its_requirement() {
    let scratch = Scratch::new();
    std::fs::copy(library("todo-read"), scratch.path().join("libtodo_read.so")).unwrap();
    let out = scratch.cordis(&["--plugin-dir", scratch.path().to_str().unwrap(), "plugins"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("requires session.read@1 (cordis-abi 1.4)"), "{stdout}");
}
