//! `cordis web`: its HTTP surface (security checks, escaping, routes), and
//! its pages in a real browser, headless Chromium from Debian's `chromium`
//! package driven by Playwright for Python (`tests/web/driver.py`),
//! installed, pinned, by `tests/web/setup.sh` into `target/web-peers/`.
//! Screenshots go to `target/web-screenshots/`.
//!
//! The sessions shown are written as log files into a flat store, or by a
//! `cordis dev` console in another process (on the flat store and on
//! PostgreSQL), while the page is open.

mod browser;
mod http;
mod proxy;
mod scale;

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use cordis_tests::{cordis_exe, plugin_dir, Scratch};
use serde_json::{json, Value};

/// The composition every test uses: the todo family, parallel plans allowed.
pub const TODO: &str = "- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: true\n";

/// The seed's parallel plan: one completed, two in progress, one pending.
pub fn four() -> Value {
    json!([
        {"content": "read the code", "status": "in_progress"},
        {"content": "ship it", "status": "completed"},
        {"content": "watch the background build", "status": "in_progress"},
        {"content": "write the fix", "status": "pending"},
    ])
}

/// A session log being written by hand: the header, then events with
/// contiguous seqs, in the shapes the agent loop writes.
pub struct Log {
    id: String,
    pub lines: Vec<String>,
    turn: u64,
    step: u64,
    calls: u64,
}

impl Log {
    pub fn new(id: &str) -> Log {
        let header = json!({"type": "session", "version": 0, "id": id, "createdAt": 1_790_000_000_000u64, "cwd": "/work", "delegationDepth": 0});
        Log { id: id.to_string(), lines: vec![header.to_string()], turn: 0, step: 0, calls: 0 }
    }

    fn event(&mut self, kind: &str, data: Value, surface: bool) -> &mut Log {
        let seq = self.lines.len() - 1;
        let mut e = json!({"seq": seq, "time": 1_790_000_000_000u64 + seq as u64 * 1000, "type": kind, "data": data});
        if surface {
            e["surfaceOp"] = json!("append");
        }
        self.lines.push(e.to_string());
        self
    }

    /// `turn/start` and the user's message.
    pub fn prompt(&mut self, text: &str) -> &mut Log {
        self.turn += 1;
        self.step = 0;
        let turn = self.turn;
        self.event("turn/start", json!({"turn": turn}), false);
        self.event("user/message", json!({"content": [{"type": "text", "text": text}], "source": {"kind": "user"}, "role": "user"}), true)
    }

    /// One step: the assistant says `say` and calls `tool` with `arguments`
    /// (raw text); the tool writes `todos` (when given) and answers
    /// `result` (an error when `error`).
    pub fn call(&mut self, say: &str, tool: &str, arguments: &str, todos: Option<Value>, result: &str, error: bool) -> &mut Log {
        self.step += 1;
        self.calls += 1;
        let (turn, step) = (self.turn, self.step);
        let id = format!("call_{}", self.calls);
        self.event("step/start", json!({"turn": turn, "step": step}), false);
        let mut content = vec![];
        if !say.is_empty() {
            content.push(json!({"type": "text", "text": say}));
        }
        content.push(json!({"type": "tool-call", "id": id, "name": tool, "arguments": arguments}));
        let source = json!({"kind": "model", "provider": "scripted", "model": "test"});
        self.event(
            "assistant/message",
            json!({"turn": turn, "step": step, "message": {"role": "assistant", "content": content, "source": source}}),
            true,
        );
        self.event("tool/call", json!({"turn": turn, "step": step, "callId": id, "name": tool, "arguments": arguments}), false);
        if let Some(todos) = todos {
            self.event("todo/write", json!({"todos": todos}), false);
        }
        let block = json!({"type": "tool-result", "toolCallId": id, "content": [{"type": "text", "text": result}], "isError": error});
        self.event(
            "tool/result",
            json!({"turn": turn, "step": step, "message": {"role": "user", "content": [block], "source": {"kind": "tool", "callId": id}}}),
            true,
        );
        self.event("step/end", json!({"turn": turn, "step": step}), false)
    }

    /// A step where the assistant only talks.
    pub fn say(&mut self, text: &str) -> &mut Log {
        self.step += 1;
        let (turn, step) = (self.turn, self.step);
        let source = json!({"kind": "model", "provider": "scripted", "model": "test"});
        self.event("step/start", json!({"turn": turn, "step": step}), false);
        self.event(
            "assistant/message",
            json!({"turn": turn, "step": step, "message": {"role": "assistant", "content": [{"type": "text", "text": text}], "source": source}}),
            true,
        );
        self.event("step/end", json!({"turn": turn, "step": step}), false)
    }

