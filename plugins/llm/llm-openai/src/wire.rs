//! The Chat Completions wire format: the request body built from the
//! host's history and tool catalog, and the provider events read from each
//! streamed chunk.
//!
//! Facts about the API (OpenAI's Chat Completions, which DeepSeek and local
//! servers such as llama.cpp, vLLM and Ollama speak): a streamed answer is a
//! series of Server-Sent Events whose `data` is a JSON chunk
//! `{"choices": [{"index": 0, "delta": {...}, "finish_reason": ...}],
//! "usage": ...}`, ended by `data: [DONE]`. A delta carries `content` (the
//! answer's text), `reasoning_content` (DeepSeek's and other reasoning
//! models' thinking) and `tool_calls`, each `{"index", "id"?, "function":
//! {"name"?, "arguments"?}}` where `id` and `name` come with the first delta
//! of a call and `arguments` arrives in pieces. With `stream_options:
//! {"include_usage": true}` the last chunk carries `usage` and no choices.

use serde::Deserialize;
use serde_json::{json, Map, Value};

/// One message of the history, as the host sends it to `start`
/// (`cordis_session::Message` serialized): `{"role": "user", "text"}`,
/// `{"role": "assistant", "text", "toolCalls": [{"id", "name",
/// "arguments"}], "reasoning"?}` or `{"role": "tool", "callId", "text",
/// "isError"}`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum HistoryMessage {
    /// The user's (or a plugin's user-side) message.
    User {
        /// Its text.
        text: String,
    },
    /// The model's message.
    Assistant {
        /// Its text (may be empty).
        #[serde(default)]
        text: String,
        /// Its tool calls.
        #[serde(default, rename = "toolCalls")]
        tool_calls: Vec<HistoryCall>,
        /// Its reasoning, when the model streamed any.
        #[serde(default)]
        reasoning: String,
    },
    /// A tool's result.
    Tool {
        /// The call it answers.
        #[serde(rename = "callId")]
        call_id: String,
        /// The result text.
        text: String,
    },
}

/// One tool call of an assistant message in the history.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct HistoryCall {
    /// The call id.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The raw argument text.
    pub arguments: String,
}

/// One tool of the catalog: `{"name", "description", "parameters"}` (a
/// JSON Schema).
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct ToolSpec {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, for the model.
    #[serde(default)]
    pub description: String,
    /// The JSON Schema of its arguments object.
    pub parameters: Value,
}

/// The sampling settings of a request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sampling {
    /// `temperature`, when set.
    pub temperature: Option<f64>,
    /// `max_tokens`, when set.
    pub max_tokens: Option<u64>,
    /// DeepSeek's `thinking` and `reasoning_effort`, when set.
    pub thinking: Thinking,
}

/// DeepSeek's thinking switches, sent only when set: `thinking: {"type":
/// "enabled" | "disabled"}` and `reasoning_effort` (`low`, `high`, `max`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Thinking {
    /// `thinking.type`.
    pub thinking: Option<&'static str>,
    /// `reasoning_effort`.
    pub effort: Option<&'static str>,
}

/// The JSON body of a streamed Chat Completions request.
///
/// An assistant message's `reasoning` is sent back as `reasoning_content`
/// only when the message made tool calls: DeepSeek's thinking mode refuses
/// a history that drops the reasoning of a tool-calling message (HTTP 400),
/// and ignores it elsewhere, while servers without reasoning never produce
/// any.
pub fn request_body(model: &str, system: Option<&str>, messages: &[HistoryMessage], tools: &[ToolSpec], sampling: &Sampling) -> Value {
    let mut out = Vec::with_capacity(messages.len() + 1);
    if let Some(system) = system.filter(|s| !s.is_empty()) {
        out.push(json!({"role": "system", "content": system}));
    }
    for m in messages {
        out.push(match m {
            HistoryMessage::User { text } => json!({"role": "user", "content": text}),
            HistoryMessage::Assistant { text, tool_calls, reasoning } => {
                let mut msg = Map::new();
                msg.insert("role".into(), json!("assistant"));
                msg.insert("content".into(), if text.is_empty() && !tool_calls.is_empty() { Value::Null } else { json!(text) });
                if !tool_calls.is_empty() {
                    let calls: Vec<Value> = tool_calls
                        .iter()
                        .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": api_arguments(&c.arguments)}}))
                        .collect();
                    msg.insert("tool_calls".into(), Value::Array(calls));
                    if !reasoning.is_empty() {
                        msg.insert("reasoning_content".into(), json!(reasoning));
                    }
                }
                Value::Object(msg)
            }
            HistoryMessage::Tool { call_id, text } => json!({"role": "tool", "tool_call_id": call_id, "content": text}),
        });
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("messages".into(), Value::Array(out));
    body.insert("stream".into(), json!(true));
    body.insert("stream_options".into(), json!({"include_usage": true}));
    if !tools.is_empty() {
        let tools: Vec<Value> = tools
            .iter()
            .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}))
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(t) = sampling.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if let Some(n) = sampling.max_tokens {
        body.insert("max_tokens".into(), json!(n));
    }
    if let Some(kind) = sampling.thinking.thinking {
        body.insert("thinking".into(), json!({"type": kind}));
    }
    if let Some(effort) = sampling.thinking.effort {
        body.insert("reasoning_effort".into(), json!(effort));
    }
    Value::Object(body)
}

