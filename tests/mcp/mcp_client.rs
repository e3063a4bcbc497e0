//! `mcp-client`: MCP servers as tools of a composition, against real
//! peers. The servers are written with the official SDKs and installed by
//! `tests/mcp/setup.sh` with the clients: `tests/mcp/servers/server.py`
//! (Python, `MCPServer`) and `tests/mcp/servers/server.mjs` (TypeScript,
//! the low-level `Server`, which misbehaves on purpose); and `cordis mcp`
//! itself, over stdio and Streamable HTTP, so that `cordis run` reaches
//! tool-todo through both of our sides.
//!
//! Each turn is a real `cordis run`, with a scripted model or with
//! `llm-openai` reading a streamed answer from a loopback server; the
//! session log is read back afterwards.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use cordis_tests::dev::Dev;
use cordis_tests::sse_server::{End, Reply, SseServer};
use cordis_tests::{cordis_exe, plugin_dir, repo_root, text, Scratch};
use serde_json::{json, Value};

use super::{http_server, peers};

mod faults;

/// `(python, server.py, node, server.mjs)`.
fn servers() -> (PathBuf, PathBuf, PathBuf) {
    let (python, node) = peers();
    let mjs = node.join("server.mjs");
    std::fs::copy(repo_root().join("tests/mcp/servers/server.mjs"), &mjs).expect("copy server.mjs");
    (python.clone(), repo_root().join("tests/mcp/servers/server.py"), mjs)
}

/// Composition rows: the Python server as `py`, the TypeScript one as `ts`.
fn server_rows(ts_timeout_ms: u64) -> String {
    let (python, py, mjs) = servers();
    format!(
        "- id: py\n  name: '@deepseek-ai/dsh-mcp-client'\n  config:\n    serverName: py\n    transport: stdio\n    command: {}\n    args: [{}]\n    cwd: notes\n    env:\n      GREETING: hello\n\
         - id: ts\n  name: mcp-client\n  config:\n    serverName: ts\n    transport: stdio\n    command: node\n    args: [{}]\n    inheritEnv: [PEER_LOG]\n    toolCallTimeoutMs: {ts_timeout_ms}\n    reconnect:\n      initialDelayMs: 200\n\
         - id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: false\n",
        python.display(),
        py.display(),
        mjs.display()
    )
}

/// Runs `cordis` in `scratch` with `env` set (and `PEER_LOG` for the
/// TypeScript server).
fn cordis(scratch: &Scratch, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(cordis_exe());
    command
        .args(args)
        .current_dir(scratch.path())
        .env("CORDIS_PLUGIN_PATH", plugin_dir())
        .env("XDG_CONFIG_HOME", scratch.path().join(".config"))
        .env("PEER_LOG", scratch.path().join("peer.log"))
        .env_remove("RUST_LOG");
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().expect("run cordis")
}

fn session_id(stdout: &str) -> String {
    let line = stdout.lines().find(|l| l.starts_with("session ")).unwrap_or_else(|| panic!("no session line in {stdout}"));
    line.split_whitespace().nth(1).unwrap().to_string()
}

/// The events of session `id` in `state`: `(type, data)` in order.
fn events(state: &Path, id: &str) -> Vec<(String, Value)> {
    let text = std::fs::read_to_string(state.join("sessions").join(format!("{id}.jsonl"))).unwrap();
    text.lines()
        .skip(1)
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (v["type"].as_str().unwrap().to_string(), v["data"].clone())
        })
        .collect()
}

