//! A turn through the real agent loop and the real plugin: event order,
//! `deriveMessages()`, the `todos` projection's life cycle, durability across
//! processes, and continuing a session.

use cordis_engine::agent::{Agent, Quiet, ScriptedModel};
use cordis_session::{derive_messages, Appender, Message};
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

fn kinds(events: &[cordis_session::Event]) -> Vec<String> {
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
    assert_eq!(
        plan,
        json!([{"content": "read the code", "status": "completed"}, {"content": "write the fix", "status": "in_progress"}]),
        "turn/end keeps the finished list"
    );

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
            .append_value(
                "assistant/message",
                &json!({"turn": 1, "step": 1, "message": {"role": "assistant",
                "content": [{"type": "tool-call", "id": "c9", "name": "todo_write", "arguments": "{}"}]}}),
                Appender::Host,
            )
            .unwrap();
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
    // The step is closed before the turn, as the structure rules require.
    assert_eq!(&k[4..8], ["tool/result", "step/end", "turn/end", "turn/start"]);
    let result = events[4].data_value();
    assert_eq!(result["message"]["content"][0]["toolCallId"], "c9");
    assert_eq!(result["message"]["content"][0]["isError"], true);
    assert_eq!(result["error"]["code"], "TOOL_OUTCOME_UNKNOWN");
    assert_eq!(events[6].data_value()["reason"]["kind"], "interrupted");
    // The model's history pairs every call with a result.
    let messages = derive_messages(&events);
    assert!(matches!(&messages[1], Message::Tool { call_id, is_error: true, .. } if call_id == "c9"), "{messages:?}");
    assert_well_formed(&messages);
}

// ---------------------------------------------------------------------------
// Issue 11, kinds 1 and 2: the history stays well-formed, the log's
// structure rules hold, and every line not replayed as written is reported.

use cordis_engine::agent::{Model, ModelError, ModelRequest, ModelStep, StepSink};
use cordis_session::{LineProblem, ProblemKind};

/// A session log built event by event (seq counted), one JSON line each.
struct Log {
    lines: Vec<String>,
    seq: u64,
}

impl Log {
    fn new(id: &str) -> Log {
        Log { lines: vec![json!({"type": "session", "version": 0, "id": id, "createdAt": 1}).to_string()], seq: 0 }
    }

    /// Appends an event; surface types get `surfaceOp: "append"`. Returns
    /// its line number.
    fn push(&mut self, kind: &str, data: Value) -> usize {
        let mut e = json!({"seq": self.seq, "time": 1, "type": kind, "data": data});
        if matches!(kind, "user/message" | "assistant/message" | "tool/result") {
            e["surfaceOp"] = json!("append");
        }
        self.seq += 1;
        self.lines.push(e.to_string());
        self.lines.len()
    }

    fn text(&self) -> String {
        self.lines.iter().map(|l| format!("{l}\n")).collect()
    }
}

fn user(text: &str) -> Value {
    json!({"role": "user", "content": [{"type": "text", "text": text}], "source": {"kind": "user"}})
}

fn assistant(turn: u64, step: u64, text: &str, calls: &[&str]) -> Value {
    let mut content = vec![json!({"type": "text", "text": text})];
    content.extend(calls.iter().map(|c| json!({"type": "tool-call", "id": c, "name": "todo_write", "arguments": "{}"})));
    json!({"turn": turn, "step": step, "message": {"role": "assistant", "content": content}})
}

fn result(turn: u64, step: u64, call: &str, text: &str) -> Value {
    json!({"turn": turn, "step": step, "message": {"role": "user", "source": {"kind": "tool", "callId": call},
        "content": [{"type": "tool-result", "toolCallId": call, "content": [{"type": "text", "text": text}], "isError": false}]}})
}

/// Turn 1: a call `c1` answered in step 1, then a closing step; `between`
/// adds events after c1's result, inside step 1.
fn turn_one(log: &mut Log, between: impl FnOnce(&mut Log)) {
    log.push("turn/start", json!({"turn": 1}));
    log.push("user/message", user("plan it"));
    log.push("step/start", json!({"turn": 1, "step": 1}));
    log.push("assistant/message", assistant(1, 1, "planning", &["c1"]));
    log.push("tool/call", json!({"turn": 1, "step": 1, "callId": "c1", "name": "todo_write", "arguments": "{}"}));
    log.push("tool/result", result(1, 1, "c1", "Updated todo list"));
    between(log);
    log.push("step/end", json!({"turn": 1, "step": 1}));
    log.push("step/start", json!({"turn": 1, "step": 2}));
    log.push("assistant/message", assistant(1, 2, "done", &[]));
    log.push("step/end", json!({"turn": 1, "step": 2}));
    log.push("turn/end", json!({"turn": 1, "reason": {"kind": "completed"}}));
}

