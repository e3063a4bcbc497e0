//! `deriveMessages()`: the LLM history, built from surface events only.
//!
//! Surface events are `user/message`, `assistant/message` and `tool/result`
//! carrying `surfaceOp: "append"`. Everything else (turn and step markers,
//! `tool/call`, plugin events such as `todo/write`, opaque events) is not
//! part of the conversation the model sees.

use serde::Serialize;
use serde_json::Value;

use super::event::{core, Event};

/// One tool call in an assistant message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolCallPart {
    /// The call id.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The raw argument text the model sent.
    pub arguments: String,
}

/// One message of the LLM history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum Message {
    /// What the user (or a plugin speaking as the user) said.
    User {
        /// The text blocks, joined with newlines.
        text: String,
    },
    /// What the model said and called.
    Assistant {
        /// The text blocks, joined with newlines.
        text: String,
        /// Tool calls in order.
        #[serde(rename = "toolCalls")]
        tool_calls: Vec<ToolCallPart>,
    },
    /// A tool's result.
    Tool {
        /// The call this answers.
        #[serde(rename = "callId")]
        call_id: String,
        /// The result text.
        text: String,
        /// Whether the call failed.
        #[serde(rename = "isError")]
        is_error: bool,
    },
}

/// Derives the LLM history from `events` (DESIGN §7).
pub fn derive_messages(events: &[Event]) -> Vec<Message> {
    events.iter().filter(|e| e.surface_op.as_deref() == Some("append")).filter_map(message_of).collect()
}

fn message_of(event: &Event) -> Option<Message> {
    let data: Value = serde_json::from_str(event.data.get()).ok()?;
    match event.kind.as_str() {
        core::USER_MESSAGE => Some(Message::User { text: text_blocks(data.get("content")) }),
        core::ASSISTANT_MESSAGE => {
            let content = data.get("message").and_then(|m| m.get("content"));
            let tool_calls = content
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool-call"))
                .map(|b| ToolCallPart {
                    id: str_of(b, "id"),
                    name: str_of(b, "name"),
                    arguments: match b.get("arguments") {
                        Some(Value::String(s)) => s.clone(),
                        Some(other) => other.to_string(),
                        None => String::new(),
                    },
                })
                .collect();
            Some(Message::Assistant { text: text_blocks(content), tool_calls })
        }
        core::TOOL_RESULT => {
            let block = data
                .get("message")
                .and_then(|m| m.get("content"))
                .and_then(Value::as_array)
                .and_then(|blocks| blocks.iter().find(|b| b.get("type").and_then(Value::as_str) == Some("tool-result")))?;
            Some(Message::Tool {
                call_id: str_of(block, "toolCallId"),
                text: text_blocks(block.get("content")),
                is_error: block.get("isError").and_then(Value::as_bool).unwrap_or(false),
            })
        }
        // A plugin's surface event (e.g. `todo/nudge`): a user-side message
        // carried as `{"role": "user", "text": ...}`.
        _ if data.get("role").and_then(Value::as_str) == Some("user") => {
            data.get("text").and_then(Value::as_str).map(|text| Message::User { text: text.to_string() })
        }
        _ => None,
    }
}

fn str_of(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or_default().to_string()
}

fn text_blocks(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}
