//! rmcp's Streamable HTTP transport, watched for a lost session.
//!
//! A server that restarted, or expired the session, answers a request
//! under the old session id with an error. rmcp re-initialises by itself
//! after a 404; a server that answers 400 with a JSON-RPC error whose id
//! is not the request's (the Python SDK's `"server-error"`) leaves the
//! request waiting for `toolCallTimeoutMs` and the connection looking
//! healthy. This wrapper notices such an error (one that answers no
//! request waiting and speaks of the session), fails every request
//! waiting at once saying the session was lost, and tells the connection
//! to start again, which initialises a new session (and, when that fails,
//! reconnects with backoff, the state saying so).

use std::collections::VecDeque;

use rmcp::model::{ErrorCode, ErrorData, JsonRpcMessage};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::RoleClient;
use serde_json::json;
use tokio::sync::mpsc;

use crate::line::Pending;

/// The error code of an answer made up for a request whose session was
/// lost.
pub const SESSION_LOST_CODE: i32 = -32098;

/// A transport watched for a lost session.
pub struct SessionWatch<T> {
    inner: T,
    pending: Pending,
    lost: mpsc::UnboundedSender<String>,
    made_up: VecDeque<RxJsonRpcMessage<RoleClient>>,
}

impl<T> SessionWatch<T> {
    /// Watches `inner`; a lost session is reported on `lost`.
    pub fn new(inner: T, lost: mpsc::UnboundedSender<String>) -> SessionWatch<T> {
        SessionWatch { inner, pending: Pending::default(), lost, made_up: VecDeque::new() }
    }
}

impl<T> Transport<RoleClient> for SessionWatch<T>
where
    T: Transport<RoleClient>,
{
    type Error = T::Error;

    fn name() -> std::borrow::Cow<'static, str> {
        "streamable-http".into()
    }

    fn send(&mut self, item: TxJsonRpcMessage<RoleClient>) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let Ok(value) = serde_json::to_value(&item) {
            self.pending.sent(&value);
        }
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            if let Some(message) = self.made_up.pop_front() {
                return Some(message);
            }
            let message = self.inner.receive().await?;
            if let JsonRpcMessage::Error(error) = &message {
                let answers = error.id.as_ref().and_then(|id| serde_json::to_value(id).ok()).is_some_and(|id| self.pending.waits_for(&id));
                if !answers && error.error.message.to_ascii_lowercase().contains("session") {
                    let reason = format!("the server no longer knows this MCP session ({})", error.error.message);
                    for (id, method) in self.pending.take_all() {
                        let failed = ErrorData::new(
                            ErrorCode(SESSION_LOST_CODE),
                            format!("the {method} request failed: {reason}; a new session is being initialised"),
                            Some(json!({"cordis": "session-lost"})),
                        );
                        self.made_up.push_back(JsonRpcMessage::error(failed, Some(id)));
                    }
                    let _ = self.lost.send(reason);
                    continue;
                }
            }
            if let Ok(value) = serde_json::to_value(&message) {
                self.pending.answered(&value);
            }
            return Some(message);
        }
    }

    fn close(&mut self) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