/// Every tool call has exactly one result, right after its message, and no
/// result is without its call.
fn assert_well_formed(messages: &[Message]) {
    let mut awaiting: Vec<&str> = Vec::new();
    for m in messages {
        match m {
            Message::Tool { call_id, .. } => {
                let i = awaiting.iter().position(|c| c == call_id).unwrap_or_else(|| panic!("result for {call_id} without its call: {messages:?}"));
                awaiting.remove(i);
            }
            other => {
                assert!(awaiting.is_empty(), "calls {awaiting:?} without results: {messages:?}");
                if let Message::Assistant { tool_calls, .. } = other {
                    awaiting.extend(tool_calls.iter().map(|c| c.id.as_str()));
                }
            }
        }
    }
    assert!(awaiting.is_empty(), "calls {awaiting:?} without results: {messages:?}");
}

/// A model that checks every history it is sent, then says "ok".
struct Checking(usize);

impl Model for Checking {
    fn provider(&self) -> &str {
        "test"
    }
    fn name(&self) -> &str {
        "checking"
    }
    fn next_step(&mut self, request: &ModelRequest<'_>, _sink: &mut dyn StepSink) -> Result<ModelStep, ModelError> {
        assert_well_formed(request.messages);
        self.0 += 1;
        Ok(ModelStep { text: "ok".into(), ..ModelStep::default() })
    }
}

fn write_log(scratch: &Scratch, name: &str, text: &str) -> String {
    let path = scratch.path().join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn at(problems: &[LineProblem], line: usize) -> Vec<String> {
    problems.iter().filter(|p| p.line == line).map(|p| p.message.clone()).collect()
}

#[test]
fn an_orphan_tool_result_is_reported_left_out_of_the_history_and_marked() {
    let scratch = Scratch::new();
    let host = scratch.boot(COMPOSITION, false);
    let mut log = Log::new("orphan");
    let mut orphan = 0;
    turn_one(&mut log, |log| orphan = log.push("tool/result", result(1, 1, "c9", "from nowhere")));
    let path = write_log(&scratch, "orphan.jsonl", &log.text());

    let (session, problems) = host.services.sessions.view(&path).unwrap();
    assert_eq!(
        at(&problems, orphan),
        [
            "breaks the log's structure: tool/result for call c9 with no tool/call for it in this step",
            "tool/result for call c9, which no assistant message right before it awaits; left out of the history",
        ]
    );
    assert_eq!(problems.len(), 2, "{problems:?}");
    let messages = session.with_events(derive_messages);
    assert_well_formed(&messages);
    assert_eq!(messages.len(), 4, "user, assistant c1, result c1, assistant: {messages:?}");

    // `session show` marks it; import reports it and skips no line.
    let (shown, _) = text(&scratch.cordis(&["session", "show", &path]));
    assert!(shown.contains(&format!("problem: line {orphan}: tool/result for call c9, which no assistant message")), "{shown}");
    let import = scratch.cordis(&["session", "import", &path]);
    let (out, err) = text(&import);
    assert!(import.status.success(), "{out}{err}");
    assert!(out.contains(&format!("orphan.jsonl:{orphan}: tool/result for call c9")), "{out}");
    assert!(out.contains("12 events (0 opaque), 0 lines skipped, 2 breaks of the log's rules"), "{out}");

    // Continuing gives the model a well-formed history; --strict refuses.
    drop(session);
    std::fs::write(scratch.path().join("s.yml"), "steps:\n  - text: hi\n").unwrap();
    let strict = scratch.cordis(&["--strict", "run", "--session", "orphan", "--script", "s.yml", "next"]);
    let (_, err) = text(&strict);
    assert_eq!(strict.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("error: session orphan: line {orphan}: breaks the log's structure")), "{err}");
    assert!(err.contains("--strict refuses it"), "{err}");
    let (session, _) = host.services.sessions.open("orphan").unwrap();
    let mut model = Checking(0);
    Agent::new(session.clone(), host.services.tools.clone(), &mut model).run_turn("next", &mut Quiet).unwrap();
    assert_eq!(model.0, 1);
}

