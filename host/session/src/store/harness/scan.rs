//! Reading a harness log's lines by the harness's own rules
//! (`@deepseek-ai/dsh-session-persistence-jsonl` 0.1.0-rc.8):
//!
//! - line 1 is the header, which must carry `type: "session"`, `version` 0,
//!   string `id`, whole-number `createdAt` and `delegationDepth` (not
//!   negative), `origin` absent or `"subagent"`, `agentPreset` absent or a
//!   string;
//! - every later line is one event or one packed chunk row, and the
//!   expanded events' `seq` must run 0, 1, 2, ... with no gap;
//! - the first line that cannot be read (or breaks the `seq` run) ends the
//!   log there, unless a later line holds a `turn/end`: a defect inside
//!   the committed part refuses the whole log;
//! - a last line without its newline is a torn write and is not read.
//!
//! A lone UTF-16 surrogate escape, which the harness's `JSON.parse` reads
//! into its string as it is, is read here as U+FFFD (see
//! [`replace_lone_surrogates`]); each line that had one gets a note.

use serde_json::{Map, Value};

use crate::event::{raw_null, to_raw, Envelope, Event, Header, RawJson, SurfaceOp};
use crate::json::{replace_lone_surrogates, SurrogateRepair};
use crate::packed;

/// The lines read so far, and where the good part ends.
#[derive(Debug)]
pub struct Scanner {
    header: Header,
    /// Events read before this scanner started (a scan resumed after them).
    base: usize,
    events: Vec<Event>,
    /// Logical line (1 = header) of each event.
    lines: Vec<usize>,
    line: usize,
    /// Bytes given so far (header record included).
    input: usize,
    /// Bytes through the last line accepted.
    committed: usize,
    /// A line that could not be read, with what was wrong.
    issue: Option<(usize, String)>,
    /// Notes on lines read: `(line, what)`.
    notes: Vec<(usize, String)>,
    fragment: Vec<u8>,
}

/// What a [`Scanner`] read.
#[derive(Debug)]
pub struct Scanned {
    /// The header.
    pub header: Header,
    /// The events of the good part.
    pub events: Vec<Event>,
    /// Logical line of each event.
    pub lines: Vec<usize>,
    /// Bytes (of the logical text) through the last line accepted.
    pub committed: usize,
    /// Bytes given in all.
    pub input: usize,
    /// The first line not read, when the log was cut there.
    pub issue: Option<(usize, String)>,
    /// Notes on lines of the good part, `(line, what)`: a lone surrogate
    /// escape read as U+FFFD.
    pub notes: Vec<(usize, String)>,
    /// The number of the last complete line given (1 = the header).
    pub line: usize,
}

/// Parses the header record (one line with its newline).
///
/// # Errors
/// What is wrong with it.
pub fn parse_header(record: &[u8]) -> Result<Header, String> {
    parse_header_repaired(record).map(|(header, _)| header)
}

/// [`parse_header`], and the lone surrogate escapes it read as U+FFFD.
fn parse_header_repaired(record: &[u8]) -> Result<(Header, Option<SurrogateRepair>), String> {
    let Some(text) = record.strip_suffix(b"\n").filter(|t| !t.contains(&b'\n')) else {
        return Err("the log is empty or has no header line".into());
    };
    let text = std::str::from_utf8(text).map_err(|_| "the header line is not JSON")?;
    let repair = replace_lone_surrogates(text);
    let value: Value = serde_json::from_str(repair.as_ref().map_or(text, |r| r.text.as_str())).map_err(|_| "the header line is not JSON")?;
    let Value::Object(map) = &value else { return Err("the header line is not a JSON object".into()) };
    if let Some(v) = map.get("version").and_then(Value::as_u64).filter(|&v| v != 0) {
        return Err(format!("format version {v} is not supported (this host reads version 0)"));
    }
    let whole = |key: &str| map.get(key).and_then(Value::as_u64).filter(|&n| n < (1u64 << 53));
    let problem = if map.get("type").and_then(Value::as_str) != Some("session") {
        Some("`type` is not `session`")
    } else if !map.get("version").is_some_and(Value::is_number) {
        Some("`version` is missing")
    } else if !map.get("id").is_some_and(Value::is_string) {
        Some("`id` is missing or not a string")
    } else if whole("createdAt").is_none() {
        Some("`createdAt` is missing or not a whole number of ms")
    } else if whole("delegationDepth").is_none() {
        Some("`delegationDepth` is missing or not a whole number (the harness requires it on disk)")
    } else if map.get("origin").is_some_and(|o| o != "subagent") {
        Some("`origin` is neither absent nor `subagent`")
    } else if map.get("agentPreset").is_some_and(|p| !p.is_string()) {
        Some("`agentPreset` is not a string")
    } else {
        None
    };
    if let Some(problem) = problem {
        return Err(format!("the first line is not a session header: {problem}"));
    }
    let header = serde_json::from_value(value).map_err(|e| format!("the first line is not a session header: {e}"))?;
    Ok((header, repair))
}

