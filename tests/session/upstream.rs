//! Session logs written by the TypeScript harness
//! (`tests/data/upstream-sessions/`, real files of that harness): each loads,
//! derives the history and plan the file records, survives an import and a
//! re-export byte for byte, and its recorded todo_write calls replay through
//! our tool to the same data and text. Expected values below were read from
//! the files themselves.

use cordis_engine::tools::ToolCall;
use cordis_session::event::Envelope;
use cordis_session::{derive_messages, Appender, Message};
use cordis_tests::{repo_root, text, Scratch};
use serde_json::{json, Value};

const COMPOSITION: &str = "- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: true\n";

fn fixture(name: &str) -> std::path::PathBuf {
    repo_root().join("tests/data/upstream-sessions").join(name)
}

struct Expect {
    file: &'static str,
    /// Events after expanding packed chunk rows.
    events: usize,
    messages: usize,
    /// Opaque events by type (types no loaded plugin or the host owns;
    /// `assistant/chunk`, which the host records for a streamed answer, is
    /// the host's).
    opaque: usize,
    plan: Value,
}

fn expectations() -> Vec<Expect> {
    let todo_plan = json!([
        {"content": "read the code", "status": "in_progress"},
        {"content": "watch the background build", "status": "in_progress"},
        {"content": "write the fix", "status": "pending"}
    ]);
    vec![
        // 37 event lines, two reasoning rows of 18 chunks: 35 + 36.
        Expect { file: "multi-turn.session.jsonl", events: 71, messages: 5, opaque: 7, plan: Value::Null },
        // 35 event lines, rows of 17 + 25 + 21 + 30 chunks: 31 + 93.
        Expect { file: "packed-chunks.session.jsonl", events: 124, messages: 5, opaque: 7, plan: Value::Null },
        Expect { file: "parallel-tool-calls.session.jsonl", events: 32, messages: 6, opaque: 5, plan: Value::Null },
        // 36 event lines, rows of 24 + 57 chunks: 34 + 81.
        Expect { file: "todo-write.session.jsonl", events: 115, messages: 5, opaque: 5, plan: todo_plan },
    ]
}

#[test]
fn each_log_loads_with_its_messages_and_plan() {
    let scratch = Scratch::new();
    let host = scratch.boot(COMPOSITION, false);
    for e in expectations() {
        let (session, problems) = host.services.sessions.view(fixture(e.file).to_str().unwrap()).unwrap();
        assert!(problems.is_empty(), "{}: {problems:?}", e.file);
        assert_eq!(session.len(), e.events, "{}", e.file);
        let messages = session.with_events(derive_messages);
        assert_eq!(messages.len(), e.messages, "{}", e.file);
        let plan: Value = serde_json::from_str(&session.state("todos").unwrap()).unwrap();
        assert_eq!(plan, e.plan, "{}", e.file);
        let opaque =
            session.with_events(|events| events.iter().filter(|ev| !cordis_session::core_type_or_owned(&host.services.events, &ev.kind)).count());
        assert_eq!(opaque, e.opaque, "{}", e.file);
    }
}

