//! A turn through the real agent loop and the real plugin: event order,
//! `deriveMessages()`, the `todos` projection's life cycle, durability across
//! processes, and continuing a session.

use cordis_host::agent::{Agent, Quiet, ScriptedModel};
use cordis_host::session::{derive_messages, Appender, Message};
use cordis_tests::{text, Scratch};
use serde_json::{json, Value};

const COMPOSITION: &str = "- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: true\n";

const SCRIPT: &str = r#"
steps:
  - text: planning
    calls:
      - name: todo_write
        arguments: '{"todos": [{"content": "read the code", "status": "in_progress"}, {"content": "  write the fix ", "status": "pending"}]}'
  - text: working
    calls:
      - name: todo_write
        arguments: '{"todos": [{"content": "read the code", "status": "completed"}, {"content": "write the fix", "status": "in_progress"}]}'
  - text: done
"#;

fn kinds(events: &[cordis_host::session::Event]) -> Vec<String> {
    events.iter().map(|e| e.kind.clone()).collect()
}

#[test]
fn turn_order_messages_and_plan_life_cycle() {
    let scratch = Scratch::new();
    let host = scratch.boot(COMPOSITION, false);
    let sessions = &host.services.sessions;
    let session = sessions.create(None).unwrap();
    assert_eq!(session.state("todos").as_deref(), Some("null"), "no plan before any write");

    let mut model = ScriptedModel::parse(SCRIPT, "script.yml").unwrap();
    let summary = Agent::new(session.clone(), host.services.tools.clone(), &mut model).run_turn("fix it", &mut Quiet).unwrap();
    assert_eq!((summary.steps, summary.tool_calls, summary.tool_errors), (3, 2, 0));

    let events = session.events();
    let k = kinds(&events);
    assert_eq!(k.first().map(String::as_str), Some("turn/start"));
    assert_eq!(k.last().map(String::as_str), Some("turn/end"));
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (0..events.len() as u64).collect::<Vec<_>>(), "seq is contiguous from 0");
    // tool/call → todo/write → tool/result, twice, inside the turn.
    let calls: Vec<usize> = k.iter().enumerate().filter(|(_, t)| *t == "tool/call").map(|(i, _)| i).collect();
    assert_eq!(calls.len(), 2);
    for i in calls {
        assert_eq!(&k[i..i + 3], ["tool/call", "todo/write", "tool/result"]);
    }
    let first_write = events.iter().find(|e| e.kind == "todo/write").unwrap().data_value();
    assert_eq!(first_write["todos"][1]["content"], "write the fix", "content is stored trimmed");

    let messages = derive_messages(&events);
    assert_eq!(messages.len(), 1 + 3 + 2, "user, three assistant messages, two tool results");
    assert!(matches!(&messages[0], Message::User { text } if text == "fix it"));
    let dumped = serde_json::to_string(&messages).unwrap();
    assert!(!dumped.contains("todo/write"));
    assert!(messages.iter().all(|m| !matches!(m, Message::Tool { is_error: true, .. })));

    let plan: Value = serde_json::from_str(&session.state("todos").unwrap()).unwrap();
    assert_eq!(plan, json!([{"content": "read the code", "status": "completed"}, {"content": "write the fix", "status": "in_progress"}]),
        "turn/end keeps the finished list");

    // The next turn clears the plan at turn/start.
    let mut quiet_model = ScriptedModel::parse("steps:\n  - text: hello\n", "s.yml").unwrap();
    Agent::new(session.clone(), host.services.tools.clone(), &mut quiet_model).run_turn("hi", &mut Quiet).unwrap();
    assert_eq!(session.state("todos").as_deref(), Some("null"), "the next turn/start clears the plan");
}

