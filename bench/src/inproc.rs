//! The in-process figures and their baselines. The criterion benches time
//! these functions; the smoke run calls each once.
//!
//! | figure | ours | baseline |
//! | --- | --- | --- |
//! | tool call | [`ToolCallBed::call`]: registry → ABI → plugin → in-memory session | [`Direct::validate`]: the parse and schema check and the tool's validation, called directly |
//! | durable append | [`AppendBed::append`]: the session append pipeline, `fdatasync` per event | [`RawAppend::append`]: `write` + `fdatasync` of a line of the same size |
//! | replay | [`replay_to_plan`]: read, parse, re-validate, fold the plan | [`parse_as_values`]: `serde_json` parses each line into a `Value` |
//! | resume | [`Resume::run`]: reopen for appending, replay, first append | as replay |
//! | harness store append | [`AppendBed::with_store`]: the same append into the harness store (one frame per event, zstd or plain) | [`RawAppend::append`] |
//! | harness store replay | [`replay_to_plan`] of a `.jsonl.zstd` log | [`zstd_parse_as_values`]: decompress every frame, parse each line into a `Value` |

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cordis_abi::schema::Checker;
use cordis_abi::sdk::parse_arguments;
use cordis_engine::tools::{ToolCall, ToolResult};
use cordis_engine::{Host, HostOptions};
use cordis_session::{Appender, Durability, Session};
use serde_json::{json, Value};
use tool_todo::{validate_call, Policy, Todo, TodoArgs, TodoSink};

use crate::workload;

/// Boots a host from `composition` (text), written into `dir`.
///
/// # Errors
/// A message when the composition does not boot or an entry fails.
pub fn boot(dir: &Path, composition: &str, in_memory: bool, durability: Durability) -> Result<Host, String> {
    let file = dir.join("cordis.yml");
    std::fs::write(&file, composition).map_err(|e| format!("{}: {e}", file.display()))?;
    let options = HostOptions {
        composition: file,
        state_dir: Some(dir.join("state")),
        plugin_dirs: Vec::new(),
        durability,
        in_memory,
        ..HostOptions::default()
    };
    let host = Host::boot(&options).map_err(|e| e.to_string())?;
    if let Some(failed) = host.failures(true).first() {
        return Err(format!("entry {} did not load: {:?}", failed.id, failed.state));
    }
    Ok(host)
}

/// Opens a turn on `session` (plugin events may only be appended inside one).
///
/// # Errors
/// The append's error.
pub fn open_turn(session: &Session) -> Result<(), String> {
    session.append_value("turn/start", &json!({"turn": session.next_turn()}), Appender::Host).map(|_| ()).map_err(|e| e.to_string())
}

/// `todo_write` through the whole host: the tool registry, the ABI, the
/// plugin's SDK adapter and tool, and the append of `todo/write` to an
/// in-memory session (invariant, projection fold) — what an agent's call
/// costs, minus the model.
pub struct ToolCallBed {
    host: Host,
    session: Arc<Session>,
    calls: usize,
}

/// Calls made on one session before [`ToolCallBed::call`] starts a fresh
/// one, so memory stays bounded however long criterion runs.
pub const CALLS_PER_SESSION: usize = 20_000;

impl ToolCallBed {
    /// A host with the todo plugin from `library`, sessions in memory.
    ///
    /// # Errors
    /// A message when the host does not boot.
    pub fn new(dir: &Path, library: &Path) -> Result<ToolCallBed, String> {
        let host = boot(dir, &workload::todo_entry(library), true, Durability::None)?;
        let session = Self::fresh(&host)?;
        Ok(ToolCallBed { host, session, calls: 0 })
    }

    fn fresh(host: &Host) -> Result<Arc<Session>, String> {
        let session = host.services.sessions.create(None).map_err(|e| e.to_string())?;
        open_turn(&session)?;
        Ok(session)
    }

    /// Starts a fresh session when the current one has had
    /// [`CALLS_PER_SESSION`] calls (call it outside the timed part).
    ///
    /// # Errors
    /// A message when the session cannot be created.
    pub fn rotate(&mut self) -> Result<(), String> {
        if self.calls >= CALLS_PER_SESSION {
            self.session = Self::fresh(&self.host)?;
            self.calls = 0;
        }
        Ok(())
    }

