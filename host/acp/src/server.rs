//! One ACP connection: the requests it answers, its sessions, their
//! prompts.
//!
//! Lines are read on the calling thread; each `session/prompt` runs on a
//! thread of its own (the agent loop blocks), so `session/cancel` and
//! other sessions' requests are read while a turn runs. Everything a
//! prompt sends (its updates, its permission requests, its answer) comes
//! from its own thread in order, so every update of a turn reaches the
//! client before the prompt's answer.

use std::collections::HashMap;
use std::io::BufRead;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cordis_engine::agent::{Agent, Model, ScriptedModel, ServiceModel, TurnError};
use cordis_engine::loader::acp::AcpConfig;
use cordis_engine::runtime::Host;
use cordis_session::StoreError;
use cordis_sync::LockExt;
use serde_json::{json, Value};

use crate::live::Live;
use crate::mcp::{ServerReport, SessionTools};
use crate::prompt::{prompt_text, EditorApproval, Observer, Titles};
use crate::rpc::{classify, Incoming, Outgoing, RpcError, INVALID_REQUEST, MAX_LINE_BYTES, METHOD_NOT_FOUND, PARSE_ERROR, RESOURCE_NOT_FOUND};
use crate::updates::UpdateStream;

/// The protocol version spoken (ACP v1).
pub const PROTOCOL_VERSION: u64 = 1;

/// How long running turns get to close their logs after SIGTERM or SIGINT.
pub const STOP_GRACE: Duration = Duration::from_secs(3);

/// What `cordis acp` was started with.
#[derive(Debug, Clone, Default)]
pub struct AcpOptions {
    /// A scripted model (`--script FILE`) instead of the composition's
    /// `model` service; one script per session, its steps answered in
    /// order across the session's prompts.
    pub script: Option<PathBuf>,
    /// The composition's ACP entry (defaults when it has none).
    pub config: AcpConfig,
    /// The version reported in `agentInfo`.
    pub version: String,
}

/// The connection could not go on.
#[derive(Debug, thiserror::Error)]
pub enum AcpError {
    /// Reading the client's messages failed.
    #[error("cannot read from the client: {0}")]
    Read(#[from] std::io::Error),
}

/// Serves ACP on `input` and `out` until the input ends; prompts still
/// running are then cancelled and waited for.
///
/// # Errors
/// [`AcpError::Read`] when the input cannot be read.
pub fn serve(host: &Host, options: &AcpOptions, mut input: impl BufRead, out: Box<dyn std::io::Write + Send>) -> Result<(), AcpError> {
    let server = Server { host, options, out: Outgoing::new(out), sessions: Mutex::new(HashMap::new()) };
    let signalled = Arc::new(AtomicUsize::new(0));
    for (signal, code) in [(signal_hook::consts::SIGTERM, 143), (signal_hook::consts::SIGINT, 130)] {
        if let Err(e) = signal_hook::flag::register_usize(signal, signalled.clone(), code) {
            eprintln!("cordis acp: warning: cannot catch signal {signal} ({e}); it will end the process without closing running turns");
        }
    }
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| server.stop_on_signal(&signalled, &done));
        let result = server.read_all(scope, &mut input);
        done.store(true, Ordering::SeqCst);
        // The client left: running prompts stop, waiting questions end.
        for live in server.sessions.lock_or_recover().values() {
            live.interrupt.set();
        }
        server.out.abandon_all();
        result
    })
}

struct Server<'h> {
    host: &'h Host,
    options: &'h AcpOptions,
    out: Outgoing,
    sessions: Mutex<HashMap<String, Arc<Live>>>,
}