/// What one SSE event of the stream means.
#[derive(Debug, Clone, PartialEq)]
pub enum Chunk {
    /// `data: [DONE]`: the stream ended normally.
    Done,
    /// A chunk: the provider events it carries (possibly none).
    Events(Vec<Value>),
    /// The server reported an error inside the stream.
    ServerError(String),
}

/// Reads one SSE `data` payload into provider events (see the crate docs
/// for their shapes).
///
/// # Errors
/// A message saying what is wrong when the payload is not a chunk (not
/// JSON, or a field of the wrong type).
pub fn parse_chunk(data: &str) -> Result<Chunk, String> {
    let data = data.trim();
    if data == "[DONE]" {
        return Ok(Chunk::Done);
    }
    let value: Value = serde_json::from_str(data).map_err(|e| format!("a chunk is not JSON ({e}): {}", clip(data, 200)))?;
    let Value::Object(chunk) = value else {
        return Err(format!("a chunk is not a JSON object: {}", clip(data, 200)));
    };
    if let Some(error) = chunk.get("error") {
        return Ok(Chunk::ServerError(error_message(error)));
    }
    let mut events = Vec::new();
    match chunk.get("choices") {
        None | Some(Value::Null) => {}
        Some(Value::Array(choices)) => {
            for choice in choices {
                // One answer per request: other choices (n > 1) are ignored.
                if choice.get("index").and_then(Value::as_u64).unwrap_or(0) != 0 {
                    continue;
                }
                choice_events(choice, &mut events).map_err(|e| format!("{e}: {}", clip(data, 200)))?;
            }
        }
        Some(_) => return Err(format!("a chunk's `choices` is not a list: {}", clip(data, 200))),
    }
    if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
        events.push(json!({"type": "usage", "usage": usage_of(usage)}));
    }
    Ok(Chunk::Events(events))
}

fn choice_events(choice: &Value, events: &mut Vec<Value>) -> Result<(), String> {
    if let Some(delta) = choice.get("delta").filter(|d| !d.is_null()) {
        if !delta.is_object() {
            return Err("a chunk's `delta` is not an object".into());
        }
        if let Some(text) = string_field(delta, "reasoning_content")? {
            if !text.is_empty() {
                events.push(json!({"type": "reasoning-delta", "text": text}));
            }
        }
        if let Some(text) = string_field(delta, "content")? {
            if !text.is_empty() {
                events.push(json!({"type": "text-delta", "text": text}));
            }
        }
        match delta.get("tool_calls") {
            None | Some(Value::Null) => {}
            Some(Value::Array(calls)) => {
                for call in calls {
                    // Without an index the call is told apart by its id
                    // (the engine's assembler), never by its position.
                    let index = match call.get("index") {
                        None | Some(Value::Null) => None,
                        Some(i) => Some(i.as_u64().ok_or("a tool call's `index` is not a whole number")?),
                    };
                    let function = call.get("function").filter(|f| !f.is_null());
                    if function.is_some_and(|f| !f.is_object()) {
                        return Err("a tool call's `function` is not an object".into());
                    }
                    let mut event = Map::new();
                    event.insert("type".into(), json!("tool-call-delta"));
                    if let Some(index) = index {
                        event.insert("call".into(), json!(index));
                    }
                    if let Some(id) = string_field(call, "id")?.filter(|s| !s.is_empty()) {
                        event.insert("id".into(), json!(id));
                    }
                    if let Some(f) = function {
                        if let Some(name) = string_field(f, "name")?.filter(|s| !s.is_empty()) {
                            event.insert("name".into(), json!(name));
                        }
                        event.insert("argumentsDelta".into(), json!(string_field(f, "arguments")?.unwrap_or_default()));
                    } else {
                        event.insert("argumentsDelta".into(), json!(""));
                    }
                    events.push(Value::Object(event));
                }
            }
            Some(_) => return Err("a chunk's `tool_calls` is not a list".into()),
        }
    }
    match choice.get("finish_reason") {
        None | Some(Value::Null) => {}
        Some(Value::String(reason)) => events.push(json!({"type": "finish", "reason": finish_reason(reason)})),
        Some(_) => return Err("a chunk's `finish_reason` is not a string".into()),
    }
    Ok(())
}

