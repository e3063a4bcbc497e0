//! `cordis mcp` driven by the official MCP SDKs: Python (`mcp`) over stdio
//! and over Streamable HTTP, TypeScript (`@modelcontextprotocol/sdk`) over
//! stdio. The clients are installed, pinned, by `tests/mcp/setup.sh` into
//! `target/<profile>/mcp-peers/` (never globally); the scripts they run are
//! `tests/mcp/client.py` and `tests/mcp/client.mjs`.
//!
//! Each client lists the tools, subscribes to the plan resource, calls
//! `todo_write` with a valid list, two invalid ones and a second valid one,
//! and reads the plan. The session log afterwards must hold exactly the two
//! successful writes, in one turn that the closed connection ended.

mod mcp_client;
mod protocol;

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use cordis_session::store::read_file;
use cordis_tests::{cordis_exe, plugin_dir, repo_root, target_dir, text, McpHttp, Scratch};
use serde_json::{json, Value};

/// The installed clients: `(python, node folder)`.
fn peers() -> &'static (PathBuf, PathBuf) {
    static PEERS: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    PEERS.get_or_init(|| {
        let dest = target_dir().join("mcp-peers");
        let out = Command::new("bash").arg(repo_root().join("tests/mcp/setup.sh")).arg(&dest).output().expect("run tests/mcp/setup.sh");
        assert!(out.status.success(), "tests/mcp/setup.sh failed:\n{}", text(&out).1);
        let node = dest.join("node");
        std::fs::copy(repo_root().join("tests/mcp/client.mjs"), node.join("client.mjs")).expect("copy client.mjs");
        (dest.join("python/bin/python"), node)
    })
}

const COMPOSITION: &str = "- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: false\n";

