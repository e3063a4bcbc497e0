//! The log's structure rules: how turns, steps, tool calls and execution
//! events nest (the rules the TypeScript harness's session invariant checks).
//!
//! A session is a sequence of turns; a turn a sequence of model steps:
//!
//! 1. `turn/start` only when no turn is open, numbering turns 1, 2, 3, ...
//! 2. `turn/end` names the open turn, and only once its step has ended.
//! 3. `step/start` names the open turn, only when no step is open, numbering
//!    the turn's steps 1, 2, 3, ...
//! 4. `step/end`, `assistant/message`, `assistant/chunk` and `tool/call`
//!    name the open turn and step.
//! 5. A `tool/result` appended to the surface names the open turn and step,
//!    and answers a `tool/call` of that step that has no result yet (a
//!    synthetic `TOOL_NOT_STARTED` error result for a call the harness never
//!    started is allowed without one). A `tool/result` that replaces part of
//!    the surface needs an open turn.
//! 6. Execution events (`todo/write`, `request/header`, `request/context`,
//!    and every event of a plugin-owned type) only inside an open turn.
//!
//! A live append that breaks a rule is refused ([`Trace::check`] before the
//! write). On replay each break is reported with its line and rule; the
//! event stays in the log, and the trace then follows the event (a
//! `turn/start` while a turn is open opens the new turn), so one break is
//! reported once rather than again for every event after it.

use std::borrow::Cow;
use std::collections::HashSet;

use crate::json::{RawJson, Read, Shape};
use serde::de::{MapAccess, SeqAccess};
use serde::Deserialize;

use crate::event::{core, SurfaceOp};

/// Where a log stands: the open turn and step and the calls awaiting results.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    open_turn: Option<u64>,
    open_step: Option<u64>,
    /// The highest turn number seen; the next turn is one more.
    last_turn: u64,
    /// The highest step number seen in the open turn.
    last_step: u64,
    /// Calls of the open step (by `tool/call`) without a result yet.
    pending: HashSet<String>,
}

/// The fields of a core event's data the rules look at.
#[derive(Debug, Default, Deserialize)]
struct Fields {
    turn: Option<serde_json::Value>,
    step: Option<serde_json::Value>,
    #[serde(rename = "callId")]
    call_id: Option<serde_json::Value>,
    message: Option<ResultMessage>,
    error: Option<ResultError>,
}

#[derive(Debug, Default, Deserialize)]
struct ResultMessage {
    source: Option<ResultSource>,
    content: Option<Content>,
}

#[derive(Debug, Default, Deserialize)]
struct ResultSource {
    #[serde(rename = "callId")]
    call_id: Option<serde_json::Value>,
}

#[derive(Debug, Default, Deserialize)]
struct ResultError {
    code: Option<serde_json::Value>,
}

/// A message's `content`, read only for `content[0].isError` (as a bool),
/// and checked as a `serde_json::Value` would read it (see [`Shape`]), so
/// that content a `Value` refuses still makes the whole [`Fields`]
/// unreadable.
#[derive(Debug, Default)]
struct Content {
    first_is_error: Option<bool>,
}

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Content, D::Error> {
        Read::<Content>::deserialize(d).map(|r| r.0)
    }
}

impl<'de> Shape<'de> for Content {
    fn array<A: SeqAccess<'de>>(mut seq: A) -> Result<Content, A::Error> {
        let first = seq.next_element::<Read<Block>>()?;
        while seq.next_element::<Read<()>>()?.is_some() {}
        Ok(Content { first_is_error: first.and_then(|b| b.0.is_error) })
    }
}

/// A content block's `isError`, when it is an object with one.
#[derive(Debug, Default)]
struct Block {
    is_error: Option<bool>,
}

impl<'de> Shape<'de> for Block {
    fn object<A: MapAccess<'de>>(mut map: A) -> Result<Block, A::Error> {
        let mut block = Block::default();
        while let Some(Read(key)) = map.next_key::<Read<Option<Cow<'de, str>>>>()? {
            if key.as_deref() == Some("isError") {
                block.is_error = map.next_value::<Read<Option<bool>>>()?.0;
            } else {
                map.next_value::<Read<()>>()?;
            }
        }
        Ok(block)
    }
}

