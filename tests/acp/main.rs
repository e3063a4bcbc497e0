//! `cordis acp` driven by the official Python ACP SDK
//! (`agent-client-protocol`, installed pinned by `tests/acp/setup.sh` into
//! `target/acp-peers/`), whose typed models parse every message the agent
//! sends, over a scripted model: the plan of the seed's parallel example,
//! a refused write, cancel mid-turn, permission, load in a new process on
//! every store, unknown sessions, malformed lines, a plugin that prints,
//! and MCP servers passed by the client.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use cordis_tests::{cordis_exe, library, plugin_dir, repo_root, target_dir, text, McpHttp, PgServer, Scratch};
use serde_json::{json, Value};

/// The installed client's Python.
fn python() -> &'static PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let dest = target_dir().join("acp-peers");
        let out = Command::new("bash").arg(repo_root().join("tests/acp/setup.sh")).arg(&dest).output().expect("run tests/acp/setup.sh");
        assert!(out.status.success(), "tests/acp/setup.sh failed:\n{}", text(&out).1);
        dest.join("python/bin/python")
    })
}

const TODO_PARALLEL: &str = "- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: true\n";

/// `cordis ... acp --script script.yml` in `scratch`.
fn agent(scratch: &Scratch, extra: &[&str]) -> Vec<String> {
    let mut args = vec![
        cordis_exe().display().to_string(),
        "-c".into(),
        scratch.path().join("cordis.yml").display().to_string(),
        "--plugin-dir".into(),
        plugin_dir().display().to_string(),
        "--no-user-patch".into(),
        "acp".into(),
    ];
    if scratch.path().join("script.yml").exists() {
        args.extend(["--script".into(), scratch.path().join("script.yml").display().to_string()]);
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// Runs the SDK client on `steps` against `cordis acp` in `scratch`;
/// returns its records. The whole exchange must end within `limit`.
fn client(scratch: &Scratch, steps: Value, permission: &str, limit: Duration) -> Vec<Value> {
    client_with(scratch, steps, permission, limit, json!({}))
}

/// [`client`] with `env` (an object) set for `cordis acp`.
fn client_with(scratch: &Scratch, steps: Value, permission: &str, limit: Duration, env: Value) -> Vec<Value> {
    let scenario = json!({"command": agent(scratch, &[]), "cwd": scratch.path(), "permission": permission, "steps": steps, "env": env});
    let file = scratch.path().join("scenario.json");
    std::fs::write(&file, scenario.to_string()).unwrap();
    let started = Instant::now();
    let out = Command::new(python())
        .arg(repo_root().join("tests/acp/client.py"))
        .arg(&file)
        .current_dir(scratch.path())
        .output()
        .expect("run the ACP client");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "the ACP client failed:\n{stderr}");
    assert!(started.elapsed() < limit, "the exchange took {:?} (limit {limit:?})\n{stderr}", started.elapsed());
    let parsed: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("client output is not JSON ({e}): {stdout}\n{stderr}"));
    parsed["records"].as_array().cloned().unwrap()
}

fn updates(records: &[Value]) -> Vec<Value> {
    records.iter().filter(|r| r["kind"] == "update").map(|r| r["update"].clone()).collect()
}

fn of_kind<'a>(records: &'a [Value], kind: &str, op: &str) -> Vec<&'a Value> {
    records.iter().filter(|r| r["kind"] == kind && r["op"] == op).collect()
}

fn plans(records: &[Value]) -> Vec<Value> {
    updates(records).into_iter().filter(|u| u["sessionUpdate"] == "plan").map(|u| u["entries"].clone()).collect()
}

fn session_of(records: &[Value]) -> String {
    records.iter().find(|r| r["kind"] == "session").and_then(|r| r["sessionId"].as_str()).expect("a session id").to_string()
}

fn new_session(scratch: &Scratch) -> Value {
    json!({"op": "new", "cwd": scratch.path()})
}

/// The seed's parallel example: three todos, two in progress; a write the
/// tool refuses; progress; the list cleared.
const PARALLEL_SCRIPT: &str = r#"
steps:
  - reasoning: "Two builds can run at once."
    text: "Planning."
    calls:
      - name: todo_write
        arguments: '{"todos": [{"content": "Build the parser", "status": "in_progress"}, {"content": "Build the printer", "status": "in_progress"}, {"content": "Ship both", "status": "pending"}]}'
  - calls:
      - name: todo_write
        arguments: '{"todos": [{"content": "", "status": "pending"}]}'
  - calls:
      - name: todo_write
        arguments: '{"todos": [{"content": "Build the parser", "status": "completed"}, {"content": "Build the printer", "status": "completed"}, {"content": "Ship both", "status": "in_progress"}]}'
  - calls:
      - name: todo_write
        arguments: '{"todos": []}'
  - text: "Shipped."
"#;