#[test]
fn two_records_glued_on_one_line_are_split_and_kept() {
    let scratch = Scratch::new();
    let host = scratch.boot(COMPOSITION, false);
    let mut log = Log::new("glued");
    turn_one(&mut log, |_| {});
    // The result of c1 (line 7) and step/end (line 8) lost the newline
    // between them.
    let step_end = log.lines.remove(7);
    log.lines[6].push_str(&step_end);
    let path = write_log(&scratch, "glued.jsonl", &log.text());

    let (session, problems) = host.services.sessions.view(&path).unwrap();
    assert_eq!(problems, [LineProblem::note(7, "2 records on one line (a missing newline); each is read and kept")]);
    assert_eq!(session.len(), 11, "every record is kept");
    let messages = session.with_events(derive_messages);
    assert_well_formed(&messages);
    assert!(messages.contains(&Message::Tool { call_id: "c1".into(), text: "Updated todo list".into(), is_error: false }));

    let (out, _) = text(&scratch.cordis(&["session", "import", &path, "--id", "glued2"]));
    assert!(out.contains("11 events (0 opaque), 0 lines skipped, 0 breaks"), "{out}");
}

#[test]
fn a_result_truly_lost_in_a_closed_turn_gets_an_error_result_in_the_history() {
    let scratch = Scratch::new();
    let host = scratch.boot(COMPOSITION, false);
    let mut log = Log::new("lost");
    turn_one(&mut log, |_| {});
    log.lines.remove(6); // c1's result (seq 5)
    let path = write_log(&scratch, "lost.jsonl", &log.text());

    let (session, problems) = host.services.sessions.view(&path).unwrap();
    let shown: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "line 5: call c1 has no result; the history gives it an error result",
            "line 7: seq 6 follows 4: a gap, seq 5 is missing (the events after it are kept)",
        ]
    );
    let messages = session.with_events(derive_messages);
    assert_well_formed(&messages);
    assert!(matches!(&messages[2], Message::Tool { call_id, is_error: true, .. } if call_id == "c1"), "{messages:?}");
    drop(session);
    let import = scratch.cordis(&["session", "import", &path]);
    let (out, _) = text(&import);
    assert!(out.contains("0 lines skipped, 2 breaks"), "{out}");
    let (session, _) = host.services.sessions.open("lost").unwrap();
    let mut model = Checking(0);
    Agent::new(session.clone(), host.services.tools.clone(), &mut model).run_turn("next", &mut Quiet).unwrap();
    assert_eq!(model.0, 1);
}

#[test]
fn import_counts_exactly_the_lines_it_skips() {
    let scratch = Scratch::new();
    scratch.boot(COMPOSITION, false);
    let mut log = Log::new("count");
    turn_one(&mut log, |_| {});
    log.lines.insert(3, "\0\0\0".into());
    let glued = log.lines.remove(9);
    log.lines[8].push_str(&glued);
    let path = write_log(&scratch, "count.jsonl", &log.text());
    let (out, _) = text(&scratch.cordis(&["session", "import", &path]));
    assert!(out.contains("count.jsonl:4: the line contains NUL bytes"), "{out}");
    assert!(out.contains("count.jsonl:9: 2 records on one line"), "{out}");
    assert!(out.contains("11 events (0 opaque), 1 line skipped, 0 breaks"), "{out}");
}

/// CRLF: a `\r` before the newline is JSON whitespace, so each record is
/// read as written; the file is reported once (with the number of such
/// lines), never rewritten, and appends end their lines with LF.
#[test]
fn crlf_logs_are_read_whole_reported_once_and_continued_with_lf() {
    let scratch = Scratch::new();
    let host = scratch.boot(COMPOSITION, false);
    let mut log = Log::new("crlf");
    turn_one(&mut log, |_| {});
    let original = log.text().replace('\n', "\r\n");
    let path = scratch.path().join(".cordis/sessions/crlf.jsonl");
    std::fs::write(&path, &original).unwrap();

    let (session, problems) = host.services.sessions.open("crlf").unwrap();
    assert_eq!(
        problems,
        [LineProblem::note(1, "12 lines are ended by CRLF (first here); read as LF line ends, every record as written; appends end lines with LF")]
    );
    assert_eq!(session.len(), 11);
    let mut model = Checking(0);
    Agent::new(session.clone(), host.services.tools.clone(), &mut model).run_turn("next", &mut Quiet).unwrap();
    drop(session);
    let after = std::fs::read_to_string(&path).unwrap();
    assert!(after.starts_with(&original));
    let added = &after[original.len()..];
    assert!(!added.contains('\r') && added.ends_with('\n'), "{added:?}");
    let (session, problems) = host.services.sessions.view(path.to_str().unwrap()).unwrap();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(session.with_events(|e| e.iter().map(|e| e.seq).collect::<Vec<_>>()), (0..session.len() as u64).collect::<Vec<_>>());
}

