//! The stdio transport of `cordis mcp`: one JSON-RPC message per line on
//! stdin and stdout, with the protocol's stream kept to itself.
//!
//! - **Stdout belongs to the protocol.** [`isolate_stdout`] moves the
//!   protocol onto a descriptor of its own and points descriptor 1 at
//!   stderr, before any plugin is loaded: whatever a plugin (or the host)
//!   prints goes to stderr and never onto the MCP stream.
//! - **Every line gets its answer.** Each line read is checked by
//!   [`screen`] before rmcp sees it: a line that is not JSON is answered
//!   with `-32700` (id `null`), a batch or a message of the wrong shape
//!   with `-32600`, and a request holding a lone surrogate escape with
//!   `-32602` under its own id, since rmcp would drop those without an
//!   answer. Good lines go on to rmcp unchanged.

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncWriteExt as _, BufReader};

/// The longest line read as one message: 16 MiB (a tool call's arguments
/// are limited to 1 MiB). A longer line is answered with `-32700` and
/// skipped up to its end.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// What to do with one line read from the client.
#[derive(Debug, Clone, PartialEq)]
pub enum Screened {
    /// Hand the line to the protocol as it is; `call` is the request id of
    /// a `tools/call`.
    Forward {
        /// The id of a `tools/call` request, else `None`.
        call: Option<Value>,
    },
    /// Answer with this JSON-RPC error response; the line goes no further.
    Answer(Value),
    /// Nothing (a blank line, or a notification that cannot be answered).
    Skip,
}

/// A JSON-RPC error response.
fn error(id: Value, code: i64, message: String) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// Whether `id` is a request id JSON-RPC allows (a string or a number).
fn valid_id(id: &Value) -> bool {
    // MCP ids are strings or integers (rmcp reads no other number).
    id.is_string() || id.is_i64() || id.is_u64()
}

/// Checks one line (without its `\n`) as a JSON-RPC 2.0 message.
pub fn screen(line: &[u8]) -> Screened {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Screened::Skip;
    }
    let message: Value = match serde_json::from_slice(line) {
        Ok(message) => message,
        Err(e) => return unparsable(line, &e),
    };
    let Value::Object(fields) = &message else {
        let what = if message.is_array() {
            "a batch (a JSON array): batches are not part of MCP since 2025-06-18; send one message per line".to_string()
        } else {
            format!("a JSON {}, not a message object", kind(&message))
        };
        return Screened::Answer(error(Value::Null, -32600, format!("Invalid Request: {what}")));
    };
    let id = fields.get("id");
    let answer_id = id.filter(|id| valid_id(id)).cloned().unwrap_or(Value::Null);
    if fields.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Screened::Answer(error(answer_id, -32600, "Invalid Request: `jsonrpc` must be \"2.0\"".into()));
    }
    if let Some(id) = id {
        if !valid_id(id) {
            return Screened::Answer(error(Value::Null, -32600, format!("Invalid Request: `id` must be a string or an integer, found {id}")));
        }
    }
    match fields.get("method") {
        Some(Value::String(method)) => {
            // Params of a shape no MCP method takes are answered here (a
            // notification never is): rmcp would answer without an id.
            if let Some(why) = bad_params(method, fields.get("params")) {
                return match id {
                    Some(_) => Screened::Answer(error(answer_id, -32602, format!("Invalid params: {why}"))),
                    None => Screened::Skip,
                };
            }
            Screened::Forward { call: id.filter(|_| method == "tools/call").cloned() }
        }
        Some(other) => Screened::Answer(error(answer_id, -32600, format!("Invalid Request: `method` must be a string, found {}", kind(other)))),
        // A response to one of our requests.
        None if id.is_some() && (fields.contains_key("result") != fields.contains_key("error")) => Screened::Forward { call: None },
        None => Screened::Answer(error(
            answer_id,
            -32600,
            "Invalid Request: a message needs a `method` (or, as a response, an `id` and one of `result` and `error`)".into(),
        )),
    }
}

