//! One MCP connection as an agent session.
//!
//! **A turn per connection.** A connection's first `tools/call` opens a turn
//! (`turn/start`) in its session; every call is one model step of that turn
//! (`step/start`, `assistant/message` naming the call, `tool/call`, the
//! events the tool appends such as `todo/write`, `tool/result`,
//! `step/end`), exactly the shapes the agent loop writes; the turn ends
//! (`turn/end`, reason `completed`) when the connection closes: the client
//! closed stdin or exited, an HTTP client ended its MCP session, or the
//! session expired. The plan therefore lives as long as the connection, and
//! the next connection to the same session starts a new turn, as the next
//! `cordis run --session` would.
//!
//! Calls of one connection run one at a time, each whole (its events are
//! written by a blocking thread that finishes the call even when the client
//! goes away mid-call), and closing waits for the call in flight; so a
//! client that disconnects or is killed mid-call leaves a well-formed log
//! whose last call has its result. A server process that is itself killed
//! leaves its turn open, and the next `cordis run --session` or
//! `cordis mcp --session` closes it as `interrupted` (unanswered calls get
//! `TOOL_OUTCOME_UNKNOWN` results), as after any crash.

use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use serde_json::json;

use super::{McpError, Shared};
use cordis_engine::agent::{call_tool, close_open_step, Quiet, ToolCallRequest};
use cordis_engine::tools::ToolResult;
use cordis_session::{AppendError, Appender, Event, Session};
use cordis_sync::LockExt;

/// Who is on the other end, from the `initialize` request.
#[derive(Debug, Clone, Default)]
pub struct ClientName {
    /// `clientInfo.name`.
    pub name: String,
    /// `clientInfo.version`.
    pub version: String,
}

#[derive(Default)]
struct TurnState {
    /// The turn this connection opened, while it is open.
    turn: Option<u64>,
    /// The connection has closed: no more calls.
    closed: bool,
}

/// One connection: its agent session (attached at `initialize`), its turn,
/// and the client's name.
pub struct Connection {
    /// A number unique in this process (subscriptions are kept per
    /// connection).
    pub id: u64,
    shared: Arc<Shared>,
    session: OnceLock<Arc<Session>>,
    client: OnceLock<ClientName>,
    /// Held for each whole call and by [`Connection::close`].
    turn: Mutex<TurnState>,
    /// The id of the call running now, for [`Connection::cancel_call`].
    current: Mutex<Option<String>>,
}

/// What one recorded call produced.
#[derive(Debug)]
pub struct CallOutcome {
    /// The tool's result, as the registry returned it.
    pub result: ToolResult,
    /// The types of the events the tool itself appended (e.g. `todo/write`).
    pub appended: Vec<String>,
}

impl Connection {
    /// A connection with no session yet.
    pub fn new(shared: Arc<Shared>) -> Connection {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Connection {
            id: NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            shared,
            session: OnceLock::new(),
            client: OnceLock::new(),
            turn: Mutex::new(TurnState::default()),
            current: Mutex::new(None),
        }
    }

    /// Cancels the call running now, if it can be cancelled (a call to a
    /// tool source's tool, such as an MCP server's): it returns at once
    /// with an error result giving `reason`. Used when the client cancels
    /// the request or goes away.
    pub fn cancel_call(&self, reason: &str) {
        let current = self.current.lock_or_recover().clone();
        if let Some(id) = current {
            self.shared.tools.cancel_calls(|_, call| call == id, reason);
        }
    }