/// The command line that starts the server in `scratch`.
fn server_args(scratch: &Scratch, extra: &[&str]) -> Vec<String> {
    let mut args = vec![
        cordis_exe().display().to_string(),
        "-c".into(),
        scratch.path().join("cordis.yml").display().to_string(),
        "--plugin-dir".into(),
        plugin_dir().display().to_string(),
        "--no-user-patch".into(),
        "mcp".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

fn lines(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

fn step<'a>(steps: &'a [Value], name: &str) -> &'a Value {
    steps.iter().find(|s| s["step"] == name).unwrap_or_else(|| panic!("no step {name} in {steps:#?}"))
}

fn session_id(uri: &str) -> String {
    uri.strip_prefix("cordis://session/").and_then(|r| r.strip_suffix("/todos")).unwrap_or_else(|| panic!("not a plan uri: {uri}")).to_string()
}

/// Checks what one scenario run printed, and the session log it left.
fn check_scenario(scratch: &Scratch, steps: &[Value], client: &str) {
    let tools = step(steps, "tools");
    assert_eq!(tools["names"], json!(["todo_write"]), "{client}");
    assert!(tools["description"].as_str().unwrap().contains("at most one todo `in_progress`"), "{client}: {tools}");
    assert_eq!(tools["input_schema"]["type"], "object", "{client}");
    assert!(tools["input_schema"]["properties"]["todos"].is_object(), "{client}: {tools}");
    // The tool declares its value's shape: `outputSchema`.
    assert_eq!(tools["output_schema"]["type"], "object", "{client}: {tools}");
    assert!(tools["output_schema"]["properties"]["counts"].is_object(), "{client}: {tools}");
    assert!(tools["output_schema"]["properties"]["todos"].is_object(), "{client}: {tools}");

    let uris = step(steps, "resources")["uris"].as_array().unwrap().clone();
    let uri = uris.iter().filter_map(Value::as_str).find(|u| u.ends_with("/todos")).expect("a plan resource").to_string();
    let id = session_id(&uri);

    let valid = step(steps, "valid");
    assert_eq!(valid["is_error"], false, "{client}: {valid}");
    assert_eq!(valid["text"], "Updated todo list: 2 pending, 1 in progress, 1 completed.", "{client}");
    assert_eq!(valid["structured"]["counts"], json!({"pending": 2, "inProgress": 1, "completed": 1}), "{client}: {valid}");
    assert_eq!(valid["structured"]["todos"].as_array().unwrap().len(), 4, "{client}");
    assert_eq!(valid["updates"], json!([uri]), "{client}: the subscription saw the write");

    let invalid = step(steps, "invalid");
    assert_eq!(invalid["is_error"], true, "{client}: {invalid}");
    let message = invalid["text"].as_str().unwrap();
    assert!(message.starts_with("Error: ") && message.contains("$.todos[1].status"), "{client}: the path is named: {message}");
    assert_eq!(invalid["updates"], json!([]), "{client}: no update for a refused write");
    let invalid2 = step(steps, "invalid2");
    assert_eq!(invalid2["is_error"], true, "{client}");
    assert!(invalid2["text"].as_str().unwrap().contains("$.todos must be an array"), "{client}: {invalid2}");

    let read = step(steps, "read");
    let contents = read["contents"].as_array().unwrap();
    let json_state = contents.iter().find(|c| c["mime"] == "application/json").expect("a JSON content");
    let plan: Value = serde_json::from_str(json_state["text"].as_str().unwrap()).unwrap();
    assert_eq!(plan, valid["structured"]["todos"], "{client}: the resource is the plan the refused calls left alone");
    let view = contents.iter().find(|c| c["mime"] == "text/plain").expect("a text view");
    assert!(view["text"].as_str().unwrap().contains("● fix the bug"), "{client}: {view}");

    let second = step(steps, "second");
    assert_eq!(second["structured"]["counts"], json!({"pending": 0, "inProgress": 0, "completed": 1}), "{client}");
    assert_eq!(second["updates"], json!([uri, uri]), "{client}");

    // The log: exactly the two successful writes, in one turn of four
    // steps, ended when the connection closed.
    let path = scratch.path().join(".cordis/sessions").join(format!("{id}.jsonl"));
    let log = wait_for(|| {
        let log = read_file(&path).ok()?;
        log.events.iter().any(|e| e.kind == "turn/end").then_some(log)
    });
    assert!(log.problems.is_empty(), "{client}: {:?}", log.problems);
    let writes: Vec<Value> = log.events.iter().filter(|e| e.kind == "todo/write").map(|e| e.data_value()["todos"].clone()).collect();
    assert_eq!(writes, vec![valid["structured"]["todos"].clone(), second["structured"]["todos"].clone()], "{client}");
    let count = |kind: &str| log.events.iter().filter(|e| e.kind == kind).count();
    assert_eq!((count("turn/start"), count("turn/end"), count("step/start"), count("tool/call"), count("tool/result")), (1, 1, 4, 4, 4), "{client}");
    assert_eq!(log.events.last().unwrap().kind, "turn/end", "{client}");

    let shown = scratch.cordis(&["--plugin-dir", &plugin_dir().display().to_string(), "session", "show", &id]);
    let (out, err) = text(&shown);
    assert!(shown.status.success(), "{client}: {err}");
    assert!(out.contains("todo_write") && out.contains("$.todos[1].status") && out.contains("✓ ship it"), "{client}: {out}");
}

/// Retries `f` for up to 15 s.
fn wait_for<T>(mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn python_sdk_over_stdio() {
    let scratch = Scratch::new();
    scratch.composition(COMPOSITION);
    let (steps, _, _) = python_against_stdio(&scratch, &["scenario", "stdio"], &[]);
    assert_eq!(step(&steps, "tools")["protocol"], "2025-11-25", "the SDK fell back to the handshake versions");
    check_scenario(&scratch, &steps, "python stdio");
}

#[test]
fn typescript_sdk_over_stdio() {
    let (_, node) = peers();
    let scratch = Scratch::new();
    scratch.composition(COMPOSITION);
    let out =
        Command::new("node").arg(node.join("client.mjs")).args(server_args(&scratch, &[])).current_dir(scratch.path()).output().expect("run node");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "the TypeScript client failed:\n{stdout}\n{stderr}");
    let steps = lines(&out.stdout);
    assert_eq!(step(&steps, "tools")["server"], "cordis");
    check_scenario(&scratch, &steps, "typescript stdio");
}

/// `cordis mcp --http` on a free port in `scratch`, with `extra` options.
fn http_server(scratch: &Scratch, extra: &[&str]) -> McpHttp {
    let args = server_args(scratch, &[&["--http", "127.0.0.1:0"], extra].concat());
    let mut command = Command::new(&args[0]);
    command.args(&args[1..]).current_dir(scratch.path());
    McpHttp::start(command)
}

/// One raw HTTP request; returns the status code.
fn status_of(url: &str, headers: &[(&str, &str)]) -> u16 {
    let authority = url.strip_prefix("http://").and_then(|r| r.split('/').next()).unwrap();
    let mut stream = std::net::TcpStream::connect(authority).unwrap();
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).unwrap();
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).unwrap();
    String::from_utf8_lossy(&head[9..12]).parse().unwrap()
}

