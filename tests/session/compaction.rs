//! Compaction: a long scripted session crosses the threshold, its history
//! is summarized and replaced as the harness records it, the standing plan
//! is carried over verbatim, continuing sends exactly the compacted
//! history, the harness's backend reads the compacted log, and a log
//! compacted the harness's way derives the same history here as there.

use std::path::Path;
use std::process::Stdio;

use cordis_session::store::parse_log;
use cordis_session::{derive_messages, Event, Message};
use cordis_tests::dev::Dev;
use cordis_tests::sse_server::{End, Reply, SseServer};
use cordis_tests::{repo_root, text, Scratch, StoreBackend};
use serde_json::{json, Value};

pub(crate) const SUMMARY: &str = "## Goal\n- a long job of ten steps\n## Open work\n- the steps after the last one done";

/// Tool-todo and a compaction entry that compacts at half the window,
/// keeping a tenth; `store` adds a persistence entry, `extra` more entries.
fn composition(store: &str, extra: &str) -> String {
    format!(
        "- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: true\n\
         - id: compaction\n  name: '@deepseek-ai/dsh-compaction-basic'\n  config:\n    thresholdRatio: 0.5\n    retainRatio: 0.1\n    maxTokens: 512\n    compactionRetries: 1\n\
         {store}{extra}"
    )
}

/// A scripted turn of `steps` todo_write calls with long contents, then a
/// final answer; the model's window is `window` tokens.
pub(crate) fn long_script(steps: usize, window: u64, summaries: &[&str]) -> String {
    let mut out = format!("model: long\ncontextWindow: {window}\nsummaries:\n");
    for s in summaries {
        out.push_str(&format!("  - {}\n", serde_json::to_string(s).unwrap()));
    }
    out.push_str("steps:\n");
    for i in 0..steps {
        let todos = json!({"todos": [
            {"content": format!("step {i}: {}", "work item text ".repeat(20)), "status": "completed"},
            {"content": format!("step {i} next"), "status": "in_progress"},
            {"content": "later", "status": "pending"},
        ]});
        out.push_str(&format!(
            "  - text: {}\n    calls:\n      - name: todo_write\n        arguments: {}\n",
            serde_json::to_string(&format!("Working on step {i}.")).unwrap(),
            serde_json::to_string(&todos.to_string()).unwrap()
        ));
    }
    out.push_str("  - text: Done.\n");
    out
}

fn run(scratch: &Scratch, args: &[&str]) -> (String, String) {
    let out = scratch.cordis(args);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "cordis {args:?} failed: {stdout}{stderr}");
    (stdout, stderr)
}

fn session_id(stdout: &str) -> String {
    stdout.lines().find(|l| l.starts_with("session ")).and_then(|l| l.split_whitespace().nth(1)).unwrap_or_else(|| panic!("{stdout}")).to_string()
}

/// The events of `cordis session export` (with `--root` when given).
fn exported(scratch: &Scratch, root: Option<&Path>, id: &str) -> (String, Vec<Event>) {
    let mut args = vec!["session".to_string(), "export".into()];
    if let Some(root) = root {
        args.extend(["--root".into(), root.display().to_string()]);
    }
    args.push(id.into());
    let (stdout, _) = run(scratch, &args.iter().map(String::as_str).collect::<Vec<_>>());
    let log = parse_log(stdout.as_bytes(), Path::new("export")).unwrap_or_else(|e| panic!("{e}"));
    assert!(log.problems.is_empty(), "{:?}", log.problems);
    (stdout, log.events)
}

fn data(e: &Event) -> Value {
    e.data_value()
}

fn of_kind<'a>(events: &'a [Event], kind: &str) -> Vec<&'a Event> {
    events.iter().filter(|e| e.kind == kind).collect()
}

/// The plan messages a compaction carried over (tool-todo's).
fn carried_plans(events: &[Event]) -> Vec<&Event> {
    events.iter().filter(|e| e.kind == "user/message" && data(e)["source"]["plugin"] == "tool-todo").collect()
}

fn write_long_session(scratch: &Scratch, steps: usize, window: u64, summaries: &[&str]) -> String {
    std::fs::write(scratch.path().join("long.script.yml"), long_script(steps, window, summaries)).unwrap();
    let (stdout, _) = run(scratch, &["run", "--script", "long.script.yml", "do the long job"]);
    session_id(&stdout)
}

#[test]
fn a_long_session_is_compacted_and_keeps_its_plan() {
    let scratch = Scratch::new();
    scratch.composition(&composition("", ""));
    let id = write_long_session(&scratch, 10, 2400, &[SUMMARY, SUMMARY, SUMMARY, SUMMARY]);
    let (_, events) = exported(&scratch, None, &id);

    let starts = of_kind(&events, "compaction/start");
    let ends = of_kind(&events, "compaction/end");
    assert!(!starts.is_empty(), "the session crossed the threshold");
    assert_eq!(starts.len(), ends.len());
    assert!(ends.iter().all(|e| data(e).get("error").is_none()));
    let open_turn = data(starts[0])["turn"].clone();
    assert_eq!(open_turn, json!(1), "an automatic compaction belongs to the open turn");

    // Each compaction: start, summary, the replacing message citing them and
    // every replaced event, the plan, end — as the harness records them.
    for start in &starts {
        let at = events.iter().position(|e| e.seq == start.seq).unwrap();
        let summary = &events[at + 1];
        let replacement = &events[at + 2];
        assert_eq!(summary.kind, "compaction/summary");
        assert_eq!(data(summary)["compactionId"], data(start)["compactionId"]);
        assert_eq!(data(summary)["summary"], json!([{"type": "text", "text": SUMMARY}]));
        assert_eq!(replacement.kind, "user/message");
        let Some(cordis_session::event::SurfaceOp::Replace { start: from, end: to }) = replacement.surface_op.clone() else {
            panic!("not a replacement: {:?}", replacement.surface_op)
        };
        assert_eq!(data(summary)["shadowedRange"], json!({"start": from, "end": to}));
        let mut cited = vec![start.seq, summary.seq];
        cited.extend(data(summary)["shadowedSeqs"].as_array().unwrap().iter().map(|s| s.as_u64().unwrap()));
        assert_eq!(replacement.source_event_seqs.as_ref(), Some(&cited));
        assert!(data(replacement)["content"].to_string().contains("<compacted-summary>"));
    }

    // The plan carried over is the last todo/write before it, verbatim
    // (in_progress items included).
    let plans = carried_plans(&events);
    assert_eq!(plans.len(), starts.len(), "every compaction carried the plan");
    for plan in &plans {
        let last_write = events.iter().rev().find(|e| e.seq < plan.seq && e.kind == "todo/write").unwrap();
        let text = data(plan)["content"][0]["text"].as_str().unwrap().to_string();
        let json_part: Value = serde_json::from_str(&text[text.find('{').unwrap()..]).unwrap();
        assert_eq!(json_part, data(last_write), "the carried plan is the written one");
        assert_eq!(plan.source_event_seqs.as_ref(), Some(&vec![last_write.seq]));
    }

    // The history the model sees: the summary first, then the kept tail,
    // the plan, and what came after; nothing of the early steps.
    let history = derive_messages(&events);
    let Message::User { text: first } = &history[0] else { panic!("{:?}", history[0]) };
    assert!(first.contains(SUMMARY) && first.contains("<compacted-summary>"), "{first}");
    let joined = format!("{history:?}");
    assert!(!joined.contains("step 0: work"), "the first step was compacted away");
    assert!(joined.contains("step 9 next"), "the newest work is there");
    let last_plan = plans.last().unwrap();
    let plan_text = data(last_plan)["content"][0]["text"].as_str().unwrap().to_string();
    assert!(history.iter().any(|m| matches!(m, Message::User { text } if *text == plan_text)), "the plan is in the history");
    // The tool result of the last call before the last compaction is kept
    // verbatim right before the plan.
    let plan_at = history.iter().position(|m| matches!(m, Message::User { text } if *text == plan_text)).unwrap();
    assert!(matches!(&history[plan_at - 1], Message::Tool { .. }), "{:?}", history[plan_at - 1]);

    // `session show` prints the compacted history and no problem.
    let (shown, _) = run(&scratch, &["session", "show", &id]);
    assert!(shown.contains("<compacted-summary>") && !shown.contains("problem:"), "{shown}");
}