/// What is wrong with a request's `params`, for any MCP method (an object
/// or absent, with `_meta` an object) and for `tools/call` (a string
/// `name`, `arguments` an object or absent); `None` when nothing is.
fn bad_params(method: &str, params: Option<&Value>) -> Option<String> {
    let params = match params {
        None | Some(Value::Null) => return (method == "tools/call").then(|| "tools/call needs `params` with the tool's `name`".to_string()),
        Some(Value::Object(params)) => params,
        Some(other) => return Some(format!("`params` must be an object, found {}", kind(other))),
    };
    if let Some(meta) = params.get("_meta").filter(|m| !m.is_object() && !m.is_null()) {
        return Some(format!("`params._meta` must be an object, found {}", kind(meta)));
    }
    if method == "tools/call" {
        if !params.get("name").is_some_and(Value::is_string) {
            return Some("`name` must be the tool's name, a string".into());
        }
        if let Some(arguments) = params.get("arguments").filter(|a| !a.is_object() && !a.is_null()) {
            return Some(format!("`arguments` must be an object, found {}", kind(arguments)));
        }
    }
    None
}

/// The answer to a line that is not JSON. A request whose only fault is a
/// lone surrogate escape (`"\ud83e"`, which no Unicode text holds) is
/// answered under its own id, so the client's call does not wait forever.
fn unparsable(line: &[u8], e: &serde_json::Error) -> Screened {
    let repaired = replace_lone_surrogates(line);
    if repaired != line {
        if let Ok(Value::Object(fields)) = serde_json::from_slice::<Value>(&repaired) {
            return match fields.get("id").filter(|id| valid_id(id)) {
                Some(id) => Screened::Answer(error(
                    id.clone(),
                    -32602,
                    format!("Invalid params: the message holds a lone surrogate escape, which is not Unicode text ({e}); a high half such as `\\ud83e` needs its low half"),
                )),
                None => Screened::Skip,
            };
        }
    }
    Screened::Answer(error(Value::Null, -32700, format!("Parse error: {e}")))
}

