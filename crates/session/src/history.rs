//! `deriveMessages()`: the LLM history, built from surface events only.
//!
//! Surface events are `user/message`, `assistant/message` and `tool/result`
//! carrying a `surfaceOp`. Everything else (turn and step markers,
//! `tool/call`, plugin events such as `todo/write`, opaque events) is not
//! part of the conversation the model sees.
//!
//! The surface is folded as the harness folds it: `"append"` puts the
//! event's message at the end; `{"op":"replace","start":S,"end":E}` puts it
//! in place of the messages from the event with seq `S` to the one with seq
//! `E` (compaction). Then the history is made well-formed, whatever the log
//! holds, because a model API refuses anything else: every tool call of an
//! assistant message is answered by exactly one tool result, right after
//! that message. A result whose call is not awaiting one (no assistant
//! message before it made the call, or it was answered already) is left
//! out; a call left without a result (its result was lost, or the history
//! moved on) gets an error result where its results belong. Each such
//! repair is reported by [`derive_history`] with the event's seq.

use serde::Serialize;
use serde_json::Value;

use crate::event::{core, Event, SurfaceOp};

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
        /// The model's reasoning blocks, joined with newlines (empty when
        /// it streamed none). A provider sends it back where its API needs
        /// it (DeepSeek's thinking mode, for messages with tool calls).
        #[serde(skip_serializing_if = "String::is_empty")]
        reasoning: String,
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

/// Derives the LLM history from `events`: always well-formed
/// (see the [module](self) notes).
pub fn derive_messages(events: &[Event]) -> Vec<Message> {
    derive_history(events).0
}

/// The text of the error result the history gives a call left without one.
pub const MISSING_RESULT_TEXT: &str = "Error: no result was recorded for this call (the log lost it, or the session moved on before it finished)";

/// [`derive_messages`], plus each repair it made or surface event it could
/// not place, as `(seq of the event, what happened)`, in seq order.
pub fn derive_history(events: &[Event]) -> (Vec<Message>, Vec<(u64, String)>) {
    let (surface, notes) = fold_surface(events);
    well_formed(surface, notes)
}

/// The surface of `events`: each surface node as `(seq, message)`, in
/// history order, replacements applied, before the history is made
/// well-formed (so a node's message may be an orphaned result). A
/// compaction picks its range from these nodes.
pub fn surface_nodes(events: &[Event]) -> Vec<(u64, Option<Message>)> {
    fold_surface(events).0
}

/// The history `surface` yields, made well-formed (see the [module](self)
/// notes), with the repairs added to `notes`, sorted by seq.
pub fn well_formed_history(surface: Vec<(u64, Option<Message>)>) -> Vec<Message> {
    well_formed(surface, Vec::new()).0
}

type Surface = Vec<(u64, Option<Message>)>;

fn fold_surface(events: &[Event]) -> (Surface, Vec<(u64, String)>) {
    let mut notes = Vec::new();
    // The surface: (seq, message) in history order.
    let mut surface: Surface = Vec::new();
    for event in events {
        let Some(op) = &event.surface_op else { continue };
        // Core surface types, and a plugin's surface events that carry a
        // user-side message (`todo/nudge`).
        if !core::is_surface(&event.kind) && (core::is_core(&event.kind) || message_of(event).is_none()) {
            continue;
        }
        match op {
            SurfaceOp::Append => surface.push((event.seq, message_of(event))),
            SurfaceOp::Replace { start, end } => {
                let find = |seq: u64| surface.iter().position(|(s, _)| *s == seq);
                let (Some(from), Some(to)) = (find(*start), find(*end)) else {
                    notes.push((
                        event.seq,
                        format!("{} replaces seqs {start} to {end}, which are not both in the history; left out of the history", event.kind),
                    ));
                    continue;
                };
                if from > to {
                    notes.push((
                        event.seq,
                        format!(
                            "{} replaces from seq {start} to seq {end}, which comes before it in the history; left out of the history",
                            event.kind
                        ),
                    ));
                    continue;
                }
                if let Some(sources) = &event.source_event_seqs {
                    let missing: Vec<String> =
                        surface[from..=to].iter().map(|(s, _)| *s).filter(|s| !sources.contains(s)).map(|s| s.to_string()).collect();
                    if !missing.is_empty() {
                        notes.push((
                            event.seq,
                            format!("{} replaces seqs {} without citing them in sourceEventSeqs (applied)", event.kind, missing.join(", ")),
                        ));
                    }
                }
                surface.splice(from..=to, [(event.seq, message_of(event))]);
            }
            SurfaceOp::Other(raw) => notes.push((
                event.seq,
                format!("{} has surfaceOp {}, which is neither \"append\" nor a replace; left out of the history", event.kind, raw.get()),
            )),
        }
    }
    (surface, notes)
}

fn well_formed(surface: Surface, mut notes: Vec<(u64, String)>) -> (Vec<Message>, Vec<(u64, String)>) {
    // Well-formed: each call answered once, right after its message.
    let mut out: Vec<Message> = Vec::with_capacity(surface.len());
    let mut awaiting: Vec<(String, u64)> = Vec::new();
    let close = |out: &mut Vec<Message>, awaiting: &mut Vec<(String, u64)>, notes: &mut Vec<(u64, String)>| {
        for (call_id, seq) in awaiting.drain(..) {
            notes.push((seq, format!("call {call_id} has no result; the history gives it an error result")));
            out.push(Message::Tool { call_id, text: MISSING_RESULT_TEXT.to_string(), is_error: true });
        }
    };
    for (seq, message) in surface {
        let Some(message) = message else { continue };
        match message {
            Message::Tool { ref call_id, .. } => match awaiting.iter().position(|(c, _)| c == call_id) {
                Some(i) => {
                    awaiting.remove(i);
                    out.push(message);
                }
                None => notes.push((
                    seq,
                    format!("tool/result for call {call_id}, which no assistant message right before it awaits; left out of the history"),
                )),
            },
            other => {
                close(&mut out, &mut awaiting, &mut notes);
                if let Message::Assistant { tool_calls, .. } = &other {
                    awaiting.extend(tool_calls.iter().map(|c| (c.id.clone(), seq)));
                }
                out.push(other);
            }
        }
    }
    close(&mut out, &mut awaiting, &mut notes);
    notes.sort_by_key(|(seq, _)| *seq);
    (out, notes)
}

/// The message one surface event yields, if any (no repair: see
/// [`derive_messages`] for a history).
pub fn event_message(event: &Event) -> Option<Message> {
    message_of(event)
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
            // An assistant message with no content (it only carries a
            // step's usage) yields no message, as in the harness.
            if content.and_then(Value::as_array).is_some_and(Vec::is_empty) {
                return None;
            }
            Some(Message::Assistant { text: text_blocks(content), tool_calls, reasoning: blocks_of(content, "reasoning") })
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
        _ => blocks_of(content, "text"),
    }
}

/// The `text` of the content blocks of type `kind`, joined with newlines.
fn blocks_of(content: Option<&Value>, kind: &str) -> String {
    match content {
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some(kind))
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}
