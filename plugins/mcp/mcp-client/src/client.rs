//! The connection to one server: a supervisor task that connects, lists
//! the tools, follows `notifications/tools/list_changed`, and reconnects
//! with backoff when the connection is lost; and the tool source the host
//! follows (`tools.dynamic`), which answers the host's `list`, `call` and
//! `close`.
//!
//! Everything runs on a tokio runtime of the entry's own (one worker
//! thread). The host's threads call in through the source: `list` waits on
//! a condition variable for a new generation of tools, `call` blocks on the
//! runtime for the server's answer, bounded by `toolCallTimeoutMs`.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use cordis_abi::prelude::*;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotification, CancelledNotificationParam, ClientNotification, ClientRequest, ServerResult,
};
use rmcp::service::{NotificationContext, Peer, PeerRequestOptions, RoleClient, RunningService, ServiceError};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, ServiceExt};
use tokio::sync::{mpsc, oneshot, watch};

use crate::content::map_result;
use crate::line::{LineTransport, DROPPED_CODE};
use crate::names::public_name;
use crate::process::ServerProcess;
use crate::stderr::Sink;
use crate::{Config, Transport};

/// How long the first connection (start, `initialize`, every page of
/// `tools/list`) may take: the SDKs' default request timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(60);

/// The longest the service may take to end once cancelled (its transport
/// closed); a stdio server's processes are then stopped by
/// [`ServerProcess::stop`], bounded on its own.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a session may take to answer the ping that checks it after
/// the server refused a request without naming it.
const PING_TIMEOUT: Duration = Duration::from_secs(5);

/// The longest a disposal waits for the supervisor task (the service's
/// end, then the server's processes: see [`crate::process`]).
const CLOSE_LIMIT: Duration = Duration::from_secs(8);

/// The longest `apply` waits for the first connection when the entry may
/// start without it (`failOnStartupError: false`).
const STARTUP_WAIT: Duration = Duration::from_secs(10);

/// The shortest time between two `tools/list` requests made for
/// `notifications/tools/list_changed`: the notifications that arrive
/// meanwhile are answered by one list, so a storm of them costs at most
/// four lists a second.
const LIST_INTERVAL: Duration = Duration::from_millis(250);

/// The longest a `list` from the host waits for a change.
const MAX_WAIT: Duration = Duration::from_millis(1000);

/// One of the server's tools, as registered.
#[derive(Debug, Clone, PartialEq)]
struct ServerTool {
    public: String,
    raw: String,
    description: String,
    parameters: Value,
    output: Option<Value>,
}

impl ServerTool {
    fn listed(&self) -> Value {
        let mut tool = json!({"name": self.public, "description": self.description, "parameters": self.parameters});
        if let Some(output) = &self.output {
            tool["outputSchema"] = output.clone();
        }
        tool
    }
}

/// Where the connection is.
#[derive(Debug, Clone)]
enum Phase {
    Connecting,
    Connected,
    /// Waiting to try again: the attempt about to be made, and why.
    Retrying {
        attempt: u32,
        delay: Duration,
        reason: String,
    },
    /// Lost, and reconnecting is off.
    Down {
        reason: String,
    },
    /// Gave up after the budget of attempts.
    GaveUp {
        reason: String,
    },
    /// The server refused the credentials (HTTP 401 or 403): no retry
    /// until the entry's config changes (which applies the entry again).
    Refused {
        reason: String,
    },
    Closed,
}

/// What the host and the supervisor share.
struct State {
    /// Bumped by every change of tools or phase, which wakes a waiting `list`.
    changes: u64,
    generation: u64,
    tools: Vec<ServerTool>,
    phase: Phase,
    peer: Option<Peer<RoleClient>>,
    /// Tells the supervisor that a call found the connection broken.
    lost: Option<mpsc::UnboundedSender<String>>,
}

struct Shared {
    config: Config,
    /// Where the server's stderr and the entry's notices go.
    notices: Sink,
    state: Mutex<State>,
    changed: Condvar,
    closed: AtomicBool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Writes a line of the entry's own to the host's stderr, through the
    /// writer thread (so it never blocks the runtime).
    fn notice(&self, text: String) {
        self.notices.notice(text);
    }

    fn label(&self) -> String {
        format!("mcp-client({})", self.config.server_name)
    }