    /// Calls left before the session rotates.
    pub fn room(&self) -> usize {
        CALLS_PER_SESSION - self.calls.min(CALLS_PER_SESSION)
    }

    /// One call of `todo_write` with raw argument text `arguments`.
    pub fn call(&mut self, arguments: &str) -> ToolResult {
        self.calls += 1;
        self.host.services.tools.execute(&ToolCall { id: "call_1", name: tool_todo::TOOL_NAME, arguments }, Some(&self.session))
    }

    /// The current plan of the session (the `todos` projection).
    pub fn plan(&self) -> Option<String> {
        self.session.state("todos")
    }
}

/// The tool's validation called directly: `parse_arguments` (what the host
/// runs on every call: parse, object check, the tool's schema) with the
/// tool's schema checker, deserialising into [`TodoArgs`], and
/// [`validate_call`] — no registry, no ABI, no session.
pub struct Direct {
    checker: Checker,
    policy: Policy,
}

/// A sink that keeps the encoded `todo/write` data, as the session would
/// receive it, and nothing else.
#[derive(Default)]
pub struct Kept(std::cell::RefCell<String>);

impl TodoSink for Kept {
    fn has_session(&self) -> bool {
        true
    }
    fn append_todo_write(&self, data: cordis_abi::JsonStr<'_>) -> Result<u64, String> {
        data.as_str().clone_into(&mut self.0.borrow_mut());
        Ok(0)
    }
}

impl Direct {
    /// The checker for `todo_write`'s parameters under the parallel policy
    /// (the default composition's).
    ///
    /// # Panics
    /// When the tool's own schema does not compile (a bug the tests catch).
    pub fn new() -> Direct {
        #[allow(clippy::expect_used)]
        let checker = Checker::new(tool_todo::tool::parameters()).expect("todo_write's schema compiles");
        Direct { checker, policy: Policy::Parallel }
    }

    /// Parses, schema-checks and validates one call's arguments; returns the
    /// trimmed list.
    ///
    /// # Errors
    /// The validation message.
    pub fn validate(&self, arguments: &str) -> Result<Vec<Todo>, String> {
        let value = parse_arguments(arguments, &self.checker)?;
        let args: TodoArgs = serde_json::from_value(value).map_err(|e| e.to_string())?;
        validate_call(args, self.policy)
    }

    /// [`Direct::validate`] plus the rest of the tool's own work
    /// (`execute_call_encoded`, what the tool's `execute_encoded` runs:
    /// encoding the event data, the reply and its value), still without
    /// registry, ABI or session. Not a target row: it splits the tool-call
    /// ratio into the tool's work and the host's.
    ///
    /// # Errors
    /// The validation message.
    pub fn execute(&self, arguments: &str, sink: &Kept) -> Result<String, String> {
        let value = parse_arguments(arguments, &self.checker)?;
        let args: TodoArgs = serde_json::from_value(value).map_err(|e| e.to_string())?;
        let reply = tool_todo::execute_call_encoded(args, self.policy, sink).map_err(|e| e.0)?;
        Ok(reply.value.map(|v| v.as_str().to_owned()).unwrap_or_default())
    }
}

impl Default for Direct {
    fn default() -> Self {
        Direct::new()
    }
}

/// A durable session (`fdatasync` after every event) in a store on disk,
/// inside an open turn, appending `todo/write` events with 5 todos through
/// the session's pipeline (ownership, invariant, turn check, write, sync,
/// projection fold).
pub struct AppendBed {
    _host: Host,
    session: Arc<Session>,
    data: String,
}

impl AppendBed {
    /// A host over a store in `dir`.
    ///
    /// # Errors
    /// A message when the host does not boot or the session cannot be made.
    pub fn new(dir: &Path, library: &Path) -> Result<AppendBed, String> {
        AppendBed::with_store(dir, library, None)
    }

