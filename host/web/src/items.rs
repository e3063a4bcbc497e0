//! A window of a session's events as the conversation a page shows: user
//! and assistant messages (the reasoning apart, streamed text while a step
//! is being written), one row per tool call with its result, turn markers,
//! reminders plugins add, and turns that did not complete.
//!
//! Each [`Item`] has an id that stays the same while events are appended
//! (the seq of its first event, and the call's place in its message), so a
//! live page replaces an item in place when a later event changes it (a
//! result arriving, a streamed answer growing).

use std::collections::HashMap;

use cordis_session::{event_message, Event, Message};
use serde_json::Value;

/// One thing the conversation shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    /// Stable within a window: `i<seq>` or `i<seq>-<n>`.
    pub id: String,
    /// The largest seq among the events that make it up.
    pub last: u64,
    /// What it is.
    pub kind: Kind,
}

/// What an [`Item`] is.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// `turn/start`: the turn's number.
    Turn(u64),
    /// A `user/message`.
    User {
        /// The text.
        text: String,
        /// Its event, for the full text of a long message.
        seq: u64,
    },
    /// What the model said in one step (its message, or the chunks
    /// streamed so far).
    Assistant {
        /// The text.
        text: String,
        /// The reasoning, shown folded.
        reasoning: String,
        /// Still streaming: no `assistant/message` yet.
        streaming: bool,
        /// The event holding the text (the message's, or the last chunk's).
        seq: u64,
    },
    /// One tool call and its result.
    Tool(Tool),
    /// A plugin's message to the model (`todo/nudge`).
    Reminder {
        /// The text.
        text: String,
        /// Its event, for the full text of a long reminder.
        seq: u64,
    },
    /// A `turn/end` whose reason is not `completed`.
    TurnEnded {
        /// The turn.
        turn: u64,
        /// The reason's kind (`interrupted`, `error`, ...).
        reason: String,
        /// The reason's message, if any.
        message: String,
    },
}

/// A tool call as a row.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    /// The event that first named the call (the assistant's message, or
    /// the `tool/call`): the seq in the row's id.
    pub seq: u64,
    /// The call id.
    pub call_id: String,
    /// The tool's name.
    pub name: String,
    /// The raw argument text the model sent.
    pub arguments: String,
    /// The result: its text and whether it is an error; `None` while the
    /// call runs (or its result is outside the window).
    pub result: Option<(String, bool)>,
    /// The event holding the result text.
    pub result_seq: Option<u64>,
}

fn num(data: &Value, key: &str) -> Option<u64> {
    data.get(key).and_then(Value::as_u64)
}