#[test]
fn continuing_sends_exactly_the_compacted_history() {
    let server = SseServer::start(vec![Reply::Stream {
        events: vec![
            json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Carrying on."}, "finish_reason": null}]}).to_string(),
            json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}).to_string(),
        ],
        end: End::Done,
    }]);
    let scratch = Scratch::new();
    let model = format!(
        "- id: model\n  name: llm-openai\n  config:\n    baseUrl: {}\n    model: deepseek-v4-flash\n    apiKeyEnv: CORDIS_TEST_KEY\n",
        server.base_url
    );
    scratch.composition(&composition("", ""));
    let id = write_long_session(&scratch, 10, 2400, &[SUMMARY, SUMMARY, SUMMARY, SUMMARY]);
    let (_, before) = exported(&scratch, None, &id);
    assert!(!carried_plans(&before).is_empty());
    // The same session, continued with a real provider's client.
    scratch.composition(&composition("", &model));
    let out = scratch.command(&["run", "--session", &id, "carry on"]).env("CORDIS_TEST_KEY", "sk-test").stdin(Stdio::null()).output().unwrap();
    assert!(out.status.success(), "{}{}", text(&out).0, text(&out).1);
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let sent = requests[0].body["messages"].as_array().unwrap().clone();

    // What the history holds, in the API's shape, then the new prompt.
    let (_, after) = exported(&scratch, None, &id);
    let cut = after.iter().position(|e| e.kind == "turn/start" && data(e)["turn"] == 2).unwrap();
    let mut expected: Vec<Value> = derive_messages(&after[..=cut + 1])
        .into_iter()
        .map(|m| match m {
            Message::User { text } => json!({"role": "user", "content": text}),
            Message::Assistant { text, tool_calls, .. } => {
                json!({"role": "assistant", "content": text, "calls": tool_calls.iter().map(|c| json!([c.id, c.name, c.arguments])).collect::<Vec<_>>()})
            }
            Message::Tool { call_id, text, .. } => json!({"role": "tool", "tool_call_id": call_id, "content": text}),
        })
        .collect();
    assert_eq!(expected.last().unwrap()["content"], "carry on");
    let sent: Vec<Value> = sent
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| match m["role"].as_str() {
            Some("assistant") => json!({"role": "assistant", "content": m["content"].as_str().unwrap_or(""), "calls": m["tool_calls"].as_array().map(|calls| calls.iter().map(|c| json!([c["id"], c["function"]["name"], c["function"]["arguments"]])).collect::<Vec<_>>()).unwrap_or_default()}),
            Some("tool") => json!({"role": "tool", "tool_call_id": m["tool_call_id"], "content": m["content"]}),
            _ => json!({"role": m["role"], "content": m["content"]}),
        })
        .collect();
    for e in expected.iter_mut() {
        if e["role"] == "assistant" && e["calls"].is_null() {
            e["calls"] = json!([]);
        }
    }
    assert_eq!(sent, expected, "the provider got exactly the compacted history and the new prompt");
    assert!(sent[0]["content"].as_str().unwrap().contains(SUMMARY));
}

#[test]
fn a_failed_summary_leaves_the_history_as_it_was() {
    let scratch = Scratch::new();
    scratch.composition(&composition("", ""));
    // One empty summary, then none: both tries fail at every check.
    let id = write_long_session(&scratch, 8, 2400, &[""]);
    let (_, events) = exported(&scratch, None, &id);
    let ends = of_kind(&events, "compaction/end");
    assert!(ends.len() >= 2, "the summary was tried again ({} tries)", ends.len());
    assert!(ends.iter().all(|e| data(e)["error"]["message"].is_string()), "every try is closed with its error");
    assert!(of_kind(&events, "compaction/summary").is_empty());
    assert!(events.iter().all(|e| !matches!(e.surface_op, Some(cordis_session::event::SurfaceOp::Replace { .. }))));
    // The history is what it would be without the failed tries.
    let without: Vec<Event> = events.iter().filter(|e| !e.kind.starts_with("compaction/")).cloned().collect();
    assert_eq!(derive_messages(&events), derive_messages(&without));
    let (shown, _) = run(&scratch, &["session", "show", &id]);
    assert!(shown.contains("step 0: work"), "nothing was lost");
}

#[test]
fn a_plan_cleared_by_a_new_turn_is_not_brought_back() {
    let scratch = Scratch::new();
    scratch.composition(&composition("", ""));
    let id = write_long_session(&scratch, 6, 100_000, &[]);
    // Turn 2 starts over the threshold: the compaction at its first step
    // finds no plan (turn/start cleared it) and carries none.
    std::fs::write(
        scratch.path().join("small.script.yml"),
        "model: long\ncontextWindow: 1500\nsummaries: [\"## Goal\\n- earlier: six steps of a long job\"]\nsteps:\n  - text: Nothing left to do.\n",
    )
    .unwrap();
    run(&scratch, &["run", "--session", &id, "--script", "small.script.yml", "anything else?"]);
    let (_, events) = exported(&scratch, None, &id);
    let turn2 = events.iter().position(|e| e.kind == "turn/start" && data(e)["turn"] == 2).unwrap();
    assert!(events[turn2..].iter().any(|e| e.kind == "compaction/summary"), "turn 2 compacted");
    assert!(carried_plans(&events[turn2..]).is_empty(), "no plan is carried into a turn that has none");
    let (plan, _) = run(&scratch, &["session", "show", &id]);
    assert!(plan.contains("todos:\n  (none)") || !plan.contains("● step"), "{plan}");
}

