//! `cordis mcp`: the composition's tools served over the Model Context
//! Protocol, with the official Rust SDK (`rmcp`).
//!
//! - [`connection`]: one MCP connection as an agent session (a turn per
//!   connection, a step per call; how a disconnect mid-call is recorded);
//! - [`handler`]: the protocol's requests: `tools/list`, `tools/call`,
//!   `resources/*` and subscriptions;
//! - [`resources`]: projection states as resources
//!   `cordis://session/{id}/{key}`, and the subscriptions to them;
//! - [`http`]: the Streamable HTTP transport (bind address, `Host` and
//!   `Origin` checks, bearer token);
//! - [`order`]: calls of a session in the order they arrived (HTTP);
//! - [`stdio`]: the stdio transport (the protocol's own descriptor, and an
//!   answer for every line).
//!
//! Protocol versions: the handshake versions `2024-11-05` to `2025-11-25`.
//! A session of the protocol is what makes a connection an agent session
//! here, and `2026-07-28` has no sessions (every request stands alone), so it
//! is not offered: a client that asks for it is answered with the versions
//! served, and the official SDKs then fall back to the `initialize`
//! handshake by themselves.

pub mod connection;
pub mod handler;
pub mod http;
pub mod order;
pub mod resources;
pub mod stdio;

use std::sync::{Arc, Mutex};

use rmcp::service::{Peer, RoleServer};

use cordis_engine::tools::{ToolRegistry, ToolSchema};
use cordis_session::projection::Projections;
use cordis_session::{AppendError, Session, Sessions, StoreError};

pub use connection::{CallOutcome, ClientName, Connection};
use cordis_sync::LockExt;
pub use handler::Handler;