    fn set_phase(&self, phase: Phase) {
        let mut state = self.lock();
        if matches!(state.phase, Phase::Closed) {
            return;
        }
        state.phase = phase;
        state.changes += 1;
        drop(state);
        self.changed.notify_all();
    }

    /// Publishes a new tool list (a new generation only when it differs).
    fn set_tools(&self, tools: Vec<ServerTool>) {
        let mut state = self.lock();
        if state.tools != tools {
            state.tools = tools;
            state.generation += 1;
            state.changes += 1;
        }
        drop(state);
        self.changed.notify_all();
    }

    fn status(&self, state: &State) -> String {
        let label = self.label();
        match &state.phase {
            Phase::Connecting => format!("{label}: connecting"),
            Phase::Connected => format!("{label}: connected, {} tools", state.tools.len()),
            Phase::Retrying { attempt, delay, reason } => {
                format!("{label}: {reason}; reconnecting in {} ms (attempt {attempt} of {})", delay.as_millis(), self.config.reconnect.max_attempts)
            }
            Phase::Down { reason } => format!("{label}: {reason}; reconnecting is off, so its tools fail until the entry is reloaded"),
            Phase::Refused { reason } => format!("{label}: {reason}; not retrying until the entry's config changes"),
            Phase::GaveUp { reason } => format!(
                "{label}: {reason}; gave up after {} failed attempts in a row, tools withdrawn until the entry is reloaded",
                self.config.reconnect.max_attempts
            ),
            Phase::Closed => format!("{label}: stopped"),
        }
    }

    /// Why a call cannot be made now.
    fn unavailable(&self, state: &State) -> String {
        let label = self.label();
        match &state.phase {
            Phase::Connecting => format!("{label}: the MCP server is not connected yet"),
            Phase::Connected => format!("{label}: the MCP server is not connected"),
            Phase::Retrying { attempt, delay, reason } => format!(
                "{label}: the MCP server is down: {reason}; reconnecting in {} ms (attempt {attempt} of {})",
                delay.as_millis(),
                self.config.reconnect.max_attempts
            ),
            Phase::Down { reason } => format!("{label}: the MCP server is down: {reason}; reconnecting is off, so reload the entry"),
            Phase::Refused { reason } => format!("{label}: {reason}; fix the credentials in the entry's config"),
            Phase::GaveUp { reason } => format!("{label}: the MCP server is down: {reason}; gave up reconnecting, so reload the entry"),
            Phase::Closed => format!("{label}: the entry was stopped"),
        }
    }
}

/// Passes `notifications/tools/list_changed` to the supervisor.
struct Handler {
    list_changed: mpsc::UnboundedSender<()>,
}

impl ClientHandler for Handler {
    fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) -> impl std::future::Future<Output = ()> + Send + '_ {
        let _ = self.list_changed.send(());
        std::future::ready(())
    }
}