fn string_field<'a>(v: &'a Value, key: &str) -> Result<Option<&'a str>, String> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(format!("a chunk's `{key}` is not a string")),
    }
}

/// A call's argument text as the API takes it back in a later request:
/// the text when it is JSON, else `{}`. A call cut off mid-arguments was
/// never run (its result says so), and some providers refuse a whole
/// request whose history holds arguments that are not JSON.
pub fn api_arguments(arguments: &str) -> &str {
    if serde_json::from_str::<serde::de::IgnoredAny>(arguments).is_ok() {
        arguments
    } else {
        "{}"
    }
}

/// The harness's finish reason for an API `finish_reason`: `stop` →
/// `{"kind": "stop"}`, `tool_calls` (and the older `function_call`) →
/// `{"kind": "tool-calls"}`, `length` → `{"kind": "length"}`,
/// `content_filter` → `{"kind": "content-filter"}`, anything else →
/// `{"kind": "other", "raw": REASON}`.
pub fn finish_reason(reason: &str) -> Value {
    match reason {
        "stop" => json!({"kind": "stop"}),
        "tool_calls" | "function_call" => json!({"kind": "tool-calls"}),
        "length" => json!({"kind": "length"}),
        "content_filter" => json!({"kind": "content-filter"}),
        other => json!({"kind": "other", "raw": other}),
    }
}

/// The harness's usage record for an API `usage` object:
/// `{"inputTokens", "outputTokens", "cacheReadTokens", "reasoningTokens"}`.
/// `inputTokens` counts the prompt tokens not read from the cache (as the
/// harness's DeepSeek logs do: `prompt_tokens` minus the cached ones), the
/// cached ones are `prompt_cache_hit_tokens` (DeepSeek) or
/// `prompt_tokens_details.cached_tokens` (OpenAI); keys the server did not
/// report are left out.
pub fn usage_of(usage: &Value) -> Value {
    let n = |v: Option<&Value>| v.and_then(Value::as_u64);
    let prompt = n(usage.get("prompt_tokens"));
    let cached = n(usage.get("prompt_cache_hit_tokens")).or_else(|| n(usage.pointer("/prompt_tokens_details/cached_tokens")));
    let mut out = Map::new();
    if let Some(p) = prompt {
        out.insert("inputTokens".into(), json!(p.saturating_sub(cached.unwrap_or(0))));
    }
    if let Some(c) = n(usage.get("completion_tokens")) {
        out.insert("outputTokens".into(), json!(c));
    }
    if let Some(c) = cached {
        out.insert("cacheReadTokens".into(), json!(c));
    }
    if let Some(r) = n(usage.pointer("/completion_tokens_details/reasoning_tokens")) {
        out.insert("reasoningTokens".into(), json!(r));
    }
    Value::Object(out)
}

/// The message of an API error object (`{"message", "type", "code"}`) or
/// of any other JSON the server sent as an error.
pub fn error_message(error: &Value) -> String {
    match error {
        Value::String(s) => clip(s, 500),
        Value::Object(o) => match o.get("message").and_then(Value::as_str) {
            Some(m) => clip(m, 500),
            None => clip(&error.to_string(), 500),
        },
        other => clip(&other.to_string(), 500),
    }
}