#[test]
fn the_plan_follows_every_successful_todo_write_and_no_refused_one() {
    let scratch = Scratch::new();
    scratch.composition(TODO_PARALLEL);
    std::fs::write(scratch.path().join("script.yml"), PARALLEL_SCRIPT).unwrap();
    let records = client(
        &scratch,
        json!([{"op": "initialize"}, new_session(&scratch), {"op": "prompt", "text": "Build and ship"}]),
        "allow-once",
        Duration::from_secs(30),
    );
    let entry = |content: &str, status: &str| json!({"content": content, "priority": "medium", "status": status});
    assert_eq!(
        plans(&records),
        vec![
            json!([entry("Build the parser", "in_progress"), entry("Build the printer", "in_progress"), entry("Ship both", "pending")]),
            json!([entry("Build the parser", "completed"), entry("Build the printer", "completed"), entry("Ship both", "in_progress")]),
            json!([]),
        ],
        "one plan per successful write, none for the refused one"
    );
    let all = updates(&records);
    let calls: Vec<&Value> = all.iter().filter(|u| u["sessionUpdate"] == "tool_call").collect();
    assert_eq!(calls.len(), 4);
    assert!(calls.iter().all(|c| c["kind"] == "think" && c["status"] == "in_progress" && c["rawInput"]["todos"].is_array()));
    let results: Vec<&Value> = all.iter().filter(|u| u["sessionUpdate"] == "tool_call_update").collect();
    let statuses: Vec<&str> = results.iter().map(|r| r["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["completed", "failed", "completed", "completed"]);
    // The refused write's result says why, and each result follows its call.
    assert!(results[1]["content"][0]["content"]["text"].as_str().unwrap().contains("content"), "{}", results[1]);
    for (call, result) in calls.iter().zip(&results) {
        assert_eq!(call["toolCallId"], result["toolCallId"]);
    }
    let thought = all.iter().find(|u| u["sessionUpdate"] == "agent_thought_chunk").expect("the reasoning");
    assert_eq!(thought["content"]["text"], "Two builds can run at once.");
    let texts: Vec<&str> =
        all.iter().filter(|u| u["sessionUpdate"] == "agent_message_chunk").map(|u| u["content"]["text"].as_str().unwrap()).collect();
    assert_eq!(texts, ["Planning.", "Shipped."]);
    let answer = of_kind(&records, "response", "prompt");
    assert_eq!(answer[0]["result"]["stopReason"], "end_turn");
    // Every update of the turn came before its answer.
    let answered = records.iter().position(|r| r["kind"] == "response" && r["op"] == "prompt").unwrap();
    assert!(records[answered..].iter().all(|r| r["kind"] != "update"));
}

#[test]
fn initialize_answers_version_1_with_the_capabilities() {
    let scratch = Scratch::new();
    scratch.composition(TODO_PARALLEL);
    let records =
        client(&scratch, json!([{"op": "initialize", "version": 7}, {"op": "initialize", "version": 0}]), "allow-once", Duration::from_secs(20));
    let answers = of_kind(&records, "response", "initialize");
    assert_eq!(answers[1]["result"]["protocolVersion"], 1, "the pre-release version 0 gets 1 too");
    let result = &answers[0]["result"];
    assert_eq!(result["protocolVersion"], 1);
    let caps = &result["agentCapabilities"];
    assert_eq!(caps["loadSession"], true);
    assert_eq!(caps["promptCapabilities"]["embeddedContext"], true);
    assert_eq!(caps["mcpCapabilities"]["http"], true);
    for cap in ["list", "close", "resume"] {
        assert!(caps["sessionCapabilities"][cap].is_object(), "{cap}: {caps}");
    }
    assert_eq!(result["agentInfo"]["name"], "cordis");
}

const SLOW_SCRIPT: &str = "steps:\n  - text: never seen\n    pauseMs: 60000\n  - text: after the cancel\n";

#[test]
fn cancel_stops_the_turn_promptly_and_the_next_prompt_works() {
    let scratch = Scratch::new();
    scratch.composition(TODO_PARALLEL);
    std::fs::write(scratch.path().join("script.yml"), SLOW_SCRIPT).unwrap();
    let records = client(
        &scratch,
        json!([{"op": "initialize"}, new_session(&scratch), {"op": "prompt", "text": "wait", "cancelAfterMs": 300}, {"op": "prompt", "text": "again"}]),
        "allow-once",
        Duration::from_secs(30),
    );
    let cancelled = records.iter().find(|r| r["kind"] == "cancel").unwrap()["ms"].as_f64().unwrap();
    let answers = of_kind(&records, "response", "prompt");
    assert_eq!(answers[0]["result"]["stopReason"], "cancelled");
    let waited = answers[0]["ms"].as_f64().unwrap() - cancelled;
    assert!(waited < 1000.0, "the cancelled prompt answered {waited} ms after the cancel (bound 1 s)");
    assert_eq!(answers[1]["result"]["stopReason"], "end_turn");
    let texts: Vec<Value> = updates(&records).into_iter().filter(|u| u["sessionUpdate"] == "agent_message_chunk").collect();
    assert_eq!(texts.len(), 1);
    assert_eq!(texts[0]["content"]["text"], "after the cancel");
    // The log records the first turn as interrupted.
    let id = session_of(&records);
    let show = scratch.cordis(&["-c", "cordis.yml", "--no-user-patch", "session", "show", &id]);
    assert!(text(&show).0.contains("interrupted"), "{}", text(&show).0);
}

#[test]
fn a_second_prompt_on_a_busy_session_is_refused() {
    let scratch = Scratch::new();
    scratch.composition(TODO_PARALLEL);
    std::fs::write(scratch.path().join("script.yml"), "steps:\n  - text: slow\n    pauseMs: 1500\n").unwrap();
    let records = client(
        &scratch,
        json!([{"op": "initialize"}, new_session(&scratch), {"op": "prompt2", "text": "twice"}]),
        "allow-once",
        Duration::from_secs(30),
    );
    let errors = of_kind(&records, "error", "prompt");
    assert_eq!(errors.len(), 1, "{records:?}");
    assert_eq!(errors[0]["code"], -32600);
    assert!(errors[0]["message"].as_str().unwrap().contains("already running a prompt"));
    assert_eq!(of_kind(&records, "response", "prompt")[0]["result"]["stopReason"], "end_turn");
}

#[test]
fn a_model_error_is_a_json_rpc_error_and_the_session_goes_on() {
    let scratch = Scratch::new();
    scratch.composition(TODO_PARALLEL);
    std::fs::write(scratch.path().join("script.yml"), "steps:\n  - error: the provider answered 500\n  - text: fine now\n").unwrap();
    let records = client(
        &scratch,
        json!([{"op": "initialize"}, new_session(&scratch), {"op": "prompt", "text": "one"}, {"op": "prompt", "text": "two"}]),
        "allow-once",
        Duration::from_secs(30),
    );
    let errors = of_kind(&records, "error", "prompt");
    assert_eq!(errors[0]["code"], -32603);
    assert!(errors[0]["message"].as_str().unwrap().contains("the provider answered 500"), "{}", errors[0]);
    assert_eq!(of_kind(&records, "response", "prompt")[0]["result"]["stopReason"], "end_turn");
}

#[test]
fn unknown_sessions_are_resource_not_found() {
    let scratch = Scratch::new();
    scratch.composition(TODO_PARALLEL);
    let cwd = scratch.path().display().to_string();
    let records = client(
        &scratch,
        json!([
            {"op": "initialize"},
            {"op": "load", "session": "s-nope", "cwd": cwd},
            {"op": "resume", "session": "s-nope", "cwd": cwd},
            {"op": "raw", "method": "session/prompt", "params": {"sessionId": "s-nope", "prompt": [{"type": "text", "text": "hi"}]}},
            {"op": "raw", "method": "session/new", "params": {"cwd": "relative/path", "mcpServers": []}},
            {"op": "raw", "method": "session/set_mode", "params": {"sessionId": "s-nope", "modeId": "x"}}
        ]),
        "allow-once",
        Duration::from_secs(20),
    );
    let codes: Vec<i64> = records.iter().filter(|r| r["kind"] == "error").map(|r| r["code"].as_i64().unwrap()).collect();
    assert_eq!(codes, [-32002, -32002, -32002, -32602, -32601], "{records:?}");
}

/// Sends raw lines to `cordis acp`, reads its stdout until the answer to
/// the last line's request, then closes stdin; returns every stdout line,
/// each checked to be one JSON-RPC message, and stderr.
fn raw_exchange(scratch: &Scratch, lines: &[&str]) -> (Vec<Value>, String) {
    let mut agent = Agent::start_with(scratch, Stdio::piped());
    let stderr = agent.child.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    for line in lines {
        writeln!(agent.stdin.as_mut().unwrap(), "{line}").unwrap();
    }
    let last: Value = serde_json::from_str(lines.last().unwrap()).unwrap();
    let started = Instant::now();
    let mut messages = Vec::new();
    let mut line = String::new();
    while agent.out.read_line(&mut line).unwrap() > 0 {
        let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("stdout holds a line that is not JSON ({e}): {line}"));
        assert_eq!(v["jsonrpc"], "2.0", "{line}");
        line.clear();
        let done = v["id"] == last["id"] && v.get("method").is_none();
        messages.push(v);
        if done {
            break;
        }
    }
    drop(agent.stdin.take());
    let status = agent.child.wait().unwrap();
    assert!(started.elapsed() < Duration::from_secs(20), "cordis acp took {:?}", started.elapsed());
    let stderr = stderr.join().unwrap();
    assert!(status.success(), "cordis acp failed:\n{stderr}");
    (messages, stderr)
}

#[test]
fn malformed_lines_get_their_json_rpc_codes() {
    let scratch = Scratch::new();
    scratch.composition(TODO_PARALLEL);
    let (messages, _) = raw_exchange(
        &scratch,
        &[
            "this is not json",
            "[1, 2]",
            r#"{"jsonrpc":"2.0","id":1,"method":"no/such"}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"mcpServers":[]}}"#,
            r#"{"jsonrpc":"1.0","id":3,"method":"initialize"}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":"x","prompt":"not a list"}}"#,
            r#"{"jsonrpc":"2.0","id":5,"method":"initialize","params":{"protocolVersion":1}}"#,
        ],
    );
    let codes: Vec<(Value, Value)> = messages.iter().map(|m| (m["id"].clone(), m["error"]["code"].clone())).collect();
    assert_eq!(
        codes,
        [
            (Value::Null, json!(-32700)),
            (Value::Null, json!(-32600)),
            (json!(1), json!(-32601)),
            (json!(2), json!(-32602)),
            (json!(3), json!(-32600)),
            (json!(4), json!(-32602)),
            (json!(5), Value::Null),
        ]
    );
}

#[test]
fn a_plugin_that_prints_never_reaches_the_protocol() {
    let scratch = Scratch::new();
    let plugins = scratch.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    std::fs::copy(library("fixture-noisy"), plugins.join("libnoisy.so")).unwrap();
    scratch.composition(&format!("{TODO_PARALLEL}- id: noisy\n  name: ./plugins/libnoisy.so\n  config:\n    label: loud\n"));
    std::fs::write(scratch.path().join("script.yml"), "steps:\n  - calls:\n      - name: shout\n        arguments: '{}'\n  - text: done\n").unwrap();
    let cwd = scratch.path().display().to_string();
    let new = json!({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": cwd, "mcpServers": []}}).to_string();
    // The session id is not known in advance: a second connection prompts
    // the stored session after loading it.
    let (first, stderr) = raw_exchange(&scratch, &[r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}"#, &new]);
    assert!(stderr.contains("noisy: apply loud"), "the plugin's output goes to stderr:\n{stderr}");
    let id = first[1]["result"]["sessionId"].as_str().unwrap().to_string();
    let load = json!({"jsonrpc": "2.0", "id": 2, "method": "session/load", "params": {"sessionId": id, "cwd": cwd, "mcpServers": []}}).to_string();
    let prompt =
        json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {"sessionId": id, "prompt": [{"type": "text", "text": "shout"}]}})
            .to_string();
    let (messages, stderr) = raw_exchange(&scratch, &[&load, &prompt]);
    assert!(stderr.contains("noisy: shout loud (not JSON)") && stderr.contains("\"forged\":true"), "{stderr}\n{messages:?}");
    assert!(messages.iter().all(|m| m["result"]["forged"].is_null()));
    let last = messages.last().unwrap();
    assert_eq!(last["id"], 3);
    assert_eq!(last["result"]["stopReason"], "end_turn");
}

#[test]
fn permission_is_asked_for_marked_tools_and_answers_hold() {
    let scratch = Scratch::new();
    scratch.composition(&format!("{TODO_PARALLEL}- id: acp\n  name: cordis:acp\n  config:\n    approve: [todo_write]\n"));
    let write = |content: &str| {
        format!("      - name: todo_write\n        arguments: '{{\"todos\": [{{\"content\": \"{content}\", \"status\": \"pending\"}}]}}'\n")
    };
    let script = format!("steps:\n  - calls:\n{}  - calls:\n{}  - text: done\n", write("first"), write("second"));
    std::fs::write(scratch.path().join("script.yml"), &script).unwrap();
    let steps = json!([{"op": "initialize"}, new_session(&scratch), {"op": "prompt", "text": "plan"}]);

    // Allowed once: each call asks, each runs.
    let records = client(&scratch, steps.clone(), "allow-once", Duration::from_secs(30));
    let asked: Vec<&Value> = records.iter().filter(|r| r["kind"] == "permission").collect();
    assert_eq!(asked.len(), 2);
    assert_eq!(asked[0]["toolCall"]["status"], "pending");
    let ids: Vec<&str> = asked[0]["options"].as_array().unwrap().iter().map(|o| o["optionId"].as_str().unwrap()).collect();
    assert_eq!(ids, ["allow-once", "allow-always", "reject-once", "reject-always"]);
    assert_eq!(plans(&records).len(), 2);
    let first_call = updates(&records).into_iter().find(|u| u["sessionUpdate"] == "tool_call").unwrap();
    assert_eq!(first_call["status"], "pending", "a call waiting for permission is pending");

    // Allowed always: asked once.
    let records = client(&scratch, steps.clone(), "allow-always", Duration::from_secs(30));
    assert_eq!(records.iter().filter(|r| r["kind"] == "permission").count(), 1);
    assert_eq!(plans(&records).len(), 2);

    // Rejected: nothing runs, the model is told, no plan.
    let records = client(&scratch, steps.clone(), "reject-once", Duration::from_secs(30));
    assert_eq!(records.iter().filter(|r| r["kind"] == "permission").count(), 2);
    assert!(plans(&records).is_empty());
    let failed: Vec<Value> = updates(&records).into_iter().filter(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] == "failed").collect();
    assert_eq!(failed.len(), 2);
    assert!(failed[0]["content"][0]["content"]["text"].as_str().unwrap().contains("rejected"));

    // A cancel while the question is open answers it: the turn ends cancelled.
    let records = client(&scratch, steps, "cancel", Duration::from_secs(30));
    assert_eq!(of_kind(&records, "response", "prompt")[0]["result"]["stopReason"], "cancelled");
    assert!(plans(&records).is_empty());

    // A question never answered: the client's cancel alone stops the turn.
    let records = client(
        &scratch,
        json!([{"op": "initialize"}, new_session(&scratch), {"op": "prompt", "text": "plan", "cancelAfterMs": 500}]),
        "hold",
        Duration::from_secs(30),
    );
    let cancelled = records.iter().find(|r| r["kind"] == "cancel").unwrap()["ms"].as_f64().unwrap();
    let answer = of_kind(&records, "response", "prompt")[0];
    assert_eq!(answer["result"]["stopReason"], "cancelled");
    assert!(answer["ms"].as_f64().unwrap() - cancelled < 1000.0, "{records:?}");
}

/// Where sessions are stored in a test of `session/load`.
enum Store {
    Flat,
    Harness,
    Postgres(String),
}

impl Store {
    fn row(&self) -> String {
        match self {
            Store::Flat => String::new(),
            Store::Harness => "- id: store\n  name: cordis:session-persistence-jsonl\n  config:\n    root: ./harness-sessions\n".into(),
            Store::Postgres(schema) => {
                format!("- id: store\n  name: session-postgres\n  config:\n    urlEnv: DATABASE_URL_ACP\n    schema: {schema}\n")
            }
        }
    }
}

/// A prompt in one process, then `session/load` in a new one: the replay is
/// the user's message and then exactly the updates the prompt sent.
fn load_replays(store: &Store, env: Value) {
    let scratch = Scratch::new();
    scratch.composition(&format!("{TODO_PARALLEL}{}", store.row()));
    std::fs::write(scratch.path().join("script.yml"), PARALLEL_SCRIPT).unwrap();
    let steps = json!([{"op": "initialize"}, new_session(&scratch), {"op": "prompt", "text": "Build and ship"}]);
    let first = client_with(&scratch, steps, "allow-once", Duration::from_secs(30), env.clone());
    let id = session_of(&first);
    let live = updates(&first);
    assert!(!live.is_empty());
    let cwd = scratch.path().display().to_string();
    let steps = json!([{"op": "initialize"}, {"op": "load", "session": id, "cwd": cwd}, {"op": "list"}]);
    let second = client_with(&scratch, steps, "allow-once", Duration::from_secs(30), env);
    let replayed = updates(&second);
    assert_eq!(replayed[0], json!({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "Build and ship"}}));
    assert_eq!(replayed[1..], live[..], "the replay is what the prompt sent, in order");
    let loaded = records_index(&second, "response", "load");
    assert!(second[..loaded].iter().filter(|r| r["kind"] == "update").count() == replayed.len(), "every replayed update precedes the answer");
    let listed = &of_kind(&second, "response", "list")[0]["result"]["sessions"];
    let mine = listed.as_array().unwrap().iter().find(|s| s["sessionId"] == id.as_str()).expect("the session is listed");
    assert_eq!(mine["cwd"], cwd);
    assert_eq!(mine["title"], "Build and ship");
}