/// The results in the log, by call name: `(name, isError, text)`.
fn results(events: &[(String, Value)]) -> Vec<(String, bool, String)> {
    let mut names = std::collections::HashMap::new();
    for (kind, data) in events {
        if kind == "tool/call" {
            names.insert(data["callId"].as_str().unwrap_or_default().to_string(), data["name"].as_str().unwrap_or_default().to_string());
        }
    }
    events
        .iter()
        .filter(|(kind, _)| kind == "tool/result")
        .map(|(_, d)| {
            let part = &d["message"]["content"][0];
            let id = part["toolCallId"].as_str().unwrap_or_default();
            let text: Vec<&str> = part["content"].as_array().map(|c| c.iter().filter_map(|b| b["text"].as_str()).collect()).unwrap_or_default();
            (names.get(id).cloned().unwrap_or_else(|| id.to_string()), part["isError"].as_bool().unwrap_or(false), text.join("\n"))
        })
        .collect()
}

fn result_of<'a>(results: &'a [(String, bool, String)], name: &str) -> &'a (String, bool, String) {
    results.iter().find(|(n, _, _)| n == name).unwrap_or_else(|| panic!("no result of {name} in {results:#?}"))
}

/// The event types a session may hold after these turns: the host's core
/// types and tool-todo's. A server can add none.
const KNOWN: &[&str] = &[
    "turn/start",
    "turn/end",
    "step/start",
    "step/end",
    "user/message",
    "assistant/message",
    "assistant/chunk",
    "tool/call",
    "tool/result",
    "todo/write",
];

fn assert_only_known_types(events: &[(String, Value)]) {
    for (kind, _) in events {
        assert!(KNOWN.contains(&kind.as_str()), "an event of type {kind} reached the log");
    }
}

fn script(scratch: &Scratch, steps: &str) -> String {
    let path = scratch.path().join("turn.script.yml");
    std::fs::write(&path, format!("model: mcp-trial\nprompt: use the tools\nsteps:\n{steps}")).unwrap();
    path.display().to_string()
}

fn call(name: &str, arguments: &str) -> String {
    format!("      - name: {name}\n        arguments: '{arguments}'\n")
}

