//! The `allowParallelInProgress` policy, set through cordis.yml: the
//! description and the accepted input follow it together, and bad config is
//! reported with its key and line.

use cordis_engine::loader::EntryState;
use cordis_engine::tools::ToolCall;
use cordis_engine::Host;
use cordis_session::Appender;
use cordis_tests::Scratch;

const TWO_ACTIVE: &str = r#"{"todos": [{"content": "subagent a", "status": "in_progress"}, {"content": "subagent b", "status": "in_progress"}]}"#;

fn boot(scratch: &Scratch, value: &str) -> Host {
    scratch.boot(&format!("- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: {value}\n"), false)
}

fn call_two_active(host: &Host) -> (bool, String, usize) {
    let session = host.services.sessions.create(None).unwrap();
    session.append_value("turn/start", &serde_json::json!({"turn": 1}), Appender::Host).unwrap();
    let before = session.len();
    let result = host.services.tools.execute(&ToolCall { id: "c1", name: "todo_write", arguments: TWO_ACTIVE }, Some(&session));
    let writes = session.with_events(|e| e[before..].iter().filter(|e| e.kind == "todo/write").count());
    (result.is_error, result.text, writes)
}

#[test]
fn single_policy_states_the_rule_and_rejects_two_active() {
    let scratch = Scratch::new();
    let host = boot(&scratch, "false");
    let schema = host.services.tools.get("todo_write").unwrap().schema.clone();
    assert!(schema.description.contains("at most one todo `in_progress`"), "{}", schema.description);
    let (is_error, text, writes) = call_two_active(&host);
    assert!(is_error, "{text}");
    assert!(text.contains("at most one") && text.contains('2'), "{text}");
    assert_eq!(writes, 0, "nothing may be appended on a rejected call");
}

#[test]
fn parallel_policy_accepts_and_logs_two_active() {
    let scratch = Scratch::new();
    let host = boot(&scratch, "true");
    let description = host.services.tools.get("todo_write").unwrap().schema.description.clone();
    assert!(description.contains("several at a time"), "{description}");
    assert!(!description.contains("at most one todo"), "{description}");
    let (is_error, text, writes) = call_two_active(&host);
    assert!(!is_error, "{text}");
    assert_eq!(text, "Updated todo list: 0 pending, 2 in progress, 0 completed.");
    assert_eq!(writes, 1);
}

fn failure(host: &Host) -> String {
    match &host.reports[0].state {
        EntryState::Failed(m) => m.join("\n"),
        other => panic!("the entry must fail, got {other:?}"),
    }
}

#[test]
fn missing_key_names_the_key_and_line() {
    let scratch = Scratch::new();
    let host = scratch.boot("# deployment\n- id: todo\n  name: tool-todo\n  config: {}\n", true);
    let f = failure(&host);
    assert!(f.ends_with("/cordis.yml:4: entry todo: $.allowParallelInProgress is required"), "{f}");
    assert!(host.services.tools.get("todo_write").is_none());
    let host = scratch.boot("- id: todo\n  name: tool-todo\n", true);
    let f = failure(&host);
    assert!(f.ends_with("/cordis.yml:1: entry todo: $.allowParallelInProgress is required"), "{f}");
}

#[test]
fn yes_is_not_a_boolean() {
    let scratch = Scratch::new();
    let host = scratch.boot("- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: yes\n", true);
    let f = failure(&host);
    assert!(f.contains("/cordis.yml:4: entry todo: $.allowParallelInProgress must be a boolean, got the string \"yes\""), "{f}");
    assert!(f.contains("write true or false"), "{f}");
    let host = scratch.boot("- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: \"false\"\n", true);
    assert!(failure(&host).contains("must be a boolean, got the string \"false\""));
}

#[test]
fn misspelled_key_is_an_unknown_key() {
    let scratch = Scratch::new();
    let host = scratch.boot("- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgres: true\n", true);
    let f = failure(&host);
    assert!(f.contains("cordis.yml:4: entry todo: $.allowParallelInProgres is not an allowed key (allowed: allowParallelInProgress)"), "{f}");
    assert!(f.contains("cordis.yml:3: entry todo: $.allowParallelInProgress is required"), "{f}");
}