impl Scanner {
    /// A scanner after the header record.
    ///
    /// # Errors
    /// As [`parse_header`].
    pub fn new(header_record: &[u8]) -> Result<Scanner, String> {
        let (header, repair) = parse_header_repaired(header_record)?;
        Ok(Scanner {
            header,
            base: 0,
            events: Vec::new(),
            lines: Vec::new(),
            line: 1,
            input: header_record.len(),
            committed: header_record.len(),
            issue: None,
            notes: repair.iter().map(|r| (1, r.describe())).collect(),
            fragment: Vec::new(),
        })
    }

    /// A scanner resuming a log of `header` after `events` events, the last
    /// complete line read being `line`: the lines given next are numbered
    /// from `line + 1`, their events' `seq` must run from `events`, and
    /// its offsets count from the resumed point.
    pub fn resume(header: Header, line: usize, events: usize) -> Scanner {
        Scanner {
            header,
            base: events,
            events: Vec::new(),
            lines: Vec::new(),
            line,
            input: 0,
            committed: 0,
            issue: None,
            notes: Vec::new(),
            fragment: Vec::new(),
        }
    }

    /// Reads the next bytes of the logical text, keeping an incomplete last
    /// line for later.
    ///
    /// # Errors
    /// The log must be refused: a defect before a committed `turn/end`.
    pub fn write(&mut self, chunk: &[u8]) -> Result<(), String> {
        let chunk_start = self.input;
        self.input += chunk.len();
        let mut start = 0;
        while let Some(n) = chunk[start..].iter().position(|&b| b == b'\n') {
            let end = start + n;
            if self.fragment.is_empty() {
                self.line(&chunk[start..end], chunk_start + end + 1)?;
            } else {
                let mut whole = std::mem::take(&mut self.fragment);
                whole.extend_from_slice(&chunk[start..end]);
                self.line(&whole, chunk_start + end + 1)?;
            }
            start = end + 1;
        }
        self.fragment.extend_from_slice(&chunk[start..]);
        Ok(())
    }

    /// `(bytes given, bytes accepted, events)` so far.
    pub fn checkpoint(&self) -> (usize, usize, usize) {
        (self.input, self.committed, self.events.len())
    }

    /// The result; an incomplete last line is left out.
    pub fn finish(self) -> Scanned {
        Scanned {
            header: self.header,
            events: self.events,
            lines: self.lines,
            committed: self.committed,
            input: self.input,
            issue: self.issue,
            notes: self.notes,
            line: self.line,
        }
    }

    fn line(&mut self, raw: &[u8], end: usize) -> Result<(), String> {
        self.line += 1;
        let line = self.line;
        let (decoded, repair) = match decode_row(raw, (self.base + self.events.len()) as u64) {
            Ok(decoded) => decoded,
            Err(why) => {
                self.issue.get_or_insert((line, why));
                return Ok(());
            }
        };
        let closes_turn = decoded.iter().any(|e| e.kind == "turn/end");
        if let Some((at, why)) = &self.issue {
            if closes_turn {
                return Err(format!("line {at}: {why}, before the committed turn/end on line {line}"));
            }
            return Ok(());
        }
        let row_start = self.events.len();
        for event in decoded {
            let expected = (self.base + self.events.len()) as u64;
            if event.seq != expected {
                self.events.truncate(row_start);
                self.lines.truncate(row_start);
                let why = format!("seq {} where {expected} was due (a gap)", event.seq);
                if closes_turn {
                    return Err(format!("line {line}: {why}"));
                }
                self.issue = Some((line, why));
                return Ok(());
            }
            self.events.push(event);
            self.lines.push(line);
        }
        if let Some(repair) = repair {
            self.notes.push((line, repair.describe()));
        }
        self.committed = end;
        Ok(())
    }
}

