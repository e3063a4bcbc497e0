//! JSON-RPC 2.0 over newline-delimited stdio, as ACP frames it: one
//! message per line, both sides sending requests.
//!
//! [`Outgoing`] writes messages (each whole, one line, under a lock, so
//! messages of different sessions never interleave) and keeps the requests
//! the agent sent the client until their answers arrive. [`classify`]
//! sorts a line read from the client.

use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Mutex;

use cordis_sync::LockExt;
use serde_json::{json, Value};

/// JSON-RPC's code for a line that is not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC's code for a message that is not a request.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC's code for a method the agent does not have.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC's code for parameters of the wrong shape.
pub const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC's code for a failure inside the agent.
pub const INTERNAL_ERROR: i64 = -32603;
/// ACP's code for a session (or other resource) that does not exist.
pub const RESOURCE_NOT_FOUND: i64 = -32002;

/// The longest line read as one message: 64 MiB (an embedded resource may
/// be large). A longer line is answered with [`PARSE_ERROR`].
pub const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

/// A JSON-RPC error: code, message, optional data.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// The JSON-RPC code.
    pub code: i64,
    /// What went wrong, for a person.
    pub message: String,
    /// More detail, when there is any.
    pub data: Option<Value>,
}

impl RpcError {
    /// An error with `code` and `message`.
    pub fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError { code, message: message.into(), data: None }
    }

    /// [`INVALID_PARAMS`] with `message`.
    pub fn params(message: impl Into<String>) -> RpcError {
        RpcError::new(INVALID_PARAMS, message)
    }

    /// [`INTERNAL_ERROR`] with `message`.
    pub fn internal(message: impl Into<String>) -> RpcError {
        RpcError::new(INTERNAL_ERROR, message)
    }

    /// The `error` member of a response.
    pub fn to_value(&self) -> Value {
        let mut e = json!({"code": self.code, "message": self.message});
        if let Some(data) = &self.data {
            e["data"] = data.clone();
        }
        e
    }
}

/// One line from the client, sorted.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A request: it gets exactly one answer.
    Request {
        /// Its id (a number or a string).
        id: Value,
        /// The method.
        method: String,
        /// The parameters (`null` when absent).
        params: Value,
    },
    /// A notification: no answer.
    Notification {
        /// The method.
        method: String,
        /// The parameters (`null` when absent).
        params: Value,
    },
    /// The answer to a request the agent sent.
    Response {
        /// The id the agent gave its request.
        id: u64,
        /// The result, or the client's error.
        outcome: Result<Value, RpcError>,
    },
    /// A line that gets an error answer (id `null` when it had none).
    Invalid {
        /// The id to answer under.
        id: Value,
        /// Why it is refused.
        error: RpcError,
    },
    /// Nothing to do (a blank line, or an answer nobody waits for).
    Nothing,
}

/// Sorts one line read from the client.
pub fn classify(line: &str) -> Incoming {
    if line.trim().is_empty() {
        return Incoming::Nothing;
    }
    let value: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => return Incoming::Invalid { id: Value::Null, error: RpcError::new(PARSE_ERROR, format!("the line is not JSON: {e}")) },
    };
    let Value::Object(mut map) = value else {
        let error = RpcError::new(INVALID_REQUEST, "a message must be a JSON object (batches are not part of ACP)");
        return Incoming::Invalid { id: Value::Null, error };
    };
    let id = map.remove("id");
    if let Some(id) = &id {
        if !(id.is_string() || id.is_i64() || id.is_u64() || id.is_null()) {
            return Incoming::Invalid { id: Value::Null, error: RpcError::new(INVALID_REQUEST, "`id` must be a number or a string") };
        }
    }
    if map.get("jsonrpc") != Some(&json!("2.0")) {
        return Incoming::Invalid { id: id.unwrap_or(Value::Null), error: RpcError::new(INVALID_REQUEST, "`jsonrpc` must be \"2.0\"") };
    }
    match map.remove("method") {
        Some(Value::String(method)) => {
            let params = map.remove("params").unwrap_or(Value::Null);
            if !(params.is_object() || params.is_null() || params.is_array()) {
                let error = RpcError::new(INVALID_REQUEST, "`params` must be an object");
                return Incoming::Invalid { id: id.unwrap_or(Value::Null), error };
            }
            match id {
                Some(id) => Incoming::Request { id, method, params },
                None => Incoming::Notification { method, params },
            }
        }
        Some(_) => Incoming::Invalid { id: id.unwrap_or(Value::Null), error: RpcError::new(INVALID_REQUEST, "`method` must be a string") },
        None => {
            // An answer: only ids the agent gave (numbers) are waited for.
            let Some(id) = id.as_ref().and_then(Value::as_u64) else { return Incoming::Nothing };
            let outcome = match (map.remove("result"), map.remove("error")) {
                (_, Some(error)) => Err(RpcError {
                    code: error["code"].as_i64().unwrap_or(INTERNAL_ERROR),
                    message: error["message"].as_str().unwrap_or("the client failed").to_string(),
                    data: error.get("data").cloned(),
                }),
                (Some(result), None) => Ok(result),
                (None, None) => Ok(Value::Null),
            };
            Incoming::Response { id, outcome }
        }
    }
}

