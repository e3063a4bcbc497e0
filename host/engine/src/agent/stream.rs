//! Assembling a streamed answer: a provider's events in, the harness's
//! `assistant/chunk` records and the finished [`ModelStep`] out.
//!
//! A provider (the `model` service, see `plugins/llm/llm-openai`) sends
//! `reasoning-delta` / `text-delta` `{"text"}`, `tool-call-delta` `{"call",
//! "id"?, "name"?, "argumentsDelta"}`, `usage` and `finish` events. The
//! assembler numbers the answer's blocks in the order they begin (as the
//! harness does: reasoning, text and each tool call are blocks), and emits
//! the chunks the harness records for a streamed response:
//!
//! - `{"type": "block-start", "index", "blockType": "reasoning" | "text" |
//!   "tool-call"}` when a block begins;
//! - `{"type": "reasoning-delta" | "text-delta", "index", "text"}` and
//!   `{"type": "tool-call-delta", "index", "id", "name",
//!   "argumentsDelta"}` for each piece;
//! - at the end, `{"type": "block-end", "index", "block": {...}}` for each
//!   block in order (the whole block: `{"type": "text", "text"}`,
//!   `{"type": "tool-call", "id", "name", "arguments"}`), then `{"type":
//!   "usage", "usage"}` when the provider reported it, then `{"type":
//!   "finish", "reason": {"kind"}}`.
//!
//! Tool-call fragments are assembled by call, not by position: a fragment
//! with an `id` not seen before starts a new call (two calls the provider
//! put at one `call` index stay two); one without an id continues the
//! latest call at its index (or the latest call, when it has no index), and
//! a new `name` there starts a new call. A fragment that names no call at
//! all (no id, no index, no name, and no call open), or a call that ends
//! without a name, fails the step with a provider-format error: nothing is
//! guessed, and the log holds exactly the calls that ran.

use serde_json::{json, Value};

use super::model::{ModelStep, ToolCallRequest};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Reasoning,
    Text,
    ToolCall,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Reasoning => "reasoning",
            Kind::Text => "text",
            Kind::ToolCall => "tool-call",
        }
    }
}

#[derive(Debug)]
struct Block {
    kind: Kind,
    /// The API's tool-call index, for a tool call.
    call: Option<u64>,
    id: String,
    name: String,
    /// The text, or a tool call's argument text.
    text: String,
}

/// What one provider event asks of the caller besides recording chunks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fed {
    /// Nothing more.
    Chunks,
    /// A notice for the terminal (a retry).
    Notice(String),
    /// The provider failed: its kind (`auth`, `timeout`, ...) and message.
    Failed(String, String),
}

/// Builds one step's answer from a provider's events.
#[derive(Debug, Default)]
pub struct Assembler {
    step: u32,
    blocks: Vec<Block>,
    usage: Option<Value>,
    finish: Option<Value>,
}

impl Assembler {
    /// An assembler for model step `step` (used in the ids of tool calls a
    /// provider sends without one: `call_<step>_<n>`).
    pub fn new(step: u32) -> Assembler {
        Assembler { step, ..Assembler::default() }
    }

    /// Whether the provider said the answer is complete (`finish`).
    pub fn finished(&self) -> bool {
        self.finish.is_some()
    }

    fn block(&mut self, kind: Kind, call: Option<u64>, out: &mut Vec<Value>) -> usize {
        // One reasoning and one text block per answer.
        if kind != Kind::ToolCall {
            if let Some(i) = self.blocks.iter().position(|b| b.kind == kind) {
                return i;
            }
        }
        self.new_block(kind, call, out)
    }

    fn new_block(&mut self, kind: Kind, call: Option<u64>, out: &mut Vec<Value>) -> usize {
        let index = self.blocks.len();
        self.blocks.push(Block { kind, call, id: String::new(), name: String::new(), text: String::new() });
        out.push(json!({"type": "block-start", "index": index, "blockType": kind.name()}));
        index
    }

