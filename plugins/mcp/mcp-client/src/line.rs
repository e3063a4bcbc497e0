//! The stdio transport: one JSON-RPC message per line, as rmcp's own, but
//! nothing it drops goes unsaid.
//!
//! rmcp's line transport drops a line over its size limit, or one that is
//! not UTF-8 JSON, with at most a `tracing` event the host never sees; the
//! request that line answered then waits for `toolCallTimeoutMs`. This one
//! reads lines of at most `maxMessageBytes` (the config key; default
//! [`DEFAULT_MAX_MESSAGE_BYTES`], rmcp's limit), and for every line it
//! cannot deliver it:
//!
//! - logs it with the server's name, the line's size and the reason (at a
//!   bounded rate, through the entry's [`Sink`]);
//! - when the line answered a request, answers that request at once with
//!   an error naming the limit or the bytes that are not UTF-8. The
//!   request is found by the line's `id` (read from the line, or from its
//!   first and last bytes when it is over the limit); when the id cannot
//!   be read, every request still waiting is answered so, since any of
//!   them may have been the one.
//!
//! Lines that are not JSON at all (a server printing on the wrong stream)
//! are logged and skipped, as the SDKs skip them.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use rmcp::model::{ErrorCode, ErrorData, JsonRpcMessage, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::RoleClient;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

use crate::stderr::Sink;

/// The default largest message (one line) a stdio server may send: 16 MiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: u64 = 16 * 1024 * 1024;

/// The error code of an answer the transport makes up for a dropped line
/// (in JSON-RPC's range for implementation errors).
pub const DROPPED_CODE: i32 = -32099;

/// How many bytes of the start and end of an oversized line are kept to
/// find its `id`.
const KEEP: usize = 4096;

/// The stdio transport over a server's stdout (`read`) and stdin (`write`).
pub struct LineTransport<R, W> {
    read: BufReader<R>,
    write: Arc<tokio::sync::Mutex<Option<W>>>,
    max: usize,
    label: String,
    notices: Option<Sink>,
    /// The line being read.
    line: Vec<u8>,
    /// Set while the rest of an oversized line is skipped.
    oversized: Option<Oversized>,
    /// Requests sent and not yet answered.
    pending: Pending,
    /// Answers made up for dropped lines, delivered before reading more.
    made_up: VecDeque<RxJsonRpcMessage<RoleClient>>,
}

/// The requests sent and not yet answered, by id (as JSON text), with
/// their method.
#[derive(Debug, Clone, Default)]
pub struct Pending {
    requests: Arc<Mutex<BTreeMap<String, (RequestId, String)>>>,
}

impl Pending {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, (RequestId, String)>> {
        self.requests.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Notes a message sent: a request now waits; a cancelled one no
    /// longer does.
    pub fn sent(&self, message: &Value) {
        if let (Some(id), Some(method)) = (message.get("id"), message.get("method").and_then(Value::as_str)) {
            if let Ok(request) = serde_json::from_value::<RequestId>(id.clone()) {
                self.lock().insert(id.to_string(), (request, method.to_string()));
            }
        }
        if message.get("method").and_then(Value::as_str) == Some("notifications/cancelled") {
            if let Some(id) = message.pointer("/params/requestId") {
                self.lock().remove(&id.to_string());
            }
        }
    }

    /// Notes a message received: an answer ends the wait of its request.
    pub fn answered(&self, message: &Value) {
        if message.get("method").is_none() {
            if let Some(id) = message.get("id") {
                self.lock().remove(&id.to_string());
            }
        }
    }

    /// Whether a request with this id waits.
    pub fn waits_for(&self, id: &Value) -> bool {
        self.lock().contains_key(&id.to_string())
    }

    /// Takes the request with this id, if it waits.
    fn take(&self, id: &Value) -> Option<(RequestId, String)> {
        self.lock().remove(&id.to_string())
    }