/// The six structure breaks of the issue: each refused live, reported on
/// replay with its line and rule, the history well-formed.
#[test]
fn structure_breaks_are_refused_live_and_reported_on_replay() {
    let scratch = Scratch::new();
    let host = scratch.boot(COMPOSITION, false);
    type Build = Box<dyn Fn(&mut Log) -> usize>;
    let cases: Vec<(&str, Build, &str)> = vec![
        (
            "turn/start 2 while turn 1 is open",
            Box::new(|l: &mut Log| {
                l.push("turn/start", json!({"turn": 1}));
                l.push("turn/start", json!({"turn": 2}))
            }),
            "turn/start 2 while turn 1 is still open",
        ),
        (
            "turn/end 2 closing turn 1",
            Box::new(|l: &mut Log| {
                l.push("turn/start", json!({"turn": 1}));
                l.push("turn/end", json!({"turn": 2, "reason": {"kind": "completed"}}))
            }),
            "turn/end 2 does not close the open turn (1)",
        ),
        (
            "step/start 2 while step 1 is open",
            Box::new(|l: &mut Log| {
                l.push("turn/start", json!({"turn": 1}));
                l.push("step/start", json!({"turn": 1, "step": 1}));
                l.push("step/start", json!({"turn": 1, "step": 2}))
            }),
            "step/start 2 while step 1 is still open",
        ),
        (
            "turn/end while a step is open",
            Box::new(|l: &mut Log| {
                l.push("turn/start", json!({"turn": 1}));
                l.push("step/start", json!({"turn": 1, "step": 1}));
                l.push("turn/end", json!({"turn": 1, "reason": {"kind": "completed"}}))
            }),
            "turn/end 1 while step 1 is still open",
        ),
        (
            "a tool/result never called in its step",
            Box::new(|l: &mut Log| {
                l.push("turn/start", json!({"turn": 1}));
                l.push("step/start", json!({"turn": 1, "step": 1}));
                l.push("tool/result", result(1, 1, "c7", "x"))
            }),
            "tool/result for call c7 with no tool/call for it in this step",
        ),
        (
            "todo/write outside any turn",
            Box::new(|l: &mut Log| l.push("todo/write", json!({"todos": [{"content": "a", "status": "pending"}]}))),
            "todo/write outside any open turn",
        ),
    ];
    for (what, build, rule) in &cases {
        // Replay: reported with its line and rule.
        let mut log = Log::new("broken");
        let line = build(&mut log);
        let path = write_log(&scratch, "broken.jsonl", &log.text());
        let (session, problems) = host.services.sessions.view(&path).unwrap();
        let found = at(&problems, line);
        assert!(found.iter().any(|m| m.starts_with(&format!("breaks the log's structure: {rule}"))), "{what}: {problems:?}");
        assert!(problems.iter().all(|p| p.kind != ProblemKind::Skipped), "{what}: {problems:?}");
        assert_well_formed(&session.with_events(derive_messages));
        // Live: the same event is refused, and nothing is written.
        let live = host.services.sessions.create(None).unwrap();
        let events: Vec<Value> = log.lines[1..].iter().map(|l| serde_json::from_str(l).unwrap()).collect();
        let (last, before) = events.split_last().unwrap();
        for e in before {
            live.append_value(e["type"].as_str().unwrap(), &e["data"], Appender::Host).unwrap();
        }
        let kind = last["type"].as_str().unwrap();
        let refused = if kind == "todo/write" {
            let r = host.services.tools.execute(
                &cordis_engine::tools::ToolCall { id: "t", name: "todo_write", arguments: &json!({"todos": last["data"]["todos"]}).to_string() },
                Some(&live),
            );
            assert!(r.is_error, "{what}: {r:?}");
            r.text
        } else {
            live.append_value(kind, &last["data"], Appender::Host).unwrap_err().to_string()
        };
        assert!(refused.contains(rule), "{what}: {refused}");
        assert_eq!(live.len(), before.len(), "{what}: nothing appended");
    }
    // --strict refuses to continue such a log; without it, the log is
    // continued with warnings.
    let mut log = Log::new("strict");
    (cases[0].1)(&mut log);
    std::fs::write(scratch.path().join(".cordis/sessions/strict.jsonl"), log.text()).unwrap();
    std::fs::write(scratch.path().join("s.yml"), "steps:\n  - text: hi\n").unwrap();
    let strict = scratch.cordis(&["--strict", "run", "--session", "strict", "--script", "s.yml", "go"]);
    let (_, err) = text(&strict);
    assert_eq!(strict.status.code(), Some(2), "{err}");
    assert!(err.contains("line 3: breaks the log's structure: turn/start 2 while turn 1 is still open"), "{err}");
    let lenient = scratch.cordis(&["run", "--session", "strict", "--script", "s.yml", "go"]);
    let (out, err) = text(&lenient);
    assert!(lenient.status.success(), "{out}{err}");
    assert!(err.contains("warning: session strict: line 3: breaks the log's structure"), "{err}");
}