/// Connects, lists the tools, follows the connection; reconnects with
/// backoff. Ends when `stop` turns true.
async fn supervise(shared: Arc<Shared>, mut stop: watch::Receiver<bool>, first: std::sync::mpsc::SyncSender<Result<(), String>>) {
    let policy = shared.config.reconnect.clone();
    let mut first = Some(first);
    let mut failed: u32 = 0;
    loop {
        shared.set_phase(Phase::Connecting);
        let (tx, mut rx) = mpsc::unbounded_channel();
        let (lost_tx, mut lost_rx) = mpsc::unbounded_channel::<String>();
        let (suspect_tx, mut suspect_rx) = mpsc::unbounded_channel::<String>();
        let attempt = tokio::select! {
            attempt = tokio::time::timeout(CONNECT_TIMEOUT, connect(&shared, Handler { list_changed: tx }, suspect_tx)) => attempt
                .unwrap_or_else(|_| Err(format!("no answer within {} s while connecting", CONNECT_TIMEOUT.as_secs()).into())),
            _ = stop.changed() => return,
        };
        // The processes of a server whose connection ended: stopped once
        // the new state is published.
        let mut ended: Option<ServerProcess> = None;
        let reason = match attempt {
            Ok((running, tools, mut process)) => {
                let peer = running.peer().clone();
                shared.set_tools(tools);
                {
                    let mut state = shared.lock();
                    state.peer = Some(peer.clone());
                    state.lost = Some(lost_tx);
                }
                shared.set_phase(Phase::Connected);
                if let Some(first) = first.take() {
                    let _ = first.send(Ok(()));
                }
                let since = Instant::now();
                let mut listed_at = Instant::now();
                let mut cancel = Some(running.cancellation_token());
                let quit = running.waiting();
                tokio::pin!(quit);
                let reason = loop {
                    tokio::select! {
                        _ = &mut quit => break "the server closed the connection (it exited or crashed)".to_string(),
                        // A call found the transport broken (an HTTP server
                        // that went away never closes anything).
                        Some(why) = lost_rx.recv() => {
                            if let Some(cancel) = cancel.take() {
                                cancel.cancel();
                            }
                            let _ = tokio::time::timeout(SHUTDOWN_TIMEOUT, &mut quit).await;
                            break format!("the connection was lost: {why}");
                        }
                        // The server refused a request without naming it
                        // (the waiting ones have failed already): the
                        // session is lost when it does not answer a ping.
                        Some(said) = suspect_rx.recv() => {
                            let mut options = PeerRequestOptions::no_options();
                            options.timeout = Some(PING_TIMEOUT);
                            let ping = peer.send_request_with_option(ClientRequest::PingRequest(Default::default()), options);
                            // Any answer naming the ping, an error too, is
                            // the session answering; a refusal that names
                            // no request again fails it with our own code.
                            let answered = tokio::select! {
                                answer = async {
                                    match ping.await?.await_response().await {
                                        Err(ServiceError::McpError(e)) if e.code.0 != crate::session::UNNAMED_REFUSAL_CODE => Ok(()),
                                        other => other.map(|_| ()),
                                    }
                                } => answer.map_err(|e| short_error(&e)),
                                _ = stop.changed() => {
                                    if let Some(cancel) = cancel.take() {
                                        cancel.cancel();
                                    }
                                    let _ = tokio::time::timeout(SHUTDOWN_TIMEOUT, &mut quit).await;
                                    if let Some(process) = process.take() {
                                        process.stop().await;
                                    }
                                    return;
                                }
                            };
                            while suspect_rx.try_recv().is_ok() {}
                            match answered {
                                Ok(()) => shared.notice(format!(
                                    "{}: the server refused a request without naming it ({said}); the session still answers a ping, so it is kept",
                                    shared.label()
                                )),
                                Err(_) => {
                                    if let Some(cancel) = cancel.take() {
                                        cancel.cancel();
                                    }
                                    let _ = tokio::time::timeout(SHUTDOWN_TIMEOUT, &mut quit).await;
                                    break format!("the server no longer knows this MCP session: it refused a request without naming it ({said}), then a ping");
                                }
                            }
                        }
                        Some(()) = rx.recv() => {
                            tokio::time::sleep(LIST_INTERVAL.saturating_sub(listed_at.elapsed())).await;
                            while rx.try_recv().is_ok() {}
                            listed_at = Instant::now();
                            match list_tools(&shared, &peer).await {
                                Ok(tools) => shared.set_tools(tools),
                                // The previous generation stays registered.
                                Err(e) => shared.notice(format!("{}: the tool list changed, and listing it failed: {e}", shared.label())),
                            }
                        }
                        _ = stop.changed() => {
                            // Close the connection the way the protocol
                            // says (stdin closed, then SIGTERM to the
                            // server's group, then SIGKILL) and wait until
                            // its processes are reaped.
                            if let Some(cancel) = cancel.take() {
                                cancel.cancel();
                            }
                            let _ = tokio::time::timeout(SHUTDOWN_TIMEOUT, &mut quit).await;
                            if let Some(process) = process.take() {
                                process.stop().await;
                            }
                            return;
                        }
                    }
                };
                {
                    let mut state = shared.lock();
                    state.peer = None;
                    state.lost = None;
                }
                ended = process.take();
                if since.elapsed() >= Duration::from_millis(policy.max_delay_ms) {
                    failed = 0;
                }
                (reason, None)
            }
            Err(failed) => (failed.text, failed.refused),
        };
        let (reason, refused) = reason;
        // The state is set before the first attempt's outcome is handed to
        // `apply`, so the entry's first status already says what follows.
        let told = first.take().map(|first| (first, reason.clone()));
        let (phase, delay) = if let Some(refused) = refused {
            shared.set_tools(Vec::new());
            (Phase::Refused { reason: auth_refusal(&shared.config, &refused) }, None)
        } else if !policy.enabled {
            (Phase::Down { reason }, None)
        } else {
            failed += 1;
            if failed > policy.max_attempts {
                shared.set_tools(Vec::new());
                (Phase::GaveUp { reason }, None)
            } else {
                let delay = Duration::from_millis(policy.initial_delay_ms.saturating_mul(1u64 << (failed - 1).min(40)).min(policy.max_delay_ms));
                (Phase::Retrying { attempt: failed, delay, reason }, Some(delay))
            }
        };
        shared.set_phase(phase);
        if let Some((first, reason)) = told {
            let _ = first.send(Err(reason));
        }
        // The server's other processes (helpers it forked) end with it,
        // and a hung one is stopped before the next start.
        let wake = tokio::time::Instant::now() + delay.unwrap_or_default();
        if let Some(process) = ended.take() {
            process.stop().await;
        }
        // Down or given up: nothing more until the entry is disposed.
        if delay.is_none() {
            let _ = stop.changed().await;
            return;
        }
        tokio::select! {
            _ = tokio::time::sleep_until(wake) => {}
            _ = stop.changed() => return,
        }
    }
}