    /// Takes every request waiting.
    pub fn take_all(&self) -> Vec<(RequestId, String)> {
        std::mem::take(&mut *self.lock()).into_values().collect()
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }
}

/// What is kept of a line over the limit while its rest is skipped.
struct Oversized {
    head: Vec<u8>,
    tail: Vec<u8>,
    total: usize,
}

/// What a dropped line was.
#[derive(Debug)]
enum Dropped {
    TooLong { total: usize },
    NotUtf8 { total: usize, at: usize, bytes: Vec<u8> },
    NotJson { total: usize, error: String },
    NotMessage { total: usize, error: String },
}

impl Dropped {
    fn describe(&self, max: usize) -> String {
        match self {
            Dropped::TooLong { total } => format!("a line of {total} bytes is over the limit of {max} bytes (maxMessageBytes)"),
            Dropped::NotUtf8 { total, at, bytes } => {
                let hex: Vec<String> = bytes.iter().map(|b| format!("0x{b:02X}")).collect();
                format!("a line of {total} bytes is not UTF-8 from offset {at} (bytes there: {}; MCP messages are UTF-8 JSON)", hex.join(" "))
            }
            Dropped::NotJson { total, error } => format!("a line of {total} bytes is not JSON ({error})"),
            Dropped::NotMessage { total, error } => format!("a line of {total} bytes is not a JSON-RPC message ({error})"),
        }
    }
}

impl<R: AsyncRead + Unpin + Send, W: AsyncWrite + Unpin + Send + 'static> LineTransport<R, W> {
    /// A transport reading lines of at most `max` bytes; `label` names the
    /// server in what is logged to `notices`.
    pub fn new(read: R, write: W, max: u64, label: String, notices: Option<Sink>) -> Self {
        LineTransport {
            read: BufReader::with_capacity(64 * 1024, read),
            write: Arc::new(tokio::sync::Mutex::new(Some(write))),
            max: usize::try_from(max).unwrap_or(usize::MAX),
            label,
            notices,
            line: Vec::new(),
            oversized: None,
            pending: Pending::default(),
            made_up: VecDeque::new(),
        }
    }

    /// Reads the next whole line into `self.line` (without its newline),
    /// or returns what was dropped; `None` at the end of the stream.
    /// Cancellation-safe: the state lives in `self`, and bytes are consumed
    /// only once copied or counted.
    async fn next_line(&mut self) -> Option<Result<(), Dropped>> {
        loop {
            let (consumed, done) = {
                let available = match self.read.fill_buf().await {
                    Ok(available) => available,
                    Err(_) => return None,
                };
                if available.is_empty() {
                    return None;
                }
                let newline = available.iter().position(|b| *b == b'\n');
                let take = newline.map_or(available.len(), |at| at + 1);
                let body = &available[..newline.unwrap_or(take)];
                if let Some(over) = &mut self.oversized {
                    over.total += body.len();
                    over.tail.extend_from_slice(body);
                    if over.tail.len() > KEEP {
                        over.tail.drain(..over.tail.len() - KEEP);
                    }
                } else if self.line.len() + body.len() > self.max {
                    let mut head = std::mem::take(&mut self.line);
                    let total = head.len() + body.len();
                    head.extend_from_slice(&body[..body.len().min(KEEP.saturating_sub(head.len()))]);
                    head.truncate(KEEP);
                    let tail = body[body.len().saturating_sub(KEEP)..].to_vec();
                    self.oversized = Some(Oversized { head, tail, total });
                } else {
                    self.line.extend_from_slice(body);
                }
                (take, newline.is_some())
            };
            self.read.consume(consumed);
            if done {
                return Some(match self.oversized.take() {
                    Some(over) => {
                        let id = top_level_id(&over.head).or_else(|| trailing_id(&over.tail));
                        self.line.clear();
                        self.dropped(Dropped::TooLong { total: over.total }, id);
                        Err(Dropped::TooLong { total: over.total })
                    }
                    None => Ok(()),
                });
            }
        }
    }