impl<'h> Server<'h> {
    /// On SIGTERM or SIGINT: every running turn is cancelled and closed in
    /// its log (at most [`STOP_GRACE`] is waited for), then the process
    /// exits with 128 + the signal's number. Returns when `done` is set.
    fn stop_on_signal(&self, signalled: &AtomicUsize, done: &AtomicBool) {
        while !done.load(Ordering::SeqCst) {
            let code = signalled.load(Ordering::SeqCst);
            if code != 0 {
                let lives: Vec<Arc<Live>> = self.sessions.lock_or_recover().values().cloned().collect();
                for live in &lives {
                    live.interrupt.set();
                }
                self.out.abandon_all();
                let until = Instant::now() + STOP_GRACE;
                while lives.iter().any(|l| l.running.load(Ordering::SeqCst)) && Instant::now() < until {
                    std::thread::sleep(Duration::from_millis(5));
                }
                std::process::exit(i32::try_from(code).unwrap_or(1));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn read_all<'s>(&'s self, scope: &'s std::thread::Scope<'s, '_>, input: &mut impl BufRead) -> Result<(), AcpError> {
        let mut buf = Vec::new();
        loop {
            buf.clear();
            let n = std::io::Read::take(&mut *input, MAX_LINE_BYTES as u64 + 1).read_until(b'\n', &mut buf)?;
            if n == 0 {
                return Ok(());
            }
            if buf.len() > MAX_LINE_BYTES && buf.last() != Some(&b'\n') {
                // Skip the rest of the line, then say why.
                let mut rest = Vec::new();
                input.read_until(b'\n', &mut rest)?;
                let error = RpcError::new(PARSE_ERROR, format!("the line is longer than {MAX_LINE_BYTES} bytes"));
                self.out.fail(&Value::Null, &error);
                continue;
            }
            let line = match std::str::from_utf8(&buf) {
                Ok(l) => l,
                Err(e) => {
                    self.out.fail(&Value::Null, &RpcError::new(PARSE_ERROR, format!("the line is not UTF-8: {e}")));
                    continue;
                }
            };
            match classify(line) {
                Incoming::Request { id, method, params } => self.request(scope, id, &method, params),
                Incoming::Notification { method, params } => self.notification(&method, &params),
                Incoming::Response { id, outcome } => self.out.answer(id, outcome),
                Incoming::Invalid { id, error } => self.out.fail(&id, &error),
                Incoming::Nothing => {}
            }
        }
    }

    fn request<'s>(&'s self, scope: &'s std::thread::Scope<'s, '_>, id: Value, method: &str, params: Value) {
        // Opening a session with MCP servers waits for them (up to 10 s):
        // on a thread of its own, so that cancels and other sessions'
        // requests are read meanwhile; it answers itself. Without servers
        // it is quick and answered in order.
        let has_servers = params["mcpServers"].as_array().is_some_and(|l| !l.is_empty());
        if has_servers && matches!(method, "session/new" | "session/load" | "session/resume") {
            let method = method.to_string();
            scope.spawn(move || {
                let answer = match method.as_str() {
                    "session/new" => self.new_session(&params),
                    "session/load" => self.load(&params, true),
                    _ => self.load(&params, false),
                };
                match answer {
                    Ok(result) => self.out.respond(&id, result),
                    Err(error) => self.out.fail(&id, &error),
                }
            });
            return;
        }
        let answer = match method {
            "initialize" => Ok(self.initialize(&params)),
            "authenticate" => Ok(json!({})),
            // A cancel sent as a request is still a cancel.
            "session/cancel" => {
                self.notification(method, &params);
                Ok(json!({}))
            }
            "session/new" => self.new_session(&params),
            "session/load" => self.load(&params, true),
            "session/resume" => self.load(&params, false),
            "session/list" => self.list(&params),
            "session/close" => self.close(&params),
            "session/prompt" => match self.start_prompt(scope, id.clone(), &params) {
                // The prompt's thread answers.
                Ok(()) => return,
                Err(e) => Err(e),
            },
            other => Err(RpcError::new(METHOD_NOT_FOUND, format!("`{other}` is not a method of this agent"))),
        };
        match answer {
            Ok(result) => self.out.respond(&id, result),
            Err(error) => self.out.fail(&id, &error),
        }
    }

    fn notification(&self, method: &str, params: &Value) {
        if method == "session/cancel" {
            if let Some(live) = params["sessionId"].as_str().and_then(|id| self.sessions.lock_or_recover().get(id).cloned()) {
                live.interrupt.set();
            }
        }
    }

    fn initialize(&self, params: &Value) -> Value {
        // Version 1 is the one spoken here: a client asking for another
        // (newer, or the pre-release 0) gets 1 and may then disconnect.
        let _asked = &params["protocolVersion"];
        json!({
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": true,
                "promptCapabilities": {"image": false, "audio": false, "embeddedContext": true},
                "mcpCapabilities": {"http": true, "sse": false},
                "sessionCapabilities": {"list": {}, "close": {}, "resume": {}},
            },
            "agentInfo": {"name": "cordis", "title": "cordis", "version": self.options.version},
            "authMethods": [],
        })
    }