type Running = RunningService<RoleClient, Handler>;

/// One connection attempt: start or reach the server, `initialize`, list
/// the tools. A stdio server's processes come with it.
async fn connect(
    shared: &Shared,
    handler: Handler,
    suspect: mpsc::UnboundedSender<String>,
) -> Result<(Running, Vec<ServerTool>, Option<ServerProcess>), AttemptError> {
    let config = &shared.config;
    let (running, process) = match config.transport {
        Transport::Stdio => {
            let program = config.command.clone().unwrap_or_default();
            let mut command = tokio::process::Command::new(&program);
            command.args(&config.args).env_clear().envs(config.server_env()?);
            if !config.cwd.is_empty() {
                if !std::path::Path::new(&config.cwd).is_dir() {
                    return Err(format!("cwd `{}` is not a folder (it is taken relative to where cordis runs)", config.cwd).into());
                }
                command.current_dir(&config.cwd);
            }
            let (process, pipes) = ServerProcess::spawn(command).map_err(|e| format!("cannot start `{program}`: {e}"))?;
            tokio::spawn(crate::stderr::forward(shared.label(), pipes.stderr, shared.notices.clone()));
            let transport = LineTransport::new(pipes.stdout, pipes.stdin, config.max_message_bytes, shared.label(), Some(shared.notices.clone()));
            match handler.serve(transport).await {
                Ok(running) => (running, Some(process)),
                Err(e) => {
                    process.stop().await;
                    return Err(format!("the MCP handshake with `{program}` failed: {e}").into());
                }
            }
        }
        Transport::StreamableHttp => {
            // reqwest is built without a TLS provider of its own: use ring's
            // (a provider already installed in this library stays).
            let _ = rustls::crypto::ring::default_provider().install_default();
            let url = config.url.clone().unwrap_or_default();
            let mut headers = HashMap::new();
            for (name, value) in &config.headers {
                let header = http::HeaderName::from_bytes(name.as_bytes()).map_err(|_| format!("headers: `{name}` is not a valid header name"))?;
                // The value may be a secret: never show it.
                let value =
                    http::HeaderValue::from_str(value).map_err(|_| format!("headers: the value of `{name}` is not valid in an HTTP header"))?;
                headers.insert(header, value);
            }
            let transport = crate::session::SessionWatch::new(
                StreamableHttpClientTransport::from_config(StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(headers)),
                suspect,
            );
            match handler.serve(transport).await {
                Ok(running) => (running, None),
                Err(e) => {
                    return Err(AttemptError {
                        text: format!("the MCP handshake with {url} failed: {}", without_type_name(&with_causes(&e))),
                        refused: auth_refused(&e),
                    })
                }
            }
        }
    };
    match list_tools(shared, running.peer()).await {
        Ok(tools) => Ok((running, tools, process)),
        Err(e) => {
            running.cancellation_token().cancel();
            if let Some(process) = process {
                process.stop().await;
            }
            Err(e.into())
        }
    }
}

/// Why a connection attempt failed.
struct AttemptError {
    /// What to tell.
    text: String,
    /// Set when the server refused the credentials.
    refused: Option<AuthRefused>,
}

impl From<String> for AttemptError {
    fn from(text: String) -> AttemptError {
        AttemptError { text, refused: None }
    }
}

/// A 401 or 403 from the server, as rmcp's typed errors report it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct AuthRefused {
    /// 401 or 403.
    status: u16,
    /// The `WWW-Authenticate` challenge (empty when the server sent none).
    challenge: String,
}