    /// The tool-call block a fragment belongs to (see the module's rules),
    /// started if new; `None` when the fragment names no call.
    fn call_block(&mut self, call: Option<u64>, id: Option<&str>, name: Option<&str>, out: &mut Vec<Value>) -> Option<usize> {
        let is_call = |b: &Block| b.kind == Kind::ToolCall;
        if let Some(id) = id {
            if let Some(i) = self.blocks.iter().position(|b| is_call(b) && b.id == id) {
                return Some(i);
            }
            return Some(self.new_block(Kind::ToolCall, call, out));
        }
        let latest = match call {
            Some(c) => self.blocks.iter().rposition(|b| is_call(b) && b.call == Some(c)),
            None => self.blocks.iter().rposition(is_call),
        };
        match latest {
            Some(i) if name.is_some_and(|n| !self.blocks[i].name.is_empty() && self.blocks[i].name != n) => {
                Some(self.new_block(Kind::ToolCall, call, out))
            }
            Some(i) => Some(i),
            None if call.is_some() || name.is_some() => Some(self.new_block(Kind::ToolCall, call, out)),
            None => None,
        }
    }

    /// Takes one provider event; appends the chunks to record to `out`.
    ///
    /// # Errors
    /// What is wrong with an event that is not one of the provider events.
    pub fn feed(&mut self, event: &Value, out: &mut Vec<Value>) -> Result<Fed, String> {
        let kind = event.get("type").and_then(Value::as_str).ok_or_else(|| format!("an event without a `type`: {}", clip(event)))?;
        let text = || event.get("text").and_then(Value::as_str).ok_or_else(|| format!("a {kind} event without its `text`: {}", clip(event)));
        match kind {
            "reasoning-delta" | "text-delta" => {
                let text = text()?;
                let block_kind = if kind == "text-delta" { Kind::Text } else { Kind::Reasoning };
                let index = self.block(block_kind, None, out);
                self.blocks[index].text.push_str(text);
                out.push(json!({"type": kind, "index": index, "text": text}));
            }
            "tool-call-delta" => {
                let call = match event.get("call") {
                    None | Some(Value::Null) => None,
                    Some(c) => {
                        Some(c.as_u64().ok_or_else(|| format!("a tool-call-delta event whose `call` index is not a whole number: {}", clip(event)))?)
                    }
                };
                let id = event.get("id").and_then(Value::as_str).filter(|s| !s.is_empty());
                let name = event.get("name").and_then(Value::as_str).filter(|s| !s.is_empty());
                let delta = event.get("argumentsDelta").and_then(Value::as_str).unwrap_or_default();
                let index = self.call_block(call, id, name, out).ok_or_else(|| {
                    format!(
                        "provider-format error: a tool-call fragment names no call (no id, no index, no name) and no call is open: {}",
                        clip(event)
                    )
                })?;
                let step = self.step;
                let calls_before = self.blocks[..index].iter().filter(|b| b.kind == Kind::ToolCall).count();
                let block = &mut self.blocks[index];
                if block.id.is_empty() {
                    block.id = match id {
                        Some(id) => id.to_string(),
                        None => format!("call_{step}_{}", calls_before + 1),
                    };
                }
                if block.name.is_empty() {
                    if let Some(name) = name {
                        block.name = name.to_string();
                    }
                }
                block.text.push_str(delta);
                out.push(json!({"type": "tool-call-delta", "index": index, "id": block.id, "name": block.name, "argumentsDelta": delta}));
            }
            "usage" => self.usage = event.get("usage").cloned(),
            "finish" => self.finish = Some(event.get("reason").cloned().unwrap_or_else(|| json!({"kind": "stop"}))),
            "retry" => {
                let wait = event.get("delayMs").and_then(Value::as_u64).unwrap_or(0);
                let reason = event.get("reason").and_then(Value::as_str).unwrap_or("a failure");
                let attempt = event.get("attempt").and_then(Value::as_u64).unwrap_or(0);
                let retries = event.get("retries").and_then(Value::as_u64).unwrap_or(0);
                return Ok(Fed::Notice(format!("{reason}; retrying in {:.1} s ({attempt} of {retries})", wait as f64 / 1000.0)));
            }
            "error" => {
                let message = event.get("message").and_then(Value::as_str).unwrap_or("the model service failed").to_string();
                let kind = event.get("kind").and_then(Value::as_str).unwrap_or("error").to_string();
                return Ok(Fed::Failed(kind, message));
            }
            other => return Err(format!("an event of unknown type `{other}`")),
        }
        Ok(Fed::Chunks)
    }