    fn new_session(&self, params: &Value) -> Result<Value, RpcError> {
        let cwd = absolute_cwd(params)?;
        let session = self.host.services.sessions.create(Some(cwd.clone())).map_err(|e| RpcError::internal(e.to_string()))?;
        let id = session.id().to_string();
        let (servers, reports) = self.servers(&id, params, &cwd)?;
        self.sessions.lock_or_recover().insert(id.clone(), Arc::new(Live::new(session, cwd, servers)));
        Ok(with_reports(json!({"sessionId": id}), &reports))
    }

    /// Starts the MCP servers `params` pass for session `id`; each that
    /// does not connect is said on stderr.
    fn servers(&self, id: &str, params: &Value, cwd: &str) -> Result<(Option<SessionTools>, Vec<ServerReport>), RpcError> {
        let Some((tools, reports)) = crate::mcp::start(self.host, &params["mcpServers"], cwd)? else { return Ok((None, Vec::new())) };
        for r in reports.iter().filter(|r| !r.ok) {
            eprintln!("cordis acp: session {id}: MCP server {} did not start: {}", r.name, r.status);
        }
        Ok((Some(tools), reports))
    }

    /// `session/load` (`replay`: every stored event is sent as updates
    /// before the answer) and `session/resume` (none is).
    fn load(&self, params: &Value, replay: bool) -> Result<Value, RpcError> {
        let id = session_id(params)?;
        let cwd = absolute_cwd(params)?;
        let carried = {
            let mut sessions = self.sessions.lock_or_recover();
            if sessions.get(id).is_some_and(|live| live.running.load(Ordering::SeqCst)) {
                let what = if replay { "load" } else { "resume" };
                return Err(RpcError::new(INVALID_REQUEST, format!("session {id} is running a prompt; {what} it when the prompt has ended")));
            }
            // Loaded again on this connection: its writer (and its servers)
            // are let go first, so the store's lock is free to take again;
            // its model and the user's standing answers carry over.
            sessions.remove(id)
        };
        let carried = carried.map(|old| (old.model.lock_or_recover().take(), std::mem::take(&mut *old.decided.lock_or_recover())));
        let (session, problems) = self.host.services.sessions.open(id).map_err(|e| store_error(id, e))?;
        for p in &problems {
            eprintln!("cordis acp: warning: session {id}: {p}");
        }
        // A compaction a stopped process cut short is closed first.
        if let Err(e) = cordis_engine::agent::compaction::close_cut_short(&session, &mut cordis_engine::agent::Quiet) {
            return Err(RpcError::internal(format!("session {id}: {e}")));
        }
        let mut stream = UpdateStream::replay();
        if replay {
            let titles = Titles(&self.host.services.tools);
            // Read in place, sent in batches of 256 updates: a long session
            // is neither copied, nor one write per update, nor one buffer
            // of all of them. No prompt of this session runs meanwhile.
            session.with_events(|events| {
                let mut batch = Vec::with_capacity(256);
                for event in events {
                    for update in stream.updates(event, &titles) {
                        batch.push(json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": id, "update": update}}));
                        if batch.len() == 256 {
                            self.out.send_all(&batch);
                            batch.clear();
                        }
                    }
                }
                self.out.send_all(&batch);
            });
        }
        let (servers, reports) = self.servers(id, params, &cwd)?;
        let live = Live::new(session, cwd, servers);
        let shown = if replay {
            stream.plan_shown()
        } else {
            // Resumed without a replay: the editor shows the plan it had,
            // which is the log's last one (a new turn's start clears it).
            live.session.with_events(|events| {
                events
                    .iter()
                    .rev()
                    .find(|e| e.kind == "turn/start" || e.kind == crate::updates::TODO_WRITE)
                    .is_some_and(|e| e.kind != "turn/start" && e.data_value()["todos"].as_array().is_some_and(|t| !t.is_empty()))
            })
        };
        live.plan_shown.store(shown, Ordering::SeqCst);
        if let Some((model, decided)) = carried {
            *live.model.lock_or_recover() = model;
            *live.decided.lock_or_recover() = decided;
        }
        self.sessions.lock_or_recover().insert(id.to_string(), Arc::new(live));
        Ok(with_reports(json!({}), &reports))
    }

    fn list(&self, params: &Value) -> Result<Value, RpcError> {
        let (infos, skipped) = self.host.services.sessions.list().map_err(|e| RpcError::internal(e.to_string()))?;
        for s in &skipped {
            eprintln!("cordis acp: {s}");
        }
        let only = params["cwd"].as_str();
        let mut sessions: Vec<Value> = infos
            .into_iter()
            .filter(|s| only.is_none() || s.cwd.as_deref() == only)
            .map(|s| {
                let mut info = json!({
                    "sessionId": s.id,
                    "cwd": s.cwd.unwrap_or_else(|| "/".into()),
                    "updatedAt": rfc3339(if s.last_time > 0 { s.last_time } else { i64::try_from(s.created_at).unwrap_or(0) }),
                });
                if let Some(title) = s.title {
                    info["title"] = json!(title);
                }
                info
            })
            .collect();
        // Most recently updated first, as an editor's history shows them
        // (RFC 3339 in UTC sorts as text).
        sessions.sort_by(|a, b| b["updatedAt"].as_str().cmp(&a["updatedAt"].as_str()));
        Ok(json!({"sessions": sessions}))
    }

    fn close(&self, params: &Value) -> Result<Value, RpcError> {
        let id = session_id(params)?;
        let Some(live) = self.sessions.lock_or_recover().remove(id) else {
            return Err(RpcError::new(RESOURCE_NOT_FOUND, format!("session {id} is not open on this connection")));
        };
        live.interrupt.set();
        let until = Instant::now() + Duration::from_secs(10);
        while live.running.load(Ordering::SeqCst) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(json!({}))
    }

    fn start_prompt<'s>(&'s self, scope: &'s std::thread::Scope<'s, '_>, id: Value, params: &Value) -> Result<(), RpcError> {
        let session = session_id(params)?;
        let text = prompt_text(&params["prompt"])?;
        let live = self.sessions.lock_or_recover().get(session).cloned().ok_or_else(|| {
            RpcError::new(RESOURCE_NOT_FOUND, format!("session {session} is not open: create it with session/new or open it with session/load"))
        })?;
        if live.running.swap(true, Ordering::SeqCst) {
            return Err(RpcError::new(INVALID_REQUEST, format!("session {session} is already running a prompt; cancel it or wait for its answer")));
        }
        // Armed here, before the thread starts, so a cancel that arrives
        // at once is not lost.
        let armed = live.interrupt.arm();
        scope.spawn(move || {
            let answer = self.run_prompt(&live, &text);
            drop(armed);
            live.running.store(false, Ordering::SeqCst);
            match answer {
                Ok(result) => self.out.respond(&id, result),
                Err(error) => self.out.fail(&id, &error),
            }
        });
        Ok(())
    }