/// The conversation of `events` (a window of a session, in seq order).
pub fn items(events: &[Event]) -> Vec<Item> {
    let mut out: Vec<Item> = Vec::new();
    // Where the assistant item of (turn, step) is, and the row of (turn, call id).
    let mut steps: HashMap<(u64, u64), usize> = HashMap::new();
    let mut calls: HashMap<(u64, String), usize> = HashMap::new();
    let mut turn = 0u64;
    for event in events {
        let data: Value = match event.kind.as_str() {
            "turn/start" | "turn/end" | "assistant/chunk" | "assistant/message" | "tool/call" | "tool/result" => {
                serde_json::from_str(event.data.get()).unwrap_or(Value::Null)
            }
            _ => Value::Null,
        };
        let event_turn = num(&data, "turn").unwrap_or(turn);
        match event.kind.as_str() {
            "turn/start" => {
                turn = event_turn;
                out.push(Item { id: format!("i{}", event.seq), last: event.seq, kind: Kind::Turn(turn) });
            }
            "user/message" => {
                if let Some(Message::User { text }) = event_message(event) {
                    out.push(Item { id: format!("i{}", event.seq), last: event.seq, kind: Kind::User { text, seq: event.seq } });
                }
            }
            "assistant/chunk" => {
                let chunk = &data["chunk"];
                let text = chunk["text"].as_str().unwrap_or_default();
                let is_reasoning = match chunk["type"].as_str() {
                    Some("text-delta") => false,
                    Some("reasoning-delta") => true,
                    _ => continue,
                };
                let key = (event_turn, num(&data, "step").unwrap_or(event.seq));
                let at = *steps.entry(key).or_insert_with(|| {
                    out.push(Item {
                        id: format!("i{}", event.seq),
                        last: event.seq,
                        kind: Kind::Assistant { text: String::new(), reasoning: String::new(), streaming: true, seq: event.seq },
                    });
                    out.len() - 1
                });
                if let Some(item) = out.get_mut(at) {
                    item.last = event.seq;
                    if let Kind::Assistant { text: t, reasoning, streaming: true, seq } = &mut item.kind {
                        if is_reasoning {
                            reasoning.push_str(text)
                        } else {
                            t.push_str(text)
                        }
                        *seq = event.seq;
                    }
                }
            }
            "assistant/message" => {
                let Some(Message::Assistant { text, tool_calls, reasoning }) = event_message(event) else { continue };
                let key = (event_turn, num(&data, "step").unwrap_or(event.seq));
                let kind = Kind::Assistant { text, reasoning, streaming: false, seq: event.seq };
                match steps.get(&key).copied() {
                    Some(at) => {
                        if let Some(item) = out.get_mut(at) {
                            item.kind = kind;
                            item.last = event.seq;
                        }
                    }
                    None => {
                        steps.insert(key, out.len());
                        out.push(Item { id: format!("i{}", event.seq), last: event.seq, kind });
                    }
                }
                for (n, call) in tool_calls.into_iter().enumerate() {
                    calls.entry((event_turn, call.id.clone())).or_insert_with(|| {
                        out.push(Item {
                            id: format!("i{}-{n}", event.seq),
                            last: event.seq,
                            kind: Kind::Tool(Tool {
                                seq: event.seq,
                                call_id: call.id,
                                name: call.name,
                                arguments: call.arguments,
                                result: None,
                                result_seq: None,
                            }),
                        });
                        out.len() - 1
                    });
                }
            }
            "tool/call" => {
                let call_id = data["callId"].as_str().unwrap_or_default().to_string();
                let at = *calls.entry((event_turn, call_id.clone())).or_insert_with(|| {
                    let arguments = match &data["arguments"] {
                        Value::String(s) => s.clone(),
                        Value::Null => String::new(),
                        other => other.to_string(),
                    };
                    let name = data["name"].as_str().unwrap_or_default().to_string();
                    out.push(Item {
                        id: format!("i{}", event.seq),
                        last: event.seq,
                        kind: Kind::Tool(Tool { seq: event.seq, call_id, name, arguments, result: None, result_seq: None }),
                    });
                    out.len() - 1
                });
                if let Some(item) = out.get_mut(at) {
                    item.last = item.last.max(event.seq);
                }
            }
            "tool/result" => {
                let Some(Message::Tool { call_id, text, is_error }) = event_message(event) else { continue };
                let at = *calls.entry((event_turn, call_id.clone())).or_insert_with(|| {
                    out.push(Item {
                        id: format!("i{}", event.seq),
                        last: event.seq,
                        kind: Kind::Tool(Tool {
                            seq: event.seq,
                            call_id,
                            name: String::new(),
                            arguments: String::new(),
                            result: None,
                            result_seq: None,
                        }),
                    });
                    out.len() - 1
                });
                if let Some(Item { last, kind: Kind::Tool(tool), .. }) = out.get_mut(at) {
                    tool.result = Some((text, is_error));
                    tool.result_seq = Some(event.seq);
                    *last = (*last).max(event.seq);
                }
            }
            "turn/end" => {
                let reason = data["reason"]["kind"].as_str().unwrap_or("completed").to_string();
                if reason != "completed" {
                    let message = data["reason"]["message"].as_str().unwrap_or_default().to_string();
                    out.push(Item { id: format!("i{}", event.seq), last: event.seq, kind: Kind::TurnEnded { turn: event_turn, reason, message } });
                }
            }
            _ if event.surface_op.is_some() => {
                if let Some(Message::User { text }) = event_message(event) {
                    out.push(Item { id: format!("i{}", event.seq), last: event.seq, kind: Kind::Reminder { text, seq: event.seq } });
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(lines: &[&str]) -> Vec<Event> {
        let text: String = std::iter::once(r#"{"type":"session","version":0,"id":"t","createdAt":0,"cwd":"/","delegationDepth":0}"#)
            .chain(lines.iter().copied())
            .map(|l| format!("{l}\n"))
            .collect();
        cordis_session::store::parse_log(text.as_bytes(), std::path::Path::new("t.jsonl")).unwrap().events
    }

    #[test]
    fn a_streamed_step_becomes_its_message_in_place() {
        let events = log(&[
            r#"{"seq":0,"time":1,"type":"turn/start","data":{"turn":1}}"#,
            r#"{"seq":1,"time":1,"type":"step/start","data":{"turn":1,"step":1}}"#,
            r#"{"seq":2,"time":1,"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"reasoning-delta","text":"hm"}}}"#,
            r#"{"seq":3,"time":1,"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"text-delta","text":"Hel"}}}"#,
        ]);
        let streaming = items(&events);
        assert_eq!(streaming.len(), 2);
        assert_eq!(streaming[1].id, "i2");
        assert!(matches!(&streaming[1].kind, Kind::Assistant { text, reasoning, streaming: true, .. } if text == "Hel" && reasoning == "hm"));
        let mut more = events.clone();
        more.extend(log(&[
            r#"{"seq":4,"time":1,"type":"assistant/message","data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"text","text":"Hello"},{"type":"tool-call","id":"c1","name":"t","arguments":"{}"}]}},"surfaceOp":"append"}"#,
            r#"{"seq":5,"time":1,"type":"tool/call","data":{"turn":1,"step":1,"callId":"c1","name":"t","arguments":"{}"}}"#,
            r#"{"seq":6,"time":1,"type":"tool/result","data":{"turn":1,"step":1,"message":{"role":"user","content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"Error: no"}],"isError":true}]}},"surfaceOp":"append"}"#,
        ]));
        let done = items(&more);
        assert_eq!(done.len(), 3);
        assert_eq!(done[1].id, "i2");
        assert!(matches!(&done[1].kind, Kind::Assistant { text, streaming: false, .. } if text == "Hello"));
        assert_eq!(done[2].id, "i4-0");
        assert_eq!(done[2].last, 6);
        assert!(matches!(&done[2].kind, Kind::Tool(t) if t.result == Some(("Error: no".into(), true))));
    }
}
