//! The `tools` service: the registry of model-facing tools and the execute
//! pipeline.
//!
//! Pipeline for one call: look the tool up (an unknown name is an
//! error result) → cap the argument text at [`MAX_ARGUMENT_BYTES`] → parse
//! the text, require an object and check it against the parameter schema the
//! tool declared (every violation, with its path, in one error; the schema is
//! compiled at the tool's first call) → hand the raw text to the tool, whose
//! SDK side parses it straight into the tool's typed arguments → any failure
//! becomes `{isError: true, text: "Error: ..."}`. The schema check is the
//! host's, so plugin libraries carry no JSON Schema validator (cordis-abi
//! 0.3).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockWriteGuard, TryLockError};
use std::time::{Duration, Instant};

use abi_stable::{
    sabi_trait::TD_Opaque,
    std_types::{RErr, ROk, RResult, RStr, RString},
};
use cordis_abi::ffi::{ExecContext, ExecContext_TO, ToolBox};
use cordis_abi::JsonStr;
use serde::Serialize;

use cordis_session::json::RawJson;
use serde_json::Value;

use cordis_session::Owner;
use cordis_session::{Appender, Session};
use cordis_sync::{LockExt, RwLockExt};

/// The largest argument text a tool call may carry, in bytes (1 MiB). Larger
/// calls are rejected before any plugin code runs.
pub const MAX_ARGUMENT_BYTES: usize = 1024 * 1024;

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSchema {
    /// The name the model calls.
    pub name: String,
    /// The model-facing description.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: Value,
    /// JSON Schema of the structured value a successful call returns, when
    /// the tool declares one (an object schema).
    #[serde(rename = "outputSchema", skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
}

/// The result of one call.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResult {
    /// Whether the call failed.
    pub is_error: bool,
    /// The text for the model; `Error: ...` on failure.
    pub text: String,
    /// The structured value on success, as the JSON text the tool sent
    /// (JSON by construction, see [`cordis_abi::json`]; not parsed: most
    /// callers only pass it on; see [`ToolResult::value`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<RawJson>,
    /// Whether the session log keeps `value` with the result: true for
    /// the tools of a tool source (`tools.dynamic`: an MCP tool's
    /// `structuredContent`, which nothing else records), false for a
    /// plugin's own tools, whose value the log's events already hold.
    #[serde(skip)]
    pub value_in_log: bool,
}

impl ToolResult {
    /// The structured value, parsed: `Ok(None)` when there is none.
    ///
    /// # Errors
    /// The parser's message when `serde_json` cannot read it into a
    /// `Value` (the SDK refuses such values when a tool makes them; a
    /// library built otherwise could still send one).
    pub fn parsed_value(&self) -> Result<Option<Value>, String> {
        self.value.as_ref().map(RawJson::to_value).transpose().map_err(|e| e.to_string())
    }

    /// The structured value, parsed; `None` when there is none or it
    /// cannot be read (see [`ToolResult::parsed_value`]).
    pub fn value(&self) -> Option<Value> {
        self.parsed_value().ok().flatten()
    }

    /// An error result with text `Error: <message>`.
    pub fn error(message: impl std::fmt::Display) -> ToolResult {
        ToolResult { is_error: true, text: format!("Error: {message}"), value: None, value_in_log: false }
    }
}

/// One call to execute.
#[derive(Debug, Clone)]
pub struct ToolCall<'a> {
    /// The model's id for the call.
    pub id: &'a str,
    /// The tool's name.
    pub name: &'a str,
    /// The raw JSON text of the arguments, as the model sent it.
    pub arguments: &'a str,
}

/// A registered tool.
pub struct RegisteredTool {
    /// Its schema, read once at registration.
    pub schema: ToolSchema,
    /// Who registered it.
    pub owner: Owner,
    token: u64,
    tool: ToolBox,
    /// A tool source's tool: its values are kept in the log.
    from_source: bool,
    /// The parameter schema, compiled at the first call.
    checker: std::sync::OnceLock<Result<cordis_abi::schema::Checker, String>>,
}