fn records_index(records: &[Value], kind: &str, op: &str) -> usize {
    records.iter().position(|r| r["kind"] == kind && r["op"] == op).unwrap()
}

#[test]
fn load_replays_the_session_in_a_new_process_from_flat_files() {
    load_replays(&Store::Flat, json!({}));
}

#[test]
fn load_replays_the_session_in_a_new_process_from_the_harness_store() {
    load_replays(&Store::Harness, json!({}));
}

#[test]
fn load_replays_the_session_in_a_new_process_from_postgresql() {
    let pg = PgServer::start();
    load_replays(&Store::Postgres("acp_load".into()), json!({"DATABASE_URL_ACP": pg.url()}));
}

#[test]
fn a_session_written_by_cordis_run_loads_with_its_plan() {
    let scratch = Scratch::new();
    scratch.composition(TODO_PARALLEL);
    std::fs::write(scratch.path().join("script.yml"), PARALLEL_SCRIPT).unwrap();
    let run = scratch.cordis(&["-c", "cordis.yml", "--no-user-patch", "run", "--script", "script.yml", "Build and ship"]);
    let (stdout, stderr) = text(&run);
    assert!(run.status.success(), "{stdout}\n{stderr}");
    let id = stdout.split_whitespace().nth(1).unwrap().to_string();
    let cwd = scratch.path().display().to_string();
    let records = client(&scratch, json!([{"op": "initialize"}, {"op": "load", "session": id, "cwd": cwd}]), "allow-once", Duration::from_secs(30));
    assert_eq!(plans(&records).len(), 3);
    assert_eq!(plans(&records)[2], json!([]));
}