/// The sending half of the connection.
pub struct Outgoing {
    out: Mutex<Box<dyn Write + Send>>,
    next_id: AtomicU64,
    waiting: Mutex<HashMap<u64, mpsc::Sender<Result<Value, RpcError>>>>,
}

impl std::fmt::Debug for Outgoing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outgoing").field("next_id", &self.next_id).finish_non_exhaustive()
    }
}

impl Outgoing {
    /// Messages go to `out`.
    pub fn new(out: Box<dyn Write + Send>) -> Outgoing {
        Outgoing { out: Mutex::new(out), next_id: AtomicU64::new(0), waiting: Mutex::new(HashMap::new()) }
    }

    /// Writes `message` as one line. A client that went away is not an
    /// error here: the input's end stops the server.
    pub fn send(&self, message: &Value) {
        let mut line = message.to_string();
        line.push('\n');
        let mut out = self.out.lock_or_recover();
        if let Err(e) = out.write_all(line.as_bytes()).and_then(|()| out.flush()) {
            tracing::debug!("cannot write to the client: {e}");
        }
    }

    /// Writes `messages`, one per line, with one write: a replay's
    /// updates, which no one reads one by one.
    pub fn send_all(&self, messages: &[Value]) {
        let mut text = String::new();
        for m in messages {
            text.push_str(&m.to_string());
            text.push('\n');
        }
        let mut out = self.out.lock_or_recover();
        if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
            tracing::debug!("cannot write to the client: {e}");
        }
    }

    /// Sends a notification.
    pub fn notify(&self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Answers request `id` with `result`.
    pub fn respond(&self, id: &Value, result: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    /// Answers request `id` with `error`.
    pub fn fail(&self, id: &Value, error: &RpcError) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "error": error.to_value()}));
    }

    /// Sends a request to the client; its answer arrives on the receiver
    /// (see [`Outgoing::answer`]). Returns the request's id too, to
    /// [forget](Outgoing::forget) it.
    pub fn request(&self, method: &str, params: Value) -> (u64, mpsc::Receiver<Result<Value, RpcError>>) {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = mpsc::channel();
        self.waiting.lock_or_recover().insert(id, tx);
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        (id, rx)
    }

    /// Hands the client's answer to request `id` to whoever waits for it.
    pub fn answer(&self, id: u64, outcome: Result<Value, RpcError>) {
        if let Some(tx) = self.waiting.lock_or_recover().remove(&id) {
            let _ = tx.send(outcome);
        }
    }

    /// Stops waiting for the answer to request `id`.
    pub fn forget(&self, id: u64) {
        self.waiting.lock_or_recover().remove(&id);
    }

    /// Fails every request still waiting for an answer (the client left).
    pub fn abandon_all(&self) {
        for (_, tx) in self.waiting.lock_or_recover().drain() {
            let _ = tx.send(Err(RpcError::internal("the client closed the connection")));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_sorted_by_shape() {
        assert!(matches!(classify("{"), Incoming::Invalid { error: RpcError { code: PARSE_ERROR, .. }, .. }));
        assert!(matches!(classify("[1]"), Incoming::Invalid { error: RpcError { code: INVALID_REQUEST, .. }, .. }));
        assert!(matches!(classify(r#"{"id":1,"method":"x"}"#), Incoming::Invalid { error: RpcError { code: INVALID_REQUEST, .. }, .. }));
        assert_eq!(
            classify(r#"{"jsonrpc":"2.0","id":"a","method":"initialize","params":{"protocolVersion":1}}"#),
            Incoming::Request { id: json!("a"), method: "initialize".into(), params: json!({"protocolVersion": 1}) }
        );
        assert_eq!(
            classify(r#"{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}"#),
            Incoming::Notification { method: "session/cancel".into(), params: json!({"sessionId": "s"}) }
        );
        assert_eq!(classify(r#"{"jsonrpc":"2.0","id":3,"result":{"x":1}}"#), Incoming::Response { id: 3, outcome: Ok(json!({"x": 1})) });
        match classify(r#"{"jsonrpc":"2.0","id":4,"error":{"code":-1,"message":"no"}}"#) {
            Incoming::Response { id: 4, outcome: Err(e) } => assert_eq!((e.code, e.message.as_str()), (-1, "no")),
            other => panic!("{other:?}"),
        }
        assert_eq!(classify("  "), Incoming::Nothing);
    }

    #[test]
    fn an_answer_reaches_its_waiter_once() {
        let out = Outgoing::new(Box::new(std::io::sink()));
        let (id, rx) = out.request("session/request_permission", json!({}));
        out.answer(id, Ok(json!({"outcome": {"outcome": "cancelled"}})));
        out.answer(id, Ok(json!(null)));
        assert_eq!(rx.recv().unwrap().unwrap(), json!({"outcome": {"outcome": "cancelled"}}));
        assert!(rx.try_recv().is_err());
    }
}