/// Whether an error body says the request did not fit the model's context
/// window (OpenAI: code `context_length_exceeded`; DeepSeek and others: a
/// message about the maximum context length).
pub fn is_context_length(body: &Value) -> bool {
    let error = body.get("error").unwrap_or(body);
    if error.get("code").and_then(Value::as_str) == Some("context_length_exceeded") {
        return true;
    }
    let message = error_message(error).to_ascii_lowercase();
    message.contains("context length") || message.contains("context_length") || message.contains("context window")
}

/// `text` cut to at most `max` characters (at a character boundary), with
/// `…` when cut.
pub fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_carries_tools_history_and_sampling() {
        let history = vec![
            HistoryMessage::User { text: "plan".into() },
            HistoryMessage::Assistant {
                text: String::new(),
                tool_calls: vec![HistoryCall { id: "c1".into(), name: "todo_write".into(), arguments: "{\"todos\":[]}".into() }],
                reasoning: "think".into(),
            },
            HistoryMessage::Tool { call_id: "c1".into(), text: "ok".into() },
            HistoryMessage::Assistant { text: "done".into(), tool_calls: vec![], reasoning: "ignored".into() },
        ];
        let tools = vec![ToolSpec { name: "todo_write".into(), description: "d".into(), parameters: json!({"type": "object"}) }];
        let body = request_body(
            "m",
            Some("sys"),
            &history,
            &tools,
            &Sampling { temperature: Some(0.5), max_tokens: Some(10), thinking: Thinking::default() },
        );
        assert_eq!(body["messages"][0], json!({"role": "system", "content": "sys"}));
        assert_eq!(
            body["messages"][2],
            json!({"role": "assistant", "content": null, "reasoning_content": "think", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "todo_write", "arguments": "{\"todos\":[]}"}}]})
        );
        assert_eq!(body["messages"][3], json!({"role": "tool", "tool_call_id": "c1", "content": "ok"}));
        assert_eq!(body["messages"][4], json!({"role": "assistant", "content": "done"}));
        assert_eq!(body["tools"][0]["function"]["parameters"], json!({"type": "object"}));
        assert_eq!((body["temperature"].clone(), body["max_tokens"].clone(), body["stream"].clone()), (json!(0.5), json!(10), json!(true)));
    }

    #[test]
    fn chunks_become_provider_events() {
        let c = parse_chunk(r#"{"choices":[{"index":0,"delta":{"reasoning_content":"hm","content":null},"finish_reason":null}]}"#).unwrap();
        assert_eq!(c, Chunk::Events(vec![json!({"type": "reasoning-delta", "text": "hm"})]));
        let c = parse_chunk(
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"c","type":"function","function":{"name":"f","arguments":"{\""}}]},"finish_reason":"tool_calls"}]}"#,
        )
        .unwrap();
        assert_eq!(
            c,
            Chunk::Events(vec![
                json!({"type": "tool-call-delta", "call": 1, "id": "c", "name": "f", "argumentsDelta": "{\""}),
                json!({"type": "finish", "reason": {"kind": "tool-calls"}})
            ])
        );
        let c = parse_chunk(r#"{"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":5,"prompt_cache_hit_tokens":60,"completion_tokens_details":{"reasoning_tokens":2}}}"#).unwrap();
        assert_eq!(
            c,
            Chunk::Events(vec![
                json!({"type": "usage", "usage": {"inputTokens": 40, "outputTokens": 5, "cacheReadTokens": 60, "reasoningTokens": 2}})
            ])
        );
        assert_eq!(parse_chunk(" [DONE]").unwrap(), Chunk::Done);
        assert_eq!(parse_chunk(r#"{"error":{"message":"overloaded"}}"#).unwrap(), Chunk::ServerError("overloaded".into()));
        assert!(parse_chunk(r#"{"choices":[{"delta":{"content":"#).unwrap_err().starts_with("a chunk is not JSON"));
        assert!(parse_chunk(r#"{"choices":[{"delta":{"content":5}}]}"#).unwrap_err().contains("`content` is not a string"));
    }

    #[test]
    fn context_length_errors_are_recognized() {
        assert!(is_context_length(&json!({"error": {"code": "context_length_exceeded", "message": "x"}})));
        assert!(is_context_length(&json!({"error": {"message": "This model's maximum context length is 131072 tokens."}})));
        assert!(!is_context_length(&json!({"error": {"message": "bad request"}})));
    }
}