    fn run_prompt(&self, live: &Live, text: &str) -> Result<Value, RpcError> {
        let mut slot = live.model.lock_or_recover();
        if slot.is_none() {
            *slot = Some(self.model()?);
        }
        let Some(model) = slot.as_mut() else { return Err(RpcError::internal("no model")) };
        let model_name = model.name().to_string();
        let tools = live.tools(self.host);
        let titles = Titles(&tools);
        let approval = EditorApproval { out: &self.out, live, config: &self.options.config, titles: &titles };
        let mut observer = Observer::new(&self.out, live, &self.options.config, &titles);
        let mut agent = Agent::new(live.session.clone(), tools.clone(), model.as_mut())
            .with_turn_hooks(self.host.services.turn_hooks.clone())
            .with_interrupt(live.interrupt.clone())
            .with_compaction(self.host.compaction.clone())
            .with_approver(&approval)
            .with_system_prompt(self.options.config.persona_for(&model_name, &live.cwd));
        let result = agent.run_turn(text, &mut observer);
        match result {
            Ok(summary) => {
                let reason = if summary.finish.as_deref() == Some("length") { "max_tokens" } else { "end_turn" };
                Ok(json!({"stopReason": reason}))
            }
            Err(TurnError::Interrupted) => Ok(json!({"stopReason": "cancelled"})),
            Err(TurnError::TooManySteps) => Ok(json!({"stopReason": "max_turn_requests"})),
            Err(e @ TurnError::Model(_)) => Err(RpcError::internal(e.to_string())),
            Err(e @ TurnError::Append(_)) => Err(RpcError::internal(e.to_string())),
        }
    }

