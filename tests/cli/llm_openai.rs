//! The `llm-openai` provider end to end: the real plugin library, loaded
//! through `cordis.yml`, driven by the real `cordis` binary against a
//! loopback server (started by each test) that replays the model answers
//! recorded in `tests/data/upstream-sessions/` as the API streams them, or
//! injects a fault.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use cordis_tests::dev::Dev;
use cordis_tests::sse_server::{End, Reply, SseServer};
use cordis_tests::{cordis_exe, plugin_dir, repo_root, text, Scratch};
use serde_json::{json, Value};

/// The API key the tests configure (through `CORDIS_TEST_KEY`); it must
/// reach the server and nothing else.
const KEY: &str = "sk-test-9f3c1e7d-never-in-a-log";

fn composition(base_url: &str, extra: &str) -> String {
    format!(
        "- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: true\n\
         - id: model\n  name: llm-openai\n  config:\n    baseUrl: {base_url}\n    model: deepseek-v4-flash\n    provider: deepseek-official\n    apiKeyEnv: CORDIS_TEST_KEY\n{extra}"
    )
}

fn cordis(scratch: &Scratch, args: &[&str]) -> Output {
    scratch.command(args).env("CORDIS_TEST_KEY", KEY).output().expect("run cordis")
}

fn session_id(stdout: &str) -> String {
    let line = stdout.lines().find(|l| l.starts_with("session ")).unwrap_or_else(|| panic!("no session line in {stdout}"));
    line.split_whitespace().nth(1).unwrap().to_string()
}

fn log_path(scratch: &Scratch, id: &str) -> PathBuf {
    scratch.path().join(".cordis/sessions").join(format!("{id}.jsonl"))
}

/// The events of a session file: `(type, data)` in order.
fn log_events(path: &Path) -> Vec<(String, Value)> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .skip(1)
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (v["type"].as_str().unwrap().to_string(), v["data"].clone())
        })
        .collect()
}

/// The recorded session `file`, its packed chunk rows expanded (through
/// `cordis session export`, which expands them).
fn recorded(file: &str) -> Vec<(String, Value)> {
    let scratch = Scratch::new();
    let path = repo_root().join("tests/data/upstream-sessions").join(file);
    let out = scratch.cordis(&["session", "export", path.to_str().unwrap()]);
    assert!(out.status.success(), "{:?}", text(&out));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (v["type"].as_str().unwrap().to_string(), v["data"].clone())
        })
        .collect()
}