/// Whether [`Trace::apply`] moves the trace for events of `kind`.
fn moves_trace(kind: &str) -> bool {
    matches!(kind, core::TURN_START | core::TURN_END | core::STEP_START | core::STEP_END | core::TOOL_CALL | core::TOOL_RESULT)
}

impl Fields {
    /// The fields of `data` when the rules of `kind` read any (empty for
    /// other types, and for data that does not read as `Fields`).
    fn of(kind: &str, data: &RawJson) -> Fields {
        let read = matches!(
            kind,
            core::TURN_START
                | core::TURN_END
                | core::STEP_START
                | core::STEP_END
                | core::ASSISTANT_MESSAGE
                | core::ASSISTANT_CHUNK
                | core::TOOL_CALL
                | core::TOOL_RESULT
        );
        if read {
            serde_json::from_str(data.get()).unwrap_or_default()
        } else {
            Fields::default()
        }
    }
}

fn number(v: &Option<serde_json::Value>) -> Option<u64> {
    v.as_ref().and_then(serde_json::Value::as_u64)
}

fn shown(v: Option<u64>) -> String {
    v.map_or_else(|| "none".to_string(), |n| n.to_string())
}

fn text(v: &Option<serde_json::Value>) -> Option<String> {
    v.as_ref().and_then(serde_json::Value::as_str).map(str::to_string)
}

/// Whether `kind` is an execution event that needs an open turn (rule 6).
/// `owned` says a plugin owns the type.
pub fn needs_turn(kind: &str, owned: bool) -> bool {
    owned || matches!(kind, "todo/write" | "request/header" | "request/context")
}

impl Trace {
    /// A trace before any event.
    pub fn new() -> Trace {
        Trace::default()
    }

    /// The open turn's number.
    pub fn open_turn(&self) -> Option<u64> {
        self.open_turn
    }

    /// The open step's number.
    pub fn open_step(&self) -> Option<u64> {
        self.open_step
    }

    /// The number the next turn gets.
    pub fn next_turn(&self) -> u64 {
        self.last_turn + 1
    }

    /// The number the open turn's next step gets.
    pub fn next_step(&self) -> u64 {
        self.last_step + 1
    }

    /// Checks one event against the rules, without changing the trace.
    /// `owned`: a plugin owns the event's type.
    ///
    /// # Errors
    /// The first rule the event breaks, in words.
    pub fn check(&self, kind: &str, data: &RawJson, surface: Option<&SurfaceOp>, owned: bool) -> Result<(), String> {
        self.check_fields(kind, &Fields::of(kind, data), surface, owned)
    }

    /// [`Trace::check`], then [`Trace::apply`], reading the data once (as
    /// replay judges each event and then follows it, broken or not).
    ///
    /// # Errors
    /// As [`Trace::check`]; the trace follows the event either way.
    pub fn follow(&mut self, kind: &str, data: &RawJson, surface: Option<&SurfaceOp>, owned: bool) -> Result<(), String> {
        let f = Fields::of(kind, data);
        let checked = self.check_fields(kind, &f, surface, owned);
        self.apply_fields(kind, f);
        checked
    }