/// The 401 or 403 that failed a handshake: rmcp's `AuthRequiredError`
/// (401) or `InsufficientScopeError` (403) among the causes of the
/// transport's error, where rmcp's own `auth_challenge` looks for them.
fn auth_refused(e: &rmcp::service::ClientInitializeError) -> Option<AuthRefused> {
    use rmcp::service::ClientInitializeError;
    use rmcp::transport::streamable_http_client::{AuthRequiredError, InsufficientScopeError};
    let error = match e {
        ClientInitializeError::TransportError { error, .. } => error,
        ClientInitializeError::LegacyFallbackFailed { fallback, .. } => return auth_refused(fallback),
        _ => return None,
    };
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error.error.as_ref());
    while let Some(current) = cause {
        if let Some(e) = current.downcast_ref::<AuthRequiredError>() {
            return Some(AuthRefused { status: 401, challenge: e.www_authenticate_header.clone() });
        }
        if let Some(e) = current.downcast_ref::<InsufficientScopeError>() {
            return Some(AuthRefused { status: 403, challenge: e.www_authenticate_header.clone() });
        }
        cause = current.source();
    }
    None
}

/// What to say when the server refused the credentials: the status, the
/// challenge, and which header was sent (never its value).
fn auth_refusal(config: &Config, refused: &AuthRefused) -> String {
    let header = config.headers.keys().find(|name| name.eq_ignore_ascii_case("authorization")).or_else(|| config.headers.keys().next());
    let sent = match header {
        Some(name) => format!("the `{name}` header was sent and refused"),
        None => "no header is configured (`headers`, e.g. `Authorization`)".to_string(),
    };
    let challenge: String = refused.challenge.chars().filter(|c| !c.is_control()).take(300).collect();
    let challenge = if challenge.trim().is_empty() { String::new() } else { format!(", WWW-Authenticate: {}", challenge.trim()) };
    format!("the server refused the credentials (HTTP {}{challenge}); {sent}", refused.status)
}

/// An error with its causes, each after `: ` (rmcp's `Display` of a
/// failed handshake leaves the transport's cause out).
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(inner) = cause {
        let more = inner.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = inner.source();
    }
    text
}

/// The server's whole tool list, under public names.
async fn list_tools(shared: &Shared, peer: &Peer<RoleClient>) -> Result<Vec<ServerTool>, String> {
    let listed = peer.list_all_tools().await.map_err(|e| format!("tools/list failed: {e}"))?;
    let mut seen = BTreeMap::new();
    let mut tools = Vec::with_capacity(listed.len());
    for tool in listed {
        let raw = tool.name.to_string();
        let public = public_name(&shared.config.server_name, &raw);
        if seen.insert(public.clone(), raw.clone()).is_some() {
            return Err(format!("the server listed the tool `{raw}` more than once"));
        }
        let parameters = Value::Object((*tool.input_schema).clone());
        let output = tool.output_schema.as_ref().map(|s| Value::Object((**s).clone()));
        tools.push(ServerTool { public, raw, description: tool.description.map(|d| d.to_string()).unwrap_or_default(), parameters, output });
    }
    Ok(tools)
}

/// The tool source the host follows.
struct Source {
    shared: Arc<Shared>,
    runtime: Mutex<Option<tokio::runtime::Runtime>>,
    handle: tokio::runtime::Handle,
    stop: watch::Sender<bool>,
    /// Disconnected when the supervisor has ended (its connection closed
    /// and its server reaped).
    supervisor: Mutex<Option<std::sync::mpsc::Receiver<()>>>,
    /// The thread writing the server's stderr and the entry's notices.
    writer: crate::stderr::Writer,
    /// The calls in flight, by call id: what cancels each (with a reason).
    calls: Mutex<HashMap<String, oneshot::Sender<String>>>,
    /// How many call tasks have not answered yet.
    in_flight: Arc<std::sync::atomic::AtomicUsize>,
}

/// How a call failed on the client's side.
enum Failure {
    Service(ServiceError),
    /// Cancelled by the host (`cancel`, or the entry's disposal), why.
    Cancelled(String),
}

/// How long sending `notifications/cancelled` may take.
const CANCEL_SEND_LIMIT: Duration = Duration::from_millis(500);