#[test]
fn python_sdk_over_http_with_a_token_and_origin_checks() {
    let (python, _) = peers();
    let scratch = Scratch::new();
    scratch.composition(COMPOSITION);
    let server = http_server(&scratch, &["--token", "t0ken-for-tests"]);

    // The security checks, before any client: no token, a wrong token, a
    // foreign Origin, a foreign Host.
    assert_eq!(status_of(&server.url, &[]), 401);
    assert_eq!(status_of(&server.url, &[("Authorization", "Bearer wrong")]), 401);
    let auth = ("Authorization", "Bearer t0ken-for-tests");
    assert_eq!(status_of(&server.url, &[auth, ("Origin", "http://evil.example")]), 403);
    let own_origin = server.url.trim_end_matches("/mcp").to_string();
    assert_eq!(status_of(&server.url, &[auth, ("Origin", &own_origin)]), 200);

    let out = Command::new(python)
        .arg(repo_root().join("tests/mcp/client.py"))
        .args(["scenario", "http", &server.url, "t0ken-for-tests"])
        .current_dir(scratch.path())
        .output()
        .expect("run the Python client");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "the Python client failed:\n{stdout}\n{stderr}");
    let steps = lines(&out.stdout);
    // The client ended its MCP session (DELETE): the turn is ended while the
    // server keeps running.
    check_scenario(&scratch, &steps, "python http");
}

/// Runs the Python client's mode `args` against `cordis mcp` started over
/// stdio in `scratch` with `flags`; fails unless it succeeds. Its steps,
/// stdout and stderr.
fn python_against_stdio(scratch: &Scratch, args: &[&str], flags: &[&str]) -> (Vec<Value>, String, String) {
    let (python, _) = peers();
    let out = Command::new(python)
        .arg(repo_root().join("tests/mcp/client.py"))
        .args(args)
        .args(server_args(scratch, flags))
        .current_dir(scratch.path())
        .output()
        .expect("run the Python client");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "the Python client failed:\n{stdout}\n{stderr}");
    (lines(&out.stdout), stdout, stderr)
}

/// `cordis mcp --watch`: a composition change that changes the catalog (the
/// policy changes the tool's description) reaches the client as
/// `notifications/tools/list_changed`, and the next `tools/list` has it.
#[test]
fn watch_sends_tools_list_changed_on_a_catalog_change() {
    let scratch = Scratch::new();
    let composition = scratch.composition(COMPOSITION);
    let (steps, stdout, stderr) = python_against_stdio(&scratch, &["watch", composition.to_str().unwrap()], &["--watch"]);
    let before = step(&steps, "before")["descriptions"][0].as_str().unwrap().to_string();
    let after = step(&steps, "after");
    assert_eq!(after["notified"], true, "{stdout}\n{stderr}");
    let after = after["descriptions"][0].as_str().unwrap();
    assert!(before.contains("at most one todo `in_progress`"), "{before}");
    assert_ne!(before, after, "the catalog changed");
}

/// `cordis mcp --watch`: `cordis.yml` written in place in two parts 200 ms
/// apart, the first part still parsing and leaving the tool out, is applied
/// once, with its final content: the client never sees the tool gone and
/// gets one `tools/list_changed`. The settle time is 1.5 s, so a loaded
/// machine that stretches the gap still writes inside it.
#[test]
fn watch_applies_a_half_saved_composition_only_once_it_settles() {
    let scratch = Scratch::new();
    let composition = scratch.composition(&format!("- id: other\n  name: tool-todo\n  disabled: true\n{COMPOSITION}"));
    let (steps, stdout, stderr) =
        python_against_stdio(&scratch, &["halfsave", composition.to_str().unwrap(), "0.2", "4"], &["--watch", "--settle-ms", "1500"]);
    let report = step(&steps, "halfsave");
    assert!(report["gap"].as_f64().unwrap() < 1.5, "the two writes were further apart than the settle time: {stdout}");
    assert_eq!(report["before"], json!(["todo_write"]), "{stdout}");
    assert_eq!(report["missing"], false, "the first part was applied:\n{stdout}\n{stderr}");
    assert_eq!(report["notifications"], 1, "{stdout}\n{stderr}");
    assert!(!report["descriptions"][0].as_str().unwrap().contains("at most one todo `in_progress`"), "the final content runs: {stdout}");
    assert_eq!(stderr.matches("composition reloaded").count(), 1, "{stderr}");
}

#[test]
fn http_refuses_a_public_address_without_a_token() {
    let scratch = Scratch::new();
    scratch.composition(COMPOSITION);
    let args = server_args(&scratch, &["--http", "0.0.0.0:0"]);
    let out = Command::new(&args[0]).args(&args[1..]).current_dir(scratch.path()).stdin(Stdio::null()).output().unwrap();
    let (_, err) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--token"), "{err}");
}

