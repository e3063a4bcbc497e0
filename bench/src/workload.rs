//! The inputs: `todo_write` arguments, session logs of a given length, and
//! compositions.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use serde_json::{json, Value};

/// The five todos the reference oracle's `--bench` sends on every call, so
/// the 5-item figures compare like with like.
pub const ORACLE_TODOS: [(&str, &str); 5] = [
    ("read the spec", "completed"),
    ("write the parser", "completed"),
    ("wire the tool", "in_progress"),
    ("add tests", "pending"),
    ("update docs", "pending"),
];

const VERBS: [&str; 8] = ["read", "write", "wire", "test", "review", "document", "measure", "ship"];
const NOUNS: [&str; 8] = ["the parser", "the loader", "the session log", "the schema", "the CLI", "the plugin", "the replay", "the docs"];

/// `n` distinct todos: the oracle's five for `n == 5`, otherwise generated
/// lines with the first 40% completed, one in progress, the rest pending.
pub fn todos(n: usize) -> Vec<(String, &'static str)> {
    if n == ORACLE_TODOS.len() {
        return ORACLE_TODOS.iter().map(|(c, s)| ((*c).to_string(), *s)).collect();
    }
    let done = n * 2 / 5;
    (0..n)
        .map(|i| {
            let status = match i {
                i if i < done => "completed",
                i if i == done => "in_progress",
                _ => "pending",
            };
            (format!("step {}: {} {}", i + 1, VERBS[i % VERBS.len()], NOUNS[(i / VERBS.len()) % NOUNS.len()]), status)
        })
        .collect()
}

/// The `{"todos": [...]}` object for `items`.
pub fn todos_value(items: &[(String, &str)]) -> Value {
    let list: Vec<Value> = items.iter().map(|(c, s)| json!({"content": c, "status": s})).collect();
    json!({ "todos": list })
}

/// The raw argument text of a `todo_write` call with `n` todos, as a model
/// would send it.
pub fn todo_arguments(n: usize) -> String {
    todos_value(&todos(n)).to_string()
}

/// Events per generated turn (see [`write_session_log`]).
pub const EVENTS_PER_TURN: usize = 30;

/// What a generated log holds.
#[derive(Debug, Clone, PartialEq)]
pub struct LogFacts {
    /// Events written (not counting the header).
    pub events: usize,
    /// Of which `todo/write`.
    pub todo_writes: usize,
    /// Bytes of the file.
    pub bytes: u64,
    /// The plan a replay must end with: the `todos` projection's state.
    pub plan: Value,
}

struct Gen<W: Write> {
    out: W,
    seq: u64,
    time: u64,
    limit: usize,
    todo_writes: usize,
    plan: Value,
    ids: u64,
}

impl<W: Write> Gen<W> {
    fn id(&mut self) -> String {
        self.ids += 1;
        // Shaped like the v4 UUIDs the agent loop writes.
        format!("{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}", self.ids as u32, self.ids % 0xffff, self.ids % 0xfff, 0x5a5, self.ids * 7919)
    }

    fn full(&self) -> bool {
        self.seq as usize >= self.limit
    }

    fn emit(&mut self, kind: &str, data: &Value, surface: bool) -> std::io::Result<()> {
        if self.full() {
            return Ok(());
        }
        self.time += 37;
        let surface = if surface { ",\"surfaceOp\":\"append\"" } else { "" };
        writeln!(self.out, "{{\"seq\":{},\"time\":{},\"type\":\"{kind}\",\"data\":{data}{surface}}}", self.seq, self.time)?;
        self.seq += 1;
        if kind == "todo/write" {
            self.todo_writes += 1;
            self.plan = data["todos"].clone();
        } else if kind == "turn/start" {
            self.plan = Value::Null;
        }
        Ok(())
    }