/// One stored line as events (an event, or a packed chunk row expanded),
/// and the lone surrogate escapes read as U+FFFD.
fn decode_row(raw: &[u8], position: u64) -> Result<(Vec<Event>, Option<SurrogateRepair>), String> {
    let text = std::str::from_utf8(raw).map_err(|_| "the line is not UTF-8".to_string())?;
    let repair = replace_lone_surrogates(text);
    let text = repair.as_ref().map_or(text, |r| r.text.as_str());
    let env: Envelope = serde_json::from_str(text).map_err(|e| format!("the line is not an event: {e}"))?;
    if packed::is_packed(&env.kind) {
        let data = env.data.as_ref().map_or("null", |d| d.get());
        return Ok((packed::expand(&env.kind, data, env.seq0, env.time0, position)?, repair));
    }
    let seq = env.seq.ok_or("the event has no `seq`")?;
    let event = Event {
        seq,
        time: env.time.unwrap_or(0),
        kind: env.kind,
        data: env.data.map_or_else(raw_null, RawJson::from),
        surface_op: env.surface_op.map(SurfaceOp::from_raw),
        source_event_seqs: env.source_event_seqs,
    };
    Ok((vec![event], repair))
}

/// The events the harness adds to close a turn a crash left open, in its
/// order: a `tool/result` (an error) for each call of the open step without
/// one, then `step/end` for an open step, then `turn/end` with reason
/// `interrupted`; each with the next seq and the last event's time. Empty
/// when no turn is open. Shapes from `interruptedTurnClosers` of
/// `@deepseek-ai/dsh-session` 0.1.0-rc.8; the result texts are ours.
pub fn interrupted_closers(events: &[Event]) -> Vec<Event> {
    let mut turn: Option<Value> = None;
    let mut step: Option<Value> = None;
    // (call id, its step, the seq of its `tool/call` once started)
    let mut pending: Vec<(String, Value, Option<u64>)> = Vec::new();
    // Every `turn/start` and `turn/end` resets the whole state, so reading
    // from the last of them gives the same closers; with none, or a last
    // `turn/end`, no turn is open.
    let Some(from) = events.iter().rposition(|e| e.kind == "turn/start" || e.kind == "turn/end") else { return Vec::new() };
    for e in &events[from..] {
        let interesting =
            matches!(e.kind.as_str(), "turn/start" | "turn/end" | "step/start" | "step/end" | "assistant/message" | "tool/call" | "tool/result");
        if !interesting {
            continue;
        }
        let data: Value = serde_json::from_str(e.data.get()).unwrap_or(Value::Null);
        match e.kind.as_str() {
            "turn/start" => {
                turn = Some(data["turn"].clone());
                step = None;
                pending.clear();
            }
            "turn/end" => {
                turn = None;
                step = None;
                pending.clear();
            }
            "step/start" => step = Some(data["step"].clone()),
            "step/end" => {
                pending.clear();
                step = None;
            }
            "assistant/message" => {
                for block in data["message"]["content"].as_array().into_iter().flatten() {
                    if block["type"] == "tool-call" {
                        if let Some(id) = block["id"].as_str() {
                            pending.retain(|(c, _, _)| c != id);
                            pending.push((id.to_string(), data["step"].clone(), None));
                        }
                    }
                }
            }
            "tool/call" => {
                if let Some(entry) = pending.iter_mut().find(|(c, _, _)| Some(c.as_str()) == data["callId"].as_str()) {
                    entry.2 = Some(e.seq);
                }
            }
            _ => {
                let id = data["message"]["source"]["callId"].as_str().unwrap_or_default().to_string();
                pending.retain(|(c, _, _)| *c != id);
            }
        }
    }
    let (Some(turn), Some(last)) = (turn, events.last()) else { return Vec::new() };
    let mut seq = last.seq + 1;
    let time = last.time;
    let mut out = Vec::new();
    let mut push = |kind: &str, data: Value, surface: bool, sources: Option<Vec<u64>>, seq: &mut u64| {
        out.push(Event {
            seq: *seq,
            time,
            kind: kind.into(),
            data: to_raw(&data),
            surface_op: surface.then_some(SurfaceOp::Append),
            source_event_seqs: sources,
        });
        *seq += 1;
    };
    for (call_id, call_step, call_seq) in pending {
        let (text, name, code) = match call_seq {
            Some(_) => (
                "The call was cut off after it started and no result was saved, so whether it took effect is unknown. Repeat it only if it is read-only or safe to run twice; otherwise check the state first or ask the user.",
                "ToolOutcomeUnknownError",
                "TOOL_OUTCOME_UNKNOWN",
            ),
            None => (
                "The call was cut off before it started. Call it again if it is still needed.",
                "ToolNotStartedError",
                "TOOL_NOT_STARTED",
            ),
        };
        let mut message = Map::new();
        message.insert("id".into(), Value::String(format!("interrupted-tool-result-{call_id}-{seq}")));
        message.insert("role".into(), "user".into());
        message.insert("source".into(), serde_json::json!({"kind": "tool", "callId": call_id}));
        message.insert(
            "content".into(),
            serde_json::json!([{"type": "tool-result", "toolCallId": call_id, "isError": true, "content": [{"type": "text", "text": text}]}]),
        );
        let data = serde_json::json!({"turn": turn, "step": call_step, "message": message, "error": {"name": name, "code": code}});
        push("tool/result", data, true, call_seq.map(|s| vec![s]), &mut seq);
    }
    if let Some(step) = step {
        push("step/end", serde_json::json!({"turn": turn, "step": step}), false, None, &mut seq);
    }
    push("turn/end", serde_json::json!({"turn": turn, "reason": {"kind": "interrupted"}}), false, None, &mut seq);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &[u8] = b"{\"type\":\"session\",\"version\":0,\"id\":\"s\",\"createdAt\":1,\"delegationDepth\":0}\n";

    fn scan(body: &str) -> Result<Scanned, String> {
        let mut s = Scanner::new(HEADER)?;
        s.write(body.as_bytes())?;
        Ok(s.finish())
    }

    #[test]
    fn headers_need_the_fields_the_harness_checks() {
        assert!(parse_header(HEADER).is_ok());
        let without = b"{\"type\":\"session\",\"version\":0,\"id\":\"s\",\"createdAt\":1}\n";
        assert!(parse_header(without).unwrap_err().contains("delegationDepth"));
        let v1 = b"{\"type\":\"session\",\"version\":1,\"id\":\"s\",\"createdAt\":1,\"delegationDepth\":0}\n";
        assert!(parse_header(v1).unwrap_err().contains("version 1"));
    }

    #[test]
    fn a_bad_line_cuts_the_tail_or_refuses_before_a_turn_end() {
        let good = "{\"type\":\"turn/start\",\"seq\":0,\"time\":1,\"data\":{\"turn\":1}}\n";
        let bad = "{not json\n";
        let end = "{\"type\":\"turn/end\",\"seq\":2,\"time\":1,\"data\":{\"turn\":1,\"reason\":{\"kind\":\"completed\"}}}\n";
        let cut = scan(&format!("{good}{bad}")).unwrap();
        assert_eq!(cut.events.len(), 1);
        assert_eq!(cut.issue.as_ref().map(|i| i.0), Some(3));
        assert_eq!(cut.committed, HEADER.len() + good.len());
        assert!(scan(&format!("{good}{bad}{end}")).unwrap_err().contains("line 3"));
        let torn = scan(&format!("{good}{{\"type\":\"tu")).unwrap();
        assert_eq!(torn.events.len(), 1);
        assert!(torn.issue.is_none());
        assert_eq!(torn.committed, HEADER.len() + good.len());
    }

    #[test]
    fn negative_times_and_gaps_are_read_as_the_harness_reads_them() {
        let body = concat!(
            "{\"type\":\"turn/start\",\"seq\":0,\"time\":-960585284,\"data\":{\"turn\":1}}\n",
            "{\"type\":\"text-chunks\",\"seq0\":1,\"time0\":1700000000100,\"data\":{\"turn\":1,\"step\":1,\"index\":0,\"dt\":[-2378304174,28],\"texts\":[\"a\",\"b\",\"c\"]}}\n",
            "{\"type\":\"turn/end\",\"seq\":4,\"time\":-1,\"data\":{\"turn\":1,\"reason\":{\"kind\":\"completed\"}}}\n",
        );
        let read = scan(body).unwrap();
        assert!(read.issue.is_none(), "{:?}", read.issue);
        let times: Vec<i64> = read.events.iter().map(|e| e.time).collect();
        assert_eq!(times, [-960_585_284, 1_700_000_000_100, 1_697_621_695_926, 1_697_621_695_954, -1]);
        assert_eq!(read.committed, HEADER.len() + body.len());
    }

    #[test]
    fn lone_surrogates_are_read_as_the_replacement_character_and_noted() {
        let header = b"{\"type\":\"session\",\"version\":0,\"id\":\"s\",\"createdAt\":1,\"delegationDepth\":0,\"title\":\"\\ud83e\"}\n";
        let mut s = Scanner::new(header).unwrap();
        let body = concat!(
            "{\"type\":\"turn/start\",\"seq\":0,\"time\":1,\"data\":{\"turn\":1}}\n",
            "{\"type\":\"user/message\",\"seq\":1,\"time\":1,\"data\":{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"half \\ud83e here\"}]},\"surfaceOp\":\"append\"}\n",
            "{\"type\":\"user/message\",\"seq\":2,\"time\":1,\"data\":{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"pair \\ud83e\\udd14\"}]},\"surfaceOp\":\"append\"}\n",
            // After a gap: not read, so not noted.
            "{\"type\":\"x\",\"seq\":9,\"time\":1,\"data\":\"\\udd14\"}\n",
        );
        s.write(body.as_bytes()).unwrap();
        let read = s.finish();
        assert_eq!(read.events.len(), 3);
        assert_eq!(read.events[1].data.get(), r#"{"role":"user","content":[{"type":"text","text":"half \ufffd here"}]}"#);
        assert!(read.events[2].data.get().contains(r"\ud83e\udd14"));
        assert_eq!(read.header.extra["title"], "\u{FFFD}");
        assert_eq!(read.notes.iter().map(|n| n.0).collect::<Vec<_>>(), [1, 3]);
        assert!(read.notes[1].1.contains(r"`\ud83e`"), "{}", read.notes[1].1);
        assert_eq!(read.issue.as_ref().map(|i| i.0), Some(5));
    }

    #[test]
    fn closers_answer_open_calls_then_close_step_and_turn() {
        let e = |seq: u64, kind: &str, data: &str| Event {
            seq,
            time: 5,
            kind: kind.into(),
            data: RawJson::parse(data).unwrap(),
            surface_op: None,
            source_event_seqs: None,
        };
        let events = [
            e(0, "turn/start", r#"{"turn":1}"#),
            e(1, "step/start", r#"{"turn":1,"step":1}"#),
            e(2, "assistant/message", r#"{"turn":1,"step":1,"message":{"content":[{"type":"tool-call","id":"a"},{"type":"tool-call","id":"b"}]}}"#),
            e(3, "tool/call", r#"{"turn":1,"step":1,"callId":"a"}"#),
        ];
        let closers = interrupted_closers(&events);
        let kinds: Vec<&str> = closers.iter().map(|c| c.kind.as_str()).collect();
        assert_eq!(kinds, ["tool/result", "tool/result", "step/end", "turn/end"]);
        assert_eq!(closers.iter().map(|c| c.seq).collect::<Vec<_>>(), [4, 5, 6, 7]);
        assert!(closers[0].data.get().contains("TOOL_OUTCOME_UNKNOWN"));
        assert_eq!(closers[0].source_event_seqs, Some(vec![3]));
        assert!(closers[1].data.get().contains("TOOL_NOT_STARTED"));
        assert!(closers.iter().all(|c| c.time == 5));
        assert!(interrupted_closers(&events[..0]).is_empty());
    }
}