/// `line` with every `\uD800`–`\uDFFF` escape that is not half of a pair
/// replaced by `\uFFFD`.
fn replace_lone_surrogates(line: &[u8]) -> Vec<u8> {
    fn escape_at(line: &[u8], i: usize) -> Option<u16> {
        let hex = line.get(i + 2..i + 6)?;
        if line.get(i..i + 2)? != b"\\u" {
            return None;
        }
        u16::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()
    }
    let mut out = Vec::with_capacity(line.len());
    let mut i = 0;
    while i < line.len() {
        if line[i] == b'\\' && line.get(i + 1) == Some(&b'\\') {
            out.extend_from_slice(b"\\\\");
            i += 2;
            continue;
        }
        match escape_at(line, i) {
            Some(high @ 0xD800..=0xDBFF) if matches!(escape_at(line, i + 6), Some(0xDC00..=0xDFFF)) => {
                let _ = high;
                out.extend_from_slice(&line[i..i + 12]);
                i += 12;
            }
            Some(0xD800..=0xDFFF) => {
                out.extend_from_slice(b"\\ufffd");
                i += 6;
            }
            _ => {
                out.push(line[i]);
                i += 1;
            }
        }
    }
    out
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

pub use cordis_engine::stdio::isolate_stdout;

/// Reads lines from `input`, answers the ones [`screen`] refuses on
/// `answers`, and writes the good ones to `to_protocol`; ends at the end of
/// `input` (then `to_protocol` is closed, which ends the protocol).
///
/// Each `tools/call` gets its place in `arrivals` as its line is read, so
/// calls take effect in the order they arrived; a
/// `notifications/cancelled` for a call that has not started gives its
/// place up and marks it cancelled.
pub async fn pump_input(
    input: impl AsyncRead + Unpin,
    mut to_protocol: impl tokio::io::AsyncWrite + Unpin,
    answers: tokio::sync::mpsc::UnboundedSender<Vec<u8>>,
    arrivals: std::sync::Arc<crate::order::Arrivals>,
) {
    let mut reader = BufReader::new(input);
    let mut line = Vec::new();
    loop {
        line.clear();
        match read_line_capped(&mut reader, &mut line).await {
            Ok(Line::End) => break,
            Ok(Line::TooLong) => {
                let answer = error(Value::Null, -32700, format!("Parse error: a message longer than {MAX_LINE_BYTES} bytes"));
                let _ = answers.send(frame(&answer));
            }
            Ok(Line::Read) => match screen(&line) {
                Screened::Forward { call } => {
                    if let Some(id) = call {
                        arrivals.arrived(&id);
                    } else if let Some(id) = cancelled_request(&line) {
                        arrivals.cancelled(&id);
                    }
                    line.push(b'\n');
                    if to_protocol.write_all(&line).await.is_err() || to_protocol.flush().await.is_err() {
                        break;
                    }
                }
                Screened::Answer(answer) => {
                    let _ = answers.send(frame(&answer));
                }
                Screened::Skip => {}
            },
            Err(e) => {
                tracing::debug!("stdin: {e}");
                break;
            }
        }
    }
    let _ = to_protocol.shutdown().await;
}

/// The request a `notifications/cancelled` line names.
fn cancelled_request(line: &[u8]) -> Option<Value> {
    // Cheap test first: most lines are not cancellations.
    if !line.windows(b"notifications/cancelled".len()).any(|w| w == b"notifications/cancelled") {
        return None;
    }
    let message: Value = serde_json::from_slice(line).ok()?;
    (message.get("method")?.as_str()? == "notifications/cancelled").then(|| message.get("params")?.get("requestId").cloned())?
}

/// One message as a line.
fn frame(message: &Value) -> Vec<u8> {
    let mut bytes = message.to_string().into_bytes();
    bytes.push(b'\n');
    bytes
}

enum Line {
    Read,
    TooLong,
    End,
}

/// Reads one line into `line` (without its `\n`), keeping at most
/// [`MAX_LINE_BYTES`]; a longer line is read to its end and dropped.
async fn read_line_capped(reader: &mut (impl tokio::io::AsyncBufRead + Unpin), line: &mut Vec<u8>) -> std::io::Result<Line> {
    let mut over = false;
    let mut any = false;
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            return Ok(if !any {
                Line::End
            } else if over {
                Line::TooLong
            } else {
                Line::Read
            });
        }
        any = true;
        let (take, done) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (i, true),
            None => (buf.len(), false),
        };
        if !over {
            if line.len() + take > MAX_LINE_BYTES {
                over = true;
                line.clear();
            } else {
                line.extend_from_slice(&buf[..take]);
            }
        }
        reader.consume(if done { take + 1 } else { take });
        if done {
            return Ok(if over { Line::TooLong } else { Line::Read });
        }
    }
}

/// Writes every line it is sent to `output`, whole, in the order sent;
/// returns when every sender is gone. Runs on a thread of its own (the
/// protocol descriptor is a plain file, written with blocking writes).
pub fn write_output(mut output: impl std::io::Write, mut lines: tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>) {
    while let Some(line) = lines.blocking_recv() {
        if output.write_all(&line).and_then(|()| output.flush()).is_err() {
            break;
        }
    }
}