impl RegisteredTool {
    /// The tool's card for a call (`presentCall`), as JSON.
    pub fn present_call(&self, arguments: &str) -> Value {
        let text = self.tool.present_call(arguments.into());
        serde_json::from_str(text.as_str()).unwrap_or(Value::Null)
    }
}

/// A registration failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RegisterError {
    /// The name is taken.
    #[error("a tool named `{name}` is already registered by {owner}")]
    Duplicate {
        /// The name.
        name: String,
        /// Who has it.
        owner: String,
    },
    /// The tool's declared schema is unusable.
    #[error("tool `{name}` declares parameters that are not a JSON Schema object")]
    BadSchema {
        /// The name.
        name: String,
    },
    /// The name is empty or malformed.
    #[error("tool name `{0}` is invalid: use 1-64 letters, digits, `_` or `-`")]
    BadName(String),
}

static NEXT_TOKEN: AtomicU64 = AtomicU64::new(1);

/// The tool registry.
#[derive(Default)]
pub struct ToolRegistry {
    tools: RwLock<BTreeMap<String, Arc<RegisteredTool>>>,
    /// Held shared by every call for its whole duration and exclusively by
    /// a swap (hot reload): calls in flight finish on the version that
    /// started them, calls that arrive during a swap wait for it, and no
    /// call sees a half-registered set of tools.
    gate: RwLock<()>,
    /// The last status each entry's tool source reported (`tools.dynamic`),
    /// by entry id, with the token of the source that reported it.
    sources: RwLock<BTreeMap<String, (u64, SourceStatus)>>,
    /// The calls in flight that can be cancelled, by token.
    cancellable: Mutex<BTreeMap<u64, Arc<Cancellable>>>,
    /// The registry this one layers over ([`ToolRegistry::over`]): its
    /// tools are this one's too.
    parent: Option<Arc<ToolRegistry>>,
}

thread_local! {
    /// The session whose call this thread is executing, for the calls
    /// listed as cancellable while it runs.
    static CALLING_SESSION: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// A call in flight that can be cancelled: a call to a tool of a tool
/// source (`tools.dynamic`), which passes the cancellation on to the
/// source (`cancel`), which answers the call at once.
struct Cancellable {
    entry: String,
    call_id: String,
    /// The calling session's id, when an agent is calling.
    session: Option<String>,
    cancel: Box<dyn Fn(&str) + Send + Sync>,
}

/// Keeps a call listed as cancellable until it is dropped (the call has
/// returned).
pub struct CancellableCall<'a> {
    registry: &'a ToolRegistry,
    token: u64,
}

impl Drop for CancellableCall<'_> {
    fn drop(&mut self) {
        self.registry.cancellable.lock_or_recover().remove(&self.token);
    }
}

/// What a tool source (`tools.dynamic`) last said of itself: its `status`
/// line and `statusLevel` (`info`, `warn` or `error`), for example
/// `mcp-client(fs): connected, 3 tools` at `info`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourceStatus {
    /// `info`, `warn` or `error`.
    pub level: String,
    /// The status line, as the source wrote it.
    pub text: String,
}

impl ToolRegistry {
    /// A registry layered over `parent`: it holds tools of its own (one
    /// session's, say), and every tool of `parent` is found, listed and
    /// executed through it too. A tool of its own cannot take the name of
    /// one of `parent`'s.
    pub fn over(parent: Arc<ToolRegistry>) -> ToolRegistry {
        ToolRegistry { parent: Some(parent), ..ToolRegistry::default() }
    }

    /// A token for [`ToolRegistry::set_source_status`]: one per tool source.
    pub fn source_token() -> u64 {
        NEXT_TOKEN.fetch_add(1, Ordering::Relaxed)
    }

    /// Records the status of the tool source `token` of entry `entry`,
    /// replacing whatever an earlier source of that entry reported.
    pub fn set_source_status(&self, entry: &str, token: u64, status: SourceStatus) {
        self.sources.write_or_recover().insert(entry.to_string(), (token, status));
    }