    /// One turn of [`EVENTS_PER_TURN`] events, shaped like the agent loop's:
    /// four model steps that each call `todo_write`, then a final answer.
    /// When the limit falls inside the turn, the turn holds user messages
    /// only and its last event is the `turn/end`, so the log always ends
    /// with its turns closed and keeps the structure rules.
    fn turn(&mut self, turn: u64) -> std::io::Result<()> {
        let started = self.seq as usize;
        if self.limit - started == 1 {
            // No room for a turn: one user message, which needs no turn.
            let id = self.id();
            return self.emit(
                "user/message",
                &json!({"content": [{"type": "text", "text": "thanks"}], "source": {"kind": "user"}, "role": "user", "id": id}),
                true,
            );
        }
        let close_at = self.limit.min(started + EVENTS_PER_TURN) - 1;
        self.emit("turn/start", &json!({"turn": turn}), false)?;
        if self.limit - started < EVENTS_PER_TURN {
            // No room for a whole turn: user messages fill it, so the log
            // keeps the structure rules (a step cut short would leave the
            // turn ending inside it) and has exactly `limit` events.
            while (self.seq as usize) < close_at {
                let id = self.id();
                self.emit(
                    "user/message",
                    &json!({"content": [{"type": "text", "text": "and one more thing"}], "source": {"kind": "user"}, "role": "user", "id": id}),
                    true,
                )?;
            }
            return self.emit("turn/end", &json!({"turn": turn, "reason": {"kind": "completed"}}), false);
        }
        let prompt = format!("Turn {turn}: the parser test fails on nested lists; read the code, fix it and run the tests.");
        let id = self.id();
        self.emit_open(
            close_at,
            "user/message",
            &json!({"content": [{"type": "text", "text": prompt}], "source": {"kind": "user"}, "role": "user", "id": id}),
            true,
        )?;
        let items: Vec<String> = ORACLE_TODOS.iter().map(|(c, _)| format!("{c} (turn {turn})")).collect();
        for step in 1..=4u64 {
            let statuses: Vec<&str> = (0..items.len())
                .map(|i| match (i as u64 + 1).cmp(&step) {
                    std::cmp::Ordering::Less => "completed",
                    std::cmp::Ordering::Equal => "in_progress",
                    std::cmp::Ordering::Greater => "pending",
                })
                .collect();
            let list: Vec<(String, &str)> = items.iter().cloned().zip(statuses.iter().copied()).collect();
            let todos = todos_value(&list);
            let arguments = todos.to_string();
            let call_id = format!("call_{turn}_{step}");
            self.emit_open(close_at, "step/start", &json!({"turn": turn, "step": step}), false)?;
            let id = self.id();
            self.emit_open(
                close_at,
                "assistant/message",
                &json!({"turn": turn, "step": step, "message": {
                    "role": "assistant",
                    "content": [{"type": "text", "text": format!("Step {step}: updating the plan before I go on.")},
                                {"type": "tool-call", "id": call_id, "name": "todo_write", "arguments": arguments}],
                    "source": {"kind": "model", "provider": "scripted", "model": "bench"},
                    "id": id,
                }}),
                true,
            )?;
            self.emit_open(
                close_at,
                "tool/call",
                &json!({"turn": turn, "step": step, "callId": call_id, "name": "todo_write", "arguments": arguments}),
                false,
            )?;
            self.emit_open(close_at, "todo/write", &todos, false)?;
            let done = statuses.iter().filter(|s| **s == "completed").count();
            let text = format!("Updated todo list: {} pending, 1 in progress, {done} completed.", items.len() - done - 1);
            let id = self.id();
            self.emit_open(
                close_at,
                "tool/result",
                &json!({"turn": turn, "step": step, "message": {
                    "source": {"kind": "tool", "callId": call_id},
                    "content": [{"type": "tool-result", "toolCallId": call_id, "content": [{"type": "text", "text": text}], "isError": false}],
                    "role": "user",
                    "id": id,
                }}),
                true,
            )?;
            self.emit_open(close_at, "step/end", &json!({"turn": turn, "step": step}), false)?;
        }
        self.emit_open(close_at, "step/start", &json!({"turn": turn, "step": 5}), false)?;
        let id = self.id();
        self.emit_open(
            close_at,
            "assistant/message",
            &json!({"turn": turn, "step": 5, "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": "Done: the parser handles nested lists and the tests pass."}],
                "source": {"kind": "model", "provider": "scripted", "model": "bench"},
                "id": id,
            }}),
            true,
        )?;
        self.emit_open(close_at, "step/end", &json!({"turn": turn, "step": 5}), false)?;
        self.emit("turn/end", &json!({"turn": turn, "reason": {"kind": "completed"}}), false)
    }

    /// An event inside an open turn, unless its slot is the one reserved for
    /// closing the turn.
    fn emit_open(&mut self, close_at: usize, kind: &str, data: &Value, surface: bool) -> std::io::Result<()> {
        if self.seq as usize >= close_at {
            return Ok(());
        }
        self.emit(kind, data, surface)
    }
}

/// Writes a session log of exactly `events` events (plus the header line)
/// to `path`, with session id `id`: turns of [`EVENTS_PER_TURN`] events in
/// the agent loop's shapes, 4 of them `todo/write` with 5 todos each.
///
/// # Errors
/// I/O errors.
pub fn write_session_log(path: &Path, id: &str, events: usize) -> std::io::Result<LogFacts> {
    let file = File::create(path)?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let header = json!({"type": "session", "version": 0, "id": id, "createdAt": 1_760_000_000_000u64});
    writeln!(out, "{header}")?;
    let mut g = Gen { out, seq: 0, time: 1_760_000_000_000, limit: events, todo_writes: 0, plan: Value::Null, ids: 0 };
    let mut turn = 1;
    while !g.full() {
        g.turn(turn)?;
        turn += 1;
    }
    g.out.flush()?;
    let facts = LogFacts { events: g.seq as usize, todo_writes: g.todo_writes, bytes: 0, plan: g.plan.clone() };
    drop(g);
    let bytes = std::fs::metadata(path)?.len();
    Ok(LogFacts { bytes, ..facts })
}

/// A composition entry for the todo plugin loaded from `library`.
pub fn todo_entry(library: &Path) -> String {
    format!("- id: tool-todo\n  name: {}\n  config:\n    allowParallelInProgress: true\n", library.display())
}

/// A composition of `entries` entries: the todo plugin, then `entries - 1`
/// entries of the `fixture-named` library, each registering its own tool.
pub fn composition(entries: usize, todo_library: &Path, named_library: &Path) -> String {
    let mut text = todo_entry(todo_library);
    for i in 1..entries {
        text.push_str(&format!("- id: named-{i}\n  name: {}\n  config:\n    tool: tool_{i}\n", named_library.display()));
    }
    text
}