#[test]
fn harness_rows_configure_the_agent_and_its_store() {
    let scratch = Scratch::new();
    scratch.composition(&format!(
        "{TODO_PARALLEL}- id: acp-agent\n  name: '@deepseek-ai/dsh-acp-demo'\n  config:\n    provider: deepseek-official\n    model: deepseek-v4-pro\n    persistenceRoot: ./.sessions\n    persistenceCompression: none\n    workspaceContext:\n      maxBytes: 65536\n    persona: |\n      You work in {{{{cwd}}}} with {{{{model}}}}.\n"
    ));
    let check = scratch.cordis(&["-c", "cordis.yml", "--no-user-patch", "check"]);
    let (out, err) = text(&check);
    assert!(check.status.success(), "{out}\n{err}");
    assert!(out.contains("acp: served by `cordis acp`") && out.contains("workspaceContext accepted and not used"), "{out}");
    std::fs::write(scratch.path().join("script.yml"), "steps:\n  - text: hello\n").unwrap();
    let records =
        client(&scratch, json!([{"op": "initialize"}, new_session(&scratch), {"op": "prompt", "text": "hi"}]), "allow-once", Duration::from_secs(30));
    let id = session_of(&records);
    // `<root>/--<project key>--/<id>/session.jsonl`: uncompressed.
    let stored: Vec<PathBuf> = std::fs::read_dir(scratch.path().join(".sessions"))
        .expect("the harness store under persistenceRoot")
        .flatten()
        .map(|project| project.path().join(&id).join("session.jsonl"))
        .filter(|f| f.is_file())
        .collect();
    assert_eq!(stored.len(), 1, "session {id} stored in the harness store under persistenceRoot, uncompressed");

    // Two ACP entries: `check` fails the second, as `cordis acp` refuses them.
    scratch.composition(&format!("{TODO_PARALLEL}- id: one\n  name: cordis:acp\n- id: two\n  name: '@deepseek-ai/dsh-acp'\n"));
    let check = scratch.cordis(&["-c", "cordis.yml", "--no-user-patch", "check"]);
    let (out, err) = text(&check);
    assert_eq!(check.status.code(), Some(1), "{out}\n{err}");
    assert!(format!("{out}{err}").contains("a second ACP entry"), "{out}\n{err}");
    let acp = scratch.cordis(&["-c", "cordis.yml", "--no-user-patch", "acp"]);
    assert!(!acp.status.success());

    // An unknown key is refused with the keys allowed.
    scratch.composition(&format!("{TODO_PARALLEL}- id: acp\n  name: cordis:acp\n  config:\n    approvals: [x]\n"));
    let check = scratch.cordis(&["-c", "cordis.yml", "--no-user-patch", "check"]);
    let (out, err) = text(&check);
    assert!(!check.status.success());
    assert!(format!("{out}{err}").contains("approvals"), "{out}\n{err}");
}