#[test]
fn compaction_by_hand_from_the_command_line() {
    let scratch = Scratch::new();
    scratch.composition(&composition("", ""));
    let id = write_long_session(&scratch, 4, 100_000, &[]);
    // A turn left open by a writer that was killed is closed first.
    let mut dev = Dev::spawn(scratch.command(&["dev", "--session", &id])).unwrap_or_else(|e| panic!("{e}"));
    let answer = dev.send(r#"call todo_write {"todos": [{"content": "left open", "status": "in_progress"}]}"#);
    assert_eq!(answer["isError"], false, "{answer}");
    dev.kill();
    // A script for compacting may hold summaries alone.
    let summary = serde_json::to_string(SUMMARY).unwrap();
    std::fs::write(scratch.path().join("summary.script.yml"), format!("summaries: [{summary}, {summary}]\n")).unwrap();
    let (stdout, _) = run(&scratch, &["session", "compact", &id, "--script", "summary.script.yml"]);
    assert!(stdout.contains("compacted") && stdout.contains("carried over: tool-todo"), "{stdout}");
    let (_, events) = exported(&scratch, None, &id);
    let start = of_kind(&events, "compaction/start");
    assert_eq!(start.len(), 1);
    assert_eq!(data(start[0])["turn"], Value::Null, "made between turns");
    let before_start = &events[events.iter().position(|e| e.seq == start[0].seq).unwrap() - 1];
    assert_eq!(before_start.kind, "turn/end", "the open turn was closed first");
    assert_eq!(data(before_start)["reason"]["kind"], "interrupted");
    let plan = carried_plans(&events);
    assert!(data(plan[0])["content"].to_string().contains("left open"), "the standing plan is carried");
    let history = derive_messages(&events);
    assert!(matches!(&history[0], Message::User { text } if text.contains(SUMMARY)));
    // Everything but the newest entry was replaced: the summary, the newest
    // entry (the dev call's result, with its call) and the plan.
    assert_eq!(history.len(), 4, "{history:?}");
    // Again right away: what is left is too small for a summary to shrink
    // it together with the plan carried after it, so the history stays as
    // it is, and the command says why.
    let out = scratch.cordis(&["session", "compact", &id, "--script", "summary.script.yml"]);
    let (stdout, stderr) = text(&out);
    assert!(
        stdout.contains("nothing to compact") || (!out.status.success() && stderr.contains("not smaller than what it replaces")),
        "{stdout}{stderr}"
    );
    let (_, again) = exported(&scratch, None, &id);
    assert_eq!(derive_messages(&again), history, "the history is unchanged");

    // Without a compaction entry it says what to add.
    let bare = Scratch::new();
    bare.composition("- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: true\n");
    let out = bare.cordis(&["session", "compact", "s-x", "--script", "x.yml"]);
    assert!(!out.status.success() && text(&out).1.contains("compaction-basic"), "{}", text(&out).1);
}

#[test]
fn the_config_is_the_published_one() {
    let scratch = Scratch::new();
    scratch.composition(
        "- id: compaction\n  name: '@deepseek-ai/dsh-compaction-basic'\n  config:\n    thresholdRatio: 0.8\n    retainRatio: 0.9\n    maxToken: 10\n",
    );
    let out = scratch.cordis(&["check"]);
    let (stdout, _) = text(&out);
    assert!(!out.status.success(), "{stdout}");
    assert!(stdout.contains("maxToken") && stdout.contains("allowed:") && stdout.contains("maxTokens"), "{stdout}");
    scratch.composition("- id: compaction\n  name: compaction-basic\n  config:\n    thresholdRatio: 0.5\n    retainRatio: 0.6\n");
    let (stdout, _) = text(&scratch.cordis(&["check"]));
    assert!(stdout.contains("retainRatio (0.6) must be below thresholdRatio (0.5)"), "{stdout}");
    // Two compaction entries: the second fails, as a second store does.
    scratch.composition("- id: c1\n  name: compaction-basic\n- id: c2\n  name: '@deepseek-ai/dsh-compaction-basic'\n");
    let out = scratch.cordis(&["check"]);
    let (stdout, _) = text(&out);
    assert!(!out.status.success() && stdout.contains("a second compaction entry"), "{stdout}");
}

/// Our normalized view of a history message: role, text, and the call ids
/// it makes or answers.
fn ours(m: &Message) -> Value {
    match m {
        Message::User { text } => json!(["user", text]),
        Message::Assistant { text, tool_calls, .. } => json!(["assistant", text, tool_calls.iter().map(|c| c.id.clone()).collect::<Vec<_>>()]),
        Message::Tool { call_id, text, .. } => json!(["tool", call_id, text]),
    }
}

/// The same view of a message the harness derived.
fn theirs(m: &Value) -> Value {
    let blocks = m["content"].as_array().cloned().unwrap_or_default();
    let texts =
        |kind: &str, blocks: &[Value]| blocks.iter().filter(|b| b["type"] == kind).filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join("\n");
    if let Some(result) = blocks.iter().find(|b| b["type"] == "tool-result") {
        let inner = result["content"].as_array().cloned().unwrap_or_default();
        return json!(["tool", result["toolCallId"], texts("text", &inner)]);
    }
    match m["role"].as_str() {
        Some("assistant") => json!([
            "assistant",
            texts("text", &blocks),
            blocks.iter().filter(|b| b["type"] == "tool-call").map(|b| b["id"].clone()).collect::<Vec<_>>()
        ]),
        _ => json!(["user", texts("text", &blocks)]),
    }
}

fn backend_write(root: &Path, log: &str) {
    let mut child = StoreBackend::get()
        .command(&["write", "--root", &root.display().to_string(), "--compression", "zstd"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), log.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "the backend refused the log: {}{}", text(&out).0, text(&out).1);
}

fn backend(args: &[&str]) -> Vec<Value> {
    let out = StoreBackend::get().run(args);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "backend {args:?}: {stdout}{stderr}");
    stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn the_harness_reads_our_compactions_and_we_read_its_own() {
    // Ours, in the harness's store: its backend reads the same events.
    let scratch = Scratch::new();
    let root = scratch.path().join("store");
    let persistence = format!(
        "- id: persistence\n  name: '@deepseek-ai/dsh-session-persistence-jsonl'\n  config:\n    root: {}\n    compression: zstd\n",
        root.display()
    );
    scratch.composition(&composition(&persistence, ""));
    let id = write_long_session(&scratch, 10, 2400, &[SUMMARY, SUMMARY, SUMMARY, SUMMARY]);
    let (export, events) = exported(&scratch, None, &id);
    assert!(!of_kind(&events, "compaction/summary").is_empty());
    let theirs_read = backend(&["read", "--inspect", "--root", &root.display().to_string(), "--id", &id]);
    let ours_read: Vec<Value> = export.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(theirs_read.len(), ours_read.len());
    for (t, o) in theirs_read.iter().zip(&ours_read).skip(1) {
        for key in ["seq", "type", "data", "surfaceOp", "sourceEventSeqs"] {
            assert_eq!(t.get(key), o.get(key), "{key} of {o}");
        }
    }
    // And the harness derives the same history from it.
    let derived: Vec<Value> = backend(&["history", "--root", &root.display().to_string(), "--id", &id]).iter().map(theirs).collect();
    assert_eq!(derived, derive_messages(&events).iter().map(ours).collect::<Vec<_>>());

    // The harness's own compaction, recorded as its compaction-basic
    // records it (a manual one between turns), over a real session of
    // its: our history is the history it derives.
    let upstream = std::fs::read_to_string(repo_root().join("tests/data/upstream-sessions/multi-turn.session.jsonl")).unwrap();
    let first = Scratch::new();
    backend_write(first.path(), &upstream);
    let header: Value = serde_json::from_str(upstream.lines().next().unwrap()).unwrap();
    let uid = header["id"].as_str().unwrap();
    let (full, events) = exported(&scratch, Some(first.path()), uid);
    let nodes = cordis_session::surface_nodes(&events);
    // A cut no tool call crosses, keeping the newest entries.
    let mut open = 0i64;
    let mut cut = None;
    for (i, (_, m)) in nodes.iter().enumerate().take(nodes.len() - 1) {
        match m {
            Some(Message::Assistant { tool_calls, .. }) => open += tool_calls.len() as i64,
            Some(Message::Tool { .. }) => open -= 1,
            _ => {}
        }
        if open == 0 && i >= 1 {
            cut = Some(i);
        }
    }
    let cut = cut.expect("a clean cut");
    let shadowed: Vec<u64> = nodes[..=cut].iter().map(|(s, _)| *s).collect();
    let n = events.last().unwrap().seq + 1;
    let time = events.last().unwrap().time;
    let cited: Vec<u64> = [n, n + 1].into_iter().chain(shadowed.iter().copied()).collect();
    let compaction = [
        json!({"type": "compaction/start", "seq": n, "time": time, "data": {"compactionId": "cmp-1", "turn": null}}),
        json!({"type": "compaction/summary", "seq": n + 1, "time": time, "data": {"compactionId": "cmp-1", "summary": [{"type": "text", "text": "The user asked for three words, one per turn."}], "shadowedRange": {"start": shadowed[0], "end": shadowed[cut]}, "shadowedSeqs": shadowed, "shadowedTokenCount": 120, "provider": "deepseek", "model": "deepseek-v4-flash", "maxTokens": 8192}}),
        json!({"type": "user/message", "seq": n + 2, "time": time, "data": {"content": [{"type": "text", "text": "Checkpoint.\n\n<compacted-summary>"}, {"type": "text", "text": "The user asked for three words, one per turn."}, {"type": "text", "text": "</compacted-summary>"}], "source": {"kind": "plugin", "plugin": "compact", "compactionId": "cmp-1"}, "role": "user", "id": "9d1c7c36-3f4e-4c2b-9f57-7f1f3c0e2a11"}, "surfaceOp": {"op": "replace", "start": shadowed[0], "end": shadowed[cut]}, "sourceEventSeqs": cited}),
        json!({"type": "compaction/end", "seq": n + 3, "time": time, "data": {"compactionId": "cmp-1", "turn": null}}),
    ];
    let mut log = full.clone();
    for line in &compaction {
        log.push_str(&line.to_string());
        log.push('\n');
    }
    let second = Scratch::new();
    backend_write(second.path(), &log);
    let (_, compacted) = exported(&scratch, Some(second.path()), uid);
    let derived: Vec<Value> = backend(&["history", "--root", &second.path().display().to_string(), "--id", uid]).iter().map(theirs).collect();
    let ours_history: Vec<Value> = derive_messages(&compacted).iter().map(ours).collect();
    assert_eq!(ours_history, derived, "the same history from the harness's compacted log");
    assert!(ours_history.len() < derive_messages(&events).len(), "the compaction shortened it");
    let (shown, _) = run(&scratch, &["session", "show", "--root", &second.path().display().to_string(), uid]);
    assert!(!shown.contains("problem:"), "{shown}");
}

#[test]
fn compaction_by_hand_in_the_dev_console() {
    let summary = "## Goal\n- three writes of a plan";
    let server = SseServer::start(vec![Reply::Stream {
        events: vec![
            json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [{"index": 0, "delta": {"role": "assistant", "content": summary}, "finish_reason": null}]}).to_string(),
            json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}).to_string(),
        ],
        end: End::Done,
    }]);
    let scratch = Scratch::new();
    let model = format!(
        "- id: model\n  name: llm-openai\n  config:\n    baseUrl: {}\n    model: deepseek-v4-flash\n    apiKeyEnv: CORDIS_TEST_KEY\n",
        server.base_url
    );
    scratch.composition(&composition("", &model));
    let mut cmd = scratch.command(&["dev"]);
    cmd.env("CORDIS_TEST_KEY", "sk-test");
    let mut dev = Dev::spawn(cmd).unwrap_or_else(|e| panic!("{e}"));
    let id = dev.session.clone();
    let mut ask = |command: &str| -> Value { dev.send(command) };
    let long = "a long pending item ".repeat(20);
    for i in 0..3 {
        let call = format!(
            r#"call todo_write {{"todos": [{{"content": "write {i}", "status": "in_progress"}}, {{"content": "after {i}: {long}", "status": "pending"}}]}}"#
        );
        assert_eq!(ask(&call)["isError"], false);
    }
    assert_eq!(ask("status")["notRunning"], json!([]), "the builtin compaction entry runs");
    let answer = ask("compact");
    assert_eq!(answer["compacted"]["carried"], json!(["tool-todo"]), "{answer}");
    assert_eq!(answer["compacted"]["replaced"], 4, "two calls and their results; the newest pair is kept: {answer}");
    // The summary request ends with the request for a checkpoint, after the
    // replayed history.
    let request = &server.requests()[0].body;
    let messages = request["messages"].as_array().unwrap();
    assert!(messages.last().unwrap()["content"].as_str().unwrap().contains("checkpoint"), "{request}");
    assert!(messages.iter().any(|m| m["tool_call_id"] == "dev_1_1"), "the replaced history is replayed: {request}");
    assert_eq!(request["max_tokens"], 512, "the summary is capped at maxTokens");
    dev.kill();
    let (_, events) = exported(&scratch, None, &id);
    let plans = carried_plans(&events);
    assert_eq!(plans.len(), 1);
    assert!(data(plans[0])["content"][0]["text"].as_str().unwrap().contains(r#"{"content":"write 2","status":"in_progress"}"#));
    let history = derive_messages(&events);
    assert!(matches!(&history[0], Message::User { text } if text.contains(summary)), "{history:?}");
}

/// The llm-openai entry of a mock provider at `base_url`, with a context
/// window of `window` tokens and `extra` config lines.
fn mock_model(base_url: &str, window: u64, extra: &str) -> String {
    format!(
        "- id: model\n  name: llm-openai\n  config:\n    baseUrl: {base_url}\n    model: deepseek-v4-flash\n    apiKeyEnv: CORDIS_TEST_KEY\n    contextWindow: {window}\n{extra}"
    )
}

#[test]
fn one_ctrl_c_stops_a_pending_summary_within_a_second() {
    use std::time::{Duration, Instant};
    let server = SseServer::start(vec![Reply::Silent(Duration::from_secs(60))]);
    let scratch = Scratch::new();
    scratch.composition(&composition("", ""));
    let id = write_long_session(&scratch, 10, 100_000, &[]);
    scratch.composition(&composition("", &mock_model(&server.base_url, 2400, "")));
    let mut child = scratch
        .command(&["run", "--session", &id, "carry on"])
        .env("CORDIS_TEST_KEY", "sk-test")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let requests = server.wait_for_requests(1);
    assert!(requests[0].body["messages"].to_string().contains("checkpoint"), "the pending request is the summary's");
    // The request is on its way; the provider holds it.
    std::thread::sleep(Duration::from_millis(300));
    let signalled = Instant::now();
    let _ = std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(signalled.elapsed() < Duration::from_secs(10), "cordis run still waits on the summary 10 s after Ctrl-C");
        std::thread::sleep(Duration::from_millis(10));
    };
    let took = signalled.elapsed();
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = text(&out);
    eprintln!("one Ctrl-C ended the turn {took:?} after the signal; exit {:?}", status.code());
    assert!(took < Duration::from_secs(1), "one Ctrl-C stops the summary request within a second, took {took:?}");
    // `run` says an interrupted turn by exit 130; the log below shows the
    // turn was closed by the process, not cut off.
    assert_eq!(status.code(), Some(130), "{stdout}{stderr}");
    assert_eq!(server.requests().len(), 1, "nothing is sent after Ctrl-C");
    let (_, events) = exported(&scratch, None, &id);
    let ends = of_kind(&events, "compaction/end");
    assert_eq!(ends.len(), 1, "{ends:?}");
    assert_eq!(data(ends[0])["error"]["kind"], "interrupted", "the compaction is recorded as interrupted");
    let turn_end = events.iter().rev().find(|e| e.kind == "turn/end").unwrap();
    assert_eq!(data(turn_end)["turn"], 2);
    assert_eq!(data(turn_end)["reason"]["kind"], "interrupted");
    assert!(of_kind(&events, "step/start").iter().all(|e| data(e)["turn"] != 2), "no step of the interrupted turn was sent");
    let (shown, _) = run(&scratch, &["session", "show", &id]);
    assert!(!shown.contains("problem:"), "{shown}");
    // The harness's backend takes the log with its interrupted compaction
    // and derives the same history from it.
    let (export, events) = exported(&scratch, None, &id);
    let root = Scratch::new();
    backend_write(root.path(), &export);
    let derived: Vec<Value> = backend(&["history", "--root", &root.path().display().to_string(), "--id", &id]).iter().map(theirs).collect();
    assert_eq!(derived, derive_messages(&events).iter().map(ours).collect::<Vec<_>>());
}

