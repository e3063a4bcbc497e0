//! A session opened on a connection: its log, its interrupt, its model
//! and the MCP servers the client passed for it.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use cordis_engine::agent::{Interrupt, Model};
use cordis_engine::runtime::Host;
use cordis_engine::tools::ToolRegistry;
use cordis_session::Session;

use crate::mcp::SessionTools;

/// A session opened on this connection.
pub(crate) struct Live {
    pub(crate) session: Arc<Session>,
    pub(crate) cwd: String,
    pub(crate) interrupt: Interrupt,
    /// A prompt is running.
    pub(crate) running: AtomicBool,
    /// The model, kept across prompts (a script goes on where it stopped).
    pub(crate) model: Mutex<Option<Box<dyn Model + Send>>>,
    /// Tools the user allowed (`true`) or rejected (`false`) for the rest
    /// of the session.
    pub(crate) decided: Mutex<HashMap<String, bool>>,
    /// Whether the editor shows a plan with entries (so that a new
    /// turn's start clears it), across prompts.
    pub(crate) plan_shown: AtomicBool,
    /// The MCP servers the client passed, when it passed any.
    servers: Option<SessionTools>,
}

impl Live {
    pub(crate) fn new(session: Arc<Session>, cwd: String, servers: Option<SessionTools>) -> Live {
        Live {
            session,
            cwd,
            interrupt: Interrupt::new(),
            running: AtomicBool::new(false),
            model: Mutex::new(None),
            decided: Mutex::new(HashMap::new()),
            plan_shown: AtomicBool::new(false),
            servers,
        }
    }

    /// The tools this session's model may call.
    pub(crate) fn tools(&self, host: &Host) -> Arc<ToolRegistry> {
        self.servers.as_ref().map_or_else(|| host.services.tools.clone(), |s| s.tools.clone())
    }
}