#[test]
fn python_and_typescript_servers_serve_a_scripted_turn_with_todo_write() {
    let scratch = Scratch::new();
    std::fs::create_dir(scratch.path().join("notes")).unwrap();
    std::fs::write(scratch.path().join("notes/plan.txt"), "ship on friday").unwrap();
    scratch.composition(&server_rows(60_000));

    let tools = cordis(&scratch, &["tools"], &[]);
    let (stdout, stderr) = text(&tools);
    assert!(tools.status.success(), "{stdout}\n{stderr}");
    for name in ["mcp__py__add", "mcp__py__echo", "mcp__py__read_note", "mcp__ts__mixed", "mcp__ts__lie", "todo_write"] {
        assert!(stdout.contains(name), "{name} missing from the catalog:\n{stdout}");
    }

    let steps = format!(
        "  - text: Using the servers and planning in one step.\n    calls:\n{}{}{}{}{}{}{}{}{}{}  - text: Done.\n",
        call("mcp__py__add", r#"{"a": 2, "b": 40}"#),
        call("mcp__py__echo", r#"{"text": "héllo"}"#),
        call("mcp__py__read_note", r#"{"name": "plan.txt"}"#),
        call("mcp__py__env", r#"{"name": "GREETING"}"#),
        call("mcp__py__env", r#"{"name": "MY_API_KEY"}"#),
        call("mcp__py__env", r#"{"name": "DATABASE_URL"}"#),
        call("mcp__ts__mixed", "{}"),
        call("mcp__ts__lie", "{}"),
        call("mcp__ts__fail", "{}"),
        call("todo_write", r#"{"todos": [{"content": "use the MCP tools", "status": "in_progress"}]}"#),
    );
    let script = script(&scratch, &steps);
    let out = cordis(
        &scratch,
        &["run", "--script", &script],
        &[("MY_API_KEY", "sk-never-passed-on"), ("DATABASE_URL", "postgres://app:pw-never-passed-on@db/app")],
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let events = events(&scratch.path().join(".cordis"), &session_id(&stdout));
    assert_only_known_types(&events);
    let results = results(&events);
    assert_eq!(results.len(), 10, "{results:#?}");

    let add = result_of(&results, "mcp__py__add");
    assert!(!add.1 && add.2.contains("42"), "{add:?}");
    assert_eq!(result_of(&results, "mcp__py__echo").2, "héllo");
    assert_eq!(result_of(&results, "mcp__py__read_note").2, "ship on friday", "cwd is the server's folder");
    let envs: Vec<&(String, bool, String)> = results.iter().filter(|(n, _, _)| n == "mcp__py__env").collect();
    assert_eq!(envs[0].2, "set: hello", "config env reaches the server");
    assert_eq!(envs[1].2, "unset", "credential-shaped variables are not passed on");
    assert_eq!(envs[2].2, "unset", "only the allow-listed variables are passed on");
    assert_eq!(
        result_of(&results, "mcp__ts__mixed").2,
        "before\n[an image (image/png, 12 bytes of base64) that is not shown to the model]\nResource link: notes (file:///notes.md)\n\
         [audio (audio/wav, 8 bytes of base64) that is not played to the model]\nafter"
    );
    let lie = result_of(&results, "mcp__ts__lie");
    assert!(lie.1 && lie.2.contains("not valid for its declared output schema: $.count must be an integer"), "{lie:?}");
    let fail = result_of(&results, "mcp__ts__fail");
    assert!(fail.1 && fail.2 == "Error: the disk is full", "{fail:?}");
    let todo = result_of(&results, "todo_write");
    assert!(!todo.1, "{todo:?}");
    assert_eq!(events.iter().filter(|(k, _)| k == "todo/write").count(), 1);
    assert!(!std::fs::read_to_string(scratch.path().join(".cordis/sessions").join(format!("{}.jsonl", session_id(&stdout))))
        .unwrap()
        .contains("never-passed-on"));
}

#[test]
fn a_hung_call_times_out_and_is_cancelled_on_the_server() {
    let scratch = Scratch::new();
    std::fs::create_dir(scratch.path().join("notes")).unwrap();
    scratch.composition(&server_rows(1_000));
    let steps = format!(
        "  - text: Calling a tool that hangs.\n    calls:\n{}{}  - text: Done.\n",
        call("mcp__ts__hang", "{}"),
        call("mcp__ts__echo", r#"{"text": "still here"}"#)
    );
    let script = script(&scratch, &steps);
    let started = std::time::Instant::now();
    let out = cordis(&scratch, &["run", "--script", &script], &[]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(started.elapsed() < Duration::from_secs(30));
    let results = results(&events(&scratch.path().join(".cordis"), &session_id(&stdout)));
    let hang = result_of(&results, "mcp__ts__hang");
    assert!(hang.1 && hang.2.contains("did not answer hang within 1000 ms (toolCallTimeoutMs); the call was cancelled"), "{hang:?}");
    assert_eq!(result_of(&results, "mcp__ts__echo").2, "still here", "the connection survives a timed-out call");
    let log = std::fs::read_to_string(scratch.path().join("peer.log")).unwrap();
    assert!(log.contains("hang cancelled"), "the server received notifications/cancelled:\n{log}");
}

#[test]
fn a_crashed_server_fails_its_calls_then_comes_back_and_its_tool_list_is_followed() {
    let scratch = Scratch::new();
    std::fs::create_dir(scratch.path().join("notes")).unwrap();
    scratch.composition(&server_rows(60_000));
    let steps = format!(
        "  - text: Growing the list.\n    calls:\n{}{}  - text: Using the new tool, then crashing the server.\n    calls:\n{}{}{}  - text: Waiting.\n    calls:\n{}  - text: Again.\n    calls:\n{}  - text: Done.\n",
        call("mcp__ts__grow", "{}"),
        // The new list is fetched after the notification: give it a moment.
        call("mcp__py__sleep", r#"{"ms": 500}"#),
        call("mcp__ts__grown", "{}"),
        call("mcp__ts__crash", "{}"),
        call("mcp__ts__echo", r#"{"text": "while down"}"#),
        call("mcp__py__sleep", r#"{"ms": 2500}"#),
        call("mcp__ts__echo", r#"{"text": "back"}"#),
    );
    let script = script(&scratch, &steps);
    let out = cordis(&scratch, &["run", "--script", &script], &[]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let events = events(&scratch.path().join(".cordis"), &session_id(&stdout));
    assert_only_known_types(&events);
    let results = results(&events);
    assert_eq!(result_of(&results, "mcp__ts__grown").2, "grown", "tools/list_changed registered the new tool: {results:#?}");
    let crash = result_of(&results, "mcp__ts__crash");
    assert!(crash.1 && crash.2.contains("the connection to the MCP server was lost"), "{crash:?}");
    let echoes: Vec<&(String, bool, String)> = results.iter().filter(|(n, _, _)| n == "mcp__ts__echo").collect();
    assert!(echoes[0].1 && echoes[0].2.contains("the MCP server is down: the server closed the connection"), "{:?}", echoes[0]);
    assert!(echoes[0].2.contains("reconnecting in 200 ms (attempt 1 of 10)"), "{:?}", echoes[0]);
    assert_eq!(echoes[1].2, "back", "reconnected: {results:#?}");
    assert!(stderr.contains("reconnecting in 200 ms (attempt 1 of 10)"), "the entry's state is shown:\n{stderr}");
    let log = std::fs::read_to_string(scratch.path().join("peer.log")).unwrap();
    assert_eq!(log.matches("started").count(), 2, "one restart:\n{log}");
}

/// `cordis mcp` serving tool-todo to `cordis run` through mcp-client.
fn served(scratch: &Scratch) -> PathBuf {
    let served = scratch.path().join("served");
    std::fs::create_dir_all(&served).unwrap();
    std::fs::write(served.join("cordis.yml"), "- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: false\n").unwrap();
    served
}

#[test]
fn cordis_run_reaches_cordis_mcp_over_stdio_through_mcp_client() {
    let scratch = Scratch::new();
    let served = served(&scratch);
    // mcp-client passes its server only the variables its entry names:
    // keep the served cordis's record of checked layouts with the test run's.
    let records = std::env::var("CORDIS_CACHE_DIR").unwrap_or_else(|_| scratch.path().join("cache").display().to_string());
    scratch.composition(&format!(
        "- id: loop\n  name: mcp-client\n  config:\n    serverName: cordis\n    transport: stdio\n    command: {}\n    args: [-c, {}, --plugin-dir, {}, --state-dir, {}, --no-user-patch, mcp]\n    env:\n      CORDIS_CACHE_DIR: {records}\n",
        cordis_exe().display(),
        served.join("cordis.yml").display(),
        plugin_dir().display(),
        served.join("state").display()
    ));
    let steps = format!(
        "  - text: Planning through MCP.\n    calls:\n{}  - text: Done.\n",
        call("mcp__cordis__todo_write", r#"{"todos": [{"content": "loop", "status": "in_progress"}]}"#)
    );
    let script = script(&scratch, &steps);
    let out = cordis(&scratch, &["run", "--script", &script], &[]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let events = events(&scratch.path().join(".cordis"), &session_id(&stdout));
    let results = results(&events);
    let plan = result_of(&results, "mcp__cordis__todo_write");
    assert!(!plan.1 && plan.2.contains("1 in progress"), "{plan:?}");
    // The served side wrote its own session: one todo/write.
    let sessions: Vec<_> = std::fs::read_dir(served.join("state/sessions")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    let served_log = std::fs::read_to_string(&sessions[0]).unwrap();
    assert_eq!(served_log.matches("\"todo/write\"").count(), 1, "{served_log}");
}

#[test]
fn streamable_http_sends_headers_taken_from_the_environment() {
    let scratch = Scratch::new();
    std::fs::write(scratch.path().join("cordis.yml"), "- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: false\n").unwrap();
    let server = http_server(&scratch, &["--token", "s3cret-token"]);
    let client = Scratch::new();
    let rows = |auth: &str| {
        format!(
            "- id: remote\n  name: mcp-client\n  config:\n    serverName: remote\n    transport: streamable-http\n    url: {}\n    headers:\n      Authorization: {auth}\n    failOnStartupError: true\n",
            server.url
        )
    };
    client.composition(&rows("!!js '`Bearer ${process.env.REMOTE_TOKEN}`'"));
    let steps = format!(
        "  - text: Remote plan.\n    calls:\n{}  - text: Done.\n",
        call("mcp__remote__todo_write", r#"{"todos": [{"content": "remote", "status": "pending"}]}"#)
    );
    let script = script(&client, &steps);
    let out = cordis(&client, &["run", "--script", &script], &[("REMOTE_TOKEN", "s3cret-token")]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let results = results(&events(&client.path().join(".cordis"), &session_id(&stdout)));
    let plan = result_of(&results, "mcp__remote__todo_write");
    assert!(!plan.1 && plan.2.contains("1 pending"), "{plan:?}");
    assert!(!stdout.contains("s3cret") && !stderr.contains("s3cret"));

    // A wrong token: the server refuses, and the entry fails saying so
    // without showing the header's value.
    let out = cordis(&client, &["check"], &[("REMOTE_TOKEN", "wrong-value")]);
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("failed") && stdout.contains("mcp-client(remote)"), "{stdout}\n{stderr}");
    assert!(!stdout.contains("wrong-value") && !stderr.contains("wrong-value"), "{stdout}\n{stderr}");
}

#[test]
fn bad_config_is_refused_with_the_allowed_keys_and_what_was_expected() {
    let scratch = Scratch::new();
    scratch.composition(
        "- id: a\n  name: mcp-client\n  config:\n    serverName: a\n    transport: stdio\n    comand: node\n\
         - id: b\n  name: mcp-client\n  config:\n    serverName: b\n    transport: stdio\n\
         - id: c\n  name: mcp-client\n  config:\n    serverName: 'not ok'\n    transport: streamable-http\n    url: http://127.0.0.1:9/mcp\n\
         - id: d\n  name: mcp-client\n  config:\n    serverName: d\n    transport: streamable-http\n    url: http://127.0.0.1:9/mcp\n    command: node\n",
    );
    let out = cordis(&scratch, &["check"], &[]);
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success());
    assert!(stdout.contains("$.comand is not an allowed key (allowed: "), "{stdout}");
    assert!(stdout.contains("transport stdio needs `command`"), "{stdout}");
    assert!(stdout.contains("$.serverName"), "{stdout}");
    assert!(stdout.contains("`command` is for transport stdio, and this entry's transport is streamable-http"), "{stdout}\n{stderr}");
}

fn chunk(delta: Value, finish: Value) -> String {
    json!({"id": "chatcmpl-mcp", "object": "chat.completion.chunk", "created": 1, "model": "deepseek-v4-flash",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    .to_string()
}

#[test]
fn a_streamed_model_turn_calls_an_mcp_tool_and_todo_write() {
    let scratch = Scratch::new();
    std::fs::create_dir(scratch.path().join("notes")).unwrap();
    let call_add =
        json!({"tool_calls": [{"index": 0, "id": "call_00_add", "type": "function", "function": {"name": "mcp__py__add", "arguments": ""}}]});
    let call_todo =
        json!({"tool_calls": [{"index": 1, "id": "call_01_todo", "type": "function", "function": {"name": "todo_write", "arguments": ""}}]});
    let args = |index: u64, text: &str| json!({"tool_calls": [{"index": index, "function": {"arguments": text}}]});
    let first = Reply::Stream {
        events: vec![
            chunk(json!({"role": "assistant", "content": null, "reasoning_content": ""}), Value::Null),
            chunk(json!({"reasoning_content": "Add first, and plan."}), Value::Null),
            chunk(call_add, Value::Null),
            chunk(args(0, "{\"a\": 19,"), Value::Null),
            chunk(args(0, " \"b\": 23}"), Value::Null),
            chunk(call_todo, Value::Null),
            chunk(args(1, "{\"todos\": [{\"content\": \"add the numbers\", \"status\": \"completed\"}]}"), Value::Null),
            chunk(json!({}), json!("tool_calls")),
            json!({"id": "chatcmpl-mcp", "object": "chat.completion.chunk", "created": 1, "model": "deepseek-v4-flash", "choices": [],
                   "usage": {"prompt_tokens": 900, "completion_tokens": 40, "total_tokens": 940}})
            .to_string(),
        ],
        end: End::Done,
    };
    let second = Reply::Stream {
        events: vec![chunk(json!({"role": "assistant", "content": "The sum is 42."}), Value::Null), chunk(json!({}), json!("stop"))],
        end: End::Done,
    };
    let model = SseServer::start(vec![first, second]);
    let rows = server_rows(60_000);
    scratch.composition(&format!(
        "{rows}- id: model\n  name: llm-openai\n  config:\n    baseUrl: {}\n    model: deepseek-v4-flash\n    provider: deepseek-official\n",
        model.base_url
    ));
    let out = cordis(&scratch, &["run", "Add 19 and 23"], &[]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let events = events(&scratch.path().join(".cordis"), &session_id(&stdout));
    assert_only_known_types(&events);
    let results = results(&events);
    assert_eq!(results.len(), 2, "{results:#?}");
    assert!(result_of(&results, "mcp__py__add").2.contains("42"));
    assert!(!result_of(&results, "todo_write").1);
    // The second request carried the MCP tool's result back to the model,
    // and the catalog named the MCP tools.
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    let tools = requests[0].body["tools"].to_string();
    assert!(tools.contains("mcp__py__add") && tools.contains("todo_write"), "{tools}");
    let sent = requests[1].body["messages"].to_string();
    assert!(sent.contains("call_00_add") && sent.contains("42"), "{sent}");
}

/// The `started PID` lines of the TypeScript server's log, in order.
fn started_pids(scratch: &Scratch) -> Vec<u32> {
    let log = std::fs::read_to_string(scratch.path().join("peer.log")).unwrap_or_default();
    log.lines().filter_map(|l| l.strip_prefix("started ")).map(|pid| pid.parse().unwrap()).collect()
}

/// Whether process `pid` is gone: neither running nor left unreaped.
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // A zombie still has its entry: its parent did not wait for it.
        Ok(stat) => stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('X')),
    }
}

/// The `status` of entry `id` in dev's `status`: `(level, text)`.
fn dev_status(dev: &mut Dev, id: &str) -> (String, String) {
    let entry = dev.entry(id).unwrap_or_else(|| panic!("entry {id} is not running; stderr: {:?}", dev.stderr()));
    (entry["status"]["level"].as_str().unwrap_or_default().to_string(), entry["status"]["text"].as_str().unwrap_or_default().to_string())
}

#[test]
fn under_dev_the_connection_state_is_in_status_and_a_reload_reconnects_cleanly() {
    let scratch = Scratch::new();
    let (_, _, mjs) = servers();
    let row = |name: &str, delay: u64| {
        format!(
            "- id: ts\n  name: mcp-client\n  config:\n    serverName: {name}\n    transport: stdio\n    command: node\n    args: [{}]\n    inheritEnv: [PEER_LOG]\n    reconnect:\n      initialDelayMs: {delay}\n",
            mjs.display()
        )
    };
    scratch.composition(&row("ts", 1500));
    let peer_log = scratch.path().join("peer.log").display().to_string();
    let mut dev = Dev::start(scratch.path(), &[("PEER_LOG", &peer_log), ("XDG_CONFIG_HOME", &scratch.path().join(".config").display().to_string())]);

    assert_eq!(dev_status(&mut dev, "ts"), ("info".to_string(), "mcp-client(ts): connected, 8 tools".to_string()));
    let first = started_pids(&scratch);
    assert_eq!(first.len(), 1, "{first:?}");

    // A crash: `status` shows the reconnect and its delay, then the
    // connection again.
    let crash = dev.call("mcp__ts__crash", "{}");
    assert_eq!(crash["isError"], true, "{crash}");
    dev.wait_until("no reconnecting state in status", |dev| dev_status(dev, "ts").1.contains("reconnecting in 1500 ms (attempt 1 of 10)"));
    assert_eq!(dev_status(&mut dev, "ts").0, "warn");
    let down = dev.call("mcp__ts__echo", r#"{"text": "while down"}"#);
    assert!(down["text"].as_str().unwrap().contains("the MCP server is down"), "{down}");
    dev.wait_until("the server did not come back", |dev| dev_status(dev, "ts").1 == "mcp-client(ts): connected, 8 tools");
    assert_eq!(dev.call("mcp__ts__echo", r#"{"text": "back"}"#)["text"], "back");
    let second = started_pids(&scratch);
    assert_eq!(second.len(), 2, "{second:?}");
    assert!(gone(first[0]), "the crashed server was reaped");

    // A reload (a new serverName): the old server is stopped and reaped,
    // a new one serves the new names, and the old names are gone.
    let fiber = dev.fiber("ts");
    scratch.composition(&row("renamed", 200));
    dev.expect_reloads(1);
    assert_ne!(dev.fiber("ts"), fiber);
    assert_eq!(dev_status(&mut dev, "ts"), ("info".to_string(), "mcp-client(renamed): connected, 8 tools".to_string()));
    let pid = dev.call("mcp__renamed__pid", "{}");
    let third = started_pids(&scratch);
    assert_eq!(third.len(), 3, "one new server for the reload: {third:?}");
    assert_eq!(pid["text"], third[2].to_string(), "{pid}");
    dev.wait_until("the old server still runs after the reload", |_| gone(second[1]));
    let tools = dev.send("tools");
    let names: Vec<&str> = tools.as_array().map(|t| t.iter().filter_map(|t| t["name"].as_str()).collect()).unwrap_or_default();
    assert!(names.iter().all(|n| !n.starts_with("mcp__ts__")) && names.contains(&"mcp__renamed__echo"), "{tools}");

    // Disabling the entry stops its server and leaves no status behind.
    scratch.composition(&format!("{}  disabled: true\n", row("renamed", 200)));
    dev.expect_reloads(2);
    assert!(dev.entry("ts").is_none());
    dev.wait_until("the server still runs after the entry was disabled", |_| gone(third[2]));
    assert_eq!(started_pids(&scratch).len(), 3);
}

#[test]
fn check_shows_the_state_of_a_server_that_cannot_be_reached() {
    let scratch = Scratch::new();
    scratch.composition(
        "- id: gone\n  name: mcp-client\n  config:\n    serverName: gone\n    transport: stdio\n    command: ./no-such-server\n    reconnect:\n      initialDelayMs: 5000\n",
    );
    let out = cordis(&scratch, &["check"], &[]);
    let (stdout, stderr) = text(&out);
    // The entry loads (failOnStartupError is false), with no tools, and says
    // why and what it will do (the delay is long enough that no second
    // attempt starts before `check` prints, however slow the machine).
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let line = stdout.lines().find(|l| l.trim_start().starts_with("warn: mcp-client(gone):")).unwrap_or_else(|| panic!("no status line:\n{stdout}"));
    assert!(line.contains("no-such-server") && line.contains("reconnecting in 5000 ms (attempt 1 of 10)"), "{line}");

    let out = cordis(&scratch, &["check", "--json"], &[]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let entry = &report["entries"][0];
    assert_eq!(entry["status"]["level"], "warn", "{report}");
    assert!(entry["status"]["text"].as_str().unwrap().contains("reconnecting in 5000 ms"), "{report}");

    // Under dev, the budget of attempts runs out and `status` says so.
    scratch.composition(
        "- id: gone\n  name: mcp-client\n  config:\n    serverName: gone\n    transport: stdio\n    command: ./no-such-server\n    reconnect:\n      initialDelayMs: 100\n      maxAttempts: 2\n",
    );
    let mut dev = Dev::start(scratch.path(), &[("XDG_CONFIG_HOME", &scratch.path().join(".config").display().to_string())]);
    dev.wait_until("the entry did not give up", |dev| dev_status(dev, "gone").0 == "error");
    let (_, text) = dev_status(&mut dev, "gone");
    assert!(text.contains("gave up after 2 failed attempts in a row, tools withdrawn until the entry is reloaded"), "{text}");
    assert!(dev.expect_notice("gave up after 2 failed attempts").contains("ERROR"));
}

#[test]
fn a_server_that_never_answers_delays_check_a_bounded_time_and_dies_with_it() {
    let scratch = Scratch::new();
    // A "server" that records its pid and then only sleeps, ignoring its
    // stdin closing.
    scratch.composition(
        "- id: mute\n  name: mcp-client\n  config:\n    serverName: mute\n    transport: stdio\n    command: sh\n    args: ['-c', 'echo $$ > server.pid; exec sleep 600']\n",
    );
    let start = std::time::Instant::now();
    let out = cordis(&scratch, &["check"], &[]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(start.elapsed() < Duration::from_secs(20), "check waited {:?}", start.elapsed());
    assert!(
        stderr
            .lines()
            .any(|l| l.contains("has not answered within 10 s; the entry runs without its tools until it does") && l.contains("entry=mute")),
        "the notice names the entry: {stderr}"
    );
    assert!(stdout.contains("info: mcp-client(mute): connecting"), "{stdout}");
    let pid: u32 = std::fs::read_to_string(scratch.path().join("server.pid")).unwrap().trim().parse().unwrap();
    let gone_by = std::time::Instant::now() + Duration::from_secs(5);
    while !gone(pid) {
        assert!(std::time::Instant::now() < gone_by, "the server {pid} outlived cordis check");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_streamable_http_server_that_goes_away_is_noticed_and_reconnected() {
    let served = Scratch::new();
    std::fs::write(served.path().join("cordis.yml"), "- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: false\n").unwrap();
    let server = http_server(&served, &[]);
    let scratch = Scratch::new();
    scratch.composition(&format!(
        "- id: remote\n  name: mcp-client\n  config:\n    serverName: remote\n    transport: streamable-http\n    url: {}\n    reconnect:\n      initialDelayMs: 300\n      maxAttempts: 2\n",
        server.url
    ));
    let mut dev = Dev::start(scratch.path(), &[("XDG_CONFIG_HOME", &scratch.path().join(".config").display().to_string())]);
    assert_eq!(dev_status(&mut dev, "remote").1, "mcp-client(remote): connected, 1 tools");
    drop(server);
    let failed = dev.call("mcp__remote__todo_write", r#"{"todos": []}"#);
    let text = failed["text"].as_str().unwrap_or_default().to_string();
    assert!(failed["isError"] == true && text.contains("the connection to the MCP server was lost"), "{failed}");
    assert!(!text.contains("WorkerTransport"), "no Rust type names in the message: {text}");
    // The call told the supervisor: it reconnects, fails, and gives up.
    dev.wait_until("the lost HTTP connection was not noticed", |dev| dev_status(dev, "remote").0 != "info");
    dev.wait_until("the entry did not give up", |dev| dev_status(dev, "remote").0 == "error");
    assert!(dev_status(&mut dev, "remote").1.contains("gave up after 2 failed attempts"), "{:?}", dev_status(&mut dev, "remote"));
}