    /// Ends the answer: appends the closing chunks (each block's
    /// `block-end`, `usage`, `finish`) to `out` and returns the step.
    ///
    /// # Errors
    /// A provider-format error naming the tool call that never got a name
    /// (nothing can run it); no chunk is added then.
    pub fn end(self, out: &mut Vec<Value>) -> Result<ModelStep, String> {
        if let Some(b) = self.blocks.iter().find(|b| b.kind == Kind::ToolCall && b.name.is_empty()) {
            return Err(format!("provider-format error: tool call `{}` ended without a name", b.id));
        }
        let mut step = ModelStep::default();
        for (index, b) in self.blocks.iter().enumerate() {
            let block = match b.kind {
                Kind::Reasoning => json!({"type": "reasoning", "text": b.text}),
                Kind::Text => json!({"type": "text", "text": b.text}),
                Kind::ToolCall => json!({"type": "tool-call", "id": b.id, "name": b.name, "arguments": b.text}),
            };
            out.push(json!({"type": "block-end", "index": index, "block": block}));
        }
        let has_calls = self.blocks.iter().any(|b| b.kind == Kind::ToolCall);
        if let Some(usage) = &self.usage {
            out.push(json!({"type": "usage", "usage": usage}));
        }
        let reason = self.finish.unwrap_or_else(|| json!({"kind": if has_calls { "tool-calls" } else { "stop" }}));
        step.finish = reason.get("kind").and_then(Value::as_str).map(str::to_string);
        out.push(json!({"type": "finish", "reason": reason}));
        for b in self.blocks {
            match b.kind {
                Kind::Reasoning => step.reasoning = b.text,
                Kind::Text => step.text = b.text,
                Kind::ToolCall => step.tool_calls.push(ToolCallRequest { id: b.id, name: b.name, arguments: b.text }),
            }
        }
        step.usage = self.usage;
        Ok(step)
    }
}