impl Source {
    fn list(&self, args: &Value) -> Result<Value, SourceError> {
        let after = args.get("after").and_then(Value::as_u64);
        let wait = Duration::from_millis(args.get("waitMs").and_then(Value::as_u64).unwrap_or(0)).min(MAX_WAIT);
        let mut state = self.shared.lock();
        if after == Some(state.generation) && !self.shared.closed.load(Ordering::Acquire) {
            let seen = state.changes;
            let closed = &self.shared.closed;
            state = self
                .shared
                .changed
                .wait_timeout_while(state, wait, |s| s.changes == seen && !closed.load(Ordering::Acquire))
                .map(|(state, _)| state)
                .unwrap_or_else(|e| e.into_inner().0);
        }
        let tools: Vec<Value> = state.tools.iter().map(ServerTool::listed).collect();
        let level = match state.phase {
            Phase::Connecting | Phase::Connected | Phase::Closed => "info",
            Phase::Retrying { .. } => "warn",
            Phase::Down { .. } | Phase::GaveUp { .. } | Phase::Refused { .. } => "error",
        };
        Ok(json!({"generation": state.generation, "tools": tools, "status": self.shared.status(&state), "statusLevel": level}))
    }

    fn call(&self, args: Value) -> Result<Value, SourceError> {
        let name = args.get("name").and_then(Value::as_str).unwrap_or_default();
        let arguments = match args.get("arguments") {
            Some(Value::Object(map)) => map.clone(),
            _ => return Ok(error_result(format!("{}: the arguments of {name} are not an object", self.shared.label()))),
        };
        let (raw, peer) = {
            let state = self.shared.lock();
            if self.shared.closed.load(Ordering::Acquire) {
                return Ok(error_result(self.shared.unavailable(&State { phase: Phase::Closed, ..clone_state(&state) })));
            }
            let Some(tool) = state.tools.iter().find(|t| t.public == name) else {
                return Ok(error_result(format!("{}: the MCP server no longer offers `{name}`", self.shared.label())));
            };
            let Some(peer) = state.peer.clone() else {
                return Ok(error_result(self.shared.unavailable(&state)));
            };
            (tool.raw.clone(), peer)
        };
        let timeout = Duration::from_millis(self.shared.config.tool_call_timeout_ms);
        let label = self.shared.label();
        let call_id = args.get("callId").and_then(Value::as_str).unwrap_or_default().to_string();
        let (cancel, cancelled) = oneshot::channel::<String>();
        let listed = {
            let mut calls = self.calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            // Two calls under one id: the second cannot be cancelled by id.
            !call_id.is_empty() && !calls.contains_key(&call_id) && calls.insert(call_id.clone(), cancel).is_none()
        };
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(CallToolRequestParams::new(raw.clone()).with_arguments(arguments)));
        let mut options = PeerRequestOptions::no_options();
        options.timeout = Some(timeout);
        // Not `block_on`: the host may call from inside a runtime of its own.
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let in_flight = self.in_flight.clone();
        in_flight.fetch_add(1, Ordering::AcqRel);
        self.handle.spawn(async move {
            let answer = match peer.send_request_with_option(request, options).await {
                Ok(handle) => {
                    let (id, peer) = (handle.id.clone(), handle.peer.clone());
                    tokio::select! {
                        answer = handle.await_response() => answer.map_err(Failure::Service),
                        Ok(reason) = cancelled => {
                            let notice = CancelledNotification::new(CancelledNotificationParam::new(Some(id), Some(reason.clone())));
                            let _ = tokio::time::timeout(CANCEL_SEND_LIMIT, peer.send_notification(ClientNotification::CancelledNotification(notice))).await;
                            Err(Failure::Cancelled(reason))
                        }
                    }
                }
                Err(e) => Err(Failure::Service(e)),
            };
            in_flight.fetch_sub(1, Ordering::AcqRel);
            let _ = tx.send(answer);
        });
        let answer = rx.recv();
        if listed {
            self.calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&call_id);
        }
        let Ok(answer) = answer else {
            return Ok(error_result(self.shared.unavailable(&State { phase: Phase::Closed, ..clone_state(&self.shared.lock()) })));
        };
        let answer = match answer {
            Ok(answer) => Ok(answer),
            Err(Failure::Service(e)) => Err(e),
            Err(Failure::Cancelled(reason)) => {
                return Ok(error_result(format!(
                    "{label}: the call to {raw} was cancelled ({reason}); the MCP server was sent notifications/cancelled"
                )))
            }
        };
        let result = match answer {
            Ok(ServerResult::CallToolResult(result)) => result,
            Ok(other) => {
                let kind = serde_json::to_value(&other).ok().and_then(|v| v.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>().join(", ")));
                return Ok(error_result(format!(
                    "{label}: the MCP server answered {raw} with something that is not a tool result ({})",
                    kind.unwrap_or_default()
                )));
            }
            Err(ServiceError::Timeout { .. }) => {
                return Ok(error_result(format!(
                    "{label}: the MCP server did not answer {raw} within {} ms (toolCallTimeoutMs); the call was cancelled",
                    timeout.as_millis()
                )))
            }
            Err(ServiceError::McpError(e)) if e.code.0 == DROPPED_CODE || e.code.0 == crate::session::UNNAMED_REFUSAL_CODE => {
                return Ok(error_result(format!("{label}: the call to {raw} failed: {}", e.message)));
            }
            Err(ServiceError::McpError(e)) => {
                return Ok(error_result(format!("{label}: the MCP server refused the call to {raw}: {} (code {})", e.message, e.code.0)));
            }
            Err(e) => {
                let state = self.shared.lock();
                if matches!(e, ServiceError::TransportSend(_) | ServiceError::TransportClosed) {
                    if let Some(lost) = &state.lost {
                        let _ = lost.send(short_error(&e));
                    }
                }
                let now = match state.phase {
                    Phase::Connected if state.peer.is_some() => String::new(),
                    _ => format!(" (now: {})", self.shared.status(&state).trim_start_matches(&format!("{label}: "))),
                };
                return Ok(error_result(format!(
                    "{label}: the call to {raw} failed: the connection to the MCP server was lost ({}){now}",
                    short_error(&e)
                )));
            }
        };
        let value = serde_json::to_value(&result).map_err(|e| SourceError(format!("{label}: cannot read the result of {raw}: {e}")))?;
        match map_result(&raw, &value) {
            Ok(mapped) => {
                let mut answer = json!({"isError": mapped.is_error, "text": mapped.text});
                if let Some(value) = mapped.value {
                    answer["value"] = value;
                }
                Ok(answer)
            }
            Err(e) => Ok(error_result(format!("{label}: {e}"))),
        }
    }

    /// `cancel {"callId", "reason"}`: the call answers at once as
    /// cancelled, and the server is sent `notifications/cancelled`.
    fn cancel(&self, args: &Value) {
        let id = args.get("callId").and_then(Value::as_str).unwrap_or_default();
        let reason = args.get("reason").and_then(Value::as_str).unwrap_or("cancelled by cordis");
        let cancel = self.calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(id);
        if let Some(cancel) = cancel {
            let _ = cancel.send(reason.to_string());
        }
    }

    fn close(&self) {
        if self.shared.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        // Calls in flight end now, each telling the server, before the
        // connection closes.
        let calls: Vec<oneshot::Sender<String>> =
            self.calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner).drain().map(|(_, cancel)| cancel).collect();
        let cancelled = !calls.is_empty();
        for cancel in calls {
            let _ = cancel.send("the entry was stopped".to_string());
        }
        let until = Instant::now() + CANCEL_SEND_LIMIT + Duration::from_millis(100);
        while cancelled && self.in_flight.load(Ordering::Acquire) > 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.shared.set_phase(Phase::Closed);
        let _ = self.stop.send(true);
        self.shared.lock().peer = None;
        self.shared.changed.notify_all();
        let supervisor = self.supervisor.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        if let Some(ended) = supervisor {
            let _ = ended.recv_timeout(CLOSE_LIMIT);
        }
        let runtime = self.runtime.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        if let Some(runtime) = runtime {
            // The supervisor has closed its connection; this ends what is
            // left (a connection attempt cut short is killed on drop).
            runtime.shutdown_timeout(Duration::from_secs(1));
        }
        self.writer.stop(Duration::from_secs(1));
    }
}