    fn lock(&self) -> MutexGuard<'_, TurnState> {
        self.turn.lock_or_recover()
    }

    /// The connection's session, once attached.
    pub fn session(&self) -> Option<&Arc<Session>> {
        self.session.get()
    }

    /// Attaches the connection's session (a new one, or the `--session`
    /// one when no other connection holds it) and records the client's
    /// name. A second `initialize` on one connection keeps the first
    /// session.
    ///
    /// # Errors
    /// [`McpError::Busy`] when `--session` is held by another connection;
    /// [`McpError::Store`] when a new session cannot be created.
    pub fn attach(&self, client: ClientName) -> Result<Arc<Session>, McpError> {
        let _ = self.client.set(client);
        if let Some(s) = self.session.get() {
            return Ok(s.clone());
        }
        let session = self.shared.attach_session(self.id)?;
        let _ = self.session.set(session.clone());
        Ok(session)
    }

    fn require_session(&self) -> Result<&Arc<Session>, McpError> {
        match self.session.get() {
            Some(s) => Ok(s),
            None => {
                // A client that calls before `initialize` completes (or a
                // transport that skips it) still gets a session of its own.
                self.attach(ClientName::default())?;
                self.session.get().ok_or(McpError::Closed)
            }
        }
    }

    /// Runs one tool call as the session's agent and records it (see the
    /// module docs). Blocking: it writes durably; call it off the async
    /// workers.
    ///
    /// # Errors
    /// [`McpError::Closed`] after [`Connection::close`]; [`McpError::Log`]
    /// when the session log refuses an event (the call may then be recorded
    /// in part, as after a crash: the next open repairs the step).
    pub fn call(&self, name: &str, arguments: &str) -> Result<CallOutcome, McpError> {
        let session = self.require_session()?.clone();
        let mut state = self.lock();
        if state.closed {
            return Err(McpError::Closed);
        }
        let mut seen = Appended::default();
        let turn = match state.turn {
            Some(t) if session.open_turn() == Some(t) => t,
            _ => {
                let t = open_turn(&session)?;
                // Projections see the turn boundary (the plan is cleared).
                seen.kinds.extend(["turn/end".to_string(), "turn/start".to_string()]);
                state.turn = Some(t);
                t
            }
        };
        // A step left open by a call that failed half-way is ended first
        // (its calls answered), as the log's structure rules require.
        close_open_step(&session, &mut Quiet)?;
        let step = u32::try_from(session.next_step()).unwrap_or(u32::MAX);
        let call = ToolCallRequest { id: format!("mcp_{turn}_{step}"), name: name.to_string(), arguments: arguments.to_string() };
        let client = self.client.get().cloned().unwrap_or_default();
        session.append_value("step/start", &json!({"turn": turn, "step": step}), Appender::Host)?;
        session.append_value(
            "assistant/message",
            &json!({"turn": turn, "step": step, "message": {
                "role": "assistant",
                "content": [{"type": "tool-call", "id": call.id, "name": call.name, "arguments": call.arguments}],
                "source": {"kind": "mcp", "client": client.name, "clientVersion": client.version},
                "id": uuid::Uuid::new_v4().to_string(),
            }}),
            Appender::Host,
        )?;
        *self.current.lock_or_recover() = Some(call.id.clone());
        let result = call_tool(&session, &self.shared.tools, turn, step, &call, &mut seen);
        *self.current.lock_or_recover() = None;
        let result = result?;
        session.append_value("step/end", &json!({"turn": turn, "step": step}), Appender::Host)?;
        Ok(CallOutcome { result, appended: seen.kinds })
    }

    /// Ends the connection: cancels a call in flight that can be cancelled
    /// and waits for it, ends the turn it
    /// opened (`turn/end`, reason `completed`), and releases a `--session`
    /// session for the next connection. Idempotent.
    pub fn close(&self) {
        self.cancel_call("the MCP connection closed");
        let mut state = self.lock();
        if state.closed {
            return;
        }
        state.closed = true;
        let Some(session) = self.session.get() else { return };
        if let Some(turn) = state.turn.take().filter(|t| session.open_turn() == Some(*t)) {
            let ended = close_open_step(session, &mut Quiet).and_then(|()| {
                session
                    .append_value(
                        "turn/end",
                        &json!({"turn": turn, "reason": {"kind": "completed", "message": "the MCP connection closed"}}),
                        Appender::Host,
                    )
                    .map(|_| ())
            });
            if let Err(e) = ended {
                tracing::warn!("session {}: the turn of the closed MCP connection could not be ended: {e}", session.id());
            }
        }
        self.shared.release_session(self.id);
        self.shared.hub.forget(self.id);
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.close();
    }
}

/// Opens a new turn in `session`, first closing a turn an earlier process
/// left open (reason `interrupted`, as the agent loop does).
fn open_turn(session: &Arc<Session>) -> Result<u64, AppendError> {
    if let Some(open) = session.open_turn() {
        close_open_step(session, &mut Quiet)?;
        session.append_value("turn/end", &json!({"turn": open, "reason": {"kind": "interrupted"}}), Appender::Host)?;
    }
    let turn = session.next_turn();
    session.append_value("turn/start", &json!({"turn": turn}), Appender::Host)?;
    Ok(turn)
}

/// Collects the types of the events a tool appended.
#[derive(Default)]
struct Appended {
    kinds: Vec<String>,
}

impl cordis_engine::agent::TurnObserver for Appended {
    fn on_event(&mut self, _session: &Session, event: &Event) {
        if !matches!(event.kind.as_str(), "tool/call" | "tool/result") {
            self.kinds.push(event.kind.clone());
        }
    }
}