    /// Forgets the status of entry `entry` if source `token` reported it
    /// (a newer source of the same entry, started by a reload, keeps its
    /// own).
    pub fn clear_source_status(&self, entry: &str, token: u64) {
        let mut sources = self.sources.write_or_recover();
        if sources.get(entry).is_some_and(|(t, _)| *t == token) {
            sources.remove(entry);
        }
    }

    /// The last status the tool source of entry `entry` reported, if the
    /// entry has a running source that reported one.
    pub fn source_status(&self, entry: &str) -> Option<SourceStatus> {
        self.sources.read_or_recover().get(entry).map(|(_, s)| s.clone())
    }

    /// Registers `tool` for `owner`; returns a token for [`ToolRegistry::unregister`].
    ///
    /// # Errors
    /// [`RegisterError`] on a duplicate name, a bad name or a bad schema.
    pub fn register(&self, tool: ToolBox, owner: Owner) -> Result<(String, u64), RegisterError> {
        self.register_as(tool, owner, false)
    }

    /// [`ToolRegistry::register`] for a tool of a tool source
    /// (`tools.dynamic`), whose structured values the session log keeps.
    ///
    /// # Errors
    /// As [`ToolRegistry::register`].
    pub fn register_source_tool(&self, tool: ToolBox, owner: Owner) -> Result<(String, u64), RegisterError> {
        self.register_as(tool, owner, true)
    }