    fn check_fields(&self, kind: &str, f: &Fields, surface: Option<&SurfaceOp>, owned: bool) -> Result<(), String> {
        if !core::is_core(kind) && kind != "assistant/chunk" {
            if needs_turn(kind, owned) && self.open_turn.is_none() {
                return Err(format!("{kind} outside any open turn (execution events belong inside an open turn)"));
            }
            return Ok(());
        }
        let turn = number(&f.turn);
        let step = number(&f.step);
        let in_step = |what: &str| -> Result<(), String> {
            if self.open_turn.is_none() || turn != self.open_turn || step != self.open_step || self.open_step.is_none() {
                return Err(format!(
                    "{what} names turn {}/step {} but the open one is turn {}/step {}",
                    shown(turn),
                    shown(step),
                    shown(self.open_turn),
                    shown(self.open_step)
                ));
            }
            Ok(())
        };
        match kind {
            core::TURN_START => {
                if let Some(open) = self.open_turn {
                    return Err(format!("turn/start {} while turn {open} is still open", shown(turn)));
                }
                if turn != Some(self.next_turn()) {
                    return Err(format!("turn/start {} where turn {} comes next", shown(turn), self.next_turn()));
                }
            }
            core::TURN_END => {
                if turn.is_none() || turn != self.open_turn {
                    return Err(format!("turn/end {} does not close the open turn ({})", shown(turn), shown(self.open_turn)));
                }
                if let Some(s) = self.open_step {
                    return Err(format!("turn/end {} while step {s} is still open", shown(turn)));
                }
            }
            core::STEP_START => {
                if turn.is_none() || turn != self.open_turn {
                    return Err(format!("step/start in turn {} but the open turn is {}", shown(turn), shown(self.open_turn)));
                }
                if let Some(s) = self.open_step {
                    return Err(format!("step/start {} while step {s} is still open", shown(step)));
                }
                if step != Some(self.next_step()) {
                    return Err(format!("step/start {} where step {} of turn {} comes next", shown(step), self.next_step(), shown(turn)));
                }
            }
            core::STEP_END | core::ASSISTANT_MESSAGE | core::TOOL_CALL | "assistant/chunk" => in_step(kind)?,
            core::TOOL_RESULT => {
                if !matches!(surface, Some(SurfaceOp::Append)) {
                    if self.open_turn.is_none() {
                        return Err("a tool/result replacing part of the history outside any open turn".into());
                    }
                    return Ok(());
                }
                in_step(kind)?;
                let message = f.message.as_ref();
                let call = message.and_then(|m| m.source.as_ref()).and_then(|s| text(&s.call_id));
                let not_started = f.error.as_ref().and_then(|e| text(&e.code)).as_deref() == Some("TOOL_NOT_STARTED")
                    && message.and_then(|m| m.content.as_ref()).and_then(|c| c.first_is_error) == Some(true);
                match call {
                    Some(id) if self.pending.contains(&id) || not_started => {}
                    Some(id) => return Err(format!("tool/result for call {id} with no tool/call for it in this step")),
                    None => return Err("tool/result names no call (message.source.callId)".into()),
                }
            }
            core::USER_MESSAGE => {}
            _ => {}
        }
        Ok(())
    }

    /// Moves the trace past one event (checked or not): a rule-breaking
    /// event is followed as written, so the events after it are judged
    /// against it.
    pub fn apply(&mut self, kind: &str, data: &RawJson) {
        if moves_trace(kind) {
            self.apply_fields(kind, Fields::of(kind, data));
        }
    }

