//! rmcp's Streamable HTTP transport, watched for errors that answer no
//! request.
//!
//! A server that restarted, or expired the session, answers a request
//! under the old session id with an error. rmcp re-initialises by itself
//! after a 404; a server that answers otherwise (the Python SDK: 400 with
//! a JSON-RPC error whose id is `"server-error"`; the TypeScript SDK: id
//! `null`) sends an error that names no request waiting, so rmcp leaves the
//! request waiting for `toolCallTimeoutMs` and the connection looking
//! healthy. Every request this client sends passes through here, so an
//! error whose id names none of them can only be the server refusing one
//! without saying which. This wrapper fails every request waiting at once
//! with the server's message and reports the error on `suspect`; the
//! connection then pings the session, and a session that does not answer
//! is lost: the connection starts again, which initialises a new session
//! (and, when that fails, reconnects with backoff, the state saying so).
//! Nothing here reads the error's wording.

use std::collections::VecDeque;

use rmcp::model::{ErrorCode, ErrorData, JsonRpcMessage};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::RoleClient;
use serde_json::json;
use tokio::sync::mpsc;

use crate::line::Pending;

/// The error code of an answer made up for a request the server refused
/// without naming it.
pub const UNNAMED_REFUSAL_CODE: i32 = -32098;

/// A transport watched for errors that answer no request.
pub struct SessionWatch<T> {
    inner: T,
    pending: Pending,
    suspect: mpsc::UnboundedSender<String>,
    made_up: VecDeque<RxJsonRpcMessage<RoleClient>>,
}

impl<T> SessionWatch<T> {
    /// Watches `inner`; an error that answers no request is reported on
    /// `suspect`, with the server's message.
    pub fn new(inner: T, suspect: mpsc::UnboundedSender<String>) -> SessionWatch<T> {
        SessionWatch { inner, pending: Pending::default(), suspect, made_up: VecDeque::new() }
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
                if !answers {
                    let said = format!("{} (code {})", error.error.message, error.error.code.0);
                    for (id, method) in self.pending.take_all() {
                        let failed = ErrorData::new(
                            ErrorCode(UNNAMED_REFUSAL_CODE),
                            format!(
                                "the {method} request failed: the server refused a request without naming it: {said}; \
                                 the session is being checked, and a new one initialised if it is lost"
                            ),
                            Some(json!({"cordis": "unnamed-refusal"})),
                        );
                        self.made_up.push_back(JsonRpcMessage::error(failed, Some(id)));
                    }
                    let _ = self.suspect.send(said);
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