/// One streamed answer of the mock provider: `delta`, then `finish`.
fn answer(delta: Value, finish: &str) -> Reply {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
            .to_string()
    };
    Reply::Stream { events: vec![chunk(delta, Value::Null), chunk(json!({}), json!(finish))], end: End::Done }
}

/// A step that calls todo_write once.
fn todo_step(n: usize) -> Reply {
    let args = json!({"todos": [{"content": format!("mock step {n}"), "status": "in_progress"}]}).to_string();
    answer(
        json!({"role": "assistant", "tool_calls": [{"index": 0, "id": format!("call_{n}"), "type": "function", "function": {"name": "todo_write", "arguments": args}}]}),
        "tool_calls",
    )
}

/// Whether a request the mock received asks for a summary.
fn is_summary(body: &Value) -> bool {
    body["messages"].as_array().and_then(|m| m.last()).is_some_and(|m| m["content"].as_str().unwrap_or_default().contains("write a checkpoint"))
}

/// A long scripted session (no compaction: a wide window), continued by
/// one turn against the mock provider with `model_extra` config lines and
/// a compaction entry with `retries` retries; the run's output and what
/// the provider received.
fn continue_with_mock(replies: Vec<Reply>, model_extra: &str, compaction_extra: &str) -> (String, Vec<Value>, Vec<Event>, SseServer) {
    let server = SseServer::start(replies);
    let scratch = Scratch::new();
    scratch.composition(&composition("", ""));
    let id = write_long_session(&scratch, 10, 100_000, &[]);
    let entries = composition("", &mock_model(&server.base_url, 2400, model_extra)).replace("    compactionRetries: 1\n", compaction_extra);
    scratch.composition(&entries);
    let started = std::time::Instant::now();
    let out = scratch.command(&["run", "--session", &id, "carry on"]).env("CORDIS_TEST_KEY", "sk-test").stdin(Stdio::null()).output().unwrap();
    assert!(started.elapsed() < std::time::Duration::from_secs(60), "the turn took {:?}", started.elapsed());
    let (stdout, stderr) = text(&out);
    let said = format!("{stdout}{stderr}");
    assert!(out.status.success(), "{said}");
    let (_, events) = exported(&scratch, None, &id);
    let bodies = server.requests().into_iter().map(|r| r.body).collect();
    (said, bodies, events, server)
}

