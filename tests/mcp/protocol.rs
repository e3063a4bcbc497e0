//! `cordis mcp` answering exactly, as JSON-RPC and MCP define it, driven
//! with raw messages (what an SDK cannot send) on both transports: the
//! protocol's stdout kept to itself while plugins print, an answer for every
//! line, errors with the codes the specifications give, and calls that take
//! effect in the order they arrived, cancelled or not.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use cordis_session::store::read_file;
use cordis_tests::{library, text, Scratch};
use serde_json::{json, Value};

use super::{http_server, server_args};

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

/// `cordis mcp ARGS` over stdio, with every stdout line collected.
struct RawStdio {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl RawStdio {
    fn start(scratch: &Scratch, extra: &[&str]) -> RawStdio {
        let args = server_args(scratch, extra);
        let mut child = Command::new(&args[0])
            .args(&args[1..])
            .current_dir(scratch.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start cordis mcp");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut server = RawStdio { child, stdin, lines, seen: Vec::new() };
        server.send(INITIALIZE);
        server.answer(json!(0));
        server.send(INITIALIZED);
        server
    }

    fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    /// The next stdout line (within 20 s), which must be one JSON-RPC 2.0
    /// message.
    fn next(&mut self) -> Value {
        let line = self.lines.recv_timeout(Duration::from_secs(20)).unwrap_or_else(|_| panic!("no answer; so far: {:#?}", self.seen));
        self.seen.push(line.clone());
        let message: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line:?}"));
        assert_eq!(message["jsonrpc"], "2.0", "{line}");
        message
    }

    /// The answer with `id`; lines before it are kept for [`RawStdio::others`].
    fn answer(&mut self, id: Value) -> Value {
        loop {
            let message = self.next();
            if message.get("id") == Some(&id) && (message.get("result").is_some() || message.get("error").is_some()) {
                return message;
            }
        }
    }

    /// Closes stdin and waits for the exit; the rest of stdout (each line
    /// one JSON-RPC message) and stderr.
    fn finish(mut self) -> (Vec<Value>, String) {
        self.stdin.take();
        let mut rest = Vec::new();
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(20)) {
            rest.push(serde_json::from_str::<Value>(&line).unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line:?}")));
        }
        let status = self.child.wait().unwrap();
        let mut stderr = String::new();
        self.child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
        assert!(status.success(), "{stderr}");
        (rest, stderr)
    }
}

fn code(answer: &Value) -> i64 {
    answer["error"]["code"].as_i64().unwrap_or_else(|| panic!("not an error: {answer}"))
}

fn call(id: u64, name: &str, arguments: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{name}","arguments":{arguments}}}}}"#)
}