/// Copies the protocol's output, line by line, to `lines`. A response
/// settles its request: a place still held for it in `arrivals` (a call
/// answered before its handler took its place, say refused while its
/// params were read) is given up, so no later call waits for it.
pub async fn pump_output(
    from_protocol: impl AsyncRead + Unpin,
    lines: tokio::sync::mpsc::UnboundedSender<Vec<u8>>,
    arrivals: std::sync::Arc<crate::order::Arrivals>,
) {
    #[derive(serde::Deserialize)]
    struct Response {
        id: Option<Value>,
        #[serde(default)]
        method: Option<serde::de::IgnoredAny>,
    }
    let mut reader = BufReader::new(from_protocol);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                if !line.ends_with(b"\n") {
                    line.push(b'\n');
                }
                match serde_json::from_slice::<Response>(&line) {
                    Ok(Response { id: Some(id), method: None }) => drop(arrivals.take(&id)),
                    // An error response rmcp wrote without an `id` (a line it
                    // could not read): JSON-RPC gives it `id: null`.
                    Ok(Response { id: None, method: None }) => {
                        if let Ok(Value::Object(mut fields)) = serde_json::from_slice::<Value>(&line) {
                            if !fields.contains_key("id") {
                                fields.insert("id".into(), Value::Null);
                                line = frame(&Value::Object(fields));
                                // A line rmcp could not read: if it was a
                                // call, its place must not hold the calls
                                // after it.
                                arrivals.give_up_oldest();
                            }
                        }
                    }
                    _ => {}
                }
                if lines.send(line.clone()).is_err() {
                    break;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(line: &str) -> Value {
        match screen(line.as_bytes()) {
            Screened::Answer(v) => v,
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn every_refused_line_is_answered_as_json_rpc_says() {
        let a = answer("Content-Length: 120");
        assert_eq!((a["id"].clone(), a["error"]["code"].clone()), (Value::Null, json!(-32700)));
        let a = answer(r#"{"jsonrpc":"2.0","id":1,"method":"tools/ca"#);
        assert_eq!((a["id"].clone(), a["error"]["code"].clone()), (Value::Null, json!(-32700)));
        let a = answer(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#);
        assert_eq!((a["id"].clone(), a["error"]["code"].clone()), (Value::Null, json!(-32600)));
        assert_eq!(answer("[]")["error"]["code"], -32600);
        assert_eq!(answer("3")["error"]["code"], -32600);
        let a = answer(r#"{"jsonrpc":"1.0","id":7,"method":"ping"}"#);
        assert_eq!((a["id"].clone(), a["error"]["code"].clone()), (json!(7), json!(-32600)));
        assert_eq!(answer(r#"{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}"#)["id"], Value::Null);
        assert_eq!(answer(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":"x"}"#)["error"]["code"], -32602);
        assert_eq!(answer(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":[1]}"#)["error"]["code"], -32602);
        assert_eq!(answer(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"t","_meta":5}}"#)["error"]["code"], -32602);
        assert_eq!(answer(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"t","arguments":[]}}"#)["error"]["code"], -32602);
        assert_eq!(answer(r#"{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"t"}}"#)["id"], Value::Null);
        assert_eq!(screen(br#"{"jsonrpc":"2.0","method":"notifications/initialized","params":[1]}"#), Screened::Skip);
        assert_eq!(answer(r#"{"jsonrpc":"2.0","id":2}"#)["error"]["code"], -32600);
        let a = answer(
            r#"{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"todo_write","arguments":{"todos":[{"content":"half \ud83e here","status":"pending"}]}}}"#,
        );
        assert_eq!((a["id"].clone(), a["error"]["code"].clone()), (json!("c1"), json!(-32602)));
        assert!(a["error"]["message"].as_str().unwrap().contains("lone surrogate"), "{a}");
    }

    #[test]
    fn good_lines_pass_and_blank_ones_are_skipped() {
        let forward = Screened::Forward { call: None };
        assert_eq!(screen(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#), forward);
        assert_eq!(screen(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\r"), forward);
        assert_eq!(screen(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#), forward);
        assert_eq!(screen(br#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"t":"\ud83d\ude00 \\ud83e"}}"#), forward);
        assert_eq!(
            screen(br#"{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"t"}}"#),
            Screened::Forward { call: Some(json!("c")) }
        );
        assert_eq!(screen(b"  \r"), Screened::Skip);
        // A notification cannot be answered.
        assert_eq!(screen(br#"{"jsonrpc":"2.0","method":"x","params":{"t":"\udc00"}}"#), Screened::Skip);
    }

    #[tokio::test]
    async fn an_error_written_without_an_id_gets_id_null() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let written = b"{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32600,\"message\":\"Invalid request\"}}\n".to_vec();
        pump_output(std::io::Cursor::new(written), tx, std::sync::Arc::default()).await;
        let line = rx.recv().await.unwrap();
        let message: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(message["id"], Value::Null);
        assert!(message.as_object().unwrap().contains_key("id"));
    }

    #[test]
    fn only_lone_halves_are_replaced() {
        let fixed = replace_lone_surrogates(br#""\ud83d\ude00 \ud83e \\ud83e \udc00x""#);
        assert_eq!(std::str::from_utf8(&fixed).unwrap(), r#""\ud83d\ude00 \ufffd \\ud83e \ufffdx""#);
    }
}