#[test]
fn a_failing_summarizer_costs_at_most_its_retries_plus_one_per_turn() {
    let reasoning_only = answer(json!({"role": "assistant", "reasoning_content": "Let me think about what to keep..."}), "stop");
    let chatty =
        answer(json!({"role": "assistant", "content": "Sure! Continuing with the next item: I'll now call todo_write for step 10."}), "stop");
    let cut_off = answer(json!({"role": "assistant", "content": "## Goal\n- a long job of ten steps, with"}), "length");
    let replies = vec![
        reasoning_only,
        chatty,
        cut_off,
        todo_step(1),
        todo_step(2),
        todo_step(3),
        answer(json!({"role": "assistant", "content": "Done."}), "stop"),
    ];
    let (said, bodies, events, _server) = continue_with_mock(replies, "", "    compactionRetries: 2\n");
    let summaries: Vec<&Value> = bodies.iter().filter(|b| is_summary(b)).collect();
    eprintln!("a failing summarizer: {} summary requests in a turn of {} requests", summaries.len(), bodies.len());
    // 0 successful compactions + compactionRetries (2) + 1.
    assert_eq!(summaries.len(), 3, "{said}");
    assert_eq!(bodies.len(), 7, "every step after the failures went out without another summary request");
    for body in &summaries {
        assert!(body.get("tools").is_none(), "a summary request offers no tools: {body}");
        assert!(body.get("reasoning_effort").is_none() && body.get("thinking").is_none(), "{body}");
        assert_eq!(body["max_tokens"], 512, "maxTokens as configured");
    }
    assert!(bodies.iter().filter(|b| !is_summary(b)).all(|b| b["tools"].is_array()), "the steps still offer the tools");
    // Each failure is recorded with its reason; the history stays.
    let errors: Vec<String> =
        of_kind(&events, "compaction/end").iter().map(|e| data(e)["error"]["message"].as_str().unwrap_or_default().to_string()).collect();
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(errors[0].contains("reasoning only"), "{errors:?}");
    assert!(errors[1].contains("not a checkpoint"), "{errors:?}");
    assert!(errors[2].contains("cut off at maxTokens (512)"), "{errors:?}");
    assert!(of_kind(&events, "compaction/summary").is_empty());
    assert!(events.iter().all(|e| !matches!(e.surface_op, Some(cordis_session::event::SurfaceOp::Replace { .. }))));
    // Said once, with the real reason.
    assert_eq!(said.matches("no more compaction in this turn").count(), 1, "{said}");
    assert!(said.contains("3 summary requests of this turn failed"), "{said}");
}