fn clone_state(state: &State) -> State {
    State { changes: state.changes, generation: state.generation, tools: Vec::new(), phase: state.phase.clone(), peer: None, lost: None }
}

/// An rmcp error without the transport's Rust type name, which its
/// `Display` puts in front of the cause.
fn short_error(e: &ServiceError) -> String {
    without_type_name(&e.to_string())
}

/// `text` with rmcp's `Transport [TYPE] error: ` written `transport
/// error: `.
fn without_type_name(text: &str) -> String {
    match (text.find("Transport ["), text.find("] error: ")) {
        (Some(start), Some(end)) if start < end => format!("{}transport error: {}", &text[..start], &text[end + "] error: ".len()..]),
        _ => text.to_string(),
    }
}

fn error_result(text: String) -> Value {
    json!({"isError": true, "text": text})
}

/// An error of the source's own (a request it cannot read).
struct SourceError(String);

impl ServiceProvider for Source {
    fn call(&self, method: &str, args: Value) -> Result<Value, cordis_abi::sdk::ServiceError> {
        let answer = match method {
            "list" => self.list(&args),
            "call" => self.call(args),
            "cancel" => {
                self.cancel(&args);
                Ok(json!({}))
            }
            "close" => {
                self.close();
                Ok(json!({}))
            }
            other => Err(SourceError(format!("the mcp-client tool source has no request `{other}` (requests: list, call, cancel, close)"))),
        };
        answer.map_err(|e| cordis_abi::sdk::ServiceError::new(e.0))
    }
}

