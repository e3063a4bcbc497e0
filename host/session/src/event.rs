//! The session log's records: the header line and the event envelope.
//!
//! File format (shared with the TypeScript harness this design grew out of):
//! line 1 is a header `{"type":"session","version":0,"id",...}`, each further
//! line one event `{"seq","time","type","data"}`, with `"surfaceOp"` (and, in
//! imported logs, `"sourceEventSeqs"`) on surface events. `seq` counts from 0
//! and `time` is milliseconds since the Unix epoch, negative before it (a
//! clock stepped back can write one; the harness reads it as written).

use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

pub use crate::json::RawJson;

/// Core event types, owned by the host.
pub mod core {
    /// A turn begins: `{turn}`.
    pub const TURN_START: &str = "turn/start";
    /// A turn ends: `{turn, reason: {kind}}`.
    pub const TURN_END: &str = "turn/end";
    /// A model step begins: `{turn, step}`.
    pub const STEP_START: &str = "step/start";
    /// A model step ends: `{turn, step}`.
    pub const STEP_END: &str = "step/end";
    /// The user's message (surface).
    pub const USER_MESSAGE: &str = "user/message";
    /// The model's message (surface).
    pub const ASSISTANT_MESSAGE: &str = "assistant/message";
    /// A tool call about to run: `{turn, step, callId, name, arguments}`.
    pub const TOOL_CALL: &str = "tool/call";
    /// A tool's result (surface).
    pub const TOOL_RESULT: &str = "tool/result";
    /// A piece of a streamed model answer: `{turn, step, chunk}`, the
    /// harness's record of a streamed response (not part of the history;
    /// the `assistant/message` that follows is).
    pub const ASSISTANT_CHUNK: &str = "assistant/chunk";

    /// A compaction begins: `{compactionId, turn}` (`turn` null for one
    /// made between turns). Until its `compaction/end`, no other starts.
    pub const COMPACTION_START: &str = "compaction/start";
    /// A compaction's summary: `{compactionId, summary: [BLOCK], shadowedRange:
    /// {start, end}, shadowedSeqs, shadowedTokenCount, provider, model,
    /// maxTokens?, usage?}`; the replacement `user/message` follows it.
    pub const COMPACTION_SUMMARY: &str = "compaction/summary";
    /// A compaction ends: `{compactionId, turn, error?}` (`error` when it
    /// failed and the history was left as it was).
    pub const COMPACTION_END: &str = "compaction/end";

    /// Every core type.
    pub const ALL: [&str; 12] = [
        TURN_START,
        TURN_END,
        STEP_START,
        STEP_END,
        USER_MESSAGE,
        ASSISTANT_MESSAGE,
        TOOL_CALL,
        TOOL_RESULT,
        ASSISTANT_CHUNK,
        COMPACTION_START,
        COMPACTION_SUMMARY,
        COMPACTION_END,
    ];

    /// Whether `t` is a core type.
    pub fn is_core(t: &str) -> bool {
        ALL.contains(&t)
    }

    /// Core types that may only be appended inside an open turn.
    pub fn needs_turn(t: &str) -> bool {
        matches!(t, STEP_START | STEP_END | ASSISTANT_MESSAGE | ASSISTANT_CHUNK | TOOL_CALL | TOOL_RESULT | TURN_END)
    }

    /// Core types that are surface events (yield an LLM message).
    pub fn is_surface(t: &str) -> bool {
        matches!(t, USER_MESSAGE | ASSISTANT_MESSAGE | TOOL_RESULT)
    }
}

/// The header line of a session file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// Always `session`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Format version; 0.
    pub version: u64,
    /// The session id.
    pub id: String,
    /// Creation time, ms since the epoch.
    #[serde(rename = "createdAt", default)]
    pub created_at: u64,
    /// The working folder of the session, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Other header keys, kept as they were.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Header {
    /// A header for a new session, with the fields the harness requires
    /// on disk (`delegationDepth` 0: a top-level session), so that every
    /// log we write loads in the harness too.
    pub fn new(id: &str, cwd: Option<String>) -> Header {
        let mut extra = Map::new();
        extra.insert("delegationDepth".into(), Value::from(0));
        Header { kind: "session".into(), version: 0, id: id.to_string(), created_at: u64::try_from(now_ms()).unwrap_or(0), cwd, extra }
    }
}