#[test]
fn fixed_parts_that_leave_no_room_are_named_once_and_nothing_is_summarized() {
    let system = "You are a careful agent. ".repeat(240);
    let extra = format!("    systemPrompt: {}\n", serde_json::to_string(&system).unwrap());
    let replies = vec![todo_step(1), todo_step(2), todo_step(3), answer(json!({"role": "assistant", "content": "Done."}), "stop")];
    let (said, bodies, events, _server) = continue_with_mock(replies, &extra, "    compactionRetries: 1\n");
    assert_eq!(bodies.iter().filter(|b| is_summary(b)).count(), 0, "no summary request: it could not help");
    assert_eq!(bodies.len(), 4);
    assert!(of_kind(&events, "compaction/start").is_empty());
    assert_eq!(said.matches("fixed parts of the request alone reach the limit").count(), 1, "said once per turn: {said}");
    assert!(said.contains("system prompt ~1500 tokens") && said.contains("tool schemas ~") && said.contains("carried plan ~"), "{said}");
}

#[test]
fn the_threshold_counts_the_reserved_output() {
    // A window of 100000 tokens at a threshold of 0.9 would wait for
    // 90000; with 99000 reserved for the answer the request must stay
    // under 1000, which the long history passes.
    let replies =
        vec![answer(json!({"role": "assistant", "content": SUMMARY}), "stop"), answer(json!({"role": "assistant", "content": "Done."}), "stop")];
    let server = SseServer::start(replies);
    let scratch = Scratch::new();
    scratch.composition(&composition("", ""));
    let id = write_long_session(&scratch, 10, 1_000_000, &[]);
    let entries = composition("", &mock_model(&server.base_url, 100_000, "    maxTokens: 99000\n"))
        .replace("thresholdRatio: 0.5", "thresholdRatio: 0.9")
        .replace("retainRatio: 0.1", "retainTokens: 200");
    scratch.composition(&entries);
    let out = scratch.command(&["run", "--session", &id, "carry on"]).env("CORDIS_TEST_KEY", "sk-test").stdin(Stdio::null()).output().unwrap();
    assert!(out.status.success(), "{}{}", text(&out).0, text(&out).1);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert!(is_summary(&requests[0].body), "compacted before the step: {}", requests[0].body);
    assert_eq!(requests[0].body["max_tokens"], 512);
    assert_eq!(requests[1].body["max_tokens"], 99000);
    let (_, events) = exported(&scratch, None, &id);
    assert_eq!(of_kind(&events, "compaction/summary").len(), 1);
}

#[test]
fn a_deepseek_summary_request_does_not_think() {
    let replies =
        vec![answer(json!({"role": "assistant", "content": SUMMARY}), "stop"), answer(json!({"role": "assistant", "content": "Done."}), "stop")];
    let server = SseServer::start(replies);
    let scratch = Scratch::new();
    scratch.composition(&composition("", ""));
    let id = write_long_session(&scratch, 10, 1_000_000, &[]);
    let model = format!(
        "- id: model\n  name: '@deepseek-ai/dsh-llm-deepseek'\n  config:\n    baseURL: {}\n    apiKeyEnv: CORDIS_TEST_KEY\n    reasoningEffort: high\n    models:\n      - id: deepseek-v4-flash\n        contextWindow: 2400\n        maxTokens: 200\n",
        server.base_url.trim_end_matches("/v1")
    );
    scratch.composition(&composition("", &model));
    let out = scratch.command(&["run", "--session", &id, "carry on"]).env("CORDIS_TEST_KEY", "sk-test").stdin(Stdio::null()).output().unwrap();
    assert!(out.status.success(), "{}{}", text(&out).0, text(&out).1);
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    let (summary, step) = (&requests[0].body, &requests[1].body);
    assert!(is_summary(summary), "{summary}");
    assert_eq!(summary["thinking"], json!({"type": "disabled"}), "{summary}");
    assert!(summary.get("reasoning_effort").is_none() && summary.get("tools").is_none(), "{summary}");
    assert_eq!(summary["max_tokens"], 512);
    assert_eq!((step["reasoning_effort"].clone(), step["thinking"].clone()), (json!("high"), json!({"type": "enabled"})), "the steps keep thinking");
}

#[test]
fn a_compaction_that_cannot_get_under_the_limit_is_not_repeated_each_step() {
    // The kept tail alone (retainTokens 1100) and the tool schemas stay
    // over the limit of 1200 after any summary: one compaction, then none
    // for the rest of the turn, where each step used to summarize the last
    // summary again.
    let steps: Vec<Reply> = (1..=5).map(todo_step).collect();
    let mut replies = vec![answer(json!({"role": "assistant", "content": SUMMARY}), "stop")];
    replies.extend(steps);
    replies.push(answer(json!({"role": "assistant", "content": "Done."}), "stop"));
    let server = SseServer::start(replies);
    let scratch = Scratch::new();
    scratch.composition(&composition("", ""));
    let id = write_long_session(&scratch, 10, 1_000_000, &[]);
    scratch.composition(&composition("", &mock_model(&server.base_url, 2400, "")).replace("retainRatio: 0.1", "retainTokens: 1100"));
    let out = scratch.command(&["run", "--session", &id, "carry on"]).env("CORDIS_TEST_KEY", "sk-test").stdin(Stdio::null()).output().unwrap();
    let said = format!("{}{}", text(&out).0, text(&out).1);
    assert!(out.status.success(), "{said}");
    let bodies: Vec<Value> = server.requests().into_iter().map(|r| r.body).collect();
    let summaries = bodies.iter().filter(|b| is_summary(b)).count();
    eprintln!("over the limit after compacting: {summaries} summary request(s) in a turn of {} requests", bodies.len());
    assert_eq!(summaries, 1, "{said}");
    assert_eq!(bodies.len(), 7);
    assert_eq!(said.matches("still over the limit").count(), 1, "{said}");
    let (_, events) = exported(&scratch, None, &id);
    assert_eq!(of_kind(&events, "compaction/summary").len(), 1);
}