fn chunk(delta: Value, finish: Value) -> String {
    json!({"id": "chatcmpl-replay", "object": "chat.completion.chunk", "created": 1, "model": "deepseek-v4-flash",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    .to_string()
}

/// `text` cut into pieces of 1, 2, 3, 1, 2, 3, ... characters: tool-call
/// arguments split at awkward places (inside keys, between a quote and
/// its letter).
fn awkward_pieces(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut n = 1;
    while i < chars.len() {
        let end = (i + n).min(chars.len());
        out.push(chars[i..end].iter().collect());
        i = end;
        n = n % 3 + 1;
    }
    if out.is_empty() {
        out.push(String::new());
    }
    out
}

/// The API's stream for each recorded model step, built from its
/// `assistant/chunk` events: reasoning and text deltas, tool-call deltas
/// (the call's id, type and name on its first delta; with `split`, every
/// argument delta cut further), the finish reason, then the usage, then
/// `[DONE]`.
fn replay(events: &[(String, Value)], split: bool) -> Vec<Reply> {
    let mut steps: Vec<((u64, u64), Vec<Value>)> = Vec::new();
    for (kind, data) in events {
        if kind != "assistant/chunk" {
            continue;
        }
        let key = (data["turn"].as_u64().unwrap(), data["step"].as_u64().unwrap());
        match steps.last_mut() {
            Some((k, list)) if *k == key => list.push(data["chunk"].clone()),
            _ => steps.push((key, vec![data["chunk"].clone()])),
        }
    }
    steps
        .into_iter()
        .map(|(_, chunks)| {
            let mut out = Vec::new();
            let mut calls: Vec<u64> = Vec::new();
            let mut usage = Value::Null;
            let mut finish = "stop";
            for c in chunks {
                match c["type"].as_str().unwrap() {
                    "reasoning-delta" => out.push(chunk(json!({"reasoning_content": c["text"]}), Value::Null)),
                    "text-delta" => out.push(chunk(json!({"content": c["text"]}), Value::Null)),
                    "tool-call-delta" => {
                        let block = c["index"].as_u64().unwrap();
                        let first = !calls.contains(&block);
                        if first {
                            calls.push(block);
                        }
                        let call = calls.iter().position(|b| *b == block).unwrap();
                        let delta = c["argumentsDelta"].as_str().unwrap();
                        let pieces = if split { awkward_pieces(delta) } else { vec![delta.to_string()] };
                        for (i, piece) in pieces.into_iter().enumerate() {
                            let call_delta = if first && i == 0 {
                                json!({"index": call, "id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": piece}})
                            } else {
                                json!({"index": call, "function": {"arguments": piece}})
                            };
                            out.push(chunk(json!({"tool_calls": [call_delta]}), Value::Null));
                        }
                    }
                    "usage" => usage = c["usage"].clone(),
                    "finish" => finish = if c["reason"]["kind"] == "tool-calls" { "tool_calls" } else { "stop" },
                    _ => {}
                }
            }
            out.push(chunk(json!({}), json!(finish)));
            let cached = usage["cacheReadTokens"].as_u64();
            let mut api_usage = json!({
                "prompt_tokens": usage["inputTokens"].as_u64().unwrap() + cached.unwrap_or(0),
                "completion_tokens": usage["outputTokens"],
                "total_tokens": 0,
            });
            if let Some(c) = cached {
                api_usage["prompt_cache_hit_tokens"] = json!(c);
            }
            if let Some(r) = usage["reasoningTokens"].as_u64() {
                api_usage["completion_tokens_details"] = json!({"reasoning_tokens": r});
            }
            out.push(json!({"id": "chatcmpl-replay", "object": "chat.completion.chunk", "choices": [], "usage": api_usage}).to_string());
            Reply::Stream { events: out, end: End::Done }
        })
        .collect()
}

/// The recorded prompts: user messages the user wrote, in order.
fn prompts(events: &[(String, Value)]) -> Vec<String> {
    events
        .iter()
        .filter(|(k, d)| k == "user/message" && d["source"]["kind"] == "user")
        .map(|(_, d)| d["content"][0]["text"].as_str().unwrap().to_string())
        .collect()
}

/// What must match between a recorded log and ours, per event: chunks and
/// tool calls whole, messages without their random ids, results by
/// content, `todo/write` whole, the turn's end.
fn comparable(events: &[(String, Value)]) -> Vec<Value> {
    events
        .iter()
        .filter_map(|(kind, d)| {
            Some(match kind.as_str() {
                "assistant/chunk" | "tool/call" | "todo/write" | "step/start" | "step/end" | "turn/start" => json!([kind, d]),
                "assistant/message" => json!([kind, d["turn"], d["step"], d["message"]["content"], d["message"]["source"], d["usage"]]),
                "tool/result" => json!([kind, d["turn"], d["step"], d["message"]["content"], d["message"]["source"]]),
                "turn/end" => json!([kind, d["turn"], d["reason"]]),
                _ => return None,
            })
        })
        .collect()
}

fn assert_no_key(scratch: &Scratch, out: &Output, id: &str) {
    let (stdout, stderr) = text(out);
    assert!(!stdout.contains(KEY) && !stderr.contains(KEY), "the key leaked to the terminal");
    let log = std::fs::read_to_string(log_path(scratch, id)).unwrap();
    assert!(!log.contains(KEY), "the key leaked into the log");
}

#[test]
fn recorded_todo_write_session_replays_end_to_end() {
    let recorded = recorded("todo-write.session.jsonl");
    let server = SseServer::start(replay(&recorded, false));
    let scratch = Scratch::new();
    scratch.composition(&composition(&server.base_url, ""));
    let prompt = &prompts(&recorded)[0];
    let out = cordis(&scratch, &["run", prompt]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let id = session_id(&stdout);
    let ours = log_events(&log_path(&scratch, &id));

    // The log holds what the recorded session holds: every chunk, the
    // assistant messages (reasoning, tool call, text, usage), the call,
    // the todo/write, the result and the turn's end, in the same order.
    assert_eq!(comparable(&ours), comparable(&recorded));
    // The user's message is recorded as in a scripted turn.
    assert_eq!(ours[1].0, "user/message");
    assert_eq!(ours[1].1["content"], json!([{"type": "text", "text": prompt}]));

    // Streamed text reached the terminal, then the plan view.
    assert!(stdout.contains("reasoning › The user wants me to use todo_write"), "{stdout}");
    assert!(stdout.contains("assistant › DONE"), "{stdout}");
    assert!(stdout.contains("todos     ┌"), "{stdout}");

    // What was sent: the key in the header only, the tool catalog as
    // function tools with their JSON Schemas, and the second request
    // carrying the call (with its reasoning, as DeepSeek requires) and
    // the tool's result.
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].line, "POST /v1/chat/completions HTTP/1.1");
    assert_eq!(requests[0].header("authorization"), Some(format!("Bearer {KEY}").as_str()));
    let body = &requests[0].body;
    assert_eq!((body["model"].clone(), body["stream"].clone()), (json!("deepseek-v4-flash"), json!(true)));
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(body["messages"], json!([{"role": "user", "content": prompt}]));
    assert_eq!(body["tools"][0]["type"], "function");
    assert_eq!(body["tools"][0]["function"]["name"], "todo_write");
    assert_eq!(body["tools"][0]["function"]["parameters"]["required"], json!(["todos"]));
    let call = recorded.iter().find(|(k, _)| k == "tool/call").unwrap().1.clone();
    let reasoning = recorded.iter().find(|(k, _)| k == "assistant/message").unwrap().1["message"]["content"][0]["text"].clone();
    assert_eq!(
        requests[1].body["messages"],
        json!([
            {"role": "user", "content": prompt},
            {"role": "assistant", "content": null, "reasoning_content": reasoning,
             "tool_calls": [{"id": call["callId"], "type": "function", "function": {"name": "todo_write", "arguments": call["arguments"]}}]},
            {"role": "tool", "tool_call_id": call["callId"], "content": "Updated todo list: 1 pending, 2 in progress, 0 completed."}
        ])
    );
    assert_no_key(&scratch, &out, &id);

    // The harness reads the log back: the same history and plan as the
    // recorded session.
    let show = scratch.cordis(&["session", "show", &id]);
    let (shown, _) = text(&show);
    assert!(show.status.success());
    assert!(shown.contains("● read the code") && shown.contains("○ write the fix"), "{shown}");
}