/// One event of a session log.
#[derive(Debug, Clone)]
pub struct Event {
    /// Position in the log, from 0.
    pub seq: u64,
    /// Append time, ms since the epoch (negative before it).
    pub time: i64,
    /// The event type, e.g. `tool/call`, `todo/write`.
    pub kind: String,
    /// The event's data, byte for byte as written.
    pub data: RawJson,
    /// How a surface event enters the model's history: `append`, or
    /// `{"op":"replace","start","end"}` (compaction replacing a range).
    pub surface_op: Option<SurfaceOp>,
    /// Seqs of the events a surface event was built from (imported logs).
    pub source_event_seqs: Option<Vec<u64>>,
}

impl Event {
    /// The envelope as one JSON line, with the trailing newline.
    pub fn to_line(&self) -> String {
        let mut line = String::with_capacity(self.data.get().len() + self.kind.len() + 64);
        let _ = write!(line, "{{\"seq\":{},\"time\":{},\"type\":", self.seq, self.time);
        push_json_str(&mut line, &self.kind);
        line.push_str(",\"data\":");
        line.push_str(self.data.get());
        if let Some(seqs) = &self.source_event_seqs {
            line.push_str(",\"sourceEventSeqs\":[");
            for (i, s) in seqs.iter().enumerate() {
                if i > 0 {
                    line.push(',');
                }
                let _ = write!(line, "{s}");
            }
            line.push(']');
        }
        if let Some(op) = &self.surface_op {
            line.push_str(",\"surfaceOp\":");
            match op {
                SurfaceOp::Append => line.push_str("\"append\""),
                SurfaceOp::Replace { start, end } => {
                    let _ = write!(line, "{{\"op\":\"replace\",\"start\":{start},\"end\":{end}}}");
                }
                SurfaceOp::Other(raw) => line.push_str(raw.get()),
            }
        }
        line.push_str("}\n");
        line
    }

    /// The data parsed as a JSON value; `Value::Null` when it cannot be
    /// read into one (see [`RawJson::to_value`]).
    pub fn data_value(&self) -> Value {
        self.data.to_value().unwrap_or(Value::Null)
    }
}

/// How a surface event enters the model's history (the harness's
/// `surfaceOp`).
#[derive(Debug, Clone)]
pub enum SurfaceOp {
    /// `"append"`: the event's message goes at the end of the history.
    Append,
    /// `{"op":"replace","start":S,"end":E}`: the event's message takes the
    /// place of the history's messages from the event with seq `S` to the
    /// one with seq `E` (both in the history, `S` not after `E`), as
    /// compaction records a summary or a shortened tool result.
    Replace {
        /// Seq of the first event replaced.
        start: u64,
        /// Seq of the last event replaced.
        end: u64,
    },
    /// Any other value, kept as written; the event is left out of the
    /// history (and reported).
    Other(Box<RawValue>),
}

impl SurfaceOp {
    /// Reads a `surfaceOp` value: `"append"`, or an object with exactly
    /// `op: "replace"` and whole-number `start` and `end` (the harness's
    /// shape); anything else is [`SurfaceOp::Other`].
    pub fn from_raw(raw: Box<RawValue>) -> SurfaceOp {
        // The form every writer uses, known without parsing it.
        if raw.get() == "\"append\"" {
            return SurfaceOp::Append;
        }
        match serde_json::from_str::<Value>(raw.get()) {
            Ok(Value::String(s)) if s == "append" => SurfaceOp::Append,
            Ok(Value::Object(map)) if map.len() == 3 && map.get("op").and_then(Value::as_str) == Some("replace") => {
                match (map.get("start").and_then(Value::as_u64), map.get("end").and_then(Value::as_u64)) {
                    (Some(start), Some(end)) => SurfaceOp::Replace { start, end },
                    _ => SurfaceOp::Other(raw),
                }
            }
            _ => SurfaceOp::Other(raw),
        }
    }

    /// Whether this is `append`.
    pub fn is_append(&self) -> bool {
        matches!(self, SurfaceOp::Append)
    }
}