#[test]
fn a_call_left_without_a_result_does_not_block_compaction() {
    // An imported log whose first tool call lost its result: every cut
    // after that call used to count as crossing it, so nothing was ever
    // compacted. The history answers the call in place, so a cut after it
    // is valid.
    let scratch = Scratch::new();
    scratch.composition(&composition("", ""));
    let id = write_long_session(&scratch, 6, 100_000, &[]);
    let (export, _) = exported(&scratch, None, &id);
    let mut dropped = false;
    let mut header: Value = serde_json::from_str(export.lines().next().unwrap()).unwrap();
    header["id"] = json!("s-unanswered");
    let mut lines = vec![header.to_string()];
    for line in export.lines().skip(1) {
        if !dropped && line.contains("\"type\":\"tool/result\"") {
            dropped = true;
            continue;
        }
        // Renumbered: the log has no gap where the result was.
        let mut event: Value = serde_json::from_str(line).unwrap();
        event["seq"] = json!(lines.len() - 1);
        lines.push(event.to_string());
    }
    assert!(dropped);
    let file = scratch.path().join("unanswered.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    run(&scratch, &["session", "import", &file.display().to_string()]);
    let summary = serde_json::to_string(SUMMARY).unwrap();
    std::fs::write(scratch.path().join("summary.script.yml"), format!("summaries: [{summary}]\n")).unwrap();
    let (stdout, _) = run(&scratch, &["session", "compact", "s-unanswered", "--script", "summary.script.yml"]);
    assert!(stdout.contains("compacted"), "{stdout}");
    let (_, events) = exported(&scratch, None, "s-unanswered");
    assert_eq!(of_kind(&events, "compaction/summary").len(), 1);
    // Once more: what is left cannot shrink, and the reason says so.
    let out = scratch.cordis(&["session", "compact", "s-unanswered", "--script", "summary.script.yml"]);
    let (stdout, stderr) = text(&out);
    assert!(
        stdout.contains("nothing to compact: the replaceable history")
            || stderr.contains("not smaller than what it replaces")
            || stderr.contains("no more summaries"),
        "{stdout}{stderr}"
    );
    assert!(!stdout.contains("the history has one entry"), "{stdout}");
}

#[test]
fn check_says_what_is_carried_over_only_when_a_plugin_offers_it() {
    let scratch = Scratch::new();
    scratch.composition(&composition("", ""));
    let (stdout, _) = text(&scratch.cordis(&["check"]));
    assert!(stdout.contains("carried over verbatim after each compaction: tool-todo (todos)"), "{stdout}");
    // Without a plugin that offers the compaction-context extension,
    // nothing is promised.
    scratch.composition("- id: compaction\n  name: compaction-basic\n");
    let (stdout, _) = text(&scratch.cordis(&["check"]));
    assert!(stdout.contains("nothing is carried over verbatim") && !stdout.contains("carried over verbatim after"), "{stdout}");
}

/// A scripted turn like [`long_script`], its todo contents in Chinese.
fn chinese_script(steps: usize, window: u64, summaries: &[&str]) -> String {
    let mut out = format!("model: long\ncontextWindow: {window}\nsummaries:\n");
    for s in summaries {
        out.push_str(&format!("  - {}\n", serde_json::to_string(s).unwrap()));
    }
    out.push_str("steps:\n");
    for i in 0..steps {
        let todos = json!({"todos": [
            {"content": format!("第{i}步：{}", "实现会话压缩并检查每个错误的原因".repeat(8)), "status": "completed"},
            {"content": format!("第{i}步之后"), "status": "in_progress"},
        ]});
        out.push_str(&format!(
            "  - text: {}\n    calls:\n      - name: todo_write\n        arguments: {}\n",
            serde_json::to_string(&format!("正在处理第{i}步。")).unwrap(),
            serde_json::to_string(&todos.to_string()).unwrap()
        ));
    }
    out.push_str("  - text: 完成。\n");
    out
}

#[test]
fn a_mostly_chinese_session_is_compacted_in_time() {
    // With a window of 3000 the threshold is 1500 tokens. Measured on the
    // same session without compaction: its history at characters / 4 stays
    // under that, so the old estimate never compacted it; at 0.6 tokens per
    // CJK character (the estimate, calibrated against DeepSeek's
    // tokenizer) it passes.
    let scratch = Scratch::new();
    scratch.composition(&composition("", ""));
    std::fs::write(scratch.path().join("zh.script.yml"), chinese_script(10, 1_000_000, &[])).unwrap();
    let (stdout, _) = run(&scratch, &["run", "--script", "zh.script.yml", "做这个长任务"]);
    let (_, events) = exported(&scratch, None, &session_id(&stdout));
    let history = derive_messages(&events);
    let chars_over_4: u64 = history
        .iter()
        .map(|m| {
            let chars = match m {
                Message::User { text } => text.chars().count(),
                Message::Assistant { text, tool_calls, .. } => {
                    text.chars().count() + tool_calls.iter().map(|c| c.name.len() + c.arguments.chars().count() + c.id.len()).sum::<usize>()
                }
                Message::Tool { text, call_id, .. } => text.chars().count() + call_id.len(),
            };
            (chars as u64).div_ceil(4) + 4
        })
        .sum();
    eprintln!("the Chinese history: ~{chars_over_4} tokens at characters / 4");
    // The request adds tool-todo's schema, ~385 tokens.
    assert!(chars_over_4 + 400 < 1500, "characters / 4 would not have compacted: ~{chars_over_4} tokens");

    let summary = "## Goal\n- 实现会话压缩\n## Open work\n- 剩下的步骤";
    std::fs::write(scratch.path().join("zh.script.yml"), chinese_script(10, 3000, &[summary, summary, summary])).unwrap();
    let (stdout, _) = run(&scratch, &["run", "--script", "zh.script.yml", "做这个长任务"]);
    let (_, events) = exported(&scratch, None, &session_id(&stdout));
    assert!(!of_kind(&events, "compaction/summary").is_empty(), "the Chinese session was compacted");
    assert!(of_kind(&events, "compaction/end").iter().all(|e| data(e).get("error").is_none()));
}

#[test]
fn a_second_ctrl_c_leaves_a_compaction_the_next_run_closes() {
    use std::time::{Duration, Instant};
    let server = SseServer::start(vec![Reply::Silent(Duration::from_secs(60))]);
    let scratch = Scratch::new();
    scratch.composition(&composition("", ""));
    let id = write_long_session(&scratch, 10, 100_000, &[]);
    scratch.composition(&composition("", &mock_model(&server.base_url, 2400, "")));
    let mut child = scratch
        .command(&["run", "--session", &id, "carry on"])
        .env("CORDIS_TEST_KEY", "sk-test")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    server.wait_for_requests(1);
    std::thread::sleep(Duration::from_millis(300));
    // Two Ctrl-C at once: the second ends the process (exit 130) before
    // the first has closed anything.
    let pid = child.id().to_string();
    let _ = std::process::Command::new("kill").args(["-INT", &pid]).status();
    let _ = std::process::Command::new("kill").args(["-INT", &pid]).status();
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "cordis run did not stop");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(status.code(), Some(130));
    // Two signals sent back to back may reach the process as one (a
    // pending SIGINT is not queued twice), or the first may have closed the
    // compaction before the second ended the process: on a loaded machine
    // either happens. Whichever did, the log is whole after the next run.
    let (shown, _) = run(&scratch, &["session", "show", &id]);
    let cut_short = shown.contains("has no compaction/end");
    // The next run closes it and compacts again (a script's summary).
    scratch.composition(&composition("", ""));
    std::fs::write(
        scratch.path().join("again.script.yml"),
        format!("model: long\ncontextWindow: 2400\nsummaries: [{}]\nsteps:\n  - text: Done.\n", serde_json::to_string(SUMMARY).unwrap()),
    )
    .unwrap();
    let out = scratch.command(&["run", "--session", &id, "--script", "again.script.yml", "go on"]).stdin(Stdio::null()).output().unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert_eq!(stderr.contains("was cut short before its summary replaced anything"), cut_short, "{stderr}");
    let (_, events) = exported(&scratch, None, &id);
    let ends = of_kind(&events, "compaction/end");
    assert_eq!(ends.len(), 2, "{ends:?}");
    assert_eq!(data(ends[0])["error"]["kind"], if cut_short { "cut-short" } else { "interrupted" }, "{shown}");
    assert!(data(ends[1]).get("error").is_none(), "compaction works again");
    let (shown, _) = run(&scratch, &["session", "show", &id]);
    assert!(!shown.contains("problem:"), "{shown}");
}