#[test]
fn packed_rows_expand_to_the_seqs_the_log_refers_to() {
    let scratch = Scratch::new();
    let host = scratch.boot(COMPOSITION, true);
    let (session, _) = host.services.sessions.view(fixture("todo-write.session.jsonl").to_str().unwrap()).unwrap();
    let events = session.events();
    let assistant = events.iter().find(|e| e.kind == "assistant/message").unwrap();
    // The log says this message was built from events 9..=95 and the tool
    // result from event 97: the tool/call.
    assert_eq!(assistant.source_event_seqs.as_ref().unwrap(), &(9..=95).collect::<Vec<u64>>());
    assert_eq!(assistant.seq, 96);
    let call = events.iter().find(|e| e.kind == "tool/call").unwrap();
    assert_eq!(call.seq, 97);
    let chunk = &events[10];
    assert_eq!(chunk.data.get(), r#"{"turn":1,"step":1,"chunk":{"type":"reasoning-delta","index":0,"text":"The"}}"#);
    let messages = derive_messages(&events);
    match &messages[2] {
        Message::Assistant { tool_calls, .. } => assert_eq!(tool_calls[0].name, "todo_write"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn recorded_todo_write_calls_replay_to_the_same_data_and_text() {
    let scratch = Scratch::new();
    let host = scratch.boot(COMPOSITION, true);
    let (log, _) = host.services.sessions.view(fixture("todo-write.session.jsonl").to_str().unwrap()).unwrap();
    let events = log.events();
    let live = host.services.sessions.create(None).unwrap();
    live.append_value("turn/start", &json!({"turn": 1}), Appender::Host).unwrap();
    let mut replayed = 0;
    for (i, e) in events.iter().enumerate().filter(|(_, e)| e.kind == "tool/call") {
        let call = e.data_value();
        if call["name"] != "todo_write" {
            continue;
        }
        let recorded_write = events[i..].iter().find(|e| e.kind == "todo/write").unwrap().data_value();
        let recorded_result = events[i..]
            .iter()
            .find(|e| e.kind == "tool/result" && e.data_value()["message"]["source"]["callId"] == call["callId"])
            .unwrap()
            .data_value();
        let recorded_text = &recorded_result["message"]["content"][0]["content"][0]["text"];
        let before = live.len();
        let result = host.services.tools.execute(
            &ToolCall { id: call["callId"].as_str().unwrap(), name: "todo_write", arguments: call["arguments"].as_str().unwrap() },
            Some(&live),
        );
        let ours = live.with_events(|e| e[before..].iter().find(|e| e.kind == "todo/write").map(|e| e.data_value()));
        assert_eq!(ours.as_ref(), Some(&recorded_write));
        assert_eq!(&Value::String(result.text), recorded_text);
        replayed += 1;
    }
    assert_eq!(replayed, 1, "the fixture records one todo_write call");
}

/// `(type, raw data)` of every non-packed event line of a log file.
fn raw_events(text: &str) -> Vec<(String, String)> {
    text.lines()
        .skip(1)
        .filter_map(|l| serde_json::from_str::<Envelope>(l).ok())
        .filter(|e| !e.kind.ends_with("-chunks"))
        .map(|e| (e.kind, e.data.map(|d| d.get().to_string()).unwrap_or_default()))
        .collect()
}

#[test]
fn import_and_export_keep_opaque_events_byte_for_byte() {
    let scratch = Scratch::new();
    scratch.composition(COMPOSITION);
    for e in expectations() {
        let source = std::fs::read_to_string(fixture(e.file)).unwrap();
        let id = format!("imported-{}", e.file.split('.').next().unwrap());
        let import = scratch.cordis(&["session", "import", fixture(e.file).to_str().unwrap(), "--id", &id]);
        let (out, err) = text(&import);
        assert!(import.status.success(), "{out}\n{err}");
        assert!(out.contains(&format!("as session {id}: {} events ({} opaque), 0 lines skipped", e.events, e.opaque)), "{out}");
        assert_eq!(std::fs::read_to_string(fixture(e.file)).unwrap(), source, "the source is never modified");

        let export = scratch.cordis(&["session", "export", &id]);
        let (exported, err) = text(&export);
        assert!(export.status.success(), "{err}");
        // Every event line of the source is in the export with its type and
        // data unchanged, in order (packed rows come back expanded).
        let theirs = raw_events(&source);
        let ours = raw_events(&exported);
        assert_eq!(ours.len(), e.events, "{}", e.file);
        let mut cursor = 0;
        for t in &theirs {
            let found = ours[cursor..].iter().position(|o| o == t);
            assert!(found.is_some(), "{}: event {t:?} missing or changed in the export", e.file);
            cursor += found.unwrap() + 1;
        }

        // Export → import → export is a fixed point.
        let again_path = scratch.path().join(format!("{id}.export.jsonl"));
        std::fs::write(&again_path, &exported).unwrap();
        let id2 = format!("{id}-again");
        assert!(scratch.cordis(&["session", "import", again_path.to_str().unwrap(), "--id", &id2]).status.success());
        let (exported2, _) = text(&scratch.cordis(&["session", "export", &id2]));
        assert_eq!(exported2.lines().skip(1).collect::<Vec<_>>(), exported.lines().skip(1).collect::<Vec<_>>(), "{}", e.file);
    }
}

#[test]
fn an_imported_session_continues_with_run() {
    let scratch = Scratch::new();
    scratch.composition(COMPOSITION);
    let import = scratch.cordis(&["session", "import", fixture("multi-turn.session.jsonl").to_str().unwrap()]);
    assert!(import.status.success());
    let id = "228b7b82-84ed-49b7-a567-981c03b28c77";
    std::fs::write(
        scratch.path().join("s.yml"),
        "steps:\n  - calls:\n      - name: todo_write\n        arguments: '{\"todos\": [{\"content\": \"say THREE\", \"status\": \"in_progress\"}]}'\n  - text: THREE\n",
    )
    .unwrap();
    let run = scratch.cordis(&["run", "--session", id, "--script", "s.yml", "Reply with exactly the word: THREE."]);
    let (out, err) = text(&run);
    assert!(run.status.success(), "{out}\n{err}");
    assert!(out.contains("(continued, 71 events)"), "{out}");
    assert!(out.contains("turn 3 completed"), "{out}");
    let file = std::fs::read_to_string(scratch.path().join(".cordis/sessions").join(format!("{id}.jsonl"))).unwrap();
    let new: Vec<Value> = file.lines().skip(1 + 71).map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(new[0]["seq"], 71, "new events continue the seq numbering");
    assert_eq!(new[0]["type"], "turn/start");
    assert_eq!(new[0]["data"]["turn"], 3);
    let show = scratch.cordis(&["session", "show", id]);
    let (shown, _) = text(&show);
    assert!(shown.contains("transcript (9 messages)"), "{shown}");
    assert!(shown.contains("● say THREE"), "{shown}");
}

#[test]
fn malformed_variants_are_reported_with_their_line() {
    let scratch = Scratch::new();
    scratch.composition(COMPOSITION);
    for e in expectations() {
        let source = std::fs::read_to_string(fixture(e.file)).unwrap();
        let lines: Vec<&str> = source.lines().collect();
        // A torn last line: the writer died mid-line.
        let torn_path = scratch.path().join("torn.jsonl");
        let last = lines.len();
        let torn = format!("{}\n{}", lines[..last - 1].join("\n"), &lines[last - 1][..lines[last - 1].len() / 2]);
        std::fs::write(&torn_path, torn).unwrap();
        let (shown, _) = text(&scratch.cordis(&["session", "show", torn_path.to_str().unwrap()]));
        assert!(shown.contains(&format!("problem: line {last}: torn last line")), "{}: {shown}", e.file);
        // An unknown envelope key on line 4.
        let mut bad = lines.clone();
        let patched = bad[3].replacen("{\"type\"", "{\"bogus\":1,\"type\"", 1);
        bad[3] = &patched;
        let bad_path = scratch.path().join("unknown-key.jsonl");
        std::fs::write(&bad_path, bad.join("\n") + "\n").unwrap();
        let (shown, _) = text(&scratch.cordis(&["session", "show", bad_path.to_str().unwrap()]));
        assert!(shown.contains("problem: line 4: not a valid event: unknown field `bogus`"), "{}: {shown}", e.file);
        let (imported, _) = text(&scratch.cordis(&["session", "import", bad_path.to_str().unwrap(), "--id", "bad"]));
        assert!(imported.contains("unknown-key.jsonl:4: not a valid event: unknown field `bogus`"), "{imported}");
        std::fs::remove_file(scratch.path().join(".cordis/sessions/bad.jsonl")).unwrap();
    }
}

#[test]
fn logs_are_read_without_a_composition_and_exports_never_overwrite() {
    let scratch = Scratch::new();
    let show = scratch.cordis(&["session", "show", fixture("todo-write.session.jsonl").to_str().unwrap()]);
    let (out, err) = text(&show);
    assert!(show.status.success(), "{out}\n{err}");
    assert!(out.contains("transcript (5 messages)"), "{out}");
    assert!(err.contains("no cordis.yml here"), "{err}");

    scratch.composition(COMPOSITION);
    assert!(scratch.cordis(&["session", "import", fixture("multi-turn.session.jsonl").to_str().unwrap(), "--id", "a"]).status.success());
    assert!(scratch.cordis(&["session", "import", fixture("todo-write.session.jsonl").to_str().unwrap(), "--id", "b"]).status.success());
    let stored_b = scratch.path().join(".cordis/sessions/b.jsonl");
    let before = std::fs::read(&stored_b).unwrap();
    let over = scratch.cordis(&["session", "export", "a", "-o", stored_b.to_str().unwrap(), "--force"]);
    assert_eq!(over.status.code(), Some(2));
    assert!(text(&over).1.contains("inside the session store"), "{:?}", text(&over));
    assert_eq!(std::fs::read(&stored_b).unwrap(), before, "a stored session is never overwritten");
    let out_file = scratch.path().join("out.jsonl");
    std::fs::write(&out_file, "keep me").unwrap();
    let refused = scratch.cordis(&["session", "export", "a", "-o", out_file.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(text(&refused).1.contains("exists; pass --force"));
    assert_eq!(std::fs::read_to_string(&out_file).unwrap(), "keep me");
    assert!(scratch.cordis(&["session", "export", "a", "-o", out_file.to_str().unwrap(), "--force"]).status.success());
    let again = scratch.cordis(&["session", "import", fixture("todo-write.session.jsonl").to_str().unwrap(), "--id", "b"]);
    assert!(text(&again).1.contains("pass --id NEW_ID"), "{:?}", text(&again));
}