fn push_json_str(out: &mut String, s: &str) {
    match serde_json::to_string(s) {
        Ok(q) => out.push_str(&q),
        Err(_) => out.push_str("\"\""),
    }
}

/// An event line as read, before `seq`/`time` defaults are filled in.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Envelope {
    /// `seq`, when the line has one.
    pub seq: Option<u64>,
    /// `time`, when the line has one.
    pub time: Option<i64>,
    /// The event type.
    #[serde(rename = "type")]
    pub kind: String,
    /// The data.
    pub data: Option<Box<RawValue>>,
    /// Surface marker: `"append"` or a replace object (see [`SurfaceOp`]).
    #[serde(rename = "surfaceOp")]
    pub surface_op: Option<Box<RawValue>>,
    /// Source seqs of a surface event.
    #[serde(rename = "sourceEventSeqs")]
    pub source_event_seqs: Option<Vec<u64>>,
    /// First seq of a packed chunk row.
    pub seq0: Option<u64>,
    /// First time of a packed chunk row.
    pub time0: Option<i64>,
}

/// Milliseconds since the Unix epoch, negative for a clock set before it.
pub fn now_ms() -> i64 {
    let now = SystemTime::now();
    match now.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_millis()).unwrap_or(i64::MAX),
        Err(before) => i64::try_from(before.duration().as_millis()).map_or(i64::MIN, |ms| -ms),
    }
}

/// The JSON `null` as event data.
pub fn raw_null() -> RawJson {
    RawJson::null()
}

/// Formats a time in ms since the Unix epoch (negative: before it) as
/// `YYYY-MM-DD HH:MM:SS UTC`, in the proleptic Gregorian calendar. Takes an
/// event's `i64` time and a header's `u64` creation time alike; never
/// panics, whatever the value.
pub fn format_utc(ms: impl Into<i128>) -> String {
    let secs = ms.into().div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil-from-days, after Howard Hinnant's algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i128::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Encodes `value` as event data (`null` when it cannot be encoded).
pub fn to_raw(value: &impl Serialize) -> RawJson {
    RawJson::encode(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_round_trips_data_bytes() {
        let data = RawValue::from_string("{\"a\": [1, 2],  \"b\":\"\\u2028\"}".into()).unwrap();
        let e = Event {
            seq: 3,
            time: 7,
            kind: "x/y".into(),
            data: data.into(),
            surface_op: Some(SurfaceOp::Append),
            source_event_seqs: Some(vec![1, 2]),
        };
        let line = e.to_line();
        assert_eq!(
            line,
            "{\"seq\":3,\"time\":7,\"type\":\"x/y\",\"data\":{\"a\": [1, 2],  \"b\":\"\\u2028\"},\"sourceEventSeqs\":[1,2],\"surfaceOp\":\"append\"}\n"
        );
        let back: Envelope = serde_json::from_str(line.trim_end()).unwrap();
        assert_eq!(back.data.unwrap().get(), e.data.get());
    }

    #[test]
    fn surface_ops_read_and_write_back() {
        let op = |t: &str| SurfaceOp::from_raw(RawValue::from_string(t.into()).unwrap());
        assert!(op("\"append\"").is_append());
        assert!(matches!(op(r#"{"op": "replace", "start": 3, "end": 3}"#), SurfaceOp::Replace { start: 3, end: 3 }));
        assert!(matches!(op(r#"{"op":"replace","startSeq":1,"endSeq":2}"#), SurfaceOp::Other(_)));
        assert!(matches!(op(r#"{"op":"replace","start":1,"end":2,"x":0}"#), SurfaceOp::Other(_)));
        assert!(matches!(op("7"), SurfaceOp::Other(_)));
        let e = Event {
            seq: 5,
            time: 1,
            kind: "tool/result".into(),
            data: RawJson::parse("{}").unwrap(),
            surface_op: Some(SurfaceOp::Replace { start: 3, end: 3 }),
            source_event_seqs: Some(vec![3]),
        };
        assert!(e.to_line().ends_with(
            r#""sourceEventSeqs":[3],"surfaceOp":{"op":"replace","start":3,"end":3}}
"#
        ));
    }
}
