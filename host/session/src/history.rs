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

use std::borrow::Cow;

use serde::de::{MapAccess, SeqAccess};
use serde::Serialize;
use serde_json::Value;

use crate::event::{core, Event, SurfaceOp};
use crate::json::{Read, Shape};

/// The last `compaction/start` with no `compaction/end` after it: a
/// compaction cut short (its process stopped, or it is still under way in
/// the process writing the log). Only one compaction runs at a time, so
/// only the last start can be open.
pub fn unended_compaction(events: &[Event]) -> Option<&Event> {
    for e in events.iter().rev() {
        match e.kind.as_str() {
            core::COMPACTION_END => return None,
            core::COMPACTION_START => return Some(e),
            _ => {}
        }
    }
    None
}

/// A compaction with a `compaction/start` and no `compaction/end`, and how
/// far it got: what the next writer of the session will find when it
/// closes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CutShortCompaction {
    /// The compaction's id (`compactionId`).
    pub compaction_id: String,
    /// The seq of its `compaction/start`.
    pub start: u64,
    /// The `turn` its start names (`null` for a compaction outside turns).
    pub turn: Value,
    /// Whether its replacing `user/message` landed (the summary already
    /// replaced the history; closing completes it), or not (closing marks
    /// it failed and the history stays as it was).
    pub landed: bool,
    /// The projections whose context it already carried over.
    pub carried: Vec<String>,
}

impl CutShortCompaction {
    /// One line for an operator: which compaction, and how it will be
    /// closed.
    pub fn describe(&self) -> String {
        let how = if self.landed {
            "its summary already replaced the history, so it will be completed"
        } else {
            "its summary replaced nothing, so it will be closed as failed with the history as it was"
        };
        format!(
            "compaction {} (compaction/start at seq {}) has no compaction/end: it was cut short, unless a running cordis is compacting this session now; \
             the next run or `cordis session compact` of this session closes it: {how}",
            self.compaction_id, self.start
        )
    }
}

/// The compaction [`unended_compaction`] finds, with how far it got.
pub fn cut_short_compaction(events: &[Event]) -> Option<CutShortCompaction> {
    let start = unended_compaction(events)?;
    let data = start.data_value();
    let compaction_id = data.get("compactionId").and_then(Value::as_str).unwrap_or_default().to_string();
    let mut landed = false;
    let mut carried: Vec<String> = Vec::new();
    for e in events.iter().filter(|e| e.seq > start.seq && e.kind == core::USER_MESSAGE) {
        let source = e.data_value().get("source").cloned().unwrap_or(Value::Null);
        if source.get("compactionId").and_then(Value::as_str) != Some(compaction_id.as_str()) {
            continue;
        }
        if matches!(e.surface_op, Some(SurfaceOp::Replace { .. })) {
            landed = true;
        } else if let Some(key) = source.get("projection").and_then(Value::as_str) {
            carried.push(key.to_string());
        }
    }
    Some(CutShortCompaction { compaction_id, start: start.seq, turn: data.get("turn").cloned().unwrap_or(Value::Null), landed, carried })
}

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
    let (surface, notes) = fold_surface::<Message>(events);
    well_formed(surface, notes)
}

/// The notes of [`derive_history`] alone: the same repairs and misplaced
/// events, found from each surface event's outline (its kind of message
/// and the call ids it makes or answers) without building the messages'
/// texts.
pub fn history_notes(events: &[Event]) -> Vec<(u64, String)> {
    let mut notes = HistoryNotes::default();
    notes.push(events);
    notes.notes()
}

/// [`history_notes`] of a log read in parts: each part's surface events are
/// outlined once, as they come ([`HistoryNotes::push`]), and the pass that
/// makes the history well-formed resumes where it stopped
/// ([`HistoryNotes::notes`]): only a replacement (a compaction's summary)
/// inside the part already passed sends it back to the start. Neither
/// reads any event's data again.
#[derive(Default)]
pub struct HistoryNotes {
    surface: Surface<Outline>,
    /// Notes of the fold: surface events that could not be placed.
    notes: Vec<(u64, String)>,
    /// The well-formed pass has gone over `surface[..passed]`.
    passed: usize,
    /// The calls awaiting their results there, with their message's seq.
    awaiting: Vec<(String, u64)>,
    /// The pass's notes so far.
    pass_notes: Vec<(u64, String)>,
}