/// The MCP peers' Python (with the official `mcp` SDK), for a stdio server.
fn mcp_python() -> PathBuf {
    let dest = target_dir().join("mcp-peers");
    let out = Command::new("bash").arg(repo_root().join("tests/mcp/setup.sh")).arg(&dest).output().expect("run tests/mcp/setup.sh");
    assert!(out.status.success(), "tests/mcp/setup.sh failed:\n{}", text(&out).1);
    dest.join("python/bin/python")
}

/// `cordis mcp --http` serving tool-todo, as the client's HTTP server;
/// its scratch folder lives as long as it does.
fn http_peer() -> (McpHttp, Scratch) {
    let scratch = Scratch::new();
    scratch.composition(TODO_PARALLEL);
    let server = McpHttp::start(scratch.command(&["-c", "cordis.yml", "--no-user-patch", "mcp", "--http", "127.0.0.1:0"]));
    (server, scratch)
}

#[test]
fn the_clients_mcp_servers_serve_that_session_only() {
    let python = mcp_python();
    let (http, _http_scratch) = http_peer();
    let scratch = Scratch::new();
    scratch.composition(TODO_PARALLEL);
    let script = "steps:\n  - calls:\n      - name: mcp__py__echo\n        arguments: '{\"text\": \"from stdio\"}'\n      - name: mcp__web__todo_write\n        arguments: '{\"todos\": [{\"content\": \"over http\", \"status\": \"pending\"}]}'\n  - text: done\n  - calls:\n      - name: mcp__py__echo\n        arguments: '{\"text\": \"again\"}'\n  - text: done\n";
    std::fs::write(scratch.path().join("script.yml"), script).unwrap();
    // A copy under a name of this test's own: the orphan scan below must
    // not see another test's server.
    let server = scratch.path().join("acp-orphan-check-server.py");
    std::fs::copy(repo_root().join("tests/mcp/servers/server.py"), &server).unwrap();
    let servers = json!([
        {"name": "py", "command": python, "args": [server], "env": []},
        {"type": "http", "name": "web", "url": http.url, "headers": []},
        {"name": "broken", "command": "/nonexistent/mcp-server", "args": [], "env": []},
        {"type": "sse", "name": "old", "url": "http://127.0.0.1:9/sse", "headers": []}
    ]);
    let started = Instant::now();
    let records = client(
        &scratch,
        json!([
            {"op": "initialize"},
            {"op": "new", "cwd": scratch.path(), "mcpServers": servers},
            {"op": "prompt", "text": "use the servers"},
            new_session(&scratch),
            {"op": "prompt", "text": "no servers here"}
        ]),
        "allow-once",
        Duration::from_secs(60),
    );
    let created = of_kind(&records, "response", "new");
    let reports = created[0]["result"]["_meta"]["cordis/mcpServers"].as_array().expect("the servers' reports").clone();
    let by_name = |n: &str| reports.iter().find(|r| r["name"] == n).unwrap().clone();
    assert_eq!(by_name("py")["connected"], true, "{reports:?}");
    assert_eq!(by_name("web")["connected"], true, "{reports:?}");
    assert_eq!(by_name("broken")["connected"], false);
    assert!(by_name("broken")["status"].as_str().unwrap().contains("broken"), "{reports:?}");
    assert_eq!(by_name("old")["connected"], false);
    assert!(by_name("old")["status"].as_str().unwrap().contains("`sse` is not supported"), "{reports:?}");
    let first = session_of(&records);
    let results: Vec<Value> = updates(&records).into_iter().filter(|u| u["sessionUpdate"] == "tool_call_update").collect();
    assert_eq!(results[0]["status"], "completed", "{results:?}");
    assert_eq!(results[0]["content"][0]["content"]["text"], "from stdio");
    assert_eq!(results[1]["status"], "completed", "{results:?}");
    // The second session does not see the first one's servers.
    assert_eq!(results[2]["status"], "failed");
    assert!(results[2]["content"][0]["content"]["text"].as_str().unwrap().contains("unknown tool `mcp__py__echo`"), "{results:?}");
    assert!(!first.is_empty());
    assert!(started.elapsed() < Duration::from_secs(60));
    // The stdio server is gone with the connection (its supervisor ends
    // the group: TERM, then KILL after 1 s).
    let ended = Instant::now();
    loop {
        let ps = Command::new("ps").args(["-eo", "args"]).output().unwrap();
        if !text(&ps).0.lines().any(|l| l.contains(server.to_str().unwrap())) {
            break;
        }
        assert!(ended.elapsed() < Duration::from_secs(5), "the session's server outlived cordis acp by 5 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `cordis acp` started by hand, for tests that signal it.
struct Agent {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    out: BufReader<std::process::ChildStdout>,
}

impl Agent {
    fn start(scratch: &Scratch) -> Agent {
        Agent::start_with(scratch, Stdio::null())
    }

    fn start_with(scratch: &Scratch, stderr: Stdio) -> Agent {
        let args = agent(scratch, &[]);
        let mut child = Command::new(&args[0])
            .args(&args[1..])
            .current_dir(scratch.path())
            .env("XDG_CONFIG_HOME", scratch.path().join(".config"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("start cordis acp");
        let stdin = child.stdin.take();
        let out = BufReader::new(child.stdout.take().unwrap());
        Agent { child, stdin, out }
    }

    fn send(&mut self, message: Value) {
        writeln!(self.stdin.as_mut().unwrap(), "{message}").unwrap();
    }

    /// Reads messages until the answer to request `id`.
    fn answer(&mut self, id: i64) -> Value {
        let mut line = String::new();
        loop {
            line.clear();
            assert!(self.out.read_line(&mut line).unwrap() > 0, "cordis acp ended before answering {id}");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id && v.get("method").is_none() {
                return v;
            }
        }
    }

    /// A new session in `scratch`, its id.
    fn new_session(&mut self, scratch: &Scratch) -> String {
        self.send(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}));
        self.answer(0);
        self.send(json!({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": scratch.path(), "mcpServers": []}}));
        self.answer(1)["result"]["sessionId"].as_str().unwrap().to_string()
    }

    fn prompt(&mut self, id: i64, session: &str, text: &str) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt", "params": {"sessionId": session, "prompt": [{"type": "text", "text": text}]}}));
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `turn/end` reasons of `session`, read from its flat log.
fn turn_ends(scratch: &Scratch, session: &str) -> Vec<String> {
    let log = scratch.path().join(".cordis/sessions").join(format!("{session}.jsonl"));
    std::fs::read_to_string(&log)
        .unwrap_or_else(|e| panic!("read {}: {e}", log.display()))
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "turn/end")
        .map(|e| e["data"]["reason"]["kind"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn sigterm_and_sigint_close_the_running_turn_before_exiting() {
    for (signal, code) in [("TERM", 143), ("INT", 130)] {
        let scratch = Scratch::new();
        scratch.composition(TODO_PARALLEL);
        std::fs::write(scratch.path().join("script.yml"), SLOW_SCRIPT).unwrap();
        let mut agent = Agent::start(&scratch);
        let session = agent.new_session(&scratch);
        agent.prompt(2, &session, "wait");
        std::thread::sleep(Duration::from_millis(300));
        let sent = Instant::now();
        let kill = Command::new("kill").args([&format!("-{signal}"), &agent.child.id().to_string()]).status().unwrap();
        assert!(kill.success());
        let status = agent.child.wait().unwrap();
        assert!(sent.elapsed() < Duration::from_secs(2), "SIG{signal}: exited after {:?} (bound 2 s)", sent.elapsed());
        assert_eq!(status.code(), Some(code), "SIG{signal}");
        assert_eq!(turn_ends(&scratch, &session), ["interrupted"], "SIG{signal}: the turn is closed in the log");
    }
}

#[test]
fn after_sigkill_the_session_loads_and_the_next_prompt_closes_the_cut_turn() {
    let scratch = Scratch::new();
    scratch.composition(TODO_PARALLEL);
    std::fs::write(scratch.path().join("script.yml"), SLOW_SCRIPT).unwrap();
    let mut agent = Agent::start(&scratch);
    let session = agent.new_session(&scratch);
    agent.prompt(2, &session, "wait");
    std::thread::sleep(Duration::from_millis(300));
    agent.child.kill().unwrap();
    agent.child.wait().unwrap();
    assert!(turn_ends(&scratch, &session).is_empty(), "SIGKILL leaves the turn open");
    // The script starts over in the new process: its first step is slow
    // again, so the second process gets a quick script.
    std::fs::write(scratch.path().join("script.yml"), "steps:\n  - text: back\n").unwrap();
    let mut agent = Agent::start(&scratch);
    agent.send(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}));
    agent.answer(0);
    let cwd = scratch.path().display().to_string();
    agent.send(json!({"jsonrpc": "2.0", "id": 1, "method": "session/load", "params": {"sessionId": session, "cwd": cwd, "mcpServers": []}}));
    assert!(agent.answer(1)["result"].is_object());
    agent.prompt(2, &session, "again");
    let started = Instant::now();
    assert_eq!(agent.answer(2)["result"]["stopReason"], "end_turn");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(turn_ends(&scratch, &session), ["interrupted", "completed"]);
}

#[test]
fn an_answer_cut_at_the_output_limit_stops_with_max_tokens() {
    let scratch = Scratch::new();
    scratch.composition(TODO_PARALLEL);
    std::fs::write(scratch.path().join("script.yml"), "steps:\n  - text: the answer was cut\n    finish: length\n").unwrap();
    let records = client(
        &scratch,
        json!([{"op": "initialize"}, new_session(&scratch), {"op": "prompt", "text": "long"}]),
        "allow-once",
        Duration::from_secs(20),
    );
    assert_eq!(of_kind(&records, "response", "prompt")[0]["result"]["stopReason"], "max_tokens");
}

#[test]
fn cancel_stops_a_hung_mcp_call_of_the_clients_server() {
    let python = mcp_python();
    let scratch = Scratch::new();
    scratch.composition(TODO_PARALLEL);
    let script = "steps:\n  - calls:\n      - name: mcp__py__sleep\n        arguments: '{\"ms\": 60000}'\n  - text: never\n  - text: next prompt\n";
    std::fs::write(scratch.path().join("script.yml"), script).unwrap();
    let server = repo_root().join("tests/mcp/servers/server.py");
    let servers = json!([{"name": "py", "command": python, "args": [server], "env": []}]);
    let records = client(
        &scratch,
        json!([
            {"op": "initialize"},
            {"op": "new", "cwd": scratch.path(), "mcpServers": servers},
            {"op": "prompt", "text": "sleep", "cancelAfterMs": 1500},
            {"op": "prompt", "text": "again"}
        ]),
        "allow-once",
        Duration::from_secs(40),
    );
    let cancelled = records.iter().find(|r| r["kind"] == "cancel").unwrap()["ms"].as_f64().unwrap();
    let answers = of_kind(&records, "response", "prompt");
    assert_eq!(answers[0]["result"]["stopReason"], "cancelled");
    let waited = answers[0]["ms"].as_f64().unwrap() - cancelled;
    assert!(waited < 2000.0, "the hung MCP call held the cancel {waited} ms (bound 2 s)");
    let failed = updates(&records).into_iter().find(|u| u["sessionUpdate"] == "tool_call_update").unwrap();
    assert_eq!(failed["status"], "failed");
    assert_eq!(answers[1]["result"]["stopReason"], "end_turn");
}

#[test]
fn the_editor_closing_stdin_mid_turn_closes_the_turn_before_exit() {
    let scratch = Scratch::new();
    scratch.composition(TODO_PARALLEL);
    std::fs::write(scratch.path().join("script.yml"), SLOW_SCRIPT).unwrap();
    let mut agent = Agent::start(&scratch);
    let session = agent.new_session(&scratch);
    agent.prompt(2, &session, "wait");
    std::thread::sleep(Duration::from_millis(300));
    let closed = Instant::now();
    drop(agent.stdin.take());
    let status = agent.child.wait().unwrap();
    assert!(closed.elapsed() < Duration::from_secs(2), "exited {:?} after stdin closed (bound 2 s)", closed.elapsed());
    assert!(status.success());
    assert_eq!(turn_ends(&scratch, &session), ["interrupted"]);
}

#[test]
fn a_session_written_by_cordis_mcp_loads_with_its_plan() {
    let scratch = Scratch::new();
    scratch.composition(TODO_PARALLEL);
    let mut mcp = scratch.command(&["-c", "cordis.yml", "--no-user-patch", "mcp"]);
    let mut child = mcp.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("start cordis mcp");
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let todos = r#"{"todos":[{"content":"from an MCP client","status":"in_progress"},{"content":"then the editor","status":"pending"}]}"#;
    for message in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "todo_write", "arguments": serde_json::from_str::<Value>(todos).unwrap()}}),
    ] {
        writeln!(stdin, "{message}").unwrap();
        if message.get("id").is_some() {
            // Wait for each answer before the next request.
            loop {
                line.clear();
                assert!(out.read_line(&mut line).unwrap() > 0, "cordis mcp ended early");
                if serde_json::from_str::<Value>(&line).unwrap()["id"] == message["id"] {
                    break;
                }
            }
        }
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
    let sessions: Vec<String> = std::fs::read_dir(scratch.path().join(".cordis/sessions"))
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.strip_suffix(".jsonl")).map(str::to_string))
        .collect();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    let cwd = scratch.path().display().to_string();
    let records =
        client(&scratch, json!([{"op": "initialize"}, {"op": "load", "session": sessions[0], "cwd": cwd}]), "allow-once", Duration::from_secs(30));
    assert_eq!(
        plans(&records),
        [json!([
            {"content": "from an MCP client", "priority": "medium", "status": "in_progress"},
            {"content": "then the editor", "priority": "medium", "status": "pending"}
        ])]
    );
    let call = updates(&records).into_iter().find(|u| u["sessionUpdate"] == "tool_call").expect("the MCP client's call");
    assert_eq!(call["rawInput"]["todos"][0]["content"], "from an MCP client");
}

/// One Chat Completions stream event.
fn chunk(delta: Value, finish: Value) -> String {
    json!({"id": "chatcmpl-acp", "object": "chat.completion.chunk", "created": 1, "model": "deepseek-v4-flash",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    .to_string()
}

#[test]
fn a_streaming_provider_streams_chunks_and_the_persona_is_its_system_prompt() {
    use cordis_tests::sse_server::{End, Reply, SseServer};
    let reply = Reply::Stream {
        events: vec![
            chunk(json!({"role": "assistant", "reasoning_content": "Thinking"}), Value::Null),
            chunk(json!({"content": "Hel"}), Value::Null),
            chunk(json!({"content": "lo"}), Value::Null),
            chunk(json!({}), json!("stop")),
        ],
        end: End::Done,
    };
    let server = SseServer::start(vec![reply]);
    let scratch = Scratch::new();
    scratch.composition(&format!(
        "{TODO_PARALLEL}- id: model\n  name: llm-openai\n  config:\n    baseUrl: {}\n    model: deepseek-v4-flash\n    provider: deepseek-official\n    apiKeyEnv: CORDIS_TEST_KEY\n    systemPrompt: the provider's own\n\
         - id: acp\n  name: cordis:acp\n  config:\n    persona: 'You are {{{{model}}}} working in {{{{cwd}}}}.'\n",
        server.base_url
    ));
    let records = client_with(
        &scratch,
        json!([{"op": "initialize"}, new_session(&scratch), {"op": "prompt", "text": "say hello"}]),
        "allow-once",
        Duration::from_secs(30),
        json!({"CORDIS_TEST_KEY": "sk-test"}),
    );
    let chunks: Vec<(String, String)> = updates(&records)
        .into_iter()
        .map(|u| (u["sessionUpdate"].as_str().unwrap().to_string(), u["content"]["text"].as_str().unwrap_or_default().to_string()))
        .collect();
    assert_eq!(
        chunks,
        [
            ("agent_thought_chunk".to_string(), "Thinking".to_string()),
            ("agent_message_chunk".to_string(), "Hel".to_string()),
            ("agent_message_chunk".to_string(), "lo".to_string()),
        ],
        "each streamed piece once, and no second copy from the finished message"
    );
    assert_eq!(of_kind(&records, "response", "prompt")[0]["result"]["stopReason"], "end_turn");
    let sent = &server.requests()[0].body;
    let cwd = scratch.path().display().to_string();
    assert_eq!(sent["messages"][0], json!({"role": "system", "content": format!("You are deepseek-v4-flash working in {cwd}.")}));
}

#[test]
fn loading_an_open_session_again_on_the_same_connection_keeps_its_model() {
    let scratch = Scratch::new();
    scratch.composition(TODO_PARALLEL);
    std::fs::write(scratch.path().join("script.yml"), "steps:\n  - text: first answer\n  - text: second answer\n").unwrap();
    let mut agent = Agent::start(&scratch);
    let session = agent.new_session(&scratch);
    agent.prompt(2, &session, "one");
    assert_eq!(agent.answer(2)["result"]["stopReason"], "end_turn");
    let cwd = scratch.path().display().to_string();
    agent.send(json!({"jsonrpc": "2.0", "id": 3, "method": "session/load", "params": {"sessionId": session, "cwd": cwd, "mcpServers": []}}));
    let loaded = agent.answer(3);
    assert!(loaded["result"].is_object(), "a second load on the same connection is not refused as held elsewhere: {loaded}");
    agent.prompt(4, &session, "two");
    let mut line = String::new();
    let mut texts = Vec::new();
    loop {
        line.clear();
        agent.out.read_line(&mut line).unwrap();
        let m: Value = serde_json::from_str(&line).unwrap();
        if m["id"] == 4 {
            assert_eq!(m["result"]["stopReason"], "end_turn");
            break;
        }
        if let Some(t) = m["params"]["update"]["content"]["text"].as_str() {
            texts.push(t.to_string());
        }
    }
    assert_eq!(texts, ["second answer"], "the script goes on where it stopped");
}

#[test]
fn a_new_turn_clears_the_editors_plan_live_and_on_load() {
    let scratch = Scratch::new();
    scratch.composition(TODO_PARALLEL);
    let script = "steps:\n  - calls:\n      - name: todo_write\n        arguments: '{\"todos\": [{\"content\": \"a\", \"status\": \"in_progress\"}]}'\n  - text: planned\n  - text: a turn without a plan\n";
    std::fs::write(scratch.path().join("script.yml"), script).unwrap();
    let records = client(
        &scratch,
        json!([{"op": "initialize"}, new_session(&scratch), {"op": "prompt", "text": "plan"}, {"op": "prompt", "text": "chat"}]),
        "allow-once",
        Duration::from_secs(30),
    );
    let cleared = json!([]);
    let live = plans(&records);
    assert_eq!(live.len(), 2, "{live:?}");
    assert_eq!(live[1], cleared, "the second turn's start clears the plan");
    let id = session_of(&records);
    let cwd = scratch.path().display().to_string();
    let loaded = client(&scratch, json!([{"op": "initialize"}, {"op": "load", "session": id, "cwd": cwd}]), "allow-once", Duration::from_secs(30));
    assert_eq!(plans(&loaded), live, "the replay clears it at the same place");
}

#[test]
fn a_slow_mcp_server_holds_up_neither_cancels_nor_other_sessions() {
    let scratch = Scratch::new();
    scratch.composition(TODO_PARALLEL);
    std::fs::write(scratch.path().join("script.yml"), SLOW_SCRIPT).unwrap();
    let mut agent = Agent::start(&scratch);
    let session = agent.new_session(&scratch);
    agent.prompt(2, &session, "wait");
    // A server that never answers the handshake: its session waits up to 10 s.
    agent.send(json!({"jsonrpc": "2.0", "id": 3, "method": "session/new", "params": {"cwd": scratch.path(), "mcpServers": [
        {"name": "mute", "command": "/bin/sleep", "args": ["100"], "env": []}
    ]}}));
    std::thread::sleep(Duration::from_millis(300));
    agent.send(json!({"jsonrpc": "2.0", "id": 4, "method": "session/list", "params": {}}));
    let started = Instant::now();
    assert!(agent.answer(4)["result"]["sessions"].is_array());
    assert!(started.elapsed() < Duration::from_secs(2), "session/list waited {:?} behind the slow server", started.elapsed());
    let cancelled = Instant::now();
    agent.send(json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}));
    assert_eq!(agent.answer(2)["result"]["stopReason"], "cancelled");
    assert!(cancelled.elapsed() < Duration::from_secs(1), "the cancel waited {:?} behind the slow server", cancelled.elapsed());
}