#[test]
fn recorded_multi_turn_session_replays_across_two_runs() {
    let recorded = recorded("multi-turn.session.jsonl");
    let server = SseServer::start(replay(&recorded, false));
    let scratch = Scratch::new();
    scratch.composition(&composition(&server.base_url, ""));
    let prompts = prompts(&recorded);
    assert_eq!(prompts.len(), 2);
    let first = cordis(&scratch, &["run", &prompts[0]]);
    assert!(first.status.success(), "{:?}", text(&first));
    let id = session_id(&text(&first).0);
    let second = cordis(&scratch, &["run", "--session", &id, &prompts[1]]);
    assert!(second.status.success(), "{:?}", text(&second));
    let ours = log_events(&log_path(&scratch, &id));
    assert_eq!(comparable(&ours), comparable(&recorded));
    // The second request carries the first turn's exchange.
    let requests = server.wait_for_requests(2);
    assert_eq!(
        requests[1].body["messages"],
        json!([
            {"role": "user", "content": prompts[0]},
            {"role": "assistant", "content": "ONE"},
            {"role": "user", "content": prompts[1]},
        ])
    );
    assert_no_key(&scratch, &second, &id);
}

#[test]
fn parallel_tool_calls_split_at_awkward_places_are_assembled() {
    let recorded = recorded("parallel-tool-calls.session.jsonl");
    let server = SseServer::start(replay(&recorded, true));
    let scratch = Scratch::new();
    scratch.composition(&composition(&server.base_url, ""));
    let out = cordis(&scratch, &["run", &prompts(&recorded)[0]]);
    assert!(out.status.success(), "{:?}", text(&out));
    let ours = log_events(&log_path(&scratch, &session_id(&text(&out).0)));
    let pick = |events: &[(String, Value)], kind: &str| -> Vec<Value> { events.iter().filter(|(k, _)| k == kind).map(|(_, d)| d.clone()).collect() };
    // The same calls, whole, in the same order, from many more pieces.
    assert_eq!(pick(&ours, "tool/call"), pick(&recorded, "tool/call"));
    let messages = |events: &[(String, Value)]| -> Vec<Value> {
        pick(events, "assistant/message").into_iter().map(|d| json!([d["message"]["content"], d["usage"]])).collect()
    };
    assert_eq!(messages(&ours), messages(&recorded));
    let deltas = |events: &[(String, Value)]| pick(events, "assistant/chunk").iter().filter(|d| d["chunk"]["type"] == "tool-call-delta").count();
    assert!(deltas(&ours) > 2 * deltas(&recorded), "{} pieces", deltas(&ours));
    // No `read` tool here: each call gets an error result, and the turn
    // still completes.
    let results = pick(&ours, "tool/result");
    assert_eq!(results.len(), 2);
    assert!(results.iter().all(|r| r["message"]["content"][0]["isError"] == true));
    assert_eq!(pick(&ours, "turn/end"), [json!({"turn": 1, "reason": {"kind": "completed"}})]);
}

/// A short answer: "Hello" in two deltas.
fn hello() -> Reply {
    Reply::Stream {
        events: vec![
            chunk(json!({"role": "assistant", "content": "Hel"}), Value::Null),
            chunk(json!({"content": "lo"}), Value::Null),
            chunk(json!({}), json!("stop")),
            json!({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 2}}).to_string(),
        ],
        end: End::Done,
    }
}

fn error_reply(status: u16, headers: &[(&str, &str)], message: &str) -> Reply {
    Reply::Status {
        status,
        headers: headers.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect(),
        body: json!({"error": {"message": message, "type": "error"}}).to_string(),
    }
}

/// Runs one turn against `replies`; returns the output, the log's events
/// and the server.
fn fault_turn(replies: Vec<Reply>, extra: &str) -> (Output, Vec<(String, Value)>, SseServer, Scratch) {
    let server = SseServer::start(replies);
    let scratch = Scratch::new();
    scratch.composition(&composition(&server.base_url, extra));
    let out = cordis(&scratch, &["run", "say hello"]);
    let id = session_id(&text(&out).0);
    let events = log_events(&log_path(&scratch, &id));
    assert_no_key(&scratch, &out, &id);
    (out, events, server, scratch)
}

fn types(events: &[(String, Value)]) -> Vec<&str> {
    events.iter().map(|(k, _)| k.as_str()).collect()
}

/// A failed turn: exit 1, `turn failed: the model failed: MESSAGE` on the
/// terminal, and the log `turn/start`, `user/message`, `step/start`,
/// `chunks` assistant/chunk events, `step/end`, then `turn/end` with
/// reason `error` and the same message.
fn assert_failed(out: &Output, events: &[(String, Value)], chunks: usize, message: &str) {
    let (stdout, stderr) = text(out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stdout.contains(&format!("\nturn failed: the model failed: {message}\n")), "{stdout}");
    let mut expected = vec!["turn/start", "user/message", "step/start"];
    expected.extend(std::iter::repeat_n("assistant/chunk", chunks));
    expected.extend(["step/end", "turn/end"]);
    assert_eq!(types(events), expected);
    assert_eq!(events.last().unwrap().1, json!({"turn": 1, "reason": {"kind": "error", "message": format!("the model failed: {message}")}}));
}

#[test]
fn http_401_names_the_key_variable_and_is_not_retried() {
    let (out, events, server, _s) = fault_turn(vec![error_reply(401, &[], &format!("Incorrect API key provided: {}", &KEY[..12])), hello()], "");
    let url = format!("{}/chat/completions", server.base_url);
    assert_failed(&out, &events, 0, &format!("the model API at {url} refused the API key (HTTP 401): check the key in $CORDIS_TEST_KEY (apiKeyEnv)"));
    assert_eq!(server.requests().len(), 1);
    // The server's own text, which may echo part of the key, is not shown.
    assert!(!text(&out).0.contains("Incorrect API key"));
}