fn clip(v: &Value) -> String {
    let text = v.to_string();
    match text.char_indices().nth(200) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_numbered_in_order_and_calls_assembled() {
        let mut a = Assembler::new(1);
        let mut out = Vec::new();
        for e in [
            json!({"type": "reasoning-delta", "text": "think"}),
            json!({"type": "tool-call-delta", "call": 0, "id": "c0", "name": "todo_write", "argumentsDelta": "{\"to"}),
            json!({"type": "tool-call-delta", "call": 1, "name": "version", "argumentsDelta": "{}"}),
            json!({"type": "tool-call-delta", "call": 0, "argumentsDelta": "dos\": []}"}),
            json!({"type": "usage", "usage": {"inputTokens": 3}}),
            json!({"type": "finish", "reason": {"kind": "tool-calls"}}),
        ] {
            assert_eq!(a.feed(&e, &mut out).unwrap(), Fed::Chunks);
        }
        let step = a.end(&mut out).unwrap();
        assert_eq!(step.reasoning, "think");
        assert_eq!(step.tool_calls[0], ToolCallRequest { id: "c0".into(), name: "todo_write".into(), arguments: "{\"todos\": []}".into() });
        assert_eq!(step.tool_calls[1].id, "call_1_2");
        let types: Vec<&str> = out.iter().map(|c| c["type"].as_str().unwrap()).collect();
        assert_eq!(
            types,
            [
                "block-start",
                "reasoning-delta",
                "block-start",
                "tool-call-delta",
                "block-start",
                "tool-call-delta",
                "tool-call-delta",
                "block-end",
                "block-end",
                "block-end",
                "usage",
                "finish"
            ]
        );
        assert_eq!(out[6], json!({"type": "tool-call-delta", "index": 1, "id": "c0", "name": "todo_write", "argumentsDelta": "dos\": []}"}));
    }

    fn assemble(events: &[Value]) -> Result<Vec<ToolCallRequest>, String> {
        let mut a = Assembler::new(1);
        let mut out = Vec::new();
        for e in events {
            a.feed(e, &mut out)?;
        }
        Ok(a.end(&mut out)?.tool_calls)
    }

    #[test]
    fn calls_are_assembled_by_id_not_by_position() {
        // Two calls at one index with different ids stay two.
        let calls = assemble(&[
            json!({"type": "tool-call-delta", "call": 0, "id": "a", "name": "todo_write", "argumentsDelta": "{\"todos\":"}),
            json!({"type": "tool-call-delta", "call": 0, "argumentsDelta": "[]}"}),
            json!({"type": "tool-call-delta", "call": 0, "id": "b", "name": "todo_write", "argumentsDelta": "{\"todos\":[]}"}),
        ])
        .unwrap();
        assert_eq!(
            calls.iter().map(|c| (c.id.as_str(), c.arguments.as_str())).collect::<Vec<_>>(),
            [("a", "{\"todos\":[]}"), ("b", "{\"todos\":[]}")]
        );
        // A no-argument tool at the same index, by name.
        let calls = assemble(&[
            json!({"type": "tool-call-delta", "call": 0, "name": "todo_write", "argumentsDelta": "{}"}),
            json!({"type": "tool-call-delta", "call": 0, "name": "version", "argumentsDelta": ""}),
        ])
        .unwrap();
        assert_eq!(calls.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["todo_write", "version"]);
        // No index, the id only on each call's first fragment.
        let calls = assemble(&[
            json!({"type": "tool-call-delta", "id": "a", "name": "x", "argumentsDelta": "{\"n\""}),
            json!({"type": "tool-call-delta", "argumentsDelta": ":1}"}),
            json!({"type": "tool-call-delta", "id": "b", "name": "y", "argumentsDelta": "{}"}),
        ])
        .unwrap();
        assert_eq!(calls.iter().map(|c| (c.id.as_str(), c.arguments.as_str())).collect::<Vec<_>>(), [("a", "{\"n\":1}"), ("b", "{}")]);
        // Fragments that cannot be attributed fail the step, by name.
        let e = assemble(&[json!({"type": "tool-call-delta", "argumentsDelta": "{}"})]).unwrap_err();
        assert!(e.starts_with("provider-format error: a tool-call fragment names no call"), "{e}");
        let e = assemble(&[json!({"type": "tool-call-delta", "call": 0, "id": "a", "argumentsDelta": "{}"})]).unwrap_err();
        assert_eq!(e, "provider-format error: tool call `a` ended without a name");
    }

    #[test]
    fn errors_and_notices_are_reported() {
        let mut a = Assembler::new(1);
        let mut out = Vec::new();
        let fed = a.feed(&json!({"type": "error", "kind": "auth", "message": "m"}), &mut out).unwrap();
        assert_eq!(fed, Fed::Failed("auth".into(), "m".into()));
        let fed = a.feed(&json!({"type": "retry", "attempt": 1, "retries": 2, "delayMs": 1500, "reason": "HTTP 429"}), &mut out).unwrap();
        assert_eq!(fed, Fed::Notice("HTTP 429; retrying in 1.5 s (1 of 2)".into()));
        assert!(a.feed(&json!({"type": "nonsense"}), &mut out).is_err());
        assert!(out.is_empty());
    }
}