    /// A host whose composition keeps sessions in the harness store at
    /// `dir/store` with `compression` (`zstd` or `none`), or in the flat
    /// store when `None`.
    ///
    /// # Errors
    /// As [`AppendBed::new`].
    pub fn with_store(dir: &Path, library: &Path, compression: Option<&str>) -> Result<AppendBed, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut composition = workload::todo_entry(library);
        if let Some(c) = compression {
            composition.push_str(&format!(
                "- id: persistence\n  name: session-persistence-jsonl\n  config:\n    root: {}\n    compression: {c}\n",
                dir.join("store").display()
            ));
        }
        let host = boot(dir, &composition, false, Durability::Event)?;
        let session = host.services.sessions.create(None).map_err(|e| e.to_string())?;
        open_turn(&session)?;
        Ok(AppendBed { _host: host, session, data: workload::todo_arguments(5) })
    }

    /// Appends one event durably.
    ///
    /// # Errors
    /// The append's error.
    pub fn append(&self) -> Result<u64, String> {
        self.session.append_text(tool_todo::TODO_WRITE, &self.data, Appender::Host).map_err(|e| e.to_string())
    }

    /// The line an append writes, for the baseline to write the same size.
    pub fn line(&self) -> String {
        self.session.with_events(|e| e.last().map(|e| e.to_line()).unwrap_or_default())
    }
}

/// The baseline of durable appends: a file opened for appending, one
/// `write` of a whole line and `fdatasync`, in a loop.
pub struct RawAppend {
    file: File,
    line: Vec<u8>,
}

impl RawAppend {
    /// A fresh file `path` that lines of `line`'s size are appended to.
    ///
    /// # Errors
    /// A message when the file cannot be created.
    pub fn new(path: &Path, line: &str) -> Result<RawAppend, String> {
        let file = OpenOptions::new().create(true).truncate(true).write(true).open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        drop(file);
        let file = OpenOptions::new().append(true).open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(RawAppend { file, line: line.as_bytes().to_vec() })
    }

    /// Writes and syncs one line.
    ///
    /// # Errors
    /// I/O errors.
    pub fn append(&mut self) -> std::io::Result<()> {
        self.file.write_all(&self.line)?;
        self.file.sync_data()
    }
}

/// Replays the log at `path` into a session and returns its current plan
/// (the `todos` projection's state, JSON text): what `cordis session show`
/// does before it prints.
///
/// # Errors
/// A message when the file is not a session log or has bad lines.
pub fn replay_to_plan(host: &Host, path: &Path) -> Result<String, String> {
    let (session, problems) = host.services.sessions.view(&path.display().to_string()).map_err(|e| e.to_string())?;
    if let Some(p) = problems.first() {
        return Err(format!("{}: {p}", path.display()));
    }
    session.state("todos").ok_or_else(|| "no todos projection".to_string())
}

/// The replay baseline: reads the file and parses every line into a
/// `serde_json::Value`, discarding it. Returns the number of lines.
///
/// # Errors
/// A message when a line is not JSON.
pub fn parse_as_values(path: &Path) -> Result<usize, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse_lines(&bytes, path)
}

/// Parses every non-empty line of `text` into a `serde_json::Value`,
/// discarding it; returns the number of lines.
fn parse_lines(text: &[u8], path: &Path) -> Result<usize, String> {
    let mut lines = 0;
    for line in text.split(|b| *b == b'\n') {
        if line.is_empty() {
            continue;
        }
        let value: Value = serde_json::from_slice(line).map_err(|e| format!("{}: {e}", path.display()))?;
        std::hint::black_box(value);
        lines += 1;
    }
    Ok(lines)
}

/// The harness-store baseline of replay: reads the file, decompresses its
/// frames with the `zstd` crate and parses every line into a
/// `serde_json::Value`. Returns the number of lines.
///
/// # Errors
/// A message when the file is not zstd or a line is not JSON.
pub fn zstd_parse_as_values(path: &Path) -> Result<usize, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let text = zstd::stream::decode_all(bytes.as_slice()).map_err(|e| format!("{}: {e}", path.display()))?;
    parse_lines(&text, path)
}