    /// Logs a dropped line and answers the request it was for.
    fn dropped(&mut self, what: Dropped, id: Option<Value>) {
        let reason = what.describe(self.max);
        let waiting: Vec<(RequestId, String)> = match &id {
            Some(id) => self.pending.take(id).into_iter().collect(),
            // An answer whose id cannot be read: any waiting request may
            // have been its subject.
            None if matches!(what, Dropped::TooLong { .. } | Dropped::NotUtf8 { .. }) => self.pending.take_all(),
            None => Vec::new(),
        };
        let told = match waiting.as_slice() {
            [] => String::new(),
            [(_, method)] => format!("; the {method} request it answered fails now"),
            more => format!("; its id cannot be read, so the {} requests waiting fail now", more.len()),
        };
        self.notice(format!("{}: dropped a message from the server: {reason}{told}", self.label));
        for (id, method) in waiting {
            let error = ErrorData::new(
                ErrorCode(DROPPED_CODE),
                format!("the server's answer to {method} was dropped: {reason}"),
                Some(json!({"cordis": "dropped"})),
            );
            self.made_up.push_back(JsonRpcMessage::error(error, Some(id)));
        }
    }

    fn notice(&self, text: String) {
        match &self.notices {
            Some(sink) => sink.notice(text),
            None => eprintln_safe(&text),
        }
    }

    fn parse(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let line = std::mem::take(&mut self.line);
        let text = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&line);
        let text = text.strip_suffix(b"\r").unwrap_or(text);
        let total = text.len();
        if text.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        let text = match std::str::from_utf8(text) {
            Ok(text) => text,
            Err(e) => {
                let at = e.valid_up_to();
                let bytes = text[at..text.len().min(at + 4)].to_vec();
                let id = serde_json::from_str::<Value>(&String::from_utf8_lossy(text)).ok().and_then(|v| v.get("id").cloned());
                self.dropped(Dropped::NotUtf8 { total, at, bytes }, id);
                return None;
            }
        };
        let value: Value = match serde_json::from_str(text) {
            Ok(value) => value,
            Err(e) => {
                self.dropped(Dropped::NotJson { total, error: e.to_string() }, None);
                return None;
            }
        };
        let id = value.get("id").cloned();
        let answer = value.get("method").is_none();
        let seen = value.clone();
        match serde_json::from_value::<RxJsonRpcMessage<RoleClient>>(value) {
            Ok(message) => {
                self.pending.answered(&seen);
                Some(message)
            }
            // A notification the SDK does not know is not worth a word.
            Err(_) if !answer && id.is_none() => None,
            Err(e) => {
                self.dropped(Dropped::NotMessage { total, error: e.to_string() }, if answer { id } else { None });
                None
            }
        }
    }
}

fn eprintln_safe(text: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}