/// Issue 26, kind 1: under `cordis mcp` (stdio, with `--watch`), a plugin
/// that prints when applied, when its tool runs and again at a reload
/// never reaches the protocol's stream: every stdout line is one JSON-RPC
/// message, and what the plugin printed is on stderr.
#[test]
fn stdout_belongs_to_the_protocol_while_plugins_print() {
    let scratch = Scratch::new();
    let plugins = scratch.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    std::fs::copy(library("fixture-noisy"), plugins.join("libnoisy.so")).unwrap();
    let composition = |label: &str| format!("- id: noisy\n  name: ./plugins/libnoisy.so\n  config:\n    label: {label}\n");
    scratch.composition(&composition("first"));
    let mut server = RawStdio::start(&scratch, &["--watch"]);
    let answer = server.answer_to(1, &call(1, "shout", "{}"));
    assert_eq!(answer["result"]["content"][0]["text"], "shouted first", "{answer}");
    scratch.composition(&composition("second"));
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut id = 2;
    loop {
        let answer = server.answer_to(id, &call(id, "shout", "{}"));
        if answer["result"]["content"][0]["text"] == "shouted second" {
            break;
        }
        assert!(Instant::now() < deadline, "the reload never came: {answer}");
        id += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    let seen = server.seen.clone();
    let (rest, stderr) = server.finish();
    for line in seen.iter().map(|l| serde_json::from_str::<Value>(l).unwrap()).chain(rest) {
        assert!(line.get("result").is_none_or(|r| r.get("forged").is_none()), "a plugin's print reached the protocol: {line}");
    }
    for printed in ["noisy: apply first", "noisy: shout first (not JSON)", "noisy: apply second", "\"forged\":true"] {
        assert!(stderr.contains(printed), "{printed:?} is not on stderr: {stderr}");
    }
}

impl RawStdio {
    fn answer_to(&mut self, id: u64, line: &str) -> Value {
        self.send(line);
        self.answer(json!(id))
    }
}

/// Issue 26, kind 3 over stdio: every line gets the answer JSON-RPC and
/// MCP define, and the connection goes on.
#[test]
fn every_stdio_line_gets_the_answer_json_rpc_defines() {
    let scratch = Scratch::new();
    scratch.composition("- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: false\n");
    let mut server = RawStdio::start(&scratch, &[]);
    // Not JSON at all: -32700 with id null, for each line.
    for line in ["Content-Length: 120", r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"todo_wr"#] {
        server.send(line);
        let answer = server.next();
        assert_eq!((answer["id"].clone(), code(&answer)), (Value::Null, -32700), "{line}: {answer}");
    }
    // A batch: -32600 with id null.
    server.send(r#"[{"jsonrpc":"2.0","id":2,"method":"ping"}]"#);
    let answer = server.next();
    assert_eq!((answer["id"].clone(), code(&answer)), (Value::Null, -32600), "{answer}");
    // Unknown tool, arguments that are not an object: -32602 under the id.
    let answer = server.answer_to(3, &call(3, "nope", "{}"));
    assert_eq!(code(&answer), -32602, "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap().contains("unknown tool `nope` (available tools: todo_write)"), "{answer}");
    let answer = server.answer_to(4, &call(4, "todo_write", r#""x""#));
    assert_eq!(code(&answer), -32602, "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap().contains("`arguments` must be an object"), "{answer}");
    // A lone surrogate: answered, under its id.
    let answer = server.answer_to(5, &call(5, "todo_write", r#"{"todos":[{"content":"half \ud83e here","status":"pending"}]}"#));
    assert_eq!(code(&answer), -32602, "{answer}");
    // Calls rmcp cannot read (params a list, a fractional id, `_meta` not
    // an object) are answered here, and later calls still run.
    for (line, id) in [
        (r#"{"jsonrpc":"2.0","id":15,"method":"tools/call","params":[1]}"#, json!(15)),
        (r#"{"jsonrpc":"2.0","id":16,"method":"tools/call","params":{"name":"todo_write","arguments":{"todos":[]},"_meta":5}}"#, json!(16)),
        (r#"{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"todo_write","arguments":{"todos":[]}}}"#, Value::Null),
    ] {
        server.send(line);
        let answer = server.answer(id.clone());
        assert!(matches!(code(&answer), -32602 | -32600), "{line}: {answer}");
    }
    // A missing status names the allowed values, as a wrong one does.
    let answer = server.answer_to(6, &call(6, "todo_write", r#"{"todos":[{"content":"a"}]}"#));
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert_eq!(
        answer["result"]["content"][0]["text"],
        "Error: invalid arguments: $.todos[0].status is required (one of \"pending\", \"in_progress\", \"completed\")",
        "{answer}"
    );
    // An unknown method: -32601.
    let answer = server.answer_to(7, r#"{"jsonrpc":"2.0","id":7,"method":"bogus"}"#);
    assert_eq!(code(&answer), -32601, "{answer}");
    // The declared schemas are portable: no Rust-only numeric formats.
    let answer = server.answer_to(8, r#"{"jsonrpc":"2.0","id":8,"method":"tools/list"}"#);
    let schemas = answer["result"]["tools"].to_string();
    assert!(!schemas.contains("\"format\":\"uint") && !schemas.contains("\"format\":\"int"), "{schemas}");
    assert!(answer["result"]["tools"][0]["outputSchema"]["properties"]["counts"].is_object(), "{answer}");
    // And the connection still works.
    let answer = server.answer_to(9, &call(9, "todo_write", r#"{"todos":[{"content":"a","status":"pending"}]}"#));
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    server.finish();
}

/// One raw HTTP/1.1 request: the status, the headers (lower-case names)
/// and the body.
fn http(url: &str, method: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, Vec<(String, String)>, String) {
    let authority = url.strip_prefix("http://").and_then(|r| r.split('/').next()).unwrap();
    let mut stream = std::net::TcpStream::connect(authority).unwrap();
    let mut request = format!("{method} /mcp HTTP/1.1\r\nHost: {authority}\r\nContent-Length: {}\r\nConnection: close\r\n", body.len());
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let raw = String::from_utf8_lossy(&raw).to_string();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let mut lines = head.lines();
    let status = lines.next().and_then(|l| l.split(' ').nth(1)).and_then(|s| s.parse().ok()).unwrap_or(0);
    let headers: Vec<(String, String)> =
        lines.filter_map(|l| l.split_once(':')).map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string())).collect();
    let chunked = headers.iter().any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    (status, headers, if chunked { unchunk(body) } else { body.to_string() })
}

fn unchunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else { break };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].strip_prefix("\r\n").unwrap_or(&rest[n..]);
    }
    out
}

/// The JSON-RPC message in an HTTP answer: the body itself, or the first
/// `data:` line of an event stream.
fn message_of(body: &str) -> Value {
    let text = body.lines().find_map(|l| l.strip_prefix("data:").map(str::trim).filter(|d| d.starts_with('{'))).unwrap_or(body.trim());
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {body:?}"))
}

/// Issue 26, kind 3 over Streamable HTTP: a body that is not one message is
/// a 400 with a JSON-RPC error body; an unknown tool and non-object
/// arguments are -32602; a lone surrogate is answered; DELETE of an unknown
/// session is a 404; `--allow-host '*'` is refused.
#[test]
fn every_http_request_gets_the_answer_json_rpc_defines() {
    let scratch = Scratch::new();
    scratch.composition("- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: false\n");
    let server = http_server(&scratch, &[]);
    let json_headers = [("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")];
    let (status, headers, _) = http(&server.url, "POST", &json_headers, INITIALIZE.as_bytes());
    assert_eq!(status, 200);
    let session = headers.iter().find(|(k, _)| k == "mcp-session-id").map(|(_, v)| v.clone()).expect("a session id");
    let with_session: Vec<(&str, &str)> =
        json_headers.iter().copied().chain([("Mcp-Session-Id", session.as_str()), ("MCP-Protocol-Version", "2025-06-18")]).collect();
    let (status, _, _) = http(&server.url, "POST", &with_session, INITIALIZED.as_bytes());
    assert_eq!(status, 202);

    for (body, expected) in [
        (&b"Content-Length: 120"[..], -32700),
        (br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"todo_wr"#, -32700),
        (br#"[{"jsonrpc":"2.0","id":2,"method":"ping"}]"#, -32600),
    ] {
        for headers in [&with_session[..], &[("Content-Type", "text/plain")][..]] {
            let (status, headers_back, answer) = http(&server.url, "POST", headers, body);
            assert_eq!(status, 400, "{answer}");
            assert!(headers_back.iter().any(|(k, v)| k == "content-type" && v == "application/json"), "{headers_back:?}");
            let answer: Value = serde_json::from_str(&answer).unwrap();
            assert_eq!((answer["id"].clone(), code(&answer)), (Value::Null, expected), "{answer}");
        }
    }
    let surrogate = call(5, "todo_write", r#"{"todos":[{"content":"half \ud83e here","status":"pending"}]}"#);
    let (status, _, answer) = http(&server.url, "POST", &with_session, surrogate.as_bytes());
    assert_eq!(status, 400, "{answer}");
    let answer: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!((answer["id"].clone(), code(&answer)), (json!(5), -32602), "{answer}");

    for (body, needle) in [(call(3, "nope", "{}"), "unknown tool `nope`"), (call(4, "todo_write", r#""x""#), "`arguments` must be an object")] {
        let (status, _, answer) = http(&server.url, "POST", &with_session, body.as_bytes());
        let answer = message_of(&answer);
        assert_eq!(code(&answer), -32602, "{status}: {answer}");
        assert!(answer["error"]["message"].as_str().unwrap().contains(needle), "{answer}");
    }

    let unknown = [("Mcp-Session-Id", "no-such-session"), ("MCP-Protocol-Version", "2025-06-18")];
    assert_eq!(http(&server.url, "DELETE", &unknown, b"").0, 404);
    let known = [("Mcp-Session-Id", session.as_str()), ("MCP-Protocol-Version", "2025-06-18")];
    let (status, _, _) = http(&server.url, "DELETE", &known, b"");
    assert!(matches!(status, 200 | 202 | 204), "{status}");
    assert_eq!(http(&server.url, "DELETE", &known, b"").0, 404, "a session ended is unknown");

    let refused = scratch.cordis(&["mcp", "--http", "127.0.0.1:0", "--allow-host", "*"]);
    assert_eq!(refused.status.code(), Some(2), "{:?}", text(&refused));
    assert!(text(&refused).1.contains("--allow-host \"*\": give one name or address"), "{:?}", text(&refused));
}

/// The `todo/write` lists the session's log holds, in order (item counts).
fn writes(scratch: &Scratch) -> Vec<usize> {
    let dir = scratch.path().join(".cordis/sessions");
    let file = std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.path()).find(|p| p.extension().is_some_and(|x| x == "jsonl")).unwrap();
    let log = read_file(&file).unwrap();
    log.events.iter().filter(|e| e.kind == "todo/write").map(|e| e.data_value()["todos"].as_array().map_or(0, Vec::len)).collect()
}

fn big_call(id: u64, items: usize) -> String {
    let todos: Vec<Value> = (0..items).map(|i| json!({"content": format!("step {i} of a long plan"), "status": "pending"})).collect();
    call(id, "todo_write", &json!({ "todos": todos }).to_string())
}

/// Issue 26, kind 2: a `todo_write` of 2 000 items cancelled with
/// `notifications/cancelled` (stdio), or whose HTTP request the client
/// dropped, never takes effect after the client's next call: the last
/// write in the log is the list the client was last told about.
#[test]
fn a_cancelled_or_abandoned_call_never_lands_after_the_next_one() {
    let scratch = Scratch::new();
    scratch.composition("- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: false\n");
    let mut server = RawStdio::start(&scratch, &[]);
    server.send(&big_call(1, 2000));
    server.send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"the user pressed Esc"}}"#);
    let answer = server.answer_to(2, &call(2, "todo_write", r#"{"todos":[{"content":"the one plan","status":"pending"}]}"#));
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    let answer = server.answer_to(3, r#"{"jsonrpc":"2.0","id":3,"method":"resources/list"}"#);
    let uri = answer["result"]["resources"][0]["uri"].as_str().unwrap().to_string();
    let plan = server.answer_to(4, &format!(r#"{{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{{"uri":"{uri}"}}}}"#));
    let state: Value = serde_json::from_str(plan["result"]["contents"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(state.as_array().map(Vec::len), Some(1), "the plan is the last call's: {state}");
    server.finish();
    let log = writes(&scratch);
    assert_eq!(log.last(), Some(&1), "{log:?}");
    assert!(log == [1] || log == [2000, 1], "{log:?}");

    // HTTP: the request dropped mid-call.
    let scratch = Scratch::new();
    scratch.composition("- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: false\n");
    let server = http_server(&scratch, &[]);
    let json_headers = [("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")];
    let (_, headers, _) = http(&server.url, "POST", &json_headers, INITIALIZE.as_bytes());
    let session = headers.iter().find(|(k, _)| k == "mcp-session-id").map(|(_, v)| v.clone()).unwrap();
    let with_session: Vec<(&str, &str)> =
        json_headers.iter().copied().chain([("Mcp-Session-Id", session.as_str()), ("MCP-Protocol-Version", "2025-06-18")]).collect();
    http(&server.url, "POST", &with_session, INITIALIZED.as_bytes());
    {
        let authority = server.url.strip_prefix("http://").and_then(|r| r.split('/').next()).unwrap();
        let mut stream = std::net::TcpStream::connect(authority).unwrap();
        let body = big_call(1, 2000);
        let mut request = format!("POST /mcp HTTP/1.1\r\nHost: {authority}\r\nContent-Length: {}\r\n", body.len());
        for (k, v) in &with_session {
            request.push_str(&format!("{k}: {v}\r\n"));
        }
        request.push_str("\r\n");
        stream.write_all(request.as_bytes()).unwrap();
        stream.write_all(body.as_bytes()).unwrap();
        // Dropped before any answer.
    }
    let (_, _, answer) =
        http(&server.url, "POST", &with_session, call(2, "todo_write", r#"{"todos":[{"content":"the one plan","status":"pending"}]}"#).as_bytes());
    assert_eq!(message_of(&answer)["result"]["isError"], false, "{answer}");
    drop(server);
    let log = writes(&scratch);
    assert_eq!(log.last(), Some(&1), "{log:?}");
}

/// Issue 26, kinds 2 and 3 as the Python SDK sends them, on both
/// transports: an unknown tool raises the SDK's error with -32602; a
/// missing status names the allowed values; a large call cancelled by the
/// client (the SDK sends `notifications/cancelled`) never overrides the
/// next call's plan.
#[test]
fn the_python_sdk_gets_exact_errors_and_ordered_calls_on_both_transports() {
    let (python, _) = super::peers();
    let scratch = Scratch::new();
    scratch.composition("- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: false\n");
    let server = http_server(&scratch, &[]);
    let stdio: Vec<String> = ["errors".to_string(), "stdio".to_string()].into_iter().chain(server_args(&scratch, &[])).collect();
    let http = vec!["errors".to_string(), "http".to_string(), server.url.clone()];
    for (transport, args) in [("stdio", stdio), ("http", http)] {
        let out =
            Command::new(python).arg(cordis_tests::repo_root().join("tests/mcp/client.py")).args(&args).current_dir(scratch.path()).output().unwrap();
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "{transport}: {stdout}\n{stderr}");
        let steps = super::lines(&out.stdout);
        let unknown = super::step(&steps, "unknown");
        assert_eq!((unknown["raised"].clone(), unknown["code"].clone()), (json!(true), json!(-32602)), "{transport}: {unknown}");
        let missing = super::step(&steps, "missing");
        assert!(
            missing["text"].as_str().unwrap().contains("status is required (one of \"pending\", \"in_progress\", \"completed\")"),
            "{transport}: {missing}"
        );
        let cancel = super::step(&steps, "cancel");
        assert_eq!((cancel["plan"].clone(), cancel["later"].clone()), (json!(1), json!(1)), "{transport}: {cancel}");
    }
}