/// Copies the flat log at `flat` into a harness store at `root` in
/// `compression` the way `cordis run --durability turn` writes it (one
/// frame per turn); returns the log file written.
///
/// # Errors
/// A message when the log cannot be read or written.
pub fn harness_copy(flat: &Path, root: &Path, compression: cordis_session::Compression) -> Result<PathBuf, String> {
    use cordis_session::{HarnessStore, SessionStore};
    let log = cordis_session::store::read_file(flat).map_err(|e| e.to_string())?;
    let mut header = log.header;
    header.extra.entry("delegationDepth").or_insert(Value::from(0));
    let store = HarnessStore::new(root, compression, true).map_err(|e| e.to_string())?;
    let mut writer = store.create(&header, Durability::None).map_err(|e| e.to_string())?;
    for event in &log.events {
        writer.append(event).map_err(|e| e.to_string())?;
        if event.kind == "turn/end" {
            writer.end_turn().map_err(|e| e.to_string())?;
        }
    }
    writer.end_turn().map_err(|e| e.to_string())?;
    Ok(writer.path().to_path_buf())
}

/// Reopening a stored session until its first new event is appended: lock
/// and read the file, replay it (re-validating owned events), then append a
/// `turn/start` (which folds the projections). The host syncs nothing
/// (`--durability none`): the cost of a sync is the durable-append figure.
pub struct Resume {
    host: Host,
    id: String,
    path: PathBuf,
    len: u64,
}

impl Resume {
    /// A host over the store in `dir` holding the session `id`, whose file
    /// the caller has written.
    ///
    /// # Errors
    /// A message when the host does not boot or the file is missing.
    pub fn new(dir: &Path, library: &Path, id: &str) -> Result<Resume, String> {
        let host = boot(dir, &workload::todo_entry(library), false, Durability::None)?;
        let path = Resume::path_in(dir, id);
        let len = std::fs::metadata(&path).map_err(|e| format!("{}: {e}", path.display()))?.len();
        Ok(Resume { host, id: id.to_string(), path, len })
    }

    /// Where the session file of `id` lives under `dir`.
    pub fn path_in(dir: &Path, id: &str) -> PathBuf {
        dir.join("state").join("sessions").join(format!("{id}.jsonl"))
    }

    /// Opens the session and appends one event; returns the session (drop
    /// it, then call [`Resume::reset`], outside the timed part).
    ///
    /// # Errors
    /// A message when the session cannot be opened or the append fails.
    pub fn run(&self) -> Result<Arc<Session>, String> {
        let (session, problems) = self.host.services.sessions.open(&self.id).map_err(|e| e.to_string())?;
        if let Some(p) = problems.first() {
            return Err(format!("{}: {p}", self.path.display()));
        }
        open_turn(&session)?;
        Ok(session)
    }

    /// Cuts the appended event off again, so every run reopens the same log.
    ///
    /// # Errors
    /// I/O errors.
    pub fn reset(&self) -> std::io::Result<()> {
        OpenOptions::new().write(true).open(&self.path)?.set_len(self.len)
    }
}

/// A host with a service provider (`fixture-counter`), a consumer whose tool
/// calls it (`fixture-counter-user`, tool `next`), and a tool that answers
/// without any service (`fixture-named`, tool `echo`): the same registry,
/// ABI and plugin path with and without a hop through an injected service.
pub struct ServiceCallBed {
    host: Host,
}

impl ServiceCallBed {
    /// Boots the three entries from the built fixture libraries in `dir`.
    ///
    /// # Errors
    /// A library is missing or an entry does not load.
    pub fn new(dir: &Path) -> Result<ServiceCallBed, String> {
        let lib = |name: &str| crate::paths::library(name).map(|p| p.display().to_string());
        let composition = format!(
            "- {{id: counter, name: '{}', config: {{label: bench}}}}\n- {{id: user, name: '{}', config: {{tool: next}}}}\n- {{id: echo, name: '{}', config: {{tool: echo}}}}\n",
            lib("fixture-counter")?,
            lib("fixture-counter-user")?,
            lib("fixture-named")?
        );
        let host = boot(dir, &composition, true, Durability::None)?;
        Ok(ServiceCallBed { host })
    }