impl std::fmt::Debug for HistoryNotes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HistoryNotes").field("surface", &self.surface.len()).field("passed", &self.passed).finish_non_exhaustive()
    }
}

impl HistoryNotes {
    /// Folds the surface events of `events`, the log's next events.
    pub fn push(&mut self, events: &[Event]) {
        for event in events {
            if let Some(changed) = fold_event(&mut self.surface, &mut self.notes, event) {
                if changed < self.passed {
                    // A replacement inside what was passed: pass again.
                    self.passed = 0;
                    self.awaiting.clear();
                    self.pass_notes.clear();
                }
            }
        }
    }

    /// The notes of [`derive_history`] for every event pushed so far, in
    /// seq order. The pass goes on over the outlines pushed since it last
    /// stopped; the calls still awaiting a result at the end are noted
    /// afresh each time (a later result may still come).
    pub fn notes(&mut self) -> Vec<(u64, String)> {
        for (seq, message) in &self.surface[self.passed..] {
            let Some(message) = message else { continue };
            if let Some(call_id) = message.answers() {
                match self.awaiting.iter().position(|(c, _)| c == call_id) {
                    Some(i) => {
                        self.awaiting.remove(i);
                    }
                    None => self.pass_notes.push((
                        *seq,
                        format!("tool/result for call {call_id}, which no assistant message right before it awaits; left out of the history"),
                    )),
                }
            } else {
                for (call_id, seq) in self.awaiting.drain(..) {
                    self.pass_notes.push((seq, no_result(&call_id)));
                }
                self.awaiting.extend(message.calls().map(|c| (c.to_string(), *seq)));
            }
        }
        self.passed = self.surface.len();
        let mut notes = self.notes.clone();
        notes.extend(self.pass_notes.iter().cloned());
        notes.extend(self.awaiting.iter().map(|(call_id, seq)| (*seq, no_result(call_id))));
        notes.sort_by_key(|(seq, _)| *seq);
        notes
    }
}

/// The note on call `call_id` left without a result.
fn no_result(call_id: &str) -> String {
    format!("call {call_id} has no result; the history gives it an error result")
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

/// What the surface fold and the well-formed pass need of a message.
trait Node: Sized {
    /// The message of a surface event, if it yields one.
    fn of(event: &Event) -> Option<Self>;
    /// The call a tool result answers.
    fn answers(&self) -> Option<&str>;
    /// The calls an assistant message makes, in order.
    fn calls(&self) -> impl Iterator<Item = &str>;
    /// The error result given to a call left without one.
    fn missing(call_id: String) -> Self;
}

impl Node for Message {
    fn of(event: &Event) -> Option<Message> {
        message_of(event)
    }
    fn answers(&self) -> Option<&str> {
        match self {
            Message::Tool { call_id, .. } => Some(call_id),
            _ => None,
        }
    }
    fn calls(&self) -> impl Iterator<Item = &str> {
        let calls = match self {
            Message::Assistant { tool_calls, .. } => tool_calls.as_slice(),
            _ => &[],
        };
        calls.iter().map(|c| c.id.as_str())
    }
    fn missing(call_id: String) -> Message {
        Message::Tool { call_id, text: MISSING_RESULT_TEXT.to_string(), is_error: true }
    }
}

/// A message without its texts: which kind it is, and the call ids.
enum Outline {
    User,
    Assistant(Vec<String>),
    Tool(String),
}

impl Node for Outline {
    /// As [`message_of`], read through [`Shape`]s: `None` exactly when it
    /// gives `None`.
    fn of(event: &Event) -> Option<Outline> {
        let Read(data) = serde_json::from_str::<Read<DataOutline<'_>>>(event.data.get()).ok()?;
        match event.kind.as_str() {
            core::USER_MESSAGE => Some(Outline::User),
            core::ASSISTANT_MESSAGE => {
                // As for a message: no content at all yields one without
                // calls, empty content none.
                if data.content.as_ref().is_some_and(Vec::is_empty) {
                    return None;
                }
                let calls = data
                    .content
                    .into_iter()
                    .flatten()
                    .filter(|b| b.kind.as_deref() == Some("tool-call"))
                    .map(|b| b.id.unwrap_or_default().into_owned());
                Some(Outline::Assistant(calls.collect()))
            }
            core::TOOL_RESULT => {
                let block = data.content?.into_iter().find(|b| b.kind.as_deref() == Some("tool-result"))?;
                Some(Outline::Tool(block.tool_call_id.unwrap_or_default().into_owned()))
            }
            _ if data.role.as_deref() == Some("user") => data.text.map(|_| Outline::User),
            _ => None,
        }
    }
    fn answers(&self) -> Option<&str> {
        match self {
            Outline::Tool(call_id) => Some(call_id),
            _ => None,
        }
    }
    fn calls(&self) -> impl Iterator<Item = &str> {
        let calls = match self {
            Outline::Assistant(calls) => calls.as_slice(),
            _ => &[],
        };
        calls.iter().map(String::as_str)
    }
    fn missing(call_id: String) -> Outline {
        Outline::Tool(call_id)
    }
}

/// What [`Outline::of`] reads of an event's data: `message.content` when
/// it is an array, and the top-level `role` and `text` when strings.
#[derive(Default)]
struct DataOutline<'a> {
    content: Option<Vec<BlockOutline<'a>>>,
    role: Option<Cow<'a, str>>,
    text: Option<Cow<'a, str>>,
}