#[test]
fn http_429_is_retried_after_the_wait_the_server_asks() {
    let start = Instant::now();
    let (out, events, server, _s) = fault_turn(vec![error_reply(429, &[("Retry-After", "1")], "slow down"), hello()], "");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(start.elapsed() >= Duration::from_secs(1));
    assert!(stderr.contains("model     › HTTP 429; retrying in 1.0 s (1 of 2)"), "{stderr}");
    assert!(stdout.contains("assistant › Hello\n"), "{stdout}");
    assert_eq!(server.requests().len(), 2);
    assert_eq!(events.last().unwrap().1, json!({"turn": 1, "reason": {"kind": "completed"}}));
    let message = &events.iter().find(|(k, _)| k == "assistant/message").unwrap().1;
    assert_eq!(message["message"]["content"], json!([{"type": "text", "text": "Hello"}]));
    assert_eq!(message["usage"], json!({"inputTokens": 7, "outputTokens": 2}));
}

#[test]
fn server_errors_are_retried_a_bounded_number_of_times() {
    let replies = vec![
        error_reply(503, &[("Retry-After", "0")], "overloaded"),
        error_reply(502, &[("retry-after-ms", "10")], "bad gateway"),
        error_reply(500, &[("Retry-After", "0")], "internal"),
        hello(),
    ];
    let (out, events, server, _s) = fault_turn(replies, "    maxRetries: 2\n");
    let url = format!("{}/chat/completions", server.base_url);
    assert_failed(
        &out,
        &events,
        0,
        &format!("the model API at {url} failed (HTTP 500): internal (gave up after 2 retries); its last answer asked to wait 0.0 s before retrying"),
    );
    assert_eq!(server.requests().len(), 3);
    let stderr = text(&out).1;
    assert!(stderr.contains("HTTP 503; retrying in 0.0 s (1 of 2)") && stderr.contains("HTTP 502; retrying in 0.0 s (2 of 2)"), "{stderr}");
}