    /// Calls `next`: registry → ABI → consumer → host handle → provider.
    pub fn through_service(&self) -> ToolResult {
        self.host.services.tools.execute(&ToolCall { id: "c", name: "next", arguments: "{}" }, None)
    }

    /// Calls `echo`: registry → ABI → plugin, no service.
    pub fn tool_only(&self) -> ToolResult {
        self.host.services.tools.execute(&ToolCall { id: "c", name: "echo", arguments: r#"{"text": "x"}"# }, None)
    }
}

/// A stored session compacted by hand, again and again from the same log:
/// the compaction figure. The summarizing model is a stand-in that answers
/// at once with a fixed summary, so the figure is the host's own cost
/// (choosing the range, building the summary request, appending the
/// replacement and the plan), not a provider's.
pub struct CompactionBed {
    host: Host,
    id: String,
    path: PathBuf,
    len: u64,
}

/// The stand-in summarizer of [`CompactionBed`].
struct FixedSummary;

impl cordis_engine::agent::Model for FixedSummary {
    fn provider(&self) -> &str {
        "bench"
    }

    fn name(&self) -> &str {
        "fixed-summary"
    }

    fn next_step(
        &mut self,
        _request: &cordis_engine::agent::ModelRequest<'_>,
        _sink: &mut dyn cordis_engine::agent::StepSink,
    ) -> Result<cordis_engine::agent::ModelStep, cordis_engine::agent::ModelError> {
        Ok(cordis_engine::agent::ModelStep {
            text: "## Goal\n- a long benchmark session\n## Open work\n- the plan's open items".into(),
            finish: Some("stop".into()),
            ..Default::default()
        })
    }
}

impl CompactionBed {
    /// A host with tool-todo and a manual-only compaction entry over the
    /// store in `dir`, holding the session `id` whose file the caller wrote
    /// (see [`Resume::path_in`]).
    ///
    /// # Errors
    /// A message when the host does not boot or the file is missing.
    pub fn new(dir: &Path, library: &Path, id: &str) -> Result<CompactionBed, String> {
        let composition = format!("{}- id: compaction\n  name: compaction-basic\n  config:\n    auto: false\n", workload::todo_entry(library));
        let host = boot(dir, &composition, false, Durability::None)?;
        let path = Resume::path_in(dir, id);
        let len = std::fs::metadata(&path).map_err(|e| format!("{}: {e}", path.display()))?.len();
        if host.compaction.is_none() {
            return Err("the compaction entry did not load".into());
        }
        Ok(CompactionBed { host, id: id.to_string(), path, len })
    }

    /// Opens the session (not part of the compaction's cost).
    ///
    /// # Errors
    /// A message when the session cannot be opened or has bad lines.
    pub fn open(&self) -> Result<Arc<Session>, String> {
        let (session, problems) = self.host.services.sessions.open(&self.id).map_err(|e| e.to_string())?;
        if let Some(p) = problems.first() {
            return Err(format!("{}: {p}", self.path.display()));
        }
        Ok(session)
    }

    /// Compacts `session` now; returns the estimated tokens of the next
    /// request before and after.
    ///
    /// # Errors
    /// A message when nothing was compacted or the compaction failed.
    pub fn compact(&self, session: &Arc<Session>) -> Result<(u64, u64), String> {
        let compactor = self.host.compaction.clone().ok_or("no compaction")?;
        let tools = self.host.services.tools.schemas();
        let outcome = compactor
            .compact_now(session, &mut FixedSummary, &tools, None, &|| false, &mut cordis_engine::agent::Quiet)
            .map_err(|e| e.to_string())?;
        outcome.map(|o| o.request_tokens).map_err(|skip| format!("nothing to compact: {skip}"))
    }

    /// The baseline: the request the next step would send, built without
    /// compaction (the history derived and encoded with the tool schemas);
    /// returns its size in bytes.
    ///
    /// # Errors
    /// A message when it cannot be encoded.
    pub fn request_bytes(&self, session: &Session) -> Result<usize, String> {
        let messages = session.with_events(cordis_session::derive_messages);
        let tools: Vec<serde_json::Value> = self
            .host
            .services
            .tools
            .schemas()
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "parameters": t.parameters}))
            .collect();
        serde_json::to_string(&json!({"messages": messages, "tools": tools})).map(|s| s.len()).map_err(|e| e.to_string())
    }

    /// Cuts what a compaction appended, so every run starts from the same log.
    ///
    /// # Errors
    /// I/O errors.
    pub fn reset(&self) -> std::io::Result<()> {
        OpenOptions::new().write(true).open(&self.path)?.set_len(self.len)
    }
}