    fn register_as(&self, tool: ToolBox, owner: Owner, from_source: bool) -> Result<(String, u64), RegisterError> {
        let name = tool.name().to_string();
        if name.is_empty() || name.len() > 64 || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            return Err(RegisterError::BadName(name));
        }
        let parameters: Value = serde_json::from_str(tool.parameters().as_str()).unwrap_or(Value::Null);
        if !parameters.is_object() {
            return Err(RegisterError::BadSchema { name });
        }
        let description = tool.description().to_string();
        if let Some(existing) = self.parent.as_ref().and_then(|p| p.get(&name)) {
            return Err(RegisterError::Duplicate { name, owner: existing.owner.to_string() });
        }
        let mut tools = self.tools.write_or_recover();
        if let Some(existing) = tools.get(&name) {
            return Err(RegisterError::Duplicate { name, owner: existing.owner.to_string() });
        }
        let token = NEXT_TOKEN.fetch_add(1, Ordering::Relaxed);
        let output = serde_json::from_str::<Value>(tool.output_schema().as_str()).ok().filter(Value::is_object);
        let schema = ToolSchema { name: name.clone(), description, parameters, output };
        tools.insert(name.clone(), Arc::new(RegisteredTool { schema, owner, token, tool, from_source, checker: std::sync::OnceLock::new() }));
        Ok((name, token))
    }

    /// Removes the tool registered under `token` (no-op if it is gone).
    pub fn unregister(&self, name: &str, token: u64) {
        let mut tools = self.tools.write_or_recover();
        if tools.get(name).is_some_and(|t| t.token == token) {
            tools.remove(name);
        }
    }

    /// Every tool's schema, sorted by name.
    pub fn schemas(&self) -> Vec<ToolSchema> {
        let mut all: Vec<ToolSchema> = self.tools.read_or_recover().values().map(|t| t.schema.clone()).collect();
        if let Some(parent) = &self.parent {
            all.extend(parent.schemas());
            all.sort_by(|a, b| a.name.cmp(&b.name));
        }
        all
    }

    /// The registered tool named `name`.
    pub fn get(&self, name: &str) -> Option<Arc<RegisteredTool>> {
        let own = self.tools.read_or_recover().get(name).cloned();
        own.or_else(|| self.parent.as_ref().and_then(|p| p.get(name)))
    }

    /// Blocks calls until the guard is dropped, after the calls in flight
    /// have finished. Used while fibers are swapped.
    pub fn exclusive(&self) -> std::sync::RwLockWriteGuard<'_, ()> {
        self.gate.write_or_recover()
    }

    /// [`ToolRegistry::exclusive`] for a swap of `entries`: their calls in
    /// flight that can be cancelled are cancelled at once; the other
    /// entries' calls get `grace` to finish, and those that can be
    /// cancelled are cancelled then. Only calls that cannot be cancelled
    /// (a plugin's own tool) are waited for to the end.
    pub fn exclusive_for(&self, entries: &[String], grace: Duration) -> RwLockWriteGuard<'_, ()> {
        self.cancel_calls(|entry, _| entries.iter().any(|e| e == entry), "its entry is being reloaded");
        let start = Instant::now();
        loop {
            match self.gate.try_write() {
                Ok(guard) => return guard,
                Err(TryLockError::Poisoned(poisoned)) => return poisoned.into_inner(),
                Err(TryLockError::WouldBlock) if start.elapsed() >= grace => break,
                Err(TryLockError::WouldBlock) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
        self.cancel_calls(|_, _| true, "cordis is reloading");
        self.exclusive()
    }

    /// Lists a call of entry `entry` as cancellable by `cancel` (given the
    /// reason) until the guard is dropped.
    pub fn cancellable_call(&self, entry: &str, call_id: &str, cancel: impl Fn(&str) + Send + Sync + 'static) -> CancellableCall<'_> {
        let token = NEXT_TOKEN.fetch_add(1, Ordering::Relaxed);
        let session = CALLING_SESSION.with(|s| s.borrow().clone());
        let call = Cancellable { entry: entry.to_string(), call_id: call_id.to_string(), session, cancel: Box::new(cancel) };
        self.cancellable.lock_or_recover().insert(token, Arc::new(call));
        CancellableCall { registry: self, token }
    }

    /// Cancels the calls in flight, among those that can be cancelled,
    /// for which `which(entry, call_id)` holds, telling them `reason`;
    /// returns how many were asked. Each such call returns promptly with
    /// an error result saying it was cancelled and why.
    pub fn cancel_calls(&self, which: impl Fn(&str, &str) -> bool, reason: &str) -> usize {
        self.cancel_chosen(&|c: &Cancellable| which(&c.entry, &c.call_id), reason)
    }

    /// Cancels the calls in flight that session `session` made, among
    /// those that can be cancelled, here and in the registry this one
    /// layers over; returns how many were asked.
    pub fn cancel_session_calls(&self, session: &str, reason: &str) -> usize {
        let mine = |c: &Cancellable| c.session.as_deref() == Some(session);
        self.cancel_chosen(&mine, reason) + self.parent.as_ref().map_or(0, |p| p.cancel_chosen(&mine, reason))
    }

    fn cancel_chosen(&self, which: &dyn Fn(&Cancellable) -> bool, reason: &str) -> usize {
        let chosen: Vec<Arc<Cancellable>> = self.cancellable.lock_or_recover().values().filter(|c| which(c)).cloned().collect();
        for call in &chosen {
            (call.cancel)(reason);
        }
        chosen.len()
    }

    /// Executes one call. `session` is the calling agent's session, if an
    /// agent is calling; the tool may append its owned event types to it.
    pub fn execute(&self, call: &ToolCall<'_>, session: Option<&Session>) -> ToolResult {
        if let Some(parent) = &self.parent {
            if !self.tools.read_or_recover().contains_key(call.name) && parent.get(call.name).is_some() {
                return parent.execute(call, session);
            }
        }
        let _in_flight = self.gate.read_or_recover();
        let _calling = CallingSession::enter(session.map(|s| s.id().to_string()));
        let Some(tool) = self.get(call.name) else {
            let known: Vec<String> = self.schemas().into_iter().map(|s| s.name).collect();
            let list = if known.is_empty() { "none".to_string() } else { known.join(", ") };
            return ToolResult::error(format!("unknown tool `{}` (available tools: {list})", call.name));
        };
        if call.arguments.len() > MAX_ARGUMENT_BYTES {
            return ToolResult::error(format!(
                "invalid arguments: {} bytes is over the limit of {MAX_ARGUMENT_BYTES} bytes for one call",
                call.arguments.len()
            ));
        }
        let checker = tool.checker.get_or_init(|| {
            cordis_abi::schema::Checker::new(tool.schema.parameters.clone())
                .map_err(|e| format!("the parameter schema of tool `{}` does not compile: {e}", call.name))
        });
        let parsed = match checker {
            Ok(checker) => cordis_abi::sdk::parse_arguments(call.arguments, checker),
            Err(e) => Err(e.clone()),
        };
        let parsed = match parsed {
            Ok(value) => value,
            Err(message) => return ToolResult::error(message),
        };
        // The plugin builds its typed arguments from this parse (borrowed,
        // token by token) rather than parsing the text again.
        // Room for one token per 8 bytes of text (a todo item is about
        // 9): sized from the text, not by walking the value to count them,
        // which cost more than the buffer growing now and then.
        let mut tokens = Vec::with_capacity(call.arguments.len() / 8 + 8);
        cordis_abi::tape::write_tokens(&parsed, &mut tokens);
        let scope = CallScope { call_id: call.id, session, owner: &tool.owner };
        let outcome = tool.tool.execute_tokens(call.arguments.into(), tokens.as_slice().into(), ExecContext_TO::from_ptr(&scope, TD_Opaque));
        drop(tokens);
        let value = outcome.value.as_ref().into_option().map(|v| RawJson::from_plugin(v.as_str()));
        ToolResult { is_error: outcome.is_error, text: outcome.text.into(), value, value_in_log: tool.from_source }
    }
}

/// Marks the session whose call this thread executes, until dropped.
struct CallingSession(Option<String>);

impl CallingSession {
    fn enter(session: Option<String>) -> CallingSession {
        CallingSession(CALLING_SESSION.with(|s| s.replace(session)))
    }
}

impl Drop for CallingSession {
    fn drop(&mut self) {
        let before = self.0.take();
        CALLING_SESSION.with(|s| *s.borrow_mut() = before);
    }
}

/// What a tool sees of the call it executes: the call id and, when an agent
/// is calling, that agent's session (appends restricted to the types the
/// tool's plugin owns).
/// What a plugin's code sees of the call it runs for: a tool call, or a
/// turn-end hook (empty call id).
pub(crate) struct CallScope<'a> {
    pub(crate) call_id: &'a str,
    pub(crate) session: Option<&'a Session>,
    pub(crate) owner: &'a Owner,
}