#[test]
fn a_second_process_replays_the_same_plan_and_a_session_continues() {
    let scratch = Scratch::new();
    scratch.composition(COMPOSITION);
    std::fs::write(scratch.path().join("script.yml"), SCRIPT).unwrap();
    let run = scratch.cordis(&["run", "--script", "script.yml", "fix the parser"]);
    let (out, err) = text(&run);
    assert!(run.status.success(), "{out}\n{err}");
    let id = out.lines().next().and_then(|l| l.strip_prefix("session ")).and_then(|l| l.split(' ').next()).unwrap().to_string();
    assert!(out.contains("● write the fix"), "{out}");

    // Another process reads the same state directory and folds the same plan.
    let show = scratch.cordis(&["session", "show", &id]);
    let (shown, err) = text(&show);
    assert!(show.status.success(), "{err}");
    assert!(shown.contains("todos:\n  1 completed · 1 in progress\n  ✓ read the code\n  ● write the fix"), "{shown}");
    assert!(shown.contains("transcript (6 messages)"), "{shown}");

    // Continue the session: seq keeps counting, the plan is cleared by the
    // new turn and set again by its writes.
    let again = scratch.cordis(&["run", "--session", &id, "--script", "script.yml", "and again"]);
    let (out2, err2) = text(&again);
    assert!(again.status.success(), "{out2}\n{err2}");
    assert!(out2.contains("(continued,"), "{out2}");
    let file = scratch.path().join(".cordis/sessions").join(format!("{id}.jsonl"));
    let log = std::fs::read_to_string(file).unwrap();
    let seqs: Vec<u64> = log.lines().skip(1).map(|l| serde_json::from_str::<Value>(l).unwrap()["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>());
    assert_eq!(log.lines().filter(|l| l.contains("\"type\":\"turn/start\"")).count(), 2);
}

#[test]
fn a_second_writer_is_refused() {
    let scratch = Scratch::new();
    let host = scratch.boot(COMPOSITION, false);
    let session = host.services.sessions.create(None).unwrap();
    std::fs::write(scratch.path().join("script.yml"), SCRIPT).unwrap();
    let run = scratch.cordis(&["run", "--session", session.id(), "--script", "script.yml", "x"]);
    let (out, err) = text(&run);
    assert_eq!(run.status.code(), Some(2), "{out}\n{err}");
    assert!(err.contains("is open in another process"), "{err}");
}

#[test]
fn a_turn_left_open_by_a_crash_is_closed_with_results_for_its_calls() {
    let scratch = Scratch::new();
    let host = scratch.boot(COMPOSITION, false);
    let id = {
        let session = host.services.sessions.create(None).unwrap();
        session.append_value("turn/start", &json!({"turn": 1}), Appender::Host).unwrap();
        session.append_value("step/start", &json!({"turn": 1, "step": 1}), Appender::Host).unwrap();
        session
            .append_value("tool/call", &json!({"turn": 1, "step": 1, "callId": "c9", "name": "todo_write", "arguments": "{}"}), Appender::Host)
            .unwrap();
        session.id().to_string()
        // The process "dies" here: the turn is open and c9 has no result.
    };
    let (session, _) = host.services.sessions.open(&id).unwrap();
    let mut model = ScriptedModel::parse("steps:\n  - text: back\n", "s.yml").unwrap();
    Agent::new(session.clone(), host.services.tools.clone(), &mut model).run_turn("again", &mut Quiet).unwrap();
    let events = session.events();
    let k = kinds(&events);
    assert_eq!(&k[3..6], ["tool/result", "turn/end", "turn/start"]);
    let result = events[3].data_value();
    assert_eq!(result["message"]["content"][0]["toolCallId"], "c9");
    assert_eq!(result["message"]["content"][0]["isError"], true);
    assert_eq!(events[4].data_value()["reason"]["kind"], "interrupted");
    // The model's history pairs every call with a result.
    let messages = derive_messages(&events);
    assert!(matches!(&messages[0], Message::Tool { call_id, is_error: true, .. } if call_id == "c9"));
}