impl<'de> Shape<'de> for DataOutline<'de> {
    fn object<A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        let mut data = DataOutline::default();
        while let Some(Read(key)) = map.next_key::<Read<Option<Cow<'de, str>>>>()? {
            match key.as_deref() {
                Some("message") => data.content = map.next_value::<Read<MessageOutline<'de>>>()?.0.content,
                Some("role") => data.role = map.next_value::<Read<_>>()?.0,
                Some("text") => data.text = map.next_value::<Read<_>>()?.0,
                _ => map.next_value::<Read<()>>().map(drop)?,
            }
        }
        Ok(data)
    }
}

/// A message's `content`, when it is an array.
#[derive(Default)]
struct MessageOutline<'a> {
    content: Option<Vec<BlockOutline<'a>>>,
}

impl<'de> Shape<'de> for MessageOutline<'de> {
    fn object<A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        let mut message = MessageOutline::default();
        while let Some(Read(key)) = map.next_key::<Read<Option<Cow<'de, str>>>>()? {
            if key.as_deref() == Some("content") {
                message.content = map.next_value::<Read<Blocks<'de>>>()?.0 .0;
            } else {
                map.next_value::<Read<()>>()?;
            }
        }
        Ok(message)
    }
}

/// An array of content blocks (`None` for any other value).
#[derive(Default)]
struct Blocks<'a>(Option<Vec<BlockOutline<'a>>>);

impl<'de> Shape<'de> for Blocks<'de> {
    fn array<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        let mut blocks = Vec::new();
        while let Some(Read(block)) = seq.next_element::<Read<BlockOutline<'de>>>()? {
            blocks.push(block);
        }
        Ok(Blocks(Some(blocks)))
    }
}

/// A content block's `type`, `id` and `toolCallId`, when strings.
#[derive(Default)]
struct BlockOutline<'a> {
    kind: Option<Cow<'a, str>>,
    id: Option<Cow<'a, str>>,
    tool_call_id: Option<Cow<'a, str>>,
}

impl<'de> Shape<'de> for BlockOutline<'de> {
    fn object<A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        let mut block = BlockOutline::default();
        while let Some(Read(key)) = map.next_key::<Read<Option<Cow<'de, str>>>>()? {
            match key.as_deref() {
                Some("type") => block.kind = map.next_value::<Read<_>>()?.0,
                Some("id") => block.id = map.next_value::<Read<_>>()?.0,
                Some("toolCallId") => block.tool_call_id = map.next_value::<Read<_>>()?.0,
                _ => map.next_value::<Read<()>>().map(drop)?,
            }
        }
        Ok(block)
    }
}