impl Drop for Source {
    fn drop(&mut self) {
        self.close();
    }
}

/// Starts the entry: the runtime, the supervisor, the first connection,
/// and hands the source to the host.
pub fn start(ctx: &Context<'_>, config: Config) -> Result<(), PluginError> {
    let label = format!("mcp-client({})", config.server_name);
    let fail_on_startup = config.fail_on_startup_error;
    let (notices, writer) = Sink::start(&config.server_name).map_err(|e| PluginError::new(format!("{label}: cannot start its log writer: {e}")))?;
    // What rmcp drops is told under this entry's name: its threads are
    // the only ones running this entry's rmcp code.
    let forward = tracing::Dispatch::new(crate::discards::Forward::new(label.clone(), notices.clone()));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name(format!("mcp:{}", config.server_name))
        .on_thread_start(move || crate::discards::enter(&forward))
        .on_thread_stop(crate::discards::leave)
        .enable_all()
        .build()
        .map_err(|e| PluginError::new(format!("{label}: cannot start its runtime: {e}")))?;
    let shared = Arc::new(Shared {
        config,
        notices,
        state: Mutex::new(State { changes: 0, generation: 0, tools: Vec::new(), phase: Phase::Connecting, peer: None, lost: None }),
        changed: Condvar::new(),
        closed: AtomicBool::new(false),
    });
    let (stop, stopped) = watch::channel(false);
    let (first_tx, first_rx) = std::sync::mpsc::sync_channel(1);
    let (ended_tx, ended) = std::sync::mpsc::channel::<()>();
    let supervisor = supervise(shared.clone(), stopped, first_tx);
    runtime.spawn(async move {
        let _ended = ended_tx;
        supervisor.await;
    });
    let handle = runtime.handle().clone();
    let source = Source {
        shared,
        runtime: Mutex::new(Some(runtime)),
        handle: handle.clone(),
        stop,
        supervisor: Mutex::new(Some(ended)),
        writer,
        calls: Mutex::default(),
        in_flight: Arc::default(),
    };
    // Without failOnStartupError, `apply` waits for the first connection
    // at most STARTUP_WAIT: a server still starting then connects in the
    // background and its tools are registered when it answers.
    let first = if fail_on_startup {
        first_rx.recv().unwrap_or_else(|_| Err("the connection was stopped".into()))
    } else {
        match first_rx.recv_timeout(STARTUP_WAIT) {
            Ok(first) => first,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                ctx.log(
                    LogLevel::Warn,
                    &format!(
                        "{label}: the server has not answered within {} s; the entry runs without its tools until it does",
                        STARTUP_WAIT.as_secs()
                    ),
                );
                Ok(())
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err("the connection was stopped".into()),
        }
    };
    if let Err(reason) = &first {
        ctx.log(LogLevel::Warn, &format!("{label}: the first connection failed: {reason}; retrying in the background"));
        if fail_on_startup {
            source.close();
            return Err(PluginError::new(format!("{label}: the first connection or tool listing failed (failOnStartupError): {reason}")));
        }
    }
    match ctx.capability_with(&cordis_abi::capabilities::TOOLS_DYNAMIC, &json!({}), source)? {
        Some(_) => Ok(()),
        None => Err(PluginError::new(format!("{label}: this host does not offer tools.dynamic (cordis-abi 1.3); run a newer cordis"))),
    }
}