    fn apply_fields(&mut self, kind: &str, f: Fields) {
        if !moves_trace(kind) {
            return;
        }
        let turn = number(&f.turn);
        let step = number(&f.step);
        match kind {
            core::TURN_START => {
                let n = turn.unwrap_or(self.last_turn + 1);
                self.last_turn = self.last_turn.max(n);
                self.open_turn = Some(n);
                self.open_step = None;
                self.last_step = 0;
                self.pending.clear();
            }
            core::TURN_END => {
                self.open_turn = None;
                self.open_step = None;
                self.last_step = 0;
                self.pending.clear();
            }
            core::STEP_START => {
                let n = step.unwrap_or(self.last_step + 1);
                self.last_step = self.last_step.max(n);
                self.open_step = Some(n);
                self.pending.clear();
            }
            core::STEP_END => {
                self.open_step = None;
                self.pending.clear();
            }
            core::TOOL_CALL => {
                if let Some(id) = text(&f.call_id) {
                    self.pending.insert(id);
                }
            }
            core::TOOL_RESULT => {
                if let Some(id) = f.message.and_then(|m| m.source).and_then(|s| text(&s.call_id)) {
                    self.pending.remove(&id);
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn raw(v: serde_json::Value) -> RawJson {
        RawJson::encode(&v)
    }

    /// Runs events through a trace; returns the broken rule of each.
    fn run(events: &[(&str, serde_json::Value)]) -> Vec<Option<String>> {
        let mut t = Trace::new();
        events
            .iter()
            .map(|(kind, data)| {
                let data = raw(data.clone());
                let surface = core::is_surface(kind).then_some(SurfaceOp::Append);
                let r = t.check(kind, &data, surface.as_ref(), *kind == "todo/write").err();
                t.apply(kind, &data);
                r
            })
            .collect()
    }

    fn result(call: &str) -> serde_json::Value {
        json!({"turn": 1, "step": 1, "message": {"source": {"callId": call}, "content": [{"type": "tool-result", "toolCallId": call}]}})
    }

    #[test]
    fn a_well_formed_turn_breaks_no_rule() {
        let r = run(&[
            ("turn/start", json!({"turn": 1})),
            ("user/message", json!({})),
            ("step/start", json!({"turn": 1, "step": 1})),
            ("assistant/message", json!({"turn": 1, "step": 1})),
            ("tool/call", json!({"turn": 1, "step": 1, "callId": "c1"})),
            ("todo/write", json!({"todos": []})),
            ("tool/result", result("c1")),
            ("step/end", json!({"turn": 1, "step": 1})),
            ("turn/end", json!({"turn": 1})),
            ("turn/start", json!({"turn": 2})),
        ]);
        assert!(r.iter().all(Option::is_none), "{r:?}");
    }

    #[test]
    fn each_break_names_its_rule() {
        let r = run(&[
            ("todo/write", json!({"todos": []})),
            ("turn/start", json!({"turn": 1})),
            ("turn/start", json!({"turn": 2})),
            ("turn/end", json!({"turn": 1})),
            ("turn/start", json!({"turn": 3})),
            ("step/start", json!({"turn": 3, "step": 1})),
            ("step/start", json!({"turn": 3, "step": 2})),
            ("tool/result", json!({"turn": 3, "step": 2, "message": {"source": {"callId": "c9"}}})),
            ("turn/end", json!({"turn": 3})),
        ]);
        let broken: Vec<String> = r.into_iter().flatten().collect();
        assert_eq!(
            broken,
            [
                "todo/write outside any open turn (execution events belong inside an open turn)",
                "turn/start 2 while turn 1 is still open",
                "turn/end 1 does not close the open turn (2)",
                "step/start 2 while step 1 is still open",
                "tool/result for call c9 with no tool/call for it in this step",
                "turn/end 3 while step 2 is still open",
            ]
        );
    }

    #[test]
    fn a_result_for_a_call_never_started_needs_its_error_block() {
        let start = [("turn/start", json!({"turn": 1})), ("step/start", json!({"turn": 1, "step": 1}))];
        let not_started = |content: serde_json::Value| json!({"turn": 1, "step": 1, "message": {"source": {"callId": "c1"}, "content": content}, "error": {"code": "TOOL_NOT_STARTED"}});
        let cases = [
            (json!([{"type": "tool-result", "isError": true}]), true),
            (json!([{"isError": false, "isError": true}, {"isError": false}]), true),
            (json!([{"isError": true, "isError": false}]), false),
            (json!([{"type": "text"}, {"isError": true}]), false),
            (json!({"isError": true}), false),
            (json!([[true]]), false),
        ];
        for (content, allowed) in cases {
            let mut events = start.to_vec();
            events.push(("tool/result", not_started(content.clone())));
            let r = run(&events);
            assert_eq!(r[2].is_none(), allowed, "{content}: {r:?}");
        }
    }

    #[test]
    fn data_a_json_value_cannot_hold_is_read_as_no_fields() {
        let mut t = Trace::new();
        let data = |text: &str| RawJson::parse(text).unwrap();
        assert_eq!(t.follow("turn/start", &data(r#"{"turn":1}"#), None, false), Ok(()));
        assert_eq!(t.follow("step/start", &data(r#"{"turn":1,"step":1}"#), None, false), Ok(()));
        let good = r#"{"turn":1,"step":1,"message":{"content":[{"type":"text","text":"a"}]}}"#;
        assert_eq!(t.check("assistant/message", &data(good), Some(&SurfaceOp::Append), false), Ok(()));
        // A number out of range, or nesting past serde_json's limit, in the
        // content: a `Value` cannot read the data, so no field is read.
        let huge = r#"{"turn":1,"step":1,"message":{"content":[1e999]}}"#;
        let deep = format!(r#"{{"turn":1,"step":1,"message":{{"content":{}1{}}}}}"#, "[".repeat(130), "]".repeat(130));
        for bad in [huge.to_string(), deep] {
            let broken = t.check("assistant/message", &data(&bad), Some(&SurfaceOp::Append), false);
            assert_eq!(broken, Err("assistant/message names turn none/step none but the open one is turn 1/step 1".into()), "{bad}");
        }
    }
}