type Surface<M> = Vec<(u64, Option<M>)>;

fn fold_surface<M: Node>(events: &[Event]) -> (Surface<M>, Vec<(u64, String)>) {
    let mut notes = Vec::new();
    // The surface: (seq, message) in history order.
    let mut surface: Surface<M> = Vec::new();
    for event in events {
        fold_event(&mut surface, &mut notes, event);
    }
    (surface, notes)
}

/// Folds one event into `surface`, adding to `notes` what cannot be placed;
/// returns the first index of `surface` it changed (none when it changed
/// nothing).
fn fold_event<M: Node>(surface: &mut Surface<M>, notes: &mut Vec<(u64, String)>, event: &Event) -> Option<usize> {
    let Some(op) = &event.surface_op else { return None };
    // Core surface types, and a plugin's surface events that carry a
    // user-side message (`todo/nudge`).
    if !core::is_surface(&event.kind) && (core::is_core(&event.kind) || M::of(event).is_none()) {
        return None;
    }
    match op {
        SurfaceOp::Append => {
            surface.push((event.seq, M::of(event)));
            Some(surface.len() - 1)
        }
        SurfaceOp::Replace { start, end } => {
            let find = |seq: u64| surface.iter().position(|(s, _)| *s == seq);
            let (Some(from), Some(to)) = (find(*start), find(*end)) else {
                notes.push((
                    event.seq,
                    format!("{} replaces seqs {start} to {end}, which are not both in the history; left out of the history", event.kind),
                ));
                return None;
            };
            if from > to {
                notes.push((
                    event.seq,
                    format!("{} replaces from seq {start} to seq {end}, which comes before it in the history; left out of the history", event.kind),
                ));
                return None;
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
            surface.splice(from..=to, [(event.seq, M::of(event))]);
            Some(from)
        }
        SurfaceOp::Other(raw) => {
            notes.push((
                event.seq,
                format!("{} has surfaceOp {}, which is neither \"append\" nor a replace; left out of the history", event.kind, raw.get()),
            ));
            None
        }
    }
}

fn well_formed<M: Node>(surface: Surface<M>, mut notes: Vec<(u64, String)>) -> (Vec<M>, Vec<(u64, String)>) {
    // Well-formed: each call answered once, right after its message.
    let mut out: Vec<M> = Vec::with_capacity(surface.len());
    let mut awaiting: Vec<(String, u64)> = Vec::new();
    let close = |out: &mut Vec<M>, awaiting: &mut Vec<(String, u64)>, notes: &mut Vec<(u64, String)>| {
        for (call_id, seq) in awaiting.drain(..) {
            notes.push((seq, no_result(&call_id)));
            out.push(M::missing(call_id));
        }
    };
    for (seq, message) in surface {
        let Some(message) = message else { continue };
        if let Some(call_id) = message.answers() {
            match awaiting.iter().position(|(c, _)| c == call_id) {
                Some(i) => {
                    awaiting.remove(i);
                    out.push(message);
                }
                None => notes.push((
                    seq,
                    format!("tool/result for call {call_id}, which no assistant message right before it awaits; left out of the history"),
                )),
            }
        } else {
            close(&mut out, &mut awaiting, &mut notes);
            awaiting.extend(message.calls().map(|c| (c.to_string(), seq)));
            out.push(message);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::RawJson;

    fn event(seq: u64, kind: &str, data: &str, op: Option<&str>) -> Event {
        let data = RawJson::parse(data).unwrap_or_else(|_| RawJson::from_plugin(data));
        let surface_op = op.map(|op| SurfaceOp::from_raw(serde_json::value::RawValue::from_string(op.to_string()).unwrap()));
        Event { seq, time: 0, kind: kind.into(), data, surface_op, source_event_seqs: None }
    }

    fn assistant(seq: u64, content: &str) -> Event {
        event(seq, "assistant/message", &format!("{{\"turn\":1,\"step\":1,\"message\":{{\"content\":{content}}}}}"), Some("\"append\""))
    }

    fn result(seq: u64, content: &str) -> Event {
        event(seq, "tool/result", &format!("{{\"turn\":1,\"step\":1,\"message\":{{\"content\":{content}}}}}"), Some("\"append\""))
    }

    #[test]
    fn history_notes_are_the_notes_of_derive_history() {
        let call = |id: &str| format!("{{\"type\":\"tool-call\",\"id\":\"{id}\",\"name\":\"t\",\"arguments\":\"{{}}\"}}");
        let answer = |id: &str| format!("[{{\"type\":\"tool-result\",\"toolCallId\":\"{id}\",\"content\":[]}}]");
        let logs: Vec<Vec<Event>> = vec![
            // A call answered, one left without a result, an orphaned result.
            vec![
                event(0, "user/message", r#"{"content":"hi"}"#, Some("\"append\"")),
                assistant(1, &format!("[{},{}]", call("a"), call("b"))),
                result(2, &answer("a")),
                result(3, &answer("z")),
                event(4, "user/message", r#"{"content":[]}"#, Some("\"append\"")),
            ],
            // Empty content yields no message; content that is no array a
            // message without calls; repeated keys count the last one;
            // escaped keys and ids read as decoded.
            vec![
                assistant(0, "[]"),
                assistant(1, "\"text\""),
                event(
                    2,
                    "assistant/message",
                    &format!("{{\"message\":{{\"content\":[{}]}},\"message\":{{\"content\":[{}]}}}}", call("x"), call("y")),
                    Some("\"append\""),
                ),
                result(3, r#"[{"type":"tool-result","toolCallId":"x"}]"#),
                event(
                    4,
                    "assistant/message",
                    r#"{"message":{"cont\u0065nt":[{"type":"tool-call","id":"c\"1","type":"tool-call"}]}}"#,
                    Some("\"append\""),
                ),
                result(5, r#"[{"type":"text"},{"type":"tool-result","toolCallId":"c\"1","toolCallId":7}]"#),
                result(6, r#"[{"type":"text"}]"#),
                assistant(7, &format!("[{},{{\"type\":\"tool-call\",\"id\":5}}]", call("w"))),
            ],
            // What a `Value` cannot hold yields no message.
            vec![
                assistant(0, &format!("[{},1e999]", call("big"))),
                result(1, &answer("big")),
                assistant(2, &format!("[{}]", call("deep"))),
                result(3, &format!("[{{\"type\":\"tool-result\",\"toolCallId\":\"deep\",\"x\":{}1{}}}]", "[".repeat(200), "]".repeat(200))),
            ],
            // Plugin surface events, replacements and odd surface ops.
            vec![
                event(0, "todo/nudge", r#"{"role":"user","text":"plan!"}"#, Some("\"append\"")),
                event(1, "todo/nudge", r#"{"role":"user","text":3}"#, Some("\"append\"")),
                event(2, "x/y", r#"{"role":"assistant","text":"no"}"#, Some("\"append\"")),
                assistant(3, &format!("[{}]", call("r"))),
                event(4, "user/message", r#"{"content":"summary"}"#, Some(r#"{"op":"replace","start":0,"end":3}"#)),
                event(5, "user/message", r#"{"content":"bad"}"#, Some(r#"{"op":"replace","start":9,"end":10}"#)),
                event(6, "user/message", r#"{"content":"odd"}"#, Some("7")),
                result(7, &answer("r")),
            ],
        ];
        for events in logs {
            let (_, expected) = derive_history(&events);
            assert!(!expected.is_empty());
            assert_eq!(history_notes(&events), expected);
            // Pushed in parts, asked after each: the pass resumes, or
            // starts over after a replacement inside what it passed.
            for cut in 0..=events.len() {
                for second in cut..=events.len() {
                    let mut parts = HistoryNotes::default();
                    parts.push(&events[..cut]);
                    assert_eq!(parts.notes(), derive_history(&events[..cut]).1, "first {cut}");
                    parts.push(&events[cut..second]);
                    assert_eq!(parts.notes(), derive_history(&events[..second]).1, "first {cut}, then to {second}");
                    parts.push(&events[second..]);
                    assert_eq!(parts.notes(), expected, "first {cut}, then to {second}, then the rest");
                }
            }
        }
    }
}