/// DeepSeek's tokenizer, installed pinned by `bench/tokenizer/setup.sh`
/// into `target/tokenizer-peers`: counts `texts` with the `tokenizers`
/// library and with the package's pure-Python encoder (two
/// implementations), and says where its `tokenizer.json` is.
struct DeepSeekCounts {
    tokenizers: Vec<u64>,
    pure: Vec<u64>,
    file: String,
}

fn deepseek_counts(texts: &[String]) -> DeepSeekCounts {
    use std::io::Write;
    let dest = repo_root().join("target/tokenizer-peers");
    let setup = std::process::Command::new("bash").arg(repo_root().join("bench/tokenizer/setup.sh")).arg(&dest).output().expect("run setup.sh");
    assert!(setup.status.success(), "bench/tokenizer/setup.sh failed:\n{}", text(&setup).1);
    let mut child = std::process::Command::new(dest.join("python/bin/python"))
        .arg(repo_root().join("bench/tokenizer/count.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run count.py");
    child.stdin.take().unwrap().write_all(serde_json::to_string(texts).unwrap().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "count.py failed:\n{}", text(&out).1);
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    let numbers = |key: &str| answer[key].as_array().unwrap().iter().map(|n| n.as_u64().unwrap()).collect::<Vec<u64>>();
    DeepSeekCounts { tokenizers: numbers("tokenizers"), pure: numbers("pure"), file: answer["file"].as_str().unwrap().to_string() }
}

/// The parts of a history message the compaction counts, each a text.
fn parts(m: &Message) -> Vec<String> {
    match m {
        Message::User { text } => vec![text.clone()],
        Message::Assistant { text, tool_calls, reasoning } => {
            let mut out = vec![text.clone(), reasoning.clone()];
            for c in tool_calls {
                out.extend([c.name.clone(), c.arguments.clone(), c.id.clone()]);
            }
            out
        }
        Message::Tool { text, call_id, .. } => vec![text.clone(), call_id.clone()],
    }
}

#[test]
fn a_tokenizer_file_counts_as_the_model_does() {
    let started = std::time::Instant::now();
    let scratch = Scratch::new();
    let file = deepseek_counts(&[]).file;
    // Named relative to the composition's folder.
    std::os::unix::fs::symlink(&file, scratch.path().join("deepseek.json")).unwrap();
    scratch.composition(&composition("", "").replace("compactionRetries: 1\n", "compactionRetries: 1\n    tokenizer: ./deepseek.json\n"));
    let (stdout, _) = run(&scratch, &["check"]);
    let shown = scratch.path().join("deepseek.json").display().to_string();
    assert!(stdout.contains(&format!("tokens counted with the tokenizer in {shown}")), "{stdout}");

    let id = write_long_session(&scratch, 10, 2400, &[SUMMARY, SUMMARY, SUMMARY, SUMMARY]);
    let (_, events) = exported(&scratch, None, &id);
    let summary = of_kind(&events, "compaction/summary").first().map(|e| data(e)).expect("a compaction");
    let shadowed: Vec<u64> = summary["shadowedSeqs"].as_array().unwrap().iter().map(|s| s.as_u64().unwrap()).collect();
    let region: Vec<Event> = events.iter().filter(|e| shadowed.contains(&e.seq)).cloned().collect();
    let messages = derive_messages(&region);
    assert!(messages.len() >= 3, "{messages:?}");
    let texts: Vec<String> = messages.iter().flat_map(parts).collect();
    let counts = deepseek_counts(&texts);
    let framing = 4 * messages.len() as u64;
    let by_tokenizers = counts.tokenizers.iter().sum::<u64>() + framing;
    let by_pure = counts.pure.iter().sum::<u64>() + framing;
    let estimated: u64 = messages.iter().map(cordis_engine::agent::compaction::message_tokens).sum();
    let counted = summary["shadowedTokenCount"].as_u64().unwrap();
    eprintln!(
        "replaced {} messages: counted {counted}; DeepSeek's tokenizers {by_tokenizers}, pure encoder {by_pure}; the estimate {estimated}",
        messages.len()
    );
    assert_eq!(counted, by_tokenizers, "the count is the tokenizer's");
    assert!(counted.abs_diff(by_pure) * 100 <= by_pure, "within 1% of the independent encoder: {counted} vs {by_pure}");
    assert_ne!(counted, estimated, "not the estimate");
    assert!(started.elapsed() < std::time::Duration::from_secs(120), "took {:?}", started.elapsed());
}

#[test]
fn a_tokenizer_that_cannot_be_read_is_said_once_and_the_estimate_counts() {
    let scratch = Scratch::new();
    // Missing: the entry fails, naming the key, the path and the folder.
    scratch.composition(&composition("", "").replace("compactionRetries: 1\n", "compactionRetries: 1\n    tokenizer: ./missing.json\n"));
    let out = scratch.cordis(&["check"]);
    let (stdout, stderr) = text(&out);
    let said = format!("{stdout}{stderr}");
    assert!(
        said.contains("cordis.yml:")
            && said.contains("entry compaction: tokenizer: `./missing.json` resolves to")
            && said.contains("(no file is there)"),
        "{said}"
    );
    // There, but not a tokenizer: said once when first needed, then the
    // estimate counts and the session is compacted all the same.
    std::fs::write(scratch.path().join("missing.json"), "{\"not\": \"a tokenizer\"}").unwrap();
    std::fs::write(scratch.path().join("long.script.yml"), long_script(10, 2400, &[SUMMARY, SUMMARY, SUMMARY, SUMMARY])).unwrap();
    let start = std::time::Instant::now();
    let (stdout, stderr) = run(&scratch, &["run", "--script", "long.script.yml", "do the long job"]);
    assert!(start.elapsed() < std::time::Duration::from_secs(30), "took {:?}", start.elapsed());
    assert_eq!(stderr.matches("is not a tokenizer.json the tokenizers library can read").count(), 1, "{stderr}");
    assert!(stderr.contains("counting tokens with the estimate instead"), "{stderr}");
    let (_, events) = exported(&scratch, None, &session_id(&stdout));
    assert!(!of_kind(&events, "compaction/summary").is_empty(), "compacted with the estimate");
}