/// Errors of the MCP server.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// `--session ID` is attached to another connection.
    #[error("session `{0}` is in use by another MCP connection of this server; it is free again when that connection closes")]
    Busy(String),
    /// A session could not be created or opened.
    #[error("session store: {0}")]
    Store(#[from] StoreError),
    /// The session log refused an event.
    #[error("the session log refused an event: {0}")]
    Log(#[from] AppendError),
    /// The connection is closed.
    #[error("the MCP connection is closed")]
    Closed,
    /// The transport could not start or failed.
    #[error("{0}")]
    Transport(String),
}

/// Which agent session a new connection gets.
pub enum Attach {
    /// A new session for every connection.
    New {
        /// Recorded as the session's `cwd`.
        cwd: Option<String>,
    },
    /// One session (`--session ID`, opened and locked at start), attached
    /// to one connection at a time.
    Fixed {
        /// The session.
        session: Arc<Session>,
        /// The connection holding it.
        holder: Mutex<Option<u64>>,
    },
}

/// What every connection of one server shares: the host's services, the
/// session policy, the subscriptions, and the live connections' peers (for
/// `notifications/tools/list_changed`).
pub struct Shared {
    /// The tool registry (the agent loop's).
    pub tools: Arc<ToolRegistry>,
    /// The sessions service.
    pub sessions: Arc<Sessions>,
    /// The projections (resources).
    pub projections: Arc<Projections>,
    /// Resource subscriptions.
    pub hub: resources::Hub,
    attach: Attach,
    peers: Mutex<Vec<(u64, Peer<RoleServer>)>>,
    connections: Mutex<Vec<std::sync::Weak<Connection>>>,
    catalog: Mutex<Vec<ToolSchema>>,
}

impl Shared {
    /// A server over `services` whose connections get sessions per `attach`.
    pub fn new(services: &cordis_engine::context::Services, attach: Attach) -> Arc<Shared> {
        Arc::new(Shared {
            tools: services.tools.clone(),
            sessions: services.sessions.clone(),
            projections: services.projections.clone(),
            hub: resources::Hub::default(),
            attach,
            peers: Mutex::new(Vec::new()),
            connections: Mutex::new(Vec::new()),
            catalog: Mutex::new(services.tools.schemas()),
        })
    }

    /// The session for connection `connection`.
    ///
    /// # Errors
    /// [`McpError::Busy`], [`McpError::Store`].
    pub(crate) fn attach_session(&self, connection: u64) -> Result<Arc<Session>, McpError> {
        match &self.attach {
            Attach::New { cwd } => Ok(self.sessions.create(cwd.clone())?),
            Attach::Fixed { session, holder } => {
                let mut holder = holder.lock_or_recover();
                match *holder {
                    Some(other) if other != connection => Err(McpError::Busy(session.id().to_string())),
                    _ => {
                        *holder = Some(connection);
                        Ok(session.clone())
                    }
                }
            }
        }
    }

    /// Connection `connection` is gone: frees a `--session` session it
    /// held, and forgets its peer.
    pub(crate) fn release_session(&self, connection: u64) {
        if let Attach::Fixed { holder, .. } = &self.attach {
            let mut holder = holder.lock_or_recover();
            if *holder == Some(connection) {
                *holder = None;
            }
        }
        self.peers.lock_or_recover().retain(|(id, _)| *id != connection);
    }

    /// Remembers a new connection, so [`Shared::close_all`] reaches it.
    pub(crate) fn add_connection(&self, connection: &Arc<Connection>) {
        let mut all = self.connections.lock_or_recover();
        all.retain(|c| c.strong_count() > 0);
        all.push(Arc::downgrade(connection));
    }

    /// Closes every live connection (the server is stopping): each ends
    /// its turn after its call in flight.
    pub fn close_all(&self) {
        let all: Vec<Arc<Connection>> = self.connections.lock_or_recover().iter().filter_map(std::sync::Weak::upgrade).collect();
        for c in all {
            c.close();
        }
    }

    /// Remembers a live connection's peer.
    pub(crate) fn add_peer(&self, connection: u64, peer: Peer<RoleServer>) {
        let mut peers = self.peers.lock_or_recover();
        peers.retain(|(id, _)| *id != connection);
        peers.push((connection, peer));
    }

    /// Compares the tool catalog with the one last seen; when it changed
    /// (a tool added, removed, or its description or schema changed), sends
    /// `notifications/tools/list_changed` to every live connection.
    /// Returns whether it changed.
    pub async fn check_catalog(&self) -> bool {
        let now = self.tools.schemas();
        {
            let mut last = self.catalog.lock_or_recover();
            if *last == now {
                return false;
            }
            *last = now;
        }
        let peers: Vec<Peer<RoleServer>> = self.peers.lock_or_recover().iter().map(|(_, p)| p.clone()).collect();
        for peer in peers {
            if let Err(e) = peer.notify_tool_list_changed().await {
                tracing::debug!("tools/list_changed not delivered: {e}");
            }
        }
        true
    }
}

/// Serves one connection over this process's stdin and `protocol` (the
/// descriptor [`stdio::isolate_stdout`] gave the protocol) until the client
/// closes stdin (or exits), then ends the connection's turn. See
/// [`serve_lines`].
///
/// # Errors
/// As [`serve_lines`].
pub async fn serve_stdio(shared: Arc<Shared>, protocol: std::fs::File) -> Result<(), McpError> {
    serve_lines(shared, tokio::io::stdin(), protocol).await
}

/// Serves one connection reading JSON-RPC lines from `input` and writing
/// every line the server sends to `output`, until `input` ends; then ends
/// the connection's turn. Every line read is screened first
/// ([`stdio::screen`]): a line rmcp would drop unanswered is answered here,
/// so each line written is one JSON-RPC message.
///
/// # Errors
/// [`McpError::Transport`] when the client's first message is not a valid
/// opening of the protocol.
pub async fn serve_lines(
    shared: Arc<Shared>,
    input: impl tokio::io::AsyncRead + Unpin + Send + 'static,
    output: impl std::io::Write + Send + 'static,
) -> Result<(), McpError> {
    use rmcp::ServiceExt as _;
    let (lines, queue) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
    let writer = std::thread::Builder::new()
        .name("cordis-mcp-stdout".into())
        .spawn(move || stdio::write_output(output, queue))
        .map_err(|e| McpError::Transport(format!("cannot start the output thread: {e}")))?;
    let (to_protocol, protocol_in) = tokio::io::duplex(64 * 1024);
    let (protocol_out, from_protocol) = tokio::io::duplex(64 * 1024);
    let arrivals = Arc::new(order::Arrivals::default());
    let mut input = tokio::spawn(stdio::pump_input(input, to_protocol, lines.clone(), arrivals.clone()));
    let output = tokio::spawn(stdio::pump_output(from_protocol, lines, arrivals.clone()));
    let handler = Handler::new(shared.clone()).with_arrivals(arrivals);
    let connection = handler.connection();
    let served = handler.serve((protocol_in, protocol_out)).await;
    let result = match served {
        Ok(running) => {
            let waiting = running.waiting();
            tokio::pin!(waiting);
            tokio::select! {
                _ = &mut waiting => {}
                // The client left (its input ended): rmcp lets handlers
                // finish for a while before cancelling them, so a call in
                // flight that can be cancelled is cancelled now.
                _ = &mut input => {
                    connection.cancel_call("the MCP client went away");
                    let _ = waiting.await;
                }
            }
            Ok(())
        }
        Err(e) => Err(McpError::Transport(format!("the MCP client's opening failed: {e}"))),
    };
    input.abort();
    // The protocol's side is gone: its last lines are copied, then the
    // writer ends with the last sender.
    let _ = output.await;
    let _ = tokio::task::spawn_blocking(move || {
        connection.close();
        let _ = writer.join();
    })
    .await;
    result
}