#[test]
fn a_retry_after_longer_than_a_minute_fails_at_once() {
    let (out, events, server, _s) = fault_turn(vec![error_reply(429, &[("Retry-After", "3600")], "quota exhausted"), hello()], "");
    let url = format!("{}/chat/completions", server.base_url);
    assert_failed(
        &out,
        &events,
        0,
        &format!("the model API at {url} is rate-limiting requests (HTTP 429): quota exhausted; it asks to retry after 3600 s, longer than the 60 s this plugin waits"),
    );
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn a_connection_cut_mid_stream_ends_the_turn_with_the_chunks_so_far() {
    let cut = Reply::Stream {
        events: vec![chunk(json!({"content": "Hel"}), Value::Null), chunk(json!({"content": "lo, wor"}), Value::Null)],
        end: End::Cut,
    };
    let (out, events, _server, _s) = fault_turn(vec![cut], "");
    // block-start and the two deltas were recorded as they came.
    assert_failed(&out, &events, 3, "the connection to the model API closed in the middle of the answer (after 2 chunks): Peer disconnected");
    assert_eq!(events[5].1, json!({"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "lo, wor"}}));
    assert!(text(&out).0.contains("assistant › Hello, wor\n"));
}

#[test]
fn a_malformed_chunk_ends_the_turn_naming_it() {
    let bad = Reply::Stream {
        events: vec![chunk(json!({"content": "Hi"}), Value::Null), r#"{"choices":[{"index":0,"delta":{"content":"there"#.to_string()],
        end: End::Done,
    };
    let (out, events, _server, _s) = fault_turn(vec![bad], "");
    assert_failed(
        &out,
        &events,
        2,
        r#"the model API sent a malformed chunk (chunk 2): a chunk is not JSON (EOF while parsing a string at line 1 column 48): {"choices":[{"index":0,"delta":{"content":"there"#,
    );
}

#[test]
fn a_context_length_error_says_the_conversation_does_not_fit() {
    let body = json!({"error": {"message": "This model's maximum context length is 131072 tokens. However, you requested 140000 tokens.", "type": "invalid_request_error", "code": "context_length_exceeded"}});
    let reply = Reply::Status { status: 400, headers: vec![], body: body.to_string() };
    let (out, events, server, _s) = fault_turn(vec![reply], "");
    let url = format!("{}/chat/completions", server.base_url);
    assert_failed(
        &out,
        &events,
        0,
        &format!("the conversation does not fit the model's context window (HTTP 400 from {url}): This model's maximum context length is 131072 tokens. However, you requested 140000 tokens."),
    );
}

#[test]
fn a_server_that_does_not_answer_times_out() {
    let start = Instant::now();
    let (out, events, server, _s) = fault_turn(vec![Reply::Silent(Duration::from_secs(20))], "    requestTimeoutMs: 500\n");
    let url = format!("{}/chat/completions", server.base_url);
    assert_failed(&out, &events, 0, &format!("no answer from the model API at {url} within 500 ms (requestTimeoutMs)"));
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[test]
fn a_stream_that_stalls_times_out() {
    let stall = Reply::Stream { events: vec![chunk(json!({"content": "Hel"}), Value::Null)], end: End::Stall(Duration::from_secs(20)) };
    let (out, events, _server, _s) = fault_turn(vec![stall], "    requestTimeoutMs: 500\n");
    assert_failed(&out, &events, 2, "the model's stream stalled: nothing arrived for 500 ms (requestTimeoutMs)");
}

#[test]
fn ctrl_c_during_a_stream_ends_the_turn_interrupted() {
    let stall = Reply::Stream {
        events: vec![chunk(json!({"content": "Thinking about"}), Value::Null), chunk(json!({"content": " it"}), Value::Null)],
        end: End::Stall(Duration::from_secs(30)),
    };
    let server = SseServer::start(vec![stall]);
    let scratch = Scratch::new();
    scratch.composition(&composition(&server.base_url, ""));
    let child = Command::new(cordis_exe())
        .args(["run", "say hello"])
        .current_dir(scratch.path())
        .env("CORDIS_PLUGIN_PATH", plugin_dir())
        .env("XDG_CONFIG_HOME", scratch.path().join(".config"))
        .env("CORDIS_TEST_KEY", KEY)
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the answer is streaming (its chunks are in the log).
    server.wait_for_requests(1);
    let sessions = scratch.path().join(".cordis/sessions");
    let start = Instant::now();
    loop {
        let logged = std::fs::read_dir(&sessions)
            .ok()
            .and_then(|mut d| d.next())
            .and_then(|e| e.ok())
            .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
            .unwrap_or_default();
        if logged.matches("assistant/chunk").count() >= 3 {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "the stream never reached the log: {logged}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let kill = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(kill.success());
    let started = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(started.elapsed() < Duration::from_secs(5), "Ctrl-C took {:?}", started.elapsed());
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(130), "{stdout}\n{stderr}");
    assert!(stdout.contains("assistant › Thinking about it\n"), "{stdout}");
    assert!(stdout.contains("\nturn interrupted (Ctrl-C); the log records it as such. Continue with: "), "{stdout}");
    let id = session_id(&stdout);
    let events = log_events(&log_path(&scratch, &id));
    assert_eq!(
        types(&events),
        ["turn/start", "user/message", "step/start", "assistant/chunk", "assistant/chunk", "assistant/chunk", "step/end", "turn/end"]
    );
    assert_eq!(events.last().unwrap().1, json!({"turn": 1, "reason": {"kind": "interrupted"}}));
    // Well-formed: --strict continues it without a complaint.
    let show = cordis(&scratch, &["--strict", "session", "show", &id]);
    assert!(show.status.success(), "{:?}", text(&show));
    assert!(!text(&show).0.contains("broken"), "{:?}", text(&show));
}

#[test]
fn the_plugin_loads_through_the_composition_and_refuses_bad_config() {
    let scratch = Scratch::new();
    scratch.composition(&composition("http://127.0.0.1:9/v1", ""));
    let out = cordis(&scratch, &["check", "--json"]);
    assert!(out.status.success(), "{:?}", text(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let model = report["entries"].as_array().unwrap().iter().find(|e| e["id"] == "model").unwrap().clone();
    assert_eq!((model["name"].clone(), model["state"].clone()), (json!("llm-openai"), json!("loaded")));

    let plugins = cordis(&scratch, &["plugins", "--json"]);
    let listed: Value = serde_json::from_slice(&plugins.stdout).unwrap();
    let lib = listed["libraries"].as_array().unwrap().iter().find(|l| l.to_string().contains("llm-openai")).unwrap().to_string();
    assert!(lib.contains("\"model\""), "{lib}");

    // The key's variable unset: the entry fails, naming it.
    let unset = Command::new(cordis_exe())
        .args(["check"])
        .current_dir(scratch.path())
        .env("CORDIS_PLUGIN_PATH", plugin_dir())
        .env("XDG_CONFIG_HOME", scratch.path().join(".config"))
        .env_remove("CORDIS_TEST_KEY")
        .output()
        .unwrap();
    assert_eq!(unset.status.code(), Some(1));
    assert!(text(&unset).0.contains("the environment variable CORDIS_TEST_KEY (apiKeyEnv) is not set"), "{:?}", text(&unset));
    // `run` does not play the example script in the failed model's place.
    std::fs::create_dir_all(scratch.path().join("examples")).unwrap();
    std::fs::copy(repo_root().join("examples/plan-and-ship.script.yml"), scratch.path().join("examples/plan-and-ship.script.yml")).unwrap();
    let run = Command::new(cordis_exe())
        .args(["run", "Plan the release"])
        .current_dir(scratch.path())
        .env("CORDIS_PLUGIN_PATH", plugin_dir())
        .env("XDG_CONFIG_HOME", scratch.path().join(".config"))
        .env_remove("CORDIS_TEST_KEY")
        .output()
        .unwrap();
    let (stdout, stderr) = text(&run);
    assert!(!run.status.success() && !stdout.contains("assistant"), "{stdout}");
    assert!(stderr.contains("1 failed; failed: model; a failed entry refuses the start") && stderr.contains("CORDIS_TEST_KEY"), "{stderr}");

    // A key in the file instead of its variable's name is not a config key.
    scratch.composition(&composition("http://127.0.0.1:9/v1", "    apiKey: sk-123\n"));
    let bad = cordis(&scratch, &["check"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(text(&bad).0.contains("$.apiKey is not an allowed key"), "{:?}", text(&bad));
}

/// `cordis dev` with the provider: one model turn, then a config edit
/// (another model name) and a rebuilt library, each reloaded between
/// turns; the next turn uses the reloaded provider.
#[test]
fn the_provider_reloads_under_cordis_dev_between_turns() {
    let server = SseServer::start(vec![hello(), hello(), hello()]);
    let scratch = Scratch::new();
    let plugins = scratch.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    let lib = plugins.join("libllm_openai.so");
    let build = std::fs::read(cordis_tests::library("llm-openai")).unwrap();
    std::fs::write(&lib, &build).unwrap();
    let write_composition = |model: &str| {
        scratch.composition(&format!(
            "- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: true\n\
             - id: model\n  name: ./plugins/libllm_openai.so\n  config:\n    baseUrl: {}\n    model: {model}\n    apiKeyEnv: CORDIS_TEST_KEY\n",
            server.base_url
        ));
    };
    write_composition("model-a");

    let mut cmd = Dev::command(scratch.path(), &[], &[]);
    cmd.env("CORDIS_TEST_KEY", KEY);
    let mut dev = Dev::spawn(cmd).unwrap_or_else(|e| panic!("{e}"));
    let id = dev.session.clone();
    let mut send = |line: &str| -> Value { dev.send(line) };
    let status = send("status");
    let fiber = |status: &Value| status["entries"].as_array().unwrap().iter().find(|e| e["id"] == "model").unwrap()["fiber"].clone();
    let first_fiber = fiber(&status);

    let turn = send("turn say hello");
    assert_eq!(turn["reason"], "completed", "{turn}");
    assert_eq!((turn["text"].clone(), turn["model"].clone(), turn["turn"].clone()), (json!("Hello"), json!("model-a"), json!(1)));

    // A config edit: the entry is applied again with the new model.
    write_composition("model-b");
    let start = Instant::now();
    let status = loop {
        let status = send("status");
        if status["reloads"].as_u64().unwrap() >= 1 {
            break status;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "no reload after the edit: {status}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let second_fiber = fiber(&status);
    assert_ne!(second_fiber, first_fiber);
    let turn = send("turn and again");
    assert_eq!((turn["reason"].clone(), turn["model"].clone(), turn["turn"].clone()), (json!("completed"), json!("model-b"), json!(2)), "{turn}");

    // A rebuilt library (other bytes, same code) renamed into place.
    let tmp = plugins.join("libllm_openai.so.tmp");
    let mut rebuilt = build.clone();
    rebuilt.extend_from_slice(&[0u8; 64]);
    std::fs::write(&tmp, &rebuilt).unwrap();
    std::fs::rename(&tmp, &lib).unwrap();
    let start = Instant::now();
    let status = loop {
        let status = send("status");
        if status["reloads"].as_u64().unwrap() >= 2 {
            break status;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "no reload after the rebuild: {status}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_ne!(fiber(&status), second_fiber);
    let turn = send("turn third");
    assert_eq!((turn["reason"].clone(), turn["model"].clone(), turn["turn"].clone()), (json!("completed"), json!("model-b"), json!(3)), "{turn}");

    // Each request went out with the provider of its turn, carrying the
    // session's history.
    let requests = server.wait_for_requests(3);
    let models: Vec<Value> = requests.iter().map(|r| r.body["model"].clone()).collect();
    assert_eq!(models, [json!("model-a"), json!("model-b"), json!("model-b")]);
    assert_eq!(requests[2].body["messages"].as_array().unwrap().len(), 5);
    drop(dev);

    // The log: three completed turns, each answer from the provider it was asked.
    let events = log_events(&log_path(&scratch, &id));
    let ends: Vec<Value> = events.iter().filter(|(k, _)| k == "turn/end").map(|(_, d)| d["reason"]["kind"].clone()).collect();
    assert_eq!(ends, [json!("completed"), json!("completed"), json!("completed")]);
    let sources: Vec<Value> = events.iter().filter(|(k, _)| k == "assistant/message").map(|(_, d)| d["message"]["source"]["model"].clone()).collect();
    assert_eq!(sources, [json!("model-a"), json!("model-b"), json!("model-b")]);
}

/// The models guide's compositions (`examples/compositions/deepseek.cordis.yml`,
/// `local-openai.cordis.yml`) load as they are, and the guide shows them as
/// they are.
#[test]
fn the_documented_compositions_load() {
    let guide = std::fs::read_to_string(repo_root().join("docs/guide/models.md")).unwrap();
    for file in ["deepseek.cordis.yml", "local-openai.cordis.yml"] {
        let path = repo_root().join("examples/compositions").join(file);
        let scratch = Scratch::new();
        let out = Command::new(cordis_exe())
            .args(["check", "--json", path.to_str().unwrap()])
            .current_dir(scratch.path())
            .env("CORDIS_PLUGIN_PATH", plugin_dir())
            .env("XDG_CONFIG_HOME", scratch.path().join(".config"))
            .env("DEEPSEEK_API_KEY", KEY)
            .output()
            .unwrap();
        assert!(out.status.success(), "{file}: {:?}", text(&out));
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(report["entries"].as_array().unwrap().iter().all(|e| e["state"] == "loaded"), "{file}: {report}");
        let entries: String = std::fs::read_to_string(&path).unwrap().lines().skip_while(|l| l.starts_with('#')).collect::<Vec<_>>().join("\n");
        assert!(guide.contains(&entries), "docs/guide/models.md does not show {file} as it is");
    }
}

/// One tool-call fragment as a provider streams it: `(index?, id?, name?,
/// arguments)`.
type Fragment<'a> = (Option<u64>, Option<&'a str>, Option<&'a str>, &'a str);

/// One streamed step of tool-call fragments, each as one chunk, then
/// `finish` (`null` for none), then `end`.
fn calls_reply(fragments: &[Fragment<'_>], finish: Value, end: End) -> Reply {
    let mut events: Vec<String> = fragments
        .iter()
        .map(|(index, id, name, arguments)| {
            let mut call = serde_json::Map::new();
            if let Some(i) = index {
                call.insert("index".into(), json!(i));
            }
            if let Some(id) = id {
                call.insert("id".into(), json!(id));
                call.insert("type".into(), json!("function"));
            }
            let mut function = serde_json::Map::new();
            if let Some(name) = name {
                function.insert("name".into(), json!(name));
            }
            function.insert("arguments".into(), json!(arguments));
            call.insert("function".into(), Value::Object(function));
            chunk(json!({"tool_calls": [call]}), Value::Null)
        })
        .collect();
    if !finish.is_null() {
        events.push(chunk(json!({}), finish));
    }
    Reply::Stream { events, end }
}

fn pick(events: &[(String, Value)], kind: &str) -> Vec<Value> {
    events.iter().filter(|(k, _)| k == kind).map(|(_, d)| d.clone()).collect()
}

/// Issue 26, kind 4: streamed tool calls are assembled by call, not by
/// position. Two `todo_write` calls at index 0 with different ids run as
/// two; `todo_write` and another tool at index 0 are both logged; calls
/// without an index whose id comes only on their first fragment are told
/// apart; fragments that cannot be attributed fail the turn with a named
/// provider-format error and run nothing.
#[test]
fn streamed_tool_calls_are_assembled_by_call_not_by_position() {
    let one = r#"{"todos":[{"content":"a","status":"pending"}]}"#;
    let two = r#"{"todos":[{"content":"b","status":"pending"}]}"#;
    // (what, the reply, the calls expected as (id, arguments))
    type Case<'a> = (&'a str, Reply, Vec<(&'a str, &'a str)>);
    let cases: Vec<Case<'_>> = vec![
        (
            "same index, new id",
            calls_reply(
                &[(Some(0), Some("c1"), Some("todo_write"), one), (Some(0), Some("c2"), Some("todo_write"), two)],
                json!("tool_calls"),
                End::Done,
            ),
            vec![("c1", one), ("c2", two)],
        ),
        (
            "same index, another tool",
            calls_reply(
                &[(Some(0), Some("c1"), Some("todo_write"), one), (Some(0), Some("c2"), Some("version"), "")],
                json!("tool_calls"),
                End::Done,
            ),
            vec![("c1", one), ("c2", "")],
        ),
        (
            "no index, id on the first fragment only",
            calls_reply(
                &[(None, Some("c1"), Some("todo_write"), &one[..10]), (None, None, None, &one[10..]), (None, Some("c2"), Some("todo_write"), two)],
                json!("tool_calls"),
                End::Done,
            ),
            vec![("c1", one), ("c2", two)],
        ),
    ];
    for (what, reply, expected) in cases {
        let (out, events, _server, _s) = fault_turn(vec![reply, hello()], "");
        assert!(out.status.success(), "{what}: {:?}", text(&out));
        let calls: Vec<(String, String)> = pick(&events, "tool/call")
            .iter()
            .map(|d| (d["callId"].as_str().unwrap().to_string(), d["arguments"].as_str().unwrap().to_string()))
            .collect();
        let expected: Vec<(String, String)> = expected.iter().map(|(i, a)| (i.to_string(), a.to_string())).collect();
        assert_eq!(calls, expected, "{what}");
        assert_eq!(pick(&events, "tool/result").len(), expected.len(), "{what}");
    }
    let (out, events, _server, _s) = fault_turn(vec![calls_reply(&[(None, None, None, "{}")], json!("tool_calls"), End::Done), hello()], "");
    assert_eq!(out.status.code(), Some(1), "{:?}", text(&out));
    assert!(text(&out).0.contains("provider-format error: a tool-call fragment names no call"), "{:?}", text(&out));
    assert!(pick(&events, "tool/call").is_empty(), "nothing ran");
}

/// Issue 26, kind 5: a `todo_write` whose arguments stop mid-list is not
/// run, and its result says it was cut off (at the output limit when the
/// finish reason is `length`); the next request's history carries `{}` for
/// its arguments, never the cut text.
#[test]
fn a_call_cut_off_is_told_as_cut_off_and_never_sent_back_cut() {
    let cut = r#"{"todos":[{"content":"a","status":"pending"},{"content":"c","sta"#;
    for (finish, end, limit) in [(json!("length"), End::Done, true), (json!("tool_calls"), End::Done, false), (Value::Null, End::Done, false)] {
        let (out, events, server, _s) =
            fault_turn(vec![calls_reply(&[(Some(0), Some("c1"), Some("todo_write"), cut)], finish.clone(), end), hello()], "");
        assert!(out.status.success(), "{finish}: {:?}", text(&out));
        assert!(pick(&events, "todo/write").is_empty(), "{finish}: not run");
        let result = &pick(&events, "tool/result")[0]["message"]["content"][0];
        assert_eq!(result["isError"], true);
        let said = result["content"][0]["text"].as_str().unwrap();
        let expected = if limit {
            "was cut off at the model's output limit before its arguments were complete"
        } else {
            "was cut off before its arguments were complete"
        };
        assert!(said.contains(expected) && said.contains("nothing was run") && said.contains("Send the call again, whole"), "{finish}: {said}");
        let requests = server.wait_for_requests(2);
        let history = &requests[1].body["messages"];
        let sent = history.as_array().unwrap().iter().find(|m| m["tool_calls"].is_array()).expect("the call in the history");
        assert_eq!(sent["tool_calls"][0]["function"]["arguments"], "{}", "{finish}: {history}");
        assert!(!history.to_string().contains("\"sta"), "{finish}: the cut text went back: {history}");
    }
}

/// Issue 26, kind 6: `Retry-After` as an HTTP date is waited for, and the
/// final error after the retries says what wait the server asked.
#[test]
fn retry_after_as_an_http_date_is_waited_for() {
    let when = |seconds: u64| {
        let at = std::time::SystemTime::now() + Duration::from_secs(seconds);
        let out = Command::new("date")
            .args(["-u", "-R", "-d", &format!("@{}", at.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs())])
            .output()
            .unwrap();
        // RFC 9110's IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`.
        String::from_utf8(out.stdout).unwrap().trim().replace("+0000", "GMT")
    };
    let start = Instant::now();
    let (out, _events, server, _s) = fault_turn(vec![error_reply(429, &[("Retry-After", &when(3))], "slow down"), hello()], "");
    assert!(out.status.success(), "{:?}", text(&out));
    let stderr = text(&out).1;
    // The date has whole seconds and the host reads it a moment after it
    // was written (longer on a loaded machine): the wait it announces is
    // what is left of the 2-3 s, and it waits that long.
    let announced: f64 = stderr
        .split("HTTP 429; retrying in ")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !(c.is_ascii_digit() || c == '.')).next())
        .and_then(|n| n.trim_end_matches('.').parse().ok())
        .unwrap_or_else(|| panic!("no announced wait: {stderr}"));
    assert!(announced > 0.5 && announced <= 3.0, "{stderr}");
    assert!(start.elapsed() >= Duration::from_secs_f64(announced), "{:?} < {announced} s", start.elapsed());
    assert_eq!(server.requests().len(), 2);

    let replies = vec![error_reply(429, &[("Retry-After", "1")], "slow"), error_reply(429, &[("Retry-After", "1")], "slow"), hello()];
    let (out, events, server, _s) = fault_turn(replies, "    maxRetries: 1\n");
    let url = format!("{}/chat/completions", server.base_url);
    assert_failed(
        &out,
        &events,
        0,
        &format!("the model API at {url} is rate-limiting requests (HTTP 429): slow (gave up after 1 retry); its last answer asked to wait 1.0 s before retrying"),
    );
}

#[test]
fn the_deepseek_package_takes_the_harness_config_and_maps_it_to_requests() {
    let server = SseServer::start(vec![hello(), hello()]);
    let scratch = Scratch::new();
    scratch.composition(&format!(
        "- id: llm-deepseek\n  name: '@deepseek-ai/dsh-llm-deepseek'\n  config:\n    apiKeyEnv: CORDIS_TEST_KEY\n    baseURL: {}\n    thinking: enabled\n    reasoningEffort: max\n    streamIdleTimeoutMs: 60000\n    models:\n      - id: deepseek-v4-pro\n        contextWindow: 128000\n      - id: deepseek-v4-flash\n        contextWindow: 128000\n",
        server.base_url
    ));
    let out = cordis(&scratch, &["run", "say hello"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let id = session_id(&stdout);
    assert_no_key(&scratch, &out, &id);
    let request = &server.requests()[0];
    assert_eq!(request.line, "POST /v1/chat/completions HTTP/1.1");
    assert_eq!(request.header("authorization"), Some(format!("Bearer {KEY}").as_str()));
    let body = &request.body;
    assert_eq!(body["model"], "deepseek-v4-pro", "the first model of the catalog");
    assert_eq!(body["thinking"], json!({"type": "enabled"}));
    assert_eq!(body["reasoning_effort"], "max");
    assert_eq!(body["max_tokens"], 64_000, "the package's default maxTokens (256000) does not fit the 128000 window: half of it is sent");
    let message = log_events(&log_path(&scratch, &id)).into_iter().find(|(k, _)| k == "assistant/message").unwrap().1;
    assert_eq!(message["message"]["source"]["provider"], "deepseek-official", "{message}");

    // `off` turns thinking off and sends no effort; unknown keys are refused
    // with the allowed ones listed; a broken pair fails the entry.
    scratch.composition(&format!(
        "- id: llm-deepseek\n  name: '@deepseek-ai/dsh-llm-deepseek'\n  config:\n    apiKeyEnv: CORDIS_TEST_KEY\n    baseURL: {}\n    reasoningEffort: 'off'\n",
        server.base_url
    ));
    let out = cordis(&scratch, &["run", "say hello"]);
    assert!(out.status.success(), "{:?}", text(&out));
    let body = &server.requests()[1].body;
    assert_eq!((body["thinking"].clone(), body.get("reasoning_effort")), (json!({"type": "disabled"}), None), "{body}");
    assert_eq!(body["model"], "deepseek-v4-flash", "the package's default catalog");
    scratch.composition(
        "- id: a\n  name: '@deepseek-ai/dsh-llm-deepseek'\n  config:\n    model: x\n- id: b\n  name: '@deepseek-ai/dsh-llm-deepseek'\n  config:\n    thinking: disabled\n    reasoningEffort: high\n",
    );
    let out = cordis(&scratch, &["check"]);
    let (stdout, _) = text(&out);
    assert!(stdout.contains("$.model is not an allowed key (allowed: apiKeyEnv, baseURL, "), "{stdout}");
    assert!(stdout.contains("with thinking: disabled, reasoningEffort can only be off"), "{stdout}");
}

#[test]
fn the_harness_model_rows_load_without_a_key_and_a_turn_then_names_the_variable() {
    // The fixture compositions name the model by package, with no key in
    // the environment (as CI runs them): the rows load.
    for file in ["examples/headless-agent/cordis.yml", "examples/acp-agent/cordis.yml"] {
        let path = repo_root().join("tests/fixtures/compositions").join(file);
        let out = Command::new(cordis_exe())
            .args(["--no-user-patch", "-c", path.to_str().unwrap(), "check"])
            .current_dir(path.parent().unwrap())
            .env("CORDIS_PLUGIN_PATH", plugin_dir())
            .env_remove("DEEPSEEK_API_KEY")
            .output()
            .unwrap();
        let (stdout, stderr) = text(&out);
        assert!(stdout.contains("loaded   llm-deepseek (@deepseek-ai/dsh-llm-deepseek)"), "{file}:\n{stdout}\n{stderr}");
    }
    let server = SseServer::start(vec![hello()]);
    let scratch = Scratch::new();
    scratch.composition(&format!(
        "- id: llm-deepseek\n  name: '@deepseek-ai/dsh-llm-deepseek'\n  config:\n    apiKeyEnv: CORDIS_UNSET_KEY\n    baseURL: {}\n",
        server.base_url
    ));
    let out = cordis(&scratch, &["run", "say hello"]);
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success());
    assert!(
        stderr.contains("export it in $CORDIS_UNSET_KEY (apiKeyEnv)") || stdout.contains("export it in $CORDIS_UNSET_KEY (apiKeyEnv)"),
        "{stdout}\n{stderr}"
    );
    assert!(server.requests().is_empty(), "nothing is sent without a key");
}