/// A `tool/result` (or `user/message`) whose `surfaceOp` replaces part of
/// the history, as the harness's compaction writes it: parsed, and applied
/// by deriveMessages.
#[test]
fn surface_replacements_are_read_and_applied() {
    let scratch = Scratch::new();
    let host = scratch.boot(COMPOSITION, false);
    let mut log = Log::new("compacted");
    log.push("turn/start", json!({"turn": 1}));
    log.push("user/message", user("plan it"));
    log.push("step/start", json!({"turn": 1, "step": 1}));
    log.push("assistant/message", assistant(1, 1, "planning", &["c1"]));
    log.push("tool/call", json!({"turn": 1, "step": 1, "callId": "c1", "name": "todo_write", "arguments": "{}"}));
    log.push("tool/result", result(1, 1, "c1", "a very long output"));
    log.push("step/end", json!({"turn": 1, "step": 1}));
    log.push("step/start", json!({"turn": 1, "step": 2}));
    let mut pruned = json!({"seq": log.seq, "time": 1, "type": "tool/result", "data": result(1, 1, "c1", "[pruned]"),
        "surfaceOp": {"op": "replace", "start": 5, "end": 5}, "sourceEventSeqs": [5]});
    log.seq += 1;
    log.lines.push(pruned.to_string());
    log.push("assistant/message", assistant(1, 2, "done", &[]));
    log.push("step/end", json!({"turn": 1, "step": 2}));
    log.push("turn/end", json!({"turn": 1, "reason": {"kind": "completed"}}));
    let path = write_log(&scratch, "compacted.jsonl", &log.text());

    let (session, problems) = host.services.sessions.view(&path).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    let messages = session.with_events(derive_messages);
    assert_well_formed(&messages);
    assert_eq!(messages.len(), 4);
    assert_eq!(messages[2], Message::Tool { call_id: "c1".into(), text: "[pruned]".into(), is_error: false });

    // A checkpoint replacing the whole first exchange (seqs 1 to 5).
    pruned["seq"] = json!(log.seq);
    let mut summary = json!({"seq": log.seq, "time": 1, "type": "user/message", "data": user("[checkpoint] planned"),
        "surfaceOp": {"op": "replace", "start": 1, "end": 8}, "sourceEventSeqs": [1, 3, 8]});
    log.lines.push(summary.to_string());
    let path = write_log(&scratch, "compacted.jsonl", &log.text());
    let (session, problems) = host.services.sessions.view(&path).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    let messages = session.with_events(derive_messages);
    assert_eq!(
        messages,
        [
            Message::User { text: "[checkpoint] planned".into() },
            Message::Assistant { text: "done".into(), tool_calls: vec![], reasoning: String::new() }
        ]
    );
    // Re-exported as read.
    let (out, _) = text(&scratch.cordis(&["session", "export", &path]));
    assert!(out.contains(r#""sourceEventSeqs":[5],"surfaceOp":{"op":"replace","start":5,"end":5}}"#), "{out}");
    summary["surfaceOp"] = json!({"op": "replace", "start": 1, "end": 99});
    log.lines.pop();
    log.lines.push(summary.to_string());
    let path = write_log(&scratch, "compacted.jsonl", &log.text());
    let (_, problems) = host.services.sessions.view(&path).unwrap();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].message.contains("replaces seqs 1 to 99, which are not both in the history"), "{problems:?}");
}