/// A session in the harness store (zstd, a frame per event, as the host's
/// default `--durability event` writes it) followed while a turn is in
/// progress, as `cordis web` follows it: each step appends one event and
/// [`cordis_session::SessionStore::read_since`] reads it.
pub struct HarnessFollow {
    store: cordis_session::HarnessStore,
    writer: Box<dyn cordis_session::store::LogWriter>,
    id: String,
    at: cordis_session::store::Position,
    seq: u64,
}

impl HarnessFollow {
    /// A log of `events` events (the workload's) copied into a harness
    /// store under `dir`, reopened for appending, a turn opened in it, and
    /// read once whole.
    ///
    /// # Errors
    /// Writing, copying or reading the log failed.
    pub fn new(dir: &Path, events: usize) -> Result<HarnessFollow, String> {
        use cordis_session::{HarnessStore, SessionStore};
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        let id = format!("follow-{events}");
        let flat = dir.join("flat.jsonl");
        workload::write_session_log(&flat, &id, events).map_err(|e| e.to_string())?;
        harness_copy(&flat, &dir.join("root"), cordis_session::Compression::Zstd)?;
        let store = HarnessStore::new(&dir.join("root"), cordis_session::Compression::Zstd, true).map_err(|e| e.to_string())?;
        let (writer, log) = store.open_for_append(&id, Durability::Event).map_err(|e| e.to_string())?;
        let seq = log.events.last().map_or(0, |e| e.seq + 1);
        let mut follow = HarnessFollow { store, writer, id, at: cordis_session::store::Position::start(), seq };
        follow.append("turn/start", json!({"turn": 1_000_000}))?;
        let (_, at) = follow.store.read_since(&follow.id, &follow.at).map_err(|e| e.to_string())?;
        follow.at = at;
        Ok(follow)
    }

    fn append(&mut self, kind: &str, data: Value) -> Result<(), String> {
        let line = json!({"seq": self.seq, "time": 1_790_000_000_000u64 + self.seq, "type": kind, "data": data});
        let log = format!("{{\"type\":\"session\",\"version\":0,\"id\":\"x\"}}\n{line}\n");
        let event = cordis_session::store::parse_log(log.as_bytes(), Path::new("x")).map_err(|e| e.to_string())?.events.remove(0);
        self.writer.append(&event).map_err(|e| e.to_string())?;
        self.seq += 1;
        Ok(())
    }

    /// Appends one `session/note` to the open turn (untimed), then times
    /// the read that follows it; fails unless that read is incremental
    /// and holds exactly the one event.
    ///
    /// # Errors
    /// The append or the read failed, or the read was whole.
    pub fn step(&mut self) -> Result<f64, String> {
        use cordis_session::store::Since;
        use cordis_session::SessionStore;
        self.append("session/note", json!({"n": self.seq}))?;
        let start = std::time::Instant::now();
        let (since, at) = self.store.read_since(&self.id, &self.at).map_err(|e| e.to_string())?;
        let took = start.elapsed().as_secs_f64();
        match since {
            Since::Appended(appended) if appended.events.len() == 1 => {}
            Since::Appended(appended) => return Err(format!("read {} events after one append", appended.events.len())),
            Since::Whole(_) => return Err("a turn in progress was read whole".into()),
        }
        self.at = at;
        Ok(took)
    }

    /// Times one whole read of the log, as each change cost before reads
    /// went on from where they stopped.
    ///
    /// # Errors
    /// The read failed.
    pub fn whole(&self) -> Result<f64, String> {
        use cordis_session::SessionStore;
        let start = std::time::Instant::now();
        std::hint::black_box(self.store.read(&self.id).map_err(|e| e.to_string())?);
        Ok(start.elapsed().as_secs_f64())
    }
}