impl ExecContext for CallScope<'_> {
    fn call_id(&self) -> RString {
        self.call_id.into()
    }

    fn has_session(&self) -> bool {
        self.session.is_some()
    }

    fn append(&self, event_type: RStr<'_>, data: JsonStr<'_>) -> RResult<u64, RString> {
        let Some(session) = self.session else {
            return RErr("no agent session owns this call".into());
        };
        match session.append_encoded(event_type.as_str(), data, Appender::Plugin(self.owner)) {
            Ok(seq) => ROk(seq),
            Err(e) => RErr(e.to_string().into()),
        }
    }

    fn capability(
        &self,
        name: RStr<'_>,
        version: u32,
        request: RStr<'_>,
        object: abi_stable::std_types::ROption<cordis_abi::ffi::ServiceBox>,
    ) -> RResult<RString, RString> {
        let session_read = &cordis_abi::capabilities::SESSION_READ;
        if name.as_str() == session_read.name && version == session_read.version {
            let session = self.session;
            return match crate::capabilities::session_read(session.map(Session::id), request.as_str(), |key| session.and_then(|s| s.state(key))) {
                Ok(answer) => ROk(answer.into()),
                Err(e) => RErr(e.into()),
            };
        }
        crate::capabilities::answer_raw(name, version, request, object)
    }
}