    /// A step where the assistant reasons `reasoning`, streamed as
    /// `chunks` chunks, and then says `text` in its message (which carries
    /// the reasoning too), unless `finish` is false (the step still
    /// streaming).
    pub fn think(&mut self, reasoning: &str, chunks: usize, text: &str, finish: bool) -> &mut Log {
        self.step += 1;
        let (turn, step) = (self.turn, self.step);
        self.event("step/start", json!({"turn": turn, "step": step}), false);
        let chars: Vec<char> = reasoning.chars().collect();
        for part in chars.chunks(chars.len().div_ceil(chunks.max(1)).max(1)) {
            let part: String = part.iter().collect();
            self.event("assistant/chunk", json!({"turn": turn, "step": step, "chunk": {"type": "reasoning-delta", "text": part}}), false);
        }
        if finish {
            let source = json!({"kind": "model", "provider": "scripted", "model": "test"});
            let content = json!([{"type": "reasoning", "text": reasoning}, {"type": "text", "text": text}]);
            self.event(
                "assistant/message",
                json!({"turn": turn, "step": step, "message": {"role": "assistant", "content": content, "source": source}}),
                true,
            );
            self.event("step/end", json!({"turn": turn, "step": step}), false);
        }
        self
    }

    /// The seq the next event gets.
    pub fn next_seq(&self) -> u64 {
        self.lines.len() as u64 - 1
    }

    /// `turn/end`, completed.
    pub fn end(&mut self) -> &mut Log {
        let turn = self.turn;
        self.event("turn/end", json!({"turn": turn, "reason": {"kind": "completed"}}), false)
    }

    /// Writes the log into the flat store of `state` (`<state>/sessions/`).
    pub fn write(&self, state: &Path) {
        let dir = state.join("sessions");
        std::fs::create_dir_all(&dir).expect("create the sessions folder");
        std::fs::write(dir.join(format!("{}.jsonl", self.id)), self.lines.join("\n") + "\n").expect("write the log");
    }
}

/// A todo_write call's arguments as a model sends them.
pub fn todo_args(todos: &Value) -> String {
    json!({ "todos": todos }).to_string()
}

/// A running `cordis web`.
pub struct Web {
    child: Child,
    pub addr: SocketAddr,
}

impl Web {
    /// Starts `cordis web` in `scratch` (its `cordis.yml`, flat store in
    /// `.cordis/` unless the composition chooses another) with `extra`
    /// options; waits until it listens.
    pub fn start(scratch: &Scratch, extra: &[&str], env: &[(&str, &str)]) -> Web {
        Web::try_start(scratch, extra, env).unwrap_or_else(|e| panic!("cordis web did not start: {e}"))
    }

    /// As [`Web::start`]; `Err` with stderr when it exits instead.
    // The child is waited for when it exits early, and by `Drop` otherwise.
    #[allow(clippy::zombie_processes)]
    pub fn try_start(scratch: &Scratch, extra: &[&str], env: &[(&str, &str)]) -> Result<Web, String> {
        let mut cmd = Command::new(cordis_exe());
        cmd.arg("web");
        if !extra.contains(&"--http") {
            cmd.args(["--http", "127.0.0.1:0"]);
        }
        cmd.args(extra)
            .current_dir(scratch.path())
            .env("CORDIS_PLUGIN_PATH", plugin_dir())
            .env("XDG_CONFIG_HOME", scratch.path().join(".config"))
            .env_remove("CORDIS_WEB_TOKEN")
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn cordis web");
        let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
        let mut seen = String::new();
        loop {
            let mut line = String::new();
            if stderr.read_line(&mut line).unwrap_or(0) == 0 {
                let _ = child.wait();
                return Err(seen);
            }
            seen.push_str(&line);
            if let Some(url) = line.trim().strip_prefix("cordis web: serving ").and_then(|l| l.rsplit_once(" at http://")) {
                let addr = url.1.trim_end_matches('/').parse().expect("the address printed");
                // Keep draining stderr so the server never blocks on it.
                std::thread::spawn(move || {
                    let mut rest = String::new();
                    let _ = stderr.read_to_string(&mut rest);
                });
                return Ok(Web { child, addr });
            }
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `http://ADDR` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for Web {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `cordis dev` console in another process, writing one session.
pub struct Dev {
    console: cordis_tests::dev::Dev,
    /// The session it writes.
    pub id: String,
}

impl Dev {
    /// Starts `cordis dev` in `scratch` on a new session.
    pub fn start(scratch: &Scratch, env: &[(&str, &str)]) -> Dev {
        let console = cordis_tests::dev::Dev::start(scratch.path(), env);
        Dev { id: console.session.clone(), console }
    }

    /// One todo_write call with `todos`; its answer.
    pub fn write(&mut self, todos: &Value) -> Value {
        let answer = self.console.send(&format!("call todo_write {}", todo_args(todos)));
        assert_eq!(answer["isError"], false, "{answer}");
        answer
    }
}

/// `target/`, the folder above `target/<profile>`.
pub fn target_root() -> PathBuf {
    cordis_tests::target_dir().parent().expect("target/<profile> has a parent").to_path_buf()
}

/// Waits until `f` is true, polling; panics with `what` after `within`.
pub fn eventually(within: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !f() {
        assert!(start.elapsed() < within, "{what} did not happen within {within:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