/// The value of the top-level `"id"` member in the start of a JSON object,
/// when it is there (a number or a string).
fn top_level_id(head: &[u8]) -> Option<Value> {
    let mut depth = 0usize;
    let mut i = 0;
    while i < head.len() {
        match head[i] {
            b'"' => {
                let end = string_end(head, i)?;
                if depth == 1 && &head[i..=end] == b"\"id\"" {
                    let rest = &head[end + 1..];
                    let colon = rest.iter().position(|b| !b.is_ascii_whitespace())?;
                    if rest[colon] == b':' {
                        return scalar(&rest[colon + 1..]);
                    }
                }
                i = end;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    None
}

/// The value of an `"id"` member that ends the object whose last bytes are
/// `tail` (`..., "id": 7}`), as JSON.stringify of `{result, jsonrpc, id}`
/// writes it.
fn trailing_id(tail: &[u8]) -> Option<Value> {
    let text = std::str::from_utf8(tail).ok().or_else(|| {
        let start = tail.iter().position(|b| b.is_ascii()).unwrap_or(tail.len());
        std::str::from_utf8(&tail[start..]).ok()
    })?;
    let body = text.trim_end().strip_suffix('}')?;
    let at = body.rfind("\"id\"")?;
    let value = body[at + 4..].trim_start().strip_prefix(':')?.trim();
    match serde_json::from_str::<Value>(value).ok()? {
        v @ (Value::Number(_) | Value::String(_)) => Some(v),
        _ => None,
    }
}

/// The index of the quote that closes the string opened at `start`.
fn string_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// A number or string at the start of `bytes`.
fn scalar(bytes: &[u8]) -> Option<Value> {
    let start = bytes.iter().position(|b| !b.is_ascii_whitespace())?;
    let rest = &bytes[start..];
    let end = if rest.first() == Some(&b'"') {
        string_end(rest, 0)? + 1
    } else {
        rest.iter().position(|b| !(b.is_ascii_digit() || *b == b'-')).unwrap_or(rest.len())
    };
    match serde_json::from_slice::<Value>(&rest[..end]).ok()? {
        v @ (Value::Number(_) | Value::String(_)) => Some(v),
        _ => None,
    }
}

impl<R, W> Transport<RoleClient> for LineTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn name() -> std::borrow::Cow<'static, str> {
        "stdio".into()
    }

    fn send(&mut self, item: TxJsonRpcMessage<RoleClient>) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        let write = self.write.clone();
        let pending = self.pending.clone();
        async move {
            let value = serde_json::to_value(&item).map_err(std::io::Error::other)?;
            pending.sent(&value);
            let mut line = serde_json::to_vec(&value).map_err(std::io::Error::other)?;
            line.push(b'\n');
            let mut write = write.lock().await;
            let Some(stream) = write.as_mut() else {
                return Err(std::io::Error::new(std::io::ErrorKind::NotConnected, "the transport is closed"));
            };
            stream.write_all(&line).await?;
            stream.flush().await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            if let Some(message) = self.made_up.pop_front() {
                return Some(message);
            }
            if self.next_line().await?.is_ok() {
                if let Some(message) = self.parse() {
                    return Some(message);
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        let mut write = self.write.lock().await;
        if let Some(mut stream) = write.take() {
            let _ = stream.shutdown().await;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_found_at_either_end() {
        assert_eq!(top_level_id(br#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"id":9"#), Some(json!(7)));
        assert_eq!(top_level_id(br#"{"result":{"id":1,"text":"x\"id\":3"},"id":"a-1""#), Some(json!("a-1")));
        assert_eq!(top_level_id(br#"{"result":{"content":[{"type":"text","text":"xxxx"#), None);
        assert_eq!(trailing_id(br#"xxxx"}]},"jsonrpc":"2.0","id":12}"#), Some(json!(12)));
        assert_eq!(trailing_id(br#"xx"}]}}"#), None);
    }

    #[tokio::test]
    async fn an_oversized_or_undecodable_answer_fails_its_request_at_once() {
        let mut input = Vec::new();
        input.extend_from_slice(br#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":""#);
        input.extend_from_slice(&vec![b'x'; 300]);
        input.extend_from_slice(b"\"}]}}\n");
        input.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"\xC7\xD1\xB1\xB9\"}]}}\n");
        input.extend_from_slice(b"not json at all\n");
        input.extend_from_slice(br#"{"jsonrpc":"2.0","id":3,"result":{"content":[]}}"#);
        input.push(b'\n');
        let (server_in, _keep) = tokio::io::duplex(1024);
        let mut transport = LineTransport::new(&input[..], server_in, 200, "mcp-client(t)".into(), None);
        for (id, method) in [(1, "tools/call"), (2, "tools/call"), (3, "tools/list")] {
            transport.pending.sent(&json!({"jsonrpc": "2.0", "id": id, "method": method}));
        }
        let first = transport.receive().await.unwrap().into_error().unwrap();
        assert_eq!(first.1, Some(RequestId::Number(1)));
        assert!(first.0.message.contains("is over the limit of 200 bytes (maxMessageBytes)"), "{}", first.0.message);
        let second = transport.receive().await.unwrap().into_error().unwrap();
        assert_eq!(second.1, Some(RequestId::Number(2)));
        assert!(second.0.message.contains("not UTF-8 from offset 68 (bytes there: 0xC7 0xD1 0xB1 0xB9;"), "{}", second.0.message);
        let third = transport.receive().await.unwrap();
        assert!(third.into_response().is_some());
        assert!(transport.receive().await.is_none());
        assert!(transport.pending.is_empty());
    }
}