    /// The model of a new session: the script given, else the
    /// composition's `model` service.
    fn model(&self) -> Result<Box<dyn Model + Send>, RpcError> {
        if let Some(path) = &self.options.script {
            return Ok(Box::new(ScriptedModel::from_file(path).map_err(|e| RpcError::internal(e.to_string()))?));
        }
        match ServiceModel::from_composition(&self.host.services.registry) {
            Ok(Some(m)) => Ok(Box::new(m)),
            Ok(None) => Err(RpcError::internal(
                "the composition provides no `model` service: add a provider entry (e.g. llm-openai) or start `cordis acp --script FILE`",
            )),
            Err(e) => Err(RpcError::internal(e.to_string())),
        }
    }
}

fn session_id(params: &Value) -> Result<&str, RpcError> {
    params["sessionId"].as_str().ok_or_else(|| RpcError::params("`sessionId` (a string) is required"))
}

fn absolute_cwd(params: &Value) -> Result<String, RpcError> {
    let cwd = params["cwd"].as_str().ok_or_else(|| RpcError::params("`cwd` (an absolute path) is required"))?;
    if !std::path::Path::new(cwd).is_absolute() {
        return Err(RpcError::params(format!("`cwd` must be an absolute path, not `{cwd}`")));
    }
    if !std::path::Path::new(cwd).is_dir() {
        return Err(RpcError::params(format!("`cwd` {cwd} is not a folder")));
    }
    Ok(cwd.to_string())
}

/// `result` with what became of the session's MCP servers, under
/// `_meta` (`cordis/mcpServers`: name, connected, status), when it has any.
fn with_reports(mut result: Value, reports: &[ServerReport]) -> Value {
    if !reports.is_empty() {
        result["_meta"] = json!({"cordis/mcpServers": reports.iter().map(ServerReport::to_value).collect::<Vec<_>>()});
    }
    result
}

fn store_error(id: &str, e: StoreError) -> RpcError {
    match e {
        StoreError::NotFound { .. } | StoreError::BadId(_) | StoreError::BadIdFor { .. } => {
            let mut error = RpcError::new(RESOURCE_NOT_FOUND, e.to_string());
            error.data = Some(json!({"sessionId": id}));
            error
        }
        other => RpcError::internal(other.to_string()),
    }
}

/// `ms` since the epoch as RFC 3339 (`2026-12-04T13:03:36Z`).
fn rfc3339(ms: i64) -> String {
    cordis_session::event::format_utc(ms).replacen(' ', "T", 1).replace(" UTC", "Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339() {
        assert_eq!(rfc3339(1_785_987_077_399), "2026-08-06T03:31:17Z");
    }

    #[test]
    fn cwd_must_be_absolute() {
        assert!(absolute_cwd(&json!({"cwd": "/"})).is_ok());
        assert_eq!(absolute_cwd(&json!({"cwd": "/no/such/folder"})).unwrap_err().code, crate::rpc::INVALID_PARAMS);
        assert_eq!(absolute_cwd(&json!({"cwd": "work"})).unwrap_err().code, crate::rpc::INVALID_PARAMS);
        assert_eq!(absolute_cwd(&json!({})).unwrap_err().code, crate::rpc::INVALID_PARAMS);
    }
}