/// Clients killed at random points while calling `todo_write`, over five
/// connections to one session (`--session` after the first): every
/// acknowledged write is in the log, the log reads without a problem, and a
/// later `cordis run --session` continues it.
#[test]
fn a_client_killed_mid_session_leaves_a_log_that_continues() {
    let (python, _) = peers();
    let scratch = Scratch::new();
    scratch.composition("- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: true\n");
    let mut id: Option<String> = None;
    let mut acknowledged: Vec<String> = Vec::new();
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    for round in 0..5 {
        let extra: Vec<&str> = match &id {
            Some(id) => vec!["--session", id],
            None => vec![],
        };
        let mut child = Command::new(python)
            .arg(repo_root().join("tests/mcp/client.py"))
            .arg("kill")
            .args(server_args(&scratch, &extra))
            .current_dir(scratch.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("run the Python client");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut ready = String::new();
        stdout.read_line(&mut ready).unwrap();
        let ready: Value = serde_json::from_str(&ready).unwrap_or_else(|_| panic!("round {round}: not ready: {ready:?}"));
        let this = session_id(ready["uri"].as_str().unwrap());
        assert_eq!(id.get_or_insert(this.clone()), &this, "round {round}: --session attaches the same session");

        // The server is the client's child: found now, waited for later.
        let pid = child.id();
        let server: u32 = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
            .ok()
            .and_then(|c| c.split_whitespace().next().and_then(|p| p.parse().ok()))
            .unwrap_or_else(|| panic!("round {round}: the client has no server child"));

        // Killed at a random point after its first answer.
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let delay = Duration::from_micros(seed % 100_000);
        let mut killer = None;
        for line in stdout.lines() {
            let Ok(line) = line else { break };
            let Ok(ack) = serde_json::from_str::<Value>(&line) else { break };
            assert_eq!(ack["is_error"], false, "round {round}: {ack}");
            acknowledged.push(ack["content"].as_str().unwrap().to_string() + &format!(" (round {round})"));
            killer.get_or_insert_with(|| {
                std::thread::spawn(move || {
                    std::thread::sleep(delay);
                    let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
                })
            });
        }
        killer.expect("at least one answer").join().unwrap();
        let _ = child.wait();
        // The server saw its stdin close: it ends the turn and exits, freeing
        // the session for the next round.
        wait_for(|| {
            let stat = std::fs::read_to_string(format!("/proc/{server}/stat")).unwrap_or_default();
            let state = stat.rsplit(')').next().and_then(|r| r.split_whitespace().next()).unwrap_or("X");
            matches!(state, "X" | "Z").then_some(())
        });
        let path = scratch.path().join(".cordis/sessions").join(format!("{this}.jsonl"));
        assert_eq!(read_file(&path).unwrap().events.last().unwrap().kind, "turn/end", "round {round}: the turn was ended");
        // Tag this round's writes so rounds do not mix.
        let log = read_file(&path).unwrap();
        let turn_start = log.events.iter().rposition(|e| e.kind == "turn/start");
        let written: HashSet<String> = turn_start
            .map(|at| &log.events[at..])
            .unwrap_or_default()
            .iter()
            .filter(|e| e.kind == "todo/write")
            .map(|e| format!("{} (round {round})", e.data_value()["todos"][0]["content"].as_str().unwrap()))
            .collect();
        for content in acknowledged.iter().filter(|c| c.ends_with(&format!("(round {round})"))) {
            assert!(written.contains(content), "round {round}: acknowledged {content:?} is not in the log");
        }
    }
    let id = id.unwrap();
    assert!(!acknowledged.is_empty());

    // The log reads without a problem: no break of the structure rules, no
    // call without its result.
    let host = scratch.boot("- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: true\n", true);
    let (session, problems) =
        host.services.sessions.view(&scratch.path().join(".cordis/sessions").join(format!("{id}.jsonl")).display().to_string()).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    let turns = session.with_events(|e| e.iter().filter(|e| e.kind == "turn/end").count());
    assert_eq!(turns, 5, "one turn per connection");

    let shown = scratch.cordis(&["session", "show", &id]);
    let (out, err) = text(&shown);
    assert!(shown.status.success() && out.contains("todos:"), "{out}\n{err}");

    let script = repo_root().join("examples/plan-and-ship.script.yml");
    let run = scratch.cordis(&["run", "--session", &id, "--script", &script.display().to_string(), "continue the work"]);
    let (out, err) = text(&run);
    assert!(run.status.success(), "{out}\n{err}");
    assert!(out.contains("(continued,") && out.contains("turn 6 completed"), "{out}");
}
